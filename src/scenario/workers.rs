//! `[[workers]]`: a group of identical workers (GPU, model, TP, precision, engine limits), its
//! defaults per GPU, and what its KV cache and step model come to.

use super::Scenario;
use super::overrides::apply_override;
use crate::config::{Fraction, PositiveInt};
use crate::hardware::{GpuId, ModelId, PerfModel, Precision, Profile, ProfileKey};
use crate::time::SimDuration;
use crate::worker::EngineParams;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Failure-domain labels of a worker group: one label or a list (e.g. `["rack-2", "node-b"]`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Domains(pub Vec<String>);

/// Accepts what `deserialize` accepts: one label or a list of labels.
impl schemars::JsonSchema for Domains {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Domains".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "Failure-domain labels: one label (`\"rack-2\"`) or a list \
                (`[\"rack-2\", \"node-b\"]`).",
            "anyOf": [
                { "type": "string" },
                { "type": "array", "items": { "type": "string" } },
            ],
        })
    }
}

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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerGroup {
    /// Workers in the group: replicas of the model, each on `tp` GPUs.
    pub count: PositiveInt,
    /// The GPU each worker runs on (`fleetsim catalog` lists them).
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
    /// Weight precision (and, unless `kv_cache_dtype` says otherwise, the KV cache's): `bf16` or `fp8`.
    #[serde(default)]
    pub precision: Precision,
    /// The KV cache's data type, vLLM's `--kv-cache-dtype`; unset: BF16 whatever the weights, as
    /// vLLM's default `auto` does for an FP8 checkpoint that does not ask for an FP8 cache (every
    /// compressed-tensors checkpoint without a `kv_cache_scheme`, and every checkpoint on vLLM
    /// releases before PR #30785 of December 2025). Set `"fp8"` for `--kv-cache-dtype fp8`, or for a
    /// ModelOpt checkpoint whose `kv_cache_quant_algo` is FP8 on a later vLLM: twice the tokens per GiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache_dtype: Option<Precision>,
    /// Token budget of one engine step, prompt chunks and decodes together (vLLM's
    /// `--max-num-batched-tokens`). Default: what `vllm serve` picks on the group's GPU, 8192 on a GPU
    /// of at least 70 GiB other than the A100, 2048 elsewhere.
    #[serde(default = "defaults::max_num_batched_tokens")]
    #[schemars(transform = crate::scenario::schema::no_default)]
    pub max_num_batched_tokens: PositiveInt,
    /// Most requests running in one engine step (vLLM's `--max-num-seqs`). Default: what `vllm serve`
    /// picks on the group's GPU, 1024 on a GPU of at least 70 GiB other than the A100, 256 elsewhere.
    #[serde(default = "defaults::max_num_seqs")]
    #[schemars(transform = crate::scenario::schema::no_default)]
    pub max_num_seqs: PositiveInt,
    /// Tokens per KV-cache block (vLLM's `--block-size`): the unit of KV allocation and prefix caching.
    #[serde(default = "defaults::block_size")]
    pub block_size: PositiveInt,
    /// Automatic prefix caching (vLLM's `--enable-prefix-caching`): a prompt reuses the KV blocks of an
    /// earlier prompt with the same prefix.
    #[serde(default = "defaults::enable_prefix_caching")]
    pub enable_prefix_caching: bool,
    /// Fraction of the GPU's memory (0–1) the engine may use for weights, activations and KV cache
    /// (vLLM's `--gpu-memory-utilization`); the KV cache gets what is left after the rest.
    #[serde(default = "defaults::gpu_memory_utilization")]
    pub gpu_memory_utilization: Fraction,
    /// Asynchronous scheduling (vLLM's `--async-scheduling`; `false` for `--no-async-scheduling`, or
    /// for a vLLM release before it became the default, PR #27614 of December 2025): each step's batch is
    /// formed while the step before it runs, so a request that arrives while the engine is busy waits
    /// one step more before its prefill starts. An idle engine schedules an arrival at once either way.
    #[serde(default = "defaults::async_scheduling")]
    pub async_scheduling: bool,
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
    pub fn async_scheduling() -> bool {
        EngineParams::default().async_scheduling
    }
    pub fn enable_prefix_caching() -> bool {
        EngineParams::default().enable_prefix_caching
    }
    pub fn gpu_memory_utilization() -> Fraction {
        Fraction(EngineParams::default().gpu_memory_utilization)
    }
}

impl WorkerGroup {
    /// The checks one group's own fields allow: a TP the model runs at, precisions the GPU has, a
    /// MIG slice that exists, a KV pool that fits and can be indexed. `Err((field, message))`, the
    /// field relative to the group.
    pub fn validate(&self) -> Result<(), (String, String)> {
        if !self.tp.0.is_power_of_two() || self.tp.0 > 8 {
            return Err((
                "tp".to_string(),
                format!("must be 1, 2, 4 or 8, got {}", self.tp.0),
            ));
        }
        crate::hardware::check_precision(self.gpu, self.precision)
            .map_err(|m| ("precision".to_string(), m))?;
        if let Some(kv) = self.kv_cache_dtype {
            crate::hardware::check_precision(self.gpu, kv)
                .map_err(|m| ("kv_cache_dtype".to_string(), m))?;
        }
        if self.gpu_memory_utilization.0 == 0.0 {
            return Err((
                "gpu_memory_utilization".to_string(),
                "must be greater than 0".into(),
            ));
        }
        if let Some(name) = self.mig.as_deref() {
            crate::hardware::mig::MigProfile::parse(self.gpu, name)
                .map_err(|m| ("mig".to_string(), m))?;
            if self.tp.0 != 1 {
                return Err((
                    "tp".to_string(),
                    format!(
                        "an engine on a MIG slice runs at tp = 1 (slices have no NVLink peer \
                         access), got {}",
                        self.tp.0
                    ),
                ));
            }
        }
        let blocks = self.kv_blocks().map_err(|m| {
            let field = if m.starts_with("block_size") {
                "block_size"
            } else {
                "model"
            };
            (field.to_string(), m)
        })?;
        if blocks == 0 {
            return Err(("kv_blocks".to_string(), "no KV blocks fit".into()));
        }
        if blocks >= crate::worker::kv_cache::MAX_POOL_BLOCKS {
            return Err((
                "kv_blocks".to_string(),
                format!(
                    "{blocks} KV blocks per worker: at most {} are supported",
                    crate::worker::kv_cache::MAX_POOL_BLOCKS - 1
                ),
            ));
        }
        Ok(())
    }

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
            async_scheduling: defaults::async_scheduling(),
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
            async_scheduling: self.async_scheduling,
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

/// Gives each worker group, for each of `max_num_batched_tokens` and `max_num_seqs` it does not set (in
/// the file or by `--set`), the default `vllm serve` picks on its GPU
/// ([`crate::hardware::memory::vllm_server_defaults`]), as a real server would; a key that is set
/// stays as set. Called once the text and the overrides are known to parse.
pub(super) fn apply_gpu_engine_defaults(scenario: &mut Scenario, text: &str, overrides: &[String]) {
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

impl Scenario {
    /// Worker slots of group `g`: its `count`, or with `[autoscaler]`, its model's `max_replicas` (the
    /// slots a replica can occupy; those beyond the initial `count` start empty).
    pub fn group_slots(&self, g: &WorkerGroup) -> u32 {
        self.autoscaler.as_ref().map_or(g.count.0, |a| {
            a.for_model(g.model.as_str()).max_replicas.0.max(g.count.0)
        })
    }
}
