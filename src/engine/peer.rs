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
//! KV tiers and peers are priced against each other: when both a tier load and a peer pull beat
//! recomputing, the request takes the cheaper under [`cost_to_place`] (when its blocks land plus
//! computing the rest), the tier on a tie ([`Simulation::place_missing_prefix`]).
//!
//! Faults: if the source fails before the transfer ends, the blocks do not arrive and the request is
//! admitted to recompute them (counted in `lost`); if the destination fails, the request is lost to it
//! (the gateway's `in_flight` policy).

use super::offload::TierPlan;
use super::{Simulation, Truth};
use crate::hardware::StepShape;
use crate::metrics::summary::{PeerSummary, mean_ms};
use crate::tiers::pricing::{PrefixOffer, PrefixSource, cost_to_place};
use crate::time::{SimDuration, SimTime};
use crate::worker::Sequence;

/// A peer pull priced at dispatch, not yet booked: `k` blocks after the `local` ones `w`'s GPU caches,
/// from worker `from`'s GPU, `bytes` in all, landing `ready_in` from now.
#[derive(Debug, Clone, Copy)]
pub(super) struct PeerPlan {
    pub from: usize,
    pub local: usize,
    pub k: usize,
    pub bytes: f64,
    pub ready_in: SimDuration,
}

/// Whether pulling `peer` beats loading `tier` (both priced past the same GPU prefix): the cheaper
/// under [`cost_to_place`] (`ready_in` + computing the rest with `compute`), the tier on a tie.
pub(super) fn peer_beats_tier(
    tier: &TierPlan,
    peer: &PeerPlan,
    compute: impl Fn(usize) -> SimDuration,
) -> bool {
    debug_assert_eq!(
        tier.local, peer.local,
        "both priced past the same GPU prefix"
    );
    let offers = [
        PrefixOffer {
            source: PrefixSource::Tier(tier.located[0]),
            blocks: tier.k,
            ready_in: tier.ready_in,
        },
        PrefixOffer {
            source: PrefixSource::Peer(peer.from),
            blocks: peer.k,
            ready_in: peer.ready_in,
        },
    ];
    let plan = cost_to_place(&offers, compute);
    matches!(plan.offer.map(|o| o.source), Some(PrefixSource::Peer(_)))
}

/// Where a request's missing prefix comes from ([`Simulation::place_missing_prefix`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Placement {
    /// From the tiers, landing after this long.
    Tier(SimDuration),
    /// From worker `0`'s GPU, landing at `1`.
    Peer(usize, SimTime),
}

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
    /// Transfers booked and not landed yet, by request: counted above only when they land whole.
    pub pending: rustc_hash::FxHashMap<crate::request::RequestId, PendingPull>,
}

/// A booked peer transfer, counted in [`PeerStats`] when it lands.
#[derive(Debug, Clone, Copy)]
pub(super) struct PendingPull {
    blocks: u64,
    bytes: f64,
    tokens: u64,
    transfer_s: f64,
}

impl Simulation {
    /// If another live worker caches more of `seq`'s prompt than `w`, the pull of the difference, priced
    /// (queue on both ports included) but not booked; `None` when there is no such peer, no link, or
    /// recomputing is no dearer.
    pub(super) fn quote_peer_load(&self, w: usize, seq: &Sequence) -> Option<PeerPlan> {
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
        let offer = PrefixOffer {
            source: PrefixSource::Peer(v),
            blocks: k,
            ready_in: lands.since(now),
        };
        cost_to_place(&[offer], self.compute_after(w, seq, local)).offer?;
        Some(PeerPlan {
            from: v,
            local,
            k,
            bytes,
            ready_in: offer.ready_in,
        })
    }

    /// Books `plan` (from [`Simulation::quote_peer_load`] for the same `w` and `seq`, at this instant),
    /// marks the blocks for loading, and returns the source and when the blocks land.
    pub(super) fn book_peer_load(
        &mut self,
        w: usize,
        seq: &mut Sequence,
        plan: PeerPlan,
    ) -> Option<(usize, SimTime)> {
        let PeerPlan {
            from: v,
            local,
            k,
            bytes,
            ..
        } = plan;
        let bs = self.workers[w].params.block_size;
        let now = self.now;
        self.settle_worker(v);
        let d = self.disagg.as_mut()?;
        let lands = d.fabric.book(v, w, bytes, now)?;
        let pull = PendingPull {
            blocks: k as u64,
            bytes,
            tokens: k as u64 * u64::from(bs),
            transfer_s: lands.since(now).as_secs_f64(),
        };
        d.peer.pending.insert(seq.request.id, pull);
        seq.load_blocks = (local + k) as u32;
        Some((v, lands))
    }

