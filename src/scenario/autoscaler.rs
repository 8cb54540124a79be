//! `[autoscaler]` checked against the fleet it scales.

use super::Scenario;

impl Scenario {
    /// `[autoscaler]`: its own bounds and spans, and a fleet it can scale: aggregated worker groups,
    /// started at t = 0, each serving its own model (one deployment per model), each group's `count`
    /// (its initial replicas) within its model's bounds; every `models` entry names a served model.
    pub(super) fn validate_autoscaler(&self) -> Result<(), (String, String)> {
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
}
