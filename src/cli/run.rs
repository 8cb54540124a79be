//! `fleetsim run`: one simulation, its summary, and optionally its output files.

use std::path::Path;
use std::time::Instant;

use anyhow::Result;

use crate::engine::{Simulation, twin};
use crate::output;
use crate::progress::Bars;
use crate::report::{self, ResultsDir};

/// How `run` runs the simulation.
pub(super) struct Options {
    /// Check every worker's conservation laws after each step.
    pub check_invariants: bool,
    /// Time each phase and print the breakdown.
    pub profile: bool,
    /// Turn the decode fast path off.
    pub step_by_step: bool,
    /// Enter every KV block in the prefix index (private blocks off).
    pub index_every_block: bool,
    /// Judge a run with faults against its no-fault twin (`engine::twin`).
    pub twin: bool,
}

pub(super) fn run(
    path: &Path,
    out: Option<ResultsDir>,
    set: &[String],
    json: bool,
    quiet: bool,
    force: bool,
    options: Options,
) -> Result<()> {
    let started = Instant::now();
    let scenario = super::load_checked(path, set, force)?;
    if let Some(o) = &out {
        output::prepare_results_dir(o.dir, &[path], force)?;
    }
    let mut setup = started.elapsed();
    let bars = Bars::new(quiet);
    let bar = bars.simulation("simulating");
    let mut simulating = Instant::now();
    let prepare = |sim: &mut Simulation| {
        if let Some(o) = &out {
            sim.stream_requests(o.request_sink()?);
        }
        sim.check_invariants_every_step(options.check_invariants);
        sim.step_by_step(options.step_by_step);
        sim.index_every_block(options.index_every_block);
        sim.profile(options.profile);
        setup = started.elapsed();
        for note in sim.notes() {
            eprintln!("note: {note}");
        }
        simulating = Instant::now();
        Ok(())
    };
    let output = twin::run_judged(&scenario, options.twin, prepare, &mut |p| bar.update(p))
        .map_err(anyhow::Error::msg)?;
    bar.finish();
    let simulated = simulating.elapsed();
    let wall = started.elapsed();
    if json {
        out!("{}", output.summary.to_json());
    } else {
        out!("{}", output.summary.to_markdown());
    }
    let out_dir = out.as_ref().map(|o| o.dir.to_path_buf());
    if let Some(o) = out {
        report::write_files(
            o.dir,
            &report::run_files(&scenario, &output, wall.as_secs_f64())?,
        )?;
        if !json {
            outln!("\nresults written to {}", o.dir.display());
        }
    }
    if let Some(why) = &output.summary.sim.stopped {
        let written = match &out_dir {
            Some(d) => format!("; the results so far are written to {}", d.display()),
            None => String::new(),
        };
        anyhow::bail!("the run stopped early: {why}{written}");
    }
    if let Some(profile) = &output.profile {
        let total = started.elapsed();
        eprint!(
            "{}",
            profile.render(setup, simulated, total, output.summary.sim.events)
        );
        eprintln!(
            "  of which {} decode steps applied in bulk by the fast path{} ({} planned in {} runs)",
            output.fast_path.bulk_steps,
            if options.step_by_step {
                " (off: --step-by-step)"
            } else {
                ""
            },
            output.fast_path.planned_steps,
            output.fast_path.planned_runs,
        );
    }
    Ok(())
}
