//! The command line: `run`, `validate`, `catalog`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use crate::compare;
use crate::engine::Simulation;
use crate::hardware::{GpuId, ModelId, PerfModel, Precision};
use crate::report;
use crate::routing::PolicyConfig;
use crate::scenario::Scenario;

/// fleetsim: simulate an LLM inference fleet before you change the real one.
#[derive(Debug, Parser)]
#[command(name = "fleetsim", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one simulation and print its summary.
    Run {
        /// Scenario file (TOML).
        scenario: PathBuf,
        /// Write summary.json, summary.md and run_info.json into this directory.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Override a scenario value, e.g. `--set workload.rate=40` or `--set workers[0].count=8`.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Print summary.json to stdout instead of the table.
        #[arg(long)]
        json: bool,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Run the same arrivals through several routing policies in parallel and compare them.
    Compare {
        /// Scenario file (TOML).
        scenario: PathBuf,
        /// Policies: names of `[policies.NAME]` tables or specs `name[:key=value,...]`, comma-separated
        /// (default: every `[policies]` table in the scenario).
        #[arg(long)]
        policies: Option<String>,
        /// Write one folder per policy plus comparison.json, comparison.md and comparison.csv here.
        #[arg(long)]
        out: Option<PathBuf>,
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Worker threads (default: one per core). Results do not depend on it.
        #[arg(long)]
        threads: Option<usize>,
    },
    /// Check a scenario file; exit non-zero with a clear error if it is invalid.
    Validate {
        scenario: PathBuf,
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
    },
    /// List the GPUs, models, precisions and routing policies fleetsim knows.
    Catalog,
}

/// Runs the parsed command line.
pub fn main_with(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Run {
            scenario,
            out,
            set,
            json,
            quiet,
        } => run(&scenario, out.as_deref(), &set, json, quiet),
        Command::Compare {
            scenario,
            policies,
            out,
            set,
            threads,
        } => compare(
            &scenario,
            policies.as_deref(),
            out.as_deref(),
            &set,
            threads,
        ),
        Command::Validate { scenario, set } => {
            let s = Scenario::load(&scenario, &set)?;
            println!(
                "{}: ok ({} workers, policy {}, {} arrival window)",
                scenario.display(),
                s.worker_count(),
                s.router.policy.name(),
                s.duration
            );
            Ok(())
        }
        Command::Catalog => {
            print!("{}", catalog());
            Ok(())
        }
    }
}

fn run(path: &Path, out: Option<&Path>, set: &[String], json: bool, quiet: bool) -> Result<()> {
    let scenario = Scenario::load(path, set)?;
    let sim = Simulation::from_scenario(&scenario).map_err(anyhow::Error::msg)?;
    let bar = if quiet || !std::io::stderr().is_terminal() {
        ProgressBar::hidden()
    } else {
        let b = ProgressBar::new(1000);
        b.set_style(
            ProgressStyle::with_template(
                "{spinner} simulating [{bar:40}] {percent}% of the arrival window ({elapsed})",
            )
            .expect("valid template"),
        );
        b
    };
    let started = Instant::now();
    let output = sim.run(&mut |f| bar.set_position((f * 1000.0) as u64));
    bar.finish_and_clear();
    let wall = started.elapsed();
    if json {
        print!("{}", output.summary.to_json());
    } else {
        print!("{}", output.summary.to_markdown());
    }
    if let Some(dir) = out {
        report::write_files(dir, &report::run_files(&output, wall.as_secs_f64())?)?;
        if !json {
            println!("\nresults written to {}", dir.display());
        }
    }
    Ok(())
}

fn compare(
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

/// The catalogue as text tables.
pub fn catalog() -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let _ = writeln!(o, "GPUs (dense peaks)");
    let _ = writeln!(
        o,
        "  {:<8} {:<28} {:>10} {:>10} {:>9} {:>10} {:>9}",
        "id", "name", "BF16 TF/s", "FP8 TF/s", "mem GiB", "HBM TB/s", "link GB/s"
    );
    for g in GpuId::ALL {
        let s = g.spec();
        let _ = writeln!(
            o,
            "  {:<8} {:<28} {:>10.0} {:>10} {:>9.1} {:>10.2} {:>9.0}",
            s.id,
            s.name,
            s.bf16_flops / 1e12,
            s.fp8_flops
                .map_or("-".to_string(), |f| format!("{:.0}", f / 1e12)),
            s.memory_bytes / (1u64 << 30) as f64,
            s.memory_bw / 1e12,
            s.link_bw / 1e9
        );
    }
    let _ = writeln!(o, "\nModels");
    let _ = writeln!(
        o,
        "  {:<14} {:>8} {:>8} {:>7} {:>9} {:>14}",
        "id", "params B", "active B", "layers", "kv heads", "KV KiB/token"
    );
    for m in ModelId::ALL {
        let s = m.spec();
        let active = s.active_block_params() + 2.0 * s.embedding_params();
        let _ = writeln!(
            o,
            "  {:<14} {:>8.2} {:>8.2} {:>7} {:>9} {:>14.0}",
            s.id,
            s.total_params() / 1e9,
            active / 1e9,
            s.layers,
            s.kv_heads,
            s.kv_bytes_per_token(2.0) / 1024.0
        );
    }
    let _ = writeln!(
        o,
        "\nPrecisions: {}",
        Precision::ALL.map(Precision::as_str).join(", ")
    );
    let _ = writeln!(o, "Routing policies: {}", PolicyConfig::NAMES.join(", "));
    let p = PerfModel::with_defaults(GpuId::H100, ModelId::Llama31_8b, 1, Precision::Bf16);
    let _ = writeln!(
        o,
        "\nExample (h100, llama-3.1-8b, tp 1, bf16): 2,048-token prefill {:.1} ms, batch-1 decode step {:.2} ms",
        p.prefill_seconds(2048, 0) * 1e3,
        p.decode_step_seconds(1, 1024) * 1e3
    );
    o
}
