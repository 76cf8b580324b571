//! Truncated Green's functions (Vico, Greengard & Ferrando 2016) of the free directions, in
//! closed form: the Fourier transforms, over the free directions only, of the harmonic kernel
//! `H` (`H^ = 4 pi / |k|^2`, Laplace `1/r`) and the biharmonic kernel `B` (`B^ = 8 pi / |k|^4`,
//! `B = -r`) of one mode `kappa = |k_p|` of the periodic directions, cut off where the distance
//! along the free directions exceeds `R`.
//!
//! Every kernel of parki-dist is a polynomial in `k` times `H^` or `B^` (Laplace `H^`,
//! Stokeslet `(k^2 I - k k^T) B^`, stresslet `i [k^2 (k (x) I + ...) - 2 k k k] B^`, the Laplace
//! field `-i k H^`), so the truncated forms of `H` and `B` give every kernel's truncated form:
//! inside `|r_free| < R` it equals the kernel (the polynomial differentiates the truncated
//! kernel where it is the kernel), and its transform is smooth (entire) in the free wave
//! numbers, so a grid resolves it (docs/design.md, "Free directions"). With `u = k R`, `v =
//! kappa R`, `k = |k_free|`, `D = k^2 + kappa^2`:
//!
//! | free dims | mode | `H_R` | `B_R` |
//! | --- | --- | --- | --- |
//! | 3 (0P) | - | `4 pi (1 - cos u) / k^2` (kernel `1/r`) | `(4 pi / k^4) [2 + cos u - 3 sin u / u]` (kernel `(r - R)^2 / (2R)`) |
//! | 2 (1P) | `kappa = 0` | `4 pi (1 - J0(u)) / k^2` (kernel `-2 ln(rho/R)`) | `8 pi [(1 - J0) / k^4 - R J1 / (2 k^3)]` (kernel `rho^2 ln(rho/R) - (rho^2 - R^2)/2`) |
//! | 2 (1P) | `kappa > 0` | `4 pi N / D`, `N = 1 + u J1(u) K0(v) - v J0(u) K1(v)` (kernel `2 K0(kappa rho)`) | `4 pi [2 N / D^2 - R^2 J0 K0 / D + R^2 k J1 K1 / (kappa D)]` (kernel `2 rho K1(kappa rho) / kappa`) |
//! | 1 (2P) | `kappa = 0` | `4 pi (1 - cos u) / k^2` (kernel `-2 pi (|z| - R)`) | `4 pi [2 (1 - cos u) - u sin u] / k^4` (kernel `(pi/3)(|z| - R)^2 (2 |z| + R)`) |
//! | 1 (2P) | `kappa > 0` | `(4 pi / kappa) Re[(1 - e^{-s R}) / s]`, `s = kappa - i k` (kernel `2 pi e^{-kappa |z|} / kappa`) | `(4 pi / kappa^3) Re[E0 + kappa E1]`, `E1 = (1 - e^{-sR}(1 + s R)) / s^2` (kernel `2 pi (1 + kappa |z|) e^{-kappa |z|} / kappa^3`) |
//!
//! The biharmonic kernels of the zero modes (`kappa = 0`) are defined up to `a + b |r|^2`, which
//! the stresslet's third-order polynomial annihilates and the Stokeslet's second-order one turns
//! into the constant `-2 (free dims) b` times the net force. They are chosen to vanish with
//! their slope at `R`: the truncation then leaves no layer at `|r| = R` that the polynomials
//! would differentiate into a strong, slowly decaying oscillation of the transform (with the
//! plain `-r` the 0P Stokeslet's transform oscillates with amplitude `4 pi R^2`, which no grid
//! resolves). 1P and 2P need zero net force anyway; in 0P, where a net force is allowed, the
//! kernel is `-r + (r^2 + R^2) / (2R)`, and the constant `-(2/R) F` it adds is removed after
//! G2P ([`free_space_stokeslet_constant`]). The harmonic zero modes of one and two free
//! directions vanish at `R` (a constant, zero for the neutral charges 1P and 2P need); 0P's is
//! the plain `1/r`. Below `u = 1.5` the `kappa = 0` forms are summed as power series (the
//! closed forms cancel there).

use std::f64::consts::PI;

use parki_core::special::{j0, j1, k0, k1};

