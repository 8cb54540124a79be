use super::*;

fn spec(text: &str) -> FaultSpec {
    toml::from_str(text).unwrap()
}

fn fleet<'a>(domains: &'a [Vec<String>], restart: &'a [SimDuration]) -> Fleet<'a> {
    Fleet {
        domains,
        restart,
        has_store: false,
    }
}

#[test]
fn restart_time_is_start_plus_weights_plus_warmup() {
    // 16 GB of weights at 2 GB/s: 8 s, after a 15 s start and before a 20 s warm-up.
    let r = RestartSpec::default();
    assert_eq!(r.restart_time(16e9), SimDuration::from_secs(43));
}

#[test]
fn gamma_matches_known_values() {
    assert!((gamma(1.0) - 1.0).abs() < 1e-12);
    assert!((gamma(2.0) - 1.0).abs() < 1e-12);
    assert!((gamma(1.5) - std::f64::consts::PI.sqrt() / 2.0).abs() < 1e-12);
    assert!((gamma(5.0) - 24.0).abs() < 1e-9);
}

#[test]
fn a_domain_fault_takes_every_worker_labelled_with_it() {
    let domains = vec![
        vec!["rack-a".to_string()],
        vec!["rack-b".to_string(), "row-1".to_string()],
        vec!["rack-b".to_string()],
    ];
    let restart = vec![SimDuration::from_secs(40); 3];
    let f = fleet(&domains, &restart);
    let s = spec("kind = \"crash\"\ndomain = \"rack-b\"\nat = \"1m\"");
    s.validate(&f).unwrap();
    let plan = FaultPlan::build(&[s], &f, 1, SimTime(3_600_000_000_000)).unwrap();
    assert_eq!(plan.faults[0].targets, Targets::Workers(vec![1, 2]));
    assert_eq!(plan.faults[0].symptom, Symptom::Unreachable);
    assert_eq!(
        plan.faults[0].restart_after,
        Some(SimDuration::from_secs(40))
    );
    assert_eq!(plan.faults[0].label, "crash rack-b");
}

#[test]
fn stochastic_failures_have_the_configured_mean_and_never_overlap() {
    let domains = vec![Vec::new(); 2];
    let restart = vec![SimDuration::from_secs(60); 2];
    let f = fleet(&domains, &restart);
    let s = spec("kind = \"crash\"\nmtbf = \"1h\"\nmttr = \"5m\"");
    s.validate(&f).unwrap();
    let horizon = SimTime(2_000 * 3_600 * 1_000_000_000);
    let plan = FaultPlan::build(std::slice::from_ref(&s), &f, 42, horizon).unwrap();
    for w in 0..2 {
        let all = plan.expand();
        let mine: Vec<_> = all
            .iter()
            .filter(|p| p.targets == Targets::Workers(vec![w]))
            .collect();
        // About 2000 h / (1 h + 5 min) ≈ 1846 failures; Poisson scatter is ±43.
        assert!((1700..2000).contains(&mine.len()), "{}", mine.len());
        let repair: f64 = mine
            .iter()
            .map(|p| p.restart_after.unwrap().as_secs_f64())
            .sum::<f64>()
            / mine.len() as f64;
        assert!((repair / 300.0 - 1.0).abs() < 0.1, "mean repair {repair} s");
        for pair in mine.windows(2) {
            assert!(pair[1].at >= pair[0].at + pair[0].restart_after.unwrap());
        }
    }
    // Same seed, same plan; another seed, another.
    assert_eq!(
        plan,
        FaultPlan::build(std::slice::from_ref(&s), &f, 42, horizon).unwrap()
    );
    assert_ne!(
        plan,
        FaultPlan::build(std::slice::from_ref(&s), &f, 43, horizon).unwrap()
    );
}

