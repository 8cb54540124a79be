//! The run loop: one event enum, handled in one `match`.
//!
//! ```text
//! workload ──Arrival──► gateway: route ──► worker.enqueue ──► (idle?) start_step ──StepDone@t+dt──┐
//!                                                   ▲                                            │
//!                                                   └──── finish_step: tokens, completions ◄─────┘
//! ```
//! Arrivals stream from the workload: exactly one future open-loop arrival is in the queue at a time.
//! Each worker has at most one step in flight, so there are at most `workers + 1 + closed-loop follow-ups`
//! pending events, whatever the number of requests. No event is ever scheduled per token.

pub mod queue;

use crate::hardware::PerfModel;
use crate::metrics::record::{Outcome, Recompute, RequestRecord};
use crate::metrics::summary::{RouterSummary, WorkerSummary, round};
use crate::metrics::{Collector, Summary};
use crate::request::Request;
use crate::routing::router::DecisionRecord;
use crate::routing::{Router, RouterSpec};
use crate::scenario::Scenario;
use crate::time::SimTime;
use crate::worker::{Sequence, Worker, WorkerSnapshot};
use crate::workload::{Workload, synthetic::window_end};
use queue::{Class, EventQueue};

/// Something that happens at an instant.
#[derive(Debug)]
enum Event {
    /// A request reaches the gateway; `streamed` if it came from the open-loop stream (pull the next one).
    Arrival { request: Request, streamed: bool },
    /// Worker `0`'s step in flight ends.
    StepDone(usize),
}

/// What a run produces.
pub struct RunOutput {
    /// The stable summary (`summary.json`).
    pub summary: Summary,
    /// The raw totals and histograms behind it.
    pub collector: Collector,
    /// The first decisions, if the router was asked to log them.
    pub decisions: Vec<DecisionRecord>,
}

/// One simulation, from a scenario to a summary.
pub struct Simulation {
    name: String,
    seed: u64,
    now: SimTime,
    queue: EventQueue<Event>,
    workers: Vec<Worker>,
    snapshots: Vec<WorkerSnapshot>,
    router: Router,
    workload: Box<dyn Workload>,
    collector: Collector,
    events: u64,
    horizon: SimTime,
    notes: Vec<String>,
    /// Check every worker's conservation laws after each of its steps (`--check-invariants`).
    check_every_step: bool,
}

impl Simulation {
    /// Builds the fleet, router and workload that `scenario` describes.
    pub fn from_scenario(s: &Scenario) -> Result<Self, String> {
        let mut workers = Vec::with_capacity(s.worker_count());
        for g in &s.workers {
            let blocks = g.kv_blocks()?;
            for _ in 0..g.count.0 {
                let perf: PerfModel = g.perf();
                workers.push(Worker::with_blocks(workers.len(), perf, g.engine(), blocks));
            }
        }
        let end = window_end(s.duration);
        let built = s.workload.build(s.seed, end, s.max_requests)?;
        let mut sim = Simulation::new(
            s.name.clone(),
            s.seed,
            workers,
            &s.router,
            built.workload,
            Collector::new(s.slo.clone(), s.worker_count()),
        );
        sim.horizon = end;
        sim.notes = built.notes;
        Ok(sim)
    }

    /// Assembles a simulation from parts (tests and custom drivers).
    pub fn new(
        name: String,
        seed: u64,
        workers: Vec<Worker>,
        router: &RouterSpec,
        workload: Box<dyn Workload>,
        collector: Collector,
    ) -> Self {
        let snapshots = workers.iter().map(Worker::snapshot).collect();
        let blocks: Vec<u32> = workers.iter().map(|w| w.pool.total()).collect();
        let router = Router::new(router, seed, &blocks);
        let mut workers = workers;
        if router.wants_kv_events() {
            workers.iter_mut().for_each(|w| w.pool.record_events());
        }
        Simulation {
            name,
            seed,
            now: SimTime::ZERO,
            queue: EventQueue::default(),
            workers,
            snapshots,
            router,
            workload,
            collector,
            events: 0,
            horizon: SimTime::ZERO,
            notes: Vec::new(),
            check_every_step: false,
        }
    }

    /// Checks every worker's KV conservation laws ([`Worker::check_invariants`]) each time it starts a
    /// step, and panics at the first that fails. Costs a pass over the worker's blocks per step. Without
    /// it, the laws are still checked once at the end of the run.
    pub fn check_invariants_every_step(&mut self, on: bool) {
        self.check_every_step = on;
    }

    /// The end-of-run check: every worker's laws hold and every block has been given back.
    fn check_pools_at_end(&self) -> Result<(), String> {
        self.workers.iter().try_for_each(Worker::check_drained)
    }

