//! `fleetsim size`: for each candidate (GPU × TP × policy), the smallest worker count that meets every
//! SLO of the scenario's traffic, with failure headroom simulated by the fault machinery, costed and
//! ranked.
//!
//! Invariants:
//! - A count is *feasible* when every case passes: the scenario as given and, with headroom K, the same
//!   traffic with the K workers holding the most conversations crashed for good at each of
//!   [`CRASH_FRACTIONS`] of the steady window (the worst case decides), judged from the gateway's
//!   worst-case detection of the loss on ([`failure_cases`]); with a headroom domain, the same with
//!   one whole failure domain crashed instead.
//! - The search assumes feasibility grows with the count. It brackets by doubling, bisects, and returns
//!   a count `n` with `n` feasible and `n - 1` *run and found infeasible* (or `n = 1`): never an
//!   unverified answer.
//! - Every run of a candidate uses the scenario's seed, so candidates see the same arrivals.

pub mod deployments;
pub mod search;

use std::collections::BTreeMap;

use crate::compare::Contender;
use crate::confidence::Estimate;
use crate::engine::Simulation;
use crate::faults::FaultSpec;
use crate::hardware::GpuId;
use crate::metrics::Summary;
use crate::scenario::Scenario;
use crate::time::SimDuration;

/// Where in the arrival window the headroom crashes are tried.
pub const CRASH_FRACTIONS: [f64; 3] = [0.25, 0.5, 0.75];

/// The SLOs a fleet must meet.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// p95 time to first token, ms.
    pub ttft_p95_ms: Option<f64>,
    /// p95 time per output token, ms.
    pub tpot_p95_ms: Option<f64>,
    /// Smallest fraction of arrived requests completed within every SLO.
    pub min_goodput: f64,
    /// Each traffic class's own targets (`kind = "mix"`), by class index; empty without a mix.
    pub classes: Vec<ClassTarget>,
    /// `[slo] window`: the fleet's p95 targets also hold in the worst window of this width.
    pub window: Option<WindowTarget>,
}

/// A windowed SLO: the p95 targets judged on every window of `width` in steady state, the worst counting.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowTarget {
    pub width: SimDuration,
    /// `1m`, as the tables show it.
    pub label: String,
}

/// The SLOs one traffic class must meet, judged on its own requests.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassTarget {
    pub name: String,
    /// p95 time to first token of the class's requests, ms.
    pub ttft_p95_ms: Option<f64>,
    /// p95 time per output token of the class's requests, ms.
    pub tpot_p95_ms: Option<f64>,
    /// Smallest fraction of the class's requests completed within the class's SLO.
    pub min_goodput: f64,
}

impl Target {
    /// The scenario's `[slo]` as p95 targets, with a goodput floor.
    /// A traffic mix's classes each add their own targets: the class's `slo` (its goodput floor
    /// defaulting to `min_goodput`), or the scenario's `[slo]` for a class without one.
    pub fn from_scenario(s: &Scenario, min_goodput: f64) -> Result<Target, String> {
        let classes: Vec<ClassTarget> = s
            .workload
            .class_list()
            .iter()
            .map(|c| {
                let slo = c.latency_slo(&s.slo);
                ClassTarget {
                    name: c.name.clone(),
                    ttft_p95_ms: slo.ttft.map(|d| d.as_millis_f64()),
                    tpot_p95_ms: slo.tpot.map(|d| d.as_millis_f64()),
                    min_goodput: c
                        .slo
                        .as_ref()
                        .and_then(|k| k.goodput)
                        .map_or(min_goodput, |g| g.0),
                }
            })
            .collect();
        let class_latency = classes
            .iter()
            .any(|c| c.ttft_p95_ms.is_some() || c.tpot_p95_ms.is_some());
        if s.slo.ttft.is_none() && s.slo.tpot.is_none() && !class_latency {
            return Err(if classes.is_empty() {
                "[slo]: size needs at least one of ttft and tpot".into()
            } else {
                "[slo]: size needs at least one of ttft and tpot, in [slo] or in a class's slo"
                    .into()
            });
        }
        Ok(Target {
            ttft_p95_ms: s.slo.ttft.map(|d| d.as_millis_f64()),
            tpot_p95_ms: s.slo.tpot.map(|d| d.as_millis_f64()),
            min_goodput,
            classes,
            window: s.slo.window.map(|w| WindowTarget {
                width: w,
                label: w.to_string(),
            }),
        })
    }
}

/// How `size` judges a fleet: independent replications and the confidence rule.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Judging {
    /// Replications every shape starts with (1: one run per case, judged on its point value).
    pub replications: u32,
    /// Most replications a shape may grow to while an SLO stays undecided (its mean passes but its
    /// interval reaches past the limit).
    pub max_replications: u32,
}

impl Default for Judging {
    fn default() -> Self {
        Judging {
            replications: 5,
            max_replications: 20,
        }
    }
}

/// One SLO judged in one case over the replications.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// `p95 TTFT`, `p95 TPOT`, `goodput`, or a windowed form (`worst-1m p95 TTFT`).
    pub slo: String,
    /// The traffic class judged; `None` for the whole fleet's traffic.
    pub class: Option<String>,
    /// Which case: `no fault` or `rack-0 lost at 2m30s`.
    pub case: String,
    /// The statistic over the replications. A replication where it has no value (no request completed
    /// in the span judged) makes the mean infinite: the check fails.
    pub estimate: Estimate,
    pub limit: f64,
}

