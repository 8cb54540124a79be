//! The engine's side of `[autoscaler]` ([`crate::autoscale`]): replica slots, cold starts, scale-down
//! drains, replacement of failed replicas, and requests held at the gateway while no replica is ready.
//!
//! The fleet holds `max_replicas` worker slots. A slot is `Off` (no process, not billed, refuses
//! connections), `Provisioning` (a cold start in flight: billed, still refusing), `Active` (its process
//! is up; the gateway routes to it once a health check has passed, as for a late `start_at` worker) or
//! `Draining` (scaled down: the gateway no longer routes to it; it finishes what it holds, then is
//! stopped; after `drain_grace` whatever is left is cut off and retried).
//!
//! Every evaluation (every `interval`) first releases failed replicas (an `Active` slot whose process is
//! dead or hung: killed, its slot freed, as Kubernetes' kubelet and ReplicaSet controller would), then asks
//! the HPA (or, with `metric = "slo"`, the SLO planner) for the replica count, then reconciles: slots are started (lowest free slot first) or removed
//! (starting ones first, newest first; then the most recently ready) until the live slots (`Provisioning`
//! and `Active`) equal the count. A failed replica thus comes back as a cold one: a replacement.
//!
//! A fleet of several worker groups, each serving its own model, is several deployments: each has its
//! own slot range, HPA, replica count and requests held at the gateway, and its metric is taken over its
//! own replicas and its own model's requests; they are evaluated one after the other at each tick.
//!
//! Invariants: each deployment's live slots equal its HPA's replica count after every evaluation; a slot is billed
//! exactly while it is not `Off`; a fault's restart never brings back a slot the autoscaler released or
//! re-provisioned (it applies only to an `Active` slot, the kubelet restarting the process in place); and
//! a request held at the gateway is dispatched again as soon as a replica becomes routable, so none waits
//! while one could serve it.

use std::collections::VecDeque;
use std::ops::Range;

use super::queue::Class;
use super::{Event, Simulation, Truth};
use crate::autoscale::planner::{EngineLimits, Traffic, step_shape};
use crate::autoscale::{
    AutoscalerSpec, Change, ColdStart, Hpa, Metric, Observation, SlaPlanner, keep_serving,
};
use crate::faults::Symptom;
use crate::hardware::ModelId;
use crate::metrics::replicas::{
    AutoscaleSummary, ColdStartHits, ColdStartTerms, ReplicaCount, ReplicaLog, ScaleChange,
    SloAttainment,
};
use crate::metrics::summary::round;
use crate::request::RequestId;
use crate::time::SimTime;
use crate::worker::Sequence;

/// What one worker slot is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Off,
    /// Cold-starting; `generation` tells its completion from a cancelled start's.
    Provisioning {
        generation: u64,
    },
    /// The process is up (since `since`).
    Active {
        since: SimTime,
    },
    /// Scaled down, finishing its requests (`epoch`: the worker's incarnation when the drain began).
    Draining {
        epoch: u64,
    },
}

/// What an autoscaled deployment needs besides the autoscaler's configuration.
#[derive(Clone, Debug)]
pub struct AutoscaleSetup {
    /// The deployment's settings (its model's bounds and target applied).
    pub spec: AutoscalerSpec,
    /// Replicas up at t = 0 (the first `initial` of its slots).
    pub initial: u32,
    pub cold_start: ColdStart,
    /// GPUs per replica (tensor parallelism), for GPU-hours.
    pub gpus_per_replica: u32,
    /// US dollars per GPU-hour, if the GPU has a price.
    pub usd_per_gpu_hour: Option<f64>,
}

/// One model's deployment in a fleet of several: its setup, the worker slots its replicas occupy, and the
/// model its requests name.
#[derive(Clone, Debug)]
pub struct ModelDeployment {
    pub model: ModelId,
    pub slots: Range<usize>,
    pub setup: AutoscaleSetup,
}

/// One deployment's scaling state during a run.
#[derive(Debug)]
struct Deployment {
    setup: AutoscaleSetup,
    /// The model its requests name (`None`: a fleet of one deployment, which takes every request).
    model: Option<ModelId>,
    slots: Range<usize>,
    scaler: Scaler,
    /// The replica count the HPA asks for (the deployment's `spec.replicas`).
    replicas: u32,
    /// Requests waiting at the gateway for a ready replica, with when each was held.
    held: VecDeque<(SimTime, Sequence)>,
    /// Every request ever held (counted once), and per request the nanoseconds held so far (over
    /// several holds).
    held_ids: rustc_hash::FxHashSet<RequestId>,
    held_ns: rustc_hash::FxHashMap<RequestId, u64>,
    /// Its model's requests arrived and finished (kept only with several deployments; one deployment
    /// reads the fleet's counts).
    arrived: u64,
    finished: u64,
    arrivals_at_last_tick: u64,
    idle_since: Option<SimTime>,
    scale_ups: u64,
    scale_downs: u64,
    replacements: u64,
    changes: Vec<Change>,
}

