//! Engines sharing a GPU, timed by hand (`colocation.rs`).

use super::placement_tests::{asking, run_with};
use super::tests::request;
use super::*;
use crate::hardware::{ModelId, StepShape};
use crate::scenario::Scenario;
use crate::time::SimDuration;

/// One H100 running a Llama-3.1-8B engine and a Qwen3-8B engine, each with 45% of its memory.
const SHARED: &str = r#"
name = "colocated"
duration = "60s"
[[workers]]
count = 1
gpu = "h100"
model = "llama-3.1-8b"
gpu_memory_utilization = 0.45
colocate = "gpu"
[[workers]]
count = 1
gpu = "h100"
model = "qwen3-8b"
gpu_memory_utilization = 0.45
colocate = "gpu"
[workload]
kind = "poisson"
rate = 1
model = "llama-3.1-8b"
prompt = { dist = "fixed", tokens = 100 }
output = { dist = "fixed", tokens = 1 }
"#;

fn scenario(text: &str) -> Scenario {
    Scenario::parse(text, "colocated.toml", &[]).unwrap()
}

fn prefill(s: &Scenario, group: usize, tokens: u64) -> SimDuration {
    let mut shape = StepShape::default();
    shape.add(tokens, 0);
    s.workers[group].perf().step_time(&shape)
}

/// Both models asked for at t = 0: Llama's engine prefills at once; Qwen's engine waits for the GPU
/// until that step ends, then prefills. Each TTFT, and the wait, to the nanosecond.
#[test]
fn the_second_engine_waits_for_the_first_engine_s_step() {
    let s = scenario(SHARED);
    let t0 = SimTime::ZERO + SimDuration::from_secs(1);
    let llama = asking(request(0, t0, 1, 2000, 1), ModelId::Llama31_8b);
    let qwen = asking(request(1, t0, 2, 3000, 1), ModelId::Qwen3_8b);
    let (out, records) = run_with(&s, vec![llama, qwen]);
    let records = records.lock().unwrap();
    let first = |id: u64| {
        let r = records.iter().find(|r| r.id == id).unwrap();
        r.first_token.unwrap().since(r.arrival)
    };
    let (p_llama, p_qwen) = (prefill(&s, 0, 2000), prefill(&s, 1, 3000));
    assert_eq!(first(0), p_llama);
    assert_eq!(first(1), p_llama + p_qwen);
    let w = &out.summary.workers;
    assert_eq!((w[0].shared_gpu, w[1].shared_gpu), (Some(0), Some(0)));
    assert_eq!(w[0].gpu_wait_s, Some(0.0));
    assert!((w[1].gpu_wait_s.unwrap() - p_llama.as_secs_f64()).abs() < 1e-9);
}

/// A shared GPU draws idle power once, not once per engine: against the same two engines on two GPUs
/// of their own, the fleet saves one GPU's idle power over the run; a fleet without `colocate`
/// reports no shared GPU.
#[test]
fn a_shared_gpu_idles_once() {
    let one = || {
        vec![asking(
            request(0, SimTime::ZERO + SimDuration::from_secs(10), 1, 500, 20),
            ModelId::Llama31_8b,
        )]
    };
    let (shared, _) = run_with(&scenario(SHARED), one());
    let alone = scenario(&SHARED.replace("colocate = \"gpu\"\n", ""));
    let (apart, _) = run_with(&alone, one());
    let t = shared.summary.sim.simulated_s;
    assert!(t > 10.0 && t == apart.summary.sim.simulated_s);
    let idle = crate::hardware::power::PowerModel::of(crate::hardware::GpuId::H100).idle_w * t;
    let (es, ea) = (
        shared.summary.energy.as_ref().unwrap(),
        apart.summary.energy.as_ref().unwrap(),
    );
    assert!((ea.joules - es.joules - idle).abs() < 1e-2, "{es:?} {ea:?}");
    assert_eq!((es.gpus, ea.gpus), (1, 2));
    assert_eq!(shared.summary.workers[1].energy_j, 0.0);
    assert!(
        apart
            .summary
            .workers
            .iter()
            .all(|w| w.shared_gpu.is_none() && w.gpu_wait_s.is_none())
    );
}

/// An engine that crashes while it waits for its GPU loses its turn: when the GPU frees, the dead
/// engine is passed over without stepping and leaves the queue, and once restarted it takes a free GPU
/// at once (a later Qwen request's TTFT is its prefill alone, to the nanosecond).
#[test]
fn an_engine_that_dies_while_waiting_loses_its_turn() {
    let text = format!(
        "{SHARED}\n[[faults]]\nkind = \"crash\"\nworker = 1\nat = \"1001ms\"\nrestart_after = \"1s\"\n"
    );
    let s = scenario(&text);
    let t0 = SimTime::ZERO + SimDuration::from_secs(1);
    let p_llama = prefill(&s, 0, 2000);
    assert!(
        p_llama > SimDuration::from_millis(1),
        "the crash falls in the wait"
    );
    let later = SimTime::ZERO + SimDuration::from_secs(10);
    let requests = vec![
        asking(request(0, t0, 1, 2000, 1), ModelId::Llama31_8b),
        asking(request(1, t0, 2, 3000, 1), ModelId::Qwen3_8b),
        asking(request(2, later, 3, 3000, 1), ModelId::Qwen3_8b),
    ];
    let (out, records) = run_with(&s, requests);
    let records = records.lock().unwrap();
    let first = |id: u64| {
        let r = records.iter().find(|r| r.id == id).unwrap();
        r.first_token.map(|t| t.since(r.arrival))
    };
    assert_eq!(first(0), Some(p_llama));
    assert_eq!(first(2), Some(prefill(&s, 1, 3000)));
    assert_eq!(
        out.summary.workers[1].gpu_wait_s,
        Some(0.0),
        "a lost wait is not counted"
    );
}

#[test]
fn co_location_errors_name_the_group_and_field() {
    let err = |t: &str| {
        Scenario::parse(t, "colocated.toml", &[])
            .unwrap_err()
            .to_string()
    };
    let e = err(&SHARED.replacen("0.45", "0.6", 2));
    assert!(
        e.contains("workers[1].gpu_memory_utilization") && e.contains("1.20"),
        "{e}"
    );
    let e = err(&SHARED.replacen("count = 1", "count = 2", 1));
    assert!(e.contains("workers[1].count"), "{e}");
    let e = err(&SHARED.replacen("colocate = \"gpu\"", "colocate = \"other\"", 1));
    assert!(
        e.contains("workers[0].colocate") && e.contains("only"),
        "{e}"
    );
    let e = err(&SHARED.replacen("gpu = \"h100\"", "gpu = \"h200\"", 1));
    assert!(e.contains("workers[1].gpu"), "{e}");
}
