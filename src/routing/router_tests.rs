//! Unit tests of the router around the policies: stale load signals (`load_refresh`), the cache view's
//! accuracy counters and decision log, and the tie-breaks that decide between equal scores.

use super::prefix_aware::PrefixAwareParams;
use super::spec::RouterSettings;
use super::test_support::{request, route_with, snapshots};
use super::*;
use crate::rng::from_u64;
use crate::time::SimDuration;
use crate::worker::kv_cache::KvEvent;

fn at_ms(ms: u64) -> SimTime {
    SimTime(ms * 1_000_000)
}

fn least_kv_router(load_refresh: SimDuration) -> Router {
    let spec = RouterSpec {
        policy: PolicyConfig::LeastKv {},
        settings: RouterSettings {
            load_refresh,
            ..RouterSettings::default()
        },
    };
    Router::new(&spec, 7, &[1000, 1000], 16)
}

/// Routes request 0 with no prompt blocks over `fresh` at `now`; returns the chosen worker.
fn route_at(r: &mut Router, now: SimTime, fresh: &[WorkerSnapshot]) -> usize {
    r.route(now, &request(0), &[], fresh).unwrap().worker
}

#[test]
fn between_refreshes_the_router_sees_the_old_kv_use() {
    let mut r = least_kv_router(SimDuration::from_secs(1));
    let mut fresh = snapshots(&[0, 0]);
    fresh[0].kv_utilization = 0.5;
    fresh[1].kv_utilization = 0.1;
    // t = 0: the first decision refreshes; worker 1 has the lower utilisation.
    assert_eq!(route_at(&mut r, at_ms(0), &fresh), 1);
    // Worker 1 fills up to 0.9. At 0.5 s the router still believes 0.1 (refreshed at 0, next at 1 s).
    fresh[1].kv_utilization = 0.9;
    fresh[1].outstanding = 1;
    assert_eq!(route_at(&mut r, at_ms(500), &fresh), 1);
    assert_eq!(route_at(&mut r, at_ms(999), &fresh), 1);
    // At 1 s the refresh is due: 0.5 < 0.9 sends the request to worker 0.
    assert_eq!(route_at(&mut r, at_ms(1000), &fresh), 0);
    // With load_refresh = 0 every decision sees the truth.
    let mut always_fresh = least_kv_router(SimDuration::ZERO);
    fresh[1].kv_utilization = 0.1;
    assert_eq!(route_at(&mut always_fresh, at_ms(0), &fresh), 1);
    fresh[1].kv_utilization = 0.9;
    assert_eq!(route_at(&mut always_fresh, at_ms(500), &fresh), 0);
}

#[test]
fn between_refreshes_the_gateways_own_counts_stay_exact() {
    // Equal KV use, so least_kv breaks the tie on outstanding requests, which the gateway always knows.
    let mut r = least_kv_router(SimDuration::from_secs(10));
    let mut fresh = snapshots(&[0, 0]);
    assert_eq!(route_at(&mut r, at_ms(0), &fresh), 0);
    fresh[0].outstanding = 3;
    fresh[0].kv_utilization = 0.8; // not seen until the refresh at 10 s
    assert_eq!(route_at(&mut r, at_ms(1), &fresh), 1);
    fresh[1].outstanding = 5;
    assert_eq!(route_at(&mut r, at_ms(2), &fresh), 0, "3 < 5 outstanding");
}

#[test]
fn accuracy_counts_missing_and_unexpected_hits_separately() {
    let spec = RouterSpec {
        policy: PolicyConfig::PrefixAware(PrefixAwareParams::default()),
        settings: RouterSettings {
            log_decisions: 2,
            ..RouterSettings::default()
        },
    };
    let mut r = Router::new(&spec, 7, &[1000, 1000], 16);
    assert_eq!(r.view_name(), Some("oracle"));
    assert!(
        r.wants_kv_events(),
        "the oracle view is fed the workers' cache events"
    );
    // The oracle view learns that worker 0 caches blocks 1 and 2 of the prompt [1, 2, 3].
    r.on_kv_events(
        at_ms(0),
        0,
        [KvEvent::Stored(1), KvEvent::Stored(2)].into_iter(),
    );
    let fresh = snapshots(&[0, 0]);
    let prompt = [1, 2, 3];
    let req = request(1);
    // Each decision picks worker 0 (2 of 3 blocks, equal load), expecting 2 blocks there.
    // 1: the worker really had 0 → a missing hit of 2 blocks.
    let d = r.route(at_ms(1), &req, &prompt, &fresh).unwrap();
    assert_eq!(d.worker, 0);
    r.record(at_ms(1), &req, d, &prompt, 0, 0);
    // 2: it had 3 → an unexpected hit of 1 block.
    let d = r.route(at_ms(2), &req, &prompt, &fresh).unwrap();
    r.record(at_ms(2), &req, d, &prompt, 3, 1);
    // 3: it had 2 → neither.
    let d = r.route(at_ms(3), &req, &prompt, &fresh).unwrap();
    r.record(at_ms(3), &req, d, &prompt, 2, 2);
    assert_eq!(
        r.accuracy,
        router::ViewAccuracy {
            decisions: 3,
            expected_hit_missing: 1,
            expected_hit_missing_blocks: 2,
            unexpected_hit: 1,
            unexpected_hit_blocks: 1,
        }
    );
    // The log keeps the first 2 decisions, with what was expected and found.
    assert_eq!(r.log.len(), 2);
    let first = &r.log[0];
    assert_eq!(
        (
            first.worker,
            first.prompt_blocks,
            first.expected_blocks,
            first.actual_blocks
        ),
        (0, 3, 2, 0)
    );
    assert_eq!((r.log[1].actual_blocks, r.log[1].outstanding), (3, 1));
}

