//! Calibrated step-time profiles: the [`Efficiency`] fitted to measurements of one GPU × model × TP ×
//! precision, and how a configuration without one borrows the nearest.
//!
//! A profile is a small TOML file (`profiles/*.toml`, written by `fleetsim calibrate`): the configuration it
//! describes, the data it was fitted to, the fitted efficiencies and the fit's error. The files in
//! `profiles/` are compiled into the binary; a scenario's worker group can name another file with
//! `profile = "path"`.
//!
//! Where no profile matches a configuration exactly, [`resolve`] takes the nearest built-in one (same model
//! first, then the nearest TP degree, then the GPU whose datasheet is closest, then the same precision) and
//! applies its efficiencies, which are fractions of peak, to this configuration's peaks: *spec scaling*.
//! A BF16 configuration never borrows an FP8 profile (whose efficiencies are fractions of the FP8 peak and
//! of a one-byte KV cache's traffic); an FP8 one borrowing a BF16 profile has its GEMM efficiencies scaled
//! by the measured FP8-to-BF16 factors (`super::fp8`).
//! Such a worker is flagged uncalibrated in every output.

use std::fmt;
use std::path::Path;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::gpu::GpuId;
use super::model::ModelId;
use super::perf::{Efficiency, Precision};
use crate::config::toml_error_parts;

/// The data set whose profiles may stand in for other models: step times of current vLLM kernels. Profiles
/// fitted to other data (an older serving stack) stand in only for their own model.
pub const REFERENCE_SOURCE: &str = "aiconfigurator+vidur";

/// A configuration a profile describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProfileKey {
    pub gpu: GpuId,
    pub model: ModelId,
    pub tp: u32,
    pub precision: Precision,
}

impl ProfileKey {
    /// File name (without `.toml`) of this configuration's profile: `h100_llama-3.1-8b_tp1_bf16`.
    pub fn file_stem(&self) -> String {
        format!(
            "{}_{}_tp{}_{}",
            self.gpu.as_str(),
            self.model.as_str(),
            self.tp,
            self.precision.as_str()
        )
    }
}

impl fmt::Display for ProfileKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}/tp{}/{}",
            self.gpu.as_str(),
            self.model.as_str(),
            self.tp,
            self.precision.as_str()
        )
    }
}

/// A fitted profile, as stored in a profile file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub gpu: GpuId,
    pub model: ModelId,
    pub tp: u32,
    pub precision: Precision,
    /// Id of the data the profile was fitted to (e.g. [`REFERENCE_SOURCE`]).
    pub source: String,
    /// The measurements and the software stack they come from, in words.
    #[serde(default)]
    pub description: String,
    pub efficiency: Efficiency,
    /// How well the fit reproduces its data (absent in hand-written profiles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit: Option<FitStats>,
}

/// The error of a profile's fit, as relative errors |predicted / measured − 1|.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FitStats {
    /// Points the efficiencies were fitted to.
    pub points: u32,
    pub median_error: f64,
    pub max_error: f64,
    /// Points kept out of the fit and predicted.
    pub held_out_points: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_out_median_error: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_out_max_error: Option<f64>,
}

/// A profile file that could not be used: where, and what is wrong.
#[derive(Debug, Error)]
#[error("{location}: {message}")]
pub struct ProfileError {
    /// `file:line:column`, `file:line`, or `file`.
    pub location: String,
    pub message: String,
}

impl Profile {
    /// The configuration this profile describes.
    pub fn key(&self) -> ProfileKey {
        ProfileKey {
            gpu: self.gpu,
            model: self.model,
            tp: self.tp,
            precision: self.precision,
        }
    }

    /// Reads and checks a profile file.
    pub fn load(path: &Path) -> Result<Profile, ProfileError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ProfileError {
            location: file.clone(),
            message: format!("cannot read profile: {e}"),
        })?;
        Self::parse(&text, &file)
    }

    /// Parses and checks profile text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Profile, ProfileError> {
        let profile: Profile = toml::from_str(text).map_err(|e| {
            let (location, message) = toml_error_parts(text, file, &e);
            ProfileError { location, message }
        })?;
        let check = if !profile.tp.is_power_of_two() || profile.tp > 8 {
            Err(("tp", format!("must be 1, 2, 4 or 8, got {}", profile.tp)))
        } else {
            profile.efficiency.validate()
        };
        check.map_err(|(key, message)| ProfileError {
            location: match line_of_key(text, key) {
                Some(line) => format!("{file}:{line}"),
                None => file.to_string(),
            },
            message: format!("`{key}`: {message}"),
        })?;
        Ok(profile)
    }

    /// The profile as TOML, in the layout `fleetsim calibrate` writes.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a profile serialises")
    }
}

