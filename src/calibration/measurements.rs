//! Calibrating from your own measurements: a CSV of measured engine steps of one configuration, fitted into
//! a profile file that scenarios and `fleetsim estimate --profile` can name.
//!
//! ```text
//! FILE.csv ──Measurements::read──► validated rows ──fit::fit──► Efficiency ──► PROFILE.toml + per-point table
//! ```
//! The format (`docs/calibration-format.md`): a header line naming the columns, in any order,
//! `batch,new_tokens,context_tokens,latency_ms` and optionally `label`; then one line per measured step, in
//! which `batch` sequences each compute `new_tokens` tokens on top of `context_tokens` cached ones and the
//! step takes `latency_ms` milliseconds. Blank lines and lines whose first character is `#` are skipped.
//!
//! The fit is the one `fleetsim calibrate` runs on the bundled data ([`super::fit::fit`]), with the same
//! rounding of what is stored; only the all-reduce terms are not fitted (see [`AllReduceTerms`]).

use std::fmt::Write;
use std::path::Path;

use super::data::{Observation, Role};
use super::{CalibrationError, PointResult, fit, median_and_max, round_efficiency, stats};
use crate::hardware::profile::{self, REFERENCE_SOURCE};
use crate::hardware::{Efficiency, PerfModel, Profile, ProfileKey, StepShape};

/// Columns every measurements file must have.
pub const REQUIRED_COLUMNS: [&str; 4] = ["batch", "new_tokens", "context_tokens", "latency_ms"];
/// Columns a measurements file may have.
pub const OPTIONAL_COLUMNS: [&str; 1] = ["label"];

/// Fewest rows a file must have: the fit has eight free parameters at TP 1.
pub const MIN_ROWS: usize = 8;
/// Fewest prefill rows (`new_tokens` > 1): they pin the compute and attention terms.
pub const MIN_PREFILL_ROWS: usize = 3;
/// Fewest decode rows (`new_tokens` = 1): they pin weight streaming, KV reads and the per-step costs.
pub const MIN_DECODE_ROWS: usize = 3;

/// A measurement is rejected when it is faster than this fraction of the least time the datasheet allows
/// for its step (every efficiency 1, no overheads): it cannot be a step of this configuration as described.
/// Not 1: the model's FLOP and byte counts are close to, not exactly, what the kernels do.
pub const FASTEST_PLAUSIBLE: f64 = 0.9;

/// A measurement is rejected when it is slower than this many times the datasheet's least time for its
/// step plus [`SLOWEST_PLAUSIBLE_EXTRA_MS`]: real vLLM steps stay within a few times that bound (the
/// bundled data: within 6×), so a row beyond it is a wrong unit or a stalled run, and one such row drags
/// the whole fit.
pub const SLOWEST_PLAUSIBLE: f64 = 100.0;
/// The fixed allowance added to [`SLOWEST_PLAUSIBLE`]'s multiple (host overheads of a tiny step), ms.
pub const SLOWEST_PLAUSIBLE_EXTRA_MS: f64 = 1000.0;
/// A fit whose median |relative error| over its own rows exceeds this is refused: the rows do not
/// describe one configuration's steps.
pub const MAX_MEDIAN_FIT_ERROR: f64 = 0.25;

/// Most sequences in one measured step: far above any engine's batch limit (vLLM's `max_num_seqs` is at
/// most a few thousand). The step's shape is built sequence by sequence, so an absurd batch would take
/// minutes before it could be rejected.
pub const MAX_BATCH: u64 = 65_536;
/// Most tokens per sequence (`new_tokens`, `context_tokens`): the longest context of any model.
pub const MAX_TOKENS: u64 = crate::workload::trace::text::MAX_REQUEST_TOKENS as u64;

/// Observation id of a user's measurements (the fit does not depend on it).
const SOURCE: &str = "measurements";