/// The scalar kernel a component is a polynomial multiple of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scalar {
    /// `H^ = 4 pi / k^2`.
    Harmonic,
    /// `B^ = 8 pi / k^4`.
    Biharmonic,
}

/// The constant the 0P Stokeslet's biharmonic kernel `(r - R)^2 / (2R)` adds to every velocity,
/// per unit of net force: the computed velocity is `u - (2/R) F_net`, so `(2/R) F_net` is added
/// back (see the module documentation).
pub fn free_space_stokeslet_constant(r: f64) -> f64 {
    2.0 / r
}

/// The modified Bessel functions `K0(kappa R)` and `K1(kappa R)` of a mode (one evaluation per
/// mode, reused for every free wave number); zero where they underflow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModeBessel {
    k0: f64,
    k1: f64,
}

impl ModeBessel {
    /// The values at `v = kappa R` (unused for `kappa = 0`).
    pub fn new(v: f64) -> Self {
        if v <= 0.0 || v > 700.0 {
            return Self { k0: 0.0, k1: 0.0 };
        }
        Self { k0: k0(v), k1: k1(v) }
    }
}

/// The truncated kernel `scalar` with `free` (1, 2 or 3) free directions, periodic mode
/// `kappa >= 0` (0 for `free = 3`), free wave number `k >= 0`, truncation radius `r`;
/// `bessel` = [`ModeBessel::new`]`(kappa r)` (used for `free = 2`).
pub fn truncated(scalar: Scalar, free: usize, kappa: f64, k: f64, r: f64, bessel: ModeBessel) -> f64 {
    match (free, kappa > 0.0) {
        (3, _) => free3(scalar, k, r),
        (2, false) => free2_zero(scalar, k, r),
        (2, true) => free2_mode(scalar, kappa, k, r, bessel),
        (1, false) => free1_zero(scalar, k, r),
        (1, true) => free1_mode(scalar, kappa, k, r),
        _ => panic!("1, 2 or 3 free directions"),
    }
}

/// `sum_{n >= 0} c_n u^{2n}` with `c_{n+1} = c_n ratio(n)`: a power series in `u^2`.
fn series(c0: f64, u: f64, ratio: impl Fn(usize) -> f64) -> f64 {
    let u2 = u * u;
    let (mut c, mut sum) = (c0, c0);
    for n in 0..60 {
        c *= ratio(n) * u2;
        sum += c;
        if c.abs() < 1e-18 * sum.abs() {
            break;
        }
    }
    sum
}

fn free3(scalar: Scalar, k: f64, r: f64) -> f64 {
    let u = k * r;
    match scalar {
        // 4 pi int_0^R sin(k s)/k ds = 4 pi R^2 sum (-1)^n u^{2n} / (2n+2)!
        Scalar::Harmonic if u < 1.5 => 4.0 * PI * r * r * series(0.5, u, |n| -1.0 / ((2 * n + 3) * (2 * n + 4)) as f64),
        Scalar::Harmonic => 4.0 * PI * (1.0 - u.cos()) / (k * k),
        // kernel (r - R)^2 / (2R): (4 pi / k^4) [2 + cos u - 3 sin u / u]
        //   = 4 pi R^4 sum_{n>=2} (-1)^n (2n - 2) u^{2n-4} / (2n+1)!
        Scalar::Biharmonic if u < 1.5 => {
            4.0 * PI
                * r.powi(4)
                * series(1.0 / 60.0, u, |m| {
                    let n = (m + 2) as f64;
                    -(2.0 * n) / (2.0 * n - 2.0) / ((2.0 * n + 2.0) * (2.0 * n + 3.0))
                })
        }
        Scalar::Biharmonic => 4.0 * PI * (2.0 + u.cos() - 3.0 * u.sin() / u) / k.powi(4),
    }
}

