//! The gateway between clients and workers: what it believes about each worker's health, how it reacts
//! to errors (retries with backoff, migration of in-flight requests), and where a conversation's state
//! lives (`session_state`).
//!
//! The gateway's *belief* is separate from the workers' *truth* (which the engine keeps): a crashed worker
//! stays "up" for the gateway until health checks fail `health_check_failures` times in a row or requests
//! sent to it fail `errors_to_mark_down` times in a row, and a restarted worker is used again only after
//! `health_check_successes` good checks. Routers see only the belief, so a sticky table keeps pointing at
//! a dead worker until the gateway learns otherwise.
//!
//! Timeouts are idle timeouts, as for a streamed response: they fire when a worker makes no progress on a
//! request at all (a hung worker). On a live worker tokens keep coming, so the gateway never cancels work
//! that a slow but healthy worker is doing.

use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Serialize};

use crate::config::{Positive, PositiveInt};
use crate::request::{Request, Segment};
use crate::time::{SimDuration, SimTime};

/// What happens to requests in flight on a worker that dies.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum InFlight {
    /// They fail (the client sees an error).
    Fail,
    /// The gateway retries them from scratch elsewhere, after its backoff (counted as retries).
    #[default]
    Retry,
    /// They continue on another worker at once: the prompt and the tokens generated so far are prefilled
    /// again there, and generation resumes (Dynamo's request migration).
    Migrate,
}

/// Where a conversation's state lives.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// The client resends the whole history with every turn; any worker can serve it (recomputing what it
    /// does not hold).
    #[default]
    Client,
    /// The conversation exists only on its worker: every turn goes there, and if that worker dies the
    /// conversation is lost — later turns start a new, shorter conversation (counted as a reset).
    Worker,
    /// KV of finished turns is written to a shared store; a worker that lacks a prefix loads it from there
    /// (`bytes / bandwidth + latency`) instead of recomputing it, when that is faster.
    SharedTier,
}

impl SessionState {
    /// The name used in scenario files.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionState::Client => "client",
            SessionState::Worker => "worker",
            SessionState::SharedTier => "shared_tier",
        }
    }
}

/// The shared KV store behind `session_state = "shared_tier"` when no `[tiers.shared]` is given: the
/// fleet's `shared` tier ([`crate::tiers`]), written with finished turns only, oldest writes dropped first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SharedTierSpec {
    /// Read bandwidth into one GPU, GB/s (each GPU of a tensor-parallel replica loads its own shard).
    #[serde(default = "defaults::tier_bandwidth")]
    pub read_gb_per_s: Positive,
    /// Write bandwidth from one GPU, GB/s.
    #[serde(default = "defaults::tier_bandwidth")]
    pub write_gb_per_s: Positive,
    /// Fixed latency of one load or store.
    #[serde(default = "defaults::tier_latency")]
    pub latency: SimDuration,
    /// Capacity in GB of KV (per GPU shard); the oldest writes go first. Unbounded if absent.
    #[serde(default)]
    pub capacity_gb: Option<Positive>,
}

impl SharedTierSpec {
    /// This store as a `shared` tier of a fleet whose replicas have `gpus` GPUs (this key's capacity is
    /// per GPU shard, a tier's per replica); oldest writes are dropped first, as they always were here.
    pub fn as_tier(&self, gpus: u32) -> crate::tiers::TierSpec {
        crate::tiers::TierSpec {
            capacity_gb: Positive(self.capacity_gb.map_or(f64::MAX, |c| c.0 * f64::from(gpus))),
            read_gb_per_s: self.read_gb_per_s,
            write_gb_per_s: self.write_gb_per_s,
            latency: self.latency,
            eviction: crate::tiers::Eviction::Fifo,
        }
    }
}

impl Default for SharedTierSpec {
    fn default() -> Self {
        SharedTierSpec {
            read_gb_per_s: defaults::tier_bandwidth(),
            write_gb_per_s: defaults::tier_bandwidth(),
            latency: defaults::tier_latency(),
            capacity_gb: None,
        }
    }
}

