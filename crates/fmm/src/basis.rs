//! The real, normalised solid harmonics of the paper (seed 001, §3.1, eqs. (6)-(15)) and the
//! diagonal scalings that relate them to the orthonormal real spherical harmonics.
//!
//! **Regular harmonics.** `R_n^m = alpha_n^m r^n Y_n^m` with the paper's `alpha_n^m` (eq. (11)),
//! so that `R_n^m = (-1)^(n+m) r^n P_n^|m|(cos theta) e^{i m phi} / (n+|m|)!` (Condon-Shortley
//! `P`); the real basis is `R~_n^m = Re R_n^m` for `m >= 0` and `Im R_n^m` for `m < 0`. They are
//! polynomials in `x, y, z`, computed by the recursion of eq. (15) ([`regular`]):
//!
//! - `R~_0^0 = 1`, `R~_1^1 = -x/2`, `R~_1^-1 = y/2`;
//! - `R~_m^m = -(x R~_{m-1}^{m-1} + y R~_{m-1}^{-(m-1)}) / (2m)`,
//!   `R~_m^-m = (y R~_{m-1}^{m-1} - x R~_{m-1}^{-(m-1)}) / (2m)` for `m >= 2`;
//! - `R~_{|m|+1}^m = -z R~_|m|^m`;
//! - `R~_n^m = -((2n-1) z R~_{n-1}^m + r^2 R~_{n-2}^m) / ((n-|m|)(n+|m|))` for `n >= |m|+2`.
//!
//! No trigonometry and no special function is evaluated: P2M and L2P need only these
//! polynomials at the particles (eq. (14): the irregular basis is never evaluated there).
//!
//! **Orthonormal scaling.** With `Y^_n^m` the real orthonormal spherical harmonics without the
//! Condon-Shortley phase (`sqrt 2 K_n^k P^_n^k cos(k phi)` for `m = k > 0`, `K_n^0 P^_n^0` for
//! `m = 0`, `sqrt 2 K_n^k P^_n^k sin(k phi)` for `m = -k < 0`),
//! `R~_n^m = c_n^m r^n Y^_n^m` with
//! `c_n^m = s_m (-1)^n / (e_m sqrt((2n+1)/(4 pi) (n-k)! (n+k)!))`, `k = |m|`, `s_m = -1` for
//! `m < 0` (else 1), `e_m = sqrt 2` for `m != 0` (else 1).
//!
//! The FMM stores its expansions in this scaling (the paper's "diagonal renormalisation"): a
//! multipole expansion `phi(y) = sum a_n^m r^{-n-1} Y^_n^m` and a local expansion
//! `phi(y) = sum b_n^m r^n Y^_n^m`, which are the paper's `C_n^m` and `D_n^m` times diagonal
//! factors. In this scaling one orthogonal matrix rotates both kinds of expansion, and a source
//! `q` at `x` has `a_n^m = q 4 pi/(2n+1) |x|^n Y^_n^m(x^)` (the addition theorem
//! `P_n(cos gamma) = 4 pi/(2n+1) sum_m Y^_n^m Y^_n^m`): [`Scalings::p2m`] times `R~_n^m(x)`.
//! Expansions of a box of edge `h` are stored divided (multipole) or multiplied (local) by
//! `h^n`, so that every stored coefficient is of order one at any level (eq. (35)'s scaling).

/// Largest expansion order `p` (coefficients of degree `n < p`) accepted.
pub const MAX_ORDER: usize = 64;

/// The index of `(n, m)`, `|m| <= n`, in an expansion of `p^2` coefficients: `n^2 + n + m`.
#[inline(always)]
pub const fn idx(n: usize, m: isize) -> usize {
    (n * n + n).wrapping_add_signed(m)
}

/// `R~_n^m(x)` for `n < p` into `out[idx(n, m)]` (`out.len() >= p^2`), by eq. (15).
#[inline]
pub fn regular(x: [f64; 3], p: usize, out: &mut [f64]) {
    let out = &mut out[..p * p];
    out[0] = 1.0;
    if p == 1 {
        return;
    }
    let [x, y, z] = x;
    let r2 = x.mul_add(x, y.mul_add(y, z * z));
    out[idx(1, 1)] = -0.5 * x;
    out[idx(1, -1)] = 0.5 * y;
    for m in 2..p {
        let a = out[idx(m - 1, (m - 1) as isize)];
        let b = out[idx(m - 1, -((m - 1) as isize))];
        let s = 1.0 / (2 * m) as f64;
        out[idx(m, m as isize)] = -(x.mul_add(a, y * b)) * s;
        out[idx(m, -(m as isize))] = y.mul_add(a, -x * b) * s;
    }
    for k in 0..p {
        let signs: &[isize] = if k == 0 { &[0] } else { &[1, -1] };
        for &sg in signs {
            let m = sg * k as isize;
            if k + 1 < p {
                out[idx(k + 1, m)] = -z * out[idx(k, m)];
            }
            for n in k + 2..p {
                let c = 1.0 / ((n - k) * (n + k)) as f64;
                let v = ((2 * n - 1) as f64 * z).mul_add(out[idx(n - 1, m)], r2 * out[idx(n - 2, m)]);
                out[idx(n, m)] = -v * c;
            }
        }
    }
}

