//! Which models and LoRA adapters the requests ask for, and whether the fleet may serve them.

use super::Scenario;
use crate::gateway::SessionState;
use crate::hardware::ModelId;

impl Scenario {
    /// Models a group may swap to: each fits the group's GPUs, and the features that assume a worker's
    /// model never changes are off.
    pub(super) fn validate_models(&self) -> Result<(), (String, String)> {
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
    pub(super) fn validate_lora(&self) -> Result<(), (String, String)> {
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
}
