//! What is measured: raw per-request records in, one summary out.
//!
//! The [`Collector`] folds each finished request into counters and latency histograms (bounded memory:
//! it does not keep the requests, except compact observations of those that arrived early enough to be
//! warm-up, until the warm-up is detected: [`warmup`]), and the [`summary`] is derived once at the end.

pub mod bench;
pub mod classes;
pub mod collector;
pub mod headline;
pub mod intervals;
pub mod lora;
pub mod mfu;
pub mod models;
pub mod record;
pub mod recovery;
pub mod replicas;
pub mod requests;
pub mod slo;
pub mod stages;
pub mod steady;
pub mod summary;
pub mod timeseries;
pub mod warmup;

pub use collector::Collector;
pub use slo::Slo;
pub use summary::Summary;

#[cfg(test)]
mod tests;
