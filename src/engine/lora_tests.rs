//! LoRA adapters timed by hand (`lora.rs`, [`crate::lora`]): load times, the step multiplier, the
//! V1 scheduler's skip rule, and requests no worker may serve.

use super::placement_tests::run_with;
use super::tests::{by_id, request};
use super::*;
use crate::hardware::StepShape;
use crate::lora::AdapterRef;
use crate::scenario::Scenario;
use crate::time::SimDuration;

const FLEET: &str = r#"
name = "lora"
duration = "60s"
[[workers]]
count = 1
gpu = "h100"
model = "llama-3.1-8b"
# The hand timings below follow a batch formed when the step before it ends.
async_scheduling = false
[workers.lora]
max_loras = 1
max_cpu_loras = 2
[workload]
kind = "poisson"
rate = 1
prompt = { dist = "fixed", tokens = 100 }
output = { dist = "fixed", tokens = 1 }
adapters = { count = 2 }
"#;

fn scenario(text: &str) -> Scenario {
    Scenario::parse(text, "lora.toml", &[]).unwrap()
}

const A: AdapterRef = AdapterRef { id: 11, rank: 16 };
const B: AdapterRef = AdapterRef { id: 22, rank: 16 };
const C: AdapterRef = AdapterRef { id: 33, rank: 16 };

fn secs(s: u64) -> SimTime {
    SimTime(s * crate::time::NANOS_PER_SEC)
}

fn ttft(r: &RequestRecord) -> SimDuration {
    r.first_token.unwrap().since(r.arrival)
}

fn prefill(s: &Scenario, tokens: u64) -> SimDuration {
    let mut shape = StepShape::default();
    shape.add(tokens, 0);
    s.workers[0].perf().step_time(&shape)
}

/// A rank-16 adapter of Llama-3.1-8B on q, k, v, o: 16 × 2 × 32 × (4 × 4096 + 2 × 4096 + 2 × 1024)
/// bytes (27.3 MB). Read from disk in the fixed 300 ms plus its bytes at 3 GB/s; copied into a slot at
/// 20 GB/s (about 1.4 ms).
fn disk_and_slot() -> (SimDuration, SimDuration) {
    let bytes = 16.0 * 2.0 * 32.0 * (4.0 * 4096.0 + 2.0 * 4096.0 + 2.0 * 1024.0);
    (
        SimDuration::from_millis(300) + SimDuration::from_secs_f64(bytes / 3e9),
        SimDuration::from_secs_f64(bytes / 20e9),
    )
}

/// `dt` times the LoRA multiplier, rounded as the worker rounds it.
fn with_lora(dt: SimDuration, m: f64) -> SimDuration {
    SimDuration::from_secs_f64(dt.as_secs_f64() * m)
}

#[test]
fn adapter_loads_and_the_rank_multiplier_time_the_first_token_exactly() {
    // One worker, one GPU slot, two adapters in the CPU cache; loads from disk and into the slot as
    // `disk_and_slot` says; a rank-16 engine's steps with LoRA take 1.15 times as long. Each request prefills 100
    // new tokens alone on an idle worker, 10 s apart:
    //   A (cold): disk + slot + 1.15 prefill     B (cold): the same, A leaves the slot
    //   A (in the CPU cache): slot + 1.15 prefill
    //   base model: the plain prefill            A again (still in the slot): 1.15 prefill
    //   C (cold; the CPU cache drops B, its least recently used): disk + slot + 1.15 prefill
    let s = scenario(FLEET);
    let p = prefill(&s, 100);
    let lora = with_lora(p, 1.15);
    let (disk, slot) = disk_and_slot();
    let (out, records) = run_with(
        &s,
        vec![
            request(0, secs(0), 1, 100, 1).for_adapter(A),
            request(1, secs(10), 2, 100, 1).for_adapter(B),
            request(2, secs(20), 3, 100, 1).for_adapter(A),
            request(3, secs(30), 4, 100, 1),
            request(4, secs(40), 5, 100, 1).for_adapter(A),
            request(5, secs(50), 6, 100, 1).for_adapter(C),
        ],
    );
    let t = |id| ttft(&by_id(&records, id));
    assert_eq!(t(0), disk + slot + lora);
    assert_eq!(t(1), disk + slot + lora);
    assert_eq!(t(2), slot + lora);
    assert_eq!(t(3), p);
    assert_eq!(t(4), lora);
    assert_eq!(t(5), disk + slot + lora);
    let l = out.summary.lora.expect("a LoRA fleet reports its adapters");
    assert_eq!((l.disk_loads, l.gpu_loads), (3, 4));
    let load = disk.as_secs_f64() * 3.0 + slot.as_secs_f64() * 4.0;
    assert!(
        (l.load_seconds - load).abs() < 1e-9,
        "{} {load}",
        l.load_seconds
    );
    assert_eq!(l.requests_with_adapter, 5);
    assert_eq!(l.adapters_requested, 3);
    assert_eq!(l.lora_steps, 5);
    assert_eq!(l.requests_waited_for_slot, 0);
}

