//! One block's record: its content hash, its free-queue position and its reference count and flags,
//! packed in 16 bytes.

/// One block's bookkeeping, kept together so that touching a block (taking it off the free queue,
/// evicting its content, releasing it) costs one cache line instead of one per array: 16 bytes, so
/// that four fill a line and none straddles two (at 24 bytes, one in four did, and a walk that asked
/// for a record's first line still waited for its second).
#[derive(Clone, Copy, Debug)]
#[repr(align(16))]
pub(super) struct Block {
    /// The chain hash of the block's content; meaningful only when `hashed`.
    pub(super) hash: u64,
    /// The low 32 bits of the free-queue position of the block's entry, counted from the first entry
    /// ever queued (meaningful only while `refs == 0`). The queue holds fewer than `2 · total < 2^32`
    /// entries, so these bits and the queue's own count of entries taken off its front give the
    /// entry's place exactly ([`BlockPool::queue_index`]).
    pub(super) queued_at: u32,
    /// Running sequences holding the block (the low 30 bits), [`Block::HASHED`] and
    /// [`Block::INDEXED`].
    pub(super) state: u32,
}

impl Block {
    pub(super) const EMPTY: Block = Block {
        hash: 0,
        queued_at: 0,
        state: 0,
    };

    /// The block holds a full block of content (`hash`).
    pub(super) const HASHED: u32 = 1 << 30;
    /// That content is in the index (always, except for a private block).
    pub(super) const INDEXED: u32 = 1 << 31;
    /// The bits of `state` that count references.
    pub(super) const REFS: u32 = Self::HASHED - 1;

    /// Running sequences holding the block.
    pub(super) fn refs(&self) -> u32 {
        self.state & Self::REFS
    }

    /// Sets the reference count; `refs` fits in its bits (only [`BlockPool::touch`] adds references,
    /// and it checks).
    pub(super) fn set_refs(&mut self, refs: u32) {
        debug_assert!(refs <= Self::REFS);
        self.state = (self.state & !Self::REFS) | refs;
    }

    /// Whether the block holds a full block of content (`hash`).
    pub(super) fn hashed(&self) -> bool {
        self.state & Self::HASHED != 0
    }

    /// Whether that content is in the index.
    pub(super) fn indexed(&self) -> bool {
        self.state & Self::INDEXED != 0
    }

    pub(super) fn set_hashed(&mut self, on: bool) {
        self.set_flag(Self::HASHED, on);
    }

    pub(super) fn set_indexed(&mut self, on: bool) {
        self.set_flag(Self::INDEXED, on);
    }

    pub(super) fn set_flag(&mut self, flag: u32, on: bool) {
        if on {
            self.state |= flag;
        } else {
            self.state &= !flag;
        }
    }

    /// The content's hash, if the block holds content.
    pub(super) fn content(&self) -> Option<u64> {
        self.hashed().then_some(self.hash)
    }
}

const _: () = assert!(std::mem::size_of::<Block>() == 16);
