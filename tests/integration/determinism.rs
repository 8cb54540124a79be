//! Same scenario and seed: same bytes. Different seed: different numbers.

use crate::common::{run, scenario_path};
use fleetsim::scenario::Scenario;

#[test]
fn same_seed_same_bytes_different_seed_differs() {
    let path = scenario_path("quickstart.toml");
    let short = ["duration=\"60s\"".to_string()];
    let a = run(&Scenario::load(&path, &short).unwrap()).0.to_json();
    let b = run(&Scenario::load(&path, &short).unwrap()).0.to_json();
    assert_eq!(a, b, "two runs of one scenario and seed differ");

    let mut other = short.to_vec();
    other.push("seed=43".into());
    let c = run(&Scenario::load(&path, &other).unwrap()).0.to_json();
    assert_ne!(a, c, "a different seed gave identical output");
}

#[test]
fn changing_the_router_does_not_change_the_arrivals() {
    let path = scenario_path("quickstart.toml");
    let base = ["duration=\"30s\"".to_string()];
    let mut rr = base.to_vec();
    rr.push("router.policy=round_robin".into());
    let mut rnd = base.to_vec();
    rnd.push("router.policy=random".into());
    let a = run(&Scenario::load(&path, &rr).unwrap()).0;
    let b = run(&Scenario::load(&path, &rnd).unwrap()).0;
    assert_eq!(a.requests.arrived, b.requests.arrived);
    assert_eq!(a.prefix_cache.prompt_tokens, b.prefix_cache.prompt_tokens);
}

#[test]
fn sessions_and_jittered_traces_are_deterministic() {
    let path = scenario_path("chat-sessions.toml");
    let short = ["duration=\"30s\"".to_string()];
    let a = run(&Scenario::load(&path, &short).unwrap()).0.to_json();
    let b = run(&Scenario::load(&path, &short).unwrap()).0.to_json();
    assert_eq!(a, b, "two runs of a session scenario differ");

    // The Mooncake replay's jitter draws from the scenario's seed.
    let path = scenario_path("mooncake-conversation.toml");
    let short = |seed: &str| vec!["duration=\"2m\"".to_string(), format!("seed={seed}")];
    let a = run(&Scenario::load(&path, &short("1")).unwrap()).0;
    let b = run(&Scenario::load(&path, &short("1")).unwrap()).0;
    let c = run(&Scenario::load(&path, &short("2")).unwrap()).0;
    assert_eq!(a.to_json(), b.to_json());
    assert_ne!(a.ttft_ms.mean, c.ttft_ms.mean, "another seed, other jitter");
}

#[test]
fn an_autoscaled_run_gives_the_same_bytes_and_actually_scales() {
    // Eight minutes of the diurnal scenario's day played 48 times faster, with a one-minute scale-down
    // window: long enough for scale-ups, scale-downs and cold starts.
    let path = scenario_path("autoscale-diurnal.toml");
    let short = [
        "duration=\"8m\"",
        "workload.rate_curve.speedup=48",
        "workload.rate_curve.start=\"0s\"",
        "autoscaler.scale_down_window=\"60s\"",
    ]
    .map(String::from);
    let (a, ca) = run(&Scenario::load(&path, &short).unwrap());
    let (b, cb) = run(&Scenario::load(&path, &short).unwrap());
    assert_eq!(a.to_json(), b.to_json(), "two autoscaled runs differ");
    assert_eq!(
        ca.series.to_csv(),
        cb.series.to_csv(),
        "timeseries.csv differs"
    );
    let scaler = a.autoscaler.as_ref().expect("an autoscaler block");
    assert!(scaler.scale_ups > 0 && scaler.scale_downs > 0, "{scaler:?}");
    let csv = String::from_utf8(ca.series.to_csv()).unwrap();
    assert!(
        csv.lines()
            .next()
            .unwrap()
            .ends_with("replicas_ready,replicas_starting,replicas_billed,slo_attainment")
    );
    let r = &a.requests;
    assert_eq!(r.arrived, r.completed + r.failed + r.rejected);
}