/// One measured engine step: `batch` sequences, each computing `new_tokens` tokens on top of
/// `context_tokens` tokens already in its KV cache, in `latency_ms` milliseconds.
///
/// Invariants (checked by [`Measurements::parse`]): `batch` ≥ 1, `new_tokens` ≥ 1, `latency_ms` finite and
/// greater than 0, `line` the 1-based line of the file it was read from.
#[derive(Clone, Debug, PartialEq)]
pub struct Measurement {
    pub line: u64,
    /// The `label` column, if the file has one and this row's is not empty.
    pub label: Option<String>,
    pub batch: u64,
    pub new_tokens: u64,
    pub context_tokens: u64,
    pub latency_ms: f64,
}

impl Measurement {
    /// The step this row measures.
    pub fn shape(&self) -> StepShape {
        super::data::uniform_batch(self.batch, self.new_tokens, self.context_tokens)
    }

    /// Whether the row measures prompt work (more than one new token per sequence).
    pub fn is_prefill(&self) -> bool {
        self.new_tokens > 1
    }

    /// The row's label, or its step in words: `prefill 2048`, `prefill 512 after 2048 cached`,
    /// `prefill 4 × 512`, `decode batch 32, context 4096`.
    pub fn describe(&self) -> String {
        if let Some(label) = &self.label {
            return label.clone();
        }
        let (b, n, c) = (self.batch, self.new_tokens, self.context_tokens);
        match (n, b, c) {
            (1, _, _) => format!("decode batch {b}, context {c}"),
            (_, 1, 0) => format!("prefill {n}"),
            (_, 1, _) => format!("prefill {n} after {c} cached"),
            (_, _, 0) => format!("prefill {b} × {n}"),
            _ => format!("prefill {b} × {n} after {c} cached"),
        }
    }

    fn counts(&self) -> [u64; 3] {
        [self.batch, self.new_tokens, self.context_tokens]
    }
}

/// The rows of one measurements file, validated for one configuration.
///
/// Invariants: at least [`MIN_ROWS`] rows, of which at least [`MIN_PREFILL_ROWS`] prefill and
/// [`MIN_DECODE_ROWS`] decode rows; every row satisfies [`Measurement`]'s invariants and is no faster than
/// [`FASTEST_PLAUSIBLE`] of what the datasheet allows for `key`; no two rows measure the same step; rows are
/// in file order and every sweep among them is sorted (see [`Measurements::parse`]).
#[derive(Clone, Debug)]
pub struct Measurements {
    file: String,
    key: ProfileKey,
    rows: Vec<Measurement>,
}

/// A `file:line` error.
fn at(file: &str, line: u64, message: String) -> CalibrationError {
    CalibrationError {
        location: format!("{file}:{line}"),
        message,
    }
}

/// Splits one line into trimmed fields with CSV quoting (a quoted label may hold commas).
fn fields(line: &str) -> Vec<String> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(line.as_bytes());
    let mut record = csv::StringRecord::new();
    match reader.read_record(&mut record) {
        Ok(true) => record.iter().map(str::to_string).collect(),
        // One line of valid UTF-8 has one record; nothing else can fail on an in-memory string.
        _ => vec![line.trim().to_string()],
    }
}

/// A whole number at least `min` from column `column`, or what is wrong with it.
fn count(value: &str, column: &str, min: u64) -> Result<u64, String> {
    if value.is_empty() {
        return Err(format!("column `{column}`: missing value"));
    }
    let max = if column == "batch" {
        MAX_BATCH
    } else {
        MAX_TOKENS
    };
    match value.parse::<u64>() {
        Ok(v) if v > max => Err(format!(
            "column `{column}`: {v} is more than any engine step holds (at most {max})"
        )),
        Ok(v) if v >= min => Ok(v),
        Ok(v) => Err(format!(
            "column `{column}`: expected a whole number at least {min}, got {v}"
        )),
        Err(_) if value.parse::<f64>().is_ok() => Err(format!(
            "column `{column}`: expected a whole number at least {min}, got {value}"
        )),
        Err(_) => Err(format!(
            "column `{column}`: expected a whole number, got {value:?}"
        )),
    }
}

