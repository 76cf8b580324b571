//! Rotations of expansions in the orthonormal scaling (seed 001, §3.3, eq. (33)).
//!
//! For a rotation `Q` of space, `W_n(Q)` is the `(2n+1) x (2n+1)` orthogonal matrix with
//! `Y^_n(Q^T x) = W_n(Q) Y^_n(x)` (the vector of the degree-`n` real orthonormal harmonics of
//! [`crate::basis`]). The function `f o Q^T` of an expansion with coefficients `a` (degree by
//! degree) has coefficients `W_n(Q)^T a_n`, whether `f` is a multipole or a local expansion:
//! in the orthonormal scaling one matrix serves both (the paper's remark that the S and R
//! rotation operators become identical after a diagonal renormalisation).
//!
//! A translation along `t = |t| (sin b cos a, sin b sin a, cos b)` is done in the frame where
//! `t` is the `+z` axis, `Q = R_y(-b) R_z(-a)`, `W(Q) = W(R_z(-a)) W(R_y(-b))`:
//!
//! - about `z` by `g` ([`rotate_z`]): 2 x 2 blocks mixing `m` and `-m`, `cos(m g)` and
//!   `sin(m g)`, `O(p^2)` (the paper's "diagonal" `A(alpha)` in the complex basis);
//! - about `y` by `b` ([`YRotation`]): `W_n(R_y(b))` commutes with the reflection `y -> -y`,
//!   under which `Y^_n^m` is even for `m >= 0` and odd for `m < 0`, so it splits into an
//!   `(n+1) x (n+1)` and an `n x n` block: `(n+1)^2 + n^2` entries per degree, the paper's
//!   `B(beta)` (1156 numbers at `p = 12`, digest §6), `~2p^3/3` multiply-adds per rotation.
//!
//! `W_n(R_y(b)) = W_n(P) W_n(R_z(b)) W_n(P)^T` with the fixed quarter turn `P = R_x(pi/2)`
//! (`P y = z`, so `R_y(b) = P^T R_z(b) P`), and `W_n(P)` is computed once by a quadrature that
//! is exact for the products of two degree-`n` harmonics ([`rotation_by_quadrature`]): Gauss-
//! Legendre in `cos(theta)` and the trapezoidal rule in `phi`. Nothing here depends on
//! published rotation recursions, and every matrix is orthogonal to rounding.

use parki_core::isa::Isa;

use crate::basis::{idx, orthonormal, Scalings};

/// A rotation matrix of space, row-major.
pub type Mat3 = [[f64; 3]; 3];

/// `R_x(g)`: rotation by `g` about the x axis.
pub fn rot_x(g: f64) -> Mat3 {
    let (s, c) = g.sin_cos();
    [[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]]
}

/// `R_y(g)`: rotation by `g` about the y axis.
pub fn rot_y(g: f64) -> Mat3 {
    let (s, c) = g.sin_cos();
    [[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]]
}

/// `R_z(g)`: rotation by `g` about the z axis.
pub fn rot_z(g: f64) -> Mat3 {
    let (s, c) = g.sin_cos();
    [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]
}

/// `Q^T x`.
fn apply_transpose(q: &Mat3, x: [f64; 3]) -> [f64; 3] {
    let mut y = [0.0; 3];
    for (i, yi) in y.iter_mut().enumerate() {
        *yi = q[0][i] * x[0] + q[1][i] * x[1] + q[2][i] * x[2];
    }
    y
}

/// `(P_k(z), P_{k-1}(z))` for `k >= 1` by the three-term recurrence.
fn legendre_pair(k: usize, z: f64) -> (f64, f64) {
    let (mut p0, mut p1) = (1.0, z);
    for j in 2..=k {
        let p2 = ((2 * j - 1) as f64 * z * p1 - (j - 1) as f64 * p0) / j as f64;
        p0 = p1;
        p1 = p2;
    }
    (p1, p0)
}

/// Gauss-Legendre nodes and weights on `[-1, 1]` (Newton on `P_k`), exact to degree `2k - 1`.
pub fn gauss_legendre(k: usize) -> (Vec<f64>, Vec<f64>) {
    let mut x = vec![0.0; k];
    let mut w = vec![0.0; k];
    for i in 0..k {
        let mut z = (std::f64::consts::PI * (i as f64 + 0.75) / (k as f64 + 0.5)).cos();
        for _ in 0..100 {
            let (pk, pkm1) = legendre_pair(k, z);
            let dz = pk / (k as f64 * (z * pk - pkm1) / (z * z - 1.0));
            z -= dz;
            if dz.abs() < 1e-16 {
                break;
            }
        }
        let (pk, pkm1) = legendre_pair(k, z);
        let d = k as f64 * (z * pk - pkm1) / (z * z - 1.0);
        w[i] = 2.0 / ((1.0 - z * z) * d * d);
        x[i] = z;
    }
    (x, w)
}

