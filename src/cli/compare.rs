//! `fleetsim compare`: the same arrivals through several routing policies, in parallel.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};

use crate::compare;
use crate::report;
use crate::scenario::Scenario;

pub(super) fn compare(
    path: &Path,
    policies: Option<&str>,
    out: Option<&Path>,
    set: &[String],
    threads: Option<usize>,
) -> Result<()> {
    let scenario = Scenario::load(path, set)?;
    let list = match policies {
        Some(p) => p.to_string(),
        None if !scenario.policies.is_empty() => scenario
            .policies
            .keys()
            .cloned()
            .collect::<Vec<_>>()
            .join(","),
        None => anyhow::bail!(
            "{}: give --policies, or [policies.NAME] tables in the scenario",
            path.display()
        ),
    };
    let contenders = compare::resolve(&list, &scenario).map_err(anyhow::Error::msg)?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.unwrap_or(0))
        .build()
        .context("cannot start worker threads")?;
    let started = Instant::now();
    let outputs = pool
        .install(|| compare::run_all(&scenario, &contenders))
        .map_err(anyhow::Error::msg)?;
    let wall = started.elapsed().as_secs_f64();
    let cmp = compare::Comparison::new(&scenario, &contenders, &outputs);
    print!("{}", cmp.to_markdown());
    if let Some(dir) = out {
        for (c, o) in contenders.iter().zip(&outputs) {
            report::write_files(
                &dir.join(compare::folder_name(&c.label)),
                &report::run_files(o, wall)?,
            )?;
        }
        report::write_files(
            dir,
            &[
                ("comparison.json".into(), cmp.to_json().into_bytes()),
                ("comparison.md".into(), cmp.to_markdown().into_bytes()),
                ("comparison.csv".into(), cmp.to_csv()),
            ],
        )?;
        println!("\nresults written to {}", dir.display());
    }
    Ok(())
}

