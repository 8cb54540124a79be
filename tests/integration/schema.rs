//! The scenario schema and the page made from it: `docs/scenario.schema.json` is what `fleetsim schema`
//! prints, `docs/scenario-keys.md` is what the page generator writes from it (`FLEETSIM_BLESS=1`
//! rewrites both), every bundled scenario is valid against the schema and names it on a `#:schema`
//! first line, and files the parser refuses for a wrong key or type the schema refuses too.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use fleetsim::scenario::Scenario;
use fleetsim::scenario::keys_page::{KEYS_PAGE_FILE, keys_page};
use fleetsim::scenario::schema::{SCHEMA_FILE, scenario_schema_json};
use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `generated` equals the committed file at `rel`; with `FLEETSIM_BLESS=1`, the file is rewritten.
fn check_committed(rel: &str, generated: &str) {
    let path = root().join(rel);
    if std::env::var_os("FLEETSIM_BLESS").is_some() {
        std::fs::write(&path, generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != generated {
        let line = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .map_or(
                committed.lines().count().min(generated.lines().count()),
                |i| i,
            );
        panic!(
            "{rel} is not what the code generates (first difference at line {}). Regenerate it with \
             `FLEETSIM_BLESS=1 cargo test --test integration schema` and commit it.",
            line + 1
        );
    }
}

fn schema() -> Value {
    serde_json::from_str(&scenario_schema_json()).unwrap()
}

fn validator() -> jsonschema::Validator {
    jsonschema::validator_for(&schema()).expect("the schema is a valid JSON Schema")
}

/// The bundled scenarios: `scenarios/*.toml` and `validation/routing/*/*.toml`.
fn bundled() -> Vec<PathBuf> {
    let mut files = Vec::new();
    let toml_in = |dir: &Path, files: &mut Vec<PathBuf>| {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                files.push(path);
            }
        }
    };
    toml_in(&root().join("scenarios"), &mut files);
    for entry in std::fs::read_dir(root().join("validation/routing")).unwrap() {
        let dir = entry.unwrap().path();
        if dir.is_dir() {
            toml_in(&dir, &mut files);
        }
    }
    files.sort();
    files
}

/// The TOML text as the JSON value the schema judges.
fn as_json(text: &str) -> Value {
    let table: toml::Table = toml::from_str(text).unwrap();
    serde_json::to_value(table).unwrap()
}

/// The schema's complaints about `text`, one line each.
fn complaints(validator: &jsonschema::Validator, text: &str) -> Vec<String> {
    validator
        .iter_errors(&as_json(text))
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

#[test]
fn the_committed_schema_is_what_fleetsim_schema_prints() {
    let out = Command::cargo_bin("fleetsim")
        .unwrap()
        .arg("schema")
        .output()
        .unwrap();
    assert!(out.status.success());
    let printed = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        printed,
        scenario_schema_json(),
        "the command prints the library's schema"
    );
    check_committed(SCHEMA_FILE, &printed);
}

#[test]
fn the_committed_keys_page_is_generated_from_the_schema() {
    check_committed(KEYS_PAGE_FILE, &keys_page(&schema()));
}

