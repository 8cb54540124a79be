//! The calibration data sets, read into step-time observations.
//!
//! Each observation is one engine step of known shape and measured duration, for one configuration. Two
//! sources, each fitted to its own profiles:
//! - **AIConfigurator + Vidur** (current vLLM kernels): AIConfigurator's kernel-composed Llama-3 step times
//!   (GEMMs, attention, all-reduce) plus the element-wise ops Vidur measured (norms, RoPE, SiLU·mul,
//!   residual add, embedding), which the composition leaves out.
//! - **Splitwise** (a 2023 serving stack): whole prompt and token steps of Llama-2-70B measured on DGX-A100
//!   and DGX-H100, the median of each configuration's repeated runs.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::CalibrationError;
use crate::hardware::{GpuId, ModelId, Precision, ProfileKey, StepShape};

/// Id of the AIConfigurator + Vidur data set (the reference for models without their own profile).
pub const AIC: &str = crate::hardware::profile::REFERENCE_SOURCE;
/// Id of the Splitwise data set.
pub const SPLITWISE: &str = "splitwise";

/// Whether an observation is fitted or only predicted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Fit,
    HeldOut,
}

/// One measured step.
#[derive(Clone, Debug)]
pub struct Observation {
    pub key: ProfileKey,
    /// Data set id ([`AIC`] or [`SPLITWISE`]).
    pub source: &'static str,
    /// What was measured, e.g. `prefill 2048` or `decode batch 32, context 4096`.
    pub label: String,
    pub shape: StepShape,
    pub measured_s: f64,
    pub role: Role,
}

/// A batch of `batch` sequences, each computing `new` tokens on top of `context` cached ones.
pub fn uniform_batch(batch: u64, new: u64, context: u64) -> StepShape {
    let mut s = StepShape::default();
    for _ in 0..batch {
        s.add(new, context);
    }
    s
}

fn bf16(gpu: GpuId, model: ModelId, tp: u32) -> ProfileKey {
    ProfileKey {
        gpu,
        model,
        tp,
        precision: Precision::Bf16,
    }
}

/// Reads a CSV file into (line, row) pairs; errors name the file, line and column.
fn read_csv<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<(u64, T)>, CalibrationError> {
    let file = path.display().to_string();
    let fail = |line: Option<u64>, message: String| CalibrationError {
        location: match line {
            Some(l) => format!("{file}:{l}"),
            None => file.clone(),
        },
        message,
    };
    let mut reader =
        csv::Reader::from_path(path).map_err(|e| fail(None, format!("cannot read: {e}")))?;
    let headers = reader
        .headers()
        .map_err(|e| fail(Some(1), e.to_string()))?
        .clone();
    let mut rows = Vec::new();
    let mut record = csv::StringRecord::new();
    loop {
        match reader.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => return Err(fail(e.position().map(|p| p.record() + 1), e.to_string())),
        }
        // The header is record 0 on line 1, and no field of these files spans lines: record n is on line
        // n + 1. (The reader's own line count lags by one after the header on some inputs.)
        let line = record.position().map_or(0, |p| p.record() + 1);
        let row: T = record.deserialize(Some(&headers)).map_err(|e| {
            let message = match e.kind() {
                csv::ErrorKind::Deserialize { err, .. } => match err.field() {
                    Some(i) => format!(
                        "column `{}`: {}",
                        headers.get(i as usize).unwrap_or("?"),
                        err.kind()
                    ),
                    None => err.kind().to_string(),
                },
                _ => e.to_string(),
            };
            fail(Some(line), message)
        })?;
        rows.push((line, row));
    }
    Ok(rows)
}

// ---------------------------------------------------------------------------------------------------------
// AIConfigurator + Vidur

#[derive(Deserialize)]
struct AicRow {
    gpu: String,
    model: String,
    tp: u32,
    /// `bf16` or `fp8`; only in the FP8-and-TP-2 file (the shared BF16 file has no such column).
    precision: Option<String>,
    metric: String,
    point: String,
    value_ms: f64,
}

