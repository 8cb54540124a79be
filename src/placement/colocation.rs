//! Several engines on one GPU: worker groups with the same `colocate` label share their GPUs, worker
//! `k` of each group on GPU `k` of the set, as several `vllm serve` processes on one GPU each take a
//! `--gpu-memory-utilization` share of its memory.
//!
//! What sharing means here:
//! - **Memory.** Each engine sizes its KV cache from its own `gpu_memory_utilization` share, after its
//!   own weights and reserve (`hardware::memory`), so the models resident on a GPU are bounded by its
//!   memory: the shares of the engines on one GPU add up to at most 1, as vLLM refuses to start an
//!   engine whose share is more than the memory left free.
//! - **Compute.** Kernels of different processes do not run at the same time on a GPU without MPS:
//!   the GPU time-slices between their contexts. An engine's step therefore waits while another engine
//!   on its GPU is stepping, and engines that wait take the GPU in the order they began to wait
//!   (first come, first served), so two busy engines alternate step by step. Context-switch time
//!   between processes is not modelled.
//! - **Power and billing.** A GPU idles only when none of its engines steps: its idle power is charged
//!   once, to its first engine (the host), for the time no engine on it was stepping.
//! - **Faults.** Each engine is its own process: a crash or hang of one leaves the others running; a
//!   fault on a failure domain takes every engine in it.
//!
//! **MIG.** Groups whose label's groups all name a MIG slice (`mig`) share each GPU as MIG instances
//! instead ([`crate::hardware::mig`]): each engine has its own SMs, memory and bandwidth, so they step
//! at once with no turns; the slices must fit the GPU (at most 7 compute and 8 memory slices), and each
//! engine's `gpu_memory_utilization` is a share of its slice. Power: each engine draws its slice's
//! share (compute slices / 7) of the GPU's power model at its own utilisation, and the host is charged
//! the idle power of the slices no engine holds.
//!
//! Invariants: at most one step runs on a time-shared GPU at any instant; an engine that waits for its
//! GPU is started before any engine that began to wait later.

use crate::scenario::Scenario;

/// Which workers share which GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedGpus {
    /// Per worker: the shared GPU it runs on, if any.
    pub gpu_of: Vec<Option<usize>>,
    /// Per shared GPU: its engines' worker ids, the host first.
    pub engines: Vec<Vec<usize>>,
    /// Per shared GPU: whether its engines are on MIG slices (they step at once, with no turns).
    pub concurrent: Vec<bool>,
}

impl SharedGpus {
    /// The shared GPUs of a validated scenario, or `None` when no group is co-located.
    pub fn of(s: &Scenario) -> Option<Self> {
        if s.workers
            .iter()
            .all(|g| g.colocate.is_none() && g.mig.is_none())
        {
            return None;
        }
        let mut first = Vec::with_capacity(s.workers.len());
        let mut n = 0usize;
        for g in &s.workers {
            first.push(n);
            n += s.group_slots(g) as usize;
        }
        let mut gpu_of = vec![None; n];
        let mut engines: Vec<Vec<usize>> = Vec::new();
        let mut concurrent = Vec::new();
        let mut seen: Vec<&str> = Vec::new();
        for (i, g) in s.workers.iter().enumerate() {
            let Some(label) = g.colocate.as_deref() else {
                // A slice of a GPU of its own: a GPU of one engine, for its power.
                if g.mig.is_some() {
                    for k in 0..s.group_slots(g) as usize {
                        gpu_of[first[i] + k] = Some(engines.len());
                        engines.push(vec![first[i] + k]);
                        concurrent.push(true);
                    }
                }
                continue;
            };
            if seen.contains(&label) {
                continue;
            }
            seen.push(label);
            let base = engines.len();
            for k in 0..g.count.0 as usize {
                let mut on_gpu = Vec::new();
                for (j, h) in s.workers.iter().enumerate().skip(i) {
                    if h.colocate.as_deref() == Some(label) {
                        let w = first[j] + k;
                        gpu_of[w] = Some(base + k);
                        on_gpu.push(w);
                    }
                }
                engines.push(on_gpu);
                concurrent.push(g.mig.is_some());
            }
        }
        Some(SharedGpus {
            gpu_of,
            engines,
            concurrent,
        })
    }

    /// Whether `w` takes turns with other engines for its GPU (co-located without MIG).
    pub fn time_shared(&self, w: usize) -> bool {
        self.gpu_of[w].is_some_and(|g| !self.concurrent[g])
    }

