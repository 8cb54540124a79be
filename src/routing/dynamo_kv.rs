//! `dynamo_kv`: NVIDIA Dynamo's KV router (aggregated serving, its default selector).
//!
//! Reproduces the selector of `ai-dynamo/dynamo` `lib/kv-router` as read on its main branch in November
//! 2026 (`scheduling/selector/default.rs` at commit 07a6c9ce, `scheduling/config.rs` at 0243c51b). Earlier
//! releases computed the same cost with one `overlap_score_weight` on the prefill blocks, which upstream
//! still accepts as an alias setting `prefill_load_scale` (credit 1):
//!
//! ```text
//! cost(w) = prefill_load_scale · max(0, (active prefill tokens(w) + prompt tokens) / block_size
//!                                      − overlap_score_credit · overlap blocks(w))
//!         + active blocks(w) + new blocks(w)
//! ```
//!
//! - *overlap blocks*: leading prompt blocks the router's indexer (fed by the workers' KV events)
//!   believes `w` holds;
//! - *active blocks*: distinct prompt blocks of the requests the router has sent to `w` and not yet seen
//!   finish, queued or running (output blocks are not tracked by default); *new blocks*: this prompt's
//!   blocks not already among them, so a prefix shared with requests in flight counts once;
//! - *active prefill tokens*: uncached prompt tokens of the requests routed to `w` whose first token
//!   has not come back.
//!
//! Both load terms are the router's own [`ActiveSequences`] ledger, not engine metrics: a request routed
//! a moment ago already loads its worker, so a burst of arrivals spreads instead of herding onto the
//! worker whose last scraped load was lowest. The lowest cost wins, ties drawn at random; with
//! `temperature > 0` the worker is sampled with probability ∝ `exp(−c̃ / temperature)` over min–max
//! normalised costs c̃. Defaults: credit 1, scale 1, temperature 0 (Dynamo's). Not modelled: the newer
//! optional terms (per-request active-request weight, overlap-credit decay, host/disk cache tiers) and
//! the router-side request queue (`router_queue_threshold`), which holds requests only when every worker
//! already has many batches' worth of prefill pending.

use rand::Rng;
use serde::{Deserialize, Serialize};

use super::active_sequences::ActiveSequences;
use super::pick::max_score_random_tie;
use super::{Decision, RouteInput, Routed, RoutingPolicy};
use crate::config::{Fraction, NonNegative};
use crate::request::Request;
use crate::rng::SimRng;

/// Parameters of `dynamo_kv` (named as Dynamo's `KvRouterConfig` names them).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DynamoParams {
    /// Weight of the prefill load (pending plus this request's uncached blocks) against the active
    /// blocks.
    #[serde(default = "one")]
    pub prefill_load_scale: NonNegative,
    /// Fraction of each cached block credited against the prefill load (0 ignores the cache).
    #[serde(default = "full_credit")]
    pub overlap_score_credit: Fraction,
    /// Softmax temperature; 0 picks the minimum cost.
    #[serde(default)]
    pub temperature: NonNegative,
}

fn one() -> NonNegative {
    NonNegative(1.0)
}

fn full_credit() -> Fraction {
    Fraction(1.0)
}

impl Default for DynamoParams {
    fn default() -> Self {
        DynamoParams {
            prefill_load_scale: one(),
            overlap_score_credit: full_credit(),
            temperature: NonNegative(0.0),
        }
    }
}

/// Dynamo's KV-aware cost routing with its router-side ledger of active requests.
#[derive(Debug)]
pub struct DynamoKv {
    params: DynamoParams,
    active: ActiveSequences,
}

impl DynamoKv {
    /// A policy with `params`.
    pub fn new(params: DynamoParams) -> Self {
        DynamoKv {
            params,
            active: ActiveSequences::default(),
        }
    }

    /// The cost of sending the request in `input` to worker `w` (lower is better).
    pub fn cost(&self, input: &RouteInput, w: usize) -> f64 {
        let bs = f64::from(input.block_size.max(1));
        let prefill_blocks =
            (self.active.prefill_tokens(w) as f64 + f64::from(input.request.prompt_tokens)) / bs;
        let credited = self.params.overlap_score_credit.0 * f64::from(input.overlap(w));
        let prefill = self.params.prefill_load_scale.0 * (prefill_blocks - credited).max(0.0);
        let decode = self.active.active_blocks(w) + self.active.new_blocks(w, input.prompt_hashes);
        prefill + f64::from(decode)
    }
}