/// `[gateway]`: health checking, timeouts, retries, migration and session state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GatewaySpec {
    /// Time between active health checks of every worker.
    #[serde(default = "defaults::health_check_interval")]
    pub health_check_interval: SimDuration,
    /// Consecutive failed checks before a worker is marked down.
    #[serde(default = "defaults::health_check_failures")]
    pub health_check_failures: PositiveInt,
    /// Consecutive good checks before a down worker is marked up again.
    #[serde(default = "defaults::health_check_successes")]
    pub health_check_successes: PositiveInt,
    /// Consecutive request errors (refused or timed-out connections, broken streams) on one worker that
    /// mark it down without waiting for a health check (passive outlier detection).
    #[serde(default = "defaults::errors_to_mark_down")]
    pub errors_to_mark_down: PositiveInt,
    /// How long a connection to a dead worker on a live host takes to be refused.
    #[serde(default = "defaults::connect_error_delay")]
    pub connect_error_delay: SimDuration,
    /// How long a connection to an unreachable host takes to give up.
    #[serde(default = "defaults::connect_timeout")]
    pub connect_timeout: SimDuration,
    /// Idle timeout of a request: no progress for this long and the gateway gives up on the attempt.
    #[serde(default = "defaults::request_timeout")]
    pub request_timeout: SimDuration,
    /// Retries of one request after errors, at most.
    #[serde(default = "defaults::max_retries")]
    pub max_retries: u32,
    /// Backoff before the first retry; doubles with each retry.
    #[serde(default = "defaults::retry_backoff")]
    pub retry_backoff: SimDuration,
    /// Backoff ceiling.
    #[serde(default = "defaults::retry_backoff_max")]
    pub retry_backoff_max: SimDuration,
    /// What happens to requests in flight on a worker that dies.
    #[serde(default)]
    pub in_flight: InFlight,
    /// Migrations of one request at most (Dynamo's `migration_limit`).
    #[serde(default = "defaults::migration_limit")]
    pub migration_limit: u32,
    /// A request whose prompt plus generated tokens exceed this is not migrated but fails (Dynamo's
    /// `migration_max_seq_len`). Unlimited if absent.
    #[serde(default)]
    pub migration_max_seq_len: Option<PositiveInt>,
    /// Where a conversation's state lives.
    #[serde(default)]
    pub session_state: SessionState,
    /// The shared KV store, for `session_state = "shared_tier"`.
    #[serde(default)]
    pub shared_tier: SharedTierSpec,
    /// A conversation whose last turn was routed longer ago than this is no longer "active" (for
    /// `worker = "most_sessions"`).
    #[serde(default = "defaults::session_idle")]
    pub session_idle: SimDuration,
}

impl Default for GatewaySpec {
    fn default() -> Self {
        toml::from_str("").expect("every gateway key has a default")
    }
}

mod defaults {
    use super::*;
    // Kubernetes probes default to a 10 s period and 3 failures; gateways in front of inference servers
    // usually check faster. Envoy's outlier detection ejects after consecutive gateway errors.
    pub fn health_check_interval() -> SimDuration {
        SimDuration::from_secs(5)
    }
    pub fn health_check_failures() -> PositiveInt {
        PositiveInt(3)
    }
    pub fn health_check_successes() -> PositiveInt {
        PositiveInt(1)
    }
    pub fn errors_to_mark_down() -> PositiveInt {
        PositiveInt(5)
    }
    pub fn connect_error_delay() -> SimDuration {
        SimDuration::from_millis(1)
    }
    pub fn connect_timeout() -> SimDuration {
        SimDuration::from_secs(5)
    }
    pub fn request_timeout() -> SimDuration {
        SimDuration::from_secs(60)
    }
    pub fn max_retries() -> u32 {
        3
    }
    pub fn retry_backoff() -> SimDuration {
        SimDuration::from_millis(100)
    }
    pub fn retry_backoff_max() -> SimDuration {
        SimDuration::from_secs(5)
    }
    pub fn migration_limit() -> u32 {
        3
    }
    pub fn session_idle() -> SimDuration {
        SimDuration::from_secs(600)
    }
    pub fn tier_bandwidth() -> Positive {
        Positive(10.0)
    }
    pub fn tier_latency() -> SimDuration {
        SimDuration::from_millis(2)
    }
}

