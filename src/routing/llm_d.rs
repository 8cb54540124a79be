//! `llm_d`: llm-d's inference scheduler with its default weighted scorers and max-score picker.
//!
//! `score = prefix_weight · prefix + queue_weight · queue + kv_weight · kv`, with (llm-d's scorers):
//! prefix = matched blocks / prompt blocks; queue = (max queued − queued) / (max − min) over the candidates
//! (1 when all are equal); kv = 1 − KV utilisation. Default weights 2 : 1 : 1 as in llm-d's documented
//! default configuration. The highest score wins; ties are drawn at random, as its max-score picker does.

use serde::{Deserialize, Serialize};

use super::pick::max_score_random_tie;
use super::{Decision, RouteInput, RoutingPolicy};
use crate::config::NonNegative;
use crate::rng::SimRng;

/// Parameters of `llm_d`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmDParams {
    #[serde(default = "two")]
    pub prefix_weight: NonNegative,
    #[serde(default = "one")]
    pub queue_weight: NonNegative,
    #[serde(default = "one")]
    pub kv_weight: NonNegative,
}

fn one() -> NonNegative {
    NonNegative(1.0)
}
fn two() -> NonNegative {
    NonNegative(2.0)
}

impl Default for LlmDParams {
    fn default() -> Self {
        LlmDParams {
            prefix_weight: two(),
            queue_weight: one(),
            kv_weight: one(),
        }
    }
}

/// llm-d's weighted-scorer scheduler.
#[derive(Debug)]
pub struct LlmD {
    params: LlmDParams,
}

impl LlmD {
    /// A policy with `params`.
    pub fn new(params: LlmDParams) -> Self {
        LlmD { params }
    }
}

impl RoutingPolicy for LlmD {
    fn name(&self) -> &'static str {
        "llm_d"
    }

    fn needs_cache_view(&self) -> bool {
        true
    }

    fn route(&mut self, input: &RouteInput, rng: &mut SimRng) -> Option<Decision> {
        let max_q = input.up().map(|w| w.queued).max()?;
        let min_q = input.up().map(|w| w.queued).min()?;
        let blocks = f64::from(input.prompt_blocks.max(1));
        let p = &self.params;
        let worker = max_score_random_tie(
            input.workers,
            |w| {
                let prefix = f64::from(input.overlap(w.id)) / blocks;
                let queue = if max_q == min_q {
                    1.0
                } else {
                    f64::from(max_q - w.queued) / f64::from(max_q - min_q)
                };
                let kv = 1.0 - w.kv_utilization;
                p.prefix_weight.0 * prefix + p.queue_weight.0 * queue + p.kv_weight.0 * kv
            },
            rng,
        )?;
        Some(Decision {
            worker,
            reason: "highest weighted score (prefix, queue, kv)",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::from_u64;
    use crate::routing::test_support::{request, route_with, snapshots};

    #[test]
    fn weighs_prefix_twice_queue_and_kv_once() {
        let mut p = LlmD::new(LlmDParams::default());
        let mut rng = from_u64(0);
        let mut ws = snapshots(&[0, 0, 0]);
        ws[0].queued = 10;
        ws[1].queued = 0;
        ws[2].queued = 5;
        // Worker 0: prefix 1.0·2 + queue 0 + kv 1 = 3; worker 1: 0 + 1 + 1 = 2; worker 2: 0 + 0.5 + 1.
        assert_eq!(
            route_with(&mut p, &request(1), &ws, &[10, 0, 0], 10, &mut rng)
                .unwrap()
                .worker,
            0
        );
        // Half a match is not worth the whole queue: 1 + 0 + 1 = 2 vs worker 1's 2 … plus kv.
        ws[0].kv_utilization = 0.5;
        assert_eq!(
            route_with(&mut p, &request(1), &ws, &[5, 0, 0], 10, &mut rng)
                .unwrap()
                .worker,
            1
        );
    }
}
