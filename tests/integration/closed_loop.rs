//! The closed-loop `concurrency` workload: C clients, each sending its next request when the previous one
//! finishes.

use crate::common::{run, scenario};
use fleetsim::scenario::Scenario;

const CLOSED: &str = r#"
name = "closed"
seed = 5
duration = "1h"

[[workers]]
count = 2
gpu = "h100"
model = "llama-3.1-8b"

[workload]
kind = "concurrency"
clients = 24
requests = 4000
prompt = { dist = "lognormal", median = 800, sigma = 0.6, max = 8000 }
output = { dist = "lognormal", median = 150, sigma = 0.5, max = 1000 }
# The queueing-law tests below need exactly C requests at the engine: no client or API-server delays.
frontend = { enabled = false }
"#;

/// Little's law, N = X·R: with no think time exactly C requests are in flight until the clients stop, so
/// throughput × mean end-to-end latency equals the number of clients, less the final drain (the last
/// requests finishing with fewer than C in flight: a couple of request lifetimes out of ~170 rounds).
#[test]
fn in_flight_requests_equal_the_clients() {
    // Little's law is over every request: no warm-up excluded.
    let (summary, c) = run(&scenario(CLOSED, &["metrics.warmup=\"none\""]));
    assert_eq!(summary.requests.completed, 4000);
    assert_eq!(summary.requests.arrived, 4000);
    let in_flight = c.steady.e2e.mean() / 1e9 * 4000.0 / summary.sim.simulated_s;
    assert!(
        (in_flight / 24.0 - 1.0).abs() < 0.02,
        "mean requests in flight {in_flight}, clients 24"
    );
}

/// More clients: more throughput and longer latencies; the scenario's `max_requests` caps it too.
#[test]
fn more_clients_more_throughput_and_latency() {
    let few = run(&scenario(CLOSED, &["workload.clients=4"])).0;
    let many = run(&scenario(CLOSED, &["workload.clients=64"])).0;
    assert!(many.throughput.output_tokens_per_s > 4.0 * few.throughput.output_tokens_per_s);
    assert!(many.tpot_ms.mean > few.tpot_ms.mean);
    let capped = run(&scenario(CLOSED, &["max_requests=100"])).0;
    assert_eq!(capped.requests.completed, 100);
}

#[test]
fn keys_of_the_other_kinds_are_rejected_with_their_line() {
    let err = |text: &str| {
        Scenario::parse(text, "c.toml", &[])
            .unwrap_err()
            .to_string()
    };
    let e = err(&CLOSED.replace("clients = 24", "clients = 24\nrate = 3.0"));
    assert!(
        e.starts_with("c.toml:14")
            && e.contains("workload.rate: does not apply to kind = \"concurrency\""),
        "{e}"
    );
    let e = err(&CLOSED.replace("clients = 24\n", ""));
    assert!(
        e.contains("workload.clients: required for kind = \"concurrency\""),
        "{e}"
    );
    let e = err(&CLOSED.replace("kind = \"concurrency\"", "kind = \"poisson\"\nrate = 2.0"));
    assert!(
        e.contains("workload.clients: does not apply to kind = \"poisson\""),
        "{e}"
    );
    let e = err(&CLOSED.replace("clients = 24", "clients = 0"));
    assert!(
        e.starts_with("c.toml:13:") && e.contains("`clients`"),
        "{e}"
    );
}

