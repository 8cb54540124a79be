//! Reading text traces: numbered lines, CSV fields and headers, exact decimal times, calendar timestamps.
//!
//! Everything here works on one line at a time, so a reader never holds more than the line it is parsing.
//! Times are parsed from their decimal text straight into integer nanoseconds (no float rounding), so a
//! trace written by fleetsim reads back to the same nanosecond.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use super::TraceError;

/// The longest line a text trace may have, bytes (16 MiB): a Mooncake line of the longest prompt
/// fleetsim accepts (10 million tokens, 19,532 block hashes of 512 tokens) is under 250 KB. A longer
/// line is an error, read no further, so that a file without line breaks (a binary file, a device)
/// cannot take the memory of a whole file.
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// Opens `path` for reading, refusing what is not a regular file (a folder, a device such as
/// `/dev/zero`, a pipe): a trace is read more than once (its format detected, then checked, then
/// streamed), which only a file allows, and a device may never end.
pub fn open_regular(path: &Path) -> Result<File, TraceError> {
    let name = path.display().to_string();
    let io = |e: std::io::Error| TraceError::Io {
        path: name.clone(),
        error: e.into(),
    };
    let file = File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        let what = if meta.is_dir() {
            "a folder"
        } else {
            "not a regular file (a device, a pipe or a socket)"
        };
        return Err(TraceError::File {
            path: name,
            message: format!("is {what}; a trace must be a regular file"),
        });
    }
    Ok(file)
}

/// The lines of a text file, numbered from 1, without their line terminators; blank lines are skipped.
/// A line longer than [`MAX_LINE_BYTES`] is an error.
pub struct Lines {
    path: String,
    reader: Box<dyn BufRead + Send>,
    buf: Vec<u8>,
    line: u64,
}

impl Lines {
    /// Opens `path` for reading.
    pub fn open(path: &Path) -> Result<Self, TraceError> {
        let file = open_regular(path)?;
        Ok(Self::from_reader(
            path.display().to_string(),
            BufReader::new(file),
        ))
    }

    /// Lines from any reader (tests, stdin); `path` names it in errors.
    pub fn from_reader(path: String, reader: impl BufRead + Send + 'static) -> Self {
        Lines {
            path,
            reader: Box::new(reader),
            buf: Vec::new(),
            line: 0,
        }
    }

    /// The file's name as errors show it.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The next non-blank line and its number, `Ok(None)` at the end of the file.
    pub fn next_line(&mut self) -> Result<Option<(u64, &str)>, TraceError> {
        loop {
            self.buf.clear();
            let n = (&mut self.reader)
                .take(MAX_LINE_BYTES as u64 + 1)
                .read_until(b'\n', &mut self.buf)
                .map_err(|e| TraceError::Io {
                    path: self.path.clone(),
                    error: e.into(),
                })?;
            if n == 0 {
                return Ok(None);
            }
            self.line += 1;
            if self.buf.len() > MAX_LINE_BYTES && self.buf.last() != Some(&b'\n') {
                return Err(TraceError::Line {
                    path: self.path.clone(),
                    line: self.line,
                    message: format!(
                        "longer than {} MiB without a line break: not a text trace of one request \
                         per line (a binary file?)",
                        MAX_LINE_BYTES >> 20
                    ),
                });
            }
            while matches!(self.buf.last(), Some(b'\n' | b'\r')) {
                self.buf.pop();
            }
            if self.buf.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let line = self.line;
            return match std::str::from_utf8(&self.buf) {
                Ok(text) => Ok(Some((line, text))),
                Err(e) => Err(TraceError::Line {
                    path: self.path.clone(),
                    line,
                    message: format!("not valid UTF-8 text (byte {})", e.valid_up_to() + 1),
                }),
            };
        }
    }

    /// An error about line `line` of this file.
    pub fn error(&self, line: u64, message: impl Into<String>) -> TraceError {
        TraceError::Line {
            path: self.path.clone(),
            line,
            message: message.into(),
        }
    }
}

