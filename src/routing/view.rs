//! What the router knows about the workers' KV caches: `oracle`, `events` or `approximate`.
//!
//! - `oracle`: the workers' true caches, at every decision.
//! - `events`: the workers' `BlockStored` / `BlockRemoved` events, each delivered `event_delay` after it
//!   happened (as with vLLM's KV-event publisher feeding Dynamo's or llm-d's indexer).
//! - `approximate`: the router's own guess from its past decisions: a request's prompt blocks are assumed
//!   cached on the worker it was sent to, for `approx_ttl`, up to `approx_capacity_blocks` per worker (LRU),
//!   blind to the worker's real evictions (as SGLang's approximate radix tree and llm-d's approximate
//!   prefix index). With `approx_prune_interval` the capacity is enforced only at those instants, as
//!   SGLang's timer-driven tree eviction does; in between the memory may exceed it.

use std::collections::VecDeque;
use std::hash::BuildHasher;

use hashbrown::HashTable;
use serde::{Deserialize, Serialize};

use super::cache_index::CacheIndex;
use crate::time::{SimDuration, SimTime};
use crate::worker::kv_cache::KvEvent;

/// Which knowledge model the router uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ViewKind {
    Oracle,
    Events,
    Approximate,
}

impl ViewKind {
    /// The name as written in scenario files.
    pub fn as_str(self) -> &'static str {
        match self {
            ViewKind::Oracle => "oracle",
            ViewKind::Events => "events",
            ViewKind::Approximate => "approximate",
        }
    }
}

/// One worker's entries in the approximate view, least recently routed first: a doubly linked list
/// threaded through a slab of nodes, and a map from block to its node, so that routing a block again
/// moves it to the back in O(1) and the list never holds stale copies.
///
/// Invariants: `node` has one entry per node on the list, and its keys are exactly the blocks the
/// view's index lists this worker as holding (both change only together, in `on_routed`, pruning,
/// expiry and `clear_worker`); the list's times are non-decreasing from front to back (blocks are
/// routed at the simulation's current time, which never goes back); nodes off the list are on the
/// free list.
///
/// The map is a `HashTable` of node numbers that finds a block through its node (4 bytes a slot
/// instead of 12 for a block → node map, padded to 16): a lookup that finds its block has read the
/// node it then moves anyway.
#[derive(Debug)]
struct ApproxLru {
    /// The nodes on the list, found by their block.
    node: HashTable<u32>,
    nodes: Vec<LruNode>,
    front: u32,
    back: u32,
    /// Head of the free nodes, linked through `next`.
    free: u32,
}

/// A block on a worker's list and when it was last routed there.
#[derive(Clone, Copy, Debug)]
struct LruNode {
    block: u64,
    at: SimTime,
    prev: u32,
    next: u32,
}

const NIL: u32 = u32::MAX;

/// Blocks looked up together in `on_routed`: enough independent hash lookups in flight to hide most
/// of a memory access each, few enough to stay in registers.
const LOOKAHEAD: usize = 8;

/// The hash of a block's chain hash for [`ApproxLru`]'s table (the FxHash the other maps use).
fn block_hash(h: u64) -> u64 {
    rustc_hash::FxBuildHasher.hash_one(h)
}

impl Default for ApproxLru {
    fn default() -> Self {
        ApproxLru {
            node: HashTable::new(),
            nodes: Vec::new(),
            front: NIL,
            back: NIL,
            free: NIL,
        }
    }
}

impl ApproxLru {
    fn len(&self) -> usize {
        self.node.len()
    }

    /// Nodes on the list: exactly the table's (checked in tests).
    #[cfg(test)]
    fn list_len(&self) -> usize {
        let mut n = 0;
        let mut i = self.front;
        while i != NIL {
            n += 1;
            i = self.nodes[i as usize].next;
        }
        n
    }

    /// The node of block `h`, if it is on the list.
    fn find(&self, h: u64) -> Option<u32> {
        let nodes = &self.nodes;
        self.node
            .find(block_hash(h), |&i| nodes[i as usize].block == h)
            .copied()
    }

    /// Records that block `h` was routed here at `now` (moving it to the back); returns whether it is
    /// new to this worker.
    fn touch(&mut self, h: u64, now: SimTime) -> bool {
        match self.find(h) {
            Some(i) => {
                self.refresh(i, now);
                false
            }
            None => {
                let n = LruNode {
                    block: h,
                    at: now,
                    prev: NIL,
                    next: NIL,
                };
                let i = if self.free != NIL {
                    let i = self.free;
                    self.free = self.nodes[i as usize].next;
                    self.nodes[i as usize] = n;
                    i
                } else {
                    self.nodes.push(n);
                    (self.nodes.len() - 1) as u32
                };
                self.push_back(i);
                let nodes = &self.nodes;
                self.node
                    .insert_unique(block_hash(h), i, |&j| block_hash(nodes[j as usize].block));
                true
            }
        }
    }

