//! Simulated time: an integer count of nanoseconds.
//!
//! Floats appear only at the edges (parsing a scenario, printing a summary). Inside the simulator every
//! instant is a [`SimTime`] and every span a [`SimDuration`], so that event ordering is exact and a run
//! is reproducible to the byte.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Nanoseconds per second.
pub const NANOS_PER_SEC: u64 = 1_000_000_000;

/// An instant of simulated time, in nanoseconds since the start of the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimTime(pub u64);

/// A span of simulated time, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimDuration(pub u64);

impl SimTime {
    /// The start of every run.
    pub const ZERO: SimTime = SimTime(0);
    /// A time later than any event a run can schedule.
    pub const MAX: SimTime = SimTime(u64::MAX);

    /// Seconds since the start, as a float (for output only).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / NANOS_PER_SEC as f64
    }

    /// The span from `earlier` to `self`; panics if `earlier` is later (a clock going backwards is a bug).
    pub fn since(self, earlier: SimTime) -> SimDuration {
        SimDuration(
            self.0
                .checked_sub(earlier.0)
                .expect("simulated clock went backwards"),
        )
    }
}

impl SimDuration {
    /// No time at all.
    pub const ZERO: SimDuration = SimDuration(0);
    /// The longest span [`SimDuration::parse`] accepts: ten years of 365 days, far from where sums of
    /// spans could overflow.
    pub const MAX_PARSED: SimDuration = SimDuration(10 * 365 * 86_400 * NANOS_PER_SEC);

    /// A span of whole seconds.
    pub const fn from_secs(s: u64) -> Self {
        SimDuration(s * NANOS_PER_SEC)
    }

    /// A span of whole milliseconds.
    pub const fn from_millis(ms: u64) -> Self {
        SimDuration(ms * 1_000_000)
    }

    /// A span from float seconds, rounded to the nearest nanosecond, saturating at `u64::MAX` ns (an
    /// infinite or astronomically long span, which only a product of extreme inputs gives, becomes the
    /// longest one rather than a panic); negative or NaN input is a bug.
    pub fn from_secs_f64(s: f64) -> Self {
        assert!(s >= 0.0, "invalid duration {s} s");
        SimDuration(round_non_negative(s * NANOS_PER_SEC as f64))
    }

    /// Seconds, as a float (for output and rate arithmetic only).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / NANOS_PER_SEC as f64
    }

    /// Milliseconds, as a float (for output only).
    pub fn as_millis_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }

    /// Parses `"250ms"`, `"1.5s"`, `"30m"`, `"2h"`, `"10us"`, `"5ns"`, or a bare number of seconds.
    pub fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
            .unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let value: f64 = num
            .parse()
            .map_err(|_| format!("invalid duration `{text}`: expected a number with a unit such as 250ms, 30s, 5m, 2h"))?;
        let scale = match unit.trim() {
            "" | "s" | "sec" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            "m" | "min" => 60.0,
            "h" => 3600.0,
            other => {
                return Err(format!(
                    "invalid duration `{text}`: unknown unit `{other}` (use ns, us, ms, s, m or h)"
                ));
            }
        };
        let secs = value * scale;
        if !secs.is_finite() || secs < 0.0 {
            return Err(format!(
                "invalid duration `{text}`: must be zero or positive"
            ));
        }
        if secs > SimDuration::MAX_PARSED.as_secs_f64() {
            return Err(format!(
                "invalid duration `{text}`: longer than 10 years, the longest span fleetsim accepts \
                 (simulated time counts nanoseconds in 64 bits, which end after 584 years)"
            ));
        }
        Ok(SimDuration::from_secs_f64(secs))
    }
}

/// Saturating: an instant past the end of `u64` nanoseconds (584 years) is [`SimTime::MAX`], "never",
/// which no run reaches (the simulated-time budget stops a run long before).
impl Add<SimDuration> for SimTime {
    type Output = SimTime;
    #[inline]
    fn add(self, d: SimDuration) -> SimTime {
        SimTime(self.0.saturating_add(d.0))
    }
}

