//! `fleetsim compare`: the same arrivals through several routing policies, side by side.
//!
//! Every run uses the scenario's seed, so the workload's random stream, and hence the open-loop arrivals
//! and every request's content and lengths, are identical across policies (closed-loop workloads get the
//! same session specifications; their timing then depends on the policy, as it would in production).
//! Runs execute in parallel with rayon; results are ordered by the policy list, never by finishing time,
//! so the output bytes do not depend on the thread count.

use std::collections::BTreeMap;
use std::fmt::Write;

use rayon::prelude::*;
use serde::Serialize;

use crate::confidence::Estimate;
use crate::engine::{RunOutput, RunProgress, Simulation, twin};
use crate::metrics::Summary;
use crate::metrics::requests::RequestSink;
use crate::metrics::summary::round;
use crate::routing::RouterSpec;
use crate::scenario::Scenario;

/// One policy to compare: a label (used for its results folder) and its router configuration; with
/// `--vary`, also the scenario it runs (the base scenario with one key overridden).
#[derive(Clone, Debug, PartialEq)]
pub struct Contender {
    pub label: String,
    pub router: RouterSpec,
    /// The scenario to run, if not the base one.
    pub scenario: Option<Box<Scenario>>,
}

impl Contender {
    /// The scenario this contender runs: its own variant (or `base`) with its router.
    pub fn resolved(&self, base: &Scenario) -> Scenario {
        let mut s = self.scenario.as_deref().unwrap_or(base).clone();
        s.router = self.router.clone();
        s
    }
}

/// Crosses contenders with variants of the scenario `base`: `variants` are (label, scenario) pairs,
/// e.g. `gateway.session_state=worker` and the scenario loaded with that override. With one contender
/// the variant's label alone names the run; with several, `policy variant`. A router setting the
/// variant changes from `base` (`router.replicas=4`) applies to every contender's router.
pub fn cross(
    contenders: Vec<Contender>,
    base: &Scenario,
    variants: &[(String, Scenario)],
) -> Result<Vec<Contender>, String> {
    if variants.is_empty() {
        return Ok(contenders);
    }
    let single = contenders.len() == 1;
    let mut out = Vec::new();
    for c in &contenders {
        for (label, s) in variants {
            out.push(Contender {
                label: if single {
                    label.clone()
                } else {
                    format!("{} {label}", c.label)
                },
                router: with_settings_changed(&c.router, &base.router, &s.router)?,
                scenario: Some(Box::new(s.clone())),
            });
        }
    }
    Ok(out)
}

/// `router` with every router setting that `variant` sets differently from `base`.
fn with_settings_changed(
    router: &RouterSpec,
    base: &RouterSpec,
    variant: &RouterSpec,
) -> Result<RouterSpec, String> {
    if variant.settings == base.settings {
        return Ok(router.clone());
    }
    let table = |s: &crate::routing::spec::RouterSettings| -> Result<toml::Table, String> {
        match toml::Value::try_from(s).map_err(|e| e.to_string())? {
            toml::Value::Table(t) => Ok(t),
            _ => Err("router settings are not a table".into()),
        }
    };
    let (from, to) = (table(&base.settings)?, table(&variant.settings)?);
    let mut out = table(&router.settings)?;
    for k in from.keys().chain(to.keys()) {
        if from.get(k) != to.get(k) {
            match to.get(k) {
                Some(v) => out.insert(k.clone(), v.clone()),
                None => out.remove(k),
            };
        }
    }
    let settings = toml::Value::Table(out)
        .try_into()
        .map_err(|e: toml::de::Error| e.message().trim().to_string())?;
    Ok(RouterSpec {
        policy: router.policy.clone(),
        settings,
    })
}

/// Resolves a `--policies` list against the scenario. Items are names of `[policies.NAME]` tables in the
/// scenario, or policy specs `name[:key=value,...]`; an item `key=value` without a policy name continues
/// the previous item's parameters (so `prefix_aware:load_weight=0.5,prefix_weight=2` is one policy). Router
/// settings (`view`, `event_delay`, ...) not given default to the scenario's `[router]` table.
pub fn resolve(list: &str, scenario: &Scenario) -> Result<Vec<Contender>, String> {
    let mut items: Vec<String> = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let continues = part.contains('=') && !part.contains(':');
        match items.last_mut() {
            Some(last) if continues => {
                last.push(if last.contains(':') { ',' } else { ':' });
                last.push_str(part);
            }
            _ if continues => return Err(format!("`{part}` has no policy name before it")),
            _ => items.push(part.to_string()),
        }
    }
    if items.is_empty() {
        return Err("no policies given".into());
    }
    let mut out = Vec::new();
    for item in items {
        let router = match scenario.policies.get(&item) {
            Some(spec) => spec.clone(),
            None => parse_item(&item, scenario)?,
        };
        if out.iter().any(|c: &Contender| c.label == item) {
            return Err(format!("policy `{item}` is listed twice"));
        }
        out.push(Contender {
            label: item,
            router,
            scenario: None,
        });
    }
    Ok(out)
}

