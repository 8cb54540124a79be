//! Faults, the gateway's reaction, session state and recovery (issue: faults).

use fleetsim::engine::Simulation;
use fleetsim::hardware::StepShape;
use fleetsim::metrics::Summary;
use fleetsim::scenario::Scenario;
use proptest::prelude::*;

use crate::common::{run, scenario, scenario_path};

fn load(name: &str, overrides: &[&str]) -> Scenario {
    let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    Scenario::load(&scenario_path(name), &o).unwrap_or_else(|e| panic!("{e}"))
}

fn summary(s: &Scenario) -> Summary {
    run(s).0
}

/// One worker, one request with a 1024-token prompt prefilled in chunks of 256.
const ONE_REQUEST: &str = r#"
name = "one-request"
seed = 3
duration = "1s"
max_requests = 1

[[workers]]
count = 1
gpu = "h100"
model = "llama-3.1-8b"
max_num_batched_tokens = 256

[workload]
kind = "poisson"
rate = 1000.0
prompt = { dist = "fixed", tokens = 1024 }
output = { dist = "fixed", tokens = 50 }

[gateway]
health_check_interval = "500ms"
max_retries = 20
retry_backoff = "100ms"
retry_backoff_max = "1s"

[[faults]]
kind = "crash"
worker = 0
at = "0s"
restart_after = "1s"
"#;

#[test]
fn a_crash_mid_prefill_recomputes_exactly_what_was_computed() {
    // The request arrives at a, its prefill runs in chunks of 256 tokens: steps of 256 new tokens on 0,
    // 256, 512 and 768 tokens of context. A crash while the third step is in flight loses the two chunks
    // done (512 tokens, 32 full blocks registered) and the third's progress. After the restart the retry
    // finds an empty cache and computes all 1024 tokens: 512 of them again, for cause `failure`.
    let probe = scenario(ONE_REQUEST, &["faults=[]"]);
    let perf = probe.workers[0].perf();
    let step = |context: u64| {
        let mut s = StepShape::default();
        s.add(256, context);
        perf.step_time(&s)
    };
    // Where the single request arrives: run without faults and read it from its queue time (0: it is
    // scheduled on arrival) and TTFT (four chunks, then the first token).
    let clean = summary(&probe);
    assert_eq!(clean.requests.completed, 1);
    let four = step(0).0 + step(256).0 + step(512).0 + step(768).0;
    // The arrival time is the workload's first Poisson draw; fetch it by running the workload alone.
    let built = probe
        .workload
        .build(probe.seed, fleetsim::time::SimTime(1_000_000_000), Some(1))
        .unwrap();
    let mut w = built.workload;
    let arrival = w.next_arrival().unwrap().arrival;
    assert_eq!(
        (clean.ttft_ms.max * 1e6).round() as u64,
        four,
        "TTFT of an idle worker is its four prefill chunks"
    );
    let crash_at = arrival.0 + step(0).0 + step(256).0 + 1;
    let crash = format!("faults[0].at=\"{}ns\"", crash_at);
    let s = scenario(ONE_REQUEST, &[crash.as_str()]);
    let out = summary(&s);
    assert_eq!(out.requests.completed, 1, "{out:?}");
    assert_eq!(out.requests.failed, 0);
    assert_eq!(out.requests.retried, 1);
    assert_eq!(out.recompute.by_cause.failure.tokens, 512);
    assert_eq!(out.recompute.tokens, 512);
    assert_eq!(out.recompute.prefill_tokens, 512 + 1024);
    assert_eq!(out.recovery.len(), 1);
}

#[test]
fn an_empty_fault_list_changes_nothing() {
    let plain = load("quickstart.toml", &[]);
    let empty = load("quickstart.toml", &["faults=[]"]);
    assert_eq!(summary(&plain).to_json(), summary(&empty).to_json());
}

fn sticky(mode: &str, extra: &[&str]) -> Summary {
    let set = format!("gateway.session_state=\"{mode}\"");
    let mut o = vec![set.as_str()];
    o.extend_from_slice(extra);
    summary(&load("failure-sticky-crash.toml", &o))
}

