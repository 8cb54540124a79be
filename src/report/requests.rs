//! `requests.parquet` (and its CSV copy): one row per request, streamed in row groups as requests finish.
//!
//! Schema (documented in docs/results.md; plain types so that Python polars and pandas read it as is):
//! integers are `i64`, times are both exact nanoseconds (`*_ns`, `i64`) and seconds (`*_s`, `f64`), texts
//! are `str`, and a value that does not exist (the first token of a rejected request, the turn of a
//! request outside any session) is null, never 0 or -1.
//!
//! Invariants: one row per request that arrived, in finishing order; `ttft_ns` is
//! `first_token_ns - arrival_ns` and is set exactly for completed requests, so the summary's TTFT
//! distribution is the distribution of this column.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use polars::prelude::*;

use crate::metrics::record::{Outcome, RecomputeCause, RequestRecord};
use crate::metrics::requests::RequestSink;
use crate::output::AtomicFile;

/// Column names and types of `requests.parquet`, in order.
pub const COLUMNS: [(&str, &str); 38] = [
    ("request_id", "i64"),
    ("session_id", "i64"),
    ("turn", "i64"),
    ("worker", "i64"),
    ("outcome", "str"),
    ("reason", "str"),
    ("arrival_ns", "i64"),
    ("first_scheduled_ns", "i64"),
    ("first_token_ns", "i64"),
    ("finished_ns", "i64"),
    ("arrival_s", "f64"),
    ("first_scheduled_s", "f64"),
    ("first_token_s", "f64"),
    ("finished_s", "f64"),
    ("ttft_ns", "i64"),
    ("queue_ns", "i64"),
    ("e2e_ns", "i64"),
    ("prompt_tokens", "i64"),
    ("cached_tokens", "i64"),
    ("loaded_tokens", "i64"),
    ("prefill_tokens", "i64"),
    ("output_tokens", "i64"),
    ("recomputed_tokens", "i64"),
    ("recompute_cause", "str"),
    ("recompute_evicted_tokens", "i64"),
    ("recompute_misrouted_tokens", "i64"),
    ("recompute_failure_tokens", "i64"),
    ("recompute_preempted_tokens", "i64"),
    ("recompute_migrated_tokens", "i64"),
    ("recompute_moved_tokens", "i64"),
    ("history_tokens", "i64"),
    ("history_reprefilled_tokens", "i64"),
    ("preemptions", "i64"),
    ("retries", "i64"),
    ("session_reset", "bool"),
    ("class", "str"),
    ("model", "str"),
    ("adapter", "str"),
];

/// The names of what a [`RequestRecord`] holds as an index or an id: its traffic class and its LoRA
/// adapter. Built from the scenario that ran, so that metrics need not know it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Labels {
    /// Class names by index; empty without a traffic mix (the `class` column is then null).
    pub classes: Vec<String>,
    /// Adapter names by id, for every adapter the scenario's workload may ask for.
    pub adapters: rustc_hash::FxHashMap<u64, String>,
}

impl Labels {
    /// The classes and adapters of `s`'s workload (and of each class's traffic): the adapters of an
    /// `adapters` table, and those a trace's rows name (read from the trace once more).
    pub fn of(s: &crate::scenario::Scenario) -> Labels {
        let classes = s.workload.class_list();
        let workloads = || std::iter::once(&s.workload).chain(classes.iter().map(|c| &c.traffic));
        let mut adapters = rustc_hash::FxHashMap::default();
        for set in workloads().filter_map(|w| w.adapters.as_ref()) {
            for i in 0..set.count.0 {
                adapters.insert(set.adapter(i).id, set.adapter_name(i));
            }
        }
        for w in workloads().filter(|w| w.kind == crate::workload::WorkloadKind::Trace) {
            if let Ok((path, options)) = w.trace(s.seed) {
                adapters.extend(crate::workload::trace::adapter_names(&path, &options));
            }
        }
        Labels {
            classes: classes.iter().map(|c| c.name.clone()).collect(),
            adapters,
        }
    }

