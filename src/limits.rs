//! Resource limits, checked before anything is built or run.
//!
//! A scenario's memory and time are predictable from the scenario alone. Memory is, at most:
//!
//! - [`BYTES_PER_WORKER`] per worker (its state, its router snapshot and per-worker router state), plus
//! - [`BYTES_PER_KV_BLOCK`] per KV block of every worker (the block arrays, the prefix index entry and the
//!   eviction ghost of a cached block), plus
//! - [`BYTES_PER_IN_FLIGHT`] per request in flight, plus [`BYTES_PER_BLOCK_HASH`] per block of its prompt
//!   and answer (its chained block hashes).
//!
//! Time grows with the requests simulated (about a million per CPU-minute). Each limit below can be
//! lifted with `--force` where a command takes it; none of them is a limit of the model, only of what a
//! run can be expected to finish.

use thiserror::Error;

use crate::scenario::Scenario;
use crate::workload::spec::WorkloadKind;

/// Upper bound of one worker's fixed state, bytes.
pub const BYTES_PER_WORKER: f64 = 16.0 * 1024.0;
/// Upper bound of one KV block's bookkeeping, bytes.
pub const BYTES_PER_KV_BLOCK: f64 = 96.0;
/// Upper bound of one in-flight request's fixed state, bytes.
pub const BYTES_PER_IN_FLIGHT: f64 = 1024.0;
/// One chained block hash, bytes.
pub const BYTES_PER_BLOCK_HASH: f64 = 8.0;

/// Most requests a run may be expected to simulate without `--force` (about 100 CPU-minutes).
pub const MAX_EXPECTED_REQUESTS: f64 = 1e8;
/// Most memory a run may be expected to need without `--force`.
pub const MAX_MEMORY_BYTES: f64 = 16.0 * (1u64 << 30) as f64;
/// Most threads `compare --threads` starts.
pub const MAX_THREADS: usize = 1024;
/// Most closed-loop clients `estimate --concurrency` simulates.
pub const MAX_ESTIMATE_CONCURRENCY: u32 = 100_000;
/// Most requests `estimate --requests` simulates.
pub const MAX_ESTIMATE_REQUESTS: u32 = 10_000_000;

/// Most background events (one worker's health check, one stochastic failure) a run may be expected
/// to simulate without `--force`: each costs about what a request's step does.
pub const MAX_BACKGROUND_EVENTS: f64 = 1e9;
/// One stochastic fault stream's pending failure and random state, and one fault's entry in the
/// run's fault log, bytes (upper bounds).
pub const BYTES_PER_FAULT: f64 = 256.0;

/// One time-series window's counters and TTFT histogram, bytes, plus [`BYTES_PER_WINDOW_WORKER`] per
/// worker (docs/limits.md: about 1.5 KiB per window at 32 workers).
pub const BYTES_PER_WINDOW: f64 = 1024.0;
/// One worker's share of a time-series window, bytes.
pub const BYTES_PER_WINDOW_WORKER: f64 = 8.0;

/// A scenario that would not finish, or not fit in memory.
#[derive(Debug, Error, PartialEq)]
#[error("{field}: {message} (pass --force to run it anyway)")]
pub struct LimitError {
    /// The scenario key responsible.
    pub field: String,
    pub message: String,
}

/// What a scenario will cost, estimated from the scenario alone.
#[derive(Clone, Debug, PartialEq)]
pub struct Footprint {
    /// Workers in the fleet.
    pub workers: u64,
    /// KV blocks over every worker.
    pub kv_blocks: u64,
    /// Requests the arrival window is expected to produce (`None` for a trace: the file bounds it).
    pub expected_requests: Option<f64>,
    /// Requests that can be in flight at once, where the workload bounds it (closed-loop clients).
    pub in_flight: Option<u64>,
    /// Faults expected over the run: the scheduled ones, and each stochastic stream's horizon over
    /// its mean cycle (`mtbf + mttr`).
    pub expected_faults: f64,
    /// Worker health checks expected: with faults or late starts, every worker every
    /// `gateway.health_check_interval` until the horizon.
    pub health_checks: f64,
    /// Estimated peak memory, bytes.
    pub memory_bytes: f64,
}

