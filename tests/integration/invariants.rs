//! Conservation laws: no request lost; KV blocks conserved under preemption pressure.

use crate::common::{SINGLE_WORKER, run, scenario};

/// A fleet with far too little KV memory for its load: preemption must happen, and every request must
/// still end completed (nothing silently vanishes).
#[test]
fn every_request_finishes_under_kv_pressure() {
    let s = scenario(
        SINGLE_WORKER,
        &[
            "workers[0].count=2",
            "workers[0].kv_blocks=400",
            "workers[0].enable_prefix_caching=true",
            "workload.rate=12",
            "workload.output={dist=\"lognormal\",median=300,sigma=0.6,max=2000}",
            "workload.prompt={dist=\"uniform\",min=200,max=3000}",
            "duration=\"60s\"",
        ],
    );
    let (summary, c) = run(&s);
    let r = &summary.requests;
    assert!(r.arrived > 600);
    assert_eq!(r.arrived, r.completed + r.failed + r.rejected);
    assert_eq!(r.failed, 0);
    assert!(
        summary.preemptions > 0,
        "the scenario was meant to force preemption"
    );
    assert!(summary.recompute.by_cause.preempted.tokens > 0);
    assert!(summary.recompute.by_cause.preempted.gpu_seconds > 0.0);
    // A request longer than the whole cache is rejected, never stuck.
    assert_eq!(c.rejected, r.rejected);
    for w in &summary.workers {
        assert!(w.kv_peak_fraction <= 1.0);
        assert!(w.busy_fraction <= 1.0 + 1e-9);
    }
}

#[test]
fn a_request_larger_than_the_cache_is_rejected_with_a_reason() {
    let s = scenario(
        SINGLE_WORKER,
        &[
            "workers[0].kv_blocks=8",
            "workload.prompt={dist=\"fixed\",tokens=500}",
            "duration=\"10s\"",
        ],
    );
    let (summary, _) = run(&s);
    assert!(summary.requests.arrived > 0);
    assert_eq!(summary.requests.rejected, summary.requests.arrived);
}

#[test]
fn throughput_matches_offered_load_when_unsaturated() {
    let s = scenario(SINGLE_WORKER, &["workload.rate=5", "duration=\"10m\""]);
    let (summary, _) = run(&s);
    let rate = summary.throughput.requests_per_s;
    assert!((rate / 5.0 - 1.0).abs() < 0.05, "throughput {rate}");
}
