//! A worker: one GPU replica (possibly tensor-parallel) running a vLLM-v1-style engine.
//!
//! Each step builds a batch under a token budget (`max_num_batched_tokens`) and a sequence cap
//! (`max_num_seqs`): running sequences first (a decode is one token; an unfinished prefill continues
//! with a chunk), then new sequences from the waiting queue in FCFS order, each reusing its longest
//! cached prefix. When a running sequence needs a block and none is free, the most recently admitted
//! sequence is preempted: its blocks are released and it waits to be recomputed. A sequence samples a
//! token at the end of every step that brings its KV up to date, so its first token comes at the end
//! of the step that completes its prefill, and it completes with its last token.
//!
//! With asynchronous scheduling (vLLM's default, [`EngineParams::async_scheduling`]) a step that starts
//! as the one before it ends was formed when that one began: the waiting requests queued since then
//! are left for the step after, unless the step would otherwise run nothing.
//!
//! Requests of a traffic mix carry priorities (lower first): the waiting queue is then ordered by
//! priority, FCFS within one, and the victim of a preemption is the most recently admitted sequence of
//! the lowest priority, as with vLLM's `--scheduling-policy priority`. With one priority throughout
//! (every scenario without a mix) both rules reduce exactly to the FCFS ones above.
//!
//! With LoRA (`[workers.lora]`, [`crate::lora`]) admission follows vLLM V1's adapter rule: once the
//! running batch names `max_loras` distinct adapters, a waiting request for another adapter is skipped
//! (it keeps its place) and the next one is considered; the step that first needs an adapter lasts its
//! load time longer, and a step with a LoRA request in its batch runs slower by the LoRA multiplier.
//!
//! The worker never schedules events itself: [`Worker::start_step`] returns the step's duration and the
//! engine calls [`Worker::finish_step`] when that time has passed.

mod content_index;
mod invariants;
pub mod kv_cache;
pub mod role;
pub mod sequence;
mod steady;

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::hardware::power::PowerModel;
use crate::hardware::{PerfModel, StepShape};
use crate::metrics::record::RecomputeCause;
use crate::time::{SimDuration, SimTime};
use kv_cache::BlockPool;
use sequence::RecomputeRun;
pub use sequence::{HistoryHolder, Sequence};

/// How many blocks ahead a run of registrations asks for the index entries it will touch.
const PREFETCH_REGISTRATIONS: usize = 8;

/// Engine parameters, named as vLLM names them.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineParams {
    /// Token budget of one step (prefill chunks plus decodes).
    pub max_num_batched_tokens: u32,
    /// Sequences in one step at most.
    pub max_num_seqs: u32,
    /// Tokens per KV block.
    pub block_size: u32,
    /// Automatic prefix caching.
    pub enable_prefix_caching: bool,
    /// Fraction of GPU memory the engine may use (weights, activations, KV).
    pub gpu_memory_utilization: f64,
    /// Asynchronous scheduling (vLLM's `--async-scheduling`, on by default since vLLM PR #27614, merged
    /// at the end of December 2025): the engine forms each step's batch while the step before it runs, so a step that
    /// follows another back to back holds only the requests queued before that other step began; a
    /// request that arrives while the engine is busy waits one step more than with synchronous
    /// scheduling. An idle engine schedules an arrival at once either way.
    #[serde(default = "async_scheduling_default")]
    pub async_scheduling: bool,
}

fn async_scheduling_default() -> bool {
    EngineParams::default().async_scheduling
}

impl Default for EngineParams {
    /// vLLM v1's defaults for an online server on a data-centre GPU.
    fn default() -> Self {
        EngineParams {
            max_num_batched_tokens: 8192,
            max_num_seqs: 256,
            block_size: 16,
            enable_prefix_caching: true,
            gpu_memory_utilization: 0.9,
            async_scheduling: true,
        }
    }
}

/// Bytes kept free per GPU for neither weights nor KV cache: what vLLM V1's start-up profiling keeps
/// aside (the runtime, a full-budget step's activations, the sampler warm-up over `max_num_seqs`
/// requests, all-reduce buffers at TP > 1), as modelled and fitted in [`crate::hardware::memory`].
pub fn activation_reserve_bytes(perf: &PerfModel, params: &EngineParams) -> f64 {
    crate::hardware::memory::reserve(perf, params.max_num_batched_tokens, params.max_num_seqs)
        .total()
}

/// KV blocks that fit on each GPU of the replica, or why none do.
pub fn kv_capacity_blocks(perf: &PerfModel, params: &EngineParams) -> Result<u32, String> {
    kv_capacity_blocks_reserving(perf, params, 0.0)
}

