//! Multi-turn conversations (ARCHITECTURE §1.2).
//!
//! Sessions start as an open-loop process: Poisson or gamma (with a CV) at `session_rate`, optionally
//! shaped by a [`RateCurve`]. When a session starts its whole plan is drawn at once: the number of turns,
//! its shared context (a system prompt, a tool schema, a retrieved document, each from a pool with Zipf
//! popularity), and for every turn the user message, the answer length and the think time before it.
//! Drawing the plan up front makes the random numbers independent of how fast the fleet answers, so the
//! same seed gives the same conversations under any routing policy, and a plan written out by
//! `fleetsim trace gen` replays exactly as it runs live.
//!
//! **Prompts.** Turn k's prompt is the shared context, then every earlier turn's user message and
//! answer, then turn k's user message: turn k+1's prompt extends turn k's prompt and answer exactly, so
//! its prefix is cached wherever turn k ran (the answer's segment is [`Request::answer_segment`], the one
//! a worker caches after the request). A session ends early, before the turn whose prompt and answer
//! would exceed `max_context` (turn 0 always runs).
//!
//! **Closed loop** (default): turn k+1 arrives a think time after turn k *completes*, so slow answers
//! delay the next turn. A turn that fails or is rejected ends its session: the user gives up, and the
//! remaining turns never arrive (a gateway that retries does so before the turn counts as failed).
//! **Open loop**: turn k+1 arrives a think time after turn k *arrived*, whatever happened to it: the
//! arrival times are fixed in advance, as when replaying a logged trace.
//!
//! No request arrives at or after the end of the arrival window (a session still going then is cut
//! short), and none after `max_requests`. State is kept per active session (its plan) and freed when
//! the session ends.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rand::Rng;
use rand_distr::{Distribution, Zipf};
use rustc_hash::FxHashMap as HashMap;
use serde::{Deserialize, Serialize};

use super::Workload;
use super::dist::{ArrivalProcess, DurationDist, LengthDist};
use super::rate_curve::RateCurve;
use super::trace::{Timing, TraceRow};
use crate::config::{Fraction, NonNegative, PositiveInt};
use crate::metrics::record::{Outcome, RequestRecord};
use crate::request::{Request, Segment, SessionRef};
use crate::rng::{SimRng, fnv1a, splitmix64};
use crate::time::{SimDuration, SimTime};

/// A pool of shared segments (system prompts, tool schemas, documents) with Zipf popularity.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SegmentPool {
    /// Distinct segments in the pool.
    pub count: PositiveInt,
    /// Tokens in each.
    pub tokens: PositiveInt,
    /// Zipf exponent of their popularity (0 = uniform).
    #[serde(default)]
    pub zipf: NonNegative,
    /// Fraction of sessions that include one (default 1).
    #[serde(default = "Fraction::one")]
    pub fraction: Fraction,
}

/// When a session's later turns arrive.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SessionMode {
    /// A think time after the previous turn completes.
    #[default]
    Closed,
    /// A think time after the previous turn arrived (times fixed in advance).
    Open,
}

/// Settings of the session generator (built from a scenario's `[workload]` table).
#[derive(Clone, Debug, PartialEq)]
pub struct SessionConfig {
    /// Mean new sessions per second.
    pub rate: f64,
    /// Coefficient of variation of the gaps between session starts (gamma process); `None` is Poisson.
    pub cv: Option<f64>,
    /// Optional shape of the session rate over time.
    pub curve: Option<RateCurve>,
    /// Turns per session.
    pub turns: LengthDist,
    /// Tokens of the first user message.
    pub first_prompt: LengthDist,
    /// Tokens of each later user message.
    pub prompt: LengthDist,
    /// Tokens of each answer.
    pub output: LengthDist,
    /// Think time before each turn after the first.
    pub think: DurationDist,
    pub system_prompts: Option<SegmentPool>,
    pub tools: Option<SegmentPool>,
    pub documents: Option<SegmentPool>,
    pub mode: SessionMode,
    /// Largest prompt + answer of any turn, in tokens.
    pub max_context: Option<u32>,
}

/// One turn of a plan.
#[derive(Clone, Copy, Debug, PartialEq)]
struct TurnPlan {
    /// Think time before this turn (zero for turn 0).
    think: SimDuration,
    message: u32,
    answer: u32,
}

/// A session drawn in full when it starts.
#[derive(Clone, Debug, PartialEq)]
struct Plan {
    session: u64,
    /// Request id of turn 0; turn k is `first_id + k`.
    first_id: u64,
    start: SimTime,
    /// Shared context at the start of every prompt.
    context: Vec<Segment>,
    turns: Vec<TurnPlan>,
}

