//! The paged KV block pool with automatic prefix caching (vLLM v1 semantics).
//!
//! A worker's KV memory is `total` blocks of `block_size` tokens. A block is either **used**
//! (`refs > 0`: some running sequence holds it) or **free** (`refs == 0`: on the free queue). A free
//! block may still hold a **cached** full block of content, identified by its chain hash, which a new
//! sequence with the same prefix can reuse instead of recomputing it. Allocation takes the block at
//! the head of the free queue, evicting whatever was cached in it: freed blocks join the tail, so
//! eviction is least-recently-used.
//!
//! **The free queue** is a ring of block ids in the order the blocks were freed, with lazy deletion: a
//! free block taken back into use (a prefix-cache hit) is not unlinked; its entry (whose position the
//! block's record keeps) is overwritten with a tombstone, and allocation skips tombstones as it meets
//! them. The other entries, in ring order, are exactly the list of free blocks by time of freeing that
//! a doubly linked list would hold, so eviction order is the same; but the head is read from memory in
//! sequence instead of chasing links through the block records, so allocation can ask for the records
//! and index entries of the blocks it will evict many allocations ahead, and a cache hit writes no
//! neighbour's record. When tombstones would make the ring longer than `2 · total`, it is compacted
//! in place (at least `total` tombstones go, so this costs O(1) per queued block, amortised).
//!
//! Invariants (checked by [`BlockPool::check_invariants`], asserted in debug builds after each operation,
//! and property-tested):
//! 1. `used + free == total`, where `used = #{refs > 0}` and `free` is the number of entries in the
//!    free queue other than tombstones; it holds at most `2 · total` entries.
//! 2. A block has an entry in the free queue iff its `refs == 0`, and then exactly one, at the position
//!    its record names.
//! 3. `index[h] == Cached(b)` iff block `b` holds content `h`.
//! 4. `index[h] == Evicted(_)` only for hashes evicted within the last `total` evictions and not cached
//!    since (a bounded "ghost" memory, used to attribute recompute to eviction). So the index holds at
//!    most `2 · total` entries, and its hash table never grows past what that needs. (Letting expired
//!    ghosts linger and sweeping them out in bulk saves a lookup per eviction but lets the table
//!    double: measured +70 MiB peak RSS on `bench-1m`, docs/performance.md.)
//!
//! **Private blocks.** Content that only the sequence computing it could ever ask for again (the blocks
//! past a never-quoted request's own text, [`crate::request::Request::never_quoted`]) may be registered
//! with [`BlockPool::register_private`]: the block holds it and counts as cached, but it is not entered
//! in the index, and its eviction leaves an anonymous ghost. Nothing but that sequence can look such a
//! hash up, so this saves the index its three lookups per block (entry, eviction, ghost expiry) without
//! changing what any lookup finds. The sequence must [`BlockPool::publish`] its private blocks before it
//! leaves the worker in any way but completing (preemption, a timeout, a crash that keeps the KV), since
//! it may then come back and look them up. So invariant 3 reads "`index[h] == Cached(b)` iff block `b`
//! holds content `h` and is indexed". Debug builds remember every private hash and panic if anything
//! looks one up (a hash leaves that memory only when it is published or the worker is wiped, so a long
//! debug run grows by some 32 bytes per private block computed; release builds keep nothing of the kind).
//!
//! Running out of blocks is not a bug: [`BlockPool::allocate`] returns `None` and the scheduler preempts.

use std::collections::VecDeque;

use super::content_index::{ContentIndex, EVICTION_BITS_MASK, MAX_BLOCKS, Slot, prefetch};

/// Index of a block in the pool.
pub type BlockId = u32;

/// A pool holds fewer blocks than this (the index packs block ids in 31 bits).
pub const MAX_POOL_BLOCKS: u32 = MAX_BLOCKS;

/// How many blocks ahead a walk over a list of blocks asks for their records: far enough to cover a
/// memory access (a walk's step is a few instructions, a miss some hundred nanoseconds: at 8 ahead,
/// `release` waited on three in four of its loads), near enough to stay in the first-level cache.
const PREFETCH_AHEAD: usize = 32;

/// How many hashes ahead a walk of lookups along a prompt asks for their index entries.
const LOOKUP_AHEAD: usize = 8;

/// How many evictions ahead an eviction asks for the index entry of the ghost that will expire then.
const GHOST_PREFETCH_AHEAD: usize = 8;

/// How far behind the free queue's head allocation asks for a block's record ([`BlockPool::allocate`]),
/// and how far for the index entry of the content that record names (read by the time it is that near).
const QUEUE_RECORD_AHEAD: usize = 16;
const QUEUE_ENTRY_AHEAD: usize = 6;

/// A free-queue entry whose block was taken back into use.
const TOMBSTONE: BlockId = BlockId::MAX;

/// The ghost of a private block's content (which the index never held).
const ANONYMOUS: u64 = 0;

/// A change to the set of cached blocks, for routers that learn the workers' caches from events (as
/// vLLM's KV-event publisher reports `BlockStored` / `BlockRemoved`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvEvent {
    /// A full block with this hash became cached.
    Stored(u64),
    /// The block with this hash was evicted.
    Removed(u64),
}

/// One block's bookkeeping, kept together so that touching a block (taking it off the free queue,
/// evicting its content, releasing it) costs one cache line instead of one per array: 16 bytes, so
/// that four fill a line and none straddles two (at 24 bytes, one in four did, and a walk that asked
/// for a record's first line still waited for its second).
#[derive(Clone, Copy, Debug)]
#[repr(align(16))]
struct Block {
    /// The chain hash of the block's content; meaningful only when `hashed`.
    hash: u64,
    /// The low 32 bits of the free-queue position of the block's entry, counted from the first entry
    /// ever queued (meaningful only while `refs == 0`). The queue holds fewer than `2 · total < 2^32`
    /// entries, so these bits and the queue's own count of entries taken off its front give the
    /// entry's place exactly ([`BlockPool::queue_index`]).
    queued_at: u32,
    /// Running sequences holding the block (the low 30 bits), [`Block::HASHED`] and
    /// [`Block::INDEXED`].
    state: u32,
}

impl Block {
    const EMPTY: Block = Block {
        hash: 0,
        queued_at: 0,
        state: 0,
    };

    /// The block holds a full block of content (`hash`).
    const HASHED: u32 = 1 << 30;
    /// That content is in the index (always, except for a private block).
    const INDEXED: u32 = 1 << 31;
    /// The bits of `state` that count references.
    const REFS: u32 = Self::HASHED - 1;

    /// Running sequences holding the block.
    fn refs(&self) -> u32 {
        self.state & Self::REFS
    }

    /// Sets the reference count; `refs` fits in its bits (only [`BlockPool::touch`] adds references,
    /// and it checks).
    fn set_refs(&mut self, refs: u32) {
        debug_assert!(refs <= Self::REFS);
        self.state = (self.state & !Self::REFS) | refs;
    }

    /// Whether the block holds a full block of content (`hash`).
    fn hashed(&self) -> bool {
        self.state & Self::HASHED != 0
    }

