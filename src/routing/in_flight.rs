//! The gateway's own ledger of the requests it has in flight on each worker, split into those still
//! waiting for their first token (queued or prefilling) and those decoding.
//!
//! Everything here comes from what a gateway sees itself: the requests it sent (with the prompt tokens
//! it expected each worker to compute, given the cache view), each request's first token and its end.
//! Being the gateway's own record it is never stale, unlike the engines' published metrics; it is
//! blind to what only the engine knows (preemptions, the true cache hits).
//!
//! Invariants: a request is in the ledger at most once, on one worker, in one phase; each worker's
//! sums are the sums over its entries (they return to zero when its requests are all gone).

use rustc_hash::FxHashMap as HashMap;

use crate::time::SimTime;

/// One worker's requests in flight, as sums.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WorkerLoad {
    /// Requests sent and not yet answered with a first token.
    pub prefilling: u32,
    /// The prompt tokens those requests were expected to compute (prompt minus the expected cached
    /// prefix).
    pub prefill_tokens: u64,
    /// Requests that produced their first token and have not finished.
    pub decoding: u32,
    /// The prompt tokens of the decoding requests (their context, less what they generated so far).
    pub decode_context_tokens: u64,
    /// Prompt blocks of every request in flight (what their KV occupies at least, shared blocks
    /// counted once per request).
    pub blocks: u64,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    worker: usize,
    prompt_tokens: u32,
    uncached_tokens: u32,
    blocks: u32,
    routed_at: SimTime,
    first_token: Option<SimTime>,
}

/// What the ledger knew of a request when it left it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Closed {
    pub worker: usize,
    pub routed_at: SimTime,
    pub first_token: Option<SimTime>,
}

/// The ledger.
#[derive(Debug, Default)]
pub struct InFlight {
    loads: Vec<WorkerLoad>,
    requests: HashMap<u64, Entry>,
}

impl InFlight {
    /// A ledger over `workers` workers.
    pub fn new(workers: usize) -> Self {
        InFlight {
            loads: vec![WorkerLoad::default(); workers],
            requests: HashMap::default(),
        }
    }

    /// Worker `w`'s requests in flight (all zero for an unknown worker).
    pub fn load(&self, w: usize) -> WorkerLoad {
        self.loads.get(w).copied().unwrap_or_default()
    }

    /// Request `id` of `prompt_tokens` tokens, `uncached_tokens` of which the worker is expected to
    /// compute, and `blocks` prompt blocks, was sent to `worker` at `now`. A request already in the
    /// ledger (a retry) leaves its old place first.
    pub fn routed(
        &mut self,
        id: u64,
        worker: usize,
        prompt_tokens: u32,
        uncached_tokens: u32,
        blocks: u32,
        now: SimTime,
    ) {
        self.remove(id);
        if worker >= self.loads.len() {
            self.loads.resize(worker + 1, WorkerLoad::default());
        }
        let l = &mut self.loads[worker];
        l.prefilling += 1;
        l.prefill_tokens += u64::from(uncached_tokens);
        l.blocks += u64::from(blocks);
        self.requests.insert(
            id,
            Entry {
                worker,
                prompt_tokens,
                uncached_tokens,
                blocks,
                routed_at: now,
                first_token: None,
            },
        );
    }

    /// The first token of `id` came back at `now`: it moves from prefilling to decoding. Returns when
    /// it had been routed, or `None` for a request not in the ledger or already decoding.
    pub fn first_token(&mut self, id: u64, now: SimTime) -> Option<SimTime> {
        let e = self.requests.get_mut(&id)?;
        if e.first_token.is_some() {
            return None;
        }
        e.first_token = Some(now);
        let l = &mut self.loads[e.worker];
        l.prefilling -= 1;
        l.prefill_tokens -= u64::from(e.uncached_tokens);
        l.decoding += 1;
        l.decode_context_tokens += u64::from(e.prompt_tokens);
        Some(e.routed_at)
    }

    /// Request `id` left its worker (finished, failed, lost): what the ledger knew of it.
    pub fn remove(&mut self, id: u64) -> Option<Closed> {
        let e = self.requests.remove(&id)?;
        let l = &mut self.loads[e.worker];
        if e.first_token.is_some() {
            l.decoding -= 1;
            l.decode_context_tokens -= u64::from(e.prompt_tokens);
        } else {
            l.prefilling -= 1;
            l.prefill_tokens -= u64::from(e.uncached_tokens);
        }
        l.blocks -= u64::from(e.blocks);
        Some(Closed {
            worker: e.worker,
            routed_at: e.routed_at,
            first_token: e.first_token,
        })
    }

    /// Forgets every request on worker `w` (it went down).
    pub fn clear_worker(&mut self, w: usize) {
        self.requests.retain(|_, e| e.worker != w);
        if let Some(l) = self.loads.get_mut(w) {
            *l = WorkerLoad::default();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_follow_the_requests_and_return_to_zero() {
        let mut f = InFlight::new(2);
        f.routed(1, 0, 1000, 600, 62, SimTime(0));
        f.routed(2, 0, 200, 200, 12, SimTime(5));
        assert_eq!(
            f.load(0),
            WorkerLoad {
                prefilling: 2,
                prefill_tokens: 800,
                decoding: 0,
                decode_context_tokens: 0,
                blocks: 74,
            }
        );
        assert_eq!(f.first_token(1, SimTime(9)), Some(SimTime(0)));
        assert_eq!(f.first_token(1, SimTime(10)), None, "only the first counts");
        let l = f.load(0);
        assert_eq!((l.prefilling, l.prefill_tokens), (1, 200));
        assert_eq!((l.decoding, l.decode_context_tokens), (1, 1000));
        // A retry of request 2 on worker 1 leaves worker 0.
        f.routed(2, 1, 200, 100, 12, SimTime(20));
        assert_eq!(f.load(0).prefilling, 0);
        assert_eq!(f.load(1).prefill_tokens, 100);
        let c = f.remove(1).unwrap();
        assert_eq!((c.worker, c.first_token), (0, Some(SimTime(9))));
        assert_eq!(f.load(0), WorkerLoad::default());
        f.clear_worker(1);
        assert_eq!(f.load(1), WorkerLoad::default());
        assert_eq!(f.remove(2), None, "forgotten with its worker");
    }
}