/// What decides a deployment's replica count.
#[derive(Debug)]
enum Scaler {
    Hpa(Hpa),
    Slo(SloScaler),
}

/// The SLO planner and what it has observed since its last adjustment.
#[derive(Debug)]
struct SloScaler {
    planner: SlaPlanner,
    /// Completed requests since the last adjustment: count, and sums of prompt, output and cached
    /// prompt tokens.
    completed: CompletedSince,
    /// Requests arrived since the last adjustment, and when the next one is due.
    arrivals: u64,
    next_adjustment: SimTime,
}

#[derive(Clone, Copy, Debug, Default)]
struct CompletedSince {
    requests: u64,
    prompt_tokens: u64,
    output_tokens: u64,
    cached_tokens: u64,
}

impl CompletedSince {
    /// The interval's traffic as the SLO planner reads it (means over completed requests, NaN for none).
    fn traffic(&self, arrivals: u64) -> Traffic {
        let n = self.requests as f64;
        Traffic {
            requests: arrivals,
            isl: self.prompt_tokens as f64 / n,
            osl: self.output_tokens as f64 / n,
            hit_rate: self.cached_tokens as f64 / self.prompt_tokens as f64,
        }
    }
}

/// The autoscaler's state during a run.
#[derive(Debug)]
pub(super) struct Autoscale {
    deployments: Vec<Deployment>,
    /// Per slot: the deployment it belongs to.
    owner: Vec<usize>,
    slots: Vec<Slot>,
    next_generation: u64,
    /// Per slot: billed nanoseconds so far, and since when it is billed (if it is).
    billed_ns: Vec<u64>,
    billed_since: Vec<Option<SimTime>>,
}

impl Autoscale {
    /// The deployment that serves `seq`: the one of its model (a request naming none asks for the first
    /// deployment's model, as the placement's default).
    fn deployment_of(&self, seq: &Sequence) -> usize {
        if self.deployments.len() == 1 {
            return 0;
        }
        let m = seq.request.model.or(self.deployments[0].model);
        self.deployments
            .iter()
            .position(|d| d.model == m)
            .unwrap_or(0)
    }

    fn spec(&self) -> &AutoscalerSpec {
        &self.deployments[0].setup.spec
    }
}

impl Simulation {
    /// Makes the fleet one autoscaled deployment over all its slots: slots from `setup.initial` on
    /// start `Off`. Call after [`Simulation::set_faults`] (which sets who is up at t = 0).
    pub fn set_autoscaler(&mut self, setup: AutoscaleSetup) {
        let n = self.workers.len();
        self.set_deployments(vec![(None, 0..n, setup)]);
    }

    /// Makes the fleet autoscaled per model: each deployment scales its own slots.
    pub fn set_autoscalers(&mut self, deployments: Vec<ModelDeployment>) {
        self.set_deployments(
            deployments
                .into_iter()
                .map(|d| (Some(d.model), d.slots, d.setup))
                .collect(),
        );
    }

