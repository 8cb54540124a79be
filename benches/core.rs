//! Benchmarks of the simulator's hot paths: the event queue, the KV block pool, and whole runs.
//!
//! `cargo bench` runs them; the large-scale figure (a 16-worker, one-hour, ~100k-request run) comes from
//! `fleetsim run scenarios/bench-16x1h.toml`, whose `run_info.json` reports wall time and events/s.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use fleetsim::engine::Simulation;
use fleetsim::engine::queue::{Class, EventQueue};
use fleetsim::scenario::Scenario;
use fleetsim::time::{SimDuration, SimTime};
use fleetsim::worker::kv_cache::BlockPool;

/// Pops the first of `n` pending events and schedules it again later, as a run's steady state does.
fn push_pop<E>(b: &mut criterion::Bencher, n: usize, event: impl Fn(u64) -> E) {
    let mut q = EventQueue::default();
    for i in 0..n as u64 {
        q.push(SimTime(i * 1000), Class::StepDone, event(i));
    }
    let mut t = n as u64 * 1000;
    b.iter(|| {
        let (_, e) = q.pop().unwrap();
        t += 1000;
        q.push(SimTime(t), Class::StepDone, black_box(e));
    });
}

fn event_queue(c: &mut Criterion) {
    let mut g = c.benchmark_group("event_queue");
    g.throughput(Throughput::Elements(1));
    for pending in [16usize, 1024] {
        g.bench_with_input(BenchmarkId::new("push_pop", pending), &pending, |b, &n| {
            push_pop(b, n, |i| i)
        });
    }
    // The engine's events are 96 bytes (an arrival carries its request); the heap moves only their
    // keys.
    for pending in [1024usize, 8192] {
        g.bench_with_input(
            BenchmarkId::new("push_pop_96_byte_event", pending),
            &pending,
            |b, &n| push_pop(b, n, |i| [i; 12]),
        );
    }
    g.finish();
}

fn kv_pool(c: &mut Criterion) {
    let mut g = c.benchmark_group("kv_pool");
    // A request's lifetime on an 8B model on an H100 (28k blocks): look up a 64-block prompt, allocate,
    // register and release it.
    let blocks = 28_000;
    g.throughput(Throughput::Elements(64));
    g.bench_function("request_64_blocks", |b| {
        let mut pool = BlockPool::new(blocks, 16);
        let mut next = 0u64;
        let mut held = Vec::with_capacity(64);
        b.iter(|| {
            let hashes: Vec<u64> = (0..64).map(|i| (next % 512) * 1000 + i).collect();
            next += 1;
            let hit = pool.cached_prefix(&hashes);
            held.clear();
            for h in &hashes[..hit] {
                let b = pool.lookup(*h).unwrap();
                pool.touch(b);
                held.push(b);
            }
            for h in &hashes[hit..] {
                let b = pool.allocate().unwrap();
                pool.register(b, *h);
                held.push(b);
            }
            pool.release(&held);
        });
    });
    g.finish();
}

fn whole_run(c: &mut Criterion) {
    let mut g = c.benchmark_group("simulation");
    g.sample_size(10);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/quickstart.toml");
    let s = Scenario::load(&path, &["duration=\"60s\"".to_string()]).unwrap();
    let summary = Simulation::from_scenario(&s)
        .unwrap()
        .run(&mut |_| {})
        .summary;
    g.throughput(Throughput::Elements(summary.requests.arrived));
    g.bench_function("quickstart_60s_requests", |b| {
        b.iter(|| {
            Simulation::from_scenario(&s)
                .unwrap()
                .run(&mut |_| {})
                .summary
                .requests
                .completed
        });
    });
    // The same run stepping every worker one step at a time (the decode fast path off).
    g.bench_function("quickstart_60s_requests_step_by_step", |b| {
        b.iter(|| {
            let mut sim = Simulation::from_scenario(&s).unwrap();
            sim.step_by_step(true);
            sim.run(&mut |_| {}).summary.requests.completed
        });
    });
    g.finish();
}

/// One routing decision (view upkeep included) for each policy at 8, 64 and 1,024 workers. The fleet's
/// caches hold 256 prefixes of 64 blocks, each on a few workers; requests carry a 96-block prompt
/// starting with one of them.
fn routing_decision(c: &mut Criterion) {
    use fleetsim::request::{Request, Segment};
    use fleetsim::routing::{PolicyConfig, Router, RouterSpec};
    use fleetsim::worker::WorkerSnapshot;
    use fleetsim::worker::kv_cache::KvEvent;

    let mut g = c.benchmark_group("routing_decision");
    for workers in [8usize, 64, 1024] {
        let snapshots: Vec<WorkerSnapshot> = (0..workers)
            .map(|id| WorkerSnapshot {
                id,
                up: true,
                outstanding: (id % 7) as u32,
                queued: (id % 3) as u32,
                running: (id % 5) as u32,
                kv_utilization: (id % 10) as f64 / 10.0,
                used_blocks: (id % 10) as u32 * 100,
                total_blocks: 28_000,
            })
            .collect();
        let prefix_hashes = |p: u64| -> Vec<u64> { (0..64).map(|b| (p << 20) | b).collect() };
        for name in PolicyConfig::NAMES {
            // Bound the approximate views so the bench measures steady state, not ever-growing maps.
            let settings = fleetsim::routing::spec::RouterSettings {
                approx_capacity_blocks: Some(fleetsim::config::PositiveInt(8192)),
                // Pruned at each insertion (not SGLang's 120 s timer, which the bench never reaches).
                approx_prune_interval: Some(SimDuration::ZERO),
                ..Default::default()
            };
            let spec = RouterSpec {
                policy: PolicyConfig::parse_spec(name).unwrap(),
                settings,
            };
            let mut router = Router::new(&spec, 1, &vec![28_000; workers], 16);
            for p in 0..256u64 {
                for k in 0..3 {
                    let w = ((p * 7 + k * 13) as usize) % workers;
                    let hashes = prefix_hashes(p);
                    router.on_kv_events(
                        SimTime::ZERO,
                        w,
                        hashes.iter().map(|&h| KvEvent::Stored(h)),
                    );
                }
            }
            let mut i = 0u64;
            g.bench_with_input(BenchmarkId::new(name, workers), &workers, |b, _| {
                b.iter(|| {
                    i += 1;
                    let mut hashes = prefix_hashes(i % 256);
                    hashes.extend((0..32).map(|b| (i << 32) | b));
                    let req = Request::new(
                        i,
                        None,
                        SimTime(i),
                        16,
                        vec![Segment {
                            content: i,
                            tokens: 96 * 16,
                        }],
                    );
                    let now = SimTime(i * 1000);
                    let d = router.route(now, &req, &hashes, &snapshots).unwrap();
                    router.record(now, &req, d, &hashes, 0, 0);
                    // Finished at once, so stateful policies (dynamo_kv's ledger) stay at steady state.
                    router.on_finished(now, &req, d.worker);
                    black_box(d.worker)
                });
            });
        }
    }
    g.finish();
}

criterion_group!(benches, event_queue, kv_pool, whole_run, routing_decision);
criterion_main!(benches);