fn free2_zero(scalar: Scalar, k: f64, r: f64) -> f64 {
    let u = k * r;
    match scalar {
        // 4 (1 - J0(u)) / k^2 = R^2 sum_{n>=0} (-1)^n u^{2n} / (4^n ((n+1)!)^2)
        Scalar::Harmonic if u < 1.5 => PI * r * r * series(1.0, u, |n| -1.0 / (4.0 * ((n + 2) * (n + 2)) as f64)),
        Scalar::Harmonic => 4.0 * PI * (1.0 - j0(u)) / (k * k),
        // kernel rho^2 ln(rho/R) - (rho^2 - R^2)/2: 8 pi [(1 - J0) / k^4 - R J1 / (2 k^3)]
        //   = 8 pi R^4 sum_{m>=2} (-1)^m (m - 1) u^{2m-4} / (4^m (m!)^2)
        Scalar::Biharmonic if u < 1.5 => {
            8.0 * PI
                * r.powi(4)
                * series(1.0 / 64.0, u, |i| {
                    let m = (i + 2) as f64;
                    -(m / (m - 1.0)) / (4.0 * (m + 1.0) * (m + 1.0))
                })
        }
        Scalar::Biharmonic => 8.0 * PI * ((1.0 - j0(u)) / k.powi(4) - r * j1(u) / (2.0 * k * k * k)),
    }
}

fn free2_mode(scalar: Scalar, kappa: f64, k: f64, r: f64, b: ModeBessel) -> f64 {
    let (u, v) = (k * r, kappa * r);
    let (j0u, j1u) = (j0(u), j1(u));
    let d = k * k + kappa * kappa;
    let n = 1.0 + u * j1u * b.k0 - v * j0u * b.k1;
    match scalar {
        Scalar::Harmonic => 4.0 * PI * n / d,
        Scalar::Biharmonic => {
            4.0 * PI * (2.0 * n / (d * d) - r * r * j0u * b.k0 / d + r * r * k * j1u * b.k1 / (kappa * d))
        }
    }
}

fn free1_zero(scalar: Scalar, k: f64, r: f64) -> f64 {
    let u = k * r;
    match scalar {
        Scalar::Harmonic => free3(Scalar::Harmonic, k, r),
        // 4 pi [2 (1 - cos u) - u sin u] / k^4 = 4 pi R^4 sum_{n>=2} (-1)^n u^{2n-4} (2 - 2n) / (2n)!
        Scalar::Biharmonic if u < 1.5 => {
            4.0 * PI
                * r.powi(4)
                * series(1.0 / 12.0, u, |n| {
                    // c_n = (-1)^n (2 - 2m) / (2m)!, m = n + 2
                    let m = n + 2;
                    -((2 * m) as f64) / ((2 * m - 2) as f64) / (((2 * m + 1) * (2 * m + 2)) as f64)
                })
        }
        Scalar::Biharmonic => 4.0 * PI * (2.0 * (1.0 - u.cos()) - u * u.sin()) / k.powi(4),
    }
}

/// `Re` of complex numbers as pairs.
fn cmul(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    (a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0)
}

fn cdiv(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    let d = b.0 * b.0 + b.1 * b.1;
    ((a.0 * b.0 + a.1 * b.1) / d, (a.1 * b.0 - a.0 * b.1) / d)
}

