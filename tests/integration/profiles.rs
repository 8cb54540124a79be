//! Step-time profiles in scenarios: built-in, borrowed (spec-scaled), or a file the scenario names.

use std::path::PathBuf;

use crate::common::{SINGLE_WORKER, run, scenario};
use fleetsim::scenario::Scenario;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fleetsim-{name}-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    dir
}

#[test]
fn workers_report_which_profile_they_use() {
    let (s, _) = run(&scenario(SINGLE_WORKER, &["duration=\"20s\""]));
    assert_eq!(s.workers[0].profile, "h100/llama-3.1-8b/tp1/bf16");
    assert!(s.workers[0].calibrated);
    let (s, _) = run(&scenario(
        SINGLE_WORKER,
        &["duration=\"20s\"", "workers[0].gpu=b200"],
    ));
    assert_eq!(
        s.workers[0].profile,
        "spec-scaled from h200/llama-3.1-8b/tp1/bf16"
    );
    assert!(!s.workers[0].calibrated);
    let json: serde_json::Value = serde_json::from_str(&s.to_json()).unwrap();
    assert_eq!(json["workers"][0]["calibrated"], false);
}

/// A scenario's `profile` is read relative to the scenario file, and its efficiencies are the ones used.
#[test]
fn a_profile_file_named_by_the_scenario_is_used() {
    let dir = temp_dir("profile");
    let builtin = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("profiles/h100_llama-3.1-8b_tp1_bf16.toml"),
    )
    .unwrap();
    // Half the memory efficiency: decode steps (weight streaming) take about twice as long.
    let line = builtin
        .lines()
        .find(|l| l.starts_with("memory = "))
        .unwrap();
    let memory: f64 = line["memory = ".len()..].parse().unwrap();
    let slow = builtin.replace(line, &format!("memory = {}", memory / 2.0));
    std::fs::write(dir.join("sub/slow.toml"), &slow).unwrap();
    let text = SINGLE_WORKER.replace(
        "enable_prefix_caching = false",
        "enable_prefix_caching = false\nprofile = \"sub/slow.toml\"",
    );
    let path = dir.join("s.toml");
    std::fs::write(&path, &text).unwrap();
    let set = [
        "duration=\"60s\"".to_string(),
        "workload.output={dist=\"fixed\",tokens=50}".into(),
    ];
    let with = run(&Scenario::load(&path, &set).unwrap()).0;
    assert_eq!(with.workers[0].profile, "sub/slow.toml");
    assert!(with.workers[0].calibrated);
    let without = run(&scenario(SINGLE_WORKER, &[&set[0], &set[1]])).0;
    let ratio = with.tpot_ms.mean / without.tpot_ms.mean;
    assert!((1.6..2.1).contains(&ratio), "TPOT ratio {ratio}");

    // A profile of another configuration, or a bad value in it, is an error naming both files.
    std::fs::write(&path, text.replace("gpu = \"h100\"", "gpu = \"h200\"")).unwrap();
    let e = Scenario::load(&path, &[]).unwrap_err().to_string();
    assert!(
        e.contains("s.toml:11")
            && e.contains("workers[0].profile")
            && e.contains("describes h100/llama-3.1-8b/tp1/bf16, but this group runs h200"),
        "{e}"
    );
    std::fs::write(
        dir.join("sub/slow.toml"),
        slow.replace("attention = ", "attention = -"),
    )
    .unwrap();
    std::fs::write(&path, &text).unwrap();
    let e = Scenario::load(&path, &[]).unwrap_err().to_string();
    assert!(
        e.contains("s.toml:11") && e.contains("slow.toml:") && e.contains("`attention`"),
        "{e}"
    );
    std::fs::remove_file(dir.join("sub/slow.toml")).unwrap();
    let e = Scenario::load(&path, &[]).unwrap_err().to_string();
    assert!(e.contains("cannot read profile"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
