//! Service-level objectives: what makes a completed request *good*. Read from a scenario's `[slo]`
//! table, but a metrics type: the metrics judge requests against it and know nothing of scenarios.

use serde::{Deserialize, Serialize};

use crate::time::SimDuration;

/// Service-level objectives: a completed request is *good* if it meets every one that is set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Slo {
    /// Time to first token.
    #[serde(default)]
    pub ttft: Option<SimDuration>,
    /// Time per output token after the first.
    #[serde(default)]
    pub tpot: Option<SimDuration>,
    /// Also judge p95 TTFT and p95 TPOT on every window of this width in steady state, the worst one
    /// counting (`summary.json` `slo_window`; `fleetsim size` requires the worst window to meet the
    /// targets, so a burst cannot hide in a whole-run p95). A multiple of `[metrics] window`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<SimDuration>,
}
