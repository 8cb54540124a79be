//! Several models on one fleet: which workers may serve which model, and what it costs a worker to
//! change the model it serves (a *swap*).
//!
//! A worker group names the model its workers start with (`model`) and the other models they may
//! load (`models`). A worker runs **one model at a time**, as one vLLM engine serves one model per
//! process: its whole KV memory belongs to that model. Several workers may share a GPU, each in its own
//! share of the memory ([`colocation`]). A request names its model (`[workload] model`,
//! or its class's); the gateway sends it only to a worker that has that model loaded. When none has,
//! it holds the request (as an activator does) and picks a worker that may load the model to swap:
//! that worker takes no new requests, finishes those it has (drain), then unloads its model, loads the
//! new one and warms up ([`SwapSpec::swap_time`]); its KV cache is lost with the old model, and the
//! held requests are routed when it is ready. Which worker swaps is a stated policy
//! ([`crate::engine`]'s placement): an idle worker before a busy one, a model that stays loaded
//! elsewhere before the last copy of one, then the least recently used.
//!
//! Where the new weights come from decides what a swap costs ([`LoadFrom`]):
//! - `host_memory`: vLLM's sleep mode, level 1. Every model the worker may serve keeps an engine
//!   asleep with its weights in pinned host memory; a swap puts the running one to sleep (its weights
//!   copied out, its KV cache discarded) and wakes the next (weights copied back over PCIe). No engine
//!   start and no warm-up: the sleeping engine keeps its CUDA graphs. (Host memory for every sleeping
//!   model's weights is assumed, not modelled.)
//! - `local_nvme` and `network_storage`: the running engine is stopped and an engine for the new model
//!   started cold: process start, weights read from storage, warm-up (CUDA graph capture,
//!   compilation).
//!
//! Invariants: a worker's resident model is one of the models its group may serve; a swapping worker
//! is routed nothing; a request held for its model is routed or ends (fails at the end of the run)
//! exactly once.

pub mod colocation;

use serde::{Deserialize, Serialize};

use crate::config::Positive;
use crate::time::SimDuration;

/// Where a swapped-in model's weights are read from.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum LoadFrom {
    /// Pinned host memory, over PCIe: vLLM's sleep mode level 1 (the default).
    #[default]
    HostMemory,
    /// The node's local NVMe drive: a cold engine start.
    LocalNvme,
    /// A network volume or object store: a cold engine start.
    NetworkStorage,
}

impl LoadFrom {
    /// The scenario's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            LoadFrom::HostMemory => "host_memory",
            LoadFrom::LocalNvme => "local_nvme",
            LoadFrom::NetworkStorage => "network_storage",
        }
    }

    /// Read bandwidth per GPU, GB/s (each GPU reads its own TP shard).
    fn default_gb_per_s(self) -> f64 {
        match self {
            // vLLM's sleep-mode post (blog.vllm.ai/2025/10/26/sleep-mode.html, vLLM 0.11, A100):
            // a level-1 wake of Qwen3-Coder-30B-A3B (61 GB of BF16 weights) takes 2.85-2.89 s and
            // its sleep 2.78 s, about 21-22 GB/s each way between pinned host memory and the GPU.
            LoadFrom::HostMemory => 20.0,
            // vllm-project/vllm PR #10647: Llama-2-7b (13.5 GB) loads from local NVMe in 7.29 s with
            // the default safetensors loader (1.9 GB/s) and 3.67 s with fastsafetensors (3.7 GB/s);
            // the sleep post's level-2 wake re-reads 8.3 GB in 2.6 s (3.2 GB/s).
            LoadFrom::LocalNvme => 3.0,
            // NVIDIA's Run:ai Model Streamer benchmark (developer.nvidia.com/blog/reducing-cold-start-
            // latency-for-llm-inference-with-nvidia-runai-model-streamer): Llama-3-8B from EBS gp3 in
            // 14.3 s (1.05 GB/s) and io2 in 7.5 s (2.0 GB/s); published network loads span 0.3-9 GB/s.
            LoadFrom::NetworkStorage => 2.0,
        }
    }

    /// Whether a swap from here starts a new engine process (and so pays engine start and warm-up).
    fn cold(self) -> bool {
        self != LoadFrom::HostMemory
    }
}

/// `[swaps]`: what changing a worker's model costs. Unset durations take [`LoadFrom`]'s defaults.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SwapSpec {
    /// Where the new model's weights come from.
    #[serde(default)]
    pub load_from: LoadFrom,
    /// Read bandwidth per GPU, GB/s (default: by `load_from`).
    #[serde(default)]
    pub load_gb_per_s: Option<Positive>,
    /// Putting the old model away: for `host_memory`, its weights copied to host memory at the same
    /// bandwidth (default; the sleep post's level-1 sleep of 61 GB takes 2.78 s); for a cold start,
    /// stopping the old process (default 1 s: a level-2 sleep, which frees as much, measured
    /// 0.09-0.46 s in the same post).
    #[serde(default)]
    pub unload: Option<SimDuration>,
    /// Starting a new engine process before its weights load (default: 15 s for a cold start, as
    /// `[restart] engine_start`; 0 for a wake).
    #[serde(default)]
    pub engine_start: Option<SimDuration>,
    /// Load-driven swaps: when the copies of a request's model carry at least this many outstanding
    /// requests each (running or waiting, as the gateway sees them), a worker of a more lightly loaded
    /// model drains and swaps to it: one whose model keeps at most half the load per copy after
    /// losing it that the busy model has per copy after gaining it (a hysteresis band); the last copy
    /// of a model is never taken.
    /// Unset (the default): a worker swaps only for a model no worker serves.
    #[serde(default)]
    pub add_replica_when_outstanding: Option<crate::config::PositiveInt>,
    /// A load-driven swap takes no worker that has served its model for less than this (default
    /// 60 s, Knative's default stable window, the span its autoscaler averages over before it acts),
    /// so a burst of a few seconds does not move GPUs back and forth.
    #[serde(default)]
    pub min_residency: Option<SimDuration>,
    /// Warm-up after the weights are in: CUDA graph capture and compilation (default: 20 s for a cold
    /// start, as `[restart] warmup`; 0 for a wake, since a sleeping engine keeps its CUDA graphs and
    /// compiled kernels). Engine start and warm-up together, 35 s, match the sleep post's fresh start
    /// of Qwen3-0.6B (35-38 s, weights negligible).
    #[serde(default)]
    pub warmup: Option<SimDuration>,
}

