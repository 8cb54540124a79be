//! `workers.csv`: one row per worker, the summary's per-worker numbers plus the tokens it served.

use anyhow::Result;

use crate::engine::RunOutput;

/// Header of `workers.csv`, in column order.
pub const HEADER: [&str; 21] = [
    "worker",
    "gpu",
    "model",
    "tp",
    "precision",
    "profile",
    "calibrated",
    "requests",
    "share",
    "prompt_tokens",
    "cached_tokens",
    "output_tokens",
    "hit_rate",
    "busy_fraction",
    "steps",
    "kv_blocks",
    "kv_peak_fraction",
    "preemptions",
    "evictions",
    "energy_j",
    "mfu",
];

/// `workers.csv` of a run. `hit_rate` is cached over prompt tokens of the completed requests the worker
/// served, and empty when it served none (a rate of nothing is not 0). `busy_fraction` is the step-time
/// share (the column keeps its old name); `mfu`, last so that scripts reading columns by position still
/// work, is empty where the summary has none (a disaggregated fleet).
pub fn workers_csv(out: &RunOutput) -> Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(HEADER)?;
    for s in &out.summary.workers {
        let t = out.collector.per_worker_tokens[s.id];
        let hit = if t.prompt > 0 {
            crate::metrics::summary::round(t.cached as f64 / t.prompt as f64, 6).to_string()
        } else {
            String::new()
        };
        w.write_record([
            s.id.to_string(),
            s.gpu.clone(),
            s.model.clone(),
            s.tp.to_string(),
            s.precision.clone(),
            s.profile.clone(),
            s.calibrated.to_string(),
            s.requests.to_string(),
            s.share.to_string(),
            t.prompt.to_string(),
            t.cached.to_string(),
            t.output.to_string(),
            hit,
            s.step_time_fraction.to_string(),
            s.steps.to_string(),
            s.kv_blocks.to_string(),
            s.kv_peak_fraction.to_string(),
            s.preemptions.to_string(),
            s.evictions.to_string(),
            s.energy_j.to_string(),
            s.mfu.map_or(String::new(), |m| m.to_string()),
        ])?;
    }
    Ok(w.into_inner()?)
}
