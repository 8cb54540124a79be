//! Fuzzing that runs simulations: proptest writes small whole scenarios, with faults, a gateway, KV
//! tiers, prefill/decode splits, hot-prefix replication, LoRA adapters, autoscaling, benchmark
//! harnesses and engines sharing GPUs, from values in and out of their ranges,
//! and runs every one that `validate` accepts to its end. A scenario may be refused; a run may not
//! panic, abort or hang, and must account for every request it admitted (arrived equals completed
//! plus failed plus rejected). A second target seeds itself with the bundled scenarios (`scenarios/*.toml`), cut to a
//! few seconds and a few dozen requests, with generated faults and gateway settings laid on top.
//!
//! Budgets: each scenario is at most a few seconds of arrivals, 60 requests and 16 workers of at most
//! 4,000 KV blocks (a few MiB), so a case runs in milliseconds; a run that would go on (a hung worker
//! whose requests wait on a long timeout) is bounded by the gateway's ranges and the engine's
//! simulated-time budget. `FLEETSIM_FUZZ_CASES` sets the cases per target (default 48).

use std::path::Path;

use fleetsim::engine::Simulation;
use fleetsim::scenario::Scenario;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};

fn config() -> Config {
    let cases = std::env::var("FLEETSIM_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48);
    Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::SourceParallel(
            "proptest-regressions",
        ))),
        max_shrink_time: 60_000,
        ..Config::default()
    }
}

/// Numbers for a key, mostly sensible, sometimes at or past the edge of its range.
fn number(sensible: &'static [&'static str]) -> impl Strategy<Value = String> {
    const EDGES: &[&str] = &["0", "-1", "1e-300", "1e300", "4000000000", "0.001", "1e6"];
    prop_oneof![
        4 => prop::sample::select(sensible).prop_map(str::to_string),
        1 => prop::sample::select(EDGES).prop_map(str::to_string),
    ]
}

/// Durations for a key, mostly sensible, sometimes extreme.
fn span(sensible: &'static [&'static str]) -> impl Strategy<Value = String> {
    const EDGES: &[&str] = &["0s", "1ns", "87600h", "2000h", "25h"];
    prop_oneof![
        4 => prop::sample::select(sensible).prop_map(|s| format!("\"{s}\"")),
        1 => prop::sample::select(EDGES).prop_map(|s| format!("\"{s}\"")),
    ]
}

/// `Some` three times in four: LoRA runs only when a group has `[workers.lora]` and the workload
/// names adapters, so both must be common for the pair to be.
fn mostly<S: Strategy + 'static>(s: S) -> impl Strategy<Value = Option<S::Value>>
where
    S::Value: Clone + std::fmt::Debug,
{
    prop_oneof![1 => Just(None), 3 => s.prop_map(Some)]
}

