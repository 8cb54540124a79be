//! Material shared by the tests that run the same scenario two ways and compare the summaries to the
//! byte (`fast_path`, `private_blocks`): a small fleet under KV pressure, the policies and faults to
//! draw from, the bundled scenarios, and the comparison itself.

use crate::common::scenario_path;
use fleetsim::engine::{RunOutput, Simulation};
use fleetsim::metrics::Summary;
use fleetsim::scenario::Scenario;

/// Three H100s of 600 KV blocks under independent requests, half with a shared prefix.
pub const FLEET: &str = r#"
name = "random-fleet"
seed = 1
duration = "40s"

[[workers]]
count = 3
gpu = "h100"
model = "llama-3.1-8b"
kv_blocks = 600

[workload]
kind = "poisson"
rate = 4.0
prompt = { dist = "lognormal", median = 600, sigma = 0.8, max = 4000 }
output = { dist = "lognormal", median = 150, sigma = 0.8, max = 1500 }
shared_prefix = { groups = 4, tokens = 512, zipf = 1.0, fraction = 0.5 }

[router]
policy = "least_outstanding"

[gateway]
health_check_interval = "2s"
"#;

/// One policy of each family.
pub const POLICIES: [&str; 6] = [
    "round_robin",
    "least_outstanding",
    "least_kv",
    "prefix_aware",
    "session_affinity",
    "llm_d",
];

/// One fault of each kind, on worker `W` at instant `T`.
pub const FAULTS: [&str; 6] = [
    "{kind=\"crash\",worker=W,at=\"T\",restart_after=\"5s\"}",
    "{kind=\"hang\",worker=W,at=\"T\",restart_after=\"8s\"}",
    "{kind=\"slowdown\",worker=W,at=\"T\",duration=\"6s\",factor=2.5}",
    "{kind=\"memory_pressure\",worker=W,at=\"T\",duration=\"6s\",fraction=0.6}",
    "{kind=\"drain\",worker=W,at=\"T\",grace=\"3s\",restart_after=\"4s\"}",
    "{kind=\"crash\",worker=W,at=\"T\",restart_after=\"2s\",symptom=\"unreachable\"}",
];

/// Overrides of [`FLEET`] for one random case: `workers` workers of `blocks` KV blocks, arrivals at
/// `rate` (or closed-loop sessions), policy `POLICIES[policy]`, and fault `i` = `(kind, worker, at)`
/// in its own 20-second window: `at` is under 12 s and no fault here lasts more than 8 s, so two never
/// overlap on one worker (with 15-second windows a hang at 9 s still held its worker when the next
/// window's fault began).
pub fn random_fleet(
    seed: u64,
    workers: u32,
    blocks: u32,
    rate: f64,
    sessions: bool,
    policy: usize,
    faults: &[(usize, u32, u32)],
) -> Vec<String> {
    let mut o: Vec<String> = vec![
        format!("seed={seed}"),
        format!("workers[0].count={workers}"),
        format!("workers[0].kv_blocks={blocks}"),
        format!("workload.rate={rate}"),
        format!("router.policy=\"{}\"", POLICIES[policy]),
    ];
    if sessions {
        o.push(
            "workload={kind=\"sessions\",session_rate=1.5,mode=\"closed\",\
            turns={dist=\"geometric\",mean=3,max=8},\
            first_prompt={dist=\"lognormal\",median=300,sigma=0.8,max=3000},\
            prompt={dist=\"lognormal\",median=80,sigma=0.8,max=1000},\
            output={dist=\"lognormal\",median=120,sigma=0.7,max=1000},\
            think_time={dist=\"lognormal\",median=\"2s\",sigma=0.8,max=\"20s\"},\
            system_prompts={count=4,tokens=400,zipf=1.0},max_context=8000}"
                .to_string(),
        );
    }
    let faults: Vec<String> = faults
        .iter()
        .enumerate()
        .map(|(i, &(k, w, at))| {
            FAULTS[k]
                .replace('W', &(w % workers).to_string())
                .replace('T', &format!("{}s", 20 * i as u32 + at))
        })
        .collect();
    if !faults.is_empty() {
        o.push(format!("faults=[{}]", faults.join(",")));
    }
    o
}

/// Runs `s` twice, the first time with `changed` (named `how`) applied to the simulation, the second
/// as it comes (named `default`); checks that the two summaries are identical and returns both outputs.
pub fn two_ways(
    s: &Scenario,
    what: &str,
    (how, changed): (&str, fn(&mut Simulation)),
    default: &str,
) -> (RunOutput, RunOutput) {
    let mut first = Simulation::from_scenario(s).unwrap();
    changed(&mut first);
    let first = first.run(&mut |_| {});
    let second = Simulation::from_scenario(s).unwrap().run(&mut |_| {});
    assert_same_summary(what, (how, &first.summary), (default, &second.summary));
    (first, second)
}

/// Every bundled scenario, cut to its first `requests` requests, by path (sorted).
pub fn bundled_scenarios(requests: u32) -> Vec<(String, Scenario)> {
    let mut names: Vec<_> = std::fs::read_dir(scenario_path(""))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    names.sort();
    assert!(names.len() >= 10, "bundled scenarios: {names:?}");
    names
        .into_iter()
        .map(|p| {
            let s = Scenario::load(&p, &[format!("max_requests={requests}")]).unwrap();
            (p.display().to_string(), s)
        })
        .collect()
}

/// Panics, naming `what` and the first line that differs, unless the two runs' `summary.json` are
/// identical.
pub fn assert_same_summary(what: &str, a: (&str, &Summary), b: (&str, &Summary)) {
    let (ja, jb) = (a.1.to_json(), b.1.to_json());
    if ja != jb {
        let line = ja.lines().zip(jb.lines()).position(|(x, y)| x != y);
        panic!(
            "{what}: the summary {} differs from the summary {} (first at line {line:?})\n{}: {:?}\n{}: {:?}",
            b.0,
            a.0,
            a.0,
            line.and_then(|l| ja.lines().nth(l)),
            b.0,
            line.and_then(|l| jb.lines().nth(l)),
        );
    }
}
