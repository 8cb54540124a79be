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
//! With a request rate ([`ClientRules::request_rate`], `--request-rate R`), the benchmark's requests are
//! created at Poisson times from its start, and request k is sent at the later of its creation and the
//! instant a client is free for it (requests go to free clients in creation order, as tasks waiting on
//! `vllm bench serve`'s semaphore do). The warm-up sends the dataset's first request, and the benchmark
//! starts again from the first, as `vllm bench serve`'s test prompt is `input_requests[0]`.
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
use super::dist::ArrivalProcess;
use super::frontend::{Frontend, FrontendSpec};
use super::synthetic::RequestSampler;
use crate::metrics::bench::{BenchDefinitions, BenchLog, BenchReport, TransientPhases};
use crate::metrics::record::{Outcome, RequestRecord};
use crate::request::Request;
use crate::rng::SimRng;
use crate::time::{SimDuration, SimTime};

/// How the client runs its loop besides the frontend's costs: a harness's rules
/// ([`super::harness::HarnessRun`]); `vllm bench serve`'s by default.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClientRules {
    /// Warm-up requests sent first, at most `clients` at a time; the benchmark starts once every one
    /// has finished, and none is counted.
    pub warmup_requests: u32,
    /// Each client sends its own share of the budget (⌊N/C⌋, one more for the first N mod C clients),
    /// as GenAI-Perf's sender threads do, instead of the next request of a shared count.
    pub per_client_quota: bool,
    pub definitions: BenchDefinitions,
    /// `--request-rate`: the benchmark's requests are created at Poisson times of this rate per second
    /// from its start, and each is sent when it exists and a client is free (vLLM's `get_request`
    /// feeding an `asyncio.Semaphore(max_concurrency)`); `None`: all exist at once (`inf`).
    pub request_rate: Option<f64>,
    /// GuideLLM's `warmup` and `cooldown` values, if given ([`TransientPhases::of`]): the report counts
    /// only the requests that overlap its measured window.
    pub transient: (Option<f64>, Option<f64>),
    /// GuideLLM's `--max-seconds`: from the benchmark's start, no request is sent at or after this many
    /// seconds, and one whose last chunk the client has not seen by then is cancelled (not counted).
    pub max_seconds: Option<f64>,
}

impl ClientRules {
    /// `vllm bench serve`'s: one warm-up request when `warmup`, a shared count, its metrics.
    pub fn vllm_bench(warmup: bool) -> Self {
        ClientRules {
            warmup_requests: u32::from(warmup),
            per_client_quota: false,
            definitions: BenchDefinitions::VllmBench,
            request_rate: None,
            transient: (None, None),
            max_seconds: None,
        }
    }
}

/// Where the benchmark is.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    /// Warm-up requests: `to_send` not yet sent, `in_flight` sent and not finished.
    Warmup { to_send: u64, in_flight: u64 },
    /// The clients' first requests may be sent, from this instant on.
    Dispatch(SimTime),
    /// Every client has sent its first request (or a failed warm-up ended the benchmark).
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
    /// Warm-up requests in all; they take the ids below this.
    warmups: u64,
    /// Each client's own share still to send, with [`ClientRules::per_client_quota`].
    quota: Option<Vec<u64>>,
    /// The clients' first requests, admitted, waiting to be streamed.
    pending: VecDeque<Request>,
    /// When each request was sent and by which client, by id.
    sent: Vec<(SimTime, u32)>,
    log: BenchLog,
    /// With a request rate: the gaps between creations, and when the next benchmark request to be
    /// sent was created (the benchmark's start until its first is sent).
    creation: Option<(ArrivalProcess, SimTime)>,
    /// GuideLLM's `--max-seconds`, and (once the benchmark has started) the instant it runs out.
    max_seconds: Option<SimDuration>,
    deadline: Option<SimTime>,
}

