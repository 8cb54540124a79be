//! Hot-prefix replication (`[interconnect.replication]`): a prefix requested faster than a threshold is
//! copied from a worker that caches it to more workers, over the interconnect, so that a cache-aware
//! router has more than one place to send it (the cure for the hot-prefix death spiral, where every
//! request for a hot prefix queues on the one worker that holds it).
//!
//! ```text
//! dispatch ─► HotPrefixes::observe (rate per prefix over a window) ─► hot, copies < target?
//!          ─► target: the least loaded live worker lacking it; source: the holder whose copy lands first
//!          ─► Fabric::book (source's out port, target's in port) ─► Event::ReplicaLands
//!          ─► the target registers the blocks as free cached blocks (LRU like any other) + KV events
//! ```
//! Following Mooncake's conductor (Qin et al., FAST 2025), which replicates hot KV blocks to more
//! instances; the trigger (a request rate over a sliding window) and the choice of target (the least
//! loaded worker without the prefix, as Dynamo's and llm-d's routers weigh load against cache) are
//! this simulator's.
//!
//! When a copy lands, the target is settled (`settle_worker`), the prefix blocks it still caches are
//! held while the missing ones take free blocks (evicting the least recently used cached content, never
//! a running request's blocks) and are registered, then all are released head last, so the prefix's
//! head is the last to be evicted (as a finished request's blocks are). A copy that finds no free block
//! stops short; a copy whose source or target failed before it landed is lost (nothing registered).
//!
//! Invariants: at most `max_in_flight` copies are in flight; a prefix is never copied to a worker with a
//! copy of it in flight; bytes booked = blocks sent × the target's bytes per block; blocks registered ≤
//! blocks sent; the pool's own laws (a block cached at most once per worker, used + free = total) hold
//! after every landing, because a landing uses only the pool's allocate / register / release.

use super::queue::Class;
use super::{Event, Simulation, Truth};
use crate::metrics::summary::{ReplicationSummary, mean_ms};
use crate::tiers::hot_prefix::{HotPrefixes, ReplicationSpec};

/// Replication's state: the detector, the copies in flight and what the copies did.
#[derive(Debug)]
pub(super) struct Replication {
    copies: usize,
    max_in_flight: usize,
    detector: HotPrefixes,
    /// (prefix key, target) of each copy in flight.
    in_flight: Vec<(u64, usize)>,
    stats: ReplicationStats,
}

/// Totals over a run's copies.
#[derive(Debug, Default)]
struct ReplicationStats {
    hot: u64,
    copies: u64,
    blocks_sent: u64,
    bytes: f64,
    blocks_registered: u64,
    transfer_s: f64,
    lost: u64,
}

/// A copy in flight, carried by [`Event::ReplicaLands`].
#[derive(Debug)]
pub(super) struct Replica {
    pub key: u64,
    pub from: usize,
    pub from_epoch: u64,
    pub to: usize,
    pub to_epoch: u64,
    /// The whole prefix, leading block first; the target lacked `blocks[sent_from..]` when it was booked.
    pub blocks: Vec<u64>,
    pub sent_from: usize,
}

impl Replication {
    /// Replication under `spec` over blocks of `block_size` tokens.
    pub(super) fn new(spec: &ReplicationSpec, block_size: u32) -> Self {
        Replication {
            copies: spec.copies.0 as usize,
            max_in_flight: spec.max_in_flight.0 as usize,
            detector: HotPrefixes::new(spec, block_size),
            in_flight: Vec::new(),
            stats: ReplicationStats::default(),
        }
    }
}

