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
//! first one it was sent to wins; if that worker no longer holds it (its memory pruned it), another holder
//! is named and remembered instead (here the lowest id). This preset keeps that first-tenant memory
//! itself, fed by its own routing decisions.
//!
//! Defaults 64 / 1.5 / 0.3 are the gateway's command-line defaults (what an operator launching it gets);
//! the library's `CacheAwareConfig::default()` says 32 / 1.1 / 0.5 (set them to compare). The tree's
//! size and expiry (2^26 characters per worker, pruned every 120 s) are the router's
//! `approx_capacity_blocks` / `approx_prune_interval`, whose defaults for this policy follow them.

use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Serialize};

use super::pick::min_from;
use super::{Decision, RouteInput, Routed, RoutingPolicy};
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
    /// Prefix (the chain hash of its last block) → the worker its tree node names.
    first_tenant: HashMap<u64, usize>,
}

impl SglangCacheAware {
    /// A policy with `params`.
    pub fn new(params: SglangParams) -> Self {
        SglangCacheAware {
            params,
            first_tenant: HashMap::default(),
        }
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

    fn needs_cache_view(&self) -> bool {
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
        if let Some(key) = input.prefix_key(longest as usize)
            && rate > p.cache_threshold.0
        {
            let holds = |w: usize| {
                input.workers.get(w).is_some_and(|x| x.up) && input.overlap(w) == longest
            };
            let worker = match self.first_tenant.get(&key) {
                Some(&w) if holds(w) => w,
                _ => {
                    let w = input.up().map(|w| w.id).find(|&w| holds(w))?;
                    self.first_tenant.insert(key, w);
                    w
                }
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

    fn on_routed(&mut self, r: &Routed) {
        for &h in r.prompt_hashes {
            self.first_tenant.entry(h).or_insert(r.worker);
        }
    }

    fn on_worker_down(&mut self, worker: usize) {
        self.first_tenant.retain(|_, w| *w != worker);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Request;
    use crate::rng::from_u64;
    use crate::routing::test_support::{request, route_with, snapshots};
    use crate::time::SimTime;

    /// Tells the policy that `req`'s prompt (hashes as `route_with` builds them) went to `w`.
    fn sent(p: &mut SglangCacheAware, req: &Request, blocks: u32, w: usize) {
        let hashes: Vec<u64> = (0..u64::from(blocks)).map(|b| b + 1000 * req.id).collect();
        p.on_routed(&Routed {
            request: req,
            worker: w,
            prompt_hashes: &hashes,
            overlap: 0,
            block_size: 16,
            now: SimTime::ZERO,
        });
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
    fn a_shared_prefix_goes_to_the_worker_it_was_first_sent_to() {
        let mut p = SglangCacheAware::new(SglangParams::default());
        let mut rng = from_u64(0);
        let ws = snapshots(&[0, 0, 0, 0]);
        let req = request(7);
        // The prompt's 10 blocks were sent to worker 2 first, then to worker 0: both hold all 10.
        sent(&mut p, &req, 10, 2);
        sent(&mut p, &req, 10, 0);
        let pick = |p: &mut SglangCacheAware, ov: &[u32], rng: &mut SimRng| {
            route_with(p, &req, &ws, ov, 10, rng).unwrap().worker
        };
        assert_eq!(
            pick(&mut p, &[10, 0, 10, 0], &mut rng),
            2,
            "first tenant, not lowest id"
        );
        // Worker 2's memory lost the last 4 blocks: worker 0 alone holds the longest prefix.
        assert_eq!(pick(&mut p, &[10, 0, 6, 0], &mut rng), 0);
        // Worker 2 forgot the prefix entirely; workers 3 and 0 hold it: the node names another holder
        // (the lowest id, 0) and keeps naming it, even after worker 2 learns it again.
        assert_eq!(pick(&mut p, &[10, 0, 0, 10], &mut rng), 0);
        assert_eq!(pick(&mut p, &[10, 0, 10, 10], &mut rng), 0);
        // A worker going down is forgotten as a tenant.
        p.on_worker_down(0);
        assert_eq!(pick(&mut p, &[0, 0, 10, 10], &mut rng), 2);
    }
}
