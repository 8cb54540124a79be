//! Unit tests of the worker's scheduler: admission with and without cache hits, chunked prefill,
//! preemption (which sequence, in which step, and what the step does after it), the last-token rule,
//! and recompute attribution by cause.
//!
//! Every case uses blocks of 4 tokens and a pool of a handful of blocks, so that each expected value can
//! be derived by hand; the derivation is in the comments. Step times come from the real performance
//! model and are never asserted: only which tokens each step computes, and when tokens are sampled
//! relative to the step ends.

use super::*;
use crate::hardware::{GpuId, ModelId, Precision};
use crate::request::{Request, Segment};

const BS: u32 = 4;

/// A worker with `blocks` KV blocks of 4 tokens, a step budget of `budget` tokens and prefix caching.
fn worker(blocks: u32, budget: u32) -> Worker {
    let params = EngineParams {
        max_num_batched_tokens: budget,
        max_num_seqs: 16,
        block_size: BS,
        enable_prefix_caching: true,
        gpu_memory_utilization: 0.9,
        // The admission rules below are stated step by step, for a batch formed when the step before
        // it ends; `async_*` tests cover asynchronous scheduling.
        async_scheduling: false,
    };
    let perf = PerfModel::with_defaults(GpuId::H100, ModelId::Llama31_8b, 1, Precision::Bf16);
    Worker::with_blocks(0, perf, params, blocks)
}

/// A request whose prompt is `segments` = (content id, tokens), asking for `output` tokens.
fn request(id: u64, segments: &[(u64, u32)], output: u32) -> Request {
    let segments = segments
        .iter()
        .map(|&(content, tokens)| Segment { content, tokens })
        .collect();
    Request::new(id, None, SimTime::ZERO, output, segments)
}

/// Drives one worker step by step, keeping the clock.
struct Harness {
    w: Worker,
    now: SimTime,
    /// End time of every step run so far.
    ends: Vec<SimTime>,
}

impl Harness {
    fn new(w: Worker) -> Self {
        Harness {
            w,
            now: SimTime::ZERO,
            ends: Vec::new(),
        }
    }

    fn enqueue(&mut self, r: Request, elsewhere_blocks: u32) {
        self.w.enqueue(Sequence::new(r, self.now, elsewhere_blocks));
    }

    /// Starts a step and returns its batch as (request id, tokens) without finishing it.
    fn start(&mut self) -> Vec<(u64, u32)> {
        let dt = self
            .w
            .start_step(self.now)
            .expect("the worker had work to do");
        assert!(dt > SimDuration::ZERO);
        self.now += dt;
        self.ends.push(self.now);
        self.w
            .batch
            .iter()
            .map(|&(i, n)| (self.w.running[i].request.id, n))
            .collect()
    }

    /// Finishes the step in flight; returns the completed sequences.
    fn finish(&mut self) -> Vec<Sequence> {
        self.w.finish_step(self.now).completed
    }

    /// Runs one whole step: its batch and the sequences it completed.
    fn step(&mut self) -> (Vec<(u64, u32)>, Vec<Sequence>) {
        let batch = self.start();
        (batch, self.finish())
    }

    fn running(&self, id: u64) -> &Sequence {
        self.w
            .running
            .iter()
            .find(|s| s.request.id == id)
            .unwrap_or_else(|| panic!("request {id} is not running"))
    }

    fn running_ids(&self) -> Vec<u64> {
        self.w.running.iter().map(|s| s.request.id).collect()
    }

    fn waiting_ids(&self) -> Vec<u64> {
        self.w.waiting.iter().map(|s| s.request.id).collect()
    }
}

fn tokens(s: &Sequence, cause: RecomputeCause) -> u64 {
    s.recompute.tokens[cause.index()]
}

#[test]
fn a_prompt_without_a_hit_is_computed_whole_and_samples_at_the_step_end() {
    let mut h = Harness::new(worker(16, 64));
    h.enqueue(request(1, &[(10, 10)], 2), 0);
    // 10 prompt tokens fit the 64-token budget: one step computes them all, in ceil(10/4) = 3 blocks.
    let (batch, done) = h.step();
    assert_eq!(batch, [(1, 10)]);
    assert!(done.is_empty());
    let s = h.running(1);
    assert_eq!(s.blocks.len(), 3);
    assert_eq!((s.computed, s.generated), (10, 1));
    assert_eq!(
        s.first_token,
        Some(h.ends[0]),
        "first token at the end of the prefill step"
    );
    assert_eq!(s.first_scheduled, Some(SimTime::ZERO));
    assert_eq!(s.cached_at_admission, Some(0));
    // Only the 2 full blocks (tokens 0..8) are registered; the partial third is not cacheable.
    assert_eq!(h.w.pool.cached_blocks(), 2);
    // Step 2 decodes token 10 (1 token), emits the 2nd and last output token and frees all 3 blocks.
    let (batch, done) = h.step();
    assert_eq!(batch, [(1, 1)]);
    assert_eq!(done.len(), 1);
    assert_eq!(
        done[0].prefill_tokens, 10,
        "the decode token is not prefill"
    );
    assert_eq!(h.w.pool.used(), 0);
    assert_eq!((h.w.completed, h.w.steps), (1, 2));
    assert!(h.w.start_step(h.now).is_none(), "nothing left to do");
}

