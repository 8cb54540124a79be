//! Traffic mixes: several workload classes in one run (`kind = "mix"`, `[[workload.classes]]`).
//!
//! Each class is a whole workload of its own (chat sessions, RAG requests over long shared documents,
//! batch summarisation, a trace), with a name, a scheduling priority and its own SLO. [`Mix`] merges the
//! classes' arrival streams into one, in arrival order (ties: the class listed first), and hands each
//! finished request back to the class that sent it, so closed-loop classes keep their own loops.
//!
//! Invariants:
//! - Class `k` of `K` has its own random stream (`workload/class/NAME` under the scenario seed): adding,
//!   removing or reordering another class does not change this class's requests, only their ids.
//! - Ids do not collide: a class's request `i` is request `i·K + k` of the run, its session `s` is
//!   session `s·K + k`, and every content id of its prompts and answers is salted with the class, so
//!   two classes never share a cached block by accident while a class still hits its own prefixes (a
//!   later turn quoting an answer names the same salted content the worker cached).
//! - Every request carries its class index and priority; records carry the class back.
//! - `max_requests` caps the whole mix: requests beyond it (first arrivals or follow-ups) are not sent.

use serde::{Deserialize, Serialize};

use super::{BuiltWorkload, Workload, WorkloadSpec};
use crate::config::Fraction;
use crate::metrics::record::RequestRecord;
use crate::request::Request;
use crate::rng::{fnv1a, splitmix64};
use crate::scenario::Slo;
use crate::time::{SimDuration, SimTime};

/// One `[[workload.classes]]` entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClassSpec {
    /// Short name, unique within the mix (`chat`, `rag`, `batch`); names the class in every output.
    pub name: String,
    /// Scheduling priority on the workers: lower is served first, as with vLLM's
    /// `--scheduling-policy priority` (default 0).
    #[serde(default)]
    pub priority: i32,
    /// The class's own objectives; without it the scenario's `[slo]` applies.
    #[serde(default)]
    pub slo: Option<ClassSlo>,
    /// The class's traffic: a `[workload]` table of kind poisson, gamma, sessions or trace.
    pub traffic: WorkloadSpec,
}

/// A class's objectives: a request is good if it meets every latency target set; `fleetsim size`
/// requires p95 TTFT and p95 TPOT within the targets and at least `goodput` of the class's requests good.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClassSlo {
    /// Time to first token.
    #[serde(default)]
    pub ttft: Option<SimDuration>,
    /// Time per output token after the first.
    #[serde(default)]
    pub tpot: Option<SimDuration>,
    /// Smallest fraction of the class's requests that must be good (`fleetsim size`; default: its
    /// `--min-goodput`).
    #[serde(default)]
    pub goodput: Option<Fraction>,
}

impl ClassSlo {
    /// The latency targets as a goodput judge.
    pub fn latency(&self) -> Slo {
        Slo {
            ttft: self.ttft,
            tpot: self.tpot,
            window: None,
        }
    }
}

impl ClassSpec {
    /// The class's latency objectives: its own, else the scenario's.
    pub fn latency_slo(&self, scenario: &Slo) -> Slo {
        self.slo
            .as_ref()
            .map_or_else(|| scenario.clone(), ClassSlo::latency)
    }
}

/// The largest number of classes (a request stores its class in 16 bits).
pub const MAX_CLASSES: usize = u16::MAX as usize;

/// Tag mixed into a class's content salt.
const CLASS_TAG: &[u8] = b"workload-class";

/// The seed class `name` draws its traffic from, under the scenario's `seed`.
pub fn class_seed(seed: u64, name: &str) -> u64 {
    splitmix64(seed ^ fnv1a(format!("workload/class/{name}").as_bytes()))
}

struct Source {
    workload: Box<dyn Workload>,
    /// The next arrival, already drawn, in the class's own ids.
    pending: Option<Request>,
    /// Whether the class's open-loop stream is exhausted for good.
    done: bool,
    salt: u64,
    priority: i32,
}

/// Several workloads merged into one stream (module docs).
pub struct Mix {
    sources: Vec<Source>,
    /// Requests still allowed under `max_requests`.
    remaining: u64,
}

impl Mix {
    /// Builds every class's workload (`classes` validated); arrivals stop at `end`, and after
    /// `max_requests` over the whole mix.
    pub fn build(
        classes: &[ClassSpec],
        seed: u64,
        end: SimTime,
        max_requests: Option<u64>,
    ) -> Result<BuiltWorkload, String> {
        let mut sources = Vec::with_capacity(classes.len());
        let mut notes = Vec::new();
        for (k, c) in classes.iter().enumerate() {
            let built = c
                .traffic
                .build(class_seed(seed, &c.name), end, max_requests)
                .map_err(|e| format!("workload.classes[{k}] ({}): {e}", c.name))?;
            notes.extend(
                built
                    .notes
                    .into_iter()
                    .map(|n| format!("class {}: {n}", c.name)),
            );
            sources.push(Source {
                workload: built.workload,
                pending: None,
                done: false,
                salt: splitmix64(fnv1a(CLASS_TAG) ^ k as u64),
                priority: c.priority,
            });
        }
        Ok(BuiltWorkload {
            workload: Box::new(Mix {
                sources,
                remaining: max_requests.unwrap_or(u64::MAX),
            }),
            notes,
        })
    }