#[test]
fn a_router_without_a_view_counts_decisions_only() {
    let mut r = least_kv_router(SimDuration::ZERO);
    assert_eq!(r.view_name(), None);
    assert!(!r.wants_kv_events());
    let fresh = snapshots(&[0, 0]);
    let req = request(1);
    let d = r.route(at_ms(0), &req, &[1, 2], &fresh).unwrap();
    r.record(at_ms(0), &req, d, &[1, 2], 2, 0);
    assert_eq!(
        r.accuracy,
        router::ViewAccuracy {
            decisions: 1,
            ..Default::default()
        }
    );
    assert!(r.log.is_empty(), "log_decisions defaults to 0");
}

#[test]
fn prefix_aware_breaks_equal_scores_towards_the_idler_worker() {
    // Worker with 2 outstanding (the most, so its load term is 1) and all 10 blocks: 10/10 − 1 = 0.
    // Idle worker with no match: 0 − 0 = 0. Equal scores: the idle one wins, whichever is scanned first.
    let mut rng = from_u64(0);
    let mut p = PrefixAware::new(PrefixAwareParams::default());
    let d = route_with(
        &mut p,
        &request(1),
        &snapshots(&[2, 0]),
        &[10, 0],
        10,
        &mut rng,
    )
    .unwrap();
    assert_eq!(d.worker, 1);
    let mut p = PrefixAware::new(PrefixAwareParams::default());
    let d = route_with(
        &mut p,
        &request(1),
        &snapshots(&[0, 2]),
        &[0, 10],
        10,
        &mut rng,
    )
    .unwrap();
    assert_eq!(d.worker, 0);
    assert_eq!(d.reason, "no useful match: least loaded");
}

#[test]
fn prefix_aware_rotates_between_fully_equal_workers() {
    // Identical workers (no match, no load): the scan starts after the last choice, 0, 1, 2, 0.
    let mut rng = from_u64(0);
    let mut p = PrefixAware::new(PrefixAwareParams::default());
    let ws = snapshots(&[0, 0, 0]);
    let picks: Vec<_> = (0..4)
        .map(|_| {
            route_with(&mut p, &request(1), &ws, &[0, 0, 0], 4, &mut rng)
                .unwrap()
                .worker
        })
        .collect();
    assert_eq!(picks, [0, 1, 2, 0]);
}

#[test]
fn round_robin_wraps_around_and_skips_workers_that_are_down() {
    // Three workers, the middle one down: 0, 2, then back to 0, 2.
    let mut rng = from_u64(0);
    let mut p = RoundRobin::default();
    let mut ws = snapshots(&[0, 0, 0]);
    ws[1].up = false;
    let picks: Vec<_> = (0..4)
        .map(|_| {
            route_with(&mut p, &request(1), &ws, &[], 0, &mut rng)
                .unwrap()
                .worker
        })
        .collect();
    assert_eq!(picks, [0, 2, 0, 2]);
}

#[test]
fn an_approximate_view_keeps_its_index_only_for_an_owner_or_a_large_fleet() {
    let router = |name: &str, workers: usize| {
        let spec = RouterSpec {
            policy: PolicyConfig::parse_spec(name).unwrap(),
            settings: RouterSettings::default(),
        };
        Router::new(&spec, 1, &vec![1_000; workers], 16)
    };
    assert_eq!(
        router("llm_d", 8).view_keeps_index(),
        Some(false),
        "nothing reads the owner"
    );
    assert_eq!(router("llm_d", 64).view_keeps_index(), Some(false));
    assert_eq!(
        router("llm_d", 65).view_keeps_index(),
        Some(true),
        "past 64 workers a walk per worker costs more than the index's walk"
    );
    assert_eq!(
        router("sglang_cache_aware", 8).view_keeps_index(),
        Some(true),
        "it reads the owner"
    );
    assert_eq!(
        router("prefix_aware", 8).view_keeps_index(),
        Some(true),
        "the oracle view is its index"
    );
    assert_eq!(router("round_robin", 8).view_keeps_index(), None);
}
