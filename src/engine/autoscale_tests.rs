//! The autoscaler in the engine, on hand-built runs whose times can be worked out by hand: a step in load
//! scales up at the first evaluation that sees it and the new replica serves after its cold start and
//! the next health check; a scale-down waits out its window and drains; a crashed replica is replaced;
//! the fleet scales to zero and back, holding the request that woke it at the gateway.

use super::tests::{by_id, request, simulation};
use super::*;
use crate::autoscale::AutoscalerSpec;
use crate::faults::{FaultPlan, PlannedFault};
use crate::gateway::GatewaySpec;
use crate::metrics::replicas::ReplicaCount;
use crate::time::SimDuration;

fn secs(s: f64) -> SimTime {
    SimTime::ZERO + SimDuration::from_secs_f64(s)
}

/// An autoscaler on `rps` (target 1 request/s per replica), a 15-s interval and a 22-s cold start
/// (10 s image pull, 5 s weight load, 7 s warm-up), plus `extra` keys.
fn setup(initial: u32, extra: &str) -> AutoscaleSetup {
    let spec: AutoscalerSpec = toml::from_str(&format!(
        "metric = \"rps\"\ntarget = 1.0\nimage_pull = \"10s\"\nweight_load = \"5s\"\nwarmup = \"7s\"\n{extra}"
    ))
    .unwrap();
    spec.validate().unwrap();
    AutoscaleSetup {
        cold_start: spec.cold_start(0.0, &crate::faults::RestartSpec::default()),
        spec,
        initial,
        gpus_per_replica: 1,
        usd_per_gpu_hour: Some(3.0),
    }
}

fn autoscaled(
    slots: usize,
    requests: Vec<Request>,
    faults: Vec<PlannedFault>,
    initial: u32,
    extra: &str,
) -> (
    Simulation,
    std::sync::Arc<std::sync::Mutex<Vec<RequestRecord>>>,
) {
    let (mut sim, records) = simulation(slots, requests);
    sim.set_faults(
        FaultPlan::scheduled(faults),
        GatewaySpec::default(),
        Vec::new(),
    );
    sim.set_autoscaler(setup(initial, extra));
    (sim, records)
}

fn count(ready: u32, starting: u32, billed: u32) -> Option<ReplicaCount> {
    Some(ReplicaCount {
        ready,
        starting,
        billed,
    })
}

#[test]
fn a_step_in_load_scales_up_at_the_next_evaluation_and_serves_after_the_cold_start() {
    // Nothing until 20 s, then 30 requests at once. Evaluations every 15 s: at 15 s nothing has arrived;
    // at 30 s the last interval's rate is 30/15 = 2 req/s against a target of 1 per ready replica:
    // ceil(2 × 1) = 2 (scale-up window 0, within the +4-pods policy and max_replicas). The new replica's
    // cold start (22 s) ends at 52 s, and the gateway's next health check (every 5 s) marks it up at 55 s.
    let burst = (0..30).map(|i| request(i, secs(20.0 + 0.001 * i as f64), i, 8, 10));
    let probes = (30..34).map(|i| request(i, secs(56.0 + 0.1 * (i - 30) as f64), i, 8, 10));
    let (sim, records) = autoscaled(
        2,
        burst.chain(probes).collect(),
        Vec::new(),
        1,
        "max_replicas = 2",
    );
    let out = sim.run(&mut |_| {});
    assert_eq!(out.collector.completed, 34);
    let a = out.summary.autoscaler.as_ref().unwrap();
    assert_eq!(a.changes.len(), 1, "{:?}", a.changes);
    assert_eq!(
        (a.changes[0].at_s, a.changes[0].from, a.changes[0].to),
        (30.0, 1, 2)
    );
    assert_eq!((a.scale_ups, a.scale_downs, a.replacements), (1, 0, 0));
    assert_eq!(a.cold_start.total_s, 22.0);
    let log = &out.collector.series.replicas;
    assert_eq!(log.at(secs(29.0)), count(1, 0, 1));
    assert_eq!(log.at(secs(30.0)), count(1, 1, 2), "starting from 30 s");
    assert_eq!(log.at(secs(54.9)), count(1, 1, 2), "up at 52 s, unchecked");
    assert_eq!(
        log.at(secs(55.0)),
        count(2, 0, 2),
        "ready at the 55-s health check"
    );
    // The burst all went to the one replica there was; the new one served only probes, at once.
    for i in 0..30 {
        assert_eq!(by_id(&records, i).worker, Some(0), "request {i}");
    }
    let on_new: Vec<_> = (30..34)
        .map(|i| by_id(&records, i))
        .filter(|r| r.worker == Some(1))
        .collect();
    assert!(!on_new.is_empty());
    for r in on_new {
        assert_eq!(r.first_scheduled, Some(r.arrival), "an idle new replica");
    }
    // Billed: 1 replica from 0, 2 from 30 s to the end.
    let end = out.summary.sim.simulated_s;
    assert!((a.replica_hours * 3600.0 - (end + (end - 30.0))).abs() < 0.01);
    assert!((a.cost_usd.unwrap() - a.gpu_hours * 3.0).abs() < 1e-5);
}

