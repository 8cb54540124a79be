//! A benchmark dataset of cumulative conversation prompts, as KubeAI's prefix-routing benchmark builds
//! them from ShareGPT (`kubeai-project/kubeai` @ a2349bfe, `benchmarks/chat-py/benchmark_serving.py`,
//! `sample_sharegpt_requests`, L98-187; a fork of vLLM's `benchmark_serving.py`):
//!
//! - a conversation of M messages (a user message first, then alternating) gives one prompt per user
//!   message: the first i messages for i = 1, 3, 5, …, completed by message i + 1, whose token count is
//!   the request's `max_tokens`. Each prompt therefore begins with the previous one and the dataset's
//!   own reply to it (not the model's), so every round of a conversation shares its prefix;
//! - the flat list, in conversation order, is cut to its first `pool` prompts (the script's
//!   `--max-conversations`, which counts prompts, not conversations) and shuffled once;
//! - prompts under 4 or over 8,192 tokens, and completions under 4, are dropped (a last user message
//!   with nothing after it has an empty completion, so it is always dropped);
//! - the requests cycle through what is left until the run's request budget is met, so every prompt
//!   is sent about budget / pool times, rounds of one conversation interleaved at random.
//!
//! ShareGPT itself is not bundled: the conversations are drawn from the `messages`, `user` and `reply`
//! distributions a scenario states. Each request carries its conversation as its session and its round
//! as its turn, so `consistent_hash` with `key = "session"` keys on the conversation as KubeAI's
//! `PrefixHash` does (the first 100 characters of every round's prompt are the same).
//!
//! Invariants: every pooled prompt has 4 ≤ prompt tokens ≤ 8,192 and ≥ 4 output tokens; the pool is
//! fixed for a run (same seed, same pool, same order); the content of message m of conversation k has
//! one id wherever it appears.

use serde::{Deserialize, Serialize};

use super::dist::{LengthDist, LengthSpec};
use crate::config::PositiveInt;
use crate::request::{Request, Segment, SessionRef};
use crate::rng::{SimRng, fnv1a, splitmix64};
use crate::time::SimTime;

/// The script's filters: prompts of fewer tokens, or completions of fewer, are dropped.
pub const MIN_TOKENS: u32 = 4;
/// The script's filter: prompts of more tokens are dropped.
pub const MAX_PROMPT_TOKENS: u32 = 8192;
/// Messages a dataset may hold in all (conversations × mean messages), so that a scenario cannot ask
/// for more memory than a run can give.
pub const MAX_MESSAGES: f64 = 10_000_000.0;

/// `[workload.conversation_prompts]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConversationPromptsSpec {
    /// Conversations in the dataset, in its order.
    pub conversations: PositiveInt,
    /// Messages per conversation, a user message first, then alternating (KubeAI's dataset keeps
    /// ShareGPT conversations of at least 16).
    pub messages: LengthSpec,
    /// Tokens of one user message as the prompt holds it (its `User: ` label and newline included).
    pub user: LengthSpec,
    /// Tokens of one assistant message: in a prompt, the dataset's reply; as a completion, the
    /// request's `max_tokens`, generated in full.
    pub reply: LengthSpec,
    /// The first N prompts of the flat list are kept (`--max-conversations N`); all when absent.
    #[serde(default)]
    pub pool: Option<PositiveInt>,
}

/// One prompt of the pool: the first `messages` messages of conversation `conversation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PooledPrompt {
    conversation: u32,
    messages: u32,
}

/// The dataset, built: every conversation's message lengths and the pool in its shuffled order.
#[derive(Clone, Debug)]
pub struct ConversationPrompts {
    /// Message lengths of each conversation, in order.
    lengths: Vec<Vec<u32>>,
    /// The pool, cut, shuffled and filtered.
    order: Vec<PooledPrompt>,
    /// Salt of the content ids.
    salt: u64,
}

impl ConversationPromptsSpec {
    /// `Err((key, message))` for a table that cannot be built; keys are relative to the table.
    pub fn validate(&self) -> Result<(LengthDist, LengthDist, LengthDist), (String, String)> {
        let dist =
            |spec: &LengthSpec, key: &str| spec.build().map_err(|(k, m)| (format!("{key}.{k}"), m));
        let messages = dist(&self.messages, "messages")?;
        let user = dist(&self.user, "user")?;
        let reply = dist(&self.reply, "reply")?;
        let total = f64::from(self.conversations.0) * messages.mean();
        if total > MAX_MESSAGES {
            return Err((
                "conversations".into(),
                format!(
                    "{} conversations of {:.0} messages on average are {total:.0} messages: at most {MAX_MESSAGES:.0}",
                    self.conversations.0,
                    messages.mean()
                ),
            ));
        }
        Ok((messages, user, reply))
    }

