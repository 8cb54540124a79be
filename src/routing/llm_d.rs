//! `llm_d` and `llm_d_precise`: llm-d's inference scheduler (the endpoint picker of
//! `llm-d/llm-d-inference-scheduler`, now `llm-d/llm-d-router`) with its weighted scorers and
//! max-score picker.
//!
//! `score = prefix_weight · prefix + queue_weight · queue + kv_weight · kv + active_request_weight ·
//! active + load_aware_weight · load`, with llm-d's scorers: prefix = matched blocks / prompt blocks,
//! both counted within the prefix producer's window; queue = (max queued − queued) / (max − min) over
//! the candidates (1 when all are equal); kv = 1 − KV utilisation; active (the
//! `active-request-scorer`) = 1 for a worker with no request in flight, else (max in flight − in
//! flight) / max in flight, counted by the scheduler itself (never stale); load (the
//! `load-aware-scorer`) = 0.5 for a worker with an empty queue, else 0.5 · (1 − min(queued,
//! threshold) / threshold). The highest score wins; ties are drawn at random (the max-score picker
//! shuffles before it sorts). Weights 3 : 2 : 2 : 0 : 0 are `loadDefaultConfig`'s in every release
//! `version` names (the active-request and load-aware scorers are not in it).
//!
//! The active-request scorer counts a request until its response completes from
//! llm-d-inference-scheduler v0.4.0 on (#378, `ResponseComplete`). In v0.3.0–v0.3.2 it released the
//! request in `PostResponse`, which the Gateway API Inference Extension (v0.5–v1.0) runs when the
//! response *headers* arrive; a streamed vLLM completion sends them before its first token, so every
//! pod held about zero requests and scored 1: the scorer added the same to every pod. For those
//! releases write `active_request_weight = 0`.
//!
//! - `llm_d` is the scheduler's built-in default, the approximate prefix producer: a per-worker LRU of
//!   the block hashes the scheduler itself sent there, blind to evictions. Its hashing changed between
//!   releases, so the preset names one release ([`LlmDVersion`], the `version` key):
//!   - `v0.8` (llm-d-inference-scheduler v0.8.0, on the Gateway API Inference Extension v1.5.0's
//!     producer): the request text in blocks of 16 tokens × 4 characters (the engine's block size),
//!     full blocks only, the first 256 blocks hashed and indexed, an LRU of as many entries as the
//!     engine has KV blocks.
//!   - `v0.10` (llm-d-router v0.10.0, the newest release, the default): token ids in blocks of
//!     max(engine block size, 64) tokens (the floor arrived in v0.9.0), a trailing partial block
//!     counted, 131,072 tokens (2,048 blocks of 64) hashed and indexed, the same number of LRU entries,
//!     each now 64 tokens: the index remembers 4× the tokens a 16-token-block engine holds.
//! - `llm_d_precise` is llm-d's sample configuration with the precise prefix-cache scorer
//!   (`deploy/config/epp-precise-prefix-cache-config.yaml`): the workers' KV events feed the index, in
//!   the engine's blocks, and the weights are prefix 2 : kv-utilisation 1 : queue 1.
//!
//! docs/routing.md lists each term with the upstream file and line it follows.

use serde::{Deserialize, Serialize};

use super::pick::max_score_random_tie;
use super::{Decision, RouteInput, RoutingPolicy};
use crate::config::{NonNegative, PositiveInt};
use crate::rng::SimRng;

/// The release of llm-d's scheduler `llm_d` follows; the releases differ in the approximate prefix
/// producer only (scorers, weights and picker are the same). Written as the release tag's
/// `vMAJOR.MINOR`, a string (`version = "v0.8"`).
// The derived schema lists the serde names (`v0.8`, `v0.10`): exactly the strings `deserialize` takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub enum LlmDVersion {
    /// llm-d-inference-scheduler v0.8.0 (2026-04-25), whose producer is the Gateway API Inference
    /// Extension v1.5.0's: blocks of the engine's size (16 tokens, hashed as 64 characters), full blocks
    /// only, at most 256.
    #[serde(rename = "v0.8")]
    V0_8,
    /// llm-d-router v0.10.0 (2026-08-17): blocks of max(engine block size, 64) tokens, a trailing
    /// partial block counted, at most 131,072 tokens.
    #[default]
    #[serde(rename = "v0.10")]
    V0_10,
}