#[derive(Deserialize)]
struct VidurRow {
    gpu: String,
    model: String,
    n_head: u32,
    n_kv_head: u32,
    n_embd: u32,
    n_expanded_embd: u32,
    num_tensor_parallel_workers: u32,
    num_tokens: u64,
    emb_median_ms: f64,
    input_layernorm_median_ms: f64,
    attn_rope_median_ms: f64,
    post_attention_layernorm_median_ms: f64,
    mlp_act_median_ms: f64,
    add_median_ms: f64,
}

/// Prefill lengths and decode batch sizes of AIConfigurator's grid kept out of the fit, to measure how well
/// a profile predicts between the points it was fitted to.
const AIC_HELD_OUT_PREFILL: u64 = 4096;
const AIC_HELD_OUT_DECODE_BATCH: u64 = 64;

/// The Vidur profile whose element-wise ops stand in for `(gpu, model)`: the same GPU and shapes where Vidur
/// profiled them (A100, Llama-3), else H100's Llama-2 of the same width. H200 has H100's SMs and these
/// kernels are launch-bound at decode sizes, so H100's times are used unscaled (slightly pessimistic at
/// long prefills, where they are bandwidth-bound).
fn vidur_stand_in(gpu: GpuId, model: ModelId) -> Option<(&'static str, &'static str)> {
    match (gpu, model) {
        (GpuId::A100, ModelId::Llama31_8b) => Some(("a100", "Meta-Llama-3-8B")),
        (GpuId::A100, ModelId::Llama31_70b) => Some(("a100", "Meta-Llama-3-70B")),
        (GpuId::H100 | GpuId::H200, ModelId::Llama31_8b) => Some(("h100", "Llama-2-7b-hf")),
        (GpuId::H100 | GpuId::H200, ModelId::Llama31_70b) => Some(("h100", "Llama-2-70b-hf")),
        _ => None,
    }
}

/// Vidur's element-wise op times of one profiled model at one TP degree, by batch tokens.
struct Elementwise {
    /// (tokens, per-layer ms of the norms, RoPE, SiLU·mul and add scaled to the target model, embedding ms).
    points: Vec<(u64, f64, f64)>,
}

impl Elementwise {
    /// Milliseconds of one step's element-wise work over `layers` layers at `tokens` batch tokens: linear
    /// between profiled token counts, proportional to the tokens beyond the largest (where these ops are
    /// bandwidth-bound).
    fn step_ms(&self, tokens: u64, layers: u32) -> f64 {
        let at = |(layer, emb): (f64, f64)| f64::from(layers) * layer + emb;
        let pts = &self.points;
        let i = pts.partition_point(|p| p.0 < tokens);
        if i < pts.len() && pts[i].0 == tokens {
            return at((pts[i].1, pts[i].2));
        }
        if i == 0 {
            return at((pts[0].1, pts[0].2));
        }
        if i == pts.len() {
            let (t, l, e) = pts[i - 1];
            let f = tokens as f64 / t as f64;
            return at((l * f, e * f));
        }
        let (t0, l0, e0) = pts[i - 1];
        let (t1, l1, e1) = pts[i];
        let w = (tokens - t0) as f64 / (t1 - t0) as f64;
        at((l0 + w * (l1 - l0), e0 + w * (e1 - e0)))
    }
}

/// Reads Vidur's element-wise ops for `model` from rows of a stand-in profile, scaling each op by the bytes
/// it moves in the target model relative to the profiled one: norms, residual add and embedding by the
/// hidden width, RoPE by the query plus key heads, SiLU·mul by the MLP width.
fn elementwise(
    rows: &[(u64, VidurRow)],
    gpu: &str,
    name: &str,
    model: ModelId,
    tp: u32,
) -> Elementwise {
    let m = model.spec();
    let mut points: Vec<(u64, f64, f64)> = rows
        .iter()
        .map(|(_, r)| r)
        .filter(|r| r.gpu == gpu && r.model == name && r.num_tensor_parallel_workers == tp)
        .map(|r| {
            let width = f64::from(m.hidden) / f64::from(r.n_embd);
            let rope = f64::from(m.heads + m.kv_heads) / f64::from(r.n_head + r.n_kv_head);
            let act = f64::from(m.intermediate) / f64::from(r.n_expanded_embd);
            let layer = (r.input_layernorm_median_ms
                + r.post_attention_layernorm_median_ms
                + r.add_median_ms)
                * width
                + r.attn_rope_median_ms * rope
                + r.mlp_act_median_ms * act;
            (r.num_tokens, layer, r.emb_median_ms * width)
        })
        .collect();
    points.sort_by_key(|p| p.0);
    points.dedup_by_key(|p| p.0);
    Elementwise { points }
}

