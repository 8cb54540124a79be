//! `metric = "slo"`: an SLO-driven planner in the manner of NVIDIA Dynamo's SLA planner, aggregated mode.
//!
//! Read from Dynamo's source (`components/src/dynamo/planner/`, ai-dynamo/dynamo history as carried by
//! the fork zinuga/dynamo@df888f6, 2026-04-21; notes in `docs/models-and-scaling-sources.md` §3f'):
//!
//! 1. Every adjustment interval (`throughput_adjustment_interval`, 180 s, `config/defaults.py` L29) the
//!    planner observes the last interval's request count, mean input length (ISL), mean output length
//!    (OSL) and prefix-cache hit rate, and predicts the next interval's values (`core/load/predictors.py`:
//!    `constant` repeats the last value; `kalman` is a local linear trend filter). Leading idle
//!    intervals are skipped; an interval without a finished request observes ISL = OSL = 0 (Prometheus'
//!    0/0 read as 0), which stops the decision ("model not ready") until traffic returns.
//! 2. It finds the largest batch `b` one engine can run with both targets met
//!    (`core/perf_model/agg.py`, `find_best_engine_agg_rps`): with `ctx = ISL + OSL/2`, each of `b`
//!    decodes reads `ctx` tokens of KV and the step also prefills `b · ISL·(1 − hit) / OSL` tokens
//!    (at most `max_num_batched_tokens`). The step's time is the ITL; the TTFT is the time of the
//!    chunks that prefill one step's arrivals plus one more request. `b` is bounded by the KV cache
//!    (`kv tokens / ctx`), `max_num_seqs`, and the prefill/decode balance `ISL·(1 − hit)/(budget − b) ≤
//!    OSL`.
//! 3. One engine then serves `b / (OSL · step)` requests per second (Little's law), and the planner asks
//!    for `⌈predicted rps / engine rps⌉` replicas, at least `min_replicas` (`min_endpoint`), at most
//!    `max_replicas` (`max_gpu_budget`), every interval, with no tolerance, stabilisation window or
//!    rate limit (`core/throughput_scaling.py`, `_throughput_agg`).
//!
//! Where fleetsim differs, by construction: Dynamo fits its step time `f(prefill tokens, decode KV
//! tokens)` by regression on the engines' forward-pass metrics; here the step time is the replica's own
//! step model, so the planner's model is exact where Dynamo's is fitted. The prefill of a step is one
//! chunk with no context before it. The ARIMA and Prophet predictors (Dynamo's default is ARIMA) and the
//! load-based ±1 corrections between intervals are not modelled.

use serde::{Deserialize, Serialize};

use crate::hardware::StepShape;
use crate::time::SimDuration;

/// How the planner predicts the next interval's value from the ones observed.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum PredictorKind {
    /// The last value (Dynamo's `ConstantPredictor`).
    #[default]
    Constant,
    /// A local linear trend Kalman filter: level and trend, process noise 1.0 and 0.1, measurement noise
    /// 10.0 (Dynamo's `KalmanPredictor` with its `kalman_q_level`, `kalman_q_trend`, `kalman_r` defaults,
    /// `config/defaults.py` L55-57).
    Kalman,
}

/// `[autoscaler.planner]`: the SLO planner's targets and predictor (used with `metric = "slo"`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlannerSpec {
    /// TTFT target; default `[slo] ttft`, else Dynamo's 500 ms (`config/defaults.py` L48).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft: Option<SimDuration>,
    /// Inter-token latency target; default `[slo] tpot`, else Dynamo's 50 ms (L49).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itl: Option<SimDuration>,
    /// How the next interval's load is predicted from the last ones.
    #[serde(default)]
    pub predictor: PredictorKind,
    /// Dynamo's load-based loop (`enable_load_scaling`, off by default with `optimization_target =
    /// "sla"`, `config/defaults.py` L63-64): every `load_interval` it estimates each ready replica's
    /// next TTFT and ITL from its queue and batch, and adds a replica when every one is over its
    /// target, or removes one when every one is under `down_sensitivity` × target; the 180-s throughput
    /// rule then only sets the floor ([`SlaPlanner::load_decision`]).
    #[serde(default)]
    pub load_scaling: bool,
    /// Dynamo's `load_adjustment_interval`, 5 s (`config/defaults.py` L69).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_interval: Option<SimDuration>,
    /// Dynamo's `load_scaling_down_sensitivity`, 80 % (L74): a fraction here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down_sensitivity: Option<crate::config::Fraction>,
}

