//! The gateway's routing: one small trait, one policy per file, one factory, and the router around them.
//!
//! A policy sees a [`RouteInput`] (the request, a snapshot of every worker as the gateway believes it to
//! be, and, for cache-aware policies, how many leading prompt blocks each worker holds as far as the
//! router's [`view`] knows) and returns the worker to send it to, with a reason. A policy never chooses a
//! worker the gateway believes is down; when none is up it returns `None` and the request is rejected.
//! Ties are broken deterministically (by rotation or by the router's own random stream).

mod active_sequences;
mod cache_index;
mod consistent_hash;
mod dynamo_kv;
mod in_flight;
mod least_kv;
mod least_outstanding;
mod llm_d;
mod llm_d_predicted;
mod lora_affinity;
mod online_linear;
mod pick;
mod power_of_two;
pub mod predicted_latency;
mod prefix_aware;
mod random;
mod round_robin;
pub mod router;
mod session_affinity;
mod sglang_cache_aware;
pub mod spec;
pub mod view;

use crate::hardware::PerfModel;
use crate::request::Request;
use crate::rng::SimRng;
use crate::time::{SimDuration, SimTime};
use crate::worker::WorkerSnapshot;

pub use active_sequences::ActiveSequences;
pub use cache_index::CacheIndex;
pub use consistent_hash::ConsistentHash;
pub use dynamo_kv::DynamoKv;
pub use least_kv::LeastKv;
pub use least_outstanding::LeastOutstanding;
pub use llm_d::{LlmD, LlmDPreciseParams};
pub use llm_d_predicted::LlmDPredicted;
pub use lora_affinity::{LoraAffinity, LoraAffinityParams};
pub use power_of_two::PowerOfTwo;
pub use predicted_latency::PredictedLatency;
pub use prefix_aware::PrefixAware;
pub use random::RandomChoice;
pub use round_robin::RoundRobin;
pub use router::Router;
pub use session_affinity::SessionAffinity;
pub use sglang_cache_aware::SglangCacheAware;
pub use spec::{PolicyConfig, RouterSpec};

/// A routing decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Index of the chosen worker.
    pub worker: usize,
    /// Why, in a few words (for decision logs).
    pub reason: &'static str,
}

/// Everything a policy may look at to route one request.
#[derive(Clone, Copy, Debug)]
pub struct RouteInput<'a> {
    pub request: &'a Request,
    /// Full prompt blocks at the workers' block size (the denominator of prefix-match scores).
    pub prompt_blocks: u32,
    /// Tokens per KV block at the workers.
    pub block_size: u32,
    /// Chain hashes of the prompt's full blocks, in order.
    pub prompt_hashes: &'a [u64],
    /// Per worker, leading prompt blocks it holds as the router's view knows (empty unless the policy
    /// asked for it with [`RoutingPolicy::needs_cache_view`]).
    pub overlaps: &'a [u32],
    /// The worker the view attributes the longest known prefix of the prompt to (the first it saw
    /// holding that prefix's last block, as a radix tree names a node's tenant); `None` without a view
    /// or a match, and for a policy that does not ask for it ([`RoutingPolicy::needs_prefix_owner`]).
    pub prefix_owner: Option<usize>,
    /// The workers, indexed by id.
    pub workers: &'a [WorkerSnapshot],
    pub now: SimTime,
    /// How long ago the engines published the queue, running and KV numbers in `workers`
    /// (`load_refresh`; zero when they are fresh). `outstanding` and `up` are always current.
    pub load_age: SimDuration,
    /// Where copies of the prompt's blocks sit below the GPUs and what moving them costs (`None`
    /// unless the policy asked with [`RoutingPolicy::needs_prefix_sources`] and the fleet has KV
    /// tiers or peer transfer).
    pub prefix_sources: Option<&'a dyn PrefixSources>,
    /// Per worker, where the request's LoRA adapter stands there (empty unless the policy asked
    /// with [`RoutingPolicy::needs_adapter_view`] and the request names an adapter).
    pub adapters: &'a [crate::lora::AdapterLoad],
}

/// What a router can know about copies of a prompt's KV outside a worker's GPU: the tiers' contents
/// (KV events naming the storage medium, as Dynamo's carry, and the shared store's lookup index, as
/// LMCache's) and the links' configured speeds. Link queues are not visible: times are on idle links.
pub trait PrefixSources: std::fmt::Debug {
    /// For worker `w`, the blocks `hashes` (the prompt's blocks after the prefix the router believes
    /// its GPU holds) found in its lower tiers or the shared store, as offers: the first `k` blocks,
    /// the deepest tier among them, and the idle-link time to load them.
    fn tier_offers(&self, w: usize, hashes: &[u64]) -> Vec<crate::tiers::pricing::PrefixOffer>;
    /// The idle-link time to pull `blocks` blocks from worker `from`'s GPU into worker `to`'s, or
    /// `None` when peer transfer is off or the two share no link.
    fn peer_time(&self, from: usize, to: usize, blocks: usize) -> Option<SimDuration>;
}

