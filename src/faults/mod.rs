//! Faults: what goes wrong, when, and to which workers.
//!
//! A scenario's `[[faults]]` entries are data. [`FaultPlan::build`] expands them, before the run, into
//! a list of [`PlannedFault`]s sorted by time: scheduled faults as written, and the first failure of each
//! stochastic one (per-worker MTBF/MTTR); each later failure is drawn from the same named random stream
//! (`faults.N.worker.W`, a [`FaultStream`]) when the one before it happens, so the plan's memory does not
//! grow with the horizon, and adding or changing a fault never shifts the workload's or the router's
//! random numbers. The engine turns each planned fault
//! into one event; what a fault *does* (a crash's lost work, the gateway's reaction) lives in the engine
//! and the [`crate::gateway`].
//!
//! Kinds (ARCHITECTURE §1.6):
//! - `crash`: the engine process dies. In-flight and queued work on it is lost, its KV cache is gone
//!   (unless `kv_survives_restart`), and it comes back cold after `restart_after` (default: what a real
//!   restart costs, [`RestartSpec`]). New requests sent to it fail fast with a connection error
//!   (`symptom = "refused"`), or only after the gateway's connect timeout when the whole host is gone
//!   (`symptom = "unreachable"`, the default for a failure-domain loss).
//! - `hang`: the process stops making progress but keeps its connections: requests on it and sent to it
//!   end only by the gateway's request timeout; health checks fail; after `restart_after` it is killed and
//!   restarted cold.
//! - `drain`: planned removal: the gateway stops routing to it at once, in-flight work may finish within
//!   `grace`, then it stops (and restarts after `restart_after`, if given).
//! - `slowdown`: every step takes `factor` times longer for `duration`; invisible to health checks.
//! - `memory_pressure`: a `fraction` of the KV blocks is taken away for `duration` (cached blocks evicted,
//!   running requests preempted when needed).
//! - `store_failure`: the shared KV store (session state `shared_tier`) is unavailable for `duration`,
//!   losing its contents if `data_loss`.
//!
//! Targets: `worker = N`, `worker = "most_sessions"` (the worker holding the most recently active
//! conversations at that moment), `workers = [..]`, or `domain = "LABEL"` (every worker whose
//! `failure_domain` list contains the label). Stochastic faults (`mtbf`) default to every worker.

use rand_distr::{Distribution, Exp, Weibull};
use serde::{Deserialize, Deserializer, Serialize};

use crate::config::{Fraction, Positive};
use crate::rng;
use crate::time::{SimDuration, SimTime};

/// What kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// The worker's process dies: its requests fail (and may be retried by the gateway), its KV cache is
    /// lost unless `kv_survives_restart`; it restarts after `restart_after` (default: the `[restart]`
    /// time) unless `restart = false`.
    Crash,
    /// The worker makes no progress but its connections stay open: found by health checks and request
    /// timeouts.
    Hang,
    /// The worker is taken out of service gracefully: no new requests, in-flight ones get `grace` to
    /// finish.
    Drain,
    /// The worker's steps take `factor` times longer for `duration` (health checks still pass).
    Slowdown,
    /// A `fraction` of the worker's KV blocks is taken away for `duration` (evictions, preemptions).
    MemoryPressure,
    /// The shared KV store (`[tiers.shared]`) fails for `duration`, losing its contents if `data_loss`.
    StoreFailure,
}

impl FaultKind {
    /// The name used in scenario files and outputs.
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Crash => "crash",
            FaultKind::Hang => "hang",
            FaultKind::Drain => "drain",
            FaultKind::Slowdown => "slowdown",
            FaultKind::MemoryPressure => "memory_pressure",
            FaultKind::StoreFailure => "store_failure",
        }
    }

    /// Whether the fault takes its workers out of service (they cannot overlap with another such fault).
    pub fn takes_down(self) -> bool {
        matches!(self, FaultKind::Crash | FaultKind::Hang | FaultKind::Drain)
    }
}

/// How a crashed worker looks to the gateway's new connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Symptom {
    /// The host is up, the port is closed: connections are refused at once.
    Refused,
    /// The host is gone: connections time out after the gateway's `connect_timeout`.
    Unreachable,
}

/// Distribution of times between failures and of repair times.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Lifetime {
    #[default]
    Exponential,
    Weibull,
}