impl PlannerSpec {
    /// The load loop's period: `load_interval`, else 5 s.
    pub fn load_interval(&self) -> SimDuration {
        self.load_interval.unwrap_or(SimDuration::from_secs(5))
    }

    /// The load loop's scale-down threshold as a fraction of the target: 0.8 by default.
    pub fn down_sensitivity(&self) -> f64 {
        self.down_sensitivity.map_or(0.8, |f| f.0)
    }
}

/// Dynamo's default targets.
pub const DEFAULT_TTFT: SimDuration = SimDuration::from_millis(500);
pub const DEFAULT_ITL: SimDuration = SimDuration::from_millis(50);

/// One observed series and its forecast.
#[derive(Clone, Debug)]
pub struct Predictor {
    kind: PredictorKind,
    /// Whether a non-zero value has been seen (leading zeros are the idle start, skipped).
    seen_nonzero: bool,
    last: Option<f64>,
    kalman: Kalman,
}

impl Predictor {
    pub fn new(kind: PredictorKind) -> Self {
        Predictor {
            kind,
            seen_nonzero: false,
            last: None,
            kalman: Kalman::new(),
        }
    }

    /// Adds one interval's value (NaN counts as 0, as Dynamo's `add_data_point` does).
    pub fn observe(&mut self, value: f64) {
        let v = if value.is_nan() { 0.0 } else { value };
        if v == 0.0 && !self.seen_nonzero {
            return;
        }
        self.seen_nonzero |= v != 0.0;
        self.last = Some(v);
        if self.kind == PredictorKind::Kalman {
            self.kalman.update(v);
        }
    }

    /// The next interval's value (0 before any is observed).
    pub fn predict(&mut self) -> f64 {
        match self.kind {
            PredictorKind::Constant => self.last.unwrap_or(0.0),
            PredictorKind::Kalman => self.kalman.predict().unwrap_or(0.0),
        }
    }
}

/// State [level, trend] with F = [[1, 1], [0, 1]], H = [1, 0]; P starts at 1000·I.
#[derive(Clone, Debug)]
struct Kalman {
    x: [f64; 2],
    p: [[f64; 2]; 2],
    initialised: bool,
    /// The forecast already made for the coming interval (the filter advances once per interval).
    forecast: Option<f64>,
}

impl Kalman {
    const Q_LEVEL: f64 = 1.0;
    const Q_TREND: f64 = 0.1;
    const R: f64 = 10.0;

    fn new() -> Self {
        Kalman {
            x: [0.0; 2],
            p: [[1000.0, 0.0], [0.0, 1000.0]],
            initialised: false,
            forecast: None,
        }
    }

    fn advance(&mut self) {
        let [[a, b], [c, d]] = self.p;
        self.x = [self.x[0] + self.x[1], self.x[1]];
        self.p = [
            [a + b + c + d + Self::Q_LEVEL, b + d],
            [c + d, d + Self::Q_TREND],
        ];
    }

    fn update(&mut self, z: f64) {
        if !self.initialised {
            self.x = [z, 0.0];
            self.initialised = true;
            return;
        }
        if self.forecast.take().is_none() {
            self.advance();
        }
        let [[a, b], [c, d]] = self.p;
        let s = a + Self::R;
        let (k0, k1) = (a / s, c / s);
        let y = z - self.x[0];
        self.x = [self.x[0] + k0 * y, self.x[1] + k1 * y];
        self.p = [[(1.0 - k0) * a, (1.0 - k0) * b], [c - k1 * a, d - k1 * b]];
    }

