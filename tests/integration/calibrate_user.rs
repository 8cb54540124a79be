//! Calibrating from a user's own measurements (`fleetsim calibrate --measurements`): the fit recovers the
//! step times it was given, the profile it writes loads and drives `estimate`, every malformed file gives a
//! one-line error naming its line, and the shipped example is the bundled data it claims to be.

use std::path::Path;

use assert_cmd::Command;

use crate::common::TempDir;
use fleetsim::calibration::data::{self, Role, uniform_batch};
use fleetsim::calibration::measurements::{AllReduceTerms, Measurements};
use fleetsim::estimate::{EstimateRequest, estimate};
use fleetsim::hardware::{
    Efficiency, GpuId, ModelId, PerfModel, Precision, Profile, ProfileKey, profile,
};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn key(gpu: GpuId, model: ModelId, tp: u32) -> ProfileKey {
    ProfileKey {
        gpu,
        model,
        tp,
        precision: Precision::Bf16,
    }
}

const H100_8B: ProfileKey = ProfileKey {
    gpu: GpuId::H100,
    model: ModelId::Llama31_8b,
    tp: 1,
    precision: Precision::Bf16,
};

/// Efficiencies unlike the fit's starting point, with a vLLM-like host overhead.
fn truth() -> Efficiency {
    Efficiency {
        compute_max: 0.62,
        compute_half_tokens: 40.0,
        memory: 0.72,
        attention: 0.45,
        kv_memory: 0.85,
        link: 0.7,
        allreduce_latency_s: 8e-6,
        step_overhead_s: 0.9e-3,
        seq_overhead_s: 12e-6,
        prefill_seq_overhead_s: 1.5e-3,
    }
}

/// The steps a user would measure: single prompts, a prefix-cached and a batched prefill, decode steps
/// over batch and context. (batch, new_tokens, context_tokens).
const STEPS: &[(u64, u64, u64)] = &[
    (1, 128, 0),
    (1, 512, 0),
    (1, 1024, 0),
    (1, 2048, 0),
    (1, 4096, 0),
    (1, 8192, 0),
    (1, 16384, 0),
    (1, 1024, 4096),
    (4, 512, 0),
    (1, 1, 1024),
    (1, 1, 4096),
    (8, 1, 1024),
    (8, 1, 4096),
    (32, 1, 1024),
    (32, 1, 4096),
    (128, 1, 1024),
    (128, 1, 4096),
    (256, 1, 1024),
    (256, 1, 4096),
];

/// A measurements file of `STEPS` as `eff` times them for `key`, latencies to 0.1 µs.
fn csv_from(key: ProfileKey, eff: Efficiency) -> String {
    let perf = PerfModel::new(key.gpu, key.model, key.tp, key.precision, eff);
    let mut text = String::from("batch,new_tokens,context_tokens,latency_ms\n");
    for &(b, n, c) in STEPS {
        let ms = perf.step_seconds(&uniform_batch(b, n, c)) * 1e3;
        text += &format!("{b},{n},{c},{ms:.4}\n");
    }
    text
}

/// Fits `truth()` timings of `key` back and checks every step within `tolerance` (relative), and steps not
/// in the file within 2%.
fn round_trip(key: ProfileKey, tolerance: f64) -> fleetsim::calibration::measurements::MeasuredFit {
    let m = Measurements::parse(csv_from(key, truth()).as_bytes(), "mine.csv", key).unwrap();
    assert_eq!(m.rows().len(), STEPS.len());
    let fit = m.fit();
    for p in &fit.points {
        assert!(
            p.error().abs() < tolerance,
            "{key} line {}: {p:?}\n{}",
            p.row.line,
            fit.table()
        );
    }
    let (median, max) = fit.errors();
    assert!(
        median < tolerance / 2.0 && max < tolerance,
        "{}",
        fit.table()
    );
    let f = fit.profile.fit.as_ref().unwrap();
    assert_eq!((f.points, f.held_out_points), (STEPS.len() as u32, 0));
    // Between and beyond the measured steps, too.
    let fitted = PerfModel::new(
        key.gpu,
        key.model,
        key.tp,
        key.precision,
        fit.profile.efficiency,
    );
    let real = PerfModel::new(key.gpu, key.model, key.tp, key.precision, truth());
    for (b, n, c) in [(1, 3000, 0), (1, 700, 1500), (16, 1, 2048), (64, 1, 8192)] {
        let s = uniform_batch(b, n, c);
        let e = fitted.step_seconds(&s) / real.step_seconds(&s) - 1.0;
        assert!(e.abs() < 0.02, "{key} ({b}, {n}, {c}): {e}");
    }
    fit
}

