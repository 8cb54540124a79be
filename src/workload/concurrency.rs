//! Closed-loop traffic at a fixed concurrency: `clients` clients, each sending its next request when its
//! previous one finishes, as `vllm bench serve --max-concurrency C` drives a server.
//!
//! With the [`frontend`](super::frontend) path on (the default), the run follows the benchmark: one
//! warm-up request is sent alone and waited for; then the client sends the C first requests one after
//! another, `client_send` apart; every request passes the API server (one at a time) before the engine
//! sees it, and every token reaches the client `token` after the engine produced it. A client sends its
//! next request `client_send` after it has seen the last token of its previous one. The client-side
//! timings go to a [`BenchLog`] with `vllm bench serve`'s definitions. With the path off every client
//! sends its first request at t = 0 and its next one at the instant the previous one finished.
//!
//! Clients stop sending when the request cap is reached or the arrival window has ended; requests in
//! flight then run to completion. The warm-up is sent in addition to the cap. A client whose request is
//! rejected (it can never fit the worker) stops too: resending at the same instant would loop forever
//! without the clock moving; a rejected warm-up ends the benchmark, as `vllm bench serve` aborts when its
//! test request fails.
//!
//! Invariants: at most `clients` benchmark requests are in flight, none while the warm-up is; streamed
//! arrivals never go back in time (the API server admits in FIFO order).

use std::collections::VecDeque;

use super::Workload;
use super::frontend::{Frontend, FrontendSpec};
use super::synthetic::RequestSampler;
use crate::metrics::bench::{BenchLog, BenchReport};
use crate::metrics::record::{Outcome, RequestRecord};
use crate::request::Request;
use crate::rng::SimRng;
use crate::time::{SimDuration, SimTime};

/// Where the benchmark is.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    /// The warm-up request has not been sent.
    WarmupPending,
    /// The warm-up request (this id) is in flight.
    WarmupInFlight(u64),
    /// The clients' first requests may be sent, from this instant on.
    Dispatch(SimTime),
    /// Every client has sent its first request.
    Running,
}

/// The closed-loop generator.
pub struct ClosedLoop {
    rng: SimRng,
    sampler: RequestSampler,
    clients: u64,
    /// Requests that may still be sent (the cap).
    remaining: u64,
    /// No request is sent at or after this instant.
    end: SimTime,
    next_id: u64,
    frontend: Frontend,
    phase: Phase,
    /// The clients' first requests, admitted, waiting to be streamed.
    pending: VecDeque<Request>,
    /// When each request was sent, by id.
    sent: Vec<SimTime>,
    log: BenchLog,
}

impl ClosedLoop {
    /// `clients` clients drawing requests from `sampler` with `rng`, sending before `end` and at most
    /// `max_requests` requests in all (the warm-up aside), through `frontend`.
    pub fn new(
        clients: u32,
        sampler: RequestSampler,
        rng: SimRng,
        end: SimTime,
        max_requests: Option<u64>,
        frontend: FrontendSpec,
    ) -> Self {
        let frontend = Frontend::new(frontend);
        let phase = if frontend.spec().warmup {
            Phase::WarmupPending
        } else {
            Phase::Dispatch(SimTime::ZERO)
        };
        ClosedLoop {
            rng,
            sampler,
            clients: u64::from(clients),
            remaining: max_requests.unwrap_or(u64::MAX),
            end,
            next_id: 0,
            frontend,
            phase,
            pending: VecDeque::new(),
            sent: Vec::new(),
            log: BenchLog::default(),
        }
    }

    /// Draws a request sent at `sent` and passes it through the API server.
    fn draw(&mut self, sent: SimTime) -> Request {
        let id = self.next_id;
        self.next_id += 1;
        let mut r = self.sampler.sample(&mut self.rng, id, sent);
        r.arrival = self.frontend.admit(sent, r.prompt_tokens);
        self.sent.push(sent);
        r
    }

    /// A benchmark request sent at `sent`, if the cap and the window allow.
    fn send(&mut self, sent: SimTime) -> Option<Request> {
        if self.remaining == 0 || sent >= self.end {
            return None;
        }
        self.remaining -= 1;
        Some(self.draw(sent))
    }

    fn client_send(&self) -> SimDuration {
        self.frontend.spec().client_send
    }
}

impl Workload for ClosedLoop {
    /// The warm-up, then (once it has finished) the clients' first requests in the order they reach the
    /// engine. `None` while the warm-up is in flight: the engine asks again after it finishes.
    fn next_arrival(&mut self) -> Option<Request> {
        match self.phase {
            Phase::WarmupPending => {
                if self.end == SimTime::ZERO {
                    return None;
                }
                let r = self.draw(SimTime::ZERO);
                self.phase = Phase::WarmupInFlight(r.id);
                Some(r)
            }
            Phase::WarmupInFlight(_) => None,
            Phase::Dispatch(start) => {
                self.phase = Phase::Running;
                let gap = self.client_send();
                for i in 0..self.clients {
                    let sent = start + SimDuration(gap.0.saturating_mul(i));
                    match self.send(sent) {
                        Some(r) => self.pending.push_back(r),
                        None => break,
                    }
                }
                self.pending.pop_front()
            }
            Phase::Running => self.pending.pop_front(),
        }
    }

