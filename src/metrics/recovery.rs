//! Recovery after each fault, judged against a reference (ARCHITECTURE §1.7).
//!
//! The reference is the run's **no-fault twin** when there is one: the same scenario and seeds without
//! its faults, whose requests are the same as the faulted run's up to the fault (common random numbers:
//! the workload's streams do not depend on faults). Without a twin it is the **pre-fault baseline**: the
//! requests that arrived in the `recovery_baseline` before the fault and finished before it.
//!
//! For a fault at time `t` in window `k`:
//! - the **requests in flight** at the fault are those that arrived before `t` and finished after it;
//!   those on the workers the fault hit are its direct **victims**. Both belong to the fault: they are
//!   counted in window `k` (with the requests that arrive in it from `t` on), never in a baseline;
//! - the fleet has **recovered** at the start `T` of the first span of windows `[T, T + recovery_hold)`,
//!   from window `k` on and within the arrival window, in which every window completed requests, none
//!   failed, and the p95 TTFT of the span's requests is within `(1 + recovery_tolerance) ×` the
//!   reference's p95 over the same span (the twin's requests of those windows, or the baseline).
//!   `time_to_recover_s` is `T − t`, 0 when the fault changed nothing measurable (the span from its own
//!   window passes). With no such span the fault is reported as not recovered;
//! - the **affected requests** are those in flight at the fault and those that arrived from `t` to the
//!   recovery (or to the end of arrivals): their TTFT, failures, retries, resets and recompute are set
//!   against the twin's same set (the same requests in flight, the twin's arrivals over the same span),
//!   and the difference is the fault's **excess**;
//! - the **worst window** is the highest windowed p95 TTFT over the affected windows.
//!
//! A fault's **timing** says what it can be judged against: `at_start` (no steady state before it),
//! `during_arrivals`, `after_last_arrival` (only the requests in flight are affected), or `after_end`
//! (the run ended before it: it never happened). Faults close together share windows, so their counts
//! overlap.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::record::{Outcome, RequestRecord};
use super::summary::round;
use super::timeseries::{FaultMark, LogHist, MetricsSpec};
use crate::request::RequestId;
use crate::time::SimTime;

/// What one fault cost and how long the fleet took to get over it (`summary.json` `recovery[]`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Recovery {
    /// The fault, e.g. `crash w3`.
    pub fault: String,
    pub kind: String,
    pub at_s: f64,
    /// `at_start`, `during_arrivals`, `after_last_arrival` or `after_end` (never applied).
    pub timing: String,
    /// `twin` (the same run without faults) or `pre_fault_baseline`.
    pub judged_against: String,
    /// The reference's p50/p95 TTFT and hit rate: the twin's over the affected requests, or the
    /// baseline's.
    pub baseline_ttft_p50_ms: Option<f64>,
    pub baseline_ttft_p95_ms: Option<f64>,
    pub baseline_hit_rate: Option<f64>,
    /// Requests in flight at the fault, and of those the victims (on the workers it hit), with their
    /// TTFT in this run and, with a twin, the same requests' TTFT there.
    pub in_flight: u64,
    pub in_flight_ttft_p95_ms: Option<f64>,
    pub in_flight_twin_ttft_p95_ms: Option<f64>,
    pub victims: u64,
    pub victims_ttft_p50_ms: Option<f64>,
    pub victims_ttft_p95_ms: Option<f64>,
    pub victims_twin_ttft_p50_ms: Option<f64>,
    pub victims_twin_ttft_p95_ms: Option<f64>,
    /// The victims' end-to-end latency (a victim that had its first token keeps that TTFT, but is
    /// served again from scratch or migrated: the fault shows in its E2E), and the twin's.
    pub victims_e2e_p95_ms: Option<f64>,
    pub victims_twin_e2e_p95_ms: Option<f64>,
    /// The affected requests' TTFT, and with a twin its excess over the twin's same set.
    pub affected_requests: u64,
    pub affected_ttft_p50_ms: Option<f64>,
    pub affected_ttft_p95_ms: Option<f64>,
    pub excess_ttft_p50_ms: Option<f64>,
    pub excess_ttft_p95_ms: Option<f64>,
    /// The worst window after the fault (victims counted in the fault's window): its start and p95
    /// TTFT, and the lowest windowed hit rate.
    pub worst_window_start_s: Option<f64>,
    pub worst_window_ttft_p95_ms: Option<f64>,
    pub worst_window_hit_rate: Option<f64>,
    /// Over the affected requests.
    pub requests_failed: u64,
    pub requests_retried: u64,
    pub sessions_reset: u64,
    /// Tokens recomputed, all causes.
    pub recompute_tokens: u64,
    /// With a twin: each of the four above less the twin's over its same set.
    pub excess_failed: Option<i64>,
    pub excess_retried: Option<i64>,
    pub excess_sessions_reset: Option<i64>,
    pub excess_recompute_tokens: Option<i64>,
    pub recovered: bool,
    /// `null` when the fleet did not recover within the run (or the fault never happened).
    pub time_to_recover_s: Option<f64>,
}

