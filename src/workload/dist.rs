//! Length distributions for prompts and outputs, and the arrival processes.

use rand::Rng;
use rand_distr::{Distribution, Exp, Gamma, LogNormal};
use serde::{Deserialize, Serialize};

use crate::config::{NonNegative, Positive, PositiveInt};
use crate::rng::SimRng;
use crate::time::SimDuration;

/// A distribution of token counts. Samples are rounded and clamped to `[min, max]` (default `[1, ∞)`).
#[derive(Clone, Debug, PartialEq)]
pub enum LengthDist {
    /// Always `tokens`.
    Fixed { tokens: PositiveInt },
    /// Uniform integers in `[min, max]`.
    Uniform { min: PositiveInt, max: PositiveInt },
    /// Log-normal with the given median and log-space standard deviation `sigma`.
    Lognormal {
        median: Positive,
        sigma: NonNegative,
        min: Option<PositiveInt>,
        max: Option<PositiveInt>,
    },
    /// Exponential with the given mean.
    Exponential {
        mean: Positive,
        min: Option<PositiveInt>,
        max: Option<PositiveInt>,
    },
}

/// Kinds of [`LengthDist`], as written in a scenario's `dist` key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DistKind {
    Fixed,
    Uniform,
    Lognormal,
    Exponential,
}

/// A length distribution as written in a scenario: `{ dist = "lognormal", median = 600, sigma = 0.8 }`.
///
/// Kept flat (rather than a tagged enum) so that the TOML parser can point at the exact value that is
/// wrong; [`LengthSpec::build`] then checks that the keys present are the ones `dist` takes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LengthSpec {
    pub dist: Option<DistKind>,
    pub tokens: Option<PositiveInt>,
    pub min: Option<PositiveInt>,
    pub max: Option<PositiveInt>,
    pub median: Option<Positive>,
    pub sigma: Option<NonNegative>,
    pub mean: Option<Positive>,
}

impl LengthSpec {
    /// The distribution, or `Err((key, message))` naming the key that is missing or does not apply.
    pub fn build(&self) -> Result<LengthDist, (&'static str, String)> {
        let kind = self.dist.ok_or((
            "dist",
            "missing: one of fixed, uniform, lognormal, exponential".to_string(),
        ))?;
        fn need<T>(
            v: Option<T>,
            key: &'static str,
            kind: DistKind,
        ) -> Result<T, (&'static str, String)> {
            v.ok_or((key, format!("required when dist = \"{}\"", kind_name(kind))))
        }
        let present: [(&'static str, bool); 6] = [
            ("tokens", self.tokens.is_some()),
            ("min", self.min.is_some()),
            ("max", self.max.is_some()),
            ("median", self.median.is_some()),
            ("sigma", self.sigma.is_some()),
            ("mean", self.mean.is_some()),
        ];
        let allowed: &[&str] = match kind {
            DistKind::Fixed => &["tokens"],
            DistKind::Uniform => &["min", "max"],
            DistKind::Lognormal => &["median", "sigma", "min", "max"],
            DistKind::Exponential => &["mean", "min", "max"],
        };
        if let Some((key, _)) = present.iter().find(|(k, on)| *on && !allowed.contains(k)) {
            return Err((
                key,
                format!(
                    "does not apply to dist = \"{}\" (it takes {})",
                    kind_name(kind),
                    allowed.join(", ")
                ),
            ));
        }
        let d = match kind {
            DistKind::Fixed => LengthDist::Fixed {
                tokens: need(self.tokens, "tokens", kind)?,
            },
            DistKind::Uniform => LengthDist::Uniform {
                min: need(self.min, "min", kind)?,
                max: need(self.max, "max", kind)?,
            },
            DistKind::Lognormal => LengthDist::Lognormal {
                median: need(self.median, "median", kind)?,
                sigma: need(self.sigma, "sigma", kind)?,
                min: self.min,
                max: self.max,
            },
            DistKind::Exponential => LengthDist::Exponential {
                mean: need(self.mean, "mean", kind)?,
                min: self.min,
                max: self.max,
            },
        };
        d.validate().map_err(|m| ("max", m))?;
        Ok(d)
    }
}

fn kind_name(k: DistKind) -> &'static str {
    match k {
        DistKind::Fixed => "fixed",
        DistKind::Uniform => "uniform",
        DistKind::Lognormal => "lognormal",
        DistKind::Exponential => "exponential",
    }
}

