//! Peer transfer: a worker pulls a prompt's prefix from another worker's GPU cache over the
//! interconnect (`[interconnect] peer_transfer = true`), as NIXL-based KV sharing between vLLM or
//! SGLang instances does, instead of recomputing it.
//!
//! At dispatch, after the worker is chosen: if another live worker caches more of the prompt's leading
//! blocks than the chosen one, pulling the difference costs the transfer over both workers' ports
//! (queue included, [`crate::tiers::interconnect::Fabric::quote`]); it is booked when that plus
//! computing the rest beats recomputing past the chosen worker's own prefix under its step model
//! ([`crate::tiers::pricing::cost_to_place`]). The request waits for the blocks, then is admitted with
//! them registered (like a tier load). The source keeps its copy.
//!
//! KV tiers come first: a request that loads from a tier is not offered a peer's blocks (the two are not
//! priced against each other yet).
//!
//! Faults: if the source fails before the transfer ends, the blocks do not arrive and the request is
//! admitted to recompute them (counted in `lost`); if the destination fails, the request is lost to it
//! (the gateway's `in_flight` policy).

use super::{Simulation, Truth};
use crate::hardware::StepShape;
use crate::metrics::summary::{PeerSummary, round};
use crate::tiers::pricing::{PrefixOffer, PrefixSource, cost_to_place};
use crate::time::{SimDuration, SimTime};
use crate::worker::Sequence;

/// Totals over a run's peer transfers.
#[derive(Debug, Default)]
pub(super) struct PeerStats {
    pub transfers: u64,
    pub blocks: u64,
    pub bytes: f64,
    pub tokens: u64,
    pub transfer_s: f64,
    /// Transfers whose source failed before they landed.
    pub lost: u64,
}

impl Simulation {
    /// If another live worker caches more of `seq`'s prompt than `w` and pulling the difference beats
    /// recomputing it, books the transfer, marks the blocks for loading and returns the source and when
    /// the blocks land (the caller sends `seq` with `Event::PeerDeliver`).
    pub(super) fn plan_peer_load(
        &mut self,
        w: usize,
        seq: &mut Sequence,
    ) -> Option<(usize, SimTime)> {
        if !self.disagg.as_ref().is_some_and(|d| d.peer_transfer) {
            return None;
        }
        let worker = &self.workers[w];
        let bs = worker.params.block_size;
        let max_hit = (((seq.num_tokens() - 1) / bs) as usize).min(seq.hashes.len());
        let hashes = &seq.hashes[..max_hit];
        let local = worker.pool.cached_prefix(hashes);
        let &next = hashes.get(local)?;
        // The live peer with the longest prefix beyond `local` (the lowest id on a tie).
        let (v, len) = self
            .workers
            .iter()
            .filter(|v| v.id != w && v.params.block_size == bs && self.truth[v.id] == Truth::Up)
            .filter(|v| v.pool.lookup(next).is_some())
            .map(|v| (v.id, v.pool.cached_prefix(hashes)))
            .fold(None, |best: Option<(usize, usize)>, c| match best {
                Some(b) if b.1 >= c.1 => Some(b),
                _ => Some(c),
            })?;
        let k = len - local;
        let bytes = k as f64
            * worker.perf.kv_bytes_per_token_per_gpu()
            * f64::from(bs)
            * f64::from(worker.perf.tp);
        let now = self.now;
        let fabric = &self.disagg.as_ref()?.fabric;
        let lands = fabric.quote(v, w, bytes, now)?;
        let num_tokens = seq.num_tokens();
        let compute = |blocks: usize| {
            let start = (local + blocks) as u32 * bs;
            let mut shape = StepShape::default();
            shape.add(u64::from(num_tokens - start), u64::from(start));
            let dt = worker.perf.step_time(&shape);
            SimDuration::from_secs_f64(dt.as_secs_f64() * worker.slowdown)
        };
        let offer = PrefixOffer {
            source: PrefixSource::Peer(v),
            blocks: k,
            ready_in: lands.since(now),
        };
        cost_to_place(&[offer], compute).offer?;
        self.settle_worker(v);
        let d = self.disagg.as_mut()?;
        let lands = d.fabric.book(v, w, bytes, now)?;
        let st = &mut d.peer;
        st.transfers += 1;
        st.blocks += k as u64;
        st.bytes += bytes;
        st.tokens += k as u64 * u64::from(bs);
        st.transfer_s += lands.since(now).as_secs_f64();
        seq.load_blocks = (local + k) as u32;
        Some((v, lands))
    }

    /// A peer transfer for `seq` landed on `w` (or its source `v` failed first: the request recomputes).
    pub(super) fn on_peer_deliver(
        &mut self,
        (v, v_epoch): (usize, u64),
        (w, w_epoch): (usize, u64),
        mut seq: Sequence,
    ) {
        self.settle_worker(w);
        if self.workers[w].epoch != w_epoch || self.truth[w] != Truth::Up {
            self.on_lost(seq, w, "worker failed");
            return;
        }
        if self.workers[v].epoch != v_epoch {
            seq.load_blocks = 0;
            if let Some(d) = &mut self.disagg {
                d.peer.lost += 1;
            }
        }
        self.workers[w].enqueue(seq);
        if !self.workers[w].in_step() {
            self.start_step(w);
        }
    }

    /// The peer transfers of a run, for the summary.
    pub(super) fn peer_summary(&self) -> Option<PeerSummary> {
        let d = self.disagg.as_ref().filter(|d| d.peer_transfer)?;
        let st = &d.peer;
        Some(PeerSummary {
            transfers: st.transfers,
            blocks_transferred: st.blocks,
            bytes_transferred: st.bytes.round() as u64,
            recompute_avoided_tokens: st.tokens,
            mean_transfer_ms: if st.transfers > 0 {
                round(st.transfer_s / st.transfers as f64 * 1e3, 6)
            } else {
                0.0
            },
            lost_to_source_failure: st.lost,
        })
    }
}
