//! Steady decode runs: what the engine's decode fast path needs from a worker.
//!
//! A step is *steady* when its batch is every running sequence decoding one token (each has sampled at
//! least one token already), nothing was admitted or preempted to form it, and the memory-pressure
//! reserve is fully taken. While no event touches the worker, the steps after a steady one are the same
//! batch again, one token further on, until a sequence completes or fills its last allocated KV block.
//! Those intermediate steps are *pure*: their ends and the starts that follow change nothing but each
//! sequence's `computed`/`generated` counts and the worker's `steps`/`busy` counters: no KV block is
//! allocated, registered or freed, no sequence is admitted, preempted, completed or sampled for the
//! first time, and no recompute is charged. So nothing outside the worker (the router's snapshot, the
//! pool's cached content, the metrics) can tell them from one another, and the engine may apply them in
//! bulk ([`Worker::advance_steady`]) with exactly the durations stepping one by one would give
//! ([`Worker::steady_step_time`]).

use crate::hardware::StepShape;
use crate::time::SimDuration;

use super::Worker;

impl Worker {
    /// Whether the step in flight is steady (module docs).
    pub fn step_is_steady(&self) -> bool {
        self.in_step && self.steady
    }

    /// How many steps after the steady step in flight are pure: the ends of the step in flight and of
    /// the next `k - 1` steps complete no sequence and fill no KV block, and the starts of the next `k`
    /// steps allocate none. 0 if the step in flight is not steady.
    ///
    /// A sequence with `c` tokens computed, `g` sampled of `o`, holding `L` blocks of `bs` tokens, allows
    /// `min(o - g - 1, L·bs - c - 1)` further steps: its last token ends the run, and the step that fills
    /// its last block (registering it) is followed by a start that allocates the next one.
    pub fn steady_steps_after(&self) -> u32 {
        if !self.step_is_steady() {
            return 0;
        }
        let bs = self.params.block_size;
        self.running
            .iter()
            .map(|s| {
                let by_output = s.request.output_tokens - s.generated - 1;
                let by_blocks = s.blocks.len() as u32 * bs - s.computed - 1;
                by_output.min(by_blocks)
            })
            .min()
            .unwrap_or(0)
    }

    /// The duration of the `m`-th step after the steady step in flight (`m >= 1`): the same batch with
    /// every sequence's context `m` tokens longer. Equal, to the nanosecond, to what
    /// [`Worker::start_step`] computes for that step: the batch's attention pairs `Σ (c_i + ½)` are sums
    /// of halves far below 2^52, exact in `f64` in any order.
    pub fn steady_step_time(&self, m: u32) -> SimDuration {
        self.scaled_step_time(&self.steady_shape(m))
    }

    /// The batch of the `m`-th step after the steady step in flight (`m >= 1`).
    fn steady_shape(&self, m: u32) -> StepShape {
        debug_assert!(self.step_is_steady() && m >= 1);
        let seqs = self.running.len() as u64;
        let context = self.steady_context + u64::from(m) * seqs;
        StepShape {
            tokens: seqs,
            seqs,
            prefill_seqs: 0,
            context_tokens: context,
            attention_pairs: context as f64 + seqs as f64 * 0.5,
        }
    }

    /// Applies `durations.len()` pure steps at once: the end of the step in flight and the start of the
    /// next, that many times. `durations` are the started steps' durations
    /// ([`Worker::steady_step_time`] for `m = 1, 2, …`), and at most [`Worker::steady_steps_after`]
    /// of them.
    pub fn advance_steady(&mut self, durations: &[SimDuration]) {
        debug_assert!(self.step_is_steady());
        let k = durations.len() as u32;
        if k == 0 {
            return;
        }
        debug_assert!(k <= self.steady_steps_after());
        // Each step's energy in step order, as step-by-step stepping adds it (same bytes either way).
        for (m, &d) in (1..).zip(durations) {
            self.busy += d;
            self.busy_energy_j += self.step_energy_j(&self.steady_shape(m), d);
        }
        for seq in &mut self.running {
            seq.computed += k;
            seq.generated += k;
        }
        self.steady_context += u64::from(k) * self.running.len() as u64;
        self.steps += u64::from(k);
        self.batch_seconds = durations[durations.len() - 1].as_secs_f64();
    }
}