    /// Whether that content is in the index.
    fn indexed(&self) -> bool {
        self.state & Self::INDEXED != 0
    }

    fn set_hashed(&mut self, on: bool) {
        self.set_flag(Self::HASHED, on);
    }

    fn set_indexed(&mut self, on: bool) {
        self.set_flag(Self::INDEXED, on);
    }

    fn set_flag(&mut self, flag: u32, on: bool) {
        if on {
            self.state |= flag;
        } else {
            self.state &= !flag;
        }
    }

    /// The content's hash, if the block holds content.
    fn content(&self) -> Option<u64> {
        self.hashed().then_some(self.hash)
    }
}

const _: () = assert!(std::mem::size_of::<Block>() == 16);

/// Paged KV memory of one worker, with a prefix cache over its free blocks.
#[derive(Debug, Clone)]
pub struct BlockPool {
    block_size: u32,
    /// Per-block state, indexed by [`BlockId`].
    blocks: Vec<Block>,
    /// The free queue (see the module docs): its first live entry is evicted first. Its capacity is
    /// `2 · total`, allocated once.
    queue: VecDeque<BlockId>,
    /// The position of `queue[0]`: entries ever taken off the front.
    dequeued: u64,
    /// Entries in `queue` other than tombstones: the free blocks.
    free: u32,
    /// Chain hash → the block that caches it, or the eviction that removed it (one table, so that an
    /// eviction costs one lookup). It keeps 32 bits of each hash and confirms a match against the
    /// block's record or the ring of recent evictions ([`BlockPool::confirms`]).
    index: ContentIndex,
    /// Blocks with content (cached entries in `index`).
    cached: usize,
    /// The hashes of the last `total` evictions, oldest first. Every eviction pushes exactly one, so
    /// the eviction number of `ghosts[i]` is `evictions - ghosts.len() + i` and is not stored. The
    /// eviction of a private block pushes [`ANONYMOUS`], which has no index entry to expire.
    ghosts: VecDeque<u64>,
    /// Whether content whose hash equals [`ANONYMOUS`] was ever indexed (then an expiring anonymous
    /// ghost is looked up like any other, to tell it from that content's ghost by its number).
    anonymous_indexed: bool,
    /// Debug builds: every hash registered privately and not published since, to catch a lookup of one.
    #[cfg(debug_assertions)]
    private: std::collections::HashSet<u64>,
    evictions: u64,
    peak_used: u32,
    /// Cache events since the last drain; recorded only when someone listens.
    events: Option<Vec<KvEvent>>,
    /// Hashes evicted since the last drain, for write-down to KV tiers; recorded only when tiers exist.
    evicted: Option<Vec<u64>>,
}

impl BlockPool {
    /// A pool of `total` empty blocks of `block_size` tokens.
    pub fn new(total: u32, block_size: u32) -> Self {
        assert!(block_size > 0, "block size must be positive");
        assert!(total < MAX_POOL_BLOCKS, "too many blocks");
        let mut pool = BlockPool {
            block_size,
            blocks: vec![Block::EMPTY; total as usize],
            queue: VecDeque::with_capacity(2 * total as usize),
            dequeued: 0,
            free: 0,
            index: ContentIndex::with_bound(2 * total as usize),
            cached: 0,
            ghosts: VecDeque::new(),
            anonymous_indexed: false,
            #[cfg(debug_assertions)]
            private: Default::default(),
            evictions: 0,
            peak_used: 0,
            events: None,
            evicted: None,
        };
        for b in 0..total {
            pool.push_tail(b);
        }
        pool
    }

    /// Loses every block's content at once (the process holding the cache died): all blocks become
    /// empty and free, nothing is remembered as evicted, and pending events and evicted hashes are
    /// dropped. Lifetime counters ([`BlockPool::peak_used`], [`BlockPool::evictions`]) and what is
    /// being recorded survive, so a crash does not erase the worker's history from the summary.
    pub fn wipe(&mut self) {
        let mut fresh = BlockPool::new(self.total(), self.block_size);
        fresh.evictions = self.evictions;
        fresh.peak_used = self.peak_used;
        if self.events.is_some() {
            fresh.record_events();
        }
        if self.evicted.is_some() {
            fresh.record_evictions();
        }
        *self = fresh;
    }

    /// Tokens per block.
    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    /// Blocks in the pool.
    pub fn total(&self) -> u32 {
        self.blocks.len() as u32
    }

    /// Blocks on the free queue (empty or cached-but-evictable).
    pub fn free(&self) -> u32 {
        self.free
    }

    /// Blocks held by running sequences.
    pub fn used(&self) -> u32 {
        self.total() - self.free
    }

    /// References held on blocks, summed over blocks (a block shared by `k` sequences counts `k`).
    pub fn references(&self) -> u64 {
        self.blocks.iter().map(|b| u64::from(b.refs())).sum()
    }

    /// The most blocks ever used at once.
    pub fn peak_used(&self) -> u32 {
        self.peak_used
    }

    /// Cached blocks evicted so far.
    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    /// Distinct blocks of content currently cached (used or free).
    pub fn cached_blocks(&self) -> usize {
        self.cached
    }

    /// Starts recording [`KvEvent`]s for [`BlockPool::drain_events`].
    pub fn record_events(&mut self) {
        self.events.get_or_insert_with(Vec::new);
    }

    /// Starts recording evicted hashes for [`BlockPool::drain_evicted`] (write-down to KV tiers).
    pub fn record_evictions(&mut self) {
        self.evicted.get_or_insert_with(Vec::new);
    }

    /// Whether evicted hashes are being recorded.
    pub fn records_evictions(&self) -> bool {
        self.evicted.is_some()
    }

    /// Takes the hashes evicted since the last call, oldest first (none unless recording).
    pub fn drain_evicted(&mut self) -> Vec<u64> {
        self.evicted
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Whether cache events are being recorded.
    pub fn records_events(&self) -> bool {
        self.events.is_some()
    }

    /// Blocks whose content is in the index (every cached block but the private ones).
    #[cfg(test)]
    pub(crate) fn indexed_blocks(&self) -> usize {
        self.index
            .iter()
            .filter(|(_, s)| matches!(s, Slot::Cached(_)))
            .count()
    }

    /// Hashes of every block with content (cached or in use), in block order.
    pub fn content_hashes(&self) -> impl Iterator<Item = u64> + '_ {
        self.blocks.iter().filter_map(Block::content)
    }

