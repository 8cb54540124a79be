//! The engine's fault and gateway handlers: what a planned fault does to the workers, how the gateway
//! learns of it (health checks, errors, timeouts), and what becomes of the requests it hits.
//!
//! Invariant: every request taken off a failed worker either goes back to the gateway (a retry after
//! backoff, or a migration at once) or finishes as failed with its reason — none is dropped.

use super::{Class, Event, Simulation, Truth};
use crate::faults::{FaultKind, Symptom, Targets};
use crate::gateway::{BeliefChange, InFlight};
use crate::metrics::record::Outcome;
use crate::request::RequestId;
use crate::time::SimTime;
use crate::worker::Sequence;

impl Simulation {
    /// Queues the planned faults, late starts and, if there is anything to check, the health-check tick.
    pub(super) fn schedule_faults(&mut self) {
        for i in 0..self.plan.len() {
            let at = self.plan[i].at;
            self.schedule(at, Class::Fault, Event::Fault(i));
        }
        for k in 0..self.starts.len() {
            let (w, at) = self.starts[k];
            self.schedule(at, Class::Fault, Event::Start(w));
        }
        if !self.plan.is_empty() || !self.starts.is_empty() || self.autoscale.is_some() {
            let first = SimTime::ZERO + self.gateway.spec.health_check_interval;
            self.schedule(first, Class::Gateway, Event::HealthCheck);
        }
        self.schedule_autoscale();
    }

    pub(super) fn workers_up(&self) -> u32 {
        self.truth.iter().filter(|t| **t == Truth::Up).count() as u32
    }

    /// An attempt failed at the gateway (`worker`, if it reached one, counts the error): retry after the
    /// backoff, or fail when the retries are used up.
    pub(super) fn gateway_error(
        &mut self,
        seq: Sequence,
        worker: Option<usize>,
        reason: &'static str,
    ) {
        if let Some(w) = worker
            && let Some(change) = self.gateway.on_error(w)
        {
            self.apply_belief(w, change);
        }
        self.retry_or_fail(seq, worker, reason);
    }

    fn retry_or_fail(&mut self, mut seq: Sequence, worker: Option<usize>, reason: &'static str) {
        if seq.retries < self.gateway.spec.max_retries {
            seq.retries += 1;
            let backoff = self.gateway.spec.backoff(seq.retries);
            self.schedule(
                self.now + backoff,
                Class::Arrival,
                Event::Retry(Box::new(seq)),
            );
        } else {
            self.finish_seq(seq, worker, Outcome::Failed, Some(reason));
        }
    }

    /// A request in flight on `w` was lost with it (its stream broke): fail it, retry it from scratch,
    /// or migrate it, as the gateway is configured.
    pub(super) fn on_lost(&mut self, mut seq: Sequence, w: usize, reason: &'static str) {
        self.router.on_request_failed(self.now, seq.request.id, w);
        let (limit, max_len) = (
            self.gateway.spec.migration_limit,
            self.gateway.spec.migration_max_seq_len,
        );
        match self.gateway.spec.in_flight {
            InFlight::Fail => self.finish_seq(seq, Some(w), Outcome::Failed, Some(reason)),
            InFlight::Retry => {
                seq.restart_from_scratch();
                self.retry_or_fail(seq, Some(w), reason);
            }
            InFlight::Migrate => {
                if seq.migrations >= limit {
                    self.finish_seq(
                        seq,
                        Some(w),
                        Outcome::Failed,
                        Some("migration limit reached"),
                    );
                } else if max_len.is_some_and(|m| seq.num_tokens() > m.0) {
                    self.finish_seq(seq, Some(w), Outcome::Failed, Some("too long to migrate"));
                } else {
                    seq.migrate();
                    seq.migrations += 1;
                    self.dispatch(seq);
                }
            }
        }
    }

    pub(super) fn on_connect_failed(&mut self, w: usize, seq: Sequence) {
        self.router.on_request_failed(self.now, seq.request.id, w);
        let reason = match self.truth[w] {
            Truth::Down(Symptom::Unreachable) => "connection timed out",
            _ => "connection refused",
        };
        self.gateway_error(seq, Some(w), reason);
    }

    pub(super) fn on_timeout(&mut self, w: usize, epoch: u64, id: RequestId) {
        if self.workers[w].epoch != epoch || self.truth[w] != Truth::Hung {
            return; // the worker was restarted: the request was handled then
        }
        let Some(mut seq) = self.workers[w].remove(id) else {
            return;
        };
        self.router.on_request_failed(self.now, id, w);
        seq.timeouts += 1;
        seq.restart_from_scratch();
        self.gateway_error(seq, Some(w), "timed out");
    }

    /// Passes a change of the gateway's belief on to the router.
    pub(super) fn apply_belief(&mut self, w: usize, change: BeliefChange) {
        if change == BeliefChange::MarkedDown {
            self.router.on_worker_down(w);
        }
    }

