//! The worker's conservation laws, checked on demand: cheap enough to run at the end of every run (in
//! release builds too) and, with `--check-invariants`, after every step.

use super::Worker;

impl Worker {
    /// Checks that the worker's KV memory is conserved; `Err` names the first law that fails.
    ///
    /// 1. The pool's own invariants ([`super::kv_cache::BlockPool::check_invariants`]): `used + free ==
    ///    total`, the free queue holds exactly the unreferenced blocks, the prefix index matches the blocks.
    /// 2. Every reference to a block is held by a running sequence: the pool's references sum to the
    ///    blocks the running sequences hold, and a waiting sequence holds none.
    /// 3. A running sequence holds at least the blocks its computed tokens need.
    /// 4. With LoRA, the running sequences name at most `max_loras` distinct adapters (the V1
    ///    scheduler's skip rule), and the adapter slots keep theirs ([`crate::lora::AdapterSlots`]).
    pub fn check_invariants(&self) -> Result<(), String> {
        if let Some(slots) = &self.lora {
            let n = self.running_adapters().len();
            if n > slots.max_loras() {
                return Err(format!(
                    "worker {}: {n} distinct adapters running on {} slots",
                    self.id,
                    slots.max_loras()
                ));
            }
            slots.check();
        }
        self.pool
            .check_invariants()
            .map_err(|e| format!("worker {}: KV pool: {e}", self.id))?;
        // Running sequences hold references, and so does memory pressure (one per block it took).
        let held: u64 = self
            .running
            .iter()
            .map(|s| s.blocks.len() as u64)
            .sum::<u64>()
            + u64::from(self.reserved_blocks());
        let refs = self.pool.references();
        if held != refs {
            return Err(format!(
                "worker {}: running sequences and memory pressure hold {held} block references, the pool counts {refs}",
                self.id
            ));
        }
        if let Some(s) = self.waiting.iter().find(|s| !s.blocks.is_empty()) {
            return Err(format!(
                "worker {}: request {} is waiting but holds {} blocks",
                self.id,
                s.request.id,
                s.blocks.len()
            ));
        }
        for s in &self.running {
            let need = self.pool.blocks_for(s.computed);
            if (s.blocks.len() as u32) < need {
                return Err(format!(
                    "worker {}: request {} has {} tokens computed in {} blocks (needs {need})",
                    self.id,
                    s.request.id,
                    s.computed,
                    s.blocks.len()
                ));
            }
        }
        Ok(())
    }

    /// [`Worker::check_invariants`] for a worker whose every request has finished: additionally, no block
    /// is in use and no sequence is left.
    pub fn check_drained(&self) -> Result<(), String> {
        self.check_invariants()?;
        if self.outstanding() > 0 {
            return Err(format!(
                "worker {}: {} requests left after the run",
                self.id,
                self.outstanding()
            ));
        }
        let used = self.pool.used() - self.reserved_blocks();
        if used > 0 {
            return Err(format!(
                "worker {}: {used} block(s) still in use after every request finished (besides those memory pressure holds)",
                self.id
            ));
        }
        Ok(())
    }
}