impl Simulation {
    /// Counts a request for prompt blocks `prompt` (hashed at worker 0's block size); if its prefix is
    /// hot and held by fewer workers than the target, books one copy to one more worker.
    pub(super) fn replicate_hot(&mut self, prompt: &[u64]) {
        let now = self.now;
        let Some(r) = self.replication.as_mut() else {
            return;
        };
        let Some(hot) = r.detector.observe(now, prompt) else {
            return;
        };
        r.stats.hot += u64::from(hot.crossed);
        if r.in_flight.len() >= r.max_in_flight {
            return;
        }
        let pending: Vec<usize> = r
            .in_flight
            .iter()
            .filter(|(k, _)| *k == hot.key)
            .map(|&(_, t)| t)
            .collect();
        let (copies, key) = (r.copies, hot.key);
        let prefix = hot.blocks;
        let n = prefix.len();
        let bs = self.workers[0].params.block_size;
        let Some(d) = self.disagg.as_ref() else {
            return;
        };
        // Workers that could serve the prefix: live, routable, caching, prefill-capable, same blocks.
        let eligible = |v: usize| {
            let w = &self.workers[v];
            self.truth[v] == Truth::Up
                && self.gateway.routable(v)
                && w.params.enable_prefix_caching
                && w.params.block_size == bs
                && d.roles[v].prefills()
        };
        let last = prefix[n - 1];
        let holds = |v: usize| {
            let pool = &self.workers[v].pool;
            pool.lookup(last).is_some() && pool.cached_prefix(&prefix) == n
        };
        let holders: Vec<usize> = (0..self.workers.len())
            .filter(|&v| eligible(v) && holds(v))
            .collect();
        if holders.is_empty() || holders.len() + pending.len() >= copies {
            return;
        }
        // The least loaded worker that lacks it and can be reached from a holder (the lowest id on a tie).
        let target = (0..self.workers.len())
            .filter(|&v| eligible(v) && !holds(v) && !pending.contains(&v))
            .filter(|&v| holders.iter().any(|&h| d.fabric.path(h, v).is_some()))
            .min_by_key(|&v| (self.snapshots[v].outstanding, v));
        let Some(to) = target else {
            return;
        };
        let have = self.workers[to].pool.cached_prefix(&prefix);
        let k = n - have;
        let worker = &self.workers[to];
        let bytes = k as f64
            * worker.perf.kv_bytes_per_token_per_gpu()
            * f64::from(bs)
            * f64::from(worker.perf.tp);
        // The holder whose copy would land first (the lowest id on a tie).
        let Some((_, from)) = holders
            .iter()
            .filter_map(|&h| d.fabric.quote(h, to, bytes, now).map(|t| (t, h)))
            .min()
        else {
            return;
        };
        self.settle_worker(from);
        let Some(lands) = self
            .disagg
            .as_mut()
            .and_then(|d| d.fabric.book(from, to, bytes, now))
        else {
            return;
        };
        let r = self.replication.as_mut().expect("checked above");
        r.in_flight.push((key, to));
        let st = &mut r.stats;
        st.copies += 1;
        st.blocks_sent += k as u64;
        st.bytes += bytes;
        st.transfer_s += lands.since(now).as_secs_f64();
        let replica = Replica {
            key,
            from,
            from_epoch: self.workers[from].epoch,
            to,
            to_epoch: self.workers[to].epoch,
            blocks: prefix,
            sent_from: have,
        };
        self.schedule(
            lands,
            Class::Arrival,
            Event::ReplicaLands(Box::new(replica)),
        );
    }

    /// A copy lands on its target: the blocks join its prefix cache as free cached blocks.
    pub(super) fn on_replica_lands(&mut self, c: Replica) {
        self.settle_worker(c.to);
        let r = self
            .replication
            .as_mut()
            .expect("a copy implies replication");
        if let Some(i) = r.in_flight.iter().position(|&f| f == (c.key, c.to)) {
            r.in_flight.swap_remove(i);
        }
        let target_ok = self.workers[c.to].epoch == c.to_epoch && self.truth[c.to] == Truth::Up;
        if !target_ok || self.workers[c.from].epoch != c.from_epoch {
            r.stats.lost += 1;
            return;
        }
        let registered = adopt(&mut self.workers[c.to].pool, &c.blocks, c.sent_from);
        self.replication
            .as_mut()
            .expect("checked above")
            .stats
            .blocks_registered += registered;
        self.write_down(c.to);
        self.forward_kv_events(c.to);
    }

