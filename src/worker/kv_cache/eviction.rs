//! Eviction and its bounded memory: every eviction is remembered (a "ghost") for the next `total`
//! evictions, so that recompute can be attributed to eviction (invariant 4 of the module docs).

use super::{ANONYMOUS, BlockId, BlockPool, GHOST_PREFETCH_AHEAD, KvEvent};
use crate::worker::content_index::{EVICTION_BITS_MASK, Slot};

impl BlockPool {
    /// Whether this pool evicted `hash` recently (within the last `total` evictions) and holds it no more.
    pub fn recently_evicted(&self, hash: u64) -> bool {
        matches!(self.probe(hash), Some(Slot::Evicted(_)))
    }

    /// The hash evicted by the remembered eviction whose number has these low bits. Every ghost in
    /// the index is one of the last `ghosts.len() <= total < 2^31` evictions (invariant 4), so the
    /// low bits name it exactly.
    pub(super) fn ghost(&self, low: u32) -> Option<u64> {
        let last = self.evictions.checked_sub(1)?;
        let stamp = last - (last.wrapping_sub(u64::from(low)) & EVICTION_BITS_MASK);
        let first = self.evictions - self.ghosts.len() as u64;
        let i = stamp.checked_sub(first)?;
        self.ghosts.get(i as usize).copied()
    }

    /// Forgets cached content `h` (in the index unless private), remembering the eviction for the next
    /// `total` evictions.
    pub(super) fn evict(&mut self, b: BlockId, h: u64, indexed: bool) {
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
}