/// One `[[faults]]` entry for a fleet of `workers` workers.
fn fault(workers: usize) -> impl Strategy<Value = String> {
    let kind = prop::sample::select(
        &[
            "crash",
            "hang",
            "drain",
            "slowdown",
            "memory_pressure",
            "store_failure",
        ][..],
    );
    let target = prop_oneof![
        (0..workers as u32 + 1).prop_map(|w| format!("worker = {w}")),
        Just("worker = \"most_sessions\"".to_string()),
        Just("workers = [0, 1]".to_string()),
        Just("domain = \"rack-a\"".to_string()),
        Just(String::new()),
    ];
    let timing = prop_oneof![
        3 => span(&["0s", "500ms", "1s", "2s", "10s"]).prop_map(|t| format!("at = {t}")),
        1 => span(&["1s", "2s", "1m"]).prop_map(|m| format!("mtbf = {m}")),
    ];
    let restart = prop_oneof![
        Just(String::new()),
        Just("restart = false".to_string()),
        span(&["100ms", "1s", "5s"]).prop_map(|d| format!("restart_after = {d}")),
    ];
    let extra = prop_oneof![
        Just(String::new()),
        number(&["2.0", "10.0", "0.5"]).prop_map(|f| format!("factor = {f}")),
        number(&["0.5", "0.9", "1.0"]).prop_map(|f| format!("fraction = {f}")),
        span(&["0s", "1s", "30s"]).prop_map(|g| format!("grace = {g}")),
        span(&["500ms", "2s"]).prop_map(|d| format!("duration = {d}")),
        span(&["100ms", "1s"]).prop_map(|d| format!("mttr = {d}")),
        number(&["0.5", "1.5", "3.0"])
            .prop_map(|k| format!("distribution = \"weibull\"\nshape = {k}")),
        Just("kv_survives_restart = true".to_string()),
        Just("symptom = \"unreachable\"".to_string()),
    ];
    (kind, target, timing, restart, extra, 0..4u8).prop_map(
        |(kind, target, timing, restart, extra, strict)| {
            // Most entries keep only the keys their kind takes (and get the key it needs), so that
            // most scenarios run; one in four keeps whatever was drawn, to exercise the refusals.
            let keep = |line: &str| strict == 0 || fits(kind, line);
            let stochastic = timing.starts_with("mtbf");
            let needed = match kind {
                "slowdown" if !extra.starts_with("factor") => "factor = 3.0",
                "memory_pressure" if !extra.starts_with("fraction") => "fraction = 0.5",
                _ => "",
            };
            let mut t = format!("\n[[faults]]\nkind = \"{kind}\"\n");
            let timing = if stochastic && !keep("mtbf") {
                "at = \"1s\"".to_string()
            } else {
                timing
            };
            let stochastic = timing.starts_with("mtbf");
            for line in [
                target.as_str(),
                timing.as_str(),
                restart.as_str(),
                extra.as_str(),
            ] {
                let only_stochastic = line.starts_with("mttr") || line.starts_with("distribution");
                let target_line = line.starts_with("worker") || line.starts_with("domain");
                if line.is_empty()
                    || (strict != 0 && only_stochastic && !stochastic)
                    || (strict != 0 && target_line && kind == "store_failure")
                    || (strict != 0 && line.contains("most_sessions") && stochastic)
                    || !keep(line)
                {
                    continue;
                }
                t += line;
                t.push('\n');
            }
            if strict != 0 && target.is_empty() && !stochastic && kind != "store_failure" {
                t += "worker = 0\n";
            }
            t += needed;
            t.push('\n');
            t
        },
    )
}

/// Whether a fault entry's `line` (one key) applies to faults of `kind`.
fn fits(kind: &str, line: &str) -> bool {
    let key = line.split([' ', '=']).next().unwrap_or("");
    let kinds: &[&str] = match key {
        "factor" => &["slowdown"],
        "fraction" => &["memory_pressure"],
        "grace" => &["drain"],
        "duration" => &["slowdown", "memory_pressure", "store_failure"],
        "mtbf" | "mttr" | "distribution" | "restart" => &["crash", "hang"],
        "restart_after" => &["crash", "hang", "drain"],
        "kv_survives_restart" | "symptom" => &["crash"],
        _ => return true,
    };
    kinds.contains(&kind)
}

/// `[gateway]` keys, as `--set` overrides.
fn gateway() -> impl Strategy<Value = Vec<String>> {
    let one = prop_oneof![
        span(&["500ms", "1s", "5s"]).prop_map(|v| format!("gateway.health_check_interval={v}")),
        span(&["1s", "3s", "1m"]).prop_map(|v| format!("gateway.request_timeout={v}")),
        span(&["1s", "5s"]).prop_map(|v| format!("gateway.connect_timeout={v}")),
        number(&["0", "3", "20", "100"]).prop_map(|v| format!("gateway.max_retries={v}")),
        span(&["0s", "1ns", "100ms"]).prop_map(|v| format!("gateway.retry_backoff={v}")),
        prop::sample::select(&["fail", "retry", "migrate"][..])
            .prop_map(|v| format!("gateway.in_flight=\"{v}\"")),
        number(&["0", "1", "3"]).prop_map(|v| format!("gateway.migration_limit={v}")),
        prop::sample::select(&["client", "worker", "shared_tier"][..])
            .prop_map(|v| format!("gateway.session_state=\"{v}\"")),
        number(&["1", "2", "3"]).prop_map(|v| format!("gateway.health_check_failures={v}")),
    ];
    prop::collection::vec(one, 0..5)
}

