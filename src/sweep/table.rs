//! The sweep's tables: one row per point, the swept values and every headline metric (mean over the
//! replicas, and their sample standard deviation when there are several), as Parquet, CSV and Markdown.
//!
//! Invariant: the tables are a function of the point files alone, so a merged sweep and one that ran
//! through in one go write the same bytes.

use std::fmt::Write as _;

use polars::prelude::*;

use super::grid::Grid;
use super::store::PointResult;
use crate::metrics::headline::{FLEET_METRICS, Metric, join};
use crate::metrics::summary::Summary;

/// Headline metrics of a sweep, in column order, with whether lower is better. The last ones are
/// [`crate::metrics::headline::FLEET_METRICS`]: written only when some point has a value (a sweep over
/// a fleet with several models, LoRA adapters or an autoscaler).
pub const METRICS: [Metric; 25] = join(CORE, FLEET_METRICS);

const CORE: [Metric; 14] = [
    ("completed", false),
    ("failed", true),
    ("rejected", true),
    ("ttft_p50_ms", true),
    ("ttft_p95_ms", true),
    ("ttft_p99_ms", true),
    ("tpot_p95_ms", true),
    ("e2e_p95_ms", true),
    ("queue_p95_ms", true),
    ("requests_per_s", false),
    ("output_tokens_per_s", false),
    ("goodput_fraction", false),
    ("goodput_requests_per_s", false),
    ("prefix_hit_rate", false),
];

/// The headline metrics of one run, in [`METRICS`] order; `None` for a statistic of an empty set.
pub fn headline(s: &Summary) -> Vec<(&'static str, Option<f64>)> {
    use crate::metrics::summary::Dist;
    let stat = |d: &Dist, v: f64| (d.count > 0).then_some(v);
    let values = [
        Some(s.requests.completed as f64),
        Some(s.requests.failed as f64),
        Some(s.requests.rejected as f64),
        stat(&s.ttft_ms, s.ttft_ms.p50),
        stat(&s.ttft_ms, s.ttft_ms.p95),
        stat(&s.ttft_ms, s.ttft_ms.p99),
        stat(&s.tpot_ms, s.tpot_ms.p95),
        stat(&s.e2e_ms, s.e2e_ms.p95),
        stat(&s.queue_ms, s.queue_ms.p95),
        Some(s.throughput.requests_per_s),
        Some(s.throughput.output_tokens_per_s),
        Some(s.goodput.fraction),
        Some(s.goodput.requests_per_s),
        (s.prefix_cache.prompt_tokens > 0).then_some(s.prefix_cache.hit_rate),
    ];
    let fleet = crate::metrics::headline::values(s);
    let fleet = FLEET_METRICS
        .iter()
        .map(|(k, _)| Some(fleet[k]).filter(|v| !v.is_nan()));
    METRICS
        .iter()
        .map(|(k, _)| *k)
        .zip(values.into_iter().chain(fleet))
        .collect()
}