/// The step that computes a prompt's last token reports the request's first token, once, in batch
/// order: the router hears of it there (`dynamo_kv` moves the request's prefill out of its active
/// load; latency observers get its TTFT). A request done at its first token is reported as well.
#[test]
fn the_step_that_ends_a_prefill_reports_its_first_token_once() {
    let mut h = Harness::new(worker(16, 8));
    h.enqueue(request(1, &[(10, 20)], 3), 0);
    h.enqueue(request(2, &[(20, 3)], 1), 0);
    // Chunks of 8, 8, then 1's last 4 with 2's 3 tokens; then decodes.
    let mut reported = Vec::new();
    while h.w.start_step(h.now).is_some() {
        h.now += SimDuration::from_millis(1);
        reported.push(h.w.finish_step(h.now).first_tokens);
    }
    assert_eq!(reported, [vec![], vec![], vec![1, 2], vec![], vec![]]);
}

#[test]
fn a_long_prompt_is_prefilled_in_budget_sized_chunks_across_steps() {
    let mut h = Harness::new(worker(16, 8));
    h.enqueue(request(1, &[(10, 20)], 2), 0);
    // Budget 8: chunks of 8, 8 and 4 tokens; no token is sampled until the prompt is complete.
    assert_eq!(h.step().0, [(1, 8)]);
    assert_eq!((h.running(1).computed, h.running(1).generated), (8, 0));
    assert_eq!(h.running(1).blocks.len(), 2);
    // A second request arrives mid-prefill: the running sequence is served first (8 of the budget),
    // so it waits although its 3 tokens would fit a block.
    h.enqueue(request(2, &[(20, 3)], 1), 0);
    assert_eq!(h.step().0, [(1, 8)]);
    assert_eq!(h.running(1).first_token, None);
    // Step 3: 1's last 4 prompt tokens, then 2's 3 tokens within the remaining budget of 4.
    let (batch, done) = h.step();
    assert_eq!(batch, [(1, 4), (2, 3)]);
    assert_eq!(h.running(1).first_token, Some(h.ends[2]));
    assert_eq!(h.running(1).blocks.len(), 5, "ceil(20 / 4)");
    assert_eq!(
        done.len(),
        1,
        "request 2 wanted one token: done at its first"
    );
    assert_eq!(done[0].first_token, Some(h.ends[2]));
    // Step 4: 1 decodes its 2nd and last token.
    let (batch, done) = h.step();
    assert_eq!(batch, [(1, 1)]);
    assert_eq!(done[0].prefill_tokens, 20);
    assert_eq!(done[0].first_scheduled, Some(SimTime::ZERO));
}

#[test]
fn a_cached_prefix_is_reused_and_only_the_rest_computed() {
    let mut h = Harness::new(worker(16, 64));
    // Request 1: 12 tokens of content 10 → blocks 0..3 registered at the end of its only step.
    h.enqueue(request(1, &[(10, 12)], 1), 0);
    assert_eq!(h.step().1.len(), 1);
    assert_eq!(h.w.pool.cached_blocks(), 3);
    // Request 2 shares those 12 tokens and adds 4: the 3 blocks hit, 4 tokens are computed in 1 new block.
    h.enqueue(request(2, &[(10, 12), (20, 4)], 1), 0);
    let (batch, done) = h.step();
    assert_eq!(batch, [(2, 4)]);
    assert_eq!(done[0].cached_at_admission, Some(12));
    assert_eq!(done[0].prefill_tokens, 4);
    assert_eq!(done[0].recompute.total_tokens(), 0);
}

#[test]
fn a_fully_cached_prompt_still_computes_its_last_block() {
    let mut h = Harness::new(worker(16, 64));
    h.enqueue(request(1, &[(10, 12)], 1), 0);
    h.step();
    // Same 12-token prompt again. All 3 blocks are cached, but the last token must be computed to
    // sample from it; reuse stops at the last full block before token 12 − 1 = 11, i.e. floor(11 / 4) =
    // 2 blocks (8 tokens), and the 4 tokens of block 2 are computed again.
    h.enqueue(request(2, &[(10, 12)], 1), 0);
    let (batch, done) = h.step();
    assert_eq!(batch, [(2, 4)]);
    assert_eq!(done[0].cached_at_admission, Some(8));
    assert_eq!(done[0].first_token, Some(h.ends[1]));
}