/// [`kv_capacity_blocks`] with `reserved` bytes per GPU also set aside before the KV cache is sized
/// (LoRA slot buffers: [`crate::lora::slot_buffer_bytes_per_gpu`]).
pub fn kv_capacity_blocks_reserving(
    perf: &PerfModel,
    params: &EngineParams,
    reserved: f64,
) -> Result<u32, String> {
    let budget = params.gpu_memory_utilization * perf.memory_bytes()
        - perf.weight_bytes_per_gpu()
        - activation_reserve_bytes(perf, params)
        - reserved;
    let block_bytes = perf.kv_bytes_per_token_per_gpu() * f64::from(params.block_size);
    if budget > 0.0 && budget < block_bytes {
        return Err(format!(
            "block_size = {} tokens: one block needs {:.1} GiB per GPU, more than the {:.1} GiB left for \
             the KV cache after the weights",
            params.block_size,
            block_bytes / (1u64 << 30) as f64,
            budget / (1u64 << 30) as f64
        ));
    }
    if budget < block_bytes {
        return Err(format!(
            "{} at tp={} in {} does not fit on {} with gpu_memory_utilization={}: weights need {:.1} GiB per GPU",
            perf.model.as_str(),
            perf.tp,
            perf.precision.as_str(),
            perf.gpu.as_str(),
            params.gpu_memory_utilization,
            perf.weight_bytes_per_gpu() / (1u64 << 30) as f64
        ));
    }
    Ok((budget / block_bytes).floor().min(f64::from(u32::MAX - 1)) as u32)
}

/// What the gateway may know about a worker when it routes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WorkerSnapshot {
    pub id: usize,
    /// Whether the gateway believes the worker is up.
    pub up: bool,
    /// Requests routed to the worker and not yet finished.
    pub outstanding: u32,
    /// Of those, waiting for admission.
    pub queued: u32,
    /// Of those, admitted and running.
    pub running: u32,
    /// Fraction of KV blocks in use by running sequences.
    pub kv_utilization: f64,
    /// KV blocks held by running sequences.
    pub used_blocks: u32,
    /// KV blocks in the worker.
    pub total_blocks: u32,
}

/// What one step did, returned by [`Worker::finish_step`].
#[derive(Debug, Default)]
pub struct StepOutcome {
    /// Sequences that emitted their last token, in batch order.
    pub completed: Vec<Sequence>,
    /// Ids of the requests that emitted their first token, in batch order.
    pub first_tokens: Vec<u64>,
    /// Prefill-only sequences whose prefill ended (their blocks released into the cache, `handed_off`
    /// set): their KV goes to a decode worker.
    pub handed_off: Vec<Sequence>,
}

/// One GPU replica.
#[derive(Debug)]
pub struct Worker {
    pub id: usize,
    pub perf: PerfModel,
    pub params: EngineParams,
    pub pool: BlockPool,
    waiting: VecDeque<Sequence>,
    running: Vec<Sequence>,
    /// The step in flight: (index into `running`, tokens computed).
    batch: Vec<(usize, u32)>,
    batch_seconds: f64,
    batch_tokens: u64,
    in_step: bool,
    /// When the step in flight (or, between steps, the last one) began, and when the last step ended:
    /// with asynchronous scheduling, a step that starts as the last one ends was formed when the last
    /// one began ([`EngineParams::async_scheduling`]).
    step_start: SimTime,
    last_step_end: Option<SimTime>,
    /// Whether the step in flight is steady (`steady.rs`), and its batch's context tokens `Σ c_i`.
    steady: bool,
    steady_context: u64,
    /// Scratch for [`Worker::advance_steady`] (kept to save an allocation per run).
    phases: Vec<(u32, u32)>,
    /// Incarnation: bumped by every crash, hang and restart, so that a step begun before is ignored.
    pub epoch: u64,
    /// Times the KV cache was wiped (a crash that lost it): what the worker computed before the last
    /// wipe is not what it holds or evicted since.
    pub wipes: u32,
    /// Step-time multiplier (a `slowdown` fault); 1 when healthy.
    pub slowdown: f64,
    /// The engine's LoRA adapters, when its group has `[workers.lora]` ([`crate::lora`]).
    pub lora: Option<crate::lora::AdapterSlots>,
    /// The LoRA step-time multiplier of the step in flight (1 when its batch holds no LoRA request);
    /// the same for the steady steps after it, which run the same batch.
    lora_factor: f64,
    /// Whether the blocks past a never-quoted request's own text stay out of the prefix index
    /// ([`kv_cache`]'s private blocks); on by default, off only to test that it changes nothing.
    pub private_blocks: bool,
    /// KV blocks a `memory_pressure` fault takes away, and the blocks taken so far.
    kv_reserve_target: u32,
    reserved: Vec<kv_cache::BlockId>,
    // Counters for the summary.
    pub busy: SimDuration,
    /// Energy of the steps run so far (the time in `busy`), J; idle time is added at the end
    /// (`hardware::power`).
    pub busy_energy_j: f64,
    pub steps: u64,
    pub preemptions: u64,
    pub completed: u64,
}

