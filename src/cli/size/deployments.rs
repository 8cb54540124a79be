//! `size` of a fleet of several autoscaled deployments, one per model (`crate::sizing::deployments`):
//! each deployment sized on its own traffic with the single-deployment search, then, per policy, the
//! cheapest answers run together as the whole fleet and judged on every SLO of the scenario.

use std::fmt::Write as _;

use anyhow::{Context, Result, anyhow};

use super::{Args, Plan, ScaleRun, check_text, execute, markdown, num, plan, scaled, scales_json};
use super::{slo_text, thread_pool, write_out};
use crate::confidence::Estimate;
use crate::hardware::ModelId;
use crate::scenario::Scenario;
use crate::sizing::deployments::{Part, billed_usd_per_hour, deployment, whole_fleet};
use crate::sizing::{Evaluation, Headroom, Shape, Target, judge};

/// One policy's whole fleet: each deployment's cheapest answer under it, judged together.
struct WholeFleet {
    policy: String,
    /// The deployments' answers, in group order; empty when one has none under this policy.
    parts: Vec<Part>,
    /// Which deployment found no fleet under this policy, if one did not.
    missing: Option<String>,
    /// The whole fleet judged (no fault), and its dollars per hour over the replications.
    judged: Option<(Evaluation, Estimate)>,
}

impl WholeFleet {
    fn feasible(&self) -> bool {
        self.judged.as_ref().is_some_and(|(e, _)| e.feasible())
    }
    fn per_hour(&self) -> f64 {
        self.judged.as_ref().map_or(f64::INFINITY, |(_, c)| c.mean)
    }
}

/// The model of a deployment's plan (its one group's).
fn model(p: &Plan) -> ModelId {
    p.base.workers[0].model
}

pub(super) fn size(a: &Args, base: &Scenario) -> Result<()> {
    let file = a.scenario.display();
    let mut plans: Vec<Plan> = Vec::new();
    for (i, g) in base.workers.iter().enumerate() {
        let d = deployment(base, i).map_err(|(f, m)| anyhow!("{file}: {f}: {m}"))?;
        let mut p =
            plan(a, d).with_context(|| format!("sizing the deployment of {}", g.model.as_str()))?;
        p.traffic = format!("all {} requests", g.model.as_str());
        plans.push(p);
    }
    let target = Target::from_scenario(base, a.min_goodput).map_err(|m| anyhow!("{file}: {m}"))?;
    if let Some(dir) = a.out {
        crate::output::prepare_dir(dir, &[a.scenario])?;
    }
    let pool = thread_pool(a)?;
    let mut runs: Vec<Vec<ScaleRun>> = Vec::new();
    for p in &plans {
        runs.push(execute(a, p, &pool, &format!("{}: ", model(p).as_str()))?);
    }
    let mut md = format!(
        "# {} — fleet sizing, one autoscaled deployment per model\n\n\
         Each model's deployment is sized on its own: its `[[workers]]` group, the classes of the mix that ask for its model, its `[autoscaler.models]` entry, and the SLOs (the scenario's `[slo]` on its requests, each class's own); its tables follow. No other model's request reaches its replicas, and when every model's requests meet a p95 target, all requests together do. Then, per policy, each deployment's cheapest answer is run together as the whole fleet and judged on every SLO of the scenario, with no fault{}: that run is the table below, and its $/h the replicas of every model billed on average.\n\n\
         SLO: {}.\n\n",
        base.name,
        if a.headroom.is_none() {
            ""
        } else {
            " (the headroom was judged for each deployment on its own: losing its own workers)"
        },
        slo_text(&target, "all traffic"),
    );
    let mut fleets_json = Vec::new();
    for (k, &scale) in a.traffic_scales.iter().enumerate() {
        let mut whole = base.clone();
        if scale != 1.0 {
            whole
                .workload
                .scale_traffic(scale)
                .map_err(|m| anyhow!("{file}: --traffic-scale: {m}"))?;
        }
        let at_scale: Vec<&ScaleRun> = runs.iter().map(|r| &r[k]).collect();
        eprintln!("judging the whole fleet, each deployment at its cheapest answer (no fault)");
        let mut fleets = pool.install(|| whole_fleets(a, &whole, &target, &plans, &at_scale))?;
        fleets.sort_by(|x, y| {
            y.feasible()
                .cmp(&x.feasible())
                .then(x.per_hour().total_cmp(&y.per_hour()))
        });
        if a.traffic_scales.len() > 1 {
            let _ = writeln!(md, "## The whole fleet at traffic × {scale}\n");
        } else {
            md.push_str("## The whole fleet\n\n");
        }
        md.push_str(&fleet_table(&fleets));
        md.push('\n');
        fleets_json.push(serde_json::json!({
            "traffic_scale": scale,
            "fleets": fleets.iter().enumerate().map(|(i, f)| fleet_json(i, f)).collect::<Vec<_>>(),
        }));
    }
    for (p, r) in plans.iter().zip(&runs) {
        md.push_str(&markdown(a, p, r));
    }
    out!("{md}");
    let json = serde_json::json!({
        "replications": a.judging.replications,
        "max_replications": a.judging.max_replications,
        "confidence": crate::confidence::LEVEL,
        "fleets": fleets_json[0]["fleets"].clone(),
        "scales": fleets_json,
        "deployments": plans.iter().zip(&runs).map(|(p, r)| {
            let scales = scales_json(r);
            serde_json::json!({
                "model": model(p).as_str(),
                "candidates": scales[0]["candidates"].clone(),
                "scales": scales,
            })
        }).collect::<Vec<_>>(),
    });
    write_out(a, md, &json)
}

