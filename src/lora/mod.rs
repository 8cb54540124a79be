//! LoRA adapters served as vLLM serves them: a worker group's `[workers.lora]` table, the adapter a
//! request names, and a worker's adapter slots ([`AdapterSlots`]).
//!
//! A LoRA-enabled vLLM engine (vLLM v0.19.1, `vllm/config/lora.py`) keeps:
//! - `max_loras` GPU slots: at most that many distinct adapters in one batch. The V1 scheduler
//!   (`vllm/v1/core/sched/scheduler.py` L553-603, L821) schedules the running requests first, collects
//!   their adapters, then walks the waiting queue: a request whose adapter is not among the batch's
//!   when the batch already has `max_loras` of them is *skipped* (left in its place, the next one
//!   considered), never blocks the queue behind it, and is considered again next step. The worker's
//!   admission ([`crate::worker`]) follows that rule.
//! - a CPU cache of `max_cpu_loras` adapters (LRU, `vllm/lora/model_manager.py` L865-870): an adapter
//!   named by a batch and not in it is read from disk; one evicted from it leaves its GPU slot too.
//! - GPU slots replaced least recently used first (`model_manager.py` L888-899).
//!
//! Adapters are loaded synchronously while the step that first needs them is prepared
//! (`vllm/lora/worker_manager.py`, `add_adapter`), so a step that activates adapters lasts their load
//! time longer. Every LoRA kernel works on buffers sized for `max_lora_rank`
//! (`vllm/lora/layers/base_linear.py` L44-81: smaller adapters are zero-padded), so the step-time
//! cost of LoRA follows the engine's `max_lora_rank`, not the adapter's own rank; it applies to a step
//! whose batch holds at least one LoRA request. docs/lora.md gives every default with its source.

mod slots;

use serde::{Deserialize, Serialize};

use crate::config::{Positive, PositiveInt};
use crate::time::SimDuration;

pub use slots::{AdapterSlots, LoraCounters};

/// The adapter a request asks for: its id (a hash of its name, the same on every worker) and rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AdapterRef {
    pub id: u64,
    pub rank: u32,
}

/// What a router reads of one worker's adapters for a request's adapter, as vLLM's
/// `vllm:lora_requests_info` metric publishes them (running and waiting adapters, `max_lora`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AdapterLoad {
    /// The adapter is among the running requests'.
    pub active: bool,
    /// The adapter is among the waiting requests'.
    pub waiting: bool,
    /// Running plus waiting distinct adapters are fewer than `max_loras`.
    pub room: bool,
}

/// The ranks vLLM accepts for `max_lora_rank` (`vllm/config/lora.py`, `MaxLoRARanks`).
pub const MAX_LORA_RANKS: [u32; 9] = [1, 8, 16, 32, 64, 128, 256, 320, 512];

/// A worker group's `[workers.lora]` table: the group's engines run with LoRA enabled.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoraParams {
    /// Distinct adapters in one batch at most: the GPU slots (vLLM's default, 1).
    #[serde(default = "one")]
    pub max_loras: PositiveInt,
    /// Adapters kept in CPU memory (LRU); default `max_loras`, as vLLM; at least `max_loras`.
    #[serde(default)]
    pub max_cpu_loras: Option<PositiveInt>,
    /// The largest adapter rank the engine accepts, one of [`MAX_LORA_RANKS`] (vLLM's default, 16).
    #[serde(default = "sixteen")]
    pub max_lora_rank: PositiveInt,
    /// Reading an adapter from disk into the CPU cache: this fixed part (file open, parsing, building the
    /// LoRA model) plus its bytes at `disk_gb_per_s`.
    #[serde(default = "default_load_from_disk")]
    pub load_from_disk: SimDuration,
    /// Read bandwidth of the adapter files, GB/s (local NVMe, as `[swaps]`).
    #[serde(default = "default_disk_gb_per_s")]
    pub disk_gb_per_s: Positive,
    /// Copying an adapter from the CPU cache into a GPU slot: a fixed time when given; otherwise its
    /// bytes at `host_to_gpu_gb_per_s`.
    #[serde(default)]
    pub load_to_gpu: Option<SimDuration>,
    /// Host-to-GPU copy bandwidth, GB/s (PCIe, as vLLM's sleep-mode wake measured it).
    #[serde(default = "default_host_to_gpu_gb_per_s")]
    pub host_to_gpu_gb_per_s: Positive,
    /// The layers an adapter adapts, which with its rank set its size: `attention` (q, k, v, o) or
    /// `all_linear` (also gate, up, down).
    #[serde(default)]
    pub target_modules: TargetModules,
    /// Step-time multiplier of a batch with LoRA requests; default by `max_lora_rank`
    /// ([`default_step_multiplier`]), required above rank 64.
    #[serde(default)]
    pub step_multiplier: Option<f64>,
}