impl Check {
    /// Whether higher values are better (goodput) rather than lower (latencies).
    pub fn higher_is_better(&self) -> bool {
        self.slo == "goodput"
    }

    /// The value the SLO is judged on: the 95% interval's bound on the unsafe side (upper for a
    /// latency, lower for goodput); the mean itself with one replication.
    pub fn bound(&self) -> f64 {
        let (lo, hi) = self.estimate.bounds();
        if self.higher_is_better() { lo } else { hi }
    }

    /// Whether the SLO holds with confidence.
    pub fn passes(&self) -> bool {
        let b = self.bound();
        if self.higher_is_better() {
            b >= self.limit
        } else {
            b <= self.limit
        }
    }

    /// Room between the judged bound and the limit: positive passes by that much, negative misses by
    /// that much. For a latency, relative to the target; for goodput, relative to the bad fraction the
    /// floor allows (a floor of 95% allows 5% bad requests; 2% bad leaves a margin of 60%).
    pub fn margin(&self) -> f64 {
        let b = self.bound();
        let m = if self.higher_is_better() {
            let allowed = 1.0 - self.limit;
            if allowed > 0.0 {
                (b - self.limit) / allowed
            } else if b >= self.limit {
                0.0
            } else {
                -1.0
            }
        } else {
            (self.limit - b) / self.limit
        };
        if m.is_nan() { f64::NEG_INFINITY } else { m }
    }

    /// Whether more replications could decide it: the mean meets the limit but the interval does not.
    pub fn undecided(&self) -> bool {
        let m = self.estimate.mean;
        let mean_ok = if self.higher_is_better() {
            m >= self.limit
        } else {
            m <= self.limit
        };
        mean_ok && !self.passes()
    }
}

impl std::fmt::Display for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        if let Some(c) = &self.class {
            write!(f, "class {c}: ")?;
        }
        let e = &self.estimate;
        if !e.mean.is_finite() {
            return write!(f, "{}: no request completed ({})", self.slo, self.case);
        }
        let (value, limit, unit, dec) = if self.higher_is_better() {
            (e.mean * 100.0, self.limit * 100.0, "%", 1)
        } else {
            (e.mean, self.limit, " ms", 0)
        };
        let hw = if e.half_width.is_finite() {
            let h = if self.higher_is_better() {
                e.half_width * 100.0
            } else {
                e.half_width
            };
            format!(" ± {h:.dec$}")
        } else {
            String::new()
        };
        let op = match (self.higher_is_better(), self.passes()) {
            (false, true) => "≤",
            (false, false) => ">",
            (true, true) => "≥",
            (true, false) => "<",
        };
        // A latency more than twice its target misses by a factor, not a percentage worth reading.
        let room = if !self.higher_is_better() && self.bound() > 2.0 * self.limit {
            format!("{:.0}× the target", self.bound() / self.limit)
        } else {
            format!("margin {:+.1}%", self.margin() * 100.0)
        };
        write!(
            f,
            "{} {value:.dec$}{hw}{unit} {op} {limit:.dec$}{unit} ({room}, {})",
            self.slo, self.case
        )
    }
}

/// A fleet shape: aggregated workers, or prefill and decode workers of a disaggregated fleet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Shape {
    /// Prefill workers (0: aggregated).
    pub prefill: u32,
    /// Decode workers (aggregated: every worker; autoscaled: `max_replicas`).
    pub decode: u32,
    /// With `[autoscaler]`: the fleet's `min_replicas` (`decode` is then its `max_replicas`, the
    /// replicas it may grow to); `None` for a fixed fleet.
    pub min_replicas: Option<u32>,
    /// A fleet of two GPU types (two `[[workers]]` groups that differ in `gpu` or `tp`): the second
    /// group's workers (`decode` is then the first group's); `None` otherwise.
    pub second: Option<u32>,
}

impl Shape {
    pub fn aggregated(n: u32) -> Shape {
        Shape {
            prefill: 0,
            decode: n,
            min_replicas: None,
            second: None,
        }
    }
    pub fn disaggregated(prefill: u32, decode: u32) -> Shape {
        Shape {
            prefill,
            decode,
            min_replicas: None,
            second: None,
        }
    }
    /// An autoscaled fleet of `min..=max` replicas.
    pub fn autoscaled(min: u32, max: u32) -> Shape {
        Shape {
            prefill: 0,
            decode: max,
            min_replicas: Some(min),
            second: None,
        }
    }
    /// A fleet of `first` workers of the first group's type and `second` of the second's.
    pub fn mixed(first: u32, second: u32) -> Shape {
        Shape {
            prefill: 0,
            decode: first,
            min_replicas: None,
            second: Some(second),
        }
    }
    /// Workers in all.
    pub fn workers(&self) -> u32 {
        self.prefill + self.decode + self.second.unwrap_or(0)
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        if let Some(min) = self.min_replicas {
            write!(f, "{min}–{}", self.decode)
        } else if let Some(second) = self.second {
            write!(f, "{}+{second}", self.decode)
        } else if self.prefill == 0 {
            write!(f, "{}", self.decode)
        } else {
            write!(f, "{}P+{}D", self.prefill, self.decode)
        }
    }
}

