//! The router: a policy, what it knows (its cache view and possibly stale load signals), and a record
//! of its decisions.

use serde::Serialize;

use super::spec::RouterSpec;
use super::view::CacheView;
use super::{Decision, FleetInfo, Observation, RouteInput, Routed, RoutingPolicy};
use crate::request::Request;
use crate::rng::{self, SimRng};
use crate::time::{SimDuration, SimTime};
use crate::worker::WorkerSnapshot;
use crate::worker::kv_cache::KvEvent;

pub use crate::metrics::summary::ViewAccuracy;

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

/// One router instance: its policy's state, its cache picture, its random stream and its copy of the
/// workers' load metrics. A [`Router`] with several replicas holds one per replica.
struct Instance {
    policy: Box<dyn RoutingPolicy>,
    view: Option<CacheView>,
    rng: SimRng,
    stale: Vec<WorkerSnapshot>,
    last_refresh: Option<SimTime>,
    /// Several replicas: per worker, the requests in flight this replica knows of (those it routed,
    /// and with `sync = "decisions"` those the others told it of): its own least-connections count.
    outstanding: Vec<u32>,
}

impl Instance {
    /// Applies `h` at `at` to the policy and the view; with `counts` (several replicas), to the
    /// replica's in-flight counts too.
    fn hear(&mut self, h: Heard, at: SimTime, block_size: u32, counts: bool) {
        match h {
            Heard::Routed {
                request,
                worker,
                hashes,
                indexed,
                overlap,
            } => {
                if counts {
                    self.count(worker, 1);
                }
                if let Some(v) = &mut self.view {
                    v.on_routed(at, worker, &hashes[..indexed]);
                }
                self.policy.on_routed(&Routed {
                    request,
                    worker,
                    prompt_hashes: hashes,
                    overlap,
                    block_size,
                    now: at,
                });
            }
            Heard::FirstToken { request, worker } => {
                self.policy.on_first_token(request, worker);
                self.policy.on_observed(&Observation::FirstToken {
                    request,
                    worker,
                    at,
                });
            }
            Heard::Finished { request, worker } => {
                if counts {
                    self.count(worker, -1);
                }
                self.policy.on_finished(request, worker);
                self.policy.on_observed(&Observation::Finished {
                    request: request.id,
                    worker,
                    at,
                    output_tokens: request.output_tokens,
                });
            }
            Heard::Failed { request, worker } => {
                if counts {
                    self.count(worker, -1);
                }
                self.policy.on_request_failed(request, worker);
            }
        }
    }

    /// Brings this instance's copy of the workers' load up to `now`: the workers' metrics as last
    /// scraped (at most `interval` ago), with whether each is up and its requests in flight current:
    /// the gateway's counts, or with `own_counts` (several replicas) this replica's own. Returns
    /// whether routing reads that copy (`stale`) rather than `fresh`.
    fn refresh_load(
        &mut self,
        fresh: &[WorkerSnapshot],
        now: SimTime,
        interval: SimDuration,
        own_counts: bool,
    ) -> bool {
        if interval.0 == 0 && !own_counts {
            return false;
        }
        let due = interval.0 == 0 || self.last_refresh.is_none_or(|t| now >= t + interval);
        if due || self.stale.len() != fresh.len() {
            self.stale.clear();
            self.stale.extend_from_slice(fresh);
            if interval.0 > 0 {
                self.last_refresh = Some(now);
            }
        }
        if own_counts {
            self.outstanding
                .resize(fresh.len().max(self.outstanding.len()), 0);
        }
        for (w, (s, f)) in self.stale.iter_mut().zip(fresh).enumerate() {
            s.up = f.up;
            s.outstanding = if own_counts {
                self.outstanding[w]
            } else {
                f.outstanding
            };
        }
        true
    }

    fn count(&mut self, worker: usize, delta: i32) {
        if self.outstanding.len() <= worker {
            self.outstanding.resize(worker + 1, 0);
        }
        let c = &mut self.outstanding[worker];
        *c = c.saturating_add_signed(delta);
    }
}