/// 1-based line of the first `key = ...` in `text`.
fn line_of_key(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            l.trim_start()
                .strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map(|i| i + 1)
}

/// The profiles in `profiles/`, compiled in. `calibrate` regenerates them; a test checks that these are what
/// it writes.
const BUILTIN: &[(&str, &str)] = &[
    (
        "a100_llama-2-70b_tp2_bf16",
        include_str!("../../profiles/a100_llama-2-70b_tp2_bf16.toml"),
    ),
    (
        "a100_llama-2-70b_tp4_bf16",
        include_str!("../../profiles/a100_llama-2-70b_tp4_bf16.toml"),
    ),
    (
        "a100_llama-2-70b_tp8_bf16",
        include_str!("../../profiles/a100_llama-2-70b_tp8_bf16.toml"),
    ),
    (
        "a100_llama-3.1-70b_tp4_bf16",
        include_str!("../../profiles/a100_llama-3.1-70b_tp4_bf16.toml"),
    ),
    (
        "a100_llama-3.1-70b_tp8_bf16",
        include_str!("../../profiles/a100_llama-3.1-70b_tp8_bf16.toml"),
    ),
    (
        "a100_llama-3.1-8b_tp1_bf16",
        include_str!("../../profiles/a100_llama-3.1-8b_tp1_bf16.toml"),
    ),
    (
        "h100_llama-2-70b_tp2_bf16",
        include_str!("../../profiles/h100_llama-2-70b_tp2_bf16.toml"),
    ),
    (
        "h100_llama-2-70b_tp4_bf16",
        include_str!("../../profiles/h100_llama-2-70b_tp4_bf16.toml"),
    ),
    (
        "h100_llama-2-70b_tp8_bf16",
        include_str!("../../profiles/h100_llama-2-70b_tp8_bf16.toml"),
    ),
    (
        "h100_llama-3.1-70b_tp2_bf16",
        include_str!("../../profiles/h100_llama-3.1-70b_tp2_bf16.toml"),
    ),
    (
        "h100_llama-3.1-70b_tp2_fp8",
        include_str!("../../profiles/h100_llama-3.1-70b_tp2_fp8.toml"),
    ),
    (
        "h100_llama-3.1-70b_tp4_bf16",
        include_str!("../../profiles/h100_llama-3.1-70b_tp4_bf16.toml"),
    ),
    (
        "h100_llama-3.1-70b_tp4_fp8",
        include_str!("../../profiles/h100_llama-3.1-70b_tp4_fp8.toml"),
    ),
    (
        "h100_llama-3.1-70b_tp8_bf16",
        include_str!("../../profiles/h100_llama-3.1-70b_tp8_bf16.toml"),
    ),
    (
        "h100_llama-3.1-70b_tp8_fp8",
        include_str!("../../profiles/h100_llama-3.1-70b_tp8_fp8.toml"),
    ),
    (
        "h100_llama-3.1-8b_tp1_bf16",
        include_str!("../../profiles/h100_llama-3.1-8b_tp1_bf16.toml"),
    ),
    (
        "h100_llama-3.1-8b_tp1_fp8",
        include_str!("../../profiles/h100_llama-3.1-8b_tp1_fp8.toml"),
    ),
    (
        "h100_llama-3.1-8b_tp2_fp8",
        include_str!("../../profiles/h100_llama-3.1-8b_tp2_fp8.toml"),
    ),
    (
        "h100_llama-3.1-8b_tp4_fp8",
        include_str!("../../profiles/h100_llama-3.1-8b_tp4_fp8.toml"),
    ),
    (
        "h100_llama-3.1-8b_tp8_fp8",
        include_str!("../../profiles/h100_llama-3.1-8b_tp8_fp8.toml"),
    ),
    (
        "h200_llama-3.1-70b_tp1_fp8",
        include_str!("../../profiles/h200_llama-3.1-70b_tp1_fp8.toml"),
    ),
    (
        "h200_llama-3.1-70b_tp2_bf16",
        include_str!("../../profiles/h200_llama-3.1-70b_tp2_bf16.toml"),
    ),
    (
        "h200_llama-3.1-70b_tp2_fp8",
        include_str!("../../profiles/h200_llama-3.1-70b_tp2_fp8.toml"),
    ),
    (
        "h200_llama-3.1-70b_tp4_bf16",
        include_str!("../../profiles/h200_llama-3.1-70b_tp4_bf16.toml"),
    ),
    (
        "h200_llama-3.1-70b_tp4_fp8",
        include_str!("../../profiles/h200_llama-3.1-70b_tp4_fp8.toml"),
    ),
    (
        "h200_llama-3.1-70b_tp8_bf16",
        include_str!("../../profiles/h200_llama-3.1-70b_tp8_bf16.toml"),
    ),
    (
        "h200_llama-3.1-70b_tp8_fp8",
        include_str!("../../profiles/h200_llama-3.1-70b_tp8_fp8.toml"),
    ),
    (
        "h200_llama-3.1-8b_tp1_bf16",
        include_str!("../../profiles/h200_llama-3.1-8b_tp1_bf16.toml"),
    ),
    (
        "h200_llama-3.1-8b_tp1_fp8",
        include_str!("../../profiles/h200_llama-3.1-8b_tp1_fp8.toml"),
    ),
    (
        "h200_llama-3.1-8b_tp2_fp8",
        include_str!("../../profiles/h200_llama-3.1-8b_tp2_fp8.toml"),
    ),
    (
        "h200_llama-3.1-8b_tp4_fp8",
        include_str!("../../profiles/h200_llama-3.1-8b_tp4_fp8.toml"),
    ),
    (
        "h200_llama-3.1-8b_tp8_fp8",
        include_str!("../../profiles/h200_llama-3.1-8b_tp8_fp8.toml"),
    ),
];

