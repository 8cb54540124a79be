//! Serving-benchmark clients as their own source defines them: how each draws prompt and output lengths
//! around its nominal ones, how many requests it sends by default, its warm-up, how its closed loop hands
//! out requests, how it computes TTFT, TPOT and ITL, and the server flags its published runs set.
//!
//! A harness shapes the closed loop that [`crate::estimate`] and `kind = "benchmark"` run (one client
//! per concurrency slot, the next request sent when one finishes; [`super::concurrency`]): the length
//! draws, the request budget, the warm-up requests, whether each slot has its own share of the budget,
//! and the metric definitions ([`crate::metrics::bench`]). Options are spelt as the harness spells them
//! (`synthetic_input_tokens_stddev` for `--synthetic-input-tokens-stddev`). `docs/benchmark-client.md`
//! cites the source lines of each.
//!
//! Every harness is taken to run with outputs forced to their drawn length (`--ignore-eos`, AIPerf's and
//! GenAI-Perf's `--extra-inputs ignore_eos:true`, GuideLLM's own `ignore_eos`) and with streaming on.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::config::PositiveInt;
use crate::metrics::bench::BenchDefinitions;
use crate::workload::concurrency::ClientRules;
use crate::workload::dist::{LengthDist, LengthSpec, Rounding};

/// A benchmark client whose workload fleetsim reproduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum Harness {
    /// `vllm bench serve --dataset-name random` since vLLM PR #16126 (April 2025):
    /// `vllm/benchmarks/datasets.py`, `RandomDataset.get_sampling_params`. Lengths are uniform integers
    /// in `[floor(L·(1−r)), ceil(L·(1+r))]`, `r` in `[0, 1)`, default 0; `--num-prompts` defaults to 1000.
    #[serde(rename = "vllm-bench")]
    VllmBench,
    /// InferenceMAX's client: `benchmark_serving.py` of `kimbochen/bench_serving`, the vLLM benchmark
    /// script from before PR #16126 (`sample_random_requests`). Lengths are uniform integers in
    /// `[int(L·r), L]`, `r` in `[0, 1]`; InferenceMAX runs it with `--random-range-ratio 0.8`,
    /// `--num-prompts` ten per client, `--request-rate inf --ignore-eos`, against `vllm serve
    /// --max-num-seqs` equal to the concurrency.
    #[serde(rename = "inferencemax")]
    InferenceMax,
    /// NVIDIA AIPerf @ db4f639 (0.1.1+71, 2025-10-10): lengths from a normal of mean L and
    /// `--synthetic-input-tokens-stddev` / `--output-tokens-stddev` (default 0), negative draws drawn
    /// again, rounded up (`dataset/utils.py` L74-124); `--request-count` 10; `--warmup-request-count` 0;
    /// its inter-token latency averaged over requests.
    #[serde(rename = "aiperf")]
    AiPerf,
    /// NVIDIA GenAI-Perf 0.0.16 (triton-inference-server/perf_analyzer @ 263c5f6): the same normal
    /// draws truncated toward zero (`synthetic_prompt_generator.py` L64-66, `base_converter.py`
    /// L79-96); `--request-count` max(10, 2 × concurrency), dealt out evenly to the concurrency slots
    /// (`perf_analyzer_config.py` L376-398, `concurrency_manager.cc` L163-175); `--warmup-request-count` 0.
    #[serde(rename = "genai-perf")]
    GenAiPerf,
    /// GuideLLM v0.7.3 (vllm-project/guidellm @ 3938355): `prompt_tokens_stdev`/`_min`/`_max` (and the
    /// output's): Gaussian clamped to `[min, max]` (default mean ± 5 sd, at least 1) and rounded half to
    /// even, uniform integers in `[min, max]` without a stdev (`utils/random.py` L23-44); no default
    /// request budget; TPOT including the first token, token-weighted.
    #[serde(rename = "guidellm")]
    Guidellm,
}

