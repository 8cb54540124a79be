//! Mooncake traces (Moonshot AI, FAST'25): JSON Lines of
//! `{"timestamp": ms, "input_length": tokens, "output_length": tokens, "hash_ids": [...]}`.
//!
//! **Content.** `hash_ids` are ids of the prompt's 512-token blocks, chained: an id names the whole prefix
//! up to the end of its block, so equal ids at a position mean equal prefixes. Block `i` becomes a
//! [`Segment`] of 512 tokens whose content id is derived from its hash id, so equal ids give equal
//! segments and the worker's own (smaller) blocks chain over them with the same sharing. The last block
//! is usually partial: `input_length − 512·(n − 1)` tokens.
//!
//! **When `input_length` and `hash_ids` disagree** (`n` ids, `⌈input/512⌉` expected):
//! - fewer ids: the ids cover the first `512·n` tokens and the rest of the prompt is one segment unique
//!   to the request (tokens with no id cannot be shared);
//! - more ids: the line is an error (the ids would describe tokens the prompt does not have).
//!
//! **Sessions.** The trace has no session ids. With session reconstruction a request becomes the next turn
//! of an earlier one (its *parent*) when it extends the parent's full-block hash chain: among the earlier
//! requests whose full-block chain (k ≥ 2 blocks) equals this request's first k blocks and whose prompt
//! plus answer fit in this prompt (`input ≥ parent input + parent output − 16`), the most recent wins, and
//! the longest k first. This is a heuristic: it links what looks like a conversation, not ground truth
//! (two users pasting the same long document look alike). Parents are remembered for
//! [`SESSION_MEMORY`] of trace time.
//!
//! **Order.** Timestamps must not decrease. The conversation trace quantises arrivals to 3-second
//! buckets; [`super::TraceOptions::jitter`] spreads them.

use std::collections::VecDeque;
use std::io::Write;

use rustc_hash::FxHashMap as HashMap;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::text::{check_count, json_message, parse_scaled};
use super::{Parser, SESSION_MEMORY, Timing, TraceRow, TraceWriter, unique_content};
use crate::request::{Segment, SessionRef, block_hashes_and_partial};
use crate::rng::{fnv1a, splitmix64};
use crate::time::SimTime;

/// Tokens per hash block in Mooncake's published traces.
pub const BLOCK_TOKENS: u32 = 512;

/// Slack in the parent test `input ≥ parent input + parent output − SLACK`: chat templates add or drop a
/// few tokens around each turn.
const PARENT_SLACK: u32 = 16;

/// Content id of the block with hash id `h`.
pub fn block_content(h: u64) -> u64 {
    splitmix64(fnv1a(b"mooncake-block") ^ h)
}

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(borrow)]
    timestamp: Option<&'a RawValue>,
    input_length: Option<i64>,
    output_length: Option<i64>,
    hash_ids: Option<Vec<u64>>,
}

/// Reads Mooncake lines.
pub struct MooncakeParser {
    block_size: u32,
    last_time: Option<SimTime>,
    next_id: u64,
    sessions: Option<Reconstructor>,
}

impl MooncakeParser {
    /// A parser for hash blocks of `block_size` tokens, rebuilding sessions if `reconstruct`.
    pub fn new(block_size: u32, reconstruct: bool) -> Self {
        MooncakeParser {
            block_size: block_size.max(1),
            last_time: None,
            next_id: 0,
            sessions: reconstruct.then(Reconstructor::default),
        }
    }
}

impl Parser for MooncakeParser {
    fn parse(&mut self, line: u64, text: &str) -> Result<Option<TraceRow>, String> {
        let raw: Line = serde_json::from_str(text)
            .map_err(|e| format!("invalid JSON: {}", json_message(&e)))?;
        let missing = |k: &str| format!("missing field `{k}`");
        let ts = raw.timestamp.ok_or_else(|| missing("timestamp"))?;
        let at = SimTime(
            parse_scaled(ts.get(), 1_000_000)
                .map_err(|m| format!("`timestamp` (milliseconds): {m}"))?,
        );
        let input = check_count(
            "input_length",
            raw.input_length.ok_or_else(|| missing("input_length"))?,
            1,
        )?;
        let output = check_count(
            "output_length",
            raw.output_length.ok_or_else(|| missing("output_length"))?,
            1,
        )?;
        let ids = raw.hash_ids.ok_or_else(|| missing("hash_ids"))?;
        let b = self.block_size;
        let need = input.div_ceil(b) as usize;
        if ids.len() > need {
            return Err(format!(
                "`hash_ids` lists {} blocks but `input_length` {input} fills only {need} blocks of {b} tokens",
                ids.len()
            ));
        }
        if let Some(last) = self.last_time
            && at < last
        {
            return Err(format!(
                "`timestamp` {} ms is earlier than the previous request's {} ms: the trace must be in arrival order",
                at.0 as f64 / 1e6,
                last.0 as f64 / 1e6
            ));
        }
        let id = self.next_id;
        let mut segments: Vec<Segment> = ids
            .iter()
            .enumerate()
            .map(|(i, &h)| Segment {
                content: block_content(h),
                tokens: (input - b * i as u32).min(b),
            })
            .collect();
        let hashed = (b as usize * ids.len()).min(input as usize) as u32;
        if hashed < input {
            segments.push(Segment {
                content: unique_content(id),
                tokens: input - hashed,
            });
        }
        let session = self
            .sessions
            .as_mut()
            .map(|s| s.link(at, &ids, input, output, b));
        self.last_time = Some(at);
        self.next_id += 1;
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
}

/// A request that may become the parent of a later one.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    session: u64,
    turn: u32,
    input: u32,
    output: u32,
}