/// `sqrt((n-k)! (n+k)!)`, `F_n^k` of the coaxial translations, in f64 (exact to rounding for
/// `n < MAX_ORDER`).
pub fn fact_pair(n: usize, k: usize) -> f64 {
    let mut v = 1.0f64;
    for i in 2..=(n - k) {
        v *= (i as f64).sqrt();
    }
    for i in 2..=(n + k) {
        v *= (i as f64).sqrt();
    }
    v
}

/// The diagonal factors between the paper's basis and the orthonormal scaling, for order `p`.
#[derive(Clone, Debug)]
pub struct Scalings {
    /// Expansion order.
    pub p: usize,
    /// `c_n^m`: `R~_n^m = c_n^m r^n Y^_n^m`.
    pub c: Vec<f64>,
    /// `4 pi / ((2n+1) c_n^m)`: P2M's weight on `R~_n^m` (a source's orthonormal multipole).
    pub p2m: Vec<f64>,
    /// `1 / c_n^m`: L2P's weight on `R~_n^m`.
    pub l2p: Vec<f64>,
}

impl Scalings {
    /// The factors for `n < p`.
    pub fn new(p: usize) -> Self {
        let mut c = vec![0.0; p * p];
        for n in 0..p {
            for m in -(n as isize)..=n as isize {
                let k = m.unsigned_abs();
                let s = if m < 0 { -1.0 } else { 1.0 } * if n % 2 == 1 { -1.0 } else { 1.0 };
                let e = if m != 0 { std::f64::consts::SQRT_2 } else { 1.0 };
                let g = ((2 * n + 1) as f64 / (4.0 * std::f64::consts::PI)).sqrt() * fact_pair(n, k);
                c[idx(n, m)] = s / (e * g);
            }
        }
        let mut p2m = vec![0.0; p * p];
        let mut l2p = vec![0.0; p * p];
        for n in 0..p {
            for m in -(n as isize)..=n as isize {
                let i = idx(n, m);
                p2m[i] = 4.0 * std::f64::consts::PI / ((2 * n + 1) as f64 * c[i]);
                l2p[i] = 1.0 / c[i];
            }
        }
        Self { p, c, p2m, l2p }
    }
}

/// `Y^_n^m(u)` for a unit vector `u` and `n < p` into `out` (`p^2` values): [`regular`] divided
/// by `c_n^m`.
pub fn orthonormal(u: [f64; 3], s: &Scalings, out: &mut [f64]) {
    regular(u, s.p, out);
    for (o, l) in out.iter_mut().zip(&s.l2p) {
        *o *= l;
    }
}

/// Adds to `grad` (`[d/dx, d/dy, d/dz]`) the gradient of `sum_{n<p} D_n^m R~_n^m` at the point
/// where `reg` holds `R~` (digest §3.4, with `X^{m'} = R~_{n-1}^{m'}`, zero for `|m'| > n-1`):
/// `dz R~_n^m = -X^m`; `m = 0`: `dx = X^1`, `dy = -X^-1`; `m >= 1`:
/// `dx = (X^{m+1} - X^{m-1})/2`, `dy = -(X^{-(m+1)} + X^{-(m-1)})/2` (second term dropped at
/// `m = 1`); `m = -k <= -1`: `dx = (X^{-(k+1)} - X^{-(k-1)})/2` (second dropped at `k = 1`),
/// `dy = (X^{k+1} + X^{k-1})/2`.
#[inline]
pub fn add_gradient(d: &[f64], reg: &[f64], p: usize, grad: &mut [f64; 3]) {
    let (mut gx, mut gy, mut gz) = (0.0, 0.0, 0.0);
    for n in 1..p {
        let nm1 = (n - 1) as isize;
        let x = |m: isize| if m.abs() <= nm1 { reg[idx(n - 1, m)] } else { 0.0 };
        let row = &d[idx(n, 0) - n..=idx(n, 0) + n];
        // m = 0
        let d0 = row[n];
        gz -= d0 * x(0);
        gx += d0 * x(1);
        gy -= d0 * x(-1);
        for k in 1..=n as isize {
            let dp = row[n + k as usize];
            let dm = row[n - k as usize];
            gz -= dp * x(k) + dm * x(-k);
            if k == 1 {
                gx += dp * 0.5 * (x(2) - x(0));
                gy -= dp * 0.5 * x(-2);
                gx += dm * 0.5 * x(-2);
                gy += dm * 0.5 * (x(2) + x(0));
            } else {
                gx += dp * 0.5 * (x(k + 1) - x(k - 1));
                gy -= dp * 0.5 * (x(-(k + 1)) + x(-(k - 1)));
                gx += dm * 0.5 * (x(-(k + 1)) - x(-(k - 1)));
                gy += dm * 0.5 * (x(k + 1) + x(k - 1));
            }
        }
    }
    grad[0] += gx;
    grad[1] += gy;
    grad[2] += gz;
}

