//! Routing policies on the scenarios built to show their trade-offs, and `compare`'s determinism.

use crate::common::{run, scenario_path};
use fleetsim::compare;
use fleetsim::metrics::Summary;
use fleetsim::scenario::Scenario;

/// Runs `policies` on a bundled scenario shortened to `duration`, in list order.
fn compare_on(file: &str, duration: &str, policies: &str) -> Vec<Summary> {
    let s = Scenario::load(&scenario_path(file), &[format!("duration=\"{duration}\"")]).unwrap();
    let contenders = compare::resolve(policies, &s).unwrap();
    compare::run_all(&s, &contenders)
        .unwrap()
        .into_iter()
        .map(|o| o.summary)
        .collect()
}

fn max_share(s: &Summary) -> f64 {
    s.workers.iter().map(|w| w.share).fold(0.0, f64::max)
}

#[test]
fn hot_prefix_prefix_only_routing_concentrates_and_loses_to_llm_d_precise() {
    let r = compare_on(
        "hot-prefix.toml",
        "3m",
        "round_robin,prefix_only,llm_d_precise",
    );
    let (rr, prefix_only, precise) = (&r[0], &r[1], &r[2]);
    assert!(
        max_share(prefix_only) > 0.5,
        "prefix-only max share {}",
        max_share(prefix_only)
    );
    assert!(max_share(prefix_only) > max_share(precise));
    assert!((max_share(rr) - 0.125).abs() < 0.01);
    assert!(
        precise.ttft_ms.p95 < prefix_only.ttft_ms.p95,
        "llm_d_precise p95 {} vs prefix-only {}",
        precise.ttft_ms.p95,
        prefix_only.ttft_ms.p95
    );
    // Absolute: eight H100s have room for 60 requests/s when the load is spread (round robin meets the
    // 1 s TTFT SLO for every request: measured goodput 1.0, p95 26 ms); prefix-only routing piles 70% of
    // them on one worker, which falls behind without bound (measured goodput 0.32, p95 154 s).
    assert!(rr.goodput.fraction > 0.99, "round robin {:?}", rr.goodput);
    assert!(
        rr.ttft_ms.p95 < 1000.0,
        "round robin p95 {}",
        rr.ttft_ms.p95
    );
    assert!(
        prefix_only.goodput.fraction < 0.5,
        "{:?}",
        prefix_only.goodput
    );
    assert!(
        prefix_only.ttft_ms.p95 > 10_000.0,
        "{}",
        prefix_only.ttft_ms.p95
    );
}

/// What `llm_d` (its default: 3 : 2 : 2 over a 2048-block prefix window) does on `hot-prefix`: spread
/// the hot prefix enough to meet the SLO, as round robin does.
#[test]
fn hot_prefix_llm_d_meets_the_ttft_slo() {
    let r = compare_on("hot-prefix.toml", "3m", "llm_d");
    assert!(r[0].goodput.fraction > 0.9, "{:?}", r[0].goodput);
    assert!(r[0].ttft_ms.p95 < 1000.0, "p95 {}", r[0].ttft_ms.p95);
}

#[test]
fn heavy_tail_least_outstanding_beats_round_robin_on_p95_ttft() {
    let r = compare_on("heavy-tail.toml", "4m", "round_robin,least_outstanding");
    assert_eq!(
        r[0].requests.arrived, r[1].requests.arrived,
        "same arrivals"
    );
    assert!(
        r[1].ttft_ms.p95 <= r[0].ttft_ms.p95,
        "least_outstanding p95 {} vs round_robin {}",
        r[1].ttft_ms.p95,
        r[0].ttft_ms.p95
    );
    // Absolute, against the scenario's SLOs (TTFT 1 s, TPOT 60 ms): least_outstanding meets them for
    // (nearly) every request (measured goodput 1.000, p95 TTFT 262 ms); round robin queues behind long
    // decodes past the TTFT SLO for more than 5% of requests (measured goodput 0.78, p95 6.2 s).
    assert!(r[1].goodput.fraction > 0.99, "{:?}", r[1].goodput);
    assert!(r[1].ttft_ms.p95 < 1000.0, "{}", r[1].ttft_ms.p95);
    assert!(r[0].ttft_ms.p95 > 1000.0, "{}", r[0].ttft_ms.p95);
}

