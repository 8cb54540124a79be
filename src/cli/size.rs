//! `fleetsim size`: the cheapest fleet that meets every SLO, per candidate GPU × TP × policy.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result, bail};
use rayon::prelude::*;

use crate::compare::Contender;
use crate::hardware::GpuId;
use crate::sizing::search::{Outcome, smallest};
use crate::sizing::{Candidate, Evaluation, Headroom, Target, Tried, cost, evaluate, fleet, price};

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
    pub out: Option<&'a Path>,
    pub threads: Option<usize>,
    pub force: bool,
    pub quiet: bool,
}

/// One candidate's answer.
struct Sized {
    c: Candidate,
    usd_per_gpu_hour: f64,
    outcome: Result<Outcome, String>,
    tried: Tried,
}

impl Sized {
    fn found(&self) -> Option<(&Evaluation, Option<&Evaluation>)> {
        match &self.outcome {
            Ok(Outcome::Found { count, below }) => {
                Some((&self.tried[count], below.map(|b| &self.tried[&b])))
            }
            _ => None,
        }
    }
    fn per_hour(&self) -> Option<f64> {
        self.found()
            .map(|(e, _)| cost(self.usd_per_gpu_hour, self.c.tp, e.count, 0.0).0)
    }
}

pub(super) fn size(a: Args) -> Result<()> {
    let base = super::load_checked(a.scenario, a.set, a.force)?;
    if base.workers.len() != 1 {
        bail!(
            "{}: size reshapes one [[workers]] group (its gpu, tp and count); this scenario has {}",
            a.scenario.display(),
            base.workers.len()
        );
    }
    if !base.faults.is_empty() {
        bail!(
            "{}: size adds its own faults for --headroom; remove the scenario's [[faults]] first",
            a.scenario.display()
        );
    }
    let target = Target::from_scenario(&base, a.min_goodput)
        .map_err(|m| anyhow::anyhow!("{}: {m}", a.scenario.display()))?;
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
                match fleet(&base, &c, 1).validate() {
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
    if let Some(dir) = a.out {
        crate::output::prepare_dir(dir, &[a.scenario])?;
    }
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(a.threads.unwrap_or(cores).max(1))
        .build()
        .context("cannot start worker threads")?;
    let start = g.count.0;
    eprintln!(
        "sizing {} candidate(s) (headroom: {}; SLO: {})",
        candidates.len(),
        headroom_text(&a.headroom),
        slo_text(&target),
    );
    let bars = crate::progress::Bars::new(a.quiet);
    let bar = bars.counter("candidates sized", candidates.len() as u64);
    let counts_tried = std::sync::atomic::AtomicU64::new(0);
    let mut results: Vec<Sized> = pool.install(|| {
        candidates
            .par_iter()
            .map(|(c, usd)| {
                let mut tried = Tried::new();
                let outcome = smallest(start, a.max_workers, &mut tried, |n| {
                    let e = evaluate(&base, c, n, &a.headroom, &target);
                    let k = counts_tried.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                    bar.set_message(format!("{k} worker counts tried"));
                    e
                });
                bar.inc(1);
                Sized {
                    c: c.clone(),
                    usd_per_gpu_hour: *usd,
                    outcome,
                    tried,
                }
            })
            .collect()
    });
    bar.finish_and_clear();
    for r in &results {
        if let Err(e) = &r.outcome {
            bail!(
                "{} tp{} {}: {e}",
                r.c.gpu.as_str(),
                r.c.tp,
                r.c.policy.label
            );
        }
    }
    // Cheapest first; infeasible last, in candidate order.
    results.sort_by(|x, y| match (x.per_hour(), y.per_hour()) {
        (Some(a), Some(b)) => a.total_cmp(&b),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    });
    // Why each loser loses: the SLO it misses with the fleet the winner's budget buys.
    let budget = results[0].per_hour();
    let mut reasons = Vec::new();
    for (i, r) in results.iter_mut().enumerate() {
        let reason = if i == 0 && budget.is_some() {
            "cheapest".to_string()
        } else {
            why_it_loses(r, budget, &base, &a.headroom, &target)?
        };
        reasons.push(reason);
    }
    let md = report(&base.name, &target, &a.headroom, &results, &reasons, &unfit);
    out!("{md}");
    if let Some(dir) = a.out {
        let json = to_json(&results, &reasons);
        crate::output::write_dir(
            dir,
            &[
                ("size.md".into(), md.into_bytes()),
                ("size.json".into(), json.into_bytes()),
            ],
            &[a.scenario],
        )?;
        outln!("\nresults written to {}", dir.display());
    }
    Ok(())
}

fn why_it_loses(
    r: &mut Sized,
    budget: Option<f64>,
    base: &crate::scenario::Scenario,
    headroom: &Headroom,
    target: &Target,
) -> Result<String> {
    let Some((own, _)) = r.found() else {
        let max = match r.outcome {
            Ok(Outcome::Infeasible { max }) => max,
            _ => 0,
        };
        let miss = r.tried.get(&max).and_then(|e| e.worst.clone());
        return Ok(match miss {
            Some(m) => format!("misses the SLO even with {max} workers: {m}"),
            None => format!("misses the SLO even with {max} workers"),
        });
    };
    let own_count = own.count;
    let Some(budget) = budget else {
        return Ok(String::new());
    };
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
    if !r.tried.contains_key(&affordable) {
        let e = evaluate(base, &r.c, affordable, headroom, target).map_err(anyhow::Error::msg)?;
        r.tried.insert(affordable, e);
    }
    let e = &r.tried[&affordable];
    Ok(match &e.worst {
        Some(m) => format!("the cheapest fleet's budget buys {affordable} worker(s): {m}"),
        None => format!(
            "{affordable} workers would fit the budget and passed here, but {} fewer failed: the SLO is not monotone in the count for this candidate",
            own_count - affordable
        ),
    })
}

fn headroom_text(h: &Headroom) -> String {
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
        "{}, at 25%, 50% and 75% of the arrival window (the worst run counts)",
        parts.join("; or ")
    )
}

