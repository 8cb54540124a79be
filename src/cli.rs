//! The command line: `run`, `compare`, `validate`, `estimate`, `calibrate`, `catalog`, `trace gen|stats|convert`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use crate::calibration;
use crate::calibration::measurements::Measurements;
use crate::compare;
use crate::engine::Simulation;
use crate::estimate;
use crate::hardware::{GpuId, ModelId, PerfModel, Precision, Profile, ProfileKey, profile};
use crate::report;
use crate::routing::PolicyConfig;
use crate::scenario::Scenario;
use crate::time::SimDuration;
use crate::workload::synthetic::window_end;
use crate::workload::trace::tools::{self, Output};
use crate::workload::trace::{TraceFormat, TraceOptions};

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
        /// Check every worker's KV memory conservation after each step, stopping at the first broken law
        /// (slower; the same laws are always checked once at the end of the run).
        #[arg(long)]
        check_invariants: bool,
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
    /// Fit the step-time profiles to the measurements in the data directory and write them and the report;
    /// or, with --measurements, fit one profile to your own measured steps and write it to --out.
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
        /// Your own measured steps of one configuration (CSV, docs/calibration-format.md): fit one profile to
        /// them, print each step's error and write the profile to --out.
        #[arg(
            long,
            value_name = "FILE.csv",
            requires_all = ["gpu", "model", "out"],
            conflicts_with_all = ["data", "profiles", "report", "check"]
        )]
        measurements: Option<PathBuf>,
        /// With --measurements: the GPU measured.
        #[arg(long, requires = "measurements", value_parser = parse_id::<GpuId>)]
        gpu: Option<GpuId>,
        /// With --measurements: the model measured.
        #[arg(long, requires = "measurements", value_parser = parse_id::<ModelId>)]
        model: Option<ModelId>,
        /// With --measurements: tensor-parallel degree (1, 2, 4 or 8) [default: 1].
        #[arg(long, requires = "measurements", value_parser = parse_tp)]
        tp: Option<u32>,
        /// With --measurements: precision of weights and KV cache [default: bf16].
        #[arg(long, requires = "measurements", value_parser = parse_id::<Precision>)]
        precision: Option<Precision>,
        /// With --measurements: the profile file to write.
        #[arg(long, requires = "measurements", value_name = "PROFILE.toml")]
        out: Option<PathBuf>,
    },
    /// Generate, summarise and convert workload traces.
    Trace {
        #[command(subcommand)]
        command: TraceCommand,
    },
}

/// `fleetsim trace ...`
#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// Write a scenario's workload to a trace file, without simulating it (closed-loop turns are
    /// written with their think times).
    Gen {
        /// Scenario file (TOML) whose [workload] to write.
        scenario: PathBuf,
        /// Output file (native: JSON Lines, or CSV when the name ends in .csv).
        #[arg(long, short)]
        out: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = TraceFormat::Native)]
        to: TraceFormat,
        /// Tokens per hash block when writing Mooncake.
        #[arg(long, default_value_t = 512)]
        block_size: u32,
        /// Override a scenario value, e.g. `--set duration=\"10m\"`.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
    },
    /// Summarise a trace: requests, duration, rate, inter-arrival CV, token percentiles, sessions, and
    /// the prefix-cache hit rate an infinite cache would reach.
    Stats {
        /// Trace file.
        trace: PathBuf,
        #[command(flatten)]
        read: ReadArgs,
        /// Block size of the infinite-cache hit rate, in tokens.
        #[arg(long, default_value_t = 512)]
        block_size: u32,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Convert a trace to another format, keeping prefix identity where the target can hold it (native
    /// keeps everything; Mooncake keeps it at block granularity; Vidur has no content columns).
    Convert {
        /// Trace to read.
        input: PathBuf,
        /// File to write (native: JSON Lines, or CSV when the name ends in .csv).
        output: PathBuf,
        #[command(flatten)]
        read: ReadArgs,
        /// Output format.
        #[arg(long, value_enum, default_value_t = TraceFormat::Native)]
        to: TraceFormat,
        /// Tokens per hash block when writing Mooncake.
        #[arg(long, default_value_t = 512)]
        block_size: u32,
    },
}

/// How to read a trace (the same options as a scenario's `kind = "trace"` workload).
#[derive(Debug, Args)]
pub struct ReadArgs {
    /// Input format; recognised from the first line when omitted.
    #[arg(long, alias = "from", value_enum)]
    pub format: Option<TraceFormat>,
    /// Skip malformed lines (and report how many) instead of stopping at the first.
    #[arg(long)]
    pub skip_bad_lines: bool,
    /// Spread requests that share a timestamp over up to this long, e.g. 3s.
    #[arg(long, value_parser = SimDuration::parse)]
    pub jitter: Option<SimDuration>,
    /// Mooncake: rebuild sessions from the hash chains (a heuristic).
    #[arg(long)]
    pub reconstruct_sessions: bool,
    /// Mooncake: tokens per hash block of the input.
    #[arg(long, default_value_t = 512)]
    pub hash_block_size: u32,
    /// Replay this many times faster.
    #[arg(long, default_value_t = 1.0)]
    pub speedup: f64,
    /// Skip this much of the trace's beginning, e.g. 10m.
    #[arg(long, value_parser = SimDuration::parse)]
    pub start: Option<SimDuration>,
    /// Seed of the jitter.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

impl ReadArgs {
    fn options(&self) -> TraceOptions {
        TraceOptions {
            format: self.format,
            skip_bad_lines: self.skip_bad_lines,
            jitter: self.jitter,
            reconstruct_sessions: self.reconstruct_sessions,
            hash_block_size: self.hash_block_size,
            speedup: self.speedup,
            start: self.start.unwrap_or(SimDuration::ZERO),
            seed: self.seed,
        }
    }
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
            check_invariants,
        } => run(
            &scenario,
            out.as_deref(),
            &set,
            json,
            quiet,
            check_invariants,
        ),
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
                max_num_seqs: None,
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
            measurements,
            gpu,
            model,
            tp,
            precision,
            out,
        } => match measurements {
            None => calibrate(&data, &profiles, report.as_deref(), check),
            Some(csv) => {
                // clap requires these with --measurements; say so rather than panic if that ever changes.
                let key = ProfileKey {
                    gpu: gpu.context("--measurements needs --gpu")?,
                    model: model.context("--measurements needs --model")?,
                    tp: tp.unwrap_or(1),
                    precision: precision.unwrap_or_default(),
                };
                let out = out.context("--measurements needs --out")?;
                calibrate_measurements(&csv, key, &out)
            }
        },
        Command::Trace { command } => trace(command),
    }
}

