//! The decode fast path: a worker advances through a run of identical decode steps with one event.
//!
//! When a worker starts a steady step (`worker/steady.rs`: every running sequence decodes, nothing can
//! be admitted), the steps after it stay the same batch, one token further on, until a sequence
//! completes. Those *pure* steps change nothing that anything outside the worker reads between two
//! events, so instead of one `StepDone` per step, the engine computes the run's step ends up front and
//! schedules only the last one; the worker's sequences are brought forward lazily, in bulk.
//!
//! Runs **within blocks** leave the KV pool as it is. Runs **across blocks** fill and allocate blocks
//! on the way; they are allowed only when nothing reads a worker's pool between events except the
//! engine's own look at other workers' caches (which catches those workers up first,
//! [`Simulation::catch_up_others`]) and the KV-utilisation record (which gets each allocation at its
//! step's start): no router cache events, no policy reading KV use, no tiers, no disaggregation, no
//! replication ([`Simulation::decide_runs_across_blocks`]).
//!
//! Invariant: **anything that touches a worker first calls [`Simulation::settle_worker`]** (an arrival
//! or a delivery routed to it, a fault or a fault's end aimed at it, a drain deadline; and, when they
//! land, a KV load or transfer completing on it). Settling applies the pure steps that have ended by
//! now, makes the step in flight the worker's real step, and reschedules its end; the run's far end is
//! superseded. A run's own last end applies the rest of the run ([`Simulation::complete_steady_run`])
//! before the step is finished as usual. So the worker is observed in exactly the state stepping one by
//! one would have it in, and a run produces the same bytes as the step-by-step path
//! ([`Simulation::step_by_step`]), including the `events` count: each pure step counts as the
//! `StepDone` it replaces.
//!
//! Ties: step ends are ranked by worker in the event queue, and a settle or catch-up at an instant
//! where a step of the run ends treats that step as ended only if the event being handled comes after
//! step ends at equal times (`Class::Gateway`), as it would in the queue.

use super::queue::Class;
use super::{Event, Simulation};
use crate::time::{SimDuration, SimTime};

/// A worker's run of pure steps in flight.
#[derive(Debug, Default)]
pub(super) struct SteadyRun {
    /// The end of each step of the run: `ends[0]` ends the step the worker really started, `ends[m]`
    /// the `m`-th pure step after it. Empty when no run is in flight.
    ends: Vec<SimTime>,
    /// `durations[m - 1]`: the duration of the `m`-th pure step.
    durations: Vec<SimDuration>,
    /// Pure steps already applied (by catch-ups): the first `applied` of `durations`.
    applied: usize,
    /// The stamp of the run's scheduled end.
    stamp: u64,
}

impl Simulation {
    /// Turns stepping one by one on (`true`) or off (the default: the decode fast path). Both give the
    /// same results to the byte; stepping one by one costs one event per step.
    pub fn step_by_step(&mut self, on: bool) {
        self.fast_path = !on;
    }

    /// Decides, once before the run, whether runs may cross block boundaries (module docs): only when
    /// between two events nothing but the engine's catch-ups and the KV-utilisation record reads a
    /// worker's pool.
    pub(super) fn decide_runs_across_blocks(&mut self) {
        self.across_blocks = self.fast_path
            && !self.check_every_step
            && !self.router.wants_kv_events()
            && !self.router.reads_kv_usage()
            && self.tiers.is_none()
            && self.disagg.is_none()
            && self.replication.is_none()
            && self
                .workers
                .iter()
                .all(|w| !w.pool.records_events() && !w.pool.records_evictions());
    }

    /// Called when worker `w` has just started a step ending at `end`: if the step is steady, plans the
    /// run of pure steps after it and returns the run's last end; otherwise returns `end`.
    pub(super) fn plan_steady_run(&mut self, w: usize, end: SimTime) -> SimTime {
        let worker = &self.workers[w];
        // Engines that share a GPU take turns step by step (`colocation.rs`): no runs of steps.
        if !self.fast_path
            || self.check_every_step
            || self.gpus.as_ref().is_some_and(|g| g.shares(w))
        {
            return end;
        }
        let k = worker.steady_steps_after(self.across_blocks);
        if k == 0 {
            return end;
        }
        let run = &mut self.runs[w];
        debug_assert!(run.ends.is_empty(), "worker {w} started a run inside a run");
        run.ends.clear();
        run.durations.clear();
        run.applied = 0;
        run.ends.push(end);
        worker.steady_step_times(k, &mut run.durations);
        self.fast_counts.planned_runs += 1;
        self.fast_counts.planned_steps += k as u64;
        let mut t = end;
        for &d in &run.durations {
            t += d;
            run.ends.push(t);
        }
        self.pending[w] = end;
        t
    }

