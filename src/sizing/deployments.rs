//! `size` of a fleet of several autoscaled deployments: one `[[workers]]` group per model, each scaled
//! by its own autoscaler (`[autoscaler.models.NAME]`), as KServe and llm-d deploy one Deployment and
//! one HorizontalPodAutoscaler per model.
//!
//! Such deployments share nothing but the gateway: the scenario's validation gives every group its own
//! model and forbids swaps (`models`), and the gateway sends a request only to a worker that serves its
//! model. So each deployment is sized on its own — its group, the traffic classes that ask for its
//! model, its autoscaler entry — with the single-deployment search, and the cheapest answers are then
//! run together and judged on every SLO of the scenario.
//!
//! Invariants:
//! - [`deployment`] keeps exactly the classes whose traffic names the group's model, under their own
//!   names, so their arrivals are the ones they have in the whole scenario (a class's random stream is
//!   seeded by its name).
//! - Judging a deployment's requests against the scenario's `[slo]` is sufficient for the whole
//!   fleet's: when every model's requests have a p95 under a target, at most 5% of all requests are
//!   over it, so the fleet's p95 is under it too; the fleet's goodput is a weighted mean of the models'.
//!   [`whole_fleet`] is still run and judged, so an interaction the argument misses shows.

use crate::hardware::ModelId;
use crate::metrics::Summary;
use crate::scenario::Scenario;
use crate::workload::WorkloadKind;
use crate::workload::trace::TraceFormat;

use super::{Candidate, Shape};

/// Whether `size` sizes `s` deployment by deployment: several worker groups under `[autoscaler]`
/// (and not one pool of co-located engines, which the autoscaler refuses anyway).
pub fn applies(s: &Scenario) -> bool {
    s.workers.len() > 1 && s.autoscaler.is_some() && !super::pooled(s)
}

/// The scenario of deployment `i` alone: group `i`, the classes of the mix that ask for its model, and
/// its autoscaler's settings with its own `[autoscaler.models]` entry applied. `Err((field, message))`
/// when the traffic cannot be split by model: not a mix, a class that names no model (or a trace whose
/// rows may name their own), or a model no class asks for.
pub fn deployment(base: &Scenario, i: usize) -> Result<Scenario, (String, String)> {
    let model = base.workers[i].model;
    if base.workload.kind != WorkloadKind::Mix {
        return Err((
            "workload.kind".into(),
            format!(
                "size sizes each autoscaled deployment on its own model's traffic, which it reads from a mix's classes; `{}` does not say which model a request asks for: describe the traffic as `kind = \"mix\"` with `model` in each class's traffic",
                base.workload.kind.as_str()
            ),
        ));
    }
    let mut classes = Vec::new();
    for (k, c) in base.workload.class_list().iter().enumerate() {
        let field = format!("workload.classes[{k}].traffic");
        let Some(m) = c.traffic.model else {
            return Err((
                format!("{field}.model"),
                format!(
                    "class `{}` names no model: size sizes each autoscaled deployment on the classes that ask for its model",
                    c.name
                ),
            ));
        };
        if c.traffic.kind == WorkloadKind::Trace
            && c.traffic.format.is_none_or(|f| f == TraceFormat::Native)
        {
            return Err((
                format!("{field}.format"),
                format!(
                    "class `{}` replays a trace whose rows may name their own model; size splits traffic by class: give the trace's format (mooncake, azure, burstgpt, vidur) or split it into one class per model",
                    c.name
                ),
            ));
        }
        if m == model {
            classes.push(c.clone());
        }
    }
    if classes.is_empty() {
        return Err((
            format!("workers[{i}].model"),
            format!(
                "no class of the mix asks for `{}`: its deployment would be sized on no traffic",
                model.as_str()
            ),
        ));
    }
    let mut s = base.clone();
    s.name = format!("{} / {}", base.name, model.as_str());
    s.workers = vec![base.workers[i].clone()];
    s.workload.classes = Some(classes);
    s.autoscaler = base
        .autoscaler
        .as_ref()
        .map(|a| a.for_model(model.as_str()));
    Ok(s)
}

/// One deployment's answer, as the whole fleet takes it.
#[derive(Clone, Debug)]
pub struct Part {
    pub model: ModelId,
    pub candidate: Candidate,
    /// Its replica bounds ([`Shape::autoscaled`]).
    pub shape: Shape,
    /// Dollars per replica-hour (the GPU's price × tp).
    pub usd_per_replica_hour: f64,
}

/// The whole fleet with each group on its part's hardware and bounds (`parts` in group order), under
/// the first part's router (every part has the same policy), on an arrival window of `duration`.
pub fn whole_fleet(
    base: &Scenario,
    parts: &[Part],
    duration: crate::time::SimDuration,
) -> Scenario {
    let mut s = base.clone();
    s.duration = duration;
    let auto = s.autoscaler.as_mut().expect("an autoscaled fleet");
    for (g, p) in s.workers.iter_mut().zip(parts) {
        debug_assert_eq!(g.model, p.model);
        super::candidate_hardware(g, &p.candidate);
        let min = p.shape.min_replicas.unwrap_or(p.shape.decode);
        // The replicas at t = 0 stay the scenario's, within the new bounds (as for one deployment).
        g.count = crate::config::PositiveInt(g.count.0.clamp(min.max(1), p.shape.decode));
        let entry = auto.models.entry(g.model.as_str().to_string()).or_default();
        entry.min_replicas = Some(min);
        entry.max_replicas = Some(crate::config::PositiveInt(p.shape.decode));
    }
    s.router = parts[0].candidate.policy.router.clone();
    s
}

