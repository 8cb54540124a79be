//! `sglang_cache_aware`: the cache-aware policy of SGLang's router (`sgl-model-gateway`, formerly
//! `sgl-router`), as read in `sgl-project/sglang` `sgl-model-gateway/src/policies/cache_aware.rs` (commit
//! 053b63ff) and `tree.rs` (commit 03744dbe), November 2026.
//!
//! If the load is imbalanced, `max − min > balance_abs_threshold` **and** `max > balance_rel_threshold ×
//! min` (load = requests in flight, as the router counts them), route to the least loaded worker.
//! Otherwise find the longest prefix of the prompt in the router's approximate tree; if its match rate
//! (matched / prompt blocks) exceeds `cache_threshold`, route to the worker that tree node names, else to
//! the least loaded worker. "Least loaded" ties go to the lowest worker id (the first minimum in worker
//! order). Older releases sent weak matches to the worker with the smallest tree instead.
//!
//! The node a match ends on names the worker its text was first sent to (the tree caches that tenant
//! when the node is created and keeps it on splits), so among workers holding the same longest prefix the
//! first one it was sent to wins; once that worker's memory dropped the prefix, another holder is named.
//! fleetsim's router view keeps that attribution per block ([`RouteInput::prefix_owner`]); when the
//! named worker does not hold the whole longest prefix, the lowest-id worker that does is chosen.
//!
//! Defaults 64 / 1.5 / 0.3 are the gateway's command-line defaults (what an operator launching it gets);
//! the library's `CacheAwareConfig::default()` says 32 / 1.1 / 0.5 (set them to compare). The tree's
//! size and expiry (2^26 characters per worker, pruned every 120 s) are the router's
//! `approx_capacity_blocks` / `approx_prune_interval`, whose defaults for this policy follow them.

use serde::{Deserialize, Serialize};

use super::pick::min_from;
use super::{Decision, RouteInput, RoutingPolicy};
use crate::config::{Fraction, NonNegative, Positive};
use crate::rng::SimRng;

/// Parameters of `sglang_cache_aware`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SglangParams {
    #[serde(default = "default_abs")]
    pub balance_abs_threshold: NonNegative,
    #[serde(default = "default_rel")]
    pub balance_rel_threshold: Positive,
    #[serde(default = "default_cache")]
    pub cache_threshold: Fraction,
}

fn default_abs() -> NonNegative {
    NonNegative(64.0)
}
fn default_rel() -> Positive {
    Positive(1.5)
}
fn default_cache() -> Fraction {
    Fraction(0.3)
}

impl Default for SglangParams {
    fn default() -> Self {
        SglangParams {
            balance_abs_threshold: default_abs(),
            balance_rel_threshold: default_rel(),
            cache_threshold: default_cache(),
        }
    }
}

/// SGLang's cache-aware routing.
#[derive(Debug)]
pub struct SglangCacheAware {
    params: SglangParams,
}

impl SglangCacheAware {
    /// A policy with `params`.
    pub fn new(params: SglangParams) -> Self {
        SglangCacheAware { params }
    }

    /// The least loaded up worker, ties to the lowest id.
    fn least_loaded(input: &RouteInput) -> Option<usize> {
        min_from(input.workers, 0, |w| w.outstanding)
    }
}

