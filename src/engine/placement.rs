//! Requests placed by the model they name, and model swaps ([`crate::placement`]).
//!
//! Before a request is routed, the workers that do not serve its model are masked from the router
//! (as down). If none serves it, the gateway holds the request and, unless a swap to that model is
//! already under way, chooses a worker to swap: among those it believes up that may load the model
//! and are not swapping, an idle one before a busy one, one whose model stays loaded on another
//! worker before the last copy of a model, then the least recently used. That worker is masked from
//! every request from then on; when its last request finishes it unloads, loads and warms up
//! ([`crate::placement::SwapSpec::swap_time`]), and the requests held for its new model are routed.
//! With `add_replica_when_outstanding = n`, a request whose model's copies carry `n` or more
//! outstanding requests each is routed as usual, and a worker of a more lightly loaded model swaps to
//! its model ([`Placement::donor_for`]).
//! A crash, hang-and-restart or drain cut-off of a swapping worker cuts the swap short: the worker
//! keeps its old model, and the requests held for the new one are routed again (another worker is
//! chosen). A request whose model no worker may serve is rejected (`model_not_served`).

use std::collections::VecDeque;

use super::{Class, Event, Simulation, Truth};
use crate::hardware::{ModelId, PerfModel};
use crate::metrics::models::{ModelCounters, SwapRecord};
use crate::metrics::record::Outcome;
use crate::placement::SwapSpec;
use crate::request::RequestId;
use crate::scenario::Scenario;
use crate::time::SimTime;
use crate::worker::{Sequence, WorkerSnapshot};

/// A model a worker may serve, as it runs on that worker's group.
#[derive(Clone, Debug)]
struct Loadable {
    model: ModelId,
    perf: PerfModel,
    blocks: u32,
}

/// A swap under way on one worker.
#[derive(Clone, Copy, Debug)]
struct Swap {
    to: ModelId,
    decided: SimTime,
    /// Whether the unload began (the drain ended).
    loading: bool,
}

/// The fleet's models: what each worker serves and may serve, swaps, held requests.
#[derive(Debug)]
pub(super) struct Placement {
    /// The model of a request that names none: the first group's.
    default_model: ModelId,
    /// Per worker: its group's index into `options`.
    group: Vec<usize>,
    /// Per group: the models its workers may serve (the first is the one they start with).
    options: Vec<Vec<Loadable>>,
    /// Per worker: the model it serves (or served before a swap began).
    resident: Vec<ModelId>,
    swapping: Vec<Option<Swap>>,
    /// Per worker: when a request was last routed to it.
    last_used: Vec<SimTime>,
    /// Per worker: when it began serving its model (0 for the model it starts with).
    loaded_at: Vec<SimTime>,
    /// Requests waiting for a worker to load their model, by model, in arrival order.
    held: Vec<(ModelId, VecDeque<Sequence>)>,
    /// Requests that were held at some point (for their TTFT).
    was_held: rustc_hash::FxHashSet<RequestId>,
    spec: SwapSpec,
    pub counters: ModelCounters,
}

impl Placement {
    /// The placement of `s`'s fleet, or `None` when no request names a model and no group may swap.
    pub(super) fn of(s: &Scenario) -> Result<Option<Self>, String> {
        if !s.places_models() {
            return Ok(None);
        }
        let mut options = Vec::with_capacity(s.workers.len());
        let mut group = Vec::new();
        for (i, g) in s.workers.iter().enumerate() {
            let mut list = Vec::with_capacity(1 + g.models.len());
            for &m in std::iter::once(&g.model).chain(&g.models) {
                let mut shape = g.clone();
                if m != g.model {
                    shape.model = m;
                    shape.loaded_profile = None;
                }
                list.push(Loadable {
                    model: m,
                    perf: shape.perf(),
                    blocks: shape.kv_blocks()?,
                });
            }
            options.push(list);
            group.extend(std::iter::repeat_n(i, s.group_slots(g) as usize));
        }
        let resident: Vec<ModelId> = group.iter().map(|&g| options[g][0].model).collect();
        // Serving at t = 0: every worker, but of an autoscaled group only its first `count` slots
        // (the autoscaler reports the others as they come and go, `note_serving`).
        let mut names: Vec<&str> = Vec::with_capacity(resident.len());
        let mut first = 0;
        for g in &s.workers {
            let slots = s.group_slots(g) as usize;
            let up = if s.autoscaler.is_some() {
                g.count.0 as usize
            } else {
                slots
            };
            names.extend(
                resident[first..first + up.min(slots)]
                    .iter()
                    .map(|m| m.as_str()),
            );
            first += slots;
        }
        Ok(Some(Placement {
            default_model: s.workers[0].model,
            swapping: vec![None; group.len()],
            last_used: vec![SimTime::ZERO; group.len()],
            loaded_at: vec![SimTime::ZERO; group.len()],
            counters: ModelCounters::new(&names),
            group,
            options,
            resident,
            held: Vec::new(),
            was_held: Default::default(),
            spec: s.swaps.clone(),
        }))
    }

