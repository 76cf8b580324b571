//! M2M (S|S), M2L (S|R) and L2L (R|R) by rotation, coaxial translation and rotation back
//! (seed 001, §3.3, eqs. (16)-(19), (33), (35)): `O(p^3)` each instead of the direct `O(p^4)`.
//!
//! **Coaxial matrices** (`t` along `+z`, `t` = new centre minus old centre; the paper's
//! eqs. (18)-(19) in its basis, converted to the orthonormal scaling of [`crate::basis`] with
//! `F_n^k = sqrt((n-k)! (n+k)!)`, `k = |m|`, the same matrix for `m` and `-m`):
//!
//! | operator | entry `(n, n')` | paper |
//! | --- | --- | --- |
//! | S\|R (M2L) | `(-1)^(n+k) sqrt((2n'+1)/(2n+1)) (n+n')! / (F_n^k F_{n'}^k) / t^(n+n'+1)` | `(-1)^m s_{n+n'}(t)` |
//! | S\|S (M2M), `n' <= n` | `sqrt((2n'+1)/(2n+1)) F_n^k/F_{n'}^k (-t)^(n-n') / (n-n')!` | `r_{n-n'}(t)` |
//! | R\|R (L2L), `n' >= n` | `sqrt((2n'+1)/(2n+1)) F_{n'}^k/F_n^k t^(n'-n) / (n'-n)!` | `r_{n'-n}(t)` |
//!
//! The S|R entry carries the factor `(-1)^m` that the digest found missing from the printed
//! eq. (18) in the real basis (digest §3.3); the tests translate against direct sums.
//!
//! **Scaling** (eq. (35)): the stored coefficients are `a_n / h_s^n` (multipole of a box of edge
//! `h_s`) and `b_n h_t^n` (local), so one unit matrix per operator serves every distance:
//! M2L is `diag((h_t/t)^n) K(1) diag((h_s/t)^n') / t`, M2M `diag((t/h_p)^n) K(1)
//! diag((h_c/t)^n')` and L2L `diag((h_c/t)^n) K(1) diag((t/h_p)^n')`.
//!
//! **Variable truncation** (eq. (24)): an M2L between spheres with separation ratio `eta`
//! below the design value `eta*` is done at order `q = ceil(p ln eta* / ln eta) <= p` in and
//! out, so that its error bound `C eta^q` stays at `C eta*^p`.

use parki_core::isa::Isa;

use crate::basis::{fact_pair, idx, Scalings};
use crate::rotation::{
    angle_table_from, rot_x, rotate_z, rotate_z_lanes, rotation_by_quadrature, Avx512x8, Lanes8, Ops8, Portable8,
    YRotation,
};

/// The three unit coaxial operators, per `k = |m|` a `(p-k) x (p-k)` block over
/// `n, n' = k..p`, stored by columns (entry `(n, n')` at `(n' - k) (p - k) + n - k`), so that
/// the product runs as multiply-adds along contiguous columns.
#[derive(Clone, Debug)]
struct Coaxial {
    columns: Vec<Vec<f64>>,
}

impl Coaxial {
    fn new(p: usize, entry: impl Fn(usize, usize, usize) -> f64) -> Self {
        let columns = (0..p)
            .map(|k| {
                let d = p - k;
                let mut b = vec![0.0; d * d];
                for j in 0..d {
                    for i in 0..d {
                        b[j * d + i] = entry(k, k + i, k + j);
                    }
                }
                b
            })
            .collect();
        Self { columns }
    }
}

/// Which translation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Multipole to multipole, child to parent.
    M2M,
    /// Multipole to local.
    M2L,
    /// Local to local, parent to child.
    L2L,
}

/// Geometry of one translation: the direction's rotations, the distance and the box edges.
#[derive(Clone, Copy, Debug)]
pub struct Geometry<'a> {
    /// The `y` rotation by `-beta` (`beta` the polar angle of `t`).
    pub yrot: &'a YRotation,
    /// `cos` and `sin` of the azimuth `alpha` of `t`.
    pub azimuth: (f64, f64),
    /// `|t|`.
    pub t: f64,
    /// Edge of the box whose expansion is read.
    pub h_in: f64,
    /// Edge of the box whose expansion is written.
    pub h_out: f64,
}

