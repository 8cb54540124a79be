//! `[autoscaler]`: a horizontal autoscaler for the fleet's model, and the cold start a new replica pays.
//!
//! The policy is the Kubernetes Horizontal Pod Autoscaler's, evaluated on an interval over one metric
//! averaged over the ready replicas (the KServe / KEDA / HPA conventions):
//!
//! ```text
//! ratio   = (metric summed over ready replicas) / (target × ready replicas)
//! desired = current                       if |1 − ratio| ≤ tolerance
//!         = ceil(ratio × ready replicas)  otherwise
//! ```
//! (`GetMetricReplicas`, kubernetes/kubernetes@19e8ce76:pkg/controller/podautoscaler/replica_calculator.go).
//! When the ratio asks for more and replicas are still starting, they are counted as using nothing,
//! and the scale-up is dropped if that brings the ratio within tolerance or below 1 (the same function's
//! `rebalanceUnready`). Raw recommendations are then stabilised: a scale-up goes to the *smallest*
//! recommendation of the last `scale_up_window`, a scale-down to the *largest* of the last
//! `scale_down_window` (`stabilizeRecommendationWithBehaviors`,
//! kubernetes/kubernetes@bba5ea77:pkg/controller/podautoscaler/horizontal.go),
//! limited by the scale-up policies (at most `max(+scale_up_pods, ×(1 + scale_up_percent/100))` replicas
//! over the replicas at the start of any `scale_up_period`), and clamped to `[min_replicas, max_replicas]`.
//!
//! Scale to zero (`min_replicas = 0`) follows Knative: the last replica goes only after the fleet has been
//! idle (nothing in flight, nothing arriving) for `scale_to_zero_grace`, and a request that arrives with no
//! replica ready waits at the gateway (Knative's activator) until one is, instead of failing; with no
//! replica at all it starts one at once.
//!
//! The cold start of a replica is `provision + image_pull + weight_load + warmup`
//! ([`AutoscalerSpec::cold_start`]); the replica then serves after the gateway's next good health check,
//! as a worker with `start_at` does.
//!
//! This module holds the configuration and the pure decision ([`Hpa`]); the engine's side (replica slots,
//! draining, the gateway's held requests) is `engine/autoscale.rs`.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::config::{Fraction, NonNegative, Positive, PositiveInt};
use crate::time::{SimDuration, SimTime};

pub mod planner;
pub use planner::{PlannerSpec, PredictorKind, SlaPlanner};

/// What the autoscaler averages over the ready replicas and compares with `target`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Requests waiting for admission per replica (vLLM's `num_requests_waiting`, what KEDA and AIBrix
    /// scale vLLM on), plus the requests the gateway holds for want of a ready replica.
    QueueDepth,
    /// Requests admitted and running per replica (vLLM's `num_requests_running`).
    Running,
    /// Requests in flight per replica, waiting or running, plus those the gateway holds: Knative's and
    /// KServe's `concurrency`.
    Concurrency,
    /// Mean fraction of KV blocks in use (vLLM's `gpu_cache_usage_perc`); `target` is a fraction.
    KvUtilization,
    /// Requests per second arriving at the gateway over the last interval, per replica (Knative's `rps`).
    Rps,
    /// No metric target: an SLO planner sizes the deployment for its TTFT and ITL targets from the
    /// predicted traffic and one replica's step model ([`planner`], after Dynamo's SLA planner).
    Slo,
}

impl Metric {
    /// The name used in scenario files and outputs.
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::QueueDepth => "queue_depth",
            Metric::Running => "running",
            Metric::Concurrency => "concurrency",
            Metric::KvUtilization => "kv_utilization",
            Metric::Rps => "rps",
            Metric::Slo => "slo",
        }
    }
}

