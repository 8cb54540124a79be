//! What the engine tells a router that prices moving KV ([`crate::routing::PrefixSources`]): the
//! contents of every worker's lower tiers and of the shared store (as KV events naming the storage
//! medium and the store's lookup index would), and the configured speed of the tier links and of the
//! interconnect between workers. Nothing here books a link or counts a lookup, so routing with it
//! leaves the simulated fleet untouched; link queues are not shown (a router does not see them).

use crate::routing::PrefixSources;
use crate::tiers::Tiers;
use crate::tiers::interconnect::Fabric;
use crate::tiers::pricing::{PrefixOffer, PrefixSource};
use crate::time::{SimDuration, SimTime};
use crate::worker::Worker;

/// A read-only picture of the tiers and the fabric at one instant.
#[derive(Debug)]
pub(super) struct RouteSources<'a> {
    pub tiers: Option<&'a Tiers>,
    /// The interconnect, when peer transfer is on.
    pub fabric: Option<&'a Fabric>,
    pub workers: &'a [Worker],
    pub now: SimTime,
}

impl PrefixSources for RouteSources<'_> {
    fn tier_offers(&self, w: usize, hashes: &[u64]) -> Vec<PrefixOffer> {
        let Some(t) = self.tiers else {
            return Vec::new();
        };
        t.idle_quotes(w, hashes, self.now)
            .into_iter()
            .map(|(blocks, kind, ready_in)| PrefixOffer {
                source: PrefixSource::Tier(kind),
                blocks,
                ready_in,
            })
            .collect()
    }

    fn peer_time(&self, from: usize, to: usize, blocks: usize) -> Option<SimDuration> {
        let fabric = self.fabric?;
        let dest = self.workers.get(to)?;
        // The same bytes the engine's own peer pull moves (`peer.rs`): every GPU's shard of the blocks.
        let bytes = blocks as f64
            * dest.perf.kv_bytes_per_token_per_gpu()
            * f64::from(dest.params.block_size)
            * f64::from(dest.perf.tp);
        fabric.idle_time(from, to, bytes)
    }
}