impl RoutingPolicy for SglangCacheAware {
    fn name(&self) -> &'static str {
        "sglang_cache_aware"
    }

    fn reads_kv_usage(&self) -> bool {
        false
    }

    fn needs_cache_view(&self) -> bool {
        true
    }

    fn needs_prefix_owner(&self) -> bool {
        true
    }

    fn route(&mut self, input: &RouteInput, _rng: &mut SimRng) -> Option<Decision> {
        let max = f64::from(input.up().map(|w| w.outstanding).max()?);
        let min = f64::from(input.up().map(|w| w.outstanding).min()?);
        let p = &self.params;
        if max - min > p.balance_abs_threshold.0 && max > p.balance_rel_threshold.0 * min {
            return Self::least_loaded(input).map(|worker| Decision {
                worker,
                reason: "imbalanced: least loaded",
            });
        }
        let longest = input.up().map(|w| input.overlap(w.id)).max()?;
        let rate = f64::from(longest) / f64::from(input.prompt_blocks.max(1));
        if longest > 0 && rate > p.cache_threshold.0 {
            let holds = |w: usize| {
                input.workers.get(w).is_some_and(|x| x.up) && input.overlap(w) == longest
            };
            let worker = match input.prefix_owner {
                Some(w) if holds(w) => w,
                _ => input.up().map(|w| w.id).find(|&w| holds(w))?,
            };
            return Some(Decision {
                worker,
                reason: "match rate above cache_threshold",
            });
        }
        Self::least_loaded(input).map(|worker| Decision {
            worker,
            reason: "weak match: least loaded",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::from_u64;
    use crate::routing::test_support::{request, route_with, snapshots};
    use crate::time::SimTime;
    use crate::worker::WorkerSnapshot;

    /// Routes a 10-block prompt over `ws` with `overlaps`, the view naming `owner` for its longest prefix.
    fn route_owned(
        p: &mut SglangCacheAware,
        ws: &[WorkerSnapshot],
        overlaps: &[u32],
        owner: Option<usize>,
    ) -> usize {
        let req = request(7);
        let hashes: Vec<u64> = (0..10).collect();
        let input = RouteInput {
            request: &req,
            prompt_blocks: 10,
            block_size: 16,
            prompt_hashes: &hashes,
            overlaps,
            prefix_owner: owner,
            workers: ws,
            now: SimTime::ZERO,
            load_age: crate::time::SimDuration::ZERO,
            prefix_sources: None,
        };
        p.route(&input, &mut from_u64(0)).unwrap().worker
    }

    #[test]
    fn balance_first_then_cache_then_load() {
        let mut p = SglangCacheAware::new(SglangParams::default());
        let mut rng = from_u64(0);
        // Balanced: a 50% match (> 0.3) wins even on the busier worker.
        let ws = snapshots(&[10, 2, 3]);
        assert_eq!(
            route_with(&mut p, &request(1), &ws, &[5, 0, 0], 10, &mut rng)
                .unwrap()
                .worker,
            0
        );
        // Weak match (0.2, not above 0.3): least loaded.
        assert_eq!(
            route_with(&mut p, &request(1), &ws, &[2, 0, 0], 10, &mut rng)
                .unwrap()
                .worker,
            1
        );
        // Exactly 0.3 is not above the threshold either.
        assert_eq!(
            route_with(&mut p, &request(1), &ws, &[3, 0, 0], 10, &mut rng)
                .unwrap()
                .worker,
            1
        );
        // Imbalanced (100 − 2 > 64 and 100 > 1.5·2): least loaded despite a full match.
        let ws = snapshots(&[100, 2, 3]);
        assert_eq!(
            route_with(&mut p, &request(1), &ws, &[10, 0, 0], 10, &mut rng)
                .unwrap()
                .worker,
            1
        );
        // A spread of 64 is not above the absolute threshold: the match wins.
        let ws = snapshots(&[66, 2, 3]);
        assert_eq!(
            route_with(&mut p, &request(1), &ws, &[10, 0, 0], 10, &mut rng)
                .unwrap()
                .worker,
            0
        );
    }

    #[test]
    fn least_loaded_ties_go_to_the_lowest_id() {
        let mut p = SglangCacheAware::new(SglangParams::default());
        let mut rng = from_u64(0);
        let ws = snapshots(&[3, 1, 1, 1]);
        for _ in 0..5 {
            assert_eq!(
                route_with(&mut p, &request(1), &ws, &[0; 4], 10, &mut rng)
                    .unwrap()
                    .worker,
                1
            );
        }
    }

    #[test]
    fn a_shared_prefix_goes_to_the_worker_the_view_names() {
        let mut p = SglangCacheAware::new(SglangParams::default());
        let ws = snapshots(&[0, 0, 0, 0]);
        // Workers 0 and 2 hold all 10 blocks; the prefix was first sent to worker 2.
        assert_eq!(
            route_owned(&mut p, &ws, &[10, 0, 10, 0], Some(2)),
            2,
            "the owner, not the lowest id"
        );
        // The owner holds only 6 of them (its memory pruned the rest): the lowest-id full holder.
        assert_eq!(route_owned(&mut p, &ws, &[10, 0, 6, 10], Some(2)), 0);
        // A down owner is never chosen.
        let mut down = snapshots(&[0, 0, 0, 0]);
        down[2].up = false;
        assert_eq!(route_owned(&mut p, &down, &[0, 0, 10, 10], Some(2)), 3);
    }
}