/// With one client the closed loop is a lone request at a time: its TTFT is exactly the step-time model's
/// prefill step, and its TPOT exactly the mean of the model's decode steps over the contexts it passes.
#[test]
fn concurrency_one_is_exactly_what_the_step_time_model_says() {
    use fleetsim::hardware::{GpuId, ModelId, Precision, StepShape};
    use fleetsim::scenario::WorkerGroup;

    let (prompt, output) = (1000u32, 50u32);
    let e = h100_8b_closed_loop(
        (prompt, output),
        1,
        5,
        fleetsim::workload::FrontendSpec {
            enabled: false,
            ..Default::default()
        },
    );
    assert_eq!(e.requests, 5);
    let perf = WorkerGroup::single(GpuId::H100, ModelId::Llama31_8b, 1, Precision::Bf16).perf();
    let step = |new: u32, context: u32| {
        let mut s = StepShape::default();
        s.add(u64::from(new), u64::from(context));
        perf.step_time(&s).0
    };
    let ms = |ns: u64| (ns as f64 / 1e6 * 1e6).round() / 1e6;
    assert_eq!(
        e.ttft_ms.mean,
        ms(step(prompt, 0)),
        "TTFT is one prefill step"
    );
    // Tokens 2..=output come from decode steps whose context grows from `prompt` by one each step.
    let decode: u64 = (0..output - 1).map(|i| step(1, prompt + i)).sum();
    // The client computes TPOT in float ms per request; the step sum in whole ns: within a nanosecond.
    assert!(
        (e.tpot_ms.mean - ms(decode / u64::from(output - 1))).abs() <= 2e-6,
        "TPOT is the mean decode step: {}",
        e.tpot_ms.mean
    );
}

/// Issue 40: at concurrency 1 with the request path outside the engine switched on, TTFT is that path plus
/// one prefill, hand-computed: the tokenization micro-batch window a lone request waits out, the API
/// server's fixed cost and its tokenization of the prompt, one idle prefill step, and the first chunk's
/// delivery. The client's send cost is spent before the clock starts,
/// so it is in no TTFT; the warm-up request, alone on the idle server, costs the same.
#[test]
fn concurrency_one_ttft_is_the_frontend_plus_one_prefill() {
    use fleetsim::hardware::{GpuId, ModelId, Precision, StepShape};
    use fleetsim::scenario::WorkerGroup;
    use fleetsim::time::SimDuration;
    use fleetsim::workload::FrontendSpec;

    // Deliberately not the defaults, so that each term is visible: a lone request waits out the 5-ms
    // tokenization window, then 2 ms + 1,500 × 4 µs + prefill + 3 ms.
    let prompt = 1500u32;
    let frontend = FrontendSpec {
        enabled: true,
        client_send: SimDuration::from_secs_f64(7e-3),
        request: SimDuration::from_secs_f64(2e-3),
        prompt_token: SimDuration::from_secs_f64(4e-6),
        token: SimDuration::from_secs_f64(3e-3),
        warmup: true,
        tokenizer_batch_wait: SimDuration::from_secs_f64(5e-3),
    };
    let e = h100_8b_closed_loop((prompt, 20), 1, 4, frontend);
    let perf = WorkerGroup::single(GpuId::H100, ModelId::Llama31_8b, 1, Precision::Bf16).perf();
    let mut shape = StepShape::default();
    shape.add(u64::from(prompt), 0);
    let prefill_ns = perf.step_time(&shape).0;
    let hand_ns = 5_000_000 + 2_000_000 + u64::from(prompt) * 4_000 + prefill_ns + 3_000_000;
    let hand_ms = hand_ns as f64 / 1e6;
    assert_eq!(e.requests, 4);
    for (what, got) in [
        ("mean", e.ttft_ms.mean),
        ("p50", e.ttft_ms.p50),
        ("p99", e.ttft_ms.p99),
        ("warm-up", e.warmup_ttft_ms.unwrap()),
    ] {
        assert!(
            (got - hand_ms).abs() <= 1e-6,
            "{what} TTFT {got} ms, hand-computed {hand_ms} ms (prefill {} ms)",
            prefill_ns as f64 / 1e6
        );
    }
}

/// `estimate` of Llama-3.1-8B BF16 on one H100: `lengths` (prompt, output) fixed, `clients` closed-loop
/// clients, `requests` in all, through `frontend`, no harness.
fn h100_8b_closed_loop(
    lengths: (u32, u32),
    clients: u32,
    requests: u32,
    frontend: fleetsim::workload::FrontendSpec,
) -> fleetsim::estimate::Estimate {
    h100_8b_closed_loop_scheduled(lengths, clients, requests, frontend, true)
}

