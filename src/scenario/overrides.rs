//! `--set key.path=value`: applying an override to the scenario's TOML table, and blaming the override
//! after which a scenario no longer deserializes.

use super::locate::index_segments;
use super::locate::toml_error;
use super::{Scenario, ScenarioError};
use crate::config::toml_value;

/// The error of a scenario that no longer deserializes after `--set`: blamed on the first override after
/// which it fails (applied one by one), whose key the message repeats.
pub(super) fn override_error(
    text: &str,
    file: &str,
    overrides: &[String],
    e: &toml::de::Error,
) -> ScenarioError {
    // The file itself may be what is wrong: then no override is to blame.
    if let Err(own) = toml::from_str::<Scenario>(text)
        && !own.message().contains("missing field")
    {
        return toml_error(text, file, &own);
    }
    let culprit = toml::from_str::<toml::Table>(text)
        .ok()
        .and_then(|mut table| {
            overrides.iter().find(|o| {
                apply_override(&mut table, o).is_ok()
                    && toml::Value::Table(table.clone())
                        .try_into::<Scenario>()
                        .is_err()
            })
        });
    let message = crate::config::humanize(e.message().trim());
    match culprit {
        Some(o) => {
            let key = o.split_once('=').map_or(o.as_str(), |(k, _)| k.trim());
            ScenarioError {
                location: format!("{file} (--set {o})"),
                message: if message.contains(&format!("`{key}`")) {
                    message
                } else {
                    format!("`{key}`: {message}")
                },
            }
        }
        None => ScenarioError {
            location: format!("{file} (after --set)"),
            message,
        },
    }
}

/// The segments of a dotted key path, as TOML reads a dotted key: a segment in double quotes
/// (`models."llama-3.1-8b"`) may hold dots and keeps its quotes (so it can be split again);
/// [`unquote`] takes them off.
pub(super) fn split_path(path: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut quoted) = (0, false);
    for (i, c) in path.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '.' if !quoted => {
                out.push(&path[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&path[start..]);
    out
}

/// A path segment without its double quotes, if it has them.
pub(super) fn unquote(seg: &str) -> &str {
    seg.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(seg)
}

/// Sets `key.path=value` in a TOML table (`workers[0].count` or `workers.0.count`); `value` is read as TOML, or as a string if it is not TOML.
pub(super) fn apply_override(table: &mut toml::Table, assignment: &str) -> Result<(), String> {
    let (path, raw) = assignment
        .split_once('=')
        .ok_or_else(|| "expected key.path=value".to_string())?;
    let value = toml_value(raw);
    let path = index_segments(path.trim());
    let keys = split_path(&path);
    let mut cur = table;
    for (depth, k) in keys.iter().enumerate() {
        let last = depth + 1 == keys.len();
        let (name, index) = match k.split_once('[').filter(|_| !k.starts_with('"')) {
            Some((n, rest)) => (
                n,
                Some(
                    rest.trim_end_matches(']')
                        .parse::<usize>()
                        .map_err(|_| format!("bad index in `{k}`"))?,
                ),
            ),
            None => (unquote(k), None),
        };
        if last && index.is_none() {
            cur.insert(name.to_string(), value);
            return Ok(());
        }
        let entry = cur
            .entry(name.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        let next = match (entry, index) {
            (toml::Value::Array(items), Some(i)) => items
                .get_mut(i)
                .ok_or_else(|| format!("`{name}` has no element {i}"))?,
            (e, None) => e,
            (_, Some(_)) => return Err(format!("`{name}` is not an array")),
        };
        if last {
            *next = value;
            return Ok(());
        }
        cur = next
            .as_table_mut()
            .ok_or_else(|| format!("`{k}` is not a table"))?;
    }
    Ok(())
}
