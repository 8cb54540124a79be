//! Fuzzing on stable: proptest mutates the inputs kept in `tests/fuzz_corpus/` (bytes flipped, inserted and
//! deleted; absurd numbers spliced in) and feeds them to every parser a user's file reaches: the scenario
//! parser, `--set`, each trace reader, and the measurements CSV. A parser may reject its input; it may not
//! panic. (A hang shows as `.ci/run`'s `timeout` expiring: proptest's per-case timeout needs its `fork`
//! feature, which this crate does not enable.)
//!
//! `FLEETSIM_FUZZ_CASES` sets the cases per target (default 64, what `cargo test` runs); `.ci/run` runs
//! more. Any failure proptest finds is saved in `tests/fuzz.proptest-regressions` and replayed first on
//! every later run; inputs worth keeping by name go in `tests/fuzz_corpus/regressions/`, which
//! `regressions_stay_fixed` replays.

use std::path::{Path, PathBuf};

use fleetsim::calibration::measurements::Measurements;
use fleetsim::hardware::{GpuId, ModelId, Precision, ProfileKey};
use fleetsim::scenario::Scenario;
use fleetsim::workload::trace::stats::TraceStats;
use fleetsim::workload::trace::{RowStream, TraceFormat, TraceOptions};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};

fn corpus(kind: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz_corpus")
        .join(kind);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect()
}

fn config() -> Config {
    let cases = std::env::var("FLEETSIM_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::SourceParallel(
            "proptest-regressions",
        ))),
        // Shrinking a failure re-runs the target thousands of times; a minute of it is plenty.
        max_shrink_time: 60_000,
        ..Config::default()
    }
}

/// Values that have broken parsers elsewhere: limits of every integer width, non-finite and negative
/// numbers, huge exponents, empty and odd strings.
const SPLICES: &[&str] = &[
    "0",
    "-1",
    "1e30",
    "-1e30",
    "4e9",
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "9223372036854775808",
    "nan",
    "inf",
    "-inf",
    "1e-320",
    "\"\"",
    "[]",
    "{}",
    "\"1000000000h\"",
    "\"-5s\"",
    "\u{feff}",
    "\"\u{0}\"",
    ",",
    "\n",
    "=",
    "[[",
    "\"",
    "#",
];

/// One edit of a byte string.
#[derive(Clone, Debug)]
enum Edit {
    /// Overwrite the byte at this fraction of the length.
    Set(f64, u8),
    Insert(f64, u8),
    Delete(f64, usize),
    /// Replace a run of ASCII digits near this fraction with a splice.
    Splice(f64, usize),
    /// Duplicate a line (repeated ids, repeated keys).
    DupLine(f64),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (0.0..1.0f64, any::<u8>()).prop_map(|(f, b)| Edit::Set(f, b)),
        (0.0..1.0f64, any::<u8>()).prop_map(|(f, b)| Edit::Insert(f, b)),
        (0.0..1.0f64, 1usize..16).prop_map(|(f, n)| Edit::Delete(f, n)),
        (0.0..1.0f64, 0..SPLICES.len()).prop_map(|(f, i)| Edit::Splice(f, i)),
        (0.0..1.0f64).prop_map(Edit::DupLine),
    ]
}

