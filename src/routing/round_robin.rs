//! `round_robin`: each request to the next worker that is up, cycling in id order.
//!
//! A fleet serving several models keeps one rotation per model, as each model's pool has its own
//! (one Service or InferencePool per model): a request sees only its model's workers (the others are
//! masked as down), and a cursor shared across models would hand every request of a small model to
//! the first of its workers after the big model's.

use super::{Decision, RouteInput, RoutingPolicy};
use crate::hardware::ModelId;
use crate::rng::SimRng;

/// Cycles through the workers, skipping those believed down; one cursor per requested model.
#[derive(Debug, Default)]
pub struct RoundRobin {
    /// (model asked for, next worker to try), in first-seen order: one entry per model.
    next: Vec<(Option<ModelId>, usize)>,
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
        let model = input.request.model;
        let k = match self.next.iter().position(|(m, _)| *m == model) {
            Some(k) => k,
            None => {
                self.next.push((model, 0));
                self.next.len() - 1
            }
        };
        let next = &mut self.next[k].1;
        (0..n)
            .map(|k| (*next + k) % n)
            .find(|&i| workers[i].up)
            .map(|i| {
                *next = (i + 1) % n;
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

    /// Two models on workers 0–1 and 2–3, requests alternating: each model's requests alternate over
    /// its own two workers (a shared cursor sent every request of the second model to worker 2).
    #[test]
    fn each_model_has_its_own_rotation() {
        use crate::hardware::ModelId;
        let mut p = RoundRobin::default();
        let all = snapshots(&[0, 0, 0, 0]);
        let mut rng = from_u64(1);
        let picks: Vec<_> = (0..8)
            .map(|i| {
                let (model, up) = if i % 2 == 0 {
                    (ModelId::Llama31_8b, [true, true, false, false])
                } else {
                    (ModelId::Qwen3_8b, [false, false, true, true])
                };
                let mut ws = all.clone();
                for (w, u) in ws.iter_mut().zip(up) {
                    w.up = u;
                }
                let mut r = request(i);
                r.model = Some(model);
                route(&mut p, &r, &ws, &mut rng).unwrap().worker
            })
            .collect();
        assert_eq!(picks, [0, 2, 1, 3, 0, 2, 1, 3]);
    }
}
