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

/// Path of a shipped trace.
pub fn trace_path(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("traces")
        .join(name)
}

/// A scratch directory, removed when dropped.
pub struct TempDir(std::path::PathBuf);

impl TempDir {
    /// A fresh directory named after `tag` and the process.
    pub fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("fleetsim-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// A path inside the directory.
    pub fn path(&self, name: &str) -> std::path::PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
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