    pub(super) fn on_health_check(&mut self) {
        for w in 0..self.workers.len() {
            let ok = self.truth[w] == Truth::Up;
            if let Some(change) = self.gateway.on_health_check(w, ok) {
                self.apply_belief(w, change);
            }
        }
        let next = self.now + self.gateway.spec.health_check_interval;
        self.schedule(next, Class::Gateway, Event::HealthCheck);
        if self.autoscale.is_some() {
            self.release_held();
        }
    }

    /// The workers planned fault `i` hits now.
    fn resolve_targets(&self, i: usize) -> Vec<usize> {
        match &self.plan[i].targets {
            Targets::Workers(ws) => ws.clone(),
            Targets::MostSessions => {
                let up = (0..self.workers.len()).filter(|&w| self.truth[w] == Truth::Up);
                self.gateway
                    .most_sessions(self.now, up)
                    .into_iter()
                    .collect()
            }
            Targets::Store => Vec::new(),
        }
    }

    pub(super) fn on_fault(&mut self, i: usize) {
        let f = self.plan[i].clone();
        let mut targets = self.resolve_targets(i);
        for &w in &targets {
            self.settle_worker(w);
        }
        if f.kind.takes_down() {
            // A worker that is already down cannot fail again (a random failure during a restart); but
            // a fault that takes it out for good still does: it does not come back from this outage.
            if f.restart_after.is_none() {
                for &w in &targets {
                    if self.truth[w] != Truth::Up {
                        self.gone[w] = true;
                    }
                }
            }
            targets.retain(|&w| self.truth[w] == Truth::Up);
        }
        let label = match &f.targets {
            Targets::MostSessions => match targets.first() {
                Some(w) => format!("{} w{w} (most sessions)", f.kind.as_str()),
                None => format!("{} (no worker up)", f.kind.as_str()),
            },
            _ => f.label.clone(),
        };
        self.fired[i] = true;
        let on_targets = targets
            .iter()
            .flat_map(|&w| self.workers[w].request_ids())
            .collect();
        (self.collector).on_fault(f.at, label, f.kind.as_str(), on_targets);
        match f.kind {
            FaultKind::Crash => {
                for &w in &targets {
                    self.crash_worker(w, f.symptom, f.kv_survives_restart, "worker crashed");
                    self.schedule_restart(w, i, f.restart_after);
                }
            }
            FaultKind::Hang => {
                for &w in &targets {
                    self.truth[w] = Truth::Hung;
                    self.workers[w].stall();
                    let epoch = self.workers[w].epoch;
                    let deadline = self.now + self.gateway.spec.request_timeout;
                    for id in self.workers[w].request_ids() {
                        self.schedule(
                            deadline,
                            Class::Gateway,
                            Event::Timeout {
                                worker: w,
                                epoch,
                                request: id,
                            },
                        );
                    }
                    self.schedule_restart(w, i, f.restart_after);
                }
                let up = self.workers_up();
                self.collector.on_workers_up(self.now, up);
            }
            FaultKind::Drain => {
                for &w in &targets {
                    self.gateway.drain(w);
                    self.router.on_worker_down(w);
                    let epoch = self.workers[w].epoch;
                    self.schedule(
                        self.now + f.grace,
                        Class::Fault,
                        Event::DrainDeadline {
                            worker: w,
                            epoch,
                            fault: i,
                        },
                    );
                }
            }
            FaultKind::Slowdown => {
                for &w in &targets {
                    self.workers[w].slowdown = f.factor;
                }
            }
            FaultKind::MemoryPressure => {
                for &w in &targets {
                    let blocks =
                        (f64::from(self.workers[w].pool.total()) * f.fraction).ceil() as u32;
                    self.workers[w].set_kv_reserve(blocks);
                    self.kick(w);
                }
            }
            FaultKind::StoreFailure => {
                if let Some(tiers) = &mut self.tiers {
                    tiers.shared_available = false;
                    if f.data_loss {
                        tiers.clear_shared();
                    }
                }
            }
        }
        if let Some(d) = f.duration {
            self.schedule(self.now + d, Class::Fault, Event::FaultEnds(i));
        }
        self.hit[i] = targets;
        // A stochastic failure: its stream's next one is drawn now, into the same slot.
        if let Some(k) = self.plan_streams[i]
            && let Some(next) = self.fault_streams[k].after(&f)
        {
            let at = next.at;
            self.plan[i] = next;
            self.schedule(at, Class::Fault, Event::Fault(i));
        }
    }

    /// Brings `w` back after `after` (if it comes back at all), as fault `fault` says.
    fn schedule_restart(
        &mut self,
        w: usize,
        fault: usize,
        after: Option<crate::time::SimDuration>,
    ) {
        if let Some(r) = after {
            self.schedule(
                self.now + r,
                Class::Fault,
                Event::Restart { worker: w, fault },
            );
        }
    }

