//! Issue 44's inputs, as a new user gives them: values that once panicked or ran for ever after
//! `validate` said ok, files without line breaks and devices, results folders that were replaced
//! without a word, and answers that were silently wrong. Each must end with a message that names the
//! file, the field and the allowed range, or (where the input is legal) a run that stops on its own.

use std::path::Path;

use assert_cmd::Command;

use crate::common::TempDir;

fn fleetsim() -> Command {
    Command::cargo_bin("fleetsim").unwrap()
}

const GOOD: &str = r#"name = "good"
seed = 1
duration = "10s"

[[workers]]
count = 2
gpu = "h100"
model = "llama-3.1-8b"

[workload]
kind = "poisson"
rate = 5.0
prompt = { dist = "fixed", tokens = 100 }
output = { dist = "fixed", tokens = 10 }
"#;

/// Runs `fleetsim args` in `dir`; returns (success, stdout + stderr).
fn run_in(dir: &Path, args: &[&str]) -> (bool, String) {
    let out = fleetsim().current_dir(dir).args(args).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !text.contains("panicked"),
        "fleetsim {args:?} panicked:\n{text}"
    );
    (out.status.success(), text)
}

/// `validate` and `run` of GOOD plus `extra` (or, for an `extra` starting with `=`, GOOD with its
/// seed line so replaced) fail, and their messages hold every needle.
fn refused(dir: &Path, name: &str, extra: &str, needles: &[&str]) {
    let file = format!("{name}.toml");
    let text = match extra.strip_prefix('=') {
        Some(top) => GOOD.replace("seed = 1", top),
        None => format!("{GOOD}{extra}"),
    };
    std::fs::write(dir.join(&file), text).unwrap();
    let file = file.as_str();
    for args in [vec!["validate", file], vec!["run", file, "--quiet"]] {
        let (ok, text) = run_in(dir, &args);
        let cmd = args[0];
        assert!(!ok, "{cmd} {name} succeeded:\n{text}");
        for n in needles {
            assert!(text.contains(n), "{cmd} {name}: no `{n}` in\n{text}");
        }
    }
}

#[test]
fn values_that_panicked_or_ran_for_ever_are_refused_with_their_range() {
    let dir = TempDir::new("hardening-ranges");
    let d = dir.path("");
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "slowdown-1e300",
            "\n[[faults]]\nkind = \"slowdown\"\nworker = 0\nat = \"1s\"\nfactor = 1e300\n",
            &[
                "slowdown-1e300.toml:20",
                "faults[0].factor",
                "between 0.01 and 1000",
            ],
        ),
        (
            "tier-bandwidth-tiny",
            "\n[tiers.host]\ncapacity_gb = 10\nread_gb_per_s = 1e-300\nwrite_gb_per_s = 5\nlatency = \"10us\"\n",
            &[
                "tier-bandwidth-tiny.toml:18",
                "tiers.host.read_gb_per_s",
                "between 0.001 and 100000 GB/s",
            ],
        ),
        (
            "shared-tier-bandwidth-tiny",
            "\n[gateway]\nsession_state = \"shared_tier\"\nshared_tier = { write_gb_per_s = 1e-300 }\n",
            &["gateway.shared_tier.write_gb_per_s", "GB/s"],
        ),
        (
            "weibull-shape-tiny",
            "\n[[faults]]\nkind = \"crash\"\nmtbf = \"1h\"\ndistribution = \"weibull\"\nshape = 0.001\n",
            &[
                "weibull-shape-tiny.toml:20",
                "faults[0].shape",
                "between 0.1 and 20",
            ],
        ),
        (
            "mtbf-1ns",
            "\n[[faults]]\nkind = \"crash\"\nmtbf = \"1ns\"\nmttr = \"1ns\"\n",
            &["faults[0].mtbf", "between 1s"],
        ),
        (
            "hang-timeout-ten-years",
            "\n[gateway]\nrequest_timeout = \"87600h\"\n\n[[faults]]\nkind = \"hang\"\nworkers = [0, 1]\nat = \"1s\"\n",
            &[
                "hang-timeout-ten-years.toml:17",
                "gateway.request_timeout",
                "between 1ms and 86400s",
            ],
        ),
        (
            "retries-4e9",
            "\n[gateway]\nmax_retries = 4000000000\nretry_backoff = \"1ns\"\n",
            &["gateway.max_retries", "between 0 and 100"],
        ),
        (
            "max-requests-zero",
            "=seed = 1\nmax_requests = 0",
            &["max_requests", "at least 1"],
        ),
        (
            "weight-load-tiny",
            "\n[restart]\nweight_load_gb_per_s = 1e-300\n",
            &["restart.weight_load_gb_per_s", "GB/s"],
        ),
        (
            "rdma-tiny",
            "\n[interconnect]\nrdma_gb_per_s = 1e-300\n",
            &["interconnect.rdma_gb_per_s", "GB/s"],
        ),
    ];
    for (name, extra, needles) in cases {
        refused(&d, name, extra, needles);
    }
}

