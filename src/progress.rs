//! Progress bars on stderr for the long commands (`run`, `compare`, `sweep`, `size`), one place for
//! their look and for when they show.
//!
//! Invariant: nothing is drawn when stderr is not a terminal (CI logs, pipes, files) or with `--quiet`;
//! the bars never touch stdout, so what a command prints is the same with or without them.

use std::io::IsTerminal;
use std::time::Instant;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::engine::RunProgress;

/// Scale of a simulation bar's position: the arrival window simulated, in thousandths.
const RUN_SCALE: f64 = 1000.0;

/// The bars of one command: drawn together on stderr, or hidden.
pub struct Bars {
    multi: MultiProgress,
}

impl Bars {
    /// Bars on stderr, hidden with `quiet` or when stderr is not a terminal.
    pub fn new(quiet: bool) -> Self {
        Self::to(if quiet || !std::io::stderr().is_terminal() {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        })
    }

    fn to(target: ProgressDrawTarget) -> Self {
        Bars {
            multi: MultiProgress::with_draw_target(target),
        }
    }

    /// A bar for one simulation, labelled `label` (a policy in `compare`; empty for `run`).
    pub fn simulation(&self, label: &str) -> RunBar {
        let bar = self.multi.add(ProgressBar::new(RUN_SCALE as u64));
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix:>20} [{bar:30}] {percent:>3}% of arrivals | {msg}",
            )
            .expect("valid template"),
        );
        bar.set_prefix(label.to_string());
        bar.set_message("starting");
        RunBar {
            bar,
            started: Instant::now(),
        }
    }

    /// A bar counting `total` units of `what` (sweep points, sizing candidates).
    pub fn counter(&self, what: &str, total: u64) -> ProgressBar {
        let bar = self.multi.add(ProgressBar::new(total));
        bar.set_style(
            ProgressStyle::with_template(&format!(
                "[{{bar:30}}] {{pos}}/{{len}} {what} | {{msg}} | {{elapsed}}, ETA {{eta}}"
            ))
            .expect("valid template"),
        );
        bar
    }
}

/// One simulation's bar: the share of its arrival window simulated, simulated time, requests done and
/// events per wall-clock second.
pub struct RunBar {
    bar: ProgressBar,
    started: Instant,
}

impl RunBar {
    /// Shows `p`.
    pub fn update(&self, p: &RunProgress) {
        self.bar.set_position((p.fraction * RUN_SCALE) as u64);
        self.bar
            .set_message(message(p, self.started.elapsed().as_secs_f64()));
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// The text after a simulation's bar. The ETA extrapolates the wall time so far over the share of the
/// arrival window simulated (indicatif's own estimate, fed a few coarse updates, read 0 s mid-run).
fn message(p: &RunProgress, wall_s: f64) -> String {
    let eta = if p.fraction > 0.0 {
        format!("{:.0} s", wall_s * (1.0 - p.fraction).max(0.0) / p.fraction)
    } else {
        "–".to_string()
    };
    format!(
        "{:.0} s simulated, {}/{} requests done, {:.0}k events/s | ETA {eta}",
        p.simulated_s,
        p.requests_done,
        p.requests_arrived,
        p.events as f64 / wall_s.max(1e-3) / 1e3
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_gives_simulated_time_requests_and_event_rate() {
        let p = RunProgress {
            fraction: 0.5,
            simulated_s: 30.4,
            requests_done: 90,
            requests_arrived: 100,
            events: 200_000,
        };
        // 200,000 events in 2 s: 100k events/s; half the window in 2 s leaves 2 s.
        assert_eq!(
            message(&p, 2.0),
            "30 s simulated, 90/100 requests done, 100k events/s | ETA 2 s"
        );
        let start = RunProgress { fraction: 0.0, ..p };
        assert!(message(&start, 0.1).ends_with("ETA –"));
    }
}