    /// Moves node `i` (on the list) to the back, routed at `now`.
    fn refresh(&mut self, i: u32, now: SimTime) {
        self.unlink(i);
        self.nodes[i as usize].at = now;
        self.push_back(i);
    }

    /// The least recently routed block and when it was routed, if any.
    fn oldest(&self) -> Option<(u64, SimTime)> {
        (self.front != NIL).then(|| {
            let n = &self.nodes[self.front as usize];
            (n.block, n.at)
        })
    }

    /// Removes the least recently routed block; returns it.
    fn pop_oldest(&mut self) -> Option<u64> {
        let i = self.front;
        if i == NIL {
            return None;
        }
        self.unlink(i);
        let h = self.nodes[i as usize].block;
        if let Ok(e) = self.node.find_entry(block_hash(h), |&j| j == i) {
            e.remove();
        }
        self.nodes[i as usize].next = self.free;
        self.free = i;
        Some(h)
    }

    /// Empties the list; returns its blocks (in no particular order).
    fn drain(&mut self) -> Vec<u64> {
        let nodes = &self.nodes;
        let blocks = self.node.drain().map(|i| nodes[i as usize].block).collect();
        self.nodes.clear();
        self.front = NIL;
        self.back = NIL;
        self.free = NIL;
        blocks
    }

    fn unlink(&mut self, i: u32) {
        let LruNode { prev, next, .. } = self.nodes[i as usize];
        match prev {
            NIL => self.front = next,
            p => self.nodes[p as usize].next = next,
        }
        match next {
            NIL => self.back = prev,
            n => self.nodes[n as usize].prev = prev,
        }
    }

    fn push_back(&mut self, i: u32) {
        let n = &mut self.nodes[i as usize];
        n.prev = self.back;
        n.next = NIL;
        match self.back {
            NIL => self.front = i,
            b => self.nodes[b as usize].next = i,
        }
        self.back = i;
    }
}

/// The router's picture of where blocks are cached.
#[derive(Debug)]
pub struct CacheView {
    kind: ViewKind,
    index: CacheIndex,
    delay: SimDuration,
    /// Events not yet delivered: (time they happened, worker, event).
    in_flight: VecDeque<(SimTime, usize, KvEvent)>,
    approx: Vec<ApproxLru>,
    capacity: Vec<u32>,
    ttl: Option<SimDuration>,
    prune_interval: Option<SimDuration>,
    next_prune: SimTime,
}

impl CacheView {
    /// A view of `kind` over workers whose caches hold `capacity[w]` blocks. `delay` applies to `events`;
    /// `ttl` and `capacity` to `approximate`.
    pub fn new(
        kind: ViewKind,
        delay: SimDuration,
        ttl: Option<SimDuration>,
        capacity: Vec<u32>,
    ) -> Self {
        CacheView {
            kind,
            index: CacheIndex::default(),
            delay,
            in_flight: VecDeque::new(),
            approx: (0..capacity.len()).map(|_| ApproxLru::default()).collect(),
            capacity,
            ttl,
            prune_interval: None,
            next_prune: SimTime::ZERO,
        }
    }

    /// Enforces the approximate view's capacity only every `interval` (from the first decision on)
    /// instead of at every insertion.
    pub fn with_prune_interval(mut self, interval: Option<SimDuration>) -> Self {
        self.prune_interval = interval.filter(|d| d.0 > 0);
        self
    }

    /// Forgets everything known about worker `w` (it went down; a restarted worker's cache is empty).
    pub fn clear_worker(&mut self, w: usize) {
        if let Some(lru) = self.approx.get_mut(w) {
            for h in lru.drain() {
                self.index.remove(w, h);
            }
        }
        self.index.clear_worker(w);
        self.in_flight.retain(|(_, x, _)| *x != w);
    }

    /// The knowledge model.
    pub fn kind(&self) -> ViewKind {
        self.kind
    }

    /// Whether this view needs the workers' cache events.
    pub fn wants_kv_events(&self) -> bool {
        self.kind != ViewKind::Approximate
    }

