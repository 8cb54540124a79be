//! One attempt to place a request on a worker, in the order a gateway takes it:
//!
//! 1. **gateway decision**: with session state on the worker, the conversation's home is forced
//!    ([`Simulation::session_home`]);
//! 2. **candidates**: the workers that may serve the request's model, adapter and P/D stage
//!    ([`Simulation::narrow_candidates`]), and a request too long for any of them turned away;
//! 3. **block identity**: the prompt's block hashes, continuing the conversation's last turn
//!    ([`Simulation::prompt_hashes`]);
//! 4. **routing**: the router's choice, or the forced home ([`Simulation::choose_worker`]), and its
//!    record ([`Simulation::record_route`]);
//! 5. **reaching the worker**: what the chosen worker really is: up, refusing, unreachable or hung
//!    ([`Simulation::reach`]);
//! 6. **admission**: the prefix the worker lacks found in a tier or on a peer, or the request queued
//!    at once ([`Simulation::admit`]).
//!
//! Each step either hands the request on or settles it (rejected, held at the gateway, in flight to a
//! failed worker, or waiting for its KV to arrive); none drops it.

use super::{Simulation, Truth, disagg, looks_elsewhere, peer};
use crate::faults::Symptom;
use crate::gateway::SessionState;
use crate::metrics::record::Outcome;
use crate::routing::{Decision, PrefixSources};
use crate::worker::Sequence;

use super::profile::Phase;
use super::queue::Class;
use super::{Event, route_sources};

/// A prompt's block identity at the router's block size.
struct PromptHashes {
    /// Every block's hash, the prompt's full blocks first.
    hashes: Vec<u64>,
    /// How many of `hashes` are the prompt's full blocks (what routing and caching compare).
    prompt_blocks: usize,
    /// The router's block size (the first worker's; uniform when the router compares caches).
    block_size: u32,
    /// The conversation's blocks computed in earlier turns, when this turn continues them.
    history_blocks: Option<u32>,
}

impl Simulation {
    /// One attempt to place a request on a worker: session state, routing, and what the chosen worker
    /// really is (up, dead, hung).
    pub(super) fn dispatch(&mut self, mut seq: Sequence) {
        let t = self.prof.start();
        let first_routing = !std::mem::replace(&mut seq.routed, true);
        let forced = self.session_home(&mut seq);
        let (candidates, stage) = self.narrow_candidates(seq);
        self.prof.stop(Phase::Routing, t);
        let Some(seq) = candidates else { return };
        let t = self.prof.start();
        // A request no worker could ever hold is turned away before its blocks are hashed: that costs
        // time and memory in proportion to its length, which is unbounded in a trace.
        let Some(mut seq) = self.reject_if_too_long(seq, None) else {
            return;
        };
        let prompt = self.prompt_hashes(&mut seq);
        let prompt_blocks = prompt.prompt_blocks;
        self.prof.stop(Phase::KvBookkeeping, t);
        let t = self.prof.start();
        let Some(decision) = self.choose_worker(forced, &seq, &prompt.hashes[..prompt_blocks])
        else {
            seq.hashes = prompt.hashes;
            if let Some(seq) = self.hold_at_gateway(seq) {
                self.gateway_error(seq, None, "no worker up");
            }
            return;
        };
        if self.replication.is_some() {
            self.replicate_hot(&prompt.hashes[..prompt_blocks]);
        }
        let w = decision.worker;
        self.note_model_routed(w);
        seq.prefill_only = stage == Some(disagg::Stage::Prefill) && self.is_prefill_worker(w);
        self.prof.stop(Phase::Routing, t);
        // Settled before its cache is read: a run across blocks changes the cache as it goes.
        let t = self.prof.start();
        self.settle_worker(w);
        self.prof.stop(Phase::WorkerSteps, t);
        let t = self.prof.start();
        self.take_turn_history(w, &mut seq, prompt.history_blocks);
        let local_prefix = forced
            .is_none()
            .then(|| self.record_route(decision, &mut seq, &prompt.hashes[..prompt_blocks]));
        if self.track_sessions {
            self.gateway
                .on_routed(&seq.request, w, self.workers[w].epoch, self.now);
        }
        self.prof.stop(Phase::Routing, t);
        let Some(seq) = self.reject_if_too_long(seq, Some(w)) else {
            return;
        };
        let Some((seq, hashes)) = self.reach(w, seq, prompt.hashes) else {
            return;
        };
        self.admit(
            w,
            seq,
            hashes,
            prompt.block_size,
            local_prefix,
            first_routing,
        );
    }

