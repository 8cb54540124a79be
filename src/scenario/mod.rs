//! Scenario files: TOML, unknown fields rejected, every error naming the file, line and field.
//!
//! This module holds the whole file's type ([`Scenario`]), loading, and the checks that span sections;
//! each section's checks against the rest of the fleet sit beside it: [`workers`] (a group's own
//! fields, its per-GPU engine defaults), `models` (models and LoRA adapters requested and served),
//! `autoscaler`, `tiers`, `disaggregation` (P/D and hot-prefix replication), `router`, `faults` (the
//! fault plan and each worker's domains and restart time). `overrides` applies `--set`, and `locate`
//! finds the line of a field path for every error. The sections' own types live with what they
//! configure (`crate::workload`, `crate::routing`, `crate::gateway`, `crate::tiers`, …); the SLO is a
//! metrics type ([`crate::metrics::Slo`]).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::faults::{FaultSpec, RestartSpec};
use crate::gateway::GatewaySpec;
use crate::hardware::{GpuId, Profile};
pub use crate::metrics::Slo;
use crate::metrics::timeseries::MetricsSpec;
use crate::routing::RouterSpec;
use crate::time::SimDuration;
use crate::workload::WorkloadSpec;

mod autoscaler;
mod disaggregation;
mod faults;
pub mod keys_page;
mod locate;
mod models;
mod overrides;
mod router;
pub mod schema;
mod tiers;
pub mod workers;

pub use locate::line_of;
use locate::{find_line, toml_error};
use overrides::{apply_override, override_error};
use workers::apply_gpu_engine_defaults;
pub use workers::{Domains, WorkerGroup};

/// A scenario that could not be loaded: where, and what is wrong.
#[derive(Debug, Error)]
#[error("{location}: {message}")]
pub struct ScenarioError {
    /// `file:line:column`, or `file` when no position applies.
    pub location: String,
    pub message: String,
}

/// A fleetsim scenario: the fleet (`[[workers]]`), its traffic (`[workload]`), its router and, optionally,
/// SLOs, faults, offload tiers, autoscaling and the rest. Unknown keys are errors.
// Serialising it gives the *resolved* scenario: every default filled in (what `run_info.json` records).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// The file the scenario was read from (`parse`'s `file`), named with the line in errors found
    /// only when its simulation is built; empty for a scenario made in code. Not a key of the format.
    #[serde(skip)]
    pub origin: String,
    /// Short name, copied into every output.
    pub name: String,
    /// Master seed of every random stream: the same seed gives the same results.
    #[serde(default)]
    pub seed: u64,
    /// Arrival window (simulated time): open-loop arrivals stop after it; requests in flight then run to
    /// completion.
    pub duration: SimDuration,
    /// Stop generating after this many requests; unset: no cap.
    #[serde(default)]
    pub max_requests: Option<u64>,
    /// Worker groups, in id order.
    pub workers: Vec<WorkerGroup>,
    /// The traffic: its `kind` (open-loop Poisson or gamma arrivals, sessions, a trace, a closed loop,
    /// a benchmark client, stages, a mix) and the keys that kind takes.
    pub workload: WorkloadSpec,
    /// The gateway's routing policy and the router's settings; default: `round_robin`.
    #[serde(default)]
    pub router: RouterSpec,
    /// Named router configurations for `fleetsim compare --policies NAME,...`.
    #[serde(default)]
    pub policies: BTreeMap<String, RouterSpec>,
    /// Latency targets a request must meet to count as good (goodput, attainment).
    #[serde(default)]
    pub slo: Slo,
    /// Faults to inject (`[[faults]]`).
    #[serde(default)]
    pub faults: Vec<FaultSpec>,
    /// Health checks, timeouts, retries, migration and session state.
    #[serde(default)]
    pub gateway: GatewaySpec,
    /// What a worker restart costs (default restart time of crashes).
    #[serde(default)]
    pub restart: RestartSpec,
    /// Time-series window and recovery judgement.
    #[serde(default)]
    pub metrics: MetricsSpec,
    /// KV offload tiers below GPU memory (`[tiers.host]`, `[tiers.disk]`, `[tiers.shared]`).
    #[serde(default)]
    pub tiers: crate::tiers::TiersSpec,
    /// How workers reach each other's GPU memory (the prefill-to-decode KV transfer).
    #[serde(default)]
    pub interconnect: crate::tiers::interconnect::InterconnectSpec,
    /// US dollars per GPU-hour by GPU id, overriding the catalogue's on-demand prices
    /// ([`crate::hardware::price`]) for `fleetsim size`.
    #[serde(default)]
    pub prices: BTreeMap<GpuId, crate::config::Positive>,
    /// What it costs a worker to change its model (`[swaps]`; for groups that list `models`).
    #[serde(
        default,
        skip_serializing_if = "crate::placement::SwapSpec::is_default"
    )]
    pub swaps: crate::placement::SwapSpec,
    /// Notes that give the scenario's result an expiry date (`[meta]`); copied into `run_info.json`, never
    /// read by the simulation.
    #[serde(default)]
    pub meta: Meta,
    /// Horizontal autoscaling of the worker group, with cold starts ([`crate::autoscale`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaler: Option<crate::autoscale::AutoscalerSpec>,
}

