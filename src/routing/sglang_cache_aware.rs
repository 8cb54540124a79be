//! `sglang_cache_aware`: SGLang router's cache-aware policy.
//!
//! If the load is imbalanced, `max − min > balance_abs_threshold` **and** `max > balance_rel_threshold ×
//! min` (load = requests in flight, as the router counts them), route to the least loaded worker.
//! Otherwise route to the best prefix match if its match rate (matched / prompt blocks) exceeds
//! `cache_threshold`, else to the least loaded worker. Defaults 64 / 1.5 / 0.3 are those of SGLang's
//! Python router launcher; its Rust model gateway defaults to 32 / 1.1 / 0.5 (set them to compare).
//! SGLang's own fallback on a weak match is the worker with the smallest radix tree (most free cache);
//! this preset follows the specification and uses the least loaded worker instead.

use serde::{Deserialize, Serialize};

use super::least_outstanding::LeastOutstanding;
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
    least: LeastOutstanding,
}

impl SglangCacheAware {
    /// A policy with `params`.
    pub fn new(params: SglangParams) -> Self {
        SglangCacheAware {
            params,
            least: LeastOutstanding::default(),
        }
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
            return self.least.pick(input).map(|worker| Decision {
                worker,
                reason: "imbalanced: least loaded",
            });
        }
        // Best match; ties to the lowest id, as iteration order in the router's tree search.
        let best = input
            .up()
            .max_by_key(|w| (input.overlap(w.id), std::cmp::Reverse(w.id)))?
            .id;
        let rate = f64::from(input.overlap(best)) / f64::from(input.prompt_blocks.max(1));
        if rate > p.cache_threshold.0 {
            return Some(Decision {
                worker: best,
                reason: "match rate above cache_threshold",
            });
        }
        self.least.pick(input).map(|worker| Decision {
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
        // Weak match (0.2): least loaded.
        assert_eq!(
            route_with(&mut p, &request(1), &ws, &[2, 0, 0], 10, &mut rng)
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
    }
}
