//! A sweep's directory: `sweep.json` (what is swept), `points/NNNNNN.json` (one finished point each).
//!
//! Invariants:
//! - Every point file is written through a temporary file and a rename ([`crate::output::write_file`]), so
//!   a point file that exists is whole: a sweep killed at any moment leaves only finished points.
//! - Every manifest and point file carries the sweep's fingerprint; a file of another sweep is never
//!   resumed from or merged.
//! - A point file holds no wall-clock time or path: the same point gives the same bytes wherever it ran.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::grid::Grid;

/// A problem with a sweep directory or one of its files.
#[derive(Debug, Error)]
pub enum StoreError {
    #[error("{path}: {message}")]
    Bad { path: String, message: String },
    #[error(transparent)]
    Output(#[from] crate::output::OutputError),
}

fn bad(path: &Path, message: impl Into<String>) -> StoreError {
    StoreError::Bad {
        path: path.display().to_string(),
        message: message.into(),
    }
}

/// 64-bit FNV-1a: a hash whose value is fixed by its definition (std's hasher may change between Rust
/// releases, and fingerprints are compared across machines).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The identity of a sweep: the scenario text, the `--set` overrides, the grid and the replicas. Shards of
/// one sweep share it; anything that could change a point's numbers changes it.
pub fn fingerprint(scenario_text: &str, set: &[String], grid: &Grid, replicas: u32) -> String {
    let mut s = String::from("fleetsim sweep v1\n");
    s.push_str(env!("CARGO_PKG_VERSION"));
    s.push_str("\nscenario\n");
    s.push_str(scenario_text);
    s.push_str("\nset\n");
    for o in set {
        s.push_str(o);
        s.push('\n');
    }
    s.push_str("grid\n");
    for a in &grid.axes {
        s.push_str(&a.key);
        s.push('=');
        s.push_str(&a.values.join(","));
        s.push('\n');
    }
    s.push_str(&format!("replicas {replicas}\n"));
    format!("{:016x}", fnv1a(s.as_bytes()))
}

/// `sweep.json`: what the directory's points belong to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub fingerprint: String,
    pub scenario: String,
    pub grid: Grid,
    pub replicas: u32,
    pub points: usize,
}

/// One replica's headline metrics; `None` for a statistic of an empty set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicaResult {
    pub seed: u64,
    pub metrics: BTreeMap<String, Option<f64>>,
}

/// One finished point: its overrides and every replica's metrics.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PointResult {
    pub fingerprint: String,
    pub point: usize,
    pub overrides: Vec<String>,
    pub replicas: Vec<ReplicaResult>,
}

impl PointResult {
    /// The file's bytes (pretty JSON, newline-terminated).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut s = serde_json::to_string_pretty(self).expect("a point result serializes");
        s.push('\n');
        s.into_bytes()
    }
}

/// The folder of point files.
pub fn points_dir(dir: &Path) -> PathBuf {
    dir.join("points")
}

/// The file of point `p`.
pub fn point_path(dir: &Path, p: usize) -> PathBuf {
    points_dir(dir).join(format!("{p:06}.json"))
}

/// Reads `dir/sweep.json`, if there is one.
pub fn read_manifest(dir: &Path) -> Result<Option<Manifest>, StoreError> {
    let path = dir.join("sweep.json");
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| bad(&path, format!("not a fleetsim sweep manifest: {e}"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(bad(&path, format!("cannot read: {e}"))),
    }
}

/// Writes `dir/sweep.json`.
pub fn write_manifest(dir: &Path, m: &Manifest, inputs: &[&Path]) -> Result<(), StoreError> {
    let mut s = serde_json::to_string_pretty(m).expect("a manifest serializes");
    s.push('\n');
    crate::output::write_file(&dir.join("sweep.json"), s.as_bytes(), inputs)?;
    Ok(())
}

/// Writes one finished point, atomically.
pub fn write_point(dir: &Path, r: &PointResult) -> Result<(), StoreError> {
    crate::output::write_file(&point_path(dir, r.point), &r.to_bytes(), &[])?;
    Ok(())
}

/// The finished points in `dir/points/` that belong to the sweep `m`, by point number. Files that are not
/// point files (a temporary file left by a killed run) are ignored; a point file of another sweep, or one
/// that does not parse, is an error naming it.
pub fn read_points(dir: &Path, m: &Manifest) -> Result<BTreeMap<usize, PointResult>, StoreError> {
    let pdir = points_dir(dir);
    let mut out = BTreeMap::new();
    let entries = match std::fs::read_dir(&pdir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(bad(&pdir, format!("cannot read: {e}"))),
    };
    for entry in entries {
        let entry = entry.map_err(|e| bad(&pdir, format!("cannot read: {e}")))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".json") else {
            continue;
        };
        if stem.len() != 6 || !stem.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let path = entry.path();
        let text =
            std::fs::read_to_string(&path).map_err(|e| bad(&path, format!("cannot read: {e}")))?;
        let r: PointResult = serde_json::from_str(&text)
            .map_err(|e| bad(&path, format!("not a fleetsim sweep point: {e}")))?;
        if r.fingerprint != m.fingerprint {
            return Err(bad(
                &path,
                format!(
                    "belongs to another sweep (fingerprint {}, this sweep's is {})",
                    r.fingerprint, m.fingerprint
                ),
            ));
        }
        let expected: usize = stem.parse().expect("six digits");
        if r.point != expected || r.point >= m.points {
            return Err(bad(
                &path,
                format!(
                    "holds point {} (the sweep has points 0 to {})",
                    r.point,
                    m.points.saturating_sub(1)
                ),
            ));
        }
        if r.overrides != m.grid.overrides(r.point) {
            return Err(bad(
                &path,
                "its overrides are not those of its point in the grid",
            ));
        }
        out.insert(r.point, r);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_the_published_test_vectors() {
        // From the FNV reference (Fowler, Noll, Vo; draft-eastlake-fnv): FNV-1a 64 of "" and of "a".
        assert_eq!(fnv1a(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a(b"a"), 0xaf63dc4c8601ec8c);
    }

    #[test]
    fn the_fingerprint_changes_with_every_input() {
        let g = Grid::parse(&["a=1,2".into()]).unwrap();
        let base = fingerprint("x", &[], &g, 1);
        assert_ne!(base, fingerprint("y", &[], &g, 1));
        assert_ne!(base, fingerprint("x", &["s=1".into()], &g, 1));
        assert_ne!(base, fingerprint("x", &[], &g, 2));
        let g2 = Grid::parse(&["a=1,3".into()]).unwrap();
        assert_ne!(base, fingerprint("x", &[], &g2, 1));
        assert_eq!(base, fingerprint("x", &[], &g, 1));
    }
}