    fn set_deployments(&mut self, setups: Vec<(Option<ModelId>, Range<usize>, AutoscaleSetup)>) {
        let n = self.workers.len();
        let mut started = vec![false; n];
        let mut owner = vec![0; n];
        for (d, (_, range, setup)) in setups.iter().enumerate() {
            let initial = (setup.initial as usize).min(range.len());
            started[range.start..range.start + initial].fill(true);
            owner[range.clone()].fill(d);
        }
        let gateway = self.gateway.spec.clone();
        self.gateway = crate::gateway::Gateway::new(gateway, &started);
        for (w, up) in started.iter().enumerate() {
            self.truth[w] = if *up {
                Truth::Up
            } else {
                Truth::Down(Symptom::Refused)
            };
        }
        let slots = started
            .iter()
            .map(|&up| {
                if up {
                    Slot::Active {
                        since: SimTime::ZERO,
                    }
                } else {
                    Slot::Off
                }
            })
            .collect();
        let several = setups.len() > 1;
        if several {
            self.collector.series.replicas_by_model = setups
                .iter()
                .map(|(m, ..)| {
                    (
                        m.map_or("", |m| m.as_str()).to_string(),
                        ReplicaLog::default(),
                    )
                })
                .collect();
        }
        let deployments = setups
            .into_iter()
            .map(|(model, slots, setup)| {
                let initial = (setup.initial as usize).min(slots.len()) as u32;
                let scaler = if setup.spec.metric == Metric::Slo {
                    Scaler::Slo(SloScaler {
                        planner: SlaPlanner::new(
                            setup.spec.planner.clone().unwrap_or_default().predictor,
                            setup.spec.planner_targets(),
                        ),
                        completed: CompletedSince::default(),
                        arrivals: 0,
                        next_adjustment: SimTime::ZERO + setup.spec.interval(),
                    })
                } else {
                    Scaler::Hpa(Hpa::new(setup.spec.clone()).seeded(initial, SimTime::ZERO))
                };
                Deployment {
                    scaler,
                    replicas: initial,
                    model: if several { model } else { None },
                    slots,
                    setup,
                    held: VecDeque::new(),
                    held_ids: Default::default(),
                    held_ns: Default::default(),
                    arrived: 0,
                    finished: 0,
                    arrivals_at_last_tick: 0,
                    idle_since: None,
                    scale_ups: 0,
                    scale_downs: 0,
                    replacements: 0,
                    changes: Vec::new(),
                }
            })
            .collect();
        let billed_since = started
            .iter()
            .map(|&up| up.then_some(SimTime::ZERO))
            .collect();
        self.autoscale = Some(Box::new(Autoscale {
            deployments,
            owner,
            slots,
            next_generation: 0,
            billed_ns: vec![0; n],
            billed_since,
        }));
        let up = started.iter().filter(|&&u| u).count() as u32;
        self.collector.on_workers_up(SimTime::ZERO, up);
        self.note_replicas();
    }

    /// Queues the first evaluation.
    pub(super) fn schedule_autoscale(&mut self) {
        if let Some(a) = &self.autoscale {
            let at = SimTime::ZERO + a.spec().tick();
            self.schedule(at, Class::Gateway, Event::Autoscale);
        }
    }

    /// A request arrived at the gateway: counted for its model's deployment (several deployments only).
    pub(super) fn note_autoscale_arrival(&mut self, seq: &Sequence) {
        if let Some(a) = self.autoscale.as_deref_mut()
            && a.deployments.len() > 1
        {
            let d = a.deployment_of(seq);
            a.deployments[d].arrived += 1;
        }
    }

    /// A request ended (completed, failed or rejected): counted for its model's deployment, and a
    /// completed one's lengths kept for the SLO planner.
    pub(super) fn note_autoscale_finished(&mut self, seq: &Sequence, completed: bool) {
        if let Some(a) = self.autoscale.as_deref_mut() {
            let d = a.deployment_of(seq);
            let several = a.deployments.len() > 1;
            let dep = &mut a.deployments[d];
            if several {
                dep.finished += 1;
            }
            if completed && let Scaler::Slo(slo) = &mut dep.scaler {
                let c = &mut slo.completed;
                c.requests += 1;
                c.prompt_tokens += u64::from(seq.request.prompt_tokens);
                c.output_tokens += u64::from(seq.generated);
                c.cached_tokens += u64::from(seq.cached_at_admission.unwrap_or(0));
            }
        }
    }

    /// One evaluation: release failed replicas, then per deployment decide and reconcile, and queue
    /// the next.
    pub(super) fn on_autoscale_tick(&mut self) {
        self.release_failed();
        let n = self.workers.len();
        for w in 0..n {
            // Settled first, so that the fast path is observed as the event-per-step engine would be.
            if self.truth[w] == Truth::Up {
                self.settle_worker(w);
            }
        }
        let count = self.autoscale.as_ref().map_or(0, |a| a.deployments.len());
        for d in 0..count {
            let (o, arrivals) = self.observe(d);
            let now = self.now;
            let planned = self.plan_for_slo(d, arrivals, &o);
            let a = self.autoscale.as_mut().expect("an autoscaled run");
            let dep = &mut a.deployments[d];
            let desired = match &mut dep.scaler {
                Scaler::Hpa(hpa) => hpa.decide(now, &o),
                Scaler::Slo(_) => {
                    let spec = &dep.setup.spec;
                    let bounded = planned
                        .unwrap_or(o.current)
                        .clamp(spec.min_replicas, spec.max_replicas.0);
                    keep_serving(spec, now, &o, bounded)
                }
            };
            if desired != dep.replicas {
                if desired > dep.replicas {
                    dep.scale_ups += 1;
                } else {
                    dep.scale_downs += 1;
                }
                dep.changes.push(Change {
                    at: now,
                    from: dep.replicas,
                    to: desired,
                });
                dep.replicas = desired;
            }
            self.reconcile(d);
        }
        let a = self.autoscale.as_ref().expect("an autoscaled run");
        let next = self.now + a.spec().tick();
        self.schedule(next, Class::Gateway, Event::Autoscale);
    }

