//! Prefix caching: hits equal the shared fraction of the prompt when the cache is large enough, and fall
//! when it is not.

use crate::common::{SINGLE_WORKER, run, scenario};

const SHARED: u32 = 2048;
const OWN: u32 = 512;

fn shared_prefix(groups: u32, overrides: &[&str]) -> fleetsim::metrics::Summary {
    let mut o = vec![
        "workers[0].enable_prefix_caching=true",
        "workload.rate=4",
        "duration=\"20m\"",
        "workload.output={dist=\"fixed\",tokens=64}",
    ];
    let prompt = format!("workload.prompt={{dist=\"fixed\",tokens={OWN}}}");
    let prefix = format!("workload.shared_prefix={{groups={groups},tokens={SHARED}}}");
    o.push(&prompt);
    o.push(&prefix);
    o.extend_from_slice(overrides);
    run(&scenario(SINGLE_WORKER, &o)).0
}

#[test]
fn hit_rate_equals_the_shared_fraction_when_the_cache_holds_the_prefix() {
    let s = shared_prefix(1, &[]);
    let n = s.requests.completed as f64;
    assert!(n > 4000.0);
    let shared_fraction = f64::from(SHARED) / f64::from(SHARED + OWN);
    // Only the first request misses; within one block of the shared fraction.
    let one_block = 16.0 / f64::from(SHARED + OWN);
    let hit = s.prefix_cache.hit_rate;
    assert!(
        hit <= shared_fraction && hit >= shared_fraction - one_block,
        "hit {hit} vs {shared_fraction}"
    );
    assert_eq!(s.recompute.tokens, 0);
}

#[test]
fn hit_rate_falls_when_the_cache_is_too_small() {
    // 8 equally popular prefixes of 128 blocks each; a cache of 1,024 + headroom holds them all, one of
    // 400 blocks holds about two.
    let big = shared_prefix(8, &["workers[0].kv_blocks=4000"]);
    let small = shared_prefix(8, &["workers[0].kv_blocks=400"]);
    let shared_fraction = f64::from(SHARED) / f64::from(SHARED + OWN);
    assert!(
        big.prefix_cache.hit_rate > shared_fraction - 0.01,
        "{}",
        big.prefix_cache.hit_rate
    );
    assert!(
        small.prefix_cache.hit_rate < 0.6 * big.prefix_cache.hit_rate,
        "small cache {} vs big {}",
        small.prefix_cache.hit_rate,
        big.prefix_cache.hit_rate
    );
    // What was lost was evicted, and the summary says so.
    assert!(small.recompute.by_cause.evicted.tokens > 0);
    assert_eq!(big.recompute.by_cause.evicted.tokens, 0);
}

#[test]
fn no_hits_without_prefix_caching() {
    let s = shared_prefix(1, &["workers[0].enable_prefix_caching=false"]);
    assert_eq!(s.prefix_cache.hit_rate, 0.0);
}

#[test]
fn round_robin_scatters_a_shared_prefix_and_the_misses_are_misrouted() {
    // Four workers: the first request on each misses. With round robin, the later workers' first misses
    // happen while worker 0 already holds the prefix: misrouted (each is one full prefix, 128 blocks).
    let s = shared_prefix(1, &["workers[0].count=4", "router.policy=round_robin"]);
    let misrouted = s.recompute.by_cause.misrouted.tokens;
    assert!(misrouted >= u64::from(SHARED), "{misrouted}");
    assert_eq!(misrouted % u64::from(SHARED), 0, "{misrouted}");
    assert!(misrouted <= 3 * u64::from(SHARED), "{misrouted}");
}
