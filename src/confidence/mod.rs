//! Answers with their spread: independent replications, Student-t confidence intervals, paired
//! differences on common random numbers, and sequential stopping on a target half-width (Law & Kelton,
//! *Simulation Modeling and Analysis*, 5th ed., §9.4 and §10.2).
//!
//! ```text
//! scenario seed ─► replication_seed(seed, r) ─► run r (rayon) ─► headline metrics per run
//!               ─► Estimate::of(values)  : mean ± t(0.975, n−1)·s/√n
//!               ─► Estimate::paired(a, b): the same on the per-replication differences b − a
//! ```
//!
//! Invariants:
//! - Replication 0 runs the scenario's own seed, so one replication is exactly the plain run; the seed of
//!   replication `r` depends only on the base seed and `r` (never on the thread count or on which other
//!   replications run), so the same `N` gives the same bytes on any machine.
//! - Two runs with the same replication index share every random stream that their scenarios share
//!   (common random numbers): a policy comparison is paired replication by replication.
//! - An estimate of fewer than two finite values has no interval (`half_width` NaN): it is shown as a
//!   point value, never as a zero-width interval.

pub mod replicate;

use serde::{Deserialize, Deserializer, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::rng::{fnv1a, splitmix64};

/// The confidence level of every interval fleetsim reports.
pub const LEVEL: f64 = 0.95;

/// The seed of replication `r` (0-based) of a scenario whose seed is `base`: `base` itself for `r = 0`,
/// then a seed drawn from the named stream `replication/r`, so replications are independent runs and
/// the same `r` is the same run wherever it executes.
pub fn replication_seed(base: u64, r: u32) -> u64 {
    if r == 0 {
        base
    } else {
        splitmix64(base ^ fnv1a(format!("replication/{r}").as_bytes()))
    }
}

/// The two-sided Student-t critical value for `level` with `df` degrees of freedom: `t(1 − α/2, df)`.
pub fn t_critical(level: f64, df: u32) -> f64 {
    if df == 0 {
        return f64::NAN;
    }
    let t = StudentsT::new(0.0, 1.0, f64::from(df)).expect("positive degrees of freedom");
    t.inverse_cdf(1.0 - (1.0 - level) / 2.0)
}

/// A sample mean with its confidence interval over independent replications.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// Finite values the estimate is built from (replications whose statistic existed).
    pub n: u32,
    #[serde(deserialize_with = "nan_if_null")]
    pub mean: f64,
    /// Sample standard deviation (n − 1 in the denominator); NaN for fewer than two values.
    #[serde(deserialize_with = "nan_if_null")]
    pub sd: f64,
    /// Half-width of the [`LEVEL`] confidence interval: `t(0.975, n − 1) · sd / √n`; NaN for fewer
    /// than two values.
    #[serde(deserialize_with = "nan_if_null")]
    pub half_width: f64,
}

/// Reads a float that JSON wrote as `null` (NaN, a statistic without a value) back as NaN.
pub fn nan_if_null<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Option::<f64>::deserialize(d).map(|v| v.unwrap_or(f64::NAN))
}

impl Estimate {
    /// The estimate of the mean of `values`; NaN values (a statistic of an empty set in that
    /// replication) are left out and not counted in `n`.
    pub fn of(values: &[f64]) -> Estimate {
        let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        let n = finite.len();
        if n == 0 {
            return Estimate {
                n: 0,
                mean: f64::NAN,
                sd: f64::NAN,
                half_width: f64::NAN,
            };
        }
        let mean = finite.iter().sum::<f64>() / n as f64;
        if n < 2 {
            return Estimate {
                n: 1,
                mean,
                sd: f64::NAN,
                half_width: f64::NAN,
            };
        }
        let var = finite.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let sd = var.sqrt();
        Estimate {
            n: n as u32,
            mean,
            sd,
            half_width: t_critical(LEVEL, n as u32 - 1) * sd / (n as f64).sqrt(),
        }
    }

    /// The paired estimate of `other − base`, replication by replication (common random numbers make
    /// the pairs positively correlated, so the interval is narrower than that of two independent
    /// means). Pairs where either value is NaN are left out.
    pub fn paired(base: &[f64], other: &[f64]) -> Estimate {
        assert_eq!(base.len(), other.len(), "paired samples of equal length");
        let d: Vec<f64> = base
            .iter()
            .zip(other)
            .map(|(a, b)| {
                if a.is_finite() && b.is_finite() {
                    b - a
                } else {
                    f64::NAN
                }
            })
            .collect();
        Estimate::of(&d)
    }

    /// Lower and upper bounds of the interval; the mean twice when there is no interval.
    pub fn bounds(&self) -> (f64, f64) {
        if self.half_width.is_finite() {
            (self.mean - self.half_width, self.mean + self.half_width)
        } else {
            (self.mean, self.mean)
        }
    }

    /// Whether the interval excludes `value` (a difference from 0 is *significant*); false without an
    /// interval.
    pub fn excludes(&self, value: f64) -> bool {
        self.half_width.is_finite()
            && (value < self.mean - self.half_width || value > self.mean + self.half_width)
    }

