//! `fleetsim size` on a case whose answer follows from the step model: a throughput-bound load.

use assert_cmd::Command;
use fleetsim::hardware::{GpuId, ModelId, PerfModel, Precision, StepShape};

use crate::common::TempDir;

const B: u64 = 16; // max_num_seqs
const PROMPT: u64 = 16;
const OUTPUT: u64 = 128;

/// The most requests per second one worker can finish (μ_max), from the step model alone.
///
/// At saturation the batch always holds B sequences. A request spends OUTPUT steps in the batch (its
/// prompt step gives the first token, then OUTPUT − 1 decode steps), so a step finishes B / OUTPUT
/// requests on average, and the same fraction B / OUTPUT of steps also carries one new 16-token prompt
/// chunk. Decode contexts run from PROMPT to PROMPT + OUTPUT: PROMPT + OUTPUT / 2 on average.
/// μ_max = (B / OUTPUT) / t_step, t_step = (1 − f)·t_decode + f·t_mixed, f = B / OUTPUT.
fn mu_max() -> f64 {
    mu_max_of(ModelId::Llama31_8b)
}

/// [`mu_max`] of `model` on one H100 in BF16.
fn mu_max_of(model: ModelId) -> f64 {
    let perf = PerfModel::calibrated(GpuId::H100, model, 1, Precision::Bf16);
    let ctx = PROMPT + OUTPUT / 2;
    let t_decode = perf.decode_step_seconds(B, ctx);
    let mut mixed = StepShape::default();
    mixed.add(PROMPT, 0);
    for _ in 1..B {
        mixed.add(1, ctx);
    }
    let t_mixed = perf.step_seconds(&mixed);
    let f = B as f64 / OUTPUT as f64;
    let t_step = (1.0 - f) * t_decode + f * t_mixed;
    (B as f64 / OUTPUT as f64) / t_step
}

fn scenario(rate: f64) -> String {
    format!(
        r#"
name = "throughput-bound"
seed = 7
duration = "120s"

[[workers]]
count = 1
gpu = "h100"
model = "llama-3.1-8b"
max_num_seqs = {B}
enable_prefix_caching = false

[workload]
kind = "poisson"
rate = {rate}
prompt = {{ dist = "fixed", tokens = {PROMPT} }}
output = {{ dist = "fixed", tokens = {OUTPUT} }}

[router]
policy = "least_outstanding"

[slo]
ttft = "5s"
tpot = "1s"
"#
    )
}

fn size(t: &TempDir, rate: f64, headroom: u32) -> serde_json::Value {
    let h = headroom.to_string();
    size_of(
        t,
        &format!("s-{headroom}"),
        &scenario(rate),
        &["--headroom", &h],
    )
}

