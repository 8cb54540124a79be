//! Scenario files: TOML, unknown fields rejected, every error naming the file, line and field.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::config::{Fraction, PositiveInt, toml_error_parts, toml_value};
use crate::faults::{FaultPlan, FaultSpec, Fleet, RestartSpec};
use crate::gateway::{GatewaySpec, SessionState};
use crate::hardware::{GpuId, ModelId, PerfModel, Precision, Profile, ProfileKey};
pub use crate::metrics::Slo;
use crate::metrics::timeseries::MetricsSpec;
use crate::routing::RouterSpec;
use crate::time::SimDuration;
use crate::time::SimTime;
use crate::worker::EngineParams;
use crate::workload::WorkloadSpec;

/// A scenario that could not be loaded: where, and what is wrong.
#[derive(Debug, Error)]
#[error("{location}: {message}")]
pub struct ScenarioError {
    /// `file:line:column`, or `file` when no position applies.
    pub location: String,
    pub message: String,
}

/// A whole scenario file. Serialising it gives the *resolved* scenario: every default filled in (what
/// `run_info.json` records).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// The file the scenario was read from (`parse`'s `file`), named with the line in errors found
    /// only when its simulation is built; empty for a scenario made in code. Not a key of the format.
    #[serde(skip)]
    pub origin: String,
    /// Short name, copied into every output.
    pub name: String,
    /// Master seed of every random stream.
    #[serde(default)]
    pub seed: u64,
    /// Arrival window: open-loop arrivals stop after it; requests in flight then run to completion.
    pub duration: SimDuration,
    /// Stop generating after this many requests (optional).
    #[serde(default)]
    pub max_requests: Option<u64>,
    /// Worker groups, in id order.
    pub workers: Vec<WorkerGroup>,
    pub workload: WorkloadSpec,
    #[serde(default)]
    pub router: RouterSpec,
    /// Named router configurations for `fleetsim compare --policies NAME,...`.
    #[serde(default)]
    pub policies: BTreeMap<String, RouterSpec>,
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
    /// Horizontal autoscaling of the worker group, with cold starts (`[autoscaler]`, [`crate::autoscale`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaler: Option<crate::autoscale::AutoscalerSpec>,
}

/// The `[meta]` table: the question a scenario answers, the conclusion drawn from it, and the conditions
/// that should trigger a retest. Free text; unknown keys are errors like anywhere else.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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

/// The largest fleet with faults: per-worker fault state is materialised.
const MAX_FAULT_FLEET: usize = 1_000_000;

/// Failure-domain labels of a worker group: one label or a list (e.g. `["rack-2", "node-b"]`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Domains(pub Vec<String>);

impl<'de> Deserialize<'de> for Domains {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum OneOrMany {
            One(String),
            Many(Vec<String>),
        }
        match OneOrMany::deserialize(d)
            .map_err(|_| serde::de::Error::custom("expected a label (text) or a list of labels"))?
        {
            OneOrMany::One(s) => Ok(Domains(vec![s])),
            OneOrMany::Many(v) => Ok(Domains(v)),
        }
    }
}

/// `count` identical workers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerGroup {
    pub count: PositiveInt,
    pub gpu: GpuId,
    /// The model the group's workers serve (and, with `models`, the one they start with).
    pub model: ModelId,
    /// Other models the workers may load in place of the one they serve (a swap, `[swaps]`); a
    /// worker serves one model at a time ([`crate::placement`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<ModelId>,
    /// Tensor-parallel degree (GPUs per replica).
    #[serde(default = "one")]
    pub tp: PositiveInt,
    #[serde(default)]
    pub precision: Precision,
    /// The KV cache's data type, vLLM's `--kv-cache-dtype`; unset: BF16 whatever the weights, as
    /// vLLM's default `auto` does for an FP8 checkpoint that does not ask for an FP8 cache (every
    /// compressed-tensors checkpoint without a `kv_cache_scheme`, and every checkpoint on vLLM
    /// releases before PR #30785 of December 2025). Set `"fp8"` for `--kv-cache-dtype fp8`, or for a
    /// ModelOpt checkpoint whose `kv_cache_quant_algo` is FP8 on a later vLLM: twice the tokens per GiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache_dtype: Option<Precision>,
    #[serde(default = "defaults::max_num_batched_tokens")]
    pub max_num_batched_tokens: PositiveInt,
    #[serde(default = "defaults::max_num_seqs")]
    pub max_num_seqs: PositiveInt,
    #[serde(default = "defaults::block_size")]
    pub block_size: PositiveInt,
    #[serde(default = "defaults::enable_prefix_caching")]
    pub enable_prefix_caching: bool,
    #[serde(default = "defaults::gpu_memory_utilization")]
    pub gpu_memory_utilization: Fraction,
    /// Override the KV capacity (blocks per worker) instead of deriving it from memory.
    #[serde(default)]
    pub kv_blocks: Option<PositiveInt>,
    /// A step-time profile file (TOML, as `fleetsim calibrate` writes them), relative to the scenario file.
    /// Without it the group uses the built-in profile of its gpu × model × tp × precision, or the nearest
    /// one spec-scaled (reported as uncalibrated).
    #[serde(default)]
    pub profile: Option<PathBuf>,
    /// The `profile` file as read when the scenario was loaded: (the path as written, its contents).
    #[serde(skip)]
    pub loaded_profile: Option<(String, Profile)>,
    /// Failure domains the group's workers belong to (a node, a rack): a fault can take a whole domain.
    #[serde(default)]
    pub failure_domain: Domains,
    /// The group's workers start this late (a scale-up), cold; the gateway uses them after a good
    /// health check.
    #[serde(default)]
    pub start_at: Option<SimDuration>,
    /// Prefill/decode disaggregation: `both` (default), `prefill` or `decode`.
    #[serde(default)]
    pub role: crate::worker::role::Role,
    /// Of a `both` group's `count` workers, the first `prefill_workers` are prefill workers and the
    /// rest decode workers (0, the default: no split). One key to vary the split at equal GPU count.
    #[serde(default)]
    pub prefill_workers: u32,
    /// The node the group's workers sit on: workers on the same node share NVLink; without a label
    /// each worker is a node of its own, reached over RDMA (`[interconnect]`).
    #[serde(default)]
    pub node: Option<String>,
    /// LoRA adapters (`[workers.lora]`): the group's engines run with LoRA enabled and serve
    /// requests for adapters of their model ([`crate::lora`]); without it they serve no adapter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lora: Option<crate::lora::LoraParams>,
    /// Groups with the same label share their GPUs: worker `k` of each runs on GPU `k` of the set, each
    /// engine with its own `gpu_memory_utilization` share ([`crate::placement::colocation`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub colocate: Option<String>,
    /// Each worker runs on this MIG slice of its GPU (`"3g.40gb"`: [`crate::hardware::mig`]), at TP 1;
    /// with `colocate`, the slices of the label's groups share each GPU and step at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig: Option<String>,
}

fn one() -> PositiveInt {
    PositiveInt(1)
}

mod defaults {
    use super::*;
    pub fn max_num_batched_tokens() -> PositiveInt {
        PositiveInt(EngineParams::default().max_num_batched_tokens)
    }
    pub fn max_num_seqs() -> PositiveInt {
        PositiveInt(EngineParams::default().max_num_seqs)
    }
    pub fn block_size() -> PositiveInt {
        PositiveInt(EngineParams::default().block_size)
    }
    pub fn enable_prefix_caching() -> bool {
        EngineParams::default().enable_prefix_caching
    }
    pub fn gpu_memory_utilization() -> Fraction {
        Fraction(EngineParams::default().gpu_memory_utilization)
    }
}