impl<'de> Deserialize<'de> for LlmDVersion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Release;
        impl serde::de::Visitor<'_> for Release {
            type Value = LlmDVersion;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an llm-d release as text (`version = \"v0.10\"`)")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<LlmDVersion, E> {
                match s {
                    "v0.8" => Ok(LlmDVersion::V0_8),
                    "v0.10" => Ok(LlmDVersion::V0_10),
                    _ => Err(E::unknown_variant(s, &LlmDVersion::NAMES)),
                }
            }
        }
        d.deserialize_str(Release)
    }
}

impl LlmDVersion {
    /// Every version, oldest first, as written in scenario files.
    pub const NAMES: [&'static str; 2] = ["v0.8", "v0.10"];

    /// Tokens per hashed block for engines of `block_size`-token KV blocks (the producer auto-tunes
    /// its block size from the engine's `cache_config_info`; v0.9.0 on raise it to at least 64).
    pub fn hash_block_tokens(self, block_size: u32) -> u32 {
        match self {
            LlmDVersion::V0_8 => block_size.max(1),
            LlmDVersion::V0_10 => block_size.max(64),
        }
    }

    /// Hashed blocks the producer looks at, at most (`maxPrefixBlocksToMatch`, or, from v0.9.0,
    /// `maxPrefixTokensToMatch` / block tokens).
    pub fn window_blocks(self, block_size: u32) -> u32 {
        match self {
            LlmDVersion::V0_8 => 256,
            LlmDVersion::V0_10 => 131_072 / self.hash_block_tokens(block_size),
        }
    }

    /// Whether a trailing partial block is hashed (and so counts in the score's denominator).
    pub fn counts_partial_block(self) -> bool {
        matches!(self, LlmDVersion::V0_10)
    }
}

/// Parameters of `llm_d` (defaults: the scheduler's built-in configuration at `version`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LlmDParams {
    /// The upstream release followed.
    #[serde(default)]
    pub version: LlmDVersion,
    /// Weight of the prefix-cache scorer (the share of the prompt's blocks the worker is believed to hold).
    #[serde(default = "three")]
    pub prefix_weight: NonNegative,
    /// Weight of the queue scorer (the worker's waiting requests, min–max normalised across workers).
    #[serde(default = "two")]
    pub queue_weight: NonNegative,
    /// Weight of the KV-cache utilisation scorer (1 − the worker's KV use).
    #[serde(default = "two")]
    pub kv_weight: NonNegative,
    /// Weight of the active-request scorer (requests in flight per worker; 0: not configured).
    #[serde(default)]
    pub active_request_weight: NonNegative,
    /// Weight of the load-aware scorer (the engine's waiting queue against a threshold; 0: not
    /// configured).
    #[serde(default)]
    pub load_aware_weight: NonNegative,
    /// The load-aware scorer's `threshold`: queued requests at which it scores 0.
    #[serde(default = "default_load_threshold")]
    pub load_aware_threshold: PositiveInt,
    /// Hashed blocks (of the version's size) the prefix producer looks at and indexes, at most, instead
    /// of the version's window (0: the whole prompt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_prefix_blocks: Option<u32>,
}

/// Parameters of `llm_d_precise` (defaults: llm-d's precise prefix-cache sample configuration).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LlmDPreciseParams {
    #[serde(default = "two")]
    pub prefix_weight: NonNegative,
    #[serde(default = "one")]
    pub queue_weight: NonNegative,
    #[serde(default = "one")]
    pub kv_weight: NonNegative,
    /// Weight of the active-request scorer (requests in flight per worker; 0: not configured).
    #[serde(default)]
    pub active_request_weight: NonNegative,
    /// Weight of the load-aware scorer (the engine's waiting queue against a threshold; 0: not
    /// configured).
    #[serde(default)]
    pub load_aware_weight: NonNegative,
    /// The load-aware scorer's `threshold`: queued requests at which it scores 0.
    #[serde(default = "default_load_threshold")]
    pub load_aware_threshold: PositiveInt,
    /// Prompt blocks the prefix scorer looks at, at most (0: all).
    #[serde(default = "default_precise_window")]
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
/// `QueueThresholdDefault` of llm-d-inference-scheduler's load-aware scorer (v0.3.0 to v0.8.0).
fn default_load_threshold() -> PositiveInt {
    PositiveInt(128)
}
fn default_precise_window() -> u32 {
    2048
}

