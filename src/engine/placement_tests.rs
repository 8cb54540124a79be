//! Requests placed by model and model swaps, timed by hand (`placement.rs`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use super::placement::Placement;
use super::tests::{Scripted, request};
use super::*;
use crate::hardware::{ModelId, StepShape};
use crate::routing::test_support::snapshots;
use crate::scenario::Scenario;
use crate::time::SimDuration;

const FLEET: &str = r#"
name = "swap"
duration = "60s"
[[workers]]
count = 1
gpu = "h100"
model = "llama-3.1-8b"
models = ["qwen3-8b"]
[workload]
kind = "poisson"
rate = 1
prompt = { dist = "fixed", tokens = 100 }
output = { dist = "fixed", tokens = 1 }
[swaps]
load_gb_per_s = 20
"#;

fn scenario(text: &str) -> Scenario {
    Scenario::parse(text, "swap.toml", &[]).unwrap()
}

/// `s`'s simulation fed `requests` instead of its workload; the handle fills with their records.
pub(super) fn run_with(
    s: &Scenario,
    requests: Vec<Request>,
) -> (RunOutput, Arc<Mutex<Vec<RequestRecord>>>) {
    let records = Arc::new(Mutex::new(Vec::new()));
    let mut sim = Simulation::from_scenario(s).unwrap();
    sim.workload = Box::new(Scripted {
        pending: VecDeque::from(requests),
        records: Arc::clone(&records),
    });
    (sim.run(&mut |_| {}), records)
}

pub(super) fn asking(mut r: Request, model: ModelId) -> Request {
    r.model = Some(model);
    r
}

fn secs(s: u64) -> SimTime {
    SimTime(s * crate::time::NANOS_PER_SEC)
}

/// The group's step model and weights when it serves `model`.
fn perf_of(s: &Scenario, model: ModelId) -> PerfModel {
    let mut g = s.workers[0].clone();
    g.model = model;
    g.perf()
}

fn prefill(perf: &PerfModel, tokens: u64) -> SimDuration {
    let mut shape = StepShape::default();
    shape.add(tokens, 0);
    perf.step_time(&shape)
}

fn ttft(r: &RequestRecord) -> SimDuration {
    r.first_token.unwrap().since(r.arrival)
}

#[test]
fn a_request_for_the_other_model_waits_exactly_one_swap_then_its_prefill() {
    // One worker, starting with Llama-3.1-8B. Qwen3-8B at 10 s: the idle worker sleeps Llama (its
    // weights out at 20 GB/s), wakes Qwen (in at 20 GB/s), then prefills. Llama again at 20 s: the
    // swap back. Each switching request's TTFT is the swap plus its own prefill, to the nanosecond.
    let s = scenario(FLEET);
    let (llama, qwen) = (
        perf_of(&s, ModelId::Llama31_8b),
        perf_of(&s, ModelId::Qwen3_8b),
    );
    let (out, records) = run_with(
        &s,
        vec![
            asking(request(0, secs(0), 1, 100, 1), ModelId::Llama31_8b),
            asking(request(1, secs(10), 2, 100, 1), ModelId::Qwen3_8b),
            asking(request(2, secs(20), 3, 100, 1), ModelId::Llama31_8b),
        ],
    );
    let by_id = |id| super::tests::by_id(&records, id);
    let bw = 20e9;
    let move_weights = |from: &PerfModel, to: &PerfModel| {
        SimDuration::from_secs_f64(from.weight_bytes_per_gpu() / bw)
            + SimDuration::from_secs_f64(to.weight_bytes_per_gpu() / bw)
    };
    assert_eq!(
        ttft(&by_id(0)),
        prefill(&llama, 100),
        "no swap: Llama is loaded"
    );
    assert_eq!(
        ttft(&by_id(1)),
        move_weights(&llama, &qwen) + prefill(&qwen, 100)
    );
    assert_eq!(
        ttft(&by_id(2)),
        move_weights(&qwen, &llama) + prefill(&llama, 100)
    );
    let m = out.summary.models.expect("placed by model");
    assert_eq!((m.swaps, m.swaps_cut_short), (2, 0));
    assert_eq!(m.requests_held, 2);
    assert_eq!(m.held_ttft_ms.count, 2);
    assert_eq!(m.drain_seconds, 0.0, "the worker was idle both times");
    assert_eq!(
        m.models_loaded.max, 1,
        "one worker serves one model at a time"
    );
}

#[test]
fn a_swap_waits_for_the_old_model_to_drain() {
    // Llama's request runs 100 decode steps; Qwen's arrives during them. The worker takes no new
    // request, finishes the Llama one, and only then swaps.
    let s = scenario(FLEET);
    let (out, records) = run_with(
        &s,
        vec![
            asking(request(0, secs(0), 1, 100, 100), ModelId::Llama31_8b),
            asking(request(1, SimTime(1), 2, 100, 1), ModelId::Qwen3_8b),
        ],
    );
    let first = super::tests::by_id(&records, 0);
    let second = super::tests::by_id(&records, 1);
    assert!(second.first_token.unwrap() > first.finished);
    let m = out.summary.models.unwrap();
    assert_eq!(m.swaps, 1);
    assert!((m.drain_seconds - first.finished.since(SimTime(1)).as_secs_f64()).abs() < 1e-6);
}

