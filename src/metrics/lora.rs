//! What LoRA adapters cost a run (`summary.json` `lora`): adapter loads, the time they took, the
//! requests that waited for an adapter slot, and those no worker could serve. Plain numbers, filled
//! by the engine from its workers' adapter counters.

use serde::{Deserialize, Serialize};

/// The `lora` block of `summary.json` (present when some worker group has `[workers.lora]` or a
/// request names an adapter).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoraSummary {
    /// Routing attempts of requests that named an adapter (a retried request counts again).
    pub requests_with_adapter: u64,
    /// Distinct adapters those requests asked for.
    pub adapters_requested: u64,
    /// Adapters read from disk into a worker's CPU cache.
    pub disk_loads: u64,
    /// Adapters copied into a GPU slot.
    pub gpu_loads: u64,
    /// Step time spent loading adapters, summed over workers, s.
    pub load_seconds: f64,
    /// Requests that a worker's scheduler skipped at least once because their adapter could not
    /// join a batch that already had `max_loras` adapters.
    pub requests_waited_for_slot: u64,
    /// Steps whose batch held a LoRA request (and paid the LoRA step-time multiplier).
    pub lora_steps: u64,
    /// Requests for an adapter no worker may serve (also in `requests.rejected_by_reason`).
    pub rejected_adapter_not_served: u64,
}
