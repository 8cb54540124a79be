//! fleetsim's own trace format: everything a request needs, including closed-loop turns and content
//! identity, in JSON Lines or CSV. The schema is documented in `traces/README.md`:
//!
//! ```text
//! {"id":0,"session":0,"turn":0,"arrival":0.5,"input":1700,"output":120,"segments":["9e3779b97f4a7c15:1500","b1f0c0de00000001:200"]}
//! {"id":1,"session":0,"turn":1,"think":12.25,"input":1900,"output":80,"segments":["9e3779b97f4a7c15:1500","b1f0c0de00000001:200","5f0e2d3c4b5a6978:120","00000000000000aa:80"]}
//! ```
//! ```text
//! id,session,turn,arrival,think,input,output,segments
//! 0,0,0,0.5,,1700,120,9e3779b97f4a7c15:1500 b1f0c0de00000001:200
//! ```
//!
//! - `arrival` (seconds, open loop) or `think` (seconds after the previous turn of the session completes,
//!   closed loop): exactly one per row. Arrivals must not decrease. A `think` row must come right after
//!   its session's previous turn, with the next turn number: a replay then holds a session's future turns
//!   only while the session is live.
//! - `session` and `turn` (from 0) together, or neither.
//! - `id`: unique request ids, on every row or on none (then rows are numbered from 0). A turn's prompt
//!   names its previous answer's content by the previous request's id, so keep ids when editing.
//! - `segments`: the prompt's content, `content:tokens` with the content id in hex; tokens must add up to
//!   `input`. Without it the prompt is unique to the request.
//!
//! Times are read from their decimal text exactly, so a file written by fleetsim reads back to the same
//! nanosecond and writes out again byte for byte.

use std::borrow::Cow;
use std::io::Write;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::text::{
    Header, check_count, format_secs, json_message, parse_count, parse_scaled, split_csv,
};
use super::{Parser, Timing, TraceRow, TraceWriter, unique_content};
use crate::request::{Segment, SessionRef};
use crate::time::{SimDuration, SimTime};

/// The columns of the CSV flavour, in the order fleetsim writes them.
pub const CSV_COLUMNS: [&str; 8] = [
    "id", "session", "turn", "arrival", "think", "input", "output", "segments",
];

/// The columns the CSV flavour may have: those it writes, and `model`, `adapter` and `adapter_rank`
/// (read, never written: a trace whose requests name models or adapters is written as JSON Lines).
const READ_COLUMNS: [&str; 11] = [
    "id",
    "session",
    "turn",
    "arrival",
    "think",
    "input",
    "output",
    "segments",
    "model",
    "adapter",
    "adapter_rank",
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonLine<'a> {
    id: Option<u64>,
    session: Option<u64>,
    turn: Option<u32>,
    #[serde(borrow)]
    arrival: Option<&'a RawValue>,
    #[serde(borrow)]
    think: Option<&'a RawValue>,
    input: Option<i64>,
    output: Option<i64>,
    #[serde(borrow)]
    segments: Option<Vec<Cow<'a, str>>>,
    #[serde(borrow)]
    model: Option<Cow<'a, str>>,
    #[serde(borrow)]
    adapter: Option<Cow<'a, str>>,
    adapter_rank: Option<i64>,
}

/// One row's fields before checking, whichever flavour they came from.
#[derive(Default)]
struct Fields<'a> {
    id: Option<u64>,
    session: Option<u64>,
    turn: Option<u32>,
    arrival: Option<&'a str>,
    think: Option<&'a str>,
    input: Option<i64>,
    output: Option<i64>,
    segments: Option<Vec<Cow<'a, str>>>,
    model: Option<Cow<'a, str>>,
    adapter: Option<Cow<'a, str>>,
    adapter_rank: Option<i64>,
}

/// Reads native lines (JSONL or CSV).
pub struct NativeParser {
    csv: Option<Option<[Option<usize>; 11]>>,
    prev: Option<Option<SessionRef>>,
    last_arrival: Option<SimTime>,
    ids_given: Option<bool>,
    next_index: u64,
    /// Ids given so far (8 bytes and a hash slot per row): a repeated id would make two requests share
    /// one answer's content, and so KV blocks they never shared.
    seen_ids: rustc_hash::FxHashSet<u64>,
}

