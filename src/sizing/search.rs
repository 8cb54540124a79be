//! The count search: bracketing by doubling from a starting guess, then bisection, each count evaluated
//! once. Returns the smallest feasible count with its predecessor run and found infeasible.

use super::{Evaluation, Tried};

/// The result of a search for one candidate.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// `count` is feasible; `below` is the evaluation of `count - 1` (infeasible), `None` when `count` is 1.
    Found { count: u32, below: Option<u32> },
    /// Even `max` workers miss an SLO.
    Infeasible { max: u32 },
}

/// Finds the smallest feasible count in `1..=max`, starting at `start`, calling `eval` at most once per
/// count (results kept in `tried`).
pub fn smallest<E>(
    start: u32,
    max: u32,
    tried: &mut Tried,
    mut eval: impl FnMut(u32) -> Result<Evaluation, E>,
) -> Result<Outcome, E> {
    let mut feasible = |n: u32, tried: &mut Tried| -> Result<bool, E> {
        if let Some(e) = tried.get(&n) {
            return Ok(e.feasible());
        }
        let e = eval(n)?;
        let ok = e.feasible();
        tried.insert(n, e);
        Ok(ok)
    };
    let start = start.clamp(1, max.max(1));
    // lo: largest count known infeasible (0: none is); hi: smallest known feasible.
    let (mut lo, mut hi);
    if feasible(start, tried)? {
        hi = start;
        lo = 0;
        let mut n = start / 2;
        while n >= 1 {
            if feasible(n, tried)? {
                hi = n;
                n /= 2;
            } else {
                lo = n;
                break;
            }
        }
    } else {
        lo = start;
        loop {
            if lo >= max {
                return Ok(Outcome::Infeasible { max });
            }
            let n = lo.saturating_mul(2).min(max);
            if feasible(n, tried)? {
                hi = n;
                break;
            }
            lo = n;
        }
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if feasible(mid, tried)? {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(Outcome::Found {
        count: hi,
        below: (hi > 1).then_some(hi - 1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sizing::Miss;

    fn ev(n: u32, ok: bool) -> Evaluation {
        Evaluation {
            count: n,
            worst: (!ok).then(|| Miss {
                slo: "p95 TTFT",
                value: 2.0,
                limit: 1.0,
                case: "no fault".into(),
                class: None,
            }),
            ttft_p95_ms: 0.0,
            tpot_p95_ms: 0.0,
            goodput: 1.0,
            output_tokens_per_s: 0.0,
            runs: 1,
        }
    }

    #[test]
    fn finds_the_threshold_from_any_start_and_checks_its_predecessor() {
        for answer in 1..=40u32 {
            for start in [1, 3, 8, 50] {
                let mut tried = Tried::new();
                let out =
                    smallest(start, 64, &mut tried, |n| Ok::<_, ()>(ev(n, n >= answer))).unwrap();
                match out {
                    Outcome::Found { count, below } => {
                        assert_eq!(count, answer, "start {start}");
                        if answer > 1 {
                            assert_eq!(below, Some(answer - 1));
                            assert!(!tried[&(answer - 1)].feasible(), "predecessor was run");
                        }
                    }
                    Outcome::Infeasible { .. } => panic!("answer {answer} exists"),
                }
                // Doubling and bisection: O(log) runs, never a linear scan.
                assert!(tried.len() <= 2 * 7 + 2, "{} runs", tried.len());
            }
        }
    }

    #[test]
    fn reports_infeasible_at_the_cap() {
        let mut tried = Tried::new();
        let out = smallest(2, 16, &mut tried, |n| Ok::<_, ()>(ev(n, false))).unwrap();
        assert!(matches!(out, Outcome::Infeasible { max: 16 }));
        assert!(tried.contains_key(&16));
    }
}
