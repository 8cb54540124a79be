//! Model FLOPs utilisation (MFU) of a worker: the FLOPs its model needed for the work it delivered,
//! over what its GPUs could have done at their datasheet tensor peak in the same time.
//!
//! `mfu = Σ request_flops / (simulated seconds × peak FLOP/s)`, per GPU of the worker's replica, where
//! the sum runs over the completed requests the worker served, and a request's FLOPs are those of the
//! tokens it computed once: from the end of its cached (or loaded) prefix to its last fed-back token,
//! at the step model's FLOPs ([`PerfModel::model_flops_per_gpu`]: GEMMs and LM head, 2 FLOPs per
//! parameter, and causal attention). As in PaLM's definition (Chowdhery et al. 2022, appendix B),
//! recomputation (after a preemption, eviction or fault) is not model work, so it is not counted; and
//! nor are step overheads, memory traffic or all-reduces, which cost time but are not FLOPs of the
//! model. The step-time share (`busy_fraction`) says when a step ran; MFU says how much of the
//! hardware's arithmetic those steps used: a memory-bound decode batch keeps a worker "busy" at a few
//! percent MFU.
//!
//! Invariant: `0 <= mfu <= busy_fraction <= 1`: every step's time includes its GEMMs' and attention's
//! FLOPs at no more than the tensor peaks (efficiencies are at most 1), and only FLOPs of steps the
//! worker ran are counted; the one exception is a request migrated in flight, whose earlier work
//! counts at the worker that finished it.

use super::record::{Outcome, RequestRecord};
use crate::hardware::perf::PerfModel;

/// The model FLOPs, per GPU of `perf`'s replica, of the tokens completed request `r` computed once;
/// 0 for a request that did not complete. A request of `p` prompt and `o` output tokens computes
/// positions `c .. p + o - 1` (the last output token is sampled, never fed back), `c` its cached and
/// loaded prefix: `p + o - 1 - c` tokens with `((p + o - 1)² - c²) / 2` causal-attention pairs (the
/// sum of `n·c + n²/2` over its chunks, whatever the chunking), and samples `o` tokens.
pub fn request_flops(perf: &PerfModel, r: &RequestRecord) -> f64 {
    if r.outcome != Outcome::Completed {
        return 0.0;
    }
    let last = (f64::from(r.prompt_tokens) + f64::from(r.output_tokens) - 1.0).max(0.0);
    let start = (f64::from(r.cached_tokens) + f64::from(r.loaded_tokens)).min(last);
    let pairs = (last * last - start * start) / 2.0;
    perf.model_flops_per_gpu(last - start, f64::from(r.output_tokens), pairs)
}

/// MFU of a worker of `perf` whose completed requests needed `flops` (per GPU) over `elapsed_s`
/// simulated seconds; 0 for a run of no time.
pub fn utilisation(perf: &PerfModel, flops: f64, elapsed_s: f64) -> f64 {
    let capacity = perf.peak_flops_per_gpu() * elapsed_s;
    if capacity > 0.0 {
        flops / capacity
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hardware::perf::StepShape;
    use crate::hardware::{GpuId, ModelId, Precision};
    use crate::time::SimTime;

    fn perf() -> PerfModel {
        PerfModel::with_defaults(GpuId::H100, ModelId::Llama31_8b, 1, Precision::Bf16)
    }

    fn completed(prompt: u32, output: u32, cached: u32) -> RequestRecord {
        RequestRecord {
            prompt_tokens: prompt,
            output_tokens: output,
            cached_tokens: cached,
            ..RequestRecord::for_test(1, SimTime::ZERO, SimTime(1), Outcome::Completed)
        }
    }

    /// A request's FLOPs are those of its steps' shapes: one prefill chunk and its decode steps.
    #[test]
    fn a_requests_flops_are_its_steps_flops_whatever_the_chunking() {
        let p = perf();
        let (prompt, output, cached) = (1000u64, 4u64, 200u64);
        let mut chunks = StepShape::default();
        chunks.add(300, cached);
        chunks.add(prompt - cached - 300, cached + 300);
        let mut sampled = 1.0;
        for k in 0..output - 1 {
            chunks.add(1, prompt + k);
            sampled += 1.0;
        }
        let expected = p.model_flops_per_gpu(chunks.tokens as f64, sampled, chunks.attention_pairs);
        let got = request_flops(&p, &completed(1000, 4, 200));
        assert!(
            (got - expected).abs() <= 1e-9 * expected,
            "{got} vs {expected}"
        );
        // About 2 × 8B parameters per token computed, plus a little attention.
        let per_token = got / (prompt + output - 1 - cached) as f64;
        assert!((14e9..20e9).contains(&per_token), "{per_token}");
    }

    #[test]
    fn only_completed_requests_count_and_a_cached_prefix_is_free() {
        let p = perf();
        let failed = RequestRecord {
            outcome: Outcome::Failed,
            ..completed(1000, 10, 0)
        };
        assert_eq!(request_flops(&p, &failed), 0.0);
        assert!(
            request_flops(&p, &completed(1000, 10, 900))
                < request_flops(&p, &completed(1000, 10, 0))
        );
    }

    /// A worker that ran prefill of 2048-token prompts back to back, at the step model's own speed,
    /// uses a large share of its peak; the same worker decoding one sequence uses a few percent.
    #[test]
    fn compute_bound_prefill_reaches_high_mfu_and_lone_decode_stays_low() {
        let p = perf();
        let prefill_s = p.prefill_seconds(2048, 0);
        let prefill = request_flops(&p, &completed(2048, 1, 0));
        let mfu = utilisation(&p, prefill, prefill_s);
        assert!((0.3..=1.0).contains(&mfu), "prefill MFU {mfu}");
        let step_s = p.decode_step_seconds(1, 1024);
        let decode = p.model_flops_per_gpu(1.0, 1.0, 1024.5);
        let mfu = utilisation(&p, decode, step_s);
        assert!(mfu < 0.02, "batch-1 decode MFU {mfu}");
        assert_eq!(utilisation(&p, 1e12, 0.0), 0.0);
    }
}
