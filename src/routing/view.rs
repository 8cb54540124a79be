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

use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Serialize};

use super::cache_index::CacheIndex;
use crate::request::common_prefix_len;
use crate::time::{SimDuration, SimTime};
use crate::worker::kv_cache::KvEvent;

/// Which knowledge model the router uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ViewKind {
    /// The router sees every worker's KV cache exactly, at once (an upper bound no real router has).
    Oracle,
    /// The router learns of stored and evicted blocks from the workers' KV events, `event_delay` late
    /// (Dynamo's KV router, llm-d's precise prefix scorer).
    Events,
    /// The router guesses: a prompt it routed is assumed cached on that worker for `approx_ttl` or until
    /// the remembered blocks exceed `approx_capacity_blocks` (llm-d's approximate scorer, SGLang's tree).
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

/// One worker's entries in the approximate view, least recently routed first, kept as **runs**: the
/// blocks of one routed prompt, in prompt order, routed at one instant. A prompt routed here becomes
/// one run at the back of the list; the blocks it shares with older runs leave them.
///
/// Why runs are exact. Prompt block hashes are chained: a block's hash determines every block before
/// it, so two prompts that share a block share everything before it. Hence the blocks that a new
/// prompt shares with an older run are always a *leading* part of what is left of that run, and
/// taking them out (like pruning from the front, or expiring whole runs) leaves each run a contiguous
/// stretch of one prompt. And a block of the new prompt that this worker holds is either in the run
/// that holds the block before it, or the first block of its own run. So one walk over the prompt
/// finds every block held: a lookup in a small map of run starts for each run met and each block not
/// held, and, within a run, a comparison of the next block, in memory that lies in sequence. A
/// conversation's next turn, routed where its history is, costs a few lookups and a scan instead of a
/// lookup in a table of every block the worker holds for each block of its history. The list's order
/// is exactly that of moving each routed block to the back one by one (the block-level LRU this view
/// models), which the tests check against such a list.
///
/// Invariants: every block on the list is in exactly one run, and `starts` maps the first block of
/// each run to it; `len` counts the blocks on the list, which are exactly those the view's index
/// lists this worker as holding (both change only together, in `on_routed`, pruning, expiry and
/// `clear_worker`); runs' times are non-decreasing from front to back; runs off the list are on the
/// free list, with no block list allocated. A run's list is at most a quarter taken blocks (plus
/// four), so the memory is about 8 bytes per block held.
#[derive(Debug)]
struct RunLru {
    runs: Vec<Run>,
    front: u32,
    back: u32,
    /// Head of the free runs, linked through `next`.
    free: u32,
    /// The run that begins with each block.
    starts: HashMap<u64, u32>,
    /// Blocks on the list.
    len: usize,
}

/// One prompt's blocks that are still where that routing put them: `blocks[from..]`, least recently
/// routed first, all routed at `at`.
#[derive(Debug)]
struct Run {
    blocks: Vec<u64>,
    from: usize,
    at: SimTime,
    prev: u32,
    next: u32,
}

impl Run {
    fn held(&self) -> &[u64] {
        &self.blocks[self.from..]
    }
}

const NIL: u32 = u32::MAX;

/// The largest fleet whose approximate view may answer overlaps from its runs alone, a walk per
/// worker ([`CacheView::with_owner`]).
pub const RUN_WALK_MAX_WORKERS: usize = 64;

impl Default for RunLru {
    fn default() -> Self {
        RunLru {
            runs: Vec::new(),
            front: NIL,
            back: NIL,
            free: NIL,
            starts: HashMap::default(),
            len: 0,
        }
    }
}

impl RunLru {
    fn len(&self) -> usize {
        self.len
    }

    /// Moves the blocks of a prompt routed here at `now` to the back, in prompt order, calling `new`
    /// for each block that was not on the list, in prompt order. `hashes` must be chained (see the
    /// type's docs) and not empty.
    fn route(&mut self, hashes: &[u64], now: SimTime, mut new: impl FnMut(u64)) {
        let mut i = 0;
        while i < hashes.len() {
            match self.starts.get(&hashes[i]) {
                Some(&r) => {
                    let shared = self.shared(r, &hashes[i..]);
                    self.take_front(r, shared, |_| {});
                    i += shared;
                }
                None => {
                    new(hashes[i]);
                    i += 1;
                }
            }
        }
        self.push_back(hashes, now);
    }