impl NativeParser {
    /// A parser for the CSV flavour if `csv`, else JSON Lines.
    pub fn new(csv: bool) -> Self {
        NativeParser {
            csv: csv.then_some(None),
            prev: None,
            last_arrival: None,
            ids_given: None,
            next_index: 0,
            seen_ids: Default::default(),
        }
    }

    fn check(&mut self, line: u64, f: Fields) -> Result<TraceRow, String> {
        let missing = |k: &str| format!("missing field `{k}`");
        let input = check_count("input", f.input.ok_or_else(|| missing("input"))?, 1)?;
        let output = check_count("output", f.output.ok_or_else(|| missing("output"))?, 1)?;
        let session = match (f.session, f.turn) {
            (Some(id), Some(turn)) => Some(SessionRef { id, turn }),
            (None, None) => None,
            (Some(_), None) => return Err("`session` needs a `turn`".into()),
            (None, Some(_)) => return Err("`turn` needs a `session`".into()),
        };
        let secs = |k: &str, v: &str| {
            parse_scaled(v, 1_000_000_000).map_err(|m| format!("`{k}` (seconds): {m}"))
        };
        let timing = match (f.arrival, f.think) {
            (Some(a), None) => Timing::At(SimTime(secs("arrival", a)?)),
            (None, Some(t)) => Timing::After(SimDuration(secs("think", t)?)),
            (Some(_), Some(_)) => {
                return Err("a row has `arrival` or `think`, not both".into());
            }
            (None, None) => {
                return Err(
                    "missing field `arrival` (open loop) or `think` (closed-loop turn)".into(),
                );
            }
        };
        match timing {
            Timing::At(t) => {
                if let Some(last) = self.last_arrival
                    && t < last
                {
                    return Err(format!(
                        "`arrival` {} s is earlier than the previous arrival {} s: open-loop rows must be in arrival order",
                        format_secs(t.0),
                        format_secs(last.0)
                    ));
                }
            }
            Timing::After(_) => {
                let Some(me) = session else {
                    return Err(
                        "a `think` row is a closed-loop turn and needs `session` and `turn`".into(),
                    );
                };
                let follows = matches!(self.prev, Some(Some(p)) if p.id == me.id && p.turn.checked_add(1) == Some(me.turn));
                if !follows {
                    return Err(format!(
                        "a `think` row (session {}, turn {}) must come right after turn {} of its session",
                        me.id,
                        me.turn,
                        me.turn.saturating_sub(1)
                    ));
                }
            }
        }
        let given = self.ids_given.unwrap_or(f.id.is_some());
        if given != f.id.is_some() {
            return Err(if given {
                "missing field `id` (earlier rows have ids: give every row one or none)".into()
            } else {
                "`id` given but earlier rows have none: give every row one or none".into()
            });
        }
        let id = f.id.unwrap_or(self.next_index);
        if given && self.seen_ids.contains(&id) {
            return Err(format!(
                "`id` {id} is used by an earlier row: request ids must be unique"
            ));
        }
        let segments = match f.segments {
            Some(list) => {
                let segs = list
                    .iter()
                    .map(|s| parse_segment(s))
                    .collect::<Result<Vec<_>, _>>()?;
                let sum: u64 = segs.iter().map(|s| u64::from(s.tokens)).sum();
                if sum != u64::from(input) {
                    return Err(format!(
                        "`segments` hold {sum} tokens but `input` is {input}"
                    ));
                }
                segs
            }
            None => vec![Segment {
                content: unique_content(id),
                tokens: input,
            }],
        };
        let model = f.model.as_deref().map(parse_model).transpose()?;
        let adapter = match (f.adapter.as_deref().map(str::trim), f.adapter_rank) {
            (Some(""), _) => return Err("`adapter`: the name is empty".into()),
            (Some(name), rank) => Some(super::TraceAdapter {
                name: name.to_string(),
                rank: match rank {
                    Some(r) => check_count("adapter_rank", r, 1)?,
                    None => super::TraceAdapter::DEFAULT_RANK,
                },
            }),
            (None, Some(_)) => return Err("`adapter_rank` needs an `adapter`".into()),
            (None, None) => None,
        };
        if let Timing::At(t) = timing {
            self.last_arrival = Some(t);
        }
        self.prev = Some(session);
        self.ids_given = Some(given);
        if given {
            self.seen_ids.insert(id);
        }
        self.next_index += 1;
        Ok(TraceRow {
            line,
            id,
            session,
            timing,
            output_tokens: output,
            segments,
            model,
            adapter,
        })
    }
}