/// [`h100_8b_closed_loop`] with asynchronous scheduling on or off.
fn h100_8b_closed_loop_scheduled(
    lengths: (u32, u32),
    clients: u32,
    requests: u32,
    frontend: fleetsim::workload::FrontendSpec,
    async_scheduling: bool,
) -> fleetsim::estimate::Estimate {
    use fleetsim::estimate::{EstimateRequest, estimate};
    use fleetsim::hardware::{GpuId, ModelId, Precision};
    estimate(&EstimateRequest {
        gpu: GpuId::H100,
        model: ModelId::Llama31_8b,
        tp: 1,
        precision: Precision::Bf16,
        kv_cache_dtype: None,
        prompt: lengths.0,
        output: lengths.1,
        concurrency: Some(clients),
        requests: Some(requests),
        profile: None,
        max_num_seqs: None,
        frontend,
        async_scheduling,
        harness: None,
        seed: 0,
    })
    .unwrap()
}

fn bench_estimate(output: u32, concurrency: u32, frontend: bool) -> fleetsim::estimate::Estimate {
    bench_estimate_scheduled(output, concurrency, frontend, true)
}

fn bench_estimate_scheduled(
    output: u32,
    concurrency: u32,
    frontend: bool,
    async_scheduling: bool,
) -> fleetsim::estimate::Estimate {
    h100_8b_closed_loop_scheduled(
        (1024, output),
        concurrency,
        concurrency * 8,
        fleetsim::workload::FrontendSpec {
            enabled: frontend,
            ..Default::default()
        },
        async_scheduling,
    )
}

/// vllm-project/vllm#13412 (Llama-3.3-70B, 3,100-token prompts, concurrency 32): at a fixed concurrency and
/// prompt length, mean TTFT falls as the output grows. With one output token every client re-sends a prompt
/// as soon as its last one is prefilled, so the engine is a queue of prompts; with longer outputs a request
/// spends more steps decoding per prompt, fewer prompts arrive per step and each new request shares its
/// first step with fewer others.
#[test]
fn mean_ttft_falls_as_the_output_grows_at_fixed_concurrency() {
    let ttft: Vec<f64> = [1, 4, 16]
        .iter()
        .map(|&o| bench_estimate(o, 32, true).ttft_ms.mean)
        .collect();
    assert!(ttft[0] > ttft[1] && ttft[1] > ttft[2], "mean TTFT {ttft:?}");
}

/// Fixed lengths and C clients: with the benchmark client and API server in the loop the clients are not in
/// lock step, so TTFTs spread (p99 > p50) and the mean is below the lock-step loop's, where every client's
/// prompt is sent at the same instant as all the others and waits for them to be prefilled. The warm-up is
/// reported apart. Compared with synchronous scheduling, where only the dispatch differs: with
/// asynchronous scheduling (the default) a request that arrives while a step runs waits one step more,
/// which the lock-step loop's requests, all arriving at an idle engine, never do.
#[test]
fn a_fixed_length_closed_loop_is_not_in_lock_step() {
    let real = bench_estimate_scheduled(256, 16, true, false);
    let lock = bench_estimate_scheduled(256, 16, false, false);
    let real_async = bench_estimate(256, 16, true);
    let lock_async = bench_estimate(256, 16, false);
    assert_eq!(lock_async.ttft_ms.mean, lock.ttft_ms.mean);
    assert!(
        real_async.ttft_ms.mean > real.ttft_ms.mean
            && real_async.ttft_ms.mean < real.ttft_ms.mean + 2.0 * real.decode_step_ms,
        "{real_async:?} vs {real:?}"
    );
    assert!(real.ttft_ms.p99 > 1.2 * real.ttft_ms.p50, "{real:?}");
    assert!(
        real.ttft_ms.mean < lock.ttft_ms.mean,
        "{real:?} vs {lock:?}"
    );
    let warm = real.warmup_ttft_ms.unwrap();
    // The warm-up ran alone: its TTFT is about one idle prefill plus the frontend's few ms.
    assert!(
        warm >= real.prefill_ms && warm < real.prefill_ms + 10.0,
        "{real:?}"
    );
    assert_eq!(real.requests, 16 * 8);
    assert!(lock.warmup_ttft_ms.is_none());
}