/// Session reconstruction state: candidate parents keyed by their full-block chain, which a chained
/// hash id names on its own: `(full blocks k, id of block k − 1)`.
#[derive(Default)]
struct Reconstructor {
    parents: HashMap<(u32, u64), Vec<Candidate>>,
    /// Insertion order, for forgetting candidates older than [`SESSION_MEMORY`].
    order: VecDeque<(SimTime, (u32, u64))>,
    next_session: u64,
}

impl Reconstructor {
    /// Links a request (arriving at `at`, with hash ids `ids`) to its session and registers it as a
    /// candidate parent.
    fn link(&mut self, at: SimTime, ids: &[u64], input: u32, output: u32, b: u32) -> SessionRef {
        while let Some(&(t, key)) = self.order.front()
            && at.since(t) > SESSION_MEMORY
        {
            self.order.pop_front();
            if let Some(list) = self.parents.get_mut(&key) {
                // Candidates of one key are in arrival order: the oldest is first.
                list.remove(0);
                if list.is_empty() {
                    self.parents.remove(&key);
                }
            }
        }
        let parent = (2..=ids.len()).rev().find_map(|k| {
            self.parents.get(&(k as u32, ids[k - 1])).and_then(|list| {
                list.iter()
                    .rev()
                    .find(|p| input + PARENT_SLACK >= p.input + p.output)
                    .copied()
            })
        });
        let me = match parent {
            Some(p) => SessionRef {
                id: p.session,
                turn: p.turn + 1,
            },
            None => {
                self.next_session += 1;
                SessionRef {
                    id: self.next_session - 1,
                    turn: 0,
                }
            }
        };
        let full = ((input / b) as usize).min(ids.len());
        if full >= 2 {
            let key = (full as u32, ids[full - 1]);
            self.parents.entry(key).or_default().push(Candidate {
                session: me.id,
                turn: me.turn,
                input,
                output,
            });
            self.order.push_back((at, key));
        }
        me
    }
}

/// Writes Mooncake lines. Hash ids are numbered in order of first appearance, each naming one distinct
/// chained block of `block_size` tokens (a partial last block is an id of its own), so prefix identity
/// survives at block granularity. Keeps one map entry per distinct block.
pub struct MooncakeWriter<W: Write> {
    out: std::io::BufWriter<W>,
    block_size: u32,
    ids: HashMap<u64, u64>,
}

impl<W: Write> MooncakeWriter<W> {
    /// A writer with hash blocks of `block_size` tokens.
    pub fn new(out: W, block_size: u32) -> Self {
        MooncakeWriter {
            out: std::io::BufWriter::new(out),
            block_size: block_size.max(1),
            ids: HashMap::default(),
        }
    }
}

impl<W: Write> TraceWriter for MooncakeWriter<W> {
    fn write_row(&mut self, row: &TraceRow) -> Result<(), String> {
        let Timing::At(at) = row.timing else {
            return Err(
                "a closed-loop turn (a think time) cannot be written as Mooncake, which has only arrival times; write native"
                    .into(),
            );
        };
        let (full, partial) =
            block_hashes_and_partial(row.segments.iter().copied(), self.block_size);
        let mut ids = Vec::with_capacity(full.len() + 1);
        for h in full.into_iter().chain(partial) {
            let next = self.ids.len() as u64;
            ids.push(*self.ids.entry(h).or_insert(next));
        }
        let ids: Vec<String> = ids.iter().map(u64::to_string).collect();
        // The layout of the published files (Python's json.dumps), so a round trip is byte-identical.
        writeln!(
            self.out,
            "{{\"timestamp\": {}, \"input_length\": {}, \"output_length\": {}, \"hash_ids\": [{}]}}",
            super::text::format_millis(at.0),
            row.input_tokens(),
            row.output_tokens,
            ids.join(", ")
        )
        .map_err(|e| e.to_string())
    }

