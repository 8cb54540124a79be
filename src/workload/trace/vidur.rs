//! Vidur request traces (Microsoft, MLSys'24): CSV with `arrived_at` (seconds), `num_prefill_tokens`,
//! `num_decode_tokens`; other columns are ignored. Arrival times must not decrease. No content
//! information: every prompt is unique.

use std::io::Write;

use super::text::{Header, check_count, field, format_secs, parse_count, parse_scaled, split_csv};
use super::{Parser, Timing, TraceRow, TraceWriter, unique_content};
use crate::request::Segment;
use crate::time::SimTime;

const COLUMNS: [&str; 3] = ["arrived_at", "num_prefill_tokens", "num_decode_tokens"];

/// Reads Vidur CSV lines.
#[derive(Default)]
pub struct VidurParser {
    columns: Option<[usize; 3]>,
    last: Option<SimTime>,
    next_id: u64,
}

impl Parser for VidurParser {
    fn has_header(&self) -> bool {
        true
    }

    fn header(&mut self, line: &str) -> Result<(), String> {
        let h = Header::parse(line)?;
        self.columns = Some([
            h.require(COLUMNS[0], "Vidur")?,
            h.require(COLUMNS[1], "Vidur")?,
            h.require(COLUMNS[2], "Vidur")?,
        ]);
        Ok(())
    }

    fn parse(&mut self, line: u64, text: &str) -> Result<Option<TraceRow>, String> {
        let [ct, cin, cout] = self.columns.expect("header read first");
        let f = split_csv(text)?;
        let at = SimTime(
            parse_scaled(field(&f, ct, COLUMNS[0])?, 1_000_000_000)
                .map_err(|m| format!("`arrived_at` (seconds): {m}"))?,
        );
        let input = check_count(COLUMNS[1], parse_count(field(&f, cin, COLUMNS[1])?)?, 1)?;
        let output = check_count(COLUMNS[2], parse_count(field(&f, cout, COLUMNS[2])?)?, 1)?;
        if let Some(last) = self.last
            && at < last
        {
            return Err(format!(
                "`arrived_at` {} s is earlier than the previous request's {} s: the trace must be in arrival order",
                format_secs(at.0),
                format_secs(last.0)
            ));
        }
        self.last = Some(at);
        let id = self.next_id;
        self.next_id += 1;
        Ok(Some(TraceRow {
            model: None,
            adapter: None,
            line,
            id,
            session: None,
            timing: Timing::At(at),
            output_tokens: output,
            segments: vec![Segment {
                content: unique_content(id),
                tokens: input,
            }],
        }))
    }
}

/// Writes Vidur CSV. The format has no content columns: prefix identity is dropped.
pub struct VidurWriter<W: Write> {
    out: std::io::BufWriter<W>,
    header: bool,
}

impl<W: Write> VidurWriter<W> {
    /// A writer into `out`.
    pub fn new(out: W) -> Self {
        VidurWriter {
            out: std::io::BufWriter::new(out),
            header: false,
        }
    }
}

impl<W: Write> TraceWriter for VidurWriter<W> {
    fn write_row(&mut self, row: &TraceRow) -> Result<(), String> {
        let Timing::At(at) = row.timing else {
            return Err(
                "a closed-loop turn (a think time) cannot be written as Vidur, which has only arrival times; write native"
                    .into(),
            );
        };
        if !self.header {
            writeln!(self.out, "{}", COLUMNS.join(",")).map_err(|e| e.to_string())?;
            self.header = true;
        }
        writeln!(
            self.out,
            "{},{},{}",
            format_secs(at.0),
            row.input_tokens(),
            row.output_tokens
        )
        .map_err(|e| e.to_string())
    }

    fn finish(&mut self) -> std::io::Result<()> {
        if !self.header {
            writeln!(self.out, "{}", COLUMNS.join(","))?;
            self.header = true;
        }
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_columns_by_name_and_checks_order() {
        let mut p = VidurParser::default();
        p.header("num_prefill_tokens,arrived_at,num_decode_tokens,pd_ratio")
            .unwrap();
        let r = p.parse(2, "100.0,0.25,8,12.5").unwrap().unwrap();
        assert_eq!(r.timing, Timing::At(SimTime(250_000_000)));
        assert_eq!((r.input_tokens(), r.output_tokens), (100, 8));
        let e = p.parse(3, "100,0.2,8,1").unwrap_err();
        assert!(e.contains("arrival order"), "{e}");
        let e = p.parse(3, "100,1,0,1").unwrap_err();
        assert!(e.contains("`num_decode_tokens` is too small"), "{e}");
    }
}
