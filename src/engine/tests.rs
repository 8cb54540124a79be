//! Unit tests of the run loop: the order of simultaneous events, when an idle worker starts, the
//! misrouting reference (the longest prefix held elsewhere), and the pool checks.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use super::*;
use crate::hardware::{GpuId, ModelId, Precision, StepShape};
use crate::request::Segment;
use crate::scenario::Slo;
use crate::time::SimDuration;
use crate::worker::EngineParams;

/// A workload that replays a fixed list of requests and keeps every finished request's record.
pub(super) struct Scripted {
    pub(super) pending: VecDeque<Request>,
    pub(super) records: Arc<Mutex<Vec<RequestRecord>>>,
}

impl Workload for Scripted {
    fn next_arrival(&mut self) -> Option<Request> {
        self.pending.pop_front()
    }

    fn on_finished(&mut self, record: &RequestRecord, _now: SimTime) -> Option<Request> {
        self.records.lock().unwrap().push(record.clone());
        None
    }
}

fn perf() -> PerfModel {
    PerfModel::with_defaults(GpuId::H100, ModelId::Llama31_8b, 1, Precision::Bf16)
}

fn params() -> EngineParams {
    EngineParams {
        block_size: 4,
        ..EngineParams::default()
    }
}

/// A prompt of `tokens` tokens of content `content`, asking for `output` tokens, arriving at `arrival`.
pub(super) fn request(
    id: u64,
    arrival: SimTime,
    content: u64,
    tokens: u32,
    output: u32,
) -> Request {
    Request::new(id, None, arrival, output, vec![Segment { content, tokens }])
}

/// A round-robin simulation of `workers` workers of 1,000 blocks of 4 tokens serving `requests`; the
/// returned handle fills with the requests' records as they finish.
pub(super) fn simulation(
    workers: usize,
    requests: Vec<Request>,
) -> (Simulation, Arc<Mutex<Vec<RequestRecord>>>) {
    simulation_with(params(), workers, requests)
}

/// [`simulation`] with engine parameters `params`.
fn simulation_with(
    params: EngineParams,
    workers: usize,
    requests: Vec<Request>,
) -> (Simulation, Arc<Mutex<Vec<RequestRecord>>>) {
    let records = Arc::new(Mutex::new(Vec::new()));
    let workload = Scripted {
        pending: requests.into(),
        records: Arc::clone(&records),
    };
    let fleet = (0..workers)
        .map(|id| Worker::with_blocks(id, perf(), params, 1000))
        .collect();
    let sim = Simulation::new(
        "test".into(),
        1,
        fleet,
        &RouterSpec::default(),
        Box::new(workload),
        Collector::new(Slo::default(), workers),
    );
    (sim, records)
}

/// Duration of a step that prefills `tokens` new tokens with no context, as the worker computes it.
fn prefill_step(tokens: u64) -> SimDuration {
    let mut shape = StepShape::default();
    shape.add(tokens, 0);
    perf().step_time(&shape)
}

pub(super) fn by_id(records: &Arc<Mutex<Vec<RequestRecord>>>, id: u64) -> RequestRecord {
    let records = records.lock().unwrap();
    records.iter().find(|r| r.id == id).cloned().unwrap()
}

/// Request 0 (100 prompt tokens, 3 output) on an idle worker at 0, request 1 (50, 1) at the end of
/// request 0's prefill step, t1, with asynchronous scheduling on or off: t1, the run, and both records
/// (request 0's checked to start at once and sample its first token at t1).
fn one_arrival_as_a_prefill_ends(
    async_scheduling: bool,
) -> (SimTime, RunOutput, [RequestRecord; 2]) {
    let t1 = SimTime::ZERO + prefill_step(100);
    let (sim, records) = simulation_with(
        EngineParams {
            async_scheduling,
            ..params()
        },
        1,
        vec![
            request(0, SimTime::ZERO, 1, 100, 3),
            request(1, t1, 2, 50, 1),
        ],
    );
    let out = sim.run(&mut |_| {});
    assert_eq!(out.collector.completed, 2);
    let r0 = by_id(&records, 0);
    assert_eq!(r0.first_scheduled, Some(SimTime::ZERO));
    assert_eq!(r0.first_token, Some(t1));
    (t1, out, [r0, by_id(&records, 1)])
}

