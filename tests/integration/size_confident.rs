//! `fleetsim size` that cannot be fooled: the same answer whatever the base seed, bursts judged window
//! by window, a warning at the hardware floor, disaggregated fleets sized in both dimensions.

use assert_cmd::Command;

use crate::common::{TempDir, scenario_path};

/// Runs `fleetsim size SCENARIO ARGS --out DIR` and returns size.json and the printed report.
fn size(t: &TempDir, name: &str, text: &str, args: &[&str]) -> (serde_json::Value, String) {
    let path = t.path(&format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    size_file(t, name, &path, args)
}

fn size_file(
    t: &TempDir,
    name: &str,
    path: &std::path::Path,
    args: &[&str],
) -> (serde_json::Value, String) {
    let out = t.path(&format!("out-{name}"));
    let assert = Command::cargo_bin("fleetsim")
        .unwrap()
        .args(["size", path.to_str().unwrap(), "-q", "--force", "--out"])
        .arg(&out)
        .args(args)
        .assert()
        .success();
    let stdout = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
    let json =
        serde_json::from_str(&std::fs::read_to_string(out.join("size.json")).unwrap()).unwrap();
    (json, stdout)
}

/// The issue's TPOT-bound case: Poisson 100 req/s, 1024 in / 128 out, p95 TPOT ≤ 19 ms on H100 ×
/// Llama-3.1-8B, whose single-seed answer flipped between 4 and 5 workers.
fn tpot_bound(seed: u64) -> String {
    format!(
        r#"
name = "tpot-bound"
seed = {seed}
duration = "2m"

[[workers]]
count = 4
gpu = "h100"
model = "llama-3.1-8b"

[workload]
kind = "poisson"
rate = 100.0
prompt = {{ dist = "fixed", tokens = 1024 }}
output = {{ dist = "fixed", tokens = 128 }}

[slo]
tpot = "19ms"
"#
    )
}

#[test]
fn the_tpot_bound_answer_does_not_depend_on_the_base_seed() {
    let t = TempDir::new("size-seeds");
    let mut answers = Vec::new();
    for seed in 1..=10 {
        let (v, _) = size(&t, &format!("s{seed}"), &tpot_bound(seed), &[]);
        let c = &v["candidates"][0];
        answers.push(c["workers"].as_u64().unwrap());
        // The answer passed on its interval's bound, and one fewer was judged and failed.
        assert_eq!(c["binding"]["passes"], true, "{c:#}");
        assert!(c["binding"]["margin"].as_f64().unwrap() >= 0.0, "{c:#}");
        assert!(c["one_fewer_fails"].is_string(), "{c:#}");
        assert!(c["replications"].as_u64().unwrap() >= 5, "{c:#}");
    }
    assert!(answers.iter().all(|&a| a == answers[0]), "{answers:?}");
}

#[test]
fn a_burst_is_judged_in_its_own_window() {
    // 60 req/s with 120 req/s for 5 s at 150 s, over 4 minutes: one-turn sessions shaped by a rate
    // curve (normalised to a time-weighted mean of 1, the last row weighted over the span before it, so
    // the session rate is 60 × its mean, 330/325). The burst is 2.5% of the requests, and in the second
    // half of the window, where no warm-up is ever detected (a burst early in a run can be taken for
    // warm-up by MSER: fix `[metrics] warmup` for such a scenario).
    let t = TempDir::new("size-burst");
    std::fs::write(
        t.path("burst.csv"),
        "time_s,rate\n0,1\n150,2\n155,1\n240,1\n",
    )
    .unwrap();
    let text = |window: &str| {
        format!(
            r#"
name = "burst"
seed = 3
duration = "4m"

[[workers]]
count = 3
gpu = "h100"
model = "llama-3.1-8b"

[workload]
kind = "sessions"
session_rate = {rate}
turns = {{ dist = "fixed", tokens = 1 }}
prompt = {{ dist = "fixed", tokens = 1024 }}
output = {{ dist = "fixed", tokens = 128 }}
think_time = {{ dist = "fixed", value = "1s" }}
rate_curve = {{ path = "burst.csv" }}

[metrics]
window = "5s"

[slo]
ttft = "200ms"
{window}
"#,
            rate = 60.0 * 330.0 / 325.0
        )
    };
    // Goodput kept out of it (a floor of 50%): the p95 TTFT alone decides, whole-run or windowed.
    let args = ["--replications", "3", "--min-goodput", "0.5"];
    let (whole, _) = size(&t, "whole", &text(""), &args);
    let (windowed, out) = size(&t, "windowed", &text("window = \"10s\""), &args);
    let n_whole = whole["candidates"][0]["workers"].as_u64().unwrap();
    let c = &windowed["candidates"][0];
    let n_window = c["workers"].as_u64().unwrap();
    assert!(
        n_window > n_whole,
        "the burst needs more workers than the whole-run p95 shows: {n_window} vs {n_whole}\n{out}"
    );
    assert!(out.contains("worst 10s window"), "{out}");
    let tried = c["tried"].as_array().unwrap();
    let fewer = tried.iter().find(|e| e["workers"] == n_window - 1).unwrap();
    assert!(
        fewer["worst_miss"].as_str().unwrap().contains("worst-10s"),
        "one fewer fails in its worst window: {fewer:#}"
    );
}

#[test]
fn an_slo_at_the_idle_floor_is_warned_about() {
    let t = TempDir::new("size-floor");
    let base = |ttft: &str| {
        format!(
            r#"
name = "floor"
seed = 2
duration = "1m"

[[workers]]
count = 2
gpu = "a100"
model = "llama-3.1-70b"
tp = 4

[workload]
kind = "poisson"
rate = 2.0
prompt = {{ dist = "fixed", tokens = 2048 }}
output = {{ dist = "fixed", tokens = 64 }}

[slo]
ttft = "{ttft}"
"#
        )
    };
    // The floor from the tool itself, then an SLO 5% above it.
    let (v, _) = size(&t, "loose", &base("5s"), &["--replications", "2"]);
    let floor = v["candidates"][0]["idle_floor"]["ttft_p95_ms"]
        .as_f64()
        .unwrap();
    assert!(
        v["candidates"][0]["idle_floor"]["warnings"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let tight = format!("{}ms", (floor * 1.05).round());
    let (v, out) = size(&t, "tight", &base(&tight), &["--replications", "2"]);
    let warnings = v["candidates"][0]["idle_floor"]["warnings"]
        .as_array()
        .unwrap();
    assert_eq!(warnings.len(), 1, "{v:#}");
    assert!(
        out.contains("**warning**") && out.contains("idle floor"),
        "{out}"
    );
}

#[test]
fn a_disaggregated_fleet_is_sized_in_prefill_and_decode_workers() {
    let t = TempDir::new("size-pd");
    let (v, out) = size_file(
        &t,
        "pd",
        &scenario_path("disaggregation.toml"),
        &[
            "--set",
            "workers[0].prefill_workers=1",
            "--set",
            "duration=\"1m\"",
            "--replications",
            "2",
        ],
    );
    let c = &v["candidates"][0];
    let p = c["prefill_workers"].as_u64().unwrap();
    let d = c["decode_workers"].as_u64().unwrap();
    assert!(p >= 1 && d >= 1, "{c:#}");
    assert_eq!(c["workers"].as_u64().unwrap(), p + d);
    assert!(out.contains(&format!("{p}P+{d}D")), "{out}");
    // Both one-fewer shapes were judged and failed.
    let fewer = c["one_fewer_fails"].as_str().unwrap();
    if p > 1 {
        assert!(fewer.contains(&format!("{}P+{d}D", p - 1)), "{fewer}");
    }
    assert!(
        fewer.contains(&format!("{p}P+{}D", d - 1)) || d == 1,
        "{fewer}"
    );
}

#[test]
fn traffic_scales_say_when_to_grow() {
    let t = TempDir::new("size-grow");
    let (v, out) = size(
        &t,
        "grow",
        &tpot_bound(1),
        &["--traffic-scale", "0.5,1,2", "--replications", "2"],
    );
    let scales = v["scales"].as_array().unwrap();
    let n: Vec<u64> = scales
        .iter()
        .map(|s| s["candidates"][0]["workers"].as_u64().unwrap())
        .collect();
    assert!(n[0] <= n[1] && n[1] < n[2], "{n:?}");
    assert!(out.contains("# When to grow"), "{out}");
}

/// Base seeds of the rack and mix stability tests. Each `size` call costs 1–2 CPU-minutes in a debug
/// build (the window is lengthened up to four times), so CI runs four seeds; seeds 1–10 were run by
/// hand for the README and agree.
const RACK_SEEDS: std::ops::RangeInclusive<u64> = 1..=4;
const MIX_SEEDS: std::ops::RangeInclusive<u64> = 1..=4;

/// The answers of `fleetsim size SCENARIO ARGS` for base seeds `seeds` (one candidate), with whether
/// each was judged on a longer arrival window than the scenario's.
fn answers(
    t: &TempDir,
    scenario: &str,
    args: &[&str],
    seeds: std::ops::RangeInclusive<u64>,
) -> Vec<(u64, bool)> {
    seeds
        .map(|seed| {
            let mut a = args.to_vec();
            let set = format!("seed={seed}");
            a.extend(["--set", &set]);
            let (v, _) = size_file(t, &format!("s{seed}"), &scenario_path(scenario), &a);
            let c = &v["candidates"][0];
            (
                c["workers"].as_u64().unwrap(),
                c["window_extended"].as_bool().unwrap(),
            )
        })
        .collect()
}

#[test]
fn losing_a_rack_gives_the_same_answer_for_every_base_seed() {
    // The issue's non-monotone case: `size-chat` cut to 60 s, a rack of 2 lost. Its answer was 9 for
    // seed 5 (pass/fail by count 3..11: F P F F F F P F F). The failure cases are judged from the
    // gateway's detection of the loss on, and the 60-s window, too short for the conversations' ramp,
    // is lengthened.
    let t = TempDir::new("size-rack");
    let a = answers(
        &t,
        "size-chat.toml",
        &[
            "--set",
            "duration=\"60s\"",
            "--headroom-domain",
            "rack",
            "--domain-size",
            "2",
        ],
        RACK_SEEDS,
    );
    assert!(a.iter().all(|x| *x == a[0]), "{a:?}");
    assert!([4, 5].contains(&a[0].0), "{a:?}");
    assert!(a[0].1, "the window was lengthened: {a:?}");
}

#[test]
fn a_three_class_mix_gives_the_same_answer_for_every_base_seed() {
    // `size-chat-mix` (chat, RAG and batch classes, each with its own SLO) on its 2-minute window,
    // too short for the chat class's ramp: lengthened, the answer is the 5-minute one (4 H100s).
    let t = TempDir::new("size-mix");
    let a = answers(&t, "size-chat-mix.toml", &[], MIX_SEEDS);
    assert!(a.iter().all(|x| *x == a[0]), "{a:?}");
    assert_eq!(a[0].0, 4, "{a:?}");
}
