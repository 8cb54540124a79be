//! Closed-loop traffic at a fixed concurrency: `clients` clients, each sending its next request when its
//! previous one finishes, as `vllm bench serve --max-concurrency C` drives a server.
//!
//! Every client sends its first request at t = 0. A client's next request arrives at the instant its previous
//! one finished (no think time), so at most `clients` requests are ever in flight. Clients stop sending when
//! the request cap is reached or the arrival window has ended; requests in flight then run to completion. A
//! client whose request is rejected (it can never fit the worker) stops too: resending at the same instant
//! would loop forever without the clock moving.

use super::Workload;
use super::synthetic::RequestSampler;
use crate::metrics::record::{Outcome, RequestRecord};
use crate::request::Request;
use crate::rng::SimRng;
use crate::time::SimTime;

/// The closed-loop generator.
pub struct ClosedLoop {
    rng: SimRng,
    sampler: RequestSampler,
    /// Clients whose first request has not been sent yet.
    unstarted: u64,
    /// Requests that may still be sent (the cap).
    remaining: u64,
    /// No request is sent at or after this instant.
    end: SimTime,
    next_id: u64,
}

impl ClosedLoop {
    /// `clients` clients drawing requests from `sampler` with `rng`, sending before `end` and at most
    /// `max_requests` requests in all.
    pub fn new(
        clients: u32,
        sampler: RequestSampler,
        rng: SimRng,
        end: SimTime,
        max_requests: Option<u64>,
    ) -> Self {
        ClosedLoop {
            rng,
            sampler,
            unstarted: u64::from(clients),
            remaining: max_requests.unwrap_or(u64::MAX),
            end,
            next_id: 0,
        }
    }

    fn send(&mut self, at: SimTime) -> Option<Request> {
        if self.remaining == 0 || at >= self.end {
            return None;
        }
        self.remaining -= 1;
        let id = self.next_id;
        self.next_id += 1;
        Some(self.sampler.sample(&mut self.rng, id, at))
    }
}

impl Workload for ClosedLoop {
    /// The clients' first requests, all at t = 0.
    fn next_arrival(&mut self) -> Option<Request> {
        if self.unstarted == 0 {
            return None;
        }
        self.unstarted -= 1;
        self.send(SimTime::ZERO)
    }

    /// The finishing request's client sends its next one now.
    fn on_finished(&mut self, record: &RequestRecord, now: SimTime) -> Option<Request> {
        if record.outcome == Outcome::Rejected {
            return None;
        }
        self.send(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PositiveInt;
    use crate::metrics::record::Recompute;
    use crate::rng::from_u64;
    use crate::time::SimDuration;
    use crate::workload::dist::LengthDist;

    fn sampler() -> RequestSampler {
        let fixed = |t| LengthDist::Fixed {
            tokens: PositiveInt(t),
        };
        RequestSampler::new(&fixed(100), &fixed(10), None)
    }

    fn finished(r: &Request, at: SimTime, outcome: Outcome) -> RequestRecord {
        RequestRecord {
            id: r.id,
            session: None,
            turn: None,
            worker: Some(0),
            arrival: r.arrival,
            first_scheduled: None,
            first_token: None,
            finished: at,
            prompt_tokens: r.prompt_tokens,
            output_tokens: r.output_tokens,
            cached_tokens: 0,
            prefill_tokens: 0,
            recompute: Recompute::default(),
            preemptions: 0,
            retries: 0,
            migrations: 0,
            timeouts: 0,
            loaded_tokens: 0,
            session_reset: false,
            outcome,
            reason: None,
        }
    }

    #[test]
    fn every_client_starts_at_zero_and_each_finish_sends_the_next() {
        let mut w = ClosedLoop::new(3, sampler(), from_u64(1), SimTime::MAX, Some(5));
        let first: Vec<Request> = std::iter::from_fn(|| w.next_arrival()).collect();
        assert_eq!(first.len(), 3);
        assert!(first.iter().all(|r| r.arrival == SimTime::ZERO));
        let t = SimTime::ZERO + SimDuration::from_millis(40);
        let next = w.on_finished(&finished(&first[1], t, Outcome::Completed), t);
        assert_eq!(next.as_ref().map(|r| (r.id, r.arrival)), Some((3, t)));
        // Cap of 5: one more, then none.
        assert!(
            w.on_finished(&finished(&first[0], t, Outcome::Completed), t)
                .is_some()
        );
        assert!(
            w.on_finished(&finished(&first[2], t, Outcome::Completed), t)
                .is_none()
        );
    }

    #[test]
    fn clients_stop_at_the_end_of_the_window_and_after_a_rejection() {
        let end = SimTime::ZERO + SimDuration::from_secs(1);
        let mut w = ClosedLoop::new(2, sampler(), from_u64(1), end, None);
        let a = w.next_arrival().unwrap();
        let b = w.next_arrival().unwrap();
        assert!(w.next_arrival().is_none());
        assert!(
            w.on_finished(&finished(&a, end, Outcome::Completed), end)
                .is_none()
        );
        let t = SimTime::ZERO + SimDuration::from_millis(5);
        assert!(
            w.on_finished(&finished(&b, t, Outcome::Rejected), t)
                .is_none()
        );
    }
}
