//! Helpers shared by the integration tests.

use fleetsim::engine::Simulation;
use fleetsim::metrics::{Collector, Summary};
use fleetsim::scenario::Scenario;

/// Path of a bundled scenario.
pub fn scenario_path(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(name)
}

/// Parses scenario text with overrides; panics with the error (a test bug) if it is invalid.
pub fn scenario(text: &str, overrides: &[&str]) -> Scenario {
    let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    Scenario::parse(text, "test.toml", &o).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs a scenario to completion.
pub fn run(s: &Scenario) -> (Summary, Collector) {
    let out = Simulation::from_scenario(s).unwrap().run(&mut |_| {});
    (out.summary, out.collector)
}

/// One worker serving identical requests: the base of the theory checks.
pub const SINGLE_WORKER: &str = r#"
name = "single"
seed = 1
duration = "1h"

[[workers]]
count = 1
gpu = "h100"
model = "llama-3.1-8b"
enable_prefix_caching = false

[workload]
kind = "poisson"
rate = 1.0
prompt = { dist = "fixed", tokens = 512 }
output = { dist = "fixed", tokens = 1 }
"#;
