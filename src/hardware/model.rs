//! The model catalogue: architecture shapes, from which parameter counts, weight bytes and KV bytes follow.

use serde::{Deserialize, Serialize};

/// A model in the catalogue. Ids are lowercase in scenario files (`llama-3.1-8b`, ...).
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
pub enum ModelId {
    #[serde(rename = "llama-3.1-8b")]
    Llama31_8b,
    #[serde(rename = "llama-3.1-70b")]
    Llama31_70b,
    #[serde(rename = "llama-2-7b")]
    Llama2_7b,
    #[serde(rename = "llama-2-70b")]
    Llama2_70b,
    #[serde(rename = "qwen3-8b")]
    Qwen3_8b,
    #[serde(rename = "qwen3-32b")]
    Qwen3_32b,
    #[serde(rename = "mistral-7b")]
    Mistral7b,
    #[serde(rename = "mixtral-8x7b")]
    Mixtral8x7b,
}

impl ModelId {
    /// Every model, in catalogue order.
    pub const ALL: [ModelId; 8] = [
        ModelId::Llama31_8b,
        ModelId::Llama31_70b,
        ModelId::Llama2_7b,
        ModelId::Llama2_70b,
        ModelId::Qwen3_8b,
        ModelId::Qwen3_32b,
        ModelId::Mistral7b,
        ModelId::Mixtral8x7b,
    ];

    /// The catalogue id as written in scenario files.
    pub fn as_str(self) -> &'static str {
        self.spec().id
    }

    /// This model's architecture.
    pub fn spec(self) -> &'static ModelSpec {
        match self {
            ModelId::Llama31_8b => &LLAMA31_8B,
            ModelId::Llama31_70b => &LLAMA31_70B,
            ModelId::Llama2_7b => &LLAMA2_7B,
            ModelId::Llama2_70b => &LLAMA2_70B,
            ModelId::Qwen3_8b => &QWEN3_8B,
            ModelId::Qwen3_32b => &QWEN3_32B,
            ModelId::Mistral7b => &MISTRAL_7B,
            ModelId::Mixtral8x7b => &MIXTRAL_8X7B,
        }
    }
}

/// A decoder-only transformer's shape (grouped-query attention, gated MLP, optional mixture of experts).
#[derive(Debug, Clone, Serialize)]
pub struct ModelSpec {
    /// Catalogue id.
    pub id: &'static str,
    /// Hugging Face repository the shape was read from (its `config.json`).
    pub source: &'static str,
    pub layers: u32,
    pub hidden: u32,
    pub heads: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
    /// MLP intermediate size (per expert for MoE).
    pub intermediate: u32,
    pub vocab: u32,
    /// MLP experts per layer (1 for a dense model).
    pub experts: u32,
    /// Experts each token is routed to (1 for a dense model).
    pub experts_per_token: u32,
    /// Whether the output projection shares the input embedding's weights.
    pub tied_embeddings: bool,
}

impl ModelSpec {
    /// Attention projection parameters of one layer (q, k, v, o).
    pub fn attention_params_per_layer(&self) -> f64 {
        let h = f64::from(self.hidden);
        let q = f64::from(self.heads * self.head_dim);
        let kv = f64::from(self.kv_heads * self.head_dim);
        h * q + 2.0 * h * kv + q * h
    }

    /// Gated-MLP parameters of one expert of one layer (gate, up, down).
    pub fn expert_params(&self) -> f64 {
        3.0 * f64::from(self.hidden) * f64::from(self.intermediate)
    }

    /// Parameters of the input embedding (a lookup: no FLOPs) and of the output projection.
    pub fn embedding_params(&self) -> f64 {
        f64::from(self.vocab) * f64::from(self.hidden)
    }

    /// Every parameter, as stored in GPU memory.
    pub fn total_params(&self) -> f64 {
        let per_layer =
            self.attention_params_per_layer() + f64::from(self.experts) * self.expert_params();
        let heads = if self.tied_embeddings { 1.0 } else { 2.0 };
        f64::from(self.layers) * per_layer + heads * self.embedding_params()
    }

    /// Parameters multiplied per prompt token in the transformer blocks (active experts only; no embedding,
    /// no output projection: vLLM computes logits only for the tokens it samples).
    pub fn active_block_params(&self) -> f64 {
        f64::from(self.layers)
            * (self.attention_params_per_layer()
                + f64::from(self.experts_per_token) * self.expert_params())
    }

    /// Whether this is a mixture-of-experts model.
    pub fn is_moe(&self) -> bool {
        self.experts > 1
    }

    /// KV-cache bytes per token for the whole model at `kv_bytes` per element: 2 × layers × kv_heads × head_dim × bytes.
    pub fn kv_bytes_per_token(&self, kv_bytes: f64) -> f64 {
        2.0 * f64::from(self.layers)
            * f64::from(self.kv_heads)
            * f64::from(self.head_dim)
            * kv_bytes
    }

    /// KV heads held by each GPU under tensor parallelism `tp` (replicated when `tp` exceeds the KV heads).
    pub fn kv_heads_per_gpu(&self, tp: u32) -> u32 {
        self.kv_heads.div_ceil(tp).max(1)
    }
}

/// meta-llama/Llama-3.1-8B: 8.03 B parameters.
pub static LLAMA31_8B: ModelSpec = ModelSpec {
    id: "llama-3.1-8b",
    source: "huggingface.co/meta-llama/Llama-3.1-8B config.json",
    layers: 32,
    hidden: 4096,
    heads: 32,
    kv_heads: 8,
    head_dim: 128,
    intermediate: 14336,
    vocab: 128256,
    experts: 1,
    experts_per_token: 1,
    tied_embeddings: false,
};

