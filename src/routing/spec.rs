//! Policy and router configuration: the scenario's `[router]` table and `--policies` specs.
//!
//! `[router]` holds the policy (`policy = "..."` and that policy's parameters) and the router's settings
//! (`view`, `event_delay`, `approx_ttl`, `approx_capacity_blocks`, `approx_prune_interval`,
//! `load_refresh`, `log_decisions`).
//! A policy spec on the command line reads `name` or `name:key=value,key=value`.

use serde::{Deserialize, Deserializer, Serialize};

use super::consistent_hash::ConsistentHashParams;
use super::dynamo_kv::DynamoParams;
use super::llm_d::{LlmDParams, LlmDPreciseParams};
use super::llm_d_predicted::LlmDPredictedParams;
use super::lora_affinity::LoraAffinityParams;
use super::predicted_latency::PredictedLatencyParams;
use super::prefix_aware::PrefixAwareParams;
use super::session_affinity::SessionAffinityParams;
use super::sglang_cache_aware::SglangParams;
use super::view::ViewKind;
use super::{
    ConsistentHash, DynamoKv, LeastKv, LeastOutstanding, LlmD, LlmDPredicted, LoraAffinity,
    PowerOfTwo, PredictedLatency, PrefixAware, RandomChoice, RoundRobin, RoutingPolicy,
    SessionAffinity, SglangCacheAware,
};
use crate::config::{PositiveInt, toml_value};
use crate::time::SimDuration;

/// A policy and its parameters. Built into behaviour by one exhaustive `match` in [`PolicyConfig::build`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "policy", rename_all = "snake_case", deny_unknown_fields)]
pub enum PolicyConfig {
    /// Each request to the next worker that is up, in id order.
    RoundRobin {},
    /// Each request to a uniformly random worker that is up.
    Random {},
    /// The worker with the fewest outstanding requests (least connections); ties rotate.
    LeastOutstanding {},
    /// The worker with the lowest KV-cache utilisation.
    LeastKv {},
    /// The less loaded of two random workers.
    PowerOfTwo {},
    /// Sticky sessions with a TTL.
    SessionAffinity(SessionAffinityParams),
    /// Bounded-load consistent hashing on the session or a prefix key.
    ConsistentHash(ConsistentHashParams),
    /// Longest cached prefix priced against load.
    PrefixAware(PrefixAwareParams),
    /// llm-d's scheduler defaults: approximate prefix scorer, prefix 3 : queue 2 : kv 2.
    LlmD(LlmDParams),
    /// llm-d with the precise (KV-event) prefix scorer, prefix 2 : queue 1 : kv 1.
    LlmDPrecise(LlmDPreciseParams),
    /// SGLang router's cache-aware policy.
    SglangCacheAware(SglangParams),
    /// Dynamo's KV-router cost.
    DynamoKv(DynamoParams),
    /// Per worker, TTFT and TPOT predicted with the worker's own step model; best against the SLO.
    PredictedLatency(PredictedLatencyParams),
    /// llm-d's predicted-latency scheduling profile (online-trained TTFT/TPOT models, SLO headroom).
    LlmDPredicted(LlmDPredictedParams),
    /// llm-d's LoRA-affinity scorer with its queue and KV-utilisation scorers, 1 : 1 : 1.
    LoraAffinity(LoraAffinityParams),
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig::RoundRobin {}
    }
}

impl PolicyConfig {
    /// Names of every policy, for `fleetsim catalog`.
    pub const NAMES: [&'static str; 15] = [
        "round_robin",
        "random",
        "least_outstanding",
        "least_kv",
        "power_of_two",
        "session_affinity",
        "consistent_hash",
        "prefix_aware",
        "llm_d",
        "llm_d_precise",
        "sglang_cache_aware",
        "dynamo_kv",
        "predicted_latency",
        "llm_d_predicted",
        "lora_affinity",
    ];