impl Plan {
    /// The prompt of turn `k`: context, earlier messages and answers, then the new message.
    fn segments(&self, k: usize) -> Vec<Segment> {
        let mut s = Vec::with_capacity(self.context.len() + 2 * k + 1);
        s.extend_from_slice(&self.context);
        for (j, t) in self.turns[..k].iter().enumerate() {
            s.push(Segment {
                content: message_content(self.session, j as u32),
                tokens: t.message,
            });
            s.push(Request::answer_segment(self.first_id + j as u64, t.answer));
        }
        s.push(Segment {
            content: message_content(self.session, k as u32),
            tokens: self.turns[k].message,
        });
        s
    }

    /// Turn `k`, arriving at `arrival`. Its new message ends the prompt and is new to the whole run:
    /// later turns quote it, but arrive later (a think time after this one completes, or after it
    /// arrived), so it is the request's private tail. The last turn's message and answer are quoted by
    /// no turn at all ([`Request::never_quoted`]).
    fn request(&self, k: usize, arrival: SimTime) -> Request {
        let r = Request::new(
            self.first_id + k as u64,
            Some(SessionRef {
                id: self.session,
                turn: k as u32,
            }),
            arrival,
            self.turns[k].answer,
            self.segments(k),
        )
        .with_private_tail();
        if k + 1 == self.turns.len() {
            r.never_quoted()
        } else {
            r
        }
    }
}

/// Content id of user message `turn` of `session`.
fn message_content(session: u64, turn: u32) -> u64 {
    splitmix64(splitmix64(fnv1a(b"session-message") ^ session) ^ u64::from(turn))
}

/// Content id of item `i` of the pool called `tag`.
pub fn pool_content(tag: &str, i: u32) -> u64 {
    splitmix64(fnv1a(tag.as_bytes()) ^ u64::from(i))
}

/// Draws session starts and plans, in start order.
struct Planner {
    cfg: SessionConfig,
    rng: SimRng,
    process: ArrivalProcess,
    pools: Vec<(&'static str, SegmentPool, Option<Zipf<f64>>)>,
    clock: SimTime,
    end: SimTime,
    next_session: u64,
    next_id: u64,
    exhausted: bool,
}

impl Planner {
    fn new(cfg: SessionConfig, rng: SimRng, end: SimTime) -> Self {
        // Operational time runs at the mean rate; the curve (if any) warps it into simulated time.
        let process = match cfg.cv {
            Some(cv) => ArrivalProcess::gamma(cfg.rate, cv),
            None => ArrivalProcess::poisson(cfg.rate),
        };
        let pools = [
            ("system-prompt", &cfg.system_prompts),
            ("tool-schema", &cfg.tools),
            ("document", &cfg.documents),
        ]
        .into_iter()
        .filter_map(|(tag, p)| {
            p.clone().map(|p| {
                let zipf = (p.zipf.0 > 0.0)
                    .then(|| Zipf::new(f64::from(p.count.0), p.zipf.0).expect("validated zipf"));
                (tag, p, zipf)
            })
        })
        .collect();
        Planner {
            cfg,
            rng,
            process,
            pools,
            clock: SimTime::ZERO,
            end,
            next_session: 0,
            next_id: 0,
            exhausted: false,
        }
    }

