//! The decode fast path (`src/engine/steady_run.rs`) against stepping one step at a time: the same
//! `summary.json`, to the byte, on every bundled scenario and on random small fleets with faults.

use crate::common::{SINGLE_WORKER, scenario, scenario_path};
use crate::random_fleet::{FAULTS, FLEET, POLICIES, bundled_scenarios, random_fleet, two_ways};
use fleetsim::engine::{RunOutput, Simulation};
use fleetsim::scenario::Scenario;
use proptest::prelude::*;

/// Runs `s` both ways; returns the fast path's output after checking the summaries are identical.
fn both_ways(s: &Scenario, what: &str) -> RunOutput {
    let (slow, fast) = two_ways(
        s,
        what,
        ("step by step", |sim| sim.step_by_step(true)),
        "fast path",
    );
    assert_eq!(
        slow.fast_path.bulk_steps, 0,
        "{what}: stepping one by one skipped steps"
    );
    fast
}

/// Every bundled scenario, cut to its first 1,500 requests (the whole set takes minutes in a debug
/// build; `docs/performance.md` gives the command that compares them whole).
#[test]
fn every_bundled_scenario_gives_the_same_summary_both_ways() {
    let mut bulk = 0;
    for (path, s) in bundled_scenarios(1500) {
        bulk += both_ways(&s, &path).fast_path.bulk_steps;
    }
    // Not vacuous: the fast path really skipped steps somewhere.
    assert!(bulk > 1_000, "only {bulk} steps were applied in bulk");
}

/// A lone decoding request is one steady run after another: with 16-token blocks, at most 15 pure
/// steps follow each real one, so well over half of its 2,000 decode steps are applied in bulk.
#[test]
fn a_lone_decode_is_mostly_applied_in_bulk() {
    let s = scenario(
        SINGLE_WORKER,
        &[
            "workload.kind=\"poisson\"",
            "workload.rate=0.01",
            "max_requests=1",
            "workload.output={dist=\"fixed\",tokens=2000}",
        ],
    );
    let out = both_ways(&s, "lone decode");
    // 2,000 tokens: the prefill step samples the first, 1,999 decode steps the rest, so 2,000 step
    // ends and one arrival. A block boundary every 16 tokens ends a run (the step that fills a block
    // is real, and so is the next start), so at least 1,999 - 2 × ⌈2,000 / 16⌉ = 1,749 decode steps
    // are pure.
    assert_eq!(
        out.summary.sim.events,
        1 + 2000,
        "an arrival and 2,000 step ends"
    );
    assert!(
        out.fast_path.bulk_steps >= 1_749,
        "{} bulk steps",
        out.fast_path.bulk_steps
    );
}

/// Runs cross KV block boundaries when nothing but the worker reads its pool between events: a lone
/// 2,000-token decode under round robin is one run after its first decode step, while a policy that
/// reads the workers' KV use (`least_kv`) keeps every run within a block, as does `--check-invariants`.
#[test]
fn runs_cross_block_boundaries_unless_something_reads_the_pool() {
    let lone = |extra: &[&str]| {
        let mut o = vec![
            "workload.kind=\"poisson\"",
            "workload.rate=0.01",
            "max_requests=1",
            "workload.output={dist=\"fixed\",tokens=2000}",
            "workers[0].enable_prefix_caching=true",
        ];
        o.extend_from_slice(extra);
        scenario(SINGLE_WORKER, &o)
    };
    // The prefill step samples the first token and the first decode step (real) the second; the
    // 1,998 steps after it are pure, the last of them ending the run.
    let across = both_ways(&lone(&["router.policy=\"round_robin\""]), "round robin");
    assert_eq!(across.fast_path.bulk_steps, 1_998);
    let within = both_ways(&lone(&["router.policy=\"least_kv\""]), "least_kv");
    assert!(
        (1_749..1_998).contains(&within.fast_path.bulk_steps),
        "least_kv: {} bulk steps",
        within.fast_path.bulk_steps
    );
    let mut checked = Simulation::from_scenario(&lone(&["router.policy=\"round_robin\""])).unwrap();
    checked.check_invariants_every_step(true);
    assert_eq!(
        checked.run(&mut |_| {}).fast_path.bulk_steps,
        0,
        "checking every step applies none in bulk"
    );
}

