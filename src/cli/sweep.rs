//! `fleetsim sweep`: the cartesian product of `--grid` overrides, in parallel, resumable and shardable.

use std::path::Path;

use anyhow::{Context, Result, bail};
use rayon::prelude::*;

use crate::scenario::Scenario;
use crate::sweep::grid::{Grid, Shard};
use crate::sweep::store::{self, Manifest};
use crate::sweep::{result_files, run_point};

/// What `fleetsim sweep` was asked to do.
pub(super) struct Args<'a> {
    pub scenario: &'a Path,
    pub grid: &'a [String],
    pub out: &'a Path,
    pub set: &'a [String],
    pub replicas: u32,
    pub shard: Option<&'a str>,
    pub resume: bool,
    pub threads: Option<usize>,
    pub force: bool,
    pub stop_after: Option<usize>,
    pub quiet: bool,
}

pub(super) fn sweep(a: Args) -> Result<()> {
    let grid = Grid::parse(a.grid)?;
    let shard = a.shard.map(Shard::parse).transpose()?.unwrap_or(Shard::ALL);
    let text = std::fs::read_to_string(a.scenario)
        .with_context(|| format!("{}: cannot read scenario", a.scenario.display()))?;
    let base = super::load_checked(a.scenario, a.set, a.force)?;
    // Every point of the grid is loaded and checked before anything is written or run, in every shard:
    // a bad value fails the sweep at once, whichever shard would have run it.
    let mut points: Vec<(usize, Vec<String>, Scenario)> = Vec::new();
    for p in 0..grid.len() {
        let overrides = grid.overrides(p);
        let mut all = a.set.to_vec();
        all.extend(overrides.iter().cloned());
        let s = super::load_checked(a.scenario, &all, a.force)
            .with_context(|| format!("--grid point {p} ({})", overrides.join(" ")))?;
        if shard.holds(p) {
            points.push((p, overrides, s));
        }
    }
    let manifest = Manifest {
        fingerprint: store::fingerprint(&text, a.set, &grid, a.replicas),
        scenario: base.name.clone(),
        grid: grid.clone(),
        replicas: a.replicas,
        points: grid.len(),
    };
    let done = match store::read_manifest(a.out)? {
        Some(m) if m.fingerprint != manifest.fingerprint => bail!(
            "{} holds another sweep (fingerprint {}, this one's is {}): choose another --out",
            a.out.display(),
            m.fingerprint,
            manifest.fingerprint
        ),
        Some(m) => {
            let done = store::read_points(a.out, &m)?;
            let mine = done.keys().filter(|&&p| shard.holds(p)).count();
            if !a.resume && mine > 0 {
                bail!(
                    "{} already holds {mine} finished point(s) of this sweep: add --resume to continue it, or choose another --out",
                    a.out.display()
                );
            }
            done
        }
        None => Default::default(),
    };
    crate::output::prepare_dir(a.out, &[a.scenario])?;
    store::write_manifest(a.out, &manifest, &[a.scenario])?;
    crate::output::prepare_dir(&store::points_dir(a.out), &[a.scenario])?;

    let mut todo: Vec<&(usize, Vec<String>, Scenario)> = points
        .iter()
        .filter(|(p, _, _)| !done.contains_key(p))
        .collect();
    let skipped = points.len() - todo.len();
    let stopped = a.stop_after.is_some_and(|n| n < todo.len());
    if let Some(n) = a.stop_after {
        todo.truncate(n);
    }
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(a.threads.unwrap_or(cores).min(todo.len()).max(1))
        .build()
        .context("cannot start worker threads")?;
    eprintln!(
        "sweep {}: {} point(s) × {} replica(s){}; {} already done, {} to run",
        manifest.fingerprint,
        points.len(),
        a.replicas,
        if shard.is_all() {
            String::new()
        } else {
            format!(
                " in shard {}/{} of {}",
                shard.index,
                shard.count,
                grid.len()
            )
        },
        skipped,
        todo.len()
    );
    let bars = crate::progress::Bars::new(a.quiet);
    let bar = bars.counter("points", todo.len() as u64);
    pool.install(|| {
        todo.par_iter()
            .try_for_each(|(p, overrides, s)| -> Result<()> {
                let r = run_point(&manifest.fingerprint, *p, overrides.clone(), s, a.replicas)
                    .map_err(anyhow::Error::msg)
                    .with_context(|| format!("point {p} ({})", overrides.join(" ")))?;
                store::write_point(a.out, &r)?;
                bar.set_message(format!("last: {}", overrides.join(" ")));
                bar.inc(1);
                Ok(())
            })
    })?;
    bar.finish_and_clear();
    if stopped {
        bail!(
            "stopped after {} point(s) as asked (--stop-after)",
            todo.len()
        );
    }
    if !shard.is_all() {
        outln!(
            "shard {}/{}: {} point(s) in {}; combine the shards with `fleetsim merge --out DIR SHARD_DIR...`",
            shard.index,
            shard.count,
            points.len(),
            store::points_dir(a.out).display()
        );
        return Ok(());
    }
    finish(a.out, &manifest, &[a.scenario])
}

/// Writes the final tables and plots of a sweep whose points are all in `dir`, and prints the table.
pub(super) fn finish(dir: &Path, m: &Manifest, inputs: &[&Path]) -> Result<()> {
    let found = store::read_points(dir, m)?;
    let missing: Vec<usize> = (0..m.points).filter(|p| !found.contains_key(p)).collect();
    if !missing.is_empty() {
        bail!(
            "{}: {} of {} point(s) missing (first: {:?})",
            dir.display(),
            missing.len(),
            m.points,
            &missing[..missing.len().min(10)]
        );
    }
    let points: Vec<_> = found.into_values().collect();
    let files = result_files(m, &points).map_err(anyhow::Error::msg)?;
    crate::output::write_dir(dir, &files, inputs)?;
    if let Some((_, md)) = files.iter().find(|(n, _)| n == "sweep.md") {
        out!("{}", String::from_utf8_lossy(md));
    }
    outln!("\nresults written to {}", dir.display());
    Ok(())
}
