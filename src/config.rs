//! Validated scalar types for configuration files.
//!
//! Each rejects a bad value while it is being deserialized, so the TOML parser reports the error at the
//! value's own line and column, with the field's name.

use serde::{Deserialize, Deserializer, Serialize};

macro_rules! checked_float {
    ($(#[$doc:meta])* $name:ident, $ok:expr, $expect:literal, $bounds:tt) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, PartialOrd, Serialize)]
        #[serde(transparent)]
        pub struct $name(pub f64);

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let v = f64::deserialize(d)?;
                let ok: fn(f64) -> bool = $ok;
                if v.is_finite() && ok(v) {
                    Ok($name(v))
                } else {
                    Err(serde::de::Error::custom(format!(concat!("expected ", $expect, ", got {}"), v)))
                }
            }
        }

        /// Accepts exactly what `deserialize` accepts: a finite number within the bounds.
        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                let mut schema = schemars::json_schema!({
                    "type": "number",
                    "description": concat!("A finite number: ", $expect, "."),
                });
                let bounds: serde_json::Value = serde_json::json!($bounds);
                if let (Some(map), serde_json::Value::Object(b)) = (schema.as_object_mut(), bounds) {
                    map.extend(b);
                }
                schema
            }
        }
    };
}

checked_float!(
    /// A finite number > 0.
    Positive,
    |v| v > 0.0,
    "a number greater than 0",
    { "exclusiveMinimum": 0 }
);
checked_float!(
    /// A finite number ≥ 0.
    NonNegative,
    |v| v >= 0.0,
    "a number at least 0",
    { "minimum": 0 }
);
checked_float!(
    /// A number in [0, 1].
    Fraction,
    |v| (0.0..=1.0).contains(&v),
    "a fraction between 0 and 1",
    { "minimum": 0, "maximum": 1 }
);

impl Default for NonNegative {
    fn default() -> Self {
        NonNegative(0.0)
    }
}

impl Fraction {
    /// 1.0, for serde defaults.
    pub fn one() -> Self {
        Fraction(1.0)
    }
}

/// An integer ≥ 1 that fits in 32 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct PositiveInt(pub u32);

impl<'de> Deserialize<'de> for PositiveInt {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = i64::deserialize(d)?;
        if v >= 1 && v <= i64::from(u32::MAX) {
            Ok(PositiveInt(v as u32))
        } else {
            Err(serde::de::Error::custom(format!(
                "expected an integer of at least 1, got {v}"
            )))
        }
    }
}

/// Accepts exactly what `deserialize` accepts: an integer from 1 to 2^32 − 1.
impl schemars::JsonSchema for PositiveInt {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "PositiveInt".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "integer",
            "minimum": 1,
            "maximum": u32::MAX,
            "description": "A whole number, at least 1.",
        })
    }
}

/// `file:line:column` and message of a TOML error; the message names the key whose value is wrong.
///
/// An error about a whole table (an unknown key or policy inside `[router]` or `[policies.NAME]`) is
/// reported by the parser at the table's header; it is moved to the line of the key or value it names.
pub(crate) fn toml_error_parts(text: &str, file: &str, e: &toml::de::Error) -> (String, String) {
    let mut message = humanize(e.message().trim());
    let mut offset = e.span().map(|s| s.start);
    if let Some(start) = offset
        && let Some(name) = named(&message)
        && let Some(found) = find_in_table(text, start, &name)
    {
        offset = Some(found);
    }
    let location = match offset {
        Some(o) => {
            let (line, col) = line_col(text, o);
            format!("{file}:{line}:{col}")
        }
        None => file.to_string(),
    };
    if let Some(key) = offset.and_then(|o| key_before(text, o))
        && !message.contains(&format!("`{key}`"))
    {
        message = format!("`{key}`: {message}");
    }
    (location, message)
}

/// The name an "unknown field / unknown variant" message is about.
fn named(message: &str) -> Option<String> {
    // "`key`: what is wrong with its value"
    if let Some(rest) = message.strip_prefix('`')
        && let Some((key, tail)) = rest.split_once('`')
        && tail.starts_with(": ")
        && !key.is_empty()
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Some(key.to_string());
    }
    for prefix in ["unknown field `", "unknown name `"] {
        if let Some(i) = message.find(prefix) {
            let rest = &message[i + prefix.len()..];
            return rest.find('`').map(|j| rest[..j].to_string());
        }
    }
    None
}

