//! The `[workload]` table of a scenario, and the factory that turns it into a [`Workload`].
//!
//! The table is flat: one struct with every key of every kind, and [`WorkloadSpec::validate`] checks that
//! the keys present are the ones the kind takes. A serde-tagged enum would be tidier, but the TOML parser
//! could then only point at the table, not at the value that is wrong.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::concurrency::ClientRules;
use super::concurrency::ClosedLoop;
use super::conversation_prompts::ConversationPromptsSpec;
use super::dist::{DistKind, DurationSpec, LengthDist, LengthSpec};
use super::frontend::FrontendSpec;
use super::harness::{Harness, HarnessOptions};
use super::rate_curve::{RateCurve, RateCurveSpec};
use super::sessions::{SegmentPool, SessionConfig, SessionMode, SessionRows, Sessions};
use super::stages::{StageLoad, StageSpec, Stages};
use super::synthetic::RequestSampler;
use super::trace::{
    self, Replay, RowStream, Timing, TraceError, TraceFormat, TraceOptions, TraceRow,
};
use super::{OpenLoop, OpenLoopConfig, SharedPrefix, Workload};
use crate::config::{Positive, PositiveInt};
use crate::rng;
use crate::time::{SimDuration, SimTime};

/// Kinds of workload.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadKind {
    /// Open loop, Poisson arrivals at `rate`.
    #[default]
    Poisson,
    /// Open loop, gamma-distributed gaps at `rate` with coefficient of variation `cv`.
    Gamma,
    /// Multi-turn conversations ([`super::sessions`]).
    Sessions,
    /// A trace file replayed ([`super::trace`]).
    Trace,
    /// Closed loop: `clients` clients, each sending its next request when its previous one finishes
    /// ([`super::concurrency`]).
    Concurrency,
    /// A benchmark client's closed loop: `concurrency`, with the lengths drawn around the nominal
    /// `prompt` and `output` and the request budget as `harness` does ([`super::harness`]).
    Benchmark,
    /// Open-loop stages, each drained before the next, as inference-perf sends them
    /// ([`super::stages`]).
    Stages,
    /// Several classes of traffic, each a workload of its own with a priority and SLO ([`super::mix`]).
    Mix,
}

impl WorkloadKind {
    /// Every kind, in declaration order (the schema's per-kind rules are made from it; a test checks it
    /// against the kinds the schema lists).
    pub const ALL: [WorkloadKind; 8] = [
        WorkloadKind::Poisson,
        WorkloadKind::Gamma,
        WorkloadKind::Sessions,
        WorkloadKind::Trace,
        WorkloadKind::Concurrency,
        WorkloadKind::Benchmark,
        WorkloadKind::Stages,
        WorkloadKind::Mix,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadKind::Poisson => "poisson",
            WorkloadKind::Gamma => "gamma",
            WorkloadKind::Sessions => "sessions",
            WorkloadKind::Trace => "trace",
            WorkloadKind::Concurrency => "concurrency",
            WorkloadKind::Benchmark => "benchmark",
            WorkloadKind::Stages => "stages",
            WorkloadKind::Mix => "mix",
        }
    }

    /// The keys this kind takes, besides `kind`.
    fn keys(self) -> &'static [&'static str] {
        match self {
            WorkloadKind::Poisson => &["rate", "rate_curve", "prompt", "output", "shared_prefix"],
            WorkloadKind::Gamma => &[
                "rate",
                "cv",
                "rate_curve",
                "prompt",
                "output",
                "shared_prefix",
            ],
            WorkloadKind::Sessions => &[
                "session_rate",
                "cv",
                "rate_curve",
                "turns",
                "first_prompt",
                "prompt",
                "output",
                "think_time",
                "system_prompts",
                "tools",
                "documents",
                "mode",
                "max_context",
            ],
            WorkloadKind::Concurrency => &[
                "clients",
                "requests",
                "prompt",
                "output",
                "shared_prefix",
                "frontend",
            ],
            WorkloadKind::Stages => &[
                "stages",
                "load",
                "interval",
                "prompt",
                "output",
                "shared_prefix",
            ],
            WorkloadKind::Benchmark => &[
                "harness",
                "clients",
                "requests",
                "prompt",
                "output",
                "random_range_ratio",
                "options",
                "frontend",
                "conversation_prompts",
            ],
            WorkloadKind::Trace => &[
                "path",
                "format",
                "jitter",
                "reconstruct_sessions",
                "hash_block_size",
                "speedup",
                "start",
                "skip_bad_lines",
            ],
            WorkloadKind::Mix => &["classes"],
        }
    }
}

/// Adds to the `[workload]` schema what [`WorkloadSpec::validate`] checks first: for each `kind`, the
/// keys that belong to other kinds are refused (`"key": false`). Keys no kind owns (`model`,
/// `adapters`, …) are left to every kind.
fn keys_by_kind(schema: &mut schemars::Schema) {
    let owned: Vec<&str> = WorkloadSpec::default()
        .present()
        .into_iter()
        .map(|(key, _)| key)
        .collect();
    let rules: Vec<serde_json::Value> = WorkloadKind::ALL
        .iter()
        .map(|kind| {
            let refused: serde_json::Map<String, serde_json::Value> = owned
                .iter()
                .filter(|key| !kind.keys().contains(key))
                .map(|key| (key.to_string(), serde_json::Value::Bool(false)))
                .collect();
            serde_json::json!({
                "if": { "properties": { "kind": { "const": kind.as_str() } } },
                "then": { "properties": refused },
            })
        })
        .collect();
    schema.insert("allOf".into(), rules.into());
}

/// The `[workload]` table. Flat, with the keys each kind takes checked by [`WorkloadSpec::validate`], so
/// that the parser can point at the exact value that is wrong.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = keys_by_kind)]
pub struct WorkloadSpec {
    pub kind: WorkloadKind,
    /// Mean arrivals per second, fleet-wide (`poisson`, `gamma`).
    #[serde(default)]
    pub rate: Option<Positive>,
    /// Coefficient of variation of the gaps (`gamma`; `sessions`, where it makes session starts a gamma
    /// process).
    #[serde(default)]
    pub cv: Option<Positive>,
    /// Tokens of each request's own prompt text after any shared prefix (`poisson`, `gamma`); of each
    /// user message after the first (`sessions`).
    #[serde(default)]
    pub prompt: Option<LengthSpec>,
    /// Output tokens of each request or answer.
    #[serde(default)]
    pub output: Option<LengthSpec>,
    /// Groups of requests that share a prefix (`poisson`, `gamma`, `concurrency`).
    #[serde(default)]
    pub shared_prefix: Option<SharedPrefix>,