/// meta-llama/Llama-2-7b-hf: 6.74 B parameters, multi-head attention (as many KV heads as query heads);
/// the original LLaMA-7B has the same shape.
pub static LLAMA2_7B: ModelSpec = ModelSpec {
    id: "llama-2-7b",
    source: "huggingface.co/meta-llama/Llama-2-7b-hf config.json",
    layers: 32,
    hidden: 4096,
    heads: 32,
    kv_heads: 32,
    head_dim: 128,
    intermediate: 11008,
    vocab: 32000,
    experts: 1,
    experts_per_token: 1,
    tied_embeddings: false,
};

/// meta-llama/Llama-3.1-70B: 70.6 B parameters.
pub static LLAMA31_70B: ModelSpec = ModelSpec {
    id: "llama-3.1-70b",
    source: "huggingface.co/meta-llama/Llama-3.1-70B config.json",
    layers: 80,
    hidden: 8192,
    heads: 64,
    kv_heads: 8,
    head_dim: 128,
    intermediate: 28672,
    vocab: 128256,
    experts: 1,
    experts_per_token: 1,
    tied_embeddings: false,
};

/// meta-llama/Llama-2-70b-hf: 69.0 B parameters. The same transformer blocks as Llama-3.1-70B with a 32k
/// vocabulary; in the catalogue because published whole-step measurements (Splitwise) exist for it.
pub static LLAMA2_70B: ModelSpec = ModelSpec {
    id: "llama-2-70b",
    source: "huggingface.co/meta-llama/Llama-2-70b-hf config.json",
    layers: 80,
    hidden: 8192,
    heads: 64,
    kv_heads: 8,
    head_dim: 128,
    intermediate: 28672,
    vocab: 32000,
    experts: 1,
    experts_per_token: 1,
    tied_embeddings: false,
};

/// Qwen/Qwen3-8B: 8.2 B parameters (6.95 B without embeddings, as its model card states).
pub static QWEN3_8B: ModelSpec = ModelSpec {
    id: "qwen3-8b",
    source: "huggingface.co/Qwen/Qwen3-8B config.json",
    layers: 36,
    hidden: 4096,
    heads: 32,
    kv_heads: 8,
    head_dim: 128,
    intermediate: 12288,
    vocab: 151936,
    experts: 1,
    experts_per_token: 1,
    tied_embeddings: false,
};

/// Qwen/Qwen3-32B: 32.8 B parameters (31.2 B without embeddings, as its model card states).
pub static QWEN3_32B: ModelSpec = ModelSpec {
    id: "qwen3-32b",
    source: "huggingface.co/Qwen/Qwen3-32B config.json",
    layers: 64,
    hidden: 5120,
    heads: 64,
    kv_heads: 8,
    head_dim: 128,
    intermediate: 25600,
    vocab: 151936,
    experts: 1,
    experts_per_token: 1,
    tied_embeddings: false,
};

/// mistralai/Mistral-7B-v0.3: 7.25 B parameters.
pub static MISTRAL_7B: ModelSpec = ModelSpec {
    id: "mistral-7b",
    source: "huggingface.co/mistralai/Mistral-7B-v0.3 config.json",
    layers: 32,
    hidden: 4096,
    heads: 32,
    kv_heads: 8,
    head_dim: 128,
    intermediate: 14336,
    vocab: 32768,
    experts: 1,
    experts_per_token: 1,
    tied_embeddings: false,
};

/// mistralai/Mixtral-8x7B-v0.1: 46.7 B parameters, 12.9 B active per token (8 experts, top-2).
pub static MIXTRAL_8X7B: ModelSpec = ModelSpec {
    id: "mixtral-8x7b",
    source: "huggingface.co/mistralai/Mixtral-8x7B-v0.1 config.json",
    layers: 32,
    hidden: 4096,
    heads: 32,
    kv_heads: 8,
    head_dim: 128,
    intermediate: 14336,
    vocab: 32000,
    experts: 8,
    experts_per_token: 2,
    tied_embeddings: false,
};

#[cfg(test)]
mod tests {
    use super::*;

    /// Parameter counts derived from the shapes match the published totals.
    #[test]
    fn parameter_counts_match_model_cards() {
        let within = |got: f64, want: f64| (got / want - 1.0).abs() < 0.01;
        assert!(within(LLAMA31_8B.total_params(), 8.03e9));
        assert!(within(LLAMA31_70B.total_params(), 70.55e9));
        assert!(within(LLAMA2_70B.total_params(), 68.98e9));
        assert!(within(QWEN3_8B.total_params(), 8.19e9));
        assert!(within(QWEN3_32B.total_params(), 32.76e9));
        assert!(within(MISTRAL_7B.total_params(), 7.25e9));
        assert!(within(LLAMA2_7B.total_params(), 6.74e9));
        assert!(within(MIXTRAL_8X7B.total_params(), 46.7e9));
        let mixtral_active =
            MIXTRAL_8X7B.active_block_params() + 2.0 * MIXTRAL_8X7B.embedding_params();
        assert!(within(mixtral_active, 12.9e9));
    }

    #[test]
    fn kv_bytes_per_token_llama_8b_bf16_is_128_kib() {
        assert_eq!(LLAMA31_8B.kv_bytes_per_token(2.0), 131072.0);
        assert_eq!(LLAMA31_8B.kv_heads_per_gpu(16), 1);
        assert_eq!(LLAMA31_70B.kv_heads_per_gpu(4), 2);
    }
}
