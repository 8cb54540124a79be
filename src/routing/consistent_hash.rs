//! `consistent_hash`: a hash ring with virtual nodes and bounded load (Mirrokni, Thorup and Zadimoghaddam,
//! "Consistent Hashing with Bounded Loads", 2018).
//!
//! The key is the session id, or the prompt's first `prefix_blocks` blocks (so requests sharing a prefix
//! land together). A request goes to the first worker clockwise from its key that is up and below the
//! load bound `ceil(load_factor × (Σ outstanding + 1) / up workers)`. Losing a worker moves only its keys.

use serde::{Deserialize, Serialize};

use super::{Decision, RouteInput, RoutingPolicy};
use crate::config::{Positive, PositiveInt};
use crate::rng::{SimRng, splitmix64};

/// What to hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HashKey {
    /// The session id (requests without one hash their first prompt blocks).
    Session,
    /// The first `prefix_blocks` blocks of the prompt.
    Prefix,
}

/// Parameters of `consistent_hash`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConsistentHashParams {
    /// What is hashed onto the ring.
    #[serde(default = "default_key")]
    pub key: HashKey,
    /// Blocks of prompt that form a prefix key.
    #[serde(default = "default_prefix_blocks")]
    pub prefix_blocks: PositiveInt,
    /// Bounded-load factor c ≥ 1 (1.25 in the paper's experiments; large values disable the bound).
    #[serde(default = "default_load_factor")]
    pub load_factor: Positive,
    /// Points per worker on the ring.
    #[serde(default = "default_virtual_nodes")]
    pub virtual_nodes: PositiveInt,
}

fn default_key() -> HashKey {
    HashKey::Session
}
fn default_prefix_blocks() -> PositiveInt {
    PositiveInt(32)
}
fn default_load_factor() -> Positive {
    Positive(1.25)
}
fn default_virtual_nodes() -> PositiveInt {
    PositiveInt(100)
}

impl Default for ConsistentHashParams {
    fn default() -> Self {
        ConsistentHashParams {
            key: default_key(),
            prefix_blocks: default_prefix_blocks(),
            load_factor: default_load_factor(),
            virtual_nodes: default_virtual_nodes(),
        }
    }
}

impl ConsistentHashParams {
    /// `Err((key, message))` for values the algorithm cannot use.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.load_factor.0 < 1.0 {
            return Err((
                "load_factor",
                format!("must be at least 1, got {}", self.load_factor.0),
            ));
        }
        Ok(())
    }
}

/// A bounded-load consistent-hash ring over the workers.
#[derive(Debug)]
pub struct ConsistentHash {
    params: ConsistentHashParams,
    /// (point, worker), sorted by point; built on first use for the fleet's size.
    ring: Vec<(u64, u32)>,
}

impl ConsistentHash {
    /// A policy with `params`.
    pub fn new(params: ConsistentHashParams) -> Self {
        ConsistentHash {
            params,
            ring: Vec::new(),
        }
    }

    fn build(&mut self, workers: usize) {
        let v = u64::from(self.params.virtual_nodes.0);
        self.ring = (0..workers as u64)
            .flat_map(|w| {
                (0..v).map(move |i| {
                    (
                        splitmix64(splitmix64(w) ^ i.wrapping_mul(0x9e37_79b9)),
                        w as u32,
                    )
                })
            })
            .collect();
        self.ring.sort_unstable();
    }
}

impl RoutingPolicy for ConsistentHash {
    fn name(&self) -> &'static str {
        "consistent_hash"
    }

    fn reads_kv_usage(&self) -> bool {
        false
    }

    fn route(&mut self, input: &RouteInput, _rng: &mut SimRng) -> Option<Decision> {
        let n = input.workers.len();
        if self.ring.len() != n * self.params.virtual_nodes.0 as usize {
            self.build(n);
        }
        let up = input.up().count();
        if up == 0 {
            return None;
        }
        let prefix = || input.prefix_key(self.params.prefix_blocks.0 as usize);
        let key = match self.params.key {
            HashKey::Session => input
                .request
                .session
                .map(|s| splitmix64(s.id))
                .or_else(prefix),
            HashKey::Prefix => prefix(),
        }
        .unwrap_or_else(|| splitmix64(input.request.id ^ 0xabcd));
        let total: u64 = input.up().map(|w| u64::from(w.outstanding)).sum();
        let bound = (self.params.load_factor.0 * (total + 1) as f64 / up as f64).ceil() as u32;
        let start = self.ring.partition_point(|&(p, _)| p < key);
        let mut first_up = None;
        for k in 0..self.ring.len() {
            let w = self.ring[(start + k) % self.ring.len()].1 as usize;
            let s = &input.workers[w];
            if !s.up {
                continue;
            }
            first_up.get_or_insert(w);
            if s.outstanding < bound {
                let reason = if Some(w) == first_up {
                    "ring owner"
                } else {
                    "ring successor (owner at load bound)"
                };
                return Some(Decision { worker: w, reason });
            }
        }
        // Every up worker at the bound (possible only with c·(total+1)/up < 1): the owner takes it.
        first_up.map(|w| Decision {
            worker: w,
            reason: "ring owner (all at load bound)",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Request;
    use crate::routing::test_support::{route_at_arrival, session_request, snapshots};
    use crate::worker::WorkerSnapshot;

    fn req(session: u64) -> Request {
        session_request(session, session, 0)
    }

    fn go(p: &mut ConsistentHash, r: &Request, ws: &[WorkerSnapshot]) -> usize {
        route_at_arrival(p, r, ws).worker
    }

    #[test]
    fn same_key_same_worker_and_losing_a_worker_moves_only_its_keys() {
        let mut p = ConsistentHash::new(ConsistentHashParams {
            load_factor: Positive(100.0),
            ..Default::default()
        });
        let mut ws = snapshots(&[0; 8]);
        let before: Vec<usize> = (0..2000).map(|s| go(&mut p, &req(s), &ws)).collect();
        assert_eq!(
            before,
            (0..2000)
                .map(|s| go(&mut p, &req(s), &ws))
                .collect::<Vec<_>>()
        );
        ws[3].up = false;
        let after: Vec<usize> = (0..2000).map(|s| go(&mut p, &req(s), &ws)).collect();
        for (b, a) in before.iter().zip(&after) {
            assert_ne!(*a, 3);
            if *b != 3 {
                assert_eq!(a, b, "a key not owned by the lost worker moved");
            }
        }
        let mut counts = [0; 8];
        before.iter().for_each(|&w| counts[w] += 1);
        assert!(counts.iter().all(|&c| c > 150 && c < 350), "{counts:?}");
    }

    #[test]
    fn bounded_load_is_respected() {
        let mut p = ConsistentHash::new(ConsistentHashParams::default());
        let mut load = [0u32; 4];
        for s in 0..400 {
            let w = go(&mut p, &req(s % 3), &snapshots(&load));
            load[w] += 1;
            let total: u32 = load.iter().sum();
            let bound = (1.25 * f64::from(total) / 4.0).ceil() as u32 + 1;
            assert!(load.iter().all(|&l| l <= bound), "{load:?}");
        }
    }
}