    /// Concurrent clients (`concurrency`).
    #[serde(default)]
    pub clients: Option<PositiveInt>,
    /// Requests to send in all (`concurrency`; the scenario's `max_requests` caps every kind).
    #[serde(default)]
    pub requests: Option<PositiveInt>,
    /// The benchmark client, API server and warm-up between the clients and the engine (`concurrency`;
    /// default: on, with published costs).
    #[serde(default)]
    pub frontend: Option<FrontendSpec>,
    /// The stages, in order (`stages`): `[{ rate = 3, duration = "20s" }, ...]`.
    #[serde(default)]
    pub stages: Option<Vec<StageSpec>>,
    /// How each stage spaces its sends (`stages`): `constant` (default) or `poisson`.
    #[serde(default)]
    pub load: Option<StageLoad>,
    /// Pause after a stage has drained, before the next one's lead-in (`stages`; default 1 s).
    #[serde(default)]
    pub interval: Option<SimDuration>,
    /// The benchmark client imitated (`benchmark`): `vllm-bench`, `inferencemax`, `aiperf`,
    /// `genai-perf` or `guidellm`.
    #[serde(default)]
    pub harness: Option<Harness>,
    /// Its `--random-range-ratio` (`benchmark` with vllm-bench or inferencemax; default: the harness's,
    /// vllm-bench 0, inferencemax 0.8). Also accepted in `options`.
    #[serde(default)]
    pub random_range_ratio: Option<f64>,
    /// The harness's own options, as it names them (`benchmark`; [`HarnessOptions`]).
    #[serde(default)]
    pub options: Option<HarnessOptions>,
    /// The benchmark's dataset when it is not the harness's random one: cumulative conversation
    /// prompts, as KubeAI's prefix-routing benchmark sends them (`benchmark` with vllm-bench;
    /// [`ConversationPromptsSpec`]). `prompt` and `output` are then left out.
    #[serde(default)]
    pub conversation_prompts: Option<ConversationPromptsSpec>,

    /// New conversations per second (`sessions`).
    #[serde(default)]
    pub session_rate: Option<Positive>,
    /// Shape of the session rate over time (`sessions`).
    #[serde(default)]
    pub rate_curve: Option<RateCurveSpec>,
    /// Turns per session (`sessions`).
    #[serde(default)]
    pub turns: Option<LengthSpec>,
    /// Tokens of the first user message (`sessions`; default: `prompt`).
    #[serde(default)]
    pub first_prompt: Option<LengthSpec>,
    /// Think time before each later turn (`sessions`).
    #[serde(default)]
    pub think_time: Option<DurationSpec>,
    /// Shared system prompts (`sessions`).
    #[serde(default)]
    pub system_prompts: Option<SegmentPool>,
    /// Shared tool schemas, after the system prompt (`sessions`).
    #[serde(default)]
    pub tools: Option<SegmentPool>,
    /// Shared retrieved documents, after the tool schema (`sessions`).
    #[serde(default)]
    pub documents: Option<SegmentPool>,
    /// `closed` (default) or `open` loop (`sessions`).
    #[serde(default)]
    pub mode: Option<SessionMode>,
    /// Largest prompt + answer of a turn; a session ends before a turn that would exceed it (`sessions`).
    #[serde(default)]
    pub max_context: Option<PositiveInt>,

    /// Trace file, relative to the scenario file (`trace`).
    #[serde(default)]
    pub path: Option<String>,
    /// Trace format; recognised from the file when absent (`trace`).
    #[serde(default)]
    pub format: Option<TraceFormat>,
    /// Spread requests sharing a timestamp over up to this long (`trace`).
    #[serde(default)]
    pub jitter: Option<SimDuration>,
    /// Rebuild sessions from Mooncake hash chains (`trace`).
    #[serde(default)]
    pub reconstruct_sessions: Option<bool>,
    /// Tokens per Mooncake hash block (`trace`; default 512).
    #[serde(default)]
    pub hash_block_size: Option<PositiveInt>,
    /// Replay this many times faster (`trace`).
    #[serde(default)]
    pub speedup: Option<Positive>,
    /// Skip this much of the trace's beginning (`trace`).
    #[serde(default)]
    pub start: Option<SimDuration>,
    /// Skip malformed lines, counted, instead of failing (`trace`).
    #[serde(default)]
    pub skip_bad_lines: Option<bool>,

    /// The model every request of this workload asks for (any kind but `mix`, whose classes name
    /// their own; a trace row that names its own model keeps it); without it a request asks for no
    /// model in particular and any worker may take it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<crate::hardware::ModelId>,

    /// The LoRA adapters the requests ask for, one each (any kind but `mix`, whose classes name
    /// their own); without it they ask for the base model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapters: Option<super::adapters::AdapterSpec>,

    /// The classes of a traffic mix (`mix`), in `[[workload.classes]]` order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classes: Option<Vec<super::mix::ClassSpec>>,

    /// Directory that relative paths are relative to: the scenario file's (set when it is loaded).
    #[serde(skip)]
    pub base_dir: PathBuf,
}

/// Settings of the closed-loop fixed-concurrency workload.
#[derive(Clone, Debug, PartialEq)]
pub struct ClosedLoopConfig {
    pub clients: PositiveInt,
    /// Requests to send in all, if capped here.
    pub requests: Option<PositiveInt>,
    pub prompt: LengthDist,
    pub output: LengthDist,
    pub shared_prefix: Option<SharedPrefix>,
    pub frontend: FrontendSpec,
    /// The client's warm-up, dispatch and metric rules (a `benchmark`'s harness; `vllm bench serve`'s
    /// otherwise).
    pub client: ClientRules,
    /// A dataset of conversation prompts, whose prompts and completions the requests are; `prompt`
    /// and `output` are then the lengths of one user message and one reply.
    pub conversations: Option<ConversationPromptsSpec>,
}

/// A staged workload's settings, validated.
#[derive(Clone, Debug)]
pub struct StagedConfig {
    pub stages: Vec<StageSpec>,
    pub load: StageLoad,
    pub interval: SimDuration,
    pub prompt: LengthDist,
    pub output: LengthDist,
    pub shared_prefix: Option<SharedPrefix>,
}

/// A workload ready to run, and what building it had to say (skipped trace lines).
pub struct BuiltWorkload {
    pub workload: Box<dyn Workload>,
    pub notes: Vec<String>,
}

type Field = (String, String);

fn at(key: &str, message: impl Into<String>) -> Field {
    (format!("workload.{key}"), message.into())
}

