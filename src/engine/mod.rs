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
//!
//! With faults (`faults.rs`), the gateway's clock joins in: one health-check tick for the fleet, the
//! planned faults and their ends, restarts, and per-request events only for requests in trouble (retries
//! after a backoff, refused connections, idle timeouts on a hung worker). Events are *foreground* (work
//! that must happen) or *background* (faults and health checks); the run ends when no foreground event is
//! pending and every request has finished, whatever faults are still scheduled.

mod autoscale;
mod colocation;
mod disagg;
mod dispatch;
mod faults;
mod fleet;
mod lora;
mod offload;
mod peer;
mod placement;
pub mod profile;
pub mod queue;
mod replication;
mod route_sources;
mod steady_run;
pub mod twin;

pub use autoscale::{AutoscaleSetup, ModelDeployment};

use rustc_hash::FxHashSet;

use crate::faults::{FaultPlan, PlannedFault, Symptom, Targets};
use crate::gateway::{Gateway, GatewaySpec, SessionState};
use crate::hardware::PerfModel;
use crate::hardware::power::PowerModel;
use crate::metrics::bench::BenchReport;
use crate::metrics::record::{Outcome, RequestRecord};
use crate::metrics::requests::{RequestLog, RequestSink};
use crate::metrics::summary::{EnergySummary, MetaNotes, RouterSummary, WorkerSummary, round};
use crate::metrics::{Collector, Summary};
use crate::request::{Request, RequestId};
use crate::routing::router::DecisionRecord;
use crate::routing::{Router, RouterSpec};
use crate::scenario::Scenario;
use crate::time::{SimDuration, SimTime};
use crate::worker::{HistoryHolder, Sequence, Worker, WorkerSnapshot};
use crate::workload::{Workload, synthetic::window_end};
use profile::{Phase, Profile};
use queue::{Class, EventQueue};
use steady_run::SteadyRun;

/// How many times its horizon (the end of its arrival window) a run may simulate before it is stopped.
pub const BUDGET_FACTOR: u64 = 1000;
/// The failure reason of the requests a run stopped by its budget leaves unfinished.
pub const BUDGET_REASON: &str = "unfinished when the simulated-time budget ran out";

/// The simulated-time budget of a run whose arrival window ends at `horizon`: [`BUDGET_FACTOR`] times
/// it, and at least a day past it. Queues built up by overload drain well within it; what runs past it
/// is a run that would take hours of CPU to simulate months of nothing (a hung worker whose requests
/// wait on a day-long timeout, a fleet that can never serve its load).
pub fn time_budget(horizon: SimTime) -> SimTime {
    let day = SimDuration::from_secs(86_400);
    SimTime(horizon.0.saturating_mul(BUDGET_FACTOR)).max(horizon + day)
}

/// Something that happens at an instant.
#[derive(Debug)]
enum Event {
    /// A request reaches the gateway; `streamed` if it came from the open-loop stream (pull the next one).
    Arrival { request: Request, streamed: bool },
    /// The gateway tries a request again after its backoff.
    Retry(Box<Sequence>),
    /// A request reaches `worker` after loading KV from the shared store (if the worker is still the
    /// incarnation `epoch`).
    Deliver {
        worker: usize,
        epoch: u64,
        seq: Box<Sequence>,
    },
    /// The step in flight of `worker` (incarnation `epoch`) ends; `stamp` tells a superseded end
    /// (the decode fast path's, `steady_run.rs`) from the live one.
    StepDone {
        worker: usize,
        epoch: u64,
        stamp: u64,
    },
    /// A prefilled request's KV lands on decode worker `to` (incarnation `to_epoch`), read from prefill
    /// worker `from` (incarnation `from_epoch`): `disagg.rs`.
    Handoff {
        from: usize,
        from_epoch: u64,
        to: usize,
        to_epoch: u64,
        seq: Box<Sequence>,
    },
    /// Prefix blocks pulled from worker `from`'s GPU cache land on `to` (`peer.rs`).
    PeerDeliver {
        from: usize,
        from_epoch: u64,
        to: usize,
        to_epoch: u64,
        seq: Box<Sequence>,
    },
    /// A copy of a hot prefix lands on its target (`replication.rs`).
    ReplicaLands(Box<replication::Replica>),
    /// A connection to dead `worker` failed (refused, or timed out).
    ConnectFailed { worker: usize, seq: Box<Sequence> },
    /// The idle timeout of `request` on hung `worker` (incarnation `epoch`).
    Timeout {
        worker: usize,
        epoch: u64,
        request: RequestId,
    },
    /// Planned fault `0` happens.
    Fault(usize),
    /// Planned fault `0` (a slowdown, memory pressure or store failure) ends.
    FaultEnds(usize),
    /// The grace period of drained `worker` (incarnation `epoch`) is over.
    DrainDeadline {
        worker: usize,
        epoch: u64,
        fault: usize,
    },
    /// `worker` is back after fault `fault`.
    Restart { worker: usize, fault: usize },
    /// `worker` starts late (scale-up).
    Start(usize),
    /// Swapping `worker` (incarnation `epoch`) has loaded its new model (`placement.rs`).
    SwapDone { worker: usize, epoch: u64 },
    /// The gateway checks every worker's health.
    HealthCheck,
    /// The autoscaler evaluates (`autoscale.rs`).
    Autoscale,
    /// Shared GPU `0` may be free for the engines waiting for it (`colocation.rs`).
    GpuFree(usize),
    /// Slot `worker`'s cold start number `generation` is over.
    ColdStartDone { worker: usize, generation: u64 },
    /// The drain of scaled-down `worker` (incarnation `epoch`) runs out of time.
    ScaleDownDeadline { worker: usize, epoch: u64 },
}

impl Event {
    /// Faults and health checks do not keep a run alive on their own.
    fn is_background(&self) -> bool {
        matches!(
            self,
            Event::Fault(_)
                | Event::FaultEnds(_)
                | Event::DrainDeadline { .. }
                | Event::Restart { .. }
                | Event::Start(_)
                | Event::HealthCheck
                | Event::Autoscale
                | Event::ColdStartDone { .. }
                | Event::ScaleDownDeadline { .. }
        )
    }
}

/// A worker's real state (the gateway may believe otherwise).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Truth {
    Up,
    /// Dead; new connections fail as `Symptom` says.
    Down(Symptom),
    /// Alive but making no progress.
    Hung,
}