    /// The next session to start before the end of the window, or `None`.
    fn next_plan(&mut self) -> Option<Plan> {
        if self.exhausted {
            return None;
        }
        let gap = self.process.next_gap(&mut self.rng);
        let start = match &self.cfg.curve {
            None => Some(self.clock + gap),
            Some(c) => c.advance(self.clock, gap.as_secs_f64()),
        };
        let start = match start {
            Some(t) if t < self.end => t,
            _ => {
                self.exhausted = true;
                return None;
            }
        };
        self.clock = start;
        let session = self.next_session;
        self.next_session += 1;
        let n_turns = self.cfg.turns.sample(&mut self.rng).max(1) as usize;
        let mut context = Vec::new();
        for (tag, pool, zipf) in &self.pools {
            if self.rng.random::<f64>() < pool.fraction.0 {
                let i = match zipf {
                    Some(z) => z.sample(&mut self.rng) as u32 - 1,
                    None => self.rng.random_range(0..pool.count.0),
                };
                context.push(Segment {
                    content: pool_content(tag, i),
                    tokens: pool.tokens.0,
                });
            }
        }
        let mut used: u64 = context.iter().map(|s| u64::from(s.tokens)).sum();
        let mut turns = Vec::with_capacity(n_turns);
        for k in 0..n_turns {
            let think = if k == 0 {
                SimDuration::ZERO
            } else {
                self.cfg.think.sample(&mut self.rng)
            };
            let dist = if k == 0 {
                &self.cfg.first_prompt
            } else {
                &self.cfg.prompt
            };
            let message = dist.sample(&mut self.rng);
            let answer = self.cfg.output.sample(&mut self.rng);
            // Keep drawing the rest of the plan even past max_context, so that the draws of later
            // sessions do not depend on it.
            let fits = self
                .cfg
                .max_context
                .is_none_or(|m| used + u64::from(message) + u64::from(answer) <= u64::from(m));
            if k > 0 && (!fits || turns.len() < k) {
                continue;
            }
            used += u64::from(message) + u64::from(answer);
            turns.push(TurnPlan {
                think,
                message,
                answer,
            });
        }
        let first_id = self.next_id;
        self.next_id += turns.len() as u64;
        Some(Plan {
            session,
            first_id,
            start,
            context,
            turns,
        })
    }
}

/// The session workload: a [`Workload`] for the engine.
pub struct Sessions {
    planner: Planner,
    remaining: u64,
    /// Closed loop: live sessions, by id, with the index of the turn in flight.
    live: HashMap<u64, (Plan, usize)>,
    /// Open loop: the next turn of each live session, by arrival time.
    upcoming: BinaryHeap<Reverse<(SimTime, u64, u64)>>,
    next_start: Option<Plan>,
    seq: u64,
}

impl Sessions {
    /// A generator for `cfg`, drawing from `rng`; no arrival at or after `end`, at most `max_requests`.
    pub fn new(cfg: SessionConfig, rng: SimRng, end: SimTime, max_requests: Option<u64>) -> Self {
        let mut planner = Planner::new(cfg, rng, end);
        let next_start = match planner.cfg.mode {
            SessionMode::Open => planner.next_plan(),
            SessionMode::Closed => None,
        };
        Sessions {
            planner,
            remaining: max_requests.unwrap_or(u64::MAX),
            live: HashMap::default(),
            upcoming: BinaryHeap::new(),
            next_start,
            seq: 0,
        }
    }

    /// Sessions in progress (their plans are held).
    pub fn live_sessions(&self) -> usize {
        self.live.len()
    }

    fn take(&mut self) -> bool {
        if self.remaining == 0 {
            return false;
        }
        self.remaining -= 1;
        true
    }

    fn next_open(&mut self) -> Option<Request> {
        // Start every session whose first turn comes before the earliest pending turn.
        while let Some(plan) = &self.next_start
            && self
                .upcoming
                .peek()
                .is_none_or(|Reverse((t, _, _))| plan.start <= *t)
        {
            let plan = self.next_start.take().expect("just matched");
            self.seq += 1;
            self.upcoming
                .push(Reverse((plan.start, self.seq, plan.session)));
            self.live.insert(plan.session, (plan, 0));
            self.next_start = self.planner.next_plan();
        }
        let Reverse((at, _, session)) = self.upcoming.pop()?;
        if !self.take() {
            self.upcoming.clear();
            self.live.clear();
            self.next_start = None;
            return None;
        }
        let (plan, k) = self
            .live
            .get_mut(&session)
            .expect("a pending turn has a plan");
        let turn = *k;
        let request = plan.request(turn, at);
        let next = plan
            .turns
            .get(turn + 1)
            .map(|t| at + t.think)
            .filter(|t| *t < self.planner.end);
        match next {
            Some(t) => {
                *k += 1;
                self.seq += 1;
                self.upcoming.push(Reverse((t, self.seq, session)));
            }
            None => {
                self.live.remove(&session);
            }
        }
        Some(request)
    }
}

impl Workload for Sessions {
    fn next_arrival(&mut self) -> Option<Request> {
        match self.planner.cfg.mode {
            SessionMode::Open => self.next_open(),
            SessionMode::Closed => {
                let plan = self.planner.next_plan()?;
                if !self.take() {
                    self.planner.exhausted = true;
                    return None;
                }
                let request = plan.request(0, plan.start);
                if plan.turns.len() > 1 {
                    self.live.insert(plan.session, (plan, 0));
                }
                Some(request)
            }
        }
    }