    fn class(&self, r: &RequestRecord) -> Option<&str> {
        self.classes.get(usize::from(r.class)).map(String::as_str)
    }

    /// The adapter's name; its id in hex should the scenario not name it.
    fn adapter(&self, r: &RequestRecord) -> Option<String> {
        r.adapter.map(|id| {
            self.adapters
                .get(&id)
                .cloned()
                .unwrap_or_else(|| format!("{id:016x}"))
        })
    }
}

fn outcome(o: Outcome) -> &'static str {
    match o {
        Outcome::Completed => "completed",
        Outcome::Failed => "failed",
        Outcome::Rejected => "rejected",
    }
}

/// The cause that recomputed the most tokens (the first in report order on a tie); `None` if nothing
/// was recomputed.
pub fn main_cause(r: &RequestRecord) -> Option<&'static str> {
    let mut best: Option<(u64, RecomputeCause)> = None;
    for c in RecomputeCause::ALL {
        let t = r.recompute.tokens[c.index()];
        if t > 0 && best.is_none_or(|(b, _)| t > b) {
            best = Some((t, c));
        }
    }
    best.map(|(_, c)| c.as_str())
}

fn ns(t: u64) -> i64 {
    i64::try_from(t).unwrap_or(i64::MAX)
}

fn secs(t: u64) -> f64 {
    t as f64 / 1e9
}

