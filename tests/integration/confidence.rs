//! Confidence intervals that mean what they say: over many independent replication sets of queues with
//! a known mean wait, the 95% interval covers the formula's value about 95% of the time.

use fleetsim::confidence::{Estimate, replicate};
use fleetsim::hardware::StepShape;
use fleetsim::scenario::Scenario;

use crate::common::{SINGLE_WORKER, scenario};

/// Replication sets (base seeds) per queue.
const SETS: u64 = 100;
/// Replications per set.
const REPLICATIONS: u32 = 5;
/// Requests per replication.
const REQUESTS: f64 = 2_000.0;
/// Offered load.
const RHO: f64 = 0.5;

/// Service time of a request of `tokens` prompt tokens (one prefill step; output 1 token ends it).
fn service_s(base: &Scenario, tokens: u32) -> f64 {
    let mut s = StepShape::default();
    s.add(u64::from(tokens), 0);
    base.workers[0].perf().step_time(&s).as_secs_f64()
}

/// M/G/1 mean wait in queue (Pollaczek–Khinchine): λ·E[S²] / (2(1 − λ·E[S])).
fn pk_wait(rate: f64, es: f64, es2: f64) -> f64 {
    rate * es2 / (2.0 * (1.0 - rate * es))
}

/// The fraction of `SETS` replication sets whose 95% interval of the mean wait (the steady-state
/// `queue_ms.mean` of each replication) covers `theory_s`.
fn coverage(s: &Scenario, theory_s: f64) -> (f64, Vec<Estimate>) {
    let mut covered = 0;
    let mut estimates = Vec::new();
    for set in 0..SETS {
        let mut sc = s.clone();
        sc.seed = 10_000 + set;
        let (runs, _) = replicate::replicate(
            &sc,
            REPLICATIONS,
            None,
            &|_: &[f64]| Estimate::of(&[]),
            &|_, r| {
                let out = fleetsim::engine::Simulation::from_scenario(r)?.try_run(&mut |_| {})?;
                Ok(out.summary.queue_ms.mean / 1e3)
            },
        )
        .unwrap();
        let e = Estimate::of(&runs);
        covered += u32::from(!e.excludes(theory_s));
        estimates.push(e);
    }
    (f64::from(covered) / SETS as f64, estimates)
}

#[test]
fn md1_intervals_cover_the_pollaczek_khinchine_wait() {
    let base = scenario(SINGLE_WORKER, &["workers[0].max_num_seqs=1"]);
    let d = service_s(&base, 512);
    let rate = RHO / d;
    let s = scenario(
        SINGLE_WORKER,
        &[
            "workers[0].max_num_seqs=1",
            &format!("workload.rate={rate}"),
            &format!("duration=\"{}s\"", REQUESTS / rate),
        ],
    );
    let theory = pk_wait(rate, d, d * d);
    let (c, e) = coverage(&s, theory);
    println!(
        "M/D/1 ρ={RHO}: theory {theory:.6} s, coverage {c:.2}, first {:?}",
        e[0]
    );
    assert!(c >= 0.90, "coverage {c} < 0.90 (theory {theory} s)");
    // Not vacuous: the intervals are narrow, a few percent of the mean.
    let rel = e.iter().map(|e| e.half_width / e.mean).sum::<f64>() / e.len() as f64;
    assert!(rel < 0.15, "mean relative half-width {rel}");
}

/// Mean output tokens of the M/M/1-like queue.
const MEAN_OUTPUT: f64 = 100.0;

#[test]
fn mm1_like_intervals_cover_the_pollaczek_khinchine_wait() {
    // One sequence at a time, a 16-token prompt and geometric answer lengths (mean 100): the service
    // time is one prefill step plus L − 1 decode steps of nearly constant length, so it is close to
    // exponential (cv² ≈ 0.97); its exact moments follow from the length distribution and the step
    // model, and the wait is M/G/1's.
    let overrides = [
        "workers[0].max_num_seqs=1",
        "workload.prompt={ dist = \"fixed\", tokens = 16 }",
        "workload.output={ dist = \"geometric\", mean = 100 }",
    ];
    let base = scenario(SINGLE_WORKER, &overrides);
    let perf = base.workers[0].perf();
    let step = |tokens: u64, context: u64| {
        let mut s = StepShape::default();
        s.add(tokens, context);
        perf.step_time(&s).as_secs_f64()
    };
    let p = 1.0 / MEAN_OUTPUT;
    let (mut es, mut es2) = (0.0, 0.0);
    let mut service = step(16, 0);
    let mut tail = 1.0;
    for k in 1..=20_000u64 {
        let pk = p * (1.0 - p).powi(k as i32 - 1);
        es += pk * service;
        es2 += pk * service * service;
        tail -= pk;
        // The next token's decode step reads the prompt and the k tokens so far.
        service += step(1, 16 + k);
    }
    assert!(tail < 1e-12);
    let rate = RHO / es;
    let mut o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    o.push(format!("workload.rate={rate}"));
    o.push(format!("duration=\"{}s\"", REQUESTS / rate));
    let o: Vec<&str> = o.iter().map(String::as_str).collect();
    let s = scenario(SINGLE_WORKER, &o);
    // The service-time model is the engine's: its measured mean service matches E[S].
    let (summary, c) = crate::common::run(&s);
    let measured = (c.steady.e2e.mean() - c.steady.queue.mean()) / 1e9;
    assert!(
        (measured / es - 1.0).abs() < 0.03,
        "service {measured} s vs E[S] {es} s ({} requests)",
        summary.requests.completed
    );
    let theory = pk_wait(rate, es, es2);
    let scv = es2 / (es * es) - 1.0;
    let (c, _) = coverage(&s, theory);
    println!(
        "M/M/1-like ρ={RHO}: cv²={scv:.3}, E[S]={es:.4} s, theory {theory:.4} s, coverage {c:.2}"
    );
    assert!(scv > 0.9, "service cv² {scv}: not exponential-like");
    assert!(c >= 0.90, "coverage {c} < 0.90 (theory {theory} s)");
}

#[test]
fn replications_are_identical_across_thread_counts() {
    let path = crate::common::scenario_path("quickstart.toml");
    let run = |threads: usize| {
        let s = Scenario::load(&path, &["duration=\"20s\"".into()]).unwrap();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            replicate::replicate(&s, 4, None, &|_: &[String]| Estimate::of(&[]), &|_, r| {
                let out = fleetsim::engine::Simulation::from_scenario(r)?.try_run(&mut |_| {})?;
                Ok(out.summary.to_json())
            })
            .unwrap()
            .0
        })
    };
    let one = run(1);
    assert_eq!(one, run(3));
    // Independent: the replications differ from each other.
    assert_ne!(one[0], one[1]);
}
