//! Exporters: each turns results into bytes; [`write_files`] is the one place that writes them.

use std::path::Path;

use anyhow::Result;

use crate::engine::RunOutput;
use crate::metrics::requests::RequestSink;
use crate::metrics::summary::Summary;
use crate::routing::router::DecisionRecord;
use crate::scenario::Scenario;

pub mod folder;
pub mod html;
pub mod plots;
pub mod provenance;
pub mod requests;
pub mod workers;

/// A results folder being written: where, and whether `requests.csv` accompanies `requests.parquet`.
#[derive(Clone, Copy, Debug)]
pub struct ResultsDir<'a> {
    pub dir: &'a Path,
    pub requests_csv: bool,
}

impl ResultsDir<'_> {
    /// The sink that streams a run of `scenario` into this folder's `requests.parquet` (and CSV).
    pub fn request_sink(&self, scenario: &Scenario) -> Result<Box<dyn RequestSink>, String> {
        Ok(Box::new(requests::ParquetSink::create(
            self.dir,
            self.requests_csv,
            requests::Labels::of(scenario),
        )?))
    }
}

/// A file to write: its name within the results directory and its contents.
pub type OutputFile = (String, Vec<u8>);

/// The files of one run written at its end: `summary.json`, `summary.md`, `run_info.json`,
/// `timeseries.csv`, `workers.csv`, the plots (`plot-*.svg`), `report.html`, if decisions were logged
/// `decisions.csv`, and if requests were placed by model `swaps.csv`. (`requests.parquet`
/// streams in while the run goes: [`ResultsDir::request_sink`].)
/// `scenario` is the one that ran (resolved: a `compare` variant with its router), for `run_info.json`.
pub fn run_files(scenario: &Scenario, out: &RunOutput, wall_s: f64) -> Result<Vec<OutputFile>> {
    run_files_with(scenario, out, wall_s, None)
}

/// [`run_files`], with the windowed p95 TTFT band over replications (`run --replications`) drawn too.
pub fn run_files_with(
    scenario: &Scenario,
    out: &RunOutput,
    wall_s: f64,
    band: Option<plots::Band>,
) -> Result<Vec<OutputFile>> {
    let s = &out.summary;
    let info = provenance::run_info(scenario, out, wall_s, std::time::SystemTime::now());
    let mut files = vec![
        ("summary.json".to_string(), s.to_json().into_bytes()),
        ("summary.md".to_string(), s.to_markdown().into_bytes()),
        (
            "run_info.json".to_string(),
            (serde_json::to_string_pretty(&info)? + "\n").into_bytes(),
        ),
        ("timeseries.csv".to_string(), out.collector.series.to_csv()),
        ("workers.csv".to_string(), workers::workers_csv(out)?),
    ];
    if !out.decisions.is_empty() {
        files.push(("decisions.csv".to_string(), decisions_csv(&out.decisions)?));
    }
    if s.models.is_some() {
        files.push(("swaps.csv".to_string(), swaps_csv(&out.swaps)?));
    }
    let mut p = plots::RunPlots::of(out);
    p.band = band;
    files.extend(page_files(s, &p)?);
    Ok(files)
}

/// A run's page and plots: `report.html` then the `plot-*.svg` files, drawn from `plots`. The one
/// place both `run` and `fleetsim report` draw a run's page, so a rebuilt page is the run's own.
pub fn page_files(s: &Summary, plots: &plots::RunPlots) -> Result<Vec<OutputFile>> {
    let svgs = plots.files().map_err(anyhow::Error::msg)?;
    let mut files = vec![(
        "report.html".to_string(),
        html::run_page(s, &svgs).into_bytes(),
    )];
    files.extend(svgs);
    Ok(files)
}

/// The decision log as CSV, one row per decision.
pub fn decisions_csv(decisions: &[DecisionRecord]) -> Result<Vec<u8>> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for d in decisions {
        w.serialize(d)?;
    }
    Ok(w.into_inner()?)
}

/// The swap log as CSV, one row per swap in the order they began (a header only when none happened).
pub fn swaps_csv(swaps: &[crate::metrics::models::SwapRecord]) -> Result<Vec<u8>> {
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new());
    w.write_record([
        "decided_s",
        "worker",
        "from",
        "to",
        "drain_s",
        "swap_s",
        "completed",
    ])?;
    for r in swaps {
        w.serialize(r)?;
    }
    Ok(w.into_inner()?)
}

/// Writes `files` into `dir`, creating it: each through a temporary file renamed into place once all are
/// written ([`crate::output::write_dir`]), so a failure leaves the previous results whole.
pub fn write_files(dir: &Path, files: &[OutputFile]) -> Result<()> {
    crate::output::write_dir(dir, files, &[])?;
    Ok(())
}