/// What a run produces.
pub struct RunOutput {
    /// The stable summary (`summary.json`).
    pub summary: Summary,
    /// The raw totals and histograms behind it.
    pub collector: Collector,
    /// The first decisions, if the router was asked to log them.
    pub decisions: Vec<DecisionRecord>,
    /// A benchmark workload's client-side measurements (`concurrency`), apart from the summary.
    pub bench: Option<BenchReport>,
    /// Rows written to the per-request sink ([`Simulation::stream_requests`]), if one was given.
    pub requests_written: Option<u64>,
    /// Wall time by phase, if profiling was asked for ([`Simulation::profile`]).
    pub profile: Option<Profile>,
    /// What the decode fast path did.
    pub fast_path: FastPathCounts,
    /// Every model swap, in the order they began (`swaps.csv`); empty unless requests are placed by
    /// model.
    pub swaps: Vec<crate::metrics::models::SwapRecord>,
}

/// What the decode fast path did in a run (`run --profile` prints it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FastPathCounts {
    /// Decode steps applied in bulk, without an event of their own (counted in `summary.sim.events`
    /// all the same).
    pub bulk_steps: u64,
    /// Runs of pure steps planned, and the steps they planned (a run is cut short when something
    /// touches its worker, so at most that many are applied).
    pub planned_runs: u64,
    pub planned_steps: u64,
}

/// One simulation, from a scenario to a summary.
pub struct Simulation {
    name: String,
    seed: u64,
    now: SimTime,
    queue: EventQueue<Event>,
    workers: fleet::Fleet,
    snapshots: Vec<WorkerSnapshot>,
    router: Router,
    workload: Box<dyn Workload>,
    collector: Collector,
    events: u64,
    horizon: SimTime,
    notes: Vec<String>,
    gateway: Gateway,
    truth: Vec<Truth>,
    plan: Vec<PlannedFault>,
    /// Per planned fault: the stochastic stream that draws its successor when it happens, if any.
    plan_streams: Vec<Option<usize>>,
    /// The stochastic fault streams ([`crate::faults::FaultStream`]).
    fault_streams: Vec<crate::faults::FaultStream>,
    /// Per worker: a fault meant to take it out for good hit it while it was already down, so it must
    /// not come back.
    gone: Vec<bool>,
    /// Workers each planned fault hit (resolved when it happened).
    hit: Vec<Vec<usize>>,
    /// Whether each planned fault's pending occurrence happened (the run may end before a late one).
    fired: Vec<bool>,
    /// The scenario's `[meta]` notes, for the summary.
    meta: Option<MetaNotes>,
    /// The run stops at the first event after this instant ([`time_budget`]); `SimTime::MAX`: never.
    time_budget: SimTime,
    /// Why the run stopped early, if it did.
    stopped: Option<String>,
    /// Late starts: (worker, when).
    starts: Vec<(usize, SimTime)>,
    /// Content hashes that were cached on workers that failed and have not been recomputed since.
    lost: FxHashSet<u64>,
    /// A conversation's last completed turn, by session ([`TurnLeft`]). Taken when the next turn is
    /// routed; a last turn leaves none.
    turn_blocks: rustc_hash::FxHashMap<u64, TurnLeft>,
    /// Pending foreground events.
    foreground: u64,
    /// Whether the gateway records where each conversation lives (worker-held session state, or a
    /// fault aimed at the worker with the most sessions); decided once, when the faults are set.
    track_sessions: bool,
    /// Check every worker's conservation laws after each of its steps (`--check-invariants`).
    check_every_step: bool,
    /// Whether a streamed arrival is in the queue; when not, a workload that resumes after a finish
    /// (a benchmark past its warm-up) is asked again after each finished request.
    stream_open: bool,
    /// KV tiers below GPU memory (`offload.rs`); `None` when none is configured.
    tiers: Option<crate::tiers::Tiers>,
    /// The `[tiers]` section the tiers are built from.
    tiers_spec: crate::tiers::TiersSpec,
    /// Where finished requests' records stream to, if anywhere.
    request_log: Option<RequestLog>,
    /// The decode fast path (`steady_run.rs`): on unless stepping one by one was asked for.
    fast_path: bool,
    /// Each worker's run of pure decode steps in flight, if any.
    runs: Vec<SteadyRun>,
    /// Stamps of scheduled step ends that a shortened run superseded (ignored when they come due).
    superseded: FxHashSet<u64>,
    /// The next step end's stamp.
    next_stamp: u64,
    /// The class of the event being handled.
    class_now: Class,
    /// Wall time by phase (`--profile`).
    prof: Profile,
    /// What the decode fast path did.
    fast_counts: FastPathCounts,
    /// Whether runs of pure steps may cross block boundaries (`steady_run.rs`); decided when the run
    /// starts.
    across_blocks: bool,
    /// Per worker: the end of the step whose end and the start after it are the next pure step of its
    /// run not applied yet (`SimTime::MAX` when there is none). Derivable from `runs`, kept dense so
    /// that [`Simulation::catch_up_others`] scans one array.
    pending: Vec<SimTime>,
    /// Scratch: the starts of pure steps that allocated, and the blocks then in use.
    allocated: Vec<(u32, u32)>,
    /// Worker roles and the interconnect of a disaggregated fleet (`disagg.rs`); `None` when aggregated.
    disagg: Option<disagg::Disagg>,
    /// Hot-prefix replication (`replication.rs`); `None` unless `[interconnect.replication]`.
    replication: Option<Box<replication::Replication>>,
    /// The autoscaler's replica slots and held requests (`autoscale.rs`); `None` unless `[autoscaler]`.
    autoscale: Option<Box<autoscale::Autoscale>>,
    /// Requests placed by model, and swaps (`placement.rs`); `None` unless a request names a model
    /// or a group may swap.
    placement: Option<Box<placement::Placement>>,
    /// Requests for LoRA adapters (`lora.rs`); `None` unless a group has `[workers.lora]` or the
    /// workload names adapters.
    lora: Option<Box<lora::LoraFleet>>,
    /// Engines sharing GPUs (`colocation.rs`); `None` unless a group has `colocate`.
    gpus: Option<Box<colocation::GpuGate>>,
}