#[test]
fn a_hit_on_free_blocks_counts_them_against_the_free_space() {
    let mut h = Harness::new(worker(16, 64));
    // Request 1: 4 tokens of content 10 → 1 block, cached and free once it completes.
    h.enqueue(request(1, &[(10, 4)], 1), 0);
    assert_eq!(h.step().1.len(), 1);
    // Request 3: 51 tokens → 13 fresh blocks, 12 of them full (its next token still fits in the 13th),
    // leaving 3 free: two fresh and request 1's.
    h.enqueue(request(3, &[(30, 51)], 5), 0);
    h.step();
    assert_eq!((h.w.pool.free(), h.w.pool.cached_blocks()), (3, 13));
    // Request 2: request 1's 4 tokens plus 12. It hits 1 block and needs 3 new: 3 free blocks would
    // do, but taking the hit off the free queue leaves 2.
    h.enqueue(request(2, &[(10, 4), (20, 12)], 1), 0);
    h.step();
    assert_eq!(h.waiting_ids(), [2]);
    assert_eq!(h.running_ids(), [3]);
}

/// The shared set-up of the preemption cases: a pool of 5 blocks; X (8 tokens of content 10) and Z (the
/// same 8 tokens plus 4 of content 20) admitted together in step 1, so that Z computes the shared prefix
/// again in its own blocks (it was not cached yet at admission) and those copies stay anonymous.
///
/// Step 1: X takes 2 blocks, Z 3 (all 5). At its end X has 8 tokens computed, 1 sampled (9 tokens to
/// see); Z 12 computed, 1 sampled (13). Cached: X's 2 blocks (h0, h1) and Z's third (h2).
fn preemption_setup() -> Harness {
    let mut h = Harness::new(worker(5, 64));
    h.enqueue(request(1, &[(10, 8)], 10), 0);
    h.enqueue(request(2, &[(10, 8), (20, 4)], 10), 0);
    assert_eq!(h.step().0, [(1, 8), (2, 12)]);
    assert_eq!(h.w.pool.free(), 0);
    assert_eq!(h.w.pool.cached_blocks(), 3);
    h
}

#[test]
fn preemption_evicts_the_latest_admitted_and_admits_nothing_in_that_step() {
    let mut h = preemption_setup();
    // Step 2: X needs a 3rd block for token 9 and none is free: Z, admitted last, is preempted; its 3
    // blocks go back (its anonymous copies of h0/h1 and its cached h2, the last freed first), X takes
    // one (evicting h2), 2 stay free.
    let batch = h.start();
    assert_eq!(batch, [(1, 1)]);
    assert_eq!(
        (h.w.preemptions, h.running_ids(), h.waiting_ids()),
        (1, vec![1], vec![2])
    );
    // Z would fit again right now (its h0/h1 are X's blocks, in use; it needs 2 new blocks for tokens
    // 8..13 and 2 are free) but a step that preempted admits nothing, as vLLM v1's scheduler does.
    assert_eq!(h.w.pool.free(), 2);
    let z = &h.w.waiting[0];
    assert_eq!((z.computed, z.high_water, z.preemptions), (0, 12, 1));
    assert!(z.blocks.is_empty());
    h.finish();
    // Step 3: X decodes; Z is admitted with h0, h1 reused from X (8 tokens) and computes 8..13.
    assert_eq!(h.start(), [(1, 1), (2, 5)]);
    assert_eq!(h.w.pool.free(), 0);
}

#[test]
fn the_prefix_hit_is_the_one_at_the_first_admission() {
    let mut h = preemption_setup();
    h.step();
    h.step();
    // Z's first admission hit nothing (X's blocks were not registered yet); its readmission in step 3
    // reused 8 tokens. The request's hit is the first admission's.
    let z = h.running(2);
    assert_eq!(z.cached_at_admission, Some(0));
    assert_eq!(z.computed, 13);
}

#[test]
fn recompute_after_preemption_is_charged_to_preemption() {
    let mut h = preemption_setup();
    h.step();
    h.step();
    // Z had computed up to 12 (its high water). Readmitted with 8 tokens reused, it computes 8..13:
    // [8, 12) again because it was preempted (4 tokens), 12 for the first time. Block 2 (h2) was also
    // evicted from the pool, but the request's own progress was lost to preemption: that is the cause.
    let z = h.running(2);
    let again = RecomputeRun {
        start: 8,
        end: 12,
        cause: RecomputeCause::Preempted,
    };
    assert_eq!(z.runs, [again]);
    assert_eq!(tokens(z, RecomputeCause::Preempted), 4);
    assert_eq!(tokens(z, RecomputeCause::Evicted), 0);
    assert_eq!(z.recompute.total_tokens(), 4);
    assert!(z.recompute.gpu_seconds[RecomputeCause::Preempted.index()] > 0.0);
}