/// The outcome of one fleet shape: every SLO in every case over the replications.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation {
    /// The searched count: decode workers (every worker when aggregated).
    pub count: u32,
    pub shape: Shape,
    /// Every SLO in every case.
    pub checks: Vec<Check>,
    /// Replications run per case.
    pub replications: u32,
    /// Simulations run for this shape.
    pub runs: u32,
    /// The no-fault case's fleet-wide numbers (means over the replications).
    pub ttft_p95_ms: Estimate,
    pub tpot_p95_ms: Estimate,
    pub goodput: Estimate,
    pub output_tokens_per_s: Estimate,
    /// Steady state began this long after the start (no-fault case, mean over replications).
    pub warmup_s: Estimate,
    /// With `[autoscaler]`: replicas billed, time-averaged over the whole run (no-fault case); no
    /// value for a fixed fleet.
    pub replicas_mean: Estimate,
    /// No-fault replications whose detected warm-up is the latest allowed (half the arrival window):
    /// they may not have reached steady state.
    pub unsteady: u32,
    /// Why no simulation was needed (a failure that leaves no worker), if so.
    pub note: Option<String>,
}

impl Evaluation {
    pub fn feasible(&self) -> bool {
        self.checks.iter().all(Check::passes)
    }

    /// The workers paid for on average: every worker of a fixed fleet (of a mixed one, of both
    /// types); an autoscaled fleet's mean replicas billed (replicas starting count: a cloud bills a
    /// node from when it is provisioned).
    pub fn billed_workers(&self) -> f64 {
        match self.shape.min_replicas {
            Some(_) => self.replicas_mean.mean,
            None => f64::from(self.shape.workers()),
        }
    }

    /// Whether a no-fault replication may not have reached steady state within the arrival window
    /// (its warm-up is the latest allowed): the window is too short to judge this shape. One is
    /// enough: a ramp that outlasts half the window in some seeds is one the window cuts short.
    pub fn window_too_short(&self) -> bool {
        self.unsteady > 0
    }

    /// The check with the least margin: what decides (and, for a passing shape, what binds).
    pub fn binding(&self) -> Option<&Check> {
        self.checks
            .iter()
            .min_by(|a, b| a.margin().total_cmp(&b.margin()))
    }

    /// The worst failing check; `None` when every check passes.
    pub fn worst(&self) -> Option<&Check> {
        self.binding().filter(|c| !c.passes())
    }

    /// The binding check among the failure cases (`None` without headroom).
    pub fn binding_failure(&self) -> Option<&Check> {
        self.checks
            .iter()
            .filter(|c| c.case != NO_FAULT)
            .min_by(|a, b| a.margin().total_cmp(&b.margin()))
    }
}

/// The label of the case without a fault.
pub const NO_FAULT: &str = "no fault";

/// What a fleet must survive besides normal operation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Headroom {
    /// Lose this many workers: those with the most conversations.
    pub workers: u32,
    /// Lose one whole failure domain: workers are placed in domains `LABEL-0`, `LABEL-1`, ... of this
    /// many workers each (the last may be smaller), and the first (a full one) is lost.
    pub domain: Option<(String, u32)>,
}

impl Headroom {
    /// Whether no failure is simulated.
    pub fn is_none(&self) -> bool {
        self.workers == 0 && self.domain.is_none()
    }
}

/// A candidate fleet shape.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub gpu: GpuId,
    pub tp: u32,
    /// The routing policy (label and router).
    pub policy: Contender,
}

/// How `n` workers are shared among groups of `counts` workers: in proportion to the counts by
/// largest remainder (Hamilton's method; ties to the earlier group), then every group left with none
/// takes one from the largest share, so each model starts somewhere.
///
/// Invariants: the shares sum to `max(n, counts.len())`, each is at least 1, and `n` equal to the
/// counts' sum gives the counts back.
pub fn apportion(counts: &[u32], n: u32) -> Vec<u32> {
    let n = n.max(counts.len() as u32);
    let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
    let quota = |i: usize| u64::from(n) * u64::from(counts[i]);
    let mut shares: Vec<u32> = (0..counts.len())
        .map(|i| (quota(i) / total) as u32)
        .collect();
    let mut order: Vec<usize> = (0..counts.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(quota(i) % total));
    let left = n - shares.iter().sum::<u32>();
    for &i in order.iter().take(left as usize) {
        shares[i] += 1;
    }
    while let Some(empty) = shares.iter().position(|&s| s == 0) {
        let largest = (0..shares.len())
            .max_by_key(|&i| (shares[i], std::cmp::Reverse(i)))
            .expect("a group");
        shares[largest] -= 1;
        shares[empty] += 1;
    }
    shares
}