impl AddAssign<SimDuration> for SimTime {
    fn add_assign(&mut self, d: SimDuration) {
        *self = *self + d;
    }
}

/// Saturating at `u64::MAX` nanoseconds, like [`SimTime`]'s addition.
impl Add for SimDuration {
    type Output = SimDuration;
    #[inline]
    fn add(self, d: SimDuration) -> SimDuration {
        SimDuration(self.0.saturating_add(d.0))
    }
}

impl AddAssign for SimDuration {
    fn add_assign(&mut self, d: SimDuration) {
        *self = *self + d;
    }
}

impl Sub for SimTime {
    type Output = SimDuration;
    fn sub(self, earlier: SimTime) -> SimDuration {
        self.since(earlier)
    }
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6}s", self.as_secs_f64())
    }
}

impl fmt::Display for SimDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0;
        if ns.is_multiple_of(NANOS_PER_SEC) {
            write!(f, "{}s", ns / NANOS_PER_SEC)
        } else if ns.is_multiple_of(1_000_000) {
            write!(f, "{}ms", ns / 1_000_000)
        } else {
            write!(f, "{}ns", ns)
        }
    }
}

impl<'de> Deserialize<'de> for SimDuration {
    /// Accepts a string with a unit (`"250ms"`) or a number of seconds.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Secs(f64),
        }
        match Raw::deserialize(d)? {
            Raw::Text(s) => SimDuration::parse(&s).map_err(serde::de::Error::custom),
            Raw::Secs(s) if s.is_finite() && s >= 0.0 => {
                SimDuration::parse(&format!("{s}s")).map_err(serde::de::Error::custom)
            }
            Raw::Secs(s) => Err(serde::de::Error::custom(format!(
                "invalid duration {s}: must be zero or positive"
            ))),
        }
    }
}

impl SimDuration {
    /// What `SimDuration::parse` accepts, as a JSON Schema (ECMA-262) pattern: a non-negative decimal
    /// number (no exponent) and an optional unit, blanks allowed around both.
    pub const PATTERN: &'static str =
        r"^\s*\+?(\d+\.?\d*|\.\d+)\s*(ns|us|µs|ms|s|sec|m|min|h)?\s*$";
}

/// Accepts what `deserialize` accepts: a string matching [`SimDuration::PATTERN`] or a number of
/// seconds ≥ 0. The ten-year ceiling is stated, not checked.
impl schemars::JsonSchema for SimDuration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A span of simulated time: a number with a unit (`\"250ms\"`, `\"30s\"`, \
                `\"1.5m\"`, `\"2h\"`; units ns, us, ms, s, m or min, h; no unit means seconds) or a \
                bare number of seconds (`30`, `0.25`). Zero or positive, at most 10 years.",
            "anyOf": [
                { "type": "string", "pattern": SimDuration::PATTERN },
                { "type": "number", "minimum": 0 },
            ],
        })
    }
}

impl Serialize for SimDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