/// A latency in milliseconds: finite and greater than 0.
fn latency(value: &str) -> Result<f64, String> {
    if value.is_empty() {
        return Err("column `latency_ms`: missing value".into());
    }
    match value.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        Ok(v) => Err(format!(
            "column `latency_ms`: expected milliseconds greater than 0, got {v}"
        )),
        Err(_) => Err(format!(
            "column `latency_ms`: expected a number of milliseconds, got {value:?}"
        )),
    }
}

/// The least time the datasheet allows for a step: every efficiency 1, no fixed costs.
fn datasheet_bound(key: ProfileKey) -> PerfModel {
    let ideal = Efficiency {
        compute_max: 1.0,
        compute_half_tokens: 0.0,
        memory: 1.0,
        attention: 1.0,
        kv_memory: 1.0,
        link: 1.0,
        allreduce_latency_s: 0.0,
        step_overhead_s: 0.0,
        seq_overhead_s: 0.0,
        prefill_seq_overhead_s: 0.0,
    };
    PerfModel::new(key.gpu, key.model, key.tp, key.precision, ideal)
}

impl Measurements {
    /// Reads and validates the measurements file at `path` for configuration `key`.
    pub fn read(path: &Path, key: ProfileKey) -> Result<Measurements, CalibrationError> {
        let file = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| CalibrationError {
            location: file.clone(),
            message: format!("cannot read measurements: {e}"),
        })?;
        Self::parse(&bytes, &file, key)
    }

    /// Validates the contents `bytes` of a measurements file named `file` (in errors and in the profile) for
    /// configuration `key`. Every error names `file:line` (the file alone when too few rows), and the column
    /// where one is at fault:
    /// - the header (the first line that is neither blank nor a comment) must name every column of
    ///   [`REQUIRED_COLUMNS`], each column once, and no column outside those and [`OPTIONAL_COLUMNS`];
    /// - every row has one field per column; `batch` and `new_tokens` are whole numbers ≥ 1,
    ///   `context_tokens` a whole number ≥ 0, `latency_ms` a number > 0 no faster than
    ///   [`FASTEST_PLAUSIBLE`] of the datasheet's least time for the step;
    /// - sweeps are sorted: when a row has the same value as the row above it in two of `batch`,
    ///   `new_tokens` and `context_tokens`, the third must be strictly larger than above;
    /// - each step (`batch`, `new_tokens`, `context_tokens`) appears once;
    /// - there are at least [`MIN_ROWS`] rows, [`MIN_PREFILL_ROWS`] of them prefill and
    ///   [`MIN_DECODE_ROWS`] decode.
    pub fn parse(
        bytes: &[u8],
        file: &str,
        key: ProfileKey,
    ) -> Result<Measurements, CalibrationError> {
        if !matches!(key.tp, 1 | 2 | 4 | 8) {
            return Err(CalibrationError {
                location: file.to_string(),
                message: format!("tensor parallelism must be 1, 2, 4 or 8, got {}", key.tp),
            });
        }
        let text = std::str::from_utf8(bytes).map_err(|e| {
            let line = bytes[..e.valid_up_to()]
                .iter()
                .filter(|&&b| b == b'\n')
                .count() as u64
                + 1;
            at(file, line, "not UTF-8 text".into())
        })?;
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut lines = text
            .lines()
            .zip(1u64..)
            .filter(|(l, _)| !l.trim().is_empty() && !l.trim_start().starts_with('#'));

        let expected = REQUIRED_COLUMNS.join(",");
        let Some((header, header_line)) = lines.next() else {
            return Err(at(
                file,
                1,
                format!(
                    "no header line: the first line must name the columns, e.g. {expected},label"
                ),
            ));
        };
        let columns = fields(header);
        if columns.iter().any(|c| c.parse::<f64>().is_ok()) {
            return Err(at(
                file,
                header_line,
                format!(
                    "expected a header line naming the columns ({expected}[,label]), found data"
                ),
            ));
        }
        let unknown: Vec<String> = columns
            .iter()
            .filter(|c| {
                !REQUIRED_COLUMNS.contains(&c.as_str()) && !OPTIONAL_COLUMNS.contains(&c.as_str())
            })
            .map(|c| format!("`{c}`"))
            .collect();
        let index = |name: &str| columns.iter().position(|c| c == name);
        let mut required = [0usize; 4];
        for (slot, name) in required.iter_mut().zip(REQUIRED_COLUMNS) {
            *slot = index(name).ok_or_else(|| {
                let found = if unknown.is_empty() {
                    String::new()
                } else {
                    format!("; found unknown {}", unknown.join(", "))
                };
                at(
                    file,
                    header_line,
                    format!("missing column `{name}` (required: {expected}{found})"),
                )
            })?;
        }
        if let Some(c) = unknown.first() {
            return Err(at(
                file,
                header_line,
                format!("unknown column {c} (columns: {expected},label)"),
            ));
        }
        if let Some(c) = (0..columns.len())
            .find(|&i| columns[..i].contains(&columns[i]))
            .map(|i| &columns[i])
        {
            return Err(at(file, header_line, format!("column `{c}` appears twice")));
        }
        let [batch_i, new_i, context_i, latency_i] = required;
        let label_i = index("label");

        let bound = datasheet_bound(key);
        let mut rows: Vec<Measurement> = Vec::new();
        for (line, n) in lines {
            let f = fields(line);
            if f.len() != columns.len() {
                return Err(at(
                    file,
                    n,
                    format!(
                        "expected {} fields ({}), found {}",
                        columns.len(),
                        columns.join(","),
                        f.len()
                    ),
                ));
            }
            let fail = |message: String| at(file, n, message);
            let row = Measurement {
                line: n,
                label: label_i.map(|i| f[i].clone()).filter(|l| !l.is_empty()),
                batch: count(&f[batch_i], "batch", 1).map_err(fail)?,
                new_tokens: count(&f[new_i], "new_tokens", 1).map_err(fail)?,
                context_tokens: count(&f[context_i], "context_tokens", 0).map_err(fail)?,
                latency_ms: latency(&f[latency_i]).map_err(fail)?,
            };
            let least_ms = bound.step_seconds(&row.shape()) * 1e3;
            if row.latency_ms < FASTEST_PLAUSIBLE * least_ms {
                return Err(fail(format!(
                    "column `latency_ms`: {} ms is faster than {} allows for this step ({least_ms:.3} ms at \
                     100% of its peak FLOP/s and memory bandwidth): check the unit (milliseconds), the \
                     configuration ({key}) and that no prefix-cache hit shortened the step",
                    row.latency_ms,
                    key.gpu.as_str()
                )));
            }
            let most_ms = SLOWEST_PLAUSIBLE * least_ms + SLOWEST_PLAUSIBLE_EXTRA_MS;
            if row.latency_ms > most_ms {
                return Err(fail(format!(
                    "column `latency_ms`: {} ms is slower than any {} step of this shape can plausibly be \
                     ({most_ms:.0} ms is {SLOWEST_PLAUSIBLE}× the datasheet's least time plus \
                     {SLOWEST_PLAUSIBLE_EXTRA_MS} ms): check the unit (milliseconds) and the configuration ({key})",
                    row.latency_ms,
                    key.gpu.as_str()
                )));
            }
            if let Some(prev) = rows.last() {
                check_sweep(prev, &row).map_err(fail)?;
            }
            if let Some(same) = rows.iter().find(|r| r.counts() == row.counts()) {
                return Err(fail(format!(
                    "the same step as line {} (batch {}, new_tokens {}, context_tokens {}): give each step \
                     once, e.g. the median of repeated runs",
                    same.line, row.batch, row.new_tokens, row.context_tokens
                )));
            }
            rows.push(row);
        }

        let prefill = rows.iter().filter(|r| r.is_prefill()).count();
        let decode = rows.len() - prefill;
        let too_few = if rows.len() < MIN_ROWS {
            Some(format!(
                "{} rows, at least {MIN_ROWS} needed to fit",
                rows.len()
            ))
        } else if prefill < MIN_PREFILL_ROWS {
            Some(format!(
                "{prefill} prefill rows (new_tokens > 1), at least {MIN_PREFILL_ROWS} needed, e.g. prompts of \
                 512, 2048 and 8192 tokens"
            ))
        } else if decode < MIN_DECODE_ROWS {
            Some(format!(
                "{decode} decode rows (new_tokens = 1), at least {MIN_DECODE_ROWS} needed, e.g. batches of 1, \
                 32 and 128"
            ))
        } else {
            None
        };
        if let Some(message) = too_few {
            return Err(CalibrationError {
                location: file.to_string(),
                message,
            });
        }
        Ok(Measurements {
            file: file.to_string(),
            key,
            rows,
        })
    }

    /// The file the rows were read from, as named.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The configuration the rows measure.
    pub fn key(&self) -> ProfileKey {
        self.key
    }

    /// The rows, in file order.
    pub fn rows(&self) -> &[Measurement] {
        &self.rows
    }

    /// Fits the configuration's efficiencies to every row and returns the profile, rounded as stored, with
    /// its prediction of each row. Deterministic.
    pub fn fit(&self) -> MeasuredFit {
        let key = self.key;
        let observations: Vec<Observation> = self
            .rows
            .iter()
            .map(|m| Observation {
                key,
                source: SOURCE,
                label: m.describe(),
                shape: m.shape(),
                measured_s: m.latency_ms / 1e3,
                role: Role::Fit,
            })
            .collect();
        let refs: Vec<&Observation> = observations.iter().collect();
        let allreduce = AllReduceTerms::for_key(key);
        let eff = round_efficiency(fit::fit(key, &refs, allreduce.terms(key)));
        let points: Vec<MeasuredPoint> = self
            .rows
            .iter()
            .map(|m| MeasuredPoint {
                row: m.clone(),
                predicted_ms: fit::predict(key, eff, &m.shape()) * 1e3,
            })
            .collect();
        let results: Vec<PointResult> = points
            .iter()
            .map(|p| PointResult {
                label: p.row.describe(),
                role: Role::Fit,
                measured_ms: p.row.latency_ms,
                predicted_ms: p.predicted_ms,
            })
            .collect();
        let description = format!(
            "Step times measured by the user: {} rows of {}, fitted by `fleetsim calibrate --measurements`; \
             all-reduce terms {}",
            self.rows.len(),
            self.file,
            allreduce.describe(key)
        );
        MeasuredFit {
            file: self.file.clone(),
            profile: Profile {
                gpu: key.gpu,
                model: key.model,
                tp: key.tp,
                precision: key.precision,
                source: self.file.clone(),
                description,
                efficiency: eff,
                fit: Some(stats(&results)),
            },
            allreduce,
            points,
        }
    }
}

