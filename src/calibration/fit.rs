//! Fitting an [`Efficiency`] to observed step times.
//!
//! The loss is the sum of squared log-ratios `ln(predicted / measured)²` over the fitted points (relative
//! error, so a 5 ms decode step weighs as much as a 2 s prefill), plus a weak pull of each parameter towards
//! its published default: parameters the data cannot pin down (the all-reduce terms of a TP-1 profile, a
//! per-sequence cost where batch never varies) stay near published values instead of drifting to a bound.
//!
//! Each parameter is mapped from an unconstrained real to its physical range (fractions of peak in
//! `[0.02, 1]`, times and token counts on a log scale between bounds), and the loss is minimised by
//! Nelder–Mead with restarts: the model is a sum of maxima, not differentiable everywhere, and has ten
//! parameters, which a simplex search handles in milliseconds. Deterministic: no random starts.

use rand::Rng;

use super::data::{AllReduce, Observation};
use crate::hardware::perf::allreduce_seconds;
use crate::hardware::{Efficiency, GpuId, PerfModel, ProfileKey, StepShape};

/// Starting points of the search (the first is the published defaults).
const STARTS: usize = 16;

/// Weight of the pull towards published defaults, per parameter, in squared unconstrained units. Small
/// against the data: a 3% error on twenty points costs 0.018; moving one parameter by one unit costs 1e-4.
const PRIOR_WEIGHT: f64 = 1e-4;

/// How one parameter maps from the real line to its range.
#[derive(Clone, Copy)]
enum Scale {
    /// `lo + (hi − lo)·σ(x)`.
    Linear { lo: f64, hi: f64 },
    /// `exp(ln lo + (ln hi − ln lo)·σ(x))`.
    Log { lo: f64, hi: f64 },
}

impl Scale {
    fn to_value(self, x: f64) -> f64 {
        let s = 1.0 / (1.0 + (-x).exp());
        match self {
            Scale::Linear { lo, hi } => lo + (hi - lo) * s,
            Scale::Log { lo, hi } => (lo.ln() + (hi.ln() - lo.ln()) * s).exp(),
        }
    }

    fn to_real(self, v: f64) -> f64 {
        let s = match self {
            Scale::Linear { lo, hi } => (v - lo) / (hi - lo),
            Scale::Log { lo, hi } => (v.ln() - lo.ln()) / (hi.ln() - lo.ln()),
        };
        let s = s.clamp(1e-6, 1.0 - 1e-6);
        (s / (1.0 - s)).ln()
    }
}

const FRACTION: Scale = Scale::Linear { lo: 0.02, hi: 1.0 };

/// The fitted parameters: name, range, and where the search starts (and the prior pulls).
struct Param {
    /// An all-reduce parameter: fitted to all-reduce measurements where they exist, and meaningless at TP 1.
    comm: bool,
    scale: Scale,
    get: fn(&Efficiency) -> f64,
    set: fn(&mut Efficiency, f64),
}

const PARAMS: [Param; 10] = [
    Param {
        comm: false,
        scale: FRACTION,
        get: |e| e.compute_max,
        set: |e, v| e.compute_max = v,
    },
    Param {
        comm: false,
        scale: Scale::Log {
            lo: 1.0,
            hi: 4096.0,
        },
        get: |e| e.compute_half_tokens,
        set: |e, v| e.compute_half_tokens = v,
    },
    Param {
        comm: false,
        scale: FRACTION,
        get: |e| e.memory,
        set: |e, v| e.memory = v,
    },
    Param {
        comm: false,
        scale: FRACTION,
        get: |e| e.attention,
        set: |e, v| e.attention = v,
    },
    Param {
        comm: false,
        scale: FRACTION,
        get: |e| e.kv_memory,
        set: |e, v| e.kv_memory = v,
    },
    Param {
        comm: true,
        scale: FRACTION,
        get: |e| e.link,
        set: |e, v| e.link = v,
    },
    Param {
        comm: true,
        scale: Scale::Log { lo: 1e-7, hi: 1e-3 },
        get: |e| e.allreduce_latency_s,
        set: |e, v| e.allreduce_latency_s = v,
    },
    Param {
        comm: false,
        scale: Scale::Log { lo: 1e-6, hi: 0.1 },
        get: |e| e.step_overhead_s,
        set: |e, v| e.step_overhead_s = v,
    },
    Param {
        comm: false,
        scale: Scale::Log { lo: 1e-8, hi: 1e-2 },
        get: |e| e.seq_overhead_s,
        set: |e, v| e.seq_overhead_s = v,
    },
    Param {
        comm: false,
        scale: Scale::Log { lo: 1e-8, hi: 0.1 },
        get: |e| e.prefill_seq_overhead_s,
        set: |e, v| e.prefill_seq_overhead_s = v,
    },
];