    /// Whether `w` is the engine its GPU's idle power is charged to (every worker that shares no GPU
    /// is).
    pub fn is_host(&self, w: usize) -> bool {
        self.gpu_of[w].is_none_or(|g| self.engines[g][0] == w)
    }
}

/// Checks every `colocate` label: at least two groups carry it, with the same `count`, `gpu` and `tp`,
/// memory shares adding up to at most 1, and none of the features that assume a worker owns its GPU
/// (prefill/decode roles, late starts, an autoscaler).
pub fn validate(s: &Scenario) -> Result<(), (String, String)> {
    let mut seen: Vec<&str> = Vec::new();
    for (i, g) in s.workers.iter().enumerate() {
        let Some(label) = g.colocate.as_deref() else {
            continue;
        };
        let at = |f: &str| format!("workers[{i}].{f}");
        if label.is_empty() {
            return Err((at("colocate"), "must not be empty".into()));
        }
        if s.autoscaler.is_some() {
            return Err((
                at("colocate"),
                "co-located engines are not autoscaled: leave out [autoscaler] or colocate".into(),
            ));
        }
        if g.start_at.is_some() {
            return Err((
                at("start_at"),
                "a co-located group starts with its GPUs' other engines, at t = 0".into(),
            ));
        }
        if g.role != crate::worker::role::Role::Both || g.prefill_workers > 0 {
            return Err((
                at("colocate"),
                "prefill/decode roles are not supported on shared GPUs".into(),
            ));
        }
        if seen.contains(&label) {
            continue;
        }
        seen.push(label);
        let members: Vec<(usize, &crate::scenario::WorkerGroup)> = s
            .workers
            .iter()
            .enumerate()
            .filter(|(_, h)| h.colocate.as_deref() == Some(label))
            .collect();
        if members.len() < 2 {
            return Err((
                at("colocate"),
                format!(
                    "`{label}` is the label of this group only: co-location puts the engines of two \
                     or more groups with the same label on one GPU"
                ),
            ));
        }
        let mig = g.mig.is_some();
        let mut share = 0.0;
        let (mut compute, mut memory) = (0, 0);
        for &(j, h) in &members {
            if h.mig.is_some() != mig {
                let (with, without) = if mig { (i, j) } else { (j, i) };
                return Err((
                    format!("workers[{without}].mig"),
                    format!(
                        "co-located with workers[{with}] (`{label}`), which runs on a MIG slice: the \
                         engines of one GPU are all on MIG slices or all time-share it"
                    ),
                ));
            }
            if let Some(p) = h.mig_profile() {
                compute += p.compute;
                memory += p.memory;
                if compute > crate::hardware::mig::MigProfile::COMPUTE_SLICES
                    || memory > crate::hardware::mig::MigProfile::MEMORY_SLICES
                {
                    return Err((
                        format!("workers[{j}].mig"),
                        format!(
                            "the MIG slices co-located as `{label}` take {compute} compute and \
                             {memory} memory slices of each GPU: a GPU has 7 and 8"
                        ),
                    ));
                }
            }
            let same = |f: &str, ok: bool, what: String| {
                if ok {
                    Ok(())
                } else {
                    Err((
                        format!("workers[{j}].{f}"),
                        format!(
                            "co-located with workers[{i}] (`{label}`), so it must have the same {f}: {what}"
                        ),
                    ))
                }
            };
            same(
                "count",
                h.count == g.count,
                format!("{} against {}", h.count.0, g.count.0),
            )?;
            same(
                "gpu",
                h.gpu == g.gpu,
                format!("{} against {}", h.gpu.as_str(), g.gpu.as_str()),
            )?;
            same("tp", h.tp == g.tp, format!("{} against {}", h.tp.0, g.tp.0))?;
            share += h.gpu_memory_utilization.0;
        }
        if !mig && share > 1.0 + 1e-9 {
            let last = members.last().expect("two or more").0;
            return Err((
                format!("workers[{last}].gpu_memory_utilization"),
                format!(
                    "the engines co-located as `{label}` ask for {share:.2} of their GPUs' memory \
                     in all: their gpu_memory_utilization must add up to at most 1 (vLLM refuses to \
                     start an engine whose share is more than the memory left free)"
                ),
            ));
        }
    }
    Ok(())
}
