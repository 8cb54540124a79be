//! The data path reads one way: workload -> gateway -> worker -> metrics -> report. The metrics layer
//! judges and summarises requests without knowing how a scenario is written or how a router chose: no
//! file under `src/metrics/` names the scenario, routing, gateway or engine modules (test helpers
//! included: a test that needs a record builds it from metrics' own types).

use std::path::Path;

#[test]
fn metrics_import_no_scenario_routing_gateway_or_engine_types() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/metrics");
    let upstream = [
        "crate::scenario",
        "crate::routing",
        "crate::gateway",
        "crate::engine",
    ];
    let mut found = Vec::new();
    let mut files = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        files += 1;
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue; // prose may name the layers it serves
            }
            for module in upstream {
                if code.contains(module) {
                    found.push(format!("{}:{}: {}", path.display(), i + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        files >= 10,
        "read only {files} files under {}",
        dir.display()
    );
    assert!(
        found.is_empty(),
        "metrics reach up the data path:\n{}",
        found.join("\n")
    );
}
