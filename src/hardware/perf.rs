//! The step-time model: how long one engine iteration takes for a given batch.
//!
//! ```text
//! GEMM FLOPs      = 2·N_active·Σ n_i + 2·N_head·seqs                  (per GPU: ÷ TP)
//! attention FLOPs = 4·L·H·hd·Σ (n_i·c_i + n_i²/2)                      (per GPU: ÷ TP)
//! step time = T_step + T_seq·seqs + T_prefill·(sequences with n_i > 1)
//!           + max(GEMM FLOPs / (peak·η_c(T)), weight bytes / (BW·η_m))       GEMMs: compute or weight streaming
//!           + max(attention FLOPs / (peak·η_a), KV bytes / (BW·η_kv))        attention: compute or KV reads
//!           + 2·L·(α + 2(TP−1)/TP · activation bytes / (link·η_link))          TP all-reduce
//! ```
//! `n_i` are the new tokens of sequence `i` in this step, `c_i` the tokens already in its KV cache, and
//! `T = Σ n_i`. `η_c(T) = η_max·T/(T + T_half)` models GEMMs' poor utilisation at small token counts;
//! together with the roofline `max` this makes small batches cost what streaming the weights costs, flat
//! in the token count, as measured. GEMMs and attention are separate kernels that run one after the other,
//! so each is its own roofline and their times add. The η's, fixed costs and link terms are an
//! [`Efficiency`]: published defaults here, fitted per GPU × model × TP × precision by `fleetsim calibrate`
//! (see [`super::profile`]). Contract: a step always takes at least 1 ns, so the clock always advances.

use serde::{Deserialize, Serialize};

use super::gpu::{GpuId, GpuSpec};
use super::model::{ModelId, ModelSpec};
use super::profile::{self, Profile, ProfileKey, Provenance};
use crate::time::SimDuration;

/// Bytes per parameter of the weights no precision quantises (the input embedding and the output
/// projection): BF16.
const UNQUANTISED_BYTES: f64 = 2.0;

/// Numeric format of the weights and the KV cache.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// 16-bit brain float weights, activations and KV cache.
    #[default]
    Bf16,
    /// 8-bit float weights and KV cache (FP8 GEMMs where the GPU has them).
    Fp8,
}

impl Precision {
    /// Every precision, in catalogue order.
    pub const ALL: [Precision; 2] = [Precision::Bf16, Precision::Fp8];

    /// Bytes per weight and per KV element.
    pub fn bytes(self) -> f64 {
        match self {
            Precision::Bf16 => 2.0,
            Precision::Fp8 => 1.0,
        }
    }

    /// The id as written in scenario files.
    pub fn as_str(self) -> &'static str {
        match self {
            Precision::Bf16 => "bf16",
            Precision::Fp8 => "fp8",
        }
    }
}

