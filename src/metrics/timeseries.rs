//! Per-window time series (`timeseries.csv`) and the raw material of the recovery analysis.
//!
//! Each finished request is folded into fixed windows of simulated time: latencies and hit rate by the
//! window of its *arrival* (what a user arriving then experienced), outcomes (completions, failures,
//! retries, resets, recompute) by the window in which it *finished*, and queueing as the time-average
//! number of requests waiting for their first step. Memory is per window, never per request.

use serde::{Deserialize, Serialize};

use super::record::{Outcome, RecomputeCause, RequestRecord};
use crate::config::Fraction;
use crate::time::{SimDuration, SimTime};

/// `[metrics]`: the time-series window, how recovery is judged, and the warm-up.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetricsSpec {
    /// Width of one time-series window.
    #[serde(default = "defaults::window")]
    pub window: SimDuration,
    /// Recovery: how long the windowed p95 TTFT must stay within tolerance of the baseline.
    #[serde(default = "defaults::recovery_hold")]
    pub recovery_hold: SimDuration,
    /// Recovery: how far before a fault the baseline reaches.
    #[serde(default = "defaults::recovery_baseline")]
    pub recovery_baseline: SimDuration,
    /// Recovery: windowed p95 TTFT within `(1 + tolerance) ×` baseline counts as recovered.
    #[serde(default = "defaults::recovery_tolerance")]
    pub recovery_tolerance: Fraction,
    /// `"auto"` (MSER-5), a duration, or `"none"`: requests arriving before the warm-up end are left
    /// out of latency, throughput and goodput ([`super::warmup`]).
    #[serde(default)]
    pub warmup: super::warmup::Warmup,
}

impl Default for MetricsSpec {
    fn default() -> Self {
        toml::from_str("").expect("every metrics key has a default")
    }
}

mod defaults {
    use super::*;
    pub fn window() -> SimDuration {
        SimDuration::from_secs(10)
    }
    pub fn recovery_hold() -> SimDuration {
        SimDuration::from_secs(60)
    }
    pub fn recovery_baseline() -> SimDuration {
        SimDuration::from_secs(300)
    }
    pub fn recovery_tolerance() -> Fraction {
        Fraction(0.1)
    }
}

/// Log-spaced buckets: bucket `i` holds values in `[FLOOR·R^i, FLOOR·R^(i+1))` ns, R = 1.02 (2% wide).
const FLOOR_NS: f64 = 1_000.0;
const LN_R: f64 = 0.019_802_627_296_179_712; // ln(1.02)
const MAX_BUCKETS: usize = 1_400; // 1 µs · 1.02^1400 ≈ 10^12 s

/// A small latency histogram with 2%-wide buckets: quantiles within 1% of the true value (the bucket's
/// geometric middle), clamped to the observed minimum and maximum.
///
/// Only the buckets from the lowest to the highest one used are stored (`counts[i]` is bucket
/// `first + i`): a run keeps one histogram per time-series window, and a window's TTFTs span a few
/// hundred of the 1,400 buckets, so storing them all from bucket 0 made memory grow by ~2.7 KB per
/// window of simulated time.
#[derive(Clone, Debug, Default)]
pub struct LogHist {
    counts: Vec<u32>,
    first: usize,
    n: u64,
    min: u64,
    max: u64,
}

impl LogHist {
    fn bucket(ns: u64) -> usize {
        if (ns as f64) < FLOOR_NS {
            return 0;
        }
        (((ns as f64 / FLOOR_NS).ln() / LN_R) as usize).min(MAX_BUCKETS - 1)
    }

