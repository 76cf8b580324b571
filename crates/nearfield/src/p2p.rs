//! Ewald-screened P2P (near field) over padded cell lists.
//!
//! `u^N(x_i) = sum_j sum_p G^N(x_i - y_j + p) s_j` over the sources in the 27 colleague cells of
//! the target's cell. With `A = erfc(xi r)/r`, `B = 2 xi e^{-xi^2 r^2}/sqrt(pi)`, `D = 2 xi^2 B`
//! (ParkiPy digest §1.2, §9.4; the Hasimoto splitting, eq. (4) of the Ewald paper):
//!
//! - Laplace: `u += A q`;
//! - Stokeslet: `u += (A - B) f + (A + B) (r.f) r / r^2`;
//! - stresslet: `u += D [(q.n) r + (r.n) q + (r.q) n] - (r.q)(r.n) r [6 (A + B)/r^4 + 2 D/r^2]`
//!   (this is `T - T^F` with `T^F` from the derivation in `parki_reference::classical`);
//! - Stokes: the sum of the Stokeslet and stresslet terms, sharing `A`, `B`, `1/r`;
//! - the Laplace field `E = -grad u`: `E += (A + B) q r / r^2` (from
//!   `-d/dr [erfc(xi r)/r] = erfc(xi r)/r^2 + 2 xi e^{-xi^2 r^2}/(sqrt(pi) r)`), after `u`.
//!
//! A source that coincides with the target (`r = 0` exactly) contributes `-G^F(0) s`: the
//! singular free-space part is skipped, `erf(xi r)/r -> 2 xi/sqrt(pi)` remains, i.e. `-2 xi/sqrt(pi) q`
//! (Laplace), `-4 xi/sqrt(pi) f` (Stokeslet) and `0` (stresslet, `T^F` is odd; likewise the
//! Laplace field, whose smooth part is odd). This is the self correction, applied inside the
//! kernel.
//!
//! All pairs in colleague cells are summed (not only those with `r < r_c`): the extra terms are
//! below the error estimate and cost nothing in SIMD. Parallelism is over target cells; each
//! target accumulates in SIMD lanes over sources, so the result is independent of the thread count.

use parki_core::{Kernel, Output, Par, Real};
use rayon::prelude::{IndexedParallelIterator, IntoParallelIterator, ParallelIterator};

use crate::cells::{CellGrid, PaddedSources, SortedTargets};
use crate::simd::{fma_loop, Isa, IsaToken, Simd};
use crate::special::{erfc_with_gauss_at, exp_neg_at, KernelReal, PairAccuracy};

/// Floating-point operations per evaluated pair (FMA = 2; selects, min/max and rounding are not
/// counted), read off the kernels below. Used to report the achieved FP rate of P2P.
pub struct P2pFlops;

impl P2pFlops {
    /// Flops per pair for `kernel` in precision `T` on `isa` at full [`PairAccuracy`] (the f32
    /// polynomials are shorter; on AVX-512 `1/sqrt` and `1/x` are estimates refined by Newton
    /// steps, counted as the FMA work they do instead of one flop each).
    pub fn per_pair<T: KernelReal>(output: impl Into<Output>, isa: Isa) -> f64 {
        Self::per_pair_at::<T>(output, isa, PairAccuracy::Full)
    }

