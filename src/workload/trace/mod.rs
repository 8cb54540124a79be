//! Request traces: readers for the formats people have, fleetsim's own format, and replay.
//!
//! Every reader turns one line into one [`TraceRow`] (a request with its content identity as
//! [`Segment`]s), streaming: a reader holds the line it is parsing plus whatever per-session state its
//! format needs, never the whole trace. A [`RowStream`] chains the format's parser with the options that
//! apply to every format (skipping bad lines, jitter, a start offset, a speed-up), so `run`,
//! `trace stats` and `trace convert` see exactly the same rows.
//!
//! | format     | file | what it gives | content identity |
//! |------------|------|---------------|------------------|
//! | `mooncake` | JSONL `timestamp` (ms), `input_length`, `output_length`, `hash_ids` | arrivals, lengths | one segment per 512-token hash block |
//! | `azure`    | CSV `TIMESTAMP, ContextTokens, GeneratedTokens` (2023 and 2024) | arrivals, lengths | none: each prompt unique |
//! | `burstgpt` | CSV `Timestamp, Request tokens, Response tokens` (+ `Session ID`) | arrivals, lengths, sessions | a turn extends its session's previous turn |
//! | `vidur`    | CSV `arrived_at, num_prefill_tokens, num_decode_tokens` | arrivals, lengths | none: each prompt unique |
//! | `native`   | fleetsim's JSONL or CSV ([`native`]) | everything, closed-loop turns too | explicit segments |
//!
//! Errors name the file and line (`traces/x.jsonl:17: missing field `input_length``). With
//! `skip_bad_lines`, lines that fail are skipped and counted instead; a bad header or an unreadable
//! file is always an error.

pub mod azure;
pub mod burstgpt;
pub mod mooncake;
pub mod native;
mod replay;
pub mod stats;
pub mod text;
pub mod tools;
pub mod vidur;

use std::collections::VecDeque;
use std::path::Path;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::request::{Request, Segment, SessionRef};
use crate::rng::{self, SimRng, fnv1a, splitmix64};
use crate::time::{SimDuration, SimTime};
pub use replay::Replay;
pub use stats::TraceStats;
use text::Lines;

/// How long (trace time) a reader remembers a session or a candidate parent turn it has not seen since:
/// bounds the memory of session state on long traces. Longer than any think time worth replaying.
pub const SESSION_MEMORY: SimDuration = SimDuration::from_secs(2 * 3600);

/// The speed-ups a trace or a rate curve may be replayed at: a million times slower to a million times
/// faster (a day in 86 ms). Beyond them arrival times collapse onto one nanosecond, or past the
/// longest simulated span, and rates stop meaning anything.
pub const SPEEDUP: (f64, f64) = (1e-6, 1e6);

/// A trace that cannot be read: which file, which line, what is wrong.
#[derive(Debug, Error)]
pub enum TraceError {
    /// The file cannot be opened or read. (The I/O error is in the message, not a `#[source]`: an error
    /// chain would print it twice.)
    #[error("{path}: cannot read: {error}")]
    Io { path: String, error: IoMessage },
    /// One line is malformed.
    #[error("{path}:{line}: {message}")]
    Line {
        path: String,
        line: u64,
        message: String,
    },
    /// The trace as a whole cannot be used as asked (a bad header, an option that does not apply).
    #[error("{path}: {message}")]
    File { path: String, message: String },
}

/// An I/O error kept for its message only (see [`TraceError::Io`]).
#[derive(Debug)]
pub struct IoMessage(pub std::io::Error);

impl std::fmt::Display for IoMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl From<std::io::Error> for IoMessage {
    fn from(e: std::io::Error) -> Self {
        IoMessage(e)
    }
}

/// When a row's request arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timing {
    /// At a fixed time (open loop).
    At(SimTime),
    /// This think time after the previous turn of its session completes (closed loop).
    After(SimDuration),
}