#[test]
fn an_arrival_at_the_instant_a_step_ends_joins_the_next_batch() {
    // Synchronous scheduling (the batch is formed when the step before it ends). Request 0 arrives at
    // 0 on an idle worker: its 100-token prefill starts at once and ends at t1. Request 1 arrives
    // exactly at t1. Arrivals run before step ends at the same instant, so request 1 is queued when
    // step 1 ends, and step 2 (request 0's first decode) takes it: it is scheduled at t1. Were the
    // step end handled first, step 2 would start without it and it would wait a whole step.
    let (t1, out, [_, r1]) = one_arrival_as_a_prefill_ends(false);
    assert_eq!(r1.first_scheduled, Some(t1));
    // Its first (and only) token comes at the end of step 2, after t1.
    assert!(r1.first_token.unwrap() > t1);
    // Request 0's 3 tokens come from 3 steps: its prefill, then 2 decodes (the first also carrying request
    // 1's prefill, which samples its only token).
    assert_eq!(out.summary.workers[0].steps, 3);
}

#[test]
fn with_async_scheduling_an_arrival_during_a_step_waits_one_step_more() {
    // The same two requests with asynchronous scheduling (the default). Step 2 was formed when step 1
    // began, at 0, with request 0 alone; request 1, queued at t1, is scheduled in step 3, which starts
    // when step 2 (request 0's first decode) ends, at t2, and carries request 0's last decode with it.
    // An arrival on an idle engine is scheduled at once, as request 0 is.
    assert!(params().async_scheduling, "vLLM's default");
    let (t1, out, [r0, r1]) = one_arrival_as_a_prefill_ends(true);
    let mut decode = StepShape::default();
    decode.add(1, 100);
    let t2 = t1 + perf().step_time(&decode);
    assert_eq!(r1.first_scheduled, Some(t2));
    let mut step3 = StepShape::default();
    step3.add(1, 101);
    step3.add(50, 0);
    assert_eq!(r1.first_token, Some(t2 + perf().step_time(&step3)));
    assert_eq!(r0.finished, t2 + perf().step_time(&step3));
    assert_eq!(out.summary.workers[0].steps, 3);
}

#[test]
fn with_async_scheduling_an_arrival_after_an_empty_step_is_scheduled_at_once() {
    // Request 0 asks for one token: its prefill step (0 to t1) completes it, so the step formed
    // ahead of the next holds nothing, and request 1, queued during step 1, starts as step 1 ends
    // rather than a step later.
    let t1 = SimTime::ZERO + prefill_step(100);
    let during = SimTime(t1.0 / 2);
    let (sim, records) = simulation(
        1,
        vec![
            request(0, SimTime::ZERO, 1, 100, 1),
            request(1, during, 2, 50, 1),
        ],
    );
    let out = sim.run(&mut |_| {});
    assert_eq!(out.collector.completed, 2);
    assert_eq!(by_id(&records, 0).finished, t1);
    assert_eq!(by_id(&records, 1).first_scheduled, Some(t1));
}

#[test]
fn simultaneous_arrivals_are_routed_in_arrival_order() {
    // Three requests at the same instant under round robin over 2 workers: ids 0, 1, 2 go to workers 0,
    // 1, 0 (the order they were scheduled in), and each idle worker starts at that instant.
    let (sim, records) = simulation(2, (0..3).map(|i| request(i, SimTime(5), i, 8, 1)).collect());
    sim.run(&mut |_| {});
    let workers: Vec<_> = (0..3).map(|i| by_id(&records, i).worker).collect();
    assert_eq!(workers, [Some(0), Some(1), Some(0)]);
    assert_eq!(by_id(&records, 0).first_scheduled, Some(SimTime(5)));
    assert_eq!(by_id(&records, 1).first_scheduled, Some(SimTime(5)));
    // Request 2 reached worker 0 while its step was in flight: it waits for that step to end.
    let step = prefill_step(8);
    assert_eq!(by_id(&records, 2).first_scheduled, Some(SimTime(5) + step));
}

