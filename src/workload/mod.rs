//! Workloads: where requests come from.
//!
//! A [`Workload`] streams requests in arrival order: the engine asks for the next one only when the
//! previous one has arrived, so a workload is never held in memory whole. Closed-loop workloads (a
//! conversation's next turn, a benchmark client's next request) learn of finished requests through
//! [`Workload::on_finished`] and answer with follow-ups.

pub mod concurrency;
pub mod dist;
pub mod spec;
pub mod synthetic;

use crate::metrics::record::RequestRecord;
use crate::request::Request;
use crate::time::SimTime;

pub use concurrency::ClosedLoop;
pub use spec::{ClosedLoopConfig, WorkloadKind, WorkloadSpec};
pub use synthetic::{OpenLoop, OpenLoopConfig, RequestSampler, SharedPrefix};

/// A source of requests.
pub trait Workload: Send {
    /// The next open-loop arrival (arrival times never decrease), or `None` when exhausted.
    fn next_arrival(&mut self) -> Option<Request>;

    /// Told when a request has finished (in any outcome) at `now`; a closed-loop workload returns the
    /// follow-up request it causes, with an arrival time at or after `now`.
    fn on_finished(&mut self, _record: &RequestRecord, _now: SimTime) -> Option<Request> {
        None
    }
}
