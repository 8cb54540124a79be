//! A run's plots (SVG), one file per plot, drawn from [`RunPlots`]: plain numbers taken from a run's
//! summary and time series, so the same plots can be drawn again from a results folder.
//!
//! Invariant: plots are functions of those numbers alone, so the same seed gives the same bytes.

pub mod chart;
pub mod comparison;
mod hit_rate_over_time;
mod kv_over_time;
mod recompute_by_cause;
mod replicas_over_time;
mod ttft_band;
mod ttft_by_turn;
mod ttft_cdf;
mod ttft_over_time;
pub mod units;
mod worker_share;

pub use ttft_cdf::ttft_cdf;

use crate::engine::RunOutput;
use crate::metrics::collector::Latency;
use crate::metrics::summary::Summary;
use crate::metrics::timeseries::LogHist;

/// Points per CDF line.
const CDF_POINTS: usize = 200;

/// One window of the time series.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowPoint {
    /// Window midpoint, simulated seconds.
    pub mid_s: f64,
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p95_ms: Option<f64>,
    pub hit_rate: Option<f64>,
    /// KV-cache utilisation: mean over workers and the fullest worker (`timeseries.csv`'s
    /// `kv_util_mean`, `kv_util_max`).
    pub kv_util: Option<(f64, f64)>,
    /// An autoscaled run's replicas at the window's end: ready, starting, billed (`timeseries.csv`'s
    /// `replicas_ready`, `replicas_starting`, `replicas_billed`).
    pub replicas: Option<(u32, u32, u32)>,
    /// With several autoscaled models: each model's billed replicas at the window's end
    /// (`timeseries.csv`'s `replicas_billed:MODEL`).
    pub model_replicas: Vec<(String, u32)>,
}

/// The numbers a run's plots show.
#[derive(Clone, Debug, PartialEq)]
pub struct RunPlots {
    /// Scenario and policy, for titles.
    pub name: String,
    /// TTFT CDF: (ms, fraction of completed requests at or below).
    pub ttft_cdf: Vec<(f64, f64)>,
    pub windows: Vec<WindowPoint>,
    /// Faults: (simulated seconds, label).
    pub faults: Vec<(f64, String)>,
    /// TTFT by conversation turn: (group, p50 ms, p95 ms), groups with requests only.
    pub ttft_by_turn: Vec<(String, f64, f64)>,
    /// Recomputed tokens by cause.
    pub recompute: Vec<(String, u64)>,
    /// Per worker: (id, fraction of completed requests served).
    pub worker_share: Vec<(usize, f64)>,
    /// With replications: the windowed p95 TTFT's mean and 95% band over them.
    pub band: Option<Band>,
}

/// Windowed p95 TTFT over replications.
#[derive(Clone, Debug, PartialEq)]
pub struct Band {
    pub replications: u32,
    pub points: Vec<BandPoint>,
}

/// One window of a [`Band`]: the mean over the replications with a value there, and the 95%
/// interval's bounds (the mean itself where fewer than two have a value).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BandPoint {
    pub mid_s: f64,
    pub mean: f64,
    pub low: f64,
    pub high: f64,
}

impl Band {
    /// The band of runs' windowed p95 TTFT, window by window.
    pub fn of(runs: &[&RunOutput]) -> Band {
        let per_run: Vec<RunPlots> = runs.iter().map(|o| RunPlots::of(o)).collect();
        let windows = per_run.iter().map(|p| p.windows.len()).max().unwrap_or(0);
        let points = (0..windows)
            .filter_map(|i| {
                let v: Vec<f64> = per_run
                    .iter()
                    .map(|p| {
                        p.windows
                            .get(i)
                            .and_then(|w| w.ttft_p95_ms)
                            .unwrap_or(f64::NAN)
                    })
                    .collect();
                let e = crate::confidence::Estimate::of(&v);
                let mid_s = per_run.iter().find_map(|p| p.windows.get(i))?.mid_s;
                let (low, high) = e.bounds();
                e.mean.is_finite().then_some(BandPoint {
                    mid_s,
                    mean: e.mean,
                    low,
                    high,
                })
            })
            .collect();
        Band {
            replications: runs.len() as u32,
            points,
        }
    }
}

/// A CDF of `l` in milliseconds, at [`CDF_POINTS`] + 1 evenly spaced quantiles from the exact minimum
/// to the exact maximum (empty when `l` is).
pub fn cdf_points(l: &Latency) -> Vec<(f64, f64)> {
    if l.count() == 0 {
        return Vec::new();
    }
    (0..=CDF_POINTS)
        .map(|i| {
            let q = i as f64 / CDF_POINTS as f64;
            // The line starts at the exact fastest request, not its histogram bucket's midpoint.
            let ns = if i == 0 {
                l.min() as f64
            } else {
                l.quantile(q)
            };
            (ns / 1e6, q)
        })
        .collect()
}