    pub(super) fn on_fault_ends(&mut self, i: usize) {
        let targets = self.hit[i].clone();
        for &w in &targets {
            self.settle_worker(w);
        }
        match self.plan[i].kind {
            FaultKind::Slowdown => {
                for w in targets {
                    self.workers[w].slowdown = 1.0;
                }
            }
            FaultKind::MemoryPressure => {
                for w in targets {
                    self.workers[w].set_kv_reserve(0);
                    self.kick(w);
                }
            }
            FaultKind::StoreFailure => {
                if let Some(tiers) = &mut self.tiers {
                    tiers.shared_available = true;
                }
            }
            FaultKind::Crash | FaultKind::Hang | FaultKind::Drain => {}
        }
    }

    /// Starts a step on `w` if it is up and idle (after its capacity or speed changed).
    fn kick(&mut self, w: usize) {
        if self.truth[w] == Truth::Up && !self.workers[w].in_step() {
            self.start_step(w);
        }
    }

    /// Worker `w` dies: its requests are lost (the gateway sees their streams break), its KV cache is
    /// wiped unless it survives, and new connections fail as `symptom` says.
    pub(super) fn crash_worker(
        &mut self,
        w: usize,
        symptom: Symptom,
        keep_kv: bool,
        reason: &'static str,
    ) {
        let (lost, hashes) = self.workers[w].crash(keep_kv);
        self.truth[w] = Truth::Down(symptom);
        self.cut_swap_short(w, false);
        if let Some(tiers) = &mut self.tiers
            && !keep_kv
        {
            tiers.on_crash(w);
        }
        self.lost.extend(hashes);
        if self.router.is_oracle() && !keep_kv {
            self.router.on_worker_down(w);
        }
        let up = self.workers_up();
        self.collector.on_workers_up(self.now, up);
        for _ in &lost {
            if let Some(change) = self.gateway.on_error(w) {
                self.apply_belief(w, change);
            }
        }
        for seq in lost {
            self.on_lost(seq, w, reason);
        }
    }

    pub(super) fn on_drain_deadline(&mut self, w: usize, epoch: u64, fault: usize) {
        self.settle_worker(w);
        if self.workers[w].epoch != epoch || self.truth[w] != Truth::Up {
            return; // it failed meanwhile
        }
        // What has not finished in the grace period is cut off.
        self.crash_worker(w, Symptom::Refused, false, "cut off by a drain");
        if let Some(r) = self.plan[fault].restart_after {
            self.schedule(
                self.now + r,
                Class::Fault,
                Event::Restart { worker: w, fault },
            );
        }
    }

    pub(super) fn on_restart(&mut self, w: usize, fault: usize) {
        if !self.restart_allowed(w) {
            return; // the autoscaler released or replaced this replica: its slot is not the fault's
        }
        if self.gone[w] {
            if self.truth[w] == Truth::Hung {
                self.crash_worker(w, Symptom::Refused, false, "worker restarted");
            }
            return; // a permanent fault hit it during this outage
        }
        match self.truth[w] {
            Truth::Hung => {
                // The hung process is killed: what is still on it is lost.
                self.crash_worker(w, Symptom::Refused, false, "worker restarted");
            }
            Truth::Up => return,
            Truth::Down(_) => {}
        }
        self.truth[w] = Truth::Up;
        self.workers[w].restart();
        self.gateway.end_drain_if_draining(w);
        if !self.plan[fault].kv_survives_restart {
            // The new incarnation starts empty: the router forgets what it believed it held.
            self.router.on_worker_down(w);
        }
        let up = self.workers_up();
        self.collector.on_workers_up(self.now, up);
    }

    pub(super) fn on_start(&mut self, w: usize) {
        if self.gone[w] {
            return; // taken out for good before it started
        }
        self.truth[w] = Truth::Up;
        let up = self.workers_up();
        self.collector.on_workers_up(self.now, up);
    }

    /// Requests the gateway still holds for a model swap when nothing more can happen: they fail with
    /// `reason`, counted, instead of vanishing.
    pub(super) fn fail_held(&mut self, reason: &'static str) {
        let held = match self.placement.as_deref_mut() {
            Some(p) => p.take_all_held(),
            None => return,
        };
        for seq in held {
            self.finish_seq(seq, None, Outcome::Failed, Some(reason));
        }
    }

    /// Requests still on a worker when nothing more can happen (a worker whose memory was taken away
    /// for good, or the run's simulated-time budget spent): they fail with `reason`, counted, instead
    /// of vanishing.
    pub(super) fn fail_stranded(&mut self, reason: &'static str) {
        for w in 0..self.workers.len() {
            let (stranded, _) = if self.workers[w].outstanding() > 0 {
                self.workers[w].crash(true)
            } else {
                continue;
            };
            for seq in stranded {
                self.router.on_request_failed(self.now, seq.request.id, w);
                self.finish_seq(seq, Some(w), Outcome::Failed, Some(reason));
            }
        }
    }
}
