//! `fleetsim sweep` and `fleetsim merge`: sharded-and-merged and killed-and-resumed sweeps write the same
//! bytes as a sweep that ran through; bad grids and mixed shards are refused with nothing written.

use std::collections::BTreeMap;
use std::path::Path;

use assert_cmd::Command;

use crate::common::{TempDir, scenario_path};

fn fleetsim() -> Command {
    Command::cargo_bin("fleetsim").unwrap()
}

/// Every file under `dir`, by relative path.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// A small, quick sweep of the quickstart scenario: 2 counts × 2 policies, 2 replicas.
fn sweep_args(out: &Path) -> Vec<String> {
    [
        "sweep",
        scenario_path("quickstart.toml").to_str().unwrap(),
        "--set",
        "duration=\"15s\"",
        "--set",
        "workload.rate=15",
        "--grid",
        "workers.0.count=2,3",
        "--grid",
        "router.policy=round_robin,least_outstanding",
        "--replicas",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[test]
fn sharded_and_merged_equals_unsharded_byte_for_byte() {
    let t = TempDir::new("sweep-shard");
    let whole = t.path("whole");
    fleetsim().args(sweep_args(&whole)).assert().success();
    let got = files(&whole);
    for name in [
        "sweep.json",
        "sweep.parquet",
        "sweep.csv",
        "sweep.md",
        "points/000003.json",
    ] {
        assert!(got.contains_key(name), "{name} missing: {:?}", got.keys());
    }
    assert!(got.keys().any(|k| k.ends_with(".svg")), "a plot is written");
    let csv = String::from_utf8(got["sweep.csv"].clone()).unwrap();
    assert_eq!(csv.lines().count(), 1 + 4, "{csv}");
    assert!(
        csv.starts_with("point,workers.0.count,router.policy,replicas,completed,completed_sd,")
    );
    // Grid order: the last key varies fastest.
    let second: Vec<&str> = csv.lines().nth(2).unwrap().split(',').take(3).collect();
    assert_eq!(second, ["1", "2", "least_outstanding"]);

    let mut shards = Vec::new();
    for i in 0..3 {
        let dir = t.path(&format!("shard{i}"));
        let mut args = sweep_args(&dir);
        args.extend(["--shard".into(), format!("{i}/3")]);
        fleetsim().args(args).assert().success();
        assert!(
            !dir.join("sweep.csv").exists(),
            "a shard writes no final table"
        );
        shards.push(dir);
    }
    let merged = t.path("merged");
    let mut args = vec![
        "merge".to_string(),
        "--out".into(),
        merged.display().to_string(),
    ];
    args.extend(shards.iter().map(|d| d.display().to_string()));
    fleetsim().args(args).assert().success();
    assert_eq!(files(&merged), got);
}

#[test]
fn a_killed_sweep_resumed_equals_one_that_ran_through() {
    let t = TempDir::new("sweep-resume");
    let straight = t.path("straight");
    fleetsim().args(sweep_args(&straight)).assert().success();

    let resumed = t.path("resumed");
    let mut args = sweep_args(&resumed);
    args.extend([
        "--threads".into(),
        "1".into(),
        "--stop-after".into(),
        "1".into(),
    ]);
    fleetsim().args(args).assert().failure();
    assert_eq!(
        std::fs::read_dir(resumed.join("points")).unwrap().count(),
        1,
        "one point finished before the stop"
    );
    // Without --resume the finished points are not silently redone or overwritten.
    let out = fleetsim().args(sweep_args(&resumed)).assert().failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains("--resume"), "{err}");
    // A temporary file left by a kill mid-write is ignored.
    std::fs::write(
        resumed.join("points").join(".000002.json.tmp123"),
        b"{\"half",
    )
    .unwrap();
    let mut args = sweep_args(&resumed);
    args.push("--resume".into());
    fleetsim().args(args.clone()).assert().success();
    std::fs::remove_file(resumed.join("points").join(".000002.json.tmp123")).unwrap();
    assert_eq!(files(&resumed), files(&straight));

    // A lost point (node lost) is run again by --resume.
    std::fs::remove_file(resumed.join("points/000002.json")).unwrap();
    std::fs::remove_file(resumed.join("sweep.csv")).unwrap();
    fleetsim().args(args).assert().success();
    assert_eq!(files(&resumed), files(&straight));
}

fn refused(args: &[&str], needle: &str) {
    let out = fleetsim().args(args).assert().failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(err.contains(needle), "{args:?}: {err}");
}

#[test]
fn bad_grids_are_refused_with_nothing_written() {
    let t = TempDir::new("sweep-bad");
    let out = t.path("out");
    let q = scenario_path("quickstart.toml");
    let q = q.to_str().unwrap();
    let o = out.to_str().unwrap();
    refused(&["sweep", q, "--out", o], "at least one --grid");
    refused(
        &["sweep", q, "--out", o, "--grid", "workers.0.cont=1,2"],
        "cont",
    );
    refused(
        &["sweep", q, "--out", o, "--grid", "workers.0.count=2,four"],
        "workers.0.count",
    );
    refused(
        &["sweep", q, "--out", o, "--grid", "workload.rate="],
        "no values",
    );
    refused(
        &[
            "sweep",
            q,
            "--out",
            o,
            "--grid",
            "workload.rate=1,2",
            "--shard",
            "2/2",
        ],
        "out of range",
    );
    assert!(!out.exists(), "nothing written");
}

#[test]
fn shards_of_different_sweeps_are_not_merged() {
    let t = TempDir::new("sweep-mixed");
    let q = scenario_path("quickstart.toml");
    let run = |dir: &Path, rates: &str| {
        fleetsim()
            .args([
                "sweep",
                q.to_str().unwrap(),
                "--set",
                "duration=\"5s\"",
                "--grid",
                rates,
                "--shard",
                "0/2",
                "--out",
                dir.to_str().unwrap(),
            ])
            .assert()
            .success();
    };
    run(&t.path("a"), "workload.rate=5,10");
    run(&t.path("b"), "workload.rate=5,20");
    let merged = t.path("m");
    refused(
        &[
            "merge",
            "--out",
            merged.to_str().unwrap(),
            t.path("a").to_str().unwrap(),
            t.path("b").to_str().unwrap(),
        ],
        "different sweeps",
    );
    // One shard alone is incomplete: refused too.
    refused(
        &[
            "merge",
            "--out",
            merged.to_str().unwrap(),
            t.path("a").to_str().unwrap(),
        ],
        "in none of the shards",
    );
    assert!(!merged.exists(), "nothing written");
}

/// More workers never make p95 TTFT worse beyond the replicas' spread, on bundled scenarios (short
/// windows): adding capacity to a fleet can only shorten queues.
#[test]
fn more_workers_never_worsen_p95_ttft_beyond_the_seeds_spread() {
    let t = TempDir::new("sweep-monotone");
    for (name, extra) in [
        ("quickstart.toml", vec!["workload.rate=30"]),
        ("chat-sessions.toml", vec![]),
        ("hot-prefix.toml", vec![]),
    ] {
        let dir = t.path(name);
        let mut args = vec![
            "sweep".to_string(),
            scenario_path(name).display().to_string(),
            "--set".into(),
            "duration=\"30s\"".into(),
            "--grid".into(),
            "workers.0.count=2,4,8".into(),
            "--replicas".into(),
            "3".into(),
            "--out".into(),
            dir.display().to_string(),
        ];
        for e in extra {
            args.extend(["--set".to_string(), e.to_string()]);
        }
        fleetsim().args(args).assert().success();
        let csv = std::fs::read_to_string(dir.join("sweep.csv")).unwrap();
        let mut lines = csv.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let col = |k: &str| header.iter().position(|h| *h == k).unwrap();
        let (m, sd) = (col("ttft_p95_ms"), col("ttft_p95_ms_sd"));
        let rows: Vec<(f64, f64)> = lines
            .map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                (f[m].parse().unwrap(), f[sd].parse().unwrap())
            })
            .collect();
        assert_eq!(rows.len(), 3);
        for w in rows.windows(2) {
            let ((fewer, sd_a), (more, sd_b)) = (w[0], w[1]);
            assert!(
                more <= fewer + 2.0 * sd_a.max(sd_b) + 1e-9,
                "{name}: p95 TTFT {more} ms with more workers vs {fewer} ms (sd {sd_a}, {sd_b})"
            );
        }
    }
}
