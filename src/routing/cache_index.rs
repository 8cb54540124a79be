//! Block hash → the workers holding it: the router's picture of where prefixes are cached.
//!
//! Lookups walk a prompt's block hashes once and touch only the workers that hold each block, so a
//! decision never scans the fleet's caches (the same complexity as a radix-tree indexer's overlap scores).

use rustc_hash::FxHashMap as HashMap;

/// The workers holding one block: a bitmask for workers 0–63 and a boxed list for the rest (`None`,
/// hence not allocated, in fleets of up to 64 workers), and the holder this block is attributed to: the
/// first worker stored, replaced by the lowest remaining holder when it goes (a radix tree node's
/// tenant). 24 bytes (a bare `Vec` would make it 40): the index holds one per distinct cached block of
/// the whole fleet, so its size is most of a cache-aware router's memory.
#[derive(Debug, Default, Clone)]
struct Holders {
    mask: u64,
    // Boxed on purpose: a thin pointer keeps the struct at 24 bytes; the extra allocation happens
    // only for blocks held by a worker past 63.
    #[allow(clippy::box_collection)]
    more: Option<Box<Vec<u32>>>,
    first: u32,
}

const _: () = assert!(std::mem::size_of::<Holders>() == 24);

impl Holders {
    fn insert(&mut self, w: u32) -> bool {
        if w < 64 {
            let had = self.mask & (1 << w) != 0;
            self.mask |= 1 << w;
            !had
        } else {
            let more = self.more.get_or_insert_with(Box::default);
            if more.contains(&w) {
                false
            } else {
                more.push(w);
                true
            }
        }
    }