/// Efficiencies and fixed costs that turn datasheet peaks into step times.
///
/// The defaults are published figures, used where no fitted profile applies:
/// - BF16 GEMMs reach about 0.70–0.77 of peak at ≥ 2k tokens on A100/H100 (NVIDIA's and AIConfigurator's
///   GEMM tables); `compute_half_tokens = 64` puts 0.97·η_max at 2,048 tokens.
/// - Decode streams weights at about 0.75–0.87 of HBM bandwidth at TP 1–2 (Llama-3-8B batch-1 decode on H100:
///   6.0 ms for 16.1 GB, i.e. 0.80 of 3.35 TB/s; AIConfigurator's composed step times).
/// - Causal attention forward: FlashAttention-2 reaches 50–73% of A100's peak and FlashAttention-3 up to 75%
///   of H100's (Dao 2023; Shah et al. 2024): 0.5 as the conservative default.
/// - All-reduce: about 0.7 of link bandwidth and ~8 µs latency for a small message on NVLink (vLLM custom
///   all-reduce measurements in AIConfigurator's tables).
/// - A fixed per-step engine overhead (scheduling, sampling, launch) of ~0.4 ms in vLLM v1 with CUDA graphs.
///
/// Missing keys in a profile file take these defaults.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Efficiency {
    /// Asymptotic fraction of tensor peak that large GEMMs reach.
    pub compute_max: f64,
    /// Batch tokens at which GEMM efficiency is half of `compute_max`.
    pub compute_half_tokens: f64,
    /// Fraction of peak memory bandwidth reached when streaming weights.
    pub memory: f64,
    /// Fraction of tensor peak reached by attention's query–key and score–value products.
    pub attention: f64,
    /// Fraction of peak memory bandwidth reached when attention reads and writes the KV cache.
    pub kv_memory: f64,
    /// Fraction of link bandwidth reached by all-reduce.
    pub link: f64,
    /// Latency of one all-reduce, seconds.
    pub allreduce_latency_s: f64,
    /// Fixed engine overhead per step, seconds.
    pub step_overhead_s: f64,
    /// Fixed time per sequence in the batch (sampling and per-request bookkeeping), seconds.
    pub seq_overhead_s: f64,
    /// Extra fixed time per sequence that computes a prompt chunk (more than one new token): per-request
    /// prompt setup outside the CUDA graphs captured for decode batches, seconds.
    pub prefill_seq_overhead_s: f64,
}

impl Default for Efficiency {
    fn default() -> Self {
        Efficiency {
            compute_max: 0.75,
            compute_half_tokens: 64.0,
            memory: 0.80,
            attention: 0.50,
            kv_memory: 0.80,
            link: 0.70,
            allreduce_latency_s: 8e-6,
            step_overhead_s: 0.4e-3,
            seq_overhead_s: 0.0,
            prefill_seq_overhead_s: 0.0,
        }
    }
}

impl Efficiency {
    /// Published defaults for one GPU family.
    pub fn for_gpu(gpu: GpuId) -> Self {
        match gpu {
            // ROCm GEMMs reach a smaller fraction of MI300X's larger peak (AMD's and SemiAnalysis' 2024
            // measurements: ~0.55–0.65 of dense BF16 peak), and HBM3 streaming ~0.75.
            GpuId::Mi300x => Efficiency {
                compute_max: 0.60,
                memory: 0.75,
                kv_memory: 0.75,
                ..Efficiency::default()
            },
            // PCIe all-reduce: higher latency, no NVLink.
            GpuId::L40s | GpuId::L4 => Efficiency {
                allreduce_latency_s: 25e-6,
                ..Efficiency::default()
            },
            _ => Efficiency::default(),
        }
    }

    /// Checks that fractions lie in (0, 1] and times and token counts are finite and not negative.
    /// `Err((key, message))`.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let fractions = [
            ("compute_max", self.compute_max),
            ("memory", self.memory),
            ("attention", self.attention),
            ("kv_memory", self.kv_memory),
            ("link", self.link),
        ];
        for (key, v) in fractions {
            if !(v > 0.0 && v <= 1.0) {
                return Err((key, format!("expected a fraction in (0, 1], got {v}")));
            }
        }
        let non_negative = [
            ("compute_half_tokens", self.compute_half_tokens),
            ("allreduce_latency_s", self.allreduce_latency_s),
            ("step_overhead_s", self.step_overhead_s),
            ("prefill_seq_overhead_s", self.prefill_seq_overhead_s),
            ("seq_overhead_s", self.seq_overhead_s),
        ];
        for (key, v) in non_negative {
            if !(v.is_finite() && v >= 0.0) {
                return Err((key, format!("expected a number at least 0, got {v}")));
            }
        }
        Ok(())
    }
}

/// Seconds of one all-reduce of `bytes` across `tp` GPUs (`tp` ≥ 2): latency plus the ring's
/// 2(TP−1)/TP of the message over each GPU's link.
pub fn allreduce_seconds(gpu: GpuId, tp: u32, bytes: f64, e: &Efficiency) -> f64 {
    let tpf = f64::from(tp);
    e.allreduce_latency_s + 2.0 * (tpf - 1.0) / tpf * bytes / (gpu.spec().link_bw * e.link)
}

