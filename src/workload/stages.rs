//! Load in stages, each drained before the next, as the benchmark client kubernetes-sigs/inference-perf
//! drives a server (read at commit b6687e7, 2025-08-26, the one current when llm-d published the runs
//! `validation/routing/` reproduces; `inference_perf/loadgen/load_generator.py` and `load_timer.py`).
//!
//! For each stage of `rate` requests per second over `duration`:
//! - it sends `N = floor(rate × duration)` requests, scheduled from one second after the stage begins
//!   (the generator's lead-in, `start_time = perf_counter() + 1`);
//! - `constant` load: N exponential gaps of mean 1/rate, rescaled so that they sum to `duration`
//!   (`ConstantLoadTimer`), so the last send is exactly `duration` after the start;
//! - `poisson` load: for each second, a Poisson(rate) count of requests spread over that second the
//!   same way (`PoissonLoadTimer`), the first N of them;
//! - request `n` of the stage (from 0 at every stage) sends the question pool's `n`-th prompt
//!   (`shared_prefix` with `questions`: the datagen's `get_request(n)`, `prompts[n % len]`);
//! - the stage ends when its window is over and every request it sent has finished (the drain:
//!   `STAGE_END`, then every worker awaits its tasks); the next stage begins `interval` later (the
//!   `interval` option, 1 s by default).
//!
//! Requests are sent at their scheduled times: the client's pool of `num_workers ×
//! worker_max_concurrency` slots (host cores × 100 by default) is taken as never full. TTFT is timed
//! from the send, which is the arrival here.
//!
//! Invariants: arrivals never go back in time; no request of a stage is sent before every request of
//! the previous stage has finished; stage `k` sends exactly `floor(rate_k × duration_k)` requests unless
//! the run's window or request cap ends first.

use std::collections::VecDeque;

use rand_distr::{Distribution, Exp, Poisson};
use serde::{Deserialize, Serialize};

use super::Workload;
use super::synthetic::RequestSampler;
use crate::config::Positive;
use crate::metrics::record::RequestRecord;
use crate::metrics::stages::{StageLog, StageReport};
use crate::request::Request;
use crate::rng::SimRng;
use crate::time::{SimDuration, SimTime};

/// The generator's lead-in before a stage's first scheduled send.
const LEAD_IN: SimDuration = SimDuration::from_secs(1);

/// How a stage spaces its sends (inference-perf's `load.type`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum StageLoad {
    /// `N` exponential gaps rescaled to fill the stage (inference-perf's default).
    #[default]
    Constant,
    /// A Poisson count per second, each second's requests spread over it.
    Poisson,
}

/// One stage as written in a scenario: `{ rate = 10, duration = "20s" }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StageSpec {
    /// Requests per second.
    pub rate: Positive,
    /// How long the stage sends.
    pub duration: SimDuration,
}

impl StageSpec {
    /// Highest rate a stage may ask for: far above any benchmark client's, and low enough that a
    /// second's Poisson count stays a small allocation.
    pub const MAX_RATE: f64 = 1e6;
    /// Most requests in one stage (its send times are drawn when it begins).
    pub const MAX_REQUESTS: u64 = 10_000_000;

    /// Requests the stage sends: `floor(rate × duration)`, as inference-perf's `int(rate * duration)`.
    pub fn requests(&self) -> u64 {
        (self.rate.0 * self.duration.as_secs_f64()).floor() as u64
    }
}

/// The send times of one stage starting at `start` (its lead-in included), drawn from `rng`.
pub fn schedule(
    stage: &StageSpec,
    load: StageLoad,
    start: SimTime,
    rng: &mut SimRng,
) -> Vec<SimTime> {
    let n = stage.requests();
    let first = start + LEAD_IN;
    match load {
        StageLoad::Constant => spread(n, stage.rate.0, stage.duration.as_secs_f64(), first, rng),
        StageLoad::Poisson => {
            let per_second = Poisson::new(stage.rate.0).expect("a positive rate");
            let mut times = Vec::with_capacity(n as usize);
            let mut window = first;
            while (times.len() as u64) < n {
                let count = per_second.sample(rng) as u64;
                if count > 0 {
                    times.extend(spread(count, count as f64, 1.0, window, rng));
                }
                window += SimDuration::from_secs(1);
            }
            times.truncate(n as usize);
            times
        }
    }
}

