//! `llm_d` and `llm_d_precise`: llm-d's inference scheduler (the endpoint picker of
//! `llm-d/llm-d-inference-scheduler`, built on the Gateway API Inference Extension) with its weighted
//! scorers and max-score picker.
//!
//! `score = prefix_weight · prefix + queue_weight · queue + kv_weight · kv`, with llm-d's scorers:
//! prefix = matched blocks / prompt blocks, both capped at `max_prefix_blocks` (the prefix-hash
//! producer's `DefaultMaxPrefixBlocks`: 2048 blocks of 16 tokens in `llm-d/llm-d-router`; 256 in the
//! Gateway API Inference Extension's earlier approximate prefix plugin, `max_prefix_blocks = 256`); queue = (max queued − queued) / (max − min) over the candidates (1 when
//! all are equal); kv = 1 − KV utilisation. The highest score wins; ties are drawn at random (the
//! max-score picker shuffles before it sorts).
//!
//! - `llm_d` is the scheduler's built-in default: the approximate prefix scorer (a per-worker LRU of the
//!   block hashes the scheduler itself sent there, sized to the worker's KV blocks) weighted prefix 3 :
//!   queue 2 : kv-utilisation 2. Those weights are in `pkg/epp/config/loader/defaults.go` since
//!   2026-02-15 (GIE #2341) and in the Helm chart since GIE #1827 (2025-11-06); before that every scorer
//!   weighed 1 (`prefix_weight=1,queue_weight=1,kv_weight=1` reproduces those releases). Read at
//!   llm-d-inference-scheduler commit 520af478 (2026-05-17).
//! - `llm_d_precise` is llm-d's sample configuration with the precise prefix-cache scorer
//!   (`deploy/config/epp-precise-prefix-cache-config.yaml`): the workers' KV events feed the index, and
//!   the weights are prefix 2 : kv-utilisation 1 : queue 1.

use serde::{Deserialize, Serialize};

use super::pick::max_score_random_tie;
use super::{Decision, RouteInput, RoutingPolicy};
use crate::config::NonNegative;
use crate::rng::SimRng;

/// Parameters of `llm_d` (defaults: the scheduler's built-in configuration).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmDParams {
    #[serde(default = "three")]
    pub prefix_weight: NonNegative,
    #[serde(default = "two")]
    pub queue_weight: NonNegative,
    #[serde(default = "two")]
    pub kv_weight: NonNegative,
    /// Prompt blocks the prefix scorer looks at, at most (0: all).
    #[serde(default = "default_max_prefix_blocks")]
    pub max_prefix_blocks: u32,
}

/// Parameters of `llm_d_precise` (defaults: llm-d's precise prefix-cache sample configuration).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmDPreciseParams {
    #[serde(default = "two")]
    pub prefix_weight: NonNegative,
    #[serde(default = "one")]
    pub queue_weight: NonNegative,
    #[serde(default = "one")]
    pub kv_weight: NonNegative,
    /// Prompt blocks the prefix scorer looks at, at most (0: all).
    #[serde(default = "default_max_prefix_blocks")]
    pub max_prefix_blocks: u32,
}

fn one() -> NonNegative {
    NonNegative(1.0)
}
fn two() -> NonNegative {
    NonNegative(2.0)
}
fn three() -> NonNegative {
    NonNegative(3.0)
}
fn default_max_prefix_blocks() -> u32 {
    2048
}

impl Default for LlmDParams {
    fn default() -> Self {
        LlmDParams {
            prefix_weight: three(),
            queue_weight: two(),
            kv_weight: two(),
            max_prefix_blocks: default_max_prefix_blocks(),
        }
    }
}

impl Default for LlmDPreciseParams {
    fn default() -> Self {
        LlmDPreciseParams {
            prefix_weight: two(),
            queue_weight: one(),
            kv_weight: one(),
            max_prefix_blocks: default_max_prefix_blocks(),
        }
    }
}

impl From<&LlmDPreciseParams> for LlmDParams {
    fn from(p: &LlmDPreciseParams) -> Self {
        LlmDParams {
            prefix_weight: p.prefix_weight,
            queue_weight: p.queue_weight,
            kv_weight: p.kv_weight,
            max_prefix_blocks: p.max_prefix_blocks,
        }
    }
}

/// llm-d's weighted-scorer scheduler.
#[derive(Debug)]
pub struct LlmD {
    params: LlmDParams,
    name: &'static str,
}