/// The gradient's coefficients: `grad sum_{n<p} D_n^m R~_n^m = sum_{n<p-1} (Gx, Gy, Gz)_n^m
/// R~_n^m`, from the rules of [`add_gradient`] (the paper's sparse differentiation operator,
/// §3.4), into `g[0..3]` (`(p-1)^2` values each, overwritten).
pub fn gradient_coefficients(d: &[f64], p: usize, g: &mut [Vec<f64>; 3]) {
    let len = (p.max(1) - 1) * (p.max(1) - 1);
    for c in g.iter_mut() {
        c.clear();
        c.resize(len, 0.0);
    }
    for n in 1..p {
        let nm1 = (n - 1) as isize;
        let mut add = |axis: usize, m: isize, v: f64| {
            if m.abs() <= nm1 {
                g[axis][idx(n - 1, m)] += v;
            }
        };
        let row = &d[idx(n, 0) - n..=idx(n, 0) + n];
        let d0 = row[n];
        add(2, 0, -d0);
        add(0, 1, d0);
        add(1, -1, -d0);
        for k in 1..=n as isize {
            let dp = row[n + k as usize];
            let dm = row[n - k as usize];
            add(2, k, -dp);
            add(2, -k, -dm);
            add(0, k + 1, 0.5 * dp);
            add(0, k - 1, -0.5 * dp);
            add(1, -(k + 1), -0.5 * dp);
            add(0, -(k + 1), 0.5 * dm);
            add(1, k + 1, 0.5 * dm);
            add(1, k - 1, 0.5 * dm);
            if k > 1 {
                add(1, -(k - 1), -0.5 * dp);
                add(0, -(k - 1), -0.5 * dm);
            }
        }
    }
}

/// Points per lane group of the vectorised P2M and L2P.
pub const LANES: usize = 8;

/// One value per lane.
pub type Lanes = [f64; LANES];

/// [`regular`] for [`LANES`] points at once (`u[axis][lane]`), into `out[idx(n, m)][lane]`.
#[inline(always)]
pub fn regular_lanes(u: &[Lanes; 3], p: usize, out: &mut [Lanes]) {
    let out = &mut out[..p * p];
    out[0] = [1.0; LANES];
    if p == 1 {
        return;
    }
    let [x, y, z] = u;
    let mut r2 = [0.0; LANES];
    for l in 0..LANES {
        r2[l] = x[l].mul_add(x[l], y[l].mul_add(y[l], z[l] * z[l]));
        out[idx(1, 1)][l] = -0.5 * x[l];
        out[idx(1, -1)][l] = 0.5 * y[l];
    }
    for m in 2..p {
        let a = out[idx(m - 1, (m - 1) as isize)];
        let b = out[idx(m - 1, -((m - 1) as isize))];
        let s = 1.0 / (2 * m) as f64;
        let (ip, im) = (idx(m, m as isize), idx(m, -(m as isize)));
        for l in 0..LANES {
            out[ip][l] = -(x[l].mul_add(a[l], y[l] * b[l])) * s;
            out[im][l] = y[l].mul_add(a[l], -x[l] * b[l]) * s;
        }
    }
    for k in 0..p {
        for sg in [1isize, -1] {
            if k == 0 && sg < 0 {
                continue;
            }
            let m = sg * k as isize;
            if k + 1 < p {
                let src = out[idx(k, m)];
                let dst = &mut out[idx(k + 1, m)];
                for l in 0..LANES {
                    dst[l] = -z[l] * src[l];
                }
            }
            for n in k + 2..p {
                let c = 1.0 / ((n - k) * (n + k)) as f64;
                let f = (2 * n - 1) as f64;
                let (a, b) = (out[idx(n - 1, m)], out[idx(n - 2, m)]);
                let dst = &mut out[idx(n, m)];
                for l in 0..LANES {
                    dst[l] = -((f * z[l]).mul_add(a[l], r2[l] * b[l])) * c;
                }
            }
        }
    }
}
