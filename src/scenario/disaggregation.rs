//! Prefill/decode disaggregation and hot-prefix replication checked against the fleet.

use super::{Scenario, WorkerGroup};
use crate::gateway::SessionState;
use crate::time::SimDuration;

impl Scenario {
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
    pub(super) fn validate_disaggregation(&self) -> Result<(), (String, String)> {
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
    pub(super) fn validate_replication(&self) -> Result<(), (String, String)> {
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
}
