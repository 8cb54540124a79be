//! Safe output: every file fleetsim writes goes through here.
//!
//! Invariants:
//! - An output path that resolves to one of the command's inputs (the same path spelt differently, an
//!   absolute path, a symlink, a hard link) is refused before anything is opened for writing.
//! - A file is written to a temporary file beside its destination and renamed over it only once it is
//!   complete, so an interrupted or failed run leaves either the old file or the whole new one, never a
//!   truncated one.
//! - A results directory is created and probed for writing before any simulation starts
//!   ([`prepare_dir`]), so a long run cannot lose its results to a typo in `--out`.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use thiserror::Error;

/// A destination that cannot or must not be written.
#[derive(Debug, Error)]
pub enum OutputError {
    /// The destination is one of the command's inputs.
    #[error(
        "{dest} is the input file {input}: refusing to overwrite an input; choose another output"
    )]
    IsInput { dest: String, input: String },
    /// The destination is an existing directory where a file is expected.
    #[error("{0} is a directory; give a file name")]
    IsDirectory(String),
    /// The destination is an existing file where a directory is expected.
    #[error("{0} exists and is not a directory")]
    NotDirectory(String),
    /// The results folder holds files fleetsim did not write.
    #[error(
        "{0} is not empty and was not made by fleetsim: refusing to write results into it (they could \
         replace your own files); choose a new or empty folder"
    )]
    ForeignDirectory(String),
    /// The results folder holds an earlier run's results.
    #[error(
        "{0} holds the results of an earlier fleetsim run: pass --force to replace them, or choose \
         another folder"
    )]
    EarlierResults(String),
    /// The file system refused.
    #[error("cannot {action} {path}: {error}")]
    Io {
        action: &'static str,
        path: String,
        /// Not a `source`: the message already holds it, and error chains would print it twice.
        error: std::io::Error,
    },
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> OutputError {
    let path = path.display().to_string();
    move |error| OutputError::Io {
        action,
        path,
        error,
    }
}

/// `path` made absolute with symlinks resolved; for a path that does not exist yet, its nearest existing
/// ancestor is resolved and the rest appended.
pub fn resolve(path: &Path) -> PathBuf {
    if let Ok(p) = std::fs::canonicalize(path) {
        return p;
    }
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let mut rest = Vec::new();
    let mut cur = abs.as_path();
    loop {
        if let Ok(base) = std::fs::canonicalize(cur) {
            let mut out = base;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (cur.parent(), cur.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                cur = parent;
            }
            _ => return abs,
        }
    }
}

/// Whether `a` and `b` name the same file: the same resolved path, or (on Unix) the same device and
/// inode, which also catches hard links.
pub fn same_file(a: &Path, b: &Path) -> bool {
    if resolve(a) == resolve(b) {
        return true;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
            return x.dev() == y.dev() && x.ino() == y.ino();
        }
    }
    false
}

/// Refuses `dest` if it is one of `inputs` or an existing directory.
pub fn check_file(dest: &Path, inputs: &[&Path]) -> Result<(), OutputError> {
    if let Some(input) = inputs.iter().find(|i| same_file(dest, i)) {
        return Err(OutputError::IsInput {
            dest: dest.display().to_string(),
            input: input.display().to_string(),
        });
    }
    if dest.is_dir() {
        return Err(OutputError::IsDirectory(dest.display().to_string()));
    }
    Ok(())
}

/// A file being written: bytes go to a temporary file beside `dest`, which [`AtomicFile::commit`] renames
/// over `dest`. Dropped without a commit, the temporary file is removed and `dest` is untouched.
#[derive(Debug)]
pub struct AtomicFile {
    dest: PathBuf,
    tmp: PathBuf,
    file: Option<File>,
}