    /// With the SLO planner: its replica count for deployment `d` (before the bounds), given the
    /// `arrivals` since the last tick and what deployment `d`'s autoscaler observes now, `o`; `None` for
    /// no change (or when `d` scales on a metric). At each adjustment (every `interval`) the throughput
    /// rule sizes the deployment on its first replica's engine from the arrivals and completions since
    /// the last one (then forgotten); with the load loop, that count is only a floor, and every tick
    /// the loop reads the ready replicas' queues and batches, observing only while replicas start.
    fn plan_for_slo(&mut self, d: usize, arrivals: u64, o: &Observation) -> Option<u32> {
        let now = self.now;
        let a = self.autoscale.as_deref_mut().expect("an autoscaled run");
        let slots = &a.slots;
        let dep = &mut a.deployments[d];
        let Scaler::Slo(slo) = &mut dep.scaler else {
            return None;
        };
        slo.arrivals += arrivals;
        let spec = &dep.setup.spec;
        let due = now >= slo.next_adjustment;
        let (completed, arrivals) = if due {
            slo.next_adjustment = now + spec.interval();
            (
                std::mem::take(&mut slo.completed),
                std::mem::take(&mut slo.arrivals),
            )
        } else {
            (CompletedSince::default(), 0)
        };
        let planner = &mut slo.planner;
        let worker = &self.workers[dep.slots.start];
        let limits = EngineLimits {
            max_num_batched_tokens: worker.params.max_num_batched_tokens,
            max_num_seqs: worker.params.max_num_seqs,
            kv_tokens: u64::from(worker.pool.total()) * u64::from(worker.params.block_size),
        };
        let perf = &worker.perf;
        let step = |prefill: f64, decodes: u64, ctx: f64| {
            perf.step_time(&step_shape(prefill, decodes, ctx))
                .as_secs_f64()
        };
        let throughput = if due {
            planner.replicas(&completed.traffic(arrivals), spec.interval(), limits, &step)
        } else {
            None
        };
        let Some(load) = spec.planner.as_ref().filter(|p| p.load_scaling) else {
            return throughput;
        };
        if o.starting > 0 || o.ready != o.current {
            return None; // Dynamo observes only while a scaling is in progress
        }
        let engines: Vec<_> = dep
            .slots
            .clone()
            .filter(|&w| matches!(slots[w], Slot::Active { .. }) && self.gateway.routable(w))
            .map(|w| self.workers[w].planner_load())
            .collect();
        let wanted =
            planner.load_decision(&engines, o.current, limits, load.down_sensitivity(), &step)?;
        Some(wanted.max(planner.floor.unwrap_or(0)))
    }

    /// What deployment `d`'s HPA sees now (its workers settled by the caller), and the requests that
    /// arrived since the last evaluation.
    fn observe(&mut self, d: usize) -> (Observation, u64) {
        let (fleet_arrived, fleet_finished) = (self.collector.arrived, self.collector.finished());
        let a = self.autoscale.as_mut().expect("an autoscaled run");
        let several = a.deployments.len() > 1;
        let dep = &mut a.deployments[d];
        let (arrived, finished) = if several {
            (dep.arrived, dep.finished)
        } else {
            (fleet_arrived, fleet_finished)
        };
        let idle = arrived == finished;
        let new_arrivals = arrived - dep.arrivals_at_last_tick;
        dep.arrivals_at_last_tick = arrived;
        dep.idle_since = if idle && new_arrivals == 0 {
            dep.idle_since.or(Some(self.now))
        } else {
            None
        };
        let held = dep.held.len() as u64;
        let metric = dep.setup.spec.metric;
        let interval_s = dep.setup.spec.interval().as_secs_f64();
        let (mut ready, mut starting, mut total) = (0u32, 0u32, 0.0f64);
        for w in dep.slots.clone() {
            match a.slots[w] {
                Slot::Provisioning { .. } => starting += 1,
                Slot::Active { .. } if self.gateway.routable(w) => {
                    ready += 1;
                    let snap = self.workers[w].snapshot();
                    total += match metric {
                        Metric::QueueDepth => f64::from(snap.queued),
                        Metric::Running => f64::from(snap.running),
                        Metric::Concurrency => f64::from(snap.outstanding),
                        Metric::KvUtilization => snap.kv_utilization,
                        Metric::Rps | Metric::Slo => 0.0,
                    };
                }
                Slot::Active { .. } => starting += 1,
                Slot::Off | Slot::Draining { .. } => {}
            }
        }
        match metric {
            Metric::QueueDepth | Metric::Concurrency => total += held as f64,
            Metric::Rps => total = new_arrivals as f64 / interval_s,
            Metric::Running | Metric::KvUtilization | Metric::Slo => {}
        }
        let o = Observation {
            current: dep.replicas,
            ready,
            starting,
            total,
            held,
            idle_since: dep.idle_since,
        };
        (o, new_arrivals)
    }

