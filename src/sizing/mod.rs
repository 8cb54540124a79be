//! `fleetsim size`: for each candidate (GPU × TP × policy), the smallest worker count that meets every
//! SLO of the scenario's traffic, with failure headroom simulated by the fault machinery, costed and
//! ranked.
//!
//! Invariants:
//! - A count is *feasible* when every case passes: the scenario as given and, with headroom K, the same
//!   traffic with the K workers holding the most conversations crashed for good at each of
//!   [`CRASH_FRACTIONS`] of the arrival window (the worst case decides); with a headroom domain, the
//!   same with one whole failure domain crashed instead.
//! - The search assumes feasibility grows with the count. It brackets by doubling, bisects, and returns
//!   a count `n` with `n` feasible and `n - 1` *run and found infeasible* (or `n = 1`): never an
//!   unverified answer.
//! - Every run of a candidate uses the scenario's seed, so candidates see the same arrivals.

pub mod search;

use std::collections::BTreeMap;

use crate::compare::Contender;
use crate::engine::Simulation;
use crate::faults::FaultSpec;
use crate::hardware::GpuId;
use crate::scenario::Scenario;
use crate::time::SimDuration;

/// Where in the arrival window the headroom crashes are tried.
pub const CRASH_FRACTIONS: [f64; 3] = [0.25, 0.5, 0.75];

/// The SLOs a fleet must meet.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// p95 time to first token, ms.
    pub ttft_p95_ms: Option<f64>,
    /// p95 time per output token, ms.
    pub tpot_p95_ms: Option<f64>,
    /// Smallest fraction of arrived requests completed within every SLO.
    pub min_goodput: f64,
    /// Each traffic class's own targets (`kind = "mix"`), by class index; empty without a mix.
    pub classes: Vec<ClassTarget>,
}

/// The SLOs one traffic class must meet, judged on its own requests.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassTarget {
    pub name: String,
    /// p95 time to first token of the class's requests, ms.
    pub ttft_p95_ms: Option<f64>,
    /// p95 time per output token of the class's requests, ms.
    pub tpot_p95_ms: Option<f64>,
    /// Smallest fraction of the class's requests completed within the class's SLO.
    pub min_goodput: f64,
}

impl Target {
    /// The scenario's `[slo]` as p95 targets, with a goodput floor.
    /// A traffic mix's classes each add their own targets: the class's `slo` (its goodput floor
    /// defaulting to `min_goodput`), or the scenario's `[slo]` for a class without one.
    pub fn from_scenario(s: &Scenario, min_goodput: f64) -> Result<Target, String> {
        let classes: Vec<ClassTarget> = s
            .workload
            .class_list()
            .iter()
            .map(|c| {
                let slo = c.latency_slo(&s.slo);
                ClassTarget {
                    name: c.name.clone(),
                    ttft_p95_ms: slo.ttft.map(|d| d.as_millis_f64()),
                    tpot_p95_ms: slo.tpot.map(|d| d.as_millis_f64()),
                    min_goodput: c
                        .slo
                        .as_ref()
                        .and_then(|k| k.goodput)
                        .map_or(min_goodput, |g| g.0),
                }
            })
            .collect();
        let class_latency = classes
            .iter()
            .any(|c| c.ttft_p95_ms.is_some() || c.tpot_p95_ms.is_some());
        if s.slo.ttft.is_none() && s.slo.tpot.is_none() && !class_latency {
            return Err(if classes.is_empty() {
                "[slo]: size needs at least one of ttft and tpot".into()
            } else {
                "[slo]: size needs at least one of ttft and tpot, in [slo] or in a class's slo"
                    .into()
            });
        }
        Ok(Target {
            ttft_p95_ms: s.slo.ttft.map(|d| d.as_millis_f64()),
            tpot_p95_ms: s.slo.tpot.map(|d| d.as_millis_f64()),
            min_goodput,
            classes,
        })
    }
}

/// One SLO missed, and by how much.
#[derive(Clone, Debug, PartialEq)]
pub struct Miss {
    /// `p95 TTFT`, `p95 TPOT` or `goodput`.
    pub slo: &'static str,
    pub value: f64,
    pub limit: f64,
    /// Which case: `no fault` or `crash of 1 at 2m30s`.
    pub case: String,
    /// The traffic class that misses it; `None` for the whole fleet's traffic.
    pub class: Option<String>,
}