/// An optional `[tiers.X]` table.
fn tiers() -> impl Strategy<Value = String> {
    let tier = |name: &'static str| {
        (
            number(&["0.01", "1.0", "64.0"]),
            number(&["1.0", "10.0", "25.0"]),
            number(&["1.0", "5.0"]),
            span(&["0s", "10us", "2ms"]),
        )
            .prop_map(move |(cap, read, write, latency)| {
                format!(
                    "\n[tiers.{name}]\ncapacity_gb = {cap}\nread_gb_per_s = {read}\nwrite_gb_per_s = {write}\nlatency = {latency}\n"
                )
            })
    };
    prop_oneof![
        2 => Just(String::new()),
        1 => tier("host"),
        1 => tier("disk"),
        1 => tier("shared"),
    ]
}

/// A small whole scenario: its TOML text and its `--set` overrides.
fn scenario() -> impl Strategy<Value = (String, Vec<String>)> {
    let groups = prop::collection::vec(
        (
            1u32..5,
            prop::sample::select(&[64u32, 500, 4000][..]),
            prop::sample::select(&["rack-a", "rack-b"][..]),
            0u32..3,
            prop::option::of(prop::sample::select(&["n1", "n2"][..])),
            prop::option::of(span(&["1s", "3s"])),
            // `[workers.lora]`: max_loras, extra CPU slots, max_lora_rank (12 is refused), the disk's
            // bandwidth and the adapted layers.
            mostly((
                1u32..5,
                0u32..3,
                prop::sample::select(&[8u32, 16, 16, 64, 12][..]),
                number(&["3", "0.5", "20"]),
                prop::sample::select(&["attention", "all_linear"][..]),
            )),
        ),
        1..4,
    );
    // `adapters`: count, Zipf exponent, rank.
    let adapters = mostly((
        1u32..50,
        prop::sample::select(&["0.0", "1.0", "1.5"][..]),
        prop::sample::select(&[8u32, 16, 32, 64][..]),
    ));
    let workload = (
        number(&["2.0", "10.0", "30.0"]),
        16u32..400,
        1u32..64,
        prop::sample::select(&["1s", "2s", "4s"][..]),
    );
    let router = prop::sample::select(
        &[
            "round_robin",
            "least_outstanding",
            "prefix_aware",
            "session_affinity",
            "least_kv",
            "lora_affinity",
            "llm_d",
        ][..],
    );
    // Router replicas, each with its own state, fed at random or by session, sharing decisions or not.
    let replicas = prop_oneof![
        3 => Just(String::new()),
        1 => Just("replicas = 3\n".to_string()),
        1 => Just("replicas = 2\nspread = \"session\"\nsync = \"decisions\"\n".to_string()),
        1 => Just("replicas = 2\nspread = \"round_robin\"\nsync = \"decisions\"\nsync_delay = \"0s\"\n".to_string()),
    ];
    let router = (router, replicas);
    let interconnect = prop_oneof![
        3 => Just(String::new()),
        1 => Just("\n[interconnect]\npeer_transfer = true\n".to_string()),
        1 => (number(&["0.5", "2.0"]), number(&["0.001", "50.0"])).prop_map(|(rate, bw)| format!(
            "\n[interconnect]\nrdma_gb_per_s = {bw}\n[interconnect.replication]\nrate_threshold = {rate}\ncopies = 2\nmin_prefix_tokens = 16\n"
        )),
    ];
    (groups, (workload, adapters), router, tiers(), interconnect, gateway(), 0..i64::MAX as u64, autoscaler())
        .prop_flat_map(|(groups, workload, router, tiers, interconnect, gateway, seed, scaler)| {
            let workers: usize = groups.iter().map(|g| g.0 as usize).sum();
            let faults = prop::collection::vec(fault(workers), 0..4);
            (
                Just((groups, workload, router, tiers, interconnect, gateway, seed, scaler)),
                faults,
            )
        })
        .prop_map(
            |((groups, ((rate, prompt, output, duration), adapters), router, tiers, interconnect, set, seed, scaler), faults)| {
                let mut t = format!(
                    "name = \"fuzz\"\nseed = {seed}\nduration = \"{duration}\"\nmax_requests = 60\n"
                );
                for (count, blocks, domain, split, node, start, lora) in groups {
                    t += &format!(
                        "\n[[workers]]\ncount = {count}\ngpu = \"h100\"\nmodel = \"llama-3.1-8b\"\nkv_blocks = {blocks}\nfailure_domain = \"{domain}\"\n"
                    );
                    // LoRA is refused with a prefill/decode split: keep the split to groups without it.
                    if split > 0 && split < count && lora.is_none() {
                        t += &format!("prefill_workers = {split}\n");
                    }
                    if let Some(n) = node {
                        t += &format!("node = \"{n}\"\n");
                    }
                    if let Some(s) = start {
                        t += &format!("start_at = {s}\n");
                    }
                    if let Some((slots, extra, rank, disk, targets)) = lora {
                        t += &format!(
                            "[workers.lora]\nmax_loras = {slots}\nmax_cpu_loras = {}\nmax_lora_rank = {rank}\nload_from_disk = \"50ms\"\ndisk_gb_per_s = {disk}\ntarget_modules = \"{targets}\"\n",
                            slots + extra
                        );
                    }
                }
                t += &format!(
                    "\n[workload]\nkind = \"poisson\"\nrate = {rate}\nprompt = {{ dist = \"fixed\", tokens = {prompt} }}\noutput = {{ dist = \"fixed\", tokens = {output} }}\nshared_prefix = {{ tokens = 64, groups = 2 }}\n"
                );
                if let Some((count, zipf, rank)) = adapters {
                    t += &format!("adapters = {{ count = {count}, zipf = {zipf}, rank = {rank} }}\n");
                }
                t += &format!("\n[router]\npolicy = \"{}\"\n{}", router.0, router.1);
                t += &tiers;
                t += &interconnect;
                t += &scaler;
                for f in faults {
                    t += &f;
                }
                (t, set)
            },
        )
}

