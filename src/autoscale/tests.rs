//! The HPA decision on hand-made observations: the replica formula with its tolerance, the
//! stabilisation windows, the scale-up policies, the bounds and scale to zero.

use super::*;

/// `queue_depth` against 4 per replica, at most 10 replicas unless `toml_extra` says otherwise.
fn spec(toml_extra: &str) -> AutoscalerSpec {
    let max = if toml_extra.contains("max_replicas") {
        ""
    } else {
        "max_replicas = 10\n"
    };
    toml::from_str(&format!(
        "{max}metric = \"queue_depth\"\ntarget = 4.0\n{toml_extra}"
    ))
    .unwrap()
}

fn secs(s: u64) -> SimTime {
    SimTime::ZERO + SimDuration::from_secs(s)
}

fn obs(current: u32, ready: u32, total: f64) -> Observation {
    Observation {
        current,
        ready,
        starting: current.saturating_sub(ready),
        total,
        held: 0,
        idle_since: None,
    }
}

#[test]
fn defaults_are_the_hpa_s() {
    let s = spec("");
    assert_eq!(s.min_replicas, 1);
    assert_eq!(s.interval(), SimDuration::from_secs(15));
    assert_eq!(s.tolerance, Fraction(0.1));
    assert_eq!(s.scale_up_window, SimDuration::ZERO);
    assert_eq!(s.scale_down_window, SimDuration::from_secs(300));
    assert_eq!((s.scale_up_pods, s.scale_up_percent.0), (4, 100.0));
    assert_eq!(s.scale_to_zero_grace, SimDuration::from_secs(30));
    assert_eq!(s.drain_grace, SimDuration::from_secs(30));
}

#[test]
fn the_replica_formula_is_ceil_of_ratio_times_ready_with_a_tolerance() {
    let h = Hpa::new(spec(""));
    // 3 ready, 4 waiting each on average against a target of 4: ratio 1, no change.
    assert_eq!(h.raw(&obs(3, 3, 12.0)), 3);
    // Ratio 13/12 = 1.083: within 10%, no change.
    assert_eq!(h.raw(&obs(3, 3, 13.0)), 3);
    // Ratio 14/12 = 1.167: ceil(1.167 × 3) = 4.
    assert_eq!(h.raw(&obs(3, 3, 14.0)), 4);
    // Ratio 40/12: ceil(10) = 10.
    assert_eq!(h.raw(&obs(3, 3, 40.0)), 10);
    // Ratio 4/12 = 0.33: ceil(1) = 1.
    assert_eq!(h.raw(&obs(3, 3, 4.0)), 1);
    // Nothing waiting: 0 (the bounds come later).
    assert_eq!(h.raw(&obs(3, 3, 0.0)), 0);
}

#[test]
fn starting_replicas_count_as_idle_on_a_scale_up() {
    let h = Hpa::new(spec(""));
    // 2 ready, 2 starting, 17 waiting: 17/8 > 1.1 asks for more, but over 4 replicas 17/16 = 1.06 is
    // within tolerance: no change.
    assert_eq!(h.raw(&obs(4, 2, 17.0)), 4);
    // 30 waiting: 30/16 = 1.875 still asks for more: ceil(30/4) = 8.
    assert_eq!(h.raw(&obs(4, 2, 30.0)), 8);
}

#[test]
fn with_no_ready_replica_demand_asks_for_at_least_one() {
    let h = Hpa::new(spec("min_replicas = 0"));
    assert_eq!(h.raw(&obs(0, 0, 0.0)), 0);
    let mut o = obs(0, 0, 0.0);
    o.held = 1;
    assert_eq!(h.raw(&o), 1);
    assert_eq!(h.raw(&obs(0, 0, 9.0)), 3);
    // Replicas starting and no demand: keep them.
    assert_eq!(h.raw(&obs(2, 0, 0.0)), 2);
}

