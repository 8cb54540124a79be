//! The block pool's index from content hash to what it knows of that content: an open-addressing
//! table of 8-byte entries that keeps only 32 bits of each hash and lets the pool confirm a match.
//!
//! Each entry holds a **tag** (the hash's low 32 bits) and a [`Slot`]: the block caching the content,
//! or the low bits of the number of the eviction that removed it. The full hash is not stored: the
//! pool keeps it anyway (in the block's record, or in its ring of recent evictions), so a lookup
//! compares tags and asks the pool to confirm each entry whose tag matches ([`ContentIndex::find`]).
//! An entry is found with one cache line in the common case, against two (control byte and bucket)
//! and 16-byte entries for a general hash map, and its home bucket is known before the lookup, so a
//! caller may [`ContentIndex::prefetch`] it well ahead.
//!
//! Invariants (checked by [`ContentIndex::check`]):
//! 1. Linear probing: every entry sits at its tag's home bucket or after it, with no empty entry in
//!    between (deletion shifts later entries back instead of leaving tombstones, so this holds always).
//! 2. Fewer than two thirds of the entries are used (the table grows before that), so every probe
//!    ends at an empty entry.
//! 3. While its owner keeps to the bound, the table's size never exceeds
//!    [`ContentIndex::final_entries`] of it: once the table holds a quarter of the bound, its next
//!    growth goes straight to that size instead of doubling. So the memory
//!    of a long run is reached during its first fill, and does not creep up later as a pool's count
//!    of ghosts wanders across a doubling threshold.
//!
//! Nothing here knows what a tag collision means: two contents whose hashes share their low 32 bits
//! share a probe chain, and the pool's confirmation tells them apart.

use super::kv_cache::BlockId;

/// What the index says about one content: cached in a block, or evicted by an eviction whose number
/// has these low 31 bits. The pool keeps every ghost for at most its last `total < 2^31` evictions
/// and drops it then, so the low bits name the eviction exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Slot {
    Cached(BlockId),
    Evicted(u32),
}

/// The largest block id the encoding holds (`Cached(b)` is stored as `b + 1`, below the top bit).
pub(super) const MAX_BLOCKS: u32 = (1 << 31) - 1;

/// Low bits of eviction numbers kept by [`Slot::Evicted`].
pub(super) const EVICTION_BITS_MASK: u64 = (1 << 31) - 1;

/// Stored slot: 0 is empty, `b + 1` (top bit clear) is `Cached(b)`, `EVICTED | n` is `Evicted(n)`.
const EMPTY: u32 = 0;
const EVICTED: u32 = 1 << 31;

impl Slot {
    /// The ghost of the eviction numbered `stamp` (its low 31 bits).
    pub fn evicted(stamp: u64) -> Slot {
        Slot::Evicted((stamp & EVICTION_BITS_MASK) as u32)
    }

    fn encode(self) -> u32 {
        match self {
            Slot::Cached(b) => {
                debug_assert!(b < MAX_BLOCKS);
                b + 1
            }
            Slot::Evicted(n) => {
                debug_assert!(u64::from(n) <= EVICTION_BITS_MASK);
                EVICTED | n
            }
        }
    }

    fn decode(raw: u32) -> Slot {
        debug_assert_ne!(raw, EMPTY);
        if raw & EVICTED != 0 {
            Slot::Evicted(raw & !EVICTED)
        } else {
            Slot::Cached(raw - 1)
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(8))]
struct Entry {
    tag: u32,
    slot: u32,
}

/// Tag → slot, open addressing with linear probing (see the module docs).
#[derive(Clone, Debug)]
pub(super) struct ContentIndex {
    entries: Vec<Entry>,
    /// `64 - log2(entries.len())`: the home bucket is the top bits of the tag's Fibonacci product.
    shift: u32,
    len: usize,
    /// The most entries the owner will ever hold at once (the pool: `2 · total`, invariant 4 there).
    bound: usize,
}

const MIN_ENTRIES: usize = 16;

impl ContentIndex {
    /// An empty table for an owner that holds at most `bound` entries at once (inserting more is a
    /// bug of the owner's, caught by a debug assertion; the table still grows as needed).
    pub fn with_bound(bound: usize) -> Self {
        ContentIndex::with_entries(MIN_ENTRIES, bound)
    }

    fn with_entries(n: usize, bound: usize) -> Self {
        debug_assert!(n.is_power_of_two());
        ContentIndex {
            entries: vec![Entry::default(); n],
            shift: 64 - n.trailing_zeros(),
            len: 0,
            bound,
        }
    }

    /// The size a table for `bound` entries ends at: the least power of two (and at least
    /// [`MIN_ENTRIES`]) at which `bound` entries are fewer than two thirds used.
    pub fn final_entries(bound: usize) -> usize {
        (bound * 3 / 2 + 1).next_power_of_two().max(MIN_ENTRIES)
    }

    /// Entries in use.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    fn mask(&self) -> usize {
        self.entries.len() - 1
    }