/// One request of a trace, in any format.
///
/// Invariant: `segments` hold at least one token; `output_tokens ≥ 1`; a row with [`Timing::After`]
/// belongs to a session and is not its first turn.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceRow {
    /// Line of the source file (for messages about the row after it was read).
    pub line: u64,
    /// Request id, unique within the trace.
    pub id: u64,
    pub session: Option<SessionRef>,
    pub timing: Timing,
    pub output_tokens: u32,
    /// Content identity of the prompt.
    pub segments: Vec<Segment>,
    /// The model the request asks for (fleetsim's own format only; `None` in the others).
    pub model: Option<crate::hardware::ModelId>,
    /// The LoRA adapter it asks for on top of its model (fleetsim's own format only).
    pub adapter: Option<TraceAdapter>,
}

/// A LoRA adapter named by a trace row: its name (the request's adapter id is the name's hash, as for
/// a workload's `adapters`) and its rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceAdapter {
    pub name: String,
    pub rank: u32,
}

impl TraceAdapter {
    /// The adapter's LoRA rank when a row gives none: vLLM's default `max_lora_rank`, as the
    /// workload's `adapters.rank`.
    pub const DEFAULT_RANK: u32 = 16;

    /// The adapter a request carries.
    pub fn adapter(&self) -> crate::lora::AdapterRef {
        crate::lora::AdapterRef {
            id: crate::rng::fnv1a(self.name.as_bytes()),
            rank: self.rank,
        }
    }
}

impl TraceRow {
    /// Prompt tokens.
    pub fn input_tokens(&self) -> u32 {
        self.segments.iter().map(|s| s.tokens).sum()
    }

    /// The request, arriving at `arrival`. A prompt that ends with the reader's unique content for this
    /// row ([`unique_content`]) has a [`Request::private_tail`]: a later turn of a session may quote it,
    /// but arrives later.
    pub fn to_request(&self, arrival: SimTime) -> Request {
        let mut r = Request::new(
            self.id,
            self.session,
            arrival,
            self.output_tokens,
            self.segments.clone(),
        );
        r.private_tail = self.segments.last().map(|s| s.content) == Some(unique_content(self.id));
        let r = match self.model {
            Some(m) => r.for_model(m),
            None => r,
        };
        match &self.adapter {
            Some(a) => r.for_adapter(a.adapter()),
            None => r,
        }
    }

    /// The row that replays `request` at its arrival time (open loop).
    pub fn from_request(r: &Request) -> Self {
        TraceRow {
            line: 0,
            id: r.id,
            session: r.session,
            timing: Timing::At(r.arrival),
            output_tokens: r.output_tokens,
            segments: r.segments.clone(),
            model: None,
            adapter: None,
        }
    }
}

/// Content id of the prompt of request `id` in a format that says nothing about content: unique per
/// request, so such a prompt shares nothing with any other.
pub fn unique_content(id: u64) -> u64 {
    splitmix64(fnv1a(b"trace-prompt") ^ id)
}

/// Trace formats fleetsim reads.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum TraceFormat {
    /// Mooncake JSONL (`timestamp`, `input_length`, `output_length`, `hash_ids`).
    Mooncake,
    /// Azure LLM inference CSV (`TIMESTAMP`, `ContextTokens`, `GeneratedTokens`).
    Azure,
    /// BurstGPT CSV (`Timestamp`, `Request tokens`, `Response tokens`, optional `Session ID`).
    Burstgpt,
    /// Vidur trace CSV (`arrived_at`, `num_prefill_tokens`, `num_decode_tokens`).
    Vidur,
    /// fleetsim's own JSONL or CSV (CSV when the file name ends in `.csv`).
    Native,
}

impl TraceFormat {
    /// Every format.
    pub const ALL: [TraceFormat; 5] = [
        TraceFormat::Mooncake,
        TraceFormat::Azure,
        TraceFormat::Burstgpt,
        TraceFormat::Vidur,
        TraceFormat::Native,
    ];

