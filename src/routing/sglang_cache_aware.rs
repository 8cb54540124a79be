//! `sglang_cache_aware`: the cache-aware policy of SGLang's router (`sgl-model-gateway`, formerly
//! `sgl-router`), as read in `sgl-project/sglang` `sgl-model-gateway/src/policies/cache_aware.rs` (commit
//! 053b63ff) and `tree.rs` (commit 03744dbe), November 2026.
//!
//! If the load is imbalanced, `max − min > balance_abs_threshold` **and** `max > balance_rel_threshold ×
//! min` (load = requests in flight, as the router counts them), route to the least loaded worker.
//! Otherwise find the longest prefix of the prompt in the router's approximate tree; if its match rate
//! (matched / prompt blocks) exceeds `cache_threshold`, route to the worker that tree node names, else to
//! the least loaded worker. "Least loaded" ties go to the lowest worker id (the first minimum in worker
//! order). Older releases sent weak matches to the worker with the smallest tree instead.
//!
//! **Which worker the tree names.** SGLang's tree is over the request's characters (`tree.rs`: children
//! keyed by `char`, text split at any character). A match that leaves the known text ends part-way
//! into the child whose text shares the request's next characters, and the tree names that child's
//! tenant: the worker its text was first sent to (cached at the node's creation, kept on splits). So a
//! request that shares a system prompt with earlier ones, then continues with text of its own, goes to
//! the worker that created a branch after that prompt, not to the worker the prompt itself was first
//! sent to. Which branch shares its first characters depends on text fleetsim does not have; with
//! `tree = "characters"` (the default) the policy keeps, per branch point (the longest known prefix,
//! in blocks), how many continuations each worker created there, and draws the named worker in
//! proportion among the workers that hold the prefix; with no branch yet, the prefix's own tenant
//! is named. `tree = "blocks"` names the prefix's tenant always (a tree over whole token blocks, the
//! emulation before issue 42).
//!
//! The prefix's tenant: fleetsim's router view keeps the first worker it saw holding each block
//! ([`RouteInput::prefix_owner`]); when that worker does not hold the whole longest prefix, the
//! lowest-id worker that does is chosen.
//!
//! Defaults 64 / 1.5 / 0.3 are the gateway's command-line defaults (what an operator launching it gets);
//! the library's `CacheAwareConfig::default()` says 32 / 1.1 / 0.5 (set them to compare). The tree's
//! size and expiry (2^26 characters per worker at `chars_per_token`, pruned every 120 s) are the
//! router's `approx_capacity_blocks` / `approx_prune_interval`, whose defaults for this policy follow
//! them.

use rand::Rng;
use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Serialize};

use super::pick::min_from;
use super::{Decision, RouteInput, Routed, RoutingPolicy};
use crate::config::{Fraction, NonNegative, Positive};
use crate::rng::SimRng;
use crate::time::{SimDuration, SimTime};

/// What the router's tree is made of, for the worker it names when a request continues past known
/// text.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum TreeText {
    /// SGLang's: characters; a continuation goes to a worker that created a branch after the prefix.
    #[default]
    Characters,
    /// Whole token blocks: the prefix's own tenant is named.
    Blocks,
}

/// Parameters of `sglang_cache_aware`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SglangParams {
    /// The load is imbalanced (and the least loaded worker gets the request) when the most and least
    /// loaded workers' outstanding requests differ by more than this…
    #[serde(default = "default_abs")]
    pub balance_abs_threshold: NonNegative,
    /// …and the most loaded has more than this many times the least loaded's.
    #[serde(default = "default_rel")]
    pub balance_rel_threshold: Positive,
    /// Fraction (0–1) of the prompt's blocks the longest match in the router's tree must exceed for the
    /// request to go to the worker the match names; below it, the request goes to the least loaded
    /// worker.
    #[serde(default = "default_cache")]
    pub cache_threshold: Fraction,
    /// What the tree is made of (which worker a continuation is sent to).
    #[serde(default)]
    pub tree: TreeText,
    /// Characters of request text per token: converts the tree's 2^26-character size to blocks.
    #[serde(
        default = "default_chars_per_token",
        deserialize_with = "chars_per_token"
    )]
    pub chars_per_token: Positive,
}

