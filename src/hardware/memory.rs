//! What a vLLM V1 server does with a GPU's memory before the KV cache, and its engine defaults per GPU.
//!
//! vLLM sizes its KV cache at start-up from a profiling run: `gpu_memory_utilization` × the GPU's
//! memory, less the weights, less the peak memory of a dummy forward pass over `max_num_batched_tokens`
//! tokens and of a sampler warm-up over `max_num_seqs` dummy requests, less the memory held outside
//! PyTorch's allocator (CUDA context, cuBLAS workspaces, NCCL and custom all-reduce buffers). The rest
//! is KV cache. [`reserve`] models each of those terms per GPU; two of its constants are fitted to vLLM
//! V1's logged KV-cache sizes (`data/validation/kv_cache_logs.csv`, `docs/calibration.md`), the others
//! come from the model's shape.
//!
//! Invariants: every term of a [`Reserve`] is non-negative and finite, and the reserve grows (weakly)
//! with `max_num_batched_tokens` and `max_num_seqs`.

use super::{GpuId, PerfModel};

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// vLLM's server (`vllm serve`) defaults for one GPU: the step's token budget and its sequence cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineDefaults {
    pub max_num_batched_tokens: u32,
    pub max_num_seqs: u32,
}

/// The defaults `vllm serve` (usage context `OPENAI_API_SERVER`) picks when neither
/// `--max-num-batched-tokens` nor `--max-num-seqs` is given.
///
/// Source: vLLM's `EngineArgs._set_default_args` (V1 engine; vllm/engine/arg_utils.py, unchanged from
/// v0.9 through v0.11): on a GPU with at least 70 GiB of memory whose name does not contain "a100"
/// ("For GPUs like H100 and MI300x, use larger default values"; the A100 is excluded because a larger
/// budget lowered its throughput, vllm-project/vllm#17885) the server uses 8,192 tokens and 1,024
/// sequences; elsewhere 2,048 tokens and 256 sequences. (The offline `LLM` class uses 16,384 / 1,024
/// and 8,192 / 256; a benchmark against `vllm serve` sees the server's.)
pub fn vllm_server_defaults(gpu: GpuId) -> EngineDefaults {
    vllm_server_defaults_with(gpu, gpu.spec().memory_bytes)
}

/// [`vllm_server_defaults`] for a device of `memory_bytes` on `gpu` (a MIG slice reports its own
/// memory to vLLM, so a slice under 70 GiB gets the small defaults).
pub fn vllm_server_defaults_with(gpu: GpuId, memory_bytes: f64) -> EngineDefaults {
    let spec = gpu.spec();
    let large = memory_bytes >= 70.0 * GIB && !spec.name.to_lowercase().contains("a100");
    if large {
        EngineDefaults {
            max_num_batched_tokens: 8192,
            max_num_seqs: 1024,
        }
    } else {
        EngineDefaults {
            max_num_batched_tokens: 2048,
            max_num_seqs: 256,
        }
    }
}

/// Memory outside PyTorch's allocator and the allocator's slack, per GPU: the CUDA context (about
/// 0.5 GiB on Hopper with lazy module loading), cuBLAS/cuBLASLt workspaces and fragmentation. Not
/// fitted: the 1 GiB the simulator always reserved for it.
pub const RUNTIME_BYTES: f64 = GIB;

/// Bytes the sampler warm-up holds per vocabulary entry of each dummy request, at its peak.
///
/// vLLM V1's profiling run ends with a sampler pass over `max_num_seqs` dummy requests: full-vocabulary
/// logits cast to FP32, and the sampler's working copies of them (temperature-scaled logits, top-k/top-p
/// sort values and their int64 indices, softmax probabilities): about 4 + 4 + 4 + 8 + 4 + 4 ≈ 28 bytes
/// per logit from first principles. Fitted to the one TP 1 vLLM V1 log (Qwen3-8B on an H100, 1,024
/// sequences) as the part of its reserve the other terms do not explain; the calibration test
/// (`calibration::kv_logs`) recomputes the fit and fails if this constant drifts from it.
pub const SAMPLER_BYTES_PER_LOGIT: f64 = 30.95;

