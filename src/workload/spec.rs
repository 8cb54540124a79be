//! The `[workload]` table of a scenario, and the factory that turns it into a [`Workload`].

use serde::{Deserialize, Serialize};

use super::dist::LengthSpec;
use super::{OpenLoop, OpenLoopConfig, SharedPrefix, Workload};
use crate::config::Positive;
use crate::rng;
use crate::time::SimTime;

/// Kinds of workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadKind {
    /// Open loop, Poisson arrivals at `rate`.
    Poisson,
    /// Open loop, gamma-distributed gaps at `rate` with coefficient of variation `cv`.
    Gamma,
}

/// The `[workload]` table. Flat, with the keys each kind takes checked by [`Scenario::validate`], so that
/// the parser can point at the exact value that is wrong.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    pub kind: WorkloadKind,
    /// Mean arrivals per second, fleet-wide.
    #[serde(default)]
    pub rate: Option<Positive>,
    /// Coefficient of variation of the gaps (`gamma` only).
    #[serde(default)]
    pub cv: Option<Positive>,
    /// Tokens of each request's own prompt text (after any shared prefix).
    #[serde(default)]
    pub prompt: Option<LengthSpec>,
    /// Output tokens of each request.
    #[serde(default)]
    pub output: Option<LengthSpec>,
    /// Groups of requests that share a prefix.
    #[serde(default)]
    pub shared_prefix: Option<SharedPrefix>,
}

impl WorkloadSpec {
    /// The generator settings, or `Err((field path, message))`.
    pub fn open_loop(&self) -> Result<OpenLoopConfig, (String, String)> {
        let missing = |k: &str| {
            (
                format!("workload.{k}"),
                format!("required for kind = \"{}\"", self.kind_name()),
            )
        };
        let rate = self.rate.ok_or_else(|| missing("rate"))?;
        let cv = match (self.kind, self.cv) {
            (WorkloadKind::Gamma, None) => return Err(missing("cv")),
            (WorkloadKind::Poisson, Some(_)) => {
                return Err((
                    "workload.cv".into(),
                    "applies only to kind = \"gamma\" (a Poisson process has cv = 1)".into(),
                ));
            }
            (_, cv) => cv,
        };
        let length = |spec: &Option<LengthSpec>, key: &str| {
            spec.as_ref()
                .ok_or_else(|| missing(key))?
                .build()
                .map_err(|(k, m)| (format!("workload.{key}.{k}"), m))
        };
        Ok(OpenLoopConfig {
            rate,
            cv,
            prompt: length(&self.prompt, "prompt")?,
            output: length(&self.output, "output")?,
            shared_prefix: self.shared_prefix.clone(),
        })
    }

    fn kind_name(&self) -> &'static str {
        match self.kind {
            WorkloadKind::Poisson => "poisson",
            WorkloadKind::Gamma => "gamma",
        }
    }
}

impl WorkloadSpec {
    /// Checks that the keys present are the ones this kind takes. `Err((field path, message))`.
    pub fn validate(&self) -> Result<(), (String, String)> {
        self.open_loop().map(|_| ())
    }

    /// Builds the workload (the spec has been validated): its random stream is `workload` under `seed`;
    /// open-loop arrivals stop at `end` or after `max_requests`.
    pub fn build(&self, seed: u64, end: SimTime, max_requests: Option<u64>) -> Box<dyn Workload> {
        let cfg = self.open_loop().expect("validated workload");
        Box::new(OpenLoop::new(
            &cfg,
            rng::stream(seed, "workload"),
            end,
            max_requests,
        ))
    }
}
