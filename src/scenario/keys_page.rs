//! `docs/scenario-keys.md`, the guide's list of every scenario key, written from the scenario's JSON
//! Schema ([`super::schema`]): one section per table of the format (`[workload]`, `[[workers]]`,
//! `[router]` with one part per policy, `[tiers.host]`, …), each key with its type, default, allowed
//! values and description. A test keeps the committed page equal to [`keys_page`]'s output.
//!
//! Invariants: every property of every table the schema describes is listed once, in its table's
//! section; a table type met again at another path (the same struct under two keys) is described once
//! and linked from the second place; the page has no anchor it does not define.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use serde_json::{Map, Value};

/// Where the committed page lives, relative to the repository root.
pub const KEYS_PAGE_FILE: &str = "docs/scenario-keys.md";

/// The page for `schema` (the output of [`super::schema::scenario_schema`], as JSON).
pub fn keys_page(schema: &Value) -> String {
    let defs = schema
        .get("$defs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut page = Page {
        defs: &defs,
        out: String::new(),
        described: BTreeMap::new(),
        scalars: BTreeSet::new(),
    };
    page.out.push_str(HEADER);
    page.table(
        "Top level",
        "",
        schema.as_object().expect("the root schema is an object"),
        2,
    );
    page.value_types();
    page.out
}

const HEADER: &str = "# Scenario keys

<!-- Generated from the scenario types' doc comments by `cargo test --test integration schema` \
(`FLEETSIM_BLESS=1` rewrites it). Edit the doc comments under src/, not this page. -->