    fn predict(&mut self) -> Option<f64> {
        if !self.initialised {
            return None;
        }
        if self.forecast.is_none() {
            self.advance();
            self.forecast = Some(self.x[0]);
        }
        self.forecast
    }
}

/// What the planner knows of one replica's engine.
#[derive(Clone, Copy, Debug)]
pub struct EngineLimits {
    pub max_num_batched_tokens: u32,
    pub max_num_seqs: u32,
    /// KV cache capacity, tokens.
    pub kv_tokens: u64,
}

/// The best operating point found: requests per second one engine serves, and its predicted TTFT and
/// ITL there (seconds).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OperatingPoint {
    pub engine_rps: f64,
    pub ttft_s: f64,
    pub itl_s: f64,
}

/// The largest batch meeting both targets, as Dynamo's `find_best_engine_agg_rps`; `step(prefill
/// tokens, decode sequences, context per decode)` is the engine's step time in seconds. `None` when ISL
/// or OSL is not positive. When even a batch of one misses a target, its point is returned (Dynamo
/// warns and goes on with it).
pub fn best_operating_point(
    isl: f64,
    osl: f64,
    hit_rate: f64,
    limits: EngineLimits,
    targets: (SimDuration, SimDuration),
    step: &dyn Fn(f64, u64, f64) -> f64,
) -> Option<OperatingPoint> {
    let budget = u64::from(limits.max_num_batched_tokens);
    if !(isl > 0.0 && osl > 0.0) || budget == 0 {
        return None;
    }
    let scale = 1.0 - hit_rate.clamp(0.0, 1.0);
    let effective_isl = isl * scale;
    let ctx = isl + osl / 2.0;
    let kv_cap = ((limits.kv_tokens as f64 / ctx.max(1.0)) as u64).max(1);
    let seq_cap = if limits.max_num_seqs > 0 {
        u64::from(limits.max_num_seqs)
    } else {
        kv_cap
    };
    let hard_cap = kv_cap.min(seq_cap).min(budget - 1).max(1);
    let balanced = |x: u64| x < budget && effective_isl / (budget - x) as f64 <= osl;
    // The largest x in [1, hard_cap] that is balanced (1 if none is), by bisection.
    let (mut lo, mut hi) = (1, hard_cap);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if balanced(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let (ttft_target, itl_target) = (targets.0.as_secs_f64(), targets.1.as_secs_f64());
    let budget_f = budget as f64;
    let mut best: Option<OperatingPoint> = None;
    for b in 1..=lo {
        let prefill = (b as f64 * effective_isl / osl.max(1.0)).min(budget_f);
        let itl = step(prefill, b, ctx);
        // The TTFT of a request arriving now: the chunks that prefill one step's arrivals and it.
        let queued = (b as f64 * isl / osl.max(1.0)).min(budget_f).floor();
        let mut left = (queued + isl) * scale;
        let mut ttft = 0.0;
        while left > 0.0 {
            let chunk = left.min(budget_f);
            ttft += step(chunk, b, ctx);
            left -= chunk;
        }
        let point = OperatingPoint {
            engine_rps: b as f64 / (osl * itl),
            ttft_s: ttft,
            itl_s: itl,
        };
        if itl > itl_target || ttft > ttft_target {
            if b == 1 {
                best = Some(point);
            }
            break;
        }
        best = Some(point);
    }
    best
}

/// A step of `prefill` new tokens (one chunk, nothing cached before it) beside `decodes` sequences
/// decoding one token each over `ctx` tokens of context: the shape handed to a replica's step model.
pub fn step_shape(prefill: f64, decodes: u64, ctx: f64) -> StepShape {
    let mut shape = StepShape::default();
    let p = prefill.round() as u64;
    if p > 0 {
        shape.add(p, 0);
    }
    let c = ctx.round() as u64;
    for _ in 0..decodes {
        shape.add(1, c);
    }
    shape
}

/// One interval's observation of a deployment's traffic.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Traffic {
    /// Requests that arrived in the interval.
    pub requests: u64,
    /// Over the requests that completed in the interval: mean prompt and output tokens, and the share of
    /// prompt tokens found in the prefix cache (NaN when none completed).
    pub isl: f64,
    pub osl: f64,
    pub hit_rate: f64,
}