impl WorkloadSpec {
    /// Multiplies the offered traffic by `factor` (`fleetsim size --traffic-scale`): the arrival rate
    /// (`poisson`, `gamma`), the session start rate (`sessions`, also under a rate curve, whose shape is
    /// kept), every stage's rate (`stages`), the number of clients (`concurrency`, rounded, at least
    /// one), the replay speed (`trace`:
    /// its timeline compressed, think times included), every class of a mix. Lengths and shapes are
    /// unchanged.
    pub fn scale_traffic(&mut self, factor: f64) -> Result<(), String> {
        if !(factor.is_finite() && factor > 0.0) {
            return Err(format!("a traffic scale must be above 0, got {factor}"));
        }
        let scale = |p: &mut Option<Positive>| {
            if let Some(v) = p {
                v.0 *= factor;
            }
        };
        match self.kind {
            WorkloadKind::Poisson | WorkloadKind::Gamma => scale(&mut self.rate),
            WorkloadKind::Sessions => scale(&mut self.session_rate),
            WorkloadKind::Stages => {
                for st in self.stages.iter_mut().flatten() {
                    st.rate.0 *= factor;
                }
            }
            WorkloadKind::Concurrency | WorkloadKind::Benchmark => {
                if let Some(c) = &mut self.clients {
                    c.0 = ((f64::from(c.0) * factor).round() as u32).max(1);
                }
                if let Some(r) = self.options.as_mut().and_then(|o| o.request_rate.as_mut()) {
                    *r *= factor;
                }
            }
            WorkloadKind::Trace => {
                let s = self.speedup.get_or_insert(Positive(1.0));
                s.0 *= factor;
            }
            WorkloadKind::Mix => {
                for c in self.classes.iter_mut().flatten() {
                    c.traffic.scale_traffic(factor)?;
                }
            }
        }
        Ok(())
    }

