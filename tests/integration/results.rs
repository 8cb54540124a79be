//! The results folder: `requests.parquet` read back with polars against `summary.json`, its CSV copy,
//! `workers.csv`, and `compare`'s one folder per policy.

use std::path::Path;

use assert_cmd::Command;
use fleetsim::metrics::collector::Latency;
use fleetsim::metrics::summary::round;
use fleetsim::report::requests::COLUMNS;
use polars::prelude::*;

use crate::common::{TempDir, scenario_path};

fn fleetsim() -> Command {
    Command::cargo_bin("fleetsim").unwrap()
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn parquet(path: &Path) -> DataFrame {
    ParquetReader::new(std::fs::File::open(path).unwrap())
        .finish()
        .unwrap()
}

fn opt_i64(df: &DataFrame, name: &str) -> Vec<Option<i64>> {
    df.column(name)
        .unwrap()
        .i64()
        .map(|ca| (0..ca.len()).map(|i| ca.get(i)).collect::<Vec<_>>())
        .unwrap()
        .into_iter()
        .collect()
}

fn opt_f64(df: &DataFrame, name: &str) -> Vec<Option<f64>> {
    let ca = df.column(name).unwrap().f64().unwrap();
    (0..ca.len()).map(|i| ca.get(i)).collect()
}

/// Checks one results folder's `requests.parquet` against its `summary.json`; returns the frame.
fn check_requests(dir: &Path) -> DataFrame {
    let summary = json(&dir.join("summary.json"));
    let df = parquet(&dir.join("requests.parquet"));
    // The documented schema, in order, with plain types.
    let names: Vec<String> = df
        .get_column_names()
        .iter()
        .map(|n| n.to_string())
        .collect();
    let expected: Vec<&str> = COLUMNS.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, expected);
    for (name, ty) in COLUMNS {
        let dtype = df.column(name).unwrap().dtype().clone();
        let want = match ty {
            "i64" => DataType::Int64,
            "f64" => DataType::Float64,
            "str" => DataType::String,
            "bool" => DataType::Boolean,
            other => panic!("undocumented type {other}"),
        };
        assert_eq!(dtype, want, "{name}");
    }
    // No request lost: one row per arrival, each id once.
    let arrived = summary["requests"]["arrived"].as_u64().unwrap() as usize;
    assert_eq!(df.height(), arrived);
    let ids = opt_i64(&df, "request_id");
    let mut unique: Vec<i64> = ids.iter().map(|i| i.unwrap()).collect();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), arrived, "request ids are unique");
    // Outcomes match the summary's counts.
    let outcome: Vec<String> = df
        .column("outcome")
        .unwrap()
        .str()
        .map(|ca| (0..ca.len()).map(|i| ca.get(i)).collect::<Vec<_>>())
        .unwrap()
        .into_iter()
        .map(|s| s.unwrap().to_string())
        .collect();
    for what in ["completed", "failed", "rejected"] {
        let n = outcome.iter().filter(|o| *o == what).count() as u64;
        assert_eq!(n, summary["requests"][what].as_u64().unwrap(), "{what}");
    }
    // Times are consistent: arrival ≤ first scheduled ≤ first token ≤ finish, TTFT is the difference.
    let arrival = opt_i64(&df, "arrival_ns");
    let sched = opt_i64(&df, "first_scheduled_ns");
    let first = opt_i64(&df, "first_token_ns");
    let finished = opt_i64(&df, "finished_ns");
    let ttft = opt_i64(&df, "ttft_ns");
    let arrival_s = opt_f64(&df, "arrival_s");
    for i in 0..df.height() {
        let (a, f) = (arrival[i].unwrap(), finished[i].unwrap());
        assert!(a <= f, "row {i}: arrival after finish");
        assert_eq!(arrival_s[i].unwrap(), a as f64 / 1e9);
        if let Some(s) = sched[i] {
            assert!(
                a <= s && s <= f,
                "row {i}: first scheduled outside [arrival, finish]"
            );
        }
        assert_eq!(first[i].is_some(), outcome[i] == "completed", "row {i}");
        if let Some(t) = first[i] {
            assert!(
                sched[i].unwrap() <= t && t <= f,
                "row {i}: first token outside"
            );
            assert_eq!(ttft[i], Some(t - a));
        } else {
            assert_eq!(ttft[i], None);
        }
    }
    // The summary's TTFT percentiles are a histogram's (3 significant digits) over exactly these
    // nanosecond values: the same histogram over the column gives the same bytes...
    // (Steady state: the requests that arrived from the warm-up's end on.)
    let from = (summary["warmup"]["warmup_s"].as_f64().unwrap() * 1e9).round() as i64;
    let mut hist = Latency::default();
    let mut exact: Vec<u64> = ttft
        .iter()
        .zip(&arrival)
        .filter(|(_, a)| a.unwrap() >= from)
        .filter_map(|(t, _)| t.map(|t| t as u64))
        .collect();
    for &t in &exact {
        hist.record(t);
    }
    let p95 = summary["ttft_ms"]["p95"].as_f64().unwrap();
    assert_eq!(round(hist.quantile(0.95) / 1e6, 6), p95);
    assert_eq!(
        exact.len() as u64,
        summary["ttft_ms"]["count"].as_u64().unwrap()
    );
    // ...and the exact p95 of the column (nearest rank) is within the histogram's 0.1% resolution.
    exact.sort_unstable();
    let rank = ((0.95 * exact.len() as f64).ceil() as usize).max(1) - 1;
    let exact_p95 = exact[rank] as f64 / 1e6;
    assert!(
        (exact_p95 / p95 - 1.0).abs() < 2e-3,
        "exact {exact_p95} vs {p95}"
    );
    // Token totals of completed requests match the prefix-cache numbers.
    let prompt = opt_i64(&df, "prompt_tokens");
    let cached = opt_i64(&df, "cached_tokens");
    let (mut p, mut c) = (0u64, 0u64);
    for i in 0..df.height() {
        if outcome[i] == "completed" && arrival[i].unwrap() >= from {
            p += prompt[i].unwrap() as u64;
            c += cached[i].unwrap() as u64;
        }
    }
    assert_eq!(
        p,
        summary["prefix_cache"]["prompt_tokens"].as_u64().unwrap()
    );
    assert_eq!(
        c,
        summary["prefix_cache"]["cached_tokens"].as_u64().unwrap()
    );
    // Recompute tokens per request add up to the summary's total.
    let recomputed: i64 = opt_i64(&df, "recomputed_tokens").iter().flatten().sum();
    assert_eq!(
        recomputed as u64,
        summary["recompute"]["tokens"].as_u64().unwrap()
    );
    df
}

