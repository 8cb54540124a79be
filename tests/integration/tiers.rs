//! KV offload tiers: a host tier behaves as more cache, loads are priced, bad tier sections are refused.

use std::collections::{BTreeMap, HashMap};

use crate::common::{run, scenario, trace_path};

/// The first `N` requests of the Mooncake conversation trace on one H100, slowed tenfold so that about
/// one request is in flight at a time (then the GPU's cache order is the arrival order an LRU sees).
/// Blocks of 512 tokens, the trace's own hash granularity.
const N: usize = 1500;
const GPU_BLOCKS: usize = 150;
const HOST_BLOCKS: usize = 5850;

fn mooncake(host: Option<f64>) -> fleetsim::metrics::Summary {
    let text = format!(
        r#"
name = "mooncake-tiers"
duration = "10h"
max_requests = {N}
[[workers]]
count = 1
gpu = "h100"
model = "llama-3.1-8b"
block_size = 512
kv_blocks = {GPU_BLOCKS}
[workload]
kind = "trace"
path = "{}"
format = "mooncake"
speedup = 0.1
"#,
        trace_path("mooncake/conversation_trace.jsonl").display()
    );
    let mut s = scenario(&text, &[]);
    if let Some(gbps) = host {
        // Block bytes: Llama-3.1-8B keeps 128 KiB of KV per token (32 layers × 8 KV heads × 128 dims ×
        // 2 (K and V) × 2 bytes) = 64 MiB per 512-token block. A fast link, so that every load wins.
        let block_bytes = 131_072.0 * 512.0;
        let gb = HOST_BLOCKS as f64 * block_bytes / 1e9 + 1e-6;
        s = scenario(
            &text,
            &[
                &format!("tiers.host.capacity_gb={gb}"),
                &format!("tiers.host.read_gb_per_s={gbps}"),
                "tiers.host.write_gb_per_s=10000",
                "tiers.host.latency=\"0s\"",
            ],
        );
    }
    run(&s).0
}

/// An LRU cache of `capacity` blocks fed the same requests in arrival order: each reuses the longest
/// cached run of its leading blocks (never the block holding the prompt's last token, which is always
/// computed), then every full block it computed (prompt and answer) becomes the most recent, its head
/// last. Returns the fraction of prompt tokens reused.
fn lru_hit_rate(capacity: usize) -> f64 {
    let text = std::fs::read_to_string(trace_path("mooncake/conversation_trace.jsonl")).unwrap();
    // hash -> last use, last use -> hash (the smallest is the least recently used).
    let mut last_use: HashMap<u64, u64> = HashMap::new();
    let mut by_use: BTreeMap<u64, u64> = BTreeMap::new();
    let mut clock = 0u64;
    let (mut prompt, mut hit) = (0u64, 0u64);
    let mut fresh = u64::MAX; // ids for answer blocks, never shared
    for line in text.lines().take(N) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let input = v["input_length"].as_u64().unwrap();
        let output = v["output_length"].as_u64().unwrap();
        let ids: Vec<u64> = v["hash_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect();
        if (input + output - 1).div_ceil(512) > GPU_BLOCKS as u64 {
            continue; // longer than the worker's KV memory: rejected, not served
        }
        let usable = ((input - 1) / 512) as usize;
        let reused = ids[..usable.min(ids.len())]
            .iter()
            .take_while(|h| last_use.contains_key(h))
            .count() as u64;
        prompt += input;
        hit += (reused * 512).min(input);
        let computed = input + output.max(1) - 1;
        let mut blocks: Vec<u64> = ids[..((input / 512) as usize).min(ids.len())].to_vec();
        while (blocks.len() as u64) < computed / 512 {
            fresh -= 1;
            blocks.push(fresh);
        }
        for &h in blocks.iter().rev() {
            clock += 1;
            if let Some(old) = last_use.insert(h, clock) {
                by_use.remove(&old);
            }
            by_use.insert(clock, h);
            if last_use.len() > capacity {
                let (_, evicted) = by_use.pop_first().unwrap();
                last_use.remove(&evicted);
            }
        }
    }
    hit as f64 / prompt as f64
}

fn reuse(s: &fleetsim::metrics::Summary) -> f64 {
    let p = &s.prefix_cache;
    (p.cached_tokens + p.loaded_tokens) as f64 / p.prompt_tokens as f64
}

#[test]
fn a_host_tier_acts_as_one_lru_of_gpu_plus_host_blocks() {
    let gpu_only = mooncake(None);
    let with_host = mooncake(Some(10_000.0));
    // Requests longer than the GPU's blocks are rejected (the LRU below skips them too).
    assert_eq!(
        with_host.requests.completed + with_host.requests.rejected,
        N as u64
    );
    let small = lru_hit_rate(GPU_BLOCKS);
    let big = lru_hit_rate(GPU_BLOCKS + HOST_BLOCKS);
    eprintln!(
        "gpu only {:.4} (lru {small:.4}), gpu + host {:.4} (lru {big:.4})",
        reuse(&gpu_only),
        reuse(&with_host)
    );
    // The host tier matters here, or the test proves nothing.
    assert!(big > small + 0.05, "lru {small} -> {big}");
    assert!((reuse(&gpu_only) - small).abs() < 0.01);
    assert!(
        (reuse(&with_host) - big).abs() < 0.01,
        "{} vs {big}",
        reuse(&with_host)
    );
    let tiers = with_host.tiers.as_ref().unwrap();
    assert_eq!(tiers.len(), 1);
    let host = &tiers[0];
    assert_eq!(host.capacity_blocks, Some(HOST_BLOCKS as u64));
    // Bytes moved = blocks moved × block bytes.
    assert_eq!(host.bytes_read, host.blocks_loaded * 131_072 * 512);
    assert_eq!(host.bytes_written, host.blocks_written * 131_072 * 512);
    assert_eq!(host.recompute_avoided_tokens, host.blocks_loaded * 512);
    assert!(gpu_only.tiers.is_none());
}

