//! `[[faults]]` and `[restart]`: each worker's failure domains and restart time, and the fault plan.

use super::Scenario;
use crate::faults::{FaultPlan, Fleet};
use crate::time::SimDuration;
use crate::time::SimTime;

/// The largest fleet with faults: per-worker fault state is materialised.
pub(super) const MAX_FAULT_FLEET: usize = 1_000_000;

impl Scenario {
    /// Per worker, its failure-domain labels.
    pub fn worker_domains(&self) -> Vec<Vec<String>> {
        self.workers
            .iter()
            .flat_map(|g| {
                std::iter::repeat_n(g.failure_domain.0.clone(), self.group_slots(g) as usize)
            })
            .collect()
    }

    /// Per worker, the default restart time: engine start, loading its replica's weights, warm-up.
    pub fn restart_times(&self) -> Vec<SimDuration> {
        self.workers
            .iter()
            .flat_map(|g| {
                let perf = g.perf();
                let t = self
                    .restart
                    .restart_time(perf.weight_bytes_per_gpu() * f64::from(g.tp.0));
                std::iter::repeat_n(t, self.group_slots(g) as usize)
            })
            .collect()
    }

    /// The faults of this scenario, expanded for a run.
    pub fn fault_plan(&self) -> Result<FaultPlan, String> {
        if self.faults.is_empty() {
            return Ok(FaultPlan::default());
        }
        let domains = self.worker_domains();
        let restart = self.restart_times();
        let fleet = Fleet {
            domains: &domains,
            restart: &restart,
            has_store: self.has_shared_store(),
        };
        self.fault_plan_for(&fleet)
            .map_err(|(i, f, m)| format!("faults[{i}].{f}: {m}"))
    }

    pub(super) fn fault_plan_for(
        &self,
        fleet: &Fleet,
    ) -> Result<FaultPlan, (usize, &'static str, String)> {
        let horizon = SimTime(crate::workload::synthetic::window_end(self.duration).0);
        FaultPlan::build(&self.faults, fleet, self.seed, horizon)
    }

    /// `[[faults]]`: only on a fleet whose per-worker fault state fits in memory; each fault checked
    /// against the fleet's domains, restart times and shared store, then the whole plan built once.
    pub(super) fn validate_faults(&self) -> Result<(), (String, String)> {
        if self.faults.is_empty() {
            return Ok(());
        }
        if self.worker_count() > MAX_FAULT_FLEET {
            return Err((
                "faults".into(),
                format!(
                    "faults are simulated for fleets of at most {MAX_FAULT_FLEET} workers; this one has {}",
                    self.worker_count()
                ),
            ));
        }
        let fleet_domains = self.worker_domains();
        let restart = self.restart_times();
        let fleet = Fleet {
            domains: &fleet_domains,
            restart: &restart,
            has_store: self.has_shared_store(),
        };
        for (i, f) in self.faults.iter().enumerate() {
            f.validate(&fleet)
                .map_err(|(field, m)| (format!("faults[{i}].{field}"), m))?;
        }
        self.fault_plan_for(&fleet)
            .map_err(|(i, field, m)| (format!("faults[{i}].{field}"), m))?;
        Ok(())
    }
}
