//! `fleetsim validate`: load a scenario, check its size limits and build its simulation without running it.

use std::path::Path;

use anyhow::Result;

use crate::engine::Simulation;
use crate::limits::Footprint;

/// Checks `scenario` with the `--set` overrides `set` applied; prints one line if it is valid. With
/// `force`, a size limit exceeded is a note, not an error.
pub(super) fn validate(scenario: &Path, set: &[String], force: bool) -> Result<()> {
    let s = super::load_checked(scenario, set, force)?;
    // Building the simulation reads a trace workload through, so a bad line shows here too.
    let sim = Simulation::from_scenario(&s).map_err(anyhow::Error::msg)?;
    for note in sim.notes() {
        eprintln!("note: {note}");
    }
    let f = Footprint::of(&s);
    let expected = f
        .expected_requests
        .map_or(String::new(), |n| format!(", ~{n:.0} requests expected"));
    outln!(
        "{}: ok ({} workers, policy {}, {} arrival window{expected}, ~{:.0} MiB)",
        scenario.display(),
        s.worker_count(),
        s.router.policy.name(),
        s.duration,
        f.memory_bytes / f64::from(1u32 << 20)
    );
    Ok(())
}