/// Scratch space of one translation, `O(p^2)`, owned by the caller (one per thread).
#[derive(Clone, Debug)]
pub struct Scratch {
    a: Vec<f64>,
    b: Vec<f64>,
    tmp: Vec<f64>,
    cs: Vec<(f64, f64)>,
    pow_in: Vec<f64>,
    pow_out: Vec<f64>,
    col: [Vec<f64>; 4],
}

impl Scratch {
    /// Scratch for order `p`.
    pub fn new(p: usize) -> Self {
        Self {
            a: vec![0.0; p * p],
            b: vec![0.0; p * p],
            tmp: vec![0.0; 2 * p + 2],
            cs: vec![(1.0, 0.0); p + 1],
            pow_in: vec![0.0; p],
            pow_out: vec![0.0; p],
            col: [vec![0.0; p], vec![0.0; p], vec![0.0; p], vec![0.0; p]],
        }
    }
}

/// Everything the translations of order `p` share: scalings, the unit coaxial matrices and
/// `W(P)` for the `y` rotations.
#[derive(Clone, Debug)]
pub struct Operators {
    /// Expansion order.
    pub p: usize,
    /// The basis scalings.
    pub scalings: Scalings,
    sr: Coaxial,
    ss: Coaxial,
    rr: Coaxial,
    wp: Vec<Vec<f64>>,
    isa: Isa,
}

impl Operators {
    /// The operators of order `p` (`1 <= p <=` [`crate::basis::MAX_ORDER`]).
    pub fn new(p: usize) -> Self {
        let scalings = Scalings::new(p);
        let fact = |n: usize| (2..=n).fold(1.0f64, |a, i| a * i as f64);
        let ratio = |n: usize, np: usize| (((2 * np + 1) as f64) / ((2 * n + 1) as f64)).sqrt();
        let sr = Coaxial::new(p, |k, n, np| {
            let sign = if (n + k) % 2 == 1 { -1.0 } else { 1.0 };
            sign * ratio(n, np) * fact(n + np) / (fact_pair(n, k) * fact_pair(np, k))
        });
        let ss = Coaxial::new(p, |k, n, np| {
            if np > n {
                return 0.0;
            }
            let sign = if (n - np) % 2 == 1 { -1.0 } else { 1.0 };
            sign * ratio(n, np) * fact_pair(n, k) / fact_pair(np, k) / fact(n - np)
        });
        let rr = Coaxial::new(p, |k, n, np| {
            if np < n {
                return 0.0;
            }
            ratio(n, np) * fact_pair(np, k) / fact_pair(n, k) / fact(np - n)
        });
        let wp = rotation_by_quadrature(&rot_x(std::f64::consts::FRAC_PI_2), &scalings);
        Self { p, scalings, sr, ss, rr, wp, isa: Isa::detect() }
    }

