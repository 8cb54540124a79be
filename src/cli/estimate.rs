//! `fleetsim estimate`: one configuration's step times, KV capacity, latencies and throughput.

use std::path::Path;

use anyhow::Result;

use crate::estimate;
use crate::hardware::{GpuId, ModelId, Precision, Profile};
use crate::workload::harness::{Harness, HarnessOptions};

/// The configuration and load given on the command line.
pub(super) struct Args {
    pub gpu: GpuId,
    pub model: ModelId,
    pub tp: u32,
    pub precision: Precision,
    pub kv_cache_dtype: Option<Precision>,
    pub prompt: u32,
    pub output: u32,
    pub concurrency: Option<u32>,
    pub requests: Option<u32>,
    /// Leave out the benchmark client, API server and warm-up (the engine alone, in lock step).
    pub no_frontend: bool,
    /// vLLM's `--async-scheduling` (on unless `--no-async-scheduling`).
    pub async_scheduling: bool,
    /// The benchmark client imitated, its range ratio and its other options (`KEY=VALUE`).
    pub harness: Option<Harness>,
    pub random_range_ratio: Option<f64>,
    pub harness_options: Vec<String>,
    pub seed: u64,
}

/// The harness options given as `--random-range-ratio` and `--harness-option KEY=VALUE` words.
fn harness_options(ratio: Option<f64>, pairs: &[String]) -> Result<HarnessOptions> {
    let mut table = toml::Table::new();
    for pair in pairs {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--harness-option {pair}: expected KEY=VALUE"))?;
        let key = key.trim();
        let value: toml::Value = value.trim().parse::<i64>().map_or_else(
            |_| {
                value
                    .trim()
                    .parse::<f64>()
                    .map(toml::Value::Float)
                    .map_err(|_| anyhow::anyhow!("--harness-option {key}: {value} is not a number"))
            },
            |v| Ok(toml::Value::Integer(v)),
        )?;
        if table.insert(key.to_string(), value).is_some() {
            anyhow::bail!("--harness-option {key}: given twice");
        }
    }
    if let Some(r) = ratio {
        if table.contains_key("random_range_ratio") {
            anyhow::bail!("--random-range-ratio is given twice (also as --harness-option)");
        }
        table.insert("random_range_ratio".into(), toml::Value::Float(r));
    }
    let options: HarnessOptions = toml::Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| anyhow::anyhow!("--harness-option: {}", e.message()))?;
    Ok(options)
}

/// Estimates `a`, with the step times of the profile file `profile` if given; prints JSON or a table.
pub(super) fn estimate(a: Args, profile: Option<&Path>, json: bool) -> Result<()> {
    crate::hardware::check_precision(a.gpu, a.precision).map_err(anyhow::Error::msg)?;
    if let Some(kv) = a.kv_cache_dtype {
        crate::hardware::check_precision(a.gpu, kv)
            .map_err(|m| anyhow::anyhow!("--kv-cache-dtype: {m}"))?;
    }
    let profile = match profile {
        Some(path) => Some((path.display().to_string(), Profile::load(path)?)),
        None => None,
    };
    let e = estimate::estimate(&estimate::EstimateRequest {
        gpu: a.gpu,
        model: a.model,
        tp: a.tp,
        precision: a.precision,
        kv_cache_dtype: a.kv_cache_dtype,
        prompt: a.prompt,
        output: a.output,
        concurrency: a.concurrency,
        requests: a.requests,
        profile,
        max_num_seqs: None,
        frontend: crate::workload::FrontendSpec {
            enabled: !a.no_frontend,
            ..Default::default()
        },
        async_scheduling: a.async_scheduling,
        harness: match a.harness {
            Some(h) => Some((
                h,
                harness_options(a.random_range_ratio, &a.harness_options)?,
            )),
            None => None,
        },
        seed: a.seed,
    })
    .map_err(anyhow::Error::msg)?;
    out!("{}", if json { e.to_json() } else { e.to_markdown() });
    Ok(())
}