/// The built-in profiles, parsed once.
pub fn builtin() -> &'static [Profile] {
    static PROFILES: OnceLock<Vec<Profile>> = OnceLock::new();
    PROFILES.get_or_init(|| {
        BUILTIN
            .iter()
            .map(|(name, text)| {
                Profile::parse(text, &format!("profiles/{name}.toml"))
                    .unwrap_or_else(|e| panic!("built-in profile is invalid: {e}"))
            })
            .collect()
    })
}

/// Where a worker's efficiencies come from, as reported per worker in the outputs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provenance {
    /// The profile used: a configuration (`h100/llama-3.1-8b/tp1/bf16`), `spec-scaled from …`, a file path,
    /// or `published defaults`.
    pub profile: String,
    /// Whether the efficiencies were fitted to measurements of this very configuration.
    pub calibrated: bool,
}

impl Provenance {
    /// The published defaults of [`Efficiency::for_gpu`].
    pub fn defaults() -> Self {
        Provenance {
            profile: "published defaults".into(),
            calibrated: false,
        }
    }
}

/// The efficiencies for `key` from the built-in profiles, and where they come from.
pub fn resolve(key: ProfileKey) -> (Efficiency, Provenance) {
    resolve_among(builtin(), key)
}

/// [`resolve`] over an explicit set of profiles.
pub fn resolve_among(profiles: &[Profile], key: ProfileKey) -> (Efficiency, Provenance) {
    if let Some(p) = profiles.iter().find(|p| p.key() == key) {
        let prov = Provenance {
            profile: key.to_string(),
            calibrated: true,
        };
        return (p.efficiency, prov);
    }
    let nearest = profiles
        .iter()
        .filter(|p| p.model == key.model || p.source == REFERENCE_SOURCE)
        .filter(|p| !(p.precision == Precision::Fp8 && key.precision == Precision::Bf16))
        .min_by(|a, b| {
            let (da, db) = (distance(a.key(), key), distance(b.key(), key));
            da.iter()
                .zip(&db)
                .map(|(x, y)| x.total_cmp(y))
                .find(|o| o.is_ne())
                .unwrap_or(std::cmp::Ordering::Equal)
        });
    match nearest {
        Some(p) => {
            let prov = Provenance {
                profile: format!("spec-scaled from {}", p.key()),
                calibrated: false,
            };
            let mut e = spec_scale(&p.efficiency, p.gpu, key.gpu);
            if p.precision == Precision::Bf16 && key.precision == Precision::Fp8 {
                // FP8 GEMMs reach a smaller share of their (doubled) peak than BF16 ones: measured factors.
                if let Some(f) = super::fp8::factors(key.gpu) {
                    e.compute_max *= f.compute;
                    e.memory *= f.memory;
                }
            }
            (e, prov)
        }
        None => (Efficiency::for_gpu(key.gpu), Provenance::defaults()),
    }
}