/// Faults a scenario's `[[faults]]` are expected to produce up to its arrival window's end, and the
/// entry that produces the most (`None` without faults).
fn fault_counts(s: &Scenario) -> (f64, Option<usize>) {
    if s.faults.is_empty() {
        return (0.0, None);
    }
    let horizon = crate::workload::synthetic::window_end(s.duration).as_secs_f64();
    // Per group, not per worker: the fleet may be too large to list (the memory check refuses it).
    let fastest_restart = s
        .workers
        .iter()
        .map(|g| {
            s.restart
                .restart_time(g.perf().weight_bytes_per_gpu() * f64::from(g.tp.0))
        })
        .min()
        .unwrap_or_default();
    let workers = s.worker_count();
    let mut total = 0.0;
    let mut worst: Option<(f64, usize)> = None;
    for (i, f) in s.faults.iter().enumerate() {
        let n = match f.mtbf {
            None => 1.0,
            Some(mtbf) => {
                let targets = match (&f.worker, &f.workers, &f.domain) {
                    (Some(_), _, _) => 1,
                    (_, Some(ws), _) => ws.len(),
                    (_, _, Some(d)) => s
                        .workers
                        .iter()
                        .filter(|g| g.failure_domain.0.contains(d))
                        .map(|g| s.group_slots(g) as usize)
                        .sum(),
                    _ => workers,
                };
                let repair = if f.restart {
                    f.mttr
                        .or(f.restart_after)
                        .unwrap_or(fastest_restart)
                        .as_secs_f64()
                } else {
                    f64::INFINITY
                };
                let per_worker = if repair.is_infinite() {
                    1.0
                } else {
                    (horizon / (mtbf.as_secs_f64() + repair)).ceil()
                };
                targets as f64 * per_worker
            }
        };
        total += n;
        if worst.is_none_or(|(m, _)| n > m) {
            worst = Some((n, i));
        }
    }
    (total, worst.map(|(_, i)| i))
}

/// Requests a traffic mix is expected to send over `window` seconds: the sum over its classes whose
/// volume is known in advance (`None` when no class's is).
fn mix_expected(w: &crate::workload::WorkloadSpec, window: f64) -> Option<f64> {
    let per_class = w.class_list().iter().map(|c| {
        let t = &c.traffic;
        match t.kind {
            WorkloadKind::Poisson | WorkloadKind::Gamma => t.rate.map(|r| r.0 * window),
            WorkloadKind::Sessions => {
                let turns = t.sessions().map_or(1.0, |c| c.turns.mean());
                t.session_rate.map(|r| r.0 * window * turns)
            }
            WorkloadKind::Concurrency => t.requests.map(|r| f64::from(r.0)),
            WorkloadKind::Benchmark => harness_requests(t),
            WorkloadKind::Stages => stage_requests(t),
            WorkloadKind::Trace | WorkloadKind::Mix => None,
        }
    });
    per_class.fold(None, |sum, e| match (sum, e) {
        (Some(a), Some(b)) => Some(a + b),
        (a, b) => a.or(b),
    })
}

/// Requests a benchmark client sends: its `requests`, or its harness's default budget, and its warm-up
/// requests.
fn harness_requests(w: &crate::workload::WorkloadSpec) -> Option<f64> {
    w.closed_loop().ok().and_then(|c| {
        c.requests
            .map(|r| f64::from(r.0) + f64::from(c.client.warmup_requests))
    })
}

/// Requests a staged workload sends if every stage runs: the sum of floor(rate × duration).
fn stage_requests(w: &crate::workload::WorkloadSpec) -> Option<f64> {
    w.stages
        .as_ref()
        .map(|st| st.iter().map(|s| s.requests() as f64).sum())
}