impl Simulation {
    /// Builds the fleet, router and workload that `scenario` describes; an error names the scenario's
    /// file and line where it has one ([`Scenario::locate`]).
    pub fn from_scenario(s: &Scenario) -> Result<Self, String> {
        Self::build(s).map_err(|m| s.locate(m))
    }

    fn build(s: &Scenario) -> Result<Self, String> {
        let mut workers = Vec::with_capacity(s.worker_count());
        let mut starts = Vec::new();
        for g in &s.workers {
            let blocks = g.kv_blocks()?;
            for _ in 0..s.group_slots(g) {
                let perf: PerfModel = g.perf();
                if let Some(t) = g.start_at.filter(|t| t.0 > 0) {
                    starts.push((workers.len(), SimTime(t.0)));
                }
                let mut w = Worker::with_blocks(workers.len(), perf, g.engine(), blocks);
                w.lora = g.lora.clone().map(crate::lora::AdapterSlots::new);
                workers.push(w);
            }
        }
        let end = window_end(s.duration);
        let plan = s.fault_plan().map_err(|e| e.to_string())?;
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
        sim.time_budget = time_budget(end);
        sim.notes = built.notes;
        let m = &s.meta;
        sim.meta = (m.question.is_some() || m.conclusion.is_some() || !m.retest_when.is_empty())
            .then(|| MetaNotes {
                question: m.question.clone(),
                conclusion: m.conclusion.clone(),
                retest_when: m.retest_when.clone(),
            });
        for f in plan.faults.iter().filter(|f| f.at >= end) {
            sim.notes.push(format!(
                "fault `{}` at {:.1} s is at or after the end of the arrival window ({:.1} s): it can hit \
                 only requests still in flight, and if the run ends before it, it never happens (its \
                 recovery entry then says `after_end`)",
                f.label,
                f.at.as_secs_f64(),
                end.as_secs_f64()
            ));
        }
        let first_fault = plan.faults.iter().map(|f| f.at).min();
        sim.collector
            .set_metrics(s.metrics.clone(), end, first_fault);
        sim.collector.set_classes(
            s.workload
                .class_list()
                .iter()
                .map(|c| (c.name.clone(), c.priority, c.latency_slo(&s.slo)))
                .collect(),
        );
        sim.set_faults(plan, s.gateway.clone(), starts);
        sim.placement = placement::Placement::of(s)?.map(Box::new);
        sim.gpus = crate::placement::colocation::SharedGpus::of(s)
            .map(|shared| Box::new(colocation::GpuGate::new(shared)));
        if let Some(spec) = &s.autoscaler {
            // One deployment per worker group (each serves its own model), over the group's slots.
            let mut deployments = Vec::with_capacity(s.workers.len());
            let mut first = 0;
            for g in &s.workers {
                let slots = s.group_slots(g) as usize;
                let own = spec
                    .for_model(g.model.as_str())
                    .with_slo_targets(s.slo.ttft, s.slo.tpot);
                let weights = g.perf().weight_bytes_per_gpu() * f64::from(g.tp.0);
                deployments.push(ModelDeployment {
                    model: g.model,
                    slots: first..first + slots,
                    setup: AutoscaleSetup {
                        cold_start: own.cold_start(weights, &s.restart),
                        spec: own,
                        initial: g.count.0,
                        gpus_per_replica: g.tp.0,
                        usd_per_gpu_hour: crate::sizing::price(s, g.gpu).ok(),
                    },
                });
                first += slots;
            }
            sim.set_autoscalers(deployments);
        }
        sim.set_tiers(s.tiers.clone());
        sim.set_disaggregation(s);
        sim.lora = lora::LoraFleet::of(s).map(Box::new);
        for (m, at) in s.requested_models() {
            if !s.workers.iter().any(|g| g.may_serve(m)) {
                sim.notes.push(format!(
                    "{at} = \"{}\": no worker group serves or may load it; its requests are \
                     rejected (`model_not_served`)",
                    m.as_str()
                ));
            }
        }
        sim.replication = s.interconnect.replication.as_ref().map(|r| {
            let block_size = sim.workers[0].params.block_size;
            Box::new(replication::Replication::new(r, block_size))
        });
        Ok(sim)
    }

