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
"#;

/// Little's law, N = X·R: with no think time exactly C requests are in flight until the clients stop, so
/// throughput × mean end-to-end latency equals the number of clients, less the final drain (the last
/// requests finishing with fewer than C in flight: a couple of request lifetimes out of ~170 rounds).
#[test]
fn in_flight_requests_equal_the_clients() {
    let (summary, c) = run(&scenario(CLOSED, &[]));
    assert_eq!(summary.requests.completed, 4000);
    assert_eq!(summary.requests.arrived, 4000);
    let in_flight = c.e2e.mean() / 1e9 * 4000.0 / summary.sim.simulated_s;
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
    use fleetsim::estimate::{EstimateRequest, estimate};
    use fleetsim::hardware::{GpuId, ModelId, Precision, StepShape};
    use fleetsim::scenario::WorkerGroup;

    let (prompt, output) = (1000u32, 50u32);
    let e = estimate(&EstimateRequest {
        gpu: GpuId::H100,
        model: ModelId::Llama31_8b,
        tp: 1,
        precision: Precision::Bf16,
        prompt,
        output,
        concurrency: Some(1),
        requests: Some(5),
        profile: None,
        max_num_seqs: None,
    })
    .unwrap();
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
    assert_eq!(
        e.tpot_ms.mean,
        ms(decode / u64::from(output - 1)),
        "TPOT is the mean decode step"
    );
}