impl ClosedLoop {
    /// `clients` clients drawing requests from `sampler` with `rng`, sending before `end` and at most
    /// `max_requests` requests in all (the warm-up aside), through `frontend`, by `rules`.
    pub fn new(
        clients: u32,
        sampler: RequestSampler,
        rng: SimRng,
        end: SimTime,
        max_requests: Option<u64>,
        frontend: FrontendSpec,
        rules: ClientRules,
    ) -> Self {
        let frontend = Frontend::new(frontend);
        let warmups = if frontend.spec().enabled {
            u64::from(rules.warmup_requests)
        } else {
            0
        };
        let phase = if warmups > 0 {
            Phase::Warmup {
                to_send: warmups,
                in_flight: 0,
            }
        } else {
            Phase::Dispatch(SimTime::ZERO)
        };
        let remaining = max_requests.unwrap_or(u64::MAX);
        let c = u64::from(clients.max(1));
        let quota = rules.per_client_quota.then(|| {
            (0..c)
                .map(|i| remaining / c + u64::from(i < remaining % c))
                .collect()
        });
        ClosedLoop {
            rng,
            sampler,
            clients: u64::from(clients),
            remaining,
            end,
            next_id: 0,
            frontend,
            phase,
            warmups,
            quota,
            pending: VecDeque::new(),
            sent: Vec::new(),
            log: BenchLog::new(rules.definitions).with_phases(TransientPhases::of(
                rules.transient.0,
                rules.transient.1,
                remaining,
                rules.max_seconds,
            )),
            creation: rules
                .request_rate
                .map(|r| (ArrivalProcess::poisson(r), SimTime::ZERO)),
            max_seconds: rules.max_seconds.map(SimDuration::from_secs_f64),
            deadline: None,
        }
    }

    /// Draws a request sent at `sent` by `client` and passes it through the API server.
    fn draw(&mut self, sent: SimTime, client: u32) -> Request {
        let id = self.next_id;
        self.next_id += 1;
        // The warm-up sends the dataset's first prompts, and the benchmark starts from the first again
        // (`vllm bench serve`'s test prompt is `input_requests[0]`).
        let nth = id.checked_sub(self.warmups).unwrap_or(id);
        let mut r = self.sampler.sample_nth(&mut self.rng, id, nth, sent);
        r.arrival = self.frontend.admit(sent, r.prompt_tokens);
        self.sent.push((sent, client));
        r
    }

    /// A benchmark request sent at `sent` by `client`, if the cap, its share and the window allow.
    fn send(&mut self, sent: SimTime, client: u32) -> Option<Request> {
        if self.remaining == 0 || sent >= self.end || self.deadline.is_some_and(|d| sent >= d) {
            return None;
        }
        // With a request rate, the next request exists only from its creation on; one created after
        // the window is never sent (and not counted).
        if let Some((_, created)) = &self.creation
            && *created >= self.end
        {
            return None;
        }
        if let Some(q) = self.quota.as_mut() {
            let left = &mut q[client as usize];
            if *left == 0 {
                return None;
            }
            *left -= 1;
        }
        self.remaining -= 1;
        let sent = match &mut self.creation {
            Some((gaps, next)) => {
                let created = *next;
                *next = created + gaps.next_gap(&mut self.rng);
                sent.max(created)
            }
            None => sent,
        };
        Some(self.draw(sent, client))
    }

    fn client_send(&self) -> SimDuration {
        self.frontend.spec().client_send
    }

    /// The instant of the `i`-th of a burst of sends from `start`, `client_send` apart.
    fn staggered(&self, start: SimTime, i: u64) -> SimTime {
        start + SimDuration(self.client_send().0.saturating_mul(i))
    }
}

