//! A new user's malformed and absurd inputs, across every command: each must end with a message that names
//! the problem (or succeed where the input is legal), within a time and memory bound, and leave every
//! input file byte-identical.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Wall-clock bound of one command (debug build, a loaded machine): every case is a rejection or a tiny run.
const TIME_LIMIT: Duration = Duration::from_secs(60);
/// Address-space bound of one command, KiB (`ulimit -v`): the blow-ups this guards against asked for
/// tens of GiB.
const MEMORY_LIMIT_KIB: u64 = 4 * 1024 * 1024;

/// What a case must do.
enum Expect {
    /// Exit non-zero; stderr contains every one of these.
    Fail(&'static [&'static str]),
    /// Exit zero; stdout or stderr contains every one of these.
    Ok(&'static [&'static str]),
}
use Expect::{Fail, Ok};

const GOOD: &str = r#"
name = "good"
seed = 1
duration = "10s"

[[workers]]
count = 2
gpu = "h100"
model = "llama-3.1-8b"
precision = "bf16"
max_num_seqs = 64

[workload]
kind = "poisson"
rate = 5.0
prompt = { dist = "fixed", tokens = 100 }
output = { dist = "fixed", tokens = 10 }

[router]
policy = "least_outstanding"

[slo]
ttft = "500ms"
"#;

const TRACE_SCENARIO: &str = r#"
name = "replay"
duration = "1h"
[[workers]]
count = 1
gpu = "h100"
model = "llama-3.1-8b"
[workload]
kind = "trace"
path = "x.jsonl"
"#;