impl GatewaySpec {
    /// Relations no single field checks. `Err((field, message))`, the field relative to `[gateway]`.
    ///
    /// Every span and count has a range that keeps a run finite: a health check at least every hour
    /// and at most every 100 ms (each check visits every worker), timeouts and backoffs of at most a
    /// day (a gateway that waits longer has no timeout), and at most [`MAX_RETRIES`] retries and
    /// migrations of one request (each is an attempt simulated in full).
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        use crate::config::{BANDWIDTH_GB_PER_S, check_range, check_span};
        const MS: SimDuration = SimDuration::from_millis(1);
        const HOUR: SimDuration = SimDuration::from_secs(3600);
        const DAY: SimDuration = SimDuration::from_secs(86_400);
        let spans = [
            (
                "health_check_interval",
                self.health_check_interval,
                SimDuration::from_millis(100),
                HOUR,
            ),
            (
                "connect_error_delay",
                self.connect_error_delay,
                SimDuration::ZERO,
                HOUR,
            ),
            (
                "connect_timeout",
                self.connect_timeout,
                SimDuration::ZERO,
                HOUR,
            ),
            ("request_timeout", self.request_timeout, MS, DAY),
            ("retry_backoff", self.retry_backoff, SimDuration::ZERO, HOUR),
            (
                "retry_backoff_max",
                self.retry_backoff_max,
                SimDuration::ZERO,
                DAY,
            ),
            (
                "shared_tier.latency",
                self.shared_tier.latency,
                SimDuration::ZERO,
                HOUR,
            ),
        ];
        for (field, d, min, max) in spans {
            check_span(d, min, max).map_err(|m| (field, m))?;
        }
        for (field, n) in [
            ("max_retries", self.max_retries),
            ("migration_limit", self.migration_limit),
        ] {
            if n > MAX_RETRIES {
                return Err((
                    field,
                    format!("must be between 0 and {MAX_RETRIES}, got {n}"),
                ));
            }
        }
        for (field, v) in [
            (
                "shared_tier.read_gb_per_s",
                self.shared_tier.read_gb_per_s.0,
            ),
            (
                "shared_tier.write_gb_per_s",
                self.shared_tier.write_gb_per_s.0,
            ),
        ] {
            check_range(v, BANDWIDTH_GB_PER_S, " GB/s").map_err(|m| (field, m))?;
        }
        if let Some(c) = self.shared_tier.capacity_gb {
            check_range(c.0, crate::tiers::CAPACITY_GB, " GB")
                .map_err(|m| ("shared_tier.capacity_gb", m))?;
        }
        if self.retry_backoff_max < self.retry_backoff {
            return Err((
                "retry_backoff_max",
                format!(
                    "({}) is below retry_backoff ({})",
                    self.retry_backoff_max, self.retry_backoff
                ),
            ));
        }
        Ok(())
    }

    /// Backoff before retry number `n` (1-based): `retry_backoff · 2^(n−1)`, at most `retry_backoff_max`.
    pub fn backoff(&self, n: u32) -> SimDuration {
        let factor = 1u64 << (n.saturating_sub(1)).min(40);
        SimDuration(
            self.retry_backoff
                .0
                .saturating_mul(factor)
                .min(self.retry_backoff_max.0),
        )
    }
}

/// Most retries (`max_retries`) and migrations (`migration_limit`) of one request.
pub const MAX_RETRIES: u32 = 100;

