//! The `fleetsim` binary: parse the command line, run it, print the error chain.

use clap::Parser;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let cli = fleetsim::cli::Cli::parse();
    if let Err(e) = fleetsim::cli::main_with(cli) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