    /// The operators of order `p`, made once per process and shared (their `W(P)` costs a
    /// quadrature of `O(p^5)`: 0.2 s at `p = 38`, as much as a whole evaluation of 1e5 points at
    /// low order).
    pub fn shared(p: usize) -> std::sync::Arc<Operators> {
        use std::collections::HashMap;
        use std::sync::{Arc, Mutex, OnceLock};
        static CACHE: OnceLock<Mutex<HashMap<usize, Arc<Operators>>>> = OnceLock::new();
        let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
        if let Some(o) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&p) {
            return o.clone();
        }
        let made = Arc::new(Operators::new(p));
        cache.lock().unwrap_or_else(|e| e.into_inner()).entry(p).or_insert(made).clone()
    }

    /// The unit coaxial matrix of `op`: per `k = |m|` (`0..p`) a `(p-k) x (p-k)` block over
    /// `n, n' = k..p` stored by columns (entry `(n, n')` at `(n' - k) (p - k) + n - k`; S|S is
    /// lower and R|R upper triangular, with zeros stored). A device copies these as they are.
    pub fn coaxial(&self, op: Op) -> &[Vec<f64>] {
        match op {
            Op::M2M => &self.ss.columns,
            Op::M2L => &self.sr.columns,
            Op::L2L => &self.rr.columns,
        }
    }

    /// The `y` rotation by `-beta` for a translation of polar angle `beta`.
    pub fn y_rotation(&self, beta: f64) -> YRotation {
        YRotation::new(-beta, &self.wp, self.p)
    }

    /// [`Operators::y_rotation`] of every angle of `betas`, built eight at a time
    /// ([`YRotation::many`]).
    pub fn y_rotations(&self, betas: &[f64]) -> Vec<YRotation> {
        let negated: Vec<f64> = betas.iter().map(|b| -b).collect();
        YRotation::many(&negated, &self.wp, self.p, self.isa)
    }

    /// Adds the translation `op` of the first `q` degrees of `input` (a box's stored
    /// coefficients) to `output`: rotate `t` onto `+z`, coaxial translation, rotate back. Runs
    /// the vector code of the widest instruction set this CPU has.
    pub fn translate(&self, op: Op, g: &Geometry<'_>, q: usize, input: &[f64], output: &mut [f64], s: &mut Scratch) {
        #[cfg(target_arch = "x86_64")]
        {
            if self.isa == Isa::Avx512 {
                // SAFETY: `isa` is `Avx512` only where `Isa::detect` found AVX-512F, AVX-512VL,
                // AVX2 and FMA, the features `translate_avx512` enables.
                return unsafe { translate_avx512(self, op, g, q, input, output, s) };
            }
            if self.isa == Isa::Avx2 {
                // SAFETY: `isa` is `Avx2` only where `Isa::detect` found AVX2 and FMA.
                return unsafe { translate_avx2(self, op, g, q, input, output, s) };
            }
        }
        translate_body(self, op, g, q, input, output, s)
    }
}

/// [`translate_body`] compiled for AVX-512F.
///
/// # Safety
/// The CPU must have AVX-512F, AVX-512VL, AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn translate_avx512(
    ops: &Operators,
    op: Op,
    g: &Geometry<'_>,
    q: usize,
    input: &[f64],
    output: &mut [f64],
    s: &mut Scratch,
) {
    translate_body(ops, op, g, q, input, output, s)
}

/// [`translate_body`] compiled for AVX2 and FMA.
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn translate_avx2(
    ops: &Operators,
    op: Op,
    g: &Geometry<'_>,
    q: usize,
    input: &[f64],
    output: &mut [f64],
    s: &mut Scratch,
) {
    translate_body(ops, op, g, q, input, output, s)
}

/// `y[i] += a x[i]`.
#[inline(always)]
fn axpy(y: &mut [f64], x: &[f64], a: f64) {
    for (yi, &xi) in y.iter_mut().zip(x) {
        *yi = xi.mul_add(a, *yi);
    }
}

