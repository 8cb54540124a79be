//! The command line: `run`, `compare`, `sweep`, `merge`, `size`, `validate`, `report`, `estimate`, `calibrate`, `catalog`,
//! `trace gen|stats|convert`, `bench scaling`.
//!
//! This module holds the argument definitions and the dispatch; each command's code is in its own file.

#[macro_use]
mod stdout;
mod bench;
mod calibrate;
mod catalog;
mod compare;
mod estimate;
mod merge;
mod report;
mod run;
mod size;
mod sweep;
mod trace;
mod validate;

pub use catalog::catalog;

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};

use crate::hardware::{GpuId, ModelId, Precision, ProfileKey};
use crate::report::ResultsDir;
use crate::scenario::Scenario;
use crate::time::SimDuration;
use crate::workload::harness::Harness;
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
        /// Write the results into this directory: summary.json, summary.md, timeseries.csv, workers.csv,
        /// requests.parquet, run_info.json, report.html and its plot-*.svg (docs/results.md lists every
        /// file and column).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Override a scenario value, e.g. `--set workload.rate=40` or `--set workers[0].count=8`.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Also write requests.csv, a CSV copy of requests.parquet (with --out).
        #[arg(long, requires = "out")]
        requests_csv: bool,
        /// Print summary.json to stdout instead of the table.
        #[arg(long)]
        json: bool,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
        /// Run even if the scenario exceeds the size limits (docs/limits.md); with `--out`, replace the
        /// results of an earlier run there.
        #[arg(long)]
        force: bool,
        /// Check every worker's KV memory conservation after each step, stopping at the first broken law
        /// (slower; the same laws are always checked once at the end of the run).
        #[arg(long)]
        check_invariants: bool,
        /// Print where the wall time went, by phase (workload, routing, worker steps, KV bookkeeping,
        /// metrics, output), and events per second, to stderr.
        #[arg(long)]
        profile: bool,
        /// Step every worker one step at a time instead of through runs of identical decode steps
        /// (the decode fast path). Same results, to the byte; for testing the fast path.
        #[arg(long, hide = true)]
        step_by_step: bool,
        /// Enter every KV block in its worker's prefix index, even those only their own request could
        /// ask for again. Same results, to the byte; for testing private blocks.
        #[arg(long, hide = true)]
        index_every_block: bool,
        /// With faults, do not also run the no-fault twin (the same scenario and seeds without them)
        /// and judge recovery against the five minutes before each fault instead.
        #[arg(long)]
        no_twin: bool,
        #[command(flatten)]
        confidence: ConfidenceArgs,
    },
    /// Run the same arrivals through several routing policies in parallel and compare them.
    Compare {
        /// Scenario file (TOML).
        scenario: PathBuf,
        /// Policies: names of `[policies.NAME]` tables or specs `name[:key=value,...]`, comma-separated
        /// (default: every `[policies]` table in the scenario).
        #[arg(long)]
        policies: Option<String>,
        /// Also vary one scenario key: `KEY=V1,V2,...` (e.g. `gateway.session_state=client,worker`); every
        /// policy runs once per value.
        #[arg(long, value_name = "KEY=V1,V2,...")]
        vary: Option<String>,
        /// Write one folder per policy plus comparison.json, comparison.md and comparison.csv here.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Also write requests.csv, a CSV copy of requests.parquet, in each policy's folder (with --out).
        #[arg(long, requires = "out")]
        requests_csv: bool,
        /// Override a scenario value (repeatable), e.g. `--set workload.rate=40`, `--set workers[0].count=8`
        /// or `--set 'autoscaler.models."llama-3.1-8b".target=30'`.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// No progress bars.
        #[arg(long, short)]
        quiet: bool,
        /// Worker threads, 1 to 1024 (default: one per core). Results do not depend on it.
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..=crate::limits::MAX_THREADS as i64))]
        threads: Option<u16>,
        /// Run even if the scenario exceeds the size limits (docs/limits.md); with `--out`, replace the
        /// results of an earlier comparison there.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        confidence: ConfidenceArgs,
    },
    /// Run the cartesian product of `--grid` overrides in parallel: one row per point in sweep.parquet,
    /// sweep.csv and sweep.md, plus plots; resumable (`--resume`) and shardable (`--shard I/N`).
    Sweep {
        /// Scenario file (TOML).
        scenario: PathBuf,
        /// A swept key and its values, `KEY=V1,V2,...` (any key `--set` accepts, e.g.
        /// `workers.0.count=4,8,16`, `router.policy=round_robin,prefix_aware`); repeat for more keys.
        #[arg(long = "grid", value_name = "KEY=V1,V2,...")]
        grid: Vec<String>,
        /// Results directory: sweep.json, points/, and (once every point is done) the tables and plots.
        #[arg(long)]
        out: PathBuf,
        /// Override a scenario value for every point, e.g. `--set duration=\"2m\"`.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Runs per point (independent replications: the scenario's seed, then seeds from the named stream
        /// `replication/R`, the same for every point); the tables give their mean, standard deviation and
        /// 95% confidence interval.
        #[arg(long, visible_alias = "replications", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
        replicas: u32,
        /// Run only shard I of N (0 ≤ I < N): the points p with p mod N = I. Combine with `fleetsim merge`.
        #[arg(long, value_name = "I/N")]
        shard: Option<String>,
        /// Continue an interrupted sweep in --out: points already finished there are not run again.
        #[arg(long)]
        resume: bool,
        /// Worker threads, 1 to 1024 (default: one per core). Results do not depend on it.
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..=crate::limits::MAX_THREADS as i64))]
        threads: Option<u16>,
        /// Run even if a point exceeds the size limits (docs/limits.md).
        #[arg(long)]
        force: bool,
        /// Stop with an error after this many points (tests use it to interrupt a sweep).
        #[arg(long, hide = true)]
        stop_after: Option<usize>,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Combine the shard directories of one sweep (`fleetsim sweep --shard I/N`) into its final files.
    Merge {
        /// Shard directories (the same directory may hold several shards).
        #[arg(required = true)]
        shards: Vec<PathBuf>,
        /// Directory of the merged sweep.
        #[arg(long)]
        out: PathBuf,
    },
    /// For each candidate GPU × TP × policy, the smallest worker count that meets the scenario's SLOs
    /// (p95 TTFT, p95 TPOT, goodput), optionally with failure headroom; costed and ranked.
    Size {
        /// Scenario file (TOML) with one [[workers]] group and an [slo] table.
        scenario: PathBuf,
        /// Candidate GPUs, comma-separated (default: the scenario's).
        #[arg(long, value_delimiter = ',', value_parser = parse_id::<GpuId>)]
        gpus: Vec<GpuId>,
        /// Candidate tensor-parallel degrees, comma-separated (default: the scenario's).
        #[arg(long, value_delimiter = ',', value_parser = parse_tp)]
        tp: Vec<u32>,
        /// Candidate policies, as for `compare --policies` (default: the scenario's router).
        #[arg(long)]
        policies: Option<String>,
        /// The SLO must still hold when this many workers (those with the most conversations) are lost for
        /// good at the worst of several moments.
        #[arg(long, default_value_t = 0)]
        headroom: u32,
        /// The SLO must still hold when one whole failure domain is lost: workers are placed
        /// --domain-size per domain, named LABEL-0, LABEL-1, ..., and LABEL-0 crashes for good.
        #[arg(long, value_name = "LABEL", requires = "domain_size")]
        headroom_domain: Option<String>,
        /// Workers per failure domain for --headroom-domain (e.g. 4 per rack).
        #[arg(long, requires = "headroom_domain", value_parser = clap::value_parser!(u32).range(1..))]
        domain_size: Option<u32>,
        /// Smallest fraction of requests that must meet every SLO, 0 to 1.
        #[arg(long, default_value_t = 0.95, value_parser = parse_fraction)]
        min_goodput: f64,
        /// Largest worker count tried per candidate.
        #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        max_workers: u32,
        /// Independent replications per fleet shape (seeds from the named stream `replication/R`, the
        /// first the scenario's): a fleet passes when every SLO holds at the 95% interval's bound.
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
        replications: u32,
        /// Most replications for a shape whose interval straddles a target (its mean passes, its bound
        /// does not): more are run, half as many again each time, until it is decided or this cap.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1000))]
        max_replications: u32,
        /// Also size for the traffic multiplied by each factor, e.g. `1,1.5,2` ("when must we grow").
        #[arg(long, value_delimiter = ',', value_parser = parse_scale)]
        traffic_scale: Vec<f64>,
        /// Override a scenario value (repeatable), e.g. `--set workload.rate=40`, `--set workers[0].count=8`
        /// or `--set 'autoscaler.models."llama-3.1-8b".target=30'`.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Also write size.md and size.json here.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Worker threads, 1 to 1024 (default: one per core). Results do not depend on it.
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..=crate::limits::MAX_THREADS as i64))]
        threads: Option<u16>,
        /// Run even if the scenario exceeds the size limits (docs/limits.md).
        #[arg(long)]
        force: bool,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Check a scenario file, including the size limits; exit non-zero with a clear error if it is invalid.
    Validate {
        /// Scenario file (TOML).
        scenario: PathBuf,
        /// Override a scenario value (repeatable), e.g. `--set workload.rate=40`, `--set workers[0].count=8`
        /// or `--set 'autoscaler.models."llama-3.1-8b".target=30'`.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Report the size limits the scenario exceeds as notes instead of errors.
        #[arg(long)]
        force: bool,
    },
    /// Rebuild a results folder's plots and report.html from its summary.json and requests.parquet, or
    /// compare several folders (runs from different days or machines) on one page.
    Report {
        /// Results folders written by `run --out` (or one policy's folder of `compare --out`).
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Where to write the page and plots (default with one folder: that folder; required with several).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// List the GPUs, models, precisions, calibrated profiles and routing policies fleetsim knows.
    Catalog,
    /// Print the JSON Schema (draft 2020-12) of scenario files: every key with its type, default and
    /// description. Save it and name it on a `#:schema` first line for completion and checking in
    /// editors with a TOML language server (Even Better TOML, taplo): `fleetsim schema > fleetsim.schema.json`.
    Schema,
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
        /// Precision of the weights (and GEMMs).
        #[arg(long, default_value = "bf16", value_parser = parse_id::<Precision>)]
        precision: Precision,
        /// The KV cache's data type, vLLM's --kv-cache-dtype [default: bf16, as vLLM's `auto` keeps
        /// an FP8 checkpoint's cache unless the checkpoint asks for FP8; give fp8 for an FP8 cache].
        #[arg(long, value_parser = parse_id::<Precision>)]
        kv_cache_dtype: Option<Precision>,
        /// Prompt tokens per request.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        prompt: u32,
        /// Output tokens per request.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        output: u32,
        /// Measure over a closed-loop run of this many clients, at most 100000 (default: one request on an
        /// idle worker).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=crate::limits::MAX_ESTIMATE_CONCURRENCY as i64))]
        concurrency: Option<u32>,
        /// Requests of the closed-loop run, at most 10000000 (default: ten per client).
        #[arg(long, requires = "concurrency", value_parser = clap::value_parser!(u32).range(1..=crate::limits::MAX_ESTIMATE_REQUESTS as i64))]
        requests: Option<u32>,
        /// Use this profile file instead of the built-in one.
        #[arg(long)]
        profile: Option<PathBuf>,
        /// Leave out the benchmark client's dispatch, the API server's costs and the warm-up request: the
        /// engine alone, every client sending at the same instant.
        #[arg(long)]
        no_frontend: bool,
        /// Schedule synchronously, as vLLM before 2026 or with `--no-async-scheduling`: a request
        /// arriving while a step runs joins the next step, not the one after (default: asynchronous,
        /// vLLM's default since PR #27614).
        #[arg(long)]
        no_async_scheduling: bool,
        /// Imitate this benchmark client (vllm-bench: `vllm bench serve --dataset-name random`;
        /// inferencemax: the pre-2025 vLLM script InferenceMAX runs, with its `--max-num-seqs` = the
        /// concurrency; aiperf; genai-perf; guidellm): its length draws around --prompt and --output, its
        /// default request count, warm-up and metric definitions (docs/benchmark-client.md). Unset: every
        /// request exactly --prompt + --output tokens, `vllm bench serve`'s metrics.
        #[arg(long, requires = "concurrency", value_parser = str::parse::<Harness>)]
        harness: Option<Harness>,
        /// With --harness: its `--random-range-ratio` (vllm-bench, inferencemax; default 0 and 0.8).
        #[arg(long, requires = "harness")]
        random_range_ratio: Option<f64>,
        /// With --harness: one of its options as it names them, KEY=VALUE, repeatable
        /// (vllm-bench, inferencemax: request_rate, requests per second created under the concurrency
        /// cap; aiperf, genai-perf: synthetic_input_tokens_stddev, output_tokens_stddev,
        /// warmup_request_count; guidellm: prompt_tokens_stdev, prompt_tokens_min, prompt_tokens_max and
        /// the same for output_tokens, its profile's warmup and cooldown (a fraction of the requests
        /// below 1 or a count from 1; seconds with max_seconds), and max_seconds, its --max-seconds).
        #[arg(
            long = "harness-option",
            requires = "harness",
            value_name = "KEY=VALUE"
        )]
        harness_options: Vec<String>,
        /// Seed of the run's random draws (a harness's lengths, arrivals under a request rate); run
        /// several seeds to see the spread of a figure.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Print JSON instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Fit the step-time profiles to the measurements in the data directory and print them (with --write,
    /// also write them and the report); or, with --measurements, fit one profile to your own measured steps
    /// and write it to --out.
    Calibrate {
        /// Directory of the calibration data.
        #[arg(long, default_value = "data/calibration")]
        data: PathBuf,
        /// Directory of the profiles that --write writes and --check compares.
        #[arg(long, default_value = "profiles")]
        profiles: PathBuf,
        /// Also write the calibration report (Markdown) to this file, e.g. docs/calibration.md.
        #[arg(long)]
        report: Option<PathBuf>,
        /// Write nothing: exit non-zero if the profiles or report on disk differ from what the fit gives.
        #[arg(long, conflicts_with = "write")]
        check: bool,
        /// Write the profiles into --profiles and the report into --report (without it, calibrate only
        /// prints the fit).
        #[arg(long)]
        write: bool,
        /// Your own measured steps of one configuration (CSV, docs/calibration-format.md): fit one profile to
        /// them, print each step's error and write the profile to --out.
        #[arg(
            long,
            value_name = "FILE.csv",
            requires_all = ["gpu", "model", "out"],
            conflicts_with_all = ["data", "profiles", "report", "check", "write"]
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
    /// Measure fleetsim itself (`bench scaling`: independent runs on one core against all cores).
    Bench {
        #[command(subcommand)]
        command: BenchCommand,
    },
}