Every key of a scenario file, generated from the code that reads it: the same types, doc comments and
defaults. The [scenario reference](scenario-reference.md) explains the format with examples;
`fleetsim schema` prints the same facts as a JSON Schema (see [Editor support](scenario-reference.md#editor-support)).

A key marked *required* must be present; any other key may be left out, and then takes its default
(or, where no default is shown, is off or decided by the text). Durations, fractions and other value types
are explained [at the end of the page](#value-types). Unknown keys are errors.

";

struct Page<'a> {
    defs: &'a Map<String, Value>,
    out: String,
    /// Table types already described, by definition name: the anchor of their section.
    described: BTreeMap<String, String>,
    /// Value types met (definitions that are neither tables nor lists of names).
    scalars: BTreeSet<String>,
}

/// A sub-table to describe after its parent's keys: heading, path, schema, definition name.
type SubTable = (String, String, Map<String, Value>, Option<String>);

/// What a key's value is, for the page's purposes.
enum Shape<'s> {
    /// A table with keys of its own (`[name]`).
    Table(&'s Map<String, Value>, Option<String>),
    /// A list of tables (`[[name]]`).
    Tables(&'s Map<String, Value>, Option<String>),
    /// A table whose keys are names the user picks, each a table (`[name.NAME]`).
    NamedTables(&'s Map<String, Value>, Option<String>),
    /// Anything else: written on the key's line.
    Value,
}

impl<'a> Page<'a> {
    /// `schema` with a `$ref` followed: the definition and its name.
    fn resolve<'s>(&'s self, schema: &'s Value) -> (&'s Value, Option<String>)
    where
        'a: 's,
    {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(r) => {
                let name = r.trim_start_matches("#/$defs/");
                let def = self
                    .defs
                    .get(name)
                    .unwrap_or_else(|| panic!("schema refers to undefined {r}"));
                (def, Some(name.to_string()))
            }
            None => (schema, None),
        }
    }

    fn shape<'s>(&'s self, schema: &'s Value) -> Shape<'s>
    where
        'a: 's,
    {
        let (def, name) = self.resolve(schema);
        let is_table = |v: &Value| {
            v.get("properties").is_some()
                || v.get("oneOf").is_some_and(|o| {
                    o.as_array()
                        .is_some_and(|b| b.iter().all(|b| b.get("properties").is_some()))
                })
        };
        if is_table(def) {
            return Shape::Table(
                def.as_object().expect("a table's schema is an object"),
                name,
            );
        }
        if let Some(items) = def.get("items") {
            let (item, item_name) = self.resolve(items);
            if is_table(item) {
                return Shape::Tables(item.as_object().expect("object"), item_name);
            }
        }
        if let Some(values) = def.get("additionalProperties").filter(|v| v.is_object()) {
            let (value, value_name) = self.resolve(values);
            if is_table(value) {
                return Shape::NamedTables(value.as_object().expect("object"), value_name);
            }
        }
        Shape::Value
    }

    /// Writes the section of a table at `path` (`""`: the top level) and, after it, the sections of its
    /// sub-tables.
    fn table(&mut self, title: &str, path: &str, schema: &Map<String, Value>, level: usize) {
        let heading = "#".repeat(level.min(6));
        let _ = writeln!(self.out, "{heading} {title}\n");
        if let Some(d) = description(schema) {
            let _ = writeln!(self.out, "{}\n", without_table_name(&d));
        }
        if let Some(branches) = schema.get("oneOf").and_then(Value::as_array) {
            self.router_like(path, branches, level);
            return;
        }
        let subtables = self.keys(path, schema);
        if let Some(rules) = schema.get("allOf").and_then(Value::as_array) {
            self.keys_by_kind(schema, rules);
        }
        // The top level's tables get sections as high as its own; deeper ones nest.
        let sub_level = if path.is_empty() { level } else { level + 1 };
        for (sub_title, sub_path, sub, def_name) in subtables {
            self.subtable(&sub_title, &sub_path, sub, def_name, sub_level);
        }
    }

    /// A sub-table's section, or a line linking to the section where its type was described first.
    fn subtable(
        &mut self,
        title: &str,
        path: &str,
        schema: Map<String, Value>,
        def_name: Option<String>,
        level: usize,
    ) {
        if let Some(name) = &def_name {
            if let Some(anchor) = self.described.get(name).cloned() {
                let heading = "#".repeat(level.min(6));
                let _ = writeln!(
                    self.out,
                    "{heading} {title}\n\nThe same keys as [the table above](#{anchor}).\n"
                );
                return;
            }
            self.described.insert(name.clone(), slug(title));
        }
        self.table(title, path, &schema, level);
    }

    /// Lists a table's keys (required first, then by name); returns its sub-tables to describe after,
    /// tables by name last (so that a type met both as `[router]` and as `[policies.NAME]` is described
    /// at the first).
    fn keys(&mut self, path: &str, schema: &Map<String, Value>) -> Vec<SubTable> {
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
            return Vec::new();
        };
        let required: BTreeSet<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut keys: Vec<&String> = properties.keys().collect();
        keys.sort_by_key(|k| (!required.contains(k.as_str()), k.as_str()));
        let mut subtables = Vec::new();
        for key in keys {
            let property = &properties[key];
            let full = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            let (what, sub) = match self.shape(property) {
                Shape::Table(t, n) => {
                    let title = format!("`[{full}]`");
                    (
                        format!("table, see [{title}](#{})", slug(&title)),
                        Some((title, full.clone(), t.clone(), n)),
                    )
                }
                Shape::Tables(t, n) => {
                    let title = format!("`[[{full}]]`");
                    (
                        format!("list of tables, see [{title}](#{})", slug(&title)),
                        Some((title, full.clone(), t.clone(), n)),
                    )
                }
                Shape::NamedTables(t, n) => {
                    let title = format!("`[{full}.NAME]`");
                    (
                        format!("tables by name, see [{title}](#{})", slug(&title)),
                        Some((title, format!("{full}.NAME"), t.clone(), n)),
                    )
                }
                Shape::Value => (self.type_text(property), None),
            };
            let mut line = format!("- `{key}`: {what}");
            if required.contains(key.as_str()) {
                line.push_str("; *required*");
            } else if let Some(d) = property.get("default").and_then(default_text) {
                let _ = write!(line, "; default {d}");
            }
            line.push('.');
            if let Some(d) = description(
                property
                    .as_object()
                    .expect("a property's schema is an object"),
            )
            .or_else(|| self.resolve(property).0.as_object().and_then(description))
            {
                let _ = write!(line, " {}", d.replace("\n\n", " "));
            }
            self.out.push_str(&line);
            self.out.push('\n');
            for value in self.enum_values(property) {
                let _ = writeln!(self.out, "  - {value}");
            }
            if let Some(sub) = sub {
                subtables.push(sub);
            }
        }
        self.out.push('\n');
        subtables.sort_by_key(|(_, sub_path, _, _)| sub_path.ends_with(".NAME"));
        subtables
    }

    /// The `allOf` of `if kind = K then these keys are refused` rules: which keys each kind takes.
    fn keys_by_kind(&mut self, schema: &Map<String, Value>, rules: &[Value]) {
        let all: Vec<&String> = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().collect())
            .unwrap_or_default();
        let _ = writeln!(self.out, "Keys by `kind` (the others are refused):\n");
        for rule in rules {
            let Some(kind) = rule
                .pointer("/if/properties/kind/const")
                .and_then(Value::as_str)
            else {
                continue;
            };
            let refused = rule
                .pointer("/then/properties")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            let taken: Vec<String> = all
                .iter()
                .filter(|k| k.as_str() != "kind" && !refused.contains_key(k.as_str()))
                .map(|k| format!("`{k}`"))
                .collect();
            let _ = writeln!(self.out, "- `kind = \"{kind}\"`: {}", taken.join(", "));
        }
        self.out.push('\n');
    }

    /// A table whose keys depend on one of them (`[router]`: `policy`): the keys every branch shares,
    /// then each branch's own.
    fn router_like(&mut self, path: &str, branches: &[Value], level: usize) {
        let props = |b: &Value| -> BTreeSet<String> {
            b.get("properties")
                .and_then(Value::as_object)
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default()
        };
        let mut shared = props(&branches[0]);
        for b in &branches[1..] {
            shared = shared.intersection(&props(b)).cloned().collect();
        }
        let (tag, _) = branches[0]
            .get("properties")
            .and_then(Value::as_object)
            .and_then(|p| p.iter().find(|(_, v)| v.get("const").is_some()))
            .expect("every branch names itself with a constant");
        let tag = tag.clone();
        shared.remove(&tag);
        let names: Vec<String> = branches
            .iter()
            .filter_map(|b| {
                b.pointer(&format!("/properties/{tag}/const"))
                    .and_then(Value::as_str)
            })
            .map(|n| format!("[`{n}`](#{})", slug(&format!("`{tag} = \"{n}\"`"))))
            .collect();
        let _ = writeln!(
            self.out,
            "- `{tag}`: one of {}; *required*. Each value takes the keys listed in its section below, \
             besides the shared keys listed next.\n",
            names.join(", ")
        );
        let heading = "#".repeat((level + 1).min(6));
        let _ = writeln!(self.out, "{heading} Keys of every `{tag}`\n");
        let mut common = branches[0].as_object().cloned().unwrap_or_default();
        if let Some(Value::Object(p)) = common.get_mut("properties") {
            p.retain(|k, _| shared.contains(k));
        }
        common.remove("required");
        self.keys(path, &common);
        for b in branches {
            let Some(name) = b
                .pointer(&format!("/properties/{tag}/const"))
                .and_then(Value::as_str)
            else {
                continue;
            };
            let _ = writeln!(self.out, "{heading} `{tag} = \"{name}\"`\n");
            if let Some(d) = b.as_object().and_then(description) {
                let _ = writeln!(self.out, "{d}\n");
            }
            let mut own = b.as_object().cloned().unwrap_or_default();
            if let Some(Value::Object(p)) = own.get_mut("properties") {
                p.retain(|k, _| !shared.contains(k) && *k != tag);
                if p.is_empty() {
                    let _ = writeln!(self.out, "No keys of its own.\n");
                    continue;
                }
            }
            self.keys(path, &own);
        }
    }

    /// A value's type in words, linking value types to their explanation.
    fn type_text(&mut self, schema: &Value) -> String {
        if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
            let name = r.trim_start_matches("#/$defs/").to_string();
            let defs = self.defs;
            let def = &defs[&name];
            if def.get("enum").is_some() || def.get("oneOf").is_some() {
                return self.type_text(def);
            }
            self.scalars.insert(name.clone());
            return format!(
                "[{}](#{})",
                value_type_name(&name),
                slug(&value_type_name(&name))
            );
        }
        if let Some(values) = enum_names(schema) {
            return format!("one of {}", values.join(", "));
        }
        if let Some(c) = schema.get("const") {
            return format!("`{}`", plain(c));
        }
        if let Some(any) = schema.get("anyOf").and_then(Value::as_array) {
            let parts: Vec<String> = any.iter().map(|b| self.type_text(b)).collect();
            return parts.join(" or ");
        }
        match schema.get("type").and_then(Value::as_str) {
            Some("string") => "text".into(),
            Some("boolean") => "`true` or `false`".into(),
            Some("integer") => {
                let min = schema.get("minimum").and_then(Value::as_f64);
                match min {
                    Some(m) => format!("whole number ≥ {m}"),
                    None => "whole number".into(),
                }
            }
            Some("number") => "number".into(),
            Some("array") => match schema.get("items") {
                Some(items) => format!("list of {}", self.type_text(items)),
                None => "list".into(),
            },
            Some("object") => {
                if let Some(props) = schema.get("properties").and_then(Value::as_object)
                    && schema.get("additionalProperties") == Some(&Value::Bool(false))
                {
                    let value = props
                        .values()
                        .next()
                        .map(|v| self.type_text(v))
                        .unwrap_or_default();
                    let keys: Vec<String> = props.keys().map(|k| format!("`{k}`")).collect();
                    format!("table of {value} by key ({})", keys.join(", "))
                } else if let Some(v) = schema.get("additionalProperties").filter(|v| v.is_object())
                {
                    format!("table of {} by name", self.type_text(v))
                } else {
                    "table".into()
                }
            }
            _ => "any value".into(),
        }
    }

    /// The allowed values of an enumeration with a description each, as list lines; empty otherwise.
    fn enum_values(&self, schema: &Value) -> Vec<String> {
        let (def, _) = self.resolve(schema);
        let Some(branches) = def.get("oneOf").and_then(Value::as_array) else {
            return Vec::new();
        };
        branches
            .iter()
            .filter_map(|b| {
                let c = b
                    .get("const")
                    .or_else(|| b.get("enum").and_then(|e| e.get(0)))?;
                let d = b.as_object().and_then(description);
                Some(match d {
                    Some(d) => format!("`{}`: {}", plain(c), d.replace("\n\n", " ")),
                    None => format!("`{}`", plain(c)),
                })
            })
            .collect()
    }

    /// The closing section: each value type met, with its description.
    fn value_types(&mut self) {
        let _ = writeln!(self.out, "## Value types\n");
        let scalars = std::mem::take(&mut self.scalars);
        for name in &scalars {
            let def = &self.defs[name];
            let _ = writeln!(self.out, "### {}\n", value_type_name(name));
            if let Some(d) = def.as_object().and_then(description) {
                let _ = writeln!(self.out, "{d}\n");
            }
        }
    }
}

