//! KV offload tiers below GPU memory: `host` (each worker's CPU memory), `disk` (each worker's NVMe)
//! and `shared` (a remote store every worker reaches), in the spirit of vLLM's KV offloading, LMCache
//! and Dynamo's KV block manager (G1 GPU, G2 host, G3 disk, G4 remote).
//!
//! Data path of a block:
//! - **Write-down.** A block evicted from a worker's GPU cache is written to the first configured tier
//!   of `host`, `disk`, `shared`, over that tier's write link (asynchronously: it becomes readable when
//!   the write lands, and later writes queue behind it). A block pushed out of a full tier goes down to
//!   the next configured one the same way; out of the last, it is gone.
//! - **Load.** When a request is dispatched, the blocks after its GPU-cached prefix are looked up tier
//!   by tier (host, then disk, then shared). Loading the first `k` of them costs
//!   `latency + bytes / bandwidth` on each tier's read link (queued behind that link's earlier
//!   transfers; the tiers' links work in parallel); the worker loads the `k` that minimises load time
//!   plus the recompute of the rest under its own step model ([`pricing`]), which may be none.
//! - A worker's `host` and `disk` are exclusive of its GPU: a loaded block leaves them (it is written
//!   down again when the GPU evicts it). `shared` is inclusive (other workers read the same copy).
//!
//! Invariants: a block is held at most once per tier of a worker ([`store::TierStore`]); bytes moved on
//! a tier are blocks moved times the block's bytes per GPU times the GPUs of the worker.
//!
//! Between workers, [`interconnect`] moves KV over NVLink within a node and RDMA across nodes (the
//! prefill-to-decode hand-off of disaggregated serving), and [`pricing::cost_to_place`] prices getting
//! a prefix onto a worker from any source against recomputing it.
//!
//! The shared KV store of `gateway.session_state = "shared_tier"` (finished turns written, read back by
//! any worker) is this module's `shared` tier.

pub mod hot_prefix;
pub mod interconnect;
pub mod link;
pub mod pricing;
pub mod store;

use serde::{Deserialize, Serialize};

use crate::config::Positive;
use crate::time::{SimDuration, SimTime};
use link::Link;
use store::TierStore;

/// Which block goes when a tier is full.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Eviction {
    /// Least recently written or read.
    #[default]
    Lru,
    /// Oldest write first (reads do not count).
    Fifo,
}

/// One tier's scenario section (`[tiers.host]`, `[tiers.disk]`, `[tiers.shared]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TierSpec {
    /// Capacity in GB of KV: per worker for `host` and `disk` (all its GPUs' shards together), for the
    /// whole fleet for `shared`.
    pub capacity_gb: Positive,
    /// Read bandwidth into one GPU, GB/s (the GPUs of a tensor-parallel replica load their shards in
    /// parallel, each over its own link).
    pub read_gb_per_s: Positive,
    /// Write bandwidth from one GPU, GB/s.
    pub write_gb_per_s: Positive,
    /// Fixed latency of one transfer.
    pub latency: SimDuration,
    /// Which block goes when the tier is full.
    #[serde(default)]
    pub eviction: Eviction,
}

/// `[tiers]`: the tiers below GPU memory; all absent by default (a block evicted from GPU is gone).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TiersSpec {
    /// CPU memory of each worker's host (`[tiers.host]`): the first tier a block evicted from GPU goes to.
    #[serde(default)]
    pub host: Option<TierSpec>,
    /// Local disk of each worker (`[tiers.disk]`), below host memory.
    #[serde(default)]
    pub disk: Option<TierSpec>,
    /// A store shared by every worker (`[tiers.shared]`): a block one worker stored, any worker can read.
    #[serde(default)]
    pub shared: Option<TierSpec>,
}

impl TiersSpec {
    /// Whether any tier is configured.
    pub fn any(&self) -> bool {
        self.host.is_some() || self.disk.is_some() || self.shared.is_some()
    }
}

/// A tier, by position below the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TierKind {
    Host = 0,
    Disk = 1,
    Shared = 2,
}

impl TierKind {
    pub const ALL: [TierKind; 3] = [TierKind::Host, TierKind::Disk, TierKind::Shared];