/// `W_n(Q)` for `n < p`, dense and row-major (`(2n+1)^2` entries, rows and columns
/// `m = -n..=n`), by `W_n(Q)_{m m'} = int Y^_n^m(Q^T x) Y^_n^{m'}(x) dS` with a quadrature
/// exact for the integrand (`p` Gauss-Legendre nodes in `cos theta`, `2p` in `phi`).
pub fn rotation_by_quadrature(q: &Mat3, s: &Scalings) -> Vec<Vec<f64>> {
    let p = s.p;
    let (zs, ws) = gauss_legendre(p.max(1));
    let nphi = 2 * p.max(1);
    let mut w: Vec<Vec<f64>> = (0..p).map(|n| vec![0.0; (2 * n + 1) * (2 * n + 1)]).collect();
    let mut y0 = vec![0.0; p * p];
    let mut y1 = vec![0.0; p * p];
    for (&z, &wz) in zs.iter().zip(&ws) {
        let rho = (1.0 - z * z).max(0.0).sqrt();
        for j in 0..nphi {
            let phi = 2.0 * std::f64::consts::PI * j as f64 / nphi as f64;
            let u = [rho * phi.cos(), rho * phi.sin(), z];
            let weight = wz * 2.0 * std::f64::consts::PI / nphi as f64;
            orthonormal(u, s, &mut y0);
            orthonormal(apply_transpose(q, u), s, &mut y1);
            for (n, wn) in w.iter_mut().enumerate() {
                let d = 2 * n + 1;
                let base = n * n;
                for a in 0..d {
                    let va = y1[base + a] * weight;
                    for b in 0..d {
                        wn[a * d + b] += va * y0[base + b];
                    }
                }
            }
        }
    }
    w
}

/// `cos(m g)` and `sin(m g)` for `m < p`, by the angle-addition recurrence.
pub fn angle_table(g: f64, p: usize, out: &mut [(f64, f64)]) {
    let (s1, c1) = g.sin_cos();
    angle_table_from(c1, s1, p, out);
}

/// `cos(m g)` and `sin(m g)` for `m < p` from `cos g` and `sin g`.
#[inline]
pub fn angle_table_from(c1: f64, s1: f64, p: usize, out: &mut [(f64, f64)]) {
    let (mut c, mut s) = (1.0, 0.0);
    for o in out.iter_mut().take(p) {
        *o = (c, s);
        let cn = c * c1 - s * s1;
        s = s * c1 + c * s1;
        c = cn;
    }
}

/// Applies `W(R_z(g))^T` (`transpose`) or `W(R_z(g))` to the first `q` degrees of `v`, with
/// `cs[m] = (cos m g, sin m g)`:
/// `(W^T v)_m = cos(mg) v_m - sin(mg) v_-m`, `(W^T v)_-m = sin(mg) v_m + cos(mg) v_-m`, and the
/// transposed signs for `W v`.
#[inline(always)]
pub fn rotate_z(v: &mut [f64], q: usize, cs: &[(f64, f64)], transpose: bool) {
    let sign = if transpose { -1.0 } else { 1.0 };
    for n in 1..q {
        let c0 = idx(n, 0);
        for (k, &(c, s)) in cs.iter().enumerate().take(n + 1).skip(1) {
            let s = sign * s;
            let (vp, vm) = (v[c0 + k], v[c0 - k]);
            v[c0 + k] = c.mul_add(vp, s * vm);
            v[c0 - k] = c.mul_add(vm, -s * vp);
        }
    }
}

/// `W_n(R_y(b))` for `n < p` in its two parity blocks: per degree the `(n+1) x (n+1)` block of
/// `m = 0..=n` and the `n x n` block of `m = -1..=-n` (rows and columns by `|m|`), each stored
/// by rows and by columns so that both `W v` and `W^T v` run as multiply-adds along
/// contiguous memory.
#[derive(Clone, Debug)]
pub struct YRotation {
    p: usize,
    /// Per degree: the even block by rows, by columns, then the odd block by rows, by columns.
    data: Vec<f64>,
    /// Offset of degree `n`'s data.
    offsets: Vec<usize>,
}

