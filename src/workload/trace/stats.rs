//! `fleetsim trace stats`: what a trace holds, in one streaming pass.
//!
//! Memory is O(distinct token counts) for the exact length percentiles, O(distinct blocks) for the
//! infinite-cache hit rate and O(multi-turn sessions) to count them; no request is kept.
//!
//! **Infinite-cache hit rate.** Each prompt is cut into blocks of `block_size` tokens, the last one possibly
//! partial; a block is identified by its chain hash (the block's tokens and everything before it, and
//! for a partial block its length). A block *hits* if an earlier request's prompt had the same block, or
//! an earlier request's prompt-plus-answer had it as a full block (a worker caches the answer too, which
//! the next turn of a conversation re-sends). With an infinite cache nothing is evicted, so this is the
//! most any prefix cache can reuse. At 512 tokens on a Mooncake trace it counts hash ids exactly as the
//! trace's authors do; `tokens` weighs each block by its tokens, which is what a worker's hit rate
//! (cached prompt tokens / prompt tokens) approaches.

use std::collections::BTreeMap;

use rustc_hash::FxHashSet as HashSet;
use serde::Serialize;

use super::{Timing, TraceRow};
use crate::request::{Request, block_hashes, block_hashes_and_partial};
use crate::time::SimTime;

/// Exact percentiles of a count from its histogram of distinct values.
#[derive(Debug, Clone, Default)]
struct Counts {
    values: BTreeMap<u64, u64>,
    n: u64,
    sum: u128,
}

impl Counts {
    fn add(&mut self, v: u64) {
        *self.values.entry(v).or_default() += 1;
        self.n += 1;
        self.sum += u128::from(v);
    }

    /// The smallest value with at least `q·n` observations at or below it (nearest rank).
    fn quantile(&self, q: f64) -> u64 {
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n.max(1));
        let mut seen = 0;
        for (v, c) in &self.values {
            seen += c;
            if seen >= rank {
                return *v;
            }
        }
        0
    }

    fn summary(&self) -> Percentiles {
        Percentiles {
            mean: if self.n == 0 {
                0.0
            } else {
                round(self.sum as f64 / self.n as f64, 3)
            },
            p50: self.quantile(0.50),
            p90: self.quantile(0.90),
            p95: self.quantile(0.95),
            p99: self.quantile(0.99),
            max: self.values.keys().next_back().copied().unwrap_or(0),
        }
    }
}

/// Running mean and variance (Welford), for the inter-arrival CV.
#[derive(Debug, Clone, Default)]
struct Moments {
    n: u64,
    mean: f64,
    m2: f64,
}

impl Moments {
    fn add(&mut self, x: f64) {
        self.n += 1;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }

    fn cv(&self) -> Option<f64> {
        (self.n >= 2 && self.mean > 0.0).then(|| (self.m2 / self.n as f64).sqrt() / self.mean)
    }
}

fn round(x: f64, digits: i32) -> f64 {
    crate::metrics::summary::round(x, digits)
}

/// Accumulates statistics over a trace's rows, in order.
#[derive(Debug, Clone)]
pub struct TraceStats {
    block_size: u32,
    requests: u64,
    closed_loop: u64,
    first: Option<SimTime>,
    last: Option<SimTime>,
    gaps: Moments,
    input: Counts,
    output: Counts,
    think_ms: Counts,
    session_rows: u64,
    sessions: u64,
    /// Sessions seen with a turn after the first (one entry per multi-turn session).
    multi_turn: HashSet<u64>,
    max_turn: u32,
    seen: HashSet<u64>,
    blocks: u64,
    blocks_hit: u64,
    tokens_hit: u64,
}

/// Mean and exact percentiles (nearest rank).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Percentiles {
    pub mean: f64,
    pub p50: u64,
    pub p90: u64,
    pub p95: u64,
    pub p99: u64,
    pub max: u64,
}

/// The report of [`TraceStats`]: what `trace stats --json` prints.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StatsReport {
    pub requests: u64,
    /// Rows with a fixed arrival time.
    pub open_loop: u64,
    /// Rows arriving a think time after their previous turn completes.
    pub closed_loop: u64,
    /// From the first to the last fixed arrival, seconds.
    pub duration_s: f64,
    /// Open-loop arrivals per second over `duration_s`.
    pub rate_per_s: f64,
    /// Coefficient of variation of the gaps between consecutive open-loop arrivals (1 for Poisson).
    pub interarrival_cv: Option<f64>,
    pub input_tokens: Percentiles,
    pub output_tokens: Percentiles,
    /// Think times of closed-loop rows, milliseconds.
    pub think_ms: Option<Percentiles>,
    pub sessions: Option<SessionStats>,
    pub prefix_cache: CacheStats,
}

/// Conversations in the trace.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SessionStats {
    /// Sessions (rows that are a session's turn 0).
    pub sessions: u64,
    /// Rows that belong to a session.
    pub turns: u64,
    /// Sessions with a second turn.
    pub multi_turn: u64,
    /// The most turns of one session.
    pub max_turns: u32,
}

