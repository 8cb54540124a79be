//! `fleetsim merge`: the shards of one sweep combined into the sweep's final files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use crate::sweep::store::{self, Manifest, PointResult};

pub(super) fn merge(out: &Path, shards: &[PathBuf]) -> Result<()> {
    if shards.is_empty() {
        bail!("give the shard directories to merge");
    }
    let mut manifest: Option<(Manifest, &Path)> = None;
    let mut points: BTreeMap<usize, (PointResult, &Path)> = BTreeMap::new();
    for dir in shards {
        let Some(m) = store::read_manifest(dir)? else {
            bail!("{}: no sweep.json: not a sweep directory", dir.display());
        };
        if let Some((first, first_dir)) = &manifest
            && first.fingerprint != m.fingerprint
        {
            bail!(
                "{} and {} are shards of different sweeps (fingerprints {} and {}: the scenario, --set, --grid or --replicas differ); nothing written",
                first_dir.display(),
                dir.display(),
                first.fingerprint,
                m.fingerprint
            );
        }
        for (p, r) in store::read_points(dir, &m)? {
            match points.get(&p) {
                Some((prev, prev_dir)) if *prev != r => bail!(
                    "point {p} differs between {} and {}; nothing written",
                    prev_dir.display(),
                    dir.display()
                ),
                _ => {
                    points.insert(p, (r, dir.as_path()));
                }
            }
        }
        manifest.get_or_insert((m, dir.as_path()));
    }
    let (m, _) = manifest.expect("at least one shard");
    let missing: Vec<usize> = (0..m.points).filter(|p| !points.contains_key(p)).collect();
    if !missing.is_empty() {
        bail!(
            "{} of {} point(s) are in none of the shards (first: {:?}): run the missing shards (or resume them) first; nothing written",
            missing.len(),
            m.points,
            &missing[..missing.len().min(10)]
        );
    }
    if let Some(existing) = store::read_manifest(out)?
        && existing.fingerprint != m.fingerprint
    {
        bail!(
            "{} holds another sweep (fingerprint {}): choose another --out; nothing written",
            out.display(),
            existing.fingerprint
        );
    }
    crate::output::prepare_dir(out, &[])?;
    store::write_manifest(out, &m, &[])?;
    crate::output::prepare_dir(&store::points_dir(out), &[])?;
    for (r, _) in points.values() {
        store::write_point(out, r)?;
    }
    super::sweep::finish(out, &m, &[])
}
