//! Windowed p95 TTFT over independent replications: the mean with its 95% confidence band (`run
//! --replications`).

use super::RunPlots;
use super::chart::{Lines, line_chart};
use super::units::Unit;

/// `None` without replications.
pub fn plot(p: &RunPlots) -> Option<Result<String, String>> {
    let band = p.band.as_ref()?;
    let line = |name: &str, f: fn(&super::BandPoint) -> f64| {
        let pts = band
            .points
            .iter()
            .map(|b| (b.mid_s, f(b)))
            .filter(|(_, v)| v.is_finite())
            .collect();
        (name.to_string(), pts)
    };
    Some(line_chart(&Lines {
        title: &format!(
            "p95 TTFT over time, {} replications: {}",
            band.replications, p.name
        ),
        x_label: "simulated time (window midpoint)",
        y_label: "p95 TTFT",
        x_unit: Unit::Seconds,
        y_unit: Unit::Milliseconds,
        series: &[
            line("mean over replications", |b| b.mean),
            line("95% CI lower", |b| b.low),
            line("95% CI upper", |b| b.high),
        ],
        markers: &p.faults,
        dots: false,
        y_range: None,
    }))
}