/// The infinite-cache prefix hit rate (see the module documentation).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CacheStats {
    pub block_size: u32,
    /// Prompt blocks, the last partial block of each prompt included.
    pub blocks: u64,
    /// Distinct blocks an infinite cache ends up holding: prompts' and answers' (answers are cached too, so
    /// this can exceed `blocks`, which counts prompt blocks only).
    pub distinct_blocks: u64,
    /// Hit blocks / prompt blocks.
    pub hit_rate_blocks: f64,
    /// Hit tokens / prompt tokens.
    pub hit_rate_tokens: f64,
}

impl TraceStats {
    /// Statistics with the hit rate at `block_size` tokens per block.
    pub fn new(block_size: u32) -> Self {
        TraceStats {
            block_size: block_size.max(1),
            requests: 0,
            closed_loop: 0,
            first: None,
            last: None,
            gaps: Moments::default(),
            input: Counts::default(),
            output: Counts::default(),
            think_ms: Counts::default(),
            session_rows: 0,
            sessions: 0,
            multi_turn: HashSet::default(),
            max_turn: 0,
            seen: HashSet::default(),
            blocks: 0,
            blocks_hit: 0,
            tokens_hit: 0,
        }
    }

    /// Adds the next row.
    pub fn add(&mut self, row: &TraceRow) {
        self.requests += 1;
        match row.timing {
            Timing::At(t) => {
                if let Some(last) = self.last {
                    // Rows come in arrival order; a reader has checked it.
                    self.gaps.add(t.0.saturating_sub(last.0) as f64 / 1e9);
                }
                self.first.get_or_insert(t);
                self.last = Some(t);
            }
            Timing::After(d) => {
                self.closed_loop += 1;
                self.think_ms.add(d.0 / 1_000_000);
            }
        }
        let input = row.input_tokens();
        self.input.add(u64::from(input));
        self.output.add(u64::from(row.output_tokens));
        if let Some(s) = row.session {
            self.session_rows += 1;
            self.sessions += u64::from(s.turn == 0);
            if s.turn > 0 {
                self.multi_turn.insert(s.id);
            }
            self.max_turn = self.max_turn.max(s.turn.saturating_add(1));
        }
        let b = self.block_size;
        let (full, partial) = block_hashes_and_partial(row.segments.iter().copied(), b);
        for h in &full {
            self.blocks += 1;
            if self.seen.contains(h) {
                self.blocks_hit += 1;
                self.tokens_hit += u64::from(b);
            }
        }
        if let Some(h) = partial {
            self.blocks += 1;
            if self.seen.contains(&h) {
                self.blocks_hit += 1;
                self.tokens_hit += u64::from(input % b);
            }
        }
        let n_full = full.len();
        self.seen.extend(full);
        self.seen.extend(partial);
        // The full blocks that hold answer tokens, as a worker caches them after the request completes.
        let with_answer = block_hashes(
            row.segments
                .iter()
                .copied()
                .chain(std::iter::once(Request::answer_segment(
                    row.id,
                    row.output_tokens,
                ))),
            b,
        );
        self.seen.extend(with_answer.into_iter().skip(n_full));
    }

    /// The report so far.
    pub fn report(&self) -> StatsReport {
        let open = self.requests - self.closed_loop;
        let duration = match (self.first, self.last) {
            (Some(a), Some(b)) => b.since(a).as_secs_f64(),
            _ => 0.0,
        };
        StatsReport {
            requests: self.requests,
            open_loop: open,
            closed_loop: self.closed_loop,
            duration_s: round(duration, 3),
            rate_per_s: if duration > 0.0 {
                round(open as f64 / duration, 4)
            } else {
                0.0
            },
            interarrival_cv: self.gaps.cv().map(|c| round(c, 4)),
            input_tokens: self.input.summary(),
            output_tokens: self.output.summary(),
            think_ms: (self.closed_loop > 0).then(|| self.think_ms.summary()),
            sessions: (self.session_rows > 0).then_some(SessionStats {
                sessions: self.sessions,
                turns: self.session_rows,
                multi_turn: self.multi_turn.len() as u64,
                max_turns: self.max_turn,
            }),
            prefix_cache: CacheStats {
                block_size: self.block_size,
                blocks: self.blocks,
                distinct_blocks: self.seen.len() as u64,
                hit_rate_blocks: ratio(self.blocks_hit, self.blocks),
                hit_rate_tokens: ratio(self.tokens_hit, self.input.sum as u64),
            },
        }
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        round(a as f64 / b as f64, 6)
    }
}