    /// [`P2pFlops::per_pair`] at pair accuracy `accuracy` (loose: f32's polynomials and one
    /// Newton step).
    pub fn per_pair_at<T: KernelReal>(output: impl Into<Output>, isa: Isa, accuracy: PairAccuracy) -> f64 {
        let output = output.into();
        let newton = isa == Isa::Avx512;
        let loose = accuracy == PairAccuracy::Loose;
        let steps = if T::BYTES == 8 && !loose { 2.0 } else { 1.0 };
        let (exp_len, erfc_len) = if loose {
            (f32::EXP_COEFFS.len(), f32::ERFC_COEFFS.len())
        } else {
            (T::EXP_COEFFS.len(), T::ERFC_COEFFS.len())
        };
        // estimate + per step: rsqrt 1 mul + 1 fma + 1 mul (4 flops), recip 2 fma (4 flops)
        let (rsqrt, recip) = if newton { (2.0 + 4.0 * steps, 1.0 + 4.0 * steps) } else { (2.0, 1.0) };
        let poly = |n: usize| 2.0 * (n - 1) as f64 + crate::special::estrin_squarings(n) as f64;
        let exp = 2.0 + 4.0 + poly(exp_len) + 1.0;
        let erfc = 1.0 + 2.0 + 1.0 + recip + 3.0 + poly(erfc_len) + 3.0;
        // r (3 sub, 1 mul, 2 fma), 1/r, r, x, -xi^2 r^2, B, A
        let common = 8.0 + rsqrt + 1.0 + 1.0 + 1.0 + exp + 1.0 + erfc + 1.0;
        let stokeslet = 1.0 + 1.0 + 2.0 + 5.0 + 1.0 + 12.0; // A-B, A+B, (A+B)/r^2, r.f, c, 3x(2 fma)
        let stresslet = 1.0 + 15.0 + 6.0 + 18.0 + 2.0 + 12.0; // D, r.q r.n q.n, e, 3 comps, s
        let field = if output.field { 1.0 + 2.0 + 6.0 } else { 0.0 }; // A+B, q(A+B)/r^2, 3 fma
        common
            + field
            + match output.kernel {
                Kernel::Laplace => 2.0,
                Kernel::Stokeslet => stokeslet,
                Kernel::Stresslet => stresslet,
                Kernel::Stokes => stokeslet + stresslet - 2.0,
            }
    }
}

/// Constants of the kernels, splatted once per cell.
struct Consts<V> {
    xi: V,
    neg_xi2: V,
    two_xi_sqrt_pi: V,
    self_a: V,
    two_xi2: V,
    zero: V,
    two: V,
    six: V,
}

impl<V: Simd> Consts<V> {
    #[inline(always)]
    fn new(xi: f64) -> Self {
        let s = |x: f64| V::splat(V::Scalar::from_f64(x));
        let c = 2.0 * xi / std::f64::consts::PI.sqrt();
        Self {
            xi: s(xi),
            neg_xi2: s(-xi * xi),
            two_xi_sqrt_pi: s(c),
            self_a: s(-c),
            two_xi2: s(2.0 * xi * xi),
            zero: s(0.0),
            two: s(2.0),
            six: s(6.0),
        }
    }
}

/// Shared radial quantities of one pair.
struct Radial<V> {
    r2: V,
    rinv: V,
    /// `erfc(xi r)/r` (0 at r = 0).
    a: V,
    /// `2 xi e^{-xi^2 r^2}/sqrt(pi)`.
    b: V,
}

/// With `LOOSE` the functions of [`PairAccuracy::Loose`].
#[inline(always)]
fn radial<V: Simd, const LOOSE: bool>(c: &Consts<V>, d: &[V; 3]) -> Radial<V>
where
    V::Scalar: KernelReal,
{
    let r2 = d[0].mul_add(d[0], d[1].mul_add(d[1], d[2] * d[2]));
    let rs = if LOOSE { r2.rsqrt_loose() } else { r2.rsqrt() };
    let rinv = V::select_positive(r2, rs, c.zero);
    let r = r2 * rinv;
    let g = exp_neg_at::<V, LOOSE>(c.neg_xi2 * r2);
    let b = c.two_xi_sqrt_pi * g;
    let erfc = erfc_with_gauss_at::<V, LOOSE>(c.xi * r, g);
    Radial { r2, rinv, a: erfc * rinv, b }
}

/// One kernel's pair interaction.
trait PairKernel {
    /// Output components.
    const DIM: usize;
    /// Density components read per source.
    const COMPS: usize;
    /// Adds the pair terms to `acc` (with `LOOSE`, [`PairAccuracy::Loose`]'s functions).
    fn add<V: Simd, const LOOSE: bool>(c: &Consts<V>, d: &[V; 3], s: &[V; 9], acc: &mut [V; 4])
    where
        V::Scalar: KernelReal;
}

struct Laplace;
struct LaplaceField;
struct Stokeslet;
struct Stresslet;
struct Stokes;

#[inline(always)]
fn stokeslet_terms<V: Simd>(c: &Consts<V>, d: &[V; 3], f: [V; 3], rad: &Radial<V>, acc: &mut [V; 4]) {
    let a = V::select_positive(rad.r2, rad.a, c.self_a) - rad.b;
    let cr = (rad.a + rad.b) * rad.rinv * rad.rinv;
    let rf = d[0].mul_add(f[0], d[1].mul_add(f[1], d[2] * f[2]));
    let k = cr * rf;
    for i in 0..3 {
        acc[i] = a.mul_add(f[i], k.mul_add(d[i], acc[i]));
    }
}