/// `fleetsim size` of scenario `text` (written to `NAME.toml` in `t`) with `args`: its size.json.
fn size_of(t: &TempDir, name: &str, text: &str, args: &[&str]) -> serde_json::Value {
    let path = t.path(&format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    let out = t.path(&format!("out-{name}"));
    Command::cargo_bin("fleetsim")
        .unwrap()
        .arg("size")
        .arg(&path)
        .args(args)
        .arg("--out")
        .arg(&out)
        .assert()
        .success();
    serde_json::from_str(&std::fs::read_to_string(out.join("size.json")).unwrap()).unwrap()
}

#[test]
fn a_throughput_bound_load_needs_ceil_lambda_over_mu_max_workers() {
    let t = TempDir::new("size-bound");
    // λ = 2.5 μ_max: ceil(λ / μ_max) = 3, with room on both sides for the ±8% the averaging in mu_max
    // can be off by (2.31 .. 2.72 still rounds up to 3). With 2 workers the backlog grows by 0.5 μ_max
    // per second, so after 120 s the late arrivals wait far beyond the 5 s TTFT SLO.
    let mu = mu_max();
    let rate = 2.5 * mu;
    let v = size(&t, rate, 0);
    let c = &v["candidates"][0];
    assert_eq!(c["workers"], 3, "μ_max = {mu:.2}/s, λ = {rate:.2}/s: {c:#}");
    let fewer = c["one_fewer_fails"].as_str().unwrap();
    assert!(!fewer.is_empty(), "2 workers were run and failed: {c:#}");
    // The answer meets the SLO.
    assert!(c["ttft_p95_ms"].as_f64().unwrap() <= 5000.0);
    assert!(c["goodput"].as_f64().unwrap() >= 0.95);

    // Losing a worker at the worst moment needs at least one more.
    let h = size(&t, rate, 1);
    let n = h["candidates"][0]["workers"].as_u64().unwrap();
    assert!(n >= 4, "{h:#}");
}

/// `size` with `--headroom-domain rack --domain-size 2` on `scenario(rate)`: the size.json value.
fn size_domain(t: &TempDir, rate: f64) -> serde_json::Value {
    let path = t.path("s-domain.toml");
    std::fs::write(&path, scenario(rate)).unwrap();
    let out = t.path("out-domain");
    Command::cargo_bin("fleetsim")
        .unwrap()
        .args([
            "size",
            path.to_str().unwrap(),
            "--headroom-domain",
            "rack",
            "--domain-size",
            "2",
            "--out",
            out.to_str().unwrap(),
        ])
        .assert()
        .success();
    serde_json::from_str(&std::fs::read_to_string(out.join("size.json")).unwrap()).unwrap()
}

#[test]
fn losing_a_rack_needs_the_load_carried_by_the_workers_outside_it() {
    let t = TempDir::new("size-domain");
    // As above, λ = 2.5 μ_max needs 3 workers. With racks of 2 and rack-0 lost for good as early as 25%
    // of the window, the n − 2 workers outside it must carry λ for the remaining 90 s: n − 2 ≥ 3, so
    // n ≥ 5. Every count below that was run and failed, and the answer's predecessor was verified.
    let mu = mu_max();
    let v = size_domain(&t, 2.5 * mu);
    let c = &v["candidates"][0];
    let n = c["workers"].as_u64().unwrap();
    assert!(n >= 5, "μ_max = {mu:.2}/s: {c:#}");
    let fewer = c["one_fewer_fails"].as_str().unwrap();
    assert!(
        fewer.contains("rack-0 lost"),
        "the rack loss is what fails: {fewer}"
    );
    let tried = c["tried"].as_array().unwrap();
    assert!(
        tried
            .iter()
            .any(|e| e["workers"] == n - 1 && e["feasible"] == false),
        "{c:#}"
    );
}

/// `size` of `scenario(rate)` with an `[autoscaler]` whose replicas take `cold_start` to come up: the
/// size.json value.
fn size_autoscaled(t: &TempDir, rate: f64, cold_start: &str) -> serde_json::Value {
    let name = format!("auto-{cold_start}");
    let text = scenario(rate)
        + &format!(
            r#"
[autoscaler]
min_replicas = 1
max_replicas = 1
metric = "concurrency"
target = {B}.0
image_pull = "0s"
weight_load = "0s"
warmup = "{cold_start}"
"#
        );
    size_of(t, &name, &text, &["--headroom", "0", "--max-workers", "16"])
}

/// (min, max, feasible) of every shape `size` judged.
fn tried(c: &serde_json::Value) -> Vec<(u64, u64, bool)> {
    c["tried"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["min_replicas"].as_u64().unwrap(),
                t["decode_workers"].as_u64().unwrap(),
                t["feasible"].as_bool().unwrap(),
            )
        })
        .collect()
}