#[test]
fn a_slow_tier_is_found_but_never_loaded() {
    // 1 MB/s: one 64 MiB block takes a minute to load, far longer than recomputing a whole prompt.
    let s = mooncake(Some(0.001));
    let host = &s.tiers.as_ref().unwrap()[0];
    assert!(host.hits > 0, "the host tier held blocks");
    assert_eq!(host.blocks_loaded, 0);
    assert_eq!(s.prefix_cache.loaded_tokens, 0);
    let gpu_only = mooncake(None);
    assert_eq!(
        s.prefix_cache.cached_tokens,
        gpu_only.prefix_cache.cached_tokens
    );
}

const WITH_HOST: &str = r#"
name = "t"
duration = "10s"
[[workers]]
count = 1
gpu = "h100"
model = "llama-3.1-8b"
[workload]
kind = "poisson"
rate = 1.0
prompt = { dist = "fixed", tokens = 100 }
output = { dist = "fixed", tokens = 10 }
[tiers.host]
capacity_gb = 64.0
read_gb_per_s = 25.0
write_gb_per_s = 25.0
latency = "10us"
"#;

fn error_of(text: &str) -> String {
    fleetsim::scenario::Scenario::parse(text, "tiers.toml", &[])
        .map(|_| ())
        .unwrap_err()
        .to_string()
}

#[test]
fn bad_tier_sections_name_file_line_and_field() {
    // Lines: 14 capacity_gb, 15 read, 16 write.
    for (from, to, line, field) in [
        ("capacity_gb = 64.0", "capacity_gb = 0", 14, "capacity_gb"),
        (
            "read_gb_per_s = 25.0",
            "read_gb_per_s = -1",
            15,
            "read_gb_per_s",
        ),
        (
            "write_gb_per_s = 25.0",
            "write_gb_per_s = 0.0",
            16,
            "write_gb_per_s",
        ),
    ] {
        let e = error_of(&WITH_HOST.replacen(from, to, 1));
        assert!(
            e.contains(&format!("tiers.toml:{line}")) && e.contains(field),
            "{from} -> {to}: {e}"
        );
    }
    let e = error_of(&WITH_HOST.replacen("latency = \"10us\"\n", "", 1));
    assert!(e.contains("latency"), "{e}");
    let e = error_of(&WITH_HOST.replacen("capacity_gb", "capacity", 1));
    assert!(e.contains("capacity"), "{e}");
    // Tiers hold prefix-cache blocks: a fleet without prefix caching cannot have them.
    let e = error_of(&WITH_HOST.replacen(
        "model = \"llama-3.1-8b\"",
        "model = \"llama-3.1-8b\"\nenable_prefix_caching = false",
        1,
    ));
    assert!(
        e.contains("tiers") && e.contains("enable_prefix_caching"),
        "{e}"
    );
    // The good one parses, runs, and conserves requests.
    let s = scenario(WITH_HOST, &[]);
    let out = run(&s).0;
    assert_eq!(out.requests.completed, out.requests.arrived);
}

/// `predicted_latency` reads the tiers' contents when it routes (`price_copies`), without counting a
/// lookup or booking a link: on tiers too slow for any load to beat recomputing, pricing copies
/// changes no decision and the run is the same, byte for byte. On the bundled links (host 25 GB/s,
/// NVMe 7 GB/s) loads do win, the router sees them, and its decisions change.
#[test]
fn predicted_latency_reads_the_tiers_without_disturbing_them() {
    use fleetsim::engine::Simulation;
    use fleetsim::scenario::Scenario;
    let run = |extra: &[&str]| {
        let mut o = vec![
            "max_requests=400".to_string(),
            "router.policy=\"predicted_latency\"".to_string(),
        ];
        o.extend(extra.iter().map(|s| s.to_string()));
        let s = Scenario::load(&crate::common::scenario_path("mooncake-offload.toml"), &o).unwrap();
        let out = Simulation::from_scenario(&s).unwrap().run(&mut |_| {});
        assert_eq!(
            out.summary.requests.completed
                + out.summary.requests.rejected
                + out.summary.requests.failed,
            out.summary.requests.arrived
        );
        serde_json::to_string(&out.summary).unwrap()
    };
    let slow = [
        "tiers.host.read_gb_per_s=0.001",
        "tiers.disk.read_gb_per_s=0.001",
    ];
    let gpu_only = [slow[0], slow[1], "router.price_copies=false"];
    assert_eq!(run(&slow), run(&gpu_only));
    assert_ne!(run(&[]), run(&["router.price_copies=false"]));
}
