//! `random`: each request to a worker drawn uniformly from those that are up.

use rand::Rng;

use super::{Decision, RouteInput, RoutingPolicy};
use crate::rng::SimRng;

/// Uniform random choice among the workers believed up (draws from the router's own stream).
#[derive(Debug, Default)]
pub struct RandomChoice;

impl RoutingPolicy for RandomChoice {
    fn name(&self) -> &'static str {
        "random"
    }

    fn reads_kv_usage(&self) -> bool {
        false
    }

    fn route(&mut self, input: &RouteInput, rng: &mut SimRng) -> Option<Decision> {
        let up = input.up().count();
        if up == 0 {
            return None;
        }
        let k = rng.random_range(0..up);
        input.up().nth(k).map(|w| Decision {
            worker: w.id,
            reason: "uniform draw",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::from_u64;
    use crate::routing::test_support::{request, route, snapshots};

    #[test]
    fn spreads_uniformly_over_up_workers_only() {
        let mut p = RandomChoice;
        let mut ws = snapshots(&[0, 0, 0, 0]);
        ws[2].up = false;
        let mut rng = from_u64(3);
        let mut counts = [0u32; 4];
        for i in 0..30_000 {
            counts[route(&mut p, &request(i), &ws, &mut rng).unwrap().worker] += 1;
        }
        assert_eq!(counts[2], 0);
        for c in [counts[0], counts[1], counts[3]] {
            assert!((9_500..10_500).contains(&c), "{counts:?}");
        }
    }
}
