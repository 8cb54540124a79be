//! `least_outstanding` (least connections): the worker with the fewest requests in flight.

use super::{Decision, RoutingPolicy};
use crate::request::Request;
use crate::rng::SimRng;
use crate::worker::WorkerSnapshot;

/// Picks the up worker with the fewest outstanding requests. Ties go to the first tied worker at or after
/// a rotating start (as nginx's `least_conn` falls back to round-robin), so an idle fleet is not all sent
/// to worker 0.
#[derive(Debug, Default)]
pub struct LeastOutstanding {
    start: usize,
}

impl RoutingPolicy for LeastOutstanding {
    fn name(&self) -> &'static str {
        "least_outstanding"
    }

    fn route(
        &mut self,
        _request: &Request,
        workers: &[WorkerSnapshot],
        _rng: &mut SimRng,
    ) -> Option<Decision> {
        let n = workers.len();
        let best = (0..n)
            .map(|k| (self.start + k) % n)
            .filter(|&i| workers[i].up)
            .min_by_key(|&i| workers[i].outstanding)?;
        self.start = (best + 1) % n;
        Some(Decision {
            worker: best,
            reason: "fewest outstanding",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::from_u64;
    use crate::routing::test_support::{request, snapshots};

    #[test]
    fn picks_least_loaded_and_rotates_ties() {
        let mut p = LeastOutstanding::default();
        let mut rng = from_u64(1);
        let ws = snapshots(&[3, 1, 2, 1]);
        assert_eq!(p.route(&request(0), &ws, &mut rng).unwrap().worker, 1);
        assert_eq!(p.route(&request(1), &ws, &mut rng).unwrap().worker, 3);
        assert_eq!(p.route(&request(2), &ws, &mut rng).unwrap().worker, 1);
        let mut ws = snapshots(&[5, 0]);
        ws[1].up = false;
        assert_eq!(p.route(&request(3), &ws, &mut rng).unwrap().worker, 0);
    }
}
