//! Replaying a trace as a workload.
//!
//! Open-loop rows stream through [`Workload::next_arrival`], one at a time. A closed-loop row (a think
//! time) waits in its session's queue until its previous turn finishes, then arrives a think time
//! later. The native format puts a closed-loop turn right after its session's previous turn, so by the
//! time a turn finishes, the engine has already pulled the next open-loop arrival and with it every
//! queued turn that follows: only live sessions' future turns are held.
//!
//! A turn that fails or is rejected ends its session (its queued turns are dropped), as in the session
//! generator. Nothing arrives at or after the end of the arrival window, and at most `max_requests`.

use std::collections::VecDeque;

use rustc_hash::FxHashMap as HashMap;

use super::{RowStream, Timing, TraceError, TraceRow};
use crate::metrics::record::{Outcome, RequestRecord};
use crate::request::Request;
use crate::time::SimTime;
use crate::workload::Workload;

/// A trace replayed as a workload.
pub struct Replay {
    rows: RowStream,
    end: SimTime,
    remaining: u64,
    queued: HashMap<u64, VecDeque<TraceRow>>,
    error: Option<TraceError>,
    done: bool,
}

impl Replay {
    /// Replays `rows`; no arrival at or after `end`, at most `max_requests` requests.
    pub fn new(rows: RowStream, end: SimTime, max_requests: Option<u64>) -> Self {
        Replay {
            rows,
            end,
            remaining: max_requests.unwrap_or(u64::MAX),
            queued: HashMap::default(),
            error: None,
            done: false,
        }
    }
}

impl Workload for Replay {
    fn next_arrival(&mut self) -> Option<Request> {
        while !self.done {
            match self.rows.next() {
                None => self.done = true,
                Some(Err(e)) => {
                    self.error = Some(e);
                    self.done = true;
                }
                Some(Ok(row)) => match row.timing {
                    Timing::At(t) if t >= self.end || self.remaining == 0 => self.done = true,
                    Timing::At(t) => {
                        self.remaining -= 1;
                        return Some(row.to_request(t));
                    }
                    Timing::After(_) => {
                        let s = row
                            .session
                            .expect("a reader checks that a think row has a session");
                        self.queued.entry(s.id).or_default().push_back(row);
                    }
                },
            }
        }
        None
    }

    fn on_finished(&mut self, record: &RequestRecord, now: SimTime) -> Option<Request> {
        let session = record.session?;
        let queue = self.queued.get_mut(&session)?;
        let next = queue.front()?;
        if next.session.map(|s| s.turn) != record.turn.map(|t| t + 1) {
            return None;
        }
        let Timing::After(think) = next.timing else {
            unreachable!("only think rows are queued");
        };
        let arrival = now + think;
        if record.outcome != Outcome::Completed || arrival >= self.end || self.remaining == 0 {
            self.queued.remove(&session);
            return None;
        }
        let row = queue.pop_front().expect("peeked");
        if queue.is_empty() {
            self.queued.remove(&session);
        }
        self.remaining -= 1;
        Some(row.to_request(arrival))
    }

    fn take_error(&mut self) -> Option<String> {
        self.error.take().map(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::trace::TraceOptions;
    use crate::workload::trace::testutil::TempTrace;

    const CLOSED: &str = r#"{"id":0,"session":0,"turn":0,"arrival":1,"input":10,"output":2}
{"id":1,"session":0,"turn":1,"think":5,"input":20,"output":2}
{"id":2,"session":0,"turn":2,"think":5,"input":30,"output":2}
{"id":3,"session":1,"turn":0,"arrival":2,"input":10,"output":2}
{"id":4,"session":1,"turn":1,"think":1,"input":20,"output":2}
"#;

    fn done(r: &Request, outcome: Outcome, at: SimTime) -> RequestRecord {
        RequestRecord {
            worker: None,
            class: 0,
            ..crate::workload::test_record(r, outcome, at)
        }
    }

    #[test]
    fn closed_loop_turns_wait_for_their_predecessor() {
        let t = TempTrace::new("c.jsonl", CLOSED);
        let rows = RowStream::open(&t.0, &TraceOptions::default()).unwrap();
        let mut w = Replay::new(rows, SimTime::MAX, None);
        let a = w.next_arrival().unwrap();
        let b = w.next_arrival().unwrap();
        assert_eq!((a.id, b.id), (0, 3));
        assert!(w.next_arrival().is_none());
        let secs = |s: u64| SimTime(s * 1_000_000_000);
        let t1 = w
            .on_finished(&done(&a, Outcome::Completed, secs(4)), secs(4))
            .unwrap();
        assert_eq!((t1.id, t1.arrival), (1, secs(9)));
        let t2 = w
            .on_finished(&done(&t1, Outcome::Completed, secs(10)), secs(10))
            .unwrap();
        assert_eq!((t2.id, t2.arrival), (2, secs(15)));
        assert!(
            w.on_finished(&done(&t2, Outcome::Completed, secs(16)), secs(16))
                .is_none()
        );
        // Session 1's first turn is rejected: its second never arrives.
        assert!(
            w.on_finished(&done(&b, Outcome::Rejected, secs(2)), secs(2))
                .is_none()
        );
        assert!(w.queued.is_empty());
    }

    #[test]
    fn the_window_and_the_cap_stop_arrivals() {
        let t = TempTrace::new("c.jsonl", CLOSED);
        let rows = RowStream::open(&t.0, &TraceOptions::default()).unwrap();
        let mut w = Replay::new(rows, SimTime(1_500_000_000), None);
        let a = w.next_arrival().unwrap();
        assert!(w.next_arrival().is_none());
        let late = SimTime(1_000_000_000 + 1);
        assert!(
            w.on_finished(&done(&a, Outcome::Completed, late), late)
                .is_none()
        );

        let rows = RowStream::open(&t.0, &TraceOptions::default()).unwrap();
        let mut w = Replay::new(rows, SimTime::MAX, Some(3));
        let a = w.next_arrival().unwrap();
        let _b = w.next_arrival().unwrap();
        let t1 = w
            .on_finished(&done(&a, Outcome::Completed, SimTime(0)), SimTime(0))
            .unwrap();
        assert!(
            w.on_finished(&done(&t1, Outcome::Completed, SimTime(0)), SimTime(0))
                .is_none(),
            "the cap counts follow-ups too"
        );
    }

    #[test]
    fn a_bad_line_mid_run_is_kept_as_the_error() {
        let t = TempTrace::new(
            "c.jsonl",
            &CLOSED.replace(
                r#""input":10,"output":2}
{"id":4"#,
                r#""input":10,"output":-2}
{"id":4"#,
            ),
        );
        let rows = RowStream::open(&t.0, &TraceOptions::default()).unwrap();
        let mut w = Replay::new(rows, SimTime::MAX, None);
        assert!(w.next_arrival().is_some());
        assert!(w.next_arrival().is_none());
        let e = w.take_error().unwrap();
        assert!(
            e.contains("c.jsonl:4:") && e.contains("`output` is negative"),
            "{e}"
        );
    }
}
