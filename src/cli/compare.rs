//! `fleetsim compare`: the same arrivals through several routing policies, in parallel.

use std::path::Path;

use anyhow::{Context, Result};

use crate::compare;
use crate::engine::RunProgress;
use crate::output;
use crate::progress::Bars;
use crate::report::{self, ResultsDir, plots};

// One argument per command-line flag of `compare`, passed through as parsed.
#[allow(clippy::too_many_arguments)]
pub(super) fn compare(
    path: &Path,
    policies: Option<&str>,
    vary: Option<&str>,
    out: Option<ResultsDir>,
    set: &[String],
    threads: Option<usize>,
    force: bool,
    quiet: bool,
    confidence: &super::ConfidenceArgs,
) -> Result<()> {
    let precision = confidence.precision()?;
    let scenario = super::load_checked(path, set, force)?;
    let list = match policies {
        Some(p) => p.to_string(),
        None if vary.is_some() && scenario.policies.is_empty() => String::new(),
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
    let mut contenders = if list.is_empty() {
        // Only --vary: the scenario's own router, once per value.
        vec![compare::Contender {
            label: scenario.router.policy.name().to_string(),
            router: scenario.router.clone(),
            scenario: None,
        }]
    } else {
        compare::resolve(&list, &scenario).map_err(anyhow::Error::msg)?
    };
    if let Some(vary) = vary {
        let (key, values) = vary
            .split_once('=')
            .context("--vary takes KEY=V1,V2,... (e.g. gateway.session_state=client,worker)")?;
        let mut variants = Vec::new();
        for v in values.split(',').map(str::trim).filter(|v| !v.is_empty()) {
            let label = format!("{key}={v}");
            let mut overrides = set.to_vec();
            overrides.push(label.clone());
            variants.push((label, super::load_checked(path, &overrides, force)?));
        }
        anyhow::ensure!(!variants.is_empty(), "--vary {vary}: no values given");
        contenders =
            compare::cross(contenders, &scenario, &variants).map_err(anyhow::Error::msg)?;
    }
    if let Some(o) = &out {
        output::prepare_results_dir(o.dir, &[path], force)?;
    }
    // Each policy's requests stream into its own folder (replication r > 0: `replications/R` in it)
    // while it runs.
    let sink = |c: &compare::Contender, r: u32| match &out {
        Some(o) => ResultsDir {
            dir: &super::run::replication_dir(&o.dir.join(compare::folder_name(&c.label)), r),
            requests_csv: o.requests_csv,
        }
        .request_sink(c.scenario.as_deref().unwrap_or(&scenario))
        .map(Some),
        None => Ok(None),
    };
    // More threads than runs would only idle.
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(
            threads
                .unwrap_or(cores)
                .min(contenders.len() * confidence.replications.max(2) as usize)
                .max(1),
        )
        .build()
        .context("cannot start worker threads")?;
    // One bar per run, on stderr, only on a terminal and without --quiet.
    let bars = Bars::new(quiet);
    let replicated = confidence.replications > 1 || precision.is_some();
    let run_rep = |r: u32, _: &crate::scenario::Scenario| {
        let per_run: Vec<_> = contenders
            .iter()
            .map(|c| {
                bars.simulation(&if replicated {
                    format!("{} #{}", c.label, r + 1)
                } else {
                    c.label.clone()
                })
            })
            .collect();
        let progress = |i: usize, p: &RunProgress| per_run[i].update(p);
        let runs = compare::run_all_timed(&scenario, &contenders, r, &sink, &progress)?;
        for b in &per_run {
            b.finish();
        }
        Ok(runs)
    };
    let metric = precision
        .as_ref()
        .map_or("ttft_p95_ms", |(_, m)| m.as_str())
        .to_string();
    anyhow::ensure!(
        crate::metrics::headline::METRICS
            .iter()
            .any(|(k, _)| *k == metric),
        "--precision-metric {metric}: not a headline metric"
    );
    // The least precise policy decides.
    let decisive = |reps: &[Vec<(crate::engine::RunOutput, f64)>]| {
        (0..contenders.len())
            .map(|i| {
                let v: Vec<_> = reps.iter().map(|rep| &rep[i].0.summary).collect();
                crate::metrics::intervals::Intervals::metric(&v, &metric)
            })
            .max_by(|a, b| {
                let rel = |e: &crate::confidence::Estimate| {
                    let r = e.relative_half_width();
                    if r.is_nan() { f64::INFINITY } else { r }
                };
                rel(a).total_cmp(&rel(b))
            })
            .expect("at least one policy")
    };
    let (reps, outcome) = pool
        .install(|| {
            crate::confidence::replicate::replicate(
                &scenario,
                confidence.replications,
                precision.as_ref().map(|(p, m)| (p, m.as_str())),
                &decisive,
                &run_rep,
            )
        })
        .map_err(anyhow::Error::msg)?;
    let mut reps = reps.into_iter();
    let (outputs, walls): (Vec<_>, Vec<_>) =
        reps.next().expect("one replication").into_iter().unzip();
    let rest: Vec<Vec<(crate::engine::RunOutput, f64)>> = reps.collect();
    let mut cmp = compare::Comparison::new(&scenario, &contenders, &outputs);
    if replicated {
        let per_run: Vec<Vec<&crate::metrics::Summary>> = (0..contenders.len())
            .map(|i| {
                std::iter::once(&outputs[i].summary)
                    .chain(rest.iter().map(|rep| &rep[i].0.summary))
                    .collect()
            })
            .collect();
        cmp.replications = Some(compare::Paired::of(&per_run, outcome));
    }
    out!("{}", cmp.to_markdown());
    if let Some(ResultsDir { dir, .. }) = out {
        for ((c, o), wall) in contenders.iter().zip(&outputs).zip(walls) {
            report::write_files(
                &dir.join(compare::folder_name(&c.label)),
                &report::run_files(&c.resolved(&scenario), o, wall)?,
            )?;
        }
        for (r, rep) in rest.iter().enumerate() {
            let r = r as u32 + 1;
            for (c, (o, wall)) in contenders.iter().zip(rep) {
                let mut s = c.resolved(&scenario);
                s.seed = crate::confidence::replication_seed(s.seed, r);
                report::write_files(
                    &super::run::replication_dir(&dir.join(compare::folder_name(&c.label)), r),
                    &report::run_files(&s, o, *wall)?,
                )?;
            }
        }
        let svgs = comparison_plots(&scenario.name, &contenders, &outputs)?;
        let runs: Vec<_> = contenders
            .iter()
            .zip(&outputs)
            .map(|(c, o)| (&o.summary, Some(compare::folder_name(&c.label))))
            .collect();
        let page = report::html::comparison_page(&scenario.name, &runs, &svgs);
        let mut files = vec![
            ("comparison.json".into(), cmp.to_json().into_bytes()),
            ("comparison.md".into(), cmp.to_markdown().into_bytes()),
            ("comparison.csv".into(), cmp.to_csv()),
            ("report.html".into(), page.into_bytes()),
        ];
        files.extend(svgs);
        report::write_files(dir, &files)?;
        outln!("\nresults written to {}", dir.display());
    }
    Ok(())
}

/// The comparison's plots, one line per variant in each ([`plots::comparison`]).
fn comparison_plots(
    scenario: &str,
    contenders: &[compare::Contender],
    outputs: &[crate::engine::RunOutput],
) -> Result<Vec<report::OutputFile>> {
    let per_run: Vec<plots::RunPlots> = outputs.iter().map(plots::RunPlots::of).collect();
    let runs: Vec<(String, &plots::RunPlots)> = contenders
        .iter()
        .map(|c| c.label.clone())
        .zip(&per_run)
        .collect();
    plots::comparison::files(scenario, &runs).map_err(anyhow::Error::msg)
}