/// `fleetsim bench ...`
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Time a batch of independent runs of a scenario (seeds seed, seed+1, ...) one after another on one
    /// thread, then in parallel on one thread per run, in one invocation, the way `compare`, `sweep` and
    /// `size` run theirs; prints both times, their ratio and the machine's load, and checks that the
    /// results are identical both ways.
    Scaling {
        /// Scenario file (TOML).
        scenario: PathBuf,
        /// Independent runs in the batch (2 to 64); the parallel pass uses one thread per run.
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(2..=64))]
        runs: u16,
        /// Override a scenario value, e.g. `--set max_requests=20000`.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Print the measurement as JSON.
        #[arg(long)]
        json: bool,
        /// Run even if the scenario exceeds the size limits (docs/limits.md).
        #[arg(long)]
        force: bool,
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
        #[arg(long, value_enum, default_value_t = WriteFormat::Native)]
        to: WriteFormat,
        /// Tokens per hash block when writing Mooncake (at least 1).
        #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..))]
        block_size: u32,
        /// Override a scenario value, e.g. `--set duration=\"10m\"`.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
        /// Write even if the scenario exceeds the size limits (docs/limits.md).
        #[arg(long)]
        force: bool,
    },
    /// Summarise a trace: requests, duration, rate, inter-arrival CV, token percentiles, sessions, and
    /// the prefix-cache hit rate an infinite cache would reach.
    Stats {
        /// Trace file.
        trace: PathBuf,
        #[command(flatten)]
        read: ReadArgs,
        /// Block size of the infinite-cache hit rate, in tokens (at least 1).
        #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..))]
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
        #[arg(long, value_enum, default_value_t = WriteFormat::Native)]
        to: WriteFormat,
        /// Tokens per hash block when writing Mooncake (at least 1).
        #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..))]
        block_size: u32,
    },
}

