//! The fleet's workers, and the router's snapshots of them kept up to date incrementally.
//!
//! Routing reads a [`WorkerSnapshot`] of every worker at every arrival. Rebuilding all of them costs
//! `O(workers)` cache misses per arrival (at 1,024 workers, most of the routing phase), while between
//! two arrivals only the workers the engine touched can have changed. [`Fleet`] hands out workers
//! mutably only through [`IndexMut`] and [`Fleet::iter_mut`], and both note the worker as touched;
//! [`Fleet::refresh`] then rebuilds just those snapshots.
//!
//! Invariant: after [`Fleet::refresh`], `snapshots[w]` equals `self[w].snapshot()` for every worker
//! (checked in debug builds), except for `up`, which the gateway sets.

use std::ops::{Deref, Index, IndexMut};

use crate::worker::{Worker, WorkerSnapshot};

/// The workers of a simulation, in id order.
#[derive(Debug)]
pub struct Fleet {
    workers: Vec<Worker>,
    /// Whether a worker was handed out mutably since the last [`Fleet::refresh`].
    touched: Vec<bool>,
    /// The touched workers, each once.
    dirty: Vec<usize>,
}

impl Fleet {
    /// The fleet of `workers`, with nothing touched.
    pub fn new(workers: Vec<Worker>) -> Self {
        let n = workers.len();
        Fleet {
            workers,
            touched: vec![false; n],
            dirty: Vec::new(),
        }
    }

    /// Every worker's snapshot, built from scratch.
    pub fn snapshots(&self) -> Vec<WorkerSnapshot> {
        self.workers.iter().map(Worker::snapshot).collect()
    }

    /// Mutable access to every worker (all are noted as touched).
    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, Worker> {
        for w in 0..self.workers.len() {
            self.touch(w);
        }
        self.workers.iter_mut()
    }

    /// Rebuilds the snapshots of the workers touched since the last call (their `up` is left to the
    /// caller).
    pub fn refresh(&mut self, snapshots: &mut [WorkerSnapshot]) {
        for w in self.dirty.drain(..) {
            self.touched[w] = false;
            let up = snapshots[w].up;
            snapshots[w] = self.workers[w].snapshot();
            snapshots[w].up = up;
        }
        #[cfg(debug_assertions)]
        for (w, snap) in snapshots.iter().enumerate() {
            let fresh = WorkerSnapshot {
                up: snap.up,
                ..self.workers[w].snapshot()
            };
            assert_eq!(*snap, fresh, "worker {w}'s snapshot went stale");
        }
    }

    fn touch(&mut self, w: usize) {
        if !self.touched[w] {
            self.touched[w] = true;
            self.dirty.push(w);
        }
    }
}

impl Deref for Fleet {
    type Target = [Worker];

    fn deref(&self) -> &[Worker] {
        &self.workers
    }
}

impl Index<usize> for Fleet {
    type Output = Worker;

    fn index(&self, w: usize) -> &Worker {
        &self.workers[w]
    }
}

impl IndexMut<usize> for Fleet {
    fn index_mut(&mut self, w: usize) -> &mut Worker {
        self.touch(w);
        &mut self.workers[w]
    }
}

impl<'a> IntoIterator for &'a mut Fleet {
    type Item = &'a mut Worker;
    type IntoIter = std::slice::IterMut<'a, Worker>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hardware::{GpuId, ModelId, PerfModel, Precision};
    use crate::worker::EngineParams;

    fn test_worker(id: usize) -> Worker {
        let params = EngineParams {
            max_num_batched_tokens: 64,
            max_num_seqs: 4,
            block_size: 4,
            enable_prefix_caching: true,
            gpu_memory_utilization: 0.9,
            async_scheduling: true,
        };
        let perf = PerfModel::with_defaults(GpuId::H100, ModelId::Llama31_8b, 1, Precision::Bf16);
        Worker::with_blocks(id, perf, params, 8)
    }

    #[test]
    fn only_touched_workers_are_rebuilt_and_each_once() {
        let mut fleet = Fleet::new((0..3).map(test_worker).collect());
        let mut snaps = fleet.snapshots();
        let _ = &fleet[1]; // reading touches nothing
        fleet[2].pool.allocate();
        fleet[2].pool.allocate();
        assert_eq!(fleet.dirty, vec![2], "touched twice, listed once");
        assert_eq!(snaps[2].used_blocks, 0, "stale until refreshed");
        snaps[2].up = false;
        fleet.refresh(&mut snaps);
        assert_eq!(snaps[2].used_blocks, 2);
        assert!(!snaps[2].up, "`up` is the caller's");
        assert!(fleet.dirty.is_empty());
        for w in &mut fleet {
            w.pool.allocate();
        }
        fleet.refresh(&mut snaps);
        assert_eq!(
            snaps.iter().map(|s| s.used_blocks).collect::<Vec<_>>(),
            [1, 1, 3]
        );
    }
}