/// Which worker(s) a `worker = ...` key names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum WorkerRef {
    /// A worker by index (workers are numbered in the order of the `[[workers]]` groups).
    Index(u32),
    /// The worker holding the most active conversations when the fault happens.
    MostSessions,
}

/// Accepts what `deserialize` accepts: a worker number (0 to 2^32 − 1) or `"most_sessions"`.
impl schemars::JsonSchema for WorkerRef {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "WorkerRef".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A worker: its number (workers are numbered from 0 in the order of the \
                `[[workers]]` groups), or `\"most_sessions\"`, the worker holding the most active \
                conversations when the fault happens.",
            "anyOf": [
                { "type": "integer", "minimum": 0, "maximum": u32::MAX },
                { "const": "most_sessions" },
            ],
        })
    }
}

impl<'de> Deserialize<'de> for WorkerRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = WorkerRef;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a worker number or \"most_sessions\"")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<WorkerRef, E> {
                u32::try_from(v)
                    .map(WorkerRef::Index)
                    .map_err(|_| E::custom(format!("expected a worker number ≥ 0, got {v}")))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<WorkerRef, E> {
                u32::try_from(v)
                    .map(WorkerRef::Index)
                    .map_err(|_| E::custom(format!("worker number {v} is too large")))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<WorkerRef, E> {
                match v {
                    "most_sessions" => Ok(WorkerRef::MostSessions),
                    _ => Err(E::custom(format!(
                        "expected a worker number or \"most_sessions\", got \"{v}\""
                    ))),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// One `[[faults]]` entry as written. Which keys apply depends on `kind`; [`FaultSpec::validate`] says
/// which are missing or out of place.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    /// What happens.
    pub kind: FaultKind,
    /// The one worker it hits. A fault names its workers with one of `worker`, `workers` or `domain`;
    /// a stochastic fault (`mtbf`) with none of them hits every worker.
    #[serde(default)]
    pub worker: Option<WorkerRef>,
    /// The workers it hits, by number (from 0, in `[[workers]]` order).
    #[serde(default)]
    pub workers: Option<Vec<u32>>,
    /// Every worker whose group lists this label in `failure_domain` (a rack, a node).
    #[serde(default)]
    pub domain: Option<String>,
    /// When a scheduled fault happens (from the start of the run).
    #[serde(default)]
    pub at: Option<SimDuration>,
    /// Crash, hang, drain: time until the worker is back (default for crash and hang: [`RestartSpec`];
    /// a drained worker stays out unless this is given). `"never"` is written by leaving the fault
    /// without restart: set `restart = false`.
    #[serde(default)]
    pub restart_after: Option<SimDuration>,
    /// Crash and hang: whether the worker comes back at all (default true).
    #[serde(default = "crate::config::yes")]
    pub restart: bool,
    /// Crash: the KV memory outlives the process (warm failover): a restarted worker keeps its cache.
    #[serde(default)]
    pub kv_survives_restart: bool,
    /// Crash: how the dead worker looks to new connections.
    #[serde(default)]
    pub symptom: Option<Symptom>,
    /// Slowdown, memory pressure, store failure: how long it lasts (default: to the end of the run).
    #[serde(default)]
    pub duration: Option<SimDuration>,
    /// Slowdown: step time multiplier (> 1 slows down).
    #[serde(default)]
    pub factor: Option<Positive>,
    /// Memory pressure: fraction of the KV blocks taken away.
    #[serde(default)]
    pub fraction: Option<Fraction>,
    /// Drain: time in-flight work may take to finish before the worker stops.
    #[serde(default)]
    pub grace: Option<SimDuration>,
    /// Store failure: whether the store's contents are lost (default true).
    #[serde(default = "crate::config::yes")]
    pub data_loss: bool,
    /// Stochastic crash or hang: mean time between failures, per worker.
    #[serde(default)]
    pub mtbf: Option<SimDuration>,
    /// Stochastic: mean time to repair (default: the restart time).
    #[serde(default)]
    pub mttr: Option<SimDuration>,
    /// Stochastic: distribution of the times between failures and of repair times.
    #[serde(default)]
    pub distribution: Lifetime,
    /// Weibull shape `k` (k < 1: infant mortality, k > 1: wear-out).
    #[serde(default)]
    pub shape: Option<Positive>,
}

/// What a real restart of an inference engine costs: process start, loading the weights from storage,
/// and warm-up (CUDA graph capture, compilation). Defaults are typical of vLLM on a data-centre node:
/// tens of seconds to start and warm up, weights read at a few GB/s from local NVMe or a network volume.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RestartSpec {
    /// Container and engine start before weights load.
    #[serde(default = "defaults::engine_start")]
    pub engine_start: SimDuration,
    /// Storage read bandwidth for the weights, GB/s (the replica's weights in total).
    #[serde(default = "defaults::weight_load_gb_per_s")]
    pub weight_load_gb_per_s: Positive,
    /// Warm-up after loading: CUDA graph capture, compilation, a first request.
    #[serde(default = "defaults::warmup")]
    pub warmup: SimDuration,
}

impl Default for RestartSpec {
    fn default() -> Self {
        RestartSpec {
            engine_start: defaults::engine_start(),
            weight_load_gb_per_s: defaults::weight_load_gb_per_s(),
            warmup: defaults::warmup(),
        }
    }
}

mod defaults {
    use super::*;
    pub fn engine_start() -> SimDuration {
        SimDuration::from_secs(15)
    }
    pub fn weight_load_gb_per_s() -> Positive {
        Positive(2.0)
    }
    pub fn warmup() -> SimDuration {
        SimDuration::from_secs(20)
    }
}

impl RestartSpec {
    /// Restart time of a replica whose weights take `weight_bytes` in all.
    pub fn restart_time(&self, weight_bytes: f64) -> SimDuration {
        let load = weight_bytes / (self.weight_load_gb_per_s.0 * 1e9);
        self.engine_start + SimDuration::from_secs_f64(load) + self.warmup
    }
}

/// Which workers a planned fault hits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Targets {
    /// These workers (sorted, distinct).
    Workers(Vec<usize>),
    /// Resolved when the fault happens: the worker with the most active conversations.
    MostSessions,
    /// The shared store, not a worker.
    Store,
}

/// One fault, ready for the engine: when, what, to whom.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedFault {
    pub at: SimTime,
    pub kind: FaultKind,
    pub targets: Targets,
    /// Index of the `[[faults]]` entry it came from.
    pub source: usize,
    /// `None`: no restart. For drains: measured from the end of the grace period.
    pub restart_after: Option<SimDuration>,
    pub kv_survives_restart: bool,
    pub symptom: Symptom,
    pub duration: Option<SimDuration>,
    pub factor: f64,
    pub fraction: f64,
    pub grace: SimDuration,
    pub data_loss: bool,
    /// A short label for outputs: `crash w3`, `drain rack-2`, ...
    pub label: String,
}