    /// Adds faults, the gateway's configuration, and late worker starts (`(worker, time)`).
    pub fn set_faults(
        &mut self,
        plan: FaultPlan,
        gateway: GatewaySpec,
        starts: Vec<(usize, SimTime)>,
    ) {
        let started: Vec<bool> = (0..self.workers.len())
            .map(|w| !starts.iter().any(|&(v, _)| v == w))
            .collect();
        self.truth = started
            .iter()
            .map(|&up| {
                if up {
                    Truth::Up
                } else {
                    Truth::Down(Symptom::Refused)
                }
            })
            .collect();
        self.gateway = Gateway::new(gateway, &started);
        self.hit = vec![Vec::new(); plan.faults.len()];
        self.fired = vec![false; plan.faults.len()];
        if !plan.faults.is_empty() {
            let stochastic = plan.stream_of.iter().any(Option::is_some);
            let from = timeline_cutoff(&plan.faults, stochastic, &self.collector);
            self.collector.keep_timelines_from(from);
        }
        self.plan = plan.faults;
        self.plan_streams = plan.stream_of;
        self.fault_streams = plan.streams;
        self.gone = vec![false; self.workers.len()];
        self.starts = starts;
        self.track_sessions = self.gateway.spec.session_state == SessionState::Worker
            || self.plan.iter().any(|f| f.targets == Targets::MostSessions);
        let up = self.workers_up();
        self.collector.on_workers_up(SimTime::ZERO, up);
        self.build_tiers();
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
        let blocks: Vec<u32> = workers.iter().map(|w| w.pool.total()).collect();
        let block_size = workers.first().map_or(16, |w| w.params.block_size);
        let mut router = Router::new(router, seed, &blocks, block_size);
        let profiles: Vec<crate::routing::WorkerProfile> =
            workers.iter().map(worker_profile).collect();
        router.set_fleet(&crate::routing::FleetInfo {
            workers: &profiles,
            targets: crate::routing::LatencyTargets {
                ttft: collector.slo.ttft,
                tpot: collector.slo.tpot,
            },
        });
        let n = workers.len();
        let mut workers = workers;
        if router.wants_kv_events() {
            workers.iter_mut().for_each(|w| w.pool.record_events());
        }
        let workers = fleet::Fleet::new(workers);
        let snapshots = workers.snapshots();
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
            gateway: Gateway::new(GatewaySpec::default(), &vec![true; n]),
            truth: vec![Truth::Up; n],
            plan: Vec::new(),
            plan_streams: Vec::new(),
            fault_streams: Vec::new(),
            gone: vec![false; n],
            hit: Vec::new(),
            fired: Vec::new(),
            meta: None,
            time_budget: SimTime::MAX,
            stopped: None,
            starts: Vec::new(),
            lost: FxHashSet::default(),
            turn_blocks: Default::default(),
            foreground: 0,
            track_sessions: false,
            check_every_step: false,
            stream_open: false,
            tiers: None,
            tiers_spec: crate::tiers::TiersSpec::default(),
            request_log: None,
            fast_path: true,
            runs: (0..n).map(|_| SteadyRun::default()).collect(),
            superseded: FxHashSet::default(),
            next_stamp: 0,
            class_now: Class::Fault,
            prof: Profile::new(false),
            fast_counts: FastPathCounts::default(),
            across_blocks: false,
            pending: vec![SimTime::MAX; n],
            allocated: Vec::new(),
            disagg: None,
            replication: None,
            autoscale: None,
            placement: None,
            lora: None,
            gpus: None,
        }
    }

    /// Checks every worker's KV conservation laws ([`Worker::check_invariants`]) each time it starts a
    /// step, and panics at the first that fails. Costs a pass over the worker's blocks per step. Without
    /// it, the laws are still checked once at the end of the run.
    pub fn check_invariants_every_step(&mut self, on: bool) {
        self.check_every_step = on;
    }

    /// Enters every KV block in its worker's prefix index (`true`) instead of keeping the blocks that
    /// only their own request could ask for out of it (the default, [`crate::worker::kv_cache`]'s
    /// private blocks). Both give the same results to the byte; indexing every block costs three
    /// lookups per block.
    pub fn index_every_block(&mut self, on: bool) {
        for w in self.workers.iter_mut() {
            w.private_blocks = !on;
        }
    }

    /// Keeps the timeline of every request that arrives from `from` on, for a recovery analysis
    /// against this run (it is some run's no-fault twin); a run with faults keeps them anyway.
    pub fn keep_timelines_from(&mut self, from: SimTime) {
        self.collector.keep_timelines_from(from);
    }

    /// The end of the span over which this run detects its warm-up (its twin needs the same).
    pub fn warmup_horizon(&self) -> SimTime {
        self.collector.warmup.horizon()
    }

    /// Detects the warm-up before `horizon` at most (a no-fault twin: before its run's first fault).
    pub fn limit_warmup_horizon(&mut self, horizon: SimTime) {
        self.collector.limit_warmup_horizon(horizon);
    }

    /// From when this run keeps request timelines (its twin needs the same); `None` if it keeps none.
    pub fn timelines_from(&self) -> Option<SimTime> {
        self.collector.timelines_from()
    }

    /// Streams every finished request's record to `sink` (`requests.parquet`), in finishing order.
    pub fn stream_requests(&mut self, sink: Box<dyn RequestSink>) {
        self.request_log = Some(RequestLog::new(sink));
    }

    /// Times the run by phase ([`Profile`]); the breakdown comes back in [`RunOutput::profile`].
    pub fn profile(&mut self, on: bool) {
        self.prof = Profile::new(on);
    }

    /// The end-of-run check: every worker's laws hold and every block has been given back.
    fn check_pools_at_end(&self) -> Result<(), String> {
        self.workers.iter().try_for_each(Worker::check_drained)?;
        self.check_tiers()
    }

    /// What building the workload had to say (e.g. how many bad trace lines were skipped).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Where the run stands, with `fraction` of the arrival window simulated.
    fn progress_at(&self, fraction: f64) -> RunProgress {
        RunProgress {
            fraction,
            simulated_s: self.now.as_secs_f64(),
            requests_done: self.collector.finished(),
            requests_arrived: self.collector.arrived,
            events: self.events,
        }
    }

    /// Runs to the end: every arrival routed, every request finished. `progress` gets where the run
    /// stands ([`RunProgress`]), now and then.
    ///
    /// Panics if the workload stopped early on an error, which only a trace that changed on disk after
    /// it was checked can do; [`Simulation::try_run`] returns that as an error.
    pub fn run(self, progress: &mut dyn FnMut(&RunProgress)) -> RunOutput {
        self.try_run(progress)
            .unwrap_or_else(|e| panic!("the workload failed during the run: {e}"))
    }

    /// [`Simulation::run`], with a workload that stopped early on an error (a trace file that changed
    /// after it was checked) returned as that error.
    pub fn try_run(mut self, progress: &mut dyn FnMut(&RunProgress)) -> Result<RunOutput, String> {
        self.decide_runs_across_blocks();
        self.pull_arrival();
        self.schedule_faults();
        while let Some((t, class, event)) = self.queue.pop_with_class() {
            debug_assert!(t >= self.now, "event queue went back in time");
            if let Event::StepDone { stamp, .. } = &event
                && !self.superseded.is_empty()
                && self.superseded.remove(stamp)
            {
                continue; // its run was shortened; it was taken off the foreground count then
            }
            if t > self.time_budget {
                self.stop_at_budget(event);
                break;
            }
            self.class_now = class;
            if !event.is_background() {
                self.foreground -= 1;
            } else if self.foreground == 0 && self.collector.arrived == self.collector.finished() {
                break; // nothing left that a fault or a health check could affect
            }
            self.now = t;
            self.events += 1;
            if self.events.is_multiple_of(65_536) && self.horizon > SimTime::ZERO {
                progress(
                    &self.progress_at((t.as_secs_f64() / self.horizon.as_secs_f64()).min(1.0)),
                );
            }
            match event {
                Event::Arrival { request, streamed } => {
                    if streamed {
                        self.pull_arrival();
                    }
                    self.on_arrival(request);
                }
                Event::Retry(seq) => self.dispatch(*seq),
                Event::Deliver { worker, epoch, seq } => self.on_deliver(worker, epoch, *seq),
                Event::Handoff {
                    from,
                    from_epoch,
                    to,
                    to_epoch,
                    seq,
                } => self.on_handoff((from, from_epoch), (to, to_epoch), *seq),
                Event::PeerDeliver {
                    from,
                    from_epoch,
                    to,
                    to_epoch,
                    seq,
                } => self.on_peer_deliver((from, from_epoch), (to, to_epoch), *seq),
                Event::ReplicaLands(copy) => self.on_replica_lands(*copy),
                Event::StepDone { worker, epoch, .. } => {
                    if self.workers[worker].epoch == epoch {
                        self.complete_steady_run(worker);
                        self.on_step_done(worker);
                    }
                }
                Event::ConnectFailed { worker, seq } => self.on_connect_failed(worker, *seq),
                Event::Timeout {
                    worker,
                    epoch,
                    request,
                } => self.on_timeout(worker, epoch, request),
                Event::Fault(i) => self.on_fault(i),
                Event::FaultEnds(i) => self.on_fault_ends(i),
                Event::DrainDeadline {
                    worker,
                    epoch,
                    fault,
                } => self.on_drain_deadline(worker, epoch, fault),
                Event::Restart { worker, fault } => self.on_restart(worker, fault),
                Event::Start(w) => self.on_start(w),
                Event::SwapDone { worker, epoch } => self.on_swap_done(worker, epoch),
                Event::GpuFree(gpu) => self.on_gpu_free(gpu),
                Event::HealthCheck => self.on_health_check(),
                Event::Autoscale => self.on_autoscale_tick(),
                Event::ColdStartDone { worker, generation } => {
                    self.on_cold_start_done(worker, generation)
                }
                Event::ScaleDownDeadline { worker, epoch } => {
                    self.on_scale_down_deadline(worker, epoch)
                }
            }
        }
        self.fail_stranded("never served: the worker could not admit it");
        self.fail_held("never served: held for a model swap that never completed");
        for i in 0..self.plan.len() {
            // A scheduled fault the run ended before (a random failure's next draw past the end is
            // not a fault that vanished: it is where its stream happened to stop).
            if !self.fired[i] && self.plan_streams[i].is_none() {
                let f = &self.plan[i];
                (self.collector).on_fault_skipped(f.at, f.label.clone(), f.kind.as_str());
            }
        }
        assert_eq!(
            self.collector.arrived,
            self.collector.finished(),
            "requests lost: every arrival must complete, fail or be rejected"
        );
        assert_eq!(
            self.collector.recompute.reprefilled_tokens,
            self.collector.recompute.total_tokens(),
            "recompute does not add up: every re-prefilled token needs exactly one cause"
        );
        // A run cut short may leave transfers in flight holding blocks; only a whole run must balance.
        if self.stopped.is_none()
            && let Err(e) = self.check_pools_at_end()
        {
            panic!("KV memory not conserved at the end of the run: {e}");
        }
        progress(&self.progress_at(1.0));
        if let Some(e) = self.workload.take_error() {
            return Err(e);
        }
        let requests_written = match self.request_log.take() {
            Some(log) => Some(log.finish()?),
            None => None,
        };
        let mut out = self.into_output();
        out.requests_written = requests_written;
        Ok(out)
    }

    /// The simulated-time budget ran out at `next`, the first event past it: every request still
    /// in the gateway or on a worker fails, counted under [`BUDGET_REASON`], arrivals not yet made are
    /// dropped, and the run ends with what it has.
    fn stop_at_budget(&mut self, next: Event) {
        self.stopped = Some(format!(
            "the simulated clock passed {} s, {}x the scenario's horizon of {} s, with {} requests \
             unfinished; they are counted as failed (\"{BUDGET_REASON}\"). Something keeps the run \
             going long after its arrivals (a hung worker and a long gateway.request_timeout, retries \
             that never succeed, a fleet far too slow for its load)",
            self.time_budget.as_secs_f64(),
            BUDGET_FACTOR,
            self.horizon.as_secs_f64(),
            self.collector.arrived - self.collector.finished()
        ));
        let mut pending = vec![next];
        while let Some((_, _, e)) = self.queue.pop_with_class() {
            pending.push(e);
        }
        for event in pending {
            let seq = match event {
                Event::Retry(seq)
                | Event::Deliver { seq, .. }
                | Event::Handoff { seq, .. }
                | Event::PeerDeliver { seq, .. }
                | Event::ConnectFailed { seq, .. } => seq,
                _ => continue,
            };
            self.finish_seq(*seq, None, Outcome::Failed, Some(BUDGET_REASON));
        }
        self.foreground = 0;
        self.fail_autoscale_held(BUDGET_REASON);
        self.fail_stranded(BUDGET_REASON);
        self.fail_held(BUDGET_REASON);
    }

    /// Queues `event` at `at`, counting foreground events. Step ends are ranked by worker, so that
    /// simultaneous ones are handled in the same order whenever they were scheduled.
    fn schedule(&mut self, at: SimTime, class: Class, event: Event) {
        if !event.is_background() {
            self.foreground += 1;
        }
        let rank = match event {
            Event::StepDone { worker, .. } => worker as u64,
            // After every engine's step ending at the same instant.
            Event::GpuFree(gpu) => (1 << 40) + gpu as u64,
            _ => 0,
        };
        self.queue.push_ranked(at, class, rank, event);
    }

    fn pull_arrival(&mut self) {
        self.stream_open = false;
        let t = self.prof.start();
        let next = self.workload.next_arrival();
        self.prof.stop(Phase::Workload, t);
        if let Some(request) = next {
            self.stream_open = true;
            self.schedule(
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
        let t = self.prof.start();
        self.collector.on_arrival(request.arrival);
        self.prof.stop(Phase::Metrics, t);
        let seq = Sequence::new(request, self.now, 0);
        self.note_autoscale_arrival(&seq);
        self.dispatch(seq);
    }

    /// Brings the router's snapshots up to date: the workers touched since the last arrival, and
    /// every worker's `up` from the gateway.
    fn refresh_snapshots(&mut self) {
        self.workers.refresh(&mut self.snapshots);
        for (w, snap) in self.snapshots.iter_mut().enumerate() {
            snap.up = self.gateway.routable(w);
        }
    }

    /// A request arrives at `w` after its KV load.
    fn on_deliver(&mut self, w: usize, epoch: u64, seq: Sequence) {
        self.settle_worker(w);
        if self.workers[w].epoch != epoch || self.truth[w] != Truth::Up {
            // The worker failed while the KV was loading: the stream broke.
            self.on_lost(seq, w, "worker failed");
            return;
        }
        self.workers[w].enqueue(seq);
        if !self.workers[w].in_step() {
            self.start_step(w);
        }
    }

    /// [`Simulation::best_prefix_beyond`], finding `w`'s own prefix first.
    #[cfg(test)]
    fn best_prefix_elsewhere(&self, w: usize, hashes: &[u64]) -> usize {
        let local = self.workers[w].pool.cached_prefix(hashes);
        self.best_prefix_beyond(w, hashes, local, None)
    }

    /// The longest cached prefix of `hashes` on any live worker other than `w`, if longer than `local`,
    /// the leading blocks of `hashes` that `w` itself holds (else 0): what a cache-aware router could
    /// have reused. Costs one lookup per worker unless another worker really has a longer prefix, never
    /// a scan of the fleet's caches; none when the caller knows that the blocks from `nowhere_from` on
    /// are cached on no worker (a first routing's private tail, [`Request::first_private_block`]) and
    /// `w`'s prefix already reaches them. Debug builds check that claim against the lookups.
    fn best_prefix_beyond(
        &self,
        w: usize,
        hashes: &[u64],
        local: usize,
        nowhere_from: Option<usize>,
    ) -> usize {
        let Some(&next) = hashes.get(local) else {
            return 0; // `w` holds the whole prompt: nobody holds more
        };
        let holders_of_next = || {
            self.workers
                .iter()
                .filter(|v| v.id != w && v.params.block_size == self.workers[w].params.block_size)
                .filter(|v| self.truth[v.id] == Truth::Up)
                .filter(move |v| v.pool.lookup(next).is_some())
        };
        if !looks_elsewhere(hashes, local, nowhere_from) {
            debug_assert!(
                holders_of_next().next().is_none(),
                "a worker caches a block of a private tail before its request was first routed"
            );
            return 0;
        }
        // One lookup per worker, independent of each other: asked for all at once.
        for v in self.workers.iter() {
            v.pool.prefetch_entry(next);
        }
        holders_of_next()
            .map(|v| v.pool.cached_prefix(hashes))
            .max()
            .unwrap_or(0)
    }

    /// Notes, for recompute attribution, how much of `seq`'s prompt beyond the `local` leading blocks
    /// `w` holds another live worker caches ([`Sequence::elsewhere_blocks`]), and how many leading
    /// blocks were lost with failed workers and are held by none ([`Sequence::failure_blocks`]).
    fn note_prefix_elsewhere(
        &mut self,
        w: usize,
        seq: &mut Sequence,
        local: usize,
        nowhere_from: Option<usize>,
    ) {
        let prompt_blocks =
            (seq.request.prompt_tokens / self.workers[w].params.block_size) as usize;
        let prompt_hashes = &seq.hashes[..prompt_blocks.min(seq.hashes.len())];
        let local = local.min(prompt_hashes.len());
        seq.elsewhere_blocks =
            self.best_prefix_beyond(w, prompt_hashes, local, nowhere_from) as u32;
        if !self.lost.is_empty() {
            let lost = prompt_hashes
                .iter()
                .take_while(|h| self.lost.contains(h))
                .count();
            let local = self.workers[w].pool.cached_prefix(&prompt_hashes[..lost]);
            // This request recomputes them: later ones find them here, or lost for other reasons.
            for h in &prompt_hashes[local..lost] {
                self.lost.remove(h);
            }
            seq.failure_blocks = lost as u32;
        }
    }

    fn on_step_done(&mut self, w: usize) {
        let t = self.prof.start();
        let outcome = self.workers[w].finish_step(self.now);
        self.prof.stop(Phase::WorkerSteps, t);
        self.forward_kv_events(w);
        let t = self.prof.start();
        for &id in &outcome.first_tokens {
            self.router.on_first_token(self.now, id, w);
        }
        self.prof.stop(Phase::Routing, t);
        for mut seq in outcome.completed {
            if self.gateway.spec.session_state == SessionState::SharedTier {
                let t = self.prof.start();
                self.write_turn(w, &seq);
                self.prof.stop(Phase::KvBookkeeping, t);
            }
            let t = self.prof.start();
            if let Some(s) = seq.request.session
                && !seq.request.never_quoted
            {
                self.leave_turn(s.id, w, &mut seq);
            }
            self.router.on_finished(self.now, &seq.request, w);
            self.gateway.on_success(w);
            self.prof.stop(Phase::Routing, t);
            self.finish_seq(seq, Some(w), Outcome::Completed, None);
        }
        for seq in outcome.handed_off {
            self.begin_handoff(w, seq);
        }
        // A hand-off whose decode side is lost may migrate the request at once, back to this worker,
        // which then starts its next step itself.
        if !self.workers[w].in_step() {
            self.start_step(w);
        }
        self.retire_if_drained(w);
        self.begin_swap_if_drained(w);
    }

    /// Keeps what session `session`'s turn `seq`, completed on `w`, leaves for the next turn (its
    /// blocks and hashes are taken from `seq`).
    fn leave_turn(&mut self, session: u64, w: usize, seq: &mut Sequence) {
        let mut segments = Vec::with_capacity(seq.request.segments.len() + 1);
        segments.extend_from_slice(&seq.request.segments);
        segments.push(seq.request.output_segment());
        let mut left = TurnLeft {
            worker: w,
            epoch: self.workers[w].epoch,
            blocks: std::mem::take(&mut seq.blocks),
            segments,
            block_size: self.workers[w].params.block_size,
            hashes: std::mem::take(&mut seq.hashes),
            holders: std::mem::take(&mut seq.history_holders),
        };
        let holder = HistoryHolder {
            worker: w,
            wipes: self.workers[w].wipes,
            blocks: left.computed_blocks(left.hashes.len()),
        };
        match (left.holders.iter_mut()).find(|h| (h.worker, h.wipes) == (w, holder.wipes)) {
            Some(h) => h.blocks = h.blocks.max(holder.blocks),
            None => left.holders.push(holder),
        }
        self.turn_blocks.insert(session, left);
    }

    fn start_step(&mut self, w: usize) {
        debug_assert!(
            self.truth[w] == Truth::Up,
            "worker {w} would serve work while it is down"
        );
        if !self.gpu_turn(w) {
            return;
        }
        let t = self.prof.start();
        let started = self.workers[w].start_step(self.now);
        let pool = &self.workers[w].pool;
        self.collector
            .series
            .on_kv(w, self.now, pool.used(), pool.total());
        self.write_down(w);
        if let Some(dt) = started {
            let end = self.plan_steady_run(w, self.now + dt);
            self.schedule_step_end(w, end);
            self.gpu_held_until(w, end);
        }
        self.prof.stop(Phase::WorkerSteps, t);
        if self.check_every_step
            && let Err(e) = self.workers[w].check_invariants()
        {
            panic!("invariant broken at t = {} s: {e}", self.now.as_secs_f64());
        }
        self.forward_kv_events(w);
    }

    fn forward_kv_events(&mut self, w: usize) {
        if self.router.wants_kv_events() {
            let t = self.prof.start();
            let events = self.workers[w].pool.drain_events();
            self.router.on_kv_events(self.now, w, events);
            self.prof.stop(Phase::KvBookkeeping, t);
        }
    }

    /// Ends a request: its record goes to the collector and the workload (which may send a follow-up).
    fn finish_seq(
        &mut self,
        seq: Sequence,
        worker: Option<usize>,
        outcome: Outcome,
        reason: Option<&'static str>,
    ) {
        let completed = outcome == Outcome::Completed;
        let r = &seq.request;
        let record = RequestRecord {
            id: r.id,
            session: r.session.map(|s| s.id),
            turn: r.session.map(|s| s.turn),
            worker,
            arrival: r.arrival,
            first_scheduled: seq.first_scheduled,
            first_token: if completed { seq.first_token } else { None },
            finished: self.now,
            prompt_tokens: r.prompt_tokens,
            output_tokens: r.output_tokens,
            history_tokens: seq.history_blocks * self.workers[0].params.block_size,
            cached_tokens: seq.cached_at_admission.unwrap_or(0),
            prefill_tokens: seq.prefill_tokens,
            recompute: seq.recompute,
            preemptions: seq.preemptions,
            retries: seq.retries + seq.migrations,
            migrations: seq.migrations,
            timeouts: seq.timeouts,
            loaded_tokens: seq.loaded_tokens.unwrap_or(0),
            session_reset: seq.session_reset,
            outcome,
            reason,
            class: r.class,
            model: r.model,
            adapter: r.adapter.map(|a| a.id),
        };
        self.note_model_finished(
            record.id,
            record.first_token.map(|f| f.since(record.arrival)),
        );
        self.note_autoscale_finished(&seq, completed);
        let t = self.prof.start();
        if let Some(w) = record.worker {
            self.collector.per_worker_model_flops[w] +=
                crate::metrics::mfu::request_flops(&self.workers[w].perf, &record);
        }
        self.collector.on_finished(&record);
        if let Some(log) = &mut self.request_log {
            log.push(&record);
        }
        self.prof.stop(Phase::Metrics, t);
        let t = self.prof.start();
        let follow_up = self.workload.on_finished(&record, self.now);
        self.prof.stop(Phase::Workload, t);
        if !self.stream_open && self.workload.resumes_after_finish() {
            self.pull_arrival();
        }
        if let Some(next) = follow_up {
            debug_assert!(next.arrival >= self.now);
            self.schedule(
                next.arrival,
                Class::Arrival,
                Event::Arrival {
                    request: next,
                    streamed: false,
                },
            );
        }
    }

    /// Whether every worker both prefills and decodes (no prefill/decode disaggregation; peer
    /// transfer and replication alone keep the roles whole).
    fn all_workers_both(&self) -> bool {
        self.disagg.as_ref().is_none_or(|d| {
            d.roles
                .iter()
                .all(|r| *r == crate::worker::role::Role::Both)
        })
    }

    fn into_output(mut self) -> RunOutput {
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
                kv_cache_dtype: w.perf.kv_dtype.as_str().to_string(),
                profile: w.perf.provenance.profile.clone(),
                calibrated: w.perf.provenance.calibrated,
                step_time_fraction: if end > 0.0 {
                    round(w.busy.as_secs_f64() / end, 6)
                } else {
                    0.0
                },
                // A disaggregated request is recorded at its decode worker only: no honest split.
                mfu: self.all_workers_both().then(|| {
                    let flops = self.collector.per_worker_model_flops[w.id];
                    round(crate::metrics::mfu::utilisation(&w.perf, flops, end), 6)
                }),
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
                energy_j: round(self.energy_j(w.id), 3),
                role: self
                    .disagg
                    .as_ref()
                    .map(|d| d.roles[w.id])
                    .filter(|r| *r != crate::worker::role::Role::Both)
                    .map(|r| r.as_str().to_string()),
                shared_gpu: self.gpus.as_ref().and_then(|g| g.shared.gpu_of[w.id]),
                gpu_wait_s: self
                    .gpus
                    .as_ref()
                    .filter(|g| g.shares(w.id))
                    .map(|g| round(g.wait_ns[w.id] as f64 / 1e9, 9)),
                mig: w.perf.mig.map(|m| m.name(w.perf.gpu)),
            })
            .collect();
        self.collector.finish_warmup();
        let router = RouterSummary {
            policy: self.router.policy_name().to_string(),
            view: self.router.view_name().map(str::to_string),
            accuracy: self.router.accuracy.clone(),
            replicas: self.router.replica_summary(),
        };
        let mut summary = Summary::build(
            &self.name,
            self.seed,
            router,
            &self.collector,
            workers,
            end,
            self.events,
        );
        summary.meta = self.meta.take();
        let bench = self.workload.bench_report();
        summary.benchmark = bench.clone();
        summary.stages = self.workload.stage_report();
        summary.sim.stopped = self.stopped.take();
        summary.tiers = self.tier_summary();
        summary.energy = Some(EnergySummary::of(
            (0..self.workers.len()).map(|w| self.energy_j(w)).sum(),
            // A shared GPU counts once, with its host engine.
            self.workers
                .iter()
                .filter(|w| self.gpus.as_ref().is_none_or(|g| g.shared.is_host(w.id)))
                .map(|w| u64::from(w.perf.tp))
                .sum(),
            self.workers
                .iter()
                .all(|w| PowerModel::of(w.perf.gpu).validated),
            end,
            self.collector.completed,
            self.collector.output_tokens,
        ));
        let workers = self.workers.len();
        self.collector.series.close_kv(self.now, workers);
        summary.disaggregation = self.disagg_summary();
        summary.peer_transfer = self.peer_summary();
        summary.replication = self.replication_summary();
        summary.autoscaler = self.autoscale_summary(self.now);
        summary.models = (self.placement.as_ref()).map(|p| p.counters.summary(self.now));
        summary.lora = self.lora_summary();
        let swaps = (self.placement.as_ref())
            .map(|p| p.counters.swap_log().to_vec())
            .unwrap_or_default();
        RunOutput {
            swaps,
            summary,
            bench,
            collector: self.collector,
            decisions: self.router.log,
            requests_written: None,
            profile: self.prof.enabled().then_some(self.prof),
            fast_path: self.fast_counts,
        }
    }
}