/// Checks that `row` continues a sorted sweep from `prev`, the row above it: if they agree on two of
/// `batch`, `new_tokens`, `context_tokens`, the third must grow. Rows that agree on all three are left to the
/// duplicate check; rows that differ in two or three start a new sweep.
fn check_sweep(prev: &Measurement, row: &Measurement) -> Result<(), String> {
    const NAMES: [&str; 3] = ["batch", "new_tokens", "context_tokens"];
    let (a, b) = (prev.counts(), row.counts());
    let differing: Vec<usize> = (0..3).filter(|&i| a[i] != b[i]).collect();
    match differing[..] {
        [i] if b[i] < a[i] => {
            let shared: Vec<&str> = (0..3).filter(|&j| j != i).map(|j| NAMES[j]).collect();
            Err(format!(
                "column `{}`: {} after {} on line {}, with the same {} and {}: token counts must increase \
                 within a sweep (sort its rows)",
                NAMES[i], b[i], a[i], prev.line, shared[0], shared[1]
            ))
        }
        _ => Ok(()),
    }
}

/// Where a fitted profile's all-reduce terms (η_link, α) come from. One configuration's step times cannot
/// tell the all-reduce from the GEMMs it sits between (both grow with the batch's tokens), so they are held
/// fixed and the other eight parameters are fitted.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AllReduceTerms {
    /// TP 1: no all-reduce; the terms keep their defaults and are never used.
    NotUsed,
    /// Those of the built-in profile of the same GPU and TP degree (fitted to measured all-reduce latencies;
    /// every built-in profile of one GPU and TP holds the same ones). A reference profile is preferred, then
    /// one of the same model, then of the same precision.
    Builtin(ProfileKey),
    /// The GPU family's published defaults ([`Efficiency::for_gpu`]): no built-in profile has this GPU at
    /// this TP degree.
    Defaults,
}