    /// Adds `count` to bucket `b`, widening the stored range to reach it.
    fn add(&mut self, b: usize, count: u32) {
        if self.counts.is_empty() {
            self.first = b;
        } else if b < self.first {
            let grow = self.first - b;
            self.counts.splice(0..0, std::iter::repeat_n(0, grow));
            self.first = b;
        }
        let i = b - self.first;
        if self.counts.len() <= i {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += count;
    }

    /// Adds one value, ns.
    pub fn record(&mut self, ns: u64) {
        self.add(Self::bucket(ns), 1);
        self.min = if self.n == 0 { ns } else { self.min.min(ns) };
        self.max = self.max.max(ns);
        self.n += 1;
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &LogHist) {
        if other.n == 0 {
            return;
        }
        // Both ends first, so that the range widens at most once at each side.
        if let Some(last) = other.counts.len().checked_sub(1) {
            self.add(other.first + last, 0);
            self.add(other.first, 0);
        }
        for (i, &c) in other.counts.iter().enumerate() {
            self.counts[other.first + i - self.first] += c;
        }
        self.min = if self.n == 0 {
            other.min
        } else {
            self.min.min(other.min)
        };
        self.max = self.max.max(other.max);
        self.n += other.n;
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// The value at quantile `q` (nearest rank), ns; `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.n == 0 {
            return None;
        }
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        if rank == self.n {
            return Some(self.max as f64);
        }
        let mut seen = 0u64;
        for (i, &c) in (self.first..).zip(&self.counts) {
            seen += u64::from(c);
            if seen >= rank {
                let mid = if i == 0 {
                    FLOOR_NS / 2.0
                } else {
                    FLOOR_NS * ((i as f64 + 0.5) * LN_R).exp()
                };
                return Some(mid.clamp(self.min as f64, self.max as f64));
            }
        }
        Some(self.max as f64)
    }
}

/// One window's counts.
#[derive(Clone, Debug, Default)]
pub struct Window {
    /// Requests that arrived in the window (counted when they finish, so every arrival is counted once).
    pub arrivals: u64,
    /// Requests completed, failed, with retries (or migrations), and conversations reset, in the window.
    pub completions: u64,
    pub failed: u64,
    pub retried: u64,
    pub resets: u64,
    /// Tokens recomputed because of failures (causes `failure` and `migrated`), by finish window.
    pub failure_recompute: u64,
    /// TTFT of completed requests that arrived in the window.
    pub ttft: LogHist,
    /// TPOT of completed requests with more than one output token that arrived in the window.
    pub tpot: LogHist,
    /// Prompt and cached tokens of completed requests that arrived in the window.
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    /// Request-nanoseconds spent waiting for a first step within the window.
    pub queued_ns: u128,
    /// Requests that arrived in the window and completed within the SLO.
    pub good: u64,
}

/// The worst windows of a run's steady state (`summary.json` `slo_window`): p95 latencies judged
/// window by window, so that a burst cannot hide in a whole-run percentile. Quantiles are the
/// time series' (within 1%).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorstWindows {
    pub width_s: f64,
    /// Whole windows judged.
    pub windows: u32,
    #[serde(deserialize_with = "crate::confidence::nan_if_null")]
    pub worst_ttft_p95_ms: f64,
    /// Start of the window with the worst p95 TTFT.
    #[serde(deserialize_with = "crate::confidence::nan_if_null")]
    pub worst_ttft_at_s: f64,
    #[serde(deserialize_with = "crate::confidence::nan_if_null")]
    pub worst_tpot_p95_ms: f64,
    #[serde(deserialize_with = "crate::confidence::nan_if_null")]
    pub worst_tpot_at_s: f64,
}

/// A fault as the outputs show it.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultMark {
    pub at: SimTime,
    pub label: String,
    pub kind: &'static str,
    /// The requests on the workers it hit when it happened: its direct victims.
    pub hit: Vec<crate::request::RequestId>,
}

/// Windows over the whole run, plus the fleet's up count and the faults.
#[derive(Clone, Debug)]
pub struct TimeSeries {
    pub spec: MetricsSpec,
    pub windows: Vec<Window>,
    /// (time, workers up from then on), in time order.
    pub up: Vec<(SimTime, u32)>,
    pub faults: Vec<FaultMark>,
    /// Planned faults the run ended before (they never happened).
    pub skipped: Vec<FaultMark>,
    /// KV-cache utilisation of each worker over time.
    pub kv: KvUsage,
    /// Replicas over time; empty unless the fleet is autoscaled (then `timeseries.csv` shows them).
    pub replicas: super::replicas::ReplicaLog,
    /// With several autoscaled models: each model's replica counts (name, log), in deployment order.
    pub replicas_by_model: Vec<(String, super::replicas::ReplicaLog)>,
}

