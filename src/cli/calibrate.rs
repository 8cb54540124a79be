//! `fleetsim calibrate`: refit the built-in profiles, or fit one profile to a user's measurements.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::calibration;
use crate::calibration::measurements::Measurements;
use crate::hardware::ProfileKey;

/// `fleetsim calibrate`: fit, then write (or, with `check`, compare) the profiles and the report.
pub(super) fn calibrate(data: &Path, profiles: &Path, report: Option<&Path>, check: bool) -> Result<()> {
    let c = calibration::calibrate(data)?;
    let mut files: Vec<(PathBuf, String)> = c
        .profiles
        .iter()
        .map(|p| {
            let name = format!("{}.toml", p.profile.key().file_stem());
            (profiles.join(name), calibration::profile_file(&p.profile))
        })
        .collect();
    if let Some(r) = report {
        files.push((r.to_path_buf(), calibration::report::markdown(&c)));
    }
    let mut stale = Vec::new();
    for (path, text) in &files {
        if check {
            if std::fs::read_to_string(path).ok().as_deref() != Some(text.as_str()) {
                stale.push(path.display().to_string());
            }
        } else {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
            }
            std::fs::write(path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    print!("{}", calibration::report::profiles_table(&c));
    let (median, max) = c.published_errors();
    println!(
        "published Splitwise points (held out of the fit): {}, median error {:.1}%, max {:.1}%",
        c.published.len(),
        median * 100.0,
        max * 100.0
    );
    for r in &c.external {
        println!(
            "published {}: {} predicted {:.1} ({:+.1}%)",
            r.point.label(),
            r.point.published,
            r.predicted,
            r.error() * 100.0
        );
    }
    let (median, max) = c.external_errors();
    println!(
        "published end-to-end points (in none of the data): {}, median error {:.1}%, max {:.1}%",
        c.external.len(),
        median * 100.0,
        max * 100.0
    );
    if !stale.is_empty() {
        anyhow::bail!(
            "out of date (re-run `fleetsim calibrate --report docs/calibration.md`): {}",
            stale.join(", ")
        );
    }
    Ok(())
}

/// `fleetsim calibrate --measurements`: fit one profile to a user's measured steps, print every step's
/// error, write the profile file.
pub(super) fn calibrate_measurements(csv: &Path, key: ProfileKey, out: &Path) -> Result<()> {
    let fit = Measurements::read(csv, key)?.fit();
    print!("{}", fit.table());
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(out, fit.profile_file())
        .with_context(|| format!("cannot write {}", out.display()))?;
    eprintln!(
        "wrote {}: name it in a scenario's worker group (profile = \"...\") or pass it to `fleetsim estimate \
         --profile`",
        out.display()
    );
    Ok(())
}

