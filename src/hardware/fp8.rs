//! How FP8 GEMMs perform relative to BF16 ones, from measured kernels.
//!
//! A BF16 profile carried to FP8 (no FP8 profile was fitted) must not assume FP8 doubles the GEMM rate:
//! vLLM's per-tensor FP8 GEMMs on H100 reach about 1,050–1,140 TFLOPS at compute-bound sizes, against
//! BF16's 740–830 (a 1.3–1.5× speedup, not 2×), as AIConfigurator's kernel database shows. The factors
//! below are computed from that data (`data/calibration/aiconfigurator/fp8_vs_bf16_gemm.csv`, compiled in),
//! per GPU where measured; other GPUs with FP8 tensor cores use the H100's.
//!
//! At weight-streaming sizes (m ≤ 16 tokens) each kernel's time is a fixed launch-and-tail latency plus its
//! weight bytes over an effective bandwidth. A least-squares line `t = t0 + bytes / BW` through those rows
//! separates the two: BF16 streams at 0.90 (H100) and 0.87 (H200) of peak HBM bandwidth, FP8 at 0.75 and
//! 0.71, with t0 ≈ 4.4–5.6 µs for both. The memory factor is the ratio of the two asymptotic bandwidths
//! (about 0.82), not the mean of the per-kernel time ratios (about 0.65), which counts FP8's fixed latency
//! (unchanged when the bytes halve) as if it were lost bandwidth: on a 70B model at TP 1, whose per-GPU
//! GEMMs are 8–16× larger than the measured ones, that over-counted the FP8 decode step by ~25%.

use std::sync::OnceLock;

use super::gpu::GpuId;

const DATA: &str = include_str!("../../data/calibration/aiconfigurator/fp8_vs_bf16_gemm.csv");

/// FP8 GEMM efficiency relative to BF16's: `(compute, memory)`, each the FP8 fraction of its peak
/// (FP8 tensor peak; bandwidth) divided by the BF16 fraction of its own.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fp8Factors {
    /// At compute-bound sizes (m ≥ 1,024 tokens): (t_bf16 / t_fp8) / 2, FP8's peak being twice BF16's.
    pub compute: f64,
    /// At weight-streaming sizes (m ≤ 16 tokens): FP8's asymptotic fraction of HBM bandwidth over BF16's,
    /// each from a least-squares fit `t = t0 + weight bytes / BW` over the measured shapes.
    pub memory: f64,
}

fn measured() -> &'static [(GpuId, Fp8Factors)] {
    static FACTORS: OnceLock<Vec<(GpuId, Fp8Factors)>> = OnceLock::new();
    FACTORS.get_or_init(|| {
        let mut out = Vec::new();
        for gpu in [GpuId::H100, GpuId::H200] {
            let mut compute = Vec::new();
            // (weight bytes at BF16, bf16 seconds, fp8 seconds) of the streaming-bound rows.
            let mut streaming = Vec::new();
            for line in DATA.lines().skip(1) {
                let f: Vec<&str> = line.split(',').collect();
                if f.len() != 6 || f[0] != gpu.as_str() {
                    continue;
                }
                let m: u64 = f[1].parse().expect("compiled-in data: m");
                let n: f64 = f[2].parse().expect("compiled-in data: n");
                let k: f64 = f[3].parse().expect("compiled-in data: k");
                let bf16: f64 = f[4].parse().expect("compiled-in data: bf16_us");
                let fp8: f64 = f[5].parse().expect("compiled-in data: fp8_us");
                let ratio = bf16 / fp8 / 2.0;
                if m >= 1024 {
                    compute.push(ratio);
                } else if m <= 16 {
                    streaming.push((2.0 * n * k, bf16 * 1e-6, fp8 * 1e-6));
                }
            }
            let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
            let bf16: Vec<(f64, f64)> = streaming.iter().map(|&(b, t, _)| (b, t)).collect();
            // FP8 moves half the bytes.
            let fp8: Vec<(f64, f64)> = streaming.iter().map(|&(b, _, t)| (b / 2.0, t)).collect();
            out.push((
                gpu,
                Fp8Factors {
                    compute: mean(&compute),
                    memory: streaming_bandwidth(&fp8) / streaming_bandwidth(&bf16),
                },
            ));
        }
        out
    })
}

/// Effective bandwidth, bytes/s: the inverse slope of the least-squares line `t = t0 + bytes / BW` through
/// `(bytes, seconds)` points.
fn streaming_bandwidth(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    sxx / sxy
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
    fn a_line_through_exact_points_gives_back_its_bandwidth() {
        // t = 5 µs + bytes / 2 TB/s.
        let pts: Vec<(f64, f64)> = [1e6, 1e7, 1e8]
            .iter()
            .map(|&b| (b, 5e-6 + b / 2e12))
            .collect();
        assert!((streaming_bandwidth(&pts) / 2e12 - 1.0).abs() < 1e-9);
    }

    #[test]
    fn fp8_gemms_are_faster_but_far_from_twice() {
        for gpu in [GpuId::H100, GpuId::H200] {
            let f = factors(gpu).unwrap();
            // Compute-bound speedup 2·factor between 1.2× and 1.7×; asymptotic streaming efficiency ratio
            // (from the fits in the module docs: 0.75/0.90 on H100, 0.71/0.87 on H200) about 0.82.
            assert!((0.6..0.85).contains(&f.compute), "{gpu:?} {f:?}");
            assert!((0.78..0.86).contains(&f.memory), "{gpu:?} {f:?}");
        }
        assert_eq!(factors(GpuId::B200), factors(GpuId::H100));
        assert_eq!(factors(GpuId::A100), None);
    }
}