#[test]
fn misrouted_blocks_stop_before_the_block_of_the_last_token() {
    let mut h = Harness::new(worker(16, 64));
    // A 12-token prompt on an empty worker, while another worker held all 3 of its blocks. That worker
    // could have reused at most floor((12 − 1) / 4) = 2 blocks (the last token is always computed), so
    // 8 tokens are misrouted and the last block is not.
    h.enqueue(request(1, &[(10, 12)], 1), 3);
    let (_, done) = h.step();
    assert_eq!(tokens(&done[0], RecomputeCause::Misrouted), 8);
    assert_eq!(done[0].recompute.total_tokens(), 8);
}

#[test]
fn misrouted_blocks_are_those_held_elsewhere_beyond_the_local_hit() {
    let mut h = Harness::new(worker(16, 64));
    // Local cache: the first block of content 10 (request 1 computes 4 tokens + 1 sampled, registers 1).
    h.enqueue(request(1, &[(10, 4)], 1), 0);
    h.step();
    // Request 2: 20 tokens (content 10), another worker held its first 3 blocks. Local hit 1 block;
    // blocks 1 and 2 were elsewhere → tokens [4, 12) misrouted; blocks 3 and 4 are new content.
    h.enqueue(request(2, &[(10, 20)], 1), 3);
    let (batch, done) = h.step();
    assert_eq!(batch, [(2, 16)]);
    assert_eq!(tokens(&done[0], RecomputeCause::Misrouted), 8);
    assert_eq!(done[0].recompute.total_tokens(), 8);
}

#[test]
fn blocks_this_worker_evicted_are_charged_to_eviction() {
    let mut h = Harness::new(worker(4, 64));
    // Request 1 caches 2 blocks of content 10 (h0 in block 0, h1 in block 1). Freed tail first, the free
    // queue is then [2, 3, 1, 0]: the never-used blocks, then h1, then h0.
    h.enqueue(request(1, &[(10, 8)], 1), 0);
    h.step();
    // Request 2 (12 tokens of other content) takes 3 blocks from the head: 2, 3 and 1, evicting h1.
    h.enqueue(request(2, &[(20, 12)], 1), 0);
    h.step();
    assert_eq!(h.w.pool.evictions(), 1);
    // Request 3 repeats content 10 and adds 4 new tokens; another worker held its first 2 blocks. h0 is
    // still cached here (1 block hit); h1 was held elsewhere too, but this worker had it and evicted it,
    // so [4, 8) is charged to eviction. Block 2 is new content: the other worker could not have held it.
    h.enqueue(request(3, &[(10, 8), (30, 4)], 1), 2);
    let (batch, done) = h.step();
    assert_eq!(batch, [(3, 8)]);
    assert_eq!(done[0].cached_at_admission, Some(4));
    assert_eq!(tokens(&done[0], RecomputeCause::Evicted), 4);
    assert_eq!(done[0].recompute.total_tokens(), 4);
}

#[test]
fn new_work_waits_when_its_uncached_part_does_not_fit() {
    let mut h = Harness::new(worker(4, 64));
    h.enqueue(request(1, &[(10, 12)], 5), 0);
    h.enqueue(request(2, &[(20, 8)], 1), 0);
    // Request 1 takes 3 of the 4 blocks; request 2 needs 2: it waits, FCFS, although the budget is free.
    assert_eq!(h.step().0, [(1, 12)]);
    assert_eq!(h.waiting_ids(), [2]);
    assert!(h.w.can_ever_fit(8, 1));
    assert!(
        !h.w.can_ever_fit(16, 2),
        "16 + 2 − 1 = 17 tokens need 5 blocks of 4"
    );
}

#[test]
fn admission_stops_when_the_step_budget_is_spent() {
    let mut h = Harness::new(worker(16, 8));
    for id in 1..=3 {
        h.enqueue(request(id, &[(10 * id, 5)], 1), 0);
    }
    // Budget 8: request 1's 5 tokens, then 3 of request 2's (a chunk); nothing is left for request 3.
    assert_eq!(h.start(), [(1, 5), (2, 3)]);
    assert_eq!(h.waiting_ids(), [3]);
    h.finish();
    // Step 2: request 2's last 2 tokens first (it is running), then request 3's 5.
    assert_eq!(h.start(), [(2, 2), (3, 5)]);
}

