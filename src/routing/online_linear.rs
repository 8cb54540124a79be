//! An online linear regression: recursive least squares with a forgetting factor.
//!
//! After each observation `(x, y)` the weights `θ` minimise `Σ λ^(n−i) (y_i − θ·x_i)²` plus a ridge
//! term that fades with the same factor (the initial covariance `P = δ·I`). Each update costs O(n²)
//! for n features. To keep the covariance from blowing up when a feature stops varying (a known
//! weakness of forgetting), its trace is capped at `n·δ`.
//!
//! Invariants: `P` stays symmetric and its trace at most `n·δ`; a model that has seen no sample
//! predicts 0.

/// A recursive-least-squares linear model over `n` features.
#[derive(Clone, Debug)]
pub struct OnlineLinear {
    theta: Vec<f64>,
    /// Row-major n × n covariance.
    p: Vec<f64>,
    lambda: f64,
    delta: f64,
    samples: u64,
}

impl OnlineLinear {
    /// A model of `n` features forgetting with factor `lambda` (1: never) and initial covariance
    /// `delta · I` (large: weak prior towards zero weights).
    pub fn new(n: usize, lambda: f64, delta: f64) -> Self {
        let mut p = vec![0.0; n * n];
        for i in 0..n {
            p[i * n + i] = delta;
        }
        OnlineLinear {
            theta: vec![0.0; n],
            p,
            lambda,
            delta,
            samples: 0,
        }
    }

    /// Samples seen.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// `θ · x`.
    pub fn predict(&self, x: &[f64]) -> f64 {
        self.theta.iter().zip(x).map(|(t, v)| t * v).sum()
    }

    /// Learns from one observation.
    pub fn update(&mut self, x: &[f64], y: f64) {
        let n = self.theta.len();
        debug_assert_eq!(x.len(), n);
        if !y.is_finite() || x.iter().any(|v| !v.is_finite()) {
            return;
        }
        // k = P x / (λ + xᵀ P x)
        let px: Vec<f64> = (0..n)
            .map(|i| (0..n).map(|j| self.p[i * n + j] * x[j]).sum())
            .collect();
        let denom = self.lambda + x.iter().zip(&px).map(|(a, b)| a * b).sum::<f64>();
        if denom <= 0.0 || !denom.is_finite() {
            return;
        }
        let err = y - self.predict(x);
        for (t, k) in self.theta.iter_mut().zip(&px) {
            *t += k / denom * err;
        }
        // P = (P − k xᵀ P) / λ, with xᵀP = (Px)ᵀ as P is symmetric.
        for i in 0..n {
            for j in 0..n {
                self.p[i * n + j] = (self.p[i * n + j] - px[i] * px[j] / denom) / self.lambda;
            }
        }
        let trace: f64 = (0..n).map(|i| self.p[i * n + i]).sum();
        let cap = n as f64 * self.delta;
        if trace > cap {
            let s = cap / trace;
            self.p.iter_mut().for_each(|v| *v *= s);
        }
        self.samples += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_a_linear_law() {
        // y = 3 + 2·a − 0.5·b, over a spread of inputs.
        let mut m = OnlineLinear::new(3, 1.0, 1e6);
        for i in 0..200 {
            let a = f64::from(i % 17);
            let b = f64::from((i * 7) % 23);
            m.update(&[1.0, a, b], 3.0 + 2.0 * a - 0.5 * b);
        }
        assert_eq!(m.samples(), 200);
        let y = m.predict(&[1.0, 10.0, 4.0]);
        assert!((y - 21.0).abs() < 1e-6, "{y}");
    }

    #[test]
    fn forgetting_follows_a_change() {
        let mut m = OnlineLinear::new(2, 0.95, 1e4);
        for i in 0..300 {
            let a = f64::from(i % 10);
            m.update(&[1.0, a], a);
        }
        for i in 0..300 {
            let a = f64::from(i % 10);
            m.update(&[1.0, a], 5.0 * a);
        }
        let y = m.predict(&[1.0, 4.0]);
        assert!((y - 20.0).abs() < 0.1, "{y}");
    }

    #[test]
    fn an_untrained_model_predicts_zero_and_ignores_bad_samples() {
        let mut m = OnlineLinear::new(2, 0.99, 100.0);
        assert_eq!(m.predict(&[1.0, 3.0]), 0.0);
        m.update(&[1.0, f64::NAN], 1.0);
        m.update(&[1.0, 1.0], f64::INFINITY);
        assert_eq!(m.samples(), 0);
    }
}