#[rustfmt::skip]
/// Scenario files made from GOOD by one replacement: (file name, from, to, expectation).
const SCENARIO_EDITS: &[(&str, &str, &str, Expect)] = &[
    ("warmup-typo", "[slo]", "[metrics]\nwarmup = \"atuo\"\n\n[slo]", Fail(&["warmup-typo.toml:23:", "warmup", "\"auto\", \"none\" or a duration", "atuo"])),
    ("warmup-too-long", "[slo]", "[metrics]\nwarmup = \"10s\"\n\n[slo]", Fail(&["warmup-too-long.toml:23:", "metrics.warmup", "shorter than `duration`"])),
    ("warmup-fixed", "[slo]", "[metrics]\nwarmup = \"2s\"\n\n[slo]", Ok(&["steady state from 2.0 s (fixed warm-up"])),
    ("count0", "count = 2", "count = 0", Fail(&["count0.toml:7:", "count", "at least 1"])),
    ("empty-dataset", "kind = \"poisson\"\nrate = 5.0\nprompt = { dist = \"fixed\", tokens = 100 }\noutput = { dist = \"fixed\", tokens = 10 }", "kind = \"benchmark\"\nharness = \"vllm-bench\"\nclients = 4\nrequests = 10\n\n[workload.conversation_prompts]\nconversations = 1\nmessages = { dist = \"fixed\", tokens = 1 }\nuser = { dist = \"fixed\", tokens = 2 }\nreply = { dist = \"fixed\", tokens = 2 }", Fail(&["empty-dataset.toml:19:", "workload.conversation_prompts", "no prompt passes"])),
    ("count-neg", "count = 2", "count = -1", Fail(&["count", "at least 1"])),
    ("count-frac", "count = 2", "count = 4.5", Fail(&["count", "expected a whole number", "4.5"])),
    ("count-text", "count = 2", "count = \"two\"", Fail(&["count", "whole number", "two"])),
    ("count-4e9", "count = 2", "count = 4000000000", Fail(&["workers", "GiB of memory", "--force"])),
    ("count-2e32", "count = 2", "count = 4294967296", Fail(&["count", "at least 1"])),
    ("gpu-typo", "gpu = \"h100\"", "gpu = \"h10\"", Fail(&["gpu", "did you mean `h100`"])),
    ("gpu-empty", "gpu = \"h100\"", "gpu = \"\"", Fail(&["gpu", "unknown name"])),
    ("gpu-number", "gpu = \"h100\"", "gpu = 100", Fail(&["gpu"])),
    ("a100-fp8", "gpu = \"h100\"\nmodel = \"llama-3.1-8b\"\nprecision = \"bf16\"", "gpu = \"a100\"\nmodel = \"llama-3.1-8b\"\nprecision = \"fp8\"", Fail(&["precision", "no FP8"])),
    ("model-typo", "model = \"llama-3.1-8b\"", "model = \"llama-3.1-8\"", Fail(&["model", "did you mean `llama-3.1-8b`"])),
    ("model-too-big", "model = \"llama-3.1-8b\"", "model = \"llama-3.1-70b\"", Fail(&["model", "does not fit"])),
    ("tp3", "precision = \"bf16\"", "precision = \"bf16\"\ntp = 3", Fail(&["tp", "1, 2, 4 or 8"])),
    ("tp16", "precision = \"bf16\"", "precision = \"bf16\"\ntp = 16", Fail(&["tp", "1, 2, 4 or 8"])),
    ("precision-fp4", "precision = \"bf16\"", "precision = \"fp4\"", Fail(&["precision", "unknown name `fp4`"])),
    ("seqs0", "max_num_seqs = 64", "max_num_seqs = 0", Fail(&["max_num_seqs", "at least 1"])),
    ("batched0", "max_num_seqs = 64", "max_num_batched_tokens = 0", Fail(&["max_num_batched_tokens", "at least 1"])),
    ("block0", "max_num_seqs = 64", "block_size = 0", Fail(&["block_size", "at least 1"])),
    ("block4e9", "max_num_seqs = 64", "block_size = 4000000000", Fail(&["block_size", "one block needs"])),
    ("util-1.5", "max_num_seqs = 64", "gpu_memory_utilization = 1.5", Fail(&["gpu_memory_utilization", "fraction"])),
    ("util-0", "max_num_seqs = 64", "gpu_memory_utilization = 0", Fail(&["gpu_memory_utilization", "greater than 0"])),
    ("util-nan", "max_num_seqs = 64", "gpu_memory_utilization = nan", Fail(&["gpu_memory_utilization", "NaN"])),
    ("kv0", "max_num_seqs = 64", "kv_blocks = 0", Fail(&["kv_blocks", "at least 1"])),
    ("profile-missing", "max_num_seqs = 64", "profile = \"nope.toml\"", Fail(&["profile", "nope.toml"])),
    ("dur-huge", "duration = \"10s\"", "duration = \"1000000000h\"", Fail(&["duration", "10 years"])),
    ("dur-huge-number", "duration = \"10s\"", "duration = 1e20", Fail(&["duration", "10 years"])),
    ("dur-zero", "duration = \"10s\"", "duration = \"0s\"", Fail(&["duration", "greater than 0"])),
    ("dur-neg", "duration = \"10s\"", "duration = \"-5s\"", Fail(&["duration", "zero or positive"])),
    ("dur-unit", "duration = \"10s\"", "duration = \"5 parsecs\"", Fail(&["duration", "unknown unit"])),
    ("dur-nan", "duration = \"10s\"", "duration = nan", Fail(&["duration"])),
    ("rate-1e30", "rate = 5.0", "rate = 1e30", Fail(&["workload.rate", "requests expected", "--force"])),
    ("rate-neg", "rate = 5.0", "rate = -5.0", Fail(&["rate", "greater than 0"])),
    ("rate-zero", "rate = 5.0", "rate = 0", Fail(&["rate", "greater than 0"])),
    ("rate-nan", "rate = 5.0", "rate = nan", Fail(&["rate", "NaN"])),
    ("rate-inf", "rate = 5.0", "rate = inf", Fail(&["rate", "greater than 0"])),
    ("rate-text", "rate = 5.0", "rate = \"fast\"", Fail(&["rate", "expected a number", "fast"])),
    ("rate-missing", "rate = 5.0", "", Fail(&["workload.rate", "required"])),
    ("gamma-no-cv", "kind = \"poisson\"", "kind = \"gamma\"", Fail(&["workload.cv", "required"])),
    ("kind-typo", "kind = \"poisson\"", "kind = \"poison\"", Fail(&["kind", "did you mean `poisson`"])),
    ("prompt-0", "tokens = 100", "tokens = 0", Fail(&["tokens", "at least 1"])),
    ("prompt-neg", "tokens = 100", "tokens = -100", Fail(&["tokens"])),
    ("prompt-dist", "dist = \"fixed\", tokens = 100", "dist = \"normal\", tokens = 100", Fail(&["dist", "unknown name"])),
    ("prompt-key", "tokens = 100", "median = 100", Fail(&["prompt"])),
    ("seed-neg", "seed = 1", "seed = -1", Fail(&["seed", "whole number"])),
    ("seed-frac", "seed = 1", "seed = 1.5", Fail(&["seed", "whole number"])),
    ("unknown-key", "seed = 1", "seed = 1\nspeed = 9", Fail(&["speed", "unknown field"])),
    ("no-name", "name = \"good\"", "", Fail(&["name", "missing"])),
    ("max-requests-neg", "seed = 1", "seed = 1\nmax_requests = -5", Fail(&["max_requests", "whole number"])),
    ("policy-typo", "policy = \"least_outstanding\"", "policy = \"llm-d\"", Fail(&["policy-typo.toml:20:", "did you mean `llm_d`"])),
    ("policy-param-typo", "policy = \"least_outstanding\"", "policy = \"prefix_aware\"\nload_weigth = 2", Fail(&["policy-param-typo.toml:21:", "load_weigth", "did you mean `load_weight`"])),
    ("policy-param-wrong-policy", "policy = \"least_outstanding\"", "policy = \"round_robin\"\nttl = \"5m\"", Fail(&["ttl"])),
    ("router-view", "policy = \"least_outstanding\"", "policy = \"prefix_aware\"\nview = \"psychic\"", Fail(&["view", "psychic"])),
    ("question-pool-zipf", "rate = 5.0", "rate = 5.0\nshared_prefix = { groups = 4, tokens = 64, zipf = 1.1, questions = 3 }", Fail(&["question-pool-zipf.toml:", "shared_prefix.questions", "zipf"])),
    ("router-replicas-zero", "policy = \"least_outstanding\"", "policy = \"llm_d\"\nreplicas = 0", Fail(&["router-replicas-zero.toml:21:", "`replicas`", "at least 1"])),
    ("router-replicas-many", "policy = \"least_outstanding\"", "policy = \"llm_d\"\nreplicas = 5000", Fail(&["router-replicas-many.toml:21:", "`replicas`", "at most 256"])),
    ("router-spread", "policy = \"least_outstanding\"", "policy = \"llm_d\"\nreplicas = 2\nspread = \"sticky\"", Fail(&["router-spread.toml:22:", "`spread`", "sticky", "`session`"])),
    ("router-sync-delay", "policy = \"least_outstanding\"", "policy = \"llm_d\"\nsync = \"decisions\"\nsync_delay = \"soon\"", Fail(&["router-sync-delay.toml:22:", "sync_delay", "soon"])),
    ("llm-d-version", "policy = \"least_outstanding\"", "policy = \"llm_d\"\nversion = \"v0.7\"", Fail(&["llm-d-version.toml:21:", "`version`", "v0.7", "`v0.8` or `v0.10`"])),
    ("llm-d-version-number", "policy = \"least_outstanding\"", "policy = \"llm_d\"\nversion = 0.8", Fail(&["llm-d-version-number.toml:", "(`version = \"v0.10\"`)", "got the number 0.8"])),
    ("sglang-tree", "policy = \"least_outstanding\"", "policy = \"sglang_cache_aware\"\ntree = \"tokens\"", Fail(&["sglang-tree.toml:21:", "tokens", "`characters`"])),
    ("sglang-chars-zero", "policy = \"least_outstanding\"", "policy = \"sglang_cache_aware\"\nchars_per_token = 0", Fail(&["sglang-chars-zero.toml:", "`chars_per_token`", "greater than 0"])),
    ("slo-neg", "ttft = \"500ms\"", "ttft = \"-1s\"", Fail(&["ttft", "zero or positive"])),
    ("slo-key", "ttft = \"500ms\"", "ttft = \"500ms\"\nitl = \"5ms\"", Fail(&["itl", "unknown field"])),
    ("toml-syntax", "[[workers]]", "[[workers]", Fail(&["toml-syntax.toml:"])),
    ("fraction-2", "output = { dist = \"fixed\", tokens = 10 }", "output = { dist = \"fixed\", tokens = 10 }\nshared_prefix = { groups = 2, tokens = 10, fraction = 2.0 }", Fail(&["fraction"])),
    ("clients-4e9", "kind = \"poisson\"\nrate = 5.0", "kind = \"concurrency\"\nclients = 4000000000", Fail(&["workload.clients", "memory"])),
    ("role-typo", "max_num_seqs = 64", "max_num_seqs = 64\nrole = \"prefil\"", Fail(&["role-typo.toml:", "role", "prefil"])),
    ("role-decode-only", "max_num_seqs = 64", "max_num_seqs = 64\nrole = \"decode\"", Fail(&["role-decode-only.toml:12:", "workers[0].role", "decode-only fleet"])),
    ("role-prefill-only", "max_num_seqs = 64", "max_num_seqs = 64\nrole = \"prefill\"", Fail(&["workers[0].role", "prefill-only fleet"])),
    ("split-too-many", "max_num_seqs = 64", "max_num_seqs = 64\nprefill_workers = 3", Fail(&["split-too-many.toml:12:", "workers[0].prefill_workers", "3 prefill workers out of a group of 2"])),
    ("split-and-role", "max_num_seqs = 64", "max_num_seqs = 64\nprefill_workers = 1\nrole = \"decode\"", Fail(&["workers[0].prefill_workers", "must be \"both\""])),
    ("pd-no-link", "max_num_seqs = 64", "max_num_seqs = 64\nprefill_workers = 1\n\n[interconnect]\nacross_nodes = false\n", Fail(&["pd-no-link.toml:15:", "interconnect.across_nodes", "no link"])),
    ("pd-nodes-apart", "max_num_seqs = 64", "max_num_seqs = 64\nrole = \"prefill\"\nnode = \"a\"\n\n[[workers]]\ncount = 1\ngpu = \"h100\"\nmodel = \"llama-3.1-8b\"\nrole = \"decode\"\nnode = \"b\"\n\n[interconnect]\nacross_nodes = false\n", Fail(&["interconnect.across_nodes", "node \"a\"", "node \"b\"", "no link"])),
    ("pd-session-worker", "max_num_seqs = 64", "max_num_seqs = 64\nprefill_workers = 1\n\n[gateway]\nsession_state = \"worker\"\n", Fail(&["gateway.session_state", "disaggregated"])),
    ("rdma-zero", "max_num_seqs = 64", "max_num_seqs = 64\n\n[interconnect]\nrdma_gb_per_s = 0\n", Fail(&["rdma-zero.toml:14:", "rdma_gb_per_s", "greater than 0"])),
    ("nvlink-neg", "max_num_seqs = 64", "max_num_seqs = 64\n\n[interconnect]\nnvlink_gb_per_s = -450\n", Fail(&["nvlink-neg.toml:14:", "nvlink_gb_per_s", "greater than 0"])),
    ("repl-threshold-zero", "max_num_seqs = 64", "max_num_seqs = 64\n\n[interconnect.replication]\nrate_threshold = 0\n", Fail(&["repl-threshold-zero.toml:14:", "rate_threshold", "greater than 0"])),
    ("repl-threshold-neg", "max_num_seqs = 64", "max_num_seqs = 64\n\n[interconnect.replication]\nrate_threshold = -2.5\n", Fail(&["repl-threshold-neg.toml:14:", "rate_threshold", "greater than 0"])),
    ("repl-copies-zero", "max_num_seqs = 64", "max_num_seqs = 64\n\n[interconnect.replication]\nrate_threshold = 1.0\ncopies = 0\n", Fail(&["repl-copies-zero.toml:15:", "copies", "at least 1"])),
    ("repl-copies-one", "max_num_seqs = 64", "max_num_seqs = 64\n\n[interconnect.replication]\nrate_threshold = 1.0\ncopies = 1\n", Fail(&["repl-copies-one.toml:15:", "interconnect.replication.copies", "never copy"])),
    ("repl-window-zero", "max_num_seqs = 64", "max_num_seqs = 64\n\n[interconnect.replication]\nrate_threshold = 1.0\nwindow = \"0s\"\n", Fail(&["repl-window-zero.toml:15:", "interconnect.replication.window", "greater than 0"])),
    ("repl-no-link", "max_num_seqs = 64", "max_num_seqs = 64\n\n[interconnect]\nacross_nodes = false\n\n[interconnect.replication]\nrate_threshold = 1.0\n", Fail(&["repl-no-link.toml:16:", "interconnect.replication", "no worker could reach another"])),
    ("repl-one-worker", "count = 2\ngpu = \"h100\"\nmodel = \"llama-3.1-8b\"\nprecision = \"bf16\"\nmax_num_seqs = 64", "count = 1\ngpu = \"h100\"\nmodel = \"llama-3.1-8b\"\nprecision = \"bf16\"\nmax_num_seqs = 64\n\n[interconnect.replication]\nrate_threshold = 1.0\n", Fail(&["repl-one-worker.toml:13:", "interconnect.replication", "one worker"])),
    ("repl-typo", "max_num_seqs = 64", "max_num_seqs = 64\n\n[interconnect.replication]\nrate_treshold = 1.0\n", Fail(&["repl-typo.toml:", "rate_treshold"])),
    ("tier-capacity-zero", "max_num_seqs = 64", "max_num_seqs = 64\n\n[tiers.host]\ncapacity_gb = 0\nread_gb_per_s = 25\nwrite_gb_per_s = 25\nlatency = \"10us\"\n", Fail(&["tier-capacity-zero.toml:14:", "capacity_gb", "greater than 0"])),
    ("tier-bandwidth-neg", "max_num_seqs = 64", "max_num_seqs = 64\n\n[tiers.disk]\ncapacity_gb = 100\nread_gb_per_s = -7\nwrite_gb_per_s = 5\nlatency = \"100us\"\n", Fail(&["tier-bandwidth-neg.toml:15:", "read_gb_per_s", "greater than 0"])),
    ("as-min-over-max", "[slo]", "[autoscaler]\nmin_replicas = 3\nmax_replicas = 2\nmetric = \"rps\"\ntarget = 1.0\n\n[slo]", Fail(&["as-min-over-max.toml:23:", "autoscaler.min_replicas", "at most max_replicas (2), got 3"])),
    ("as-interval-zero", "[slo]", "[autoscaler]\nmax_replicas = 4\nmetric = \"rps\"\ntarget = 1.0\ninterval = \"0s\"\n\n[slo]", Fail(&["as-interval-zero.toml:26:", "autoscaler.interval", "must be between"])),
    ("as-interval-neg", "[slo]", "[autoscaler]\nmax_replicas = 4\nmetric = \"rps\"\ntarget = 1.0\ninterval = \"-15s\"\n\n[slo]", Fail(&["as-interval-neg.toml:26:", "interval", "zero or positive"])),
    ("as-target-zero", "[slo]", "[autoscaler]\nmax_replicas = 4\nmetric = \"rps\"\ntarget = 0\n\n[slo]", Fail(&["as-target-zero.toml:25:", "target", "greater than 0"])),
    ("as-target-neg", "[slo]", "[autoscaler]\nmax_replicas = 4\nmetric = \"rps\"\ntarget = -2.0\n\n[slo]", Fail(&["as-target-neg.toml:25:", "target", "greater than 0"])),
    ("as-metric-typo", "[slo]", "[autoscaler]\nmax_replicas = 4\nmetric = \"queue_lenght\"\ntarget = 1.0\n\n[slo]", Fail(&["as-metric-typo.toml:24:", "metric", "queue_lenght"])),
    ("as-count-outside", "[slo]", "[autoscaler]\nmin_replicas = 3\nmax_replicas = 4\nmetric = \"rps\"\ntarget = 1.0\n\n[slo]", Fail(&["as-count-outside.toml:7:", "workers[0].count", "between autoscaler.min_replicas (3)"])),
    ("as-key-typo", "[slo]", "[autoscaler]\nmax_replicas = 4\nmetric = \"rps\"\ntarget = 1.0\ncooldown = \"5m\"\n\n[slo]", Fail(&["as-key-typo.toml:26:", "cooldown", "unknown field"])),
    ("kv-dtype-typo", "precision = \"bf16\"", "precision = \"bf16\"\nkv_cache_dtype = \"fp4\"", Fail(&["kv-dtype-typo.toml:11:", "kv_cache_dtype", "fp4"])),
    ("as-good", "[slo]", "[autoscaler]\nmax_replicas = 4\nmetric = \"rps\"\ntarget = 1.0\n\n[slo]", Ok(&["| TTFT |"])),
    ("as-model-unknown", "[slo]", "[autoscaler]\nmax_replicas = 4\nmetric = \"rps\"\ntarget = 1.0\n\n[autoscaler.models.qwen3-8b]\nmax_replicas = 2\n\n[slo]", Fail(&["as-model-unknown.toml:27:", "autoscaler.models.\"qwen3-8b\"", "no worker group serves this model", "`llama-3.1-8b`"])),
    ("as-model-min-over-max", "[slo]", "[autoscaler]\nmin_replicas = 2\nmax_replicas = 4\nmetric = \"rps\"\ntarget = 1.0\n\n[autoscaler.models.\"llama-3.1-8b\"]\nmax_replicas = 1\n\n[slo]", Fail(&["as-model-min-over-max.toml:29:", "autoscaler.models.\"llama-3.1-8b\".max_replicas", "at most max_replicas (1), got 2"])),
    ("as-model-typo", "[slo]", "[autoscaler]\nmax_replicas = 4\nmetric = \"rps\"\ntarget = 1.0\n\n[autoscaler.models.\"llama-3.1-8b\"]\nmax_replica = 1\n\n[slo]", Fail(&["as-model-typo.toml:28:", "max_replica", "unknown field"])),
    ("as-same-model-twice", "[slo]", "[[workers]]\ncount = 1\ngpu = \"a100\"\nmodel = \"llama-3.1-8b\"\n\n[autoscaler]\nmax_replicas = 4\nmetric = \"rps\"\ntarget = 1.0\n\n[slo]", Fail(&["as-same-model-twice.toml:25:", "workers[1].model", "workers[0] serves `llama-3.1-8b` too"])),
    ("as-model-count-outside", "[slo]", "[[workers]]\ncount = 3\ngpu = \"h100\"\nmodel = \"qwen3-8b\"\n\n[autoscaler]\nmax_replicas = 4\nmetric = \"rps\"\ntarget = 1.0\n\n[autoscaler.models.qwen3-8b]\nmax_replicas = 2\n\n[slo]", Fail(&["as-model-count-outside.toml:23:", "workers[1].count", "between autoscaler.models.\"qwen3-8b\".min_replicas (1) and autoscaler.models.\"qwen3-8b\".max_replicas (2), got 3"])),
    ("as-two-models-good", "[slo]", "[[workers]]\ncount = 1\ngpu = \"h100\"\nmodel = \"qwen3-8b\"\n\n[autoscaler]\nmax_replicas = 3\nmetric = \"rps\"\ntarget = 1.0\n\n[autoscaler.models.qwen3-8b]\nmin_replicas = 0\n\n[slo]", Ok(&["| Autoscaled model |", "| qwen3-8b | 1 | 0–3 |"])),
    ("lora-cpu-below", "max_num_seqs = 64", "max_num_seqs = 64\n\n[workers.lora]\nmax_loras = 4\nmax_cpu_loras = 2\n", Fail(&["lora-cpu-below.toml:15:", "workers[0].lora.max_cpu_loras", "at least max_loras (4), got 2"])),
    ("lora-rank-odd", "max_num_seqs = 64", "max_num_seqs = 64\n\n[workers.lora]\nmax_lora_rank = 12\n", Fail(&["lora-rank-odd.toml:14:", "workers[0].lora.max_lora_rank", "got 12"])),
    ("lora-rank-no-default", "max_num_seqs = 64", "max_num_seqs = 64\n\n[workers.lora]\nmax_lora_rank = 128\n", Fail(&["lora-rank-no-default.toml:13:", "workers[0].lora.step_multiplier", "max_lora_rank = 128"])),
    ("lora-typo", "max_num_seqs = 64", "max_num_seqs = 64\n\n[workers.lora]\nmax_lora = 4\n", Fail(&["lora-typo.toml:14:", "max_lora", "unknown field"])),
    ("adapters-unknown-base", "max_num_seqs = 64", "max_num_seqs = 64\n\n[workers.lora]\nmax_loras = 2\n", Fail(&["adapters-unknown-base.toml:22:", "base", "llama-9"])),
    ("adapters-base-not-served", "max_num_seqs = 64", "max_num_seqs = 64\n\n[workers.lora]\nmax_loras = 2\n", Fail(&["adapters-base-not-served.toml:22:", "workload.adapters.base", "qwen3-8b", "not served by any [[workers]] group"])),
    ("adapters-no-lora", "tokens = 10 }", "tokens = 10 }\nadapters = { count = 4 }", Fail(&["adapters-no-lora.toml:18:", "workload.adapters", "[workers.lora]"])),
    ("adapters-count-zero", "max_num_seqs = 64", "max_num_seqs = 64\n\n[workers.lora]\nmax_loras = 2\n", Fail(&["adapters-count-zero.toml:22:", "count", "at least 1"])),
    ("lora-good", "max_num_seqs = 64", "max_num_seqs = 64\n\n[workers.lora]\nmax_loras = 2\n", Ok(&["| TTFT |"])),
    ("pd-good", "max_num_seqs = 64", "max_num_seqs = 64\nprefill_workers = 1", Ok(&["P/D disaggregation", "1 / 1 / 0"])),
    ("huge-prompt-all-rejected", "tokens = 100", "tokens = 3000000", Ok(&["longer than every worker's KV capacity", "| TTFT | – |"])),
];

