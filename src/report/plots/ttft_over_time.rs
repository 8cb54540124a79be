//! p50 and p95 TTFT per time-series window, faults marked.

use super::RunPlots;
use super::chart::{Lines, line_chart};
use super::units::Unit;

pub fn plot(p: &RunPlots) -> Result<String, String> {
    let line = |name: &str, f: fn(&super::WindowPoint) -> Option<f64>| {
        let pts = p
            .windows
            .iter()
            .filter_map(|w| f(w).map(|v| (w.mid_s, v)))
            .collect();
        (name.to_string(), pts)
    };
    line_chart(&Lines {
        title: &format!("TTFT over time: {}", p.name),
        x_label: "simulated time (window midpoint)",
        y_label: "TTFT",
        x_unit: Unit::Seconds,
        y_unit: Unit::Milliseconds,
        series: &[
            line("p50", |w| w.ttft_p50_ms),
            line("p95", |w| w.ttft_p95_ms),
        ],
        markers: &p.faults,
        dots: true,
        y_range: None,
    })
}