#[test]
fn session_state_decides_what_a_sticky_crash_costs() {
    let client = sticky("client", &[]);
    let worker = sticky("worker", &[]);
    let shared = sticky("shared_tier", &[]);
    for s in [&client, &worker, &shared] {
        assert_eq!(s.recovery.len(), 1);
        assert_eq!(
            s.requests.arrived,
            s.requests.completed + s.requests.failed + s.requests.rejected
        );
        assert!(s.requests.retried > 0, "requests in flight were retried");
    }
    // Worker-held state: the dead worker's conversations start over.
    assert!(worker.sessions.reset > 0);
    // Most resets come while the fleet recovers; a few later, when idle conversations return.
    let during = worker.recovery[0].sessions_reset;
    assert!(during > 0 && during <= worker.sessions.reset);
    // Client-held state: nothing is reset, the history is recomputed elsewhere.
    assert_eq!(client.sessions.reset, 0);
    assert!(client.recompute.by_cause.failure.tokens > 0);
    // Worker-held state recomputes far less history (it was dropped), the shared tier less still.
    assert!(worker.recompute.by_cause.failure.tokens < client.recompute.by_cause.failure.tokens);
    assert!(
        shared.recompute.by_cause.failure.tokens < client.recompute.by_cause.failure.tokens / 10
    );
    assert!(shared.prefix_cache.loaded_tokens > 0);
    // At this load the fleet recovers, within a few minutes, judged as `fleetsim run` judges it:
    // against the run without the crash. (Against the minutes before the crash it does not, with
    // asynchronous scheduling: the conversations that keep arriving load the fleet more as the run
    // goes on, and the twin's own p95 TTFT drifts above the pre-crash one.)
    let judged = fleetsim::engine::twin::run_judged(
        &load(
            "failure-sticky-crash.toml",
            &["gateway.session_state=\"client\""],
        ),
        true,
        |_| Ok(()),
        &mut |_| {},
    )
    .unwrap();
    let t = judged.summary.recovery[0]
        .time_to_recover_s
        .expect("client recovers");
    assert!(t > 0.0 && t < 300.0, "{t}");
}

#[test]
fn migration_keeps_requests_that_a_retry_budget_of_zero_loses() {
    // No retries allowed: a retry from scratch fails every request in flight on the dead worker;
    // migration has its own budget and carries them to another worker.
    let retry = sticky(
        "client",
        &["gateway.max_retries=0", "gateway.in_flight=\"retry\""],
    );
    let migrate = sticky(
        "client",
        &["gateway.max_retries=0", "gateway.in_flight=\"migrate\""],
    );
    assert!(retry.requests.failed > 0);
    assert!(
        migrate.requests.failed < retry.requests.failed,
        "{} vs {}",
        migrate.requests.failed,
        retry.requests.failed
    );
    assert!(migrate.requests.migrated > 0);
    assert!(migrate.recompute.by_cause.migrated.tokens > 0);
}

#[test]
fn a_crash_without_restart_at_high_load_never_recovers() {
    let s = sticky(
        "client",
        &["workload.session_rate=5.0", "faults[0].restart=false"],
    );
    assert!(!s.recovery[0].recovered);
    assert_eq!(s.recovery[0].time_to_recover_s, None);
    assert!(s.to_json().contains("\"time_to_recover_s\": null"));
}

#[test]
fn a_silent_slowdown_hurts_sticky_routing_more() {
    // Relative to the same policy without the fault: the sticky router keeps feeding the slow worker
    // its conversations; least-outstanding routes around it.
    let hurt = |policy: &str| {
        let p = format!("router.policy=\"{policy}\"");
        let slow = summary(&load("failure-slowdown.toml", &[p.as_str()]));
        let healthy = summary(&load("failure-slowdown.toml", &[p.as_str(), "faults=[]"]));
        assert_eq!(slow.requests.failed, 0, "a slowdown fails nothing");
        slow.ttft_ms.p95 / healthy.ttft_ms.p95
    };
    let sticky = hurt("session_affinity");
    let balanced = hurt("least_outstanding");
    assert!(sticky > 1.2, "{sticky}");
    assert!(sticky > balanced, "{sticky} vs {balanced}");
}

#[test]
fn a_rack_loss_takes_every_worker_in_the_domain() {
    let s = summary(&load("failure-rack-loss.toml", &[]));
    assert_eq!(s.recovery.len(), 1);
    assert_eq!(s.recovery[0].fault, "crash rack-b");
    // The four survivors served everything while rack b was down: requests retried, none lost.
    assert!(s.requests.retried > 0);
    assert_eq!(s.requests.failed, 0);
    assert!(s.recompute.by_cause.failure.tokens > 0);
}