impl LlmD {
    /// The `llm_d` preset with `params`.
    pub fn new(params: LlmDParams) -> Self {
        LlmD {
            params,
            name: "llm_d",
        }
    }

    /// The `llm_d_precise` preset with `params`.
    pub fn precise(params: &LlmDPreciseParams) -> Self {
        LlmD {
            params: params.into(),
            name: "llm_d_precise",
        }
    }
}

impl RoutingPolicy for LlmD {
    fn name(&self) -> &'static str {
        self.name
    }

    fn needs_cache_view(&self) -> bool {
        true
    }

    fn route(&mut self, input: &RouteInput, rng: &mut SimRng) -> Option<Decision> {
        let max_q = input.up().map(|w| w.queued).max()?;
        let min_q = input.up().map(|w| w.queued).min()?;
        let p = &self.params;
        let cap = if p.max_prefix_blocks == 0 {
            u32::MAX
        } else {
            p.max_prefix_blocks
        };
        let blocks = input.prompt_blocks.min(cap);
        let worker = max_score_random_tie(
            input.workers,
            |w| {
                let prefix = if blocks == 0 {
                    0.0
                } else {
                    f64::from(input.overlap(w.id).min(blocks)) / f64::from(blocks)
                };
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
    fn default_weighs_prefix_3_queue_2_kv_2() {
        let mut p = LlmD::new(LlmDParams::default());
        let mut rng = from_u64(0);
        let mut ws = snapshots(&[0, 0, 0]);
        ws[0].queued = 10;
        ws[1].queued = 0;
        ws[2].queued = 5;
        // Worker 0 holds the whole prompt but has the longest queue: 3·1 + 2·0 + 2·1 = 5;
        // worker 1: 0 + 2·1 + 2·1 = 4; worker 2: 0 + 2·0.5 + 2 = 3. The full match wins.
        let pick = |p: &mut LlmD, ws: &[_], ov: &[u32], rng: &mut SimRng| {
            route_with(p, &request(1), ws, ov, 10, rng).unwrap().worker
        };
        assert_eq!(pick(&mut p, &ws, &[10, 0, 0], &mut rng), 0);
        // Half the prompt on worker 0 whose KV is half used: 1.5 + 0 + 1 = 2.5 < worker 1's 4.
        ws[0].kv_utilization = 0.5;
        assert_eq!(pick(&mut p, &ws, &[5, 0, 0], &mut rng), 1);
        // Under 2:1:1 the full match on the loaded worker scores 2 + 0 + 0.5 = 2.5 against worker 1's
        // 0 + 1 + 1 = 2; under 3:2:2 it scores 3 + 0 + 1 = 4 against 4: a tie, drawn at random.
        let mut precise = LlmD::precise(&LlmDPreciseParams::default());
        assert_eq!(pick(&mut precise, &ws, &[10, 0, 0], &mut rng), 0);
        let mut seen = [false; 3];
        for _ in 0..64 {
            seen[pick(&mut p, &ws, &[10, 0, 0], &mut rng)] = true;
        }
        assert_eq!(
            seen,
            [true, true, false],
            "tied workers 0 and 1 are both drawn"
        );
    }

    #[test]
    fn the_prefix_score_looks_at_the_first_max_prefix_blocks() {
        let mut p = LlmD::new(LlmDParams {
            max_prefix_blocks: 4,
            ..Default::default()
        });
        let mut rng = from_u64(0);
        let mut ws = snapshots(&[0, 0]);
        ws[1].kv_utilization = 0.2;
        // Worker 0 matches 4 of 10 blocks: capped at 4, that is 4/4 = 1: 3 + 2 + 2 = 7; worker 1 holds
        // 10 of 10 (also 1 after the cap) but has less free KV: 3 + 2 + 1.6 = 6.6.
        assert_eq!(
            route_with(&mut p, &request(1), &ws, &[4, 10], 10, &mut rng)
                .unwrap()
                .worker,
            0
        );
        // Uncapped, worker 0's 0.4 match scores 1.2 + 4 = 5.2 < 6.6.
        let mut p = LlmD::new(LlmDParams {
            max_prefix_blocks: 0,
            ..Default::default()
        });
        assert_eq!(
            route_with(&mut p, &request(1), &ws, &[4, 10], 10, &mut rng)
                .unwrap()
                .worker,
            1
        );
    }
}
