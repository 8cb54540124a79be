//! Published end-to-end measurements that are in none of the calibration data: held out by construction.
//!
//! Each point is predicted by running the configuration through [`crate::estimate`] (so through the same
//! [`crate::engine::Simulation`] a scenario uses), with whatever profile the catalogue resolves for it:
//! calibrated where one was fitted, otherwise borrowed from the nearest fitted configuration and flagged.

use crate::estimate::{EstimateRequest, estimate};
use crate::hardware::{GpuId, ModelId, Precision};

/// What was measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Measure {
    /// Time to first token of one request with `prompt` tokens on an idle server, ms.
    Ttft { prompt: u32 },
    /// Mean time per output token at a fixed concurrency, ms.
    Tpot {
        prompt: u32,
        output: u32,
        concurrency: u32,
    },
    /// Output tokens per second of a saturated server (every request sent at once).
    MaxThroughput { prompt: u32, output: u32 },
}

/// One published measurement.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExternalPoint {
    pub gpu: GpuId,
    pub model: ModelId,
    pub tp: u32,
    pub precision: Precision,
    pub measure: Measure,
    /// The published value (ms, or tokens/s for throughput).
    pub published: f64,
    /// Where it was published.
    pub source: &'static str,
}

const TRT_05: &str =
    "NVIDIA TensorRT-LLM 0.5 performance documentation (2023), batch 1, 2,048-token prompt";
const VLLM_A100_40: &str =
    "vLLM benchmark, Llama-3.1-8B on A100-40GB, concurrency 1, 1,024 in / 128 out";
const TRT_PERF: &str =
    "NVIDIA TensorRT-LLM performance overview, Llama-3.1-8B FP8 TP1, max-load output throughput";

/// The published points the issue names. LLaMA-7B is modelled by the `llama-2-7b` shape (identical) and
/// its FP16 by BF16 (same tensor-core rate on A100).
pub const EXTERNAL: &[ExternalPoint] = {
    use GpuId::{A100, A100_40gb, H100, H200};
    use Measure::{MaxThroughput, Tpot, Ttft};
    use ModelId::{Llama2_7b, Llama31_8b};
    use Precision::{Bf16, Fp8};
    const fn p(
        gpu: GpuId,
        model: ModelId,
        precision: Precision,
        measure: Measure,
        published: f64,
        source: &'static str,
    ) -> ExternalPoint {
        ExternalPoint {
            gpu,
            model,
            tp: 1,
            precision,
            measure,
            published,
            source,
        }
    }
    &[
        p(H100, Llama2_7b, Fp8, Ttft { prompt: 2048 }, 36.0, TRT_05),
        p(A100, Llama2_7b, Bf16, Ttft { prompt: 2048 }, 133.0, TRT_05),
        p(
            A100_40gb,
            Llama31_8b,
            Bf16,
            Tpot {
                prompt: 1024,
                output: 128,
                concurrency: 1,
            },
            13.3,
            VLLM_A100_40,
        ),
        p(
            H100,
            Llama31_8b,
            Fp8,
            MaxThroughput {
                prompt: 1000,
                output: 1000,
            },
            15_220.0,
            TRT_PERF,
        ),
        p(
            H200,
            Llama31_8b,
            Fp8,
            MaxThroughput {
                prompt: 1000,
                output: 1000,
            },
            17_744.0,
            TRT_PERF,
        ),
        p(
            H100,
            Llama31_8b,
            Fp8,
            MaxThroughput {
                prompt: 5000,
                output: 500,
            },
            3_459.0,
            TRT_PERF,
        ),
        p(
            H200,
            Llama31_8b,
            Fp8,
            MaxThroughput {
                prompt: 5000,
                output: 500,
            },
            3_902.0,
            TRT_PERF,
        ),
    ]
};

/// Clients and sequence cap of the saturated runs: TensorRT-LLM's throughput runs use a large maximum batch,
/// so the KV cache, not a sequence cap, bounds the batch.
pub const SATURATION_CLIENTS: u32 = 1024;
/// Requests of a saturated run, per client.
pub const SATURATION_ROUNDS: u32 = 6;

/// A point and its prediction.
#[derive(Clone, Debug)]
pub struct ExternalResult {
    pub point: ExternalPoint,
    pub predicted: f64,
    /// The profile the prediction used, and whether it was fitted for this very configuration.
    pub profile: String,
    pub calibrated: bool,
}

impl ExternalResult {
    /// Relative error, predicted / published − 1.
    pub fn error(&self) -> f64 {
        self.predicted / self.point.published - 1.0
    }
}

impl ExternalPoint {
    /// E.g. `h100 llama-2-7b fp8: TTFT, 2048-token prompt (ms)`.
    pub fn label(&self) -> String {
        let what = match self.measure {
            Measure::Ttft { prompt } => format!("TTFT, {prompt}-token prompt, batch 1 (ms)"),
            Measure::Tpot {
                prompt,
                output,
                concurrency,
            } => {
                format!("TPOT, {prompt} in / {output} out, concurrency {concurrency} (ms)")
            }
            Measure::MaxThroughput { prompt, output } => {
                format!("max output throughput, {prompt} in / {output} out (tokens/s)")
            }
        };
        format!(
            "{} {} tp{} {}: {what}",
            self.gpu.as_str(),
            self.model.as_str(),
            self.tp,
            self.precision.as_str()
        )
    }

    /// Predicts the point with the simulator.
    pub fn predict(&self) -> Result<ExternalResult, String> {
        let (prompt, output, concurrency, requests, max_num_seqs) = match self.measure {
            Measure::Ttft { prompt } => (prompt, 1, None, None, None),
            Measure::Tpot {
                prompt,
                output,
                concurrency,
            } => (
                prompt,
                output,
                Some(concurrency),
                Some(4 * concurrency),
                None,
            ),
            Measure::MaxThroughput { prompt, output } => (
                prompt,
                output,
                Some(SATURATION_CLIENTS),
                Some(SATURATION_CLIENTS * SATURATION_ROUNDS),
                Some(SATURATION_CLIENTS),
            ),
        };
        let e = estimate(&EstimateRequest {
            gpu: self.gpu,
            model: self.model,
            tp: self.tp,
            precision: self.precision,
            prompt,
            output,
            concurrency,
            requests,
            profile: None,
            max_num_seqs,
            // The published points come from engine-level harnesses (TensorRT-LLM's benchmark) or a
            // single client, whose TPOT a frontend's constant delivery delay does not change.
            frontend: crate::workload::FrontendSpec {
                enabled: false,
                ..Default::default()
            },
        })?;
        let predicted = match self.measure {
            Measure::Ttft { .. } => e.ttft_ms.mean,
            Measure::Tpot { .. } => e.tpot_ms.mean,
            Measure::MaxThroughput { .. } => e.output_tokens_per_s,
        };
        Ok(ExternalResult {
            point: *self,
            predicted,
            profile: e.profile,
            calibrated: e.calibrated,
        })
    }
}

/// Predicts every [`EXTERNAL`] point.
pub fn predict_all() -> Result<Vec<ExternalResult>, String> {
    EXTERNAL.iter().map(ExternalPoint::predict).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_the_configuration_and_the_unit() {
        let l = EXTERNAL[0].label();
        assert!(
            l.starts_with("h100 llama-2-7b tp1 fp8: TTFT") && l.ends_with("(ms)"),
            "{l}"
        );
        assert!(EXTERNAL[3].label().ends_with("(tokens/s)"));
    }
}