/// Where a running simulation stands, for progress bars.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunProgress {
    /// Share of the arrival window simulated, in [0, 1].
    pub fraction: f64,
    /// Simulated time, s.
    pub simulated_s: f64,
    /// Requests finished (completed, failed or rejected) and arrived so far.
    pub requests_done: u64,
    pub requests_arrived: u64,
    /// Events processed so far.
    pub events: u64,
}

/// What a conversation's completed turn leaves for its next turn, whose prompt begins with this
/// turn's prompt and answer.
struct TurnLeft {
    /// The worker it completed on, and that worker's epoch then.
    worker: usize,
    epoch: u64,
    /// The blocks it held there: the next turn's hint if routed there ([`Sequence::cached_hint`]).
    blocks: Vec<crate::worker::kv_cache::BlockId>,
    /// Its prompt's segments, then its answer's.
    segments: Vec<crate::request::Segment>,
    /// The hashes of that stream's full blocks at `block_size` tokens (empty without prefix caching):
    /// the next turn's first blocks ([`Request::block_hashes_after`]).
    block_size: u32,
    hashes: Vec<u64>,
    /// Every worker incarnation that computed a leading part of this stream, and how much of it: this
    /// turn's worker, and those of the turns before that it continues.
    holders: Vec<HistoryHolder>,
}

