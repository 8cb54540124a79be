//! A worker's adapters: GPU slots and the CPU cache, both least recently used first.
//!
//! Invariants (checked by [`AdapterSlots::check`] in tests):
//! - at most `max_loras` adapters hold a GPU slot and at most `max_cpu_loras` sit in the CPU cache;
//! - every adapter in a GPU slot is in the CPU cache too (vLLM deactivates an adapter the CPU cache
//!   evicts, `LoRALRUCache(capacity, deactivate_adapter)` in `vllm/lora/model_manager.py`);
//! - activating a batch's adapters never evicts one of that batch (the batch has at most
//!   `max_loras` distinct adapters, which the scheduler's skip rule guarantees).

use super::LoraParams;
use crate::time::SimDuration;

/// What a worker's adapters cost, for the summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoraCounters {
    /// Adapters read from disk into the CPU cache.
    pub disk_loads: u64,
    /// Adapters copied into a GPU slot (from the CPU cache, after a disk read or not).
    pub gpu_loads: u64,
    /// Time steps spent loading adapters.
    pub load_time: SimDuration,
    /// Requests skipped at least once because their adapter could not join the batch.
    pub requests_waited: u64,
    /// Steps whose batch held a LoRA request (and paid the step-time multiplier).
    pub lora_steps: u64,
}

/// A worker's GPU adapter slots and CPU adapter cache (module docs).
#[derive(Clone, Debug)]
pub struct AdapterSlots {
    pub params: LoraParams,
    /// Adapter ids in GPU slots, least recently used first.
    gpu: Vec<u64>,
    /// Adapter ids in the CPU cache, least recently used first.
    cpu: Vec<u64>,
    pub counters: LoraCounters,
}

/// Moves `id` to the most recent end of `lru`; whether it was there.
fn touch(lru: &mut Vec<u64>, id: u64) -> bool {
    match lru.iter().position(|&x| x == id) {
        Some(i) => {
            lru.remove(i);
            lru.push(id);
            true
        }
        None => false,
    }
}

/// Removes the least recently used entry of `lru` not in `keep`, and returns it.
fn evict(lru: &mut Vec<u64>, keep: &[u64]) -> Option<u64> {
    let i = lru.iter().position(|x| !keep.contains(x))?;
    Some(lru.remove(i))
}

impl AdapterSlots {
    /// Empty slots and cache (a fresh engine).
    pub fn new(params: LoraParams) -> Self {
        AdapterSlots {
            params,
            gpu: Vec::new(),
            cpu: Vec::new(),
            counters: LoraCounters::default(),
        }
    }

    /// The most distinct adapters in one batch.
    pub fn max_loras(&self) -> usize {
        self.params.max_loras.0 as usize
    }

    /// Whether `id` holds a GPU slot.
    pub fn active(&self, id: u64) -> bool {
        self.gpu.contains(&id)
    }

    /// Makes every adapter of `batch` (distinct ids with their ranks, at most `max_loras`) active, most
    /// recently used in batch order, and returns the time the loads take: for each adapter not in the
    /// CPU cache its disk read ([`LoraParams::disk_time`]), for each not in a GPU slot its copy
    /// ([`LoraParams::gpu_time`]); an adapter of rank `r` is `r × bytes_per_rank` bytes.
    pub fn activate(&mut self, batch: &[(u64, u32)], bytes_per_rank: f64) -> SimDuration {
        assert!(
            batch.len() <= self.max_loras(),
            "a batch of {} adapters on {} slots",
            batch.len(),
            self.max_loras()
        );
        let ids: Vec<u64> = batch.iter().map(|&(id, _)| id).collect();
        let mut time = SimDuration::ZERO;
        for &(id, rank) in batch {
            let bytes = f64::from(rank) * bytes_per_rank;
            if !touch(&mut self.cpu, id) {
                if self.cpu.len() >= self.params.cpu_capacity() as usize
                    && let Some(out) = evict(&mut self.cpu, &ids)
                {
                    self.gpu.retain(|&g| g != out);
                }
                self.cpu.push(id);
                self.counters.disk_loads += 1;
                time += self.params.disk_time(bytes);
            }
            if !touch(&mut self.gpu, id) {
                if self.gpu.len() >= self.max_loras() {
                    evict(&mut self.gpu, &ids).expect("a slot outside the batch");
                }
                self.gpu.push(id);
                self.counters.gpu_loads += 1;
                time += self.params.gpu_time(bytes);
            }
        }
        self.counters.load_time += time;
        time
    }

    /// Forgets every loaded adapter (the engine restarted or changed model); counters stay.
    pub fn clear(&mut self) {
        self.gpu.clear();
        self.cpu.clear();
    }

