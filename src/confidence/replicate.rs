//! Running a scenario's replications: in parallel with rayon, in replication order, with sequential
//! stopping on a target precision.
//!
//! Invariants: replication `r` always runs seed [`replication_seed`]`(s.seed, r)`; the replications run
//! and the order of the results depend only on the requested count and, with a precision target, on the
//! values of the replications already run (batches grow by a fixed rule, never by the core count), so
//! the outcome is the same on any machine and with any number of threads.

use rayon::prelude::*;

use super::{Estimate, Precision, replication_seed};
pub use crate::metrics::intervals::PrecisionOutcome;
use crate::scenario::Scenario;

/// The scenario of replication `r`: `s` with its seed replaced.
pub fn scenario_of(s: &Scenario, r: u32) -> Scenario {
    let mut out = s.clone();
    out.seed = replication_seed(s.seed, r);
    out
}

/// Runs replications `from..to` of `s` in parallel; results in replication order.
pub fn run_range<T: Send>(
    s: &Scenario,
    from: u32,
    to: u32,
    run: &(dyn Fn(u32, &Scenario) -> Result<T, String> + Sync),
) -> Result<Vec<T>, String> {
    (from..to)
        .into_par_iter()
        .map(|r| run(r, &scenario_of(s, r)))
        .collect()
}

/// The next replication count of a sequential procedure at `n`: half as many again (at least two more),
/// up to `cap`.
pub fn next_count(n: u32, cap: u32) -> u32 {
    (n + (n / 2).max(2)).min(cap)
}

/// Runs `n` replications of `s`, or with `precision`, starting from `n` (at least 2), adds replications
/// until the [`Estimate`] that `decisive` makes of the runs so far meets the target or the cap is
/// reached. Returns the runs in replication order and, with a target, how it ended.
pub fn replicate<T: Send>(
    s: &Scenario,
    n: u32,
    precision: Option<(&Precision, &str)>,
    decisive: &dyn Fn(&[T]) -> Estimate,
    run: &(dyn Fn(u32, &Scenario) -> Result<T, String> + Sync),
) -> Result<(Vec<T>, Option<PrecisionOutcome>), String> {
    let Some((p, metric)) = precision else {
        return Ok((run_range(s, 0, n.max(1), run)?, None));
    };
    let mut count = n.clamp(2, p.max_replications.max(2));
    let mut runs = run_range(s, 0, count, run)?;
    loop {
        let e = decisive(&runs);
        let met = p.met_by(&e);
        if met || count >= p.max_replications {
            let outcome = PrecisionOutcome {
                metric: metric.to_string(),
                target: p.relative,
                achieved: e.relative_half_width(),
                met,
                max_replications: p.max_replications,
            };
            return Ok((runs, Some(outcome)));
        }
        let next = next_count(count, p.max_replications);
        runs.extend(run_range(s, count, next, run)?);
        count = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequential_count_grows_by_half_and_stops_at_the_cap() {
        assert_eq!(next_count(2, 30), 4);
        assert_eq!(next_count(4, 30), 6);
        assert_eq!(next_count(10, 30), 15);
        assert_eq!(next_count(28, 30), 30);
    }
}
