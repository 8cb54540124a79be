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

/// The heap's record of one pending event: its place in the order and the slot its event waits in.
/// The heap moves only these 32-byte keys as it sifts; the events (the engine's are 96 bytes: an
/// arrival carries its request) stay put in their slots until popped.
#[derive(Clone, Copy)]
struct Key {
    time: SimTime,
    /// The class in the top two bits, the rank below: one comparison orders both.
    class_rank: u64,
    seq: u64,
    slot: u32,
}

impl Key {
    /// Ranks below this fit under the class bits.
    const MAX_RANK: u64 = 1 << 62;

    fn order(&self) -> (SimTime, u64, u64) {
        (self.time, self.class_rank, self.seq)
    }

    fn class(&self) -> Class {
        match self.class_rank >> 62 {
            0 => Class::Fault,
            1 => Class::Arrival,
            2 => Class::StepDone,
            _ => Class::Gateway,
        }
    }
}

impl PartialEq for Key {
    fn eq(&self, o: &Self) -> bool {
        self.order() == o.order()
    }
}
impl Eq for Key {}
impl PartialOrd for Key {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Key {
    /// Reversed: `BinaryHeap` is a max-heap and we pop the smallest key.
    fn cmp(&self, o: &Self) -> Ordering {
        o.order().cmp(&self.order())
    }
}

/// A priority queue of events under the total order `(time, class, rank, sequence)`.
///
/// Invariant: every key in `heap` names a distinct slot of `slots` holding an event, every other slot
/// is empty and listed once in `vacant`.
pub struct EventQueue<E> {
    heap: BinaryHeap<Key>,
    slots: Vec<Option<E>>,
    vacant: Vec<u32>,
    next_seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            slots: Vec::new(),
            vacant: Vec::new(),
            next_seq: 0,
        }
    }
}

impl<E> EventQueue<E> {
    /// Schedules `event` at `time`.
    pub fn push(&mut self, time: SimTime, class: Class, event: E) {
        self.push_ranked(time, class, 0, event);
    }

    /// Schedules `event` at `time`, after every event of the same time and class with a lower `rank`
    /// (below 2^62).
    pub fn push_ranked(&mut self, time: SimTime, class: Class, rank: u64, event: E) {
        assert!(rank < Key::MAX_RANK, "event rank {rank} out of range");
        let slot = match self.vacant.pop() {
            Some(slot) => {
                self.slots[slot as usize] = Some(event);
                slot
            }
            None => {
                let slot = u32::try_from(self.slots.len()).expect("under 2^32 pending events");
                self.slots.push(Some(event));
                slot
            }
        };
        self.heap.push(Key {
            time,
            class_rank: ((class as u64) << 62) | rank,
            seq: self.next_seq,
            slot,
        });
        self.next_seq += 1;
    }

    /// Removes and returns the first event in the total order.
    pub fn pop(&mut self) -> Option<(SimTime, E)> {
        self.pop_with_class().map(|(t, _, e)| (t, e))
    }

    /// [`EventQueue::pop`], with the event's class.
    pub fn pop_with_class(&mut self) -> Option<(SimTime, Class, E)> {
        let key = self.heap.pop()?;
        let event = self.slots[key.slot as usize]
            .take()
            .expect("a queued key names a full slot");
        self.vacant.push(key.slot);
        Some((key.time, key.class(), event))
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

    /// `BinaryHeap` only ever calls `cmp`, but `Eq` must agree with it (the `Ord` contract).
    #[test]
    fn keys_are_equal_exactly_when_they_order_equal() {
        let key = |time, class_rank, seq, slot| Key {
            time: SimTime(time),
            class_rank,
            seq,
            slot,
        };
        let a = key(5, 1, 7, 0);
        for (b, equal) in [
            (key(5, 1, 7, 3), true), // the slot is not part of the order
            (key(6, 1, 7, 0), false),
            (key(5, 2, 7, 0), false),
            (key(5, 1, 8, 0), false),
        ] {
            assert_eq!(a == b, equal);
            assert_eq!(a.cmp(&b) == Ordering::Equal, equal);
        }
    }

    #[test]
    fn keys_are_32_bytes_whatever_the_event() {
        assert_eq!(std::mem::size_of::<Key>(), 32);
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn a_rank_that_would_overwrite_the_class_is_refused() {
        let mut q = EventQueue::default();
        q.push_ranked(SimTime(1), Class::Fault, Key::MAX_RANK, ());
    }

    #[test]
    fn every_class_comes_back_as_it_went_in() {
        let mut q = EventQueue::default();
        for class in [
            Class::Gateway,
            Class::StepDone,
            Class::Arrival,
            Class::Fault,
        ] {
            q.push_ranked(SimTime(7), class, Key::MAX_RANK - 1, class);
        }
        let order: Vec<_> = std::iter::from_fn(|| q.pop_with_class()).collect();
        assert_eq!(
            order,
            [
                Class::Fault,
                Class::Arrival,
                Class::StepDone,
                Class::Gateway
            ]
            .map(|c| (SimTime(7), c, c))
        );
    }

    fn class_of(i: u8) -> Class {
        [
            Class::Fault,
            Class::Arrival,
            Class::StepDone,
            Class::Gateway,
        ][i as usize % 4]
    }

    proptest::proptest! {
        /// Pushes and pops interleaved at random pop exactly what sorting the pending events by
        /// `(time, class, rank, order of scheduling)` says, and slots are reused, never lost.
        #[test]
        fn pops_follow_the_total_order_under_any_interleaving(
            ops in proptest::collection::vec(
                proptest::option::of((0u64..20, 0u8..4, 0u64..4)), 1..400),
        ) {
            let mut q = EventQueue::default();
            let mut reference: Vec<(SimTime, Class, u64, u64)> = Vec::new();
            let mut scheduled = 0u64;
            let mut most_pending = 0;
            for op in ops {
                match op {
                    Some((t, c, rank)) => {
                        q.push_ranked(SimTime(t), class_of(c), rank, scheduled);
                        reference.push((SimTime(t), class_of(c), rank, scheduled));
                        scheduled += 1;
                    }
                    None => {
                        reference.sort();
                        let want = (!reference.is_empty()).then(|| reference.remove(0));
                        let got = q.pop_with_class();
                        proptest::prop_assert_eq!(
                            got,
                            want.map(|(t, c, _, id)| (t, c, id))
                        );
                    }
                }
                most_pending = most_pending.max(reference.len());
                proptest::prop_assert_eq!(q.len(), reference.len());
                proptest::prop_assert!(q.slots.len() <= most_pending);
                proptest::prop_assert_eq!(q.slots.len(), q.len() + q.vacant.len());
            }
        }
    }
}