#[test]
fn a_scale_down_waits_out_its_window_and_drains_the_newest_replica() {
    // 2 replicas, 40 requests over the first 20 s (2 req/s: 1 per replica, ratio 1, no change), then
    // two long ones at 45 s (one per replica, round robin). Evaluations: 10 s and 20 s recommend 2; 30 s
    // and 40 s recommend 0 but the 30-s window still holds the 20-s recommendation (kept while strictly
    // after the cutoff); at 50 s the window (20 s, 50 s] holds 0, 0 and ceil(0.2) = 1: down to 1.
    // Of two replicas ready since 0, the newer slot (1) goes: it stops taking requests and finishes its
    // long request, then it is gone.
    let early = (0..40).map(|i| request(i, secs(0.5 * i as f64), i, 8, 10));
    let long = (40..42).map(|i| request(i, secs(45.0 + 0.001 * (i - 40) as f64), i, 8, 3000));
    let probes = (42..44).map(|i| request(i, secs(55.0 + (i - 42) as f64), i, 8, 10));
    let (sim, records) = autoscaled(
        2,
        early.chain(long).chain(probes).collect(),
        Vec::new(),
        2,
        "min_replicas = 1\nmax_replicas = 2\ninterval = \"10s\"\nscale_down_window = \"30s\"\ndrain_grace = \"120s\"",
    );
    let out = sim.run(&mut |_| {});
    assert_eq!(out.collector.completed, 44);
    assert_eq!(out.collector.failed, 0);
    let a = out.summary.autoscaler.as_ref().unwrap();
    assert_eq!(a.changes.len(), 1, "{:?}", a.changes);
    assert_eq!(
        (a.changes[0].at_s, a.changes[0].from, a.changes[0].to),
        (50.0, 2, 1)
    );
    let on_1 = [40, 41]
        .map(|i| by_id(&records, i))
        .into_iter()
        .find(|r| r.worker == Some(1))
        .expect("one long request on replica 1");
    assert_eq!(on_1.retries, 0, "drained, not cut off");
    assert!(on_1.finished > secs(50.0), "in flight at the scale-down");
    for i in 42..44 {
        assert_eq!(by_id(&records, i).worker, Some(0), "after the drain began");
    }
    let log = &out.collector.series.replicas;
    let before = SimTime(on_1.finished.0 - 1);
    assert_eq!(
        log.at(before),
        count(1, 0, 2),
        "draining: billed, not ready"
    );
    assert_eq!(
        log.at(on_1.finished),
        count(1, 0, 1),
        "gone with its last request"
    );
}

#[test]
fn a_crashed_replica_is_replaced_with_a_cold_one() {
    // 2 replicas held at 2; replica 1 crashes for good at 10 s. The 15-s evaluation finds it dead, frees
    // its slot and starts a replacement there: up at 37 s, ready at the 40-s health check.
    let crash = super::fault_tests::crash(secs(10.0), 1, None, false);
    let probes = (0..4).map(|i| request(i, secs(41.0 + 0.1 * i as f64), i, 8, 10));
    let (sim, records) = autoscaled(
        2,
        probes.collect(),
        vec![crash.clone()],
        2,
        "min_replicas = 2\nmax_replicas = 2",
    );
    let out = sim.run(&mut |_| {});
    let a = out.summary.autoscaler.as_ref().unwrap();
    assert_eq!((a.replacements, a.scale_ups, a.scale_downs), (1, 0, 0));
    let log = &out.collector.series.replicas;
    assert_eq!(log.at(secs(15.0)), count(1, 1, 2), "replacement starting");
    assert_eq!(log.at(secs(40.0)), count(2, 0, 2));
    assert!((0..4).any(|i| by_id(&records, i).worker == Some(1)));
    assert_eq!(out.collector.completed, 4);

    // Restarted in place before the evaluation sees it (the kubelet's restart): nothing to replace.
    let quick = PlannedFault {
        restart_after: Some(SimDuration::from_secs(3)),
        ..crash
    };
    let (sim, _) = autoscaled(
        2,
        vec![request(0, secs(41.0), 0, 8, 10)],
        vec![quick],
        2,
        "min_replicas = 2\nmax_replicas = 2",
    );
    let out = sim.run(&mut |_| {});
    assert_eq!(out.summary.autoscaler.as_ref().unwrap().replacements, 0);
}

