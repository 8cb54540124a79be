//! The `fleetsim` binary: parse the command line, run it, print the error chain.

use clap::Parser;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let cli = fleetsim::cli::Cli::parse_from(fleetsim::cli::negative_values(std::env::args_os()));
    if let Err(e) = fleetsim::cli::main_with(cli) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
