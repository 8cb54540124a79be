//! The session generator against its configuration: arrival process, rate curve, turns, message and
//! answer lengths and think times match their distributions within sampling error (fixed seeds,
//! bounds of four standard errors or the 0.1% Kolmogorov–Smirnov critical value); and through the
//! engine, a closed-loop turn never arrives before its predecessor completes.

use std::sync::{Arc, Mutex};

use fleetsim::engine::Simulation;
use fleetsim::metrics::Collector;
use fleetsim::metrics::record::RequestRecord;
use fleetsim::request::Request;
use fleetsim::rng;
use fleetsim::scenario::Scenario;
use fleetsim::time::{SimDuration, SimTime};
use fleetsim::worker::Worker;
use fleetsim::workload::Workload;
use fleetsim::workload::sessions::SessionRows;
use fleetsim::workload::synthetic::window_end;
use fleetsim::workload::trace::{Timing, TraceRow};

use crate::common::{TempDir, scenario};

const BASE: &str = r#"
name = "sessions-stats"
seed = 5
duration = "3h"

[[workers]]
count = 2
gpu = "h100"
model = "llama-3.1-8b"

[workload]
kind = "sessions"
session_rate = 2.0
turns = { dist = "geometric", mean = 4 }
first_prompt = { dist = "lognormal", median = 400, sigma = 0.9 }
prompt = { dist = "lognormal", median = 120, sigma = 0.9 }
output = { dist = "lognormal", median = 250, sigma = 0.7 }
think_time = { dist = "lognormal", median = "20s", sigma = 1.0 }
system_prompts = { count = 20, tokens = 1000, zipf = 1.1 }
"#;

/// Every row `trace gen` would write for the scenario (closed loop: each session's planned turns).
fn rows(s: &Scenario) -> Vec<TraceRow> {
    SessionRows::new(
        s.workload.sessions().unwrap(),
        rng::stream(s.seed, "workload"),
        window_end(s.duration),
        None,
    )
    .collect()
}

/// Standard normal CDF (Abramowitz and Stegun 7.1.26; error below 1.5e-7, far below what the
/// Kolmogorov–Smirnov bounds here can see).
fn normal_cdf(x: f64) -> f64 {
    let z = x.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * z);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-z * z).exp();
    if x >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

/// Kolmogorov–Smirnov distance between a sample and a continuous CDF.
fn ks(mut xs: Vec<f64>, cdf: impl Fn(f64) -> f64) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len() as f64;
    xs.iter()
        .enumerate()
        .map(|(i, &x)| {
            let f = cdf(x);
            (f - i as f64 / n).abs().max((f - (i + 1) as f64 / n).abs())
        })
        .fold(0.0, f64::max)
}

/// The 0.1% critical value of the KS distance for `n` observations.
fn ks_critical(n: usize) -> f64 {
    1.949 / (n as f64).sqrt()
}

fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let m = xs.iter().sum::<f64>() / n;
    let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0);
    (m, v.sqrt())
}

/// Checks that the logs of `xs` have mean `ln(median)` and standard deviation `sigma`, within four
/// standard errors.
fn assert_lognormal(name: &str, xs: &[f64], median: f64, sigma: f64) {
    let logs: Vec<f64> = xs.iter().map(|x| x.ln()).collect();
    let n = logs.len() as f64;
    let (m, sd) = mean_sd(&logs);
    let se_mean = sigma / n.sqrt();
    let se_sd = sigma / (2.0 * n).sqrt();
    assert!(
        (m - median.ln()).abs() < 4.0 * se_mean,
        "{name}: log-mean {m} vs {} (se {se_mean})",
        median.ln()
    );
    assert!(
        (sd - sigma).abs() < 4.0 * se_sd,
        "{name}: log-sd {sd} vs {sigma} (se {se_sd})"
    );
}

fn starts(rows: &[TraceRow]) -> Vec<f64> {
    rows.iter()
        .filter_map(|r| match r.timing {
            Timing::At(t) => Some(t.as_secs_f64()),
            Timing::After(_) => None,
        })
        .collect()
}

#[test]
fn session_starts_follow_the_configured_process() {
    // Poisson at 2/s for 3 h: 21,600 expected (sd 147); exponential gaps.
    let s = scenario(BASE, &[]);
    let t = starts(&rows(&s));
    let n = t.len() as f64;
    assert!(
        (n - 21_600.0).abs() < 4.0 * 21_600f64.sqrt(),
        "{n} sessions"
    );
    let gaps: Vec<f64> = t.windows(2).map(|w| w[1] - w[0]).collect();
    let d = ks(gaps.clone(), |x| 1.0 - (-2.0 * x).exp());
    assert!(d < ks_critical(gaps.len()), "KS {d} against Exp(2)");

    // Gamma with CV 2: the gaps' mean is still 1/rate and their CV is 2.
    let s = scenario(BASE, &["workload.cv=2.0"]);
    let t = starts(&rows(&s));
    let gaps: Vec<f64> = t.windows(2).map(|w| w[1] - w[0]).collect();
    let (m, sd) = mean_sd(&gaps);
    assert!((m - 0.5).abs() < 0.02, "mean gap {m}");
    assert!((sd / m - 2.0).abs() < 0.1, "cv {}", sd / m);
}

