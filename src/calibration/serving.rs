//! Published benchmark-harness runs of our own (issue 40): serving benchmarks that someone ran with one of
//! the harnesses fleetsim imitates, predicted by running the same configuration, harness and options
//! through [`crate::estimate`]. Held out by construction: no step-time profile is fitted to them and no
//! constant is set from them.
//!
//! Invariant: a point is simulated with the harness its row names and only the options it states; any
//! part of the published setup fleetsim cannot express exactly is written in the row's `approximation`
//! (shown beside the point in `docs/calibration.md`), never changed silently.

use std::collections::BTreeMap;

use crate::estimate::{EstimateRequest, estimate};
use crate::hardware::{GpuId, ModelId, Precision};
use crate::workload::FrontendSpec;
use crate::workload::harness::{Harness, HarnessOptions};

use super::catalogue_ids as ids;
use super::{CalibrationError, median_and_max};

/// Where the points come from (compiled in).
pub const FILE: &str = "data/validation/serving_runs.csv";
const TEXT: &str = include_str!("../../data/validation/serving_runs.csv");

const COLUMNS: [&str; 17] = [
    "gpu",
    "model",
    "tp",
    "precision",
    "harness",
    "options",
    "frontend",
    "engine",
    "prompt",
    "output",
    "concurrency",
    "requests",
    "mean_ttft_ms",
    "mean_tpot_ms",
    "source",
    "url",
    "approximation",
];

/// One published run: configuration, harness as it was invoked, and its mean TTFT and TPOT.
#[derive(Clone, Debug, PartialEq)]
pub struct ServingPoint {
    pub gpu: GpuId,
    pub model: ModelId,
    pub tp: u32,
    pub precision: Precision,
    pub harness: Harness,
    pub options: HarnessOptions,
    /// The options as written in the file (for the report).
    pub options_text: String,
    /// The API-server path of the engine version run (`[workload.frontend]` keys over the defaults).
    pub frontend: FrontendSpec,
    /// The frontend keys as written in the file (for the report).
    pub frontend_text: String,
    /// The engine settings of the version run, where they differ from current vLLM's defaults.
    pub engine: EngineOptions,
    /// The engine keys as written in the file (for the report).
    pub engine_text: String,
    /// Nominal prompt and output tokens (the harness draws around them).
    pub prompt: u32,
    pub output: u32,
    pub concurrency: u32,
    /// Requests the run sent (the harness's `--num-prompts` / `--request-count`).
    pub requests: u32,
    /// Published means, ms (at least one of the two).
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub source: String,
    pub url: String,
    /// What of the setup is approximated, in words; empty when nothing is.
    pub approximation: String,
}

/// Engine settings a point states (`[[workers]]` keys): what the vLLM version run did by default, or
/// what its command line set.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineOptions {
    /// vLLM's `--async-scheduling`; unset: on, vLLM's default since PR #27614
    /// (December 2025).
    pub async_scheduling: Option<bool>,
}

/// The points of the bundled file.
pub fn points() -> Result<Vec<ServingPoint>, CalibrationError> {
    parse(TEXT, FILE)
}

/// Parses `text` (the CSV format of [`FILE`]), naming `file`, the line and the column in errors.
/// `options` is the harness's options as TOML keys, `;`-separated (`random_range_ratio = 0.5`), as
/// `estimate --harness-option` takes them; empty for the harness's defaults. `frontend` is
/// `[workload.frontend]` keys in the same form, for what the engine version run is known to do
/// (`tokenizer_batch_wait = "2ms"`), and `engine` the engine's keys (`async_scheduling = false`);
/// empty for the defaults.
pub fn parse(text: &str, file: &str) -> Result<Vec<ServingPoint>, CalibrationError> {
    ids::read_rows(text, file, &COLUMNS, |row| {
        let field = |i: usize| row.field(i);
        let count = |i: usize| row.positive_count(i);
        let mean = |i: usize| {
            if field(i).is_empty() {
                return Ok(None);
            }
            field(i)
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v > 0.0)
                .map(Some)
                .ok_or_else(|| row.bad(i, "expected a positive number, or empty"))
        };
        let (gpu, model, tp, precision) = row.configuration()?;
        let harness: Harness = field(4).parse().map_err(|m: String| row.bad(4, &m))?;
        let options_text = field(5).to_string();
        let options: HarnessOptions = toml::from_str(&options_text.replace(';', "\n"))
            .map_err(|e: toml::de::Error| row.bad(5, e.message()))?;
        let frontend_text = field(6).to_string();
        let frontend: FrontendSpec = toml::from_str(&frontend_text.replace(';', "\n"))
            .map_err(|e: toml::de::Error| row.bad(6, e.message()))?;
        let engine_text = field(7).to_string();
        let engine: EngineOptions = toml::from_str(&engine_text.replace(';', "\n"))
            .map_err(|e: toml::de::Error| row.bad(7, e.message()))?;
        let (ttft_ms, tpot_ms) = (mean(12)?, mean(13)?);
        if ttft_ms.is_none() && tpot_ms.is_none() {
            return Err(row.bad(12, "a point needs mean_ttft_ms, mean_tpot_ms or both"));
        }
        row.required(&[14, 15])?;
        Ok(ServingPoint {
            gpu,
            model,
            tp,
            precision,
            harness,
            options,
            options_text,
            frontend,
            frontend_text,
            engine,
            engine_text,
            prompt: count(8)?,
            output: count(9)?,
            concurrency: count(10)?,
            requests: count(11)?,
            ttft_ms,
            tpot_ms,
            source: field(14).to_string(),
            url: field(15).to_string(),
            approximation: field(16).to_string(),
        })
    })
}