    /// Worker `w`'s cache events that happened at `now`.
    pub fn on_kv_events(&mut self, now: SimTime, w: usize, events: impl Iterator<Item = KvEvent>) {
        match self.kind {
            ViewKind::Oracle => events.for_each(|e| apply(&mut self.index, w, e)),
            ViewKind::Events => self.in_flight.extend(events.map(|e| (now, w, e))),
            ViewKind::Approximate => events.for_each(drop),
        }
    }

    /// A request with prompt blocks `hashes` was sent to worker `w` at `now`.
    pub fn on_routed(&mut self, now: SimTime, w: usize, hashes: &[u64]) {
        if self.kind != ViewKind::Approximate {
            return;
        }
        let lru = &mut self.approx[w];
        for chunk in hashes.chunks(LOOKAHEAD) {
            // The chunk's lookups first, independent of one another so that their cache misses
            // overlap. A node found stays valid through the chunk (nodes are freed only by pruning,
            // below); a block not found takes the full path, which looks again (it may have been
            // added earlier in the chunk).
            let mut found = [NIL; LOOKAHEAD];
            for (f, h) in found.iter_mut().zip(chunk) {
                *f = lru.find(*h).unwrap_or(NIL);
            }
            for (&i, &h) in found.iter().zip(chunk) {
                if i != NIL {
                    lru.refresh(i, now);
                } else if lru.touch(h, now) {
                    // A block already on the list is already in the index (the two change
                    // together): only news costs an index update.
                    self.index.store(w, h);
                }
            }
        }
        if self.prune_interval.is_none() {
            Self::prune(&mut self.index, w, lru, self.capacity[w]);
        }
    }

    /// Forgets worker `w`'s least recently routed blocks until at most `capacity` remain.
    fn prune(index: &mut CacheIndex, w: usize, lru: &mut ApproxLru, capacity: u32) {
        while lru.len() > capacity as usize {
            let Some(h) = lru.pop_oldest() else {
                break;
            };
            index.remove(w, h);
        }
    }

    /// Brings the view up to `now`: delivers due events, expires old guesses.
    pub fn advance(&mut self, now: SimTime) {
        match self.kind {
            ViewKind::Oracle => {}
            ViewKind::Events => {
                while let Some(&(t, w, e)) = self.in_flight.front() {
                    if t + self.delay > now {
                        break;
                    }
                    self.in_flight.pop_front();
                    apply(&mut self.index, w, e);
                }
            }
            ViewKind::Approximate => {
                if let Some(every) = self.prune_interval
                    && now >= self.next_prune
                {
                    if self.next_prune > SimTime::ZERO {
                        for (w, lru) in self.approx.iter_mut().enumerate() {
                            Self::prune(&mut self.index, w, lru, self.capacity[w]);
                        }
                    }
                    while self.next_prune <= now {
                        self.next_prune += every;
                    }
                }
                let Some(ttl) = self.ttl else { return };
                for (w, lru) in self.approx.iter_mut().enumerate() {
                    while let Some((h, t)) = lru.oldest() {
                        if t + ttl > now {
                            break;
                        }
                        lru.pop_oldest();
                        self.index.remove(w, h);
                    }
                }
            }
        }
    }

    /// The worker block `h` is attributed to: the first this view saw holding it, or, once that one
    /// forgot it, the lowest remaining holder (as a radix-tree router names a node's tenant).
    pub fn attributed(&self, h: u64) -> Option<usize> {
        self.index.attributed(h)
    }

    /// Leading blocks of `hashes` that each worker holds, as far as this view knows.
    pub fn overlaps(&self, hashes: &[u64], out: &mut Vec<u32>) {
        self.index.overlaps(hashes, self.capacity.len(), out);
    }

    /// [`CacheView::overlaps`], and the worker the longest of those prefixes is attributed to (what
    /// [`CacheView::attributed`] says of its last block), found in the same walk.
    pub fn overlaps_and_owner(&self, hashes: &[u64], out: &mut Vec<u32>) -> Option<usize> {
        self.index
            .overlaps_and_owner(hashes, self.capacity.len(), out)
    }
}

