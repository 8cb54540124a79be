//! `least_kv`: the worker with the lowest KV-cache utilisation.

use super::pick::min_from;
use super::{Decision, RouteInput, RoutingPolicy};
use crate::rng::SimRng;

/// Picks the up worker whose KV blocks are least used (running sequences' blocks over total); ties go to
/// fewer outstanding requests, then rotate.
#[derive(Debug, Default)]
pub struct LeastKv {
    start: usize,
}

impl RoutingPolicy for LeastKv {
    fn name(&self) -> &'static str {
        "least_kv"
    }

    fn route(&mut self, input: &RouteInput, _rng: &mut SimRng) -> Option<Decision> {
        let best = min_from(input.workers, self.start, |w| {
            (w.kv_utilization, w.outstanding)
        })?;
        self.start = (best + 1) % input.workers.len();
        Some(Decision {
            worker: best,
            reason: "lowest KV utilisation",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::from_u64;
    use crate::routing::test_support::{request, route, snapshots};

    #[test]
    fn picks_lowest_utilisation_then_fewest_outstanding() {
        let mut p = LeastKv::default();
        let mut rng = from_u64(1);
        let mut ws = snapshots(&[0, 4, 1, 0]);
        ws[0].kv_utilization = 0.5;
        ws[1].kv_utilization = 0.1;
        ws[2].kv_utilization = 0.1;
        ws[3].kv_utilization = 0.1;
        ws[3].up = false;
        assert_eq!(route(&mut p, &request(0), &ws, &mut rng).unwrap().worker, 2);
    }
}
