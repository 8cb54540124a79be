//! An autoscaled run's replicas per time-series window (at each window's end): ready, starting and
//! billed, faults marked, and with several autoscaled models each model's billed replicas. No plot for a
//! fleet without an autoscaler.

use super::RunPlots;
use super::chart::{Lines, line_chart};
use super::units::Unit;

pub fn plot(p: &RunPlots) -> Option<Result<String, String>> {
    if p.windows.iter().all(|w| w.replicas.is_none()) {
        return None;
    }
    let line = |name: &str, f: fn((u32, u32, u32)) -> u32| {
        let pts = p
            .windows
            .iter()
            .filter_map(|w| w.replicas.map(|r| (w.mid_s, f64::from(f(r)))))
            .collect();
        (name.to_string(), pts)
    };
    let mut series = vec![
        line("billed", |r| r.2),
        line("ready", |r| r.0),
        line("starting", |r| r.1),
    ];
    // With several autoscaled models, each model's billed replicas too.
    let models: Vec<&str> = p
        .windows
        .iter()
        .find(|w| !w.model_replicas.is_empty())
        .map(|w| w.model_replicas.iter().map(|(m, _)| m.as_str()).collect())
        .unwrap_or_default();
    for (k, model) in models.iter().enumerate() {
        let pts = p
            .windows
            .iter()
            .filter_map(|w| {
                w.model_replicas
                    .get(k)
                    .map(|&(_, n)| (w.mid_s, f64::from(n)))
            })
            .collect();
        series.push((format!("billed: {model}"), pts));
    }
    Some(line_chart(&Lines {
        title: &format!("Replicas over time: {}", p.name),
        x_label: "simulated time (window midpoint; counts at the window's end)",
        y_label: "replicas",
        x_unit: Unit::Seconds,
        y_unit: Unit::Count,
        series: &series,
        markers: &p.faults,
        dots: false,
        y_range: None,
    }))
}