/// The composition of one batch, accumulated by the scheduler in O(batch).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepShape {
    /// Σ n_i: tokens computed this step (prefill chunks plus one per decode).
    pub tokens: u64,
    /// Sequences in the batch (each samples at most one token).
    pub seqs: u64,
    /// Sequences computing more than one token (prompt chunks).
    pub prefill_seqs: u64,
    /// Σ c_i: tokens already in the KV cache of the batch's sequences (read by attention).
    pub context_tokens: u64,
    /// Σ (n_i·c_i + n_i²/2): query–key pairs of causal attention.
    pub attention_pairs: f64,
}

impl StepShape {
    /// Adds one sequence computing `new` tokens on top of `context` cached ones.
    pub fn add(&mut self, new: u64, context: u64) {
        self.tokens += new;
        self.seqs += 1;
        if new > 1 {
            self.prefill_seqs += 1;
        }
        self.context_tokens += context;
        let n = new as f64;
        self.attention_pairs += n * context as f64 + n * n / 2.0;
    }
}

/// The cost of a batch of given tokens and sequences, before what its sequences have cached is known:
/// [`PerfModel::batch`]. A decode batch that stays the same step after step (the decode fast path)
/// computes this once and each step's time from its context alone. Every number is computed by the same
/// operations, in the same order, as a step computed from scratch, so the times agree to the bit.
#[derive(Clone, Copy, Debug)]
pub struct BatchCost<'a> {
    perf: &'a PerfModel,
    /// Tokens computed, as a float.
    t: f64,
    /// Step, sequence and prefill overheads plus the GEMMs' roofline time, s: the sum's first terms.
    before_attention_s: f64,
    /// Tensor-parallel all-reduces, s.
    comm_s: f64,
    /// The GEMMs' FLOPs at the tensor peak, s (utilisation).
    gemm_compute_s: f64,
    /// Weight bytes streamed (experts touched included).
    weight_bytes: f64,
}

impl BatchCost<'_> {
    /// [`PerfModel::step_seconds`] of this batch with `context_tokens` cached and `attention_pairs`.
    #[inline]
    pub fn seconds(&self, context_tokens: u64, attention_pairs: f64) -> f64 {
        let p = self.perf;
        let e = &p.eff;
        let attn_flops = p.attn_flops_per_pair * attention_pairs;
        let kv_bytes = p.kv_bytes_per_token * (context_tokens as f64 + self.t);
        let attn_s = (attn_flops / (p.attn_peak_flops * e.attention))
            .max(kv_bytes / (p.mem_bw * e.kv_memory));
        self.before_attention_s + attn_s + self.comm_s
    }

    /// [`PerfModel::step_time`] of this batch with `context_tokens` cached and `attention_pairs`.
    #[inline]
    pub fn time(&self, context_tokens: u64, attention_pairs: f64) -> SimDuration {
        step_duration(self.seconds(context_tokens, attention_pairs))
    }

    /// [`PerfModel::utilisation`] of this batch with `context_tokens` cached and `attention_pairs`,
    /// over a step of `seconds`.
    #[inline]
    pub fn utilisation(&self, context_tokens: u64, attention_pairs: f64, seconds: f64) -> f64 {
        if seconds <= 0.0 || !seconds.is_finite() {
            return 0.0;
        }
        let p = self.perf;
        let compute_s =
            self.gemm_compute_s + p.attn_flops_per_pair * attention_pairs / p.attn_peak_flops;
        let bytes = self.weight_bytes + p.kv_bytes_per_token * (context_tokens as f64 + self.t);
        (compute_s.max(bytes / p.mem_bw) / seconds).clamp(0.0, 1.0)
    }
}

/// A step of `seconds` on the simulation's clock: to the nearest nanosecond, and never less than one.
fn step_duration(seconds: f64) -> SimDuration {
    SimDuration::from_secs_f64(seconds.max(1e-9))
}