/// One request as the recovery analysis reads it (kept by the collector of a run with faults, and of
/// its twin): 48 bytes a request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timeline {
    pub id: RequestId,
    pub arrival: SimTime,
    pub finished: SimTime,
    /// TTFT of a completed request; `u64::MAX` for any other.
    ttft: u64,
    /// Tokens recomputed, all causes (saturating).
    recompute: u32,
    /// Prompt and cached tokens of a completed request (for hit rates); 0 for any other.
    prompt: u32,
    cached: u32,
    /// [`COMPLETED`], [`FAILED`], [`RETRIED`], [`RESET`].
    flags: u8,
}

const COMPLETED: u8 = 1;
const FAILED: u8 = 2;
const RETRIED: u8 = 4;
const RESET: u8 = 8;

impl Timeline {
    pub fn of(r: &RequestRecord) -> Self {
        let completed = r.outcome == Outcome::Completed;
        let flag = |on: bool, f: u8| if on { f } else { 0 };
        Timeline {
            id: r.id,
            arrival: r.arrival,
            finished: r.finished,
            ttft: r
                .first_token
                .filter(|_| completed)
                .map_or(u64::MAX, |f| f.0.saturating_sub(r.arrival.0)),
            recompute: u32::try_from(r.recompute.total_tokens()).unwrap_or(u32::MAX),
            prompt: if completed { r.prompt_tokens } else { 0 },
            cached: if completed { r.cached_tokens } else { 0 },
            flags: flag(completed, COMPLETED)
                | flag(r.outcome == Outcome::Failed, FAILED)
                | flag(r.retries > 0, RETRIED)
                | flag(r.session_reset, RESET),
        }
    }

    /// TTFT of a completed request.
    pub fn ttft_ns(&self) -> Option<u64> {
        (self.ttft != u64::MAX).then_some(self.ttft)
    }

    /// End-to-end latency of a completed request.
    pub fn e2e_ns(&self) -> Option<u64> {
        (self.flags & COMPLETED != 0).then(|| self.finished.0.saturating_sub(self.arrival.0))
    }

    pub fn failed(&self) -> bool {
        self.flags & FAILED != 0
    }

    pub fn retried(&self) -> bool {
        self.flags & RETRIED != 0
    }

    pub fn reset(&self) -> bool {
        self.flags & RESET != 0
    }
}

/// Request timelines as a run keeps them: in fixed-size chunks, so that the store grows without ever
/// copying itself (a doubling vector's reallocation would hold the old and the new buffer at once,
/// half again the store's size at its peak).
#[derive(Clone, Debug, Default)]
pub struct Timelines {
    chunks: Vec<Vec<Timeline>>,
}

/// Timelines per chunk (3 MiB).
const CHUNK: usize = 1 << 16;