/// A point and what the simulator predicts for it.
#[derive(Clone, Debug)]
pub struct ServingResult {
    pub point: ServingPoint,
    pub ttft_ms: f64,
    pub tpot_ms: f64,
    /// The profile used, and whether it was fitted for this very configuration.
    pub profile: String,
    pub calibrated: bool,
}

impl ServingResult {
    /// Relative errors (predicted / published − 1) of mean TTFT and mean TPOT, where published.
    pub fn errors(&self) -> (Option<f64>, Option<f64>) {
        let p = &self.point;
        (
            p.ttft_ms.map(|m| self.ttft_ms / m - 1.0),
            p.tpot_ms.map(|m| self.tpot_ms / m - 1.0),
        )
    }
}

impl ServingPoint {
    /// E.g. `h100 qwen3-8b tp1 bf16, vllm-bench, 233/221 tokens, concurrency 4, 100 requests`.
    pub fn label(&self) -> String {
        format!(
            "{} {} tp{} {}, {}, {}/{} tokens, concurrency {}, {} requests",
            self.gpu.as_str(),
            self.model.as_str(),
            self.tp,
            self.precision.as_str(),
            self.harness,
            self.prompt,
            self.output,
            self.concurrency,
            self.requests
        )
    }

    /// Runs the point through `estimate`, with the harness's client, API-server path and warm-up on.
    pub fn predict(&self) -> Result<ServingResult, String> {
        let e = estimate(&EstimateRequest {
            gpu: self.gpu,
            model: self.model,
            tp: self.tp,
            precision: self.precision,
            kv_cache_dtype: None,
            prompt: self.prompt,
            output: self.output,
            concurrency: Some(self.concurrency),
            requests: Some(self.requests),
            profile: None,
            max_num_seqs: None,
            frontend: self.frontend,
            async_scheduling: self
                .engine
                .async_scheduling
                .unwrap_or(crate::worker::EngineParams::default().async_scheduling),
            harness: Some((self.harness, self.options.clone())),
            seed: 0,
        })?;
        Ok(ServingResult {
            point: self.clone(),
            ttft_ms: e.ttft_ms.mean,
            tpot_ms: e.tpot_ms.mean,
            profile: e.profile,
            calibrated: e.calibrated,
        })
    }
}

/// Predicts every point of [`FILE`].
pub fn predict_all() -> Result<Vec<ServingResult>, CalibrationError> {
    ids::predict_each(&points()?, FILE, |p| p.label(), |p| p.predict())
}