    /// Frees the slots of replicas whose process died or hung (a hung one is killed: its requests are
    /// lost to the gateway's in-flight policy).
    fn release_failed(&mut self) {
        for w in 0..self.workers.len() {
            let a = self.autoscale.as_ref().expect("an autoscaled run");
            if !matches!(a.slots[w], Slot::Active { .. }) || self.truth[w] == Truth::Up {
                continue;
            }
            if self.truth[w] == Truth::Hung {
                self.settle_worker(w);
                self.crash_worker(w, Symptom::Refused, false, "worker replaced");
            }
            self.slot_off(w);
            let a = self.autoscale.as_mut().expect("an autoscaled run");
            let d = a.owner[w];
            a.deployments[d].replacements += 1;
        }
    }

    /// Starts or removes deployment `d`'s replicas until its live slots equal its replica count.
    fn reconcile(&mut self, d: usize) {
        let a = self.autoscale.as_ref().expect("an autoscaled run");
        let dep = &a.deployments[d];
        let live = |s: &Slot| matches!(s, Slot::Provisioning { .. } | Slot::Active { .. });
        let mut count = a.slots[dep.slots.clone()]
            .iter()
            .filter(|s| live(s))
            .count() as u32;
        let want = dep.replicas;
        while count < want {
            let Some(w) = self.free_slot(d) else { break };
            self.start_cold(w);
            count += 1;
        }
        while count > want {
            let Some(w) = self.slot_to_remove(d) else {
                break;
            };
            self.remove_replica(w);
            count -= 1;
        }
        self.note_replicas();
    }

    /// Deployment `d`'s lowest slot that is off.
    fn free_slot(&self, d: usize) -> Option<usize> {
        let a = self.autoscale.as_ref()?;
        let range = a.deployments[d].slots.clone();
        range.clone().find(|&w| a.slots[w] == Slot::Off)
    }

    /// Deployment `d`'s slot to remove first, as a ReplicaSet picks the pod to delete: not yet serving
    /// before serving, newer before older (the highest slot among equals).
    fn slot_to_remove(&self, d: usize) -> Option<usize> {
        let a = self.autoscale.as_ref()?;
        let rank = |w: usize| match a.slots[w] {
            Slot::Provisioning { .. } => Some((0, SimTime::MAX)),
            Slot::Active { .. } if !self.gateway.routable(w) => Some((1, SimTime::MAX)),
            Slot::Active { since } => Some((2, since)),
            Slot::Off | Slot::Draining { .. } => None,
        };
        a.deployments[d]
            .slots
            .clone()
            .filter_map(|w| {
                rank(w).map(|(k, since)| (k, std::cmp::Reverse(since), std::cmp::Reverse(w)))
            })
            .min()
            .map(|(_, _, std::cmp::Reverse(w))| w)
    }

    /// Begins a cold start on free slot `w`.
    fn start_cold(&mut self, w: usize) {
        let now = self.now;
        let a = self.autoscale.as_mut().expect("an autoscaled run");
        let generation = a.next_generation;
        a.next_generation += 1;
        a.slots[w] = Slot::Provisioning { generation };
        a.billed_since[w] = Some(now);
        let at = now + a.deployments[a.owner[w]].setup.cold_start.total();
        // A new replica is a new endpoint: the gateway routes to it only after a good health check.
        if self.gateway.reset_to_unready(w) {
            self.router.on_worker_down(w);
        }
        self.schedule(
            at,
            Class::Fault,
            Event::ColdStartDone {
                worker: w,
                generation,
            },
        );
    }

    /// Slot `w`'s cold start `generation` is over: its process is up, cold.
    pub(super) fn on_cold_start_done(&mut self, w: usize, generation: u64) {
        let a = self.autoscale.as_mut().expect("an autoscaled run");
        if a.slots[w] != (Slot::Provisioning { generation }) {
            return; // cancelled by a scale-down
        }
        a.slots[w] = Slot::Active { since: self.now };
        self.settle_worker(w);
        self.workers[w].restart();
        self.router.on_worker_down(w); // an empty cache: the router forgets what it believed it held
        self.truth[w] = Truth::Up;
        let up = self.workers_up();
        self.collector.on_workers_up(self.now, up);
        self.note_serving(w, true);
        self.note_replicas();
    }