    fn tag(h: u64) -> u32 {
        h as u32
    }

    /// The bucket where a tag's probe starts (the same for every hash with that tag).
    fn home(&self, tag: u32) -> usize {
        (u64::from(tag).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// Starts loading the cache line where a lookup of `h` begins (a hint: changes nothing).
    #[inline(always)]
    pub fn prefetch(&self, h: u64) {
        prefetch(&self.entries[self.home(Self::tag(h))]);
    }

    /// The position of the first entry on `h`'s probe chain whose tag is `h`'s and whose slot `is_h`
    /// confirms to be `h`'s.
    #[inline]
    pub fn find(&self, h: u64, mut is_h: impl FnMut(Slot) -> bool) -> Option<usize> {
        let tag = Self::tag(h);
        let mask = self.mask();
        let mut i = self.home(tag);
        loop {
            let e = self.entries[i];
            if e.slot == EMPTY {
                return None;
            }
            if e.tag == tag && is_h(Slot::decode(e.slot)) {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// The position of the entry for `h` that holds exactly `slot` (the caller knows that no other
    /// entry holds it: a block caches one content, an eviction evicts one).
    #[inline]
    pub fn find_exact(&self, h: u64, slot: Slot) -> Option<usize> {
        self.find(h, |s| s == slot)
    }

    /// The slot at a position [`ContentIndex::find`] returned.
    pub fn slot(&self, pos: usize) -> Slot {
        Slot::decode(self.entries[pos].slot)
    }

    /// Overwrites the slot at a position [`ContentIndex::find`] returned.
    pub fn set(&mut self, pos: usize, slot: Slot) {
        self.entries[pos].slot = slot.encode();
    }

    /// Adds an entry for `h`; the caller has made sure that none of `h`'s is there.
    pub fn insert(&mut self, h: u64, slot: Slot) {
        if 3 * (self.len + 1) > 2 * self.entries.len() {
            self.grow();
        }
        let tag = Self::tag(h);
        let i = self.vacancy(tag);
        self.entries[i] = Entry {
            tag,
            slot: slot.encode(),
        };
        self.len += 1;
    }

    /// The first empty entry on `tag`'s probe chain.
    fn vacancy(&self, tag: u32) -> usize {
        let mask = self.mask();
        let mut i = self.home(tag);
        while self.entries[i].slot != EMPTY {
            i = (i + 1) & mask;
        }
        i
    }

    /// Removes the entry at `pos`, shifting the rest of its cluster back so that no probe chain breaks.
    pub fn remove(&mut self, pos: usize) {
        let mask = self.mask();
        let mut hole = pos;
        let mut j = pos;
        loop {
            j = (j + 1) & mask;
            let e = self.entries[j];
            if e.slot == EMPTY {
                break;
            }
            // `e` may fill the hole if the hole lies on its chain, between its home and `j`.
            let home = self.home(e.tag);
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.entries[hole] = e;
                hole = j;
            }
        }
        self.entries[hole] = Entry::default();
        self.len -= 1;
    }

    /// Doubles the table, or, once it holds a quarter of its bound, grows it to its final size.
    fn grow(&mut self) {
        debug_assert!(self.len < self.bound, "more entries than the bound");
        let last = ContentIndex::final_entries(self.bound);
        let size = if 4 * self.len >= self.bound {
            last.max(self.entries.len() * 2)
        } else {
            (self.entries.len() * 2).min(last)
        };
        let old = std::mem::take(&mut self.entries);
        *self = ContentIndex::with_entries(size, self.bound);
        for e in old.into_iter().filter(|e| e.slot != EMPTY) {
            let i = self.vacancy(e.tag);
            self.entries[i] = e;
            self.len += 1;
        }
    }

    /// Every entry: its tag and slot.
    pub fn iter(&self) -> impl Iterator<Item = (u32, Slot)> + '_ {
        self.entries
            .iter()
            .filter(|e| e.slot != EMPTY)
            .map(|e| (e.tag, Slot::decode(e.slot)))
    }

    /// The tag an entry for `h` carries.
    pub fn tag_of(h: u64) -> u32 {
        Self::tag(h)
    }

    /// Checks the invariants in the module docs; `Err` names the first that fails.
    pub fn check(&self) -> Result<(), String> {
        let mask = self.mask();
        let used = self.entries.iter().filter(|e| e.slot != EMPTY).count();
        if used != self.len {
            return Err(format!("{used} entries used, counter says {}", self.len));
        }
        if 3 * self.len > 2 * self.entries.len() {
            return Err(format!(
                "{} of {} entries used",
                self.len,
                self.entries.len()
            ));
        }
        for (i, e) in self.entries.iter().enumerate() {
            if e.slot == EMPTY {
                continue;
            }
            let mut k = self.home(e.tag);
            while k != i {
                if self.entries[k].slot == EMPTY {
                    return Err(format!("entry {i} is cut off from its home bucket by {k}"));
                }
                k = (k + 1) & mask;
            }
        }
        Ok(())
    }
}

/// Asks the processor to start loading `x`'s cache line. A hint only: it changes no state, and
/// nothing computed depends on it.
#[inline(always)]
pub(super) fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing the program can observe and never faults (and `x` is a valid
    // reference anyway).
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            (x as *const T).cast::<i8>(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// Hashes that collide in their low 32 bits (and so share tags and probe chains) as often as not.
    fn hash(k: u8) -> u64 {
        (u64::from(k % 4) << 40) | u64::from(k / 4)
    }

    #[derive(Debug, Clone)]
    enum Op {
        Upsert(u8, u32),
        Remove(u8),
    }

    proptest! {
        /// The table answers like a map from full hash to slot, confirming tags by the full hash,
        /// under any mix of inserts, overwrites and removals (with heavy tag collisions), and keeps
        /// its invariants throughout.
        #[test]
        fn answers_like_a_map(ops in proptest::collection::vec(
            prop_oneof![
                (0u8..64, 0u32..1000).prop_map(|(k, v)| Op::Upsert(k, v)),
                (0u8..64).prop_map(Op::Remove),
            ],
            1..400,
        )) {
            let mut table = ContentIndex::with_bound(64);
            let mut model: HashMap<u64, Slot> = HashMap::new();
            // The full hash behind each slot value, as the pool's records would know it.
            let mut owner: HashMap<Slot, u64> = HashMap::new();
            for op in ops {
                match op {
                    Op::Upsert(k, v) => {
                        let h = hash(k);
                        let slot = if v % 2 == 0 { Slot::Cached(v) } else { Slot::Evicted(v) };
                        if owner.get(&slot).is_some_and(|&o| o != h) {
                            continue; // a slot names one content
                        }
                        let found = table.find(h, |s| owner.get(&s) == Some(&h));
                        match found {
                            Some(pos) => {
                                owner.remove(&table.slot(pos));
                                table.set(pos, slot);
                            }
                            None => table.insert(h, slot),
                        }
                        owner.insert(slot, h);
                        model.insert(h, slot);
                    }
                    Op::Remove(k) => {
                        let h = hash(k);
                        if let Some(slot) = model.remove(&h) {
                            let pos = table.find_exact(h, slot).expect("present");
                            table.remove(pos);
                            owner.remove(&slot);
                        }
                    }
                }
                prop_assert!(table.check().is_ok(), "{:?}", table.check());
                prop_assert_eq!(table.len(), model.len());
                for k in 0..64u8 {
                    let h = hash(k);
                    let got = table.find(h, |s| owner.get(&s) == Some(&h)).map(|p| table.slot(p));
                    prop_assert_eq!(got, model.get(&h).copied());
                }
            }
        }
    }

    #[test]
    fn slots_round_trip_through_their_encoding() {
        for s in [
            Slot::Cached(0),
            Slot::Cached(MAX_BLOCKS - 1),
            Slot::Evicted(0),
            Slot::Evicted(EVICTION_BITS_MASK as u32),
        ] {
            assert_ne!(s.encode(), EMPTY);
            assert_eq!(Slot::decode(s.encode()), s);
        }
    }

    #[test]
    fn the_table_doubles_before_two_thirds_full_while_far_from_its_bound() {
        let mut t = ContentIndex::with_bound(1 << 20);
        let mut sizes = vec![t.entries.len()];
        for h in 0..10_000u64 {
            t.insert(h << 32 | h, Slot::Cached(h as u32));
            if *sizes.last().unwrap() != t.entries.len() {
                sizes.push(t.entries.len());
            }
        }
        assert_eq!(t.len(), 10_000);
        let doubling: Vec<usize> = (4..=14).map(|k| 1 << k).collect();
        assert_eq!(sizes, doubling);
        t.check().unwrap();
    }

    #[test]
    fn a_quarter_of_the_way_to_its_bound_the_table_takes_its_final_size() {
        // A pool of 26,241 blocks (an H100 with Llama-3.1-8B) holds at most 52,482 entries.
        let bound = 2 * 26_241;
        assert_eq!(ContentIndex::final_entries(bound), 131_072);
        let mut t = ContentIndex::with_bound(bound);
        let mut sizes = vec![t.entries.len()];
        for h in 0..bound as u64 {
            t.insert(h << 32 | h, Slot::Cached(h as u32));
            if *sizes.last().unwrap() != t.entries.len() {
                sizes.push(t.entries.len());
                // It jumps to its final size before it holds half its bound.
                if t.entries.len() == 131_072 {
                    assert!(2 * t.len() <= bound, "{} entries", t.len());
                }
            }
        }
        assert_eq!(sizes.last(), Some(&131_072));
        assert!(sizes.windows(2).all(|w| w[1] > w[0]));
        t.check().unwrap();
        // Small bounds end at their own size, never below the smallest table.
        assert_eq!(ContentIndex::final_entries(0), MIN_ENTRIES);
        assert_eq!(ContentIndex::final_entries(10), MIN_ENTRIES);
        assert_eq!(ContentIndex::final_entries(11), 32);
    }
}