    /// About the mean prompt and completion tokens of a request (for a footprint estimate): a
    /// conversation of M messages gives prompts of 1, 3, … messages, M / 4 user and reply pairs on
    /// average, and a reply as completion.
    pub fn mean_request_tokens(&self) -> f64 {
        match self.validate() {
            Ok((m, u, r)) => m.mean() / 4.0 * (u.mean() + r.mean()) + r.mean(),
            Err(_) => 0.0,
        }
    }

    /// The dataset, drawn from a stream keyed by `rng`'s next draw (`rng` itself does not advance), or
    /// why it cannot be used: no prompt passes the script's filters.
    pub fn build(&self, rng: &SimRng) -> Result<ConversationPrompts, String> {
        let (messages, user, reply) = self.validate().map_err(|(k, m)| format!("{k}: {m}"))?;
        let key = rand::Rng::random::<u64>(&mut rng.clone());
        let mut rng = crate::rng::from_u64(splitmix64(key ^ fnv1a(b"conversation-prompts")));
        let lengths: Vec<Vec<u32>> = (0..self.conversations.0)
            .map(|_| {
                let m = messages.sample(&mut rng);
                (0..m)
                    .map(|i| {
                        if i % 2 == 0 {
                            user.sample(&mut rng)
                        } else {
                            reply.sample(&mut rng)
                        }
                    })
                    .collect()
            })
            .collect();
        let cut = self.pool.map_or(usize::MAX, |p| p.0 as usize);
        let mut order: Vec<PooledPrompt> = lengths
            .iter()
            .enumerate()
            .flat_map(|(k, msgs)| {
                (1..=msgs.len() as u32)
                    .step_by(2)
                    .map(move |i| PooledPrompt {
                        conversation: k as u32,
                        messages: i,
                    })
            })
            .take(cut)
            .collect();
        rand::seq::SliceRandom::shuffle(order.as_mut_slice(), &mut rng);
        order.retain(|&p| {
            let (prompt, completion) = tokens(&lengths, p);
            (MIN_TOKENS..=MAX_PROMPT_TOKENS).contains(&prompt) && completion >= MIN_TOKENS
        });
        if order.is_empty() {
            return Err(format!(
                "no prompt passes the benchmark's filters (prompt {MIN_TOKENS}–{MAX_PROMPT_TOKENS} tokens, completion at least {MIN_TOKENS})"
            ));
        }
        Ok(ConversationPrompts {
            lengths,
            order,
            salt: splitmix64(key ^ fnv1a(b"conversation-message")),
        })
    }
}

/// Prompt and completion tokens of `p` in conversations of `lengths` (the completion 0 where no
/// message follows).
fn tokens(lengths: &[Vec<u32>], p: PooledPrompt) -> (u32, u32) {
    let msgs = &lengths[p.conversation as usize];
    let prompt = msgs[..p.messages as usize].iter().sum();
    let completion = msgs.get(p.messages as usize).copied().unwrap_or(0);
    (prompt, completion)
}

impl ConversationPrompts {
    /// Prompts in the pool after the filters.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether the pool is empty (never, once built).
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The content id of message `m` of conversation `k`.
    fn content(&self, k: u32, m: u32) -> u64 {
        splitmix64(self.salt ^ (u64::from(k) << 32 | u64::from(m)))
    }