/// Step times for one model on one GPU type at one tensor-parallel degree and precision.
#[derive(Clone, Debug)]
pub struct PerfModel {
    pub gpu: GpuId,
    pub model: ModelId,
    pub tp: u32,
    pub precision: Precision,
    /// The KV cache's data type: `precision` unless [`PerfModel::with_kv_dtype`] set another.
    pub kv_dtype: Precision,
    pub eff: Efficiency,
    /// Where `eff` comes from.
    pub provenance: Provenance,
    /// The MIG slice the engine runs on, if any ([`PerfModel::on_mig`]).
    pub mig: Option<super::mig::MigProfile>,
    // Derived once; all per GPU.
    peak_flops: f64,
    /// Attention's tensor peak: BF16 whatever the weights' precision (vLLM computes attention in BF16 with
    /// FP8 weights, and with an FP8 KV cache too, dequantising on load).
    attn_peak_flops: f64,
    mem_bw: f64,
    dense_weight_bytes: f64,
    expert_weight_bytes: f64,
    kv_bytes_per_token: f64,
    block_flops_per_token: f64,
    head_flops_per_seq: f64,
    attn_flops_per_pair: f64,
    allreduce_bytes_per_token: f64,
}

impl PerfModel {
    /// Builds the model for `gpu` × `model` × `tp` × `precision` with efficiencies `eff`.
    pub fn new(gpu: GpuId, model: ModelId, tp: u32, precision: Precision, eff: Efficiency) -> Self {
        assert!(tp >= 1, "tensor parallelism must be at least 1");
        let g: &GpuSpec = gpu.spec();
        let m: &ModelSpec = model.spec();
        let tpf = f64::from(tp);
        let bytes = precision.bytes();
        let peak = match precision {
            Precision::Bf16 => g.bf16_flops,
            Precision::Fp8 => g.fp8_flops.unwrap_or(g.bf16_flops),
        };
        let expert_total = f64::from(m.layers) * f64::from(m.experts) * m.expert_params();
        let dense_params = if m.is_moe() {
            m.total_params() - expert_total
        } else {
            m.total_params()
        } - m.embedding_params(); // the input embedding is a row lookup: not streamed
        // The output projection, streamed every step, stays in BF16 whatever the precision (see
        // `weight_bytes_per_gpu`); tied to the embedding it is not counted here, as before.
        let head = if m.tied_embeddings {
            0.0
        } else {
            m.embedding_params()
        };
        PerfModel {
            gpu,
            model,
            tp,
            precision,
            kv_dtype: precision,
            eff,
            provenance: Provenance::defaults(),
            mig: None,
            peak_flops: peak,
            attn_peak_flops: g.bf16_flops,
            mem_bw: g.memory_bw,
            dense_weight_bytes: ((dense_params - head) * bytes + head * UNQUANTISED_BYTES) / tpf,
            expert_weight_bytes: if m.is_moe() {
                expert_total * bytes / tpf
            } else {
                0.0
            },
            kv_bytes_per_token: f64::from(m.layers)
                * 2.0
                * f64::from(m.kv_heads_per_gpu(tp))
                * f64::from(m.head_dim)
                * bytes,
            block_flops_per_token: 2.0 * m.active_block_params() / tpf,
            head_flops_per_seq: 2.0 * m.embedding_params() / tpf,
            attn_flops_per_pair: 4.0 * f64::from(m.layers) * f64::from(m.heads * m.head_dim) / tpf,
            // Two all-reduces per layer of the hidden state, activations in 16 bits.
            allreduce_bytes_per_token: 2.0 * f64::from(m.hidden),
        }
    }

    /// Builds the model with the GPU family's published default efficiencies.
    pub fn with_defaults(gpu: GpuId, model: ModelId, tp: u32, precision: Precision) -> Self {
        Self::new(gpu, model, tp, precision, Efficiency::for_gpu(gpu))
    }

