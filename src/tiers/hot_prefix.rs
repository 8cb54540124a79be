//! Hot-prefix detection for replication (`[interconnect.replication]`): which prompt prefixes are
//! requested faster than a threshold, measured over a sliding window.
//!
//! A prefix is named by the chain hash of a prompt's block `min_blocks - 1` (block hashes chain, so two
//! prompts share that hash exactly when they share their first `min_blocks` blocks). For each such key
//! the detector counts the requests of the last `window` and keeps the longest run of leading blocks
//! that every one of them shares (the prefix worth copying: a hot 4,096-token tool schema followed by
//! unique questions is 256 shared blocks of 16 tokens, not any one request's whole prompt).
//!
//! A key is *hot* while more than one request of the window carries it and their rate,
//! `count / window`, exceeds `rate_threshold` (strictly: a prefix requested exactly at the threshold
//! is not hot).
//!
//! Invariants: a key's count equals the number of window entries that carry it (a key with none is
//! forgotten); a key's shared run is never longer than any of its requests' prompts.
//!
//! Replication itself (who copies to whom, over which link) is the engine's (`engine/replication.rs`).
//! Following Mooncake (Qin et al., "Mooncake: A KVCache-centric Disaggregated Architecture for LLM
//! Serving", FAST 2025, arXiv 2407.00079), whose conductor copies frequently used KV blocks to more
//! instances so that one holder does not become the hot spot every request for them queues on.

use std::collections::VecDeque;

use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};

use crate::config::{Positive, PositiveInt};
use crate::request::common_prefix_len;
use crate::time::{SimDuration, SimTime};

/// `[interconnect.replication]`: copy prefixes requested faster than `rate_threshold` to more workers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplicationSpec {
    /// Requests per second for one prefix, over `window`, above which it is copied.
    pub rate_threshold: Positive,
    /// The sliding window the rate is measured over.
    #[serde(default = "defaults::window")]
    pub window: SimDuration,
    /// Workers that should hold a hot prefix, the holders it is copied from included (at least 2).
    #[serde(default = "defaults::copies")]
    pub copies: PositiveInt,
    /// Copies in flight at once, fleet-wide.
    #[serde(default = "defaults::max_in_flight")]
    pub max_in_flight: PositiveInt,
    /// Shortest prefix considered, tokens (rounded up to whole blocks).
    #[serde(default = "defaults::min_prefix_tokens")]
    pub min_prefix_tokens: PositiveInt,
}

mod defaults {
    use super::*;
    pub fn window() -> SimDuration {
        SimDuration::from_secs(10)
    }
    pub fn copies() -> PositiveInt {
        PositiveInt(4)
    }
    pub fn max_in_flight() -> PositiveInt {
        PositiveInt(2)
    }
    pub fn min_prefix_tokens() -> PositiveInt {
        PositiveInt(1024)
    }
}

/// One key's requests in the window.
#[derive(Debug)]
struct Prefix {
    count: u32,
    /// The leading block hashes every request of the key in the window shares (so far).
    shared: Vec<u64>,
}

/// A hot prefix, as [`HotPrefixes::observe`] reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct Hot {
    /// The key naming the prefix (the hash of its block `min_blocks - 1`).
    pub key: u64,
    /// The shared leading block hashes (at least `min_blocks`).
    pub blocks: Vec<u64>,
    /// Whether this request made it cross the threshold (it was not hot before).
    pub crossed: bool,
}

/// Request rates per prompt prefix over a sliding window.
#[derive(Debug)]
pub struct HotPrefixes {
    window: SimDuration,
    rate_threshold: f64,
    min_blocks: usize,
    /// (arrival, key) of each counted request, oldest first.
    arrivals: VecDeque<(SimTime, u64)>,
    prefixes: FxHashMap<u64, Prefix>,
    /// Keys hot at their last observation.
    hot: FxHashSet<u64>,
}

impl HotPrefixes {
    /// A detector for `spec` over blocks of `block_size` tokens.
    pub fn new(spec: &ReplicationSpec, block_size: u32) -> Self {
        HotPrefixes {
            window: spec.window,
            rate_threshold: spec.rate_threshold.0,
            min_blocks: spec.min_prefix_tokens.0.div_ceil(block_size).max(1) as usize,
            arrivals: VecDeque::new(),
            prefixes: FxHashMap::default(),
            hot: FxHashSet::default(),
        }
    }