impl TurnLeft {
    /// Of the stream's first `full` full blocks, those whose KV was computed: all but a block that ends
    /// with the answer's last token (sampled, never fed back).
    fn computed_blocks(&self, full: usize) -> u32 {
        let tokens: u64 = self.segments.iter().map(|s| u64::from(s.tokens)).sum();
        (full as u64).min(tokens.saturating_sub(1) / u64::from(self.block_size)) as u32
    }
}

/// How long before a fault a request still in flight at it may have arrived, beyond the recovery
/// baseline, for the recovery analysis to see it.
const IN_FLIGHT_MARGIN: SimDuration = SimDuration::from_secs(120);

/// The earliest arrival whose timeline a run with `faults` keeps: the recovery baseline and a margin
/// before the first scheduled fault, or the start when a fault is random (its time is drawn later).
/// Keeping only those (48 bytes a request) spares a long run with a late fault most of that memory.
/// What the gateway is configured with about worker `w`.
fn worker_profile(w: &Worker) -> crate::routing::WorkerProfile {
    crate::routing::WorkerProfile {
        perf: w.perf.clone(),
        max_num_batched_tokens: w.params.max_num_batched_tokens,
        max_num_seqs: w.params.max_num_seqs,
        block_size: w.params.block_size,
        total_blocks: w.pool.total(),
    }
}