/// A harness's own options, spelt as it spells them (a `[workload.options]` table, or `estimate
/// --harness-option KEY=VALUE`). Each applies to the harnesses named on it; any other is refused.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HarnessOptions {
    /// vllm-bench, inferencemax: `--random-range-ratio`.
    pub random_range_ratio: Option<f64>,
    /// vllm-bench, inferencemax: `--request-rate`, requests per second created by a Poisson process
    /// (burstiness 1), each sent once a client of `--max-concurrency` is free; default `inf` (all at
    /// once, the plain closed loop).
    pub request_rate: Option<f64>,
    /// aiperf, genai-perf: `--synthetic-input-tokens-stddev`, tokens.
    pub synthetic_input_tokens_stddev: Option<f64>,
    /// aiperf, genai-perf: `--output-tokens-stddev`, tokens.
    pub output_tokens_stddev: Option<f64>,
    /// aiperf, genai-perf: `--warmup-request-count`.
    pub warmup_request_count: Option<u32>,
    /// guidellm: `prompt_tokens_stdev` of `--data`.
    pub prompt_tokens_stdev: Option<PositiveInt>,
    /// guidellm: `prompt_tokens_min`.
    pub prompt_tokens_min: Option<PositiveInt>,
    /// guidellm: `prompt_tokens_max`.
    pub prompt_tokens_max: Option<PositiveInt>,
    /// guidellm: `output_tokens_stdev`.
    pub output_tokens_stdev: Option<PositiveInt>,
    /// guidellm: `output_tokens_min`.
    pub output_tokens_min: Option<PositiveInt>,
    /// guidellm: `output_tokens_max`.
    pub output_tokens_max: Option<PositiveInt>,
    /// guidellm: the profile's `warmup` (`--profile kind=concurrent,streams=C,warmup=W`): below 1 a
    /// fraction of the requests, from 1 a count of them, whose completions open the measured window.
    pub warmup: Option<f64>,
    /// guidellm: the profile's `cooldown`, as `warmup`: the last requests to complete, after the
    /// measured window closes.
    pub cooldown: Option<f64>,
    /// guidellm: `--max-seconds`, the benchmark's length from its first request: no request is sent
    /// after it and those still streaming are cancelled (not counted). It also puts `warmup` and
    /// `cooldown` in seconds (below 1 a fraction of it, from 1 seconds).
    pub max_seconds: Option<f64>,
}

