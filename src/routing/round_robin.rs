//! `round_robin`: each request to the next worker that is up, cycling in id order.

use super::{Decision, RouteInput, RoutingPolicy};
use crate::rng::SimRng;

/// Cycles through the workers, skipping those believed down.
#[derive(Debug, Default)]
pub struct RoundRobin {
    next: usize,
}

impl RoutingPolicy for RoundRobin {
    fn name(&self) -> &'static str {
        "round_robin"
    }

    fn reads_kv_usage(&self) -> bool {
        false
    }

    fn route(&mut self, input: &RouteInput, _rng: &mut SimRng) -> Option<Decision> {
        let workers = input.workers;
        let n = workers.len();
        (0..n)
            .map(|k| (self.next + k) % n)
            .find(|&i| workers[i].up)
            .map(|i| {
                self.next = (i + 1) % n;
                Decision {
                    worker: i,
                    reason: "next in rotation",
                }
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::from_u64;
    use crate::routing::test_support::{request, route, snapshots};

    #[test]
    fn cycles_and_skips_down_workers() {
        let mut p = RoundRobin::default();
        let mut ws = snapshots(&[0, 0, 0]);
        let mut rng = from_u64(1);
        let picks: Vec<_> = (0..4)
            .map(|i| route(&mut p, &request(i), &ws, &mut rng).unwrap().worker)
            .collect();
        assert_eq!(picks, [0, 1, 2, 0]);
        ws[1].up = false;
        let picks: Vec<_> = (0..3)
            .map(|i| route(&mut p, &request(i), &ws, &mut rng).unwrap().worker)
            .collect();
        assert_eq!(picks, [2, 0, 2]);
        for w in &mut ws {
            w.up = false;
        }
        assert!(route(&mut p, &request(9), &ws, &mut rng).is_none());
    }
}