/// The translation: rotations, scaled coaxial product by columns, rotations back.
#[inline(always)]
fn translate_body(
    ops: &Operators,
    op: Op,
    g: &Geometry<'_>,
    q: usize,
    input: &[f64],
    output: &mut [f64],
    s: &mut Scratch,
) {
    let q = q.min(ops.p);
    let nq = q * q;
    let a = &mut s.a[..nq];
    a.copy_from_slice(&input[..nq]);
    // W(R_z(-alpha))^T: cos and sin of m (-alpha).
    let (ca, sa) = g.azimuth;
    angle_table_from(ca, -sa, q, &mut s.cs);
    rotate_z(a, q, &s.cs, true);
    g.yrot.apply(a, q, true, &mut s.tmp);
    // Powers of the scaling.
    let (coax, x_in, x_out, pre) = match op {
        Op::M2L => (&ops.sr, g.h_in / g.t, g.h_out / g.t, 1.0 / g.t),
        Op::M2M => (&ops.ss, g.h_in / g.t, g.t / g.h_out, 1.0),
        Op::L2L => (&ops.rr, g.t / g.h_in, g.h_out / g.t, 1.0),
    };
    let (mut u, mut v) = (1.0, pre);
    for n in 0..q {
        s.pow_in[n] = u;
        s.pow_out[n] = v;
        u *= x_in;
        v *= x_out;
    }
    let b = &mut s.b[..nq];
    let [ap, am, bp, bm] = &mut s.col;
    for k in 0..q {
        let d = ops.p - k;
        let m = q - k;
        let cols = &coax.columns[k];
        for j in 0..m {
            let f = s.pow_in[k + j];
            ap[j] = a[idx(k + j, k as isize)] * f;
            am[j] = a[idx(k + j, -(k as isize))] * f;
        }
        bp[..m].fill(0.0);
        bm[..m].fill(0.0);
        for j in 0..m {
            // S|S is lower and R|R upper triangular.
            let (i0, i1) = match op {
                Op::M2M => (j, m),
                Op::L2L => (0, j + 1),
                Op::M2L => (0, m),
            };
            let col = &cols[j * d + i0..j * d + i1];
            axpy(&mut bp[i0..i1], col, ap[j]);
            if k > 0 {
                axpy(&mut bm[i0..i1], col, am[j]);
            }
        }
        for i in 0..m {
            let f = s.pow_out[k + i];
            b[idx(k + i, k as isize)] = bp[i] * f;
            if k > 0 {
                b[idx(k + i, -(k as isize))] = bm[i] * f;
            }
        }
    }
    g.yrot.apply(b, q, false, &mut s.tmp);
    rotate_z(b, q, &s.cs, false);
    for (o, x) in output[..nq].iter_mut().zip(b.iter()) {
        *o += x;
    }
}

/// Scratch space of [`Operators::translate_lanes`], `O(p^2)` lane groups (one per thread).
#[derive(Clone, Debug)]
pub struct LaneScratch8 {
    /// Input expansions (gathered by the caller).
    pub input: Vec<Lanes8>,
    /// Output expansions (scattered by the caller).
    pub output: Vec<Lanes8>,
    a: Vec<Lanes8>,
    tmp: Vec<Lanes8>,
    col: [Vec<Lanes8>; 4],
    cs: Vec<(f64, f64)>,
    pow_in: Vec<f64>,
    pow_out: Vec<f64>,
}

impl LaneScratch8 {
    /// Scratch for order `p`.
    pub fn new(p: usize) -> Self {
        let z = [0.0; 8];
        Self {
            input: vec![z; p * p],
            output: vec![z; p * p],
            a: vec![z; p * p],
            tmp: vec![z; 2 * p + 2],
            col: [vec![z; p], vec![z; p], vec![z; p], vec![z; p]],
            cs: vec![(1.0, 0.0); p + 1],
            pow_in: vec![0.0; p],
            pow_out: vec![0.0; p],
        }
    }
}

impl Operators {
    /// One translation `op` of one geometry applied to eight expansions at once (`s.input`,
    /// first `q` degrees, coefficient-major) into `s.output` (overwritten): the M2L of eight
    /// box pairs with the same offset, levels and order, every operation eight lanes wide.
    pub fn translate_lanes(&self, op: Op, g: &Geometry<'_>, q: usize, s: &mut LaneScratch8) {
        #[cfg(target_arch = "x86_64")]
        {
            if self.isa == Isa::Avx512 {
                if let Some(o) = Avx512x8::new() {
                    // SAFETY: `isa` is `Avx512` only where `Isa::detect` found AVX-512F,
                    // AVX-512VL, AVX2 and FMA, the features `lanes_avx512` enables.
                    return unsafe { lanes_avx512(self, o, op, g, q, s) };
                }
            }
            if self.isa == Isa::Avx2 {
                // SAFETY: `isa` is `Avx2` only where `Isa::detect` found AVX2 and FMA.
                return unsafe { lanes_avx2(self, op, g, q, s) };
            }
        }
        lanes_body(self, Portable8, op, g, q, s)
    }
}