/// A bad `[workload.frontend]` value names the file, the line and the key; the table belongs to
/// `concurrency` only.
#[test]
fn frontend_errors_name_line_and_key() {
    let err = |text: &str| {
        Scenario::parse(text, "c.toml", &[])
            .unwrap_err()
            .to_string()
    };
    let bad = CLOSED.replace(
        "frontend = { enabled = false }",
        "frontend = { token = \"fast\" }",
    );
    let line = bad.lines().position(|l| l.starts_with("frontend")).unwrap() + 1;
    let e = err(&bad);
    assert!(
        e.starts_with(&format!("c.toml:{line}")) && e.contains("fast"),
        "{e}"
    );
    let e = err(&CLOSED.replace(
        "frontend = { enabled = false }",
        "frontend = { tokens = \"1ms\" }",
    ));
    assert!(e.contains("tokens"), "{e}");
    let e = err(&CLOSED
        .replace("kind = \"concurrency\"", "kind = \"poisson\"\nrate = 2.0")
        .replace("clients = 24\n", "")
        .replace("requests = 4000\n", ""));
    assert!(
        e.contains("workload.frontend: does not apply to kind = \"poisson\""),
        "{e}"
    );
}

/// The #13412 setting (3,100-token prompts, concurrency 32) on one H100 × Llama-3.1-8B, with the output
/// length either fixed (`--ignore-eos`) or spread as answers that stop at an end-of-sequence token are
/// (lognormal around `median`, σ = 0.5; #13412's command did not pass `--ignore-eos`).
fn issue_13412(output: &str) -> fleetsim::metrics::bench::BenchReport {
    let text = format!(
        r#"
name = "13412"
seed = 1
duration = "1h"

[[workers]]
count = 1
gpu = "h100"
model = "llama-3.1-8b"

[workload]
kind = "concurrency"
clients = 32
requests = 960
prompt = {{ dist = "fixed", tokens = 3100 }}
output = {output}
"#
    );
    run(&scenario(&text, &[]))
        .0
        .benchmark
        .expect("a closed loop reports its benchmark")
}

/// One 3,100-token prefill on an idle H100 × Llama-3.1-8B, from the step-time model alone.
fn lone_prefill_ms() -> f64 {
    use fleetsim::hardware::{GpuId, ModelId, Precision, StepShape};
    use fleetsim::scenario::WorkerGroup;
    let perf = WorkerGroup::single(GpuId::H100, ModelId::Llama31_8b, 1, Precision::Bf16).perf();
    let mut s = StepShape::default();
    s.add(3100, 0);
    perf.step_time(&s).0 as f64 / 1e6
}

/// vllm-project/vllm#13412 over long outputs: when the outputs vary in length, as answers ending at an
/// end-of-sequence token do, mean TTFT keeps falling as the output grows (16, 128, 1,024 tokens): requests
/// that were prefilled together finish in different steps, so they return apart, and the longer the outputs
/// the fewer prompts arrive per step. Once dispersed, the typical (median) request is prefilled nearly
/// alone: its TTFT is within 1.5× of one idle prefill plus the frontend's few ms (the prompts of the other
/// 31 clients would make it several times that).
#[test]
fn mean_ttft_falls_over_long_outputs_when_outputs_vary() {
    let spread = |median: u32| {
        issue_13412(&format!(
            "{{ dist = \"lognormal\", median = {median}, sigma = 0.5, max = 20000 }}"
        ))
    };
    let runs: Vec<_> = [16, 128, 1024].iter().map(|&m| spread(m)).collect();
    let ttft: Vec<f64> = runs.iter().map(|r| r.ttft_ms.mean).collect();
    assert!(ttft[0] > ttft[1] && ttft[1] > ttft[2], "mean TTFT {ttft:?}");
    let prefill = lone_prefill_ms();
    assert!(
        runs[2].ttft_ms.p50 < 1.5 * prefill + 10.0,
        "median TTFT {} vs one prefill {prefill}",
        runs[2].ttft_ms.p50
    );
}