    fn may_serve(&self, w: usize, m: ModelId) -> bool {
        self.options[self.group[w]].iter().any(|o| o.model == m)
    }

    fn loadable(&self, w: usize, m: ModelId) -> &Loadable {
        self.options[self.group[w]]
            .iter()
            .find(|o| o.model == m)
            .expect("a worker swaps only to a model it may serve")
    }

    /// Workers serving `w`'s model and not swapping away from it (`w` included, if it is not).
    fn copies(&self, w: usize) -> usize {
        (0..self.resident.len())
            .filter(|&v| self.resident[v] == self.resident[w] && self.swapping[v].is_none())
            .count()
    }

    fn swap_under_way_to(&self, m: ModelId) -> bool {
        self.swapping.iter().flatten().any(|s| s.to == m)
    }

    fn hold(&mut self, m: ModelId, seq: Sequence) {
        if self.was_held.insert(seq.request.id) {
            self.counters.on_held();
        }
        match self.held.iter_mut().find(|(x, _)| *x == m) {
            Some((_, q)) => q.push_back(seq),
            None => self.held.push((m, VecDeque::from([seq]))),
        }
    }

    fn take_held(&mut self, m: ModelId) -> VecDeque<Sequence> {
        match self.held.iter().position(|(x, _)| *x == m) {
            Some(i) => self.held.swap_remove(i).1,
            None => VecDeque::new(),
        }
    }

    /// Per model with a routable copy that is serving (not swapping away): the requests outstanding
    /// on those copies, by the gateway's view, and how many copies that is.
    fn loads(
        &self,
        snapshots: &[WorkerSnapshot],
        routable: &impl Fn(usize) -> bool,
    ) -> Vec<(ModelId, u64, u64)> {
        let mut loads: Vec<(ModelId, u64, u64)> = Vec::new();
        for v in (0..self.resident.len()).filter(|&v| self.swapping[v].is_none() && routable(v)) {
            let o = u64::from(snapshots[v].outstanding);
            match loads.iter_mut().find(|l| l.0 == self.resident[v]) {
                Some(l) => (l.1, l.2) = (l.1 + o, l.2 + 1),
                None => loads.push((self.resident[v], o, 1)),
            }
        }
        loads
    }

    /// A load-driven swap to `m` (`add_replica_when_outstanding = n`): when `m`'s copies carry `n` or
    /// more outstanding requests each, the worker to take from another model, if any. A donor may load
    /// `m`, is routable and not swapping, and its model keeps at most half the load per copy after
    /// losing it that `m` will have per copy after gaining it (`2 O_d / (c_d - 1) <= O_m / (c_m + 1)`):
    /// a hysteresis band, since outstanding counts move by a third or more within seconds under
    /// Poisson arrivals. With a plain `<` instead, `multi-model-swap` (two hours, 60 requests/s)
    /// made 390 swaps, 166 of them Qwen3-8B and Llama-3.1-8B trading a worker back and forth; with
    /// the band, 49.
    /// The last copy of a model is never taken: its next request would wait for a swap back, and
    /// taking idle last copies made rarely used models trade GPUs every few seconds. Nor is a worker
    /// that has served its model for less than `min_residency`, so a burst of a few seconds does not
    /// move GPUs back and forth. The lightest donor model goes first, then the least recently used
    /// worker.
    pub(super) fn donor_for(
        &self,
        m: ModelId,
        n: u32,
        now: SimTime,
        snapshots: &[WorkerSnapshot],
        routable: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        let loads = self.loads(snapshots, &routable);
        let load_of = |model: ModelId| {
            loads
                .iter()
                .find(|l| l.0 == model)
                .map_or((0, 0), |l| (l.1, l.2))
        };
        let (o_m, c_m) = load_of(m);
        if c_m == 0 || o_m < u64::from(n) * c_m {
            return None;
        }
        let after_m = o_m as f64 / (c_m + 1) as f64;
        (0..self.resident.len())
            .filter(|&w| {
                self.resident[w] != m
                    && self.swapping[w].is_none()
                    && self.may_serve(w, m)
                    && now.since(self.loaded_at[w]) >= self.spec.min_residency()
                    && routable(w)
            })
            .filter_map(|w| {
                let (o_d, c_d) = load_of(self.resident[w]);
                if c_d < 2 {
                    return None;
                }
                let after_d = o_d as f64 / (c_d - 1) as f64;
                (2.0 * after_d <= after_m).then_some((after_d, self.last_used[w], w))
            })
            .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)))
            .map(|(.., w)| w)
    }

    /// Every held request (at the end of a run).
    pub(super) fn take_all_held(&mut self) -> Vec<Sequence> {
        std::mem::take(&mut self.held)
            .into_iter()
            .flat_map(|(_, q)| q)
            .collect()
    }
}

