//! The free queue: a ring of block ids in the order they were freed, with tombstones for blocks taken
//! back into use, compacted in place when tombstones would make it longer than `2 · total`.

use super::{BlockId, BlockPool, PREFETCH_AHEAD, QUEUE_ENTRY_AHEAD, QUEUE_RECORD_AHEAD, TOMBSTONE};
use crate::worker::content_index::prefetch;

impl BlockPool {
    /// Queues free block `b` at the back of the free queue, compacting the queue first if it is full.
    pub(super) fn push_tail(&mut self, b: BlockId) {
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
    pub(super) fn queue_index(queued_at: u32, dequeued: u64) -> usize {
        queued_at.wrapping_sub(dequeued as u32) as usize
    }

    /// Drops the free queue's tombstones, keeping the other entries in order (renumbered from the front).
    /// Called once per `total` or more blocks queued; it walks the ring as one slice (rotating it into
    /// place first if it wraps), asking for each live entry's record some way ahead of renumbering it.
    #[cold]
    #[inline(never)]
    pub(super) fn compact(&mut self) {
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
    pub(super) fn prefetch_queue(&self) {
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