impl RouteInput<'_> {
    /// A key identifying the prompt's first `blocks` blocks (the chain hash of the last of them), or `None`
    /// if the prompt has no full block.
    pub fn prefix_key(&self, blocks: usize) -> Option<u64> {
        let n = blocks.min(self.prompt_hashes.len());
        (n > 0).then(|| self.prompt_hashes[n - 1])
    }

    /// Overlap of worker `w` in blocks (0 without a view).
    pub fn overlap(&self, w: usize) -> u32 {
        self.overlaps.get(w).copied().unwrap_or(0)
    }

    /// Workers believed up.
    pub fn up(&self) -> impl Iterator<Item = &WorkerSnapshot> {
        self.workers.iter().filter(|w| w.up)
    }
}

/// A routing policy.
pub trait RoutingPolicy: Send {
    /// The policy's name as written in scenario files.
    fn name(&self) -> &'static str;

    /// Whether the policy reads [`RouteInput::overlaps`] (the router then maintains a cache view).
    fn needs_cache_view(&self) -> bool {
        false
    }

    /// Whether the policy reads [`RouteInput::prefix_owner`] (an approximate view that no policy asks
    /// for it may keep less, [`view::CacheView::with_owner`]).
    fn needs_prefix_owner(&self) -> bool {
        false
    }

    /// Whether the policy reads the workers' KV use ([`WorkerSnapshot::kv_utilization`],
    /// [`WorkerSnapshot::used_blocks`]). Assumed unless a policy says otherwise: the engine's decode
    /// fast path defers allocations between events only for a policy that does not
    /// (`engine/steady_run.rs`), so a wrong `false` would let such a policy see stale KV use.
    fn reads_kv_usage(&self) -> bool {
        true
    }

    /// Whether the policy reads [`RouteInput::prefix_sources`] (the engine then describes the tiers'
    /// contents and the interconnect to it).
    fn needs_prefix_sources(&self) -> bool {
        false
    }

    /// Whether the policy reads [`RouteInput::adapters`] (the engine then describes each worker's
    /// adapters for a request that names one).
    fn needs_adapter_view(&self) -> bool {
        false
    }

    /// Picks a worker; `None` if no worker is up.
    fn route(&mut self, input: &RouteInput, rng: &mut SimRng) -> Option<Decision>;

    /// Told once the router has sent a request to a worker (after [`RoutingPolicy::route`] chose it).
    fn on_routed(&mut self, _routed: &Routed) {}

    /// Told when the first output token of `request` (an id) came back from `worker`: its prefill is done.
    fn on_first_token(&mut self, _request: u64, _worker: usize) {}

    /// Told when a request routed by this policy has finished on `worker`.
    fn on_finished(&mut self, _request: &Request, _worker: usize) {}

    /// Told when a request routed to `worker` ended without finishing there (rejected after routing,
    /// lost in a crash, abandoned): whatever the policy holds for it must go.
    fn on_request_failed(&mut self, _request: u64, _worker: usize) {}

    /// Told when `worker` went down: state the policy keeps about that worker (requests in flight,
    /// cached-prefix memory) must be forgotten, as a real router does when a worker leaves its pool.
    fn on_worker_down(&mut self, _worker: usize) {}

    /// Told once, before the first request, what the gateway is configured with about the fleet: each
    /// worker's step model and engine limits, and the latency targets.
    fn on_fleet(&mut self, _fleet: &FleetInfo) {}

    /// Told that worker `w` now runs another configuration (a model swap): its step model and KV
    /// capacity are `profile` from now on. Nothing in flight on it (a worker swaps only when idle).
    fn on_worker_profile(&mut self, _w: usize, _profile: &WorkerProfile) {}

    /// Told, with the time, what the gateway saw of a request it routed: its first token, then its
    /// end. The same information as [`RoutingPolicy::on_first_token`] and
    /// [`RoutingPolicy::on_finished`], timed, for policies that learn latencies.
    fn on_observed(&mut self, _obs: &Observation) {}
}

/// What the gateway is configured with about one worker: its step model and engine limits. Static
/// deployment facts (a real gateway is told the model server's hardware and flags), not live state.
#[derive(Clone, Debug)]
pub struct WorkerProfile {
    pub perf: PerfModel,
    /// Token budget of one engine step.
    pub max_num_batched_tokens: u32,
    /// Sequences in one step at most.
    pub max_num_seqs: u32,
    /// Tokens per KV block.
    pub block_size: u32,
    /// KV blocks of the worker.
    pub total_blocks: u32,
}

