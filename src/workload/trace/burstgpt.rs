//! BurstGPT traces (Wang et al., arXiv:2401.17644; GPT-3.5 and GPT-4 behind Azure OpenAI): CSV
//! `Timestamp, Model, Request tokens, Response tokens, Total tokens, Log Type`, and a `Session ID` column
//! in the releases that have one. `Timestamp` is seconds since the trace's first day began; it is kept
//! as is and must not decrease. Columns are found by name; only `Timestamp`, `Request tokens` and
//! `Response tokens` are required.
//!
//! **Failed requests.** BurstGPT's files with failures mark them with 0 response tokens. Such rows are
//! dropped and counted (a note says how many): they are not malformed, and the trace says nothing about
//! how much of them was served.
//!
//! **Sessions.** With a `Session ID`, rows of one session are its turns, in order. A turn's prompt is
//! taken to extend the previous turn's prompt and answer when it is long enough to hold them
//! (`request tokens ≥ previous request + previous response`): it is then the previous prompt's segments,
//! the previous answer's segment, and a new user message of the remaining tokens, so the history's
//! prefix is shared as it would be on a real chat service. A shorter prompt means the client cut or
//! summarised the history: it shares nothing (the turn still counts in its session). A session not seen
//! for [`super::SESSION_MEMORY`] of trace time is over: if its id comes back, that starts a new session.
//! Without a `Session ID` every prompt is unique.

use rustc_hash::FxHashMap as HashMap;

use super::text::{Header, check_count, field, parse_count, parse_scaled, split_csv};
use super::{Parser, SESSION_MEMORY, Timing, TraceRow, unique_content};
use crate::request::{Request, Segment, SessionRef};
use crate::time::SimTime;

/// What a session's next turn builds on.
struct Session {
    id: u64,
    turn: u32,
    /// The previous turn's prompt.
    segments: Vec<Segment>,
    prev_id: u64,
    prev_output: u32,
    last_seen: SimTime,
}

struct Columns {
    time: usize,
    input: usize,
    output: usize,
    session: Option<usize>,
}

/// Reads BurstGPT CSV lines.
#[derive(Default)]
pub struct BurstGptParser {
    columns: Option<Columns>,
    last: Option<SimTime>,
    next_id: u64,
    sessions: HashMap<String, Session>,
    next_session: u64,
    failed: u64,
    since_sweep: u32,
}

impl Parser for BurstGptParser {
    fn has_header(&self) -> bool {
        true
    }

    fn header(&mut self, line: &str) -> Result<(), String> {
        let h = Header::parse(line)?;
        self.columns = Some(Columns {
            time: h.require("Timestamp", "BurstGPT")?,
            input: h.require("Request tokens", "BurstGPT")?,
            output: h.require("Response tokens", "BurstGPT")?,
            session: h.find("Session ID"),
        });
        Ok(())
    }

    fn parse(&mut self, line: u64, text: &str) -> Result<Option<TraceRow>, String> {
        let c = self.columns.as_ref().expect("header read first");
        let f = split_csv(text)?;
        let at = SimTime(
            parse_scaled(field(&f, c.time, "Timestamp")?, 1_000_000_000)
                .map_err(|m| format!("`Timestamp` (seconds): {m}"))?,
        );
        let input = check_count(
            "Request tokens",
            parse_count(field(&f, c.input, "Request tokens")?)?,
            1,
        )?;
        let output = check_count(
            "Response tokens",
            parse_count(field(&f, c.output, "Response tokens")?)?,
            0,
        )?;
        let session_key = match c.session {
            Some(i) => Some(field(&f, i, "Session ID")?.to_string()).filter(|s| !s.is_empty()),
            None => None,
        };
        if let Some(last) = self.last
            && at < last
        {
            return Err(format!(
                "`Timestamp` {} s is earlier than the previous request's {} s: the trace must be in arrival order",
                at.as_secs_f64(),
                last.as_secs_f64()
            ));
        }
        self.last = Some(at);
        if output == 0 {
            self.failed += 1;
            return Ok(None);
        }
        self.sweep(at);
        let id = self.next_id;
        self.next_id += 1;
        let mut segments = Vec::new();
        let session = match &session_key {
            None => None,
            Some(key) => Some(match self.sessions.get_mut(key) {
                Some(s) if at.since(s.last_seen) <= SESSION_MEMORY => {
                    let history: u64 = s.segments.iter().map(|g| u64::from(g.tokens)).sum::<u64>()
                        + u64::from(s.prev_output);
                    if u64::from(input) >= history {
                        segments.extend_from_slice(&s.segments);
                        segments.push(Request::answer_segment(s.prev_id, s.prev_output));
                    }
                    s.turn += 1;
                    SessionRef {
                        id: s.id,
                        turn: s.turn,
                    }
                }
                // New, or back after being idle too long: a new session.
                _ => {
                    self.next_session += 1;
                    SessionRef {
                        id: self.next_session - 1,
                        turn: 0,
                    }
                }
            }),
        };
        let used: u32 = segments.iter().map(|g| g.tokens).sum();
        if input > used {
            segments.push(Segment {
                content: unique_content(id),
                tokens: input - used,
            });
        }
        if let (Some(key), Some(me)) = (session_key, session) {
            let state = self.sessions.entry(key).or_insert_with(|| Session {
                id: me.id,
                turn: 0,
                segments: Vec::new(),
                prev_id: id,
                prev_output: output,
                last_seen: at,
            });
            state.id = me.id;
            state.turn = me.turn;
            state.segments.clone_from(&segments);
            state.prev_id = id;
            state.prev_output = output;
            state.last_seen = at;
        }
        Ok(Some(TraceRow {
            model: None,
            adapter: None,
            line,
            id,
            session,
            timing: Timing::At(at),
            output_tokens: output,
            segments,
        }))
    }