    fn finish(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(p: &mut MooncakeParser, text: &str) -> Result<TraceRow, String> {
        p.parse(1, text).map(|r| r.unwrap())
    }

    #[test]
    fn hash_ids_become_512_token_segments_with_a_partial_last() {
        let mut p = MooncakeParser::new(512, false);
        let r = parse(
            &mut p,
            r#"{"timestamp": 1500, "input_length": 1100, "output_length": 7, "hash_ids": [4, 9, 2]}"#,
        )
        .unwrap();
        assert_eq!(r.timing, Timing::At(SimTime(1_500_000_000)));
        assert_eq!(r.input_tokens(), 1100);
        let tokens: Vec<u32> = r.segments.iter().map(|s| s.tokens).collect();
        assert_eq!(tokens, [512, 512, 76]);
        assert_eq!(r.segments[0].content, block_content(4));
        assert_eq!(r.segments[2].content, block_content(2));
    }

    #[test]
    fn fewer_ids_leave_a_unique_tail_and_more_ids_are_an_error() {
        let mut p = MooncakeParser::new(512, false);
        let r = parse(
            &mut p,
            r#"{"timestamp": 0, "input_length": 1100, "output_length": 7, "hash_ids": [4]}"#,
        )
        .unwrap();
        let tokens: Vec<u32> = r.segments.iter().map(|s| s.tokens).collect();
        assert_eq!(tokens, [512, 588]);
        assert_eq!(r.segments[1].content, unique_content(r.id));
        let e = parse(
            &mut p,
            r#"{"timestamp": 0, "input_length": 100, "output_length": 7, "hash_ids": [4, 5]}"#,
        )
        .unwrap_err();
        assert!(e.contains("2 blocks") && e.contains("only 1"), "{e}");
    }

    #[test]
    fn malformed_lines_name_the_problem() {
        let mut p = MooncakeParser::new(512, false);
        for (text, want) in [
            (r#"{"timestamp": 0, "input_length": 10"#, "invalid JSON"),
            (
                r#"{"timestamp": 0, "output_length": 1, "hash_ids": []}"#,
                "missing field `input_length`",
            ),
            (
                r#"{"timestamp": 0, "input_length": 10, "output_length": -1, "hash_ids": [1]}"#,
                "`output_length` is negative",
            ),
            (
                r#"{"timestamp": -5, "input_length": 10, "output_length": 1, "hash_ids": [1]}"#,
                "`timestamp`",
            ),
            (
                r#"{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [-1]}"#,
                "invalid JSON",
            ),
        ] {
            let e = parse(&mut p, text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
        parse(
            &mut p,
            r#"{"timestamp": 10, "input_length": 10, "output_length": 1, "hash_ids": [1]}"#,
        )
        .unwrap();
        let e = parse(
            &mut p,
            r#"{"timestamp": 9, "input_length": 10, "output_length": 1, "hash_ids": [1]}"#,
        )
        .unwrap_err();
        assert!(e.contains("earlier than the previous"), "{e}");
    }

    #[test]
    fn a_follow_up_that_extends_a_full_chain_joins_its_session() {
        let mut p = MooncakeParser::new(512, true);
        let line = |ts: u32, input: u32, output: u32, ids: &str| {
            format!(
                r#"{{"timestamp": {ts}, "input_length": {input}, "output_length": {output}, "hash_ids": [{ids}]}}"#
            )
        };
        // Turn 0: 1,100 tokens (2 full blocks + partial), answer 200.
        let t0 = parse(&mut p, &line(0, 1100, 200, "0, 1, 2")).unwrap();
        // An unrelated request sharing only the first block (a system prompt): a new session.
        let other = parse(&mut p, &line(1, 900, 10, "0, 7")).unwrap();
        // Turn 1 extends blocks [0, 1] and holds 1,100 + 200 + 300 tokens.
        let t1 = parse(&mut p, &line(50, 1600, 50, "0, 1, 3, 4")).unwrap();
        // Too short to contain turn 0's prompt and answer: not a follow-up.
        let short = parse(&mut p, &line(60, 1200, 50, "0, 1, 5")).unwrap();
        let s = |r: &TraceRow| r.session.unwrap();
        assert_eq!(s(&t0), SessionRef { id: 0, turn: 0 });
        assert_eq!(s(&other), SessionRef { id: 1, turn: 0 });
        assert_eq!(s(&t1), SessionRef { id: 0, turn: 1 });
        assert_eq!(s(&short).turn, 0);
        assert_ne!(s(&short).id, 0);
    }
}
