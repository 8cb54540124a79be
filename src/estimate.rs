//! `fleetsim estimate`: one configuration's headline numbers, from the same simulation as `run`.
//!
//! Without a concurrency the numbers are those of a single request on an idle worker. With
//! `concurrency = C` they are measured over a closed-loop run of C clients (the `concurrency` workload),
//! each sending its next request when the previous one completes, as `vllm bench serve --max-concurrency C`
//! does: through the benchmark client and API server ([`crate::workload::frontend`], on with its published
//! costs), after a warm-up request, and with the benchmark's own definitions of TTFT, TPOT and ITL
//! ([`crate::metrics::bench`]). Either way the requests go through [`Simulation`]: the estimate and a
//! scenario run cannot disagree.

use serde::Serialize;

use crate::config::PositiveInt;
use crate::engine::Simulation;
use crate::hardware::{GpuId, ModelId, Precision, Profile, ProfileKey};
use crate::metrics::Summary;
use crate::metrics::bench::{BenchDefinitions, BenchReport};
use crate::metrics::summary::round;
use crate::routing::RouterSpec;
use crate::scenario::{Scenario, Slo, WorkerGroup};
use crate::time::SimDuration;
use crate::workload::dist::LengthSpec;
use crate::workload::harness::{Harness, HarnessOptions};
use crate::workload::{FrontendSpec, WorkloadKind, WorkloadSpec};

/// What to estimate.
#[derive(Clone, Debug)]
pub struct EstimateRequest {
    pub gpu: GpuId,
    pub model: ModelId,
    pub tp: u32,
    pub precision: Precision,
    /// The KV cache's data type, if not the weights' precision (vLLM's `--kv-cache-dtype`).
    pub kv_cache_dtype: Option<Precision>,
    /// Prompt tokens of every request.
    pub prompt: u32,
    /// Output tokens of every request.
    pub output: u32,
    /// Closed-loop clients; `None` for a single request on an idle worker.
    pub concurrency: Option<u32>,
    /// Requests of the closed-loop run (default: ten per client).
    pub requests: Option<u32>,
    /// A profile file to use instead of the built-in one: (name to report, profile).
    pub profile: Option<(String, Profile)>,
    /// The engine's sequence cap (default: `vllm serve`'s for the GPU, 1,024 on H100/H200 and 256 on
    /// A100/L40S); raise it to measure a large-batch engine's maximum throughput.
    pub max_num_seqs: Option<u32>,
    /// The client/API-server path (default: on, with published costs; `enabled = false`: lock step).
    pub frontend: FrontendSpec,
    /// The engine's asynchronous scheduling (vLLM's `--async-scheduling`, its default since PR #27614 of December 2025;
    /// `false` for `--no-async-scheduling` or an older vLLM).
    pub async_scheduling: bool,
    /// The benchmark client imitated, if any, and its options (unset ones take the harness's defaults):
    /// lengths drawn around `prompt` and `output` as it draws them, its request budget, warm-up, metric
    /// definitions and server flags. `None`: every request exactly `prompt` + `output` tokens, ten per
    /// client, `vllm bench serve`'s metrics.
    pub harness: Option<(Harness, HarnessOptions)>,
    /// The seed of the run's random streams (the harness's length draws, arrivals under a request
    /// rate): one sample of the client's randomness; another seed gives another.
    pub seed: u64,
}

/// Mean and percentiles of a latency, ms.
#[derive(Clone, Debug, Serialize)]
pub struct Stats {
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
}