/// A slowdown's step-time factor: from a hundredfold speed-up to a thousandfold slowdown.
pub const FACTOR: (f64, f64) = (0.01, 1000.0);
/// A Weibull shape `k`: below 0.1 the scale that gives the mean underflows (Γ(1 + 1/k) is astronomical),
/// above 20 the lifetime is all but constant.
pub const SHAPE: (f64, f64) = (0.1, 20.0);
/// Shortest mean time between failures: every second, per worker.
pub const MIN_MTBF: SimDuration = SimDuration::from_secs(1);
/// Shortest mean time to repair.
pub const MIN_MTTR: SimDuration = SimDuration::from_millis(1);
/// Longest drain grace period.
pub const MAX_GRACE: SimDuration = SimDuration::from_secs(86_400);

/// Default grace period of a drain: Kubernetes' `terminationGracePeriodSeconds` default.
pub const DEFAULT_GRACE: SimDuration = SimDuration::from_secs(30);

/// The fleet facts a fault list is checked and expanded against.
pub struct Fleet<'a> {
    /// Per worker: its failure-domain labels.
    pub domains: &'a [Vec<String>],
    /// Per worker: default restart time.
    pub restart: &'a [SimDuration],
    /// Whether a shared KV store exists (session state `shared_tier`).
    pub has_store: bool,
}

