//! `--profile`: where a run's wall time goes, by phase.
//!
//! The engine brackets each piece of work with [`Profile::start`] / [`Profile::stop`]; when profiling
//! is off, `start` returns `None` and nothing is timed (one branch per bracket). Phases never nest, so
//! they add up; what is left of the simulation's time is the event loop itself (the event queue and
//! the glue between phases).

use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// A phase of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Drawing arrivals and follow-up turns from the workload (or reading a trace).
    Workload = 0,
    /// The gateway and the router: snapshots of the fleet, session homes, the routing decision.
    Routing = 1,
    /// Workers forming, starting and finishing steps (including their KV block allocation, the
    /// decode fast path's bulk steps, and settling a worker before an event touches it).
    WorkerSteps = 2,
    /// KV bookkeeping outside the workers' steps: hashing prompts into blocks, finding what other
    /// workers hold, the shared store, KV events to the router.
    KvBookkeeping = 3,
    /// Recording finished requests in the metrics.
    Metrics = 4,
}

const PHASES: [(Phase, &str); 5] = [
    (Phase::Workload, "workload generation"),
    (Phase::Routing, "routing"),
    (Phase::WorkerSteps, "worker steps"),
    (Phase::KvBookkeeping, "KV bookkeeping"),
    (Phase::Metrics, "metrics"),
];

/// Wall time per phase.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    enabled: bool,
    spent: [Duration; 5],
}

impl Profile {
    /// A profile that times (`enabled`) or does nothing.
    pub fn new(enabled: bool) -> Self {
        Profile {
            enabled,
            spent: [Duration::ZERO; 5],
        }
    }

    /// Whether phases are being timed.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The start of a bracket: the current instant if profiling.
    #[inline]
    pub fn start(&self) -> Option<Instant> {
        self.enabled.then(Instant::now)
    }

    /// The end of a bracket opened by [`Profile::start`]: its time goes to `phase`.
    #[inline]
    pub fn stop(&mut self, phase: Phase, started: Option<Instant>) {
        if let Some(t) = started {
            self.spent[phase as usize] += t.elapsed();
        }
    }

    /// Time spent in `phase`.
    pub fn spent(&self, phase: Phase) -> Duration {
        self.spent[phase as usize]
    }

    /// The breakdown as a table: `setup` (reading and building the scenario), the phases, the event
    /// loop (what `simulated` leaves), output (what `total` leaves after the simulation), and events
    /// per second of simulation.
    pub fn render(
        &self,
        setup: Duration,
        simulated: Duration,
        total: Duration,
        events: u64,
    ) -> String {
        let secs = |d: Duration| d.as_secs_f64();
        let total_s = secs(total).max(1e-9);
        let mut rows: Vec<(&str, f64)> = vec![("setup (scenario, fleet)", secs(setup))];
        let mut phases = 0.0;
        for (phase, name) in PHASES {
            let s = secs(self.spent(phase));
            phases += s;
            rows.push((name, s));
        }
        rows.push((
            "event loop (queue, glue)",
            (secs(simulated) - phases).max(0.0),
        ));
        rows.push((
            "output (summary, files)",
            (secs(total) - secs(setup) - secs(simulated)).max(0.0),
        ));
        let mut out = String::from("\nprofile (wall time by phase)\n");
        for (name, s) in rows {
            let _ = writeln!(
                out,
                "  {name:<26} {s:>9.3} s  {:>5.1}%",
                100.0 * s / total_s
            );
        }
        let _ = writeln!(out, "  {:<26} {:>9.3} s", "total", secs(total));
        let _ = writeln!(
            out,
            "  {events} events, {:.0} events/s of simulation",
            events as f64 / secs(simulated).max(1e-9)
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disabled_profile_times_nothing() {
        let mut p = Profile::new(false);
        let t = p.start();
        assert!(t.is_none());
        p.stop(Phase::Routing, t);
        assert_eq!(p.spent(Phase::Routing), Duration::ZERO);
    }

    #[test]
    fn render_lists_every_phase_and_the_rest() {
        let mut p = Profile::new(true);
        p.spent[Phase::Routing as usize] = Duration::from_millis(300);
        p.spent[Phase::WorkerSteps as usize] = Duration::from_millis(500);
        // setup 0.1 s, simulation 1.0 s (0.8 s in phases -> 0.2 s event loop), output 0.1 s.
        let text = p.render(
            Duration::from_millis(100),
            Duration::from_secs(1),
            Duration::from_millis(1200),
            2_000,
        );
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        for row in [
            "routing 0.300 s 25.0%",
            "worker steps 0.500 s 41.7%",
            "event loop (queue, glue) 0.200 s 16.7%",
            "output (summary, files) 0.100 s 8.3%",
            "total 1.200 s",
            "2000 events, 2000 events/s of simulation",
        ] {
            assert!(flat.contains(row), "{row:?} missing from {text}");
        }
    }
}