#[test]
fn a_fit_to_known_step_times_predicts_them_and_drives_estimate() {
    // At TP 1 every efficiency is free and the model is the one that made the data: the fit reproduces
    // every step within 0.04% (measured; the CSV's 0.1 µs rounding is below 0.001%). Allow 0.1%.
    let fit = round_trip(H100_8B, 0.001);
    assert_eq!(fit.allreduce, AllReduceTerms::NotUsed);

    // The file written loads as a profile, says where it comes from, and `estimate` uses it.
    let dir = TempDir::new("calibrate-user-rt");
    let path = dir.path("mine.toml");
    std::fs::write(&path, fit.profile_file()).unwrap();
    let loaded = Profile::load(&path).unwrap();
    assert_eq!(loaded, fit.profile);
    assert_eq!(loaded.source, "mine.csv");
    assert!(
        fit.profile_file()
            .starts_with("# h100/llama-3.1-8b/tp1/bf16 — fitted by")
    );
    let e = estimate(&EstimateRequest {
        gpu: GpuId::H100,
        model: ModelId::Llama31_8b,
        tp: 1,
        precision: Precision::Bf16,
        kv_cache_dtype: None,
        prompt: 2048,
        output: 64,
        concurrency: None,
        requests: None,
        profile: Some(("mine.toml".into(), loaded)),
        max_num_seqs: None,
        frontend: fleetsim::workload::FrontendSpec {
            enabled: false,
            ..Default::default()
        },
        async_scheduling: true,
        harness: None,
        seed: 0,
    })
    .unwrap();
    assert_eq!(e.profile, "mine.toml");
    let real = PerfModel::new(
        GpuId::H100,
        ModelId::Llama31_8b,
        1,
        Precision::Bf16,
        truth(),
    );
    let want_ms = real.prefill_seconds(2048, 0) * 1e3;
    assert!(
        (e.prefill_ms / want_ms - 1.0).abs() < 0.02,
        "{} vs {want_ms}",
        e.prefill_ms
    );
}

/// At TP > 1 the all-reduce terms are the built-in profile's of that GPU and TP, held fixed; without one,
/// the GPU's published defaults.
#[test]
fn tensor_parallel_fits_hold_the_builtin_allreduce_terms() {
    let k = key(GpuId::H100, ModelId::Llama31_70b, 4);
    // At TP 4 the all-reduce terms are held at the built-in ones while the data used `truth()`'s, so the
    // other terms absorb the difference: measured largest error 0.32% (4 × 512 prefill). Allow 0.5%.
    let fit = round_trip(k, 0.005);
    let builtin = profile::builtin()
        .iter()
        .find(|p| p.key() == k)
        .unwrap()
        .efficiency;
    assert_eq!(fit.allreduce, AllReduceTerms::Builtin(k));
    assert_eq!(
        (
            fit.profile.efficiency.link,
            fit.profile.efficiency.allreduce_latency_s
        ),
        (builtin.link, builtin.allreduce_latency_s)
    );
    assert!(
        fit.profile
            .description
            .contains("h100/llama-3.1-70b/tp4/bf16")
    );

    // Any model borrows them: they belong to the GPU and TP degree (a reference profile is preferred).
    let qwen = key(GpuId::H100, ModelId::Qwen3_32b, 4);
    assert_eq!(AllReduceTerms::for_key(qwen), AllReduceTerms::Builtin(k));
    // B200 has no built-in profile at any TP: its published defaults.
    let b200 = key(GpuId::B200, ModelId::Llama31_8b, 2);
    assert_eq!(AllReduceTerms::for_key(b200), AllReduceTerms::Defaults);
    let d = Efficiency::for_gpu(GpuId::B200);
    assert_eq!(
        AllReduceTerms::Defaults.terms(b200),
        Some((d.link, d.allreduce_latency_s))
    );
    assert_eq!(AllReduceTerms::for_key(H100_8B), AllReduceTerms::NotUsed);
}

