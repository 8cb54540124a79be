//! Requests and their content identity.
//!
//! A prompt is described by a short list of [`Segment`]s, `(content id, token count)`, instead of its
//! tokens: a shared system prompt is one segment, a user message another, a previous answer a third.
//! Two prompts share a KV block iff they share every token up to the end of that block, so the hash of
//! block `b` chains the hash of block `b − 1` with the (content id, offset, length) pieces that fill
//! block `b` (the hash-chain identity of vLLM's automatic prefix caching). Memory per request is
//! O(segments), not O(tokens); block hashes are derived only when a worker admits the request.

use serde::Serialize;

use crate::rng::splitmix64;
use crate::time::SimTime;

/// Unique id of a request within a run.
pub type RequestId = u64;

/// A run of tokens with one identity: equal `content` and offset mean equal tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Segment {
    /// Content id: two segments with the same id hold the same tokens at the same offsets.
    pub content: u64,
    /// Tokens in the segment.
    pub tokens: u32,
}

/// The conversation a request belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SessionRef {
    /// Session id, unique within a run.
    pub id: u64,
    /// Turn index within the session, from 0.
    pub turn: u32,
}

/// One inference request as the gateway receives it.
///
/// Invariant: `prompt_tokens == Σ segments[i].tokens`, `prompt_tokens ≥ 1`, `output_tokens ≥ 1`.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub id: RequestId,
    pub session: Option<SessionRef>,
    /// Arrival at the gateway.
    pub arrival: SimTime,
    pub prompt_tokens: u32,
    pub output_tokens: u32,
    /// Content identity of the prompt, in order.
    pub segments: Vec<Segment>,
    /// Content id of the answer ([`Request::output_segment`]): derived from `id` by [`Request::new`]; a
    /// traffic mix ([`crate::workload::mix`]) renames it together with the prompt's content ids, so that
    /// a later turn that quotes this answer still matches what the worker cached.
    pub answer_content: u64,
    /// Index of the traffic class the request belongs to (`workload.classes`; 0 without a mix).
    pub class: u16,
    /// Scheduling priority: lower is served first (vLLM's `--scheduling-policy priority` convention);
    /// 0 without a mix. Equal priorities keep vLLM's first-come-first-served order exactly.
    pub priority: i32,
    /// Whether the last segment is this request's own text: content that no request arriving before
    /// this one holds (a generator's or trace reader's per-request unique id, a conversation's new
    /// message). Until this request is first routed, no worker can hold a block that reaches into it,
    /// which spares [`Request::first_private_block`]'s users a probe of every worker. `false` claims
    /// nothing.
    pub private_tail: bool,
    /// Whether no other request of the run ever quotes this request's own text or its answer (an
    /// independent request of a synthetic workload; a conversation's turn is quoted by the next, a trace
    /// row may be by a later row). With a [`Request::private_tail`], every block from
    /// [`Request::first_private_block`] on, answer included, can then only be asked for by this request
    /// itself, which spares the worker's prefix index those blocks ([`crate::worker::kv_cache`]).
    /// `false` claims nothing.
    pub never_quoted: bool,
    /// The model the request asks for (`model` in its workload table or trace row); `None`: whatever
    /// the fleet serves, and any worker may take it (every scenario before requests named models).
    pub model: Option<crate::hardware::ModelId>,
    /// The LoRA adapter the request asks for, on top of its model (`adapters` in its workload
    /// table); `None`: the base model.
    pub adapter: Option<crate::lora::AdapterRef>,
}

/// Tag mixed into the content id of a request's answer.
const OUTPUT_TAG: u64 = 0x6f75_7470_7574_0000;

impl Request {
    /// Builds a request, checking the invariant.
    pub fn new(
        id: RequestId,
        session: Option<SessionRef>,
        arrival: SimTime,
        output_tokens: u32,
        segments: Vec<Segment>,
    ) -> Self {
        let prompt_tokens: u32 = segments.iter().map(|s| s.tokens).sum();
        assert!(prompt_tokens >= 1, "request {id} has an empty prompt");
        assert!(output_tokens >= 1, "request {id} asks for no output");
        Request {
            id,
            session,
            arrival,
            prompt_tokens,
            output_tokens,
            segments,
            answer_content: Self::answer_segment(id, 1).content,
            class: 0,
            priority: 0,
            private_tail: false,
            never_quoted: false,
            model: None,
            adapter: None,
        }
    }