impl Timelines {
    pub const fn new() -> Self {
        Timelines { chunks: Vec::new() }
    }

    pub fn push(&mut self, t: Timeline) {
        match self.chunks.last_mut() {
            Some(c) if c.len() < CHUNK => c.push(t),
            _ => {
                let mut c = Vec::with_capacity(CHUNK);
                c.push(t);
                self.chunks.push(c);
            }
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &Timeline> {
        self.chunks.iter().flatten()
    }

    pub fn len(&self) -> usize {
        self.chunks.iter().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl FromIterator<Timeline> for Timelines {
    fn from_iter<I: IntoIterator<Item = Timeline>>(iter: I) -> Self {
        let mut t = Timelines::default();
        for x in iter {
            t.push(x);
        }
        t
    }
}

/// A run as the analysis reads it.
pub struct RunView<'a> {
    /// Every request kept, in any order.
    pub requests: &'a Timelines,
    /// The faults that happened, in time order.
    pub faults: &'a [FaultMark],
    /// Planned faults that never happened because the run ended first: (time, label, kind).
    pub skipped: &'a [FaultMark],
    pub spec: &'a MetricsSpec,
    /// End of the arrival window.
    pub arrivals_end: SimTime,
}

/// Totals over a set of requests.
#[derive(Default)]
struct Tally {
    ttft: LogHist,
    e2e: LogHist,
    n: u64,
    failed: u64,
    retried: u64,
    resets: u64,
    recompute: u64,
    prompt: u64,
    cached: u64,
}

impl Tally {
    fn add(&mut self, t: &Timeline) {
        self.n += 1;
        if let Some(x) = t.ttft_ns() {
            self.ttft.record(x);
        }
        if let Some(x) = t.e2e_ns() {
            self.e2e.record(x);
        }
        self.failed += u64::from(t.failed());
        self.retried += u64::from(t.retried());
        self.resets += u64::from(t.reset());
        self.recompute += u64::from(t.recompute);
        self.prompt += u64::from(t.prompt);
        self.cached += u64::from(t.cached);
    }

    fn of<'t>(ts: impl IntoIterator<Item = &'t Timeline>) -> Self {
        let mut s = Tally::default();
        for t in ts {
            s.add(t);
        }
        s
    }

    fn hit_rate(&self) -> Option<f64> {
        (self.prompt > 0).then(|| self.cached as f64 / self.prompt as f64)
    }
}

/// A run's requests by arrival, with the window arithmetic.
struct Indexed<'a> {
    by_arrival: Vec<&'a Timeline>,
    width: u64,
}

impl<'a> Indexed<'a> {
    fn new(requests: &'a Timelines, width: u64) -> Self {
        let mut by_arrival: Vec<&Timeline> = requests.iter().collect();
        by_arrival.sort_by_key(|t| (t.arrival, t.id));
        Indexed { by_arrival, width }
    }

    /// Requests arriving in `[from, to)`.
    fn arriving(&self, from: SimTime, to: SimTime) -> &[&'a Timeline] {
        let lo = self.by_arrival.partition_point(|t| t.arrival < from);
        let hi = self.by_arrival.partition_point(|t| t.arrival < to);
        &self.by_arrival[lo..hi.max(lo)]
    }

    /// Requests in flight at `t`: arrived before it, finished after it.
    fn in_flight(&self, t: SimTime) -> Vec<&'a Timeline> {
        self.arriving(SimTime::ZERO, t)
            .iter()
            .copied()
            .filter(|r| r.finished > t)
            .collect()
    }

    fn start(&self, i: usize) -> SimTime {
        SimTime(i as u64 * self.width)
    }

    /// The requests of affected window `j ≥ k` of a fault at `t`: those arriving in it from `t` on, and
    /// in the fault's own window `k`, `in_flight` too.
    fn window<'s>(
        &'s self,
        j: usize,
        k: usize,
        t: SimTime,
        in_flight: &'s [&'a Timeline],
    ) -> impl Iterator<Item = &'a Timeline> + 's {
        let from = self.start(j).max(t);
        let own = if j == k { in_flight } else { &[][..] };
        self.arriving(from, self.start(j + 1))
            .iter()
            .chain(own)
            .copied()
    }
}