/// A valid file with the header on line 1; rows on lines 2.. in `STEPS` order.
fn valid() -> String {
    csv_from(H100_8B, truth())
}

/// `valid()` with line `line` (1-based) replaced by `with`.
fn with_line(line: usize, with: &str) -> String {
    let mut lines: Vec<String> = valid().lines().map(String::from).collect();
    lines[line - 1] = with.to_string();
    lines.join("\n") + "\n"
}

fn error_of(text: &str) -> String {
    let e = Measurements::parse(text.as_bytes(), "my.csv", H100_8B)
        .unwrap_err()
        .to_string();
    assert!(!e.contains('\n'), "not one line: {e}");
    e
}

/// Checks that `text` fails with an error at `my.csv:line` that mentions every one of `words`.
fn fails_at(text: &str, line: u64, words: &[&str]) {
    let e = error_of(text);
    let prefix = format!("my.csv:{line}: ");
    assert!(e.starts_with(&prefix), "expected {prefix}…, got: {e}");
    for w in words {
        assert!(e.contains(w), "{w:?} not in: {e}");
    }
}

#[test]
fn malformed_files_name_the_line_and_column() {
    // The valid file parses: the cases below fail for the reason named, nothing else.
    assert!(Measurements::parse(valid().as_bytes(), "my.csv", H100_8B).is_ok());
    let rows = valid();

    // Header.
    let no_context = rows
        .lines()
        .map(|l| l.rsplitn(2, ',').collect::<Vec<_>>())
        .map(|p| {
            let head: Vec<&str> = p[1].split(',').collect();
            format!("{},{},{}", head[0], head[1], p[0])
        })
        .collect::<Vec<_>>()
        .join("\n");
    fails_at(&no_context, 1, &["missing column `context_tokens`"]);
    fails_at(
        &with_line(1, "batch,new_tokens,context_tokens,latency_s"),
        1,
        &["missing column `latency_ms`", "`latency_s`"],
    );
    fails_at(
        &with_line(1, "batch,new_tokens,context_tokens,latency_ms,notes"),
        1,
        &["unknown column `notes`"],
    );
    fails_at(
        &with_line(1, "batch,new_tokens,context_tokens,latency_ms,batch"),
        1,
        &["column `batch` appears twice"],
    );
    fails_at(&with_line(1, "1,128,0,7.5"), 1, &["header", "found data"]);
    fails_at("", 1, &["no header"]);
    fails_at("# only a comment\n\n", 1, &["no header"]);

    // Values (line 6 is the 4096-token prefill, 13 the decode step of batch 8 at context 1024).
    fails_at(
        &with_line(6, "1,4096,0,fast"),
        6,
        &["column `latency_ms`", "\"fast\""],
    );
    fails_at(
        &with_line(6, "1,4096,0,0"),
        6,
        &["column `latency_ms`", "greater than 0"],
    );
    fails_at(
        &with_line(6, "1,4096,0,-93.1"),
        6,
        &["column `latency_ms`", "-93.1"],
    );
    fails_at(&with_line(6, "1,4096,0,NaN"), 6, &["column `latency_ms`"]);
    fails_at(
        &with_line(6, "1,4096,0,"),
        6,
        &["column `latency_ms`", "missing value"],
    );
    fails_at(
        &with_line(13, "0,1,1024,9.0"),
        13,
        &["column `batch`", "at least 1"],
    );
    fails_at(
        &with_line(13, "8,0,1024,9.0"),
        13,
        &["column `new_tokens`", "at least 1"],
    );
    fails_at(
        &with_line(13, "8.5,1,1024,9.0"),
        13,
        &["column `batch`", "whole number"],
    );
    fails_at(
        &with_line(13, "8,1,-1,9.0"),
        13,
        &["column `context_tokens`"],
    );
    fails_at(
        &with_line(13, "8,1,1k,9.0"),
        13,
        &["column `context_tokens`", "\"1k\""],
    );
    fails_at(
        &with_line(13, "8,1,1024"),
        13,
        &["expected 4 fields", "found 3"],
    );
    // Seconds instead of milliseconds: faster than the datasheet allows.
    fails_at(
        &with_line(13, "8,1,1024,0.0069"),
        13,
        &["column `latency_ms`", "faster than h100"],
    );

    // Token counts: a prefill sweep (same batch and context) must grow in new_tokens, a decode sweep
    // (same new_tokens and context) in batch, and each step appears once.
    fails_at(
        &with_line(5, "1,768,0,20.0"),
        5,
        &[
            "column `new_tokens`",
            "768 after 1024 on line 4",
            "same batch and context_tokens",
        ],
    );
    fails_at(
        &with_line(14, "4,1,1024,7.0"),
        14,
        &[
            "column `batch`",
            "4 after 8 on line 13",
            "same new_tokens and context_tokens",
        ],
    );
    fails_at(
        &with_line(14, "8,1,512,7.0"),
        14,
        &["column `context_tokens`", "512 after 1024 on line 13"],
    );
    fails_at(
        &with_line(17, "1,1,1024,6.9"),
        17,
        &["the same step as line 11"],
    );
}

