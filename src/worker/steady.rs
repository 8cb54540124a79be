//! Steady decode runs: what the engine's decode fast path needs from a worker.
//!
//! A step is *steady* when its batch is every running sequence decoding one token (each has sampled at
//! least one token already), nothing was admitted or preempted to form it, and the memory-pressure
//! reserve is fully taken. While no event touches the worker, the steps after a steady one are the
//! same batch again, one token further on, until a sequence completes (a waiting request that LoRA's
//! skip rule keeps out stays out: the running adapters change only when a sequence completes). Those
//! intermediate steps are *pure*: their ends and the starts that follow complete no sequence, admit,
//! preempt or sample nothing for the first time, and charge no recompute. So the engine may apply them
//! in bulk ([`Worker::advance_steady`]) with exactly the durations stepping one by one would give
//! ([`Worker::steady_step_times`]).
//!
//! Two kinds of run, by what the steps may do to the KV pool ([`Worker::steady_steps_after`]):
//! - **within blocks**: no step end fills a block and no step start allocates one, so the pool does not
//!   change at all; nothing outside the worker can tell the steps apart.
//! - **across blocks** (only with an empty waiting queue): a step end may fill a sequence's last block
//!   (registering its content, as [`Worker::finish_step`] does) and the next start allocate the one
//!   after (as [`Worker::start_step`] does, evicting the least recently freed block), but never more
//!   blocks than are free, so no step preempts. Bulk application replays those registrations and
//!   allocations in step order, and within a step in batch order, so the pool ends in exactly the state
//!   stepping one by one leaves; what changes in between is the pool's content and use, which only the
//!   KV-utilisation record, the worker itself and the engine's look at other workers' caches see. The
//!   engine allows such runs only when nothing else reads the pool between events
//!   (`engine/steady_run.rs`).

use crate::hardware::StepShape;
use crate::hardware::power::PowerModel;
use crate::time::SimDuration;

use super::Worker;

impl Worker {
    /// Whether the step in flight is steady (module docs).
    pub fn step_is_steady(&self) -> bool {
        self.in_step && self.steady
    }

    /// How many steps after the steady step in flight are pure: the ends of the step in flight and of
    /// the next `k - 1` steps complete no sequence; 0 if the step in flight is not steady.
    ///
    /// A sequence with `c` tokens computed, `g` sampled of `o`, holding `L` blocks of `bs` tokens, allows
    /// `o - g - 1` further steps (its last token ends the run). Within blocks (`across_blocks` false, or
    /// a sequence waiting) it allows at most `L·bs - c - 1`: the step that fills its last block
    /// registers it, and the start after it allocates. Across blocks, the `m`-th step after the one in
    /// flight needs `⌈(c + m + 1) / bs⌉` blocks, and the steps' allocations together must fit in the
    /// free blocks.
    pub fn steady_steps_after(&self, across_blocks: bool) -> u32 {
        if !self.step_is_steady() {
            return 0;
        }
        let by_output = self
            .running
            .iter()
            .map(|s| s.request.output_tokens - s.generated - 1)
            .min()
            .unwrap_or(0);
        let bs = self.params.block_size;
        if !across_blocks || !self.waiting.is_empty() {
            let by_blocks = self
                .running
                .iter()
                .map(|s| s.blocks.len() as u32 * bs - s.computed - 1)
                .min()
                .unwrap_or(0);
            return by_output.min(by_blocks);
        }
        let free = u64::from(self.pool.free());
        if self.allocations_within(by_output) <= free {
            return by_output;
        }
        // The largest `k` whose allocations fit: `allocations_within` grows with `k`, and is 0 at 0.
        let (mut fits, mut fails) = (0, by_output);
        while fails - fits > 1 {
            let mid = fits + (fails - fits) / 2;
            if self.allocations_within(mid) <= free {
                fits = mid;
            } else {
                fails = mid;
            }
        }
        fits
    }

    /// Blocks the starts of the next `k` steps after the steady step in flight allocate.
    fn allocations_within(&self, k: u32) -> u64 {
        let bs = self.params.block_size;
        self.running
            .iter()
            .map(|s| {
                let need = (s.computed + k + 1).div_ceil(bs);
                u64::from(need.saturating_sub(s.blocks.len() as u32))
            })
            .sum()
    }

    /// Appends to `out` the durations of the steps `m = 1..=k` after the steady step in flight: the
    /// same batch with every sequence's context `m` tokens longer, its fixed cost computed once. Equal,
    /// to the nanosecond, to what [`Worker::start_step`] computes for those steps: the batch's attention
    /// pairs `Σ (c_i + ½)` are sums of halves far below 2^52, exact in `f64` in any order, and
    /// [`PerfModel::batch`] splits the step time without changing its arithmetic.
    ///
    /// [`PerfModel::batch`]: crate::hardware::PerfModel::batch
    pub fn steady_step_times(&self, k: u32, out: &mut Vec<SimDuration>) {
        if k == 0 {
            return;
        }
        let cost = self.perf.batch(&self.steady_shape(1));
        out.extend((1..=k).map(|m| {
            let (context, pairs) = self.steady_context_at(m);
            self.slowed(cost.time(context, pairs))
        }));
    }

    /// The duration of the `m`-th step after the steady step in flight, computed from scratch as
    /// [`Worker::start_step`] does: what tests hold [`Worker::steady_step_times`] to.
    #[cfg(test)]
    pub fn steady_step_time(&self, m: u32) -> SimDuration {
        self.scaled_step_time(&self.steady_shape(m))
    }

