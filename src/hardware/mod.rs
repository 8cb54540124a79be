//! Hardware: the GPU and model catalogues, the step-time model built on them, and its calibrated profiles.

pub mod fp8;
pub mod gpu;
pub mod memory;
pub mod mig;
pub mod model;
pub mod perf;
pub mod power;
pub mod price;
pub mod profile;

pub use gpu::{GpuId, GpuSpec};
pub use model::{ModelId, ModelSpec};
pub use perf::{Efficiency, PerfModel, Precision, StepShape};
pub use profile::{Profile, ProfileKey, Provenance};

/// Whether `gpu` can run `precision`: FP8 needs FP8 tensor cores, which the A100 generation lacks (its
/// catalogue entry has no FP8 peak). A run of FP8 on such a GPU would be a configuration nobody can
/// deploy as modelled, so it is refused rather than simulated.
pub fn check_precision(gpu: GpuId, precision: Precision) -> Result<(), String> {
    match precision {
        Precision::Fp8 if gpu.spec().fp8_flops.is_none() => {
            let with: Vec<&str> = GpuId::ALL
                .iter()
                .filter(|g| g.spec().fp8_flops.is_some())
                .map(|g| g.as_str())
                .collect();
            Err(format!(
                "{} has no FP8 tensor cores, so precision fp8 cannot run on it; use bf16, or a GPU with FP8 ({})",
                gpu.as_str(),
                with.join(", ")
            ))
        }
        _ => Ok(()),
    }
}