#[test]
fn each_arrival_is_routed_on_the_fleet_as_it_is_then() {
    // Least KV use (read from the gateway's snapshots; ties rotate) over 2 workers. Request 0 (long)
    // takes worker 0 at 1 ms and holds its blocks; request 1 (one token) goes to worker 1 at 2 ms and is
    // done long before request 2 arrives at 50 ms, which must see worker 1 empty and worker 0 in use.
    // Snapshots left as they were at the start would show a tie, and the rotation would pick worker 0.
    let at = |ms| SimTime::ZERO + SimDuration::from_millis(ms);
    let (mut sim, records) = simulation(
        2,
        vec![
            request(0, at(1), 10, 64, 500),
            request(1, at(2), 11, 8, 1),
            request(2, at(50), 12, 8, 1),
        ],
    );
    let spec = RouterSpec {
        policy: crate::routing::PolicyConfig::parse_spec("least_kv").unwrap(),
        settings: Default::default(),
    };
    sim.router = Router::new(&spec, 1, &[1000, 1000], 4);
    sim.run(&mut |_| {});
    let workers: Vec<_> = (0..3).map(|i| by_id(&records, i).worker).collect();
    assert_eq!(workers, [Some(0), Some(1), Some(1)]);
    assert!(by_id(&records, 1).finished < at(50));
}

#[test]
fn a_private_tail_spares_no_probe_while_another_worker_holds_more_of_the_prompt() {
    // Round robin over 2 workers. Request 0 (a shared 64-token head, then its own 8 tokens) runs on
    // worker 0 and leaves the head's 16 blocks cached there. Request 1 (the same head, its own tail)
    // goes to worker 1, which holds none of it: its private tail starts at block 16, beyond worker 1's
    // prefix, so worker 0 must still be asked, and the 64 head tokens it recomputes are misrouted.
    let prompt = |id: u64| {
        let segments = vec![
            Segment {
                content: 7,
                tokens: 64,
            },
            Segment {
                content: 100 + id,
                tokens: 8,
            },
        ];
        let at = SimTime::ZERO + SimDuration::from_secs(id);
        Request::new(id, None, at, 1, segments).with_private_tail()
    };
    let (sim, records) = simulation(2, vec![prompt(0), prompt(1)]);
    sim.run(&mut |_| {});
    let (first, second) = (by_id(&records, 0), by_id(&records, 1));
    assert_eq!((first.worker, second.worker), (Some(0), Some(1)));
    let misrouted = crate::metrics::record::RecomputeCause::Misrouted.index();
    assert_eq!(second.recompute.tokens[misrouted], 64);
}

/// Makes worker `w`'s pool cache the chain `hashes` (allocated, filled, then freed).
fn cache(sim: &mut Simulation, w: usize, hashes: &[u64]) {
    let pool = &mut sim.workers[w].pool;
    let blocks: Vec<_> = hashes.iter().map(|_| pool.allocate().unwrap()).collect();
    for (&b, &h) in blocks.iter().zip(hashes) {
        pool.register(b, h);
    }
    pool.release(&blocks);
}

#[test]
fn the_misrouting_reference_is_the_longest_prefix_held_elsewhere() {
    let (mut sim, _) = simulation(4, Vec::new());
    let chain = [11, 12, 13, 14];
    cache(&mut sim, 1, &chain[..2]);
    cache(&mut sim, 2, &chain[..3]);
    cache(&mut sim, 3, &[99]);
    // Worker 0 holds nothing; 1 holds 2 blocks, 2 holds 3, 3 none of this chain: the best is 3.
    assert_eq!(sim.best_prefix_elsewhere(0, &chain), 3);
    // From worker 1's point of view (2 local), worker 2's 3 blocks are the reference.
    assert_eq!(sim.best_prefix_elsewhere(1, &chain), 3);
    // Worker 2 holds the longest prefix itself: nobody elsewhere holds more than its 3, so 0.
    assert_eq!(sim.best_prefix_elsewhere(2, &chain), 0);
    cache(&mut sim, 0, &chain);
    assert_eq!(
        sim.best_prefix_elsewhere(0, &chain),
        0,
        "all of it is local"
    );
}

#[test]
fn the_end_of_run_check_finds_every_block_released() {
    let (sim, _) = simulation(
        2,
        (0..4).map(|i| request(i, SimTime(i), i, 30, 5)).collect(),
    );
    let mut sim = sim;
    sim.check_invariants_every_step(true);
    let out = sim.run(&mut |_| {});
    assert_eq!(out.collector.completed, 4);
}

#[test]
fn a_pool_with_blocks_still_held_at_the_end_is_reported() {
    let (mut sim, _) = simulation(2, Vec::new());
    // A block taken and never given back: after the run no request holds it, so conservation fails.
    let leaked = sim.workers[1].pool.allocate().unwrap();
    let err = sim.check_pools_at_end().unwrap_err();
    assert!(err.contains("worker 1"), "{err}");
    assert!(err.contains("the pool counts 1"), "{err}");
    sim.workers[1].pool.release(&[leaked]);
    sim.check_pools_at_end().unwrap();
}

