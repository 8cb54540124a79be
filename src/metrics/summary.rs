//! The run summary: the stable keys of `summary.json` (ARCHITECTURE §2.3), derived once at the end.
//!
//! Nothing here depends on the machine or the wall clock, so the same scenario and seed give the same
//! bytes. Floats are rounded (latencies to the nanosecond, ratios to 1e-6) so that the text is stable.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::collector::{Breakdown, Collector, Latency, PROMPT_BUCKETS, TURN_GROUPS};
use super::record::RecomputeCause;
use super::recovery::{self, Recovery};
use super::steady::Steady;

/// Keys of `summary.json`. Add keys freely; never rename one.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    pub scenario: String,
    pub policy: String,
    pub seed: u64,
    pub requests: Requests,
    pub ttft_ms: Dist,
    pub tpot_ms: Dist,
    pub e2e_ms: Dist,
    pub queue_ms: Dist,
    pub throughput: Throughput,
    pub goodput: Goodput,
    pub prefix_cache: PrefixCache,
    pub recompute: RecomputeSummary,
    pub preemptions: u64,
    pub sessions: SessionSummary,
    /// One entry per fault: baseline, worst window, what it cost, time to recover.
    pub recovery: Vec<Recovery>,
    pub router: RouterSummary,
    pub workers: Vec<WorkerSummary>,
    pub sim: SimInfo,
    /// Where a completed request's time goes: queue wait, prefill, decode (and TTFT, E2E as totals).
    pub phases_ms: Vec<Phase>,
    /// TTFT by conversation turn (`"0"` is the cold first turn; the last group pools later turns);
    /// only groups with requests, and empty without sessions.
    pub ttft_by_turn_ms: Vec<Group>,
    /// TTFT by prompt length in tokens (`"512-2047"`); only buckets with requests.
    pub ttft_by_prompt_ms: Vec<Group>,
    /// A benchmark client's own measurements (`concurrency` and `benchmark` workloads): TTFT, TPOT and
    /// ITL as the client defines them (`vllm bench serve`'s unless `definitions` says otherwise), from
    /// the client's side, with the warm-up apart. The latencies above are the engine's (gateway arrival
    /// to token) and include the warm-up requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub benchmark: Option<super::bench::BenchReport>,
    /// With a staged workload (`kind = "stages"`): each stage and the run as inference-perf reports
    /// them (output throughput over first send to last response, drains included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stages: Option<super::stages::StageReport>,
    /// KV offload tiers, in order below the GPU (`host`, `disk`, `shared`); absent when none is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tiers: Option<Vec<TierSummary>>,
    /// Per traffic class (`kind = "mix"`), in `[[workload.classes]]` order; absent without a mix.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<super::classes::ClassSummary>,
    /// Energy from the per-GPU power model (`hardware::power`); absent only in summaries written
    /// before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy: Option<EnergySummary>,
    /// Prefill/decode disaggregation's hand-offs; absent in an aggregated fleet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disaggregation: Option<DisaggSummary>,
    /// Prefixes pulled from other workers' GPU caches; absent unless `[interconnect] peer_transfer`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_transfer: Option<PeerSummary>,
    /// Hot prefixes copied to more workers; absent unless `[interconnect.replication]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication: Option<ReplicationSummary>,
    /// Requests placed by model: swaps, held requests, replicas per model (when a request names a
    /// model or a worker group may swap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub models: Option<super::models::ModelsSummary>,
    /// LoRA adapters: loads, slot waits, rejections (when a group has `[workers.lora]` or a request
    /// names an adapter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lora: Option<super::lora::LoraSummary>,
    /// The headline numbers of this run's no-fault twin (the same scenario and seeds without its
    /// faults), against which `recovery[]` is judged; absent without faults or with `--no-twin`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub twin: Option<TwinSummary>,
    /// The scenario's `[meta]` notes (the question it answers, the conclusion, when to retest), shown
    /// at the top of `summary.md` and the report page; absent when it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<MetaNotes>,
    /// With `--replications N` (N > 1): every headline metric's mean and 95% confidence interval over
    /// the replications. The rest of this summary is the first replication's (the scenario's seed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replications: Option<super::intervals::Intervals>,
    /// With `[slo] window`: the worst p95 TTFT and TPOT over the steady state's windows of that width.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_window: Option<super::timeseries::WorstWindows>,
    /// Where steady state starts: `ttft_ms`, `tpot_ms`, `e2e_ms`, `queue_ms`, `throughput`,
    /// `goodput`, `prefix_cache`, `phases_ms`, the TTFT breakdowns and the classes' latencies count
    /// only the requests that arrived at or after `warmup_s`; absent only in summaries written before
    /// it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<super::warmup::WarmupSummary>,
    /// With `[autoscaler]`: scaling decisions, replicas, replica-hours, cost, cold-start hits and SLO
    /// attainment over time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaler: Option<super::replicas::AutoscaleSummary>,
}

/// A scenario's `[meta]` notes as the outputs show them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MetaNotes {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conclusion: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retest_when: Vec<String>,
}

impl MetaNotes {
    /// The notes as lines of text (`question: ...`), in a fixed order; empty without notes.
    pub fn lines(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if let Some(q) = &self.question {
            out.push(("question", q.clone()));
        }
        if let Some(c) = &self.conclusion {
            out.push(("conclusion", c.clone()));
        }
        if !self.retest_when.is_empty() {
            out.push(("retest when", self.retest_when.join("; ")));
        }
        out
    }
}