/// Splits one CSV record into fields (RFC 4180 quoting, one record per line): `a,"b,c",d` gives
/// `a`, `b,c`, `d`. Fields are trimmed of surrounding spaces.
pub fn split_csv(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    let mut was_quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') if field.trim().is_empty() => {
                field.clear();
                quoted = true;
                was_quoted = true;
            }
            (false, ',') => {
                fields.push(finish(&mut field, was_quoted));
                was_quoted = false;
            }
            (false, c) => field.push(c),
        }
    }
    if quoted {
        return Err("a quoted field is not closed on this line".into());
    }
    fields.push(finish(&mut field, was_quoted));
    Ok(fields)
}

fn finish(field: &mut String, quoted: bool) -> String {
    let f = std::mem::take(field);
    if quoted { f } else { f.trim().to_string() }
}

/// Normalises a column name for matching: lower case, letters and digits only
/// (`Session ID`, `session_id` and `SessionID` are the same column).
pub fn column_key(name: &str) -> String {
    name.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// A CSV header: where each named column is.
#[derive(Debug, Clone)]
pub struct Header {
    keys: Vec<String>,
    names: Vec<String>,
}

impl Header {
    /// Parses a header line.
    pub fn parse(line: &str) -> Result<Self, String> {
        let names = split_csv(line)?;
        Ok(Header {
            keys: names.iter().map(|n| column_key(n)).collect(),
            names,
        })
    }

    /// The index of the column called `name` (compared by [`column_key`]).
    pub fn find(&self, name: &str) -> Option<usize> {
        let key = column_key(name);
        self.keys.iter().position(|k| *k == key)
    }

    /// The index of column `name`, or an error listing the columns the header has.
    pub fn require(&self, name: &str, format: &str) -> Result<usize, String> {
        self.find(name).ok_or_else(|| {
            format!(
                "the header has no `{name}` column, which the {format} format needs (it has: {})",
                self.names.join(", ")
            )
        })
    }

    /// Columns in the header.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether the header is empty (never, for a parsed line).
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// Field `i` of a record, or an error naming the column that is missing.
pub fn field<'a>(fields: &'a [String], i: usize, column: &str) -> Result<&'a str, String> {
    fields.get(i).map(String::as_str).ok_or_else(|| {
        format!(
            "missing field `{column}` (the line has {} fields)",
            fields.len()
        )
    })
}

/// Parses a non-negative decimal number (`12`, `0.25`, `1.5e3`) and scales it by `unit_ns` nanoseconds,
/// rounding to the nearest nanosecond. Plain decimals are converted exactly; exponent notation goes
/// through `f64`.
pub fn parse_scaled(text: &str, unit_ns: u64) -> Result<u64, String> {
    let t = text.trim();
    if t.starts_with('-') {
        return Err(format!("must not be negative, got {t}"));
    }
    let t = t.strip_prefix('+').unwrap_or(t);
    if t.contains(['e', 'E']) {
        let v: f64 = t.parse().map_err(|_| format!("not a number: `{text}`"))?;
        let ns = v * unit_ns as f64;
        if !ns.is_finite() || ns < 0.0 || ns >= u64::MAX as f64 {
            return Err(format!("out of range: `{text}`"));
        }
        return Ok(ns.round() as u64);
    }
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    if (int.is_empty() && frac.is_empty())
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(format!("not a number: `{text}`"));
    }
    let overflow = || format!("out of range: `{text}`");
    let whole: u64 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| overflow())?
    };
    let mut ns = whole.checked_mul(unit_ns).ok_or_else(overflow)?;
    // The fraction contributes Σ digit·unit/10^k; accumulate it as an exact rational over 10^k, keeping
    // enough digits for nanoseconds (unit_ns ≤ 1e9 needs at most 18 more).
    let mut num: u128 = 0;
    let mut den: u128 = 1;
    for b in frac.bytes().take(24) {
        num = num * 10 + u128::from(b - b'0');
        den *= 10;
    }
    let frac_ns = (num * u128::from(unit_ns) + den / 2) / den;
    ns = ns
        .checked_add(u64::try_from(frac_ns).map_err(|_| overflow())?)
        .ok_or_else(overflow)?;
    Ok(ns)
}

