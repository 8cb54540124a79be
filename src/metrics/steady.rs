//! Steady-state metrics: the latencies, goodput, throughput and prefix-cache figures of the requests
//! that arrived after the warm-up ([`super::warmup`]).
//!
//! Invariant: a request is folded at most once, and only if it arrived at or after the warm-up end;
//! every sum is of integers and every distribution a histogram, so the order in which requests are
//! folded (as they finish, or at the end for those that waited for the warm-up to be detected) does
//! not change a single output byte.

use super::classes::ClassSteady;
use super::collector::{Breakdown, Latency};
use super::record::{Outcome, RequestRecord};
use crate::metrics::Slo;
use crate::time::SimTime;

/// What the steady-state metrics need of a finished request, and no more: 56 bytes, where a
/// [`RequestRecord`] is several times that.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Obs {
    pub arrival: SimTime,
    /// First step, `SimTime::MAX` if never scheduled.
    first_scheduled: SimTime,
    /// First token of a completed request, `SimTime::MAX` otherwise.
    first_token: SimTime,
    pub finished: SimTime,
    pub prompt_tokens: u32,
    pub cached_tokens: u32,
    pub loaded_tokens: u32,
    pub output_tokens: u32,
    /// Conversation turn, `u32::MAX` outside a conversation.
    turn: u32,
    pub class: u16,
}

impl Obs {
    /// The observation of `r`.
    pub fn of(r: &RequestRecord) -> Self {
        let completed = r.outcome == Outcome::Completed;
        Obs {
            arrival: r.arrival,
            first_scheduled: r.first_scheduled.unwrap_or(SimTime::MAX),
            first_token: if completed {
                r.first_token
                    .expect("a completed request has a first token")
            } else {
                SimTime::MAX
            },
            finished: r.finished,
            prompt_tokens: r.prompt_tokens,
            cached_tokens: r.cached_tokens,
            loaded_tokens: r.loaded_tokens,
            output_tokens: r.output_tokens,
            turn: r.turn.unwrap_or(u32::MAX),
            class: r.class,
        }
    }

    /// First token, for a completed request only.
    pub fn first_token(&self) -> Option<SimTime> {
        (self.first_token != SimTime::MAX).then_some(self.first_token)
    }

    /// First step, if it was ever scheduled.
    pub fn first_scheduled(&self) -> Option<SimTime> {
        (self.first_scheduled != SimTime::MAX).then_some(self.first_scheduled)
    }

    /// Conversation turn.
    pub fn turn(&self) -> Option<u32> {
        (self.turn != u32::MAX).then_some(self.turn)
    }

    /// Time per output token after the first, ns (completed requests of 2 tokens or more).
    pub fn tpot(&self) -> Option<u64> {
        let first = self.first_token()?;
        (self.output_tokens > 1)
            .then(|| self.finished.since(first).0 / u64::from(self.output_tokens - 1))
    }

    /// Whether a completed request meets every objective of `slo` that is set (never for one that
    /// did not complete).
    pub fn good(&self, slo: &Slo) -> bool {
        let Some(first) = self.first_token() else {
            return false;
        };
        let ttft = first.since(self.arrival);
        let tpot = self.tpot();
        slo.ttft.is_none_or(|s| ttft <= s) && slo.tpot.is_none_or(|s| tpot.is_none_or(|t| t <= s.0))
    }
}

/// Running totals over the steady-state requests.
#[derive(Debug, Clone)]
pub struct Steady {
    pub slo: Slo,
    /// Requests that arrived at or after the warm-up end (counted on arrival, so a run stopped early
    /// counts those still in flight).
    pub arrived: u64,
    /// Of those, the requests that finished and were folded, and those that completed.
    pub finished: u64,
    pub completed: u64,
    pub ttft: Latency,
    pub tpot: Latency,
    pub e2e: Latency,
    pub queue: Latency,
    /// Completed requests meeting the SLO.
    pub good: u64,
    /// Prompt tokens of completed requests, of those served from the prefix cache and loaded from a
    /// KV tier, and output tokens.
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub loaded_tokens: u64,
    pub output_tokens: u64,
    /// Where a completed request's time went, and its TTFT by conversation turn and prompt length.
    pub breakdown: Breakdown,
    /// Per traffic class, by class index (empty without a mix).
    pub classes: Vec<ClassSteady>,
}

impl Steady {
    /// Nothing folded yet; goodput judged against `slo`.
    pub fn new(slo: Slo) -> Self {
        Steady {
            slo,
            arrived: 0,
            finished: 0,
            completed: 0,
            ttft: Latency::default(),
            tpot: Latency::default(),
            e2e: Latency::default(),
            queue: Latency::default(),
            good: 0,
            prompt_tokens: 0,
            cached_tokens: 0,
            loaded_tokens: 0,
            output_tokens: 0,
            breakdown: Breakdown::default(),
            classes: Vec::new(),
        }
    }

    /// Folds in a finished steady-state request.
    pub fn fold(&mut self, o: &Obs) {
        self.finished += 1;
        if let Some(c) = self.classes.get_mut(usize::from(o.class)) {
            c.fold(o);
        }
        let Some(first) = o.first_token() else {
            return;
        };
        self.completed += 1;
        self.ttft.record(first.since(o.arrival).0);
        self.e2e.record(o.finished.since(o.arrival).0);
        if let Some(s) = o.first_scheduled() {
            self.queue.record(s.since(o.arrival).0);
        }
        self.breakdown.on_completed(o, first);
        if let Some(t) = o.tpot() {
            self.tpot.record(t);
        }
        self.good += u64::from(o.good(&self.slo));
        self.prompt_tokens += u64::from(o.prompt_tokens);
        self.cached_tokens += u64::from(o.cached_tokens);
        self.loaded_tokens += u64::from(o.loaded_tokens);
        self.output_tokens += u64::from(o.output_tokens);
    }
}

/// The steady span of a run that ended at `end_s` seconds with the warm-up ending at `warmup_s`
/// (throughput's denominator), s; 0 for a warm-up reaching the end.
pub fn span_s(end_s: f64, warmup_s: f64) -> f64 {
    (end_s - warmup_s).max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::tests::{completed, ms};
    use crate::time::SimDuration;

    #[test]
    fn an_observation_is_56_bytes() {
        assert_eq!(std::mem::size_of::<Obs>(), 56);
    }

    #[test]
    fn folding_order_does_not_change_the_totals() {
        let records: Vec<RequestRecord> = (0..50)
            .map(|i| {
                completed(
                    i,
                    i * 10,
                    i * 10 + 7 + i % 13,
                    i * 10 + 40 + i % 7,
                    3 + i as u32 % 5,
                )
            })
            .collect();
        let slo = Slo {
            ttft: Some(SimDuration::from_millis(15)),
            tpot: None,
            window: None,
        };
        let (mut a, mut b) = (Steady::new(slo.clone()), Steady::new(slo));
        records.iter().for_each(|r| a.fold(&Obs::of(r)));
        records.iter().rev().for_each(|r| b.fold(&Obs::of(r)));
        assert_eq!((a.completed, a.good), (b.completed, b.good));
        assert_eq!(a.ttft.mean(), b.ttft.mean());
        for q in [0.5, 0.9, 0.99] {
            assert_eq!(a.ttft.quantile(q), b.ttft.quantile(q));
            assert_eq!(a.tpot.quantile(q), b.tpot.quantile(q));
        }
        assert_eq!(a.e2e.max(), b.e2e.max());
        assert_eq!(a.ttft.min(), ms(7).0);
    }
}