/// An optional `[autoscaler]` (with one model on every group, it applies only to a fleet of one group;
/// others are rejected and skipped; `autoscaled_models` gives each group its own model).
fn autoscaler() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => Just(String::new()),
        1 => (
            0u32..3,
            1u32..6,
            prop::sample::select(&["queue_depth", "running", "concurrency", "kv_utilization", "rps", "slo"][..]),
            number(&["0.5", "1.0", "4.0"]),
            span(&["500ms", "2s", "15s"]),
            span(&["0s", "1s", "5s"]),
            span(&["0s", "2s", "1m"]),
            span(&["0s", "1s", "30s"]),
        )
            .prop_map(|(min, max, metric, target, interval, window, cold, grace)| {
                // The SLO planner has no per-replica target; with the third target value it runs its
                // load loop too (every 250 ms).
                let (target_line, planner) = match metric {
                    "slo" if target == "4.0" => (
                        String::new(),
                        "[autoscaler.planner]\nload_scaling = true\nload_interval = \"250ms\"\n",
                    ),
                    "slo" => (String::new(), ""),
                    _ => (format!("target = {target}\n"), ""),
                };
                format!(
                    "\n[autoscaler]\nmin_replicas = {min}\nmax_replicas = {max}\nmetric = \"{metric}\"\n{target_line}interval = {interval}\nscale_down_window = {window}\nimage_pull = {cold}\nweight_load = \"1s\"\nwarmup = \"1s\"\ndrain_grace = {grace}\nscale_to_zero_grace = {grace}\n{planner}"
                )
            }),
    ]
}