fn apply(seed: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for e in edits {
        let at = |f: f64, len: usize| ((f * len as f64) as usize).min(len);
        match *e {
            Edit::Set(f, v) => {
                if !b.is_empty() {
                    let i = at(f, b.len() - 1);
                    b[i] = v;
                }
            }
            Edit::Insert(f, v) => {
                let i = at(f, b.len());
                b.insert(i, v);
            }
            Edit::Delete(f, n) => {
                let i = at(f, b.len());
                let j = (i + n).min(b.len());
                b.drain(i..j);
            }
            Edit::Splice(f, k) => {
                let i = at(f, b.len());
                let start = b[i..].iter().position(u8::is_ascii_digit).map(|p| i + p);
                if let Some(s) = start {
                    let end = b[s..]
                        .iter()
                        .position(|c| !(c.is_ascii_digit() || *c == b'.'))
                        .map_or(b.len(), |p| s + p);
                    b.splice(s..end, SPLICES[k].bytes());
                } else {
                    b.extend_from_slice(SPLICES[k].as_bytes());
                }
            }
            Edit::DupLine(f) => {
                let i = at(f, b.len());
                let s = b[..i]
                    .iter()
                    .rposition(|&c| c == b'\n')
                    .map_or(0, |p| p + 1);
                let e = b[i..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(b.len(), |p| i + p + 1);
                let line = b[s..e].to_vec();
                let mut line = line;
                if !line.ends_with(b"\n") {
                    line.insert(0, b'\n');
                }
                b.splice(e..e, line);
            }
        }
    }
    b
}

fn mutated(kind: &'static str) -> impl Strategy<Value = (String, Vec<u8>)> {
    let seeds = corpus(kind);
    (0..seeds.len(), prop::collection::vec(edit(), 0..12)).prop_map(move |(i, edits)| {
        let (name, bytes) = &seeds[i];
        (name.clone(), apply(bytes, &edits))
    })
}

/// A scratch directory for this test binary.
fn scratch() -> PathBuf {
    let d = std::env::temp_dir().join(format!("fleetsim-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Parses a scenario and, if it is valid, checks its limits (what `validate` does before building).
fn scenario_target(text: &str, overrides: &[String]) {
    if let Ok(s) = Scenario::parse(text, "fuzz.toml", overrides) {
        let _ = fleetsim::limits::check(&s);
    }
}

/// Reads every row of a trace with each reader, and its statistics; at most 10,000 rows.
fn trace_target(name: &str, bytes: &[u8], case: u64) {
    let path = scratch().join(format!("{case}-{name}"));
    std::fs::write(&path, bytes).unwrap();
    for format in [None]
        .into_iter()
        .chain(TraceFormat::ALL.into_iter().map(Some))
    {
        for reconstruct in [false, true] {
            let options = TraceOptions {
                format,
                skip_bad_lines: case.is_multiple_of(2),
                reconstruct_sessions: reconstruct && format == Some(TraceFormat::Mooncake),
                hash_block_size: 16,
                ..TraceOptions::default()
            };
            if let Ok(mut rows) = RowStream::open(&path, &options) {
                let mut stats = TraceStats::new(16);
                for row in rows.by_ref().take(10_000) {
                    match row {
                        Ok(r) => stats.add(&r),
                        Err(_) => break,
                    }
                }
                let _ = stats.report();
            }
        }
    }
    let _ = std::fs::remove_file(&path);
}

/// Parses a measurements file. (Its fit is not fuzzed: a multi-start Nelder–Mead over odd rows can take
/// tens of seconds in a debug build, and it is covered by the calibration tests.)
fn measurements_target(bytes: &[u8]) {
    let key = ProfileKey {
        gpu: GpuId::H100,
        model: ModelId::Llama31_8b,
        tp: 1,
        precision: Precision::Bf16,
    };
    if let Ok(m) = Measurements::parse(bytes, "fuzz.csv", key) {
        assert!(!m.rows().is_empty());
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn scenario_parser_never_panics((_name, bytes) in mutated("scenario")) {
        scenario_target(&String::from_utf8_lossy(&bytes), &[]);
    }

    #[test]
    fn set_overrides_never_panic(
        (_name, line) in mutated("set"),
        pick in any::<prop::sample::Index>(),
    ) {
        let text = String::from_utf8_lossy(&line);
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        let set = if lines.is_empty() { vec![String::new()] } else { vec![pick.get(&lines).clone()] };
        let base = corpus("scenario").into_iter().find(|(n, _)| n == "quickstart.toml").unwrap().1;
        scenario_target(&String::from_utf8_lossy(&base), &set);
    }

    #[test]
    fn trace_readers_never_panic((name, bytes) in mutated("trace"), case in any::<u64>()) {
        trace_target(&name, &bytes, case);
    }

    #[test]
    fn measurements_parser_never_panics((_name, bytes) in mutated("measurements")) {
        measurements_target(&bytes);
    }
}

/// Inputs that once crashed or hung a parser, kept by name: each must now be rejected or accepted cleanly.
#[test]
fn regressions_stay_fixed() {
    for (name, bytes) in corpus("regressions") {
        let text = String::from_utf8_lossy(&bytes);
        match name.rsplit_once('.').map(|(_, e)| e) {
            Some("toml") => scenario_target(&text, &[]),
            Some("set") => {
                let base = corpus("scenario")
                    .into_iter()
                    .find(|(n, _)| n == "quickstart.toml")
                    .unwrap()
                    .1;
                let set: Vec<String> = text.lines().map(str::to_string).collect();
                scenario_target(&String::from_utf8_lossy(&base), &set);
            }
            Some("csv") if name.starts_with("measurements") => measurements_target(&bytes),
            _ => trace_target(&name, &bytes, 0),
        }
    }
}
