//! What a staged load generator reports, with inference-perf's definitions (kubernetes-sigs/inference-perf
//! @ b6687e7, `inference_perf/reportgen/base.py`, `summarize_requests`): per stage, and over the whole
//! run (its `summary_lifecycle_metrics`), output throughput is the output tokens of the requests that
//! completed over the time from the first send to the last response, so a stage's drain and the gaps
//! between stages count; TTFT is timed from the send.
//!
//! Invariant: a stage's `completed ≤ requests`; figures are rounded to 6 decimals, so the same run gives
//! the same bytes.

use serde::{Deserialize, Serialize};

use super::bench::BenchStat;
use super::record::{Outcome, RequestRecord};
use super::summary::round;
use crate::time::SimDuration;

/// One stage as the client saw it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageSummary {
    /// Requests per second asked for.
    pub rate: f64,
    /// The stage's sending window, seconds.
    pub duration_s: f64,
    /// Requests sent.
    pub requests: u64,
    /// Requests that completed.
    pub completed: u64,
    /// Output tokens of the completed requests.
    pub output_tokens: u64,
    /// The stage's first send and last response (the drain included), seconds into the run; 0 for a
    /// stage that sent nothing.
    pub start_s: f64,
    pub end_s: f64,
    /// `end_s − start_s`.
    pub span_s: f64,
    /// `output_tokens / span_s`.
    pub output_tokens_per_s: f64,
    /// Time to first token of the completed requests, from the send, ms.
    pub ttft_ms: BenchStat,
}

/// Every stage, and the run as one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageReport {
    /// The stages that began, in order.
    pub stages: Vec<StageSummary>,
    /// Output tokens of every completed request over the time from the first send to the last
    /// response of the run (inference-perf's summary report).
    pub output_tokens_per_s: f64,
}

#[derive(Clone, Debug, Default)]
struct Stage {
    rate: f64,
    duration_s: f64,
    began: bool,
    requests: u64,
    completed: u64,
    output_tokens: u64,
    first_send: Option<f64>,
    last_end: Option<f64>,
    ttft_ms: Vec<f64>,
}

/// Collects per-stage timings as requests are sent and finish.
#[derive(Clone, Debug, Default)]
pub struct StageLog {
    stages: Vec<Stage>,
}

impl StageLog {
    /// A log of the stages `(rate, duration)`, none begun.
    pub fn new(stages: Vec<(f64, SimDuration)>) -> Self {
        StageLog {
            stages: stages
                .into_iter()
                .map(|(rate, d)| Stage {
                    rate,
                    duration_s: d.as_secs_f64(),
                    ..Stage::default()
                })
                .collect(),
        }
    }

    /// Stage `i` began (it is reported even if it sends nothing).
    pub fn begin(&mut self, i: usize) {
        self.stages[i].began = true;
    }

    /// Stage `i` sent a request at `at` seconds.
    pub fn sent(&mut self, i: usize, at: f64) {
        let s = &mut self.stages[i];
        s.requests += 1;
        s.first_send = Some(s.first_send.map_or(at, |f: f64| f.min(at)));
    }

    /// A request of stage `i` finished.
    pub fn finished(&mut self, i: usize, r: &RequestRecord) {
        let s = &mut self.stages[i];
        let end = r.finished.as_secs_f64();
        s.last_end = Some(s.last_end.map_or(end, |l: f64| l.max(end)));
        if r.outcome == Outcome::Completed {
            s.completed += 1;
            s.output_tokens += u64::from(r.output_tokens);
            if let Some(first) = r.first_token {
                s.ttft_ms.push(first.since(r.arrival).as_secs_f64() * 1e3);
            }
        }
    }

    /// The report so far.
    pub fn report(&self) -> StageReport {
        let began: Vec<&Stage> = self.stages.iter().filter(|s| s.began).collect();
        let span = |first: Option<f64>, last: Option<f64>| match (first, last) {
            (Some(f), Some(l)) if l > f => l - f,
            _ => 0.0,
        };
        let rate = |tokens: u64, span: f64| {
            if span > 0.0 {
                round(tokens as f64 / span, 6)
            } else {
                0.0
            }
        };
        let stages = began
            .iter()
            .map(|s| {
                let span_s = span(s.first_send, s.last_end);
                StageSummary {
                    rate: s.rate,
                    duration_s: s.duration_s,
                    requests: s.requests,
                    completed: s.completed,
                    output_tokens: s.output_tokens,
                    start_s: round(s.first_send.unwrap_or(0.0), 9),
                    end_s: round(s.last_end.unwrap_or(0.0), 9),
                    span_s: round(span_s, 6),
                    output_tokens_per_s: rate(s.output_tokens, span_s),
                    ttft_ms: BenchStat::of(&s.ttft_ms),
                }
            })
            .collect();
        let first = began.iter().filter_map(|s| s.first_send).reduce(f64::min);
        let last = began.iter().filter_map(|s| s.last_end).reduce(f64::max);
        let tokens = began.iter().map(|s| s.output_tokens).sum();
        StageReport {
            stages,
            output_tokens_per_s: rate(tokens, span(first, last)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The instant `s` seconds into the run.
    fn secs(s: u64) -> SimTime {
        SimTime::ZERO + SimDuration::from_secs(s)
    }
    use crate::time::SimTime;

    fn record(arrival: u64, first: u64, end: u64, tokens: u32, outcome: Outcome) -> RequestRecord {
        let r = crate::request::Request::new(
            0,
            None,
            secs(arrival),
            tokens,
            vec![crate::request::Segment {
                content: 1,
                tokens: 10,
            }],
        );
        RequestRecord {
            first_token: Some(secs(first)),
            ..crate::workload::test_record(&r, outcome, secs(end))
        }
    }

    /// Hand-computed: stage 0 sends at 1 s and 2 s, its responses end at 5 s and 9 s (100 + 60 tokens):
    /// 160 tokens over 8 s. Stage 1 sends at 11 s, one completed request of 40 tokens ending at 15 s
    /// and one failed (ends at 13 s, counts for the span only): 10 tokens/s. The run: 200 tokens over
    /// 1 s to 15 s = 14.285714 tokens/s. A stage that never began is not reported.
    #[test]
    fn throughput_counts_the_drain_and_the_gaps() {
        let mut log = StageLog::new(vec![
            (2.0, SimDuration::from_secs(1)),
            (1.0, SimDuration::from_secs(1)),
            (5.0, SimDuration::from_secs(1)),
        ]);
        log.begin(0);
        log.sent(0, 1.0);
        log.sent(0, 2.0);
        log.finished(0, &record(1, 3, 5, 100, Outcome::Completed));
        log.finished(0, &record(2, 4, 9, 60, Outcome::Completed));
        log.begin(1);
        log.sent(1, 11.0);
        log.sent(1, 11.0);
        log.finished(1, &record(11, 12, 15, 40, Outcome::Completed));
        log.finished(1, &record(11, 12, 13, 40, Outcome::Failed));
        let r = log.report();
        assert_eq!(r.stages.len(), 2);
        assert_eq!((r.stages[0].requests, r.stages[0].completed), (2, 2));
        assert_eq!(r.stages[0].output_tokens_per_s, 20.0);
        assert_eq!((r.stages[0].start_s, r.stages[0].end_s), (1.0, 9.0));
        assert_eq!(r.stages[0].ttft_ms.mean, 2000.0);
        assert_eq!((r.stages[1].requests, r.stages[1].completed), (2, 1));
        assert_eq!(r.stages[1].output_tokens_per_s, 10.0);
        assert_eq!(r.output_tokens_per_s, 14.285714);
    }
}
