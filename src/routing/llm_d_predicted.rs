//! `llm_d_predicted`: llm-d's predicted-latency scheduling profile, as its Helm chart enables it
//! (`inferenceExtension.latencyPredictor.enabled`).
//!
//! Followed from `llm-d/llm-d-inference-scheduler` (now `llm-d-router`) at commit 520af478
//! (2026-05-17): the profile in `config/charts/epplib/templates/_config.yaml`, and under
//! `pkg/epp/framework/plugins/`: `requestcontrol/dataproducer/predictedlatency` (features, training on
//! first token and end of stream, headroom = SLO − prediction), `scheduling/filter/prefixcacheaffinity`,
//! `scheduling/filter/sloheadroomtier`, `scheduling/scorer/latency` and `scheduling/picker/weightedrandom`.
//!
//! Per request, for every candidate worker:
//! 1. **Features** (llm-d's `PredictionRequest`): KV-cache utilisation, input tokens, requests waiting,
//!    requests running, prefix-cache score (matched / prompt blocks from the cache view), prefill tokens
//!    in flight (input tokens of requests the gateway sent there whose first token has not come back)
//!    and decode tokens in flight.
//! 2. **Predictions** of TTFT and TPOT in ms by two online models trained on the requests the gateway
//!    routed: a request's features at dispatch on the worker it went to, labelled with its observed TTFT
//!    (first token) and mean TPOT (end of stream). llm-d trains XGBoost models in a sidecar; here each is
//!    a recursive-least-squares linear model ([`super::online_linear`]) with one added feature, the
//!    uncached input `input · (1 − prefix score)`, standing in for the interaction a tree learns (in the
//!    default non-streaming mode the TTFT model learns end-to-end latency instead, see 3). Until
//!    the TTFT model has seen `min_samples` requests the scorer's composite fallback decides
//!    (`kv 1 : queue 1 : prefix 1`, as when llm-d's sidecar is unavailable); until the TPOT model has,
//!    TPOT is neutralised (headroom 0), as llm-d does for untrained TPOT.
//! 3. **Headroom** = target − prediction (the scenario's `[slo]` stands for the per-request SLO headers,
//!    `slo_headers = true`; without a target, headroom = −prediction). `streaming_mode` is llm-d's
//!    `streamingMode`: `false` by default (the plugin's `DefaultConfig`, which the chart does not
//!    override), and then the "TTFT" model is trained at the end of the response on its end-to-end
//!    latency, no TPOT is trained or predicted, and TPOT headroom is 0 for every worker; `true` trains
//!    TTFT on the first streamed chunk and TPOT at the end of the stream.
//! 4. **Filters**, in the chart's order: prefix-cache affinity at 0.99 (keep the workers whose prefix
//!    score reaches it, unless the best of them is predicted more than `max_ttft_penalty` slower than
//!    the best other worker; skipped with probability `affinity_exploration`), the SLO-headroom tier
//!    (keep the workers meeting both targets if any, the others with probability
//!    `negative_exploration`), prefix-cache affinity at 0.80.
//! 5. **Latency scorer**: headroom normalised to [0, 1] within the bucket scored (workers with
//!    positive headroom; else idle workers; else the least severe deficit: TPOT only, TTFT only,
//!    both), blended `ttft_weight : tpot_weight`, scored towards the least headroom (`strategy =
//!    "least"`, llm-d's default, bin-packing) or the most, as `int(99 · s) + 1` out of 100.
//! 6. **Weighted random picker**: a worker drawn with probability proportional to its score.

use rand::Rng;
use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Serialize};

use super::in_flight::InFlight;
use super::online_linear::OnlineLinear;
use super::{Decision, FleetInfo, LatencyTargets, Observation, RouteInput, Routed, RoutingPolicy};
use crate::config::{Fraction, NonNegative};
use crate::rng::SimRng;
use crate::time::{SimDuration, SimTime};
use crate::worker::WorkerSnapshot;

/// Which end of the headroom the latency scorer prefers.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum HeadroomStrategy {
    /// Closest to the SLO (packs load, keeps idle workers free): llm-d's default.
    #[default]
    Least,
    /// The most headroom (spreads load).
    Most,
}

