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
        let mine: Vec<_> = plan
            .faults
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