fn trace(command: TraceCommand) -> Result<()> {
    match command {
        TraceCommand::Gen {
            scenario,
            out,
            to,
            block_size,
            set,
        } => {
            let s = Scenario::load(&scenario, &set)?;
            let rows = s
                .workload
                .rows(s.seed, window_end(s.duration), s.max_requests)
                .map_err(anyhow::Error::msg)?;
            let target = Output {
                path: &out,
                format: to,
                block_size,
            };
            let n = tools::write_rows(rows, &scenario.display().to_string(), target)
                .map_err(anyhow::Error::msg)?;
            eprintln!("wrote {n} requests to {}", out.display());
            Ok(())
        }
        TraceCommand::Stats {
            trace,
            read,
            block_size,
            json,
        } => {
            anyhow::ensure!(block_size > 0, "--block-size must be at least 1");
            let (format, report, notes) = tools::stats(&trace, &read.options(), block_size)?;
            if json {
                let mut v = serde_json::to_value(&report)?;
                v["file"] = serde_json::json!(trace.display().to_string());
                v["format"] = serde_json::json!(format.as_str());
                v["notes"] = serde_json::json!(notes);
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                println!("{} ({format})", trace.display());
                print!("{}", report.to_text());
                for note in notes {
                    println!("note: {note}");
                }
            }
            Ok(())
        }
        TraceCommand::Convert {
            input,
            output,
            read,
            to,
            block_size,
        } => {
            anyhow::ensure!(block_size > 0, "--block-size must be at least 1");
            let target = Output {
                path: &output,
                format: to,
                block_size,
            };
            let (n, notes) =
                tools::convert(&input, &read.options(), target).map_err(anyhow::Error::msg)?;
            for note in notes {
                eprintln!("note: {note}");
            }
            eprintln!("wrote {n} requests to {} ({to})", output.display());
            Ok(())
        }
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
        "published Splitwise points (held out of the fit): {}, median error {:.1}%, max {:.1}%",
        c.published.len(),
        median * 100.0,
        max * 100.0
    );
    for r in &c.external {
        println!(
            "published {}: {} predicted {:.1} ({:+.1}%)",
            r.point.label(),
            r.point.published,
            r.predicted,
            r.error() * 100.0
        );
    }
    let (median, max) = c.external_errors();
    println!(
        "published end-to-end points (in none of the data): {}, median error {:.1}%, max {:.1}%",
        c.external.len(),
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

/// `fleetsim calibrate --measurements`: fit one profile to a user's measured steps, print every step's
/// error, write the profile file.
fn calibrate_measurements(csv: &Path, key: ProfileKey, out: &Path) -> Result<()> {
    let fit = Measurements::read(csv, key)?.fit();
    print!("{}", fit.table());
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(out, fit.profile_file())
        .with_context(|| format!("cannot write {}", out.display()))?;
    eprintln!(
        "wrote {}: name it in a scenario's worker group (profile = \"...\") or pass it to `fleetsim estimate \
         --profile`",
        out.display()
    );
    Ok(())
}

fn run(
    path: &Path,
    out: Option<&Path>,
    set: &[String],
    json: bool,
    quiet: bool,
    check_invariants: bool,
) -> Result<()> {
    let scenario = Scenario::load(path, set)?;
    let mut sim = Simulation::from_scenario(&scenario).map_err(anyhow::Error::msg)?;
    sim.check_invariants_every_step(check_invariants);
    for note in sim.notes() {
        eprintln!("note: {note}");
    }
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
    let output = sim
        .try_run(&mut |f| bar.set_position((f * 1000.0) as u64))
        .map_err(anyhow::Error::msg)?;
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
