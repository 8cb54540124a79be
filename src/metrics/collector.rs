//! Folds finished requests into counters and latency histograms.
//!
//! Counts, recompute, sessions, per-worker figures and the time series are over the whole run; the
//! latencies, goodput, throughput and prefix-cache figures are over the steady state ([`Steady`]: the
//! requests that arrived after the warm-up, [`super::warmup`]).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use super::record::{Outcome, Recompute, RequestRecord};
use super::recovery::{RunView, Timeline, Timelines};
use super::steady::{Obs, Steady};
use super::timeseries::{FaultMark, MetricsSpec, TimeSeries};
use super::warmup::{WarmupState, WarmupSummary};
use crate::metrics::Slo;
use crate::time::SimTime;

/// A latency distribution in nanoseconds: exact count, mean, minimum and maximum; percentiles to 3
/// significant digits, always within `[min, max]`.
#[derive(Debug, Clone)]
pub struct Latency {
    hist: Histogram<u64>,
    sum: u128,
    min: u64,
    max: u64,
}

impl Default for Latency {
    fn default() -> Self {
        Latency {
            // 1 ns to ~11.6 days at 3 significant digits.
            hist: Histogram::new_with_bounds(1, 1_000_000_000_000_000, 3)
                .expect("valid histogram bounds"),
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }
}

impl Latency {
    /// Adds one observation.
    pub fn record(&mut self, ns: u64) {
        self.hist.saturating_record(ns);
        self.sum += u128::from(ns);
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
    }

    /// Observations.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// Exact mean, ns (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.count() == 0 {
            0.0
        } else {
            self.sum as f64 / self.count() as f64
        }
    }

    /// Value at quantile `q` in [0, 1], ns: the bucket's midpoint clamped to the observed minimum and
    /// maximum (a bucket can reach past both); 0 when empty.
    pub fn quantile(&self, q: f64) -> f64 {
        if self.count() == 0 {
            return 0.0;
        }
        if q >= 1.0 {
            return self.max as f64;
        }
        let mid = self.hist.median_equivalent(self.hist.value_at_quantile(q));
        mid.clamp(self.min, self.max) as f64
    }

    /// Exact minimum, ns (0 when empty).
    pub fn min(&self) -> u64 {
        if self.count() == 0 { 0 } else { self.min }
    }

    /// Exact maximum, ns.
    pub fn max(&self) -> u64 {
        self.max
    }
}

/// Prompt-length buckets of the TTFT breakdown: lower bounds in tokens (each bucket runs to the next).
pub const PROMPT_BUCKETS: [u32; 5] = [0, 512, 2048, 8192, 32768];

/// Conversation turns reported one by one; later turns are pooled into the last group.
pub const TURN_GROUPS: usize = 5;

/// Where completed requests' time went, and TTFT broken down by conversation turn and prompt length.
///
/// Invariant: every completed request is in `prefill` and `decode` once, in exactly one prompt bucket,
/// and, if it belongs to a session, in exactly one turn group.
#[derive(Debug, Clone, Default)]
pub struct Breakdown {
    /// First scheduled → first token (prefill, including any preemption and re-prefill before it).
    pub prefill: Latency,
    /// First token → finish.
    pub decode: Latency,
    /// TTFT of turn 0, 1, ..., and of turns `TURN_GROUPS - 1` and later in the last entry.
    pub ttft_by_turn: [Latency; TURN_GROUPS],
    /// TTFT by prompt length, one entry per [`PROMPT_BUCKETS`] bucket.
    pub ttft_by_prompt: [Latency; PROMPT_BUCKETS.len()],
}

impl Breakdown {
    /// The bucket of a prompt of `tokens`.
    pub fn prompt_bucket(tokens: u32) -> usize {
        PROMPT_BUCKETS
            .iter()
            .rposition(|&lo| tokens >= lo)
            .unwrap_or(0)
    }

    pub(super) fn on_completed(&mut self, r: &Obs, first_token: SimTime) {
        let ttft = first_token.since(r.arrival).0;
        if let Some(s) = r.first_scheduled() {
            self.prefill.record(first_token.since(s).0);
        }
        self.decode.record(r.finished.since(first_token).0);
        if let Some(turn) = r.turn() {
            self.ttft_by_turn[(turn as usize).min(TURN_GROUPS - 1)].record(ttft);
        }
        self.ttft_by_prompt[Self::prompt_bucket(r.prompt_tokens)].record(ttft);
    }
}