/// The formats fleetsim writes (it reads Azure and BurstGPT too, but does not write them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WriteFormat {
    /// fleetsim's own JSON Lines, or CSV when the file name ends in .csv.
    Native,
    /// Mooncake JSONL, prefix identity kept at block granularity.
    Mooncake,
    /// Vidur CSV (no content columns).
    Vidur,
}

impl From<WriteFormat> for TraceFormat {
    fn from(f: WriteFormat) -> TraceFormat {
        match f {
            WriteFormat::Native => TraceFormat::Native,
            WriteFormat::Mooncake => TraceFormat::Mooncake,
            WriteFormat::Vidur => TraceFormat::Vidur,
        }
    }
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
    /// Mooncake: tokens per hash block of the input (at least 1).
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..))]
    pub hash_block_size: u32,
    /// Replay this many times faster (a number greater than 0).
    #[arg(long, default_value_t = 1.0, value_parser = parse_speedup)]
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

/// Replications and sequential stopping, shared by `run`, `compare` and `size`.
#[derive(Debug, Clone, clap::Args)]
pub struct ConfidenceArgs {
    /// Independent replications (seeds from the named stream `replication/R`; the first is the
    /// scenario's seed), run in parallel; every headline metric gets a mean and a 95% confidence interval.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub replications: u32,
    /// Add replications until the decisive metric's 95% interval is within this fraction of its mean
    /// (e.g. `5%`), starting from --replications (at least 2), up to --max-replications.
    #[arg(long, value_name = "PERCENT")]
    pub precision: Option<String>,
    /// The decisive metric for --precision (a headline metric: ttft_p95_ms, tpot_p95_ms, goodput_fraction, ...).
    #[arg(long, default_value = "ttft_p95_ms", requires = "precision")]
    pub precision_metric: String,
    /// The most replications --precision may run.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(2..=1000))]
    pub max_replications: u32,
}

