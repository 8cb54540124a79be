//! The router: a policy, what it knows (its cache view and possibly stale load signals), and a record
//! of its decisions.

use serde::{Deserialize, Serialize};

use super::spec::RouterSpec;
use super::view::CacheView;
use super::{Decision, FleetInfo, Observation, RouteInput, Routed, RoutingPolicy};
use crate::request::Request;
use crate::rng::{self, SimRng};
use crate::time::{SimDuration, SimTime};
use crate::worker::WorkerSnapshot;
use crate::worker::kv_cache::KvEvent;

/// How well the router's cache picture matched the workers' real caches, over all decisions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ViewAccuracy {
    /// Decisions made.
    pub decisions: u64,
    /// Decisions where the router expected more cached prompt blocks on the chosen worker than it had.
    pub expected_hit_missing: u64,
    /// Blocks expected but not there, summed.
    pub expected_hit_missing_blocks: u64,
    /// Decisions where the chosen worker had more cached prompt blocks than the router knew.
    pub unexpected_hit: u64,
    /// Blocks there but not expected, summed.
    pub unexpected_hit_blocks: u64,
}

/// One routing decision, for the decision log.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DecisionRecord {
    pub time_s: f64,
    pub request: u64,
    pub session: Option<u64>,
    pub worker: usize,
    pub reason: &'static str,
    pub prompt_blocks: u32,
    /// Cached prompt blocks the router expected on the chosen worker.
    pub expected_blocks: u32,
    /// Cached prompt blocks the chosen worker really had.
    pub actual_blocks: u32,
    /// The chosen worker's outstanding requests before this one.
    pub outstanding: u32,
}

/// A policy with its knowledge of the fleet.
pub struct Router {
    spec: RouterSpec,
    policy: Box<dyn RoutingPolicy>,
    view: Option<CacheView>,
    /// Leading prompt blocks the approximate view records per routed request (`None`: all).
    indexed_blocks: Option<u32>,
    block_size: u32,
    rng: SimRng,
    stale: Vec<WorkerSnapshot>,
    last_refresh: Option<SimTime>,
    overlaps: Vec<u32>,
    /// Per worker, where the request about to be routed stands with its LoRA adapter (filled by the
    /// engine through [`Router::adapter_loads`] when the policy asks; empty otherwise).
    adapters: Vec<crate::lora::AdapterLoad>,
    /// Expected cached blocks on the worker chosen last (set by `route`, read by `record`).
    last_expected: u32,
    pub accuracy: ViewAccuracy,
    pub log: Vec<DecisionRecord>,
}

impl Router {
    /// A router for a fleet whose workers hold `kv_blocks[w]` KV blocks of `block_size` tokens, drawing
    /// from the `router` stream.
    pub fn new(spec: &RouterSpec, seed: u64, kv_blocks: &[u32], block_size: u32) -> Self {
        let policy = spec.policy.build();
        let view = policy.needs_cache_view().then(|| {
            let s = &spec.settings;
            let defaults: Vec<_> = kv_blocks
                .iter()
                .map(|&b| spec.policy.default_approx_memory(b, block_size))
                .collect();
            let capacity = match s.approx_capacity_blocks {
                Some(c) => vec![c.0; kv_blocks.len()],
                None => defaults.iter().map(|d| d.0).collect(),
            };
            let prune = s
                .approx_prune_interval
                .or_else(|| defaults.first().and_then(|d| d.1));
            CacheView::new(spec.view(), s.event_delay, s.approx_ttl, capacity)
                .with_prune_interval(prune)
                .with_owner(policy.needs_prefix_owner())
        });
        Router {
            spec: spec.clone(),
            policy,
            view,
            indexed_blocks: spec.policy.approx_indexed_blocks(block_size),
            block_size,
            rng: rng::stream(seed, "router"),
            stale: Vec::new(),
            last_refresh: None,
            overlaps: Vec::new(),
            adapters: Vec::new(),
            last_expected: 0,
            accuracy: ViewAccuracy::default(),
            log: Vec::new(),
        }
    }

