//! P2M, L2P and M2P: expansions formed from particles and evaluated at targets (seed 001, §3.2,
//! eq. (14), §3.4), all through the regular harmonics of [`crate::basis`].
//!
//! A box of edge `h` and centre `c` stores `a_n^m / h^n` (multipole) and `b_n^m h^n` (local):
//!
//! - P2M: `a_n^m / h^n += q 4 pi/(2n+1) |u|^n Y^_n^m(u^)` with `u = (x - c)/h`, that is
//!   `q p2m_n^m R~_n^m(u)`;
//! - L2P: `phi(y) = sum b_n^m h^-n |y - c|^n Y^_n^m = sum l2p_n^m (b_n^m h^n) R~_n^m(u)`,
//!   `u = (y - c)/h`, and `grad phi = (1/h) grad_u` by the sparse differentiation of
//!   [`crate::basis::add_gradient`];
//! - M2P: `phi(y) = (1/r) sum l2p_n^m (a_n^m / h^n) R~_n^m(h (y - c)/r^2)`, `r = |y - c|`
//!   (the Kelvin inversion `R~_n^m(h x/r^2) = c_n^m (h/r)^n Y^_n^m(x^)`).

use parki_core::isa::Isa;

use crate::basis::{add_gradient, gradient_coefficients, regular, regular_lanes, Lanes, Scalings, LANES};

/// Adds the multipole expansion of the charges `q` at `x` to `out` (box centre `c`, edge `h`),
/// with `reg` as scratch (`p^2` values).
pub fn p2m(x: &[[f64; 3]], q: &[f64], c: [f64; 3], h: f64, s: &Scalings, out: &mut [f64], reg: &mut [f64]) {
    let p = s.p;
    let inv = 1.0 / h;
    for (xi, &qi) in x.iter().zip(q) {
        let u = [(xi[0] - c[0]) * inv, (xi[1] - c[1]) * inv, (xi[2] - c[2]) * inv];
        regular(u, p, reg);
        for ((o, &r), &w) in out[..p * p].iter_mut().zip(reg.iter()).zip(&s.p2m) {
            *o = (qi * w).mul_add(r, *o);
        }
    }
}

/// The local expansion `local` (box centre `c`, edge `h`) at `y`: the potential and, if
/// `grad` is given, its gradient added there. `d` and `reg` are scratch (`p^2` values each).
#[allow(clippy::too_many_arguments)]
pub fn l2p(
    local: &[f64],
    y: [f64; 3],
    c: [f64; 3],
    h: f64,
    s: &Scalings,
    grad: Option<&mut [f64; 3]>,
    d: &mut [f64],
    reg: &mut [f64],
) -> f64 {
    let p = s.p;
    let inv = 1.0 / h;
    let u = [(y[0] - c[0]) * inv, (y[1] - c[1]) * inv, (y[2] - c[2]) * inv];
    regular(u, p, reg);
    let mut phi = 0.0;
    for i in 0..p * p {
        d[i] = local[i] * s.l2p[i];
        phi = d[i].mul_add(reg[i], phi);
    }
    if let Some(g) = grad {
        let mut gu = [0.0; 3];
        add_gradient(&d[..p * p], reg, p, &mut gu);
        for a in 0..3 {
            g[a] = gu[a].mul_add(inv, g[a]);
        }
    }
    phi
}

/// The multipole expansion `multipole` (box centre `c`, edge `h`) at `y`, outside the box's
/// sphere; `reg` is scratch (`p^2` values).
pub fn m2p(multipole: &[f64], y: [f64; 3], c: [f64; 3], h: f64, s: &Scalings, reg: &mut [f64]) -> f64 {
    let p = s.p;
    let x = [y[0] - c[0], y[1] - c[1], y[2] - c[2]];
    let r2 = x[0] * x[0] + x[1] * x[1] + x[2] * x[2];
    let f = h / r2;
    regular([x[0] * f, x[1] * f, x[2] * f], p, reg);
    let mut phi = 0.0;
    for i in 0..p * p {
        phi = (multipole[i] * s.l2p[i]).mul_add(reg[i], phi);
    }
    phi / r2.sqrt()
}

/// Scratch space of the vectorised P2M and L2P, `O(p^2)` lane groups (one per thread).
#[derive(Clone, Debug)]
pub struct LaneScratch {
    reg: Vec<Lanes>,
    acc: Vec<Lanes>,
    d: Vec<f64>,
    g: [Vec<f64>; 3],
}

impl LaneScratch {
    /// Scratch for order `p`.
    pub fn new(p: usize) -> Self {
        Self {
            reg: vec![[0.0; LANES]; p * p],
            acc: vec![[0.0; LANES]; p * p],
            d: vec![0.0; p * p],
            g: Default::default(),
        }
    }
}

/// Coordinates of up to [`LANES`] points relative to `c`, scaled by `inv` (missing lanes 0).
#[inline(always)]
fn lane_points(x: &[[f64; 3]], c: [f64; 3], inv: f64) -> [Lanes; 3] {
    let mut u = [[0.0; LANES]; 3];
    for (l, xi) in x.iter().enumerate() {
        for a in 0..3 {
            u[a][l] = (xi[a] - c[a]) * inv;
        }
    }
    u
}

