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
//! Which pairs are summed is the [`NearCutoff`]: with [`NearCutoff::Sphere`] (the default of the
//! Ewald sum on the CPU) only the sources of each colleague run whose x lies in the window of the
//! target's cut-off sphere, `|x - x_t| <= sqrt(r_c^2 - d_y^2 - d_z^2)` with `d_y`, `d_z` the
//! target's distances to the run's row of cells (found by binary search: the sources of a cell
//! are sorted by x); with [`NearCutoff::Cells`] every pair in the 27 colleague cells, as the
//! device kernels do. The sphere's radius `r_c` lies between the cells' width `w` and `2 w`:
//! the error of the sum over the colleague block comes from the caps of the sphere of radius
//! `r` just beyond the block's faces (`w < r < 1.2 w` at tight tolerances), and the pairs
//! beyond `1.2-1.4 w` in the block's edges and corners add next to nothing
//! (`parki_farfield::ErrorModel::near_within`; the selection picks the radius,
//! `parki_farfield::Params::near_cut`). At `r_c = 1.2 w` the windows read 64 % of the block.
//! Parallelism is over target cells; each target accumulates in SIMD lanes over sources, so the
//! result is independent of the thread count.

use parki_core::{Kernel, Output, Par, Real};
use rayon::prelude::{IndexedParallelIterator, IntoParallelIterator, ParallelIterator};

use crate::cells::{CellGrid, PaddedSources, SortedTargets};
use crate::simd::{fma_loop, Isa, IsaToken, Simd};
use crate::special::{erfc_with_gauss_at, exp_neg_at, KernelReal, PairAccuracy, FULL, LOOSE, MEDIUM};

/// Which source-target pairs P2P sums.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NearCutoff {
    /// Every pair in the 27 colleague cells (what the device kernels evaluate; a CPU run
    /// compared with a device run to round-off uses it).
    Cells,
    /// The pairs of the colleague cells within this radius, and those of the same x window of
    /// the colleague runs: per target and run the sources with `|x - x_t|^2 <= r^2 - d_y^2 -
    /// d_z^2` (`d_y`, `d_z` the target's distances to the run's row of cells).
    Sphere(f64),
}

