//! Prefill/decode disaggregation: TTFT of a lone request composed by hand, conservation of requests and
//! tokens against the aggregated fleet, and failures of either side during a hand-off.

use crate::common::{run, scenario, scenario_path};
use fleetsim::engine::Simulation;
use fleetsim::hardware::StepShape;
use fleetsim::scenario::Scenario;

/// One prefill and one decode H100 serving one request of 1,001 prompt tokens and 5 output tokens.
const PAIR: &str = r#"
name = "pair"
seed = 3
duration = "10s"
max_requests = 1

[[workers]]
count = 2
gpu = "h100"
model = "llama-3.1-8b"
prefill_workers = 1
enable_prefix_caching = false

[workload]
kind = "poisson"
rate = 1.0
prompt = { dist = "fixed", tokens = 1001 }
output = { dist = "fixed", tokens = 5 }
"#;

/// KV bytes of one Llama-3.1-8B token in BF16: K and V × 32 layers × 8 KV heads × 128 dims × 2 bytes.
const KV_BYTES_PER_TOKEN: f64 = 2.0 * 32.0 * 8.0 * 128.0 * 2.0;

fn step(s: &Scenario, tokens: u64, context: u64) -> f64 {
    let mut shape = StepShape::default();
    shape.add(tokens, context);
    s.workers[0].perf().step_time(&shape).as_secs_f64()
}

/// TTFT on an idle pair = prefill of all prompt tokens but the last on the prefill worker + the KV
/// transfer + one step of the last token (a decode step) on the decode worker.
#[test]
fn ttft_on_an_idle_pair_is_prefill_plus_transfer_plus_first_decode_step() {
    // 1,000 tokens handed off fill ceil(1000 / 16) = 63 blocks of 16 tokens.
    let bytes = 63.0 * 16.0 * KV_BYTES_PER_TOKEN;
    for (node, bandwidth, latency) in [
        // Same node: NVLink, the H100's 900 GB/s bidirectional = 450 GB/s per direction, 10 µs.
        ("node = \"n\"", 450e9, 10e-6),
        // No node label: each worker its own node, RDMA at the default 50 GB/s per GPU, 25 µs.
        ("", 50e9, 25e-6),
    ] {
        let s = scenario(
            &PAIR.replace(
                "prefill_workers = 1",
                &format!("prefill_workers = 1\n{node}"),
            ),
            &[],
        );
        let expected = step(&s, 1000, 0) + (latency + bytes / bandwidth) + step(&s, 1, 1000);
        let (summary, _) = run(&s);
        assert_eq!(summary.requests.completed, 1);
        let ttft = summary.ttft_ms.mean / 1e3;
        assert!(
            (ttft - expected).abs() < 1e-8,
            "{node}: TTFT {ttft} s, expected {expected} s"
        );
        let d = summary
            .disaggregation
            .as_ref()
            .expect("a disaggregated run");
        assert_eq!(d.handoffs, 1);
        assert_eq!(d.blocks_transferred, 63);
        assert_eq!(d.bytes_transferred, bytes as u64);
        // Every later token is a decode step on the decode worker alone.
        let tpot = summary.tpot_ms.mean / 1e3;
        let decode: f64 = (1..=4).map(|i| step(&s, 1, 1000 + i)).sum::<f64>() / 4.0;
        assert!(
            (tpot - decode).abs() < 1e-8,
            "TPOT {tpot} s, decode steps {decode} s"
        );
    }
    // Aggregated, the same request's TTFT is one prefill step of all 1,001 tokens.
    let s = scenario(PAIR, &["workers[0].prefill_workers=0"]);
    let (summary, _) = run(&s);
    assert!(summary.disaggregation.is_none());
    let ttft = summary.ttft_ms.mean / 1e3;
    assert!(
        (ttft - step(&s, 1001, 0)).abs() < 1e-8,
        "aggregated TTFT {ttft}"
    );
}

/// The bundled scenario, cut short.
fn bundled(split: u32, extra: &[&str]) -> Scenario {
    let mut o = vec![
        "max_requests=400".to_string(),
        format!("workers[0].prefill_workers={split}"),
    ];
    o.extend(extra.iter().map(|s| s.to_string()));
    Scenario::load(&scenario_path("disaggregation.toml"), &o).unwrap()
}

