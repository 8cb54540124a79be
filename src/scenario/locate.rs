//! Where a field path (`workers[1].count`) is written in scenario text: the line every error names.

use super::overrides::split_path;
use super::{Scenario, ScenarioError};
use crate::config::toml_error_parts;

/// Turns a TOML error into `file:line:column: message`.
pub(super) fn toml_error(text: &str, file: &str, e: &toml::de::Error) -> ScenarioError {
    let (location, message) = toml_error_parts(text, file, e);
    ScenarioError { location, message }
}

/// The 1-based line of the key at field path `path` (`workload.rate`, `workers[1].count`) in scenario
/// text, best effort; for messages about a scenario that parsed.
pub fn line_of(text: &str, path: &str) -> Option<usize> {
    find_line(text, path)
}

impl Scenario {
    /// `message`, an error found in this scenario after it loaded (`field: what is wrong`, as the
    /// simulation's builder writes them), prefixed with the scenario's file and the field's line there
    /// when they are known.
    pub fn locate(&self, message: String) -> String {
        if self.origin.is_empty() {
            return message;
        }
        let field = message.split_once(": ").map(|(f, _)| f);
        let line = field.filter(|f| !f.contains(' ')).and_then(|f| {
            std::fs::read_to_string(&self.origin)
                .ok()
                .and_then(|t| find_line(&t, f))
        });
        match line {
            Some(l) => format!("{}:{l}: {message}", self.origin),
            None => format!("{}: {message}", self.origin),
        }
    }
}

/// Best-effort line of a field path such as `workers[1].tp` or `workload.cv` in the original text.
/// The line of `workload.classes[K].…KEY`: the line that sets KEY within the K-th
/// `[[workload.classes]]` entry (its own table or its `traffic` sub-table), else the entry's header.
pub(super) fn find_class_line(text: &str, path: &str) -> Option<usize> {
    let rest = path.strip_prefix("workload.classes[")?;
    let (index, keys) = rest.split_once(']')?;
    let index: usize = index.parse().ok()?;
    let key = keys.rsplit('.').next().filter(|k| !k.is_empty());
    let mut seen = 0;
    let mut header = None;
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l == "[[workload.classes]]" {
            if header.is_some() {
                break;
            }
            if seen == index {
                header = Some(i + 1);
            }
            seen += 1;
            continue;
        }
        if header.is_some() {
            if l.starts_with('[') && !l.starts_with("[workload.classes.") {
                break;
            }
            if let Some(k) = key
                && l.starts_with(k)
                && l[k.len()..].trim_start().starts_with('=')
            {
                return Some(i + 1);
            }
        }
    }
    header
}

pub(super) fn find_line(text: &str, path: &str) -> Option<usize> {
    if let Some(line) = find_class_line(text, path) {
        return Some(line);
    }
    if let Some(line) = find_group_subtable_line(text, path) {
        return Some(line);
    }
    if let Some(line) = find_named_subtable_line(text, path) {
        return Some(line);
    }
    if let Some(line) = find_subtable_line(text, path) {
        return Some(line);
    }
    let mut parts = path.split('.');
    let first = parts.next()?;
    let key = parts.next(); // inline tables: the line of the key that holds them
    let (table, index) = match first.split_once('[') {
        Some((t, rest)) => (t, rest.trim_end_matches(']').parse::<usize>().ok()?),
        None if key.is_none() => {
            // A top-level key.
            return text
                .lines()
                .position(|l| l.trim_start().starts_with(first))
                .map(|i| i + 1);
        }
        None => (first, 0),
    };
    let header_array = format!("[[{table}]]");
    let header_table = format!("[{table}]");
    let mut seen = 0;
    let mut in_table = false;
    let mut header_line = None;
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.starts_with('[') {
            if in_table {
                break;
            }
            if l == header_array || l == header_table {
                if seen == index {
                    in_table = true;
                    header_line = Some(i + 1);
                }
                seen += 1;
            }
            continue;
        }
        if in_table
            && let Some(k) = key
            && l.starts_with(k)
            && l[k.len()..].trim_start().starts_with('=')
        {
            return Some(i + 1);
        }
    }
    header_line
}