/// Parameters of `llm_d_predicted` (defaults: llm-d's plugin defaults).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LlmDPredictedParams {
    /// Latency scorer's TTFT weight (`ttftWeight`).
    #[serde(default = "ttft_weight")]
    pub ttft_weight: NonNegative,
    /// Latency scorer's TPOT weight (`tpotWeight`).
    #[serde(default = "tpot_weight")]
    pub tpot_weight: NonNegative,
    /// `headroomSelectionStrategy`.
    #[serde(default)]
    pub strategy: HeadroomStrategy,
    /// The first affinity filter's `affinityThreshold`.
    #[serde(default = "strict")]
    pub strict_affinity: Fraction,
    /// The second affinity filter's `affinityThreshold`.
    #[serde(default = "loose")]
    pub loose_affinity: Fraction,
    /// `explorationProbability` of the affinity filters.
    #[serde(default = "one_percent")]
    pub affinity_exploration: Fraction,
    /// `maxTTFTPenaltyMs` of the affinity filters (0: always stick).
    #[serde(default = "max_penalty")]
    pub max_ttft_penalty: SimDuration,
    /// `epsilonExploreNeg` of the SLO-headroom tier filter.
    #[serde(default = "one_percent")]
    pub negative_exploration: Fraction,
    /// Requests the TTFT (and, separately, the TPOT) model learns from before its predictions are used.
    #[serde(default = "min_samples")]
    pub min_samples: u32,
    /// Forgetting factor of the online models (1: remember everything equally).
    #[serde(default = "forgetting")]
    pub forgetting: Fraction,
    /// Prompt blocks the prefix producer hashes and indexes, at most (0: all): 256 blocks of the
    /// engine's size at commit 520af478 (`defaultMaxPrefixBlocks`).
    #[serde(default = "max_prefix_blocks")]
    pub max_prefix_blocks: u32,
    /// llm-d's `streamingMode`: `false` (the default) trains the TTFT model on end-to-end latency at
    /// the end of each response and models no TPOT; `true` trains TTFT at the first token and TPOT at
    /// the end.
    #[serde(default)]
    pub streaming_mode: bool,
    /// Whether requests carry the scenario's `[slo]` as SLO headers. Without them llm-d's headroom is
    /// `−prediction` for every worker, so the scorer's negative-headroom path picks idle workers first,
    /// then the lowest predicted latency.
    #[serde(default = "crate::config::yes")]
    pub slo_headers: bool,
}

fn ttft_weight() -> NonNegative {
    NonNegative(0.8)
}
fn tpot_weight() -> NonNegative {
    NonNegative(0.2)
}
fn strict() -> Fraction {
    Fraction(0.99)
}
fn loose() -> Fraction {
    Fraction(0.80)
}
fn one_percent() -> Fraction {
    Fraction(0.01)
}
fn max_penalty() -> SimDuration {
    SimDuration::from_secs(5)
}
fn min_samples() -> u32 {
    100
}
fn forgetting() -> Fraction {
    Fraction(0.999)
}
fn max_prefix_blocks() -> u32 {
    256
}

impl Default for LlmDPredictedParams {
    fn default() -> Self {
        LlmDPredictedParams {
            ttft_weight: ttft_weight(),
            tpot_weight: tpot_weight(),
            strategy: HeadroomStrategy::default(),
            strict_affinity: strict(),
            loose_affinity: loose(),
            affinity_exploration: one_percent(),
            max_ttft_penalty: max_penalty(),
            negative_exploration: one_percent(),
            min_samples: min_samples(),
            forgetting: forgetting(),
            max_prefix_blocks: max_prefix_blocks(),
            streaming_mode: false,
            slo_headers: crate::config::yes(),
        }
    }
}

impl LlmDPredictedParams {
    /// Leading engine blocks of a routed prompt the prefix producer indexes (`None`: all).
    pub fn indexed_blocks(&self) -> Option<u32> {
        (self.max_prefix_blocks > 0).then_some(self.max_prefix_blocks)
    }
}

const FEATURES: usize = 8;
/// Initial covariance of the online models (a weak prior towards zero weights).
const PRIOR: f64 = 1e4;

/// One worker's features and predictions for the request being routed.
#[derive(Clone, Copy, Debug, Default)]
struct Candidate {
    prefix: f64,
    ttft_x: [f64; FEATURES],
    tpot_x: [f64; FEATURES],
    ttft_ms: f64,
    ttft_headroom: f64,
    tpot_headroom: f64,
}

/// A routed request waiting for its labels.
#[derive(Clone, Copy, Debug)]
struct Pending {
    ttft_x: [f64; FEATURES],
    tpot_x: [f64; FEATURES],
    routed_at: SimTime,
    first_token: Option<SimTime>,
}