#[test]
fn bad_faults_are_named_with_their_line() {
    let base = std::fs::read_to_string(scenario_path("failure-sticky-crash.toml")).unwrap();
    let cases: &[(&str, &str)] = &[
        ("worker = \"most_sessions\"", "worker = 9"),
        ("worker = \"most_sessions\"", "domain = \"rack-z\""),
        ("at = \"10m\"", "at = \"10m\"\nrestart_after = \"0s\""),
        ("at = \"10m\"", "mtbf = \"0s\""),
        ("at = \"10m\"", "at = \"10m\"\nfactor = 2.0"),
    ];
    let expect = ["no worker 9", "rack-z", "restart_after", "mtbf", "factor"];
    for ((from, to), want) in cases.iter().zip(expect) {
        let text = base.replacen(from, to, 1);
        let err = Scenario::parse(&text, "s.toml", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{err}");
        assert!(err.starts_with("s.toml:"), "names the line: {err}");
        assert!(err.contains("faults[0]"), "names the field: {err}");
    }
    // Two crashes of one worker while it is still down contradict each other.
    let twice = base.clone()
        + "\n[[faults]]\nkind = \"crash\"\nworker = 1\nat = \"10m\"\n[[faults]]\nkind = \"crash\"\nworker = 1\nat = \"630s\"\n";
    let err = Scenario::parse(&twice, "s.toml", &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("contradicts"), "{err}");
}

/// A small fleet for random fault schedules.
const SMALL: &str = r#"
name = "small"
seed = 9
duration = "40s"

[[workers]]
count = 3
gpu = "h100"
model = "llama-3.1-8b"
kv_blocks = 400
failure_domain = "node-a"

[workload]
kind = "sessions"
session_rate = 2.0
mode = "closed"
turns = { dist = "geometric", mean = 3, max = 6 }
first_prompt = { dist = "lognormal", median = 300, sigma = 0.5, max = 1500 }
prompt = { dist = "lognormal", median = 80, sigma = 0.5, max = 400 }
output = { dist = "lognormal", median = 60, sigma = 0.5, max = 300 }
think_time = { dist = "lognormal", median = "2s", sigma = 0.5, max = "10s" }
system_prompts = { count = 4, tokens = 200, zipf = 1.1 }

[router]
policy = "session_affinity"

[gateway]
health_check_interval = "1s"
request_timeout = "3s"
"#;

fn fault_toml(kind: u8, worker: u8, at_ms: u32, len_ms: u32) -> String {
    let at = format!("at = \"{at_ms}ms\"");
    let w = format!("worker = {}", worker % 3);
    match kind % 6 {
        0 => format!("[[faults]]\nkind = \"crash\"\n{w}\n{at}\nrestart_after = \"{len_ms}ms\"\n"),
        1 => format!("[[faults]]\nkind = \"hang\"\n{w}\n{at}\nrestart_after = \"{len_ms}ms\"\n"),
        2 => format!(
            "[[faults]]\nkind = \"drain\"\n{w}\n{at}\ngrace = \"{}ms\"\nrestart_after = \"{len_ms}ms\"\n",
            len_ms / 2
        ),
        3 => format!(
            "[[faults]]\nkind = \"slowdown\"\n{w}\n{at}\nduration = \"{len_ms}ms\"\nfactor = 4.0\n"
        ),
        4 => format!(
            "[[faults]]\nkind = \"memory_pressure\"\n{w}\n{at}\nduration = \"{len_ms}ms\"\nfraction = 0.7\n"
        ),
        _ => format!(
            "[[faults]]\nkind = \"crash\"\ndomain = \"node-a\"\n{at}\nrestart_after = \"{len_ms}ms\"\nkv_survives_restart = {}\n",
            len_ms.is_multiple_of(2)
        ),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Every request ends exactly once, no KV block leaks across restarts (checked at the end of every
    /// run), no work is served by a down worker (asserted in the engine), recompute adds up by cause
    /// under every policy, and runs are deterministic.
    #[test]
    fn random_fault_schedules_lose_nothing(
        faults in proptest::collection::vec((0u8..6, 0u8..3, 1_000u32..35_000, 500u32..8_000), 0..4),
        in_flight in 0usize..3,
        state in 0usize..3,
        policy in 0usize..4,
    ) {
        let mut text = SMALL.to_string().replace(
            "policy = \"session_affinity\"",
            &format!(
                "policy = \"{}\"",
                ["session_affinity", "round_robin", "prefix_aware", "least_outstanding"][policy]
            ),
        );
        text = text.replace(
            "request_timeout = \"3s\"",
            &format!(
                "request_timeout = \"3s\"\nin_flight = \"{}\"\nsession_state = \"{}\"",
                ["fail", "retry", "migrate"][in_flight],
                ["client", "worker", "shared_tier"][state]
            ),
        );
        for (k, w, at, len) in &faults {
            text.push_str(&fault_toml(*k, *w, *at, *len));
        }
        // Random schedules may contradict each other; those are rejected up front, which is the point.
        let Ok(s) = Scenario::parse(&text, "random.toml", &[]) else { return Ok(()); };
        let a = Simulation::from_scenario(&s).unwrap().run(&mut |_| {}).summary;
        let r = &a.requests;
        prop_assert_eq!(r.arrived, r.completed + r.failed + r.rejected);
        // Every re-prefilled token has exactly one cause (also asserted at the end of every run).
        prop_assert_eq!(a.recompute.tokens, a.recompute.history_reprefilled_tokens);
        let b = Simulation::from_scenario(&s).unwrap().run(&mut |_| {}).summary;
        prop_assert_eq!(a.to_json(), b.to_json());
    }
}

#[test]
fn a_fleet_with_no_worker_up_fails_requests_and_counts_them() {
    // Every worker is in node-a and never comes back: requests arriving after the crash are retried
    // while no worker is up, then fail with that reason; none vanishes.
    let text = format!(
        "{SMALL}\n[[faults]]\nkind = \"crash\"\ndomain = \"node-a\"\nat = \"10s\"\nrestart = false\n"
    );
    let s = Scenario::parse(&text, "dead.toml", &[]).unwrap();
    let out = summary(&s);
    let r = &out.requests;
    assert!(r.completed > 0, "requests before the crash complete");
    assert!(r.failed > 0, "requests after it fail");
    assert_eq!(r.arrived, r.completed + r.failed + r.rejected);
    assert!(!out.recovery[0].recovered);
}
