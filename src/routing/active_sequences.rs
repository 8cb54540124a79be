//! The router's own ledger of the requests it has sent and not yet seen finish, per worker: the load
//! signal of Dynamo's KV router ("active sequences").
//!
//! For each worker it keeps the prompt blocks of its active requests (queued or running), each block
//! counted once however many active requests share it, and the prefill tokens still to compute: a
//! request's uncached prompt tokens from the moment it is routed until its first token comes back.
//! Output blocks are not tracked (Dynamo's `router_track_output_blocks` defaults to off). The ledger is
//! fed only by what a gateway sees: routing decisions, first tokens and completions. It therefore sees a
//! request routed a microsecond ago, which a scraped engine metric (blocks in use) does not.
//!
//! Invariants: `blocks[w]` holds exactly the distinct hashes of the prompts of the requests active on
//! `w`, each with the number of those requests that contain it; `prefill_tokens[w]` is the sum of the
//! pending prefill tokens of the requests active on `w` that have not produced a first token.

use rustc_hash::FxHashMap as HashMap;

/// One active request.
#[derive(Debug)]
struct Active {
    worker: usize,
    hashes: Vec<u64>,
    /// Prefill tokens still counted against the worker (0 once the first token came back).
    prefill_tokens: u64,
}

/// One worker's share of the ledger.
#[derive(Debug, Default)]
struct WorkerLedger {
    /// Prompt block → active requests on this worker whose prompt contains it.
    blocks: HashMap<u64, u32>,
    prefill_tokens: u64,
    requests: u32,
}

/// Per worker, the prompt blocks and pending prefill tokens of the requests the router sent there.
#[derive(Debug, Default)]
pub struct ActiveSequences {
    workers: Vec<WorkerLedger>,
    requests: HashMap<u64, Active>,
}

impl ActiveSequences {
    fn ledger(&mut self, w: usize) -> &mut WorkerLedger {
        if self.workers.len() <= w {
            self.workers.resize_with(w + 1, WorkerLedger::default);
        }
        &mut self.workers[w]
    }

    /// Request `id`, whose prompt blocks are `hashes` and whose uncached prompt tokens are
    /// `prefill_tokens`, was sent to worker `w`. A request already in the ledger is moved.
    pub fn add(&mut self, id: u64, w: usize, hashes: &[u64], prefill_tokens: u64) {
        self.remove(id);
        let l = self.ledger(w);
        for &h in hashes {
            *l.blocks.entry(h).or_insert(0) += 1;
        }
        l.prefill_tokens += prefill_tokens;
        l.requests += 1;
        self.requests.insert(
            id,
            Active {
                worker: w,
                hashes: hashes.to_vec(),
                prefill_tokens,
            },
        );
    }

    /// Request `id`'s first token came back: its prefill no longer loads its worker.
    pub fn first_token(&mut self, id: u64) {
        if let Some(a) = self.requests.get_mut(&id) {
            let tokens = std::mem::take(&mut a.prefill_tokens);
            self.workers[a.worker].prefill_tokens -= tokens;
        }
    }

    /// Request `id` finished (or failed): its blocks and any pending prefill are released.
    pub fn remove(&mut self, id: u64) {
        let Some(a) = self.requests.remove(&id) else {
            return;
        };
        let l = &mut self.workers[a.worker];
        for h in &a.hashes {
            if let Some(n) = l.blocks.get_mut(h) {
                *n -= 1;
                if *n == 0 {
                    l.blocks.remove(h);
                }
            }
        }
        l.prefill_tokens -= a.prefill_tokens;
        l.requests -= 1;
    }

    /// Forgets everything active on worker `w` (it went down).
    pub fn clear_worker(&mut self, w: usize) {
        self.requests.retain(|_, a| a.worker != w);
        if let Some(l) = self.workers.get_mut(w) {
            *l = WorkerLedger::default();
        }
    }

    /// Distinct prompt blocks of the requests active on `w`.
    pub fn active_blocks(&self, w: usize) -> u32 {
        self.workers.get(w).map_or(0, |l| l.blocks.len() as u32)
    }

    /// Of `hashes` (a prompt's chain hashes), the blocks not already among those active on `w`.
    ///
    /// A chain hash names a whole prefix, and an active request holds every block of its prompt, so the
    /// active blocks contain `hashes[i]` only if they contain all of `hashes[..i]`: the blocks already
    /// there are a leading run, found by binary search in O(log n) lookups.
    pub fn new_blocks(&self, w: usize, hashes: &[u64]) -> u32 {
        let Some(l) = self.workers.get(w).filter(|l| !l.blocks.is_empty()) else {
            return hashes.len() as u32;
        };
        let held = hashes.partition_point(|h| l.blocks.contains_key(h));
        (hashes.len() - held) as u32
    }

    /// Prefill tokens routed to `w` whose first token has not come back.
    pub fn prefill_tokens(&self, w: usize) -> u64 {
        self.workers.get(w).map_or(0, |l| l.prefill_tokens)
    }

    /// Requests active on `w`.
    pub fn requests(&self, w: usize) -> u32 {
        self.workers.get(w).map_or(0, |l| l.requests)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_added_at_routing_shared_once_and_released_at_completion() {
        let mut a = ActiveSequences::default();
        a.add(1, 0, &[10, 11, 12], 48);
        a.add(2, 0, &[10, 11, 13], 16);
        // {10, 11, 12, 13}: the shared prefix 10, 11 counts once.
        assert_eq!(a.active_blocks(0), 4);
        assert_eq!(a.requests(0), 2);
        // A third prompt [10, 11, 14] would add only block 14.
        assert_eq!(a.new_blocks(0, &[10, 11, 14]), 1);
        assert_eq!(a.new_blocks(1, &[10, 11, 14]), 3, "worker 1 holds nothing");
        assert_eq!(a.prefill_tokens(0), 64);
        a.first_token(1);
        assert_eq!(a.prefill_tokens(0), 16, "request 1's prefill is done");
        a.first_token(1);
        assert_eq!(
            a.prefill_tokens(0),
            16,
            "a repeated first token changes nothing"
        );
        a.remove(1);
        // Request 2 still holds 10, 11, 13.
        assert_eq!(a.active_blocks(0), 3);
        assert_eq!(a.new_blocks(0, &[10, 12]), 1);
        a.remove(2);
        assert_eq!(
            (a.active_blocks(0), a.prefill_tokens(0), a.requests(0)),
            (0, 0, 0)
        );
        a.remove(2);
        assert_eq!(a.active_blocks(0), 0, "removing twice is harmless");
    }

    #[test]
    fn a_worker_going_down_forgets_only_its_requests() {
        let mut a = ActiveSequences::default();
        a.add(1, 0, &[1, 2], 32);
        a.add(2, 3, &[1, 2], 32);
        a.clear_worker(3);
        assert_eq!((a.active_blocks(3), a.prefill_tokens(3)), (0, 0));
        assert_eq!((a.active_blocks(0), a.prefill_tokens(0)), (2, 32));
        a.remove(2); // its worker forgot it already
        a.remove(1);
        assert_eq!(a.active_blocks(0), 0);
    }
}
