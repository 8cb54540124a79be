//! Recovery after each fault, derived from the time series (ARCHITECTURE §1.7).
//!
//! For a fault at time `t` in window `k`:
//! - the **baseline** is the TTFT distribution and hit rate of requests that arrived in the windows of the
//!   `recovery_baseline` before window `k`;
//! - the fleet has **recovered** at the start `T` of the first span of windows `[T, T + recovery_hold)`,
//!   from window `k + 1` on and within the arrival window, in which every window completed requests, no
//!   request failed, and the p95 TTFT of the requests that arrived in the span is within
//!   `(1 + recovery_tolerance) ×` the baseline p95. (The p95 of one 10-second window of a few hundred
//!   requests scatters by tens of percent in a healthy fleet; over the hold period it is stable, as a
//!   dashboard's one-minute p95 is.) `time_to_recover_s` is `T − t`. With no such span the fault is
//!   reported as not recovered;
//! - the **worst window** is the highest windowed p95 TTFT from window `k` to the recovery (or to the end);
//! - requests failed, retried, sessions reset and failure recompute are summed over the windows from `k`
//!   to the recovery (or to the end). Faults close together share windows, so their counts overlap.

use serde::{Deserialize, Serialize};

use super::summary::round;
use super::timeseries::{LogHist, TimeSeries};
use crate::time::SimTime;

/// What one fault cost and how long the fleet took to get over it (`summary.json` `recovery[]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Recovery {
    /// The fault, e.g. `crash w3`.
    pub fault: String,
    pub kind: String,
    pub at_s: f64,
    pub baseline_ttft_p50_ms: Option<f64>,
    pub baseline_ttft_p95_ms: Option<f64>,
    pub baseline_hit_rate: Option<f64>,
    /// The worst window after the fault: its start and p95 TTFT, and the lowest windowed hit rate.
    pub worst_window_start_s: Option<f64>,
    pub worst_window_ttft_p95_ms: Option<f64>,
    pub worst_window_hit_rate: Option<f64>,
    pub requests_failed: u64,
    pub requests_retried: u64,
    pub sessions_reset: u64,
    /// Tokens recomputed because of failures (causes `failure` and `migrated`).
    pub recompute_tokens: u64,
    pub recovered: bool,
    /// `null` when the fleet did not recover within the run.
    pub time_to_recover_s: Option<f64>,
}

/// The recovery of every fault in `ts`, for a run whose arrivals stop at `arrivals_end`.
pub fn analyse(ts: &TimeSeries, arrivals_end: SimTime) -> Vec<Recovery> {
    let spec = &ts.spec;
    let width = spec.window.0.max(1);
    let last = ts
        .index(SimTime(arrivals_end.0.saturating_sub(1)))
        .min(ts.windows.len().saturating_sub(1));
    let baseline_windows = (spec.recovery_baseline.0.div_ceil(width) as usize).max(1);
    let hold = (spec.recovery_hold.0.div_ceil(width) as usize).max(1);
    let tol = 1.0 + spec.recovery_tolerance.0;
    let p95 = |i: usize| ts.windows.get(i).and_then(|w| w.ttft.quantile(0.95));
    ts.faults
        .iter()
        .map(|f| {
            let k = ts.index(f.at);
            let mut base = LogHist::default();
            let (mut prompt, mut cached) = (0u64, 0u64);
            for w in &ts.windows
                [k.saturating_sub(baseline_windows).min(ts.windows.len())..k.min(ts.windows.len())]
            {
                base.merge(&w.ttft);
                prompt += w.prompt_tokens;
                cached += w.cached_tokens;
            }
            let base_p95 = base.quantile(0.95);
            let recovered_span = |i: usize| {
                let span = &ts.windows[i..i + hold];
                let mut h = LogHist::default();
                for w in span {
                    h.merge(&w.ttft);
                }
                span.iter().all(|w| w.completions > 0 && w.failed == 0)
                    && matches!((h.quantile(0.95), base_p95), (Some(p), Some(b)) if p <= tol * b)
            };
            let recovered_at = (k + 1..)
                .take_while(|&i| i + hold <= last + 1)
                .find(|&i| recovered_span(i));
            let end = recovered_at
                .unwrap_or(ts.windows.len())
                .min(ts.windows.len());
            let span = k.min(end)..end;
            let mut worst: Option<(usize, f64)> = None;
            let mut worst_hit: Option<f64> = None;
            let (mut failed, mut retried, mut resets, mut recompute) = (0, 0, 0, 0);
            for j in span.clone() {
                let w = &ts.windows[j];
                if let Some(p) = p95(j)
                    && worst.is_none_or(|(_, q)| p > q)
                {
                    worst = Some((j, p));
                }
                if w.prompt_tokens > 0 {
                    let h = w.cached_tokens as f64 / w.prompt_tokens as f64;
                    worst_hit = Some(worst_hit.map_or(h, |x: f64| x.min(h)));
                }
                failed += w.failed;
                retried += w.retried;
                resets += w.resets;
                recompute += w.failure_recompute;
            }
            let ms = |ns: f64| round(ns / 1e6, 6);
            Recovery {
                fault: f.label.clone(),
                kind: f.kind.to_string(),
                at_s: round(f.at.as_secs_f64(), 9),
                baseline_ttft_p50_ms: base.quantile(0.5).map(ms),
                baseline_ttft_p95_ms: base_p95.map(ms),
                baseline_hit_rate: (prompt > 0).then(|| round(cached as f64 / prompt as f64, 6)),
                worst_window_start_s: worst.map(|(j, _)| round(ts.start(j).as_secs_f64(), 9)),
                worst_window_ttft_p95_ms: worst.map(|(_, p)| ms(p)),
                worst_window_hit_rate: worst_hit.map(|h| round(h, 6)),
                requests_failed: failed,
                requests_retried: retried,
                sessions_reset: resets,
                recompute_tokens: recompute,
                recovered: recovered_at.is_some(),
                time_to_recover_s: recovered_at
                    .map(|i| round(ts.start(i).0.saturating_sub(f.at.0) as f64 / 1e9, 9)),
            }
        })
        .collect()
}