/// Two models, each its own autoscaled deployment (`[autoscaler.models.NAME]` bounds and targets), a
/// workload of two classes naming them (and sometimes a third model nobody serves), and faults.
fn autoscaled_models() -> impl Strategy<Value = String> {
    let model = |name: &'static str| {
        (0u32..3, 1u32..4, 0u32..4, number(&["0.5", "1.0", "4.0"])).prop_map(
            move |(min, spread, start, target)| {
                let max = min.max(1) + spread - 1;
                let count = (min + start).clamp(1, max);
                (name, min, max, count, target)
            },
        )
    };
    (
        model("llama-3.1-8b"),
        model("qwen3-8b"),
        autoscaler().prop_filter("an autoscaler", |a| !a.is_empty()),
        prop::collection::vec(fault(6), 0..3),
        any::<bool>(),
        0..i64::MAX as u64,
    )
        .prop_map(|(a, b, scaler, faults, stray, seed)| {
            let mut t = format!(
                "name = \"fuzz-models\"\nseed = {seed}\nduration = \"20s\"\nmax_requests = 80\n"
            );
            for (name, _, _, count, _) in [&a, &b] {
                t += &format!(
                    "\n[[workers]]\ncount = {count}\ngpu = \"h100\"\nmodel = \"{name}\"\nkv_blocks = 400\n"
                );
            }
            t += "\n[workload]\nkind = \"mix\"\n";
            let mut models = vec![a.0, b.0];
            if stray {
                models.push("mistral-7b");
            }
            for m in models {
                t += &format!(
                    "\n[[workload.classes]]\nname = \"{m}\"\n[workload.classes.traffic]\nkind = \"poisson\"\nmodel = \"{m}\"\nrate = 3.0\nprompt = {{ dist = \"fixed\", tokens = 64 }}\noutput = {{ dist = \"fixed\", tokens = 8 }}\n"
                );
            }
            t += "\n[router]\npolicy = \"least_outstanding\"\n";
            t += &scaler;
            let slo = scaler.contains("metric = \"slo\"");
            for (name, min, max, _, target) in [&a, &b] {
                t += &format!(
                    "\n[autoscaler.models.\"{name}\"]\nmin_replicas = {min}\nmax_replicas = {max}\n"
                );
                if !slo {
                    t += &format!("target = {target}\n");
                }
            }
            for f in faults {
                t += &f;
            }
            t
        })
}

/// A staged workload (inference-perf's client) of 1–4 stages on a small fleet, with faults laid on:
/// constant or Poisson spacing, a question pool or not, a request cap.
fn staged() -> impl Strategy<Value = String> {
    let stage = (number(&["0.5", "3.0", "12.0"]), 1u32..6);
    (
        prop::collection::vec(stage, 1..5),
        prop::sample::select(&["constant", "poisson"][..]),
        any::<bool>(),
        5u32..200,
        prop::sample::select(&["least_outstanding", "random", "prefix_aware", "llm_d"][..]),
        prop::collection::vec(fault(3), 0..3),
        0..i64::MAX as u64,
    )
        .prop_map(|(stages, load, pool, cap, policy, faults, seed)| {
            // Always capped: an edge rate (1e6 a second) would otherwise send millions.
            let mut t = format!(
                "name = \"fuzz-stages\"\nseed = {seed}\nduration = \"10m\"\nmax_requests = {cap}\n"
            );
            t += "\n[[workers]]\ncount = 3\ngpu = \"h100\"\nmodel = \"llama-3.1-8b\"\nkv_blocks = 600\n";
            t += &format!("\n[workload]\nkind = \"stages\"\nload = \"{load}\"\nstages = [");
            for (rate, secs) in &stages {
                t += &format!("{{ rate = {rate}, duration = \"{secs}s\" }}, ");
            }
            t += "]\nprompt = { dist = \"uniform\", min = 16, max = 200 }\noutput = { dist = \"fixed\", tokens = 8 }\n";
            if pool {
                t += "shared_prefix = { groups = 4, tokens = 128, questions = 3 }\n";
            }
            t += &format!("\n[router]\npolicy = \"{policy}\"\n");
            for f in faults {
                t += &f;
            }
            t
        })
}