/// A catalogue model id.
fn parse_model(text: &str) -> Result<crate::hardware::ModelId, String> {
    use crate::hardware::ModelId;
    ModelId::ALL
        .into_iter()
        .find(|m| m.as_str() == text.trim())
        .ok_or_else(|| {
            let known: Vec<&str> = ModelId::ALL.iter().map(|m| m.as_str()).collect();
            format!(
                "`model`: unknown model `{text}` (the catalogue's: {})",
                known.join(", ")
            )
        })
}

/// Parses `content:tokens`, the content id in hex.
fn parse_segment(text: &str) -> Result<Segment, String> {
    let bad = || {
        format!(
            "bad segment `{text}`: expected content:tokens, the content id in hex (e.g. 9e3779b97f4a7c15:512)"
        )
    };
    let (c, t) = text.trim().split_once(':').ok_or_else(bad)?;
    if c.is_empty() || c.len() > 16 {
        return Err(bad());
    }
    let content = u64::from_str_radix(c, 16).map_err(|_| bad())?;
    let tokens = parse_count(t).map_err(|_| bad())?;
    if tokens < 1 {
        return Err(format!(
            "bad segment `{text}`: a segment holds at least 1 token"
        ));
    }
    let tokens = u32::try_from(tokens).map_err(|_| bad())?;
    Ok(Segment { content, tokens })
}

impl Parser for NativeParser {
    fn has_header(&self) -> bool {
        self.csv.is_some()
    }

    fn header(&mut self, line: &str) -> Result<(), String> {
        let h = Header::parse(line)?;
        let mut cols = [None; 11];
        for (slot, name) in cols.iter_mut().zip(READ_COLUMNS) {
            *slot = h.find(name);
        }
        let names = super::text::split_csv(line)?;
        if let Some(unknown) = names.iter().find(|n| {
            !READ_COLUMNS
                .iter()
                .any(|c| super::text::column_key(c) == super::text::column_key(n))
        }) {
            return Err(format!(
                "unknown column `{unknown}` (native CSV columns: {})",
                READ_COLUMNS.join(", ")
            ));
        }
        for required in ["input", "output"] {
            h.require(required, "native")?;
        }
        if cols[3].is_none() && cols[4].is_none() {
            return Err("the header needs an `arrival` or a `think` column".into());
        }
        self.csv = Some(Some(cols));
        Ok(())
    }

    fn parse(&mut self, line: u64, text: &str) -> Result<Option<TraceRow>, String> {
        match self.csv {
            None => {
                let j: JsonLine = serde_json::from_str(text)
                    .map_err(|e| format!("invalid JSON: {}", json_message(&e)))?;
                let num = |v: Option<&RawValue>, k: &str| -> Result<Option<String>, String> {
                    match v.map(RawValue::get) {
                        None | Some("null") => Ok(None),
                        Some(s) if s.starts_with('"') => {
                            Err(format!("`{k}` must be a number of seconds, not a string"))
                        }
                        Some(s) => Ok(Some(s.to_string())),
                    }
                };
                let arrival = num(j.arrival, "arrival")?;
                let think = num(j.think, "think")?;
                let f = Fields {
                    id: j.id,
                    session: j.session,
                    turn: j.turn,
                    arrival: arrival.as_deref(),
                    think: think.as_deref(),
                    input: j.input,
                    output: j.output,
                    segments: j.segments,
                    model: j.model,
                    adapter: j.adapter,
                    adapter_rank: j.adapter_rank,
                };
                self.check(line, f).map(Some)
            }
            Some(cols) => {
                let cols = cols.expect("header read first");
                let fields = split_csv(text)?;
                let get = |i: usize| -> Option<&str> {
                    cols[i]
                        .and_then(|c| fields.get(c))
                        .map(String::as_str)
                        .filter(|s| !s.is_empty())
                };
                let int = |i: usize| -> Result<Option<i64>, String> {
                    get(i)
                        .map(|v| parse_count(v).map_err(|m| format!("`{}`: {m}", READ_COLUMNS[i])))
                        .transpose()
                };
                let nonneg = |i: usize| -> Result<Option<u64>, String> {
                    int(i)?
                        .map(|v| {
                            u64::try_from(v)
                                .map_err(|_| format!("`{}` is negative: {v}", READ_COLUMNS[i]))
                        })
                        .transpose()
                };
                let turn = nonneg(2)?
                    .map(|t| u32::try_from(t).map_err(|_| format!("`turn` is too large: {t}")))
                    .transpose()?;
                let f = Fields {
                    id: nonneg(0)?,
                    session: nonneg(1)?,
                    turn,
                    arrival: get(3),
                    think: get(4),
                    input: int(5)?,
                    output: int(6)?,
                    segments: get(7).map(|s| s.split_whitespace().map(Cow::Borrowed).collect()),
                    model: get(8).map(Cow::Borrowed),
                    adapter: get(9).map(Cow::Borrowed),
                    adapter_rank: int(10)?,
                };
                self.check(line, f).map(Some)
            }
        }
    }
}