impl Worker {
    /// A worker with an empty cache, or an error if the model does not fit.
    pub fn new(id: usize, perf: PerfModel, params: EngineParams) -> Result<Self, String> {
        let blocks = kv_capacity_blocks(&perf, &params)?;
        Ok(Self::with_blocks(id, perf, params, blocks))
    }

    /// A worker with an explicit number of KV blocks (tests and what-if studies).
    pub fn with_blocks(id: usize, perf: PerfModel, params: EngineParams, blocks: u32) -> Self {
        Worker {
            id,
            perf,
            params,
            pool: BlockPool::new(blocks, params.block_size),
            waiting: VecDeque::new(),
            running: Vec::new(),
            batch: Vec::new(),
            batch_seconds: 0.0,
            batch_tokens: 0,
            in_step: false,
            step_start: SimTime::ZERO,
            last_step_end: None,
            steady: false,
            steady_context: 0,
            phases: Vec::new(),
            epoch: 0,
            wipes: 0,
            slowdown: 1.0,
            lora: None,
            lora_factor: 1.0,
            private_blocks: true,
            kv_reserve_target: 0,
            reserved: Vec::new(),
            busy: SimDuration::ZERO,
            busy_energy_j: 0.0,
            steps: 0,
            preemptions: 0,
            completed: 0,
        }
    }

    /// Whether a step is in flight.
    pub fn in_step(&self) -> bool {
        self.in_step
    }

    /// Whether a request needing `prompt + output` tokens can ever fit in this worker's KV memory.
    pub fn can_ever_fit(&self, prompt: u32, output: u32) -> bool {
        (u64::from(prompt) + u64::from(output))
            .saturating_sub(1)
            .div_ceil(u64::from(self.params.block_size))
            <= u64::from(self.pool.total())
    }

    /// Sequences waiting or running.
    pub fn outstanding(&self) -> usize {
        self.waiting.len() + self.running.len()
    }

    /// What an SLO planner's load loop reads of this engine (Dynamo's forward-pass metrics): waiting
    /// requests and their prompt tokens, running sequences and the KV tokens they hold. O(requests).
    pub fn planner_load(&self) -> crate::autoscale::planner::EngineLoad {
        crate::autoscale::planner::EngineLoad {
            queued: self.waiting.len() as u64,
            queued_prompt_tokens: self
                .waiting
                .iter()
                .map(|s| u64::from(s.request.prompt_tokens))
                .sum(),
            running: self.running.len() as u64,
            running_kv_tokens: self.running.iter().map(|s| u64::from(s.computed)).sum(),
        }
    }

    /// The gateway's view of this worker.
    pub fn snapshot(&self) -> WorkerSnapshot {
        WorkerSnapshot {
            id: self.id,
            up: true,
            outstanding: self.outstanding() as u32,
            queued: self.waiting.len() as u32,
            running: self.running.len() as u32,
            kv_utilization: f64::from(self.pool.used()) / f64::from(self.pool.total().max(1)),
            used_blocks: self.pool.used(),
            total_blocks: self.pool.total(),
        }
    }

    /// Queues a routed request for admission.
    ///
    /// The queue is ordered by priority (lower first), first come first served within a priority: the
    /// new sequence goes behind every waiting one of its priority or a higher one. With one priority
    /// throughout (no traffic mix) this is plain FCFS.
    pub fn enqueue(&mut self, seq: Sequence) {
        let p = seq.request.priority;
        let mut at = self.waiting.len();
        while at > 0 && self.waiting[at - 1].request.priority > p {
            at -= 1;
        }
        self.waiting.insert(at, seq);
    }

    /// The running sequence to preempt when blocks run out: the most recently admitted of the lowest
    /// priority (the largest value). With one priority throughout this is the last admitted, as in
    /// vLLM's FCFS scheduler; with several, vLLM's priority scheduler likewise preempts the lowest
    /// priority first (it breaks ties by arrival time, fleetsim by admission order).
    fn preemption_victim(&self) -> usize {
        let mut victim = self.running.len() - 1;
        for j in (0..victim).rev() {
            if self.running[j].request.priority > self.running[victim].request.priority {
                victim = j;
            }
        }
        victim
    }