    /// Name as written in scenarios and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            TraceFormat::Mooncake => "mooncake",
            TraceFormat::Azure => "azure",
            TraceFormat::Burstgpt => "burstgpt",
            TraceFormat::Vidur => "vidur",
            TraceFormat::Native => "native",
        }
    }

    /// Recognises a trace by its first non-blank line: a JSON object's keys or a CSV header.
    pub fn detect(path: &Path) -> Result<TraceFormat, TraceError> {
        let mut lines = Lines::open(path)?;
        let file_error = |message: String| TraceError::File {
            path: path.display().to_string(),
            message,
        };
        let Some((_, first)) = lines.next_line()? else {
            return Err(file_error("the trace is empty".into()));
        };
        let first = first.trim_start();
        if first.starts_with('{') {
            let keys = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(first)
                .map(|m| m.keys().cloned().collect::<Vec<_>>())
                .unwrap_or_default();
            let has = |k: &str| keys.iter().any(|x| x == k);
            return if has("hash_ids") || has("input_length") {
                Ok(TraceFormat::Mooncake)
            } else if has("input") || has("segments") {
                Ok(TraceFormat::Native)
            } else {
                Err(file_error(
                    "cannot tell the format from the first line: name it (format = \"mooncake\" or \"native\")".into(),
                ))
            };
        }
        let header = text::Header::parse(first).map_err(&file_error)?;
        let has = |c: &str| header.find(c).is_some();
        if has("ContextTokens") && has("GeneratedTokens") {
            Ok(TraceFormat::Azure)
        } else if has("Request tokens") && has("Response tokens") {
            Ok(TraceFormat::Burstgpt)
        } else if has("arrived_at") && has("num_prefill_tokens") {
            Ok(TraceFormat::Vidur)
        } else if has("input") && has("output") {
            Ok(TraceFormat::Native)
        } else {
            Err(file_error(format!(
                "cannot tell the trace format from its first line `{}`: name it (one of {})",
                first.chars().take(80).collect::<String>(),
                TraceFormat::ALL.map(TraceFormat::as_str).join(", ")
            )))
        }
    }
}

impl std::fmt::Display for TraceFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How to read a trace: the same options for `run`, `trace stats` and `trace convert`.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceOptions {
    /// The format; `None` recognises it from the first line ([`TraceFormat::detect`]).
    pub format: Option<TraceFormat>,
    /// Skip malformed lines (counted) instead of stopping at the first.
    pub skip_bad_lines: bool,
    /// Spread the requests that share one timestamp uniformly over `[t, t + min(jitter, gap to the next
    /// timestamp))`: the Mooncake conversation trace quantises arrivals to 3-second buckets.
    pub jitter: Option<SimDuration>,
    /// Mooncake: rebuild sessions from the hash chains ([`mooncake`] documents the heuristic).
    pub reconstruct_sessions: bool,
    /// Mooncake: tokens per hash block.
    pub hash_block_size: u32,
    /// Replay this many times faster (arrival times and think times divided by it).
    pub speedup: f64,
    /// Skip the trace's first `start` (rows arriving earlier are dropped) and shift it to start at 0.
    pub start: SimDuration,
    /// Seed of the jitter's random stream.
    pub seed: u64,
}

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions {
            format: None,
            skip_bad_lines: false,
            jitter: None,
            reconstruct_sessions: false,
            hash_block_size: mooncake::BLOCK_TOKENS,
            speedup: 1.0,
            start: SimDuration::ZERO,
            seed: 0,
        }
    }
}

/// A format's line parser. `parse` sees every non-blank line after the header; it returns `Ok(None)`
/// for a line the format filters out on purpose (counted, not an error).
pub(crate) trait Parser: Send {
    /// Whether the first non-blank line is a header, passed to [`Parser::header`].
    fn has_header(&self) -> bool {
        false
    }
    /// Reads the header; an error here is about the whole file.
    fn header(&mut self, _line: &str) -> Result<(), String> {
        Ok(())
    }
    /// One data line. On error the parser's state is as if the line had not been read.
    fn parse(&mut self, line: u64, text: &str) -> Result<Option<TraceRow>, String>;
    /// What the format's filter dropped, for the report (e.g. BurstGPT's failed requests).
    fn filtered_note(&self) -> Option<String> {
        None
    }
}