/// With every output exactly as long (`--ignore-eos`), the requests whose prompts complete in the same step
/// finish in the same step and return together, and a group that returns while another group's prefill
/// step runs joins the next step: nothing splits a group once formed. The groups of the first dispatch
/// (the token budget of 8,192 holds two 3,100-token prompts and part of a third) persist, so past the first
/// few output tokens mean TTFT no longer depends on the output length, and the median request shares its
/// prefill with others (more than twice one idle prefill). `docs/benchmark-client.md` says why no mechanism
/// in the model disperses them and what would.
#[test]
fn fixed_length_groups_persist_over_long_outputs() {
    let fixed = |tokens: u32| issue_13412(&format!("{{ dist = \"fixed\", tokens = {tokens} }}"));
    let (short, long) = (fixed(128), fixed(1024));
    assert!(
        (short.ttft_ms.mean / long.ttft_ms.mean - 1.0).abs() < 0.02,
        "{short:?} vs {long:?}"
    );
    assert!(
        long.ttft_ms.p50 > 2.0 * lone_prefill_ms(),
        "median TTFT {}",
        long.ttft_ms.p50
    );
    assert!(long.ttft_ms.p99 > long.ttft_ms.p50, "{long:?}");
}

/// A `benchmark` workload runs its harness's client end to end: GenAI-Perf at 8 clients sends its
/// default max(10, 2 × 8) = 16 requests, two per client, no warm-up, and `summary.json` says whose
/// metric definitions its benchmark block follows; GuideLLM's TPOT counts the first token, so on the
/// same traffic it is above the per-request TPOT by about TTFT / output tokens.
#[test]
fn a_benchmark_scenario_reports_with_its_harness_s_definitions() {
    let text = |harness: &str, extra: &str| {
        benchmark_on_one_h100(
            "harness",
            3,
            harness,
            &format!(
                "prompt = {{ dist = \"fixed\", tokens = 2000 }}\noutput = {{ dist = \"fixed\", tokens = 64 }}\n{extra}"
            ),
        )
    };
    let (genai, _) = run(&scenario(&text("genai-perf", ""), &[]));
    let g = genai.benchmark.expect("a benchmark reports its client");
    assert_eq!(g.requests, 16);
    assert!(g.warmup.is_none());
    assert_eq!(g.itl_mean_ms, g.tpot_ms.mean);
    let json = serde_json::to_value(&g).unwrap();
    assert_eq!(json["definitions"], "per-request-itl");
    let (guide, _) = run(&scenario(&text("guidellm", "requests = 16"), &[]));
    let u = guide.benchmark.expect("a benchmark reports its client");
    let first_token_share = u.ttft_ms.mean / 64.0;
    assert!(
        (u.tpot_ms.mean - g.tpot_ms.mean * 63.0 / 64.0 - first_token_share).abs()
            < 0.25 * first_token_share,
        "{u:?} {g:?}"
    );
}