#[test]
fn a_scale_up_acts_at_once_and_a_scale_down_waits_out_its_window() {
    let mut h = Hpa::new(spec("scale_down_window = \"60s\""));
    // 15 s: a step in load, 2 ready replicas with 24 waiting: ceil(24/4) = 6 at once (window 0).
    assert_eq!(h.decide(secs(15), &obs(2, 2, 24.0)), 6);
    // 30 s: the load is gone; the recommendation of 6 at 15 s is within the 60-s window: stay at 6.
    assert_eq!(h.decide(secs(30), &obs(6, 6, 0.0)), 6);
    assert_eq!(h.decide(secs(45), &obs(6, 6, 0.0)), 6);
    assert_eq!(h.decide(secs(60), &obs(6, 6, 0.0)), 6);
    // 75 s: the cutoff is 15 s, and a recommendation counts only if strictly after it: down to the
    // largest later one, 0, bounded by min_replicas = 1.
    assert_eq!(h.decide(secs(75), &obs(6, 6, 0.0)), 1);
}

#[test]
fn the_starting_replica_count_holds_for_one_scale_down_window() {
    // As Kubernetes' recordInitialRecommendation: 4 replicas at t = 0 count as a recommendation.
    let mut h = Hpa::new(spec("scale_down_window = \"60s\"")).seeded(4, secs(0));
    // No load from the start: raw 1, but the 4 recorded at 0 s is in the window.
    assert_eq!(h.decide(secs(15), &obs(4, 4, 0.0)), 4);
    assert_eq!(h.decide(secs(45), &obs(4, 4, 0.0)), 4);
    // 60 s: the cutoff is 0 s and the seed is not strictly after it.
    assert_eq!(h.decide(secs(60), &obs(4, 4, 0.0)), 1);
    // Unseeded, the same load shrinks the fleet at the first evaluation.
    let mut h = Hpa::new(spec("scale_down_window = \"60s\""));
    assert_eq!(h.decide(secs(15), &obs(4, 4, 0.0)), 1);
}

#[test]
fn a_scale_down_goes_to_the_largest_recommendation_in_the_window() {
    let mut h = Hpa::new(spec("scale_down_window = \"30s\""));
    assert_eq!(h.decide(secs(15), &obs(8, 8, 32.0)), 8); // ratio 1
    assert_eq!(h.decide(secs(30), &obs(8, 8, 20.0)), 8); // raw 5, but 8 at 15 s is in the window
    assert_eq!(h.decide(secs(45), &obs(8, 8, 8.0)), 5); // raw 2; max over (15, 45] = 5
    assert_eq!(h.decide(secs(60), &obs(5, 5, 8.0)), 2); // raw 2; max over (30, 60] = 2
}

#[test]
fn a_scale_up_window_takes_the_smallest_recommendation() {
    let mut h = Hpa::new(spec("scale_up_window = \"30s\""));
    assert_eq!(h.decide(secs(15), &obs(2, 2, 8.0)), 2);
    // raw 6, but 2 at 15 s is in the window: min(6, 2) = 2 is no scale-up.
    assert_eq!(h.decide(secs(30), &obs(2, 2, 24.0)), 2);
    // raw 6; over (15, 45]: min(6, 6) = 6.
    assert_eq!(h.decide(secs(45), &obs(2, 2, 24.0)), 6);
}

#[test]
fn scale_up_policies_allow_the_larger_of_four_pods_and_doubling_per_period() {
    let mut h = Hpa::new(spec("max_replicas = 100"));
    // From 1: +4 pods beats ×2: at most 5, though 25 are asked for.
    assert_eq!(h.decide(secs(15), &obs(1, 1, 100.0)), 5);
    // 15 s later the period (15 s, strictly after the cutoff) no longer holds that scale-up: from 5,
    // ×2 = 10 beats +4 = 9.
    assert_eq!(h.decide(secs(30), &obs(5, 5, 100.0)), 10);
    // Within one period, the limit is counted from the replicas at its start.
    let mut h = Hpa::new(spec("max_replicas = 100\nscale_up_period = \"60s\""));
    assert_eq!(h.decide(secs(15), &obs(1, 1, 100.0)), 5);
    // The period's start had 1: still at most 5.
    assert_eq!(h.decide(secs(30), &obs(5, 5, 100.0)), 5);
}

