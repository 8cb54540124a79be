//! Unit tests of the collector on hand-built records: which requests are good under the SLOs (bounds
//! included), what each counter counts, and how recompute adds up.

use super::Collector;
use super::record::{Outcome, RequestRecord};
use crate::metrics::Slo;
use crate::time::{SimDuration, SimTime};

pub(super) fn ms(v: u64) -> SimTime {
    SimTime(v * 1_000_000)
}

pub(super) fn completed(
    id: u64,
    arrival_ms: u64,
    first_token_ms: u64,
    finished_ms: u64,
    output: u32,
) -> RequestRecord {
    RequestRecord {
        first_scheduled: Some(ms(arrival_ms)),
        first_token: Some(ms(first_token_ms)),
        prompt_tokens: 100,
        output_tokens: output,
        prefill_tokens: 100,
        ..RequestRecord::for_test(id, ms(arrival_ms), ms(finished_ms), Outcome::Completed)
    }
}

fn collector() -> Collector {
    let slo = Slo {
        ttft: Some(SimDuration::from_millis(100)),
        tpot: Some(SimDuration::from_millis(10)),
        window: None,
    };
    Collector::new(slo, 2)
}

#[test]
fn a_request_exactly_at_both_slos_is_good_and_one_past_either_is_not() {
    let mut c = collector();
    // TTFT 100 ms; 4 tokens after the first in 40 ms: TPOT 10 ms. Both at their bound: good.
    c.on_finished(&completed(0, 0, 100, 140, 5));
    // TTFT 101 ms: not good.
    c.on_finished(&completed(1, 1000, 1101, 1141, 5));
    // TTFT 50 ms but TPOT (90 − 50) / 4 = 10.000001 ms... in whole ns: 40,000,004 / 4 = 10,000,001 ns.
    let mut slow = completed(2, 2000, 2050, 2090, 5);
    slow.finished = SimTime(slow.finished.0 + 4);
    c.on_finished(&slow);
    // One output token: no TPOT, judged on TTFT alone (90 ms: good).
    c.on_finished(&completed(3, 3000, 3090, 3090, 1));
    // Well inside both (TTFT 50 ms, TPOT 20 / 4 = 5 ms): good.
    c.on_finished(&completed(4, 4000, 4050, 4070, 5));
    // Good: requests 0, 3 and 4.
    assert_eq!((c.completed, c.steady.good), (5, 3));
    assert_eq!(
        c.steady.tpot.count(),
        4,
        "the one-token request has no TPOT"
    );
    assert_eq!(c.steady.ttft.max(), 101_000_000);
    // (100 + 101 + 50 + 90 + 50) / 5 = 78.2 ms.
    assert_eq!(c.steady.ttft.mean(), 78_200_000.0);
}

#[test]
fn counters_count_outcomes_retries_sessions_workers_and_tokens() {
    let mut c = collector();
    let mut a = completed(0, 0, 30, 70, 5);
    a.session = Some(7);
    a.turn = Some(0);
    a.worker = Some(1);
    a.cached_tokens = 40;
    a.prefill_tokens = 60;
    a.recompute.tokens = [1, 0, 0, 2, 0, 4];
    a.recompute.gpu_seconds = [0.5, 0.0, 0.0, 0.25, 0.0, 0.125];
    let mut b = completed(1, 100, 150, 150, 1);
    b.session = Some(7);
    b.turn = Some(1);
    b.first_scheduled = Some(ms(120));
    b.retries = 1;
    b.preemptions = 2;
    b.prefill_tokens = 130;
    b.recompute.tokens = [0, 3, 0, 0, 0, 0];
    b.recompute.gpu_seconds = [0.0, 1.0, 0.0, 0.0, 0.0, 0.0];
    let mut r = completed(2, 200, 0, 200, 3);
    r.outcome = Outcome::Rejected;
    r.first_scheduled = None;
    r.first_token = None;
    r.worker = None;
    r.prefill_tokens = 0;
    for rec in [&a, &b, &r] {
        c.on_arrival(rec.arrival);
        c.on_finished(rec);
    }
    assert_eq!((c.arrived, c.completed, c.rejected, c.failed), (3, 2, 1, 0));
    assert_eq!(c.finished(), 3);
    assert_eq!(c.retried, 1, "only b was retried");
    assert_eq!((c.sessions_started, c.session_requests), (1, 2));
    assert_eq!(c.per_worker, [1, 1]);
    // Token counts of completed requests only: prompts 100 + 100, cached 40, outputs 5 + 1.
    assert_eq!(
        (c.prompt_tokens, c.cached_tokens, c.output_tokens),
        (200, 40, 6)
    );
    // Prefill and preemptions count every outcome: 60 + 130 + 0; 2.
    assert_eq!((c.prefill_tokens, c.preemptions), (190, 2));
    assert_eq!(c.recompute.tokens, [1, 3, 0, 2, 0, 4]);
    assert_eq!(c.recompute.gpu_seconds, [0.5, 1.0, 0.0, 0.25, 0.0, 0.125]);
    assert_eq!(c.recompute.total_tokens(), 10);
    assert_eq!(c.recompute.total_gpu_seconds(), 1.875);
    // Queueing: a scheduled at its arrival (0), b 20 ms after it.
    assert_eq!(
        (c.steady.queue.count(), c.steady.queue.max()),
        (2, 20_000_000)
    );
    assert_eq!(c.last_finish, ms(200));
}
