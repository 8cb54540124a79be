//! Calibration: fitting the step-time model's efficiencies to measured step times (`fleetsim calibrate`).
//!
//! ```text
//! data/calibration/*.csv ──data──► observations (configuration, step shape, measured s, fit | held out)
//!                         ──fit───► one Efficiency per GPU × model × TP × precision (Nelder–Mead, log error)
//!                         ──────► profiles/*.toml (compiled into the binary)   docs/calibration.md (report)
//! ```
//! The model fitted is [`crate::hardware::PerfModel`] itself: a profile is only its [`Efficiency`], so
//! the simulator and the calibration can never disagree on what a step costs. Every profile's error is
//! measured on the points it was fitted to and on points held out of its fit; the published Splitwise
//! points ([`data::PUBLISHED`]) are all held out. The output is deterministic: the same data give the same
//! bytes, which a test checks against the committed profiles and report.
//!
//! [`measurements`] is the same fit for a user's own step times of one configuration (`fleetsim calibrate
//! --measurements FILE.csv`, format in `docs/calibration-format.md`), written as a profile file that
//! scenarios and `fleetsim estimate --profile` can name.

pub mod catalogue_ids;
pub mod data;
pub mod external;
pub mod fit;
pub mod kv_logs;
pub mod measurements;
pub mod report;
pub mod serving;

use std::collections::BTreeMap;
use std::path::Path;

use thiserror::Error;

use crate::hardware::perf::allreduce_seconds;
use crate::hardware::profile::FitStats;
use crate::hardware::{Efficiency, GpuId, ModelId, Profile, ProfileKey};
use data::{AIC, Observation, Published, Role, SPLITWISE};

/// A data file that could not be used: where, and what is wrong.
#[derive(Debug, Error)]
#[error("{location}: {message}")]
pub struct CalibrationError {
    /// `file:line` or `file`.
    pub location: String,
    pub message: String,
}

/// One observation of a fitted profile, measured and predicted.
#[derive(Clone, Debug)]
pub struct PointResult {
    pub label: String,
    pub role: Role,
    pub measured_ms: f64,
    pub predicted_ms: f64,
}

impl PointResult {
    /// Relative error, predicted / measured − 1.
    pub fn error(&self) -> f64 {
        self.predicted_ms / self.measured_ms - 1.0
    }
}

/// A fitted profile and how it does on each of its points.
#[derive(Clone, Debug)]
pub struct FittedProfile {
    pub profile: Profile,
    pub points: Vec<PointResult>,
}

/// A published value, recomputed from the rows it summarises and predicted by its profile.
#[derive(Clone, Debug)]
pub struct PublishedResult {
    pub point: Published,
    /// The median of the rows it summarises, ms (equals the quoted value up to its rounding).
    pub recomputed_ms: f64,
    /// The median of the profile's predictions for the same rows, ms.
    pub predicted_ms: f64,
}

impl PublishedResult {
    /// Relative error of the prediction against the recomputed measurement.
    pub fn error(&self) -> f64 {
        self.predicted_ms / self.recomputed_ms - 1.0
    }
}

/// How a profile fitted to current vLLM kernels predicts the older stack's measurements of the same
/// architecture: the gap between software stacks, which is why the Splitwise profiles exist.
#[derive(Clone, Debug)]
pub struct CrossStack {
    /// The reference profile used (Llama-3.1-70B).
    pub reference: ProfileKey,
    /// The Splitwise configuration predicted (Llama-2-70B, same GPU and TP).
    pub target: ProfileKey,
    pub points: usize,
    /// Median of predicted / measured over the points.
    pub median_ratio: f64,
    pub median_error: f64,
    pub max_error: f64,
}

/// The all-reduce terms fitted for one GPU and TP degree, and their error over the message sizes.
#[derive(Clone, Debug)]
pub struct AllReduceFit {
    pub gpu: GpuId,
    pub tp: u32,
    pub link: f64,
    pub latency_s: f64,
    pub points: usize,
    pub median_error: f64,
    pub max_error: f64,
}

/// Everything `calibrate` produces.
#[derive(Clone, Debug)]
pub struct Calibration {
    /// All-reduce fits, fixed in every profile of that GPU and TP.
    pub allreduce: Vec<AllReduceFit>,
    pub profiles: Vec<FittedProfile>,
    pub published: Vec<PublishedResult>,
    pub cross_stack: Vec<CrossStack>,
    /// Splitwise rows left out as anomalous.
    pub excluded_rows: usize,
    /// Published end-to-end measurements outside the data, predicted by the simulator.
    pub external: Vec<external::ExternalResult>,
    /// vLLM's logged KV-cache capacities (`data/validation/`) against the simulator's.
    pub kv_logs: Vec<kv_logs::KvLogResult>,
    /// Published benchmark-harness runs (`data/validation/serving_runs.csv`), predicted with the harness.
    pub serving: Vec<serving::ServingResult>,
}

