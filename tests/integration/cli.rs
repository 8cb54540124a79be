//! The command line, as a user runs it.

use assert_cmd::Command;
use clap::CommandFactory;

use crate::common::scenario_path;

fn fleetsim() -> Command {
    Command::cargo_bin("fleetsim").unwrap()
}

#[test]
fn clap_definition_is_valid() {
    fleetsim::cli::Cli::command().debug_assert();
}

/// Every subcommand says what it does and every argument (positional, option or flag, hidden ones
/// included) has a help text: `fleetsim X --help` leaves nothing to guess. clap's own `--help` and
/// `--version` are exempt.
#[test]
fn every_subcommand_and_argument_has_help_text() {
    fn undocumented(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
        for arg in cmd.get_arguments() {
            let own = matches!(arg.get_id().as_str(), "help" | "version");
            if !own && arg.get_help().is_none() && arg.get_long_help().is_none() {
                missing.push(format!("{path} {}", arg.get_id()));
            }
        }
        // clap's own `help` subcommand (and the copies of the tree under it) is exempt.
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let sub_path = format!("{path} {}", sub.get_name());
            if sub.get_about().is_none() && sub.get_long_about().is_none() {
                missing.push(format!("{sub_path} (the subcommand itself)"));
            }
            undocumented(sub, &sub_path, missing);
        }
    }
    // The walk finds what it looks for: an undocumented flag, and a nested subcommand without about.
    let mut bare = clap::Command::new("x")
        .arg(clap::Arg::new("said").long("said").help("documented"))
        .arg(clap::Arg::new("bare").long("bare"))
        .subcommand(
            clap::Command::new("outer")
                .about("documented")
                .subcommand(clap::Command::new("inner")),
        );
    bare.build();
    let mut missing = Vec::new();
    undocumented(&bare, "x", &mut missing);
    assert_eq!(missing, ["x bare", "x outer inner (the subcommand itself)"]);

    let mut cmd = fleetsim::cli::Cli::command();
    cmd.build();
    let mut missing = Vec::new();
    undocumented(&cmd, "fleetsim", &mut missing);
    assert!(missing.is_empty(), "no help text: {missing:#?}");
    // The walk reaches the nested subcommands and their flattened arguments.
    let convert = cmd
        .find_subcommand("trace")
        .and_then(|t| t.find_subcommand("convert"))
        .expect("trace convert");
    assert!(convert.get_arguments().any(|a| a.get_id() == "speedup"));
}

#[test]
fn every_bundled_scenario_validates() {
    for entry in std::fs::read_dir(scenario_path("")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            fleetsim().arg("validate").arg(&path).assert().success();
        }
    }
}

/// `fleetsim run --quiet <extra> --set duration="20s" --out <dir> scenarios/quickstart.toml`, which
/// must succeed.
fn run_quickstart_for_20s(dir: &std::path::Path, extra: &[&str]) -> std::process::Output {
    fleetsim()
        .args(["run", "--quiet"])
        .args(extra)
        .args(["--set", "duration=\"20s\"", "--out"])
        .arg(dir)
        .arg(scenario_path("quickstart.toml"))
        .assert()
        .success()
        .get_output()
        .clone()
}