fn default_abs() -> NonNegative {
    NonNegative(64.0)
}
fn default_rel() -> Positive {
    Positive(1.5)
}
fn default_cache() -> Fraction {
    Fraction(0.3)
}
fn default_chars_per_token() -> Positive {
    Positive(4.0)
}

/// [`Positive`], with the key named in the error (a value error inside `[router]` is reported at the
/// table's header).
fn chars_per_token<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Positive, D::Error> {
    use serde::de::Error;
    Positive::deserialize(d)
        .map_err(|e| D::Error::custom(format!("`chars_per_token`: {}", e.to_string().trim())))
}

impl Default for SglangParams {
    fn default() -> Self {
        SglangParams {
            balance_abs_threshold: default_abs(),
            balance_rel_threshold: default_rel(),
            cache_threshold: default_cache(),
            tree: TreeText::default(),
            chars_per_token: default_chars_per_token(),
        }
    }
}

impl SglangParams {
    /// The tree's size per worker (`--max-tree-size`, 2^26 characters) in blocks of `block_size`
    /// tokens, at least one.
    pub fn tree_blocks(&self, block_size: u32) -> u32 {
        const TREE_CHARS: f64 = (1u64 << 26) as f64;
        let blocks = TREE_CHARS / (self.chars_per_token.0 * f64::from(block_size.max(1)));
        blocks.clamp(1.0, f64::from(u32::MAX)) as u32
    }
}

/// SGLang's tree's eviction interval (`--eviction-interval`): branch points untouched for two of them
/// are forgotten.
const SWEEP: SimDuration = SimDuration::from_secs(120);

/// The continuations each worker created after one branch point.
#[derive(Clone, Debug, Default)]
struct Branches {
    /// Per worker id, continuations it created here.
    created: Vec<u32>,
    /// Read or written since the last sweep.
    touched: bool,
}

/// SGLang's cache-aware routing.
#[derive(Debug)]
pub struct SglangCacheAware {
    params: SglangParams,
    /// Per branch point (the chain hash of the last block of a known prefix), who continued past it.
    branches: HashMap<u64, Branches>,
    /// The branch point of the request routed last (read by `on_routed`).
    last_point: Option<u64>,
    next_sweep: Option<SimTime>,
}

impl SglangCacheAware {
    /// A policy with `params`.
    pub fn new(params: SglangParams) -> Self {
        SglangCacheAware {
            params,
            branches: HashMap::default(),
            last_point: None,
            next_sweep: None,
        }
    }

    /// The least loaded up worker, ties to the lowest id.
    fn least_loaded(input: &RouteInput) -> Option<usize> {
        min_from(input.workers, 0, |w| w.outstanding)
    }

    /// Forgets branch points untouched since the last sweep (the tree's LRU eviction forgets old
    /// branches; this bounds the memory the same way).
    fn sweep(&mut self, now: SimTime) {
        let due = *self.next_sweep.get_or_insert(now + SWEEP);
        if now < due {
            return;
        }
        self.branches.retain(|_, b| std::mem::take(&mut b.touched));
        self.next_sweep = Some(now + SWEEP);
    }

    /// The worker a character tree names for a request whose longest known prefix ends at branch
    /// point `point`: a creator of a continuation there, drawn in proportion to how many it created,
    /// among the up workers `holds` (those holding the whole prefix); `None` without one.
    fn branch_creator(
        &mut self,
        point: u64,
        n: usize,
        holds: impl Fn(usize) -> bool,
        rng: &mut SimRng,
    ) -> Option<usize> {
        let b = self.branches.get_mut(&point)?;
        b.touched = true;
        let weight = |w: usize| if holds(w) { b.created[w] } else { 0 };
        let total: u32 = (0..n.min(b.created.len())).map(weight).sum();
        if total == 0 {
            return None;
        }
        let mut x = rng.random_range(0..total);
        for w in 0..n.min(b.created.len()) {
            let c = weight(w);
            if x < c {
                return Some(w);
            }
            x -= c;
        }
        None
    }
}

