//! Standard output that a closed pipe does not turn into a panic.
//!
//! `print!` panics when stdout's reader has gone (`fleetsim run ... | head -1`). The commands print
//! through `out!` and `outln!` instead: a write that finds the
//! pipe closed is dropped, later ones are not attempted, and the command finishes its work (results
//! folders are still written) and exits as it would have.

use std::fmt::Arguments;
use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a write found stdout's reader gone.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `args` to stdout; a closed pipe is remembered and ignored, other errors are reported once on
/// stderr as a print would have failed.
pub fn write(args: Arguments<'_>) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        CLOSED.store(true, Ordering::Relaxed);
        if e.kind() != ErrorKind::BrokenPipe {
            eprintln!("error: writing to standard output: {e}");
        }
    }
}

/// `print!` that survives a closed pipe ([`write`]).
macro_rules! out {
    ($($arg:tt)*) => { $crate::cli::stdout::write(format_args!($($arg)*)) };
}

/// `println!` that survives a closed pipe ([`write`]).
macro_rules! outln {
    () => { $crate::cli::stdout::write(format_args!("\n")) };
    ($($arg:tt)*) => {{
        $crate::cli::stdout::write(format_args!($($arg)*));
        $crate::cli::stdout::write(format_args!("\n"));
    }};
}