/// Aggregated, 1P:1D and 1P:3D serve the same requests: every one completes, the output tokens are the
/// same, and every prompt token is computed exactly once (no prefix reuse in this workload), the last
/// one on the decode worker.
#[test]
fn disaggregation_conserves_requests_and_tokens() {
    let (agg, agg_c) = run(&bundled(0, &[]));
    assert!(agg.workers.iter().all(|w| w.mfu.is_some_and(|m| m > 0.0)));
    for split in [2, 1] {
        let (s, c) = run(&bundled(split, &[]));
        assert_eq!(s.requests.arrived, agg.requests.arrived);
        assert_eq!(s.requests.completed, s.requests.arrived, "split {split}");
        assert_eq!(c.output_tokens, agg_c.output_tokens, "split {split}");
        assert_eq!(c.prompt_tokens, agg_c.prompt_tokens, "split {split}");
        assert_eq!(
            c.prefill_tokens,
            c.prompt_tokens - c.cached_tokens,
            "split {split}"
        );
        assert_eq!(
            agg_c.prefill_tokens,
            agg_c.prompt_tokens - agg_c.cached_tokens
        );
        let d = s.disaggregation.as_ref().unwrap();
        assert_eq!(
            d.handoffs, s.requests.completed,
            "split {split}: one hand-off each"
        );
        assert_eq!((d.prefill_workers, d.decode_workers), (split, 4 - split));
        // Bytes moved = blocks moved × bytes per block.
        assert_eq!(
            d.bytes_transferred,
            (d.blocks_transferred as f64 * 16.0 * KV_BYTES_PER_TOKEN) as u64
        );
        // Requests finish on decode workers only (so no worker's MFU can be told from them).
        for w in &s.workers {
            assert_eq!(w.mfu, None, "split {split}, worker {}", w.id);
            let prefill = w.role.as_deref() == Some("prefill");
            assert_eq!(prefill, w.id < split as usize);
            if prefill {
                assert_eq!(w.requests, 0, "worker {} is a prefill worker", w.id);
            }
        }
    }
}

/// Crashes of a prefill and of a decode worker while slow RDMA transfers (2 GB/s: about 0.2 s per
/// hand-off) are in flight: hand-offs are lost, and their requests retried from scratch, with the
/// lost prefill recomputed for cause `failure`; none is dropped.
#[test]
fn a_crash_of_either_side_mid_hand_off_loses_no_request() {
    // Each worker on a node of its own (no label), two prefill and two decode workers.
    let text = std::fs::read_to_string(scenario_path("disaggregation.toml"))
        .unwrap()
        .replace("node = \"node-a\"\n", "")
        + r#"
[gateway]
in_flight = "retry"

[[faults]]
kind = "crash"
worker = 0
at = "20s"
restart_after = "5s"

[[faults]]
kind = "crash"
worker = 3
at = "40s"
restart_after = "5s"
"#;
    let s = scenario(
        &text,
        &[
            "max_requests=400",
            "workers[0].prefill_workers=2",
            "interconnect.rdma_gb_per_s=2.0",
            "workload.rate=4.0",
        ],
    );
    let out = Simulation::from_scenario(&s).unwrap().run(&mut |_| {});
    let sum = &out.summary;
    assert_eq!(sum.requests.arrived, 400);
    assert_eq!(
        sum.requests.completed + sum.requests.failed + sum.requests.rejected,
        400
    );
    let d = sum.disaggregation.as_ref().unwrap();
    assert!(
        d.lost_in_handoff >= 2,
        "lost in hand-off: {}",
        d.lost_in_handoff
    );
    // Every request lost in a hand-off was retried (a request may be lost twice, once per crash).
    assert!(
        sum.requests.retried > 0 && sum.requests.failed == 0,
        "lost {}: {:?}",
        d.lost_in_handoff,
        sum.requests
    );
    let failure = fleetsim::metrics::record::RecomputeCause::Failure as usize;
    assert!(out.collector.recompute.tokens[failure] > 0);
}
