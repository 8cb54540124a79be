//! Hardware: the GPU and model catalogues, the step-time model built on them, and its calibrated profiles.

pub mod fp8;
pub mod gpu;
pub mod model;
pub mod perf;
pub mod profile;

pub use gpu::{GpuId, GpuSpec};
pub use model::{ModelId, ModelSpec};
pub use perf::{Efficiency, PerfModel, Precision, StepShape};
pub use profile::{Profile, ProfileKey, Provenance};