    /// What building the workload had to say (e.g. how many bad trace lines were skipped).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Runs to the end: every arrival routed, every request finished. `progress` gets the fraction of the
    /// arrival window simulated, now and then.
    ///
    /// Panics if the workload stopped early on an error, which only a trace that changed on disk after
    /// it was checked can do; [`Simulation::try_run`] returns that as an error.
    pub fn run(self, progress: &mut dyn FnMut(f64)) -> RunOutput {
        self.try_run(progress)
            .unwrap_or_else(|e| panic!("the workload failed during the run: {e}"))
    }

    /// [`Simulation::run`], with a workload that stopped early on an error (a trace file that changed
    /// after it was checked) returned as that error.
    pub fn try_run(mut self, progress: &mut dyn FnMut(f64)) -> Result<RunOutput, String> {
        self.pull_arrival();
        while let Some((t, event)) = self.queue.pop() {
            debug_assert!(t >= self.now, "event queue went back in time");
            self.now = t;
            self.events += 1;
            if self.events.is_multiple_of(65_536) && self.horizon > SimTime::ZERO {
                progress((t.as_secs_f64() / self.horizon.as_secs_f64()).min(1.0));
            }
            match event {
                Event::Arrival { request, streamed } => {
                    if streamed {
                        self.pull_arrival();
                    }
                    self.on_arrival(request);
                }
                Event::StepDone(w) => self.on_step_done(w),
            }
        }
        assert_eq!(
            self.collector.arrived,
            self.collector.finished(),
            "requests lost: every arrival must complete, fail or be rejected"
        );
        if let Err(e) = self.check_pools_at_end() {
            panic!("KV memory not conserved at the end of the run: {e}");
        }
        progress(1.0);
        if let Some(e) = self.workload.take_error() {
            return Err(e);
        }
        Ok(self.into_output())
    }

    fn pull_arrival(&mut self) {
        if let Some(request) = self.workload.next_arrival() {
            self.queue.push(
                request.arrival,
                Class::Arrival,
                Event::Arrival {
                    request,
                    streamed: true,
                },
            );
        }
    }

    fn on_arrival(&mut self, request: Request) {
        self.collector.on_arrival();
        for (snap, w) in self.snapshots.iter_mut().zip(&self.workers) {
            *snap = w.snapshot();
        }
        // Content identity at the engines' block size (uniform when the router compares caches).
        let block_size = self.workers[0].params.block_size;
        let hashes = request.block_hashes(block_size);
        let prompt_blocks = ((request.prompt_tokens / block_size) as usize).min(hashes.len());
        let Some(decision) = self.router.route(
            self.now,
            &request,
            &hashes[..prompt_blocks],
            &self.snapshots,
        ) else {
            self.finish_unserved(request, None, Outcome::Rejected, "no worker up");
            return;
        };
        let w = decision.worker;
        let local = self.workers[w].pool.cached_prefix(&hashes[..prompt_blocks]);
        let outstanding = self.snapshots[w].outstanding;
        self.router.record(
            self.now,
            &request,
            decision,
            &hashes[..prompt_blocks],
            local as u32,
            outstanding,
        );
        if !self.workers[w].can_ever_fit(request.prompt_tokens, request.output_tokens) {
            self.finish_unserved(
                request,
                Some(w),
                Outcome::Rejected,
                "longer than the worker's KV capacity",
            );
            return;
        }
        let params = self.workers[w].params;
        let mut seq = Sequence::new(request, self.now, 0);
        if params.enable_prefix_caching {
            seq.hashes = if params.block_size == block_size {
                hashes
            } else {
                seq.request.block_hashes(params.block_size)
            };
            let prompt_blocks = (seq.request.prompt_tokens / params.block_size) as usize;
            let prompt_hashes = &seq.hashes[..prompt_blocks.min(seq.hashes.len())];
            seq.elsewhere_blocks = self.best_prefix_elsewhere(w, prompt_hashes) as u32;
        }
        self.workers[w].enqueue(seq);
        if !self.workers[w].in_step() {
            self.start_step(w);
        }
    }

    /// The longest cached prefix of `hashes` on any live worker other than `w`, if longer than `w`'s own
    /// (else 0): what a cache-aware router could have reused. Costs one lookup per worker unless another
    /// worker really has a longer prefix, never a scan of the fleet's caches.
    fn best_prefix_elsewhere(&self, w: usize, hashes: &[u64]) -> usize {
        let local = self.workers[w].pool.cached_prefix(hashes);
        let Some(&next) = hashes.get(local) else {
            return 0; // `w` holds the whole prompt: nobody holds more
        };
        self.workers
            .iter()
            .filter(|v| v.id != w && v.params.block_size == self.workers[w].params.block_size)
            .filter(|v| v.pool.lookup(next).is_some())
            .map(|v| v.pool.cached_prefix(hashes))
            .max()
            .unwrap_or(0)
    }

