//! `session_affinity` (sticky sessions): a conversation's turns go to the worker that served it before,
//! where its KV cache is.
//!
//! A session → worker table with a TTL since the session's last request. New sessions, expired pins and
//! requests without a session go to the least-outstanding worker. When the pinned worker is believed
//! down, or overloaded under the optional bounded-load break, the parameter says what to do:
//! `repin` (move the session to a new worker), `spill` (send this request elsewhere, keep the pin) or,
//! for overload only, `stay` (queue at the pinned worker anyway).

use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Serialize};

use super::least_outstanding::LeastOutstanding;
use super::{Decision, RouteInput, RoutingPolicy};
use crate::config::Positive;
use crate::rng::SimRng;
use crate::time::{SimDuration, SimTime};

/// What to do when the pinned worker cannot or should not take the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnUnavailable {
    /// Pin the session to the worker chosen instead.
    Repin,
    /// Send this request elsewhere; keep the pin for later turns.
    Spill,
    /// Send it to the pinned worker anyway (overload only: a down worker cannot take requests).
    Stay,
}

/// Parameters of `session_affinity`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionAffinityParams {
    /// A pin expires this long after the session's last request.
    #[serde(default = "default_ttl")]
    pub ttl: SimDuration,
    /// When the pinned worker is believed down: `repin` or `spill`.
    #[serde(default = "default_on_down")]
    pub on_down: OnUnavailable,
    /// Bounded-load break: the pinned worker is overloaded when its outstanding requests exceed
    /// `max_load_factor` × the mean over up workers (plus one). Unset: never overloaded.
    #[serde(default)]
    pub max_load_factor: Option<Positive>,
    /// When the pinned worker is overloaded: `stay`, `spill` or `repin`.
    #[serde(default = "default_on_overload")]
    pub on_overload: OnUnavailable,
}

fn default_ttl() -> SimDuration {
    SimDuration::from_secs(600)
}
fn default_on_down() -> OnUnavailable {
    OnUnavailable::Repin
}
fn default_on_overload() -> OnUnavailable {
    OnUnavailable::Spill
}

impl Default for SessionAffinityParams {
    fn default() -> Self {
        SessionAffinityParams {
            ttl: default_ttl(),
            on_down: default_on_down(),
            max_load_factor: None,
            on_overload: default_on_overload(),
        }
    }
}

impl SessionAffinityParams {
    /// Rejects combinations that cannot work. `Err((key, message))`.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.on_down == OnUnavailable::Stay {
            return Err((
                "on_down",
                "`stay` cannot apply to a down worker: use `repin` or `spill`".into(),
            ));
        }
        Ok(())
    }
}

/// Sticky routing by session id.
#[derive(Debug)]
pub struct SessionAffinity {
    params: SessionAffinityParams,
    /// Session → (worker, last request time).
    pins: HashMap<u64, (usize, SimTime)>,
    fallback: LeastOutstanding,
    /// Table size after the last purge of expired pins (purges are amortised O(1) per request).
    purged_at_len: usize,
}

impl SessionAffinity {
    /// A policy with `params`.
    pub fn new(params: SessionAffinityParams) -> Self {
        SessionAffinity {
            params,
            pins: HashMap::default(),
            fallback: LeastOutstanding::default(),
            purged_at_len: 1024,
        }
    }

    fn purge_expired(&mut self, now: SimTime) {
        if self.pins.len() < 2 * self.purged_at_len {
            return;
        }
        let ttl = self.params.ttl;
        self.pins.retain(|_, (_, last)| *last + ttl >= now);
        self.purged_at_len = self.pins.len().max(1024);
    }

    fn overloaded(&self, input: &RouteInput, w: usize) -> bool {
        let Some(factor) = self.params.max_load_factor else {
            return false;
        };
        let up: Vec<u32> = input.up().map(|s| s.outstanding).collect();
        let mean = f64::from(up.iter().sum::<u32>()) / up.len().max(1) as f64;
        f64::from(input.workers[w].outstanding) > factor.0 * mean + 1.0
    }
}