    pub fn as_str(self) -> &'static str {
        match self {
            TierKind::Host => "host",
            TierKind::Disk => "disk",
            TierKind::Shared => "shared",
        }
    }
}

/// What one tier did over a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TierStats {
    /// Blocks looked up here (after the GPU and every tier above missed them).
    pub lookups: u64,
    /// Of those, found readable here.
    pub hits: u64,
    /// Blocks loaded from here into GPU memory.
    pub blocks_loaded: u64,
    /// Blocks written here (already-held blocks are not written again).
    pub blocks_written: u64,
    /// Blocks pushed out of this tier when full.
    pub blocks_evicted: u64,
    /// Bytes read from and written to this tier, over every worker's links.
    pub bytes_read: f64,
    pub bytes_written: f64,
    /// Tokens loaded from here instead of recomputed.
    pub tokens_loaded: u64,
}

/// A worker's links to each tier and its own `host` and `disk` contents.
#[derive(Debug)]
struct WorkerTiers {
    host: Option<TierStore>,
    disk: Option<TierStore>,
    read: [Option<Link>; 3],
    write: [Option<Link>; 3],
    /// Bytes of one block, per GPU, and the GPUs of the replica.
    block_bytes_per_gpu: f64,
    gpus: f64,
}

/// How a worker's KV is laid out in memory: what the tiers need to turn blocks into bytes.
#[derive(Clone, Copy, Debug)]
pub struct BlockLayout {
    /// Bytes of one block on one GPU.
    pub bytes_per_gpu: f64,
    /// GPUs of the replica (each holds a shard of every block).
    pub gpus: u32,
}

/// Every tier of a fleet: per-worker `host`/`disk` and the fleet's `shared` store.
#[derive(Debug)]
pub struct Tiers {
    workers: Vec<WorkerTiers>,
    shared: Option<TierStore>,
    /// Whether GPU evictions (and overflow from the tiers above) are written to `shared`, or only what
    /// the session store writes ([`Tiers::write_turn`]).
    shared_takes_write_down: bool,
    /// Whether the shared store answers (a `store_failure` fault makes it unavailable).
    pub shared_available: bool,
    pub stats: [TierStats; 3],
}

/// Capacities a tier may have, GB: from a kilobyte to an exabyte.
pub const CAPACITY_GB: (f64, f64) = (1e-6, 1e9);

/// Longest fixed latency of one transfer (a tier's, the interconnect's).
pub const MAX_LATENCY: SimDuration = SimDuration::from_secs(3600);

impl TierSpec {
    /// Ranges that keep transfer times representable. `Err((field, message))`, the field relative to
    /// the tier's table.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        use crate::config::{BANDWIDTH_GB_PER_S, check_range, check_span};
        check_range(self.capacity_gb.0, CAPACITY_GB, " GB").map_err(|m| ("capacity_gb", m))?;
        for (field, v) in [
            ("read_gb_per_s", self.read_gb_per_s.0),
            ("write_gb_per_s", self.write_gb_per_s.0),
        ] {
            check_range(v, BANDWIDTH_GB_PER_S, " GB/s").map_err(|m| (field, m))?;
        }
        check_span(self.latency, SimDuration::ZERO, MAX_LATENCY).map_err(|m| ("latency", m))
    }
}

/// Capacities of this many blocks or more are reported as unbounded (a store with no `capacity_gb`).
pub const UNBOUNDED_BLOCKS: usize = 1 << 48;

/// Blocks of `capacity_gb` for a block of `layout` (at most [`UNBOUNDED_BLOCKS`]).
fn blocks_of(capacity_gb: f64, layout: BlockLayout) -> usize {
    let bytes = layout.bytes_per_gpu * f64::from(layout.gpus);
    (capacity_gb * 1e9 / bytes)
        .floor()
        .min(UNBOUNDED_BLOCKS as f64) as usize
}