fn parse_item(item: &str, scenario: &Scenario) -> Result<RouterSpec, String> {
    let mut table = toml::Table::new();
    // The scenario's router settings first; the item's own keys override them.
    let base = toml::Value::try_from(&scenario.router.settings).map_err(|e| e.to_string())?;
    if let toml::Value::Table(t) = base {
        table.extend(
            t.into_iter()
                .filter(|(k, _)| k != "view" || scenario.router.settings.view.is_some()),
        );
    }
    crate::routing::spec::spec_into_table(item, &mut table)?;
    RouterSpec::from_table(table).map_err(|e| format!("policy `{item}`: {e}"))
}

/// A folder name for a label: letters, digits, `_`, `-`, `.` and `=` kept, anything else `-`.
pub fn folder_name(label: &str) -> String {
    label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_-.=".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// Runs every contender on the scenario (in parallel), in list order.
pub fn run_all(scenario: &Scenario, contenders: &[Contender]) -> Result<Vec<RunOutput>, String> {
    Ok(
        run_all_timed(scenario, contenders, 0, &|_, _| Ok(None), &|_, _| {})?
            .into_iter()
            .map(|(o, _)| o)
            .collect(),
    )
}

/// Where a contender's per-request records go in replication `r` (0-based), if anywhere.
pub type SinkFor<'a> =
    dyn Fn(&Contender, u32) -> Result<Option<Box<dyn RequestSink>>, String> + Sync + 'a;

/// Replication `r` of every contender (in parallel, on the same seed: common random numbers), with each
/// run's own wall time in seconds (for its `run_info.json`), each run streaming its requests to
/// `sink(contender, r)` and reporting `progress(index, where it stands)`. Replication 0 is the scenario's
/// own seed.
pub fn run_all_timed(
    scenario: &Scenario,
    contenders: &[Contender],
    r: u32,
    sink: &SinkFor,
    progress: &(dyn Fn(usize, &RunProgress) + Sync),
) -> Result<Vec<(RunOutput, f64)>, String> {
    contenders
        .par_iter()
        .enumerate()
        .map(|(i, c)| {
            let mut s = c.resolved(scenario);
            s.seed = crate::confidence::replication_seed(s.seed, r);
            s.validate()
                .map_err(|(f, m)| format!("{}: {f}: {m}", c.label))?;
            let started = std::time::Instant::now();
            let prepare = |sim: &mut Simulation| {
                if let Some(sink) = sink(c, r)? {
                    sim.stream_requests(sink);
                }
                Ok(())
            };
            let out = twin::run_judged(&s, true, prepare, &mut |p| progress(i, p))?;
            Ok((out, started.elapsed().as_secs_f64()))
        })
        .collect()
}

/// The headline numbers of one run, as compared.
#[derive(Clone, Debug, Serialize)]
pub struct Headline {
    pub label: String,
    pub policy: String,
    pub view: Option<String>,
    /// Metric name → value, in a fixed order.
    pub metrics: BTreeMap<&'static str, f64>,
}

pub use crate::metrics::headline::METRICS;

/// The headline numbers of one run. A statistic of an empty set (no request completed, no prompt token
/// served) is NaN here: `–` in the tables, empty in the CSV, `null` in the JSON — never 0.
fn headline(label: &str, s: &Summary) -> Headline {
    Headline {
        label: label.to_string(),
        policy: s.router.policy.clone(),
        view: s.router.view.clone(),
        metrics: crate::metrics::headline::values(s),
    }
}

/// The comparison of several runs of one scenario.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub scenario: String,
    pub seed: u64,
    /// The first policy: differences are relative to it.
    pub baseline: String,
    pub runs: Vec<Headline>,
    /// Per run, metric → difference from the baseline (absolute).
    pub diff: Vec<BTreeMap<&'static str, f64>>,
    /// Per run, metric → relative difference from the baseline (0.1 = +10%; absent when the baseline is 0).
    pub diff_relative: Vec<BTreeMap<&'static str, f64>>,
    /// With `--replications N` (N > 1): intervals over the replications and paired differences from the
    /// baseline; the fields above are then the first replication's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replications: Option<Paired>,
}

