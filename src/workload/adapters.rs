//! LoRA adapters a workload's requests ask for (`adapters = { count, zipf, name, rank, base }` in a
//! `[workload]` table or a class's `traffic`).
//!
//! Adapter `i` of `count` is named `NAME-i` and chosen with Zipf probability `∝ 1 / (i + 1)^zipf`
//! (0: uniform). The draw is a pure function of the scenario seed, the adapter set's name and the
//! request's *key*: its session for a conversation (every turn keeps its adapter, as a user stays with
//! one fine-tuned model), else its own id. So it consumes nothing from the workload's random stream:
//! the arrivals, lengths and contents are the same with or without adapters, and policies compared
//! on one scenario see the same adapters on the same requests.

use serde::{Deserialize, Serialize};

use super::RequestTag;
use crate::config::{NonNegative, PositiveInt};
use crate::hardware::ModelId;
use crate::lora::AdapterRef;
use crate::request::Request;
use crate::rng::{fnv1a, splitmix64};

/// The `adapters` table of a workload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AdapterSpec {
    /// How many distinct adapters.
    pub count: PositiveInt,
    /// Zipf exponent of their popularity (default 1; 0: uniform).
    #[serde(default = "default_zipf")]
    pub zipf: NonNegative,
    /// Adapter `i` is named `NAME-i` (default `adapter`).
    #[serde(default = "default_name")]
    pub name: String,
    /// The adapters' LoRA rank (default 16, vLLM's default `max_lora_rank`).
    #[serde(default = "default_rank")]
    pub rank: PositiveInt,
    /// The base model they were trained on: the requests ask for it. Without it, the workload's
    /// `model`, else the fleet's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<ModelId>,
}

fn default_zipf() -> NonNegative {
    NonNegative(1.0)
}
fn default_name() -> String {
    "adapter".into()
}
fn default_rank() -> PositiveInt {
    PositiveInt(16)
}

impl AdapterSpec {
    /// The largest `count` accepted (the popularity table is held in memory).
    pub const MAX_COUNT: u32 = 1 << 20;

    /// `Err((key, message))` for a spec that cannot be drawn from.
    pub fn validate(&self) -> Result<(), (String, String)> {
        if self.count.0 > Self::MAX_COUNT {
            return Err((
                "count".into(),
                format!("at most {} adapters, got {}", Self::MAX_COUNT, self.count.0),
            ));
        }
        if self.name.is_empty() {
            return Err(("name".into(), "must not be empty".into()));
        }
        Ok(())
    }

    /// The name of adapter `i`: `NAME-i`.
    pub fn adapter_name(&self, i: u32) -> String {
        format!("{}-{i}", self.name)
    }

    /// The adapter named `NAME-i`.
    pub fn adapter(&self, i: u32) -> AdapterRef {
        AdapterRef {
            id: fnv1a(self.adapter_name(i).as_bytes()),
            rank: self.rank.0,
        }
    }
}

/// Each request asks for one of an [`AdapterSpec`]'s adapters (a [`super::Tagged`] workload's tag).
pub struct ForAdapters {
    spec: AdapterSpec,
    /// Cumulative popularity, ending at 1.
    cdf: Vec<f64>,
    salt: u64,
}

impl ForAdapters {
    /// Draws keyed by `seed` and the adapter set's name.
    pub fn new(spec: AdapterSpec, seed: u64) -> Self {
        let weights: Vec<f64> = (0..spec.count.0)
            .map(|i| f64::from(i + 1).powf(-spec.zipf.0))
            .collect();
        let total: f64 = weights.iter().sum();
        let mut acc = 0.0;
        let mut cdf: Vec<f64> = weights
            .iter()
            .map(|w| {
                acc += w / total;
                acc
            })
            .collect();
        if let Some(last) = cdf.last_mut() {
            *last = 1.0;
        }
        let salt = splitmix64(seed ^ fnv1a(format!("workload/adapters/{}", spec.name).as_bytes()));
        ForAdapters { spec, cdf, salt }
    }

    /// The index of the adapter a request of `key` asks for.
    pub fn index(&self, key: u64) -> u32 {
        let u = (splitmix64(key ^ self.salt) >> 11) as f64 / (1u64 << 53) as f64;
        self.cdf
            .partition_point(|&c| c <= u)
            .min(self.cdf.len() - 1) as u32
    }
}

impl RequestTag for ForAdapters {
    fn tag(&self, r: Request) -> Request {
        let key = r.session.map_or(r.id, |s| s.id ^ 0x5e55_1000_0000_0000);
        let adapter = self.spec.adapter(self.index(key));
        let r = match (r.model, self.spec.base) {
            (None, Some(base)) => r.for_model(base),
            _ => r,
        };
        r.for_adapter(adapter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(count: u32, zipf: f64) -> AdapterSpec {
        AdapterSpec {
            count: PositiveInt(count),
            zipf: NonNegative(zipf),
            name: default_name(),
            rank: default_rank(),
            base: None,
        }
    }

    #[test]
    fn popularity_follows_zipf() {
        let w = ForAdapters::new(spec(40, 1.0), 7);
        let mut hits = [0u32; 40];
        let n = 200_000;
        for k in 0..n {
            hits[w.index(k) as usize] += 1;
        }
        // P(0) = 1 / H_40 ≈ 0.2348; P(1) = P(0) / 2.
        let h40: f64 = (1..=40).map(|i| 1.0 / f64::from(i)).sum();
        let p0 = f64::from(hits[0]) / n as f64;
        assert!((p0 - 1.0 / h40).abs() < 0.005, "{p0}");
        let ratio = f64::from(hits[0]) / f64::from(hits[1]);
        assert!((ratio - 2.0).abs() < 0.08, "{ratio}");
        assert!(hits.iter().all(|&h| h > 0));
    }

    #[test]
    fn uniform_at_zero_and_the_same_draw_for_the_same_key() {
        let w = ForAdapters::new(spec(4, 0.0), 7);
        let mut hits = [0u32; 4];
        for k in 0..40_000 {
            hits[w.index(k) as usize] += 1;
        }
        assert!(
            hits.iter().all(|&h| (9_400..10_600).contains(&h)),
            "{hits:?}"
        );
        assert_eq!(w.index(12345), w.index(12345));
        let other = ForAdapters::new(spec(4, 0.0), 8);
        assert!(
            (0..64).any(|k| w.index(k) != other.index(k)),
            "the seed changes the draws"
        );
    }
}