fn check_workers(dir: &Path) {
    let summary = json(&dir.join("summary.json"));
    let mut r = csv::Reader::from_path(dir.join("workers.csv")).unwrap();
    let header: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(header, fleetsim::report::workers::HEADER);
    let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), summary["workers"].as_array().unwrap().len());
    let sum = |col: usize| {
        rows.iter()
            .map(|r| r[col].parse::<u64>().unwrap())
            .sum::<u64>()
    };
    assert_eq!(sum(7), summary["requests"]["completed"].as_u64().unwrap());
    // The step-time share and MFU are the summary's, and MFU stays within the step-time share.
    let column = |name: &str| header.iter().position(|h| h == name).unwrap();
    for (row, w) in rows.iter().zip(summary["workers"].as_array().unwrap()) {
        let busy: f64 = row[column("busy_fraction")].parse().unwrap();
        let mfu: f64 = row[column("mfu")].parse().unwrap();
        assert_eq!(busy, w["busy_fraction"].as_f64().unwrap());
        assert_eq!(mfu, w["mfu"].as_f64().unwrap());
        assert!(
            (0.0..=busy + 1e-6).contains(&mfu),
            "MFU {mfu}, step-time share {busy}"
        );
    }
    // workers.csv is whole-run; the summary's prefix-cache tokens are steady state (after the warm-up):
    // equal without one, a part of the whole with one.
    let whole = summary["warmup"]["warmup_s"].as_f64().unwrap() == 0.0;
    for (col, key) in [(9, "prompt_tokens"), (10, "cached_tokens")] {
        let steady = summary["prefix_cache"][key].as_u64().unwrap();
        if whole {
            assert_eq!(sum(col), steady, "{key}");
        } else {
            assert!(sum(col) >= steady, "{key}");
        }
    }
}