fn one() -> PositiveInt {
    PositiveInt(1)
}
fn sixteen() -> PositiveInt {
    PositiveInt(16)
}
/// 0.3 s: ServerlessLLM (arXiv:2401.14351) measured 370 ms to load a LoRA adapter with the
/// baseline loader and 83.5 ms with its own; docs/lora.md.
fn default_load_from_disk() -> SimDuration {
    SimDuration::from_millis(300)
}
/// 3 GB/s: local NVMe, the `[swaps]` tier's rate (vLLM PR #10647, the sleep post's level-2 wake);
/// docs/models-and-scaling-sources.md §1c.
fn default_disk_gb_per_s() -> Positive {
    Positive(3.0)
}
/// 20 GB/s: the host-to-GPU rate of vLLM's sleep-mode wake (61 GB in 2.87 s) [derived]; at that rate a
/// rank-16 adapter of Llama-3.1-70B on q, k, v, o (131 MB in FP16) takes 6.6 ms.
fn default_host_to_gpu_gb_per_s() -> Positive {
    Positive(20.0)
}

/// The modules a LoRA adapter adapts (PEFT's `target_modules`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum TargetModules {
    /// q, k, v and o projections.
    #[default]
    Attention,
    /// Every linear layer: q, k, v, o, gate, up and down.
    AllLinear,
}

/// Bytes of a rank-1 adapter of `model` on `targets`, FP16/BF16: each adapted `d_in × d_out` weight
/// gets an `A` of `r × d_in` and a `B` of `d_out × r`, so `2 · r · (d_in + d_out)` bytes per layer.
pub fn adapter_bytes_per_rank(model: crate::hardware::ModelId, targets: TargetModules) -> f64 {
    let m = model.spec();
    let h = f64::from(m.hidden);
    let q = f64::from(m.heads * m.head_dim);
    let kv = f64::from(m.kv_heads * m.head_dim);
    let attention = (h + q) + 2.0 * (h + kv) + (q + h);
    let mlp = match targets {
        TargetModules::Attention => 0.0,
        // gate and up: hidden → intermediate; down: intermediate → hidden (per expert for MoE).
        TargetModules::AllLinear => 3.0 * (h + f64::from(m.intermediate)) * f64::from(m.experts),
    };
    2.0 * f64::from(m.layers) * (attention + mlp)
}

/// GPU memory a LoRA-enabled engine reserves on each GPU for its `max_loras` slots, bytes. vLLM wraps
/// every linear layer the model supports for LoRA, whatever the adapters target
/// (`vllm/lora/model_manager.py`, `_create_lora_modules` and `_match_target_modules` match the model's
/// `supported_lora_modules`), and gives each `max_loras` stacked `A` and `B` buffers at `max_lora_rank`
/// in 16 bits (`vllm/lora/layers/base_linear.py`, `create_lora_weights`): a column-parallel layer
/// (q/k/v, gate/up: one buffer per packed slice) keeps `A` whole and `B` split across TP, a
/// row-parallel layer (o, down) `A` split and `B` whole. The buffers exist before the KV cache is
/// sized, so they come out of it. (Embedding and LM-head LoRA are not counted.)
pub fn slot_buffer_bytes_per_gpu(
    model: crate::hardware::ModelId,
    max_loras: u32,
    max_lora_rank: u32,
    tp: u32,
) -> f64 {
    let m = model.spec();
    let (h, tp) = (f64::from(m.hidden), f64::from(tp.max(1)));
    let q = f64::from(m.heads * m.head_dim);
    let kv = f64::from(m.kv_heads * m.head_dim);
    let inter = f64::from(m.intermediate);
    // Elements per unit of rank: A (rank × input) and B (output × rank) of each layer.
    let qkv = 3.0 * h + (q + 2.0 * kv) / tp;
    let o = q / tp + h;
    let gate_up = (2.0 * h + 2.0 * inter / tp) * f64::from(m.experts);
    let down = (inter / tp + h) * f64::from(m.experts);
    2.0 * f64::from(max_loras)
        * f64::from(max_lora_rank)
        * f64::from(m.layers)
        * (qkv + o + gate_up + down)
}