#[test]
fn too_few_rows_name_the_file_and_what_is_missing() {
    let text = valid();
    let lines: Vec<&str> = text.lines().collect();
    let e = error_of(&(lines[..6].join("\n") + "\n"));
    assert!(e.starts_with("my.csv: 5 rows, at least 8 needed"), "{e}");
    // Decode steps only.
    let decode: Vec<&str> = std::iter::once(lines[0])
        .chain(
            lines
                .iter()
                .copied()
                .filter(|l| l.split(',').nth(1) == Some("1")),
        )
        .collect();
    let e = error_of(&(decode.join("\n") + "\n"));
    assert!(e.starts_with("my.csv: 0 prefill rows"), "{e}");
    let prefill: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.split(',').nth(1) != Some("1"))
        .collect();
    let e = error_of(&(prefill.join("\n") + "\n"));
    assert!(e.starts_with("my.csv: 0 decode rows"), "{e}");
}

/// Comments, blank lines, CRLF line ends, a byte-order mark and quoted labels are allowed, and line
/// numbers count every line of the file.
#[test]
fn line_numbers_count_comments_blank_lines_and_crlf() {
    let body = valid().replacen(
        "batch,new_tokens,context_tokens,latency_ms",
        "# measured with vLLM 0.11, 2025-06-01\n\nlatency_ms , batch,new_tokens,context_tokens,label",
        1,
    );
    // Move latency to the front of each data row and add a quoted label with a comma.
    let text: String = body
        .lines()
        .map(|l| match l.split(',').collect::<Vec<_>>()[..] {
            [b, n, c, ms] if b.parse::<u64>().is_ok() => format!("{ms},{b},{n},{c},\"x, {b}\"\r\n"),
            _ => format!("{l}\r\n"),
        })
        .collect();
    let text = format!("\u{feff}{text}");
    let m = Measurements::parse(text.as_bytes(), "my.csv", H100_8B).unwrap();
    assert_eq!(m.rows()[0].line, 4);
    assert_eq!(m.rows()[0].label.as_deref(), Some("x, 1"));
    assert_eq!((m.rows()[0].batch, m.rows()[0].new_tokens), (1, 128));
    // Line 6 of `valid()` (the 4096-token prefill) is line 9 here, after a comment inserted above it.
    let bad = text.replacen("\"x, 1\"\r\n", "\"x, 1\"\r\n# note\r\n", 1);
    let bad = bad.replace(",1,4096,0,", ",1,4096,0x,");
    let e = error_of(&bad);
    assert!(e.starts_with("my.csv:9: column `context_tokens`"), "{e}");
    // Not UTF-8 on line 3.
    let mut bytes = valid().into_bytes();
    let at = bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .nth(1)
        .unwrap()
        .0
        + 1;
    bytes[at] = 0xff;
    let e = Measurements::parse(&bytes, "my.csv", H100_8B)
        .unwrap_err()
        .to_string();
    assert_eq!(e, "my.csv:3: not UTF-8 text");
    let e = Measurements::read(Path::new("no/such/file.csv"), H100_8B)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("no/such/file.csv: cannot read measurements"),
        "{e}"
    );
}