impl Miss {
    /// How far off, relative to the limit (positive: worse).
    pub fn excess(&self) -> f64 {
        if self.slo == "goodput" {
            (self.limit - self.value) / self.limit
        } else {
            (self.value - self.limit) / self.limit
        }
    }
}

impl std::fmt::Display for Miss {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        if let Some(c) = &self.class {
            write!(f, "class {c}: ")?;
        }
        if self.slo == "goodput" {
            write!(
                f,
                "{} {:.1}% < {:.1}% ({})",
                self.slo,
                self.value * 100.0,
                self.limit * 100.0,
                self.case
            )
        } else if self.value.is_finite() {
            write!(
                f,
                "{} {:.0} ms > {:.0} ms (+{:.0}%, {})",
                self.slo,
                self.value,
                self.limit,
                self.excess() * 100.0,
                self.case
            )
        } else {
            write!(f, "{}: no request completed ({})", self.slo, self.case)
        }
    }
}

/// The outcome of one worker count: the no-fault run's numbers, and the worst miss of any case.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation {
    pub count: u32,
    /// The worst miss over every case; `None` when every case meets every SLO.
    pub worst: Option<Miss>,
    pub ttft_p95_ms: f64,
    pub tpot_p95_ms: f64,
    pub goodput: f64,
    pub output_tokens_per_s: f64,
    /// Simulations run for this count.
    pub runs: u32,
}

impl Evaluation {
    pub fn feasible(&self) -> bool {
        self.worst.is_none()
    }
}

/// What a fleet must survive besides normal operation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Headroom {
    /// Lose this many workers: those with the most conversations.
    pub workers: u32,
    /// Lose one whole failure domain: workers are placed in domains `LABEL-0`, `LABEL-1`, ... of this
    /// many workers each (the last may be smaller), and the first (a full one) is lost.
    pub domain: Option<(String, u32)>,
}

impl Headroom {
    /// Whether no failure is simulated.
    pub fn is_none(&self) -> bool {
        self.workers == 0 && self.domain.is_none()
    }
}

/// A candidate fleet shape.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub gpu: GpuId,
    pub tp: u32,
    /// The routing policy (label and router).
    pub policy: Contender,
}

/// The scenario with `n` workers of candidate `c` (the scenario's single worker group reshaped).
pub fn fleet(base: &Scenario, c: &Candidate, n: u32) -> Scenario {
    let mut s = base.clone();
    let g = &mut s.workers[0];
    g.count = crate::config::PositiveInt(n);
    if g.gpu != c.gpu || g.tp.0 != c.tp {
        // A fitted profile file belongs to the configuration it was measured on.
        g.profile = None;
        g.loaded_profile = None;
    }
    g.gpu = c.gpu;
    g.tp = crate::config::PositiveInt(c.tp);
    s.router = c.policy.router.clone();
    s
}

/// [`fleet`] with its workers placed in failure domains of `size` workers named `LABEL-0`, `LABEL-1`, ...
pub fn fleet_in_domains(
    base: &Scenario,
    c: &Candidate,
    n: u32,
    label: &str,
    size: u32,
) -> Scenario {
    let mut s = fleet(base, c, n);
    let template = s.workers[0].clone();
    let size = size.max(1);
    s.workers = (0..n.div_ceil(size))
        .map(|d| {
            let mut g = template.clone();
            g.count = crate::config::PositiveInt(size.min(n - d * size));
            g.failure_domain = crate::scenario::Domains(vec![format!("{label}-{d}")]);
            g
        })
        .collect();
    s
}

/// A crash for good at `at` of `target` (`worker = "most_sessions"` or `domain = "rack-0"`).
fn crash(target: &str, at: SimDuration) -> FaultSpec {
    let text = format!(
        "kind = \"crash\"\n{target}\nat = \"{}ms\"\nrestart = false\n",
        at.as_millis_f64().round() as u64
    );
    toml::from_str(&text).expect("a well-formed crash fault")
}