#[inline(always)]
fn stresslet_terms<V: Simd>(c: &Consts<V>, d: &[V; 3], q: [V; 3], n: [V; 3], rad: &Radial<V>, acc: &mut [V; 4]) {
    let dd = c.two_xi2 * rad.b;
    let rq = d[0].mul_add(q[0], d[1].mul_add(q[1], d[2] * q[2]));
    let rn = d[0].mul_add(n[0], d[1].mul_add(n[1], d[2] * n[2]));
    let qn = q[0].mul_add(n[0], q[1].mul_add(n[1], q[2] * n[2]));
    let ri2 = rad.rinv * rad.rinv;
    let e = ri2 * (c.six * (rad.a + rad.b)).mul_add(ri2, c.two * dd);
    let s = rq * rn * e;
    for i in 0..3 {
        let t = qn.mul_add(d[i], rn.mul_add(q[i], rq * n[i]));
        acc[i] = dd.mul_add(t, (-s).mul_add(d[i], acc[i]));
    }
}

impl PairKernel for Laplace {
    const DIM: usize = 1;
    const COMPS: usize = 1;
    #[inline(always)]
    fn add<V: Simd, const LOOSE: bool>(c: &Consts<V>, d: &[V; 3], s: &[V; 9], acc: &mut [V; 4])
    where
        V::Scalar: KernelReal,
    {
        let rad = radial::<V, LOOSE>(c, d);
        let a = V::select_positive(rad.r2, rad.a, c.self_a);
        acc[0] = a.mul_add(s[0], acc[0]);
    }
}

impl PairKernel for LaplaceField {
    const DIM: usize = 4;
    const COMPS: usize = 1;
    #[inline(always)]
    fn add<V: Simd, const LOOSE: bool>(c: &Consts<V>, d: &[V; 3], s: &[V; 9], acc: &mut [V; 4])
    where
        V::Scalar: KernelReal,
    {
        let rad = radial::<V, LOOSE>(c, d);
        let a = V::select_positive(rad.r2, rad.a, c.self_a);
        acc[0] = a.mul_add(s[0], acc[0]);
        // E = q (A + B) r / r^2; zero at r = 0 (1/r is 0 there)
        let e = (rad.a + rad.b) * rad.rinv * rad.rinv * s[0];
        for i in 0..3 {
            acc[1 + i] = e.mul_add(d[i], acc[1 + i]);
        }
    }
}

impl PairKernel for Stokeslet {
    const DIM: usize = 3;
    const COMPS: usize = 3;
    #[inline(always)]
    fn add<V: Simd, const LOOSE: bool>(c: &Consts<V>, d: &[V; 3], s: &[V; 9], acc: &mut [V; 4])
    where
        V::Scalar: KernelReal,
    {
        let rad = radial::<V, LOOSE>(c, d);
        stokeslet_terms(c, d, [s[0], s[1], s[2]], &rad, acc);
    }
}

impl PairKernel for Stresslet {
    const DIM: usize = 3;
    const COMPS: usize = 6;
    #[inline(always)]
    fn add<V: Simd, const LOOSE: bool>(c: &Consts<V>, d: &[V; 3], s: &[V; 9], acc: &mut [V; 4])
    where
        V::Scalar: KernelReal,
    {
        let rad = radial::<V, LOOSE>(c, d);
        stresslet_terms(c, d, [s[0], s[1], s[2]], [s[3], s[4], s[5]], &rad, acc);
    }
}

impl PairKernel for Stokes {
    const DIM: usize = 3;
    const COMPS: usize = 9;
    #[inline(always)]
    fn add<V: Simd, const LOOSE: bool>(c: &Consts<V>, d: &[V; 3], s: &[V; 9], acc: &mut [V; 4])
    where
        V::Scalar: KernelReal,
    {
        let rad = radial::<V, LOOSE>(c, d);
        stokeslet_terms(c, d, [s[0], s[1], s[2]], &rad, acc);
        stresslet_terms(c, d, [s[3], s[4], s[5]], [s[6], s[7], s[8]], &rad, acc);
    }
}