    /// Which keys are present, by name.
    fn present(&self) -> [(&'static str, bool); 34] {
        [
            ("options", self.options.is_some()),
            ("conversation_prompts", self.conversation_prompts.is_some()),
            ("stages", self.stages.is_some()),
            ("load", self.load.is_some()),
            ("interval", self.interval.is_some()),
            ("harness", self.harness.is_some()),
            ("random_range_ratio", self.random_range_ratio.is_some()),
            ("clients", self.clients.is_some()),
            ("requests", self.requests.is_some()),
            ("rate", self.rate.is_some()),
            ("cv", self.cv.is_some()),
            ("prompt", self.prompt.is_some()),
            ("output", self.output.is_some()),
            ("shared_prefix", self.shared_prefix.is_some()),
            ("session_rate", self.session_rate.is_some()),
            ("rate_curve", self.rate_curve.is_some()),
            ("turns", self.turns.is_some()),
            ("first_prompt", self.first_prompt.is_some()),
            ("think_time", self.think_time.is_some()),
            ("system_prompts", self.system_prompts.is_some()),
            ("tools", self.tools.is_some()),
            ("documents", self.documents.is_some()),
            ("mode", self.mode.is_some()),
            ("max_context", self.max_context.is_some()),
            ("path", self.path.is_some()),
            ("format", self.format.is_some()),
            ("jitter", self.jitter.is_some()),
            ("reconstruct_sessions", self.reconstruct_sessions.is_some()),
            ("hash_block_size", self.hash_block_size.is_some()),
            ("speedup", self.speedup.is_some()),
            ("start", self.start.is_some()),
            ("skip_bad_lines", self.skip_bad_lines.is_some()),
            ("frontend", self.frontend.is_some()),
            ("classes", self.classes.is_some()),
        ]
    }

    fn check_keys(&self) -> Result<(), Field> {
        let allowed = self.kind.keys();
        for (key, on) in self.present() {
            if on && !allowed.contains(&key) {
                let message = if key == "cv" && self.kind == WorkloadKind::Poisson {
                    "applies only to kind = \"gamma\" (a Poisson process has cv = 1)".to_string()
                } else {
                    format!(
                        "does not apply to kind = \"{}\" (it takes {})",
                        self.kind.as_str(),
                        allowed.join(", ")
                    )
                };
                return Err(at(key, message));
            }
        }
        Ok(())
    }

    fn missing(&self, key: &str) -> Field {
        at(
            key,
            format!("required for kind = \"{}\"", self.kind.as_str()),
        )
    }

    /// The shared prefix, checked (`shared_prefix.questions` against the other keys).
    fn shared_prefix(&self) -> Result<Option<SharedPrefix>, Field> {
        if let Some(p) = &self.shared_prefix {
            p.validate()
                .map_err(|(k, m)| at(&format!("shared_prefix.{k}"), m))?;
        }
        Ok(self.shared_prefix.clone())
    }

    fn length(
        &self,
        spec: &Option<LengthSpec>,
        key: &str,
    ) -> Result<super::dist::LengthDist, Field> {
        spec.as_ref()
            .ok_or_else(|| self.missing(key))?
            .build()
            .map_err(|(k, m)| at(&format!("{key}.{k}"), m))
    }

    /// The `rate_curve`, loaded, if one is set.
    fn curve(&self) -> Result<Option<RateCurve>, Field> {
        let Some(c) = &self.rate_curve else {
            return Ok(None);
        };
        crate::config::check_range(c.speedup.0, super::trace::SPEEDUP, "")
            .map_err(|m| at("rate_curve.speedup", m))?;
        RateCurve::load(&self.resolve(&c.path), c.speedup.0, c.start)
            .map(Some)
            .map_err(|e| at("rate_curve.path", e.to_string()))
    }

    /// The open-loop generator settings, or `Err((field path, message))`.
    pub fn open_loop(&self) -> Result<OpenLoopConfig, Field> {
        let rate = self.rate.ok_or_else(|| self.missing("rate"))?;
        let cv = match (self.kind, self.cv) {
            (WorkloadKind::Gamma, None) => return Err(self.missing("cv")),
            (_, cv) => cv,
        };
        Ok(OpenLoopConfig {
            rate,
            cv,
            prompt: self.length(&self.prompt, "prompt")?,
            output: self.length(&self.output, "output")?,
            shared_prefix: self.shared_prefix()?,
            curve: self.curve()?,
        })
    }

    /// The closed-loop settings (`concurrency`), or `Err((field path, message))`.
    pub fn closed_loop(&self) -> Result<ClosedLoopConfig, Field> {
        let clients = self.clients.ok_or_else(|| self.missing("clients"))?;
        if self.kind == WorkloadKind::Benchmark {
            return self.benchmark(clients);
        }
        Ok(ClosedLoopConfig {
            clients,
            requests: self.requests,
            prompt: self.length(&self.prompt, "prompt")?,
            output: self.length(&self.output, "output")?,
            shared_prefix: self.shared_prefix()?,
            frontend: self.frontend.unwrap_or_default(),
            client: ClientRules::vllm_bench(self.frontend.unwrap_or_default().warmup),
            conversations: None,
        })
    }

    /// The staged generator's settings, or `Err((field path, message))`.
    pub fn staged(&self) -> Result<StagedConfig, Field> {
        let stages = self.stages.clone().ok_or_else(|| self.missing("stages"))?;
        if stages.is_empty() {
            return Err(at("stages", "needs at least one stage"));
        }
        for (i, st) in stages.iter().enumerate() {
            if st.duration == SimDuration::ZERO {
                return Err(at(&format!("stages[{i}].duration"), "must be above 0"));
            }
            if st.rate.0 > StageSpec::MAX_RATE {
                return Err(at(
                    &format!("stages[{i}].rate"),
                    format!(
                        "at most {} requests per second, got {}",
                        StageSpec::MAX_RATE,
                        st.rate.0
                    ),
                ));
            }
            if st.rate.0 * st.duration.as_secs_f64() > StageSpec::MAX_REQUESTS as f64 {
                return Err(at(
                    &format!("stages[{i}].rate"),
                    format!(
                        "rate × duration is {:.0} requests: at most {} in one stage",
                        st.rate.0 * st.duration.as_secs_f64(),
                        StageSpec::MAX_REQUESTS
                    ),
                ));
            }
        }
        Ok(StagedConfig {
            stages,
            load: self.load.unwrap_or_default(),
            interval: self.interval.unwrap_or(SimDuration::from_secs(1)),
            prompt: self.length(&self.prompt, "prompt")?,
            output: self.length(&self.output, "output")?,
            shared_prefix: self.shared_prefix()?,
        })
    }

    /// A `benchmark` workload as the closed loop it runs: `prompt` and `output` are the harness's nominal
    /// lengths (fixed), redrawn as the harness draws them, with its budget, warm-up and metrics.
    fn benchmark(&self, clients: PositiveInt) -> Result<ClosedLoopConfig, Field> {
        let harness = self.harness.ok_or_else(|| self.missing("harness"))?;
        let mut options = self.options.clone().unwrap_or_default();
        if let Some(r) = self.random_range_ratio {
            if options.random_range_ratio.is_some() {
                return Err(at(
                    "random_range_ratio",
                    "is given twice: here and in options; keep one",
                ));
            }
            options.random_range_ratio = Some(r);
        }
        let frontend = self.frontend.unwrap_or_default();
        if !frontend.warmup {
            return Err(at(
                "frontend.warmup",
                format!(
                    "a benchmark's warm-up is its harness's ({harness}: {}); leave frontend.warmup out",
                    match harness {
                        Harness::AiPerf | Harness::GenAiPerf => "options.warmup_request_count",
                        Harness::Guidellm => "none",
                        _ => "one request",
                    }
                ),
            ));
        }
        let nominal = |spec: &Option<LengthSpec>, key: &str| -> Result<u32, Field> {
            match spec {
                Some(LengthSpec {
                    dist: Some(DistKind::Fixed),
                    tokens: Some(t),
                    ..
                }) => Ok(t.0),
                Some(_) => Err(at(
                    key,
                    format!(
                        "a benchmark's {key} is its nominal length, {{ dist = \"fixed\", tokens = N }}; \
                         {harness} draws the lengths around it"
                    ),
                )),
                None => Err(self.missing(key)),
            }
        };
        if let Some(d) = &self.conversation_prompts {
            return self.conversation_benchmark(harness, clients, &options, frontend, d);
        }
        let (prompt, output) = (
            nominal(&self.prompt, "prompt")?,
            nominal(&self.output, "output")?,
        );
        let run = harness
            .run(prompt, output, clients.0, &options)
            .map_err(|(k, m)| {
                let key = if k == "random_range_ratio" && self.random_range_ratio.is_some() {
                    k.to_string()
                } else {
                    format!("options.{k}")
                };
                at(&key, m)
            })?;
        let requests = match (self.requests, run.requests) {
            (Some(r), _) => Some(r),
            (None, Some(n)) => Some(PositiveInt(n.max(1))),
            // A GuideLLM run bounded by `--max-seconds` alone sends until it runs out.
            (None, None) if options.max_seconds.is_some() => None,
            (None, None) => {
                return Err(at(
                    "requests",
                    format!(
                        "required with {harness}, which has no default request budget (its \
                         --constraint kind=max_requests,count=N), unless options.max_seconds bounds \
                         the run"
                    ),
                ));
            }
        };
        Ok(ClosedLoopConfig {
            clients,
            requests,
            prompt: run.prompt,
            output: run.output,
            shared_prefix: None,
            frontend,
            client: run.client,
            conversations: None,
        })
    }

    /// A `benchmark` whose dataset is `d`: its prompts and completions, the harness's budget, warm-up,
    /// dispatch and metrics. Only vllm-bench (KubeAI's script is vLLM's `benchmark_serving.py`) sends
    /// it, and the lengths are the dataset's, so `prompt`, `output` and a range ratio are refused.
    fn conversation_benchmark(
        &self,
        harness: Harness,
        clients: PositiveInt,
        options: &HarnessOptions,
        frontend: FrontendSpec,
        d: &ConversationPromptsSpec,
    ) -> Result<ClosedLoopConfig, Field> {
        if harness != Harness::VllmBench {
            return Err(at(
                "conversation_prompts",
                format!(
                    "is a dataset of vllm-bench (KubeAI's fork of vLLM's benchmark_serving.py), not of {harness}"
                ),
            ));
        }
        for (key, given) in [
            ("prompt", self.prompt.is_some()),
            ("output", self.output.is_some()),
            (
                "random_range_ratio",
                self.random_range_ratio.is_some() || options.random_range_ratio.is_some(),
            ),
        ] {
            if given {
                return Err(at(
                    key,
                    "does not apply with conversation_prompts: the lengths are the dataset's",
                ));
            }
        }
        let (_, user, reply) = d
            .validate()
            .map_err(|(k, m)| at(&format!("conversation_prompts.{k}"), m))?;
        // The prompt and completion lengths are the dataset's; the harness gives the rest.
        let fixed = 1;
        let run = harness
            .run(fixed, fixed, clients.0, options)
            .map_err(|(k, m)| at(&format!("options.{k}"), m))?;
        let requests = self
            .requests
            .or(run.requests.map(|n| PositiveInt(n.max(1))))
            .expect("vllm-bench has a default budget");
        Ok(ClosedLoopConfig {
            clients,
            requests: Some(requests),
            prompt: user,
            output: reply,
            shared_prefix: None,
            frontend,
            client: run.client,
            conversations: Some(d.clone()),
        })
    }

    /// A path named in the scenario, resolved against the scenario file's directory.
    pub fn resolve(&self, path: &str) -> PathBuf {
        self.base_dir.join(path)
    }

    /// The session generator settings (loading the rate curve), or `Err((field path, message))`.
    pub fn sessions(&self) -> Result<SessionConfig, Field> {
        let rate = self
            .session_rate
            .ok_or_else(|| self.missing("session_rate"))?;
        let prompt = self.length(&self.prompt, "prompt")?;
        let first_prompt = match &self.first_prompt {
            Some(_) => self.length(&self.first_prompt, "first_prompt")?,
            None => prompt.clone(),
        };
        let think = self
            .think_time
            .as_ref()
            .ok_or_else(|| self.missing("think_time"))?
            .build()
            .map_err(|(k, m)| at(&format!("think_time.{k}"), m))?;
        let curve = self.curve()?;
        Ok(SessionConfig {
            rate: rate.0,
            cv: self.cv.map(|c| c.0),
            curve,
            turns: self.length(&self.turns, "turns")?,
            first_prompt,
            prompt,
            output: self.length(&self.output, "output")?,
            think,
            system_prompts: self.system_prompts.clone(),
            tools: self.tools.clone(),
            documents: self.documents.clone(),
            mode: self.mode.unwrap_or_default(),
            max_context: self.max_context.map(|m| m.0),
        })
    }

    /// The trace file and how to read it (the file is opened to recognise its format), or
    /// `Err((field path, message))`.
    pub fn trace(&self, seed: u64) -> Result<(PathBuf, TraceOptions), Field> {
        let path = self.resolve(self.path.as_deref().ok_or_else(|| self.missing("path"))?);
        if let Some(s) = self.speedup {
            crate::config::check_range(s.0, super::trace::SPEEDUP, "")
                .map_err(|m| at("speedup", m))?;
        }
        if let Err(e) = super::trace::text::open_regular(&path) {
            return Err(at("path", e.to_string()));
        }
        let format = match self.format {
            Some(f) => f,
            None => TraceFormat::detect(&path).map_err(|e| at("path", e.to_string()))?,
        };
        if self.reconstruct_sessions == Some(true) && format != TraceFormat::Mooncake {
            return Err(at(
                "reconstruct_sessions",
                format!("applies to Mooncake traces, and this one is {format}"),
            ));
        }
        if self.hash_block_size.is_some() && format != TraceFormat::Mooncake {
            return Err(at(
                "hash_block_size",
                format!("applies to Mooncake traces, and this one is {format}"),
            ));
        }
        Ok((
            path,
            TraceOptions {
                format: Some(format),
                skip_bad_lines: self.skip_bad_lines.unwrap_or(false),
                jitter: self.jitter,
                reconstruct_sessions: self.reconstruct_sessions.unwrap_or(false),
                hash_block_size: self
                    .hash_block_size
                    .map_or(trace::mooncake::BLOCK_TOKENS, |b| b.0),
                speedup: self.speedup.map_or(1.0, |s| s.0),
                start: self.start.unwrap_or(SimDuration::ZERO),
                seed,
            },
        ))
    }

    /// Checks that the keys present are the ones this kind takes and that they make sense together
    /// (named files exist, a rate curve parses). `Err((field path, message))`. A trace is read in full
    /// only when the workload is built.
    pub fn validate(&self) -> Result<(), Field> {
        self.check_keys()?;
        if self.kind == WorkloadKind::Mix && self.model.is_some() {
            return Err((
                "workload.model".into(),
                "a mix's requests take the model of their class: set `model` in each \
                 [workload.classes.traffic] table instead"
                    .into(),
            ));
        }
        if let Some(a) = &self.adapters {
            if self.kind == WorkloadKind::Mix {
                return Err((
                    "workload.adapters".into(),
                    "a mix's requests take the adapters of their class: set `adapters` in each \
                     [workload.classes.traffic] table instead"
                        .into(),
                ));
            }
            a.validate()
                .map_err(|(k, m)| (format!("workload.adapters.{k}"), m))?;
        }
        match self.kind {
            WorkloadKind::Poisson | WorkloadKind::Gamma => self.open_loop().map(|_| ()),
            WorkloadKind::Sessions => self.sessions().map(|_| ()),
            WorkloadKind::Trace => self.trace(0).map(|_| ()),
            WorkloadKind::Concurrency | WorkloadKind::Benchmark => self.closed_loop().map(|_| ()),
            WorkloadKind::Stages => self.staged().map(|_| ()),
            WorkloadKind::Mix => super::mix::validate(
                self.classes
                    .as_deref()
                    .ok_or_else(|| self.missing("classes"))?,
            ),
        }
    }

    /// The classes of a mix; empty for any other kind (one implicit class).
    pub fn class_list(&self) -> &[super::mix::ClassSpec] {
        match (self.kind, &self.classes) {
            (WorkloadKind::Mix, Some(c)) => c,
            _ => &[],
        }
    }

    /// Builds the workload (the spec has been validated): its random stream is `workload` under `seed`;
    /// arrivals stop at `end` or after `max_requests`. A trace is read through once first, so that a bad
    /// line is reported before the run, not in the middle of it.
    pub fn build(
        &self,
        seed: u64,
        end: SimTime,
        max_requests: Option<u64>,
    ) -> Result<BuiltWorkload, String> {
        let field = |(path, message): Field| format!("{path}: {message}");
        let stream = || rng::stream(seed, "workload");
        let (workload, notes): (Box<dyn Workload>, Vec<String>) = match self.kind {
            WorkloadKind::Poisson | WorkloadKind::Gamma => {
                let cfg = self.open_loop().map_err(field)?;
                (
                    Box::new(OpenLoop::new(&cfg, stream(), end, max_requests)),
                    Vec::new(),
                )
            }
            WorkloadKind::Sessions => {
                let cfg = self.sessions().map_err(field)?;
                (
                    Box::new(Sessions::new(cfg, stream(), end, max_requests)),
                    Vec::new(),
                )
            }
            WorkloadKind::Stages => {
                let cfg = self.staged().map_err(field)?;
                let sampler = RequestSampler::new(
                    &cfg.prompt,
                    &cfg.output,
                    cfg.shared_prefix.as_ref(),
                    &stream(),
                );
                (
                    Box::new(Stages::new(
                        cfg.stages,
                        cfg.load,
                        cfg.interval,
                        sampler,
                        stream(),
                        end,
                        max_requests,
                    )),
                    Vec::new(),
                )
            }
            WorkloadKind::Concurrency | WorkloadKind::Benchmark => {
                let cfg = self.closed_loop().map_err(field)?;
                let sampler = match &cfg.conversations {
                    Some(d) => RequestSampler::conversations(
                        d.build(&stream())
                            .map_err(|m| format!("workload.conversation_prompts: {m}"))?,
                    ),
                    None => RequestSampler::new(
                        &cfg.prompt,
                        &cfg.output,
                        cfg.shared_prefix.as_ref(),
                        &stream(),
                    ),
                };
                let cap = match (cfg.requests.map(|r| u64::from(r.0)), max_requests) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                (
                    Box::new(ClosedLoop::new(
                        cfg.clients.0,
                        sampler,
                        stream(),
                        end,
                        cap,
                        cfg.frontend,
                        cfg.client,
                    )),
                    Vec::new(),
                )
            }
            WorkloadKind::Trace => {
                let (path, options) = self.trace(seed).map_err(field)?;
                let (_, notes) = trace::check(&path, &options).map_err(|e| e.to_string())?;
                let rows = RowStream::open(&path, &options).map_err(|e| e.to_string())?;
                (Box::new(Replay::new(rows, end, max_requests)), notes)
            }
            WorkloadKind::Mix => {
                return super::mix::Mix::build(self.class_list(), seed, end, max_requests);
            }
        };
        let workload = match self.model {
            Some(model) => Box::new(super::Tagged {
                inner: workload,
                tag: super::ForModel(model),
            }),
            None => workload,
        };
        let workload = match &self.adapters {
            Some(spec) => Box::new(super::Tagged {
                inner: workload,
                tag: super::adapters::ForAdapters::new(spec.clone(), seed),
            }),
            None => workload,
        };
        Ok(BuiltWorkload { workload, notes })
    }

    /// The rows this workload would produce, for `fleetsim trace gen`: open-loop requests as arrivals,
    /// closed-loop sessions as turns with think times (nothing is simulated, so a closed-loop turn's
    /// arrival is not known), a trace's own rows. Open-loop arrivals stop at `end` and the rows at
    /// `max_requests`, as in [`WorkloadSpec::build`]; a closed-loop session is written whole, and a
    /// replay cuts it at the end of its window just as the live generator does.
    pub fn rows(
        &self,
        seed: u64,
        end: SimTime,
        max_requests: Option<u64>,
    ) -> Result<Box<dyn Iterator<Item = Result<TraceRow, TraceError>> + Send>, String> {
        let field = |(path, message): Field| format!("{path}: {message}");
        let stream = || rng::stream(seed, "workload");
        let model = self.model;
        let named = move |mut row: TraceRow| {
            row.model = row.model.or(model);
            row
        };
        let rows: Box<dyn Iterator<Item = Result<TraceRow, TraceError>> + Send> = match self.kind {
            WorkloadKind::Poisson | WorkloadKind::Gamma => {
                let cfg = self.open_loop().map_err(field)?;
                let mut w = OpenLoop::new(&cfg, stream(), end, max_requests);
                Box::new(std::iter::from_fn(move || {
                    w.next_arrival().map(|r| Ok(TraceRow::from_request(&r)))
                }))
            }
            WorkloadKind::Sessions => {
                let cfg = self.sessions().map_err(field)?;
                Box::new(SessionRows::new(cfg, stream(), end, max_requests).map(Ok))
            }
            WorkloadKind::Concurrency | WorkloadKind::Benchmark | WorkloadKind::Stages => {
                return Err(
                    "workload.kind: a closed loop's arrivals depend on the simulated completions, so there is nothing to write without simulating".into(),
                );
            }
            WorkloadKind::Mix => {
                return Err(
                    "workload.kind: trace files have no class column, so a mix cannot be written as one; write each class's traffic on its own (a scenario with that class's table as [workload])".into(),
                );
            }
            WorkloadKind::Trace => {
                let (path, options) = self.trace(seed).map_err(field)?;
                let rows = RowStream::open(&path, &options).map_err(|e| e.to_string())?;
                let mut left = max_requests.unwrap_or(u64::MAX);
                Box::new(
                    rows.take_while(move |r| {
                        !matches!(r, Ok(TraceRow { timing: Timing::At(t), .. }) if *t >= end)
                    })
                    .take_while(move |_| {
                        let more = left > 0;
                        left = left.saturating_sub(1);
                        more
                    }),
                )
            }
        };
        Ok(Box::new(rows.map(move |r| r.map(named))))
    }

    /// Sets the directory relative paths resolve against: the scenario file's, for the workload and
    /// for every class of a mix (whose traces and rate curves are named relative to the same file).
    pub fn set_base_dir(&mut self, dir: PathBuf) {
        for c in self.classes.iter_mut().flatten() {
            c.traffic.set_base_dir(dir.clone());
        }
        self.base_dir = dir;
    }

    /// The directory relative paths resolve against.
    pub fn base_dir(&self) -> &Path {
        &self.base_dir
    }
}

#[cfg(test)]
mod tests {
    use crate::scenario::Scenario;