/// Time to stop an engine's process before a cold start (see [`SwapSpec::unload`]).
const PROCESS_STOP: SimDuration = SimDuration::from_secs(1);

/// The parts of one swap, in order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwapTime {
    pub unload: SimDuration,
    pub engine_start: SimDuration,
    pub load: SimDuration,
    pub warmup: SimDuration,
}

impl SwapTime {
    /// The whole swap after the drain.
    pub fn total(&self) -> SimDuration {
        self.unload + self.engine_start + self.load + self.warmup
    }
}

impl SwapSpec {
    /// Whether every key is left at its default (the section is then left out of resolved scenarios,
    /// which stay as they were before swaps existed).
    pub fn is_default(&self) -> bool {
        *self == SwapSpec::default()
    }

    /// See [`SwapSpec::min_residency`].
    pub fn min_residency(&self) -> SimDuration {
        self.min_residency.unwrap_or(SimDuration::from_secs(60))
    }

    /// Bandwidth per GPU in bytes per second.
    fn bytes_per_s(&self) -> f64 {
        self.load_gb_per_s
            .map_or(self.load_from.default_gb_per_s(), |b| b.0)
            * 1e9
    }

    /// A swap from a model whose weights take `from_bytes` per GPU to one taking `to_bytes` per GPU
    /// (each GPU of a tensor-parallel replica moves its own shard, in parallel).
    pub fn swap_time(&self, from_bytes: f64, to_bytes: f64) -> SwapTime {
        let bw = self.bytes_per_s();
        let restart = crate::faults::RestartSpec::default();
        if self.load_from.cold() {
            SwapTime {
                unload: self.unload.unwrap_or(PROCESS_STOP),
                engine_start: self.engine_start.unwrap_or(restart.engine_start),
                load: SimDuration::from_secs_f64(to_bytes / bw),
                warmup: self.warmup.unwrap_or(restart.warmup),
            }
        } else {
            SwapTime {
                unload: self
                    .unload
                    .unwrap_or_else(|| SimDuration::from_secs_f64(from_bytes / bw)),
                engine_start: self.engine_start.unwrap_or(SimDuration::ZERO),
                load: SimDuration::from_secs_f64(to_bytes / bw),
                warmup: self.warmup.unwrap_or(SimDuration::ZERO),
            }
        }
    }

    /// Checks the keys' ranges. `Err((field, message))`, the field relative to `[swaps]`.
    pub fn validate(&self) -> Result<(), (String, String)> {
        use crate::config::{BANDWIDTH_GB_PER_S, check_range, check_span};
        if let Some(b) = self.load_gb_per_s {
            check_range(b.0, BANDWIDTH_GB_PER_S, " GB/s")
                .map_err(|m| ("load_gb_per_s".to_string(), m))?;
        }
        let day = SimDuration::from_secs(86_400);
        for (field, d) in [
            ("unload", self.unload),
            ("engine_start", self.engine_start),
            ("warmup", self.warmup),
            ("min_residency", self.min_residency),
        ] {
            if let Some(d) = d {
                check_span(d, SimDuration::ZERO, day).map_err(|m| (field.to_string(), m))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wake_from_host_memory_moves_both_models_over_pcie() {
        let s = SwapSpec {
            load_gb_per_s: Some(Positive(20.0)),
            ..SwapSpec::default()
        };
        let t = s.swap_time(16e9, 8e9);
        assert_eq!(t.unload, SimDuration::from_millis(800));
        assert_eq!(t.load, SimDuration::from_millis(400));
        assert_eq!(t.engine_start + t.warmup, SimDuration::ZERO);
        assert_eq!(t.total(), SimDuration::from_millis(1200));
    }

    #[test]
    fn a_cold_start_pays_process_start_load_and_warm_up() {
        let s = SwapSpec {
            load_from: LoadFrom::LocalNvme,
            load_gb_per_s: Some(Positive(2.0)),
            engine_start: Some(SimDuration::from_secs(10)),
            warmup: Some(SimDuration::from_secs(5)),
            ..SwapSpec::default()
        };
        let t = s.swap_time(140e9, 16e9);
        assert_eq!(t.unload, PROCESS_STOP);
        assert_eq!(t.load, SimDuration::from_secs(8));
        assert_eq!(t.total(), SimDuration::from_secs(1 + 10 + 8 + 5));
    }
}