/// The `llm_d_predicted` policy.
#[derive(Debug)]
pub struct LlmDPredicted {
    params: LlmDPredictedParams,
    targets: LatencyTargets,
    ttft_model: OnlineLinear,
    tpot_model: OnlineLinear,
    ledger: InFlight,
    pending: HashMap<u64, Pending>,
    /// Per worker, the candidate computed by the last `route` (read by `on_routed`).
    last: Vec<Candidate>,
}

impl LlmDPredicted {
    pub fn new(params: LlmDPredictedParams) -> Self {
        let lambda = params.forgetting.0.max(0.5);
        LlmDPredicted {
            params,
            targets: LatencyTargets::default(),
            ttft_model: OnlineLinear::new(FEATURES, lambda, PRIOR),
            tpot_model: OnlineLinear::new(FEATURES, lambda, PRIOR),
            ledger: InFlight::default(),
            pending: HashMap::default(),
            last: Vec::new(),
        }
    }

    fn trained(&self, m: &OnlineLinear) -> bool {
        m.samples() >= u64::from(self.params.min_samples)
    }

    /// The features of `input`'s request on `w` with prefix score `prefix`.
    fn features(
        &self,
        input: &RouteInput,
        w: &WorkerSnapshot,
        prefix: f64,
    ) -> ([f64; FEATURES], [f64; FEATURES]) {
        let l = self.ledger.load(w.id);
        let input_k = f64::from(input.request.prompt_tokens) / 1e3;
        let base = [
            1.0,
            w.kv_utilization,
            input_k,
            f64::from(w.queued),
            f64::from(w.running),
            prefix,
            l.prefill_tokens as f64 / 1e3,
        ];
        let mut ttft = [0.0; FEATURES];
        ttft[..7].copy_from_slice(&base);
        ttft[7] = input_k * (1.0 - prefix);
        let mut tpot = [0.0; FEATURES];
        tpot[..7].copy_from_slice(&base);
        tpot[7] = l.decode_context_tokens as f64 / 1e3;
        (ttft, tpot)
    }

    /// The prefix-cache affinity filter: keeps the candidates at or above `threshold`.
    fn affinity(
        &self,
        cands: Vec<usize>,
        threshold: f64,
        c: &[Candidate],
        rng: &mut SimRng,
    ) -> Vec<usize> {
        if rng.random::<f64>() < self.params.affinity_exploration.0 {
            return cands;
        }
        let (sticky, other): (Vec<usize>, Vec<usize>) =
            cands.iter().partition(|&&w| c[w].prefix >= threshold);
        if sticky.is_empty() || other.is_empty() {
            return cands;
        }
        let penalty_ms = self.params.max_ttft_penalty.as_secs_f64() * 1e3;
        if penalty_ms > 0.0 {
            let best = |set: &[usize]| {
                set.iter()
                    .map(|&w| c[w].ttft_ms)
                    .fold(f64::INFINITY, f64::min)
            };
            if best(&sticky) - best(&other) > penalty_ms {
                return cands;
            }
        }
        sticky
    }

    /// The SLO-headroom tier filter.
    fn tier(&self, cands: Vec<usize>, c: &[Candidate], rng: &mut SimRng) -> Vec<usize> {
        let (pos, neg): (Vec<usize>, Vec<usize>) = cands
            .iter()
            .partition(|&&w| c[w].ttft_headroom >= 0.0 && c[w].tpot_headroom >= 0.0);
        if pos.is_empty() || neg.is_empty() {
            return cands;
        }
        if rng.random::<f64>() < self.params.negative_exploration.0 {
            neg
        } else {
            pos
        }
    }

    /// The latency scorer: a score in (0, 1] per candidate.
    fn scores(&self, cands: &[usize], c: &[Candidate], ws: &[WorkerSnapshot]) -> Vec<(usize, f64)> {
        let (pos, neg): (Vec<usize>, Vec<usize>) = cands
            .iter()
            .partition(|&&w| c[w].ttft_headroom >= 0.0 && c[w].tpot_headroom >= 0.0);
        if !pos.is_empty() {
            return self.score_bucket(&pos, c, self.params.strategy);
        }
        let idle: Vec<usize> = neg
            .iter()
            .copied()
            .filter(|&w| ws[w].outstanding == 0)
            .collect();
        if !idle.is_empty() {
            return self.score_bucket(&idle, c, HeadroomStrategy::Least);
        }
        let bucket = |ttft_neg: bool, tpot_neg: bool| -> Vec<usize> {
            neg.iter()
                .copied()
                .filter(|&w| {
                    (c[w].ttft_headroom < 0.0) == ttft_neg && (c[w].tpot_headroom < 0.0) == tpot_neg
                })
                .collect()
        };
        for b in [bucket(false, true), bucket(true, false), bucket(true, true)] {
            if !b.is_empty() {
                return self.score_bucket(&b, c, HeadroomStrategy::Least);
            }
        }
        self.score_bucket(&neg, c, HeadroomStrategy::Least)
    }

