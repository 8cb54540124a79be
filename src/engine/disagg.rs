//! Prefill/decode disaggregation: the engine's side of worker roles ([`crate::worker::role::Role`]).
//!
//! ```text
//! arrival ─► route among prefill-capable ─► prefill worker: KV of all tokens but the last
//!        ─► hand-off: route among decode-capable ─► KV over the interconnect (NVLink / RDMA)
//!        ─► decode worker: computes the last token and samples (TTFT), then decodes to the end
//! ```
//! The router picks both workers, from the same policy and the same snapshots the gateway keeps, each
//! stage seeing only the workers that can serve it: the prefill worker when the request arrives, the
//! decode worker when its prefill ends (llm-d's P/D scheduling picks a decode and a prefill endpoint
//! per request with separate scheduler profiles; Dynamo's router picks the decode worker and a prefill
//! worker for its remote prefill; here the decode pick is made at hand-off time, with the load of that
//! moment). A request whose prefill lands on a `both` worker runs there whole.
//!
//! The transfer moves the prompt's KV blocks that the decode worker does not already hold in its prefix
//! cache, over the fabric's ports of both workers ([`crate::tiers::interconnect::Fabric`]). The prefill
//! worker releases the request's blocks into its prefix cache when the prefill ends (vLLM's NIXL
//! connector holds them until the decode side has read them; here they stay readable as cache and may be
//! evicted by later work, a simplification).
//!
//! Faults: if the prefill worker fails (crash, hang, restart) before the transfer ends, or the decode
//! worker fails before it receives the request, the request is lost to that worker and the gateway's
//! `in_flight` policy applies (retry from scratch: its prefill is recomputed, cause `failure`). No request
//! is ever dropped: every hand-off ends in a delivery or in that policy.
//!
//! Invariant: a request is on at most one worker or one transfer at a time.

use super::queue::Class;
use super::{Event, Simulation, Truth};
use crate::metrics::summary::{DisaggSummary, mean_ms, round};
use crate::scenario::Scenario;
use crate::tiers::interconnect::{Endpoint, Fabric, PathKind};
use crate::worker::Sequence;
use crate::worker::role::Role;

/// The roles of a disaggregated fleet, its interconnect and what the hand-offs did.
#[derive(Debug)]
pub(super) struct Disagg {
    pub roles: Vec<Role>,
    /// Whether any worker is a dedicated prefill or decode worker (else only peer transfer uses the
    /// fabric).
    pub dedicated: bool,
    /// Whether workers pull prefixes from each other's GPU caches (`peer.rs`).
    pub peer_transfer: bool,
    pub fabric: Fabric,
    pub stats: HandoffStats,
    pub peer: super::peer::PeerStats,
}

/// Totals over a run's hand-offs.
#[derive(Debug, Default)]
pub(super) struct HandoffStats {
    pub handoffs: u64,
    pub nvlink: u64,
    pub rdma: u64,
    pub blocks: u64,
    pub bytes: f64,
    pub transfer_s: f64,
    pub max_transfer_s: f64,
    /// Hand-offs lost to a failure of either side before the decode worker received the request.
    pub lost: u64,
}

/// Which stage a routing decision is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stage {
    Prefill,
    Decode,
}

impl Simulation {
    /// Sets worker roles (indexed by worker) and the interconnect from `s`; a fleet with only `both`
    /// workers and no peer transfer stays as it was (no effect).
    pub(super) fn set_disaggregation(&mut self, s: &Scenario) {
        if !s.is_disaggregated()
            && !s.interconnect.peer_transfer
            && s.interconnect.replication.is_none()
        {
            return;
        }
        let roles = s.worker_roles();
        let mut nodes: Vec<String> = Vec::new();
        let mut endpoints = Vec::with_capacity(self.workers.len());
        let mut w = 0;
        for g in &s.workers {
            for _ in 0..s.group_slots(g) {
                let node = match &g.node {
                    Some(label) => match nodes.iter().position(|n| n == label) {
                        Some(i) => i,
                        None => {
                            nodes.push(label.clone());
                            nodes.len() - 1
                        }
                    },
                    None => {
                        // A node of its own, named so no label can take it.
                        nodes.push(format!("\u{0}worker-{w}"));
                        nodes.len() - 1
                    }
                };
                let nvlink = s
                    .interconnect
                    .nvlink_gb_per_s
                    .map_or(g.gpu.spec().link_bw, |v| v.0 * 1e9);
                endpoints.push(Endpoint {
                    node,
                    gpus: g.tp.0,
                    nvlink_bytes_per_s: nvlink,
                });
                w += 1;
            }
        }
        self.disagg = Some(Disagg {
            roles,
            dedicated: s.is_disaggregated(),
            peer_transfer: s.interconnect.peer_transfer,
            fabric: Fabric::new(&s.interconnect, endpoints),
            stats: HandoffStats::default(),
            peer: Default::default(),
        });
    }

    /// The stage a request being dispatched starts with: its prefill, unless the fleet is aggregated or
    /// it has a single token to compute (nothing to hand off).
    pub(super) fn first_stage(&self, seq: &Sequence) -> Option<Stage> {
        self.disagg.as_ref().filter(|d| d.dedicated)?;
        Some(if seq.num_tokens() >= 2 {
            Stage::Prefill
        } else {
            Stage::Decode
        })
    }

    /// Hides from the router's snapshots the workers that cannot serve `stage`.
    pub(super) fn mask_for(&mut self, stage: Stage) {
        let Some(d) = &self.disagg else { return };
        for (snap, role) in self.snapshots.iter_mut().zip(&d.roles) {
            let serves = match stage {
                Stage::Prefill => role.prefills(),
                Stage::Decode => role.decodes(),
            };
            snap.up &= serves;
        }
    }

