//! Per-class metrics of a traffic mix: each class's requests, latencies and goodput under its own SLO.
//!
//! Invariants: every finished request is counted in exactly one class (its record's `class`), so the
//! classes' `requests` add up to the run's arrivals once the run has drained; a class's goodput is its
//! good requests over its requests, judged against the class's own SLO. Counts (`requests`,
//! `completed`, `failed`, `rejected`) are over the whole run; latencies, goodput and throughput over
//! the steady state (the requests that arrived after the warm-up, [`super::warmup`]).

use serde::{Deserialize, Serialize};

use super::collector::Latency;
use super::record::{Outcome, RequestRecord};
use super::steady::Obs;
use super::summary::{Dist, round};
use crate::metrics::Slo;

/// Whole-run counts of one class.
#[derive(Debug, Clone)]
pub struct ClassStats {
    pub name: String,
    pub priority: i32,
    pub slo: Slo,
    /// Requests that finished in any outcome (every arrived request finishes once).
    pub requests: u64,
    pub completed: u64,
    pub failed: u64,
    pub rejected: u64,
}

impl ClassStats {
    /// An empty class.
    pub fn new(name: String, priority: i32, slo: Slo) -> Self {
        ClassStats {
            name,
            priority,
            slo,
            requests: 0,
            completed: 0,
            failed: 0,
            rejected: 0,
        }
    }

    /// Counts a finished request of this class.
    pub fn on_finished(&mut self, r: &RequestRecord) {
        self.requests += 1;
        match r.outcome {
            Outcome::Failed => self.failed += 1,
            Outcome::Rejected => self.rejected += 1,
            Outcome::Completed => self.completed += 1,
        }
    }
}

/// Steady-state totals of one class: its requests that arrived after the warm-up
/// ([`super::steady`]).
#[derive(Debug, Clone)]
pub struct ClassSteady {
    pub slo: Slo,
    /// Steady-state requests of the class that finished in any outcome.
    pub requests: u64,
    pub good: u64,
    pub output_tokens: u64,
    pub ttft: Latency,
    pub tpot: Latency,
    pub e2e: Latency,
}

impl ClassSteady {
    /// Nothing folded yet; goodput judged against the class's `slo`.
    pub fn new(slo: Slo) -> Self {
        ClassSteady {
            slo,
            requests: 0,
            good: 0,
            output_tokens: 0,
            ttft: Latency::default(),
            tpot: Latency::default(),
            e2e: Latency::default(),
        }
    }

    /// Folds in a finished steady-state request of this class.
    pub fn fold(&mut self, o: &Obs) {
        self.requests += 1;
        let Some(first) = o.first_token() else {
            return;
        };
        self.output_tokens += u64::from(o.output_tokens);
        self.ttft.record(first.since(o.arrival).0);
        self.e2e.record(o.finished.since(o.arrival).0);
        if let Some(t) = o.tpot() {
            self.tpot.record(t);
        }
        self.good += u64::from(o.good(&self.slo));
    }
}

/// One class in `summary.json` (`classes`, present only for a traffic mix).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClassSummary {
    pub class: String,
    /// Scheduling priority (lower is served first).
    pub priority: i32,
    pub requests: u64,
    pub completed: u64,
    pub failed: u64,
    pub rejected: u64,
    pub ttft_ms: Dist,
    pub tpot_ms: Dist,
    /// Latencies of the steady-state requests.
    pub e2e_ms: Dist,
    pub slo_ttft_ms: Option<f64>,
    pub slo_tpot_ms: Option<f64>,
    /// Completed requests of the class meeting every SLO of the class, over the class's requests
    /// (steady state).
    pub goodput: f64,
    /// Output tokens of the class's steady-state requests over the steady span.
    pub output_tokens_per_s: f64,
}

impl ClassSummary {
    /// The summary of class `c`, whose steady-state part `s` spans `steady_s` seconds.
    pub fn of(c: &ClassStats, s: &ClassSteady, steady_s: f64) -> Self {
        let ratio = |a: f64, b: f64| if b > 0.0 { round(a / b, 6) } else { 0.0 };
        ClassSummary {
            class: c.name.clone(),
            priority: c.priority,
            requests: c.requests,
            completed: c.completed,
            failed: c.failed,
            rejected: c.rejected,
            ttft_ms: Dist::of(&s.ttft),
            tpot_ms: Dist::of(&s.tpot),
            e2e_ms: Dist::of(&s.e2e),
            slo_ttft_ms: c.slo.ttft.map(|d| d.as_millis_f64()),
            slo_tpot_ms: c.slo.tpot.map(|d| d.as_millis_f64()),
            goodput: ratio(s.good as f64, s.requests as f64),
            output_tokens_per_s: ratio(s.output_tokens as f64, steady_s),
        }
    }
}

/// The `## Classes` table of `summary.md`.
pub fn markdown(classes: &[ClassSummary]) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let _ = writeln!(o, "\n## Classes\n");
    let _ = writeln!(
        o,
        "| class | priority | requests | completed | p50 TTFT (ms) | p95 TTFT (ms) | p95 TPOT (ms) | SLO TTFT / TPOT (ms) | goodput |"
    );
    let _ = writeln!(o, "|---|---:|---:|---:|---:|---:|---:|---|---:|");
    let slo = |v: Option<f64>| v.map_or("–".to_string(), |x| format!("{x:.0}"));
    for c in classes {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {} / {} | {:.1}% |",
            c.class,
            c.priority,
            c.requests,
            c.completed,
            c.ttft_ms.cell(c.ttft_ms.p50),
            c.ttft_ms.cell(c.ttft_ms.p95),
            c.tpot_ms.cell(c.tpot_ms.p95),
            slo(c.slo_ttft_ms),
            slo(c.slo_tpot_ms),
            c.goodput * 100.0
        );
    }
    o
}