impl Default for LlmDParams {
    fn default() -> Self {
        LlmDParams {
            version: LlmDVersion::default(),
            prefix_weight: three(),
            queue_weight: two(),
            kv_weight: two(),
            active_request_weight: NonNegative(0.0),
            load_aware_weight: NonNegative(0.0),
            load_aware_threshold: default_load_threshold(),
            max_prefix_blocks: None,
        }
    }
}

impl Default for LlmDPreciseParams {
    fn default() -> Self {
        LlmDPreciseParams {
            prefix_weight: two(),
            queue_weight: one(),
            kv_weight: one(),
            active_request_weight: NonNegative(0.0),
            load_aware_weight: NonNegative(0.0),
            load_aware_threshold: default_load_threshold(),
            max_prefix_blocks: default_precise_window(),
        }
    }
}

impl LlmDParams {
    /// Hashed blocks looked at, at most; `None`: the whole prompt.
    pub fn window_blocks(&self, block_size: u32) -> Option<u32> {
        match self.max_prefix_blocks {
            Some(0) => None,
            Some(n) => Some(n),
            None => Some(self.version.window_blocks(block_size)),
        }
    }

    /// The approximate index's capacity per worker in blocks of `block_size` tokens, for a worker of
    /// `kv_blocks` KV blocks: the LRU holds `kv_blocks` entries (auto-tuned from the engine's
    /// `num_gpu_blocks`), each a hashed block of the version's size.
    pub fn approx_capacity_blocks(&self, kv_blocks: u32, block_size: u32) -> u32 {
        let per_entry = u64::from(self.version.hash_block_tokens(block_size) / block_size.max(1));
        (u64::from(kv_blocks) * per_entry.max(1)).min(u64::from(u32::MAX)) as u32
    }

    /// The leading blocks (of `block_size` tokens) of a prompt the approximate index records when it is
    /// routed: those of the hashed window; `None`: all.
    pub fn indexed_blocks(&self, block_size: u32) -> Option<u32> {
        let per_hash = u64::from(self.version.hash_block_tokens(block_size) / block_size.max(1));
        self.window_blocks(block_size)
            .map(|w| (u64::from(w) * per_hash.max(1)).min(u64::from(u32::MAX)) as u32)
    }
}

/// How the prefix score counts blocks.
#[derive(Clone, Copy, Debug)]
enum PrefixCount {
    /// The approximate producer of a release, possibly with its window overridden.
    Approximate {
        version: LlmDVersion,
        /// `max_prefix_blocks` as configured (`None`: the version's window; 0: no window).
        max_prefix_blocks: Option<u32>,
    },
    /// The precise scorer: the engine's full blocks within `window` (0: all).
    Engine { window: u32 },
}

/// One request's prefix-score denominator and block size.
#[derive(Clone, Copy, Debug)]
struct PrefixScale {
    /// Engine blocks per hashed block.
    per_hash: u32,
    /// Hashed blocks of the prompt within the window.
    total: u32,
}

impl PrefixCount {
    fn scale(self, input: &RouteInput) -> PrefixScale {
        match self {
            PrefixCount::Engine { window } => PrefixScale {
                per_hash: 1,
                total: if window == 0 {
                    input.prompt_blocks
                } else {
                    input.prompt_blocks.min(window)
                },
            },
            PrefixCount::Approximate {
                version,
                max_prefix_blocks,
            } => {
                let bs = input.block_size.max(1);
                let window = match max_prefix_blocks {
                    Some(0) => None,
                    Some(n) => Some(n),
                    None => Some(version.window_blocks(bs)),
                };
                let hash = version.hash_block_tokens(bs);
                let tokens = input.request.prompt_tokens;
                let per_hash = (hash / bs).max(1);
                // Full hashed blocks are made of full engine blocks (the prompt's hashes).
                let blocks = if version.counts_partial_block() {
                    tokens.div_ceil(hash)
                } else {
                    input.prompt_blocks / per_hash
                };
                PrefixScale {
                    per_hash,
                    total: window.map_or(blocks, |w| blocks.min(w)),
                }
            }
        }
    }
}