impl Calibration {
    /// Median and largest |error| over the published held-out points.
    pub fn published_errors(&self) -> (f64, f64) {
        let errors: Vec<f64> = self.published.iter().map(|p| p.error().abs()).collect();
        median_and_max(&errors)
    }

    /// Median and largest |error| over the published end-to-end measurements outside the data.
    pub fn external_errors(&self) -> (f64, f64) {
        let errors: Vec<f64> = self.external.iter().map(|p| p.error().abs()).collect();
        median_and_max(&errors)
    }
}

/// Acceptance targets on the published held-out points: median and largest relative error.
pub const TARGET_MEDIAN_ERROR: f64 = 0.15;
pub const TARGET_MAX_ERROR: f64 = 0.35;

/// Reads the data under `dir` (`data/calibration`) and fits every profile.
pub fn calibrate(dir: &Path) -> Result<Calibration, CalibrationError> {
    let allreduce = fit_allreduce(&data::allreduce(dir)?);
    let mut observations = data::aiconfigurator(dir)?;
    let sw = data::splitwise(dir)?;
    observations.extend(sw.observations.iter().cloned());

    let mut by_key: BTreeMap<ProfileKey, Vec<&Observation>> = BTreeMap::new();
    for o in &observations {
        by_key.entry(o.key).or_default().push(o);
    }
    let mut profiles = Vec::with_capacity(by_key.len());
    for (&key, points) in &by_key {
        let fit_points: Vec<&Observation> = points
            .iter()
            .copied()
            .filter(|o| o.role == Role::Fit)
            .collect();
        if fit_points.len() < 8 {
            return Err(CalibrationError {
                location: dir.display().to_string(),
                message: format!(
                    "{key}: {} points to fit, at least 8 needed",
                    fit_points.len()
                ),
            });
        }
        // Round what is stored, then measure the error of exactly what the simulator will use.
        let comm = allreduce
            .iter()
            .find(|a| a.gpu == key.gpu && a.tp == key.tp)
            .map(|a| (a.link, a.latency_s));
        let eff = round_efficiency(fit::fit(key, &fit_points, comm));
        let results: Vec<PointResult> = points
            .iter()
            .map(|o| PointResult {
                label: o.label.clone(),
                role: o.role,
                measured_ms: o.measured_s * 1e3,
                predicted_ms: fit::predict(key, eff, &o.shape) * 1e3,
            })
            .collect();
        let source = points[0].source;
        profiles.push(FittedProfile {
            profile: Profile {
                gpu: key.gpu,
                model: key.model,
                tp: key.tp,
                precision: key.precision,
                source: source.to_string(),
                description: describe(source, key.gpu),
                efficiency: eff,
                fit: Some(stats(&results)),
            },
            points: results,
        });
    }

    let find = |key: ProfileKey| profiles.iter().find(|p| p.profile.key() == key);
    let published = sw
        .published
        .iter()
        .map(|p| {
            let predicted: Vec<f64> = p
                .rows
                .iter()
                .map(|(key, shape)| {
                    let fitted = find(*key).expect("every Splitwise configuration is fitted");
                    fit::predict(*key, fitted.profile.efficiency, shape) * 1e3
                })
                .collect();
            PublishedResult {
                point: p.point,
                recomputed_ms: p.median_ms,
                predicted_ms: data::median(&predicted),
            }
        })
        .collect();

    let cross_stack = profiles
        .iter()
        .filter(|p| p.profile.source == SPLITWISE)
        .filter_map(|p| {
            let target = p.profile.key();
            let reference = ProfileKey {
                model: ModelId::Llama31_70b,
                ..target
            };
            let eff = find(reference)?.profile.efficiency;
            let ratios: Vec<f64> = observations
                .iter()
                .filter(|o| o.key == target)
                .map(|o| fit::predict(target, eff, &o.shape) / o.measured_s)
                .collect();
            let errors: Vec<f64> = ratios.iter().map(|r| (r - 1.0).abs()).collect();
            let (median_error, max_error) = median_and_max(&errors);
            Some(CrossStack {
                reference,
                target,
                points: ratios.len(),
                median_ratio: data::median(&ratios),
                median_error,
                max_error,
            })
        })
        .collect();

    let external = external::predict_all()?;
    let serving = serving::predict_all()?;
    let kv_logs = kv_logs::compare(&kv_logs::points()?).map_err(|message| CalibrationError {
        location: kv_logs::FILE.into(),
        message,
    })?;
    Ok(Calibration {
        allreduce,
        profiles,
        published,
        cross_stack,
        excluded_rows: sw.excluded_rows,
        external,
        kv_logs,
        serving,
    })
}

