//! TTFT CDF: one line per run (one per variant in a comparison), drawn to the 99th percentile so a
//! few slow requests do not squash the body of the distribution (the tables give p99 and the maximum).

use super::chart::{Lines, Series, line_chart};
use super::units::Unit;

/// The CDF plot of `lines` (name, (ms, fraction) points), titled after `what`.
pub fn ttft_cdf(what: &str, lines: &[Series]) -> Result<String, String> {
    let to_p99: Vec<Series> = lines
        .iter()
        .map(|(n, pts)| {
            (
                n.clone(),
                pts.iter().copied().filter(|p| p.1 <= 0.99 + 1e-9).collect(),
            )
        })
        .collect();
    line_chart(&Lines {
        title: &format!("TTFT CDF (to p99): {what}"),
        x_label: "time to first token",
        y_label: "completed requests at or below",
        x_unit: Unit::Milliseconds,
        y_unit: Unit::Fraction,
        series: &to_p99,
        markers: &[],
        dots: false,
        y_range: Some((0.0, 1.0)),
    })
}