/// The name a value type goes by on the page (its heading, and the link text of keys of that type).
fn value_type_name(def: &str) -> String {
    match def {
        "Duration" => "duration".into(),
        "Positive" => "positive number".into(),
        "NonNegative" => "non-negative number".into(),
        "PositiveInt" => "positive whole number".into(),
        "Fraction" => "fraction".into(),
        "Warmup" => "warm-up".into(),
        "WorkerRef" => "worker".into(),
        "Domains" => "labels".into(),
        // A type added later: its name split into words (`PositiveInt` → "positive int").
        other => {
            let mut out = String::new();
            for (i, c) in other.chars().enumerate() {
                if c.is_uppercase() && i > 0 {
                    out.push(' ');
                }
                out.extend(c.to_lowercase());
            }
            out
        }
    }
}

/// A table type's description without the table's name in front (`` `[gateway]`: health checks… ``
/// becomes "Health checks…"): the section's heading names it already.
fn without_table_name(text: &str) -> String {
    let Some(rest) = text
        .strip_prefix("`[")
        .and_then(|t| t.split_once("`: "))
        .map(|(_, rest)| rest)
    else {
        return text.to_string();
    };
    let mut chars = rest.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => text.to_string(),
    }
}

/// A schema's description, if any.
fn description(schema: &Map<String, Value>) -> Option<String> {
    schema
        .get("description")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// The names of an enumeration (`enum`, or a `oneOf` of constants), as code spans.
fn enum_names(schema: &Value) -> Option<Vec<String>> {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return Some(values.iter().map(|v| format!("`{}`", plain(v))).collect());
    }
    let branches = schema.get("oneOf")?.as_array()?;
    let mut names = Vec::new();
    for b in branches {
        if let Some(c) = b.get("const") {
            names.push(format!("`{}`", plain(c)));
        } else if let Some(values) = b.get("enum").and_then(Value::as_array) {
            names.extend(values.iter().map(|v| format!("`{}`", plain(v))));
        } else {
            return None;
        }
    }
    Some(names)
}

/// A JSON value as it is written in TOML, for short values: text quoted, lists and tables inline.
fn toml_text(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(toml_text).collect();
            format!("[{}]", parts.join(", "))
        }
        Value::Object(map) => {
            let parts: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{k} = {}", toml_text(v)))
                .collect();
            format!("{{ {} }}", parts.join(", "))
        }
        other => other.to_string(),
    }
}

/// A default as the page shows it; `None` for a table's defaults (its section lists each key's).
fn default_text(value: &Value) -> Option<String> {
    match value {
        Value::Object(map) if !map.is_empty() => None,
        Value::Object(_) => None,
        v => Some(format!("`{}`", toml_text(v))),
    }
}

/// A constant as written in a scenario (text unquoted).
fn plain(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A heading's anchor as mdBook and GitHub make it: lowercased, blanks to `-`, every character other
/// than letters, digits, `-` and `_` dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                Some(c.to_lowercase().collect::<String>())
            } else if c == ' ' {
                Some("-".to_string())
            } else {
                None
            }
        })
        .collect()
}