/// Dollars per hour one run of the whole fleet billed: each model's replicas billed on average, at its
/// part's price per replica-hour. NaN without the per-model blocks.
pub fn billed_usd_per_hour(run: &Summary, parts: &[Part]) -> f64 {
    let Some(a) = &run.autoscaler else {
        return f64::NAN;
    };
    parts
        .iter()
        .map(|p| {
            a.models
                .iter()
                .find(|m| m.model.as_deref() == Some(p.model.as_str()))
                .map_or(f64::NAN, |m| m.replicas_mean * p.usd_per_replica_hour)
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_models() -> Scenario {
        let text = r#"
name = "two"
duration = "60s"

[[workers]]
count = 2
gpu = "h100"
model = "llama-3.1-8b"

[[workers]]
count = 1
gpu = "h100"
model = "qwen3-32b"
precision = "fp8"

[workload]
kind = "mix"

[[workload.classes]]
name = "small-chat"
[workload.classes.traffic]
kind = "poisson"
model = "llama-3.1-8b"
rate = 4.0
prompt = { dist = "fixed", tokens = 100 }
output = { dist = "fixed", tokens = 10 }

[[workload.classes]]
name = "big"
[workload.classes.traffic]
kind = "poisson"
model = "qwen3-32b"
rate = 1.0
prompt = { dist = "fixed", tokens = 100 }
output = { dist = "fixed", tokens = 10 }

[[workload.classes]]
name = "small-batch"
[workload.classes.traffic]
kind = "poisson"
model = "llama-3.1-8b"
rate = 2.0
prompt = { dist = "fixed", tokens = 100 }
output = { dist = "fixed", tokens = 10 }

[autoscaler]
metric = "rps"
target = 5.0
max_replicas = 4

[autoscaler.models.qwen3-32b]
min_replicas = 0
max_replicas = 2
target = 1.0

[slo]
ttft = "1s"
"#;
        let s: Scenario = toml::from_str(text).unwrap();
        s.validate().unwrap();
        s
    }

    #[test]
    fn a_deployment_keeps_its_group_its_classes_and_its_bounds() {
        let base = two_models();
        assert!(applies(&base));
        let d = deployment(&base, 0).unwrap();
        assert_eq!(d.workers.len(), 1);
        assert_eq!(d.workers[0].model, ModelId::Llama31_8b);
        let names: Vec<&str> = d
            .workload
            .class_list()
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(names, ["small-chat", "small-batch"]);
        let a = d.autoscaler.as_ref().unwrap();
        assert_eq!((a.min_replicas, a.max_replicas.0), (1, 4));
        assert!(a.models.is_empty());
        d.validate().unwrap();

        let q = deployment(&base, 1).unwrap();
        let a = q.autoscaler.as_ref().unwrap();
        assert_eq!((a.min_replicas, a.max_replicas.0), (0, 2));
        assert_eq!(a.target.map(|t| t.0), Some(1.0));
        assert_eq!(q.workload.class_list().len(), 1);
        q.validate().unwrap();
        assert!(!applies(&q));
    }

    #[test]
    fn traffic_that_cannot_be_split_by_model_is_refused_by_field() {
        let mut s = two_models();
        s.workload.classes.as_mut().unwrap()[1].traffic.model = None;
        let (field, m) = deployment(&s, 0).unwrap_err();
        assert_eq!(field, "workload.classes[1].traffic.model");
        assert!(m.contains("`big` names no model"), "{m}");

        let mut s = two_models();
        s.workload.classes.as_mut().unwrap().remove(1);
        let (field, m) = deployment(&s, 1).unwrap_err();
        assert_eq!(field, "workers[1].model");
        assert!(m.contains("no class"), "{m}");
    }

    #[test]
    fn the_whole_fleet_takes_each_parts_hardware_bounds_and_router() {
        let base = two_models();
        let policy = crate::compare::Contender {
            label: "round_robin".into(),
            router: toml::from_str("policy = \"round_robin\"").unwrap(),
            scenario: None,
        };
        let part = |model, gpu, min, max| Part {
            model,
            candidate: Candidate {
                gpu,
                tp: 1,
                policy: policy.clone(),
            },
            shape: Shape::autoscaled(min, max),
            usd_per_replica_hour: 2.0,
        };
        let parts = [
            part(ModelId::Llama31_8b, crate::hardware::GpuId::H200, 3, 5),
            part(ModelId::Qwen3_32b, crate::hardware::GpuId::H100, 0, 1),
        ];
        let w = whole_fleet(&base, &parts, crate::time::SimDuration::from_secs(120));
        w.validate().unwrap();
        assert_eq!(w.duration.as_secs_f64(), 120.0);
        assert_eq!(w.workers[0].gpu, crate::hardware::GpuId::H200);
        assert_eq!(
            w.workers[0].count.0, 3,
            "the scenario's 2 raised to the floor"
        );
        assert_eq!(w.workers[1].count.0, 1);
        let a = w.autoscaler.as_ref().unwrap();
        assert_eq!(a.for_model("llama-3.1-8b").min_replicas, 3);
        assert_eq!(a.for_model("llama-3.1-8b").max_replicas.0, 5);
        assert_eq!(a.for_model("qwen3-32b").min_replicas, 0);
        assert_eq!(a.for_model("qwen3-32b").max_replicas.0, 1);
        assert_eq!(a.for_model("qwen3-32b").target.map(|t| t.0), Some(1.0));
        assert_eq!(w.router.policy.name(), "round_robin");
    }
}
