//! Rate curves: a time-varying multiplier on an arrival rate (a diurnal cycle, a launch spike).
//!
//! A curve file is a CSV of `time (s), rate` rows (further columns are ignored; a header line is
//! skipped), e.g. ServeGen's 10-minute aggregate rates. The rate is piecewise constant: each row's rate
//! holds from its time until the next row's, and the last row's holds from then on. The curve is
//! normalised to a time-weighted mean of 1 (the last row counted over the previous row's span), so the
//! workload's configured rate stays its mean rate and the curve only shapes it.
//!
//! Arrivals follow by time rescaling: a renewal process at the mean rate runs in *operational time*,
//! which advances at `multiplier(t)` operational seconds per second, so a Poisson process becomes a
//! non-homogeneous Poisson process with intensity `rate · multiplier(t)`, and a gamma process keeps its
//! CV locally.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::trace::TraceError;
use super::trace::text::{Lines, parse_scaled, split_csv};
use crate::config::Positive;
use crate::time::{NANOS_PER_SEC, SimDuration, SimTime};

/// The `rate_curve` table of a scenario's `[workload]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateCurveSpec {
    /// CSV file of `time (s), rate` rows, relative to the scenario file.
    pub path: String,
    /// Play the curve this many times faster (a 24-hour curve with `speedup = 24` spans one hour).
    #[serde(default = "one")]
    pub speedup: Positive,
    /// Where in the curve the run begins (curve time).
    #[serde(default)]
    pub start: SimDuration,
}

fn one() -> Positive {
    Positive(1.0)
}

/// A piecewise-constant multiplier with mean 1, in simulated time.
#[derive(Clone, Debug, PartialEq)]
pub struct RateCurve {
    /// Piece starts in simulated seconds (the first is 0) and their multipliers.
    pieces: Vec<(f64, f64)>,
}

impl RateCurve {
    /// Loads a curve file; errors name the file and line.
    pub fn load(path: &Path, speedup: f64, start: SimDuration) -> Result<Self, TraceError> {
        let mut lines = Lines::open(path)?;
        let mut points: Vec<(u64, f64)> = Vec::new();
        let mut first = true;
        while let Some((n, text)) = lines.next_line()? {
            let fields = split_csv(text).map_err(|m| lines.error(n, m))?;
            if fields.len() < 2 {
                return Err(lines.error(n, "expected `time (s), rate`"));
            }
            let time = parse_scaled(&fields[0], NANOS_PER_SEC);
            if first && time.is_err() {
                first = false;
                continue; // a header
            }
            first = false;
            let t = time.map_err(|m| lines.error(n, format!("time (seconds): {m}")))?;
            let rate: f64 = fields[1]
                .parse()
                .ok()
                .filter(|r: &f64| r.is_finite() && *r >= 0.0)
                .ok_or_else(|| {
                    lines.error(
                        n,
                        format!("rate: expected a number at least 0, got `{}`", fields[1]),
                    )
                })?;
            if let Some(&(last, _)) = points.last()
                && t <= last
            {
                return Err(lines.error(n, "times must increase from row to row"));
            }
            points.push((t, rate));
        }
        let file_error = |message: &str| TraceError::File {
            path: path.display().to_string(),
            message: message.to_string(),
        };
        if points.is_empty() {
            return Err(file_error("the curve has no rows"));
        }
        Self::from_points(&points, speedup, start).map_err(|m| file_error(&m))
    }

    /// A curve from `(curve time ns, rate)` points, in increasing time.
    pub fn from_points(
        points: &[(u64, f64)],
        speedup: f64,
        start: SimDuration,
    ) -> Result<Self, String> {
        let last_span = match points {
            [.., (a, _), (b, _)] => b - a,
            _ => NANOS_PER_SEC,
        };
        let mut weighted = 0.0;
        let mut span = 0.0;
        for (i, &(t, r)) in points.iter().enumerate() {
            let len = points.get(i + 1).map_or(last_span, |&(n, _)| n - t) as f64;
            weighted += r * len;
            span += len;
        }
        let mean = weighted / span;
        if mean <= 0.0 {
            return Err("every rate in the curve is 0".into());
        }
        // Curve time c maps to simulated time (c − start) / speedup; the piece holding `start` begins at 0.
        let begin = points.iter().rposition(|&(t, _)| t <= start.0).unwrap_or(0);
        let pieces = points[begin..]
            .iter()
            .enumerate()
            .map(|(i, &(t, r))| {
                let at = if i == 0 {
                    0.0
                } else {
                    (t - start.0) as f64 / 1e9 / speedup
                };
                (at, r / mean)
            })
            .collect();
        Ok(RateCurve { pieces })
    }