impl ConfidenceArgs {
    /// The precision target with its decisive metric, if one was asked for.
    pub fn precision(&self) -> Result<Option<(crate::confidence::Precision, String)>> {
        self.precision
            .as_deref()
            .map(|p| {
                crate::confidence::Precision::parse(p, self.max_replications)
                    .map(|p| (p, self.precision_metric.clone()))
                    .map_err(anyhow::Error::msg)
            })
            .transpose()
    }
}

/// A traffic multiplier: a number above 0.
fn parse_scale(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 1000.0 => Ok(v),
        _ => Err(format!(
            "`{s}`: expected a traffic multiplier above 0 and at most 1000, e.g. 1.5"
        )),
    }
}

/// Runs the parsed command line.
pub fn main_with(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Run {
            scenario,
            out,
            requests_csv,
            set,
            json,
            quiet,
            force,
            check_invariants,
            profile,
            step_by_step,
            index_every_block,
            no_twin,
            confidence,
        } => run::run(
            &scenario,
            out.as_deref().map(|dir| ResultsDir { dir, requests_csv }),
            &set,
            json,
            quiet,
            force,
            run::Options {
                check_invariants,
                profile,
                step_by_step,
                index_every_block,
                twin: !no_twin,
                replications: confidence.replications,
                precision: confidence.precision()?,
            },
        ),
        Command::Compare {
            scenario,
            policies,
            vary,
            out,
            requests_csv,
            set,
            threads,
            force,
            quiet,
            confidence,
        } => compare::compare(
            &scenario,
            policies.as_deref(),
            vary.as_deref(),
            out.as_deref().map(|dir| ResultsDir { dir, requests_csv }),
            &set,
            threads.map(usize::from),
            force,
            quiet,
            &confidence,
        ),
        Command::Sweep {
            scenario,
            grid,
            out,
            set,
            replicas,
            shard,
            resume,
            threads,
            force,
            stop_after,
            quiet,
        } => sweep::sweep(sweep::Args {
            scenario: &scenario,
            grid: &grid,
            out: &out,
            set: &set,
            replicas,
            shard: shard.as_deref(),
            resume,
            threads: threads.map(usize::from),
            force,
            stop_after,
            quiet,
        }),
        Command::Merge { shards, out } => merge::merge(&out, &shards),
        Command::Size {
            scenario,
            gpus,
            tp,
            policies,
            headroom,
            headroom_domain,
            domain_size,
            min_goodput,
            max_workers,
            replications,
            max_replications,
            traffic_scale,
            set,
            out,
            threads,
            force,
            quiet,
        } => size::size(size::Args {
            scenario: &scenario,
            set: &set,
            gpus: &gpus,
            tps: &tp,
            policies: policies.as_deref(),
            headroom: crate::sizing::Headroom {
                workers: headroom,
                domain: headroom_domain.zip(domain_size),
            },
            min_goodput,
            max_workers,
            judging: crate::sizing::Judging {
                replications,
                max_replications: max_replications.max(replications),
            },
            traffic_scales: if traffic_scale.is_empty() {
                vec![1.0]
            } else {
                traffic_scale
            },
            out: out.as_deref(),
            threads: threads.map(usize::from),
            force,
            quiet,
        }),
        Command::Validate {
            scenario,
            set,
            force,
        } => validate::validate(&scenario, &set, force),
        Command::Report { dirs, out } => report::report(&dirs, out.as_deref()),
        Command::Catalog => {
            out!("{}", catalog());
            Ok(())
        }
        Command::Schema => {
            out!("{}", crate::scenario::schema::scenario_schema_json());
            Ok(())
        }
        Command::Estimate {
            gpu,
            model,
            tp,
            precision,
            kv_cache_dtype,
            prompt,
            output,
            concurrency,
            requests,
            profile,
            no_frontend,
            no_async_scheduling,
            harness,
            random_range_ratio,
            harness_options,
            seed,
            json,
        } => estimate::estimate(
            estimate::Args {
                gpu,
                model,
                tp,
                precision,
                kv_cache_dtype,
                prompt,
                output,
                concurrency,
                requests,
                no_frontend,
                async_scheduling: !no_async_scheduling,
                harness,
                random_range_ratio,
                harness_options,
                seed,
            },
            profile.as_deref(),
            json,
        ),
        Command::Calibrate {
            data,
            profiles,
            report,
            check,
            write,
            measurements,
            gpu,
            model,
            tp,
            precision,
            out,
        } => match measurements {
            None => calibrate::calibrate(&data, &profiles, report.as_deref(), check, write),
            Some(csv) => {
                // clap requires these with --measurements; say so rather than panic if that ever changes.
                let key = ProfileKey {
                    gpu: gpu.context("--measurements needs --gpu")?,
                    model: model.context("--measurements needs --model")?,
                    tp: tp.unwrap_or(1),
                    precision: precision.unwrap_or_default(),
                };
                let out = out.context("--measurements needs --out")?;
                calibrate::calibrate_measurements(&csv, key, &out)
            }
        },
        Command::Trace { command } => trace::trace(command),
        Command::Bench {
            command:
                BenchCommand::Scaling {
                    scenario,
                    runs,
                    set,
                    json,
                    force,
                },
        } => bench::scaling(&scenario, &set, usize::from(runs), force, json),
    }
}