/// The line of `T[i].S.KEY` (or of `T[i].S`) when the `i`-th `[[T]]` entry is followed by a `[T.S]`
/// sub-table (`[workers.lora]`): the line of KEY in it, else the sub-table's header.
pub(super) fn find_group_subtable_line(text: &str, path: &str) -> Option<usize> {
    let (table, rest) = path.split_once('[')?;
    let (index, rest) = rest.split_once("].")?;
    let index: usize = index.parse().ok()?;
    let (sub, key) = match rest.split_once('.') {
        Some((s, k)) => (s, Some(k)),
        None => (rest, None),
    };
    let entry = format!("[[{table}]]");
    let header = format!("[{table}.{sub}]");
    let mut seen = 0;
    let mut in_entry = false;
    let mut sub_line = None;
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l == entry {
            if in_entry {
                break;
            }
            in_entry = seen == index;
            seen += 1;
            continue;
        }
        if !in_entry {
            continue;
        }
        if l.starts_with('[') {
            if sub_line.is_some() {
                break;
            }
            if l == header {
                sub_line = Some(i + 1);
            }
            continue;
        }
        if sub_line.is_some()
            && let Some(k) = key
            && l.starts_with(k)
            && l[k.len()..].trim_start().starts_with('=')
        {
            return Some(i + 1);
        }
    }
    sub_line
}

/// The line of `a.b.key` (or of `a.b` itself) when the text has a `[a.b]` table header: the line
/// of the key in that table, else the header's.
pub(super) fn find_subtable_line(text: &str, path: &str) -> Option<usize> {
    if path.contains('[') {
        return None;
    }
    let mut parts = path.splitn(3, '.');
    let (a, b, key) = (parts.next()?, parts.next()?, parts.next());
    let header = format!("[{a}.{b}]");
    let start = text.lines().position(|l| l.trim() == header)?;
    for (i, line) in text.lines().enumerate().skip(start + 1) {
        let l = line.trim();
        if l.starts_with('[') {
            break;
        }
        if let Some(k) = key
            && l.starts_with(k)
            && l[k.len()..].trim_start().starts_with('=')
        {
            return Some(i + 1);
        }
    }
    Some(start + 1)
}

/// The line of `T.S."NAME".KEY` (or of `T.S."NAME"`): KEY in the table `[T.S."NAME"]` (also written
/// `[T.S.NAME]` for a bare name), else that table's header, else the line that sets NAME (an inline table).
pub(super) fn find_named_subtable_line(text: &str, path: &str) -> Option<usize> {
    let (prefix, rest) = path.split_once(".\"")?;
    let (name, rest) = rest.split_once('"')?;
    let key = rest.strip_prefix('.');
    let headers = [
        format!("[{prefix}.\"{name}\"]"),
        format!("[{prefix}.{name}]"),
    ];
    let is_key = |l: &str, k: &str| l.starts_with(k) && l[k.len()..].trim_start().starts_with('=');
    let mut lines = text.lines().enumerate();
    let start = lines
        .by_ref()
        .find(|(_, l)| {
            let l: String = l.chars().filter(|c| !c.is_whitespace()).collect();
            headers.contains(&l)
        })
        .map(|(i, _)| i);
    let Some(start) = start else {
        return text
            .lines()
            .position(|l| {
                let l = l.trim();
                is_key(l, &format!("\"{name}\"")) || is_key(l, name)
            })
            .map(|i| i + 1);
    };
    if let Some(k) = key {
        for (i, line) in lines {
            let l = line.trim();
            if l.starts_with('[') {
                break;
            }
            if is_key(l, k) {
                return Some(i + 1);
            }
        }
    }
    Some(start + 1)
}

/// `workers.0.count` written as `workers[0].count`: a key that is a number indexes the array before it.
pub(super) fn index_segments(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 2);
    for (i, seg) in split_path(path).iter().enumerate() {
        if i > 0 && !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{seg}]"));
        } else {
            if i > 0 {
                out.push('.');
            }
            out.push_str(seg);
        }
    }
    out
}
