//! Private KV blocks (`src/worker/kv_cache/mod.rs`): keeping the blocks that only their own request could
//! ask for out of the workers' prefix index changes no result. The same `summary.json`, to the byte,
//! with and without, on every bundled scenario and on random small fleets under KV pressure with
//! faults. (Debug builds, which run these tests, also panic if anything looks a private block up.)

use crate::common::{SINGLE_WORKER, scenario};
use crate::random_fleet::{FAULTS, FLEET, POLICIES, bundled_scenarios, random_fleet, two_ways};
use fleetsim::engine::RunOutput;
use fleetsim::scenario::Scenario;
use proptest::prelude::*;

/// Runs `s` with every block indexed and with private blocks; returns the latter's output after
/// checking the summaries are identical.
fn both_ways(s: &Scenario, what: &str) -> RunOutput {
    two_ways(
        s,
        what,
        ("with every block indexed", |sim| {
            sim.index_every_block(true)
        }),
        "with private blocks",
    )
    .1
}

/// Every bundled scenario, cut to its first 1,500 requests.
#[test]
fn every_bundled_scenario_gives_the_same_summary_with_private_blocks() {
    for (path, s) in bundled_scenarios(1500) {
        both_ways(&s, &path);
    }
}

/// Under heavy KV pressure a preempted request comes back for its own blocks: it must find them, so
/// preemption publishes them first. Not vacuous: requests are preempted and find cached blocks.
#[test]
fn preempted_requests_find_their_own_blocks_again() {
    let s = scenario(
        SINGLE_WORKER,
        &[
            "workers[0].enable_prefix_caching=true",
            "workload.kind=\"poisson\"",
            "workload.rate=6.0",
            "max_requests=300",
            "workers[0].kv_blocks=400",
            "workload.prompt={dist=\"lognormal\",median=900,sigma=0.6,max=3000}",
            "workload.output={dist=\"lognormal\",median=300,sigma=0.6,max=2000}",
        ],
    );
    let out = both_ways(&s, "preemptions");
    assert!(out.summary.preemptions > 0, "no preemption");
    assert!(
        out.summary.recompute.by_cause.preempted.tokens > 0,
        "no preempted request was recomputed"
    );
}

/// Requests that leave a worker whose cache survives them, and come back to the fleet: timed out on a
/// hung worker, or lost with a process whose KV survives its restart. Their blocks stay cached where
/// they were, so they are published first; a cache-aware router looks for them there when the retry is
/// routed (which debug builds would catch as a lookup of private content, were they not published).
#[test]
fn retried_requests_find_what_they_left_behind() {
    let faults = [
        "gateway.request_timeout=\"2s\"",
        "faults=[{kind=\"hang\",worker=0,at=\"6s\",restart_after=\"12s\"},\
          {kind=\"crash\",worker=1,at=\"24s\",restart_after=\"2s\",kv_survives_restart=true}]",
    ];
    for seed in 1..=4 {
        for in_flight in ["retry", "migrate"] {
            let seed = format!("seed={seed}");
            let mode = format!("gateway.in_flight=\"{in_flight}\"");
            let o = [
                seed.as_str(),
                mode.as_str(),
                "workers[0].count=2",
                "workers[0].kv_blocks=2000",
                "workload.rate=6.0",
                "router.policy=\"prefix_aware\"",
                faults[0],
                faults[1],
            ];
            let out = both_ways(&scenario(FLEET, &o), &format!("{o:?}"));
            let r = &out.summary.requests;
            assert!(r.retried + r.migrated > 0, "{o:?}: nothing came back");
            assert!(r.timed_out > 0, "{o:?}: nothing timed out");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random small fleets under KV pressure, independent requests (the ones with private blocks) or
    /// sessions, every policy family, one or two faults of every kind at random instants.
    #[test]
    fn random_fleets_with_faults_give_the_same_summary_with_private_blocks(
        seed in 1u64..1_000_000,
        workers in 1u32..4,
        blocks in 300u32..3000,
        rate in 1.0f64..12.0,
        sessions in prop::bool::weighted(0.25),
        retry in any::<bool>(),
        policy in 0usize..POLICIES.len(),
        faults in prop::collection::vec((0usize..FAULTS.len(), 0u32..3, 1u32..11), 0..3),
    ) {
        let mut o = random_fleet(seed, workers, blocks, rate, sessions, policy, &faults);
        if retry {
            o.push("gateway.in_flight=\"retry\"".to_string());
        }
        let o: Vec<&str> = o.iter().map(String::as_str).collect();
        both_ways(&scenario(FLEET, &o), &format!("{o:?}"));
    }
}
