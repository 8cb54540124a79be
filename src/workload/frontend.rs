//! The path between a benchmark client and the engine: the client's dispatch, the API server (frontend)
//! that tokenizes, detokenizes and streams, and the benchmark's warm-up request.
//!
//! A real `vllm bench serve --max-concurrency C` run is not in lock step. Its client is one asyncio loop
//! that sends requests one after another, each send costing the client some CPU time; the API server is
//! one process that tokenizes each prompt before the engine sees it (one at a time: the tokenizer runs on
//! its event loop) and turns every output token into a streamed text chunk; the engine starts a step as
//! soon as the first request is there; and the benchmark first sends one warm-up request alone and waits
//! for it. This module holds those costs ([`FrontendSpec`], the `[workload.frontend]` table) and the API
//! server as a single FIFO server ([`Frontend`]).
//!
//! Invariants: an engine arrival is never before its send; the API server admits requests in the order
//! they reach it and one at a time, so admissions never go back in time.
//!
//! Published figures behind the defaults:
//! - vLLM's v0.6.0 release post (vLLM blog, 2024-09-05) profiled Llama-3-8B on one H100 and found the HTTP
//!   API server taking 33% of the run and scheduling/input preparation 29%, GPU execution only 38%: the
//!   frontend is not free at the scale of a decode step (a few ms). That release moved the API server into
//!   its own process, which vLLM v1 keeps: its cost overlaps the engine's steps and shows up as latency.
//! - Per streamed token, vLLM v1's output path costs ~0.1 ms of incremental detokenization and ~0.5 ms of
//!   SSE chunk serialisation and send (stage timings in "vLLM v1 async output processing",
//!   fridayswithfaraday.com): `token = 0.6ms` of delivery latency per chunk.
//! - Tokenizing a prompt with a Rust (HF `tokenizers`) BPE tokenizer costs on the order of a microsecond
//!   per token once called from Python; request parsing and validation about a millisecond
//!   (`request = 1ms`, `prompt_token = 1us`).
//! - The benchmark client's per-request send (task wake-up, payload build, aiohttp POST) is a fraction of
//!   a millisecond of one Python event loop (`client_send = 0.5ms`).
//!
//! - vLLM from PR #19334 (microbatch tokenization, mid-2025, in v0.10 and v0.11) until PR #45759 removed it
//!   (June 2026) tokenized through `AsyncMicrobatchTokenizer`, which waits `batch_wait_timeout_s =
//!   0.002` after the first request of a batch for others to join (up to 32) before it tokenizes: a lone
//!   request waits the whole 2 ms (vllm-project/vllm#44172 puts the cost at about 2 ms per request at low
//!   concurrency; #27407 measured `_preprocess` at 2.2–2.4 ms). Current vLLM does
//!   not, so `tokenizer_batch_wait` defaults to 0; set `tokenizer_batch_wait = "2ms"` to imitate those
//!   releases.
//!
//! These are order-of-magnitude figures, not fits; `enabled = false` turns the whole path off (the
//! idealised lock-step loop, used by the queueing-theory tests).

use serde::{Deserialize, Serialize};

use crate::time::{SimDuration, SimTime};

/// The `[workload.frontend]` table of a `concurrency` workload. Missing keys take the defaults above.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct FrontendSpec {
    /// `false`: no client, API server or warm-up costs at all (every client sends at the same instant).
    pub enabled: bool,
    /// The benchmark client's CPU time per request sent; consecutive sends are this far apart.
    pub client_send: SimDuration,
    /// The API server's fixed time per request (parse, validate, hand to the engine).
    pub request: SimDuration,
    /// The API server's tokenization time per prompt token.
    pub prompt_token: SimDuration,
    /// Delivery latency of every streamed token (detokenize, serialise, send).
    pub token: SimDuration,
    /// Send one request alone first and wait for it, as `vllm bench serve` does; reported separately.
    pub warmup: bool,
    /// vLLM's tokenization micro-batch window (v0.10 to the June 2026 releases: 2 ms; current: 0): a
    /// request that opens a window waits this long for others to join before the API server takes it.
    pub tokenizer_batch_wait: SimDuration,
}

impl Default for FrontendSpec {
    fn default() -> Self {
        FrontendSpec {
            enabled: true,
            client_send: SimDuration::from_secs_f64(0.5e-3),
            request: SimDuration::from_secs_f64(1e-3),
            prompt_token: SimDuration::from_secs_f64(1e-6),
            token: SimDuration::from_secs_f64(0.6e-3),
            warmup: true,
            tokenizer_batch_wait: SimDuration::ZERO,
        }
    }
}

impl FrontendSpec {
    /// The spec in force: `enabled = false` means zero costs and no warm-up.
    pub fn effective(self) -> Self {
        if self.enabled {
            self
        } else {
            FrontendSpec {
                enabled: false,
                client_send: SimDuration::ZERO,
                request: SimDuration::ZERO,
                prompt_token: SimDuration::ZERO,
                token: SimDuration::ZERO,
                warmup: false,
                tokenizer_batch_wait: SimDuration::ZERO,
            }
        }
    }
}

