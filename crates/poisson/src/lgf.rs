//! Lattice Green's functions of the second-order Laplacian (LGF2; digest seed-002 §3.2, the
//! paper's B.1 and B.8, with the erratum of §8 on the coefficient 23), in the three reductions
//! the boundary conditions call for.
//!
//! - Three unbounded axes: `G(x) = Theta(m) / h`, `m = x / h`, where `Theta` solves the
//!   7-point lattice equation `sum_neighbours Theta - 6 Theta = delta_{m,0}`:
//!   `Theta(m) = -int_0^inf e^{-6t} I_{m1}(2t) I_{m2}(2t) I_{m3}(2t) dt` (B.1). Tabulated for
//!   `max m_i < 64` by quadrature of that integral, and the asymptotic expansion B.8 (error about
//!   `|m|^-9`, below 1e-16 there) beyond.
//! - Two unbounded axes at `k = 0`: the 5-point lattice function
//!   `Theta2(m) = int_0^inf e^{-4t} [I_0(2t)^2 - I_{m1}(2t) I_{m2}(2t)] dt`, `Theta2(0) = 0`,
//!   `sum_neighbours Theta2 - 4 Theta2 = delta`; `G = Theta2(m) + (ln h - gamma - 3/2 ln 2) / 2 pi`
//!   so that `G -> ln(r) / 2 pi` far away, as CHAT2's.
//! - One unbounded axis, the other two spectral: the screened 1-D lattice function in closed form,
//!   `G(n) = -h e^{-theta |n|} / (2 sinh theta)`, `theta = 2 asinh(sigma h / 2)`, where
//!   `sigma^2 = sum (2 sin(k_i h / 2) / h)^2` is the 7-point Laplacian's symbol along the spectral
//!   axes; `h |n| / 2` at `sigma = 0`.
//!
//! The integrals run over `t` in geometric panels with Gauss-Legendre rules, the scaled Bessel
//! functions `e^{-x} I_n(x)` of all orders at a node coming from one backward (Miller) recurrence,
//! and the tail beyond `T` from the Hankel expansion of the Bessel functions, integrated exactly.

use std::f64::consts::PI;

use parki_core::quadrature::gauss_legendre;

use crate::special::EULER_GAMMA;

/// Nodes per Gauss-Legendre panel.
const PANEL_NODES: usize = 32;
/// Terms of the Hankel expansions in the tail.
const TAIL_TERMS: usize = 12;
/// The largest `max(m_i)` of the 3-D table; B.8 beyond.
pub const TABLE_EXTENT_3D: usize = 63;

/// The scaled modified Bessel functions `e^{-x} I_n(x)`, `n = 0..out.len()`, `x >= 0`, by
/// Miller's backward recurrence `I_{n-1} = I_{n+1} + (2n / x) I_n`, normalised with
/// `e^x = I_0(x) + 2 sum_{n >= 1} I_n(x)`.
pub fn scaled_bessel_i(x: f64, out: &mut [f64]) {
    out.fill(0.0);
    if out.is_empty() {
        return;
    }
    if x == 0.0 {
        out[0] = 1.0;
        return;
    }
    let nmax = out.len() - 1;
    // I_n / I_0 ~ exp(-n^2 / 2x): negligible beyond sqrt(100 x)
    let start = nmax + (100.0 * x).sqrt() as usize + 30;
    let (mut above, mut cur) = (0.0f64, 1e-280f64);
    let mut sum = 0.0;
    for n in (1..=start).rev() {
        if n <= nmax {
            out[n] = cur;
        }
        sum += cur;
        let below = above + (2.0 * n as f64 / x) * cur;
        above = cur;
        cur = below;
        if cur > 1e250 {
            let s = 1e-250;
            cur *= s;
            above *= s;
            sum *= s;
            for v in &mut out[n.min(nmax + 1)..] {
                *v *= s;
            }
        }
    }
    let norm = cur + 2.0 * sum;
    out[0] = cur;
    for v in out.iter_mut() {
        *v /= norm;
    }
}