/// The `[autoscaler]` table. Each `[[workers]]` group is one model's deployment: its `count` is the
/// replicas at t = 0, and the fleet holds `max_replicas` worker slots for it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AutoscalerSpec {
    /// Fewest replicas; 0 allows scale to zero. HPA's `minReplicas` defaults to 1
    /// (kubernetes/kubernetes@1adaa753:pkg/apis/autoscaling/v2/defaults.go).
    #[serde(default = "defaults::min_replicas")]
    pub min_replicas: u32,
    /// Most replicas (required, as HPA's `maxReplicas`).
    pub max_replicas: PositiveInt,
    /// The metric scaled on.
    pub metric: Metric,
    /// Its target value per replica (> 0; at most 1 for `kv_utilization`); required for every metric but
    /// `slo`, whose targets are `[autoscaler.planner]`'s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Positive>,
    /// Evaluation period: HPA's `--horizontal-pod-autoscaler-sync-period`, 15 s
    /// (kubernetes/kubernetes@85643c0f:pkg/controller/podautoscaler/config/v1alpha1/defaults.go); with
    /// `metric = "slo"`, Dynamo's `throughput_adjustment_interval`, 180 s (see [`planner`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<SimDuration>,
    /// With `metric = "slo"`: the planner's targets and predictor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planner: Option<PlannerSpec>,
    /// Ratios within `1 ± tolerance` change nothing: `--horizontal-pod-autoscaler-tolerance`, 0.1 (same file).
    #[serde(default = "defaults::tolerance")]
    pub tolerance: Fraction,
    /// Scale-up stabilisation window: 0 s, HPA's default scale-up rule
    /// (kubernetes/kubernetes@1adaa753:pkg/apis/autoscaling/v2/defaults.go).
    #[serde(default)]
    pub scale_up_window: SimDuration,
    /// Scale-down stabilisation window: `--horizontal-pod-autoscaler-downscale-stabilization`, 5 min
    /// (kubernetes/kubernetes@85643c0f:pkg/controller/podautoscaler/config/v1alpha1/defaults.go).
    #[serde(default = "defaults::scale_down_window")]
    pub scale_down_window: SimDuration,
    /// Scale-up policies, the larger of which applies: `+scale_up_pods` replicas, or `scale_up_percent` %
    /// more, per `scale_up_period`. HPA's defaults: 4 pods or 100 % per 15 s
    /// (kubernetes/kubernetes@1adaa753:pkg/apis/autoscaling/v2/defaults.go).
    #[serde(default = "defaults::scale_up_pods")]
    pub scale_up_pods: u32,
    /// The percentage scale-up policy: at most this many percent more replicas per `scale_up_period`.
    #[serde(default = "defaults::scale_up_percent")]
    pub scale_up_percent: NonNegative,
    /// The period both scale-up policies count over.
    #[serde(default = "defaults::scale_up_period")]
    pub scale_up_period: SimDuration,
    /// With `min_replicas = 0`: how long the fleet must be idle before its last replica goes. Knative's
    /// `scale-to-zero-grace-period`, 30 s (knative/serving@0d68a7be:config/core/configmaps/autoscaler.yaml).
    #[serde(default = "defaults::scale_to_zero_grace")]
    pub scale_to_zero_grace: SimDuration,
    /// How long a replica being scaled down may take to finish its requests before it is stopped (what
    /// is left is cut off and retried): Kubernetes' `terminationGracePeriodSeconds`, 30 s
    /// (kubernetes/kubernetes@815c3d8f:staging/src/k8s.io/api/core/v1/types.go,
    /// `DefaultTerminationGracePeriodSeconds`).
    #[serde(default = "defaults::drain_grace")]
    pub drain_grace: SimDuration,
    /// Cold start: getting a GPU node (0: the node pool already has one free).
    #[serde(default)]
    pub provision: SimDuration,
    /// Cold start: pulling the serving image (0: cached on the node, `imagePullPolicy: IfNotPresent`).
    /// A fresh node pulls a 10–20 GB vLLM image in minutes: 5–6 min plus 3–4 min to extract a 20 GB
    /// Llama-3.1-8B image (bentoml.com/blog/cold-starting-llms-on-kubernetes-in-under-30-seconds, 2025).
    #[serde(default)]
    pub image_pull: SimDuration,
    /// Cold start: loading the weights. Without it, the replica's weight bytes over `load_gb_per_s`.
    #[serde(default)]
    pub weight_load: Option<SimDuration>,
    /// Storage read bandwidth for the weights, GB/s; default `[restart] weight_load_gb_per_s`.
    #[serde(default)]
    pub load_gb_per_s: Option<Positive>,
    /// Cold start: engine start and warm-up (CUDA graph capture, torch.compile); default
    /// `[restart] engine_start + warmup`.
    #[serde(default)]
    pub warmup: Option<SimDuration>,
    /// Per model, by name (`[autoscaler.models."llama-3.1-8b"]`): that model's bounds and target where
    /// they differ from the ones above. A fleet of several worker groups, each serving its own model, has
    /// one HPA per group (one Deployment and one HorizontalPodAutoscaler per model, as KServe and llm-d
    /// deploy them); every other setting is shared.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub models: BTreeMap<String, ModelScaling>,
}