impl AllReduceTerms {
    /// The source of the all-reduce terms for configuration `key`.
    pub fn for_key(key: ProfileKey) -> Self {
        if key.tp == 1 {
            return AllReduceTerms::NotUsed;
        }
        profile::builtin()
            .iter()
            .filter(|p| p.gpu == key.gpu && p.tp == key.tp)
            .min_by_key(|p| {
                (
                    p.source != REFERENCE_SOURCE,
                    p.model != key.model,
                    p.precision != key.precision,
                    p.key(),
                )
            })
            .map_or(AllReduceTerms::Defaults, |p| {
                AllReduceTerms::Builtin(p.key())
            })
    }

    /// (η_link, α in seconds) to hold fixed in the fit of `key`, or `None` at TP 1.
    pub fn terms(self, key: ProfileKey) -> Option<(f64, f64)> {
        let of = |e: Efficiency| (e.link, e.allreduce_latency_s);
        match self {
            AllReduceTerms::NotUsed => None,
            AllReduceTerms::Builtin(k) => profile::builtin()
                .iter()
                .find(|p| p.key() == k)
                .map(|p| of(p.efficiency)),
            AllReduceTerms::Defaults => Some(of(Efficiency::for_gpu(key.gpu))),
        }
    }

    /// In words, with the values, e.g. `η_link 0.6206, α 5.289 µs, from the built-in profile
    /// h100/llama-3.1-70b/tp4/bf16`.
    pub fn describe(self, key: ProfileKey) -> String {
        let values = |(link, latency): (f64, f64)| {
            format!("η_link {link}, α {} µs", super::round_sig(latency * 1e6))
        };
        match (self, self.terms(key)) {
            (AllReduceTerms::NotUsed, _) | (_, None) => "not used (TP 1)".to_string(),
            (AllReduceTerms::Builtin(k), Some(t)) => {
                format!("{}, held at the built-in profile {k}'s", values(t))
            }
            (AllReduceTerms::Defaults, Some(t)) => format!(
                "{}, held at {}'s published defaults (no built-in profile of {} at TP {})",
                values(t),
                key.gpu.as_str(),
                key.gpu.as_str(),
                key.tp
            ),
        }
    }
}