/// KV-cache utilisation (blocks held by running sequences over the pool) of each worker over time,
/// piecewise constant between samples: the engine samples a worker each time it schedules (after every
/// step end, and when it wakes up), which is when blocks are allocated and freed.
///
/// Invariant: for every window, each worker's area is at most the window's covered duration, so the
/// window means lie in [0, 1].
#[derive(Clone, Debug, Default)]
pub struct KvUsage {
    /// Per worker: the last sample (time, used fraction).
    last: Vec<Option<(SimTime, f64)>>,
    /// Per worker, per window: the integral of the used fraction over time, ns.
    area: Vec<Vec<f64>>,
    /// Set by [`TimeSeries::close_kv`]: the run's end and its number of workers.
    closed: Option<(SimTime, usize)>,
}

impl TimeSeries {
    /// An empty series with `spec`'s window.
    pub fn new(spec: MetricsSpec) -> Self {
        TimeSeries {
            spec,
            windows: Vec::new(),
            up: Vec::new(),
            faults: Vec::new(),
            skipped: Vec::new(),
            kv: KvUsage::default(),
            replicas: super::replicas::ReplicaLog::default(),
            replicas_by_model: Vec::new(),
        }
    }

    fn width(&self) -> u64 {
        self.spec.window.0.max(1)
    }

    /// Index of the window holding `t`.
    pub fn index(&self, t: SimTime) -> usize {
        (t.0 / self.width()) as usize
    }

    /// Start of window `i`.
    pub fn start(&self, i: usize) -> SimTime {
        SimTime(i as u64 * self.width())
    }

    fn at(&mut self, i: usize) -> &mut Window {
        if self.windows.len() <= i {
            self.windows.resize_with(i + 1, Window::default);
        }
        &mut self.windows[i]
    }

    /// Folds in one finished request; `good` if it completed within the SLO.
    pub fn on_finished(&mut self, r: &RequestRecord, good: bool) {
        let a = self.index(r.arrival);
        let f = self.index(r.finished);
        let aw = self.at(a);
        aw.arrivals += 1;
        aw.good += u64::from(good);
        let fw = self.at(f);
        match r.outcome {
            Outcome::Completed => fw.completions += 1,
            Outcome::Failed => fw.failed += 1,
            Outcome::Rejected => {}
        }
        fw.retried += u64::from(r.retries > 0);
        fw.resets += u64::from(r.session_reset);
        fw.failure_recompute += r.recompute.tokens[RecomputeCause::Failure.index()]
            + r.recompute.tokens[RecomputeCause::Migrated.index()];
        if r.outcome == Outcome::Completed
            && let Some(first) = r.first_token
        {
            let aw = self.at(a);
            aw.ttft.record(first.since(r.arrival).0);
            if r.output_tokens > 1 {
                aw.tpot
                    .record(r.finished.since(first).0 / u64::from(r.output_tokens - 1));
            }
            aw.prompt_tokens += u64::from(r.prompt_tokens);
            aw.cached_tokens += u64::from(r.cached_tokens);
        }
        // Waiting for a first step: from arrival to the first step (or the end, if never scheduled).
        let until = r.first_scheduled.unwrap_or(r.finished);
        let mut t = r.arrival;
        while t < until {
            let i = self.index(t);
            let end = self.start(i + 1).min(until);
            self.at(i).queued_ns += u128::from(end.0 - t.0);
            t = end;
        }
    }