#[rustfmt::skip]
/// Command lines: (arguments, expectation). `{dir}` is the case directory.
const COMMANDS: &[(&[&str], Expect)] = &[
    // --set
    (&["validate", "good.toml", "--set", "workload.rate=abc"], Fail(&["--set workload.rate=abc", "workload.rate", "expected a number"])),
    (&["validate", "good.toml", "--set", "router.policy=llm-d"], Fail(&["router.policy", "did you mean `llm_d`"])),
    (&["compare", "good.toml", "--policies", "llm_d:version=v0.9"], Fail(&["llm_d:version=v0.9", "v0.9", "`v0.8` or `v0.10`"])),
    (&["validate", "good.toml", "--set", "workers[3].count=1"], Fail(&["no element 3"])),
    (&["validate", "good.toml", "--set", "workers[x].count=1"], Fail(&["bad index"])),
    (&["validate", "good.toml", "--set", "workers[0].count=1.5"], Fail(&["workers[0].count", "whole number"])),
    (&["validate", "good.toml", "--set", "nonsense"], Fail(&["key.path=value"])),
    (&["validate", "good.toml", "--set", "workload.rate=1e30"], Fail(&["requests expected"])),
    (&["validate", "good.toml", "--set", "workload.rate=1e30", "--force"], Ok(&["note:", "ok"])),
    (&["validate", "good.toml", "--set", "duration=\"1000000000h\""], Fail(&["10 years"])),
    (&["validate", "good.toml", "--set", "workload.rate.x=1"], Fail(&["not a table"])),
    (&["validate", "good.toml", "--set", "bogus=1"], Fail(&["bogus", "unknown field"])),
    // files that are not scenarios
    (&["validate", "missing.toml"], Fail(&["missing.toml", "cannot read"])),
    (&["validate", "sub"], Fail(&["sub", "cannot read"])),
    (&["validate", "garbage.toml"], Fail(&["garbage.toml"])),
    (&["validate", "empty.toml"], Fail(&["empty.toml", "missing field"])),
    (&["validate", "replay-dup.toml"], Fail(&["dup.jsonl:2", "used by an earlier row"])),
    (&["validate", "replay.toml"], Ok(&["ok"])),
    // run and compare: output checked first, never over an input
    (&["run", "good.toml", "--quiet", "--out", "good.toml"], Fail(&["good.toml", "input"])),
    (&["run", "good.toml", "--quiet", "--out", "x.jsonl"], Fail(&["x.jsonl", "not a directory"])),
    (&["run", "good.toml", "--quiet", "--out", "x.jsonl/results"], Fail(&["cannot create results directory"])),
    (&["run", "rate-1e30.toml", "--quiet"], Fail(&["requests expected", "--force"])),
    (&["run", "good.toml", "--quiet", "--out", "results"], Ok(&["results written to results"])),
    (&["compare", "good.toml", "--policies", "round_robin", "--threads", "0"], Fail(&["--threads"])),
    (&["compare", "good.toml", "--policies", "round_robin", "--threads", "100000"], Fail(&["--threads"])),
    (&["compare", "good.toml", "--policies", "teleport"], Fail(&["teleport"])),
    (&["compare", "good.toml"], Fail(&["--policies"])),
    (&["compare", "good.toml", "--policies", "round_robin", "--out", "good.toml"], Fail(&["input"])),
    (&["compare", "count-4e9.toml", "--policies", "round_robin"], Fail(&["memory"])),
    // estimate
    (&["estimate", "--gpu", "h10", "--model", "llama-3.1-8b", "--prompt", "10", "--output", "10"], Fail(&["--gpu", "did you mean `h100`"])),
    (&["estimate", "--gpu", "a100", "--model", "llama-3.1-8b", "--precision", "fp8", "--prompt", "10", "--output", "10"], Fail(&["no FP8"])),
    (&["estimate", "--gpu", "h100", "--model", "llama-9", "--prompt", "10", "--output", "10"], Fail(&["--model", "llama-9"])),
    (&["estimate", "--gpu", "h100", "--model", "llama-3.1-8b", "--prompt", "10", "--output", "10", "--concurrency", "100000000"], Fail(&["--concurrency"])),
    (&["estimate", "--gpu", "h100", "--model", "llama-3.1-8b", "--prompt", "10", "--output", "10", "--concurrency", "0"], Fail(&["--concurrency"])),
    (&["estimate", "--gpu", "h100", "--model", "llama-3.1-8b", "--prompt", "10", "--output", "10", "--concurrency", "2", "--requests", "4000000000"], Fail(&["--requests"])),
    (&["estimate", "--gpu", "h100", "--model", "llama-3.1-8b", "--prompt", "10", "--output", "10", "--tp", "3"], Fail(&["1, 2, 4 or 8"])),
    (&["estimate", "--gpu", "h100", "--model", "llama-3.1-8b", "--prompt", "0", "--output", "10"], Fail(&["--prompt"])),
    (&["estimate", "--gpu", "h100", "--model", "llama-3.1-8b", "--prompt", "abc", "--output", "10"], Fail(&["--prompt"])),
    (&["estimate", "--gpu", "h100", "--model", "llama-3.1-8b", "--prompt", "10", "--output", "10", "--profile", "missing.toml"], Fail(&["missing.toml"])),
    (&["estimate", "--gpu", "h100", "--model", "llama-3.1-8b", "--prompt", "10", "--output", "10", "--profile", "good.toml"], Fail(&["good.toml"])),
    // calibrate
    (&["calibrate", "--measurements", "m.csv", "--gpu", "h100", "--model", "llama-3.1-8b", "--out", "m.csv"], Fail(&["m.csv", "input"])),
    (&["calibrate", "--measurements", "m.csv", "--gpu", "h100", "--model", "llama-3.1-8b", "--out", "./m.csv"], Fail(&["input"])),
    (&["calibrate", "--measurements", "absurd.csv", "--gpu", "h100", "--model", "llama-3.1-8b", "--out", "p.toml"], Fail(&["absurd.csv:3", "latency_ms", "slower than"])),
    (&["calibrate", "--measurements", "missing.csv", "--gpu", "h100", "--model", "llama-3.1-8b", "--out", "p.toml"], Fail(&["missing.csv", "cannot read"])),
    (&["calibrate", "--measurements", "empty.toml", "--gpu", "h100", "--model", "llama-3.1-8b", "--out", "p.toml"], Fail(&["empty.toml", "header"])),
    (&["calibrate", "--measurements", "m.csv", "--gpu", "a100", "--model", "llama-3.1-8b", "--precision", "fp8", "--out", "p.toml"], Fail(&["no FP8"])),
    (&["calibrate", "--measurements", "m.csv", "--gpu", "h100", "--model", "llama-3.1-8b", "--tp", "3", "--out", "p.toml"], Fail(&["1, 2, 4 or 8"])),
    (&["calibrate", "--measurements", "m.csv", "--gpu", "h100", "--model", "llama-3.1-8b", "--out", "sub"], Fail(&["sub", "directory"])),
    (&["calibrate", "--measurements", "m.csv", "--gpu", "h100", "--model", "llama-3.1-8b", "--out", "p.toml"], Ok(&["wrote p.toml"])),
    (&["calibrate", "--data", "missing-dir"], Fail(&["missing-dir"])),
    (&["calibrate", "--check", "--write"], Fail(&["--write"])),
    // trace convert: never into its input
    (&["trace", "convert", "x.jsonl", "x.jsonl"], Fail(&["input"])),
    (&["trace", "convert", "x.jsonl", "./x.jsonl"], Fail(&["input"])),
    (&["trace", "convert", "x.jsonl", "{dir}/x.jsonl"], Fail(&["input"])),
    (&["trace", "convert", "x.jsonl", "link.jsonl"], Fail(&["input"])),
    (&["trace", "convert", "x.jsonl", "sub/../x.jsonl"], Fail(&["input"])),
    (&["trace", "convert", "x.jsonl", "sub"], Fail(&["directory"])),
    (&["trace", "convert", "x.jsonl", "out.jsonl", "--to", "azure"], Fail(&["--to", "azure"])),
    (&["trace", "convert", "x.jsonl", "out.jsonl", "--to", "burstgpt"], Fail(&["--to", "burstgpt"])),
    (&["trace", "convert", "x.jsonl", "out.jsonl", "--to", "mooncake", "--block-size", "0"], Fail(&["--block-size"])),
    (&["trace", "convert", "moon.jsonl", "out.jsonl", "--hash-block-size", "0"], Fail(&["--hash-block-size"])),
    (&["trace", "convert", "x.jsonl", "out.jsonl", "--speedup", "0"], Fail(&["--speedup"])),
    (&["trace", "convert", "x.jsonl", "out.jsonl", "--speedup", "nan"], Fail(&["--speedup"])),
    (&["trace", "convert", "missing.jsonl", "out.jsonl"], Fail(&["missing.jsonl"])),
    (&["trace", "convert", "dup.jsonl", "dup-out.jsonl"], Fail(&["dup.jsonl:2", "used by an earlier row"])),
    (&["trace", "convert", "x.jsonl", "out.csv"], Ok(&["wrote 3 requests to out.csv"])),
    // trace stats: malformed traces of every format
    (&["trace", "stats", "x.jsonl", "--block-size", "0"], Fail(&["--block-size"])),
    (&["trace", "stats", "huge.jsonl"], Fail(&["huge.jsonl:1", "too large"])),
    (&["trace", "stats", "garbage.toml"], Fail(&["garbage.toml"])),
    (&["trace", "stats", "x.jsonl", "--format", "vidur"], Fail(&["x.jsonl"])),
    (&["trace", "stats", "x.jsonl", "--jitter=-1s"], Fail(&["--jitter"])),
    (&["trace", "stats", "x.jsonl", "--start", "1000000000h"], Fail(&["10 years"])),
    (&["trace", "stats", "moon-bad.jsonl"], Fail(&["moon-bad.jsonl:2"])),
    (&["trace", "stats", "azure-bad.csv"], Fail(&["azure-bad.csv:3"])),
    (&["trace", "stats", "vidur-bad.csv"], Fail(&["vidur-bad.csv:2"])),
    (&["trace", "stats", "burst-bad.csv"], Fail(&["burst-bad.csv:2"])),
    (&["trace", "stats", "native-order.jsonl"], Fail(&["native-order.jsonl:2", "arrival order"])),
    (&["trace", "stats", "x.jsonl", "--skip-bad-lines"], Ok(&["requests"])),
    // trace gen
    (&["trace", "gen", "good.toml", "-o", "good.toml"], Fail(&["input"])),
    (&["trace", "gen", "replay.toml", "-o", "x.jsonl"], Fail(&["input"])),
    (&["trace", "gen", "good.toml", "-o", "gen.jsonl", "--block-size", "0"], Fail(&["--block-size"])),
    (&["trace", "gen", "good.toml", "-o", "gen.jsonl", "--to", "burstgpt"], Fail(&["--to"])),
    (&["trace", "gen", "rate-1e30.toml", "-o", "gen.jsonl"], Fail(&["requests expected"])),
    (&["trace", "gen", "good.toml", "-o", "gen.jsonl"], Ok(&["wrote"])),
    // the command line itself
    (&["teleport"], Fail(&["teleport"])),
    (&["run"], Fail(&["SCENARIO"])),
];

