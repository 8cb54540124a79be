//! The scenario format as a JSON Schema (draft 2020-12), derived from the types that read it: each key's
//! doc comment is its description, each `#[serde(default)]` its default. `fleetsim schema` prints it,
//! `docs/scenario.schema.json` is a copy (a test keeps the two equal), and the bundled scenarios name
//! that copy on their `#:schema` line so that TOML editors complete and check keys.
//!
//! Invariant: the schema accepts every file [`super::Scenario::parse`] accepts (the bundled scenarios
//! are validated against it in the tests); it may accept more, since checks that span keys
//! (`Scenario::validate`) are not expressed in it.

use schemars::generate::SchemaSettings;
use schemars::transform::{Transform, transform_subschemas};
use schemars::{Schema, SchemaGenerator};

use super::Scenario;

/// Where the bundled copy of the schema lives, relative to the repository root.
pub const SCHEMA_FILE: &str = "docs/scenario.schema.json";

/// The schema of a scenario file.
pub fn scenario_schema() -> Schema {
    let settings = SchemaSettings::draft2020_12()
        .with_transform(NoNull)
        .with_transform(UserFacingDescriptions);
    let mut generator = SchemaGenerator::new(settings);
    let mut schema = generator.root_schema_for::<Scenario>();
    if let Some(title) = schema.get_mut("title") {
        *title = "fleetsim scenario".into();
    }
    schema
}

/// `fleetsim schema`'s output: the schema pretty-printed, keys in sorted order (serde_json's map is a
/// `BTreeMap` in this build), with a final newline.
pub fn scenario_schema_json() -> String {
    let mut text =
        serde_json::to_string_pretty(&scenario_schema()).expect("a schema is plain JSON data");
    text.push('\n');
    text
}

/// Drops a key's `default`, for keys whose default the type's own cannot say (a worker group's engine
/// limits default to what `vllm serve` picks on the group's GPU): the description states it instead.
pub(crate) fn no_default(schema: &mut Schema) {
    schema.remove("default");
}

/// Removes `null` from the types an `Option` key allows: TOML has no null, an optional key is one left
/// out. `"type": ["integer", "null"]` becomes `"type": "integer"`, and an `anyOf` of a schema and
/// `{"type": "null"}` becomes that schema.
#[derive(Clone, Debug)]
struct NoNull;

impl Transform for NoNull {
    fn transform(&mut self, schema: &mut Schema) {
        use serde_json::Value;
        if let Some(Value::Array(types)) = schema.get_mut("type") {
            types.retain(|t| t != "null");
            if types.len() == 1 {
                let only = types.remove(0);
                schema.insert("type".into(), only);
            }
        }
        if let Some(Value::Array(branches)) = schema.get_mut("anyOf") {
            branches.retain(|b| b.get("type").and_then(Value::as_str) != Some("null"));
            if branches.len() == 1
                && let Some(Value::Object(only)) = branches.pop()
                && let Some(map) = schema.as_object_mut()
            {
                map.remove("anyOf");
                for (key, value) in only {
                    map.entry(key).or_insert(value);
                }
            }
        }
        // A default of `None` is no default: the key is simply optional.
        if let Some(default) = schema.get_mut("default") {
            drop_nulls(default);
            if default.is_null() {
                schema.remove("default");
            }
        }
        transform_subschemas(self, schema);
    }
}

/// `value` without the keys of its objects (at any depth) whose value is null.
fn drop_nulls(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// Rewrites doc comments for readers of the scenario format: rustdoc links become plain code spans and
/// references into the source (`crate::…`) are dropped.
#[derive(Clone, Debug)]
struct UserFacingDescriptions;

impl Transform for UserFacingDescriptions {
    fn transform(&mut self, schema: &mut Schema) {
        if let Some(serde_json::Value::String(text)) = schema.get_mut("description") {
            *text = user_facing(text);
        }
        transform_subschemas(self, schema);
    }
}

/// `text` without rustdoc's link syntax: `` [`x`] `` becomes `` `x` ``, a parenthesised reference to
/// code only (`` ([`crate::x`]) ``, `` ([`super::x`]) ``) is removed, and line breaks inside a paragraph
/// become spaces.
fn user_facing(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("[`") {
        let Some(len) = rest[start + 2..].find("`]") else {
            break;
        };
        let name = &rest[start + 2..start + 2 + len];
        let after = &rest[start + 2 + len + 2..];
        let code_only = name.starts_with("crate::") || name.starts_with("super::");
        if code_only && rest[..start].ends_with('(') && after.starts_with(')') {
            // " ([`crate::x`])": drop it with the blank before it.
            let before = rest[..start - 1].trim_end_matches(' ');
            out.push_str(before);
            rest = &after[1..];
        } else if code_only {
            out.push_str(&rest[..start]);
            let short = name.rsplit("::").next().unwrap_or(name);
            out.push('`');
            out.push_str(short);
            out.push('`');
            rest = after;
        } else {
            out.push_str(&rest[..start]);
            out.push('`');
            out.push_str(name);
            out.push('`');
            rest = after;
        }
    }
    out.push_str(rest);
    // Paragraphs stay apart; the lines of one paragraph join.
    out.split("\n\n")
        .map(|p| p.split('\n').map(str::trim).collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_lose_rustdoc_links_and_code_references() {
        assert_eq!(
            user_facing("Autoscaling (`[autoscaler]`, [`crate::autoscale`])."),
            "Autoscaling (`[autoscaler]`, `autoscale`)."
        );
        assert_eq!(
            user_facing("Multi-turn conversations ([`super::sessions`]).\nMore."),
            "Multi-turn conversations. More."
        );
        assert_eq!(
            user_facing("See [`HarnessOptions`].\n\nNext paragraph."),
            "See `HarnessOptions`.\n\nNext paragraph."
        );
        assert_eq!(user_facing("a [`broken"), "a [`broken");
    }
}
