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

/// One worker's entries in the approximate view, oldest first, with lazy deletion of refreshed entries.
///
/// Invariant: the keys of `last` are exactly the blocks the view's index lists this worker as holding
/// (both change only together, in `on_routed`, pruning, expiry and `clear_worker`).
#[derive(Debug, Default)]
struct ApproxLru {
    queue: VecDeque<(u64, SimTime)>,
    /// Block → when it was last routed here (the live entries).
    last: HashMap<u64, SimTime>,
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
            for (h, _) in lru.last.drain() {
                self.index.remove(w, h);
            }
            lru.queue.clear();
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
        for &h in hashes {
            // A block already in `last` is already in the index (the two change together): only news
            // costs an index update.
            if lru.last.insert(h, now).is_none() {
                self.index.store(w, h);
            }
            lru.queue.push_back((h, now));
        }
        if self.prune_interval.is_none() {
            Self::prune(&mut self.index, w, lru, self.capacity[w]);
        }
        // Refreshed entries leave stale copies behind: compact when they dominate.
        if lru.queue.len() > 2 * lru.last.len() + 1024 {
            lru.queue.retain(|(h, t)| lru.last.get(h) == Some(t));
        }
    }

    /// Forgets worker `w`'s least recently routed blocks until at most `capacity` remain.
    fn prune(index: &mut CacheIndex, w: usize, lru: &mut ApproxLru, capacity: u32) {
        while lru.last.len() > capacity as usize {
            let Some((h, t)) = lru.queue.pop_front() else {
                break;
            };
            if lru.last.get(&h) == Some(&t) {
                lru.last.remove(&h);
                index.remove(w, h);
            }
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
                    while let Some(&(h, t)) = lru.queue.front() {
                        if t + ttl > now {
                            break;
                        }
                        lru.queue.pop_front();
                        if lru.last.get(&h) == Some(&t) {
                            lru.last.remove(&h);
                            self.index.remove(w, h);
                        }
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
