//! `fleetsim report`, the energy numbers, KV utilisation over time and progress bars: a folder rebuilds
//! its own page byte for byte, several folders make one comparison, bad folders are refused by name,
//! and the energy and KV figures keep their invariants.

use std::path::Path;

use assert_cmd::Command;

use crate::common::{TempDir, scenario_path};

fn fleetsim() -> Command {
    Command::cargo_bin("fleetsim").unwrap()
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `run SCENARIO --out dir` with overrides, quietly.
fn run_into(scenario: &str, dir: &Path, set: &[&str]) {
    let mut cmd = fleetsim();
    cmd.args(["run", "--quiet", "--out"])
        .arg(dir)
        .arg(scenario_path(scenario));
    for s in set {
        cmd.args(["--set", s]);
    }
    cmd.assert().success();
}

/// The page and plot files of a results folder, by name.
fn page_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().to_string();
            n == "report.html" || (n.starts_with("plot-") && n.ends_with(".svg"))
        })
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().to_string(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn report_rebuilds_a_runs_own_page_and_plots_byte_for_byte() {
    let tmp = TempDir::new("report-rebuild");
    // Sessions (TTFT by turn) and a crash (fault markers, recovery table) in one short run.
    for (scenario, set) in [
        ("quickstart.toml", vec!["duration=\"30s\""]),
        ("failure-sticky-crash.toml", vec!["duration=\"6m\""]),
        // Replicas over time (an autoscaled run's extra columns and plot).
        ("autoscale-diurnal.toml", vec!["duration=\"4m\""]),
    ] {
        let run = tmp.path(scenario);
        run_into(scenario, &run, &set);
        let original = page_files(&run);
        assert!(original.len() >= 8, "{scenario}: {original:?}");
        let replicas_plot = original.iter().any(|f| f.0 == "plot-replicas.svg");
        assert_eq!(
            replicas_plot,
            scenario.starts_with("autoscale"),
            "{scenario}"
        );
        let rebuilt = tmp.path(&format!("{scenario}-rebuilt"));
        fleetsim()
            .arg("report")
            .arg(&run)
            .arg("--out")
            .arg(&rebuilt)
            .assert()
            .success();
        let again = page_files(&rebuilt);
        assert_eq!(
            original.iter().map(|f| &f.0).collect::<Vec<_>>(),
            again.iter().map(|f| &f.0).collect::<Vec<_>>()
        );
        for (a, b) in original.iter().zip(&again) {
            assert!(a.1 == b.1, "{scenario}: {} differs when rebuilt", a.0);
        }
        // In place, the folder's files come out the same.
        fleetsim().arg("report").arg(&run).assert().success();
        assert_eq!(page_files(&run), original);
    }
}

#[test]
fn report_compares_several_folders_on_one_page() {
    let tmp = TempDir::new("report-two");
    let (a, b) = (tmp.path("monday"), tmp.path("tuesday"));
    run_into(
        "quickstart.toml",
        &a,
        &["duration=\"20s\"", "router.policy=\"round_robin\""],
    );
    run_into(
        "quickstart.toml",
        &b,
        &["duration=\"20s\"", "router.policy=\"least_outstanding\""],
    );
    let before = std::fs::read(a.join("report.html")).unwrap();
    let out = tmp.path("cmp");
    fleetsim()
        .arg("report")
        .args([&a, &b])
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    for needle in [
        "href=\"../monday/report.html\"",
        "href=\"../tuesday/report.html\"",
        "round_robin",
        "least_outstanding",
    ] {
        assert!(page.contains(needle), "no {needle} in the comparison page");
    }
    let cdf = std::fs::read_to_string(out.join("plot-ttft-cdf.svg")).unwrap();
    assert!(cdf.contains("monday") && cdf.contains("tuesday"));
    // The compared folders are not written to.
    assert_eq!(std::fs::read(a.join("report.html")).unwrap(), before);
}

#[test]
fn report_refuses_missing_foreign_and_broken_folders_by_name() {
    let tmp = TempDir::new("report-bad");
    let missing = tmp.path("nowhere");
    let err = fleetsim().arg("report").arg(&missing).assert().failure();
    let e = String::from_utf8_lossy(&err.get_output().stderr).to_string();
    assert!(
        e.contains("nowhere") && e.contains("no such results folder"),
        "{e}"
    );

    let (a, b) = (tmp.path("a"), tmp.path("b"));
    run_into("quickstart.toml", &a, &["duration=\"10s\""]);
    run_into("quickstart.toml", &b, &["duration=\"20s\""]);
    let page = std::fs::read(a.join("report.html")).unwrap();
    // b's requests in a's folder: refused, naming both files, nothing written.
    std::fs::copy(b.join("requests.parquet"), a.join("requests.parquet")).unwrap();
    let err = fleetsim().arg("report").arg(&a).assert().failure();
    let e = String::from_utf8_lossy(&err.get_output().stderr).to_string();
    assert!(
        e.contains("requests.parquet does not belong to") && e.contains("summary.json"),
        "{e}"
    );
    assert_eq!(std::fs::read(a.join("report.html")).unwrap(), page);
    // Not a parquet file at all.
    std::fs::write(a.join("requests.parquet"), b"not parquet").unwrap();
    let err = fleetsim().arg("report").arg(&a).assert().failure();
    let e = String::from_utf8_lossy(&err.get_output().stderr).to_string();
    assert!(
        e.contains("requests.parquet") && e.contains("not a parquet file"),
        "{e}"
    );
    // No parquet.
    std::fs::remove_file(a.join("requests.parquet")).unwrap();
    let err = fleetsim().arg("report").arg(&a).assert().failure();
    let e = String::from_utf8_lossy(&err.get_output().stderr).to_string();
    assert!(
        e.contains("requests.parquet") && e.contains("cannot read"),
        "{e}"
    );
    // Several folders need --out.
    let err = fleetsim().arg("report").args([&b, &b]).assert().failure();
    let e = String::from_utf8_lossy(&err.get_output().stderr).to_string();
    assert!(e.contains("--out"), "{e}");
}

#[test]
fn energy_and_kv_utilisation_keep_their_invariants() {
    let tmp = TempDir::new("energy-kv");
    let dir = tmp.path("run");
    run_into("quickstart.toml", &dir, &["duration=\"30s\""]);
    let s = json(&dir.join("summary.json"));
    let e = &s["energy"];
    let simulated = s["sim"]["simulated_s"].as_f64().unwrap();
    let joules = e["joules"].as_f64().unwrap();
    // quickstart: H100s (TDP 700 W, idle 15% = 105 W), one GPU per worker.
    let workers = s["workers"].as_array().unwrap();
    let gpus: u64 = workers.iter().map(|w| w["tp"].as_u64().unwrap()).sum();
    assert_eq!(e["gpus"].as_u64().unwrap(), gpus);
    let avg = e["fleet_average_power_w"].as_f64().unwrap();
    assert!(
        avg >= 105.0 * gpus as f64 && avg <= 700.0 * gpus as f64,
        "{avg} W"
    );
    assert!((avg - joules / simulated).abs() < 1e-2);
    // The fleet's energy is its workers' energy.
    let sum: f64 = workers
        .iter()
        .map(|w| w["energy_j"].as_f64().unwrap())
        .sum();
    assert!(
        (sum - joules).abs() < 1e-2 * workers.len() as f64,
        "{sum} vs {joules}"
    );
    let completed = s["requests"]["completed"].as_f64().unwrap();
    let per_request = e["per_completed_request_j"].as_f64().unwrap();
    assert!((per_request - joules / completed).abs() < 1e-5);
    // A worker's energy lies between idle and TDP power over the run.
    for w in workers {
        let j = w["energy_j"].as_f64().unwrap();
        let tp = w["tp"].as_f64().unwrap();
        assert!(j >= 105.0 * tp * simulated - 1.0 && j <= 700.0 * tp * simulated + 1.0);
    }

    // KV utilisation per window: fractions, the fullest worker at least the mean, and never above the
    // largest peak any worker reached (a time average cannot exceed the peak).
    let peak = workers
        .iter()
        .map(|w| w["kv_peak_fraction"].as_f64().unwrap())
        .fold(0.0, f64::max);
    let mut r = csv::Reader::from_path(dir.join("timeseries.csv")).unwrap();
    let head = r.headers().unwrap().clone();
    let col = |n: &str| head.iter().position(|h| h == n).unwrap();
    let (mean_c, max_c) = (col("kv_util_mean"), col("kv_util_max"));
    let mut seen = 0;
    for rec in r.records() {
        let rec = rec.unwrap();
        let mean: f64 = rec[mean_c].parse().unwrap();
        let max: f64 = rec[max_c].parse().unwrap();
        assert!((0.0..=1.0).contains(&mean) && mean <= max + 1e-9 && max <= peak + 1e-6);
        seen += usize::from(mean > 0.0);
    }
    assert!(seen > 0, "a loaded fleet holds KV blocks");
    // The workers.csv energy column is the summary's.
    let mut r = csv::Reader::from_path(dir.join("workers.csv")).unwrap();
    let energy_c = r
        .headers()
        .unwrap()
        .iter()
        .position(|h| h == "energy_j")
        .unwrap();
    for (rec, w) in r.records().zip(workers) {
        let v: f64 = rec.unwrap()[energy_c].parse().unwrap();
        assert_eq!(v, w["energy_j"].as_f64().unwrap());
    }
}

#[test]
fn sweep_shows_no_progress_on_a_piped_stderr() {
    // assert_cmd pipes stderr, so it is not a terminal: no bar although --quiet is not given.
    let tmp = TempDir::new("progress-sweep");
    let out = fleetsim()
        .args([
            "sweep",
            "--grid",
            "router.policy=round_robin,random",
            "--set",
            "duration=\"10s\"",
            "--out",
        ])
        .arg(tmp.path("sw"))
        .arg(scenario_path("quickstart.toml"))
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(
        !stderr.contains("points |") && !stderr.contains('\r') && !stderr.contains('\u{1b}'),
        "progress output on a piped stderr: {stderr:?}"
    );
}
