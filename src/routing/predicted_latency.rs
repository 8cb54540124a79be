//! `predicted_latency`: for every candidate worker, predict the request's time to first token and its
//! time per output token with that worker's own step model, and send it where the prediction is best
//! against the latency targets.
//!
//! - **TTFT** = the prompt tokens queued ahead of it on the worker (the gateway's own ledger of requests
//!   sent there whose first token has not come back, [`super::in_flight`]) plus its own uncached prompt
//!   (prompt minus the prefix the cache view says the worker holds, [`prefix_cost`]), run through the
//!   worker's step model in chunks of `max_num_batched_tokens` that share each step with the running
//!   decodes; plus half a decode step for the step in flight; plus, when the worker's KV memory or
//!   sequence slots cannot take the request, a wait for running requests to finish (the worker's mean
//!   observed decode time, scaled by the shortfall).
//! - **Copies elsewhere** (`price_copies`, on by default): where the fleet has KV tiers or peer
//!   transfer, the prefix past what the worker's GPU holds may instead be loaded from its host or disk
//!   tier or the shared store, or pulled from another worker's GPU ([`best_copy`]); the cheapest of
//!   recomputing and each copy ([`crate::tiers::pricing::cost_to_place`], with the TTFT above as the
//!   compute cost) wins, and a chosen copy adds its idle-link load time to TTFT.
//! - **TPOT** = one decode step of the running batch with this request added.
//! - **Choice**: the worker with the lowest `ttft / ttft_target + tpot_weight · tpot / tpot_target`
//!   among those predicted to meet both targets (the scenario's `[slo]`; 1 s and 100 ms where it sets
//!   none); if none is, the lowest such cost overall. Ties are drawn at random.
//! - **Stale signals**: the engines' published numbers (running batch, KV blocks in use) are aged by
//!   the time since they were published (`load_refresh`): their weight is `0.5^(age / signal_half_life)`,
//!   the rest comes from the gateway's own ledger (requests decoding, their prompt blocks), which is
//!   never stale but blind to what only the engine knows (preemptions, shared blocks).
//!   `signal_half_life = "0s"` uses the ledger alone.
//!
//! Only what a router has: the workers' profiles (deployment facts), the cache view's overlaps, the
//! engines' published metrics, its own record of what it sent and saw come back, and (for copies) the
//! tiers' contents and link speeds ([`super::PrefixSources`]), not the links' queues.

use serde::{Deserialize, Serialize};

use super::in_flight::{InFlight, WorkerLoad};
use super::pick::max_score_random_tie;
use super::{
    Decision, FleetInfo, LatencyTargets, Observation, PrefixSources, RouteInput, Routed,
    RoutingPolicy, WorkerProfile,
};
use crate::config::NonNegative;
use crate::hardware::StepShape;
use crate::rng::SimRng;
use crate::tiers::pricing::{PrefixOffer, PrefixSource, cost_to_place};
use crate::time::SimDuration;
use crate::worker::WorkerSnapshot;

/// Parameters of `predicted_latency`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PredictedLatencyParams {
    /// Weight of the TPOT term (relative to its target) against the TTFT term.
    #[serde(default = "one")]
    pub tpot_weight: NonNegative,
    /// Age at which the engines' published load numbers count half (the other half from the gateway's
    /// own ledger); `"0s"`: ignore them.
    #[serde(default = "default_half_life")]
    pub signal_half_life: SimDuration,
    /// Whether a copy of the prompt's prefix in a lower KV tier or on another worker's GPU (with
    /// `[interconnect] peer_transfer`) is priced at its load or transfer time ([`best_copy`]);
    /// `false`: only the GPU prefix counts, everything else is recomputed.
    #[serde(default = "crate::config::yes")]
    pub price_copies: bool,
}

fn one() -> NonNegative {
    NonNegative(1.0)
}
fn default_half_life() -> SimDuration {
    SimDuration::from_secs(1)
}

impl Default for PredictedLatencyParams {
    fn default() -> Self {
        PredictedLatencyParams {
            tpot_weight: one(),
            signal_half_life: default_half_life(),
            price_copies: crate::config::yes(),
        }
    }
}