/// `estimate --json`: the keys of ARCHITECTURE §2.3, plus what was estimated and with which profile.
#[derive(Clone, Debug, Serialize)]
pub struct Estimate {
    pub gpu: String,
    pub model: String,
    pub tp: u32,
    pub precision: String,
    /// The KV cache's data type (`--kv-cache-dtype`; BF16 unless given, as vLLM's `auto`).
    pub kv_cache_dtype: String,
    /// The step-time profile used (as in `summary.json`'s `workers[]`).
    pub profile: String,
    pub calibrated: bool,
    /// How far the configuration is from the profile's fitted one, in words (`exact` when fitted).
    pub profile_distance: String,
    pub prompt_tokens: u32,
    pub output_tokens: u32,
    /// The benchmark client imitated: `fixed lengths` (every request exactly `prompt_tokens` +
    /// `output_tokens`), or a harness with its range ratio (`docs/benchmark-client.md`).
    pub harness: String,
    /// Inclusive range the prompt lengths of the run are drawn from.
    pub prompt_tokens_range: [u32; 2],
    /// Inclusive range the output lengths of the run are drawn from.
    pub output_tokens_range: [u32; 2],
    /// Clients of the closed-loop run (1: a single request).
    pub concurrency: u32,
    /// Requests completed in the run the latencies come from.
    pub requests: u64,
    /// Time to prefill the prompt on an idle worker (chunked under the token budget), to its first token.
    pub prefill_ms: f64,
    /// One decode step of `concurrency` sequences, each with the mean context of generation
    /// (prompt + output / 2).
    pub decode_step_ms: f64,
    /// Tokens of KV cache one worker holds.
    pub kv_capacity_tokens: u64,
    /// The engine's step token budget (`vllm serve`'s default for the GPU).
    pub max_num_batched_tokens: u32,
    /// The engine's sequence cap (`vllm serve`'s default for the GPU unless raised).
    pub max_num_seqs: u32,
    /// Whether the engine schedules asynchronously (a request arriving while a step runs waits one
    /// step more).
    pub async_scheduling: bool,
    /// Output tokens per second of simulated time over the run.
    pub output_tokens_per_s: f64,
    pub ttft_ms: Stats,
    pub tpot_ms: Stats,
    /// Mean inter-token latency over every gap of every request, ms.
    pub itl_mean_ms: f64,
    /// The benchmark's warm-up request (client path on), kept out of the statistics; the mean where the
    /// harness sends several.
    pub warmup_ttft_ms: Option<f64>,
    /// Whose metric definitions TTFT, TPOT and ITL follow (written when not `vllm bench serve`'s).
    #[serde(skip_serializing_if = "BenchDefinitions::is_vllm_bench")]
    pub definitions: BenchDefinitions,
    /// GuideLLM with a warm-up or cool-down: its measured window; `requests` are those in it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<crate::metrics::bench::MeasuredWindow>,
    /// The seed of the run (written when not 0, the default).
    #[serde(skip_serializing_if = "crate::metrics::bench::is_zero")]
    pub seed: u64,
    /// GuideLLM with `--max-seconds`: requests cancelled when it ran out, in no figure.
    #[serde(skip_serializing_if = "crate::metrics::bench::is_zero")]
    pub cancelled: u64,
}

