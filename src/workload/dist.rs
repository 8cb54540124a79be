//! Length distributions for prompts and outputs, and the arrival processes.

use rand::Rng;
use rand_distr::{Distribution, Exp, Gamma, Geometric, LogNormal, Normal};
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
    /// Geometric on `{1, 2, …}` with the given mean (≥ 1): the number of trials up to the first success
    /// with success probability `1 / mean`, e.g. turns of a conversation that ends after each turn with
    /// a fixed probability.
    Geometric {
        mean: Positive,
        min: Option<PositiveInt>,
        max: Option<PositiveInt>,
    },
    /// `values[i]` with probability `weights[i] / Σ weights` (equal weights when none are given).
    Empirical {
        values: Vec<u32>,
        /// Running sums of the weights, normalised so that the last is 1.
        cumulative: Vec<f64>,
    },
    /// Normal with mean `mean` and standard deviation `sd` (tokens), as benchmark clients draw synthetic
    /// lengths: a draw below zero is drawn again when `redraw_negative` (AIPerf) and kept otherwise, then
    /// rounded by `rounding` and clamped to `[min, max]` (`min ≥ 1`).
    Normal {
        mean: f64,
        sd: f64,
        rounding: Rounding,
        redraw_negative: bool,
        min: u32,
        max: u32,
    },
}

/// How a real-valued length draw becomes a token count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rounding {
    /// Up (`math.ceil`).
    Ceil,
    /// Toward zero (`int()`).
    Trunc,
    /// To the nearest, ties to even (Python's `round()`).
    HalfEven,
}

/// Kinds of [`LengthDist`], as written in a scenario's `dist` key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DistKind {
    /// Always the same value: `tokens` (lengths) or `value` (durations).
    Fixed,
    /// Uniform between `min` and `max`, both included.
    Uniform,
    /// Lognormal with `median` and shape `sigma`, clamped to `min`/`max` where given.
    Lognormal,
    /// Exponential with `mean`, clamped to `min`/`max` where given.
    Exponential,
    /// Geometric with `mean` ≥ 1 (whole numbers from 1; lengths only), clamped to `min`/`max` where
    /// given.
    Geometric,
    /// The listed `values`, drawn with the given `weights` (lengths only).
    Empirical,
}

/// A distribution of lengths (tokens, turns), written inline: `{ dist = "fixed", tokens = 128 }`,
/// `{ dist = "lognormal", median = 600, sigma = 0.8 }`, `{ dist = "geometric", mean = 4 }`,
/// `{ dist = "empirical", values = [1, 2, 8], weights = [5, 3, 1] }`. Each `dist` takes only its own
/// keys: `fixed` tokens; `uniform` min, max; `lognormal` median, sigma, min, max; `exponential` and
/// `geometric` mean, min, max; `empirical` values, weights.
// Kept flat (rather than a tagged enum) so that the TOML parser can point at the exact value that is
// wrong; [`LengthSpec::build`] then checks that the keys present are the ones `dist` takes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LengthSpec {
    /// The distribution's shape; required.
    pub dist: Option<DistKind>,
    /// The length, for `dist = "fixed"`.
    pub tokens: Option<PositiveInt>,
    /// Smallest length: the lower bound of `uniform`, a clamp for the others.
    pub min: Option<PositiveInt>,
    /// Largest length: the upper bound of `uniform`, a clamp for the others.
    pub max: Option<PositiveInt>,
    /// Median length (`lognormal`).
    pub median: Option<Positive>,
    /// Standard deviation of the length's logarithm (`lognormal`; 0 is a fixed length).
    pub sigma: Option<NonNegative>,
    /// Mean length (`exponential`, `geometric`).
    pub mean: Option<Positive>,
    /// The lengths drawn (`empirical`).
    pub values: Option<Vec<PositiveInt>>,
    /// Relative weight of each of `values`, same count (`empirical`).
    pub weights: Option<Vec<NonNegative>>,
}

