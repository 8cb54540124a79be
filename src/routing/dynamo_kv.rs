//! `dynamo_kv`: NVIDIA Dynamo's KV-router cost.
//!
//! `cost(w) = prefill_load_scale · max(0, prompt blocks − overlap blocks(w)) + decode blocks(w)`, where
//! decode blocks are the KV blocks the worker's running requests hold. The lowest cost wins (ties drawn at
//! random); with `temperature > 0` the worker is sampled with probability ∝ `exp(−c̃ / temperature)` over
//! min–max-normalised costs c̃, as Dynamo's softmax sampling does.

use rand::Rng;
use serde::{Deserialize, Serialize};

use super::pick::max_score_random_tie;
use super::{Decision, RouteInput, RoutingPolicy};
use crate::config::NonNegative;
use crate::rng::SimRng;

/// Parameters of `dynamo_kv`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DynamoParams {
    /// Weight of the uncached prefill blocks against the decode blocks.
    #[serde(default = "one")]
    pub prefill_load_scale: NonNegative,
    /// Softmax temperature; 0 picks the minimum cost.
    #[serde(default)]
    pub temperature: NonNegative,
}

fn one() -> NonNegative {
    NonNegative(1.0)
}

impl Default for DynamoParams {
    fn default() -> Self {
        DynamoParams {
            prefill_load_scale: one(),
            temperature: NonNegative(0.0),
        }
    }
}

/// Dynamo's KV-aware cost routing.
#[derive(Debug)]
pub struct DynamoKv {
    params: DynamoParams,
}

impl DynamoKv {
    /// A policy with `params`.
    pub fn new(params: DynamoParams) -> Self {
        DynamoKv { params }
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

    fn needs_cache_view(&self) -> bool {
        true
    }

    fn route(&mut self, input: &RouteInput, rng: &mut SimRng) -> Option<Decision> {
        let cost = |w: usize| {
            let uncached = input.prompt_blocks.saturating_sub(input.overlap(w));
            self.params.prefill_load_scale.0 * f64::from(uncached)
                + f64::from(input.workers[w].used_blocks)
        };
        if self.params.temperature.0 > 0.0 {
            let up: Vec<usize> = input.up().map(|w| w.id).collect();
            if up.is_empty() {
                return None;
            }
            let costs: Vec<f64> = up.iter().map(|&w| cost(w)).collect();
            let i = softmax_sample(&costs, self.params.temperature.0, rng.random::<f64>());
            return Some(Decision {
                worker: up[i],
                reason: "softmax sample over KV cost",
            });
        }
        let worker = max_score_random_tie(input.workers, |w| -cost(w.id), rng)?;
        Some(Decision {
            worker,
            reason: "lowest KV cost (uncached prefill + decode blocks)",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::from_u64;
    use crate::routing::test_support::{request, route_with, snapshots};

    #[test]
    fn cost_trades_overlap_against_active_blocks() {
        let mut p = DynamoKv::new(DynamoParams::default());
        let mut rng = from_u64(0);
        let mut ws = snapshots(&[0, 0]);
        ws[0].used_blocks = 50;
        ws[1].used_blocks = 10;
        // Worker 0: (100 − 80) + 50 = 70; worker 1: 100 + 10 = 110.
        assert_eq!(
            route_with(&mut p, &request(1), &ws, &[80, 0], 100, &mut rng)
                .unwrap()
                .worker,
            0
        );
        // Worker 0: (100 − 20) + 50 = 130 > 110.
        assert_eq!(
            route_with(&mut p, &request(1), &ws, &[20, 0], 100, &mut rng)
                .unwrap()
                .worker,
            1
        );
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