/// `--request-rate R` under `--max-concurrency C`: below the fleet's capacity the benchmark lasts about
/// its budget / R (the creations pace it) and its TTFT is about one prefill, where the same budget at
/// `inf` finishes in a few seconds with the clients queueing behind each other; over KubeAI's
/// conversation prompts, rounds of a conversation reuse each other's prefixes.
#[test]
fn a_request_rate_paces_the_benchmark_and_conversation_prompts_share_prefixes() {
    let text = |extra: &str| {
        benchmark_on_one_h100("rate", 5, "vllm-bench", &format!("requests = 60\n{extra}"))
    };
    let lengths = "prompt = { dist = \"fixed\", tokens = 1000 }\noutput = { dist = \"fixed\", tokens = 32 }\n";
    let (paced, _) = run(&scenario(
        &text(&format!("{lengths}options = {{ request_rate = 2 }}")),
        &[],
    ));
    let (flat, _) = run(&scenario(&text(lengths), &[]));
    let (p, f) = (paced.benchmark.unwrap(), flat.benchmark.unwrap());
    assert!(
        (20.0..45.0).contains(&p.duration_s),
        "60 requests at 2/s: {p:?}"
    );
    assert!(f.duration_s < 10.0, "{f:?}");
    assert!(p.ttft_ms.mean < 0.6 * f.ttft_ms.mean, "{p:?} {f:?}");
    let conversations = "[workload.conversation_prompts]\nconversations = 3\nmessages = { dist = \"fixed\", tokens = 12 }\nuser = { dist = \"fixed\", tokens = 200 }\nreply = { dist = \"fixed\", tokens = 100 }\npool = 18\n";
    let (conv, _) = run(&scenario(&text(conversations), &[]));
    assert_eq!(conv.benchmark.unwrap().requests, 60);
    // 18 prompts of 200–1,700 tokens, each sent 3 or 4 times, rounds sharing their prefixes.
    assert!(conv.prefix_cache.hit_rate > 0.7, "{:?}", conv.prefix_cache);
}

/// GuideLLM bounded by `--max-seconds` alone (no request count): it sends until the time runs out, the
/// requests still streaming then are cancelled and counted apart (at most one per stream), and its
/// warm-up and cool-down are seconds: 10% of 20 s each, so the window is 2–18 s from its start. A
/// scenario that bounds a GuideLLM run by neither is refused by field.
#[test]
fn guidellm_bounded_by_max_seconds_cancels_what_still_streams() {
    let lengths = "prompt = { dist = \"fixed\", tokens = 1000 }\noutput = { dist = \"fixed\", tokens = 400 }\n";
    let text = benchmark_on_one_h100(
        "seconds",
        2,
        "guidellm",
        &format!("{lengths}options = {{ max_seconds = 20, warmup = 0.1, cooldown = 0.1 }}"),
    );
    let (out, _) = run(&scenario(&text, &[]));
    let b = out.benchmark.expect("a benchmark reports its client");
    let w = b.window.clone().expect("phases set a window");
    assert_eq!((w.start_s, w.end_s), (2.0, 18.0), "{b:?}");
    assert!((1..=8).contains(&b.cancelled), "{b:?}");
    // Eight streams, about 3.5 s a request: roughly 20 / 3.5 rounds completed in 20 s.
    assert!((24..=56).contains(&w.completed), "{b:?}");
    assert!(b.requests <= w.completed);
    let json = serde_json::to_value(&b).unwrap();
    assert_eq!(json["cancelled"], b.cancelled);
    let unbounded = benchmark_on_one_h100("seconds", 2, "guidellm", lengths);
    let e = fleetsim::scenario::Scenario::parse(&unbounded, "g.toml", &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("requests") && e.contains("max_seconds"), "{e}");
}

/// A `benchmark` scenario of `harness` at 8 clients on one H100 serving Llama-3.1-8B, its workload
/// table ending with `body`.
fn benchmark_on_one_h100(name: &str, seed: u64, harness: &str, body: &str) -> String {
    format!(
        r#"
name = "{name}"
seed = {seed}
duration = "1h"

[[workers]]
count = 1
gpu = "h100"
model = "llama-3.1-8b"

[workload]
kind = "benchmark"
harness = "{harness}"
clients = 8
{body}
"#
    )
}