#[test]
fn every_bundled_scenario_is_valid_against_the_schema() {
    let validator = validator();
    let files = bundled();
    assert!(
        files.len() >= 40,
        "found only {} bundled scenarios",
        files.len()
    );
    let mut failures = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        // The parser accepts it: the schema must too.
        Scenario::load(file, &[]).unwrap();
        for c in complaints(&validator, &text) {
            failures.push(format!("{}: {c}", file.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Files the parser refuses for one wrong key or value; the schema must refuse each as well.
#[test]
fn the_schema_refuses_what_the_parser_refuses_for_a_key_or_type() {
    let base = "name = \"x\"\nduration = \"1m\"\n\n[[workers]]\ncount = 2\ngpu = \"h100\"\n\
                model = \"llama-3.1-8b\"\n\n[workload]\nkind = \"poisson\"\nrate = 5\n\
                prompt = { dist = \"fixed\", tokens = 100 }\noutput = { dist = \"fixed\", tokens = 50 }\n";
    let validator = validator();
    assert_eq!(complaints(&validator, base), Vec::<String>::new());
    Scenario::parse(base, "base.toml", &[]).unwrap();
    let broken = [
        (
            "an unknown top-level key",
            format!("colour = \"red\"\n{base}"),
        ),
        (
            "an unknown key in a table",
            base.replace("count = 2", "count = 2\nreplica = 1"),
        ),
        (
            "text for a number",
            base.replace("rate = 5", "rate = \"fast\""),
        ),
        ("a negative rate", base.replace("rate = 5", "rate = -5")),
        ("zero workers", base.replace("count = 2", "count = 0")),
        ("an unknown GPU", base.replace("\"h100\"", "\"h1000\"")),
        (
            "a duration without a known unit",
            base.replace("\"1m\"", "\"1 fortnight\""),
        ),
        (
            "a key of another workload kind",
            base.replace("rate = 5", "rate = 5\nclients = 3"),
        ),
        (
            "an unknown policy",
            format!("{base}\n[router]\npolicy = \"teleport\"\n"),
        ),
        (
            "a parameter of another policy",
            format!("{base}\n[router]\npolicy = \"round_robin\"\nload_weight = 1.0\n"),
        ),
        (
            "a router setting of the wrong type",
            format!("{base}\n[router]\npolicy = \"random\"\nreplicas = \"two\"\n"),
        ),
        (
            "a fault's worker as a name",
            format!("{base}\n[[faults]]\nkind = \"crash\"\nworker = \"first\"\nat = \"10s\"\n"),
        ),
        (
            "a warm-up word it does not know",
            format!("{base}\n[metrics]\nwarmup = \"sometimes\"\n"),
        ),
    ];
    for (what, text) in &broken {
        assert!(
            Scenario::parse(text, "broken.toml", &[]).is_err(),
            "the parser accepts {what}: the case tests nothing"
        );
        assert!(
            !complaints(&validator, text).is_empty(),
            "the schema accepts {what}:\n{text}"
        );
    }
    // And what it must accept in each of those places.
    let fine = [
        base.replace("\"1m\"", "90"),
        base.replace("\"1m\"", "\" 1.5 min \""),
        format!(
            "{base}\n[router]\npolicy = \"prefix_aware\"\nload_weight = 1.0\nview = \"events\"\n"
        ),
        format!("{base}\n[[faults]]\nkind = \"crash\"\nworker = \"most_sessions\"\nat = \"10s\"\n"),
        format!("{base}\n[metrics]\nwarmup = \"none\"\n"),
        format!("{base}\n[metrics]\nwarmup = 5\n"),
    ];
    for text in &fine {
        Scenario::parse(text, "fine.toml", &[]).unwrap();
        assert_eq!(complaints(&validator, text), Vec::<String>::new(), "{text}");
    }
}

/// Each bundled scenario's first line is `#:schema PATH`, PATH relative to the file and naming the
/// committed schema (taplo and Even Better TOML resolve it against the file's folder).
#[test]
fn every_bundled_scenario_names_the_schema_on_its_first_line() {
    let schema = std::fs::canonicalize(root().join(SCHEMA_FILE)).unwrap();
    let mut wrong = Vec::new();
    for file in bundled() {
        let text = std::fs::read_to_string(&file).unwrap();
        let first = text.lines().next().unwrap_or_default();
        let Some(rel) = first.strip_prefix("#:schema ") else {
            wrong.push(format!(
                "{}: first line is not `#:schema PATH`",
                file.display()
            ));
            continue;
        };
        let named = file.parent().unwrap().join(rel.trim());
        if std::fs::canonicalize(&named).ok().as_ref() != Some(&schema) {
            wrong.push(format!("{}: `{rel}` is not {SCHEMA_FILE}", file.display()));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The workload's per-kind rules cover every kind the schema lists.
#[test]
fn every_workload_kind_has_its_keys_rule() {
    let schema = schema();
    let kinds: Vec<&str> = schema
        .pointer("/$defs/WorkloadKind/oneOf")
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .filter_map(|b| b.get("const").and_then(Value::as_str))
        .collect();
    let ruled: Vec<&str> = schema
        .pointer("/$defs/WorkloadSpec/allOf")
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .filter_map(|r| {
            r.pointer("/if/properties/kind/const")
                .and_then(Value::as_str)
        })
        .collect();
    assert_eq!(kinds.len(), 8);
    assert_eq!(kinds, ruled);
}