impl YRotation {
    /// The blocks of `W(R_y(b))` from `W(P)` (dense, from [`rotation_by_quadrature`] with
    /// `P = R_x(pi/2)`): `W(R_y(b)) = W(P) W(R_z(b)) W(P)^T`.
    pub fn new(b: f64, wp: &[Vec<f64>], p: usize) -> Self {
        Self::many(&[b], wp, p, Isa::Scalar).pop().expect("one angle, one rotation")
    }

    /// [`YRotation::new`] of every angle of `bs`, eight at a time: each product runs across
    /// the eight angles (the same sums, in the same order, as one at a time), so an adaptive
    /// tree's hundreds of angles cost a fraction of their one-at-a-time construction
    /// (`O(p^4)` each). `isa` chooses the vector code (the values are the same for every
    /// `isa`: no fused multiply-adds).
    pub fn many(bs: &[f64], wp: &[Vec<f64>], p: usize, isa: Isa) -> Vec<Self> {
        #[cfg(target_arch = "x86_64")]
        {
            if isa == Isa::Avx512 {
                // SAFETY: `isa` is `Avx512` only where `Isa::detect` found AVX-512F,
                // AVX-512VL, AVX2 and FMA, the features `many_avx512` enables.
                return unsafe { many_avx512(bs, wp, p) };
            }
            if isa == Isa::Avx2 {
                // SAFETY: `isa` is `Avx2` only where `Isa::detect` found AVX2 and FMA.
                return unsafe { many_avx2(bs, wp, p) };
            }
        }
        many_body(bs, wp, p)
    }

    /// Expansion order the blocks were made for.
    pub fn order(&self) -> usize {
        self.p
    }

    /// The blocks as stored: per degree `n` (from [`YRotation::offsets`]`[n]`), the even block
    /// (`(n+1)^2`) by rows then by columns, then the odd block (`n^2`) by rows then by columns;
    /// row (or column) `j` of the even block is `m = j`, of the odd block `m = -(j + 1)`. A
    /// device copies this as it is (parki-gpu's FMM).
    pub fn data(&self) -> &[f64] {
        &self.data
    }

    /// Offset of degree `n`'s blocks in [`YRotation::data`] (the same for every angle of one
    /// order).
    pub fn offsets(&self) -> &[usize] {
        &self.offsets
    }

    /// `v <- W_n(R_y(b))^T v` (`transpose`) or `W_n(R_y(b)) v` for the degrees `n < q`, through
    /// `tmp` (at least `2q` values).
    #[inline(always)]
    pub fn apply(&self, v: &mut [f64], q: usize, transpose: bool, tmp: &mut [f64]) {
        for n in 1..q {
            let c0 = idx(n, 0);
            let e = n + 1;
            let base = self.offsets[n];
            let (even_rows, even_cols) = (base, base + e * e);
            let (odd_rows, odd_cols) = (base + 2 * e * e, base + 2 * e * e + n * n);
            // W^T v = sum_j v_j (row j of W); W v = sum_j v_j (column j of W).
            let (ev, od) = if transpose { (even_rows, odd_rows) } else { (even_cols, odd_cols) };
            let (te, to) = tmp.split_at_mut(e);
            te[..e].fill(0.0);
            for j in 0..e {
                let vj = v[c0 + j];
                let line = &self.data[ev + j * e..ev + (j + 1) * e];
                for (t, &w) in te[..e].iter_mut().zip(line) {
                    *t = w.mul_add(vj, *t);
                }
            }
            to[..n].fill(0.0);
            for j in 0..n {
                let vj = v[c0 - 1 - j];
                let line = &self.data[od + j * n..od + (j + 1) * n];
                for (t, &w) in to[..n].iter_mut().zip(line) {
                    *t = w.mul_add(vj, *t);
                }
            }
            v[c0..c0 + e].copy_from_slice(&te[..e]);
            for j in 0..n {
                v[c0 - 1 - j] = to[j];
            }
        }
    }
}

/// Eight expansions side by side: coefficient `i` of expansion `l` at `v[i][l]`.
pub type Lanes8 = [f64; 8];

/// The two eight-lane operations of the batched translations, written per instruction set so
/// that the lanes (not the coefficients, with gathers) are what the vector registers hold.
pub trait Ops8: Copy {
    /// `acc += w x`.
    fn fma(self, w: f64, x: &Lanes8, acc: &mut Lanes8);
    /// `a x + b y`.
    fn lincomb(self, a: f64, x: &Lanes8, b: f64, y: &Lanes8) -> Lanes8;
}

/// Portable eight-lane operations.
#[derive(Clone, Copy, Debug, Default)]
pub struct Portable8;

