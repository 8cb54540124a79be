//! Parameter sweeps: the cartesian product of scenario overrides, run in parallel, one atomic result file
//! per point, resumable, shardable across machines and mergeable.
//!
//! - [`grid`]: `--grid KEY=V1,V2,...` axes, grid order, shards.
//! - [`store`]: the sweep directory: `sweep.json` (fingerprint and grid), `points/NNNNNN.json`.
//! - [`table`]: `sweep.parquet`, `sweep.csv`, `sweep.md`; [`plot`]: the SVG plots.
//!
//! Invariants: a point's result depends only on the scenario, the overrides and the replica seeds, never
//! on the shard, the thread count or the order points finish in; the final files are a function of the
//! point files alone. So a sharded-and-merged or a killed-and-resumed sweep writes the same bytes as one
//! that ran through.

pub mod grid;
pub mod plot;
pub mod store;
pub mod table;

use crate::engine::Simulation;
use crate::scenario::Scenario;
use store::{Manifest, PointResult, ReplicaResult};

/// The seed of replica `r` of a point whose scenario seed is `base`: the replication seed
/// ([`crate::confidence::replication_seed`]), so replica 0 is the scenario itself, replicas of different
/// points share seeds (common random numbers) and a sweep's replica r is `run --replications`'s
/// replication r.
pub fn replica_seed(base: u64, r: u32) -> u64 {
    crate::confidence::replication_seed(base, r)
}

/// Runs point `point` (its scenario already has the point's overrides) `replicas` times.
pub fn run_point(
    fingerprint: &str,
    point: usize,
    overrides: Vec<String>,
    scenario: &Scenario,
    replicas: u32,
) -> Result<PointResult, String> {
    let mut out = Vec::with_capacity(replicas as usize);
    for r in 0..replicas {
        let mut s = scenario.clone();
        s.seed = replica_seed(scenario.seed, r);
        let run = Simulation::from_scenario(&s)?.try_run(&mut |_| {})?;
        out.push(ReplicaResult {
            seed: s.seed,
            metrics: table::headline(&run.summary)
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        });
    }
    Ok(PointResult {
        fingerprint: fingerprint.to_string(),
        point,
        overrides,
        replicas: out,
    })
}

/// The final files of a finished sweep (every point present, in grid order): `sweep.parquet`,
/// `sweep.csv`, `sweep.md` and the plots.
pub fn result_files(
    m: &Manifest,
    points: &[PointResult],
) -> Result<Vec<(String, Vec<u8>)>, String> {
    debug_assert!(points.iter().enumerate().all(|(i, p)| p.point == i));
    let spread = m.replicas > 1;
    let rows = table::rows(&m.grid, points);
    let parquet = table::to_parquet(&m.grid, &rows, spread)
        .map_err(|e| format!("cannot write sweep.parquet: {e}"))?;
    let mut files = vec![
        ("sweep.parquet".to_string(), parquet),
        (
            "sweep.csv".to_string(),
            table::to_csv(&m.grid, &rows, spread),
        ),
        (
            "sweep.md".to_string(),
            table::to_markdown(&m.scenario, &m.grid, &rows, spread).into_bytes(),
        ),
    ];
    files.extend(plot::plots(&m.scenario, &m.grid, &rows)?);
    Ok(files)
}