impl FaultSpec {
    /// Checks one entry against the fleet. `Err((field, message))`, the field relative to the entry.
    pub fn validate(&self, fleet: &Fleet) -> Result<(), (&'static str, String)> {
        let n = fleet.domains.len();
        let k = self.kind;
        let name = k.as_str();
        let only = |field: &'static str, set: bool, kinds: &[FaultKind]| {
            if set && !kinds.contains(&k) {
                let allowed: Vec<_> = kinds.iter().map(|k| k.as_str()).collect();
                Err((
                    field,
                    format!("applies to {} faults, not {name}", allowed.join(" and ")),
                ))
            } else {
                Ok(())
            }
        };
        use FaultKind::*;
        only("factor", self.factor.is_some(), &[Slowdown])?;
        only("fraction", self.fraction.is_some(), &[MemoryPressure])?;
        only("grace", self.grace.is_some(), &[Drain])?;
        only("symptom", self.symptom.is_some(), &[Crash])?;
        only("kv_survives_restart", self.kv_survives_restart, &[Crash])?;
        only(
            "restart_after",
            self.restart_after.is_some(),
            &[Crash, Hang, Drain],
        )?;
        only("restart", !self.restart, &[Crash, Hang])?;
        only("mtbf", self.mtbf.is_some(), &[Crash, Hang])?;
        only(
            "duration",
            self.duration.is_some(),
            &[Slowdown, MemoryPressure, StoreFailure],
        )?;
        only("data_loss", !self.data_loss, &[StoreFailure])?;
        let stochastic = self.mtbf.is_some();
        if !stochastic {
            for (field, set) in [
                ("mttr", self.mttr.is_some()),
                ("shape", self.shape.is_some()),
            ] {
                if set {
                    return Err((
                        field,
                        "applies only to stochastic faults (with mtbf)".into(),
                    ));
                }
            }
        }
        if self.distribution == Lifetime::Weibull && self.shape.is_none() {
            return Err(("shape", "a Weibull distribution needs its shape k".into()));
        }
        for (field, d) in [
            ("restart_after", self.restart_after),
            ("mtbf", self.mtbf),
            ("mttr", self.mttr),
            ("duration", self.duration),
        ] {
            if d == Some(SimDuration::ZERO) {
                return Err((field, "must be greater than 0".into()));
            }
        }
        if let Some(f) = self.factor {
            crate::config::check_range(f.0, FACTOR, "").map_err(|m| ("factor", m))?;
        }
        if let Some(k) = self.shape {
            crate::config::check_range(k.0, SHAPE, "").map_err(|m| ("shape", m))?;
        }
        if let Some(d) = self.mtbf {
            crate::config::check_span(d, MIN_MTBF, SimDuration::MAX_PARSED)
                .map_err(|m| ("mtbf", m))?;
        }
        if let Some(d) = self.mttr {
            crate::config::check_span(d, MIN_MTTR, SimDuration::MAX_PARSED)
                .map_err(|m| ("mttr", m))?;
        }
        if let Some(d) = self.grace {
            crate::config::check_span(d, SimDuration::ZERO, MAX_GRACE).map_err(|m| ("grace", m))?;
        }
        if self.restart_after.is_some() && !self.restart {
            return Err(("restart_after", "contradicts restart = false".into()));
        }
        match (stochastic, self.at) {
            (false, None) => {
                return Err((
                    "at",
                    format!("a scheduled {name} needs `at` (or `mtbf` for random failures)"),
                ));
            }
            (true, Some(_)) => {
                return Err(("at", "a stochastic fault (mtbf) has no fixed time".into()));
            }
            _ => {}
        }
        if k == Slowdown && self.factor.is_none() {
            return Err(("factor", "a slowdown needs its step-time factor".into()));
        }
        if k == MemoryPressure {
            match self.fraction {
                None => {
                    return Err((
                        "fraction",
                        "memory pressure needs the fraction of KV blocks taken".into(),
                    ));
                }
                Some(f) if f.0 == 0.0 => {
                    return Err(("fraction", "must be greater than 0".into()));
                }
                _ => {}
            }
        }
        // Targets.
        let named = [
            self.worker.is_some(),
            self.workers.is_some(),
            self.domain.is_some(),
        ]
        .iter()
        .filter(|&&b| b)
        .count();
        if k == StoreFailure {
            if named > 0 {
                let f = if self.worker.is_some() {
                    "worker"
                } else if self.workers.is_some() {
                    "workers"
                } else {
                    "domain"
                };
                return Err((
                    f,
                    "a store failure hits the shared store, not workers".into(),
                ));
            }
            if !fleet.has_store {
                return Err((
                    "kind",
                    "store_failure needs a shared store: set gateway.session_state = \"shared_tier\"".into(),
                ));
            }
            return Ok(());
        }
        if named > 1 {
            return Err((
                "worker",
                "name the target once: worker, workers or domain".into(),
            ));
        }
        if named == 0 && !stochastic {
            return Err((
                "worker",
                format!(
                    "a {name} needs a target: worker = N, workers = [..] or domain = \"label\""
                ),
            ));
        }
        if stochastic && self.worker == Some(WorkerRef::MostSessions) {
            return Err((
                "worker",
                "\"most_sessions\" is for scheduled faults; a stochastic fault names workers"
                    .into(),
            ));
        }
        let check = |w: u32, field: &'static str| {
            if (w as usize) < n {
                Ok(())
            } else {
                Err((
                    field,
                    format!("no worker {w}: the fleet has workers 0 to {}", n - 1),
                ))
            }
        };
        if let Some(WorkerRef::Index(w)) = self.worker {
            check(w, "worker")?;
        }
        if let Some(ws) = &self.workers {
            if ws.is_empty() {
                return Err(("workers", "is empty".into()));
            }
            for &w in ws {
                check(w, "workers")?;
            }
            let mut sorted = ws.clone();
            sorted.sort_unstable();
            sorted.dedup();
            if sorted.len() != ws.len() {
                return Err(("workers", "names a worker twice".into()));
            }
        }
        if let Some(d) = &self.domain
            && !fleet.domains.iter().any(|ds| ds.contains(d))
        {
            let mut known: Vec<&str> = fleet.domains.iter().flatten().map(String::as_str).collect();
            known.sort_unstable();
            known.dedup();
            return Err((
                "domain",
                if known.is_empty() {
                    format!(
                        "no worker is in failure domain \"{d}\": no worker group sets failure_domain"
                    )
                } else {
                    format!(
                        "no worker is in failure domain \"{d}\"; known domains: {}",
                        known.join(", ")
                    )
                },
            ));
        }
        Ok(())
    }

    /// The workers this entry names (every worker for a stochastic fault without a target).
    fn workers(&self, fleet: &Fleet) -> Targets {
        if self.kind == FaultKind::StoreFailure {
            return Targets::Store;
        }
        let mut ws: Vec<usize> = match (&self.worker, &self.workers, &self.domain) {
            (Some(WorkerRef::MostSessions), _, _) => return Targets::MostSessions,
            (Some(WorkerRef::Index(w)), _, _) => vec![*w as usize],
            (_, Some(ws), _) => ws.iter().map(|&w| w as usize).collect(),
            (_, _, Some(d)) => (0..fleet.domains.len())
                .filter(|&w| fleet.domains[w].contains(d))
                .collect(),
            _ => (0..fleet.domains.len()).collect(),
        };
        ws.sort_unstable();
        Targets::Workers(ws)
    }

    fn label(&self, targets: &Targets) -> String {
        let who = match (targets, &self.domain) {
            (Targets::Store, _) => "store".to_string(),
            (Targets::MostSessions, _) => "most_sessions".to_string(),
            (_, Some(d)) => d.clone(),
            (Targets::Workers(ws), _) => ws
                .iter()
                .map(|w| format!("w{w}"))
                .collect::<Vec<_>>()
                .join("+"),
        };
        format!("{} {who}", self.kind.as_str())
    }
}