impl Footprint {
    /// The footprint of a validated scenario.
    pub fn of(s: &Scenario) -> Footprint {
        let workers: u64 = s.workers.iter().map(|g| u64::from(s.group_slots(g))).sum();
        let kv_blocks: u64 = s
            .workers
            .iter()
            .map(|g| u64::from(s.group_slots(g)) * u64::from(g.kv_blocks().unwrap_or(0)))
            .sum();
        let window = s.duration.as_secs_f64();
        let w = &s.workload;
        let expected = match w.kind {
            WorkloadKind::Poisson | WorkloadKind::Gamma => w.rate.map(|r| r.0 * window),
            WorkloadKind::Sessions => {
                let turns = w.sessions().map_or(1.0, |c| c.turns.mean());
                w.session_rate.map(|r| r.0 * window * turns)
            }
            WorkloadKind::Concurrency => w.requests.map(|r| f64::from(r.0)),
            WorkloadKind::Benchmark => harness_requests(w),
            WorkloadKind::Stages => stage_requests(w),
            WorkloadKind::Trace => None,
            WorkloadKind::Mix => mix_expected(w, window),
        };
        let expected = match (expected, s.max_requests) {
            (Some(e), Some(m)) => Some(e.min(m as f64)),
            (e, _) => e,
        };
        let in_flight = match w.kind {
            WorkloadKind::Concurrency | WorkloadKind::Benchmark => {
                w.clients.map(|c| u64::from(c.0))
            }
            _ => None,
        };
        // A closed loop holds every client's request at once: its blocks are the bulk of its cost.
        let request_blocks = in_flight.map_or(0.0, |n| {
            let tokens = w.closed_loop().map_or(0.0, |c| match &c.conversations {
                Some(d) => d.mean_request_tokens(),
                None => c.prompt.mean() + c.output.mean(),
            });
            let block = f64::from(s.workers[0].block_size.0);
            n as f64 * (BYTES_PER_IN_FLIGHT + BYTES_PER_BLOCK_HASH * (tokens / block).ceil())
        });
        let (expected_faults, _) = fault_counts(s);
        let checked = !s.faults.is_empty() || s.workers.iter().any(|g| g.start_at.is_some());
        let health_checks = if checked {
            let horizon = crate::workload::synthetic::window_end(s.duration).as_secs_f64();
            workers as f64 * (horizon / s.gateway.health_check_interval.as_secs_f64()).ceil()
        } else {
            0.0
        };
        // The time series keeps a window per `metrics.window` up to the horizon (and on while the
        // last requests drain).
        let windows = (crate::workload::synthetic::window_end(s.duration).as_secs_f64()
            / s.metrics.window.as_secs_f64())
        .ceil();
        let memory_bytes = workers as f64 * BYTES_PER_WORKER
            + kv_blocks as f64 * BYTES_PER_KV_BLOCK
            + request_blocks
            + expected_faults * BYTES_PER_FAULT
            + windows * (BYTES_PER_WINDOW + BYTES_PER_WINDOW_WORKER * workers as f64);
        Footprint {
            workers,
            kv_blocks,
            expected_requests: expected,
            in_flight,
            expected_faults,
            health_checks,
            memory_bytes,
        }
    }

    /// The first limit this footprint exceeds, naming the scenario key to change.
    pub fn check(&self, s: &Scenario) -> Result<(), LimitError> {
        if let Some(n) = self.expected_requests
            && n > MAX_EXPECTED_REQUESTS
        {
            let field = match s.workload.kind {
                WorkloadKind::Sessions => "workload.session_rate",
                WorkloadKind::Concurrency | WorkloadKind::Benchmark => "workload.requests",
                _ => "workload.rate",
            };
            return Err(LimitError {
                field: field.into(),
                message: format!(
                    "about {} requests expected over the {} arrival window, more than the {} a run may \
                     simulate (about a million per CPU-minute); lower the rate or the duration, or set \
                     max_requests",
                    count(n),
                    s.duration,
                    count(MAX_EXPECTED_REQUESTS)
                ),
            });
        }
        if self.expected_faults + self.health_checks > MAX_BACKGROUND_EVENTS {
            let (field, what) = match fault_counts(s).1 {
                Some(i) if self.expected_faults > self.health_checks => (
                    format!("faults[{i}].mtbf"),
                    format!("about {} faults", count(self.expected_faults)),
                ),
                _ => (
                    "gateway.health_check_interval".to_string(),
                    format!("about {} worker health checks", count(self.health_checks)),
                ),
            };
            return Err(LimitError {
                field,
                message: format!(
                    "{what} expected before the arrival window ends, more than the {} background \
                     events a run may simulate; lengthen it or shorten the duration",
                    count(MAX_BACKGROUND_EVENTS)
                ),
            });
        }
        if self.memory_bytes > MAX_MEMORY_BYTES {
            let windows_bytes = {
                let horizon = crate::workload::synthetic::window_end(s.duration).as_secs_f64();
                (horizon / s.metrics.window.as_secs_f64()).ceil()
                    * (BYTES_PER_WINDOW + BYTES_PER_WINDOW_WORKER * self.workers as f64)
            };
            let field = if self
                .in_flight
                .is_some_and(|c| c as f64 * BYTES_PER_IN_FLIGHT > self.memory_bytes / 2.0)
            {
                "workload.clients"
            } else if windows_bytes > self.memory_bytes / 2.0 {
                "metrics.window"
            } else {
                "workers"
            };
            return Err(LimitError {
                field: field.into(),
                message: format!(
                    "needs about {:.1} GiB of memory ({} workers, {} KV blocks{}), more than the {:.0} GiB \
                     limit; see docs/limits.md for the cost of each",
                    self.memory_bytes / (1u64 << 30) as f64,
                    count(self.workers as f64),
                    count(self.kv_blocks as f64),
                    self.in_flight
                        .map_or(String::new(), |c| format!(", {} clients", count(c as f64))),
                    MAX_MEMORY_BYTES / (1u64 << 30) as f64
                ),
            });
        }
        Ok(())
    }
}

/// `1234567` as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `n` as a readable count: `1,234`, or `1.2e30` when large.
fn count(n: f64) -> String {
    if n < 1e12 {
        thousands(n.round() as u64)
    } else {
        format!("{n:.1e}")
    }
}