    /// This request asking for `model`. Its content ids, and its answer's, are renamed under the
    /// model, so that no KV block of one model hashes like one of another (the same text through two
    /// models is two caches); every request of a workload or trace is renamed alike, so a turn that
    /// quotes an earlier one still matches it.
    pub fn for_model(mut self, model: crate::hardware::ModelId) -> Self {
        let salt = crate::rng::fnv1a(format!("model/{}", model.as_str()).as_bytes());
        for seg in &mut self.segments {
            seg.content = splitmix64(seg.content ^ salt);
        }
        self.answer_content = splitmix64(self.answer_content ^ salt);
        self.model = Some(model);
        self
    }

    /// This request asking for `adapter` on top of its model. Its content ids are renamed under the
    /// adapter, as vLLM's prefix cache keys a block by the adapter's name too
    /// (`_gen_lora_extra_hash_keys`, `vllm/v1/core/kv_cache_utils.py` v0.19.1): no block computed
    /// with one adapter is reused under another or under the base model.
    pub fn for_adapter(mut self, adapter: crate::lora::AdapterRef) -> Self {
        let salt = splitmix64(adapter.id ^ 0x6c6f_7261_0000_0000);
        for seg in &mut self.segments {
            seg.content = splitmix64(seg.content ^ salt);
        }
        self.answer_content = splitmix64(self.answer_content ^ salt);
        self.adapter = Some(adapter);
        self
    }

    /// Marks the last segment as this request's own text ([`Request::private_tail`]).
    pub fn with_private_tail(mut self) -> Self {
        self.private_tail = true;
        self
    }

    /// Marks the request's own text and its answer as quoted by no other request
    /// ([`Request::never_quoted`]); implies a private tail.
    pub fn never_quoted(mut self) -> Self {
        self.private_tail = true;
        self.never_quoted = true;
        self
    }

    /// With a [`Request::private_tail`], the first block of `block_size` tokens that reaches into it:
    /// before this request is first routed, no worker caches that block or any after it.
    pub fn first_private_block(&self, block_size: u32) -> Option<usize> {
        let tail = self.segments.last().filter(|_| self.private_tail)?;
        Some(((self.prompt_tokens - tail.tokens) / block_size) as usize)
    }

    /// The segment that the answer to this request forms: the next turn of a conversation includes it.
    pub fn output_segment(&self) -> Segment {
        Segment {
            content: self.answer_content,
            tokens: self.output_tokens,
        }
    }

    /// The answer segment of request `id` with `output_tokens` tokens, without the request at hand (a
    /// workload that builds the next turn after the request itself is gone).
    pub fn answer_segment(id: RequestId, output_tokens: u32) -> Segment {
        Segment {
            content: splitmix64(id ^ OUTPUT_TAG),
            tokens: output_tokens,
        }
    }

    /// Hashes of the full blocks of the prompt followed by the answer (what a worker caches).
    pub fn block_hashes(&self, block_size: u32) -> Vec<u64> {
        block_hashes(
            self.segments
                .iter()
                .copied()
                .chain(std::iter::once(self.output_segment())),
            block_size,
        )
    }

    /// [`Request::block_hashes`], given those of an earlier stream this request's prompt begins with:
    /// `known` holds the hashes of the full blocks of a token stream described by `earlier`, and
    /// every segment of `earlier` begins this prompt, in order (a conversation's next turn quotes the
    /// last turn's prompt and answer). Those blocks hash the same here, so only the blocks after them
    /// are computed, appended to `known`. Returns `None`, hashing nothing, if the prompt does not
    /// begin with `earlier` or `known` does not hold one hash per full block of it.
    pub fn block_hashes_after(
        &self,
        block_size: u32,
        earlier: &[Segment],
        mut known: Vec<u64>,
    ) -> Option<Vec<u64>> {
        let earlier_tokens: u64 = earlier.iter().map(|s| u64::from(s.tokens)).sum();
        if known.len() as u64 != earlier_tokens / u64::from(block_size)
            || !self.segments.starts_with(earlier)
        {
            return None;
        }
        let skip = known.len() as u32 * block_size;
        let segments =
            (self.segments.iter().copied()).chain(std::iter::once(self.output_segment()));
        extend_chain(&mut known, segments, block_size, skip);
        debug_assert_eq!(
            known,
            self.block_hashes(block_size),
            "continued hashes differ"
        );
        Some(known)
    }

    /// Hashes of the full blocks of the prompt alone.
    pub fn prompt_block_hashes(&self, block_size: u32) -> Vec<u64> {
        block_hashes(self.segments.iter().copied(), block_size)
    }
}

