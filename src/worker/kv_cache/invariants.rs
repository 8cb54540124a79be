//! The pool's invariants (the module docs number them), checked in full.

use super::{Block, BlockPool, TOMBSTONE};
use crate::worker::content_index::{ContentIndex, Slot};

impl BlockPool {
    /// Checks every invariant in the module docs; `Err` names the first that fails.
    pub fn check_invariants(&self) -> Result<(), String> {
        let used = self.blocks.iter().filter(|b| b.refs() > 0).count() as u32;
        if used + self.free != self.total() {
            return Err(format!(
                "used {used} + free {} != total {}",
                self.free,
                self.total()
            ));
        }
        if self.queue.len() > 2 * self.blocks.len() {
            return Err(format!("free queue holds {} entries", self.queue.len()));
        }
        let mut on_queue = vec![false; self.blocks.len()];
        let mut n = 0;
        for (at, &b) in (self.dequeued..).zip(&self.queue) {
            if b == TOMBSTONE {
                continue;
            }
            let block = self
                .blocks
                .get(b as usize)
                .ok_or("free queue names no block")?;
            if block.refs() > 0 || block.queued_at != at as u32 {
                return Err(format!(
                    "free-queue entry {at} names block {b} (refs {}, queued at {})",
                    block.refs(),
                    block.queued_at
                ));
            }
            if std::mem::replace(&mut on_queue[b as usize], true) {
                return Err(format!("block {b} is twice in the free queue"));
            }
            n += 1;
        }
        if n != self.free {
            return Err(format!(
                "free queue holds {n} blocks, counter says {}",
                self.free
            ));
        }
        for (i, r) in self.blocks.iter().map(Block::refs).enumerate() {
            if (r == 0) != on_queue[i] {
                return Err(format!(
                    "block {i}: refs {r} but in the free queue = {}",
                    on_queue[i]
                ));
            }
        }
        self.index.check()?;
        let (mut cached, mut ghosts) = (0, 0);
        let mut named = vec![false; self.blocks.len()];
        for (tag, slot) in self.index.iter() {
            match slot {
                Slot::Cached(b) => {
                    cached += 1;
                    let block = self.blocks.get(b as usize).ok_or("index names no block")?;
                    if !block.hashed()
                        || !block.indexed()
                        || ContentIndex::tag_of(block.hash) != tag
                        || std::mem::replace(&mut named[b as usize], true)
                    {
                        return Err(format!(
                            "index entry {tag:#x} names block {b}, which holds {:?} (indexed: {})",
                            block.content(),
                            block.indexed()
                        ));
                    }
                    if self.entry(block.hash) != self.index.find_exact(block.hash, slot) {
                        return Err(format!("block {b}'s content is not found where it is"));
                    }
                }
                Slot::Evicted(low) => {
                    ghosts += 1;
                    match self.ghost(low) {
                        Some(h) if ContentIndex::tag_of(h) == tag => {}
                        other => {
                            return Err(format!(
                                "index entry {tag:#x} names eviction {low}, which evicted {other:?}"
                            ));
                        }
                    }
                }
            }
        }
        let hashed = self.blocks.iter().filter(|b| b.hashed()).count();
        // `indexed` is left set when a block loses its content: only a hashed block's flag counts.
        let indexed = self
            .blocks
            .iter()
            .filter(|b| b.hashed() && b.indexed())
            .count();
        if indexed != cached || hashed != self.cached {
            return Err(format!(
                "{hashed} hashed blocks ({indexed} indexed), {cached} cached index entries, counter {}",
                self.cached
            ));
        }
        if ghosts > self.ghosts.len() {
            return Err("more evicted entries than remembered evictions".into());
        }
        Ok(())
    }

    pub(super) fn debug_check(&self) {
        #[cfg(debug_assertions)]
        if self.total() <= 1024
            && let Err(e) = self.check_invariants()
        {
            panic!("KV block pool invariant broken: {e}");
        }
    }
}
