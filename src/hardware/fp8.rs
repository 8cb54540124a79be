//! How FP8 GEMMs perform relative to BF16 ones, from measured kernels.
//!
//! A BF16 profile carried to FP8 (no FP8 profile was fitted) must not assume FP8 doubles the GEMM rate:
//! vLLM's per-tensor FP8 GEMMs on H100 reach about 1,050–1,140 TFLOPS at compute-bound sizes, against
//! BF16's 740–830 (a 1.3–1.5× speedup, not 2×), and at a few tokens they take 0.63–0.74 of BF16's time
//! (not half), as AIConfigurator's kernel database shows. The factors below are computed from that data
//! (`data/calibration/aiconfigurator/fp8_vs_bf16_gemm.csv`, compiled in), per GPU where measured; other GPUs
//! with FP8 tensor cores use the H100's.

use std::sync::OnceLock;

use super::gpu::GpuId;

const DATA: &str = include_str!("../../data/calibration/aiconfigurator/fp8_vs_bf16_gemm.csv");

/// FP8 GEMM efficiency relative to BF16's: `(compute, memory)`, each the FP8 fraction of its peak
/// (FP8 tensor peak; bandwidth) divided by the BF16 fraction of its own.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fp8Factors {
    /// At compute-bound sizes (m ≥ 1,024 tokens): (t_bf16 / t_fp8) / 2, FP8's peak being twice BF16's.
    pub compute: f64,
    /// At weight-streaming sizes (m ≤ 16 tokens): (t_bf16 / t_fp8) / 2, FP8 moving half the bytes.
    pub memory: f64,
}

fn measured() -> &'static [(GpuId, Fp8Factors)] {
    static FACTORS: OnceLock<Vec<(GpuId, Fp8Factors)>> = OnceLock::new();
    FACTORS.get_or_init(|| {
        let mut out = Vec::new();
        for gpu in [GpuId::H100, GpuId::H200] {
            let (mut compute, mut memory) = (Vec::new(), Vec::new());
            for line in DATA.lines().skip(1) {
                let f: Vec<&str> = line.split(',').collect();
                if f.len() != 6 || f[0] != gpu.as_str() {
                    continue;
                }
                let m: u64 = f[1].parse().expect("compiled-in data: m");
                let bf16: f64 = f[4].parse().expect("compiled-in data: bf16_us");
                let fp8: f64 = f[5].parse().expect("compiled-in data: fp8_us");
                let ratio = bf16 / fp8 / 2.0;
                if m >= 1024 {
                    compute.push(ratio);
                } else if m <= 16 {
                    memory.push(ratio);
                }
            }
            let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
            out.push((
                gpu,
                Fp8Factors {
                    compute: mean(&compute),
                    memory: mean(&memory),
                },
            ));
        }
        out
    })
}

/// The factors for `gpu`: measured for H100 and H200, the H100's for other GPUs with FP8 tensor cores, and
/// `None` for GPUs without them (FP8 weights then run weight-only at the BF16 rate: only the bytes halve).
pub fn factors(gpu: GpuId) -> Option<Fp8Factors> {
    gpu.spec().fp8_flops?;
    let table = measured();
    table
        .iter()
        .find(|(g, _)| *g == gpu)
        .or_else(|| table.iter().find(|(g, _)| *g == GpuId::H100))
        .map(|(_, f)| *f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fp8_gemms_are_faster_but_far_from_twice() {
        for gpu in [GpuId::H100, GpuId::H200] {
            let f = factors(gpu).unwrap();
            // Speedups 2·factor: between 1.2× and 1.7× at both ends.
            assert!((0.6..0.85).contains(&f.compute), "{gpu:?} {f:?}");
            assert!((0.6..0.85).contains(&f.memory), "{gpu:?} {f:?}");
        }
        assert_eq!(factors(GpuId::B200), factors(GpuId::H100));
        assert_eq!(factors(GpuId::A100), None);
    }
}
