//! What serving several models cost a run: swaps, the requests held while one happened, and how many
//! replicas of each model were loaded over time (`summary.json` `models`, `swaps.csv`).
//!
//! Models are named by their catalogue ids (text): this module knows nothing of scenarios or routing.
//! Invariants: every swap counted was begun (its unload started) and its time is in `swap_seconds`
//! even if a crash cut it short; a held request is counted once, however long it waited.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::collector::Latency;
use super::summary::Dist;
use crate::time::{SimDuration, SimTime};

/// One swap, as `swaps.csv` lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SwapRecord {
    /// When the gateway chose the worker to swap, s.
    pub decided_s: f64,
    pub worker: usize,
    pub from: String,
    pub to: String,
    /// From the decision until the worker's last request of the old model finished, s.
    pub drain_s: f64,
    /// Unload, engine start, weight load and warm-up, s.
    pub swap_s: f64,
    /// Whether the worker came up with the new model (a crash can cut a swap short).
    pub completed: bool,
}

/// A step function over time (replicas of one model, or distinct models loaded), integrated.
#[derive(Clone, Debug, Default)]
struct Level {
    now: u32,
    since: SimTime,
    integral_ns: u128,
    min: u32,
    max: u32,
}

impl Level {
    fn start(value: u32) -> Self {
        Level {
            now: value,
            since: SimTime::ZERO,
            integral_ns: 0,
            min: value,
            max: value,
        }
    }

    fn set(&mut self, t: SimTime, value: u32) {
        self.integral_ns += u128::from(t.since(self.since).0) * u128::from(self.now);
        self.since = t;
        self.now = value;
        self.min = self.min.min(value);
        self.max = self.max.max(value);
    }

    fn summary(&self, end: SimTime) -> LevelSummary {
        let mut l = self.clone();
        l.set(end.max(l.since), l.now);
        let mean = if end.0 == 0 {
            f64::from(l.now)
        } else {
            l.integral_ns as f64 / end.0 as f64
        };
        LevelSummary {
            mean: (mean * 1000.0).round() / 1000.0,
            min: l.min,
            max: l.max,
        }
    }
}

/// Time-weighted mean, minimum and maximum of a count over the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LevelSummary {
    pub mean: f64,
    pub min: u32,
    pub max: u32,
}

/// Counters of a run whose requests are placed by model.
#[derive(Clone, Debug, Default)]
pub struct ModelCounters {
    swaps: Vec<SwapRecord>,
    held: u64,
    held_failed: u64,
    held_ttft: Latency,
    rejected_not_served: u64,
    replicas: BTreeMap<String, Level>,
    distinct: Level,
}

impl ModelCounters {
    /// Counters for a fleet that starts with `loaded[w]`, the model of worker `w`.
    pub fn new(loaded: &[&str]) -> Self {
        let mut replicas: BTreeMap<String, Level> = BTreeMap::new();
        for m in loaded {
            let n = loaded.iter().filter(|x| *x == m).count() as u32;
            replicas.insert(m.to_string(), Level::start(n));
        }
        ModelCounters {
            distinct: Level::start(replicas.len() as u32),
            replicas,
            ..Default::default()
        }
    }

    /// At `t`, worker `w`'s model `from` stops being served (its swap to `to` starts).
    pub fn unloaded(&mut self, t: SimTime, from: &str) {
        if let Some(l) = self.replicas.get_mut(from) {
            let n = l.now.saturating_sub(1);
            l.set(t, n);
        }
        self.count_distinct(t);
    }

    /// At `t`, a worker starts serving `model`.
    pub fn loaded(&mut self, t: SimTime, model: &str) {
        let l = self
            .replicas
            .entry(model.to_string())
            .or_insert_with(|| Level::start(0));
        let n = l.now + 1;
        l.set(t, n);
        self.count_distinct(t);
    }

    fn count_distinct(&mut self, t: SimTime) {
        let n = self.replicas.values().filter(|l| l.now > 0).count() as u32;
        self.distinct.set(t, n);
    }