impl RoutingPolicy for SglangCacheAware {
    fn name(&self) -> &'static str {
        "sglang_cache_aware"
    }

    fn reads_kv_usage(&self) -> bool {
        false
    }

    fn needs_cache_view(&self) -> bool {
        true
    }

    fn needs_prefix_owner(&self) -> bool {
        true
    }

    fn route(&mut self, input: &RouteInput, rng: &mut SimRng) -> Option<Decision> {
        let longest = input.up().map(|w| input.overlap(w.id)).max()?;
        // A branch point: a known prefix the prompt continues past.
        self.last_point = (self.params.tree == TreeText::Characters
            && longest > 0
            && longest < input.prompt_blocks)
            .then(|| input.prompt_hashes.get(longest as usize - 1).copied())
            .flatten();
        if self.params.tree == TreeText::Characters {
            self.sweep(input.now);
        }
        let max = f64::from(input.up().map(|w| w.outstanding).max()?);
        let min = f64::from(input.up().map(|w| w.outstanding).min()?);
        let p = &self.params;
        if max - min > p.balance_abs_threshold.0 && max > p.balance_rel_threshold.0 * min {
            return Self::least_loaded(input).map(|worker| Decision {
                worker,
                reason: "imbalanced: least loaded",
            });
        }
        let rate = f64::from(longest) / f64::from(input.prompt_blocks.max(1));
        if longest > 0 && rate > p.cache_threshold.0 {
            let holds = |w: usize| {
                input.workers.get(w).is_some_and(|x| x.up) && input.overlap(w) == longest
            };
            let branch = match self.last_point {
                Some(point) => self.branch_creator(point, input.workers.len(), holds, rng),
                None => None,
            };
            let (worker, reason) = match (branch, input.prefix_owner) {
                (Some(w), _) => (w, "match rate above cache_threshold: branch tenant"),
                (None, Some(w)) if holds(w) => (w, "match rate above cache_threshold"),
                _ => (
                    input.up().map(|w| w.id).find(|&w| holds(w))?,
                    "match rate above cache_threshold",
                ),
            };
            return Some(Decision { worker, reason });
        }
        Self::least_loaded(input).map(|worker| Decision {
            worker,
            reason: "weak match: least loaded",
        })
    }

    fn on_routed(&mut self, r: &Routed) {
        if let Some(point) = self.last_point.take() {
            let b = self.branches.entry(point).or_default();
            if b.created.len() <= r.worker {
                b.created.resize(r.worker + 1, 0);
            }
            b.created[r.worker] += 1;
            b.touched = true;
        }
    }

    fn on_worker_down(&mut self, worker: usize) {
        // The gateway removes the worker's tenant from the tree: its branches go with it.
        for b in self.branches.values_mut() {
            if let Some(c) = b.created.get_mut(worker) {
                *c = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::from_u64;
    use crate::routing::test_support::{request, route_with, snapshots};
    use crate::time::SimTime;
    use crate::worker::WorkerSnapshot;

    /// Routes a 10-block prompt over `ws` with `overlaps`, the view naming `owner` for its longest prefix.
    fn route_owned(
        p: &mut SglangCacheAware,
        ws: &[WorkerSnapshot],
        overlaps: &[u32],
        owner: Option<usize>,
    ) -> usize {
        let req = request(7);
        let hashes: Vec<u64> = (0..10).collect();
        let input = RouteInput {
            request: &req,
            prompt_blocks: 10,
            block_size: 16,
            prompt_hashes: &hashes,
            overlaps,
            prefix_owner: owner,
            workers: ws,
            now: SimTime::ZERO,
            load_age: crate::time::SimDuration::ZERO,
            prefix_sources: None,
            adapters: &[],
        };
        p.route(&input, &mut from_u64(0)).unwrap().worker
    }

    #[test]
    fn balance_first_then_cache_then_load() {
        let mut p = SglangCacheAware::new(SglangParams::default());
        let mut rng = from_u64(0);
        // Balanced: a 50% match (> 0.3) wins even on the busier worker.
        let ws = snapshots(&[10, 2, 3]);
        assert_eq!(
            route_with(&mut p, &request(1), &ws, &[5, 0, 0], 10, &mut rng)
                .unwrap()
                .worker,
            0
        );
        // Weak match (0.2, not above 0.3): least loaded.
        assert_eq!(
            route_with(&mut p, &request(1), &ws, &[2, 0, 0], 10, &mut rng)
                .unwrap()
                .worker,
            1
        );
        // Exactly 0.3 is not above the threshold either.
        assert_eq!(
            route_with(&mut p, &request(1), &ws, &[3, 0, 0], 10, &mut rng)
                .unwrap()
                .worker,
            1
        );
        // Imbalanced (100 − 2 > 64 and 100 > 1.5·2): least loaded despite a full match.
        let ws = snapshots(&[100, 2, 3]);
        assert_eq!(
            route_with(&mut p, &request(1), &ws, &[10, 0, 0], 10, &mut rng)
                .unwrap()
                .worker,
            1
        );
        // A spread of 64 is not above the absolute threshold: the match wins.
        let ws = snapshots(&[66, 2, 3]);
        assert_eq!(
            route_with(&mut p, &request(1), &ws, &[10, 0, 0], 10, &mut rng)
                .unwrap()
                .worker,
            0
        );
    }

    #[test]
    fn least_loaded_ties_go_to_the_lowest_id() {
        let mut p = SglangCacheAware::new(SglangParams::default());
        let mut rng = from_u64(0);
        let ws = snapshots(&[3, 1, 1, 1]);
        for _ in 0..5 {
            assert_eq!(
                route_with(&mut p, &request(1), &ws, &[0; 4], 10, &mut rng)
                    .unwrap()
                    .worker,
                1
            );
        }
    }

    #[test]
    fn a_shared_prefix_goes_to_the_worker_the_view_names() {
        let mut p = SglangCacheAware::new(SglangParams::default());
        let ws = snapshots(&[0, 0, 0, 0]);
        // Workers 0 and 2 hold all 10 blocks; the prefix was first sent to worker 2.
        assert_eq!(
            route_owned(&mut p, &ws, &[10, 0, 10, 0], Some(2)),
            2,
            "the owner, not the lowest id"
        );
        // The owner holds only 6 of them (its memory pruned the rest): the lowest-id full holder.
        assert_eq!(route_owned(&mut p, &ws, &[10, 0, 6, 10], Some(2)), 0);
        // A down owner is never chosen.
        let mut down = snapshots(&[0, 0, 0, 0]);
        down[2].up = false;
        assert_eq!(route_owned(&mut p, &down, &[0, 0, 10, 10], Some(2)), 3);
    }

    /// Routes a 10-block prompt whose first 6 blocks are a shared prefix (hashes 0..6) and whose rest
    /// is `tail`'s own, over `ws` with `overlaps`, the view naming `owner`; then, with `sent`, tells
    /// the policy the request went there. Returns the choice.
    fn route_tail(
        p: &mut SglangCacheAware,
        ws: &[WorkerSnapshot],
        overlaps: &[u32],
        owner: Option<usize>,
        tail: u64,
        sent: Option<usize>,
        rng: &mut SimRng,
    ) -> usize {
        let req = request(tail);
        let hashes: Vec<u64> = (0..6).chain((0..4).map(|b| 1000 * tail + b)).collect();
        let input = RouteInput {
            request: &req,
            prompt_blocks: 10,
            block_size: 16,
            prompt_hashes: &hashes,
            overlaps,
            prefix_owner: owner,
            workers: ws,
            now: SimTime::ZERO,
            load_age: crate::time::SimDuration::ZERO,
            prefix_sources: None,
            adapters: &[],
        };
        let chosen = p.route(&input, rng).unwrap().worker;
        if let Some(worker) = sent {
            p.on_routed(&Routed {
                request: &req,
                worker,
                prompt_hashes: &hashes,
                overlap: overlaps[worker],
                block_size: 16,
                now: SimTime::ZERO,
            });
        }
        chosen
    }

    /// Workers 0 and 1 hold a 6-block system prompt (match rate 0.6 > 0.3), first sent to worker 0;
    /// worker 2 holds nothing; loads are balanced. A request that continues past the prompt:
    /// - with no earlier continuation, both trees name the prompt's tenant, worker 0;
    /// - once worker 1 created a continuation there (an earlier request sent to it, say by the
    ///   balance rule), the character tree names worker 1 (the only creator holding the prompt), the
    ///   block tree still worker 0;
    /// - a continuation created by worker 2, which does not hold the prompt, is never named.
    #[test]
    fn a_continuation_goes_to_a_worker_that_created_a_branch_after_the_prefix() {
        let ws = snapshots(&[1, 1, 1]);
        let overlaps = [6, 6, 0];
        let mut rng = from_u64(0);
        let mut chars = SglangCacheAware::new(SglangParams::default());
        let mut blocks = SglangCacheAware::new(SglangParams {
            tree: TreeText::Blocks,
            ..Default::default()
        });
        for p in [&mut chars, &mut blocks] {
            // The first continuation: no branch yet; recorded as sent to worker 1.
            assert_eq!(
                route_tail(p, &ws, &overlaps, Some(0), 1, Some(1), &mut rng),
                0
            );
            // A continuation created by worker 2, which does not hold the prefix.
            route_tail(p, &ws, &overlaps, Some(0), 2, Some(2), &mut rng);
        }
        for tail in 3..20 {
            assert_eq!(
                route_tail(&mut chars, &ws, &overlaps, Some(0), tail, Some(1), &mut rng),
                1
            );
            assert_eq!(
                route_tail(
                    &mut blocks,
                    &ws,
                    &overlaps,
                    Some(0),
                    tail,
                    Some(1),
                    &mut rng
                ),
                0
            );
        }
    }

    /// With continuations created by worker 0 (once) and worker 1 (three times), the character tree
    /// names worker 1 three times in four: over 400 requests (not recorded), 300 expected, and
    /// worker 2 (no branch) never.
    #[test]
    fn branch_creators_are_drawn_in_proportion() {
        let ws = snapshots(&[1, 1, 1]);
        let overlaps = [6, 6, 6];
        let mut rng = from_u64(1);
        let mut p = SglangCacheAware::new(SglangParams::default());
        for (tail, sent) in [(1, 0), (2, 1), (3, 1), (4, 1)] {
            route_tail(&mut p, &ws, &overlaps, Some(2), tail, Some(sent), &mut rng);
        }
        let mut picks = [0u32; 3];
        for tail in 5..405 {
            picks[route_tail(&mut p, &ws, &overlaps, Some(2), tail, None, &mut rng)] += 1;
        }
        assert_eq!(picks[2], 0, "{picks:?}");
        assert!((260..340).contains(&picks[1]), "{picks:?}");
    }

    /// The tree's size in blocks follows `chars_per_token`: 2^26 characters at 4 per token are 2^24
    /// tokens, 1,048,576 blocks of 16; at 3 per token, 1,398,101.
    #[test]
    fn the_tree_size_converts_characters_at_chars_per_token() {
        assert_eq!(SglangParams::default().tree_blocks(16), 1_048_576);
        let dense = SglangParams {
            chars_per_token: Positive(3.0),
            ..Default::default()
        };
        assert_eq!(dense.tree_blocks(16), 1_398_101);
    }
}
