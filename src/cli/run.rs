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
    /// Independent replications (1: the plain run).
    pub replications: u32,
    /// With `--precision`: the target and the decisive metric.
    pub precision: Option<(crate::confidence::Precision, String)>,
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
    if options.replications > 1 || options.precision.is_some() {
        return replicated(&scenario, out, json, quiet, &options);
    }
    let mut setup = started.elapsed();
    let bars = Bars::new(quiet);
    let bar = bars.simulation("simulating");
    let mut simulating = Instant::now();
    let prepare = |sim: &mut Simulation| {
        if let Some(o) = &out {
            sim.stream_requests(o.request_sink(&scenario)?);
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

/// The folder of replication `r` (0-based) under a results folder: the folder itself for the first,
/// `replications/R` (1-based) for the others.
pub(super) fn replication_dir(dir: &Path, r: u32) -> std::path::PathBuf {
    if r == 0 {
        dir.to_path_buf()
    } else {
        dir.join("replications").join((r + 1).to_string())
    }
}

/// `run --replications N` (or `--precision`): independent replications in parallel, each with its own
/// outputs; the first replication's summary gains the intervals of every headline metric.
fn replicated(
    scenario: &crate::scenario::Scenario,
    out: Option<ResultsDir>,
    json: bool,
    quiet: bool,
    options: &Options,
) -> Result<()> {
    use crate::confidence::replicate;
    use crate::metrics::intervals::Intervals;
    if options.profile || options.check_invariants {
        anyhow::bail!(
            "--profile and --check-invariants time or check one run: use them without --replications or --precision"
        );
    }
    let bars = Bars::new(quiet);
    let run_one = |r: u32, s: &crate::scenario::Scenario| {
        let started = Instant::now();
        let bar = bars.simulation(&format!("replication {}", r + 1));
        let prepare = |sim: &mut Simulation| {
            if let Some(o) = &out {
                let dir = replication_dir(o.dir, r);
                let sink = ResultsDir {
                    dir: &dir,
                    requests_csv: o.requests_csv,
                }
                .request_sink(s)?;
                sim.stream_requests(sink);
            }
            sim.step_by_step(options.step_by_step);
            sim.index_every_block(options.index_every_block);
            if r == 0 {
                for note in sim.notes() {
                    eprintln!("note: {note}");
                }
            }
            Ok(())
        };
        let output = twin::run_judged(s, options.twin, prepare, &mut |p| bar.update(p))?;
        bar.finish();
        Ok((output, started.elapsed().as_secs_f64()))
    };
    let precision = options.precision.as_ref().map(|(p, m)| (p, m.as_str()));
    if let Some((_, metric)) = precision
        && !crate::metrics::headline::METRICS
            .iter()
            .any(|(k, _)| k == &metric)
    {
        anyhow::bail!(
            "--precision-metric {metric}: not a headline metric; one of {}",
            crate::metrics::headline::METRICS
                .iter()
                .map(|(k, _)| *k)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let decisive = |runs: &[(crate::engine::RunOutput, f64)]| {
        let summaries: Vec<_> = runs.iter().map(|(o, _)| &o.summary).collect();
        Intervals::metric(&summaries, precision.map_or("ttft_p95_ms", |(_, m)| m))
    };
    let (mut runs, outcome) = replicate::replicate(
        scenario,
        options.replications,
        precision,
        &decisive,
        &run_one,
    )
    .map_err(anyhow::Error::msg)?;
    let summaries: Vec<_> = runs.iter().map(|(o, _)| &o.summary).collect();
    let intervals = Intervals::of(&summaries, outcome);
    runs[0].0.summary.replications = Some(intervals);
    let first = &runs[0].0.summary;
    if json {
        out!("{}", first.to_json());
    } else {
        out!("{}", first.to_markdown());
    }
    if let Some(o) = &out {
        let all: Vec<_> = runs.iter().map(|(o, _)| o).collect();
        let band = report::plots::Band::of(&all);
        for (r, (output, wall)) in runs.iter().enumerate() {
            let s = replicate::scenario_of(scenario, r as u32);
            let band = (r == 0).then(|| band.clone());
            report::write_files(
                &replication_dir(o.dir, r as u32),
                &report::run_files_with(&s, output, *wall, band)?,
            )?;
        }
        if !json {
            outln!(
                "\nresults written to {} (replications 2 to {} in replications/)",
                o.dir.display(),
                runs.len()
            );
        }
    }
    if let Some((r, why)) = runs
        .iter()
        .enumerate()
        .find_map(|(r, (o, _))| o.summary.sim.stopped.as_ref().map(|w| (r, w)))
    {
        anyhow::bail!("replication {} stopped early: {why}", r + 1);
    }
    Ok(())
}
