//! The event queue: one total order over events, defined once.
//!
//! Events are ordered by `(time, class, rank, sequence)`: earlier time first; at equal times the lower
//! class first (see [`Class`]); at equal time and class, the lower rank (0 unless the event was pushed
//! with [`EventQueue::push_ranked`]), then the one scheduled first (FIFO). The order never depends on
//! the events' contents or on memory addresses, so a run is reproducible to the byte.
//!
//! The engine ranks the end of a worker's step by the worker's id, so that two steps ending at the same
//! instant are handled in an order that does not depend on *when* their ends were scheduled: the decode
//! fast path schedules the end of a run of steps once, at its first step, where stepping one by one
//! schedules each end at the previous one.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::time::SimTime;

/// Priority of an event among those due at the same instant. Lower runs first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// Faults first: the world changes before anything else due at the same instant sees it.
    Fault = 0,
    /// Arrivals (and retries), so a request arriving exactly when a step ends is in the next batch.
    Arrival = 1,
    /// Then the end of worker steps, which form the next batch.
    StepDone = 2,
    /// Last, the gateway's own clock: health checks, timeouts, failed connections.
    Gateway = 3,
}

struct Entry<E> {
    time: SimTime,
    class: Class,
    rank: u64,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, o: &Self) -> bool {
        self.key() == o.key()
    }
}
impl<E> Eq for Entry<E> {}
impl<E> Entry<E> {
    fn key(&self) -> (SimTime, Class, u64, u64) {
        (self.time, self.class, self.rank, self.seq)
    }
}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Entry<E> {
    /// Reversed: `BinaryHeap` is a max-heap and we pop the smallest key.
    fn cmp(&self, o: &Self) -> Ordering {
        o.key().cmp(&self.key())
    }
}

/// A priority queue of events under the total order `(time, class, rank, sequence)`.
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    next_seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            next_seq: 0,
        }
    }
}

impl<E> EventQueue<E> {
    /// Schedules `event` at `time`.
    pub fn push(&mut self, time: SimTime, class: Class, event: E) {
        self.push_ranked(time, class, 0, event);
    }

    /// Schedules `event` at `time`, after every event of the same time and class with a lower `rank`.
    pub fn push_ranked(&mut self, time: SimTime, class: Class, rank: u64, event: E) {
        self.heap.push(Entry {
            time,
            class,
            rank,
            seq: self.next_seq,
            event,
        });
        self.next_seq += 1;
    }

    /// Removes and returns the first event in the total order.
    pub fn pop(&mut self) -> Option<(SimTime, E)> {
        self.heap.pop().map(|e| (e.time, e.event))
    }

    /// [`EventQueue::pop`], with the event's class.
    pub fn pop_with_class(&mut self) -> Option<(SimTime, Class, E)> {
        self.heap.pop().map(|e| (e.time, e.class, e.event))
    }

    /// Events pending.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether no event is pending.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_then_class_then_fifo() {
        let mut q = EventQueue::default();
        q.push(SimTime(5), Class::StepDone, "step@5");
        q.push(SimTime(5), Class::Arrival, "arrival@5 first");
        q.push(SimTime(5), Class::Arrival, "arrival@5 second");
        q.push(SimTime(1), Class::StepDone, "step@1");
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).map(|(_, e)| e).collect();
        assert_eq!(
            order,
            ["step@1", "arrival@5 first", "arrival@5 second", "step@5"]
        );
    }

    #[test]
    fn rank_orders_before_fifo_within_a_class() {
        let mut q = EventQueue::default();
        q.push_ranked(SimTime(5), Class::StepDone, 3, "w3, scheduled first");
        q.push_ranked(SimTime(5), Class::StepDone, 1, "w1, scheduled second");
        q.push(SimTime(5), Class::Gateway, "gateway");
        q.push_ranked(SimTime(5), Class::StepDone, 1, "w1, scheduled third");
        let order: Vec<_> = std::iter::from_fn(|| q.pop_with_class())
            .map(|(_, _, e)| e)
            .collect();
        assert_eq!(
            order,
            [
                "w1, scheduled second",
                "w1, scheduled third",
                "w3, scheduled first",
                "gateway"
            ]
        );
    }
}
