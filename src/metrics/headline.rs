//! The headline numbers of a run, by name: what `compare` tables, and what replications give intervals
//! for. A statistic of an empty set (no request completed, no prompt token served, no fault) is NaN,
//! never 0.

use std::collections::BTreeMap;

use super::Summary;

/// Metric names in table order, with whether lower is better.
pub const METRICS: [(&str, bool); 24] = [
    ("completed", false),
    ("failed", true),
    ("rejected", true),
    ("ttft_p50_ms", true),
    ("ttft_p95_ms", true),
    ("ttft_p99_ms", true),
    ("tpot_p50_ms", true),
    ("tpot_p95_ms", true),
    ("e2e_p95_ms", true),
    ("queue_p95_ms", true),
    ("requests_per_s", false),
    ("output_tokens_per_s", false),
    ("goodput_fraction", false),
    ("prefix_hit_rate", false),
    ("recompute_tokens", true),
    ("recompute_gpu_s", true),
    ("max_worker_share", true),
    ("failure_recompute_tokens", true),
    ("sessions_reset", true),
    ("retried", true),
    ("turns_without_history", true),
    ("fault_victims_ttft_p95_ms", true),
    ("fault_excess_ttft_p95_ms", true),
    ("time_to_recover_s", true),
];

/// The largest of `value` over the run's faults that happened; NaN without one, or when any has none.
pub fn worst_fault(s: &Summary, value: impl Fn(&super::recovery::Recovery) -> Option<f64>) -> f64 {
    let mut worst = f64::NAN;
    for r in s.recovery.iter().filter(|r| r.timing != "after_end") {
        match value(r) {
            Some(v) if !v.is_nan() => worst = if worst.is_nan() { v } else { worst.max(v) },
            _ => return f64::NAN,
        }
    }
    worst
}

/// The headline numbers of one run, in [`METRICS`] order (a map sorted by name).
pub fn values(s: &Summary) -> BTreeMap<&'static str, f64> {
    let max_share = s.workers.iter().map(|w| w.share).fold(0.0, f64::max);
    let stat = |d: &super::summary::Dist, v: f64| if d.count > 0 { v } else { f64::NAN };
    let values = [
        s.requests.completed as f64,
        s.requests.failed as f64,
        s.requests.rejected as f64,
        stat(&s.ttft_ms, s.ttft_ms.p50),
        stat(&s.ttft_ms, s.ttft_ms.p95),
        stat(&s.ttft_ms, s.ttft_ms.p99),
        stat(&s.tpot_ms, s.tpot_ms.p50),
        stat(&s.tpot_ms, s.tpot_ms.p95),
        stat(&s.e2e_ms, s.e2e_ms.p95),
        stat(&s.queue_ms, s.queue_ms.p95),
        s.throughput.requests_per_s,
        s.throughput.output_tokens_per_s,
        s.goodput.fraction,
        if s.prefix_cache.prompt_tokens > 0 {
            s.prefix_cache.hit_rate
        } else {
            f64::NAN
        },
        s.recompute.tokens as f64,
        s.recompute.gpu_seconds,
        max_share,
        (s.recompute.by_cause.failure.tokens + s.recompute.by_cause.migrated.tokens) as f64,
        s.sessions.reset as f64,
        s.requests.retried as f64,
        s.sessions.turns_without_history as f64,
        worst_fault(s, |r| r.victims_ttft_p95_ms),
        worst_fault(s, |r| r.excess_ttft_p95_ms),
        // Not recovered: no number, as for a statistic of an empty set.
        worst_fault(s, |r| r.time_to_recover_s),
    ];
    METRICS.iter().map(|(k, _)| *k).zip(values).collect()
}
