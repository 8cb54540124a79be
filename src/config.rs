//! Validated scalar types for configuration files.
//!
//! Each rejects a bad value while it is being deserialized, so the TOML parser reports the error at the
//! value's own line and column, with the field's name.

use serde::{Deserialize, Deserializer, Serialize};

macro_rules! checked_float {
    ($(#[$doc:meta])* $name:ident, $ok:expr, $expect:literal) => {
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
    };
}

checked_float!(
    /// A finite number > 0.
    Positive,
    |v| v > 0.0,
    "a number greater than 0"
);
checked_float!(
    /// A finite number ≥ 0.
    NonNegative,
    |v| v >= 0.0,
    "a number at least 0"
);
checked_float!(
    /// A number in [0, 1].
    Fraction,
    |v| (0.0..=1.0).contains(&v),
    "a fraction between 0 and 1"
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

/// `file:line:column` and message of a TOML error; the message names the key whose value is wrong.
pub(crate) fn toml_error_parts(text: &str, file: &str, e: &toml::de::Error) -> (String, String) {
    let location = match e.span() {
        Some(span) => {
            let (line, col) = line_col(text, span.start);
            format!("{file}:{line}:{col}")
        }
        None => file.to_string(),
    };
    let mut message = e.message().trim().to_string();
    if let Some(key) = e.span().and_then(|span| key_before(text, span.start))
        && !message.contains(&format!("`{key}`"))
    {
        message = format!("`{key}`: {message}");
    }
    (location, message)
}

/// The key whose value starts at byte `offset`, if the text there reads `key = value`.
fn key_before(text: &str, offset: usize) -> Option<&str> {
    let before = text[..offset.min(text.len())].trim_end();
    let before = before.strip_suffix('=')?.trim_end();
    let start = before
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'))
        .map_or(0, |i| i + 1);
    let key = &before[start..];
    (!key.is_empty()).then_some(key)
}

/// 1-based line and column of byte `offset` in `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
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