/// The shared BF16 step times (no `precision` column: every row is BF16).
const AIC_BF16_FILE: &str = "aiconfigurator/llama3_step_times_composed_from_kernel_db.derived.csv";
/// FP8 step times and the BF16 TP-2 ones, composed by the same recipe (`compose_step_times.py`); every row
/// names its precision.
const AIC_FP8_FILE: &str = "aiconfigurator/llama3_fp8_and_tp2_step_times_composed.derived.csv";

/// AIConfigurator's composed step times plus Vidur's element-wise ops, from both composed files.
pub fn aiconfigurator(dir: &Path) -> Result<Vec<Observation>, CalibrationError> {
    let vidur_path = dir.join("vidur/elementwise_ops.csv");
    let vidur: Vec<(u64, VidurRow)> = read_csv(&vidur_path)?;
    let mut out = Vec::new();
    let mut cache: BTreeMap<ProfileKey, Elementwise> = BTreeMap::new();
    for (name, names_precision) in [(AIC_BF16_FILE, false), (AIC_FP8_FILE, true)] {
        let aic_path = dir.join(name);
        let aic: Vec<(u64, AicRow)> = read_csv(&aic_path)?;
        let file = aic_path.display().to_string();
        compose_rows(
            &aic,
            &file,
            names_precision,
            &vidur,
            &vidur_path,
            &mut cache,
            &mut out,
        )?;
    }
    Ok(out)
}

/// Turns one composed file's rows into observations. `names_precision`: whether each row must carry a
/// `precision` (`bf16` or `fp8`); without one a row is BF16 (the shared file has no such column), and a
/// `precision` in a file that should not have one is an error.
fn compose_rows(
    aic: &[(u64, AicRow)],
    file: &str,
    names_precision: bool,
    vidur: &[(u64, VidurRow)],
    vidur_path: &Path,
    cache: &mut BTreeMap<ProfileKey, Elementwise>,
    out: &mut Vec<Observation>,
) -> Result<(), CalibrationError> {
    for (line, r) in aic {
        let err = |message: String| CalibrationError {
            location: format!("{file}:{line}"),
            message,
        };
        let gpu = match r.gpu.as_str() {
            "a100_sxm" => GpuId::A100,
            "h100_sxm" => GpuId::H100,
            "h200_sxm" => GpuId::H200,
            g => return Err(err(format!("`gpu`: unknown GPU {g:?}"))),
        };
        let model = match r.model.as_str() {
            "llama3-8b" => ModelId::Llama31_8b,
            "llama3-70b" => ModelId::Llama31_70b,
            m => return Err(err(format!("`model`: unknown model {m:?}"))),
        };
        let precision = match (names_precision, r.precision.as_deref()) {
            (false, None) => Precision::Bf16,
            (true, Some("bf16")) => Precision::Bf16,
            (true, Some("fp8")) => Precision::Fp8,
            (true, Some(p)) => return Err(err(format!("`precision`: unknown precision {p:?}"))),
            (true, None) => return Err(err("`precision`: missing (bf16 or fp8)".into())),
            (false, Some(_)) => {
                return Err(err("`precision`: this file holds BF16 rows only".into()));
            }
        };
        let key = ProfileKey {
            precision,
            ..bf16(gpu, model, r.tp)
        };
        let fields = parse_point(&r.point).map_err(|m| err(format!("`point`: {m}")))?;
        let get = |k: &str| {
            fields
                .iter()
                .find(|(name, _)| name == k)
                .map(|&(_, v)| v)
                .ok_or_else(|| err(format!("`point`: {:?} lacks {k}=", r.point)))
        };
        let (label, shape, held_out) = match r.metric.as_str() {
            "prefill_ms_batch1" => {
                let isl = get("isl")?;
                (
                    format!("prefill {isl}"),
                    uniform_batch(1, isl, 0),
                    isl == AIC_HELD_OUT_PREFILL,
                )
            }
            "decode_step_ms" => {
                let (batch, ctx) = (get("batch")?, get("ctx")?);
                (
                    format!("decode batch {batch}, context {ctx}"),
                    uniform_batch(batch, 1, ctx),
                    batch == AIC_HELD_OUT_DECODE_BATCH,
                )
            }
            m => return Err(err(format!("`metric`: unknown metric {m:?}"))),
        };
        let ew = match cache.get(&key) {
            Some(ew) => ew,
            None => {
                let (vgpu, vname) = vidur_stand_in(gpu, model)
                    .ok_or_else(|| err(format!("no Vidur stand-in for {key}")))?;
                let ew = elementwise(vidur, vgpu, vname, model, r.tp);
                if ew.points.is_empty() {
                    return Err(CalibrationError {
                        location: vidur_path.display().to_string(),
                        message: format!("no rows for {vgpu} {vname} at TP {}", r.tp),
                    });
                }
                cache.entry(key).or_insert(ew)
            }
        };
        let extra_ms = ew.step_ms(shape.tokens, model.spec().layers);
        out.push(Observation {
            key,
            source: AIC,
            label,
            shape,
            measured_s: (r.value_ms + extra_ms) / 1e3,
            role: if held_out { Role::HeldOut } else { Role::Fit },
        });
    }
    Ok(())
}