/// One row and what the fitted profile predicts for it.
#[derive(Clone, Debug)]
pub struct MeasuredPoint {
    pub row: Measurement,
    pub predicted_ms: f64,
}

impl MeasuredPoint {
    /// Relative error, predicted / measured − 1.
    pub fn error(&self) -> f64 {
        self.predicted_ms / self.row.latency_ms - 1.0
    }
}

/// A profile fitted to a user's measurements, and how it does on each row.
#[derive(Clone, Debug)]
pub struct MeasuredFit {
    /// The measurements file, as named.
    pub file: String,
    pub profile: Profile,
    pub allreduce: AllReduceTerms,
    /// Every row, in file order.
    pub points: Vec<MeasuredPoint>,
}

impl MeasuredFit {
    /// Median and largest |relative error| over the rows.
    pub fn errors(&self) -> (f64, f64) {
        let e: Vec<f64> = self.points.iter().map(|p| p.error().abs()).collect();
        median_and_max(&e)
    }

    /// Refuses a fit whose median |error| exceeds [`MAX_MEDIAN_FIT_ERROR`], naming the rows it misses most
    /// (the file's lines), since a profile that cannot reproduce its own measurements would mislead every
    /// run that names it.
    pub fn check(&self) -> Result<(), CalibrationError> {
        let (median, _) = self.errors();
        if median <= MAX_MEDIAN_FIT_ERROR {
            return Ok(());
        }
        let mut worst: Vec<&MeasuredPoint> = self.points.iter().collect();
        worst.sort_by(|a, b| b.error().abs().total_cmp(&a.error().abs()));
        let lines: Vec<String> = worst
            .iter()
            .take(3)
            .map(|p| {
                format!(
                    "line {} ({} ms measured, {:.3} ms fitted)",
                    p.row.line, p.row.latency_ms, p.predicted_ms
                )
            })
            .collect();
        Err(CalibrationError {
            location: self.file.clone(),
            message: format!(
                "the fit misses its own rows by a median of {:.0}% (at most {:.0}% is accepted), so no \
                 profile was written; the rows it misses most: {}",
                median * 100.0,
                MAX_MEDIAN_FIT_ERROR * 100.0,
                lines.join(", ")
            ),
        })
    }

