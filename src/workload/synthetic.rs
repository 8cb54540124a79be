//! Open-loop synthetic traffic: Poisson or gamma arrivals, sampled lengths, optional shared prefixes.

use rand::Rng;
use rand_distr::{Distribution, Zipf};
use serde::{Deserialize, Serialize};

use super::Workload;
use super::conversation_prompts::ConversationPrompts;
use super::dist::{ArrivalProcess, LengthDist};
use super::rate_curve::RateCurve;
use crate::config::{Fraction, NonNegative, Positive, PositiveInt};
use crate::request::{Request, Segment};
use crate::rng::{SimRng, fnv1a, splitmix64};
use crate::time::{SimDuration, SimTime};

/// Groups of requests that start with the same prefix (a system prompt, a tool schema, a document).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SharedPrefix {
    /// Distinct prefixes.
    pub groups: PositiveInt,
    /// Tokens in each prefix.
    pub tokens: PositiveInt,
    /// Zipf exponent of the groups' popularity (0 = uniform).
    #[serde(default)]
    pub zipf: NonNegative,
    /// Fraction of requests that carry a shared prefix (default 1).
    #[serde(default = "Fraction::one")]
    pub fraction: Fraction,
    /// Distinct questions per group: the prompts form a fixed pool of `groups × questions` (each its
    /// group's prefix, then a question of `prompt` tokens drawn once), sent in one shuffled order and
    /// then again in that order, so identical prompts come back, as inference-perf's `shared_prefix`
    /// data generator sends them (kubernetes-sigs/inference-perf @ b6687e7,
    /// `datagen/shared_prefix_datagen.py`: prompts built once, shuffled, cycled). Unset: every
    /// request's question is its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub questions: Option<PositiveInt>,
}

impl SharedPrefix {
    /// Most prompts in a question pool.
    pub const MAX_POOL: u64 = 10_000_000;