/// The group's own `[autoscaler.models.NAME]` bounds are the ones searched from: a floor of 3 written
/// there is the scenario's floor (no autoscaled pair below it is judged).
#[test]
fn a_models_entry_sets_the_floor_size_searches_from() {
    let t = TempDir::new("size-autoscaled-model-entry");
    let rate = 2.5 * mu_max();
    let text = scenario(rate).replace("count = 1\n", "count = 3\n")
        + &format!(
            r#"
[autoscaler]
max_replicas = 1
metric = "concurrency"
target = {B}.0
image_pull = "0s"
weight_load = "0s"
warmup = "600s"

[autoscaler.models."llama-3.1-8b"]
min_replicas = 3
max_replicas = 3
"#
        );
    let v = size_of(
        &t,
        "entry",
        &text,
        &["--headroom", "0", "--max-workers", "16"],
    );
    let c = &v["candidates"][0];
    assert_eq!(
        (c["min_replicas"].as_u64(), c["max_replicas"].as_u64()),
        (Some(3), Some(3)),
        "{c:#}"
    );
    // Static fleets (min = max) are probed from 1 up; every autoscaled pair starts at the entry's floor
    // (with the table's floor of 1 the search judges (1, 16) first, as the test below shows).
    assert!(
        tried(c).iter().all(|&(min, max, _)| min == max || min >= 3),
        "{:?}",
        tried(c)
    );
    assert!(tried(c).iter().any(|&(min, max, _)| min == 3 && max > 3));
}

#[test]
fn an_autoscaled_fleet_is_sized_by_its_replica_bounds_and_billed_by_its_mean() {
    let t = TempDir::new("size-autoscaled");
    let rate = 2.5 * mu_max();
    // A replica that takes 10 minutes to come up never serves in a 120-s run: no ceiling passes from
    // one replica, so the floor must carry the load alone, ceil(2.5) = 3 replicas, as a fixed fleet.
    let v = size_autoscaled(&t, rate, "600s");
    let c = &v["candidates"][0];
    assert_eq!(
        (c["min_replicas"].as_u64(), c["max_replicas"].as_u64()),
        (Some(3), Some(3)),
        "{c:#}"
    );
    let judged = tried(c);
    assert!(
        judged.contains(&(1, 16, false)),
        "the cap failed from the scenario's floor: {judged:?}"
    );
    assert!(
        judged.contains(&(2, 3, false)),
        "a floor of 2 was judged and failed: {judged:?}"
    );
    assert!((c["replicas_mean"].as_f64().unwrap() - 3.0).abs() < 1e-9);
    let usd = c["usd_per_gpu_hour"].as_f64().unwrap();
    assert!((c["usd_per_hour"].as_f64().unwrap() - 3.0 * usd).abs() < 1e-6);

    // A 5-s cold start: replicas arrive in time, and the answer is billed by its mean replicas.
    let v = size_autoscaled(&t, rate, "5s");
    let c = &v["candidates"][0];
    let (min, max) = (
        c["min_replicas"].as_u64().unwrap(),
        c["max_replicas"].as_u64().unwrap(),
    );
    assert!(min <= max && max >= 3, "{c:#}");
    let mean = c["replicas_mean"].as_f64().unwrap();
    assert!(mean >= min as f64 && mean <= max as f64, "{c:#}");
    assert!((c["usd_per_hour"].as_f64().unwrap() - mean * usd).abs() < 1e-6);
    let judged = tried(c);
    assert!(judged.contains(&(min, max, true)));
    if max > min.max(1) {
        assert!(
            judged.contains(&(min, max - 1, false)),
            "one replica fewer allowed fails: {judged:?}"
        );
    }
}

/// A class of the mix named after `model`, asking for it: Poisson at `rate`, fixed lengths.
fn traffic_class(model: &str, rate: f64) -> String {
    format!(
        r#"
[[workload.classes]]
name = "{model}"
[workload.classes.traffic]
kind = "poisson"
model = "{model}"
rate = {rate}
prompt = {{ dist = "fixed", tokens = {PROMPT} }}
output = {{ dist = "fixed", tokens = {OUTPUT} }}
"#
    )
}