impl Tiers {
    /// The tiers of `spec` for workers laid out as `layouts`. `session_store` is the shared store of
    /// `session_state = "shared_tier"` when `spec.shared` does not give one: it takes finished turns only.
    pub fn new(
        spec: &TiersSpec,
        session_store: Option<&TierSpec>,
        layouts: &[BlockLayout],
    ) -> Self {
        let shared_spec = spec.shared.as_ref().or(session_store);
        let link = |t: Option<&TierSpec>, read: bool| {
            t.map(|t| {
                let gbps = if read {
                    t.read_gb_per_s.0
                } else {
                    t.write_gb_per_s.0
                };
                Link::new(gbps * 1e9, t.latency)
            })
        };
        let workers = layouts
            .iter()
            .map(|&l| WorkerTiers {
                host: spec
                    .host
                    .as_ref()
                    .map(|t| TierStore::new(blocks_of(t.capacity_gb.0, l), t.eviction)),
                disk: spec
                    .disk
                    .as_ref()
                    .map(|t| TierStore::new(blocks_of(t.capacity_gb.0, l), t.eviction)),
                read: [
                    link(spec.host.as_ref(), true),
                    link(spec.disk.as_ref(), true),
                    link(shared_spec, true),
                ],
                write: [
                    link(spec.host.as_ref(), false),
                    link(spec.disk.as_ref(), false),
                    link(shared_spec, false),
                ],
                block_bytes_per_gpu: l.bytes_per_gpu,
                gpus: f64::from(l.gpus),
            })
            .collect();
        let first = layouts.first().copied().unwrap_or(BlockLayout {
            bytes_per_gpu: 1.0,
            gpus: 1,
        });
        Tiers {
            workers,
            shared: shared_spec
                .map(|t| TierStore::new(blocks_of(t.capacity_gb.0, first), t.eviction)),
            shared_takes_write_down: spec.shared.is_some(),
            shared_available: true,
            stats: Default::default(),
        }
    }

    /// Whether a shared store exists.
    pub fn has_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// Empties the shared store (a store failure that loses its data).
    pub fn clear_shared(&mut self) {
        if let Some(s) = &mut self.shared {
            s.clear();
        }
    }

    /// Capacity in blocks of `kind` (of worker 0 for per-worker tiers), if configured.
    pub fn capacity_blocks(&self, kind: TierKind) -> Option<usize> {
        match kind {
            TierKind::Shared => self.shared.as_ref().map(TierStore::capacity),
            _ => self
                .workers
                .first()
                .and_then(|w| self.store(w, kind))
                .map(TierStore::capacity),
        }
    }

    fn store<'a>(&'a self, w: &'a WorkerTiers, kind: TierKind) -> Option<&'a TierStore> {
        match kind {
            TierKind::Host => w.host.as_ref(),
            TierKind::Disk => w.disk.as_ref(),
            TierKind::Shared => self.shared.as_ref().filter(|_| self.shared_available),
        }
    }

    fn takes_write_down(&self, w: usize, kind: TierKind) -> bool {
        let wt = &self.workers[w];
        match kind {
            TierKind::Host => wt.host.is_some(),
            TierKind::Disk => wt.disk.is_some(),
            TierKind::Shared => {
                self.shared.is_some() && self.shared_takes_write_down && self.shared_available
            }
        }
    }

    /// Worker `w`'s process died: its host memory is gone (its disk and the shared store keep theirs).
    pub fn on_crash(&mut self, w: usize) {
        if let Some(h) = &mut self.workers[w].host {
            h.clear();
        }
    }

    /// Bytes of one block of worker `w` over all its GPUs.
    pub fn block_bytes(&self, w: usize) -> f64 {
        self.workers[w].block_bytes_per_gpu * self.workers[w].gpus
    }

    /// Blocks evicted from worker `w`'s GPU at `now` are written down to its first tier.
    pub fn write_down(&mut self, w: usize, hashes: &[u64], now: SimTime) {
        let first = TierKind::ALL
            .into_iter()
            .find(|&k| self.takes_write_down(w, k));
        if let Some(k) = first {
            self.write(w, k, hashes, now);
        }
    }

    /// A finished turn's blocks (the session store of `session_state = "shared_tier"`) are written to
    /// the shared store at `now`.
    pub fn write_turn(&mut self, w: usize, hashes: &[u64], now: SimTime) {
        if self.shared.is_some() && self.shared_available {
            self.write(w, TierKind::Shared, hashes, now);
        }
    }