    fn score_bucket(
        &self,
        bucket: &[usize],
        c: &[Candidate],
        strategy: HeadroomStrategy,
    ) -> Vec<(usize, f64)> {
        const EPS: f64 = 1e-9;
        let (a, b) = (self.params.ttft_weight.0, self.params.tpot_weight.0);
        let (mut alpha, mut beta) = if a + b > 0.0 {
            (a / (a + b), b / (a + b))
        } else {
            (0.5, 0.5)
        };
        let range = |f: &dyn Fn(usize) -> f64| {
            bucket
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &w| {
                    (lo.min(f(w)), hi.max(f(w)))
                })
        };
        let (t_lo, t_hi) = range(&|w| c[w].ttft_headroom.abs());
        let (p_lo, p_hi) = range(&|w| c[w].tpot_headroom.abs());
        let (t_range, p_range) = (t_hi - t_lo, p_hi - p_lo);
        if t_range <= EPS && p_range > EPS {
            (alpha, beta) = (0.0, 1.0);
        } else if p_range <= EPS && t_range > EPS {
            (alpha, beta) = (1.0, 0.0);
        }
        bucket
            .iter()
            .map(|&w| {
                let nt = if t_range > EPS {
                    (c[w].ttft_headroom.abs() - t_lo) / t_range
                } else {
                    0.5
                };
                let np = if p_range > EPS {
                    (c[w].tpot_headroom.abs() - p_lo) / p_range
                } else {
                    0.5
                };
                let combined = alpha * nt + beta * np;
                let s = match strategy {
                    HeadroomStrategy::Most => combined,
                    HeadroomStrategy::Least => 1.0 - combined,
                };
                (w, ((s * 99.0).floor() + 1.0) / 100.0)
            })
            .collect()
    }

    /// The scorer's composite fallback (no predictions): `kv 1 : queue 1 : prefix 1`.
    fn composite(
        &self,
        cands: &[usize],
        c: &[Candidate],
        ws: &[WorkerSnapshot],
    ) -> Vec<(usize, f64)> {
        let max_q = cands.iter().map(|&w| ws[w].queued).max().unwrap_or(0);
        cands
            .iter()
            .map(|&w| {
                let q = if max_q > 0 {
                    f64::from(max_q - ws[w].queued) / f64::from(max_q)
                } else {
                    1.0
                };
                let s = ((1.0 - ws[w].kv_utilization) + q + c[w].prefix) / 3.0;
                (w, (1.0 + 99.0 * s).round() / 100.0)
            })
            .collect()
    }
}

/// A candidate drawn with probability proportional to its score (uniformly if none is positive).
fn weighted_pick(scores: &[(usize, f64)], rng: &mut SimRng) -> Option<usize> {
    let total: f64 = scores.iter().map(|&(_, s)| s.max(0.0)).sum();
    if scores.is_empty() {
        return None;
    }
    if total <= 0.0 {
        return Some(scores[rng.random_range(0..scores.len())].0);
    }
    let mut x = rng.random::<f64>() * total;
    for &(w, s) in scores {
        x -= s.max(0.0);
        if x < 0.0 {
            return Some(w);
        }
    }
    scores.last().map(|&(w, _)| w)
}