/// Where the search starts and the prior pulls: the published defaults, with the costs that default to
/// zero started at a negligible positive value (a log scale has no zero).
fn start() -> Efficiency {
    Efficiency {
        seq_overhead_s: 1e-6,
        prefill_seq_overhead_s: 1e-6,
        ..Efficiency::default()
    }
}

/// Sets the parameters `free` (indices into [`PARAMS`]) of `base` from the unconstrained `x`.
fn decode(base: &Efficiency, free: &[usize], x: &[f64]) -> Efficiency {
    let mut e = *base;
    for (&i, &xi) in free.iter().zip(x) {
        (PARAMS[i].set)(&mut e, PARAMS[i].scale.to_value(xi));
    }
    e
}

fn encode(e: &Efficiency, free: &[usize]) -> Vec<f64> {
    free.iter()
        .map(|&i| PARAMS[i].scale.to_real((PARAMS[i].get)(e)))
        .collect()
}

/// Predicted seconds of a step of `shape` under efficiencies `eff` for configuration `key`.
pub fn predict(key: ProfileKey, eff: Efficiency, shape: &StepShape) -> f64 {
    PerfModel::new(key.gpu, key.model, key.tp, key.precision, eff).step_seconds(shape)
}

/// Fits the efficiencies of configuration `key` to `points` (all of that configuration). `comm` gives the
/// all-reduce terms (link efficiency, latency) where they were fitted to all-reduce measurements of this
/// GPU and TP; otherwise they are fitted here too (at TP 1 they are left at the defaults: there is no
/// all-reduce).
pub fn fit(key: ProfileKey, points: &[&Observation], comm: Option<(f64, f64)>) -> Efficiency {
    let mut base = start();
    if let Some((link, latency)) = comm {
        base.link = link;
        base.allreduce_latency_s = latency;
    }
    let fit_comm = comm.is_none() && key.tp > 1;
    let free: Vec<usize> = (0..PARAMS.len())
        .filter(|&i| !PARAMS[i].comm || fit_comm)
        .collect();
    let x0 = encode(&base, &free);
    let loss = |x: &[f64]| {
        let perf = PerfModel::new(
            key.gpu,
            key.model,
            key.tp,
            key.precision,
            decode(&base, &free, x),
        );
        let data: f64 = points
            .iter()
            .map(|o| (perf.step_seconds(&o.shape) / o.measured_s).ln().powi(2))
            .sum();
        let prior: f64 = x.iter().zip(&x0).map(|(a, b)| (a - b).powi(2)).sum();
        data + PRIOR_WEIGHT * prior
    };
    decode(&base, &free, &minimise(&loss, &x0))
}

