//! Incident numbers (issue 41): recompute that adds up, and the fault cases whose counts were wrong or
//! that crashed the simulator.

use fleetsim::engine::Simulation;
use fleetsim::metrics::Summary;
use fleetsim::scenario::Scenario;

use crate::common::{TempDir, run, scenario};
use fleetsim::metrics::record::RequestRecord;
use fleetsim::metrics::requests::RequestSink;
use std::sync::{Arc, Mutex};

/// A request sink that keeps every record in memory.
struct Keep(Arc<Mutex<Vec<RequestRecord>>>);

impl RequestSink for Keep {
    fn write(&mut self, rows: &[RequestRecord]) -> Result<(), String> {
        self.0.lock().unwrap().extend_from_slice(rows);
        Ok(())
    }
    fn finish(self: Box<Self>) -> Result<(), String> {
        Ok(())
    }
}

/// One worker, one request with a 20,000-token prompt prefilled in chunks of 8,192 (vLLM's default
/// budget on an H100), migrated when its worker crashes.
const LONG_PROMPT: &str = r#"
name = "long-prompt"
seed = 3
duration = "1s"
max_requests = 1

[[workers]]
count = 2
gpu = "h100"
model = "llama-3.1-8b"

[workload]
kind = "poisson"
rate = 1000.0
prompt = { dist = "fixed", tokens = 20000 }
output = { dist = "fixed", tokens = 20 }

[router]
policy = "round_robin"

[gateway]
in_flight = "migrate"
"#;

#[test]
fn a_crash_mid_prefill_migrates_only_what_was_computed() {
    // The request reaches worker 0 and its first step computes 8,192 tokens; the second step (8,192 more)
    // is in flight when worker 0 crashes. Migration re-prefills what the lost attempt had computed,
    // 8,192 tokens, for cause `migrated`: not the whole 20,000-token prompt. A retry from scratch of the
    // same case counts the same 8,192 for cause `failure`.
    let probe = scenario(LONG_PROMPT, &[]);
    let perf = probe.workers[0].perf();
    let mut first = fleetsim::hardware::StepShape::default();
    first.add(8192, 0);
    let built = probe
        .workload
        .build(probe.seed, fleetsim::time::SimTime(1_000_000_000), Some(1))
        .unwrap();
    let mut w = built.workload;
    let arrival = w.next_arrival().unwrap().arrival;
    let crash_at = arrival.0 + perf.step_time(&first).0 + 1;
    let fault =
        format!("faults=[{{kind=\"crash\",worker=0,at=\"{crash_at}ns\",restart_after=\"5s\"}}]");
    let migrated = run(&scenario(LONG_PROMPT, &[fault.as_str()])).0;
    assert_eq!(migrated.requests.completed, 1, "{migrated:?}");
    assert_eq!(migrated.requests.migrated, 1);
    assert_eq!(migrated.recompute.by_cause.migrated.tokens, 8192);
    assert_eq!(migrated.recompute.tokens, 8192);
    assert_eq!(migrated.recompute.history_reprefilled_tokens, 8192);
    let retried = run(&scenario(
        LONG_PROMPT,
        &[fault.as_str(), "gateway.in_flight=\"retry\""],
    ))
    .0;
    assert_eq!(retried.requests.completed, 1);
    assert_eq!(retried.recompute.by_cause.failure.tokens, 8192);
    assert_eq!(retried.recompute.tokens, 8192);
}

/// A disaggregated fleet (one prefill, one decode worker) whose decode worker crashes, the gateway
/// migrating the requests in flight.
const PD_MIGRATE: &str = r#"
name = "pd-migrate"
seed = 8
duration = "30s"
[[workers]]
count = 2
gpu = "h100"
model = "llama-3.1-8b"
prefill_workers = 1
[workload]
kind = "poisson"
rate = 8.0
prompt = { dist = "lognormal", median = 2000, sigma = 0.6, max = 12000 }
output = { dist = "lognormal", median = 150, sigma = 0.6, max = 1500 }
[router]
policy = "round_robin"
[gateway]
in_flight = "migrate"
[[faults]]
kind = "crash"
worker = 1
at = "10.5s"
restart_after = "10s"
"#;

#[test]
fn a_disaggregated_fleet_migrates_lost_hand_offs_without_panicking() {
    // A hand-off whose decode worker is down is migrated at once, back onto the prefill worker that
    // just finished its step: that worker must not be asked to start a second step (it panicked with
    // "started a step while one is in flight" on seeds 1-8).
    for seed in 1..=8 {
        let s = format!("seed={seed}");
        let out: Summary = run(&scenario(PD_MIGRATE, &[s.as_str()])).0;
        let r = &out.requests;
        assert_eq!(
            r.arrived,
            r.completed + r.failed + r.rejected,
            "seed {seed}"
        );
        assert!(r.migrated > 0, "seed {seed}: {r:?}");
        assert_eq!(
            out.recompute.tokens,
            out.recompute.history_reprefilled_tokens
        );
    }
}