/// Tokens of the completed requests one worker served.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerTokens {
    pub prompt: u64,
    /// Of the prompt tokens, those served from the worker's prefix cache.
    pub cached: u64,
    pub output: u64,
}

/// Running totals over every finished request, and the steady-state part.
#[derive(Debug, Clone)]
pub struct Collector {
    pub slo: Slo,
    pub arrived: u64,
    pub completed: u64,
    pub failed: u64,
    pub rejected: u64,
    pub retried: u64,
    /// Rejected requests by the reason given (`"no worker up"`, ...).
    pub rejected_by_reason: BTreeMap<&'static str, u64>,
    /// Failed requests by the reason given.
    pub failed_by_reason: BTreeMap<&'static str, u64>,
    /// Latencies, goodput and tokens of the requests that arrived after the warm-up.
    pub steady: Steady,
    /// Which requests are steady state, and the warm-up found at the end.
    pub warmup: WarmupState,
    /// Prompt tokens of every completed request (whole run), and of those served from the prefix
    /// cache; see [`Steady`] for the steady-state ones.
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub output_tokens: u64,
    pub prefill_tokens: u64,
    pub recompute: Recompute,
    pub preemptions: u64,
    pub last_finish: SimTime,
    /// Completed requests per worker.
    pub per_worker: Vec<u64>,
    /// Prompt, cached and output tokens of the completed requests each worker served.
    pub per_worker_tokens: Vec<WorkerTokens>,
    /// Model FLOPs (per GPU) of the completed requests each worker served ([`super::mfu`]); the engine
    /// adds them, knowing each worker's model.
    pub per_worker_model_flops: Vec<f64>,
    /// Conversations that started (requests that were turn 0 of a session), in any outcome.
    pub sessions_started: u64,
    /// Requests that belonged to a session, in any outcome.
    pub session_requests: u64,
    /// Requests with an attempt that timed out, requests migrated, and conversations reset.
    pub timed_out: u64,
    pub migrated: u64,
    pub sessions_reset: u64,
    /// Later turns of a conversation served without its history ([`RequestRecord::history_tokens`] 0).
    pub turns_without_history: u64,
    /// Prompt tokens of completed requests loaded from the shared store instead of computed.
    pub loaded_tokens: u64,
    /// Per-window series, fault marks and the fleet's up count.
    pub series: TimeSeries,
    /// End of the arrival window (recovery is judged within it).
    pub arrivals_end: SimTime,
    /// Per traffic class, by class index, whole-run counts (empty without a mix).
    pub classes: Vec<super::classes::ClassStats>,
    /// Every request's timeline, for the recovery analysis ([`Collector::keep_timelines`]); `None`
    /// unless asked for (a run with faults, or a twin).
    pub timelines: Option<Timelines>,
    /// Arrivals before this are not kept in `timelines`.
    pub timelines_from: SimTime,
}

impl Collector {
    /// An empty collector for a fleet of `workers`.
    pub fn new(slo: Slo, workers: usize) -> Self {
        Collector {
            steady: Steady::new(slo.clone()),
            warmup: WarmupState::default(),
            slo,
            arrived: 0,
            completed: 0,
            failed: 0,
            rejected: 0,
            retried: 0,
            rejected_by_reason: BTreeMap::new(),
            failed_by_reason: BTreeMap::new(),
            prompt_tokens: 0,
            cached_tokens: 0,
            output_tokens: 0,
            prefill_tokens: 0,
            recompute: Recompute::default(),
            preemptions: 0,
            last_finish: SimTime::ZERO,
            per_worker: vec![0; workers],
            per_worker_tokens: vec![WorkerTokens::default(); workers],
            per_worker_model_flops: vec![0.0; workers],
            sessions_started: 0,
            session_requests: 0,
            timed_out: 0,
            migrated: 0,
            sessions_reset: 0,
            turns_without_history: 0,
            loaded_tokens: 0,
            series: TimeSeries::new(MetricsSpec::default()),
            arrivals_end: SimTime::MAX,
            classes: Vec::new(),
            timelines: None,
            timelines_from: SimTime::ZERO,
        }
    }