    /// Counts a request at `now` whose prompt has the full-block hashes `prompt`; returns its prefix if
    /// that is hot now. Prompts shorter than the minimum prefix are not counted.
    pub fn observe(&mut self, now: SimTime, prompt: &[u64]) -> Option<Hot> {
        self.forget_before(now);
        let &key = prompt.get(self.min_blocks - 1)?;
        self.arrivals.push_back((now, key));
        let p = self.prefixes.entry(key).or_insert_with(|| Prefix {
            count: 0,
            shared: prompt.to_vec(),
        });
        p.count += 1;
        let common = common_prefix_len(&p.shared, prompt);
        p.shared.truncate(common);
        let rate = f64::from(p.count) / self.window.as_secs_f64();
        if p.count < 2 || rate <= self.rate_threshold {
            self.hot.remove(&key);
            return None;
        }
        let crossed = self.hot.insert(key);
        Some(Hot {
            key,
            blocks: p.shared.clone(),
            crossed,
        })
    }

    /// Drops the requests that arrived `window` or longer before `now`.
    fn forget_before(&mut self, now: SimTime) {
        while let Some(&(t, key)) = self.arrivals.front() {
            if t + self.window > now {
                break;
            }
            self.arrivals.pop_front();
            let p = self.prefixes.get_mut(&key).expect("a counted key is known");
            p.count -= 1;
            if p.count == 0 {
                self.prefixes.remove(&key);
                self.hot.remove(&key);
            }
        }
    }

    /// Requests counted in the window (for tests and checks).
    pub fn in_window(&self) -> usize {
        self.arrivals.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(rate: f64, window_s: u64, min_tokens: u32) -> ReplicationSpec {
        ReplicationSpec {
            rate_threshold: Positive(rate),
            window: SimDuration::from_secs(window_s),
            copies: PositiveInt(2),
            max_in_flight: PositiveInt(1),
            min_prefix_tokens: PositiveInt(min_tokens),
        }
    }

    /// A prompt of `shared` blocks 1..=shared followed by `own` blocks unique to `id`.
    fn prompt(shared: u64, own: u64, id: u64) -> Vec<u64> {
        (1..=shared)
            .chain((0..own).map(|i| 1_000 * (id + 1) + i))
            .collect()
    }

    fn at(s: f64) -> SimTime {
        SimTime(SimDuration::from_secs_f64(s).0)
    }

    #[test]
    fn a_prefix_is_hot_only_above_the_threshold() {
        // Threshold 1 request/s over 4 s: hot once more than 4 requests are in the window.
        let mut d = HotPrefixes::new(&spec(1.0, 4, 32), 16);
        for i in 0..4 {
            // Four requests in the window: 4 / 4 s = 1 request/s, not above the threshold.
            assert_eq!(d.observe(at(0.5 * i as f64), &prompt(4, 3, i)), None);
        }
        let hot = d.observe(at(2.0), &prompt(4, 3, 4)).expect("5 / 4 s > 1");
        // Every request shares blocks 1..=4 and nothing after them.
        assert_eq!(hot.blocks, vec![1, 2, 3, 4]);
        assert!(hot.crossed);
        let again = d.observe(at(2.1), &prompt(4, 3, 5)).unwrap();
        assert!(!again.crossed, "still hot: not a new crossing");
        // At 6.05 s the requests of 0.0 .. 2.0 have left the window (t + 4 <= 6.05): the one at
        // 2.1 remains, and the new one makes 2 in 4 s, not hot, and the key's history is forgotten
        // only when its count reaches zero.
        assert_eq!(d.observe(at(6.05), &prompt(4, 3, 6)), None);
        assert_eq!(d.in_window(), 2);
    }

    #[test]
    fn short_prompts_and_unique_prompts_never_fire() {
        // min 32 tokens = 2 blocks of 16.
        let mut d = HotPrefixes::new(&spec(0.1, 10, 32), 16);
        for i in 0..100 {
            // A one-block prompt is below the minimum prefix: not counted at all.
            assert_eq!(d.observe(at(0.01 * i as f64), &[7]), None);
            // Unique prompts: each key is requested once.
            assert_eq!(
                d.observe(at(0.01 * i as f64), &[10_000 + i, 20_000 + i]),
                None
            );
        }
        assert_eq!(d.in_window(), 100);
    }

    #[test]
    fn the_key_is_the_hash_at_the_minimum_prefix_length() {
        // Two prompts that differ in block 3 but agree on blocks 1..=2 share the key (min 2 blocks) and
        // their shared run is 2 blocks.
        let mut d = HotPrefixes::new(&spec(0.1, 10, 17), 16);
        assert_eq!(
            d.observe(at(0.0), &[1, 2, 3]),
            None,
            "one request is not hot"
        );
        let hot = d.observe(at(1.0), &[1, 2, 4]).unwrap();
        assert_eq!(hot.key, 2);
        assert_eq!(hot.blocks, vec![1, 2]);
    }
}
