//! Load or recompute: the choice a worker makes for a prefix it lacks in GPU memory but a lower tier
//! holds.
//!
//! A request whose first `local` blocks are cached on the GPU can load the next `k` blocks from the
//! tiers (finishing after the slowest link involved, queue included) and compute the rest, or compute
//! everything past `local`. The cost of choosing `k` is `load(k) + compute(k)`: the load must land
//! before the request can be scheduled, and the tokens past `local + k` are computed by the worker's
//! own step model. The cheapest `k` wins; on a tie the smaller `k` (less link traffic).

use crate::time::SimDuration;

/// The `k` (among `candidates`, each `(k, load time of the first k blocks)`, plus `k = 0` at no load
/// cost) minimising `load + compute(k)`.
pub fn cheapest_load(
    candidates: &[(usize, SimDuration)],
    compute: impl Fn(usize) -> SimDuration,
) -> usize {
    let mut best = (compute(0), 0usize);
    for &(k, load) in candidates {
        let cost = load + compute(k);
        if cost < best.0 || (cost == best.0 && k < best.1) {
            best = (cost, k);
        }
    }
    best.1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> SimDuration {
        SimDuration::from_millis(v)
    }

    /// Computing costs 10 ms per block; 8 blocks are missing from the GPU.
    fn compute(k: usize) -> SimDuration {
        ms(10 * (8 - k as u64))
    }

    #[test]
    fn recompute_when_loading_is_slower() {
        // Loading all 8 takes 81 ms, computing them 80 ms: compute.
        assert_eq!(cheapest_load(&[(8, ms(81))], compute), 0);
        // A tie also computes (no link traffic for nothing).
        assert_eq!(cheapest_load(&[(8, ms(80))], compute), 0);
    }

    #[test]
    fn load_when_loading_is_faster() {
        assert_eq!(cheapest_load(&[(8, ms(79))], compute), 8);
    }

    #[test]
    fn a_partial_load_wins_when_the_far_tier_is_slow() {
        // Host holds 3 blocks (5 ms), disk the other 5 (host + disk: 200 ms).
        // Costs: k=0: 80; k=3: 5 + 50 = 55; k=8: 200 + 0 = 200.
        assert_eq!(cheapest_load(&[(3, ms(5)), (8, ms(200))], compute), 3);
        // A fast disk (k=8: 40 ms) beats the host-only load (55 ms).
        assert_eq!(cheapest_load(&[(3, ms(5)), (8, ms(40))], compute), 8);
    }

    #[test]
    fn nothing_to_load_means_compute() {
        assert_eq!(cheapest_load(&[], compute), 0);
    }
}