    /// Builds the model with the built-in profile fitted to this configuration, or the nearest one spec-scaled
    /// ([`profile::resolve`]).
    pub fn calibrated(gpu: GpuId, model: ModelId, tp: u32, precision: Precision) -> Self {
        let key = ProfileKey {
            gpu,
            model,
            tp,
            precision,
        };
        let (eff, provenance) = profile::resolve(key);
        Self::new(gpu, model, tp, precision, eff).with_provenance(provenance)
    }

    /// Builds the model from a profile file's efficiencies; `name` says where it came from.
    pub fn from_profile(p: &Profile, name: String) -> Self {
        Self::new(p.gpu, p.model, p.tp, p.precision, p.efficiency).with_provenance(Provenance {
            profile: name,
            calibrated: true,
        })
    }

    fn with_provenance(mut self, provenance: Provenance) -> Self {
        self.provenance = provenance;
        self
    }

    /// The same replica with its KV cache held in `kv` rather than in the weights' precision (vLLM's
    /// `--kv-cache-dtype`): the KV bytes per token, and so the capacity and the bytes attention reads,
    /// follow `kv`; attention still computes in BF16.
    pub fn with_kv_dtype(mut self, kv: Precision) -> Self {
        self.kv_dtype = kv;
        let m = self.model.spec();
        self.kv_bytes_per_token = f64::from(m.layers)
            * 2.0
            * f64::from(m.kv_heads_per_gpu(self.tp))
            * f64::from(m.head_dim)
            * kv.bytes();
        self
    }

    /// The same replica on MIG slice `mig` of its GPU: tensor peaks × the slice's SM fraction, memory
    /// bandwidth × its memory fraction ([`super::mig`]); memory follows in [`PerfModel::memory_bytes`].
    pub fn on_mig(mut self, mig: super::mig::MigProfile) -> Self {
        debug_assert!(
            self.mig.is_none() && self.tp == 1,
            "a slice runs one engine at TP 1"
        );
        self.peak_flops *= mig.compute_fraction();
        self.attn_peak_flops *= mig.compute_fraction();
        self.mem_bw *= mig.memory_fraction();
        self.mig = Some(mig);
        self
    }

    /// Memory of each GPU the replica runs on (its MIG slice's, on a slice), bytes.
    pub fn memory_bytes(&self) -> f64 {
        self.gpu.spec().memory_bytes * self.mig.map_or(1.0, |m| m.memory_fraction())
    }

    /// The same replica with the attention kernels' efficiencies (tensor and KV bandwidth) of
    /// `reference`, a replica whose weights are in this one's KV data type: the FlashAttention kernel
    /// vLLM runs depends on the KV cache's data type, not the weights' (an FP8 cache computes attention
    /// in FP8 under FlashAttention-3, a BF16 cache in BF16), and the fitted FP8 profiles' attention
    /// efficiencies are 1.1–2.2× the BF16 ones of the same GPU, model and TP. The provenance names
    /// both, and is calibrated only if both are.
    pub fn with_attention_of(mut self, reference: &PerfModel) -> Self {
        self.eff.attention = reference.eff.attention;
        self.eff.kv_memory = reference.eff.kv_memory;
        self.provenance = Provenance {
            profile: format!(
                "{} (attention: {})",
                self.provenance.profile, reference.provenance.profile
            ),
            calibrated: self.provenance.calibrated && reference.provenance.calibrated,
        };
        self
    }

    /// KV-cache bytes one token occupies on each GPU of the replica.
    pub fn kv_bytes_per_token_per_gpu(&self) -> f64 {
        self.kv_bytes_per_token
    }