    /// What replication did, for the summary.
    pub(super) fn replication_summary(&self) -> Option<ReplicationSummary> {
        let st = &self.replication.as_ref()?.stats;
        Some(ReplicationSummary {
            hot_prefixes: st.hot,
            copies: st.copies,
            blocks_transferred: st.blocks_sent,
            bytes_transferred: st.bytes.round() as u64,
            blocks_registered: st.blocks_registered,
            mean_transfer_ms: mean_ms(st.transfer_s, st.copies),
            lost_to_failure: st.lost,
        })
    }
}

/// Registers `prefix` in `pool` as free cached blocks: the blocks it still caches are held while each
/// missing one of `prefix[sent_from..]` takes a free block (the LRU head, whose old content is evicted)
/// and is registered; then all are released, last block first, so the head is evicted last. Stops at
/// the first block the pool cannot hold (no free block, or one before `sent_from` evicted meanwhile:
/// a copy only extends a prefix the target holds). Returns the blocks registered.
pub(super) fn adopt(
    pool: &mut crate::worker::kv_cache::BlockPool,
    prefix: &[u64],
    sent_from: usize,
) -> u64 {
    let mut held = Vec::with_capacity(prefix.len());
    let mut registered = 0;
    for (i, &h) in prefix.iter().enumerate() {
        if let Some(b) = pool.lookup(h) {
            pool.touch(b);
            held.push(b);
            continue;
        }
        if i < sent_from {
            break; // evicted since the copy was booked and not part of it
        }
        let Some(b) = pool.allocate() else {
            break;
        };
        pool.register(b, h);
        held.push(b);
        registered += 1;
    }
    pool.release(&held);
    registered
}

#[cfg(test)]
mod tests {
    use super::adopt;
    use crate::worker::kv_cache::BlockPool;

    #[test]
    fn a_copy_registers_the_missing_blocks_as_free_cached_blocks() {
        // 4 blocks; the target caches prefix block 10 (free) and an unrelated block 99 (free, older).
        let mut pool = BlockPool::new(4, 16);
        let b99 = pool.allocate().unwrap();
        pool.register(b99, 99);
        let b10 = pool.allocate().unwrap();
        pool.register(b10, 10);
        pool.release(&[b99]);
        pool.release(&[b10]);
        // The copy carries blocks 11, 12 of prefix [10, 11, 12]; two empty blocks are free.
        assert_eq!(adopt(&mut pool, &[10, 11, 12], 1), 2);
        assert_eq!(pool.cached_prefix(&[10, 11, 12]), 3);
        assert_eq!(pool.used(), 0, "a copy leaves every block free");
        assert!(
            pool.lookup(99).is_some(),
            "two empty blocks were enough: 99 kept"
        );
        pool.check_invariants().unwrap();
        // A second copy of a longer prefix [10, 11, 12, 13] has to take the LRU head: 99 (the
        // prefix's blocks are held while it allocates, so they cannot be taken).
        assert_eq!(adopt(&mut pool, &[10, 11, 12, 13], 3), 1);
        assert!(pool.lookup(99).is_none());
        assert_eq!(pool.cached_prefix(&[10, 11, 12, 13]), 4);
        // Every block holds the prefix now: a fifth block finds no free block and stops short.
        assert_eq!(adopt(&mut pool, &[10, 11, 12, 13, 14], 4), 0);
        assert_eq!(pool.cached_prefix(&[10, 11, 12, 13, 14]), 4);
        // Eviction order: the head is evicted last (released last block first).
        let first = pool.allocate().unwrap();
        assert!(pool.lookup(13).is_none(), "the tail goes first");
        assert!(pool.lookup(10).is_some());
        pool.release(&[first]);
        pool.check_invariants().unwrap();
    }

    #[test]
    fn a_copy_does_not_extend_a_prefix_the_target_lost_meanwhile() {
        // Booked when the target held [10]; block 10 was evicted before the copy (11) landed.
        let mut pool = BlockPool::new(2, 16);
        assert_eq!(adopt(&mut pool, &[10, 11], 1), 0);
        assert_eq!(pool.cached_blocks(), 0);
    }
}