/// Everything one P2P evaluation reads (an implementation detail of [`P2pReal`]).
#[doc(hidden)]
pub struct Job<'a, T> {
    grid: &'a CellGrid,
    src: &'a PaddedSources<T>,
    trg: &'a SortedTargets<T>,
    xi: f64,
}

/// The source runs of target cell `c`: `(first, end, offset)` with the sources
/// `first..end` and the offset added to a target's cell-relative coordinates to put it in
/// their frame, `count` of them. Padded layout: the 27 colleague cells as they are (see
/// [`CellGrid::colleague_offsets`]). Packed rows: consecutive x-neighbours with the same
/// periodic shift merged (9 runs unless a row wraps), the x offset `-s_x` (the targets' x in
/// the sources' frame, [`SortedTargets::build_in_frame`]).
pub struct SourceRuns {
    /// The runs; the first `count` are valid.
    pub runs: [(usize, usize, [f64; 3]); 27],
    /// Number of runs.
    pub count: usize,
}

impl SourceRuns {
    /// The runs of target cell `c` over `src` (built on `grid`) in precision `T`.
    pub fn new<T: Real>(grid: &CellGrid, src: &PaddedSources<T>, c: usize) -> Self {
        let mut runs = [(0usize, 0usize, [0.0; 3]); 27];
        if !src.packed {
            for (r, (cell, o)) in runs.iter_mut().zip(grid.colleague_offsets::<T>(c)) {
                *r = (src.offsets[cell], src.offsets[cell + 1], o);
            }
            return Self { runs, count: 27 };
        }
        let a = grid.colleague_axes::<T>(c);
        let mut count = 0;
        let mut last = usize::MAX;
        for z in a[2] {
            for y in a[1] {
                for x in a[0] {
                    let cell = grid.colleague_index([x.0, y.0, z.0]);
                    let off = [-x.1, y.2, z.2];
                    if count > 0 && last.wrapping_add(1) == cell && runs[count - 1].2 == off {
                        runs[count - 1].1 = src.offsets[cell + 1];
                    } else {
                        runs[count] = (src.offsets[cell], src.offsets[cell + 1], off);
                        count += 1;
                    }
                    last = cell;
                }
            }
        }
        Self { runs, count }
    }

    /// Source slots the vector loop evaluates per target (the last vector of a run whole).
    pub fn slots(&self, lanes: usize) -> u64 {
        self.runs[..self.count].iter().map(|&(a, b, _)| ((b - a).div_ceil(lanes) * lanes) as u64).sum()
    }
}

/// Pairs P2P evaluates (vector lanes included) for `targets` against `sources`.
pub fn evaluated_pairs<T: Real>(
    grid: &CellGrid,
    sources: &PaddedSources<T>,
    targets: &SortedTargets<T>,
    lanes: usize,
) -> u64 {
    (0..grid.cells()).into_par_iter().with_min_len(256).map(|c| cell_slots(grid, sources, targets, c, lanes)).sum()
}

/// Pairs P2P evaluates (vector lanes included) for the targets of cell `c`.
fn cell_slots<T: Real>(
    grid: &CellGrid,
    sources: &PaddedSources<T>,
    targets: &SortedTargets<T>,
    c: usize,
    lanes: usize,
) -> u64 {
    match targets.binned.count(c) {
        0 => 0,
        nt => nt as u64 * SourceRuns::new(grid, sources, c).slots(lanes),
    }
}

/// The sorted targets `t0..t1` (all in cell `c`) against the colleagues of `c`; `out` holds
/// `DIM` values per target. Targets go in pairs: each source chunk is loaded once for two
/// targets, and the two independent chains keep the FMA pipes busy.
#[inline(always)]
fn cell_kernel<V: Simd, K: PairKernel, const LOOSE: bool>(
    job: &Job<V::Scalar>,
    c: usize,
    (t0, t1): (usize, usize),
    out: &mut [V::Scalar],
) where
    V::Scalar: KernelReal,
{
    let consts = Consts::<V>::new(job.xi);
    let runs = SourceRuns::new(job.grid, job.src, c);
    let colleagues = &runs.runs[..runs.count];
    let dens: [&[V::Scalar]; 9] = std::array::from_fn(|q| if q < K::COMPS { &job.src.density[q][..] } else { &[][..] });
    let mut t = t0;
    while t + 1 < t1 {
        targets::<V, K, 2, LOOSE>(
            job,
            &consts,
            colleagues,
            &dens,
            t,
            &mut out[(t - t0) * K::DIM..(t + 2 - t0) * K::DIM],
        );
        t += 2;
    }
    if t < t1 {
        targets::<V, K, 1, LOOSE>(
            job,
            &consts,
            colleagues,
            &dens,
            t,
            &mut out[(t - t0) * K::DIM..(t + 1 - t0) * K::DIM],
        );
    }
}