/// `[autoscaler.models.NAME]`: one model's deployment's bounds and target; unset keys take the
/// `[autoscaler]` values.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelScaling {
    /// Fewest replicas of this model (0: it may scale to zero); default: `[autoscaler]`'s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<u32>,
    /// Most replicas of this model; default: `[autoscaler]`'s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_replicas: Option<PositiveInt>,
    /// Target value of the metric per replica for this model; default: `[autoscaler]`'s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Positive>,
}

mod defaults {
    use super::*;
    pub fn min_replicas() -> u32 {
        1
    }
    pub fn interval() -> SimDuration {
        SimDuration::from_secs(15)
    }
    pub fn tolerance() -> Fraction {
        Fraction(0.1)
    }
    pub fn scale_down_window() -> SimDuration {
        SimDuration::from_secs(300)
    }
    pub fn scale_up_pods() -> u32 {
        4
    }
    pub fn scale_up_percent() -> NonNegative {
        NonNegative(100.0)
    }
    pub fn scale_up_period() -> SimDuration {
        SimDuration::from_secs(15)
    }
    pub fn scale_to_zero_grace() -> SimDuration {
        SimDuration::from_secs(30)
    }
    pub fn drain_grace() -> SimDuration {
        SimDuration::from_secs(30)
    }
}

/// The terms of one replica's cold start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColdStart {
    pub provision: SimDuration,
    pub image_pull: SimDuration,
    pub weight_load: SimDuration,
    pub warmup: SimDuration,
}

impl ColdStart {
    /// From the decision to start a replica to its process being up.
    pub fn total(&self) -> SimDuration {
        self.provision + self.image_pull + self.weight_load + self.warmup
    }
}

impl AutoscalerSpec {
    /// The settings of `model`'s deployment: the `[autoscaler]` values with that model's entry in
    /// `models` applied (and `models` itself empty).
    pub fn for_model(&self, model: &str) -> AutoscalerSpec {
        let mut spec = self.clone();
        spec.models.clear();
        if let Some(m) = self.models.get(model) {
            spec.min_replicas = m.min_replicas.unwrap_or(spec.min_replicas);
            spec.max_replicas = m.max_replicas.unwrap_or(spec.max_replicas);
            spec.target = m.target.or(spec.target);
        }
        spec
    }

    /// The evaluation period: `interval`, else 15 s (HPA), or 180 s for the SLO planner.
    pub fn interval(&self) -> SimDuration {
        self.interval.unwrap_or(if self.metric == Metric::Slo {
            SimDuration::from_secs(180)
        } else {
            defaults::interval()
        })
    }

    /// The SLO planner's (TTFT, ITL) targets: `[autoscaler.planner]`'s, else Dynamo's defaults.
    pub fn planner_targets(&self) -> (SimDuration, SimDuration) {
        let p = self.planner.clone().unwrap_or_default();
        (
            p.ttft.unwrap_or(planner::DEFAULT_TTFT),
            p.itl.unwrap_or(planner::DEFAULT_ITL),
        )
    }

    /// With `metric = "slo"`: the planner's targets that `[autoscaler.planner]` leaves unset taken from
    /// the scenario's `[slo]` (`ttft`, and `tpot` for the ITL).
    pub fn with_slo_targets(
        mut self,
        ttft: Option<SimDuration>,
        tpot: Option<SimDuration>,
    ) -> Self {
        if self.metric == Metric::Slo {
            let mut p = self.planner.take().unwrap_or_default();
            p.ttft = p.ttft.or(ttft);
            p.itl = p.itl.or(tpot);
            self.planner = Some(p);
        }
        self
    }