#[test]
fn scaled_to_zero_a_request_waits_at_the_gateway_for_a_cold_start() {
    // One request at 1 s; the fleet is idle from the 30-s evaluation on and goes to zero at 60 s (grace
    // 30 s). A request at 70 s finds no replica: held, a replica starts at once (22 s), is up at 92 s and
    // ready at the 95-s health check, when the request is sent.
    let (sim, records) = autoscaled(
        1,
        vec![
            request(0, secs(1.0), 0, 8, 10),
            request(1, secs(70.0), 1, 8, 10),
        ],
        Vec::new(),
        1,
        "min_replicas = 0\nmax_replicas = 1\nscale_down_window = \"0s\"",
    );
    let out = sim.run(&mut |_| {});
    let a = out.summary.autoscaler.as_ref().unwrap();
    let changes: Vec<_> = a.changes.iter().map(|c| (c.at_s, c.from, c.to)).collect();
    assert_eq!(changes, [(60.0, 1, 0), (70.0, 0, 1)]);
    let r = by_id(&records, 1);
    assert_eq!(r.outcome, Outcome::Completed);
    assert_eq!(r.first_scheduled, Some(secs(95.0)));
    assert_eq!(a.cold_start_hits.requests, 1);
    assert_eq!(a.cold_start_hits.wait_ms_max, 25_000.0);
    let log = &out.collector.series.replicas;
    assert_eq!(log.at(secs(65.0)), count(0, 0, 0));
    // Billed from 0 to 60 s, then from 70 s to the end.
    let end = out.summary.sim.simulated_s;
    assert!((a.replica_hours * 3600.0 - (60.0 + end - 70.0)).abs() < 0.01);
}

/// Two models, each its own deployment: only the one whose load changed scales. `qwen3-8b` (0–2
/// replicas) goes to zero at 60 s as in the test above, and its request at 70 s is held, wakes one
/// replica of its own (in its group's slots, not `llama-3.1-8b`'s) and is sent at the 95-s health check;
/// `llama-3.1-8b` (1–2) keeps its one replica throughout.
#[test]
fn each_model_scales_its_own_deployment() {
    use crate::hardware::ModelId;
    let s = crate::scenario::Scenario::parse(
        r#"
name = "two-deployments"
duration = "200s"
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
model = "llama-3.1-8b"
prompt = { dist = "fixed", tokens = 100 }
output = { dist = "fixed", tokens = 1 }
[autoscaler]
metric = "rps"
target = 1.0
max_replicas = 2
scale_down_window = "0s"
image_pull = "10s"
weight_load = "5s"
warmup = "7s"
[autoscaler.models.qwen3-8b]
min_replicas = 0
"#,
        "two.toml",
        &[],
    )
    .unwrap();
    use super::placement_tests::asking;
    let (llama, qwen) = (ModelId::Llama31_8b, ModelId::Qwen3_8b);
    let (out, records) = super::placement_tests::run_with(
        &s,
        vec![
            asking(request(0, secs(1.0), 0, 8, 10), llama),
            asking(request(1, secs(1.0), 1, 8, 10), qwen),
            asking(request(2, secs(2.0), 2, 8, 10), llama),
            asking(request(3, secs(70.0), 3, 8, 10), qwen),
        ],
    );
    let a = out.summary.autoscaler.as_ref().unwrap();
    assert_eq!(a.models.len(), 2);
    let (m_llama, m_qwen) = (&a.models[0], &a.models[1]);
    assert_eq!(m_llama.model.as_deref(), Some("llama-3.1-8b"));
    assert_eq!((m_llama.min_replicas, m_llama.max_replicas), (1, 2));
    assert!(m_llama.changes.is_empty(), "{:?}", m_llama.changes);
    assert_eq!(m_qwen.model.as_deref(), Some("qwen3-8b"));
    assert_eq!((m_qwen.min_replicas, m_qwen.max_replicas), (0, 2));
    let changes = |m: &crate::metrics::replicas::AutoscaleSummary| -> Vec<(f64, u32, u32)> {
        m.changes.iter().map(|c| (c.at_s, c.from, c.to)).collect()
    };
    assert_eq!(changes(m_qwen), [(60.0, 1, 0), (70.0, 0, 1)]);
    // The fleet's: the totals at each model's change; its bounds are the models' summed.
    assert_eq!(changes(a), [(60.0, 2, 1), (70.0, 1, 2)]);
    assert_eq!((a.min_replicas, a.max_replicas), (1, 4));
    assert_eq!(m_qwen.cold_start_hits.requests, 1);
    assert_eq!(m_qwen.cold_start_hits.wait_ms_max, 25_000.0);
    assert_eq!(m_llama.cold_start_hits.requests, 0);
    assert_eq!(a.cold_start_hits.requests, 1);
    let r = by_id(&records, 3);
    assert_eq!(r.outcome, Outcome::Completed);
    assert_eq!(r.first_scheduled, Some(secs(95.0)));
    // Slots 0–1 are llama's, 2–3 qwen's; the woken replica is qwen's first slot.
    assert_eq!(r.worker, Some(2));
    assert_eq!(by_id(&records, 0).worker, Some(0));
    // Replica-hours: llama's one replica all run; qwen's from 0 to 60 s and from 70 s on.
    let end = out.summary.sim.simulated_s;
    assert!((m_llama.replica_hours * 3600.0 - end).abs() < 0.01);
    assert!((m_qwen.replica_hours * 3600.0 - (60.0 + end - 70.0)).abs() < 0.01);
    assert!((a.replica_hours - m_llama.replica_hours - m_qwen.replica_hours).abs() < 1e-5);
    assert!(a.slo_attainment.is_some());
    assert!(m_qwen.slo_attainment.is_none());
    // Each model's billed replicas over time, and the workers serving each model.
    let csv = String::from_utf8(out.collector.series.to_csv()).unwrap();
    let head = csv.lines().next().unwrap();
    assert!(
        head.ends_with(",replicas_billed:llama-3.1-8b,replicas_billed:qwen3-8b"),
        "{head}"
    );
    let m = out.summary.models.as_ref().unwrap();
    assert_eq!(
        (m.replicas["qwen3-8b"].min, m.replicas["qwen3-8b"].max),
        (0, 1)
    );
    assert_eq!(
        (
            m.replicas["llama-3.1-8b"].min,
            m.replicas["llama-3.1-8b"].max
        ),
        (1, 1)
    );
}