    /// Takes the events recorded since the last call (none unless [`BlockPool::record_events`] was called).
    pub fn drain_events(&mut self) -> impl Iterator<Item = KvEvent> + '_ {
        self.events.iter_mut().flat_map(|e| e.drain(..))
    }

    /// Blocks needed to hold `tokens` tokens.
    pub fn blocks_for(&self, tokens: u32) -> u32 {
        tokens.div_ceil(self.block_size)
    }

    /// How many leading blocks of `hashes` are cached here. Does not change recency.
    pub fn cached_prefix(&self, hashes: &[u64]) -> usize {
        let mut hit = 0;
        while hit < hashes.len() && self.lookup_ahead(hashes, hit).is_some() {
            hit += 1;
        }
        hit
    }

    /// [`BlockPool::lookup`] of `hashes[i]` in a walk along `hashes`, asking first for the index entry
    /// of the hash [`LOOKUP_AHEAD`] further on (the walk's lookups do not depend on each other, so
    /// their misses can overlap).
    #[inline(always)]
    fn lookup_ahead(&self, hashes: &[u64], i: usize) -> Option<BlockId> {
        if let Some(&later) = hashes.get(i + LOOKUP_AHEAD) {
            self.index.prefetch(later);
        }
        self.lookup(hashes[i])
    }

    /// Appends to `out` the blocks that cache the leading blocks of `hashes`, up to the first not cached
    /// here, and returns how many it appended: [`BlockPool::cached_prefix`] and a
    /// [`BlockPool::lookup`] of each hit in one pass over the index. Does not change recency.
    pub fn cached_prefix_blocks(&self, hashes: &[u64], out: &mut Vec<BlockId>) -> usize {
        let before = out.len();
        for i in 0..hashes.len() {
            match self.lookup_ahead(hashes, i) {
                Some(b) => out.push(b),
                None => break,
            }
        }
        out.len() - before
    }

    /// [`BlockPool::cached_prefix_blocks`] with a hint: `blocks` starts with candidate blocks for the
    /// leading hashes. The leading candidates that still hold their hash, indexed, are kept without a
    /// lookup (by invariant 3 the index maps each such hash to that block); the rest are dropped, and
    /// the walk goes on through the index from the first that failed. Returns `blocks.len()`
    /// afterwards: exactly the blocks, and the count, that [`BlockPool::cached_prefix_blocks`] finds.
    /// Does not change recency.
    pub fn cached_prefix_blocks_hinted(&self, hashes: &[u64], blocks: &mut Vec<BlockId>) -> usize {
        let n = blocks.len().min(hashes.len());
        let mut still = 0;
        while still < n {
            if let Some(ahead) = blocks.get(still + PREFETCH_AHEAD)
                && let Some(block) = self.blocks.get(*ahead as usize)
            {
                prefetch(block);
            }
            if !self.holds_indexed(blocks[still], hashes[still]) {
                break;
            }
            still += 1;
        }
        blocks.truncate(still);
        let hit = still + self.cached_prefix_blocks(&hashes[still..], blocks);
        #[cfg(debug_assertions)]
        {
            let mut fresh = Vec::new();
            self.cached_prefix_blocks(hashes, &mut fresh);
            assert_eq!(*blocks, fresh, "a hint changed what the cache holds");
        }
        hit
    }

    /// The block that caches `hash`, if any.
    pub fn lookup(&self, hash: u64) -> Option<BlockId> {
        match self.probe(hash) {
            Some(Slot::Cached(b)) => Some(b),
            _ => None,
        }
    }

    /// Whether this pool evicted `hash` recently (within the last `total` evictions) and holds it no more.
    pub fn recently_evicted(&self, hash: u64) -> bool {
        matches!(self.probe(hash), Some(Slot::Evicted(_)))
    }

    /// The index entry of `hash`. Every lookup goes through here, so that debug builds can check that
    /// no private content is ever asked for.
    fn probe(&self, hash: u64) -> Option<Slot> {
        #[cfg(debug_assertions)]
        assert!(
            !self.private.contains(&hash),
            "content {hash:#x} was registered as private, yet it is looked up"
        );
        self.entry(hash).map(|pos| self.index.slot(pos))
    }

    /// Where the index keeps `hash`, if it does.
    fn entry(&self, hash: u64) -> Option<usize> {
        self.index.find(hash, |slot| self.confirms(hash, slot))
    }

    /// Whether an index entry whose tag matches `hash`'s is `hash`'s own: the block it names holds
    /// `hash`, indexed, or the eviction it names evicted `hash`.
    fn confirms(&self, hash: u64, slot: Slot) -> bool {
        match slot {
            Slot::Cached(b) => self.holds_indexed(b, hash),
            Slot::Evicted(low) => self.ghost(low) == Some(hash),
        }
    }

    /// Whether block `b` exists and holds content `hash`, indexed (what the index's `Cached(b)` for
    /// `hash` means, by invariant 3).
    fn holds_indexed(&self, b: BlockId, hash: u64) -> bool {
        self.blocks
            .get(b as usize)
            .is_some_and(|block| block.hashed() && block.indexed() && block.hash == hash)
    }

    /// The hash evicted by the remembered eviction whose number has these low bits. Every ghost in
    /// the index is one of the last `ghosts.len() <= total < 2^31` evictions (invariant 4), so the
    /// low bits name it exactly.
    fn ghost(&self, low: u32) -> Option<u64> {
        let last = self.evictions.checked_sub(1)?;
        let stamp = last - (last.wrapping_sub(u64::from(low)) & EVICTION_BITS_MASK);
        let first = self.evictions - self.ghosts.len() as u64;
        let i = stamp.checked_sub(first)?;
        self.ghosts.get(i as usize).copied()
    }

    /// Of the given blocks, how many sit on the free queue (reusing them takes them off it).
    pub fn free_among(&self, blocks: &[BlockId]) -> u32 {
        blocks
            .iter()
            .filter(|&&b| self.blocks[b as usize].refs() == 0)
            .count() as u32
    }

    /// [`BlockPool::touch`] of each of `blocks`, in order.
    pub fn touch_all(&mut self, blocks: &[BlockId]) {
        for (i, &b) in blocks.iter().enumerate() {
            if let Some(&ahead) = blocks.get(i + PREFETCH_AHEAD) {
                prefetch(&self.blocks[ahead as usize]);
            }
            self.take_reference(b);
        }
        // Touching only adds to the blocks in use, so the last touch's use is the peak of them all.
        self.note_use();
        self.debug_check();
    }

    /// Takes a reference to a cached block, removing it from the free queue if it was there (its entry
    /// becomes a tombstone).
    pub fn touch(&mut self, b: BlockId) {
        self.take_reference(b);
        self.note_use();
        self.debug_check();
    }

    /// [`BlockPool::touch`] but for the record of peak use and the debug check.
    #[inline]
    fn take_reference(&mut self, b: BlockId) {
        let block = &mut self.blocks[b as usize];
        let refs = block.refs();
        assert!(refs < Block::REFS, "more than 2^30 references to block {b}");
        if refs == 0 {
            let at = Self::queue_index(block.queued_at, self.dequeued);
            self.queue[at] = TOMBSTONE;
            self.free -= 1;
        }
        block.set_refs(refs + 1);
    }

    /// Takes the least recently freed block, evicting its cached content; `None` when every block is used.
    pub fn allocate(&mut self) -> Option<BlockId> {
        if self.free == 0 {
            return None;
        }
        let b = loop {
            let b = self.queue.pop_front().expect("a free block has an entry");
            self.dequeued += 1;
            // Every entry passes the prefetch distances once, tombstone or not.
            self.prefetch_queue();
            if b != TOMBSTONE {
                break b;
            }
        };
        self.free -= 1;
        let block = &mut self.blocks[b as usize];
        block.set_refs(1);
        if block.hashed() {
            block.set_hashed(false);
            let (h, indexed) = (block.hash, block.indexed());
            self.evict(b, h, indexed);
        }
        self.note_use();
        self.debug_check();
        Some(b)
    }

    /// Drops one reference to each block, last block first, so that a sequence's tail is evicted before
    /// its head (whose prefix is more likely to be shared).
    pub fn release(&mut self, blocks: &[BlockId]) {
        for (i, &b) in blocks.iter().enumerate().rev() {
            if let Some(&ahead) = i.checked_sub(PREFETCH_AHEAD).map(|j| &blocks[j]) {
                prefetch(&self.blocks[ahead as usize]);
            }
            let block = &mut self.blocks[b as usize];
            let refs = block.refs();
            assert!(refs > 0, "block {b} released more often than taken");
            block.set_refs(refs - 1);
            if refs == 1 {
                self.push_tail(b);
            }
        }
        self.debug_check();
    }

    /// Starts loading the index entry that looking up or registering `hash` will read first (a hint:
    /// changes nothing). A caller about to do many of those asks for the later ones early, so that
    /// their memory accesses overlap.
    #[inline(always)]
    pub fn prefetch_entry(&self, hash: u64) {
        self.index.prefetch(hash);
    }

    /// Records that used block `b` now holds the full block of content `hash`. If that content is already
    /// cached in another block, `b` stays anonymous (a duplicate computed concurrently).
    pub fn register(&mut self, b: BlockId, h: u64) {
        assert!(
            self.blocks[b as usize].refs() > 0,
            "only a used block can be filled"
        );
        if self.blocks[b as usize].hashed() {
            return;
        }
        #[cfg(debug_assertions)]
        assert!(
            !self.private.contains(&h),
            "content {h:#x} was registered as private, yet another block computes it"
        );
        if self.enter(b, h) {
            self.fill(b, h, true);
        }
    }

    /// [`BlockPool::register`] for content that only the sequence holding `b` can ever ask for (see
    /// the module docs): the block holds it and counts as cached, events and write-down see it as any
    /// other, but the index does not. The sequence must [`BlockPool::publish`] it if it leaves the
    /// worker other than by completing.
    pub fn register_private(&mut self, b: BlockId, h: u64) {
        let block = &self.blocks[b as usize];
        assert!(block.refs() > 0, "only a used block can be filled");
        if block.hashed() {
            return;
        }
        #[cfg(debug_assertions)]
        {
            assert!(
                self.entry(h).is_none(),
                "content {h:#x} registered as private is known to the index"
            );
            self.private.insert(h);
        }
        self.fill(b, h, false);
    }

    /// Block `b` now holds content `h`, in the index or not (the caller entered it there).
    fn fill(&mut self, b: BlockId, h: u64, indexed: bool) {
        let block = &mut self.blocks[b as usize];
        block.hash = h;
        block.set_hashed(true);
        block.set_indexed(indexed);
        self.cached += 1;
        if let Some(e) = &mut self.events {
            e.push(KvEvent::Stored(h));
        }
        self.debug_check();
    }

    /// Enters the private content among `blocks` in the index, as [`BlockPool::register`] would have
    /// when it was computed: the sequence holding them is leaving the worker without completing, and
    /// may come back for them.
    pub fn publish(&mut self, blocks: &[BlockId]) {
        for &b in blocks {
            let block = self.blocks[b as usize];
            if !block.hashed() || block.indexed() {
                continue;
            }
            #[cfg(debug_assertions)]
            self.private.remove(&block.hash);
            if self.enter(b, block.hash) {
                self.blocks[b as usize].set_indexed(true);
            } else {
                // Cached in another block after all: this one stays anonymous, as `register` leaves it.
                self.blocks[b as usize].set_hashed(false);
                self.cached -= 1;
            }
        }
        self.debug_check();
    }

    /// Makes the index say that block `b` caches `h`, unless another block already does (then returns
    /// `false` and changes nothing).
    fn enter(&mut self, b: BlockId, h: u64) -> bool {
        match self.entry(h) {
            Some(pos) => {
                if let Slot::Cached(_) = self.index.slot(pos) {
                    return false;
                }
                self.index.set(pos, Slot::Cached(b));
            }
            None => self.index.insert(h, Slot::Cached(b)),
        }
        self.anonymous_indexed |= h == ANONYMOUS;
        true
    }

    /// Checks every invariant in the module docs; `Err` names the first that fails.
    pub fn check_invariants(&self) -> Result<(), String> {
        let used = self.blocks.iter().filter(|b| b.refs() > 0).count() as u32;
        if used + self.free != self.total() {
            return Err(format!(
                "used {used} + free {} != total {}",
                self.free,
                self.total()
            ));
        }
        if self.queue.len() > 2 * self.blocks.len() {
            return Err(format!("free queue holds {} entries", self.queue.len()));
        }
        let mut on_queue = vec![false; self.blocks.len()];
        let mut n = 0;
        for (at, &b) in (self.dequeued..).zip(&self.queue) {
            if b == TOMBSTONE {
                continue;
            }
            let block = self
                .blocks
                .get(b as usize)
                .ok_or("free queue names no block")?;
            if block.refs() > 0 || block.queued_at != at as u32 {
                return Err(format!(
                    "free-queue entry {at} names block {b} (refs {}, queued at {})",
                    block.refs(),
                    block.queued_at
                ));
            }
            if std::mem::replace(&mut on_queue[b as usize], true) {
                return Err(format!("block {b} is twice in the free queue"));
            }
            n += 1;
        }
        if n != self.free {
            return Err(format!(
                "free queue holds {n} blocks, counter says {}",
                self.free
            ));
        }
        for (i, r) in self.blocks.iter().map(Block::refs).enumerate() {
            if (r == 0) != on_queue[i] {
                return Err(format!(
                    "block {i}: refs {r} but in the free queue = {}",
                    on_queue[i]
                ));
            }
        }
        self.index.check()?;
        let (mut cached, mut ghosts) = (0, 0);
        let mut named = vec![false; self.blocks.len()];
        for (tag, slot) in self.index.iter() {
            match slot {
                Slot::Cached(b) => {
                    cached += 1;
                    let block = self.blocks.get(b as usize).ok_or("index names no block")?;
                    if !block.hashed()
                        || !block.indexed()
                        || ContentIndex::tag_of(block.hash) != tag
                        || std::mem::replace(&mut named[b as usize], true)
                    {
                        return Err(format!(
                            "index entry {tag:#x} names block {b}, which holds {:?} (indexed: {})",
                            block.content(),
                            block.indexed()
                        ));
                    }
                    if self.entry(block.hash) != self.index.find_exact(block.hash, slot) {
                        return Err(format!("block {b}'s content is not found where it is"));
                    }
                }
                Slot::Evicted(low) => {
                    ghosts += 1;
                    match self.ghost(low) {
                        Some(h) if ContentIndex::tag_of(h) == tag => {}
                        other => {
                            return Err(format!(
                                "index entry {tag:#x} names eviction {low}, which evicted {other:?}"
                            ));
                        }
                    }
                }
            }
        }
        let hashed = self.blocks.iter().filter(|b| b.hashed()).count();
        // `indexed` is left set when a block loses its content: only a hashed block's flag counts.
        let indexed = self
            .blocks
            .iter()
            .filter(|b| b.hashed() && b.indexed())
            .count();
        if indexed != cached || hashed != self.cached {
            return Err(format!(
                "{hashed} hashed blocks ({indexed} indexed), {cached} cached index entries, counter {}",
                self.cached
            ));
        }
        if ghosts > self.ghosts.len() {
            return Err("more evicted entries than remembered evictions".into());
        }
        Ok(())
    }

    fn debug_check(&self) {
        #[cfg(debug_assertions)]
        if self.total() <= 1024
            && let Err(e) = self.check_invariants()
        {
            panic!("KV block pool invariant broken: {e}");
        }
    }

    fn note_use(&mut self) {
        self.peak_used = self.peak_used.max(self.used());
    }

    /// Forgets cached content `h` (in the index unless private), remembering the eviction for the next
    /// `total` evictions.
    fn evict(&mut self, b: BlockId, h: u64, indexed: bool) {
        let stamp = self.evictions;
        self.evictions += 1;
        self.cached -= 1;
        if indexed {
            let pos = (self.index)
                .find_exact(h, Slot::Cached(b))
                .expect("an indexed block is in the index");
            self.index.set(pos, Slot::evicted(stamp));
        }
        if let Some(e) = &mut self.events {
            e.push(KvEvent::Removed(h));
        }
        if let Some(e) = &mut self.evicted {
            e.push(h);
        }
        self.ghosts.push_back(if indexed { h } else { ANONYMOUS });
        if self.ghosts.len() > self.blocks.len() {
            let old_stamp = self.evictions - self.ghosts.len() as u64;
            let old = self.ghosts.pop_front().expect("non-empty");
            // Drop the ghost unless the content was cached again (or evicted again later) since.
            if (old != ANONYMOUS || self.anonymous_indexed)
                && let Some(pos) = (self.index).find_exact(old, Slot::evicted(old_stamp))
            {
                self.index.remove(pos);
            }
            // The ghost that expires some evictions from now.
            if let Some(&later) = self.ghosts.get(GHOST_PREFETCH_AHEAD) {
                self.index.prefetch(later);
            }
        }
    }

    /// Queues free block `b` at the back of the free queue, compacting the queue first if it is full.
    fn push_tail(&mut self, b: BlockId) {
        if self.queue.len() >= 2 * self.blocks.len() {
            self.compact();
        }
        // The low 32 bits of the position (the record keeps no more).
        self.blocks[b as usize].queued_at = (self.dequeued + self.queue.len() as u64) as u32;
        self.queue.push_back(b);
        self.free += 1;
    }

    /// Where in the queue the entry queued at the position whose low 32 bits are `queued_at` sits, when
    /// `dequeued` entries have left the queue's front: the queue holds fewer than `2^32` entries, so
    /// the difference of the low bits is the difference of the positions.
    fn queue_index(queued_at: u32, dequeued: u64) -> usize {
        queued_at.wrapping_sub(dequeued as u32) as usize
    }

    /// Drops the free queue's tombstones, keeping the other entries in order (renumbered from the front).
    /// Called once per `total` or more blocks queued; it walks the ring as one slice (rotating it into
    /// place first if it wraps), asking for each live entry's record some way ahead of renumbering it.
    #[cold]
    #[inline(never)]
    fn compact(&mut self) {
        let dequeued = self.dequeued;
        let blocks = &mut self.blocks;
        let entries = self.queue.make_contiguous();
        let mut kept = 0;
        for i in 0..entries.len() {
            if let Some(&ahead) = entries.get(i + PREFETCH_AHEAD)
                && let Some(record) = blocks.get(ahead as usize)
            {
                prefetch(record);
            }
            let b = entries[i];
            if b == TOMBSTONE {
                continue;
            }
            entries[kept] = b;
            blocks[b as usize].queued_at = dequeued.wrapping_add(kept as u64) as u32;
            kept += 1;
        }
        self.queue.truncate(kept);
        debug_assert_eq!(self.queue.len(), self.free as usize);
    }

    /// After an entry leaves the free queue: asks for the record of a block some way behind its head, and
    /// for the index entry of the content of one nearer (whose record the first request loaded), so
    /// that their evictions find them loaded. A hint only: changes nothing.
    fn prefetch_queue(&self) {
        if let Some(far) = self
            .queue
            .get(QUEUE_RECORD_AHEAD)
            .filter(|&&b| b != TOMBSTONE)
        {
            prefetch(&self.blocks[*far as usize]);
        }
        if let Some(near) = self
            .queue
            .get(QUEUE_ENTRY_AHEAD)
            .filter(|&&b| b != TOMBSTONE)
        {
            let block = &self.blocks[*near as usize];
            if block.hashed() && block.indexed() {
                self.index.prefetch(block.hash);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn tombstones_are_compacted_away_keeping_the_order_of_freeing() {
        let mut pool = BlockPool::new(4, 16);
        // Hits on block 1 while it is free: each leaves a tombstone behind.
        for _ in 0..10 {
            pool.touch(1);
            pool.release(&[1]);
            assert!(pool.queue.len() <= 8, "{} entries", pool.queue.len());
            pool.check_invariants().unwrap();
        }
        // The ring filled (4 blocks + 4 tombstones) and was compacted at least once.
        assert!(pool.dequeued == 0 && pool.queue.len() < 4 + 10);
        let order: Vec<_> = std::iter::from_fn(|| pool.allocate()).collect();
        assert_eq!(order, [0, 2, 3, 1]);
    }

    #[test]
    fn check_invariants_names_what_is_broken() {
        let healthy = || {
            let mut p = BlockPool::new(2, 16);
            let a = p.allocate().unwrap();
            p.register(a, 7);
            p.release(&[a]);
            let b = p.allocate().unwrap();
            assert_eq!(p.allocate(), Some(a)); // evicts content 7: one ghost
            p.release(&[b]);
            assert_eq!((a, b, p.free()), (0, 1, 1)); // block 1 alone is free
            p
        };
        healthy().check_invariants().unwrap();
        let broken = |edit: fn(&mut BlockPool), says: &str| {
            let mut p = healthy();
            edit(&mut p);
            let err = p.check_invariants().expect_err(says);
            assert!(err.contains(says), "{err:?} does not say {says:?}");
        };
        // A free block counted as used.
        broken(|p| p.blocks[1].set_refs(1), "used");
        // A free block's entry at another position than its record names.
        broken(|p| p.blocks[1].queued_at += 1, "queued at");
        // The same block queued twice.
        broken(|p| p.queue.push_back(1), "free");
        // A cached count that disagrees with the blocks.
        broken(|p| p.cached += 1, "counter");
    }

    #[test]
    #[should_panic(expected = "more than 2^30 references to block 0")]
    fn the_reference_count_refuses_to_overflow_into_the_flags() {
        let mut pool = BlockPool::new(1, 4);
        let b = pool.allocate().unwrap();
        pool.blocks[b as usize].set_refs(Block::REFS - 1);
        pool.touch(b); // the last count that fits
        assert_eq!(pool.blocks[b as usize].refs(), Block::REFS);
        assert!(!pool.blocks[b as usize].hashed());
        pool.touch(b);
    }

    #[test]
    fn queue_positions_past_two_to_the_32_change_nothing() {
        // Records keep 32 bits of their queue position: a pool whose count of dequeued entries crosses
        // 2^32 must take, evict and find exactly what a fresh one does.
        let (mut fresh, mut late) = (BlockPool::new(6, 4), BlockPool::new(6, 4));
        late.dequeued = (1 << 32) - 7;
        late.compact(); // renumbers every entry from there
        late.check_invariants().unwrap();
        let mut state = 12345u64;
        let mut held: Vec<BlockId> = Vec::new();
        let mut hits_on_free = 0;
        for step in 0..400 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let pick = (state >> 33) as usize;
            match pick % 10 {
                0..=2 => {
                    let (a, b) = (fresh.allocate(), late.allocate());
                    assert_eq!(a, b, "step {step}");
                    if let Some(b) = a {
                        let h = (pick % 9) as u64 + 1;
                        fresh.register(b, h);
                        late.register(b, h);
                        held.push(b);
                    }
                }
                3..=6 if !held.is_empty() => {
                    let b = held.swap_remove(pick % held.len());
                    fresh.release(&[b]);
                    late.release(&[b]);
                }
                _ => {
                    let h = (pick % 9) as u64 + 1;
                    assert_eq!(fresh.lookup(h), late.lookup(h), "step {step}");
                    if let Some(b) = fresh.lookup(h) {
                        hits_on_free += u32::from(fresh.blocks[b as usize].refs() == 0);
                        fresh.touch(b);
                        late.touch(b);
                        held.push(b);
                    }
                }
            }
            late.check_invariants().unwrap();
        }
        assert!(late.dequeued > 1 << 32, "the count crossed 2^32");
        assert!(
            hits_on_free > 10,
            "{hits_on_free} hits took a block off the queue"
        );
        assert_eq!(fresh.evictions(), late.evictions());
    }

    #[test]
    fn freed_blocks_stay_cached_until_evicted_lru() {
        let mut p = BlockPool::new(3, 16);
        let a = p.allocate().unwrap();
        let b = p.allocate().unwrap();
        p.register(a, 100);
        p.register(b, 200);
        p.release(&[a, b]); // b freed first (tail first), then a
        assert_eq!(p.cached_prefix(&[100, 200]), 2);
        assert_eq!(p.free(), 3);
        // The never-used block goes first, then b (freed before a).
        let c = p.allocate().unwrap();
        assert!(c != a && c != b);
        let d = p.allocate().unwrap();
        assert_eq!(d, b);
        assert_eq!(p.cached_prefix(&[100, 200]), 1);
        assert!(p.recently_evicted(200));
        assert_eq!(p.allocate(), Some(a));
        assert_eq!(p.allocate(), None);
        assert_eq!(p.evictions(), 2);
    }

    #[test]
    fn wipe_loses_content_but_keeps_lifetime_counters() {
        let mut p = BlockPool::new(2, 16);
        p.record_evictions();
        let a = p.allocate().unwrap();
        p.register(a, 1);
        p.release(&[a]);
        let b = p.allocate().unwrap();
        let c = p.allocate().unwrap(); // evicts hash 1
        assert_eq!((p.evictions(), p.peak_used()), (1, 2));
        p.wipe();
        // Everything is empty and free again, and the crash is not an eviction.
        assert_eq!((p.free(), p.cached_blocks(), p.references()), (2, 0, 0));
        assert!(!p.recently_evicted(1), "a crash forgets, it does not evict");
        assert_eq!(
            p.drain_evicted(),
            Vec::<u64>::new(),
            "pending write-downs die with the GPU"
        );
        // History survives: the worker once used both blocks and evicted one.
        assert_eq!((p.evictions(), p.peak_used()), (1, 2));
        assert!(p.records_evictions());
        let _ = (b, c);
    }

    #[test]
    fn evictions_are_remembered_for_the_last_total_evictions() {
        let mut p = BlockPool::new(2, 16);
        let (a, b) = (p.allocate().unwrap(), p.allocate().unwrap());
        p.register(a, 1);
        p.register(b, 2);
        p.release(&[a]);
        p.release(&[b]); // free queue: a, b
        let x = p.allocate().unwrap(); // eviction 0: content 1
        p.register(x, 3);
        let y = p.allocate().unwrap(); // eviction 1: content 2
        p.register(y, 4);
        assert!(p.recently_evicted(1) && p.recently_evicted(2));
        p.release(&[x]);
        p.allocate().unwrap(); // eviction 2: content 3; eviction 0 is now 2 evictions back
        assert_eq!(p.evictions(), 3);
        assert!(
            !p.recently_evicted(1),
            "only the last `total` = 2 evictions count"
        );
        assert!(p.recently_evicted(2) && p.recently_evicted(3));
        assert!(!p.recently_evicted(4), "content 4 is still cached");
        p.check_invariants().unwrap();
    }

    #[test]
    fn an_expiring_ghost_spares_a_later_eviction_of_the_same_content() {
        // 2 blocks. Content 7 is evicted (eviction 0), cached again, and evicted again (eviction 3).
        // Eviction 0's ghost expires while 7 is cached (the entry must stay: it is 7's block), and
        // eviction 1's (content 9) when 7 is evicted again (9's entry must go, 7's stay). The ghosts'
        // eviction numbers are implicit, so an off-by-one would keep 9 or drop 7.
        let mut p = BlockPool::new(2, 16);
        let a = p.allocate().unwrap();
        p.register(a, 7);
        p.release(&[a]);
        let b = p.allocate().unwrap(); // empty block: no eviction
        p.register(b, 8);
        let c = p.allocate().unwrap(); // eviction 0: content 7
        assert_eq!(p.evictions(), 1);
        p.register(c, 9);
        p.release(&[c]);
        p.release(&[b]); // free queue: c (9), b (8)
        let d = p.allocate().unwrap(); // eviction 1: content 9
        p.register(d, 7); // 7 cached again
        p.release(&[d]); // free queue: b (8), d (7)
        p.allocate().unwrap(); // eviction 2: content 8
        p.allocate().unwrap(); // eviction 3: content 7 again; evictions 0 and 1 expire
        assert_eq!(p.evictions(), 4);
        assert!(
            p.recently_evicted(7),
            "eviction 3 of content 7 is within the last 2"
        );
        assert!(p.recently_evicted(8) && !p.recently_evicted(9));
        p.check_invariants().unwrap();
    }

    #[test]
    fn the_index_holds_at_most_the_cached_blocks_and_the_last_total_evictions() {
        // Endless new content through 4 blocks: the index must not keep every hash ever evicted,
        // only the 4 cached and the 4 most recently evicted (invariant 4).
        let mut p = BlockPool::new(4, 16);
        for h in 0..5_000u64 {
            let b = p.allocate().unwrap();
            p.register(b, h);
            p.release(&[b]);
            assert!(p.index.len() <= 8, "index holds {} entries", p.index.len());
        }
        assert!(p.recently_evicted(4_995) && !p.recently_evicted(4_990));
        p.check_invariants().unwrap();
    }

    #[test]
    fn touching_a_cached_block_protects_it() {
        let mut p = BlockPool::new(2, 16);
        let a = p.allocate().unwrap();
        p.register(a, 1);
        p.release(&[a]);
        p.touch(a);
        assert_eq!(p.free(), 1);
        let other = p.allocate().unwrap();
        assert_ne!(other, a);
        assert_eq!(p.allocate(), None);
        assert_eq!(p.lookup(1), Some(a));
    }

    #[test]
    fn events_report_stores_and_evictions_when_recorded() {
        let mut p = BlockPool::new(1, 16);
        let a = p.allocate().unwrap();
        p.register(a, 5);
        assert_eq!(p.drain_events().count(), 0, "not recording yet");
        p.record_events();
        p.release(&[a]);
        let b = p.allocate().unwrap();
        p.register(b, 6);
        assert_eq!(
            p.drain_events().collect::<Vec<_>>(),
            [KvEvent::Removed(5), KvEvent::Stored(6)]
        );
        assert_eq!(p.drain_events().count(), 0);
    }

    #[test]
    fn a_hint_saves_lookups_but_never_changes_what_is_found() {
        let mut p = BlockPool::new(4, 16);
        let held: Vec<BlockId> = (0..3).map(|_| p.allocate().unwrap()).collect();
        for (&b, h) in held.iter().zip([10, 11, 12]) {
            p.register(b, h);
        }
        p.release(&held);
        let found = |hint: &[BlockId], hashes: &[u64]| {
            let mut blocks = hint.to_vec();
            let n = p.cached_prefix_blocks_hinted(hashes, &mut blocks);
            assert_eq!(n, blocks.len());
            blocks
        };
        assert_eq!(found(&held, &[10, 11, 12]), held, "a hint that still holds");
        assert_eq!(
            found(&held[..1], &[10, 11, 12]),
            held,
            "a short hint: the index does the rest"
        );
        assert_eq!(
            found(&[held[1], held[0]], &[10, 11]),
            held[..2],
            "a wrong hint"
        );
        assert_eq!(
            found(&[99, 7], &[10, 11]),
            held[..2],
            "blocks no pool of this size has"
        );
        assert_eq!(found(&held, &[10, 13]), held[..1], "a prompt that diverges");
        // Every block is taken again (released tail first, so content 12 goes first and 10 last) and
        // the hint's first block now holds other content: the hint is stale.
        let mut q = p.clone();
        let taken: Vec<BlockId> = (0..4).map(|_| q.allocate().unwrap()).collect();
        assert_eq!(taken[3], held[0]);
        q.register(held[0], 20);
        let mut blocks = held.clone();
        assert_eq!(q.cached_prefix_blocks_hinted(&[10, 11, 12], &mut blocks), 0);
        assert!(blocks.is_empty());
    }

    #[test]
    fn duplicate_content_is_not_indexed_twice() {
        let mut p = BlockPool::new(2, 16);
        let a = p.allocate().unwrap();
        let b = p.allocate().unwrap();
        p.register(a, 9);
        p.register(b, 9);
        assert_eq!(p.lookup(9), Some(a));
        assert_eq!(p.cached_blocks(), 1);
        p.check_invariants().unwrap();
    }

    #[test]
    fn a_private_block_is_cached_but_not_indexed_and_leaves_an_anonymous_ghost() {
        let mut p = BlockPool::new(2, 16);
        p.record_events();
        p.record_evictions();
        let a = p.allocate().unwrap();
        p.register_private(a, 5);
        assert_eq!(p.cached_blocks(), 1);
        assert_eq!(p.index.len(), 0, "private content stays out of the index");
        assert_eq!(p.content_hashes().collect::<Vec<_>>(), [5]);
        p.release(&[a]);
        let b = p.allocate().unwrap(); // the empty block
        p.register(b, 6);
        p.release(&[b]);
        p.allocate().unwrap(); // evicts private content 5
        assert_eq!((p.evictions(), p.cached_blocks()), (1, 1));
        assert_eq!(p.ghosts, [ANONYMOUS]);
        assert_eq!(p.entry(5), None);
        // Events and write-down see the private block like any other.
        assert_eq!(
            p.drain_events().collect::<Vec<_>>(),
            [KvEvent::Stored(5), KvEvent::Stored(6), KvEvent::Removed(5)]
        );
        assert_eq!(p.drain_evicted(), [5]);
        p.check_invariants().unwrap();
    }

    #[test]
    fn publishing_enters_private_blocks_as_registering_them_would_have() {
        let mut p = BlockPool::new(3, 16);
        let (a, b) = (p.allocate().unwrap(), p.allocate().unwrap());
        p.register(a, 1);
        p.register_private(b, 2);
        p.publish(&[a, b]);
        assert_eq!((p.lookup(1), p.lookup(2)), (Some(a), Some(b)));
        assert_eq!(p.cached_blocks(), 2);
        p.publish(&[b]); // already indexed: nothing changes
        assert_eq!((p.index.len(), p.cached_blocks()), (2, 2));
        p.check_invariants().unwrap();
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "registered as private, yet it is looked up")]
    fn debug_builds_catch_a_lookup_of_private_content() {
        let mut p = BlockPool::new(2, 16);
        let a = p.allocate().unwrap();
        p.register_private(a, 5);
        p.release(&[a]);
        p.cached_prefix(&[5]);
    }

    #[test]
    fn content_equal_to_the_anonymous_ghost_still_expires_by_its_number() {
        // A real hash equal to the anonymous ghost's value: its own ghost must still expire (and only
        // its own, not an anonymous one's slot).
        let mut p = BlockPool::new(1, 16);
        let a = p.allocate().unwrap();
        p.register(a, ANONYMOUS);
        p.release(&[a]);
        let b = p.allocate().unwrap(); // eviction 0: content ANONYMOUS (indexed)
        p.register_private(b, 7);
        p.release(&[b]);
        assert!(p.recently_evicted(ANONYMOUS));
        p.allocate().unwrap(); // eviction 1: private 7; eviction 0 expires
        assert!(!p.recently_evicted(ANONYMOUS));
        assert_eq!(p.index.len(), 0, "{:?}", p.index);
        p.check_invariants().unwrap();
    }

    proptest! {
        /// Two pools driven alike, one registering a range of content privately (content that only its
        /// holder asks for, published when its holder leaves early) and one indexing everything: every
        /// lookup of other content, the eviction memory included, answers the same, and so do the
        /// counters.
        #[test]
        fn private_blocks_change_no_answer_about_other_content(
            total in 1u32..24,
            ops in proptest::collection::vec((0u8..4, 0u64..30, 0usize..64), 1..400),
        ) {
            let (mut private, mut indexed) = (BlockPool::new(total, 16), BlockPool::new(total, 16));
            // Blocks held alike by both pools.
            let mut held: Vec<BlockId> = Vec::new();
            let mut next_private = 1_000u64;
            for (kind, h, i) in ops {
                match kind {
                    0 => {
                        // Shared content: looked up first, as an admission does.
                        let hit = private.lookup(h);
                        prop_assert_eq!(hit, indexed.lookup(h));
                        if let Some(b) = hit {
                            private.touch(b);
                            indexed.touch(b);
                            held.push(b);
                        } else if let Some(b) = private.allocate() {
                            prop_assert_eq!(Some(b), indexed.allocate());
                            private.register(b, h);
                            indexed.register(b, h);
                            held.push(b);
                        }
                    }
                    1 => {
                        // Content no one else will ever ask for.
                        if let Some(b) = private.allocate() {
                            prop_assert_eq!(Some(b), indexed.allocate());
                            private.register_private(b, next_private);
                            indexed.register(b, next_private);
                            next_private += 1;
                            held.push(b);
                        }
                    }
                    2 if !held.is_empty() => {
                        // A holder completes: its private content is dead.
                        let b = held.swap_remove(i % held.len());
                        private.release(&[b]);
                        indexed.release(&[b]);
                    }
                    _ if !held.is_empty() => {
                        // A holder leaves early (preempted): it publishes first, and may come back.
                        let b = held.swap_remove(i % held.len());
                        private.publish(&[b]);
                        private.release(&[b]);
                        indexed.release(&[b]);
                    }
                    _ => {}
                }
                prop_assert!(private.check_invariants().is_ok(), "{:?}", private.check_invariants());
                for h in 0..30 {
                    prop_assert_eq!(private.lookup(h), indexed.lookup(h));
                    prop_assert_eq!(private.recently_evicted(h), indexed.recently_evicted(h));
                }
                prop_assert_eq!(private.cached_blocks(), indexed.cached_blocks());
                prop_assert_eq!(private.evictions(), indexed.evictions());
                prop_assert_eq!(private.free(), indexed.free());
            }
        }
    }

    proptest! {
        /// The index keeps 32 bits of each hash and confirms the rest through the block or the ring of
        /// evictions. Two pools driven alike, one with small hashes and one with hashes that share
        /// their low 32 bits in pairs (so every tag names two contents), give the same answers to
        /// every lookup, eviction memory included.
        #[test]
        fn hashes_sharing_their_low_bits_are_told_apart(
            total in 1u32..24,
            ops in proptest::collection::vec(op(), 1..300),
        ) {
            let collide = |h: u64| ((h % 2) << 40) | (h / 2);
            let (mut plain, mut tagged) = (BlockPool::new(total, 16), BlockPool::new(total, 16));
            let mut held: Vec<BlockId> = Vec::new();
            for op in ops {
                match op {
                    Op::Alloc(h) => {
                        let b = plain.allocate();
                        prop_assert_eq!(b, tagged.allocate());
                        if let Some(b) = b {
                            plain.register(b, h);
                            tagged.register(b, collide(h));
                            held.push(b);
                        }
                    }
                    Op::Release(i) if !held.is_empty() => {
                        let b = held.swap_remove(i % held.len());
                        plain.release(&[b]);
                        tagged.release(&[b]);
                    }
                    Op::TouchCached(h) => {
                        let b = plain.lookup(h);
                        prop_assert_eq!(b, tagged.lookup(collide(h)));
                        if let Some(b) = b {
                            plain.touch(b);
                            tagged.touch(b);
                            held.push(b);
                        }
                    }
                    Op::Release(_) => {}
                }
                prop_assert!(tagged.check_invariants().is_ok(), "{:?}", tagged.check_invariants());
                for h in 0..40 {
                    prop_assert_eq!(plain.lookup(h), tagged.lookup(collide(h)));
                    prop_assert_eq!(plain.recently_evicted(h), tagged.recently_evicted(collide(h)));
                }
                prop_assert_eq!(plain.evictions(), tagged.evictions());
            }
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Alloc(u64),
        Release(usize),
        TouchCached(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u64..40).prop_map(Op::Alloc),
            (0usize..64).prop_map(Op::Release),
            (0u64..40).prop_map(Op::TouchCached),
        ]
    }

    proptest! {
        /// Allocation takes the least recently freed block, exactly as a list of free blocks in order
        /// of freeing (taking a cached block back removes it from the middle) would give it, however
        /// many tombstones the ring collects and compacts away. Touches and releases outnumber
        /// allocations, so the ring fills with tombstones and compacts often.
        #[test]
        fn the_free_queue_is_a_list_in_order_of_freeing(
            total in 1u32..24,
            ops in proptest::collection::vec(op(), 1..600),
        ) {
            let mut pool = BlockPool::new(total, 16);
            let mut order: VecDeque<BlockId> = (0..total).collect();
            let mut held: Vec<BlockId> = Vec::new();
            for op in ops {
                // Three in four `Alloc`s release a held block instead.
                let op = match op {
                    Op::Alloc(h) if h % 4 != 0 => Op::Release(h as usize),
                    op => op,
                };
                match op {
                    Op::Alloc(h) => {
                        let got = pool.allocate();
                        prop_assert_eq!(got, order.pop_front());
                        if let Some(b) = got {
                            pool.register(b, h);
                            held.push(b);
                        }
                    }
                    Op::Release(i) if !held.is_empty() => {
                        let b = held.swap_remove(i % held.len());
                        pool.release(&[b]);
                        if pool.blocks[b as usize].refs() == 0 {
                            order.push_back(b);
                        }
                    }
                    Op::TouchCached(h) => {
                        // Any block, cached or not: a hit on the free queue's middle, or another
                        // reference to a used block.
                        let b = (h as u32) % total;
                        pool.touch(b);
                        order.retain(|&x| x != b);
                        held.push(b);
                    }
                    _ => {}
                }
                prop_assert!(pool.check_invariants().is_ok(), "{:?}", pool.check_invariants());
                prop_assert_eq!(pool.free() as usize, order.len());
            }
        }
    }

    proptest! {
        /// used + free == total (and every other invariant) after every operation of any sequence.
        #[test]
        fn blocks_are_conserved(total in 1u32..48, ops in proptest::collection::vec(op(), 1..300)) {
            let mut pool = BlockPool::new(total, 16);
            let mut held: Vec<BlockId> = Vec::new();
            for op in ops {
                match op {
                    Op::Alloc(h) => {
                        if let Some(b) = pool.allocate() {
                            pool.register(b, h);
                            held.push(b);
                        } else {
                            prop_assert_eq!(pool.free(), 0);
                        }
                    }
                    Op::Release(i) => {
                        if !held.is_empty() {
                            let b = held.swap_remove(i % held.len());
                            pool.release(&[b]);
                        }
                    }
                    Op::TouchCached(h) => {
                        if let Some(b) = pool.lookup(h) {
                            pool.touch(b);
                            held.push(b);
                        }
                    }
                }
                prop_assert!(pool.check_invariants().is_ok(), "{:?}", pool.check_invariants());
                prop_assert_eq!(pool.used() + pool.free(), pool.total());
                prop_assert_eq!(pool.used() as usize, {
                    let mut distinct = held.clone();
                    distinct.sort_unstable();
                    distinct.dedup();
                    distinct.len()
                });
            }
        }
    }
}
