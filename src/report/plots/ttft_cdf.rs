//! TTFT CDF: one line per run (one per variant in a comparison).

use super::chart::{Lines, Series, line_chart};

/// The CDF plot of `lines` (name, (ms, fraction) points), titled after `what`.
pub fn ttft_cdf(what: &str, lines: &[Series]) -> Result<String, String> {
    line_chart(&Lines {
        title: &format!("TTFT CDF: {what}"),
        x_label: "time to first token (ms)",
        y_label: "fraction of completed requests",
        series: lines,
        markers: &[],
        dots: false,
        y_range: Some((0.0, 1.0)),
    })
}