    fn remove(&mut self, w: u32) {
        if w < 64 {
            self.mask &= !(1 << w);
        } else if let Some(more) = &mut self.more {
            more.retain(|&x| x != w);
            if more.is_empty() {
                self.more = None;
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.mask == 0 && self.more.is_none()
    }

    /// The lowest holder, if any.
    fn lowest(&self) -> Option<u32> {
        if self.mask != 0 {
            Some(self.mask.trailing_zeros())
        } else {
            self.more.iter().flat_map(|m| m.iter()).copied().min()
        }
    }

    /// Removes `w`; if it was the attributed holder, the lowest remaining one takes its place.
    fn remove_and_reattribute(&mut self, w: u32) {
        self.remove(w);
        if self.first == w
            && let Some(l) = self.lowest()
        {
            self.first = l;
        }
    }

    fn for_each(&self, mut f: impl FnMut(usize)) {
        let mut m = self.mask;
        while m != 0 {
            f(m.trailing_zeros() as usize);
            m &= m - 1;
        }
        self.more
            .iter()
            .flat_map(|m| m.iter())
            .for_each(|&w| f(w as usize));
    }
}

/// Which workers hold which blocks, as far as the router knows.
///
/// Invariant: no entry is empty; `holders[h]` contains `w` iff `store(w, h)` happened after the last
/// `remove(w, h)` (or `clear_worker(w)`); the attributed holder of `h` is one of its holders: the first
/// stored since the entry was created, or the lowest remaining holder after that one went.
#[derive(Debug, Default)]
pub struct CacheIndex {
    holders: HashMap<u64, Holders>,
}

impl CacheIndex {
    /// Records that worker `w` holds block `h`; returns whether that is news.
    pub fn store(&mut self, w: usize, h: u64) -> bool {
        let v = self.holders.entry(h).or_insert_with(|| Holders {
            first: w as u32,
            ..Holders::default()
        });
        v.insert(w as u32)
    }

    /// Records that worker `w` no longer holds block `h`.
    pub fn remove(&mut self, w: usize, h: u64) {
        if let Some(v) = self.holders.get_mut(&h) {
            v.remove_and_reattribute(w as u32);
            if v.is_empty() {
                self.holders.remove(&h);
            }
        }
    }

    /// The worker block `h` is attributed to (see [`CacheIndex`]), if anyone holds it.
    pub fn attributed(&self, h: u64) -> Option<usize> {
        self.holders.get(&h).map(|v| v.first as usize)
    }

    /// Forgets every block of worker `w`. Cost: one pass over the index.
    pub fn clear_worker(&mut self, w: usize) {
        self.holders.retain(|_, v| {
            v.remove_and_reattribute(w as u32);
            !v.is_empty()
        });
    }

    /// Whether worker `w` holds block `h`.
    pub fn holds(&self, w: usize, h: u64) -> bool {
        self.holders.get(&h).is_some_and(|v| {
            let mut found = false;
            v.for_each(|x| found |= x == w);
            found
        })
    }

    /// For each worker, how many leading blocks of `hashes` it holds, written into `out` (resized to
    /// `workers` entries). Cost: Σ over matched blocks of their holders.
    pub fn overlaps(&self, hashes: &[u64], workers: usize, out: &mut Vec<u32>) {
        self.overlaps_and_owner(hashes, workers, out);
    }

    /// [`CacheIndex::overlaps`], and the worker the longest of those prefixes is attributed to (the
    /// attributed holder of its last block; `None` when no worker holds the first block).
    ///
    /// In fleets of up to 64 workers the walk keeps the set of workers still matching as a bitmask,
    /// intersects it with each block's holders and stops when it is empty: one hash lookup and a few
    /// bit operations per block, whatever the number of holders. Larger fleets take the general walk,
    /// which visits each matched block's holders.
    pub fn overlaps_and_owner(
        &self,
        hashes: &[u64],
        workers: usize,
        out: &mut Vec<u32>,
    ) -> Option<usize> {
        out.clear();
        out.resize(workers, 0);
        if workers <= 64 {
            return self.overlaps_by_mask(hashes, workers, out);
        }
        let mut owner = None;
        for (b, h) in hashes.iter().enumerate() {
            let Some(v) = self.holders.get(h) else {
                break;
            };
            let b = b as u32;
            let mut advanced = false;
            v.for_each(|w| {
                if w < workers && out[w] == b {
                    out[w] = b + 1;
                    advanced = true;
                }
            });
            if !advanced {
                break;
            }
            owner = Some(v.first as usize);
        }
        owner
    }

    /// The bitmask walk of [`CacheIndex::overlaps_and_owner`] (`workers <= 64`; `out` zeroed).
    fn overlaps_by_mask(&self, hashes: &[u64], workers: usize, out: &mut [u32]) -> Option<usize> {
        let mut active: u64 = if workers == 64 {
            u64::MAX
        } else {
            (1u64 << workers) - 1
        };
        let mut owner = None;
        let mut matched = 0u32;
        for h in hashes {
            // A block absent from the index has no holders. (Gathering a few lookups ahead, as
            // `CacheView::on_routed` does, measured slower here: the loop is short enough for the
            // processor to overlap the lookups by itself, and a walk that ends early would fetch
            // blocks it never reads.)
            let (mask, first) = self.holders.get(h).map_or((0, 0), |v| (v.mask, v.first));
            let still = active & mask;
            if still == 0 {
                break;
            }
            // The workers that held every block so far but not this one stop here.
            let mut stopped = active & !still;
            while stopped != 0 {
                out[stopped.trailing_zeros() as usize] = matched;
                stopped &= stopped - 1;
            }
            active = still;
            matched += 1;
            owner = Some(first as usize);
        }
        if matched > 0 {
            while active != 0 {
                out[active.trailing_zeros() as usize] = matched;
                active &= active - 1;
            }
        }
        owner
    }

    /// Distinct blocks known to be cached somewhere.
    pub fn len(&self) -> usize {
        self.holders.len()
    }

    /// Whether nothing is known to be cached.
    pub fn is_empty(&self) -> bool {
        self.holders.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlaps_count_leading_blocks_per_worker() {
        let mut ix = CacheIndex::default();
        for h in [1, 2, 3] {
            ix.store(0, h);
        }
        ix.store(1, 1);
        ix.store(1, 3); // holds 3 but not 2: its prefix stops at 1
        ix.store(100, 1);
        ix.store(100, 2);
        let mut out = Vec::new();
        ix.overlaps(&[1, 2, 3, 4], 101, &mut out);
        assert_eq!((out[0], out[1], out[2], out[100]), (3, 1, 0, 2));
        ix.remove(0, 2);
        ix.overlaps(&[1, 2, 3], 101, &mut out);
        assert_eq!((out[0], out[100]), (1, 2));
        assert!(ix.holds(100, 2) && !ix.holds(0, 2));
        assert!(!ix.store(100, 2), "already known");
    }

    #[test]
    fn a_block_held_only_by_workers_past_64_leaves_the_index_with_its_last_holder() {
        let mut ix = CacheIndex::default();
        ix.store(70, 1);
        ix.store(90, 1);
        ix.remove(70, 1);
        assert_eq!((ix.len(), ix.attributed(1)), (1, Some(90)));
        ix.remove(90, 1);
        assert!(ix.is_empty(), "no holder left: no entry");
        ix.store(3, 2);
        ix.store(65, 2);
        ix.clear_worker(65);
        ix.clear_worker(3);
        assert!(ix.is_empty());
    }

    #[test]
    fn both_walks_agree_with_a_block_by_block_count() {
        // Random holdings of 30 blocks over 64 workers (the bitmask walk) and over 70 (the general
        // walk; a worker past 63 forces it), checked against counting, worker by worker, the
        // leading blocks `holds` reports, and the owner against `attributed` of the longest
        // prefix's last block.
        for workers in [64usize, 70] {
            let mut ix = CacheIndex::default();
            let mut x = 99u64;
            let mut next = || {
                x = x
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                x >> 33
            };
            let hashes: Vec<u64> = (100..130).collect();
            for _ in 0..3_000 {
                let w = (next() % workers as u64) as usize;
                // Mostly early blocks, so that long shared prefixes exist.
                let b = (next() % 30).min(next() % 30) as usize;
                if next().is_multiple_of(5) {
                    ix.remove(w, hashes[b]);
                } else {
                    ix.store(w, hashes[b]);
                }
            }
            let mut out = Vec::new();
            for start in 0..5 {
                let owner = ix.overlaps_and_owner(&hashes[start..], workers, &mut out);
                let expect: Vec<u32> = (0..workers)
                    .map(|w| {
                        hashes[start..]
                            .iter()
                            .take_while(|&&h| ix.holds(w, h))
                            .count() as u32
                    })
                    .collect();
                assert_eq!(out, expect, "{workers} workers, from block {start}");
                let longest = expect.iter().copied().max().unwrap() as usize;
                let expect_owner = (longest > 0)
                    .then(|| ix.attributed(hashes[start + longest - 1]))
                    .flatten();
                assert_eq!(owner, expect_owner);
            }
        }
    }

    #[test]
    fn a_block_is_attributed_to_its_first_holder_until_it_goes() {
        let mut ix = CacheIndex::default();
        ix.store(5, 1);
        ix.store(2, 1);
        ix.store(70, 1);
        assert_eq!(ix.attributed(1), Some(5), "first stored, not lowest id");
        ix.remove(5, 1);
        assert_eq!(
            ix.attributed(1),
            Some(2),
            "then the lowest remaining holder"
        );
        ix.store(5, 1);
        assert_eq!(
            ix.attributed(1),
            Some(2),
            "a returning holder does not take it back"
        );
        ix.clear_worker(2);
        assert_eq!(ix.attributed(1), Some(5));
        ix.remove(5, 1);
        assert_eq!(ix.attributed(1), Some(70));
        ix.remove(70, 1);
        assert_eq!(ix.attributed(1), None);
        ix.store(3, 1);
        assert_eq!(ix.attributed(1), Some(3), "a new entry, a new first holder");
    }
}