#[test]
fn misplaced_and_missing_keys_are_named() {
    let domains = vec![Vec::new(); 2];
    let restart = vec![SimDuration::from_secs(60); 2];
    let f = fleet(&domains, &restart);
    let err = |t: &str| spec(t).validate(&f).unwrap_err();
    assert_eq!(
        err("kind = \"slowdown\"\nworker = 0\nat = \"1s\"").0,
        "factor"
    );
    assert_eq!(
        err("kind = \"crash\"\nworker = 0\nat = \"1s\"\nfactor = 2.0").0,
        "factor"
    );
    assert_eq!(err("kind = \"crash\"\nworker = 2\nat = \"1s\"").0, "worker");
    assert_eq!(err("kind = \"crash\"\nat = \"1s\"").0, "worker");
    assert_eq!(err("kind = \"crash\"\nworker = 0").0, "at");
    assert_eq!(
        err("kind = \"crash\"\nworker = 0\nat = \"1s\"\nrestart_after = \"0s\"").0,
        "restart_after"
    );
    assert_eq!(err("kind = \"store_failure\"\nat = \"1s\"").0, "kind");
    assert_eq!(
        err("kind = \"crash\"\nmtbf = \"1h\"\ndistribution = \"weibull\"").0,
        "shape"
    );
}

#[test]
fn a_group_restarts_when_its_slowest_member_is_back() {
    // One domain, two workers: one restarts in 40 s, the other (a bigger model) in 90 s. The domain
    // comes back as one, after 90 s.
    let domains = vec![vec!["rack".to_string()]; 2];
    let restart = vec![SimDuration::from_secs(40), SimDuration::from_secs(90)];
    let f = fleet(&domains, &restart);
    for target in ["domain = \"rack\"", "workers = [1, 0]"] {
        let s = spec(&format!("kind = \"crash\"\n{target}\nat = \"1m\""));
        let plan = FaultPlan::build(&[s], &f, 1, SimTime(3_600_000_000_000)).unwrap();
        assert_eq!(
            plan.faults[0].restart_after,
            Some(SimDuration::from_secs(90)),
            "{target}"
        );
    }
}

#[test]
fn a_drain_holds_its_worker_for_its_grace_and_its_restart() {
    // A drain at 0 with a 30 s grace and a 10 s restart has worker 0 out until 40 s: a crash at 35 s
    // contradicts it, one at 40 s does not.
    let domains = vec![Vec::new(); 1];
    let restart = vec![SimDuration::from_secs(60)];
    let f = fleet(&domains, &restart);
    let drain =
        spec("kind = \"drain\"\nworker = 0\nat = \"0s\"\ngrace = \"30s\"\nrestart_after = \"10s\"");
    let crash_at = |t: &str| spec(&format!("kind = \"crash\"\nworker = 0\nat = \"{t}\""));
    let horizon = SimTime(3_600_000_000_000);
    let e = FaultPlan::build(&[drain.clone(), crash_at("35s")], &f, 1, horizon).unwrap_err();
    assert_eq!((e.0, e.1), (1, "at"));
    assert!(e.2.contains("faults[0]"), "{}", e.2);
    FaultPlan::build(&[drain, crash_at("40s")], &f, 1, horizon).unwrap();
}

#[test]
fn the_lazy_plan_holds_one_pending_failure_per_worker_whatever_the_horizon() {
    // mtbf = mttr = 1 s on two workers for ten years: eagerly, ~3·10⁸ failures; lazily, two.
    let domains = vec![Vec::new(); 2];
    let restart = vec![SimDuration::from_secs(60); 2];
    let f = fleet(&domains, &restart);
    let s = spec("kind = \"crash\"\nmtbf = \"1s\"\nmttr = \"1s\"");
    s.validate(&f).unwrap();
    let horizon = SimTime(SimDuration::MAX_PARSED.0);
    let plan = FaultPlan::build(std::slice::from_ref(&s), &f, 7, horizon).unwrap();
    assert_eq!((plan.faults.len(), plan.streams.len()), (2, 2));
    // Drawn one at a time, the stream gives what drawing ahead would: the same times in order.
    let mut stream = plan.streams[0].clone();
    let mut last = plan
        .faults
        .iter()
        .find(|p| p.targets == Targets::Workers(vec![0]))
        .unwrap()
        .clone();
    for _ in 0..1000 {
        let next = stream.after(&last).unwrap();
        assert!(next.at >= last.at + last.restart_after.unwrap());
        last = next;
    }
}

