//! Human units for axis ticks: durations in µs, ms, s, min or h, counts with k, M or G, fractions as
//! percentages. An axis picks one display unit from its range ([`Scale::of`]), its data is divided by
//! that unit before plotting, so the chart's round tick positions are round in the displayed unit
//! ("2 min", not "120 s" or "1.67 min"), and every tick reads `number + suffix`.
//!
//! Invariant: a display unit is a pure function of the axis range, so equal data gives equal SVG.

/// What an axis's values measure, in the unit the plotted data is given in.
#[derive(Clone, Copy, Debug)]
pub enum Unit<'a> {
    /// Durations in seconds.
    Seconds,
    /// Durations in milliseconds (latencies).
    Milliseconds,
    /// Counts (tokens, requests, replicas) or rates (tokens/s).
    Count,
    /// Fractions, 1 = 100%.
    Fraction,
    /// A plain number of unknown unit (a swept scenario key): compact digits, no unit.
    Number,
    /// Ordered categories at x = 0, 1, 2, …, labelled by name; no tick between them.
    Categories(&'a [String]),
}

/// An axis's display unit: plotted value = data value / `divisor`, tick = number + `suffix`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scale {
    pub divisor: f64,
    pub suffix: &'static str,
}

/// Duration units, smallest first: (seconds per unit, suffix, used below this many seconds).
const DURATIONS: [(f64, &str, f64); 5] = [
    (1e-6, " µs", 1e-3),
    (1e-3, " ms", 1.0),
    (1.0, " s", 180.0),
    (60.0, " min", 3.0 * 3600.0),
    (3600.0, " h", f64::INFINITY),
];

/// Count multiples: (size, suffix, used from this magnitude). Below 10 000 digits are short enough.
const MULTIPLES: [(f64, &str, f64); 3] = [(1e9, "G", 1e10), (1e6, "M", 1e7), (1e3, "k", 1e4)];

const PLAIN: Scale = Scale {
    divisor: 1.0,
    suffix: "",
};

impl Scale {
    /// The display unit of an axis of `unit` spanning `lo..hi` (in the data's unit): the one its
    /// largest magnitude reads best in.
    pub fn of(unit: Unit, lo: f64, hi: f64) -> Scale {
        let top = lo.abs().max(hi.abs());
        match unit {
            Unit::Seconds => duration_scale(top),
            Unit::Milliseconds => {
                let s = duration_scale(top / 1e3);
                Scale {
                    divisor: s.divisor * 1e3,
                    suffix: s.suffix,
                }
            }
            Unit::Count | Unit::Number => count_scale(top),
            Unit::Fraction => Scale {
                divisor: 0.01,
                suffix: "%",
            },
            Unit::Categories(_) => PLAIN,
        }
    }

    /// `v`, already in this scale's unit, as a tick label (a count's zero is plain `0`, not `0M`).
    pub fn tick(&self, v: f64) -> String {
        let n = trim(v);
        let multiple = MULTIPLES.iter().any(|m| m.1 == self.suffix);
        if n == "0" && multiple {
            n
        } else {
            format!("{n}{}", self.suffix)
        }
    }
}

fn duration_scale(top_s: f64) -> Scale {
    let &(divisor, suffix, _) = DURATIONS
        .iter()
        .find(|(_, _, below)| top_s < *below)
        .unwrap_or(&DURATIONS[DURATIONS.len() - 1]);
    Scale { divisor, suffix }
}

fn count_scale(top: f64) -> Scale {
    MULTIPLES
        .iter()
        .find(|(_, _, from)| top >= *from)
        .map_or(PLAIN, |&(divisor, suffix, _)| Scale { divisor, suffix })
}

/// `v` with at most three decimals and no trailing zeros (`-0` reads `0`).
fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// A duration in seconds in the unit its size reads best in: 0.0123 → `12.3 ms`.
pub fn duration(seconds: f64) -> String {
    let s = duration_scale(seconds.abs());
    s.tick(seconds / s.divisor)
}