/// The recovery of every fault of `run`, judged against `twin` (the same scenario without faults) when
/// given, else against each fault's pre-fault baseline.
pub fn analyse(run: &RunView<'_>, twin: Option<&Timelines>) -> Vec<Recovery> {
    let spec = run.spec;
    let width = spec.window.0.max(1);
    let me = Indexed::new(run.requests, width);
    let reference = twin.map(|t| Indexed::new(t, width));
    let hold = (spec.recovery_hold.0.div_ceil(width) as usize).max(1);
    let tol = 1.0 + spec.recovery_tolerance.0;
    let last_arrival = me.by_arrival.last().map(|t| t.arrival);
    // Windows holding arrivals: up to the end of the arrival window, or the last arrival.
    let arrival_windows = match last_arrival {
        Some(a) => ((a.0.min(run.arrivals_end.0.saturating_sub(1))) / width) as usize + 1,
        None => 0,
    };
    let mut out: Vec<Recovery> = run
        .faults
        .iter()
        .map(|f| {
            let t = f.at;
            let k = (t.0 / width) as usize;
            let timing = if t == SimTime::ZERO {
                "at_start"
            } else if last_arrival.is_none_or(|a| t > a) {
                "after_last_arrival"
            } else {
                "during_arrivals"
            };
            let in_flight = me.in_flight(t);
            let hit: HashSet<RequestId> = f.hit.iter().copied().collect();
            let victims: Vec<&Timeline> = in_flight
                .iter()
                .copied()
                .filter(|r| hit.contains(&r.id))
                .collect();
            // The reference: the twin's same requests in flight and its arrivals per window, or the
            // requests that arrived in the baseline before the fault and were done by it.
            let twin_in_flight = reference.as_ref().map(|r| r.in_flight(t));
            let twin_by_id: HashMap<RequestId, &Timeline> = twin_in_flight
                .iter()
                .flatten()
                .map(|r| (r.id, *r))
                .collect();
            let baseline = Tally::of(
                me.arriving(SimTime(t.0.saturating_sub(spec.recovery_baseline.0)), t)
                    .iter()
                    .copied()
                    .filter(|r| r.finished <= t),
            );
            let span_p95 = |ix: &Indexed, fl: &[&Timeline], j: usize| {
                let mut h = LogHist::default();
                let (mut completions, mut failed) = (0, 0);
                for i in j..j + hold {
                    for r in ix.window(i, k, t, fl) {
                        if let Some(x) = r.ttft_ns() {
                            h.record(x);
                            completions += 1;
                        }
                        failed += u64::from(r.failed());
                    }
                }
                (h.quantile(0.95), completions, failed)
            };
            let passes = |j: usize| {
                let (p, completions, failed) = span_p95(&me, &in_flight, j);
                let every_window_completes = (j..j + hold).all(|i| {
                    me.window(i, k, t, &in_flight)
                        .any(|r| r.ttft_ns().is_some())
                });
                let reference_p95 = match (&reference, &twin_in_flight) {
                    (Some(ix), Some(fl)) => span_p95(ix, fl, j).0,
                    _ => baseline.ttft.quantile(0.95),
                };
                completions > 0
                    && failed == 0
                    && every_window_completes
                    && matches!((p, reference_p95), (Some(p), Some(b)) if p <= tol * b)
            };
            let recovered_at = if timing == "after_last_arrival" {
                Some(k)
            } else {
                (k..)
                    .take_while(|&j| j + hold <= arrival_windows)
                    .find(|&j| passes(j))
            };
            let span_end = match recovered_at {
                Some(j) => me.start(j).max(t),
                None => run.arrivals_end.max(t),
            };
            // Affected: in flight at the fault, and arrived from it until the recovery.
            let affected = Tally::of(
                in_flight
                    .iter()
                    .copied()
                    .chain(me.arriving(t, span_end).iter().copied()),
            );
            let twin_affected = reference.as_ref().map(|ix| {
                Tally::of(
                    twin_in_flight
                        .iter()
                        .flatten()
                        .copied()
                        .chain(ix.arriving(t, span_end).iter().copied()),
                )
            });
            let mut worst: Option<(usize, f64)> = None;
            let mut worst_hit: Option<f64> = None;
            let last_window = recovered_at.map_or(arrival_windows.max(k + 1), |j| j.max(k + 1));
            for j in k..last_window {
                let w = Tally::of(me.window(j, k, t, &in_flight));
                if let Some(p) = w.ttft.quantile(0.95)
                    && worst.is_none_or(|(_, q)| p > q)
                {
                    worst = Some((j, p));
                }
                if let Some(h) = w.hit_rate() {
                    worst_hit = Some(worst_hit.map_or(h, |x: f64| x.min(h)));
                }
            }
            let ms = |ns: f64| round(ns / 1e6, 6);
            let q = |h: &LogHist, p: f64| h.quantile(p).map(ms);
            let victims_tally = Tally::of(victims.iter().copied());
            let victims_twin = Tally::of(
                victims
                    .iter()
                    .filter_map(|r| twin_by_id.get(&r.id).copied()),
            );
            let in_flight_twin = twin_in_flight
                .as_ref()
                .map(|fl| Tally::of(fl.iter().copied()));
            let reference_tally = twin_affected.as_ref().unwrap_or(&baseline);
            let excess = |a: u64, b: u64| twin_affected.as_ref().map(|_| a as i64 - b as i64);
            let tw = twin_affected.as_ref();
            let recovered = recovered_at.is_some();
            Recovery {
                fault: f.label.clone(),
                kind: f.kind.to_string(),
                at_s: round(t.as_secs_f64(), 9),
                timing: timing.to_string(),
                judged_against: if twin.is_some() {
                    "twin"
                } else {
                    "pre_fault_baseline"
                }
                .into(),
                baseline_ttft_p50_ms: q(&reference_tally.ttft, 0.5),
                baseline_ttft_p95_ms: q(&reference_tally.ttft, 0.95),
                baseline_hit_rate: reference_tally.hit_rate().map(|h| round(h, 6)),
                in_flight: in_flight.len() as u64,
                in_flight_ttft_p95_ms: q(&Tally::of(in_flight.iter().copied()).ttft, 0.95),
                in_flight_twin_ttft_p95_ms: in_flight_twin.as_ref().and_then(|x| q(&x.ttft, 0.95)),
                victims: victims.len() as u64,
                victims_ttft_p50_ms: q(&victims_tally.ttft, 0.5),
                victims_ttft_p95_ms: q(&victims_tally.ttft, 0.95),
                victims_twin_ttft_p50_ms: twin.and(q(&victims_twin.ttft, 0.5)),
                victims_twin_ttft_p95_ms: twin.and(q(&victims_twin.ttft, 0.95)),
                victims_e2e_p95_ms: q(&victims_tally.e2e, 0.95),
                victims_twin_e2e_p95_ms: twin.and(q(&victims_twin.e2e, 0.95)),
                affected_requests: affected.n,
                affected_ttft_p50_ms: q(&affected.ttft, 0.5),
                affected_ttft_p95_ms: q(&affected.ttft, 0.95),
                excess_ttft_p50_ms: tw
                    .and_then(|x| Some(round(q(&affected.ttft, 0.5)? - q(&x.ttft, 0.5)?, 6))),
                excess_ttft_p95_ms: tw
                    .and_then(|x| Some(round(q(&affected.ttft, 0.95)? - q(&x.ttft, 0.95)?, 6))),
                worst_window_start_s: worst.map(|(j, _)| round(me.start(j).as_secs_f64(), 9)),
                worst_window_ttft_p95_ms: worst.map(|(_, p)| ms(p)),
                worst_window_hit_rate: worst_hit.map(|h| round(h, 6)),
                requests_failed: affected.failed,
                requests_retried: affected.retried,
                sessions_reset: affected.resets,
                recompute_tokens: affected.recompute,
                excess_failed: excess(affected.failed, tw.map_or(0, |x| x.failed)),
                excess_retried: excess(affected.retried, tw.map_or(0, |x| x.retried)),
                excess_sessions_reset: excess(affected.resets, tw.map_or(0, |x| x.resets)),
                excess_recompute_tokens: excess(affected.recompute, tw.map_or(0, |x| x.recompute)),
                recovered,
                time_to_recover_s: recovered_at
                    .map(|j| round(me.start(j).0.saturating_sub(t.0) as f64 / 1e9, 9)),
            }
        })
        .collect();
    out.extend(
        run.skipped
            .iter()
            .map(|f| never_happened(f, twin.is_some())),
    );
    out
}

