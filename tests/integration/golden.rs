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