fn free1_mode(scalar: Scalar, kappa: f64, k: f64, r: f64) -> f64 {
    // s = kappa - i k; e^{-s R} = e^{-kappa R} (cos kR + i sin kR)
    let s = (kappa, -k);
    let m = (-kappa * r).exp();
    let e = (m * (k * r).cos(), m * (k * r).sin());
    let one_minus_e = (1.0 - e.0, -e.1);
    let e0 = cdiv(one_minus_e, s);
    match scalar {
        Scalar::Harmonic => 4.0 * PI / kappa * e0.0,
        Scalar::Biharmonic => {
            let sr = (s.0 * r, s.1 * r);
            let t = cmul(e, (1.0 + sr.0, sr.1));
            let e1 = cdiv((1.0 - t.0, -t.1), cmul(s, s));
            4.0 * PI / (kappa * kappa * kappa) * (e0.0 + kappa * e1.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{truncated, ModeBessel, Scalar};
    use parki_core::special::{j0, k0, k1};
    use std::f64::consts::PI;

    /// Gauss-Legendre-free composite Simpson on `[a, b]` with `n` (even) panels.
    fn simpson(f: impl Fn(f64) -> f64, a: f64, b: f64, n: usize) -> f64 {
        let h = (b - a) / n as f64;
        let mut s = f(a) + f(b);
        for i in 1..n {
            s += f(a + i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
        }
        s * h / 3.0
    }

    /// The transform by quadrature of the real-space kernel of the table in the module docs.
    fn quadrature(scalar: Scalar, free: usize, kappa: f64, k: f64, r: f64) -> f64 {
        let n = 20000;
        match (free, kappa > 0.0, scalar) {
            (3, _, Scalar::Harmonic) => simpson(|s| 4.0 * PI * s * sinc(k * s), 0.0, r, n),
            (3, _, Scalar::Biharmonic) => {
                simpson(|s| 4.0 * PI * s * s * (s - r) * (s - r) / (2.0 * r) * sinc(k * s), 0.0, r, n)
            }
            // log kernels: substitute s = t^2
            (2, false, Scalar::Harmonic) => {
                simpson(|t| -2.0 * (t * t / r).ln() * j0(k * t * t) * 2.0 * PI * t * t * 2.0 * t, 1e-150, r.sqrt(), n)
            }
            (2, false, Scalar::Biharmonic) => simpson(
                |t| {
                    let s = t * t;
                    (s * s * (s / r).ln() - (s * s - r * r) / 2.0) * j0(k * s) * 2.0 * PI * s * 2.0 * t
                },
                1e-150,
                r.sqrt(),
                n,
            ),
            (2, true, Scalar::Harmonic) => {
                // log singularity at 0: substitute s = t^2
                simpson(
                    |t| 2.0 * k0(kappa * t * t).min(1e300) * j0(k * t * t) * 2.0 * PI * t * t * 2.0 * t,
                    1e-9,
                    r.sqrt(),
                    n,
                )
            }
            (2, true, Scalar::Biharmonic) => simpson(
                |s| if s == 0.0 { 0.0 } else { 2.0 * s * k1(kappa * s) / kappa * j0(k * s) * 2.0 * PI * s },
                0.0,
                r,
                n,
            ),
            (1, false, Scalar::Harmonic) => simpson(|z| 2.0 * -2.0 * PI * (z - r) * (k * z).cos(), 0.0, r, n),
            (1, false, Scalar::Biharmonic) => {
                simpson(|z| 2.0 * PI / 3.0 * (z - r) * (z - r) * (2.0 * z + r) * (k * z).cos(), 0.0, r, n)
            }
            (1, true, Scalar::Harmonic) => {
                simpson(|z| 2.0 * 2.0 * PI * (-kappa * z).exp() / kappa * (k * z).cos(), 0.0, r, n)
            }
            (1, true, Scalar::Biharmonic) => simpson(
                |z| 2.0 * 2.0 * PI * (1.0 + kappa * z) * (-kappa * z).exp() / kappa.powi(3) * (k * z).cos(),
                0.0,
                r,
                n,
            ),
            _ => unreachable!(),
        }
    }

    fn sinc(x: f64) -> f64 {
        if x == 0.0 {
            1.0
        } else {
            x.sin() / x
        }
    }

    #[test]
    fn closed_forms_match_quadrature() {
        let r = 1.7;
        for free in 1..=3 {
            for &kappa in if free == 3 { &[0.0][..] } else { &[0.0, 0.3, 2.0, 9.0][..] } {
                for &k in &[0.0, 0.2, 0.8, 1.2, 3.0, 11.0, 40.0] {
                    for scalar in [Scalar::Harmonic, Scalar::Biharmonic] {
                        let exact = truncated(scalar, free, kappa, k, r, ModeBessel::new(kappa * r));
                        let q = quadrature(scalar, free, kappa, k, r);
                        let scale = q.abs().max(
                            match scalar {
                                Scalar::Harmonic => r * r,
                                Scalar::Biharmonic => r.powi(4),
                            } * 1e-3,
                        );
                        let err = (exact - q).abs() / scale;
                        let tol = if free == 2 && kappa > 0.0 && scalar == Scalar::Harmonic { 1e-7 } else { 1e-9 };
                        assert!(err < tol, "{scalar:?} free {free} kappa {kappa} k {k}: {exact} vs {q} ({err:e})");
                    }
                }
            }
        }
    }

    #[test]
    fn large_k_tends_to_the_untruncated_harmonic_kernel() {
        // where cos(kR) = 0 the transforms are 4 pi/k^2 (1 and 3 free directions) and within
        // J0(kR) of it (2)
        let r = 1.0;
        for free in 1..=3 {
            let k = 2.0e3 * 2.0 * PI + PI / 2.0;
            let h = truncated(Scalar::Harmonic, free, 0.0, k, r, ModeBessel::new(0.0));
            assert!((h * k * k / (4.0 * PI) - 1.0).abs() < 0.02, "free {free}: {}", h * k * k / (4.0 * PI));
        }
    }
}