/// The `[meta]` table: the question a scenario answers, the conclusion drawn from it, and the conditions
/// that should trigger a retest. Free text; unknown keys are errors like anywhere else.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    /// What the scenario is meant to decide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// What was concluded from its results, with the reasoning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conclusion: Option<String>,
    /// Changes that would make the conclusion stale (a new engine version, another GPU, …).
    #[serde(default)]
    pub retest_when: Vec<String>,
}

impl Scenario {
    /// Loads and validates a scenario file, applying `--set key.path=value` overrides first.
    pub fn load(path: &Path, overrides: &[String]) -> Result<Scenario, ScenarioError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
            location: file.clone(),
            message: format!("cannot read scenario: {e}"),
        })?;
        Self::parse(&text, &file, overrides)
    }

    /// Parses and validates scenario text; `file` names it in errors, and paths in the scenario (trace
    /// files, rate curves) are relative to `file`'s directory.
    pub fn parse(text: &str, file: &str, overrides: &[String]) -> Result<Scenario, ScenarioError> {
        let mut scenario: Scenario = if overrides.is_empty() {
            toml::from_str(text).map_err(|e| toml_error(text, file, &e))?
        } else {
            let mut table: toml::Table =
                toml::from_str(text).map_err(|e| toml_error(text, file, &e))?;
            for o in overrides {
                apply_override(&mut table, o).map_err(|message| ScenarioError {
                    location: format!("{file} (--set {o})"),
                    message,
                })?;
            }
            toml::Value::Table(table)
                .try_into()
                .map_err(|e: toml::de::Error| override_error(text, file, overrides, &e))?
        };
        apply_gpu_engine_defaults(&mut scenario, text, overrides);
        scenario.origin = file.to_string();
        scenario.workload.set_base_dir(
            Path::new(file)
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default(),
        );
        let at = |path: &str, message: String| ScenarioError {
            location: match find_line(text, path) {
                Some(line) => format!("{file}:{line}"),
                None => file.to_string(),
            },
            message: format!("{path}: {message}"),
        };
        scenario
            .validate()
            .map_err(|(path, message)| at(&path, message))?;
        let dir = Path::new(file).parent().unwrap_or(Path::new(""));
        for (i, g) in scenario.workers.iter_mut().enumerate() {
            let Some(rel) = &g.profile else { continue };
            let field = format!("workers[{i}].profile");
            let p = Profile::load(&dir.join(rel)).map_err(|e| at(&field, e.to_string()))?;
            let name = rel.display().to_string();
            g.use_profile(name, p).map_err(|m| at(&field, m))?;
        }
        Ok(scenario)
    }

    /// Relations between fields that no single field's type can check. `Err((field path, message))`.
    pub fn validate(&self) -> Result<(), (String, String)> {
        if self.workers.is_empty() {
            return Err((
                "workers".into(),
                "at least one [[workers]] group is required".into(),
            ));
        }
        if self.duration == SimDuration::ZERO {
            return Err(("duration".into(), "must be greater than 0".into()));
        }
        crate::config::check_span(
            self.metrics.window,
            SimDuration::from_millis(1),
            SimDuration::MAX_PARSED,
        )
        .map_err(|m| ("metrics.window".to_string(), m))?;
        if let Some(w) = self.slo.window {
            let m = self.metrics.window.0.max(1);
            if w.0 == 0 || w.0 % m != 0 {
                return Err((
                    "slo.window".into(),
                    format!(
                        "must be a positive multiple of [metrics] window ({}), got {w}",
                        self.metrics.window
                    ),
                ));
            }
            if self.slo.ttft.is_none() && self.slo.tpot.is_none() {
                return Err((
                    "slo.window".into(),
                    "judges ttft and tpot per window: set at least one of them in [slo]".into(),
                ));
            }
        }
        if let crate::metrics::warmup::Warmup::Fixed(w) = self.metrics.warmup
            && w >= self.duration
        {
            return Err((
                "metrics.warmup".into(),
                format!(
                    "a warm-up of {w} leaves nothing of the {} arrival window to measure: it must be \
                     shorter than `duration` (or \"auto\" to detect it, \"none\" for no warm-up)",
                    self.duration
                ),
            ));
        }
        if self.max_requests == Some(0) {
            return Err((
                "max_requests".into(),
                "must be at least 1 (0 would simulate nothing; leave it out for no cap)".into(),
            ));
        }
        for (i, g) in self.workers.iter().enumerate() {
            g.validate()
                .map_err(|(field, m)| (format!("workers[{i}].{field}"), m))?;
        }
        self.workload.validate()?;
        self.gateway
            .validate()
            .map_err(|(f, m)| (format!("gateway.{f}"), m))?;
        self.validate_tiers()?;
        self.validate_disaggregation()?;
        self.validate_replication()?;
        self.validate_autoscaler()?;
        self.validate_models()?;
        self.validate_lora()?;
        crate::placement::colocation::validate(self)?;
        self.validate_faults()?;
        self.validate_router()
    }

    /// Workers in the fleet.
    pub fn worker_count(&self) -> usize {
        self.workers
            .iter()
            .map(|g| self.group_slots(g) as usize)
            .sum()
    }
}

#[cfg(test)]
mod tests;