#[test]
fn a_rate_curve_shapes_the_session_rate() {
    // Two hours of curve: rate 1 then 3 (normalised: ×0.5, then ×1.5), played 2× faster.
    let dir = TempDir::new("rate-curve");
    let curve = dir.path("curve.csv");
    std::fs::write(&curve, "time_s,rate\n0,1\n3600,3\n").unwrap();
    let set = format!(
        "workload.rate_curve={{path=\"{}\",speedup=2}}",
        curve.display()
    );
    let s = scenario(BASE, &[&set, "duration=\"1h\""]);
    let t = starts(&rows(&s));
    let first = t.iter().filter(|&&x| x < 1800.0).count() as f64;
    let second = t.len() as f64 - first;
    // Expected 2/s × 0.5 × 1800 s = 1,800 and 2/s × 1.5 × 1800 s = 5,400.
    assert!((first - 1800.0).abs() < 4.0 * 1800f64.sqrt(), "{first}");
    assert!((second - 5400.0).abs() < 4.0 * 5400f64.sqrt(), "{second}");
}

#[test]
fn turns_lengths_and_think_times_match_their_distributions() {
    let s = scenario(BASE, &["duration=\"2h\""]);
    let rows = rows(&s);
    let mut turns_per_session: Vec<f64> = Vec::new();
    let (mut first, mut later, mut answers, mut thinks) = (vec![], vec![], vec![], vec![]);
    for r in &rows {
        let turn = r.session.unwrap().turn;
        if turn == 0 {
            turns_per_session.push(0.0);
        }
        *turns_per_session.last_mut().unwrap() += 1.0;
        let message = f64::from(r.segments.last().unwrap().tokens);
        if turn == 0 {
            first.push(message);
        } else {
            later.push(message);
        }
        answers.push(f64::from(r.output_tokens));
        if let Timing::After(d) = r.timing {
            thinks.push(d.as_secs_f64());
        }
    }
    // Geometric turns, mean 4: variance (1 − p)/p² = 12; P(1 turn) = 1/4.
    let n = turns_per_session.len() as f64;
    let (m, _) = mean_sd(&turns_per_session);
    assert!((m - 4.0).abs() < 4.0 * (12.0 / n).sqrt(), "mean turns {m}");
    let single = turns_per_session.iter().filter(|&&t| t == 1.0).count() as f64 / n;
    assert!(
        (single - 0.25).abs() < 4.0 * (0.25 * 0.75 / n).sqrt(),
        "{single}"
    );
    assert_lognormal("first message", &first, 400.0, 0.9);
    assert_lognormal("later messages", &later, 120.0, 0.9);
    assert_lognormal("answers", &answers, 250.0, 0.7);
    let d = ks(thinks.clone(), |x| normal_cdf((x / 20.0).ln()));
    assert!(d < ks_critical(thinks.len()), "think-time KS {d}");
    assert!(thinks.len() > 30_000, "{}", thinks.len());
}

/// Passes a workload through, recording for each follow-up turn its predecessor's completion.
struct Recorder {
    inner: Box<dyn Workload>,
    /// (session start, predecessor finished, follow-up arrival)
    seen: Arc<Mutex<Vec<(SimTime, SimTime, SimTime)>>>,
    starts: std::collections::HashMap<u64, SimTime>,
}

impl Workload for Recorder {
    fn next_arrival(&mut self) -> Option<Request> {
        let r = self.inner.next_arrival()?;
        self.starts.insert(r.session.unwrap().id, r.arrival);
        Some(r)
    }

    fn on_finished(&mut self, record: &RequestRecord, now: SimTime) -> Option<Request> {
        let next = self.inner.on_finished(record, now)?;
        let start = self.starts[&record.session.unwrap()];
        self.seen
            .lock()
            .unwrap()
            .push((start, record.finished, next.arrival));
        Some(next)
    }
}

#[test]
fn closed_loop_turns_arrive_a_think_time_after_their_predecessor_completes() {
    let s = scenario(BASE, &["duration=\"40m\"", "workload.session_rate=1.0"]);
    let mut workers = Vec::new();
    for g in &s.workers {
        for _ in 0..g.count.0 {
            workers.push(Worker::with_blocks(
                workers.len(),
                g.perf(),
                g.engine(),
                g.kv_blocks().unwrap(),
            ));
        }
    }
    let end = window_end(s.duration);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let workload = Recorder {
        inner: s.workload.build(s.seed, end, None).unwrap().workload,
        seen: seen.clone(),
        starts: Default::default(),
    };
    let sim = Simulation::new(
        s.name.clone(),
        s.seed,
        workers,
        &s.router,
        Box::new(workload),
        Collector::new(s.slo.clone(), s.worker_count()),
    );
    let summary = sim.run(&mut |_| {}).summary;
    let seen = seen.lock().unwrap();
    assert!(seen.len() > 4000, "{} follow-ups", seen.len());
    assert_eq!(summary.sessions.turns, summary.requests.arrived);
    assert!(seen.iter().all(|&(_, done, next)| next >= done));
    // Think times, measured from completion, are the configured lognormal. Sessions that started in
    // the last 15 minutes are left out: the end of the window cuts their long think times short.
    let thinks: Vec<f64> = seen
        .iter()
        .filter(|(start, _, _)| *start + SimDuration::from_secs(15 * 60) < end)
        .map(|&(_, done, next)| next.since(done).as_secs_f64())
        .collect();
    let d = ks(thinks.clone(), |x| normal_cdf((x / 20.0).ln()));
    assert!(
        d < ks_critical(thinks.len()),
        "think-time KS {d} over {}",
        thinks.len()
    );
}
