//! `power_of_two`: two workers drawn at random, the less loaded one chosen (Mitzenmacher's
//! "power of two choices": exponentially better balance than one random draw, at two probes' cost).

use rand::Rng;

use super::{Decision, RouteInput, RoutingPolicy};
use crate::rng::SimRng;

/// Draws two distinct up workers uniformly and sends the request to the one with fewer outstanding
/// requests (the first drawn on a tie).
#[derive(Debug, Default)]
pub struct PowerOfTwo;

impl RoutingPolicy for PowerOfTwo {
    fn name(&self) -> &'static str {
        "power_of_two"
    }

    fn reads_kv_usage(&self) -> bool {
        false
    }

    fn route(&mut self, input: &RouteInput, rng: &mut SimRng) -> Option<Decision> {
        let up = input.up().count();
        let nth = |k: usize| input.up().nth(k).expect("k < up");
        match up {
            0 => None,
            1 => Some(Decision {
                worker: nth(0).id,
                reason: "only worker up",
            }),
            _ => {
                let a = rng.random_range(0..up);
                let mut b = rng.random_range(0..up - 1);
                if b >= a {
                    b += 1;
                }
                let (wa, wb) = (nth(a), nth(b));
                let worker = if wb.outstanding < wa.outstanding {
                    wb.id
                } else {
                    wa.id
                };
                Some(Decision {
                    worker,
                    reason: "less loaded of two draws",
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::from_u64;
    use crate::routing::test_support::{request, route, snapshots};

    #[test]
    fn never_picks_the_most_loaded_of_three_or_a_down_worker() {
        let mut p = PowerOfTwo;
        let mut rng = from_u64(9);
        let mut ws = snapshots(&[1, 9, 5, 0]);
        ws[3].up = false;
        let mut counts = [0u32; 4];
        for i in 0..3000 {
            counts[route(&mut p, &request(i), &ws, &mut rng).unwrap().worker] += 1;
        }
        assert_eq!(
            counts[1], 0,
            "the most loaded of three is never the lesser of two"
        );
        assert_eq!(counts[3], 0);
        // Worker 0 wins every pair it is in: 2/3 of draws.
        assert!((1900..2100).contains(&counts[0]), "{counts:?}");
    }
}
