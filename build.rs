//! Records the git commit fleetsim is built from (`FLEETSIM_GIT_COMMIT`, for `run_info.json`): the output of
//! `git rev-parse HEAD` when git and a repository are there, else `unknown`. Never fails the build.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let commit = if Path::new(".git").exists() {
        git(&["rev-parse", "HEAD"])
    } else {
        None
    };
    // Rebuild when HEAD moves (a commit, a checkout); `.git` may be a file (a worktree), so ask git where
    // the real directory is.
    if commit.is_some()
        && let Some(dir) = git(&["rev-parse", "--git-dir"])
    {
        for f in ["HEAD", "logs/HEAD"] {
            let p = Path::new(&dir).join(f);
            if p.exists() {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
    }
    println!(
        "cargo:rustc-env=FLEETSIM_GIT_COMMIT={}",
        commit.as_deref().unwrap_or("unknown")
    );
}
