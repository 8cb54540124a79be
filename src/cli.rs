//! The command line: `run`, `validate`, `estimate`, `catalog`, `calibrate`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use crate::calibration;
use crate::engine::Simulation;
use crate::estimate;
use crate::hardware::{GpuId, ModelId, PerfModel, Precision, Profile, profile};
use crate::metrics::Summary;
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
    /// Check a scenario file; exit non-zero with a clear error if it is invalid.
    Validate {
        scenario: PathBuf,
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
    },
    /// List the GPUs, models, precisions, calibrated profiles and routing policies fleetsim knows.
    Catalog,
    /// Estimate one configuration: prefill and decode step times, KV capacity, latencies and throughput.
    Estimate {
        /// GPU id (`fleetsim catalog` lists them).
        #[arg(long, value_parser = parse_id::<GpuId>)]
        gpu: GpuId,
        /// Model id.
        #[arg(long, value_parser = parse_id::<ModelId>)]
        model: ModelId,
        /// Tensor-parallel degree (1, 2, 4 or 8).
        #[arg(long, default_value_t = 1, value_parser = parse_tp)]
        tp: u32,
        /// Precision of weights and KV cache.
        #[arg(long, default_value = "bf16", value_parser = parse_id::<Precision>)]
        precision: Precision,
        /// Prompt tokens per request.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        prompt: u32,
        /// Output tokens per request.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        output: u32,
        /// Measure over a closed-loop run of this many clients (default: one request on an idle worker).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        concurrency: Option<u32>,
        /// Requests of the closed-loop run (default: ten per client).
        #[arg(long, requires = "concurrency", value_parser = clap::value_parser!(u32).range(1..))]
        requests: Option<u32>,
        /// Use this profile file instead of the built-in one.
        #[arg(long)]
        profile: Option<PathBuf>,
        /// Print JSON instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Fit the step-time profiles to the measurements in the data directory; write them and the report.
    Calibrate {
        /// Directory of the calibration data.
        #[arg(long, default_value = "data/calibration")]
        data: PathBuf,
        /// Directory to write the profiles into.
        #[arg(long, default_value = "profiles")]
        profiles: PathBuf,
        /// Also write the calibration report (Markdown) to this file, e.g. docs/calibration.md.
        #[arg(long)]
        report: Option<PathBuf>,
        /// Write nothing: exit non-zero if the profiles or report on disk differ from what the fit gives.
        #[arg(long)]
        check: bool,
    },
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
        Command::Validate { scenario, set } => {
            let s = Scenario::load(&scenario, &set)?;
            println!(
                "{}: ok ({} workers, policy {}, {} arrival window)",
                scenario.display(),
                s.worker_count(),
                s.router.name(),
                s.duration
            );
            Ok(())
        }
        Command::Catalog => {
            print!("{}", catalog());
            Ok(())
        }
        Command::Estimate {
            gpu,
            model,
            tp,
            precision,
            prompt,
            output,
            concurrency,
            requests,
            profile,
            json,
        } => {
            let profile = match profile {
                Some(path) => Some((path.display().to_string(), Profile::load(&path)?)),
                None => None,
            };
            let e = estimate::estimate(&estimate::EstimateRequest {
                gpu,
                model,
                tp,
                precision,
                prompt,
                output,
                concurrency,
                requests,
                profile,
            })
            .map_err(anyhow::Error::msg)?;
            print!("{}", if json { e.to_json() } else { e.to_markdown() });
            Ok(())
        }
        Command::Calibrate {
            data,
            profiles,
            report,
            check,
        } => calibrate(&data, &profiles, report.as_deref(), check),
    }
}

/// A catalogue id as written in scenario files (`h100`, `llama-3.1-8b`, `bf16`).
fn parse_id<T: serde::de::DeserializeOwned>(s: &str) -> Result<T, String> {
    T::deserialize(serde::de::value::StrDeserializer::<serde::de::value::Error>::new(s))
        .map_err(|e| e.to_string())
}

fn parse_tp(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(tp @ (1 | 2 | 4 | 8)) => Ok(tp),
        _ => Err(format!("must be 1, 2, 4 or 8, got {s}")),
    }
}

