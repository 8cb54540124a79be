//! What a serving benchmark client measures, with the definitions of the client being imitated.
//!
//! Every client times a request from just before it sends it to the chunks it receives: TTFT is the first
//! chunk's arrival less the send, E2E the last chunk's. They differ in what they derive from those
//! ([`BenchDefinitions`]):
//!
//! - `vllm bench serve` (vllm/benchmarks/serve.py, `calculate_metrics`; InferenceMAX's script is the same
//!   code): TPOT is `(E2E − TTFT) / (output tokens − 1)` per request with more than one output token; ITL
//!   is the gap between consecutive chunks, averaged over every gap of every request (so the mean ITL is
//!   `Σ (E2E − TTFT) / Σ (output tokens − 1)`). Means are over requests; percentiles are NumPy's default
//!   (linear interpolation between order statistics).
//! - AIPerf and GenAI-Perf (`inter_token_latency_metric.py`; `llm_profile_data_parser.py`): no TPOT of
//!   their own; their inter-token latency is the same per-request `(E2E − TTFT) / (OSL − 1)` over requests
//!   with at least two output tokens, and its mean is the mean over requests. `tpot_ms` holds it, and
//!   `itl_mean_ms` is its mean. Percentiles are NumPy's default.
//! - GuideLLM (v0.7.3, `schemas/request_stats.py`, `schemas/statistics.py`): its time per output token
//!   includes the first, `E2E / output tokens`, weighted by output tokens (mean `Σ E2E / Σ output`); its
//!   ITL is `(E2E − TTFT) / (output − 1)` weighted by `output − 1` (the pooled mean above). Percentiles
//!   are the first value whose cumulative weight reaches the quantile (no interpolation), weighted as the
//!   mean is. Output throughput is output tokens over the span from the earliest first token to the
//!   latest last token.
//!
//! The warm-up requests a client sends first are not counted: [`BenchReport::warmup`] holds them apart.
//!
//! Invariant: every request in the report completed; `ttft ≤ e2e` for each. Reported values are rounded
//! to 6 decimals (as `summary.json`'s), so the same run gives the same bytes.

use serde::{Deserialize, Serialize};

use super::summary::round;

/// Whose metric definitions a benchmark report follows (module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BenchDefinitions {
    /// `vllm bench serve`'s, also InferenceMAX's.
    #[default]
    VllmBench,
    /// AIPerf's and GenAI-Perf's: the inter-token latency per request, averaged over requests.
    PerRequestItl,
    /// GuideLLM's: token-weighted TPOT that includes the first token, weighted percentiles.
    Guidellm,
}

impl BenchDefinitions {
    /// Whether these are `vllm bench serve`'s (the default, left out of reports).
    pub fn is_vllm_bench(&self) -> bool {
        *self == BenchDefinitions::VllmBench
    }
}

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

    /// The weighted mean and GuideLLM's weighted percentiles of `(value, weight)` pairs: the first value,
    /// in ascending order, at which the cumulative share of the weight reaches the quantile. Pairs of zero
    /// weight drop out; zeros when no weight is left.
    pub fn weighted(pairs: &[(f64, f64)]) -> Self {
        let mut v: Vec<(f64, f64)> = pairs.iter().copied().filter(|p| p.1 > 0.0).collect();
        let total: f64 = v.iter().map(|p| p.1).sum();
        if v.is_empty() || total <= 0.0 {
            return BenchStat::default();
        }
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        let at = |q: f64| {
            let mut cumulative = 0.0;
            for &(value, w) in &v {
                cumulative += w / total;
                if cumulative >= q {
                    return value;
                }
            }
            v[v.len() - 1].0
        };
        BenchStat {
            mean: round(v.iter().map(|p| p.0 * p.1).sum::<f64>() / total, 6),
            p50: round(at(0.5), 6),
            p99: round(at(0.99), 6),
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

fn is_one(n: &u64) -> bool {
    *n == 1
}

/// The warm-up requests, as the client saw them: means over them, ms.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Warmup {
    pub ttft_ms: f64,
    pub e2e_ms: f64,
    /// Warm-up requests completed (written when not 1).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub requests: u64,
}

fn one() -> u64 {
    1
}

/// One benchmark run's client-side metrics.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    /// Whose definitions the figures follow (written when not `vllm bench serve`'s).
    #[serde(default, skip_serializing_if = "BenchDefinitions::is_vllm_bench")]
    pub definitions: BenchDefinitions,
    /// Completed benchmark requests (the warm-up excluded).
    pub requests: u64,
    pub ttft_ms: BenchStat,
    /// Time per output token as the client defines it (AIPerf and GenAI-Perf: their inter-token latency).
    pub tpot_ms: BenchStat,
    /// Mean inter-token latency as the client defines it.
    pub itl_mean_ms: f64,
    pub e2e_ms: BenchStat,
    /// From the first benchmark send to the last benchmark response, seconds.
    pub duration_s: f64,
    /// Output tokens of the benchmark requests per second, over the client's window.
    pub output_tokens_per_s: f64,
    pub warmup: Option<Warmup>,
    /// GuideLLM with a warm-up or cool-down: its measured window; the figures above count only the
    /// requests that overlap it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<MeasuredWindow>,
    /// GuideLLM with `--max-seconds`: requests still streaming when it ran out, cancelled and in none
    /// of the figures (its "incomplete" requests).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cancelled: u64,
}