impl NearCutoff {
    /// The name in run files and reports: `"cells"` or `"sphere"`.
    pub fn name(self) -> &'static str {
        match self {
            NearCutoff::Cells => "cells",
            NearCutoff::Sphere(_) => "sphere",
        }
    }

    /// The squared radius the windows are cut to: the sphere's radius with a relative margin of
    /// 1e-9, so that a pair at the radius is kept despite the rounding of the targets' relative
    /// coordinates and of the faces; `None` for every pair of the cells. The device's P2P cuts
    /// to the same.
    pub fn window_radius2(self) -> Option<f64> {
        match self {
            NearCutoff::Cells => None,
            NearCutoff::Sphere(r) => {
                let r = r * (1.0 + 1e-9);
                Some(r * r)
            }
        }
    }
}

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

    /// [`P2pFlops::per_pair`] at pair accuracy `accuracy` (medium: shorter f64 polynomials;
    /// loose: f32's polynomials and one Newton step).
    pub fn per_pair_at<T: KernelReal>(output: impl Into<Output>, isa: Isa, accuracy: PairAccuracy) -> f64 {
        let output = output.into();
        let newton = isa == Isa::Avx512;
        let loose = accuracy == PairAccuracy::Loose;
        let steps = if T::BYTES == 8 && !loose { 2.0 } else { 1.0 };
        let (exp_len, erfc_len) = match accuracy {
            PairAccuracy::Loose => (f32::EXP_COEFFS.len(), f32::ERFC_COEFFS.len()),
            PairAccuracy::Medium => (T::EXP_COEFFS_MEDIUM.len(), T::ERFC_COEFFS_MEDIUM.len()),
            PairAccuracy::Full => (T::EXP_COEFFS.len(), T::ERFC_COEFFS.len()),
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

/// With the functions of accuracy level `ACC` ([`FULL`], [`MEDIUM`] or [`LOOSE`]).
#[inline(always)]
fn radial<V: Simd, const ACC: u8>(c: &Consts<V>, d: &[V; 3]) -> Radial<V>
where
    V::Scalar: KernelReal,
{
    let r2 = d[0].mul_add(d[0], d[1].mul_add(d[1], d[2] * d[2]));
    let rs = if ACC == LOOSE { r2.rsqrt_loose() } else { r2.rsqrt() };
    let rinv = V::select_positive(r2, rs, c.zero);
    let r = r2 * rinv;
    let g = exp_neg_at::<V, ACC>(c.neg_xi2 * r2);
    let b = c.two_xi_sqrt_pi * g;
    let erfc = erfc_with_gauss_at::<V, ACC>(c.xi * r, g);
    Radial { r2, rinv, a: erfc * rinv, b }
}

/// One kernel's pair interaction.
trait PairKernel {
    /// Output components.
    const DIM: usize;
    /// Density components read per source.
    const COMPS: usize;
    /// Adds the pair terms to `acc` (with the functions of accuracy level `ACC`).
    fn add<V: Simd, const ACC: u8>(c: &Consts<V>, d: &[V; 3], s: &[V; 9], acc: &mut [V; 4])
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
    fn add<V: Simd, const ACC: u8>(c: &Consts<V>, d: &[V; 3], s: &[V; 9], acc: &mut [V; 4])
    where
        V::Scalar: KernelReal,
    {
        let rad = radial::<V, ACC>(c, d);
        let a = V::select_positive(rad.r2, rad.a, c.self_a);
        acc[0] = a.mul_add(s[0], acc[0]);
    }
}

impl PairKernel for LaplaceField {
    const DIM: usize = 4;
    const COMPS: usize = 1;
    #[inline(always)]
    fn add<V: Simd, const ACC: u8>(c: &Consts<V>, d: &[V; 3], s: &[V; 9], acc: &mut [V; 4])
    where
        V::Scalar: KernelReal,
    {
        let rad = radial::<V, ACC>(c, d);
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
    fn add<V: Simd, const ACC: u8>(c: &Consts<V>, d: &[V; 3], s: &[V; 9], acc: &mut [V; 4])
    where
        V::Scalar: KernelReal,
    {
        let rad = radial::<V, ACC>(c, d);
        stokeslet_terms(c, d, [s[0], s[1], s[2]], &rad, acc);
    }
}

impl PairKernel for Stresslet {
    const DIM: usize = 3;
    const COMPS: usize = 6;
    #[inline(always)]
    fn add<V: Simd, const ACC: u8>(c: &Consts<V>, d: &[V; 3], s: &[V; 9], acc: &mut [V; 4])
    where
        V::Scalar: KernelReal,
    {
        let rad = radial::<V, ACC>(c, d);
        stresslet_terms(c, d, [s[0], s[1], s[2]], [s[3], s[4], s[5]], &rad, acc);
    }
}

impl PairKernel for Stokes {
    const DIM: usize = 3;
    const COMPS: usize = 9;
    #[inline(always)]
    fn add<V: Simd, const ACC: u8>(c: &Consts<V>, d: &[V; 3], s: &[V; 9], acc: &mut [V; 4])
    where
        V::Scalar: KernelReal,
    {
        let rad = radial::<V, ACC>(c, d);
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
    /// The cut-off sphere's squared radius ([`NearCutoff::Sphere`]); `None`: every pair.
    sphere: Option<f64>,
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
    /// Per run, its row's steps `(y, z)` from the target cell (0, 1, 2 for -1, 0, +1).
    pub rows: [(u8, u8); 27],
    /// Number of runs.
    pub count: usize,
}

impl SourceRuns {
    /// The runs of target cell `c` over `src` (built on `grid`) in precision `T`.
    pub fn new<T: Real>(grid: &CellGrid, src: &PaddedSources<T>, c: usize) -> Self {
        let mut runs = [(0usize, 0usize, [0.0; 3]); 27];
        let mut rows = [(0u8, 0u8); 27];
        if !src.packed {
            for (k, (r, (cell, o))) in runs.iter_mut().zip(grid.colleague_offsets::<T>(c)).enumerate() {
                *r = (src.offsets[cell], src.offsets[cell + 1], o);
                rows[k] = (((k / 3) % 3) as u8, (k / 9) as u8);
            }
            return Self { runs, rows, count: 27 };
        }
        let a = grid.colleague_axes::<T>(c);
        let mut count = 0;
        let mut last = usize::MAX;
        for (iz, z) in a[2].iter().enumerate() {
            for (iy, y) in a[1].iter().enumerate() {
                for x in a[0] {
                    let cell = grid.colleague_index([x.0, y.0, z.0]);
                    let off = [-x.1, y.2, z.2];
                    // merged along x within one row only: a window's ghost row and the next row
                    // can be consecutive cells with equal offsets, but their runs are not one x
                    // range (the cut-off sphere's windows need each run in one row, x-sorted)
                    let row = (iy as u8, iz as u8);
                    if count > 0 && last.wrapping_add(1) == cell && runs[count - 1].2 == off && rows[count - 1] == row {
                        runs[count - 1].1 = src.offsets[cell + 1];
                    } else {
                        runs[count] = (src.offsets[cell], src.offsets[cell + 1], off);
                        rows[count] = row;
                        count += 1;
                    }
                    last = cell;
                }
            }
        }
        Self { runs, rows, count }
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
/// targets, and the two independent chains keep the FMA pipes busy. Returns the pairs evaluated
/// (vector lanes included).
#[inline(always)]
fn cell_kernel<V: Simd, K: PairKernel, const ACC: u8>(
    job: &Job<V::Scalar>,
    c: usize,
    (t0, t1): (usize, usize),
    out: &mut [V::Scalar],
) -> u64
where
    V::Scalar: KernelReal,
{
    let consts = Consts::<V>::new(job.xi);
    let runs = SourceRuns::new(job.grid, job.src, c);
    let faces = job.grid.faces::<V::Scalar>(c);
    let dens: [&[V::Scalar]; 9] = std::array::from_fn(|q| if q < K::COMPS { &job.src.density[q][..] } else { &[][..] });
    let mut pairs = 0;
    let mut t = t0;
    while t + 1 < t1 {
        pairs += targets::<V, K, 2, ACC>(
            job,
            &consts,
            &runs,
            &faces,
            &dens,
            t,
            &mut out[(t - t0) * K::DIM..(t + 2 - t0) * K::DIM],
        );
        t += 2;
    }
    if t < t1 {
        pairs += targets::<V, K, 1, ACC>(
            job,
            &consts,
            &runs,
            &faces,
            &dens,
            t,
            &mut out[(t - t0) * K::DIM..(t + 1 - t0) * K::DIM],
        );
    }
    pairs
}

/// The sources `a..b` of a run (sorted by x) in a target's x window of the cut-off sphere of
/// squared radius `r2`: the target at `x` in the run's frame, at squared distance `d2` from the
/// run's row of cells across y and z, reaches `|x_s - x| <= sqrt(r2 - d2)`. Empty (`(b, b)`)
/// where its sphere does not reach the row.
#[inline(always)]
fn sphere_window<T: Real>(xs: &[T], (a, b): (usize, usize), x: f64, d2: f64, r2: f64) -> (usize, usize) {
    let w2 = r2 - d2;
    if w2 < 0.0 || a == b {
        return (b, b);
    }
    let w = w2.sqrt();
    let (lo, hi) = (x - w, x + w);
    let run = &xs[a..b];
    // most windows reach past one end of their run (the x-neighbour cells' far halves are cut,
    // their near ends kept): search only the ends that are cut
    let first = if run[0].to_f64() >= lo { 0 } else { run.partition_point(|v| v.to_f64() < lo) };
    let end = if run[run.len() - 1].to_f64() <= hi {
        run.len()
    } else {
        first + run[first..].partition_point(|v| v.to_f64() <= hi)
    };
    (a + first, a + end)
}

/// `NT` consecutive sorted targets starting at `t` against the source runs of their cell
/// ([`SourceRuns`]), each target's run cut to its own window of the cut-off sphere
/// ([`sphere_window`]) when the job has one. The vectors cover the union of the targets'
/// windows, aligned to the run's start; a vector that reaches past a target's window (packed
/// rows' run ends, cut runs) masks the densities of the lanes outside it for that target, so
/// that every target sums its own pairs in its own lanes whatever target it is paired with.
/// Returns the pairs evaluated (lanes included).
///
/// Coordinates are relative to the cells' origins, so `r = (x_rel + o) - y_rel`: `x_rel + o`
/// (at most about two cell widths) is rounded to `T` once per target and colleague, and the
/// subtraction in the pair loop is exact for close pairs. The pair loop is that of absolute
/// coordinates; only the per-colleague splat changed.
#[inline(always)]
fn targets<V: Simd, K: PairKernel, const NT: usize, const ACC: u8>(
    job: &Job<V::Scalar>,
    consts: &Consts<V>,
    runs: &SourceRuns,
    faces: &[(f64, f64); 3],
    dens: &[&[V::Scalar]; 9],
    t: usize,
    out: &mut [V::Scalar],
) -> u64
where
    V::Scalar: KernelReal,
{
    let src = job.src;
    let tx: [[f64; 3]; NT] =
        std::array::from_fn(|q| [job.trg.x[t + q].to_f64(), job.trg.y[t + q].to_f64(), job.trg.z[t + q].to_f64()]);
    // squared distances to the rows of cells at steps -1, 0, +1 along y and z
    let step_d2 = |q: usize, d: usize| -> [f64; 3] {
        let below = (tx[q][d] - faces[d].0).max(0.0);
        let above = (faces[d].1 - tx[q][d]).max(0.0);
        [below * below, 0.0, above * above]
    };
    let dy2: [[f64; 3]; NT] = std::array::from_fn(|q| step_d2(q, 1));
    let dz2: [[f64; 3]; NT] = std::array::from_fn(|q| step_d2(q, 2));
    let mut acc = [[consts.zero; 4]; NT];
    let iota = V::load(&<V::Scalar as KernelReal>::IOTA);
    let mut pairs = 0u64;
    for (&(a, b, offset), &(iy, iz)) in runs.runs[..runs.count].iter().zip(&runs.rows[..runs.count]) {
        if a == b {
            continue;
        }
        // each target's own window of the run (the whole run without a sphere)
        let win: [(usize, usize); NT] = match job.sphere {
            None => [(a, b); NT],
            Some(r2) => std::array::from_fn(|q| {
                let d2 = dy2[q][iy as usize] + dz2[q][iz as usize];
                sphere_window::<V::Scalar>(&src.x, (a, b), tx[q][0] + offset[0], d2, r2)
            }),
        };
        let lo = win.iter().filter(|w| w.0 < w.1).map(|w| w.0).min().unwrap_or(b);
        let hi = win.iter().filter(|w| w.0 < w.1).map(|w| w.1).max().unwrap_or(b);
        if lo >= hi {
            continue;
        }
        // vectors aligned to the run's start, so that a source sits in the same lane whatever
        // the other target's window: each target's sums do not depend on its partner
        let mut j = a + (lo - a) / V::LANES * V::LANES;
        pairs += ((hi - j).div_ceil(V::LANES) * V::LANES * NT) as u64;
        // r = x - (y + s) = (x_rel + o) - y_rel, x_rel + o summed in f64 and rounded once
        let p: [[V; 3]; NT] =
            std::array::from_fn(|q| [0, 1, 2].map(|d| V::splat(V::Scalar::from_f64(tx[q][d] + offset[d]))));
        while j < hi {
            let (sx, sy, sz) = (V::load(&src.x[j..]), V::load(&src.y[j..]), V::load(&src.z[j..]));
            let mut s = [consts.zero; 9];
            for c in 0..K::COMPS {
                s[c] = V::load(&dens[c][j..]);
            }
            for q in 0..NT {
                let (f, e) = win[q];
                if j + V::LANES <= f || j >= e {
                    // no lane of this vector is in the target's window
                    continue;
                }
                let d = [p[q][0] - sx, p[q][1] - sy, p[q][2] - sz];
                if j >= f && j + V::LANES <= e {
                    K::add::<V, ACC>(consts, &d, &s, &mut acc[q]);
                } else {
                    // lanes i with f <= j + i < e are the target's
                    let above = iota + V::splat(V::Scalar::from_f64((j + 1) as f64 - f as f64));
                    let below = V::splat(V::Scalar::from_f64((e - j) as f64)) - iota;
                    let mut m = s;
                    for v in m.iter_mut().take(K::COMPS) {
                        *v = V::select_positive(below, V::select_positive(above, *v, consts.zero), consts.zero);
                    }
                    K::add::<V, ACC>(consts, &d, &m, &mut acc[q]);
                }
            }
            j += V::LANES;
        }
    }
    for q in 0..NT {
        for dim in 0..K::DIM {
            out[q * K::DIM + dim] = acc[q][dim].reduce_add();
        }
    }
    pairs
}

/// The P2P of one cell in AVX-512F vectors `V`.
///
/// # Safety
///
/// The CPU must have AVX-512F and FMA (an [`IsaToken`] for `Isa::Avx512`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn cell_avx512<V: Simd, K: PairKernel, const ACC: u8>(
    job: &Job<V::Scalar>,
    c: usize,
    range: (usize, usize),
    out: &mut [V::Scalar],
) -> u64
where
    V::Scalar: KernelReal,
{
    cell_kernel::<V, K, ACC>(job, c, range, out)
}

/// The P2P of one cell in AVX2 vectors `V`.
///
/// # Safety
///
/// The CPU must have AVX2 and FMA (an [`IsaToken`] for `Isa::Avx2`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn cell_avx2<V: Simd, K: PairKernel, const ACC: u8>(
    job: &Job<V::Scalar>,
    c: usize,
    range: (usize, usize),
    out: &mut [V::Scalar],
) -> u64
where
    V::Scalar: KernelReal,
{
    cell_kernel::<V, K, ACC>(job, c, range, out)
}

/// A real type with SIMD P2P instantiations (`f32`, `f64`).
pub trait P2pReal: KernelReal {
    #[doc(hidden)]
    fn run_cell(
        token: IsaToken,
        output: Output,
        accuracy: PairAccuracy,
        job: &Job<Self>,
        c: usize,
        range: (usize, usize),
        out: &mut [Self],
    ) -> u64;
    #[doc(hidden)]
    fn fma_chains(token: IsaToken, iters: u64) -> (Self, usize);
}

macro_rules! impl_p2p_real {
    ($t:ty, $v512:ty, $v256:ty) => {
        impl P2pReal for $t {
            fn run_cell(
                token: IsaToken,
                output: Output,
                accuracy: PairAccuracy,
                job: &Job<Self>,
                c: usize,
                range: (usize, usize),
                out: &mut [Self],
            ) -> u64 {
                macro_rules! at {
                    ($k:ty, $l:ident) => {
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
                // medium and loose pair functions only where they differ from the full ones (f64)
                macro_rules! go {
                    ($k:ty) => {
                        match accuracy {
                            PairAccuracy::Loose if <$t as parki_core::Real>::BYTES == 8 => at!($k, LOOSE),
                            PairAccuracy::Medium if <$t as parki_core::Real>::BYTES == 8 => at!($k, MEDIUM),
                            _ => at!($k, FULL),
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

/// [`p2p`] with the pair functions at `accuracy` ([`PairAccuracy::Medium`] and
/// [`PairAccuracy::Loose`] for the looser tolerances in f64), every pair of the colleague cells
/// ([`NearCutoff::Cells`]).
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
    p2p_within(output, accuracy, NearCutoff::Cells, xi, grid, sources, targets, out, isa, par);
}

/// [`p2p_at`] with the pairs of `cutoff` ([`NearCutoff::Sphere`]: the windows of the cut-off
/// sphere within the colleague cells). Returns the pairs evaluated, vector lanes included
/// (with [`NearCutoff::Cells`], [`evaluated_pairs`]).
///
/// # Panics
/// If the sphere's radius is below the cells' smallest width (pairs closer than the width
/// would be dropped, which the error model does not allow for), or on the layout mismatches of
/// [`p2p`].
#[allow(clippy::too_many_arguments)]
pub fn p2p_within<T: P2pReal>(
    output: impl Into<Output>,
    accuracy: PairAccuracy,
    cutoff: NearCutoff,
    xi: f64,
    grid: &CellGrid,
    sources: &PaddedSources<T>,
    targets: &SortedTargets<T>,
    out: &mut [T],
    isa: Isa,
    par: Par,
) -> u64 {
    let output = output.into();
    let dim = output.dim();
    let token = IsaToken::new(isa).unwrap_or_else(IsaToken::scalar);
    assert_eq!(out.len(), targets.len() * dim, "P2P output length");
    let lanes = token.isa().lanes::<T>();
    assert_eq!(sources.packed, targets.packed, "packed-row sources need targets in their frame");
    let end = sources.offsets.last().copied().unwrap_or(0);
    assert!(sources.slots() >= end + lanes, "sources need a vector of dummies after the last cell");
    if !sources.packed {
        assert!(sources.offsets.iter().all(|o| o % lanes == 0), "sources padded for another ISA");
    }
    if let NearCutoff::Sphere(r) = cutoff {
        assert!(r >= grid.min_width() * (1.0 - 1e-12), "cut-off sphere {r} narrower than the cells");
    }
    let sphere = cutoff.window_radius2();
    let job = Job { grid, src: sources, trg: targets, xi, sphere };
    let offsets = &targets.binned.offsets;
    let writer = parki_core::par::DisjointSlice::new(out);
    let run = |c: usize, (t0, t1): (usize, usize)| -> u64 {
        // SAFETY: the pieces of one cell's targets are disjoint and no two cells' ranges of
        // the sorted targets overlap; each piece runs once, so no two borrows of `out` overlap.
        let o = unsafe { writer.range_mut(t0 * dim, t1 * dim) };
        T::run_cell(token, output, accuracy, &job, c, (t0, t1), o)
    };
    match par {
        Par::Seq => (0..grid.cells())
            .filter(|&c| offsets[c] < offsets[c + 1])
            .map(|c| run(c, (offsets[c], offsets[c + 1])))
            .sum(),
        Par::Rayon(threads) => {
            let pieces = TargetPieces::new(grid, sources, targets, lanes, threads);
            pieces.items.into_par_iter().with_min_len(4).map(|(c, t0, t1)| run(c, (t0, t1))).sum()
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