/// A no-fault twin's headline numbers (`summary.json` `twin`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TwinSummary {
    pub completed: u64,
    pub failed: u64,
    pub ttft_p50_ms: f64,
    pub ttft_p95_ms: f64,
    pub ttft_p99_ms: f64,
    pub goodput_fraction: f64,
    pub prefix_hit_rate: f64,
    pub recompute_tokens: u64,
    pub sessions_reset: u64,
    /// The twin's own steady-state start (its latencies and goodput above count the requests after
    /// it); detected over the same horizon as the faulted run's, which ends at the first fault.
    #[serde(default)]
    pub warmup_s: f64,
}

impl TwinSummary {
    pub fn of(s: &Summary) -> Self {
        TwinSummary {
            completed: s.requests.completed,
            failed: s.requests.failed,
            ttft_p50_ms: s.ttft_ms.p50,
            ttft_p95_ms: s.ttft_ms.p95,
            ttft_p99_ms: s.ttft_ms.p99,
            goodput_fraction: s.goodput.fraction,
            prefix_hit_rate: s.prefix_cache.hit_rate,
            recompute_tokens: s.recompute.tokens,
            sessions_reset: s.sessions.reset,
            warmup_s: s.warmup.as_ref().map_or(0.0, |w| w.warmup_s),
        }
    }
}

/// The fleet's energy over the run (`summary.json` `energy`), from `hardware::power`: idle power while
/// a worker runs no step, busy power growing with each step's roofline utilisation, capped at TDP.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EnergySummary {
    /// Every GPU of every worker over the simulated time, J.
    pub joules: f64,
    /// `joules` over completed requests (all energy, idle included, charged to the work done); `null`
    /// when none completed.
    pub per_completed_request_j: Option<f64>,
    /// `joules` over the output tokens of completed requests; `null` when there are none.
    pub per_output_token_j: Option<f64>,
    /// `joules` over the simulated time, W.
    pub fleet_average_power_w: f64,
    /// GPUs in the fleet (workers × TP).
    pub gpus: u64,
    /// Whether every GPU's power model was checked against measured power (only the A100 is).
    pub validated: bool,
}

impl EnergySummary {
    /// The summary of `joules` spent by `gpus` GPUs over `simulated_s` seconds for `completed`
    /// requests that generated `output_tokens`.
    pub fn of(
        joules: f64,
        gpus: u64,
        validated: bool,
        simulated_s: f64,
        completed: u64,
        output_tokens: u64,
    ) -> Self {
        EnergySummary {
            joules: round(joules, 3),
            per_completed_request_j: (completed > 0).then(|| round(joules / completed as f64, 6)),
            per_output_token_j: (output_tokens > 0)
                .then(|| round(joules / output_tokens as f64, 6)),
            fleet_average_power_w: if simulated_s > 0.0 {
                round(joules / simulated_s, 3)
            } else {
                0.0
            },
            gpus,
            validated,
        }
    }
}

/// What peer transfers (a worker pulling a prefix from another's GPU cache) did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PeerSummary {
    pub transfers: u64,
    pub blocks_transferred: u64,
    pub bytes_transferred: u64,
    /// Prompt tokens pulled instead of recomputed.
    pub recompute_avoided_tokens: u64,
    /// Transfer time (queueing on the ports included).
    pub mean_transfer_ms: f64,
    /// Transfers whose source failed before they landed (the request recomputed the blocks).
    pub lost_to_source_failure: u64,
}

/// What hot-prefix replication (`[interconnect.replication]`) did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReplicationSummary {
    /// Times a prefix's request rate crossed the threshold.
    pub hot_prefixes: u64,
    /// Copies booked on the interconnect.
    pub copies: u64,
    pub blocks_transferred: u64,
    pub bytes_transferred: u64,
    /// Blocks the targets registered in their prefix caches (at most `blocks_transferred`: a copy
    /// stops short on a target with no free block).
    pub blocks_registered: u64,
    /// Transfer time (queueing on the ports included).
    pub mean_transfer_ms: f64,
    /// Copies whose source or target failed before they landed.
    pub lost_to_failure: u64,
}

/// What a disaggregated fleet's prefill-to-decode hand-offs did.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DisaggSummary {
    /// Workers by role.
    pub prefill_workers: u32,
    pub decode_workers: u32,
    pub both_workers: u32,
    /// Requests whose KV moved from a prefill to a decode worker, over NVLink and over RDMA.
    pub handoffs: u64,
    pub nvlink_handoffs: u64,
    pub rdma_handoffs: u64,
    /// KV moved: blocks the decode worker lacked, and their bytes over all GPUs.
    pub blocks_transferred: u64,
    pub bytes_transferred: u64,
    /// Transfer time (queueing on the ports included), mean and worst.
    pub mean_transfer_ms: f64,
    pub max_transfer_ms: f64,
    /// Hand-offs lost to a failure of either side (then retried or failed as `gateway.in_flight` says).
    pub lost_in_handoff: u64,
}

/// One phase of completed requests' time.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Phase {
    /// `queue`, `prefill`, `decode`, `ttft` or `e2e`.
    pub phase: String,
    /// From which event to which.
    pub span: String,
    #[serde(flatten)]
    pub dist: Dist,
    /// Mean of this phase over mean E2E.
    pub share_of_e2e: Option<f64>,
}

/// A latency distribution of one group of requests.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Group {
    pub group: String,
    #[serde(flatten)]
    pub dist: Dist,
}