impl Estimate {
    /// `estimate --json`: pretty-printed, newline-terminated.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("an estimate serialises");
        s.push('\n');
        s
    }

    /// The estimate as a short Markdown table.
    pub fn to_markdown(&self) -> String {
        use std::fmt::Write;
        let mut o = String::new();
        let calibrated = if self.calibrated {
            "calibrated"
        } else {
            "uncalibrated"
        };
        let _ = writeln!(
            o,
            "# {} × {} tp {} {}: prompt {}, output {}, concurrency {}{}\n",
            self.gpu,
            self.model,
            self.tp,
            self.precision,
            self.prompt_tokens,
            self.output_tokens,
            self.concurrency,
            if self.seed == 0 {
                String::new()
            } else {
                format!(", seed {}", self.seed)
            }
        );
        let [p0, p1] = self.prompt_tokens_range;
        let [o0, o1] = self.output_tokens_range;
        let _ = if p0 == p1 && o0 == o1 {
            writeln!(
                o,
                "Client: {} (every request {p0} + {o0} tokens).\n",
                self.harness
            )
        } else {
            let range = |a: u32, b: u32| {
                if a == b {
                    a.to_string()
                } else {
                    format!("{a}–{b}")
                }
            };
            writeln!(
                o,
                "Client: {} (prompts {} tokens, outputs {}).\n",
                self.harness,
                range(p0, p1),
                range(o0, o1)
            )
        };
        let _ = writeln!(
            o,
            "Step times: {calibrated} ({}; distance from a fitted configuration: {}).\n",
            self.profile, self.profile_distance
        );
        let _ = writeln!(o, "| metric | value |\n|---|---:|");
        let _ = writeln!(o, "| prefill (idle worker) | {:.2} ms |", self.prefill_ms);
        let _ = writeln!(
            o,
            "| decode step (batch {}) | {:.2} ms |",
            self.concurrency, self.decode_step_ms
        );
        let _ = writeln!(
            o,
            "| KV capacity | {} tokens ({} cache) |",
            self.kv_capacity_tokens, self.kv_cache_dtype
        );
        let _ = writeln!(
            o,
            "| engine limits | {} tokens per step, {} sequences, {} scheduling |",
            self.max_num_batched_tokens,
            self.max_num_seqs,
            if self.async_scheduling {
                "async"
            } else {
                "sync"
            }
        );
        let _ = writeln!(o, "| output tokens/s | {:.1} |", self.output_tokens_per_s);
        for (name, s) in [("TTFT", &self.ttft_ms), ("TPOT", &self.tpot_ms)] {
            let _ = writeln!(
                o,
                "| {name} mean / p50 / p99 | {:.2} / {:.2} / {:.2} ms |",
                s.mean, s.p50, s.p99
            );
        }
        let _ = writeln!(o, "| ITL mean | {:.2} ms |", self.itl_mean_ms);
        if let Some(w) = self.warmup_ttft_ms {
            let _ = writeln!(o, "| warm-up request TTFT (not counted) | {w:.2} ms |");
        }
        let definitions = match self.definitions {
            BenchDefinitions::VllmBench => {
                "TTFT, TPOT = (E2E − TTFT)/(output − 1) and ITL as `vllm bench serve` defines them"
            }
            BenchDefinitions::PerRequestItl => {
                "TTFT as the client defines it; TPOT is its inter-token latency, (E2E − TTFT)/(output − 1) \
                 per request, and ITL mean the mean of those over requests"
            }
            BenchDefinitions::Guidellm => {
                "as GuideLLM defines them: TPOT = E2E/output tokens, weighted by output tokens; ITL \
                 weighted by gaps; percentiles without interpolation"
            }
        };
        match &self.window {
            Some(w) => {
                let _ = writeln!(
                    o,
                    "\nRequests measured: {} of {} completed, those overlapping GuideLLM's measured window ({:.3}–{:.3} s, after its warm-up and before its cool-down) ({definitions}).",
                    self.requests, w.completed, w.start_s, w.end_s
                );
            }
            None => {
                let _ = writeln!(o, "\nRequests measured: {} ({definitions}).", self.requests);
            }
        }
        if self.cancelled > 0 {
            let _ = writeln!(
                o,
                "\n{} requests were still streaming when --max-seconds ran out: cancelled, as GuideLLM cancels them, and in no figure.",
                self.cancelled
            );
        }
        if let Some(note) = self.grouping_note() {
            let _ = writeln!(o, "\n{note}");
        }
        o
    }

    /// Why the mean TTFT of a closed loop at fixed lengths is well above one prefill, when it is (more
    /// than twice): with fixed lengths, the prompts that reach the engine during a step are prefilled together in the next
    /// ones, finish in the same step and return together (`docs/benchmark-client.md`).
    pub fn grouping_note(&self) -> Option<String> {
        let ratio = self.ttft_ms.mean / self.prefill_ms;
        let fixed_lengths = self.prompt_tokens_range[0] == self.prompt_tokens_range[1]
            && self.output_tokens_range[0] == self.output_tokens_range[1];
        (fixed_lengths && self.concurrency > 1 && ratio > 2.0).then(|| {
            format!(
                "Mean TTFT is {ratio:.1}× one idle prefill: at fixed lengths the prompts that arrive during a \
                 step are prefilled together, finish in the same step and come back together, so most \
                 requests share their prefill with others (docs/benchmark-client.md, \"Groups at fixed \
                 lengths\")."
            )
        })
    }
}