#[test]
fn the_activation_reserve_is_the_runtime_plus_a_full_steps_activations_and_logits() {
    // Llama-3.1-8B: hidden 4096, intermediate 14336, vocabulary 128256. At an 8,192-token budget
    // and 256 sequences, on one GPU:
    //   1 GiB                                  = 1,073,741,824
    //   8192 × (4 × 4096 + 2 × 14336) × 2 B    =   738,197,504
    //   256 × 128256 × 30.95 B (sampler)       = 1,016,197,939.2
    //                                  total   = 2,828,137,267.2 bytes.
    let params = EngineParams::default();
    let tp1 = PerfModel::with_defaults(GpuId::H100, ModelId::Llama31_8b, 1, Precision::Bf16);
    assert!((activation_reserve_bytes(&tp1, &params) - 2_828_137_267.2).abs() < 1.0);
    // At TP 2 each GPU holds half of the hidden activations, the sampler's logits stay whole, and the
    // all-reduce buffers (1.641 GiB = 1,762,010,333.2 B) are added:
    // 1,073,741,824 + 369,098,752 + 1,016,197,939.2 + 1,762,010,333.2.
    let tp2 = PerfModel::with_defaults(GpuId::H100, ModelId::Llama31_8b, 2, Precision::Bf16);
    assert!((activation_reserve_bytes(&tp2, &params) - 4_221_048_848.4).abs() < 1.0);
}

/// `request` with scheduling priority `p` (lower is served first).
fn with_priority(mut r: Request, p: i32) -> Request {
    r.priority = p;
    r
}

#[test]
fn the_waiting_queue_is_ordered_by_priority_then_first_come_first_served() {
    let mut h = Harness::new(worker(50, 64));
    h.enqueue(with_priority(request(1, &[(1, 4)], 2), 1), 0);
    h.enqueue(with_priority(request(2, &[(2, 4)], 2), 0), 0);
    h.enqueue(with_priority(request(3, &[(3, 4)], 2), 1), 0);
    h.enqueue(with_priority(request(4, &[(4, 4)], 2), 0), 0);
    h.enqueue(with_priority(request(5, &[(5, 4)], 2), -1), 0);
    // Priority -1 first, then the two 0s in arrival order, then the two 1s in arrival order.
    assert_eq!(h.waiting_ids(), vec![5, 2, 4, 1, 3]);
}

/// Pool of 5 blocks of 4 tokens. Step 1: L (8 tokens) is admitted alone and computes them (2 blocks).
/// Then H (8 other tokens) arrives. Step 2: L needs a 3rd block for its 9th token (2 left free), H is
/// admitted with 2 blocks: none free. Step 3: L's 10th token fits in its 3rd block, but H needs a 3rd
/// block for its 9th token: someone is preempted. Returns (batch of step 3, running, waiting).
fn priority_preemption(low: i32, high: i32) -> (Vec<(u64, u32)>, Vec<u64>, Vec<u64>) {
    let mut h = Harness::new(worker(5, 64));
    h.enqueue(with_priority(request(1, &[(10, 8)], 10), low), 0);
    assert_eq!(h.step().0, [(1, 8)]);
    h.enqueue(with_priority(request(2, &[(30, 8)], 10), high), 0);
    assert_eq!(h.step().0, [(1, 1), (2, 8)]);
    assert_eq!(h.w.pool.free(), 0);
    let batch = h.start();
    assert_eq!(h.w.preemptions, 1);
    (batch, h.running_ids(), h.waiting_ids())
}

#[test]
fn preemption_takes_the_lowest_priority_even_when_it_was_admitted_first() {
    // Equal priorities: vLLM's FCFS rule, the last admitted (H) gives way and L decodes its 10th token.
    assert_eq!(priority_preemption(0, 0), (vec![(1, 1)], vec![1], vec![2]));
    // L has the lower priority (larger value): it gives way although admitted first, its token is taken
    // back out of the batch being built, and H decodes its 9th token in one of L's freed blocks.
    assert_eq!(priority_preemption(1, 0), (vec![(2, 1)], vec![2], vec![1]));
}

#[test]
fn a_prefill_only_sequence_is_handed_off_after_its_last_chunk_and_not_before() {
    // A prefill worker with an 8-token budget. An ordinary 2-token request asking for one token goes
    // first and completes in step 1; the prefill-only 12-token prompt behind it is prefilled in chunks
    // of 6 and 5 (everything but its last token, which the decode worker computes). It must not leave
    // with the completion in step 1, only after its last chunk.
    let mut h = Harness::new(worker(16, 8));
    h.enqueue(request(2, &[(20, 2)], 1), 0);
    let mut seq = Sequence::new(request(1, &[(10, 12)], 4), h.now, 0);
    seq.prefill_only = true;
    h.w.enqueue(seq);
    assert_eq!(h.start(), [(2, 2), (1, 6)]);
    let first = h.w.finish_step(h.now);
    let completed: Vec<u64> = first.completed.iter().map(|s| s.request.id).collect();
    assert_eq!(completed, [2]);
    assert!(first.handed_off.is_empty(), "6 of 11 tokens: not yet");
    assert_eq!(h.start(), [(1, 5)]);
    let second = h.w.finish_step(h.now);
    assert!(second.completed.is_empty(), "handed off, not completed");
    let [handed] = &second.handed_off[..] else {
        panic!("one sequence handed off, got {}", second.handed_off.len());
    };
    assert_eq!((handed.computed, handed.handed_off), (11, 11));
    assert!(!handed.prefill_only && handed.blocks.is_empty());
    assert_eq!(
        handed.generated, 0,
        "the decode worker samples the first token"
    );
    // Every block went back to the pool, the prompt's two full ones cached for the KV transfer.
    assert_eq!((h.w.pool.used(), h.w.pool.cached_blocks()), (0, 2));
    assert!(h.w.running.is_empty());
}