/// The latency targets requests are routed against (the scenario's `[slo]`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LatencyTargets {
    pub ttft: Option<SimDuration>,
    pub tpot: Option<SimDuration>,
}

/// What [`RoutingPolicy::on_fleet`] tells a policy.
#[derive(Clone, Copy, Debug)]
pub struct FleetInfo<'a> {
    /// Indexed by worker id.
    pub workers: &'a [WorkerProfile],
    pub targets: LatencyTargets,
}

/// A latency observation the gateway makes on a request it routed (a streaming response's first chunk,
/// its end of stream).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Observation {
    /// The first output token of `request` came back from `worker` at `at`.
    FirstToken {
        request: u64,
        worker: usize,
        at: SimTime,
    },
    /// `request` finished on `worker` at `at`, having streamed `output_tokens` tokens.
    Finished {
        request: u64,
        worker: usize,
        at: SimTime,
        output_tokens: u32,
    },
}

/// What the router tells a policy about a request it has just sent.
#[derive(Clone, Copy, Debug)]
pub struct Routed<'a> {
    pub request: &'a Request,
    pub worker: usize,
    /// Chain hashes of the prompt's full blocks, in order.
    pub prompt_hashes: &'a [u64],
    /// Leading prompt blocks the router's view believed cached on `worker` when it chose it.
    pub overlap: u32,
    /// Tokens per KV block at the workers.
    pub block_size: u32,
    pub now: SimTime,
}

#[cfg(test)]
mod router_tests;

#[cfg(test)]
pub(crate) mod test_support {
    use super::*;

    pub fn snapshots(outstanding: &[u32]) -> Vec<WorkerSnapshot> {
        outstanding
            .iter()
            .enumerate()
            .map(|(id, &o)| WorkerSnapshot {
                id,
                up: true,
                outstanding: o,
                queued: 0,
                running: o,
                kv_utilization: 0.0,
                used_blocks: 0,
                total_blocks: 1000,
            })
            .collect()
    }

    pub fn request(id: u64) -> Request {
        Request::new(
            id,
            None,
            SimTime::ZERO,
            1,
            vec![crate::request::Segment {
                content: id,
                tokens: 10,
            }],
        )
    }

    /// Routes `req` over `workers` with the given overlaps (in blocks) and `prompt_blocks`.
    pub fn route_with(
        p: &mut dyn RoutingPolicy,
        req: &Request,
        workers: &[WorkerSnapshot],
        overlaps: &[u32],
        prompt_blocks: u32,
        rng: &mut SimRng,
    ) -> Option<Decision> {
        let hashes: Vec<u64> = (0..u64::from(prompt_blocks))
            .map(|b| b + 1000 * req.id)
            .collect();
        p.route(
            &RouteInput {
                request: req,
                prompt_blocks,
                block_size: 16,
                prompt_hashes: &hashes,
                overlaps,
                prefix_owner: None,
                workers,
                now: SimTime::ZERO,
                load_age: SimDuration::ZERO,
                prefix_sources: None,
                adapters: &[],
            },
            rng,
        )
    }

    /// A 10-token request of `session` (id `id`) arriving at `arrival_s` seconds.
    pub fn session_request(id: u64, session: u64, arrival_s: u64) -> Request {
        Request::new(
            id,
            Some(crate::request::SessionRef {
                id: session,
                turn: 0,
            }),
            SimTime(arrival_s * 1_000_000_000),
            1,
            vec![crate::request::Segment {
                content: 1,
                tokens: 10,
            }],
        )
    }

    /// Routes `req` at its arrival time, with no cache information; panics if no worker is up.
    pub fn route_at_arrival(
        p: &mut dyn RoutingPolicy,
        req: &Request,
        workers: &[WorkerSnapshot],
    ) -> Decision {
        let input = RouteInput {
            request: req,
            prompt_blocks: 0,
            block_size: 16,
            prompt_hashes: &[],
            overlaps: &[],
            prefix_owner: None,
            workers,
            now: req.arrival,
            load_age: SimDuration::ZERO,
            prefix_sources: None,
            adapters: &[],
        };
        p.route(&input, &mut crate::rng::from_u64(0)).unwrap()
    }

    /// Routes with no cache information.
    pub fn route(
        p: &mut dyn RoutingPolicy,
        req: &Request,
        workers: &[WorkerSnapshot],
        rng: &mut SimRng,
    ) -> Option<Decision> {
        route_with(p, req, workers, &[], 0, rng)
    }
}