/// [`lanes_body`] compiled for AVX-512F.
///
/// # Safety
/// The CPU must have AVX-512F, AVX-512VL, AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn lanes_avx512(ops: &Operators, o: Avx512x8, op: Op, g: &Geometry<'_>, q: usize, s: &mut LaneScratch8) {
    lanes_body(ops, o, op, g, q, s)
}

/// [`lanes_body`] compiled for AVX2 and FMA.
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn lanes_avx2(ops: &Operators, op: Op, g: &Geometry<'_>, q: usize, s: &mut LaneScratch8) {
    lanes_body(ops, Portable8, op, g, q, s)
}

/// `y[i] += x[i] a` for eight lanes.
#[inline(always)]
fn axpy_lanes<O: Ops8>(o: O, y: &mut [Lanes8], x: &[f64], a: &Lanes8) {
    for (yi, &xi) in y.iter_mut().zip(x) {
        o.fma(xi, a, yi);
    }
}

/// [`translate_body`] with every coefficient eight lanes wide.
#[inline(always)]
fn lanes_body<O: Ops8>(ops: &Operators, o: O, op: Op, g: &Geometry<'_>, q: usize, s: &mut LaneScratch8) {
    let q = q.min(ops.p);
    let nq = q * q;
    let a = &mut s.a[..nq];
    a.copy_from_slice(&s.input[..nq]);
    let (ca, sa) = g.azimuth;
    angle_table_from(ca, -sa, q, &mut s.cs);
    rotate_z_lanes(o, a, q, &s.cs, true);
    g.yrot.apply_lanes(o, a, q, true, &mut s.tmp);
    let (coax, x_in, x_out, pre) = match op {
        Op::M2L => (&ops.sr, g.h_in / g.t, g.h_out / g.t, 1.0 / g.t),
        Op::M2M => (&ops.ss, g.h_in / g.t, g.t / g.h_out, 1.0),
        Op::L2L => (&ops.rr, g.t / g.h_in, g.h_out / g.t, 1.0),
    };
    let (mut u, mut v) = (1.0, pre);
    for n in 0..q {
        s.pow_in[n] = u;
        s.pow_out[n] = v;
        u *= x_in;
        v *= x_out;
    }
    let b = &mut s.output[..nq];
    let [ap, am, bp, bm] = &mut s.col;
    for k in 0..q {
        let d = ops.p - k;
        let m = q - k;
        let cols = &coax.columns[k];
        for j in 0..m {
            let f = s.pow_in[k + j];
            let (xp, xm) = (a[idx(k + j, k as isize)], a[idx(k + j, -(k as isize))]);
            ap[j] = o.lincomb(f, &xp, 0.0, &xp);
            am[j] = o.lincomb(f, &xm, 0.0, &xm);
        }
        bp[..m].fill([0.0; 8]);
        bm[..m].fill([0.0; 8]);
        for j in 0..m {
            let (i0, i1) = match op {
                Op::M2M => (j, m),
                Op::L2L => (0, j + 1),
                Op::M2L => (0, m),
            };
            let col = &cols[j * d + i0..j * d + i1];
            axpy_lanes(o, &mut bp[i0..i1], col, &ap[j]);
            if k > 0 {
                axpy_lanes(o, &mut bm[i0..i1], col, &am[j]);
            }
        }
        for i in 0..m {
            let f = s.pow_out[k + i];
            let (yp, ym) = (bp[i], bm[i]);
            b[idx(k + i, k as isize)] = o.lincomb(f, &yp, 0.0, &yp);
            if k > 0 {
                b[idx(k + i, -(k as isize))] = o.lincomb(f, &ym, 0.0, &ym);
            }
        }
    }
    g.yrot.apply_lanes(o, b, q, false, &mut s.tmp);
    rotate_z_lanes(o, b, q, &s.cs, false);
}