/// Every policy that says it reads no KV use (`RoutingPolicy::reads_kv_usage`) lets runs cross block
/// boundaries: a wrong claim would let it route on stale KV use, so each is run both ways on the
/// hot-prefix scenario (shared prefixes under KV pressure).
#[test]
fn policies_blind_to_kv_use_give_the_same_summary_both_ways() {
    let path = scenario_path("hot-prefix.toml");
    for policy in [
        "round_robin",
        "random",
        "least_outstanding",
        "power_of_two",
        "consistent_hash",
        "session_affinity",
        "prefix_aware",
        "sglang_cache_aware",
        "dynamo_kv",
    ] {
        let o = vec![
            "max_requests=600".to_string(),
            format!("router.policy=\"{policy}\""),
        ];
        let s = Scenario::load(&path, &o).unwrap();
        assert!(both_ways(&s, policy).fast_path.bulk_steps > 0, "{policy}");
    }
}

/// `predicted_latency` reads the KV tiers' contents when it routes: the fast path matches stepping one
/// by one on the bundled offload scenario (host and NVMe tiers under two H100s).
#[test]
fn routing_on_tier_contents_gives_the_same_summary_both_ways() {
    let o = vec![
        "max_requests=400".to_string(),
        "router.policy=\"predicted_latency\"".to_string(),
    ];
    let s = Scenario::load(&scenario_path("mooncake-offload.toml"), &o).unwrap();
    let out = both_ways(&s, &format!("{o:?}"));
    assert!(out.summary.prefix_cache.loaded_tokens > 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random small fleets under KV pressure, with sessions or independent requests, every policy
    /// family, and one or two faults of every kind at random instants (fault `i` in its own 15-second
    /// window, longer than any fault here lasts, so that two never overlap on one worker).
    #[test]
    fn random_fleets_with_faults_give_the_same_summary_both_ways(
        seed in 1u64..1_000_000,
        workers in 1u32..4,
        blocks in 300u32..3000,
        rate in 1.0f64..12.0,
        sessions in any::<bool>(),
        policy in 0usize..POLICIES.len(),
        faults in prop::collection::vec((0usize..FAULTS.len(), 0u32..3, 1u32..11), 0..3),
        max_num_seqs in prop::sample::select(vec![4u32, 16, 256]),
    ) {
        let mut o = random_fleet(seed, workers, blocks, rate, sessions, policy, &faults);
        o.push(format!("workers[0].max_num_seqs={max_num_seqs}"));
        let o: Vec<&str> = o.iter().map(String::as_str).collect();
        let s = scenario(FLEET, &o);
        both_ways(&s, &format!("{o:?}"));
    }

    /// The same with LoRA adapters: a few slots, a small CPU cache, Zipf adapters (per conversation
    /// with sessions), routed by every policy family or by `lora_affinity`.
    #[test]
    fn random_lora_fleets_with_faults_give_the_same_summary_both_ways(
        seed in 1u64..1_000_000,
        workers in 1u32..4,
        rate in 1.0f64..12.0,
        sessions in any::<bool>(),
        policy in 0usize..POLICIES.len() + 1,
        faults in prop::collection::vec((0usize..FAULTS.len(), 0u32..3, 1u32..11), 0..3),
        max_loras in 1u32..4,
        adapters in 2u32..12,
    ) {
        let mut o = random_fleet(seed, workers, 2000, rate, sessions, policy % POLICIES.len(), &faults);
        if policy == POLICIES.len() {
            o.push("router.policy=\"lora_affinity\"".to_string());
        }
        o.push(format!("workers[0].lora={{max_loras={max_loras},max_cpu_loras={}}}", max_loras + 1));
        o.push(format!("workload.adapters={{count={adapters},zipf=1.0}}"));
        let o: Vec<&str> = o.iter().map(String::as_str).collect();
        let s = scenario(FLEET, &o);
        let out = both_ways(&s, &format!("{o:?}"));
        prop_assert!(out.summary.lora.is_some_and(|l| l.requests_with_adapter > 0));
    }
}

/// Disaggregated fleets: hand-offs settle the decode worker before they enqueue on it, so the fast
/// path matches stepping one by one with 1P:3D and 1P:1D, over NVLink and over slow RDMA.
#[test]
fn disaggregated_fleets_give_the_same_summary_both_ways() {
    let path = scenario_path("disaggregation.toml");
    for o in [
        vec!["workers[0].prefill_workers=1"],
        vec!["workers[0].prefill_workers=2"],
        vec![
            "workers[0].prefill_workers=2",
            "interconnect.nvlink_gb_per_s=0.5",
        ],
    ] {
        let mut o: Vec<String> = o.iter().map(|s| s.to_string()).collect();
        o.push("max_requests=600".into());
        let s = Scenario::load(&path, &o).unwrap();
        let out = both_ways(&s, &format!("{o:?}"));
        assert!(
            out.fast_path.bulk_steps > 0,
            "{o:?}: no steps applied in bulk"
        );
        assert!(out.summary.disaggregation.is_some());
    }
}

/// Peer transfers settle their source and their destination: the fast path matches stepping one by
/// one on the hot-prefix scenario with peers, and with a crash of a source; also with
/// `predicted_latency` pricing the peers' copies at routing time.
#[test]
fn peer_transfers_give_the_same_summary_both_ways() {
    let path = scenario_path("hot-prefix.toml");
    for (policy, extra) in [
        ("round_robin", vec![]),
        (
            "round_robin",
            vec!["faults=[{kind=\"crash\",worker=0,at=\"5s\",restart_after=\"3s\"}]"],
        ),
        ("predicted_latency", vec![]),
    ] {
        let mut o = vec![
            "max_requests=1200".to_string(),
            format!("router.policy=\"{policy}\""),
            "interconnect.peer_transfer=true".to_string(),
        ];
        o.extend(extra.iter().map(|s| s.to_string()));
        let s = Scenario::load(&path, &o).unwrap();
        let out = both_ways(&s, &format!("{o:?}"));
        assert!(out.summary.peer_transfer.as_ref().unwrap().transfers > 0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]

    /// Random small disaggregated fleets under KV pressure with a fault of any kind on any worker.
    #[test]
    fn random_disaggregated_fleets_with_faults_give_the_same_summary_both_ways(
        seed in 1u64..1_000_000,
        workers in 2u32..5,
        prefill in 1u32..4,
        blocks in 300u32..3000,
        rate in 1.0f64..12.0,
        fault in (0usize..FAULTS.len(), 0u32..4, 1u32..20),
    ) {
        let (k, w, at) = fault;
        let o: Vec<String> = vec![
            format!("seed={seed}"),
            format!("workers[0].count={workers}"),
            format!("workers[0].prefill_workers={}", prefill.min(workers - 1)),
            format!("workers[0].kv_blocks={blocks}"),
            format!("workload.rate={rate}"),
            "gateway.in_flight=\"retry\"".to_string(),
            format!(
                "faults=[{}]",
                FAULTS[k].replace('W', &(w % workers).to_string()).replace('T', &format!("{at}s"))
            ),
        ];
        let o: Vec<&str> = o.iter().map(String::as_str).collect();
        let s = scenario(FLEET, &o);
        both_ways(&s, &format!("{o:?}"));
    }
}

/// Hot-prefix replication lands copies in workers' caches between their steps (each landing settles
/// the target first): the fast path must still match stepping one by one, with copies really made.
#[test]
fn hot_prefix_replication_gives_the_same_summary_both_ways() {
    let s = Scenario::load(
        &scenario_path("hot-prefix-replication.toml"),
        &["duration=\"40s\"".to_string()],
    )
    .unwrap();
    let out = both_ways(&s, "hot-prefix-replication");
    let r = out.summary.replication.unwrap();
    assert!(r.copies > 0 && r.blocks_registered > 0, "{r:?}");
    assert!(
        out.fast_path.bulk_steps > 1_000,
        "{} bulk steps",
        out.fast_path.bulk_steps
    );
}