#[test]
fn run_writes_requests_parquet_that_agrees_with_the_summary() {
    let tmp = TempDir::new("results-run");
    let dir = tmp.path("out");
    fleetsim()
        .args([
            "run",
            "--quiet",
            "--requests-csv",
            "--set",
            "duration=\"40s\"",
            // Whole run: the groups' counts are compared with every row of the parquet.
            "--set",
            "metrics.warmup=\"none\"",
            "--out",
        ])
        .arg(&dir)
        .arg(scenario_path("chat-sessions.toml"))
        .assert()
        .success();
    let df = check_requests(&dir);
    check_workers(&dir);
    // Sessions: turn 0 rows equal sessions started.
    let summary = json(&dir.join("summary.json"));
    let turns = opt_i64(&df, "turn");
    let first_turns = turns.iter().filter(|t| **t == Some(0)).count() as u64;
    assert_eq!(first_turns, summary["sessions"]["total"].as_u64().unwrap());
    // TTFT by turn and by prompt length: each group's count and p95 are those of the parquet's rows
    // in that group (turns 4 and later pooled as "4+"; prompt buckets by their lower bounds).
    let ttft = opt_i64(&df, "ttft_ns");
    let prompt = opt_i64(&df, "prompt_tokens");
    let turn_of = |i: usize| {
        turns[i].map(|t| {
            if t >= 4 {
                "4+".to_string()
            } else {
                t.to_string()
            }
        })
    };
    let bounds = [0i64, 512, 2048, 8192, 32768];
    let bucket_of = |i: usize| {
        let p = prompt[i].unwrap();
        let k = bounds.iter().rposition(|&lo| p >= lo).unwrap();
        Some(match bounds.get(k + 1) {
            Some(next) => format!("{}-{}", bounds[k], next - 1),
            None => format!("{}+", bounds[k]),
        })
    };
    for (key, group_of) in [
        (
            "ttft_by_turn_ms",
            &turn_of as &dyn Fn(usize) -> Option<String>,
        ),
        ("ttft_by_prompt_ms", &bucket_of),
    ] {
        let groups = summary[key].as_array().unwrap();
        assert!(
            groups.len() >= 2,
            "{key}: more than one group in this scenario"
        );
        let mut total = 0;
        for g in groups {
            let name = g["group"].as_str().unwrap();
            let mut h = Latency::default();
            for (i, t) in ttft.iter().enumerate() {
                if let Some(t) = *t
                    && group_of(i).as_deref() == Some(name)
                {
                    h.record(t as u64);
                }
            }
            assert_eq!(h.count(), g["count"].as_u64().unwrap(), "{key} {name}");
            assert_eq!(
                round(h.quantile(0.95) / 1e6, 6),
                g["p95"].as_f64().unwrap(),
                "{key} {name}"
            );
            total += h.count();
        }
        assert_eq!(
            total,
            summary["ttft_ms"]["count"].as_u64().unwrap(),
            "{key}"
        );
    }
    // Phases: queue + prefill is TTFT and TTFT + decode is E2E (means, every completed request
    // having been scheduled); shares of E2E accordingly.
    let phase = |name: &str| {
        summary["phases_ms"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["phase"] == name)
            .unwrap()["mean"]
            .as_f64()
            .unwrap()
    };
    assert!((phase("queue") + phase("prefill") - phase("ttft")).abs() < 1e-5);
    assert!((phase("ttft") + phase("decode") - phase("e2e")).abs() < 1e-5);
    assert_eq!(phase("ttft"), summary["ttft_ms"]["mean"].as_f64().unwrap());
    // The CSV copy has the same rows and the same exact times.
    let mut r = csv::Reader::from_path(dir.join("requests.csv")).unwrap();
    let header: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(header, COLUMNS.iter().map(|(n, _)| *n).collect::<Vec<_>>());
    let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), df.height());
    let first = opt_i64(&df, "first_token_ns");
    let arrival_s = opt_f64(&df, "arrival_s");
    for (i, row) in rows.iter().enumerate() {
        let cell = &row[8];
        assert_eq!(cell.parse::<i64>().ok(), first[i], "row {i}");
        assert_eq!(
            row[10].parse::<f64>().unwrap(),
            arrival_s[i].unwrap(),
            "row {i}"
        );
    }
}