/// The rows of a trace, in arrival order for open-loop rows, after the options that apply to every
/// format. An iterator of `Result`s: in strict mode it ends after the first error.
pub struct RowStream {
    lines: Lines,
    parser: Box<dyn Parser>,
    format: TraceFormat,
    header_read: bool,
    skip_bad_lines: bool,
    skipped: u64,
    first_skipped: Option<String>,
    jitter: Option<Jitter>,
    ready: VecDeque<TraceRow>,
    speedup: f64,
    start: SimDuration,
    /// Session whose earlier turn fell before `start`: its later closed-loop turns go too.
    dropped_session: Option<u64>,
    done: bool,
    /// Data lines read (after the header), and rows kept and dropped for falling before `start`.
    data_lines: u64,
    kept: u64,
    before_start: u64,
}

/// The jitter stage: rows sharing one timestamp wait here until the next timestamp is known.
struct Jitter {
    width: SimDuration,
    rng: SimRng,
    bucket: Vec<TraceRow>,
    at: SimTime,
}

impl RowStream {
    /// Opens `path` with `options`.
    pub fn open(path: &Path, options: &TraceOptions) -> Result<Self, TraceError> {
        let format = match options.format {
            Some(f) => f,
            None => TraceFormat::detect(path)?,
        };
        let lines = Lines::open(path)?;
        let file_error = |message: String| TraceError::File {
            path: path.display().to_string(),
            message,
        };
        if options.reconstruct_sessions && format != TraceFormat::Mooncake {
            return Err(file_error(format!(
                "session reconstruction applies to Mooncake traces, not {format}"
            )));
        }
        if let Err(m) = crate::config::check_range(options.speedup, SPEEDUP, "") {
            return Err(file_error(format!("speed-up {m}")));
        }
        let csv_native = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("csv"));
        let parser: Box<dyn Parser> = match format {
            TraceFormat::Mooncake => Box::new(mooncake::MooncakeParser::new(
                options.hash_block_size,
                options.reconstruct_sessions,
            )),
            TraceFormat::Azure => Box::new(azure::AzureParser::default()),
            TraceFormat::Burstgpt => Box::new(burstgpt::BurstGptParser::default()),
            TraceFormat::Vidur => Box::new(vidur::VidurParser::default()),
            TraceFormat::Native => Box::new(native::NativeParser::new(csv_native)),
        };
        Ok(RowStream {
            lines,
            parser,
            format,
            header_read: false,
            skip_bad_lines: options.skip_bad_lines,
            skipped: 0,
            first_skipped: None,
            jitter: options
                .jitter
                .filter(|j| *j > SimDuration::ZERO)
                .map(|width| Jitter {
                    width,
                    rng: rng::stream(options.seed, "trace-jitter"),
                    bucket: Vec::new(),
                    at: SimTime::ZERO,
                }),
            ready: VecDeque::new(),
            speedup: options.speedup,
            start: options.start,
            dropped_session: None,
            done: false,
            data_lines: 0,
            kept: 0,
            before_start: 0,
        })
    }

    /// The format being read.
    pub fn format(&self) -> TraceFormat {
        self.format
    }

    /// The file being read.
    pub fn path(&self) -> &str {
        self.lines.path()
    }

    /// Malformed lines skipped so far (with `skip_bad_lines`).
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// One line about what was skipped or filtered, if anything was.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.skipped > 0 {
            notes.push(format!(
                "{}: skipped {} bad line{} (first: {})",
                self.path(),
                self.skipped,
                if self.skipped == 1 { "" } else { "s" },
                self.first_skipped.as_deref().unwrap_or("?")
            ));
        }
        if let Some(n) = self.parser.filtered_note() {
            notes.push(format!("{}: {n}", self.path()));
        }
        if self.kept == 0 && self.before_start > 0 {
            notes.push(format!(
                "{}: every one of its {} requests is before start = {}: nothing is left to replay \
                 (the trace ends before it)",
                self.path(),
                self.before_start,
                self.start
            ));
        }
        notes
    }

    /// The next parsed row, skipping bad lines if asked to.
    fn next_parsed(&mut self) -> Result<Option<TraceRow>, TraceError> {
        loop {
            let Some((line, text)) = self.lines.next_line()? else {
                if self.data_lines == 0 && self.header_read {
                    return Err(TraceError::File {
                        path: self.lines.path().to_string(),
                        message: "holds no requests: a header and no rows".into(),
                    });
                }
                return Ok(None);
            };
            if !self.header_read && self.parser.has_header() {
                self.header_read = true;
                let text = text.to_string();
                return match self.parser.header(&text) {
                    Ok(()) => continue,
                    Err(message) => Err(TraceError::File {
                        path: format!("{}:{line}", self.lines.path()),
                        message,
                    }),
                };
            }
            self.data_lines += 1;
            match self.parser.parse(line, text) {
                Ok(Some(row)) => return Ok(Some(row)),
                Ok(None) => continue,
                Err(message) if self.skip_bad_lines => {
                    self.skipped += 1;
                    if self.first_skipped.is_none() {
                        self.first_skipped = Some(format!("line {line}: {message}"));
                    }
                }
                Err(message) => return Err(self.lines.error(line, message)),
            }
        }
    }

    /// Moves parsed rows through the jitter stage into `ready`; `false` at the end of the file.
    fn fill(&mut self) -> Result<bool, TraceError> {
        let next = self.next_parsed()?;
        let Some(j) = &mut self.jitter else {
            return Ok(match next {
                Some(row) => {
                    self.ready.push_back(row);
                    true
                }
                None => false,
            });
        };
        let at = match &next {
            Some(row) => match row.timing {
                Timing::At(t) => Some(t),
                Timing::After(_) => {
                    return Err(self.lines.error(
                        row.line,
                        "jitter applies to open-loop arrivals, and this row is a closed-loop turn (a think time)",
                    ));
                }
            },
            None => None,
        };
        let next = match (next, at) {
            (Some(row), Some(t)) if j.bucket.is_empty() || t == j.at => {
                j.at = t;
                j.bucket.push(row);
                return Ok(true);
            }
            (next, _) if j.bucket.is_empty() => return Ok(next.is_some()),
            (next, _) => next,
        };
        // The bucket is complete: spread it up to the next timestamp (or by the full width at the end).
        let width = match at {
            Some(t) => j.width.min(t.since(j.at)),
            None => j.width,
        };
        let mut bucket: Vec<(SimTime, TraceRow)> = std::mem::take(&mut j.bucket)
            .into_iter()
            .map(|row| {
                let offset = if width.0 > 0 {
                    rand::Rng::random_range(&mut j.rng, 0..width.0)
                } else {
                    0
                };
                (j.at + SimDuration(offset), row)
            })
            .collect();
        // Stable: rows drawing the same instant keep their file order.
        bucket.sort_by_key(|(t, _)| *t);
        for (t, mut row) in bucket {
            row.timing = Timing::At(t);
            self.ready.push_back(row);
        }
        if let (Some(row), Some(t)) = (next, at) {
            j.at = t;
            j.bucket.push(row);
        }
        Ok(true)
    }

    /// Applies `start` and `speedup`; `None` if the row falls before `start`.
    fn shift(&mut self, mut row: TraceRow) -> Option<TraceRow> {
        match row.timing {
            Timing::At(t) => {
                if t < SimTime::ZERO + self.start {
                    self.dropped_session = row.session.map(|s| s.id);
                    self.before_start += 1;
                    return None;
                }
                let t = t.since(SimTime::ZERO + self.start);
                row.timing = Timing::At(SimTime::ZERO + self.scale(t));
                if row.session.map(|s| s.id) == self.dropped_session {
                    self.dropped_session = None;
                }
            }
            Timing::After(d) => {
                if row
                    .session
                    .is_some_and(|s| Some(s.id) == self.dropped_session)
                {
                    self.before_start += 1;
                    return None;
                }
                row.timing = Timing::After(self.scale(d));
            }
        }
        self.kept += 1;
        Some(row)
    }

    fn scale(&self, d: SimDuration) -> SimDuration {
        if self.speedup == 1.0 {
            d
        } else {
            SimDuration::from_secs_f64(d.as_secs_f64() / self.speedup)
        }
    }
}