/// The case directory: the good scenario, every edited scenario, traces, measurements.
fn setup(dir: &Path) {
    let w = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    w("good.toml", GOOD);
    for (name, from, to, _) in SCENARIO_EDITS {
        assert!(GOOD.contains(from), "{name}: `{from}` is not in GOOD");
        let text = GOOD.replacen(from, to, 1);
        // The adapter cases edit the workload too.
        let adapters = match *name {
            "adapters-unknown-base" => Some("adapters = { count = 4, base = \"llama-9\" }"),
            "adapters-base-not-served" => Some("adapters = { count = 4, base = \"qwen3-8b\" }"),
            "adapters-count-zero" => Some("adapters = { count = 0 }"),
            "lora-good" => Some("adapters = { count = 4, zipf = 0.5 }"),
            _ => None,
        };
        let text = match adapters {
            Some(a) => text.replacen("tokens = 10 }", &format!("tokens = 10 }}\n{a}"), 1),
            None => text,
        };
        w(&format!("{name}.toml"), &text);
    }
    w("replay.toml", TRACE_SCENARIO);
    w(
        "replay-dup.toml",
        &TRACE_SCENARIO.replace("x.jsonl", "dup.jsonl"),
    );
    w(
        "x.jsonl",
        "{\"id\":0,\"arrival\":0,\"input\":10,\"output\":2}\n{\"id\":1,\"arrival\":1,\"input\":20,\"output\":3}\n{\"id\":2,\"arrival\":2,\"input\":30,\"output\":4}\n",
    );
    w(
        "dup.jsonl",
        "{\"id\":1,\"arrival\":0,\"input\":10,\"output\":2}\n{\"id\":1,\"arrival\":1,\"input\":10,\"output\":2}\n",
    );
    w(
        "huge.jsonl",
        "{\"id\":0,\"arrival\":0,\"input\":1000000000,\"output\":2}\n",
    );
    w(
        "native-order.jsonl",
        "{\"arrival\":5,\"input\":10,\"output\":2}\n{\"arrival\":1,\"input\":10,\"output\":2}\n",
    );
    w(
        "moon.jsonl",
        "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [0, 1]}\n",
    );
    w(
        "moon-bad.jsonl",
        "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [0, 1]}\n{\"timestamp\": 1, \"input_length\": -3, \"output_length\": 5, \"hash_ids\": [0]}\n",
    );
    w(
        "azure-bad.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,4808,10\n2023-11-16 18:17:04.0319600,abc,8\n",
    );
    w(
        "vidur-bad.csv",
        "arrived_at,num_prefill_tokens,num_decode_tokens\n0,nan,1\n",
    );
    w(
        "burst-bad.csv",
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,-472,18,490,Conversation log\n",
    );
    w(
        "garbage.toml",
        "\u{0}\u{1}\u{2}[[[ not toml at all ]]]\n\u{7f}",
    );
    w("empty.toml", "");
    let measured = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("data/calibration/example/h100-llama-3.1-8b.csv"),
    )
    .unwrap();
    w("m.csv", &measured);
    let rows: Vec<&str> = measured.lines().filter(|l| !l.starts_with('#')).collect();
    let mut absurd = vec![rows[0], rows[1], "1,256,0,1000000000,absurd"];
    absurd.extend(&rows[2..]);
    w("absurd.csv", &(absurd.join("\n") + "\n"));
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink("x.jsonl", dir.join("link.jsonl")).unwrap();
}

