use super::locate::index_segments;
use super::overrides::split_path;
use super::*;
use crate::hardware::{ModelId, PerfModel, Precision};
use crate::routing::PolicyConfig;

const GOOD: &str = r#"
name = "t"
seed = 3
duration = "60s"

[[workers]]
count = 2
gpu = "h100"
model = "llama-3.1-8b"

[workload]
kind = "poisson"
rate = 5.0
prompt = { dist = "fixed", tokens = 100 }
output = { dist = "fixed", tokens = 10 }

[router]
policy = "least_outstanding"
"#;

fn err(text: &str) -> String {
    Scenario::parse(text, "s.toml", &[])
        .unwrap_err()
        .to_string()
}

#[test]
fn a_pool_too_large_to_index_is_refused_with_its_field() {
    let e = err(&GOOD.replace("count = 2", "count = 2\nkv_blocks = 3000000000"));
    assert!(
        e.contains("kv_blocks") && e.contains("at most 2147483646"),
        "{e}"
    );
}

#[test]
fn parses_a_good_scenario() {
    let s = Scenario::parse(GOOD, "s.toml", &[]).unwrap();
    assert_eq!(s.worker_count(), 2);
    assert_eq!(s.router.policy, PolicyConfig::LeastOutstanding {});
    assert_eq!(s.duration, SimDuration::from_secs(60));
}

#[test]
fn errors_name_file_line_and_field() {
    let e = err(&GOOD.replace("count = 2", "count = 0"));
    assert!(e.starts_with("s.toml:7:"), "{e}");
    assert!(e.contains("at least 1"), "{e}");

    let e = err(&GOOD.replace("gpu = \"h100\"", "gpu = \"h900\""));
    assert!(e.starts_with("s.toml:8:") && e.contains("h900"), "{e}");

    let e = err(&GOOD.replace("seed = 3", "seed = 3\nbogus = 1"));
    assert!(e.contains("bogus"), "{e}");

    let e = err(&GOOD.replace("rate = 5.0", "rate = -5.0"));
    assert!(
        e.starts_with("s.toml:13:8: `rate`: expected a number greater than 0"),
        "{e}"
    );

    let e = err(&GOOD.replace("tokens = 100", "tokens = -100"));
    assert!(e.starts_with("s.toml:14:") && e.contains("`tokens`"), "{e}");

    let e = err(&GOOD.replace("tokens = 100", "median = 100"));
    assert!(
        e.starts_with("s.toml:14") && e.contains("workload.prompt.median"),
        "{e}"
    );

    let e = err(&GOOD.replace("kind = \"poisson\"", "kind = \"gamma\""));
    assert!(e.contains("workload.cv: required"), "{e}");

    let e = err(&GOOD.replace("count = 2", "count = \"two\""));
    assert!(e.starts_with("s.toml:7:"), "{e}");

    let e = err(&GOOD.replace("model = \"llama-3.1-8b\"", "model = \"llama-3.1-70b\""));
    assert!(
        e.starts_with("s.toml:9") && e.contains("does not fit"),
        "{e}"
    );
}

#[test]
fn meta_notes_parse_and_unknown_meta_keys_name_their_line() {
    let s = Scenario::parse(
        &format!(
            "{GOOD}\n[meta]\nquestion = \"which router?\"\nretest_when = [\"vLLM 0.12\", \"B200\"]\n"
        ),
        "s.toml",
        &[],
    )
    .unwrap();
    assert_eq!(s.meta.question.as_deref(), Some("which router?"));
    assert_eq!(s.meta.conclusion, None);
    assert_eq!(s.meta.retest_when, ["vLLM 0.12", "B200"]);
    // Without [meta], no notes.
    assert_eq!(
        Scenario::parse(GOOD, "s.toml", &[]).unwrap().meta,
        Meta::default()
    );
    // GOOD's lines, then a blank line, `[meta]`, and the misspelt key.
    let line = GOOD.lines().count() + 3;
    let e = err(&format!("{GOOD}\n[meta]\nquestoin = \"q\"\n"));
    assert!(e.starts_with(&format!("s.toml:{line}:")), "{e}");
    assert!(e.contains("questoin"), "{e}");
    let e = err(&format!("{GOOD}\n[meta]\nretest_when = \"B200\"\n"));
    assert!(e.starts_with(&format!("s.toml:{line}:")), "{e}");
}

/// A group that leaves out the step budget or the sequence cap gets `vllm serve`'s default for its
/// GPU (vllm/engine/arg_utils.py: 8,192 tokens and 1,024 sequences on an H100; 2,048 and 256 on an
/// A100, excluded by name); a key set in the file or by `--set` is kept.
#[test]
fn engine_limits_default_per_gpu_unless_set() {
    let limits = |text: &str, sets: &[&str]| {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let s = Scenario::parse(text, "s.toml", &sets).unwrap();
        let w = &s.workers[0];
        (w.max_num_batched_tokens.0, w.max_num_seqs.0)
    };
    assert_eq!(limits(GOOD, &[]), (8192, 1024));
    let a100 = GOOD.replace("gpu = \"h100\"", "gpu = \"a100\"");
    assert_eq!(limits(&a100, &[]), (2048, 256));
    let set = GOOD.replace("count = 2", "count = 2\nmax_num_seqs = 64");
    assert_eq!(limits(&set, &[]), (8192, 64));
    assert_eq!(
        limits(&a100, &["workers[0].max_num_batched_tokens=4096"]),
        (4096, 256)
    );
}

