//! The headline numbers of a run, by name: what `compare` tables, and what replications give intervals
//! for. A statistic of an empty set (no request completed, no prompt token served, no fault) is NaN,
//! never 0.
//!
//! The last [`FLEET_METRICS`] exist only for some fleets (several models, LoRA adapters, an
//! autoscaler): NaN for every other run, and the tables leave them out unless a run has a value
//! ([`shown`]).

use std::collections::BTreeMap;

use super::Summary;

/// A metric's name, and whether lower is better.
pub type Metric = (&'static str, bool);

/// Metric names in table order, with whether lower is better: the core ones, then [`FLEET_METRICS`].
pub const METRICS: [Metric; 35] = join(CORE_METRICS, FLEET_METRICS);

/// The metrics every run has.
const CORE_METRICS: [Metric; 24] = [
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

/// The metrics only some fleets have (NaN for the others), at the end of [`METRICS`] and of the
/// sweep's metrics.
pub const FLEET_METRICS: [Metric; 11] = [
    // Several models ([[workers]] `models`): swaps begun, their summed seconds, and the p95 TTFT of
    // the requests the gateway held for a model no worker had loaded.
    ("swaps", true),
    ("swap_seconds", true),
    ("held_for_model_ttft_p95_ms", true),
    // LoRA adapters: adapters copied into a GPU slot, and requests that waited for a free slot.
    ("lora_gpu_loads", true),
    ("lora_waited_for_slot", true),
    // An autoscaler: replica-hours billed, their cost, the peak, the requests held for want of a
    // ready replica, and the SLO attainment of the worst window.
    ("replica_hours", true),
    ("cost_usd", true),
    ("replicas_peak", true),
    ("cold_start_held", true),
    ("slo_attainment_worst_window", false),
    // Requests for a model no worker may serve.
    ("rejected_model_not_served", true),
];

/// `a` followed by `b` (`N` must be their lengths' sum: checked when the constant is evaluated).
pub const fn join<const A: usize, const B: usize, const N: usize>(
    a: [Metric; A],
    b: [Metric; B],
) -> [Metric; N] {
    assert!(A + B == N, "N is the lengths' sum");
    let mut out = [("", false); N];
    let mut i = 0;
    while i < A {
        out[i] = a[i];
        i += 1;
    }
    while i < N {
        out[i] = b[i - A];
        i += 1;
    }
    out
}

/// Whether `k` is one of [`FLEET_METRICS`].
pub fn is_fleet_metric(k: &str) -> bool {
    FLEET_METRICS.iter().any(|(m, _)| *m == k)
}

/// Whether a table shows metric `k`, given whether any of its runs has a value for it: every core
/// metric always (`–` without a value), a fleet metric only where some run has one.
pub fn shown(k: &str, any_value: bool) -> bool {
    any_value || !is_fleet_metric(k)
}

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

fn opt(v: Option<f64>) -> f64 {
    v.unwrap_or(f64::NAN)
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
        opt(s.models.as_ref().map(|m| m.swaps as f64)),
        opt(s.models.as_ref().map(|m| m.swap_seconds)),
        opt(s
            .models
            .as_ref()
            .and_then(|m| (m.held_ttft_ms.count > 0).then_some(m.held_ttft_ms.p95))),
        opt(s.lora.as_ref().map(|l| l.gpu_loads as f64)),
        opt(s.lora.as_ref().map(|l| l.requests_waited_for_slot as f64)),
        opt(s.autoscaler.as_ref().map(|a| a.replica_hours)),
        opt(s.autoscaler.as_ref().and_then(|a| a.cost_usd)),
        opt(s.autoscaler.as_ref().map(|a| f64::from(a.replicas_peak))),
        opt(s
            .autoscaler
            .as_ref()
            .map(|a| a.cold_start_hits.requests as f64)),
        opt(s
            .autoscaler
            .as_ref()
            .and_then(|a| a.slo_attainment.map(|x| x.worst))),
        opt(s
            .models
            .as_ref()
            .map(|m| m.rejected_model_not_served as f64)),
    ];
    METRICS.iter().map(|(k, _)| *k).zip(values).collect()
}