    /// Writes `hashes` from worker `w` into tier `kind` in one transfer; what the tier pushes out goes to
    /// the next tier that takes write-down.
    fn write(&mut self, w: usize, kind: TierKind, hashes: &[u64], now: SimTime) {
        let i = kind as usize;
        let new: Vec<u64> = {
            let store = match kind {
                TierKind::Host => self.workers[w].host.as_ref(),
                TierKind::Disk => self.workers[w].disk.as_ref(),
                TierKind::Shared => self.shared.as_ref(),
            }
            .expect("writes go to configured tiers");
            hashes
                .iter()
                .copied()
                .filter(|h| !store.holds(*h))
                .collect()
        };
        let wt = &mut self.workers[w];
        let per_gpu = new.len() as f64 * wt.block_bytes_per_gpu;
        let gpus = wt.gpus;
        let lands = if new.is_empty() {
            now
        } else {
            wt.write[i]
                .as_mut()
                .expect("a configured tier has links")
                .book(now, per_gpu)
        };
        let store = match kind {
            TierKind::Host => wt.host.as_mut(),
            TierKind::Disk => wt.disk.as_mut(),
            TierKind::Shared => self.shared.as_mut(),
        }
        .expect("writes go to configured tiers");
        let mut pushed = Vec::new();
        for &h in hashes {
            pushed.extend(store.insert(h, lands));
        }
        let st = &mut self.stats[i];
        st.blocks_written += new.len() as u64;
        st.bytes_written += per_gpu * gpus;
        st.blocks_evicted += pushed.len() as u64;
        if pushed.is_empty() {
            return;
        }
        let below = TierKind::ALL[i + 1..]
            .iter()
            .copied()
            .find(|&k| self.takes_write_down(w, k));
        if let Some(k) = below {
            self.write(w, k, &pushed, now);
        }
    }