impl AtomicFile {
    /// Starts writing `dest` (after [`check_file`] against `inputs`), creating its directory if needed.
    pub fn create(dest: &Path, inputs: &[&Path]) -> Result<AtomicFile, OutputError> {
        check_file(dest, inputs)?;
        let dir = match dest.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&dir).map_err(io("create directory", &dir))?;
        let name = dest
            .file_name()
            .ok_or_else(|| OutputError::IsDirectory(dest.display().to_string()))?;
        let tmp = dir.join(format!(
            ".{}.fleetsim-tmp-{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        // Named by its destination: the temporary name means nothing to the user.
        let file = File::create(&tmp).map_err(io("write", dest))?;
        Ok(AtomicFile {
            dest: dest.to_path_buf(),
            tmp,
            file: Some(file),
        })
    }

    /// The open temporary file.
    pub fn file(&mut self) -> &mut File {
        self.file
            .as_mut()
            .expect("an uncommitted AtomicFile has a file")
    }

    /// Flushes the temporary file and renames it over the destination.
    pub fn commit(mut self) -> Result<(), OutputError> {
        let file = self.file.take().expect("commit once");
        file.sync_all().map_err(io("write", &self.tmp))?;
        drop(file);
        std::fs::rename(&self.tmp, &self.dest).map_err(io("write", &self.dest))
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.file.is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file().write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file().flush()
    }
}

/// Writes `bytes` to `dest` through an [`AtomicFile`].
pub fn write_file(dest: &Path, bytes: &[u8], inputs: &[&Path]) -> Result<(), OutputError> {
    let mut f = AtomicFile::create(dest, inputs)?;
    f.file().write_all(bytes).map_err(io("write", dest))?;
    f.commit()
}

/// Creates the results directory `dir` (and its parents) and checks that files can be created in it;
/// `inputs` must not be `dir`. Call before simulating.
pub fn prepare_dir(dir: &Path, inputs: &[&Path]) -> Result<(), OutputError> {
    if let Some(input) = inputs.iter().find(|i| same_file(dir, i)) {
        return Err(OutputError::IsInput {
            dest: dir.display().to_string(),
            input: input.display().to_string(),
        });
    }
    if dir.exists() && !dir.is_dir() {
        return Err(OutputError::NotDirectory(dir.display().to_string()));
    }
    std::fs::create_dir_all(dir).map_err(io("create results directory", dir))?;
    let probe = dir.join(format!(".fleetsim-probe-{}", std::process::id()));
    File::create(&probe).map_err(io("write into", dir))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// The file that marks a folder as fleetsim's results ([`prepare_results_dir`]).
pub const RESULTS_MARK: &str = ".fleetsim-results";

/// Whether `dir` holds results a fleetsim run wrote: its mark, or (from versions before the mark)
/// `run_info.json` beside `summary.json`.
fn made_by_fleetsim(dir: &Path) -> bool {
    dir.join(RESULTS_MARK).is_file()
        || (dir.join("run_info.json").is_file() && dir.join("summary.json").is_file())
}

/// [`prepare_dir`] for the results folder of a run (`--out`), which must not replace anything
/// silently: a new or empty folder is taken (and marked as fleetsim's); a folder of an earlier run
/// only with `replace` (`--force`); a non-empty folder fleetsim did not make, never.
pub fn prepare_results_dir(dir: &Path, inputs: &[&Path], replace: bool) -> Result<(), OutputError> {
    if dir.is_dir() {
        let empty = std::fs::read_dir(dir)
            .map_err(io("read", dir))?
            .next()
            .is_none();
        if !empty {
            if !made_by_fleetsim(dir) {
                return Err(OutputError::ForeignDirectory(dir.display().to_string()));
            }
            if !replace {
                return Err(OutputError::EarlierResults(dir.display().to_string()));
            }
        }
    }
    prepare_dir(dir, inputs)?;
    write_file(
        &dir.join(RESULTS_MARK),
        b"This folder holds fleetsim results; fleetsim replaces them only when asked (--force).\n",
        inputs,
    )
}

/// Writes `files` (name within `dir`, contents) into `dir`: every file to a temporary file first, then
/// all renamed into place, so a failure while writing leaves the previous results as they were.
/// `inputs` must not be among the destinations.
pub fn write_dir(
    dir: &Path,
    files: &[(String, Vec<u8>)],
    inputs: &[&Path],
) -> Result<(), OutputError> {
    prepare_dir(dir, inputs)?;
    let mut staged = Vec::with_capacity(files.len());
    for (name, bytes) in files {
        let dest = dir.join(name);
        let mut f = AtomicFile::create(&dest, inputs)?;
        f.file().write_all(bytes).map_err(io("write", &dest))?;
        staged.push(f);
    }
    for f in staged {
        f.commit()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fleetsim-output-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn an_input_under_another_name_is_refused_and_left_alone() {
        let d = tmpdir("same");
        let input = d.join("x.jsonl");
        std::fs::write(&input, b"data").unwrap();
        let dotted = d.join(".").join("x.jsonl");
        let via_parent = d.join("sub").join("..").join("x.jsonl");
        std::fs::create_dir_all(d.join("sub")).unwrap();
        for dest in [&input, &dotted, &via_parent] {
            let e = write_file(dest, b"", &[&input]).unwrap_err();
            assert!(matches!(e, OutputError::IsInput { .. }), "{e}");
        }
        #[cfg(unix)]
        {
            let link = d.join("link.jsonl");
            std::os::unix::fs::symlink(&input, &link).unwrap();
            assert!(write_file(&link, b"", &[&input]).is_err());
            let hard = d.join("hard.jsonl");
            std::fs::hard_link(&input, &hard).unwrap();
            assert!(write_file(&hard, b"", &[&input]).is_err());
        }
        assert_eq!(std::fs::read(&input).unwrap(), b"data");
    }

    #[test]
    fn an_uncommitted_file_leaves_the_old_contents() {
        let d = tmpdir("atomic");
        let dest = d.join("out.txt");
        std::fs::write(&dest, b"old").unwrap();
        {
            let mut f = AtomicFile::create(&dest, &[]).unwrap();
            f.write_all(b"half").unwrap();
        }
        assert_eq!(std::fs::read(&dest).unwrap(), b"old");
        assert_eq!(
            std::fs::read_dir(&d).unwrap().count(),
            1,
            "temporary file removed"
        );
        write_file(&dest, b"new", &[]).unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"new");
    }

    #[test]
    fn results_never_replace_anything_silently() {
        let d = tmpdir("results");
        // A new folder is taken and marked; a second run needs `replace`.
        let out = d.join("res");
        prepare_results_dir(&out, &[], false).unwrap();
        assert!(out.join(RESULTS_MARK).is_file());
        let e = prepare_results_dir(&out, &[], false).unwrap_err();
        assert!(matches!(e, OutputError::EarlierResults(_)), "{e}");
        assert!(e.to_string().contains("--force"), "{e}");
        prepare_results_dir(&out, &[], true).unwrap();
        // An empty folder is fine; a folder of the user's own files never is, --force or not.
        let empty = d.join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        prepare_results_dir(&empty, &[], false).unwrap();
        let mine = d.join("mine");
        std::fs::create_dir_all(&mine).unwrap();
        std::fs::write(mine.join("summary.json"), b"my own").unwrap();
        for replace in [false, true] {
            let e = prepare_results_dir(&mine, &[], replace).unwrap_err();
            assert!(matches!(e, OutputError::ForeignDirectory(_)), "{e}");
        }
        assert_eq!(std::fs::read(mine.join("summary.json")).unwrap(), b"my own");
    }

    #[test]
    fn a_results_directory_that_is_a_file_is_refused() {
        let d = tmpdir("dir");
        let f = d.join("file");
        std::fs::write(&f, b"x").unwrap();
        assert!(matches!(
            prepare_dir(&f, &[]),
            Err(OutputError::NotDirectory(_))
        ));
        write_dir(
            &d.join("new/deeper"),
            &[("a.json".into(), b"{}".to_vec())],
            &[],
        )
        .unwrap();
        assert_eq!(std::fs::read(d.join("new/deeper/a.json")).unwrap(), b"{}");
    }
}