/// How far configuration `want` is from the fitted configuration whose efficiencies it uses, in words:
/// `exact` for a fitted one (or a profile file of its own configuration, `given`), else the nearest fitted
/// configuration and what differs (model, TP ratio, GPU datasheet distance, precision).
pub fn distance_words(want: ProfileKey, given: Option<ProfileKey>) -> String {
    let (_, prov) = resolve(want);
    let from = match given {
        Some(k) => k,
        None if prov.calibrated => return "exact".into(),
        None => match builtin()
            .iter()
            .find(|p| prov.profile == format!("spec-scaled from {}", p.key()))
        {
            Some(p) => p.key(),
            None => return "no fitted profile (published defaults)".into(),
        },
    };
    if from == want {
        return "exact".into();
    }
    let [model, tp, gpu, precision] = distance(from, want);
    let mut parts = Vec::new();
    if model > 0.0 {
        parts.push(format!(
            "model {} (|ln ratio of active parameters| {model:.2})",
            from.model.as_str()
        ));
    }
    if tp > 0.0 {
        parts.push(format!("TP {} (|log2 ratio| {tp:.0})", from.tp));
    }
    if gpu > 0.0 {
        parts.push(format!(
            "GPU {} (datasheet log-distance {gpu:.2})",
            from.gpu.as_str()
        ));
    }
    if precision > 0.0 {
        parts.push(format!("precision {}", from.precision.as_str()));
    }
    format!("from {from}: {}", parts.join(", "))
}

/// How far profile `p` is from configuration `want`, compared lexicographically: model (0 for the same one,
/// else the log-ratio of active parameters), TP (log2-ratio), GPU (log-ratios of BF16 peak and memory
/// bandwidth), precision (0 or 1).
fn distance(p: ProfileKey, want: ProfileKey) -> [f64; 4] {
    let active = |m: ModelId| {
        let s = m.spec();
        s.active_block_params() + 2.0 * s.embedding_params()
    };
    let model = if p.model == want.model {
        0.0
    } else {
        (active(p.model) / active(want.model)).ln().abs()
    };
    let tp = (f64::from(p.tp) / f64::from(want.tp)).log2().abs();
    let (a, b) = (p.gpu.spec(), want.gpu.spec());
    let gpu = (a.bf16_flops / b.bf16_flops).ln().abs() + (a.memory_bw / b.memory_bw).ln().abs();
    let precision = if p.precision == want.precision {
        0.0
    } else {
        1.0
    };
    [model, tp, gpu, precision]
}

