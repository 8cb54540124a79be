//! Unit tests of the fault handlers: late starts, crashes with each in-flight policy, restarts with and
//! without the KV cache, and when the engine tracks conversations. Whole-scenario fault behaviour is
//! tested in `tests/integration/faults.rs`; these pin the engine's own steps on hand-built plans.

use super::tests::{by_id, request, simulation};
use super::*;
use crate::faults::{FaultKind, FaultPlan, PlannedFault, Symptom, Targets};
use crate::gateway::{GatewaySpec, InFlight, SessionState};
use crate::time::SimDuration;

fn secs(s: f64) -> SimTime {
    SimTime::ZERO + SimDuration::from_secs_f64(s)
}

/// A crash of `worker` at `at`, back after `restart_after` (never if `None`).
pub(super) fn crash(
    at: SimTime,
    worker: usize,
    restart_after: Option<f64>,
    keep_kv: bool,
) -> PlannedFault {
    PlannedFault {
        at,
        kind: FaultKind::Crash,
        targets: Targets::Workers(vec![worker]),
        source: 0,
        restart_after: restart_after.map(SimDuration::from_secs_f64),
        kv_survives_restart: keep_kv,
        symptom: Symptom::Refused,
        duration: None,
        factor: 1.0,
        fraction: 0.0,
        grace: SimDuration::from_secs(30),
        data_loss: true,
        label: format!("crash w{worker}"),
    }
}

fn plan(faults: Vec<PlannedFault>) -> FaultPlan {
    FaultPlan::scheduled(faults)
}

#[test]
fn a_late_starting_worker_gets_no_request_until_the_gateway_sees_it_up() {
    // Worker 1 starts at 1 s. The gateway begins believing it down, so the three early requests all go to
    // worker 0; health checks (every 5 s) mark it up long before the requests at 60 s, which round robin
    // then spreads over both workers.
    let early = (0..3).map(|i| request(i, secs(0.001 * i as f64), i, 8, 1));
    let late = (3..7).map(|i| request(i, secs(60.0 + 0.001 * i as f64), i, 8, 1));
    let (mut sim, records) = simulation(2, early.chain(late).collect());
    sim.set_faults(
        plan(Vec::new()),
        GatewaySpec::default(),
        vec![(1, secs(1.0))],
    );
    assert_eq!(sim.truth, [Truth::Up, Truth::Down(Symptom::Refused)]);
    let out = sim.run(&mut |_| {});
    assert_eq!(out.collector.completed, 7);
    for i in 0..3 {
        assert_eq!(by_id(&records, i).worker, Some(0), "request {i}");
    }
    let on_1 = (3..7)
        .filter(|&i| by_id(&records, i).worker == Some(1))
        .count();
    assert_eq!(on_1, 2, "round robin over two workers after the start");
}

#[test]
fn a_crash_mid_decode_retries_the_request_on_the_survivor() {
    // Request 0 (round robin: worker 0) decodes 400 tokens, a few seconds; worker 0 crashes 100 ms in.
    // With in_flight = retry the gateway sends it again, from scratch, to worker 1: it completes there,
    // one retry, its first attempt's prefill counted as recompute caused by the failure.
    let (mut sim, records) = simulation(2, vec![request(0, SimTime::ZERO, 1, 64, 400)]);
    sim.set_faults(
        plan(vec![crash(secs(0.1), 0, Some(30.0), false)]),
        GatewaySpec::default(),
        Vec::new(),
    );
    let out = sim.run(&mut |_| {});
    let r = by_id(&records, 0);
    assert_eq!(r.outcome, Outcome::Completed);
    assert_eq!((r.worker, r.retries, r.output_tokens), (Some(1), 1, 400));
    // The client saw its first token from the first attempt, before the crash: a mid-stream retry
    // does not move its time to first token to the retry's.
    assert!(
        r.first_token.unwrap() < secs(0.1),
        "its first token is the first attempt's, as the client saw it"
    );
    let failure = crate::metrics::record::RecomputeCause::Failure as usize;
    assert!(r.recompute.tokens[failure] > 0, "{:?}", r.recompute);
    assert_eq!(out.collector.completed, 1);
}