/// Chained hashes of every full `block_size`-token block of the token stream that `segments` describe.
/// A trailing partial block has no hash (it cannot be shared).
pub fn block_hashes(segments: impl IntoIterator<Item = Segment>, block_size: u32) -> Vec<u64> {
    block_hashes_and_partial(segments, block_size).0
}

/// [`block_hashes`], plus the chain value after a trailing partial block, if the stream ends inside one.
///
/// A worker never caches a partial block; the partial hash exists for accounting that counts a prompt's
/// last, partial block as a unit (Mooncake's traces do: their last hash id usually covers fewer than 512
/// tokens). It encodes the partial block's length, so two partial blocks are equal iff they hold the same
/// tokens after the same prefix.
pub fn block_hashes_and_partial(
    segments: impl IntoIterator<Item = Segment>,
    block_size: u32,
) -> (Vec<u64>, Option<u64>) {
    let mut hashes = Vec::new();
    let partial = extend_chain(&mut hashes, segments, block_size, 0);
    (hashes, partial)
}

/// How many leading entries `a` and `b` share: the length of their common prefix. Routers ask this
/// of block-hash chains many times per request (a system prompt's dozens of blocks, on every worker),
/// so it compares eight entries at a time, in a form the compiler turns into vector instructions,
/// before it looks for the first difference one by one.
pub fn common_prefix_len(a: &[u64], b: &[u64]) -> usize {
    const LANES: usize = 8;
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + LANES <= n {
        let (x, y) = (&a[i..i + LANES], &b[i..i + LANES]);
        if x.iter().zip(y).fold(0, |acc, (p, q)| acc | (p ^ q)) != 0 {
            break;
        }
        i += LANES;
    }
    i + a[i..n]
        .iter()
        .zip(&b[i..n])
        .take_while(|(p, q)| p == q)
        .count()
}

/// The chain's value before the first block.
const CHAIN_START: u64 = 0x1234_5678_9abc_def0;

