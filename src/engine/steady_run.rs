//! The decode fast path: a worker advances through a run of identical decode steps with one event.
//!
//! When a worker starts a steady step (`worker/steady.rs`: every running sequence decodes, nothing can
//! be admitted), the steps after it stay the same batch, one token further on, until a sequence
//! completes or fills its last KV block. Those *pure* steps change nothing that anything outside the
//! worker can see: the router's snapshot, the pool's cached content and every metric stay as they were.
//! So instead of one `StepDone` per step, the engine computes the run's step ends up front and schedules
//! only the last one; the worker's sequences are brought forward lazily, in bulk.
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
//! Ties: step ends are ranked by worker in the event queue, and a settle at an instant where a step of
//! the run ends treats that step as ended only if the event being handled comes after step ends at
//! equal times (`Class::Gateway`), as it would in the queue.

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
    /// The stamp of the run's scheduled end.
    stamp: u64,
}

impl Simulation {
    /// Turns stepping one by one on (`true`) or off (the default: the decode fast path). Both give the
    /// same results to the byte; stepping one by one costs one event per step.
    pub fn step_by_step(&mut self, on: bool) {
        self.fast_path = !on;
    }

    /// Called when worker `w` has just started a step ending at `end`: if the step is steady, plans the
    /// run of pure steps after it and returns the run's last end; otherwise returns `end`.
    pub(super) fn plan_steady_run(&mut self, w: usize, end: SimTime) -> SimTime {
        let worker = &self.workers[w];
        if !self.fast_path || self.check_every_step {
            return end;
        }
        let k = worker.steady_steps_after();
        if k == 0 {
            return end;
        }
        let run = &mut self.runs[w];
        debug_assert!(run.ends.is_empty(), "worker {w} started a run inside a run");
        run.ends.clear();
        run.durations.clear();
        run.ends.push(end);
        let mut t = end;
        for m in 1..=k {
            let d = worker.steady_step_time(m);
            t += d;
            run.durations.push(d);
            run.ends.push(t);
        }
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

    /// Brings worker `w` to the present before something touches it: applies the pure steps of its run
    /// that have ended, makes the step in flight its real step and reschedules that step's end. A no-op
    /// when `w` has no run in flight. Every event that touches a worker calls this first (module docs).
    pub(super) fn settle_worker(&mut self, w: usize) {
        let run = &mut self.runs[w];
        if run.ends.is_empty() {
            return;
        }
        let now = self.now;
        let after_step_ends = self.class_now > Class::StepDone;
        let last = run.ends.len() - 1;
        let in_flight = run
            .ends
            .iter()
            .position(|&e| e > now || (e == now && !after_step_ends))
            .unwrap_or(last);
        self.workers[w].advance_steady(&run.durations[..in_flight]);
        self.events += in_flight as u64;
        self.bulk_steps += in_flight as u64;
        let end = run.ends[in_flight];
        let stamp = run.stamp;
        run.ends.clear();
        if in_flight < last {
            self.superseded.insert(stamp);
            self.foreground -= 1;
            self.schedule_step_end(w, end);
        }
    }

    /// At the scheduled end of `w`'s run: applies the pure steps not yet applied, so that the step
    /// ending now is the worker's real step in flight.
    pub(super) fn complete_steady_run(&mut self, w: usize) {
        let run = &mut self.runs[w];
        if run.ends.is_empty() {
            return;
        }
        self.workers[w].advance_steady(&run.durations);
        self.events += run.durations.len() as u64;
        self.bulk_steps += run.durations.len() as u64;
        run.ends.clear();
    }
}