/// The scenario with `shape` workers of candidate `c`. One group is reshaped (a disaggregated group
/// keeps its first `shape.prefill` workers as prefill workers); several groups (a fleet of several
/// models) share the workers in proportion to their counts ([`apportion`]), each at least one; the
/// two groups of a mixed fleet ([`Shape::mixed`]) get their own counts on their own hardware.
pub fn fleet(base: &Scenario, c: &Candidate, shape: Shape) -> Scenario {
    let mut s = base.clone();
    if let Some(second) = shape.second {
        // Two GPU types: each group keeps its own hardware; a group of none is left out.
        let counts = [shape.decode, second];
        let mut i = 0;
        s.workers.retain_mut(|g| {
            let n = counts[i.min(1)];
            i += 1;
            g.count = crate::config::PositiveInt(n.max(1));
            n > 0
        });
        s.router = c.policy.router.clone();
        return s;
    }
    if pooled(base) {
        // One pool of GPUs, each holding one engine of every group: the shape counts GPUs.
        for g in &mut s.workers {
            g.count = crate::config::PositiveInt(shape.workers().max(1));
            candidate_hardware(g, c);
        }
        s.router = c.policy.router.clone();
        return s;
    }
    if s.workers.len() > 1 {
        let counts: Vec<u32> = s.workers.iter().map(|g| g.count.0).collect();
        for (g, n) in s
            .workers
            .iter_mut()
            .zip(apportion(&counts, shape.workers()))
        {
            g.count = crate::config::PositiveInt(n);
            candidate_hardware(g, c);
        }
        s.router = c.policy.router.clone();
        return s;
    }
    let g = &mut s.workers[0];
    match (shape.min_replicas, s.autoscaler.as_mut()) {
        (Some(min), Some(a)) => {
            // The replicas at t = 0 stay the scenario's, within the new bounds.
            a.min_replicas = min;
            a.max_replicas = crate::config::PositiveInt(shape.decode);
            g.count = crate::config::PositiveInt(g.count.0.clamp(min.max(1), shape.decode));
        }
        _ => g.count = crate::config::PositiveInt(shape.workers()),
    }
    g.prefill_workers = shape.prefill;
    candidate_hardware(g, c);
    s.router = c.policy.router.clone();
    s
}

/// Whether the fleet is one pool of shared GPUs: two or more groups, all with the same `colocate`
/// label, so that worker k of every group runs on GPU k and a count is a number of GPUs.
pub fn pooled(s: &Scenario) -> bool {
    let label = s.workers.first().and_then(|g| g.colocate.as_deref());
    s.workers.len() > 1
        && label.is_some()
        && s.workers.iter().all(|g| g.colocate.as_deref() == label)
}

/// Puts group `g` on the candidate's GPU and TP.
pub(crate) fn candidate_hardware(g: &mut crate::scenario::WorkerGroup, c: &Candidate) {
    if g.gpu != c.gpu || g.tp.0 != c.tp {
        // A fitted profile file belongs to the configuration it was measured on.
        g.profile = None;
        g.loaded_profile = None;
    }
    g.gpu = c.gpu;
    g.tp = crate::config::PositiveInt(c.tp);
}

/// [`fleet`] with its workers placed in failure domains of `size` workers named `LABEL-0`, `LABEL-1`, ...
pub fn fleet_in_domains(
    base: &Scenario,
    c: &Candidate,
    n: u32,
    label: &str,
    size: u32,
) -> Scenario {
    let mut s = fleet(base, c, Shape::aggregated(n));
    let template = s.workers[0].clone();
    let size = size.max(1);
    s.workers = (0..n.div_ceil(size))
        .map(|d| {
            let mut g = template.clone();
            g.count = crate::config::PositiveInt(size.min(n - d * size));
            g.failure_domain = crate::scenario::Domains(vec![format!("{label}-{d}")]);
            g
        })
        .collect();
    s
}

/// A crash for good at `at` of `target` (`worker = "most_sessions"` or `domain = "rack-0"`).
fn crash(target: &str, at: SimDuration) -> FaultSpec {
    let text = format!(
        "kind = \"crash\"\nworker_target\nat = \"{}ms\"\nrestart = false\n",
        at.as_millis_f64().round() as u64
    )
    .replace("worker_target", target);
    toml::from_str(&text).expect("a well-formed crash fault")
}

/// When the headroom crash of fraction `f` happens in a run whose steady state begins at `warmup`:
/// `f` of the way through the steady part of the arrival window, so the fault never lands in warm-up.
pub fn crash_time(s: &Scenario, warmup: SimDuration, f: f64) -> SimDuration {
    let steady = s.duration.0.saturating_sub(warmup.0);
    SimDuration(warmup.0 + (steady as f64 * f).round() as u64)
}

/// The longest the gateway of `s` can take to mark a crashed worker down: `health_check_failures`
/// failed checks `health_check_interval` apart (a crash just after a check waits for the next one).
/// Failed requests may mark it down sooner (`errors_to_mark_down`), never later.
pub fn detection_bound(s: &Scenario) -> SimDuration {
    let g = &s.gateway;
    SimDuration(
        g.health_check_interval
            .0
            .saturating_mul(u64::from(g.health_check_failures.0)),
    )
}