/// What one KV tier did over a run (summed over workers for `host` and `disk`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TierSummary {
    pub tier: String,
    /// Capacity in blocks (per worker for `host` and `disk`, of worker 0 when they differ); `None` for
    /// an unbounded store (`gateway.shared_tier` without `capacity_gb`).
    pub capacity_blocks: Option<u64>,
    /// Blocks looked up here because the GPU and every tier above lacked them, and of those, found.
    pub lookups: u64,
    pub hits: u64,
    pub hit_rate: f64,
    /// Blocks loaded into GPU memory (found blocks that were cheaper to recompute are not).
    pub blocks_loaded: u64,
    pub blocks_written: u64,
    /// Blocks pushed out when full (to the next tier down, or gone).
    pub blocks_evicted: u64,
    /// Bytes moved: blocks moved × block bytes (every GPU's shard).
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Tokens loaded from this tier instead of recomputed.
    pub recompute_avoided_tokens: u64,
}

/// How well the router's cache picture matched the workers' real caches, over all decisions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ViewAccuracy {
    /// Decisions made.
    pub decisions: u64,
    /// Decisions where the router expected more cached prompt blocks on the chosen worker than it had.
    pub expected_hit_missing: u64,
    /// Blocks expected but not there, summed.
    pub expected_hit_missing_blocks: u64,
    /// Decisions where the chosen worker had more cached prompt blocks than the router knew.
    pub unexpected_hit: u64,
    /// Blocks there but not expected, summed.
    pub unexpected_hit_blocks: u64,
}

/// The router: its policy, its cache view, and how often its picture of the caches was wrong.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RouterSummary {
    pub policy: String,
    /// `oracle`, `events` or `approximate`; absent for policies that do not look at caches.
    pub view: Option<String>,
    pub accuracy: ViewAccuracy,
    /// Several router replicas (`router.replicas` > 1): how many, and how they were fed and kept in
    /// step; absent for one router.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<RouterReplicas>,
}

/// Router replicas behind a load balancer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RouterReplicas {
    pub count: u32,
    /// `random`, `round_robin` or `session`.
    pub spread: String,
    /// `none` or `decisions`.
    pub sync: String,
    /// How late a replica learns another's decisions (`sync = "decisions"` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_delay_ms: Option<f64>,
}

/// Conversations (multi-turn sessions).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionSummary {
    /// Sessions that started (their first turn arrived).
    pub total: u64,
    /// Requests that were a turn of some session.
    pub turns: u64,
    /// Turns that started a new conversation because the old one's state was lost with its worker
    /// (session state `worker`).
    pub reset: u64,
    /// Later turns (not a conversation's first) served without their history: it was dropped with
    /// the conversation's state, or the previous turn never completed.
    #[serde(default)]
    pub turns_without_history: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Requests {
    pub arrived: u64,
    pub completed: u64,
    pub failed: u64,
    pub rejected: u64,
    /// Requests that needed more than one attempt (retries after errors, or migrations).
    pub retried: u64,
    /// Requests with an attempt that ended by the gateway's idle timeout.
    pub timed_out: u64,
    /// Requests migrated off a failed worker (continued elsewhere).
    pub migrated: u64,
    /// Rejected requests by reason (keys sorted).
    pub rejected_by_reason: BTreeMap<String, u64>,
    /// Failed requests by reason (keys sorted).
    pub failed_by_reason: BTreeMap<String, u64>,
}

/// A latency distribution in milliseconds. With `count` 0 the other fields are 0 in Rust and `null` in
/// `summary.json`, and print as "–": statistics of nothing are not zero.
#[derive(Debug, Clone)]
pub struct Dist {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

impl Serialize for Dist {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let value = |v: f64| (self.count > 0).then_some(v);
        let mut st = s.serialize_struct("Dist", 7)?;
        st.serialize_field("count", &self.count)?;
        st.serialize_field("mean", &value(self.mean))?;
        st.serialize_field("p50", &value(self.p50))?;
        st.serialize_field("p90", &value(self.p90))?;
        st.serialize_field("p95", &value(self.p95))?;
        st.serialize_field("p99", &value(self.p99))?;
        st.serialize_field("max", &value(self.max))?;
        st.end()
    }
}

/// Reads what [`Dist`]'s `Serialize` writes (a `summary.json` read back by `fleetsim report`): `null`
/// statistics of an empty distribution become 0 again.
impl<'de> Deserialize<'de> for Dist {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Raw {
            count: u64,
            mean: Option<f64>,
            p50: Option<f64>,
            p90: Option<f64>,
            p95: Option<f64>,
            p99: Option<f64>,
            max: Option<f64>,
        }
        let r = Raw::deserialize(d)?;
        let v = |x: Option<f64>| x.unwrap_or(0.0);
        Ok(Dist {
            count: r.count,
            mean: v(r.mean),
            p50: v(r.p50),
            p90: v(r.p90),
            p95: v(r.p95),
            p99: v(r.p99),
            max: v(r.max),
        })
    }
}

impl Dist {
    /// `v` with two decimals, or "–" for a distribution of nothing.
    pub(crate) fn cell(&self, v: f64) -> String {
        if self.count == 0 {
            "–".to_string()
        } else {
            format!("{v:.2}")
        }
    }

    pub(crate) fn of(l: &Latency) -> Self {
        let ms = |ns: f64| round(ns / 1e6, 6);
        Dist {
            count: l.count(),
            mean: ms(l.mean()),
            p50: ms(l.quantile(0.50)),
            p90: ms(l.quantile(0.90)),
            p95: ms(l.quantile(0.95)),
            p99: ms(l.quantile(0.99)),
            max: ms(l.max() as f64),
        }
    }
}