    fn filtered_note(&self) -> Option<String> {
        (self.failed > 0).then(|| {
            format!(
                "dropped {} failed request{} (0 response tokens)",
                self.failed,
                if self.failed == 1 { "" } else { "s" }
            )
        })
    }
}

impl BurstGptParser {
    /// Forgets sessions idle for longer than [`SESSION_MEMORY`], every few thousand rows.
    fn sweep(&mut self, now: SimTime) {
        self.since_sweep += 1;
        if self.since_sweep < 4096 {
            return;
        }
        self.since_sweep = 0;
        self.sessions
            .retain(|_, s| now.since(s.last_seen) <= SESSION_MEMORY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::block_hashes;

    const HEADER: &str =
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type,Session ID";

    #[test]
    fn a_later_turn_extends_the_previous_prompt_and_answer() {
        let mut p = BurstGptParser::default();
        p.header(HEADER).unwrap();
        let t0 = p
            .parse(2, "10,ChatGPT,100,40,140,Conversation log,s1")
            .unwrap()
            .unwrap();
        let other = p
            .parse(3, "11,ChatGPT,100,40,140,Conversation log,s2")
            .unwrap()
            .unwrap();
        let t1 = p
            .parse(4, "30,ChatGPT,170,20,190,Conversation log,s1")
            .unwrap()
            .unwrap();
        assert_eq!(t0.session, Some(SessionRef { id: 0, turn: 0 }));
        assert_eq!(other.session, Some(SessionRef { id: 1, turn: 0 }));
        assert_eq!(t1.session, Some(SessionRef { id: 0, turn: 1 }));
        assert_eq!(t1.input_tokens(), 170);
        // Turn 1's prompt starts with turn 0's prompt and answer, block for block.
        let r0 = t0.to_request(SimTime::ZERO);
        let h0 = r0.block_hashes(16);
        let h1 = block_hashes(t1.segments.iter().copied(), 16);
        assert_eq!(h0.len(), 140 / 16);
        assert_eq!(h0[..], h1[..h0.len()]);
        // A prompt shorter than the history shares nothing but stays in the session.
        let t2 = p
            .parse(5, "40,ChatGPT,50,5,55,Conversation log,s1")
            .unwrap()
            .unwrap();
        assert_eq!(t2.session, Some(SessionRef { id: 0, turn: 2 }));
        assert_eq!(t2.segments.len(), 1);
        // Three hours later the same id is a new conversation.
        let t3 = p
            .parse(6, "10840,ChatGPT,500,5,505,Conversation log,s1")
            .unwrap()
            .unwrap();
        assert_eq!(t3.session, Some(SessionRef { id: 2, turn: 0 }));
        assert_eq!(t3.segments.len(), 1);
    }

    #[test]
    fn failed_requests_are_dropped_and_counted() {
        let mut p = BurstGptParser::default();
        p.header("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type")
            .unwrap();
        assert!(p.parse(2, "5,GPT-4,100,0,100,API log").unwrap().is_none());
        let r = p.parse(3, "6,GPT-4,100,3,103,API log").unwrap().unwrap();
        assert_eq!(r.session, None);
        assert!(
            p.filtered_note()
                .unwrap()
                .contains("dropped 1 failed request")
        );
        let e = p.parse(4, "7,GPT-4,-100,3,103,API log").unwrap_err();
        assert!(e.contains("`Request tokens` is negative"), "{e}");
        let e = p.parse(4, "5,GPT-4,100,3,103,API log").unwrap_err();
        assert!(e.contains("arrival order"), "{e}");
    }
}