/// The serialised scenario is the resolved one: defaults the file left out are there.
#[test]
fn the_serialised_scenario_fills_in_every_default() {
    let s = Scenario::parse(GOOD, "s.toml", &[]).unwrap();
    let v = serde_json::to_value(&s).unwrap();
    // GOOD sets none of these; the values are vLLM's defaults (block 16 tokens, 1,024 sequences
    // on an H100, 90 % of GPU memory) and tp 1.
    let w = &v["workers"][0];
    assert_eq!(w["block_size"], 16);
    assert_eq!(w["max_num_seqs"], 1024);
    assert_eq!(w["gpu_memory_utilization"], 0.9);
    assert_eq!(w["tp"], 1);
    assert_eq!(v["seed"], 3);
    assert_eq!(v["duration"], "60s");
    // The router's flat table: the policy and the settings side by side, the view resolved.
    assert_eq!(v["router"]["policy"], "least_outstanding");
    assert!(v["router"]["view"].is_string(), "{}", v["router"]);
    assert!(v["router"]["event_delay"].is_string(), "{}", v["router"]);
    assert!(v["gateway"]["request_timeout"].is_string());
    assert_eq!(v["meta"]["retest_when"], serde_json::json!([]));
}

#[test]
fn overrides_apply_to_nested_keys_and_arrays() {
    let s = Scenario::parse(
        GOOD,
        "s.toml",
        &[
            "workers[0].count=5".into(),
            "workload.rate=9".into(),
            "router.policy=random".into(),
        ],
    )
    .unwrap();
    assert_eq!(s.worker_count(), 5);
    assert_eq!(s.workload.rate.unwrap().0, 9.0);
    assert_eq!(s.router.policy, PolicyConfig::Random {});
    let dotted = Scenario::parse(GOOD, "s.toml", &["workers.0.count=7".into()]).unwrap();
    assert_eq!(dotted.worker_count(), 7);
    let e = Scenario::parse(GOOD, "s.toml", &["workers[3].count=1".into()]).unwrap_err();
    assert!(e.to_string().contains("no element 3"), "{e}");
}

/// `kv_cache_dtype`: an FP8 cache needs a GPU with FP8; unset, an FP8 group's cache is BF16 (vLLM's
/// `auto`), and `"fp8"` holds twice its tokens with the same weights.
#[test]
fn kv_cache_dtype_is_checked_and_sets_the_cache_s_bytes() {
    let a100 = GOOD.replace("gpu = \"h100\"", "gpu = \"a100\"\nkv_cache_dtype = \"fp8\"");
    let e = err(&a100);
    assert!(e.contains("workers[0].kv_cache_dtype"), "{e}");
    let fp8 = GOOD.replace("gpu = \"h100\"", "gpu = \"h100\"\nprecision = \"fp8\"");
    let with = |kv: &str| {
        fp8.replace(
            "precision = \"fp8\"",
            &format!("precision = \"fp8\"\nkv_cache_dtype = \"{kv}\""),
        )
    };
    let g = |text: &str| Scenario::parse(text, "s.toml", &[]).unwrap().workers[0].clone();
    let (unset, bf16, fp8_cache) = (g(&fp8), g(&with("bf16")), g(&with("fp8")));
    assert_eq!(unset.kv_dtype(), Precision::Bf16);
    assert_eq!(
        unset.perf().kv_bytes_per_token_per_gpu(),
        bf16.perf().kv_bytes_per_token_per_gpu()
    );
    let (a, b) = (fp8_cache.perf(), unset.perf());
    assert_eq!(
        b.kv_bytes_per_token_per_gpu(),
        2.0 * a.kv_bytes_per_token_per_gpu()
    );
    assert_eq!(b.weight_bytes_per_gpu(), a.weight_bytes_per_gpu());
    let (na, nb) = (fp8_cache.kv_blocks().unwrap(), unset.kv_blocks().unwrap());
    assert!(nb == na / 2 || nb + 1 == na / 2, "{na} {nb}");
    // Attention runs the kernels of the cache's data type: a BF16 cache takes the BF16 profile's
    // attention efficiencies (slower than FP8 FlashAttention-3), an FP8 cache keeps the FP8 ones.
    let bf16_profile = PerfModel::calibrated(GpuId::H100, ModelId::Llama31_8b, 1, Precision::Bf16);
    let fp8_profile = PerfModel::calibrated(GpuId::H100, ModelId::Llama31_8b, 1, Precision::Fp8);
    assert_eq!(b.eff.attention, bf16_profile.eff.attention);
    assert_eq!(b.eff.kv_memory, bf16_profile.eff.kv_memory);
    assert_eq!(b.eff.memory, fp8_profile.eff.memory);
    assert_eq!(a.eff, fp8_profile.eff);
    assert_eq!(
        b.provenance.profile,
        "h100/llama-3.1-8b/tp1/fp8 (attention: h100/llama-3.1-8b/tp1/bf16)"
    );
    assert!(b.provenance.calibrated);
    assert!(b.decode_step_seconds(64, 4096) > a.decode_step_seconds(64, 4096));
}

/// A quoted segment may hold dots (a model's name), as in a TOML dotted key.
#[test]
fn override_paths_take_quoted_segments_whole() {
    assert_eq!(
        split_path(r#"autoscaler.models."llama-3.1-8b".max_replicas"#),
        ["autoscaler", "models", "\"llama-3.1-8b\"", "max_replicas"]
    );
    let text = format!("{GOOD}\n[autoscaler]\nmax_replicas = 4\nmetric = \"rps\"\ntarget = 1.0\n");
    let s = Scenario::parse(
        &text,
        "s.toml",
        &[r#"autoscaler.models."llama-3.1-8b".max_replicas=3"#.into()],
    );
    let a = s.unwrap().autoscaler.unwrap();
    assert_eq!(a.models["llama-3.1-8b"].max_replicas.unwrap().0, 3);
    assert_eq!(index_segments(r#"workers.0."a.b""#), r#"workers[0]."a.b""#);
}