impl HarnessOptions {
    /// The options given, by name.
    fn present(&self) -> [(&'static str, bool); 14] {
        [
            ("random_range_ratio", self.random_range_ratio.is_some()),
            ("request_rate", self.request_rate.is_some()),
            (
                "synthetic_input_tokens_stddev",
                self.synthetic_input_tokens_stddev.is_some(),
            ),
            ("output_tokens_stddev", self.output_tokens_stddev.is_some()),
            ("warmup_request_count", self.warmup_request_count.is_some()),
            ("prompt_tokens_stdev", self.prompt_tokens_stdev.is_some()),
            ("prompt_tokens_min", self.prompt_tokens_min.is_some()),
            ("prompt_tokens_max", self.prompt_tokens_max.is_some()),
            ("output_tokens_stdev", self.output_tokens_stdev.is_some()),
            ("output_tokens_min", self.output_tokens_min.is_some()),
            ("output_tokens_max", self.output_tokens_max.is_some()),
            ("warmup", self.warmup.is_some()),
            ("cooldown", self.cooldown.is_some()),
            ("max_seconds", self.max_seconds.is_some()),
        ]
    }

    /// The options given, as `--name value` words for a report line.
    pub fn words(&self) -> String {
        let mut w = Vec::new();
        let mut put = |name: &str, v: Option<String>| {
            if let Some(v) = v {
                w.push(format!("{name} {v}"));
            }
        };
        put(
            "--random-range-ratio",
            self.random_range_ratio.map(|v| v.to_string()),
        );
        put("--request-rate", self.request_rate.map(|v| v.to_string()));
        put(
            "--synthetic-input-tokens-stddev",
            self.synthetic_input_tokens_stddev.map(|v| v.to_string()),
        );
        put(
            "--output-tokens-stddev",
            self.output_tokens_stddev.map(|v| v.to_string()),
        );
        put(
            "--warmup-request-count",
            self.warmup_request_count.map(|v| v.to_string()),
        );
        put("--max-seconds", self.max_seconds.map(|v| v.to_string()));
        let guidellm = [
            ("prompt_tokens_stdev", self.prompt_tokens_stdev),
            ("prompt_tokens_min", self.prompt_tokens_min),
            ("prompt_tokens_max", self.prompt_tokens_max),
            ("output_tokens_stdev", self.output_tokens_stdev),
            ("output_tokens_min", self.output_tokens_min),
            ("output_tokens_max", self.output_tokens_max),
        ];
        // GuideLLM takes these as `--data key=value,...`.
        for (k, v) in guidellm {
            if let Some(v) = v {
                w.push(format!("{k}={}", v.0));
            }
        }
        // And these as attributes of `--profile`.
        for (k, v) in [("warmup", self.warmup), ("cooldown", self.cooldown)] {
            if let Some(v) = v {
                w.push(format!("{k}={v}"));
            }
        }
        w.join(" ")
    }
}

/// What a harness runs at a given concurrency: its length draws, budget, warm-up, dispatch and metric
/// definitions, and the server flag its published runs set.
#[derive(Clone, Debug, PartialEq)]
pub struct HarnessRun {
    pub prompt: LengthDist,
    pub output: LengthDist,
    /// The inclusive range of `prompt` (for a normal draw without bounds of its own: mean ± 5 sd).
    pub prompt_range: (u32, u32),
    pub output_range: (u32, u32),
    /// The default request budget, if the harness has one.
    pub requests: Option<u32>,
    /// Its warm-up, how its closed loop hands out requests, and its metric definitions.
    pub client: ClientRules,
}

/// The longest GuideLLM `--max-seconds` taken (about 11.6 days).
pub const MAX_SECONDS: f64 = 1e6;
/// The largest `--request-rate` taken, requests per second.
pub const MAX_REQUEST_RATE: f64 = 1e6;
/// The smallest `--request-rate` taken (one request in about 11.6 days), so that no gap overflows the
/// clock.
pub const MIN_REQUEST_RATE: f64 = 1e-6;

/// A length draw, its inclusive range, or `Err((option, message))`.
type Draw = Result<(LengthDist, (u32, u32)), (&'static str, String)>;

impl Harness {
    /// Every harness, as `--harness` names them.
    pub const ALL: [Harness; 5] = [
        Harness::VllmBench,
        Harness::InferenceMax,
        Harness::AiPerf,
        Harness::GenAiPerf,
        Harness::Guidellm,
    ];

    /// The name `--harness` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Harness::VllmBench => "vllm-bench",
            Harness::InferenceMax => "inferencemax",
            Harness::AiPerf => "aiperf",
            Harness::GenAiPerf => "genai-perf",
            Harness::Guidellm => "guidellm",
        }
    }

