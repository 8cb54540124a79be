//! The sweep's plots (SVG): a metric against a numeric swept key, one line per combination of the other
//! keys' values.
//!
//! Invariant: a plot is a function of the rows alone (no timestamps), so equal sweeps give equal bytes.

use super::grid::Grid;
use super::table::{METRICS, Row};
use crate::report::plots::chart::{Lines, line_chart};
use crate::report::plots::units::Unit;

/// Metrics plotted, with their axis label and unit.
pub const PLOTTED: [(&str, &str, Unit<'static>); 4] = [
    ("ttft_p95_ms", "p95 TTFT", Unit::Milliseconds),
    ("tpot_p95_ms", "p95 TPOT", Unit::Milliseconds),
    (
        "goodput_fraction",
        "goodput (requests within SLO)",
        Unit::Fraction,
    ),
    ("output_tokens_per_s", "output tokens/s", Unit::Count),
];

/// The axis plotted along x: the first whose values are all numbers and which has at least two.
pub fn x_axis(grid: &Grid) -> Option<usize> {
    grid.axes
        .iter()
        .position(|a| a.values.len() >= 2 && a.values.iter().all(|v| v.parse::<f64>().is_ok()))
}

/// One SVG per plotted metric, named `sweep-METRIC.svg`; none when no swept key is numeric.
pub fn plots(scenario: &str, grid: &Grid, rows: &[Row]) -> Result<Vec<(String, Vec<u8>)>, String> {
    let Some(x) = x_axis(grid) else {
        return Ok(Vec::new());
    };
    let mut files = Vec::new();
    for (metric, label, unit) in PLOTTED {
        let j = METRICS
            .iter()
            .position(|(m, _)| *m == metric)
            .expect("plotted metric is a sweep metric");
        // Series: the other axes' values, in the order they first appear (grid order).
        let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
        for r in rows {
            let name = r
                .values
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != x)
                .map(|(i, v)| format!("{}={v}", grid.axes[i].key))
                .collect::<Vec<_>>()
                .join(", ");
            let xv: f64 = r.values[x].parse().expect("numeric axis");
            let pos = match series.iter().position(|(n, _)| *n == name) {
                Some(p) => p,
                None => {
                    series.push((name, Vec::new()));
                    series.len() - 1
                }
            };
            if let Some(y) = r.metrics[j].0 {
                series[pos].1.push((xv, y));
            }
        }
        for s in &mut series {
            s.1.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        let title = format!("{scenario}: {metric} vs {}", grid.axes[x].key);
        let svg = line_plot(&title, &grid.axes[x].key, (label, unit), &series)?;
        files.push((format!("sweep-{metric}.svg"), svg.into_bytes()));
    }
    Ok(files)
}

/// A line chart of `series` (name, points) against the swept key `x_label` (a number of its own
/// unit), drawn by the report's shared chart helper.
fn line_plot(
    title: &str,
    x_label: &str,
    (y_label, y_unit): (&str, Unit),
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<String, String> {
    line_chart(&Lines {
        title,
        x_label,
        y_label,
        x_unit: Unit::Number,
        y_unit,
        series,
        markers: &[],
        dots: true,
        y_range: None,
    })
}