/// A benchmark client of any harness with its own options, mostly sensible, sometimes at the edge, on a
/// small fleet, sometimes with faults.
fn benchmark() -> impl Strategy<Value = String> {
    let option = prop_oneof![
        number(&["0.2", "0.5"]).prop_map(|v| format!("random_range_ratio = {v}")),
        number(&["0", "10", "300"]).prop_map(|v| format!("synthetic_input_tokens_stddev = {v}")),
        number(&["0", "5", "40"]).prop_map(|v| format!("output_tokens_stddev = {v}")),
        number(&["0", "1", "3"]).prop_map(|v| format!("warmup_request_count = {v}")),
        number(&["10", "100"]).prop_map(|v| format!("prompt_tokens_stdev = {v}")),
        number(&["16", "64"]).prop_map(|v| format!("prompt_tokens_min = {v}")),
        number(&["400", "900"]).prop_map(|v| format!("output_tokens_max = {v}")),
        number(&["0.5", "50", "5000"]).prop_map(|v| format!("request_rate = {v}")),
        number(&["0", "0.25", "3"]).prop_map(|v| format!("warmup = {v}")),
        number(&["0.1", "2", "500"]).prop_map(|v| format!("cooldown = {v}")),
        number(&["0.5", "5", "60"]).prop_map(|v| format!("max_seconds = {v}")),
    ];
    (
        prop::sample::select(
            &["vllm-bench", "inferencemax", "aiperf", "genai-perf", "guidellm"][..],
        ),
        prop::collection::vec(option, 0..3),
        1u32..20,
        mostly(1u32..80),
        prop::collection::vec(fault(2), 0..2),
        0..i64::MAX as u64,
        any::<bool>(),
        prop::sample::select(&["0ms", "2ms", "50ms"][..]),
    )
        .prop_map(|(harness, options, clients, requests, faults, seed, conversations, window)| {
            let mut t = format!("name = \"fuzz-bench\"\nseed = {seed}\nduration = \"30m\"\n");
            t += "\n[[workers]]\ncount = 2\ngpu = \"h100\"\nmodel = \"llama-3.1-8b\"\nkv_blocks = 800\n";
            t += &format!(
                "\n[workload]\nkind = \"benchmark\"\nharness = \"{harness}\"\nclients = {clients}\n"
            );
            if !conversations {
                t += "prompt = { dist = \"fixed\", tokens = 300 }\noutput = { dist = \"fixed\", tokens = 12 }\n";
            }
            if let Some(n) = requests {
                t += &format!("requests = {n}\n");
            }
            t += &format!("options = {{ {} }}\n", options.join(", "));
            // vLLM's tokenization micro-batch window, off, as in v0.10–v0.11, or long.
            t += &format!("frontend = {{ tokenizer_batch_wait = \"{window}\" }}\n");
            if conversations {
                // KubeAI's dataset (vllm-bench only: other harnesses refuse it).
                t += "[workload.conversation_prompts]\nconversations = 4\nmessages = { dist = \"uniform\", min = 1, max = 12 }\n";
                t += "user = { dist = \"exponential\", mean = 40, min = 1 }\nreply = { dist = \"exponential\", mean = 12, min = 1 }\npool = 12\n";
            }
            for f in faults {
                t += &f;
            }
            t
        })
}