/// If `offset` is at a table header (`[router]`), the offset of `name` as a key (`name =`) or as a quoted
/// value (`= "name"`) within that table.
fn find_in_table(text: &str, offset: usize, name: &str) -> Option<usize> {
    let line_start = text[..boundary(text, offset)]
        .rfind('\n')
        .map_or(0, |i| i + 1);
    if !text[line_start..].trim_start().starts_with('[') {
        return None;
    }
    let body_start = text[line_start..].find('\n').map(|i| line_start + i + 1)?;
    let mut pos = body_start;
    for line in text[body_start..].split_inclusive('\n') {
        let t = line.trim_start();
        if t.starts_with('[') {
            break;
        }
        let indent = line.len() - t.len();
        if let Some(rest) = t.strip_prefix(name)
            && rest.trim_start().starts_with('=')
        {
            return Some(pos + indent);
        }
        if let Some(eq) = t.find('=') {
            let value = t[eq + 1..].trim_start();
            if value.starts_with(&format!("\"{name}\"")) {
                return Some(pos + indent + eq + 1 + (t[eq + 1..].len() - value.len()));
            }
        }
        pos += line.len();
    }
    None
}

/// Bandwidths of links to KV tiers, between workers and to weight storage, GB/s: from 1 MB/s (a
/// congested network volume) to 100 TB/s (beyond any HBM). Outside it a transfer's time stops being
/// representable in simulated nanoseconds, or is a typo.
pub const BANDWIDTH_GB_PER_S: (f64, f64) = (1e-3, 1e5);

/// `Err` naming the allowed range unless `min <= value <= max`; `unit` follows the numbers.
pub fn check_range(value: f64, (min, max): (f64, f64), unit: &str) -> Result<(), String> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(format!(
            "must be between {} and {}{unit}, got {}",
            readable(min),
            readable(max),
            readable(value)
        ))
    }
}

