//! A regression guard on the routing reproductions (`docs/validation-routing.md`): a short cut of each
//! experiment's configurations (seed 1) runs, and every ratio it compares is held to the value recorded
//! in `validation/routing/regression.csv`, within 3%. The recorded values are what the simulator gave
//! when they were written, not published figures and not a fit: a change that moves one must rewrite the
//! file (`FLEETSIM_BLESS=1` prints the new rows) and re-run the full comparisons behind the page.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fleetsim::scenario::Scenario;

use super::common::run;

/// Relative tolerance of a recorded ratio.
const TOLERANCE: f64 = 0.03;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("validation/routing")
}

/// The metric a ratio compares, from one run's summary.
fn metric(s: &fleetsim::metrics::Summary, name: &str) -> f64 {
    match name {
        "output_tokens_per_s" => s.throughput.output_tokens_per_s,
        // A staged run's throughput as its client reports it (inference-perf's summary).
        "client_output_tokens_per_s" => {
            s.stages
                .as_ref()
                .expect("a staged workload reports its stages")
                .output_tokens_per_s
        }
        "total_tokens_per_s" => s.throughput.input_tokens_per_s + s.throughput.output_tokens_per_s,
        "hit_rate" => s.prefix_cache.hit_rate,
        // A benchmark client's total token throughput as vllm-bench reports it: prompt and output
        // tokens over its benchmark duration.
        "bench_total_tokens_per_s" => {
            let b = s.benchmark.as_ref().expect("a benchmark reports itself");
            (s.prefix_cache.prompt_tokens as f64 + b.output_tokens_per_s * b.duration_s)
                / b.duration_s
        }
        other => panic!("regression.csv: unknown metric `{other}`"),
    }
}

#[test]
fn each_reproduction_s_short_cut_keeps_its_recorded_ratios() {
    let text = std::fs::read_to_string(root().join("regression.csv")).unwrap();
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    // (experiment, config, duration) -> summary, each run once.
    let mut runs: BTreeMap<(String, String, String), fleetsim::metrics::Summary> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut blessed = Vec::new();
    for row in reader.records() {
        let row = row.unwrap();
        let [experiment, a, b, name, duration, recorded] =
            [0, 1, 2, 3, 4, 5].map(|i| row.get(i).unwrap().to_string());
        let mut value = |config: &str| {
            let key = (experiment.clone(), config.to_string(), duration.clone());
            let summary = runs.entry(key).or_insert_with(|| {
                let path = root().join(&experiment).join(format!("{config}.toml"));
                let set = [format!("duration=\"{duration}\""), "seed=1".to_string()];
                run(&Scenario::load(&path, &set).unwrap()).0
            });
            metric(summary, &name)
        };
        let ratio = value(&a) / value(&b);
        let recorded: f64 = recorded.parse().unwrap();
        blessed.push(format!("{experiment},{a},{b},{name},{duration},{ratio:.4}"));
        if (ratio / recorded - 1.0).abs() > TOLERANCE {
            failures.push(format!(
                "{experiment} {a} / {b} ({name}, {duration}): recorded {recorded}, now {ratio:.4}"
            ));
        }
    }
    if std::env::var_os("FLEETSIM_BLESS").is_some() {
        println!(
            "experiment,a,b,metric,duration,ratio\n{}",
            blessed.join("\n")
        );
    }
    assert!(
        runs.len() >= 17,
        "every configuration of the five experiments runs"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
