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

/// The two engines of `SHARED` on MIG slices of their H100 (`a` and `b`), each with 90% of its slice.
fn on_slices(a: &str, b: &str) -> Scenario {
    let text = SHARED
        .replace(
            "gpu_memory_utilization = 0.45",
            "gpu_memory_utilization = 0.9",
        )
        .replacen(
            "colocate = \"gpu\"",
            &format!("colocate = \"gpu\"\nmig = \"{a}\""),
            1,
        )
        .replacen(
            "colocate = \"gpu\"\n[workload]",
            &format!("colocate = \"gpu\"\nmig = \"{b}\"\n[workload]"),
            1,
        );
    scenario(&text)
}

/// MIG slices step at once: both models asked for at t = 0 each get their first token after their own
/// prefill on their own slice, with no wait for the other engine; the slices' step times are the
/// whole GPU's peaks scaled by their SM share (compute-bound prefill: 7/3 and 7/4 as long, less the
/// fixed per-step overhead), and their KV caches come out of half the GPU's memory each. (A 40 GB
/// slice gets vLLM's small-GPU defaults, 2,048 tokens a step: the prompts fit one.)
#[test]
fn engines_on_mig_slices_step_at_once() {
    let s = on_slices("3g.40gb", "4g.40gb");
    let t0 = SimTime::ZERO + SimDuration::from_secs(1);
    let llama = asking(request(0, t0, 1, 2000, 1), ModelId::Llama31_8b);
    let qwen = asking(request(1, t0, 2, 2000, 1), ModelId::Qwen3_8b);
    let (out, records) = run_with(&s, vec![llama, qwen]);
    let records = records.lock().unwrap();
    let first = |id: u64| {
        let r = records.iter().find(|r| r.id == id).unwrap();
        r.first_token.unwrap().since(r.arrival)
    };
    assert_eq!(first(0), prefill(&s, 0, 2000));
    assert_eq!(first(1), prefill(&s, 1, 2000));
    let whole = scenario(SHARED);
    let ratio = |g: usize| {
        let overhead = whole.workers[g].perf().eff.step_overhead_s;
        (prefill(&s, g, 2000).as_secs_f64() - overhead)
            / (prefill(&whole, g, 2000).as_secs_f64() - overhead)
    };
    assert!((ratio(0) - 7.0 / 3.0).abs() < 0.05, "{}", ratio(0));
    assert!((ratio(1) - 7.0 / 4.0).abs() < 0.05, "{}", ratio(1));
    let w = &out.summary.workers;
    assert_eq!(
        (w[0].mig.as_deref(), w[1].mig.as_deref()),
        (Some("3g.40gb"), Some("4g.40gb"))
    );
    assert_eq!((w[0].gpu_wait_s, w[1].gpu_wait_s), (None, None));
    let half = s.workers[0].perf().memory_bytes();
    assert_eq!(half, crate::hardware::GpuId::H100.spec().memory_bytes / 2.0);
}

/// An idle GPU cut into slices draws one GPU's idle power whatever the cut: each slice its share, and
/// the host the share of the slices no engine holds (3g + 3g leaves one of 7).
#[test]
fn an_idle_mig_gpu_draws_one_gpu_s_idle_power() {
    let late = || {
        vec![asking(
            request(0, SimTime::ZERO + SimDuration::from_secs(30), 1, 10, 1),
            ModelId::Llama31_8b,
        )]
    };
    for (a, b) in [("3g.40gb", "4g.40gb"), ("3g.40gb", "3g.40gb")] {
        let (out, _) = run_with(&on_slices(a, b), late());
        let t = out.summary.sim.simulated_s;
        let idle = crate::hardware::power::PowerModel::of(crate::hardware::GpuId::H100).idle_w;
        let e = out.summary.energy.as_ref().unwrap();
        assert_eq!(e.gpus, 1);
        // One tiny step of the Llama slice, a few ms, above idle.
        let busy = out.summary.workers[0].step_time_fraction * t;
        assert!(busy < 0.1, "{busy}");
        assert!(
            e.joules >= idle * t - 1e-6 && e.joules < idle * t + 700.0 * busy,
            "{a}+{b}: {e:?}"
        );
    }
}

#[test]
fn mig_errors_name_the_group_and_field() {
    let err = |t: String| {
        Scenario::parse(&t, "mig.toml", &[])
            .unwrap_err()
            .to_string()
    };
    let with = |a: &str, b: &str| {
        SHARED
            .replacen("colocate = \"gpu\"", &format!("colocate = \"gpu\"\n{a}"), 1)
            .replacen(
                "colocate = \"gpu\"\n[workload]",
                &format!("colocate = \"gpu\"\n{b}\n[workload]"),
                1,
            )
    };
    let e = err(with("mig = \"4g.40gb\"", "mig = \"4g.40gb\""));
    assert!(
        e.contains("workers[1].mig") && e.contains("8 memory"),
        "{e}"
    );
    let e = err(with("mig = \"3g.40gb\"", ""));
    assert!(
        e.contains("workers[1].mig") && e.contains("all on MIG"),
        "{e}"
    );
    let e = err(with("mig = \"3g.20gb\"", "mig = \"3g.40gb\""));
    assert!(e.contains("workers[0].mig") && e.contains("3g.40gb"), "{e}");
    let e = err(with("mig = \"3g.40gb\"\ntp = 2", "mig = \"3g.40gb\""));
    assert!(e.contains("workers[0].tp") && e.contains("MIG"), "{e}");
    let e =
        err(with("mig = \"3g.40gb\"", "mig = \"3g.40gb\"")
            .replace("gpu = \"h100\"", "gpu = \"l40s\""));
    assert!(e.contains("workers[0].mig") && e.contains("no MIG"), "{e}");
}
