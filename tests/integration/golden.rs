//! Golden snapshot of the quickstart scenario's summary: any change to it is reviewed on purpose
//! (`cargo insta review`).

use crate::common::{run, scenario_path};
use fleetsim::scenario::Scenario;

#[test]
fn quickstart_summary_is_unchanged() {
    let s = Scenario::load(&scenario_path("quickstart.toml"), &[]).unwrap();
    let json = run(&s).0.to_json();
    insta::assert_snapshot!("quickstart_summary_json", json);
}

/// The human-readable summary of a small run: its layout and numbers are reviewed on purpose.
#[test]
fn quickstart_summary_markdown_is_unchanged() {
    let s = Scenario::load(
        &scenario_path("quickstart.toml"),
        &["duration=\"60s\"".to_string()],
    )
    .unwrap();
    let md = run(&s).0.to_markdown();
    insta::assert_snapshot!("quickstart_60s_summary_md", md);
}

/// `compare`'s table for a small scenario with a crash: three policies, differences from the first.
#[test]
fn comparison_table_is_unchanged() {
    let s = Scenario::load(
        &scenario_path("failure-sticky-crash.toml"),
        &[
            "duration=\"90s\"".to_string(),
            "faults[0].at=\"45s\"".to_string(),
        ],
    )
    .unwrap();
    let contenders =
        fleetsim::compare::resolve("session_affinity,round_robin,prefix_aware", &s).unwrap();
    let outputs = fleetsim::compare::run_all(&s, &contenders).unwrap();
    let table = fleetsim::compare::Comparison::new(&s, &contenders, &outputs).to_markdown();
    insta::assert_snapshot!("sticky_crash_90s_comparison_md", table);
}

/// FNV-1a, 64 bits: a hash whose value no toolchain or crate update can change.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Bundled scenario `name` run with `sets` as `--set` overrides: `name: <length> bytes, fnv1a <hash>` of
/// its `summary.json`.
fn summary_line(name: &str, sets: &[&str]) -> String {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let s = Scenario::load(&scenario_path(&format!("{name}.toml")), &sets).unwrap();
    let json = run(&s).0.to_json();
    format!(
        "{name}: {} bytes, fnv1a {:016x}",
        json.len(),
        fnv1a(json.as_bytes())
    )
}

/// Every bundled scenario, cut to a short arrival window, gives the same `summary.json` to the byte: a
/// refactor that means to change no behaviour shows here that it changed none. One line per scenario
/// (its name, the JSON's length and hash); a scenario whose line changes must have changed on purpose.
#[test]
fn every_bundled_scenario_s_summary_is_unchanged() {
    let dir = scenario_path("quickstart.toml")
        .parent()
        .unwrap()
        .to_path_buf();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".toml").map(str::to_string)
        })
        .collect();
    names.sort();
    assert!(names.len() >= 29, "{names:?}");
    let lines: Vec<String> = names
        .iter()
        .map(|name| summary_line(name, &["duration=\"20s\"", "max_requests=400"]))
        .collect();
    insta::assert_snapshot!("bundled_summaries_20s", lines.join("\n"));
}

/// The bundled fault and autoscaling scenarios with their events moved into a short run (the crash or
/// slowdown at 30 s of 90 s; 20 minutes of the diurnal ramp), so that the byte check above also covers
/// failure detection, recovery and scaling.
#[test]
fn bundled_fault_and_autoscale_summaries_are_unchanged() {
    let cases: [(&str, &[&str]); 6] = [
        (
            "failure-rack-loss",
            &["duration=\"90s\"", "faults[0].at=\"30s\""],
        ),
        (
            "failure-slowdown",
            &[
                "duration=\"90s\"",
                "faults[0].at=\"30s\"",
                "faults[0].duration=\"30s\"",
            ],
        ),
        (
            "failure-sticky-crash",
            &["duration=\"90s\"", "faults[0].at=\"30s\""],
        ),
        ("autoscale-diurnal", &["duration=\"20m\""]),
        ("autoscale-diurnal-slo", &["duration=\"20m\""]),
        ("autoscale-two-models", &["duration=\"20m\""]),
    ];
    let lines: Vec<String> = cases
        .iter()
        .map(|(name, sets)| summary_line(name, sets))
        .collect();
    insta::assert_snapshot!("bundled_fault_and_autoscale_summaries", lines.join("\n"));
}