#[test]
fn faults_beyond_what_a_run_can_simulate_are_refused_before_it_starts() {
    // A second between failures on a thousand workers for ten years: 3·10¹¹ failures.
    let dir = TempDir::new("hardening-fault-count");
    let d = dir.path("");
    let text = GOOD.replace("count = 2", "count = 1000").replace(
        "duration = \"10s\"",
        "duration = \"87600h\"\nmax_requests = 100",
    ) + "\n[[faults]]\nkind = \"crash\"\nmtbf = \"1s\"\nmttr = \"1s\"\n";
    std::fs::write(d.join("many.toml"), text).unwrap();
    let (ok, out) = run_in(&d, &["validate", "many.toml"]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("faults[0].mtbf") && out.contains("--force"),
        "{out}"
    );
}

#[test]
fn a_run_past_its_simulated_time_budget_stops_and_writes_what_it_has() {
    // Every worker is lost for good at 2 s; the gateway retries each request up to 100 times, a day
    // apart: months of simulated retries. The budget (a day past the arrival window) stops it.
    let dir = TempDir::new("hardening-budget");
    let d = dir.path("");
    let text = format!(
        "{GOOD}\n[gateway]\nmax_retries = 100\nretry_backoff = \"1h\"\nretry_backoff_max = \"24h\"\n\n\
         [[faults]]\nkind = \"crash\"\nworkers = [0, 1]\nat = \"2s\"\nrestart = false\n"
    );
    std::fs::write(d.join("budget.toml"), text).unwrap();
    let (ok, out) = run_in(&d, &["run", "budget.toml", "--quiet", "--out", "res"]);
    assert!(!ok, "{out}");
    assert!(out.contains("stopped early"), "{out}");
    assert!(out.contains("simulated-time budget"), "{out}");
    assert!(out.contains("results so far are written to res"), "{out}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.join("res/summary.json")).unwrap()).unwrap();
    let r = &summary["requests"];
    assert_eq!(
        r["arrived"].as_u64(),
        Some(
            r["completed"].as_u64().unwrap()
                + r["failed"].as_u64().unwrap()
                + r["rejected"].as_u64().unwrap()
        ),
        "{summary}"
    );
    assert!(summary["sim"]["stopped"].is_string(), "{summary}");
}

#[test]
fn results_are_never_replaced_without_consent() {
    let dir = TempDir::new("hardening-out");
    let d = dir.path("");
    std::fs::write(d.join("good.toml"), GOOD.replace("10s", "2s")).unwrap();
    let (ok, out) = run_in(&d, &["run", "good.toml", "--quiet", "--out", "res"]);
    assert!(ok, "{out}");
    // Again into the same folder: refused, saying how to go ahead.
    let first = std::fs::read(d.join("res/summary.json")).unwrap();
    let (ok, out) = run_in(&d, &["run", "good.toml", "--quiet", "--out", "res"]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("earlier fleetsim run") && out.contains("--force"),
        "{out}"
    );
    assert_eq!(std::fs::read(d.join("res/summary.json")).unwrap(), first);
    let (ok, out) = run_in(
        &d,
        &["run", "good.toml", "--quiet", "--force", "--out", "res"],
    );
    assert!(ok, "{out}");
    // A folder of the user's own files: refused, --force or not, and left alone.
    std::fs::create_dir_all(d.join("mine")).unwrap();
    std::fs::write(d.join("mine/summary.json"), "my own").unwrap();
    for force in [false, true] {
        let mut args = vec!["run", "good.toml", "--quiet", "--out", "mine"];
        if force {
            args.push("--force");
        }
        let (ok, out) = run_in(&d, &args);
        assert!(!ok, "{out}");
        assert!(out.contains("not made by fleetsim"), "{out}");
    }
    assert_eq!(
        std::fs::read_to_string(d.join("mine/summary.json")).unwrap(),
        "my own"
    );
    // compare follows the same rules.
    let (ok, out) = run_in(
        &d,
        &[
            "compare",
            "good.toml",
            "--policies",
            "round_robin",
            "--quiet",
            "--out",
            "res",
        ],
    );
    assert!(!ok && out.contains("--force"), "{out}");
}

#[test]
fn devices_and_files_without_line_breaks_are_refused_without_reading_them_whole() {
    let dir = TempDir::new("hardening-lines");
    let d = dir.path("");
    // 17 MiB of zeros and no line break: longer than the longest line a trace may have.
    std::fs::write(d.join("zeros.jsonl"), vec![b'0'; 17 << 20]).unwrap();
    let (ok, out) = run_in(&d, &["trace", "stats", "zeros.jsonl"]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("zeros.jsonl:1") && out.contains("16 MiB"),
        "{out}"
    );
    #[cfg(unix)]
    {
        for args in [
            &["trace", "stats", "/dev/zero"][..],
            &["trace", "convert", "/dev/zero", "out.jsonl"][..],
        ] {
            let (ok, out) = run_in(&d, args);
            assert!(!ok, "{out}");
            assert!(
                out.contains("/dev/zero") && out.contains("regular file"),
                "{out}"
            );
        }
        let scenario = GOOD.replace(
            "kind = \"poisson\"\nrate = 5.0\nprompt = { dist = \"fixed\", tokens = 100 }\noutput = { dist = \"fixed\", tokens = 10 }",
            "kind = \"trace\"\npath = \"/dev/zero\"",
        );
        std::fs::write(d.join("zero-trace.toml"), scenario).unwrap();
        let (ok, out) = run_in(&d, &["validate", "zero-trace.toml"]);
        assert!(!ok, "{out}");
        assert!(
            out.contains("workload.path") && out.contains("regular file"),
            "{out}"
        );
    }
}

#[test]
fn silently_wrong_answers_now_say_so() {
    let dir = TempDir::new("hardening-silent");
    let d = dir.path("");
    // A header and no rows is as empty as an empty file.
    std::fs::write(
        d.join("azure.csv"),
        "TIMESTAMP,ContextTokens,GeneratedTokens\n",
    )
    .unwrap();
    let (ok, out) = run_in(&d, &["trace", "stats", "azure.csv"]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("azure.csv") && out.contains("no requests"),
        "{out}"
    );
    // A start past the trace's end says so.
    std::fs::write(
        d.join("x.jsonl"),
        "{\"id\":0,\"arrival\":0,\"input\":10,\"output\":2}\n{\"id\":1,\"arrival\":1,\"input\":20,\"output\":3}\n",
    )
    .unwrap();
    let (_, out) = run_in(&d, &["trace", "stats", "x.jsonl", "--start", "100h"]);
    assert!(out.contains("before start"), "{out}");
    // A speed-up that would squeeze the trace into no time at all is refused with its range.
    let (ok, out) = run_in(&d, &["trace", "stats", "x.jsonl", "--speedup", "1e300"]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("--speedup") && out.contains("1000000"),
        "{out}"
    );
}

#[test]
fn messages_name_the_key_and_the_sign() {
    let dir = TempDir::new("hardening-messages");
    let d = dir.path("");
    // A bad value inside [policies.X] is reported at its own line, with its key.
    let text =
        format!("{GOOD}\n[policies.sticky]\npolicy = \"session_affinity\"\nmax_load_factor = -1\n");
    std::fs::write(d.join("policy.toml"), text).unwrap();
    let (ok, out) = run_in(&d, &["validate", "policy.toml"]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("policy.toml:18:") && out.contains("max_load_factor"),
        "{out}"
    );
    // A parameter of a policy that takes none.
    let text = format!("{GOOD}\n[router]\npolicy = \"round_robin\"\nttl = \"5m\"\n");
    std::fs::write(d.join("rr.toml"), text).unwrap();
    let (ok, out) = run_in(&d, &["validate", "rr.toml"]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("round_robin") && out.contains("takes no parameters"),
        "{out}"
    );
    assert!(!out.contains("there are no fields"), "{out}");
    // Negative numbers reach the option's own check instead of looking like flags.
    std::fs::write(d.join("good.toml"), GOOD).unwrap();
    for (args, needle) in [
        (
            &[
                "compare",
                "good.toml",
                "--policies",
                "round_robin",
                "--threads",
                "-1",
            ][..],
            "--threads",
        ),
        (
            &["trace", "stats", "x.jsonl", "--start", "-3s"][..],
            "zero or positive",
        ),
        (&["trace", "stats", "x.jsonl", "--speedup", "-5"][..], "-5"),
    ] {
        let (ok, out) = run_in(&d, args);
        assert!(!ok, "{out}");
        assert!(!out.contains("unexpected argument"), "{args:?}: {out}");
        assert!(out.contains(needle), "{args:?}: {out}");
    }
}
