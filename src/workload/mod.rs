//! Workloads: where requests come from.
//!
//! A [`Workload`] streams requests in arrival order: the engine asks for the next one only when the
//! previous one has arrived, so a workload is never held in memory whole. Closed-loop workloads (a
//! conversation's next turn, a benchmark client's next request) learn of finished requests through
//! [`Workload::on_finished`] and answer with follow-ups.
//!
//! - [`synthetic`]: open-loop Poisson or gamma requests with shared-prefix groups.
//! - [`sessions`]: multi-turn conversations, closed or open loop, with shared system prompts.
//! - [`trace`]: trace readers (Mooncake, Azure, BurstGPT, Vidur, fleetsim's own) and replay.
//! - [`conversation_prompts`]: a benchmark dataset of cumulative conversation prompts (KubeAI's).
//! - [`concurrency`]: a benchmark's closed loop, through the [`frontend`] (client dispatch, API server,
//!   warm-up), measured as the client does ([`crate::metrics::bench`]).
//! - [`mix`]: several classes of traffic, each with its own priority and SLO, merged into one stream.
//! - [`spec`]: the scenario's `[workload]` table and the factory that builds one of the above.

pub mod adapters;
pub mod concurrency;
pub mod conversation_prompts;
pub mod dist;
pub mod frontend;
pub mod harness;
pub mod mix;
pub mod rate_curve;
pub mod sessions;
pub mod spec;
pub mod stages;
pub mod synthetic;
pub mod trace;

use crate::metrics::bench::BenchReport;
use crate::metrics::record::RequestRecord;
use crate::request::Request;
use crate::time::SimTime;

pub use concurrency::ClosedLoop;
pub use frontend::FrontendSpec;
pub use mix::{ClassSlo, ClassSpec};
pub use sessions::{SessionConfig, SessionMode, Sessions};
pub use spec::{BuiltWorkload, ClosedLoopConfig, WorkloadKind, WorkloadSpec};
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

    /// Whether [`Workload::next_arrival`] may have new arrivals after it returned `None`: the engine then
    /// asks again after every finished request (a benchmark's clients start once its warm-up finished).
    fn resumes_after_finish(&self) -> bool {
        false
    }

    /// A benchmark client's own measurements (`vllm bench serve`'s definitions), if this workload is one.
    fn bench_report(&self) -> Option<BenchReport> {
        None
    }

    /// A staged load generator's own per-stage report (inference-perf's definitions), if this
    /// workload is one.
    fn stage_report(&self) -> Option<crate::metrics::stages::StageReport> {
        None
    }

    /// Why the workload stopped early, if it did: a trace that could not be read to the end (the engine
    /// reports it after the run). Returns it once.
    fn take_error(&mut self) -> Option<String> {
        None
    }
}

/// What a workload's tests feed back to [`Workload::on_finished`]: `r` finished at `finished` with
/// `outcome` on worker 0, nothing cached or recomputed, no timestamps but the finish; a test sets
/// whatever else it needs with struct-update syntax.
#[cfg(test)]
pub(crate) fn test_record(
    r: &Request,
    outcome: crate::metrics::record::Outcome,
    finished: SimTime,
) -> RequestRecord {
    RequestRecord {
        session: r.session.map(|s| s.id),
        turn: r.session.map(|s| s.turn),
        prompt_tokens: r.prompt_tokens,
        output_tokens: r.output_tokens,
        class: r.class,
        ..RequestRecord::for_test(r.id, r.arrival, finished, outcome)
    }
}

/// Something that rewrites each request a workload makes (the model it asks for, its adapter).
pub trait RequestTag: Send {
    fn tag(&self, r: Request) -> Request;
}

/// A workload whose every request, follow-ups included, passes through `tag` on its way out; in all
/// else it is `inner`.
pub struct Tagged<T: RequestTag> {
    pub inner: Box<dyn Workload>,
    pub tag: T,
}

impl<T: RequestTag> Workload for Tagged<T> {
    fn next_arrival(&mut self) -> Option<Request> {
        let r = self.inner.next_arrival()?;
        Some(self.tag.tag(r))
    }

    fn on_finished(&mut self, record: &RequestRecord, now: SimTime) -> Option<Request> {
        let r = self.inner.on_finished(record, now)?;
        Some(self.tag.tag(r))
    }

    fn resumes_after_finish(&self) -> bool {
        self.inner.resumes_after_finish()
    }

    fn bench_report(&self) -> Option<BenchReport> {
        self.inner.bench_report()
    }

    fn take_error(&mut self) -> Option<String> {
        self.inner.take_error()
    }
}

/// Every request asks for `model` (`[workload] model = ...`), its content renamed under the model
/// ([`Request::for_model`]); a trace row that names its own model keeps it.
pub struct ForModel(pub crate::hardware::ModelId);

impl RequestTag for ForModel {
    fn tag(&self, r: Request) -> Request {
        match r.model {
            Some(_) => r,
            None => r.for_model(self.0),
        }
    }
}
