//! The drawing shared by every plot (the run's, the comparison's and the sweep's): an explicit white
//! background (readable in a dark-mode viewer, which would otherwise show the SVG's transparent canvas
//! as black), one colour-blind-safe palette, labelled axes, and the two chart shapes used: lines and
//! grouped bars.
//!
//! Invariant: a chart is a function of its arguments alone (no clock, no randomness, no hash order), so
//! equal inputs give byte-identical SVG.

use plotters::prelude::*;

/// Canvas size of every plot, pixels.
pub const SIZE: (u32, u32) = (860, 480);

/// Okabe & Ito's colour-blind-safe palette (Color Universal Design, 2002), black last.
const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(213, 94, 0),
    RGBColor(86, 180, 233),
    RGBColor(204, 121, 167),
    RGBColor(240, 228, 66),
    RGBColor(0, 0, 0),
];

/// The `i`-th series colour (cycles after eight).
pub fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Colour of fault markers.
const FAULT: RGBColor = RGBColor(200, 30, 30);

/// A named line: (x, y) points in drawing order.
pub type Series = (String, Vec<(f64, f64)>);

/// What a line chart shows.
pub struct Lines<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub series: &'a [Series],
    /// Vertical markers (x, label), e.g. fault times.
    pub markers: &'a [(f64, String)],
    /// Draw a dot on every point (off for dense lines such as CDFs).
    pub dots: bool,
    /// Fixed y range instead of one fitted to the data (e.g. 0..1 for fractions).
    pub y_range: Option<(f64, f64)>,
}

/// `values`' range padded by 5% (a degenerate range is widened so the axis has a length).
pub fn range(values: impl Iterator<Item = f64>) -> (f64, f64) {
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

fn err(title: &str, e: &dyn std::fmt::Display) -> String {
    format!("cannot draw the plot {title}: {e}")
}

/// A line chart as SVG text.
pub fn line_chart(c: &Lines) -> Result<String, String> {
    let e = |x: &dyn std::fmt::Display| err(c.title, x);
    let all = || c.series.iter().flat_map(|s| s.1.iter());
    let (x0, x1) = range(all().map(|p| p.0).chain(c.markers.iter().map(|m| m.0)));
    let (y0, y1) = c.y_range.unwrap_or_else(|| {
        let (y0, y1) = range(all().map(|p| p.1));
        // Start at zero when the data sits closer to zero than its own spread.
        (if y0 > 0.0 && y0 < (y1 - y0) { 0.0 } else { y0 }, y1)
    });
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|x| e(&x))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(c.title, ("sans-serif", 18))
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(72)
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(|x| e(&x))?;
        chart
            .configure_mesh()
            .x_desc(c.x_label)
            .y_desc(c.y_label)
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(|x| e(&x))?;
        for (x, label) in c.markers {
            chart
                .draw_series(LineSeries::new(
                    [(*x, y0), (*x, y1)],
                    FAULT.mix(0.8).stroke_width(1),
                ))
                .map_err(|x| e(&x))?;
            chart
                .draw_series(std::iter::once(Text::new(
                    label.clone(),
                    (*x, y1),
                    ("sans-serif", 12).into_font().color(&FAULT),
                )))
                .map_err(|x| e(&x))?;
        }
        for (i, (name, pts)) in c.series.iter().enumerate() {
            let col = colour(i);
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), col.stroke_width(2)))
                .map_err(|x| e(&x))?
                .label(if name.is_empty() { "all" } else { name })
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], col.stroke_width(2))
                });
            if c.dots {
                chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, 3, col.filled())))
                    .map_err(|x| e(&x))?;
            }
        }
        if c.series.len() > 1 {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::LowerRight)
                .border_style(BLACK)
                .background_style(WHITE.mix(0.9))
                .draw()
                .map_err(|x| e(&x))?;
        }
        root.present().map_err(|x| e(&x))?;
    }
    Ok(svg)
}

/// What a grouped bar chart shows: one group of bars per category, one bar per series in each.
pub struct Bars<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub categories: &'a [String],
    /// (series name, one value per category; `None` draws no bar).
    pub series: &'a [(String, Vec<Option<f64>>)],
}

/// A grouped bar chart as SVG text; the y axis starts at zero.
pub fn bar_chart(c: &Bars) -> Result<String, String> {
    let e = |x: &dyn std::fmt::Display| err(c.title, x);
    let n = c.categories.len().max(1) as f64;
    let top = c
        .series
        .iter()
        .flat_map(|s| s.1.iter().flatten())
        .fold(0.0f64, |a, &v| a.max(v));
    let top = if top > 0.0 { top * 1.1 } else { 1.0 };
    let cats = c.categories.to_vec();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|x| e(&x))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(c.title, ("sans-serif", 18))
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(72)
            .build_cartesian_2d(0.0..n, 0.0..top)
            .map_err(|x| e(&x))?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(cats.len() * 2 + 1)
            .x_label_formatter(&|x: &f64| {
                // Label only the centre of each category's slot.
                let i = x.floor();
                if (x - i - 0.5).abs() < 1e-6 && i >= 0.0 {
                    cats.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .x_desc(c.x_label)
            .y_desc(c.y_label)
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(|x| e(&x))?;
        let k = c.series.len().max(1) as f64;
        let width = 0.8 / k;
        for (j, (name, values)) in c.series.iter().enumerate() {
            let col = colour(j);
            chart
                .draw_series(values.iter().enumerate().filter_map(|(i, v)| {
                    v.map(|v| {
                        let x = i as f64 + 0.1 + j as f64 * width;
                        Rectangle::new([(x, 0.0), (x + width * 0.95, v)], col.filled())
                    })
                }))
                .map_err(|x| e(&x))?
                .label(name.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], col.filled()));
        }
        if c.series.len() > 1 {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .border_style(BLACK)
                .background_style(WHITE.mix(0.9))
                .draw()
                .map_err(|x| e(&x))?;
        }
        root.present().map_err(|x| e(&x))?;
    }
    Ok(svg)
}