impl PrefixScale {
    /// The prefix score of a worker the view says holds `overlap` leading engine blocks: hashed blocks
    /// it holds completely, over the prompt's.
    fn score(self, overlap: u32) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        let matched = (overlap / self.per_hash).min(self.total);
        f64::from(matched) / f64::from(self.total)
    }
}

/// llm-d's weighted-scorer scheduler.
#[derive(Debug)]
pub struct LlmD {
    /// Prefix, queue, KV, active-request and load-aware weights.
    weights: [f64; 5],
    /// The load-aware scorer's threshold, in queued requests.
    load_threshold: f64,
    prefix: PrefixCount,
    name: &'static str,
}

impl LlmD {
    /// The `llm_d` preset with `params`.
    pub fn new(params: &LlmDParams) -> Self {
        LlmD {
            weights: [
                params.prefix_weight.0,
                params.queue_weight.0,
                params.kv_weight.0,
                params.active_request_weight.0,
                params.load_aware_weight.0,
            ],
            load_threshold: f64::from(params.load_aware_threshold.0),
            prefix: PrefixCount::Approximate {
                version: params.version,
                max_prefix_blocks: params.max_prefix_blocks,
            },
            name: "llm_d",
        }
    }

    /// The `llm_d_precise` preset with `params`.
    pub fn precise(params: &LlmDPreciseParams) -> Self {
        LlmD {
            weights: [
                params.prefix_weight.0,
                params.queue_weight.0,
                params.kv_weight.0,
                params.active_request_weight.0,
                params.load_aware_weight.0,
            ],
            load_threshold: f64::from(params.load_aware_threshold.0),
            prefix: PrefixCount::Engine {
                window: params.max_prefix_blocks,
            },
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
        let max_active = input.up().map(|w| w.outstanding).max()?;
        let [wp, wq, wk, wa, wl] = self.weights;
        let scale = self.prefix.scale(input);
        let worker = max_score_random_tie(
            input.workers,
            |w| {
                let prefix = scale.score(input.overlap(w.id));
                let queue = if max_q == min_q {
                    1.0
                } else {
                    f64::from(max_q - w.queued) / f64::from(max_q - min_q)
                };
                let kv = 1.0 - w.kv_utilization;
                let active = if w.outstanding == 0 {
                    1.0
                } else {
                    f64::from(max_active - w.outstanding) / f64::from(max_active)
                };
                // 0.5 for an empty queue, falling to 0 at the threshold.
                let load = 0.5
                    * (1.0 - f64::from(w.queued).min(self.load_threshold) / self.load_threshold);
                wp * prefix + wq * queue + wk * kv + wa * active + wl * load
            },
            rng,
        )?;
        Some(Decision {
            worker,
            reason: "highest weighted score (prefix, queue, kv, active requests, load)",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{Request, Segment};
    use crate::rng::from_u64;
    use crate::routing::test_support::{request, route_with, snapshots};
    use crate::time::{SimDuration, SimTime};
    use crate::worker::WorkerSnapshot;

    fn v0_8() -> LlmDParams {
        LlmDParams {
            version: LlmDVersion::V0_8,
            ..Default::default()
        }
    }

    /// v0.8 with the weights prefix, queue, KV, active-request and load-aware, in that order.
    fn weighted([p, q, k, a, l]: [f64; 5]) -> LlmDParams {
        LlmDParams {
            prefix_weight: NonNegative(p),
            queue_weight: NonNegative(q),
            kv_weight: NonNegative(k),
            active_request_weight: NonNegative(a),
            load_aware_weight: NonNegative(l),
            ..v0_8()
        }
    }

    #[test]
    fn default_weighs_prefix_3_queue_2_kv_2() {
        let mut p = LlmD::new(&v0_8());
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
        let mut p = LlmD::new(&LlmDParams {
            max_prefix_blocks: Some(4),
            ..v0_8()
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
        let mut p = LlmD::new(&LlmDParams {
            max_prefix_blocks: Some(0),
            ..v0_8()
        });
        assert_eq!(
            route_with(&mut p, &request(1), &ws, &[4, 10], 10, &mut rng)
                .unwrap()
                .worker,
            1
        );
    }

    /// Routes a prompt of `tokens` tokens (its full 16-token blocks hashed) over `ws` with `overlaps`.
    fn route_tokens(p: &mut LlmD, tokens: u32, ws: &[WorkerSnapshot], overlaps: &[u32]) -> usize {
        let req = Request::new(
            1,
            None,
            SimTime::ZERO,
            1,
            vec![Segment { content: 1, tokens }],
        );
        let hashes: Vec<u64> = (0..u64::from(tokens / 16)).collect();
        let input = RouteInput {
            request: &req,
            prompt_blocks: hashes.len() as u32,
            block_size: 16,
            prompt_hashes: &hashes,
            overlaps,
            prefix_owner: None,
            workers: ws,
            now: SimTime::ZERO,
            load_age: SimDuration::ZERO,
            prefix_sources: None,
            adapters: &[],
        };
        p.route(&input, &mut from_u64(0)).unwrap().worker
    }

    /// `hot-prefix`'s situation: a 4,396-token prompt (274 full 16-token blocks) whose first 256 blocks
    /// (the 4,096-token schema) worker 0 holds; worker 0 has 2 waiting and KV 45% used, worker 1 is idle
    /// and holds nothing, worker 2 has 1 waiting and KV 20% used: queue scores 0, 1, 0.5.
    #[test]
    fn the_v0_8_window_cuts_at_256_blocks_and_v0_10_sees_the_whole_prompt() {
        let mut ws = snapshots(&[0, 0, 0]);
        ws[0].queued = 2;
        ws[0].kv_utilization = 0.45;
        ws[2].queued = 1;
        ws[2].kv_utilization = 0.2;
        let overlaps = [256, 0, 0];
        // v0.8: total = min(274, 256) = 256 blocks; prefix(0) = 1: 3 + 2·0 + 2·0.55 = 4.1 against the
        // idle worker's 0 + 2 + 2 = 4 and worker 2's 0 + 2·0.5 + 2·0.8 = 2.6: worker 0.
        let mut old = LlmD::new(&v0_8());
        assert_eq!(route_tokens(&mut old, 4396, &ws, &overlaps), 0);
        // The same version with the window lifted (0): 256 of 274 blocks, 3·0.934 + 1.1 = 3.90 < 4.
        let mut whole = LlmD::new(&LlmDParams {
            max_prefix_blocks: Some(0),
            ..v0_8()
        });
        assert_eq!(route_tokens(&mut whole, 4396, &ws, &overlaps), 1);
        // v0.10: 64-token blocks, 4,396 tokens = 68 full + 1 partial = 69 blocks (window 2,048); 256
        // engine blocks are 64 hashed ones: 3·64/69 + 1.1 = 3.88 < 4: the idle worker.
        let mut new = LlmD::new(&LlmDParams::default());
        assert_eq!(route_tokens(&mut new, 4396, &ws, &overlaps), 1);
    }

    /// v0.10's 64-token blocks: a prompt of 200 tokens is 12 engine blocks (v0.8: 12 hashed blocks, the
    /// 8-token tail dropped) but 3 full blocks of 64 and a partial one (v0.10: 4). A worker holding 7
    /// engine blocks (112 tokens) holds one full 64-token block.
    #[test]
    fn v0_10_counts_64_token_blocks_and_the_partial_tail() {
        let ws = snapshots(&[0, 0, 0]);
        let score = |params: &LlmDParams, overlap: u32| {
            let req = Request::new(
                1,
                None,
                SimTime::ZERO,
                1,
                vec![Segment {
                    content: 1,
                    tokens: 200,
                }],
            );
            let hashes: Vec<u64> = (0..12).collect();
            let input = RouteInput {
                request: &req,
                prompt_blocks: 12,
                block_size: 16,
                prompt_hashes: &hashes,
                overlaps: &[],
                prefix_owner: None,
                workers: &ws,
                now: SimTime::ZERO,
                load_age: SimDuration::ZERO,
                prefix_sources: None,
                adapters: &[],
            };
            LlmD::new(params).prefix.scale(&input).score(overlap)
        };
        let new = LlmDParams::default();
        assert_eq!(score(&v0_8(), 12), 1.0);
        assert_eq!(score(&new, 12), 0.75, "3 of 4: the tail is never matched");
        assert_eq!(score(&v0_8(), 7), 7.0 / 12.0);
        assert_eq!(score(&new, 7), 0.25);
        assert_eq!(score(&new, 3), 0.0, "48 tokens: no full 64-token block");
        // The decision: worker 0 holds 7 blocks, worker 1 nothing, worker 2 3 blocks; worker 0 has one
        // waiting (queue scores 0, 1, 1). v0.8: worker 0 scores 3·7/12 + 0 + 2 = 3.75, worker 1 4,
        // worker 2 3·3/12 + 2 + 2 = 4.75: worker 2. v0.10: worker 0 scores 0.75 + 2 = 2.75, and worker
        // 2's 3 blocks make no 64-token block: 4, tied with worker 1.
        let mut ws = snapshots(&[0, 0, 0]);
        ws[0].queued = 1;
        let mut old = LlmD::new(&v0_8());
        assert_eq!(route_tokens(&mut old, 200, &ws, &[7, 0, 3]), 2);
        let mut seen = [false; 3];
        let mut p = LlmD::new(&new);
        for seed in 0..32 {
            let req = Request::new(
                1,
                None,
                SimTime::ZERO,
                1,
                vec![Segment {
                    content: 1,
                    tokens: 200,
                }],
            );
            let hashes: Vec<u64> = (0..12).collect();
            let input = RouteInput {
                request: &req,
                prompt_blocks: 12,
                block_size: 16,
                prompt_hashes: &hashes,
                overlaps: &[7, 0, 3],
                prefix_owner: None,
                workers: &ws,
                now: SimTime::ZERO,
                load_age: SimDuration::ZERO,
                prefix_sources: None,
                adapters: &[],
            };
            seen[p.route(&input, &mut from_u64(seed)).unwrap().worker] = true;
        }
        assert_eq!(seen, [false, true, true]);
    }

    /// The approximate index per version: v0.8 holds as many 16-token blocks as the engine and indexes
    /// the first 256 of a prompt; v0.10 holds as many 64-token entries (4× the tokens) and indexes
    /// 131,072 tokens (8,192 blocks of 16).
    #[test]
    fn the_index_is_sized_and_windowed_per_version() {
        let (old, new) = (v0_8(), LlmDParams::default());
        assert_eq!(old.approx_capacity_blocks(26_241, 16), 26_241);
        assert_eq!(new.approx_capacity_blocks(26_241, 16), 104_964);
        assert_eq!(old.indexed_blocks(16), Some(256));
        assert_eq!(new.indexed_blocks(16), Some(8_192));
        assert_eq!(new.window_blocks(16), Some(2_048));
        // Engines with 128-token blocks: v0.10 hashes blocks of 128 (1,024 of them), one entry each.
        assert_eq!(new.window_blocks(128), Some(1_024));
        assert_eq!(new.approx_capacity_blocks(1_000, 128), 1_000);
        let lifted = LlmDParams {
            max_prefix_blocks: Some(0),
            ..new
        };
        assert_eq!(lifted.indexed_blocks(16), None);
    }
    #[test]
    fn the_active_request_scorer_counts_requests_in_flight() {
        // Worker 0 has 4 requests in flight, worker 1 has 1, worker 2 has 3; none is queued and KV is
        // free everywhere, so queue and KV tie and only the active-request term separates them:
        // (4 − 4)/4 = 0, (4 − 1)/4 = 0.75, (4 − 3)/4 = 0.25.
        let ws = snapshots(&[4, 1, 3]);
        let mut rng = from_u64(0);
        let mut p = LlmD::new(&LlmDParams {
            prefix_weight: NonNegative(0.0),
            active_request_weight: NonNegative(1.0),
            ..v0_8()
        });
        for _ in 0..16 {
            let d = route_with(&mut p, &request(1), &ws, &[0, 0, 0], 10, &mut rng).unwrap();
            assert_eq!(d.worker, 1);
        }
        // A worker with nothing in flight scores 1 whatever the others hold.
        let ws = snapshots(&[4, 0, 3]);
        let mut seen = [false; 3];
        for _ in 0..64 {
            let d = route_with(&mut p, &request(1), &ws, &[0, 0, 0], 10, &mut rng).unwrap();
            seen[d.worker] = true;
        }
        assert_eq!(seen, [false, true, false], "the idle worker scores highest");
        // Without the scorer (weight 0, the default) the three tie.
        let mut plain = LlmD::new(&LlmDParams {
            prefix_weight: NonNegative(0.0),
            ..v0_8()
        });
        let mut seen = [false; 3];
        for _ in 0..64 {
            let d = route_with(&mut plain, &request(1), &ws, &[0, 0, 0], 10, &mut rng).unwrap();
            seen[d.worker] = true;
        }
        assert_eq!(seen, [true, true, true]);
    }
    #[test]
    fn the_load_aware_scorer_halves_an_empty_queue_and_floors_at_its_threshold() {
        // Only the load-aware term: queued 0 → 0.5, 64 → 0.5 · (1 − 64/128) = 0.25, 200 → 0 (capped).
        let mut p = LlmD::new(&weighted([0.0, 0.0, 0.0, 0.0, 1.0]));
        let mut rng = from_u64(0);
        let mut ws = snapshots(&[0, 0, 0]);
        for (w, q) in ws.iter_mut().zip([64, 0, 200]) {
            w.queued = q;
        }
        for _ in 0..16 {
            let d = route_with(&mut p, &request(1), &ws, &[0, 0, 0], 10, &mut rng).unwrap();
            assert_eq!(d.worker, 1);
        }
        // At threshold 50, queues of 64 and 200 both score 0 and tie; the empty queue still wins.
        let mut low = LlmD::new(&LlmDParams {
            load_aware_threshold: PositiveInt(50),
            ..weighted([0.0, 0.0, 0.0, 0.0, 1.0])
        });
        ws[1].queued = 10; // 0.5 · (1 − 10/50) = 0.4
        let mut seen = [false; 3];
        for _ in 0..64 {
            let d = route_with(&mut low, &request(1), &ws, &[0, 0, 0], 10, &mut rng).unwrap();
            seen[d.worker] = true;
        }
        assert_eq!(seen, [false, true, false]);
        ws[1].queued = 60;
        let mut seen = [false; 3];
        for _ in 0..64 {
            let d = route_with(&mut low, &request(1), &ws, &[0, 0, 0], 10, &mut rng).unwrap();
            seen[d.worker] = true;
        }
        assert_eq!(
            seen,
            [true, true, true],
            "every queue past the threshold scores 0"
        );
    }
    #[test]
    fn the_active_request_and_load_aware_scores_have_their_sizes() {
        // Against the KV term (weight 1), the sizes decide. Active requests: worker 0 carries the most
        // (4 of 4: score 0) with a free cache (kv 1): 1.0; worker 1 carries 3 (score 0.25) with a
        // fifth of its cache used: 0.25 + 0.8 = 1.05, so worker 1 wins.
        let mut active = LlmD::new(&weighted([0.0, 0.0, 1.0, 1.0, 0.0]));
        let mut rng = from_u64(0);
        let mut ws = snapshots(&[4, 3]);
        ws[1].kv_utilization = 0.2;
        for _ in 0..16 {
            let d = route_with(&mut active, &request(1), &ws, &[0, 0], 10, &mut rng).unwrap();
            assert_eq!(d.worker, 1);
        }
        // Load-aware: 64 queued of a threshold of 128 scores 0.25, so worker 0 (free cache) totals
        // 1.25 against worker 1's 0.5 (empty queue) + 0.6 (40% of its cache used) = 1.1.
        let mut load = LlmD::new(&weighted([0.0, 0.0, 1.0, 0.0, 1.0]));
        let mut ws = snapshots(&[0, 0]);
        ws[0].queued = 64;
        ws[1].kv_utilization = 0.4;
        for _ in 0..16 {
            let d = route_with(&mut load, &request(1), &ws, &[0, 0], 10, &mut rng).unwrap();
            assert_eq!(d.worker, 0);
        }
    }
}