    /// The batch of the `m`-th step after the steady step in flight (`m >= 1`).
    fn steady_shape(&self, m: u32) -> StepShape {
        let seqs = self.running.len() as u64;
        let (context_tokens, attention_pairs) = self.steady_context_at(m);
        StepShape {
            tokens: seqs,
            seqs,
            prefill_seqs: 0,
            context_tokens,
            attention_pairs,
        }
    }

    /// The context tokens and attention pairs of the `m`-th step after the steady step in flight.
    #[inline]
    fn steady_context_at(&self, m: u32) -> (u64, f64) {
        debug_assert!(self.step_is_steady() && m >= 1);
        let seqs = self.running.len() as u64;
        let context = self.steady_context + u64::from(m) * seqs;
        (context, context as f64 + seqs as f64 * 0.5)
    }

    /// Applies `durations.len()` pure steps at once: the end of the step in flight and the start of the
    /// next, that many times. `durations` are the started steps' durations
    /// ([`Worker::steady_step_times`] from `m = 1`), and at most [`Worker::steady_steps_after`]
    /// of them. For each of those starts that allocated blocks, appends `(m, used)` to `allocated`:
    /// the step, and the blocks in use once it started.
    pub fn advance_steady(&mut self, durations: &[SimDuration], allocated: &mut Vec<(u32, u32)>) {
        debug_assert!(self.step_is_steady());
        let k = durations.len() as u32;
        if k == 0 {
            return;
        }
        // Each step's energy in step order, as step-by-step stepping adds it (same bytes either way),
        // with the batch's fixed part costed once.
        let cost = self.perf.batch(&self.steady_shape(1));
        let power = PowerModel::of(self.perf.gpu);
        for (m, &d) in (1..).zip(durations) {
            let (context, pairs) = self.steady_context_at(m);
            let s = d.as_secs_f64();
            self.busy += d;
            self.busy_energy_j += self.energy_at_j(&power, cost.utilisation(context, pairs, s), s);
        }
        self.cross_blocks(k, allocated);
        for seq in &mut self.running {
            seq.computed += k;
            seq.generated += k;
        }
        self.steady_context += u64::from(k) * self.running.len() as u64;
        self.steps += u64::from(k);
        // The same batch each step: the adapters it activates are active already (no load, and the
        // slots' recency ends as one activation leaves it), but each step is a LoRA step if it is.
        if let Some(slots) = &mut self.lora
            && self.running.iter().any(|s| s.request.adapter.is_some())
        {
            slots.counters.lora_steps += u64::from(k);
        }
        self.batch_seconds = durations[durations.len() - 1].as_secs_f64();
    }

    /// The KV side of `k` pure steps: each block a step end fills is registered and each block a step
    /// start needs is allocated, in step order, within a step registrations (the end of step `m - 1`)
    /// before allocations (the start of step `m`), each in batch order, as [`Worker::finish_step`] and
    /// [`Worker::start_step`] do them. A sequence with `c` tokens computed does both only at the steps
    /// `m` with `c + m` a multiple of the block size, so the sequences are grouped by that phase and
    /// only the steps where some group has work are visited.
    fn cross_blocks(&mut self, k: u32, allocated: &mut Vec<(u32, u32)>) {
        let bs = self.params.block_size;
        // (first step with work, index in the batch), in that order.
        let mut phases = std::mem::take(&mut self.phases);
        phases.clear();
        phases.extend(
            self.running
                .iter()
                .enumerate()
                .map(|(i, s)| (bs - s.computed % bs, i as u32))
                .filter(|&(first, _)| first <= k),
        );
        if phases.is_empty() {
            self.phases = phases;
            return;
        }
        phases.sort_unstable();
        let caching = self.params.enable_prefix_caching;
        // Registrations are far apart in memory: each asks for the index entry of its sequence's next
        // one (a block size of steps later), and the first ones are asked for here.
        let prefetch_from = |seq: &super::Sequence, pool: &super::BlockPool, b: usize| {
            if caching && b < seq.hashes.len() && !seq.is_private(b) {
                pool.prefetch_entry(seq.hashes[b]);
            }
        };
        for &(first, i) in &phases {
            let seq = &self.running[i as usize];
            prefetch_from(seq, &self.pool, ((seq.computed + first) / bs) as usize - 1);
        }
        // The steps with work, in order: each group's first, then every `bs` steps after it.
        for cycle in 0.. {
            let mut any = false;
            for group in phases.chunk_by(|a, b| a.0 == b.0) {
                let m = group[0].0 + cycle * bs;
                if m > k {
                    break;
                }
                any = true;
                for &(_, i) in group {
                    let seq = &self.running[i as usize];
                    let full = ((seq.computed + m) / bs) as usize;
                    if m + bs <= k {
                        prefetch_from(seq, &self.pool, full);
                    }
                    if caching && full <= seq.hashes.len() {
                        seq.register_block(&mut self.pool, full - 1);
                    }
                }
                let mut took = false;
                for &(_, i) in group {
                    let seq = &mut self.running[i as usize];
                    let need = self.pool.blocks_for(seq.computed + m + 1);
                    if (seq.blocks.len() as u32) < need {
                        let b = self
                            .pool
                            .allocate()
                            .expect("a run across blocks allocates no more than is free");
                        seq.blocks.push(b);
                        took = true;
                    }
                }
                if took {
                    allocated.push((m, self.pool.used()));
                }
            }
            if !any {
                break;
            }
        }
        self.phases = phases;
    }
}