/// Parses a token count: a whole number, written as an integer or with a zero fraction (`512.0`, as
/// pandas writes integer columns that had a missing value). Negative counts are reported as such.
pub fn parse_count(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let digits = match t.split_once('.') {
        Some((int, frac)) if !frac.is_empty() && frac.bytes().all(|b| b == b'0') => int,
        Some(_) => return Err(format!("expected a whole number of tokens, got `{t}`")),
        None => t,
    };
    digits
        .parse::<i64>()
        .map_err(|_| format!("expected a whole number of tokens, got `{t}`"))
}

/// Checks a token count: at least `min` and at most `u32::MAX`.
pub fn check_count(column: &str, value: i64, min: i64) -> Result<u32, String> {
    if value < min {
        let what = if value < 0 { "negative" } else { "too small" };
        return Err(format!(
            "`{column}` is {what}: expected at least {min} tokens, got {value}"
        ));
    }
    if value > i64::from(MAX_REQUEST_TOKENS) {
        return Err(format!(
            "`{column}` is too large: {value} tokens, more than the {MAX_REQUEST_TOKENS} any request may \
             have (the longest context of any model is 10 million tokens)"
        ));
    }
    Ok(value as u32)
}

/// Most tokens a trace row's prompt or answer may have. Hashing a request's blocks costs time and
/// memory in proportion to its length, so an absurd count is refused where it is read.
pub const MAX_REQUEST_TOKENS: u32 = 10_000_000;

/// Parses a calendar timestamp `YYYY-MM-DD[ T]HH:MM:SS[.fraction][Z|±HH:MM]` (the Azure traces' format)
/// into nanoseconds since 1970-01-01 UTC. A timestamp without an offset is taken as UTC.
pub fn parse_datetime(text: &str) -> Result<i128, String> {
    let bad = || format!("expected a timestamp like 2023-11-16 18:17:03.9799600, got `{text}`");
    let t = text.trim();
    let (date, rest) = t.split_at_checked(10).ok_or_else(bad)?;
    let sep = rest.chars().next().ok_or_else(bad)?;
    if sep != ' ' && sep != 'T' {
        return Err(bad());
    }
    let rest = &rest[1..];
    let num = |s: &str| -> Result<i64, String> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        s.parse().map_err(|_| bad())
    };
    let mut d = date.split('-');
    let (y, mo, da) = (
        num(d.next().ok_or_else(bad)?)?,
        num(d.next().ok_or_else(bad)?)?,
        num(d.next().ok_or_else(bad)?)?,
    );
    if d.next().is_some() || !(1..=12).contains(&mo) || !(1..=31).contains(&da) {
        return Err(bad());
    }
    // Split off the offset: `Z`, or `+HH:MM` / `-HH:MM` after the seconds.
    let (clock, offset_s) = if let Some(c) = rest.strip_suffix('Z') {
        (c, 0)
    } else if let Some(i) = rest.rfind(['+', '-']) {
        let (c, off) = rest.split_at(i);
        let sign = if off.starts_with('-') { -1 } else { 1 };
        let (oh, om) = off[1..].split_once(':').unwrap_or((&off[1..], "0"));
        (c, sign * (num(oh)? * 3600 + num(om)? * 60))
    } else {
        (rest, 0)
    };
    let mut c = clock.split(':');
    let (h, mi, sec) = (
        num(c.next().ok_or_else(bad)?)?,
        num(c.next().ok_or_else(bad)?)?,
        c.next().ok_or_else(bad)?,
    );
    if c.next().is_some() || h > 23 || mi > 59 {
        return Err(bad());
    }
    let sec_ns = parse_scaled(sec, 1_000_000_000).map_err(|_| bad())?;
    if sec_ns >= 61_000_000_000 {
        return Err(bad());
    }
    let days = days_from_civil(y, mo, da);
    let secs = days * 86_400 + h * 3600 + mi * 60 - offset_s;
    Ok(i128::from(secs) * 1_000_000_000 + i128::from(sec_ns))
}

/// Days from 1970-01-01 to the given proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Nanoseconds as decimal seconds, exactly and canonically: `0`, `1.5`, `12.000000001`.
pub fn format_secs(ns: u64) -> String {
    let (s, f) = (ns / 1_000_000_000, ns % 1_000_000_000);
    if f == 0 {
        return s.to_string();
    }
    let frac = format!("{f:09}");
    format!("{s}.{}", frac.trim_end_matches('0'))
}