/// Something that happened to a request a replica routed: the replica hears it at once, and with
/// `sync = "decisions"` the others hear it `sync_delay` later (as a [`Message`]).
#[derive(Clone, Copy)]
enum Heard<'a> {
    Routed {
        request: &'a Request,
        worker: usize,
        /// The prompt's full-block hashes, of which the view records the first `indexed`.
        hashes: &'a [u64],
        indexed: usize,
        overlap: u32,
    },
    FirstToken {
        request: u64,
        worker: usize,
    },
    Finished {
        request: &'a Request,
        worker: usize,
    },
    Failed {
        request: u64,
        worker: usize,
    },
}

/// A [`Heard`] on its way to the other replicas, owning its request and prompt hashes.
enum Message {
    Routed {
        request: Box<Request>,
        worker: usize,
        hashes: Vec<u64>,
        indexed: usize,
        overlap: u32,
    },
    FirstToken {
        request: u64,
        worker: usize,
    },
    Finished {
        request: Box<Request>,
        worker: usize,
    },
    Failed {
        request: u64,
        worker: usize,
    },
}

impl Message {
    fn of(h: Heard) -> Message {
        match h {
            Heard::Routed {
                request,
                worker,
                hashes,
                indexed,
                overlap,
            } => Message::Routed {
                request: Box::new(request.clone()),
                worker,
                hashes: hashes.to_vec(),
                indexed,
                overlap,
            },
            Heard::FirstToken { request, worker } => Message::FirstToken { request, worker },
            Heard::Finished { request, worker } => Message::Finished {
                request: Box::new(request.clone()),
                worker,
            },
            Heard::Failed { request, worker } => Message::Failed { request, worker },
        }
    }

    fn heard(&self) -> Heard<'_> {
        match self {
            Message::Routed {
                request,
                worker,
                hashes,
                indexed,
                overlap,
            } => Heard::Routed {
                request,
                worker: *worker,
                hashes,
                indexed: *indexed,
                overlap: *overlap,
            },
            &Message::FirstToken { request, worker } => Heard::FirstToken { request, worker },
            Message::Finished { request, worker } => Heard::Finished {
                request,
                worker: *worker,
            },
            &Message::Failed { request, worker } => Heard::Failed { request, worker },
        }
    }
}

/// The gateway's router: a policy with its knowledge of the fleet, as one instance or as several
/// replicas behind a load balancer (`router.replicas`).
///
/// With several replicas, the load balancer gives each request to one ([`RouterSettings::spread`],
/// a pure function of the request, so its retries pass the same replica); that replica decides, and
/// the request's first token, end or failure is reported to it alone. Each replica's policy state
/// (in-flight counts, sticky sessions, active blocks, trees of routed prompts) and approximate view
/// hold only what it routed, unless `sync = "decisions"` relays every decision and every request's
/// lifecycle to the others, each message arriving `sync_delay` later. Whatever every replica learns
/// alike (KV events, workers going down, the fleet's description) reaches all of them at once.
/// One replica behaves exactly as a router without replicas.
///
/// [`RouterSettings::spread`]: super::spec::RouterSettings::spread
pub struct Router {
    spec: RouterSpec,
    instances: Vec<Instance>,
    /// Leading prompt blocks the approximate view records per routed request (`None`: all).
    indexed_blocks: Option<u32>,
    block_size: u32,
    overlaps: Vec<u32>,
    /// Per worker, where the request about to be routed stands with its LoRA adapter (filled by the
    /// engine through [`Router::adapter_loads`] when the policy asks; empty otherwise).
    adapters: Vec<crate::lora::AdapterLoad>,
    /// Expected cached blocks on the worker chosen last (set by `route`, read by `record`).
    last_expected: u32,
    /// The replica that made the last decision (set by `route`, read by `record`).
    last_replica: usize,
    /// Several replicas: the replica that routed each request in flight.
    owner: rustc_hash::FxHashMap<u64, u32>,
    /// Salt of the load balancer's draws.
    spread_salt: u64,
    /// `sync = "decisions"`: messages on their way, each with its sender and when it arrives (in order).
    inbox: std::collections::VecDeque<(SimTime, usize, Message)>,
    pub accuracy: ViewAccuracy,
    pub log: Vec<DecisionRecord>,
}

