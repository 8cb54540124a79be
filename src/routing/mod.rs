//! The gateway's routing policies: one small trait, one policy per file, one factory.
//!
//! A policy sees the request and a snapshot of every worker (as the gateway believes it to be) and returns
//! the worker to send it to, with a reason. It never chooses a worker the gateway believes is down; when
//! none is up it returns `None` and the request is rejected.

mod least_outstanding;
mod random;
mod round_robin;

use serde::{Deserialize, Serialize};

use crate::request::Request;
use crate::rng::SimRng;
use crate::worker::WorkerSnapshot;

pub use least_outstanding::LeastOutstanding;
pub use random::RandomChoice;
pub use round_robin::RoundRobin;

/// A routing decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// Index of the chosen worker.
    pub worker: usize,
    /// Why, in a few words (for decision logs).
    pub reason: &'static str,
}

/// A routing policy.
pub trait RoutingPolicy: Send {
    /// The policy's name as written in scenario files.
    fn name(&self) -> &'static str;

    /// Picks a worker for `request` among `workers` (indexed by worker id); `None` if no worker is up.
    fn route(
        &mut self,
        request: &Request,
        workers: &[WorkerSnapshot],
        rng: &mut SimRng,
    ) -> Option<Decision>;

    /// Told when a request routed by this policy has finished on `worker`.
    fn on_finished(&mut self, _request: &Request, _worker: usize) {}
}

/// A policy and its parameters, as written in a scenario's `[router]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "policy", rename_all = "snake_case", deny_unknown_fields)]
#[derive(Default)]
pub enum PolicyConfig {
    /// Each request to the next worker that is up, in id order.
    #[default]
    RoundRobin,
    /// Each request to a uniformly random worker that is up.
    Random,
    /// The worker with the fewest outstanding requests (least connections); ties rotate.
    LeastOutstanding,
}

impl PolicyConfig {
    /// Names of every policy, for `fleetsim catalog`.
    pub const NAMES: [&'static str; 3] = ["round_robin", "random", "least_outstanding"];

    /// The policy's name.
    pub fn name(&self) -> &'static str {
        match self {
            PolicyConfig::RoundRobin => "round_robin",
            PolicyConfig::Random => "random",
            PolicyConfig::LeastOutstanding => "least_outstanding",
        }
    }

    /// Builds the policy.
    pub fn build(&self) -> Box<dyn RoutingPolicy> {
        match self {
            PolicyConfig::RoundRobin => Box::new(RoundRobin::default()),
            PolicyConfig::Random => Box::new(RandomChoice),
            PolicyConfig::LeastOutstanding => Box::new(LeastOutstanding::default()),
        }
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    use super::*;
    use crate::time::SimTime;

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
}