/// The signed Hankel coefficients `(-1)^k a_k(n)` of `e^{-x} I_n(x) ~ (2 pi x)^{-1/2} sum_k
/// (-1)^k a_k(n) x^{-k}`, `a_k(n) = prod_{j <= k} (4n^2 - (2j-1)^2) / (k! 8^k)`.
fn hankel(n: usize) -> [f64; TAIL_TERMS] {
    let mu = 4.0 * (n * n) as f64;
    let mut c = [0.0; TAIL_TERMS];
    c[0] = 1.0;
    for k in 1..TAIL_TERMS {
        let j = (2 * k - 1) as f64;
        c[k] = -c[k - 1] * (mu - j * j) / (8.0 * k as f64);
    }
    c
}

/// The product of truncated power series.
fn series_product(a: &[f64; TAIL_TERMS], b: &[f64; TAIL_TERMS]) -> [f64; TAIL_TERMS] {
    let mut c = [0.0; TAIL_TERMS];
    for i in 0..TAIL_TERMS {
        for j in 0..TAIL_TERMS - i {
            c[i + j] += a[i] * b[j];
        }
    }
    c
}

/// The tail of a `d`-fold product of Hankel expansions beyond `T`:
/// `int_T^inf (4 pi t)^{-d/2} sum_k c_k (2t)^{-k} dt = sum_k c_k w_k`, with
/// `w_k = 2^{-k} T^{1 - d/2 - k} / ((k + d/2 - 1) (4 pi)^{d/2})`; `w_0 = 0` for `d = 2`, whose
/// leading terms cancel in `Theta2`.
fn tail_weights(d: usize, t_end: f64) -> [f64; TAIL_TERMS] {
    let half = d as f64 / 2.0;
    std::array::from_fn(|k| {
        let p = k as f64 + half - 1.0;
        if p == 0.0 {
            0.0
        } else {
            0.5f64.powi(k as i32) * t_end.powf(-p) / (p * (4.0 * PI).powf(half))
        }
    })
}

/// Quadrature over `t` in `(0, T)` with the Bessel functions of orders `0..=extent` at `x = 2t`.
struct BesselQuadrature {
    /// Weights, one per node.
    weights: Vec<f64>,
    /// `e^{-2t} I_n(2t)`, node-major: `values[j * (extent + 1) + n]`.
    values: Vec<f64>,
    /// Orders per node.
    stride: usize,
    /// The end of the quadrature, the start of the tail.
    t_end: f64,
}

impl BesselQuadrature {
    /// Panels `[0, 1/2]`, `[2^(j-1), 2^j]` up to `T = 2^J >= min_t_end`.
    fn new(extent: usize, min_t_end: f64) -> Self {
        let (gx, gw) = gauss_legendre(PANEL_NODES);
        let mut panels = vec![(0.0, 0.5)];
        let mut b = 1.0;
        while b / 2.0 < min_t_end {
            panels.push((b / 2.0, b));
            b *= 2.0;
        }
        let t_end = panels.last().map(|p| p.1).unwrap_or(0.5);
        let stride = extent + 1;
        let mut weights = Vec::with_capacity(panels.len() * PANEL_NODES);
        let mut values = vec![0.0; panels.len() * PANEL_NODES * stride];
        for &(a, b) in &panels {
            for (x, w) in gx.iter().zip(&gw) {
                let t = 0.5 * (a + b) + 0.5 * (b - a) * x;
                let j = weights.len();
                scaled_bessel_i(2.0 * t, &mut values[j * stride..(j + 1) * stride]);
                weights.push(0.5 * (b - a) * w);
            }
        }
        Self { weights, values, stride, t_end }
    }

    /// `sum_j w_j f(values at node j)`.
    fn sum(&self, f: impl Fn(&[f64]) -> f64) -> f64 {
        self.weights.iter().enumerate().map(|(j, w)| w * f(&self.values[j * self.stride..(j + 1) * self.stride])).sum()
    }
}

