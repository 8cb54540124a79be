//! The sweep's plots (SVG): a metric against a numeric swept key, one line per combination of the other
//! keys' values.
//!
//! Invariant: a plot is a function of the rows alone (no timestamps), so equal sweeps give equal bytes.

use plotters::prelude::*;

use super::grid::Grid;
use super::table::{METRICS, Row};

/// Metrics plotted, with their axis label.
pub const PLOTTED: [(&str, &str); 4] = [
    ("ttft_p95_ms", "p95 TTFT (ms)"),
    ("tpot_p95_ms", "p95 TPOT (ms)"),
    (
        "goodput_fraction",
        "goodput (fraction of requests within SLO)",
    ),
    ("output_tokens_per_s", "output tokens/s"),
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
    for (metric, label) in PLOTTED {
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
        let svg = line_plot(&title, &grid.axes[x].key, label, &series)?;
        files.push((format!("sweep-{metric}.svg"), svg.into_bytes()));
    }
    Ok(files)
}

fn range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    let pad = if hi > lo {
        (hi - lo) * 0.05
    } else {
        lo.abs().max(1.0) * 0.1
    };
    (lo - pad, hi + pad)
}

/// A line chart of `series` (name, points).
fn line_plot(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<String, String> {
    let err = |e: &dyn std::fmt::Display| format!("cannot draw the plot {title}: {e}");
    let all = || series.iter().flat_map(|s| s.1.iter());
    let (x0, x1) = range(all().map(|p| p.0));
    let (y0, y1) = range(all().map(|p| p.1));
    let y0 = if y0 > 0.0 && y0 < (y1 - y0) { 0.0 } else { y0 };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (860, 520)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(70)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .draw()
            .map_err(|e| err(&e))?;
        for (i, (name, pts)) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
                .map_err(|e| err(&e))?
                .label(if name.is_empty() {
                    "all"
                } else {
                    name.as_str()
                })
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(|e| err(&e))?;
        }
        if series.len() > 1 {
            chart
                .configure_series_labels()
                .border_style(BLACK)
                .background_style(WHITE.mix(0.85))
                .draw()
                .map_err(|e| err(&e))?;
        }
        root.present().map_err(|e| err(&e))?;
    }
    Ok(svg)
}
