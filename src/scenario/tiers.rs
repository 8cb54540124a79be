//! `[tiers]` checked against the fleet: one shared store, and tiers only over a prefix cache.

use super::Scenario;
use crate::gateway::SessionState;
use crate::time::SimDuration;

impl Scenario {
    /// Tiers: one shared store, and tiers only where there is a prefix cache to write down.
    pub(super) fn validate_tiers(&self) -> Result<(), (String, String)> {
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

    /// Whether the fleet has a shared KV store (for `store_failure` faults).
    pub fn has_shared_store(&self) -> bool {
        self.gateway.session_state == SessionState::SharedTier || self.tiers.shared.is_some()
    }
}