    /// Builds the next batch and returns how long it takes, or `None` if there is nothing to do.
    pub fn start_step(&mut self, now: SimTime) -> Option<SimDuration> {
        assert!(
            !self.in_step,
            "worker {} started a step while one is in flight",
            self.id
        );
        self.batch.clear();
        let mut budget = self.params.max_num_batched_tokens;
        let mut preempted = self.take_reserved_blocks();

        // 1. Running sequences, in admission order.
        let mut i = 0;
        while i < self.running.len() && budget > 0 {
            let n = self.running[i].remaining().min(budget);
            let target = self.pool.blocks_for(self.running[i].computed + n);
            let mut scheduled = true;
            while (self.running[i].blocks.len() as u32) < target {
                if let Some(b) = self.pool.allocate() {
                    self.running[i].blocks.push(b);
                    continue;
                }
                // Out of blocks: preempt the most recently admitted sequence of the lowest priority,
                // possibly this one.
                let victim = self.preemption_victim();
                self.preempt(victim);
                preempted = true;
                if victim == i {
                    scheduled = false;
                    break;
                }
                if victim < i {
                    // A higher-priority sequence took the blocks of one already in this batch: take
                    // its tokens back out (vLLM's priority scheduler does the same).
                    let pos = self
                        .batch
                        .iter()
                        .position(|&(idx, _)| idx == victim)
                        .expect("every running sequence before `i` is in the batch");
                    let (_, n_victim) = self.batch.remove(pos);
                    budget += n_victim;
                    for entry in &mut self.batch {
                        if entry.0 > victim {
                            entry.0 -= 1;
                        }
                    }
                    i -= 1;
                }
            }
            if !scheduled {
                break;
            }
            self.batch.push((i, n));
            budget -= n;
            i += 1;
        }

        // 2. New sequences, FCFS, unless this step had to preempt (as vLLM v1 does). With asynchronous
        // scheduling a step that follows another back to back was formed when that one began, so the
        // requests queued since wait for the next step, unless this one would run nothing without
        // them (the step formed ahead was empty, and an empty step takes no time).
        let mut admitted = false;
        let mut deferred = false;
        if !preempted {
            let cutoff = match self.last_step_end {
                Some(end) if self.params.async_scheduling && end == now => self.step_start,
                _ => now,
            };
            (admitted, deferred) = self.admit_waiting(&mut budget, now, cutoff);
            if deferred && self.batch.is_empty() {
                (admitted, deferred) = self.admit_waiting(&mut budget, now, now);
            }
        }
        self.step_start = now;

        self.steady = false;
        if self.batch.is_empty() {
            return None;
        }
        let mut shape = StepShape::default();
        let bs = self.params.block_size;
        for &(idx, n) in &self.batch {
            let seq = &mut self.running[idx];
            shape.add(u64::from(n), u64::from(seq.computed));
            seq.first_scheduled.get_or_insert(now);
            if self.params.enable_prefix_caching {
                // The index entries that registering this step's full blocks will touch, asked for
                // now so that they are loaded when the step ends (a hint: changes nothing).
                let full_before = (seq.computed / bs) as usize;
                let full_after = (((seq.computed + n) / bs) as usize).min(seq.hashes.len());
                for b in (full_before..full_after).take(PREFETCH_REGISTRATIONS) {
                    if !seq.is_private(b) {
                        self.pool.prefetch_entry(seq.hashes[b]);
                    }
                }
            }
        }
        // Steady (steady.rs): every running sequence decodes, and what kept the queue out (no budget,
        // no sequence slot, or a head that does not fit) cannot change while nothing else happens.
        self.steady = !preempted
            && !admitted
            && !deferred
            && self.batch.len() == self.running.len()
            && self.reserved.len() as u32 >= self.kv_reserve_target
            && self.running.iter().all(|s| {
                !s.prefill_only
                    && s.generated >= 1
                    && s.remaining() == 1
                    && s.runs.iter().all(|r| r.end <= s.computed)
            });
        self.steady_context = shape.context_tokens;
        let load = self.activate_adapters();
        let dt = self.scaled_step_time(&shape) + load;
        self.batch_seconds = dt.as_secs_f64();
        self.batch_tokens = shape.tokens;
        self.in_step = true;
        self.busy += dt;
        self.busy_energy_j += self.step_energy_j(&shape, dt);
        self.steps += 1;
        Some(dt)
    }

    /// Admits waiting requests, FCFS within a priority, while `budget` and the sequence cap allow,
    /// skipping those queued after `cutoff` and those LoRA's adapter rule keeps out ([`crate::lora`]):
    /// returns whether any was admitted and whether any was skipped for `cutoff`.
    fn admit_waiting(&mut self, budget: &mut u32, now: SimTime, cutoff: SimTime) -> (bool, bool) {
        let (mut admitted, mut deferred) = (false, false);
        // With LoRA: the running batch's adapters. The cursor passes over the waiting requests left
        // in place; without LoRA or a cutoff it stays at the head.
        let mut adapters = self.running_adapters();
        let mut at = 0;
        while *budget > 0 && (self.running.len() as u32) < self.params.max_num_seqs {
            at = self.next_admissible(at, cutoff, &adapters, &mut deferred);
            let Some(n) = self.try_admit(at, *budget, now) else {
                break;
            };
            if let Some(a) = self.running.last().and_then(|s| s.request.adapter)
                && self.lora.is_some()
                && !adapters.contains(&a.id)
            {
                adapters.push(a.id);
            }
            self.batch.push((self.running.len() - 1, n));
            *budget -= n;
            admitted = true;
        }
        (admitted, deferred)
    }