    /// The half-width relative to the mean's magnitude; NaN without an interval, infinite for a zero
    /// mean with a spread.
    pub fn relative_half_width(&self) -> f64 {
        if !self.half_width.is_finite() {
            return f64::NAN;
        }
        if self.half_width == 0.0 {
            return 0.0;
        }
        self.half_width / self.mean.abs()
    }

    /// `12.3 ± 0.4` with `decimals` digits; `12.3` without an interval; `–` without a value.
    pub fn text(&self, decimals: usize) -> String {
        if !self.mean.is_finite() {
            "–".into()
        } else if self.half_width.is_finite() {
            format!("{:.decimals$} ± {:.decimals$}", self.mean, self.half_width)
        } else {
            format!("{:.decimals$}", self.mean)
        }
    }
}

/// A target on the relative half-width of a decisive metric (`--precision 5%`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Precision {
    /// Largest accepted half-width over the mean's magnitude (0.05 for 5%).
    pub relative: f64,
    /// Most replications to run before giving up.
    pub max_replications: u32,
}

impl Precision {
    /// Parses `5%` or `0.05`.
    pub fn parse(text: &str, max_replications: u32) -> Result<Precision, String> {
        let t = text.trim();
        let v = match t.strip_suffix('%') {
            Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0),
            None => t.parse::<f64>(),
        }
        .map_err(|_| format!("--precision `{text}`: expected a percentage such as 5% (or 0.05)"))?;
        if !(v > 0.0 && v < 1.0) {
            return Err(format!(
                "--precision `{text}`: the relative half-width must be above 0% and below 100%"
            ));
        }
        if max_replications < 2 {
            return Err("--max-replications must be at least 2 for an interval".into());
        }
        Ok(Precision {
            relative: v,
            max_replications,
        })
    }

    /// Whether `e` is precise enough.
    pub fn met_by(&self, e: &Estimate) -> bool {
        let r = e.relative_half_width();
        r.is_finite() && r <= self.relative
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_critical_values_match_the_tables() {
        // Student-t two-sided 95% critical values (any statistics table).
        for (df, t) in [
            (1, 12.706),
            (2, 4.303),
            (4, 2.776),
            (9, 2.262),
            (29, 2.045),
            (1000, 1.962),
        ] {
            assert!((t_critical(0.95, df) - t).abs() < 1e-3, "df {df}");
        }
        assert!(t_critical(0.95, 0).is_nan());
    }

    #[test]
    fn an_estimate_is_the_textbook_interval() {
        // 1..=5: mean 3, s = √2.5, half-width 2.776·√2.5/√5.
        let e = Estimate::of(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(e.n, 5);
        assert_eq!(e.mean, 3.0);
        assert!((e.sd - 2.5f64.sqrt()).abs() < 1e-12);
        assert!((e.half_width - t_critical(0.95, 4) * (0.5f64).sqrt()).abs() < 1e-12);
        assert!(e.excludes(0.0) && !e.excludes(3.5));
        assert_eq!(e.text(1), format!("3.0 ± {:.1}", e.half_width));
    }

    #[test]
    fn nan_values_are_left_out_and_one_value_has_no_interval() {
        let e = Estimate::of(&[f64::NAN, 2.0]);
        assert_eq!((e.n, e.mean), (1, 2.0));
        assert!(e.half_width.is_nan() && !e.excludes(100.0));
        assert_eq!(e.bounds(), (2.0, 2.0));
        assert_eq!(e.text(0), "2");
        assert_eq!(Estimate::of(&[]).text(0), "–");
    }

    #[test]
    fn pairing_removes_the_shared_noise() {
        // b = a + 1 exactly: the paired difference is 1 with no spread, although a varies widely.
        let a = [10.0, 50.0, 20.0, 80.0];
        let b = a.map(|v| v + 1.0);
        let d = Estimate::paired(&a, &b);
        assert_eq!((d.mean, d.half_width), (1.0, 0.0));
        assert!(d.excludes(0.0));
        assert!(!Estimate::of(&b).excludes(Estimate::of(&a).mean));
    }

    #[test]
    fn replication_zero_is_the_scenario_seed_and_the_rest_are_distinct() {
        assert_eq!(replication_seed(42, 0), 42);
        let seeds: std::collections::BTreeSet<u64> =
            (0..1000).map(|r| replication_seed(42, r)).collect();
        assert_eq!(seeds.len(), 1000);
        assert_ne!(replication_seed(42, 1), replication_seed(43, 1));
    }

    #[test]
    fn precision_parses_percentages_and_rejects_nonsense() {
        assert_eq!(Precision::parse("5%", 20).unwrap().relative, 0.05);
        assert_eq!(Precision::parse("0.02", 20).unwrap().relative, 0.02);
        for bad in ["0%", "150%", "x", "-1%"] {
            assert!(Precision::parse(bad, 20).is_err(), "{bad}");
        }
        assert!(Precision::parse("5%", 1).is_err());
        let p = Precision::parse("10%", 20).unwrap();
        assert!(p.met_by(&Estimate::of(&[100.0, 101.0, 99.0, 100.0])));
        assert!(!p.met_by(&Estimate::of(&[100.0, 150.0, 50.0])));
        assert!(!p.met_by(&Estimate::of(&[100.0])));
    }
}