impl WorkerGroup {
    /// One worker of `gpu` × `model` × `tp` × `precision` with `vllm serve`'s default engine parameters
    /// for that GPU ([`crate::hardware::memory::vllm_server_defaults`]) and the built-in profile (what a `[[workers]]` table with only those keys gives).
    pub fn single(gpu: GpuId, model: ModelId, tp: u32, precision: Precision) -> Self {
        WorkerGroup {
            count: PositiveInt(1),
            gpu,
            model,
            models: Vec::new(),
            tp: PositiveInt(tp),
            precision,
            kv_cache_dtype: None,
            max_num_batched_tokens: PositiveInt(
                crate::hardware::memory::vllm_server_defaults(gpu).max_num_batched_tokens,
            ),
            max_num_seqs: PositiveInt(
                crate::hardware::memory::vllm_server_defaults(gpu).max_num_seqs,
            ),
            block_size: defaults::block_size(),
            enable_prefix_caching: defaults::enable_prefix_caching(),
            gpu_memory_utilization: defaults::gpu_memory_utilization(),
            kv_blocks: None,
            profile: None,
            loaded_profile: None,
            failure_domain: Domains::default(),
            start_at: None,
            role: Default::default(),
            prefill_workers: 0,
            node: None,
            colocate: None,
            mig: None,
            lora: None,
        }
    }

    /// The MIG slice each worker runs on, if `mig` names one of its GPU's profiles.
    pub fn mig_profile(&self) -> Option<crate::hardware::mig::MigProfile> {
        let name = self.mig.as_deref()?;
        crate::hardware::mig::MigProfile::parse(self.gpu, name).ok()
    }

    /// Whether the group's workers serve `m` or may load it.
    pub fn may_serve(&self, m: ModelId) -> bool {
        self.model == m || self.models.contains(&m)
    }

    /// The engine parameters of each worker in the group.
    pub fn engine(&self) -> EngineParams {
        EngineParams {
            max_num_batched_tokens: self.max_num_batched_tokens.0,
            max_num_seqs: self.max_num_seqs.0,
            block_size: self.block_size.0,
            enable_prefix_caching: self.enable_prefix_caching,
            gpu_memory_utilization: self.gpu_memory_utilization.0,
        }
    }

    /// The step-time model of each worker in the group: from its profile file if it names one, else the
    /// built-in calibrated profile (or the nearest, spec-scaled).
    pub fn perf(&self) -> PerfModel {
        let perf = self.whole_gpu_perf();
        match self.mig_profile() {
            Some(slice) => perf.on_mig(slice),
            None => perf,
        }
    }

    /// [`WorkerGroup::perf`] on the whole GPU.
    fn whole_gpu_perf(&self) -> PerfModel {
        let perf = match &self.loaded_profile {
            Some((name, p)) => PerfModel::from_profile(p, name.clone()),
            None => PerfModel::calibrated(self.gpu, self.model, self.tp.0, self.precision),
        };
        let kv = self.kv_dtype();
        if kv == self.precision {
            return perf;
        }
        let perf = perf.with_kv_dtype(kv);
        match &self.loaded_profile {
            // A profile file's efficiencies stand as measured, with whatever cache its server ran.
            Some(_) => perf,
            None => {
                perf.with_attention_of(&PerfModel::calibrated(self.gpu, self.model, self.tp.0, kv))
            }
        }
    }

    /// The KV cache's data type: `kv_cache_dtype`, or BF16 where it is unset (vLLM's `auto` for a
    /// checkpoint without a KV-cache quantisation directive).
    pub fn kv_dtype(&self) -> Precision {
        self.kv_cache_dtype.unwrap_or(Precision::Bf16)
    }

    /// Uses profile `p` (called `name` in the outputs) for this group's step times, if it describes the
    /// configuration the group runs.
    pub fn use_profile(&mut self, name: String, p: Profile) -> Result<(), String> {
        if p.key() != self.profile_key() {
            return Err(format!(
                "{name} describes {}, but this group runs {}",
                p.key(),
                self.profile_key()
            ));
        }
        self.loaded_profile = Some((name, p));
        Ok(())
    }

    /// The configuration this group runs, as profiles name it.
    pub fn profile_key(&self) -> ProfileKey {
        ProfileKey {
            gpu: self.gpu,
            model: self.model,
            tp: self.tp.0,
            precision: self.precision,
        }
    }

    /// KV blocks per worker.
    /// GPU memory per GPU the group's LoRA slots reserve (0 without `[workers.lora]`).
    pub fn lora_reserve_bytes(&self) -> f64 {
        self.lora.as_ref().map_or(0.0, |l| {
            crate::lora::slot_buffer_bytes_per_gpu(
                self.model,
                l.max_loras.0,
                l.max_lora_rank.0,
                self.tp.0,
            )
        })
    }