#[test]
fn out_of_range_fault_values_are_refused_with_the_range() {
    let domains = vec![Vec::new(); 1];
    let restart = vec![SimDuration::from_secs(60)];
    let f = fleet(&domains, &restart);
    let err = |t: &str| spec(t).validate(&f).unwrap_err();
    let (field, m) = err("kind = \"slowdown\"\nworker = 0\nat = \"1s\"\nfactor = 1e300");
    assert_eq!(field, "factor");
    assert!(m.contains("between 0.01 and 1000"), "{m}");
    let (field, m) =
        err("kind = \"crash\"\nmtbf = \"1h\"\ndistribution = \"weibull\"\nshape = 0.001");
    assert_eq!(field, "shape");
    assert!(m.contains("between 0.1 and 20"), "{m}");
    assert_eq!(
        err("kind = \"crash\"\nmtbf = \"1ns\"\nmttr = \"1ns\"").0,
        "mtbf"
    );
    assert_eq!(
        err("kind = \"crash\"\nmtbf = \"1s\"\nmttr = \"1ns\"").0,
        "mttr"
    );
    // The extremes allowed draw without trouble.
    let s = spec(
        "kind = \"crash\"\nmtbf = \"1s\"\nmttr = \"1ms\"\ndistribution = \"weibull\"\nshape = 0.1",
    );
    s.validate(&f).unwrap();
    let plan =
        FaultPlan::build(std::slice::from_ref(&s), &f, 3, SimTime(3_600_000_000_000)).unwrap();
    assert!(!plan.expand().is_empty());
}

#[test]
fn a_restart_time_needs_a_restart() {
    let domains = vec![Vec::new(); 1];
    let restart = vec![SimDuration::from_secs(60)];
    let f = fleet(&domains, &restart);
    spec("kind = \"crash\"\nworker = 0\nat = \"1s\"\nrestart_after = \"10s\"")
        .validate(&f)
        .unwrap();
    let e =
        spec("kind = \"crash\"\nworker = 0\nat = \"1s\"\nrestart_after = \"10s\"\nrestart = false")
            .validate(&f)
            .unwrap_err();
    assert_eq!(e.0, "restart_after");
    assert!(e.1.contains("restart = false"), "{}", e.1);
}

#[test]
fn weibull_failures_keep_the_configured_mean_whatever_the_shape() {
    // The scale is chosen so that λ·Γ(1 + 1/k) is the mean: for k = 2 and k = 0.5 alike, the times
    // between failures average an hour (about 1,800 of them: ±2% and ±5% scatter).
    let domains = vec![Vec::new(); 1];
    let restart = vec![SimDuration::from_secs(60)];
    let f = fleet(&domains, &restart);
    for k in ["2.0", "0.5"] {
        let s = spec(&format!(
            "kind = \"crash\"\nmtbf = \"1h\"\nmttr = \"5m\"\ndistribution = \"weibull\"\nshape = {k}"
        ));
        s.validate(&f).unwrap();
        let horizon = SimTime(2_000 * 3_600 * 1_000_000_000);
        let all = FaultPlan::build(std::slice::from_ref(&s), &f, 11, horizon)
            .unwrap()
            .expand();
        let mut up = Vec::new();
        let mut since = SimTime::ZERO;
        for p in &all {
            up.push(p.at.since(since).as_secs_f64());
            since = p.at + p.restart_after.unwrap();
        }
        let mean = up.iter().sum::<f64>() / up.len() as f64;
        assert!((mean / 3600.0 - 1.0).abs() < 0.15, "k = {k}: mean {mean} s");
    }
}