#[inline(always)]
fn p2m_body(x: &[[f64; 3]], q: &[f64], c: [f64; 3], h: f64, s: &Scalings, out: &mut [f64], w: &mut LaneScratch) {
    let p2 = s.p * s.p;
    let inv = 1.0 / h;
    let acc = &mut w.acc[..p2];
    acc.fill([0.0; LANES]);
    for (xs, qs) in x.chunks(LANES).zip(q.chunks(LANES)) {
        let u = lane_points(xs, c, inv);
        let mut ql = [0.0; LANES];
        ql[..qs.len()].copy_from_slice(qs);
        regular_lanes(&u, s.p, &mut w.reg);
        for (a, r) in acc.iter_mut().zip(&w.reg[..p2]) {
            for l in 0..LANES {
                a[l] = ql[l].mul_add(r[l], a[l]);
            }
        }
    }
    for ((o, a), &wt) in out[..p2].iter_mut().zip(acc.iter()).zip(&s.p2m) {
        *o = wt.mul_add(a.iter().sum::<f64>(), *o);
    }
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn l2p_body(
    local: &[f64],
    y: &[[f64; 3]],
    c: [f64; 3],
    h: f64,
    s: &Scalings,
    pot: &mut [f64],
    grad: Option<&mut [[f64; 3]]>,
    w: &mut LaneScratch,
) {
    let p = s.p;
    let p2 = p * p;
    let inv = 1.0 / h;
    for ((d, &l), &c) in w.d[..p2].iter_mut().zip(&local[..p2]).zip(&s.l2p) {
        *d = l * c;
    }
    let with_grad = grad.is_some();
    if with_grad {
        gradient_coefficients(&w.d[..p2], p, &mut w.g);
    }
    let q2 = (p - 1) * (p - 1);
    let mut grad = grad;
    for (chunk, ys) in y.chunks(LANES).enumerate() {
        let u = lane_points(ys, c, inv);
        regular_lanes(&u, p, &mut w.reg);
        let mut phi = [0.0; LANES];
        for (r, &di) in w.reg[..p2].iter().zip(&w.d[..p2]) {
            for l in 0..LANES {
                phi[l] = di.mul_add(r[l], phi[l]);
            }
        }
        let base = chunk * LANES;
        for (l, v) in pot[base..base + ys.len()].iter_mut().enumerate() {
            *v += phi[l];
        }
        if let Some(g) = grad.as_deref_mut() {
            let mut ga = [[0.0; LANES]; 3];
            for (gaa, gc) in ga.iter_mut().zip(&w.g) {
                for (r, &gi) in w.reg[..q2].iter().zip(&gc[..q2]) {
                    for l in 0..LANES {
                        gaa[l] = gi.mul_add(r[l], gaa[l]);
                    }
                }
            }
            for (l, v) in g[base..base + ys.len()].iter_mut().enumerate() {
                for a in 0..3 {
                    v[a] = ga[a][l].mul_add(inv, v[a]);
                }
            }
        }
    }
}

/// [`p2m_body`] for AVX-512F.
///
/// # Safety
/// The CPU must have AVX-512F, AVX-512VL, AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn p2m_avx512(
    x: &[[f64; 3]],
    q: &[f64],
    c: [f64; 3],
    h: f64,
    s: &Scalings,
    out: &mut [f64],
    w: &mut LaneScratch,
) {
    p2m_body(x, q, c, h, s, out, w)
}

/// [`l2p_body`] for AVX-512F.
///
/// # Safety
/// The CPU must have AVX-512F, AVX-512VL, AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn l2p_avx512(
    local: &[f64],
    y: &[[f64; 3]],
    c: [f64; 3],
    h: f64,
    s: &Scalings,
    pot: &mut [f64],
    grad: Option<&mut [[f64; 3]]>,
    w: &mut LaneScratch,
) {
    l2p_body(local, y, c, h, s, pot, grad, w)
}

/// [`p2m`] for a whole box, [`LANES`] sources at a time in vector code (AVX-512 where `isa`
/// says so and the CPU has it): adds the multipole of the charges `q` at `x` to `out`.
#[allow(clippy::too_many_arguments)]
pub fn p2m_box(
    isa: Isa,
    x: &[[f64; 3]],
    q: &[f64],
    c: [f64; 3],
    h: f64,
    s: &Scalings,
    out: &mut [f64],
    w: &mut LaneScratch,
) {
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx512 && isa.available() {
        // SAFETY: `available()` checked AVX-512F, AVX-512VL, AVX2 and FMA.
        return unsafe { p2m_avx512(x, q, c, h, s, out, w) };
    }
    let _ = isa;
    p2m_body(x, q, c, h, s, out, w)
}

/// [`l2p`] for a whole box, [`LANES`] targets at a time in vector code: adds the local
/// expansion's potential at `y` to `pot` and, if given, its gradient to `grad`.
#[allow(clippy::too_many_arguments)]
pub fn l2p_box(
    isa: Isa,
    local: &[f64],
    y: &[[f64; 3]],
    c: [f64; 3],
    h: f64,
    s: &Scalings,
    pot: &mut [f64],
    grad: Option<&mut [[f64; 3]]>,
    w: &mut LaneScratch,
) {
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx512 && isa.available() {
        // SAFETY: `available()` checked AVX-512F, AVX-512VL, AVX2 and FMA.
        return unsafe { l2p_avx512(local, y, c, h, s, pot, grad, w) };
    }
    let _ = isa;
    l2p_body(local, y, c, h, s, pot, grad, w)
}