/// Checks that every key present is one that `kind` takes: `Err((key, message))` names the first that is not.
fn check_keys(
    kind: &str,
    present: &[(&'static str, bool)],
    allowed: &[&str],
) -> Result<(), (&'static str, String)> {
    match present.iter().find(|(k, on)| *on && !allowed.contains(k)) {
        Some((key, _)) => Err((
            key,
            format!(
                "does not apply to dist = \"{kind}\" (it takes {})",
                allowed.join(", ")
            ),
        )),
        None => Ok(()),
    }
}

impl LengthSpec {
    /// Exactly `tokens` (at least 1).
    pub fn fixed(tokens: u32) -> Self {
        Self::between(tokens, tokens)
    }

    /// Uniform integers in `[min, max]`, or exactly `min` where the bounds meet (both at least 1).
    pub fn between(min: u32, max: u32) -> Self {
        if min == max {
            LengthSpec {
                dist: Some(DistKind::Fixed),
                tokens: Some(PositiveInt(min)),
                ..LengthSpec::default()
            }
        } else {
            LengthSpec {
                dist: Some(DistKind::Uniform),
                min: Some(PositiveInt(min)),
                max: Some(PositiveInt(max)),
                ..LengthSpec::default()
            }
        }
    }

    /// The distribution, or `Err((key, message))` naming the key that is missing or does not apply.
    pub fn build(&self) -> Result<LengthDist, (&'static str, String)> {
        let kind = self.dist.ok_or((
            "dist",
            "missing: one of fixed, uniform, lognormal, exponential, geometric, empirical"
                .to_string(),
        ))?;
        fn need<T>(
            v: Option<T>,
            key: &'static str,
            kind: DistKind,
        ) -> Result<T, (&'static str, String)> {
            v.ok_or((key, format!("required when dist = \"{}\"", kind_name(kind))))
        }
        let present: [(&'static str, bool); 8] = [
            ("tokens", self.tokens.is_some()),
            ("min", self.min.is_some()),
            ("max", self.max.is_some()),
            ("median", self.median.is_some()),
            ("sigma", self.sigma.is_some()),
            ("mean", self.mean.is_some()),
            ("values", self.values.is_some()),
            ("weights", self.weights.is_some()),
        ];
        let allowed: &[&str] = match kind {
            DistKind::Fixed => &["tokens"],
            DistKind::Uniform => &["min", "max"],
            DistKind::Lognormal => &["median", "sigma", "min", "max"],
            DistKind::Exponential | DistKind::Geometric => &["mean", "min", "max"],
            DistKind::Empirical => &["values", "weights"],
        };
        check_keys(kind_name(kind), &present, allowed)?;
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
            DistKind::Geometric => {
                let mean = need(self.mean, "mean", kind)?;
                if mean.0 < 1.0 {
                    return Err((
                        "mean",
                        format!(
                            "must be at least 1 for dist = \"geometric\" (its values start at 1), got {}",
                            mean.0
                        ),
                    ));
                }
                LengthDist::Geometric {
                    mean,
                    min: self.min,
                    max: self.max,
                }
            }
            DistKind::Empirical => {
                let values = need(self.values.as_ref(), "values", kind)?;
                let weights: Vec<f64> = match &self.weights {
                    Some(w) => w.iter().map(|w| w.0).collect(),
                    None => vec![1.0; values.len()],
                };
                LengthDist::empirical(values.iter().map(|v| v.0).collect(), &weights)?
            }
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
        DistKind::Geometric => "geometric",
        DistKind::Empirical => "empirical",
    }
}

impl LengthDist {
    /// An empirical distribution; `Err((key, message))` if `values` is empty or the weights do not fit it.
    pub fn empirical(values: Vec<u32>, weights: &[f64]) -> Result<Self, (&'static str, String)> {
        if values.is_empty() {
            return Err(("values", "must list at least one value".into()));
        }
        if weights.len() != values.len() {
            return Err((
                "weights",
                format!(
                    "has {} entries but values has {}",
                    weights.len(),
                    values.len()
                ),
            ));
        }
        let total: f64 = weights.iter().sum();
        if !(total > 0.0 && total.is_finite()) {
            return Err(("weights", "must have a positive, finite sum".into()));
        }
        let mut run = 0.0;
        let mut cumulative: Vec<f64> = weights
            .iter()
            .map(|w| {
                run += w;
                run / total
            })
            .collect();
        // Guard the search below against rounding: the last running sum is exactly 1.
        *cumulative.last_mut().expect("non-empty") = 1.0;
        Ok(LengthDist::Empirical { values, cumulative })
    }

    /// Checks parameter relations that a single field cannot express.
    pub fn validate(&self) -> Result<(), String> {
        let (lo, hi) = match self {
            LengthDist::Uniform { min, max } => (Some(*min), Some(*max)),
            LengthDist::Lognormal { min, max, .. }
            | LengthDist::Exponential { min, max, .. }
            | LengthDist::Geometric { min, max, .. } => (*min, *max),
            LengthDist::Normal { min, max, .. } => {
                (Some(PositiveInt(*min)), Some(PositiveInt(*max)))
            }
            LengthDist::Fixed { .. } | LengthDist::Empirical { .. } => (None, None),
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
            LengthDist::Exponential { mean, .. } | LengthDist::Geometric { mean, .. } => mean.0,
            LengthDist::Normal { mean, .. } => *mean,
            LengthDist::Empirical { values, cumulative } => {
                let mut prev = 0.0;
                values
                    .iter()
                    .zip(cumulative)
                    .map(|(v, c)| {
                        let p = c - prev;
                        prev = *c;
                        f64::from(*v) * p
                    })
                    .sum()
            }
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
            LengthDist::Geometric { mean, min, max } => {
                // rand_distr counts the failures before the first success (support 0, 1, …).
                let d = Geometric::new(1.0 / mean.0).expect("validated geometric");
                ((d.sample(rng) as f64) + 1.0, *min, *max)
            }
            LengthDist::Empirical { values, cumulative } => {
                let u: f64 = rng.random();
                let i = cumulative.partition_point(|&c| c <= u);
                return values[i.min(values.len() - 1)];
            }
            LengthDist::Normal {
                mean,
                sd,
                rounding,
                redraw_negative,
                min,
                max,
            } => {
                let d = Normal::new(*mean, *sd).expect("validated normal");
                let mut x = d.sample(rng);
                // A mean far below zero would loop for ever; AIPerf's own loop would too, so give up
                // after many draws and take the bound.
                let mut tries = 0;
                while *redraw_negative && x < 0.0 && tries < 1000 {
                    x = d.sample(rng);
                    tries += 1;
                }
                let r = match rounding {
                    Rounding::Ceil => x.ceil(),
                    Rounding::Trunc => x.trunc(),
                    Rounding::HalfEven => x.round_ties_even(),
                };
                return r.clamp(f64::from(*min), f64::from(*max)) as u32;
            }
        };
        let lo = lo.map_or(1.0, |v| f64::from(v.0));
        let hi = hi.map_or(f64::from(u32::MAX / 4), |v| f64::from(v.0));
        raw.round().clamp(lo, hi) as u32
    }
}

/// A distribution of durations (think times), written inline:
/// `{ dist = "lognormal", median = "20s", sigma = 1.0 }`, `{ dist = "exponential", mean = "8s" }`,
/// `{ dist = "uniform", min = "2s", max = "30s" }`, `{ dist = "fixed", value = "10s" }`. Each `dist`
/// takes only its own keys: `fixed` value; `uniform` min, max; `lognormal` median, sigma, min, max;
/// `exponential` mean, min, max.
// Flat, for the same reason as [`LengthSpec`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DurationSpec {
    /// The distribution's shape (`fixed`, `uniform`, `lognormal` or `exponential`); required.
    pub dist: Option<DistKind>,
    /// The duration, for `dist = "fixed"`.
    pub value: Option<SimDuration>,
    /// Shortest duration: the lower bound of `uniform`, a clamp for the others.
    pub min: Option<SimDuration>,
    /// Longest duration: the upper bound of `uniform`, a clamp for the others.
    pub max: Option<SimDuration>,
    /// Median duration (`lognormal`).
    pub median: Option<SimDuration>,
    /// Standard deviation of the duration's logarithm (`lognormal`).
    pub sigma: Option<NonNegative>,
    /// Mean duration (`exponential`).
    pub mean: Option<SimDuration>,
}

/// A distribution of durations. Samples are clamped to `[min, max]` where given.
#[derive(Clone, Debug, PartialEq)]
pub enum DurationDist {
    Fixed(SimDuration),
    Uniform {
        min: SimDuration,
        max: SimDuration,
    },
    Lognormal {
        median: SimDuration,
        sigma: f64,
        min: Option<SimDuration>,
        max: Option<SimDuration>,
    },
    Exponential {
        mean: SimDuration,
        min: Option<SimDuration>,
        max: Option<SimDuration>,
    },
}

impl DurationSpec {
    /// The distribution, or `Err((key, message))` naming the key that is missing or does not apply.
    pub fn build(&self) -> Result<DurationDist, (&'static str, String)> {
        let kind = self.dist.ok_or((
            "dist",
            "missing: one of fixed, uniform, lognormal, exponential".to_string(),
        ))?;
        let need = |v: Option<SimDuration>, key: &'static str| {
            v.ok_or((key, format!("required when dist = \"{}\"", kind_name(kind))))
        };
        let present: [(&'static str, bool); 6] = [
            ("value", self.value.is_some()),
            ("min", self.min.is_some()),
            ("max", self.max.is_some()),
            ("median", self.median.is_some()),
            ("sigma", self.sigma.is_some()),
            ("mean", self.mean.is_some()),
        ];
        let allowed: &[&str] = match kind {
            DistKind::Fixed => &["value"],
            DistKind::Uniform => &["min", "max"],
            DistKind::Lognormal => &["median", "sigma", "min", "max"],
            DistKind::Exponential => &["mean", "min", "max"],
            DistKind::Geometric | DistKind::Empirical => {
                return Err((
                    "dist",
                    format!(
                        "\"{}\" is for counts; durations take fixed, uniform, lognormal or exponential",
                        kind_name(kind)
                    ),
                ));
            }
        };
        check_keys(kind_name(kind), &present, allowed)?;
        let d = match kind {
            DistKind::Fixed => DurationDist::Fixed(need(self.value, "value")?),
            DistKind::Uniform => DurationDist::Uniform {
                min: need(self.min, "min")?,
                max: need(self.max, "max")?,
            },
            DistKind::Lognormal => {
                let median = need(self.median, "median")?;
                if median == SimDuration::ZERO {
                    return Err(("median", "must be greater than 0".into()));
                }
                DurationDist::Lognormal {
                    median,
                    sigma: self
                        .sigma
                        .ok_or(("sigma", "required when dist = \"lognormal\"".to_string()))?
                        .0,
                    min: self.min,
                    max: self.max,
                }
            }
            DistKind::Exponential => {
                let mean = need(self.mean, "mean")?;
                if mean == SimDuration::ZERO {
                    return Err(("mean", "must be greater than 0".into()));
                }
                DurationDist::Exponential {
                    mean,
                    min: self.min,
                    max: self.max,
                }
            }
            DistKind::Geometric | DistKind::Empirical => unreachable!("rejected above"),
        };
        let (lo, hi) = match &d {
            DurationDist::Fixed(_) => (None, None),
            DurationDist::Uniform { min, max } => (Some(*min), Some(*max)),
            DurationDist::Lognormal { min, max, .. }
            | DurationDist::Exponential { min, max, .. } => (*min, *max),
        };
        if let (Some(lo), Some(hi)) = (lo, hi)
            && lo > hi
        {
            return Err(("max", format!("min ({lo}) is greater than max ({hi})")));
        }
        Ok(d)
    }
}

impl DurationDist {
    /// The mean before clamping, in seconds (for arithmetic and tests).
    pub fn mean_secs(&self) -> f64 {
        match self {
            DurationDist::Fixed(d) => d.as_secs_f64(),
            DurationDist::Uniform { min, max } => (min.as_secs_f64() + max.as_secs_f64()) / 2.0,
            DurationDist::Lognormal { median, sigma, .. } => {
                median.as_secs_f64() * (sigma * sigma / 2.0).exp()
            }
            DurationDist::Exponential { mean, .. } => mean.as_secs_f64(),
        }
    }

    /// One draw.
    pub fn sample(&self, rng: &mut SimRng) -> SimDuration {
        let (raw, lo, hi) = match self {
            DurationDist::Fixed(d) => return *d,
            DurationDist::Uniform { min, max } => {
                return SimDuration(rng.random_range(min.0..=max.0));
            }
            DurationDist::Lognormal {
                median,
                sigma,
                min,
                max,
            } => {
                let d =
                    LogNormal::new(median.as_secs_f64().ln(), *sigma).expect("validated lognormal");
                (d.sample(rng), *min, *max)
            }
            DurationDist::Exponential { mean, min, max } => {
                let d = Exp::new(1.0 / mean.as_secs_f64()).expect("validated exponential");
                (d.sample(rng), *min, *max)
            }
        };
        // A year bounds any think time and keeps the nanosecond count far from overflow.
        let d = SimDuration::from_secs_f64(raw.min(365.0 * 86_400.0));
        let d = lo.map_or(d, |lo| d.max(lo));
        hi.map_or(d, |hi| d.min(hi))
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
    fn geometric_and_empirical_draws() {
        let g = LengthDist::Geometric {
            mean: Positive(4.0),
            min: None,
            max: Some(PositiveInt(1000)),
        };
        // Mean 4, sd √12 ≈ 3.46: the mean of 100k draws is within 0.05.
        assert!((mean_of(&g, 100_000) - 4.0).abs() < 0.05);
        let one = LengthDist::Geometric {
            mean: Positive(1.0),
            min: None,
            max: None,
        };
        assert_eq!(mean_of(&one, 1000), 1.0);

        let e = LengthDist::empirical(vec![10, 20, 30], &[1.0, 0.0, 3.0]).unwrap();
        assert_eq!(e.mean(), 25.0);
        let mut rng = from_u64(2);
        let mut counts = [0u32; 3];
        for _ in 0..40_000 {
            match e.sample(&mut rng) {
                10 => counts[0] += 1,
                20 => counts[1] += 1,
                30 => counts[2] += 1,
                v => panic!("drew {v}"),
            }
        }
        assert_eq!(counts[1], 0, "a zero weight is never drawn");
        // 10,000 expected (sd 87).
        assert!((9_650..10_350).contains(&counts[0]), "{counts:?}");
    }

    #[test]
    fn specs_name_the_key_that_is_wrong() {
        let spec = |text: &str| toml::from_str::<LengthSpec>(text).unwrap().build();
        assert_eq!(
            spec("dist = \"geometric\"\nmean = 0.5").unwrap_err().0,
            "mean"
        );
        assert_eq!(
            spec("dist = \"empirical\"\nvalues = [1, 2]\nweights = [1]")
                .unwrap_err()
                .0,
            "weights"
        );
        assert_eq!(spec("dist = \"empirical\"").unwrap_err().0, "values");
        assert_eq!(
            spec("dist = \"fixed\"\ntokens = 3\nvalues = [1]")
                .unwrap_err()
                .0,
            "values"
        );
        assert_eq!(
            spec("dist = \"empirical\"\nvalues = [5]").unwrap(),
            LengthDist::Empirical {
                values: vec![5],
                cumulative: vec![1.0]
            }
        );
        let dur = |text: &str| toml::from_str::<DurationSpec>(text).unwrap().build();
        assert_eq!(
            dur("dist = \"lognormal\"\nmedian = \"20s\"").unwrap_err().0,
            "sigma"
        );
        assert_eq!(
            dur("dist = \"geometric\"\nmean = \"2s\"").unwrap_err().0,
            "dist"
        );
        assert_eq!(
            dur("dist = \"uniform\"\nmin = \"5s\"\nmax = \"1s\"")
                .unwrap_err()
                .0,
            "max"
        );
        let d = dur("dist = \"exponential\"\nmean = \"8s\"\nmax = \"10s\"").unwrap();
        let mut rng = from_u64(3);
        assert!((0..1000).all(|_| d.sample(&mut rng) <= SimDuration::from_secs(10)));
        assert_eq!(d.mean_secs(), 8.0);
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