#[test]
fn the_bounds_clamp_every_decision() {
    let mut h = Hpa::new(spec(
        "min_replicas = 2\nmax_replicas = 3\nscale_down_window = \"0s\"",
    ));
    assert_eq!(h.decide(secs(15), &obs(2, 2, 100.0)), 3);
    assert_eq!(h.decide(secs(30), &obs(3, 3, 0.0)), 2);
}

#[test]
fn the_last_replica_goes_only_after_the_idle_grace() {
    let mut h = Hpa::new(spec(
        "min_replicas = 0\nscale_down_window = \"0s\"\nscale_to_zero_grace = \"30s\"",
    ));
    let idle = |since: u64| Observation {
        idle_since: Some(secs(since)),
        ..obs(1, 1, 0.0)
    };
    assert_eq!(h.decide(secs(15), &idle(0)), 1); // idle 15 s < 30 s
    assert_eq!(h.decide(secs(30), &idle(0)), 0); // idle 30 s
    assert_eq!(h.decide(secs(45), &obs(1, 1, 0.0)), 1); // not idle
    // A request held at the gateway brings one back at once.
    let held = Observation {
        held: 3,
        ..obs(0, 0, 3.0)
    };
    assert_eq!(h.decide(secs(60), &held), 1);
}

#[test]
fn bad_bounds_and_spans_are_refused_by_field() {
    let bad = |extra: &str| spec(extra).validate().unwrap_err().0;
    assert_eq!(bad("min_replicas = 11"), "min_replicas");
    assert_eq!(bad("interval = \"0s\""), "interval");
    assert_eq!(bad("scale_up_period = \"0s\""), "scale_up_period");
    assert_eq!(bad("tolerance = 1.0"), "tolerance");
    assert_eq!(
        bad("scale_up_pods = 0\nscale_up_percent = 0"),
        "scale_up_pods"
    );
    let kv: AutoscalerSpec =
        toml::from_str("max_replicas = 2\nmetric = \"kv_utilization\"\ntarget = 1.5").unwrap();
    assert_eq!(kv.validate().unwrap_err().0, "target");
    assert!(spec("").validate().is_ok());
}