    /// The worst p95 TTFT and p95 TPOT over consecutive windows of `width` (a multiple of the series'
    /// window) that lie wholly in `[from, until)`, by arrival; `None` when no such window has a completed
    /// request. Windows are aligned to `from` rounded up to the series' window.
    pub fn worst_windows(
        &self,
        width: crate::time::SimDuration,
        from: SimTime,
        until: SimTime,
    ) -> Option<WorstWindows> {
        let per = (width.0 / self.width()).max(1) as usize;
        let first = (from.0.div_ceil(self.width())) as usize;
        let end = ((until.0 / self.width()) as usize).min(self.windows.len());
        let mut out: Option<WorstWindows> = None;
        let mut i = first;
        while i + per <= end {
            let mut ttft = LogHist::default();
            let mut tpot = LogHist::default();
            for w in self.windows.iter().skip(i).take(per) {
                ttft.merge(&w.ttft);
                tpot.merge(&w.tpot);
            }
            let ms = |h: &LogHist| h.quantile(0.95).map(|v| v / 1e6);
            let o = out.get_or_insert(WorstWindows {
                width_s: width.as_secs_f64(),
                windows: 0,
                worst_ttft_p95_ms: f64::NAN,
                worst_ttft_at_s: f64::NAN,
                worst_tpot_p95_ms: f64::NAN,
                worst_tpot_at_s: f64::NAN,
            });
            o.windows += 1;
            let at = self.start(i).as_secs_f64();
            if let Some(v) = ms(&ttft)
                && (o.worst_ttft_p95_ms.is_nan() || v > o.worst_ttft_p95_ms)
            {
                o.worst_ttft_p95_ms = v;
                o.worst_ttft_at_s = at;
            }
            if let Some(v) = ms(&tpot)
                && (o.worst_tpot_p95_ms.is_nan() || v > o.worst_tpot_p95_ms)
            {
                o.worst_tpot_p95_ms = v;
                o.worst_tpot_at_s = at;
            }
            i += per;
        }
        out.filter(|o| o.worst_ttft_p95_ms.is_finite() || o.worst_tpot_p95_ms.is_finite())
    }

    /// Worker `w` holds `used` of its `total` KV blocks from `t` on.
    pub fn on_kv(&mut self, w: usize, t: SimTime, used: u32, total: u32) {
        self.kv_to(w, t);
        if self.kv.last.len() <= w {
            self.kv.last.resize(w + 1, None);
        }
        self.kv.last[w] = Some((t, f64::from(used) / f64::from(total.max(1))));
    }

    /// Integrates worker `w`'s last sample up to `t`.
    fn kv_to(&mut self, w: usize, t: SimTime) {
        let Some(Some((from, frac))) = self.kv.last.get(w).copied() else {
            return;
        };
        if self.kv.area.len() <= w {
            self.kv.area.resize(w + 1, Vec::new());
        }
        let mut at = from;
        while at < t {
            let i = self.index(at);
            let end = self.start(i + 1).min(t);
            let area = &mut self.kv.area[w];
            if area.len() <= i {
                area.resize(i + 1, 0.0);
            }
            area[i] += frac * (end.0 - at.0) as f64;
            at = end;
        }
        self.kv.last[w] = Some((t, frac));
    }

    /// Ends the KV-utilisation record at the run's end `end`, for a fleet of `workers` workers.
    pub fn close_kv(&mut self, end: SimTime, workers: usize) {
        for w in 0..self.kv.last.len() {
            self.kv_to(w, end);
        }
        self.kv.closed = Some((end, workers));
    }

    /// Window `i`'s KV-cache utilisation: the mean over workers of each worker's time-averaged
    /// utilisation in the window, and the largest of those, rounded to 1e-6; `None` before
    /// [`TimeSeries::close_kv`] or for a window the run did not reach.
    pub fn kv_window(&self, i: usize) -> Option<(f64, f64)> {
        let (end, workers) = self.kv.closed?;
        let covered = self.start(i + 1).min(end).0.checked_sub(self.start(i).0)?;
        if covered == 0 || workers == 0 {
            return None;
        }
        let per_worker = |w: usize| {
            self.kv
                .area
                .get(w)
                .and_then(|a| a.get(i))
                .map_or(0.0, |a| a / covered as f64)
        };
        let sum: f64 = (0..workers).map(per_worker).sum();
        let max = (0..workers).map(per_worker).fold(0.0, f64::max);
        let r = |x: f64| super::summary::round(x.clamp(0.0, 1.0), 6);
        Some((r(sum / workers as f64), r(max)))
    }