/// A count with k, M or G from ten thousand up: 16 000 000 → `16M`, 950 → `950`.
pub fn count(v: f64) -> String {
    let s = count_scale(v.abs());
    s.tick(v / s.divisor)
}

/// A fraction as a percentage: 0.0123 → `1.23%`.
pub fn percent(v: f64) -> String {
    Scale::of(Unit::Fraction, v, v).tick(v * 100.0)
}

/// The label of x = `v` on a [`Unit::Categories`] axis: the category's name at a whole index, nothing
/// between or beyond.
pub fn category(names: &[String], v: f64) -> String {
    let i = v.round();
    if (v - i).abs() < 1e-6 && i >= 0.0 {
        names.get(i as usize).cloned().unwrap_or_default()
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_the_unit_their_size_suggests() {
        assert_eq!(duration(0.0123), "12.3 ms");
        assert_eq!(duration(0.000_25), "250 µs");
        assert_eq!(duration(2.5), "2.5 s");
        assert_eq!(duration(300.0), "5 min");
        assert_eq!(duration(7200.0), "120 min");
        assert_eq!(duration(4.0 * 3600.0), "4 h");
        assert_eq!(duration(0.0), "0 µs");
    }

    #[test]
    fn counts_take_k_m_and_g_from_ten_thousand() {
        assert_eq!(count(16_000_000.0), "16M");
        assert_eq!(count(950.0), "950");
        assert_eq!(count(9_999.0), "9999");
        assert_eq!(count(12_500.0), "12.5k");
        assert_eq!(count(2.5e10), "25G");
        assert_eq!(count(-40_000.0), "-40k");
    }

    #[test]
    fn fractions_read_as_percentages() {
        assert_eq!(percent(0.0123), "1.23%");
        assert_eq!(percent(1.0), "100%");
        assert_eq!(percent(0.997), "99.7%");
    }

    #[test]
    fn an_axis_keeps_one_unit_chosen_by_its_largest_magnitude() {
        // A 0–300 s simulated-time axis ticks in minutes: 150 s is 2.5 min, not "150 s".
        let s = Scale::of(Unit::Seconds, -15.0, 300.0);
        assert_eq!((s.divisor, s.suffix), (60.0, " min"));
        assert_eq!(s.tick(150.0 / s.divisor), "2.5 min");
        // TTFTs of 40–900 ms stay in ms; 40–2500 ms go to seconds.
        assert_eq!(Scale::of(Unit::Milliseconds, 40.0, 900.0).suffix, " ms");
        let s = Scale::of(Unit::Milliseconds, 40.0, 2500.0);
        assert_eq!((s.divisor, s.suffix), (1e3, " s"));
        assert_eq!(s.tick(1500.0 / s.divisor), "1.5 s");
        // Tokens: 16M on a 0–16M axis, with the tick at 4M reading "4M" and not "4000000.0".
        let s = Scale::of(Unit::Count, 0.0, 16e6);
        assert_eq!(s.tick(4e6 / s.divisor), "4M");
        assert_eq!(s.tick(0.0), "0");
        assert_eq!(
            Scale::of(Unit::Fraction, 0.0, 1.0).tick(0.25 * 100.0),
            "25%"
        );
        assert_eq!(Scale::of(Unit::Number, 0.0, 64.0).tick(32.0), "32");
    }

    #[test]
    fn ticks_drop_float_noise_and_negative_zero() {
        assert_eq!(trim(0.30000000000000004), "0.3");
        assert_eq!(trim(-0.0001), "0");
        assert_eq!(trim(1200.0), "1200");
    }

    #[test]
    fn categories_label_whole_positions_only() {
        let names = vec!["0".to_string(), "1".to_string(), "2+".to_string()];
        assert_eq!(category(&names, 2.0), "2+");
        assert_eq!(category(&names, 0.5), "");
        assert_eq!(category(&names, 3.0), "");
        assert_eq!(category(&names, -1.0), "");
    }
}