/// `metric = "slo"` takes no target and a 180-s interval by default; every other metric needs a
/// target and refuses `[autoscaler.planner]`; the planner's targets fall back to `[slo]`, then to
/// Dynamo's 500 ms and 50 ms.
#[test]
fn the_slo_planner_s_settings_are_checked_and_defaulted() {
    let parse = |t: &str| toml::from_str::<AutoscalerSpec>(t).unwrap();
    let slo = parse("max_replicas = 4\nmetric = \"slo\"");
    assert!(slo.validate().is_ok());
    assert_eq!(slo.interval(), SimDuration::from_secs(180));
    let ms = SimDuration::from_millis;
    assert_eq!(slo.planner_targets(), (ms(500), ms(50)));
    let from_slo = slo.clone().with_slo_targets(Some(ms(300)), Some(ms(40)));
    assert_eq!(from_slo.planner_targets(), (ms(300), ms(40)));
    let own = parse("max_replicas = 4\nmetric = \"slo\"\n[planner]\nitl = \"20ms\"")
        .with_slo_targets(Some(ms(300)), Some(ms(40)));
    assert_eq!(own.planner_targets(), (ms(300), ms(20)));
    let (field, msg) = parse("max_replicas = 4\nmetric = \"slo\"\ntarget = 3.0")
        .validate()
        .unwrap_err();
    assert!(field == "target" && msg.contains("remove"), "{msg}");
    let (field, msg) = parse("max_replicas = 4\nmetric = \"rps\"")
        .validate()
        .unwrap_err();
    assert!(field == "target" && msg.contains("rps"), "{msg}");
    let (field, msg) =
        parse("max_replicas = 4\nmetric = \"rps\"\ntarget = 1.0\n[planner]\nttft = \"1s\"")
            .validate()
            .unwrap_err();
    assert!(field == "planner" && msg.contains("slo"), "{msg}");
    let per_model =
        parse("max_replicas = 4\nmetric = \"slo\"\n[models.\"qwen3-8b\"]\ntarget = 2.0");
    assert_eq!(
        per_model.validate_for("qwen3-8b").unwrap_err().0,
        "models.\"qwen3-8b\".target"
    );
    let load = parse("max_replicas = 4\nmetric = \"slo\"\n[planner]\nload_scaling = true");
    assert!(load.validate().is_ok());
    assert_eq!(load.tick(), SimDuration::from_secs(5));
    assert_eq!(slo.tick(), SimDuration::from_secs(180));
    let (field, msg) = parse(
        "max_replicas = 4\nmetric = \"slo\"\ninterval = \"5s\"\n[planner]\nload_scaling = true",
    )
    .validate()
    .unwrap_err();
    assert!(
        field == "planner.load_interval" && msg.contains("shorter"),
        "{msg}"
    );
}

#[test]
fn the_cold_start_adds_its_terms_and_derives_the_weight_load() {
    let restart = crate::faults::RestartSpec::default();
    let s =
        spec("provision = \"30s\"\nimage_pull = \"60s\"\nload_gb_per_s = 4.0\nwarmup = \"20s\"");
    let c = s.cold_start(16e9, &restart);
    assert_eq!(c.weight_load, SimDuration::from_secs(4));
    assert_eq!(c.total(), SimDuration::from_secs(114));
    // Defaults: no provisioning or pull, the restart model's bandwidth and start-up.
    let c = spec("").cold_start(16e9, &restart);
    assert_eq!(
        c.total(),
        restart.restart_time(16e9),
        "the default cold start is a restart's"
    );
    let c = spec("weight_load = \"7s\"").cold_start(16e9, &restart);
    assert_eq!(c.weight_load, SimDuration::from_secs(7));
}

/// The windowed smallest and largest recommendations kept incrementally equal those found by scanning
/// every recommendation ever made, over random sequences and windows (Kubernetes keeps a
/// recommendation while its time is strictly after `now − window`; a zero window keeps only `raw`).
#[test]
fn stabilisation_matches_a_scan_of_the_whole_history() {
    use rand::Rng;
    let mut rng = crate::rng::from_u64(5);
    for case in 0..200 {
        let up_w = [0u64, 1, 7, 30][case % 4];
        let down_w = [0u64, 3, 60, 600][(case / 4) % 4];
        let mut h = Hpa::new(spec(&format!(
            "scale_up_window = \"{up_w}s\"\nscale_down_window = \"{down_w}s\""
        )));
        let mut history: Vec<(SimTime, u32)> = Vec::new();
        let mut now = 0u64;
        for _ in 0..300 {
            now += rng.random_range(0..4);
            let (raw, current) = (rng.random_range(0..12u32), rng.random_range(0..12u32));
            let t = secs(now);
            let within = |at: SimTime, w: u64| now < w || at > secs(now - w);
            let up = history
                .iter()
                .filter(|&&(at, _)| within(at, up_w))
                .fold(raw, |m, &(_, r)| m.min(r));
            let down = history
                .iter()
                .filter(|&&(at, _)| within(at, down_w))
                .fold(raw, |m, &(_, r)| m.max(r));
            assert_eq!(h.stabilise(t, current, raw), current.max(up).min(down));
            history.push((t, raw));
        }
    }
}