#[test]
fn a_fleet_of_two_models_shares_its_count_in_proportion_to_the_groups() {
    let t = TempDir::new("size-two-models");
    let mu = mu_max();
    let class = traffic_class;
    let group = |count: u32, model: &str| {
        format!(
            r#"
[[workers]]
count = {count}
gpu = "h100"
model = "{model}"
max_num_seqs = {B}
enable_prefix_caching = false
"#
        )
    };
    // Llama needs ceil(2.5) = 3 workers of its own (as in the one-model case above), Qwen one. The
    // groups start 2:1, so 3 workers are shared 2:1 and fail; 4 are shared 3:1 (8/3 rounds up) and
    // pass.
    let text = format!(
        "name = \"two-models\"\nseed = 7\nduration = \"120s\"\n{}{}\n[workload]\nkind = \"mix\"\n{}{}\n[router]\npolicy = \"least_outstanding\"\n\n[slo]\nttft = \"5s\"\ntpot = \"1s\"\n",
        group(2, "llama-3.1-8b"),
        group(1, "qwen3-8b"),
        class("llama-3.1-8b", 2.5 * mu),
        class("qwen3-8b", 0.3 * mu),
    );
    let v = size_of(&t, "two", &text, &["--headroom", "0"]);
    let path = t.path("two.toml");
    let c = &v["candidates"][0];
    assert_eq!(c["workers"], 4, "{c:#}");
    assert_eq!(c["group_workers"], serde_json::json!([3, 1]), "{c:#}");
    let fewer = c["one_fewer_fails"].as_str().unwrap();
    assert!(
        fewer.starts_with("3:") && fewer.contains("llama-3.1-8b"),
        "{fewer}"
    );

    // Mixed GPU types over more than two groups are refused, not sized as if they were one type;
    // --gpus on a mixed fleet too.
    let text = std::fs::read_to_string(&path).unwrap();
    let third = group(1, "mistral-7b").replace("h100", "a100");
    let three = text.replacen("\n[workload]", &format!("{third}\n[workload]"), 1);
    let three_path = t.path("three.toml");
    std::fs::write(&three_path, three).unwrap();
    let two = text.replacen(
        "gpu = \"h100\"\nmodel = \"qwen3-8b\"",
        "gpu = \"a100\"\nmodel = \"qwen3-8b\"",
        1,
    );
    let two_path = t.path("two-types.toml");
    std::fs::write(&two_path, two).unwrap();
    for (path, gpus, says) in [
        (&three_path, None, "exactly two"),
        (&two_path, Some("h100"), "--gpus and --tp"),
    ] {
        let mut cmd = Command::cargo_bin("fleetsim").unwrap();
        cmd.args(["size", path.to_str().unwrap()]);
        if let Some(g) = gpus {
            cmd.args(["--gpus", g]);
        }
        let err = cmd.assert().failure();
        let stderr = String::from_utf8_lossy(&err.get_output().stderr).to_string();
        assert!(stderr.contains(says), "{stderr}");
    }
}

/// `size` of a fleet of `h100` and `a100` groups (2 each to start) under `scenario(rate)`'s traffic,
/// at the given prices per GPU-hour: the first candidate of size.json.
fn size_mixed(t: &TempDir, rate: f64, h100: f64, a100: f64) -> serde_json::Value {
    let one = scenario(rate);
    let (head, tail) = one.split_once("[workload]").unwrap();
    let a100_group = head
        .split_once("[[workers]]")
        .unwrap()
        .1
        .replace("count = 1", "count = 2")
        .replace("\"h100\"", "\"a100\"");
    let text = format!(
        "{}[[workers]]{a100_group}[workload]{tail}\n[prices]\nh100 = {h100}\na100 = {a100}\n",
        head.replace("count = 1", "count = 2")
    );
    let name = format!("mixed-{h100}-{a100}");
    let v = size_of(t, &name, &text, &["--headroom", "0", "--max-workers", "16"]);
    v["candidates"][0].clone()
}