/// Writes native rows, JSONL or CSV, in canonical form (what the parser reads back identically).
pub struct NativeWriter<W: Write> {
    out: std::io::BufWriter<W>,
    csv: bool,
    header: bool,
}

impl<W: Write> NativeWriter<W> {
    /// A writer of the CSV flavour if `csv`, else JSON Lines.
    pub fn new(out: W, csv: bool) -> Self {
        NativeWriter {
            out: std::io::BufWriter::new(out),
            csv,
            header: false,
        }
    }

    fn write_header(&mut self) -> std::io::Result<()> {
        if self.csv && !self.header {
            writeln!(self.out, "{}", CSV_COLUMNS.join(","))?;
        }
        self.header = true;
        Ok(())
    }
}

fn segment_text(s: &Segment) -> String {
    format!("{:016x}:{}", s.content, s.tokens)
}

impl<W: Write> TraceWriter for NativeWriter<W> {
    fn write_row(&mut self, row: &TraceRow) -> Result<(), String> {
        self.write_header().map_err(|e| e.to_string())?;
        let (arrival, think) = match row.timing {
            Timing::At(t) => (Some(format_secs(t.0)), None),
            Timing::After(d) => (None, Some(format_secs(d.0))),
        };
        let segs: Vec<String> = row.segments.iter().map(segment_text).collect();
        if self.csv && (row.model.is_some() || row.adapter.is_some()) {
            return Err(format!(
                "request {} names a model or an adapter, which the CSV flavour does not carry: write \
                 JSON Lines (a .jsonl file) instead",
                row.id
            ));
        }
        let result = if self.csv {
            let opt = |v: Option<String>| v.unwrap_or_default();
            writeln!(
                self.out,
                "{},{},{},{},{},{},{},{}",
                row.id,
                opt(row.session.map(|s| s.id.to_string())),
                opt(row.session.map(|s| s.turn.to_string())),
                opt(arrival),
                opt(think),
                row.input_tokens(),
                row.output_tokens,
                segs.join(" ")
            )
        } else {
            let mut o = format!("{{\"id\":{}", row.id);
            if let Some(s) = row.session {
                o.push_str(&format!(",\"session\":{},\"turn\":{}", s.id, s.turn));
            }
            match (arrival, think) {
                (Some(a), _) => o.push_str(&format!(",\"arrival\":{a}")),
                (_, Some(t)) => o.push_str(&format!(",\"think\":{t}")),
                _ => unreachable!("a row has a timing"),
            }
            let quoted: Vec<String> = segs.iter().map(|s| format!("\"{s}\"")).collect();
            o.push_str(&format!(
                ",\"input\":{},\"output\":{},\"segments\":[{}]",
                row.input_tokens(),
                row.output_tokens,
                quoted.join(",")
            ));
            if let Some(m) = row.model {
                o.push_str(&format!(",\"model\":\"{}\"", m.as_str()));
            }
            if let Some(a) = &row.adapter {
                let name = serde_json::to_string(&a.name).map_err(|e| e.to_string())?;
                o.push_str(&format!(",\"adapter\":{name},\"adapter_rank\":{}", a.rank));
            }
            o.push('}');
            writeln!(self.out, "{o}")
        };
        result.map_err(|e| e.to_string())
    }