    /// The options this harness takes.
    fn options(self) -> &'static [&'static str] {
        match self {
            Harness::VllmBench | Harness::InferenceMax => &["random_range_ratio", "request_rate"],
            Harness::AiPerf | Harness::GenAiPerf => &[
                "synthetic_input_tokens_stddev",
                "output_tokens_stddev",
                "warmup_request_count",
            ],
            Harness::Guidellm => &[
                "prompt_tokens_stdev",
                "prompt_tokens_min",
                "prompt_tokens_max",
                "output_tokens_stdev",
                "output_tokens_min",
                "output_tokens_max",
                "warmup",
                "cooldown",
                "max_seconds",
            ],
        }
    }

    /// `--random-range-ratio` when the run does not give one (range-ratio harnesses).
    pub fn default_range_ratio(self) -> f64 {
        match self {
            Harness::InferenceMax => 0.8,
            _ => 0.0,
        }
    }

    /// The request budget when the run does not give one, at `concurrency` clients; `None` where the
    /// harness has no default (GuideLLM runs until a constraint stops it).
    pub fn default_requests(self, concurrency: u32) -> Option<u32> {
        match self {
            Harness::VllmBench => Some(1000),
            Harness::InferenceMax => Some(concurrency.saturating_mul(10)),
            Harness::AiPerf => Some(10),
            Harness::GenAiPerf => Some(concurrency.saturating_mul(2).max(10)),
            Harness::Guidellm => None,
        }
    }

    /// The server's `--max-num-seqs` in this harness's published runs, if it sets one.
    pub fn max_num_seqs(self, concurrency: u32) -> Option<u32> {
        match self {
            Harness::InferenceMax => Some(concurrency),
            _ => None,
        }
    }

    /// Inclusive bounds of a length drawn for nominal `len` at range ratio `r` (the range-ratio
    /// harnesses), or why `r` is out of the harness's domain. A bound of 0 becomes 1 (the server always
    /// sees at least one token).
    pub fn bounds(self, len: u32, r: f64) -> Result<(u32, u32), String> {
        let l = f64::from(len);
        let (lo, hi) = match self {
            Harness::InferenceMax => {
                if !(0.0..=1.0).contains(&r) {
                    return Err(format!(
                        "--random-range-ratio must be in [0, 1] for inferencemax, got {r}"
                    ));
                }
                ((l * r).trunc(), l)
            }
            _ => {
                if !(0.0..1.0).contains(&r) {
                    return Err(format!(
                        "--random-range-ratio must be in [0, 1) for vllm-bench, got {r}"
                    ));
                }
                ((l * (1.0 - r)).floor(), (l * (1.0 + r)).ceil())
            }
        };
        Ok(((lo as u32).max(1), (hi as u32).max(1)))
    }

    /// The normal draw of AIPerf and GenAI-Perf around `len` with standard deviation `sd`.
    fn nvidia_draw(self, len: u32, sd: Option<f64>, key: &'static str) -> Draw {
        let sd = sd.unwrap_or(0.0);
        if !(sd.is_finite() && sd >= 0.0) {
            return Err((key, format!("must be a finite number ≥ 0, got {sd}")));
        }
        if sd == 0.0 {
            return Ok((
                LengthSpec::fixed(len).build().map_err(|(_, m)| (key, m))?,
                (len, len),
            ));
        }
        let (rounding, redraw_negative) = match self {
            Harness::AiPerf => (Rounding::Ceil, true),
            _ => (Rounding::Trunc, false),
        };
        let l = f64::from(len);
        let range = (
            ((l - 5.0 * sd).max(1.0)) as u32,
            (l + 5.0 * sd).min(f64::from(u32::MAX / 4)).ceil() as u32,
        );
        Ok((
            LengthDist::Normal {
                mean: l,
                sd,
                rounding,
                redraw_negative,
                min: 1,
                max: u32::MAX / 4,
            },
            range,
        ))
    }

    /// GuideLLM's `IntegerRangeSampler` around `len`.
    fn guidellm_draw(
        len: u32,
        stdev: Option<PositiveInt>,
        min: Option<PositiveInt>,
        max: Option<PositiveInt>,
        keys: [&'static str; 2],
    ) -> Draw {
        let sd = stdev.map(|s| s.0);
        let lo = min
            .map(|m| m.0)
            .unwrap_or_else(|| sd.map_or(len, |s| len.saturating_sub(s.saturating_mul(5)).max(1)));
        let hi = max
            .map(|m| m.0)
            .unwrap_or_else(|| sd.map_or(len, |s| len.saturating_add(s.saturating_mul(5))));
        if lo > hi {
            return Err((
                keys[0],
                format!("the lower bound ({lo}) is above the upper bound ({hi})"),
            ));
        }
        let dist = match sd {
            _ if lo == hi => LengthSpec::fixed(lo).build(),
            None => LengthSpec::between(lo, hi).build(),
            Some(s) => Ok(LengthDist::Normal {
                mean: f64::from(len),
                sd: f64::from(s),
                rounding: Rounding::HalfEven,
                redraw_negative: false,
                min: lo,
                max: hi,
            }),
        }
        .map_err(|(_, m)| (keys[1], m))?;
        Ok((dist, (lo, hi)))
    }

    /// What this harness runs for nominal lengths `prompt` and `output` at `clients` clients with
    /// `options`, or `Err((option, message))` naming an option it does not take or a bad value.
    pub fn run(
        self,
        prompt: u32,
        output: u32,
        clients: u32,
        options: &HarnessOptions,
    ) -> Result<HarnessRun, (&'static str, String)> {
        let takes = self.options();
        if let Some((key, _)) = options
            .present()
            .into_iter()
            .find(|(k, given)| *given && !takes.contains(k))
        {
            return Err((
                key,
                format!(
                    "is not an option of {self} (it takes: {})",
                    takes.join(", ")
                ),
            ));
        }
        let ((prompt, prompt_range), (output, output_range)) = match self {
            Harness::VllmBench | Harness::InferenceMax => {
                let r = options
                    .random_range_ratio
                    .unwrap_or(self.default_range_ratio());
                let draw = |len| -> Draw {
                    let b = self.bounds(len, r).map_err(|m| ("random_range_ratio", m))?;
                    let d = LengthSpec::between(b.0, b.1)
                        .build()
                        .map_err(|(_, m)| ("random_range_ratio", m))?;
                    Ok((d, b))
                };
                (draw(prompt)?, draw(output)?)
            }
            Harness::AiPerf | Harness::GenAiPerf => (
                self.nvidia_draw(
                    prompt,
                    options.synthetic_input_tokens_stddev,
                    "synthetic_input_tokens_stddev",
                )?,
                self.nvidia_draw(output, options.output_tokens_stddev, "output_tokens_stddev")?,
            ),
            Harness::Guidellm => (
                Self::guidellm_draw(
                    prompt,
                    options.prompt_tokens_stdev,
                    options.prompt_tokens_min,
                    options.prompt_tokens_max,
                    ["prompt_tokens_min", "prompt_tokens_stdev"],
                )?,
                Self::guidellm_draw(
                    output,
                    options.output_tokens_stdev,
                    options.output_tokens_min,
                    options.output_tokens_max,
                    ["output_tokens_min", "output_tokens_stdev"],
                )?,
            ),
        };
        if let Some(r) = options.request_rate
            && !(r.is_finite() && (MIN_REQUEST_RATE..=MAX_REQUEST_RATE).contains(&r))
        {
            return Err((
                "request_rate",
                format!(
                    "must be a rate in [{MIN_REQUEST_RATE}, {MAX_REQUEST_RATE}] requests per second (leave it out for inf), got {r}"
                ),
            ));
        }
        if let Some(w) = options.warmup_request_count
            && w > crate::limits::MAX_ESTIMATE_REQUESTS
        {
            return Err((
                "warmup_request_count",
                format!(
                    "at most {} warm-up requests, got {w}",
                    crate::limits::MAX_ESTIMATE_REQUESTS
                ),
            ));
        }
        if let Some(t) = options.max_seconds
            && !(t.is_finite() && t > 0.0 && t <= MAX_SECONDS)
        {
            return Err((
                "max_seconds",
                format!("must be a duration in (0, {MAX_SECONDS}] seconds, got {t}"),
            ));
        }
        for (name, v) in [("warmup", options.warmup), ("cooldown", options.cooldown)] {
            if let Some(v) = v
                && !(v.is_finite() && v >= 0.0)
            {
                return Err((
                    name,
                    format!(
                        "must be a fraction of the requests (below 1) or a count of them (from 1), got {v}"
                    ),
                ));
            }
        }
        let (warmup_requests, per_client_quota, definitions) = match self {
            Harness::VllmBench | Harness::InferenceMax => (1, false, BenchDefinitions::VllmBench),
            Harness::AiPerf => (
                options.warmup_request_count.unwrap_or(0),
                false,
                BenchDefinitions::PerRequestItl,
            ),
            Harness::GenAiPerf => (
                options.warmup_request_count.unwrap_or(0),
                true,
                BenchDefinitions::PerRequestItl,
            ),
            Harness::Guidellm => (0, false, BenchDefinitions::Guidellm),
        };
        Ok(HarnessRun {
            prompt,
            output,
            prompt_range,
            output_range,
            requests: self.default_requests(clients),
            client: ClientRules {
                warmup_requests,
                per_client_quota,
                definitions,
                request_rate: options.request_rate,
                transient: (options.warmup, options.cooldown),
                max_seconds: options.max_seconds,
            },
        })
    }
}