    /// From position `at` of the waiting queue, the first request this step may admit: past those
    /// queued after `cutoff` (noted in `deferred`) and those for an adapter that cannot join a batch
    /// already naming `max_loras` adapters (counted once each as having waited for LoRA).
    fn next_admissible(
        &mut self,
        mut at: usize,
        cutoff: SimTime,
        adapters: &[u64],
        deferred: &mut bool,
    ) -> usize {
        let max_loras = self.lora.as_ref().map(|slots| slots.max_loras());
        while let Some(seq) = self.waiting.get_mut(at) {
            if seq.enqueued > cutoff {
                *deferred = true;
            } else if let Some(max) = max_loras
                && let Some(a) = seq.request.adapter
                && adapters.len() >= max
                && !adapters.contains(&a.id)
            {
                if !seq.lora_skipped {
                    seq.lora_skipped = true;
                    if let Some(slots) = &mut self.lora {
                        slots.counters.requests_waited += 1;
                    }
                }
            } else {
                break;
            }
            at += 1;
        }
        at
    }

    /// Notes that the step in flight began at `at`: the engine's decode fast path applies a run's pure
    /// steps in bulk, and the one it leaves in flight began when the one before it ended.
    pub fn step_began_at(&mut self, at: SimTime) {
        self.step_start = at;
    }

    /// Energy of a step of `shape` lasting `dt` on this worker's GPUs, J (`hardware::power`).
    fn step_energy_j(&self, shape: &StepShape, dt: SimDuration) -> f64 {
        let s = dt.as_secs_f64();
        let u = self.perf.utilisation(shape, s);
        self.energy_at_j(&PowerModel::of(self.perf.gpu), u, s)
    }

    /// Energy of a step lasting `s` seconds at utilisation `u` on this worker's GPUs, J.
    #[inline]
    fn energy_at_j(&self, power: &PowerModel, u: f64, s: f64) -> f64 {
        power.busy_w(u) * f64::from(self.perf.tp) * s
    }

    /// The duration of a step of `shape` on this worker, slowed down by a `slowdown` fault if any.
    fn scaled_step_time(&self, shape: &StepShape) -> SimDuration {
        self.slowed(self.perf.step_time(shape))
    }

    /// A step time `dt` at this worker's speed: slowed down by a `slowdown` fault if any.
    #[inline]
    fn slowed(&self, dt: SimDuration) -> SimDuration {
        let factor = self.slowdown * self.lora_factor;
        if factor != 1.0 {
            SimDuration::from_secs_f64(dt.as_secs_f64() * factor).max(SimDuration(1))
        } else {
            dt
        }
    }

    /// Where adapter `id` stands on this worker, as vLLM's `vllm:lora_requests_info` metric tells a
    /// router (running and waiting adapters against `max_loras`); `None` without LoRA.
    pub fn adapter_load(&self, id: u64) -> Option<crate::lora::AdapterLoad> {
        let slots = self.lora.as_ref()?;
        let running = distinct_adapters(self.running.iter());
        let waiting = distinct_adapters(self.waiting.iter());
        Some(crate::lora::AdapterLoad {
            active: running.contains(&id),
            waiting: waiting.contains(&id),
            room: running.len() + waiting.len() < slots.max_loras(),
        })
    }

    /// The distinct adapters of the running sequences, in admission order (empty without LoRA).
    fn running_adapters(&self) -> Vec<u64> {
        if self.lora.is_some() {
            distinct_adapters(self.running.iter())
        } else {
            Vec::new()
        }
    }

    /// Makes the batch's adapters active, sets the step's LoRA multiplier, and returns the time the
    /// adapter loads add to the step (zero without LoRA).
    fn activate_adapters(&mut self) -> SimDuration {
        self.lora_factor = 1.0;
        if self.lora.is_none() {
            return SimDuration::ZERO;
        }
        let batch = distinct_adapter_ranks(self.batch.iter().map(|&(idx, _)| &self.running[idx]));
        let slots = self.lora.as_mut().expect("checked above");
        if batch.is_empty() {
            return SimDuration::ZERO;
        }
        self.lora_factor = slots.params.multiplier();
        slots.counters.lora_steps += 1;
        let per_rank =
            crate::lora::adapter_bytes_per_rank(self.perf.model, slots.params.target_modules);
        slots.activate(&batch, per_rank)
    }