    /// Relations no single field's type checks: `Err((field, message))`.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let Some(q) = self.questions else {
            return Ok(());
        };
        let pool = u64::from(self.groups.0) * u64::from(q.0);
        if pool > Self::MAX_POOL {
            return Err((
                "questions".into(),
                format!(
                    "groups × questions is {pool}: at most {} prompts in a pool",
                    Self::MAX_POOL
                ),
            ));
        }
        if self.fraction.0 < 1.0 {
            return Err((
                "questions".into(),
                "a question pool sends every request with a prefix: leave `fraction` at 1".into(),
            ));
        }
        if self.zipf.0 > 0.0 {
            return Err((
                "questions".into(),
                "a question pool is cycled in one shuffled order, every prompt equally often: \
                 leave `zipf` at 0"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// The fixed prompts of a question pool ([`SharedPrefix::questions`]).
#[derive(Clone, Debug)]
struct QuestionPool {
    questions: u32,
    /// Pool entries (`group × questions + question`) in sending order.
    order: Vec<u32>,
    /// Each entry's question length, drawn once.
    tokens: Vec<u32>,
}

/// Settings of the open-loop synthetic workloads (built from a scenario's `[workload]` table).
#[derive(Clone, Debug, PartialEq)]
pub struct OpenLoopConfig {
    /// Mean arrivals per second.
    pub rate: Positive,
    /// Inter-arrival coefficient of variation (gamma process only; 1 is Poisson).
    pub cv: Option<Positive>,
    /// Tokens of each request's own prompt text (after any shared prefix).
    pub prompt: LengthDist,
    /// Output tokens of each request.
    pub output: LengthDist,
    /// Optional shared prefixes.
    pub shared_prefix: Option<SharedPrefix>,
    /// Optional time-varying multiplier on `rate` (mean 1): the renewal process runs in operational
    /// time, which the curve warps into simulated time (see [`RateCurve`]).
    pub curve: Option<RateCurve>,
}

/// Draws what a synthetic request asks for: the optional shared prefix, then its own prompt text, then its
/// output length, in that order from one random stream. Shared by the open- and closed-loop generators.
#[derive(Clone, Debug)]
pub struct RequestSampler {
    prompt: LengthDist,
    output: LengthDist,
    prefix: Option<(SharedPrefix, Option<Zipf<f64>>)>,
    pool: Option<QuestionPool>,
    /// A dataset of conversation prompts: when set, every request is its next prompt and nothing is
    /// drawn.
    conversations: Option<std::sync::Arc<ConversationPrompts>>,
}

impl RequestSampler {
    /// A sampler of `prompt` and `output` lengths with optional shared prefixes (validated). A question
    /// pool is built from a stream keyed by `rng`'s next draw (`rng` itself does not advance).
    pub fn new(
        prompt: &LengthDist,
        output: &LengthDist,
        shared: Option<&SharedPrefix>,
        rng: &SimRng,
    ) -> Self {
        let prefix = shared.cloned().map(|p| {
            let zipf = (p.zipf.0 > 0.0)
                .then(|| Zipf::new(f64::from(p.groups.0), p.zipf.0).expect("validated zipf"));
            (p, zipf)
        });
        let pool = shared.and_then(|p| {
            let questions = p.questions?.0;
            let key = rng.clone().random::<u64>();
            let mut pool_rng = crate::rng::from_u64(splitmix64(key ^ fnv1a(b"question-pool")));
            let n = p.groups.0 * questions;
            let tokens = (0..n).map(|_| prompt.sample(&mut pool_rng)).collect();
            let mut order: Vec<u32> = (0..n).collect();
            rand::seq::SliceRandom::shuffle(order.as_mut_slice(), &mut pool_rng);
            Some(QuestionPool {
                questions,
                order,
                tokens,
            })
        });
        RequestSampler {
            prompt: prompt.clone(),
            output: output.clone(),
            prefix,
            pool,
            conversations: None,
        }
    }

    /// A sampler that sends `dataset`'s prompts in its order (cycled), each with its own completion.
    pub fn conversations(dataset: ConversationPrompts) -> Self {
        let one = LengthDist::Fixed {
            tokens: PositiveInt(1),
        };
        RequestSampler {
            prompt: one.clone(),
            output: one,
            prefix: None,
            pool: None,
            conversations: Some(std::sync::Arc::new(dataset)),
        }
    }

    /// Request `id` arriving at `at`, its content and lengths drawn from `rng`. From a question pool,
    /// request `id` sends the pool's `id`-th prompt in its order (cycled) and draws only its output.
    pub fn sample(&self, rng: &mut SimRng, id: u64, at: SimTime) -> Request {
        self.sample_nth(rng, id, id, at)
    }

    /// As [`RequestSampler::sample`], but a question pool sends its `nth` prompt (cycled) rather than
    /// its `id`-th: a client that restarts the pool's order (inference-perf, at every stage).
    pub fn sample_nth(&self, rng: &mut SimRng, id: u64, nth: u64, at: SimTime) -> Request {
        if let Some(d) = &self.conversations {
            return d.request(id, nth, at);
        }
        if let (Some(pool), Some((p, _))) = (&self.pool, &self.prefix) {
            let entry = pool.order[(nth % pool.order.len() as u64) as usize];
            let segments = vec![
                Segment {
                    content: OpenLoop::prefix_content(entry / pool.questions),
                    tokens: p.tokens.0,
                },
                Segment {
                    content: splitmix64(fnv1a(b"pool-question") ^ u64::from(entry)),
                    tokens: pool.tokens[entry as usize],
                },
            ];
            // The same prompt comes back: its text is not private to this request.
            return Request::new(id, None, at, self.output.sample(rng), segments);
        }
        let mut segments = Vec::with_capacity(2);
        if let Some((p, zipf)) = &self.prefix
            && rng.random::<f64>() < p.fraction.0
        {
            let group = match zipf {
                Some(z) => z.sample(rng) as u32 - 1,
                None => rng.random_range(0..p.groups.0),
            };
            segments.push(Segment {
                content: OpenLoop::prefix_content(group),
                tokens: p.tokens.0,
            });
        }
        segments.push(Segment {
            content: OpenLoop::unique_content(id),
            tokens: self.prompt.sample(rng),
        });
        let output = self.output.sample(rng);
        // The last segment is `unique_content(id)`: this request's own text, and no request generated
        // from a sampler quotes another's text or answer.
        Request::new(id, None, at, output, segments).never_quoted()
    }
}

/// The open-loop generator: arrivals until the end of the arrival window or a request cap.
pub struct OpenLoop {
    rng: SimRng,
    process: ArrivalProcess,
    curve: Option<RateCurve>,
    sampler: RequestSampler,
    clock: SimTime,
    end: SimTime,
    remaining: u64,
    next_id: u64,
}

impl OpenLoop {
    /// A generator for `cfg`, drawing from `rng`, emitting arrivals before `end` and at most `max_requests`.
    pub fn new(cfg: &OpenLoopConfig, rng: SimRng, end: SimTime, max_requests: Option<u64>) -> Self {
        let process = match cfg.cv {
            Some(cv) => ArrivalProcess::gamma(cfg.rate.0, cv.0),
            None => ArrivalProcess::poisson(cfg.rate.0),
        };
        let sampler =
            RequestSampler::new(&cfg.prompt, &cfg.output, cfg.shared_prefix.as_ref(), &rng);
        OpenLoop {
            rng,
            process,
            curve: cfg.curve.clone(),
            sampler,
            clock: SimTime::ZERO,
            end,
            remaining: max_requests.unwrap_or(u64::MAX),
            next_id: 0,
        }
    }

    /// Content id of shared prefix `group`.
    pub fn prefix_content(group: u32) -> u64 {
        splitmix64(fnv1a(b"shared-prefix") ^ u64::from(group))
    }

    /// Content id of request `id`'s own prompt text.
    pub fn unique_content(id: u64) -> u64 {
        splitmix64(fnv1a(b"prompt") ^ id)
    }
}

impl Workload for OpenLoop {
    fn next_arrival(&mut self) -> Option<Request> {
        if self.remaining == 0 {
            return None;
        }
        let gap = self.process.next_gap(&mut self.rng);
        let at = match &self.curve {
            None => Some(self.clock + gap),
            Some(c) => c.advance(self.clock, gap.as_secs_f64()),
        };
        let Some(at) = at.filter(|&t| t < self.end) else {
            self.remaining = 0;
            return None;
        };
        self.clock = at;
        self.remaining -= 1;
        let id = self.next_id;
        self.next_id += 1;
        Some(self.sampler.sample(&mut self.rng, id, at))
    }
}

/// The arrival window as a [`SimTime`].
pub fn window_end(duration: SimDuration) -> SimTime {
    SimTime::ZERO + duration
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::from_u64;

    fn cfg(rate: f64) -> OpenLoopConfig {
        OpenLoopConfig {
            rate: Positive(rate),
            cv: None,
            prompt: LengthDist::Fixed {
                tokens: PositiveInt(100),
            },
            output: LengthDist::Fixed {
                tokens: PositiveInt(10),
            },
            shared_prefix: Some(SharedPrefix {
                groups: PositiveInt(4),
                tokens: PositiveInt(64),
                zipf: NonNegative(1.2),
                fraction: Fraction(1.0),
                questions: None,
            }),
            curve: None,
        }
    }

    /// Requests `0..n` of a pool of 3 groups × 4 questions whose question lengths vary.
    fn pooled(seed: u64, n: u64) -> Vec<Request> {
        let mut c = cfg(50.0);
        c.prompt = LengthDist::Uniform {
            min: PositiveInt(10),
            max: PositiveInt(1000),
        };
        c.shared_prefix = Some(SharedPrefix {
            groups: PositiveInt(3),
            tokens: PositiveInt(64),
            zipf: NonNegative(0.0),
            fraction: Fraction(1.0),
            questions: Some(PositiveInt(4)),
        });
        let mut w = OpenLoop::new(&c, from_u64(seed), SimTime::MAX, Some(n));
        std::iter::from_fn(|| w.next_arrival()).collect()
    }

    #[test]
    fn a_question_pool_sends_each_prompt_once_per_round_in_one_shuffled_order() {
        let rs = pooled(1, 36);
        let prompt = |r: &Request| {
            r.segments
                .iter()
                .map(|s| (s.content, s.tokens))
                .collect::<Vec<_>>()
        };
        // The first round: 12 distinct prompts, 4 per group prefix, each prefix 64 tokens.
        let mut first: Vec<_> = rs[..12].iter().map(prompt).collect();
        first.sort_unstable();
        first.dedup();
        assert_eq!(first.len(), 12);
        for g in 0..3 {
            let with = rs[..12]
                .iter()
                .filter(|r| r.segments[0].content == OpenLoop::prefix_content(g))
                .count();
            assert_eq!(with, 4, "group {g}");
        }
        // Later rounds repeat the first, prompt for prompt, lengths included; the text is not
        // private (the same prompt comes back).
        for (i, r) in rs.iter().enumerate() {
            assert_eq!(prompt(r), prompt(&rs[i % 12]), "request {i}");
            assert!(!r.never_quoted);
        }
        // Another seed, another order.
        let other: Vec<_> = pooled(2, 12).iter().map(prompt).collect();
        assert_ne!(other, rs[..12].iter().map(prompt).collect::<Vec<_>>());
    }

    #[test]
    fn a_question_pool_refuses_what_it_cannot_honour() {
        let p = |zipf: f64, fraction: f64, groups: u32, questions: u32| SharedPrefix {
            groups: PositiveInt(groups),
            tokens: PositiveInt(64),
            zipf: NonNegative(zipf),
            fraction: Fraction(fraction),
            questions: Some(PositiveInt(questions)),
        };
        assert!(p(0.0, 1.0, 150, 5).validate().is_ok());
        for (bad, needle) in [
            (p(1.1, 1.0, 150, 5), "zipf"),
            (p(0.0, 0.5, 150, 5), "fraction"),
            (p(0.0, 1.0, 100_000, 1_000), "at most"),
        ] {
            let (key, message) = bad.validate().unwrap_err();
            assert_eq!(key, "questions");
            assert!(message.contains(needle), "{message}");
        }
    }

    #[test]
    fn poisson_rate_and_ordering() {
        let mut w = OpenLoop::new(
            &cfg(50.0),
            from_u64(1),
            window_end(SimDuration::from_secs(1000)),
            None,
        );
        let mut n = 0u64;
        let mut last = SimTime::ZERO;
        let mut group_counts = [0u32; 4];
        while let Some(r) = w.next_arrival() {
            assert!(r.arrival >= last);
            last = r.arrival;
            assert_eq!(r.prompt_tokens, 164);
            let g = (0..4)
                .find(|&g| OpenLoop::prefix_content(g) == r.segments[0].content)
                .unwrap();
            group_counts[g as usize] += 1;
            n += 1;
        }
        // 50,000 expected; Poisson sd ≈ 224.
        assert!((49_000..51_000).contains(&n), "{n}");
        assert!(
            group_counts[0] > group_counts[1] && group_counts[1] > group_counts[3],
            "{group_counts:?}"
        );
    }

    #[test]
    fn a_rate_curve_shapes_poisson_arrivals() {
        // Multipliers 0.5 then 1.5 (mean 1) over two 100-s halves at 50 requests/s: 2,500 then 7,500
        // expected (Poisson sd 50 and 87).
        let curve = RateCurve::from_points(
            &[(0, 1.0), (100 * crate::time::NANOS_PER_SEC, 3.0)],
            1.0,
            SimDuration::ZERO,
        )
        .unwrap();
        let c = OpenLoopConfig {
            curve: Some(curve),
            ..cfg(50.0)
        };
        let mut w = OpenLoop::new(
            &c,
            from_u64(3),
            window_end(SimDuration::from_secs(200)),
            None,
        );
        let (mut first, mut second) = (0u32, 0u32);
        while let Some(r) = w.next_arrival() {
            if r.arrival < SimTime(100 * crate::time::NANOS_PER_SEC) {
                first += 1;
            } else {
                second += 1;
            }
        }
        assert!((2_300..2_700).contains(&first), "{first}");
        assert!((7_200..7_800).contains(&second), "{second}");
    }

    #[test]
    fn request_cap_is_respected() {
        let mut w = OpenLoop::new(&cfg(50.0), from_u64(1), SimTime::MAX, Some(7));
        assert_eq!(std::iter::from_fn(|| w.next_arrival()).count(), 7);
    }
}