#[test]
fn a_mixed_fleet_is_sized_by_cost_over_both_gpu_types() {
    let t = TempDir::new("size-mixed");
    let rate = 2.5 * mu_max();
    let groups = |c: &serde_json::Value| -> (u64, u64) {
        let g = c["group_workers"].as_array().unwrap();
        (g[0].as_u64().unwrap(), g[1].as_u64().unwrap())
    };
    // A100s priced out: the H100-only answer of the one-type test, ceil(2.5) = 3.
    let c = size_mixed(&t, rate, 3.0, 100.0);
    assert_eq!(groups(&c), (3, 0), "{c:#}");
    assert!((c["usd_per_hour"].as_f64().unwrap() - 9.0).abs() < 1e-9);
    // H100s priced out: A100s only, with one fewer failing.
    let c = size_mixed(&t, rate, 100.0, 1.0);
    let (h, a) = groups(&c);
    assert_eq!(h, 0, "{c:#}");
    assert!(
        c["one_fewer_fails"]
            .as_str()
            .unwrap()
            .contains(&format!("0+{}:", a - 1)),
        "{c:#}"
    );
    assert!((c["usd_per_hour"].as_f64().unwrap() - a as f64).abs() < 1e-9);
    // Prices close per unit of capacity: whatever wins is billed at both prices, and one worker
    // fewer of either type fails.
    let c = size_mixed(&t, rate, 3.0, 1.6);
    let (h, a) = groups(&c);
    let usd = c["usd_per_hour"].as_f64().unwrap();
    assert!(
        (usd - (3.0 * h as f64 + 1.6 * a as f64)).abs() < 1e-9,
        "{c:#}"
    );
    let fewer = c["one_fewer_fails"].as_str();
    assert!(
        fewer.is_some_and(|f| !f.is_empty()),
        "every fewer pair was judged and failed: {c:#}"
    );
    assert_eq!(c["gpu"], "h100+a100");
}

/// A pool of shared GPUs (every group co-located under one label) is sized in GPUs, each holding one
/// engine of every group: the answer's groups all get that count, and it is priced per GPU. Losing a
/// GPU takes every engine on it, so `--headroom` is refused; so is a fleet whose groups are not all in
/// the pool.
#[test]
fn a_pool_of_shared_gpus_is_sized_in_gpus() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scenarios/colocated-models.toml"
    );
    let t = TempDir::new("size-pool");
    let out = t.path("out");
    Command::cargo_bin("fleetsim")
        .unwrap()
        .args(["size", path, "--headroom", "0", "--max-workers", "6"])
        .args(["--set", "duration=\"3m\"", "--out"])
        .arg(&out)
        .assert()
        .success();
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("size.json")).unwrap()).unwrap();
    let c = &v["candidates"][0];
    let gpus = c["workers"].as_u64().unwrap();
    let groups: Vec<u64> = c["group_workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g.as_u64().unwrap())
        .collect();
    assert_eq!(groups, [gpus, gpus, gpus], "{c:#}");
    assert!(
        (c["usd_per_hour"].as_f64().unwrap() - 3.0 * gpus as f64).abs() < 1e-9,
        "{c:#}"
    );
    let md = std::fs::read_to_string(out.join("size.md")).unwrap();
    assert!(
        md.contains(&format!("| {gpus} GPUs × 3 engines | {gpus} |")),
        "{md}"
    );

    let refused = |args: &[&str], text: Option<&str>| {
        let mut cmd = Command::cargo_bin("fleetsim").unwrap();
        cmd.arg("size");
        match text {
            Some(text) => {
                let p = t.path("partial.toml");
                std::fs::write(&p, text).unwrap();
                cmd.arg(p);
            }
            None => {
                cmd.arg(path);
            }
        }
        let err = cmd.args(args).assert().failure();
        String::from_utf8_lossy(&err.get_output().stderr).to_string()
    };
    let e = refused(&["--headroom", "1"], None);
    assert!(
        e.contains("--headroom") && e.contains("co-located") && !e.contains("panicked"),
        "{e}"
    );
    // The third group leaves the pool: two groups share GPUs, one has its own.
    let text = std::fs::read_to_string(path).unwrap();
    let mut parts: Vec<&str> = text.rsplitn(2, "colocate = \"h100-pool\"").collect();
    parts.reverse();
    let partial = parts.join("");
    let partial = partial.replace("../traces", concat!(env!("CARGO_MANIFEST_DIR"), "/traces"));
    let e = refused(&["--headroom", "0"], Some(&partial));
    assert!(e.contains("workers[0]") && e.contains("one pool"), "{e}");
}