    /// The profile file: a header naming its origin, then the profile in the layout of `profiles/*.toml`.
    pub fn profile_file(&self) -> String {
        format!(
            "# {} — fitted by `fleetsim calibrate --measurements` to {} ({} steps); re-run it to refit.\n\
             # Fit errors are relative (|predicted / measured − 1|) over those steps; see docs/calibration-format.md.\n{}",
            self.profile.key(),
            self.file,
            self.points.len(),
            self.profile.to_toml()
        )
    }

    /// The per-point table: line, step, measured and predicted ms and the error of every row, then the
    /// median and largest |error|. Deterministic.
    pub fn table(&self) -> String {
        let mut o = String::new();
        let key = self.profile.key();
        let _ = writeln!(
            o,
            "{key}: fitted to {} steps of {}",
            self.points.len(),
            self.file
        );
        let _ = writeln!(o, "all-reduce: {}", self.allreduce.describe(key));
        let steps: Vec<String> = self.points.iter().map(|p| p.row.describe()).collect();
        let width = steps.iter().map(|s| s.chars().count()).fold(4, usize::max);
        let _ = writeln!(
            o,
            "{:>6}  {:<width$}  {:>12}  {:>12}  {:>8}",
            "line", "step", "measured ms", "predicted ms", "error"
        );
        for (p, step) in self.points.iter().zip(&steps) {
            let _ = writeln!(
                o,
                "{:>6}  {step:<width$}  {:>12.3}  {:>12.3}  {:>+7.1}%",
                p.row.line,
                p.row.latency_ms,
                p.predicted_ms,
                p.error() * 100.0
            );
        }
        let (median, max) = self.errors();
        let worst = self
            .points
            .iter()
            .max_by(|a, b| a.error().abs().total_cmp(&b.error().abs()))
            .map_or(0, |p| p.row.line);
        let _ = writeln!(
            o,
            "{} steps: median |error| {:.1}%, max {:.1}% (line {worst})",
            self.points.len(),
            median * 100.0,
            max * 100.0
        );
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(batch: u64, new_tokens: u64, context_tokens: u64) -> Measurement {
        Measurement {
            line: 7,
            label: None,
            batch,
            new_tokens,
            context_tokens,
            latency_ms: 10.0,
        }
    }

    #[test]
    fn steps_are_described_by_their_shape_unless_labelled() {
        assert_eq!(row(32, 1, 4096).describe(), "decode batch 32, context 4096");
        assert_eq!(row(1, 2048, 0).describe(), "prefill 2048");
        assert_eq!(
            row(1, 512, 2048).describe(),
            "prefill 512 after 2048 cached"
        );
        assert_eq!(row(4, 512, 0).describe(), "prefill 4 × 512");
        assert_eq!(
            row(4, 512, 64).describe(),
            "prefill 4 × 512 after 64 cached"
        );
        let labelled = Measurement {
            label: Some("TTFT, idle".into()),
            ..row(1, 2048, 0)
        };
        assert_eq!(labelled.describe(), "TTFT, idle");
        assert!(row(1, 2, 0).is_prefill() && !row(8, 1, 0).is_prefill());
    }

    #[test]
    fn a_sweep_is_two_shared_counts_and_the_third_must_grow() {
        // Growing, or a new sweep (two counts change), or the same step (left to the duplicate check).
        assert!(check_sweep(&row(1, 512, 0), &row(1, 1024, 0)).is_ok());
        assert!(check_sweep(&row(8, 1, 4096), &row(32, 1, 1024)).is_ok());
        assert!(check_sweep(&row(8, 1, 1024), &row(8, 1, 1024)).is_ok());
        let e = check_sweep(&row(32, 1, 1024), &row(8, 1, 1024)).unwrap_err();
        assert_eq!(
            e,
            "column `batch`: 8 after 32 on line 7, with the same new_tokens and context_tokens: token \
             counts must increase within a sweep (sort its rows)"
        );
        assert!(
            check_sweep(&row(1, 1, 4096), &row(1, 1, 1024))
                .unwrap_err()
                .starts_with("column `context_tokens`")
        );
    }

    #[test]
    fn a_fit_that_misses_its_own_rows_is_refused() {
        let key = ProfileKey {
            gpu: crate::hardware::GpuId::H100,
            model: crate::hardware::ModelId::Llama31_8b,
            tp: 1,
            precision: crate::hardware::Precision::Bf16,
        };
        let csv = include_bytes!("../../data/calibration/example/h100-llama-3.1-8b.csv");
        let mut fit = Measurements::parse(csv, "example.csv", key).unwrap().fit();
        // docs/validation.md: the example fits with a median error of 2.8%.
        assert!(fit.check().is_ok());
        // Predictions twice the measurements are 100% off on every row, past the 25% accepted.
        for p in &mut fit.points {
            p.predicted_ms = 2.0 * p.row.latency_ms;
        }
        let e = fit.check().unwrap_err().to_string();
        assert!(
            e.contains("median of 100%") && e.contains("no profile was written"),
            "{e}"
        );
        assert!(e.contains("line "), "{e}");
    }

    #[test]
    fn counts_and_latencies_say_what_is_wrong() {
        assert_eq!(count("12", "batch", 1), Ok(12));
        assert_eq!(count("0", "context_tokens", 0), Ok(0));
        assert!(
            count("0", "batch", 1)
                .unwrap_err()
                .contains("at least 1, got 0")
        );
        assert!(
            count("-3", "batch", 1)
                .unwrap_err()
                .contains("at least 1, got -3")
        );
        assert!(
            count("2.5", "batch", 1)
                .unwrap_err()
                .contains("whole number")
        );
        assert!(count("", "batch", 1).unwrap_err().contains("missing value"));
        // Found by the fuzzer: a batch of 2^32 built its step shape sequence by sequence for minutes.
        assert!(
            count("4294967296", "batch", 1)
                .unwrap_err()
                .contains("at most 65536")
        );
        assert_eq!(count("65536", "batch", 1), Ok(65_536));
        assert!(count("10000001", "context_tokens", 0).is_err());
        assert_eq!(latency("6.5"), Ok(6.5));
        for bad in ["0", "-1", "inf", "NaN", "6,5", ""] {
            assert!(latency(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_datasheet_bound_is_below_every_fitted_profile() {
        // The plausibility check must never reject what a valid profile could produce.
        for p in profile::builtin() {
            let bound = datasheet_bound(p.key());
            let perf = PerfModel::new(p.gpu, p.model, p.tp, p.precision, p.efficiency);
            for (b, n, c) in [(1, 128, 0), (1, 16384, 0), (1, 1, 1024), (256, 1, 4096)] {
                let s = super::super::data::uniform_batch(b, n, c);
                assert!(
                    bound.step_seconds(&s) < perf.step_seconds(&s),
                    "{}",
                    p.key()
                );
            }
        }
    }
}