/// Two or three groups sharing their GPUs (`colocate`), each serving its own model, taking turns or on
/// MIG slices (whose sums may not fit: such fleets are refused and skipped), with a mix of traffic for
/// the models, sometimes swaps, a router and faults.
fn colocated() -> impl Strategy<Value = String> {
    const MODELS: [&str; 3] = ["llama-3.1-8b", "qwen3-8b", "mistral-7b"];
    let slice = prop::sample::select(&["1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb"][..]);
    (
        2usize..4,
        1u32..4,
        prop::sample::select(&["0.3", "0.33", "0.45", "0.6"][..]),
        prop::collection::vec(number(&["1.0", "5.0", "20.0"]), 3),
        any::<bool>(),
        prop::sample::select(&["round_robin", "least_outstanding", "prefix_aware", "llm_d"][..]),
        prop::collection::vec(fault(9), 0..3),
        prop::option::of(prop::collection::vec(slice, 3)),
        0..i64::MAX as u64,
    )
        .prop_map(|(groups, count, share, rates, swaps, policy, faults, mig, seed)| {
            let mut t = format!(
                "name = \"fuzz-colocated\"\nseed = {seed}\nduration = \"20s\"\nmax_requests = 80\n"
            );
            for (i, m) in MODELS[..groups].iter().enumerate() {
                t += &format!(
                    "\n[[workers]]\ncount = {count}\ngpu = \"h100\"\nmodel = \"{m}\"\nprecision = \"fp8\"\ngpu_memory_utilization = {share}\ncolocate = \"shared\"\n"
                );
                if let Some(slices) = &mig {
                    t += &format!("mig = \"{}\"\n", slices[i]);
                }
                if swaps {
                    let others: Vec<String> = MODELS
                        .iter()
                        .filter(|o| *o != m)
                        .map(|o| format!("\"{o}\""))
                        .collect();
                    t += &format!("models = [{}]\n", others.join(", "));
                }
            }
            t += "\n[workload]\nkind = \"mix\"\n";
            for (m, rate) in MODELS.iter().zip(&rates) {
                t += &format!(
                    "\n[[workload.classes]]\nname = \"{m}\"\n[workload.classes.traffic]\nkind = \"poisson\"\nmodel = \"{m}\"\nrate = {rate}\nprompt = {{ dist = \"uniform\", min = 16, max = 3000 }}\noutput = {{ dist = \"uniform\", min = 1, max = 64 }}\n"
                );
            }
            t += &format!("\n[router]\npolicy = \"{policy}\"\n");
            for f in faults {
                t += &f;
            }
            t
        })
}