/// The entry of a planned fault that the run ended before: nothing measured, not recovered.
fn never_happened(f: &FaultMark, twin: bool) -> Recovery {
    Recovery {
        fault: f.label.clone(),
        kind: f.kind.to_string(),
        at_s: round(f.at.as_secs_f64(), 9),
        timing: "after_end".into(),
        judged_against: if twin { "twin" } else { "pre_fault_baseline" }.into(),
        ..Recovery::default()
    }
}

/// The recovery table that `summary.md` and the report page show: a header and a row per fault.
pub fn table(recoveries: &[Recovery]) -> (Vec<&'static str>, Vec<Vec<String>>) {
    let header = vec![
        "fault",
        "at (s)",
        "timing",
        "judged against",
        "in flight / victims",
        "victims p95 TTFT, ms (twin)",
        "victims p95 E2E, ms (twin)",
        "affected p95 TTFT, ms (reference)",
        "worst window p95, ms",
        "failed",
        "retried",
        "reset",
        "recomputed tokens (excess)",
        "recovered after (s)",
    ];
    let ms = |v: Option<f64>| v.map_or("–".to_string(), |x| format!("{x:.1}"));
    let with = |a: String, b: Option<String>| match b {
        Some(b) => format!("{a} ({b})"),
        None => a,
    };
    let signed = |v: Option<i64>| v.map(|x| format!("{x:+}"));
    let rows = recoveries
        .iter()
        .map(|f| {
            vec![
                f.fault.clone(),
                format!("{:.1}", f.at_s),
                f.timing.replace('_', " "),
                f.judged_against.replace('_', " "),
                format!("{} / {}", f.in_flight, f.victims),
                with(
                    ms(f.victims_ttft_p95_ms),
                    f.victims_twin_ttft_p95_ms.map(|x| format!("{x:.1}")),
                ),
                with(
                    ms(f.victims_e2e_p95_ms),
                    f.victims_twin_e2e_p95_ms.map(|x| format!("{x:.1}")),
                ),
                with(
                    ms(f.affected_ttft_p95_ms),
                    f.baseline_ttft_p95_ms.map(|x| format!("{x:.1}")),
                ),
                ms(f.worst_window_ttft_p95_ms),
                with(f.requests_failed.to_string(), signed(f.excess_failed)),
                with(f.requests_retried.to_string(), signed(f.excess_retried)),
                with(
                    f.sessions_reset.to_string(),
                    signed(f.excess_sessions_reset),
                ),
                with(
                    f.recompute_tokens.to_string(),
                    signed(f.excess_recompute_tokens),
                ),
                match (f.timing.as_str(), f.time_to_recover_s) {
                    ("after_end", _) => "never happened".into(),
                    (_, Some(t)) => format!("{t:.0}"),
                    (_, None) => "not recovered".into(),
                },
            ]
        })
        .collect();
    (header, rows)
}