/// Runs `workload` (a closed loop) against one worker of `group`; the summary and the client's own
/// measurements. `longest` is the longest prompt and output drawn, for the error when one cannot fit.
fn simulate(
    group: &WorkerGroup,
    workload: WorkloadSpec,
    longest: (u32, u32),
    seed: u64,
) -> Result<(Summary, BenchReport), String> {
    let requests = workload.requests.map(|r| u64::from(r.0));
    let scenario = Scenario {
        origin: String::new(),
        name: "estimate".into(),
        seed,
        // The request cap ends the run; the window only has to outlast it.
        duration: SimDuration::from_secs(10 * 365 * 24 * 3600),
        max_requests: None,
        workers: vec![group.clone()],
        workload,
        router: RouterSpec::default(),
        policies: Default::default(),
        slo: Slo::default(),
        faults: Vec::new(),
        gateway: Default::default(),
        restart: Default::default(),
        metrics: Default::default(),
        tiers: Default::default(),
        interconnect: Default::default(),
        prices: Default::default(),
        swaps: Default::default(),
        meta: Default::default(),
        autoscaler: None,
    };
    scenario
        .validate()
        .map_err(|(field, message)| format!("{field}: {message}"))?;
    let out = Simulation::from_scenario(&scenario)?.run(&mut |_| {});
    let bench = out
        .bench
        .expect("a concurrency workload reports its client's measurements");
    // Every request completes, unless one can never fit, or GuideLLM's `--max-seconds` ran out first.
    let timed = scenario
        .workload
        .options
        .as_ref()
        .is_some_and(|o| o.max_seconds.is_some());
    if out.summary.requests.rejected > 0 || (!timed && Some(bench.completed()) != requests) {
        return Err(format!(
            "a request of {} + {} tokens does not fit the worker's KV cache ({} rejected)",
            longest.0, longest.1, out.summary.requests.rejected
        ));
    }
    Ok((out.summary, bench))
}

/// A closed loop of `clients` clients sending `requests` requests of `prompt` and `output` tokens.
fn closed_loop(
    prompt: LengthSpec,
    output: LengthSpec,
    clients: u32,
    requests: u32,
    frontend: FrontendSpec,
) -> WorkloadSpec {
    WorkloadSpec {
        kind: WorkloadKind::Concurrency,
        clients: Some(PositiveInt(clients)),
        requests: Some(PositiveInt(requests)),
        prompt: Some(prompt),
        output: Some(output),
        frontend: Some(frontend),
        ..WorkloadSpec::default()
    }
}