#[test]
fn a_never_quoted_request_keeps_its_own_blocks_out_of_the_index_unless_every_block_is_indexed() {
    // An 8-token shared head (2 blocks), 8 tokens of the request's own text (2 blocks), 9 output tokens:
    // the KV of 8 + 8 + 8 tokens (the last sample is never fed back) fills 6 blocks, of which the last
    // 4 (own text, then the answer) reach into what only this request could ask for.
    // A request whose own text a later one may quote (a conversation's turn) keeps every block indexed.
    for (never_quoted, every, indexed) in [(true, false, 2), (true, true, 6), (false, false, 6)] {
        let mut h = Harness::new(worker(16, 64));
        h.w.private_blocks = !every;
        let r = request(1, &[(7, 8), (100, 8)], 9).with_private_tail();
        h.enqueue(if never_quoted { r.never_quoted() } else { r }, 0);
        while h.step().1.is_empty() {}
        assert_eq!(h.w.pool.cached_blocks(), 6);
        assert_eq!(
            h.w.pool.indexed_blocks(),
            indexed,
            "never quoted: {never_quoted}, every block indexed: {every}"
        );
        h.w.check_invariants().unwrap();
    }
}

#[test]
fn a_request_taken_off_a_stalled_worker_publishes_its_own_blocks() {
    // The same request, timed out after its prefill (its 4 prompt blocks computed): it may be routed
    // again, so every cached block must be in the index.
    let mut h = Harness::new(worker(16, 64));
    h.enqueue(request(1, &[(7, 8), (100, 8)], 9).never_quoted(), 0);
    h.step();
    assert_eq!(
        (h.w.pool.cached_blocks(), h.w.pool.indexed_blocks()),
        (4, 2)
    );
    h.w.stall();
    let seq = h.w.remove(1).expect("request 1 is on the worker");
    assert_eq!(
        (h.w.pool.cached_blocks(), h.w.pool.indexed_blocks()),
        (4, 4)
    );
    assert!(
        !seq.may_stay_private,
        "it registers nothing privately any more"
    );
    h.w.check_invariants().unwrap();
}

/// A worker with a 12-token prompt cached and freed (3 evictable blocks), then requests 2 and 3 (5 and
/// 6 prompt tokens, `output` tokens each; request 3 never quoted, so its answer's blocks are private)
/// prefilled, and their first decode step in flight: a steady step.
fn decoding_pair(blocks: u32, output: u32) -> Harness {
    let mut h = Harness::new(worker(blocks, 64));
    h.enqueue(request(1, &[(1, 12)], 1), 0);
    assert_eq!(h.step().1.len(), 1, "request 1 completes at its prefill");
    assert_eq!((h.w.pool.used(), h.w.pool.cached_blocks()), (0, 3));
    h.enqueue(request(2, &[(2, 5)], output), 0);
    h.enqueue(request(3, &[(3, 6)], output).never_quoted(), 0);
    h.step();
    h.start();
    assert!(h.w.step_is_steady());
    h
}

/// What a run of [`decoding_pair`] must leave exactly as stepping one by one does: each running
/// sequence's blocks and counts, the worker's counters, and the pool (its use, content, evictions and
/// free-queue order, read by taking every free block).
fn worker_state(h: &mut Harness, output: u32) -> String {
    let seqs: Vec<_> = (h.w.running.iter())
        .map(|s| (s.request.id, s.computed, s.generated, s.blocks.clone()))
        .collect();
    let pool = &h.w.pool;
    // Request 3's own blocks are private: nothing may look them up.
    let content: Vec<_> = [request(1, &[(1, 12)], 1), request(2, &[(2, 5)], output)]
        .iter()
        .flat_map(|r| r.block_hashes(BS))
        .map(|hash| pool.lookup(hash))
        .collect();
    let counters = (
        pool.used(),
        pool.cached_blocks(),
        pool.indexed_blocks(),
        pool.evictions(),
        pool.peak_used(),
        h.w.steps,
        h.w.busy,
        h.w.busy_energy_j.to_bits(),
    );
    h.w.check_invariants().unwrap();
    let queue: Vec<_> = std::iter::from_fn(|| h.w.pool.allocate()).collect();
    format!("{seqs:?} {content:?} {counters:?} {queue:?}")
}

