//! The count search: bracketing by doubling from a starting guess, then bisection, each count judged
//! once (the caller caches). Returns the smallest feasible count with its predecessor run and found
//! infeasible.

/// The result of a search for one candidate.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// `count` is feasible; `count - 1` was judged infeasible (or is the lower bound, itself infeasible,
    /// or 0).
    Found { count: u32 },
    /// Even `max` workers miss an SLO.
    Infeasible { max: u32 },
}

/// Finds the smallest feasible count in `above + 1..=max`, starting at `start`, where `above` is 0 or a
/// count known infeasible, calling `feasible` (which should cache) on the counts it needs.
pub fn smallest<E>(
    above: u32,
    start: u32,
    max: u32,
    mut feasible: impl FnMut(u32) -> Result<bool, E>,
) -> Result<Outcome, E> {
    if above >= max {
        return Ok(Outcome::Infeasible { max });
    }
    let start = start.clamp(above + 1, max);
    // lo: largest count known infeasible (`above`: none above it is); hi: smallest known feasible.
    let (mut lo, mut hi);
    if feasible(start)? {
        hi = start;
        lo = above;
        let mut n = start / 2;
        while n > above {
            if feasible(n)? {
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
            if feasible(n)? {
                hi = n;
                break;
            }
            lo = n;
        }
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if feasible(mid)? {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(Outcome::Found { count: hi })
}

/// The smallest count from which every larger count judged passes, confirmed one above: searches with
/// [`smallest`], then judges `count + 1`; if that fails, pass/fail is not monotone there and the search
/// goes on above it. Returns the outcome and whether non-monotonicity was seen (a failure above a pass,
/// or a pass below the answer).
pub fn smallest_stable<E>(
    start: u32,
    max: u32,
    mut feasible: impl FnMut(u32) -> Result<bool, E>,
    passed_below: impl Fn(u32) -> bool,
) -> Result<(Outcome, bool), E> {
    let mut above = 0;
    let mut start = start;
    let mut non_monotone = false;
    loop {
        match smallest(above, start, max, &mut feasible)? {
            Outcome::Infeasible { max } => return Ok((Outcome::Infeasible { max }, non_monotone)),
            Outcome::Found { count } => {
                if count >= max || feasible(count + 1)? {
                    let non_monotone = non_monotone || passed_below(count);
                    return Ok((Outcome::Found { count }, non_monotone));
                }
                non_monotone = true;
                above = count + 1;
                start = count + 2;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn finds_the_threshold_from_any_start_and_checks_its_predecessor() {
        for answer in 1..=40u32 {
            for start in [1, 3, 8, 50] {
                let mut tried = BTreeMap::new();
                let out = smallest(0, start, 64, |n| {
                    tried.insert(n, n >= answer);
                    Ok::<_, ()>(n >= answer)
                })
                .unwrap();
                assert_eq!(out, Outcome::Found { count: answer }, "start {start}");
                if answer > 1 {
                    assert_eq!(
                        tried.get(&(answer - 1)),
                        Some(&false),
                        "predecessor was run"
                    );
                }
                // Doubling and bisection: O(log) runs, never a linear scan.
                assert!(tried.len() <= 2 * 7 + 2, "{} runs", tried.len());
            }
        }
    }

    #[test]
    fn reports_infeasible_at_the_cap() {
        let mut tried = Vec::new();
        let out = smallest(0, 2, 16, |n| {
            tried.push(n);
            Ok::<_, ()>(false)
        })
        .unwrap();
        assert_eq!(out, Outcome::Infeasible { max: 16 });
        assert!(tried.contains(&16));
    }

    #[test]
    fn a_lower_bound_is_never_searched_below() {
        let out = smallest(5, 2, 64, |n| {
            assert!(n > 5, "judged {n}");
            Ok::<_, ()>(n >= 3)
        })
        .unwrap();
        assert_eq!(out, Outcome::Found { count: 6 });
    }

    #[test]
    fn a_failure_above_the_first_pass_moves_the_answer_above_it() {
        // F P F F F F P P P ... from 3 (the rack case): 4 passes alone, every count from 9 on.
        let pattern = |n: u32| n == 4 || n >= 9;
        for start in [1, 3, 4, 6, 12] {
            let (out, non_monotone) =
                smallest_stable(start, 64, |n| Ok::<_, ()>(pattern(n)), |_| false).unwrap();
            assert_eq!(out, Outcome::Found { count: 9 }, "start {start}");
            // A search that meets the lone pass at 4 (from 1 or 4) says so; from 3 it brackets 6..12
            // and never sees it.
            if start == 1 || start == 4 {
                assert!(non_monotone, "start {start}");
            }
        }
        // Monotone: the answer is confirmed one above, and nothing is flagged.
        let (out, non_monotone) =
            smallest_stable(3, 64, |n| Ok::<_, ()>(n >= 7), |_| false).unwrap();
        assert_eq!((out, non_monotone), (Outcome::Found { count: 7 }, false));
    }
}