/// Median and largest |error| per harness: (harness, metric) → (points, median, largest), metric
/// `"TTFT"` or `"TPOT"`.
pub fn errors_by_harness(
    results: &[ServingResult],
) -> BTreeMap<(String, &'static str), (usize, f64, f64)> {
    let mut by: BTreeMap<(String, &'static str), Vec<f64>> = BTreeMap::new();
    for r in results {
        let (ttft, tpot) = r.errors();
        for (metric, e) in [("TTFT", ttft), ("TPOT", tpot)] {
            if let Some(e) = e {
                by.entry((r.point.harness.to_string(), metric))
                    .or_default()
                    .push(e.abs());
            }
        }
    }
    by.into_iter()
        .map(|(k, v)| {
            let (med, max) = median_and_max(&v);
            (k, (v.len(), med, max))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "gpu,model,tp,precision,harness,options,frontend,engine,prompt,output,concurrency,requests,mean_ttft_ms,mean_tpot_ms,source,url,approximation\n";

    fn one(row: &str) -> Result<Vec<ServingPoint>, CalibrationError> {
        parse(&format!("{HEADER}{row}\n"), "s.csv")
    }

    #[test]
    fn a_row_reads_its_harness_options_and_means() {
        let p = one(r#"h100,qwen3-8b,1,bf16,vllm-bench,random_range_ratio = 0.5,"tokenizer_batch_wait = ""2ms""",async_scheduling = false,200,100,4,100,59.0,,src,https://x,lengths"#)
            .unwrap();
        assert_eq!(
            p[0].frontend.tokenizer_batch_wait,
            crate::time::SimDuration::from_millis(2)
        );
        assert_eq!(p[0].frontend.request, FrontendSpec::default().request);
        assert_eq!(p[0].engine.async_scheduling, Some(false));
        assert_eq!(p[0].harness, Harness::VllmBench);
        assert_eq!(p[0].options.random_range_ratio, Some(0.5));
        assert_eq!((p[0].ttft_ms, p[0].tpot_ms), (Some(59.0), None));
        assert_eq!(p[0].approximation, "lengths");
        let p = one("h100,qwen3-8b,1,bf16,guidellm,prompt_tokens_stdev = 10;output_tokens_stdev = 5,,,200,100,4,100,,7.3,src,https://x,")
            .unwrap();
        assert_eq!(p[0].options.output_tokens_stdev.map(|v| v.0), Some(5));
        assert_eq!(p[0].engine, EngineOptions::default());
        assert_eq!(
            p[0].label(),
            "h100 qwen3-8b tp1 bf16, guidellm, 200/100 tokens, concurrency 4, 100 requests"
        );
    }

    #[test]
    fn bad_rows_name_the_line_and_the_column() {
        let e = one("h100,qwen3-8b,1,bf16,locust,,,,200,100,4,100,59,7,s,u,").unwrap_err();
        assert_eq!(e.location, "s.csv:2");
        assert!(
            e.message.starts_with("harness:") && e.message.contains("locust"),
            "{e}"
        );
        let e =
            one("h100,qwen3-8b,1,bf16,vllm-bench,range = 1,,,200,100,4,100,59,7,s,u,").unwrap_err();
        assert!(
            e.message.starts_with("options:") && e.message.contains("range"),
            "{e}"
        );
        let e = one("h100,qwen3-8b,1,bf16,vllm-bench,,tokens = 3,,200,100,4,100,59,7,s,u,")
            .unwrap_err();
        assert!(
            e.message.starts_with("frontend:") && e.message.contains("tokens"),
            "{e}"
        );
        let e = one("h100,qwen3-8b,1,bf16,vllm-bench,,,async = false,200,100,4,100,59,7,s,u,")
            .unwrap_err();
        assert!(
            e.message.starts_with("engine:") && e.message.contains("async"),
            "{e}"
        );
        let e = one("h100,qwen3-8b,1,bf16,vllm-bench,,,,200,100,0,100,59,7,s,u,").unwrap_err();
        assert!(e.message.starts_with("concurrency:"), "{e}");
        let e = one("h100,qwen3-8b,1,bf16,vllm-bench,,,,200,100,4,100,,,s,u,").unwrap_err();
        assert!(e.message.starts_with("mean_ttft_ms:"), "{e}");
        let e = one("h100,qwen3-8b,1,bf16,vllm-bench,,,,200,100,4,100,-3,,s,u,").unwrap_err();
        assert!(e.message.starts_with("mean_ttft_ms:"), "{e}");
        let e = one("h100,qwen3-8b,1,bf16,vllm-bench,,,,200,100,4,100,59,,s,,").unwrap_err();
        assert!(e.message.starts_with("url:"), "{e}");
    }

    #[test]
    fn errors_are_grouped_by_harness_and_metric() {
        let p = one("h100,qwen3-8b,1,bf16,vllm-bench,,,,200,100,4,100,50,10,s,u,").unwrap();
        let r = |ttft: f64, tpot: f64| ServingResult {
            point: p[0].clone(),
            ttft_ms: ttft,
            tpot_ms: tpot,
            profile: String::new(),
            calibrated: false,
        };
        let by = errors_by_harness(&[r(45.0, 11.0), r(55.0, 10.5), r(60.0, 9.0)]);
        let ttft = by[&("vllm-bench".to_string(), "TTFT")];
        assert_eq!(ttft.0, 3);
        assert!(
            (ttft.1 - 0.1).abs() < 1e-12 && (ttft.2 - 0.2).abs() < 1e-12,
            "{ttft:?}"
        );
        let tpot = by[&("vllm-bench".to_string(), "TPOT")];
        assert!(
            (tpot.1 - 0.1).abs() < 1e-12 && (tpot.2 - 0.1).abs() < 1e-12,
            "{tpot:?}"
        );
    }

    #[test]
    fn every_bundled_point_names_its_source() {
        let points = points().unwrap();
        assert!(!points.is_empty());
        assert!(
            points
                .iter()
                .all(|p| p.url.starts_with("https://") && !p.source.is_empty())
        );
    }
}