impl StatsReport {
    /// The report as aligned text.
    pub fn to_text(&self) -> String {
        use std::fmt::Write;
        let mut o = String::new();
        let _ = writeln!(
            o,
            "requests            {} ({} open-loop, {} closed-loop)",
            self.requests, self.open_loop, self.closed_loop
        );
        let _ = writeln!(
            o,
            "duration            {:.1} s (first to last arrival)",
            self.duration_s
        );
        let _ = writeln!(o, "rate                {:.3} requests/s", self.rate_per_s);
        let _ = writeln!(
            o,
            "inter-arrival CV    {}",
            self.interarrival_cv
                .map_or("-".into(), |c| format!("{c:.3}"))
        );
        let row = |name: &str, p: &Percentiles| {
            format!(
                "{name:<20}mean {:.1}  p50 {}  p90 {}  p95 {}  p99 {}  max {}",
                p.mean, p.p50, p.p90, p.p95, p.p99, p.max
            )
        };
        let _ = writeln!(o, "{}", row("input tokens", &self.input_tokens));
        let _ = writeln!(o, "{}", row("output tokens", &self.output_tokens));
        if let Some(t) = &self.think_ms {
            let _ = writeln!(o, "{}", row("think time (ms)", t));
        }
        match &self.sessions {
            Some(s) => {
                let _ = writeln!(
                    o,
                    "sessions            {} ({} turns; {} multi-turn; at most {} turns)",
                    s.sessions, s.turns, s.multi_turn, s.max_turns
                );
            }
            None => {
                let _ = writeln!(o, "sessions            none in the trace");
            }
        }
        let c = &self.prefix_cache;
        let _ = writeln!(
            o,
            "prefix cache        infinite cache, {}-token blocks: {:.1}% of blocks, {:.1}% of tokens ({} prompt blocks; the cache ends up holding {} distinct blocks of prompts and answers)",
            c.block_size,
            c.hit_rate_blocks * 100.0,
            c.hit_rate_tokens * 100.0,
            c.blocks,
            c.distinct_blocks
        );
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{Segment, SessionRef};
    use crate::time::SimDuration;

    fn row(id: u64, at: u64, segs: &[(u64, u32)], out: u32) -> TraceRow {
        TraceRow {
            model: None,
            adapter: None,
            line: 0,
            id,
            session: None,
            timing: Timing::At(SimTime(at * 1_000_000_000)),
            output_tokens: out,
            segments: segs
                .iter()
                .map(|&(content, tokens)| Segment { content, tokens })
                .collect(),
        }
    }

    #[test]
    fn counts_blocks_tokens_and_arrivals() {
        let mut s = TraceStats::new(10);
        s.add(&row(0, 0, &[(1, 25)], 5)); // blocks 10, 10, 5(partial): all miss
        s.add(&row(1, 2, &[(1, 25)], 5)); // all three hit
        s.add(&row(2, 4, &[(1, 20), (2, 3)], 5)); // two hit, partial (3 tokens) misses
        let r = s.report();
        assert_eq!(r.requests, 3);
        assert_eq!(r.prefix_cache.blocks, 9);
        assert_eq!(r.prefix_cache.hit_rate_blocks, round(5.0 / 9.0, 6));
        assert_eq!(r.prefix_cache.hit_rate_tokens, round(45.0 / 73.0, 6));
        assert_eq!(r.duration_s, 4.0);
        assert_eq!(r.rate_per_s, 0.75);
        assert_eq!(r.interarrival_cv, Some(0.0));
        assert_eq!(r.input_tokens.p50, 25);
        assert_eq!(r.input_tokens.max, 25);
        assert_eq!(r.input_tokens.p90, 25);
        assert_eq!(r.sessions, None);
    }

    #[test]
    fn an_answer_is_cached_for_the_next_turn() {
        let mut s = TraceStats::new(10);
        let mut t0 = row(0, 0, &[(1, 10)], 20);
        t0.session = Some(SessionRef { id: 0, turn: 0 });
        s.add(&t0);
        let answer = Request::answer_segment(0, 20);
        let mut t1 = row(1, 0, &[(1, 10), (answer.content, 20), (9, 5)], 3);
        t1.session = Some(SessionRef { id: 0, turn: 1 });
        t1.timing = Timing::After(SimDuration::from_secs(2));
        s.add(&t1);
        let r = s.report();
        // Turn 1: 3 full blocks hit (prompt + answer of turn 0), the 5-token partial misses.
        assert_eq!(r.prefix_cache.blocks, 5);
        assert_eq!(r.prefix_cache.hit_rate_blocks, round(3.0 / 5.0, 6));
        assert_eq!(r.closed_loop, 1);
        assert_eq!(r.think_ms.as_ref().unwrap().p50, 2000);
        let sessions = r.sessions.unwrap();
        assert_eq!(
            (sessions.sessions, sessions.multi_turn, sessions.max_turns),
            (1, 1, 2)
        );
    }

    #[test]
    fn nearest_rank_percentiles() {
        let mut c = Counts::default();
        for v in 1..=100 {
            c.add(v);
        }
        let p = c.summary();
        assert_eq!((p.p50, p.p90, p.p99, p.max), (50, 90, 99, 100));
        assert_eq!(p.mean, 50.5);
    }
}