/// A request of `tokens` tokens at `ms`, its first `blocks` Mooncake blocks (512 tokens each) those of
/// a shared 8,192-token document (ids 0-15), the rest its own (`own` on).
fn line(ms: u64, tokens: u32, blocks: u32, own: u32) -> String {
    let ids: Vec<String> = (0..blocks)
        .map(|i| i.to_string())
        .chain((0..tokens.div_ceil(512) - blocks).map(|i| (own + i).to_string()))
        .collect();
    format!(
        "{{\"timestamp\": {ms}, \"input_length\": {tokens}, \"output_length\": 10, \"hash_ids\": [{}]}}\n",
        ids.join(", ")
    )
}

/// Two workers under round robin serving `trace` (Mooncake lines), with `extra` scenario text.
fn trace_scenario(dir: &TempDir, trace: &str, extra: &str) -> Scenario {
    let path = dir.path("trace.jsonl");
    std::fs::write(&path, trace).unwrap();
    let text = format!(
        r#"
name = "two-workers"
seed = 1
duration = "10s"
[[workers]]
count = 2
gpu = "h100"
model = "llama-3.1-8b"
[workload]
kind = "trace"
path = "{}"
format = "mooncake"
[router]
policy = "round_robin"
{extra}
"#,
        path.display()
    );
    scenario(&text, &[])
}

const PEERS: &str = "[interconnect]\npeer_transfer = true\nrdma_gb_per_s = 20.0\n";

#[test]
fn a_pull_whose_source_dies_counts_nothing_avoided_and_recomputes_for_failure() {
    // The document is computed on worker 0 at 0 s (~200 ms); a request with it arrives at 2 s on
    // worker 1, which pulls the 8,192 tokens (1 GiB at 128 KiB a token) from worker 0 over the 20 GB/s
    // link in ~54 ms, cheaper than the ~200 ms prefill.
    let dir = TempDir::new("failed-pull");
    let trace = line(0, 8192, 16, 0) + &line(2000, 8200, 16, 100);
    let clean = run(&trace_scenario(&dir, &trace, PEERS)).0;
    let p = clean.peer_transfer.as_ref().unwrap();
    assert_eq!(
        (p.transfers, p.recompute_avoided_tokens),
        (1, 8192),
        "{p:?}"
    );
    assert_eq!(p.lost_to_source_failure, 0);
    // Worker 0 crashes 20 ms into the pull: nothing arrived, so nothing was avoided or moved, and the
    // 8,192 tokens worker 1 now computes were lost with worker 0 (cause `failure`, not `misrouted`:
    // no live worker holds them any more).
    let crash = format!(
        "{PEERS}[[faults]]\nkind = \"crash\"\nworker = 0\nat = \"2.02s\"\nrestart = false\n"
    );
    let out = run(&trace_scenario(&dir, &trace, &crash)).0;
    let p = out.peer_transfer.as_ref().unwrap();
    assert_eq!(p.lost_to_source_failure, 1, "{p:?}");
    assert_eq!(
        (p.transfers, p.blocks_transferred, p.bytes_transferred),
        (0, 0, 0)
    );
    assert_eq!(p.recompute_avoided_tokens, 0);
    let c = &out.recompute.by_cause;
    assert_eq!(c.misrouted.tokens, 0, "{c:?}");
    assert_eq!(c.failure.tokens, 8192, "{c:?}");
    assert_eq!(out.requests.completed, 2);
}