/// The faults of a run: the scheduled ones, and for each stochastic (MTBF) entry and worker a
/// [`FaultStream`] whose next failure is drawn only when the previous one happens, so that the plan's
/// memory does not grow with the horizon (a week of `mtbf = "1s"` is one pending fault per worker).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaultPlan {
    /// Sorted by time: every scheduled fault, then each stream's first failure.
    pub faults: Vec<PlannedFault>,
    /// Per entry of `faults`: the stream it came from, if stochastic.
    pub stream_of: Vec<Option<usize>>,
    /// The stochastic streams, one per (entry, worker).
    pub streams: Vec<FaultStream>,
}

/// One worker's random failures from one `[[faults]]` entry: alternating times between failures and
/// repair times, drawn in that order from the stream `faults.N.worker.W`. Drawing lazily gives the very
/// failures that drawing them all up front would (same stream, same order).
#[derive(Clone, Debug, PartialEq)]
pub struct FaultStream {
    rng: rng::SimRng,
    distribution: Lifetime,
    shape: Option<Positive>,
    mtbf: SimDuration,
    /// Mean repair time; `None`: the first failure is for good (`restart = false`).
    repair_mean: Option<SimDuration>,
    /// No failure at or after this.
    horizon: SimTime,
    /// The failure's fields other than its time and repair.
    template: PlannedFault,
}

