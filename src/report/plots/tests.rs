use super::chart::{Bars, Lines, bar_chart, line_chart};
use super::units::Unit;
use super::*;

/// Whether `svg` has a text element reading exactly `text` (plotters writes it on its own line).
fn has_text(svg: &str, text: &str) -> bool {
    svg.contains(&format!(">\n{text}\n</text>"))
}

fn lines(series: &[chart::Series]) -> String {
    line_chart(&Lines {
        title: "t",
        x_label: "x axis",
        y_label: "y axis",
        x_unit: Unit::Seconds,
        y_unit: Unit::Milliseconds,
        series,
        markers: &[(5.0, "worker 0 down".into())],
        dots: true,
        y_range: None,
    })
    .unwrap()
}

#[test]
fn a_chart_has_a_white_background_axis_units_and_its_markers() {
    let svg = lines(&[("a".into(), vec![(0.0, 1.0), (10.0, 3.0)])]);
    // The first drawn shape is the full-canvas white fill (plotters writes it as a rect).
    let rect = svg.find("<rect").expect("a background rect");
    assert!(
        svg[rect..].starts_with("<rect x=\"0\" y=\"0\" width=\"860\" height=\"480\""),
        "{svg}"
    );
    assert!(
        svg[rect..rect + 120].contains("#FFFFFF"),
        "{}",
        &svg[rect..rect + 120]
    );
    assert!(svg.contains("x axis") && svg.contains("y axis"));
    // Ticks carry the units: seconds on x (0–10 s), milliseconds on y (1–3 ms).
    assert!(has_text(&svg, "10 s") && has_text(&svg, "2 ms"), "{svg}");
    assert!(svg.contains("worker 0 down"));
}

#[test]
fn equal_inputs_give_equal_bytes_and_different_inputs_differ() {
    let a = lines(&[("a".into(), vec![(0.0, 1.0), (10.0, 3.0)])]);
    let b = lines(&[("a".into(), vec![(0.0, 1.0), (10.0, 3.0)])]);
    let c = lines(&[("a".into(), vec![(0.0, 1.0), (10.0, 4.0)])]);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn the_legend_names_every_series_when_there_are_several() {
    let svg = lines(&[
        ("round_robin".into(), vec![(0.0, 1.0), (1.0, 2.0)]),
        ("prefix_aware".into(), vec![(0.0, 2.0), (1.0, 1.0)]),
    ]);
    assert!(svg.contains("round_robin") && svg.contains("prefix_aware"));
}

#[test]
fn bars_draw_one_rectangle_per_present_value_and_label_categories() {
    let cats = vec![
        "turn 0".to_string(),
        "turn 1".to_string(),
        "turn 2".to_string(),
    ];
    let svg = bar_chart(&Bars {
        title: "t",
        x_label: "turn",
        y_label: "TTFT",
        y_unit: Unit::Milliseconds,
        categories: &cats,
        series: &[("p50".into(), vec![Some(1.0), None, Some(3.0)])],
    })
    .unwrap();
    for c in &cats {
        assert!(svg.contains(c.as_str()), "category {c} labelled");
    }
    // Background + plot-area rects from plotters' mesh are not filled with the first palette colour;
    // the bars are: two values present, two bars.
    assert_eq!(svg.matches("fill=\"#0072B2\"").count(), 2, "{svg}");
}

#[test]
fn cdf_points_run_from_the_minimum_to_the_maximum_and_never_fall() {
    let mut l = Latency::default();
    for ms in 1..=100u64 {
        l.record(ms * 1_000_000);
    }
    let pts = cdf_points(&l);
    assert_eq!(pts.len(), CDF_POINTS + 1);
    // Quantile 0 is clamped to the exact minimum, 1 is the exact maximum.
    assert_eq!(pts[0], (1.0, 0.0));
    assert_eq!(pts[CDF_POINTS], (100.0, 1.0));
    assert!(pts.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 < w[1].1));
    // The median of 1..=100 ms is 50 ms (nearest rank), to the histogram's 3 significant digits
    // (a bucket midpoint within 0.1%).
    let mid = pts[CDF_POINTS / 2].0;
    assert!((49.9..=50.1).contains(&mid), "{mid}");
    assert!(cdf_points(&Latency::default()).is_empty());
}

#[test]
fn token_axes_read_in_k_and_m_not_raw_floats() {
    let cats = vec!["preempted".to_string(), "misrouted".to_string()];
    let svg = bar_chart(&Bars {
        title: "t",
        x_label: "cause",
        y_label: "tokens recomputed",
        y_unit: Unit::Count,
        categories: &cats,
        series: &[("tokens".into(), vec![Some(16_000_000.0), Some(4_000_000.0)])],
    })
    .unwrap();
    assert!(has_text(&svg, "16M") && has_text(&svg, "0"), "{svg}");
    assert!(
        !svg.contains("000000\n</text>"),
        "a raw token count on an axis: {svg}"
    );
}

#[test]
fn series_differ_in_dash_and_marker_as_well_as_colour() {
    let two = |x: f64| vec![(0.0, x), (1.0, x + 1.0)];
    let svg = lines(&[
        ("a".into(), two(1.0)),
        ("b".into(), two(2.0)),
        ("c".into(), two(3.0)),
    ]);
    // Series a is solid (one polyline, and one in the legend), b dashed (many short ones), c dotted;
    // each marks its points
    // with its own polygon: an octagon for a, a triangle for b, a square for c.
    let polyline = |colour: &str| {
        svg.matches(&format!(
            "<polyline fill=\"none\" opacity=\"1\" stroke=\"#{colour}\""
        ))
        .count()
    };
    assert_eq!(polyline("0072B2"), 2, "{svg}");
    assert!(polyline("E69F00") > 4 && polyline("009E73") > 4, "{svg}");
    let vertices = |colour: &str| {
        let at = svg
            .find(&format!("<polygon opacity=\"1\" fill=\"#{colour}\""))
            .unwrap_or_else(|| panic!("no {colour} marker"));
        let end = at + svg[at..].find("/>").unwrap();
        svg[at..end].matches(',').count()
    };
    assert_eq!(
        (vertices("0072B2"), vertices("E69F00"), vertices("009E73")),
        (8, 3, 4)
    );
}