    /// How often the autoscaler runs: the SLO planner's load loop when it has one, else `interval`.
    pub fn tick(&self) -> SimDuration {
        match &self.planner {
            Some(p) if self.metric == Metric::Slo && p.load_scaling => p.load_interval(),
            _ => self.interval(),
        }
    }

    /// The metric's target per replica (0 for `slo`, which has none; validation requires it otherwise).
    pub fn target_value(&self) -> f64 {
        self.target.map_or(0.0, |t| t.0)
    }

    /// [`AutoscalerSpec::validate`] for `model`'s deployment, an error named by its path under
    /// `[autoscaler]`: `models.NAME.KEY` where the model's own entry set that key.
    pub fn validate_for(&self, model: &str) -> Result<(), (String, String)> {
        self.for_model(model).validate().map_err(|(f, m)| {
            // The key the model's entry set: min > max is about whichever of the two it set.
            let own = self.models.get(model).and_then(|e| match f {
                "min_replicas" if e.min_replicas.is_some() => Some(f),
                "min_replicas" if e.max_replicas.is_some() => Some("max_replicas"),
                "target" if e.target.is_some() => Some(f),
                _ => None,
            });
            match own {
                Some(key) => (format!("models.\"{model}\".{key}"), m),
                None => (f.to_string(), m),
            }
        })
    }

    /// Relations no single field's type can check: `Err((field under [autoscaler], message))`.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.min_replicas > self.max_replicas.0 {
            return Err((
                "min_replicas",
                format!(
                    "must be at most max_replicas ({}), got {}",
                    self.max_replicas.0, self.min_replicas
                ),
            ));
        }
        let span = |d: SimDuration| {
            crate::config::check_span(d, SimDuration::from_millis(1), SimDuration::MAX_PARSED)
        };
        span(self.interval()).map_err(|m| ("interval", m))?;
        if let Some(p) = &self.planner
            && p.load_scaling
        {
            span(p.load_interval()).map_err(|m| ("planner.load_interval", m))?;
            if p.load_interval() >= self.interval() {
                return Err((
                    "planner.load_interval",
                    format!(
                        "the load loop must run more often than the throughput adjustment: {} s is \
                         not shorter than interval, {} s (Dynamo refuses the same)",
                        p.load_interval().as_secs_f64(),
                        self.interval().as_secs_f64()
                    ),
                ));
            }
        }
        span(self.scale_up_period).map_err(|m| ("scale_up_period", m))?;
        match (self.metric, self.target) {
            (Metric::Slo, Some(_)) => {
                return Err((
                    "target",
                    "metric = \"slo\" scales on the planner's TTFT and ITL targets \
                     ([autoscaler.planner] ttft, itl): remove `target`"
                        .into(),
                ));
            }
            (Metric::Slo, None) => {}
            (m, None) => {
                return Err((
                    "target",
                    format!(
                        "metric = \"{}\" needs a target value per replica",
                        m.as_str()
                    ),
                ));
            }
            (Metric::KvUtilization, Some(t)) if t.0 > 1.0 => {
                return Err((
                    "target",
                    format!(
                        "kv_utilization is a fraction of the KV blocks: the target must be at most 1, got {}",
                        t.0
                    ),
                ));
            }
            _ => {}
        }
        if self.planner.is_some() && self.metric != Metric::Slo {
            return Err((
                "planner",
                format!(
                    "[autoscaler.planner] is the SLO planner's: it needs metric = \"slo\", not \"{}\"",
                    self.metric.as_str()
                ),
            ));
        }
        if self.scale_up_pods == 0 && self.scale_up_percent.0 == 0.0 {
            return Err((
                "scale_up_pods",
                "with scale_up_percent = 0 too, the fleet could never grow: allow one of them"
                    .into(),
            ));
        }
        if self.tolerance.0 >= 1.0 {
            return Err((
                "tolerance",
                format!(
                    "must be below 1 (a tolerance of 1 would never scale down), got {}",
                    self.tolerance.0
                ),
            ));
        }
        Ok(())
    }

    /// The cold start of a replica whose weights take `weight_bytes` in all, with `restart` supplying the
    /// defaults of the engine's own terms (the same model as a crashed worker's restart).
    pub fn cold_start(&self, weight_bytes: f64, restart: &crate::faults::RestartSpec) -> ColdStart {
        let gb_per_s = self.load_gb_per_s.unwrap_or(restart.weight_load_gb_per_s).0;
        ColdStart {
            provision: self.provision,
            image_pull: self.image_pull,
            weight_load: self
                .weight_load
                .unwrap_or_else(|| SimDuration::from_secs_f64(weight_bytes / (gb_per_s * 1e9))),
            warmup: self.warmup.unwrap_or(restart.engine_start + restart.warmup),
        }
    }
}