impl Iterator for RowStream {
    type Item = Result<TraceRow, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(row) = self.ready.pop_front() {
                match self.shift(row) {
                    Some(row) => return Some(Ok(row)),
                    None => continue,
                }
            }
            if self.done {
                return None;
            }
            match self.fill() {
                Ok(true) => {}
                Ok(false) => self.done = true,
                Err(e) => {
                    self.done = true;
                    self.ready.clear();
                    return Some(Err(e));
                }
            }
        }
    }
}

/// Reads a whole trace once, checking every line: the row count and the notes (skipped lines), or the
/// first error. Memory is that of the reader, not of the trace.
pub fn check(path: &Path, options: &TraceOptions) -> Result<(u64, Vec<String>), TraceError> {
    let mut rows = RowStream::open(path, options)?;
    let mut n = 0;
    for row in rows.by_ref() {
        row?;
        n += 1;
    }
    Ok((n, rows.notes()))
}

/// The distinct LoRA adapters a trace's rows name, as (adapter id, name), in first-seen order: the
/// names `requests.parquet` shows. Empty for a format that carries none, or a trace that cannot be
/// read (its error is the workload's to report).
pub fn adapter_names(path: &Path, options: &TraceOptions) -> Vec<(u64, String)> {
    let native = match options.format {
        Some(f) => f == TraceFormat::Native,
        None => TraceFormat::detect(path).is_ok_and(|f| f == TraceFormat::Native),
    };
    if !native {
        return Vec::new();
    }
    let Ok(rows) = RowStream::open(path, options) else {
        return Vec::new();
    };
    let mut seen = rustc_hash::FxHashSet::default();
    let mut names = Vec::new();
    for row in rows.map_while(Result::ok) {
        if let Some(a) = row.adapter
            && seen.insert(a.name.clone())
        {
            names.push((a.adapter().id, a.name));
        }
    }
    names
}

