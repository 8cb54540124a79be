//! The per-request record: everything measured about one request, kept raw.

use serde::Serialize;

use crate::request::RequestId;
use crate::time::SimTime;

/// Why prompt tokens were computed again although their KV had been computed before in the fleet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RecomputeCause {
    /// The worker had cached these blocks and evicted them: a conversation's history that this worker
    /// computed in its current incarnation (exact), or other content among its last `total blocks`
    /// evictions.
    Evicted,
    /// Another live worker held them when the request was routed.
    Misrouted,
    /// They were on a worker that crashed.
    Failure,
    /// The request's own KV was freed by preemption.
    Preempted,
    /// A request migrated off a failed worker re-prefilled its prompt and the tokens generated so far.
    Migrated,
    /// A conversation's history that another worker computed and no live worker holds any more (it
    /// was evicted there, or that worker was drained or stopped with it): the turn moved away from it.
    Moved,
}

impl RecomputeCause {
    /// Every cause, in report order.
    pub const ALL: [RecomputeCause; 6] = [
        RecomputeCause::Evicted,
        RecomputeCause::Misrouted,
        RecomputeCause::Failure,
        RecomputeCause::Preempted,
        RecomputeCause::Migrated,
        RecomputeCause::Moved,
    ];

    /// Position in [`RecomputeCause::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Name as used in output keys.
    pub fn as_str(self) -> &'static str {
        match self {
            RecomputeCause::Evicted => "evicted",
            RecomputeCause::Misrouted => "misrouted",
            RecomputeCause::Failure => "failure",
            RecomputeCause::Preempted => "preempted",
            RecomputeCause::Migrated => "migrated",
            RecomputeCause::Moved => "moved",
        }
    }
}

/// Recompute broken down by cause: tokens and GPU-seconds.
///
/// Invariant (checked at the end of every run): `reprefilled_tokens == tokens.iter().sum()`. The
/// first counts, by position, every prompt token prefilled again that the fleet had computed before
/// (the conversation's history, the request's own earlier progress, content found cached, evicted or
/// lost elsewhere); the second, the same tokens by cause. A token re-prefilled without a cause would
/// break it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Recompute {
    pub tokens: [u64; 6],
    pub gpu_seconds: [f64; 6],
    pub reprefilled_tokens: u64,
}

impl Recompute {
    /// Adds another breakdown into this one.
    pub fn merge(&mut self, other: &Recompute) {
        for i in 0..RecomputeCause::ALL.len() {
            self.tokens[i] += other.tokens[i];
            self.gpu_seconds[i] += other.gpu_seconds[i];
        }
        self.reprefilled_tokens += other.reprefilled_tokens;
    }

    /// Tokens over all causes.
    pub fn total_tokens(&self) -> u64 {
        self.tokens.iter().sum()
    }

    /// GPU-seconds over all causes.
    pub fn total_gpu_seconds(&self) -> f64 {
        self.gpu_seconds.iter().sum()
    }
}

/// How a request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Completed,
    Failed,
    Rejected,
}

/// Everything measured about one request. Times are raw; percentiles are derived once at the end.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestRecord {
    pub id: RequestId,
    pub session: Option<u64>,
    pub turn: Option<u32>,
    /// Worker that served (or last tried) the request; `None` if it never reached one.
    pub worker: Option<usize>,
    pub arrival: SimTime,
    /// First time a step included the request.
    pub first_scheduled: Option<SimTime>,
    pub first_token: Option<SimTime>,
    pub finished: SimTime,
    pub prompt_tokens: u32,
    pub output_tokens: u32,
    /// Leading prompt tokens that are the conversation's history: its previous turn's prompt and
    /// answer, in whole KV blocks, as the fleet computed them (0 outside a conversation, on a first
    /// turn, or when the history was dropped).
    pub history_tokens: u32,
    /// Prompt tokens served from the prefix cache at first admission.
    pub cached_tokens: u32,
    /// Prompt tokens computed (over every admission, so recompute after preemption counts again).
    pub prefill_tokens: u64,
    pub recompute: Recompute,
    pub preemptions: u32,
    /// Attempts after the first: retries after errors and migrations.
    pub retries: u32,
    /// Of those, migrations of the request in flight (continued elsewhere, not restarted).
    pub migrations: u32,
    /// Attempts that ended by the gateway's idle timeout.
    pub timeouts: u32,
    /// Prompt tokens loaded from a KV tier (the shared store) instead of computed, at first admission.
    pub loaded_tokens: u32,
    /// Whether this turn started a new conversation because the old one's state was lost.
    pub session_reset: bool,
    pub outcome: Outcome,
    /// Why it failed or was rejected.
    pub reason: Option<&'static str>,
    /// Index of the request's traffic class (0 without a mix); names live with the scenario.
    pub class: u16,
    /// The model the request asked for (`None`: any worker's).
    pub model: Option<crate::hardware::ModelId>,
    /// The id of the LoRA adapter the request asked for (`None`: the base model); names live with
    /// the scenario.
    pub adapter: Option<u64>,
}

#[cfg(test)]
impl RequestRecord {
    /// A record for tests: request `id`, alone (no session, class 0), on worker 0, arrived at `arrival`
    /// and ended at `finished` with `outcome`, one prompt and one output token, nothing cached, computed,
    /// recomputed or retried. Tests set what they need with `..RequestRecord::for_test(...)`.
    pub(crate) fn for_test(
        id: RequestId,
        arrival: SimTime,
        finished: SimTime,
        outcome: Outcome,
    ) -> Self {
        RequestRecord {
            id,
            session: None,
            turn: None,
            worker: Some(0),
            arrival,
            first_scheduled: None,
            first_token: None,
            finished,
            prompt_tokens: 1,
            output_tokens: 1,
            history_tokens: 0,
            cached_tokens: 0,
            prefill_tokens: 0,
            recompute: Recompute::default(),
            preemptions: 0,
            retries: 0,
            migrations: 0,
            timeouts: 0,
            loaded_tokens: 0,
            session_reset: false,
            outcome,
            reason: None,
            class: 0,
            model: None,
            adapter: None,
        }
    }
}
