//! The contents of one tier: which blocks of KV it holds, when each became readable, and which goes
//! when it is full.
//!
//! Invariants (checked by [`TierStore::check`]): every held hash appears exactly once in `held`, whose
//! live entries in `order` number exactly `held.len() <= capacity`; a hash is held at most once, so a
//! block is in at most one place in this tier.

use std::collections::VecDeque;

use rustc_hash::FxHashMap as HashMap;

use super::Eviction;
use crate::time::SimTime;

/// Blocks held by a tier, with their landing times.
#[derive(Clone, Debug)]
pub struct TierStore {
    /// Hash → (when its write lands, recency stamp of its live entry in `order`).
    held: HashMap<u64, (SimTime, u64)>,
    /// (hash, stamp), oldest first; an entry whose stamp is not the hash's live one is stale.
    order: VecDeque<(u64, u64)>,
    stamps: u64,
    capacity: usize,
    eviction: Eviction,
}

impl TierStore {
    /// An empty tier of `capacity` blocks (at least 1).
    pub fn new(capacity: usize, eviction: Eviction) -> Self {
        TierStore {
            held: HashMap::default(),
            order: VecDeque::new(),
            stamps: 0,
            capacity: capacity.max(1),
            eviction,
        }
    }

    /// Capacity in blocks.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Blocks held (landed or in flight).
    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// Whether the tier holds nothing.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Whether `h` is held and its write has landed by `now`.
    pub fn readable(&self, h: u64, now: SimTime) -> bool {
        self.held.get(&h).is_some_and(|&(t, _)| t <= now)
    }

    /// Whether `h` is held (landed or not).
    pub fn holds(&self, h: u64) -> bool {
        self.held.contains_key(&h)
    }

    /// Stores `h`, readable from `lands`. A block already held keeps its landing time (and, under LRU,
    /// becomes the most recent). Returns the hashes pushed out to make room, oldest first.
    pub fn insert(&mut self, h: u64, lands: SimTime) -> Vec<u64> {
        if self.held.contains_key(&h) {
            self.touch(h);
            return Vec::new();
        }
        self.stamps += 1;
        self.held.insert(h, (lands, self.stamps));
        self.order.push_back((h, self.stamps));
        let mut out = Vec::new();
        while self.held.len() > self.capacity {
            let (old, stamp) = self.order.pop_front().expect("held blocks are in order");
            if self.held.get(&old).is_some_and(|&(_, s)| s == stamp) {
                self.held.remove(&old);
                out.push(old);
            }
        }
        self.compact();
        out
    }

    /// A read of `h`: under LRU it becomes the most recently used.
    pub fn touch(&mut self, h: u64) {
        if self.eviction != Eviction::Lru {
            return;
        }
        if let Some(entry) = self.held.get_mut(&h) {
            self.stamps += 1;
            entry.1 = self.stamps;
            self.order.push_back((h, self.stamps));
            self.compact();
        }
    }

    /// Drops `h` (it moved up to GPU memory); returns whether it was held.
    pub fn remove(&mut self, h: u64) -> bool {
        let was = self.held.remove(&h).is_some();
        if was {
            self.compact();
        }
        was
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.held.clear();
        self.order.clear();
    }

    /// Checks the module's invariants; `Err` says which fails.
    pub fn check(&self) -> Result<(), String> {
        if self.held.len() > self.capacity {
            return Err(format!(
                "{} blocks held, capacity {}",
                self.held.len(),
                self.capacity
            ));
        }
        let live = self
            .order
            .iter()
            .filter(|(h, s)| self.held.get(h).is_some_and(|&(_, t)| t == *s))
            .count();
        if live != self.held.len() {
            return Err(format!(
                "{live} live recency entries for {} held blocks",
                self.held.len()
            ));
        }
        Ok(())
    }

    /// Drops stale recency entries once they outnumber live ones (keeps `order` within 2× `held` + 16).
    fn compact(&mut self) {
        if self.order.len() > 2 * self.held.len() + 16 {
            let held = &self.held;
            self.order
                .retain(|(h, s)| held.get(h).is_some_and(|&(_, t)| t == *s));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lru_keeps_what_was_read() {
        let mut s = TierStore::new(2, Eviction::Lru);
        let t = SimTime::ZERO;
        assert!(s.insert(1, t).is_empty());
        assert!(s.insert(2, t).is_empty());
        s.touch(1);
        assert_eq!(s.insert(3, t), vec![2]);
        assert!(s.holds(1) && s.holds(3));
    }

    #[test]
    fn fifo_ignores_reads() {
        let mut s = TierStore::new(2, Eviction::Fifo);
        let t = SimTime::ZERO;
        s.insert(1, t);
        s.insert(2, t);
        s.touch(1);
        assert_eq!(s.insert(3, t), vec![1]);
    }

    #[test]
    fn a_block_is_readable_once_its_write_lands() {
        let mut s = TierStore::new(4, Eviction::Lru);
        s.insert(7, SimTime(100));
        assert!(!s.readable(7, SimTime(99)));
        assert!(s.readable(7, SimTime(100)));
        // Written again: still one copy, the earlier landing time kept.
        s.insert(7, SimTime(500));
        assert_eq!(s.len(), 1);
        assert!(s.readable(7, SimTime(100)));
    }

    proptest! {
        /// Whatever the operations, a hash is held once, never more than capacity, and `check` holds.
        #[test]
        fn held_blocks_are_conserved(cap in 1usize..20, ops in proptest::collection::vec((0u8..3, 0u64..30), 1..400)) {
            let mut s = TierStore::new(cap, Eviction::Lru);
            let mut model: Vec<u64> = Vec::new(); // independent LRU: most recent last
            for (op, h) in ops {
                match op {
                    0 => {
                        let out = s.insert(h, SimTime::ZERO);
                        if let Some(i) = model.iter().position(|&x| x == h) {
                            model.remove(i);
                        }
                        model.push(h);
                        let mut expect = Vec::new();
                        while model.len() > cap { expect.push(model.remove(0)); }
                        prop_assert_eq!(out, expect);
                    }
                    1 => {
                        s.touch(h);
                        if let Some(i) = model.iter().position(|&x| x == h) {
                            model.remove(i);
                            model.push(h);
                        }
                    }
                    _ => {
                        let was = s.remove(h);
                        let i = model.iter().position(|&x| x == h);
                        prop_assert_eq!(was, i.is_some());
                        if let Some(i) = i { model.remove(i); }
                    }
                }
                prop_assert!(s.check().is_ok(), "{:?}", s.check());
                prop_assert_eq!(s.len(), model.len());
            }
        }
    }
}