    /// Takes replica `w` away: a starting one is cancelled, a serving one drained.
    fn remove_replica(&mut self, w: usize) {
        let a = self.autoscale.as_mut().expect("an autoscaled run");
        match a.slots[w] {
            Slot::Provisioning { .. } => self.slot_off(w),
            Slot::Active { .. } => {
                let epoch = self.workers[w].epoch;
                a.slots[w] = Slot::Draining { epoch };
                let deadline = self.now + a.spec().drain_grace;
                self.gateway.drain(w);
                self.router.on_worker_down(w);
                self.schedule(
                    deadline,
                    Class::Fault,
                    Event::ScaleDownDeadline { worker: w, epoch },
                );
                self.retire_if_drained(w);
            }
            Slot::Off | Slot::Draining { .. } => {}
        }
    }

    /// After a step of `w` (or a drain's start): a draining replica that has finished everything is
    /// stopped.
    pub(super) fn retire_if_drained(&mut self, w: usize) {
        let draining = self
            .autoscale
            .as_ref()
            .is_some_and(|a| matches!(a.slots[w], Slot::Draining { .. }));
        if draining && self.workers[w].outstanding() == 0 {
            self.retire(w);
        }
    }

    /// The drain of `w` (begun at incarnation `epoch`) ran out of time: what is left is cut off.
    pub(super) fn on_scale_down_deadline(&mut self, w: usize, epoch: u64) {
        let a = self.autoscale.as_ref().expect("an autoscaled run");
        if a.slots[w] != (Slot::Draining { epoch }) {
            return; // already stopped
        }
        self.settle_worker(w);
        self.retire(w);
    }

    /// Stops draining replica `w`: requests still on it are lost to the gateway's in-flight policy, its
    /// cache goes with the process (a scale-down, not a failure: nothing is marked lost), its slot is off.
    fn retire(&mut self, w: usize) {
        if !matches!(self.truth[w], Truth::Down(_)) {
            let (left, _) = self.workers[w].crash(false);
            if let Some(tiers) = &mut self.tiers {
                tiers.on_crash(w);
            }
            self.truth[w] = Truth::Down(Symptom::Refused);
            let up = self.workers_up();
            self.collector.on_workers_up(self.now, up);
            for seq in left {
                self.on_lost(seq, w, "cut off by a scale-down");
            }
        }
        self.slot_off(w);
        self.note_replicas();
    }

    /// Slot `w` no longer holds a replica: billing stops.
    fn slot_off(&mut self, w: usize) {
        let now = self.now;
        let a = self.autoscale.as_mut().expect("an autoscaled run");
        let served = matches!(a.slots[w], Slot::Active { .. } | Slot::Draining { .. });
        a.slots[w] = Slot::Off;
        if let Some(since) = a.billed_since[w].take() {
            a.billed_ns[w] += now.since(since).0;
        }
        if served {
            self.note_serving(w, false);
        }
    }

    /// Records the replica counts now: the fleet's, and with several deployments each one's.
    fn note_replicas(&mut self) {
        let Some(a) = &self.autoscale else { return };
        let count = |slots: Range<usize>| {
            let mut c = ReplicaCount::default();
            for w in slots {
                match a.slots[w] {
                    Slot::Off => continue,
                    Slot::Provisioning { .. } => c.starting += 1,
                    Slot::Active { .. } if self.gateway.routable(w) => c.ready += 1,
                    Slot::Active { .. } if self.truth[w] == Truth::Up => c.starting += 1,
                    Slot::Active { .. } | Slot::Draining { .. } => {}
                }
                c.billed += 1;
            }
            c
        };
        let fleet = count(0..a.slots.len());
        self.collector.series.replicas.record(self.now, fleet);
        // With several deployments, each model's counts go to its own log (the collector's, which the
        // time series and the per-model summary both read).
        for (d, (_, log)) in a
            .deployments
            .iter()
            .zip(self.collector.series.replicas_by_model.iter_mut())
        {
            log.record(self.now, count(d.slots.clone()));
        }
    }

    /// In an autoscaled fleet, a request that finds no replica to route to waits at the gateway (as with
    /// Knative's activator) instead of failing; with no replica of its deployment at all, one is
    /// started at once. Returns the request if the fleet is not autoscaled.
    pub(super) fn hold_at_gateway(&mut self, seq: Sequence) -> Option<Sequence> {
        let now = self.now;
        let Some(a) = &mut self.autoscale else {
            return Some(seq);
        };
        let d = a.deployment_of(&seq);
        let dep = &mut a.deployments[d];
        dep.held_ids.insert(seq.request.id);
        dep.held.push_back((now, seq));
        if dep.replicas == 0 {
            dep.scale_ups += 1;
            dep.changes.push(Change {
                at: now,
                from: 0,
                to: 1,
            });
            dep.replicas = 1;
            self.reconcile(d);
        }
        None
    }