/// A comparison over replications on common random numbers: replication `r` of every policy sees the
/// same seed, so each policy's difference from the baseline is estimated pair by pair.
#[derive(Clone, Debug, Serialize)]
pub struct Paired {
    pub n: u32,
    pub level: f64,
    pub seeds: Vec<u64>,
    /// Per run, metric → estimate of its mean.
    pub runs: Vec<BTreeMap<&'static str, Estimate>>,
    /// Per run, metric → paired estimate of (this run − the baseline); the baseline's own is empty.
    pub diff: Vec<BTreeMap<&'static str, Estimate>>,
    /// With `--precision`: how the sequential procedure ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precision: Option<crate::metrics::intervals::PrecisionOutcome>,
}

impl Paired {
    /// `summaries[run][replication]`, every run with the same replications in the same order.
    pub fn of(
        summaries: &[Vec<&Summary>],
        precision: Option<crate::metrics::intervals::PrecisionOutcome>,
    ) -> Paired {
        let values: Vec<Vec<BTreeMap<&'static str, f64>>> = summaries
            .iter()
            .map(|reps| {
                reps.iter()
                    .map(|s| crate::metrics::headline::values(s))
                    .collect()
            })
            .collect();
        let series =
            |run: usize, k: &str| -> Vec<f64> { values[run].iter().map(|m| m[k]).collect() };
        let runs = (0..summaries.len())
            .map(|i| {
                METRICS
                    .iter()
                    .map(|(k, _)| (*k, Estimate::of(&series(i, k))))
                    .collect()
            })
            .collect();
        let diff = (0..summaries.len())
            .map(|i| {
                if i == 0 {
                    return BTreeMap::new();
                }
                METRICS
                    .iter()
                    .map(|(k, _)| (*k, Estimate::paired(&series(0, k), &series(i, k))))
                    .collect()
            })
            .collect();
        Paired {
            n: summaries.first().map_or(0, |r| r.len() as u32),
            level: crate::confidence::LEVEL,
            seeds: summaries
                .first()
                .map(|r| r.iter().map(|s| s.seed).collect())
                .unwrap_or_default(),
            runs,
            diff,
            precision,
        }
    }

    /// The verdict on one difference: `+1.2 ± 0.3` when the interval excludes 0, else
    /// `no detectable difference at N = 5`.
    pub fn verdict(&self, run: usize, metric: &str) -> String {
        let Some(d) = self.diff.get(run).and_then(|m| m.get(metric)) else {
            return String::new();
        };
        if d.n < 2 {
            return "no interval (fewer than 2 replications with a value)".into();
        }
        if d.excludes(0.0) {
            format!("Δ {} ± {}", signed(d.mean), format_value(d.half_width))
        } else {
            format!("no detectable difference at N = {}", d.n)
        }
    }

    /// The Markdown section: each policy's mean ± half-width and its paired difference from the first.
    pub fn to_markdown(&self, labels: &[String]) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "## Over {} replications ({:.0}% confidence; replication r of every policy on the same seed, differences paired)\n",
            self.n,
            self.level * 100.0
        );
        if let Some(p) = &self.precision {
            let _ = writeln!(o, "{}\n", p.line(self.n, " for the least precise policy"));
        }
        let _ = write!(o, "| metric |");
        for l in labels {
            let _ = write!(o, " {l} |");
        }
        let _ = write!(o, "\n|---|");
        for _ in labels {
            let _ = write!(o, "---:|");
        }
        o.push('\n');
        for (k, lower_better) in METRICS {
            if self.runs.iter().all(|r| r[k].n == 0) {
                continue;
            }
            let _ = write!(o, "| {k}{} |", if lower_better { " ↓" } else { " ↑" });
            for (i, r) in self.runs.iter().enumerate() {
                let e = &r[k];
                let cell = interval_text(e);
                if i == 0 {
                    let _ = write!(o, " {cell} |");
                } else {
                    let _ = write!(o, " {cell} ({}) |", self.verdict(i, k));
                }
            }
            o.push('\n');
        }
        o
    }
}