#[test]
fn a_request_whose_adapter_cannot_join_the_batch_is_skipped_and_the_one_behind_it_goes_first() {
    // One slot. A (long answer) starts at 0. B then A' arrive while A's first step runs. At the next
    // step the batch holds A's adapter, the only slot: B is skipped (vLLM V1 pops it to a skipped
    // queue and looks at the next), A' shares A's adapter and joins. B starts only once A and A'
    // have both finished and A's adapter left the batch.
    let s = scenario(FLEET);
    let (out, records) = run_with(
        &s,
        vec![
            request(0, SimTime(0), 1, 100, 50).for_adapter(A),
            request(1, SimTime(1_000), 2, 100, 1).for_adapter(B),
            request(2, SimTime(2_000), 3, 100, 1).for_adapter(A),
        ],
    );
    let (a, b, a2) = (by_id(&records, 0), by_id(&records, 1), by_id(&records, 2));
    assert!(
        a2.first_token.unwrap() < b.first_token.unwrap(),
        "A' overtakes B"
    );
    assert_eq!(
        a2.first_scheduled.unwrap(),
        a.first_token.unwrap(),
        "A' joins the step right after A's first"
    );
    let freed = a.finished.max(a2.finished);
    assert!(
        b.first_scheduled.unwrap() >= freed,
        "B waits for A's adapter to leave the batch: {:?} < {:?}",
        b.first_scheduled,
        freed
    );
    let l = out.summary.lora.unwrap();
    assert_eq!(l.requests_waited_for_slot, 1);
    // B loads into the slot A held: A is still in the CPU cache, B comes from disk.
    assert_eq!((l.disk_loads, l.gpu_loads), (2, 2));
}

#[test]
fn with_two_slots_nobody_waits() {
    let s = scenario(&FLEET.replace("max_loras = 1", "max_loras = 2"));
    let (out, records) = run_with(
        &s,
        vec![
            request(0, SimTime(0), 1, 100, 50).for_adapter(A),
            request(1, SimTime(1_000), 2, 100, 1).for_adapter(B),
        ],
    );
    let (a, b) = (by_id(&records, 0), by_id(&records, 1));
    assert_eq!(b.first_scheduled.unwrap(), a.first_token.unwrap());
    assert_eq!(out.summary.lora.unwrap().requests_waited_for_slot, 0);
}

#[test]
fn an_adapter_no_worker_may_serve_is_rejected_by_reason() {
    // Rank 64 on an engine of max_lora_rank 16 (vLLM refuses to load it), and any adapter on a
    // fleet whose only LoRA group was left out: both rejected and counted, never dropped.
    let s = scenario(FLEET);
    let big = AdapterRef { id: 44, rank: 64 };
    let (out, records) = run_with(
        &s,
        vec![
            request(0, secs(0), 1, 100, 1).for_adapter(big),
            request(1, secs(1), 2, 100, 1).for_adapter(A),
        ],
    );
    assert_eq!(out.collector.rejected_by_reason["adapter_not_served"], 1);
    assert_eq!(
        by_id(&records, 1).outcome,
        crate::metrics::record::Outcome::Completed
    );
    let l = out.summary.lora.unwrap();
    assert_eq!(l.rejected_adapter_not_served, 1);
    assert_eq!(out.summary.requests.arrived, 2);
}

#[test]
fn a_crashed_worker_comes_back_with_no_adapter_loaded() {
    // A at 0 loads A (disk + slot). The worker crashes at 15 s and restarts cold 5 s later: A at 40 s
    // pays the disk read and the slot again, where without the crash it would pay neither.
    let text = format!(
        "{FLEET}[[faults]]\nkind = \"crash\"\nworker = 0\nat = \"15s\"\nrestart_after = \"5s\"\n"
    );
    let lora = with_lora(prefill(&scenario(FLEET), 100), 1.15);
    let (disk, slot) = disk_and_slot();
    let cold = disk + slot + lora;
    for (text, second) in [(text.as_str(), cold), (FLEET, lora)] {
        let s = scenario(text);
        let (_, records) = run_with(
            &s,
            vec![
                request(0, secs(0), 1, 100, 1).for_adapter(A),
                request(1, secs(40), 2, 100, 1).for_adapter(A),
            ],
        );
        assert_eq!(ttft(&by_id(&records, 0)), cold);
        assert_eq!(ttft(&by_id(&records, 1)), second);
    }
}