#[test]
#[should_panic(expected = "invariant broken")]
fn with_checks_on_a_broken_pool_stops_the_run_at_the_next_step() {
    // A block held by no sequence: the first step of worker 0 finds the pool's references (1) differ from
    // the running sequences' blocks (those of the one request just admitted).
    let (mut sim, _) = simulation(1, vec![request(0, SimTime::ZERO, 1, 8, 1)]);
    sim.workers[0].pool.allocate().unwrap();
    sim.check_invariants_every_step(true);
    sim.run(&mut |_| {});
}

#[test]
#[should_panic(expected = "not conserved at the end of the run")]
fn without_checks_a_broken_pool_is_still_caught_at_the_end() {
    let (mut sim, _) = simulation(1, vec![request(0, SimTime::ZERO, 1, 8, 1)]);
    sim.workers[0].pool.allocate().unwrap();
    sim.run(&mut |_| {});
}

#[test]
fn the_worker_summary_counts_steps_busy_time_and_peak_kv_use() {
    // One request of 30 prompt tokens and 5 output tokens on one worker from t = 0: 5 steps (the prefill,
    // then 4 decodes), back to back, so the worker is busy the whole run. At its peak it holds the KV of
    // 30 + 5 − 1 = 34 tokens (the last sample is never fed back): ceil(34 / 4) = 9 of 1,000 blocks.
    let (sim, _) = simulation(1, vec![request(0, SimTime::ZERO, 1, 30, 5)]);
    let out = sim.run(&mut |_| {});
    let w = &out.summary.workers[0];
    assert_eq!((w.steps, w.requests, w.share), (5, 1, 1.0));
    assert_eq!(w.step_time_fraction, 1.0);
    // Its model FLOPs: 34 − 0 tokens computed, 5 sampled, 34² / 2 attention pairs, over the run at peak;
    // a small share of the time it stepped (one short request is memory-bound, not compute-bound).
    let perf = &perf();
    let flops = perf.model_flops_per_gpu(34.0, 5.0, 34.0 * 34.0 / 2.0);
    let expected = flops / (perf.peak_flops_per_gpu() * out.summary.sim.simulated_s);
    let mfu = w.mfu.expect("an aggregated fleet has MFU");
    assert!((mfu - expected).abs() < 2e-6, "{mfu} vs {expected}");
    assert!(mfu > 0.0 && mfu < 0.1 * w.step_time_fraction, "{mfu}");
    assert_eq!(w.kv_blocks, 1000);
    assert_eq!(w.kv_peak_fraction, 0.009);
    assert_eq!((w.preemptions, w.evictions), (0, 0));
}

#[test]
fn indexing_every_block_is_a_switch_on_every_worker() {
    let (mut sim, _) = simulation(3, Vec::new());
    assert!(
        sim.workers.iter().all(|w| w.private_blocks),
        "on by default"
    );
    sim.index_every_block(true);
    assert!(sim.workers.iter().all(|w| !w.private_blocks));
    sim.index_every_block(false);
    assert!(sim.workers.iter().all(|w| w.private_blocks));
}

/// The decode fast path counts what it did, and every pure step it applied in bulk still counts as the
/// event it replaced: the same `events` as stepping one by one, no more steps applied than planned.
/// The prompts are alike, so each arrival looks at the other worker's cache and catches that worker's
/// run up part of the way (its later steps are applied from there on).
#[test]
fn the_fast_path_counts_its_steps_and_keeps_the_event_count() {
    let requests = || {
        (0..12)
            .map(|i| request(i, SimTime(i * 7_000_000), 7, 40, 60))
            .collect::<Vec<_>>()
    };
    let (fast, _) = simulation(2, requests());
    let fast = fast.run(&mut |_| {});
    let (mut slow, _) = simulation(2, requests());
    slow.step_by_step(true);
    let slow = slow.run(&mut |_| {});
    assert_eq!(fast.summary.sim.events, slow.summary.sim.events);
    assert_eq!(slow.fast_path, FastPathCounts::default());
    let counts = fast.fast_path;
    assert!(counts.bulk_steps > 0, "{counts:?}");
    assert!(counts.planned_runs > 0, "{counts:?}");
    assert!(counts.bulk_steps <= counts.planned_steps, "{counts:?}");
    assert!(counts.bulk_steps < fast.summary.sim.events, "{counts:?}");
}
