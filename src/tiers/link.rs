//! A link: one direction of a connection between GPU memory and a tier (PCIe to host memory, NVMe,
//! the NIC to a remote store). Transfers on a link are served one after another, in the order they
//! were asked for, so a link that is busy makes the next transfer wait.
//!
//! Invariant: `free_at` never decreases; a transfer asked for at `now` starts at `max(now, free_at)`
//! and ends `latency + bytes / bytes_per_s` later.

use crate::time::{SimDuration, SimTime};

/// One direction of one connection, with its FIFO queue reduced to the time it is next free.
#[derive(Clone, Debug)]
pub struct Link {
    bytes_per_s: f64,
    latency: SimDuration,
    free_at: SimTime,
    /// Bytes carried so far.
    pub bytes: f64,
}

impl Link {
    /// An idle link of `bytes_per_s` (> 0) and a fixed `latency` per transfer.
    pub fn new(bytes_per_s: f64, latency: SimDuration) -> Self {
        assert!(bytes_per_s > 0.0, "a link needs a positive bandwidth");
        Link {
            bytes_per_s,
            latency,
            free_at: SimTime::ZERO,
            bytes: 0.0,
        }
    }

    /// When a transfer of `bytes` asked for at `now` would end, without booking it.
    pub fn quote(&self, now: SimTime, bytes: f64) -> SimTime {
        self.free_at.max(now) + self.latency + SimDuration::from_secs_f64(bytes / self.bytes_per_s)
    }

    /// How long a transfer of `bytes` takes on the idle link (`latency + bytes / bytes_per_s`): what
    /// someone who knows the link's speed but not its queue would expect.
    pub fn idle_time(&self, bytes: f64) -> SimDuration {
        self.latency + SimDuration::from_secs_f64(bytes / self.bytes_per_s)
    }

    /// Books a transfer of `bytes` at `now`; returns when it ends.
    pub fn book(&mut self, now: SimTime, bytes: f64) -> SimTime {
        let end = self.quote(now, bytes);
        // The latency is paid by the transfer, not by the link: the next one may start after the bytes.
        self.free_at = self.free_at.max(now) + SimDuration::from_secs_f64(bytes / self.bytes_per_s);
        self.bytes += bytes;
        end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transfers_queue_behind_each_other() {
        // 1 GB/s, 1 ms: 0.5 GB takes 1 ms + 500 ms.
        let mut l = Link::new(1e9, SimDuration::from_secs_f64(0.001));
        let t0 = SimTime::ZERO;
        assert_eq!(l.book(t0, 0.5e9), t0 + SimDuration::from_secs_f64(0.501));
        // The second waits for the first's bytes (500 ms), then pays its own 1 ms + 500 ms.
        assert_eq!(l.quote(t0, 0.5e9), t0 + SimDuration::from_secs_f64(1.001));
        assert_eq!(l.book(t0, 0.5e9), t0 + SimDuration::from_secs_f64(1.001));
        // Long after, the link is idle again.
        let later = SimTime::ZERO + SimDuration::from_secs_f64(10.0);
        assert_eq!(
            l.book(later, 1e9),
            later + SimDuration::from_secs_f64(1.001)
        );
        assert_eq!(l.bytes, 2e9);
    }
}