/// A worker's load as the policy estimates it for one prediction.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LoadEstimate {
    /// Prompt tokens the worker must compute before this request's (requests sent earlier still
    /// waiting for their first token).
    pub prefill_tokens_ahead: f64,
    /// Requests sent earlier waiting for their first token (they will take sequence slots).
    pub prefilling: f64,
    /// Sequences in the running batch, each decoding one token per step.
    pub batch: f64,
    /// Mean context tokens of a sequence in the running batch.
    pub batch_context_tokens: f64,
    /// KV blocks in use.
    pub used_blocks: f64,
}

/// A prediction for one worker.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prediction {
    pub ttft_s: f64,
    pub tpot_s: f64,
}

/// The prompt tokens a worker must compute for a prompt of `prompt_tokens` whose first `cached_blocks`
/// blocks of `block_size` it holds in GPU memory. At least one token is always computed (the engine
/// recomputes the last prompt token to sample the first output token).
///
/// `cached_blocks` is the GPU prefix the view knows, plus any blocks the route expects to load from a
/// tier or a peer ([`best_copy`], priced against recomputing by
/// [`crate::tiers::pricing::cost_to_place`]).
pub fn prefix_cost(prompt_tokens: u32, cached_blocks: u32, block_size: u32) -> (u32, u32) {
    let cached = (u64::from(cached_blocks) * u64::from(block_size))
        .min(u64::from(prompt_tokens.saturating_sub(1))) as u32;
    (cached, prompt_tokens - cached)
}

/// Predicts TTFT and TPOT of a request of `prompt_tokens`, `cached_tokens` of them cached, on a worker
/// of `profile` loaded as `load`; `drain_s` is the worker's mean time from a request's first token to
/// its end (the wait for memory or a sequence slot to free up), 0 when unknown.
pub fn predict(
    profile: &WorkerProfile,
    load: &LoadEstimate,
    prompt_tokens: u32,
    cached_tokens: u32,
    drain_s: f64,
) -> Prediction {
    let perf = &profile.perf;
    let max_seqs = u64::from(profile.max_num_seqs.max(1));
    let decodes = (load.batch.max(0.0).round() as u64).min(max_seqs - 1);
    let ctx = load.batch_context_tokens.max(0.0).round() as u64;
    let mut decode_shape = StepShape::default();
    for _ in 0..decodes {
        decode_shape.add(1, ctx);
    }
    let per_step = u64::from(profile.max_num_batched_tokens)
        .saturating_sub(decodes)
        .max(1);
    let cached = u64::from(cached_tokens.min(prompt_tokens.saturating_sub(1)));
    let mine = (u64::from(prompt_tokens) - cached).max(1);
    let mut ahead = load.prefill_tokens_ahead.max(0.0).round() as u64;

    let mut ttft = 0.0;
    if decodes > 0 {
        // The step in flight: on average half of it is left.
        ttft += 0.5 * perf.step_seconds(&decode_shape);
    }
    let mut done = 0u64;
    while done < mine {
        let mut shape = decode_shape;
        let mut room = per_step;
        if ahead > 0 {
            let n = ahead.min(room);
            shape.add(n, 0);
            ahead -= n;
            room -= n;
        }
        if room > 0 {
            let n = (mine - done).min(room);
            shape.add(n, cached + done);
            done += n;
        }
        ttft += perf.step_seconds(&shape);
    }

    // Waiting for memory or a sequence slot: running requests must finish first.
    let bs = u64::from(profile.block_size.max(1));
    let need = (u64::from(prompt_tokens).div_ceil(bs)).saturating_sub(cached / bs) as f64;
    let free = f64::from(profile.total_blocks) - load.used_blocks;
    let mut short = 0.0f64;
    if need > free {
        short = short.max(((need - free) / load.used_blocks.max(1.0)).min(1.0));
    }
    let seqs_after = load.batch + load.prefilling + 1.0;
    if seqs_after > max_seqs as f64 {
        short = short.max(((seqs_after - max_seqs as f64) / (load.batch + 1.0)).min(1.0));
    }
    ttft += short * drain_s;

    let batch_after = ((decodes + 1).min(max_seqs)) as f64;
    let mean_ctx = (load.batch_context_tokens.max(0.0) * decodes as f64 + f64::from(prompt_tokens))
        / (decodes as f64 + 1.0);
    let tpot = perf.decode_step_seconds(batch_after as u64, mean_ctx.round() as u64);
    Prediction {
        ttft_s: ttft,
        tpot_s: tpot,
    }
}