    /// Panics unless the module's invariants hold.
    pub fn check(&self) {
        assert!(self.gpu.len() <= self.max_loras());
        assert!(self.cpu.len() <= self.params.cpu_capacity() as usize);
        assert!(self.gpu.iter().all(|g| self.cpu.contains(g)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PositiveInt;

    fn slots(max_loras: u32, cpu: u32) -> AdapterSlots {
        AdapterSlots::new(LoraParams {
            max_loras: PositiveInt(max_loras),
            max_cpu_loras: Some(PositiveInt(cpu)),
            load_to_gpu: Some(GPU),
            ..LoraParams::default()
        })
    }

    fn rank16(ids: &[u64]) -> Vec<(u64, u32)> {
        ids.iter().map(|&id| (id, 16)).collect()
    }

    const DISK: SimDuration = SimDuration(300_000_000);
    const GPU: SimDuration = SimDuration(10_000_000);

    #[test]
    fn a_cold_adapter_pays_disk_and_gpu_a_cached_one_gpu_an_active_one_nothing() {
        let mut s = slots(1, 2);
        assert_eq!(s.activate(&rank16(&[1]), 0.0), DISK + GPU);
        assert_eq!(s.activate(&rank16(&[1]), 0.0), SimDuration::ZERO);
        assert_eq!(s.activate(&rank16(&[2]), 0.0), DISK + GPU); // slot: 2 replaces 1; cpu: {1, 2}
        assert_eq!(s.activate(&rank16(&[1]), 0.0), GPU); // back from the CPU cache
        assert_eq!(s.activate(&rank16(&[3]), 0.0), DISK + GPU); // cpu evicts 2 (LRU), keeps 1
        assert_eq!(s.activate(&rank16(&[2]), 0.0), DISK + GPU);
        s.check();
        assert_eq!(s.counters.disk_loads, 4);
        assert_eq!(s.counters.gpu_loads, 5);
        assert_eq!(s.counters.load_time, SimDuration(DISK.0 * 4 + GPU.0 * 5));
    }

    #[test]
    fn the_batch_keeps_its_slots_and_the_least_recent_other_goes() {
        let mut s = slots(2, 3);
        s.activate(&rank16(&[1, 2]), 0.0);
        s.activate(&rank16(&[2]), 0.0);
        // 1 is the least recently used slot: 3 takes it.
        s.activate(&rank16(&[2, 3]), 0.0);
        assert!(s.active(2) && s.active(3) && !s.active(1));
        s.check();
        s.activate(&rank16(&[4]), 0.0); // cpu {1,2,3} full: 1 goes (it had no slot); slot of 2 (LRU of {2,3}) goes
        assert!(s.active(4) && s.active(3) && !s.active(2));
        s.check();
        // A CPU eviction frees the slot of the adapter it evicts.
        let mut t = slots(2, 2);
        t.activate(&rank16(&[1, 2]), 0.0);
        assert_eq!(t.activate(&rank16(&[3]), 0.0), DISK + GPU); // cpu evicts 1, and with it 1's slot
        assert!(!t.active(1) && t.active(2) && t.active(3));
        t.check();
        s.clear();
        assert!(!s.active(3));
    }

    #[test]
    #[should_panic(expected = "a batch of 2 adapters on 1 slots")]
    fn a_batch_over_the_slots_is_a_bug() {
        slots(1, 1).activate(&rank16(&[1, 2]), 0.0);
    }

    /// A rank-r adapter of Llama-3.1-8B on q, k, v, o is r × 2 × 32 × (4 × 4096 + 2 × 4096 + 2 × 1024)
    /// bytes: 27.3 MB at rank 16. From disk it takes the fixed 300 ms plus 27.3 MB at 3 GB/s; into a
    /// GPU slot 27.3 MB at 20 GB/s; at rank 64, four times the byte-bound parts.
    #[test]
    fn load_times_grow_with_the_adapter_s_rank() {
        use crate::hardware::ModelId;
        use crate::lora::{TargetModules, adapter_bytes_per_rank};
        let per_rank = adapter_bytes_per_rank(ModelId::Llama31_8b, TargetModules::Attention);
        assert_eq!(
            per_rank,
            2.0 * 32.0 * (4.0 * 4096.0 + 2.0 * 4096.0 + 2.0 * 1024.0)
        );
        let mut s = AdapterSlots::new(LoraParams::default());
        let bytes = 16.0 * per_rank;
        let want = DISK
            + SimDuration::from_secs_f64(bytes / 3e9)
            + SimDuration::from_secs_f64(bytes / 20e9);
        assert_eq!(s.activate(&[(1, 16)], per_rank), want);
        let mut s = AdapterSlots::new(LoraParams::default());
        let big = s.activate(&[(1, 64)], per_rank);
        assert_eq!(
            big,
            DISK + SimDuration::from_secs_f64(4.0 * bytes / 3e9)
                + SimDuration::from_secs_f64(4.0 * bytes / 20e9)
        );
        // Every linear layer adds gate, up and down: 3 × (4096 + 14336) per layer.
        let all = adapter_bytes_per_rank(ModelId::Llama31_8b, TargetModules::AllLinear);
        assert_eq!(all - per_rank, 2.0 * 32.0 * 3.0 * (4096.0 + 14336.0));
    }
}