/// What the gateway believes about one worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Belief {
    /// Routable as far as the gateway knows.
    pub up: bool,
    /// Taken out of rotation on purpose (a drain): not routable whatever the health checks say.
    pub draining: bool,
    /// Consecutive failed health checks.
    pub failed_checks: u32,
    /// Consecutive good health checks.
    pub good_checks: u32,
    /// Consecutive request errors.
    pub errors: u32,
}

/// A change of belief the engine must pass on to the router.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BeliefChange {
    MarkedDown,
    MarkedUp,
}

/// Where a conversation lives and how much of its history the gateway has dropped after resets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct SessionHome {
    worker: usize,
    /// The worker's incarnation when the last turn was sent there.
    epoch: u64,
    last_routed: SimTime,
    /// Segments of turn 0's prompt that precede the conversation (system prompt, tools, documents).
    context_segments: usize,
    /// After a reset: the conversation restarts at this segment index; segments between
    /// `context_segments` and it are history that no longer exists.
    restart_segment: usize,
}

/// The gateway's state during a run.
#[derive(Debug)]
pub struct Gateway {
    pub spec: GatewaySpec,
    pub beliefs: Vec<Belief>,
    sessions: HashMap<u64, SessionHome>,
    purged_at_len: usize,
}

impl Gateway {
    /// A gateway for `workers` workers; `started[w]` says whether worker `w` is up from the start.
    pub fn new(spec: GatewaySpec, started: &[bool]) -> Self {
        Gateway {
            beliefs: started
                .iter()
                .map(|&up| Belief {
                    up,
                    draining: false,
                    failed_checks: 0,
                    good_checks: 0,
                    errors: 0,
                })
                .collect(),
            spec,
            sessions: HashMap::default(),
            purged_at_len: 1024,
        }
    }

    /// Whether new requests may be routed to `w`.
    pub fn routable(&self, w: usize) -> bool {
        let b = &self.beliefs[w];
        b.up && !b.draining
    }

    /// The result of one health check of `w`.
    pub fn on_health_check(&mut self, w: usize, ok: bool) -> Option<BeliefChange> {
        let b = &mut self.beliefs[w];
        if ok {
            b.good_checks += 1;
            b.failed_checks = 0;
            if !b.up && b.good_checks >= self.spec.health_check_successes.0 {
                b.up = true;
                b.errors = 0;
                return Some(BeliefChange::MarkedUp);
            }
        } else {
            b.failed_checks += 1;
            b.good_checks = 0;
            if b.up && b.failed_checks >= self.spec.health_check_failures.0 {
                b.up = false;
                return Some(BeliefChange::MarkedDown);
            }
        }
        None
    }

    /// A request to `w` failed (refused, timed out, stream broken).
    pub fn on_error(&mut self, w: usize) -> Option<BeliefChange> {
        let b = &mut self.beliefs[w];
        b.errors += 1;
        if b.up && b.errors >= self.spec.errors_to_mark_down.0 {
            b.up = false;
            b.good_checks = 0;
            return Some(BeliefChange::MarkedDown);
        }
        None
    }

    /// A request on `w` completed: the error streak ends.
    pub fn on_success(&mut self, w: usize) {
        self.beliefs[w].errors = 0;
    }

    /// Takes `w` out of rotation (a drain); it returns only after a restart and good health checks.
    pub fn drain(&mut self, w: usize) {
        self.beliefs[w].draining = true;
    }

    /// `w` becomes a new endpoint (an autoscaled replica starting in a freed slot): not routable until a
    /// good health check, with no history of errors or checks. Returns whether the gateway believed it up
    /// (the router must then forget it).
    pub fn reset_to_unready(&mut self, w: usize) -> bool {
        let was_up = self.beliefs[w].up;
        self.beliefs[w] = Belief {
            up: false,
            draining: false,
            failed_checks: 0,
            good_checks: 0,
            errors: 0,
        };
        was_up
    }

    /// A worker has restarted; if it had been drained, it may be used again once health checks pass.
    pub fn end_drain_if_draining(&mut self, w: usize) {
        let b = &mut self.beliefs[w];
        if b.draining {
            b.draining = false;
            b.up = false;
            b.good_checks = 0;
        }
    }