    fn on_finished(&mut self, record: &RequestRecord, now: SimTime) -> Option<Request> {
        if self.planner.cfg.mode == SessionMode::Open {
            return None;
        }
        let session = record.session?;
        let (plan, k) = self.live.get_mut(&session)?;
        if record.turn != Some(*k as u32) {
            return None;
        }
        let next = *k + 1;
        let arrival = plan.turns.get(next).map(|t| now + t.think);
        let go = record.outcome == Outcome::Completed
            && arrival.is_some_and(|t| t < self.planner.end)
            && self.remaining > 0;
        if !go {
            self.live.remove(&session);
            return None;
        }
        self.remaining -= 1;
        let request = plan.request(next, arrival.expect("checked"));
        *k = next;
        if next + 1 == plan.turns.len() {
            self.live.remove(&session);
        }
        Some(request)
    }
}

/// Writes a session workload as trace rows without simulating it: closed-loop sessions as turn 0 at
/// its start and later turns with their think times, a session's turns on consecutive rows (the
/// native format's rule for closed-loop turns); open-loop sessions as arrivals in time order.
pub struct SessionRows {
    inner: Sessions,
    closed: std::vec::IntoIter<TraceRow>,
}

impl SessionRows {
    /// Rows of the workload `cfg` would generate under `rng`, before `end`, at most `max_requests`.
    pub fn new(cfg: SessionConfig, rng: SimRng, end: SimTime, max_requests: Option<u64>) -> Self {
        SessionRows {
            inner: Sessions::new(cfg, rng, end, max_requests),
            closed: Vec::new().into_iter(),
        }
    }
}

impl Iterator for SessionRows {
    type Item = TraceRow;

    fn next(&mut self) -> Option<TraceRow> {
        if self.inner.planner.cfg.mode == SessionMode::Open {
            return self
                .inner
                .next_arrival()
                .map(|r| TraceRow::from_request(&r));
        }
        if let Some(row) = self.closed.next() {
            return Some(row);
        }
        let plan = self.inner.planner.next_plan()?;
        let n = (plan.turns.len() as u64).min(self.inner.remaining) as usize;
        if n == 0 {
            return None;
        }
        self.inner.remaining -= n as u64;
        let rows: Vec<TraceRow> = (0..n)
            .map(|k| {
                let r = plan.request(k, plan.start);
                let mut row = TraceRow::from_request(&r);
                if k > 0 {
                    row.timing = Timing::After(plan.turns[k].think);
                }
                row
            })
            .collect();
        self.closed = rows.into_iter();
        self.closed.next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Positive;
    use crate::request::block_hashes;
    use crate::rng::from_u64;

    pub(crate) fn config(mode: SessionMode) -> SessionConfig {
        SessionConfig {
            rate: 2.0,
            cv: None,
            curve: None,
            turns: LengthDist::Geometric {
                mean: Positive(4.0),
                min: None,
                max: None,
            },
            first_prompt: LengthDist::Lognormal {
                median: Positive(300.0),
                sigma: NonNegative(0.6),
                min: None,
                max: None,
            },
            prompt: LengthDist::Lognormal {
                median: Positive(120.0),
                sigma: NonNegative(0.8),
                min: None,
                max: None,
            },
            output: LengthDist::Lognormal {
                median: Positive(200.0),
                sigma: NonNegative(0.7),
                min: None,
                max: None,
            },
            think: DurationDist::Lognormal {
                median: SimDuration::from_secs(10),
                sigma: 1.0,
                min: None,
                max: None,
            },
            system_prompts: Some(SegmentPool {
                count: PositiveInt(10),
                tokens: PositiveInt(1000),
                zipf: NonNegative(1.1),
                fraction: Fraction(1.0),
            }),
            tools: Some(SegmentPool {
                count: PositiveInt(5),
                tokens: PositiveInt(400),
                zipf: NonNegative(0.0),
                fraction: Fraction(0.3),
            }),
            documents: None,
            mode,
            max_context: None,
        }
    }

    fn record(r: &Request, outcome: Outcome, finished: SimTime) -> RequestRecord {
        RequestRecord {
            class: 0,
            ..crate::workload::test_record(r, outcome, finished)
        }
    }

    /// Every request of an open-loop run, in arrival order.
    fn open_requests(cfg: SessionConfig, secs: u64) -> Vec<Request> {
        let mut w = Sessions::new(cfg, from_u64(3), SimTime(secs * 1_000_000_000), None);
        std::iter::from_fn(|| w.next_arrival()).collect()
    }

    #[test]
    fn each_turn_extends_the_previous_prompt_and_answer() {
        let reqs = open_requests(config(SessionMode::Open), 2000);
        let mut last: HashMap<u64, Request> = HashMap::default();
        let mut follow_ups = 0;
        for r in &reqs {
            let s = r.session.unwrap();
            if let Some(prev) = last.get(&s.id) {
                assert_eq!(s.turn, prev.session.unwrap().turn + 1);
                // Segment by segment: previous prompt, previous answer, then one new message.
                let mut expect = prev.segments.clone();
                expect.push(prev.output_segment());
                assert_eq!(r.segments[..expect.len()], expect[..]);
                assert_eq!(r.segments.len(), expect.len() + 1);
                assert!(r.prompt_tokens > prev.prompt_tokens + prev.output_tokens);
                // Block by block, at the engine's block size.
                let h_prev = prev.block_hashes(16);
                let h = block_hashes(r.segments.iter().copied(), 16);
                assert_eq!(h[..h_prev.len()], h_prev[..]);
                follow_ups += 1;
            } else {
                assert_eq!(s.turn, 0);
            }
            last.insert(s.id, r.clone());
        }
        assert!(follow_ups > 5000, "{follow_ups}");
        let arrivals: Vec<SimTime> = reqs.iter().map(|r| r.arrival).collect();
        assert!(arrivals.windows(2).all(|w| w[0] <= w[1]));
        let mut ids: Vec<u64> = reqs.iter().map(|r| r.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), reqs.len(), "request ids are unique");
    }

