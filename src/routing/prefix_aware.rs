//! `prefix_aware`: the longest cached prefix, priced against load.
//!
//! `score(w) = prefix_weight · overlap(w) / prompt_blocks − load_weight · outstanding(w) / max outstanding`
//! over the up workers; the highest score wins, ties to fewer outstanding requests, then by rotation.
//! `load_weight = 0` is pure prefix routing: every request sharing a hot prefix goes to the worker that
//! holds it, the behaviour behind the "death spiral" reports against prefix-only routers.

use serde::{Deserialize, Serialize};

use super::{Decision, RouteInput, RoutingPolicy};
use crate::config::NonNegative;
use crate::rng::SimRng;

/// Parameters of `prefix_aware`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrefixAwareParams {
    /// Weight of the matched fraction of the prompt (0–1).
    #[serde(default = "one")]
    pub prefix_weight: NonNegative,
    /// Weight of the load, normalised by the most loaded up worker (0–1).
    #[serde(default = "one")]
    pub load_weight: NonNegative,
}

fn one() -> NonNegative {
    NonNegative(1.0)
}

impl Default for PrefixAwareParams {
    fn default() -> Self {
        PrefixAwareParams {
            prefix_weight: one(),
            load_weight: one(),
        }
    }
}

/// Cache-affinity routing priced against load.
#[derive(Debug)]
pub struct PrefixAware {
    params: PrefixAwareParams,
    start: usize,
}

impl PrefixAware {
    /// A policy with `params`.
    pub fn new(params: PrefixAwareParams) -> Self {
        PrefixAware { params, start: 0 }
    }
}

impl RoutingPolicy for PrefixAware {
    fn name(&self) -> &'static str {
        "prefix_aware"
    }

    fn reads_kv_usage(&self) -> bool {
        false
    }

    fn needs_cache_view(&self) -> bool {
        true
    }

    fn route(&mut self, input: &RouteInput, _rng: &mut SimRng) -> Option<Decision> {
        let max_load = input.up().map(|w| w.outstanding).max()?.max(1);
        let blocks = f64::from(input.prompt_blocks.max(1));
        let score = |w: usize| {
            self.params.prefix_weight.0 * f64::from(input.overlap(w)) / blocks
                - self.params.load_weight.0 * f64::from(input.workers[w].outstanding)
                    / f64::from(max_load)
        };
        let n = input.workers.len();
        let mut best: Option<(usize, f64)> = None;
        for k in 0..n {
            let w = (self.start + k) % n;
            if !input.workers[w].up {
                continue;
            }
            let s = score(w);
            let better = match best {
                None => true,
                Some((b, bs)) => {
                    s > bs + 1e-12
                        || ((s - bs).abs() <= 1e-12
                            && input.workers[w].outstanding < input.workers[b].outstanding)
                }
            };
            if better {
                best = Some((w, s));
            }
        }
        let (worker, _) = best?;
        self.start = (worker + 1) % n;
        let reason = if input.overlap(worker) > 0 {
            "best prefix match for the load"
        } else {
            "no useful match: least loaded"
        };
        Some(Decision { worker, reason })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::from_u64;
    use crate::routing::test_support::{request, route_with, snapshots};

    #[test]
    fn prefers_the_match_unless_load_outweighs_it() {
        let mut rng = from_u64(0);
        let ws = snapshots(&[4, 1, 0]);
        let mut p = PrefixAware::new(PrefixAwareParams::default());
        // Worker 0 holds 8 of 10 blocks: 0.8 − 1.0 = −0.2 < worker 2's 0 − 0: load wins.
        assert_eq!(
            route_with(&mut p, &request(1), &ws, &[8, 0, 0], 10, &mut rng)
                .unwrap()
                .worker,
            2
        );
        let mut p = PrefixAware::new(PrefixAwareParams {
            load_weight: NonNegative(0.1),
            ..Default::default()
        });
        assert_eq!(
            route_with(&mut p, &request(1), &ws, &[8, 0, 0], 10, &mut rng)
                .unwrap()
                .worker,
            0
        );
        let mut p = PrefixAware::new(PrefixAwareParams {
            load_weight: NonNegative(0.0),
            ..Default::default()
        });
        let mut down = snapshots(&[0, 9, 9]);
        down[0].up = false;
        let d = route_with(&mut p, &request(1), &down, &[10, 2, 1], 10, &mut rng).unwrap();
        assert_eq!(
            d.worker, 1,
            "a down worker is never chosen, however good its match"
        );
    }
}