#[test]
fn run_writes_results_and_prints_the_summary() {
    let dir = std::env::temp_dir().join(format!("fleetsim-cli-test-{}", std::process::id()));
    let out = run_quickstart_for_20s(&dir, &[]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("TTFT"), "{stdout}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    for key in [
        "scenario",
        "policy",
        "seed",
        "requests",
        "ttft_ms",
        "tpot_ms",
        "e2e_ms",
        "queue_ms",
        "throughput",
        "goodput",
        "prefix_cache",
        "recompute",
        "preemptions",
        "workers",
        "sim",
    ] {
        assert!(summary.get(key).is_some(), "summary.json lacks {key}");
    }
    assert!(summary["recompute"]["by_cause"]["misrouted"]["tokens"].is_u64());
    assert!(dir.join("summary.md").exists() && dir.join("run_info.json").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `run --profile` breaks the wall time down by phase and counts the fast path's steps: applied in bulk,
/// planned, and in how many runs (a run applies at most what it planned, and plans at least one step).
#[test]
fn run_profile_prints_the_phases_and_the_fast_paths_counts() {
    let dir = std::env::temp_dir().join(format!("fleetsim-cli-profile-{}", std::process::id()));
    let out = run_quickstart_for_20s(&dir, &["--profile"]);
    let stderr = String::from_utf8(out.stderr).unwrap();
    for phase in [
        "routing",
        "worker steps",
        "KV bookkeeping",
        "metrics",
        "event loop",
        "total",
    ] {
        assert!(stderr.contains(phase), "no {phase} in {stderr}");
    }
    let counts = stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("of which "))
        .unwrap_or_else(|| panic!("no fast-path line in {stderr}"));
    let numbers: Vec<u64> = counts
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .map(|w| w.parse().unwrap())
        .collect();
    let [applied, planned, runs] = numbers[..] else {
        panic!("expected three counts in {counts:?}");
    };
    assert!(applied > 0, "{counts}");
    assert!(
        applied <= planned && runs <= planned && runs > 0,
        "{counts}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `run_info.json` says where the numbers came from: version, commit, date, seed, profiles, `[meta]`,
/// and the resolved scenario.
#[test]
fn run_info_carries_provenance_and_meta_notes() {
    let base = std::env::temp_dir().join(format!("fleetsim-provenance-{}", std::process::id()));
    std::fs::create_dir_all(&base).unwrap();
    let text = std::fs::read_to_string(scenario_path("quickstart.toml")).unwrap();
    let scenario = base.join("with-meta.toml");
    std::fs::write(
        &scenario,
        format!(
            "{text}\n[meta]\nquestion = \"does it run?\"\nconclusion = \"yes\"\nretest_when = [\"new GPU\"]\n"
        ),
    )
    .unwrap();
    let dir = base.join("out");
    fleetsim()
        .args([
            "run",
            "--quiet",
            "--set",
            "duration=\"10s\"",
            "--set",
            "seed=77",
            "--out",
        ])
        .arg(&dir)
        .arg(&scenario)
        .assert()
        .success();
    let info: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run_info.json")).unwrap()).unwrap();
    assert_eq!(info["fleetsim_version"], env!("CARGO_PKG_VERSION"));
    let commit = info["git_commit"].as_str().unwrap();
    assert!(commit == "unknown" || commit.len() == 40, "{commit}");
    // RFC 3339 UTC to the second: 2026-11-30T18:05:00Z.
    let date = info["date_utc"].as_str().unwrap();
    assert!(
        date.len() == 20 && date.ends_with('Z') && &date[10..11] == "T",
        "{date}"
    );
    assert_eq!(info["seed"], 77);
    assert_eq!(info["meta"]["question"], "does it run?");
    assert_eq!(info["meta"]["conclusion"], "yes");
    assert_eq!(info["meta"]["retest_when"], serde_json::json!(["new GPU"]));
    // The resolved scenario: the override applied, defaults filled in.
    assert_eq!(info["scenario"]["seed"], 77);
    assert_eq!(info["scenario"]["duration"], "10s");
    assert!(info["scenario"]["workers"][0]["block_size"].is_u64());
    // One profile entry per distinct configuration, covering every worker once.
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let profiles = info["profiles"].as_array().unwrap();
    let mut covered: Vec<u64> = profiles
        .iter()
        .flat_map(|p| {
            p["workers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| w.as_u64().unwrap())
        })
        .collect();
    covered.sort_unstable();
    let workers = summary["workers"].as_array().unwrap();
    assert_eq!(covered, (0..workers.len() as u64).collect::<Vec<_>>());
    for p in profiles {
        assert!(
            p["calibrated"].is_boolean() && p["profile"].is_string(),
            "{p}"
        );
    }
    // summary.json carries the scenario's notes (they head summary.md and the report page, which
    // `fleetsim report` rebuilds from it) but not the date: it stays byte-deterministic.
    let raw = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    assert!(!raw.contains(date) && raw.contains("does it run?"));
    for page in ["summary.md", "report.html"] {
        let text = std::fs::read_to_string(dir.join(page)).unwrap();
        assert!(text.contains("does it run?"), "{page} shows the question");
    }
    std::fs::remove_dir_all(&base).unwrap();
}

#[test]
fn catalog_lists_the_catalogue() {
    let out = fleetsim().arg("catalog").assert().success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    for id in [
        "a100",
        "h100",
        "h200",
        "b200",
        "l40s",
        "mi300x",
        "llama-3.1-70b",
        "mixtral-8x7b",
        "least_outstanding",
        "3g.40gb",
        "7g.141gb",
    ] {
        assert!(text.contains(id), "catalog lacks {id}");
    }
}

/// Each malformed scenario exits non-zero with one clear line naming the place and field, never a panic.
#[test]
fn malformed_scenarios_give_one_clear_line() {
    let good = std::fs::read_to_string(scenario_path("quickstart.toml")).unwrap();
    let cases: &[(&str, &str, &str)] = &[
        ("count = 4", "count = \"four\"", "`count`"),
        ("count = 4", "count = 0", "`count`"),
        ("rate = 40.0", "rate = -40.0", "`rate`"),
        ("seed = 42", "seed = 42\nspeed = 9", "unknown field `speed`"),
        ("gpu = \"h100\"", "gpu = \"h100x\"", "unknown name `h100x`"),
        (
            "model = \"llama-3.1-8b\"",
            "model = \"llama-9\"",
            "unknown name `llama-9`",
        ),
        (
            "policy = \"least_outstanding\"",
            "policy = \"telepathy\"",
            "unknown name `telepathy`",
        ),
        (
            "duration = \"5m\"",
            "duration = \"5 fortnights\"",
            "invalid duration",
        ),
    ];
    let dir = std::env::temp_dir().join(format!("fleetsim-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (i, (from, to, expect)) in cases.iter().enumerate() {
        assert!(
            good.contains(from),
            "quickstart.toml no longer contains {from}"
        );
        let path = dir.join(format!("bad{i}.toml"));
        std::fs::write(&path, good.replacen(from, to, 1)).unwrap();
        for cmd in ["validate", "run"] {
            let out = fleetsim().arg(cmd).arg(&path).assert().failure().code(1);
            let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
            assert!(
                !stderr.contains("panicked"),
                "{cmd} panicked on {to}: {stderr}"
            );
            assert_eq!(
                stderr.trim_end().lines().count(),
                1,
                "{cmd}: not one line: {stderr}"
            );
            assert!(
                stderr.contains(&format!("bad{i}.toml:")),
                "{cmd}: no file:line in {stderr}"
            );
            assert!(
                stderr.contains(expect),
                "{cmd}: expected {expect} in {stderr}"
            );
        }
    }
    // Zero worker groups.
    let path = dir.join("no-workers.toml");
    let stripped: String = good.split("[[workers]]").next().unwrap().to_string()
        + &good[good.find("[workload]").unwrap()..];
    std::fs::write(&path, stripped).unwrap();
    let out = fleetsim().arg("validate").arg(&path).assert().failure();
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(stderr.contains("workers"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn estimate_prints_the_contract_keys() {
    let out = fleetsim()
        .args([
            "estimate",
            "--gpu",
            "h100",
            "--model",
            "llama-3.1-8b",
            "--prompt",
            "2000",
            "--output",
            "100",
            "--concurrency",
            "8",
            "--json",
        ])
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    for key in [
        "prefill_ms",
        "decode_step_ms",
        "kv_capacity_tokens",
        "output_tokens_per_s",
    ] {
        assert!(v[key].as_f64().is_some_and(|x| x > 0.0), "{key}: {v}");
    }
    for key in ["ttft_ms", "tpot_ms"] {
        for stat in ["mean", "p50", "p99"] {
            assert!(
                v[key][stat].as_f64().is_some_and(|x| x > 0.0),
                "{key}.{stat}: {v}"
            );
        }
    }
    assert_eq!(v["calibrated"], true);
    assert_eq!(v["concurrency"], 8);
    assert_eq!(v["profile_distance"], "exact");
    assert!(v["itl_mean_ms"].as_f64().is_some_and(|x| x > 0.0), "{v}");
    // The warm-up ran alone: at least the idle prefill.
    assert!(
        v["warmup_ttft_ms"].as_f64().unwrap() >= v["prefill_ms"].as_f64().unwrap(),
        "{v}"
    );
}

#[test]
fn estimate_errors_are_one_clear_line() {
    for (args, expect) in [
        (
            vec!["--gpu", "h900", "--model", "llama-3.1-8b"],
            "unknown name `h900`",
        ),
        (
            vec!["--gpu", "h100", "--model", "llama-3.1-70b"],
            "does not fit",
        ),
        (
            vec!["--gpu", "h100", "--model", "llama-3.1-8b", "--tp", "3"],
            "must be 1, 2, 4 or 8",
        ),
        (
            vec![
                "--gpu",
                "h100",
                "--model",
                "llama-3.1-8b",
                "--concurrency",
                "4",
                "--harness",
                "aiperf",
                "--harness-option",
                "prompt_tokens_stdev=3",
            ],
            "--harness-option prompt_tokens_stdev: is not an option of aiperf",
        ),
        (
            vec![
                "--gpu",
                "h100",
                "--model",
                "llama-3.1-8b",
                "--concurrency",
                "4",
                "--harness",
                "genai-perf",
                "--harness-option",
                "output_tokens_stddev",
            ],
            "expected KEY=VALUE",
        ),
        (
            vec![
                "--gpu",
                "h100",
                "--model",
                "llama-3.1-8b",
                "--concurrency",
                "4",
                "--harness",
                "guidellm",
            ],
            "give --requests",
        ),
    ] {
        let out = fleetsim()
            .arg("estimate")
            .args(args)
            .args(["--prompt", "100", "--output", "10"])
            .assert()
            .failure();
        let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
        assert!(
            stderr.contains(expect) && !stderr.contains("panicked"),
            "{stderr}"
        );
        assert_eq!(
            stderr
                .trim_end()
                .lines()
                .next()
                .map(|l| l.starts_with("error")),
            Some(true)
        );
    }
}

/// `calibrate --check` fits again and finds the committed profiles and report current.
#[test]
fn calibrate_check_finds_the_committed_files_current() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    fleetsim()
        .arg("calibrate")
        .arg("--data")
        .arg(root.join("data/calibration"))
        .arg("--profiles")
        .arg(root.join("profiles"))
        .arg("--report")
        .arg(root.join("docs/calibration.md"))
        .arg("--check")
        .assert()
        .success();
}

#[test]
fn bench_scaling_times_both_passes_and_finds_the_runs_identical() {
    let out = fleetsim()
        .args([
            "bench",
            "scaling",
            "--runs",
            "2",
            "--json",
            "--set",
            "duration=\"10s\"",
        ])
        .arg(scenario_path("quickstart.toml"))
        .assert()
        .success();
    let r: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(r["runs"], 2);
    assert_eq!(r["sequential"]["threads"], 1);
    assert_eq!(r["parallel"]["threads"], 2);
    assert_eq!(r["identical"], true);
    let (seq, par) = (
        r["sequential"]["wall_s"].as_f64().unwrap(),
        r["parallel"]["wall_s"].as_f64().unwrap(),
    );
    assert!(seq > 0.0 && par > 0.0, "{r}");
    assert!(
        (r["wall_ratio"].as_f64().unwrap() - par / seq).abs() < 1e-9,
        "{r}"
    );
    // One run is not a batch.
    fleetsim()
        .args(["bench", "scaling", "--runs", "1"])
        .arg(scenario_path("quickstart.toml"))
        .assert()
        .failure();
}