/// The failure cases of `s` (the fleet, in domains if one is to be lost), for a replication whose
/// no-fault run reached steady state at `warmup`: (label, scenario). Each crashes at one of
/// [`CRASH_FRACTIONS`] of the steady window and is judged on the requests that arrive once the
/// gateway must have marked the lost workers down ([`detection_bound`] after the crash: a fixed
/// warm-up), over as long a span as the no-fault case's steady window (the arrival window is
/// extended), so a late crash is judged on a full window too.
///
/// Why not from the crash itself: the requests the gateway sends to a dead worker before it knows
/// (up to `connect_timeout` each for an unreachable host) are the incident's victims, set by the
/// gateway's timeouts and health checks, and no worker count removes them; how many of them a p95
/// catches depends only on how long the judged span is, which made the answer flip with the seed.
/// What headroom buys is the fleet after the loss carrying the traffic, moved conversations and
/// their re-prefills included: that is what is judged.
pub fn failure_cases(
    s: &Scenario,
    headroom: &Headroom,
    warmup: SimDuration,
) -> Vec<(String, Scenario)> {
    let mut out = Vec::new();
    let steady = SimDuration(s.duration.0.saturating_sub(warmup.0));
    let detection = detection_bound(s);
    for f in CRASH_FRACTIONS {
        let at = crash_time(s, warmup, f);
        let from = SimDuration(at.0.saturating_add(detection.0));
        let judged = |mut c: Scenario| {
            c.duration = SimDuration(from.0.saturating_add(steady.0)).max(s.duration);
            judge_from(&mut c, from);
            c
        };
        if headroom.workers > 0 {
            let mut c = s.clone();
            c.faults
                .extend((0..headroom.workers).map(|_| crash("worker = \"most_sessions\"", at)));
            out.push((
                format!("{} lost at {}", headroom.workers, fraction_label(f)),
                judged(c),
            ));
        }
        if let Some((label, _)) = &headroom.domain {
            let mut c = s.clone();
            c.faults.push(crash(&format!("domain = \"{label}-0\""), at));
            out.push((
                format!("{label}-0 lost at {}", fraction_label(f)),
                judged(c),
            ));
        }
    }
    out
}

/// Where steady state began in a run, s.
fn warmup_s(s: &Summary) -> f64 {
    s.warmup.as_ref().map_or(0.0, |w| w.warmup_s)
}

/// Judges `s` only on the requests arriving from `at` on (a fixed warm-up ending at `at`).
fn judge_from(s: &mut Scenario, at: SimDuration) {
    s.metrics.warmup = crate::metrics::warmup::Warmup::Fixed(at);
}

/// `25% of steady state`: a case label that is the same for every replication (whose crash times
/// differ with their warm-ups).
fn fraction_label(f: f64) -> String {
    format!("{:.0}% of steady state", f * 100.0)
}

/// The statistic `value` of each run, as a check's estimate: a run without a value (no request
/// completed in the span judged) makes the mean infinite.
fn estimate_of(runs: &[&Summary], value: impl Fn(&Summary) -> f64) -> Estimate {
    let v: Vec<f64> = runs.iter().map(|s| value(s)).collect();
    if v.iter().any(|x| !x.is_finite()) {
        return Estimate {
            n: v.len() as u32,
            mean: f64::INFINITY,
            sd: f64::NAN,
            half_width: f64::NAN,
        };
    }
    Estimate::of(&v)
}

/// p95 of a distribution; NaN when it is empty.
fn p95(d: &crate::metrics::summary::Dist) -> f64 {
    if d.count > 0 { d.p95 } else { f64::NAN }
}

/// Every SLO of `t` judged on one case's runs (one per replication).
pub fn checks(case: &str, runs: &[&Summary], t: &Target) -> Vec<Check> {
    let mut out = Vec::new();
    let mut add =
        |class: Option<&str>, slo: String, limit: Option<f64>, e: &dyn Fn() -> Estimate| {
            if let Some(limit) = limit {
                out.push(Check {
                    slo,
                    class: class.map(str::to_string),
                    case: case.to_string(),
                    estimate: e(),
                    limit,
                });
            }
        };
    add(None, "p95 TTFT".into(), t.ttft_p95_ms, &|| {
        estimate_of(runs, |s| p95(&s.ttft_ms))
    });
    add(None, "p95 TPOT".into(), t.tpot_p95_ms, &|| {
        estimate_of(runs, |s| p95(&s.tpot_ms))
    });
    if let Some(w) = &t.window {
        add(
            None,
            format!("worst-{} p95 TTFT", w.label),
            t.ttft_p95_ms,
            &|| {
                estimate_of(runs, |s| {
                    s.slo_window
                        .as_ref()
                        .map_or(f64::NAN, |x| x.worst_ttft_p95_ms)
                })
            },
        );
        add(
            None,
            format!("worst-{} p95 TPOT", w.label),
            t.tpot_p95_ms,
            &|| {
                estimate_of(runs, |s| {
                    s.slo_window
                        .as_ref()
                        .map_or(f64::NAN, |x| x.worst_tpot_p95_ms)
                })
            },
        );
    }
    // A fleet without a fleet-wide SLO has a meaningless fleet goodput (every request is "good"):
    // judge it only when the fleet has a latency target, or there are no classes.
    if t.ttft_p95_ms.is_some() || t.tpot_p95_ms.is_some() || t.classes.is_empty() {
        add(None, "goodput".into(), Some(t.min_goodput), &|| {
            estimate_of(runs, |s| s.goodput.fraction)
        });
    }
    for (i, ct) in t.classes.iter().enumerate() {
        let class = |s: &Summary| s.classes.get(i).cloned();
        add(Some(&ct.name), "p95 TTFT".into(), ct.ttft_p95_ms, &|| {
            estimate_of(runs, |s| class(s).map_or(f64::NAN, |c| p95(&c.ttft_ms)))
        });
        add(Some(&ct.name), "p95 TPOT".into(), ct.tpot_p95_ms, &|| {
            estimate_of(runs, |s| class(s).map_or(f64::NAN, |c| p95(&c.tpot_ms)))
        });
        add(
            Some(&ct.name),
            "goodput".into(),
            Some(ct.min_goodput),
            &|| estimate_of(runs, |s| class(s).map_or(f64::NAN, |c| c.goodput)),
        );
    }
    out
}

