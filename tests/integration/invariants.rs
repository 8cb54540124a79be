//! Conservation laws: no request lost; KV blocks conserved under preemption pressure.

use crate::common::{SINGLE_WORKER, run, scenario, scenario_path};
use fleetsim::engine::Simulation;

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
    // Every worker's KV conservation laws are checked after each of its steps, through the preemptions.
    let mut sim = Simulation::from_scenario(&s).unwrap();
    sim.check_invariants_every_step(true);
    let out = sim.run(&mut |_| {});
    let summary = out.summary;
    let r = &summary.requests;
    assert!(r.arrived > 600);
    // The longest request (3,000 + 2,000 tokens, 313 blocks of 16) fits in 400 blocks: none is rejected,
    // none fails, so every arrival completes however hard the pool is squeezed.
    assert_eq!(r.completed, r.arrived);
    assert_eq!(r.rejected, 0);
    assert_eq!(r.failed, 0);
    assert!(
        summary.preemptions > 0,
        "the scenario was meant to force preemption"
    );
    assert!(summary.recompute.by_cause.preempted.tokens > 0);
    assert!(summary.recompute.by_cause.preempted.gpu_seconds > 0.0);
    for w in &summary.workers {
        assert!(w.kv_peak_fraction <= 1.0);
        assert!(w.step_time_fraction <= 1.0 + 1e-9);
        // The model FLOPs of the work a worker delivered fit in the time its steps took at peak.
        let mfu = w.mfu.expect("an aggregated fleet has MFU");
        assert!(
            mfu > 0.0 && mfu <= w.step_time_fraction + 1e-6,
            "worker {}: MFU {mfu}, step-time share {}",
            w.id,
            w.step_time_fraction
        );
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

/// The bundled default scenario's fleet at full size (four H100s with their real KV pools of tens of
/// thousands of blocks, the same traffic), run through the command line with every worker's conservation
/// laws checked after every step: the run completes and serves every request. Each check walks a whole
/// pool, so the run is cut to its first 20 seconds (the whole 5 minutes takes over 10 minutes here).
#[test]
fn a_full_size_run_conserves_kv_memory_at_every_step() {
    let out = assert_cmd::Command::cargo_bin("fleetsim")
        .unwrap()
        .args(["run", "--check-invariants", "--quiet", "--json"])
        .args(["--set", "duration=\"20s\""])
        .arg(scenario_path("quickstart.toml"))
        .assert()
        .success();
    let summary: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let requests = &summary["requests"];
    // 40 requests/s for 20 s: 800 expected, ± 4 standard deviations of a Poisson count (√800 ≈ 28).
    let arrived = requests["arrived"].as_u64().unwrap();
    assert!(arrived.abs_diff(800) < 113, "{arrived} arrivals");
    assert_eq!(requests["completed"].as_u64(), Some(arrived));
    let blocks = summary["workers"][0]["kv_blocks"].as_u64().unwrap();
    assert!(
        blocks > 10_000,
        "a realistic pool, not a toy one: {blocks} blocks"
    );
}