/// `skip_serializing_if` for counts written only when not 0.
pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// GuideLLM's measured window ([`BenchLog::measured`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeasuredWindow {
    /// Its start and end, seconds from the start of the run.
    pub start_s: f64,
    pub end_s: f64,
    /// Benchmark requests completed in all, in the window or not (`requests` counts those in it).
    pub completed: u64,
}

impl BenchReport {
    /// Benchmark requests completed, whether the figures count them or not.
    pub fn completed(&self) -> u64 {
        self.window.as_ref().map_or(self.requests, |w| w.completed)
    }
}

/// One completed benchmark request: when it was sent, saw its first chunk and its last (seconds), and
/// its output tokens.
#[derive(Clone, Copy, Debug)]
struct Timed {
    output: u32,
    sent_s: f64,
    first_s: f64,
    end_s: f64,
}

impl Timed {
    /// Time to first token, ms from its send.
    fn ttft(&self) -> f64 {
        (self.first_s - self.sent_s) * 1e3
    }
    /// End to end, ms from its send.
    fn e2e(&self) -> f64 {
        (self.end_s - self.sent_s) * 1e3
    }
}

/// GuideLLM's warm-up and cool-down (its `TransientPhaseConfig`): in requests for a run bounded only by
/// a request count, in seconds for one bounded by `--max-seconds` (its default mode,
/// `prefer_duration`, takes the duration whenever the run has one); `None` where a phase is not set.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TransientPhases {
    pub warmup: Option<u64>,
    pub cooldown: Option<u64>,
    /// Duration mode: the phases in seconds and the run's length.
    pub seconds: Option<PhaseSeconds>,
}

/// GuideLLM's phases of a run bounded by `--max-seconds`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PhaseSeconds {
    pub warmup: Option<f64>,
    pub cooldown: Option<f64>,
    /// `--max-seconds`.
    pub total: f64,
}

impl TransientPhases {
    /// The phases of a run of `requests`, or of `max_seconds` when it has one, from GuideLLM's `warmup`
    /// and `cooldown` values: below 1 a fraction of the requests (of the seconds), from 1 on a count of
    /// requests, truncated (of seconds) (`TransientPhaseConfig.create_from_value` and `compute_limits`,
    /// guidellm v0.7.3 `benchmark/schemas/base.py` L62-157).
    pub fn of(
        warmup: Option<f64>,
        cooldown: Option<f64>,
        requests: u64,
        max_seconds: Option<f64>,
    ) -> Self {
        if let Some(total) = max_seconds {
            let secs = |v: f64| if v < 1.0 { v * total } else { v };
            return TransientPhases {
                warmup: None,
                cooldown: None,
                seconds: (warmup.is_some() || cooldown.is_some()).then_some(PhaseSeconds {
                    warmup: warmup.map(secs),
                    cooldown: cooldown.map(secs),
                    total,
                }),
            };
        }
        let count = |v: f64| {
            if v < 1.0 {
                (v * requests as f64) as u64
            } else {
                v as u64
            }
        };
        TransientPhases {
            warmup: warmup.map(count),
            cooldown: cooldown.map(count),
            seconds: None,
        }
    }

