//! `least_outstanding` (least connections): the worker with the fewest requests in flight.

use super::pick::min_from;
use super::{Decision, RouteInput, RoutingPolicy};
use crate::rng::SimRng;

/// Picks the up worker with the fewest outstanding requests. Ties go to the first tied worker at or after
/// a rotating start (as nginx's `least_conn` falls back to round-robin), so an idle fleet is not all sent
/// to worker 0.
#[derive(Debug, Default)]
pub struct LeastOutstanding {
    start: usize,
}

impl LeastOutstanding {
    /// The choice without recording it (for policies that fall back to least-outstanding).
    pub fn peek(&self, input: &RouteInput) -> Option<usize> {
        min_from(input.workers, self.start, |w| w.outstanding)
    }

    /// The choice, advancing the tie-break rotation.
    pub fn pick(&mut self, input: &RouteInput) -> Option<usize> {
        let best = self.peek(input)?;
        self.start = (best + 1) % input.workers.len();
        Some(best)
    }
}

impl RoutingPolicy for LeastOutstanding {
    fn name(&self) -> &'static str {
        "least_outstanding"
    }

    fn reads_kv_usage(&self) -> bool {
        false
    }

    fn route(&mut self, input: &RouteInput, _rng: &mut SimRng) -> Option<Decision> {
        self.pick(input).map(|worker| Decision {
            worker,
            reason: "fewest outstanding",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::from_u64;
    use crate::routing::test_support::{request, route, snapshots};

    #[test]
    fn picks_least_loaded_and_rotates_ties() {
        let mut p = LeastOutstanding::default();
        let mut rng = from_u64(1);
        let ws = snapshots(&[3, 1, 2, 1]);
        assert_eq!(route(&mut p, &request(0), &ws, &mut rng).unwrap().worker, 1);
        assert_eq!(route(&mut p, &request(1), &ws, &mut rng).unwrap().worker, 3);
        assert_eq!(route(&mut p, &request(2), &ws, &mut rng).unwrap().worker, 1);
        let mut ws = snapshots(&[5, 0]);
        ws[1].up = false;
        assert_eq!(route(&mut p, &request(3), &ws, &mut rng).unwrap().worker, 0);
    }
}