/// `NT` consecutive sorted targets starting at `t` against the source runs of their cell
/// ([`SourceRuns`]). A run whose length is not a multiple of the lanes (packed rows) masks the
/// densities of its last vector's lanes past the end (they hold the next cell's sources or the
/// dummies after the last cell).
///
/// Coordinates are relative to the cells' origins, so `r = (x_rel + o) - y_rel`: `x_rel + o`
/// (at most about two cell widths) is rounded to `T` once per target and colleague, and the
/// subtraction in the pair loop is exact for close pairs. The pair loop is that of absolute
/// coordinates; only the per-colleague splat changed.
#[inline(always)]
fn targets<V: Simd, K: PairKernel, const NT: usize, const LOOSE: bool>(
    job: &Job<V::Scalar>,
    consts: &Consts<V>,
    colleagues: &[(usize, usize, [f64; 3])],
    dens: &[&[V::Scalar]; 9],
    t: usize,
    out: &mut [V::Scalar],
) where
    V::Scalar: KernelReal,
{
    let src = job.src;
    let tx: [[f64; 3]; NT] =
        std::array::from_fn(|q| [job.trg.x[t + q].to_f64(), job.trg.y[t + q].to_f64(), job.trg.z[t + q].to_f64()]);
    let mut acc = [[consts.zero; 4]; NT];
    let iota = V::load(&<V::Scalar as KernelReal>::IOTA);
    for &(a, b, offset) in colleagues.iter() {
        if a == b {
            continue;
        }
        // r = x - (y + s) = (x_rel + o) - y_rel, x_rel + o summed in f64 and rounded once
        let p: [[V; 3]; NT] =
            std::array::from_fn(|q| [0, 1, 2].map(|d| V::splat(V::Scalar::from_f64(tx[q][d] + offset[d]))));
        let mut j = a;
        while j < b {
            let (sx, sy, sz) = (V::load(&src.x[j..]), V::load(&src.y[j..]), V::load(&src.z[j..]));
            let mut s = [consts.zero; 9];
            for q in 0..K::COMPS {
                s[q] = V::load(&dens[q][j..]);
            }
            if j + V::LANES > b {
                // lanes i < b - j are this run's
                let m = V::splat(V::Scalar::from_f64((b - j) as f64)) - iota;
                for v in s.iter_mut().take(K::COMPS) {
                    *v = V::select_positive(m, *v, consts.zero);
                }
            }
            for q in 0..NT {
                let d = [p[q][0] - sx, p[q][1] - sy, p[q][2] - sz];
                K::add::<V, LOOSE>(consts, &d, &s, &mut acc[q]);
            }
            j += V::LANES;
        }
    }
    for q in 0..NT {
        for dim in 0..K::DIM {
            out[q * K::DIM + dim] = acc[q][dim].reduce_add();
        }
    }
}

/// The P2P of one cell in AVX-512F vectors `V`.
///
/// # Safety
///
/// The CPU must have AVX-512F and FMA (an [`IsaToken`] for `Isa::Avx512`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn cell_avx512<V: Simd, K: PairKernel, const LOOSE: bool>(
    job: &Job<V::Scalar>,
    c: usize,
    range: (usize, usize),
    out: &mut [V::Scalar],
) where
    V::Scalar: KernelReal,
{
    cell_kernel::<V, K, LOOSE>(job, c, range, out)
}

/// The P2P of one cell in AVX2 vectors `V`.
///
/// # Safety
///
/// The CPU must have AVX2 and FMA (an [`IsaToken`] for `Isa::Avx2`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn cell_avx2<V: Simd, K: PairKernel, const LOOSE: bool>(
    job: &Job<V::Scalar>,
    c: usize,
    range: (usize, usize),
    out: &mut [V::Scalar],
) where
    V::Scalar: KernelReal,
{
    cell_kernel::<V, K, LOOSE>(job, c, range, out)
}