    /// After a health check: the requests held for each deployment with a routable replica go to the
    /// router again, in the order they came.
    pub(super) fn release_held(&mut self) {
        self.note_replicas();
        let Some(a) = &mut self.autoscale else { return };
        let mut released = Vec::new();
        for dep in &mut a.deployments {
            if dep.held.is_empty() || !dep.slots.clone().any(|w| self.gateway.routable(w)) {
                continue;
            }
            for (since, seq) in std::mem::take(&mut dep.held) {
                *dep.held_ns.entry(seq.request.id).or_default() += self.now.since(since).0;
                released.push(seq);
            }
        }
        for seq in released {
            self.dispatch(seq);
        }
    }

    /// Requests still held when the run stops fail with `reason`.
    pub(super) fn fail_autoscale_held(&mut self, reason: &'static str) {
        let Some(a) = &mut self.autoscale else { return };
        let held: Vec<Sequence> = a
            .deployments
            .iter_mut()
            .flat_map(|d| std::mem::take(&mut d.held))
            .map(|(_, seq)| seq)
            .collect();
        for seq in held {
            self.finish_seq(
                seq,
                None,
                crate::metrics::record::Outcome::Failed,
                Some(reason),
            );
        }
    }

    /// Whether fault restarts may bring `w` back: always without an autoscaler, and with one only for a
    /// slot still holding its replica (the kubelet restarting the process in place).
    pub(super) fn restart_allowed(&self, w: usize) -> bool {
        self.autoscale
            .as_ref()
            .is_none_or(|a| matches!(a.slots[w], Slot::Active { .. }))
    }

    /// The `autoscaler` block of the summary, for a run that ended at `end`: one deployment's, or with
    /// several the fleet's totals and each model's block under `models`.
    pub(super) fn autoscale_summary(&self, end: SimTime) -> Option<AutoscaleSummary> {
        let a = self.autoscale.as_ref()?;
        let fleet_log = &self.collector.series.replicas;
        let slo = SloAttainment::of(&self.collector.series, self.collector.arrivals_end);
        if a.deployments.len() == 1 {
            let mut one = deployment_summary(&a.deployments[0], fleet_log, end);
            one.slo_attainment = Some(slo);
            return Some(one);
        }
        let models: Vec<AutoscaleSummary> = a
            .deployments
            .iter()
            .zip(&self.collector.series.replicas_by_model)
            .map(|(d, (_, log))| deployment_summary(d, log, end))
            .collect();
        let spec = a.spec();
        let replica_s = fleet_log.billed_seconds(end);
        let (peak, last) = fleet_log.peak_and_last();
        let gpu_hours: f64 = models.iter().map(|m| m.gpu_hours).sum();
        let price = models[0].usd_per_gpu_hour;
        let one_price = models.iter().all(|m| m.usd_per_gpu_hour == price);
        let cost = models
            .iter()
            .map(|m| m.cost_usd)
            .sum::<Option<f64>>()
            .map(|c| round(c, 6));
        let held: Vec<f64> = a
            .deployments
            .iter()
            .flat_map(|d| d.held_ns.values().map(|&ns| ns as f64 / 1e6))
            .collect();
        // The fleet's changes: every deployment's, in time order, as fleet totals.
        let mut changes: Vec<(SimTime, usize, &Change)> = a
            .deployments
            .iter()
            .enumerate()
            .flat_map(|(d, dep)| dep.changes.iter().map(move |c| (c.at, d, c)))
            .collect();
        changes.sort_by_key(|&(at, d, _)| (at, d));
        let mut total: u32 = a.deployments.iter().map(|d| d.setup.initial).sum();
        let changes = changes
            .into_iter()
            .map(|(at, _, c)| {
                let from = total;
                total = total + c.to - c.from;
                ScaleChange {
                    at_s: at.as_secs_f64(),
                    from,
                    to: total,
                }
            })
            .collect();
        // The slowest model's cold start stands for the fleet's (each model's is under `models`).
        let cold_start = models
            .iter()
            .map(|m| m.cold_start)
            .max_by(|x, y| x.total_s.total_cmp(&y.total_s))
            .expect("several deployments");
        Some(AutoscaleSummary {
            model: None,
            metric: spec.metric.as_str().to_string(),
            target: spec.target.map(|t| t.0),
            planner_ttft_ms: slo_ms(spec).map(|t| t.0),
            planner_itl_ms: slo_ms(spec).map(|t| t.1),
            min_replicas: models.iter().map(|m| m.min_replicas).sum(),
            max_replicas: models.iter().map(|m| m.max_replicas).sum(),
            initial_replicas: models.iter().map(|m| m.initial_replicas).sum(),
            cold_start,
            scale_ups: models.iter().map(|m| m.scale_ups).sum(),
            scale_downs: models.iter().map(|m| m.scale_downs).sum(),
            replacements: models.iter().map(|m| m.replacements).sum(),
            replicas_peak: peak,
            replicas_mean: mean_replicas(replica_s, end),
            replicas_final: last,
            replica_hours: round(replica_s / 3600.0, 6),
            gpu_hours: round(gpu_hours, 6),
            usd_per_gpu_hour: if one_price { price } else { None },
            cost_usd: cost,
            cold_start_hits: ColdStartHits {
                requests: models.iter().map(|m| m.cold_start_hits.requests).sum(),
                ..held_summary(&held)
            },
            slo_attainment: Some(slo),
            changes,
            models,
        })
    }