#[test]
fn a_run_across_blocks_leaves_the_worker_as_stepping_one_by_one_does() {
    // 40 blocks: the run is bounded by the output (30 tokens: 28 pure steps after the first decode
    // step, the last step ending it). 12 blocks: by the 8 free blocks, three of them evictable
    // content. With 5 and 6 tokens computed and 2 blocks each, the `m`-th step needs
    // ⌈(6 + m) / 4⌉ - 2 and ⌈(7 + m) / 4⌉ - 2 more: 4 + 4 at m = 17, 4 + 5 at m = 18.
    for (blocks, output, bound) in [(40, 30, 28), (12, 30, 17)] {
        let mut bulk = decoding_pair(blocks, output);
        let mut one = decoding_pair(blocks, output);
        let k = bulk.w.steady_steps_after(true);
        assert_eq!(k, bound, "{blocks} blocks");
        assert!(
            bulk.w.steady_steps_after(false) < BS,
            "within blocks a run ends at the next block boundary"
        );
        let mut durations = Vec::new();
        bulk.w.steady_step_times(k, &mut durations);
        let one_by_one: Vec<_> = (1..=k).map(|m| bulk.w.steady_step_time(m)).collect();
        assert_eq!(durations, one_by_one, "the batch's fixed cost, costed once");
        let mut allocated = Vec::new();
        bulk.w.advance_steady(&durations, &mut allocated);
        let mut expected = Vec::new();
        for (m, &d) in (1..).zip(&durations) {
            assert!(one.finish().is_empty(), "no pure step completes a sequence");
            let used = one.w.pool.used();
            let before = one.now;
            one.start();
            assert_eq!(one.now - before, d, "step {m}'s duration");
            if one.w.pool.used() != used {
                expected.push((m, one.w.pool.used()));
            }
        }
        assert!(
            expected.len() >= 4,
            "{blocks} blocks: the run allocated at only {} steps",
            expected.len()
        );
        assert_eq!(allocated, expected, "{blocks} blocks: allocations by step");
        assert_eq!(
            worker_state(&mut bulk, output),
            worker_state(&mut one, output),
            "{blocks} blocks"
        );
    }
}

#[test]
fn a_steps_energy_is_its_power_at_its_utilisation_over_its_duration() {
    for tp in [1, 2] {
        let mut w = worker(16, 64);
        w.perf = PerfModel::with_defaults(GpuId::H100, ModelId::Llama31_8b, tp, Precision::Bf16);
        let mut h = Harness::new(w);
        h.enqueue(request(1, &[(1, 12)], 3), 0);
        assert_eq!(h.start(), [(1, 12)]);
        let s = h.ends[0].since(SimTime::ZERO).as_secs_f64();
        let mut shape = StepShape::default();
        shape.add(12, 0);
        let u = h.w.perf.utilisation(&shape, s);
        assert!(u > 0.0 && u < 1.0, "utilisation {u}");
        // The busy power of each of the `tp` GPUs at that utilisation, for the step's duration.
        let expected = PowerModel::of(GpuId::H100).busy_w(u) * f64::from(tp) * s;
        assert!(expected > 0.0);
        assert_eq!(h.w.busy_energy_j, expected, "tp {tp}");
    }
}

#[test]
fn a_waiting_sequence_keeps_a_run_within_blocks() {
    // A sequence waits at a steady step when it cannot be admitted (too few free blocks, or
    // `max_num_seqs` running); its admission reads the free blocks at every step start, so no step of
    // the run may allocate.
    let mut h = decoding_pair(40, 30);
    h.enqueue(request(4, &[(4, 6)], 5), 0);
    assert_eq!(h.w.steady_steps_after(true), h.w.steady_steps_after(false));
    assert!(h.w.steady_steps_after(false) < BS);
}

mod lora {
    //! The V1 scheduler's LoRA skip rule on one worker, over random queues of adapter requests.

    use super::*;
    use crate::config::PositiveInt;
    use crate::lora::{AdapterRef, AdapterSlots, LoraParams};
    use proptest::prelude::*;

    fn lora_worker(max_loras: u32, blocks: u32, budget: u32) -> Worker {
        let mut w = worker(blocks, budget);
        w.lora = Some(AdapterSlots::new(LoraParams {
            max_loras: PositiveInt(max_loras),
            max_cpu_loras: Some(PositiveInt(max_loras + 1)),
            ..LoraParams::default()
        }));
        w
    }

    fn with_adapter(r: Request, adapter: Option<u64>) -> Request {
        match adapter {
            Some(id) => r.for_adapter(AdapterRef { id, rank: 16 }),
            None => r,
        }
    }

