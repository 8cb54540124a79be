//! The no-fault twin: a run with faults is judged against the same scenario and seeds without them.
//!
//! Every random stream is named and seeded from the scenario's seed, and fault streams are their own,
//! so the twin draws the same arrivals, sizes and think times as the faulted run: the two runs are the
//! same, event for event, up to the first fault, and every difference after it is the faults' doing
//! (common random numbers). [`run_judged`] runs both at once and replaces the faulted run's recovery
//! entries (judged against the pre-fault baseline) with entries judged against the twin.
//!
//! Warm-up: the recovery analysis reads every request's timeline and stays whole-run. The twin's
//! headline numbers (`summary.twin`) are steady-state like the faulted run's, its warm-up detected
//! over the same span (up to the first fault, where the two runs are still one); the two detections
//! can still differ by a slot, through requests that arrived before the fault and finished after it,
//! so the twin reports its own `warmup_s`.

use super::{RunOutput, RunProgress, Simulation};
use crate::metrics::recovery;
use crate::metrics::summary::TwinSummary;
use crate::scenario::Scenario;

/// The twin of `s`: `s` without its faults; `None` when it has none (a fault-free run is its own twin).
pub fn twin_of(s: &Scenario) -> Option<Scenario> {
    if s.faults.is_empty() {
        return None;
    }
    let mut twin = s.clone();
    twin.faults.clear();
    Some(twin)
}

/// Runs `s` (made ready by `prepare`, e.g. to stream its requests) and, when `with_twin` and `s` has
/// faults, its twin beside it; the summary's recovery entries are then judged against the twin and its
/// headline numbers are kept in `summary.twin`.
pub fn run_judged(
    s: &Scenario,
    with_twin: bool,
    prepare: impl FnOnce(&mut Simulation) -> Result<(), String>,
    progress: &mut (dyn FnMut(&RunProgress) + Send),
) -> Result<RunOutput, String> {
    let mut sim = Simulation::from_scenario(s)?;
    prepare(&mut sim)?;
    let twin = with_twin.then(|| twin_of(s)).flatten();
    let from = sim.timelines_from().unwrap_or(crate::time::SimTime::ZERO);
    let horizon = sim.warmup_horizon();
    let (out, twin) = rayon::join(
        || sim.try_run(progress),
        || {
            twin.map(|t| {
                let mut sim = Simulation::from_scenario(&t)?;
                sim.keep_timelines_from(from);
                sim.limit_warmup_horizon(horizon);
                sim.try_run(&mut |_| {})
            })
        },
    );
    let mut out = out?;
    if let Some(twin) = twin {
        judge(&mut out, &twin?);
    }
    Ok(out)
}

/// Judges `out`'s faults against `twin`, the same scenario run without them.
pub fn judge(out: &mut RunOutput, twin: &RunOutput) {
    let none = recovery::Timelines::default();
    let requests = twin.collector.timelines.as_ref().unwrap_or(&none);
    out.summary.recovery = recovery::analyse(&out.collector.recovery_view(), Some(requests));
    out.summary.twin = Some(TwinSummary::of(&twin.summary));
}