    /// Keeps the [`Timeline`] (48 bytes) of every finished request that arrived from `from` on, for the
    /// recovery analysis.
    pub fn keep_timelines_from(&mut self, from: SimTime) {
        self.timelines.get_or_insert_with(Timelines::default);
        self.timelines_from = from;
    }

    /// From when timelines are kept; `None` if they are not.
    pub fn timelines_from(&self) -> Option<SimTime> {
        self.timelines.as_ref().map(|_| self.timelines_from)
    }

    /// The run as the recovery analysis reads it (no request timelines unless they were kept).
    pub fn recovery_view(&self) -> RunView<'_> {
        static NONE: Timelines = Timelines::new();
        RunView {
            requests: self.timelines.as_ref().unwrap_or(&NONE),
            faults: &self.series.faults,
            skipped: &self.series.skipped,
            spec: &self.series.spec,
            arrivals_end: self.arrivals_end,
        }
    }

    /// Counts requests per traffic class too: `(name, priority, SLO)` by class index.
    pub fn set_classes(&mut self, classes: Vec<(String, i32, Slo)>) {
        self.steady.classes = classes
            .iter()
            .map(|(_, _, slo)| super::classes::ClassSteady::new(slo.clone()))
            .collect();
        self.classes = classes
            .into_iter()
            .map(|(name, priority, slo)| super::classes::ClassStats::new(name, priority, slo))
            .collect();
    }

    /// Uses `spec` for the time series, recovery and warm-up, for a run whose arrivals stop at
    /// `arrivals_end` and whose first fault is scheduled at `first_fault`: the warm-up is detected
    /// before the earlier of the two, so that it never reaches past a fault.
    pub fn set_metrics(
        &mut self,
        spec: MetricsSpec,
        arrivals_end: SimTime,
        first_fault: Option<SimTime>,
    ) {
        let horizon = first_fault.map_or(arrivals_end, |f| f.min(arrivals_end));
        self.warmup = WarmupState::new(spec.warmup, horizon);
        self.series = TimeSeries::new(spec);
        self.arrivals_end = arrivals_end;
    }

    /// Detects the warm-up over `[0, horizon)` at most (before any request arrives): a no-fault twin
    /// detects over its faulted run's horizon, so that both look at the same span.
    pub fn limit_warmup_horizon(&mut self, horizon: SimTime) {
        let h = self.warmup.horizon().min(horizon);
        self.warmup = WarmupState::new(self.warmup.mode(), h);
    }

    /// Detects the warm-up (if `auto`) and completes the steady-state metrics; call once the run has
    /// ended (idempotent).
    pub fn finish_warmup(&mut self) -> WarmupSummary {
        self.warmup.finish(&mut self.steady)
    }

    /// A fault happened.
    pub fn on_fault(
        &mut self,
        at: SimTime,
        label: String,
        kind: &'static str,
        hit: Vec<crate::request::RequestId>,
    ) {
        self.series.faults.push(FaultMark {
            at,
            label,
            kind,
            hit,
        });
    }

    /// A planned fault that the run ended before.
    pub fn on_fault_skipped(&mut self, at: SimTime, label: String, kind: &'static str) {
        self.series.skipped.push(FaultMark {
            at,
            label,
            kind,
            hit: Vec::new(),
        });
    }

    /// `up` workers are up from `t` on.
    pub fn on_workers_up(&mut self, t: SimTime, up: u32) {
        self.series.on_workers_up(t, up);
    }

    /// Counts a request arriving at the gateway at `at`.
    pub fn on_arrival(&mut self, at: SimTime) {
        self.arrived += 1;
        if self.warmup.on_arrival(at) {
            self.steady.arrived += 1;
        }
    }

    /// Folds in a finished request.
    pub fn on_finished(&mut self, r: &RequestRecord) {
        if let Some(t) = &mut self.timelines
            && r.arrival >= self.timelines_from
        {
            t.push(Timeline::of(r));
        }
        self.last_finish = self.last_finish.max(r.finished);
        self.retried += u64::from(r.retries > 0);
        self.recompute.merge(&r.recompute);
        self.preemptions += u64::from(r.preemptions);
        self.prefill_tokens += r.prefill_tokens;
        self.timed_out += u64::from(r.timeouts > 0);
        self.migrated += u64::from(r.migrations > 0);
        self.sessions_reset += u64::from(r.session_reset);
        self.turns_without_history +=
            u64::from(r.turn.is_some_and(|t| t > 0) && r.history_tokens == 0);
        let good = r.outcome == Outcome::Completed && Obs::of(r).good(&self.slo);
        self.series.on_finished(r, good);
        if let Some(c) = self.classes.get_mut(usize::from(r.class)) {
            c.on_finished(r);
        }
        if let Some(o) = self.warmup.on_finished(Obs::of(r)) {
            self.steady.fold(&o);
        }
        if r.session.is_some() {
            self.session_requests += 1;
            self.sessions_started += u64::from(r.turn == Some(0));
        }
        match r.outcome {
            Outcome::Failed => {
                self.failed += 1;
                *self
                    .failed_by_reason
                    .entry(r.reason.unwrap_or("unspecified"))
                    .or_default() += 1;
            }
            Outcome::Rejected => {
                self.rejected += 1;
                *self
                    .rejected_by_reason
                    .entry(r.reason.unwrap_or("unspecified"))
                    .or_default() += 1;
            }
            Outcome::Completed => {
                self.completed += 1;
                self.prompt_tokens += u64::from(r.prompt_tokens);
                self.cached_tokens += u64::from(r.cached_tokens);
                self.loaded_tokens += u64::from(r.loaded_tokens);
                self.output_tokens += u64::from(r.output_tokens);
                if let Some(w) = r.worker {
                    self.per_worker[w] += 1;
                    let t = &mut self.per_worker_tokens[w];
                    t.prompt += u64::from(r.prompt_tokens);
                    t.cached += u64::from(r.cached_tokens);
                    t.output += u64::from(r.output_tokens);
                }
            }
        }
    }

    /// Requests that have finished in any outcome.
    pub fn finished(&self) -> u64 {
        self.completed + self.failed + self.rejected
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_quantiles_are_within_a_tenth_of_a_percent() {
        let mut l = Latency::default();
        for v in 1..=100_000u64 {
            l.record(v * 1000);
        }
        assert_eq!(l.mean(), 50_000.5 * 1000.0);
        let p95 = l.quantile(0.95);
        assert!((p95 / 95_000_000.0 - 1.0).abs() < 1e-3, "{p95}");
        assert_eq!(l.quantile(1.0), 100_000_000.0);
    }

    use proptest::prelude::*;

    proptest! {
        /// Whatever is recorded, every percentile lies between the smallest and largest observation
        /// (a histogram bucket's midpoint can lie outside them; it must be clamped).
        #[test]
        fn percentiles_stay_within_the_observed_range(
            values in prop::collection::vec(1u64..2_000_000_000_000, 1..200),
            q in 0.0f64..=1.0,
        ) {
            let mut l = Latency::default();
            for &v in &values {
                l.record(v);
            }
            let lo = *values.iter().min().unwrap() as f64;
            let hi = *values.iter().max().unwrap() as f64;
            for p in [q, 0.5, 0.9, 0.95, 0.99] {
                let x = l.quantile(p);
                prop_assert!(lo <= x && x <= hi, "q {p}: {x} outside [{lo}, {hi}]");
            }
            prop_assert_eq!(l.min() as f64, lo);
        }
    }

    #[test]
    fn prompt_buckets_start_at_their_lower_bounds() {
        // Buckets [0, 512), [512, 2048), [2048, 8192), [8192, 32768), [32768, ∞).
        for (tokens, bucket) in [
            (0, 0),
            (511, 0),
            (512, 1),
            (2047, 1),
            (2048, 2),
            (32767, 3),
            (32768, 4),
            (u32::MAX, 4),
        ] {
            assert_eq!(Breakdown::prompt_bucket(tokens), bucket, "{tokens}");
        }
    }

    #[test]
    fn a_single_observation_is_every_percentile() {
        // 1,000,001 ns falls in a bucket whose midpoint is above it: without clamping p50 > max.
        let mut l = Latency::default();
        l.record(1_000_001);
        for q in [0.0, 0.5, 0.99, 1.0] {
            assert_eq!(l.quantile(q), 1_000_001.0);
        }
    }
}