/// Runs replications `from..to` of shape `shape` of `c`: per replication, the no-fault run, then its
/// failure cases placed in its steady state. Returns, per replication, (label, summary) per case, the
/// no-fault case first.
fn run_replications(
    s: &Scenario,
    headroom: &Headroom,
    from: u32,
    to: u32,
) -> Result<Vec<Vec<(String, Summary)>>, String> {
    use rayon::prelude::*;
    let run = |sc: &Scenario| -> Result<Summary, String> {
        Ok(Simulation::from_scenario(sc)?.try_run(&mut |_| {})?.summary)
    };
    (from..to)
        .into_par_iter()
        .map(|r| {
            let sr = crate::confidence::replicate::scenario_of(s, r);
            let calm = run(&sr)?;
            let warmup = SimDuration::from_secs_f64(warmup_s(&calm));
            let failures = failure_cases(&sr, headroom, warmup);
            let mut out = vec![(NO_FAULT.to_string(), calm)];
            let results: Vec<(String, Summary)> = failures
                .par_iter()
                .map(|(label, sc)| Ok((label.clone(), run(sc)?)))
                .collect::<Result<_, String>>()?;
            out.extend(results);
            Ok(out)
        })
        .collect()
}

/// Runs every case of `shape` of `c` over `judging`'s replications (more while an SLO is undecided, up
/// to the cap) and judges them against `target`.
pub fn evaluate(
    base: &Scenario,
    c: &Candidate,
    shape: Shape,
    headroom: &Headroom,
    target: &Target,
    judging: &Judging,
) -> Result<Evaluation, String> {
    let lost = match &headroom.domain {
        Some((_, size)) => headroom.workers.max(*size),
        None => headroom.workers,
    };
    let nothing = Estimate::of(&[]);
    let groups = base.workers.len() as u32;
    let impossible =
        if groups > 1 && shape.second.is_none() && !pooled(base) && shape.workers() < groups {
            // Fewer workers than groups: some model would start nowhere. Not a fleet `size` builds.
            Some(format!("{} workers for {groups} groups", shape.workers()))
        } else if lost >= shape.workers() {
            Some(format!(
                "losing {lost} of {} workers leaves none",
                shape.workers()
            ))
        } else {
            None
        };
    if let Some(why) = impossible {
        // Judged without a run: no goodput.
        return Ok(Evaluation {
            count: shape.decode,
            shape,
            checks: vec![Check {
                slo: "goodput".into(),
                class: None,
                case: why.clone(),
                estimate: Estimate::of(&[0.0]),
                limit: target.min_goodput,
            }],
            replications: 0,
            runs: 0,
            ttft_p95_ms: nothing,
            tpot_p95_ms: nothing,
            goodput: nothing,
            output_tokens_per_s: nothing,
            warmup_s: nothing,
            replicas_mean: nothing,
            unsteady: 0,
            note: Some(why),
        });
    }
    let s = match &headroom.domain {
        Some((label, size)) => fleet_in_domains(base, c, shape.workers(), label, *size),
        None => fleet(base, c, shape),
    };
    let name = format!("{} × {shape}", c.gpu.as_str());
    s.validate().map_err(|(f, m)| format!("{name}: {f}: {m}"))?;
    judge(&s, shape, headroom, target, judging).map(|(e, _)| e)
}

/// Runs every case of the fleet `s` as it stands (its shape, as the tables show it, is `shape`) over
/// `judging`'s replications (more while an SLO is undecided, up to the cap) and judges them against
/// `target`. Returns the evaluation and the no-fault run of each replication.
pub fn judge(
    s: &Scenario,
    shape: Shape,
    headroom: &Headroom,
    target: &Target,
    judging: &Judging,
) -> Result<(Evaluation, Vec<Summary>), String> {
    let mut reps = run_replications(s, headroom, 0, judging.replications.max(1))?;
    loop {
        let cases: Vec<&str> = reps[0].iter().map(|(l, _)| l.as_str()).collect();
        let mut all = Vec::new();
        for (i, case) in cases.iter().enumerate() {
            let runs: Vec<&Summary> = reps.iter().map(|r| &r[i].1).collect();
            all.extend(checks(case, &runs, target));
        }
        let n = reps.len() as u32;
        let undecided = all.iter().any(Check::undecided);
        let decided = all.iter().any(|c| !c.passes() && !c.undecided());
        if undecided && !decided && n < judging.max_replications && n >= 2 {
            let next = crate::confidence::replicate::next_count(n, judging.max_replications);
            reps.extend(run_replications(s, headroom, n, next)?);
            continue;
        }
        let calm: Vec<&Summary> = reps.iter().map(|r| &r[0].1).collect();
        let mean = |f: &dyn Fn(&Summary) -> f64| {
            Estimate::of(&calm.iter().map(|s| f(s)).collect::<Vec<_>>())
        };
        let evaluation = Evaluation {
            count: shape.decode,
            shape,
            checks: all,
            replications: n,
            runs: reps.iter().map(|r| r.len() as u32).sum(),
            ttft_p95_ms: mean(&|s| p95(&s.ttft_ms)),
            tpot_p95_ms: mean(&|s| p95(&s.tpot_ms)),
            goodput: mean(&|s| s.goodput.fraction),
            output_tokens_per_s: mean(&|s| s.throughput.output_tokens_per_s),
            warmup_s: mean(&|s| warmup_s(s)),
            replicas_mean: mean(&|s| s.autoscaler.as_ref().map_or(f64::NAN, |a| a.replicas_mean)),
            unsteady: calm
                .iter()
                .filter(|s| s.warmup.as_ref().is_some_and(|w| w.at_limit))
                .count() as u32,
            note: None,
        };
        let calm = reps.into_iter().map(|mut r| r.swap_remove(0).1).collect();
        return Ok((evaluation, calm));
    }
}