/// Link efficiency and latency per GPU and TP degree, rounded as profiles store them.
fn fit_allreduce(points: &[data::AllReduce]) -> Vec<AllReduceFit> {
    let mut groups: BTreeMap<(GpuId, u32), Vec<&data::AllReduce>> = BTreeMap::new();
    for p in points {
        groups.entry((p.gpu, p.tp)).or_default().push(p);
    }
    groups
        .into_iter()
        .map(|((gpu, tp), pts)| {
            let (link, latency) = fit::fit_allreduce(gpu, tp, &pts);
            let (link, latency_s) = (round_sig(link), round_sig(latency));
            let e = Efficiency {
                link,
                allreduce_latency_s: latency_s,
                ..Efficiency::default()
            };
            let errors: Vec<f64> = pts
                .iter()
                .map(|p| (allreduce_seconds(gpu, tp, p.bytes, &e) / p.seconds - 1.0).abs())
                .collect();
            let (median_error, max_error) = median_and_max(&errors);
            AllReduceFit {
                gpu,
                tp,
                link,
                latency_s,
                points: pts.len(),
                median_error,
                max_error,
            }
        })
        .collect()
}

/// Median and largest absolute relative error of fitted and held-out points.
fn stats(results: &[PointResult]) -> FitStats {
    let errors = |role: Role| -> Vec<f64> {
        results
            .iter()
            .filter(|r| r.role == role)
            .map(|r| r.error().abs())
            .collect()
    };
    let (fitted, held) = (errors(Role::Fit), errors(Role::HeldOut));
    let (median, max) = median_and_max(&fitted);
    let held_out = (!held.is_empty()).then(|| median_and_max(&held));
    FitStats {
        points: fitted.len() as u32,
        median_error: round_sig(median),
        max_error: round_sig(max),
        held_out_points: held.len() as u32,
        held_out_median_error: held_out.map(|(m, _)| round_sig(m)),
        held_out_max_error: held_out.map(|(_, m)| round_sig(m)),
    }
}

/// Median and largest of `errors` (NaN and 0 when empty).
pub fn median_and_max(errors: &[f64]) -> (f64, f64) {
    (
        data::median(errors),
        errors.iter().copied().fold(0.0, f64::max),
    )
}

/// `x` to four significant digits: profiles store what matters, and stable text.
pub fn round_sig(x: f64) -> f64 {
    format!("{x:.3e}")
        .parse()
        .expect("a formatted float parses")
}

fn round_efficiency(e: Efficiency) -> Efficiency {
    Efficiency {
        compute_max: round_sig(e.compute_max),
        compute_half_tokens: round_sig(e.compute_half_tokens),
        memory: round_sig(e.memory),
        attention: round_sig(e.attention),
        kv_memory: round_sig(e.kv_memory),
        link: round_sig(e.link),
        allreduce_latency_s: round_sig(e.allreduce_latency_s),
        step_overhead_s: round_sig(e.step_overhead_s),
        seq_overhead_s: round_sig(e.seq_overhead_s),
        prefill_seq_overhead_s: round_sig(e.prefill_seq_overhead_s),
    }
}

/// The profile's `description`: which measurements, from which software.
fn describe(source: &str, gpu: GpuId) -> String {
    match source {
        AIC => {
            let vllm = if gpu == GpuId::A100 {
                "0.14.0"
            } else {
                "0.24.0"
            };
            format!(
                "Step times composed from NVIDIA AIConfigurator's kernel measurements (vLLM {vllm}: GEMMs, \
                 FlashAttention, custom all-reduce) plus Vidur's measured element-wise ops; host-side \
                 engine overhead not included"
            )
        }
        _ => {
            "Whole prompt and token steps measured on DGX machines for Splitwise (ISCA'24): a 2023 \
              serving stack"
                .to_string()
        }
    }
}

/// A profile file as `calibrate` writes it: a header naming its origin, then the profile.
pub fn profile_file(p: &Profile) -> String {
    format!(
        "# {} — generated by `fleetsim calibrate` from data/calibration; do not edit, re-run it.\n\
         # Fit and held-out errors are relative (|predicted / measured − 1|); see docs/calibration.md.\n{}",
        p.key(),
        p.to_toml()
    )
}