/// Efficiencies fitted on GPU `from`, carried to GPU `to`: fractions of peak stay, except where the two GPU
/// families' published defaults differ (ROCm's GEMM and HBM efficiency, PCIe all-reduce latency), whose
/// ratio is applied.
fn spec_scale(e: &Efficiency, from: GpuId, to: GpuId) -> Efficiency {
    let (s, d) = (Efficiency::for_gpu(from), Efficiency::for_gpu(to));
    let frac = |v: f64, ds: f64, ss: f64| (v * ds / ss).min(1.0);
    Efficiency {
        compute_max: frac(e.compute_max, d.compute_max, s.compute_max),
        memory: frac(e.memory, d.memory, s.memory),
        kv_memory: frac(e.kv_memory, d.kv_memory, s.kv_memory),
        allreduce_latency_s: e.allreduce_latency_s * d.allreduce_latency_s / s.allreduce_latency_s,
        ..*e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(gpu: GpuId, model: ModelId, tp: u32, source: &str, compute_max: f64) -> Profile {
        Profile {
            gpu,
            model,
            tp,
            precision: Precision::Bf16,
            source: source.into(),
            description: String::new(),
            efficiency: Efficiency {
                compute_max,
                ..Efficiency::default()
            },
            fit: None,
        }
    }

    fn key(gpu: GpuId, model: ModelId, tp: u32, precision: Precision) -> ProfileKey {
        ProfileKey {
            gpu,
            model,
            tp,
            precision,
        }
    }

    fn set() -> Vec<Profile> {
        vec![
            profile(GpuId::A100, ModelId::Llama31_8b, 1, REFERENCE_SOURCE, 0.61),
            profile(GpuId::H100, ModelId::Llama31_8b, 1, REFERENCE_SOURCE, 0.62),
            profile(GpuId::H200, ModelId::Llama31_8b, 1, REFERENCE_SOURCE, 0.63),
            profile(GpuId::H100, ModelId::Llama31_70b, 4, REFERENCE_SOURCE, 0.64),
            profile(GpuId::H100, ModelId::Llama2_70b, 4, "splitwise", 0.30),
        ]
    }

    #[test]
    fn an_exact_match_is_calibrated() {
        let (e, p) = resolve_among(
            &set(),
            key(GpuId::H100, ModelId::Llama31_8b, 1, Precision::Bf16),
        );
        assert_eq!(e.compute_max, 0.62);
        assert_eq!(p.profile, "h100/llama-3.1-8b/tp1/bf16");
        assert!(p.calibrated);
    }

    #[test]
    fn the_nearest_gpu_by_datasheet_stands_in() {
        // B200's bandwidth and peak are closest to H200's.
        let (e, p) = resolve_among(
            &set(),
            key(GpuId::B200, ModelId::Llama31_8b, 1, Precision::Bf16),
        );
        assert_eq!(e.compute_max, 0.63);
        assert_eq!(p.profile, "spec-scaled from h200/llama-3.1-8b/tp1/bf16");
        assert!(!p.calibrated);
        // L40S: closest to A100.
        let (_, p) = resolve_among(
            &set(),
            key(GpuId::L40s, ModelId::Llama31_8b, 1, Precision::Bf16),
        );
        assert_eq!(p.profile, "spec-scaled from a100/llama-3.1-8b/tp1/bf16");
        // MI300X keeps ROCm's published derating relative to NVIDIA's.
        let (e, _) = resolve_among(
            &set(),
            key(GpuId::Mi300x, ModelId::Llama31_8b, 1, Precision::Bf16),
        );
        assert!((e.compute_max - 0.63 * 0.60 / 0.75).abs() < 1e-12);
    }

    #[test]
    fn same_model_beats_same_tp_and_other_stacks_serve_only_their_model() {
        let (_, p) = resolve_among(
            &set(),
            key(GpuId::H100, ModelId::Llama31_70b, 8, Precision::Bf16),
        );
        assert_eq!(p.profile, "spec-scaled from h100/llama-3.1-70b/tp4/bf16");
        // Qwen3-32B is nearer Llama-2-70B's size than Llama-3.1-8B's, but only reference profiles stand in.
        let (_, p) = resolve_among(
            &set(),
            key(GpuId::H100, ModelId::Qwen3_32b, 4, Precision::Bf16),
        );
        assert_eq!(p.profile, "spec-scaled from h100/llama-3.1-70b/tp4/bf16");
        let (_, p) = resolve_among(
            &set(),
            key(GpuId::A100, ModelId::Llama2_70b, 4, Precision::Bf16),
        );
        assert_eq!(p.profile, "spec-scaled from h100/llama-2-70b/tp4/bf16");
        // FP8 borrows the BF16 profile and says so.
        let (_, p) = resolve_among(
            &set(),
            key(GpuId::H100, ModelId::Llama31_8b, 1, Precision::Fp8),
        );
        assert_eq!(p.profile, "spec-scaled from h100/llama-3.1-8b/tp1/bf16");
        assert!(!p.calibrated);
    }

    #[test]
    fn fp8_prefers_an_fp8_profile_and_bf16_never_borrows_one() {
        let mut fp8 = profile(GpuId::H100, ModelId::Llama31_8b, 2, REFERENCE_SOURCE, 0.5);
        fp8.precision = Precision::Fp8;
        let mut profiles = set();
        profiles.push(fp8.clone());
        // BF16 at TP 2: the FP8 profile at TP 2 is nearer by TP, but its efficiencies are fractions of the
        // FP8 peak; the BF16 TP 1 profile stands in.
        let (e, p) = resolve_among(
            &profiles,
            key(GpuId::H100, ModelId::Llama31_8b, 2, Precision::Bf16),
        );
        assert_eq!(p.profile, "spec-scaled from h100/llama-3.1-8b/tp1/bf16");
        assert_eq!(e.compute_max, 0.62);
        // FP8 on H200 at TP 2: H100's FP8 profile (same TP) wins over H200's BF16 TP 1 one, and is used
        // without the FP8-to-BF16 factors (it already is FP8).
        let (e, p) = resolve_among(
            &profiles,
            key(GpuId::H200, ModelId::Llama31_8b, 2, Precision::Fp8),
        );
        assert_eq!(p.profile, "spec-scaled from h100/llama-3.1-8b/tp2/fp8");
        assert_eq!(e.compute_max, 0.5);
    }

    #[test]
    fn the_distance_from_a_fitted_configuration_is_said_in_words() {
        let k = |gpu, model, tp, precision| key(gpu, model, tp, precision);
        assert_eq!(
            distance_words(
                k(GpuId::H100, ModelId::Llama31_8b, 1, Precision::Bf16),
                None
            ),
            "exact"
        );
        // H100 70B TP 1 FP8 (no room for a KV cache on 80 GB, so not fitted) borrows the one fitted 70B
        // TP 1 FP8 profile, H200's: same BF16 peak, bandwidth 4.8 vs 3.35 TB/s, |ln(4.8/3.35)| = 0.36.
        let w = distance_words(
            k(GpuId::H100, ModelId::Llama31_70b, 1, Precision::Fp8),
            None,
        );
        assert_eq!(
            w,
            "from h200/llama-3.1-70b/tp1/fp8: GPU h200 (datasheet log-distance 0.36)"
        );
        // H200 70B TP 1 FP8 has a profile of its own.
        assert_eq!(
            distance_words(
                k(GpuId::H200, ModelId::Llama31_70b, 1, Precision::Fp8),
                None
            ),
            "exact"
        );
        // A profile file of the configuration itself is exact; of another, the difference is named.
        let own = k(GpuId::H100, ModelId::Llama31_8b, 1, Precision::Fp8);
        assert_eq!(distance_words(own, Some(own)), "exact");
        let w = distance_words(
            own,
            Some(k(GpuId::H100, ModelId::Llama31_8b, 1, Precision::Bf16)),
        );
        assert!(w.ends_with("precision bf16"), "{w}");
    }

    #[test]
    fn no_profile_at_all_means_published_defaults() {
        let (e, p) = resolve_among(
            &[],
            key(GpuId::H100, ModelId::Llama31_8b, 1, Precision::Bf16),
        );
        assert_eq!(e, Efficiency::for_gpu(GpuId::H100));
        assert_eq!(p, Provenance::defaults());
    }

    #[test]
    fn profile_files_round_trip_and_bad_values_name_line_and_key() {
        let p = profile(GpuId::H100, ModelId::Llama31_8b, 1, REFERENCE_SOURCE, 0.62);
        let text = p.to_toml();
        assert_eq!(Profile::parse(&text, "p.toml").unwrap(), p);

        let bad = text.replace("compute_max = 0.62", "compute_max = 1.5");
        let e = Profile::parse(&bad, "p.toml").unwrap_err().to_string();
        let line = bad
            .lines()
            .position(|l| l.starts_with("compute_max"))
            .unwrap()
            + 1;
        assert!(
            e.starts_with(&format!("p.toml:{line}: `compute_max`")),
            "{e}"
        );

        let e = Profile::parse(&text.replace("gpu = \"h100\"", "gpu = \"h900\""), "p.toml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("p.toml:1:") && e.contains("h900"), "{e}");

        let e = Profile::parse(&text.replace("tp = 1", "tp = 3"), "p.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`tp`: must be 1, 2, 4 or 8"), "{e}");
    }
}