/// `n` send times after `from`: exponential gaps of mean `1 / rate`, rescaled to sum to `seconds`.
fn spread(n: u64, rate: f64, seconds: f64, from: SimTime, rng: &mut SimRng) -> Vec<SimTime> {
    if n == 0 {
        return Vec::new();
    }
    let exp = Exp::new(rate).expect("a positive rate");
    let gaps: Vec<f64> = (0..n).map(|_| exp.sample(rng)).collect();
    let total: f64 = gaps.iter().sum();
    let mut at = 0.0;
    gaps.iter()
        .map(|g| {
            at += g * seconds / total;
            from + SimDuration::from_secs_f64(at.min(seconds))
        })
        .collect()
}

/// The staged generator.
pub struct Stages {
    rng: SimRng,
    sampler: RequestSampler,
    stages: Vec<StageSpec>,
    load: StageLoad,
    interval: SimDuration,
    /// No request is sent at or after this instant.
    end: SimTime,
    /// Requests that may still be sent (the run's cap).
    remaining: u64,
    next_id: u64,
    /// The stage now sending or draining.
    stage: usize,
    /// Its sends not yet handed out.
    pending: VecDeque<SimTime>,
    /// Requests of this stage handed out so far (the pool index of the next one).
    sent_in_stage: u64,
    /// Requests of this stage not yet finished.
    in_flight: u64,
    /// The stage's window ends here: it cannot end before, even if drained.
    window_end: SimTime,
    /// Stage of each request, by id.
    stage_of: Vec<u32>,
    log: StageLog,
}

impl Stages {
    /// `stages` (validated: at least one) spaced by `load`, `interval` apart after each drain, with
    /// requests drawn from `sampler`; nothing sent at or after `end`, at most `max_requests` in all.
    pub fn new(
        stages: Vec<StageSpec>,
        load: StageLoad,
        interval: SimDuration,
        sampler: RequestSampler,
        rng: SimRng,
        end: SimTime,
        max_requests: Option<u64>,
    ) -> Self {
        let log = StageLog::new(stages.iter().map(|s| (s.rate.0, s.duration)).collect());
        let mut s = Stages {
            rng,
            sampler,
            stages,
            load,
            interval,
            end,
            remaining: max_requests.unwrap_or(u64::MAX),
            next_id: 0,
            stage: 0,
            pending: VecDeque::new(),
            sent_in_stage: 0,
            in_flight: 0,
            window_end: SimTime::ZERO,
            stage_of: Vec::new(),
            log,
        };
        s.begin(SimTime::ZERO);
        s
    }

    /// Starts the current stage at `at`: its schedule. A stage that sends nothing (rate × duration
    /// under 1) lasts its window and hands over to the next.
    fn begin(&mut self, at: SimTime) {
        let mut at = at;
        loop {
            if at >= self.end {
                self.stages.truncate(self.stage);
                self.pending.clear();
                return;
            }
            let stage = &self.stages[self.stage];
            self.window_end = at + LEAD_IN + stage.duration;
            self.pending = schedule(stage, self.load, at, &mut self.rng).into();
            self.sent_in_stage = 0;
            self.in_flight = 0;
            self.log.begin(self.stage);
            if !self.pending.is_empty() || self.stage + 1 >= self.stages.len() {
                return;
            }
            self.stage += 1;
            at = self.window_end + self.interval;
        }
    }

    /// If the stage has sent everything and drained, the next one begins `interval` after `now` (or
    /// after its window, if that is later).
    fn maybe_advance(&mut self, now: SimTime) {
        if !self.pending.is_empty() || self.in_flight > 0 || self.stage + 1 >= self.stages.len() {
            return;
        }
        self.stage += 1;
        self.begin(now.max(self.window_end) + self.interval);
    }
}

impl Workload for Stages {
    /// The current stage's next send, if the run's window and cap allow; `None` while it drains (the
    /// engine asks again after every finished request).
    fn next_arrival(&mut self) -> Option<Request> {
        let at = *self.pending.front()?;
        if at >= self.end || self.remaining == 0 {
            self.pending.clear();
            self.stages.truncate(self.stage + 1);
            return None;
        }
        self.pending.pop_front();
        self.remaining -= 1;
        let id = self.next_id;
        self.next_id += 1;
        let r = self
            .sampler
            .sample_nth(&mut self.rng, id, self.sent_in_stage, at);
        self.sent_in_stage += 1;
        self.in_flight += 1;
        self.stage_of.push(self.stage as u32);
        self.log.sent(self.stage, at.as_secs_f64());
        Some(r)
    }

    fn on_finished(&mut self, record: &RequestRecord, now: SimTime) -> Option<Request> {
        let stage = self.stage_of[record.id as usize] as usize;
        self.log.finished(stage, record);
        debug_assert_eq!(stage, self.stage, "stages never overlap");
        self.in_flight -= 1;
        self.maybe_advance(now);
        None
    }

    fn resumes_after_finish(&self) -> bool {
        true
    }

