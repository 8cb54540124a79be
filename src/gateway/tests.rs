use super::*;
use crate::request::{Segment, SessionRef};

fn seg(content: u64, tokens: u32) -> Segment {
    Segment { content, tokens }
}

#[test]
fn backoff_doubles_up_to_its_ceiling() {
    let g = GatewaySpec::default(); // 100 ms, doubling, at most 5 s
    let ms: Vec<u64> = (1..=8).map(|n| g.backoff(n).0 / 1_000_000).collect();
    assert_eq!(ms, vec![100, 200, 400, 800, 1600, 3200, 5000, 5000]);
}

#[test]
fn health_checks_mark_down_after_failures_and_up_after_successes() {
    let spec = GatewaySpec {
        health_check_failures: PositiveInt(3),
        health_check_successes: PositiveInt(2),
        ..GatewaySpec::default()
    };
    let mut g = Gateway::new(spec, &[true]);
    assert_eq!(g.on_health_check(0, false), None);
    assert_eq!(g.on_health_check(0, false), None);
    assert_eq!(g.on_health_check(0, false), Some(BeliefChange::MarkedDown));
    assert!(!g.routable(0));
    assert_eq!(g.on_health_check(0, true), None);
    assert_eq!(
        g.on_health_check(0, false),
        None,
        "a failure resets the streak"
    );
    assert_eq!(g.on_health_check(0, true), None);
    assert_eq!(g.on_health_check(0, true), Some(BeliefChange::MarkedUp));
    assert!(g.routable(0));
}

#[test]
fn a_good_check_resets_the_failure_streak() {
    // Three failures in a row mark a worker down; two, a good check, and two more do not: the good
    // check starts the count again (a flapping but mostly healthy worker stays in rotation).
    let spec = GatewaySpec {
        health_check_failures: PositiveInt(3),
        ..GatewaySpec::default()
    };
    let mut g = Gateway::new(spec, &[true]);
    for ok in [false, false, true, false, false] {
        assert_eq!(g.on_health_check(0, ok), None, "check {ok}");
        assert!(g.routable(0));
    }
    assert_eq!(g.on_health_check(0, false), Some(BeliefChange::MarkedDown));
}

#[test]
fn gateway_ranges_keep_a_run_finite() {
    let bad = |text: &str| {
        let spec: GatewaySpec = toml::from_str(text).unwrap();
        spec.validate().unwrap_err()
    };
    let (field, message) = bad("max_retries = 4000000000");
    assert_eq!(field, "max_retries");
    assert!(message.contains("between 0 and 100"), "{message}");
    assert_eq!(bad("migration_limit = 101").0, "migration_limit");
    assert_eq!(bad("request_timeout = \"87600h\"").0, "request_timeout");
    assert_eq!(
        bad("health_check_interval = \"1ns\"").0,
        "health_check_interval"
    );
    assert_eq!(
        bad("retry_backoff = \"2h\"\nretry_backoff_max = \"3h\"").0,
        "retry_backoff"
    );
    let (field, message) = bad("shared_tier = { read_gb_per_s = 1e-300 }");
    assert_eq!(field, "shared_tier.read_gb_per_s");
    assert!(message.contains("GB/s"), "{message}");
    GatewaySpec::default().validate().unwrap();
    let spec: GatewaySpec = toml::from_str("max_retries = 100\nretry_backoff = \"0s\"").unwrap();
    spec.validate().unwrap();
}

#[test]
fn request_errors_mark_down_after_a_streak_that_success_breaks() {
    let spec = GatewaySpec {
        errors_to_mark_down: PositiveInt(2),
        ..GatewaySpec::default()
    };
    let mut g = Gateway::new(spec, &[true, true]);
    assert_eq!(g.on_error(1), None);
    g.on_success(1);
    assert_eq!(g.on_error(1), None);
    assert_eq!(g.on_error(1), Some(BeliefChange::MarkedDown));
    assert!(g.routable(0) && !g.routable(1));
}

#[test]
fn a_drained_worker_returns_only_after_a_restart_and_a_good_check() {
    let mut g = Gateway::new(GatewaySpec::default(), &[true]);
    g.drain(0);
    assert!(!g.routable(0));
    assert_eq!(g.on_health_check(0, true), None, "still draining");
    g.end_drain_if_draining(0);
    assert!(!g.routable(0));
    assert_eq!(g.on_health_check(0, true), Some(BeliefChange::MarkedUp));
    assert!(g.routable(0));
}

#[test]
fn a_conversation_on_a_worker_the_gateway_marked_down_is_lost() {
    // The worker is neither restarted (same epoch) nor drained: the gateway's belief that it is
    // down is enough for the next turn to start over elsewhere.
    let spec = GatewaySpec {
        session_state: SessionState::Worker,
        health_check_failures: PositiveInt(1),
        ..GatewaySpec::default()
    };
    let mut g = Gateway::new(spec, &[true, true]);
    let s = |turn| Some(SessionRef { id: 9, turn });
    let t0 = Request::new(1, s(0), SimTime::ZERO, 10, vec![seg(1, 100), seg(2, 50)]);
    g.on_routed(&t0, 0, 0, SimTime::ZERO);
    assert_eq!(g.on_health_check(0, false), Some(BeliefChange::MarkedDown));
    let mut t1 = Request::new(
        2,
        s(1),
        SimTime(1),
        10,
        vec![seg(1, 100), seg(2, 50), seg(3, 10)],
    );
    let mut dropped = 0;
    let (home, reset) = g.session_home(&mut t1, &mut dropped, |_| 0, |_| true);
    assert_eq!((home, reset), (None, true));
}

