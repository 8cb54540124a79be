//! The drawing shared by every plot (the run's, the comparison's and the sweep's): an explicit white
//! background (readable in a dark-mode viewer, which would otherwise show the SVG's transparent canvas
//! as black), one colour-blind-safe palette with a dash pattern and a marker shape per series as well
//! (so lines stay apart in greyscale too), axes ticked in human units ([`super::units`]), and the two
//! chart shapes used: lines and grouped bars.
//!
//! Invariant: a chart is a function of its arguments alone (no clock, no randomness, no hash order), so
//! equal inputs give byte-identical SVG.

use plotters::element::DashedPathElement;
use plotters::prelude::*;

use super::units::{Scale, Unit, category};

/// Canvas size of every plot, pixels.
pub const SIZE: (u32, u32) = (860, 480);

/// Okabe & Ito's colour-blind-safe palette (Color Universal Design, 2002,
/// <https://jfly.uni-koeln.de/color/>), black last.
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

/// Dash patterns of lines, (dash, gap) in pixels, `None` solid; series `i` takes the `i mod 3`-th
/// pattern and the `i mod 4`-th marker, so no two of the palette's eight series share colour, pattern
/// and marker (the two blues, series 0 and 4, differ in pattern).
const DASHES: [Option<(u32, u32)>; 3] = [None, Some((10, 5)), Some((3, 4))];

/// Point markers, series `i` taking the `i mod 4`-th.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Marker {
    Circle,
    Triangle,
    Square,
    Cross,
}

const MARKERS: [Marker; 4] = [
    Marker::Circle,
    Marker::Triangle,
    Marker::Square,
    Marker::Cross,
];

/// Legend swatch width, pixels.
const SWATCH: i32 = 24;

/// The outline of series `i`'s marker, in pixels around its centre: every shape a polygon, so that
/// all series' markers are one element type.
fn marker_outline(i: usize) -> Vec<(i32, i32)> {
    match MARKERS[i % MARKERS.len()] {
        // An octagon reads as a dot at this size.
        Marker::Circle => vec![
            (-1, -4),
            (1, -4),
            (4, -1),
            (4, 1),
            (1, 4),
            (-1, 4),
            (-4, 1),
            (-4, -1),
        ],
        Marker::Triangle => vec![(0, -5), (5, 4), (-5, 4)],
        Marker::Square => vec![(-3, -3), (3, -3), (3, 3), (-3, 3)],
        // An X two pixels thick.
        Marker::Cross => vec![
            (-4, -3),
            (-3, -4),
            (0, -1),
            (3, -4),
            (4, -3),
            (1, 0),
            (4, 3),
            (3, 4),
            (0, 1),
            (-3, 4),
            (-4, 3),
            (-1, 0),
        ],
    }
}

/// Series `i`'s line in a legend: `SWATCH` pixels from its left end, dashed as the series is (a
/// solid line is one dash longer than the swatch).
fn swatch(i: usize) -> DashedPathElement<std::vec::IntoIter<(i32, i32)>, u32> {
    let (dash, gap) = match DASHES[i % DASHES.len()] {
        Some((dash, gap)) => (dash.min(8), gap),
        None => (SWATCH as u32, 1),
    };
    DashedPathElement::new(
        vec![(0, 0), (SWATCH, 0)],
        dash,
        gap,
        colour(i).stroke_width(2),
    )
}

/// Colour of fault markers.
const FAULT: RGBColor = RGBColor(200, 30, 30);

/// A named line: (x, y) points in drawing order.
pub type Series = (String, Vec<(f64, f64)>);

/// What a line chart shows.
pub struct Lines<'a> {
    pub title: &'a str,
    /// Axis descriptions, without units: the ticks carry them ([`super::units`]).
    pub x_label: &'a str,
    pub y_label: &'a str,
    /// What x and y measure, in the units of `series`, `markers` and `y_range`.
    pub x_unit: Unit<'a>,
    pub y_unit: Unit<'a>,
    pub series: &'a [Series],
    /// Vertical markers (x, label), e.g. fault times.
    pub markers: &'a [(f64, String)],
    /// Draw each series' marker on every point (off for dense lines such as CDFs).
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

/// The tick label of `v` (in `scale`'s display unit) on an axis of `unit`.
fn tick(unit: Unit, scale: Scale, v: f64) -> String {
    match unit {
        Unit::Categories(names) => category(names, v),
        _ => scale.tick(v),
    }
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
    // Everything is drawn in the axes' display units.
    let (sx, sy) = (Scale::of(c.x_unit, x0, x1), Scale::of(c.y_unit, y0, y1));
    let at = |(x, y): (f64, f64)| (x / sx.divisor, y / sy.divisor);
    let (x0, x1, y0, y1) = (
        x0 / sx.divisor,
        x1 / sx.divisor,
        y0 / sy.divisor,
        y1 / sy.divisor,
    );
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
            .x_label_formatter(&|v: &f64| tick(c.x_unit, sx, *v))
            .y_label_formatter(&|v: &f64| tick(c.y_unit, sy, *v))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()
            .map_err(|x| e(&x))?;
        for (x, label) in c.markers {
            let x = x / sx.divisor;
            chart
                .draw_series(LineSeries::new(
                    [(x, y0), (x, y1)],
                    FAULT.mix(0.8).stroke_width(1),
                ))
                .map_err(|x| e(&x))?;
            chart
                .draw_series(std::iter::once(Text::new(
                    label.clone(),
                    (x, y1),
                    ("sans-serif", 12).into_font().color(&FAULT),
                )))
                .map_err(|x| e(&x))?;
        }
        for (i, (name, pts)) in c.series.iter().enumerate() {
            let style = colour(i).stroke_width(2);
            let pts: Vec<(f64, f64)> = pts.iter().copied().map(at).collect();
            let drawn = match DASHES[i % DASHES.len()] {
                None => chart.draw_series(LineSeries::new(pts.iter().copied(), style)),
                Some((dash, gap)) => {
                    chart.draw_series(DashedLineSeries::new(pts.iter().copied(), dash, gap, style))
                }
            };
            let entry = drawn
                .map_err(|x| e(&x))?
                .label(if name.is_empty() { "all" } else { name });
            if c.dots {
                let fill = colour(i).filled();
                let mid = (SWATCH / 2, 0);
                entry.legend(move |at| {
                    let outline = marker_outline(i).into_iter().map(|(x, y)| (x + mid.0, y));
                    EmptyElement::at(at)
                        + swatch(i)
                        + Polygon::new(outline.collect::<Vec<_>>(), fill)
                });
                chart
                    .draw_series(
                        pts.iter()
                            .map(|&p| EmptyElement::at(p) + Polygon::new(marker_outline(i), fill)),
                    )
                    .map_err(|x| e(&x))?;
            } else {
                entry.legend(move |at| EmptyElement::at(at) + swatch(i));
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
    /// The y axis's description, without its unit: the ticks carry it.
    pub y_label: &'a str,
    /// What the bars' values measure.
    pub y_unit: Unit<'a>,
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
    let sy = Scale::of(c.y_unit, 0.0, top);
    let top = top / sy.divisor;
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
            .x_labels(c.categories.len() * 2 + 1)
            // Label only the centre of each category's slot.
            .x_label_formatter(&|x: &f64| category(c.categories, x - 0.5))
            .y_label_formatter(&|v: &f64| tick(c.y_unit, sy, *v))
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
                        let v = v / sy.divisor;
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
