//! `report.html` and the plots of `run --out` and `compare --out`: self-contained, with the summary's
//! numbers and every plot.

use std::path::Path;

use assert_cmd::Command;

use crate::common::{TempDir, scenario_path};

fn fleetsim() -> Command {
    Command::cargo_bin("fleetsim").unwrap()
}

const RUN_PLOTS: [&str; 7] = [
    "plot-ttft-cdf.svg",
    "plot-ttft-over-time.svg",
    "plot-hit-rate-over-time.svg",
    "plot-ttft-by-turn.svg",
    "plot-recompute-by-cause.svg",
    "plot-worker-share.svg",
    "plot-kv-utilisation.svg",
];

/// The page loads nothing: no script, and no attribute or style that names a URL.
fn assert_self_contained(page: &str) {
    let lower = page.to_lowercase();
    assert!(!lower.contains("<script"), "a script in the page");
    for pattern in [
        "src=",
        "url(",
        "@import",
        "<link",
        "href=\"http",
        "href='http",
    ] {
        assert!(!lower.contains(pattern), "the page has {pattern}");
    }
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn a_run_with_faults_writes_its_plots_and_a_self_contained_page() {
    let tmp = TempDir::new("report-page-run");
    let dir = tmp.path("out");
    fleetsim()
        .args(["run", "--quiet", "--set", "duration=\"9m\"", "--out"])
        .arg(&dir)
        .arg(scenario_path("failure-rack-loss.toml"))
        .assert()
        .success();
    let page = read(&dir, "report.html");
    assert_self_contained(&page);
    for plot in RUN_PLOTS {
        let svg = read(&dir, plot);
        assert!(svg.starts_with("<svg"), "{plot}");
        // Each plot is inlined in the page, whole.
        assert!(page.contains(svg.trim_end()), "{plot} is not in the page");
    }
    assert_eq!(page.matches("<svg").count(), RUN_PLOTS.len());
    // The headline carries summary.json's p95 TTFT, to two decimals.
    let summary: serde_json::Value = serde_json::from_str(&read(&dir, "summary.json")).unwrap();
    let p95 = summary["ttft_ms"]["p95"].as_f64().unwrap();
    assert!(
        page.contains(&format!("<td>{p95:.2}</td>")),
        "p95 {p95} missing"
    );
    // The scenario has faults: the recovery table and the fault markers are there.
    let faults = summary["recovery"].as_array().unwrap();
    assert!(!faults.is_empty());
    assert!(page.contains("Recovery after faults"));
    let over_time = read(&dir, "plot-ttft-over-time.svg");
    for f in faults {
        let label = f["fault"].as_str().unwrap();
        assert!(over_time.contains(label), "fault {label} not marked");
    }
}

#[test]
fn a_run_without_faults_has_no_recovery_table() {
    let tmp = TempDir::new("report-page-nofault");
    let dir = tmp.path("out");
    fleetsim()
        .args(["run", "--quiet", "--set", "duration=\"20s\"", "--out"])
        .arg(&dir)
        .arg(scenario_path("quickstart.toml"))
        .assert()
        .success();
    let page = read(&dir, "report.html");
    assert_self_contained(&page);
    assert!(!page.contains("Recovery after faults"));
}

#[test]
fn compare_writes_one_cdf_line_per_policy_and_links_each_run_page() {
    let tmp = TempDir::new("report-page-compare");
    let dir = tmp.path("out");
    fleetsim()
        .args([
            "compare",
            "--quiet",
            "--policies",
            "round_robin,least_outstanding",
            "--set",
            "duration=\"20s\"",
            "--out",
        ])
        .arg(&dir)
        .arg(scenario_path("quickstart.toml"))
        .assert()
        .success();
    let page = read(&dir, "report.html");
    assert_self_contained(&page);
    let cdf = read(&dir, "plot-ttft-cdf.svg");
    assert!(page.contains(cdf.trim_end()));
    for policy in ["round_robin", "least_outstanding"] {
        // The legend names each variant; the table links its own page, which exists.
        assert!(cdf.contains(policy), "{policy} not in the CDF legend");
        assert!(page.contains(&format!("href=\"{policy}/report.html\"")));
        assert!(dir.join(policy).join("report.html").is_file());
    }
}