#[test]
fn a_model_no_worker_may_serve_is_rejected_by_reason() {
    let s = scenario(FLEET);
    let (out, _) = run_with(
        &s,
        vec![asking(request(0, secs(0), 1, 100, 1), ModelId::Mistral7b)],
    );
    assert_eq!(out.collector.rejected_by_reason["model_not_served"], 1);
    assert_eq!(out.summary.models.unwrap().rejected_model_not_served, 1);
}

#[test]
fn workers_of_another_model_are_never_routed_a_request() {
    // Two fixed groups, no swaps: every Qwen request lands on worker 1, every Llama one on worker 0.
    let text = r#"
name = "two"
duration = "60s"
[[workers]]
count = 1
gpu = "h100"
model = "llama-3.1-8b"
[[workers]]
count = 1
gpu = "h100"
model = "qwen3-8b"
[workload]
kind = "poisson"
rate = 1
prompt = { dist = "fixed", tokens = 100 }
output = { dist = "fixed", tokens = 1 }
model = "qwen3-8b"
"#;
    let s = scenario(text);
    let requests = (0..20)
        .map(|i| {
            let m = if i % 3 == 0 {
                ModelId::Llama31_8b
            } else {
                ModelId::Qwen3_8b
            };
            asking(request(i, secs(i), i + 1, 200, 5), m)
        })
        .collect();
    let (out, records) = run_with(&s, requests);
    for r in records.lock().unwrap().iter() {
        let want = if r.id % 3 == 0 { 0 } else { 1 };
        assert_eq!(r.worker, Some(want), "request {}", r.id);
    }
    assert_eq!(out.summary.models.unwrap().swaps, 0);
}

#[test]
fn a_crash_cuts_a_swap_short_and_the_held_request_is_served_elsewhere() {
    // Two Llama workers that may load Qwen. Qwen's request at 10 s picks worker 0 (idle, Llama stays
    // on worker 1, tie by id); worker 0 crashes mid-load at 10.5 s. The held request is routed again:
    // worker 1 swaps and serves it.
    let text = r#"
name = "swap-crash"
duration = "60s"
[[workers]]
count = 2
gpu = "h100"
model = "llama-3.1-8b"
models = ["qwen3-8b"]
[workload]
kind = "poisson"
rate = 1
prompt = { dist = "fixed", tokens = 100 }
output = { dist = "fixed", tokens = 1 }
[swaps]
load_gb_per_s = 20
[[faults]]
kind = "crash"
worker = 0
at = "10500ms"
restart_after = "30s"
"#;
    let s = scenario(text);
    let (out, records) = run_with(
        &s,
        vec![asking(request(0, secs(10), 1, 100, 1), ModelId::Qwen3_8b)],
    );
    let r = super::tests::by_id(&records, 0);
    assert_eq!(r.outcome, Outcome::Completed);
    assert_eq!(r.worker, Some(1));
    let m = out.summary.models.unwrap();
    assert_eq!((m.swaps, m.swaps_cut_short), (2, 1));
    assert_eq!((m.requests_held, m.held_failed), (1, 0));
    assert_eq!(m.replicas["qwen3-8b"].max, 1);
}

#[test]
fn load_on_every_copy_pulls_a_worker_of_an_idle_model_over_when_asked() {
    // One sequence at a time per worker, a Llama request every 100 ms, each taking longer than
    // that: a queue builds on worker 0. With add_replica_when_outstanding = 1 one of the two idle
    // Qwen workers swaps to Llama and takes part of the burst; the other stays, the last copy of
    // Qwen. Without it, the burst stays on worker 0.
    let text = |extra: &str| {
        format!(
            r#"
name = "swap-load"
duration = "60s"
[[workers]]
count = 1
gpu = "h100"
model = "llama-3.1-8b"
max_num_seqs = 1
[[workers]]
count = 2
gpu = "h100"
model = "qwen3-8b"
models = ["llama-3.1-8b"]
max_num_seqs = 1
[workload]
kind = "poisson"
rate = 1
prompt = {{ dist = "fixed", tokens = 100 }}
output = {{ dist = "fixed", tokens = 1 }}
[swaps]
load_gb_per_s = 20
{extra}
"#
        )
    };
    let burst = || {
        (0..40)
            .map(|i| {
                let at = SimTime(i * 100_000_000);
                asking(request(i, at, i + 1, 2000, 50), ModelId::Llama31_8b)
            })
            .collect::<Vec<_>>()
    };
    let (out, records) = run_with(
        &scenario(&text(
            "add_replica_when_outstanding = 1\nmin_residency = \"0s\"",
        )),
        burst(),
    );
    let on_1 = records
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.worker == Some(1))
        .count();
    assert!(on_1 > 0, "the second worker took none of the burst");
    let m = out.summary.models.unwrap();
    assert_eq!(m.swaps, 1);
    assert_eq!(m.requests_held, 0, "a copy was loaded all along");
    assert_eq!(m.replicas["qwen3-8b"].min, 1);

    let (out, records) = run_with(&scenario(&text("")), burst());
    assert!(records.lock().unwrap().iter().all(|r| r.worker == Some(0)));
    assert_eq!(out.summary.models.unwrap().swaps, 0);
}