/// One chunk of records as a data frame with the [`COLUMNS`] schema, classes and adapters named by
/// `labels`.
pub fn frame(rows: &[RequestRecord], labels: &Labels) -> PolarsResult<DataFrame> {
    let i64s = |f: &dyn Fn(&RequestRecord) -> i64| rows.iter().map(f).collect::<Vec<i64>>();
    let opt = |f: &dyn Fn(&RequestRecord) -> Option<i64>| {
        rows.iter().map(f).collect::<Vec<Option<i64>>>()
    };
    let optf = |f: &dyn Fn(&RequestRecord) -> Option<f64>| {
        rows.iter().map(f).collect::<Vec<Option<f64>>>()
    };
    let cause = |c: RecomputeCause| i64s(&|r| r.recompute.tokens[c.index()] as i64);
    let first_token = |r: &RequestRecord| r.first_token.filter(|_| r.outcome == Outcome::Completed);
    let columns: Vec<Column> = vec![
        Column::new("request_id".into(), i64s(&|r| r.id as i64)),
        Column::new("session_id".into(), opt(&|r| r.session.map(|s| s as i64))),
        Column::new("turn".into(), opt(&|r| r.turn.map(i64::from))),
        Column::new("worker".into(), opt(&|r| r.worker.map(|w| w as i64))),
        Column::new(
            "outcome".into(),
            rows.iter().map(|r| outcome(r.outcome)).collect::<Vec<_>>(),
        ),
        Column::new(
            "reason".into(),
            rows.iter().map(|r| r.reason).collect::<Vec<_>>(),
        ),
        Column::new("arrival_ns".into(), i64s(&|r| ns(r.arrival.0))),
        Column::new(
            "first_scheduled_ns".into(),
            opt(&|r| r.first_scheduled.map(|t| ns(t.0))),
        ),
        Column::new(
            "first_token_ns".into(),
            opt(&|r| first_token(r).map(|t| ns(t.0))),
        ),
        Column::new("finished_ns".into(), i64s(&|r| ns(r.finished.0))),
        Column::new(
            "arrival_s".into(),
            rows.iter().map(|r| secs(r.arrival.0)).collect::<Vec<_>>(),
        ),
        Column::new(
            "first_scheduled_s".into(),
            optf(&|r| r.first_scheduled.map(|t| secs(t.0))),
        ),
        Column::new(
            "first_token_s".into(),
            optf(&|r| first_token(r).map(|t| secs(t.0))),
        ),
        Column::new(
            "finished_s".into(),
            rows.iter().map(|r| secs(r.finished.0)).collect::<Vec<_>>(),
        ),
        Column::new(
            "ttft_ns".into(),
            opt(&|r| first_token(r).map(|t| ns(t.since(r.arrival).0))),
        ),
        Column::new(
            "queue_ns".into(),
            opt(&|r| r.first_scheduled.map(|t| ns(t.since(r.arrival).0))),
        ),
        Column::new(
            "e2e_ns".into(),
            opt(&|r| (r.outcome == Outcome::Completed).then(|| ns(r.finished.since(r.arrival).0))),
        ),
        Column::new(
            "prompt_tokens".into(),
            i64s(&|r| i64::from(r.prompt_tokens)),
        ),
        Column::new(
            "cached_tokens".into(),
            i64s(&|r| i64::from(r.cached_tokens)),
        ),
        Column::new(
            "loaded_tokens".into(),
            i64s(&|r| i64::from(r.loaded_tokens)),
        ),
        Column::new("prefill_tokens".into(), i64s(&|r| r.prefill_tokens as i64)),
        Column::new(
            "output_tokens".into(),
            i64s(&|r| i64::from(r.output_tokens)),
        ),
        Column::new(
            "recomputed_tokens".into(),
            i64s(&|r| r.recompute.total_tokens() as i64),
        ),
        Column::new(
            "recompute_cause".into(),
            rows.iter().map(main_cause).collect::<Vec<_>>(),
        ),
        Column::new(
            "recompute_evicted_tokens".into(),
            cause(RecomputeCause::Evicted),
        ),
        Column::new(
            "recompute_misrouted_tokens".into(),
            cause(RecomputeCause::Misrouted),
        ),
        Column::new(
            "recompute_failure_tokens".into(),
            cause(RecomputeCause::Failure),
        ),
        Column::new(
            "recompute_preempted_tokens".into(),
            cause(RecomputeCause::Preempted),
        ),
        Column::new(
            "recompute_migrated_tokens".into(),
            cause(RecomputeCause::Migrated),
        ),
        Column::new(
            "recompute_moved_tokens".into(),
            cause(RecomputeCause::Moved),
        ),
        Column::new(
            "history_tokens".into(),
            i64s(&|r| i64::from(r.history_tokens)),
        ),
        Column::new(
            "history_reprefilled_tokens".into(),
            i64s(&|r| r.recompute.reprefilled_tokens as i64),
        ),
        Column::new("preemptions".into(), i64s(&|r| i64::from(r.preemptions))),
        Column::new("retries".into(), i64s(&|r| i64::from(r.retries))),
        Column::new(
            "session_reset".into(),
            rows.iter().map(|r| r.session_reset).collect::<Vec<_>>(),
        ),
        Column::new(
            "class".into(),
            rows.iter().map(|r| labels.class(r)).collect::<Vec<_>>(),
        ),
        Column::new(
            "model".into(),
            rows.iter()
                .map(|r| r.model.map(crate::hardware::ModelId::as_str))
                .collect::<Vec<_>>(),
        ),
        Column::new(
            "adapter".into(),
            rows.iter().map(|r| labels.adapter(r)).collect::<Vec<_>>(),
        ),
    ];
    DataFrame::new(rows.len(), columns)
}

/// The polars schema of [`COLUMNS`].
pub fn schema() -> Schema {
    COLUMNS
        .iter()
        .map(|(name, ty)| {
            let dtype = match *ty {
                "i64" => DataType::Int64,
                "f64" => DataType::Float64,
                "str" => DataType::String,
                _ => DataType::Boolean,
            };
            Field::new((*name).into(), dtype)
        })
        .collect()
}

/// Streams requests into `requests.parquet` (one row group per chunk) and, optionally, `requests.csv`,
/// each through a temporary file renamed into place by [`RequestSink::finish`].
pub struct ParquetSink {
    parquet: AtomicFile,
    writer: polars::io::parquet::write::BatchedWriter<File>,
    csv: Option<(AtomicFile, bool)>,
    dest: PathBuf,
    labels: Labels,
}