    /// A new run of `hashes` at the back.
    fn push_back(&mut self, hashes: &[u64], at: SimTime) {
        let r = if self.free != NIL {
            let r = self.free;
            self.free = self.runs[r as usize].next;
            r
        } else {
            self.runs.push(Run {
                blocks: Vec::new(),
                from: 0,
                at,
                prev: NIL,
                next: NIL,
            });
            (self.runs.len() - 1) as u32
        };
        let back = self.back;
        let run = &mut self.runs[r as usize];
        run.blocks = hashes.to_vec();
        run.from = 0;
        run.at = at;
        run.prev = back;
        run.next = NIL;
        match back {
            NIL => self.front = r,
            b => self.runs[b as usize].next = r,
        }
        self.back = r;
        self.starts.insert(hashes[0], r);
        self.len += hashes.len();
    }

    /// Takes the first `k` blocks (at least one, at most all) off run `r`, calling `gone` for each in
    /// order; a run left empty leaves the list.
    fn take_front(&mut self, r: u32, k: usize, mut gone: impl FnMut(u64)) {
        let run = &mut self.runs[r as usize];
        debug_assert!(k >= 1 && k <= run.held().len());
        self.starts.remove(&run.blocks[run.from]);
        run.blocks[run.from..run.from + k]
            .iter()
            .for_each(|&h| gone(h));
        run.from += k;
        self.len -= k;
        if run.from < run.blocks.len() {
            self.starts.insert(run.blocks[run.from], r);
            // What was taken is dead weight: once it is a quarter of the list, the rest moves to a
            // list of its own size (each block is copied a few times at most in its run's life).
            if run.from >= 4 && 4 * run.from >= run.blocks.len() {
                run.blocks = run.held().to_vec();
                run.from = 0;
            }
            return;
        }
        run.blocks = Vec::new(); // a free run holds no memory
        run.from = 0;
        let (prev, next) = (run.prev, run.next);
        match prev {
            NIL => self.front = next,
            p => self.runs[p as usize].next = next,
        }
        match next {
            NIL => self.back = prev,
            n => self.runs[n as usize].prev = prev,
        }
        self.runs[r as usize].next = self.free;
        self.free = r;
    }

    /// The run that begins with the first of `hashes`, if any.
    fn first_run(&self, hashes: &[u64]) -> Option<u32> {
        hashes.first().and_then(|h| self.starts.get(h)).copied()
    }

    /// How many leading blocks of `hashes` (chained) are on the list: the walk of [`RunLru::route`],
    /// without moving anything. `first` is the answer of its first lookup, [`RunLru::first_run`],
    /// which a caller asking many workers makes for all of them first.
    ///
    /// `guess` is where the first run's share is likely to end (what it was for another worker: the
    /// shared system prompt ends at the same block everywhere); a right guess is confirmed by reading
    /// the two blocks around it instead of the whole shared stretch. Returns the answer and where the
    /// first run's share ended (0 without a first run), the next worker's guess.
    fn held_prefix(&self, first: Option<u32>, hashes: &[u64], guess: usize) -> (usize, usize) {
        let Some(r) = first else { return (0, 0) };
        let mut i = chained_prefix_len(self.runs[r as usize].held(), hashes, guess);
        let first_share = i;
        let mut run = self.first_run(&hashes[i..]);
        while let Some(r) = run {
            i += self.shared(r, &hashes[i..]);
            run = self.first_run(&hashes[i..]);
        }
        (i, first_share)
    }

    /// How many leading blocks of `hashes` run `r` holds, from its first (at least one when `hashes`
    /// begins with that block).
    fn shared(&self, r: u32, hashes: &[u64]) -> usize {
        chained_prefix_len(self.runs[r as usize].held(), hashes, 0)
    }

    /// When the least recently routed blocks were routed, if any.
    fn oldest_at(&self) -> Option<SimTime> {
        (self.front != NIL).then(|| self.runs[self.front as usize].at)
    }

    /// Removes the `k` least recently routed blocks (at most all), calling `gone` for each, oldest
    /// first.
    fn pop_oldest(&mut self, mut k: usize, mut gone: impl FnMut(u64)) {
        while k > 0 && self.front != NIL {
            let r = self.front;
            let take = k.min(self.runs[r as usize].held().len());
            self.take_front(r, take, &mut gone);
            k -= take;
        }
    }

