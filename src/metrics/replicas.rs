//! Replicas over time in an autoscaled fleet, and the `autoscaler` block of `summary.json`.
//!
//! The engine records the replica counts whenever they change ([`ReplicaLog::record`]); replica-hours,
//! the mean and the peak are derived from that step function once, at the end. Nothing here knows about
//! scenarios or policies: the engine hands in plain numbers.
//!
//! Invariant: the log's times never decrease, and `ready + starting ≤ billed` at every point (a
//! draining replica is billed but neither ready nor starting).

use serde::{Deserialize, Serialize};

use crate::time::SimTime;

/// Replicas at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplicaCount {
    /// Replicas the gateway routes to.
    pub ready: u32,
    /// Replicas asked for that do not serve yet: cold-starting, or up and awaiting a good health check.
    pub starting: u32,
    /// Replicas that hold a GPU and are paid for: ready, starting, draining, or failed and not yet
    /// replaced.
    pub billed: u32,
}

/// The replica counts as a step function of time.
#[derive(Clone, Debug, Default)]
pub struct ReplicaLog {
    /// (from when, counts), in time order; consecutive entries differ.
    points: Vec<(SimTime, ReplicaCount)>,
}

impl ReplicaLog {
    /// The counts from `t` on.
    pub fn record(&mut self, t: SimTime, c: ReplicaCount) {
        debug_assert!(c.ready + c.starting <= c.billed, "{c:?}");
        debug_assert!(self.points.last().is_none_or(|p| p.0 <= t));
        match self.points.last_mut() {
            Some(last) if last.1 == c => {}
            Some(last) if last.0 == t => last.1 = c,
            _ => self.points.push((t, c)),
        }
    }

    /// The counts at `t` (the last change at or before it).
    pub fn at(&self, t: SimTime) -> Option<ReplicaCount> {
        let i = self.points.partition_point(|&(s, _)| s <= t);
        (i > 0).then(|| self.points[i - 1].1)
    }

    /// Whether anything was recorded (an autoscaled run).
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// Billed replica-seconds from 0 to `end`.
    pub fn billed_seconds(&self, end: SimTime) -> f64 {
        let mut ns: u128 = 0;
        for (i, &(t, c)) in self.points.iter().enumerate() {
            let until = self.points.get(i + 1).map_or(end, |p| p.0).min(end);
            ns += u128::from(until.0.saturating_sub(t.0)) * u128::from(c.billed);
        }
        ns as f64 / 1e9
    }

    /// The most replicas billed at once, and the count at the end.
    pub fn peak_and_last(&self) -> (u32, u32) {
        let peak = self.points.iter().map(|p| p.1.billed).max().unwrap_or(0);
        (peak, self.points.last().map_or(0, |p| p.1.billed))
    }
}

/// `summary.json` `autoscaler`: what scaling did and cost. Present only with `[autoscaler]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AutoscaleSummary {
    /// The model of this deployment (in `models`, with several).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub metric: String,
    /// The metric's target per replica (none for `slo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<f64>,
    /// With `metric = "slo"`: the planner's TTFT and ITL targets, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planner_ttft_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planner_itl_ms: Option<f64>,
    pub min_replicas: u32,
    pub max_replicas: u32,
    /// Replicas at t = 0 (the worker group's `count`).
    pub initial_replicas: u32,
    /// A new replica's cold start by term, seconds.
    pub cold_start: ColdStartTerms,
    /// Decisions that raised or lowered the replica count.
    pub scale_ups: u64,
    pub scale_downs: u64,
    /// Failed replicas (crashed, hung, cut off) that were replaced with a cold one.
    pub replacements: u64,
    /// Billed replicas: the most at once, the time-weighted mean, and at the end of the run.
    pub replicas_peak: u32,
    pub replicas_mean: f64,
    pub replicas_final: u32,
    /// Billed replica-hours over the run, and GPU-hours (× the replicas' tensor-parallel degree).
    pub replica_hours: f64,
    pub gpu_hours: f64,
    /// The price used (the scenario's `[prices]`, else the catalogue's) and GPU-hours × it; absent for a
    /// GPU with no price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_gpu_hour: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Requests that found no ready replica and waited at the gateway for one.
    pub cold_start_hits: ColdStartHits,
    /// Per time-series window over the arrival window: the share of the requests that arrived in it that
    /// completed within the SLO. The fleet's only (absent in a model's block under `models`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_attainment: Option<SloAttainment>,
    /// Every change of the replica count asked for, in time order (with several models: the fleet's
    /// total at each model's change).
    pub changes: Vec<ScaleChange>,
    /// With several models, each model's deployment (its own bounds, target, cold start, changes and
    /// replica-hours); the fields above are then the fleet's: counts and hours summed, the bounds
    /// summed, `metric` and `target` the `[autoscaler]` table's, `cold_start` the slowest model's,
    /// `usd_per_gpu_hour` only when every model's GPUs cost the same.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<AutoscaleSummary>,
}