impl FaultStream {
    /// The failure drawn after `after` (the start of the run, or the end of the previous failure's
    /// repair); `None` once the stream is past its horizon.
    fn next(&mut self, after: SimTime) -> Option<PlannedFault> {
        let at = after + draw(&mut self.rng, self.distribution, self.shape, self.mtbf);
        if at >= self.horizon {
            return None;
        }
        let repair = self
            .repair_mean
            .map(|m| draw(&mut self.rng, self.distribution, self.shape, m));
        Some(PlannedFault {
            at,
            restart_after: repair,
            ..self.template.clone()
        })
    }

    /// The failure after `previous` (the last one this stream gave), if any: drawn when `previous`
    /// happens. A failure without repair ends the stream.
    pub fn after(&mut self, previous: &PlannedFault) -> Option<PlannedFault> {
        let r = previous.restart_after?;
        self.next(previous.at + r)
    }
}

impl FaultPlan {
    /// Expands `specs` (already validated) for a run of `horizon` under `seed`. Scheduled faults after
    /// the horizon are kept (the engine ignores what happens after the work is done); stochastic ones
    /// start at or before it and their streams stop there. Returns an error naming the two entries if
    /// scheduled faults contradict each other: a worker taken down again while it is still down, or two
    /// slowdowns (or two memory pressures) of one worker at once.
    pub fn build(
        specs: &[FaultSpec],
        fleet: &Fleet,
        seed: u64,
        horizon: SimTime,
    ) -> Result<FaultPlan, (usize, &'static str, String)> {
        let mut faults = Vec::new();
        let mut streams = Vec::new();
        for (i, s) in specs.iter().enumerate() {
            let targets = s.workers(fleet);
            let restart_of = |w: usize| -> Option<SimDuration> {
                if !s.restart {
                    None
                } else if s.kind == FaultKind::Drain {
                    s.restart_after
                } else {
                    Some(s.restart_after.unwrap_or(fleet.restart[w]))
                }
            };
            let planned = |at: SimTime, targets: Targets, restart_after: Option<SimDuration>| {
                let label = s.label(&targets);
                PlannedFault {
                    at,
                    kind: s.kind,
                    targets,
                    source: i,
                    restart_after,
                    kv_survives_restart: s.kv_survives_restart,
                    symptom: s.symptom.unwrap_or(if s.domain.is_some() {
                        Symptom::Unreachable
                    } else {
                        Symptom::Refused
                    }),
                    duration: s.duration,
                    factor: s.factor.map_or(1.0, |f| f.0),
                    fraction: s.fraction.map_or(0.0, |f| f.0),
                    grace: s.grace.unwrap_or(DEFAULT_GRACE),
                    data_loss: s.data_loss,
                    label,
                }
            };
            match (s.mtbf, &targets) {
                (Some(mtbf), Targets::Workers(ws)) => {
                    for &w in ws {
                        let mut stream = FaultStream {
                            rng: rng::stream(seed, &format!("faults.{i}.worker.{w}")),
                            distribution: s.distribution,
                            shape: s.shape,
                            mtbf,
                            repair_mean: s
                                .restart
                                .then(|| s.mttr.or(restart_of(w)).unwrap_or(fleet.restart[w])),
                            horizon,
                            template: planned(SimTime::ZERO, Targets::Workers(vec![w]), None),
                        };
                        if let Some(first) = stream.next(SimTime::ZERO) {
                            faults.push((first, Some(streams.len())));
                            streams.push(stream);
                        }
                    }
                }
                _ => {
                    let at = SimTime(s.at.expect("validated: scheduled faults have `at`").0);
                    let restart = match &targets {
                        Targets::Workers(ws) => {
                            // One restart time for the group: its slowest member's default.
                            ws.iter().map(|&w| restart_of(w)).max().flatten()
                        }
                        _ => restart_of(0),
                    };
                    faults.push((planned(at, targets, restart), None));
                }
            }
        }
        faults.sort_by(|(a, _), (b, _)| a.at.cmp(&b.at).then(a.source.cmp(&b.source)));
        let (faults, stream_of): (Vec<_>, Vec<_>) = faults.into_iter().unzip();
        check_overlaps(specs, &faults)?;
        Ok(FaultPlan {
            faults,
            stream_of,
            streams,
        })
    }