    /// Weight bytes resident on each GPU of the replica (embedding included). The input embedding and
    /// the output projection stay in BF16 at every precision: vLLM's FP8 method quantises linear layers
    /// only (`Fp8Config.get_quant_method` returns it for `LinearBase`; `VocabParallelEmbedding` and
    /// `ParallelLMHead` are neither), and FP8 checkpoints leave `lm_head` out of quantisation. vLLM PR
    /// #41000 (open, 2026-04), which would add FP8 for `ParallelLMHead` as an option, measures the
    /// difference: 1.18 GiB less for a 248,320 × 5,120 head. So Llama-3.1-8B in FP8 holds 8.46 GiB, not
    /// the 7.48 GiB of every parameter at one byte.
    pub fn weight_bytes_per_gpu(&self) -> f64 {
        let m = self.model.spec();
        let tables = if m.tied_embeddings { 1.0 } else { 2.0 } * m.embedding_params();
        ((m.total_params() - tables) * self.precision.bytes() + tables * UNQUANTISED_BYTES)
            / f64::from(self.tp)
    }

    /// Duration of one engine step for a batch of shape `s`. Never less than 1 ns.
    pub fn step_time(&self, s: &StepShape) -> SimDuration {
        step_duration(self.step_seconds(s))
    }

    /// [`PerfModel::step_time`] in float seconds.
    pub fn step_seconds(&self, s: &StepShape) -> f64 {
        if s.tokens == 0 {
            return 0.0;
        }
        self.batch(s).seconds(s.context_tokens, s.attention_pairs)
    }

    /// Roofline utilisation of a step of shape `s` that lasted `seconds`: the busier of the tensor cores
    /// (the step's FLOPs at the datasheet peaks) and HBM (its weight and KV bytes at the datasheet
    /// bandwidth), as a share of the step, in [0, 1]; 0 for an empty step. What the power model
    /// (`hardware::power`) scales a busy GPU's power with.
    pub fn utilisation(&self, s: &StepShape, seconds: f64) -> f64 {
        if s.tokens == 0 {
            return 0.0;
        }
        self.batch(s)
            .utilisation(s.context_tokens, s.attention_pairs, seconds)
    }

    /// The parts of [`PerfModel::step_seconds`] and [`PerfModel::utilisation`] that depend only on
    /// `s`'s tokens and sequences, not on what its sequences have cached. `s.tokens > 0`.
    pub fn batch(&self, s: &StepShape) -> BatchCost<'_> {
        debug_assert!(s.tokens > 0);
        let m = self.model.spec();
        let e = &self.eff;
        let t = s.tokens as f64;