fn err(dest: &Path) -> impl Fn(PolarsError) -> String + '_ {
    move |e| format!("cannot write {}: {e}", dest.display())
}

/// Zstandard at level 1 instead of polars' default 3: on `bench-1m`'s request log it costs about half
/// the instructions for a file 2% larger (docs/performance.md, twelfth round). Any zstd-reading parquet
/// reader reads it; the level is not part of the format.
fn compression() -> ParquetCompression {
    let level = polars_parquet::write::ZstdLevel::try_new(1).expect("1 is a zstd level");
    ParquetCompression::Zstd(Some(level))
}

impl ParquetSink {
    /// Starts `dir/requests.parquet` (and `dir/requests.csv` with `csv`), naming classes and adapters
    /// by `labels`.
    pub fn create(dir: &Path, csv: bool, labels: Labels) -> Result<Self, String> {
        let dest = dir.join("requests.parquet");
        let mut parquet = AtomicFile::create(&dest, &[]).map_err(|e| e.to_string())?;
        let file = parquet
            .file()
            .try_clone()
            .map_err(|e| format!("cannot write {}: {e}", dest.display()))?;
        let writer = ParquetWriter::new(file)
            .with_row_group_size(Some(crate::metrics::requests::RequestLog::CHUNK))
            .with_compression(compression())
            .set_parallel(false)
            .batched(&schema())
            .map_err(err(&dest))?;
        let csv = if csv {
            let p = dir.join("requests.csv");
            Some((
                AtomicFile::create(&p, &[]).map_err(|e| e.to_string())?,
                true,
            ))
        } else {
            None
        };
        Ok(ParquetSink {
            parquet,
            writer,
            csv,
            dest,
            labels,
        })
    }
}

impl RequestSink for ParquetSink {
    fn write(&mut self, rows: &[RequestRecord]) -> Result<(), String> {
        let mut df = frame(rows, &self.labels).map_err(err(&self.dest))?;
        self.writer.write_batch(&df).map_err(err(&self.dest))?;
        if let Some((file, header)) = &mut self.csv {
            csv_rows(&mut df, *header, file)
                .map_err(|e| format!("cannot write requests.csv: {e}"))?;
            *header = false;
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<(), String> {
        let this = *self;
        this.writer.finish().map_err(err(&this.dest))?;
        drop(this.writer);
        this.parquet.commit().map_err(|e| e.to_string())?;
        if let Some((mut file, header)) = this.csv {
            if header {
                // No request at all: the CSV still has its header.
                let mut empty = frame(&[], &this.labels).map_err(err(&this.dest))?;
                csv_rows(&mut empty, true, &mut file).map_err(|e| e.to_string())?;
            }
            file.commit().map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

/// Appends `df` to a CSV (with the header row first when `header`); nulls are empty cells.
fn csv_rows(df: &mut DataFrame, header: bool, out: &mut dyn Write) -> Result<(), String> {
    let mut w = csv::WriterBuilder::new().from_writer(out);
    if header {
        w.write_record(COLUMNS.iter().map(|(n, _)| *n))
            .map_err(|e| e.to_string())?;
    }
    let cols = df.columns();
    let mut cells: Vec<String> = Vec::with_capacity(cols.len());
    for i in 0..df.height() {
        cells.clear();
        for c in cols {
            let v = c.get(i).map_err(|e| e.to_string())?;
            cells.push(match v {
                AnyValue::Null => String::new(),
                // Shortest text that reads back as the same f64 (polars' display rounds).
                AnyValue::Float64(x) => x.to_string(),
                AnyValue::String(s) => s.to_string(),
                AnyValue::StringOwned(s) => s.to_string(),
                other => other.to_string(),
            });
        }
        w.write_record(&cells).map_err(|e| e.to_string())?;
    }
    w.flush().map_err(|e| e.to_string())?;
    Ok(())
}
