//! A comparison's plots (`compare --out`, `fleetsim report A B --out C`), one line per run (a policy, a
//! variant or a results folder), each drawn from that run's own [`RunPlots`]: the TTFT CDF, p95 TTFT
//! by conversation turn, and p95 TTFT per time-series window over simulated time.
//!
//! Invariant: the lines are the numbers each run's own page plots, so a comparison agrees with the
//! pages it links.

use super::RunPlots;
use super::chart::{Lines, Series, line_chart};
use super::ttft_cdf;
use super::units::Unit;

/// The comparison's plots, (file name, SVG bytes), in page order: the CDF always, the by-turn plot
/// when some run had conversations, the over-time plot when some run had a windowed TTFT. `title`
/// names what is compared; `runs` are (label, plotted numbers).
pub fn files(title: &str, runs: &[(String, &RunPlots)]) -> Result<Vec<(String, Vec<u8>)>, String> {
    let cdf: Vec<Series> = runs
        .iter()
        .map(|(label, p)| (label.clone(), p.ttft_cdf.clone()))
        .collect();
    let mut files = vec![("plot-ttft-cdf.svg", ttft_cdf(title, &cdf)?)];
    if let Some(svg) = ttft_by_turn(title, runs) {
        files.push(("plot-ttft-by-turn.svg", svg?));
    }
    if let Some(svg) = ttft_over_time(title, runs) {
        files.push(("plot-ttft-over-time.svg", svg?));
    }
    Ok(files
        .into_iter()
        .map(|(name, svg)| (name.to_string(), svg.into_bytes()))
        .collect())
}

/// p95 TTFT by conversation turn, one line per run; `None` when no run served a conversation. The
/// turn groups are the summaries' (`0` the cold first turn, the last pooling later turns), in turn
/// order; a run without requests in a group has no point there.
fn ttft_by_turn(title: &str, runs: &[(String, &RunPlots)]) -> Option<Result<String, String>> {
    let mut groups: Vec<String> = Vec::new();
    for (_, p) in runs {
        for (g, _, _) in &p.ttft_by_turn {
            if !groups.contains(g) {
                groups.push(g.clone());
            }
        }
    }
    if groups.is_empty() {
        return None;
    }
    // "4+" sorts after "3": by the number it starts with.
    groups.sort_by_key(|g| g.trim_end_matches('+').parse::<u32>().unwrap_or(u32::MAX));
    let series: Vec<Series> = runs
        .iter()
        .map(|(label, p)| {
            let pts = p
                .ttft_by_turn
                .iter()
                .filter_map(|(g, _, p95)| {
                    let x = groups.iter().position(|n| n == g)?;
                    Some((x as f64, *p95))
                })
                .collect();
            (label.clone(), pts)
        })
        .collect();
    Some(line_chart(&Lines {
        title: &format!("p95 TTFT by conversation turn: {title}"),
        x_label: "conversation turn (0: a conversation's first request)",
        y_label: "p95 TTFT",
        x_unit: Unit::Categories(&groups),
        y_unit: Unit::Milliseconds,
        series: &series,
        markers: &[],
        dots: true,
        y_range: None,
    }))
}

/// p95 TTFT per time-series window, one line per run; `None` when no window of any run completed a
/// request. Faults are marked when every run had the same ones (a `compare` of one scenario).
fn ttft_over_time(title: &str, runs: &[(String, &RunPlots)]) -> Option<Result<String, String>> {
    let series: Vec<Series> = runs
        .iter()
        .map(|(label, p)| {
            let pts = p
                .windows
                .iter()
                .filter_map(|w| w.ttft_p95_ms.map(|v| (w.mid_s, v)))
                .collect();
            (label.clone(), pts)
        })
        .collect();
    if series.iter().all(|(_, pts)| pts.is_empty()) {
        return None;
    }
    let shared_faults = runs
        .windows(2)
        .all(|pair| pair[0].1.faults == pair[1].1.faults);
    let markers = match runs.first() {
        Some((_, p)) if shared_faults => p.faults.as_slice(),
        _ => &[],
    };
    // Dense windows would bury the lines under markers.
    let dense = series.iter().any(|(_, pts)| pts.len() > 60);
    Some(line_chart(&Lines {
        title: &format!("p95 TTFT over time: {title}"),
        x_label: "simulated time (window midpoint)",
        y_label: "p95 TTFT",
        x_unit: Unit::Seconds,
        y_unit: Unit::Milliseconds,
        series: &series,
        markers,
        dots: !dense,
        y_range: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::super::WindowPoint;
    use super::*;

    fn run(name: &str, turns: &[(&str, f64)], p95s: &[Option<f64>]) -> RunPlots {
        RunPlots {
            name: name.to_string(),
            ttft_cdf: vec![(10.0, 0.0), (20.0, 0.5), (40.0, 1.0)],
            windows: p95s
                .iter()
                .enumerate()
                .map(|(i, v)| WindowPoint {
                    mid_s: 5.0 + 10.0 * i as f64,
                    ttft_p50_ms: *v,
                    ttft_p95_ms: *v,
                    hit_rate: None,
                    kv_util: None,
                    replicas: None,
                    model_replicas: Vec::new(),
                })
                .collect(),
            faults: Vec::new(),
            ttft_by_turn: turns
                .iter()
                .map(|(g, v)| (g.to_string(), v / 2.0, *v))
                .collect(),
            recompute: Vec::new(),
            worker_share: Vec::new(),
            band: None,
        }
    }

    fn names(files: &[(String, Vec<u8>)]) -> Vec<&str> {
        files.iter().map(|f| f.0.as_str()).collect()
    }

    #[test]
    fn conversations_give_a_by_turn_overlay_with_every_run_and_every_turn() {
        let a = run(
            "a",
            &[("0", 120.0), ("1", 40.0), ("4+", 35.0)],
            &[Some(50.0)],
        );
        let b = run("b", &[("0", 150.0), ("2", 90.0)], &[Some(80.0)]);
        let files = files(
            "chat",
            &[("round_robin".into(), &a), ("session_affinity".into(), &b)],
        )
        .unwrap();
        assert_eq!(
            names(&files),
            [
                "plot-ttft-cdf.svg",
                "plot-ttft-by-turn.svg",
                "plot-ttft-over-time.svg"
            ]
        );
        let by_turn = String::from_utf8(files[1].1.clone()).unwrap();
        for label in ["round_robin", "session_affinity", "0", "1", "2", "4+"] {
            let text = format!(">\n{label}\n</text>");
            assert!(by_turn.contains(&text), "{label} missing: {by_turn}");
        }
    }

    #[test]
    fn runs_without_conversations_or_windows_get_only_the_cdf() {
        let a = run("a", &[], &[None, None]);
        let files = files("plain", &[("x".into(), &a), ("y".into(), &a)]).unwrap();
        assert_eq!(names(&files), ["plot-ttft-cdf.svg"]);
    }

    #[test]
    fn faults_are_marked_only_when_every_run_shares_them() {
        let mut a = run("a", &[], &[Some(50.0), Some(60.0)]);
        a.faults = vec![(7.0, "crash w0".to_string())];
        let same = a.clone();
        let mut other = a.clone();
        other.faults.clear();
        let svg = |b: &RunPlots| {
            let f = files("f", &[("a".into(), &a), ("b".into(), b)]).unwrap();
            String::from_utf8(f.last().unwrap().1.clone()).unwrap()
        };
        assert!(svg(&same).contains("crash w0"));
        assert!(!svg(&other).contains("crash w0"));
    }
}