    /// The policy's name.
    pub fn name(&self) -> &'static str {
        match self {
            PolicyConfig::RoundRobin {} => "round_robin",
            PolicyConfig::Random {} => "random",
            PolicyConfig::LeastOutstanding {} => "least_outstanding",
            PolicyConfig::LeastKv {} => "least_kv",
            PolicyConfig::PowerOfTwo {} => "power_of_two",
            PolicyConfig::SessionAffinity(_) => "session_affinity",
            PolicyConfig::ConsistentHash(_) => "consistent_hash",
            PolicyConfig::PrefixAware(_) => "prefix_aware",
            PolicyConfig::LlmD(_) => "llm_d",
            PolicyConfig::LlmDPrecise(_) => "llm_d_precise",
            PolicyConfig::SglangCacheAware(_) => "sglang_cache_aware",
            PolicyConfig::DynamoKv(_) => "dynamo_kv",
            PolicyConfig::PredictedLatency(_) => "predicted_latency",
            PolicyConfig::LlmDPredicted(_) => "llm_d_predicted",
            PolicyConfig::LoraAffinity(_) => "lora_affinity",
        }
    }

    /// Builds the policy.
    pub fn build(&self) -> Box<dyn RoutingPolicy> {
        match self {
            PolicyConfig::RoundRobin {} => Box::new(RoundRobin::default()),
            PolicyConfig::Random {} => Box::new(RandomChoice),
            PolicyConfig::LeastOutstanding {} => Box::new(LeastOutstanding::default()),
            PolicyConfig::LeastKv {} => Box::new(LeastKv::default()),
            PolicyConfig::PowerOfTwo {} => Box::new(PowerOfTwo),
            PolicyConfig::SessionAffinity(p) => Box::new(SessionAffinity::new(p.clone())),
            PolicyConfig::ConsistentHash(p) => Box::new(ConsistentHash::new(p.clone())),
            PolicyConfig::PrefixAware(p) => Box::new(PrefixAware::new(p.clone())),
            PolicyConfig::LlmD(p) => Box::new(LlmD::new(p)),
            PolicyConfig::LlmDPrecise(p) => Box::new(LlmD::precise(p)),
            PolicyConfig::SglangCacheAware(p) => Box::new(SglangCacheAware::new(p.clone())),
            PolicyConfig::DynamoKv(p) => Box::new(DynamoKv::new(p.clone())),
            PolicyConfig::PredictedLatency(p) => Box::new(PredictedLatency::new(p.clone())),
            PolicyConfig::LlmDPredicted(p) => Box::new(LlmDPredicted::new(p.clone())),
            PolicyConfig::LoraAffinity(p) => Box::new(LoraAffinity::new(p)),
        }
    }

    /// The knowledge model the production router this preset reproduces uses: SGLang's and llm-d's
    /// default prefix scorers learn from their own routing (approximate); Dynamo and llm-d's precise
    /// scorer consume the workers' KV events; `prefix_aware` defaults to the truth. `llm_d_predicted`
    /// takes its prefix scores from llm-d's default (approximate) prefix producer; `predicted_latency`
    /// reads KV events, as an event-fed router in production does.
    pub fn default_view(&self) -> ViewKind {
        match self {
            PolicyConfig::LlmD(_)
            | PolicyConfig::SglangCacheAware(_)
            | PolicyConfig::LlmDPredicted(_) => ViewKind::Approximate,
            PolicyConfig::DynamoKv(_)
            | PolicyConfig::LlmDPrecise(_)
            | PolicyConfig::PredictedLatency(_) => ViewKind::Events,
            _ => ViewKind::Oracle,
        }
    }

    /// How much the production router's own residency memory (the approximate view) holds per worker, in
    /// blocks of `block_size` tokens, for a worker of `kv_blocks` KV blocks, and how often it is pruned
    /// back to that size (`None`: at every insertion, as an LRU does).
    ///
    /// - SGLang: a radix tree of request text, 2^26 characters per worker (`--max-tree-size`), pruned
    ///   every 120 s (`--eviction-interval`); characters are converted at the policy's
    ///   `chars_per_token` (default 4, the estimate llm-d's prefix producer also uses,
    ///   `averageCharactersPerToken`).
    /// - `llm_d`: an LRU of as many hashed blocks as the worker has KV blocks (llm-d auto-tunes
    ///   `lruCapacityPerServer` from the engine's `num_gpu_blocks`), each of the version's block size:
    ///   from v0.9 a 64-token entry, 4 blocks of 16.
    /// - everything else: an LRU of block hashes sized to the worker's KV blocks.
    pub fn default_approx_memory(
        &self,
        kv_blocks: u32,
        block_size: u32,
    ) -> (u32, Option<SimDuration>) {
        match self {
            PolicyConfig::SglangCacheAware(p) => {
                (p.tree_blocks(block_size), Some(SimDuration::from_secs(120)))
            }
            PolicyConfig::LlmD(p) => (p.approx_capacity_blocks(kv_blocks, block_size), None),
            _ => (kv_blocks, None),
        }
    }

    /// How many leading blocks (of `block_size` tokens) of a routed prompt the production router's
    /// own memory (the approximate view) records: llm-d's approximate producer indexes only the
    /// blocks it hashed, those within its prefix window; `None`: all of them.
    pub fn approx_indexed_blocks(&self, block_size: u32) -> Option<u32> {
        match self {
            PolicyConfig::LlmD(p) => p.indexed_blocks(block_size),
            PolicyConfig::LlmDPredicted(p) => p.indexed_blocks(),
            _ => None,
        }
    }

    /// Checks parameter relations. `Err((key, message))`.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        match self {
            PolicyConfig::SessionAffinity(p) => p.validate(),
            PolicyConfig::ConsistentHash(p) => p.validate(),
            _ => Ok(()),
        }
    }

    /// Parses `name` or `name:key=value,key=value` (values read as TOML, else as strings).
    pub fn parse_spec(spec: &str) -> Result<PolicyConfig, String> {
        let mut table = toml::Table::new();
        spec_into_table(spec, &mut table)?;
        let cfg: PolicyConfig = toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| format!("policy `{spec}`: {}", e.message().trim()))?;
        cfg.validate()
            .map_err(|(k, m)| format!("policy `{spec}`: `{k}`: {m}"))?;
        Ok(cfg)
    }
}

