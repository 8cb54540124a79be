//! Hardware: the GPU and model catalogues and the step-time model built on them.

pub mod gpu;
pub mod model;
pub mod perf;

pub use gpu::{GpuId, GpuSpec};
pub use model::{ModelId, ModelSpec};
pub use perf::{Efficiency, PerfModel, Precision, StepShape};
