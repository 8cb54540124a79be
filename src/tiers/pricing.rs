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

/// Where the missing blocks of a prompt's prefix can come from instead of being recomputed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrefixSource {
    /// A lower tier of the worker itself (or the shared store).
    Tier(super::TierKind),
    /// Another worker's GPU cache, over the interconnect.
    Peer(usize),
}

/// An offer to bring the first `blocks` missing blocks from `source`, landing `ready_in` from now
/// (queueing on the links included).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PrefixOffer {
    pub source: PrefixSource,
    pub blocks: usize,
    pub ready_in: SimDuration,
}

/// The cheapest way to get a prompt ready on a worker: `offer` (`None`: recompute everything the
/// worker lacks) and what it costs until the prompt's KV is complete (`ready_in + compute(blocks)`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PrefixPlan {
    pub offer: Option<PrefixOffer>,
    pub cost: SimDuration,
}

/// The cost to get a prompt's KV onto a worker: the cheapest of recomputing what the worker lacks
/// (`compute(0)`) and each offer (`ready_in + compute(blocks)`, the rest recomputed after it lands).
/// Ties go to recomputing, then to the earlier offer. Pure: the routers that price reuse against load
/// (predicted-latency routing) and the engine's own load decisions use the same rule.
pub fn cost_to_place(offers: &[PrefixOffer], compute: impl Fn(usize) -> SimDuration) -> PrefixPlan {
    let mut best = PrefixPlan {
        offer: None,
        cost: compute(0),
    };
    for o in offers {
        let cost = o.ready_in + compute(o.blocks);
        if cost < best.cost {
            best = PrefixPlan {
                offer: Some(*o),
                cost,
            };
        }
    }
    best
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn ms(v: u64) -> SimDuration {
        SimDuration::from_millis(v)
    }

    /// Computing costs 10 ms per block; 8 blocks are missing from the GPU (also the engine's tests of
    /// pricing a tier against a peer).
    pub(crate) fn compute(k: usize) -> SimDuration {
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
    fn cost_to_place_picks_the_cheapest_source_or_recompute() {
        let host = PrefixOffer {
            source: PrefixSource::Tier(crate::tiers::TierKind::Host),
            blocks: 3,
            ready_in: ms(5),
        };
        let peer = PrefixOffer {
            source: PrefixSource::Peer(2),
            blocks: 8,
            ready_in: ms(30),
        };
        // Recompute 80; host 5 + 50 = 55; peer 30 + 0 = 30: the peer.
        let plan = cost_to_place(&[host, peer], compute);
        assert_eq!(plan.offer, Some(peer));
        assert_eq!(plan.cost, ms(30));
        // A slow peer (90 ms): the host offer (55) wins.
        let slow = PrefixOffer {
            ready_in: ms(90),
            ..peer
        };
        assert_eq!(cost_to_place(&[host, slow], compute).offer, Some(host));
        // Only offers dearer than recomputing: recompute, at its own cost.
        let plan = cost_to_place(&[slow], compute);
        assert_eq!(
            plan,
            PrefixPlan {
                offer: None,
                cost: ms(80)
            }
        );
        // A tie with recomputing recomputes.
        let tie = PrefixOffer {
            ready_in: ms(80),
            ..peer
        };
        assert_eq!(cost_to_place(&[tie], compute).offer, None);
    }

    #[test]
    fn nothing_to_load_means_compute() {
        assert_eq!(cheapest_load(&[], compute), 0);
    }
}