/// Window `i` (of `width_s` seconds) from the TTFTs of the requests that arrived in it and their prompt
/// and cached tokens.
pub fn window_point(
    i: usize,
    width_s: f64,
    ttft: &LogHist,
    prompt_tokens: u64,
    cached_tokens: u64,
    kv_util: Option<(f64, f64)>,
) -> WindowPoint {
    WindowPoint {
        mid_s: (i as f64 + 0.5) * width_s,
        ttft_p50_ms: ttft.quantile(0.5).map(|v| v / 1e6),
        ttft_p95_ms: ttft.quantile(0.95).map(|v| v / 1e6),
        hit_rate: (prompt_tokens > 0).then(|| cached_tokens as f64 / prompt_tokens as f64),
        kv_util,
        replicas: None,
        model_replicas: Vec::new(),
    }
}

impl RunPlots {
    /// The plotted numbers of a finished run.
    pub fn of(out: &RunOutput) -> Self {
        let ts = &out.collector.series;
        let width = ts.spec.window.as_secs_f64();
        let windows = ts
            .windows
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let mut p = window_point(
                    i,
                    width,
                    &w.ttft,
                    w.prompt_tokens,
                    w.cached_tokens,
                    ts.kv_window(i),
                );
                if !ts.replicas.is_empty() {
                    let end = crate::time::SimTime(ts.start(i + 1).0.saturating_sub(1));
                    p.replicas = ts.replicas.at(end).map(|c| (c.ready, c.starting, c.billed));
                    p.model_replicas = ts
                        .replicas_by_model
                        .iter()
                        .map(|(m, log)| (m.clone(), log.at(end).map_or(0, |c| c.billed)))
                        .collect();
                }
                p
            })
            .collect();
        let faults = ts
            .faults
            .iter()
            .map(|f| (f.at.as_secs_f64(), f.label.clone()))
            .collect();
        Self::from_parts(&out.summary, &out.collector.steady.ttft, windows, faults)
    }

    /// The plotted numbers from a run's summary, its TTFT distribution, its windows and its faults
    /// (simulated seconds, label): what [`RunPlots::of`] takes from a live run and `fleetsim report`
    /// rebuilds from a results folder.
    pub fn from_parts(
        s: &Summary,
        ttft: &Latency,
        windows: Vec<WindowPoint>,
        faults: Vec<(f64, String)>,
    ) -> Self {
        let c = &s.recompute.by_cause;
        RunPlots {
            name: format!("{} / {}", s.scenario, s.policy),
            ttft_cdf: cdf_points(ttft),
            windows,
            faults,
            ttft_by_turn: s
                .ttft_by_turn_ms
                .iter()
                .filter(|g| g.dist.count > 0)
                .map(|g| (g.group.clone(), g.dist.p50, g.dist.p95))
                .collect(),
            recompute: c
                .named()
                .iter()
                .map(|(n, cc)| (n.to_string(), cc.tokens))
                .collect(),
            worker_share: s.workers.iter().map(|w| (w.id, w.share)).collect(),
            band: None,
        }
    }

    /// Every plot: (file name, SVG bytes), in the order the report shows them.
    pub fn files(&self) -> Result<Vec<(String, Vec<u8>)>, String> {
        let cdf = [(self.name.clone(), self.ttft_cdf.clone())];
        let plots = [
            ("plot-ttft-cdf.svg", ttft_cdf(&self.name, &cdf)?),
            ("plot-ttft-over-time.svg", ttft_over_time::plot(self)?),
            (
                "plot-hit-rate-over-time.svg",
                hit_rate_over_time::plot(self)?,
            ),
            ("plot-ttft-by-turn.svg", ttft_by_turn::plot(self)?),
            (
                "plot-recompute-by-cause.svg",
                recompute_by_cause::plot(self)?,
            ),
            ("plot-worker-share.svg", worker_share::plot(self)?),
            ("plot-kv-utilisation.svg", kv_over_time::plot(self)?),
        ];
        let mut files: Vec<(String, Vec<u8>)> = plots
            .into_iter()
            .map(|(n, svg)| (n.to_string(), svg.into_bytes()))
            .collect();
        if let Some(svg) = replicas_over_time::plot(self) {
            files.push(("plot-replicas.svg".to_string(), svg?.into_bytes()));
        }
        if let Some(band) = ttft_band::plot(self) {
            files.insert(
                2,
                ("plot-ttft-p95-band.svg".to_string(), band?.into_bytes()),
            );
        }
        Ok(files)
    }
}

#[cfg(test)]
mod tests;