/// US dollars per GPU-hour of `gpu`: the scenario's `[prices]`, else the catalogue's.
pub fn price(s: &Scenario, gpu: GpuId) -> Result<f64, String> {
    if let Some(p) = s.prices.get(&gpu) {
        return Ok(p.0);
    }
    crate::hardware::price::catalogue_price(gpu)
        .map(|p| p.usd_per_gpu_hour)
        .ok_or_else(|| {
            format!(
                "the catalogue has no public price for {0}: set one in the scenario, `[prices]` `{0} = 2.5` (US dollars per GPU-hour)",
                gpu.as_str()
            )
        })
}

/// Fleet cost per hour and per million output tokens, for `workers` workers billed on average.
pub fn cost(usd_per_gpu_hour: f64, tp: u32, workers: f64, output_tokens_per_s: f64) -> (f64, f64) {
    let per_hour = usd_per_gpu_hour * f64::from(tp) * workers;
    (per_hour, per_million(per_hour, output_tokens_per_s))
}

/// Dollars per million output tokens of a fleet costing `per_hour` (NaN without output).
pub fn per_million(per_hour: f64, output_tokens_per_s: f64) -> f64 {
    if output_tokens_per_s > 0.0 {
        per_hour / (output_tokens_per_s * 3600.0) * 1e6
    } else {
        f64::NAN
    }
}

/// Evaluations of one candidate, by count (the search's memory).
pub type Tried = BTreeMap<u32, Evaluation>;

#[cfg(test)]
mod tests {
    use super::*;

    const S: &str = r#"
name = "t"
duration = "10s"

[[workers]]
count = 2
gpu = "h100"
model = "llama-3.1-8b"

[workload]
kind = "poisson"
rate = 5.0
prompt = { dist = "fixed", tokens = 100 }
output = { dist = "fixed", tokens = 10 }

[slo]
ttft = "1s"
"#;

    #[test]
    fn the_scenario_price_wins_over_the_catalogue() {
        let plain = Scenario::parse(S, "s.toml", &[]).unwrap();
        assert_eq!(price(&plain, GpuId::H100).unwrap(), 3.00);
        let e = price(&plain, GpuId::L40s).unwrap_err();
        assert!(e.contains("[prices]") && e.contains("l40s"), "{e}");
        let own = Scenario::parse(
            &format!("{S}\n[prices]\nh100 = 2.1\nl40s = 0.9\n"),
            "s.toml",
            &[],
        )
        .unwrap();
        assert_eq!(price(&own, GpuId::H100).unwrap(), 2.1);
        assert_eq!(price(&own, GpuId::L40s).unwrap(), 0.9);
    }

    #[test]
    fn bad_prices_name_the_line() {
        let text = format!("{S}\n[prices]\nh900 = 2.1\n");
        let line = text.lines().position(|l| l.starts_with("h900")).unwrap() + 1;
        let e = Scenario::parse(&text, "s.toml", &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(&format!("s.toml:{line}:")) && e.contains("h900"),
            "{e}"
        );
        let e = Scenario::parse(&format!("{S}\n[prices]\nh100 = -1\n"), "s.toml", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("greater than 0"), "{e}");
    }

    fn check(slo: &str, values: &[f64], limit: f64) -> Check {
        Check {
            slo: slo.into(),
            class: None,
            case: NO_FAULT.into(),
            estimate: Estimate::of(values),
            limit,
        }
    }

    #[test]
    fn a_latency_passes_on_its_upper_bound_and_goodput_on_its_lower() {
        // Mean 18.9 under a 19 ms target, but the interval reaches past it: not confidently met, and
        // more replications could decide it.
        let c = check("p95 TPOT", &[18.5, 19.3, 18.9, 18.7, 19.1], 19.0);
        assert!(c.estimate.mean < 19.0 && !c.passes() && c.undecided());
        assert!(c.margin() < 0.0);
        // Well under: passes with a positive margin, the bound (not the mean) deciding it.
        let c = check("p95 TPOT", &[15.0, 15.2, 14.9, 15.1, 15.0], 19.0);
        assert!(c.passes() && !c.undecided());
        assert!((c.margin() - (19.0 - c.bound()) / 19.0).abs() < 1e-12 && c.bound() > 15.04);
        // Mean over: fails, and more replications would not change that.
        let c = check("p95 TTFT", &[620.0, 640.0, 610.0], 600.0);
        assert!(!c.passes() && !c.undecided());
        assert!(c.to_string().contains("(margin -"), "{c}");
        // Far over (a hopeless fleet): the miss is printed as a factor of the target, not −113,700%.
        let c = check("p95 TTFT", &[569_000.0], 500.0);
        assert_eq!(
            c.to_string(),
            "p95 TTFT 569000 ms > 500 ms (1138× the target, no fault)"
        );
        // Goodput: the lower bound must reach the floor.
        let c = check("goodput", &[0.96, 0.94, 0.97, 0.95, 0.96], 0.95);
        assert!(!c.passes() && c.undecided(), "{c}");
        let c = check("goodput", &[0.99, 0.995, 0.99], 0.95);
        assert!(c.passes(), "{c}");
        // One replication: judged on its value alone.
        assert!(check("p95 TTFT", &[599.0], 600.0).passes());
        assert!(!check("p95 TTFT", &[601.0], 600.0).passes());
    }