/// A cold start by term, seconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ColdStartTerms {
    pub provision_s: f64,
    pub image_pull_s: f64,
    pub weight_load_s: f64,
    pub warmup_s: f64,
    pub total_s: f64,
}

/// Requests held at the gateway for want of a ready replica.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ColdStartHits {
    pub requests: u64,
    /// How long they waited there (their whole time held, over every hold of one request).
    pub wait_ms_mean: f64,
    pub wait_ms_max: f64,
}

/// SLO attainment over time.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SloAttainment {
    pub window_s: f64,
    /// Windows judged (those wholly within the arrival window with at least one arrival).
    pub windows: u32,
    /// Good requests over arrivals, over all judged windows.
    pub overall: f64,
    /// The lowest window's share, and the start of that window (`null` when none was judged).
    #[serde(deserialize_with = "crate::confidence::nan_if_null")]
    pub worst: f64,
    #[serde(deserialize_with = "crate::confidence::nan_if_null")]
    pub worst_at_s: f64,
}

/// One change of the replica count.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScaleChange {
    pub at_s: f64,
    pub from: u32,
    pub to: u32,
}

impl SloAttainment {
    /// From the time series' per-window arrivals and good requests, over the windows that end by
    /// `arrivals_end`.
    pub fn of(series: &super::timeseries::TimeSeries, arrivals_end: SimTime) -> Self {
        let width = series.spec.window;
        let (mut windows, mut good, mut arrived) = (0u32, 0u64, 0u64);
        let (mut worst, mut worst_at) = (f64::NAN, f64::NAN);
        for (i, w) in series.windows.iter().enumerate() {
            if series.start(i + 1) > arrivals_end || w.arrivals == 0 {
                continue;
            }
            windows += 1;
            good += w.good;
            arrived += w.arrivals;
            let share = w.good as f64 / w.arrivals as f64;
            if worst.is_nan() || share < worst {
                worst = share;
                worst_at = series.start(i).as_secs_f64();
            }
        }
        let r = |x: f64| super::summary::round(x, 6);
        SloAttainment {
            window_s: width.as_secs_f64(),
            windows,
            overall: if arrived > 0 {
                r(good as f64 / arrived as f64)
            } else {
                f64::NAN
            },
            worst: r(worst),
            worst_at_s: worst_at,
        }
    }
}

impl AutoscaleSummary {
    /// The target as a reader sees it: the metric's value, or the SLO planner's TTFT and ITL.
    pub fn target_text(&self) -> String {
        match (self.target, self.planner_ttft_ms, self.planner_itl_ms) {
            (Some(t), ..) => format!("{t}"),
            (None, Some(ttft), Some(itl)) => format!("TTFT {ttft} ms, ITL {itl} ms"),
            _ => "–".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::SimDuration;

    fn at(s: u64) -> SimTime {
        SimTime::ZERO + SimDuration::from_secs(s)
    }

    fn count(ready: u32, starting: u32, billed: u32) -> ReplicaCount {
        ReplicaCount {
            ready,
            starting,
            billed,
        }
    }

    #[test]
    fn replica_seconds_integrate_the_billed_step_function() {
        let mut log = ReplicaLog::default();
        log.record(at(0), count(1, 0, 1));
        log.record(at(10), count(1, 1, 2));
        log.record(at(10), count(1, 2, 3)); // same instant: replaces
        log.record(at(20), count(1, 2, 3)); // unchanged: ignored
        log.record(at(30), count(3, 0, 3));
        log.record(at(40), count(1, 0, 2));
        // 1×10 + 3×30 + 2×20 (to the end at 60).
        assert_eq!(log.billed_seconds(at(60)), 140.0);
        assert_eq!(log.peak_and_last(), (3, 2));
        assert_eq!(log.at(at(15)), Some(count(1, 2, 3)));
        assert_eq!(log.at(at(35)), Some(count(3, 0, 3)));
    }
}