    /// Applies the step in flight at its end time `now`: progress, cache registration, sampling.
    pub fn finish_step(&mut self, now: SimTime) -> StepOutcome {
        assert!(
            self.in_step,
            "worker {} finished a step it never started",
            self.id
        );
        self.in_step = false;
        self.last_step_end = Some(now);
        let bs = self.params.block_size;
        let per_token = self.batch_seconds / self.batch_tokens as f64;
        let mut any_done = false;
        let mut first_tokens = Vec::new();
        for &(idx, n) in &self.batch {
            let seq = &mut self.running[idx];
            let from = seq.computed;
            let to = from + n;
            seq.computed = to;
            seq.prefill_tokens += u64::from(to.min(seq.request.prompt_tokens).saturating_sub(from));
            seq.charge_recompute(from, to, per_token);
            if self.params.enable_prefix_caching {
                let full_before = (from / bs) as usize;
                let full_now = ((to / bs) as usize).min(seq.hashes.len());
                for b in full_before..full_now {
                    if let Some(&later) = seq.hashes[..full_now].get(b + PREFETCH_REGISTRATIONS) {
                        self.pool.prefetch_entry(later);
                    }
                    seq.register_block(&mut self.pool, b);
                }
            }
            if seq.prefill_only {
                any_done |= seq.computed == seq.target();
            } else if seq.computed == seq.num_tokens() {
                seq.generated += 1;
                if seq.generated == 1 {
                    seq.first_token.get_or_insert(now);
                    first_tokens.push(seq.request.id);
                }
                if seq.generated == seq.request.output_tokens {
                    any_done = true;
                }
            }
        }
        let mut outcome = StepOutcome {
            first_tokens,
            ..StepOutcome::default()
        };
        if any_done {
            // In place: the sequences that stay keep their order and move at most once (a `Sequence`
            // is a few hundred bytes, and a batch holds up to `max_num_seqs` of them).
            let prefilled = |seq: &Sequence| seq.prefill_only && seq.computed == seq.target();
            let leaving =
                |seq: &mut Sequence| prefilled(seq) || seq.generated == seq.request.output_tokens;
            for mut seq in self.running.extract_if(.., leaving) {
                self.pool.release(&seq.blocks);
                if prefilled(&seq) {
                    // The KV stays in this worker's prefix cache; the request moves on.
                    seq.blocks.clear();
                    seq.prefill_only = false;
                    seq.handed_off = seq.computed;
                    outcome.handed_off.push(seq);
                } else {
                    outcome.completed.push(seq);
                }
            }
            self.completed += outcome.completed.len() as u64;
        }
        self.batch.clear();
        outcome
    }

    /// Admits the waiting request at position `at` (the head, unless the LoRA skip rule passed over
    /// the ones before it) if its uncached part fits; returns the tokens scheduled for it.
    /// Blocks the sequence loads from the shared store (`load_blocks`) arrive with it: they take fresh
    /// blocks, are registered at once, and are not computed.
    fn try_admit(&mut self, at: usize, budget: u32, now: SimTime) -> Option<u32> {
        let bs = self.params.block_size;
        let caching = self.params.enable_prefix_caching;
        let seq = self.waiting.get_mut(at)?;
        if caching && seq.hashes.is_empty() {
            seq.hashes = seq.request.block_hashes(bs);
        }
        let num_tokens = seq.num_tokens();
        let target = seq.target();
        // At least one token is always computed, to produce logits (or, prefill only, to hand off).
        let max_hit = ((target.saturating_sub(1) / bs) as usize).min(seq.hashes.len());
        // The cached blocks of the prompt's head: the hint, checked block by block, then the index
        // from where it stops (a waiting sequence holds no block).
        let mut blocks = std::mem::take(&mut seq.cached_hint);
        let hit = if caching {
            self.pool
                .cached_prefix_blocks_hinted(&seq.hashes[..max_hit], &mut blocks)
        } else {
            blocks.clear();
            0
        };
        let handed = seq.handed_off.min(num_tokens - 1);
        // KV handed off by a prefill worker arrives with the sequence, like a load: its full blocks
        // are registered at once, and only the last token is computed.
        let have = if handed > 0 {
            max_hit.min((handed / bs) as usize).max(hit)
        } else {
            hit.max((seq.load_blocks as usize).min(max_hit))
        };
        let cached = hit as u32 * bs;
        let start = if handed > 0 { handed } else { have as u32 * bs };
        let n = target.saturating_sub(start).min(budget);
        let new_blocks = self.pool.blocks_for(start + n) - hit as u32;
        // Counting the free blocks among the hit takes a pass over them: needed only when they could
        // decide whether the sequence fits.
        let free = self.pool.free();
        if free < new_blocks + blocks.len() as u32
            && free < new_blocks + self.pool.free_among(&blocks)
        {
            seq.cached_hint = blocks; // still exact: the next attempt checks it again
            return None;
        }
        let mut seq = self.waiting.remove(at).unwrap();
        self.pool.touch_all(&blocks);
        seq.blocks = blocks;
        for _ in 0..new_blocks {
            let b = self.pool.allocate().expect("free blocks were counted");
            seq.blocks.push(b);
        }
        for b in hit..have {
            self.pool.register(seq.blocks[b], seq.hashes[b]);
        }
        // What this sequence computes from its private tail on, only it could ask for again.
        seq.private_from = match seq.request.first_private_block(bs) {
            Some(first)
                if self.private_blocks
                    && seq.may_stay_private
                    && !seq.prefill_only
                    && handed == 0 =>
            {
                first
            }
            _ => usize::MAX,
        };
        seq.load_blocks = 0;
        seq.handed_off = 0;
        seq.computed = start;
        if seq.cached_at_admission.is_none() {
            seq.cached_at_admission = Some(cached.min(seq.request.prompt_tokens));
            seq.loaded_tokens =
                Some(start.min(seq.request.prompt_tokens) - cached.min(seq.request.prompt_tokens));
        }
        if handed > 0 {
            // The prefill worker attributed what it computed.
            seq.runs.clear();
            seq.reprefill_span = (0, 0);
        } else {
            self.attribute_recompute(&mut seq, have);
        }
        let _ = now;
        self.running.push(seq);
        Some(n)
    }

