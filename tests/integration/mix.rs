//! Traffic mixes (`kind = "mix"`): per-class accounting, priority that changes who waits, and `size`
//! judging every class against its own SLO.

use assert_cmd::Command;

use crate::common::{TempDir, run, scenario_path};
use fleetsim::scenario::Scenario;

/// The bundled mix with a short window and `extra` overrides.
fn mix(extra: &[&str]) -> Scenario {
    let mut o = vec!["duration=\"40s\"".to_string()];
    o.extend(extra.iter().map(|s| s.to_string()));
    Scenario::load(&scenario_path("size-chat-mix.toml"), &o).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_request_is_counted_in_exactly_one_class() {
    // Whole run: the latency counts are compared with the request counts.
    let (s, _) = run(&mix(&["metrics.warmup=\"none\""]));
    let names: Vec<&str> = s.classes.iter().map(|c| c.class.as_str()).collect();
    assert_eq!(names, ["chat", "rag", "batch"]);
    let sum: u64 = s.classes.iter().map(|c| c.requests).sum();
    assert_eq!(
        sum, s.requests.arrived,
        "the classes partition the arrivals"
    );
    for c in &s.classes {
        assert!(c.requests > 0, "{}: no traffic", c.class);
        assert_eq!(
            c.requests,
            c.completed + c.failed + c.rejected,
            "{}",
            c.class
        );
        assert_eq!(c.ttft_ms.count, c.completed, "{}", c.class);
    }
    let completed: u64 = s.classes.iter().map(|c| c.completed).sum();
    assert_eq!(completed, s.requests.completed);
    // Each class is judged by its own SLO (the scenario has no [slo] of its own).
    assert_eq!(s.classes[0].slo_ttft_ms, Some(600.0));
    assert_eq!(s.classes[2].slo_ttft_ms, None);
    assert_eq!(s.classes[2].slo_tpot_ms, Some(100.0));
    let json = s.to_json();
    assert!(
        json.contains("\"classes\": ["),
        "summary.json lists the classes"
    );
    assert!(s.to_markdown().contains("## Classes"));
}

#[test]
fn priority_moves_waiting_from_the_interactive_class_to_the_batch_class() {
    // One H100 for traffic sized for three or four: queues build up, and the order of the waiting
    // queue decides who waits. Only the priorities differ between the two runs: each class draws from
    // its own stream, so the open-loop batch jobs are the same ones (the chat sessions' later turns
    // follow completions, so a turn or two more or fewer can fall inside the window).
    let overloaded = ["workers.0.count=1"];
    let (with, _) = run(&mix(&overloaded));
    let flat: Vec<&str> = overloaded
        .iter()
        .copied()
        .chain([
            "workload.classes.0.priority=0",
            "workload.classes.1.priority=0",
            "workload.classes.2.priority=0",
        ])
        .collect();
    let (without, _) = run(&mix(&flat));
    assert_eq!(with.classes[2].requests, without.classes[2].requests);
    let p95 = |s: &fleetsim::metrics::Summary, k: usize| s.classes[k].ttft_ms.p95;
    assert!(
        p95(&with, 0) < p95(&without, 0),
        "chat first: p95 TTFT {} ms with priority vs {} ms without",
        p95(&with, 0),
        p95(&without, 0)
    );
    assert!(
        p95(&with, 2) > p95(&without, 2),
        "batch last: p95 TTFT {} ms with priority vs {} ms without",
        p95(&with, 2),
        p95(&without, 2)
    );
}

#[test]
fn a_scenario_without_classes_reports_none() {
    let s = Scenario::load(&scenario_path("quickstart.toml"), &[]).unwrap();
    let (sum, _) = run(&s);
    assert!(sum.classes.is_empty());
    assert!(!sum.to_json().contains("\"classes\""));
}

#[test]
fn size_judges_each_class_by_its_own_slo_and_names_the_class_that_misses() {
    let t = TempDir::new("size-mix");
    let out = t.path("out");
    Command::cargo_bin("fleetsim")
        .unwrap()
        .args([
            "size",
            scenario_path("size-chat-mix.toml").to_str().unwrap(),
            "--set",
            "duration=\"40s\"",
            "--out",
            out.to_str().unwrap(),
        ])
        .assert()
        .success();
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("size.json")).unwrap()).unwrap();
    let c = &v["candidates"][0];
    let n = c["workers"].as_u64().unwrap();
    assert!(n >= 2, "{c:#}");
    // The fleet-wide target is only goodput (no [slo]); what fails with one fewer is a class's own.
    let fewer = c["one_fewer_fails"].as_str().unwrap();
    assert!(fewer.contains(": class "), "{fewer}");
    let md = std::fs::read_to_string(out.join("size.md")).unwrap();
    assert!(
        md.contains("class chat: p95 TTFT ≤ 600 ms, p95 TPOT ≤ 40 ms"),
        "{md}"
    );
    assert!(
        md.contains("class batch: p95 TPOT ≤ 100 ms, goodput ≥ 90%"),
        "{md}"
    );
}
