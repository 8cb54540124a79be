//! What a serving benchmark client measures, with `vllm bench serve`'s definitions.
//!
//! `vllm bench serve` (vllm/benchmarks/serve.py, `calculate_metrics`) times each request from just before
//! it sends it to the chunks it receives: TTFT is the first chunk's arrival less the send; E2E is the last
//! chunk's; TPOT is `(E2E − TTFT) / (output tokens − 1)` per request with more than one output token; ITL
//! is the gap between consecutive chunks, averaged over every gap of every request (so the mean ITL is
//! `Σ (E2E − TTFT) / Σ (output tokens − 1)`). Means are over requests; percentiles are NumPy's default
//! (linear interpolation between order statistics). The warm-up request it sends first is not counted:
//! [`BenchReport::warmup`] holds it apart.
//!
//! Invariant: every request in the report completed; `ttft ≤ e2e` for each. Reported values are rounded
//! to 6 decimals (as `summary.json`'s), so the same run gives the same bytes.

use serde::{Deserialize, Serialize};

use super::summary::round;

/// Mean and percentiles of one latency over the benchmark's requests, ms.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BenchStat {
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
}

impl BenchStat {
    /// The mean and NumPy-style (linear) percentiles of `values`; zeros when empty.
    pub fn of(values: &[f64]) -> Self {
        if values.is_empty() {
            return BenchStat::default();
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        BenchStat {
            mean: round(v.iter().sum::<f64>() / v.len() as f64, 6),
            p50: round(percentile(&v, 50.0), 6),
            p99: round(percentile(&v, 99.0), 6),
        }
    }
}

/// `q`-th percentile of sorted `v` by linear interpolation between the order statistics at ranks
/// `q/100 · (n − 1)` (NumPy's default method).
fn percentile(v: &[f64], q: f64) -> f64 {
    let rank = q / 100.0 * (v.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (rank - lo as f64)
}

/// The warm-up request, as the client saw it, ms.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Warmup {
    pub ttft_ms: f64,
    pub e2e_ms: f64,
}

/// One benchmark run's client-side metrics.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    /// Completed benchmark requests (the warm-up excluded).
    pub requests: u64,
    pub ttft_ms: BenchStat,
    pub tpot_ms: BenchStat,
    /// Mean inter-token latency over all gaps of all requests.
    pub itl_mean_ms: f64,
    pub e2e_ms: BenchStat,
    /// From the first benchmark send to the last benchmark response, seconds.
    pub duration_s: f64,
    /// Output tokens of the benchmark requests per second of `duration_s`.
    pub output_tokens_per_s: f64,
    pub warmup: Option<Warmup>,
}

/// Collects client-side timings as requests complete.
#[derive(Clone, Debug, Default)]
pub struct BenchLog {
    ttft: Vec<f64>,
    tpot: Vec<f64>,
    e2e: Vec<f64>,
    gaps_ms: f64,
    gaps: u64,
    output_tokens: u64,
    first_send_s: Option<f64>,
    last_end_s: f64,
    warmup: Option<Warmup>,
}

impl BenchLog {
    /// A completed benchmark request: sent at `sent_s`, first and last chunk seen at `first_s` and
    /// `end_s` (seconds), with `output` tokens.
    pub fn record(&mut self, sent_s: f64, first_s: f64, end_s: f64, output: u32) {
        let ttft = (first_s - sent_s) * 1e3;
        let e2e = (end_s - sent_s) * 1e3;
        self.ttft.push(ttft);
        self.e2e.push(e2e);
        if output > 1 {
            self.tpot.push((e2e - ttft) / f64::from(output - 1));
            self.gaps_ms += e2e - ttft;
            self.gaps += u64::from(output - 1);
        }
        self.output_tokens += u64::from(output);
        self.first_send_s = Some(self.first_send_s.map_or(sent_s, |f| f.min(sent_s)));
        self.last_end_s = self.last_end_s.max(end_s);
    }

    /// The warm-up request, kept out of the statistics.
    pub fn record_warmup(&mut self, sent_s: f64, first_s: f64, end_s: f64) {
        self.warmup = Some(Warmup {
            ttft_ms: (first_s - sent_s) * 1e3,
            e2e_ms: (end_s - sent_s) * 1e3,
        });
    }

    /// The report so far.
    pub fn report(&self) -> BenchReport {
        let duration_s = self
            .first_send_s
            .map_or(0.0, |f| (self.last_end_s - f).max(0.0));
        BenchReport {
            requests: self.ttft.len() as u64,
            ttft_ms: BenchStat::of(&self.ttft),
            tpot_ms: BenchStat::of(&self.tpot),
            itl_mean_ms: if self.gaps > 0 {
                round(self.gaps_ms / self.gaps as f64, 6)
            } else {
                0.0
            },
            e2e_ms: BenchStat::of(&self.e2e),
            duration_s: round(duration_s, 9),
            output_tokens_per_s: if duration_s > 0.0 {
                round(self.output_tokens as f64 / duration_s, 6)
            } else {
                0.0
            },
            warmup: self.warmup.as_ref().map(|w| Warmup {
                ttft_ms: round(w.ttft_ms, 6),
                e2e_ms: round(w.e2e_ms, 6),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate_like_numpy() {
        // numpy.percentile([1, 2, 3, 4], 50) = 2.5; at 99: rank 2.97 → 3 + 0.97 = 3.97.
        let s = BenchStat::of(&[4.0, 1.0, 3.0, 2.0]);
        assert_eq!(s.mean, 2.5);
        assert_eq!(s.p50, 2.5);
        assert!((s.p99 - 3.97).abs() < 1e-12);
        assert_eq!(BenchStat::of(&[]), BenchStat::default());
    }

    #[test]
    fn tpot_excludes_the_first_token_and_itl_averages_over_gaps() {
        let mut log = BenchLog::default();
        // 100 ms to the first token, then 10 more tokens 10 ms apart: TPOT 10 ms.
        log.record(0.0, 0.100, 0.200, 11);
        // A one-token request has a TTFT but no TPOT and no gaps.
        log.record(0.0, 0.050, 0.050, 1);
        // 2 tokens 30 ms apart.
        log.record(1.0, 1.010, 1.040, 2);
        log.record_warmup(0.0, 5.0, 6.0);
        let r = log.report();
        assert_eq!(r.requests, 3);
        assert!((r.tpot_ms.mean - 20.0).abs() < 1e-6, "{r:?}");
        // Gaps: 100 ms over 10 and 30 ms over 1: 130 / 11.
        assert!((r.itl_mean_ms - 130.0 / 11.0).abs() < 1e-6);
        assert!((r.ttft_ms.mean - (100.0 + 50.0 + 10.0) / 3.0).abs() < 1e-6);
        assert!((r.duration_s - 1.04).abs() < 1e-9);
        assert!((r.output_tokens_per_s - 14.0 / 1.04).abs() < 1e-6);
        assert_eq!(r.warmup.unwrap().ttft_ms, 5000.0);
    }
}