/// Per policy (in the candidates' order), the whole fleet of each deployment's cheapest answer under it,
/// judged.
fn whole_fleets(
    a: &Args,
    whole: &Scenario,
    target: &Target,
    plans: &[Plan],
    runs: &[&ScaleRun],
) -> Result<Vec<WholeFleet>> {
    let mut policies: Vec<&str> = Vec::new();
    for (c, _) in &plans[0].candidates {
        if !policies.contains(&c.policy.label.as_str()) {
            policies.push(&c.policy.label);
        }
    }
    let mut out = Vec::new();
    for policy in policies {
        let mut parts = Vec::new();
        let mut window = whole.duration;
        let mut missing = None;
        for (p, run) in plans.iter().zip(runs) {
            // Ranked cheapest first: the first found under this policy is the cheapest.
            let best = run
                .results
                .iter()
                .filter(|r| r.c.policy.label == policy)
                .find_map(|r| r.found().map(|(e, _, _)| (r, e.shape)));
            let Some((r, shape)) = best else {
                missing = Some(model(p).as_str().to_string());
                break;
            };
            window = window.max(r.window);
            parts.push(Part {
                model: model(p),
                candidate: r.c.clone(),
                shape,
                usd_per_replica_hour: r.usd_per_gpu_hour * f64::from(r.c.tp),
            });
        }
        if missing.is_some() {
            out.push(WholeFleet {
                policy: policy.to_string(),
                parts: Vec::new(),
                missing,
                judged: None,
            });
            continue;
        }
        let s = whole_fleet(whole, &parts, window);
        s.validate()
            .map_err(|(f, m)| anyhow!("the whole fleet under {policy}: {f}: {m}"))?;
        let shape = Shape::autoscaled(
            parts
                .iter()
                .map(|p| p.shape.min_replicas.unwrap_or(0))
                .sum(),
            parts.iter().map(|p| p.shape.decode).sum(),
        );
        let (e, calm) = judge(&s, shape, &Headroom::default(), target, &a.judging)
            .map_err(|m| anyhow!("the whole fleet under {policy}: {m}"))?;
        let cost: Vec<f64> = calm
            .iter()
            .map(|run| billed_usd_per_hour(run, &parts))
            .collect();
        out.push(WholeFleet {
            policy: policy.to_string(),
            parts,
            missing: None,
            judged: Some((e, Estimate::of(&cost))),
        });
    }
    Ok(out)
}