/// Every copy of the prompt's blocks past the `local` prefix worker `w`'s GPU holds (as the router's
/// view knows it) that could be moved there instead of recomputed: the worker's own lower tiers and
/// the shared store (from `sources`), and each live worker whose GPU the view says holds a longer
/// prefix (over the interconnect, when peer transfer is on). Times are on idle links.
pub fn best_copy(input: &RouteInput, w: usize, sources: &dyn PrefixSources) -> Vec<PrefixOffer> {
    let local = input.overlap(w) as usize;
    let after = input.prompt_hashes.get(local..).unwrap_or(&[]);
    if after.is_empty() {
        return Vec::new();
    }
    let mut offers = sources.tier_offers(w, after);
    for v in input.up() {
        let theirs = input.overlap(v.id) as usize;
        if v.id == w || theirs <= local {
            continue;
        }
        if let Some(t) = sources.peer_time(v.id, w, theirs - local) {
            offers.push(PrefixOffer {
                source: PrefixSource::Peer(v.id),
                blocks: theirs - local,
                ready_in: t,
            });
        }
    }
    offers
}

/// The weight of an engine-published number `age` old, with half-life `half_life` (0: never trusted).
pub fn signal_trust(age: SimDuration, half_life: SimDuration) -> f64 {
    if half_life.0 == 0 {
        return 0.0;
    }
    0.5f64.powf(age.as_secs_f64() / half_life.as_secs_f64())
}

/// A worker's load, blending the engine's published numbers (weight `trust`) with the gateway's
/// ledger.
pub fn estimate(snap: &WorkerSnapshot, ledger: &WorkerLoad, trust: f64) -> LoadEstimate {
    let mean_ctx = if ledger.decoding > 0 {
        ledger.decode_context_tokens as f64 / f64::from(ledger.decoding)
    } else {
        0.0
    };
    LoadEstimate {
        prefill_tokens_ahead: ledger.prefill_tokens as f64,
        prefilling: f64::from(ledger.prefilling),
        batch: trust * f64::from(snap.running) + (1.0 - trust) * f64::from(ledger.decoding),
        batch_context_tokens: mean_ctx,
        used_blocks: trust * f64::from(snap.used_blocks) + (1.0 - trust) * ledger.blocks as f64,
    }
}

/// The `predicted_latency` policy.
#[derive(Debug)]
pub struct PredictedLatency {
    params: PredictedLatencyParams,
    /// Per worker, the blocks the last routing expected it to load from a tier or a peer.
    planned_loads: Vec<u32>,
    profiles: Vec<WorkerProfile>,
    targets: LatencyTargets,
    ledger: InFlight,
    /// Per worker, the mean observed time from first token to end (exponentially weighted).
    drain_s: Vec<f64>,
}

/// Weight of a new observation in the mean decode time.
const DRAIN_ALPHA: f64 = 0.1;

impl PredictedLatency {
    pub fn new(params: PredictedLatencyParams) -> Self {
        PredictedLatency {
            params,
            planned_loads: Vec::new(),
            profiles: Vec::new(),
            targets: LatencyTargets::default(),
            ledger: InFlight::default(),
            drain_s: Vec::new(),
        }
    }

    /// The targets in force: the scenario's, or 1 s TTFT and 100 ms TPOT.
    fn target_seconds(&self) -> (f64, f64) {
        (
            self.targets.ttft.map_or(1.0, SimDuration::as_secs_f64),
            self.targets.tpot.map_or(0.1, SimDuration::as_secs_f64),
        )
    }

    /// The prediction for `input`'s request on worker `w` (`None` without the worker's profile).
    pub fn predict_for(&self, input: &RouteInput, w: &WorkerSnapshot) -> Option<Prediction> {
        self.plan_for(input, w).map(|(p, _)| p)
    }