    /// Brings the router's snapshots up to date and masks the workers that cannot serve the request:
    /// the wrong P/D stage, a model they may not serve, an adapter that cannot join. `None` when the
    /// request was settled here (turned away, or waiting for a model or an adapter); with the request's
    /// first P/D stage.
    fn narrow_candidates(&mut self, seq: Sequence) -> (Option<Sequence>, Option<disagg::Stage>) {
        self.refresh_snapshots();
        let stage = self.first_stage(&seq);
        if let Some(stage) = stage {
            self.mask_for(stage);
        }
        let seq = self.place_by_model(seq).and_then(|seq| {
            if self.lora.is_some() || seq.request.adapter.is_some() {
                self.place_by_adapter(seq)
            } else {
                Some(seq)
            }
        });
        (seq, stage)
    }

    /// Turns the request away when it can never fit in KV memory: on worker `w` once chosen (the
    /// router hears of the failure), or on every worker before routing. Otherwise hands it back.
    fn reject_if_too_long(&mut self, seq: Sequence, w: Option<usize>) -> Option<Sequence> {
        let (prompt, output) = (seq.request.prompt_tokens, seq.request.output_tokens);
        let fits = match w {
            Some(w) => self.workers[w].can_ever_fit(prompt, output),
            None => self.workers.iter().any(|x| x.can_ever_fit(prompt, output)),
        };
        if fits {
            return Some(seq);
        }
        let reason = match w {
            Some(w) => {
                self.router.on_request_failed(self.now, seq.request.id, w);
                "longer than the worker's KV capacity"
            }
            None => "longer than every worker's KV capacity",
        };
        self.finish_seq(seq, w, Outcome::Rejected, Some(reason));
        None
    }

    /// With session state kept on the worker, the worker that holds the conversation (its home), when
    /// it is still up; the request loses the turns a lost home held (`session_reset`).
    fn session_home(&mut self, seq: &mut Sequence) -> Option<usize> {
        if self.gateway.spec.session_state != SessionState::Worker {
            return None;
        }
        let workers = &self.workers;
        let truth = &self.truth;
        let had = seq.request.segments.len();
        let (home, reset) = self.gateway.session_home(
            &mut seq.request,
            &mut seq.dropped_segments,
            |w| workers[w].epoch,
            |w| truth[w] == Truth::Up,
        );
        if seq.request.segments.len() != had {
            seq.hashes.clear(); // the prompt changed: derive its blocks again
        }
        seq.session_reset |= reset;
        home
    }

    /// The prompt's block hashes at the router's block size. A conversation's next turn continues its
    /// last turn's hashes (and learns how many of that history's blocks were computed).
    fn prompt_hashes(&mut self, seq: &mut Sequence) -> PromptHashes {
        let block_size = self.workers[0].params.block_size;
        let mut history_blocks = None;
        let hashes = (seq.request.session)
            .and_then(|s| self.turn_blocks.get_mut(&s.id))
            .filter(|left| left.block_size == block_size)
            .and_then(|left| {
                let known = std::mem::take(&mut left.hashes);
                let computed = left.computed_blocks(known.len());
                let hashes = seq
                    .request
                    .block_hashes_after(block_size, &left.segments, known)?;
                history_blocks = Some(computed);
                Some(hashes)
            })
            .unwrap_or_else(|| seq.request.block_hashes(block_size));
        let prompt_blocks = ((seq.request.prompt_tokens / block_size) as usize).min(hashes.len());
        PromptHashes {
            hashes,
            prompt_blocks,
            block_size,
            history_blocks,
        }
    }