#[derive(Deserialize)]
struct AllReduceRow {
    allreduce_dtype: String,
    num_gpus: u32,
    message_size: u64,
    latency: f64,
    backend: String,
}

/// One measured all-reduce of `bytes` across `tp` GPUs.
#[derive(Clone, Copy, Debug)]
pub struct AllReduce {
    pub gpu: GpuId,
    pub tp: u32,
    pub bytes: f64,
    pub seconds: f64,
}

/// Message sizes (elements) of the all-reduces a step sends: one token's hidden state of a 4,096-wide model
/// up to 16,384 tokens of an 8,192-wide one.
const ALLREDUCE_ELEMENTS: std::ops::RangeInclusive<u64> = 4096..=134_217_728;

/// AIConfigurator's vLLM custom all-reduce latencies under CUDA graphs (how vLLM runs them), bf16, for the
/// message sizes a step sends.
pub fn allreduce(dir: &Path) -> Result<Vec<AllReduce>, CalibrationError> {
    let files = [
        (GpuId::A100, "a100_sxm_vllm0.14.0_custom_allreduce.csv"),
        (GpuId::H100, "h100_sxm_vllm0.24.0_custom_allreduce.csv"),
        (GpuId::H200, "h200_sxm_vllm0.24.0_custom_allreduce.csv"),
    ];
    let mut out = Vec::new();
    for (gpu, name) in files {
        let rows: Vec<(u64, AllReduceRow)> = read_csv(&dir.join("aiconfigurator").join(name))?;
        out.extend(
            rows.iter()
                .map(|(_, r)| r)
                .filter(|r| r.backend == "vllm_graph" && r.allreduce_dtype == "bfloat16")
                .filter(|r| ALLREDUCE_ELEMENTS.contains(&r.message_size))
                .map(|r| AllReduce {
                    gpu,
                    tp: r.num_gpus,
                    bytes: r.message_size as f64 * 2.0,
                    seconds: r.latency / 1e3,
                }),
        );
    }
    Ok(out)
}