/// `x.round() as u64` for `x >= 0` (halves away from zero, saturating at `u64::MAX`, +∞ included), without
/// the call into the C library that `f64::round` costs on x86-64 without SSE4.1: every step duration
/// goes through here. Exact: below 2^53 the integer part and the fraction are exact in `f64`, and from
/// 2^52 on every `f64` is an integer already.
#[inline(always)]
fn round_non_negative(x: f64) -> u64 {
    debug_assert!(x >= 0.0);
    let whole = x as u64; // truncates; saturates at u64::MAX
    // Without a branch: the fraction is as likely above a half as below, so a branch on it would be
    // mispredicted every other step duration.
    let up = (x - whole as f64 >= 0.5) & (whole != u64::MAX);
    whole + u64::from(up)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The library's rounding, which `round_non_negative` replaces.
    fn library(x: f64) -> u64 {
        x.round() as u64
    }

    #[test]
    fn rounding_to_nanoseconds_is_the_librarys_at_the_edges() {
        let edges = [
            0.0,
            0.49999999999999994, // the largest below ½: adding ½ first would round it up
            0.5,
            1.5,
            2.5,
            4_503_599_627_370_495.5, // 2^52 − ½, the last half
            4_503_599_627_370_496.0,
            9_007_199_254_740_993.0,
            1.8446744073709552e19, // 2^64: saturates
            1e300,
        ];
        for x in edges {
            assert_eq!(round_non_negative(x), library(x), "{x}");
            let below = f64::from_bits(x.to_bits().saturating_sub(1));
            let above = f64::from_bits(x.to_bits() + 1);
            assert_eq!(round_non_negative(below), library(below), "{below}");
            assert_eq!(round_non_negative(above), library(above), "{above}");
        }
    }

    proptest::proptest! {
        #[test]
        fn rounding_to_nanoseconds_is_the_librarys(
            bits in 0u64..0x7FF0_0000_0000_0000, // every finite non-negative f64
            halves in 0u64..(1 << 53),
        ) {
            let x = f64::from_bits(bits);
            proptest::prop_assert_eq!(round_non_negative(x), library(x));
            let half = halves as f64 + 0.5;
            proptest::prop_assert_eq!(round_non_negative(half), library(half));
        }
    }

    #[test]
    fn parses_units() {
        assert_eq!(
            SimDuration::parse("250ms").unwrap(),
            SimDuration::from_millis(250)
        );
        assert_eq!(
            SimDuration::parse("1.5s").unwrap(),
            SimDuration::from_millis(1500)
        );
        assert_eq!(
            SimDuration::parse("30m").unwrap(),
            SimDuration::from_secs(1800)
        );
        assert_eq!(
            SimDuration::parse("2h").unwrap(),
            SimDuration::from_secs(7200)
        );
        assert_eq!(SimDuration::parse("10us").unwrap(), SimDuration(10_000));
        assert_eq!(SimDuration::parse("7").unwrap(), SimDuration::from_secs(7));
    }

    #[test]
    fn rejects_bad_durations() {
        assert!(SimDuration::parse("-1s").is_err());
        assert!(SimDuration::parse("5 parsecs").is_err());
        assert!(SimDuration::parse("ms").is_err());
        // 1e9 hours would be 114,000 years, past the 584 years that u64 nanoseconds hold.
        let e = SimDuration::parse("1000000000h").unwrap_err();
        assert!(e.contains("10 years"), "{e}");
        // Ten years of 365 days is 87,600 hours: the last accepted.
        assert!(SimDuration::parse("87600h").is_ok());
        assert!(SimDuration::parse("87601h").is_err());
    }

    #[test]
    fn display_round_trips() {
        for d in ["250ms", "30s", "17ns"] {
            let parsed = SimDuration::parse(d).unwrap();
            assert_eq!(SimDuration::parse(&parsed.to_string()).unwrap(), parsed);
        }
    }

    #[test]
    fn sums_of_extreme_spans_saturate_instead_of_panicking() {
        let long = SimDuration(u64::MAX - 1);
        assert_eq!(SimTime(5) + long, SimTime::MAX);
        assert_eq!(long + SimDuration(7), SimDuration(u64::MAX));
        let mut t = SimTime::MAX;
        t += SimDuration(1);
        assert_eq!(t, SimTime::MAX);
        // A step time multiplied by an absurd factor, or bytes over an absurd bandwidth.
        assert_eq!(SimDuration::from_secs_f64(1e300), SimDuration(u64::MAX));
        assert_eq!(
            SimDuration::from_secs_f64(f64::INFINITY),
            SimDuration(u64::MAX)
        );
    }

    #[test]
    #[should_panic(expected = "backwards")]
    fn clock_never_goes_backwards() {
        let _ = SimTime(5).since(SimTime(6));
    }
}