impl Simulation {
    /// Masks the snapshots to the workers that serve `seq`'s model and returns it to be routed (perhaps
    /// with none up); or holds it for a swap, or rejects it when no worker may serve its model, and
    /// returns `None`.
    pub(super) fn place_by_model(&mut self, seq: Sequence) -> Option<Sequence> {
        let Some(p) = self.placement.as_deref_mut() else {
            return Some(seq);
        };
        let m = seq.request.model.unwrap_or(p.default_model);
        let mut any = false;
        for (w, snap) in self.snapshots.iter_mut().enumerate() {
            snap.up &= p.resident[w] == m && p.swapping[w].is_none();
            any |= snap.up;
        }
        if any {
            if let Some(n) = p.spec.add_replica_when_outstanding
                && !p.swap_under_way_to(m)
                && let Some(w) = p.donor_for(m, n.0, self.now, &self.snapshots, |w| {
                    self.gateway.routable(w)
                })
            {
                self.start_swap(w, m);
            }
            return Some(seq);
        }
        if !(0..p.resident.len()).any(|w| p.may_serve(w, m)) {
            p.counters.on_not_served();
            self.finish_seq(seq, None, Outcome::Rejected, Some("model_not_served"));
            return None;
        }
        if p.swap_under_way_to(m) {
            p.hold(m, seq);
            return None;
        }
        let target = (0..p.resident.len())
            .filter(|&w| self.gateway.routable(w) && p.swapping[w].is_none() && p.may_serve(w, m))
            .min_by_key(|&w| {
                let busy = self.workers[w].outstanding() > 0;
                (busy, p.copies(w) <= 1, p.last_used[w], w)
            });
        let Some(w) = target else {
            // Every worker that may serve the model is down or swapping: the router finds none up,
            // and the gateway retries after its backoff.
            return Some(seq);
        };
        p.hold(m, seq);
        self.start_swap(w, m);
        None
    }

    /// Worker `w` is to serve `m`: it is routed nothing from now on, and swaps once drained.
    fn start_swap(&mut self, w: usize, m: ModelId) {
        if let Some(p) = self.placement.as_deref_mut() {
            p.swapping[w] = Some(Swap {
                to: m,
                decided: self.now,
                loading: false,
            });
        }
        self.begin_swap_if_drained(w);
    }

    /// Whether worker `w` may serve `seq`'s model (it is among its group's models, loaded or not;
    /// any worker may when requests are not placed by model).
    pub(super) fn may_serve_model(&self, w: usize, seq: &Sequence) -> bool {
        self.placement
            .as_deref()
            .is_none_or(|p| p.may_serve(w, seq.request.model.unwrap_or(p.default_model)))
    }

    /// An autoscaled replica `w` began (`true`) or stopped (`false`) serving its model.
    pub(super) fn note_serving(&mut self, w: usize, serving: bool) {
        let now = self.now;
        if let Some(p) = self.placement.as_deref_mut() {
            let m = p.resident[w].as_str();
            if serving {
                p.counters.loaded(now, m);
            } else {
                p.counters.unloaded(now, m);
            }
        }
    }

    /// Notes that a request was routed to `w` (its model's recency there).
    pub(super) fn note_model_routed(&mut self, w: usize) {
        if let Some(p) = self.placement.as_deref_mut() {
            p.last_used[w] = self.now;
        }
    }