/// `12.3 ± 0.4` in the table's number format; `–` without a value.
fn interval_text(e: &Estimate) -> String {
    if !e.mean.is_finite() {
        "–".into()
    } else if e.half_width.is_finite() {
        format!("{} ± {}", format_value(e.mean), format_value(e.half_width))
    } else {
        format_value(e.mean)
    }
}

fn signed(v: f64) -> String {
    if v >= 0.0 {
        format!("+{}", format_value(v))
    } else {
        format_value(v)
    }
}

impl Comparison {
    /// Builds the comparison from runs in contender order.
    pub fn new(scenario: &Scenario, contenders: &[Contender], outputs: &[RunOutput]) -> Self {
        let runs: Vec<Headline> = contenders
            .iter()
            .zip(outputs)
            .map(|(c, o)| headline(&c.label, &o.summary))
            .collect();
        let base = runs[0].metrics.clone();
        let diff = runs
            .iter()
            .map(|r| {
                r.metrics
                    .iter()
                    .map(|(k, v)| (*k, round(v - base[k], 6)))
                    .collect()
            })
            .collect();
        let diff_relative = runs
            .iter()
            .map(|r| {
                r.metrics
                    .iter()
                    .filter(|(k, v)| base[*k] != 0.0 && base[*k].is_finite() && v.is_finite())
                    .map(|(k, v)| (*k, round(v / base[k] - 1.0, 6)))
                    .collect()
            })
            .collect();
        Comparison {
            scenario: scenario.name.clone(),
            seed: scenario.seed,
            baseline: runs[0].label.clone(),
            runs,
            diff,
            diff_relative,
            replications: None,
        }
    }

    /// Which metrics the tables show: the core ones, and a fleet metric (swaps, LoRA loads,
    /// replica-hours, ...) where some run has a value.
    fn shown(&self) -> impl Fn(&str) -> bool + '_ {
        |k| {
            crate::metrics::headline::shown(
                k,
                self.runs
                    .iter()
                    .any(|r| r.metrics.get(k).is_some_and(|v| !v.is_nan())),
            )
        }
    }

    /// `comparison.json`.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("comparison serialises") + "\n"
    }

    /// `comparison.csv`: one row per policy, every metric and its difference from the baseline.
    pub fn to_csv(&self) -> Vec<u8> {
        let mut w = csv::Writer::from_writer(Vec::new());
        let mut header = vec![
            "label".to_string(),
            "policy".to_string(),
            "view".to_string(),
        ];
        let shown = self.shown();
        for (k, _) in METRICS.iter().filter(|(k, _)| shown(k)) {
            header.push(k.to_string());
            header.push(format!("{k}_diff"));
        }
        w.write_record(&header).expect("in-memory CSV");
        for (r, d) in self.runs.iter().zip(&self.diff) {
            let mut row = vec![
                r.label.clone(),
                r.policy.clone(),
                r.view.clone().unwrap_or_default(),
            ];
            for (k, _) in METRICS.iter().filter(|(k, _)| shown(k)) {
                let cell = |v: f64| {
                    if v.is_nan() {
                        String::new()
                    } else {
                        format_value(v)
                    }
                };
                row.push(cell(r.metrics[k]));
                row.push(cell(d[k]));
            }
            w.write_record(&row).expect("in-memory CSV");
        }
        w.into_inner().expect("in-memory CSV")
    }

    /// `comparison.md`: metrics as rows, policies as columns, the difference from the first in brackets.
    pub fn to_markdown(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "# {} — policies compared (seed {})\n",
            self.scenario, self.seed
        );
        if let Some(p) = &self.replications {
            let labels: Vec<String> = self.runs.iter().map(|r| r.label.clone()).collect();
            o.push_str(&p.to_markdown(&labels));
            let _ = writeln!(o, "\n## Replication 1 (seed {})\n", self.seed);
        }
        let _ = write!(o, "| metric |");
        for r in &self.runs {
            let view = r
                .view
                .as_deref()
                .map(|v| format!(" ({v})"))
                .unwrap_or_default();
            let _ = write!(o, " {}{} |", r.label, view);
        }
        let _ = write!(o, "\n|---|");
        for _ in &self.runs {
            let _ = write!(o, "---:|");
        }
        o.push('\n');
        let shown = self.shown();
        for (k, lower_better) in METRICS.into_iter().filter(|(k, _)| shown(k)) {
            let _ = write!(o, "| {k}{} |", if lower_better { " ↓" } else { " ↑" });
            for (i, r) in self.runs.iter().enumerate() {
                let v = r.metrics[k];
                match self.diff_relative[i].get(k) {
                    Some(rel) if i > 0 => {
                        let _ = write!(o, " {} ({:+.1}%) |", format_value(v), rel * 100.0);
                    }
                    _ => {
                        let _ = write!(o, " {} |", format_value(v));
                    }
                }
            }
            o.push('\n');
        }
        o
    }
}

