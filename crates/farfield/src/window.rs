//! The Kaiser–Bessel window, its Fourier transform and its piecewise-polynomial approximation.
//!
//! In grid units (`u = x/h`) the window of support `P` points is (Ewald paper eq. (9))
//!
//! `W(u) = I0(beta sqrt(1 - (u/a)^2)) / I0(beta)` for `|u| < a = P/2`, else 0, with `beta = 2.5 P`,
//!
//! and its Fourier transform, exact for the truncated window, is
//!
//! `W^(kappa) = 2a sinh(sqrt(beta^2 - (kappa a)^2)) / (sqrt(beta^2 - (kappa a)^2) I0(beta))`
//! (`sinh(sqrt(z))/sqrt(z) -> sin(sqrt(-z))/sqrt(-z)` for `kappa a > beta`).
//!
//! A source at grid coordinate `xi` has anchor `i0 - P/2 + 1`, `i0 = floor(xi)`, `delta = xi - i0`,
//! and weights `w_l = W(l - P/2 + 1 - delta)`, `l = 0..P-1`. Each `l` is one bin of the window, a
//! fixed function of `delta in [0, 1)`; [`WindowPoly`] interpolates each bin at Chebyshev points
//! in `z = 2 delta - 1` and evaluates all `P` bins with one Horner loop (no branches, the same
//! polynomials for every source), as in Shamshirgar et al. (2021) and the ParkiPy digest §9.6.

/// Modified Bessel function `I0(x)`, `x >= 0`, by its power series (all terms positive).
pub fn bessel_i0(x: f64) -> f64 {
    let q = 0.25 * x * x;
    let mut term = 1.0;
    let mut sum = 1.0;
    let mut k = 1.0;
    while term > 1e-17 * sum {
        term *= q / (k * k);
        sum += term;
        k += 1.0;
    }
    sum
}

/// `I1(x)/x`, `x >= 0`, by its power series `(1/2) sum_k (x^2/4)^k / (k! (k+1)!)` (all terms
/// positive; `1/2` at `x = 0`).
pub fn bessel_i1_over_x(x: f64) -> f64 {
    let q = 0.25 * x * x;
    let mut term = 0.5;
    let mut sum = 0.5;
    let mut k = 1.0;
    while term > 1e-17 * sum {
        term *= q / (k * (k + 1.0));
        sum += term;
        k += 1.0;
    }
    sum
}

/// The Kaiser–Bessel window of support `P` grid points, `beta = 2.5 P`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KaiserBessel {
    /// Support in grid points (even).
    pub p: usize,
    /// Shape parameter.
    pub beta: f64,
    i0_beta: f64,
}

impl KaiserBessel {
    /// The window used by parki-dist: `beta = 2.5 P`.
    pub fn new(p: usize) -> Self {
        let beta = 2.5 * p as f64;
        Self { p, beta, i0_beta: bessel_i0(beta) }
    }

    /// Half-support `a = P/2` in grid units.
    pub fn half_support(&self) -> f64 {
        0.5 * self.p as f64
    }

    /// `W(u)`, `u` in grid units.
    pub fn eval(&self, u: f64) -> f64 {
        let a = self.half_support();
        let s = 1.0 - (u / a) * (u / a);
        if s <= 0.0 || u.abs() >= a {
            return 0.0;
        }
        bessel_i0(self.beta * s.sqrt()) / self.i0_beta
    }

    /// `W'(u) = -beta^2 u I1(beta s) / (a^2 beta s I0(beta))`, `s = sqrt(1 - (u/a)^2)`, for
    /// `|u| < a`, else 0 (`u` in grid units): what G2P differentiates the far field with.
    pub fn derivative(&self, u: f64) -> f64 {
        let a = self.half_support();
        let s = 1.0 - (u / a) * (u / a);
        if s <= 0.0 || u.abs() >= a {
            return 0.0;
        }
        let x = self.beta * s.sqrt();
        -self.beta * self.beta * u * bessel_i1_over_x(x) / (a * a * self.i0_beta)
    }

    /// `W^(kappa)`, `kappa` in radians per grid spacing.
    pub fn fourier(&self, kappa: f64) -> f64 {
        let a = self.half_support();
        let z = self.beta * self.beta - (kappa * a) * (kappa * a);
        let f = if z > 1e-8 {
            let s = z.sqrt();
            s.sinh() / s
        } else if z < -1e-8 {
            let s = (-z).sqrt();
            s.sin() / s
        } else {
            1.0 + z / 6.0
        };
        2.0 * a * f / self.i0_beta
    }
}

/// Piecewise-polynomial window: `P` bins, each a polynomial of degree `degree` in `z = 2 delta - 1`,
/// and the same for the bins' derivatives in `delta` (G2P's field).
#[derive(Clone, Debug, PartialEq)]
pub struct WindowPoly {
    /// Support in grid points.
    pub p: usize,
    /// Polynomial degree per bin.
    pub degree: usize,
    /// `coeffs[k * p + l]`: coefficient of `z^k` in bin `l`.
    pub coeffs: Vec<f64>,
    /// `derivative[k * p + l]`: coefficient of `z^k` in `d w_l / d delta = -W'(l - P/2 + 1 -
    /// delta)`, interpolated at its own Chebyshev points (not the derivative of `coeffs`, which
    /// would lose a factor of the degree squared).
    pub derivative: Vec<f64>,
}

