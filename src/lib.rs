//! # fleetsim: a discrete-event simulator of an LLM inference fleet
//!
//! fleetsim answers the questions people ask before they change a production inference cluster: which
//! routing policy, how many GPUs of which kind, and what happens when the worker holding a conversation's
//! KV cache dies. It models the fleet at the granularity that decides those answers: engine *steps*,
//! not tokens or kernels.
//!
//! ## Architecture
//! - [`time`] and [`rng`]: integer-nanosecond simulated time and named random streams from one seed.
//! - [`engine`]: the event queue with one total order `(time, class, sequence)` and the run loop. Arrivals
//!   stream from a [`workload::Workload`]; each worker has at most one step in flight; nothing is ever
//!   scheduled per token.
//! - [`worker`]: one GPU replica, a vLLM-v1-style engine: continuous batching with chunked prefill under a
//!   token budget, FCFS admission, recompute preemption, and a paged KV block pool with automatic prefix
//!   caching ([`worker::kv_cache`]).
//! - [`workload`]: where requests come from: open-loop synthetic traffic, multi-turn sessions (closed or
//!   open loop; a turn's prompt extends the previous turn's prompt and answer, so prefix identity holds by
//!   construction), closed-loop fixed-concurrency clients, and trace replay (Mooncake, Azure, BurstGPT,
//!   Vidur and fleetsim's own format), all streamed; `fleetsim trace` generates, summarises and converts
//!   traces.
//! - [`hardware`]: the GPU and model catalogues, the roofline step-time model, and its calibrated profiles
//!   (fitted efficiencies per GPU × model × TP × precision, compiled in from `profiles/`).
//! - [`calibration`]: `fleetsim calibrate`: fits those profiles to the measured step times in
//!   `data/calibration/` and writes the report `docs/calibration.md`; with `--measurements`, fits one profile
//!   file to a user's own CSV of measured steps ([`calibration::measurements`]).
//! - [`routing`]: the gateway's policies behind one small trait, over worker snapshots.
//! - [`metrics`]: per-request records folded into counters and histograms; the summary is derived once.
//! - [`scenario`]: the TOML scenario format, with errors that name file, line and field.
//! - [`compare`]: the same arrivals through several policies in parallel; [`report`]: the exporters;
//!   [`output`]: every file written goes through a temporary file and a rename, never over an input.
//! - [`sweep`]: `fleetsim sweep` and `merge`: grids of overrides run in parallel, one atomic file per point,
//!   resumable and shardable; [`sizing`]: `fleetsim size`: the cheapest fleet per GPU × TP × policy that
//!   meets the SLOs, with failure headroom simulated by crashes.
//! - [`limits`]: what a scenario will cost in memory and time, checked before anything runs.
//! - [`estimate`]: `fleetsim estimate`: one configuration's prefill, decode and latency numbers, from the same
//!   simulation (a closed-loop [`workload::ClosedLoop`] of C clients).
//!
//! Determinism is a law: the same scenario and seed give byte-identical `summary.json`.

pub mod autoscale;
pub mod calibration;
pub mod cli;
pub mod compare;
pub mod confidence;
pub mod config;
pub mod engine;
pub mod estimate;
pub mod faults;
pub mod gateway;
pub mod hardware;
pub mod limits;
pub mod lora;
pub mod metrics;
pub mod output;
pub mod placement;
pub mod progress;
pub mod report;
pub mod request;
pub mod rng;
pub mod routing;
pub mod scenario;
pub mod sizing;
pub mod sweep;
pub mod tiers;
pub mod time;
pub mod worker;
pub mod workload;