    /// Records which of the tokens about to be computed were computed before, and why they must be again.
    /// `hit` leading blocks are present (cached or loaded).
    ///
    /// Every such token gets exactly one cause, and [`Sequence::reprefill_span`] is set to the positions
    /// they cover, from the hit on without a gap: the request's own earlier progress first (migrated,
    /// failure, preempted), then each prompt block of what the fleet had computed before, by the first
    /// of: this worker evicted it (its ghost, or history it computed in this incarnation), another live
    /// worker held it at routing (misrouted), it was lost with a failed worker, or it is history another
    /// worker computed and no live worker holds (moved). The walk stops at the first block none of these
    /// covers: the prompt's new content, after which the chain holds nothing computed before.
    fn attribute_recompute(&self, seq: &mut Sequence, hit: usize) {
        let bs = self.params.block_size;
        seq.runs.clear();
        // The request's own earlier progress: migrated, lost with a failed worker, or preempted.
        let start = hit as u32 * bs;
        let mut cursor = start;
        for (end, cause) in [
            (seq.migrated_upto, RecomputeCause::Migrated),
            (seq.lost_upto, RecomputeCause::Failure),
            (seq.high_water, RecomputeCause::Preempted),
        ] {
            if end > cursor {
                seq.runs.push(RecomputeRun {
                    start: cursor,
                    end,
                    cause,
                });
                cursor = end;
            }
        }
        // Prompt blocks past the hit (and past anything this request computed itself) that the fleet had.
        let prompt_blocks = (seq.request.prompt_tokens / bs) as usize;
        // Another worker could have served at most the blocks before the last token, like this one.
        let usable = (seq.num_tokens() - 1) / bs;
        // From the block the request's own progress ended in (its rest counts if that block does).
        let first = hit.max((cursor / bs) as usize);
        for b in first..prompt_blocks.min(seq.hashes.len()) {
            let bb = b as u32;
            let cause = if bb < seq.held_here_blocks || self.pool.recently_evicted(seq.hashes[b]) {
                RecomputeCause::Evicted
            } else if bb < seq.elsewhere_blocks.min(usable) {
                RecomputeCause::Misrouted
            } else if bb < seq.failure_blocks.min(usable) {
                RecomputeCause::Failure
            } else if bb < seq.history_blocks {
                RecomputeCause::Moved
            } else {
                break; // new content: everything after it in the chain is new too
            };
            let (start, end) = ((bb * bs).max(cursor), (bb + 1) * bs);
            match seq.runs.last_mut() {
                Some(run) if run.cause == cause && run.end == start => run.end = end,
                _ => seq.runs.push(RecomputeRun { start, end, cause }),
            }
            cursor = end;
        }
        seq.reprefill_span = (start, cursor.max(start));
    }

    /// The process dies: every request on the worker is returned (waiting ones first, then running, each in
    /// order), the step in flight is abandoned, and the KV cache is wiped — unless `keep_kv`, when the
    /// requests' blocks are released into the cache instead. Returns the requests and the hashes of the
    /// content that was lost.
    pub fn crash(&mut self, keep_kv: bool) -> (Vec<Sequence>, Vec<u64>) {
        self.stall();
        let mut lost: Vec<Sequence> = self.waiting.drain(..).collect();
        let mut running: Vec<Sequence> = self.running.drain(..).collect();
        let mut hashes = Vec::new();
        if keep_kv {
            for seq in &mut running {
                self.let_go_early(seq);
            }
        } else {
            hashes.extend(self.pool.content_hashes());
            self.pool.wipe();
            self.reserved.clear();
            self.wipes += 1;
        }
        lost.extend(running);
        for seq in &mut lost {
            seq.blocks.clear();
        }
        (lost, hashes)
    }

    /// The process stops making progress: the step in flight never ends (its event is ignored).
    pub fn stall(&mut self) {
        self.epoch += 1;
        self.in_step = false;
        self.steady = false;
        self.batch.clear();
    }

    /// The process starts again (cold, unless the KV survived a crash): a new incarnation, so nothing
    /// begun by the old one counts.
    pub fn restart(&mut self) {
        self.stall();
        if let Some(slots) = &mut self.lora {
            slots.clear();
        }
    }