impl Ops8 for Portable8 {
    #[inline(always)]
    fn fma(self, w: f64, x: &Lanes8, acc: &mut Lanes8) {
        for l in 0..8 {
            acc[l] = w.mul_add(x[l], acc[l]);
        }
    }
    #[inline(always)]
    fn lincomb(self, a: f64, x: &Lanes8, b: f64, y: &Lanes8) -> Lanes8 {
        let mut o = [0.0; 8];
        for l in 0..8 {
            o[l] = a.mul_add(x[l], b * y[l]);
        }
        o
    }
}

/// AVX-512F eight-lane operations: one `zmm` register per lane group. A value exists only where
/// the CPU has AVX-512F ([`Avx512x8::new`] checks), so its methods never execute an instruction
/// the CPU lacks; they become vector code inside the `#[target_feature]` functions that use it.
#[derive(Clone, Copy, Debug)]
pub struct Avx512x8 {
    _checked: (),
}

impl Avx512x8 {
    /// The operations, if this CPU has AVX-512F and FMA.
    pub fn new() -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("fma") {
                return Some(Self { _checked: () });
            }
        }
        None
    }
}

impl Ops8 for Avx512x8 {
    #[inline(always)]
    fn fma(self, w: f64, x: &Lanes8, acc: &mut Lanes8) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm512_fmadd_pd, _mm512_loadu_pd, _mm512_set1_pd, _mm512_storeu_pd};
            // SAFETY: `self` exists only on a CPU with AVX-512F (checked in `new`); the loads
            // and the store touch exactly the 8 f64 of `x` and `acc`.
            unsafe {
                let r = _mm512_fmadd_pd(_mm512_set1_pd(w), _mm512_loadu_pd(x.as_ptr()), _mm512_loadu_pd(acc.as_ptr()));
                _mm512_storeu_pd(acc.as_mut_ptr(), r);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        Portable8.fma(w, x, acc)
    }
    #[inline(always)]
    fn lincomb(self, a: f64, x: &Lanes8, b: f64, y: &Lanes8) -> Lanes8 {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{
                _mm512_fmadd_pd, _mm512_loadu_pd, _mm512_mul_pd, _mm512_set1_pd, _mm512_storeu_pd,
            };
            let mut o = [0.0; 8];
            // SAFETY: as in `fma`; the loads and the store touch exactly `x`, `y` and `o`.
            unsafe {
                let by = _mm512_mul_pd(_mm512_set1_pd(b), _mm512_loadu_pd(y.as_ptr()));
                let r = _mm512_fmadd_pd(_mm512_set1_pd(a), _mm512_loadu_pd(x.as_ptr()), by);
                _mm512_storeu_pd(o.as_mut_ptr(), r);
            }
            o
        }
        #[cfg(not(target_arch = "x86_64"))]
        Portable8.lincomb(a, x, b, y)
    }
}

/// [`rotate_z`] of eight expansions at once (one angle for all).
#[inline(always)]
pub fn rotate_z_lanes<O: Ops8>(o: O, v: &mut [Lanes8], q: usize, cs: &[(f64, f64)], transpose: bool) {
    let sign = if transpose { -1.0 } else { 1.0 };
    for n in 1..q {
        let c0 = idx(n, 0);
        for (k, &(c, s)) in cs.iter().enumerate().take(n + 1).skip(1) {
            let s = sign * s;
            let (vp, vm) = (v[c0 + k], v[c0 - k]);
            v[c0 + k] = o.lincomb(c, &vp, s, &vm);
            v[c0 - k] = o.lincomb(c, &vm, -s, &vp);
        }
    }
}

