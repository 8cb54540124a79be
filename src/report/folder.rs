//! A results folder read back, for `fleetsim report`: its `summary.json`, the time-series window from
//! `run_info.json`, and `requests.parquet` (read with polars), from which the request-level plots are
//! drawn again exactly as the run drew them.
//!
//! Invariants: the TTFT distribution and the per-window TTFT and hit rate are rebuilt from the parquet's
//! rows through the same histograms the run used, so a folder gives back the run's own plots byte for
//! byte; a parquet whose rows or TTFTs disagree with the folder's `summary.json` is refused as foreign,
//! naming both files, rather than drawn.

use std::fs::File;
use std::path::{Path, PathBuf};

use polars::prelude::*;

use super::plots::{RunPlots, WindowPoint, window_point};
use crate::metrics::collector::Latency;
use crate::metrics::summary::{Summary, round};
use crate::metrics::timeseries::{LogHist, MetricsSpec};

/// Why a results folder cannot be reported; every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum FolderError {
    #[error("{0}: no such results folder")]
    Missing(String),
    #[error("{0}: cannot read: {1}")]
    Read(String, String),
    #[error("{0}: not a fleetsim summary: {1}")]
    Summary(String, String),
    #[error("{0}: {1}")]
    Parquet(String, String),
    #[error(
        "{parquet} does not belong to {summary}: {what} (copied from another run?); nothing written"
    )]
    Foreign {
        parquet: String,
        summary: String,
        what: String,
    },
}

/// One run read back from its folder.
#[derive(Clone, Debug)]
pub struct SavedRun {
    pub dir: PathBuf,
    pub summary: Summary,
    /// The run's TTFT distribution (completed requests), rebuilt from `requests.parquet`.
    pub ttft: Latency,
    pub plots: RunPlots,
}

fn read_text(path: &Path) -> Result<String, FolderError> {
    std::fs::read_to_string(path)
        .map_err(|e| FolderError::Read(path.display().to_string(), e.to_string()))
}

/// The rows of `requests.parquet` the plots need.
struct Rows {
    arrival_ns: Vec<i64>,
    /// `None` for a request that did not complete.
    ttft_ns: Vec<Option<i64>>,
    prompt_tokens: Vec<i64>,
    cached_tokens: Vec<i64>,
}

fn read_rows(path: &Path) -> Result<Rows, FolderError> {
    let name = path.display().to_string();
    let file = File::open(path).map_err(|e| FolderError::Read(name.clone(), e.to_string()))?;
    let df = ParquetReader::new(file)
        .finish()
        .map_err(|e| FolderError::Parquet(name.clone(), format!("not a parquet file: {e}")))?;
    let col = |c: &str| -> Result<Vec<Option<i64>>, FolderError> {
        let column = df.column(c).map_err(|_| {
            FolderError::Parquet(
                name.clone(),
                format!("no column `{c}` (not a fleetsim requests.parquet)"),
            )
        })?;
        let values = column.i64().map_err(|_| {
            FolderError::Parquet(
                name.clone(),
                format!(
                    "column `{c}` is {}, expected i64 (not a fleetsim requests.parquet)",
                    column.dtype()
                ),
            )
        })?;
        Ok((0..values.len()).map(|i| values.get(i)).collect())
    };
    let required = |c: &str| -> Result<Vec<i64>, FolderError> {
        col(c)?
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                v.ok_or_else(|| {
                    FolderError::Parquet(name.clone(), format!("row {i}: `{c}` is null"))
                })
            })
            .collect()
    };
    Ok(Rows {
        arrival_ns: required("arrival_ns")?,
        ttft_ns: col("ttft_ns")?,
        prompt_tokens: required("prompt_tokens")?,
        cached_tokens: required("cached_tokens")?,
    })
}

/// `timeseries.csv`'s KV-utilisation columns, one entry per window (`None` where empty, or for every
/// window of a folder written before the columns existed).
/// Per window: the KV utilisation (mean, max) and, for an autoscaled run, the replicas (ready,
/// starting, billed), and with several autoscaled models each one's billed replicas.
type KvAndReplicas = (
    Option<(f64, f64)>,
    Option<(u32, u32, u32)>,
    Vec<(String, u32)>,
);

fn read_kv(path: &Path) -> Result<Vec<KvAndReplicas>, FolderError> {
    let name = path.display().to_string();
    let bad = |line: usize, what: String| {
        FolderError::Parquet(name.clone(), format!("line {line}: {what}"))
    };
    let mut r =
        csv::Reader::from_path(path).map_err(|e| FolderError::Read(name.clone(), e.to_string()))?;
    let head = r
        .headers()
        .map_err(|e| FolderError::Read(name.clone(), e.to_string()))?
        .clone();
    let mean = head.iter().position(|h| h == "kv_util_mean");
    let max = head.iter().position(|h| h == "kv_util_max");
    let col = |name: &str| head.iter().position(|h| h == name);
    let replicas = [
        col("replicas_ready"),
        col("replicas_starting"),
        col("replicas_billed"),
    ];
    let by_model: Vec<(usize, String)> = head
        .iter()
        .enumerate()
        .filter_map(|(c, h)| {
            h.strip_prefix("replicas_billed:")
                .map(|m| (c, m.to_string()))
        })
        .collect();
    let mut out = Vec::new();
    for (i, rec) in r.records().enumerate() {
        let line = i + 2;
        let rec = rec.map_err(|e| bad(line, e.to_string()))?;
        let field = |col: Option<usize>, what: &str| -> Result<Option<f64>, FolderError> {
            match col.and_then(|c| rec.get(c)) {
                None | Some("") => Ok(None),
                Some(v) => v
                    .parse::<f64>()
                    .map(Some)
                    .map_err(|_| bad(line, format!("field `{what}`: `{v}` is not a number"))),
            }
        };
        let (m, x) = (field(mean, "kv_util_mean")?, field(max, "kv_util_max")?);
        let [r, st, b] = [
            field(replicas[0], "replicas_ready")?,
            field(replicas[1], "replicas_starting")?,
            field(replicas[2], "replicas_billed")?,
        ];
        let counts = match (r, st, b) {
            (Some(r), Some(st), Some(b)) => Some((r as u32, st as u32, b as u32)),
            _ => None,
        };
        let mut models = Vec::with_capacity(by_model.len());
        for (c, model) in &by_model {
            if let Some(n) = field(Some(*c), &format!("replicas_billed:{model}"))? {
                models.push((model.clone(), n as u32));
            }
        }
        out.push((m.zip(x), counts, models));
    }
    Ok(out)
}