/// What the load loop reads of one ready replica (Dynamo's forward-pass metrics): prompt tokens waiting
/// for admission, and the running sequences with the KV tokens they hold.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EngineLoad {
    pub queued: u64,
    pub queued_prompt_tokens: u64,
    pub running: u64,
    pub running_kv_tokens: u64,
}

/// The planner's state: one predictor per observed series.
#[derive(Clone, Debug)]
pub struct SlaPlanner {
    pub targets: (SimDuration, SimDuration),
    requests: Predictor,
    isl: Predictor,
    osl: Predictor,
    hit_rate: Predictor,
    /// The last prediction of (ISL, OSL, hit rate), which the load loop's estimates use.
    last: Option<(f64, f64, f64)>,
    /// The replicas the last throughput adjustment asked for: the load loop's floor.
    pub floor: Option<u32>,
}

impl SlaPlanner {
    pub fn new(kind: PredictorKind, targets: (SimDuration, SimDuration)) -> Self {
        SlaPlanner {
            targets,
            requests: Predictor::new(kind),
            isl: Predictor::new(kind),
            osl: Predictor::new(kind),
            hit_rate: Predictor::new(kind),
            last: None,
            floor: None,
        }
    }

    /// One adjustment: observes `traffic` over `interval`, and returns the replicas to run (before the
    /// bounds), or `None` when the prediction cannot size an engine (no traffic seen yet, or an interval
    /// with no finished request).
    pub fn replicas(
        &mut self,
        traffic: &Traffic,
        interval: SimDuration,
        limits: EngineLimits,
        step: &dyn Fn(f64, u64, f64) -> f64,
    ) -> Option<u32> {
        self.requests.observe(traffic.requests as f64);
        self.isl.observe(traffic.isl);
        self.osl.observe(traffic.osl);
        if !traffic.hit_rate.is_nan() {
            self.hit_rate.observe(traffic.hit_rate);
        }
        let demand = self.requests.predict().max(0.0) / interval.as_secs_f64();
        let (isl, osl) = (self.isl.predict(), self.osl.predict());
        let hit = self.hit_rate.predict();
        if isl > 0.0 && osl > 0.0 {
            self.last = Some((isl, osl, hit.clamp(0.0, 1.0)));
        }
        let point = best_operating_point(isl, osl, hit, limits, self.targets, step)?;
        if point.engine_rps.is_nan() || point.engine_rps <= 0.0 {
            return None;
        }
        let r = (demand / point.engine_rps).ceil().min(f64::from(u32::MAX)) as u32;
        self.floor = Some(r);
        Some(r)
    }