/// `llama-3.1-8b: h100 tp1 × 1–4; qwen3-32b: h100 tp1 × 0–2`.
fn parts_text(parts: &[Part]) -> String {
    parts
        .iter()
        .map(|p| {
            format!(
                "{}: {} tp{} × {}",
                p.model.as_str(),
                p.candidate.gpu.as_str(),
                p.candidate.tp,
                p.shape
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The most GPUs the fleet may hold: every deployment at its ceiling.
fn most_gpus(parts: &[Part]) -> u32 {
    parts.iter().map(|p| p.shape.decode * p.candidate.tp).sum()
}

fn fleet_table(fleets: &[WholeFleet]) -> String {
    let mut o = String::from(
        "| rank | policy | deployments (gpu, tp, replicas min–max) | GPUs at most | $/h | $/M output tokens | p95 TTFT ms | p95 TPOT ms | goodput % | binding SLO (margin) | replications | verdict |\n|---:|---|---|---:|---:|---:|---:|---:|---:|---|---:|---|\n",
    );
    for (i, f) in fleets.iter().enumerate() {
        let Some((e, usd)) = &f.judged else {
            let _ = writeln!(
                o,
                "| {} | {} | – | – | – | – | – | – | – | – | – | no fleet: the deployment of {} meets its SLOs with no candidate under this policy |",
                i + 1,
                f.policy,
                f.missing.as_deref().unwrap_or("?")
            );
            continue;
        };
        let verdict = match e.worst() {
            None => "passes".to_string(),
            Some(m) => format!("fails: {m}"),
        };
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            i + 1,
            f.policy,
            parts_text(&f.parts),
            most_gpus(&f.parts),
            usd.text(2),
            num(
                crate::sizing::per_million(usd.mean, e.output_tokens_per_s.mean),
                3
            ),
            e.ttft_p95_ms.text(0),
            e.tpot_p95_ms.text(1),
            scaled(&e.goodput, 100.0).text(1),
            check_text(e.binding()),
            e.replications,
            verdict
        );
    }
    o
}

fn fleet_json(rank: usize, f: &WholeFleet) -> serde_json::Value {
    let finite = |v: f64| v.is_finite().then_some(v);
    let e = f.judged.as_ref().map(|(e, _)| e);
    serde_json::json!({
        "rank": rank + 1,
        "policy": f.policy,
        "missing_deployment": f.missing,
        "deployments": f.parts.iter().map(|p| serde_json::json!({
            "model": p.model.as_str(),
            "gpu": p.candidate.gpu.as_str(),
            "tp": p.candidate.tp,
            "min_replicas": p.shape.min_replicas,
            "max_replicas": p.shape.decode,
            "usd_per_replica_hour": p.usd_per_replica_hour,
        })).collect::<Vec<_>>(),
        "gpus_at_most": most_gpus(&f.parts),
        "usd_per_hour": f.judged.as_ref().and_then(|(_, c)| finite(c.mean)),
        "usd_per_hour_ci95": f.judged.as_ref().and_then(|(_, c)| finite(c.half_width)),
        "replicas_mean": e.and_then(|e| finite(e.replicas_mean.mean)),
        "ttft_p95_ms": e.and_then(|e| finite(e.ttft_p95_ms.mean)),
        "tpot_p95_ms": e.and_then(|e| finite(e.tpot_p95_ms.mean)),
        "goodput": e.and_then(|e| finite(e.goodput.mean)),
        "feasible": f.feasible(),
        "replications": e.map(|e| e.replications),
        "binding": super::check_json(e.and_then(Evaluation::binding)),
        "worst_miss": super::check_json(e.and_then(Evaluation::worst)),
    })
}