    fn finish(&mut self) -> std::io::Result<()> {
        self.write_header()?;
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jsonl(lines: &[&str]) -> Result<Vec<TraceRow>, String> {
        let mut p = NativeParser::new(false);
        lines
            .iter()
            .enumerate()
            .map(|(i, l)| p.parse(i as u64 + 1, l).map(Option::unwrap))
            .collect()
    }

    #[test]
    fn reads_open_and_closed_loop_rows() {
        let rows = jsonl(&[
            r#"{"id":7,"session":3,"turn":0,"arrival":1.5,"input":30,"output":4,"segments":["a:20","ff:10"]}"#,
            r#"{"id":9,"session":3,"turn":1,"think":0.000000001,"input":5,"output":4}"#,
        ])
        .unwrap();
        assert_eq!(rows[0].timing, Timing::At(SimTime(1_500_000_000)));
        assert_eq!(
            rows[0].segments,
            [
                Segment {
                    content: 0xa,
                    tokens: 20
                },
                Segment {
                    content: 0xff,
                    tokens: 10
                }
            ]
        );
        assert_eq!(rows[1].timing, Timing::After(SimDuration(1)));
        assert_eq!(rows[1].segments[0].content, unique_content(9));
    }

    #[test]
    fn rule_breaking_rows_are_errors_that_say_why() {
        let open = r#"{"arrival":2,"input":5,"output":1}"#;
        for (second, want) in [
            (r#"{"arrival":1,"input":5,"output":1}"#, "arrival order"),
            (
                r#"{"arrival":3,"think":1,"input":5,"output":1}"#,
                "not both",
            ),
            (r#"{"input":5,"output":1}"#, "missing field `arrival`"),
            (
                r#"{"session":1,"turn":1,"think":1,"input":5,"output":1}"#,
                "must come right after turn 0",
            ),
            (
                r#"{"arrival":3,"session":1,"input":5,"output":1}"#,
                "needs a `turn`",
            ),
            (
                r#"{"arrival":3,"input":5,"output":0}"#,
                "`output` is too small",
            ),
            (
                r#"{"arrival":3,"input":-5,"output":1}"#,
                "`input` is negative",
            ),
            (
                r#"{"arrival":3,"input":5,"output":1,"segments":["1:4"]}"#,
                "hold 4 tokens but `input` is 5",
            ),
            (
                r#"{"arrival":3,"input":5,"output":1,"segments":["xyz:5"]}"#,
                "bad segment",
            ),
            (r#"{"arrival":"3","input":5,"output":1}"#, "not a string"),
            (
                r#"{"arrival":3,"input":5,"output":1,"arival":3}"#,
                "unknown field `arival`",
            ),
            (
                r#"{"id":4,"arrival":3,"input":5,"output":1}"#,
                "every row one or none",
            ),
            (r#"{"arrival":3,"input":5,"output":1"#, "invalid JSON"),
        ] {
            let e = jsonl(&[open, second]).unwrap_err();
            assert!(e.contains(want), "{second}: {e}");
        }
    }

    #[test]
    fn a_repeated_id_is_an_error() {
        let e = jsonl(&[
            r#"{"id":7,"arrival":1,"input":5,"output":1}"#,
            r#"{"id":8,"arrival":2,"input":5,"output":1}"#,
            r#"{"id":7,"arrival":3,"input":5,"output":1}"#,
        ])
        .unwrap_err();
        assert!(e.contains("`id` 7 is used by an earlier row"), "{e}");
    }

    #[test]
    fn csv_and_jsonl_write_what_they_read() {
        let rows = jsonl(&[
            r#"{"id":0,"session":0,"turn":0,"arrival":0.25,"input":30,"output":4,"segments":["000000000000000a:20","00000000000000ff:10"]}"#,
            r#"{"id":1,"session":0,"turn":1,"think":3,"input":34,"output":2,"segments":["000000000000000a:20","00000000000000ff:10","0000000000000001:4"]}"#,
            r#"{"id":2,"arrival":1,"input":1,"output":1,"segments":["0000000000000002:1"]}"#,
        ])
        .unwrap();
        for csv in [false, true] {
            let mut buf = Vec::new();
            {
                let mut w = NativeWriter::new(&mut buf, csv);
                for r in &rows {
                    w.write_row(r).unwrap();
                }
                w.finish().unwrap();
            }
            let text = String::from_utf8(buf).unwrap();
            let mut p = NativeParser::new(csv);
            let mut lines = text.lines();
            if csv {
                p.header(lines.next().unwrap()).unwrap();
            }
            let back: Vec<TraceRow> = lines
                .enumerate()
                .map(|(i, l)| {
                    let mut r = p.parse(0, l).unwrap().unwrap();
                    r.line = rows[i].line;
                    r
                })
                .collect();
            assert_eq!(back, rows, "csv = {csv}:\n{text}");
        }
    }

    #[test]
    fn a_row_names_its_model_and_jsonl_writes_it_back() {
        use crate::hardware::ModelId;
        let line = r#"{"id":0,"arrival":1,"input":1,"output":1,"segments":["0000000000000002:1"],"model":"qwen3-8b"}"#;
        let rows = jsonl(&[line]).unwrap();
        assert_eq!(rows[0].model, Some(ModelId::Qwen3_8b));
        let mut buf = Vec::new();
        {
            let mut w = NativeWriter::new(&mut buf, false);
            w.write_row(&rows[0]).unwrap();
            w.finish().unwrap();
        }
        assert_eq!(String::from_utf8(buf).unwrap().trim(), line);
        // CSV reads a `model` column but writes none: such a row is refused, not written without it.
        let e = NativeWriter::new(Vec::new(), true)
            .write_row(&rows[0])
            .unwrap_err();
        assert!(e.contains("JSON Lines"), "{e}");
        let mut p = NativeParser::new(true);
        p.header("arrival,input,output,model").unwrap();
        let row = p.parse(2, "1,5,1,mistral-7b").unwrap().unwrap();
        assert_eq!(row.model, Some(ModelId::Mistral7b));
        let e = jsonl(&[r#"{"arrival":1,"input":1,"output":1,"model":"gpt-5"}"#]).unwrap_err();
        assert!(e.contains("unknown model `gpt-5`"), "{e}");
    }

    /// A row may name a LoRA adapter (and its rank; 16 without): the request carries it, keyed by the
    /// name's hash as a workload's `adapters` are, and JSON Lines writes it back; CSV reads it only.
    #[test]
    fn a_row_names_its_adapter_and_jsonl_writes_it_back() {
        let line = r#"{"id":0,"arrival":1,"input":1,"output":1,"segments":["0000000000000002:1"],"adapter":"tenant-7","adapter_rank":8}"#;
        let rows = jsonl(&[line]).unwrap();
        let a = rows[0].adapter.as_ref().unwrap();
        assert_eq!((a.name.as_str(), a.rank), ("tenant-7", 8));
        let r = rows[0].to_request(SimTime::ZERO);
        let named = crate::workload::adapters::AdapterSpec {
            count: crate::config::PositiveInt(8),
            zipf: crate::config::NonNegative(1.0),
            name: "tenant".into(),
            rank: crate::config::PositiveInt(8),
            base: None,
        };
        assert_eq!(r.adapter, Some(named.adapter(7)));
        let mut out = Vec::new();
        {
            let mut w = NativeWriter::new(&mut out, false);
            w.write_row(&rows[0]).unwrap();
            w.finish().unwrap();
        }
        assert_eq!(String::from_utf8(out).unwrap().trim(), line);
        let rows = jsonl(&[r#"{"arrival":1,"input":1,"output":1,"adapter":"a"}"#]).unwrap();
        assert_eq!(rows[0].adapter.as_ref().unwrap().rank, 16);
        let mut p = NativeParser::new(true);
        p.header("arrival,input,output,adapter,adapter_rank")
            .unwrap();
        let row = p.parse(2, "1,1,1,tenant-7,8").unwrap().unwrap();
        assert_eq!(row.adapter, rows_adapter("tenant-7", 8));
        for (bad, why) in [
            (
                r#"{"arrival":1,"input":1,"output":1,"adapter":""}"#,
                "the name is empty",
            ),
            (
                r#"{"arrival":1,"input":1,"output":1,"adapter_rank":8}"#,
                "needs an `adapter`",
            ),
            (
                r#"{"arrival":1,"input":1,"output":1,"adapter":"a","adapter_rank":0}"#,
                "adapter_rank",
            ),
        ] {
            let e = jsonl(&[bad]).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    fn rows_adapter(name: &str, rank: u32) -> Option<super::super::TraceAdapter> {
        Some(super::super::TraceAdapter {
            name: name.into(),
            rank,
        })
    }

    #[test]
    fn csv_header_problems_are_reported() {
        let mut p = NativeParser::new(true);
        assert!(p.header("id,arrival,input").unwrap_err().contains("output"));
        let mut p = NativeParser::new(true);
        assert!(
            p.header("id,arrival,input,output,colour")
                .unwrap_err()
                .contains("unknown column `colour`")
        );
        let mut p = NativeParser::new(true);
        assert!(
            p.header("id,input,output")
                .unwrap_err()
                .contains("`arrival`")
        );
    }
}
