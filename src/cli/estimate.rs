//! `fleetsim estimate`: one configuration's step times, KV capacity, latencies and throughput.

use std::path::Path;

use anyhow::Result;

use crate::estimate;
use crate::hardware::{GpuId, ModelId, Precision, Profile};
use crate::workload::harness::Harness;

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
    /// The benchmark client imitated and its range ratio.
    pub harness: Option<(Harness, Option<f64>)>,
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
        harness: a.harness,
    })
    .map_err(anyhow::Error::msg)?;
    out!("{}", if json { e.to_json() } else { e.to_markdown() });
    Ok(())
}