    const SESSIONS: &str = r#"
name = "s"
duration = "60s"

[[workers]]
count = 1
gpu = "h100"
model = "llama-3.1-8b"

[workload]
kind = "sessions"
session_rate = 1.0
turns = { dist = "geometric", mean = 3 }
prompt = { dist = "fixed", tokens = 100 }
output = { dist = "fixed", tokens = 10 }
think_time = { dist = "fixed", value = "5s" }
"#;

    fn err(text: &str) -> String {
        Scenario::parse(text, "s.toml", &[])
            .unwrap_err()
            .to_string()
    }

    const BENCHMARK: &str = r#"
name = "b"
duration = "1h"

[[workers]]
count = 1
gpu = "h100"
model = "llama-3.1-8b"

[workload]
kind = "benchmark"
harness = "inferencemax"
clients = 8
prompt = { dist = "fixed", tokens = 1024 }
output = { dist = "fixed", tokens = 128 }
"#;

    /// `kind = "benchmark"` is the closed loop its harness runs: lengths redrawn around the nominal
    /// ones as the harness draws them, its request budget unless `requests` is given; a nominal length
    /// that is not fixed, a ratio outside the harness's domain, a missing harness and a key of another
    /// kind are each named.
    #[test]
    fn a_benchmark_is_its_harness_s_closed_loop() {
        use crate::workload::dist::LengthDist;
        let s = Scenario::parse(BENCHMARK, "s.toml", &[]).unwrap();
        let c = s.workload.closed_loop().unwrap();
        assert_eq!(c.requests.unwrap().0, 80);
        assert!(
            matches!(c.prompt, LengthDist::Uniform { min, max } if (min.0, max.0) == (819, 1024)),
            "{:?}",
            c.prompt
        );
        let vllm = BENCHMARK.replace("inferencemax", "vllm-bench");
        let s = Scenario::parse(&vllm, "s.toml", &["workload.requests=50".into()]).unwrap();
        let c = s.workload.closed_loop().unwrap();
        assert_eq!(c.requests.unwrap().0, 50);
        assert!(matches!(c.output, LengthDist::Fixed { tokens } if tokens.0 == 128));
        let e = err(&vllm.replace("clients = 8", "clients = 8\nrandom_range_ratio = 1.0"));
        assert!(
            e.contains("workload.random_range_ratio") && e.contains("[0, 1)"),
            "{e}"
        );
        let e = err(&BENCHMARK.replace(
            "prompt = { dist = \"fixed\", tokens = 1024 }",
            "prompt = { dist = \"uniform\", min = 10, max = 20 }",
        ));
        assert!(
            e.contains("workload.prompt") && e.contains("nominal"),
            "{e}"
        );
        let e = err(&BENCHMARK.replace("harness = \"inferencemax\"\n", ""));
        assert!(
            e.contains("workload.harness") && e.contains("required"),
            "{e}"
        );
        let e = err(&BENCHMARK.replace("harness = \"inferencemax\"", "harness = \"locust\""));
        assert!(e.contains("harness"), "{e}");
        let e = err(&BENCHMARK.replace("clients = 8", "clients = 8\nrate = 3.0"));
        assert!(
            e.contains("workload.rate") && e.contains("benchmark"),
            "{e}"
        );
    }