/// `-Theta(m)` of the 3-D lattice function, B.8's asymptotic expansion, `m != 0`.
pub fn theta3_asymptotic(m: [f64; 3]) -> f64 {
    let [x, y, z] = m;
    let (x2, y2, z2) = (x * x, y * y, z * z);
    let r2 = x2 + y2 + z2;
    let r = r2.sqrt();
    let p = |a: f64, k: i32| a.powi(k);
    let s4 = p(x2, 2) + p(y2, 2) + p(z2, 2);
    let pairs2 = x2 * y2 + y2 * z2 + z2 * x2;
    let s8 = p(x2, 4) + p(y2, 4) + p(z2, 4);
    let s6_2 = p(x2, 3) * (y2 + z2) + p(y2, 3) * (x2 + z2) + p(z2, 3) * (x2 + y2);
    let s4_4 = p(x2 * y2, 2) + p(y2 * z2, 2) + p(z2 * x2, 2);
    let s12 = p(x2, 6) + p(y2, 6) + p(z2, 6);
    let s10_2 = p(x2, 5) * (y2 + z2) + p(y2, 5) * (x2 + z2) + p(z2, 5) * (x2 + y2);
    let s8_4 = p(x2, 4) * (p(y2, 2) + p(z2, 2)) + p(y2, 4) * (p(x2, 2) + p(z2, 2)) + p(z2, 4) * (p(x2, 2) + p(y2, 2));
    let s6_6 = p(x2 * y2, 3) + p(y2 * z2, 3) + p(z2 * x2, 3);
    let xyz2 = x2 * y2 * z2;
    let s8_2_2 = xyz2 * (p(x2, 3) + p(y2, 3) + p(z2, 3));
    let s6_4_2 = xyz2 * (x2 * y2 * (x2 + y2) + y2 * z2 * (y2 + z2) + z2 * x2 * (z2 + x2));
    let t1 = 1.0 / (4.0 * PI * r);
    let t2 = (s4 - 3.0 * pairs2) / (16.0 * PI * p(r, 7));
    let t3 = (23.0 * s8 - 244.0 * s6_2 - 228.0 * xyz2 * r2 + 621.0 * s4_4) / (128.0 * PI * p(r, 13));
    let t4 =
        (2588.0 * s12 - 65676.0 * s10_2 + 426144.0 * s8_4 - 712884.0 * s6_6 - 62892.0 * s8_2_2 - 297876.0 * s6_4_2
            + 2507340.0 * xyz2 * xyz2)
            / (2048.0 * PI * p(r, 19));
    -(t1 + t2 + t3 + t4)
}

/// The 3-D lattice Green's function `Theta(m)` of the 7-point Laplacian (B.1): tabulated for
/// `max m_i <= 63`, B.8 beyond.
pub struct Lattice3 {
    /// The table's extent per axis (`<= 63`).
    extent: usize,
    /// `Theta` on `[0, extent]^3`.
    table: Vec<f64>,
}

impl Lattice3 {
    /// The table for offsets up to `extent` per axis (clamped to [`TABLE_EXTENT_3D`]).
    pub fn new(extent: usize) -> Self {
        let e = extent.min(TABLE_EXTENT_3D);
        let q = BesselQuadrature::new(e, 25.0 * ((e * e) as f64).max(16.0));
        let weights = tail_weights(3, q.t_end);
        let tail_at = |c: [f64; TAIL_TERMS]| c.iter().zip(&weights).map(|(c, w)| c * w).sum::<f64>();
        let coeffs: Vec<[f64; TAIL_TERMS]> = (0..=e).map(hankel).collect();
        let s = e + 1;
        let mut table = vec![0.0; s * s * s];
        for a in 0..=e {
            for b in 0..=a {
                let ab = series_product(&coeffs[a], &coeffs[b]);
                for c in 0..=b {
                    let v = q.sum(|i| i[a] * i[b] * i[c]) + tail_at(series_product(&ab, &coeffs[c]));
                    for [i, j, k] in [[a, b, c], [a, c, b], [b, a, c], [b, c, a], [c, a, b], [c, b, a]] {
                        table[(i * s + j) * s + k] = -v;
                    }
                }
            }
        }
        Self { extent: e, table }
    }

    /// `Theta(m)`, any integer offsets.
    pub fn theta(&self, m: [i64; 3]) -> f64 {
        let a = m.map(|v| v.unsigned_abs() as usize);
        if a.iter().all(|&v| v <= self.extent) {
            let s = self.extent + 1;
            self.table[(a[0] * s + a[1]) * s + a[2]]
        } else {
            theta3_asymptotic(a.map(|v| v as f64))
        }
    }
}

/// The 2-D lattice Green's function `Theta2(m)` of the 5-point Laplacian, `Theta2(0) = 0`.
pub struct Lattice2 {
    /// The table's extent per axis.
    extent: usize,
    /// `Theta2` on `[0, extent]^2`.
    table: Vec<f64>,
}