/// Two models, each its own autoscaled deployment, at 2.5 and 1.5 times one replica's capacity: each is
/// sized on its own traffic (a 10-minute cold start: every replica must be there from the start, so
/// each deployment's answer is its static count, ceil(2.5) = 3 and ceil(1.5) = 2), and the whole fleet
/// of both answers is run and passes, billed for 3 + 2 replicas.
#[test]
fn several_autoscaled_deployments_are_sized_each_on_its_own_traffic() {
    let t = TempDir::new("size-deployments");
    let (small, other) = (ModelId::Llama31_8b, ModelId::Llama2_7b);
    let class = |model: ModelId, rate: f64| traffic_class(model.as_str(), rate);
    let group = |model: ModelId| {
        format!(
            r#"
[[workers]]
count = 1
gpu = "h100"
model = "{}"
max_num_seqs = {B}
enable_prefix_caching = false
"#,
            model.as_str()
        )
    };
    let text = format!(
        r#"
name = "two-deployments"
seed = 7
duration = "120s"
{}{}
[router]
policy = "least_outstanding"

[workload]
kind = "mix"
{}{}
[autoscaler]
min_replicas = 1
max_replicas = 1
metric = "concurrency"
target = {B}.0
image_pull = "0s"
weight_load = "0s"
warmup = "600s"

[slo]
ttft = "5s"
tpot = "1s"
"#,
        group(small),
        group(other),
        class(small, 2.5 * mu_max_of(small)),
        class(other, 1.5 * mu_max_of(other)),
    );
    let v = size_of(&t, "two", &text, &["--max-workers", "8"]);
    let deployments = v["deployments"].as_array().unwrap();
    assert_eq!(deployments.len(), 2, "{v:#}");
    let bounds = |d: &serde_json::Value| {
        let c = &d["candidates"][0];
        (c["min_replicas"].as_u64(), c["max_replicas"].as_u64())
    };
    assert_eq!(deployments[0]["model"], small.as_str());
    assert_eq!(bounds(&deployments[0]), (Some(3), Some(3)), "{v:#}");
    assert_eq!(deployments[1]["model"], other.as_str());
    assert_eq!(bounds(&deployments[1]), (Some(2), Some(2)), "{v:#}");
    // Each deployment was judged on its own model's class only.
    let binding = &deployments[1]["candidates"][0]["binding"];
    assert!(
        binding["class"].is_null() || binding["class"] == other.as_str(),
        "{binding:#}"
    );

    let f = &v["fleets"][0];
    assert_eq!(f["feasible"], true, "{f:#}");
    let parts: Vec<(String, u64, u64)> = f["deployments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["model"].as_str().unwrap().to_string(),
                d["min_replicas"].as_u64().unwrap(),
                d["max_replicas"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        parts,
        [
            (small.as_str().to_string(), 3, 3),
            (other.as_str().to_string(), 2, 2)
        ]
    );
    assert_eq!(f["gpus_at_most"], 5);
    // Both deployments hold their floors for the whole run: 5 H100s billed at the catalogue's price.
    assert!(
        (f["replicas_mean"].as_f64().unwrap() - 5.0).abs() < 1e-9,
        "{f:#}"
    );
    assert!(
        (f["usd_per_hour"].as_f64().unwrap() - 5.0 * 3.0).abs() < 1e-6,
        "{f:#}"
    );
}

/// Traffic `size` cannot split by model is refused with the field that says why.
#[test]
fn several_deployments_need_traffic_that_names_its_model() {
    let t = TempDir::new("size-deployments-bad");
    let text = r#"
name = "unsplit"
duration = "60s"

[[workers]]
count = 1
gpu = "h100"
model = "llama-3.1-8b"

[[workers]]
count = 1
gpu = "h100"
model = "llama-2-7b"

[workload]
kind = "poisson"
rate = 1.0
model = "llama-3.1-8b"
prompt = { dist = "fixed", tokens = 100 }
output = { dist = "fixed", tokens = 10 }

[autoscaler]
metric = "concurrency"
target = 8.0
max_replicas = 2

[slo]
ttft = "1s"
"#;
    let path = t.path("unsplit.toml");
    std::fs::write(&path, text).unwrap();
    let out = Command::cargo_bin("fleetsim")
        .unwrap()
        .arg("size")
        .arg(&path)
        .assert()
        .failure();
    let err = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(err.contains("unsplit.toml: workload.kind:"), "{err}");
    assert!(err.contains("kind = \"mix\""), "{err}");
}
