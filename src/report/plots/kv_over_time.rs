//! KV-cache utilisation per time-series window: the fleet's mean and its fullest worker, faults marked.

use super::RunPlots;
use super::chart::{Lines, line_chart};
use super::units::Unit;

pub fn plot(p: &RunPlots) -> Result<String, String> {
    let line = |name: &str, f: fn((f64, f64)) -> f64| {
        let pts = p
            .windows
            .iter()
            .filter_map(|w| w.kv_util.map(|kv| (w.mid_s, f(kv))))
            .collect();
        (name.to_string(), pts)
    };
    line_chart(&Lines {
        title: &format!("KV-cache utilisation over time: {}", p.name),
        x_label: "simulated time (window midpoint)",
        y_label: "KV blocks in use (share of the pool)",
        x_unit: Unit::Seconds,
        y_unit: Unit::Fraction,
        series: &[
            line("mean over workers", |kv| kv.0),
            line("fullest worker", |kv| kv.1),
        ],
        markers: &p.faults,
        dots: true,
        y_range: Some((0.0, 1.0)),
    })
}