    /// `w`'s time to compute `seq`'s prompt past its first `local` blocks and `k` more that arrive
    /// (its step model, its slowdown): the `compute` of [`cost_to_place`].
    pub(super) fn compute_after<'a>(
        &'a self,
        w: usize,
        seq: &Sequence,
        local: usize,
    ) -> impl Fn(usize) -> SimDuration + 'a {
        let worker = &self.workers[w];
        let bs = worker.params.block_size;
        let num_tokens = seq.num_tokens();
        move |blocks: usize| {
            let start = (local + blocks) as u32 * bs;
            let mut shape = StepShape::default();
            shape.add(u64::from(num_tokens - start), u64::from(start));
            let dt = worker.perf.step_time(&shape);
            SimDuration::from_secs_f64(dt.as_secs_f64() * worker.slowdown)
        }
    }

    /// Where `seq`'s blocks past `w`'s GPU-cached prefix come from, booked: a tier load or a peer pull,
    /// whichever beats recomputing them; when both do, the cheaper under [`cost_to_place`] (when its
    /// blocks land plus computing the rest), the tier on a tie. `None`: recompute.
    pub(super) fn place_missing_prefix(
        &mut self,
        w: usize,
        seq: &mut Sequence,
    ) -> Option<Placement> {
        let tier = self.quote_tier_load(w, seq);
        let peer = self.quote_peer_load(w, seq);
        let peer_wins = match (&tier, &peer) {
            (Some(t), Some(p)) => peer_beats_tier(t, p, self.compute_after(w, seq, t.local)),
            (None, Some(_)) => true,
            _ => false,
        };
        if peer_wins {
            let (from, lands) = self.book_peer_load(w, seq, peer?)?;
            return Some(Placement::Peer(from, lands));
        }
        Some(Placement::Tier(self.book_tier_load(w, seq, tier?)))
    }

    /// A peer transfer for `seq` landed on `w` (or its source `v` failed first: the request recomputes).
    pub(super) fn on_peer_deliver(
        &mut self,
        (v, v_epoch): (usize, u64),
        (w, w_epoch): (usize, u64),
        mut seq: Sequence,
    ) {
        self.settle_worker(w);
        let pull = (self.disagg.as_mut()).and_then(|d| d.peer.pending.remove(&seq.request.id));
        if self.workers[w].epoch != w_epoch || self.truth[w] != Truth::Up {
            self.on_lost(seq, w, "worker failed");
            return;
        }
        if self.workers[v].epoch != v_epoch {
            // The source died mid-transfer: nothing arrived, so nothing was avoided, and what the
            // request now recomputes was lost with the source (or is held by another live worker).
            seq.load_blocks = 0;
            if let Some(d) = &mut self.disagg {
                d.peer.lost += 1;
            }
            let local = self.workers[w].pool.cached_prefix(&seq.hashes);
            self.note_prefix_elsewhere(w, &mut seq, local, None);
        } else if let (Some(p), Some(d)) = (pull, &mut self.disagg) {
            let st = &mut d.peer;
            st.transfers += 1;
            st.blocks += p.blocks;
            st.bytes += p.bytes;
            st.tokens += p.tokens;
            st.transfer_s += p.transfer_s;
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
            mean_transfer_ms: mean_ms(st.transfer_s, st.transfers),
            lost_to_source_failure: st.lost,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tiers::TierKind;
    use crate::tiers::pricing::tests::{compute, ms};

    fn tier(k: usize, ready_ms: u64) -> TierPlan {
        TierPlan {
            local: 2,
            k,
            located: vec![TierKind::Host; k],
            ready_in: ms(ready_ms),
        }
    }

    fn peer(k: usize, ready_ms: u64) -> PeerPlan {
        PeerPlan {
            from: 3,
            local: 2,
            k,
            bytes: 0.0,
            ready_in: ms(ready_ms),
        }
    }

    #[test]
    fn the_cheaper_of_a_tier_load_and_a_peer_pull_wins() {
        // Host holds 3 blocks, ready in 5 ms: 5 + 10 × 5 = 55 ms. A peer holds all 8, ready in 30 ms:
        // 30 + 0 = 30 ms. The peer.
        assert!(peer_beats_tier(&tier(3, 5), &peer(8, 30), compute));
        // The same peer queued behind other transfers, ready in 60 ms: 60 > 55. The tier.
        assert!(!peer_beats_tier(&tier(3, 5), &peer(8, 60), compute));
        // A peer with fewer blocks than the tier: host 6 blocks in 20 ms = 20 + 20 = 40 ms against a
        // peer's 4 blocks in 1 ms = 1 + 40 = 41 ms. The tier, by 1 ms.
        assert!(!peer_beats_tier(&tier(6, 20), &peer(4, 1), compute));
        // Equal costs (55 ms each): the tier, as before peers were priced against it.
        assert!(!peer_beats_tier(&tier(3, 5), &peer(8, 55), compute));
    }
}