fn strs(df: &DataFrame, name: &str) -> Vec<Option<String>> {
    let ca = df.column(name).unwrap().str().unwrap();
    (0..ca.len())
        .map(|i| ca.get(i).map(str::to_string))
        .collect()
}

#[test]
fn requests_name_their_class_model_and_adapter() {
    let tmp = TempDir::new("results-labels");
    let run = |scenario: &str, out: &str| {
        let dir = tmp.path(out);
        fleetsim()
            .args(["run", "--quiet", "--set", "duration=\"20s\"", "--out"])
            .arg(&dir)
            .arg(scenario_path(scenario))
            .assert()
            .success();
        check_requests(&dir)
    };
    // Five classes, each of one model (the class is named after it): every row names both, and they agree.
    let df = run("multi-model-swap.toml", "models");
    let (class, model) = (strs(&df, "class"), strs(&df, "model"));
    assert!(df.height() > 100);
    for (c, m) in class.iter().zip(&model) {
        assert_eq!(c.as_deref().unwrap(), m.as_deref().unwrap());
    }
    let mut models: Vec<&str> = model.iter().map(|m| m.as_deref().unwrap()).collect();
    models.sort_unstable();
    models.dedup();
    assert_eq!(models.len(), 5, "{models:?}");
    assert!(strs(&df, "adapter").iter().all(Option::is_none));
    // One workload asking for 40 adapters `tenant-0` ... `tenant-39`: no class, every row an adapter.
    let df = run("lora-adapters.toml", "adapters");
    assert!(strs(&df, "class").iter().all(Option::is_none));
    let adapters = strs(&df, "adapter");
    for a in &adapters {
        let i: u32 = a
            .as_deref()
            .unwrap()
            .strip_prefix("tenant-")
            .unwrap()
            .parse()
            .unwrap();
        assert!(i < 40);
    }
    // Zipf popularity: the most popular adapter is the first.
    let count = |name: &str| {
        adapters
            .iter()
            .filter(|a| a.as_deref() == Some(name))
            .count()
    };
    assert!(count("tenant-0") > count("tenant-39"));
}

