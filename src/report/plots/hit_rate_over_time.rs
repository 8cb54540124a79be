//! Prefix-cache hit rate (cached / prompt tokens) per time-series window, faults marked.

use super::RunPlots;
use super::chart::{Lines, line_chart};
use super::units::Unit;

pub fn plot(p: &RunPlots) -> Result<String, String> {
    let pts = p
        .windows
        .iter()
        .filter_map(|w| w.hit_rate.map(|h| (w.mid_s, h)))
        .collect();
    line_chart(&Lines {
        title: &format!("Prefix-cache hit rate over time: {}", p.name),
        x_label: "simulated time (window midpoint)",
        y_label: "hit rate (cached / prompt tokens)",
        x_unit: Unit::Seconds,
        y_unit: Unit::Fraction,
        series: &[("hit rate".to_string(), pts)],
        markers: &p.faults,
        dots: true,
        y_range: Some((0.0, 1.0)),
    })
}