    proptest! {
        /// Every request completes; no batch holds more than `max_loras` adapters; and a waiting
        /// request is passed over only for its adapter: whenever one behind it is admitted, the one
        /// passed over names an adapter outside a full batch.
        #[test]
        fn the_skip_rule_holds_and_every_request_completes(
            max_loras in 1u32..4,
            reqs in proptest::collection::vec((proptest::option::of(0u64..6), 1u32..20, 1u32..6), 1..24),
        ) {
            let mut h = Harness::new(lora_worker(max_loras, 64, 32));
            for (i, &(adapter, prompt, output)) in reqs.iter().enumerate() {
                h.enqueue(with_adapter(request(i as u64, &[(i as u64 + 1, prompt)], output), adapter), 0);
            }
            let adapter_of = |id: u64| reqs[id as usize].0;
            let mut done = 0;
            for _ in 0..10_000 {
                if h.w.outstanding() == 0 {
                    break;
                }
                let waiting_before = h.waiting_ids();
                let running_before = h.running_ids();
                let batch = h.start();
                let mut in_batch: Vec<u64> = Vec::new();
                for &(id, _) in &batch {
                    if let Some(a) = adapter_of(id) && !in_batch.contains(&a) {
                        in_batch.push(a);
                    }
                }
                prop_assert!(in_batch.len() as u32 <= max_loras, "{in_batch:?}");
                // The requests admitted this step, and the waiting ones before the last of them.
                let admitted: Vec<u64> = batch.iter().map(|b| b.0).filter(|id| !running_before.contains(id)).collect();
                if let Some(&last) = admitted.last() {
                    let pos = waiting_before.iter().position(|&id| id == last).unwrap();
                    for &skipped in waiting_before[..pos].iter().filter(|id| !admitted.contains(id)) {
                        let a = adapter_of(skipped);
                        prop_assert!(a.is_some_and(|a| !in_batch.contains(&a)) && in_batch.len() as u32 == max_loras,
                            "request {skipped} ({a:?}) passed over with batch adapters {in_batch:?}");
                    }
                }
                done += h.finish().len();
                h.w.check_invariants().map_err(TestCaseError::fail)?;
            }
            prop_assert_eq!(done, reqs.len());
        }
    }
}

/// A worker of 50 blocks and a 64-token budget with asynchronous scheduling.
fn async_harness() -> Harness {
    let mut w = worker(50, 64);
    w.params.async_scheduling = true;
    Harness::new(w)
}

/// Asynchronous scheduling: a step that follows another back to back was formed when that one began.
/// A is admitted at once on the idle engine. L, queued as step 1 ends, misses step 2 (formed at 0)
/// and is scheduled in step 3. H, of a higher priority, is queued as step 2 ends, ahead of L: step 3
/// (formed when step 2 began) passes over it to L, and step 4 takes it. A step that leaves a request
/// for the next is not steady: the next one admits.
#[test]
fn async_scheduling_holds_a_request_queued_during_a_step_for_one_step_more() {
    let mut h = async_harness();
    h.enqueue(request(1, &[(1, 8)], 10), 0);
    assert_eq!(h.step().0, [(1, 8)]);
    h.enqueue(with_priority(request(2, &[(2, 8)], 10), 1), 0);
    assert_eq!(h.start(), [(1, 1)]);
    assert!(!h.w.step_is_steady(), "L joins the next step");
    h.finish();
    h.enqueue(with_priority(request(3, &[(3, 8)], 10), -1), 0);
    assert_eq!(h.waiting_ids(), vec![3, 2]);
    assert_eq!(h.step().0, [(1, 1), (2, 8)]);
    assert_eq!(h.step().0, [(1, 1), (2, 1), (3, 8)]);
}

/// With asynchronous scheduling, a step formed ahead that holds nothing takes no time: a request
/// queued while the last sequence's last step runs is scheduled as that step ends, and one queued
/// on an idle engine at once.
#[test]
fn async_scheduling_does_not_hold_a_request_back_when_the_engine_would_idle() {
    let mut h = async_harness();
    h.enqueue(request(1, &[(1, 8)], 1), 0);
    let (batch, done) = h.step();
    assert_eq!((batch, done.len()), (vec![(1, 8)], 1));
    h.enqueue(request(2, &[(2, 8)], 1), 0);
    assert_eq!(h.step().0, [(2, 8)]);
}

/// Engine parameters written before `async_scheduling` existed read as vLLM's default today: on.
#[test]
fn engine_parameters_without_async_scheduling_read_as_on() {
    let p: EngineParams = toml::from_str(
        "max_num_batched_tokens = 8192\nmax_num_seqs = 256\nblock_size = 16\n\
         enable_prefix_caching = true\ngpu_memory_utilization = 0.9",
    )
    .unwrap();
    assert!(p.async_scheduling);
    assert_eq!(p, EngineParams::default());
}