    /// A plan of scheduled faults only (sorted by time), as tests and custom drivers write them.
    pub fn scheduled(faults: Vec<PlannedFault>) -> FaultPlan {
        FaultPlan {
            stream_of: vec![None; faults.len()],
            faults,
            streams: Vec::new(),
        }
    }

    /// Whether there is no fault at all.
    pub fn is_empty(&self) -> bool {
        self.faults.is_empty()
    }

    /// Every fault of the plan up to its horizon, streams drawn to the end, sorted by time: what the
    /// lazy plan gives over a run, for tests and for counting (memory grows with the faults).
    pub fn expand(&self) -> Vec<PlannedFault> {
        let mut all = Vec::new();
        for (f, stream) in self.faults.iter().zip(&self.stream_of) {
            all.push(f.clone());
            if let Some(k) = *stream {
                let mut s = self.streams[k].clone();
                let mut last = f.clone();
                while let Some(next) = s.after(&last) {
                    all.push(next.clone());
                    last = next;
                }
            }
        }
        all.sort_by(|a, b| a.at.cmp(&b.at).then(a.source.cmp(&b.source)));
        all
    }
}

/// One draw of a duration with mean `mean`.
fn draw(
    r: &mut rng::SimRng,
    dist: Lifetime,
    shape: Option<Positive>,
    mean: SimDuration,
) -> SimDuration {
    let m = mean.as_secs_f64();
    let s = match dist {
        Lifetime::Exponential => Exp::new(1.0 / m).expect("positive mean").sample(r),
        Lifetime::Weibull => {
            let k = shape.map_or(1.0, |s| s.0);
            // Scale λ so that the mean λ·Γ(1 + 1/k) is `mean`.
            let lambda = m / gamma(1.0 + 1.0 / k);
            Weibull::new(lambda, k)
                .expect("positive parameters")
                .sample(r)
        }
    };
    // At least one nanosecond, so that time always moves on.
    SimDuration::from_secs_f64(s)
        .max(SimDuration(1))
        .min(SimDuration(u64::MAX / 4))
}

/// Γ(x) for x in [1, 2] and beyond, by the Lanczos approximation (g = 7, 9 terms; relative error < 1e-13).
fn gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + G + 0.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    (2.0 * std::f64::consts::PI).sqrt() * t.powf(x + 0.5) * (-t).exp() * a
}

/// Scheduled faults that contradict each other on one worker.
fn check_overlaps(
    specs: &[FaultSpec],
    faults: &[PlannedFault],
) -> Result<(), (usize, &'static str, String)> {
    // Per worker and class: the intervals taken so far, with their source.
    let scheduled: Vec<&PlannedFault> = faults
        .iter()
        .filter(|f| specs[f.source].mtbf.is_none())
        .collect();
    for (j, b) in scheduled.iter().enumerate() {
        let Targets::Workers(bw) = &b.targets else {
            continue;
        };
        for a in &scheduled[..j] {
            let Targets::Workers(aw) = &a.targets else {
                continue;
            };
            let class = |k: FaultKind| {
                if k.takes_down() {
                    0
                } else if k == FaultKind::Slowdown {
                    1
                } else {
                    2
                }
            };
            if class(a.kind) != class(b.kind) {
                continue;
            }
            let Some(w) = aw.iter().find(|w| bw.contains(w)) else {
                continue;
            };
            let a_end = match a.kind {
                FaultKind::Drain => a.restart_after.map_or(SimTime::MAX, |r| a.at + a.grace + r),
                FaultKind::Crash | FaultKind::Hang => {
                    a.restart_after.map_or(SimTime::MAX, |r| a.at + r)
                }
                _ => a.duration.map_or(SimTime::MAX, |d| a.at + d),
            };
            if b.at < a_end {
                return Err((
                    b.source,
                    "at",
                    format!(
                        "contradicts faults[{}] ({}): worker {w} is still under it at {}",
                        a.source, a.label, b.at
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
