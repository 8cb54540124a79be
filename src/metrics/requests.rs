//! Per-request records, streamed out as requests finish (`requests.parquet`).
//!
//! The engine hands every finished request's [`RequestRecord`] to a [`RequestLog`], which buffers at most
//! [`RequestLog::CHUNK`] of them and passes each full chunk to a [`RequestSink`] (the results folder's
//! parquet writer, one row group per chunk). Memory is therefore bounded by the chunk, not by the run's
//! length.
//!
//! Invariants: every record pushed reaches the sink exactly once and in finishing order; the first
//! error a sink returns is kept, later records are dropped, and [`RequestLog::finish`] returns that error.

use super::record::RequestRecord;

/// Where chunks of finished requests go. Metrics know nothing of files: the report layer implements it.
pub trait RequestSink: Send {
    /// Writes `rows` (in finishing order) after every earlier chunk.
    fn write(&mut self, rows: &[RequestRecord]) -> Result<(), String>;
    /// Completes the output (footer, rename into place). Called once, after the last chunk.
    fn finish(self: Box<Self>) -> Result<(), String>;
}

/// Buffers finished requests and streams them to a [`RequestSink`] in chunks.
pub struct RequestLog {
    buf: Vec<RequestRecord>,
    sink: Box<dyn RequestSink>,
    rows: u64,
    error: Option<String>,
}

impl std::fmt::Debug for RequestLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestLog")
            .field("buffered", &self.buf.len())
            .field("rows", &self.rows)
            .field("error", &self.error)
            .finish()
    }
}

impl RequestLog {
    /// Records per chunk (and parquet row group): about 11 MB of buffered records.
    pub const CHUNK: usize = 65_536;

    /// A log streaming into `sink`.
    pub fn new(sink: Box<dyn RequestSink>) -> Self {
        RequestLog {
            buf: Vec::with_capacity(Self::CHUNK),
            sink,
            rows: 0,
            error: None,
        }
    }

    /// Adds one finished request; writes a chunk when the buffer is full.
    pub fn push(&mut self, r: &RequestRecord) {
        if self.error.is_some() {
            return;
        }
        self.buf.push(r.clone());
        self.rows += 1;
        if self.buf.len() >= Self::CHUNK {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.buf.is_empty() || self.error.is_some() {
            return;
        }
        if let Err(e) = self.sink.write(&self.buf) {
            self.error = Some(e);
        }
        self.buf.clear();
    }

    /// Records pushed so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Writes what is buffered and completes the sink; returns the number of rows written.
    pub fn finish(mut self) -> Result<u64, String> {
        self.flush();
        if let Some(e) = self.error {
            return Err(e);
        }
        self.sink.finish()?;
        Ok(self.rows)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::metrics::record::Outcome;
    use crate::time::SimTime;

    #[derive(Default)]
    struct Seen {
        chunks: Vec<Vec<u64>>,
        finished: bool,
    }

    struct Memory(Arc<Mutex<Seen>>, Option<usize>);

    impl RequestSink for Memory {
        fn write(&mut self, rows: &[RequestRecord]) -> Result<(), String> {
            let mut s = self.0.lock().unwrap();
            if Some(s.chunks.len()) == self.1 {
                return Err("disk full".into());
            }
            s.chunks.push(rows.iter().map(|r| r.id).collect());
            Ok(())
        }
        fn finish(self: Box<Self>) -> Result<(), String> {
            self.0.lock().unwrap().finished = true;
            Ok(())
        }
    }

    fn record(id: u64) -> RequestRecord {
        RequestRecord {
            prefill_tokens: 1,
            ..RequestRecord::for_test(id, SimTime(id), SimTime(id + 1), Outcome::Rejected)
        }
    }

    #[test]
    fn every_record_reaches_the_sink_once_in_order_in_bounded_chunks() {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let mut log = RequestLog::new(Box::new(Memory(seen.clone(), None)));
        let n = 2 * RequestLog::CHUNK as u64 + 5;
        for id in 0..n {
            log.push(&record(id));
        }
        assert_eq!(log.finish().unwrap(), n);
        let s = seen.lock().unwrap();
        assert!(s.finished);
        // Two full chunks and the remainder of 5.
        let sizes: Vec<usize> = s.chunks.iter().map(Vec::len).collect();
        assert_eq!(sizes, [RequestLog::CHUNK, RequestLog::CHUNK, 5]);
        let all: Vec<u64> = s.chunks.concat();
        assert_eq!(all, (0..n).collect::<Vec<_>>());
    }

    #[test]
    fn a_sink_error_is_returned_and_the_output_is_not_completed() {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let mut log = RequestLog::new(Box::new(Memory(seen.clone(), Some(0))));
        for id in 0..10 {
            log.push(&record(id));
        }
        assert_eq!(log.finish().unwrap_err(), "disk full");
        assert!(!seen.lock().unwrap().finished);
    }
}