    /// The prediction for `input`'s request on worker `w`, pricing the best copy of its prefix
    /// anywhere ([`best_copy`]), and the blocks it expects to load rather than compute.
    fn plan_for(&self, input: &RouteInput, w: &WorkerSnapshot) -> Option<(Prediction, u32)> {
        let profile = self.profiles.get(w.id)?;
        let trust = signal_trust(input.load_age, self.params.signal_half_life);
        let load = estimate(w, &self.ledger.load(w.id), trust);
        let drain = self.drain_s.get(w.id).copied().unwrap_or(0.0);
        let prompt = input.request.prompt_tokens;
        let local = input.overlap(w.id);
        let at = |blocks: u32| {
            let (cached, _) = prefix_cost(prompt, blocks, input.block_size);
            predict(profile, &load, prompt, cached, drain)
        };
        let Some(sources) = input.prefix_sources else {
            return Some((at(local), 0));
        };
        let offers = best_copy(input, w.id, sources);
        let plan = cost_to_place(&offers, |k| {
            SimDuration::from_secs_f64(at(local + k as u32).ttft_s)
        });
        match plan.offer {
            // Recomputing wins: the plain prediction, untouched.
            None => Some((at(local), 0)),
            Some(o) => {
                let mut p = at(local + o.blocks as u32);
                p.ttft_s += o.ready_in.as_secs_f64();
                Some((p, o.blocks as u32))
            }
        }
    }
}