/// The step-time multiplier of a LoRA batch on an engine of `max_lora_rank`, or `None` above 64,
/// where no default is offered. 1.10 up to rank 8, 1.15 at 16 and 1.30 at 64 are estimates from
/// published slowdowns (vLLM PR #15655: 8-24 % on Llama-3.1-8B; Punica's +2 ms per token); 1.225 at 32
/// is the midpoint of 16 and 64 [derived]. docs/lora.md.
pub fn default_step_multiplier(max_lora_rank: u32) -> Option<f64> {
    match max_lora_rank {
        0..=8 => Some(1.10),
        9..=16 => Some(1.15),
        17..=32 => Some(1.225),
        33..=64 => Some(1.30),
        _ => None,
    }
}

impl Default for LoraParams {
    fn default() -> Self {
        LoraParams {
            max_loras: one(),
            max_cpu_loras: None,
            max_lora_rank: sixteen(),
            load_from_disk: default_load_from_disk(),
            disk_gb_per_s: default_disk_gb_per_s(),
            load_to_gpu: None,
            host_to_gpu_gb_per_s: default_host_to_gpu_gb_per_s(),
            target_modules: TargetModules::default(),
            step_multiplier: None,
        }
    }
}

impl LoraParams {
    /// Reading an adapter of `bytes` from disk into the CPU cache.
    pub fn disk_time(&self, bytes: f64) -> SimDuration {
        self.load_from_disk + SimDuration::from_secs_f64(bytes / (self.disk_gb_per_s.0 * 1e9))
    }

    /// Copying an adapter of `bytes` into a GPU slot.
    pub fn gpu_time(&self, bytes: f64) -> SimDuration {
        self.load_to_gpu.unwrap_or_else(|| {
            SimDuration::from_secs_f64(bytes / (self.host_to_gpu_gb_per_s.0 * 1e9))
        })
    }

    /// The CPU cache's capacity.
    pub fn cpu_capacity(&self) -> u32 {
        self.max_cpu_loras.map_or(self.max_loras.0, |c| c.0)
    }

    /// The step-time multiplier of a LoRA batch (validated: present).
    pub fn multiplier(&self) -> f64 {
        self.step_multiplier
            .or_else(|| default_step_multiplier(self.max_lora_rank.0))
            .unwrap_or(1.0)
    }

    /// Whether an engine with these settings accepts `adapter` (vLLM refuses an adapter whose rank
    /// exceeds `max_lora_rank`: `vllm/lora/peft_helper.py` L120-123).
    pub fn accepts(&self, adapter: AdapterRef) -> bool {
        adapter.rank <= self.max_lora_rank.0
    }