    /// The multiplier at simulated time `t`.
    pub fn multiplier(&self, t: SimTime) -> f64 {
        let s = t.as_secs_f64();
        let i = self.pieces.partition_point(|&(at, _)| at <= s);
        self.pieces[i.saturating_sub(1)].1
    }

    /// The time at which `nominal` seconds of operational time have passed since `from`, or `None` if
    /// the curve stays at 0 for ever.
    pub fn advance(&self, from: SimTime, nominal: f64) -> Option<SimTime> {
        let mut t = from.as_secs_f64();
        let mut left = nominal;
        let mut i = self
            .pieces
            .partition_point(|&(at, _)| at <= t)
            .saturating_sub(1);
        loop {
            let m = self.pieces[i].1;
            let end = self.pieces.get(i + 1).map(|&(at, _)| at);
            match end {
                None if m == 0.0 => return None,
                None => {
                    t += left / m;
                    break;
                }
                Some(e) => {
                    let room = m * (e - t);
                    if m > 0.0 && room >= left {
                        t += left / m;
                        break;
                    }
                    left -= room;
                    t = e;
                    i += 1;
                }
            }
        }
        let at = SimTime((t * 1e9).round() as u64);
        Some(at.max(from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::trace::testutil::TempTrace;

    #[test]
    fn normalised_piecewise_constant_multipliers() {
        let c = RateCurve::from_points(
            &[(0, 1.0), (100 * NANOS_PER_SEC, 3.0)],
            1.0,
            SimDuration::ZERO,
        )
        .unwrap();
        assert_eq!(c.multiplier(SimTime::ZERO), 0.5);
        assert_eq!(c.multiplier(SimTime(150 * NANOS_PER_SEC)), 1.5);
        // 40 operational seconds from t = 80 s: 10 at ×0.5 to reach 100 s, then 30 at ×1.5 → 120 s.
        let t = c.advance(SimTime(80 * NANOS_PER_SEC), 40.0).unwrap();
        assert_eq!(t, SimTime(120 * NANOS_PER_SEC));
    }

    #[test]
    fn speedup_and_start_move_the_pieces() {
        let c = RateCurve::from_points(
            &[
                (0, 1.0),
                (3600 * NANOS_PER_SEC, 3.0),
                (7200 * NANOS_PER_SEC, 0.0),
            ],
            60.0,
            SimDuration::from_secs(1800),
        )
        .unwrap();
        // Curve hour 1 starts 30 simulated seconds in; hour 2 (rate 0) 90 s in, and holds for ever.
        assert!(
            c.multiplier(SimTime(29 * NANOS_PER_SEC)) < c.multiplier(SimTime(31 * NANOS_PER_SEC))
        );
        assert_eq!(c.multiplier(SimTime(91 * NANOS_PER_SEC)), 0.0);
        assert_eq!(c.advance(SimTime(85 * NANOS_PER_SEC), 1e6), None);
    }

    #[test]
    fn files_load_with_errors_that_name_the_line() {
        let t = TempTrace::new(
            "curve.csv",
            "window_start_s,total_rate_rps,active_clients\n0,10,3\n600,30,4\n",
        );
        let c = RateCurve::load(&t.0, 1.0, SimDuration::ZERO).unwrap();
        assert_eq!(c.multiplier(SimTime::ZERO), 0.5);
        let t = TempTrace::new("curve.csv", "0,10\n600,-3\n");
        let e = RateCurve::load(&t.0, 1.0, SimDuration::ZERO)
            .unwrap_err()
            .to_string();
        assert!(e.contains("curve.csv:2:") && e.contains("rate"), "{e}");
        let t = TempTrace::new("curve.csv", "0,10\n0,3\n");
        let e = RateCurve::load(&t.0, 1.0, SimDuration::ZERO)
            .unwrap_err()
            .to_string();
        assert!(e.contains("curve.csv:2:") && e.contains("increase"), "{e}");
    }
}
