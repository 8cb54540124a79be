//! The engine's side of the KV tiers ([`crate::tiers`]): building them, writing GPU evictions and
//! finished turns down, pricing loads at dispatch, and their summary.

use super::Simulation;
use crate::gateway::SessionState;
use crate::hardware::StepShape;
use crate::metrics::summary::TierSummary;
use crate::metrics::summary::round;
use crate::tiers::{BlockLayout, TierKind, Tiers, TiersSpec, pricing::cheapest_load};
use crate::time::SimDuration;
use crate::worker::Sequence;

/// A tier load priced at dispatch, not yet booked: the `k` blocks after the `local` ones the GPU
/// caches, from the tiers `located` names for them, landing `ready_in` from now.
#[derive(Debug)]
pub(super) struct TierPlan {
    pub local: usize,
    pub k: usize,
    pub located: Vec<TierKind>,
    pub ready_in: SimDuration,
}

impl Simulation {
    /// Sets the `[tiers]` section (none by default) and builds the tiers.
    pub fn set_tiers(&mut self, spec: TiersSpec) {
        self.tiers_spec = spec;
        self.build_tiers();
    }

    /// Builds the tiers from `[tiers]` and the gateway's session store; `None` when neither asks for any.
    pub(super) fn build_tiers(&mut self) {
        let session = self.gateway.spec.session_state == SessionState::SharedTier;
        if !self.tiers_spec.any() && !session {
            self.tiers = None;
            return;
        }
        let layouts: Vec<BlockLayout> = self
            .workers
            .iter()
            .map(|w| BlockLayout {
                bytes_per_gpu: w.perf.kv_bytes_per_token_per_gpu() * f64::from(w.params.block_size),
                gpus: w.perf.tp,
            })
            .collect();
        let gpus = layouts.first().map_or(1, |l| l.gpus);
        let session_store = session.then(|| self.gateway.spec.shared_tier.as_tier(gpus));
        self.tiers = Some(Tiers::new(
            &self.tiers_spec,
            session_store.as_ref(),
            &layouts,
        ));
        if self.tiers_spec.any() {
            for w in &mut self.workers {
                w.pool.record_evictions();
            }
        }
    }

    /// Writes the blocks worker `w`'s GPU evicted since the last call down to its first tier.
    pub(super) fn write_down(&mut self, w: usize) {
        let Some(tiers) = &mut self.tiers else {
            return;
        };
        let evicted = self.workers[w].pool.drain_evicted();
        if !evicted.is_empty() {
            tiers.write_down(w, &evicted, self.now);
        }
    }

    /// A finished turn's KV (prompt and answer, every full block computed) goes to the shared store
    /// (`session_state = "shared_tier"`).
    pub(super) fn write_turn(&mut self, w: usize, seq: &Sequence) {
        let Some(tiers) = &mut self.tiers else {
            return;
        };
        let bs = self.workers[w].params.block_size;
        let computed = seq.request.prompt_tokens + seq.request.output_tokens - 1;
        let full = ((computed / bs) as usize).min(seq.hashes.len());
        tiers.write_turn(w, &seq.hashes[..full], self.now);
    }

    /// The cheapest tier load for `seq` on `w` (the blocks after its GPU-cached prefix, when loading
    /// some of them plus computing the rest beats computing it all), priced but not booked; counts the
    /// tiers' lookups.
    pub(super) fn quote_tier_load(&mut self, w: usize, seq: &Sequence) -> Option<TierPlan> {
        let tiers = self.tiers.as_mut()?;
        let worker = &self.workers[w];
        let bs = worker.params.block_size;
        let num_tokens = seq.num_tokens();
        let max_hit = (((num_tokens - 1) / bs) as usize).min(seq.hashes.len());
        let local = worker.pool.cached_prefix(&seq.hashes[..max_hit]);
        let located = tiers.locate(w, &seq.hashes[local..max_hit], self.now);
        if located.is_empty() {
            return None;
        }
        let quotes = tiers.quotes(w, &located, self.now);
        let compute = |k: usize| {
            let start = (local + k) as u32 * bs;
            let mut shape = StepShape::default();
            shape.add(u64::from(num_tokens - start), u64::from(start));
            let dt = worker.perf.step_time(&shape);
            SimDuration::from_secs_f64(dt.as_secs_f64() * worker.slowdown)
        };
        let k = cheapest_load(&quotes, compute);
        if k == 0 {
            return None;
        }
        let ready_in = quotes.iter().find(|q| q.0 == k).map(|q| q.1)?;
        Some(TierPlan {
            local,
            k,
            located,
            ready_in,
        })
    }

    /// Books `plan` (from [`Simulation::quote_tier_load`] for the same `w` and `seq`, at this instant),
    /// marks the blocks for loading, and returns how long until they land.
    pub(super) fn book_tier_load(
        &mut self,
        w: usize,
        seq: &mut Sequence,
        plan: TierPlan,
    ) -> SimDuration {
        let bs = self.workers[w].params.block_size;
        let TierPlan {
            local, k, located, ..
        } = plan;
        let tiers = self.tiers.as_mut().expect("a tier plan implies tiers");
        let lands = tiers.load(
            w,
            &seq.hashes[local..local + k],
            &located[..k],
            bs,
            self.now,
        );
        seq.load_blocks = (local + k) as u32;
        lands.since(self.now)
    }

    /// What each configured tier did, for the summary.
    pub(super) fn tier_summary(&self) -> Option<Vec<TierSummary>> {
        let tiers = self.tiers.as_ref()?;
        Some(
            TierKind::ALL
                .into_iter()
                .filter(|&k| tiers.configured(k))
                .map(|k| {
                    let s = &tiers.stats[k as usize];
                    TierSummary {
                        tier: k.as_str().to_string(),
                        capacity_blocks: tiers
                            .capacity_blocks(k)
                            .filter(|&c| c < crate::tiers::UNBOUNDED_BLOCKS)
                            .map(|c| c as u64),
                        lookups: s.lookups,
                        hits: s.hits,
                        hit_rate: if s.lookups > 0 {
                            round(s.hits as f64 / s.lookups as f64, 6)
                        } else {
                            0.0
                        },
                        blocks_loaded: s.blocks_loaded,
                        blocks_written: s.blocks_written,
                        blocks_evicted: s.blocks_evicted,
                        bytes_read: s.bytes_read.round() as u64,
                        bytes_written: s.bytes_written.round() as u64,
                        recompute_avoided_tokens: s.tokens_loaded,
                    }
                })
                .collect(),
        )
    }

    /// Checks the tiers' invariants (a block at most once per tier, capacities kept).
    pub(super) fn check_tiers(&self) -> Result<(), String> {
        self.tiers.as_ref().map_or(Ok(()), Tiers::check)
    }
}