    /// The worker for the request: the conversation's home when one is forced, else the router's
    /// choice over the current snapshots (offered the tiers and peers as prefix sources when it asks).
    /// `None` when no worker is up.
    fn choose_worker(
        &mut self,
        forced: Option<usize>,
        seq: &Sequence,
        prompt_hashes: &[u64],
    ) -> Option<Decision> {
        if let Some(w) = forced {
            return Some(Decision {
                worker: w,
                reason: "the conversation lives on this worker",
            });
        }
        let sources = route_sources::RouteSources {
            tiers: self.tiers.as_ref(),
            fabric: self
                .disagg
                .as_ref()
                .filter(|d| d.peer_transfer)
                .map(|d| &d.fabric),
            workers: &self.workers,
            now: self.now,
        };
        let offered = self.router.wants_prefix_sources()
            && (sources.tiers.is_some() || sources.fabric.is_some());
        self.router.route_with(
            self.now,
            &seq.request,
            prompt_hashes,
            &self.snapshots,
            offered.then_some(&sources as &dyn PrefixSources),
        )
    }

    /// What `w` is known to hold of the conversation: the blocks its last turn left there (a hint for
    /// the cache lookup, valid while `w` has not restarted), the history's holders, and how much of the
    /// history is still on `w`.
    fn take_turn_history(&mut self, w: usize, seq: &mut Sequence, history_blocks: Option<u32>) {
        seq.cached_hint.clear();
        if let Some(s) = seq.request.session
            && let Some(left) = self.turn_blocks.remove(&s.id)
        {
            if let Some(n) = history_blocks {
                seq.history_blocks = n;
                seq.history_holders = left.holders;
            }
            if left.worker == w && left.epoch == self.workers[w].epoch {
                seq.cached_hint = left.blocks;
            }
        }
        let wipes = self.workers[w].wipes;
        seq.held_here_blocks = (seq.history_holders.iter())
            .filter(|h| h.worker == w && h.wipes == wipes)
            .map(|h| h.blocks)
            .max()
            .unwrap_or(0)
            .min(seq.history_blocks);
    }

    /// Tells the router what it chose and how much of the prompt the chosen worker holds (found once:
    /// admission reuses it). Returns that prefix, in blocks.
    fn record_route(
        &mut self,
        decision: Decision,
        seq: &mut Sequence,
        prompt_hashes: &[u64],
    ) -> usize {
        let w = decision.worker;
        let local = self.workers[w]
            .pool
            .cached_prefix_blocks_hinted(prompt_hashes, &mut seq.cached_hint);
        let outstanding = self.snapshots[w].outstanding;
        self.router.record(
            self.now,
            &seq.request,
            decision,
            prompt_hashes,
            local as u32,
            outstanding,
        );
        local
    }

    /// What the chosen worker really is. Up: the request and its hashes come back for admission. Down:
    /// the connection fails after the gateway's delay for the symptom. Hung: the request sits in the
    /// worker's queue until the gateway's request timeout.
    fn reach(
        &mut self,
        w: usize,
        mut seq: Sequence,
        hashes: Vec<u64>,
    ) -> Option<(Sequence, Vec<u64>)> {
        match self.truth[w] {
            Truth::Up => Some((seq, hashes)),
            Truth::Down(symptom) => {
                let delay = match symptom {
                    Symptom::Refused => self.gateway.spec.connect_error_delay,
                    Symptom::Unreachable => self.gateway.spec.connect_timeout,
                };
                seq.hashes = hashes;
                self.schedule(
                    self.now + delay,
                    Class::Gateway,
                    Event::ConnectFailed {
                        worker: w,
                        seq: Box::new(seq),
                    },
                );
                None
            }
            Truth::Hung => {
                let id = seq.request.id;
                seq.hashes = hashes;
                self.workers[w].enqueue(seq);
                let epoch = self.workers[w].epoch;
                self.schedule(
                    self.now + self.gateway.spec.request_timeout,
                    Class::Gateway,
                    Event::Timeout {
                        worker: w,
                        epoch,
                        request: id,
                    },
                );
                None
            }
        }
    }