/// A trace whose rows name LoRA adapters (and ranks): the requests carry them, `requests.parquet` names
/// them as the trace does, and the LoRA block counts them.
#[test]
fn trace_rows_name_their_adapters() {
    let tmp = TempDir::new("results-trace-adapters");
    let mut rows = String::new();
    for i in 0..30 {
        let adapter = match i % 3 {
            0 => r#","adapter":"alpha""#.to_string(),
            1 => r#","adapter":"beta","adapter_rank":8"#.to_string(),
            _ => String::new(),
        };
        rows += &format!(
            "{{\"id\":{i},\"arrival\":{}.{},\"input\":200,\"output\":20{adapter}}}\n",
            i / 10,
            i % 10
        );
    }
    std::fs::write(tmp.path("trace.jsonl"), rows).unwrap();
    let scenario = tmp.path("trace-adapters.toml");
    std::fs::write(
        &scenario,
        "name = \"trace-adapters\"\nduration = \"20s\"\n[[workers]]\ncount = 1\ngpu = \"h100\"\n\
         model = \"llama-3.1-8b\"\n[workers.lora]\nmax_loras = 1\n[workload]\nkind = \"trace\"\n\
         path = \"trace.jsonl\"\n",
    )
    .unwrap();
    let dir = tmp.path("out");
    fleetsim()
        .args(["run", "--quiet", "--out"])
        .arg(&dir)
        .arg(&scenario)
        .assert()
        .success();
    let df = check_requests(&dir);
    let ids: Vec<Option<i64>> = df
        .column("request_id")
        .unwrap()
        .i64()
        .unwrap()
        .iter()
        .collect();
    let adapters = strs(&df, "adapter");
    assert_eq!(adapters.len(), 30);
    for (id, a) in ids.into_iter().zip(&adapters) {
        let want = match id.unwrap() % 3 {
            0 => Some("alpha"),
            1 => Some("beta"),
            _ => None,
        };
        assert_eq!(a.as_deref(), want, "request {id:?}");
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let lora = &summary["lora"];
    assert_eq!(lora["requests_with_adapter"], 20, "{lora}");
    assert_eq!(lora["adapters_requested"], 2, "{lora}");
    assert!(lora["gpu_loads"].as_u64().unwrap() >= 2, "{lora}");
}

#[test]
fn compare_writes_requests_parquet_per_policy_with_retried_requests() {
    let tmp = TempDir::new("results-compare");
    let dir = tmp.path("out");
    fleetsim()
        .args([
            "compare",
            "--policies",
            "round_robin,session_affinity",
            "--out",
        ])
        .arg(&dir)
        .arg(scenario_path("failure-sticky-crash.toml"))
        .assert()
        .success();
    let mut retried = 0;
    for policy in ["round_robin", "session_affinity"] {
        let sub = dir.join(policy);
        let df = check_requests(&sub);
        check_workers(&sub);
        assert!(!sub.join("requests.csv").exists(), "CSV only on request");
        // Rows with retries are the summary's retried requests.
        let n = opt_i64(&df, "retries")
            .iter()
            .filter(|r| r.unwrap() > 0)
            .count() as u64;
        let summary = json(&sub.join("summary.json"));
        assert_eq!(n, summary["requests"]["retried"].as_u64().unwrap());
        retried += n;
    }
    assert!(
        retried > 0,
        "the crash retries some requests, so those rows are exercised"
    );
    assert!(dir.join("comparison.json").exists());
}

#[test]
fn requests_csv_needs_an_output_folder() {
    let out = fleetsim()
        .args(["run", "--requests-csv"])
        .arg(scenario_path("quickstart.toml"))
        .assert()
        .failure();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(stderr.contains("--out"), "{stderr}");
}

#[test]
fn progress_never_reaches_a_piped_stderr() {
    // assert_cmd pipes stderr, so it is not a terminal: no bar, no carriage return, no escape sequence,
    // although neither command is given --quiet.
    let tmp = TempDir::new("results-progress");
    for args in [
        vec!["run", "--set", "duration=\"30s\""],
        vec![
            "compare",
            "--policies",
            "round_robin,least_outstanding",
            "--set",
            "duration=\"30s\"",
            "--out",
        ],
    ] {
        let mut cmd = fleetsim();
        cmd.args(&args);
        if args[0] == "compare" {
            cmd.arg(tmp.path("cmp"));
        }
        let out = cmd.arg(scenario_path("quickstart.toml")).assert().success();
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
        assert!(
            !stderr.contains("arrival window")
                && !stderr.contains("requests done")
                && !stderr.contains('\r')
                && !stderr.contains('\u{1b}'),
            "{}: progress output on a piped stderr: {stderr:?}",
            args[0]
        );
    }
}

#[test]
fn the_same_seed_gives_the_same_parquet_and_worker_bytes() {
    let tmp = TempDir::new("results-same-bytes");
    let mut bytes = Vec::new();
    for run in ["a", "b"] {
        let dir = tmp.path(run);
        fleetsim()
            .args(["run", "--quiet", "--set", "duration=\"20s\"", "--out"])
            .arg(&dir)
            .arg(scenario_path("quickstart.toml"))
            .assert()
            .success();
        bytes.push(
            [
                "requests.parquet",
                "workers.csv",
                "report.html",
                "plot-ttft-cdf.svg",
            ]
            .map(|f| std::fs::read(dir.join(f)).unwrap()),
        );
    }
    assert!(bytes[0] == bytes[1], "two runs with one seed differ");
}

#[test]
fn compare_shows_autoscaler_rows_only_for_an_autoscaled_fleet() {
    let tmp = TempDir::new("results-compare-fleet");
    let dir = tmp.path("out");
    fleetsim()
        .args([
            "compare",
            "--policies",
            "round_robin,least_outstanding",
            "--set",
            "duration=\"20m\"",
            "--out",
        ])
        .arg(&dir)
        .arg(scenario_path("autoscale-diurnal.toml"))
        .assert()
        .success();
    let md = std::fs::read_to_string(dir.join("comparison.md")).unwrap();
    let csv = std::fs::read_to_string(dir.join("comparison.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "replica_hours").unwrap();
    for (i, policy) in ["round_robin", "least_outstanding"].iter().enumerate() {
        let summary = json(&dir.join(policy).join("summary.json"));
        let hours = summary["autoscaler"]["replica_hours"].as_f64().unwrap();
        let row: Vec<&str> = csv.lines().nth(i + 1).unwrap().split(',').collect();
        let cell: f64 = row[col].parse().unwrap();
        assert!((cell - hours).abs() < 1e-3, "{policy}: {cell} vs {hours}");
    }
    assert!(md.contains("| replica_hours ↓ |"), "{md}");
    assert!(!md.contains("swaps"), "no models: no swap rows\n{md}");
    assert!(!header.contains(&"lora_gpu_loads"));

    let plain = tmp.path("plain");
    fleetsim()
        .args([
            "compare",
            "--policies",
            "round_robin,least_outstanding",
            "--out",
        ])
        .arg(&plain)
        .arg(scenario_path("quickstart.toml"))
        .assert()
        .success();
    let md = std::fs::read_to_string(plain.join("comparison.md")).unwrap();
    for (k, _) in fleetsim::metrics::headline::FLEET_METRICS {
        assert!(!md.contains(&format!("| {k} ")), "{k} shown\n{md}");
    }
}

/// The SLO planner's run, as a user reads it: its targets (from the scenario's `[slo]`) in
/// `summary.json` and `summary.md`, no per-replica target, and replica changes only at its 180-s
/// adjustments.
#[test]
fn the_slo_planner_reports_its_targets_and_adjusts_every_180_s() {
    let tmp = TempDir::new("results-slo-planner");
    let dir = tmp.path("out");
    fleetsim()
        .args(["run", "--quiet", "--set", "duration=\"12m\"", "--out"])
        .arg(&dir)
        .arg(scenario_path("autoscale-diurnal-slo.toml"))
        .assert()
        .success();
    let summary = json(&dir.join("summary.json"));
    let a = &summary["autoscaler"];
    assert_eq!(a["metric"], "slo");
    assert!(a.get("target").is_none(), "{a}");
    assert_eq!(
        (a["planner_ttft_ms"].as_f64(), a["planner_itl_ms"].as_f64()),
        (Some(500.0), Some(50.0))
    );
    let changes = a["changes"].as_array().unwrap();
    assert!(!changes.is_empty(), "{a}");
    for c in changes {
        let at = c["at_s"].as_f64().unwrap();
        assert!(at > 0.0 && at % 180.0 == 0.0, "a change at {at} s");
    }
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(md.contains("| slo / TTFT 500 ms, ITL 50 ms |"), "{md}");

    // With Dynamo's load loop the count moves between adjustments, on its 5-s ticks.
    let loaded = tmp.path("load");
    fleetsim()
        .args(["run", "--quiet", "--set", "duration=\"12m\""])
        .args(["--set", "autoscaler.planner.load_scaling=true", "--out"])
        .arg(&loaded)
        .arg(scenario_path("autoscale-diurnal-slo.toml"))
        .assert()
        .success();
    let a = json(&loaded.join("summary.json"))["autoscaler"].clone();
    let at: Vec<f64> = a["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["at_s"].as_f64().unwrap())
        .collect();
    assert!(at.iter().all(|t| t % 5.0 == 0.0), "{at:?}");
    assert!(at.iter().any(|t| t % 180.0 != 0.0), "{at:?}");
}