#[test]
fn a_lost_conversation_restarts_at_the_new_message_and_stays_short() {
    let spec = GatewaySpec {
        session_state: SessionState::Worker,
        ..GatewaySpec::default()
    };
    let mut g = Gateway::new(spec, &[true, true]);
    let s = |turn| Some(SessionRef { id: 7, turn });
    // Turn 0: system prompt (1) + message m0 (2).
    let t0 = Request::new(1, s(0), SimTime::ZERO, 10, vec![seg(1, 100), seg(2, 50)]);
    g.on_routed(&t0, 0, 0, SimTime::ZERO);
    // Turn 1 while worker 0 lives: it must go home, unchanged.
    let mut t1 = Request::new(
        2,
        s(1),
        SimTime(1),
        10,
        vec![seg(1, 100), seg(2, 50), seg(3, 10), seg(4, 20)],
    );
    let mut dropped = 0;
    assert_eq!(
        g.session_home(&mut t1, &mut dropped, |_| 0, |_| true),
        (Some(0), false)
    );
    assert_eq!(t1.prompt_tokens, 180);
    g.on_routed(&t1, 0, 0, SimTime(1));
    // Worker 0 crashes and restarts (epoch 1): turn 2 starts a new conversation at m2.
    let history = vec![
        seg(1, 100),
        seg(2, 50),
        seg(3, 10),
        seg(4, 20),
        seg(5, 10),
        seg(6, 30),
    ];
    let mut t2 = Request::new(3, s(2), SimTime(2), 10, history.clone());
    let mut dropped = 0;
    let (home, reset) = g.session_home(&mut t2, &mut dropped, |_| 1, |_| true);
    assert_eq!((home, reset), (None, true));
    assert_eq!(
        t2.segments,
        vec![seg(1, 100), seg(6, 30)],
        "system prompt + the new message"
    );
    assert_eq!(t2.prompt_tokens, 130);
    // A retry of the same request (before it is routed anywhere) drops nothing more.
    g.session_home(&mut t2, &mut dropped, |_| 1, |_| true);
    assert_eq!(t2.segments, vec![seg(1, 100), seg(6, 30)]);
    g.on_routed(&t2, 1, 0, SimTime(2));
    // Turn 3 builds on turn 2 as written; the gateway drops the lost history again.
    let mut full = history;
    full.extend([seg(7, 10), seg(8, 40)]);
    let mut t3 = Request::new(4, s(3), SimTime(3), 10, full);
    let mut dropped = 0;
    assert_eq!(
        g.session_home(&mut t3, &mut dropped, |_| 0, |_| true),
        (Some(1), false)
    );
    assert_eq!(
        t3.segments,
        vec![seg(1, 100), seg(6, 30), seg(7, 10), seg(8, 40)]
    );
}

#[test]
fn the_busiest_worker_holds_the_most_recent_conversations() {
    let mut g = Gateway::new(GatewaySpec::default(), &[true, true, true]);
    for (id, w) in [(1u64, 2usize), (2, 2), (3, 1)] {
        let r = Request::new(
            id,
            Some(SessionRef { id, turn: 0 }),
            SimTime::ZERO,
            1,
            vec![seg(1, 5), seg(id + 10, 5)],
        );
        g.on_routed(&r, w, 0, SimTime::ZERO);
    }
    assert_eq!(g.most_sessions(SimTime(1), 0..3), Some(2));
    assert_eq!(g.most_sessions(SimTime(1), [0, 1].into_iter()), Some(1));
    // Ten minutes later nothing is active: ties go to the lowest id.
    let later = SimTime::ZERO + SimDuration::from_secs(601);
    assert_eq!(g.most_sessions(later, 0..3), Some(0));
}

#[test]
fn the_store_serves_a_prefix_only_after_its_write_lands() {
    use crate::tiers::{BlockLayout, TierKind, Tiers, TiersSpec};
    let spec = SharedTierSpec {
        read_gb_per_s: crate::config::Positive(1.0),
        write_gb_per_s: crate::config::Positive(1.0),
        latency: SimDuration::from_millis(1),
        capacity_gb: None,
    };
    let layout = BlockLayout {
        bytes_per_gpu: 1e6,
        gpus: 1,
    };
    let mut s = Tiers::new(&TiersSpec::default(), Some(&spec.as_tier(1)), &[layout]);
    // Two blocks of 1 MB at 1 GB/s: the write lands 1 ms + 2 ms after it starts.
    s.write_turn(0, &[10, 11], SimTime::ZERO);
    assert!(s.locate(0, &[10, 11, 12], SimTime(2_999_999)).is_empty());
    let found = s.locate(0, &[10, 11, 12], SimTime(3_000_000));
    assert_eq!(found, [TierKind::Shared, TierKind::Shared]);
    assert_eq!(
        s.quotes(0, &found, SimTime(3_000_000)),
        [(2, SimDuration::from_millis(3))]
    );
    s.shared_available = false;
    assert!(s.locate(0, &[10, 11], SimTime(9_000_000)).is_empty());
}