    /// Whether requests routed to `w` are prefilled there and handed off.
    pub(super) fn is_prefill_worker(&self, w: usize) -> bool {
        self.disagg
            .as_ref()
            .is_some_and(|d| d.roles[w] == Role::Prefill)
    }

    /// Prefill worker `p` finished `seq`'s prefill: the router picks a decode worker, and the KV
    /// transfer is booked on both sides' ports.
    pub(super) fn begin_handoff(&mut self, p: usize, seq: Sequence) {
        let id = seq.request.id;
        self.router.on_first_token(self.now, id, p);
        self.router.on_finished(self.now, &seq.request, p);
        self.gateway.on_success(p);
        self.refresh_snapshots();
        self.mask_for(Stage::Decode);
        let block_size = self.workers[0].params.block_size;
        let hashes = seq.request.block_hashes(block_size);
        let prompt_blocks = ((seq.request.prompt_tokens / block_size) as usize).min(hashes.len());
        let decision = self.router.route(
            self.now,
            &seq.request,
            &hashes[..prompt_blocks],
            &self.snapshots,
        );
        let Some(decision) = decision else {
            self.lost_in_handoff(seq, p, "no decode worker up");
            return;
        };
        let d = decision.worker;
        self.settle_worker(d);
        let local = self.workers[d].pool.cached_prefix(&hashes[..prompt_blocks]);
        let outstanding = self.snapshots[d].outstanding;
        self.router.record(
            self.now,
            &seq.request,
            decision,
            &hashes[..prompt_blocks],
            local as u32,
            outstanding,
        );
        if !self.workers[d].can_ever_fit(seq.request.prompt_tokens, seq.request.output_tokens) {
            self.router.on_request_failed(self.now, id, d);
            self.finish_seq(
                seq,
                Some(d),
                super::Outcome::Rejected,
                Some("longer than the decode worker's KV capacity"),
            );
            return;
        }
        // The blocks holding the handed-off tokens, less the decode worker's cached prefix of them.
        let bs = self.workers[p].params.block_size;
        let held = seq.handed_off.div_ceil(bs) as usize;
        let cached = if self.workers[d].params.enable_prefix_caching {
            self.workers[d]
                .pool
                .cached_prefix(&seq.hashes[..seq.hashes.len().min(held)])
        } else {
            0
        };
        let blocks = held.saturating_sub(cached);
        let pw = &self.workers[p];
        let bytes = blocks as f64
            * pw.perf.kv_bytes_per_token_per_gpu()
            * f64::from(bs)
            * f64::from(pw.perf.tp);
        let now = self.now;
        let dg = self
            .disagg
            .as_mut()
            .expect("hand-offs happen in disaggregated fleets");
        let kind = dg.fabric.path(p, d);
        let Some(lands) = dg.fabric.book(p, d, bytes, now) else {
            // Validation rules this out; a run must not panic on it all the same.
            self.lost_in_handoff(seq, p, "no link between the prefill and the decode worker");
            return;
        };
        let st = &mut dg.stats;
        st.handoffs += 1;
        match kind {
            Some(PathKind::Nvlink) => st.nvlink += 1,
            _ => st.rdma += 1,
        }
        st.blocks += blocks as u64;
        st.bytes += bytes;
        let secs = lands.since(now).as_secs_f64();
        st.transfer_s += secs;
        st.max_transfer_s = st.max_transfer_s.max(secs);
        let (p_epoch, d_epoch) = (self.workers[p].epoch, self.workers[d].epoch);
        self.schedule(
            lands,
            Class::Arrival,
            Event::Handoff {
                from: p,
                from_epoch: p_epoch,
                to: d,
                to_epoch: d_epoch,
                seq: Box::new(seq),
            },
        );
    }

    /// A hand-off's KV landed on decode worker `d` at `now`.
    pub(super) fn on_handoff(
        &mut self,
        (p, p_epoch): (usize, u64),
        (d, d_epoch): (usize, u64),
        seq: Sequence,
    ) {
        self.settle_worker(d);
        if self.workers[p].epoch != p_epoch {
            // The prefill worker failed while the decode worker was reading its KV.
            self.lost_in_handoff(seq, p, "prefill worker failed during the KV transfer");
            return;
        }
        if self.workers[d].epoch != d_epoch || self.truth[d] != Truth::Up {
            self.lost_in_handoff(seq, d, "decode worker failed during the KV transfer");
            return;
        }
        let mut seq = seq;
        seq.enqueued = self.now;
        self.workers[d].enqueue(seq);
        if !self.workers[d].in_step() {
            self.start_step(d);
        }
    }

    fn lost_in_handoff(&mut self, seq: Sequence, w: usize, reason: &'static str) {
        if let Some(dg) = &mut self.disagg {
            dg.stats.lost += 1;
        }
        self.on_lost(seq, w, reason);
    }

    /// The hand-offs of a disaggregated run, for the summary.
    pub(super) fn disagg_summary(&self) -> Option<DisaggSummary> {
        let d = self.disagg.as_ref().filter(|d| d.dedicated)?;
        let st = &d.stats;
        let count = |r: Role| d.roles.iter().filter(|&&x| x == r).count() as u32;
        Some(DisaggSummary {
            prefill_workers: count(Role::Prefill),
            decode_workers: count(Role::Decode),
            both_workers: count(Role::Both),
            handoffs: st.handoffs,
            nvlink_handoffs: st.nvlink,
            rdma_handoffs: st.rdma,
            blocks_transferred: st.blocks,
            bytes_transferred: st.bytes.round() as u64,
            mean_transfer_ms: mean_ms(st.transfer_s, st.handoffs),
            max_transfer_ms: round(st.max_transfer_s * 1e3, 6),
            lost_in_handoff: st.lost,
        })
    }
}
