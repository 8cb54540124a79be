//! The shared KV store of `session_state = "shared_tier"`: block hashes written by finished requests,
//! readable by every worker once their write has landed.
//!
//! Invariant: `ready` holds exactly the hashes whose latest entry in `order` is live, and at most
//! `capacity` of them; the oldest writes are dropped first.

use std::collections::VecDeque;

use rustc_hash::FxHashMap as HashMap;

use super::SharedTierSpec;
use crate::time::{SimDuration, SimTime};

/// The store's contents and link parameters.
#[derive(Debug)]
pub struct SharedStore {
    /// Hash → (when its write lands, write number).
    ready: HashMap<u64, (SimTime, u64)>,
    /// Writes in order: (hash, write number); stale entries are skipped.
    order: VecDeque<(u64, u64)>,
    writes: u64,
    /// Capacity in blocks, once the block size is known (`None`: unbounded).
    capacity_gb: Option<f64>,
    capacity_blocks: Option<usize>,
    read_bytes_per_s: f64,
    write_bytes_per_s: f64,
    latency: SimDuration,
    /// Whether the store answers at all (a `store_failure` fault makes it unavailable).
    pub available: bool,
    /// Blocks loaded from the store, and written to it.
    pub blocks_loaded: u64,
    pub blocks_written: u64,
}

impl SharedStore {
    /// An empty store with `spec`'s links.
    pub fn new(spec: &SharedTierSpec) -> Self {
        SharedStore {
            ready: HashMap::default(),
            order: VecDeque::new(),
            writes: 0,
            capacity_gb: spec.capacity_gb.map(|c| c.0),
            capacity_blocks: None,
            read_bytes_per_s: spec.read_gb_per_s.0 * 1e9,
            write_bytes_per_s: spec.write_gb_per_s.0 * 1e9,
            latency: spec.latency,
            available: true,
            blocks_loaded: 0,
            blocks_written: 0,
        }
    }

    /// Time to load `blocks` blocks of `block_bytes` bytes each (per GPU shard).
    pub fn load_time(&self, blocks: u32, block_bytes: f64) -> SimDuration {
        self.latency
            + SimDuration::from_secs_f64(f64::from(blocks) * block_bytes / self.read_bytes_per_s)
    }

    /// Leading blocks of `hashes` readable at `now` (0 while the store is unavailable).
    pub fn prefix(&self, hashes: &[u64], now: SimTime) -> usize {
        if !self.available {
            return 0;
        }
        hashes
            .iter()
            .take_while(|h| self.ready.get(h).is_some_and(|&(t, _)| t <= now))
            .count()
    }

    /// Writes `hashes` (blocks of `block_bytes` bytes) at `now`; they become readable when the write
    /// lands. Blocks already stored keep their earlier landing time. Dropped while unavailable.
    pub fn write(&mut self, hashes: &[u64], block_bytes: f64, now: SimTime) {
        if !self.available || hashes.is_empty() {
            return;
        }
        let cap = *self
            .capacity_blocks
            .get_or_insert_with(|| match self.capacity_gb {
                Some(gb) => ((gb * 1e9 / block_bytes).floor() as usize).max(1),
                None => usize::MAX,
            });
        let new: Vec<u64> = hashes
            .iter()
            .copied()
            .filter(|h| !self.ready.contains_key(h))
            .collect();
        let lands = now
            + self.latency
            + SimDuration::from_secs_f64(new.len() as f64 * block_bytes / self.write_bytes_per_s);
        for h in new {
            self.writes += 1;
            self.ready.insert(h, (lands, self.writes));
            self.order.push_back((h, self.writes));
            self.blocks_written += 1;
        }
        while self.ready.len() > cap {
            let Some((h, n)) = self.order.pop_front() else {
                break;
            };
            if self.ready.get(&h).is_some_and(|&(_, m)| m == n) {
                self.ready.remove(&h);
            }
        }
    }

    /// Forgets everything (a store failure with data loss).
    pub fn clear(&mut self) {
        self.ready.clear();
        self.order.clear();
    }

    /// Blocks held.
    pub fn len(&self) -> usize {
        self.ready.len()
    }

    /// Whether the store holds nothing.
    pub fn is_empty(&self) -> bool {
        self.ready.is_empty()
    }
}