/// Writes a spec `name[:key=value,...]` into `table` as `policy = name` and one entry per parameter
/// (values read as TOML, else as strings), overriding what `table` held.
pub fn spec_into_table(spec: &str, table: &mut toml::Table) -> Result<(), String> {
    let (name, params) = spec.split_once(':').unwrap_or((spec, ""));
    table.insert(
        "policy".into(),
        toml::Value::String(name.trim().to_string()),
    );
    for kv in params.split(',').filter(|s| !s.trim().is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("policy `{spec}`: expected key=value, got `{kv}`"))?;
        table.insert(k.trim().to_string(), toml_value(v));
    }
    Ok(())
}

/// The router's own settings (everything in `[router]` but the policy).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RouterSettings {
    /// What the router knows about which worker holds which cached prompt blocks. Default: what the
    /// policy's production router has: `approximate` for `llm_d`, `sglang_cache_aware` and
    /// `llm_d_predicted`; `events` for `dynamo_kv`, `llm_d_precise` and `predicted_latency`; `oracle`
    /// for the others.
    #[serde(default)]
    pub view: Option<ViewKind>,
    /// Delay of KV events (`view = "events"`).
    #[serde(default = "default_event_delay")]
    pub event_delay: SimDuration,
    /// How long a routed prompt is assumed cached (`view = "approximate"`); unset: until capacity evicts it.
    #[serde(default)]
    pub approx_ttl: Option<SimDuration>,
    /// Blocks the approximate view remembers per worker at most; default: the production router's
    /// (SGLang: 2^26 characters ≈ 2^24 tokens; otherwise the worker's KV blocks).
    #[serde(default)]
    pub approx_capacity_blocks: Option<PositiveInt>,
    /// The approximate view is pruned back to its capacity at this interval rather than at every
    /// insertion; default: the production router's (SGLang: 120 s; otherwise at every insertion).
    #[serde(default)]
    pub approx_prune_interval: Option<SimDuration>,
    /// Worker metrics (queue, running, KV use) are refreshed at this interval; 0 = always fresh. The
    /// gateway's own count of outstanding requests is always exact.
    #[serde(default)]
    pub load_refresh: SimDuration,
    /// Write the first N decisions to `decisions.csv` (with `--out`).
    #[serde(default)]
    pub log_decisions: u32,
    /// Router instances behind one L4 load balancer (llm-d EPP replicas, Dynamo frontends, SGLang
    /// gateways), each with its own policy state and cache picture; 1: one router.
    #[serde(default = "one_replica", skip_serializing_if = "is_one_replica")]
    pub replicas: PositiveInt,
    /// How the load balancer spreads requests over the replicas.
    #[serde(default, skip_serializing_if = "Spread::is_default")]
    pub spread: Spread,
    /// What the replicas tell each other.
    #[serde(default, skip_serializing_if = "ReplicaSync::is_default")]
    pub sync: ReplicaSync,
    /// How long a replica's message takes to reach the others (`sync = "decisions"`).
    #[serde(
        default = "default_sync_delay",
        skip_serializing_if = "is_default_sync_delay"
    )]
    pub sync_delay: SimDuration,
}