#[test]
fn a_retried_request_reports_the_cache_hits_and_first_token_the_client_got() {
    // Request 0 computes the document on worker 0; request 1 (other content) goes to worker 1; request 2
    // (the document and 8 more tokens) comes back to worker 0 at 2 s and hits all 8,192 tokens there.
    // Worker 0 crashes 40 ms later, while request 2 decodes: it is retried on worker 1, which never held
    // the document, so the attempt that completes hits nothing and recomputes it (cause `failure`).
    let dir = TempDir::new("retry-hits");
    let trace = line(0, 8192, 16, 0) + &line(1000, 512, 0, 100) + &line(2000, 8200, 16, 200);
    let crash = "[[faults]]\nkind = \"crash\"\nworker = 0\nat = \"2.04s\"\nrestart = false\n";
    let records = Arc::new(Mutex::new(Vec::new()));
    let mut sim = Simulation::from_scenario(&trace_scenario(&dir, &trace, crash)).unwrap();
    sim.stream_requests(Box::new(Keep(Arc::clone(&records))));
    let out = sim.run(&mut |_| {});
    assert_eq!(out.summary.requests.completed, 3);
    let records = records.lock().unwrap();
    let r = records.iter().find(|r| r.id == 2).unwrap();
    assert_eq!((r.worker, r.retries), (Some(1), 1));
    assert_eq!(
        r.cached_tokens, 0,
        "the completing attempt's hits, not the first's 8,192"
    );
    // What the lost attempt had (the document it hit, its own 8 tokens) is recomputed for `failure`.
    assert_eq!(out.summary.recompute.by_cause.failure.tokens, 8200);
    // Its first token came from the first attempt, before the crash: that is what the client saw.
    let first = r.first_token.unwrap();
    assert!(
        first.0 > 2_000_000_000 && first.0 < 2_040_000_000,
        "first token at {first:?}"
    );
}

#[test]
fn run_into_a_closed_pipe_finishes_its_work_without_panicking() {
    // `fleetsim run ... | head -1`: stdout's reader goes away after the first line.
    use std::process::{Command, Stdio};
    let dir = TempDir::new("closed-pipe");
    let out_dir = dir.path("results");
    let mut child = Command::new(env!("CARGO_BIN_EXE_fleetsim"))
        .args([
            "run",
            "scenarios/quickstart.toml",
            "--quiet",
            "--set",
            "duration=20s",
            "--out",
        ])
        .arg(&out_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader is gone before anything is written
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "exit {status:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        out_dir.join("summary.json").exists(),
        "results still written"
    );
}

#[test]
fn a_conversations_history_is_re_prefilled_with_one_cause_per_token() {
    // On a chat fleet, for each turn whose previous turn completed, the history it re-prefills (the
    // previous prompt and answer in whole KV blocks, less what it found cached) equals the recompute
    // the turn reports by cause, for every policy; first turns recompute only shared system prompts.
    for policy in [
        "round_robin",
        "session_affinity",
        "prefix_aware",
        "least_outstanding",
    ] {
        let s = scenario(
            &std::fs::read_to_string(crate::common::scenario_path("chat-sessions.toml")).unwrap(),
            &[
                "duration=40s",
                "workers[0].count=6",
                &format!("router.policy=\"{policy}\""),
            ],
        );
        let records = Arc::new(Mutex::new(Vec::new()));
        let mut sim = Simulation::from_scenario(&s).unwrap();
        sim.stream_requests(Box::new(Keep(Arc::clone(&records))));
        let out = sim.run(&mut |_| {});
        let records = records.lock().unwrap();
        let by_turn: std::collections::HashMap<(u64, u32), _> = records
            .iter()
            .filter_map(|r| Some(((r.session?, r.turn?), r)))
            .collect();
        let (mut history, mut causes) = (0u64, 0u64);
        for (&(session, turn), r) in &by_turn {
            if turn == 0 {
                continue;
            }
            let Some(prev) = by_turn.get(&(session, turn - 1)) else {
                continue;
            };
            let blocks = (prev.prompt_tokens + prev.output_tokens - 1) / 16;
            let h = (blocks * 16).min(r.prompt_tokens);
            assert_eq!(
                r.history_tokens, h,
                "{policy}: session {session} turn {turn}"
            );
            history += u64::from(h.saturating_sub(r.cached_tokens));
            causes += r.recompute.total_tokens();
        }
        if policy == "round_robin" {
            assert!(
                history > 0,
                "round robin scatters turns: some history is re-prefilled"
            );
        }
        assert_eq!(causes, history, "{policy}: history re-prefilled vs causes");
        let rc = &out.summary.recompute;
        assert_eq!(rc.tokens, rc.history_reprefilled_tokens, "{policy}");
    }
}

/// Three workers, multi-turn chat, two minutes of arrivals.
const CHAT: &str = r#"
name = "chat"
seed = 4
duration = "2m"
[[workers]]
count = 3
gpu = "h100"
model = "llama-3.1-8b"
[workload]
kind = "sessions"
session_rate = 2.0
mode = "closed"
turns = { dist = "geometric", mean = 4, max = 20 }
first_prompt = { dist = "lognormal", median = 400, sigma = 0.9, max = 8000 }
prompt = { dist = "lognormal", median = 120, sigma = 0.9, max = 4000 }
output = { dist = "lognormal", median = 200, sigma = 0.7, max = 2000 }
think_time = { dist = "lognormal", median = "5s", sigma = 1.0, max = "2m" }
system_prompts = { count = 10, tokens = 800, zipf = 1.1 }
[router]
policy = "session_affinity"
"#;