    /// `Err((field, message))` for settings vLLM would refuse or fleetsim has no default for.
    pub fn validate(&self) -> Result<(), (String, String)> {
        for (key, v) in [
            ("disk_gb_per_s", self.disk_gb_per_s.0),
            ("host_to_gpu_gb_per_s", self.host_to_gpu_gb_per_s.0),
        ] {
            // 1 MB/s to 10 TB/s: a slower link would stall a step for hours per adapter.
            if !(1e-3..=1e4).contains(&v) {
                return Err((
                    key.into(),
                    format!("must be between 0.001 and 10000 GB/s, got {v}"),
                ));
            }
        }
        if !MAX_LORA_RANKS.contains(&self.max_lora_rank.0) {
            return Err((
                "max_lora_rank".into(),
                format!(
                    "vLLM accepts one of {MAX_LORA_RANKS:?}, got {}",
                    self.max_lora_rank.0
                ),
            ));
        }
        if self.cpu_capacity() < self.max_loras.0 {
            return Err((
                "max_cpu_loras".into(),
                format!(
                    "must be at least max_loras ({}), got {} (vLLM refuses it too)",
                    self.max_loras.0,
                    self.cpu_capacity()
                ),
            ));
        }
        match self.step_multiplier {
            Some(m) if !(m.is_finite() && m >= 1.0) => Err((
                "step_multiplier".into(),
                format!("must be a number of at least 1, got {m}"),
            )),
            None if default_step_multiplier(self.max_lora_rank.0).is_none() => Err((
                "step_multiplier".into(),
                format!(
                    "no default for max_lora_rank = {} (defaults are given up to 64): set it",
                    self.max_lora_rank.0
                ),
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_vllm() {
        let p: LoraParams = toml::from_str("").unwrap();
        assert_eq!(p.max_loras.0, 1);
        assert_eq!(p.cpu_capacity(), 1);
        assert_eq!(p.max_lora_rank.0, 16);
        assert_eq!(p.multiplier(), 1.15);
        assert!(p.validate().is_ok());
    }

    #[test]
    fn settings_vllm_refuses_are_errors_naming_the_field() {
        let p: LoraParams = toml::from_str("max_loras = 4\nmax_cpu_loras = 2").unwrap();
        assert_eq!(p.validate().unwrap_err().0, "max_cpu_loras");
        let p: LoraParams = toml::from_str("max_lora_rank = 12").unwrap();
        assert_eq!(p.validate().unwrap_err().0, "max_lora_rank");
        let p: LoraParams = toml::from_str("max_lora_rank = 128").unwrap();
        assert_eq!(p.validate().unwrap_err().0, "step_multiplier");
        let p: LoraParams = toml::from_str("max_lora_rank = 128\nstep_multiplier = 1.5").unwrap();
        assert!(p.validate().is_ok());
        let p: LoraParams = toml::from_str("step_multiplier = 0.5").unwrap();
        assert_eq!(p.validate().unwrap_err().0, "step_multiplier");
        let p: LoraParams = toml::from_str("disk_gb_per_s = 1e-300").unwrap();
        assert_eq!(p.validate().unwrap_err().0, "disk_gb_per_s");
        let p: LoraParams = toml::from_str("host_to_gpu_gb_per_s = 1e300").unwrap();
        assert_eq!(p.validate().unwrap_err().0, "host_to_gpu_gb_per_s");
        assert!(toml::from_str::<LoraParams>("target_modules = \"mlp\"").is_err());
    }

    #[test]
    fn multiplier_grows_with_max_rank() {
        let m: Vec<f64> = [8, 16, 32, 64]
            .iter()
            .map(|&r| default_step_multiplier(r).unwrap())
            .collect();
        assert_eq!(m, [1.10, 1.15, 1.225, 1.30]);
        assert!(
            !LoraParams::default().accepts(AdapterRef { id: 1, rank: 32 }),
            "rank 32 > max_lora_rank 16"
        );
    }

    /// By hand for Llama-3.1-8B (hidden 4,096, q 4,096, kv 1,024, intermediate 14,336, 32 layers) at
    /// rank 16: per layer and unit of rank, q/k/v 3 × 4,096 + 6,144, o 4,096 + 4,096, gate/up
    /// 2 × 4,096 + 2 × 14,336, down 14,336 + 4,096 = 81,920 elements; × 16 × 32 × 2 bytes = 80 MiB a
    /// slot at TP 1. At TP 2 the split halves are 15,360 + 6,144 + 22,528 + 11,264 = 55,296: 54 MiB.
    /// A group with LoRA slots has that much less KV cache.
    #[test]
    fn slot_buffers_are_reserved_before_the_kv_cache() {
        use crate::hardware::ModelId;
        let one = slot_buffer_bytes_per_gpu(ModelId::Llama31_8b, 1, 16, 1);
        assert_eq!(one, 83_886_080.0);
        assert_eq!(
            slot_buffer_bytes_per_gpu(ModelId::Llama31_8b, 4, 16, 1),
            4.0 * one
        );
        assert_eq!(
            slot_buffer_bytes_per_gpu(ModelId::Llama31_8b, 1, 64, 1),
            4.0 * one
        );
        assert_eq!(
            slot_buffer_bytes_per_gpu(ModelId::Llama31_8b, 1, 16, 2),
            56_623_104.0
        );
        let plain = crate::scenario::WorkerGroup::single(
            crate::hardware::GpuId::H100,
            ModelId::Llama31_8b,
            1,
            crate::hardware::Precision::Bf16,
        );
        let mut lora = plain.clone();
        lora.lora = Some(LoraParams {
            max_loras: PositiveInt(4),
            ..LoraParams::default()
        });
        // 320 MiB at 2 MiB per 16-token block of Llama-3.1-8B in BF16: 160 blocks fewer.
        assert_eq!(plain.kv_blocks().unwrap() - lora.kv_blocks().unwrap(), 160);
    }
}
