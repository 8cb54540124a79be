//! `fleetsim bench scaling`: how well independent runs use the cores, measured in one invocation.
//!
//! `compare`, `sweep` and `size` all parallelise the same way: a batch of independent simulations on one
//! rayon pool, each run on its own fleet, sharing nothing but the read-only scenario. This command times
//! exactly that pattern twice within one process, so both measurements see the same machine: the batch
//! of `N` runs (seeds `seed`, `seed + 1`, …) first one after another on a one-thread pool, then on an
//! `N`-thread pool. It reports wall and CPU time of each and their ratio, and, from the kernel's CPU
//! accounting, how much CPU time other processes took during each pass and how much the hypervisor stole
//! (either makes the ratio untrustworthy, and the report says so); and it checks that every run's
//! `summary.json` is the same to the byte both ways.

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
    /// CPU seconds that other processes used during the pass (all cores), where the system says.
    others_cpu_s: Option<f64>,
    /// CPU seconds the hypervisor gave to other guests while this machine wanted them (all cores).
    steal_s: Option<f64>,
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
    let (sequential, first) = pass(&variants, 1)?;
    let (parallel, second) = pass(&variants, runs)?;
    let result = Scaling {
        scenario: path.display().to_string(),
        runs,
        cores,
        wall_ratio: parallel.wall_s / sequential.wall_s,
        sequential,
        parallel,
        target_ratio: TARGET_RATIO,
        identical: first == second,
    };
    if json {
        outln!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        out!("{}", render(&result));
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
    let machine_before = machine_cpu();
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
    let machine = match (machine_before, machine_cpu()) {
        (Some(a), Some(b)) => Some(MachineCpu {
            busy_s: b.busy_s - a.busy_s,
            steal_s: b.steal_s - a.steal_s,
        }),
        _ => None,
    };
    let others_cpu_s = match (machine, cpu_s) {
        (Some(m), Some(own)) => Some((m.busy_s - own).max(0.0)),
        _ => None,
    };
    let summaries = summaries.map_err(anyhow::Error::msg)?;
    Ok((
        Pass {
            threads,
            wall_s,
            cpu_s,
            others_cpu_s,
            steal_s: machine.map(|m| m.steal_s),
        },
        summaries,
    ))
}

fn render(r: &Scaling) -> String {
    let secs = |v: Option<f64>| v.map_or("n/a".to_string(), |c| format!("{c:.2} s"));
    let row = |name: &str, p: &Pass| {
        format!(
            "| {name} | {} | {:.2} s | {} | {} | {} |\n",
            p.threads,
            p.wall_s,
            secs(p.cpu_s),
            secs(p.others_cpu_s),
            secs(p.steal_s)
        )
    };
    let mut out = format!(
        "{} independent runs of {} (seeds seed..seed+{}), {} cores\n\n\
         | pass | threads | wall | CPU (user + sys) | other processes' CPU | stolen by the hypervisor |\n\
         |---|---:|---:|---:|---:|---:|\n",
        r.runs,
        r.scenario,
        r.runs - 1,
        r.cores,
    );
    out += &row("one after another", &r.sequential);
    out += &row("in parallel", &r.parallel);
    out += &format!(
        "\nwall ratio {:.2} (target ≤ {:.1}); summaries {}\n",
        r.wall_ratio,
        r.target_ratio,
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
    for p in [&r.sequential, &r.parallel] {
        let spare = p.wall_s * r.cores as f64;
        let taken = p.others_cpu_s.unwrap_or(0.0) + p.steal_s.unwrap_or(0.0);
        if taken > NOT_IDLE * spare {
            out += &format!(
                "note: the machine was not idle during the {}-thread pass: other processes and other \
                 guests took {taken:.2} of its {spare:.2} CPU-seconds; the ratio is not to be trusted\n",
                p.threads
            );
        }
    }
    out
}

/// Share of the machine's CPU time during a pass that other work may take before the ratio is flagged.
const NOT_IDLE: f64 = 0.05;

/// The machine's CPU time, all cores, as the kernel accounts it.
#[derive(Clone, Copy, Debug)]
struct MachineCpu {
    /// Time not idle (user, nice, system, interrupts), seconds.
    busy_s: f64,
    /// Time a virtual CPU waited while the hypervisor ran something else, seconds.
    steal_s: f64,
}

/// The `cpu` line of `/proc/stat` (in ticks of `USER_HZ` = 1/100 s, as [`process_cpu_seconds`]).
fn machine_cpu() -> Option<MachineCpu> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    parse_machine_cpu(stat.lines().next()?)
}

fn parse_machine_cpu(line: &str) -> Option<MachineCpu> {
    let mut fields = line.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    let v: Vec<f64> = fields.map(|f| f.parse().ok()).collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice, already counted in user/nice]
    let [user, nice, system, _idle, _iowait, irq, softirq, steal, ..] = v[..] else {
        return None;
    };
    Some(MachineCpu {
        busy_s: (user + nice + system + irq + softirq) / 100.0,
        steal_s: steal / 100.0,
    })
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
    fn reads_the_kernels_cpu_line() {
        // user 100 s, nice 0, system 50 s, idle 1000 s, iowait 5 s, irq 1 s, softirq 2 s, steal 7 s.
        let m = parse_machine_cpu("cpu  10000 0 5000 100000 500 100 200 700 0 0").unwrap();
        assert!((m.busy_s - 153.0).abs() < 1e-9, "{m:?}");
        assert!((m.steal_s - 7.0).abs() < 1e-9, "{m:?}");
        assert!(parse_machine_cpu("cpu0 1 2 3 4 5 6 7 8").is_none());
        assert!(parse_machine_cpu("cpu 1 2 3").is_none());
    }

    #[test]
    fn notes_say_when_the_ratio_cannot_be_trusted() {
        let pass = |threads, wall_s, others| Pass {
            threads,
            wall_s,
            cpu_s: Some(1.0),
            others_cpu_s: Some(others),
            steal_s: Some(0.0),
        };
        let r = Scaling {
            scenario: "s.toml".into(),
            runs: 4,
            cores: 2,
            // 10 s on 2 cores: 20 CPU-s, 5% of which is 1 s.
            sequential: pass(1, 10.0, 0.9),
            parallel: pass(4, 5.5, 3.0),
            wall_ratio: 0.55,
            target_ratio: TARGET_RATIO,
            identical: true,
        };
        let text = render(&r);
        // 4 runs on 2 cores: at best 2 rounds of the 4 sequential run times, ratio 2/4.
        assert!(text.contains("bounded below by 0.50"), "{text}");
        // 0.9 of 20 CPU-s is under 5%; 3.0 of 5.5 s × 2 cores = 11 CPU-s is over.
        assert!(!text.contains("1-thread pass"), "{text}");
        assert!(
            text.contains("4-thread pass: other processes and other guests took 3.00 of its 11.00"),
            "{text}"
        );
        assert!(text.contains("wall ratio 0.55"), "{text}");
    }
}