fn apply(index: &mut CacheIndex, w: usize, e: KvEvent) {
    match e {
        KvEvent::Stored(h) => {
            index.store(w, h);
        }
        KvEvent::Removed(h) => index.remove(w, h),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> SimTime {
        SimTime(ms * 1_000_000)
    }

    #[test]
    fn events_arrive_after_the_delay() {
        let mut v = CacheView::new(
            ViewKind::Events,
            SimDuration::from_millis(50),
            None,
            vec![100; 2],
        );
        v.on_kv_events(at(0), 1, [KvEvent::Stored(7)].into_iter());
        let mut out = Vec::new();
        v.advance(at(49));
        v.overlaps(&[7], &mut out);
        assert_eq!(out, [0, 0]);
        v.advance(at(50));
        v.overlaps(&[7], &mut out);
        assert_eq!(out, [0, 1]);
        v.on_kv_events(at(60), 1, [KvEvent::Removed(7)].into_iter());
        v.advance(at(200));
        v.overlaps(&[7], &mut out);
        assert_eq!(out, [0, 0]);
    }

    #[test]
    fn approximate_learns_from_routing_and_forgets_by_capacity_and_ttl() {
        let mut v = CacheView::new(
            ViewKind::Approximate,
            SimDuration::ZERO,
            Some(SimDuration::from_secs(10)),
            vec![3, 3],
        );
        let mut out = Vec::new();
        v.on_routed(at(0), 0, &[1, 2]);
        v.on_kv_events(at(1), 0, [KvEvent::Removed(1)].into_iter()); // blind to evictions
        v.overlaps(&[1, 2, 3], &mut out);
        assert_eq!(out, [2, 0]);
        v.on_routed(at(2), 0, &[5, 6]); // capacity 3: blocks 1 and 2 go, oldest first... block 1 first
        v.overlaps(&[1, 2], &mut out);
        assert_eq!(out, [0, 0]);
        v.overlaps(&[5, 6], &mut out);
        assert_eq!(out, [2, 0]);
        v.advance(at(12_001));
        v.overlaps(&[5, 6], &mut out);
        assert_eq!(out, [0, 0], "expired after the TTL");
    }

    #[test]
    fn a_pruned_memory_exceeds_its_capacity_between_prunes() {
        let mut v = CacheView::new(ViewKind::Approximate, SimDuration::ZERO, None, vec![2, 2])
            .with_prune_interval(Some(SimDuration::from_secs(10)));
        let mut out = Vec::new();
        v.advance(at(0)); // first prune due at 10 s
        v.on_routed(at(0), 0, &[1, 2]);
        v.on_routed(at(1), 0, &[3, 4]);
        v.advance(at(9_999));
        v.overlaps(&[1, 2], &mut out);
        assert_eq!(
            out,
            [2, 0],
            "4 blocks held over a capacity of 2 until the prune"
        );
        v.advance(at(10_000));
        v.overlaps(&[1, 2], &mut out);
        assert_eq!(out, [0, 0], "the oldest two are pruned");
        v.overlaps(&[3, 4], &mut out);
        assert_eq!(out, [2, 0]);
        v.clear_worker(0);
        v.overlaps(&[3, 4], &mut out);
        assert_eq!(out, [0, 0], "a worker that went down is forgotten");
    }

    #[test]
    fn the_lru_list_matches_a_reference_model() {
        // Reference: the blocks in least-recently-routed order; a block routed again moves to the
        // back; pruning takes the front. Random touches and pops over a small block space, so that
        // refreshes, reuse of freed nodes and an emptied list all occur.
        let mut lru = ApproxLru::default();
        let mut model: Vec<(u64, SimTime)> = Vec::new();
        let mut x = 12_345u64;
        for step in 0..5_000u64 {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let h = (x >> 33) % 48;
            if (x >> 20).is_multiple_of(3) {
                let expect = (!model.is_empty()).then(|| model.remove(0).0);
                assert_eq!(lru.pop_oldest(), expect, "step {step}");
            } else {
                let pos = model.iter().position(|&(b, _)| b == h);
                assert_eq!(lru.touch(h, at(step)), pos.is_none(), "step {step}");
                if let Some(p) = pos {
                    model.remove(p);
                }
                model.push((h, at(step)));
            }
            assert_eq!(lru.len(), model.len());
            assert_eq!(lru.list_len(), model.len());
            assert_eq!(lru.oldest(), model.first().copied());
            assert!(lru.nodes.len() <= 48, "freed nodes are reused");
        }
        let mut drained = lru.drain();
        drained.sort_unstable();
        let mut expect: Vec<u64> = model.iter().map(|&(b, _)| b).collect();
        expect.sort_unstable();
        assert_eq!(drained, expect);
        assert_eq!((lru.len(), lru.list_len(), lru.oldest()), (0, 0, None));
    }

    #[test]
    fn oracle_mirrors_events_immediately() {
        let mut v = CacheView::new(ViewKind::Oracle, SimDuration::from_secs(5), None, vec![10]);
        v.on_kv_events(
            at(0),
            0,
            [KvEvent::Stored(1), KvEvent::Stored(2)].into_iter(),
        );
        let mut out = Vec::new();
        v.overlaps(&[1, 2], &mut out);
        assert_eq!(out, [2]);
    }
}
