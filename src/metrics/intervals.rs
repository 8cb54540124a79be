//! Replications' headline metrics with their confidence intervals (`summary.json` `replications`).
//!
//! Invariant: each metric's estimate uses only the replications where the statistic exists (`n` says
//! how many); the first seed is the scenario's own.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Summary;
use crate::confidence::{Estimate, LEVEL};

/// How a sequential precision target ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PrecisionOutcome {
    /// The decisive metric.
    pub metric: String,
    /// Target relative half-width (0.05 for 5%).
    pub target: f64,
    /// Relative half-width reached (NaN, `null`, when no interval could be formed).
    #[serde(deserialize_with = "crate::confidence::nan_if_null")]
    pub achieved: f64,
    /// Whether `achieved <= target`.
    pub met: bool,
    /// The cap on replications.
    pub max_replications: u32,
}

impl PrecisionOutcome {
    /// `Precision target: ttft_p95_ms within ±5.0%{scope} — met (±3.1% after 8 replications, cap 30).`
    pub fn line(&self, n: u32, scope: &str) -> String {
        format!(
            "Precision target: {} within ±{:.1}%{scope} — {} (±{:.1}% after {n} replications, cap {}).",
            self.metric,
            self.target * 100.0,
            if self.met { "met" } else { "NOT met" },
            self.achieved * 100.0,
            self.max_replications
        )
    }
}

/// What replications add to `summary.json` (`replications`): every headline metric's mean and interval.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Intervals {
    /// Replications run.
    pub n: u32,
    /// Confidence level of every interval.
    pub level: f64,
    /// Seed of each replication, in order (the first is the scenario's).
    pub seeds: Vec<u64>,
    /// With `--precision`: how the sequential procedure ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precision: Option<PrecisionOutcome>,
    /// Headline metric → estimate over the replications (`n` counts those where it exists).
    pub metrics: BTreeMap<String, Estimate>,
}

impl Intervals {
    /// The intervals of runs' summaries, in replication order.
    pub fn of(summaries: &[&Summary], precision: Option<PrecisionOutcome>) -> Intervals {
        let values: Vec<BTreeMap<&'static str, f64>> = summaries
            .iter()
            .map(|s| super::headline::values(s))
            .collect();
        // A fleet metric no replication has (no models, adapters or autoscaler) is left out.
        let metrics = super::headline::METRICS
            .iter()
            .map(|(k, _)| {
                let v: Vec<f64> = values.iter().map(|m| m[k]).collect();
                (*k, Estimate::of(&v))
            })
            .filter(|(k, e)| super::headline::shown(k, e.n > 0))
            .map(|(k, e)| (k.to_string(), e))
            .collect();
        Intervals {
            n: summaries.len() as u32,
            level: LEVEL,
            seeds: summaries.iter().map(|s| s.seed).collect(),
            precision,
            metrics,
        }
    }

    /// The estimate of headline metric `name` over summaries.
    pub fn metric(summaries: &[&Summary], name: &str) -> Estimate {
        let v: Vec<f64> = summaries
            .iter()
            .map(|s| {
                super::headline::values(s)
                    .get(name)
                    .copied()
                    .unwrap_or(f64::NAN)
            })
            .collect();
        Estimate::of(&v)
    }

    /// A Markdown section: one row per headline metric with a value, `mean ± half-width`.
    pub fn to_markdown(&self) -> String {
        use std::fmt::Write;
        let mut o = String::new();
        let _ = writeln!(
            o,
            "## Over {} replications ({:.0}% confidence intervals)\n",
            self.n,
            self.level * 100.0
        );
        if let Some(p) = &self.precision {
            let _ = writeln!(o, "{}\n", p.line(self.n, ""));
        }
        o.push_str("| metric | mean ± half-width | n |\n|---|---:|---:|\n");
        for (k, _) in super::headline::METRICS {
            let Some(e) = self.metrics.get(k) else {
                continue;
            };
            if e.n == 0 {
                continue;
            }
            let decimals = if e.mean.abs() >= 100.0 { 1 } else { 3 };
            let _ = writeln!(o, "| {k} | {} | {} |", e.text(decimals), e.n);
        }
        o
    }
}