/// What the autoscaler sees at one evaluation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Observation {
    /// Replicas the deployment asks for now (HPA's `currentReplicas`, the scale target's `spec.replicas`).
    pub current: u32,
    /// Replicas that serve (the gateway routes to them).
    pub ready: u32,
    /// Replicas asked for that do not serve yet (cold-starting, or up and awaiting a health check).
    pub starting: u32,
    /// The metric summed over the ready replicas (and the gateway's held requests, for the metrics that
    /// count them); for `rps`, the fleet's arrival rate.
    pub total: f64,
    /// Requests waiting at the gateway for a ready replica.
    pub held: u64,
    /// Since when the fleet has been idle (nothing in flight or arriving), if it is.
    pub idle_since: Option<SimTime>,
}

/// `desired` kept at one replica while requests wait at the gateway, or while the fleet has not been
/// idle for `scale_to_zero_grace` (Knative's rule for the last replica).
pub fn keep_serving(spec: &AutoscalerSpec, now: SimTime, o: &Observation, desired: u32) -> u32 {
    let mut desired = desired;
    if desired == 0 && o.current > 0 {
        let idle_long = o
            .idle_since
            .is_some_and(|t| now.since(t) >= spec.scale_to_zero_grace);
        if !idle_long {
            desired = 1;
        }
    }
    if o.held > 0 {
        desired = desired.max(1);
    }
    desired
}

/// One change of the replica count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Change {
    pub at: SimTime,
    pub from: u32,
    pub to: u32,
}

/// The HPA's decision state: its recent raw recommendations and scale-ups.
///
/// Invariant: every returned replica count lies in `[min_replicas, max_replicas]`, except that it is at
/// least 1 while requests are held at the gateway or the fleet has not been idle for
/// `scale_to_zero_grace` (both only matter when `min_replicas = 0`).
#[derive(Clone, Debug)]
pub struct Hpa {
    spec: AutoscalerSpec,
    /// (when, raw recommendation) that can still be the smallest of the scale-up window: oldest
    /// first, values strictly increasing (a later recommendation no larger makes an earlier one moot).
    up_min: VecDeque<(SimTime, u32)>,
    /// The same for the largest of the scale-down window: values strictly decreasing. With both, a
    /// decision costs O(1) amortised however many evaluations a window spans (a 500 ms interval
    /// under a 25 h window is 180,000 of them).
    down_max: VecDeque<(SimTime, u32)>,
    /// (when, replicas added), oldest first, none older than `scale_up_period`.
    scale_ups: Vec<(SimTime, u32)>,
}

impl Hpa {
    pub fn new(spec: AutoscalerSpec) -> Self {
        Hpa {
            spec,
            up_min: VecDeque::new(),
            down_max: VecDeque::new(),
            scale_ups: Vec::new(),
        }
    }

    /// The HPA as the controller first sees its target at `at` with `replicas` running: that count is
    /// recorded as a recommendation (`recordInitialRecommendation` in the source cited above), so the
    /// deployment's starting size holds for one `scale_down_window` before load can shrink it.
    pub fn seeded(mut self, replicas: u32, at: SimTime) -> Self {
        self.record(at, replicas);
        self
    }

