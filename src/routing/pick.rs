//! Deterministic selection helpers shared by the policies.

use rand::Rng;

use crate::rng::SimRng;
use crate::worker::WorkerSnapshot;

/// The up worker minimising `key`, scanning from `start` (wrapping) so that ties go to the first tied
/// worker at or after `start`.
pub fn min_from<K: PartialOrd>(
    workers: &[WorkerSnapshot],
    start: usize,
    key: impl Fn(&WorkerSnapshot) -> K,
) -> Option<usize> {
    let n = workers.len();
    let mut best: Option<(usize, K)> = None;
    for k in 0..n {
        let i = (start + k) % n;
        let w = &workers[i];
        if !w.up {
            continue;
        }
        let v = key(w);
        if best.as_ref().is_none_or(|(_, b)| v < *b) {
            best = Some((i, v));
        }
    }
    best.map(|(i, _)| i)
}

/// The up worker maximising `score` (compared with a small tolerance); ties drawn uniformly with `rng`.
pub fn max_score_random_tie(
    workers: &[WorkerSnapshot],
    score: impl Fn(&WorkerSnapshot) -> f64,
    rng: &mut SimRng,
) -> Option<usize> {
    const EPS: f64 = 1e-12;
    let mut best = f64::NEG_INFINITY;
    let mut tied: Vec<usize> = Vec::new();
    for w in workers.iter().filter(|w| w.up) {
        let s = score(w);
        if s > best + EPS {
            best = s;
            tied.clear();
            tied.push(w.id);
        } else if (s - best).abs() <= EPS {
            tied.push(w.id);
        }
    }
    match tied.len() {
        0 => None,
        1 => Some(tied[0]),
        n => Some(tied[rng.random_range(0..n)]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::from_u64;
    use crate::routing::test_support::snapshots;

    #[test]
    fn min_from_rotates_ties_and_skips_down() {
        let mut ws = snapshots(&[1, 0, 0, 1]);
        assert_eq!(min_from(&ws, 0, |w| w.outstanding), Some(1));
        assert_eq!(min_from(&ws, 2, |w| w.outstanding), Some(2));
        ws[2].up = false;
        assert_eq!(min_from(&ws, 2, |w| w.outstanding), Some(1));
    }

    #[test]
    fn max_score_draws_among_ties() {
        let ws = snapshots(&[0, 0, 0]);
        let mut rng = from_u64(1);
        let mut seen = [false; 3];
        for _ in 0..100 {
            seen[max_score_random_tie(&ws, |_| 1.0, &mut rng).unwrap()] = true;
        }
        assert_eq!(seen, [true; 3]);
        assert_eq!(
            max_score_random_tie(&ws, |w| w.id as f64, &mut rng),
            Some(2)
        );
    }
}