impl Workload for ClosedLoop {
    /// The warm-up, then (once it has finished) the clients' first requests in the order they reach the
    /// engine. `None` while warm-up requests are in flight: the engine asks again after each finishes.
    fn next_arrival(&mut self) -> Option<Request> {
        match self.phase {
            Phase::Warmup { to_send, in_flight } => {
                if in_flight == 0 && to_send == self.warmups {
                    if self.end == SimTime::ZERO {
                        return None;
                    }
                    let burst = to_send.min(self.clients.max(1));
                    for i in 0..burst {
                        let sent = self.staggered(SimTime::ZERO, i);
                        let r = self.draw(sent, i as u32);
                        self.pending.push_back(r);
                    }
                    self.phase = Phase::Warmup {
                        to_send: to_send - burst,
                        in_flight: burst,
                    };
                }
                self.pending.pop_front()
            }
            Phase::Dispatch(start) => {
                self.phase = Phase::Running;
                self.log.set_origin(start.as_secs_f64());
                self.deadline = self.max_seconds.map(|t| start + t);
                // The first request is created as the benchmark starts.
                if let Some((_, next)) = &mut self.creation {
                    *next = start;
                }
                for i in 0..self.clients {
                    let sent = self.staggered(start, i);
                    if let Some(r) = self.send(sent, i as u32) {
                        self.pending.push_back(r);
                    }
                }
                self.pending.pop_front()
            }
            Phase::Running => self.pending.pop_front(),
        }
    }