    /// Whether either phase is set.
    pub fn is_set(&self) -> bool {
        self.warmup.is_some() || self.cooldown.is_some() || self.seconds.is_some()
    }
}

/// Collects client-side timings as requests complete.
#[derive(Clone, Debug, Default)]
pub struct BenchLog {
    definitions: BenchDefinitions,
    done: Vec<Timed>,
    output_tokens: u64,
    first_send_s: Option<f64>,
    first_token_s: Option<f64>,
    last_end_s: f64,
    warmup: Vec<(f64, f64)>,
    phases: TransientPhases,
    /// When the benchmark started (its first send), seconds, if the client said so.
    origin_s: Option<f64>,
    cancelled: u64,
}

impl BenchLog {
    /// An empty log that reports with `definitions`.
    pub fn new(definitions: BenchDefinitions) -> Self {
        BenchLog {
            definitions,
            ..BenchLog::default()
        }
    }

    /// The log of a GuideLLM run with warm-up and cool-down `phases` ([`BenchLog::measured`]).
    pub fn with_phases(mut self, phases: TransientPhases) -> Self {
        self.phases = phases;
        self
    }

    /// A completed benchmark request: sent at `sent_s`, first and last chunk seen at `first_s` and
    /// `end_s` (seconds), with `output` tokens. Requests are recorded in the order they complete.
    pub fn record(&mut self, sent_s: f64, first_s: f64, end_s: f64, output: u32) {
        self.done.push(Timed {
            output,
            sent_s,
            first_s,
            end_s,
        });
        self.output_tokens += u64::from(output);
        self.first_send_s = Some(self.first_send_s.map_or(sent_s, |f| f.min(sent_s)));
        self.first_token_s = Some(self.first_token_s.map_or(first_s, |f| f.min(first_s)));
        self.last_end_s = self.last_end_s.max(end_s);
    }

    /// The benchmark starts at `s` seconds (GuideLLM's phases in seconds count from it).
    pub fn set_origin(&mut self, s: f64) {
        self.origin_s = Some(s);
    }

    /// A benchmark request cancelled when `--max-seconds` ran out, kept out of the statistics.
    pub fn record_cancelled(&mut self) {
        self.cancelled += 1;
    }

    /// A warm-up request, kept out of the statistics.
    pub fn record_warmup(&mut self, sent_s: f64, first_s: f64, end_s: f64) {
        self.warmup
            .push(((first_s - sent_s) * 1e3, (end_s - sent_s) * 1e3));
    }

    /// GuideLLM's measurement window over the requests recorded, `(start, end)` in seconds, and the
    /// requests it keeps: those that end at or after its start and were sent at or before its end
    /// (`get_within_range`, guidellm v0.7.3 `benchmark/schemas/accumulator.py` L617-641).
    ///
    /// Its start (`GenerativeBenchmarkTimings.update_estimate` and `compute_transition_time`, `base.py`
    /// L160-256): with a warm-up of W requests, every request update the benchmark sees while exactly
    /// W + 1 requests have completed sets it to that request's start, so it ends as the start of the
    /// request whose update came last before the (W + 2)-th completion: the (W + 1)-th completion
    /// itself, a request sent after it, or one whose first token arrived after it. Without a warm-up
    /// it is the first send. Its end: with a cool-down of C requests, the completion of the
    /// (N − C − 1)-th request (when C + 1 remain of the N); else the last response.
    ///
    /// In seconds (a run bounded by `--max-seconds`), the window is simply its start plus the warm-up
    /// and its start plus `--max-seconds` less the cool-down (`compute_transition_time`'s duration
    /// branch); an unset phase leaves the first send or the last response.
    pub fn measured(&self) -> (f64, f64, Vec<usize>) {
        let n = self.done.len();
        let first_send = self.first_send_s.unwrap_or(0.0);
        let last_end = self.last_end_s;
        let overlapping = |start: f64, end: f64| -> Vec<usize> {
            (0..n)
                .filter(|&i| self.done[i].end_s >= start && self.done[i].sent_s <= end)
                .collect()
        };
        if let Some(p) = self.phases.seconds {
            let origin = self.origin_s.unwrap_or(first_send);
            let start = p.warmup.map_or(first_send, |w| origin + w);
            let end = p.cooldown.map_or(last_end, |c| origin + p.total - c);
            return (start, end, overlapping(start, end));
        }
        let start = match self.phases.warmup {
            Some(w) if w < n as u64 => {
                let w = w as usize;
                let from = self.done[w].end_s;
                let to = self.done.get(w + 1).map_or(f64::INFINITY, |t| t.end_s);
                let mut latest = (from, self.done[w].sent_s);
                for t in &self.done {
                    for at in [t.sent_s, t.first_s] {
                        if at >= from && at < to && at >= latest.0 {
                            latest = (at, t.sent_s);
                        }
                    }
                }
                latest.1
            }
            _ => first_send,
        };
        let end = match self.phases.cooldown {
            Some(c) if n >= 2 && c <= (n - 2) as u64 => self.done[n - 2 - c as usize].end_s,
            _ => last_end,
        };
        (start, end, overlapping(start, end))
    }