impl WindowPoly {
    /// Interpolates each bin of `kb`, and its derivative, at `degree + 1` Chebyshev points.
    pub fn fit(kb: &KaiserBessel, degree: usize) -> Self {
        let p = kb.p;
        let at = |l: usize, delta: f64| l as f64 - 0.5 * p as f64 + 1.0 - delta;
        let coeffs = fit_bins(p, degree, |l, delta| kb.eval(at(l, delta)));
        let derivative = fit_bins(p, degree, |l, delta| -kb.derivative(at(l, delta)));
        Self { p, degree, coeffs, derivative }
    }

    /// Largest absolute error of the derivative polynomials against `d w_l / d delta`, sampled
    /// as [`max_error`](Self::max_error).
    pub fn max_derivative_error(&self, kb: &KaiserBessel) -> f64 {
        let mut err: f64 = 0.0;
        for s in 0..64 {
            let delta = (s as f64 + 0.5) / 64.0;
            let z = 2.0 * delta - 1.0;
            for l in 0..self.p {
                let mut v = 0.0;
                for k in (0..=self.degree).rev() {
                    v = v * z + self.derivative[k * self.p + l];
                }
                let exact = -kb.derivative(l as f64 - 0.5 * self.p as f64 + 1.0 - delta);
                err = err.max((v - exact).abs());
            }
        }
        err
    }
}

/// Monomial coefficients in `z = 2 delta - 1` (`out[k * p + l]`) of the degree-`degree`
/// interpolants of `f(l, delta)`, `l < p`, at Chebyshev points of `delta in [0, 1]`.
fn fit_bins(p: usize, degree: usize, f: impl Fn(usize, f64) -> f64) -> Vec<f64> {
    let n = degree + 1;
    let nodes: Vec<f64> = (0..n).map(|j| (std::f64::consts::PI * (j as f64 + 0.5) / n as f64).cos()).collect();
    let mut coeffs = vec![0.0; n * p];
    for l in 0..p {
        let vals: Vec<f64> = nodes.iter().map(|&z| f(l, 0.5 * (z + 1.0))).collect();
        // Chebyshev coefficients, then monomial coefficients
        let cheb: Vec<f64> = (0..n)
            .map(|k| {
                let s: f64 = (0..n)
                    .map(|j| vals[j] * (std::f64::consts::PI * k as f64 * (j as f64 + 0.5) / n as f64).cos())
                    .sum();
                if k == 0 {
                    s / n as f64
                } else {
                    2.0 * s / n as f64
                }
            })
            .collect();
        let mono = chebyshev_to_monomial(&cheb);
        for (k, c) in mono.iter().enumerate() {
            coeffs[k * p + l] = *c;
        }
    }
    coeffs
}

impl WindowPoly {
    /// The lowest degree (up to 20) whose largest error against `kb` is at most `target`
    /// (relative to the window's maximum, 1), and that error.
    pub fn fit_to(kb: &KaiserBessel, target: f64) -> (Self, f64) {
        let mut best = None;
        for degree in 3..=20 {
            let w = Self::fit(kb, degree);
            let e = w.max_error(kb);
            if e <= target {
                return (w, e);
            }
            match &best {
                Some((_, be)) if *be <= e => {}
                _ => best = Some((w, e)),
            }
        }
        best.expect("at least one fit")
    }

    /// As [`fit_to`](Self::fit_to), with the derivative polynomials too within `target` of
    /// `max |W'|` (what G2P's field needs: at the degree of the value's fit the derivative's
    /// error measured 7-15x the value's, relative to their maxima), and the larger of the two
    /// relative errors.
    pub fn fit_with_derivative_to(kb: &KaiserBessel, target: f64) -> (Self, f64) {
        let a = kb.half_support();
        let max_d = (0..=2000).map(|i| kb.derivative(-a + i as f64 * a / 1000.0).abs()).fold(0.0, f64::max);
        let error = |w: &Self| w.max_error(kb).max(w.max_derivative_error(kb) / max_d);
        let mut best: Option<(Self, f64)> = None;
        for degree in 3..=20 {
            let w = Self::fit(kb, degree);
            let e = error(&w);
            if e <= target {
                return (w, e);
            }
            if best.as_ref().is_none_or(|(_, be)| e < *be) {
                best = Some((w, e));
            }
        }
        best.expect("at least one fit")
    }

    /// Largest absolute error against `kb`, sampled at 64 interior points per bin (the window
    /// jumps by `1/I0(beta)` at the edge of its support, which `delta = 0` touches).
    pub fn max_error(&self, kb: &KaiserBessel) -> f64 {
        let mut w = vec![0.0; self.p];
        let mut err: f64 = 0.0;
        for s in 0..64 {
            let delta = (s as f64 + 0.5) / 64.0;
            self.weights(delta, &mut w);
            for (l, wl) in w.iter().enumerate() {
                let exact = kb.eval(l as f64 - 0.5 * self.p as f64 + 1.0 - delta);
                err = err.max((wl - exact).abs());
            }
        }
        err
    }