    /// The finishing request's client sends its next one once it has seen the last token.
    fn on_finished(&mut self, record: &RequestRecord, now: SimTime) -> Option<Request> {
        let sent = self.sent[record.id as usize];
        let completed = record.outcome == Outcome::Completed;
        let seen_end = if completed {
            self.frontend.delivered(record.finished)
        } else {
            now
        };
        let first = record.first_token.map(|t| self.frontend.delivered(t));
        if self.phase == Phase::WarmupInFlight(record.id) {
            if completed {
                let first = first.expect("a completed request has a first token");
                self.log.record_warmup(
                    sent.as_secs_f64(),
                    first.as_secs_f64(),
                    seen_end.as_secs_f64(),
                );
                self.phase = Phase::Dispatch(seen_end);
            } else {
                self.phase = Phase::Running; // no benchmark after a failed warm-up
            }
            return None;
        }
        if record.outcome == Outcome::Rejected {
            return None;
        }
        if let (true, Some(first)) = (completed, first) {
            self.log.record(
                sent.as_secs_f64(),
                first.as_secs_f64(),
                seen_end.as_secs_f64(),
                record.output_tokens,
            );
        }
        let next = seen_end + self.client_send();
        self.send(next)
    }

    fn resumes_after_finish(&self) -> bool {
        true
    }

    fn bench_report(&self) -> Option<BenchReport> {
        Some(self.log.report())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PositiveInt;
    use crate::rng::from_u64;
    use crate::time::SimDuration;
    use crate::workload::dist::LengthDist;

    fn sampler() -> RequestSampler {
        let fixed = |t| LengthDist::Fixed {
            tokens: PositiveInt(t),
        };
        RequestSampler::new(&fixed(100), &fixed(10), None, &crate::rng::from_u64(1))
    }

    fn off() -> FrontendSpec {
        FrontendSpec {
            enabled: false,
            ..FrontendSpec::default()
        }
    }

    fn finished(r: &Request, at: SimTime, outcome: Outcome) -> RequestRecord {
        RequestRecord {
            session: None,
            turn: None,
            first_token: Some(at),
            class: 0,
            ..crate::workload::test_record(r, outcome, at)
        }
    }

    #[test]
    fn every_client_starts_at_zero_and_each_finish_sends_the_next() {
        let mut w = ClosedLoop::new(3, sampler(), from_u64(1), SimTime::MAX, Some(5), off());
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
        let mut w = ClosedLoop::new(2, sampler(), from_u64(1), end, None, off());
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

    fn ms(v: f64) -> SimDuration {
        SimDuration::from_secs_f64(v * 1e-3)
    }

    #[test]
    fn the_benchmark_warms_up_then_dispatches_one_request_after_another() {
        let spec = FrontendSpec {
            client_send: ms(0.5),
            request: ms(1.0),
            prompt_token: SimDuration::ZERO,
            token: ms(0.6),
            ..FrontendSpec::default()
        };
        let mut w = ClosedLoop::new(3, sampler(), from_u64(1), SimTime::MAX, Some(4), spec);
        let warm = w.next_arrival().unwrap();
        assert_eq!(warm.arrival, SimTime::ZERO + ms(1.0));
        // Nothing else until the warm-up has finished.
        assert!(w.next_arrival().is_none());
        let t = SimTime::ZERO + ms(50.0);
        assert!(
            w.on_finished(&finished(&warm, t, Outcome::Completed), t)
                .is_none()
        );
        // The client saw the end at 50.6 ms; it sends at 50.6, 51.1, 51.6 ms and the API server admits each
        // 1 ms after the later of its send and the previous admission: 51.6, 52.6, 53.6 ms.
        let first: Vec<Request> = std::iter::from_fn(|| w.next_arrival()).collect();
        let arrivals: Vec<SimTime> = first.iter().map(|r| r.arrival).collect();
        let want: Vec<SimTime> = [51.6, 52.6, 53.6]
            .iter()
            .map(|&m| SimTime::ZERO + ms(m))
            .collect();
        assert_eq!(arrivals, want);
        // The second finishes at 100 ms: its client sees it at 100.6 and sends at 101.1, admitted at 102.1.
        let t = SimTime::ZERO + ms(100.0);
        let next = w
            .on_finished(&finished(&first[1], t, Outcome::Completed), t)
            .unwrap();
        assert_eq!(next.arrival, SimTime::ZERO + ms(102.1));
        let r = w.bench_report().unwrap();
        assert_eq!(r.requests, 1);
        // Sent at 51.1 ms, first (= last) token seen at 100.6 ms.
        assert!((r.ttft_ms.mean - 49.5).abs() < 1e-6, "{r:?}");
        let warm = r.warmup.unwrap();
        assert!((warm.ttft_ms - 50.6).abs() < 1e-6);
    }

    #[test]
    fn a_failed_warmup_ends_the_benchmark() {
        let mut w = ClosedLoop::new(
            3,
            sampler(),
            from_u64(1),
            SimTime::MAX,
            None,
            FrontendSpec::default(),
        );
        let warm = w.next_arrival().unwrap();
        let t = SimTime::ZERO + ms(1.0);
        assert!(
            w.on_finished(&finished(&warm, t, Outcome::Rejected), t)
                .is_none()
        );
        assert!(w.next_arrival().is_none());
    }
}
