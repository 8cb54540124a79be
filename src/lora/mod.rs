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

use crate::config::PositiveInt;
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// Reading an adapter from disk into the CPU cache.
    #[serde(default = "default_load_from_disk")]
    pub load_from_disk: SimDuration,
    /// Copying an adapter from the CPU cache into a GPU slot.
    #[serde(default = "default_load_to_gpu")]
    pub load_to_gpu: SimDuration,
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
/// 10 ms: a rank-16 adapter of a 70B model on q, k, v, o in FP16 is about 160 MB, copied from host
/// memory at about 20 GB/s (the PCIe rate of vLLM's sleep-mode wake) [derived]; docs/lora.md.
fn default_load_to_gpu() -> SimDuration {
    SimDuration::from_millis(10)
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
            load_to_gpu: default_load_to_gpu(),
            step_multiplier: None,
        }
    }
}

impl LoraParams {
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
}