#[test]
fn compare_output_does_not_depend_on_the_thread_count() {
    let dir = std::env::temp_dir().join(format!("fleetsim-compare-{}", std::process::id()));
    let mut outputs = Vec::new();
    for threads in ["1", "3"] {
        let out = dir.join(threads);
        assert_cmd::Command::cargo_bin("fleetsim")
            .unwrap()
            .args(["compare", "--set", "duration=\"40s\"", "--threads", threads])
            .args([
                "--policies",
                "round_robin,prefix_only,llm_d,dynamo_kv:temperature=0.5",
            ])
            .arg("--out")
            .arg(&out)
            .arg(scenario_path("hot-prefix.toml"))
            .assert()
            .success();
        let mut files = Vec::new();
        for f in [
            "comparison.json",
            "comparison.csv",
            "comparison.md",
            "llm_d/summary.json",
            "prefix_only/summary.json",
        ] {
            files.push(std::fs::read(out.join(f)).unwrap());
        }
        outputs.push(files);
    }
    assert_eq!(outputs[0], outputs[1]);
    let cmp: serde_json::Value = serde_json::from_slice(&outputs[0][0]).unwrap();
    assert_eq!(cmp["baseline"], "round_robin");
    assert_eq!(cmp["runs"].as_array().unwrap().len(), 4);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_policy_runs_and_serves_every_request() {
    let names = fleetsim::routing::PolicyConfig::NAMES.join(",");
    let s = Scenario::load(
        &scenario_path("quickstart.toml"),
        &["duration=\"20s\"".to_string()],
    )
    .unwrap();
    let contenders = compare::resolve(&names, &s).unwrap();
    for (c, out) in contenders
        .iter()
        .zip(compare::run_all(&s, &contenders).unwrap())
    {
        let r = &out.summary.requests;
        assert_eq!(r.arrived, r.completed, "{}", c.label);
        assert_eq!(out.summary.router.policy, c.router.policy.name());
    }
    // The same arrivals whatever the policy.
    let a = run(&s).0;
    assert!(a.requests.arrived > 500);
}

#[test]
fn multi_turn_chat_affinity_and_prefix_routing_double_the_hit_rate_and_cut_p95_ttft() {
    let r = compare_on(
        "chat-sessions.toml",
        "5m",
        "round_robin,session_affinity,prefix_aware",
    );
    let rr = &r[0];
    for s in &r[1..] {
        assert!(
            s.prefix_cache.hit_rate >= 2.0 * rr.prefix_cache.hit_rate,
            "{}: hit rate {} vs round robin {}",
            s.policy,
            s.prefix_cache.hit_rate,
            rr.prefix_cache.hit_rate
        );
        assert!(
            s.ttft_ms.p95 < rr.ttft_ms.p95,
            "{}: p95 TTFT {} vs round robin {}",
            s.policy,
            s.ttft_ms.p95,
            rr.ttft_ms.p95
        );
        assert!(s.recompute.by_cause.misrouted.tokens < rr.recompute.by_cause.misrouted.tokens / 2);
        // Absolute: a conversation's history is reused (measured hit rates 0.85 and 0.88 against round
        // robin's 0.38) and first tokens come well inside the 500 ms SLO (p95 61 and 47 ms).
        assert!(s.prefix_cache.hit_rate > 0.8, "{}", s.prefix_cache.hit_rate);
        assert!(s.ttft_ms.p95 < 100.0, "{}: p95 {}", s.policy, s.ttft_ms.p95);
    }
    // The fleet has room for the load whatever the routing: every policy meets the SLOs.
    for s in &r {
        assert!(s.goodput.fraction > 0.99, "{}: {:?}", s.policy, s.goodput);
    }
}

/// Dynamo's cost counts the requests the router itself has in flight, so arrivals between two engine
/// steps do not all see the same "least loaded" worker: queueing stays of the order of llm-d's
/// (the preset that read the engine's blocks-in-use herded: queue p95 ≈ 10× llm-d's).
#[test]
fn chat_sessions_dynamo_kv_does_not_herd() {
    let r = compare_on("chat-sessions.toml", "5m", "llm_d,dynamo_kv");
    let (llm_d, dynamo) = (&r[0], &r[1]);
    assert!(
        dynamo.queue_ms.p95 < 5.0 * llm_d.queue_ms.p95.max(1.0),
        "dynamo_kv queue p95 {} vs llm_d {}",
        dynamo.queue_ms.p95,
        llm_d.queue_ms.p95
    );
    assert!(
        dynamo.ttft_ms.p95 < 300.0,
        "dynamo_kv p95 TTFT {}",
        dynamo.ttft_ms.p95
    );
    assert!(max_share(dynamo) < 0.2, "{}", max_share(dynamo));
}

/// Whether llm-d's approximate scheduler collapses `hot-prefix` onto one worker is decided by its
/// version's prefix window and by its weights. v0.8 (llm-d-inference-scheduler v0.8.0) hashes the first
/// 256 blocks of 16 tokens: exactly the hot schema, so a hot request scores a full match on the worker
/// that served one, more than queue and KV utilisation take back (3 : 2 : 2). v0.10 (the default)
/// hashes up to 131,072 tokens in blocks of 64: the whole prompt, the schema's 64 blocks of ≈ 69, and
/// spreads them. So does v0.8 with its window lifted (`max_prefix_blocks=0`), while the pre-2026
/// weights 2 : 1 : 1 collapse even then (on the scenario's seed, 11; seeds 12–13 lose goodput
/// instead, a knife edge, see docs/routing.md). The KV-event variant spreads them. Three minutes of
/// the scenario.
#[test]
fn hot_prefix_llm_d_weights_and_prefix_window_decide_the_collapse() {
    let r = compare_on(
        "hot-prefix.toml",
        "3m",
        "llm_d,llm_d:version=v0.8,max_prefix_blocks=0,llm_d:version=v0.8,prefix_weight=2,queue_weight=1,kv_weight=1,max_prefix_blocks=0,llm_d_precise,llm_d:version=v0.8",
    );
    let (newest, whole_prompt, old, precise, windowed) = (&r[0], &r[1], &r[2], &r[3], &r[4]);
    for s in [newest, whole_prompt, precise] {
        assert!(
            s.ttft_ms.p50 < 100.0,
            "{}: p50 TTFT {}",
            s.policy,
            s.ttft_ms.p50
        );
        assert!(
            s.goodput.fraction > 0.95,
            "{}: goodput {}",
            s.policy,
            s.goodput.fraction
        );
    }
    for s in [old, windowed] {
        assert!(
            s.ttft_ms.p50 > 1000.0,
            "{}: p50 TTFT {}",
            s.policy,
            s.ttft_ms.p50
        );
        assert!(max_share(s) > max_share(whole_prompt));
    }
}

/// The short cut of the same collapse, per version at its defaults: 45 s of `hot-prefix` (seed 11,
/// about 2,700 requests) is enough for v0.8's 256-block window to pile the hot schema onto one worker
/// (over half the requests, p50 TTFT over a second, goodput under 0.8), and for v0.10 (the default,
/// 2,048 blocks of 64 tokens) to spread it (no worker over 35%, p50 under 100 ms, every request within
/// the SLO).
#[test]
fn hot_prefix_collapses_under_llm_d_v0_8_and_not_under_v0_10() {
    let r = compare_on("hot-prefix.toml", "45s", "llm_d:version=v0.8,llm_d");
    let (v0_8, v0_10) = (&r[0], &r[1]);
    assert_eq!(v0_8.requests.arrived, v0_10.requests.arrived);
    assert!(max_share(v0_8) > 0.5, "v0.8 max share {}", max_share(v0_8));
    assert!(v0_8.ttft_ms.p50 > 1000.0, "v0.8 p50 {}", v0_8.ttft_ms.p50);
    assert!(v0_8.goodput.fraction < 0.8, "v0.8 {:?}", v0_8.goodput);
    assert!(
        max_share(v0_10) < 0.35,
        "v0.10 max share {}",
        max_share(v0_10)
    );
    assert!(v0_10.ttft_ms.p50 < 100.0, "v0.10 p50 {}", v0_10.ttft_ms.p50);
    assert!(v0_10.goodput.fraction > 0.99, "v0.10 {:?}", v0_10.goodput);
}

/// `predicted_latency` prices each worker by its own step model: the queue of prompt work the gateway
/// sent there, the prompt's uncached part, and the decode batch. On `hot-prefix` it keeps the hot
/// requests on prefix holders only while their queue costs less than recomputing the 4,096-token
/// prefix elsewhere, which `llm_d`'s fixed 3 : 2 : 2 weights cannot express: fed the same KV events,
/// `llm_d` waits longer at p95 on this seed (11; measured over the full 10 minutes: 26.9 ms against
/// 28.9). The margin is small and seed-dependent (docs/routing.md: on seed 13 `llm_d` with events is
/// 0.6 ms ahead); against `llm_d`'s default approximate view the gap is about 35% on every seed.
#[test]
fn hot_prefix_predicted_latency_beats_llm_d_on_p95_ttft_under_events() {
    let r = compare_on(
        "hot-prefix.toml",
        "3m",
        "predicted_latency,llm_d:view=events",
    );
    let (predicted, llm_d) = (&r[0], &r[1]);
    assert_eq!(predicted.requests.arrived, llm_d.requests.arrived);
    assert!(
        predicted.ttft_ms.p95 < llm_d.ttft_ms.p95,
        "predicted_latency p95 {} vs llm_d (events) {}",
        predicted.ttft_ms.p95,
        llm_d.ttft_ms.p95
    );
    assert!(predicted.goodput.fraction > 0.99, "{:?}", predicted.goodput);
}

/// Both predictive routers give the same bytes for the same seed (their models learn from simulated
/// observations, whose order is fixed by the event queue).
#[test]
fn predictive_routers_are_deterministic() {
    for policy in ["predicted_latency", "llm_d_predicted"] {
        let a = compare_on("predictive-routing.toml", "40s", policy);
        let b = compare_on("predictive-routing.toml", "40s", policy);
        assert!(
            a[0].requests.completed > 1000,
            "{policy}: {:?}",
            a[0].requests
        );
        assert_eq!(
            serde_json::to_string(&a[0]).unwrap(),
            serde_json::to_string(&b[0]).unwrap(),
            "{policy}"
        );
    }
}

#[test]
fn lora_affinity_keeps_adapters_together_and_beats_round_robin_when_slots_are_scarce() {
    // scenarios/lora-adapters.toml, 2 minutes: 40 adapters on four workers of 4 slots. Spreading the
    // adapters over every worker makes more requests wait for a slot and more adapters come from
    // disk; the README's 5-minute, 5-replication table has the numbers.
    let r = compare_on("lora-adapters.toml", "2m", "lora_affinity,round_robin");
    let (aff, rr) = (&r[0], &r[1]);
    let (la, lr) = (aff.lora.as_ref().unwrap(), rr.lora.as_ref().unwrap());
    assert_eq!(la.adapters_requested, 40);
    assert!(la.disk_loads < lr.disk_loads, "{la:?} vs {lr:?}");
    assert!(
        la.requests_waited_for_slot < lr.requests_waited_for_slot,
        "{la:?} vs {lr:?}"
    );
    assert!(
        aff.ttft_ms.p95 < rr.ttft_ms.p95 / 2.0,
        "p95 TTFT {} vs {}",
        aff.ttft_ms.p95,
        rr.ttft_ms.p95
    );
    assert!(aff.goodput.fraction > rr.goodput.fraction + 0.2);
    assert_eq!(aff.requests.rejected + rr.requests.rejected, 0);
}

/// Router replicas on `chat-sessions` (4 minutes): `compare --vary router.replicas=1,4` and
/// `router.sync`, as `compare` crosses them with the policies.
#[test]
fn router_replicas_split_what_an_approximate_router_knows_unless_they_share_it() {
    let load = |set: &[&str]| {
        let mut s = vec!["duration=\"4m\"".to_string()];
        s.extend(set.iter().map(|x| x.to_string()));
        Scenario::load(&scenario_path("chat-sessions.toml"), &s).unwrap()
    };
    let base = load(&[]);
    let contenders = compare::resolve("llm_d,llm_d_precise", &base).unwrap();
    let variants: Vec<(String, Scenario)> = [
        ("one", vec![]),
        ("four", vec!["router.replicas=4"]),
        (
            "four by session",
            vec!["router.replicas=4", "router.spread=\"session\""],
        ),
        (
            "four sharing",
            vec!["router.replicas=4", "router.sync=\"decisions\""],
        ),
    ]
    .into_iter()
    .map(|(label, set)| (label.to_string(), load(&set)))
    .collect();
    let crossed = compare::cross(contenders, &base, &variants).unwrap();
    let out: Vec<Summary> = compare::run_all(&base, &crossed)
        .unwrap()
        .into_iter()
        .map(|o| o.summary)
        .collect();
    let hit = |i: usize| out[i].prefix_cache.hit_rate;
    let (one, four, by_session, sharing) = (hit(0), hit(1), hit(2), hit(3));
    // llm_d's approximate index learns only from its own replica's decisions: with four replicas fed
    // at random, a turn usually reaches a replica that never routed its conversation.
    assert!(four < one - 0.2, "one {one}, four {four}");
    // Fed by session, every turn meets the replica that knows it; sharing decisions, every replica
    // knows them all.
    assert!(
        by_session > one - 0.05,
        "one {one}, by session {by_session}"
    );
    assert!(sharing > one - 0.02, "one {one}, sharing {sharing}");
    assert_eq!(out[1].router.replicas.as_ref().unwrap().count, 4);
    assert!(out[0].router.replicas.is_none());
    assert!(
        out[3]
            .to_markdown()
            .contains("| router replicas | 4 (spread random, sync decisions, 1 ms late) |")
    );
    assert!(!out[0].to_markdown().contains("router replicas"));
    // llm_d_precise learns the caches from KV events, which reach every replica: the same hit rate.
    for i in 5..8 {
        assert!(
            (hit(i) - hit(4)).abs() < 0.01,
            "{} against {}",
            hit(i),
            hit(4)
        );
    }
}
