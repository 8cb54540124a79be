//! Serving-benchmark clients as their own source defines them: how each draws prompt and output lengths
//! from its nominal `--random-input-len` / `--random-output-len` and `--random-range-ratio`, how many
//! requests it sends by default, and the server flags its published runs set that change the engine.
//!
//! A harness only shapes the workload of the closed loop that [`crate::estimate`] already runs (one
//! client per concurrency slot, the next request sent when one finishes, a warm-up request first, and
//! TTFT, TPOT and ITL as `vllm bench serve` computes them, [`crate::metrics::bench`]): both harnesses
//! below share that client code, and differ in their length draws, their request budget and the server.
//! `docs/benchmark-client.md` cites the source lines.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::workload::dist::LengthSpec;

/// A benchmark client whose workload fleetsim reproduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
}

impl Harness {
    /// Every harness, as `--harness` names them.
    pub const ALL: [Harness; 2] = [Harness::VllmBench, Harness::InferenceMax];

    /// The name `--harness` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Harness::VllmBench => "vllm-bench",
            Harness::InferenceMax => "inferencemax",
        }
    }

    /// `--random-range-ratio` when the run does not give one.
    pub fn default_range_ratio(self) -> f64 {
        match self {
            Harness::VllmBench => 0.0,
            Harness::InferenceMax => 0.8,
        }
    }

    /// `--num-prompts` when the run does not give one, at `concurrency` clients.
    pub fn default_requests(self, concurrency: u32) -> u32 {
        match self {
            Harness::VllmBench => 1000,
            Harness::InferenceMax => concurrency.saturating_mul(10),
        }
    }

    /// The server's `--max-num-seqs` in this harness's published runs, if it sets one.
    pub fn max_num_seqs(self, concurrency: u32) -> Option<u32> {
        match self {
            Harness::VllmBench => None,
            Harness::InferenceMax => Some(concurrency),
        }
    }

    /// Inclusive bounds of a length drawn for nominal `len` at range ratio `r`, or why `r` is out of the
    /// harness's domain. A bound of 0 becomes 1 (the server always sees at least one token).
    pub fn bounds(self, len: u32, r: f64) -> Result<(u32, u32), String> {
        let l = f64::from(len);
        let (lo, hi) = match self {
            Harness::VllmBench => {
                if !(0.0..1.0).contains(&r) {
                    return Err(format!(
                        "--random-range-ratio must be in [0, 1) for vllm-bench, got {r}"
                    ));
                }
                ((l * (1.0 - r)).floor(), (l * (1.0 + r)).ceil())
            }
            Harness::InferenceMax => {
                if !(0.0..=1.0).contains(&r) {
                    return Err(format!(
                        "--random-range-ratio must be in [0, 1] for inferencemax, got {r}"
                    ));
                }
                ((l * r).trunc(), l)
            }
        };
        Ok(((lo as u32).max(1), (hi as u32).max(1)))
    }

    /// The length distribution for nominal `len` at range ratio `r` (fixed where the bounds meet).
    pub fn lengths(self, len: u32, r: f64) -> Result<LengthSpec, String> {
        let (min, max) = self.bounds(len, r)?;
        Ok(LengthSpec::between(min, max))
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
    use crate::config::PositiveInt;
    use crate::workload::dist::DistKind;

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

    #[test]
    fn request_budget_and_server_flags() {
        assert_eq!(Harness::VllmBench.default_requests(64), 1000);
        assert_eq!(Harness::InferenceMax.default_requests(64), 640);
        assert_eq!(Harness::InferenceMax.max_num_seqs(16), Some(16));
        assert_eq!(Harness::VllmBench.max_num_seqs(16), None);
        assert_eq!(Harness::VllmBench.default_range_ratio(), 0.0);
        assert_eq!(Harness::InferenceMax.default_range_ratio(), 0.8);
    }

    #[test]
    fn lengths_are_fixed_where_the_bounds_meet_and_uniform_otherwise() {
        let f = Harness::VllmBench.lengths(512, 0.0).unwrap();
        assert_eq!(f.dist, Some(DistKind::Fixed));
        assert_eq!(f.tokens, Some(PositiveInt(512)));
        let u = Harness::InferenceMax.lengths(1024, 0.8).unwrap();
        assert_eq!(u.dist, Some(DistKind::Uniform));
        assert_eq!(
            (u.min, u.max),
            (Some(PositiveInt(819)), Some(PositiveInt(1024)))
        );
    }

    #[test]
    fn names_round_trip_and_unknown_ones_are_listed() {
        for h in Harness::ALL {
            assert_eq!(h.as_str().parse::<Harness>().unwrap(), h);
        }
        let e = "guidellm".parse::<Harness>().unwrap_err();
        assert!(e.contains("vllm-bench, inferencemax"), "{e}");
    }
}