/// Fits link efficiency and latency (in that order) of the all-reduces on `gpu` across `tp` GPUs to
/// measured latencies, by log error.
pub fn fit_allreduce(gpu: GpuId, tp: u32, points: &[&AllReduce]) -> (f64, f64) {
    let free: Vec<usize> = (0..PARAMS.len()).filter(|&i| PARAMS[i].comm).collect();
    let base = Efficiency::default();
    let x0 = encode(&base, &free);
    let loss = |x: &[f64]| {
        let e = decode(&base, &free, x);
        points
            .iter()
            .map(|p| {
                (allreduce_seconds(gpu, tp, p.bytes, &e) / p.seconds)
                    .ln()
                    .powi(2)
            })
            .sum()
    };
    let e = decode(&base, &free, &minimise(&loss, &x0));
    (e.link, e.allreduce_latency_s)
}

/// Minimises `loss` from `x0` and from spread-out starts.
///
/// Several starts: `x0`, then points drawn by a fixed-seed generator (so the fit is the same on every run).
/// Each is refined with fresh simplexes from its best point until that no longer improves it; the best of
/// all wins.
fn minimise(loss: &dyn Fn(&[f64]) -> f64, x0: &[f64]) -> Vec<f64> {
    let mut rng = crate::rng::stream(0, "calibration-starts");
    let mut best = (x0.to_vec(), loss(x0));
    for start in 0..STARTS {
        let mut x = if start == 0 {
            x0.to_vec()
        } else {
            (0..x0.len()).map(|_| rng.random_range(-3.0..3.0)).collect()
        };
        let mut value = loss(&x);
        for _ in 0..8 {
            let (nx, nv) = nelder_mead(loss, &x, 1.0, 4000);
            let improved = nv < value - 1e-12;
            if nv < value {
                (x, value) = (nx, nv);
            }
            if !improved {
                break;
            }
        }
        if value < best.1 {
            best = (x, value);
        }
    }
    best.0
}