#[test]
fn bad_model_keys_name_the_file_line_and_field() {
    let cases = [
        (
            "models = [\"qwen3-8b\"]",
            "models = [\"llama-3.1-8b\"]",
            "lists llama-3.1-8b twice",
        ),
        (
            "models = [\"qwen3-8b\"]",
            "models = [\"gpt-5\"]",
            "unknown name `gpt-5`",
        ),
        (
            "models = [\"qwen3-8b\"]",
            "models = [\"llama-3.1-70b\"]",
            "does not fit",
        ),
        (
            "load_gb_per_s = 20",
            "load_gb_per_s = 1e-300",
            "swaps.load_gb_per_s",
        ),
        ("load_gb_per_s = 20", "load_from = \"floppy\"", "floppy"),
        (
            "load_gb_per_s = 20",
            "add_replica_when_outstanding = 0",
            "`add_replica_when_outstanding`: expected an integer of at least 1",
        ),
        (
            "load_gb_per_s = 20",
            "min_residency = \"48h\"",
            "swaps.min_residency",
        ),
        (
            "load_gb_per_s = 20",
            "add_replica_when_queued = 2",
            "add_replica_when_queued",
        ),
        (
            "load_gb_per_s = 20",
            "load_gb_per_s = 20\n[tiers.host]\ncapacity_gb = 64.0\nread_gb_per_s = 25.0\nwrite_gb_per_s = 25.0\nlatency = \"10us\"",
            "not supported with swaps",
        ),
    ];
    for (from, to, want) in cases {
        let text = FLEET.replace(from, to);
        let e = Scenario::parse(&text, "swap.toml", &[]).unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("swap.toml:"), "{to}: {msg}");
        assert!(msg.contains(want), "{to}: {msg}");
    }
}

/// Four workers, two serving Llama and two Qwen (each group may load the other's model), or, with
/// `qwen = 1`, one Qwen worker.
fn two_models(qwen: u32) -> Placement {
    let text = format!(
        r#"
name = "donors"
duration = "60s"
[[workers]]
count = 2
gpu = "h100"
model = "llama-3.1-8b"
models = ["qwen3-8b"]
[[workers]]
count = {qwen}
gpu = "h100"
model = "qwen3-8b"
models = ["llama-3.1-8b"]
[workload]
kind = "poisson"
rate = 1
prompt = {{ dist = "fixed", tokens = 100 }}
output = {{ dist = "fixed", tokens = 1 }}
"#
    );
    Placement::of(&scenario(&text)).unwrap().unwrap()
}

#[test]
fn a_load_driven_swap_takes_a_worker_of_a_lighter_model_even_a_busy_one() {
    let p = two_models(2);
    let up = |_| true;
    let llama = ModelId::Llama31_8b;
    let late = secs(60);
    // Llama: 8 outstanding on 2 copies (8/3 per copy after gaining one); Qwen: 1 on 2 (1 after losing
    // one). The busy Qwen worker 2 and the idle worker 3 tie on the lighter model; the lower id goes.
    assert_eq!(
        p.donor_for(llama, 4, late, &snapshots(&[4, 4, 1, 0]), up),
        Some(2)
    );
    // Below the threshold: 8 < 5 per copy x 2 copies.
    assert_eq!(
        p.donor_for(llama, 5, late, &snapshots(&[4, 4, 1, 0]), up),
        None
    );
    // Qwen would be heavier per copy after the move (6 on 1) than Llama (8 on 3): no move, so the two
    // cannot trade a worker back and forth.
    assert_eq!(
        p.donor_for(llama, 4, late, &snapshots(&[4, 4, 3, 3]), up),
        None
    );
    // A worker the gateway cannot route to is no donor, and Qwen's other worker is then its last
    // routable copy.
    assert_eq!(
        p.donor_for(llama, 4, late, &snapshots(&[4, 4, 1, 0]), |w| w != 2),
        None
    );
    // Before min_residency (60 s by default) no worker has served its model long enough.
    assert_eq!(
        p.donor_for(llama, 4, secs(59), &snapshots(&[4, 4, 1, 0]), up),
        None
    );
}

#[test]
fn the_last_copy_of_a_model_is_never_taken_by_a_load_driven_swap() {
    let p = two_models(1);
    let llama = ModelId::Llama31_8b;
    assert_eq!(
        p.donor_for(llama, 1, secs(60), &snapshots(&[3, 3, 1]), |_| true),
        None
    );
    assert_eq!(
        p.donor_for(llama, 1, secs(60), &snapshots(&[3, 3, 0]), |_| true),
        None
    );
}