impl RoutingPolicy for SessionAffinity {
    fn name(&self) -> &'static str {
        "session_affinity"
    }

    fn reads_kv_usage(&self) -> bool {
        false
    }

    fn route(&mut self, input: &RouteInput, _rng: &mut SimRng) -> Option<Decision> {
        let now = input.now;
        self.purge_expired(now);
        let Some(session) = input.request.session.map(|s| s.id) else {
            let w = self.fallback.pick(input)?;
            return Some(Decision {
                worker: w,
                reason: "no session: fewest outstanding",
            });
        };
        let pinned = self
            .pins
            .get(&session)
            .filter(|(_, last)| *last + self.params.ttl >= now)
            .map(|&(w, _)| w);
        let (worker, reason, repin) = match pinned {
            None => (
                self.fallback.pick(input)?,
                "new pin: fewest outstanding",
                true,
            ),
            Some(w) if w >= input.workers.len() || !input.workers[w].up => {
                let other = self.fallback.pick(input)?;
                match self.params.on_down {
                    OnUnavailable::Spill => (other, "pinned worker down: spill", false),
                    _ => (other, "pinned worker down: repin", true),
                }
            }
            Some(w) if self.overloaded(input, w) => match self.params.on_overload {
                OnUnavailable::Stay => (w, "pinned (overloaded, stay)", false),
                OnUnavailable::Spill => (
                    self.fallback.pick(input)?,
                    "pinned worker overloaded: spill",
                    false,
                ),
                OnUnavailable::Repin => (
                    self.fallback.pick(input)?,
                    "pinned worker overloaded: repin",
                    true,
                ),
            },
            Some(w) => (w, "pinned", false),
        };
        match self.pins.get_mut(&session) {
            Some(pin) if !repin => pin.1 = now,
            _ => {
                self.pins.insert(session, (worker, now));
            }
        }
        Some(Decision { worker, reason })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Request;
    use crate::routing::test_support::{route_at_arrival, session_request, snapshots};
    use crate::worker::WorkerSnapshot;

    fn turn(session: u64, t_s: u64) -> Request {
        session_request(session * 100 + t_s, session, t_s)
    }

    fn go(p: &mut SessionAffinity, r: &Request, ws: &[WorkerSnapshot]) -> Decision {
        route_at_arrival(p, r, ws)
    }

    #[test]
    fn sticks_until_ttl_then_repins() {
        let mut p = SessionAffinity::new(SessionAffinityParams {
            ttl: SimDuration::from_secs(10),
            ..Default::default()
        });
        let ws = snapshots(&[0, 0, 0]);
        let first = go(&mut p, &turn(1, 0), &ws).worker;
        let busy: Vec<u32> = (0..3).map(|i| if i == first { 9 } else { 0 }).collect();
        let ws_busy = snapshots(&busy);
        assert_eq!(
            go(&mut p, &turn(1, 5), &ws_busy).worker,
            first,
            "pinned despite load"
        );
        assert_eq!(
            go(&mut p, &turn(1, 14), &ws_busy).worker,
            first,
            "TTL counts from the last request"
        );
        assert_ne!(
            go(&mut p, &turn(1, 30), &ws_busy).worker,
            first,
            "expired: least outstanding"
        );
    }

    #[test]
    fn a_pin_lives_exactly_its_ttl_and_the_purge_keeps_live_ones_only() {
        let mut p = SessionAffinity::new(SessionAffinityParams {
            ttl: SimDuration::from_secs(10),
            ..Default::default()
        });
        let ws = snapshots(&[0, 0, 0]);
        let first = go(&mut p, &turn(1, 0), &ws).worker;
        let busy: Vec<u32> = (0..3).map(|i| if i == first { 9 } else { 0 }).collect();
        // At exactly its TTL the pin holds.
        let at_ttl = session_request(1_000_001, 1, 10);
        assert_eq!(go(&mut p, &at_ttl, &snapshots(&busy)).worker, first);
        // Enough sessions to trigger the purge (2,048 pins), all at 20 s.
        for s in 2..2100 {
            go(&mut p, &turn(s, 20), &ws);
        }
        // At 25 s they are all alive: the purge keeps them.
        go(&mut p, &turn(9999, 25), &ws);
        assert_eq!(p.pins.len(), 2100, "live pins survive the purge");
        // At 100 s every one of those has expired: the purge (at 4,096 pins) drops them, leaving the
        // 2,100 new ones only.
        for s in 3000..5100 {
            go(&mut p, &turn(s, 100), &ws);
        }
        assert_eq!(p.pins.len(), 2100, "expired pins purged");
    }

    #[test]
    fn down_pinned_worker_is_never_chosen_spill_keeps_the_pin() {
        let mut p = SessionAffinity::new(SessionAffinityParams {
            on_down: OnUnavailable::Spill,
            ..Default::default()
        });
        let mut ws = snapshots(&[0, 0]);
        let first = go(&mut p, &turn(7, 0), &ws).worker;
        ws[first].up = false;
        let d = go(&mut p, &turn(7, 1), &ws);
        assert_ne!(d.worker, first);
        ws[first].up = true;
        assert_eq!(
            go(&mut p, &turn(7, 2), &ws).worker,
            first,
            "spill kept the pin"
        );
    }

    #[test]
    fn bounded_load_break() {
        let mut p = SessionAffinity::new(SessionAffinityParams {
            max_load_factor: Some(Positive(1.5)),
            on_overload: OnUnavailable::Repin,
            ..Default::default()
        });
        let ws = snapshots(&[0, 0, 0, 0]);
        let first = go(&mut p, &turn(3, 0), &ws).worker;
        let load: Vec<u32> = (0..4).map(|i| if i == first { 10 } else { 2 }).collect();
        // Mean 4: 10 > 1.5·4 + 1, so the pin breaks and moves.
        let moved = go(&mut p, &turn(3, 1), &snapshots(&load)).worker;
        assert_ne!(moved, first);
        assert_eq!(go(&mut p, &turn(3, 2), &ws).worker, moved, "repinned");
    }
}