    /// One tick of the load loop over the ready replicas' `engines` (`current` replicas asked for): the
    /// replicas it asks for before the floor and bounds, or `None` for no change (no throughput
    /// adjustment has predicted lengths yet). As Dynamo's agg rule (`core/load_scaling.py`,
    /// `_advance_load_agg` and `_scale_decision`): per replica, the TTFT of a request arriving now is
    /// the chunks that prefill its queue and one more prompt (× (1 − hit rate)) beside its running
    /// decodes, and the ITL the step of its running and queued sequences plus one more, each at the
    /// mean context, with a prefill share of b · ISL(1 − hit) / OSL tokens (Dynamo reads that share
    /// from its forward-pass history, which fleetsim does not keep). Either signal over target on every
    /// replica adds one; both under `down_sensitivity` × target on every replica remove one.
    pub fn load_decision(
        &self,
        engines: &[EngineLoad],
        current: u32,
        limits: EngineLimits,
        down_sensitivity: f64,
        step: &dyn Fn(f64, u64, f64) -> f64,
    ) -> Option<u32> {
        let (isl, osl, hit) = self.last?;
        if engines.is_empty() {
            return None;
        }
        let budget = f64::from(limits.max_num_batched_tokens.max(1));
        let scale = 1.0 - hit;
        let (mut ttfts, mut itls) = (Vec::new(), Vec::new());
        for e in engines {
            let ctx = if e.running > 0 {
                e.running_kv_tokens as f64 / e.running as f64
            } else {
                0.0
            };
            let mut left = (e.queued_prompt_tokens as f64 + isl) * scale;
            let mut ttft = 0.0;
            while left > 0.0 {
                let chunk = left.min(budget);
                ttft += step(chunk, e.running, ctx);
                left -= chunk;
            }
            ttfts.push(ttft);
            let decodes = e.running + e.queued + 1;
            let kv = e.running_kv_tokens as f64 + e.queued_prompt_tokens as f64 + isl + osl / 2.0;
            let prefill = (e.running as f64 * isl * scale / osl.max(1.0)).min(budget);
            itls.push(step(prefill, decodes, kv / decodes as f64));
        }
        let vote = |estimates: &[f64], target: SimDuration| {
            let t = target.as_secs_f64();
            if estimates.iter().all(|&x| x > t) {
                Some(current + 1)
            } else if current > 1 && estimates.iter().all(|&x| x < t * down_sensitivity) {
                Some(current - 1)
            } else {
                None
            }
        };
        let (p, d) = (vote(&ttfts, self.targets.0), vote(&itls, self.targets.1));
        Some(match (p, d) {
            (Some(p), _) if p > current => p,
            (_, Some(d)) if d > current => d,
            (Some(p), Some(d)) if p < current && d < current => p.max(d),
            _ => current,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: EngineLimits = EngineLimits {
        max_num_batched_tokens: 8192,
        max_num_seqs: 256,
        kv_tokens: 1_000_000,
    };

    /// A linear step: 5 ms, plus 0.1 ms per prefill token, plus 0.5 ms per decode sequence.
    fn linear(prefill: f64, decodes: u64, _ctx: f64) -> f64 {
        0.005 + 1e-4 * prefill + 5e-4 * decodes as f64
    }

    fn ms(x: u64) -> SimDuration {
        SimDuration::from_millis(x)
    }

    /// An ITL target of 50.5 ms, off the linear model's whole-millisecond steps.
    fn itl() -> SimDuration {
        SimDuration::from_secs_f64(0.0505)
    }

    /// By hand with ISL 1,000, OSL 100, no hits: a batch of b prefills 10·b tokens a step, so its ITL is
    /// 5 + 1·b + 0.5·b ms = 5 + 1.5·b ms; ≤ 50.5 ms holds up to b = 30. The TTFT of b = 30 is one chunk of
    /// 300 + 1,000 tokens: 5 + 130 + 15 = 150 ms, within 500 ms. So b = 30 at ITL 50 ms: 30 / (100 ·
    /// 0.05) = 6 requests/s per engine.
    #[test]
    fn the_largest_batch_within_the_itl_target_sets_the_engine_rate() {
        let p =
            best_operating_point(1000.0, 100.0, 0.0, LIMITS, (ms(500), itl()), &linear).unwrap();
        assert!((p.itl_s - 0.050).abs() < 1e-12, "{p:?}");
        assert!((p.engine_rps - 6.0).abs() < 1e-9, "{p:?}");
        assert!((p.ttft_s - 0.150).abs() < 1e-12, "{p:?}");
    }

    /// A tight TTFT target binds before the ITL target: at b the TTFT is 5 + 0.1·(10·b + 1,000) + 0.5·b
    /// ms = 105 + 1.5·b ms; ≤ 121 ms holds up to b = 10 (ITL 20 ms): 10 / (100 · 0.02) = 5 requests/s.
    /// A 50% hit rate halves the prefill: TTFT 55 + 1·b ms ≤ 121 up to b = 66, but the ITL (5 + 0.5·b +
    /// 0.5·b ms) caps b at 45 first: 45 / (100 · 0.05) = 9 requests/s.
    #[test]
    fn the_ttft_target_and_the_hit_rate_move_the_batch() {
        let p =
            best_operating_point(1000.0, 100.0, 0.0, LIMITS, (ms(121), itl()), &linear).unwrap();
        assert!((p.engine_rps - 5.0).abs() < 1e-9, "{p:?}");
        let p =
            best_operating_point(1000.0, 100.0, 0.5, LIMITS, (ms(121), itl()), &linear).unwrap();
        assert!((p.engine_rps - 9.0).abs() < 1e-9, "{p:?}");
    }

    /// The batch never exceeds what the KV cache holds (kv tokens / (ISL + OSL/2)), max_num_seqs, or the
    /// prefill/decode balance; a target no batch meets returns the batch of one.
    #[test]
    fn limits_cap_the_batch_and_an_unreachable_target_keeps_one() {
        let small = EngineLimits {
            kv_tokens: 1050 * 4,
            ..LIMITS
        };
        let p =
            best_operating_point(1000.0, 100.0, 0.0, small, (ms(500), ms(500)), &linear).unwrap();
        let itl4 = linear(40.0, 4, 1050.0);
        assert!((p.engine_rps - 4.0 / (100.0 * itl4)).abs() < 1e-9, "{p:?}");
        let seqs = EngineLimits {
            max_num_seqs: 3,
            ..LIMITS
        };
        let p =
            best_operating_point(1000.0, 100.0, 0.0, seqs, (ms(500), ms(500)), &linear).unwrap();
        assert!((p.engine_rps - 3.0 / (100.0 * linear(30.0, 3, 1050.0))).abs() < 1e-9);
        // Balance: ISL 8,000, OSL 1, budget 8,192: 8,000 / (8,192 − b) ≤ 1 up to b = 192.
        let roomy = EngineLimits {
            kv_tokens: 100_000_000,
            max_num_seqs: 1000,
            ..LIMITS
        };
        let slow = |_: f64, b: u64, _: f64| b as f64;
        let p = best_operating_point(
            8000.0,
            1.0,
            0.0,
            roomy,
            (ms(1_000_000), ms(1_000_000)),
            &slow,
        )
        .unwrap();
        assert!(
            (p.engine_rps - 1.0).abs() < 1e-12 && p.itl_s == 192.0,
            "{p:?}"
        );
        let p = best_operating_point(1000.0, 100.0, 0.0, LIMITS, (ms(1), ms(1)), &linear).unwrap();
        assert!((p.itl_s - linear(10.0, 1, 1050.0)).abs() < 1e-12, "{p:?}");
        assert!(best_operating_point(0.0, 100.0, 0.0, LIMITS, (ms(1), ms(1)), &linear).is_none());
    }

    /// Replicas = ⌈predicted requests per second / engine rps⌉: 1,800 requests in 180 s is 10/s against
    /// 6/s per engine, 2 replicas; an interval with no finished request (ISL NaN, read as 0) decides
    /// nothing; leading idle intervals are skipped.
    #[test]
    fn replicas_follow_the_predicted_demand() {
        let mut p = SlaPlanner::new(PredictorKind::Constant, (ms(500), itl()));
        let interval = SimDuration::from_secs(180);
        let idle = Traffic {
            requests: 0,
            isl: f64::NAN,
            osl: f64::NAN,
            hit_rate: f64::NAN,
        };
        assert_eq!(p.replicas(&idle, interval, LIMITS, &linear), None);
        let busy = Traffic {
            requests: 1800,
            isl: 1000.0,
            osl: 100.0,
            hit_rate: 0.0,
        };
        assert_eq!(p.replicas(&busy, interval, LIMITS, &linear), Some(2));
        let more = Traffic {
            requests: 1081,
            ..busy
        };
        assert_eq!(
            p.replicas(&more, SimDuration::from_secs(60), LIMITS, &linear),
            Some(4)
        );
        assert_eq!(p.replicas(&idle, interval, LIMITS, &linear), None);
    }

    /// The load loop by hand (ISL 1,000, OSL 100, no hits, targets 500 ms and 50.5 ms, the linear
    /// step): a replica with 5,000 prompt tokens queued and 20 running has a TTFT of one 6,000-token
    /// chunk beside 20 decodes, 5 + 600 + 10 = 615 ms; one with nothing queued and 2 running, 5 + 100 +
    /// 1 = 106 ms, and an ITL of 3 decodes with 20 prefill tokens, 5 + 2 + 1.5 = 8.5 ms. Every replica
    /// over: one more; every replica under 80% of both: one fewer; a mix: no change; none before a
    /// throughput adjustment has predicted the lengths.
    #[test]
    fn the_load_loop_moves_one_replica_when_every_replica_agrees() {
        let mut p = SlaPlanner::new(PredictorKind::Constant, (ms(500), itl()));
        let busy = EngineLoad {
            queued: 5,
            queued_prompt_tokens: 5000,
            running: 20,
            running_kv_tokens: 20 * 1050,
        };
        let idle = EngineLoad {
            queued: 0,
            queued_prompt_tokens: 0,
            running: 2,
            running_kv_tokens: 2000,
        };
        assert_eq!(
            p.load_decision(&[busy, busy], 2, LIMITS, 0.8, &linear),
            None
        );
        let traffic = Traffic {
            requests: 100,
            isl: 1000.0,
            osl: 100.0,
            hit_rate: 0.0,
        };
        p.replicas(&traffic, SimDuration::from_secs(180), LIMITS, &linear);
        assert_eq!(
            p.load_decision(&[busy, busy], 2, LIMITS, 0.8, &linear),
            Some(3)
        );
        assert_eq!(
            p.load_decision(&[idle, idle], 2, LIMITS, 0.8, &linear),
            Some(1)
        );
        assert_eq!(
            p.load_decision(&[idle, idle], 1, LIMITS, 0.8, &linear),
            Some(1)
        );
        assert_eq!(
            p.load_decision(&[busy, idle], 2, LIMITS, 0.8, &linear),
            Some(2)
        );
        // A stricter sensitivity keeps the replica: 106 ms is not under 0.2 × 500 ms.
        assert_eq!(
            p.load_decision(&[idle, idle], 2, LIMITS, 0.2, &linear),
            Some(2)
        );
        assert_eq!(p.floor, Some(1), "the throughput rule's count is the floor");
    }

    /// The Kalman filter by hand: the first value sets the level (trend 0); its forecast is the level
    /// plus the trend, and a steady ramp is learnt (the forecast of a series rising by 10 per interval
    /// approaches the next value).
    #[test]
    fn the_kalman_predictor_follows_a_ramp() {
        let mut k = Predictor::new(PredictorKind::Kalman);
        assert_eq!(k.predict(), 0.0);
        k.observe(0.0); // leading idle: skipped
        k.observe(100.0);
        assert_eq!(k.predict(), 100.0);
        assert_eq!(k.predict(), 100.0, "one forecast per interval");
        for i in 1..30 {
            k.observe(100.0 + 10.0 * f64::from(i));
        }
        let next = k.predict();
        assert!((next - 400.0).abs() < 1.0, "{next}");
        let mut c = Predictor::new(PredictorKind::Constant);
        c.observe(7.0);
        c.observe(0.0);
        assert_eq!(c.predict(), 0.0, "zeros after traffic count");
    }
}