    /// Keeps raw recommendation `r` made at `at` (times never go back).
    fn record(&mut self, at: SimTime, r: u32) {
        while self.up_min.back().is_some_and(|&(_, v)| v >= r) {
            self.up_min.pop_back();
        }
        self.up_min.push_back((at, r));
        while self.down_max.back().is_some_and(|&(_, v)| v <= r) {
            self.down_max.pop_back();
        }
        self.down_max.push_back((at, r));
    }

    /// The metric's raw recommendation (before stabilisation and limits).
    pub fn raw(&self, o: &Observation) -> u32 {
        let target = self.spec.target_value();
        let tol = self.spec.tolerance.0;
        let want = |total: f64| (total / target).ceil().min(f64::from(u32::MAX)) as u32;
        if o.ready == 0 {
            // No replica to average over: any demand asks for what it needs, at least one.
            return if o.total > 0.0 || o.held > 0 {
                want(o.total).max(1)
            } else if o.current == 0 {
                0
            } else {
                o.current
            };
        }
        let ratio = o.total / (target * f64::from(o.ready));
        if ratio > 1.0 && o.starting > 0 {
            // Starting replicas count as using nothing; a ratio that no longer asks for more is no change.
            let rebalanced = o.total / (target * f64::from(o.ready + o.starting));
            if rebalanced <= 1.0 + tol {
                return o.current;
            }
            return want(o.total);
        }
        if (1.0 - ratio).abs() <= tol {
            return o.current;
        }
        want(o.total)
    }

    /// One evaluation at `now`: the replica count to run from now on.
    pub fn decide(&mut self, now: SimTime, o: &Observation) -> u32 {
        let raw = self.raw(o);
        let stabilised = self.stabilise(now, o.current, raw);
        let limited = self.limit(now, o.current, stabilised);
        let desired = keep_serving(&self.spec, now, o, limited);
        if desired > o.current {
            self.scale_ups.push((now, desired - o.current));
        }
        desired
    }

    /// HPA's stabilisation: a scale-up to the smallest raw recommendation of the last `scale_up_window`,
    /// a scale-down to the largest of the last `scale_down_window` (both including `raw`, recorded now).
    fn stabilise(&mut self, now: SimTime, current: u32, raw: u32) -> u32 {
        // Kubernetes keeps a recommendation while its timestamp is strictly after `now - window`; a
        // window reaching back before t = 0 keeps everything (`None`: no cutoff yet).
        let cut = |w: SimDuration| now.0.checked_sub(w.0).map(SimTime);
        let within = |t: SimTime, cut: Option<SimTime>| cut.is_none_or(|c| t > c);
        let (up_cut, down_cut) = (
            cut(self.spec.scale_up_window),
            cut(self.spec.scale_down_window),
        );
        while self
            .up_min
            .front()
            .is_some_and(|&(t, _)| !within(t, up_cut))
        {
            self.up_min.pop_front();
        }
        while self
            .down_max
            .front()
            .is_some_and(|&(t, _)| !within(t, down_cut))
        {
            self.down_max.pop_front();
        }
        let up = self.up_min.front().map_or(raw, |&(_, r)| r.min(raw));
        let down = self.down_max.front().map_or(raw, |&(_, r)| r.max(raw));
        self.record(now, raw);
        current.max(up).min(down)
    }

    /// HPA's scale-up policies and the replica bounds.
    fn limit(&mut self, now: SimTime, current: u32, desired: u32) -> u32 {
        let cut = SimTime(now.0.saturating_sub(self.spec.scale_up_period.0));
        self.scale_ups.retain(|&(t, _)| t > cut);
        let (min, max) = (self.spec.min_replicas, self.spec.max_replicas.0);
        if desired > current {
            let added: u32 = self.scale_ups.iter().map(|&(_, n)| n).sum();
            let start = current.saturating_sub(added);
            let by_pods = start.saturating_add(self.spec.scale_up_pods);
            let by_percent =
                (f64::from(start) * (1.0 + self.spec.scale_up_percent.0 / 100.0)).ceil();
            let limit = by_pods.max(by_percent.min(f64::from(u32::MAX)) as u32);
            desired.min(limit.max(current)).clamp(min, max)
        } else {
            desired.clamp(min, max)
        }
    }
}

#[cfg(test)]
mod tests;