    /// Worker `w`, chosen to swap, starts unloading once its last request has finished. A worker the
    /// gateway chose but that is in fact down refuses: the swap is cut short and the held requests
    /// are routed again after the connection error.
    pub(super) fn begin_swap_if_drained(&mut self, w: usize) {
        let Some(p) = self.placement.as_deref_mut() else {
            return;
        };
        let Some(swap) = p.swapping[w].filter(|s| !s.loading) else {
            return;
        };
        if self.truth[w] != Truth::Up {
            self.cut_swap_short(w, true);
            return;
        }
        if self.workers[w].outstanding() > 0 || self.workers[w].in_step() {
            return;
        }
        let from = p.resident[w];
        let time = p.spec.swap_time(
            p.loadable(w, from).perf.weight_bytes_per_gpu(),
            p.loadable(w, swap.to).perf.weight_bytes_per_gpu(),
        );
        p.swapping[w] = Some(Swap {
            loading: true,
            ..swap
        });
        p.counters.unloaded(self.now, from.as_str());
        p.counters.on_swap(SwapRecord {
            decided_s: swap.decided.as_secs_f64(),
            worker: w,
            from: from.as_str().to_string(),
            to: swap.to.as_str().to_string(),
            drain_s: self.now.since(swap.decided).as_secs_f64(),
            swap_s: time.total().as_secs_f64(),
            completed: true,
        });
        // The old model's cache is going: the router forgets what it believed the worker held.
        self.router.on_worker_down(w);
        let epoch = self.workers[w].epoch;
        self.schedule(
            self.now + time.total(),
            Class::Fault,
            Event::SwapDone { worker: w, epoch },
        );
    }

    /// Worker `w` has loaded its new model: it serves it from now on, and the requests held for that
    /// model are routed.
    pub(super) fn on_swap_done(&mut self, w: usize, epoch: u64) {
        if self.workers[w].epoch != epoch || self.truth[w] != Truth::Up {
            return; // cut short by a fault, which has already dealt with it
        }
        let Some(p) = self.placement.as_deref_mut() else {
            return;
        };
        let Some(swap) = p.swapping[w].take() else {
            return;
        };
        let load = p.loadable(w, swap.to).clone();
        p.resident[w] = swap.to;
        p.last_used[w] = self.now;
        p.loaded_at[w] = self.now;
        p.counters.loaded(self.now, swap.to.as_str());
        let held = p.take_held(swap.to);
        self.settle_worker(w);
        self.workers[w].load_model(load.perf, load.blocks);
        self.router.on_worker_down(w);
        let profile = super::worker_profile(&self.workers[w]);
        self.router.set_worker_profile(w, &profile);
        for seq in held {
            self.dispatch(seq);
        }
    }

    /// A fault took swapping worker `w` out (or, `refused`, it was down when chosen): it keeps its old
    /// model (the restart loads that one), and the requests held for the new one are routed again,
    /// after the connection error, unless another swap to it is under way.
    pub(super) fn cut_swap_short(&mut self, w: usize, refused: bool) {
        let Some(p) = self.placement.as_deref_mut() else {
            return;
        };
        let Some(swap) = p.swapping[w].take() else {
            return;
        };
        if swap.loading {
            p.counters.on_swap_cut_short(w);
            p.counters.loaded(self.now, p.resident[w].as_str());
        }
        if p.swap_under_way_to(swap.to) {
            return;
        }
        let held = p.take_held(swap.to);
        let delay = match self.truth[w] {
            Truth::Down(super::Symptom::Unreachable) => self.gateway.spec.connect_timeout,
            _ => self.gateway.spec.connect_error_delay,
        };
        if refused {
            // The gateway learns of the dead worker from the refused swap, as from a refused request.
            if let Some(change) = self.gateway.on_error(w) {
                self.apply_belief(w, change);
            }
        }
        for seq in held {
            self.schedule(
                self.now + delay,
                Class::Arrival,
                Event::Retry(Box::new(seq)),
            );
        }
    }

    /// A request finished: if it had been held for a swap, its TTFT is counted with the held ones.
    pub(super) fn note_model_finished(
        &mut self,
        id: RequestId,
        ttft: Option<crate::time::SimDuration>,
    ) {
        if let Some(p) = self.placement.as_deref_mut()
            && p.was_held.remove(&id)
        {
            p.counters.on_held_finished(ttft);
        }
    }
}