    /// The NVIDIA clients and GuideLLM take their own options in `[workload.options]`, by the names they
    /// give them; an option of another harness, a harness without a default budget and no `requests`,
    /// and a warm-up switched off behind the harness's back are each named.
    #[test]
    fn harness_options_are_the_harness_s_own() {
        use crate::metrics::bench::BenchDefinitions;
        use crate::workload::dist::LengthDist;
        let aiperf = BENCHMARK.replace("inferencemax", "aiperf")
            + "options = { synthetic_input_tokens_stddev = 100, warmup_request_count = 2 }\n";
        let c = Scenario::parse(&aiperf, "s.toml", &[])
            .unwrap()
            .workload
            .closed_loop()
            .unwrap();
        assert_eq!(c.requests.unwrap().0, 10);
        assert!(matches!(c.prompt, LengthDist::Normal { sd, .. } if sd == 100.0));
        assert!(matches!(c.output, LengthDist::Fixed { tokens } if tokens.0 == 128));
        assert_eq!(c.client.warmup_requests, 2);
        assert_eq!(c.client.definitions, BenchDefinitions::PerRequestItl);
        let genai = BENCHMARK.replace("inferencemax", "genai-perf");
        let c = Scenario::parse(&genai, "s.toml", &[])
            .unwrap()
            .workload
            .closed_loop()
            .unwrap();
        assert_eq!(c.requests.unwrap().0, 16);
        assert!(c.client.per_client_quota);
        assert_eq!(c.client.warmup_requests, 0);
        let e = err(&(BENCHMARK.replace("inferencemax", "aiperf")
            + "options = { prompt_tokens_stdev = 10 }\n"));
        assert!(
            e.contains("workload.options.prompt_tokens_stdev") && e.contains("aiperf"),
            "{e}"
        );
        let e = err(&BENCHMARK.replace("inferencemax", "guidellm"));
        assert!(
            e.contains("workload.requests") && e.contains("guidellm"),
            "{e}"
        );
        let guidellm = BENCHMARK.replace("inferencemax", "guidellm")
            + "requests = 40\noptions = { output_tokens_stdev = 16 }\n";
        let c = Scenario::parse(&guidellm, "s.toml", &[])
            .unwrap()
            .workload
            .closed_loop()
            .unwrap();
        assert_eq!(c.client.definitions, BenchDefinitions::Guidellm);
        assert!(matches!(
            c.output,
            LengthDist::Normal {
                min: 48,
                max: 208,
                ..
            }
        ));
        let e = err(&(BENCHMARK.to_string() + "frontend = { warmup = false }\n"));
        assert!(e.contains("workload.frontend.warmup"), "{e}");
        let e = err(&(BENCHMARK.to_string() + "options = { bogus = 1 }\n"));
        assert!(e.contains("bogus"), "{e}");
    }