/// How an L4 load balancer in front of several router replicas picks one for a request.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Spread {
    /// Each request to a replica drawn at random (kube-proxy's iptables mode, the Kubernetes default,
    /// picks a Service endpoint at random per connection). The draw is keyed by the request's id, so
    /// its retries pass the same replica.
    #[default]
    Random,
    /// Request ids in turn (kube-proxy's IPVS mode, `rr`).
    RoundRobin,
    /// Every turn of a conversation to one replica, hashed on the session (a Service with
    /// `sessionAffinity: ClientIP`, or a consistent-hash load balancer); a request outside any
    /// conversation by its id.
    Session,
}

impl Spread {
    fn is_default(&self) -> bool {
        *self == Spread::default()
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Spread::Random => "random",
            Spread::RoundRobin => "round_robin",
            Spread::Session => "session",
        }
    }
}

/// What router replicas share.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ReplicaSync {
    /// Nothing: each replica knows the requests it routed itself (Dynamo without
    /// `--router-replica-sync`, SGLang gateways without a mesh). KV events, where the view uses them,
    /// reach every replica alike.
    #[default]
    None,
    /// Every routing decision and every request's first token, end and failure reach the other
    /// replicas after `sync_delay` (Dynamo's `--router-replica-sync`: active-sequence events and
    /// predicted blocks published over NATS core messaging).
    Decisions,
}

impl ReplicaSync {
    fn is_default(&self) -> bool {
        *self == ReplicaSync::default()
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ReplicaSync::None => "none",
            ReplicaSync::Decisions => "decisions",
        }
    }
}

fn default_event_delay() -> SimDuration {
    SimDuration::from_millis(10)
}

fn one_replica() -> PositiveInt {
    PositiveInt(1)
}

fn is_one_replica(n: &PositiveInt) -> bool {
    n.0 == 1
}

/// One millisecond: a NATS core message within a cluster takes well under that **[estimate]**.
fn default_sync_delay() -> SimDuration {
    SimDuration::from_millis(1)
}

fn is_default_sync_delay(d: &SimDuration) -> bool {
    *d == default_sync_delay()
}

impl RouterSettings {
    /// Most router replicas: each holds its own policy state and cache picture.
    pub const MAX_REPLICAS: u32 = 256;
}

impl Default for RouterSettings {
    fn default() -> Self {
        RouterSettings {
            view: None,
            event_delay: default_event_delay(),
            approx_ttl: None,
            approx_capacity_blocks: None,
            approx_prune_interval: None,
            load_refresh: SimDuration::ZERO,
            log_decisions: 0,
            replicas: one_replica(),
            spread: Spread::default(),
            sync: ReplicaSync::default(),
            sync_delay: default_sync_delay(),
        }
    }
}

/// The `[router]` table: a policy plus the router's settings, in one flat table.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RouterSpec {
    pub policy: PolicyConfig,
    pub settings: RouterSettings,
}

/// Keys of `[router]` that belong to the router rather than to the policy.
const SETTINGS_KEYS: [&str; 11] = [
    "view",
    "event_delay",
    "approx_ttl",
    "approx_capacity_blocks",
    "approx_prune_interval",
    "load_refresh",
    "log_decisions",
    "replicas",
    "spread",
    "sync",
    "sync_delay",
];

impl RouterSpec {
    /// The view in force.
    pub fn view(&self) -> ViewKind {
        self.settings
            .view
            .unwrap_or_else(|| self.policy.default_view())
    }