    /// For `session_state = "worker"`: the worker that holds this turn's conversation, if it must go
    /// there, or `None` — with the request rewritten as a new, shorter conversation (`reset` true) if
    /// that state was lost. Idempotent over retries: `dropped` counts the segments already removed from
    /// this request. `epoch_of(w)` is worker `w`'s incarnation; `alive(w)` whether it is running.
    pub fn session_home(
        &mut self,
        request: &mut Request,
        dropped: &mut usize,
        epoch_of: impl Fn(usize) -> u64,
        alive: impl Fn(usize) -> bool,
    ) -> (Option<usize>, bool) {
        let Some(s) = request.session else {
            return (None, false);
        };
        let Some(home) = self.sessions.get_mut(&s.id) else {
            return (None, false);
        };
        if s.turn == 0 {
            return (None, false);
        }
        let w = home.worker;
        // The state is gone if the gateway knows the worker is down, or the worker is running again in a
        // new incarnation (it answers "unknown conversation").
        let b = &self.beliefs[w];
        let lost = !b.up || b.draining || (epoch_of(w) != home.epoch && alive(w));
        let original_len = request.segments.len() + *dropped;
        if lost {
            // The conversation restarts at this turn's new message (the last segment as written).
            home.restart_segment = original_len - 1;
        }
        if home.restart_segment > home.context_segments {
            let want = home.restart_segment - home.context_segments;
            if want > *dropped {
                let at = home.context_segments;
                drop_history(request, at, at + (want - *dropped));
                *dropped = want;
            }
        }
        (if lost { None } else { Some(w) }, lost)
    }

    /// Records that a turn of `request`'s session was sent to `w` (incarnation `epoch`) at `now`.
    pub fn on_routed(&mut self, request: &Request, w: usize, epoch: u64, now: SimTime) {
        let Some(s) = request.session else { return };
        self.purge(now);
        let home = self.sessions.entry(s.id).or_insert_with(|| SessionHome {
            context_segments: if s.turn == 0 {
                request.segments.len() - 1
            } else {
                0
            },
            ..SessionHome::default()
        });
        home.worker = w;
        home.epoch = epoch;
        home.last_routed = now;
    }

    /// The worker holding the most conversations active within `session_idle` of `now` (ties: lowest
    /// id), among `candidates`.
    pub fn most_sessions(
        &self,
        now: SimTime,
        candidates: impl Iterator<Item = usize>,
    ) -> Option<usize> {
        let mut count = vec![0u64; self.beliefs.len()];
        for h in self.sessions.values() {
            if h.last_routed + self.spec.session_idle >= now {
                count[h.worker] += 1;
            }
        }
        candidates.max_by(|&a, &b| count[a].cmp(&count[b]).then(b.cmp(&a)))
    }

    fn purge(&mut self, now: SimTime) {
        if self.sessions.len() < 2 * self.purged_at_len {
            return;
        }
        let idle = self.spec.session_idle;
        // Keep reset conversations: their later turns still need the history dropped.
        self.sessions
            .retain(|_, h| h.last_routed + idle >= now || h.restart_segment > 0);
        self.purged_at_len = self.sessions.len().max(1024);
    }
}

/// Removes segments `[from, to)` (history that no longer exists) from a request's prompt.
fn drop_history(request: &mut Request, from: usize, to: usize) {
    let to = to.min(request.segments.len().saturating_sub(1));
    if from >= to {
        return;
    }
    let removed: u32 = request.segments[from..to].iter().map(|s| s.tokens).sum();
    request.segments.drain(from..to);
    request.prompt_tokens -= removed;
    debug_assert_eq!(
        request.prompt_tokens,
        request
            .segments
            .iter()
            .map(|s: &Segment| s.tokens)
            .sum::<u32>()
    );
}

#[cfg(test)]
mod tests;