    /// For worker `w` at `now`: the tier that holds each of `hashes` (the blocks after its GPU-cached
    /// prefix), stopping at the first block no tier holds. Counts the lookups.
    pub fn locate(&mut self, w: usize, hashes: &[u64], now: SimTime) -> Vec<TierKind> {
        let mut found = Vec::new();
        let mut lookups = [0u64; 3];
        'blocks: for &h in hashes {
            for kind in TierKind::ALL {
                let Some(store) = self.store(&self.workers[w], kind) else {
                    continue;
                };
                lookups[kind as usize] += 1;
                if store.readable(h, now) {
                    found.push(kind);
                    continue 'blocks;
                }
            }
            break;
        }
        for kind in TierKind::ALL {
            let st = &mut self.stats[kind as usize];
            st.lookups += lookups[kind as usize];
            st.hits += found.iter().filter(|&&k| k == kind).count() as u64;
        }
        found
    }

    /// What a router learns from KV events that name the storage medium and from the shared store's
    /// index: for worker `w` at `now`, the tier holding each of `hashes` (stopping at the first block
    /// no tier holds), and for each prefix length where the tier changes and for the whole, `(k, the
    /// deepest tier among the first k, their load time on idle links)`. Reads nothing a lookup would
    /// count and books nothing: the router does not see the links' queues.
    pub fn idle_quotes(
        &self,
        w: usize,
        hashes: &[u64],
        now: SimTime,
    ) -> Vec<(usize, TierKind, SimDuration)> {
        let wt = &self.workers[w];
        let mut counts = [0usize; 3];
        let mut out = Vec::new();
        let mut deepest = TierKind::Host;
        let mut located = Vec::new();
        'blocks: for &h in hashes {
            for kind in TierKind::ALL {
                if self.store(wt, kind).is_some_and(|s| s.readable(h, now)) {
                    located.push(kind);
                    continue 'blocks;
                }
            }
            break;
        }
        for (i, &kind) in located.iter().enumerate() {
            counts[kind as usize] += 1;
            if kind as usize > deepest as usize {
                deepest = kind;
            }
            if located.get(i + 1) != Some(&kind) {
                let time = TierKind::ALL
                    .iter()
                    .filter(|k| counts[**k as usize] > 0)
                    .filter_map(|&k| {
                        let link = wt.read[k as usize].as_ref()?;
                        Some(link.idle_time(counts[k as usize] as f64 * wt.block_bytes_per_gpu))
                    })
                    .max()
                    .unwrap_or(SimDuration::ZERO);
                out.push((i + 1, deepest, time));
            }
        }
        out
    }

    /// When loading blocks held as `located` (from [`Tiers::locate`]) into worker `w` would finish, for
    /// each prefix length where the tier changes and for the whole: `(k, load time of the first k)`.
    pub fn quotes(
        &self,
        w: usize,
        located: &[TierKind],
        now: SimTime,
    ) -> Vec<(usize, SimDuration)> {
        let wt = &self.workers[w];
        let mut counts = [0usize; 3];
        let mut out = Vec::new();
        for (i, &kind) in located.iter().enumerate() {
            counts[kind as usize] += 1;
            if located.get(i + 1) != Some(&kind) {
                let end = TierKind::ALL
                    .iter()
                    .filter(|k| counts[**k as usize] > 0)
                    .map(|&k| {
                        wt.read[k as usize]
                            .as_ref()
                            .expect("a located tier has links")
                            .quote(now, counts[k as usize] as f64 * wt.block_bytes_per_gpu)
                    })
                    .max()
                    .unwrap_or(now);
                out.push((i + 1, end.since(now)));
            }
        }
        out
    }

    /// Loads the blocks `hashes` (held as `located`) into worker `w` at `now`, booking the links; returns
    /// when the last one lands. They leave the worker's own tiers; the shared copy stays.
    pub fn load(
        &mut self,
        w: usize,
        hashes: &[u64],
        located: &[TierKind],
        block_size: u32,
        now: SimTime,
    ) -> SimTime {
        let mut counts = [0u64; 3];
        for (&h, &kind) in hashes.iter().zip(located) {
            counts[kind as usize] += 1;
            let wt = &mut self.workers[w];
            match kind {
                TierKind::Host => {
                    wt.host.as_mut().map(|s| s.remove(h));
                }
                TierKind::Disk => {
                    wt.disk.as_mut().map(|s| s.remove(h));
                }
                TierKind::Shared => {
                    if let Some(s) = &mut self.shared {
                        s.touch(h);
                    }
                }
            }
        }
        let wt = &mut self.workers[w];
        let mut end = now;
        for kind in TierKind::ALL {
            let n = counts[kind as usize];
            if n == 0 {
                continue;
            }
            let per_gpu = n as f64 * wt.block_bytes_per_gpu;
            end = end.max(
                wt.read[kind as usize]
                    .as_mut()
                    .expect("a located tier has links")
                    .book(now, per_gpu),
            );
            let st = &mut self.stats[kind as usize];
            st.blocks_loaded += n;
            st.bytes_read += per_gpu * wt.gpus;
            st.tokens_loaded += n * u64::from(block_size);
        }
        end
    }

    /// Checks every worker tier's invariants.
    pub fn check(&self) -> Result<(), String> {
        for (w, wt) in self.workers.iter().enumerate() {
            for (name, s) in [("host", &wt.host), ("disk", &wt.disk)] {
                if let Some(s) = s {
                    s.check().map_err(|e| format!("worker {w} {name}: {e}"))?;
                }
            }
        }
        if let Some(s) = &self.shared {
            s.check().map_err(|e| format!("shared: {e}"))?;
        }
        Ok(())
    }

    /// Blocks held by worker `w`'s `kind` tier (the fleet's, for `shared`).
    pub fn held(&self, w: usize, kind: TierKind) -> usize {
        match kind {
            TierKind::Host => self.workers[w].host.as_ref().map_or(0, TierStore::len),
            TierKind::Disk => self.workers[w].disk.as_ref().map_or(0, TierStore::len),
            TierKind::Shared => self.shared.as_ref().map_or(0, TierStore::len),
        }
    }

    /// Whether `kind` is configured.
    pub fn configured(&self, kind: TierKind) -> bool {
        match kind {
            TierKind::Shared => self.shared.is_some(),
            _ => self
                .workers
                .first()
                .is_some_and(|w| self.store(w, kind).is_some()),
        }
    }
}

#[cfg(test)]
mod tests;
