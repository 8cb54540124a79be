//! `lora_affinity`: adapter-aware routing as llm-d's `lora-affinity-scorer` scores it, combined with
//! llm-d's queue and KV-utilisation scorers under the max-score picker.
//!
//! The adapter score of a worker for a request's adapter (llm-d-inference-scheduler @520af478,
//! `pkg/epp/framework/plugins/scheduling/scorer/loraaffinity/lora_affinity.go` L76-102, read from the
//! engine's `vllm:lora_requests_info` metric: running and waiting adapters, `max_lora`):
//! - **1.0** the adapter is running there;
//! - **0.8** running + waiting distinct adapters < `max_loras` (room to load one more);
//! - **0.6** the adapter is only waiting there;
//! - **0.0** otherwise.
//!
//! `score = lora_weight · adapter + queue_weight · queue + kv_weight · (1 − KV utilisation)`, the queue
//! score llm-d's ((max − queued)/(max − min), 1 when all equal), weights 1 : 1 : 1 (llm-d's test
//! profile `test/integration/epp/testdata/default-config.yaml` lists the scorers without weights, so
//! each weighs 1; it also lists the prefix scorer, which this policy leaves out). A request without an
//! adapter scores 0 on the adapter term everywhere (llm-d would score the base model's name against
//! the adapter metric; fleetsim keeps the term neutral). Ties are drawn at random.
//!
//! The workers' adapter sets are read live, as `outstanding` is; llm-d scrapes them with the other
//! metrics.

use serde::{Deserialize, Serialize};

use super::pick::max_score_random_tie;
use super::{Decision, RouteInput, RoutingPolicy};
use crate::config::NonNegative;
use crate::lora::AdapterLoad;
use crate::rng::SimRng;

/// Parameters of `lora_affinity` (defaults 1 : 1 : 1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoraAffinityParams {
    /// Weight of the LoRA-affinity scorer: 1 where the request's adapter is running, 0.8 where the
    /// worker has room to load one more adapter, 0.6 where the adapter is only waiting, 0 otherwise.
    #[serde(default = "one")]
    pub lora_weight: NonNegative,
    /// Weight of the queue scorer (the worker's waiting requests, min–max normalised across workers).
    #[serde(default = "one")]
    pub queue_weight: NonNegative,
    /// Weight of the KV-cache utilisation scorer (1 − the worker's KV use).
    #[serde(default = "one")]
    pub kv_weight: NonNegative,
}

fn one() -> NonNegative {
    NonNegative(1.0)
}

impl Default for LoraAffinityParams {
    fn default() -> Self {
        LoraAffinityParams {
            lora_weight: one(),
            queue_weight: one(),
            kv_weight: one(),
        }
    }
}

/// llm-d's adapter score of one worker (module docs).
pub fn adapter_score(load: AdapterLoad) -> f64 {
    if load.active {
        1.0
    } else if load.room {
        0.8
    } else if load.waiting {
        0.6
    } else {
        0.0
    }
}

/// The `lora_affinity` policy.
#[derive(Debug)]
pub struct LoraAffinity {
    weights: [f64; 3],
}

impl LoraAffinity {
    pub fn new(p: &LoraAffinityParams) -> Self {
        LoraAffinity {
            weights: [p.lora_weight.0, p.queue_weight.0, p.kv_weight.0],
        }
    }
}

impl RoutingPolicy for LoraAffinity {
    fn name(&self) -> &'static str {
        "lora_affinity"
    }

    fn needs_adapter_view(&self) -> bool {
        true
    }

    fn route(&mut self, input: &RouteInput, rng: &mut SimRng) -> Option<Decision> {
        let max_q = input.up().map(|w| w.queued).max()?;
        let min_q = input.up().map(|w| w.queued).min()?;
        let [wl, wq, wk] = self.weights;
        let worker = max_score_random_tie(
            input.workers,
            |w| {
                let lora = match input.request.adapter {
                    Some(_) => input.adapters.get(w.id).map_or(0.0, |&l| adapter_score(l)),
                    None => 0.0,
                };
                let queue = if max_q == min_q {
                    1.0
                } else {
                    f64::from(max_q - w.queued) / f64::from(max_q - min_q)
                };
                wl * lora + wq * queue + wk * (1.0 - w.kv_utilization)
            },
            rng,
        )?;
        Some(Decision {
            worker,
            reason: "highest weighted score (adapter, queue, kv)",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lora::AdapterRef;
    use crate::rng::from_u64;
    use crate::routing::test_support::{request, snapshots};
    use crate::time::{SimDuration, SimTime};

    fn load(active: bool, waiting: bool, room: bool) -> AdapterLoad {
        AdapterLoad {
            active,
            waiting,
            room,
        }
    }

    #[test]
    fn scores_follow_llm_d() {
        assert_eq!(adapter_score(load(true, true, true)), 1.0);
        assert_eq!(adapter_score(load(false, true, true)), 0.8);
        assert_eq!(adapter_score(load(false, true, false)), 0.6);
        assert_eq!(adapter_score(load(false, false, false)), 0.0);
    }

    fn route(adapters: &[AdapterLoad], queued: &[u32], with_adapter: bool) -> usize {
        let mut workers = snapshots(&[0; 3]);
        for (w, &q) in workers.iter_mut().zip(queued) {
            w.queued = q;
        }
        let mut req = request(1);
        if with_adapter {
            req = req.for_adapter(AdapterRef { id: 5, rank: 16 });
        }
        let input = RouteInput {
            request: &req,
            prompt_blocks: 0,
            block_size: 16,
            prompt_hashes: &[],
            overlaps: &[],
            prefix_owner: None,
            workers: &workers,
            now: SimTime::ZERO,
            load_age: SimDuration::ZERO,
            prefix_sources: None,
            adapters,
        };
        let mut p = LoraAffinity::new(&LoraAffinityParams::default());
        p.route(&input, &mut from_u64(1)).unwrap().worker
    }

    #[test]
    fn the_worker_running_the_adapter_wins_unless_its_queue_costs_more() {
        let a = [
            load(false, false, false),
            load(true, false, false),
            load(false, false, true),
        ];
        assert_eq!(route(&a, &[0, 0, 0], true), 1);
        // Worker 1 has the longest queue (queue score 0), worker 2 room and no queue (2.8 against 2.0).
        assert_eq!(route(&a, &[2, 4, 0], true), 2);
        // Without an adapter only load counts: the shortest queue.
        assert_eq!(route(&a, &[3, 4, 2], false), 2);
    }
}
