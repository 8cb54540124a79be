//! `fleetsim calibrate`: refit the built-in profiles, or fit one profile to a user's measurements.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::calibration;
use crate::calibration::measurements::Measurements;
use crate::hardware::ProfileKey;
use crate::output::{self, resolve};

/// `fleetsim calibrate`: fit, then print; with `write`, write the profiles and the report; with `check`,
/// compare them with the files on disk instead.
pub(super) fn calibrate(
    data: &Path,
    profiles: &Path,
    report: Option<&Path>,
    check: bool,
    write: bool,
) -> Result<()> {
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
    if check {
        for (path, text) in &files {
            if std::fs::read_to_string(path).ok().as_deref() != Some(text.as_str()) {
                stale.push(path.display().to_string());
            }
        }
    } else if write {
        // The data directory is the fit's input: nothing is written into it.
        for (path, text) in &files {
            if resolve(path).starts_with(resolve(data)) {
                anyhow::bail!(
                    "{} is inside the data directory {}: refusing to write into the fit's input",
                    path.display(),
                    data.display()
                );
            }
            output::write_file(path, text.as_bytes(), &[])?;
        }
    }
    out!("{}", calibration::report::profiles_table(&c));
    let (median, max) = c.published_errors();
    outln!(
        "published Splitwise points (held out of the fit): {}, median error {:.1}%, max {:.1}%",
        c.published.len(),
        median * 100.0,
        max * 100.0
    );
    for r in &c.external {
        outln!(
            "published {}: {} predicted {:.1} ({:+.1}%)",
            r.point.label(),
            r.point.published,
            r.predicted,
            r.error() * 100.0
        );
    }
    let (median, max) = c.external_errors();
    outln!(
        "published end-to-end points (in none of the data): {}, median error {:.1}%, max {:.1}%",
        c.external.len(),
        median * 100.0,
        max * 100.0
    );
    if !stale.is_empty() {
        anyhow::bail!(
            "out of date (re-run `fleetsim calibrate --write --report docs/calibration.md`): {}",
            stale.join(", ")
        );
    }
    if write {
        eprintln!(
            "wrote {} profiles into {}{}",
            c.profiles.len(),
            profiles.display(),
            report.map_or(String::new(), |r| format!(
                " and the report {}",
                r.display()
            ))
        );
    } else if !check {
        eprintln!(
            "nothing written: pass --write to update {}{}",
            profiles.display(),
            report.map_or(String::new(), |r| format!(" and {}", r.display()))
        );
    }
    Ok(())
}

/// `fleetsim calibrate --measurements`: fit one profile to a user's measured steps, print every step's
/// error, write the profile file.
pub(super) fn calibrate_measurements(csv: &Path, key: ProfileKey, out: &Path) -> Result<()> {
    crate::hardware::check_precision(key.gpu, key.precision).map_err(anyhow::Error::msg)?;
    output::check_file(out, &[csv])?;
    let fit = Measurements::read(csv, key)?.fit();
    out!("{}", fit.table());
    fit.check()?;
    output::write_file(out, fit.profile_file().as_bytes(), &[csv])?;
    eprintln!(
        "wrote {}: name it in a scenario's worker group (profile = \"...\") or pass it to `fleetsim estimate \
         --profile`",
        out.display()
    );
    Ok(())
}