/// Validates and, if valid and within its limits, runs `text` with `set` to its end, checking that
/// every request is accounted for.
fn run(text: &str, file: &str, set: &[String]) {
    let Ok(s) = Scenario::parse(text, file, set) else {
        return;
    };
    if fleetsim::limits::check(&s).is_err() {
        return;
    }
    let Ok(sim) = Simulation::from_scenario(&s) else {
        return;
    };
    let out = sim
        .try_run(&mut |_| {})
        .expect("a generated workload does not fail");
    let r = &out.summary.requests;
    assert_eq!(
        r.arrived,
        r.completed + r.failed + r.rejected,
        "every request accounted for:\n{text}\n{set:?}"
    );
    // A staged client: every arrival belongs to a stage, and no stage sends before the previous one
    // has drained, its interval (1 s) and its lead-in (1 s) have passed.
    if let Some(st) = &out.summary.stages {
        let sent: u64 = st.stages.iter().map(|s| s.requests).sum();
        assert_eq!(sent, r.arrived, "every arrival is in a stage:\n{text}");
        let done: u64 = st.stages.iter().map(|s| s.completed).sum();
        assert_eq!(done, r.completed, "every completion is in a stage:\n{text}");
        let sending: Vec<_> = st.stages.iter().filter(|s| s.requests > 0).collect();
        for w in sending.windows(2) {
            assert!(
                w[1].start_s > w[0].end_s + 2.0 - 1e-9,
                "stage drained before the next: {w:?}\n{text}"
            );
        }
    }
    // A benchmark client (whose window outlasts its budget): without a failed or rejected request, it
    // measures exactly its budget after exactly its warm-up requests.
    if let (Some(b), Ok(cfg)) = (&out.summary.benchmark, s.workload.closed_loop())
        && s.workload.kind == fleetsim::workload::WorkloadKind::Benchmark
        && r.failed == 0
        && r.rejected == 0
        && s.faults.is_empty()
    {
        // The budget, capped by the scenario's `max_requests` (`--set` on a bundled closed loop).
        let budget = cfg.requests.map_or(u64::MAX, |n| u64::from(n.0));
        let budget = budget.min(s.max_requests.unwrap_or(u64::MAX));
        // A request rate creates the budget over budget / rate seconds: the window may end first.
        let window = s.duration.as_secs_f64();
        let cut = cfg
            .client
            .request_rate
            .is_some_and(|r| r * window < 2.0 * budget as f64 + 20.0);
        // GuideLLM's `--max-seconds` stops it early: what it sent either completed or was cancelled,
        // and at most one request per stream was still streaming when the time ran out.
        let timed = cfg.client.max_seconds.is_some();
        if timed {
            assert!(
                b.cancelled <= u64::from(cfg.clients.0),
                "at most one cancelled per stream:\n{text}"
            );
            assert_eq!(
                r.arrived,
                b.completed() + b.cancelled,
                "every request sent completed or was cancelled:\n{text}\n{set:?}"
            );
        } else {
            assert_eq!(b.cancelled, 0, "{text}");
        }
        let warm = b.warmup.as_ref().map_or(0, |w| w.requests);
        let want = if cfg.frontend.enabled {
            u64::from(cfg.client.warmup_requests)
        } else {
            0
        };
        assert_eq!(warm, want, "its warm-up:\n{text}");
        // GuideLLM's phases leave out at most W + 1 requests that ended before its window and C + 1
        // sent after it (`BenchLog::measured`).
        if let Some(w) = b.window.as_ref().filter(|_| !timed) {
            let p = fleetsim::metrics::bench::TransientPhases::of(
                cfg.client.transient.0,
                cfg.client.transient.1,
                budget,
                cfg.client.max_seconds,
            );
            let most = p
                .warmup
                .map_or(0, |w| w.saturating_add(1))
                .saturating_add(p.cooldown.map_or(0, |c| c.saturating_add(1)));
            assert!(b.requests <= w.completed, "{text}");
            assert!(w.completed - b.requests <= most, "{text}\n{w:?}");
        }
        if cut || timed {
            assert!(b.completed() <= budget, "at most the budget:\n{text}");
        } else {
            assert_eq!(
                b.completed(),
                budget,
                "the harness's budget:\n{text}\n{set:?}"
            );
            assert_eq!(r.arrived, budget + warm, "nothing else sent:\n{text}");
        }
    }
    // With adapters, several autoscaled models or shared GPUs, the same scenario runs to the same
    // summary, byte for byte.
    if s.workload.adapters.is_some()
        || s.autoscaler.as_ref().is_some_and(|_| s.workers.len() > 1)
        || s.workers.iter().any(|g| g.colocate.is_some())
    {
        let again = Simulation::from_scenario(&s)
            .unwrap()
            .try_run(&mut |_| {})
            .unwrap();
        assert_eq!(
            serde_json::to_string(&out.summary).unwrap(),
            serde_json::to_string(&again.summary).unwrap(),
            "deterministic:\n{text}\n{set:?}"
        );
    }
}

/// The bundled scenarios, cut to a few seconds and a few dozen requests.
fn bundled() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            (
                p.display().to_string(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn generated_scenarios_run_to_the_end_and_lose_no_request((text, set) in scenario()) {
        run(&text, "fuzz.toml", &set);
    }

    #[test]
    fn staged_clients_drain_each_stage_and_lose_no_request(text in staged()) {
        run(&text, "fuzz-stages.toml", &[]);
    }

    #[test]
    fn benchmark_clients_send_their_budget_and_lose_no_request(text in benchmark()) {
        run(&text, "fuzz-bench.toml", &[]);
    }

    #[test]
    fn engines_sharing_gpus_run_to_the_end_deterministically(text in colocated()) {
        run(&text, "fuzz-colocated.toml", &[]);
    }

    #[test]
    fn several_autoscaled_models_run_to_the_end_deterministically(text in autoscaled_models()) {
        run(&text, "fuzz-models.toml", &[]);
    }

    #[test]
    fn bundled_scenarios_with_faults_laid_on_run_to_the_end(
        pick in any::<prop::sample::Index>(),
        faults in prop::collection::vec(fault(4), 0..3),
        gateway in gateway(),
    ) {
        let seeds = bundled();
        let (file, base) = pick.get(&seeds);
        let mut text = base.clone();
        for f in &faults {
            text += f;
        }
        let mut set = vec!["duration=\"3s\"".to_string(), "max_requests=40".to_string()];
        set.extend(gateway);
        run(&text, file, &set);
    }
}
