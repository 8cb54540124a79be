//! Peer transfer: a worker pulls a prefix from another worker's GPU cache when that beats recomputing
//! it, and never when it does not.

use crate::common::scenario_path;
use fleetsim::engine::Simulation;
use fleetsim::metrics::record::RecomputeCause;
use fleetsim::scenario::Scenario;

fn hot_prefix(extra: &[&str]) -> fleetsim::engine::RunOutput {
    let mut o = vec![
        "max_requests=1500".to_string(),
        "router.policy=\"round_robin\"".to_string(),
    ];
    o.extend(extra.iter().map(|s| s.to_string()));
    let s = Scenario::load(&scenario_path("hot-prefix.toml"), &o).unwrap();
    Simulation::from_scenario(&s).unwrap().run(&mut |_| {})
}

/// Round robin sends the hot 4,096-token schema to workers that lack it. With peer transfer over RDMA
/// (50 GB/s: 4,096 tokens × 128 KiB = 0.5 GB in ~11 ms, where prefilling them takes far longer on an
/// H100) the first requests on each worker pull the schema instead of recomputing it; at 1 MB/s the
/// same pull would take minutes, so none is made.
#[test]
fn a_peer_prefix_is_pulled_when_cheaper_and_recomputed_when_not() {
    let off = hot_prefix(&[]);
    let on = hot_prefix(&["interconnect.peer_transfer=true"]);
    let slow = hot_prefix(&[
        "interconnect.peer_transfer=true",
        "interconnect.rdma_gb_per_s=0.001",
    ]);
    assert!(off.summary.peer_transfer.is_none());
    let p = on.summary.peer_transfer.as_ref().unwrap();
    assert!(p.transfers > 0, "{p:?}");
    assert_eq!(p.recompute_avoided_tokens, p.blocks_transferred * 16);
    // Bytes moved = blocks × 16 tokens × 128 KiB (Llama-3.1-8B, BF16, TP 1).
    assert_eq!(p.bytes_transferred, p.blocks_transferred * 16 * 131_072);
    let misrouted = |o: &fleetsim::engine::RunOutput| {
        o.collector.recompute.tokens[RecomputeCause::Misrouted as usize]
    };
    assert!(
        misrouted(&on) < misrouted(&off),
        "misrouted recompute: {} with peers, {} without",
        misrouted(&on),
        misrouted(&off)
    );
    for o in [&off, &on, &slow] {
        assert_eq!(o.summary.requests.completed, o.summary.requests.arrived);
    }
    let q = slow.summary.peer_transfer.as_ref().unwrap();
    assert_eq!(
        q.transfers, 0,
        "a 1 MB/s pull is never cheaper than recomputing"
    );
    assert_eq!(misrouted(&slow), misrouted(&off));
}

/// `predicted_latency` prices another worker's GPU copy of the prefix at its transfer time. Over
/// RDMA at 50 GB/s the schema moves in ~11 ms, far less than its prefill, so the router sends hot
/// requests to workers that lack it and they pull it: more pulls than when the router prices the GPU
/// prefix alone. At 1 MB/s no copy is ever cheaper than recomputing, so pricing copies changes no
/// decision: the two runs are the same, byte for byte.
#[test]
fn predicted_latency_prices_peer_copies_and_ignores_dear_ones() {
    let run = |extra: &[&str]| {
        let mut o = vec![
            "router.policy=\"predicted_latency\"",
            "interconnect.peer_transfer=true",
        ];
        o.extend_from_slice(extra);
        hot_prefix(&o)
    };
    let priced = run(&[]);
    let gpu_only = run(&["router.price_copies=false"]);
    let transfers =
        |o: &fleetsim::engine::RunOutput| o.summary.peer_transfer.as_ref().unwrap().transfers;
    assert!(
        transfers(&priced) > transfers(&gpu_only),
        "pulls: {} priced, {} GPU prefix only",
        transfers(&priced),
        transfers(&gpu_only)
    );
    for o in [&priced, &gpu_only] {
        assert_eq!(o.summary.requests.completed, o.summary.requests.arrived);
    }
    let slow = "interconnect.rdma_gb_per_s=0.001";
    let a = run(&[slow]);
    let b = run(&[slow, "router.price_copies=false"]);
    assert_eq!(
        serde_json::to_string(&a.summary).unwrap(),
        serde_json::to_string(&b.summary).unwrap()
    );
}