    #[test]
    fn closed_loop_turns_follow_completions_and_failures_end_sessions() {
        let end = SimTime(600 * 1_000_000_000);
        let mut w = Sessions::new(config(SessionMode::Closed), from_u64(9), end, None);
        let mut pending: Vec<Request> = std::iter::from_fn(|| w.next_arrival()).collect();
        let starts = pending.len();
        assert!((1000..1400).contains(&starts), "{starts}");
        let mut served = 0;
        let mut failed_sessions = Vec::new();
        while let Some(r) = pending.pop() {
            served += 1;
            // Every fifth session's first turn fails; the others complete 3 s after arriving.
            let fail = r.session.unwrap().id % 5 == 0;
            let done = r.arrival + SimDuration::from_secs(3);
            let outcome = if fail {
                Outcome::Rejected
            } else {
                Outcome::Completed
            };
            if fail {
                failed_sessions.push(r.session.unwrap().id);
            }
            if let Some(next) = w.on_finished(&record(&r, outcome, done), done) {
                assert!(
                    next.arrival >= done,
                    "turn arrives before its predecessor completes"
                );
                assert!(next.arrival < end);
                assert_eq!(next.session.unwrap().turn, r.session.unwrap().turn + 1);
                assert!(!fail);
                pending.push(next);
            }
        }
        assert!(served > starts * 2, "{served} of {starts}");
        assert!(failed_sessions.iter().all(|s| *s % 5 == 0));
        assert_eq!(w.live_sessions(), 0, "every session's state is freed");
    }

    #[test]
    fn max_context_ends_sessions_and_the_plan_is_independent_of_it() {
        let mut capped = config(SessionMode::Open);
        capped.max_context = Some(3000);
        let a = open_requests(config(SessionMode::Open), 300);
        let b = open_requests(capped, 300);
        assert!(b.len() < a.len());
        for r in &b {
            assert!(r.prompt_tokens + r.output_tokens <= 3000 || r.session.unwrap().turn == 0);
        }
        // Sessions start at the same times either way.
        let starts = |v: &[Request]| -> Vec<SimTime> {
            v.iter()
                .filter(|r| r.session.unwrap().turn == 0)
                .map(|r| r.arrival)
                .collect()
        };
        assert_eq!(starts(&a), starts(&b));
    }

    #[test]
    fn offline_rows_are_the_live_requests() {
        let end = SimTime(100 * 1_000_000_000);
        let rows: Vec<TraceRow> =
            SessionRows::new(config(SessionMode::Closed), from_u64(4), end, None).collect();
        let mut w = Sessions::new(config(SessionMode::Closed), from_u64(4), end, None);
        let mut firsts = rows.iter().filter(|r| matches!(r.timing, Timing::At(_)));
        while let Some(r) = w.next_arrival() {
            let row = firsts.next().unwrap();
            assert_eq!(TraceRow::from_request(&r), *row);
        }
        assert!(firsts.next().is_none());
        // Closed-loop rows: each think row follows its session's previous turn.
        for pair in rows.windows(2) {
            if let Timing::After(_) = pair[1].timing {
                let (a, b) = (pair[0].session.unwrap(), pair[1].session.unwrap());
                assert_eq!((a.id, a.turn + 1), (b.id, b.turn));
            }
        }
    }
}