impl Lattice2 {
    /// The table for offsets up to `extent` per axis.
    pub fn new(extent: usize) -> Self {
        let e = extent.max(1);
        let q = BesselQuadrature::new(e, 25.0 * (e * e) as f64);
        let coeffs: Vec<[f64; TAIL_TERMS]> = (0..=e).map(hankel).collect();
        let origin = series_product(&coeffs[0], &coeffs[0]);
        let weights = tail_weights(2, q.t_end);
        let s = e + 1;
        let mut table = vec![0.0; s * s];
        for a in 0..=e {
            for b in 0..=a {
                let c = series_product(&coeffs[a], &coeffs[b]);
                // int_T^inf (4 pi t)^{-1} sum_{k >= 1} (c0_k - c_k) (2t)^{-k} dt
                let tail = (1..TAIL_TERMS).map(|k| (origin[k] - c[k]) * weights[k]).sum::<f64>();
                let v = q.sum(|i| i[0] * i[0] - i[a] * i[b]) + tail;
                table[a * s + b] = v;
                table[b * s + a] = v;
            }
        }
        Self { extent: e, table }
    }

    /// `Theta2(m)`, `|m_i| <= extent`.
    pub fn theta(&self, m: [i64; 2]) -> f64 {
        let a = m.map(|v| v.unsigned_abs() as usize);
        assert!(a[0] <= self.extent && a[1] <= self.extent, "offset {m:?} beyond the table");
        self.table[a[0] * (self.extent + 1) + a[1]]
    }

    /// The Green's function at offset `m` on cells of size `h`, scaled as `ln(r) / 2 pi` far away.
    pub fn green(&self, m: [i64; 2], h: f64) -> f64 {
        self.theta(m) + (h.ln() - EULER_GAMMA - 1.5 * 2f64.ln()) / (2.0 * PI)
    }
}

/// The screened 1-D lattice Green's function on cells of size `h`: the solution of
/// `(G_{n+1} - 2 G_n + G_{n-1}) / h^2 - sigma^2 G_n = delta_{n,0} / h`, decaying; `h |n| / 2` at
/// `sigma = 0`.
pub fn screened_1d(n: i64, sigma: f64, h: f64) -> f64 {
    if sigma == 0.0 {
        return 0.5 * h * n.unsigned_abs() as f64;
    }
    let theta = 2.0 * (0.5 * sigma * h).asinh();
    -h * (-theta * n.unsigned_abs() as f64).exp() / (2.0 * theta.sinh())
}

#[cfg(test)]
mod tests {
    use std::f64::consts::PI;

    use super::{scaled_bessel_i, screened_1d, theta3_asymptotic, Lattice2, Lattice3};
    use crate::special::EULER_GAMMA;

    #[test]
    fn scaled_bessel_values() {
        // e^{-x} I_n(x) at x = 1 and 10 (Abramowitz & Stegun table 9.8 / 9.11)
        let mut v = vec![0.0; 4];
        scaled_bessel_i(1.0, &mut v);
        let want = [1.266_065_877_752_008 / 1f64.exp(), 0.565_159_103_992_485 / 1f64.exp()];
        for n in 0..2 {
            assert!((v[n] - want[n]).abs() < 1e-15, "I_{n}(1): {}", v[n]);
        }
        scaled_bessel_i(10.0, &mut v);
        assert!((v[0] - 0.127_833_337_163_428_6).abs() < 1e-16, "{}", v[0]);
        assert!((v[1] - 0.121_262_681_384_455_5).abs() < 1e-16, "{}", v[1]);
        scaled_bessel_i(1.0, &mut v);
        assert!((v[3] - 0.008_155_307_772_814_294).abs() < 1e-17, "{}", v[3]);
        // the Hankel limit at large x
        scaled_bessel_i(1e6, &mut v);
        let x = 1e6f64;
        let want = (1.0 + 1.0 / (8.0 * x) + 9.0 / (128.0 * x * x)) / (2.0 * PI * x).sqrt();
        assert!((v[0] / want - 1.0).abs() < 1e-12);
    }