    /// Schedules the end of `w`'s step (or run) at `at`.
    pub(super) fn schedule_step_end(&mut self, w: usize, at: SimTime) {
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        self.runs[w].stamp = stamp;
        let epoch = self.workers[w].epoch;
        self.schedule(
            at,
            Class::StepDone,
            Event::StepDone {
                worker: w,
                epoch,
                stamp,
            },
        );
    }

    /// Whether a step of a run ending at `end` has ended by now, for the event being handled.
    fn has_ended(&self, end: SimTime) -> bool {
        end < self.now || (end == self.now && self.class_now > Class::StepDone)
    }

    /// Of `w`'s run in flight, the index in `ends` of the step in flight now: the pure steps before it
    /// have ended.
    fn step_in_flight(&self, w: usize) -> usize {
        let run = &self.runs[w];
        let last = run.ends.len() - 1;
        run.ends[run.applied..]
            .iter()
            .position(|&e| !self.has_ended(e))
            .map_or(last, |i| run.applied + i)
    }

    /// Applies `w`'s pure steps up to the `upto`-th (those not applied yet), and hands the KV
    /// utilisation after each step start that allocated to the record, at that start.
    fn apply_pure_steps(&mut self, w: usize, upto: usize) {
        let run = &mut self.runs[w];
        let from = run.applied;
        if upto <= from {
            return;
        }
        let mut allocated = std::mem::take(&mut self.allocated);
        allocated.clear();
        self.workers[w].advance_steady(&run.durations[from..upto], &mut allocated);
        // The step left in flight, the `upto`-th pure one, began as the one before it ended.
        self.workers[w].step_began_at(run.ends[upto - 1]);
        run.applied = upto;
        let total = self.workers[w].pool.total();
        for &(m, used) in &allocated {
            let at = run.ends[from + m as usize - 1];
            self.collector.series.on_kv(w, at, used, total);
        }
        self.allocated = allocated;
        self.events += (upto - from) as u64;
        self.fast_counts.bulk_steps += (upto - from) as u64;
        let run = &self.runs[w];
        self.pending[w] = if upto < run.durations.len() {
            run.ends[upto]
        } else {
            SimTime::MAX
        };
    }

    /// Brings worker `w` to the present before something touches it: applies the pure steps of its run
    /// that have ended, makes the step in flight its real step and reschedules that step's end. A no-op
    /// when `w` has no run in flight. Every event that touches a worker calls this first (module docs).
    pub(super) fn settle_worker(&mut self, w: usize) {
        if self.runs[w].ends.is_empty() {
            return;
        }
        let in_flight = self.step_in_flight(w);
        self.apply_pure_steps(w, in_flight);
        self.end_run(w, in_flight);
    }

    /// Ends `w`'s run with its `in_flight`-th step as the worker's real step in flight, rescheduling
    /// that step's end if it is not the run's last.
    fn end_run(&mut self, w: usize, in_flight: usize) {
        let run = &mut self.runs[w];
        let last = run.ends.len() - 1;
        let end = run.ends[in_flight];
        let stamp = run.stamp;
        run.ends.clear();
        run.applied = 0;
        self.pending[w] = SimTime::MAX;
        if in_flight < last {
            self.superseded.insert(stamp);
            self.foreground -= 1;
            self.schedule_step_end(w, end);
        }
    }

    /// At the scheduled end of `w`'s run: applies the pure steps not yet applied, so that the step
    /// ending now is the worker's real step in flight.
    pub(super) fn complete_steady_run(&mut self, w: usize) {
        if self.runs[w].ends.is_empty() {
            return;
        }
        let last = self.runs[w].ends.len() - 1;
        self.apply_pure_steps(w, last);
        self.end_run(w, last);
    }

    /// Before the engine looks at the caches of workers other than `w`: applies every other worker's
    /// pure steps that have ended (runs across blocks change the pool as they go), keeping each run in
    /// flight. A no-op unless runs may cross blocks.
    pub(super) fn catch_up_others(&mut self, w: usize) {
        if !self.across_blocks {
            return;
        }
        debug_assert!(
            self.class_now != Class::StepDone,
            "a step end looked at other workers' caches (ties among step ends are ranked by worker)"
        );
        for v in 0..self.pending.len() {
            if v != w && self.has_ended(self.pending[v]) {
                let upto = self.step_in_flight(v);
                self.apply_pure_steps(v, upto);
            }
        }
    }
}