    /// `kind = "stages"`: stages inline, `load` and `interval` defaulted as inference-perf's; an empty
    /// list, a zero duration, a missing list and another kind's key are each named.
    #[test]
    fn stages_are_checked_and_defaulted() {
        let text = BENCHMARK.replace(
            "kind = \"benchmark\"\nharness = \"inferencemax\"\nclients = 8\n",
            "kind = \"stages\"\nstages = [{ rate = 2, duration = \"10s\" }, { rate = 0.5, duration = \"3s\" }]\n",
        );
        let s = Scenario::parse(&text, "s.toml", &[]).unwrap();
        let c = s.workload.staged().unwrap();
        assert_eq!(c.stages.len(), 2);
        assert_eq!(c.stages[0].requests(), 20);
        assert_eq!(c.stages[1].requests(), 1);
        assert_eq!(c.load, super::StageLoad::Constant);
        assert_eq!(c.interval, crate::time::SimDuration::from_secs(1));
        let e = err(&text.replace(
            "stages = [{ rate = 2, duration = \"10s\" }, { rate = 0.5, duration = \"3s\" }]",
            "stages = []",
        ));
        assert!(
            e.contains("workload.stages") && e.contains("at least one"),
            "{e}"
        );
        let e = err(&text.replace("duration = \"3s\"", "duration = \"0s\""));
        assert!(e.contains("workload.stages[1].duration"), "{e}");
        let e = err(&text.replace("rate = 0.5", "rate = 1e300"));
        assert!(
            e.contains("workload.stages[1].rate") && e.contains("per second"),
            "{e}"
        );
        let e = err(&text.replace(
            "rate = 0.5, duration = \"3s\"",
            "rate = 1e5, duration = \"2h\"",
        ));
        assert!(
            e.contains("workload.stages[1].rate") && e.contains("in one stage"),
            "{e}"
        );
        let e = err(&text.replace(
            "stages = [{ rate = 2, duration = \"10s\" }, { rate = 0.5, duration = \"3s\" }]\n",
            "",
        ));
        assert!(
            e.contains("workload.stages") && e.contains("required"),
            "{e}"
        );
        let e = err(&text.replace("kind = \"stages\"", "kind = \"stages\"\nclients = 3"));
        assert!(
            e.contains("workload.clients") && e.contains("stages"),
            "{e}"
        );
        let e = err(&text.replace("kind = \"stages\"", "kind = \"stages\"\nload = \"bursty\""));
        assert!(e.contains("load"), "{e}");
    }