        let gemm_flops = self.block_flops_per_token * t + self.head_flops_per_seq * s.seqs as f64;
        let eta_c = e.compute_max * t / (t + e.compute_half_tokens);
        let expert_bytes = if m.is_moe() {
            // Each token picks k of E experts per layer; with T tokens the expected fraction of experts touched
            // is 1 − (1 − k/E)^T.
            let miss = 1.0 - f64::from(m.experts_per_token) / f64::from(m.experts);
            self.expert_weight_bytes * (1.0 - miss.powf(t))
        } else {
            0.0
        };
        let weight_bytes = self.dense_weight_bytes + expert_bytes;
        let gemm_s =
            (gemm_flops / (self.peak_flops * eta_c)).max(weight_bytes / (self.mem_bw * e.memory));
        let comm_s = if self.tp > 1 {
            let per_reduce =
                allreduce_seconds(self.gpu, self.tp, self.allreduce_bytes_per_token * t, e);
            2.0 * f64::from(m.layers) * per_reduce
        } else {
            0.0
        };
        BatchCost {
            perf: self,
            t,
            before_attention_s: e.step_overhead_s
                + e.seq_overhead_s * s.seqs as f64
                + e.prefill_seq_overhead_s * s.prefill_seqs as f64
                + gemm_s,
            comm_s,
            gemm_compute_s: gemm_flops / self.peak_flops,
            weight_bytes,
        }
    }

    /// The model's FLOPs, per GPU of the replica, for `tokens` tokens computed with `pairs`
    /// causal-attention query–key pairs (as [`StepShape::attention_pairs`]) and `sampled` tokens
    /// sampled: the FLOPs [`PerfModel::batch`] times at the tensor peaks, 2 per active block parameter
    /// per token, 2 per LM-head parameter per sampled token and `4 × layers × heads × head_dim` per
    /// pair, divided over the tensor-parallel GPUs. Step overheads, memory traffic and all-reduces take
    /// time but are not model FLOPs. What model FLOPs utilisation ([`crate::metrics::mfu`]) counts.
    pub fn model_flops_per_gpu(&self, tokens: f64, sampled: f64, pairs: f64) -> f64 {
        self.block_flops_per_token * tokens
            + self.head_flops_per_seq * sampled
            + self.attn_flops_per_pair * pairs
    }

    /// Each GPU's dense tensor peak at the weights' precision (its slice's share on a MIG slice),
    /// FLOP/s: the denominator of model FLOPs utilisation.
    pub fn peak_flops_per_gpu(&self) -> f64 {
        self.peak_flops
    }

    /// Time to prefill `prompt` tokens in one step on an idle worker, with `cached` tokens already in cache.
    pub fn prefill_seconds(&self, prompt: u64, cached: u64) -> f64 {
        let mut s = StepShape::default();
        s.add(prompt.saturating_sub(cached).max(1), cached);
        self.step_seconds(&s)
    }

    /// Time of one decode step for `batch` sequences each with `context` tokens cached.
    pub fn decode_step_seconds(&self, batch: u64, context: u64) -> f64 {
        let mut s = StepShape::default();
        for _ in 0..batch {
            s.add(1, context);
        }
        self.step_seconds(&s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn llama8b_h100() -> PerfModel {
        PerfModel::with_defaults(GpuId::H100, ModelId::Llama31_8b, 1, Precision::Bf16)
    }

    /// Published: ≈ 40–50 ms (AIConfigurator's composed H100 kernels: 39.4 ms).
    #[test]
    fn llama8b_h100_prefill_2048_is_35_to_60_ms() {
        let ms = llama8b_h100().prefill_seconds(2048, 0) * 1e3;
        assert!((35.0..60.0).contains(&ms), "prefill {ms} ms");
    }

    /// Published: ≈ 6–6.5 ms per token at batch 1.
    #[test]
    fn llama8b_h100_decode_batch1_is_5_to_9_ms() {
        let ms = llama8b_h100().decode_step_seconds(1, 1024) * 1e3;
        assert!((5.0..9.0).contains(&ms), "decode {ms} ms");
    }

    #[test]
    fn small_batches_cost_about_the_same_and_time_grows_with_work() {
        let p = llama8b_h100();
        let t1 = p.decode_step_seconds(1, 512);
        let t16 = p.decode_step_seconds(16, 512);
        assert!(t16 / t1 < 1.2, "decode is weight-bound at small batch");
        assert!(p.prefill_seconds(4096, 0) > 1.8 * p.prefill_seconds(2048, 0));
        assert!(p.prefill_seconds(2048, 1024) < p.prefill_seconds(2048, 0));
    }

    #[test]
    fn fp8_is_faster_and_tp_splits_the_work() {
        let bf = llama8b_h100();
        let fp = PerfModel::with_defaults(GpuId::H100, ModelId::Llama31_8b, 1, Precision::Fp8);
        assert!(fp.prefill_seconds(2048, 0) < 0.7 * bf.prefill_seconds(2048, 0));
        assert!(fp.decode_step_seconds(1, 1024) < 0.7 * bf.decode_step_seconds(1, 1024));
        let tp1 = PerfModel::with_defaults(GpuId::H100, ModelId::Llama31_70b, 1, Precision::Bf16);
        let tp4 = PerfModel::with_defaults(GpuId::H100, ModelId::Llama31_70b, 4, Precision::Bf16);
        assert!(tp4.decode_step_seconds(1, 1024) < 0.4 * tp1.decode_step_seconds(1, 1024));
    }

    #[test]
    fn moe_decode_reads_only_touched_experts() {
        let p = PerfModel::with_defaults(GpuId::H100, ModelId::Mixtral8x7b, 2, Precision::Bf16);
        assert!(p.decode_step_seconds(1, 512) < 0.5 * p.decode_step_seconds(64, 512));
    }

    #[test]
    fn empty_step_takes_no_time_but_any_work_takes_at_least_a_nanosecond() {
        let p = llama8b_h100();
        assert_eq!(p.step_seconds(&StepShape::default()), 0.0);
        let mut s = StepShape::default();
        s.add(1, 0);
        assert!(p.step_time(&s).0 >= 1);
    }

    /// Every prediction is physically possible: for every GPU × model × TP × precision (the built-in
    /// profile where fitted, else the one [`profile::resolve`] borrows) and every batch shape of a grid,
    /// a step takes at least its FLOP bound (all its FLOPs at the GEMM tensor peak, the higher of the two)
    /// and at least its byte bound (the weights each GPU streams plus the KV it reads and writes, at peak
    /// HBM bandwidth). The bounds are computed here from the datasheets, not from the model's terms.
    #[test]
    fn no_step_beats_its_flop_or_byte_bound() {
        let mut checked = 0;
        for gpu in GpuId::ALL {
            for model in ModelId::ALL {
                for tp in [1u32, 2, 4, 8] {
                    for precision in Precision::ALL {
                        let m = model.spec();
                        if m.heads % tp != 0 {
                            continue;
                        }
                        let p = PerfModel::calibrated(gpu, model, tp, precision);
                        let g = gpu.spec();
                        let peak = match precision {
                            Precision::Bf16 => g.bf16_flops,
                            Precision::Fp8 => g.fp8_flops.unwrap_or(g.bf16_flops).max(g.bf16_flops),
                        };
                        let tpf = f64::from(tp);
                        let bytes = precision.bytes();
                        let kv_per_token = f64::from(m.layers)
                            * 2.0
                            * f64::from(m.kv_heads_per_gpu(tp))
                            * f64::from(m.head_dim)
                            * bytes;
                        // (sequences, new tokens each, context each)
                        let grid = [
                            (1u64, 1u64, 0u64),
                            (1, 1, 4096),
                            (8, 1, 1024),
                            (64, 1, 2048),
                            (256, 1, 1024),
                            (1, 128, 0),
                            (1, 2048, 0),
                            (1, 8192, 0),
                            (2, 1024, 1024),
                        ];
                        for (seqs, new, context) in grid {
                            let mut s = StepShape::default();
                            for _ in 0..seqs {
                                s.add(new, context);
                            }
                            let t = (seqs * new) as f64;
                            let pairs = seqs as f64
                                * (new as f64 * context as f64 + (new * new) as f64 / 2.0);
                            let flops = (2.0 * m.active_block_params() * t
                                + 2.0 * m.embedding_params() * seqs as f64
                                + 4.0
                                    * f64::from(m.layers)
                                    * f64::from(m.heads * m.head_dim)
                                    * pairs)
                                / tpf;
                            // MoE: at least the experts one token touches are read.
                            let weights = if m.is_moe() {
                                (m.total_params()
                                    - f64::from(m.layers)
                                        * f64::from(m.experts)
                                        * m.expert_params()
                                    - m.embedding_params())
                                    / tpf
                            } else {
                                (m.total_params() - m.embedding_params()) / tpf
                            } * bytes;
                            let kv = kv_per_token * (seqs * (new + context)) as f64;
                            let flop_bound = flops / peak;
                            let byte_bound = (weights + kv) / g.memory_bw;
                            let step = p.step_seconds(&s);
                            assert!(
                                step >= flop_bound.max(byte_bound),
                                "{gpu:?} {model:?} tp{tp} {precision:?} ({}) shape {seqs}×{new}@{context}: \
                                 step {step:.6e} s < max(FLOP bound {flop_bound:.6e}, byte bound {byte_bound:.6e})",
                                p.provenance.profile
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 500, "{checked} shapes checked");
    }
}