    /// The finishing request's client sends its next one once it has seen the last token.
    fn on_finished(&mut self, record: &RequestRecord, now: SimTime) -> Option<Request> {
        let (sent, client) = self.sent[record.id as usize];
        let completed = record.outcome == Outcome::Completed;
        let seen_end = if completed {
            self.frontend.delivered(record.finished)
        } else {
            now
        };
        let first = record.first_token.map(|t| self.frontend.delivered(t));
        if record.id < self.warmups {
            let Phase::Warmup {
                mut to_send,
                mut in_flight,
            } = self.phase
            else {
                return None; // a warm-up finishing after a failed one ended the benchmark
            };
            in_flight -= 1;
            if !completed {
                // No benchmark after a failed warm-up, as `vllm bench serve` aborts; the others in
                // flight finish unrecorded.
                self.phase = Phase::Running;
                return None;
            }
            let first = first.expect("a completed request has a first token");
            self.log.record_warmup(
                sent.as_secs_f64(),
                first.as_secs_f64(),
                seen_end.as_secs_f64(),
            );
            let next = (to_send > 0).then(|| {
                to_send -= 1;
                in_flight += 1;
                self.draw(seen_end + self.client_send(), client)
            });
            self.phase = if to_send == 0 && in_flight == 0 {
                Phase::Dispatch(seen_end)
            } else {
                Phase::Warmup { to_send, in_flight }
            };
            return next;
        }
        if record.outcome == Outcome::Rejected {
            return None;
        }
        if self.deadline.is_some_and(|d| seen_end > d) {
            // Still streaming when `--max-seconds` ran out: GuideLLM cancels it, and sends no more.
            self.log.record_cancelled();
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
        self.send(next, client)
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
        let mut w = ClosedLoop::new(
            3,
            sampler(),
            from_u64(1),
            SimTime::MAX,
            Some(5),
            off(),
            ClientRules::vllm_bench(false),
        );
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
        let mut w = ClosedLoop::new(
            2,
            sampler(),
            from_u64(1),
            end,
            None,
            off(),
            ClientRules::vllm_bench(false),
        );
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
        let mut w = ClosedLoop::new(
            3,
            sampler(),
            from_u64(1),
            SimTime::MAX,
            Some(4),
            spec,
            ClientRules::vllm_bench(true),
        );
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

    /// GuideLLM's `--max-seconds` 1: two streams, no warm-up, the engine alone. The benchmark starts
    /// at 0 s; a request finishing at 0.6 s is counted and its stream sends again; one whose last
    /// token comes at 1.2 s was still streaming at 1 s, so it is cancelled and nothing more is sent;
    /// a stream that finishes at 0.9 s sends its next request, which finishes past 1 s: cancelled too.
    #[test]
    fn max_seconds_stops_sending_and_cancels_what_still_streams() {
        let rules = ClientRules {
            definitions: BenchDefinitions::Guidellm,
            max_seconds: Some(1.0),
            ..ClientRules::vllm_bench(false)
        };
        let mut w = ClosedLoop::new(2, sampler(), from_u64(1), SimTime::MAX, None, off(), rules);
        let first: Vec<Request> = std::iter::from_fn(|| w.next_arrival()).collect();
        assert_eq!(first.len(), 2);
        let at = |s: f64| SimTime::ZERO + SimDuration::from_secs_f64(s);
        let again = w
            .on_finished(&finished(&first[0], at(0.6), Outcome::Completed), at(0.6))
            .expect("sent before the deadline");
        assert!(
            w.on_finished(&finished(&first[1], at(1.2), Outcome::Completed), at(1.2))
                .is_none()
        );
        assert!(
            w.on_finished(&finished(&again, at(1.5), Outcome::Completed), at(1.5))
                .is_none()
        );
        let r = w.bench_report().unwrap();
        assert_eq!((r.requests, r.cancelled), (1, 2), "{r:?}");
        // A request is never sent at or after the deadline, even by a stream that is free.
        let mut w = ClosedLoop::new(1, sampler(), from_u64(1), SimTime::MAX, None, off(), rules);
        let only = w.next_arrival().unwrap();
        assert!(
            w.on_finished(&finished(&only, at(1.0), Outcome::Completed), at(1.0))
                .is_none()
        );
        assert_eq!(w.bench_report().unwrap().requests, 1);
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
            ClientRules::vllm_bench(true),
        );
        let warm = w.next_arrival().unwrap();
        let t = SimTime::ZERO + ms(1.0);
        assert!(
            w.on_finished(&finished(&warm, t, Outcome::Rejected), t)
                .is_none()
        );
        assert!(w.next_arrival().is_none());
    }

    /// AIPerf's and GenAI-Perf's `--warmup-request-count W`: W warm-up requests at most C at a time,
    /// the next one sent as one finishes; the benchmark starts once all have finished, and none counts.
    #[test]
    fn several_warmup_requests_run_at_the_concurrency_then_the_benchmark_starts() {
        let spec = FrontendSpec {
            client_send: SimDuration::ZERO,
            request: SimDuration::ZERO,
            prompt_token: SimDuration::ZERO,
            token: SimDuration::ZERO,
            ..FrontendSpec::default()
        };
        let rules = ClientRules {
            warmup_requests: 3,
            ..ClientRules::vllm_bench(true)
        };
        let mut w = ClosedLoop::new(
            2,
            sampler(),
            from_u64(1),
            SimTime::MAX,
            Some(4),
            spec,
            rules,
        );
        let first: Vec<Request> = std::iter::from_fn(|| w.next_arrival()).collect();
        assert_eq!(first.iter().map(|r| r.id).collect::<Vec<_>>(), [0, 1]);
        let t = SimTime::ZERO + ms(10.0);
        let third = w
            .on_finished(&finished(&first[0], t, Outcome::Completed), t)
            .expect("the third warm-up request");
        assert_eq!((third.id, third.arrival), (2, t));
        assert!(w.next_arrival().is_none());
        let t = SimTime::ZERO + ms(20.0);
        assert!(
            w.on_finished(&finished(&first[1], t, Outcome::Completed), t)
                .is_none()
        );
        assert!(w.next_arrival().is_none(), "the third is still in flight");
        let t = SimTime::ZERO + ms(30.0);
        assert!(
            w.on_finished(&finished(&third, t, Outcome::Completed), t)
                .is_none()
        );
        let bench: Vec<Request> = std::iter::from_fn(|| w.next_arrival()).collect();
        assert_eq!(
            bench.iter().map(|r| (r.id, r.arrival)).collect::<Vec<_>>(),
            [(3, t), (4, t)]
        );
        let r = w.bench_report().unwrap();
        assert_eq!((r.requests, r.warmup.unwrap().requests), (0, 3));
    }

    /// GenAI-Perf deals the budget out to its sender threads: with 5 requests and 2 clients, the first
    /// client sends 3 and the second 2, whichever finishes first.
    #[test]
    fn per_client_quotas_stop_each_client_at_its_share() {
        let rules = ClientRules {
            per_client_quota: true,
            ..ClientRules::vllm_bench(false)
        };
        let mut w = ClosedLoop::new(
            2,
            sampler(),
            from_u64(1),
            SimTime::MAX,
            Some(5),
            off(),
            rules,
        );
        let first: Vec<Request> = std::iter::from_fn(|| w.next_arrival()).collect();
        assert_eq!(first.len(), 2);
        let mut last = first[1].clone();
        // The second client finishes first, twice: it sends its second request, then stops at its share.
        for i in 1..=2 {
            let t = SimTime::ZERO + ms(f64::from(i));
            match w.on_finished(&finished(&last, t, Outcome::Completed), t) {
                Some(r) => last = r,
                None => assert_eq!(i, 2, "the second client's share is two"),
            }
        }
        // The first client still has its three.
        let mut last = first[0].clone();
        let mut sent = 1;
        for i in 3..=6 {
            let t = SimTime::ZERO + ms(f64::from(i));
            if let Some(r) = w.on_finished(&finished(&last, t, Outcome::Completed), t) {
                last = r;
                sent += 1;
            }
        }
        assert_eq!(sent, 3);
    }

    /// `--request-rate R --max-concurrency C`: the benchmark's requests are created at Poisson times
    /// from its start and each is sent at the later of its creation and a client freeing; the budget
    /// and the clients bound it as before.
    #[test]
    fn with_a_request_rate_each_request_waits_for_its_creation_and_a_free_client() {
        let rules = ClientRules {
            request_rate: Some(10.0),
            ..ClientRules::vllm_bench(false)
        };
        let mut w = ClosedLoop::new(
            2,
            sampler(),
            from_u64(1),
            SimTime::MAX,
            Some(4),
            off(),
            rules,
        );
        let first: Vec<Request> = std::iter::from_fn(|| w.next_arrival()).collect();
        assert_eq!(first.len(), 2);
        // The first exists at the start; the second a Poisson gap later.
        assert_eq!(first[0].arrival, SimTime::ZERO);
        let second = first[1].arrival;
        assert!(second > SimTime::ZERO);
        // A client frees at once: the third waits for its creation, after the second's.
        let next = w
            .on_finished(
                &finished(&first[0], SimTime::ZERO, Outcome::Completed),
                SimTime::ZERO,
            )
            .unwrap();
        assert!(next.arrival > second, "{:?} after {second:?}", next.arrival);
        // Long after every creation, a freed client sends at once.
        let late = SimTime::ZERO + SimDuration::from_secs(1000);
        let last = w
            .on_finished(&finished(&first[1], late, Outcome::Completed), late)
            .unwrap();
        assert_eq!(last.arrival, late);
        // The budget of 4 is spent.
        assert!(
            w.on_finished(&finished(&next, late, Outcome::Completed), late)
                .is_none()
        );
        // A request created after the window is never sent: at 0.001 per second the second one comes
        // long after a window of one second.
        let slow = ClientRules {
            request_rate: Some(0.001),
            ..ClientRules::vllm_bench(false)
        };
        let end = SimTime::ZERO + SimDuration::from_secs(1);
        let mut w = ClosedLoop::new(3, sampler(), from_u64(1), end, Some(3), off(), slow);
        let sent: Vec<Request> = std::iter::from_fn(|| w.next_arrival()).collect();
        assert_eq!(sent.len(), 1, "{sent:?}");
        // Over many requests the creations run at the rate.
        let rules = ClientRules {
            request_rate: Some(10.0),
            ..ClientRules::vllm_bench(false)
        };
        let n = 2000;
        let mut w = ClosedLoop::new(
            n,
            sampler(),
            from_u64(2),
            SimTime::MAX,
            Some(u64::from(n)),
            off(),
            rules,
        );
        let all: Vec<Request> = std::iter::from_fn(|| w.next_arrival()).collect();
        let span = all.last().unwrap().arrival.as_secs_f64();
        let rate = f64::from(n - 1) / span;
        assert!((rate - 10.0).abs() < 0.6, "{rate}");
    }
}
