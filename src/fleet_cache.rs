//! Which workers hold which cached blocks: the fleet-wide view of KV residency.
//!
//! Maintained from the workers' [`KvEvent`]s. Lookups walk a prompt's block hashes once, so their cost
//! grows with the prompt, never with the number of cached blocks in the fleet.

use std::collections::HashMap;

use crate::worker::kv_cache::KvEvent;

/// Block hash → the workers that hold that block in their prefix cache.
///
/// Invariant: `holders[h]` contains worker `w` iff `w`'s pool indexes `h`, and is never empty.
#[derive(Debug, Default)]
pub struct FleetCache {
    holders: HashMap<u64, Vec<u32>>,
}

impl FleetCache {
    /// Applies worker `w`'s cache events.
    pub fn apply(&mut self, w: usize, events: impl IntoIterator<Item = KvEvent>) {
        let w = w as u32;
        for e in events {
            match e {
                KvEvent::Stored(h) => {
                    let v = self.holders.entry(h).or_default();
                    debug_assert!(!v.contains(&w), "worker {w} stored block {h:#x} twice");
                    v.push(w);
                }
                KvEvent::Removed(h) => {
                    if let Some(v) = self.holders.get_mut(&h) {
                        v.retain(|&x| x != w);
                        if v.is_empty() {
                            self.holders.remove(&h);
                        }
                    }
                }
            }
        }
    }

    /// Leading blocks of `hashes` that some worker other than `except` holds (each block by any such worker).
    pub fn prefix_held_elsewhere(&self, hashes: &[u64], except: usize) -> usize {
        let except = except as u32;
        hashes
            .iter()
            .take_while(|h| {
                self.holders
                    .get(h)
                    .is_some_and(|v| v.iter().any(|&w| w != except))
            })
            .count()
    }

    /// Distinct blocks cached anywhere in the fleet.
    pub fn distinct_blocks(&self) -> usize {
        self.holders.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracks_holders_and_prefixes() {
        let mut f = FleetCache::default();
        f.apply(0, [KvEvent::Stored(1), KvEvent::Stored(2)]);
        f.apply(1, [KvEvent::Stored(1)]);
        assert_eq!(f.prefix_held_elsewhere(&[1, 2, 3], 1), 2);
        assert_eq!(f.prefix_held_elsewhere(&[1, 2, 3], 0), 1);
        f.apply(0, [KvEvent::Removed(1)]);
        assert_eq!(f.prefix_held_elsewhere(&[1, 2], 1), 0);
        f.apply(1, [KvEvent::Removed(1)]);
        assert_eq!(f.distinct_blocks(), 1);
    }
}