fn format_value(v: f64) -> String {
    if v.is_nan() {
        "–".to_string()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: &str = r#"
name = "t"
duration = "10s"
[[workers]]
count = 2
gpu = "h100"
model = "llama-3.1-8b"
[workload]
kind = "poisson"
rate = 1.0
prompt = { dist = "fixed", tokens = 100 }
output = { dist = "fixed", tokens = 10 }
[router]
policy = "round_robin"
event_delay = "5ms"
[policies.sticky]
policy = "session_affinity"
ttl = "1m"
"#;

    #[test]
    fn a_varied_router_setting_reaches_every_contender_and_their_own_settings_stay() {
        let s = Scenario::parse(S, "t.toml", &[]).unwrap();
        let c = resolve("round_robin, prefix_aware:event_delay=20ms", &s).unwrap();
        let vary = |set: &str| {
            (
                set.to_string(),
                Scenario::parse(S, "t.toml", &[set.to_string()]).unwrap(),
            )
        };
        let crossed = cross(c, &s, &[vary("router.replicas=4"), vary("seed=3")]).unwrap();
        let settings: Vec<_> = crossed
            .iter()
            .map(|c| (c.router.settings.replicas.0, c.router.settings.event_delay))
            .collect();
        let ms = crate::time::SimDuration::from_millis;
        assert_eq!(
            settings,
            [(4, ms(5)), (1, ms(5)), (4, ms(20)), (1, ms(20))],
            "the varied key changes, the contender's own key and the rest stay"
        );
        assert_eq!(crossed[2].router.policy.name(), "prefix_aware");
    }

    #[test]
    fn resolves_names_tables_and_continued_parameters() {
        let s = Scenario::parse(S, "t.toml", &[]).unwrap();
        let c = resolve("round_robin, sticky, prefix_aware:load_weight=0.5,prefix_weight=2, dynamo_kv:view=oracle", &s).unwrap();
        let labels: Vec<_> = c.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "round_robin",
                "sticky",
                "prefix_aware:load_weight=0.5,prefix_weight=2",
                "dynamo_kv:view=oracle"
            ]
        );
        assert_eq!(c[1].router.policy.name(), "session_affinity");
        assert_eq!(
            c[2].router.settings.event_delay,
            crate::time::SimDuration::from_millis(5)
        );
        assert_eq!(c[3].router.view(), crate::routing::view::ViewKind::Oracle);
        assert!(resolve("load_weight=1", &s).is_err());
        assert!(resolve("round_robin,round_robin", &s).is_err());
        assert!(
            resolve("prefix_aware:bogus=1", &s)
                .unwrap_err()
                .contains("bogus")
        );
        assert_eq!(
            folder_name("prefix_aware:load_weight=0.5"),
            "prefix_aware-load_weight=0.5"
        );
    }

    #[test]
    fn statistics_of_an_empty_set_are_dashes_not_zeros() {
        // Every prompt (100 tokens + 10 out) needs 7 blocks of 16; a worker of 2 blocks rejects them all.
        let s = Scenario::parse(S, "t.toml", &["workers[0].kv_blocks=2".into()]).unwrap();
        let c = resolve("round_robin,least_outstanding", &s).unwrap();
        let outputs = run_all(&s, &c).unwrap();
        assert!(
            outputs[0].summary.requests.completed == 0 && outputs[0].summary.requests.rejected > 0
        );
        let cmp = Comparison::new(&s, &c, &outputs);
        let md = cmp.to_markdown();
        let ttft = md.lines().find(|l| l.starts_with("| ttft_p95_ms")).unwrap();
        assert_eq!(ttft, "| ttft_p95_ms ↓ | – | – |");
        let hit = md
            .lines()
            .find(|l| l.starts_with("| prefix_hit_rate"))
            .unwrap();
        assert_eq!(hit, "| prefix_hit_rate ↑ | – | – |");
        assert!(cmp.to_json().contains("\"ttft_p95_ms\": null"));
        let csv = String::from_utf8(cmp.to_csv()).unwrap();
        assert!(!csv.contains("NaN"), "{csv}");
    }
}