    fn classes(&self) -> u64 {
        self.sources.len() as u64
    }

    /// Class `k`'s request `r` as the run sees it: run-wide ids, salted content, class and priority.
    fn outward(&self, k: usize, mut r: Request) -> Request {
        let n = self.classes();
        let s = &self.sources[k];
        r.id = r.id * n + k as u64;
        if let Some(sess) = &mut r.session {
            sess.id = sess.id * n + k as u64;
        }
        for seg in &mut r.segments {
            seg.content = splitmix64(seg.content ^ s.salt);
        }
        r.answer_content = splitmix64(r.answer_content ^ s.salt);
        r.class = k as u16;
        r.priority = s.priority;
        r
    }

    /// Takes one request from the cap; `None` once it is spent.
    fn admit(&mut self, r: Request) -> Option<Request> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        Some(r)
    }
}

impl Workload for Mix {
    fn next_arrival(&mut self) -> Option<Request> {
        for s in &mut self.sources {
            if s.pending.is_none() && !s.done {
                s.pending = s.workload.next_arrival();
                s.done = s.pending.is_none() && !s.workload.resumes_after_finish();
            }
        }
        let k = self
            .sources
            .iter()
            .enumerate()
            .filter_map(|(k, s)| s.pending.as_ref().map(|r| (r.arrival, k)))
            .min()?
            .1;
        let r = self.sources[k]
            .pending
            .take()
            .expect("chosen for its arrival");
        let r = self.outward(k, r);
        self.admit(r)
    }

    fn on_finished(&mut self, record: &RequestRecord, now: SimTime) -> Option<Request> {
        let k = usize::from(record.class);
        let n = self.classes();
        let mut local = record.clone();
        local.id /= n;
        local.session = record.session.map(|s| s / n);
        let next = self.sources.get_mut(k)?.workload.on_finished(&local, now)?;
        let next = self.outward(k, next);
        self.admit(next)
    }

    fn resumes_after_finish(&self) -> bool {
        self.sources
            .iter()
            .any(|s| s.workload.resumes_after_finish())
    }

    fn take_error(&mut self) -> Option<String> {
        self.sources
            .iter_mut()
            .find_map(|s| s.workload.take_error())
    }
}

