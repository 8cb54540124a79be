//! `fleetsim report`: rebuild a results folder's plots and page from what it saved, or compare several
//! folders (runs from different days or machines) on one page.

use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::output;
use crate::report::{self, folder, plots};

pub(super) fn report(dirs: &[PathBuf], out: Option<&Path>) -> Result<()> {
    let runs = dirs
        .iter()
        .map(|d| {
            if !d.join("summary.json").exists() && d.join("comparison.json").exists() {
                bail!(
                    "{}: a `compare` folder (comparison.json, no summary.json): give its policy folders, e.g. {}",
                    d.display(),
                    d.join("POLICY").display()
                );
            }
            Ok(folder::read(d)?)
        })
        .collect::<Result<Vec<_>>>()?;
    match (runs.as_slice(), out) {
        ([], _) => bail!("give at least one results folder"),
        ([run], out) => {
            let dest = out.unwrap_or(&run.dir);
            let files = report::page_files(&run.summary, &run.plots)?;
            report::write_files(dest, &files)?;
            outln!(
                "report written to {} ({} plots)",
                dest.join("report.html").display(),
                files.len() - 1
            );
        }
        (_, None) => bail!(
            "several folders make one comparison page: give --out DIR for it (the folders are not changed)"
        ),
        (runs, Some(out)) => {
            output::prepare_dir(out, &[])?;
            let base = out
                .canonicalize()
                .with_context(|| format!("cannot resolve {}", out.display()))?;
            let labels: Vec<String> = runs.iter().map(|r| r.dir.display().to_string()).collect();
            let lines: Vec<(String, &plots::RunPlots)> = labels
                .iter()
                .cloned()
                .zip(runs.iter().map(|r| &r.plots))
                .collect();
            let title = comparison_title(runs.iter().map(|r| r.summary.scenario.as_str()));
            let svgs = plots::comparison::files(&title, &lines).map_err(anyhow::Error::msg)?;
            let mut rows = Vec::with_capacity(runs.len());
            for r in runs {
                let target = r
                    .dir
                    .canonicalize()
                    .with_context(|| format!("cannot resolve {}", r.dir.display()))?;
                rows.push((&r.summary, Some(relative(&base, &target))));
            }
            let page = report::html::comparison_page(&title, &rows, &svgs);
            let mut files = vec![("report.html".to_string(), page.into_bytes())];
            files.extend(svgs);
            report::write_files(out, &files)?;
            outln!(
                "comparison of {} runs written to {}",
                runs.len(),
                out.join("report.html").display()
            );
        }
    }
    Ok(())
}

/// The scenarios compared: one name, or the distinct names joined with " vs ".
fn comparison_title<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let mut distinct: Vec<&str> = Vec::new();
    for n in names {
        if !distinct.contains(&n) {
            distinct.push(n);
        }
    }
    distinct.join(" vs ")
}

/// `to` relative to the directory `from` (both absolute), with `/` separators, for a link.
fn relative(from: &Path, to: &Path) -> String {
    let a: Vec<Component> = from.components().collect();
    let b: Vec<Component> = to.components().collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut parts: Vec<String> = vec!["..".to_string(); a.len() - common];
    parts.extend(
        b[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_links_climb_out_of_the_comparison_folder() {
        assert_eq!(relative(Path::new("/r/cmp"), Path::new("/r/a/x")), "../a/x");
        assert_eq!(relative(Path::new("/r"), Path::new("/r/a")), "a");
        assert_eq!(relative(Path::new("/r/a"), Path::new("/r/a")), ".");
    }

    #[test]
    fn the_title_names_each_scenario_once() {
        assert_eq!(comparison_title(["a", "b", "a"].into_iter()), "a vs b");
    }
}