    /// Removes the front run (all its blocks routed at one instant), calling `gone` for each block.
    fn pop_oldest_run(&mut self, gone: impl FnMut(u64)) {
        if self.front != NIL {
            let r = self.front;
            let k = self.runs[r as usize].held().len();
            self.take_front(r, k, gone);
        }
    }

    /// Empties the list; returns its blocks (in no particular order).
    fn drain(&mut self) -> Vec<u64> {
        let mut blocks = Vec::with_capacity(self.len);
        for run in &self.runs {
            blocks.extend_from_slice(run.held());
        }
        *self = RunLru::default();
        blocks
    }
}

/// The router's picture of where blocks are cached.
#[derive(Debug)]
pub struct CacheView {
    kind: ViewKind,
    /// Which workers hold which block; `None` for an approximate view that no decision asks for the
    /// prefix's owner, in fleets of up to [`RUN_WALK_MAX_WORKERS`] workers: its runs answer overlaps
    /// alone ([`CacheView::with_owner`]).
    index: Option<CacheIndex>,
    delay: SimDuration,
    /// Events not yet delivered: (time they happened, worker, event).
    in_flight: VecDeque<(SimTime, usize, KvEvent)>,
    approx: Vec<RunLru>,
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
            index: Some(CacheIndex::default()),
            delay,
            in_flight: VecDeque::new(),
            approx: (0..capacity.len()).map(|_| RunLru::default()).collect(),
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

    /// Whether decisions need [`CacheView::overlaps_and_owner`]'s owner (SGLang's tenant). An
    /// approximate view over at most [`RUN_WALK_MAX_WORKERS`] workers that needs none keeps no block →
    /// workers index: each worker's runs give its overlap with one walk (as [`RunLru::route`] walks),
    /// which saves the index a lookup for every block routed to a worker for the first time and every
    /// block it forgets. The overlaps are the same; the owner is then always `None`. Larger fleets keep
    /// the index, whose one walk over the prompt costs less than a walk per worker.
    pub fn with_owner(mut self, needed: bool) -> Self {
        let runs_alone = !needed
            && self.kind == ViewKind::Approximate
            && self.capacity.len() <= RUN_WALK_MAX_WORKERS;
        if runs_alone {
            self.index = None;
        }
        self
    }

    /// Forgets everything known about worker `w` (it went down; a restarted worker's cache is empty).
    pub fn clear_worker(&mut self, w: usize) {
        let blocks = self.approx.get_mut(w).map(RunLru::drain);
        if let Some(index) = &mut self.index {
            for h in blocks.into_iter().flatten() {
                index.remove(w, h);
            }
            index.clear_worker(w);
        }
        self.in_flight.retain(|(_, x, _)| *x != w);
    }