    #[test]
    fn a_run_without_a_value_fails_its_check() {
        let s = Scenario::parse(S, "s.toml", &[]).unwrap();
        let mut sm = crate::engine::Simulation::from_scenario(&s)
            .unwrap()
            .run(&mut |_| {})
            .summary;
        let t = Target::from_scenario(&s, 0.95).unwrap();
        let ok = checks(NO_FAULT, &[&sm], &t);
        assert!(ok.iter().all(Check::passes), "{ok:?}");
        sm.ttft_ms.count = 0;
        let bad = checks(NO_FAULT, &[&sm], &t);
        let ttft = bad.iter().find(|c| c.slo == "p95 TTFT").unwrap();
        assert!(!ttft.passes() && ttft.estimate.mean.is_infinite());
        assert!(ttft.to_string().contains("no request completed"), "{ttft}");
    }

    #[test]
    fn failure_cases_crash_in_steady_state_and_are_judged_on_a_full_window_after_detection() {
        let s = Scenario::parse(S, "s.toml", &[]).unwrap();
        let h = Headroom {
            workers: 1,
            domain: None,
        };
        let warmup = SimDuration::from_secs(2);
        let cases = failure_cases(&s, &h, warmup);
        assert_eq!(cases.len(), CRASH_FRACTIONS.len());
        for ((label, c), f) in cases.iter().zip(CRASH_FRACTIONS) {
            let at = c.faults[0].at.expect("a timed crash");
            // 10 s window, 2 s warm-up: crashes at 2 + 8·f seconds.
            assert_eq!(at, SimDuration::from_secs_f64(2.0 + 8.0 * f), "{label}");
            // Judged from the gateway's worst-case detection (3 failed checks 5 s apart) on, for a
            // whole steady window (8 s).
            let from = SimDuration(at.0 + 15_000_000_000);
            assert_eq!(detection_bound(&s), SimDuration::from_secs(15));
            assert_eq!(
                c.metrics.warmup,
                crate::metrics::warmup::Warmup::Fixed(from),
                "{label}"
            );
            assert_eq!(c.duration, SimDuration(from.0 + 8_000_000_000));
        }
    }

    #[test]
    fn apportion_keeps_proportions_and_one_per_group() {
        assert_eq!(apportion(&[3, 2, 1, 1, 1], 8), vec![3, 2, 1, 1, 1]);
        assert_eq!(apportion(&[3, 2, 1, 1, 1], 16), vec![6, 4, 2, 2, 2]);
        assert_eq!(apportion(&[3, 2, 1, 1, 1], 5), vec![1, 1, 1, 1, 1]);
        assert_eq!(apportion(&[3, 2, 1, 1, 1], 3), vec![1, 1, 1, 1, 1]);
        // 10 by 3:2:1:1:1 of 8 = 3.75, 2.5, 1.25 ×3: floors 3, 2, 1, 1, 1 and the 2 left to the
        // largest remainders, 0.75 and 0.5.
        assert_eq!(apportion(&[3, 2, 1, 1, 1], 10), vec![4, 3, 1, 1, 1]);
        // 6: 2.25, 1.5, 0.75 ×3: floors 2, 1, 0, 0, 0, the 3 left to 0.75 ×3; then none is empty.
        assert_eq!(apportion(&[3, 2, 1, 1, 1], 6), vec![2, 1, 1, 1, 1]);
        // 2:1 at 4 workers: 2.67, 1.33: 3 and 1.
        assert_eq!(apportion(&[2, 1], 4), vec![3, 1]);
        for n in 5..40 {
            let a = apportion(&[3, 2, 1, 1, 1], n);
            assert_eq!(a.iter().sum::<u32>(), n);
            assert!(a[0] >= a[1] && a[1] >= a[2], "{a:?}");
        }
    }

    #[test]
    fn cost_per_hour_and_per_million_tokens() {
        // 4 workers × TP 2 × $3/GPU-h = $24/h; 1,000 output tokens/s = 3.6 M tokens/h → $6.67 per M.
        let (h, m) = cost(3.0, 2, 4.0, 1000.0);
        assert_eq!(h, 24.0);
        assert!((m - 24.0 / 3.6).abs() < 1e-12);
        assert!(cost(3.0, 1, 1.0, 0.0).1.is_nan());
    }

    #[test]
    fn domains_hold_at_most_their_size_and_cover_the_fleet() {
        let s = Scenario::parse(S, "s.toml", &[]).unwrap();
        let c = Candidate {
            gpu: GpuId::H200,
            tp: 1,
            policy: Contender {
                label: "round_robin".into(),
                router: s.router.clone(),
                scenario: None,
            },
        };
        let f = fleet_in_domains(&s, &c, 10, "rack", 4);
        let counts: Vec<u32> = f.workers.iter().map(|g| g.count.0).collect();
        assert_eq!(counts, [4, 4, 2]);
        assert_eq!(f.workers[2].failure_domain.0, ["rack-2"]);
        assert!(f.workers.iter().all(|g| g.gpu == GpuId::H200));
        assert!(f.validate().is_ok());
    }
}
