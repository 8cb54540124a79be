//! `fleetsim validate`: load a scenario and build its simulation without running it.

use std::path::Path;

use anyhow::Result;

use crate::engine::Simulation;
use crate::scenario::Scenario;

/// Checks `scenario` with the `--set` overrides `set` applied; prints one line if it is valid.
pub(super) fn validate(scenario: &Path, set: &[String]) -> Result<()> {
    let s = Scenario::load(scenario, set)?;
    // Building the simulation reads a trace workload through, so a bad line shows here too.
    let sim = Simulation::from_scenario(&s).map_err(anyhow::Error::msg)?;
    for note in sim.notes() {
        eprintln!("note: {note}");
    }
    println!(
        "{}: ok ({} workers, policy {}, {} arrival window)",
        scenario.display(),
        s.worker_count(),
        s.router.policy.name(),
        s.duration
    );
    Ok(())
}