/// Nanoseconds as decimal milliseconds, exactly and canonically: `0`, `3000`, `1.25`.
pub fn format_millis(ns: u64) -> String {
    let (ms, f) = (ns / 1_000_000, ns % 1_000_000);
    if f == 0 {
        return ms.to_string();
    }
    let frac = format!("{f:06}");
    format!("{ms}.{}", frac.trim_end_matches('0'))
}

/// The message of a `serde_json` error without its "at line 1 column N" suffix (a trace's line
/// number is the one that matters), with the column kept.
pub fn json_message(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let msg = match text.rfind(" at line ") {
        Some(i) => &text[..i],
        None => &text,
    };
    if e.column() > 0 {
        format!("{msg} (column {})", e.column())
    } else {
        msg.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_respect_quotes() {
        assert_eq!(split_csv("a, b ,c").unwrap(), ["a", "b", "c"]);
        assert_eq!(
            split_csv(r#"1,"x, y","say ""hi""",,"#).unwrap(),
            ["1", "x, y", r#"say "hi""#, "", ""]
        );
        assert!(split_csv(r#"1,"open"#).is_err());
    }

    #[test]
    fn headers_match_loosely() {
        let h = Header::parse("Timestamp,Model,Request tokens,Session ID").unwrap();
        assert_eq!(h.find("request_tokens"), Some(2));
        assert_eq!(h.find("SessionID"), Some(3));
        let e = h.require("Response tokens", "BurstGPT").unwrap_err();
        assert!(e.contains("Response tokens") && e.contains("Model"), "{e}");
    }

    #[test]
    fn decimals_scale_exactly() {
        assert_eq!(parse_scaled("1.5", 1_000_000_000).unwrap(), 1_500_000_000);
        assert_eq!(parse_scaled("3000", 1_000_000).unwrap(), 3_000_000_000);
        assert_eq!(parse_scaled("0.000000001", 1_000_000_000).unwrap(), 1);
        assert_eq!(
            parse_scaled("123456.789012345", 1_000_000_000).unwrap(),
            123_456_789_012_345
        );
        assert_eq!(parse_scaled(".5", 1_000).unwrap(), 500);
        assert_eq!(parse_scaled("1.5e3", 1_000_000).unwrap(), 1_500_000_000);
        assert!(parse_scaled("-1", 1).unwrap_err().contains("negative"));
        assert!(parse_scaled("1.2.3", 1).is_err());
        assert!(parse_scaled("", 1).is_err());
        assert!(parse_scaled("99999999999999999999", 1_000_000_000).is_err());
        for ns in [0, 1, 999_999_999, 1_000_000_000, 12_345_678_901_234] {
            assert_eq!(parse_scaled(&format_secs(ns), 1_000_000_000).unwrap(), ns);
            assert_eq!(parse_scaled(&format_millis(ns), 1_000_000).unwrap(), ns);
        }
    }

    #[test]
    fn counts_are_whole_numbers() {
        assert_eq!(parse_count("512").unwrap(), 512);
        assert_eq!(parse_count("512.0").unwrap(), 512);
        assert_eq!(parse_count("-3").unwrap(), -3);
        assert!(parse_count("12.5").is_err());
        assert!(parse_count("abc").is_err());
        assert!(
            check_count("input", -3, 1)
                .unwrap_err()
                .contains("negative")
        );
        assert!(check_count("input", 0, 1).is_err());
        assert_eq!(check_count("output", 0, 0).unwrap(), 0);
    }

    #[test]
    fn calendar_timestamps() {
        let a = parse_datetime("2023-11-16 18:17:03.9799600").unwrap();
        let b = parse_datetime("2023-11-16 18:17:04.0319600").unwrap();
        assert_eq!(b - a, 52_000_000);
        // 2023-11-16 is day 19,677 since the epoch.
        assert_eq!(a / 1_000_000_000, 19_677 * 86_400 + 18 * 3600 + 17 * 60 + 3);
        let z = parse_datetime("2024-05-10T00:00:00Z").unwrap();
        let plus = parse_datetime("2024-05-10 02:00:00.5+02:00").unwrap();
        assert_eq!(plus - z, 500_000_000);
        assert!(parse_datetime("2023-13-01 00:00:00").is_err());
        assert!(parse_datetime("yesterday").is_err());
    }
}