    /// The worker now serves another model (a swap, [`crate::placement`]): step times from `perf`, a
    /// KV cache of `blocks` blocks, empty. Only an idle worker swaps (it has drained); what it
    /// computed before is gone, as after a crash that lost its cache, and nothing begun before counts.
    pub fn load_model(&mut self, perf: PerfModel, blocks: u32) {
        assert!(
            self.outstanding() == 0 && !self.in_step,
            "worker {} swaps its model with requests on it",
            self.id
        );
        self.stall();
        let events = self.pool.records_events();
        self.pool = BlockPool::new(blocks, self.params.block_size);
        if events {
            self.pool.record_events();
        }
        self.reserved.clear();
        self.kv_reserve_target = self.kv_reserve_target.min(blocks);
        self.wipes += 1;
        self.perf = perf;
        if let Some(slots) = &mut self.lora {
            slots.clear();
        }
    }

    /// Takes request `id` off the worker (a gateway timeout), releasing its blocks.
    pub fn remove(&mut self, id: crate::request::RequestId) -> Option<Sequence> {
        debug_assert!(
            !self.in_step,
            "requests are removed only from a stalled worker"
        );
        if let Some(i) = self.waiting.iter().position(|s| s.request.id == id) {
            return self.waiting.remove(i);
        }
        let i = self.running.iter().position(|s| s.request.id == id)?;
        let mut seq = self.running.remove(i);
        self.let_go_early(&mut seq);
        Some(seq)
    }

    /// Ids of the requests on the worker, waiting then running.
    pub fn request_ids(&self) -> Vec<crate::request::RequestId> {
        self.waiting
            .iter()
            .chain(&self.running)
            .map(|s| s.request.id)
            .collect()
    }

    /// Memory pressure: `blocks` KV blocks are taken away (0 gives them back). Blocks are taken at the
    /// start of the next step, evicting cached content and preempting running requests if needed;
    /// blocks given back return at once.
    pub fn set_kv_reserve(&mut self, blocks: u32) {
        self.kv_reserve_target = blocks.min(self.pool.total());
        while self.reserved.len() as u32 > self.kv_reserve_target {
            let b = self.reserved.pop().expect("more reserved than the target");
            self.pool.release(&[b]);
        }
    }

    /// KV blocks currently taken away by memory pressure.
    pub fn reserved_blocks(&self) -> u32 {
        self.reserved.len() as u32
    }

    /// Takes blocks towards the memory-pressure target; returns whether it had to preempt.
    fn take_reserved_blocks(&mut self) -> bool {
        let mut preempted = false;
        while (self.reserved.len() as u32) < self.kv_reserve_target {
            if let Some(b) = self.pool.allocate() {
                self.reserved.push(b);
            } else if !self.running.is_empty() {
                self.preempt(self.preemption_victim());
                preempted = true;
            } else {
                break; // what is left is taken as blocks free up
            }
        }
        preempted
    }

    /// Releases the blocks of a running sequence that leaves without completing (preempted, timed
    /// out, or lost with a process whose KV survives): its content stays cached here, and since it may
    /// come back for it, its private blocks are published first.
    fn let_go_early(&mut self, seq: &mut Sequence) {
        seq.publish_private(&mut self.pool);
        self.pool.release(&seq.blocks);
        seq.blocks.clear();
    }

    /// Preempts `running[idx]` (the last, unless priorities differ): frees its blocks and puts it at the
    /// head of the queue among the waiting sequences of its priority.
    fn preempt(&mut self, idx: usize) {
        let mut seq = self.running.remove(idx);
        self.let_go_early(&mut seq);
        seq.high_water = seq.high_water.max(seq.computed);
        seq.computed = 0;
        seq.handed_off = 0;
        seq.preemptions += 1;
        self.preemptions += 1;
        let p = seq.request.priority;
        let at = self
            .waiting
            .iter()
            .position(|w| w.request.priority >= p)
            .unwrap_or(self.waiting.len());
        self.waiting.insert(at, seq);
    }
}

/// The distinct adapter ids of `seqs`, in order of first appearance (a batch holds at most
/// `max_loras` of them, so a linear scan is the cheap way).
fn distinct_adapters<'a>(seqs: impl Iterator<Item = &'a Sequence>) -> Vec<u64> {
    distinct_adapter_ranks(seqs)
        .into_iter()
        .map(|(id, _)| id)
        .collect()
}

/// The distinct adapters of `seqs` with their ranks, in first-seen order.
fn distinct_adapter_ranks<'a>(seqs: impl Iterator<Item = &'a Sequence>) -> Vec<(u64, u32)> {
    let mut out: Vec<(u64, u32)> = Vec::new();
    for a in seqs.filter_map(|s| s.request.adapter) {
        if !out.iter().any(|&(id, _)| id == a.id) {
            out.push((a.id, a.rank));
        }
    }
    out
}

#[cfg(test)]
mod tests;