/// The SLO planner at its evaluations (every 10 s): at 10 s it sees the interval's arrivals (a steady 2.5 engines'
/// worth) and the lengths of the requests that completed, and asks for ⌈demand / one engine's rate at
/// the targets⌉ = 3 replicas at once (no tolerance, window or rate limit); at 20 s nothing arrived, so
/// it asks for its floor, 1, and nothing changes after.
#[test]
fn the_slo_planner_sizes_for_the_predicted_rate() {
    use crate::autoscale::planner::{EngineLimits, best_operating_point, step_shape};
    let (probe, _) = simulation(1, Vec::new());
    let w = &probe.workers[0];
    let limits = EngineLimits {
        max_num_batched_tokens: w.params.max_num_batched_tokens,
        max_num_seqs: w.params.max_num_seqs,
        kv_tokens: u64::from(w.pool.total()) * u64::from(w.params.block_size),
    };
    let targets = (SimDuration::from_millis(500), SimDuration::from_millis(50));
    let step = |p: f64, b: u64, c: f64| w.perf.step_time(&step_shape(p, b, c)).as_secs_f64();
    let point = best_operating_point(200.0, 200.0, 0.0, limits, targets, &step).unwrap();
    let rate = 2.5 * point.engine_rps;
    let n = (rate * 9.9) as u64;
    let requests = (0..n)
        .map(|i| request(i, secs(9.9 * i as f64 / n as f64), i + 1, 200, 200))
        .collect();
    let spec: AutoscalerSpec = toml::from_str(
        "max_replicas = 4\nmetric = \"slo\"\ninterval = \"10s\"\nimage_pull = \"10s\"\n\
         weight_load = \"5s\"\nwarmup = \"7s\"\n[planner]\nttft = \"500ms\"\nitl = \"50ms\"\n",
    )
    .unwrap();
    spec.validate().unwrap();
    let (mut sim, records) = simulation(4, requests);
    sim.set_faults(
        FaultPlan::scheduled(Vec::new()),
        GatewaySpec::default(),
        Vec::new(),
    );
    sim.set_autoscaler(AutoscaleSetup {
        cold_start: spec.cold_start(0.0, &crate::faults::RestartSpec::default()),
        spec,
        initial: 1,
        gpus_per_replica: 1,
        usd_per_gpu_hour: None,
    });
    let out = sim.run(&mut |_| {});
    assert_eq!(out.collector.completed, n);
    let done_by_10 = records
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.finished <= secs(10.0))
        .count();
    assert!(done_by_10 > 0 && (done_by_10 as u64) < n, "{done_by_10}");
    let a = out.summary.autoscaler.as_ref().unwrap();
    let changes: Vec<_> = a.changes.iter().map(|c| (c.at_s, c.from, c.to)).collect();
    let want = (n as f64 / 10.0 / point.engine_rps).ceil() as u32;
    assert_eq!(want, 3);
    assert_eq!(changes, [(10.0, 1, want), (20.0, want, 1)]);
    assert_eq!(
        (a.target, a.planner_ttft_ms, a.planner_itl_ms),
        (None, Some(500.0), Some(50.0))
    );
}