    /// The report so far.
    pub fn report(&self) -> BenchReport {
        if self.definitions == BenchDefinitions::Guidellm && self.phases.is_set() {
            let (start, end, kept) = self.measured();
            let mut log = BenchLog::new(self.definitions);
            log.warmup.clone_from(&self.warmup);
            for &i in &kept {
                let t = self.done[i];
                log.record(t.sent_s, t.first_s, t.end_s, t.output);
            }
            let mut r = log.report();
            r.cancelled = self.cancelled;
            r.window = Some(MeasuredWindow {
                start_s: round(start, 9),
                end_s: round(end, 9),
                completed: self.done.len() as u64,
            });
            return r;
        }
        let duration_s = self
            .first_send_s
            .map_or(0.0, |f| (self.last_end_s - f).max(0.0));
        let ttft: Vec<f64> = self.done.iter().map(Timed::ttft).collect();
        let e2e: Vec<f64> = self.done.iter().map(Timed::e2e).collect();
        let multi = || self.done.iter().filter(|t| t.output > 1);
        let per_request_tpot: Vec<f64> = multi()
            .map(|t| (t.e2e() - t.ttft()) / f64::from(t.output - 1))
            .collect();
        let gaps: u64 = multi().map(|t| u64::from(t.output - 1)).sum();
        let pooled_itl = if gaps > 0 {
            round(
                multi().map(|t| t.e2e() - t.ttft()).sum::<f64>() / gaps as f64,
                6,
            )
        } else {
            0.0
        };
        let per_second = |span: f64| {
            if span > 0.0 {
                round(self.output_tokens as f64 / span, 6)
            } else {
                0.0
            }
        };
        let (ttft_ms, tpot_ms, itl_mean_ms, e2e_ms, output_tokens_per_s) = match self.definitions {
            BenchDefinitions::VllmBench => (
                BenchStat::of(&ttft),
                BenchStat::of(&per_request_tpot),
                pooled_itl,
                BenchStat::of(&e2e),
                per_second(duration_s),
            ),
            BenchDefinitions::PerRequestItl => {
                let itl = BenchStat::of(&per_request_tpot);
                let mean = itl.mean;
                (
                    BenchStat::of(&ttft),
                    itl,
                    mean,
                    BenchStat::of(&e2e),
                    per_second(duration_s),
                )
            }
            BenchDefinitions::Guidellm => {
                let unit = |v: &[f64]| v.iter().map(|&x| (x, 1.0)).collect::<Vec<_>>();
                let tpot: Vec<(f64, f64)> = self
                    .done
                    .iter()
                    .filter(|t| t.output > 0)
                    .map(|t| (t.e2e() / f64::from(t.output), f64::from(t.output)))
                    .collect();
                let span = self
                    .first_token_s
                    .map_or(0.0, |f| (self.last_end_s - f).max(0.0));
                (
                    BenchStat::weighted(&unit(&ttft)),
                    BenchStat::weighted(&tpot),
                    pooled_itl,
                    BenchStat::weighted(&unit(&e2e)),
                    per_second(span),
                )
            }
        };
        let warmup = (!self.warmup.is_empty()).then(|| {
            let n = self.warmup.len() as f64;
            Warmup {
                ttft_ms: round(self.warmup.iter().map(|w| w.0).sum::<f64>() / n, 6),
                e2e_ms: round(self.warmup.iter().map(|w| w.1).sum::<f64>() / n, 6),
                requests: self.warmup.len() as u64,
            }
        });
        BenchReport {
            definitions: self.definitions,
            requests: self.done.len() as u64,
            ttft_ms,
            tpot_ms,
            itl_mean_ms,
            e2e_ms,
            duration_s: round(duration_s, 9),
            output_tokens_per_s,
            warmup,
            window: None,
            cancelled: self.cancelled,
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

    /// The same three requests as above, as AIPerf and GenAI-Perf report them: their inter-token
    /// latency is the per-request value, so its mean is the mean over requests, not over gaps.
    #[test]
    fn aiperf_and_genai_perf_average_the_inter_token_latency_over_requests() {
        let mut log = BenchLog::new(BenchDefinitions::PerRequestItl);
        log.record(0.0, 0.100, 0.200, 11);
        log.record(0.0, 0.050, 0.050, 1);
        log.record(1.0, 1.010, 1.040, 2);
        let r = log.report();
        // Per request (the one-token request has none): 10 ms and 30 ms.
        assert!((r.tpot_ms.mean - 20.0).abs() < 1e-9, "{r:?}");
        assert!((r.itl_mean_ms - 20.0).abs() < 1e-9);
        assert!((r.tpot_ms.p50 - 20.0).abs() < 1e-9);
        assert!((r.output_tokens_per_s - 14.0 / 1.04).abs() < 1e-6);
        assert_eq!(r.definitions, BenchDefinitions::PerRequestItl);
    }

    /// Two streams, six requests of 10 tokens, each sent as the previous one on its stream completes,
    /// recorded in completion order: (sent, first, end).
    fn two_streams(phases: TransientPhases, next_send_delay: f64) -> BenchLog {
        let mut log = BenchLog::new(BenchDefinitions::Guidellm).with_phases(phases);
        let d = next_send_delay;
        for (sent, first, end) in [
            (0.0, 0.1, 1.0),
            (0.0, 0.2, 1.5),
            (1.0 + d, 1.1, 2.0),
            (1.5 + d, 1.6, 2.6),
            (2.0 + d, 2.1, 3.0),
            (2.6 + d, 2.7, 3.5),
        ] {
            log.record(sent, first, end, 10);
        }
        log
    }

    #[test]
    fn guidellm_phases_count_fractions_and_requests_as_its_transient_phase_config() {
        let p = TransientPhases::of(Some(0.1), Some(5.0), 100, None);
        assert_eq!((p.warmup, p.cooldown), (Some(10), Some(5)));
        assert_eq!(
            TransientPhases::of(Some(2.7), None, 100, None).warmup,
            Some(2)
        );
        assert_eq!(
            TransientPhases::of(Some(0.0), None, 100, None).warmup,
            Some(0)
        );
        // 1 is a count, not the whole run (`value if value >= 1.0`).
        assert_eq!(
            TransientPhases::of(Some(1.0), None, 100, None).warmup,
            Some(1)
        );
        assert_eq!(
            TransientPhases::of(None, Some(0.999), 100, None).cooldown,
            Some(99)
        );
        assert!(!TransientPhases::of(None, None, 100, None).is_set());
    }

    /// `cancelled` is written only when a request was cancelled, so other runs' `summary.json` keeps its
    /// bytes.
    #[test]
    fn cancelled_requests_are_written_only_when_there_are_some() {
        let mut log = BenchLog::new(BenchDefinitions::Guidellm);
        log.record(0.0, 0.1, 1.0, 10);
        let json = |l: &BenchLog| serde_json::to_value(l.report()).unwrap();
        assert!(json(&log).get("cancelled").is_none());
        log.record_cancelled();
        log.record_cancelled();
        assert_eq!(json(&log)["cancelled"], 2);
        assert_eq!(log.report().requests, 1);
    }

    /// With `--max-seconds` GuideLLM's phases are seconds (`prefer_duration`): below 1 a fraction of
    /// the run's length, from 1 seconds, and the counts are unset.
    #[test]
    fn guidellm_phases_are_seconds_in_a_run_bounded_by_max_seconds() {
        let p = TransientPhases::of(Some(0.1), Some(5.0), 100, Some(60.0));
        assert_eq!((p.warmup, p.cooldown), (None, None));
        let s = p.seconds.unwrap();
        assert_eq!(
            (s.warmup, s.cooldown, s.total),
            (Some(6.0), Some(5.0), 60.0)
        );
        assert!(p.is_set());
        assert!(!TransientPhases::of(None, None, 100, Some(60.0)).is_set());
        // The window: from the start plus the warm-up to the start plus 60 s less the cool-down; a
        // request counts when it overlaps it. Started at 10 s: 16–65 s.
        let mut log = BenchLog::new(BenchDefinitions::Guidellm).with_phases(p);
        log.set_origin(10.0);
        log.record(10.0, 10.1, 15.9, 10); // ends before 16 s: out
        log.record(10.0, 10.2, 16.0, 10); // ends at 16 s: in
        log.record(40.0, 40.1, 50.0, 10); // in
        log.record(65.0, 65.1, 69.0, 10); // sent at 65 s: in
        log.record(65.5, 65.6, 69.5, 10); // sent after 65 s: out
        let (start, end, kept) = log.measured();
        assert_eq!((start, end), (16.0, 65.0));
        assert_eq!(kept, [1, 2, 3]);
        let r = log.report();
        assert_eq!(r.requests, 3);
        assert_eq!(r.window.unwrap().completed, 5);
        // An unset phase leaves the first send (a warm-up alone) or the last response.
        let warm_only = TransientPhases::of(Some(6.0), None, 0, Some(60.0));
        let mut log = BenchLog::new(BenchDefinitions::Guidellm).with_phases(warm_only);
        log.set_origin(0.0);
        log.record(0.0, 0.1, 7.0, 10);
        log.record(7.0, 7.1, 58.0, 10);
        assert_eq!(log.measured().0..log.measured().1, 6.0..58.0);
    }

    /// Hand-worked: a warm-up of 1 opens the window at the start of the request whose update comes
    /// last while exactly 2 requests have completed (the second completes at 1.5 s; before the third
    /// completes at 2.0 s the fourth request is sent at 1.5 s and sees its first token at 1.6 s), so
    /// at 1.5 s, and drops the first request (ended at 1.0 s). A cool-down of 1 closes it at the
    /// fourth completion (2.6 s), when 2 of the 6 remain: every request sent by then overlaps it. A
    /// cool-down of 2 closes it at the third (2.0 s) and drops the last request, sent at 2.6 s.
    #[test]
    fn guidellm_counts_the_requests_that_overlap_its_measured_window() {
        let phases = |w, c| TransientPhases {
            warmup: w,
            cooldown: c,
            seconds: None,
        };
        let (start, end, kept) = two_streams(phases(Some(1), Some(1)), 0.0).measured();
        assert_eq!((start, end), (1.5, 2.6));
        assert_eq!(kept, [1, 2, 3, 4, 5]);
        let (_, end, kept) = two_streams(phases(Some(1), Some(2)), 0.0).measured();
        assert_eq!(end, 2.0);
        assert_eq!(kept, [1, 2, 3, 4]);
        // No phase: the first send to the last response, every request.
        let (start, end, kept) = two_streams(phases(None, None), 0.0).measured();
        assert_eq!((start, end, kept.len()), (0.0, 3.5, 6));
        // `warmup=0` is a phase of 0 requests, not none: the window opens at the last start seen
        // before the second completion, the third request's, sent 0.5 ms after the first completed;
        // so the first request, which ended before it, is dropped.
        let (start, _, kept) = two_streams(phases(Some(0), None), 0.0005).measured();
        assert_eq!(start, 1.0005);
        assert_eq!(kept, [1, 2, 3, 4, 5]);
        // A warm-up of every request leaves the window at the first send.
        let (start, _, _) = two_streams(phases(Some(6), None), 0.0).measured();
        assert_eq!(start, 0.0);
        // Of all but one: the last completion's own update opens it, at that request's send (2.6 s).
        let (start, _, kept) = two_streams(phases(Some(5), None), 0.0).measured();
        assert_eq!((start, kept), (2.6, vec![3, 4, 5]));
        // A cool-down of N − 2 closes it at the first completion; of N − 1 it never closes early.
        let (_, end, kept) = two_streams(phases(None, Some(4)), 0.0).measured();
        assert_eq!((end, kept), (1.0, vec![0, 1, 2]));
        let (_, end, _) = two_streams(phases(None, Some(5)), 0.0).measured();
        assert_eq!(end, 3.5);

        // The report is over the kept requests: 5 of them, mean TTFT (0.2 + 0.1 × 4) / 5 s, and 50
        // tokens from the earliest first token among them (0.2 s) to the last (3.5 s).
        let r = two_streams(phases(Some(1), Some(1)), 0.0).report();
        assert_eq!(r.requests, 5);
        assert_eq!(r.completed(), 6);
        // Either phase alone sets the window: the warm-up drops the first request, the cool-down of 2
        // the last.
        let warm = two_streams(phases(Some(1), None), 0.0).report();
        assert_eq!((warm.requests, warm.completed()), (5, 6));
        let cool = two_streams(phases(None, Some(2)), 0.0).report();
        assert_eq!((cool.requests, cool.completed()), (5, 6));
        let w = r.window.as_ref().unwrap();
        assert_eq!((w.start_s, w.end_s), (1.5, 2.6));
        assert!((r.ttft_ms.mean - 120.0).abs() < 1e-6, "{r:?}");
        assert!((r.output_tokens_per_s - 50.0 / 3.3).abs() < 1e-6, "{r:?}");
    }

    /// GuideLLM: TPOT includes the first token and is weighted by output tokens; ITL weighted by gaps;
    /// percentiles without interpolation; throughput from the first token seen to the last.
    #[test]
    fn guidellm_weights_by_tokens_and_counts_the_first_token_in_tpot() {
        let mut log = BenchLog::new(BenchDefinitions::Guidellm);
        log.record(0.0, 0.100, 0.200, 11);
        log.record(0.0, 0.050, 0.050, 1);
        log.record(1.0, 1.010, 1.040, 2);
        let r = log.report();
        // TPOT per request: 200/11, 50/1, 40/2 ms, weights 11, 1, 2: mean (200 + 50 + 40) / 14.
        assert!((r.tpot_ms.mean - 290.0 / 14.0).abs() < 1e-6, "{r:?}");
        // Sorted: 18.18 (weight 11/14 = 0.786), 20 (0.929), 50 (1.0): p50 is 18.18, p99 is 50.
        assert!((r.tpot_ms.p50 - 200.0 / 11.0).abs() < 1e-6);
        assert!((r.tpot_ms.p99 - 50.0).abs() < 1e-9);
        // ITL: (100 + 30) / (10 + 1), the one-token request weighs nothing.
        assert!((r.itl_mean_ms - 130.0 / 11.0).abs() < 1e-6);
        // TTFT 100, 50, 10 ms, one weight each: the median is the value where 2/3 ≥ 0.5, 50 ms.
        assert!((r.ttft_ms.mean - 160.0 / 3.0).abs() < 1e-6);
        assert!((r.ttft_ms.p50 - 50.0).abs() < 1e-9);
        // 14 tokens from the first token (0.050 s) to the last (1.040 s).
        assert!((r.output_tokens_per_s - 14.0 / 0.99).abs() < 1e-6);
    }

    #[test]
    fn several_warmup_requests_are_reported_as_their_mean() {
        let mut log = BenchLog::default();
        log.record_warmup(0.0, 0.1, 1.0);
        log.record_warmup(0.0, 0.3, 2.0);
        let w = log.report().warmup.unwrap();
        assert_eq!(w.requests, 2);
        assert!((w.ttft_ms - 200.0).abs() < 1e-9 && (w.e2e_ms - 1500.0).abs() < 1e-9);
    }
}
