//! `fleetsim bench scaling`: how well independent runs use the cores, measured in one invocation.
//!
//! `compare`, `sweep` and `size` all parallelise the same way: a batch of independent simulations on one
//! rayon pool, each run on its own fleet, sharing nothing but the read-only scenario. This command times
//! exactly that pattern twice within one process, so both measurements see the same machine: the batch
//! of `N` runs (seeds `seed`, `seed + 1`, …) first one after another on a one-thread pool, then on an
//! `N`-thread pool. It reports wall and CPU time of each, their ratio, the load average before and after
//! (a busy machine makes the ratio meaningless, and says so), and checks that every run's `summary.json`
//! is the same to the byte both ways.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use rayon::prelude::*;
use serde::Serialize;

use crate::engine::Simulation;
use crate::scenario::Scenario;

/// The bar for two cores: the parallel batch in at most this share of the sequential one.
const TARGET_RATIO: f64 = 0.6;

/// One timed pass over the batch.
#[derive(Debug, Serialize)]
struct Pass {
    threads: usize,
    wall_s: f64,
    /// User + system CPU seconds of the whole process during the pass (all threads).
    cpu_s: Option<f64>,
}

/// What `bench scaling` measured.
#[derive(Debug, Serialize)]
struct Scaling {
    scenario: String,
    runs: usize,
    cores: usize,
    sequential: Pass,
    parallel: Pass,
    /// Parallel wall time over sequential wall time.
    wall_ratio: f64,
    target_ratio: f64,
    /// 1-minute load averages before the first pass and after the second (Linux only).
    load_before: Option<f64>,
    load_after: Option<f64>,
    /// Every run's summary.json was identical in both passes.
    identical: bool,
}

pub(super) fn scaling(
    path: &Path,
    set: &[String],
    runs: usize,
    force: bool,
    json: bool,
) -> Result<()> {
    if runs < 2 {
        bail!("--runs: needs at least 2 runs to measure scaling, got {runs}");
    }
    let scenario = super::load_checked(path, set, force)?;
    let variants: Vec<Scenario> = (0..runs as u64)
        .map(|i| {
            let mut s = scenario.clone();
            s.seed = scenario.seed.wrapping_add(i);
            s
        })
        .collect();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let load_before = load_average();
    let (sequential, first) = pass(&variants, 1)?;
    let (parallel, second) = pass(&variants, runs)?;
    let load_after = load_average();
    let result = Scaling {
        scenario: path.display().to_string(),
        runs,
        cores,
        wall_ratio: parallel.wall_s / sequential.wall_s,
        sequential,
        parallel,
        target_ratio: TARGET_RATIO,
        load_before,
        load_after,
        identical: first == second,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        print!("{}", render(&result));
    }
    if !result.identical {
        bail!("the runs' summaries differ between the one-thread and the parallel pass");
    }
    Ok(())
}

/// Runs every variant on a pool of `threads` threads; returns the timing and each run's summary.json.
fn pass(variants: &[Scenario], threads: usize) -> Result<(Pass, Vec<String>)> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .context("cannot start worker threads")?;
    let cpu_before = process_cpu_seconds();
    let started = Instant::now();
    let summaries = pool.install(|| {
        variants
            .par_iter()
            .map(|s| {
                let sim = Simulation::from_scenario(s)?;
                Ok(sim.try_run(&mut |_| {})?.summary.to_json())
            })
            .collect::<Result<Vec<String>, String>>()
    });
    let wall_s = started.elapsed().as_secs_f64();
    let cpu_s = match (cpu_before, process_cpu_seconds()) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    let summaries = summaries.map_err(anyhow::Error::msg)?;
    Ok((
        Pass {
            threads,
            wall_s,
            cpu_s,
        },
        summaries,
    ))
}

fn render(r: &Scaling) -> String {
    let cpu = |p: &Pass| p.cpu_s.map_or("n/a".to_string(), |c| format!("{c:.2} s"));
    let load = |l: Option<f64>| l.map_or("n/a".to_string(), |l| format!("{l:.2}"));
    let mut out = format!(
        "{} independent runs of {} (seeds seed..seed+{}), {} cores\n\n\
         | pass | threads | wall | CPU (user + sys) |\n|---|---:|---:|---:|\n\
         | one after another | {} | {:.2} s | {} |\n| in parallel | {} | {:.2} s | {} |\n\n",
        r.runs,
        r.scenario,
        r.runs - 1,
        r.cores,
        r.sequential.threads,
        r.sequential.wall_s,
        cpu(&r.sequential),
        r.parallel.threads,
        r.parallel.wall_s,
        cpu(&r.parallel),
    );
    out += &format!(
        "wall ratio {:.2} (target ≤ {:.1}); load average {} before, {} after; summaries {}\n",
        r.wall_ratio,
        r.target_ratio,
        load(r.load_before),
        load(r.load_after),
        if r.identical {
            "identical both ways"
        } else {
            "DIFFER"
        },
    );
    if r.cores < r.runs {
        out += &format!(
            "note: {} runs on {} cores cannot all run at once; the ratio is bounded below by {:.2}\n",
            r.runs,
            r.cores,
            (r.runs as f64 / r.cores as f64).ceil() / r.runs as f64
        );
    }
    if let Some(l) = r
        .load_before
        .into_iter()
        .chain(r.load_after)
        .reduce(f64::max)
        && l > 0.5
    {
        out += &format!(
            "note: the machine was not idle (load average up to {l:.2}): other work competed for the cores\n"
        );
    }
    out
}

/// The 1-minute load average, where the system reports one (`/proc/loadavg`).
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// User + system CPU seconds used so far by this process, all threads, where the system reports them
/// (`/proc/self/stat`, in clock ticks of `USER_HZ` = 1/100 s, its value on x86 and ARM Linux).
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may contain spaces; the fields after its closing parenthesis are fixed.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ")": state is field 3, so utime (14) and stime (15) are at offsets 11 and 12.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process_cpu_time_and_it_grows_with_work() {
        let Some(before) = process_cpu_seconds() else {
            return; // not Linux: nothing to read
        };
        // Spin for about 0.3 s of CPU: the counter has 10 ms ticks.
        let started = Instant::now();
        let mut x = 0u64;
        while started.elapsed().as_secs_f64() < 0.3 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let after = process_cpu_seconds().unwrap();
        assert!(after - before >= 0.1, "{before} -> {after}");
    }

    #[test]
    fn notes_say_when_the_ratio_cannot_be_trusted() {
        let pass = |threads, wall_s| Pass {
            threads,
            wall_s,
            cpu_s: Some(1.0),
        };
        let r = Scaling {
            scenario: "s.toml".into(),
            runs: 4,
            cores: 2,
            sequential: pass(1, 10.0),
            parallel: pass(4, 5.5),
            wall_ratio: 0.55,
            target_ratio: TARGET_RATIO,
            load_before: Some(3.0),
            load_after: Some(0.1),
            identical: true,
        };
        let text = render(&r);
        // 4 runs on 2 cores: at best 2 rounds of the 4 sequential run times, ratio 2/4.
        assert!(text.contains("bounded below by 0.50"), "{text}");
        assert!(
            text.contains("not idle (load average up to 3.00)"),
            "{text}"
        );
        assert!(text.contains("wall ratio 0.55"), "{text}");
    }
}
