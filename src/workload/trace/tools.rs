//! What `fleetsim trace stats|convert|gen` do, as library functions the command line calls.

use std::path::Path;

use super::stats::{StatsReport, TraceStats};
use crate::output::{AtomicFile, check_file};

use super::{RowStream, TraceError, TraceFormat, TraceOptions, TraceRow, writer};

/// The statistics of a whole trace, and the reader's notes (skipped lines).
pub fn stats(
    path: &Path,
    options: &TraceOptions,
    block_size: u32,
) -> Result<(TraceFormat, StatsReport, Vec<String>), TraceError> {
    let mut rows = RowStream::open(path, options)?;
    let mut s = TraceStats::new(block_size);
    for row in rows.by_ref() {
        s.add(&row?);
    }
    Ok((rows.format(), s.report(), rows.notes()))
}

/// Where to write a trace: the format (the native format's CSV flavour when the file name ends in
/// `.csv`) and the Mooncake hash block size.
#[derive(Clone, Copy, Debug)]
pub struct Output<'a> {
    pub path: &'a Path,
    pub format: TraceFormat,
    pub block_size: u32,
}

/// Writes `rows` to `out`; returns how many. The rows go to a temporary file beside `out.path`, renamed
/// over it only when every row is written: on any error, or if the process dies, `out.path` keeps what it
/// held before. `source` names where the rows came from, for messages about a row that the output format
/// cannot hold.
pub fn write_rows(
    rows: impl Iterator<Item = Result<TraceRow, TraceError>>,
    source: &str,
    out: Output,
) -> Result<u64, String> {
    let csv = out
        .path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("csv"));
    let mut atomic = AtomicFile::create(out.path, &[]).map_err(|e| e.to_string())?;
    let file = atomic
        .file()
        .try_clone()
        .map_err(|e| format!("cannot write {}: {e}", out.path.display()))?;
    let mut w = writer(out.format, file, csv, out.block_size)?;
    let mut n = 0;
    for row in rows {
        let row = row.map_err(|e| e.to_string())?;
        w.write_row(&row).map_err(|m| {
            if row.line > 0 {
                format!("{source}:{}: {m}", row.line)
            } else {
                format!("{source}: request {}: {m}", row.id)
            }
        })?;
        n += 1;
    }
    w.finish()
        .map_err(|e| format!("cannot write {}: {e}", out.path.display()))?;
    drop(w);
    atomic.commit().map_err(|e| e.to_string())?;
    Ok(n)
}

/// Converts the trace at `input` into `out`: the rows read, and the reader's notes.
pub fn convert(
    input: &Path,
    options: &TraceOptions,
    out: Output,
) -> Result<(u64, Vec<String>), String> {
    check_file(out.path, &[input]).map_err(|e| e.to_string())?;
    let mut rows = RowStream::open(input, options).map_err(|e| e.to_string())?;
    let source = input.display().to_string();
    let n = write_rows(rows.by_ref(), &source, out)?;
    Ok((n, rows.notes()))
}
