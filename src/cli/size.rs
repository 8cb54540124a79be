//! `fleetsim size`: the cheapest fleet that meets every SLO with confidence, per candidate GPU × TP ×
//! policy.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result, bail};
use rayon::prelude::*;

use crate::compare::Contender;
use crate::hardware::GpuId;
use crate::scenario::Scenario;
use crate::sizing::search::{Outcome, smallest, smallest_stable};
use crate::sizing::{
    Candidate, Check, Evaluation, Headroom, Judging, Shape, Target, cost, evaluate, fleet, price,
};
use crate::time::SimDuration;

mod deployments;

/// What `fleetsim size` was asked to do.
pub(super) struct Args<'a> {
    pub scenario: &'a Path,
    pub set: &'a [String],
    pub gpus: &'a [GpuId],
    pub tps: &'a [u32],
    pub policies: Option<&'a str>,
    pub headroom: Headroom,
    pub min_goodput: f64,
    pub max_workers: u32,
    pub judging: Judging,
    /// Traffic multipliers to size for (`[1.0]` unless `--traffic-scale`).
    pub traffic_scales: Vec<f64>,
    pub out: Option<&'a Path>,
    pub threads: Option<usize>,
    pub force: bool,
    pub quiet: bool,
}

/// Every shape judged for one candidate.
type Tried = BTreeMap<Shape, Evaluation>;

/// Per traffic scale: each candidate's label and answer.
type Growth = Vec<(f64, Vec<(String, Option<Shape>)>)>;

/// One candidate's answer.
struct Sized {
    c: Candidate,
    usd_per_gpu_hour: f64,
    /// A mixed fleet: dollars per worker-hour of each of its two groups.
    mix: Option<[f64; 2]>,
    outcome: Result<Answer, String>,
    tried: Tried,
    /// The idle latency floor and the SLOs it leaves less than 10% room (warnings).
    floor: Floor,
    /// The arrival window the answer was judged on: longer than the scenario's when the answer's runs
    /// had not reached steady state within a shorter one ([`longer_window`]).
    window: SimDuration,
}

/// What the table's reader must know about the arrival window `r` was judged on: extended, or still
/// too short for steady state at the cap.
fn window_note(r: &Sized, base: &Scenario) -> Option<String> {
    let (e, _, _) = r.found()?;
    let secs = |d: SimDuration| d.as_secs_f64();
    let still = e.window_too_short().then(|| {
        format!(
            "in {} of {} replications of the answer the warm-up ran to half the {} s window: \
             steady state may not have been reached, so the answer may be too small; a longer \
             `duration` (or a fixed `[metrics] warmup`) settles it",
            e.unsteady,
            e.replications,
            secs(r.window)
        )
    });
    match (r.window > base.duration, still) {
        (true, None) => Some(format!(
            "judged on a {} s arrival window instead of the scenario's {} s: within shorter ones, \
             the warm-up of a replication of the answer ran to half the window (steady state not \
             reached)",
            secs(r.window),
            secs(base.duration)
        )),
        (_, s) => s,
    }
}

/// How many times longer than the scenario's arrival window `size` may judge on.
const MAX_WINDOW_FACTOR: u64 = 4;

/// The arrival window to judge on when the answer's runs did not reach steady state within `s`'s:
/// twice as long, up to [`MAX_WINDOW_FACTOR`] times the scenario's; `None` when the workload would not
/// grow with it (a trace, a request cap) or the cap is reached.
fn longer_window(s: &Scenario, base: &Scenario) -> Option<SimDuration> {
    use crate::workload::WorkloadKind;
    if base.max_requests.is_some() || base.workload.kind == WorkloadKind::Trace {
        return None;
    }
    let longer = SimDuration(s.duration.0.saturating_mul(2));
    (longer.0 <= base.duration.0.saturating_mul(MAX_WINDOW_FACTOR)).then_some(longer)
}

/// A candidate's answer.
#[derive(Clone, Debug, PartialEq)]
enum Answer {
    /// `shape` passes; `fewer` are the shapes one worker smaller (in each searched dimension), judged
    /// and failed. `non_monotone`: a count below passed or one above failed.
    Found {
        shape: Shape,
        fewer: Vec<Shape>,
        non_monotone: bool,
    },
    /// Even `max` workers miss an SLO.
    Infeasible { max: Shape },
}

impl Sized {
    fn found(&self) -> Option<(&Evaluation, Vec<&Evaluation>, bool)> {
        match &self.outcome {
            Ok(Answer::Found {
                shape,
                fewer,
                non_monotone,
            }) => Some((
                &self.tried[shape],
                fewer.iter().filter_map(|f| self.tried.get(f)).collect(),
                *non_monotone,
            )),
            _ => None,
        }
    }
    fn workers(&self) -> Option<u32> {
        self.found().map(|(e, _, _)| e.shape.workers())
    }
    /// Dollars per hour of the answer.
    fn per_hour(&self) -> Option<f64> {
        self.found().map(|(e, _, _)| self.hourly(e))
    }
    /// Dollars per hour of a judged fleet: its workers (of a mixed fleet, each group's at its own
    /// price), or an autoscaled fleet's mean replicas billed; and per million output tokens.
    fn hourly_and_per_million(&self, e: &Evaluation) -> (f64, f64) {
        let tokens = e.output_tokens_per_s.mean;
        match (self.mix, e.shape.second) {
            (Some(p), Some(second)) => {
                let h = f64::from(e.shape.decode) * p[0] + f64::from(second) * p[1];
                (h, crate::sizing::per_million(h, tokens))
            }
            _ => cost(self.usd_per_gpu_hour, self.c.tp, e.billed_workers(), tokens),
        }
    }
    fn hourly(&self, e: &Evaluation) -> f64 {
        self.hourly_and_per_million(e).0
    }
}

/// The idle latency floor of a candidate: p95 TTFT and TPOT with the traffic thinned to
/// [`FLOOR_SCALE`], where nothing queues; and the SLOs within 10% of it.
#[derive(Clone, Debug, Default)]
struct Floor {
    ttft_p95_ms: Option<f64>,
    tpot_p95_ms: Option<f64>,
    warnings: Vec<String>,
}

/// Traffic scale of the floor run.
const FLOOR_SCALE: f64 = 0.02;

/// An SLO closer than this to the idle floor (relative) is warned about.
const FLOOR_ROOM: f64 = 0.10;

pub(super) fn size(a: Args) -> Result<()> {
    let base = super::load_checked(a.scenario, a.set, a.force)?;
    if crate::sizing::deployments::applies(&base) {
        return deployments::size(&a, &base);
    }
    let plan = plan(&a, base)?;
    if let Some(dir) = a.out {
        crate::output::prepare_dir(dir, &[a.scenario])?;
    }
    let runs = execute(&a, &plan, &thread_pool(&a)?, "")?;
    let md = markdown(&a, &plan, &runs);
    out!("{md}");
    let scales = scales_json(&runs);
    let json = serde_json::json!({
        "replications": a.judging.replications,
        "max_replications": a.judging.max_replications,
        "confidence": crate::confidence::LEVEL,
        // The first scale's candidates, as before scales existed.
        "candidates": scales[0]["candidates"].clone(),
        "scales": scales,
    });
    write_out(&a, md, &json)
}