    /// Workers up from `t` on.
    pub fn on_workers_up(&mut self, t: SimTime, up: u32) {
        match self.up.last_mut() {
            Some(last) if last.0 == t => last.1 = up,
            _ => self.up.push((t, up)),
        }
    }

    /// Workers up at `t` (the last change at or before it).
    pub fn up_at(&self, t: SimTime) -> Option<u32> {
        let i = self.up.partition_point(|&(s, _)| s <= t);
        (i > 0).then(|| self.up[i - 1].1)
    }

    /// `timeseries.csv`: one row per window from 0 to the last window with activity. An autoscaled run
    /// adds the replicas at each window's end (ready, starting, billed) and the window's SLO attainment,
    /// and with several autoscaled models each model's billed replicas (`replicas_billed:MODEL`).
    pub fn to_csv(&self) -> Vec<u8> {
        use std::fmt::Write;
        let scaled = !self.replicas.is_empty();
        let mut o = String::from(
            "window_start_s,window_end_s,arrivals,completions,failed,retried,sessions_reset,\
             ttft_p50_ms,ttft_p95_ms,hit_rate,queue_depth,workers_up,failure_recompute_tokens,faults,\
             kv_util_mean,kv_util_max",
        );
        if scaled {
            o.push_str(",replicas_ready,replicas_starting,replicas_billed,slo_attainment");
            for (model, _) in &self.replicas_by_model {
                let _ = write!(o, ",replicas_billed:{model}");
            }
        }
        o.push('\n');
        let width = self.spec.window.as_secs_f64();
        for (i, w) in self.windows.iter().enumerate() {
            let ms = |q: f64| {
                w.ttft
                    .quantile(q)
                    .map_or(String::new(), |v| format!("{:.3}", v / 1e6))
            };
            let hit = if w.prompt_tokens > 0 {
                format!("{:.6}", w.cached_tokens as f64 / w.prompt_tokens as f64)
            } else {
                String::new()
            };
            let depth = w.queued_ns as f64 / self.spec.window.0.max(1) as f64;
            let end = self.start(i + 1);
            let up = self
                .up_at(SimTime(end.0.saturating_sub(1)))
                .map_or(String::new(), |u| u.to_string());
            let faults: Vec<&str> = self
                .faults
                .iter()
                .filter(|f| self.index(f.at) == i)
                .map(|f| f.label.as_str())
                .collect();
            let (kv_mean, kv_max) = self
                .kv_window(i)
                .map_or((String::new(), String::new()), |(m, x)| {
                    (format!("{m:.6}"), format!("{x:.6}"))
                });
            let _ = write!(
                o,
                "{:.3},{:.3},{},{},{},{},{},{},{},{},{:.3},{},{},{},{},{}",
                i as f64 * width,
                (i + 1) as f64 * width,
                w.arrivals,
                w.completions,
                w.failed,
                w.retried,
                w.resets,
                ms(0.5),
                ms(0.95),
                hit,
                depth,
                up,
                w.failure_recompute,
                faults.join(";"),
                kv_mean,
                kv_max
            );
            if scaled {
                let c = self
                    .replicas
                    .at(SimTime(end.0.saturating_sub(1)))
                    .unwrap_or_default();
                let slo = if w.arrivals > 0 {
                    format!("{:.6}", w.good as f64 / w.arrivals as f64)
                } else {
                    String::new()
                };
                let _ = write!(o, ",{},{},{},{slo}", c.ready, c.starting, c.billed);
                for (_, log) in &self.replicas_by_model {
                    let c = log.at(SimTime(end.0.saturating_sub(1))).unwrap_or_default();
                    let _ = write!(o, ",{}", c.billed);
                }
            }
            o.push('\n');
        }
        o.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_hist_quantiles_are_within_one_percent_and_clamped() {
        let mut h = LogHist::default();
        for v in 1..=1000u64 {
            h.record(v * 1_000_000); // 1..1000 ms
        }
        // Nearest rank: p50 is the 500th value (500 ms), p95 the 950th (950 ms).
        let p50 = h.quantile(0.5).unwrap();
        let p95 = h.quantile(0.95).unwrap();
        assert!((p50 / 500e6 - 1.0).abs() < 0.01, "{p50}");
        assert!((p95 / 950e6 - 1.0).abs() < 0.01, "{p95}");
        assert_eq!(h.quantile(1.0).unwrap(), 1000e6);
        let mut one = LogHist::default();
        one.record(7_777_777);
        assert_eq!(
            one.quantile(0.5),
            Some(7_777_777.0),
            "a single value is exact"
        );
        assert_eq!(LogHist::default().quantile(0.5), None);
    }

    proptest::proptest! {
        /// The stored range is an implementation detail: recording values in any order, split across
        /// histograms merged in any order, gives the quantiles of counting every bucket from 0.
        #[test]
        fn log_hist_quantiles_do_not_depend_on_order_or_merging(
            values in proptest::collection::vec(0u64..10_000_000_000_000, 1..200),
            split in 0usize..200,
        ) {
            let split = split.min(values.len());
            let (a, b) = values.split_at(split);
            let (mut left, mut right) = (LogHist::default(), LogHist::default());
            a.iter().for_each(|&v| left.record(v));
            b.iter().rev().for_each(|&v| right.record(v));
            let mut merged = right.clone();
            merged.merge(&left);
            left.merge(&right);
            // Reference: every bucket from 0, nearest rank.
            let mut full = vec![0u64; MAX_BUCKETS];
            values.iter().for_each(|&v| full[LogHist::bucket(v)] += 1);
            let (lo, hi) = (*values.iter().min().unwrap(), *values.iter().max().unwrap());
            for q in [0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 1.0] {
                let rank = ((q * values.len() as f64).ceil() as u64).clamp(1, values.len() as u64);
                let expected = if rank == values.len() as u64 {
                    hi as f64
                } else {
                    let mut seen = 0;
                    let i = full.iter().position(|&c| { seen += c; seen >= rank }).unwrap();
                    let mid = if i == 0 { FLOOR_NS / 2.0 } else { FLOOR_NS * ((i as f64 + 0.5) * LN_R).exp() };
                    mid.clamp(lo as f64, hi as f64)
                };
                proptest::prop_assert_eq!(left.quantile(q), Some(expected));
                proptest::prop_assert_eq!(merged.quantile(q), Some(expected));
            }
            proptest::prop_assert_eq!(left.count(), values.len() as u64);
        }
    }

    #[test]
    fn queueing_is_split_across_windows() {
        let mut ts = TimeSeries::new(MetricsSpec::default());
        // Arrives at 5 s, first step at 25 s, first token at 26 s, done at 30 s.
        let mut r = crate::metrics::tests::completed(1, 5_000, 26_000, 30_000, 2);
        r.first_scheduled = Some(crate::metrics::tests::ms(25_000));
        ts.on_finished(&r, false);
        // Waited 5..25 s: 5 s in window 0, 10 s in window 1, 5 s in window 2.
        let q: Vec<u128> = ts.windows.iter().map(|w| w.queued_ns).collect();
        assert_eq!(q, vec![5_000_000_000, 10_000_000_000, 5_000_000_000, 0]);
        assert_eq!(ts.windows[0].arrivals, 1);
        assert_eq!(ts.windows[3].completions, 1);
        assert_eq!(ts.windows[0].ttft.quantile(0.5), Some(21e9));
    }
}
