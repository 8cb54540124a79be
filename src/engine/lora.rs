//! Requests for LoRA adapters ([`crate::lora`]): which workers may serve them, what the router is
//! told of the workers' adapters, and the run's adapter counters.
//!
//! A request naming an adapter goes only to a worker whose group has `[workers.lora]` with a
//! `max_lora_rank` at least the adapter's rank (vLLM refuses a larger adapter), and that serves its
//! model (placement masked the others already). When no worker of the fleet may serve it, up or not,
//! it is rejected (`adapter_not_served`) and counted, never dropped.

use rustc_hash::FxHashSet;

use super::Simulation;
use crate::metrics::lora::LoraSummary;
use crate::metrics::record::Outcome;
use crate::scenario::Scenario;
use crate::worker::Sequence;

/// The fleet's adapter bookkeeping outside the workers.
#[derive(Debug, Default)]
pub(super) struct LoraFleet {
    /// Adapters named by routed requests.
    seen: FxHashSet<u64>,
    requests: u64,
    rejected: u64,
}

impl LoraFleet {
    /// `Some` when some group has `[workers.lora]` or a request may name an adapter.
    pub(super) fn of(s: &Scenario) -> Option<Self> {
        let any = s.workers.iter().any(|g| g.lora.is_some()) || !s.requested_adapters().is_empty();
        any.then(LoraFleet::default)
    }
}

impl Simulation {
    /// Masks the snapshots to the workers that may serve `seq`'s adapter and, for a policy that
    /// reads them, describes each worker's adapters to the router. Returns the request to be routed
    /// (perhaps with none up), or `None` when it was rejected because no worker may serve it.
    pub(super) fn place_by_adapter(&mut self, seq: Sequence) -> Option<Sequence> {
        let wants_view = self.router.wants_adapter_view();
        if wants_view {
            self.router.adapter_loads().clear();
        }
        let Some(a) = seq.request.adapter else {
            return Some(seq);
        };
        let mut any = false;
        for w in 0..self.snapshots.len() {
            let ok = self.workers[w]
                .lora
                .as_ref()
                .is_some_and(|l| l.params.accepts(a))
                && self.may_serve_model(w, &seq);
            any |= ok;
            self.snapshots[w].up &= ok;
        }
        if !any {
            if let Some(fleet) = self.lora.as_deref_mut() {
                fleet.rejected += 1;
            }
            self.finish_seq(seq, None, Outcome::Rejected, Some("adapter_not_served"));
            return None;
        }
        if let Some(fleet) = self.lora.as_deref_mut() {
            fleet.requests += 1;
            fleet.seen.insert(a.id);
        }
        if wants_view {
            let loads = self
                .workers
                .iter()
                .map(|w| w.adapter_load(a.id).unwrap_or_default())
                .collect();
            *self.router.adapter_loads() = loads;
        }
        Some(seq)
    }

    /// The `lora` block of the summary.
    pub(super) fn lora_summary(&self) -> Option<LoraSummary> {
        let fleet = self.lora.as_deref()?;
        let mut s = LoraSummary {
            requests_with_adapter: fleet.requests,
            adapters_requested: fleet.seen.len() as u64,
            rejected_adapter_not_served: fleet.rejected,
            ..LoraSummary::default()
        };
        for c in self.workers.iter().filter_map(|w| w.lora.as_ref()) {
            let c = c.counters;
            s.disk_loads += c.disk_loads;
            s.gpu_loads += c.gpu_loads;
            s.load_seconds += c.load_time.as_secs_f64();
            s.requests_waited_for_slot += c.requests_waited;
            s.lora_steps += c.lora_steps;
        }
        Some(s)
    }
}
