//! The `[workload]` table of a scenario, and the factory that turns it into a [`Workload`].

use serde::{Deserialize, Serialize};

use super::concurrency::ClosedLoop;
use super::dist::{LengthDist, LengthSpec};
use super::synthetic::RequestSampler;
use super::{OpenLoop, OpenLoopConfig, SharedPrefix, Workload};
use crate::config::{Positive, PositiveInt};
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
    /// Closed loop: `clients` clients, each sending its next request when its previous one finishes.
    Concurrency,
}

/// The `[workload]` table. Flat, with the keys each kind takes checked by [`WorkloadSpec::validate`], so
/// that the parser can point at the exact value that is wrong.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    pub kind: WorkloadKind,
    /// Mean arrivals per second, fleet-wide (open loop).
    #[serde(default)]
    pub rate: Option<Positive>,
    /// Coefficient of variation of the gaps (`gamma` only).
    #[serde(default)]
    pub cv: Option<Positive>,
    /// Concurrent clients (`concurrency` only).
    #[serde(default)]
    pub clients: Option<PositiveInt>,
    /// Requests to send in all (`concurrency` only; the scenario's `max_requests` caps every kind).
    #[serde(default)]
    pub requests: Option<PositiveInt>,
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

/// Settings of the closed-loop workload.
#[derive(Clone, Debug, PartialEq)]
pub struct ClosedLoopConfig {
    pub clients: PositiveInt,
    /// Requests to send in all, if capped here.
    pub requests: Option<PositiveInt>,
    pub prompt: LengthDist,
    pub output: LengthDist,
    pub shared_prefix: Option<SharedPrefix>,
}

type FieldError = (String, String);

impl WorkloadSpec {
    fn missing(&self, key: &str) -> FieldError {
        (
            format!("workload.{key}"),
            format!("required for kind = \"{}\"", self.kind_name()),
        )
    }

    /// `Err` naming `key` if it is set although this kind does not take it.
    fn reject<T>(&self, value: &Option<T>, key: &str, takes: &str) -> Result<(), FieldError> {
        match value {
            Some(_) => Err((
                format!("workload.{key}"),
                format!("applies only to {takes}"),
            )),
            None => Ok(()),
        }
    }

    /// The prompt and output length distributions.
    fn lengths(&self) -> Result<(LengthDist, LengthDist), FieldError> {
        let length = |spec: &Option<LengthSpec>, key: &str| {
            spec.as_ref()
                .ok_or_else(|| self.missing(key))?
                .build()
                .map_err(|(k, m)| (format!("workload.{key}.{k}"), m))
        };
        Ok((
            length(&self.prompt, "prompt")?,
            length(&self.output, "output")?,
        ))
    }

    /// The open-loop generator settings (`poisson`, `gamma`), or `Err((field path, message))`.
    pub fn open_loop(&self) -> Result<OpenLoopConfig, FieldError> {
        let closed_only = "kind = \"concurrency\"";
        self.reject(&self.clients, "clients", closed_only)?;
        self.reject(&self.requests, "requests", closed_only)?;
        let rate = self.rate.ok_or_else(|| self.missing("rate"))?;
        let cv = match (self.kind, self.cv) {
            (WorkloadKind::Gamma, None) => return Err(self.missing("cv")),
            (WorkloadKind::Poisson, Some(_)) => {
                return Err((
                    "workload.cv".into(),
                    "applies only to kind = \"gamma\" (a Poisson process has cv = 1)".into(),
                ));
            }
            (_, cv) => cv,
        };
        let (prompt, output) = self.lengths()?;
        Ok(OpenLoopConfig {
            rate,
            cv,
            prompt,
            output,
            shared_prefix: self.shared_prefix.clone(),
        })
    }

    /// The closed-loop settings (`concurrency`), or `Err((field path, message))`.
    pub fn closed_loop(&self) -> Result<ClosedLoopConfig, FieldError> {
        let open_only =
            "open-loop kinds (poisson, gamma): a closed loop's rate follows from its clients";
        self.reject(&self.rate, "rate", open_only)?;
        self.reject(&self.cv, "cv", "kind = \"gamma\"")?;
        let clients = self.clients.ok_or_else(|| self.missing("clients"))?;
        let (prompt, output) = self.lengths()?;
        Ok(ClosedLoopConfig {
            clients,
            requests: self.requests,
            prompt,
            output,
            shared_prefix: self.shared_prefix.clone(),
        })
    }

    fn kind_name(&self) -> &'static str {
        match self.kind {
            WorkloadKind::Poisson => "poisson",
            WorkloadKind::Gamma => "gamma",
            WorkloadKind::Concurrency => "concurrency",
        }
    }

    /// Checks that the keys present are the ones this kind takes. `Err((field path, message))`.
    pub fn validate(&self) -> Result<(), FieldError> {
        match self.kind {
            WorkloadKind::Poisson | WorkloadKind::Gamma => self.open_loop().map(|_| ()),
            WorkloadKind::Concurrency => self.closed_loop().map(|_| ()),
        }
    }

    /// Builds the workload (the spec has been validated): its random stream is `workload` under `seed`;
    /// no request is sent at or after `end` nor beyond `max_requests` (or this table's own `requests`).
    pub fn build(&self, seed: u64, end: SimTime, max_requests: Option<u64>) -> Box<dyn Workload> {
        let rng = rng::stream(seed, "workload");
        match self.kind {
            WorkloadKind::Poisson | WorkloadKind::Gamma => {
                let cfg = self.open_loop().expect("validated workload");
                Box::new(OpenLoop::new(&cfg, rng, end, max_requests))
            }
            WorkloadKind::Concurrency => {
                let cfg = self.closed_loop().expect("validated workload");
                let sampler =
                    RequestSampler::new(&cfg.prompt, &cfg.output, cfg.shared_prefix.as_ref());
                let cap = match (cfg.requests.map(|r| u64::from(r.0)), max_requests) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                Box::new(ClosedLoop::new(cfg.clients.0, sampler, rng, end, cap))
            }
        }
    }
}