/// Estimates `req`, or says why it cannot (the model does not fit, a request is longer than the KV cache).
pub fn estimate(req: &EstimateRequest) -> Result<Estimate, String> {
    let mut group = WorkerGroup::single(req.gpu, req.model, req.tp, req.precision);
    group.kv_cache_dtype = req.kv_cache_dtype;
    if let Some((name, p)) = &req.profile {
        group.use_profile(name.clone(), p.clone())?;
    }
    let clients = req.concurrency.unwrap_or(1);
    let harness_seqs = req
        .harness
        .as_ref()
        .and_then(|(h, _)| h.max_num_seqs(clients));
    if let Some(n) = req.max_num_seqs.or(harness_seqs) {
        group.max_num_seqs = PositiveInt(n.max(1));
    }
    group.async_scheduling = req.async_scheduling;
    let perf = group.perf();
    let clients_run = req.concurrency.unwrap_or(1);
    // The client imitated: the workload it runs, how it is described, the ranges its lengths are drawn
    // from.
    let (harness, prompt_range, output_range, workload) = match &req.harness {
        None => (
            "fixed lengths".to_string(),
            (req.prompt, req.prompt),
            (req.output, req.output),
            closed_loop(
                LengthSpec::fixed(req.prompt),
                LengthSpec::fixed(req.output),
                clients_run,
                match req.concurrency {
                    None => 1,
                    Some(c) => req.requests.unwrap_or(c.saturating_mul(10)),
                },
                req.frontend,
            ),
        ),
        Some((h, options)) => {
            let run = h
                .run(req.prompt, req.output, clients_run, options)
                .map_err(|(key, m)| match key {
                    "random_range_ratio" => m,
                    _ => format!("--harness-option {key}: {m}"),
                })?;
            let requests = match req.concurrency {
                None => Some(1),
                Some(_) => match req.requests.or(run.requests) {
                    // A GuideLLM run bounded by --max-seconds alone sends until it runs out.
                    None if options.max_seconds.is_some() => None,
                    None => {
                        return Err(format!(
                            "{h} has no default request budget (its --constraint \
                             kind=max_requests,count=N): give --requests, or \
                             --harness-option max_seconds=T"
                        ));
                    }
                    n => n,
                },
            };
            let mut words = options.clone();
            if matches!(h, Harness::VllmBench | Harness::InferenceMax) {
                words.random_range_ratio = Some(
                    options
                        .random_range_ratio
                        .unwrap_or(h.default_range_ratio()),
                );
            }
            let words = words.words();
            (
                if words.is_empty() {
                    h.to_string()
                } else {
                    format!("{h}, {words}")
                },
                run.prompt_range,
                run.output_range,
                WorkloadSpec {
                    kind: WorkloadKind::Benchmark,
                    harness: Some(*h),
                    options: Some(options.clone()),
                    clients: Some(PositiveInt(clients_run)),
                    requests: requests.map(|n| PositiveInt(n.max(1))),
                    prompt: Some(LengthSpec::fixed(req.prompt)),
                    output: Some(LengthSpec::fixed(req.output)),
                    frontend: Some(req.frontend),
                    ..WorkloadSpec::default()
                },
            )
        }
    };
    let engine_only = FrontendSpec {
        enabled: false,
        ..FrontendSpec::default()
    };
    let (idle, _) = simulate(
        &group,
        closed_loop(
            LengthSpec::fixed(req.prompt),
            LengthSpec::fixed(req.output),
            1,
            1,
            engine_only,
        ),
        (req.prompt, req.output),
        req.seed,
    )?;
    let (_, loaded) = simulate(&group, workload, (prompt_range.1, output_range.1), req.seed)?;
    let stats = |d: &crate::metrics::bench::BenchStat| Stats {
        mean: round(d.mean, 6),
        p50: round(d.p50, 6),
        p99: round(d.p99, 6),
    };
    let context = u64::from(req.prompt) + u64::from(req.output) / 2;
    Ok(Estimate {
        gpu: req.gpu.as_str().into(),
        model: req.model.as_str().into(),
        tp: req.tp,
        precision: req.precision.as_str().into(),
        kv_cache_dtype: group.kv_dtype().as_str().into(),
        profile: perf.provenance.profile.clone(),
        calibrated: perf.provenance.calibrated,
        profile_distance: crate::hardware::profile::distance_words(
            ProfileKey {
                gpu: req.gpu,
                model: req.model,
                tp: req.tp,
                precision: req.precision,
            },
            req.profile.as_ref().map(|(_, p)| p.key()),
        ),
        prompt_tokens: req.prompt,
        output_tokens: req.output,
        harness,
        prompt_tokens_range: [prompt_range.0, prompt_range.1],
        output_tokens_range: [output_range.0, output_range.1],
        concurrency: clients,
        requests: loaded.requests,
        prefill_ms: idle.ttft_ms.mean,
        decode_step_ms: round(
            perf.decode_step_seconds(u64::from(clients), context) * 1e3,
            6,
        ),
        kv_capacity_tokens: u64::from(group.kv_blocks()?) * u64::from(group.block_size.0),
        max_num_batched_tokens: group.max_num_batched_tokens.0,
        max_num_seqs: group.max_num_seqs.0,
        async_scheduling: group.async_scheduling,
        output_tokens_per_s: round(loaded.output_tokens_per_s, 6),
        ttft_ms: stats(&loaded.ttft_ms),
        tpot_ms: stats(&loaded.tpot_ms),
        itl_mean_ms: round(loaded.itl_mean_ms, 6),
        warmup_ttft_ms: loaded.warmup.as_ref().map(|w| round(w.ttft_ms, 6)),
        definitions: loaded.definitions,
        window: loaded.window.clone(),
        cancelled: loaded.cancelled,
        seed: req.seed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(concurrency: Option<u32>) -> EstimateRequest {
        EstimateRequest {
            gpu: GpuId::H100,
            model: ModelId::Llama31_8b,
            tp: 1,
            precision: Precision::Bf16,
            kv_cache_dtype: None,
            prompt: 1000,
            output: 100,
            concurrency,
            requests: None,
            profile: None,
            max_num_seqs: None,
            frontend: FrontendSpec::default(),
            async_scheduling: true,
            harness: None,
            seed: 0,
        }
    }

    #[test]
    fn a_single_request_takes_its_prefill_then_one_decode_step_per_token() {
        let e = estimate(&req(None)).unwrap();
        assert!(e.calibrated);
        assert_eq!(e.profile, "h100/llama-3.1-8b/tp1/bf16");
        assert_eq!((e.concurrency, e.requests), (1, 1));
        // The client also waits for the API server (1 ms per request + 1 µs × 1,000 prompt tokens) and
        // the first token's delivery (0.6 ms): 2.6 ms on top of the engine's prefill.
        assert!((e.ttft_ms.mean - e.prefill_ms - 2.6).abs() < 1e-6, "{e:?}");
        assert!(e.warmup_ttft_ms.is_some());
        assert_eq!(e.profile_distance, "exact");
        // Every decode step of a lone request sees about the same context: TPOT ≈ one step.
        assert!(
            (e.tpot_ms.mean / e.decode_step_ms - 1.0).abs() < 0.02,
            "{e:?}"
        );
        let e2e_s = (e.ttft_ms.mean + 99.0 * e.tpot_ms.mean) / 1e3;
        assert!((e.output_tokens_per_s * e2e_s / 100.0 - 1.0).abs() < 0.01);
    }

    /// `estimate` runs `vllm serve`'s limits for the GPU (vllm/engine/arg_utils.py): 8,192 tokens and
    /// 1,024 sequences on an H100, 2,048 and 256 on an A100; and says so, with the scheduling asked for.
    #[test]
    fn the_engine_limits_are_vllm_serves_for_the_gpu() {
        let h100 = estimate(&req(None)).unwrap();
        assert_eq!(
            (h100.max_num_batched_tokens, h100.max_num_seqs),
            (8192, 1024)
        );
        assert!(h100.async_scheduling);
        assert!(h100.to_markdown().contains(
            "| engine limits | 8192 tokens per step, 1024 sequences, async scheduling |"
        ));
        let sync = estimate(&EstimateRequest {
            async_scheduling: false,
            ..req(None)
        })
        .unwrap();
        assert!(!sync.async_scheduling);
        assert!(
            sync.to_markdown()
                .contains("1024 sequences, sync scheduling |")
        );
        let mut r = req(None);
        r.gpu = GpuId::A100;
        let a100 = estimate(&r).unwrap();
        assert_eq!(
            (a100.max_num_batched_tokens, a100.max_num_seqs),
            (2048, 256)
        );
    }

    #[test]
    fn concurrency_trades_latency_for_throughput() {
        let one = estimate(&req(None)).unwrap();
        let many = estimate(&req(Some(32))).unwrap();
        assert_eq!((many.concurrency, many.requests), (32, 320));
        assert!(many.output_tokens_per_s > 10.0 * one.output_tokens_per_s);
        assert!(many.tpot_ms.mean > one.tpot_ms.mean);
        assert!(many.ttft_ms.p99 > one.ttft_ms.p99);
        assert_eq!(many.prefill_ms, one.prefill_ms);
    }

    /// A lone request's TTFT is one prefill plus a few ms: no note. 32 clients with 1,000-token prompts
    /// share 8,192-token steps (about eight prompts each): the mean TTFT is several prefills, and the
    /// table says why.
    #[test]
    fn the_table_explains_a_grouped_ttft() {
        let one = estimate(&req(None)).unwrap();
        assert!(one.grouping_note().is_none());
        assert!(!one.to_markdown().contains("idle prefill:"));
        let many = estimate(&req(Some(32))).unwrap();
        let note = many
            .grouping_note()
            .expect("32 clients share prefill steps");
        assert!(note.contains("docs/benchmark-client.md"), "{note}");
        assert!(many.to_markdown().contains(&note));
    }

    /// `--seed`: the same seed gives the same estimate, byte for byte; another seed draws other lengths
    /// and so other figures (one sample of the harness's randomness each), and is written in the output;
    /// seed 0, the default, is not.
    #[test]
    fn another_seed_draws_another_sample_of_the_harness() {
        let mut r = req(Some(8));
        r.requests = Some(40);
        r.harness = Some((Harness::InferenceMax, HarnessOptions::default()));
        let zero = estimate(&r).unwrap();
        assert_eq!(zero.to_json(), estimate(&r).unwrap().to_json());
        assert!(!zero.to_json().contains("\"seed\""));
        r.seed = 7;
        let seven = estimate(&r).unwrap();
        assert_ne!(zero.ttft_ms.mean, seven.ttft_ms.mean);
        assert_eq!(
            zero.prefill_ms, seven.prefill_ms,
            "the idle prefill has fixed lengths"
        );
        assert!(seven.to_json().contains("\"seed\": 7"));
        assert!(
            seven
                .to_markdown()
                .lines()
                .next()
                .unwrap()
                .ends_with(", seed 7")
        );
    }

    /// A harness draws the lengths its source draws and sends its own request budget: InferenceMAX's
    /// client sends ten requests per client with lengths in [int(0.8·L), L] against `--max-num-seqs`
    /// = the concurrency; `vllm bench serve` sends 1,000 at fixed lengths unless given a range ratio.
    /// Varied lengths break the fixed-length groups: the median request no longer waits for a group's
    /// prefills.
    #[test]
    fn a_harness_sets_lengths_budget_and_server_flags() {
        let mut r = req(Some(8));
        r.harness = Some((Harness::InferenceMax, HarnessOptions::default()));
        let imax = estimate(&r).unwrap();
        assert_eq!(imax.requests, 80);
        assert_eq!(imax.max_num_seqs, 8);
        assert_eq!(imax.prompt_tokens_range, [800, 1000]);
        assert_eq!(imax.output_tokens_range, [80, 100]);
        assert!(imax.harness.starts_with("inferencemax"), "{}", imax.harness);
        assert!(imax.to_markdown().contains("prompts 800–1000 tokens"));
        assert!(imax.grouping_note().is_none());
        // A smaller sequence cap frees sampler memory for the KV cache.
        let fixed = estimate(&req(Some(8))).unwrap();
        assert!(imax.kv_capacity_tokens > fixed.kv_capacity_tokens);
        assert_eq!(fixed.harness, "fixed lengths");
        assert!(imax.ttft_ms.p50 < fixed.ttft_ms.p50, "{imax:?} {fixed:?}");
        r.harness = Some((Harness::VllmBench, HarnessOptions::default()));
        let vllm = estimate(&r).unwrap();
        assert_eq!((vllm.requests, vllm.max_num_seqs), (1000, 1024));
        assert_eq!(vllm.prompt_tokens_range, [1000, 1000]);
        r.harness = Some((
            Harness::VllmBench,
            HarnessOptions {
                random_range_ratio: Some(0.5),
                ..HarnessOptions::default()
            },
        ));
        let wide = estimate(&r).unwrap();
        assert_eq!(wide.prompt_tokens_range, [500, 1500]);
        assert_eq!(wide.output_tokens_range, [50, 150]);
        r.harness = Some((
            Harness::VllmBench,
            HarnessOptions {
                random_range_ratio: Some(1.0),
                ..HarnessOptions::default()
            },
        ));
        assert!(estimate(&r).unwrap_err().contains("[0, 1)"));
    }

    /// AIPerf sends 10 requests without warm-up by default and reports its per-request inter-token
    /// latency; GenAI-Perf max(10, 2C); GuideLLM needs a budget and counts the first token in its TPOT.
    #[test]
    fn the_nvidia_clients_and_guidellm_send_their_own_budgets_and_metrics() {
        let mut r = req(Some(8));
        r.harness = Some((Harness::AiPerf, HarnessOptions::default()));
        let a = estimate(&r).unwrap();
        assert_eq!(a.requests, 10);
        assert_eq!(a.warmup_ttft_ms, None);
        assert_eq!(a.itl_mean_ms, a.tpot_ms.mean);
        assert_eq!(a.harness, "aiperf");
        r.harness = Some((Harness::GenAiPerf, HarnessOptions::default()));
        assert_eq!(estimate(&r).unwrap().requests, 16);
        r.harness = Some((Harness::Guidellm, HarnessOptions::default()));
        assert!(estimate(&r).unwrap_err().contains("--requests"));
        r.requests = Some(10);
        let g = estimate(&r).unwrap();
        // E2E / output tokens, token-weighted: above the per-request TPOT by about TTFT / output.
        assert!(g.tpot_ms.mean > a.tpot_ms.mean, "{g:?} {a:?}");
        r.harness = Some((
            Harness::AiPerf,
            HarnessOptions {
                synthetic_input_tokens_stddev: Some(100.0),
                ..HarnessOptions::default()
            },
        ));
        let wide = estimate(&r).unwrap();
        assert_eq!(wide.harness, "aiperf, --synthetic-input-tokens-stddev 100");
        assert_eq!(wide.prompt_tokens_range, [500, 1500]);
    }

    #[test]
    fn impossible_configurations_say_why() {
        let mut r = req(None);
        r.model = ModelId::Llama31_70b;
        assert!(estimate(&r).unwrap_err().contains("does not fit"));
        let mut r = req(None);
        r.prompt = 2_000_000;
        assert!(estimate(&r).unwrap_err().contains("KV cache"));
    }
}
