//! Hot-prefix replication (`[interconnect.replication]`): copies only above the threshold, conserves
//! blocks and bytes, changes nothing when it never fires, and cures the hot-prefix death spiral.

use crate::common::scenario_path;
use fleetsim::engine::{RunOutput, Simulation};
use fleetsim::scenario::Scenario;

/// `hot-prefix-replication.toml` cut to `duration`, with `extra` overrides.
fn load(duration: &str, extra: &[&str]) -> Scenario {
    let mut o = vec![format!("duration=\"{duration}\"")];
    o.extend(extra.iter().map(|s| s.to_string()));
    Scenario::load(&scenario_path("hot-prefix-replication.toml"), &o).unwrap()
}

fn run(s: &Scenario) -> RunOutput {
    Simulation::from_scenario(s).unwrap().run(&mut |_| {})
}

/// The same scenario without its `[interconnect.replication]` table.
fn without_replication(mut s: Scenario) -> Scenario {
    s.interconnect.replication = None;
    s
}

/// The hot schema is requested at 70% of 60 requests/s = 42 requests/s. A threshold of 100
/// requests/s is never exceeded: nothing is copied, and every other number of the summary is the
/// same, to the byte, as without replication. At 2 requests/s it fires.
#[test]
fn copies_only_above_the_threshold_and_nothing_changes_below_it() {
    let below = run(&load(
        "60s",
        &["interconnect.replication.rate_threshold=100.0"],
    ));
    let r = below
        .summary
        .replication
        .clone()
        .expect("configured: reported");
    assert_eq!((r.hot_prefixes, r.copies, r.bytes_transferred), (0, 0, 0));
    let off = run(&without_replication(load("60s", &[])));
    assert!(off.summary.replication.is_none());
    let mut below_summary = below.summary;
    below_summary.replication = None;
    assert_eq!(below_summary.to_json(), off.summary.to_json());

    let above = run(&load("60s", &[]));
    let r = above.summary.replication.unwrap();
    assert_eq!(r.hot_prefixes, 1, "one schema, hot once");
    assert!(r.copies > 0, "{r:?}");
}

/// Blocks and bytes: each copy sends the schema's blocks the target lacks; bytes = blocks × 16
/// tokens × 128 KiB (Llama-3.1-8B BF16: 32 layers × 8 KV heads × 128 dims × 2 (K, V) × 2 bytes =
/// 131,072 bytes per token, TP 1). The pools' laws are checked after every step and at the end, and
/// every request completes.
#[test]
fn copies_conserve_blocks_and_bytes() {
    let s = load("45s", &[]);
    let mut sim = Simulation::from_scenario(&s).unwrap();
    sim.check_invariants_every_step(true);
    let out = sim.run(&mut |_| {});
    let r = out.summary.replication.unwrap();
    assert!(r.copies >= 1, "{r:?}");
    assert_eq!(r.bytes_transferred, r.blocks_transferred * 16 * 131_072);
    assert!(r.blocks_registered <= r.blocks_transferred, "{r:?}");
    // The schema is 4,096 tokens = 256 blocks; a target holds none of it (cold, scaled up), so a
    // copy sends them all, and at most `copies - 1` = 3 copies are needed.
    assert_eq!(r.blocks_transferred, r.copies * 256, "{r:?}");
    assert!(r.copies <= 3, "{r:?}");
    assert_eq!(r.lost_to_failure, 0);
    let q = &out.summary.requests;
    assert_eq!(q.completed, q.arrived);
}

/// The death spiral: one worker serves the first 20 s and caches the schema; prefix-only routing keeps
/// every hot request on it after the other seven start cold. Replication copies the schema to three of
/// them, so the router (which learns of the copies from KV events) spreads the hot requests.
#[test]
fn replication_cures_the_hot_prefix_death_spiral() {
    let spiral = run(&without_replication(load("120s", &[])));
    let cured = run(&load("120s", &[]));
    let share = |o: &RunOutput| {
        o.summary
            .workers
            .iter()
            .map(|w| w.share)
            .fold(0.0, f64::max)
    };
    let p95 = |o: &RunOutput| o.summary.ttft_ms.p95;
    assert!(
        share(&spiral) > 0.5,
        "the lone first holder serves most requests: {}",
        share(&spiral)
    );
    assert!(share(&cured) < 0.4, "{}", share(&cured));
    assert!(
        p95(&cured) < p95(&spiral) / 4.0,
        "p95 TTFT {} ms with copies, {} ms without",
        p95(&cured),
        p95(&spiral)
    );
    assert!(cured.summary.goodput.fraction > spiral.summary.goodput.fraction + 0.3);
}

/// With the fabric limited to NVLink within a node and the scaled-up workers on another node, no
/// holder can reach them: nothing is copied (and the run still completes).
#[test]
fn no_copy_without_a_link() {
    let s = load(
        "40s",
        &[
            "interconnect.across_nodes=false",
            "workers.0.node=\"a\"",
            "workers.1.node=\"b\"",
        ],
    );
    let out = run(&s);
    let r = out.summary.replication.unwrap();
    assert!(r.hot_prefixes >= 1);
    assert_eq!(r.copies, 0);
}