/// A catalogue id as written in scenario files (`h100`, `llama-3.1-8b`, `bf16`).
fn parse_id<T: serde::de::DeserializeOwned>(s: &str) -> Result<T, String> {
    T::deserialize(serde::de::value::StrDeserializer::<serde::de::value::Error>::new(s))
        .map_err(|e| crate::config::humanize(&e.to_string()))
}

/// Loads a scenario and checks it against the size limits ([`crate::limits`]); with `force`, an exceeded
/// limit is printed as a note instead.
fn load_checked(path: &std::path::Path, set: &[String], force: bool) -> Result<Scenario> {
    let s = Scenario::load(path, set)?;
    if let Err(e) = crate::limits::check(&s) {
        let key = if e.field == "workers" {
            "workers[0].count"
        } else {
            &e.field
        };
        let line = std::fs::read_to_string(path)
            .ok()
            .and_then(|text| crate::scenario::line_of(&text, key));
        let at = match line {
            Some(l) => format!("{}:{l}", path.display()),
            None => path.display().to_string(),
        };
        if force {
            eprintln!("note: {at}: {}: {}", e.field, e.message);
        } else {
            return Err(anyhow::anyhow!("{at}: {e}"));
        }
    }
    Ok(s)
}

/// The command line with a negative number after an option joined to it (`--threads -1` becomes
/// `--threads=-1`), so that the option's own check says what is wrong with the value ("expected a
/// number between 1 and 1024, got -1") instead of clap taking `-1` for an unknown flag. A value
/// such as `-3s` (a negative duration) is joined the same way.
pub fn negative_values(
    args: impl IntoIterator<Item = std::ffi::OsString>,
) -> Vec<std::ffi::OsString> {
    let mut out: Vec<std::ffi::OsString> = Vec::new();
    for arg in args {
        let negative = arg.to_str().is_some_and(|a| {
            let mut c = a.chars();
            c.next() == Some('-') && c.next().is_some_and(|d| d.is_ascii_digit() || d == '.')
        });
        let joins = out
            .last()
            .and_then(|p| p.to_str())
            .is_some_and(|p| p.starts_with("--") && p.len() > 2 && !p.contains('='));
        if negative && joins {
            let last = out.last_mut().expect("checked");
            last.push("=");
            last.push(&arg);
        } else {
            out.push(arg);
        }
    }
    out
}

fn parse_speedup(s: &str) -> Result<f64, String> {
    let (min, max) = crate::workload::trace::SPEEDUP;
    match s.parse::<f64>() {
        Ok(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(format!(
            "expected a number between {min} and {max}, got {s}"
        )),
    }
}

fn parse_fraction(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("expected a fraction between 0 and 1, got {s}")),
    }
}

fn parse_tp(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(tp @ (1 | 2 | 4 | 8)) => Ok(tp),
        _ => Err(format!("must be 1, 2, 4 or 8, got {s}")),
    }
}