/// The targets as text: the whole traffic's (`p95 TTFT ≤ 600 ms, p95 TPOT ≤ 40 ms, goodput ≥ 95%`),
/// then each class's.
fn slo_text(t: &Target) -> String {
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
    let fleet = latency(t.ttft_p95_ms, t.tpot_p95_ms, t.min_goodput);
    if t.classes.is_empty() {
        return fleet;
    }
    let mut parts = vec![format!("all traffic: {fleet}")];
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

fn report(
    name: &str,
    target: &Target,
    headroom: &Headroom,
    results: &[Sized],
    reasons: &[String],
    unfit: &[(Candidate, String)],
) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# {name} — fleet sizing\n");
    let _ = writeln!(
        o,
        "SLO: {}; headroom: {}.\n",
        slo_text(target),
        headroom_text(headroom)
    );
    o.push_str("| rank | gpu | tp | policy | workers | GPUs | $/h | $/M output tokens | p95 TTFT ms | p95 TPOT ms | goodput | one fewer | runs | verdict |\n");
    o.push_str("|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|\n");
    for (i, (r, why)) in results.iter().zip(reasons).enumerate() {
        let runs: u32 = r.tried.values().map(|e| e.runs).sum();
        match r.found() {
            Some((e, below)) => {
                let (per_hour, per_m) =
                    cost(r.usd_per_gpu_hour, r.c.tp, e.count, e.output_tokens_per_s);
                let fewer = match below {
                    Some(b) => b
                        .worst
                        .as_ref()
                        .map_or("passes (not monotone)".into(), |m| format!("fails: {m}")),
                    None => "– (1 is the minimum)".into(),
                };
                let _ = writeln!(
                    o,
                    "| {} | {} | {} | {} | {} | {} | {:.2} | {} | {} | {} | {:.1}% | {} | {} | {} |",
                    i + 1,
                    r.c.gpu.as_str(),
                    r.c.tp,
                    r.c.policy.label,
                    e.count,
                    e.count * r.c.tp,
                    per_hour,
                    num(per_m, 3),
                    num(e.ttft_p95_ms, 0),
                    num(e.tpot_p95_ms, 1),
                    e.goodput * 100.0,
                    fewer,
                    runs,
                    why
                );
            }
            None => {
                let _ = writeln!(
                    o,
                    "| {} | {} | {} | {} | – | – | – | – | – | – | – | – | {} | {} |",
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
            "| – | {} | {} | {} | – | – | – | – | – | – | – | – | 0 | cannot run: {m} |",
            c.gpu.as_str(),
            c.tp,
            c.policy.label
        );
    }
    o
}

fn to_json(results: &[Sized], reasons: &[String]) -> String {
    let rows: Vec<serde_json::Value> = results
        .iter()
        .zip(reasons)
        .enumerate()
        .map(|(i, (r, why))| {
            let found = r.found();
            let (per_hour, per_m) = found.map_or((None, None), |(e, _)| {
                let (h, m) = cost(r.usd_per_gpu_hour, r.c.tp, e.count, e.output_tokens_per_s);
                (Some(h), m.is_finite().then_some(m))
            });
            let finite = |v: f64| v.is_finite().then_some(v);
            serde_json::json!({
                "rank": i + 1,
                "gpu": r.c.gpu.as_str(),
                "tp": r.c.tp,
                "policy": r.c.policy.label,
                "workers": found.map(|(e, _)| e.count),
                "usd_per_gpu_hour": r.usd_per_gpu_hour,
                "usd_per_hour": per_hour,
                "usd_per_million_output_tokens": per_m,
                "ttft_p95_ms": found.and_then(|(e, _)| finite(e.ttft_p95_ms)),
                "tpot_p95_ms": found.and_then(|(e, _)| finite(e.tpot_p95_ms)),
                "goodput": found.map(|(e, _)| e.goodput),
                "one_fewer_fails": found.and_then(|(_, b)| b.map(|b| b.worst.as_ref().map(|m| m.to_string()))),
                "tried": r.tried.values().map(|e| serde_json::json!({
                    "workers": e.count,
                    "feasible": e.feasible(),
                    "worst_miss": e.worst.as_ref().map(|m| m.to_string()),
                })).collect::<Vec<_>>(),
                "verdict": why,
            })
        })
        .collect();
    serde_json::to_string_pretty(&serde_json::json!({ "candidates": rows })).expect("json") + "\n"
}