impl Router {
    /// A router for a fleet whose workers hold `kv_blocks[w]` KV blocks of `block_size` tokens, drawing
    /// from the `router` stream (replica `r` > 0 from `router/replica/r`).
    pub fn new(spec: &RouterSpec, seed: u64, kv_blocks: &[u32], block_size: u32) -> Self {
        let instance = |r: u32| {
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
            let rng = if r == 0 {
                rng::stream(seed, "router")
            } else {
                rng::stream(seed, &format!("router/replica/{r}"))
            };
            Instance {
                policy,
                view,
                rng,
                stale: Vec::new(),
                last_refresh: None,
                outstanding: Vec::new(),
            }
        };
        Router {
            spec: spec.clone(),
            instances: (0..spec.settings.replicas.0).map(instance).collect(),
            indexed_blocks: spec.policy.approx_indexed_blocks(block_size),
            block_size,
            overlaps: Vec::new(),
            adapters: Vec::new(),
            last_expected: 0,
            last_replica: 0,
            owner: Default::default(),
            spread_salt: rng::splitmix64(seed ^ 0x7370_7265_6164_0000),
            inbox: Default::default(),
            accuracy: ViewAccuracy::default(),
            log: Vec::new(),
        }
    }

    /// The policy's name.
    pub fn policy_name(&self) -> &'static str {
        self.instances[0].policy.name()
    }

    /// The cache view's name, or `None` if the policy does not look at caches.
    pub fn view_name(&self) -> Option<&'static str> {
        self.instances[0].view.as_ref().map(|v| v.kind().as_str())
    }

    /// The replicas for the summary: `None` for one router.
    pub fn replica_summary(&self) -> Option<crate::metrics::summary::RouterReplicas> {
        let s = &self.spec.settings;
        (self.instances.len() > 1).then(|| crate::metrics::summary::RouterReplicas {
            count: self.instances.len() as u32,
            spread: s.spread.as_str().to_string(),
            sync: s.sync.as_str().to_string(),
            sync_delay_ms: (s.sync == super::spec::ReplicaSync::Decisions)
                .then(|| s.sync_delay.as_millis_f64()),
        })
    }

    /// Whether the cache view keeps its block → workers index ([`CacheView::with_owner`]); `None`
    /// without a view.
    pub fn view_keeps_index(&self) -> Option<bool> {
        self.instances[0].view.as_ref().map(CacheView::keeps_index)
    }

    /// Whether the workers' KV events should be recorded and passed to [`Router::on_kv_events`].
    pub fn wants_kv_events(&self) -> bool {
        self.instances[0]
            .view
            .as_ref()
            .is_some_and(CacheView::wants_kv_events)
    }

    /// Worker `w`'s cache events at `now`: every replica subscribes to them.
    pub fn on_kv_events(&mut self, now: SimTime, w: usize, events: impl Iterator<Item = KvEvent>) {
        if let [one] = self.instances.as_mut_slice() {
            if let Some(v) = &mut one.view {
                v.on_kv_events(now, w, events);
            }
            return;
        }
        let events: Vec<KvEvent> = events.collect();
        for i in &mut self.instances {
            if let Some(v) = &mut i.view {
                v.on_kv_events(now, w, events.iter().copied());
            }
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
        self.instances[0].policy.reads_kv_usage()
    }

    /// Whether the policy wants [`Router::route_with`]'s `prefix_sources`.
    pub fn wants_prefix_sources(&self) -> bool {
        self.instances[0].policy.needs_prefix_sources()
    }

    /// Whether the policy reads the workers' adapters ([`super::RoutingPolicy::needs_adapter_view`]).
    pub fn wants_adapter_view(&self) -> bool {
        self.instances[0].policy.needs_adapter_view()
    }

    /// The adapter view the next [`Router::route_with`] passes on, to be filled per worker (or left
    /// empty) by the caller.
    pub fn adapter_loads(&mut self) -> &mut Vec<crate::lora::AdapterLoad> {
        &mut self.adapters
    }

    /// The replica the load balancer gives `request` to.
    fn replica_of(&self, request: &Request) -> usize {
        let n = self.instances.len() as u64;
        if n == 1 {
            return 0;
        }
        let key = match self.spec.settings.spread {
            super::spec::Spread::RoundRobin => return (request.id % n) as usize,
            super::spec::Spread::Random => request.id,
            super::spec::Spread::Session => request
                .session
                .map_or(request.id, |s| s.id ^ 0x5e55_1000_0000_0000),
        };
        (rng::splitmix64(key ^ self.spread_salt) % n) as usize
    }

    /// The replica that routed request `id`; `None` with several replicas if none did (a request the
    /// gateway placed itself: no replica hears of it).
    fn owner_of(&self, id: u64) -> Option<usize> {
        if self.instances.len() == 1 {
            return Some(0);
        }
        self.owner.get(&id).map(|&r| r as usize)
    }

    /// Hands every message due by `now` to every replica but its sender.
    fn deliver(&mut self, now: SimTime) {
        while self.inbox.front().is_some_and(|(at, _, _)| *at <= now) {
            let (at, from, m) = self.inbox.pop_front().expect("checked");
            for (r, i) in self.instances.iter_mut().enumerate() {
                if r == from {
                    continue;
                }
                if let Some(v) = &mut i.view {
                    v.advance(at);
                }
                i.hear(m.heard(), at, self.block_size, true);
            }
        }
    }

    /// Replica `r` hears `h` at `now`; with shared decisions, the others will hear it too.
    fn tell(&mut self, now: SimTime, r: usize, h: Heard) {
        let several = self.instances.len() > 1;
        self.instances[r].hear(h, now, self.block_size, several);
        if several && self.spec.settings.sync == super::spec::ReplicaSync::Decisions {
            let at = now + self.spec.settings.sync_delay;
            self.inbox.push_back((at, r, Message::of(h)));
        }
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
        self.deliver(now);
        let replica = self.replica_of(request);
        let several = self.instances.len() > 1;
        let i = &mut self.instances[replica];
        let interval = self.spec.settings.load_refresh;
        let workers: &[WorkerSnapshot] = if i.refresh_load(fresh, now, interval, several) {
            &i.stale
        } else {
            fresh
        };
        self.overlaps.clear();
        let mut prefix_owner = None;
        if let Some(v) = &mut i.view {
            v.advance(now);
            prefix_owner = v.overlaps_and_owner(prompt_hashes, &mut self.overlaps);
        }
        let load_age = match i.last_refresh {
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
        let decision = i.policy.route(&input, &mut i.rng)?;
        debug_assert!(
            fresh[decision.worker].up,
            "policy chose a worker believed down"
        );
        self.last_expected = self.overlaps.get(decision.worker).copied().unwrap_or(0);
        self.last_replica = replica;
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
        let replica = self.last_replica;
        let a = &mut self.accuracy;
        a.decisions += 1;
        if self.instances[replica].view.is_some() {
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
        if self.instances.len() > 1 {
            self.owner.insert(request.id, replica as u32);
        }
        let indexed = self
            .indexed_blocks
            .map_or(prompt_hashes.len(), |n| prompt_hashes.len().min(n as usize));
        self.tell(
            now,
            replica,
            Heard::Routed {
                request,
                worker: d.worker,
                hashes: prompt_hashes,
                indexed,
                overlap: expected,
            },
        );
    }

    /// Tells the policy what the gateway is configured with about the fleet (before the first request).
    pub fn set_fleet(&mut self, fleet: &FleetInfo) {
        for i in &mut self.instances {
            i.policy.on_fleet(fleet);
        }
    }

    /// Worker `w` now runs the configuration `profile` describes (a model swap).
    pub fn set_worker_profile(&mut self, w: usize, profile: &super::WorkerProfile) {
        for i in &mut self.instances {
            i.policy.on_worker_profile(w, profile);
        }
    }

    /// The first token of `request` (an id) routed by this router came back from `worker` at `now`.
    pub fn on_first_token(&mut self, now: SimTime, request: u64, worker: usize) {
        if let Some(r) = self.owner_of(request) {
            self.tell(now, r, Heard::FirstToken { request, worker });
        }
    }

    /// Whether the router's cache picture is the workers' truth.
    pub fn is_oracle(&self) -> bool {
        self.instances[0]
            .view
            .as_ref()
            .is_some_and(|v| v.kind() == super::view::ViewKind::Oracle)
    }

    /// A request routed by this router finished on `worker` at `now`.
    pub fn on_finished(&mut self, now: SimTime, request: &Request, worker: usize) {
        if let Some(r) = self.owner_of(request.id) {
            self.owner.remove(&request.id);
            self.tell(now, r, Heard::Finished { request, worker });
        }
    }

    /// A request routed to `worker` ended without finishing there (rejected after routing, lost in a
    /// crash, abandoned) at `now`.
    pub fn on_request_failed(&mut self, now: SimTime, request: u64, worker: usize) {
        if let Some(r) = self.owner_of(request) {
            self.owner.remove(&request);
            self.tell(now, r, Heard::Failed { request, worker });
        }
    }

    /// `worker` went down: the policy's state about it and the cache view's picture of it are dropped
    /// (a restarted worker starts with an empty cache), in every replica.
    pub fn on_worker_down(&mut self, worker: usize) {
        for i in &mut self.instances {
            i.policy.on_worker_down(worker);
            if let Some(v) = &mut i.view {
                v.clear_worker(worker);
            }
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

    fn replicated(policy: &str, n: u32, spread: &str, sync: &str) -> Router {
        let mut s = spec(policy);
        s.settings.replicas = crate::config::PositiveInt(n);
        s.settings.spread = toml::Value::String(spread.into()).try_into().unwrap();
        s.settings.sync = toml::Value::String(sync.into()).try_into().unwrap();
        Router::new(&s, 1, &[1000; 4], 16)
    }

    #[test]
    fn one_replica_is_the_router_without_replicas() {
        let ws = snapshots(&[0, 0, 0, 0]);
        for policy in ["llm_d", "random", "round_robin", "sglang_cache_aware"] {
            let mut plain = Router::new(&spec(policy), 1, &[1000; 4], 16);
            let mut one = replicated(policy, 1, "session", "decisions");
            for i in 0..50 {
                let r = req(i, i % 7);
                assert_eq!(
                    send(&mut plain, &r, &ws),
                    send(&mut one, &r, &ws),
                    "{policy}"
                );
            }
            assert!(one.replica_summary().is_none());
        }
    }

    #[test]
    fn the_load_balancer_spreads_by_id_in_turn_or_by_session() {
        let r = |id: u64, session: Option<u64>| {
            let mut x = req(id, id);
            x.session = session.map(|s| crate::request::SessionRef { id: s, turn: 0 });
            x
        };
        let rr = replicated("random", 3, "round_robin", "none");
        assert_eq!(
            (0..6)
                .map(|i| rr.replica_of(&r(i, None)))
                .collect::<Vec<_>>(),
            [0, 1, 2, 0, 1, 2]
        );
        // Every turn of a conversation to one replica; the sessions over all of them.
        let by_session = replicated("random", 4, "session", "none");
        let mut seen = [false; 4];
        for s in 0..40 {
            let first = by_session.replica_of(&r(1000 + s, Some(s)));
            for turn in 1..5 {
                assert_eq!(
                    by_session.replica_of(&r(2000 + 10 * s + turn, Some(s))),
                    first
                );
            }
            seen[first] = true;
        }
        assert_eq!(seen, [true; 4]);
        // Random: the same request (its retries) always to the same replica; requests over all.
        let random = replicated("random", 4, "random", "none");
        let picks: Vec<usize> = (0..200).map(|i| random.replica_of(&r(i, None))).collect();
        assert!((0..200).all(|i| random.replica_of(&r(i, None)) == picks[i as usize]));
        for k in 0..4 {
            let share = picks.iter().filter(|&&p| p == k).count();
            assert!((30..=70).contains(&share), "replica {k}: {share} of 200");
        }
    }

    /// A prefix routed by one replica is unknown to another unless decisions are shared; shared, it
    /// is known once the message has arrived.
    #[test]
    fn a_replica_knows_another_replicas_routing_only_through_sync() {
        let ws = snapshots(&[0, 0, 0, 0]);
        let at = |ms: u64| SimTime(ms * 1_000_000);
        let overlap_seen_by = |router: &mut Router, id: u64, now: SimTime| {
            let mut r = req(id, 7);
            r.arrival = now;
            let hashes = r.prompt_block_hashes(16);
            router.route(now, &r, &hashes, &ws).unwrap();
            router.overlaps.iter().copied().max().unwrap()
        };
        for (sync, known_at_0ms, known_at_5ms) in [("none", 0, 0), ("decisions", 0, 20)] {
            let mut router = replicated("llm_d", 2, "round_robin", sync);
            // Request 0 goes through replica 0, which records its 20 blocks.
            let mut first = req(0, 7);
            first.arrival = at(0);
            send(&mut router, &first, &ws);
            // Request 1 (replica 1) at once: even a shared decision is still on its way (1 ms).
            assert_eq!(
                overlap_seen_by(&mut router, 1, at(0)),
                known_at_0ms,
                "{sync}"
            );
            // Request 3 (replica 1) 5 ms later.
            assert_eq!(
                overlap_seen_by(&mut router, 3, at(5)),
                known_at_5ms,
                "{sync}"
            );
            // Replica 0 knows its own decision either way.
            assert_eq!(overlap_seen_by(&mut router, 2, at(5)), 20, "{sync}");
        }
    }

    /// Each replica balances on the requests it routed itself (least connections per replica); with
    /// shared decisions, on all of them.
    #[test]
    fn each_replica_counts_its_own_requests_in_flight() {
        let ws = snapshots(&[0, 0, 0, 0]);
        for sync in ["none", "decisions"] {
            let mut router = replicated("least_outstanding", 2, "round_robin", sync);
            // Replica 0 routes requests 0 and 2 (to workers 0 and 1).
            let a = send(&mut router, &req(0, 1), &ws);
            let b = send(&mut router, &req(2, 2), &ws);
            assert_ne!(a, b);
            let seen = |router: &Router, r: usize| {
                let mut o = router.instances[r].outstanding.clone();
                o.resize(4, 0);
                o
            };
            assert_eq!(seen(&router, 0)[a] + seen(&router, 0)[b], 2);
            // Replica 1 routes at 2 ms: the shared decisions (1 ms late) have arrived.
            let mut r = req(1, 3);
            r.arrival = SimTime(2_000_000);
            let w = send(&mut router, &r, &ws);
            let mut before = seen(&router, 1);
            before[w] -= 1;
            let mut want = [0u32; 4];
            if sync == "decisions" {
                want[a] = 1;
                want[b] = 1;
            }
            assert_eq!(before, want, "{sync}");
            // Its choice avoids what it knows to be busy.
            if sync == "decisions" {
                assert!(w != a && w != b);
            }
            // Request 0 finishes: replica 0 counts it out (and, shared, replica 1 too).
            router.on_finished(SimTime(3_000_000), &req(0, 1), a);
            assert_eq!(seen(&router, 0)[a], 0);
        }
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