fn timeline_cutoff(faults: &[PlannedFault], stochastic: bool, c: &Collector) -> SimTime {
    let first = faults.iter().map(|f| f.at).min().unwrap_or(SimTime::ZERO);
    if stochastic {
        return SimTime::ZERO;
    }
    let back = c
        .series
        .spec
        .recovery_baseline
        .0
        .saturating_add(IN_FLIGHT_MARGIN.0);
    SimTime(first.0.saturating_sub(back))
}

/// Whether finding the longest prefix of `hashes` cached beyond the `local` leading blocks a worker
/// holds needs lookups in other workers' caches: not when the worker holds the whole prompt, nor when
/// the blocks from `nowhere_from` on are known to be cached nowhere and `local` reaches them
/// ([`Simulation::best_prefix_beyond`]).
fn looks_elsewhere(hashes: &[u64], local: usize, nowhere_from: Option<usize>) -> bool {
    local < hashes.len() && nowhere_from.is_none_or(|p| local < p)
}

impl Simulation {
    /// Worker `w`'s energy over the run: its steps' energy plus idle power for the rest of its billed
    /// time (`hardware::power`). A GPU shared by several engines idles only while none of them steps,
    /// and that idle power is charged once, to its host engine.
    fn energy_j(&self, w: usize) -> f64 {
        let worker = &self.workers[w];
        let billed = self.billed_s(w, self.now);
        if let Some(slice) = worker.perf.mig {
            // Its slice's share of the GPU's power; the host also idles the slices no engine holds.
            let power = PowerModel::of(worker.perf.gpu);
            let own = slice.compute_fraction()
                * power.worker_energy_j(1, worker.busy_energy_j, worker.busy.as_secs_f64(), billed);
            let gate = self.gpus.as_ref().expect("MIG engines are placed");
            let gpu = gate.shared.gpu_of[w].expect("on a GPU");
            if !gate.shared.is_host(w) {
                return own;
            }
            let held: f64 = gate.shared.engines[gpu]
                .iter()
                .filter_map(|&e| self.workers[e].perf.mig)
                .map(|m| m.compute_fraction())
                .sum();
            return own + (1.0 - held).max(0.0) * power.idle_w * billed;
        }
        let busy_s = match self.gpus.as_ref().and_then(|g| {
            g.shared.gpu_of[w].map(|gpu| (g.shared.is_host(w), &g.shared.engines[gpu]))
        }) {
            None => worker.busy.as_secs_f64(),
            Some((true, engines)) => engines
                .iter()
                .map(|&e| self.workers[e].busy.as_secs_f64())
                .sum(),
            Some((false, _)) => billed,
        };
        PowerModel::of(worker.perf.gpu).worker_energy_j(
            worker.perf.tp,
            worker.busy_energy_j,
            busy_s,
            billed,
        )
    }
}

#[cfg(test)]
mod autoscale_tests;
#[cfg(test)]
mod colocation_tests;
#[cfg(test)]
mod fault_tests;
#[cfg(test)]
mod lora_tests;
#[cfg(test)]
mod placement_tests;
#[cfg(test)]
mod tests;