/// Completed steady-state requests and their tokens over the steady span (warm-up end to the end of
/// the run).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Throughput {
    pub requests_per_s: f64,
    pub input_tokens_per_s: f64,
    pub output_tokens_per_s: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Goodput {
    pub slo_ttft_ms: Option<f64>,
    pub slo_tpot_ms: Option<f64>,
    /// Completed requests meeting every SLO that is set, over all requests that arrived (steady
    /// state: both counted from the warm-up end).
    pub fraction: f64,
    /// Good requests per second of the steady span (warm-up end to the end of the run).
    pub requests_per_s: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PrefixCache {
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub hit_rate: f64,
    /// Prompt tokens loaded from the shared KV store instead of computed (not counted as cache hits).
    pub loaded_tokens: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CauseCost {
    pub tokens: u64,
    pub gpu_seconds: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ByCause {
    pub evicted: CauseCost,
    pub misrouted: CauseCost,
    pub failure: CauseCost,
    pub preempted: CauseCost,
    /// Prompt and generated tokens that migrated requests prefilled again.
    pub migrated: CauseCost,
    /// A conversation's history computed on another worker that no live worker held any more.
    pub moved: CauseCost,
}

impl ByCause {
    /// Every cause with its name, in report order ([`RecomputeCause::ALL`]).
    pub fn named(&self) -> [(&'static str, &CauseCost); 6] {
        [
            ("evicted", &self.evicted),
            ("misrouted", &self.misrouted),
            ("failure", &self.failure),
            ("preempted", &self.preempted),
            ("migrated", &self.migrated),
            ("moved", &self.moved),
        ]
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecomputeSummary {
    pub tokens: u64,
    pub gpu_seconds: f64,
    /// Prompt tokens prefilled again that the fleet had computed before (a conversation's history, a
    /// request's own lost progress, content cached or evicted elsewhere), counted by position; equal to
    /// `tokens`, the sum over causes (checked at the end of every run).
    pub history_reprefilled_tokens: u64,
    /// Prompt tokens computed in all (first computation and recompute).
    pub prefill_tokens: u64,
    pub by_cause: ByCause,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerSummary {
    pub id: usize,
    pub gpu: String,
    pub model: String,
    pub tp: u32,
    pub precision: String,
    /// The KV cache's data type (`kv_cache_dtype`; BF16 unless set).
    #[serde(default)]
    pub kv_cache_dtype: String,
    /// The step-time profile used: a configuration, `spec-scaled from …`, a profile file, or
    /// `published defaults`.
    pub profile: String,
    /// Whether that profile was fitted to measurements of this very configuration.
    pub calibrated: bool,
    /// Share of the simulated time a step was running (its step-time share; the key keeps its old
    /// name, `busy_fraction`, for the scripts that read it). Not compute utilisation: a worker
    /// stepping a small decode batch back to back reads near 1 here at a few percent `mfu`.
    #[serde(rename = "busy_fraction")]
    pub step_time_fraction: f64,
    /// Model FLOPs utilisation over the run ([`super::mfu`]): the model FLOPs of the completed requests
    /// the worker served over its GPUs' tensor peak for the simulated time. Absent in a disaggregated
    /// fleet (a request is recorded at its decode worker only) and in summaries written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mfu: Option<f64>,
    pub requests: u64,
    /// Fraction of all completed requests this worker served.
    pub share: f64,
    pub steps: u64,
    pub kv_blocks: u32,
    pub kv_peak_fraction: f64,
    pub preemptions: u64,
    pub evictions: u64,
    /// This worker's GPUs' energy over the run, J (`hardware::power`).
    #[serde(default)]
    pub energy_j: f64,
    /// `prefill` or `decode` in a disaggregated fleet; absent for a `both` worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The shared GPU this engine runs on with others (`colocate`); absent when it has its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_gpu: Option<usize>,
    /// Seconds this engine's steps waited for its shared GPU while another engine stepped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_wait_s: Option<f64>,
    /// The MIG slice the engine runs on (`3g.40gb`); absent on a whole GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SimInfo {
    pub simulated_s: f64,
    pub events: u64,
    /// Why the run stopped before every request finished (the simulated-time budget ran out); absent
    /// for a run that went to its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
}

/// Appends a table of one row to `o`: `title` heads the first column, which the row leaves empty, and
/// each `(heading, value)` pair is a right-aligned column.
fn one_row_table(o: &mut String, title: &str, cells: &[(&str, String)]) {
    use std::fmt::Write;
    let _ = write!(o, "\n| {title} |");
    for (heading, _) in cells {
        let _ = write!(o, " {heading} |");
    }
    o.push_str("\n|---|");
    for _ in cells {
        o.push_str("---:|");
    }
    o.push_str("\n| |");
    for (_, value) in cells {
        let _ = write!(o, " {value} |");
    }
    o.push('\n');
}

/// Bytes as gigabytes with two decimals.
fn gb(bytes: u64) -> String {
    format!("{:.2}", bytes as f64 / 1e9)
}

/// Mean of `count` transfers taking `total_s` seconds together, in milliseconds rounded as the summary
/// rounds; 0 when there were none.
pub fn mean_ms(total_s: f64, count: u64) -> f64 {
    if count > 0 {
        round(total_s / count as f64 * 1e3, 6)
    } else {
        0.0
    }
}

/// Rounds to `digits` decimals (for stable, readable output).
pub fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

fn by_reason(m: &BTreeMap<&'static str, u64>) -> BTreeMap<String, u64> {
    m.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { round(a / b, 6) } else { 0.0 }
}

fn phases(c: &Steady) -> Vec<Phase> {
    let e2e = c.e2e.mean();
    let b = &c.breakdown;
    [
        ("queue", "arrival → first scheduled", &c.queue),
        ("prefill", "first scheduled → first token", &b.prefill),
        ("decode", "first token → finish", &b.decode),
        ("ttft", "arrival → first token", &c.ttft),
        ("e2e", "arrival → finish", &c.e2e),
    ]
    .into_iter()
    .map(|(phase, span, l)| Phase {
        phase: phase.to_string(),
        span: span.to_string(),
        dist: Dist::of(l),
        share_of_e2e: (l.count() > 0 && e2e > 0.0).then(|| round(l.mean() / e2e, 6)),
    })
    .collect()
}

fn turn_groups(b: &Breakdown) -> Vec<Group> {
    b.ttft_by_turn
        .iter()
        .enumerate()
        .filter(|(_, l)| l.count() > 0)
        .map(|(i, l)| Group {
            group: if i + 1 == TURN_GROUPS {
                format!("{i}+")
            } else {
                i.to_string()
            },
            dist: Dist::of(l),
        })
        .collect()
}

fn prompt_groups(b: &Breakdown) -> Vec<Group> {
    b.ttft_by_prompt
        .iter()
        .enumerate()
        .filter(|(_, l)| l.count() > 0)
        .map(|(i, l)| Group {
            group: match PROMPT_BUCKETS.get(i + 1) {
                Some(next) => format!("{}-{}", PROMPT_BUCKETS[i], next - 1),
                None => format!("{}+", PROMPT_BUCKETS[i]),
            },
            dist: Dist::of(l),
        })
        .collect()
}

impl Summary {
    /// Derives the summary from a finished run whose warm-up is done ([`Collector::finish_warmup`]).
    pub fn build(
        scenario: &str,
        seed: u64,
        router: RouterSummary,
        c: &Collector,
        workers: Vec<WorkerSummary>,
        simulated_s: f64,
        events: u64,
    ) -> Self {
        let warmup = c
            .warmup
            .result()
            .expect("Collector::finish_warmup runs before Summary::build")
            .clone();
        let st = &c.steady;
        let steady_s = super::steady::span_s(simulated_s, warmup.warmup_s);
        let cost = |cause: RecomputeCause| CauseCost {
            tokens: c.recompute.tokens[cause.index()],
            gpu_seconds: round(c.recompute.gpu_seconds[cause.index()], 6),
        };
        Summary {
            scenario: scenario.to_string(),
            policy: router.policy.clone(),
            seed,
            requests: Requests {
                arrived: c.arrived,
                completed: c.completed,
                failed: c.failed,
                rejected: c.rejected,
                retried: c.retried,
                timed_out: c.timed_out,
                migrated: c.migrated,
                rejected_by_reason: by_reason(&c.rejected_by_reason),
                failed_by_reason: by_reason(&c.failed_by_reason),
            },
            ttft_ms: Dist::of(&st.ttft),
            tpot_ms: Dist::of(&st.tpot),
            e2e_ms: Dist::of(&st.e2e),
            queue_ms: Dist::of(&st.queue),
            throughput: Throughput {
                requests_per_s: ratio(st.completed as f64, steady_s),
                input_tokens_per_s: ratio(st.prompt_tokens as f64, steady_s),
                output_tokens_per_s: ratio(st.output_tokens as f64, steady_s),
            },
            goodput: Goodput {
                slo_ttft_ms: c.slo.ttft.map(|d| d.as_millis_f64()),
                slo_tpot_ms: c.slo.tpot.map(|d| d.as_millis_f64()),
                fraction: ratio(st.good as f64, st.arrived as f64),
                requests_per_s: ratio(st.good as f64, steady_s),
            },
            prefix_cache: PrefixCache {
                prompt_tokens: st.prompt_tokens,
                cached_tokens: st.cached_tokens,
                hit_rate: ratio(st.cached_tokens as f64, st.prompt_tokens as f64),
                loaded_tokens: st.loaded_tokens,
            },
            recompute: RecomputeSummary {
                tokens: c.recompute.total_tokens(),
                gpu_seconds: round(c.recompute.total_gpu_seconds(), 6),
                history_reprefilled_tokens: c.recompute.reprefilled_tokens,
                prefill_tokens: c.prefill_tokens,
                by_cause: ByCause {
                    evicted: cost(RecomputeCause::Evicted),
                    misrouted: cost(RecomputeCause::Misrouted),
                    failure: cost(RecomputeCause::Failure),
                    preempted: cost(RecomputeCause::Preempted),
                    migrated: cost(RecomputeCause::Migrated),
                    moved: cost(RecomputeCause::Moved),
                },
            },
            preemptions: c.preemptions,
            sessions: SessionSummary {
                total: c.sessions_started,
                turns: c.session_requests,
                reset: c.sessions_reset,
                turns_without_history: c.turns_without_history,
            },
            recovery: recovery::analyse(&c.recovery_view(), None),
            router,
            workers,
            sim: SimInfo {
                simulated_s: round(simulated_s, 9),
                events,
                stopped: None,
            },
            phases_ms: phases(st),
            ttft_by_turn_ms: turn_groups(&st.breakdown),
            ttft_by_prompt_ms: prompt_groups(&st.breakdown),
            benchmark: None,
            stages: None,
            tiers: None,
            classes: c
                .classes
                .iter()
                .zip(&st.classes)
                .map(|(k, s)| super::classes::ClassSummary::of(k, s, steady_s))
                .collect(),
            energy: None,
            disaggregation: None,
            peer_transfer: None,
            replication: None,
            models: None,
            lora: None,
            twin: None,
            meta: None,
            replications: None,
            slo_window: c.slo.window.and_then(|w| {
                let from = crate::time::SimTime((warmup.warmup_s * 1e9).round() as u64);
                c.series.worst_windows(w, from, c.arrivals_end)
            }),
            warmup: Some(warmup),
            autoscaler: None,
        }
    }

    /// `summary.json`: pretty-printed, newline-terminated.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("summary serialises");
        s.push('\n');
        s
    }

    /// `summary.md`: the headline numbers as Markdown tables.
    pub fn to_markdown(&self) -> String {
        use std::fmt::Write;
        let mut o = String::new();
        let r = &self.requests;
        let _ = writeln!(
            o,
            "# {} — policy `{}`, seed {}\n",
            self.scenario, self.policy, self.seed
        );
        for (k, v) in self.meta.iter().flat_map(MetaNotes::lines) {
            let _ = writeln!(o, "**{k}:** {v}\n");
        }
        let _ = writeln!(
            o,
            "Requests: {} arrived, {} completed, {} failed, {} rejected ({} retried). Simulated {:.1} s, {} events.\n",
            r.arrived,
            r.completed,
            r.failed,
            r.rejected,
            r.retried,
            self.sim.simulated_s,
            self.sim.events
        );
        if let Some(why) = &self.sim.stopped {
            let _ = writeln!(o, "**Stopped early**: {why}.\n");
        }
        if let Some(iv) = &self.replications {
            let _ = writeln!(o, "{}", iv.to_markdown());
            let _ = writeln!(
                o,
                "## Replication 1 (seed {})\n\nThe tables below are the first replication's; the others' are in `replications/`.\n",
                self.seed
            );
        }
        if let Some(w) = &self.warmup {
            let _ = writeln!(o, "Warm-up: {}.\n", w.line());
        }
        for (what, reasons) in [
            ("Rejected", &r.rejected_by_reason),
            ("Failed", &r.failed_by_reason),
        ] {
            if !reasons.is_empty() {
                let list: Vec<String> = reasons.iter().map(|(k, v)| format!("{v} {k}")).collect();
                let _ = writeln!(o, "{what}: {}.\n", list.join(", "));
            }
        }
        let _ = writeln!(o, "| latency (ms) | mean | p50 | p90 | p95 | p99 | max |");
        let _ = writeln!(o, "|---|---:|---:|---:|---:|---:|---:|");
        for (name, d) in [
            ("TTFT", &self.ttft_ms),
            ("TPOT", &self.tpot_ms),
            ("E2E", &self.e2e_ms),
            ("queue", &self.queue_ms),
        ] {
            let _ = writeln!(
                o,
                "| {name} | {} | {} | {} | {} | {} | {} |",
                d.cell(d.mean),
                d.cell(d.p50),
                d.cell(d.p90),
                d.cell(d.p95),
                d.cell(d.p99),
                d.cell(d.max)
            );
        }
        self.breakdown_markdown(&mut o);
        let t = &self.throughput;
        let _ = writeln!(o, "\n| metric | value |\n|---|---:|");
        let _ = writeln!(o, "| throughput (req/s) | {:.2} |", t.requests_per_s);
        let _ = writeln!(o, "| input tokens/s | {:.0} |", t.input_tokens_per_s);
        let _ = writeln!(o, "| output tokens/s | {:.0} |", t.output_tokens_per_s);
        let g = &self.goodput;
        let slo = match (g.slo_ttft_ms, g.slo_tpot_ms) {
            (None, None) => "no SLO set".to_string(),
            (a, b) => format!(
                "TTFT ≤ {} ms, TPOT ≤ {} ms",
                a.map_or("–".into(), |v| v.to_string()),
                b.map_or("–".into(), |v| v.to_string())
            ),
        };
        let _ = writeln!(o, "| goodput ({slo}) | {:.1}% |", g.fraction * 100.0);
        let _ = writeln!(
            o,
            "| prefix-cache hit rate | {:.1}% |",
            self.prefix_cache.hit_rate * 100.0
        );
        if self.tiers.is_some() {
            let p = &self.prefix_cache;
            let _ = writeln!(
                o,
                "| prompt tokens loaded from KV tiers | {} ({:.1}% of prompt tokens) |",
                p.loaded_tokens,
                p.loaded_tokens as f64 * 100.0 / p.prompt_tokens.max(1) as f64
            );
        }
        let rc = &self.recompute;
        let _ = writeln!(
            o,
            "| recomputed tokens | {} ({:.2} GPU-s) |",
            rc.tokens, rc.gpu_seconds
        );
        for (name, c) in rc.by_cause.named() {
            let _ = writeln!(
                o,
                "| · {name} | {} ({:.2} GPU-s) |",
                c.tokens, c.gpu_seconds
            );
        }
        for t in self.tiers.iter().flatten() {
            let _ = writeln!(
                o,
                "| · avoided by loading from {} | {} |",
                t.tier, t.recompute_avoided_tokens
            );
        }
        let _ = writeln!(o, "| preemptions | {} |", self.preemptions);
        if let Some(view) = &self.router.view {
            let a = &self.router.accuracy;
            let _ = writeln!(
                o,
                "| router view `{view}`: expected hits missing / unexpected hits | {} / {} of {} decisions |",
                a.expected_hit_missing, a.unexpected_hit, a.decisions
            );
        }
        if let Some(r) = &self.router.replicas {
            let delay = r
                .sync_delay_ms
                .map_or(String::new(), |ms| format!(", {ms} ms late"));
            let _ = writeln!(
                o,
                "| router replicas | {} (spread {}, sync {}{delay}) |",
                r.count, r.spread, r.sync
            );
        }
        if self.sessions.total > 0 {
            let _ = writeln!(
                o,
                "| sessions | {} ({} turns, {} reset) |",
                self.sessions.total, self.sessions.turns, self.sessions.reset
            );
        }
        if !self.recovery.is_empty() {
            let _ = writeln!(
                o,
                "| requests retried / migrated / timed out | {} / {} / {} |",
                r.retried, r.migrated, r.timed_out
            );
            if self.prefix_cache.loaded_tokens > 0 {
                let _ = writeln!(
                    o,
                    "| prompt tokens loaded from the shared store | {} |",
                    self.prefix_cache.loaded_tokens
                );
            }
        }
        let _ = writeln!(
            o,
            "\n| worker | gpu | model | step-time profile | time in steps | MFU | requests | share | KV blocks | KV peak | preemptions | evictions |"
        );
        let _ = writeln!(
            o,
            "|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        for w in &self.workers {
            let profile = if w.calibrated {
                format!("calibrated: {}", w.profile)
            } else {
                format!("uncalibrated: {}", w.profile)
            };
            let kv = if w.kv_cache_dtype.is_empty() || w.kv_cache_dtype == w.precision {
                String::new()
            } else {
                format!(", KV {}", w.kv_cache_dtype)
            };
            let shared = match (w.shared_gpu, w.gpu_wait_s, &w.mig) {
                (Some(g), Some(wait), _) => format!(", shares GPU {g} (waited {wait:.1} s)"),
                (Some(g), None, Some(slice)) => format!(", MIG {slice} of GPU {g}"),
                _ => String::new(),
            };
            let _ = writeln!(
                o,
                "| {} | {} ×{} {}{kv}{shared} | {} | {profile} | {:.1}% | {} | {} | {:.1}% | {} | {:.1}% | {} | {} |",
                w.id,
                w.gpu,
                w.tp,
                w.precision,
                w.model,
                w.step_time_fraction * 100.0,
                w.mfu
                    .map_or("–".to_string(), |m| format!("{:.1}%", m * 100.0)),
                w.requests,
                w.share * 100.0,
                w.kv_blocks,
                w.kv_peak_fraction * 100.0,
                w.preemptions,
                w.evictions
            );
        }
        if let Some(tiers) = &self.tiers {
            let _ = writeln!(
                o,
                "\n| KV tier | capacity (blocks) | hit rate | hits / lookups | blocks loaded | blocks written | blocks evicted | GB read | GB written | recompute avoided (tokens) |"
            );
            let _ = writeln!(o, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
            for t in tiers {
                let _ = writeln!(
                    o,
                    "| {} | {} | {:.1}% | {} / {} | {} | {} | {} | {:.2} | {:.2} | {} |",
                    t.tier,
                    t.capacity_blocks
                        .map_or("unbounded".to_string(), |c| c.to_string()),
                    t.hit_rate * 100.0,
                    t.hits,
                    t.lookups,
                    t.blocks_loaded,
                    t.blocks_written,
                    t.blocks_evicted,
                    t.bytes_read as f64 / 1e9,
                    t.bytes_written as f64 / 1e9,
                    t.recompute_avoided_tokens
                );
            }
        }
        if let Some(e) = &self.energy {
            let per = |v: Option<f64>| v.map_or("–".to_string(), |x| format!("{x:.1} J"));
            let _ = writeln!(
                o,
                "\nEnergy: {:.1} kJ on {} GPUs, fleet average {:.0} W; {} per completed request, {} per output token{}.",
                e.joules / 1e3,
                e.gpus,
                e.fleet_average_power_w,
                per(e.per_completed_request_j),
                e.per_output_token_j
                    .map_or("–".to_string(), |x| format!("{x:.3} J")),
                if e.validated {
                    ""
                } else {
                    " (power model checked against measurements on A100 only)"
                }
            );
        }
        if let Some(a) = &self.autoscaler {
            let att = a.slo_attainment;
            one_row_table(
                &mut o,
                "Autoscaler",
                &[
                    (
                        "metric / target",
                        format!("{} / {}", a.metric, a.target_text()),
                    ),
                    (
                        "replicas: peak / mean / final",
                        format!(
                            "{} / {:.2} / {}",
                            a.replicas_peak, a.replicas_mean, a.replicas_final
                        ),
                    ),
                    (
                        "scale-ups / -downs / replacements",
                        format!("{} / {} / {}", a.scale_ups, a.scale_downs, a.replacements),
                    ),
                    ("cold start", format!("{:.1} s", a.cold_start.total_s)),
                    ("replica-hours", format!("{:.3}", a.replica_hours)),
                    (
                        "cost",
                        a.cost_usd.map_or("–".into(), |c| format!("${c:.2}")),
                    ),
                    (
                        "held for a replica",
                        format!(
                            "{} (max {:.1} s)",
                            a.cold_start_hits.requests,
                            a.cold_start_hits.wait_ms_max / 1e3
                        ),
                    ),
                    (
                        "SLO attainment: overall / worst window",
                        if let Some(att) = att.filter(|a| a.windows > 0) {
                            format!(
                                "{:.4} / {:.4} at {:.0} s",
                                att.overall, att.worst, att.worst_at_s
                            )
                        } else {
                            "–".into()
                        },
                    ),
                ],
            );
            if !a.models.is_empty() {
                use std::fmt::Write;
                o.push_str(
                    "\n| Autoscaled model | target | min–max | replicas: peak / mean / final | \
                     scale-ups / -downs / replacements | cold start | replica-hours | cost | held for a replica |\n\
                     |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
                );
                for m in &a.models {
                    let _ = writeln!(
                        o,
                        "| {} | {} | {}–{} | {} / {:.2} / {} | {} / {} / {} | {:.1} s | {:.3} | {} | {} (max {:.1} s) |",
                        m.model.as_deref().unwrap_or("–"),
                        m.target_text(),
                        m.min_replicas,
                        m.max_replicas,
                        m.replicas_peak,
                        m.replicas_mean,
                        m.replicas_final,
                        m.scale_ups,
                        m.scale_downs,
                        m.replacements,
                        m.cold_start.total_s,
                        m.replica_hours,
                        m.cost_usd.map_or("–".into(), |c| format!("${c:.2}")),
                        m.cold_start_hits.requests,
                        m.cold_start_hits.wait_ms_max / 1e3
                    );
                }
            }
        }
        if let Some(m) = &self.models {
            let replicas = m
                .replicas
                .iter()
                .map(|(name, l)| format!("{name} {:.2} ({}–{})", l.mean, l.min, l.max))
                .collect::<Vec<_>>()
                .join(", ");
            one_row_table(
                &mut o,
                "Models",
                &[
                    (
                        "swaps (cut short)",
                        format!("{} ({})", m.swaps, m.swaps_cut_short),
                    ),
                    (
                        "swap / drain seconds",
                        format!("{:.1} / {:.1}", m.swap_seconds, m.drain_seconds),
                    ),
                    (
                        "requests held for a swap (failed)",
                        format!("{} ({})", m.requests_held, m.held_failed),
                    ),
                    (
                        "their p50 / p95 TTFT (ms)",
                        if m.held_ttft_ms.count == 0 {
                            "–".into()
                        } else {
                            format!("{:.0} / {:.0}", m.held_ttft_ms.p50, m.held_ttft_ms.p95)
                        },
                    ),
                    ("not served", m.rejected_model_not_served.to_string()),
                    ("workers per model: mean (min–max)", replicas),
                ],
            );
        }
        if let Some(d) = &self.disaggregation {
            one_row_table(
                &mut o,
                "P/D disaggregation",
                &[
                    (
                        "prefill / decode / both workers",
                        format!(
                            "{} / {} / {}",
                            d.prefill_workers, d.decode_workers, d.both_workers
                        ),
                    ),
                    (
                        "hand-offs (NVLink / RDMA)",
                        format!(
                            "{} ({} / {})",
                            d.handoffs, d.nvlink_handoffs, d.rdma_handoffs
                        ),
                    ),
                    ("KV moved (GB)", gb(d.bytes_transferred)),
                    (
                        "transfer mean / max (ms)",
                        format!("{:.3} / {:.3}", d.mean_transfer_ms, d.max_transfer_ms),
                    ),
                    ("lost in hand-off", d.lost_in_handoff.to_string()),
                ],
            );
        }
        if let Some(p) = &self.peer_transfer {
            one_row_table(
                &mut o,
                "peer transfer",
                &[
                    ("transfers", p.transfers.to_string()),
                    ("blocks", p.blocks_transferred.to_string()),
                    ("KV moved (GB)", gb(p.bytes_transferred)),
                    (
                        "recompute avoided (tokens)",
                        p.recompute_avoided_tokens.to_string(),
                    ),
                    ("mean transfer (ms)", format!("{:.3}", p.mean_transfer_ms)),
                    ("source failed", p.lost_to_source_failure.to_string()),
                ],
            );
        }
        if let Some(r) = &self.replication {
            one_row_table(
                &mut o,
                "replication",
                &[
                    ("hot prefixes", r.hot_prefixes.to_string()),
                    ("copies", r.copies.to_string()),
                    ("blocks sent", r.blocks_transferred.to_string()),
                    ("blocks registered", r.blocks_registered.to_string()),
                    ("KV moved (GB)", gb(r.bytes_transferred)),
                    ("mean transfer (ms)", format!("{:.3}", r.mean_transfer_ms)),
                    ("lost", r.lost_to_failure.to_string()),
                ],
            );
        }
        if !self.recovery.is_empty() {
            let (header, rows) = recovery::table(&self.recovery);
            let _ = writeln!(o, "\n| {} |", header.join(" | "));
            let _ = writeln!(o, "|---|{}", "---:|".repeat(header.len() - 1));
            for row in rows {
                let _ = writeln!(o, "| {} |", row.join(" | "));
            }
        }
        if !self.classes.is_empty() {
            o.push_str(&super::classes::markdown(&self.classes));
        }
        o
    }

    /// The phases table and the TTFT breakdowns, appended to `o`.
    fn breakdown_markdown(&self, o: &mut String) {
        use std::fmt::Write;
        let _ = writeln!(
            o,
            "\n| where the time goes (completed requests) | span | mean (ms) | p50 | p95 | share of mean E2E |"
        );
        let _ = writeln!(o, "|---|---|---:|---:|---:|---:|");
        for p in &self.phases_ms {
            let d = &p.dist;
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} |",
                p.phase,
                p.span,
                d.cell(d.mean),
                d.cell(d.p50),
                d.cell(d.p95),
                p.share_of_e2e
                    .map_or("–".to_string(), |x| format!("{:.1}%", x * 100.0))
            );
        }
        for (title, groups) in [
            ("conversation turn", &self.ttft_by_turn_ms),
            ("prompt tokens", &self.ttft_by_prompt_ms),
        ] {
            if groups.is_empty() {
                continue;
            }
            let _ = writeln!(
                o,
                "\n| TTFT by {title} | requests | p50 (ms) | p95 (ms) |\n|---|---:|---:|---:|"
            );
            for g in groups {
                let d = &g.dist;
                let _ = writeln!(
                    o,
                    "| {} | {} | {} | {} |",
                    g.group,
                    d.count,
                    d.cell(d.p50),
                    d.cell(d.p95)
                );
            }
        }
    }
}
