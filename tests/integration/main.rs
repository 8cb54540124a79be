//! fleetsim's integration tests: one binary, one module per concern.

mod bad_inputs;
mod calibrate_user;
mod calibration;
mod cli;
mod closed_loop;
mod common;
mod determinism;
mod disaggregation;
mod fast_path;
mod faults;
mod golden;
mod invariants;
mod peer;
mod prefix_cache;
mod profiles;
mod queueing;
mod readme;
mod report_page;
mod results;
mod routing;
mod sessions;
mod size;
mod sweep;
mod tiers;
mod traces;