impl RoutingPolicy for PredictedLatency {
    fn name(&self) -> &'static str {
        "predicted_latency"
    }

    fn needs_cache_view(&self) -> bool {
        true
    }

    fn needs_prefix_sources(&self) -> bool {
        self.params.price_copies
    }

    fn on_fleet(&mut self, fleet: &FleetInfo) {
        self.profiles = fleet.workers.to_vec();
        self.targets = fleet.targets;
        self.ledger = InFlight::new(fleet.workers.len());
        self.drain_s = vec![0.0; fleet.workers.len()];
    }

    fn on_worker_profile(&mut self, w: usize, profile: &WorkerProfile) {
        if let Some(p) = self.profiles.get_mut(w) {
            *p = profile.clone();
        }
    }

    fn route(&mut self, input: &RouteInput, rng: &mut SimRng) -> Option<Decision> {
        let (t_ttft, t_tpot) = self.target_seconds();
        let w_tpot = self.params.tpot_weight.0;
        let mut any_feasible = false;
        let mut planned = std::mem::take(&mut self.planned_loads);
        planned.clear();
        planned.resize(input.workers.len(), 0);
        let costs: Vec<f64> = input
            .workers
            .iter()
            .map(|w| {
                if !w.up {
                    return f64::INFINITY;
                }
                // Without a profile (a policy used outside a simulation) only the queue counts.
                let Some((p, loads)) = self.plan_for(input, w) else {
                    return f64::from(w.outstanding);
                };
                planned[w.id] = loads;
                let feasible = p.ttft_s <= t_ttft && p.tpot_s <= t_tpot;
                any_feasible |= feasible;
                let cost = p.ttft_s / t_ttft + w_tpot * p.tpot_s / t_tpot;
                if feasible { cost } else { 1e9 + cost }
            })
            .collect();
        self.planned_loads = planned;
        let worker = max_score_random_tie(input.workers, |w| -costs[w.id], rng)?;
        Some(Decision {
            worker,
            reason: if any_feasible {
                "lowest predicted latency within the SLO"
            } else {
                "lowest predicted latency (none within the SLO)"
            },
        })
    }

    fn on_routed(&mut self, r: &Routed) {
        // Blocks the route expected to load count as cached (they arrive before the prompt runs).
        let loads = self.planned_loads.get(r.worker).copied().unwrap_or(0);
        let (_, uncached) = prefix_cost(r.request.prompt_tokens, r.overlap + loads, r.block_size);
        self.ledger.routed(
            r.request.id,
            r.worker,
            r.request.prompt_tokens,
            uncached,
            r.prompt_hashes.len() as u32,
            r.now,
        );
    }

    fn on_observed(&mut self, obs: &Observation) {
        match *obs {
            Observation::FirstToken { request, at, .. } => {
                self.ledger.first_token(request, at);
            }
            Observation::Finished {
                request,
                worker,
                at,
                ..
            } => {
                if let Some(c) = self.ledger.remove(request)
                    && let Some(first) = c.first_token
                    && let Some(d) = self.drain_s.get_mut(worker)
                {
                    let s = (at - first).as_secs_f64();
                    *d = if *d == 0.0 {
                        s
                    } else {
                        *d + DRAIN_ALPHA * (s - *d)
                    };
                }
            }
        }
    }

    fn on_request_failed(&mut self, request: u64, _worker: usize) {
        self.ledger.remove(request);
    }

    fn on_worker_down(&mut self, worker: usize) {
        self.ledger.clear_worker(worker);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hardware::{GpuId, ModelId, PerfModel, Precision};
    use crate::request::Request;
    use crate::request::Segment;
    use crate::routing::test_support::snapshots;
    use crate::time::SimTime;

    fn profile() -> WorkerProfile {
        WorkerProfile {
            perf: PerfModel::with_defaults(GpuId::H100, ModelId::Llama31_8b, 1, Precision::Bf16),
            max_num_batched_tokens: 8192,
            max_num_seqs: 256,
            block_size: 16,
            total_blocks: 1000,
        }
    }

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

    #[test]
    fn an_idle_worker_predicts_the_profile_prefill() {
        let p = profile();
        // Idle: TTFT is one prefill step of the uncached 1,000 − 320 tokens on 320 cached, which is
        // what the profile's own `prefill_seconds` computes; TPOT is a batch-1 decode at 1,000 tokens.
        let pred = predict(&p, &LoadEstimate::default(), 1000, 320, 0.0);
        assert_eq!(pred.ttft_s, p.perf.prefill_seconds(1000, 320));
        assert_eq!(pred.tpot_s, p.perf.decode_step_seconds(1, 1000));
        // A fully cached prompt still computes its last token.
        let pred = predict(&p, &LoadEstimate::default(), 64, 64, 0.0);
        assert_eq!(pred.ttft_s, p.perf.prefill_seconds(64, 63));
    }

    #[test]
    fn queued_prompts_and_decodes_add_their_steps() {
        let p = profile();
        // 10,000 tokens queued ahead plus 2,000 of ours on an otherwise idle worker: 12,000 tokens in
        // steps of 8,192, so one full step of the queue (8,192) then one step of 1,808 queued tokens
        // with our 2,000 (context 0) behind them.
        let load = LoadEstimate {
            prefill_tokens_ahead: 10_000.0,
            ..Default::default()
        };
        let pred = predict(&p, &load, 2000, 0, 0.0);
        let mut s1 = StepShape::default();
        s1.add(8192, 0);
        let mut s2 = StepShape::default();
        s2.add(1808, 0);
        s2.add(2000, 0);
        let expected = p.perf.step_seconds(&s1) + p.perf.step_seconds(&s2);
        assert!(
            (pred.ttft_s - expected).abs() < 1e-12,
            "{pred:?} vs {expected}"
        );
        // 100 sequences decoding at 500 tokens of context: half a decode step in flight, then one step
        // of the 100 decodes with our 1,000 tokens; TPOT is a 101-sequence decode at the mean context
        // (100 · 500 + 1,000) / 101 = 505 (rounded).
        let load = LoadEstimate {
            batch: 100.0,
            batch_context_tokens: 500.0,
            ..Default::default()
        };
        let pred = predict(&p, &load, 1000, 0, 0.0);
        let mut d = StepShape::default();
        for _ in 0..100 {
            d.add(1, 500);
        }
        let mut s = d;
        s.add(1000, 0);
        let expected = 0.5 * p.perf.step_seconds(&d) + p.perf.step_seconds(&s);
        assert!((pred.ttft_s - expected).abs() < 1e-12);
        assert_eq!(pred.tpot_s, p.perf.decode_step_seconds(101, 505));
    }

    #[test]
    fn a_full_worker_waits_for_running_requests_to_drain() {
        let p = profile();
        // 990 of 1,000 blocks in use, the prompt needs 63 (1,000 tokens): 53 short of 990 in use, a
        // wait of 53/990 of the mean 4 s decode on top of the compute.
        let load = LoadEstimate {
            used_blocks: 990.0,
            ..Default::default()
        };
        let pred = predict(&p, &load, 1000, 0, 4.0);
        let expected = p.perf.prefill_seconds(1000, 0) + 4.0 * 53.0 / 990.0;
        assert!((pred.ttft_s - expected).abs() < 1e-12);
    }

    #[test]
    fn prefix_cost_counts_cached_blocks_but_always_computes_one_token() {
        assert_eq!(prefix_cost(1000, 10, 16), (160, 840));
        assert_eq!(prefix_cost(160, 10, 16), (159, 1));
        assert_eq!(prefix_cost(1000, 0, 16), (0, 1000));
    }

    #[test]
    fn stale_signals_give_way_to_the_ledger() {
        assert_eq!(
            signal_trust(SimDuration::ZERO, SimDuration::from_secs(1)),
            1.0
        );
        assert_eq!(
            signal_trust(SimDuration::from_secs(2), SimDuration::from_secs(1)),
            0.25
        );
        assert_eq!(signal_trust(SimDuration::ZERO, SimDuration::ZERO), 0.0);
        let mut snap = snapshots(&[0])[0];
        snap.running = 40;
        snap.used_blocks = 800;
        let ledger = WorkerLoad {
            decoding: 20,
            decode_context_tokens: 20 * 300,
            blocks: 400,
            ..Default::default()
        };
        let e = estimate(&snap, &ledger, 0.25);
        // 0.25 · 40 + 0.75 · 20 = 25 sequences; 0.25 · 800 + 0.75 · 400 = 500 blocks.
        assert_eq!(e.batch, 25.0);
        assert_eq!(e.used_blocks, 500.0);
        assert_eq!(e.batch_context_tokens, 300.0);
    }

    fn input<'a>(
        req: &'a Request,
        ws: &'a [WorkerSnapshot],
        overlaps: &'a [u32],
        hashes: &'a [u64],
    ) -> RouteInput<'a> {
        RouteInput {
            request: req,
            prompt_blocks: hashes.len() as u32,
            block_size: 16,
            prompt_hashes: hashes,
            overlaps,
            prefix_owner: None,
            workers: ws,
            now: SimTime::ZERO,
            load_age: SimDuration::ZERO,
            prefix_sources: None,
            adapters: &[],
        }
    }

    #[test]
    fn a_cached_prefix_wins_until_its_queue_costs_more_than_recomputing() {
        let profiles = vec![profile(), profile()];
        let mut p = PredictedLatency::new(PredictedLatencyParams::default());
        p.on_fleet(&FleetInfo {
            workers: &profiles,
            targets: LatencyTargets::default(),
        });
        let ws = snapshots(&[0, 0]);
        let hashes: Vec<u64> = (0..256).collect();
        let mut rng = crate::rng::from_u64(1);
        // Worker 1 holds 4,096 of the 4,200 tokens: far less to compute there.
        let r = request(1, 4200);
        let d = p
            .route(&input(&r, &ws, &[0, 256], &hashes), &mut rng)
            .unwrap();
        assert_eq!(d.worker, 1);
        // 40,000 uncached tokens already queued on worker 1 (sent by the router, no first token yet):
        // five full steps there cost more than one 4,200-token prefill on idle worker 0.
        for i in 0..5 {
            p.on_routed(&Routed {
                request: &request(100 + i, 8000),
                worker: 1,
                prompt_hashes: &[],
                overlap: 0,
                block_size: 16,
                now: SimTime::ZERO,
            });
        }
        let d = p
            .route(&input(&r, &ws, &[0, 256], &hashes), &mut rng)
            .unwrap();
        assert_eq!(d.worker, 0);
        // Their first tokens come back: the queue is gone and worker 1 wins again.
        for i in 0..5 {
            p.on_observed(&Observation::FirstToken {
                request: 100 + i,
                worker: 1,
                at: SimTime(1),
            });
        }
        let d = p
            .route(&input(&r, &ws, &[0, 256], &hashes), &mut rng)
            .unwrap();
        assert_eq!(d.worker, 1);
    }

    /// Copies of prefixes outside the GPUs, as a test sets them: per worker, tier offers; and one
    /// idle-link peer time for any pair.
    #[derive(Debug)]
    struct Copies {
        tier: Vec<Vec<PrefixOffer>>,
        peer: Option<SimDuration>,
    }

    impl PrefixSources for Copies {
        fn tier_offers(&self, w: usize, _hashes: &[u64]) -> Vec<PrefixOffer> {
            self.tier[w].clone()
        }
        fn peer_time(&self, _from: usize, _to: usize, _blocks: usize) -> Option<SimDuration> {
            self.peer
        }
    }

    fn fleet_of_two() -> PredictedLatency {
        let profiles = vec![profile(), profile()];
        let mut p = PredictedLatency::new(PredictedLatencyParams::default());
        p.on_fleet(&FleetInfo {
            workers: &profiles,
            targets: LatencyTargets::default(),
        });
        p
    }

    #[test]
    fn a_prefix_in_the_host_tier_costs_its_load_plus_the_uncached_prefill() {
        let p = fleet_of_two();
        let ws = snapshots(&[0, 0]);
        let hashes: Vec<u64> = (0..262).collect();
        let r = request(1, 4200);
        let prof = profile();
        // Worker 0's host tier holds the first 256 blocks (4,096 tokens), loading in 5 ms; nothing
        // cached on either GPU. Recomputing all 4,200 tokens on the idle H100 takes one prefill step
        // of 4,200 tokens (tens of ms), loading then computing the last 104 tokens: 5 ms plus a
        // 104-token step on 4,096 cached.
        let host = PrefixOffer {
            source: PrefixSource::Tier(crate::tiers::TierKind::Host),
            blocks: 256,
            ready_in: SimDuration::from_millis(5),
        };
        let copies = Copies {
            tier: vec![vec![host], vec![]],
            peer: None,
        };
        let mut inp = input(&r, &ws, &[0, 0], &hashes);
        inp.prefix_sources = Some(&copies);
        let recompute = prof.perf.prefill_seconds(4200, 0);
        let load_then_compute = 0.005 + prof.perf.prefill_seconds(4200, 4096);
        assert!(
            load_then_compute < recompute,
            "the case needs loading to win"
        );
        let on0 = p.predict_for(&inp, &ws[0]).unwrap();
        assert!((on0.ttft_s - load_then_compute).abs() < 1e-9, "{on0:?}");
        // Worker 1 has no copy: full recompute, as without any sources.
        let on1 = p.predict_for(&inp, &ws[1]).unwrap();
        assert_eq!(on1.ttft_s, recompute);
        let mut rng = crate::rng::from_u64(1);
        let mut p = p;
        assert_eq!(p.route(&inp, &mut rng).unwrap().worker, 0);

        // A load slower than recomputing (10 s) is not chosen: the plain recompute prediction.
        let slow = PrefixOffer {
            ready_in: SimDuration::from_secs(10),
            ..host
        };
        let copies = Copies {
            tier: vec![vec![slow], vec![]],
            peer: None,
        };
        inp.prefix_sources = Some(&copies);
        assert_eq!(p.predict_for(&inp, &ws[0]).unwrap().ttft_s, recompute);
    }

    #[test]
    fn another_workers_gpu_copy_is_priced_by_its_transfer() {
        let p = fleet_of_two();
        let ws = snapshots(&[0, 0]);
        let hashes: Vec<u64> = (0..262).collect();
        let r = request(1, 4200);
        let prof = profile();
        // Worker 1's GPU holds 256 blocks; pulling them to worker 0 takes 20 ms on idle ports, so
        // worker 0 predicts 20 ms plus the 104 uncached tokens on 4,096 cached.
        let copies = Copies {
            tier: vec![vec![], vec![]],
            peer: Some(SimDuration::from_millis(20)),
        };
        let mut inp = input(&r, &ws, &[0, 256], &hashes);
        inp.prefix_sources = Some(&copies);
        let on0 = p.predict_for(&inp, &ws[0]).unwrap();
        let expected = 0.020 + prof.perf.prefill_seconds(4200, 4096);
        assert!((on0.ttft_s - expected).abs() < 1e-9, "{on0:?}");
        // Worker 1 needs nothing moved.
        let on1 = p.predict_for(&inp, &ws[1]).unwrap();
        assert_eq!(on1.ttft_s, prof.perf.prefill_seconds(4200, 4096));
        // Without peer transfer (no link), worker 0 recomputes everything.
        let copies = Copies {
            tier: vec![vec![], vec![]],
            peer: None,
        };
        inp.prefix_sources = Some(&copies);
        let on0 = p.predict_for(&inp, &ws[0]).unwrap();
        assert_eq!(on0.ttft_s, prof.perf.prefill_seconds(4200, 0));
    }
}
