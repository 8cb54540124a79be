//! fleetsim's integration tests: one binary, one module per concern.

mod cli;
mod common;
mod determinism;
mod golden;
mod invariants;
mod prefix_cache;
mod queueing;
mod routing;
mod sessions;
mod traces;