/// [`YRotation::many`] in portable code, inlined into its instruction-set wrappers.
#[inline(always)]
fn many_body(bs: &[f64], wp: &[Vec<f64>], p: usize) -> Vec<YRotation> {
    let mut out = Vec::with_capacity(bs.len());
    let mut t: Vec<[f64; 8]> = Vec::new();
    let mut block: Vec<[f64; 8]> = Vec::new();
    let size: usize = (0..p).map(|n| 2 * ((n + 1) * (n + 1) + n * n)).sum();
    for chunk in bs.chunks(8) {
        let lanes = chunk.len();
        // cos(m b), sin(m b) of each lane's angle
        let mut cs = vec![([0.0; 8], [0.0; 8]); p.max(1)];
        let mut one = vec![(0.0, 0.0); p.max(1)];
        for (l, &b) in chunk.iter().enumerate() {
            angle_table(b, p, &mut one);
            for (m, &(c, s)) in one.iter().enumerate() {
                cs[m].0[l] = c;
                cs[m].1[l] = s;
            }
        }
        let mut data: Vec<Vec<f64>> = (0..lanes).map(|_| Vec::with_capacity(size)).collect();
        let mut offsets = Vec::with_capacity(p);
        for (n, wpn) in wp.iter().enumerate().take(p) {
            let d = 2 * n + 1;
            // T = W(P) Z with Z = W(R_z(b)), which has two entries per column: row m: (m:
            // cos mb, -m: sin mb); row -m: (-m: cos mb, m: -sin mb): each entry of T is its
            // row of W(P) against those two (O(d^2); the dense product's sum in its order).
            t.clear();
            t.resize(d * d, [0.0; 8]);
            for (ta, wa) in t.chunks_exact_mut(d).zip(wpn.chunks_exact(d)) {
                ta[n] = [wa[n]; 8];
                for (k, (c, s)) in cs.iter().enumerate().take(n + 1).skip(1) {
                    let (ip, im) = (n + k, n - k);
                    for l in 0..8 {
                        ta[ip][l] = wa[im] * -s[l] + wa[ip] * c[l];
                        ta[im][l] = wa[im] * c[l] + wa[ip] * s[l];
                    }
                }
            }
            offsets.push(data[0].len());
            // W(R_y(b)) = T W(P)^T, only its two parity blocks (the rest is zero): the even
            // block's rows and columns n + i, the odd block's n - 1 - i; each block stored
            // by rows, then by columns
            for (bsize, even) in [(n + 1, true), (n, false)] {
                let at = |i: usize| if even { n + i } else { n - 1 - i };
                block.clear();
                for i in 0..bsize {
                    let ta = &t[at(i) * d..(at(i) + 1) * d];
                    for j in 0..bsize {
                        let wb = &wpn[at(j) * d..(at(j) + 1) * d];
                        let mut acc = [0.0; 8];
                        for (tc, &w) in ta.iter().zip(wb) {
                            for l in 0..8 {
                                acc[l] += tc[l] * w;
                            }
                        }
                        block.push(acc);
                    }
                }
                for (l, lane) in data.iter_mut().enumerate() {
                    lane.extend(block.iter().map(|v| v[l]));
                    lane.extend((0..bsize * bsize).map(|ji| block[(ji % bsize) * bsize + ji / bsize][l]));
                }
            }
        }
        out.extend(data.into_iter().map(|data| YRotation { p, data, offsets: offsets.clone() }));
    }
    out
}

/// [`many_body`] compiled for AVX-512F.
///
/// # Safety
/// The CPU must have AVX-512F, AVX-512VL, AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn many_avx512(bs: &[f64], wp: &[Vec<f64>], p: usize) -> Vec<YRotation> {
    many_body(bs, wp, p)
}

/// [`many_body`] compiled for AVX2.
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn many_avx2(bs: &[f64], wp: &[Vec<f64>], p: usize) -> Vec<YRotation> {
    many_body(bs, wp, p)
}

impl YRotation {
    /// [`YRotation::apply`] of eight expansions at once, through `tmp` (at least `2q` lane
    /// groups).
    #[inline(always)]
    pub fn apply_lanes<O: Ops8>(&self, o: O, v: &mut [Lanes8], q: usize, transpose: bool, tmp: &mut [Lanes8]) {
        for n in 1..q {
            let c0 = idx(n, 0);
            let e = n + 1;
            let base = self.offsets[n];
            let (even_rows, even_cols) = (base, base + e * e);
            let (odd_rows, odd_cols) = (base + 2 * e * e, base + 2 * e * e + n * n);
            let (ev, od) = if transpose { (even_rows, odd_rows) } else { (even_cols, odd_cols) };
            let (te, to) = tmp.split_at_mut(e);
            te[..e].fill([0.0; 8]);
            for j in 0..e {
                let vj = v[c0 + j];
                let line = &self.data[ev + j * e..ev + (j + 1) * e];
                for (t, &w) in te[..e].iter_mut().zip(line) {
                    o.fma(w, &vj, t);
                }
            }
            to[..n].fill([0.0; 8]);
            for j in 0..n {
                let vj = v[c0 - 1 - j];
                let line = &self.data[od + j * n..od + (j + 1) * n];
                for (t, &w) in to[..n].iter_mut().zip(line) {
                    o.fma(w, &vj, t);
                }
            }
            v[c0..c0 + e].copy_from_slice(&te[..e]);
            for j in 0..n {
                v[c0 - 1 - j] = to[j];
            }
        }
    }
}