    pub fn kv_blocks(&self) -> Result<u32, String> {
        match self.kv_blocks {
            Some(b) => Ok(b.0),
            None => crate::worker::kv_capacity_blocks_reserving(
                &self.perf(),
                &self.engine(),
                self.lora_reserve_bytes(),
            ),
        }
    }
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
            let at = |f: &str| format!("workers[{i}].{f}");
            if !g.tp.0.is_power_of_two() || g.tp.0 > 8 {
                return Err((at("tp"), format!("must be 1, 2, 4 or 8, got {}", g.tp.0)));
            }
            crate::hardware::check_precision(g.gpu, g.precision)
                .map_err(|m| (at("precision"), m))?;
            if let Some(kv) = g.kv_cache_dtype {
                crate::hardware::check_precision(g.gpu, kv)
                    .map_err(|m| (at("kv_cache_dtype"), m))?;
            }
            if g.gpu_memory_utilization.0 == 0.0 {
                return Err((
                    at("gpu_memory_utilization"),
                    "must be greater than 0".into(),
                ));
            }
            if let Some(name) = g.mig.as_deref() {
                crate::hardware::mig::MigProfile::parse(g.gpu, name).map_err(|m| (at("mig"), m))?;
                if g.tp.0 != 1 {
                    return Err((
                        at("tp"),
                        format!(
                            "an engine on a MIG slice runs at tp = 1 (slices have no NVLink peer \
                             access), got {}",
                            g.tp.0
                        ),
                    ));
                }
            }
            let blocks = g.kv_blocks().map_err(|m| {
                let field = if m.starts_with("block_size") {
                    "block_size"
                } else {
                    "model"
                };
                (at(field), m)
            })?;
            if blocks == 0 {
                return Err((at("kv_blocks"), "no KV blocks fit".into()));
            }
            if blocks >= crate::worker::kv_cache::MAX_POOL_BLOCKS {
                return Err((
                    at("kv_blocks"),
                    format!(
                        "{blocks} KV blocks per worker: at most {} are supported",
                        crate::worker::kv_cache::MAX_POOL_BLOCKS - 1
                    ),
                ));
            }
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
        if self.faults.is_empty() {
            return self.validate_router();
        }
        if self.worker_count() > MAX_FAULT_FLEET {
            return Err((
                "faults".into(),
                format!(
                    "faults are simulated for fleets of at most {MAX_FAULT_FLEET} workers; this one has {}",
                    self.worker_count()
                ),
            ));
        }
        let fleet_domains = self.worker_domains();
        let restart = self.restart_times();
        let fleet = Fleet {
            domains: &fleet_domains,
            restart: &restart,
            has_store: self.has_shared_store(),
        };
        for (i, f) in self.faults.iter().enumerate() {
            f.validate(&fleet)
                .map_err(|(field, m)| (format!("faults[{i}].{field}"), m))?;
        }
        self.fault_plan_for(&fleet)
            .map_err(|(i, field, m)| (format!("faults[{i}].{field}"), m))?;
        self.validate_router()
    }

    /// `[autoscaler]`: its own bounds and spans, and a fleet it can scale: aggregated worker groups,
    /// started at t = 0, each serving its own model (one deployment per model), each group's `count`
    /// (its initial replicas) within its model's bounds; every `models` entry names a served model.
    fn validate_autoscaler(&self) -> Result<(), (String, String)> {
        let Some(a) = &self.autoscaler else {
            return Ok(());
        };
        a.validate()
            .map_err(|(f, m)| (format!("autoscaler.{f}"), m))?;
        for name in a.models.keys() {
            if !self.workers.iter().any(|g| g.model.as_str() == name) {
                let served: Vec<String> = self
                    .workers
                    .iter()
                    .map(|g| format!("`{}`", g.model.as_str()))
                    .collect();
                return Err((
                    format!("autoscaler.models.\"{name}\""),
                    format!(
                        "no worker group serves this model; the groups serve {}",
                        served.join(", ")
                    ),
                ));
            }
        }
        for (i, g) in self.workers.iter().enumerate() {
            let at = |f: &str| format!("workers[{i}].{f}");
            if let Some(j) = self.workers[..i].iter().position(|h| h.model == g.model) {
                return Err((
                    at("model"),
                    format!(
                        "the autoscaler scales one deployment per model, and workers[{j}] serves `{}` \
                         too: merge the two groups, or give each its own model",
                        g.model.as_str()
                    ),
                ));
            }
            if g.role != crate::worker::role::Role::Both || g.prefill_workers > 0 {
                return Err((
                    "autoscaler".into(),
                    "a disaggregated (prefill/decode) fleet cannot be autoscaled yet: remove `role` and \
                     `prefill_workers` from the worker groups"
                        .into(),
                ));
            }
            if !g.models.is_empty() {
                return Err((
                    "autoscaler".into(),
                    "a worker group that swaps models (`models`) cannot be autoscaled yet: remove \
                     `models` from the group, or the [autoscaler] section"
                        .into(),
                ));
            }
            if g.start_at.is_some() {
                return Err((
                    at("start_at"),
                    "the autoscaler starts the group's replicas itself: remove `start_at`".into(),
                ));
            }
            let model = g.model.as_str();
            a.validate_for(model)
                .map_err(|(f, m)| (format!("autoscaler.{f}"), m))?;
            let own = a.for_model(model);
            if g.count.0 < own.min_replicas || g.count.0 > own.max_replicas.0 {
                let whose = if a.models.contains_key(model) {
                    format!("autoscaler.models.\"{model}\"")
                } else {
                    "autoscaler".to_string()
                };
                return Err((
                    at("count"),
                    format!(
                        "is the autoscaled group's replicas at t = 0: it must lie between \
                         {whose}.min_replicas ({}) and {whose}.max_replicas ({}), got {}",
                        own.min_replicas, own.max_replicas.0, g.count.0
                    ),
                ));
            }
        }
        if let Some(b) = a.load_gb_per_s {
            crate::config::check_range(b.0, crate::config::BANDWIDTH_GB_PER_S, " GB/s")
                .map_err(|m| ("autoscaler.load_gb_per_s".to_string(), m))?;
        }
        Ok(())
    }

    /// Worker slots of group `g`: its `count`, or with `[autoscaler]`, its model's `max_replicas` (the
    /// slots a replica can occupy; those beyond the initial `count` start empty).
    pub fn group_slots(&self, g: &WorkerGroup) -> u32 {
        self.autoscaler.as_ref().map_or(g.count.0, |a| {
            a.for_model(g.model.as_str()).max_replicas.0.max(g.count.0)
        })
    }

    /// Models a group may swap to: each fits the group's GPUs, and the features that assume a worker's
    /// model never changes are off.
    fn validate_models(&self) -> Result<(), (String, String)> {
        self.swaps
            .validate()
            .map_err(|(f, m)| (format!("swaps.{f}"), m))?;
        for (i, g) in self.workers.iter().enumerate() {
            let at = |f: &str| format!("workers[{i}].{f}");
            for (k, &m) in g.models.iter().enumerate() {
                if m == g.model || g.models[..k].contains(&m) {
                    return Err((
                        at("models"),
                        format!(
                            "lists {} twice (with `model`, every model once)",
                            m.as_str()
                        ),
                    ));
                }
                let mut other = g.clone();
                other.model = m;
                other.loaded_profile = None;
                other.kv_blocks().map_err(|e| (at("models"), e))?;
            }
            if g.models.is_empty() {
                continue;
            }
            let refuse = |f: &str, why: &str| -> Result<(), (String, String)> {
                Err((
                    at(f),
                    format!("{why}: not supported with `models` (swaps) yet"),
                ))
            };
            if g.kv_blocks.is_some() {
                refuse("kv_blocks", "one KV capacity for every model")?;
            }
            if g.profile.is_some() {
                refuse("profile", "a step-time profile describes one model")?;
            }
            if g.role != crate::worker::role::Role::Both || g.prefill_workers > 0 {
                refuse("role", "prefill/decode disaggregation")?;
            }
        }
        if !self.workers.iter().any(|g| !g.models.is_empty()) {
            return Ok(());
        }
        let why = "a swap wipes a worker's KV cache";
        if self.tiers.any() {
            return Err((
                "tiers".into(),
                format!("{why}; KV tiers below it are not supported with swaps yet"),
            ));
        }
        if self.interconnect.replication.is_some() {
            return Err((
                "interconnect.replication".into(),
                format!("{why}; hot-prefix replication is not supported with swaps yet"),
            ));
        }
        if self.gateway.session_state != SessionState::Client {
            return Err((
                "gateway.session_state".into(),
                format!("{why}; only session_state = \"client\" is supported with swaps yet"),
            ));
        }
        Ok(())
    }

    /// The adapter tables of the workload and its classes, with where.
    pub fn requested_adapters(&self) -> Vec<(&crate::workload::adapters::AdapterSpec, String)> {
        let mut out = Vec::new();
        if let Some(a) = &self.workload.adapters {
            out.push((a, "workload.adapters".to_string()));
        }
        for (k, c) in self.workload.class_list().iter().enumerate() {
            if let Some(a) = &c.traffic.adapters {
                out.push((a, format!("workload.classes[{k}].traffic.adapters")));
            }
        }
        out
    }

    /// LoRA: each group's `[workers.lora]` as vLLM would accept it, and adapters that some group may
    /// serve: a group with LoRA, and their base model in the fleet.
    fn validate_lora(&self) -> Result<(), (String, String)> {
        for (i, g) in self.workers.iter().enumerate() {
            let Some(l) = &g.lora else { continue };
            l.validate()
                .map_err(|(f, m)| (format!("workers[{i}].lora.{f}"), m))?;
            if g.role != crate::worker::role::Role::Both || g.prefill_workers > 0 {
                return Err((
                    format!("workers[{i}].lora"),
                    "LoRA adapters are not supported with prefill/decode disaggregation yet".into(),
                ));
            }
        }
        for (a, at) in self.requested_adapters() {
            if !self.workers.iter().any(|g| g.lora.is_some()) {
                return Err((
                    at,
                    "no [[workers]] group has a [workers.lora] table, so no worker would serve an \
                     adapter: add one (max_loras, max_cpu_loras, ...) to the groups that should"
                        .into(),
                ));
            }
            if let Some(base) = a.base
                && !self.workers.iter().any(|g| g.may_serve(base))
            {
                return Err((
                    format!("{at}.base"),
                    format!(
                        "the adapters' base model {} is not served by any [[workers]] group (their \
                         `model` or `models`)",
                        base.as_str()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The models the workload's requests name, in order of first mention, with where.
    pub fn requested_models(&self) -> Vec<(ModelId, String)> {
        let mut out: Vec<(ModelId, String)> = Vec::new();
        let mut add = |m: Option<ModelId>, at: String| {
            if let Some(m) = m
                && !out.iter().any(|(x, _)| *x == m)
            {
                out.push((m, at));
            }
        };
        add(self.workload.model, "workload.model".into());
        for (k, c) in self.workload.class_list().iter().enumerate() {
            add(
                c.traffic.model,
                format!("workload.classes[{k}].traffic.model"),
            );
        }
        for (a, at) in self.requested_adapters() {
            add(a.base, format!("{at}.base"));
        }
        out
    }

    /// Whether requests are placed by model: some group may swap, or the workload names a model.
    pub fn places_models(&self) -> bool {
        self.workers.iter().any(|g| !g.models.is_empty()) || !self.requested_models().is_empty()
    }

    /// Tiers: one shared store, and tiers only where there is a prefix cache to write down.
    fn validate_tiers(&self) -> Result<(), (String, String)> {
        use crate::config::{BANDWIDTH_GB_PER_S, check_range, check_span};
        for (name, tier) in [
            ("host", &self.tiers.host),
            ("disk", &self.tiers.disk),
            ("shared", &self.tiers.shared),
        ] {
            if let Some(t) = tier {
                t.validate()
                    .map_err(|(f, m)| (format!("tiers.{name}.{f}"), m))?;
            }
        }
        let ic = &self.interconnect;
        let bandwidths = [
            (
                "interconnect.nvlink_gb_per_s",
                ic.nvlink_gb_per_s.map(|b| b.0),
            ),
            ("interconnect.rdma_gb_per_s", Some(ic.rdma_gb_per_s.0)),
            (
                "restart.weight_load_gb_per_s",
                Some(self.restart.weight_load_gb_per_s.0),
            ),
        ];
        for (field, v) in bandwidths {
            if let Some(v) = v {
                check_range(v, BANDWIDTH_GB_PER_S, " GB/s").map_err(|m| (field.to_string(), m))?;
            }
        }
        let day = SimDuration::from_secs(86_400);
        let spans = [
            (
                "interconnect.nvlink_latency",
                ic.nvlink_latency,
                crate::tiers::MAX_LATENCY,
            ),
            (
                "interconnect.rdma_latency",
                ic.rdma_latency,
                crate::tiers::MAX_LATENCY,
            ),
            ("restart.engine_start", self.restart.engine_start, day),
            ("restart.warmup", self.restart.warmup, day),
        ];
        for (field, d, max) in spans {
            check_span(d, SimDuration::ZERO, max).map_err(|m| (field.to_string(), m))?;
        }
        if self.tiers.shared.is_some()
            && self.gateway.session_state == SessionState::SharedTier
            && self.gateway.shared_tier != crate::gateway::SharedTierSpec::default()
        {
            return Err((
                "gateway.shared_tier".into(),
                "the fleet has one shared store: with [tiers.shared] set, describe it there and drop \
                 gateway.shared_tier (session_state = \"shared_tier\" then uses [tiers.shared])"
                    .into(),
            ));
        }
        if self.tiers.any() && self.workers.iter().any(|g| !g.enable_prefix_caching) {
            return Err((
                "tiers".into(),
                "KV tiers hold blocks of the prefix cache: every worker group needs \
                 enable_prefix_caching = true"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The role of each worker, in id order (a split group's first `prefill_workers` prefill).
    pub fn worker_roles(&self) -> Vec<crate::worker::role::Role> {
        use crate::worker::role::Role;
        let mut roles = Vec::with_capacity(self.worker_count());
        for g in &self.workers {
            for i in 0..self.group_slots(g) {
                roles.push(match (g.role, g.prefill_workers) {
                    (Role::Both, p) if p > 0 && i < p => Role::Prefill,
                    (Role::Both, p) if p > 0 => Role::Decode,
                    (r, _) => r,
                });
            }
        }
        roles
    }

    /// Whether any worker is a dedicated prefill or decode worker.
    pub fn is_disaggregated(&self) -> bool {
        use crate::worker::role::Role;
        self.workers
            .iter()
            .any(|g| g.role != Role::Both || g.prefill_workers > 0)
    }

    /// Disaggregation: both stages have workers, the KV can move between them, and they agree on what
    /// a block is.
    fn validate_disaggregation(&self) -> Result<(), (String, String)> {
        use crate::worker::role::Role;
        for (i, g) in self.workers.iter().enumerate() {
            if g.prefill_workers > 0 && g.role != Role::Both {
                return Err((
                    format!("workers[{i}].prefill_workers"),
                    format!(
                        "splits a group into prefill and decode workers: the group's role must be \"both\" (the default), not \"{}\"",
                        g.role.as_str()
                    ),
                ));
            }
            if g.prefill_workers > g.count.0 {
                return Err((
                    format!("workers[{i}].prefill_workers"),
                    format!(
                        "{} prefill workers out of a group of {}",
                        g.prefill_workers, g.count.0
                    ),
                ));
            }
        }
        if !self.is_disaggregated() {
            return Ok(());
        }
        // Per group: (first worker's group index, does it hold prefill workers, decode workers).
        let has = |role: Role, g: &WorkerGroup| {
            g.role == role
                || (g.role == Role::Both
                    && g.prefill_workers > 0
                    && match role {
                        Role::Prefill => true,
                        Role::Decode => g.prefill_workers < g.count.0,
                        Role::Both => false,
                    })
        };
        let roles = self.worker_roles();
        let first_of = |role: Role| self.workers.iter().position(|g| has(role, g));
        if !roles.iter().any(|r| r.prefills()) {
            let i = first_of(Role::Decode).unwrap_or(0);
            return Err((
                format!("workers[{i}].role"),
                "a decode-only fleet: no worker group has role \"prefill\" or \"both\", so no worker could take a new request"
                    .into(),
            ));
        }
        if !roles.iter().any(|r| r.decodes()) {
            let i = first_of(Role::Prefill).unwrap_or(0);
            return Err((
                format!("workers[{i}].role"),
                "a prefill-only fleet: no worker group has role \"decode\" or \"both\", so no worker could decode a prefilled request"
                    .into(),
            ));
        }
        if self.gateway.session_state == SessionState::Worker {
            return Err((
                "gateway.session_state".into(),
                "\"worker\" pins a conversation to one worker, which a disaggregated fleet (prefill and decode on different workers) does not have: use \"client\" or \"shared_tier\""
                    .into(),
            ));
        }
        let p0 = first_of(Role::Prefill).expect("a disaggregated fleet has a prefill group");
        for (i, g) in self.workers.iter().enumerate() {
            if !(has(Role::Prefill, g) || has(Role::Decode, g)) {
                continue;
            }
            let first = &self.workers[p0];
            if g.model != first.model {
                return Err((
                    format!("workers[{i}].model"),
                    format!(
                        "prefill and decode workers hand KV over, so they must serve one model: workers[{p0}] serves {}, this group {}",
                        first.model.as_str(),
                        g.model.as_str()
                    ),
                ));
            }
            if g.block_size != first.block_size {
                return Err((
                    format!("workers[{i}].block_size"),
                    format!(
                        "prefill and decode workers hand KV over block by block: workers[{p0}] has block_size {}, this group {}",
                        first.block_size.0, g.block_size.0
                    ),
                ));
            }
        }
        if !self.interconnect.across_nodes {
            // Every prefill worker must reach every decode worker over NVLink: one node for all.
            let mut node: Option<(usize, &str)> = None;
            for (i, g) in self.workers.iter().enumerate() {
                if !(has(Role::Prefill, g) || has(Role::Decode, g)) {
                    continue;
                }
                let Some(label) = g.node.as_deref() else {
                    return Err((
                        "interconnect.across_nodes".into(),
                        format!(
                            "is false, so KV moves only within a node, but workers[{i}] has no node label (each of its workers is a node of its own): a transfer between its prefill and decode workers would have no link"
                        ),
                    ));
                };
                match node {
                    None => node = Some((i, label)),
                    Some((j, other)) if other != label => {
                        return Err((
                            "interconnect.across_nodes".into(),
                            format!(
                                "is false, so KV moves only within a node, but workers[{j}] is on node \"{other}\" and workers[{i}] on node \"{label}\": a transfer between them would have no link"
                            ),
                        ));
                    }
                    Some(_) => {}
                }
            }
        }
        Ok(())
    }

    /// Hot-prefix replication: a positive window, more than one copy, prefix caches to copy into, and
    /// at least two workers with a link between them.
    fn validate_replication(&self) -> Result<(), (String, String)> {
        let Some(r) = &self.interconnect.replication else {
            return Ok(());
        };
        let at = |f: &str| format!("interconnect.replication.{f}");
        if r.window == SimDuration::ZERO {
            return Err((at("window"), "must be greater than 0".into()));
        }
        if r.copies.0 < 2 {
            return Err((
                at("copies"),
                format!(
                    "is the number of workers that should hold a hot prefix, its holder included: {} would never copy anything (use at least 2, or drop [interconnect.replication])",
                    r.copies.0
                ),
            ));
        }
        if let Some(i) = self.workers.iter().position(|g| !g.enable_prefix_caching) {
            return Err((
                "interconnect.replication".into(),
                format!(
                    "copies prefixes into prefix caches, but workers[{i}] has enable_prefix_caching = false"
                ),
            ));
        }
        if self.worker_count() < 2 {
            return Err((
                "interconnect.replication".into(),
                "the fleet has one worker: there is no other worker to copy a prefix to".into(),
            ));
        }
        if !self.interconnect.across_nodes {
            let mut per_node: Vec<(&str, u32)> = Vec::new();
            for g in &self.workers {
                let Some(label) = g.node.as_deref() else {
                    continue;
                };
                match per_node.iter_mut().find(|(n, _)| *n == label) {
                    Some((_, c)) => *c += g.count.0,
                    None => per_node.push((label, g.count.0)),
                }
            }
            if !per_node.iter().any(|&(_, c)| c >= 2) {
                return Err((
                    "interconnect.replication".into(),
                    "needs links between workers, but interconnect.across_nodes is false and no node label holds two workers: no worker could reach another"
                        .into(),
                ));
            }
        }
        Ok(())
    }

    /// Whether the fleet has a shared KV store (for `store_failure` faults).
    pub fn has_shared_store(&self) -> bool {
        self.gateway.session_state == SessionState::SharedTier || self.tiers.shared.is_some()
    }

    /// Checks that the router can compare caches across the fleet.
    fn validate_router(&self) -> Result<(), (String, String)> {
        if self.router.policy.build().needs_cache_view() {
            let bs = self.workers[0].block_size;
            if self.workers.iter().any(|g| g.block_size != bs) {
                return Err((
                    "router.policy".into(),
                    format!(
                        "{} compares cached prefixes across workers: every worker group needs the same block_size",
                        self.router.policy.name()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Per worker, its failure-domain labels.
    pub fn worker_domains(&self) -> Vec<Vec<String>> {
        self.workers
            .iter()
            .flat_map(|g| {
                std::iter::repeat_n(g.failure_domain.0.clone(), self.group_slots(g) as usize)
            })
            .collect()
    }

    /// Per worker, the default restart time: engine start, loading its replica's weights, warm-up.
    pub fn restart_times(&self) -> Vec<SimDuration> {
        self.workers
            .iter()
            .flat_map(|g| {
                let perf = g.perf();
                let t = self
                    .restart
                    .restart_time(perf.weight_bytes_per_gpu() * f64::from(g.tp.0));
                std::iter::repeat_n(t, self.group_slots(g) as usize)
            })
            .collect()
    }

    /// The faults of this scenario, expanded for a run.
    pub fn fault_plan(&self) -> Result<FaultPlan, String> {
        if self.faults.is_empty() {
            return Ok(FaultPlan::default());
        }
        let domains = self.worker_domains();
        let restart = self.restart_times();
        let fleet = Fleet {
            domains: &domains,
            restart: &restart,
            has_store: self.has_shared_store(),
        };
        self.fault_plan_for(&fleet)
            .map_err(|(i, f, m)| format!("faults[{i}].{f}: {m}"))
    }

    fn fault_plan_for(&self, fleet: &Fleet) -> Result<FaultPlan, (usize, &'static str, String)> {
        let horizon = SimTime(crate::workload::synthetic::window_end(self.duration).0);
        FaultPlan::build(&self.faults, fleet, self.seed, horizon)
    }

    /// Workers in the fleet.
    pub fn worker_count(&self) -> usize {
        self.workers
            .iter()
            .map(|g| self.group_slots(g) as usize)
            .sum()
    }
}

/// The error of a scenario that no longer deserializes after `--set`: blamed on the first override after
/// which it fails (applied one by one), whose key the message repeats.
fn override_error(
    text: &str,
    file: &str,
    overrides: &[String],
    e: &toml::de::Error,
) -> ScenarioError {
    // The file itself may be what is wrong: then no override is to blame.
    if let Err(own) = toml::from_str::<Scenario>(text)
        && !own.message().contains("missing field")
    {
        return toml_error(text, file, &own);
    }
    let culprit = toml::from_str::<toml::Table>(text)
        .ok()
        .and_then(|mut table| {
            overrides.iter().find(|o| {
                apply_override(&mut table, o).is_ok()
                    && toml::Value::Table(table.clone())
                        .try_into::<Scenario>()
                        .is_err()
            })
        });
    let message = crate::config::humanize(e.message().trim());
    match culprit {
        Some(o) => {
            let key = o.split_once('=').map_or(o.as_str(), |(k, _)| k.trim());
            ScenarioError {
                location: format!("{file} (--set {o})"),
                message: if message.contains(&format!("`{key}`")) {
                    message
                } else {
                    format!("`{key}`: {message}")
                },
            }
        }
        None => ScenarioError {
            location: format!("{file} (after --set)"),
            message,
        },
    }
}

/// Turns a TOML error into `file:line:column: message`.
/// Gives each worker group, for each of `max_num_batched_tokens` and `max_num_seqs` it does not set (in
/// the file or by `--set`), the default `vllm serve` picks on its GPU
/// ([`crate::hardware::memory::vllm_server_defaults`]), as a real server would; a key that is set
/// stays as set. Called once the text and the overrides are known to parse.
fn apply_gpu_engine_defaults(scenario: &mut Scenario, text: &str, overrides: &[String]) {
    let Ok(mut table) = toml::from_str::<toml::Table>(text) else {
        return;
    };
    for o in overrides {
        if apply_override(&mut table, o).is_err() {
            return;
        }
    }
    let groups = table.get("workers").and_then(toml::Value::as_array);
    for (i, g) in scenario.workers.iter_mut().enumerate() {
        let set = |key: &str| {
            groups
                .and_then(|a| a.get(i))
                .and_then(toml::Value::as_table)
                .is_some_and(|t| t.contains_key(key))
        };
        let memory = g.mig_profile().map_or(g.gpu.spec().memory_bytes, |m| {
            g.gpu.spec().memory_bytes * m.memory_fraction()
        });
        let d = crate::hardware::memory::vllm_server_defaults_with(g.gpu, memory);
        if !set("max_num_batched_tokens") {
            g.max_num_batched_tokens = PositiveInt(d.max_num_batched_tokens);
        }
        if !set("max_num_seqs") {
            g.max_num_seqs = PositiveInt(d.max_num_seqs);
        }
    }
}

fn toml_error(text: &str, file: &str, e: &toml::de::Error) -> ScenarioError {
    let (location, message) = toml_error_parts(text, file, e);
    ScenarioError { location, message }
}

/// The 1-based line of the key at field path `path` (`workload.rate`, `workers[1].count`) in scenario
/// text, best effort; for messages about a scenario that parsed.
pub fn line_of(text: &str, path: &str) -> Option<usize> {
    find_line(text, path)
}

impl Scenario {
    /// `message`, an error found in this scenario after it loaded (`field: what is wrong`, as the
    /// simulation's builder writes them), prefixed with the scenario's file and the field's line there
    /// when they are known.
    pub fn locate(&self, message: String) -> String {
        if self.origin.is_empty() {
            return message;
        }
        let field = message.split_once(": ").map(|(f, _)| f);
        let line = field.filter(|f| !f.contains(' ')).and_then(|f| {
            std::fs::read_to_string(&self.origin)
                .ok()
                .and_then(|t| find_line(&t, f))
        });
        match line {
            Some(l) => format!("{}:{l}: {message}", self.origin),
            None => format!("{}: {message}", self.origin),
        }
    }
}

/// Best-effort line of a field path such as `workers[1].tp` or `workload.cv` in the original text.
/// The line of `workload.classes[K].…KEY`: the line that sets KEY within the K-th
/// `[[workload.classes]]` entry (its own table or its `traffic` sub-table), else the entry's header.
fn find_class_line(text: &str, path: &str) -> Option<usize> {
    let rest = path.strip_prefix("workload.classes[")?;
    let (index, keys) = rest.split_once(']')?;
    let index: usize = index.parse().ok()?;
    let key = keys.rsplit('.').next().filter(|k| !k.is_empty());
    let mut seen = 0;
    let mut header = None;
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l == "[[workload.classes]]" {
            if header.is_some() {
                break;
            }
            if seen == index {
                header = Some(i + 1);
            }
            seen += 1;
            continue;
        }
        if header.is_some() {
            if l.starts_with('[') && !l.starts_with("[workload.classes.") {
                break;
            }
            if let Some(k) = key
                && l.starts_with(k)
                && l[k.len()..].trim_start().starts_with('=')
            {
                return Some(i + 1);
            }
        }
    }
    header
}

fn find_line(text: &str, path: &str) -> Option<usize> {
    if let Some(line) = find_class_line(text, path) {
        return Some(line);
    }
    if let Some(line) = find_group_subtable_line(text, path) {
        return Some(line);
    }
    if let Some(line) = find_named_subtable_line(text, path) {
        return Some(line);
    }
    if let Some(line) = find_subtable_line(text, path) {
        return Some(line);
    }
    let mut parts = path.split('.');
    let first = parts.next()?;
    let key = parts.next(); // inline tables: the line of the key that holds them
    let (table, index) = match first.split_once('[') {
        Some((t, rest)) => (t, rest.trim_end_matches(']').parse::<usize>().ok()?),
        None if key.is_none() => {
            // A top-level key.
            return text
                .lines()
                .position(|l| l.trim_start().starts_with(first))
                .map(|i| i + 1);
        }
        None => (first, 0),
    };
    let header_array = format!("[[{table}]]");
    let header_table = format!("[{table}]");
    let mut seen = 0;
    let mut in_table = false;
    let mut header_line = None;
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.starts_with('[') {
            if in_table {
                break;
            }
            if l == header_array || l == header_table {
                if seen == index {
                    in_table = true;
                    header_line = Some(i + 1);
                }
                seen += 1;
            }
            continue;
        }
        if in_table
            && let Some(k) = key
            && l.starts_with(k)
            && l[k.len()..].trim_start().starts_with('=')
        {
            return Some(i + 1);
        }
    }
    header_line
}

/// The line of `T[i].S.KEY` (or of `T[i].S`) when the `i`-th `[[T]]` entry is followed by a `[T.S]`
/// sub-table (`[workers.lora]`): the line of KEY in it, else the sub-table's header.
fn find_group_subtable_line(text: &str, path: &str) -> Option<usize> {
    let (table, rest) = path.split_once('[')?;
    let (index, rest) = rest.split_once("].")?;
    let index: usize = index.parse().ok()?;
    let (sub, key) = match rest.split_once('.') {
        Some((s, k)) => (s, Some(k)),
        None => (rest, None),
    };
    let entry = format!("[[{table}]]");
    let header = format!("[{table}.{sub}]");
    let mut seen = 0;
    let mut in_entry = false;
    let mut sub_line = None;
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l == entry {
            if in_entry {
                break;
            }
            in_entry = seen == index;
            seen += 1;
            continue;
        }
        if !in_entry {
            continue;
        }
        if l.starts_with('[') {
            if sub_line.is_some() {
                break;
            }
            if l == header {
                sub_line = Some(i + 1);
            }
            continue;
        }
        if sub_line.is_some()
            && let Some(k) = key
            && l.starts_with(k)
            && l[k.len()..].trim_start().starts_with('=')
        {
            return Some(i + 1);
        }
    }
    sub_line
}

/// The line of `a.b.key` (or of `a.b` itself) when the text has a `[a.b]` table header: the line
/// of the key in that table, else the header's.
fn find_subtable_line(text: &str, path: &str) -> Option<usize> {
    if path.contains('[') {
        return None;
    }
    let mut parts = path.splitn(3, '.');
    let (a, b, key) = (parts.next()?, parts.next()?, parts.next());
    let header = format!("[{a}.{b}]");
    let start = text.lines().position(|l| l.trim() == header)?;
    for (i, line) in text.lines().enumerate().skip(start + 1) {
        let l = line.trim();
        if l.starts_with('[') {
            break;
        }
        if let Some(k) = key
            && l.starts_with(k)
            && l[k.len()..].trim_start().starts_with('=')
        {
            return Some(i + 1);
        }
    }
    Some(start + 1)
}

/// The line of `T.S."NAME".KEY` (or of `T.S."NAME"`): KEY in the table `[T.S."NAME"]` (also written
/// `[T.S.NAME]` for a bare name), else that table's header, else the line that sets NAME (an inline table).
fn find_named_subtable_line(text: &str, path: &str) -> Option<usize> {
    let (prefix, rest) = path.split_once(".\"")?;
    let (name, rest) = rest.split_once('"')?;
    let key = rest.strip_prefix('.');
    let headers = [
        format!("[{prefix}.\"{name}\"]"),
        format!("[{prefix}.{name}]"),
    ];
    let is_key = |l: &str, k: &str| l.starts_with(k) && l[k.len()..].trim_start().starts_with('=');
    let mut lines = text.lines().enumerate();
    let start = lines
        .by_ref()
        .find(|(_, l)| {
            let l: String = l.chars().filter(|c| !c.is_whitespace()).collect();
            headers.contains(&l)
        })
        .map(|(i, _)| i);
    let Some(start) = start else {
        return text
            .lines()
            .position(|l| {
                let l = l.trim();
                is_key(l, &format!("\"{name}\"")) || is_key(l, name)
            })
            .map(|i| i + 1);
    };
    if let Some(k) = key {
        for (i, line) in lines {
            let l = line.trim();
            if l.starts_with('[') {
                break;
            }
            if is_key(l, k) {
                return Some(i + 1);
            }
        }
    }
    Some(start + 1)
}

/// `workers.0.count` written as `workers[0].count`: a key that is a number indexes the array before it.
fn index_segments(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 2);
    for (i, seg) in split_path(path).iter().enumerate() {
        if i > 0 && !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{seg}]"));
        } else {
            if i > 0 {
                out.push('.');
            }
            out.push_str(seg);
        }
    }
    out
}

/// The segments of a dotted key path, as TOML reads a dotted key: a segment in double quotes
/// (`models."llama-3.1-8b"`) may hold dots and keeps its quotes (so it can be split again);
/// [`unquote`] takes them off.
fn split_path(path: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut quoted) = (0, false);
    for (i, c) in path.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '.' if !quoted => {
                out.push(&path[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&path[start..]);
    out
}

/// A path segment without its double quotes, if it has them.
fn unquote(seg: &str) -> &str {
    seg.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(seg)
}

/// Sets `key.path=value` in a TOML table (`workers[0].count` or `workers.0.count`); `value` is read as TOML, or as a string if it is not TOML.
fn apply_override(table: &mut toml::Table, assignment: &str) -> Result<(), String> {
    let (path, raw) = assignment
        .split_once('=')
        .ok_or_else(|| "expected key.path=value".to_string())?;
    let value = toml_value(raw);
    let path = index_segments(path.trim());
    let keys = split_path(&path);
    let mut cur = table;
    for (depth, k) in keys.iter().enumerate() {
        let last = depth + 1 == keys.len();
        let (name, index) = match k.split_once('[').filter(|_| !k.starts_with('"')) {
            Some((n, rest)) => (
                n,
                Some(
                    rest.trim_end_matches(']')
                        .parse::<usize>()
                        .map_err(|_| format!("bad index in `{k}`"))?,
                ),
            ),
            None => (unquote(k), None),
        };
        if last && index.is_none() {
            cur.insert(name.to_string(), value);
            return Ok(());
        }
        let entry = cur
            .entry(name.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let next = match (entry, index) {
            (toml::Value::Array(items), Some(i)) => items
                .get_mut(i)
                .ok_or_else(|| format!("`{name}` has no element {i}"))?,
            (e, None) => e,
            (_, Some(_)) => return Err(format!("`{name}` is not an array")),
        };
        if last {
            *next = value;
            return Ok(());
        }
        cur = next
            .as_table_mut()
            .ok_or_else(|| format!("`{k}` is not a table"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::PolicyConfig;

    const GOOD: &str = r#"
name = "t"
seed = 3
duration = "60s"

[[workers]]
count = 2
gpu = "h100"
model = "llama-3.1-8b"

[workload]
kind = "poisson"
rate = 5.0
prompt = { dist = "fixed", tokens = 100 }
output = { dist = "fixed", tokens = 10 }

[router]
policy = "least_outstanding"
"#;

    fn err(text: &str) -> String {
        Scenario::parse(text, "s.toml", &[])
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_pool_too_large_to_index_is_refused_with_its_field() {
        let e = err(&GOOD.replace("count = 2", "count = 2\nkv_blocks = 3000000000"));
        assert!(
            e.contains("kv_blocks") && e.contains("at most 2147483646"),
            "{e}"
        );
    }

    #[test]
    fn parses_a_good_scenario() {
        let s = Scenario::parse(GOOD, "s.toml", &[]).unwrap();
        assert_eq!(s.worker_count(), 2);
        assert_eq!(s.router.policy, PolicyConfig::LeastOutstanding {});
        assert_eq!(s.duration, SimDuration::from_secs(60));
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let e = err(&GOOD.replace("count = 2", "count = 0"));
        assert!(e.starts_with("s.toml:7:"), "{e}");
        assert!(e.contains("at least 1"), "{e}");

        let e = err(&GOOD.replace("gpu = \"h100\"", "gpu = \"h900\""));
        assert!(e.starts_with("s.toml:8:") && e.contains("h900"), "{e}");

        let e = err(&GOOD.replace("seed = 3", "seed = 3\nbogus = 1"));
        assert!(e.contains("bogus"), "{e}");

        let e = err(&GOOD.replace("rate = 5.0", "rate = -5.0"));
        assert!(
            e.starts_with("s.toml:13:8: `rate`: expected a number greater than 0"),
            "{e}"
        );

        let e = err(&GOOD.replace("tokens = 100", "tokens = -100"));
        assert!(e.starts_with("s.toml:14:") && e.contains("`tokens`"), "{e}");

        let e = err(&GOOD.replace("tokens = 100", "median = 100"));
        assert!(
            e.starts_with("s.toml:14") && e.contains("workload.prompt.median"),
            "{e}"
        );

        let e = err(&GOOD.replace("kind = \"poisson\"", "kind = \"gamma\""));
        assert!(e.contains("workload.cv: required"), "{e}");

        let e = err(&GOOD.replace("count = 2", "count = \"two\""));
        assert!(e.starts_with("s.toml:7:"), "{e}");

        let e = err(&GOOD.replace("model = \"llama-3.1-8b\"", "model = \"llama-3.1-70b\""));
        assert!(
            e.starts_with("s.toml:9") && e.contains("does not fit"),
            "{e}"
        );
    }

    #[test]
    fn meta_notes_parse_and_unknown_meta_keys_name_their_line() {
        let s = Scenario::parse(
            &format!(
                "{GOOD}\n[meta]\nquestion = \"which router?\"\nretest_when = [\"vLLM 0.12\", \"B200\"]\n"
            ),
            "s.toml",
            &[],
        )
        .unwrap();
        assert_eq!(s.meta.question.as_deref(), Some("which router?"));
        assert_eq!(s.meta.conclusion, None);
        assert_eq!(s.meta.retest_when, ["vLLM 0.12", "B200"]);
        // Without [meta], no notes.
        assert_eq!(
            Scenario::parse(GOOD, "s.toml", &[]).unwrap().meta,
            Meta::default()
        );
        // GOOD's lines, then a blank line, `[meta]`, and the misspelt key.
        let line = GOOD.lines().count() + 3;
        let e = err(&format!("{GOOD}\n[meta]\nquestoin = \"q\"\n"));
        assert!(e.starts_with(&format!("s.toml:{line}:")), "{e}");
        assert!(e.contains("questoin"), "{e}");
        let e = err(&format!("{GOOD}\n[meta]\nretest_when = \"B200\"\n"));
        assert!(e.starts_with(&format!("s.toml:{line}:")), "{e}");
    }

    /// A group that leaves out the step budget or the sequence cap gets `vllm serve`'s default for its
    /// GPU (vllm/engine/arg_utils.py: 8,192 tokens and 1,024 sequences on an H100; 2,048 and 256 on an
    /// A100, excluded by name); a key set in the file or by `--set` is kept.
    #[test]
    fn engine_limits_default_per_gpu_unless_set() {
        let limits = |text: &str, sets: &[&str]| {
            let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
            let s = Scenario::parse(text, "s.toml", &sets).unwrap();
            let w = &s.workers[0];
            (w.max_num_batched_tokens.0, w.max_num_seqs.0)
        };
        assert_eq!(limits(GOOD, &[]), (8192, 1024));
        let a100 = GOOD.replace("gpu = \"h100\"", "gpu = \"a100\"");
        assert_eq!(limits(&a100, &[]), (2048, 256));
        let set = GOOD.replace("count = 2", "count = 2\nmax_num_seqs = 64");
        assert_eq!(limits(&set, &[]), (8192, 64));
        assert_eq!(
            limits(&a100, &["workers[0].max_num_batched_tokens=4096"]),
            (4096, 256)
        );
    }

    /// The serialised scenario is the resolved one: defaults the file left out are there.
    #[test]
    fn the_serialised_scenario_fills_in_every_default() {
        let s = Scenario::parse(GOOD, "s.toml", &[]).unwrap();
        let v = serde_json::to_value(&s).unwrap();
        // GOOD sets none of these; the values are vLLM's defaults (block 16 tokens, 1,024 sequences
        // on an H100, 90 % of GPU memory) and tp 1.
        let w = &v["workers"][0];
        assert_eq!(w["block_size"], 16);
        assert_eq!(w["max_num_seqs"], 1024);
        assert_eq!(w["gpu_memory_utilization"], 0.9);
        assert_eq!(w["tp"], 1);
        assert_eq!(v["seed"], 3);
        assert_eq!(v["duration"], "60s");
        // The router's flat table: the policy and the settings side by side, the view resolved.
        assert_eq!(v["router"]["policy"], "least_outstanding");
        assert!(v["router"]["view"].is_string(), "{}", v["router"]);
        assert!(v["router"]["event_delay"].is_string(), "{}", v["router"]);
        assert!(v["gateway"]["request_timeout"].is_string());
        assert_eq!(v["meta"]["retest_when"], serde_json::json!([]));
    }

    #[test]
    fn overrides_apply_to_nested_keys_and_arrays() {
        let s = Scenario::parse(
            GOOD,
            "s.toml",
            &[
                "workers[0].count=5".into(),
                "workload.rate=9".into(),
                "router.policy=random".into(),
            ],
        )
        .unwrap();
        assert_eq!(s.worker_count(), 5);
        assert_eq!(s.workload.rate.unwrap().0, 9.0);
        assert_eq!(s.router.policy, PolicyConfig::Random {});
        let dotted = Scenario::parse(GOOD, "s.toml", &["workers.0.count=7".into()]).unwrap();
        assert_eq!(dotted.worker_count(), 7);
        let e = Scenario::parse(GOOD, "s.toml", &["workers[3].count=1".into()]).unwrap_err();
        assert!(e.to_string().contains("no element 3"), "{e}");
    }

    /// `kv_cache_dtype`: an FP8 cache needs a GPU with FP8; unset, an FP8 group's cache is BF16 (vLLM's
    /// `auto`), and `"fp8"` holds twice its tokens with the same weights.
    #[test]
    fn kv_cache_dtype_is_checked_and_sets_the_cache_s_bytes() {
        let a100 = GOOD.replace("gpu = \"h100\"", "gpu = \"a100\"\nkv_cache_dtype = \"fp8\"");
        let e = err(&a100);
        assert!(e.contains("workers[0].kv_cache_dtype"), "{e}");
        let fp8 = GOOD.replace("gpu = \"h100\"", "gpu = \"h100\"\nprecision = \"fp8\"");
        let with = |kv: &str| {
            fp8.replace(
                "precision = \"fp8\"",
                &format!("precision = \"fp8\"\nkv_cache_dtype = \"{kv}\""),
            )
        };
        let g = |text: &str| Scenario::parse(text, "s.toml", &[]).unwrap().workers[0].clone();
        let (unset, bf16, fp8_cache) = (g(&fp8), g(&with("bf16")), g(&with("fp8")));
        assert_eq!(unset.kv_dtype(), Precision::Bf16);
        assert_eq!(
            unset.perf().kv_bytes_per_token_per_gpu(),
            bf16.perf().kv_bytes_per_token_per_gpu()
        );
        let (a, b) = (fp8_cache.perf(), unset.perf());
        assert_eq!(
            b.kv_bytes_per_token_per_gpu(),
            2.0 * a.kv_bytes_per_token_per_gpu()
        );
        assert_eq!(b.weight_bytes_per_gpu(), a.weight_bytes_per_gpu());
        let (na, nb) = (fp8_cache.kv_blocks().unwrap(), unset.kv_blocks().unwrap());
        assert!(nb == na / 2 || nb + 1 == na / 2, "{na} {nb}");
        // Attention runs the kernels of the cache's data type: a BF16 cache takes the BF16 profile's
        // attention efficiencies (slower than FP8 FlashAttention-3), an FP8 cache keeps the FP8 ones.
        let bf16_profile =
            PerfModel::calibrated(GpuId::H100, ModelId::Llama31_8b, 1, Precision::Bf16);
        let fp8_profile =
            PerfModel::calibrated(GpuId::H100, ModelId::Llama31_8b, 1, Precision::Fp8);
        assert_eq!(b.eff.attention, bf16_profile.eff.attention);
        assert_eq!(b.eff.kv_memory, bf16_profile.eff.kv_memory);
        assert_eq!(b.eff.memory, fp8_profile.eff.memory);
        assert_eq!(a.eff, fp8_profile.eff);
        assert_eq!(
            b.provenance.profile,
            "h100/llama-3.1-8b/tp1/fp8 (attention: h100/llama-3.1-8b/tp1/bf16)"
        );
        assert!(b.provenance.calibrated);
        assert!(b.decode_step_seconds(64, 4096) > a.decode_step_seconds(64, 4096));
    }

    /// A quoted segment may hold dots (a model's name), as in a TOML dotted key.
    #[test]
    fn override_paths_take_quoted_segments_whole() {
        assert_eq!(
            split_path(r#"autoscaler.models."llama-3.1-8b".max_replicas"#),
            ["autoscaler", "models", "\"llama-3.1-8b\"", "max_replicas"]
        );
        let text =
            format!("{GOOD}\n[autoscaler]\nmax_replicas = 4\nmetric = \"rps\"\ntarget = 1.0\n");
        let s = Scenario::parse(
            &text,
            "s.toml",
            &[r#"autoscaler.models."llama-3.1-8b".max_replicas=3"#.into()],
        );
        let a = s.unwrap().autoscaler.unwrap();
        assert_eq!(a.models["llama-3.1-8b"].max_replicas.unwrap().0, 3);
        assert_eq!(index_segments(r#"workers.0."a.b""#), r#"workers[0]."a.b""#);
    }
}