    /// Whether the view keeps its block → workers index ([`CacheView::with_owner`]).
    pub fn keeps_index(&self) -> bool {
        self.index.is_some()
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
            ViewKind::Oracle => events.for_each(|e| apply(self.index.as_mut(), w, e)),
            ViewKind::Events => self.in_flight.extend(events.map(|e| (now, w, e))),
            ViewKind::Approximate => events.for_each(drop),
        }
    }

    /// A request with prompt blocks `hashes` (chained, as [`crate::request::block_hashes`] makes them)
    /// was sent to worker `w` at `now`.
    pub fn on_routed(&mut self, now: SimTime, w: usize, hashes: &[u64]) {
        if self.kind != ViewKind::Approximate {
            return;
        }
        let lru = &mut self.approx[w];
        let mut index = self.index.as_mut();
        if !hashes.is_empty() {
            lru.route(hashes, now, |h| {
                // A block on the list is already in the index (the two change together): only news
                // costs an index update.
                if let Some(index) = index.as_deref_mut() {
                    let news = index.store(w, h);
                    debug_assert!(
                        news,
                        "worker {w} holds block {h:#x} in the middle of a run: the prompt's hashes are not chained"
                    );
                }
            });
        }
        if self.prune_interval.is_none() {
            Self::prune(index, w, lru, self.capacity[w]);
        }
    }

    /// Forgets worker `w`'s least recently routed blocks until at most `capacity` remain.
    fn prune(mut index: Option<&mut CacheIndex>, w: usize, lru: &mut RunLru, capacity: u32) {
        let excess = lru.len().saturating_sub(capacity as usize);
        lru.pop_oldest(excess, |h| {
            if let Some(index) = index.as_deref_mut() {
                index.remove(w, h);
            }
        });
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
                    apply(self.index.as_mut(), w, e);
                }
            }
            ViewKind::Approximate => {
                if let Some(every) = self.prune_interval
                    && now >= self.next_prune
                {
                    if self.next_prune > SimTime::ZERO {
                        for (w, lru) in self.approx.iter_mut().enumerate() {
                            Self::prune(self.index.as_mut(), w, lru, self.capacity[w]);
                        }
                    }
                    while self.next_prune <= now {
                        self.next_prune += every;
                    }
                }
                let Some(ttl) = self.ttl else { return };
                for (w, lru) in self.approx.iter_mut().enumerate() {
                    while lru.oldest_at().is_some_and(|t| t + ttl <= now) {
                        lru.pop_oldest_run(|h| {
                            if let Some(index) = &mut self.index {
                                index.remove(w, h);
                            }
                        });
                    }
                }
            }
        }
    }

    /// The worker block `h` is attributed to: the first this view saw holding it, or, once that one
    /// forgot it, the lowest remaining holder (as a radix-tree router names a node's tenant).
    pub fn attributed(&self, h: u64) -> Option<usize> {
        self.index.as_ref().and_then(|index| index.attributed(h))
    }

    /// Leading blocks of `hashes` that each worker holds, as far as this view knows.
    pub fn overlaps(&self, hashes: &[u64], out: &mut Vec<u32>) {
        self.overlaps_and_owner(hashes, out);
    }

    /// [`CacheView::overlaps`], and the worker the longest of those prefixes is attributed to (what
    /// [`CacheView::attributed`] says of its last block), found in the same walk; `None` for the owner
    /// when the view keeps no index ([`CacheView::with_owner`]).
    pub fn overlaps_and_owner(&self, hashes: &[u64], out: &mut Vec<u32>) -> Option<usize> {
        if let Some(index) = &self.index {
            return index.overlaps_and_owner(hashes, self.capacity.len(), out);
        }
        // Every worker's first lookup, then the rest of each walk: the first lookups miss the cache
        // in as many tables as there are workers, and done together their misses overlap.
        out.clear();
        out.extend(
            self.approx
                .iter()
                .map(|lru| lru.first_run(hashes).unwrap_or(NIL)),
        );
        let mut guess = 0;
        for (held, lru) in out.iter_mut().zip(&self.approx) {
            let first = (*held != NIL).then_some(*held);
            let (prefix, first_share) = lru.held_prefix(first, hashes, guess);
            *held = prefix as u32;
            if first_share > 0 {
                guess = first_share;
            }
        }
        None
    }
}

/// [`common_prefix_len`] of `a` and `b`, two stretches of chained block hashes that begin with the
/// same block (so they are equal at a position only if they are equal at every position before it),
/// reading as little as that allows: when they agree at their last common position, all of the
/// shorter one is shared (a conversation's next turn against its last one); else when they agree at
/// `guess - 1` and not at `guess`, exactly `guess` blocks are (a system prompt's end, the same for
/// every worker); else a scan finds the first difference.
fn chained_prefix_len(a: &[u64], b: &[u64], guess: usize) -> usize {
    let n = a.len().min(b.len());
    let found = if n == 0 || a[n - 1] == b[n - 1] {
        n
    } else if guess >= 1 && guess < n && a[guess - 1] == b[guess - 1] && a[guess] != b[guess] {
        guess
    } else {
        common_prefix_len(a, b)
    };
    debug_assert_eq!(
        found,
        common_prefix_len(a, b),
        "the hashes are not chained: two reads that bound the common prefix disagree with a scan"
    );
    found
}