/// Index into `costs` sampled with probability ∝ exp(−normalised cost / temperature), given a uniform
/// draw `u` in [0, 1). Pure, so it is testable without a generator.
pub fn softmax_sample(costs: &[f64], temperature: f64, u: f64) -> usize {
    let lo = costs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = costs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let span = if hi > lo { hi - lo } else { 1.0 };
    let weights: Vec<f64> = costs
        .iter()
        .map(|c| (-(c - lo) / span / temperature).exp())
        .collect();
    let total: f64 = weights.iter().sum();
    let mut acc = 0.0;
    for (i, w) in weights.iter().enumerate() {
        acc += w / total;
        if u < acc {
            return i;
        }
    }
    costs.len() - 1
}

impl RoutingPolicy for DynamoKv {
    fn name(&self) -> &'static str {
        "dynamo_kv"
    }

    fn reads_kv_usage(&self) -> bool {
        false // its decode load is the router's own ledger of active blocks
    }

    fn needs_cache_view(&self) -> bool {
        true
    }

    fn route(&mut self, input: &RouteInput, rng: &mut SimRng) -> Option<Decision> {
        if self.params.temperature.0 > 0.0 {
            let up: Vec<usize> = input.up().map(|w| w.id).collect();
            if up.is_empty() {
                return None;
            }
            let costs: Vec<f64> = up.iter().map(|&w| self.cost(input, w)).collect();
            let i = softmax_sample(&costs, self.params.temperature.0, rng.random::<f64>());
            return Some(Decision {
                worker: up[i],
                reason: "softmax sample over KV cost",
            });
        }
        let worker = max_score_random_tie(input.workers, |w| -self.cost(input, w.id), rng)?;
        Some(Decision {
            worker,
            reason: "lowest KV cost (prefill load + active blocks)",
        })
    }

    fn on_routed(&mut self, r: &Routed) {
        let cached = u64::from(r.overlap) * u64::from(r.block_size);
        let prefill = u64::from(r.request.prompt_tokens).saturating_sub(cached);
        self.active
            .add(r.request.id, r.worker, r.prompt_hashes, prefill);
    }

    fn on_first_token(&mut self, request: u64, _worker: usize) {
        self.active.first_token(request);
    }

    fn on_finished(&mut self, request: &Request, _worker: usize) {
        self.active.remove(request.id);
    }

    fn on_request_failed(&mut self, request: u64, _worker: usize) {
        self.active.remove(request);
    }

    fn on_worker_down(&mut self, worker: usize) {
        self.active.clear_worker(worker);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Segment;
    use crate::rng::from_u64;
    use crate::routing::test_support::snapshots;
    use crate::time::SimTime;
    use crate::worker::WorkerSnapshot;

    /// A request of `tokens` prompt tokens whose content is `content`.
    fn req(id: u64, content: u64, tokens: u32) -> Request {
        Request::new(
            id,
            None,
            SimTime::ZERO,
            1,
            vec![Segment { content, tokens }],
        )
    }

    /// Routes `r` (block size 16) over `ws` with the view's `overlaps`, then tells the policy, as the
    /// router does.
    fn route_and_send(
        p: &mut DynamoKv,
        r: &Request,
        ws: &[WorkerSnapshot],
        overlaps: &[u32],
        rng: &mut SimRng,
    ) -> usize {
        let hashes = r.block_hashes(16);
        let blocks = (r.prompt_tokens / 16) as usize;
        let input = RouteInput {
            request: r,
            prompt_blocks: blocks as u32,
            block_size: 16,
            prompt_hashes: &hashes[..blocks],
            overlaps,
            prefix_owner: None,
            workers: ws,
            now: SimTime::ZERO,
            load_age: crate::time::SimDuration::ZERO,
            prefix_sources: None,
            adapters: &[],
        };
        let w = p.route(&input, rng).unwrap().worker;
        p.on_routed(&Routed {
            request: r,
            worker: w,
            prompt_hashes: &hashes[..blocks],
            overlap: overlaps.get(w).copied().unwrap_or(0),
            block_size: 16,
            now: SimTime::ZERO,
        });
        w
    }

    #[test]
    fn routed_requests_load_their_worker_at_once_and_overlap_trades_against_pending_prefill() {
        let mut p = DynamoKv::new(DynamoParams::default());
        let mut rng = from_u64(0);
        let ws = snapshots(&[0, 0]);
        // Request A (160 tokens = 10 blocks) goes to an empty fleet: both cost 10 + 10 = 20, a tie.
        let a = req(1, 7, 160);
        let wa = route_and_send(&mut p, &a, &ws, &[0, 0], &mut rng);
        let other = 1 - wa;
        // Request B (160 tokens, other content): on A's worker (160 + 160) / 16 + 10 + 10 = 40, on the
        // other 10 + 10 = 20: it goes to the other worker, although the engine reports nothing yet.
        let b = req(2, 8, 160);
        assert_eq!(route_and_send(&mut p, &b, &ws, &[0, 0], &mut rng), other);
        // A and B produce their first tokens: their prefill is done, their 10 blocks stay active.
        p.on_first_token(1, wa);
        p.on_first_token(2, other);
        // Request C (320 tokens = 20 blocks) whose first 10 blocks the indexer sees on A's worker only
        // (8 of them, say): A's worker: max(0, 320/16 − 8) + 10 active + 20 new = 42; the other:
        // 20 + 10 + 20 = 50: the overlap wins.
        let c = req(3, 9, 320);
        let mut overlaps = [0, 0];
        overlaps[wa] = 8;
        assert_eq!(route_and_send(&mut p, &c, &ws, &overlaps, &mut rng), wa);
        // Request D like C but A's worker still prefills C (320 − 8·16 = 192 tokens pending):
        // A's worker: (192 + 320)/16 − 8 + 30 + 20 = 74; the other: 20 + 10 + 20 = 50: load wins.
        let d = req(4, 10, 320);
        assert_eq!(route_and_send(&mut p, &d, &ws, &overlaps, &mut rng), other);
    }

    #[test]
    fn a_prefix_in_flight_counts_once_and_completions_release_it() {
        let mut p = DynamoKv::new(DynamoParams {
            prefill_load_scale: NonNegative(0.0), // isolate the block terms
            ..Default::default()
        });
        let mut rng = from_u64(1);
        let ws = snapshots(&[0, 0]);
        // Worker 0 has one active request of 10 blocks; worker 1 one of 4 blocks.
        let shared = req(1, 5, 160);
        let small = req(2, 6, 64);
        let seed = |p: &mut DynamoKv, r: &Request, w: usize| {
            let h = r.block_hashes(16);
            p.on_routed(&Routed {
                request: r,
                worker: w,
                prompt_hashes: &h[..(r.prompt_tokens / 16) as usize],
                overlap: 0,
                block_size: 16,
                now: SimTime::ZERO,
            });
        };
        seed(&mut p, &shared, 0);
        seed(&mut p, &small, 1);
        // A request with the same 10-block prompt: worker 0 = 10 active + 0 new = 10; worker 1 = 4 + 10
        // = 14: it joins the request whose blocks it shares.
        let same = req(3, 5, 160);
        assert_eq!(route_and_send(&mut p, &same, &ws, &[0, 0], &mut rng), 0);
        // Both sharers finish: worker 0 is empty (0 + 10 = 10) and beats worker 1 (4 + 10 = 14) again,
        // with any prompt.
        p.on_finished(&shared, 0);
        p.on_finished(&same, 0);
        let other = req(4, 11, 160);
        assert_eq!(route_and_send(&mut p, &other, &ws, &[0, 0], &mut rng), 0);
    }

    #[test]
    fn ties_are_drawn_and_a_down_worker_is_forgotten() {
        let mut p = DynamoKv::new(DynamoParams::default());
        let mut rng = from_u64(3);
        let ws = snapshots(&[0, 0, 0]);
        let mut seen = [false; 3];
        for i in 0..60 {
            // Identical empty workers: every worker is a minimum; nothing is kept between draws.
            let r = req(100 + i, 100 + i, 64);
            let w = route_and_send(&mut p, &r, &ws, &[0, 0, 0], &mut rng);
            seen[w] = true;
            p.on_request_failed(r.id, w);
        }
        assert_eq!(seen, [true; 3], "ties are drawn at random");
        let r = req(1, 1, 640);
        let w = route_and_send(&mut p, &r, &ws, &[0, 0, 0], &mut rng);
        p.on_worker_down(w);
        let input_cost = {
            let h = r.block_hashes(16);
            let input = RouteInput {
                request: &r,
                prompt_blocks: 40,
                block_size: 16,
                prompt_hashes: &h[..40],
                overlaps: &[0, 0, 0],
                prefix_owner: None,
                workers: &ws,
                now: SimTime::ZERO,
                load_age: crate::time::SimDuration::ZERO,
                prefix_sources: None,
                adapters: &[],
            };
            p.cost(&input, w)
        };
        // 640/16 prefill + 40 new blocks, nothing active any more.
        assert_eq!(input_cost, 80.0);
    }

    #[test]
    fn softmax_prefers_cheap_workers_and_is_a_distribution() {
        let costs = [0.0, 10.0, 10.0];
        // At low temperature nearly all mass is on the cheapest.
        assert_eq!(softmax_sample(&costs, 0.05, 0.99), 0);
        // At high temperature all are likely.
        let picks: Vec<usize> = (0..10)
            .map(|i| softmax_sample(&costs, 100.0, i as f64 / 10.0))
            .collect();
        assert!(
            picks.contains(&0) && picks.contains(&1) && picks.contains(&2),
            "{picks:?}"
        );
    }
}
