//! Queueing theory: one worker serving identical requests one at a time is an M/D/1 queue.

use crate::common::{SINGLE_WORKER, run, scenario};

/// Mean wait in queue of M/D/1 (Pollaczek–Khinchine): ρ·D / (2(1 − ρ)).
fn md1_wait(rho: f64, d: f64) -> f64 {
    rho * d / (2.0 * (1.0 - rho))
}

fn check(rho: f64, requests: u64) {
    let base = scenario(SINGLE_WORKER, &["workers[0].max_num_seqs=1"]);
    // Service time: one step prefilling 512 tokens (output = 1 token: the request ends with its first token),
    // on the step-time model the scenario's worker uses.
    let d = base.workers[0]
        .perf()
        .step_time(&{
            let mut s = fleetsim::hardware::StepShape::default();
            s.add(512, 0);
            s
        })
        .as_secs_f64();
    let rate = rho / d;
    let duration = requests as f64 / rate;
    let s = scenario(
        SINGLE_WORKER,
        &[
            "workers[0].max_num_seqs=1",
            &format!("workload.rate={rate}"),
            &format!("duration=\"{duration}s\""),
            "seed=2024",
        ],
    );
    let (summary, c) = run(&s);
    assert!(
        summary.requests.completed >= requests * 98 / 100,
        "{}",
        summary.requests.completed
    );
    // Every request takes exactly D in service.
    let e2e_minus_wait = c.steady.e2e.mean() - c.steady.queue.mean();
    assert!(
        (e2e_minus_wait / 1e9 - d).abs() < 1e-6 * d + 1e-9,
        "service {e2e_minus_wait} ns vs D {d} s"
    );
    let measured = c.steady.queue.mean() / 1e9;
    let theory = md1_wait(rho, d);
    let err = (measured / theory - 1.0).abs();
    println!(
        "M/D/1 rho={rho}: D={d:.6}s measured Wq={measured:.6}s theory={theory:.6}s err={:.2}%",
        err * 100.0
    );
    assert!(
        err < 0.05,
        "rho {rho}: mean wait {measured:.6} s vs M/D/1 {theory:.6} s ({:.1}% off)",
        err * 100.0
    );
}

#[test]
fn md1_mean_wait_at_half_load() {
    check(0.5, 200_000);
}

#[test]
fn md1_mean_wait_at_eighty_percent_load() {
    check(0.8, 200_000);
}