impl fmt::Display for Harness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Harness {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Harness::ALL
            .into_iter()
            .find(|h| h.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Harness::ALL.iter().map(|h| h.as_str()).collect();
                format!("unknown harness `{s}` (known: {})", names.join(", "))
            })
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    /// vLLM's current window is symmetric with floor/ceil, InferenceMAX's (the pre-#16126 script) runs
    /// from `int(L·r)` to `L`: at 1,024 tokens and r = 0.8 the two differ by a factor of 2 in width and
    /// 10% in mean.
    #[test]
    fn range_ratio_semantics_follow_each_source() {
        assert_eq!(Harness::VllmBench.bounds(1024, 0.0).unwrap(), (1024, 1024));
        assert_eq!(Harness::VllmBench.bounds(1024, 0.8).unwrap(), (204, 1844));
        assert_eq!(Harness::VllmBench.bounds(1000, 0.25).unwrap(), (750, 1250));
        // floor(7·0.7) = floor(4.8999…) = 4, ceil(7·1.3) = ceil(9.1) = 10.
        assert_eq!(Harness::VllmBench.bounds(7, 0.3).unwrap(), (4, 10));
        assert_eq!(
            Harness::InferenceMax.bounds(1024, 0.8).unwrap(),
            (819, 1024)
        );
        assert_eq!(
            Harness::InferenceMax.bounds(8192, 0.8).unwrap(),
            (6553, 8192)
        );
        assert_eq!(
            Harness::InferenceMax.bounds(1024, 1.0).unwrap(),
            (1024, 1024)
        );
        // r = 0 in the old script draws from 0, which the server sees as one token at least.
        assert_eq!(Harness::InferenceMax.bounds(100, 0.0).unwrap(), (1, 100));
        assert!(Harness::VllmBench.bounds(1024, 1.0).is_err());
        assert!(Harness::InferenceMax.bounds(1024, 1.5).is_err());
        assert!(Harness::VllmBench.bounds(1024, -0.1).is_err());
    }

    fn opts() -> HarnessOptions {
        HarnessOptions::default()
    }

    /// GuideLLM's profile `warmup` and `cooldown` reach its client as given (counted against the run's
    /// requests when the run is built: `TransientPhases::of`); a negative or infinite one, or one given
    /// to another harness, is refused by name.
    #[test]
    fn guidellm_takes_its_warmup_and_cooldown_and_no_other_harness_does() {
        let o = HarnessOptions {
            warmup: Some(0.1),
            cooldown: Some(16.0),
            ..opts()
        };
        let r = Harness::Guidellm.run(1024, 128, 8, &o).unwrap();
        assert_eq!(r.client.transient, (Some(0.1), Some(16.0)));
        assert_eq!(r.client.warmup_requests, 0, "no requests are sent apart");
        assert!(
            o.words().contains("warmup=0.1 cooldown=16"),
            "{}",
            o.words()
        );
        assert_eq!(
            Harness::Guidellm
                .run(1024, 128, 8, &opts())
                .unwrap()
                .client
                .transient,
            (None, None)
        );
        for bad in [-1.0, f64::INFINITY, f64::NAN] {
            let o = HarnessOptions {
                cooldown: Some(bad),
                ..opts()
            };
            assert_eq!(
                Harness::Guidellm.run(1024, 128, 8, &o).unwrap_err().0,
                "cooldown"
            );
        }
        let e = Harness::AiPerf
            .run(
                1024,
                128,
                8,
                &HarnessOptions {
                    warmup: Some(2.0),
                    ..opts()
                },
            )
            .unwrap_err();
        assert_eq!(e.0, "warmup");
    }

    /// GuideLLM's `--max-seconds` reaches its client; a non-positive, non-finite or over-long one, or
    /// one given to another harness, is refused by name.
    #[test]
    fn guidellm_takes_max_seconds_and_no_other_harness_does() {
        let o = HarnessOptions {
            max_seconds: Some(60.0),
            ..opts()
        };
        let r = Harness::Guidellm.run(1024, 128, 8, &o).unwrap();
        assert_eq!(r.client.max_seconds, Some(60.0));
        assert_eq!(o.words(), "--max-seconds 60");
        for bad in [0.0, -1.0, f64::INFINITY, f64::NAN, MAX_SECONDS * 2.0] {
            let o = HarnessOptions {
                max_seconds: Some(bad),
                ..opts()
            };
            assert_eq!(
                Harness::Guidellm.run(1024, 128, 8, &o).unwrap_err().0,
                "max_seconds"
            );
        }
        let e = Harness::VllmBench.run(1024, 128, 8, &o).unwrap_err();
        assert_eq!(e.0, "max_seconds");
    }

    #[test]
    fn request_budget_warmup_and_server_flags_follow_each_source() {
        assert_eq!(Harness::VllmBench.default_requests(64), Some(1000));
        assert_eq!(Harness::InferenceMax.default_requests(64), Some(640));
        // AIPerf: --request-count 10 whatever the concurrency.
        assert_eq!(Harness::AiPerf.default_requests(64), Some(10));
        // GenAI-Perf: max(10, 2 × concurrency).
        assert_eq!(Harness::GenAiPerf.default_requests(3), Some(10));
        assert_eq!(Harness::GenAiPerf.default_requests(64), Some(128));
        assert_eq!(Harness::Guidellm.default_requests(64), None);
        assert_eq!(Harness::InferenceMax.max_num_seqs(16), Some(16));
        assert_eq!(Harness::VllmBench.max_num_seqs(16), None);
        assert_eq!(Harness::VllmBench.default_range_ratio(), 0.0);
        assert_eq!(Harness::InferenceMax.default_range_ratio(), 0.8);
        let run = |h: Harness, o: &HarnessOptions| h.run(1024, 128, 8, o).unwrap();
        assert_eq!(run(Harness::VllmBench, &opts()).client.warmup_requests, 1);
        assert_eq!(run(Harness::AiPerf, &opts()).client.warmup_requests, 0);
        let w = HarnessOptions {
            warmup_request_count: Some(4),
            ..opts()
        };
        assert_eq!(run(Harness::GenAiPerf, &w).client.warmup_requests, 4);
        assert!(run(Harness::GenAiPerf, &w).client.per_client_quota);
        assert!(!run(Harness::AiPerf, &w).client.per_client_quota);
        assert_eq!(run(Harness::Guidellm, &opts()).client.warmup_requests, 0);
        assert_eq!(
            run(Harness::Guidellm, &opts()).client.definitions,
            BenchDefinitions::Guidellm
        );
        assert_eq!(
            run(Harness::AiPerf, &opts()).client.definitions,
            BenchDefinitions::PerRequestItl
        );
    }

    #[test]
    fn range_ratio_harnesses_draw_fixed_where_the_bounds_meet_and_uniform_otherwise() {
        let f = Harness::VllmBench.run(512, 64, 1, &opts()).unwrap();
        assert_eq!(f.prompt, LengthSpec::fixed(512).build().unwrap());
        let u = Harness::InferenceMax.run(1024, 1024, 1, &opts()).unwrap();
        assert_eq!(u.prompt, LengthSpec::between(819, 1024).build().unwrap());
        assert_eq!((u.prompt_range, u.output_range), ((819, 1024), (819, 1024)));
    }

    fn draws(d: &LengthDist, n: usize) -> Vec<u32> {
        let mut rng = crate::rng::from_u64(7);
        (0..n).map(|_| d.sample(&mut rng)).collect()
    }

    /// AIPerf draws `ceil` of a normal with negatives drawn again; GenAI-Perf truncates toward zero. At
    /// stddev 0 both send exactly the mean; with a stddev the sample's mean is the nominal length plus
    /// half a token (ceil) or less half a token (truncation), and its spread the stddev.
    #[test]
    fn aiperf_and_genai_perf_draw_a_rounded_normal() {
        let fixed = Harness::AiPerf.run(550, 200, 4, &opts()).unwrap();
        assert_eq!(fixed.prompt, LengthSpec::fixed(550).build().unwrap());
        let sd = HarnessOptions {
            synthetic_input_tokens_stddev: Some(50.0),
            output_tokens_stddev: Some(20.0),
            ..opts()
        };
        for (h, shift, rounding) in [
            (Harness::AiPerf, 0.5, Rounding::Ceil),
            (Harness::GenAiPerf, -0.5, Rounding::Trunc),
        ] {
            let run = h.run(550, 200, 4, &sd).unwrap();
            match &run.prompt {
                LengthDist::Normal { rounding: r, .. } => assert_eq!(*r, rounding),
                other => panic!("{other:?}"),
            }
            let v = draws(&run.prompt, 100_000);
            let mean = v.iter().map(|&x| f64::from(x)).sum::<f64>() / v.len() as f64;
            let var = v
                .iter()
                .map(|&x| (f64::from(x) - mean).powi(2))
                .sum::<f64>()
                / v.len() as f64;
            assert!((mean - 550.0 - shift).abs() < 0.6, "{h}: {mean}");
            assert!(
                (var.sqrt() / 50.0 - 1.0).abs() < 0.02,
                "{h}: {}",
                var.sqrt()
            );
        }
        // A stddev as large as the mean: AIPerf redraws negatives (mean above the nominal), GenAI-Perf
        // clamps them to the floor of one token.
        let wide = HarnessOptions {
            synthetic_input_tokens_stddev: Some(100.0),
            ..opts()
        };
        let a = draws(
            &Harness::AiPerf.run(100, 10, 1, &wide).unwrap().prompt,
            50_000,
        );
        let g = draws(
            &Harness::GenAiPerf.run(100, 10, 1, &wide).unwrap().prompt,
            50_000,
        );
        let ones = |v: &[u32]| v.iter().filter(|&&x| x == 1).count() as f64 / v.len() as f64;
        assert!(ones(&a) < 0.01, "{}", ones(&a));
        // P(x < 2) for N(100, 100) is 0.164 (truncation maps [0, 2) and below zero to one token).
        assert!((ones(&g) - 0.164).abs() < 0.01, "{}", ones(&g));
        let bad = HarnessOptions {
            output_tokens_stddev: Some(-1.0),
            ..opts()
        };
        assert_eq!(
            Harness::AiPerf.run(100, 10, 1, &bad).unwrap_err().0,
            "output_tokens_stddev"
        );
    }

    /// GuideLLM's `IntegerRangeSampler`: without a stdev, uniform integers between the bounds (each
    /// defaulting to the mean); with one, a Gaussian clamped to [max(1, mean − 5 sd), mean + 5 sd] and
    /// rounded half to even.
    #[test]
    fn guidellm_draws_like_its_integer_range_sampler() {
        let plain = Harness::Guidellm.run(256, 128, 1, &opts()).unwrap();
        assert_eq!(plain.prompt, LengthSpec::fixed(256).build().unwrap());
        let upper = HarnessOptions {
            prompt_tokens_max: Some(PositiveInt(300)),
            ..opts()
        };
        let u = Harness::Guidellm.run(256, 128, 1, &upper).unwrap();
        assert_eq!(u.prompt, LengthSpec::between(256, 300).build().unwrap());
        let sd = HarnessOptions {
            output_tokens_stdev: Some(PositiveInt(40)),
            ..opts()
        };
        let g = Harness::Guidellm.run(256, 128, 1, &sd).unwrap();
        assert_eq!(g.output_range, (1, 328));
        assert_eq!(
            g.output,
            LengthDist::Normal {
                mean: 128.0,
                sd: 40.0,
                rounding: Rounding::HalfEven,
                redraw_negative: false,
                min: 1,
                max: 328
            }
        );
        assert_eq!(2.5f64.round_ties_even(), 2.0);
        let crossed = HarnessOptions {
            prompt_tokens_min: Some(PositiveInt(400)),
            ..opts()
        };
        assert_eq!(
            Harness::Guidellm.run(256, 128, 1, &crossed).unwrap_err().0,
            "prompt_tokens_min"
        );
    }

    #[test]
    fn an_option_of_another_harness_is_refused_by_name() {
        let o = HarnessOptions {
            prompt_tokens_stdev: Some(PositiveInt(3)),
            ..opts()
        };
        let (key, m) = Harness::AiPerf.run(100, 10, 1, &o).unwrap_err();
        assert_eq!(key, "prompt_tokens_stdev");
        assert!(m.contains("not an option of aiperf"), "{m}");
        let r = HarnessOptions {
            random_range_ratio: Some(0.5),
            ..opts()
        };
        assert_eq!(
            Harness::Guidellm.run(100, 10, 1, &r).unwrap_err().0,
            "random_range_ratio"
        );
    }

    #[test]
    fn names_round_trip_and_unknown_ones_are_listed() {
        for h in Harness::ALL {
            assert_eq!(h.as_str().parse::<Harness>().unwrap(), h);
        }
        let e = "locust".parse::<Harness>().unwrap_err();
        assert!(
            e.contains("vllm-bench, inferencemax, aiperf, genai-perf, guidellm"),
            "{e}"
        );
    }
}