/// Per GPU, at TP > 1: NCCL communicator buffers (vLLM opens a PyTorch NCCL group and its own PyNCCL
/// communicator, with NVLink SHARP buffers on NVSwitch systems) and the custom all-reduce's IPC
/// buffers. Fitted to the TP 4 vLLM V1 log (Llama-3.1-70B on H100) as the part of its reserve the other
/// terms do not explain; the calibration test recomputes the fit.
pub const TP_COMM_BYTES: f64 = 1.641 * GIB;

/// The memory a vLLM V1 server keeps per GPU for neither weights nor KV cache, by term (bytes).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reserve {
    /// CUDA context, library workspaces, allocator slack ([`RUNTIME_BYTES`]).
    pub runtime: f64,
    /// Peak activations of a forward pass over the full token budget.
    pub activations: f64,
    /// Peak of the sampler warm-up over `max_num_seqs` dummy requests.
    pub sampler: f64,
    /// All-reduce and NCCL buffers (TP > 1 only).
    pub communication: f64,
}

impl Reserve {
    /// All terms together, bytes per GPU.
    pub fn total(&self) -> f64 {
        self.runtime + self.activations + self.sampler + self.communication
    }
}

/// The reserve of one GPU of `perf`'s replica at the given engine limits.
///
/// Activations: each of the budget's tokens holds, in 16 bits, the hidden state, the residual, the
/// normalised input and the attention output (4 × hidden, split across TP where the layer is) and the
/// MLP's gate/up output (2 × intermediate / TP), as before this model was fitted. The sampler's logits
/// are full-vocabulary on every rank (gathered after the TP-split LM head).
pub fn reserve(perf: &PerfModel, max_num_batched_tokens: u32, max_num_seqs: u32) -> Reserve {
    let m = perf.model.spec();
    let tp = f64::from(perf.tp.max(1));
    let per_token = (4.0 * f64::from(m.hidden) + 2.0 * f64::from(m.intermediate)) * 2.0 / tp;
    Reserve {
        runtime: RUNTIME_BYTES,
        activations: f64::from(max_num_batched_tokens) * per_token,
        sampler: f64::from(max_num_seqs) * f64::from(m.vocab) * SAMPLER_BYTES_PER_LOGIT,
        communication: if perf.tp > 1 { TP_COMM_BYTES } else { 0.0 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hardware::{ModelId, Precision};

    #[test]
    fn eighty_gigabyte_hoppers_get_the_large_defaults_and_a100s_and_l40s_the_small_ones() {
        let large = EngineDefaults {
            max_num_batched_tokens: 8192,
            max_num_seqs: 1024,
        };
        let small = EngineDefaults {
            max_num_batched_tokens: 2048,
            max_num_seqs: 256,
        };
        for g in [GpuId::H100, GpuId::H200, GpuId::B200, GpuId::Mi300x] {
            assert_eq!(vllm_server_defaults(g), large, "{}", g.as_str());
        }
        // The A100 80GB has more than 70 GiB but is excluded by name; the others have less.
        for g in [GpuId::A100, GpuId::A100_40gb, GpuId::L40s] {
            assert_eq!(vllm_server_defaults(g), small, "{}", g.as_str());
        }
    }

    /// Llama-3.1-8B (hidden 4,096, intermediate 14,336, vocabulary 128,256) at TP 1, 8,192 tokens and
    /// 1,024 sequences: activations 8,192 × (16,384 + 28,672) × 2 B = 738,197,504 B; sampler
    /// 1,024 × 128,256 × 30.95 B; no communication term.
    #[test]
    fn each_term_follows_the_shape() {
        let perf = PerfModel::calibrated(GpuId::H100, ModelId::Llama31_8b, 1, Precision::Bf16);
        let r = reserve(&perf, 8192, 1024);
        assert_eq!(r.runtime, GIB);
        assert_eq!(r.activations, 738_197_504.0);
        assert!((r.sampler - 1024.0 * 128_256.0 * 30.95).abs() < 1.0);
        assert_eq!(r.communication, 0.0);
        let tp2 = PerfModel::calibrated(GpuId::H100, ModelId::Llama31_8b, 2, Precision::Bf16);
        let r2 = reserve(&tp2, 8192, 1024);
        assert_eq!(r2.activations, 738_197_504.0 / 2.0);
        assert_eq!(r2.communication, TP_COMM_BYTES);
        assert!(reserve(&perf, 2048, 256).total() < r.total());
    }
}