/// The example's rows are the bundled measurements of that configuration, as `calibrate` reads them.
#[test]
fn the_example_is_the_bundled_h100_data() {
    let example = root().join("data/calibration/example/h100-llama-3.1-8b.csv");
    let m = Measurements::read(&example, H100_8B).unwrap();
    let bundled: Vec<data::Observation> = data::aiconfigurator(&root().join("data/calibration"))
        .unwrap()
        .into_iter()
        .filter(|o| o.key == H100_8B)
        .collect();
    assert_eq!(m.rows().len(), bundled.len());
    for (row, o) in m.rows().iter().zip(&bundled) {
        assert_eq!(row.shape(), o.shape, "line {}", row.line);
        assert!(
            (row.latency_ms - o.measured_s * 1e3).abs() <= 0.0005 + 1e-9,
            "line {}: {} vs {}",
            row.line,
            row.latency_ms,
            o.measured_s * 1e3
        );
    }
    assert!(bundled.iter().any(|o| o.role == Role::HeldOut));
    // Fitted to all 19 (the built-in profile holds 3 out): measured 2.8% median, 8.3% largest.
    let (median, max) = m.fit().errors();
    assert!(median < 0.04 && max < 0.10, "{median} {max}");
}

fn fleetsim() -> Command {
    Command::cargo_bin("fleetsim").unwrap()
}

#[test]
fn the_command_prints_every_step_and_writes_a_profile_estimate_can_use() {
    let dir = TempDir::new("calibrate-user-cli");
    let csv = dir.path("steps.csv");
    std::fs::write(&csv, valid()).unwrap();
    let out = dir.path("sub/mine.toml");
    let run = || {
        let a = fleetsim()
            .args([
                "calibrate",
                "--gpu",
                "h100",
                "--model",
                "llama-3.1-8b",
                "--measurements",
            ])
            .arg(&csv)
            .arg("--out")
            .arg(&out)
            .assert()
            .success();
        String::from_utf8(a.get_output().stdout.clone()).unwrap()
    };
    let stdout = run();
    assert!(
        stdout.contains("measured ms") && stdout.contains("predicted ms"),
        "{stdout}"
    );
    for (line, &(b, n, c)) in (2..).zip(STEPS) {
        let step = match (b, n, c) {
            (_, 1, _) => format!("decode batch {b}, context {c}"),
            (1, _, 0) => format!("prefill {n}"),
            (1, _, _) => format!("prefill {n} after {c} cached"),
            _ => format!("prefill {b} × {n}"),
        };
        let row = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{line} ")))
            .unwrap_or_else(|| panic!("no row for line {line}:\n{stdout}"));
        assert!(row.contains(&step) && row.ends_with('%'), "{row}");
    }
    assert!(
        stdout.contains(&format!("{} steps: median |error|", STEPS.len())),
        "{stdout}"
    );
    let written = std::fs::read(&out).unwrap();
    let p = Profile::load(&out).unwrap();
    assert_eq!(p.key(), H100_8B);
    // Deterministic: the same table and the same bytes again.
    assert_eq!(run(), stdout);
    assert_eq!(std::fs::read(&out).unwrap(), written);

    let a = fleetsim()
        .args([
            "estimate",
            "--gpu",
            "h100",
            "--model",
            "llama-3.1-8b",
            "--prompt",
            "1000",
        ])
        .args(["--output", "50", "--json", "--profile"])
        .arg(&out)
        .assert()
        .success();
    let json: serde_json::Value = serde_json::from_slice(&a.get_output().stdout).unwrap();
    assert_eq!(json["profile"], out.display().to_string());
    assert_eq!(json["calibrated"], true);

    // A malformed file: the error names its line, and nothing is written.
    std::fs::write(&csv, with_line(5, "1,4096,0,-1")).unwrap();
    let bad = dir.path("bad.toml");
    let a = fleetsim()
        .args([
            "calibrate",
            "--gpu",
            "h100",
            "--model",
            "llama-3.1-8b",
            "--measurements",
        ])
        .arg(&csv)
        .arg("--out")
        .arg(&bad)
        .assert()
        .failure();
    let stderr = String::from_utf8(a.get_output().stderr.clone()).unwrap();
    assert!(
        stderr.contains("steps.csv:5: column `latency_ms`"),
        "{stderr}"
    );
    assert!(!bad.exists());
    // The two modes do not mix.
    fleetsim()
        .args([
            "calibrate",
            "--check",
            "--gpu",
            "h100",
            "--model",
            "llama-3.1-8b",
            "--measurements",
        ])
        .arg(&csv)
        .arg("--out")
        .arg(&bad)
        .assert()
        .failure();
}