/// A real type with SIMD P2P instantiations (`f32`, `f64`).
pub trait P2pReal: KernelReal {
    #[doc(hidden)]
    fn run_cell(
        token: IsaToken,
        output: Output,
        loose: bool,
        job: &Job<Self>,
        c: usize,
        range: (usize, usize),
        out: &mut [Self],
    );
    #[doc(hidden)]
    fn fma_chains(token: IsaToken, iters: u64) -> (Self, usize);
}

macro_rules! impl_p2p_real {
    ($t:ty, $v512:ty, $v256:ty) => {
        impl P2pReal for $t {
            fn run_cell(
                token: IsaToken,
                output: Output,
                loose: bool,
                job: &Job<Self>,
                c: usize,
                range: (usize, usize),
                out: &mut [Self],
            ) {
                macro_rules! at {
                    ($k:ty, $l:literal) => {
                        match token.isa() {
                            #[cfg(target_arch = "x86_64")]
                            // SAFETY: a token for `Avx512` exists only if `IsaToken::new` found
                            // AVX-512F and FMA on this CPU, the features `cell_avx512` enables.
                            Isa::Avx512 => unsafe { cell_avx512::<$v512, $k, $l>(job, c, range, out) },
                            #[cfg(target_arch = "x86_64")]
                            // SAFETY: a token for `Avx2` exists only if `IsaToken::new` found AVX2
                            // and FMA on this CPU, the features `cell_avx2` enables.
                            Isa::Avx2 => unsafe { cell_avx2::<$v256, $k, $l>(job, c, range, out) },
                            _ => cell_kernel::<$t, $k, $l>(job, c, range, out),
                        }
                    };
                }
                // loose pair functions only where they differ from the full ones (f64)
                macro_rules! go {
                    ($k:ty) => {
                        if loose && <$t as parki_core::Real>::BYTES == 8 {
                            at!($k, true)
                        } else {
                            at!($k, false)
                        }
                    };
                }
                match output.kernel {
                    Kernel::Laplace if output.field => go!(LaplaceField),
                    Kernel::Laplace => go!(Laplace),
                    Kernel::Stokeslet => go!(Stokeslet),
                    Kernel::Stresslet => go!(Stresslet),
                    Kernel::Stokes => go!(Stokes),
                }
            }

            fn fma_chains(token: IsaToken, iters: u64) -> (Self, usize) {
                match token.isa() {
                    #[cfg(target_arch = "x86_64")]
                    // SAFETY: the `Avx512` token proves AVX-512F and FMA, which `fma_avx512`
                    // enables (checked once, in `IsaToken::new`).
                    Isa::Avx512 => (unsafe { crate::simd::fma_avx512::<$v512>(iters) }, <$v512>::LANES),
                    #[cfg(target_arch = "x86_64")]
                    // SAFETY: the `Avx2` token proves AVX2 and FMA, which `fma_avx2` enables
                    // (checked once, in `IsaToken::new`).
                    Isa::Avx2 => (unsafe { crate::simd::fma_avx2::<$v256>(iters) }, <$v256>::LANES),
                    _ => (fma_loop::<$t>(iters), 1),
                }
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
impl_p2p_real!(f64, crate::simd::F64x8, crate::simd::F64x4);
#[cfg(target_arch = "x86_64")]
impl_p2p_real!(f32, crate::simd::F32x16, crate::simd::F32x8);
#[cfg(not(target_arch = "x86_64"))]
impl_p2p_real!(f64, f64, f64);
#[cfg(not(target_arch = "x86_64"))]
impl_p2p_real!(f32, f32, f32);

/// Near field of all targets: writes `output.dim()` values per target into `out` (the
/// potential, then the Laplace field if asked), in the sorted (cell) order of `targets`, with
/// the pair functions at full accuracy.
///
/// `sources` must be padded to a multiple of `isa.lanes::<T>()`; an `isa` this CPU lacks runs
/// the portable code (the SIMD code runs only behind an [`IsaToken`], see [`crate::simd`]).
#[allow(clippy::too_many_arguments)]
pub fn p2p<T: P2pReal>(
    output: impl Into<Output>,
    xi: f64,
    grid: &CellGrid,
    sources: &PaddedSources<T>,
    targets: &SortedTargets<T>,
    out: &mut [T],
    isa: Isa,
    par: Par,
) {
    p2p_at(output, PairAccuracy::Full, xi, grid, sources, targets, out, isa, par)
}

/// [`p2p`] with the pair functions at `accuracy` ([`PairAccuracy::Loose`] for loose
/// tolerances in f64).
#[allow(clippy::too_many_arguments)]
pub fn p2p_at<T: P2pReal>(
    output: impl Into<Output>,
    accuracy: PairAccuracy,
    xi: f64,
    grid: &CellGrid,
    sources: &PaddedSources<T>,
    targets: &SortedTargets<T>,
    out: &mut [T],
    isa: Isa,
    par: Par,
) {
    let loose = accuracy == PairAccuracy::Loose;
    let output = output.into();
    let dim = output.dim();
    let token = IsaToken::new(isa).unwrap_or_else(IsaToken::scalar);
    assert_eq!(out.len(), targets.len() * dim, "P2P output length");
    let lanes = token.isa().lanes::<T>();
    assert_eq!(sources.packed, targets.packed, "packed-row sources need targets in their frame");
    if sources.packed {
        let end = sources.offsets.last().copied().unwrap_or(0);
        assert!(sources.slots() >= end + lanes, "packed sources need a vector of dummies after the last cell");
    } else {
        assert!(sources.offsets.iter().all(|o| o % lanes == 0), "sources padded for another ISA");
    }
    let job = Job { grid, src: sources, trg: targets, xi };
    let offsets = &targets.binned.offsets;
    let writer = parki_core::par::DisjointSlice::new(out);
    let run = |c: usize, (t0, t1): (usize, usize)| {
        // SAFETY: the pieces of one cell's targets are disjoint and no two cells' ranges of
        // the sorted targets overlap; each piece runs once, so no two borrows of `out` overlap.
        let o = unsafe { writer.range_mut(t0 * dim, t1 * dim) };
        T::run_cell(token, output, loose, &job, c, (t0, t1), o);
    };
    match par {
        Par::Seq => (0..grid.cells())
            .filter(|&c| offsets[c] < offsets[c + 1])
            .for_each(|c| run(c, (offsets[c], offsets[c + 1]))),
        Par::Rayon(threads) => {
            let pieces = TargetPieces::new(grid, sources, targets, lanes, threads);
            pieces.items.into_par_iter().with_min_len(4).for_each(|(c, t0, t1)| run(c, (t0, t1)));
        }
    }
}

/// P2P's parallel work items: the occupied target cells, those holding more than a share of
/// the pairs cut into pieces of consecutive targets.
///
/// One item per cell starves the threads when a few cells hold most of the pairs (a cluster
/// in few cells: 1e5 Plummer points in a 3^3 cell grid ran P2P on one of two threads). The
/// share is `1 / (PIECES_PER_THREAD threads)` of the total slots the vector loop evaluates, so
/// every thread gets several pieces to balance; a piece keeps at least `MIN_PIECE` targets.
struct TargetPieces {
    /// `(cell, first target, end)`.
    items: Vec<(usize, usize, usize)>,
}

/// Pieces per thread the largest cells are cut to (see [`TargetPieces`]).
const PIECES_PER_THREAD: u64 = 16;

/// Fewest targets in a piece of a cut cell.
const MIN_PIECE: usize = 16;

impl TargetPieces {
    fn new<T: Real>(
        grid: &CellGrid,
        sources: &PaddedSources<T>,
        targets: &SortedTargets<T>,
        lanes: usize,
        threads: usize,
    ) -> Self {
        let offsets = &targets.binned.offsets;
        let work: Vec<(usize, u64)> = (0..grid.cells())
            .into_par_iter()
            .with_min_len(256)
            .filter(|&c| offsets[c] < offsets[c + 1])
            .map(|c| (c, cell_slots(grid, sources, targets, c, lanes)))
            .collect();
        let total: u64 = work.iter().map(|w| w.1).sum();
        let share = (total / (PIECES_PER_THREAD * threads.max(1) as u64)).max(1);
        let mut items = Vec::with_capacity(work.len());
        for (c, w) in work {
            let (t0, t1) = (offsets[c], offsets[c + 1]);
            let n = t1 - t0;
            let pieces = (w.div_ceil(share) as usize).clamp(1, n.div_ceil(MIN_PIECE).max(1));
            let step = n.div_ceil(pieces);
            let mut a = t0;
            while a < t1 {
                let b = (a + step).min(t1);
                items.push((c, a, b));
                a = b;
            }
        }
        Self { items }
    }
}