/// A number as a person writes it: `0.001`, `100000`, but `1e-300` and `1e300` rather than hundreds of
/// digits.
pub fn readable(v: f64) -> String {
    if v != 0.0 && v.is_finite() && !(1e-4..1e9).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// `Err` naming the allowed range unless `min <= d <= max`.
pub fn check_span(
    d: crate::time::SimDuration,
    min: crate::time::SimDuration,
    max: crate::time::SimDuration,
) -> Result<(), String> {
    if d < min || d > max {
        Err(format!("must be between {min} and {max}, got {d}"))
    } else {
        Ok(())
    }
}

/// `#[serde(default = "crate::config::yes")]`: a flag that is on unless a file turns it off.
pub fn yes() -> bool {
    true
}

/// A serde or TOML message in the user's words: numbers, whole numbers and text rather than Rust's types,
/// "name" rather than "variant", and for an unknown name the nearest valid one.
pub fn humanize(message: &str) -> String {
    let mut m = message.to_string();
    for (rust, user) in [
        ("invalid type: floating point", "got the number"),
        ("invalid type: integer", "got the whole number"),
        ("invalid type: string", "got the text"),
        ("invalid type: boolean", "got"),
        ("invalid type: sequence", "got a list"),
        ("invalid type: map", "got a table"),
        ("invalid value: integer", "got the whole number"),
        ("invalid value: floating point", "got the number"),
        ("expected f64", "expected a number"),
        ("expected f32", "expected a number"),
        ("expected u8", "expected a whole number of at least 0"),
        ("expected u16", "expected a whole number of at least 0"),
        ("expected u32", "expected a whole number of at least 0"),
        ("expected u64", "expected a whole number of at least 0"),
        ("expected i64", "expected a whole number"),
        ("expected i32", "expected a whole number"),
        ("expected usize", "expected a whole number"),
        ("expected a string", "expected text"),
        ("expected struct ", "expected the table "),
        ("expected unit variant", "expected a name"),
        ("unit variant", "name"),
        ("unknown variant", "unknown name"),
        ("expected a borrowed string", "expected text"),
    ] {
        m = m.replace(rust, user);
    }
    // "got the number `1.5`, expected a whole number" reads better as "expected a whole number, got 1.5".
    if let Some(rest) = m.strip_prefix("got ")
        && let Some((got, expected)) = rest.split_once(", expected ")
    {
        m = format!("expected {expected}, got {}", got.replace('`', ""));
    }
    if let Some(name) = named(&m)
        && let Some(suggestion) = nearest(&name, &candidates(&m))
    {
        m = format!("{m}; did you mean `{suggestion}`?");
    }
    m
}

/// The backticked names listed after "expected" in a message.
fn candidates(message: &str) -> Vec<String> {
    let Some(i) = message.find("expected") else {
        return Vec::new();
    };
    message[i..]
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The candidate closest to `name` (edit distance, `-` and `_` alike, case ignored), if close enough to
/// be a typo: at most a third of the longer name's letters differ.
pub fn nearest(name: &str, candidates: &[String]) -> Option<String> {
    let norm = |s: &str| s.to_ascii_lowercase().replace('-', "_");
    let n = norm(name);
    candidates
        .iter()
        .map(|c| (edit_distance(&n, &norm(c)), c))
        .filter(|(d, c)| *d * 3 <= n.chars().count().max(c.chars().count()))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c.clone())
}

/// Levenshtein distance between `a` and `b`, by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// The key whose value starts at byte `offset`, if the text there reads `key = value`.
fn key_before(text: &str, offset: usize) -> Option<&str> {
    let before = text[..boundary(text, offset)].trim_end();
    let before = before.strip_suffix('=')?.trim_end();
    // After the last character that cannot be part of a key (which may be several bytes long).
    let start = before
        .char_indices()
        .rev()
        .find(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let key = &before[start..];
    (!key.is_empty()).then_some(key)
}

/// `offset` clamped to `text` and moved back to the start of the character it falls in.
fn boundary(text: &str, offset: usize) -> usize {
    let mut o = offset.min(text.len());
    while !text.is_char_boundary(o) {
        o -= 1;
    }
    o
}

/// 1-based line and column of byte `offset` in `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..boundary(text, offset)];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

/// A command-line value read as TOML (`5`, `0.5`, `"5m"`, `{ dist = "fixed", tokens = 9 }`), or as a plain
/// string when it is not TOML (`round_robin`, `5m`).
pub fn toml_value(raw: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_speak_numbers_and_text_not_rust() {
        assert_eq!(
            humanize("invalid type: floating point `1.5`, expected i64"),
            "expected a whole number, got the number 1.5"
        );
        assert_eq!(
            humanize("invalid type: string \"abc\", expected f64"),
            "expected a number, got the text \"abc\""
        );
        let m = humanize(
            "unknown variant `llm-d`, expected one of `round_robin`, `llm_d`, `dynamo_kv`",
        );
        assert!(m.starts_with("unknown name `llm-d`"), "{m}");
        assert!(m.ends_with("did you mean `llm_d`?"), "{m}");
        // Nothing close: no suggestion.
        let m = humanize("unknown variant `teleport`, expected `a100` or `h100`");
        assert!(!m.contains("did you mean"), "{m}");
    }

    #[test]
    fn nearest_names_are_typos_only() {
        let c: Vec<String> = ["prefix_weight", "load_weight"].map(String::from).to_vec();
        assert_eq!(nearest("load_weigth", &c).as_deref(), Some("load_weight"));
        assert_eq!(nearest("xyz", &c), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn an_unknown_key_in_a_table_is_reported_at_its_own_line() {
        let text = "a = 1\n\n[router]\npolicy = \"prefix_aware\"\n\nload_weigth = 2\n";
        let header = text.find("[router]").unwrap();
        let at = find_in_table(text, header, "load_weigth").unwrap();
        assert_eq!(line_col(text, at), (6, 1));
        let at = find_in_table(text, header, "prefix_aware").unwrap();
        assert_eq!(line_col(text, at), (4, 10));
        // Not at a header: left alone.
        assert_eq!(find_in_table(text, 0, "a"), None);
    }

    /// Found by the fuzzer: a multi-byte character just before a key (`\u{fffd}` from invalid UTF-8)
    /// made the key's start fall inside it.
    #[test]
    fn a_key_after_a_multibyte_character_is_found() {
        let text = "x = { a = 1,\u{fffd}sigma = 2 }";
        let at = text.find("2 }").unwrap();
        assert_eq!(key_before(text, at), Some("sigma"));
        // Column counts bytes; an offset inside the character is moved to its start.
        let inside = text.find('\u{fffd}').unwrap() + 1;
        assert_eq!(line_col(text, inside), (1, 13));
    }
}