/// `fleetsim calibrate`: fit, then write (or, with `check`, compare) the profiles and the report.
fn calibrate(data: &Path, profiles: &Path, report: Option<&Path>, check: bool) -> Result<()> {
    let c = calibration::calibrate(data)?;
    let mut files: Vec<(PathBuf, String)> = c
        .profiles
        .iter()
        .map(|p| {
            let name = format!("{}.toml", p.profile.key().file_stem());
            (profiles.join(name), calibration::profile_file(&p.profile))
        })
        .collect();
    if let Some(r) = report {
        files.push((r.to_path_buf(), calibration::report::markdown(&c)));
    }
    let mut stale = Vec::new();
    for (path, text) in &files {
        if check {
            if std::fs::read_to_string(path).ok().as_deref() != Some(text.as_str()) {
                stale.push(path.display().to_string());
            }
        } else {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
            }
            std::fs::write(path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    print!("{}", calibration::report::profiles_table(&c));
    let (median, max) = c.published_errors();
    println!(
        "published held-out points: {}, median error {:.1}%, max {:.1}%",
        c.published.len(),
        median * 100.0,
        max * 100.0
    );
    if !stale.is_empty() {
        anyhow::bail!(
            "out of date (re-run `fleetsim calibrate --report docs/calibration.md`): {}",
            stale.join(", ")
        );
    }
    Ok(())
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
    let (summary, _) = sim.run(&mut |f| bar.set_position((f * 1000.0) as u64));
    bar.finish_and_clear();
    let wall = started.elapsed();
    if json {
        print!("{}", summary.to_json());
    } else {
        print!("{}", summary.to_markdown());
    }
    if let Some(dir) = out {
        write_results(dir, &summary, wall.as_secs_f64())?;
        if !json {
            println!("\nresults written to {}", dir.display());
        }
    }
    Ok(())
}

/// Writes a run's result files: the only place `run` touches the file system.
fn write_results(dir: &Path, summary: &Summary, wall_s: f64) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create results directory {}", dir.display()))?;
    let info = serde_json::json!({
        "fleetsim_version": env!("CARGO_PKG_VERSION"),
        "command_line": std::env::args().collect::<Vec<_>>(),
        "wall_seconds": wall_s,
        "simulated_seconds": summary.sim.simulated_s,
        "events": summary.sim.events,
        "events_per_wall_second": summary.sim.events as f64 / wall_s.max(1e-9),
    });
    for (name, bytes) in [
        ("summary.json", summary.to_json()),
        ("summary.md", summary.to_markdown()),
        ("run_info.json", serde_json::to_string_pretty(&info)? + "\n"),
    ] {
        let p = dir.join(name);
        std::fs::write(&p, bytes).with_context(|| format!("cannot write {}", p.display()))?;
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
    let _ = writeln!(
        o,
        "\nCalibrated step-time profiles (others borrow the nearest, spec-scaled; docs/calibration.md)"
    );
    let _ = writeln!(
        o,
        "  {:<30} {:<22} {:>12} {:>12}",
        "profile", "data", "fit median", "fit max"
    );
    for p in profile::builtin() {
        let (median, max) = p
            .fit
            .as_ref()
            .map_or((f64::NAN, f64::NAN), |f| (f.median_error, f.max_error));
        let _ = writeln!(
            o,
            "  {:<30} {:<22} {:>11.1}% {:>11.1}%",
            p.key().to_string(),
            p.source,
            median * 100.0,
            max * 100.0
        );
    }
    let p = PerfModel::calibrated(GpuId::H100, ModelId::Llama31_8b, 1, Precision::Bf16);
    let _ = writeln!(
        o,
        "\nExample (h100, llama-3.1-8b, tp 1, bf16, {}): 2,048-token prefill {:.1} ms, batch-1 decode step {:.2} ms",
        p.provenance.profile,
        p.prefill_seconds(2048, 0) * 1e3,
        p.decode_step_seconds(1, 1024) * 1e3
    );
    o
}