    /// Seconds slot `w` was billed by the end of the run, `end` (all of it without an autoscaler).
    pub(super) fn billed_s(&self, w: usize, end: SimTime) -> f64 {
        let Some(a) = &self.autoscale else {
            return end.as_secs_f64();
        };
        let open = a.billed_since[w].map_or(0, |since| end.since(since).0);
        (a.billed_ns[w] + open) as f64 / 1e9
    }
}

/// The SLO planner's (TTFT, ITL) targets in ms, if the deployment has one.
fn slo_ms(spec: &AutoscalerSpec) -> Option<(f64, f64)> {
    (spec.metric == Metric::Slo).then(|| {
        let (ttft, itl) = spec.planner_targets();
        (ttft.as_secs_f64() * 1e3, itl.as_secs_f64() * 1e3)
    })
}

/// One deployment's block, from its replica log.
fn deployment_summary(d: &Deployment, log: &ReplicaLog, end: SimTime) -> AutoscaleSummary {
    let s = &d.setup;
    let replica_s = log.billed_seconds(end);
    let (peak, last) = log.peak_and_last();
    let gpu_hours = replica_s / 3600.0 * f64::from(s.gpus_per_replica);
    let waits: Vec<f64> = d.held_ns.values().map(|&ns| ns as f64 / 1e6).collect();
    let secs = |x: crate::time::SimDuration| round(x.as_secs_f64(), 6);
    let c = &s.cold_start;
    AutoscaleSummary {
        model: d.model.map(|m| m.as_str().to_string()),
        metric: s.spec.metric.as_str().to_string(),
        target: s.spec.target.map(|t| t.0),
        planner_ttft_ms: slo_ms(&s.spec).map(|t| t.0),
        planner_itl_ms: slo_ms(&s.spec).map(|t| t.1),
        min_replicas: s.spec.min_replicas,
        max_replicas: s.spec.max_replicas.0,
        initial_replicas: s.initial,
        cold_start: ColdStartTerms {
            provision_s: secs(c.provision),
            image_pull_s: secs(c.image_pull),
            weight_load_s: secs(c.weight_load),
            warmup_s: secs(c.warmup),
            total_s: secs(c.total()),
        },
        scale_ups: d.scale_ups,
        scale_downs: d.scale_downs,
        replacements: d.replacements,
        replicas_peak: peak,
        replicas_mean: mean_replicas(replica_s, end),
        replicas_final: last,
        replica_hours: round(replica_s / 3600.0, 6),
        gpu_hours: round(gpu_hours, 6),
        usd_per_gpu_hour: s.usd_per_gpu_hour,
        cost_usd: s.usd_per_gpu_hour.map(|p| round(p * gpu_hours, 6)),
        cold_start_hits: ColdStartHits {
            requests: d.held_ids.len() as u64,
            ..held_summary(&waits)
        },
        slo_attainment: None,
        changes: d
            .changes
            .iter()
            .map(|c| ScaleChange {
                at_s: c.at.as_secs_f64(),
                from: c.from,
                to: c.to,
            })
            .collect(),
        models: Vec::new(),
    }
}

/// Billed replicas time-averaged over the run.
fn mean_replicas(replica_s: f64, end: SimTime) -> f64 {
    if end.0 > 0 {
        round(replica_s / end.as_secs_f64(), 6)
    } else {
        0.0
    }
}

/// Requests held at the gateway and their waits (ms): counted by the waits given.
fn held_summary(waits: &[f64]) -> ColdStartHits {
    ColdStartHits {
        requests: waits.len() as u64,
        wait_ms_mean: if waits.is_empty() {
            0.0
        } else {
            round(waits.iter().sum::<f64>() / waits.len() as f64, 3)
        },
        wait_ms_max: round(waits.iter().copied().fold(0.0, f64::max), 3),
    }
}