/// `isl=128` or `batch=8,ctx=1024` as name–value pairs.
fn parse_point(point: &str) -> Result<Vec<(String, u64)>, String> {
    point
        .split(',')
        .map(|kv| {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("expected name=value, got {kv:?}"))?;
            let v = v
                .trim()
                .parse::<u64>()
                .map_err(|_| format!("expected a whole number in {kv:?}"))?;
            Ok((k.trim().to_string(), v))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------------------
// Splitwise

#[derive(Deserialize)]
struct SplitwiseRow {
    model: String,
    hardware: String,
    prompt_size: u64,
    batch_size: u64,
    token_size: u64,
    prompt_time: f64,
    token_time: f64,
    tensor_parallel: u32,
}

/// Which of Splitwise's two timings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// `prompt_time`: one step prefilling the whole static batch.
    Prompt,
    /// `token_time`: one decode step.
    Token,
}

/// A Splitwise configuration: (GPU, TP, phase, prompt size, batch size, token size).
type SplitwiseConfig = (GpuId, u32, Phase, u64, u64, u64);

/// A value quoted from the Splitwise measurements, with the rows it summarises: the median over every row of
/// that GPU, TP and phase with the given prompt and batch sizes, whatever the token size (at batch 1 the
/// grid repeats prompt 512 for every token size; a prompt's time does not depend on what follows it).
#[derive(Clone, Copy, Debug)]
pub struct Published {
    pub gpu: GpuId,
    pub tp: u32,
    pub phase: Phase,
    pub prompt: u64,
    pub batch: u64,
    /// The value as quoted, ms.
    pub quoted_ms: f64,
}

const fn published(
    gpu: GpuId,
    tp: u32,
    phase: Phase,
    prompt: u64,
    batch: u64,
    quoted_ms: f64,
) -> Published {
    Published {
        gpu,
        tp,
        phase,
        prompt,
        batch,
        quoted_ms,
    }
}

/// The published Splitwise points the calibration must predict without fitting them: Llama-2-70B prompt
/// times at batch 1 and token times at prompt 512 on H100 TP4, A100 TP4 and H100 TP8, as quoted in the
/// extract of the shared data notes (`splitwise-sim-perf/SOURCE.md`, "median over repeats"); a test checks
/// each against the median recomputed from `perf_model.csv`.
pub const PUBLISHED: &[Published] = {
    use GpuId::{A100, H100};
    use Phase::{Prompt, Token};
    &[
        published(H100, 4, Prompt, 128, 1, 49.0),
        published(H100, 4, Prompt, 512, 1, 60.0),
        published(H100, 4, Prompt, 1024, 1, 106.0),
        published(H100, 4, Prompt, 2048, 1, 201.0),
        published(H100, 4, Prompt, 4096, 1, 463.0),
        published(H100, 4, Prompt, 8192, 1, 954.0),
        published(H100, 4, Token, 512, 1, 29.4),
        published(H100, 4, Token, 512, 8, 31.4),
        published(H100, 4, Token, 512, 16, 32.8),
        published(H100, 4, Token, 512, 32, 36.9),
        published(H100, 4, Token, 512, 64, 52.4),
        published(A100, 4, Prompt, 512, 1, 127.0),
        published(A100, 4, Prompt, 2048, 1, 403.0),
        published(A100, 4, Prompt, 8192, 1, 2278.0),
        published(A100, 4, Token, 512, 1, 44.5),
        published(A100, 4, Token, 512, 64, 72.9),
        published(H100, 8, Prompt, 2048, 1, 137.0),
        published(H100, 8, Token, 512, 1, 30.6),
        published(H100, 8, Token, 512, 64, 50.2),
    ]
};

impl Published {
    /// Whether configuration `c` is one of the rows this value summarises.
    fn covers(&self, c: &SplitwiseConfig) -> bool {
        let &(gpu, tp, phase, prompt, batch, _) = c;
        gpu == self.gpu
            && tp == self.tp
            && phase == self.phase
            && prompt == self.prompt
            && batch == self.batch
    }

    /// E.g. `h100/tp4 prompt 2048, batch 1`.
    pub fn label(&self) -> String {
        let what = match self.phase {
            Phase::Prompt => format!("prompt time, {} tokens, batch {}", self.prompt, self.batch),
            Phase::Token => format!("token time, prompt {}, batch {}", self.prompt, self.batch),
        };
        format!("{} TP{}: {what}", self.gpu.as_str(), self.tp)
    }
}

/// A [`PUBLISHED`] value and the rows behind it.
pub struct PublishedRows {
    pub point: Published,
    /// The median recomputed from the rows, ms.
    pub median_ms: f64,
    /// The step of each row (one per row, so that a prediction is a median over the same rows).
    pub rows: Vec<(ProfileKey, StepShape)>,
}

/// Splitwise's measurements, one observation per configuration (the median of its runs), plus the raw rows
/// behind each [`PUBLISHED`] value (for recomputing it).
pub struct SplitwiseData {
    pub observations: Vec<Observation>,
    pub published: Vec<PublishedRows>,
    /// Rows left out as anomalous.
    pub excluded_rows: usize,
}

/// The step a Splitwise configuration times.
fn splitwise_shape(phase: Phase, prompt: u64, batch: u64, tokens: u64) -> StepShape {
    match phase {
        Phase::Prompt => uniform_batch(batch, prompt, 0),
        // The mean context over the decode steps that generate `tokens` tokens after the prompt.
        Phase::Token => uniform_batch(batch, 1, prompt + tokens / 2),
    }
}

/// Reads Splitwise's Llama-2-70B rows on A100 and H100 (the catalogue's configurations: not the
/// power-capped H100, not BLOOM); rows of batch 64 at TP 2 are left out as the data notes' anomaly.
pub fn splitwise(dir: &Path) -> Result<SplitwiseData, CalibrationError> {
    let path = dir.join("splitwise/perf_model.csv");
    let rows: Vec<(u64, SplitwiseRow)> = read_csv(&path)?;
    let mut by_config: BTreeMap<SplitwiseConfig, Vec<f64>> = BTreeMap::new();
    let mut excluded_rows = 0;
    for (_, r) in &rows {
        let gpu = match r.hardware.as_str() {
            "a100-80gb" => GpuId::A100,
            "h100-80gb" => GpuId::H100,
            _ => continue,
        };
        if r.model != "llama2-70b" {
            continue;
        }
        if r.tensor_parallel == 2 && r.batch_size == 64 {
            excluded_rows += 1;
            continue;
        }
        let base = (r.tensor_parallel, r.prompt_size, r.batch_size, r.token_size);
        for (phase, ms) in [(Phase::Prompt, r.prompt_time), (Phase::Token, r.token_time)] {
            let c = (gpu, base.0, phase, base.1, base.2, base.3);
            by_config.entry(c).or_default().push(ms);
        }
    }
    let key_of = |gpu: GpuId, tp: u32| bf16(gpu, ModelId::Llama2_70b, tp);
    let mut observations = Vec::with_capacity(by_config.len());
    for (c, values) in &by_config {
        let &(gpu, tp, phase, prompt, batch, tokens) = c;
        let held_out = PUBLISHED.iter().any(|p| p.covers(c));
        let label = match phase {
            Phase::Prompt => format!("prompt {prompt} × batch {batch} (then {tokens} generated)"),
            Phase::Token => format!("token, prompt {prompt} × batch {batch}, {tokens} generated"),
        };
        observations.push(Observation {
            key: key_of(gpu, tp),
            source: SPLITWISE,
            label,
            shape: splitwise_shape(phase, prompt, batch, tokens),
            measured_s: median(values) / 1e3,
            role: if held_out { Role::HeldOut } else { Role::Fit },
        });
    }
    let published = PUBLISHED
        .iter()
        .map(|p| {
            let mut values = Vec::new();
            let mut shapes = Vec::new();
            for (c, v) in by_config.iter().filter(|(c, _)| p.covers(c)) {
                let &(gpu, tp, phase, prompt, batch, tokens) = c;
                values.extend_from_slice(v);
                let shape = splitwise_shape(phase, prompt, batch, tokens);
                shapes.extend(std::iter::repeat_n((key_of(gpu, tp), shape), v.len()));
            }
            PublishedRows {
                point: *p,
                median_ms: median(&values),
                rows: shapes,
            }
        })
        .collect();
    Ok(SplitwiseData {
        observations,
        published,
        excluded_rows,
    })
}

/// The median of `v` (mean of the middle two for an even count); NaN when empty.
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elementwise_interpolates_and_extrapolates_proportionally() {
        let ew = Elementwise {
            points: vec![(1, 0.01, 0.001), (4, 0.02, 0.004)],
        };
        assert!((ew.step_ms(1, 10) - 0.101).abs() < 1e-12);
        assert!((ew.step_ms(2, 10) - (10.0 * (0.01 + 0.01 / 3.0) + 0.002)).abs() < 1e-12);
        assert!((ew.step_ms(8, 10) - 2.0 * 0.204).abs() < 1e-12);
    }

    #[test]
    fn points_parse_and_bad_points_say_why() {
        assert_eq!(
            parse_point("batch=8,ctx=1024").unwrap(),
            vec![("batch".to_string(), 8), ("ctx".to_string(), 1024)]
        );
        assert!(parse_point("isl=12x").unwrap_err().contains("whole number"));
        assert!(parse_point("isl").unwrap_err().contains("name=value"));
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