/// Appends to `hashes`, which holds the chained hashes of the stream's first `skip / block_size`
/// blocks (`skip` a multiple of `block_size`), the hashes of its further full blocks; returns the
/// chain value after a trailing partial block, if the stream ends inside one.
fn extend_chain(
    hashes: &mut Vec<u64>,
    segments: impl IntoIterator<Item = Segment>,
    block_size: u32,
    mut skip: u32,
) -> Option<u64> {
    assert!(block_size > 0, "block size must be positive");
    debug_assert_eq!(hashes.len() as u32 * block_size, skip);
    let mut chain = hashes.last().copied().unwrap_or(CHAIN_START);
    let mut fill: u32 = 0; // tokens already in the current block
    for seg in segments {
        // The skipped tokens are whole blocks, so the first piece after them starts a block.
        let mut offset = skip.min(seg.tokens);
        skip -= offset;
        while offset < seg.tokens {
            let take = (seg.tokens - offset).min(block_size - fill);
            // One piece: `take` tokens of `seg.content` starting at `offset`.
            let piece = splitmix64(seg.content ^ (u64::from(offset) << 32 | u64::from(take)));
            chain = splitmix64(chain.rotate_left(17) ^ piece);
            offset += take;
            fill += take;
            if fill == block_size {
                hashes.push(chain);
                fill = 0;
            }
        }
    }
    (fill > 0).then_some(chain)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The chunked comparison finds the first difference wherever it lies: inside a chunk of
        /// eight, at a chunk's edge, in the tail, or nowhere (one slice a prefix of the other).
        #[test]
        fn common_prefix_len_is_the_first_difference(
            shared in 0usize..40,
            a_tail in proptest::collection::vec(0u64..3, 0..20),
            b_tail in proptest::collection::vec(0u64..3, 0..20),
        ) {
            let head: Vec<u64> = (0..shared as u64).collect();
            let a: Vec<u64> = head.iter().copied().chain(a_tail).collect();
            let b: Vec<u64> = head.iter().copied().chain(b_tail).collect();
            let naive = a.iter().zip(&b).take_while(|(p, q)| p == q).count();
            prop_assert_eq!(common_prefix_len(&a, &b), naive);
            prop_assert_eq!(common_prefix_len(&b, &a), naive);
        }
    }

    fn seg(content: u64, tokens: u32) -> Segment {
        Segment { content, tokens }
    }

    #[test]
    fn equal_prefixes_share_block_hashes_and_diverge_after() {
        let a = block_hashes([seg(1, 40), seg(2, 30)], 16);
        let b = block_hashes([seg(1, 40), seg(3, 30)], 16);
        assert_eq!(a.len(), 4);
        // Blocks 0 and 1 are entirely segment 1; block 2 mixes segments 1 and 2 (or 3).
        assert_eq!(a[..2], b[..2]);
        assert_ne!(a[2], b[2]);
        assert_ne!(a[3], b[3]);
    }

    #[test]
    fn splitting_a_segment_changes_nothing_when_offsets_agree() {
        // The same content at the same offsets hashes the same whatever the segment boundaries are
        // only if the pieces are the same: block boundaries are what count.
        let a = block_hashes([seg(7, 32)], 16);
        let b = block_hashes([seg(7, 32)], 16);
        assert_eq!(a, b);
        let shifted = block_hashes([seg(9, 1), seg(7, 31)], 16);
        assert_ne!(a[0], shifted[0]);
    }

    #[test]
    fn a_next_turn_continues_the_last_turns_hashes() {
        let last = Request::new(7, None, SimTime::ZERO, 250, vec![seg(1, 1000), seg(2, 37)]);
        let mut earlier = last.segments.clone();
        earlier.push(last.output_segment());
        let mut quoted = earlier.clone();
        quoted.push(seg(3, 55));
        let next = Request::new(8, None, SimTime::ZERO, 90, quoted);
        // 1,287 tokens quoted: at 16 tokens a block the last known block ends inside the answer, at
        // 512 inside the system prompt's second block, at 7 mid-segment too.
        for bs in [1, 7, 16, 512, 4096] {
            let known = last.block_hashes(bs);
            assert_eq!(
                next.block_hashes_after(bs, &earlier, known.clone()),
                Some(next.block_hashes(bs)),
                "block size {bs}"
            );
            let mut short = known.clone();
            short.pop();
            if !known.is_empty() {
                assert_eq!(next.block_hashes_after(bs, &earlier, short), None);
            }
            let other = Request::new(9, None, SimTime::ZERO, 90, vec![seg(1, 1000), seg(4, 400)]);
            assert_eq!(other.block_hashes_after(bs, &earlier, known), None);
        }
    }

    #[test]
    fn chain_identity_depends_on_everything_before() {
        let a = block_hashes([seg(1, 16), seg(5, 16)], 16);
        let b = block_hashes([seg(2, 16), seg(5, 16)], 16);
        assert_ne!(
            a[1], b[1],
            "same block content after a different prefix must not match"
        );
    }

    #[test]
    fn next_turn_extends_previous_prompt_and_answer() {
        let t0 = Request::new(1, None, SimTime::ZERO, 20, vec![seg(10, 50)]);
        let t1 = Request::new(
            2,
            None,
            SimTime::ZERO,
            5,
            vec![seg(10, 50), t0.output_segment(), seg(11, 30)],
        );
        let h0 = t0.block_hashes(16);
        let h1 = t1.prompt_block_hashes(16);
        assert_eq!(h0.len(), 4); // 70 tokens: 4 full blocks
        assert_eq!(h0[..], h1[..4]);
    }

    #[test]
    fn partial_blocks_are_equal_only_with_equal_length_and_prefix() {
        let (full, part) = block_hashes_and_partial([seg(1, 16), seg(2, 5)], 16);
        assert_eq!(full, block_hashes([seg(1, 16), seg(2, 5)], 16));
        let (_, same) = block_hashes_and_partial([seg(1, 16), seg(2, 5)], 16);
        let (_, longer) = block_hashes_and_partial([seg(1, 16), seg(2, 6)], 16);
        let (_, other_prefix) = block_hashes_and_partial([seg(3, 16), seg(2, 5)], 16);
        assert!(part.is_some());
        assert_eq!(part, same);
        assert_ne!(part, longer);
        assert_ne!(part, other_prefix);
        assert_eq!(block_hashes_and_partial([seg(1, 32)], 16).1, None);
    }

    #[test]
    fn the_first_private_block_is_the_first_that_reaches_into_the_tail() {
        let r = Request::new(1, None, SimTime::ZERO, 8, vec![seg(7, 100), seg(9, 50)]);
        assert_eq!(r.first_private_block(16), None, "nothing claimed");
        let r = r.with_private_tail();
        // Block 6 holds tokens 96..112: it reaches into the tail, which starts at token 100.
        assert_eq!(r.first_private_block(16), Some(6));
        assert_eq!(
            r.first_private_block(4),
            Some(25),
            "block 25 starts exactly at token 100"
        );
        let alone = Request::new(2, None, SimTime::ZERO, 8, vec![seg(3, 40)]).with_private_tail();
        assert_eq!(alone.first_private_block(16), Some(0));
    }
}