/// Checks the classes: at least one, names unique and non-empty, no nested mix, each class's traffic
/// valid. `Err((field path, message))`, paths under `workload.classes[k]`.
pub fn validate(classes: &[ClassSpec]) -> Result<(), (String, String)> {
    if classes.is_empty() {
        return Err((
            "workload.classes".into(),
            "a mix needs at least one [[workload.classes]] entry".into(),
        ));
    }
    if classes.len() > MAX_CLASSES {
        return Err((
            "workload.classes".into(),
            format!("at most {MAX_CLASSES} classes, got {}", classes.len()),
        ));
    }
    for (k, c) in classes.iter().enumerate() {
        let at = |f: &str| format!("workload.classes[{k}].{f}");
        let name = c.name.trim();
        if name.is_empty() || name != c.name || c.name.contains([',', '=', '"']) {
            return Err((
                at("name"),
                format!(
                    "must be a non-empty name without surrounding spaces, commas, quotes or `=`, got {:?}",
                    c.name
                ),
            ));
        }
        if let Some(j) = classes[..k].iter().position(|o| o.name == c.name) {
            return Err((
                at("name"),
                format!("\"{}\" is already the name of class {j}", c.name),
            ));
        }
        match c.traffic.kind {
            super::WorkloadKind::Mix => {
                return Err((at("traffic.kind"), "a class cannot itself be a mix".into()));
            }
            // A benchmark client's clients start when its warm-up request finishes, after arrivals of
            // the other classes may already have been handed out: the merged stream could go back in
            // time. A closed loop of users is a `sessions` class.
            super::WorkloadKind::Stages => {
                return Err((
                    at("traffic.kind"),
                    "a staged client (`stages`) waits for its own requests to drain, which other classes' traffic would hold up: run it on its own".into(),
                ));
            }
            super::WorkloadKind::Concurrency | super::WorkloadKind::Benchmark => {
                return Err((
                    at("traffic.kind"),
                    "a benchmark client (`concurrency`) cannot be a class of a mix; model closed-loop users as a `sessions` class".into(),
                ));
            }
            _ => {}
        }
        c.traffic.validate().map_err(|(path, m)| {
            let key = path.strip_prefix("workload.").unwrap_or(&path);
            (at(&format!("traffic.{key}")), m)
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::record::Outcome;
    use crate::scenario::Scenario;

    const MIX: &str = r#"
name = "m"
duration = "60s"
seed = 7

[[workers]]
count = 1
gpu = "h100"
model = "llama-3.1-8b"

[workload]
kind = "mix"

[[workload.classes]]
name = "chat"
priority = 0
slo = { ttft = "500ms", tpot = "50ms" }
[workload.classes.traffic]
kind = "sessions"
session_rate = 1.0
turns = { dist = "fixed", tokens = 3 }
prompt = { dist = "fixed", tokens = 100 }
output = { dist = "fixed", tokens = 10 }
think_time = { dist = "fixed", value = "2s" }

[[workload.classes]]
name = "batch"
priority = 5
[workload.classes.traffic]
kind = "poisson"
rate = 2.0
prompt = { dist = "fixed", tokens = 2000 }
output = { dist = "fixed", tokens = 300 }
"#;

    fn build(text: &str) -> Box<dyn Workload> {
        let s = Scenario::parse(text, "m.toml", &[]).unwrap();
        s.workload
            .build(s.seed, SimTime(60 * crate::time::NANOS_PER_SEC), None)
            .unwrap()
            .workload
    }

    fn done(r: &Request, at: SimTime) -> RequestRecord {
        RequestRecord {
            first_scheduled: Some(r.arrival),
            first_token: Some(r.arrival),
            ..crate::workload::test_record(r, Outcome::Completed, at)
        }
    }

    #[test]
    fn classes_merge_in_arrival_order_with_their_own_ids_priorities_and_follow_ups() {
        let mut w = build(MIX);
        let mut seen = Vec::new();
        let mut follow_ups = 0;
        while let Some(r) = w.next_arrival() {
            if let Some(last) = seen.last() {
                let last: &Request = last;
                assert!(r.arrival >= last.arrival, "arrival order");
            }
            // Class 1 (batch) has priority 5; class 0 (chat) priority 0.
            assert_eq!(r.priority, if r.class == 1 { 5 } else { 0 });
            assert_eq!(r.id % 2, u64::from(r.class), "class k's ids are k mod 2");
            // Finish each turn as it arrives, and the turns it causes likewise.
            let mut prev = r.clone();
            while let Some(next) = w.on_finished(&done(&prev, prev.arrival), prev.arrival) {
                follow_ups += 1;
                assert_eq!(next.class, 0, "only chat sessions have follow-ups");
                assert_eq!(next.priority, 0);
                // The next turn quotes the answer the worker cached under the salted content id.
                assert!(next.segments.contains(&prev.output_segment()));
                assert_eq!(next.session.unwrap().id, prev.session.unwrap().id);
                assert_eq!(next.id % 2, 0);
                prev = next;
            }
            seen.push(r);
        }
        let chat = seen.iter().filter(|r| r.class == 0).count();
        let batch = seen.len() - chat;
        // 60 s at 1 session/s and 2 requests/s: about 60 first turns and 120 batch requests.
        assert!((35..=90).contains(&chat), "{chat}");
        assert!((80..=160).contains(&batch), "{batch}");
        assert!(
            follow_ups > chat,
            "two later turns per session (most before the window ends)"
        );
        let mut ids: Vec<u64> = seen.iter().map(|r| r.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), seen.len(), "ids are unique across classes");
    }

    #[test]
    fn a_class_draws_the_same_traffic_whatever_the_other_classes_are() {
        let batch_only = |text: &str| -> Vec<(SimTime, u32)> {
            let mut w = build(text);
            std::iter::from_fn(|| w.next_arrival())
                .filter(|r| r.priority == 5)
                .map(|r| (r.arrival, r.prompt_tokens))
                .collect()
        };
        let with_chat = batch_only(MIX);
        let alone = batch_only(&MIX.replace("session_rate = 1.0", "session_rate = 9.0"));
        assert!(!with_chat.is_empty());
        assert_eq!(with_chat, alone);
    }

    #[test]
    fn bad_classes_are_named_by_field() {
        let err = |t: &str| Scenario::parse(t, "m.toml", &[]).unwrap_err().to_string();
        let e = err(&MIX.replace("name = \"batch\"", "name = \"chat\""));
        assert!(
            e.contains("workload.classes[1].name") && e.contains("already the name of class 0"),
            "{e}"
        );
        let e = err(&MIX.replace("rate = 2.0", "session_rate = 2.0"));
        assert!(
            e.contains("workload.classes[1].traffic.session_rate: does not apply"),
            "{e}"
        );
        assert!(e.starts_with("m.toml:31:"), "{e}"); // the `session_rate` line of class 1
        let e = err(&MIX.replace("kind = \"poisson\"", "kind = \"mix\""));
        assert!(e.contains("workload.classes[1].traffic.kind"), "{e}");
        let e = err(&MIX.replace(
            "kind = \"poisson\"\nrate = 2.0",
            "kind = \"concurrency\"\nclients = 4",
        ));
        assert!(
            e.contains("workload.classes[1].traffic.kind") && e.contains("benchmark client"),
            "{e}"
        );
        let e = err(MIX.split("[[workload.classes]]").next().unwrap());
        assert!(e.contains("workload.classes"), "{e}");
        let e = err(&MIX.replace("priority = 5", "priority = \"high\""));
        assert!(e.contains("priority"), "{e}");
    }
}