/// Minimises `f` from `x0` with an initial simplex of edge `step`; returns the best point and its value.
/// Standard coefficients: reflection 1, expansion 2, contraction ½, shrink ½.
pub fn nelder_mead(
    f: &dyn Fn(&[f64]) -> f64,
    x0: &[f64],
    step: f64,
    max_evals: usize,
) -> (Vec<f64>, f64) {
    let n = x0.len();
    let mut simplex: Vec<Vec<f64>> = (0..=n)
        .map(|i| {
            let mut p = x0.to_vec();
            if i > 0 {
                p[i - 1] += step;
            }
            p
        })
        .collect();
    let mut values: Vec<f64> = simplex.iter().map(|p| f(p)).collect();
    let mut evals = n + 1;
    while evals < max_evals {
        // Order best to worst (stable: ties keep their order, so the search is deterministic).
        let mut order: Vec<usize> = (0..=n).collect();
        order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
        simplex = order.iter().map(|&i| simplex[i].clone()).collect();
        values = order.iter().map(|&i| values[i]).collect();
        if (values[n] - values[0]).abs() <= 1e-13 * (1.0 + values[0].abs()) {
            break;
        }
        let centroid: Vec<f64> = (0..n)
            .map(|j| simplex[..n].iter().map(|p| p[j]).sum::<f64>() / n as f64)
            .collect();
        let along = |t: f64| -> Vec<f64> {
            centroid
                .iter()
                .zip(&simplex[n])
                .map(|(c, w)| c + t * (c - w))
                .collect()
        };
        let reflected = along(1.0);
        let fr = f(&reflected);
        evals += 1;
        if fr < values[0] {
            let expanded = along(2.0);
            let fe = f(&expanded);
            evals += 1;
            if fe < fr {
                simplex[n] = expanded;
                values[n] = fe;
            } else {
                simplex[n] = reflected;
                values[n] = fr;
            }
        } else if fr < values[n - 1] {
            simplex[n] = reflected;
            values[n] = fr;
        } else {
            let contracted = along(-0.5);
            let fc = f(&contracted);
            evals += 1;
            if fc < values[n] {
                simplex[n] = contracted;
                values[n] = fc;
            } else {
                for i in 1..=n {
                    simplex[i] = simplex[0]
                        .iter()
                        .zip(&simplex[i])
                        .map(|(b, p)| b + 0.5 * (p - b))
                        .collect();
                    values[i] = f(&simplex[i]);
                }
                evals += n;
            }
        }
    }
    let best = (0..=n)
        .min_by(|&a, &b| values[a].total_cmp(&values[b]))
        .expect("a simplex has points");
    (simplex[best].clone(), values[best])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibration::data::{Role, uniform_batch};
    use crate::hardware::{ModelId, Precision};

    #[test]
    fn nelder_mead_finds_the_minimum_of_a_bowl() {
        let f = |x: &[f64]| (x[0] - 1.0).powi(2) + 10.0 * (x[1] + 2.0).powi(2);
        let (x, v) = nelder_mead(&f, &[0.0, 0.0], 1.0, 2000);
        assert!(
            (x[0] - 1.0).abs() < 1e-5 && (x[1] + 2.0).abs() < 1e-5,
            "{x:?}"
        );
        assert!(v < 1e-9);
    }

    #[test]
    fn scales_round_trip_within_their_ranges() {
        for p in &PARAMS {
            let v = (p.get)(&start());
            let back = p.scale.to_value(p.scale.to_real(v));
            assert!((back / v - 1.0).abs() < 1e-9, "{v} -> {back}");
        }
    }

    #[test]
    fn allreduce_fit_recovers_link_efficiency_and_latency() {
        let truth = Efficiency {
            link: 0.55,
            allreduce_latency_s: 6e-6,
            ..Efficiency::default()
        };
        let points: Vec<AllReduce> = (12..28)
            .map(|k| {
                let bytes = f64::from(1u32 << k);
                AllReduce {
                    gpu: GpuId::A100,
                    tp: 4,
                    bytes,
                    seconds: allreduce_seconds(GpuId::A100, 4, bytes, &truth),
                }
            })
            .collect();
        let refs: Vec<&AllReduce> = points.iter().collect();
        let (link, latency) = fit_allreduce(GpuId::A100, 4, &refs);
        assert!((link / 0.55 - 1.0).abs() < 1e-3, "{link}");
        assert!((latency / 6e-6 - 1.0).abs() < 1e-3, "{latency}");
    }

    /// Step times generated by known efficiencies are fitted back to within a fraction of a percent.
    #[test]
    fn fit_recovers_known_efficiencies() {
        let key = ProfileKey {
            gpu: GpuId::H100,
            model: ModelId::Llama31_70b,
            tp: 4,
            precision: Precision::Bf16,
        };
        let truth = Efficiency {
            compute_max: 0.6,
            compute_half_tokens: 200.0,
            memory: 0.7,
            attention: 0.4,
            kv_memory: 0.6,
            link: 0.5,
            allreduce_latency_s: 12e-6,
            step_overhead_s: 1e-3,
            seq_overhead_s: 1e-5,
            prefill_seq_overhead_s: 2e-3,
        };
        let mut obs = Vec::new();
        for n in [128, 512, 2048, 8192, 16384] {
            obs.push(uniform_batch(1, n, 0));
            obs.push(uniform_batch(4, n / 4, 0));
        }
        for b in [1, 8, 32, 128, 256] {
            for ctx in [512, 4096] {
                obs.push(uniform_batch(b, 1, ctx));
            }
        }
        let obs: Vec<Observation> = obs
            .into_iter()
            .map(|shape| {
                let perf = PerfModel::new(key.gpu, key.model, key.tp, key.precision, truth);
                Observation {
                    key,
                    source: "test",
                    label: String::new(),
                    measured_s: perf.step_seconds(&shape),
                    shape,
                    role: Role::Fit,
                }
            })
            .collect();
        let refs: Vec<&Observation> = obs.iter().collect();
        let got = fit(key, &refs, None);
        let worst = obs
            .iter()
            .map(|o| (predict(key, got, &o.shape) / o.measured_s - 1.0).abs())
            .fold(0.0, f64::max);
        assert!(worst < 0.01, "worst relative error {worst}: {got:?}");
    }
}