/// Checks `s` against every limit (what `validate`, `run`, `compare` and `trace gen` call first).
pub fn check(s: &Scenario) -> Result<Footprint, LimitError> {
    let f = Footprint::of(s);
    f.check(s)?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
name = "t"
duration = "60s"
[[workers]]
count = 2
gpu = "h100"
model = "llama-3.1-8b"
kv_blocks = 1000
[workload]
kind = "poisson"
rate = 5.0
prompt = { dist = "fixed", tokens = 100 }
output = { dist = "fixed", tokens = 10 }
"#;

    fn footprint(set: &[&str]) -> (Scenario, Footprint) {
        let set: Vec<String> = set.iter().map(|s| s.to_string()).collect();
        let s = Scenario::parse(BASE, "s.toml", &set).unwrap();
        let f = Footprint::of(&s);
        (s, f)
    }

    #[test]
    fn the_footprint_adds_up_the_documented_costs() {
        let (s, f) = footprint(&[]);
        // 5 requests/s over 60 s; 2 workers of 1,000 blocks.
        assert_eq!(f.expected_requests, Some(300.0));
        assert_eq!((f.workers, f.kv_blocks), (2, 2000));
        // Six 10-second windows of the time series.
        assert_eq!(
            f.memory_bytes,
            2.0 * 16384.0 + 2000.0 * 96.0 + 6.0 * (1024.0 + 2.0 * 8.0)
        );
        assert!(f.check(&s).is_ok());
    }

    #[test]
    fn absurd_rates_workers_and_clients_are_refused() {
        // 1e30 requests/s over 60 s.
        let (s, f) = footprint(&["workload.rate=1e30"]);
        let e = f.check(&s).unwrap_err();
        assert_eq!(e.field, "workload.rate");
        assert!(e.message.contains("6.0e31"), "{e}");
        // max_requests caps the expectation.
        let (s, f) = footprint(&["workload.rate=1e30", "max_requests=1000"]);
        assert_eq!(f.expected_requests, Some(1000.0));
        assert!(f.check(&s).is_ok());
        // 4e9 workers × 16 KiB alone is 61 TiB.
        let (s, f) = footprint(&["workers[0].count=4000000000"]);
        assert_eq!(f.check(&s).unwrap_err().field, "workers");
        // 4e9 clients × 1 KiB is 3.7 TiB.
        let text = BASE
            .replace(
                "kind = \"poisson\"",
                "kind = \"concurrency\"\nclients = 4000000000",
            )
            .replace("rate = 5.0\n", "");
        let s = Scenario::parse(&text, "s.toml", &[]).unwrap();
        assert_eq!(check(&s).unwrap_err().field, "workload.clients");
    }

    #[test]
    fn faults_and_health_checks_are_counted_before_the_run() {
        // 2 workers failing every ~2 s (mtbf 1 s, mttr 1 s) over 60 s: 30 each.
        let text = format!("{BASE}[[faults]]\nkind = \"crash\"\nmtbf = \"1s\"\nmttr = \"1s\"\n");
        let s = Scenario::parse(&text, "s.toml", &[]).unwrap();
        let f = Footprint::of(&s);
        assert_eq!(f.expected_faults, 60.0);
        // Every 5 s (the default) for 60 s, 2 workers.
        assert_eq!(f.health_checks, 24.0);
        assert!(f.check(&s).is_ok());
        // Ten years of it on a thousand workers is 1.6e11 faults: refused, naming the entry.
        let s = Scenario::parse(
            &text,
            "s.toml",
            &[
                "duration=\"87600h\"".into(),
                "workers[0].count=1000".into(),
                "max_requests=1000".into(),
            ],
        )
        .unwrap();
        let e = check(&s).unwrap_err();
        assert_eq!(e.field, "faults[0].mtbf", "{e}");
    }

    #[test]
    fn a_time_series_too_fine_for_the_horizon_is_refused() {
        // A millisecond window over ten years: 3·10¹¹ windows.
        let (s, f) = footprint(&[
            "metrics.window=\"1ms\"",
            "duration=\"87600h\"",
            "max_requests=10",
        ]);
        assert_eq!(f.check(&s).unwrap_err().field, "metrics.window");
        let e = Scenario::parse(BASE, "s.toml", &["metrics.window=\"1ns\"".into()]).unwrap_err();
        assert!(e.to_string().contains("metrics.window"), "{e}");
    }

    #[test]
    fn counts_read_well() {
        assert_eq!(count(1234567.0), "1,234,567");
        assert_eq!(count(100.0), "100");
        assert_eq!(count(1e30), "1.0e30");
    }
}