impl RoutingPolicy for LlmDPredicted {
    fn name(&self) -> &'static str {
        "llm_d_predicted"
    }

    fn needs_cache_view(&self) -> bool {
        true
    }

    fn on_fleet(&mut self, fleet: &FleetInfo) {
        self.targets = fleet.targets;
        self.ledger = InFlight::new(fleet.workers.len());
    }

    fn route(&mut self, input: &RouteInput, rng: &mut SimRng) -> Option<Decision> {
        let cap = match self.params.max_prefix_blocks {
            0 => u32::MAX,
            n => n,
        };
        let blocks = input.prompt_blocks.min(cap);
        let predicting = self.trained(&self.ttft_model);
        let tpot_trained = self.trained(&self.tpot_model);
        let headers = self.params.slo_headers;
        let ttft_slo = self
            .targets
            .ttft
            .filter(|_| headers)
            .map(|d| d.as_secs_f64() * 1e3);
        let tpot_slo = self
            .targets
            .tpot
            .filter(|_| headers)
            .map(|d| d.as_secs_f64() * 1e3);
        self.last.clear();
        for w in input.workers {
            let prefix = if blocks == 0 {
                0.0
            } else {
                f64::from(input.overlap(w.id).min(blocks)) / f64::from(blocks)
            };
            let (ttft_x, tpot_x) = self.features(input, w, prefix);
            let ttft_ms = self.ttft_model.predict(&ttft_x).max(0.0);
            let tpot_ms = self.tpot_model.predict(&tpot_x).max(0.0);
            // Without streaming no TPOT is trained: llm-d neutralises it (headroom 0, valid).
            let tpot_headroom = if self.params.streaming_mode && tpot_trained {
                tpot_slo.unwrap_or(0.0) - tpot_ms
            } else {
                0.0
            };
            self.last.push(Candidate {
                prefix,
                ttft_x,
                tpot_x,
                ttft_ms,
                ttft_headroom: ttft_slo.unwrap_or(0.0) - ttft_ms,
                tpot_headroom,
            });
        }
        let up: Vec<usize> = input.up().map(|w| w.id).collect();
        if up.is_empty() {
            return None;
        }
        let c = &self.last;
        let (scores, reason) = if predicting {
            let cands = self.affinity(up, self.params.strict_affinity.0, c, rng);
            let cands = self.tier(cands, c, rng);
            let cands = self.affinity(cands, self.params.loose_affinity.0, c, rng);
            (
                self.scores(&cands, c, input.workers),
                "predicted-latency headroom (llm-d latency scorer)",
            )
        } else {
            (
                self.composite(&up, c, input.workers),
                "composite kv/queue/prefix (latency predictor still training)",
            )
        };
        let worker = weighted_pick(&scores, rng)?;
        Some(Decision { worker, reason })
    }

    fn on_routed(&mut self, r: &Routed) {
        self.ledger.routed(
            r.request.id,
            r.worker,
            r.request.prompt_tokens,
            r.request.prompt_tokens,
            r.prompt_hashes.len() as u32,
            r.now,
        );
        if let Some(c) = self.last.get(r.worker) {
            self.pending.insert(
                r.request.id,
                Pending {
                    ttft_x: c.ttft_x,
                    tpot_x: c.tpot_x,
                    routed_at: r.now,
                    first_token: None,
                },
            );
        }
    }

    fn on_observed(&mut self, obs: &Observation) {
        match *obs {
            Observation::FirstToken { request, at, .. } => {
                self.ledger.first_token(request, at);
                if let Some(p) = self.pending.get_mut(&request)
                    && p.first_token.is_none()
                {
                    p.first_token = Some(at);
                    if self.params.streaming_mode {
                        let ms = (at - p.routed_at).as_secs_f64() * 1e3;
                        self.ttft_model.update(&p.ttft_x, ms);
                    }
                }
            }
            Observation::Finished {
                request,
                at,
                output_tokens,
                ..
            } => {
                self.ledger.remove(request);
                let Some(p) = self.pending.remove(&request) else {
                    return;
                };
                if !self.params.streaming_mode {
                    // The whole response arrives at once: its latency is what llm-d records as TTFT.
                    let ms = (at - p.routed_at).as_secs_f64() * 1e3;
                    self.ttft_model.update(&p.ttft_x, ms);
                } else if let Some(first) = p.first_token
                    && output_tokens > 1
                {
                    let ms = (at - first).as_secs_f64() * 1e3 / f64::from(output_tokens - 1);
                    self.tpot_model.update(&p.tpot_x, ms);
                }
            }
        }
    }

    fn on_request_failed(&mut self, request: u64, _worker: usize) {
        self.ledger.remove(request);
        self.pending.remove(&request);
    }

    fn on_worker_down(&mut self, worker: usize) {
        self.ledger.clear_worker(worker);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{Request, Segment};
    use crate::routing::test_support::snapshots;

    fn request(id: u64, tokens: u32) -> Request {
        Request::new(
            id,
            None,
            SimTime::ZERO,
            10,
            vec![Segment {
                content: id,
                tokens,
            }],
        )
    }

    fn input<'a>(req: &'a Request, ws: &'a [WorkerSnapshot], hashes: &'a [u64]) -> RouteInput<'a> {
        RouteInput {
            request: req,
            prompt_blocks: hashes.len() as u32,
            block_size: 16,
            prompt_hashes: hashes,
            overlaps: &[],
            prefix_owner: None,
            workers: ws,
            now: SimTime::ZERO,
            load_age: SimDuration::ZERO,
            prefix_sources: None,
            adapters: &[],
        }
    }

    /// Trains the TTFT model on a law where each waiting request costs 100 ms on top of 20 ms, then
    /// checks that the scheduler learned it: with targets of 250 ms, a worker with 5 waiting is
    /// predicted over (520 ms), one with 1 waiting within (120 ms), and only the latter is chosen.
    #[test]
    fn learns_ttft_from_observations_and_routes_on_headroom() {
        let mut p = LlmDPredicted::new(LlmDPredictedParams {
            min_samples: 50,
            ..Default::default()
        });
        let ts = vec![];
        p.on_fleet(&FleetInfo {
            workers: &ts,
            targets: LatencyTargets {
                ttft: Some(SimDuration::from_millis(250)),
                tpot: None,
            },
        });
        let hashes: Vec<u64> = (0..10).collect();
        let mut rng = crate::rng::from_u64(3);
        for i in 0..200u64 {
            let mut ws = snapshots(&[0]);
            ws[0].queued = (i % 7) as u32;
            let r = request(i, 160);
            let d = p.route(&input(&r, &ws, &hashes), &mut rng).unwrap();
            p.on_routed(&Routed {
                request: &r,
                worker: d.worker,
                prompt_hashes: &hashes,
                overlap: 0,
                block_size: 16,
                now: SimTime::ZERO,
            });
            let ttft_ms = 20 + 100 * (i % 7);
            p.on_observed(&Observation::FirstToken {
                request: i,
                worker: 0,
                at: SimTime(ttft_ms * 1_000_000),
            });
            p.on_observed(&Observation::Finished {
                request: i,
                worker: 0,
                at: SimTime(ttft_ms * 1_000_000),
                output_tokens: 1,
            });
        }
        let mut ws = snapshots(&[0, 0]);
        ws[0].queued = 5;
        ws[1].queued = 1;
        let r = request(1000, 160);
        let d = p.route(&input(&r, &ws, &hashes), &mut rng).unwrap();
        assert!((p.last[0].ttft_ms - 520.0).abs() < 1.0, "{:?}", p.last[0]);
        assert!((p.last[1].ttft_ms - 120.0).abs() < 1.0, "{:?}", p.last[1]);
        assert_eq!(
            d.reason,
            "predicted-latency headroom (llm-d latency scorer)"
        );
        // The tier filter keeps worker 1 unless it explores (1%): over 100 draws worker 1 dominates.
        let mut ones = 0;
        for _ in 0..100 {
            ones += usize::from(p.route(&input(&r, &ws, &hashes), &mut rng).unwrap().worker == 1);
        }
        assert!(ones >= 95, "{ones}");
    }

    /// The training signal per mode, on one law: a request's first token comes back 20 ms + 100 ms per
    /// waiting request after routing, its last 500 ms later (51 tokens: TPOT 10 ms). Targets: TTFT
    /// 700 ms, TPOT 50 ms. Workers 0, 1, 2 have 0, 1 and 5 waiting.
    ///
    /// - Streaming: TTFT predicted 20, 120, 520 ms, all within 700 (headroom 680, 580, 180); TPOT 10 ms
    ///   everywhere (headroom 40, equal, so the scorer weighs TTFT alone). `least` packs: worker 2
    ///   scores 1.0, worker 1 (580 − 180) / 500 = 0.8 → 1 − 0.8 = 0.2 → 0.20, worker 0 0.01: worker 2
    ///   is drawn with probability 1 / 1.21 = 0.83.
    /// - Non-streaming (llm-d's default): the model learns end-to-end latency, 520, 620, 1,020 ms;
    ///   worker 2 is over the 700 ms target and the tier filter drops it (but for its 1% exploration);
    ///   of workers 0 and 1 (headroom 180, 80) `least` picks worker 1 (score 1.0 against 0.01).
    #[test]
    fn streaming_mode_decides_what_the_ttft_model_learns() {
        let hashes: Vec<u64> = (0..10).collect();
        let run = |streaming_mode: bool| {
            let mut p = LlmDPredicted::new(LlmDPredictedParams {
                min_samples: 50,
                streaming_mode,
                ..Default::default()
            });
            let ts = vec![];
            p.on_fleet(&FleetInfo {
                workers: &ts,
                targets: LatencyTargets {
                    ttft: Some(SimDuration::from_millis(700)),
                    tpot: Some(SimDuration::from_millis(50)),
                },
            });
            let mut rng = crate::rng::from_u64(5);
            for i in 0..200u64 {
                let mut ws = snapshots(&[0]);
                ws[0].queued = (i % 7) as u32;
                let r = request(i, 160);
                let d = p.route(&input(&r, &ws, &hashes), &mut rng).unwrap();
                p.on_routed(&Routed {
                    request: &r,
                    worker: d.worker,
                    prompt_hashes: &hashes,
                    overlap: 0,
                    block_size: 16,
                    now: SimTime::ZERO,
                });
                let first_ms = 20 + 100 * (i % 7);
                p.on_observed(&Observation::FirstToken {
                    request: i,
                    worker: 0,
                    at: SimTime(first_ms * 1_000_000),
                });
                p.on_observed(&Observation::Finished {
                    request: i,
                    worker: 0,
                    at: SimTime((first_ms + 500) * 1_000_000),
                    output_tokens: 51,
                });
            }
            let mut ws = snapshots(&[0, 0, 0]);
            ws[0].queued = 0;
            ws[1].queued = 1;
            ws[2].queued = 5;
            for w in &mut ws {
                w.outstanding = w.queued + 1;
            }
            let r = request(1000, 160);
            let mut picks = [0u32; 3];
            for _ in 0..200 {
                picks[p.route(&input(&r, &ws, &hashes), &mut rng).unwrap().worker] += 1;
            }
            let ttft: Vec<f64> = p.last.iter().map(|c| c.ttft_ms).collect();
            let tpot: Vec<f64> = p.last.iter().map(|c| c.tpot_headroom).collect();
            (ttft, tpot, picks)
        };
        let near =
            |got: &[f64], want: [f64; 3]| got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1.0);
        let (ttft, tpot, picks) = run(true);
        assert!(near(&ttft, [20.0, 120.0, 520.0]), "{ttft:?}");
        assert!(near(&tpot, [40.0, 40.0, 40.0]), "{tpot:?}");
        assert!(picks[2] > 140, "streaming packs onto worker 2: {picks:?}");
        let (ttft, tpot, picks) = run(false);
        assert!(near(&ttft, [520.0, 620.0, 1020.0]), "{ttft:?}");
        assert_eq!(tpot, [0.0, 0.0, 0.0], "no TPOT model without streaming");
        assert!(picks[1] > 185, "non-streaming: worker 1: {picks:?}");
        assert!(picks[2] < 6, "worker 2 only by exploration: {picks:?}");
    }

    #[test]
    fn before_training_the_composite_fallback_decides() {
        let mut p = LlmDPredicted::new(LlmDPredictedParams::default());
        let ws = snapshots(&[0, 0]);
        let r = request(1, 160);
        let hashes: Vec<u64> = (0..10).collect();
        let d = p
            .route(&input(&r, &ws, &hashes), &mut crate::rng::from_u64(1))
            .unwrap();
        assert_eq!(
            d.reason,
            "composite kv/queue/prefix (latency predictor still training)"
        );
    }

    #[test]
    fn least_strategy_prefers_the_smallest_headroom_and_most_the_largest() {
        let p = LlmDPredicted::new(LlmDPredictedParams::default());
        let c = [
            Candidate {
                ttft_headroom: 100.0,
                ..Default::default()
            },
            Candidate {
                ttft_headroom: 300.0,
                ..Default::default()
            },
        ];
        // TPOT headroom is equal (0): its weight goes to TTFT; |h| normalised to 0 and 1.
        let least = p.score_bucket(&[0, 1], &c, HeadroomStrategy::Least);
        assert_eq!(least, [(0, 1.0), (1, 0.01)]);
        let most = p.score_bucket(&[0, 1], &c, HeadroomStrategy::Most);
        assert_eq!(most, [(0, 0.01), (1, 1.0)]);
    }
}