/// The cases a count must pass: (label, scenario). `s` is the fleet (in domains, if one is to be lost).
fn cases(s: &Scenario, headroom: &Headroom) -> Vec<(String, Scenario)> {
    let mut out = vec![("no fault".to_string(), s.clone())];
    for f in CRASH_FRACTIONS {
        let at = SimDuration::from_secs_f64(s.duration.as_secs_f64() * f);
        if headroom.workers > 0 {
            let mut c = s.clone();
            c.faults
                .extend((0..headroom.workers).map(|_| crash("worker = \"most_sessions\"", at)));
            out.push((format!("{} lost at {at}", headroom.workers), c));
        }
        if let Some((label, _)) = &headroom.domain {
            let mut c = s.clone();
            c.faults.push(crash(&format!("domain = \"{label}-0\""), at));
            out.push((format!("{label}-0 lost at {at}"), c));
        }
    }
    out
}

/// Runs every case of `n` workers of `c` and judges them against `target`.
pub fn evaluate(
    base: &Scenario,
    c: &Candidate,
    n: u32,
    headroom: &Headroom,
    target: &Target,
) -> Result<Evaluation, String> {
    use rayon::prelude::*;
    let (s, lost) = match &headroom.domain {
        Some((label, size)) => (
            fleet_in_domains(base, c, n, label, *size),
            headroom.workers.max(*size),
        ),
        None => (fleet(base, c, n), headroom.workers),
    };
    if lost >= n {
        return Ok(Evaluation {
            count: n,
            worst: Some(Miss {
                slo: "goodput",
                value: 0.0,
                limit: target.min_goodput,
                case: format!("losing {lost} of {n} workers leaves none"),
                class: None,
            }),
            ttft_p95_ms: f64::NAN,
            tpot_p95_ms: f64::NAN,
            goodput: 0.0,
            output_tokens_per_s: 0.0,
            runs: 0,
        });
    }
    let cases = cases(&s, headroom);
    let results: Vec<(String, crate::metrics::summary::Summary)> = cases
        .par_iter()
        .map(|(label, sc)| {
            sc.validate()
                .map_err(|(f, m)| format!("{} × {n}: {f}: {m}", c.gpu.as_str()))?;
            let out = Simulation::from_scenario(sc)?.try_run(&mut |_| {})?;
            Ok((label.clone(), out.summary))
        })
        .collect::<Result<_, String>>()?;
    let mut worst: Option<Miss> = None;
    for (label, sm) in &results {
        for m in misses(sm, target, label) {
            if worst.as_ref().is_none_or(|w| m.excess() > w.excess()) {
                worst = Some(m);
            }
        }
    }
    let base_run = &results[0].1;
    let p95 = |d: &crate::metrics::summary::Dist| if d.count > 0 { d.p95 } else { f64::NAN };
    Ok(Evaluation {
        count: n,
        worst,
        ttft_p95_ms: p95(&base_run.ttft_ms),
        tpot_p95_ms: p95(&base_run.tpot_ms),
        goodput: base_run.goodput.fraction,
        output_tokens_per_s: base_run.throughput.output_tokens_per_s,
        runs: results.len() as u32,
    })
}

/// Every SLO one run misses: the fleet's, then each class's against its own targets.
fn misses(s: &crate::metrics::summary::Summary, t: &Target, case: &str) -> Vec<Miss> {
    let mut out = Vec::new();
    let mut check = |class: Option<&str>,
                     slo: &'static str,
                     d: &crate::metrics::summary::Dist,
                     limit: Option<f64>| {
        if let Some(limit) = limit {
            let value = if d.count > 0 { d.p95 } else { f64::INFINITY };
            if value > limit {
                out.push(Miss {
                    slo,
                    value,
                    limit,
                    case: case.to_string(),
                    class: class.map(str::to_string),
                });
            }
        }
    };
    check(None, "p95 TTFT", &s.ttft_ms, t.ttft_p95_ms);
    check(None, "p95 TPOT", &s.tpot_ms, t.tpot_p95_ms);
    for (ct, cs) in t.classes.iter().zip(&s.classes) {
        check(Some(&ct.name), "p95 TTFT", &cs.ttft_ms, ct.ttft_p95_ms);
        check(Some(&ct.name), "p95 TPOT", &cs.tpot_ms, ct.tpot_p95_ms);
    }
    if s.goodput.fraction < t.min_goodput {
        out.push(Miss {
            slo: "goodput",
            value: s.goodput.fraction,
            limit: t.min_goodput,
            case: case.to_string(),
            class: None,
        });
    }
    for (ct, cs) in t.classes.iter().zip(&s.classes) {
        if cs.goodput < ct.min_goodput {
            out.push(Miss {
                slo: "goodput",
                value: cs.goodput,
                limit: ct.min_goodput,
                case: case.to_string(),
                class: Some(ct.name.clone()),
            });
        }
    }
    out
}