    fn on_step_done(&mut self, w: usize) {
        let outcome = self.workers[w].finish_step(self.now);
        self.forward_kv_events(w);
        for seq in outcome.completed {
            self.router.on_finished(&seq.request, w);
            let record = self.record(w, seq);
            self.finish(record);
        }
        self.start_step(w);
    }

    fn start_step(&mut self, w: usize) {
        if let Some(dt) = self.workers[w].start_step(self.now) {
            self.queue
                .push(self.now + dt, Class::StepDone, Event::StepDone(w));
        }
        if self.check_every_step
            && let Err(e) = self.workers[w].check_invariants()
        {
            panic!("invariant broken at t = {} s: {e}", self.now.as_secs_f64());
        }
        self.forward_kv_events(w);
    }

    fn forward_kv_events(&mut self, w: usize) {
        if self.router.wants_kv_events() {
            let events = self.workers[w].pool.drain_events();
            self.router.on_kv_events(self.now, w, events);
        }
    }

    fn record(&self, w: usize, seq: Sequence) -> RequestRecord {
        let r = &seq.request;
        RequestRecord {
            id: r.id,
            session: r.session.map(|s| s.id),
            turn: r.session.map(|s| s.turn),
            worker: Some(w),
            arrival: r.arrival,
            first_scheduled: seq.first_scheduled,
            first_token: seq.first_token,
            finished: self.now,
            prompt_tokens: r.prompt_tokens,
            output_tokens: r.output_tokens,
            cached_tokens: seq.cached_at_admission.unwrap_or(0),
            prefill_tokens: seq.prefill_tokens,
            recompute: seq.recompute,
            preemptions: seq.preemptions,
            retries: 0,
            outcome: Outcome::Completed,
            reason: None,
        }
    }

    fn finish_unserved(
        &mut self,
        r: Request,
        worker: Option<usize>,
        outcome: Outcome,
        reason: &'static str,
    ) {
        let record = RequestRecord {
            id: r.id,
            session: r.session.map(|s| s.id),
            turn: r.session.map(|s| s.turn),
            worker,
            arrival: r.arrival,
            first_scheduled: None,
            first_token: None,
            finished: self.now,
            prompt_tokens: r.prompt_tokens,
            output_tokens: r.output_tokens,
            cached_tokens: 0,
            prefill_tokens: 0,
            recompute: Recompute::default(),
            preemptions: 0,
            retries: 0,
            outcome,
            reason: Some(reason),
        };
        self.finish(record);
    }

    fn finish(&mut self, record: RequestRecord) {
        self.collector.on_finished(&record);
        if let Some(next) = self.workload.on_finished(&record, self.now) {
            debug_assert!(next.arrival >= self.now);
            self.queue.push(
                next.arrival,
                Class::Arrival,
                Event::Arrival {
                    request: next,
                    streamed: false,
                },
            );
        }
    }

    fn into_output(self) -> RunOutput {
        let end = self.now.as_secs_f64();
        let completed = self.collector.completed.max(1) as f64;
        let workers = self
            .workers
            .iter()
            .map(|w| WorkerSummary {
                id: w.id,
                gpu: w.perf.gpu.as_str().to_string(),
                model: w.perf.model.as_str().to_string(),
                tp: w.perf.tp,
                precision: w.perf.precision.as_str().to_string(),
                profile: w.perf.provenance.profile.clone(),
                calibrated: w.perf.provenance.calibrated,
                busy_fraction: if end > 0.0 {
                    round(w.busy.as_secs_f64() / end, 6)
                } else {
                    0.0
                },
                requests: self.collector.per_worker[w.id],
                share: round(self.collector.per_worker[w.id] as f64 / completed, 6),
                steps: w.steps,
                kv_blocks: w.pool.total(),
                kv_peak_fraction: round(
                    f64::from(w.pool.peak_used()) / f64::from(w.pool.total().max(1)),
                    6,
                ),
                preemptions: w.preemptions,
                evictions: w.pool.evictions(),
            })
            .collect();
        let router = RouterSummary {
            policy: self.router.policy_name().to_string(),
            view: self.router.view_name().map(str::to_string),
            accuracy: self.router.accuracy.clone(),
        };
        let summary = Summary::build(
            &self.name,
            self.seed,
            router,
            &self.collector,
            workers,
            end,
            self.events,
        );
        RunOutput {
            summary,
            collector: self.collector,
            decisions: self.router.log,
        }
    }
}

#[cfg(test)]
mod tests;