    #[test]
    fn theta3_reference_values_and_lattice_equation() {
        let l = Lattice3::new(63);
        // Watson's integral, and Theta(1,0,0) = Theta(0) + 1/6
        assert!((l.theta([0, 0, 0]) + 0.252_731_009_858_663_3).abs() < 1e-15, "{}", l.theta([0, 0, 0]));
        assert!((l.theta([1, 0, 0]) + 0.086_064_343_191_996_3).abs() < 1e-15);
        // the 7-point equation, every residual at the level of rounding
        let mut worst: f64 = 0.0;
        for m in [[0i64, 0, 0], [1, 0, 0], [1, 1, 0], [2, 1, 1], [5, 3, 0], [20, 7, 2], [40, 40, 40], [62, 1, 30]] {
            let nb: f64 = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
                .iter()
                .flat_map(|d| {
                    let p = [m[0] + d[0], m[1] + d[1], m[2] + d[2]];
                    let q = [m[0] - d[0], m[1] - d[1], m[2] - d[2]];
                    [l.theta(p), l.theta(q)]
                })
                .sum();
            let res = nb - 6.0 * l.theta(m) - if m == [0, 0, 0] { 1.0 } else { 0.0 };
            worst = worst.max(res.abs());
        }
        assert!(worst < 5e-15, "lattice residual {worst:e}");
        // B.8 against the table: 1.5e-13 at (15,15,15), 1.3e-9 at (12,0,0), about 7 |m|^-9 (4e-16,
        // 3e-13 relative) at the table's edge
        let e = |m: [i64; 3]| (l.theta(m) - theta3_asymptotic(m.map(|v| v as f64))).abs();
        assert!(e([15, 15, 15]) < 3e-13, "{:e}", e([15, 15, 15]));
        assert!(e([12, 0, 0]) > 1e-10 && e([12, 0, 0]) < 3e-9, "{:e}", e([12, 0, 0]));
        for m in [[63, 0, 0], [63, 63, 63], [63, 20, 5], [40, 63, 1]] {
            assert!(e(m) < 1e-15, "{m:?}: {:e}", e(m));
        }
    }

    #[test]
    fn theta2_values_and_asymptote() {
        let l = Lattice2::new(200);
        assert_eq!(l.theta([0, 0]), 0.0);
        assert!((l.theta([1, 0]) - 0.25).abs() < 1e-15, "{}", l.theta([1, 0]));
        assert!((l.theta([1, 1]) - 1.0 / PI).abs() < 1e-15, "{}", l.theta([1, 1]));
        let mut worst: f64 = 0.0;
        for m in [[1i64, 0], [1, 1], [5, 2], [50, 49], [120, 3], [199, 199]] {
            let nb = l.theta([m[0] + 1, m[1]])
                + l.theta([m[0] - 1, m[1]])
                + l.theta([m[0], m[1] + 1])
                + l.theta([m[0], m[1] - 1]);
            worst = worst.max((nb - 4.0 * l.theta(m)).abs());
        }
        assert!(worst < 1e-14, "lattice residual {worst:e}");
        // (ln r + gamma + 3/2 ln 2) / 2 pi - cos(4 theta) / (24 pi r^2) + O(r^-4)
        for m in [[200i64, 0], [150, 150], [180, 70]] {
            let (x, y) = (m[0] as f64, m[1] as f64);
            let r = x.hypot(y);
            let c4 = (4.0 * y.atan2(x)).cos();
            let want = (r.ln() + EULER_GAMMA + 1.5 * 2f64.ln()) / (2.0 * PI) - c4 / (24.0 * PI * r * r);
            assert!((l.theta(m) - want).abs() < 1e-9, "{m:?}: {} vs {want}", l.theta(m));
        }
    }

    #[test]
    fn screened_1d_solves_its_equation() {
        let h = 0.1;
        for sigma in [0.0, 1e-6, 0.5, 30.0] {
            for n in [0i64, 1, 5] {
                let g = |n| screened_1d(n, sigma, h);
                let lhs = (g(n + 1) - 2.0 * g(n) + g(n - 1)) / (h * h) - sigma * sigma * g(n);
                let rhs = if n == 0 { 1.0 / h } else { 0.0 };
                assert!((lhs - rhs).abs() < 1e-6 * (1.0 + sigma), "sigma {sigma} n {n}: {lhs} vs {rhs}");
            }
        }
    }
}