    /// Weights of all bins at offset `delta in [0, 1)` (f64).
    pub fn weights(&self, delta: f64, out: &mut [f64]) {
        let z = 2.0 * delta - 1.0;
        let p = self.p;
        out[..p].copy_from_slice(&self.coeffs[self.degree * p..(self.degree + 1) * p]);
        for k in (0..self.degree).rev() {
            let c = &self.coeffs[k * p..(k + 1) * p];
            for (o, &ck) in out[..p].iter_mut().zip(c) {
                *o = o.mul_add(z, ck);
            }
        }
    }
}

fn chebyshev_to_monomial(cheb: &[f64]) -> Vec<f64> {
    let n = cheb.len();
    let mut t_prev = vec![0.0; n];
    let mut t_cur = vec![0.0; n];
    t_prev[0] = 1.0; // T0
    if n > 1 {
        t_cur[1] = 1.0; // T1
    }
    let mut mono = vec![0.0; n];
    mono[0] += cheb[0];
    if n > 1 {
        mono[1] += cheb[1];
    }
    for c in cheb.iter().skip(2) {
        let mut t_next = vec![0.0; n];
        for i in 0..n - 1 {
            t_next[i + 1] += 2.0 * t_cur[i];
        }
        for i in 0..n {
            t_next[i] -= t_prev[i];
        }
        for i in 0..n {
            mono[i] += c * t_next[i];
        }
        t_prev = t_cur;
        t_cur = t_next;
    }
    mono
}

#[cfg(test)]
mod tests {
    use super::{bessel_i0, KaiserBessel, WindowPoly};

    #[test]
    fn i0_values() {
        // I0(1) = 1.2660658777520082, I0(10) = 2815.716628466254
        assert!((bessel_i0(1.0) - 1.266_065_877_752_008).abs() < 1e-15);
        assert!((bessel_i0(10.0) / 2_815.716_628_466_254 - 1.0).abs() < 1e-14);
    }

    #[test]
    fn fourier_transform_matches_quadrature() {
        for p in [4usize, 8, 12] {
            let kb = KaiserBessel::new(p);
            let a = kb.half_support();
            for kappa in [0.0, 0.7, 2.0, 3.1, 5.0, 9.0] {
                // u = a sin(t): the integrand becomes smooth; composite Simpson in t
                let n = 2000;
                let h = std::f64::consts::PI / n as f64;
                let mut s = 0.0;
                for i in 0..=n {
                    let t = -0.5 * std::f64::consts::PI + i as f64 * h;
                    let wgt = if i == 0 || i == n {
                        1.0
                    } else if i % 2 == 1 {
                        4.0
                    } else {
                        2.0
                    };
                    let u = a * t.sin();
                    let w = bessel_i0(kb.beta * t.cos()) / bessel_i0(kb.beta);
                    s += wgt * w * (kappa * u).cos() * a * t.cos();
                }
                s *= h / 3.0;
                let exact = kb.fourier(kappa);
                assert!((s - exact).abs() < 1e-13 * kb.fourier(0.0), "P={p} kappa={kappa}: {s} vs {exact}");
            }
        }
    }

    #[test]
    fn derivative_matches_differences_and_its_fit_the_window_fit() {
        for p in [4usize, 8, 12, 16] {
            let kb = KaiserBessel::new(p);
            let a = kb.half_support();
            let h = 1e-5;
            for i in 1..40 {
                let u = -a + 2.0 * a * i as f64 / 40.0;
                let fd = (kb.eval(u + h) - kb.eval(u - h)) / (2.0 * h);
                assert!((kb.derivative(u) - fd).abs() < 1e-8 * kb.beta, "P={p} u={u}");
            }
            // the fit for the field meets the target with the value and with the derivative
            // relative to its largest value (sampled here, independently of the fit's own)
            let max_d = (0..=400).map(|i| kb.derivative(-a + i as f64 * a / 200.0).abs()).fold(0.0, f64::max);
            for target in [1e-5, 1e-9, 1e-13] {
                let (w, e) = WindowPoly::fit_with_derivative_to(&kb, target);
                assert!(e <= target, "P={p} target {target:e}: degree {} error {e:e}", w.degree);
                assert!(w.max_error(&kb) <= target, "P={p} target {target:e}: value");
                assert!(w.max_derivative_error(&kb) <= 1.001 * target * max_d, "P={p} target {target:e}: derivative");
            }
        }
    }

    #[test]
    fn polynomial_reaches_target() {
        for p in [4usize, 8, 12, 16] {
            let kb = KaiserBessel::new(p);
            let (w, e) = WindowPoly::fit_to(&kb, 1e-14);
            assert!(e <= 1e-14, "P={p}: degree {} error {e:e}", w.degree);
        }
    }
}