/// What `size` will judge: the scenario (its own deployment's bounds applied), the targets, and every
/// candidate GPU × TP × policy that can run the model (with those that cannot, and why).
struct Plan {
    base: Scenario,
    target: Target,
    /// What the fleet-wide SLOs apply to, in the tables: "all traffic", or one deployment's requests.
    traffic: String,
    /// A mixed fleet: dollars per worker-hour of each of its two groups.
    mix: Option<[f64; 2]>,
    /// Each candidate with its GPU's price per hour.
    candidates: Vec<(Candidate, f64)>,
    unfit: Vec<(Candidate, String)>,
}

/// One traffic scale's answers, ranked, with why each loser loses.
struct ScaleRun {
    scale: f64,
    /// The scenario with its traffic scaled.
    scenario: Scenario,
    results: Vec<Sized>,
    reasons: Vec<String>,
}

/// Checks that `size` can reshape `base` as asked and lists the candidates.
fn plan(a: &Args, mut base: Scenario) -> Result<Plan> {
    if base.workers.len() == 1
        && let Some(auto) = &base.autoscaler
    {
        // The group's own `[autoscaler.models.NAME]` bounds become the table's: the bounds searched.
        base.autoscaler = Some(auto.for_model(base.workers[0].model.as_str()));
    }
    let pool = crate::sizing::pooled(&base);
    if !pool && let Some(i) = base.workers.iter().position(|g| g.colocate.is_some()) {
        bail!(
            "{}: workers[{i}]: size sizes co-located engines only as one pool, every [[workers]] group with the same colocate label (each GPU then holds one engine of each group); run this fleet at each count instead (`run --set workers[0].count=N --set workers[1].count=N`)",
            a.scenario.display()
        );
    }
    if pool && (a.headroom.workers > 0 || a.headroom.domain.is_some()) {
        bail!(
            "{}: --headroom with co-located engines is not built: losing a GPU takes every engine on it, and size's failure cases crash one worker",
            a.scenario.display()
        );
    }
    if base.workers.len() > 1 && !pool {
        if let Some(i) = base.workers.iter().position(|g| g.prefill_workers > 0) {
            bail!(
                "{}: workers[{i}]: size reshapes a disaggregated fleet (prefill_workers) only as the scenario's one [[workers]] group",
                a.scenario.display()
            );
        }
        if mixed(&base) {
            if base.workers.len() != 2 {
                bail!(
                    "{}: size searches a fleet of mixed GPU types (groups that differ in gpu or tp) over exactly two [[workers]] groups, one per type; this scenario has {}",
                    a.scenario.display(),
                    base.workers.len()
                );
            }
            if !a.gpus.is_empty() || !a.tps.is_empty() {
                bail!(
                    "{}: --gpus and --tp put every group on one type; a mixed fleet's types are its two groups' (workers[0] and workers[1])",
                    a.scenario.display()
                );
            }
        }
        if a.headroom.domain.is_some() {
            bail!(
                "{}: --headroom-domain places one group's workers in domains; with several [[workers]] groups use --headroom N",
                a.scenario.display()
            );
        }
    }
    if !base.faults.is_empty() {
        bail!(
            "{}: size adds its own faults for --headroom; remove the scenario's [[faults]] first",
            a.scenario.display()
        );
    }
    let disaggregated = base.workers[0].prefill_workers > 0;
    if disaggregated && a.headroom.domain.is_some() {
        bail!(
            "{}: --headroom-domain places workers in domains by group; with prefill_workers (a disaggregated fleet) use --headroom N",
            a.scenario.display()
        );
    }
    if base.autoscaler.is_some() && a.headroom.domain.is_some() {
        bail!(
            "{}: --headroom-domain places workers in several groups, and [autoscaler] scales one; use --headroom N",
            a.scenario.display()
        );
    }
    let target = Target::from_scenario(&base, a.min_goodput)
        .map_err(|m| anyhow::anyhow!("{}: {m}", a.scenario.display()))?;
    // A mixed fleet's price of one worker-hour of each group (GPU price × tp).
    let mix = if mixed(&base) {
        let per_worker = |g: &crate::scenario::WorkerGroup| {
            price(&base, g.gpu)
                .map(|usd| usd * f64::from(g.tp.0))
                .map_err(|m| anyhow::anyhow!("{}: {m}", a.scenario.display()))
        };
        Some([per_worker(&base.workers[0])?, per_worker(&base.workers[1])?])
    } else {
        None
    };
    let g = &base.workers[0];
    let gpus = if a.gpus.is_empty() {
        vec![g.gpu]
    } else {
        a.gpus.to_vec()
    };
    let tps = if a.tps.is_empty() {
        vec![g.tp.0]
    } else {
        a.tps.to_vec()
    };
    let policies = match a.policies {
        Some(list) => crate::compare::resolve(list, &base).map_err(anyhow::Error::msg)?,
        None => vec![Contender {
            label: base.router.policy.name().to_string(),
            router: base.router.clone(),
            scenario: None,
        }],
    };
    let smallest_shape = if disaggregated {
        Shape::disaggregated(1, 1)
    } else if mix.is_some() {
        Shape::mixed(1, 1)
    } else if let Some(a) = &base.autoscaler {
        Shape::autoscaled(a.min_replicas.min(1), 1)
    } else {
        Shape::aggregated(1)
    };
    let mut candidates = Vec::new();
    let mut unfit = Vec::new();
    for &gpu in &gpus {
        let usd =
            price(&base, gpu).map_err(|m| anyhow::anyhow!("{}: {m}", a.scenario.display()))?;
        for &tp in &tps {
            for p in &policies {
                let c = Candidate {
                    gpu,
                    tp,
                    policy: p.clone(),
                };
                match fleet(&base, &c, smallest_shape).validate() {
                    Ok(()) => candidates.push((c, usd)),
                    Err((field, m)) => unfit.push((c, format!("{field}: {m}"))),
                }
            }
        }
    }
    if candidates.is_empty() {
        bail!(
            "no candidate can run this model: {}",
            unfit
                .iter()
                .map(|(c, m)| format!("{} tp{}: {m}", c.gpu.as_str(), c.tp))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    Ok(Plan {
        base,
        target,
        traffic: "all traffic".into(),
        mix,
        candidates,
        unfit,
    })
}

/// The worker threads: `--threads`, else one per core.
fn thread_pool(a: &Args) -> Result<rayon::ThreadPool> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    rayon::ThreadPoolBuilder::new()
        .num_threads(a.threads.unwrap_or(cores).max(1))
        .build()
        .context("cannot start worker threads")
}

/// Sizes every candidate of `plan` at every traffic scale. `what` names the deployment in the
/// progress lines (empty for the whole scenario).
fn execute(a: &Args, plan: &Plan, pool: &rayon::ThreadPool, what: &str) -> Result<Vec<ScaleRun>> {
    let mut runs = Vec::new();
    for &scale in &a.traffic_scales {
        let mut scaled = plan.base.clone();
        if scale != 1.0 {
            scaled
                .workload
                .scale_traffic(scale)
                .map_err(|m| anyhow::anyhow!("{}: --traffic-scale: {m}", a.scenario.display()))?;
        }
        eprintln!(
            "sizing {}{} candidate(s){} (headroom: {}; SLO: {}; {} replications, up to {} where undecided)",
            what,
            plan.candidates.len(),
            if a.traffic_scales.len() > 1 {
                format!(" at traffic × {scale}")
            } else {
                String::new()
            },
            headroom_text(&a.headroom, &scaled),
            slo_text(&plan.target, &plan.traffic),
            a.judging.replications,
            a.judging.max_replications.max(a.judging.replications),
        );
        let results =
            pool.install(|| size_all(a, &scaled, &plan.target, &plan.candidates, plan.mix));
        let (results, reasons) = rank(results, &scaled, a, &plan.target)?;
        runs.push(ScaleRun {
            scale,
            scenario: scaled,
            results,
            reasons,
        });
    }
    Ok(runs)
}

/// The tables of every traffic scale, then (with several) when to grow.
fn markdown(a: &Args, plan: &Plan, runs: &[ScaleRun]) -> String {
    let mut md = String::new();
    let mut growth: Growth = Vec::new();
    for r in runs {
        let title = if a.traffic_scales.len() > 1 {
            format!("{} — fleet sizing at traffic × {}", plan.base.name, r.scale)
        } else {
            format!("{} — fleet sizing", plan.base.name)
        };
        md.push_str(&report(
            &title,
            plan,
            a,
            &r.scenario,
            &r.results,
            &r.reasons,
        ));
        md.push('\n');
        growth.push((
            r.scale,
            r.results
                .iter()
                .map(|x| (label(&r.scenario, &x.c), x.found().map(|(e, _, _)| e.shape)))
                .collect(),
        ));
    }
    if a.traffic_scales.len() > 1 {
        md.push_str(&growth_table(&growth));
    }
    md
}

/// `size.json`'s `scales`: every candidate of every traffic scale.
fn scales_json(runs: &[ScaleRun]) -> Vec<serde_json::Value> {
    runs.iter()
        .map(|r| to_json(r.scale, &r.scenario, &r.results, &r.reasons))
        .collect()
}

/// Writes `size.md` and `size.json` to `--out`, if given.
fn write_out(a: &Args, md: String, json: &serde_json::Value) -> Result<()> {
    if let Some(dir) = a.out {
        crate::output::write_dir(
            dir,
            &[
                ("size.md".into(), md.into_bytes()),
                (
                    "size.json".into(),
                    (serde_json::to_string_pretty(json).expect("json") + "\n").into_bytes(),
                ),
            ],
            &[a.scenario],
        )?;
        outln!("\nresults written to {}", dir.display());
    }
    Ok(())
}

/// The candidate as the notes name it: `h100 tp1 prefix_aware`, or a mixed fleet's
/// `h100+a100 tp1+1 prefix_aware`.
fn label(s: &Scenario, c: &Candidate) -> String {
    format!("{} tp{} {}", gpu_text(s, c), tp_text(s, c), c.policy.label)
}

/// Sizes every candidate (in parallel), in candidate order.
fn size_all(
    a: &Args,
    base: &Scenario,
    target: &Target,
    candidates: &[(Candidate, f64)],
    mix: Option<[f64; 2]>,
) -> Vec<Sized> {
    let bars = crate::progress::Bars::new(a.quiet);
    let bar = bars.counter("candidates sized", candidates.len() as u64);
    let judged = std::sync::atomic::AtomicU64::new(0);
    let out = candidates
        .par_iter()
        .map(|(c, usd)| {
            let mut s = base.clone();
            loop {
                let tried = std::sync::Mutex::new(Tried::new());
                let eval = |shape: Shape| -> Result<bool, String> {
                    if let Some(e) = tried.lock().expect("not poisoned").get(&shape) {
                        return Ok(e.feasible());
                    }
                    let e = evaluate(&s, c, shape, &a.headroom, target, &a.judging)?;
                    let ok = e.feasible();
                    tried.lock().expect("not poisoned").insert(shape, e);
                    let k = judged.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                    bar.set_message(format!("{k} fleet shapes judged"));
                    Ok(ok)
                };
                let outcome = if s.workers[0].prefill_workers > 0 {
                    search_disaggregated(&s, a.max_workers, &eval)
                } else if let Some(auto) = &s.autoscaler {
                    search_autoscaled(auto, a.max_workers, &eval, &tried)
                } else if let Some(prices) = mix {
                    let counts = [s.workers[0].count.0, s.workers[1].count.0];
                    search_mixed(counts, prices, a.max_workers, &eval)
                } else {
                    search_aggregated(scenario_shape(&s).workers(), a.max_workers, &eval, &tried)
                };
                let tried = tried.into_inner().expect("not poisoned");
                let too_short = match &outcome {
                    Ok(Answer::Found { shape, .. }) => tried[shape].window_too_short(),
                    _ => false,
                };
                if too_short && let Some(longer) = longer_window(&s, base) {
                    s.duration = longer;
                    continue;
                }
                let floor = idle_floor(&s, c, target);
                bar.inc(1);
                return Sized {
                    c: c.clone(),
                    usd_per_gpu_hour: *usd,
                    mix,
                    outcome,
                    tried,
                    floor,
                    window: s.duration,
                };
            }
        })
        .collect();
    bar.finish_and_clear();
    out
}

/// The smallest count from which every larger count judged passes (confirmed one above).
fn search_aggregated(
    start: u32,
    max: u32,
    eval: &dyn Fn(Shape) -> Result<bool, String>,
    tried: &std::sync::Mutex<Tried>,
) -> Result<Answer, String> {
    let passed_below = |n: u32| {
        tried
            .lock()
            .expect("not poisoned")
            .iter()
            .any(|(s, e)| s.decode < n && e.feasible())
    };
    let (outcome, non_monotone) =
        smallest_stable(start, max, |n| eval(Shape::aggregated(n)), passed_below)?;
    Ok(match outcome {
        Outcome::Found { count } => Answer::Found {
            shape: Shape::aggregated(count),
            fewer: (count > 1)
                .then(|| Shape::aggregated(count - 1))
                .into_iter()
                .collect(),
            non_monotone,
        },
        Outcome::Infeasible { max } => Answer::Infeasible {
            max: Shape::aggregated(max),
        },
    })
}

/// The answer `shape`, with the one-fewer shapes `fewer` judged for the record (the search may not
/// have run them).
fn confirmed(
    shape: Shape,
    fewer: Vec<Shape>,
    non_monotone: bool,
    eval: &dyn Fn(Shape) -> Result<bool, String>,
) -> Result<Answer, String> {
    for &f in &fewer {
        eval(f)?;
    }
    Ok(Answer::Found {
        shape,
        fewer,
        non_monotone,
    })
}

/// A fleet of two GPU types: the cheapest pair of counts found on a staircase, priced at `prices`
/// (dollars per worker-hour of the first and second group).
///
/// 1. The first type alone: the smallest count that passes (from the scenario's count).
/// 2. The second type alone, up to what the first alone costs.
/// 3. Then 1, 2, ... workers of the first type, each with the fewest of the second that passes (never
///    more than with one fewer of the first), while one more of the first could still undercut the
///    cheapest so far.
///
/// Every pair on the way is judged like a count; the cheapest passing pair wins (the first found on a
/// tie), confirmed with one worker fewer of each type judged. Feasibility is assumed to grow with
/// either count.
fn search_mixed(
    start: [u32; 2],
    prices: [f64; 2],
    max: u32,
    eval: &dyn Fn(Shape) -> Result<bool, String>,
) -> Result<Answer, String> {
    let cost =
        |s: Shape| f64::from(s.decode) * prices[0] + f64::from(s.second.unwrap_or(0)) * prices[1];
    let cheaper = |s: Shape, best: Option<Shape>| best.is_none_or(|b| cost(s) < cost(b));
    // How many of a type `budget` dollars per hour buy (`max` without a budget).
    let afford = |budget: Option<f64>, price: f64| {
        budget.map_or(max, |b| ((b / price + 1e-9).floor() as u32).min(max))
    };
    let mut best = None;
    if let Outcome::Found { count } = smallest(0, start[0], max, |n| eval(Shape::mixed(n, 0)))? {
        best = Some(Shape::mixed(count, 0));
    }
    let cap = afford(best.map(cost), prices[1]);
    let mut ceiling = cap;
    if cap >= 1
        && let Outcome::Found { count } =
            smallest(0, start[1].min(cap), cap, |n| eval(Shape::mixed(0, n)))?
    {
        let s = Shape::mixed(0, count);
        if cheaper(s, best) {
            best = Some(s);
        }
        ceiling = count;
    }
    let mut first = 1;
    while first < max {
        let spent = f64::from(first) * prices[0];
        let left = best.map(|b| cost(b) - spent);
        if left.is_some_and(|l| l < prices[1]) {
            break;
        }
        let cap = ceiling.min(max - first).min(afford(left, prices[1]));
        if cap == 0 {
            break;
        }
        if let Outcome::Found { count } = smallest(0, cap, cap, |n| eval(Shape::mixed(first, n)))? {
            let s = Shape::mixed(first, count);
            if cheaper(s, best) {
                best = Some(s);
            }
            ceiling = count;
        }
        first += 1;
    }
    let Some(shape) = best else {
        return Ok(Answer::Infeasible {
            max: Shape::mixed(max, 0),
        });
    };
    let (a, b) = (shape.decode, shape.second.unwrap_or(0));
    let mut fewer = Vec::new();
    // One fewer of either type, where a worker is left.
    if a >= 1 && a + b > 1 {
        fewer.push(Shape::mixed(a - 1, b));
    }
    if b >= 1 && a + b > 1 {
        fewer.push(Shape::mixed(a, b - 1));
    }
    confirmed(shape, fewer, false, eval)
}

/// An autoscaled fleet: the cheapest (`min_replicas`, `max_replicas`) found on a staircase.
///
/// 1. The smallest ceiling that passes with the scenario's floor (or the ceiling, where that is
///    smaller). When even `max` replicas fail with that floor (the fleet cannot grow fast enough for
///    the traffic's ramps, so cold starts break the SLO), the smallest floor that passes at `max`, then
///    the smallest ceiling with that floor.
/// 2. Then each higher floor in turn, with the smallest ceiling that passes at most the last one, while
///    the floor alone (billed all the time) still costs less than the cheapest pair so far and stays
///    within the ceiling. A higher floor costs more in the troughs but starts fewer replicas cold in
///    the ramps, so a tighter ceiling may pass with it. The climb stops as soon as the static fleet
///    one replica under the last ceiling fails: an autoscaled fleet never holds more replicas than its
///    ceiling, so no floor passes under that ceiling, and at the same ceiling a higher floor only keeps
///    more replicas warm (billed replicas are assumed to grow with the floor there).
///
/// The answer is the pair with the fewest replicas billed on average (the lower floor on a tie),
/// reported with one replica fewer in each bound, never below the scenario's floor (judged: a lower
/// floor may pass at a higher cost). Feasibility is assumed to grow with either bound.
fn search_autoscaled(
    auto: &crate::autoscale::AutoscalerSpec,
    max: u32,
    eval: &dyn Fn(Shape) -> Result<bool, String>,
    tried: &std::sync::Mutex<Tried>,
) -> Result<Answer, String> {
    let floor = auto.min_replicas;
    let with_floor = |n: u32| Shape::autoscaled(floor.min(n), n);
    let billed = |shape: Shape| {
        tried
            .lock()
            .expect("not poisoned")
            .get(&shape)
            .map_or(f64::INFINITY, |e| e.billed_workers())
    };
    let passed_below = |n: u32| {
        tried.lock().expect("not poisoned").iter().any(|(s, e)| {
            s.decode < n && s.min_replicas == Some(floor.min(s.decode)) && e.feasible()
        })
    };
    let (outcome, non_monotone) = smallest_stable(
        auto.max_replicas.0,
        max,
        |n| eval(with_floor(n)),
        passed_below,
    )?;
    let mut best = match outcome {
        Outcome::Found { count } => with_floor(count),
        Outcome::Infeasible { .. } => {
            // A higher floor: replicas kept warm through the ramps.
            let Outcome::Found { count: min } =
                smallest(floor, floor + 1, max, |m| eval(Shape::autoscaled(m, max)))?
            else {
                return Ok(Answer::Infeasible {
                    max: Shape::autoscaled(max, max),
                });
            };
            match smallest(min.max(1) - 1, max, max, |n| {
                eval(Shape::autoscaled(min, n))
            })? {
                Outcome::Found { count } => Shape::autoscaled(min, count),
                Outcome::Infeasible { .. } => Shape::autoscaled(min, max),
            }
        }
    };
    let mut last = best;
    loop {
        let min = last.min_replicas.unwrap_or(0) + 1;
        if min > last.decode || f64::from(min) >= billed(best) {
            break;
        }
        let under = last.decode - 1;
        if under >= 1 && !eval(Shape::autoscaled(under, under))? {
            // No fleet passes under this ceiling; a higher floor at it costs more.
            break;
        }
        let Outcome::Found { count } = smallest(min.max(1) - 1, last.decode, last.decode, |n| {
            eval(Shape::autoscaled(min, n))
        })?
        else {
            // A higher floor failed where a lower one passed: not monotone; stop climbing.
            break;
        };
        last = Shape::autoscaled(min, count);
        if billed(last) < billed(best) {
            best = last;
        }
    }
    let (min, ceiling) = (best.min_replicas.unwrap_or(0), best.decode);
    let mut fewer = Vec::new();
    if ceiling > min.max(1) {
        fewer.push(Shape::autoscaled(min, ceiling - 1));
    }
    if min > floor {
        fewer.push(Shape::autoscaled(min - 1, ceiling));
    }
    confirmed(best, fewer, non_monotone, eval)
}

/// A disaggregated fleet: for 1, 2, ... prefill workers, the fewest decode workers that pass (never more
/// than with one prefill worker fewer), while more prefill workers could still make a smaller fleet.
/// The answer is the smallest fleet found (fewer prefill workers on a tie), confirmed with one prefill
/// and one decode worker fewer both failing.
fn search_disaggregated(
    base: &Scenario,
    max: u32,
    eval: &dyn Fn(Shape) -> Result<bool, String>,
) -> Result<Answer, String> {
    let start = base.workers[0]
        .count
        .0
        .saturating_sub(base.workers[0].prefill_workers)
        .max(1);
    let mut best: Option<Shape> = None;
    let mut ceiling = max.saturating_sub(1).max(1);
    let mut prefill = 1;
    while prefill < max {
        if best.is_some_and(|b| prefill + 1 >= b.workers()) {
            break;
        }
        let cap = ceiling.min(max - prefill);
        let found = smallest(0, start.min(cap), cap, |d| {
            eval(Shape::disaggregated(prefill, d))
        })?;
        if let Outcome::Found { count } = found {
            let shape = Shape::disaggregated(prefill, count);
            if best.is_none_or(|b| shape.workers() < b.workers()) {
                best = Some(shape);
            }
            ceiling = count;
        }
        prefill += 1;
    }
    let Some(shape) = best else {
        return Ok(Answer::Infeasible {
            max: Shape::disaggregated(1, max.saturating_sub(1).max(1)),
        });
    };
    let fewer = [
        Shape::disaggregated(shape.prefill - 1, shape.decode),
        Shape::disaggregated(shape.prefill, shape.decode - 1),
    ]
    .into_iter()
    .filter(|f| f.prefill >= 1 && f.decode >= 1)
    .collect();
    confirmed(shape, fewer, false, eval)
}

/// The candidate's latency floor: one run of its starting fleet with the traffic thinned to
/// [`FLOOR_SCALE`] (nothing queues), and a warning for every SLO less than [`FLOOR_ROOM`] above it.
fn idle_floor(base: &Scenario, c: &Candidate, target: &Target) -> Floor {
    let mut s = fleet(base, c, scenario_shape(base));
    if s.workload.scale_traffic(FLOOR_SCALE).is_err() || s.validate().is_err() {
        return Floor::default();
    }
    let Ok(sim) = crate::engine::Simulation::from_scenario(&s) else {
        return Floor::default();
    };
    let Ok(run) = sim.try_run(&mut |_| {}) else {
        return Floor::default();
    };
    let sm = &run.summary;
    let p95 = |d: &crate::metrics::summary::Dist| (d.count > 0).then_some(d.p95);
    let mut floor = Floor {
        ttft_p95_ms: p95(&sm.ttft_ms),
        tpot_p95_ms: p95(&sm.tpot_ms),
        warnings: Vec::new(),
    };
    let mut warn = |who: &str, slo: &str, limit: Option<f64>, idle: Option<f64>| {
        if let (Some(limit), Some(idle)) = (limit, idle)
            && limit < idle * (1.0 + FLOOR_ROOM)
        {
            floor.warnings.push(format!(
                "{who}{slo} target {limit:.0} ms is within {:.0}% of the idle floor ({idle:.1} ms with the traffic × {FLOOR_SCALE}): the answer buys queue-free service, not capacity, and swings with small changes",
                FLOOR_ROOM * 100.0
            ));
        }
    };
    warn("", "p95 TTFT", target.ttft_p95_ms, floor.ttft_p95_ms);
    warn("", "p95 TPOT", target.tpot_p95_ms, floor.tpot_p95_ms);
    for (i, ct) in target.classes.iter().enumerate() {
        let cls = sm.classes.get(i);
        let who = format!("class {}: ", ct.name);
        warn(
            &who,
            "p95 TTFT",
            ct.ttft_p95_ms,
            cls.and_then(|k| p95(&k.ttft_ms)),
        );
        warn(
            &who,
            "p95 TPOT",
            ct.tpot_p95_ms,
            cls.and_then(|k| p95(&k.tpot_ms)),
        );
    }
    floor
}

/// Whether the scenario's groups differ in GPU type or TP: a mixed fleet.
fn mixed(s: &Scenario) -> bool {
    let g0 = &s.workers[0];
    s.workers.iter().any(|g| g.gpu != g0.gpu || g.tp != g0.tp)
}

/// The GPU column: the candidate's, or a mixed fleet's two types (`h100+a100`).
fn gpu_text(s: &Scenario, c: &Candidate) -> String {
    if mixed(s) {
        let names: Vec<&str> = s.workers.iter().map(|g| g.gpu.as_str()).collect();
        names.join("+")
    } else {
        c.gpu.as_str().to_string()
    }
}

/// The TP column: the candidate's, or a mixed fleet's two (`1+2`).
fn tp_text(s: &Scenario, c: &Candidate) -> String {
    if mixed(s) {
        let tps: Vec<String> = s.workers.iter().map(|g| g.tp.0.to_string()).collect();
        tps.join("+")
    } else {
        c.tp.to_string()
    }
}

/// GPUs in a fleet of `shape` (an autoscaled one: at its ceiling; a co-located pool: its worker count,
/// each GPU holding one engine of every group).
fn gpus(s: &Scenario, c: &Candidate, shape: Shape) -> u32 {
    match shape.second {
        Some(second) => shape.decode * s.workers[0].tp.0 + second * s.workers[1].tp.0,
        None => shape.workers() * c.tp,
    }
}

/// Workers per `[[workers]]` group of a fleet of `shape` ([`crate::sizing::apportion`]).
fn group_workers(s: &Scenario, shape: Shape) -> Vec<u32> {
    if let Some(second) = shape.second {
        return vec![shape.decode, second];
    }
    if s.workers.len() == 1 {
        return vec![shape.workers()];
    }
    if crate::sizing::pooled(s) {
        return vec![shape.workers(); s.workers.len()];
    }
    let counts: Vec<u32> = s.workers.iter().map(|g| g.count.0).collect();
    crate::sizing::apportion(&counts, shape.workers())
}

/// The shape as the table shows it: `4`, `1P+3D`, `2–5`, with several groups `8 (3+2+1+1+1)`,
/// mixed `3 h100 + 2 a100`.
fn shape_text(s: &Scenario, shape: Shape) -> String {
    if let Some(second) = shape.second {
        return format!(
            "{} {} + {second} {}",
            shape.decode,
            s.workers[0].gpu.as_str(),
            s.workers[1].gpu.as_str()
        );
    }
    if s.workers.len() == 1 {
        return shape.to_string();
    }
    if crate::sizing::pooled(s) {
        return format!("{shape} GPUs × {} engines", s.workers.len());
    }
    let parts: Vec<String> = group_workers(s, shape).iter().map(u32::to_string).collect();
    format!("{shape} ({})", parts.join("+"))
}

/// The scenario's own fleet as a shape: its autoscaler's bounds, its prefill and decode workers, or
/// its workers over every group.
fn scenario_shape(base: &Scenario) -> Shape {
    let g = &base.workers[0];
    match &base.autoscaler {
        Some(a) => Shape::autoscaled(a.min_replicas, a.max_replicas.0),
        None if mixed(base) => Shape::mixed(g.count.0, base.workers[1].count.0),
        None if base.workers.len() == 1 => {
            Shape::disaggregated(g.prefill_workers, g.count.0 - g.prefill_workers)
        }
        None if crate::sizing::pooled(base) => Shape::aggregated(g.count.0),
        None => Shape::aggregated(base.workers.iter().map(|g| g.count.0).sum()),
    }
}

/// Sorts cheapest first (infeasible last, in candidate order) and says why each loser loses.
fn rank(
    mut results: Vec<Sized>,
    base: &Scenario,
    a: &Args,
    target: &Target,
) -> Result<(Vec<Sized>, Vec<String>)> {
    for r in &results {
        if let Err(e) = &r.outcome {
            bail!("{}: {e}", label(base, &r.c));
        }
    }
    results.sort_by(|x, y| match (x.per_hour(), y.per_hour()) {
        (Some(a), Some(b)) => a.total_cmp(&b),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    });
    let budget = results[0].per_hour();
    let mut reasons = Vec::new();
    for (i, r) in results.iter_mut().enumerate() {
        let reason = if i == 0 && budget.is_some() {
            "cheapest".to_string()
        } else {
            why_it_loses(r, budget, base, a, target)?
        };
        reasons.push(reason);
    }
    Ok((results, reasons))
}

fn why_it_loses(
    r: &mut Sized,
    budget: Option<f64>,
    base: &Scenario,
    a: &Args,
    target: &Target,
) -> Result<String> {
    let Some(own_count) = r.workers() else {
        let max = match &r.outcome {
            Ok(Answer::Infeasible { max }) => *max,
            _ => Shape::aggregated(0),
        };
        let miss = r.tried.get(&max).and_then(|e| e.worst().cloned());
        return Ok(match miss {
            Some(m) => format!("misses the SLO even with {max} workers: {m}"),
            None => format!("misses the SLO even with {max} workers"),
        });
    };
    let Some(budget) = budget else {
        return Ok(String::new());
    };
    if let Some((e, _, _)) = r.found().filter(|(e, _, _)| e.shape.second.is_some()) {
        let own = r.hourly(e);
        return Ok(if own <= budget + 1e-9 {
            format!("ties on cost (${own:.2}/h)")
        } else {
            format!("${own:.2}/h against the cheapest's ${budget:.2}/h")
        });
    }
    if let Some((e, _, _)) = r.found().filter(|(e, _, _)| e.shape.min_replicas.is_some()) {
        let own = r.hourly(e);
        return Ok(if own <= budget + 1e-9 {
            format!("ties on cost (${own:.2}/h)")
        } else {
            format!(
                "${own:.2}/h on average ({:.2} replicas billed, {} allowed) against the cheapest's ${budget:.2}/h",
                e.billed_workers(),
                e.shape
            )
        });
    }
    let per_worker = r.usd_per_gpu_hour * f64::from(r.c.tp);
    let affordable = (budget / per_worker + 1e-9).floor() as u32;
    if affordable >= own_count {
        let own_cost = per_worker * f64::from(own_count);
        return Ok(format!("ties on cost (${own_cost:.2}/h)"));
    }
    if affordable == 0 {
        return Ok(format!(
            "one worker (${per_worker:.2}/h) costs more than the whole cheapest fleet (${budget:.2}/h)"
        ));
    }
    if base.workers[0].prefill_workers > 0 {
        return Ok(format!(
            "the cheapest fleet's budget buys {affordable} worker(s); this candidate needs {own_count}"
        ));
    }
    let shape = Shape::aggregated(affordable);
    if !r.tried.contains_key(&shape) {
        let e = evaluate(base, &r.c, shape, &a.headroom, target, &a.judging)
            .map_err(anyhow::Error::msg)?;
        r.tried.insert(shape, e);
    }
    let e = &r.tried[&shape];
    Ok(match e.worst() {
        Some(m) => format!("the cheapest fleet's budget buys {affordable} worker(s): {m}"),
        None => format!(
            "{affordable} workers would fit the budget and passed here, but {} fewer failed: the SLO is not monotone in the count for this candidate",
            own_count - affordable
        ),
    })
}

fn headroom_text(h: &Headroom, s: &Scenario) -> String {
    if h.is_none() {
        return "none".into();
    }
    let mut parts = Vec::new();
    if h.workers > 0 {
        parts.push(format!(
            "the {} worker(s) with the most conversations lost for good",
            h.workers
        ));
    }
    if let Some((label, size)) = &h.domain {
        parts.push(format!(
            "failure domain {label}-0 ({size} workers; workers placed {size} per domain) lost for good"
        ));
    }
    format!(
        "{}, at 25%, 50% and 75% of each replication's steady state, each judged on a full steady window of the requests arriving once the gateway must have marked the loss down ({} s after the crash: {} failed health checks {} s apart; the requests it sent to dead workers before that are the incident's, see `fleetsim run`) (the worst case counts)",
        parts.join("; or "),
        crate::sizing::detection_bound(s).as_secs_f64(),
        s.gateway.health_check_failures.0,
        s.gateway.health_check_interval.as_secs_f64()
    )
}

/// The targets as text: the whole traffic's (`p95 TTFT ≤ 600 ms, p95 TPOT ≤ 40 ms, goodput ≥ 95%`),
/// then each class's.
fn slo_text(t: &Target, traffic: &str) -> String {
    let latency = |ttft: Option<f64>, tpot: Option<f64>, goodput: f64| {
        let mut parts = Vec::new();
        if let Some(v) = ttft {
            parts.push(format!("p95 TTFT ≤ {v:.0} ms"));
        }
        if let Some(v) = tpot {
            parts.push(format!("p95 TPOT ≤ {v:.0} ms"));
        }
        parts.push(format!("goodput ≥ {:.0}%", goodput * 100.0));
        parts.join(", ")
    };
    let mut fleet = latency(t.ttft_p95_ms, t.tpot_p95_ms, t.min_goodput);
    if let Some(w) = &t.window {
        let _ = write!(fleet, ", also in the worst {} window", w.label);
    }
    if t.classes.is_empty() {
        return fleet;
    }
    let mut parts = vec![format!("{traffic}: {fleet}")];
    for c in &t.classes {
        parts.push(format!(
            "class {}: {}",
            c.name,
            latency(c.ttft_p95_ms, c.tpot_p95_ms, c.min_goodput)
        ));
    }
    parts.join("; ")
}

fn num(v: f64, decimals: usize) -> String {
    if v.is_finite() {
        format!("{v:.decimals$}")
    } else {
        "–".into()
    }
}

fn check_text(c: Option<&Check>) -> String {
    c.map_or("–".into(), |c| c.to_string())
}

fn report(
    title: &str,
    plan: &Plan,
    a: &Args,
    scenario: &Scenario,
    results: &[Sized],
    reasons: &[String],
) -> String {
    let (target, unfit) = (&plan.target, &plan.unfit);
    let mut o = String::new();
    let _ = writeln!(o, "# {title}\n");
    let _ = writeln!(
        o,
        "SLO: {}; headroom: {}.\n",
        slo_text(target, &plan.traffic),
        headroom_text(&a.headroom, scenario)
    );
    let _ = writeln!(
        o,
        "A fleet passes when every SLO holds with {:.0}% confidence over independent replications: the interval's upper bound of each p95 under its target, the lower bound of goodput above its floor ({} replications per fleet, up to {} where the interval straddles a target). Latencies are steady state (warm-up excluded).\n",
        crate::confidence::LEVEL * 100.0,
        a.judging.replications,
        a.judging.max_replications.max(a.judging.replications)
    );
    o.push_str("| rank | gpu | tp | policy | workers | GPUs | $/h | $/M output tokens | p95 TTFT ms | p95 TPOT ms | goodput % | binding SLO (margin) | worst failure case | one fewer | replications | runs | verdict |\n");
    o.push_str(
        "|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|---:|---:|---|\n",
    );
    let mut notes = Vec::new();
    if scenario.autoscaler.is_some() {
        notes.push(
            "**autoscaled**: workers `m–n` are the autoscaler's `min_replicas`–`max_replicas`, the pair with the fewest replicas billed on average among those judged (from the scenario's floor up); GPUs are the most the fleet may hold (max × tp); $/h and $/M output tokens come from the replicas billed on average over the run (starting and draining ones included), no-fault case, and rank the candidates."
                .to_string(),
        );
    }
    for (i, (r, why)) in results.iter().zip(reasons).enumerate() {
        let runs: u32 = r.tried.values().map(|e| e.runs).sum();
        for w in &r.floor.warnings {
            notes.push(format!("**warning** ({}): {w}", label(scenario, &r.c)));
        }
        if let Some(n) = window_note(r, scenario) {
            notes.push(format!("**note** ({}): {n}", label(scenario, &r.c)));
        }
        match r.found() {
            Some((e, fewer, non_monotone)) => {
                let (per_hour, per_m) = r.hourly_and_per_million(e);
                let fewer_text = if fewer.is_empty() {
                    "– (1 is the minimum)".to_string()
                } else {
                    fewer
                        .iter()
                        .map(|f| match f.worst() {
                            Some(m) => format!("{}: fails: {m}", f.shape),
                            None => format!("{}: passes", f.shape),
                        })
                        .collect::<Vec<_>>()
                        .join("; ")
                };
                if non_monotone {
                    notes.push(format!(
                        "**not monotone** ({}): some smaller fleet passed, or a larger one failed, in this search; {} is the smallest count from which every larger count judged passes (confirmed one above).",
                        label(scenario, &r.c),
                        e.shape
                    ));
                }
                let _ = writeln!(
                    o,
                    "| {} | {} | {} | {} | {} | {} | {:.2} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    i + 1,
                    gpu_text(scenario, &r.c),
                    tp_text(scenario, &r.c),
                    r.c.policy.label,
                    shape_text(scenario, e.shape),
                    gpus(scenario, &r.c, e.shape),
                    per_hour,
                    num(per_m, 3),
                    e.ttft_p95_ms.text(0),
                    e.tpot_p95_ms.text(1),
                    scaled(&e.goodput, 100.0).text(1),
                    check_text(e.binding()),
                    check_text(e.binding_failure()),
                    fewer_text,
                    e.replications,
                    runs,
                    why
                );
            }
            None => {
                let _ = writeln!(
                    o,
                    "| {} | {} | {} | {} | – | – | – | – | – | – | – | – | – | – | – | {} | {} |",
                    i + 1,
                    r.c.gpu.as_str(),
                    r.c.tp,
                    r.c.policy.label,
                    runs,
                    why
                );
            }
        }
    }
    for (c, m) in unfit {
        let _ = writeln!(
            o,
            "| – | {} | {} | {} | – | – | – | – | – | – | – | – | – | – | – | 0 | cannot run: {m} |",
            c.gpu.as_str(),
            c.tp,
            c.policy.label
        );
    }
    if !notes.is_empty() {
        o.push('\n');
        for n in notes {
            let _ = writeln!(o, "{n}\n");
        }
    }
    o
}

/// `e` multiplied by `k` (a fraction shown as a percentage).
fn scaled(e: &crate::confidence::Estimate, k: f64) -> crate::confidence::Estimate {
    crate::confidence::Estimate {
        n: e.n,
        mean: e.mean * k,
        sd: e.sd * k,
        half_width: e.half_width * k,
    }
}

/// "When must we grow": each candidate's answer at each traffic scale.
fn growth_table(growth: &Growth) -> String {
    let mut o = String::from("# When to grow: workers needed by traffic scale\n\n| candidate |");
    for (s, _) in growth {
        let _ = write!(o, " × {s} |");
    }
    o.push_str("\n|---|");
    for _ in growth {
        o.push_str("---:|");
    }
    o.push('\n');
    let mut labels: Vec<&String> = growth[0].1.iter().map(|(l, _)| l).collect();
    labels.sort();
    for l in labels {
        let _ = write!(o, "| {l} |");
        for (_, rows) in growth {
            let cell = rows
                .iter()
                .find(|(k, _)| k == l)
                .and_then(|(_, s)| *s)
                .map_or("–".to_string(), |s| s.to_string());
            let _ = write!(o, " {cell} |");
        }
        o.push('\n');
    }
    o
}

fn estimate_json(e: &crate::confidence::Estimate) -> serde_json::Value {
    let finite = |v: f64| v.is_finite().then_some(v);
    serde_json::json!({ "mean": finite(e.mean), "ci95": finite(e.half_width), "n": e.n })
}

fn check_json(c: Option<&Check>) -> serde_json::Value {
    let Some(c) = c else {
        return serde_json::Value::Null;
    };
    let finite = |v: f64| v.is_finite().then_some(v);
    serde_json::json!({
        "slo": c.slo,
        "class": c.class,
        "case": c.case,
        "mean": finite(c.estimate.mean),
        "ci95": finite(c.estimate.half_width),
        "bound": finite(c.bound()),
        "limit": c.limit,
        "margin": finite(c.margin()),
        "passes": c.passes(),
        "text": c.to_string(),
    })
}

fn to_json(
    scale: f64,
    scenario: &Scenario,
    results: &[Sized],
    reasons: &[String],
) -> serde_json::Value {
    let rows: Vec<serde_json::Value> = results
        .iter()
        .zip(reasons)
        .enumerate()
        .map(|(i, (r, why))| {
            let found = r.found();
            let (per_hour, per_m) = found.as_ref().map_or((None, None), |(e, _, _)| {
                let (h, m) = r.hourly_and_per_million(e);
                (Some(h), m.is_finite().then_some(m))
            });
            let finite = |v: f64| v.is_finite().then_some(v);
            let e = found.as_ref().map(|(e, _, _)| *e);
            serde_json::json!({
                "rank": i + 1,
                "gpu": gpu_text(scenario, &r.c),
                "group_gpus": if mixed(scenario) {
                    scenario.workers.iter().map(|g| g.gpu.as_str()).collect::<Vec<_>>()
                } else {
                    vec![r.c.gpu.as_str()]
                },
                "tp": r.c.tp,
                "policy": r.c.policy.label,
                "workers": e.map(|e| e.shape.workers()),
                "prefill_workers": e.map(|e| e.shape.prefill),
                "decode_workers": e.map(|e| e.shape.decode),
                "group_workers": e.map(|e| group_workers(scenario, e.shape)),
                "min_replicas": e.and_then(|e| e.shape.min_replicas),
                "max_replicas": e.and_then(|e| e.shape.min_replicas.map(|_| e.shape.decode)),
                "replicas_mean": e.and_then(|e| finite(e.replicas_mean.mean)),
                "usd_per_gpu_hour": r.usd_per_gpu_hour,
                "usd_per_hour": per_hour,
                "usd_per_million_output_tokens": per_m,
                "ttft_p95_ms": e.and_then(|e| finite(e.ttft_p95_ms.mean)),
                "ttft_p95_ms_ci95": e.and_then(|e| finite(e.ttft_p95_ms.half_width)),
                "tpot_p95_ms": e.and_then(|e| finite(e.tpot_p95_ms.mean)),
                "tpot_p95_ms_ci95": e.and_then(|e| finite(e.tpot_p95_ms.half_width)),
                "goodput": e.and_then(|e| finite(e.goodput.mean)),
                "warmup_s": e.map(|e| estimate_json(&e.warmup_s)),
                "window_s": r.window.as_secs_f64(),
                "window_extended": r.window > scenario.duration,
                "window_too_short": e.map(Evaluation::window_too_short),
                "replications": e.map(|e| e.replications),
                "binding": check_json(e.and_then(Evaluation::binding)),
                "worst_failure_case": check_json(e.and_then(Evaluation::binding_failure)),
                "non_monotone": found.as_ref().map(|(_, _, n)| *n),
                "one_fewer_fails": found.as_ref().map(|(_, fewer, _)| {
                    fewer.iter().map(|f| f.worst().map(|m| format!("{}: {m}", f.shape))).collect::<Option<Vec<_>>>().map(|v| v.join("; "))
                }),
                "idle_floor": {
                    "ttft_p95_ms": r.floor.ttft_p95_ms,
                    "tpot_p95_ms": r.floor.tpot_p95_ms,
                    "warnings": r.floor.warnings,
                },
                "tried": r.tried.values().map(|e| serde_json::json!({
                    "workers": e.shape.workers(),
                    "prefill_workers": e.shape.prefill,
                    "decode_workers": e.shape.decode,
                    "group_workers": group_workers(scenario, e.shape),
                    "min_replicas": e.shape.min_replicas,
                    "feasible": e.feasible(),
                    "replications": e.replications,
                    "binding": e.binding().map(|m| m.to_string()),
                    "worst_miss": e.worst().map(|m| m.to_string()),
                })).collect::<Vec<_>>(),
                "verdict": why,
            })
        })
        .collect();
    serde_json::json!({ "traffic_scale": scale, "candidates": rows })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cheapest pair passing `feasible` by brute force, the first type's count ascending on a tie.
    fn cheapest(prices: [f64; 2], max: u32, feasible: impl Fn(u32, u32) -> bool) -> Option<Shape> {
        let cost = |a: u32, b: u32| f64::from(a) * prices[0] + f64::from(b) * prices[1];
        let mut best: Option<(u32, u32)> = None;
        for a in 0..=max {
            for b in 0..=max - a {
                if a + b > 0
                    && feasible(a, b)
                    && best.is_none_or(|(x, y)| cost(a, b) < cost(x, y) - 1e-9)
                {
                    best = Some((a, b));
                }
            }
        }
        best.map(|(a, b)| Shape::mixed(a, b))
    }

    #[test]
    fn the_mixed_staircase_finds_the_cheapest_pair_a_brute_force_finds() {
        // Capacity a·ca + b·cb must reach the load: throughput-bound fleets of two GPU types.
        let mut cases = 0;
        for (ca, cb) in [(3.0, 2.0), (5.0, 2.0), (2.0, 3.0), (4.0, 1.0)] {
            for load in [4.0, 13.0, 20.5, 31.0] {
                for prices in [[3.0, 1.9], [3.0, 2.1], [6.0, 1.0], [1.0, 6.0], [2.5, 2.5]] {
                    let feasible = |a: u32, b: u32| f64::from(a) * ca + f64::from(b) * cb >= load;
                    let runs = std::cell::Cell::new(0);
                    let eval = |s: Shape| -> Result<bool, String> {
                        runs.set(runs.get() + 1);
                        Ok(feasible(s.decode, s.second.unwrap()))
                    };
                    let found = search_mixed([2, 2], prices, 40, &eval).unwrap();
                    let Answer::Found { shape, fewer, .. } = found else {
                        panic!("infeasible");
                    };
                    let want = cheapest(prices, 40, feasible).unwrap();
                    let cost = |s: Shape| {
                        f64::from(s.decode) * prices[0] + f64::from(s.second.unwrap()) * prices[1]
                    };
                    assert!(
                        (cost(shape) - cost(want)).abs() < 1e-9,
                        "capacities {ca}/{cb}, load {load}, prices {prices:?}: {shape} against {want}"
                    );
                    assert!(fewer.iter().all(|f| !feasible(f.decode, f.second.unwrap())));
                    // A staircase, not the whole grid (40 × 40 / 2 pairs).
                    assert!(runs.get() < 120, "{} runs", runs.get());
                    cases += 1;
                }
            }
        }
        assert_eq!(cases, 80);
    }

    /// A judged shape for the searches' record: one replication passing or failing, `billed` replicas.
    fn judged(shape: Shape, pass: bool, billed: f64) -> Evaluation {
        let none = crate::confidence::Estimate::of(&[]);
        Evaluation {
            count: shape.decode,
            shape,
            checks: vec![crate::sizing::Check {
                slo: "goodput".into(),
                class: None,
                case: "no fault".into(),
                estimate: crate::confidence::Estimate::of(&[if pass { 1.0 } else { 0.0 }]),
                limit: 0.5,
            }],
            replications: 1,
            runs: 1,
            ttft_p95_ms: none,
            tpot_p95_ms: none,
            goodput: none,
            output_tokens_per_s: none,
            warmup_s: none,
            replicas_mean: crate::confidence::Estimate::of(&[billed]),
            unsteady: 0,
            note: None,
        }
    }

    #[test]
    fn the_autoscaled_staircase_finds_the_fewest_billed_replicas_a_brute_force_finds() {
        // A day whose peak needs `peak` replicas (no ceiling under it passes, whatever the floor), and
        // whose ramps need `ramp` replicas warm: each one fewer on the floor needs one more of ceiling
        // (started early, and billed while it starts). Billed replicas lie between the bounds: the
        // floor all the time, and a `share` of the room above it.
        let mut cases = 0;
        for peak in [1, 3, 7] {
            for ramp in [0, 2, 5, 9] {
                for share in [0.1, 0.5, 0.9] {
                    for floor in [0, 1, 2] {
                        let passes = |m: u32, n: u32| n >= peak && n + m.min(ramp) >= peak + ramp;
                        let billed = |m: u32, n: u32| f64::from(m) + share * f64::from(n - m);
                        let max = 16;
                        // The space searched: floors from the scenario's (or the ceiling, where
                        // that is lower) up to the ceiling.
                        let want = (0..=max)
                            .flat_map(|m| (m.max(1)..=max).map(move |n| (m, n)))
                            .filter(|&(m, n)| m >= floor.min(n) && passes(m, n))
                            .map(|(m, n)| billed(m, n))
                            .fold(f64::INFINITY, f64::min);
                        let tried = std::sync::Mutex::new(Tried::new());
                        let eval = |s: Shape| -> Result<bool, String> {
                            let m = s.min_replicas.unwrap();
                            let ok = passes(m, s.decode);
                            tried
                                .lock()
                                .unwrap()
                                .insert(s, judged(s, ok, billed(m, s.decode)));
                            Ok(ok)
                        };
                        let auto: crate::autoscale::AutoscalerSpec = toml::from_str(&format!(
                            "min_replicas = {floor}\nmax_replicas = 4\nmetric = \"concurrency\"\ntarget = 8.0"
                        ))
                        .unwrap();
                        let what =
                            format!("peak {peak}, ramp {ramp}, floor {floor}, share {share}");
                        let found = search_autoscaled(&auto, max, &eval, &tried).unwrap();
                        if !want.is_finite() {
                            assert!(matches!(found, Answer::Infeasible { .. }), "{what}");
                            continue;
                        }
                        let Answer::Found { shape, fewer, .. } = found else {
                            panic!("{what}: infeasible, expected {want}");
                        };
                        let m = shape.min_replicas.unwrap();
                        assert!(passes(m, shape.decode), "{what}: {shape}");
                        assert!(m >= floor.min(shape.decode), "{what}: {shape}");
                        assert!(
                            (billed(m, shape.decode) - want).abs() < 1e-9,
                            "{what}: {shape} bills {}, the cheapest {want}",
                            billed(m, shape.decode)
                        );
                        assert!(
                            fewer
                                .iter()
                                .all(|f| f.min_replicas.unwrap() >= floor.min(f.decode))
                        );
                        // A staircase, not the grid (about 150 pairs); where the peak alone sets
                        // the ceiling, the static fleet under it failing ends the climb at once
                        // (without that, up to 24 pairs).
                        let runs = tried.lock().unwrap().len();
                        let most = if ramp == 0 { 5 } else { 50 };
                        assert!(runs <= most, "{what}: {runs} pairs judged");
                        cases += 1;
                    }
                }
            }
        }
        assert!(cases > 60, "{cases}");
    }
}