    /// Request `id`, the pool's `nth` prompt (cycled), sent at `at`.
    pub fn request(&self, id: u64, nth: u64, at: SimTime) -> Request {
        let p = self.order[(nth % self.order.len() as u64) as usize];
        let msgs = &self.lengths[p.conversation as usize];
        let segments = msgs[..p.messages as usize]
            .iter()
            .enumerate()
            .map(|(m, &tokens)| Segment {
                content: self.content(p.conversation, m as u32),
                tokens,
            })
            .collect();
        let (_, completion) = tokens(&self.lengths, p);
        let session = SessionRef {
            id: u64::from(p.conversation),
            turn: p.messages / 2,
        };
        // The same prompt comes back and the next round quotes it: nothing here is private.
        Request::new(id, Some(session), at, completion, segments)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(conversations: u32, messages: u32, pool: Option<u32>) -> ConversationPromptsSpec {
        ConversationPromptsSpec {
            conversations: PositiveInt(conversations),
            messages: LengthSpec::fixed(messages),
            user: LengthSpec::fixed(10),
            reply: LengthSpec::fixed(20),
            pool: pool.map(PositiveInt),
        }
    }

    /// Two conversations of 5 messages (u r u r u) give prompts of 1, 3 and 5 messages each; the last
    /// has no completion and is dropped: 4 prompts of 10 and 40 tokens, each completed by 20, and
    /// every round of a conversation begins with the previous round's prompt and reply.
    #[test]
    fn each_user_message_gives_a_cumulative_prompt_and_a_last_one_without_reply_is_dropped() {
        let d = spec(2, 5, None).build(&crate::rng::from_u64(7)).unwrap();
        assert_eq!(d.len(), 4);
        let mut seen: Vec<(u64, u32, u32, u32)> = (0..4)
            .map(|n| {
                let r = d.request(n, n, SimTime::ZERO);
                let s = r.session.unwrap();
                (s.id, s.turn, r.prompt_tokens, r.output_tokens)
            })
            .collect();
        seen.sort();
        assert_eq!(
            seen,
            [
                (0, 0, 10, 20),
                (0, 1, 40, 20),
                (1, 0, 10, 20),
                (1, 1, 40, 20)
            ]
        );
        let find = |conv: u64, turn: u32| {
            (0..4)
                .map(|n| d.request(n, n, SimTime::ZERO))
                .find(|r| r.session == Some(SessionRef { id: conv, turn }))
                .unwrap()
        };
        let (first, second) = (find(0, 0), find(0, 1));
        assert_eq!(second.segments[0], first.segments[0]);
        assert_eq!(second.segments.len(), 3);
        assert_ne!(find(1, 0).segments[0], first.segments[0]);
        // The reply quoted is the dataset's, not the model's answer to the first round.
        assert_ne!(second.segments[1].content, first.answer_content);
    }

    /// `pool` keeps the first N prompts of the flat list (in conversation order) before shuffling; the
    /// requests cycle through the pool, each prompt once per cycle.
    #[test]
    fn the_pool_is_the_first_prompts_cycled() {
        // 10 conversations of 8 messages: 4 prompts each; the first 6 prompts are conversations 0 and 1.
        let d = spec(10, 8, Some(6))
            .build(&crate::rng::from_u64(3))
            .unwrap();
        assert_eq!(d.len(), 6);
        let cycle: Vec<(u64, u32)> = (0..6)
            .map(|n| {
                let s = d.request(n, n, SimTime::ZERO).session.unwrap();
                (s.id, s.turn)
            })
            .collect();
        let mut sorted = cycle.clone();
        sorted.sort();
        assert_eq!(sorted, [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1)]);
        let again: Vec<(u64, u32)> = (6..12)
            .map(|n| {
                let s = d.request(n, n, SimTime::ZERO).session.unwrap();
                (s.id, s.turn)
            })
            .collect();
        assert_eq!(again, cycle);
        // Same seed, same order; another seed shuffles differently.
        let e = spec(10, 8, Some(6))
            .build(&crate::rng::from_u64(3))
            .unwrap();
        assert_eq!(e.order, d.order);
        let f = spec(10, 8, Some(6))
            .build(&crate::rng::from_u64(4))
            .unwrap();
        assert_ne!(f.order, d.order);
    }

    /// Prompts over 8,192 tokens and completions under 4 are dropped; a pool left empty is an error.
    #[test]
    fn the_script_s_filters_apply() {
        let long = ConversationPromptsSpec {
            user: LengthSpec::fixed(3000),
            ..spec(1, 8, None)
        };
        // Prompts of 1, 3, 5, 7 messages: 3,000, 6,040, 9,080 and 12,120 tokens: two kept.
        assert_eq!(long.build(&crate::rng::from_u64(1)).unwrap().len(), 2);
        let short = ConversationPromptsSpec {
            reply: LengthSpec::fixed(3),
            ..spec(2, 8, None)
        };
        let e = short.build(&crate::rng::from_u64(1)).unwrap_err();
        assert!(e.contains("no prompt passes"), "{e}");
    }
}