    /// Splits a flat `[router]` table into policy and settings.
    pub fn from_table(mut table: toml::Table) -> Result<Self, String> {
        let mut settings = toml::Table::new();
        for k in SETTINGS_KEYS {
            if let Some(v) = table.remove(k) {
                settings.insert(k.to_string(), v);
            }
        }
        if !table.contains_key("policy") {
            return Err("missing field `policy`".into());
        }
        let policy = from_table::<PolicyConfig>(table.clone()).map_err(|message| {
            let name = table
                .get("policy")
                .and_then(toml::Value::as_str)
                .unwrap_or("?");
            if let Some(key) = message
                .strip_prefix("unknown field `")
                .and_then(|r| r.split_once('`'))
                .map(|(k, _)| k)
                && message.contains("there are no fields")
            {
                return format!("unknown field `{key}`: policy `{name}` takes no parameters");
            }
            if message.contains('`') {
                return message; // names its key already
            }
            // A value the parameter's type refused: name the key, found as the one that alone fails
            // the same way.
            match lone_culprit::<PolicyConfig>(&table, &["policy"], &message) {
                Some(k) => format!("`{k}`: {message}"),
                None => message,
            }
        })?;
        policy.validate().map_err(|(k, m)| format!("`{k}`: {m}"))?;
        let parsed = from_table::<RouterSettings>(settings.clone()).map_err(|message| {
            // A value its type refused: name the key.
            match lone_culprit::<RouterSettings>(&settings, &[], &message) {
                Some(k) if !message.contains(&format!("`{k}`")) => format!("`{k}`: {message}"),
                _ => message,
            }
        })?;
        if parsed.replicas.0 > RouterSettings::MAX_REPLICAS {
            return Err(format!(
                "`replicas`: at most {} router replicas, got {}",
                RouterSettings::MAX_REPLICAS,
                parsed.replicas.0
            ));
        }
        Ok(RouterSpec {
            policy,
            settings: parsed,
        })
    }
}

/// `table` read as a `T`, or the deserialiser's message.
fn from_table<T: serde::de::DeserializeOwned>(table: toml::Table) -> Result<T, String> {
    toml::Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| e.message().trim().to_string())
}

/// The key of `table` that, alone with the keys `with`, fails to read as a `T` with `message`: the
/// value the whole table's `message` is about.
fn lone_culprit<'a, T: serde::de::DeserializeOwned>(
    table: &'a toml::Table,
    with: &[&str],
    message: &str,
) -> Option<&'a String> {
    table
        .keys()
        .filter(|k| !with.contains(&k.as_str()))
        .find(|k| {
            let mut one: toml::Table = with
                .iter()
                .filter_map(|w| table.get(*w).map(|v| (w.to_string(), v.clone())))
                .collect();
            one.insert((*k).clone(), table[*k].clone());
            from_table::<T>(one).err().as_deref() == Some(message)
        })
}

/// Serialises as the flat `[router]` table it was read from: the policy's keys and the settings' keys side
/// by side, with the view in force filled in when the table left it to the policy.
impl Serialize for RouterSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Flat<'a> {
            #[serde(flatten)]
            policy: &'a PolicyConfig,
            #[serde(flatten)]
            settings: RouterSettings,
        }
        let mut settings = self.settings.clone();
        settings.view = Some(self.view());
        Flat {
            policy: &self.policy,
            settings,
        }
        .serialize(s)
    }
}

/// The flat `[router]` table, as [`RouterSpec::from_table`] reads it: one branch per policy, each taking
/// `policy`, that policy's parameters and the router's settings, and no other key.
impl schemars::JsonSchema for RouterSpec {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "RouterSpec".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        use serde_json::{Map, Value};
        let settings = RouterSettings::json_schema(generator).to_value();
        let policies = PolicyConfig::json_schema(generator).to_value();
        let branches = policies
            .get("oneOf")
            .and_then(Value::as_array)
            .expect("an internally tagged enum's schema is a oneOf");
        let mut flat = Vec::with_capacity(branches.len());
        for branch in branches {
            // A policy with parameters refers to their struct: take its keys into the branch.
            let mut branch = branch.as_object().cloned().unwrap_or_default();
            if let Some(Value::String(reference)) = branch.remove("$ref") {
                let name = reference.trim_start_matches("#/$defs/").to_string();
                let params = generator
                    .definitions_mut()
                    .remove(&name)
                    .expect("a policy's parameters are defined once, for its branch");
                merge_object(&mut branch, params.as_object().cloned().unwrap_or_default());
            }
            merge_object(
                &mut branch,
                settings.as_object().cloned().unwrap_or_default(),
            );
            branch.insert("additionalProperties".into(), Value::Bool(false));
            flat.push(Value::Object(branch));
        }
        let mut schema = Map::new();
        schema.insert(
            "description".into(),
            "The router: `policy` picks the routing policy; the other keys are that policy's \
             parameters and the router's settings, side by side in one table."
                .into(),
        );
        schema.insert("type".into(), "object".into());
        schema.insert("oneOf".into(), Value::Array(flat));
        schemars::Schema::from(schema)
    }
}