    /// The policy's name.
    pub fn policy_name(&self) -> &'static str {
        self.policy.name()
    }

    /// The cache view's name, or `None` if the policy does not look at caches.
    pub fn view_name(&self) -> Option<&'static str> {
        self.view.as_ref().map(|v| v.kind().as_str())
    }

    /// Whether the cache view keeps its block → workers index ([`CacheView::with_owner`]); `None`
    /// without a view.
    pub fn view_keeps_index(&self) -> Option<bool> {
        self.view.as_ref().map(CacheView::keeps_index)
    }

    /// Whether the workers' KV events should be recorded and passed to [`Router::on_kv_events`].
    pub fn wants_kv_events(&self) -> bool {
        self.view.as_ref().is_some_and(CacheView::wants_kv_events)
    }

    /// Worker `w`'s cache events at `now`.
    pub fn on_kv_events(&mut self, now: SimTime, w: usize, events: impl Iterator<Item = KvEvent>) {
        if let Some(v) = &mut self.view {
            v.on_kv_events(now, w, events);
        }
    }

    /// Chooses a worker for `request` given the workers' true state `fresh`; `prompt_hashes` are the
    /// prompt's full-block hashes at the workers' block size.
    pub fn route(
        &mut self,
        now: SimTime,
        request: &Request,
        prompt_hashes: &[u64],
        fresh: &[WorkerSnapshot],
    ) -> Option<Decision> {
        self.route_with(now, request, prompt_hashes, fresh, None)
    }

    /// Whether the policy reads the workers' KV use ([`RoutingPolicy::reads_kv_usage`]).
    pub fn reads_kv_usage(&self) -> bool {
        self.policy.reads_kv_usage()
    }

    /// Whether the policy wants [`Router::route_with`]'s `prefix_sources`.
    pub fn wants_prefix_sources(&self) -> bool {
        self.policy.needs_prefix_sources()
    }

    /// Whether the policy reads the workers' adapters ([`super::RoutingPolicy::needs_adapter_view`]).
    pub fn wants_adapter_view(&self) -> bool {
        self.policy.needs_adapter_view()
    }

    /// The adapter view the next [`Router::route_with`] passes on, to be filled per worker (or left
    /// empty) by the caller.
    pub fn adapter_loads(&mut self) -> &mut Vec<crate::lora::AdapterLoad> {
        &mut self.adapters
    }

    /// [`Router::route`], telling the policy where copies of the prompt's KV sit below the GPUs.
    pub fn route_with(
        &mut self,
        now: SimTime,
        request: &Request,
        prompt_hashes: &[u64],
        fresh: &[WorkerSnapshot],
        prefix_sources: Option<&dyn super::PrefixSources>,
    ) -> Option<Decision> {
        let interval = self.spec.settings.load_refresh;
        let workers: &[WorkerSnapshot] = if interval.0 == 0 {
            fresh
        } else {
            let due = self.last_refresh.is_none_or(|t| now >= t + interval);
            if due || self.stale.len() != fresh.len() {
                self.stale.clear();
                self.stale.extend_from_slice(fresh);
                self.last_refresh = Some(now);
            } else {
                // Between refreshes only the gateway's own counts are current.
                for (s, f) in self.stale.iter_mut().zip(fresh) {
                    s.up = f.up;
                    s.outstanding = f.outstanding;
                }
            }
            &self.stale
        };
        self.overlaps.clear();
        let mut prefix_owner = None;
        if let Some(v) = &mut self.view {
            v.advance(now);
            prefix_owner = v.overlaps_and_owner(prompt_hashes, &mut self.overlaps);
        }
        let load_age = match self.last_refresh {
            Some(t) if interval.0 > 0 => now - t,
            _ => SimDuration::ZERO,
        };
        let input = RouteInput {
            request,
            prompt_blocks: prompt_hashes.len() as u32,
            block_size: self.block_size,
            prompt_hashes,
            overlaps: &self.overlaps,
            prefix_owner,
            workers,
            now,
            load_age,
            prefix_sources,
            adapters: &self.adapters,
        };
        let decision = self.policy.route(&input, &mut self.rng)?;
        debug_assert!(
            fresh[decision.worker].up,
            "policy chose a worker believed down"
        );
        self.last_expected = self.overlaps.get(decision.worker).copied().unwrap_or(0);
        Some(decision)
    }

    /// Records the decision just made and tells the policy the request was sent: `actual` is how many
    /// prompt blocks the chosen worker really held.
    pub fn record(
        &mut self,
        now: SimTime,
        request: &Request,
        d: Decision,
        prompt_hashes: &[u64],
        actual: u32,
        outstanding: u32,
    ) {
        let expected = self.last_expected;
        let a = &mut self.accuracy;
        a.decisions += 1;
        if self.view.is_some() {
            if expected > actual {
                a.expected_hit_missing += 1;
                a.expected_hit_missing_blocks += u64::from(expected - actual);
            } else if actual > expected {
                a.unexpected_hit += 1;
                a.unexpected_hit_blocks += u64::from(actual - expected);
            }
        }
        if (self.log.len() as u32) < self.spec.settings.log_decisions {
            self.log.push(DecisionRecord {
                time_s: now.as_secs_f64(),
                request: request.id,
                session: request.session.map(|s| s.id),
                worker: d.worker,
                reason: d.reason,
                prompt_blocks: prompt_hashes.len() as u32,
                expected_blocks: expected,
                actual_blocks: actual,
                outstanding,
            });
        }
        if let Some(v) = &mut self.view {
            let n = self
                .indexed_blocks
                .map_or(prompt_hashes.len(), |n| prompt_hashes.len().min(n as usize));
            v.on_routed(now, d.worker, &prompt_hashes[..n]);
        }
        self.policy.on_routed(&Routed {
            request,
            worker: d.worker,
            prompt_hashes,
            overlap: expected,
            block_size: self.block_size,
            now,
        });
    }

    /// Tells the policy what the gateway is configured with about the fleet (before the first request).
    pub fn set_fleet(&mut self, fleet: &FleetInfo) {
        self.policy.on_fleet(fleet);
    }

    /// Worker `w` now runs the configuration `profile` describes (a model swap).
    pub fn set_worker_profile(&mut self, w: usize, profile: &super::WorkerProfile) {
        self.policy.on_worker_profile(w, profile);
    }

    /// The first token of `request` (an id) routed by this router came back from `worker` at `now`.
    pub fn on_first_token(&mut self, now: SimTime, request: u64, worker: usize) {
        self.policy.on_first_token(request, worker);
        self.policy.on_observed(&Observation::FirstToken {
            request,
            worker,
            at: now,
        });
    }

    /// Whether the router's cache picture is the workers' truth.
    pub fn is_oracle(&self) -> bool {
        self.view
            .as_ref()
            .is_some_and(|v| v.kind() == super::view::ViewKind::Oracle)
    }

    /// A request routed by this router finished on `worker` at `now`.
    pub fn on_finished(&mut self, now: SimTime, request: &Request, worker: usize) {
        self.policy.on_finished(request, worker);
        self.policy.on_observed(&Observation::Finished {
            request: request.id,
            worker,
            at: now,
            output_tokens: request.output_tokens,
        });
    }

    /// A request routed to `worker` ended without finishing there (rejected after routing, lost in a
    /// crash, abandoned).
    pub fn on_request_failed(&mut self, request: u64, worker: usize) {
        self.policy.on_request_failed(request, worker);
    }

    /// `worker` went down: the policy's state about it and the cache view's picture of it are dropped
    /// (a restarted worker starts with an empty cache).
    pub fn on_worker_down(&mut self, worker: usize) {
        self.policy.on_worker_down(worker);
        if let Some(v) = &mut self.view {
            v.clear_worker(worker);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Segment;
    use crate::routing::PolicyConfig;
    use crate::routing::test_support::snapshots;

    fn spec(policy: &str) -> RouterSpec {
        RouterSpec {
            policy: PolicyConfig::parse_spec(policy).unwrap(),
            ..RouterSpec::default()
        }
    }

    /// Routes and records `r` as the engine does; returns the worker.
    fn send(router: &mut Router, r: &Request, ws: &[WorkerSnapshot]) -> usize {
        let hashes = r.prompt_block_hashes(16);
        let d = router.route(r.arrival, r, &hashes, ws).unwrap();
        router.record(r.arrival, r, d, &hashes, 0, 0);
        d.worker
    }

    fn req(id: u64, content: u64) -> Request {
        Request::new(
            id,
            None,
            SimTime::ZERO,
            1,
            vec![Segment {
                content,
                tokens: 320,
            }],
        )
    }

    #[test]
    fn dynamo_spreads_a_burst_the_engines_have_not_seen_yet() {
        let mut router = Router::new(&spec("dynamo_kv"), 1, &[1000; 4], 16);
        // The engines report nothing (no step has run): only the router's ledger tells them apart.
        let ws = snapshots(&[0, 0, 0, 0]);
        let at: Vec<usize> = (0..4).map(|i| send(&mut router, &req(i, i), &ws)).collect();
        let mut sorted = at.clone();
        sorted.sort();
        assert_eq!(sorted, [0, 1, 2, 3], "one request per worker");
        // Request 2 finishes: the next request goes to its worker, the only one with nothing active
        // (cost 20 + 20 against 40 + 20 + 20 elsewhere).
        router.on_finished(SimTime::ZERO, &req(2, 2), at[2]);
        assert_eq!(send(&mut router, &req(9, 9), &ws), at[2]);
        // Request 0's first token comes back: its worker loses its 20 pending prefill blocks (cost
        // 20 + 20 + 20 = 60 against 40 + 20 + 20 = 80 on the others).
        router.on_first_token(SimTime::ZERO, 0, at[0]);
        assert_eq!(send(&mut router, &req(10, 10), &ws), at[0]);
    }

    #[test]
    fn sglang_sends_a_shared_prefix_to_the_worker_it_was_first_sent_to() {
        let mut router = Router::new(&spec("sglang_cache_aware"), 1, &[1000; 2], 16);
        // No match anywhere: the least loaded worker, 1, gets the prompt first.
        assert_eq!(send(&mut router, &req(1, 7), &snapshots(&[5, 0])), 1);
        // Imbalanced (100 − 0 > 64): the least loaded, 0, gets it too; both now hold it.
        assert_eq!(send(&mut router, &req(2, 7), &snapshots(&[0, 100])), 0);
        // Balanced, both hold the whole prompt: the worker it was first sent to, not the lowest id.
        assert_eq!(send(&mut router, &req(3, 7), &snapshots(&[0, 0])), 1);
        // Worker 1 goes down and comes back empty: the prompt is now worker 0's.
        router.on_worker_down(1);
        assert_eq!(send(&mut router, &req(4, 7), &snapshots(&[3, 0])), 0);
    }

    #[test]
    fn a_worker_going_down_is_forgotten_by_the_view() {
        let mut router = Router::new(&spec("llm_d"), 1, &[1000; 2], 16);
        let ws = snapshots(&[0, 0]);
        let r = req(1, 7);
        let w = send(&mut router, &r, &ws);
        // The approximate view now expects the prompt on `w`: the same prompt goes there again.
        assert_eq!(send(&mut router, &req(2, 7), &ws), w);
        router.on_worker_down(w);
        let hashes = r.prompt_block_hashes(16);
        router.route(SimTime::ZERO, &r, &hashes, &ws).unwrap();
        assert_eq!(
            router.overlaps,
            [0, 0],
            "nothing is expected cached anywhere"
        );
    }

    /// llm-d's approximate index records only the blocks its producer hashed: under v0.8 the first 256
    /// of a 300-block prompt (4,800 tokens), so the same prompt sent again matches 256 blocks on the
    /// worker that served it; under v0.10 (131,072 tokens) all 300.
    #[test]
    fn llm_d_indexes_only_its_versions_window() {
        let long = |id| {
            Request::new(
                id,
                None,
                SimTime::ZERO,
                1,
                vec![Segment {
                    content: 5,
                    tokens: 4800,
                }],
            )
        };
        for (policy, held) in [("llm_d:version=v0.8", 256), ("llm_d", 300)] {
            let mut router = Router::new(&spec(policy), 1, &[100_000; 2], 16);
            let ws = snapshots(&[0, 0]);
            let w = send(&mut router, &long(1), &ws);
            let r = long(2);
            let hashes = r.prompt_block_hashes(16);
            assert_eq!(hashes.len(), 300);
            router.route(SimTime::ZERO, &r, &hashes, &ws).unwrap();
            assert_eq!(router.overlaps[w], held, "{policy}");
            assert_eq!(router.overlaps[1 - w], 0, "{policy}");
        }
    }
}
