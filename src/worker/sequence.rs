//! A request's state inside one worker: its blocks, progress and recompute bookkeeping.

use crate::metrics::record::{Recompute, RecomputeCause};
use crate::request::Request;
use crate::time::SimTime;
use crate::worker::kv_cache::{BlockId, BlockPool};

/// A half-open range of token positions `[start, end)` recomputed for one cause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecomputeRun {
    pub start: u32,
    pub end: u32,
    pub cause: RecomputeCause,
}

/// A request admitted to (or waiting in) a worker.
///
/// Invariants: `computed ≤ num_tokens()`; `blocks.len() ≥ ceil(computed / block_size)`;
/// `generated ≤ request.output_tokens`.
#[derive(Debug)]
pub struct Sequence {
    pub request: Request,
    /// Full-block chain hashes of prompt + answer (derived at the first admission).
    pub hashes: Vec<u64>,
    /// Blocks held, in token order.
    pub blocks: Vec<BlockId>,
    /// While waiting: the blocks found caching the prompt's leading blocks when it was routed (that
    /// search itself starts from the blocks a conversation's previous turn left on the worker), a hint
    /// that saves admission the prefix index's lookups. Each is checked against the block's current
    /// content ([`BlockPool::cached_prefix_blocks_hinted`]), so a hint gone stale, or taken on another
    /// worker, changes nothing but the lookups it saves.
    pub cached_hint: Vec<BlockId>,
    /// Tokens whose KV is computed (or reused from the cache).
    pub computed: u32,
    /// Output tokens emitted.
    pub generated: u32,
    /// Most tokens ever computed, across preemptions.
    pub high_water: u32,
    /// Blocks another live worker held when the request was routed (for misrouting attribution).
    pub elsewhere_blocks: u32,
    /// Arrival at this worker.
    pub enqueued: SimTime,
    pub first_scheduled: Option<SimTime>,
    /// The first output token the client saw, over every attempt (a retry from scratch streams its
    /// tokens again, but the client's time to first token was the first attempt's).
    pub first_token: Option<SimTime>,
    /// Prompt tokens hit in the prefix cache at first admission (`None` before it).
    pub cached_at_admission: Option<u32>,
    pub prefill_tokens: u64,
    pub preemptions: u32,
    /// Attempts after the first (retries and migrations), migrations, and attempts that timed out.
    pub retries: u32,
    pub migrations: u32,
    pub timeouts: u32,
    /// Tokens this request had computed on a worker that failed before a retry from scratch: recomputed
    /// for cause `failure`.
    pub lost_upto: u32,
    /// Tokens (prompt + generated) a migrated request must prefill again: recomputed for cause `migrated`.
    pub migrated_upto: u32,
    /// Leading prompt blocks whose KV was on a worker that failed and is held by no live worker (set at
    /// routing; recomputing them is cause `failure`).
    pub failure_blocks: u32,
    /// Leading blocks of `hashes` to load from the shared store at admission instead of computing.
    pub load_blocks: u32,
    /// Prompt tokens loaded from the store at first admission.
    pub loaded_tokens: Option<u32>,
    /// Whether the gateway restarted this turn's conversation (its state was lost).
    pub session_reset: bool,
    /// Prompt segments the gateway removed (history of a conversation that no longer exists).
    pub dropped_segments: usize,
    /// Prefill only (a prefill worker of a disaggregated fleet): the worker computes the KV of every
    /// token but the last and hands the request off ([`crate::worker::StepOutcome::handed_off`]) instead
    /// of sampling.
    pub prefill_only: bool,
    /// Tokens whose KV arrived from a prefill worker (0: none): admitted with them computed, so the
    /// first step computes the last token and samples (a decode step).
    pub handed_off: u32,
    /// Whether the gateway has routed this sequence before (a retry or a migration is routed again).
    pub routed: bool,
    /// Whether the blocks from [`Request::first_private_block`] on may be registered as private
    /// ([`crate::worker::kv_cache`]): the request is never quoted and has never left a worker without
    /// completing. Cleared for good by [`Sequence::publish_private`].
    pub may_stay_private: bool,
    /// Whether admission ever skipped this request because its LoRA adapter could not join the batch
    /// ([`crate::lora`]).
    pub lora_skipped: bool,
    /// The first block registered as private at this admission (`usize::MAX`: none).
    pub private_from: usize,
    /// Leading prompt blocks of the conversation's history: the blocks of its previous turn's prompt
    /// and answer that the fleet computed (0 for a first turn, a request outside a conversation, or a
    /// turn whose history was dropped). Set when the request is first routed.
    pub history_blocks: u32,
    /// Where that history was computed: each worker, its incarnation ([`crate::worker::Worker::wipes`])
    /// and how many leading blocks of it that incarnation computed. Carried from turn to turn.
    pub history_holders: Vec<HistoryHolder>,
    /// Leading history blocks the worker this attempt was routed to computed in its current
    /// incarnation ([`Sequence::history_holders`]): missing there now, they were evicted. Set at routing.
    pub held_here_blocks: u32,
    /// Token ranges being recomputed since the last admission, and why.
    pub runs: Vec<RecomputeRun>,
    /// The token positions `[start, end)` that [`Sequence::runs`] must cover without a gap: from the
    /// admission's hit to the end of what the fleet had computed before. Counted by position into
    /// [`Recompute::reprefilled_tokens`], independently of the causes.
    pub reprefill_span: (u32, u32),
    pub recompute: Recompute,
}