/// Every regular file under `dir` and its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let meta = std::fs::symlink_metadata(&p).unwrap();
        if meta.is_file() {
            out.insert(p.clone(), std::fs::read(&p).unwrap());
        }
    }
    out
}

fn run_case(dir: &Path, args: &[String]) -> (bool, String, Duration) {
    let bin = env!("CARGO_BIN_EXE_fleetsim");
    let started = Instant::now();
    let mut cmd = if cfg!(unix) {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(format!("ulimit -v {MEMORY_LIMIT_KIB}; exec \"$0\" \"$@\""))
            .arg(bin)
            .args(args);
        c
    } else {
        let mut c = Command::new(bin);
        c.args(args);
        c
    };
    let out = cmd.current_dir(dir).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text, started.elapsed())
}

#[test]
fn a_hundred_bad_inputs_fail_clearly_quickly_and_touch_no_input() {
    let dir = std::env::temp_dir().join(format!("fleetsim-bad-inputs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    setup(&dir);
    let before = snapshot(&dir);
    let mut cases: Vec<(Vec<String>, &Expect)> = SCENARIO_EDITS
        .iter()
        .map(|(name, _, _, e)| {
            let cmd = match e {
                Fail(_) => "validate",
                Ok(_) => "run",
            };
            (vec![cmd.to_string(), format!("{name}.toml")], e)
        })
        .collect();
    for (args, e) in COMMANDS {
        let args = args
            .iter()
            .map(|a| a.replace("{dir}", &dir.display().to_string()))
            .collect();
        cases.push((args, e));
    }
    assert!(cases.len() >= 100, "{} cases", cases.len());
    let mut failures = Vec::new();
    for (args, expect) in &cases {
        let (ok, text, took) = run_case(&dir, args);
        let (want_ok, needles) = match expect {
            Fail(n) => (false, *n),
            Ok(n) => (true, *n),
        };
        let missing: Vec<&&str> = needles.iter().filter(|n| !text.contains(**n)).collect();
        if ok != want_ok || !missing.is_empty() || text.contains("panicked") {
            failures.push(format!(
                "fleetsim {}: exit {}, expected {}; missing {missing:?}\n{text}",
                args.join(" "),
                if ok { "0" } else { "non-zero" },
                if want_ok { "0" } else { "non-zero" },
            ));
        }
        if took > TIME_LIMIT {
            failures.push(format!("fleetsim {}: took {took:?}", args.join(" ")));
        }
        if !want_ok && text.lines().filter(|l| l.starts_with("error:")).count() > 1 {
            failures.push(format!(
                "fleetsim {}: more than one error line\n{text}",
                args.join(" ")
            ));
        }
    }
    let after = snapshot(&dir);
    for (path, bytes) in &before {
        match after.get(path) {
            Some(b) if b == bytes => {}
            _ => failures.push(format!("input {} changed", path.display())),
        }
    }
    // A refused or failed write leaves no file behind, not even a temporary one.
    assert!(
        !dir.join("dup-out.jsonl").exists(),
        "a failed convert left its output"
    );
    for p in after.keys() {
        let name = p.file_name().unwrap().to_string_lossy();
        assert!(
            !name.contains("fleetsim-tmp"),
            "temporary file left: {name}"
        );
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `trace convert` into its own input, however spelt, is refused before anything is opened for writing,
/// and the input keeps every byte.
#[test]
fn trace_convert_never_writes_into_its_input() {
    let dir = std::env::temp_dir().join(format!("fleetsim-convert-self-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("x.jsonl");
    let text = "{\"id\":0,\"arrival\":0,\"input\":10,\"output\":2}\n";
    std::fs::write(&input, text).unwrap();
    let mut targets = vec![
        "./x.jsonl".to_string(),
        input.display().to_string(),
        dir.join(".").join("x.jsonl").display().to_string(),
    ];
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&input, dir.join("link.jsonl")).unwrap();
        std::fs::hard_link(&input, dir.join("hard.jsonl")).unwrap();
        targets.push("link.jsonl".into());
        targets.push("hard.jsonl".into());
    }
    for target in &targets {
        for to in ["native", "mooncake", "vidur"] {
            let args = ["trace", "convert", "x.jsonl", target, "--to", to].map(String::from);
            let (ok, out, _) = run_case(&dir, &args);
            assert!(!ok, "convert into {target} succeeded:\n{out}");
            assert!(out.contains("refusing to overwrite an input"), "{out}");
            assert_eq!(std::fs::read_to_string(&input).unwrap(), text, "{target}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