/// US dollars per GPU-hour of `gpu`: the scenario's `[prices]`, else the catalogue's.
pub fn price(s: &Scenario, gpu: GpuId) -> Result<f64, String> {
    if let Some(p) = s.prices.get(&gpu) {
        return Ok(p.0);
    }
    crate::hardware::price::catalogue_price(gpu)
        .map(|p| p.usd_per_gpu_hour)
        .ok_or_else(|| {
            format!(
                "the catalogue has no public price for {0}: set one in the scenario, `[prices]` `{0} = 2.5` (US dollars per GPU-hour)",
                gpu.as_str()
            )
        })
}

/// Fleet cost per hour and per million output tokens.
pub fn cost(usd_per_gpu_hour: f64, tp: u32, count: u32, output_tokens_per_s: f64) -> (f64, f64) {
    let per_hour = usd_per_gpu_hour * f64::from(tp) * f64::from(count);
    let per_million = if output_tokens_per_s > 0.0 {
        per_hour / (output_tokens_per_s * 3600.0) * 1e6
    } else {
        f64::NAN
    };
    (per_hour, per_million)
}

/// Evaluations of one candidate, by count (the search's memory).
pub type Tried = BTreeMap<u32, Evaluation>;

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
rate = 5.0
prompt = { dist = "fixed", tokens = 100 }
output = { dist = "fixed", tokens = 10 }

[slo]
ttft = "1s"
"#;

    #[test]
    fn the_scenario_price_wins_over_the_catalogue() {
        let plain = Scenario::parse(S, "s.toml", &[]).unwrap();
        assert_eq!(price(&plain, GpuId::H100).unwrap(), 3.00);
        let e = price(&plain, GpuId::L40s).unwrap_err();
        assert!(e.contains("[prices]") && e.contains("l40s"), "{e}");
        let own = Scenario::parse(
            &format!("{S}\n[prices]\nh100 = 2.1\nl40s = 0.9\n"),
            "s.toml",
            &[],
        )
        .unwrap();
        assert_eq!(price(&own, GpuId::H100).unwrap(), 2.1);
        assert_eq!(price(&own, GpuId::L40s).unwrap(), 0.9);
    }

    #[test]
    fn bad_prices_name_the_line() {
        let text = format!("{S}\n[prices]\nh900 = 2.1\n");
        let line = text.lines().position(|l| l.starts_with("h900")).unwrap() + 1;
        let e = Scenario::parse(&text, "s.toml", &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(&format!("s.toml:{line}:")) && e.contains("h900"),
            "{e}"
        );
        let e = Scenario::parse(&format!("{S}\n[prices]\nh100 = -1\n"), "s.toml", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("greater than 0"), "{e}");
    }

    #[test]
    fn cost_per_hour_and_per_million_tokens() {
        // 4 workers × TP 2 × $3/GPU-h = $24/h; 1,000 output tokens/s = 3.6 M tokens/h → $6.67 per M.
        let (h, m) = cost(3.0, 2, 4, 1000.0);
        assert_eq!(h, 24.0);
        assert!((m - 24.0 / 3.6).abs() < 1e-12);
        assert!(cost(3.0, 1, 1, 0.0).1.is_nan());
    }

    #[test]
    fn domains_hold_at_most_their_size_and_cover_the_fleet() {
        let s = Scenario::parse(S, "s.toml", &[]).unwrap();
        let c = Candidate {
            gpu: GpuId::H200,
            tp: 1,
            policy: Contender {
                label: "round_robin".into(),
                router: s.router.clone(),
                scenario: None,
            },
        };
        let f = fleet_in_domains(&s, &c, 10, "rack", 4);
        let counts: Vec<u32> = f.workers.iter().map(|g| g.count.0).collect();
        assert_eq!(counts, [4, 4, 2]);
        assert_eq!(f.workers[2].failure_domain.0, ["rack-2"]);
        assert!(f.workers.iter().all(|g| g.gpu == GpuId::H200));
        assert!(f.validate().is_ok());
    }
}
