//! Published end-to-end measurements that are in none of the calibration data: held out by construction.
//!
//! Each point is predicted by running the configuration through [`crate::estimate`] (so through the same
//! [`crate::engine::Simulation`] a scenario uses), with whatever profile the catalogue resolves for it:
//! calibrated where one was fitted, otherwise borrowed from the nearest fitted configuration and flagged.

use crate::estimate::{EstimateRequest, estimate};
use crate::hardware::{GpuId, ModelId, Precision};

use super::CalibrationError;
use super::catalogue_ids as ids;

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
#[derive(Clone, Debug, PartialEq)]
pub struct ExternalPoint {
    pub gpu: GpuId,
    pub model: ModelId,
    pub tp: u32,
    pub precision: Precision,
    pub measure: Measure,
    /// The published value (ms, or tokens/s for throughput).
    pub published: f64,
    /// Where it was published, in words.
    pub source: String,
    /// Where it was published: the address.
    pub url: String,
}

/// Where the points come from (compiled in). LLaMA-7B is modelled by the `llama-2-7b` shape (identical)
/// and its FP16 by BF16 (same tensor-core rate on A100).
pub const FILE: &str = "data/validation/end_to_end.csv";
const TEXT: &str = include_str!("../../data/validation/end_to_end.csv");

const COLUMNS: [&str; 11] = [
    "gpu",
    "model",
    "tp",
    "precision",
    "measure",
    "prompt",
    "output",
    "concurrency",
    "published",
    "source",
    "url",
];

/// The points of the bundled file.
pub fn points() -> Result<Vec<ExternalPoint>, CalibrationError> {
    parse(TEXT, FILE)
}

/// Parses `text` (the CSV format of [`FILE`]), naming `file` in errors. `measure` is `ttft` (uses
/// `prompt`), `tpot` (`prompt`, `output`, `concurrency`) or `max_throughput` (`prompt`, `output`); the
/// columns a measure does not use stay empty.
pub fn parse(text: &str, file: &str) -> Result<Vec<ExternalPoint>, CalibrationError> {
    ids::read_rows(text, file, &COLUMNS, |row| {
        let field = |i: usize| row.field(i);
        let tokens = |i: usize| row.positive_count(i);
        let unused = |i: usize| {
            if field(i).is_empty() {
                Ok(())
            } else {
                Err(row.bad(i, "must be empty for this measure"))
            }
        };
        let (gpu, model, tp, precision) = row.configuration()?;
        let measure = match field(4) {
            "ttft" => {
                unused(6)?;
                unused(7)?;
                Measure::Ttft { prompt: tokens(5)? }
            }
            "tpot" => Measure::Tpot {
                prompt: tokens(5)?,
                output: tokens(6)?,
                concurrency: tokens(7)?,
            },
            "max_throughput" => {
                unused(7)?;
                Measure::MaxThroughput {
                    prompt: tokens(5)?,
                    output: tokens(6)?,
                }
            }
            _ => return Err(row.bad(4, "expected ttft, tpot or max_throughput")),
        };
        let published = field(8)
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v > 0.0)
            .ok_or_else(|| row.bad(8, "expected a positive number"))?;
        row.required(&[9, 10])?;
        Ok(ExternalPoint {
            gpu,
            model,
            tp,
            precision,
            measure,
            published,
            source: field(9).to_string(),
            url: field(10).to_string(),
        })
    })
}

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
            // TensorRT-LLM keeps the cache a ModelOpt FP8 checkpoint asks for (`kv_cache_quant_algo`
            // FP8) and its FP8 recipes quantise it: the cache follows the weights here. Assumed, as
            // the sources do not state it.
            kv_cache_dtype: Some(self.precision),
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
            // TensorRT-LLM's PyTorch flow overlaps scheduling with the step in flight by default (its
            // overlap scheduler), as vLLM's asynchronous scheduling does; a single client never meets
            // a busy engine, so it changes nothing there.
            async_scheduling: true,
            harness: None,
            seed: 0,
        })?;
        let predicted = match self.measure {
            Measure::Ttft { .. } => e.ttft_ms.mean,
            Measure::Tpot { .. } => e.tpot_ms.mean,
            Measure::MaxThroughput { .. } => e.output_tokens_per_s,
        };
        Ok(ExternalResult {
            point: self.clone(),
            predicted,
            profile: e.profile,
            calibrated: e.calibrated,
        })
    }
}

/// Predicts every point of [`FILE`].
pub fn predict_all() -> Result<Vec<ExternalResult>, CalibrationError> {
    ids::predict_each(&points()?, FILE, |p| p.label(), |p| p.predict())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_the_configuration_and_the_unit() {
        let points = points().unwrap();
        let l = points[0].label();
        assert!(
            l.starts_with("h100 llama-2-7b tp1 fp8: TTFT") && l.ends_with("(ms)"),
            "{l}"
        );
        assert!(points[3].label().ends_with("(tokens/s)"));
        assert!(points.iter().all(|p| p.url.starts_with("https://")));
    }

    const HEADER: &str =
        "gpu,model,tp,precision,measure,prompt,output,concurrency,published,source,url\n";

    fn one(row: &str) -> Result<Vec<ExternalPoint>, CalibrationError> {
        parse(&format!("{HEADER}{row}\n"), "e.csv")
    }

    #[test]
    fn each_measure_reads_its_columns() {
        let p = one("h100,llama-3.1-8b,1,fp8,tpot,1024,128,4,13.3,\"a, b\",https://x").unwrap();
        assert_eq!(
            p[0].measure,
            Measure::Tpot {
                prompt: 1024,
                output: 128,
                concurrency: 4
            }
        );
        assert_eq!(p[0].source, "a, b");
        let p = one("h100,llama-3.1-8b,1,fp8,ttft,2048,,,36,s,u").unwrap();
        assert_eq!(p[0].measure, Measure::Ttft { prompt: 2048 });
    }

    #[test]
    fn bad_rows_name_the_line_and_the_column() {
        let e = one("h100,llama-3.1-8b,1,fp8,latency,2048,,,36,s,u").unwrap_err();
        assert_eq!(e.location, "e.csv:2");
        assert!(e.message.starts_with("measure:"), "{e}");
        let e = one("h100,llama-3.1-8b,1,fp8,ttft,2048,5,,36,s,u").unwrap_err();
        assert!(
            e.message.starts_with("output:") && e.message.contains("empty"),
            "{e}"
        );
        let e = one("h100,llama-3.1-8b,1,fp8,tpot,1024,128,,13.3,s,u").unwrap_err();
        assert!(e.message.starts_with("concurrency:"), "{e}");
        let e = one("h100,llama-3.1-8b,1,fp8,ttft,2048,,,-1,s,u").unwrap_err();
        assert!(e.message.starts_with("published:"), "{e}");
        let e = one("h100,llama-3.1-8b,1,fp8,ttft,2048,,,36,s,").unwrap_err();
        assert!(e.message.starts_with("url:"), "{e}");
        let e = one("x100,llama-3.1-8b,1,fp8,ttft,2048,,,36,s,u").unwrap_err();
        assert!(
            e.message.starts_with("gpu:") && e.message.contains("x100"),
            "{e}"
        );
    }
}
