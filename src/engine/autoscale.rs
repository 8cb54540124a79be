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
//! the HPA for the replica count, then reconciles: slots are started (lowest free slot first) or removed
//! (starting ones first, newest first; then the most recently ready) until the live slots (`Provisioning`
//! and `Active`) equal the count. A failed replica thus comes back as a cold one: a replacement.
//!
//! Invariants: the live slots equal the HPA's replica count after every evaluation; a slot is billed
//! exactly while it is not `Off`; a fault's restart never brings back a slot the autoscaler released or
//! re-provisioned (it applies only to an `Active` slot, the kubelet restarting the process in place); and
//! a request held at the gateway is dispatched again as soon as a replica becomes routable, so none waits
//! while one could serve it.

use std::collections::VecDeque;

use super::queue::Class;
use super::{Event, Simulation, Truth};
use crate::autoscale::{AutoscalerSpec, Change, ColdStart, Hpa, Metric, Observation};
use crate::faults::Symptom;
use crate::metrics::replicas::{
    AutoscaleSummary, ColdStartHits, ColdStartTerms, ReplicaCount, ScaleChange, SloAttainment,
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

/// What an autoscaled run needs besides the autoscaler's configuration.
#[derive(Clone, Debug)]
pub struct AutoscaleSetup {
    pub spec: AutoscalerSpec,
    /// Replicas up at t = 0 (slots `0..initial`).
    pub initial: u32,
    pub cold_start: ColdStart,
    /// GPUs per replica (tensor parallelism), for GPU-hours.
    pub gpus_per_replica: u32,
    /// US dollars per GPU-hour, if the GPU has a price.
    pub usd_per_gpu_hour: Option<f64>,
}

/// The autoscaler's state during a run.
#[derive(Debug)]
pub(super) struct Autoscale {
    setup: AutoscaleSetup,
    hpa: Hpa,
    slots: Vec<Slot>,
    /// The replica count the HPA asks for (the deployment's `spec.replicas`).
    replicas: u32,
    next_generation: u64,
    /// Requests waiting at the gateway for a ready replica, with when each was held.
    held: VecDeque<(SimTime, Sequence)>,
    /// Every request ever held (counted once), and their total and longest wait.
    held_ids: rustc_hash::FxHashSet<RequestId>,
    /// Per request held: nanoseconds held so far (over several holds).
    held_ns: rustc_hash::FxHashMap<RequestId, u64>,
    arrivals_at_last_tick: u64,
    idle_since: Option<SimTime>,
    scale_ups: u64,
    scale_downs: u64,
    replacements: u64,
    changes: Vec<Change>,
    /// Per slot: billed nanoseconds so far, and since when it is billed (if it is).
    billed_ns: Vec<u64>,
    billed_since: Vec<Option<SimTime>>,
}

impl Simulation {
    /// Makes the fleet autoscaled: slots from `setup.initial` on start `Off`. Call after
    /// [`Simulation::set_faults`] (which sets who is up at t = 0).
    pub fn set_autoscaler(&mut self, setup: AutoscaleSetup) {
        let n = self.workers.len();
        let initial = (setup.initial as usize).min(n);
        let mut started = vec![false; n];
        started[..initial].fill(true);
        let gateway = self.gateway.spec.clone();
        self.gateway = crate::gateway::Gateway::new(gateway, &started);
        for (w, up) in started.iter().enumerate() {
            self.truth[w] = if *up {
                Truth::Up
            } else {
                Truth::Down(Symptom::Refused)
            };
        }
        let slots = (0..n)
            .map(|w| {
                if w < initial {
                    Slot::Active {
                        since: SimTime::ZERO,
                    }
                } else {
                    Slot::Off
                }
            })
            .collect();
        let billed_since = (0..n)
            .map(|w| (w < initial).then_some(SimTime::ZERO))
            .collect();
        self.autoscale = Some(Box::new(Autoscale {
            hpa: Hpa::new(setup.spec.clone()).seeded(initial as u32, SimTime::ZERO),
            replicas: initial as u32,
            setup,
            slots,
            next_generation: 0,
            held: VecDeque::new(),
            held_ids: Default::default(),
            held_ns: Default::default(),
            arrivals_at_last_tick: 0,
            idle_since: None,
            scale_ups: 0,
            scale_downs: 0,
            replacements: 0,
            changes: Vec::new(),
            billed_ns: vec![0; n],
            billed_since,
        }));
        self.collector.on_workers_up(SimTime::ZERO, initial as u32);
        self.note_replicas();
    }

    /// Queues the first evaluation.
    pub(super) fn schedule_autoscale(&mut self) {
        if let Some(a) = &self.autoscale {
            let at = SimTime::ZERO + a.setup.spec.interval;
            self.schedule(at, Class::Gateway, Event::Autoscale);
        }
    }

    /// One evaluation: release failed replicas, decide, reconcile, and queue the next.
    pub(super) fn on_autoscale_tick(&mut self) {
        self.release_failed();
        let o = self.observe();
        let a = self.autoscale.as_mut().expect("an autoscaled run");
        let desired = a.hpa.decide(self.now, &o);
        if desired != a.replicas {
            if desired > a.replicas {
                a.scale_ups += 1;
            } else {
                a.scale_downs += 1;
            }
            a.changes.push(Change {
                at: self.now,
                from: a.replicas,
                to: desired,
            });
            a.replicas = desired;
        }
        let next = self.now + a.setup.spec.interval;
        self.reconcile();
        self.schedule(next, Class::Gateway, Event::Autoscale);
    }

    /// What the HPA sees now; settles every live worker first, so that the fast path is observed as
    /// stepping one by one would leave it.
    fn observe(&mut self) -> Observation {
        let n = self.workers.len();
        for w in 0..n {
            if self.truth[w] == Truth::Up {
                self.settle_worker(w);
            }
        }
        let arrived = self.collector.arrived;
        let idle = arrived == self.collector.finished();
        let a = self.autoscale.as_mut().expect("an autoscaled run");
        let new_arrivals = arrived - a.arrivals_at_last_tick;
        a.arrivals_at_last_tick = arrived;
        a.idle_since = if idle && new_arrivals == 0 {
            a.idle_since.or(Some(self.now))
        } else {
            None
        };
        let held = a.held.len() as u64;
        let metric = a.setup.spec.metric;
        let interval_s = a.setup.spec.interval.as_secs_f64();
        let (mut ready, mut starting, mut total) = (0u32, 0u32, 0.0f64);
        for w in 0..n {
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
                        Metric::Rps => 0.0,
                    };
                }
                Slot::Active { .. } => starting += 1,
                Slot::Off | Slot::Draining { .. } => {}
            }
        }
        match metric {
            Metric::QueueDepth | Metric::Concurrency => total += held as f64,
            Metric::Rps => total = new_arrivals as f64 / interval_s,
            Metric::Running | Metric::KvUtilization => {}
        }
        Observation {
            current: a.replicas,
            ready,
            starting,
            total,
            held,
            idle_since: a.idle_since,
        }
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
            self.autoscale
                .as_mut()
                .expect("an autoscaled run")
                .replacements += 1;
        }
    }

    /// Starts or removes replicas until the live slots equal the replica count.
    fn reconcile(&mut self) {
        let a = self.autoscale.as_ref().expect("an autoscaled run");
        let live = |s: &Slot| matches!(s, Slot::Provisioning { .. } | Slot::Active { .. });
        let mut count = a.slots.iter().filter(|s| live(s)).count() as u32;
        let want = a.replicas;
        while count < want {
            let Some(w) = self.free_slot() else { break };
            self.start_cold(w);
            count += 1;
        }
        while count > want {
            let Some(w) = self.slot_to_remove() else {
                break;
            };
            self.remove_replica(w);
            count -= 1;
        }
        self.note_replicas();
    }

    /// The lowest slot that is off.
    fn free_slot(&self) -> Option<usize> {
        let a = self.autoscale.as_ref()?;
        a.slots.iter().position(|s| *s == Slot::Off)
    }

    /// The slot to remove first, as a ReplicaSet picks the pod to delete: not yet serving before serving,
    /// newer before older (the highest slot among equals).
    fn slot_to_remove(&self) -> Option<usize> {
        let a = self.autoscale.as_ref()?;
        let rank = |w: usize| match a.slots[w] {
            Slot::Provisioning { .. } => Some((0, SimTime::MAX)),
            Slot::Active { .. } if !self.gateway.routable(w) => Some((1, SimTime::MAX)),
            Slot::Active { since } => Some((2, since)),
            Slot::Off | Slot::Draining { .. } => None,
        };
        (0..a.slots.len())
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
        let at = now + a.setup.cold_start.total();
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
                let deadline = self.now + a.setup.spec.drain_grace;
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
        a.slots[w] = Slot::Off;
        if let Some(since) = a.billed_since[w].take() {
            a.billed_ns[w] += now.since(since).0;
        }
    }

    /// Records the replica counts now.
    fn note_replicas(&mut self) {
        let Some(a) = &self.autoscale else { return };
        let mut c = ReplicaCount::default();
        for (w, s) in a.slots.iter().enumerate() {
            match s {
                Slot::Off => continue,
                Slot::Provisioning { .. } => c.starting += 1,
                Slot::Active { .. } if self.gateway.routable(w) => c.ready += 1,
                Slot::Active { .. } if self.truth[w] == Truth::Up => c.starting += 1,
                Slot::Active { .. } | Slot::Draining { .. } => {}
            }
            c.billed += 1;
        }
        self.collector.series.replicas.record(self.now, c);
    }

    /// In an autoscaled fleet, a request that finds no replica to route to waits at the gateway (as with
    /// Knative's activator) instead of failing; with no replica at all, one is started at once.
    /// Returns the request if the fleet is not autoscaled.
    pub(super) fn hold_at_gateway(&mut self, seq: Sequence) -> Option<Sequence> {
        let now = self.now;
        let Some(a) = &mut self.autoscale else {
            return Some(seq);
        };
        a.held_ids.insert(seq.request.id);
        a.held.push_back((now, seq));
        if a.replicas == 0 {
            a.scale_ups += 1;
            a.changes.push(Change {
                at: now,
                from: 0,
                to: 1,
            });
            a.replicas = 1;
            self.reconcile();
        }
        None
    }

    /// After a health check: if a replica is routable, the held requests go to the router again, in the
    /// order they came.
    pub(super) fn release_held(&mut self) {
        let any = (0..self.workers.len()).any(|w| self.gateway.routable(w));
        self.note_replicas();
        if !any {
            return;
        }
        let Some(a) = &mut self.autoscale else { return };
        let held = std::mem::take(&mut a.held);
        for (since, seq) in held {
            let a = self.autoscale.as_mut().expect("an autoscaled run");
            *a.held_ns.entry(seq.request.id).or_default() += self.now.since(since).0;
            self.dispatch(seq);
        }
    }

    /// Requests still held when the run stops fail with `reason`.
    pub(super) fn fail_autoscale_held(&mut self, reason: &'static str) {
        let Some(a) = &mut self.autoscale else { return };
        let held = std::mem::take(&mut a.held);
        for (_, seq) in held {
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

    /// The `autoscaler` block of the summary, for a run that ended at `end`.
    pub(super) fn autoscale_summary(&self, end: SimTime) -> Option<AutoscaleSummary> {
        let a = self.autoscale.as_ref()?;
        let s = &a.setup;
        let log = &self.collector.series.replicas;
        let replica_s = log.billed_seconds(end);
        let (peak, last) = log.peak_and_last();
        let gpu_hours = replica_s / 3600.0 * f64::from(s.gpus_per_replica);
        let waits: Vec<f64> = a.held_ns.values().map(|&ns| ns as f64 / 1e6).collect();
        let secs = |d: crate::time::SimDuration| round(d.as_secs_f64(), 6);
        let c = &s.cold_start;
        Some(AutoscaleSummary {
            metric: s.spec.metric.as_str().to_string(),
            target: s.spec.target.0,
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
            scale_ups: a.scale_ups,
            scale_downs: a.scale_downs,
            replacements: a.replacements,
            replicas_peak: peak,
            replicas_mean: if end.0 > 0 {
                round(replica_s / end.as_secs_f64(), 6)
            } else {
                0.0
            },
            replicas_final: last,
            replica_hours: round(replica_s / 3600.0, 6),
            gpu_hours: round(gpu_hours, 6),
            usd_per_gpu_hour: s.usd_per_gpu_hour,
            cost_usd: s.usd_per_gpu_hour.map(|p| round(p * gpu_hours, 6)),
            cold_start_hits: ColdStartHits {
                requests: a.held_ids.len() as u64,
                wait_ms_mean: if waits.is_empty() {
                    0.0
                } else {
                    round(waits.iter().sum::<f64>() / waits.len() as f64, 3)
                },
                wait_ms_max: round(waits.iter().copied().fold(0.0, f64::max), 3),
            },
            slo_attainment: SloAttainment::of(&self.collector.series, self.collector.arrivals_end),
            changes: a
                .changes
                .iter()
                .map(|c| ScaleChange {
                    at_s: c.at.as_secs_f64(),
                    from: c.from,
                    to: c.to,
                })
                .collect(),
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