/// Mean and sample standard deviation of the defined values (`None` where there are too few).
pub fn mean_sd(values: &[Option<f64>]) -> (Option<f64>, Option<f64>) {
    let v: Vec<f64> = values.iter().flatten().copied().collect();
    if v.is_empty() {
        return (None, None);
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let sd = (v.len() >= 2).then(|| {
        let ss: f64 = v.iter().map(|x| (x - mean).powi(2)).sum();
        (ss / (n - 1.0)).sqrt()
    });
    (Some(mean), sd)
}

/// One row of the sweep table.
#[derive(Clone, Debug)]
pub struct Row {
    pub point: usize,
    /// The swept values, in axis order.
    pub values: Vec<String>,
    pub replicas: usize,
    /// Per metric in [`METRICS`] order: mean, sample standard deviation and the half-width of the 95%
    /// confidence interval of the mean (Student t over the replicas with a value).
    pub metrics: Vec<(Option<f64>, Option<f64>, Option<f64>)>,
}

/// The rows of a finished sweep, in grid order.
pub fn rows(grid: &Grid, points: &[PointResult]) -> Vec<Row> {
    points
        .iter()
        .map(|p| {
            let coords = grid.coordinates(p.point);
            let values = coords
                .iter()
                .zip(&grid.axes)
                .map(|(&c, a)| a.values[c].clone())
                .collect();
            let metrics = METRICS
                .iter()
                .map(|(k, _)| {
                    let per: Vec<Option<f64>> = p
                        .replicas
                        .iter()
                        .map(|r| r.metrics.get(*k).copied().flatten())
                        .collect();
                    let (m, sd) = mean_sd(&per);
                    let n = per.iter().flatten().count() as u32;
                    let hw = sd.map(|sd| {
                        crate::confidence::t_critical(crate::confidence::LEVEL, n - 1) * sd
                            / f64::from(n).sqrt()
                    });
                    (m, sd, hw)
                })
                .collect();
            Row {
                point: p.point,
                values,
                replicas: p.replicas.len(),
                metrics,
            }
        })
        .collect()
}

/// The indices into [`METRICS`] of the metrics the tables hold: every core metric, and a fleet
/// metric where some row has a value.
fn columns(rows: &[Row]) -> Vec<usize> {
    (0..METRICS.len())
        .filter(|&j| {
            crate::metrics::headline::shown(
                METRICS[j].0,
                rows.iter().any(|r| r.metrics[j].0.is_some()),
            )
        })
        .collect()
}

/// Column names: `point`, the keys, `replicas`, each metric and (with replicas) `METRIC_sd` and
/// `METRIC_ci95` (the half-width of the mean's 95% confidence interval).
fn header(grid: &Grid, rows: &[Row], spread: bool) -> Vec<String> {
    let mut h = vec!["point".to_string()];
    h.extend(grid.axes.iter().map(|a| a.key.clone()));
    h.push("replicas".into());
    for k in columns(rows).into_iter().map(|j| METRICS[j].0) {
        h.push(k.to_string());
        if spread {
            h.push(format!("{k}_sd"));
            h.push(format!("{k}_ci95"));
        }
    }
    h
}

fn cell(v: Option<f64>) -> String {
    v.map(|x| format!("{x}")).unwrap_or_default()
}

/// `sweep.csv`: numbers in full precision, an empty cell for a statistic of an empty set.
pub fn to_csv(grid: &Grid, rows: &[Row], spread: bool) -> Vec<u8> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(header(grid, rows, spread))
        .expect("in-memory CSV");
    let columns = columns(rows);
    for r in rows {
        let mut rec = vec![r.point.to_string()];
        rec.extend(r.values.iter().cloned());
        rec.push(r.replicas.to_string());
        for (m, sd, hw) in columns.iter().map(|&j| &r.metrics[j]) {
            rec.push(cell(*m));
            if spread {
                rec.push(cell(*sd));
                rec.push(cell(*hw));
            }
        }
        w.write_record(rec).expect("in-memory CSV");
    }
    w.into_inner().expect("in-memory CSV")
}