    fn stage_report(&self) -> Option<StageReport> {
        Some(self.log.report())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The instant `s` seconds into the run.
    fn secs(s: u64) -> SimTime {
        SimTime::ZERO + SimDuration::from_secs(s)
    }
    use crate::config::PositiveInt;
    use crate::metrics::record::Outcome;
    use crate::workload::dist::LengthDist;
    use crate::workload::test_record;

    fn stage(rate: f64, secs: u64) -> StageSpec {
        StageSpec {
            rate: Positive(rate),
            duration: SimDuration::from_secs(secs),
        }
    }

    fn sampler() -> RequestSampler {
        let fixed = |t| LengthDist::Fixed {
            tokens: PositiveInt(t),
        };
        RequestSampler::new(&fixed(100), &fixed(10), None, &crate::rng::from_u64(1))
    }

    /// A constant stage sends floor(rate × duration) requests, the first after the 1 s lead-in, the
    /// last exactly `duration` after it, in order; a Poisson stage sends the same count, each second's
    /// last request on that second's end.
    #[test]
    fn a_stage_sends_its_count_inside_its_window() {
        let mut rng = crate::rng::from_u64(7);
        let start = secs(10);
        let t = schedule(&stage(2.5, 7), StageLoad::Constant, start, &mut rng);
        assert_eq!(t.len(), 17);
        assert!(t[0] > start + LEAD_IN);
        assert_eq!(*t.last().unwrap(), secs(18));
        assert!(t.windows(2).all(|w| w[0] <= w[1]));
        let p = schedule(&stage(40.0, 5), StageLoad::Poisson, start, &mut rng);
        assert_eq!(p.len(), 200);
        assert!(p.windows(2).all(|w| w[0] <= w[1]));
        assert!(p[0] > start + LEAD_IN);
        // About 40 a second: 200 requests take about 5 s.
        let span = p.last().unwrap().since(p[0]).as_secs_f64();
        assert!((3.5..6.5).contains(&span), "{span}");
        assert!(schedule(&stage(0.5, 1), StageLoad::Constant, start, &mut rng).is_empty());
    }

    /// Stage 2 sends nothing until stage 1's last request has finished and its window is over, then
    /// starts `interval` + the lead-in later; every request is accounted for in its stage.
    #[test]
    fn each_stage_drains_before_the_next() {
        let mut w = Stages::new(
            vec![stage(2.0, 2), stage(1.0, 3)],
            StageLoad::Constant,
            SimDuration::from_secs(1),
            sampler(),
            crate::rng::from_u64(3),
            secs(1000),
            None,
        );
        let first: Vec<Request> = std::iter::from_fn(|| w.next_arrival()).collect();
        assert_eq!(first.len(), 4);
        assert_eq!(first.last().unwrap().arrival, secs(3));
        // The first three finish; the stage is still draining.
        for r in &first[..3] {
            w.on_finished(&test_record(r, Outcome::Completed, secs(5)), secs(5));
        }
        assert!(w.next_arrival().is_none());
        // The last one finishes at 40 s: stage 2 begins at 41 s and sends from 42 s.
        let last = &first[3];
        w.on_finished(&test_record(last, Outcome::Completed, secs(40)), secs(40));
        let second: Vec<Request> = std::iter::from_fn(|| w.next_arrival()).collect();
        assert_eq!(second.len(), 3);
        assert!(second[0].arrival > secs(42));
        assert_eq!(second[2].arrival, secs(45));
        for r in &second {
            w.on_finished(&test_record(r, Outcome::Completed, secs(50)), secs(50));
        }
        let report = w.stage_report().unwrap();
        assert_eq!(report.stages.len(), 2);
        assert_eq!(report.stages[0].requests, 4);
        assert_eq!(report.stages[1].requests, 3);
        assert!(w.next_arrival().is_none());
    }

    /// The run's window cuts a stage short and no later stage starts.
    #[test]
    fn the_window_ends_the_stages() {
        let mut w = Stages::new(
            vec![stage(10.0, 10), stage(10.0, 10)],
            StageLoad::Constant,
            SimDuration::from_secs(1),
            sampler(),
            crate::rng::from_u64(3),
            secs(5),
            None,
        );
        let sent: Vec<Request> = std::iter::from_fn(|| w.next_arrival()).collect();
        assert!(!sent.is_empty() && sent.len() < 100);
        assert!(sent.iter().all(|r| r.arrival < secs(5)));
        for r in &sent {
            w.on_finished(&test_record(r, Outcome::Completed, secs(6)), secs(6));
        }
        assert!(w.next_arrival().is_none());
        assert_eq!(w.stage_report().unwrap().stages.len(), 1);
    }
}