/// Adds `from`'s `properties` and `required` to `into`'s; other keywords of `from` are kept only where
/// `into` has none of its own (a branch's description and title win over its parameters').
fn merge_object(
    into: &mut serde_json::Map<String, serde_json::Value>,
    from: serde_json::Map<String, serde_json::Value>,
) {
    use serde_json::Value;
    for (key, value) in from {
        match (key.as_str(), into.get_mut(&key), value) {
            ("properties", Some(Value::Object(mine)), Value::Object(theirs)) => mine.extend(theirs),
            ("required", Some(Value::Array(mine)), Value::Array(theirs)) => {
                for r in theirs {
                    if !mine.contains(&r) {
                        mine.push(r);
                    }
                }
            }
            (_, Some(_), _) => {}
            (_, None, value) => {
                into.insert(key, value);
            }
        }
    }
}

impl<'de> Deserialize<'de> for RouterSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let table = toml::Table::deserialize(d)?;
        RouterSpec::from_table(table).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::NonNegative;

    /// The culprit is the one key whose value alone fails the same way; keys that read well, and the
    /// keys carried along (`with`), are never named; no key alone failing the same way names none.
    #[test]
    fn lone_culprit_names_the_one_refused_value() {
        let table = |text: &str| text.parse::<toml::Table>().unwrap();
        let settings = table("load_refresh = \"50ms\"\nsync_delay = -3\nreplicas = 2");
        let message = from_table::<RouterSettings>(settings.clone()).unwrap_err();
        assert_eq!(
            lone_culprit::<RouterSettings>(&settings, &[], &message).map(String::as_str),
            Some("sync_delay")
        );
        let policy = table("policy = \"prefix_aware\"\nprefix_weight = 0.5\nload_weight = -1.0");
        let message = from_table::<PolicyConfig>(policy.clone()).unwrap_err();
        assert_eq!(
            lone_culprit::<PolicyConfig>(&policy, &["policy"], &message).map(String::as_str),
            Some("load_weight")
        );
        // A message no single key produces names nothing.
        assert_eq!(
            lone_culprit::<PolicyConfig>(&policy, &["policy"], "something else"),
            None
        );
        // Without the carried `policy` key, no key alone reads as a policy the same way.
        assert_eq!(lone_culprit::<PolicyConfig>(&policy, &[], &message), None);
    }

    #[test]
    fn specs_parse_with_parameters_and_reject_unknown_ones() {
        let p = PolicyConfig::parse_spec("prefix_aware:load_weight=0.5").unwrap();
        assert_eq!(
            p,
            PolicyConfig::PrefixAware(PrefixAwareParams {
                load_weight: NonNegative(0.5),
                ..Default::default()
            })
        );
        assert_eq!(
            PolicyConfig::parse_spec("round_robin").unwrap(),
            PolicyConfig::RoundRobin {}
        );
        let e = PolicyConfig::parse_spec("prefix_aware:load_wieght=0.5").unwrap_err();
        assert!(e.contains("load_wieght"), "{e}");
        let e = PolicyConfig::parse_spec("round_robin:ttl=5").unwrap_err();
        assert!(e.contains("ttl"), "{e}");
        let e = PolicyConfig::parse_spec("teleport").unwrap_err();
        assert!(e.contains("teleport"), "{e}");
        let e = PolicyConfig::parse_spec("session_affinity:on_down=stay").unwrap_err();
        assert!(e.contains("on_down"), "{e}");
        let p = PolicyConfig::parse_spec("session_affinity:ttl=5m,on_overload=stay").unwrap();
        assert_eq!(p.name(), "session_affinity");
    }

    /// Every policy: never a down worker, `None` only when all are down, and the same decisions for the
    /// same inputs and random stream (ties are broken deterministically).
    #[test]
    fn every_policy_avoids_down_workers_and_is_deterministic() {
        use crate::request::{Request, Segment, SessionRef};
        use crate::routing::RouteInput;
        use crate::routing::test_support::snapshots;
        use crate::time::SimTime;
        use rand::Rng;

        for name in PolicyConfig::NAMES {
            let decide = || {
                let cfg = PolicyConfig::parse_spec(name).unwrap();
                let mut p = cfg.build();
                let mut rng = crate::rng::from_u64(7);
                let mut draw = crate::rng::from_u64(99);
                let mut picks = Vec::new();
                for i in 0..300u64 {
                    let n = draw.random_range(1..12usize);
                    let load: Vec<u32> = (0..n).map(|_| draw.random_range(0..20)).collect();
                    let mut ws = snapshots(&load);
                    for w in &mut ws {
                        w.up = draw.random_bool(0.6);
                        w.queued = draw.random_range(0..5);
                        w.kv_utilization = draw.random::<f64>();
                        w.used_blocks = draw.random_range(0..500);
                    }
                    let overlaps: Vec<u32> = (0..n).map(|_| draw.random_range(0..8)).collect();
                    let hashes: Vec<u64> = (0..8).map(|b| b + 100 * (i % 5)).collect();
                    let req = Request::new(
                        i,
                        Some(SessionRef {
                            id: i % 13,
                            turn: 0,
                        }),
                        SimTime(i * 1_000_000),
                        1,
                        vec![Segment {
                            content: i,
                            tokens: 128,
                        }],
                    );
                    let input = RouteInput {
                        request: &req,
                        prompt_blocks: 8,
                        block_size: 16,
                        prompt_hashes: &hashes,
                        overlaps: &overlaps,
                        prefix_owner: Some(i as usize % n),
                        workers: &ws,
                        now: req.arrival,
                        load_age: SimDuration::ZERO,
                        prefix_sources: None,
                        adapters: &[],
                    };
                    let d = p.route(&input, &mut rng);
                    match d {
                        Some(d) => {
                            assert!(ws[d.worker].up, "{name} chose down worker {}", d.worker)
                        }
                        None => {
                            assert!(ws.iter().all(|w| !w.up), "{name} refused with a worker up")
                        }
                    }
                    picks.push(d.map(|d| d.worker));
                }
                picks
            };
            assert_eq!(decide(), decide(), "{name} is not deterministic");
        }
    }

    #[test]
    fn router_table_splits_policy_and_settings() {
        let t: toml::Table =
            toml::from_str("policy = \"llm_d\"\nview = \"events\"\nqueue_weight = 3\n").unwrap();
        let r = RouterSpec::from_table(t).unwrap();
        assert_eq!(r.view(), ViewKind::Events);
        assert_eq!(r.policy.name(), "llm_d");
        let t: toml::Table = toml::from_str("policy = \"sglang_cache_aware\"").unwrap();
        assert_eq!(
            RouterSpec::from_table(t).unwrap().view(),
            ViewKind::Approximate
        );
    }

    /// `llm_d` names its upstream release with `version`; each sizes and windows the router's
    /// approximate index its own way; an unknown release is an error that lists the known ones.
    #[test]
    fn llm_d_names_its_version_and_sizes_its_index_by_it() {
        use super::super::llm_d::LlmDVersion;
        let old = PolicyConfig::parse_spec("llm_d:version=v0.8").unwrap();
        assert_eq!(
            old,
            PolicyConfig::LlmD(LlmDParams {
                version: LlmDVersion::V0_8,
                ..Default::default()
            })
        );
        let new = PolicyConfig::parse_spec("llm_d").unwrap();
        assert_eq!(new, PolicyConfig::LlmD(LlmDParams::default()));
        assert_eq!(LlmDParams::default().version, LlmDVersion::V0_10);
        let e = PolicyConfig::parse_spec("llm_d:version=v0.9").unwrap_err();
        assert!(
            e.contains("`v0.9`") && e.contains("`v0.8` or `v0.10`"),
            "{e}"
        );
        assert_eq!(old.default_approx_memory(26_241, 16), (26_241, None));
        assert_eq!(new.default_approx_memory(26_241, 16), (104_964, None));
        assert_eq!(old.approx_indexed_blocks(16), Some(256));
        assert_eq!(new.approx_indexed_blocks(16), Some(8_192));
        let precise = PolicyConfig::parse_spec("llm_d_precise").unwrap();
        assert_eq!(precise.approx_indexed_blocks(16), None);
        assert_eq!(precise.default_approx_memory(26_241, 16), (26_241, None));
        let sglang = PolicyConfig::parse_spec("sglang_cache_aware").unwrap();
        assert_eq!(
            sglang.default_approx_memory(26_241, 16),
            (1_048_576, Some(SimDuration::from_secs(120)))
        );
        let predicted = PolicyConfig::parse_spec("llm_d_predicted").unwrap();
        assert_eq!(predicted.approx_indexed_blocks(16), Some(256));
    }
}