fn short(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e15 {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// `sweep.md`: a readable table of the main metrics (`mean ± 95% half-width` with replicas).
pub fn to_markdown(scenario: &str, grid: &Grid, rows: &[Row], spread: bool) -> String {
    const SHOWN: [&str; 8] = [
        "completed",
        "failed",
        "ttft_p95_ms",
        "tpot_p95_ms",
        "e2e_p95_ms",
        "output_tokens_per_s",
        "goodput_fraction",
        "prefix_hit_rate",
    ];
    let mut o = String::new();
    let replicas = rows.first().map_or(0, |r| r.replicas);
    let _ = writeln!(
        o,
        "# {scenario} — sweep of {} points × {replicas} replica(s)\n",
        rows.len()
    );
    if spread {
        o.push_str(
            "Values are the mean over the replicas ± the half-width of its 95% confidence interval (Student t; replica r of every point runs the same seed).\n\n",
        );
    }
    let _ = write!(o, "| point |");
    for a in &grid.axes {
        let _ = write!(o, " {} |", a.key);
    }
    // The fleet metrics some point has come after the core ones.
    let fleet: Vec<&str> = columns(rows)
        .into_iter()
        .map(|j| METRICS[j].0)
        .filter(|k| crate::metrics::headline::is_fleet_metric(k))
        .collect();
    let shown: Vec<&str> = SHOWN.into_iter().chain(fleet).collect();
    for &k in &shown {
        let lower = METRICS.iter().find(|(m, _)| *m == k).is_some_and(|m| m.1);
        let _ = write!(o, " {k} {} |", if lower { "↓" } else { "↑" });
    }
    o.push_str("\n|---:|");
    for _ in &grid.axes {
        o.push_str("---|");
    }
    for _ in &shown {
        o.push_str("---:|");
    }
    o.push('\n');
    for r in rows {
        let _ = write!(o, "| {} |", r.point);
        for v in &r.values {
            let _ = write!(o, " {v} |");
        }
        for &k in &shown {
            let i = METRICS
                .iter()
                .position(|(m, _)| *m == k)
                .expect("shown metric");
            let (m, _, hw) = r.metrics[i];
            let text = match (m, hw) {
                (None, _) => "–".to_string(),
                (Some(m), Some(hw)) if spread => format!("{} ± {}", short(m), short(hw)),
                (Some(m), _) => short(m),
            };
            let _ = write!(o, " {text} |");
        }
        o.push('\n');
    }
    o
}

/// `sweep.parquet`: the CSV's columns, typed (swept values as text, metrics as nullable float64).
pub fn to_parquet(grid: &Grid, rows: &[Row], spread: bool) -> PolarsResult<Vec<u8>> {
    let n = rows.len();
    let mut cols: Vec<Column> = Vec::new();
    cols.push(Column::new(
        "point".into(),
        rows.iter().map(|r| r.point as u64).collect::<Vec<u64>>(),
    ));
    for (i, a) in grid.axes.iter().enumerate() {
        cols.push(Column::new(
            a.key.as_str().into(),
            rows.iter()
                .map(|r| r.values[i].clone())
                .collect::<Vec<String>>(),
        ));
    }
    cols.push(Column::new(
        "replicas".into(),
        rows.iter().map(|r| r.replicas as u32).collect::<Vec<u32>>(),
    ));
    for j in columns(rows) {
        let k = METRICS[j].0;
        cols.push(Column::new(
            k.into(),
            rows.iter()
                .map(|r| r.metrics[j].0)
                .collect::<Vec<Option<f64>>>(),
        ));
        if spread {
            cols.push(Column::new(
                format!("{k}_sd").into(),
                rows.iter()
                    .map(|r| r.metrics[j].1)
                    .collect::<Vec<Option<f64>>>(),
            ));
            cols.push(Column::new(
                format!("{k}_ci95").into(),
                rows.iter()
                    .map(|r| r.metrics[j].2)
                    .collect::<Vec<Option<f64>>>(),
            ));
        }
    }
    let mut df = DataFrame::new(n, cols)?;
    let mut buf = Vec::new();
    ParquetWriter::new(&mut buf).finish(&mut df)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_sample_sd() {
        // 1, 2, 3: mean 2, sample variance ((1)+(0)+(1))/2 = 1.
        assert_eq!(
            mean_sd(&[Some(1.0), Some(2.0), Some(3.0)]),
            (Some(2.0), Some(1.0))
        );
        assert_eq!(mean_sd(&[Some(4.0), None]), (Some(4.0), None));
        assert_eq!(mean_sd(&[None]), (None, None));
    }

    #[test]
    fn parquet_round_trips_through_polars() {
        let grid = Grid::parse(&["workers.0.count=2,4".into()]).unwrap();
        let rows = vec![
            Row {
                point: 0,
                values: vec!["2".into()],
                replicas: 1,
                metrics: METRICS.iter().map(|_| (Some(1.5), None, None)).collect(),
            },
            Row {
                point: 1,
                values: vec!["4".into()],
                replicas: 1,
                metrics: METRICS.iter().map(|_| (None, None, None)).collect(),
            },
        ];
        let bytes = to_parquet(&grid, &rows, false).unwrap();
        let df = ParquetReader::new(std::io::Cursor::new(bytes))
            .finish()
            .unwrap();
        assert_eq!(df.height(), 2);
        // The core metrics; a fleet metric only where a row has a value (every one here).
        assert_eq!(df.width(), 3 + METRICS.len());
        let ttft = df.column("ttft_p95_ms").unwrap().f64().unwrap().clone();
        assert_eq!(ttft.get(0), Some(1.5));
        assert_eq!(ttft.get(1), None);
        let key = df.column("workers.0.count").unwrap().str().unwrap().clone();
        assert_eq!(key.get(1), Some("4"));
    }

    #[test]
    fn fleet_metrics_are_written_only_where_a_point_has_one() {
        let grid = Grid::parse(&["workers.0.count=2,4".into()]).unwrap();
        let core = |j: usize| !crate::metrics::headline::is_fleet_metric(METRICS[j].0);
        let row = |point: usize, swaps: Option<f64>| Row {
            point,
            values: vec![(2 * point + 2).to_string()],
            replicas: 1,
            metrics: (0..METRICS.len())
                .map(|j| match METRICS[j].0 {
                    "swaps" => (swaps, None, None),
                    _ if core(j) => (Some(1.0), None, None),
                    _ => (None, None, None),
                })
                .collect(),
        };
        let plain = String::from_utf8(to_csv(&grid, &[row(0, None), row(1, None)], false)).unwrap();
        let header = plain.lines().next().unwrap();
        assert_eq!(header.split(',').count(), 3 + 14);
        assert!(!header.contains("swaps"));
        let swapped = vec![row(0, None), row(1, Some(3.0))];
        let csv = String::from_utf8(to_csv(&grid, &swapped, false)).unwrap();
        assert!(csv.lines().next().unwrap().ends_with(",swaps"), "{csv}");
        assert!(csv.lines().nth(2).unwrap().ends_with(",3"), "{csv}");
        let md = to_markdown("s", &grid, &swapped, false);
        assert!(md.contains("swaps ↓"), "{md}");
    }
}