impl LengthDist {
    /// Checks parameter relations that a single field cannot express.
    pub fn validate(&self) -> Result<(), String> {
        let (lo, hi) = match self {
            LengthDist::Uniform { min, max } => (Some(*min), Some(*max)),
            LengthDist::Lognormal { min, max, .. } | LengthDist::Exponential { min, max, .. } => {
                (*min, *max)
            }
            LengthDist::Fixed { .. } => (None, None),
        };
        match (lo, hi) {
            (Some(lo), Some(hi)) if lo.0 > hi.0 => {
                Err(format!("min ({}) is greater than max ({})", lo.0, hi.0))
            }
            _ => Ok(()),
        }
    }

    /// The distribution's mean before clamping (for rate and load arithmetic).
    pub fn mean(&self) -> f64 {
        match self {
            LengthDist::Fixed { tokens } => f64::from(tokens.0),
            LengthDist::Uniform { min, max } => (f64::from(min.0) + f64::from(max.0)) / 2.0,
            LengthDist::Lognormal { median, sigma, .. } => {
                median.0 * (sigma.0 * sigma.0 / 2.0).exp()
            }
            LengthDist::Exponential { mean, .. } => mean.0,
        }
    }

    /// One draw.
    pub fn sample(&self, rng: &mut SimRng) -> u32 {
        let (raw, lo, hi) = match self {
            LengthDist::Fixed { tokens } => return tokens.0,
            LengthDist::Uniform { min, max } => return rng.random_range(min.0..=max.0),
            LengthDist::Lognormal {
                median,
                sigma,
                min,
                max,
            } => {
                let d = LogNormal::new(median.0.ln(), sigma.0).expect("validated lognormal");
                (d.sample(rng), *min, *max)
            }
            LengthDist::Exponential { mean, min, max } => {
                let d = Exp::new(1.0 / mean.0).expect("validated exponential");
                (d.sample(rng), *min, *max)
            }
        };
        let lo = lo.map_or(1.0, |v| f64::from(v.0));
        let hi = hi.map_or(f64::from(u32::MAX / 4), |v| f64::from(v.0));
        raw.round().clamp(lo, hi) as u32
    }
}

/// Inter-arrival times of an open-loop arrival process with a given mean rate.
#[derive(Clone, Debug)]
pub enum ArrivalProcess {
    /// Exponential gaps: a Poisson process.
    Poisson(Exp<f64>),
    /// Gamma gaps with coefficient of variation `cv` (shape 1/cv²): bursty for cv > 1, regular for cv < 1.
    Gamma(Gamma<f64>),
}

impl ArrivalProcess {
    /// A Poisson process of `rate` per second.
    pub fn poisson(rate: f64) -> Self {
        ArrivalProcess::Poisson(Exp::new(rate).expect("validated rate"))
    }

    /// A gamma renewal process of `rate` per second with inter-arrival CV `cv`.
    pub fn gamma(rate: f64, cv: f64) -> Self {
        let shape = 1.0 / (cv * cv);
        let scale = 1.0 / (rate * shape);
        ArrivalProcess::Gamma(Gamma::new(shape, scale).expect("validated gamma"))
    }

    /// The next gap.
    pub fn next_gap(&self, rng: &mut SimRng) -> SimDuration {
        let s = match self {
            ArrivalProcess::Poisson(d) => d.sample(rng),
            ArrivalProcess::Gamma(d) => d.sample(rng),
        };
        SimDuration::from_secs_f64(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::from_u64;

    fn mean_of(d: &LengthDist, n: usize) -> f64 {
        let mut rng = from_u64(11);
        (0..n).map(|_| f64::from(d.sample(&mut rng))).sum::<f64>() / n as f64
    }

    #[test]
    fn sample_means_match() {
        let ln = LengthDist::Lognormal {
            median: Positive(500.0),
            sigma: NonNegative(0.5),
            min: None,
            max: None,
        };
        assert!((mean_of(&ln, 100_000) / ln.mean() - 1.0).abs() < 0.01);
        let ex = LengthDist::Exponential {
            mean: Positive(200.0),
            min: None,
            max: None,
        };
        assert!((mean_of(&ex, 100_000) / 200.0 - 1.0).abs() < 0.02);
        let un = LengthDist::Uniform {
            min: PositiveInt(10),
            max: PositiveInt(20),
        };
        assert!((mean_of(&un, 100_000) - 15.0).abs() < 0.05);
    }

    #[test]
    fn gamma_gaps_have_the_configured_mean_and_cv() {
        let p = ArrivalProcess::gamma(4.0, 2.0);
        let mut rng = from_u64(5);
        let xs: Vec<f64> = (0..200_000)
            .map(|_| p.next_gap(&mut rng).as_secs_f64())
            .collect();
        let m = xs.iter().sum::<f64>() / xs.len() as f64;
        let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / xs.len() as f64;
        assert!((m - 0.25).abs() < 0.005, "mean {m}");
        assert!((v.sqrt() / m - 2.0).abs() < 0.05, "cv {}", v.sqrt() / m);
    }
}