/// Applies a cache event to the index (an event-fed view always keeps one).
fn apply(index: Option<&mut CacheIndex>, w: usize, e: KvEvent) {
    let Some(index) = index else { return };
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
    use proptest::prelude::*;

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

    /// The block-level list that [`RunLru`] must equal: every routed block moved to the back one by
    /// one, pruning and expiry from the front, with the view's index driven in the same order.
    #[derive(Default)]
    struct BlockLru {
        lists: Vec<Vec<(u64, SimTime)>>,
        index: CacheIndex,
        next_prune: SimTime,
    }

    impl BlockLru {
        fn route(&mut self, now: SimTime, w: usize, hashes: &[u64], capacity: usize, prune: bool) {
            let list = &mut self.lists[w];
            for &h in hashes {
                match list.iter().position(|&(b, _)| b == h) {
                    Some(p) => {
                        list.remove(p);
                    }
                    None => {
                        self.index.store(w, h);
                    }
                }
                list.push((h, now));
            }
            if prune {
                self.prune(w, capacity);
            }
        }

        fn prune(&mut self, w: usize, capacity: usize) {
            while self.lists[w].len() > capacity {
                let (h, _) = self.lists[w].remove(0);
                self.index.remove(w, h);
            }
        }

        fn advance(
            &mut self,
            now: SimTime,
            capacity: usize,
            every: Option<SimDuration>,
            ttl: Option<SimDuration>,
        ) {
            if let Some(every) = every
                && now >= self.next_prune
            {
                if self.next_prune > SimTime::ZERO {
                    for w in 0..self.lists.len() {
                        self.prune(w, capacity);
                    }
                }
                while self.next_prune <= now {
                    self.next_prune += every;
                }
            }
            let Some(ttl) = ttl else { return };
            for w in 0..self.lists.len() {
                while self.lists[w].first().is_some_and(|&(_, t)| t + ttl <= now) {
                    let (h, _) = self.lists[w].remove(0);
                    self.index.remove(w, h);
                }
            }
        }

        fn clear_worker(&mut self, w: usize) {
            for (h, _) in std::mem::take(&mut self.lists[w]) {
                self.index.remove(w, h);
            }
            self.index.clear_worker(w);
        }
    }

    impl RunLru {
        /// The blocks front to back, with their times; checks the invariants on the way.
        fn order(&self) -> Vec<(u64, SimTime)> {
            let mut out = Vec::new();
            let (mut r, mut prev, mut runs) = (self.front, NIL, 0);
            while r != NIL {
                let run = &self.runs[r as usize];
                assert_eq!(run.prev, prev, "links");
                assert!(!run.held().is_empty(), "an empty run stays on the list");
                assert!(
                    run.from < 4 || 4 * run.from < run.blocks.len(),
                    "taken blocks pile up"
                );
                assert_eq!(self.starts.get(&run.held()[0]), Some(&r), "run start");
                out.extend(run.held().iter().map(|&h| (h, run.at)));
                (prev, r, runs) = (r, run.next, runs + 1);
            }
            assert_eq!(self.back, prev);
            let mut f = self.free;
            while f != NIL {
                assert_eq!(
                    self.runs[f as usize].blocks.capacity(),
                    0,
                    "a free run holds memory"
                );
                f = self.runs[f as usize].next;
            }
            assert_eq!((self.len, self.starts.len()), (out.len(), runs));
            out
        }
    }

    #[derive(Clone, Debug)]
    enum LruOp {
        Route(usize, Vec<u8>),
        Advance(u64),
        Clear(usize),
    }

    /// Chained hashes of a prompt whose blocks are `tokens` (one token per block), like
    /// [`crate::request::block_hashes`]: a block's hash determines everything before it.
    fn chain(tokens: &[u8]) -> Vec<u64> {
        let mut h = 7u64;
        tokens
            .iter()
            .map(|&t| {
                h = crate::rng::splitmix64(h.rotate_left(17) ^ u64::from(t));
                h
            })
            .collect()
    }

    fn lru_op() -> impl Strategy<Value = LruOp> {
        // Three tokens per block: prompts share prefixes often, and diverge anywhere.
        prop_oneof![
            8 => (0usize..3, prop::collection::vec(0u8..3, 0..14)).prop_map(|(w, t)| LruOp::Route(w, t)),
            2 => (0u64..30).prop_map(|k| LruOp::Advance(k * 100)),
            1 => (0usize..3).prop_map(LruOp::Clear),
        ]
    }

    proptest! {
        /// The run list is the block-level LRU list, block for block and time for time, and the
        /// view answers every overlap and attribution as that list's index does: with pruning at every
        /// routing or at intervals, with and without a TTL, and with workers forgotten.
        #[test]
        fn runs_are_the_block_level_lru(
            ops in prop::collection::vec(lru_op(), 1..120),
            capacity in 1usize..30,
            ttl_ms in prop::option::of(5u64..50),
            every_ms in prop::option::of(2u64..20),
        ) {
            // On a 100 ms grid, so that expiries and prunes fall exactly on the instants they are due.
            let ttl = ttl_ms.map(|k| SimDuration::from_millis(k * 100));
            let every = every_ms.map(|k| SimDuration::from_millis(k * 100));
            let mut v = CacheView::new(ViewKind::Approximate, SimDuration::ZERO, ttl, vec![capacity as u32; 3])
                .with_prune_interval(every)
                .with_owner(true);
            // The same view without its block → workers index: overlaps from the runs alone.
            let mut bare = CacheView::new(ViewKind::Approximate, SimDuration::ZERO, ttl, vec![capacity as u32; 3])
                .with_prune_interval(every)
                .with_owner(false);
            prop_assert!(!bare.keeps_index());
            let mut model = BlockLru { lists: vec![Vec::new(); 3], ..BlockLru::default() };
            let mut now = 0u64;
            let mut seen: Vec<Vec<u64>> = Vec::new();
            v.advance(at(now));
            bare.advance(at(now));
            model.advance(at(now), capacity, every, ttl);
            for op in ops {
                match op {
                    LruOp::Route(w, tokens) => {
                        let hashes = chain(&tokens);
                        v.on_routed(at(now), w, &hashes);
                        bare.on_routed(at(now), w, &hashes);
                        model.route(at(now), w, &hashes, capacity, every.is_none());
                        seen.push(hashes);
                    }
                    LruOp::Advance(ms) => {
                        now += ms;
                        v.advance(at(now));
                        bare.advance(at(now));
                        model.advance(at(now), capacity, every, ttl);
                    }
                    LruOp::Clear(w) => {
                        v.clear_worker(w);
                        bare.clear_worker(w);
                        model.clear_worker(w);
                    }
                }
                for w in 0..3 {
                    prop_assert_eq!(v.approx[w].order(), model.lists[w].clone(), "worker {}", w);
                    prop_assert_eq!(bare.approx[w].order(), model.lists[w].clone(), "worker {}", w);
                }
                prop_assert!(bare.index.is_none());
                let (mut got, mut expect) = (Vec::new(), Vec::new());
                for q in seen.iter().rev().take(6) {
                    let owner = v.overlaps_and_owner(q, &mut got);
                    let expect_owner = model.index.overlaps_and_owner(q, 3, &mut expect);
                    prop_assert_eq!(&got, &expect);
                    prop_assert_eq!(owner, expect_owner);
                    prop_assert_eq!(bare.overlaps_and_owner(q, &mut got), None);
                    prop_assert_eq!(&got, &expect);
                    for &h in q {
                        prop_assert_eq!(v.attributed(h), model.index.attributed(h));
                    }
                }
            }
            let mut drained = v.approx[0].drain();
            drained.sort_unstable();
            let mut expect: Vec<u64> = model.lists[0].iter().map(|&(h, _)| h).collect();
            expect.sort_unstable();
            prop_assert_eq!(drained, expect);
            prop_assert!(v.approx[0].order().is_empty());
        }
    }

    #[test]
    fn a_conversation_routed_to_one_worker_keeps_one_run() {
        // A conversation routed to one worker turn after turn: each turn's prompt extends the last,
        // so each routing empties the previous run and the list never holds more than one.
        let mut v = CacheView::new(ViewKind::Approximate, SimDuration::ZERO, None, vec![1_000]);
        let tokens: Vec<u8> = (0..200).map(|i| (i % 3) as u8).collect();
        for turn in 1..=20 {
            v.on_routed(at(turn), 0, &chain(&tokens[..turn as usize * 10]));
            assert_eq!(v.approx[0].runs.len(), 1, "turn {turn}");
            assert_eq!(v.approx[0].order().len(), turn as usize * 10);
        }
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

    proptest! {
        /// The reads that bound a common prefix of chained hashes find what a scan finds, whatever
        /// the guess.
        #[test]
        fn a_chained_prefix_is_the_scanned_one_for_every_guess(
            shared in prop::collection::vec(0u8..4, 1..40),
            a_tail in prop::collection::vec(0u8..4, 0..20),
            b_tail in prop::collection::vec(0u8..4, 0..20),
            guess in 0usize..70,
        ) {
            let a = chain(&[shared.clone(), a_tail].concat());
            let b = chain(&[shared, b_tail].concat());
            prop_assert_eq!(chained_prefix_len(&a, &b, guess), common_prefix_len(&a, &b));
            prop_assert_eq!(chained_prefix_len(&b, &a, guess), common_prefix_len(&a, &b));
        }
    }
}