/// Requests one tokenization micro-batch takes at most (`AsyncMicrobatchTokenizer.max_batch_size`).
pub const MICROBATCH_MAX: u32 = 32;

/// The API server as one FIFO server: each request occupies it for `request + prompt_token · prompt`,
/// from the close of its tokenization micro-batch window on (when `tokenizer_batch_wait` is set).
#[derive(Clone, Debug)]
pub struct Frontend {
    spec: FrontendSpec,
    /// When the server finishes the work it already has.
    free_at: SimTime,
    /// The open micro-batch window: when it closes, and the requests in it.
    window: Option<(SimTime, u32)>,
}

impl Frontend {
    pub fn new(spec: FrontendSpec) -> Self {
        Frontend {
            spec: spec.effective(),
            free_at: SimTime::ZERO,
            window: None,
        }
    }

    /// The costs in force.
    pub fn spec(&self) -> &FrontendSpec {
        &self.spec
    }

    /// A request of `prompt` tokens sent at `sent` reaches the server; returns when the engine has it:
    /// after the server's earlier work and its own tokenization. Never before `sent`.
    ///
    /// With a micro-batch window, a request sent while a window is open (and not full) joins it, and
    /// any other opens one: the server takes it when its window closes. (A window that fills closes
    /// early in vLLM; here its members still wait for its end: at most 32 requests within the window.)
    pub fn admit(&mut self, sent: SimTime, prompt: u32) -> SimTime {
        let wait = self.spec.tokenizer_batch_wait;
        let ready = if wait == SimDuration::ZERO {
            sent
        } else {
            match self.window {
                Some((close, n)) if sent < close && n < MICROBATCH_MAX => {
                    self.window = Some((close, n + 1));
                    close
                }
                _ => {
                    let close = sent + wait;
                    self.window = Some((close, 1));
                    close
                }
            }
        };
        let start = ready.max(self.free_at);
        let cost = SimDuration(
            self.spec.request.0 + self.spec.prompt_token.0.saturating_mul(u64::from(prompt)),
        );
        self.free_at = start + cost;
        self.free_at
    }

    /// When the client sees a token the engine produced at `engine`.
    pub fn delivered(&self, engine: SimTime) -> SimTime {
        engine + self.spec.token
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: f64) -> SimDuration {
        SimDuration::from_secs_f64(v * 1e-3)
    }

    #[test]
    fn the_api_server_admits_one_request_at_a_time_in_order() {
        let mut f = Frontend::new(FrontendSpec {
            request: ms(1.0),
            prompt_token: SimDuration::from_secs_f64(1e-6),
            ..FrontendSpec::default()
        });
        let t0 = SimTime::ZERO;
        // 1 ms + 1000 × 1 µs = 2 ms each; the second, sent 0.5 ms later, waits for the first.
        let a = f.admit(t0, 1000);
        let b = f.admit(t0 + ms(0.5), 1000);
        assert_eq!(a, t0 + ms(2.0));
        assert_eq!(b, t0 + ms(4.0));
        // Sent after the server went idle: no wait.
        let c = f.admit(t0 + ms(10.0), 1000);
        assert_eq!(c, t0 + ms(12.0));
        assert_eq!(f.delivered(c), c + ms(0.6));
    }

    /// vLLM's micro-batch tokenizer: a lone request waits the whole 2 ms window; one sent 0.5 ms later
    /// joins the window and is taken at its close, after the first's 1 ms; one sent after the close
    /// opens a window of its own. Without a window the same requests are taken at once.
    #[test]
    fn a_tokenization_window_holds_requests_until_it_closes() {
        let spec = FrontendSpec {
            request: ms(1.0),
            prompt_token: SimDuration::ZERO,
            tokenizer_batch_wait: ms(2.0),
            ..FrontendSpec::default()
        };
        let mut f = Frontend::new(spec);
        let t0 = SimTime::ZERO;
        assert_eq!(f.admit(t0, 100), t0 + ms(3.0));
        assert_eq!(f.admit(t0 + ms(0.5), 100), t0 + ms(4.0));
        assert_eq!(f.admit(t0 + ms(10.0), 100), t0 + ms(13.0));
        // A full window (32 requests) sends the next to a window of its own.
        let mut f = Frontend::new(FrontendSpec {
            request: SimDuration::ZERO,
            ..spec
        });
        for _ in 0..MICROBATCH_MAX {
            assert_eq!(f.admit(t0, 1), t0 + ms(2.0));
        }
        assert_eq!(f.admit(t0 + ms(1.0), 1), t0 + ms(3.0));
        let mut plain = Frontend::new(FrontendSpec {
            tokenizer_batch_wait: SimDuration::ZERO,
            ..spec
        });
        assert_eq!(plain.admit(t0, 100), t0 + ms(1.0));
    }

    #[test]
    fn disabled_means_no_cost_and_no_warmup() {
        let mut f = Frontend::new(FrontendSpec {
            enabled: false,
            ..FrontendSpec::default()
        });
        let t = SimTime::ZERO + ms(3.0);
        assert_eq!(f.admit(t, 5000), t);
        assert_eq!(f.delivered(t), t);
        assert!(!f.spec().warmup);
        assert_eq!(f.spec().client_send, SimDuration::ZERO);
    }
}
