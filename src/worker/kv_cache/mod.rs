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
//!
//! The pool's parts, one file each: the block record (`block.rs`), the free queue (`free_queue.rs`),
//! eviction and its ghosts (`eviction.rs`) and the full invariant check (`invariants.rs`); the hash-chain
//! index is [`crate::worker::content_index`].

use std::collections::VecDeque;

use crate::worker::content_index::{ContentIndex, MAX_BLOCKS, Slot, prefetch};

mod block;
mod eviction;
mod free_queue;
mod invariants;

use block::Block;

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

    fn note_use(&mut self) {
        self.peak_used = self.peak_used.max(self.used());
    }
}

#[cfg(test)]
mod tests;