    #[test]
    fn session_keys_are_checked_against_the_kind() {
        Scenario::parse(SESSIONS, "s.toml", &[]).unwrap();
        let e = err(&SESSIONS.replace("session_rate = 1.0", "rate = 1.0"));
        assert!(
            e.contains("workload.rate: does not apply to kind = \"sessions\""),
            "{e}"
        );
        assert!(e.starts_with("s.toml:12:"), "{e}");
        let e = err(&SESSIONS.replace("session_rate = 1.0\n", ""));
        assert!(e.contains("workload.session_rate: required"), "{e}");
        let e = err(&SESSIONS.replace(
            "think_time = { dist = \"fixed\", value = \"5s\" }",
            "think_time = { dist = \"fixed\", tokens = 5 }",
        ));
        assert!(e.contains("unknown field `tokens`"), "{e}");
        let e = err(&SESSIONS.replace("mean = 3", "mean = 0.5"));
        assert!(
            e.starts_with("s.toml:13") && e.contains("workload.turns.mean"),
            "{e}"
        );
        let e = err(&SESSIONS.replace("kind = \"sessions\"", "kind = \"trace\""));
        assert!(e.contains("does not apply to kind = \"trace\""), "{e}");
        let e = err(&format!(
            "{SESSIONS}rate_curve = {{ path = \"no/such/curve.csv\" }}\n"
        ));
        assert!(
            e.contains("workload.rate_curve.path") && e.contains("curve.csv"),
            "{e}"
        );
        let e = err(&format!("{SESSIONS}mode = \"sideways\"\n"));
        assert!(e.contains("unknown name `sideways`"), "{e}");
    }

    #[test]
    fn trace_keys_are_checked_and_paths_resolve_against_the_scenario() {
        let trace = |extra: &str| {
            format!(
                "name = \"t\"\nduration = \"1h\"\n[[workers]]\ncount = 1\ngpu = \"h100\"\nmodel = \"llama-3.1-8b\"\n[workload]\nkind = \"trace\"\n{extra}"
            )
        };
        let e = err(&trace(""));
        assert!(e.contains("workload.path: required"), "{e}");
        let e = err(&trace("path = \"missing.jsonl\"\n"));
        assert!(
            e.contains("workload.path") && e.contains("missing.jsonl"),
            "{e}"
        );
        // The scenario's directory is where relative paths start.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let file = dir.join("virtual.toml").display().to_string();
        let ok = Scenario::parse(
            &trace("path = \"../traces/mooncake/synthetic_trace.jsonl\"\n"),
            &file,
            &[],
        )
        .unwrap();
        assert_eq!(ok.workload.base_dir(), dir.as_path());
        let e = Scenario::parse(
            &trace("path = \"../traces/azure-llm-2023/AzureLLMInferenceTrace_code.csv\"\nreconstruct_sessions = true\n"),
            &file,
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("reconstruct_sessions: applies to Mooncake traces, and this one is azure"),
            "{e}"
        );
    }

    #[test]
    fn a_mix_class_resolves_its_paths_against_the_scenario_too() {
        // A class's rate curve named relative to the scenario file loads from the scenario's
        // directory, not the working directory (it once did the latter).
        let text = "name = \"t\"\nduration = \"1h\"\n[[workers]]\ncount = 1\ngpu = \"h100\"\nmodel = \"llama-3.1-8b\"\n[workload]\nkind = \"mix\"\n[[workload.classes]]\nname = \"a\"\n[workload.classes.traffic]\nkind = \"poisson\"\nrate = 1\nrate_curve = { path = \"../traces/servegen/deepseek-r1_aggregate_rate_10min.csv\" }\nprompt = { dist = \"fixed\", tokens = 10 }\noutput = { dist = \"fixed\", tokens = 10 }\n";
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let file = dir.join("virtual.toml").display().to_string();
        let ok = Scenario::parse(text, &file, &[]).unwrap();
        let class = &ok.workload.classes.as_ref().unwrap()[0].traffic;
        assert_eq!(class.base_dir(), dir.as_path());
        assert!(class.open_loop().unwrap().curve.is_some());
    }

    const CONVERSATIONS: &str = r#"
name = "c"
duration = "1h"

[[workers]]
count = 1
gpu = "l4"
model = "llama-3.1-8b"
precision = "fp8"

[workload]
kind = "benchmark"
harness = "vllm-bench"
clients = 16
requests = 40
options = { request_rate = 50 }

[workload.conversation_prompts]
conversations = 3
messages = { dist = "fixed", tokens = 8 }
user = { dist = "fixed", tokens = 30 }
reply = { dist = "fixed", tokens = 70 }
pool = 10
"#;

    /// A benchmark over conversation prompts: vllm-bench's budget, warm-up and `--request-rate`, the
    /// dataset's own lengths; `prompt`, `output`, a range ratio, another harness, a bad rate and a bad
    /// dataset key are each named. The run sends the pool's prompts, each conversation as a session.
    #[test]
    fn a_benchmark_can_send_conversation_prompts_at_a_request_rate() {
        let s = Scenario::parse(CONVERSATIONS, "s.toml", &[]).unwrap();
        let c = s.workload.closed_loop().unwrap();
        assert_eq!(c.requests.unwrap().0, 40);
        assert_eq!(c.client.request_rate, Some(50.0));
        assert_eq!(c.client.warmup_requests, 1);
        assert!(c.conversations.is_some());
        let mut w = s
            .workload
            .build(1, crate::time::SimTime::MAX, None)
            .unwrap()
            .workload;
        // The warm-up first: one of the pool's prompts of 1, 3, 5 or 7 messages (30, 130, 230, 330
        // tokens), completed by a reply of 70, its conversation its session.
        let warm = w.next_arrival().unwrap();
        assert!(
            [30, 130, 230, 330].contains(&warm.prompt_tokens),
            "{warm:?}"
        );
        assert_eq!(warm.output_tokens, 70);
        assert!(warm.session.is_some_and(|r| r.id < 3));
        for (edit, key) in [
            (
                "kind = \"benchmark\"\n",
                "kind = \"benchmark\"\nprompt = { dist = \"fixed\", tokens = 10 }\n",
            ),
            ("harness = \"vllm-bench\"", "harness = \"aiperf\""),
            ("request_rate = 50", "request_rate = -1"),
            ("request_rate = 50", "random_range_ratio = 0.5"),
            ("pool = 10", "pool = 10\nturns = 3"),
            ("tokens = 8", "tokens = 0"),
        ] {
            let e = err(&CONVERSATIONS.replace(edit, key));
            let want = match key {
                k if k.contains("prompt =") => "workload.prompt",
                k if k.contains("aiperf") => "conversation_prompts",
                k if k.contains("-1") => "request_rate",
                k if k.contains("random_range") => "random_range_ratio",
                k if k.contains("turns") => "turns",
                _ => "s.toml:20:",
            };
            assert!(e.contains(want), "{key}: {e}");
        }
    }
}