    /// A swap began (or was cut short: `completed` false).
    pub fn on_swap(&mut self, record: SwapRecord) {
        self.swaps.push(record);
    }

    /// A swap that was counted as begun did not complete.
    pub fn on_swap_cut_short(&mut self, worker: usize) {
        if let Some(r) = self.swaps.iter_mut().rev().find(|r| r.worker == worker) {
            r.completed = false;
        }
    }

    /// A request was held at the gateway for its model to be loaded.
    pub fn on_held(&mut self) {
        self.held += 1;
    }

    /// A request that had been held finished: with its TTFT if it completed.
    pub fn on_held_finished(&mut self, ttft: Option<SimDuration>) {
        match ttft {
            Some(d) => self.held_ttft.record(d.0),
            None => self.held_failed += 1,
        }
    }

    /// A request asked for a model no worker may serve.
    pub fn on_not_served(&mut self) {
        self.rejected_not_served += 1;
    }

    /// Every swap, in the order they began.
    pub fn swap_log(&self) -> &[SwapRecord] {
        &self.swaps
    }

    /// The summary at the end of the run (`end`).
    pub fn summary(&self, end: SimTime) -> ModelsSummary {
        let round = |x: f64| (x * 1e6).round() / 1e6 + 0.0; // + 0.0: an empty sum is -0.0
        ModelsSummary {
            swaps: self.swaps.len() as u64,
            swaps_cut_short: self.swaps.iter().filter(|r| !r.completed).count() as u64,
            swap_seconds: round(self.swaps.iter().map(|r| r.swap_s).sum()),
            drain_seconds: round(self.swaps.iter().map(|r| r.drain_s).sum()),
            requests_held: self.held,
            held_failed: self.held_failed,
            held_ttft_ms: Dist::of(&self.held_ttft),
            rejected_model_not_served: self.rejected_not_served,
            replicas: self
                .replicas
                .iter()
                .map(|(m, l)| (m.clone(), l.summary(end)))
                .collect(),
            models_loaded: self.distinct.summary(end),
        }
    }
}

/// `summary.json` `models`: present when requests are placed by model.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ModelsSummary {
    /// Swaps begun.
    pub swaps: u64,
    /// Of those, cut short by a fault before the new model served.
    pub swaps_cut_short: u64,
    /// Worker time spent unloading, starting, loading and warming up, summed over swaps, s.
    pub swap_seconds: f64,
    /// Worker time spent draining the old model before a swap, summed, s.
    pub drain_seconds: f64,
    /// Requests held at the gateway until a worker had their model loaded.
    pub requests_held: u64,
    /// Of those, the ones that did not complete.
    pub held_failed: u64,
    /// TTFT of the held requests that completed (the swap wait included).
    pub held_ttft_ms: Dist,
    /// Requests for a model no worker may serve (also in `requests.rejected_by_reason`).
    pub rejected_model_not_served: u64,
    /// Workers serving each model over the run: time-weighted mean, minimum, maximum.
    pub replicas: BTreeMap<String, LevelSummary>,
    /// Distinct models served by at least one worker, over the run.
    pub models_loaded: LevelSummary,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicas_are_integrated_over_time() {
        let mut c = ModelCounters::new(&["a", "a", "b"]);
        let s = |x: u64| SimTime(x * 1_000_000_000);
        c.unloaded(s(10), "a"); // a: 2 for 10 s, then 1
        c.loaded(s(20), "c"); // c: 0 for 20 s, then 1
        let m = c.summary(s(40));
        assert_eq!(m.replicas["a"].mean, (2.0 * 10.0 + 30.0) / 40.0);
        assert_eq!((m.replicas["a"].min, m.replicas["a"].max), (1, 2));
        assert_eq!(m.replicas["c"].mean, 0.5);
        assert_eq!(m.replicas["b"].mean, 1.0);
        // Distinct models: 2 until 20 s, then 3.
        assert_eq!(m.models_loaded.mean, (2.0 * 20.0 + 3.0 * 20.0) / 40.0);
        assert_eq!((m.models_loaded.min, m.models_loaded.max), (2, 3));
    }
}