    /// Admission on an up worker: with prefix caching, the prefix it lacks may come from a tier or a
    /// peer first (the request then arrives when that KV lands); otherwise it joins the queue now.
    fn admit(
        &mut self,
        w: usize,
        mut seq: Sequence,
        hashes: Vec<u64>,
        block_size: u32,
        local_prefix: Option<usize>,
        first_routing: bool,
    ) {
        seq.enqueued = self.now;
        let mut t = self.prof.start();
        if self.workers[w].params.enable_prefix_caching {
            let (local, prompt_blocks) =
                self.find_local_prefix(w, &mut seq, hashes, block_size, local_prefix);
            // Until a request is first routed, its own text is cached nowhere.
            let nowhere_from = (seq.request)
                .first_private_block(self.workers[w].params.block_size)
                .filter(|_| first_routing);
            if looks_elsewhere(&seq.hashes[..prompt_blocks], local, nowhere_from) {
                // Other workers' pure steps, applied now: worker steps, not bookkeeping.
                self.prof.stop(Phase::KvBookkeeping, t);
                let c = self.prof.start();
                self.catch_up_others(w);
                self.prof.stop(Phase::WorkerSteps, c);
                t = self.prof.start();
            }
            self.note_prefix_elsewhere(w, &mut seq, local, nowhere_from);
            if let Some(placement) = self.place_missing_prefix(w, &mut seq) {
                self.prof.stop(Phase::KvBookkeeping, t);
                self.deliver_when_loaded(w, seq, placement);
                return;
            }
        }
        self.prof.stop(Phase::KvBookkeeping, t);
        self.workers[w].enqueue(seq);
        if !self.workers[w].in_step() {
            self.start_step(w);
        }
    }

    /// Sets the request's hashes at `w`'s block size; returns how many of its prompt blocks `w` holds
    /// (the router's lookup reused when the block sizes agree; a hint found at another block size fails
    /// its check at the first block) and how many of those hashes are the prompt's full blocks.
    fn find_local_prefix(
        &mut self,
        w: usize,
        seq: &mut Sequence,
        hashes: Vec<u64>,
        block_size: u32,
        local_prefix: Option<usize>,
    ) -> (usize, usize) {
        let worker_block_size = self.workers[w].params.block_size;
        seq.hashes = if worker_block_size == block_size {
            hashes
        } else {
            seq.request.block_hashes(worker_block_size)
        };
        let prompt_blocks =
            ((seq.request.prompt_tokens / worker_block_size) as usize).min(seq.hashes.len());
        let local = match local_prefix {
            Some(l) if worker_block_size == block_size => l,
            _ => self.workers[w]
                .pool
                .cached_prefix_blocks_hinted(&seq.hashes[..prompt_blocks], &mut seq.cached_hint),
        };
        (local, prompt_blocks)
    }

    /// Schedules the request's arrival at `w` when the prefix it lacks has loaded: from a tier after its
    /// transfer delay, or from a peer when the transfer lands.
    fn deliver_when_loaded(&mut self, w: usize, seq: Sequence, placement: peer::Placement) {
        match placement {
            peer::Placement::Tier(delay) => {
                let epoch = self.workers[w].epoch;
                self.schedule(
                    self.now + delay,
                    Class::Arrival,
                    Event::Deliver {
                        worker: w,
                        epoch,
                        seq: Box::new(seq),
                    },
                );
            }
            peer::Placement::Peer(from, lands) => {
                let (from_epoch, to_epoch) = (self.workers[from].epoch, self.workers[w].epoch);
                self.schedule(
                    lands,
                    Class::Arrival,
                    Event::PeerDeliver {
                        from,
                        from_epoch,
                        to: w,
                        to_epoch,
                        seq: Box::new(seq),
                    },
                );
            }
        }
    }
}