/// A worker incarnation that computed a conversation's leading `blocks` history blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HistoryHolder {
    pub worker: usize,
    pub wipes: u32,
    pub blocks: u32,
}

impl Sequence {
    /// A sequence for `request`, not yet admitted.
    pub fn new(request: Request, enqueued: SimTime, elsewhere_blocks: u32) -> Self {
        let never_quoted = request.never_quoted;
        Sequence {
            request,
            hashes: Vec::new(),
            blocks: Vec::new(),
            cached_hint: Vec::new(),
            computed: 0,
            generated: 0,
            high_water: 0,
            elsewhere_blocks,
            enqueued,
            first_scheduled: None,
            first_token: None,
            cached_at_admission: None,
            prefill_tokens: 0,
            preemptions: 0,
            retries: 0,
            migrations: 0,
            timeouts: 0,
            lost_upto: 0,
            migrated_upto: 0,
            failure_blocks: 0,
            load_blocks: 0,
            loaded_tokens: None,
            session_reset: false,
            dropped_segments: 0,
            prefill_only: false,
            handed_off: 0,
            routed: false,
            may_stay_private: never_quoted,
            lora_skipped: false,
            private_from: usize::MAX,
            history_blocks: 0,
            history_holders: Vec::new(),
            held_here_blocks: 0,
            runs: Vec::new(),
            reprefill_span: (0, 0),
            recompute: Recompute::default(),
        }
    }

    /// Tokens the model must have seen before sampling the next output token: prompt + outputs so far.
    pub fn num_tokens(&self) -> u32 {
        self.request.prompt_tokens + self.generated
    }

    /// Tokens to compute before this worker is done with the next token: all of them, or all but the
    /// last for a prefill-only sequence.
    pub fn target(&self) -> u32 {
        self.num_tokens() - u32::from(self.prefill_only)
    }

    /// Tokens still to compute before the next sample (or, prefill only, before the hand-off).
    pub fn remaining(&self) -> u32 {
        self.target() - self.computed
    }

    /// Blocks held by this sequence at most: prompt + output − 1 tokens of KV (the last sample is never fed back).
    pub fn max_blocks(&self, block_size: u32) -> u32 {
        (self.request.prompt_tokens + self.request.output_tokens - 1).div_ceil(block_size)
    }

    /// Whether block `b` of [`Sequence::hashes`] is registered as private at this admission.
    pub fn is_private(&self, b: usize) -> bool {
        b >= self.private_from
    }

    /// Registers the content of its `b`-th block, now full, in `pool`: privately when
    /// [`Sequence::is_private`] says so.
    pub fn register_block(&self, pool: &mut BlockPool, b: usize) {
        if self.is_private(b) {
            pool.register_private(self.blocks[b], self.hashes[b]);
        } else {
            pool.register(self.blocks[b], self.hashes[b]);
        }
    }

    /// The sequence leaves its worker without completing (preempted, timed out, or lost with a process
    /// whose KV survives) and may come back for its blocks: enters its private ones in `pool`'s index,
    /// and registers none as private from now on.
    pub fn publish_private(&mut self, pool: &mut BlockPool) {
        if self.private_from < self.blocks.len() {
            pool.publish(&self.blocks[self.private_from..]);
        }
        self.may_stay_private = false;
        self.private_from = usize::MAX;
    }

    /// Prepares a request that was lost with its worker for a retry from scratch: its progress is gone
    /// (the client starts over), what it had computed is recomputed for cause `failure`.
    pub fn restart_from_scratch(&mut self) {
        let had = self
            .computed
            .max(self.high_water)
            .min(self.request.prompt_tokens);
        self.lost_upto = self.lost_upto.max(had);
        self.reset_progress();
        self.generated = 0;
        // The client keeps the first token it saw: a retry's own first token does not replace it.
        self.migrated_upto = 0;
    }

    /// Prepares a request that was lost with its worker for migration: generation resumes where it
    /// stopped, after the prompt and the tokens generated so far are prefilled again (cause `migrated`).
    ///
    /// Only what the lost attempt (or an earlier one) had computed is recomputed for that cause: a
    /// request lost mid-prefill after `n` tokens migrates `n`, not its whole prompt.
    pub fn migrate(&mut self) {
        let had = self.computed.max(self.high_water).min(self.num_tokens());
        self.migrated_upto = self.migrated_upto.max(had);
        self.reset_progress();
    }

    /// A new attempt: what the cache gave the lost one is not what the attempt that completes gets.
    fn reset_progress(&mut self) {
        self.cached_at_admission = None;
        self.loaded_tokens = None;
        self.blocks.clear();
        self.computed = 0;
        self.high_water = 0;
        self.runs.clear();
        self.reprefill_span = (0, 0);
        self.load_blocks = 0;
        self.handed_off = 0;
    }

    /// Attributes the tokens `[from, to)` of a step's chunk to recompute causes, charging `seconds_per_token`.
    pub fn charge_recompute(&mut self, from: u32, to: u32, seconds_per_token: f64) {
        let (lo, hi) = (
            self.reprefill_span.0.max(from),
            self.reprefill_span.1.min(to),
        );
        if lo < hi {
            self.recompute.reprefilled_tokens += u64::from(hi - lo);
        }
        for run in &self.runs {
            let lo = run.start.max(from);
            let hi = run.end.min(to);
            if lo < hi {
                let i = run.cause.index();
                let n = hi - lo;
                self.recompute.tokens[i] += u64::from(n);
                self.recompute.gpu_seconds[i] += f64::from(n) * seconds_per_token;
            }
        }
    }
}