/// Where a trace writer puts rows: one line per row.
pub trait TraceWriter {
    /// Writes one row; `Err` explains why this format cannot hold it.
    fn write_row(&mut self, row: &TraceRow) -> Result<(), String>;
    /// Flushes whatever is buffered.
    fn finish(&mut self) -> std::io::Result<()>;
}

/// A writer of `format` into `out`; `csv` picks the native format's CSV flavour; `block_size` is the
/// Mooncake hash block size. Formats that fleetsim only reads have no writer.
pub fn writer<W: std::io::Write + 'static>(
    format: TraceFormat,
    out: W,
    csv: bool,
    block_size: u32,
) -> Result<Box<dyn TraceWriter>, String> {
    match format {
        TraceFormat::Native => Ok(Box::new(native::NativeWriter::new(out, csv))),
        TraceFormat::Mooncake => Ok(Box::new(mooncake::MooncakeWriter::new(out, block_size))),
        TraceFormat::Vidur => Ok(Box::new(vidur::VidurWriter::new(out))),
        TraceFormat::Azure | TraceFormat::Burstgpt => Err(format!(
            "fleetsim reads {format} traces but does not write them; write native, mooncake or vidur"
        )),
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    use std::io::Write;
    use std::path::PathBuf;

    /// A temporary file holding `text`, removed on drop.
    pub struct TempTrace(pub PathBuf);

    impl TempTrace {
        pub fn new(name: &str, text: &str) -> Self {
            static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let dir = std::env::temp_dir()
                .join(format!("fleetsim-trace-unit-{}-{n}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join(name);
            std::fs::File::create(&path)
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
            TempTrace(path)
        }
    }

    impl Drop for TempTrace {
        fn drop(&mut self) {
            if let Some(dir) = self.0.parent() {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::TempTrace;
    use super::*;

    fn rows(text: &str, name: &str, options: &TraceOptions) -> Result<Vec<TraceRow>, TraceError> {
        let t = TempTrace::new(name, text);
        RowStream::open(&t.0, options)?.collect()
    }

    const MOONCAKE: &str = r#"{"timestamp": 0, "input_length": 600, "output_length": 10, "hash_ids": [0, 1]}
{"timestamp": 0, "input_length": 700, "output_length": 10, "hash_ids": [0, 2]}
{"timestamp": 0, "input_length": 100, "output_length": 10, "hash_ids": [3]}
{"timestamp": 3000, "input_length": 512, "output_length": 10, "hash_ids": [0]}
"#;

    #[test]
    fn formats_are_recognised_from_the_first_line() {
        for (text, name, want) in [
            (MOONCAKE, "a.jsonl", TraceFormat::Mooncake),
            (
                "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,4808,10\n",
                "a.csv",
                TraceFormat::Azure,
            ),
            (
                "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,10,20,30,Conversation log\n",
                "b.csv",
                TraceFormat::Burstgpt,
            ),
            (
                "arrived_at,num_prefill_tokens,num_decode_tokens\n0.5,10,2\n",
                "v.csv",
                TraceFormat::Vidur,
            ),
            (
                r#"{"id":0,"arrival":0,"input":5,"output":1,"segments":["1:5"]}"#,
                "n.jsonl",
                TraceFormat::Native,
            ),
        ] {
            let t = TempTrace::new(name, text);
            assert_eq!(TraceFormat::detect(&t.0).unwrap(), want, "{text}");
        }
        let t = TempTrace::new("x.csv", "a,b,c\n1,2,3\n");
        let e = TraceFormat::detect(&t.0).unwrap_err().to_string();
        assert!(e.contains("x.csv") && e.contains("cannot tell"), "{e}");
    }

    #[test]
    fn jitter_spreads_each_bucket_up_to_the_next_timestamp_and_keeps_order() {
        let opts = TraceOptions {
            jitter: Some(SimDuration::from_secs(3)),
            seed: 1,
            ..TraceOptions::default()
        };
        let got = rows(MOONCAKE, "m.jsonl", &opts).unwrap();
        assert_eq!(got.len(), 4);
        let times: Vec<SimTime> = got
            .iter()
            .map(|r| match r.timing {
                Timing::At(t) => t,
                Timing::After(_) => unreachable!(),
            })
            .collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
        assert!(times[..3].iter().all(|t| *t < SimTime(3_000_000_000)));
        assert!(times[3] >= SimTime(3_000_000_000) && times[3] < SimTime(6_000_000_000));
        // Same seed, same times; the rows are the same rows.
        let again = rows(MOONCAKE, "m.jsonl", &opts).unwrap();
        assert_eq!(got, again);
        let mut ids: Vec<u64> = got.iter().map(|r| r.id).collect();
        ids.sort_unstable();
        assert_eq!(ids, [0, 1, 2, 3]);
    }

    #[test]
    fn start_and_speedup_shift_and_scale_arrivals() {
        let opts = TraceOptions {
            start: SimDuration::from_secs(1),
            speedup: 2.0,
            ..TraceOptions::default()
        };
        let got = rows(MOONCAKE, "m.jsonl", &opts).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].timing, Timing::At(SimTime(1_000_000_000)));
    }

    #[test]
    fn strict_mode_stops_at_the_first_bad_line_and_skip_mode_counts() {
        let bad = MOONCAKE.replace(r#""input_length": 100,"#, r#""input_length": -100,"#);
        let e = rows(&bad, "m.jsonl", &TraceOptions::default()).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("m.jsonl:3:") && msg.contains("negative"),
            "{msg}"
        );

        let t = TempTrace::new("m.jsonl", &bad);
        let opts = TraceOptions {
            skip_bad_lines: true,
            ..TraceOptions::default()
        };
        let (n, notes) = check(&t.0, &opts).unwrap();
        assert_eq!(n, 3);
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].contains("skipped 1 bad line (first: line 3:"),
            "{notes:?}"
        );
    }

    #[test]
    fn reconstruction_is_for_mooncake_only() {
        let t = TempTrace::new(
            "v.csv",
            "arrived_at,num_prefill_tokens,num_decode_tokens\n0,1,1\n",
        );
        let opts = TraceOptions {
            reconstruct_sessions: true,
            ..TraceOptions::default()
        };
        let e = RowStream::open(&t.0, &opts).err().unwrap().to_string();
        assert!(e.contains("Mooncake"), "{e}");
    }
}
