//! Engines that share a GPU take turns stepping ([`crate::placement::colocation`]).
//!
//! [`Simulation::start_step`] asks [`Simulation::gpu_turn`] first: an engine whose GPU is busy with
//! another engine's step, or whose GPU has engines waiting ahead of it, joins the GPU's queue, and a
//! `GpuFree` event at the end of the step in flight starts the first one waiting. A step's end marks
//! its GPU busy until then. An engine that died while waiting is skipped; a step cut short by a fault
//! keeps its GPU busy until its planned end (at most one step).
//!
//! Invariant: at most one step runs on a GPU at any instant (checked in debug builds), and waiting
//! engines start in the order they began to wait.

use std::collections::VecDeque;

use super::queue::Class;
use super::{Event, Simulation, Truth};
use crate::placement::colocation::SharedGpus;
use crate::time::SimTime;

/// The shared GPUs' turns.
#[derive(Debug)]
pub(super) struct GpuGate {
    pub(super) shared: SharedGpus,
    /// Per GPU: the end of the step that holds it.
    busy_until: Vec<SimTime>,
    /// Per GPU: engines waiting for it, in the order they began to wait.
    waiting: Vec<VecDeque<usize>>,
    /// Per GPU: the instant of its latest `GpuFree` event.
    wake_at: Vec<Option<SimTime>>,
    /// Per worker: since when it waits.
    waiting_since: Vec<Option<SimTime>>,
    /// Per worker: time spent waiting for its GPU, ns.
    pub(super) wait_ns: Vec<u64>,
}

impl GpuGate {
    pub(super) fn new(shared: SharedGpus) -> Self {
        let gpus = shared.engines.len();
        let workers = shared.gpu_of.len();
        GpuGate {
            shared,
            busy_until: vec![SimTime::ZERO; gpus],
            waiting: vec![VecDeque::new(); gpus],
            wake_at: vec![None; gpus],
            waiting_since: vec![None; workers],
            wait_ns: vec![0; workers],
        }
    }

    /// Whether `w` takes turns for its GPU (MIG slices do not).
    pub(super) fn shares(&self, w: usize) -> bool {
        self.shared.time_shared(w)
    }
}

impl Simulation {
    /// Whether `w` may start a step now. If its GPU is busy, or another engine waits for it first, `w`
    /// waits its turn and `false` is returned.
    pub(super) fn gpu_turn(&mut self, w: usize) -> bool {
        let now = self.now;
        let Some(gate) = self.gpus.as_deref_mut() else {
            return true;
        };
        let Some(g) = gate.shared.gpu_of[w].filter(|_| gate.shares(w)) else {
            return true;
        };
        if self.workers[w].outstanding() == 0 {
            return true; // nothing to step: it will not take the GPU
        }
        let q = &mut gate.waiting[g];
        if gate.busy_until[g] <= now && q.front().is_none_or(|&f| f == w) {
            if q.front() == Some(&w) {
                q.pop_front();
            }
            if let Some(since) = gate.waiting_since[w].take() {
                gate.wait_ns[w] += now.since(since).0;
            }
            return true;
        }
        if !q.contains(&w) {
            q.push_back(w);
            gate.waiting_since[w] = Some(now);
        }
        let at = gate.busy_until[g].max(now);
        self.wake_gpu_at(g, at);
        false
    }

    /// Marks `w`'s GPU busy until `end`, the end of the step `w` just started.
    pub(super) fn gpu_held_until(&mut self, w: usize, end: SimTime) {
        let now = self.now;
        if let Some(gate) = self.gpus.as_deref_mut()
            && gate.shares(w)
            && let Some(g) = gate.shared.gpu_of[w]
        {
            debug_assert!(
                gate.busy_until[g] <= now,
                "two steps at once on shared GPU {g}"
            );
            gate.busy_until[g] = end;
        }
    }

    /// Queues a `GpuFree` for GPU `g` at `at`, unless its latest one is already there.
    fn wake_gpu_at(&mut self, g: usize, at: SimTime) {
        let gate = self.gpus.as_deref_mut().expect("shared GPUs");
        if gate.wake_at[g] != Some(at) {
            gate.wake_at[g] = Some(at);
            self.schedule(at, Class::StepDone, Event::GpuFree(g));
        }
    }

    /// GPU `g` may be free: start the engines waiting for it, first come first served, until one
    /// takes it.
    pub(super) fn on_gpu_free(&mut self, g: usize) {
        loop {
            let gate = self
                .gpus
                .as_deref_mut()
                .expect("a GpuFree needs shared GPUs");
            if gate.wake_at[g] == Some(self.now) {
                gate.wake_at[g] = None;
            }
            let Some(&f) = gate.waiting[g].front() else {
                return;
            };
            if gate.busy_until[g] > self.now {
                let at = gate.busy_until[g];
                self.wake_gpu_at(g, at);
                return;
            }
            if self.truth[f] == Truth::Up && !self.workers[f].in_step() {
                self.start_step(f);
            }
            let gate = self.gpus.as_deref_mut().expect("still shared");
            if gate.waiting[g].front() == Some(&f) {
                // Not started (down, already stepping, or no work after all): it no longer waits.
                gate.waiting[g].pop_front();
                gate.waiting_since[f] = None;
            }
        }
    }
}