/// Reads the results folder `dir` (a `run`, or one policy's folder of a `compare`).
pub fn read(dir: &Path) -> Result<SavedRun, FolderError> {
    if !dir.is_dir() {
        return Err(FolderError::Missing(dir.display().to_string()));
    }
    let summary_path = dir.join("summary.json");
    let summary_name = summary_path.display().to_string();
    let summary: Summary = serde_json::from_str(&read_text(&summary_path)?)
        .map_err(|e| FolderError::Summary(summary_name.clone(), e.to_string()))?;

    let info_path = dir.join("run_info.json");
    let info_name = info_path.display().to_string();
    let info: serde_json::Value = serde_json::from_str(&read_text(&info_path)?)
        .map_err(|e| FolderError::Summary(info_name.clone(), e.to_string()))?;
    let spec: MetricsSpec = serde_json::from_value(info["scenario"]["metrics"].clone())
        .map_err(|e| FolderError::Summary(info_name.clone(), format!("scenario.metrics: {e}")))?;

    let parquet_path = dir.join("requests.parquet");
    let parquet_name = parquet_path.display().to_string();
    let rows = read_rows(&parquet_path)?;
    let foreign = |what: String| FolderError::Foreign {
        parquet: parquet_name.clone(),
        summary: summary_name.clone(),
        what,
    };
    if rows.arrival_ns.len() as u64 != summary.requests.arrived {
        return Err(foreign(format!(
            "{} rows, but {} requests arrived",
            rows.arrival_ns.len(),
            summary.requests.arrived
        )));
    }

    // The same folding as the run's collector and time series: the steady-state TTFT distribution
    // (requests arriving from the warm-up's end on), TTFT by arrival window over the whole run, and the
    // prompt and cached tokens of completed requests.
    let width_ns = spec.window.0.max(1);
    let steady_from = summary
        .warmup
        .as_ref()
        .map_or(0, |w| (w.warmup_s * 1e9).round() as u64);
    let mut ttft = Latency::default();
    let mut windows: Vec<(LogHist, u64, u64)> = Vec::new();
    let tokens = rows.prompt_tokens.iter().zip(&rows.cached_tokens);
    for (i, ((arrival, ttft_ns), (prompt, cached))) in rows
        .arrival_ns
        .iter()
        .zip(&rows.ttft_ns)
        .zip(tokens)
        .enumerate()
    {
        let Some(t) = *ttft_ns else { continue };
        let (Ok(t), Ok(arrival), Ok(prompt), Ok(cached)) = (
            u64::try_from(t),
            u64::try_from(*arrival),
            u64::try_from(*prompt),
            u64::try_from(*cached),
        ) else {
            return Err(FolderError::Parquet(
                parquet_name.clone(),
                format!(
                    "row {i}: negative `ttft_ns`, `arrival_ns`, `prompt_tokens` or `cached_tokens`"
                ),
            ));
        };
        if arrival >= steady_from {
            ttft.record(t);
        }
        let w = (arrival / width_ns) as usize;
        if windows.len() <= w {
            windows.resize_with(w + 1, Default::default);
        }
        let win = &mut windows[w];
        win.0.record(t);
        win.1 += prompt;
        win.2 += cached;
    }
    let ms = |ns: f64| round(ns / 1e6, 6);
    if ttft.count() != summary.ttft_ms.count
        || (ttft.count() > 0 && ms(ttft.quantile(0.95)) != summary.ttft_ms.p95)
    {
        return Err(foreign(format!(
            "its {} completed requests have TTFT p95 {} ms, the summary's {} have {} ms",
            ttft.count(),
            ms(ttft.quantile(0.95)),
            summary.ttft_ms.count,
            summary.ttft_ms.p95
        )));
    }
    let kv = read_kv(&dir.join("timeseries.csv"))?;
    if windows.len() > kv.len() {
        return Err(FolderError::Foreign {
            parquet: parquet_name.clone(),
            summary: dir.join("timeseries.csv").display().to_string(),
            what: format!(
                "requests arrive in window {}, the time series has {} windows",
                windows.len() - 1,
                kv.len()
            ),
        });
    }
    windows.resize_with(kv.len(), Default::default);
    let width_s = spec.window.as_secs_f64();
    let points: Vec<WindowPoint> = windows
        .iter()
        .zip(kv)
        .enumerate()
        .map(|(i, ((h, prompt, cached), (kv, replicas, models)))| {
            let mut p = window_point(i, width_s, h, *prompt, *cached, kv);
            p.replicas = replicas;
            p.model_replicas = models;
            p
        })
        .collect();
    let faults = summary
        .recovery
        .iter()
        .filter(|r| r.timing != "after_end") // never happened: not on the timeline
        .map(|r| (r.at_s, r.fault.clone()))
        .collect();
    let plots = RunPlots::from_parts(&summary, &ttft, points, faults);
    Ok(SavedRun {
        dir: dir.to_path_buf(),
        summary,
        ttft,
        plots,
    })
}