#[test]
fn with_in_flight_fail_a_crash_fails_the_request_with_its_reason() {
    let (mut sim, records) = simulation(2, vec![request(0, SimTime::ZERO, 1, 64, 400)]);
    let gateway = GatewaySpec {
        in_flight: InFlight::Fail,
        ..GatewaySpec::default()
    };
    sim.set_faults(
        plan(vec![crash(secs(0.1), 0, Some(30.0), false)]),
        gateway,
        Vec::new(),
    );
    let out = sim.run(&mut |_| {});
    let r = by_id(&records, 0);
    assert_eq!(r.outcome, Outcome::Failed);
    assert_eq!(r.reason, Some("worker crashed"));
    assert_eq!((r.worker, r.retries), (Some(0), 0));
    assert_eq!(out.collector.completed, 0);
}

/// One worker serves a 64-token prompt, crashes at 1 s with nothing in flight, restarts 1 s later; the
/// same prompt comes again at 60 s. Returns the cached tokens of the first and the second request.
fn cached_after_restart(keep_kv: bool) -> (u32, u32) {
    let (mut sim, records) = simulation(
        1,
        vec![
            request(0, SimTime::ZERO, 7, 64, 1),
            request(1, secs(60.0), 7, 64, 1),
        ],
    );
    sim.set_faults(
        plan(vec![crash(secs(1.0), 0, Some(1.0), keep_kv)]),
        GatewaySpec::default(),
        Vec::new(),
    );
    let out = sim.run(&mut |_| {});
    assert_eq!(out.collector.completed, 2);
    (
        by_id(&records, 0).cached_tokens,
        by_id(&records, 1).cached_tokens,
    )
}

#[test]
fn a_restarted_worker_starts_with_an_empty_cache() {
    assert_eq!(cached_after_restart(false), (0, 0));
}

#[test]
fn a_restart_keeps_the_cache_when_the_kv_survives() {
    let (first, second) = cached_after_restart(true);
    assert_eq!(first, 0);
    // All but the block holding the last prompt token (which is recomputed to sample from): 60 of 64.
    assert_eq!(second, 60);
}

#[test]
fn the_engine_tracks_conversations_only_when_something_needs_them() {
    let most_sessions = PlannedFault {
        targets: Targets::MostSessions,
        ..crash(secs(1.0), 0, None, false)
    };
    let worker_state = GatewaySpec {
        session_state: SessionState::Worker,
        ..GatewaySpec::default()
    };
    let cases = [
        (plan(Vec::new()), GatewaySpec::default(), false),
        (
            plan(vec![crash(secs(1.0), 0, None, false)]),
            GatewaySpec::default(),
            false,
        ),
        (plan(vec![most_sessions]), GatewaySpec::default(), true),
        (plan(Vec::new()), worker_state, true),
    ];
    for (i, (faults, gateway, expected)) in cases.into_iter().enumerate() {
        let (mut sim, _) = simulation(2, Vec::new());
        sim.set_faults(faults, gateway, Vec::new());
        assert_eq!(sim.track_sessions, expected, "case {i}");
    }
}

#[test]
fn a_permanent_crash_during_an_outage_keeps_the_worker_down_for_good() {
    // Worker 0 crashes at 1 s and would be back at 31 s; a crash meant to take it out for good lands at
    // 10 s, while it is down. It must not come back: every later request goes to worker 1 (issue 41: the
    // worker came back and served 44 more requests).
    let reqs = (0..40)
        .map(|i| request(i, secs(40.0 + 0.5 * i as f64), i, 8, 1))
        .collect();
    let (mut sim, records) = simulation(2, reqs);
    sim.set_faults(
        plan(vec![
            crash(secs(1.0), 0, Some(30.0), false),
            crash(secs(10.0), 0, None, false),
        ]),
        GatewaySpec::default(),
        Vec::new(),
    );
    let out = sim.run(&mut |_| {});
    assert_eq!(out.collector.completed, 40);
    for i in 0..40 {
        assert_eq!(by_id(&records, i).worker, Some(1), "request {i}");
    }
}

#[test]
fn a_permanent_crash_during_a_hang_kills_the_worker_for_good() {
    // The hang's restart at 31 s kills the hung process; the permanent crash at 10 s means no new one.
    let reqs = (0..20)
        .map(|i| request(i, secs(40.0 + 0.5 * i as f64), i, 8, 1))
        .collect();
    let (mut sim, records) = simulation(2, reqs);
    let mut hang = crash(secs(1.0), 0, Some(30.0), false);
    hang.kind = FaultKind::Hang;
    sim.set_faults(
        plan(vec![hang, crash(secs(10.0), 0, None, false)]),
        GatewaySpec::default(),
        Vec::new(),
    );
    let out = sim.run(&mut |_| {});
    assert_eq!(out.collector.completed, 20);
    for i in 0..20 {
        assert_eq!(by_id(&records, i).worker, Some(1), "request {i}");
    }
}