fn judged(text: &str, overrides: &[&str]) -> Summary {
    let s = scenario(text, overrides);
    fleetsim::engine::twin::run_judged(&s, true, |_| Ok(()), &mut |_| {})
        .unwrap()
        .summary
}

#[test]
fn the_twin_of_a_fault_free_run_is_the_run_itself() {
    let plain = run(&scenario(CHAT, &[])).0;
    let judged = judged(CHAT, &[]);
    assert!(judged.twin.is_none());
    assert_eq!(plain.to_json(), judged.to_json());
}

#[test]
fn a_fault_that_changes_nothing_costs_nothing_against_its_twin() {
    // A slowdown by a factor of 1 at 60 s: the run is the twin, event for event, so every excess is 0
    // and the fleet is back at once.
    let fault = "faults=[{kind=\"slowdown\",worker=0,at=\"60s\",duration=\"30s\",factor=1.0}]";
    let out = judged(CHAT, &[fault]);
    let r = &out.recovery[0];
    assert_eq!(r.judged_against, "twin");
    assert_eq!(r.timing, "during_arrivals");
    assert!(r.in_flight > 0, "{r:?}");
    assert_eq!(r.excess_ttft_p50_ms, Some(0.0), "{r:?}");
    assert_eq!(r.excess_ttft_p95_ms, Some(0.0));
    assert_eq!(
        (
            r.excess_failed,
            r.excess_retried,
            r.excess_sessions_reset,
            r.excess_recompute_tokens
        ),
        (Some(0), Some(0), Some(0), Some(0))
    );
    assert_eq!(r.victims_ttft_p95_ms, r.victims_twin_ttft_p95_ms);
    assert_eq!(r.time_to_recover_s, Some(0.0));
}

#[test]
fn a_crash_counts_its_victims_against_the_same_requests_in_the_twin() {
    // Worker 0 crashes at 60 s: the requests on it then are its victims, served again from scratch
    // elsewhere. The same requests in the twin (identical up to the fault) finish sooner.
    let fault = "faults=[{kind=\"crash\",worker=0,at=\"60s\",restart_after=\"30s\"}]";
    // Whole-run headlines on both sides (the twin's warm-up is detected before the fault, the plain
    // run's over its whole window).
    let whole = "metrics.warmup=\"none\"";
    let out = judged(CHAT, &[fault, whole]);
    let r = &out.recovery[0];
    assert!(r.victims > 0 && r.victims <= r.in_flight, "{r:?}");
    assert!(
        r.victims_e2e_p95_ms.unwrap() > r.victims_twin_e2e_p95_ms.unwrap(),
        "{r:?}"
    );
    assert!(r.excess_retried.unwrap() >= r.victims as i64, "{r:?}");
    assert!(r.excess_recompute_tokens.unwrap() > 0, "{r:?}");
    // The twin's headline is the same scenario without the fault.
    let twin = run(&scenario(CHAT, &[whole])).0;
    assert_eq!(out.twin.as_ref().unwrap().ttft_p95_ms, twin.ttft_ms.p95);
    // The worst window is the fault's own or later, and includes the victims.
    assert!(r.worst_window_start_s.unwrap() >= 60.0);
}

#[test]
fn faults_at_the_start_after_the_last_arrival_and_after_the_end_say_so() {
    let at =
        |t: &str| format!("faults=[{{kind=\"crash\",worker=0,at=\"{t}\",restart_after=\"10s\"}}]");
    let start = judged(CHAT, &[at("0s").as_str()]);
    assert_eq!(start.recovery[0].timing, "at_start");
    assert_eq!(start.recovery[0].in_flight, 0);
    // Arrivals stop before 2 min; the turns in flight then finish a few seconds later.
    let late = judged(CHAT, &[at("120s").as_str()]);
    assert_eq!(late.recovery[0].timing, "after_last_arrival");
    assert_eq!(
        late.recovery[0].affected_requests,
        late.recovery[0].in_flight
    );
    let never = judged(CHAT, &[at("10h").as_str()]);
    assert_eq!(never.recovery.len(), 1, "reported, not silently dropped");
    assert_eq!(never.recovery[0].timing, "after_end");
    assert!(!never.recovery[0].recovered);
    // `validate` (and `run`) say so before the run.
    let s = scenario(CHAT, &[at("10h").as_str()]);
    let sim = Simulation::from_scenario(&s).unwrap();
    assert!(
        sim.notes()
            .iter()
            .any(|n| n.contains("after the end of the arrival window")),
        "{:?}",
        sim.notes()
    );
}
