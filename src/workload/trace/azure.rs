//! Azure LLM inference traces (Microsoft, released with Splitwise, ISCA'24, and DynamoLLM):
//! CSV `TIMESTAMP, ContextTokens, GeneratedTokens`.
//!
//! `TIMESTAMP` is wall-clock time, `2023-11-16 18:17:03.9799600` in the 2023 files; an ISO-8601 `T`
//! separator and a `Z` or `±HH:MM` offset are accepted too. Arrivals are replayed relative to the first
//! request, which arrives at 0. Timestamps must not decrease. The traces carry no content or session
//! information, so every prompt is unique: no prefix is shared.

use super::text::{Header, check_count, field, parse_count, parse_datetime, split_csv};
use super::{Parser, Timing, TraceRow, unique_content};
use crate::request::Segment;
use crate::time::SimTime;

/// Reads Azure CSV lines.
#[derive(Default)]
pub struct AzureParser {
    columns: Option<[usize; 3]>,
    first: Option<i128>,
    last: Option<i128>,
    next_id: u64,
}

const COLUMNS: [&str; 3] = ["TIMESTAMP", "ContextTokens", "GeneratedTokens"];

impl Parser for AzureParser {
    fn has_header(&self) -> bool {
        true
    }

    fn header(&mut self, line: &str) -> Result<(), String> {
        let h = Header::parse(line)?;
        self.columns = Some([
            h.require(COLUMNS[0], "Azure")?,
            h.require(COLUMNS[1], "Azure")?,
            h.require(COLUMNS[2], "Azure")?,
        ]);
        Ok(())
    }

    fn parse(&mut self, line: u64, text: &str) -> Result<Option<TraceRow>, String> {
        let [ct, cin, cout] = self.columns.expect("header read first");
        let f = split_csv(text)?;
        let t = parse_datetime(field(&f, ct, COLUMNS[0])?)
            .map_err(|m| format!("`{}`: {m}", COLUMNS[0]))?;
        let input = check_count(COLUMNS[1], parse_count(field(&f, cin, COLUMNS[1])?)?, 1)?;
        let output = check_count(COLUMNS[2], parse_count(field(&f, cout, COLUMNS[2])?)?, 1)?;
        if let Some(last) = self.last
            && t < last
        {
            return Err(format!(
                "`TIMESTAMP` goes back {:.3} s from the previous request: the trace must be in arrival order",
                (last - t) as f64 / 1e9
            ));
        }
        let first = *self.first.get_or_insert(t);
        self.last = Some(t);
        let id = self.next_id;
        self.next_id += 1;
        let since = u64::try_from(t - first).map_err(|_| "timestamp out of range".to_string())?;
        Ok(Some(TraceRow {
            model: None,
            adapter: None,
            line,
            id,
            session: None,
            timing: Timing::At(SimTime(since)),
            output_tokens: output,
            segments: vec![Segment {
                content: unique_content(id),
                tokens: input,
            }],
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_2023_and_2024_timestamps_relative_to_the_first() {
        let mut p = AzureParser::default();
        p.header("TIMESTAMP,ContextTokens,GeneratedTokens").unwrap();
        let a = p
            .parse(2, "2023-11-16 18:17:03.9799600,4808,10")
            .unwrap()
            .unwrap();
        let b = p
            .parse(3, "2023-11-16 18:17:04.0319600,3180,8")
            .unwrap()
            .unwrap();
        assert_eq!(a.timing, Timing::At(SimTime::ZERO));
        assert_eq!(b.timing, Timing::At(SimTime(52_000_000)));
        assert_eq!((b.input_tokens(), b.output_tokens), (3180, 8));
        assert_ne!(a.segments[0].content, b.segments[0].content);

        let mut p = AzureParser::default();
        p.header("TIMESTAMP,ContextTokens,GeneratedTokens").unwrap();
        p.parse(2, "2024-05-10 00:00:00.009930+00:00,10,2").unwrap();
        let r = p
            .parse(3, "2024-05-10 00:00:01.009930+00:00,10,2")
            .unwrap()
            .unwrap();
        assert_eq!(r.timing, Timing::At(SimTime(1_000_000_000)));
    }

    #[test]
    fn errors_name_the_column() {
        let mut p = AzureParser::default();
        assert!(p.header("time,ctx").unwrap_err().contains("TIMESTAMP"));
        p.header("TIMESTAMP,ContextTokens,GeneratedTokens").unwrap();
        let e = p.parse(2, "2023-11-16 18:17:03,-4,10").unwrap_err();
        assert!(e.contains("`ContextTokens` is negative"), "{e}");
        let e = p.parse(2, "2023-11-16 18:17:03,4").unwrap_err();
        assert!(e.contains("missing field `GeneratedTokens`"), "{e}");
        let e = p.parse(2, "soon,4,5").unwrap_err();
        assert!(e.contains("`TIMESTAMP`"), "{e}");
        p.parse(2, "2023-11-16 18:17:03,4,5").unwrap();
        let e = p.parse(3, "2023-11-16 18:17:02,4,5").unwrap_err();
        assert!(e.contains("arrival order"), "{e}");
    }
}
