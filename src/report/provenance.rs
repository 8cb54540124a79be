//! `run_info.json`: where a run's numbers came from, so that a number has an expiry date.
//!
//! Everything machine- or moment-dependent (wall time, date, command line) lives here and never in
//! `summary.json`, which stays byte-identical for the same scenario and seed.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::engine::RunOutput;
use crate::scenario::Scenario;

/// The commit fleetsim was built from (`build.rs`), or `unknown` when built outside a git checkout.
pub const GIT_COMMIT: &str = env!("FLEETSIM_GIT_COMMIT");

/// `run_info.json`'s contents for `out`, a run of `scenario` (resolved: its variant and router) that took
/// `wall_s` seconds and ended at `now`.
///
/// Keys: `fleetsim_version`, `git_commit`, `date_utc` (RFC 3339), `command_line`, `seed`, `meta` (the
/// scenario's `[meta]` notes), `profiles` (one entry per distinct step-time profile, with whether it is
/// calibrated and the workers that used it), `scenario` (every default filled in), and the run's speed.
pub fn run_info(scenario: &Scenario, out: &RunOutput, wall_s: f64, now: SystemTime) -> Value {
    let s = &out.summary;
    json!({
        "fleetsim_version": env!("CARGO_PKG_VERSION"),
        "git_commit": GIT_COMMIT,
        "date_utc": rfc3339_utc(now),
        "command_line": std::env::args().collect::<Vec<_>>(),
        "seed": scenario.seed,
        "meta": scenario.meta,
        "profiles": profiles_used(out),
        "wall_seconds": wall_s,
        "simulated_seconds": s.sim.simulated_s,
        "events": s.sim.events,
        "events_per_wall_second": s.sim.events as f64 / wall_s.max(1e-9),
        "scenario": scenario,
    })
}

/// One entry per distinct (gpu, model, tp, precision, profile), in order of first use: the profile's name,
/// whether it was fitted to measurements of this configuration, and the ids of the workers that used it.
fn profiles_used(out: &RunOutput) -> Vec<Value> {
    let mut order: Vec<(String, String, u32, String, String, bool)> = Vec::new();
    let mut workers: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for w in &out.summary.workers {
        let key = (
            w.gpu.clone(),
            w.model.clone(),
            w.tp,
            w.precision.clone(),
            w.profile.clone(),
            w.calibrated,
        );
        let i = match order.iter().position(|k| *k == key) {
            Some(i) => i,
            None => {
                order.push(key);
                order.len() - 1
            }
        };
        workers.entry(i).or_default().push(w.id);
    }
    order
        .into_iter()
        .enumerate()
        .map(|(i, (gpu, model, tp, precision, profile, calibrated))| {
            json!({
                "gpu": gpu,
                "model": model,
                "tp": tp,
                "precision": precision,
                "profile": profile,
                "calibrated": calibrated,
                "workers": workers[&i],
            })
        })
        .collect()
}

/// `t` as an RFC 3339 UTC timestamp to the second (`2026-11-30T18:05:00Z`); times before 1970 print as
/// the epoch.
pub fn rfc3339_utc(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The proleptic Gregorian (year, month, day) of `z` days since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, from his public "chrono-Compatible Low-Level Date Algorithms").
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March = 0
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(secs: u64) -> String {
        rfc3339_utc(UNIX_EPOCH + Duration::from_secs(secs))
    }

    #[test]
    fn dates_are_rfc3339_utc() {
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        // 30 years of 365 days plus 7 leap days (1972..=1996) to 2000-01-01 = 10957 days; + 31 (Jan)
        // + 28 (Feb 1..28) = 11016 days to 2000-02-29, a leap day of a year divisible by 400.
        assert_eq!(at(11_016 * 86_400), "2000-02-29T00:00:00Z");
        // 2000-03-01 follows it.
        assert_eq!(at(11_017 * 86_400), "2000-03-01T00:00:00Z");
        // 1_700_000_000 s = 19675 days + 80000 s; 80000 s = 22:13:20; day 19675 = 2023-11-14 (10957 days
        // to 2000, then 8718 = 23 years of 365 + 6 leap days (2000..2020) = 8401, + 304 days to Nov 1
        // + 13).
        assert_eq!(at(1_700_000_000), "2023-11-14T22:13:20Z");
        // 2100 is not a leap year: 2100-02-28 is followed by 2100-03-01 (day 47541 from 1970 is
        // 2100-03-01: 130 years × 365 + 32 leap days (1972..=2096) = 47482, + 31 + 28).
        assert_eq!(at(47_541 * 86_400), "2100-03-01T00:00:00Z");
        assert_eq!(at(47_540 * 86_400), "2100-02-28T00:00:00Z");
    }

    #[test]
    fn git_commit_is_a_hash_or_unknown() {
        assert!(
            GIT_COMMIT == "unknown"
                || (GIT_COMMIT.len() == 40 && GIT_COMMIT.chars().all(|c| c.is_ascii_hexdigit())),
            "{GIT_COMMIT}"
        );
    }
}
