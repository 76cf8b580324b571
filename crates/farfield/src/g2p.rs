//! G2P: interpolating the far-field grid at the targets (Ewald paper eq. (8)),
//! `u_c(x) = sum_g W(x - g) v_c(g)` (the `1/V` of the paper's `h^3` and the FFT normalisation are
//! folded into CNV).
//!
//! The grid is read as a [`GatherGrid`]: the output components interleaved per point, so that
//! each grid row of a target's support is one contiguous run of `P * dim` values. Two variants,
//! bitwise identical per target:
//! - [`G2pVariant::Base`]: targets in input order.
//! - [`G2pVariant::TargetSorted`]: targets sorted by far-field cell (`P/2` grid points wide, the
//!   paper's C^F) so that consecutive targets gather overlapping grid regions; results are
//!   written back in input order.
//!
//! The gather accumulates whole rows (`tmp[k] += w_y w_z v[row + k]`) and contracts with the x
//! weights at the end, so the inner loop vectorises without reordering a reduction.

use parki_core::isa::Isa;
use parki_core::memory::prefetch_ordered;
use parki_core::par::DisjointSlice;
use parki_core::{isa_dispatch, Par, Points, Real};
use parki_decomp::sort::counting_sort;
use parki_decomp::GridLayout;
use rayon::prelude::{IndexedParallelIterator, IntoParallelIterator, ParallelIterator, ParallelSliceMut};

use crate::gridwin::{GridWindow, MAX_P};

/// Which G2P algorithm to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum G2pVariant {
    /// Targets in input order.
    Base,
    /// Targets sorted by far-field cell (default).
    #[default]
    TargetSorted,
}

impl G2pVariant {
    /// Name in run.toml and reports.
    pub fn name(self) -> &'static str {
        match self {
            G2pVariant::Base => "base",
            G2pVariant::TargetSorted => "sorted",
        }
    }

    /// Parses a run.toml name: `"sorted"` or `"base"` (the inverse of [`G2pVariant::name`]).
    pub fn parse(s: &str) -> Option<Self> {
        [G2pVariant::TargetSorted, G2pVariant::Base].into_iter().find(|v| v.name() == s)
    }
}

/// How the far field of the Laplace field `E = -grad u` is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FieldMethod {
    /// G2P with the window's derivative on the potential grid ([`g2p_field`]): no extra
    /// transforms, two FMAs per grid point in G2P instead of one (default).
    #[default]
    Window,
    /// Spectral differentiation in CNV (`-i k`, [`crate::Cnv::with_field`]): three more inverse
    /// transforms and a G2P of four components.
    Spectral,
}

impl FieldMethod {
    /// Name in run.toml and reports.
    pub fn name(self) -> &'static str {
        match self {
            FieldMethod::Window => "window",
            FieldMethod::Spectral => "spectral",
        }
    }

    /// Parses a run.toml name (the inverse of [`FieldMethod::name`]).
    pub fn parse(s: &str) -> Option<Self> {
        [FieldMethod::Window, FieldMethod::Spectral].into_iter().find(|v| v.name() == s)
    }

    /// Components of the grid the inverse transform returns and G2P reads, for `kernel`'s
    /// potential and, with `field`, the field.
    pub fn grid_outputs(field: Option<Self>, kernel: parki_core::Kernel) -> usize {
        kernel.output_dim() + if field == Some(FieldMethod::Spectral) { 3 } else { 0 }
    }
}

/// A real grid of `dim` interleaved components: value `(x, y, z, c)` at
/// `z * plane + y * row + x * dim + c`.
#[derive(Clone, Copy, Debug)]
pub struct GatherGrid<'a, T> {
    data: &'a [T],
    dim: usize,
    row: usize,
    plane: usize,
}

impl<'a, T: Real> GatherGrid<'a, T> {
    /// One component in the (padded) FFT layout.
    pub fn from_fft(layout: &GridLayout, data: &'a [T]) -> Self {
        Self { data, dim: 1, row: layout.row_stride(), plane: layout.row_stride() * layout.global[1] }
    }

    /// `dim` components interleaved without padding, as written by [`interleave`].
    pub fn interleaved(layout: &GridLayout, dim: usize, data: &'a [T]) -> Self {
        let row = layout.global[0] * dim;
        Self { data, dim, row, plane: row * layout.global[1] }
    }

    /// Components per point.
    pub fn dim(&self) -> usize {
        self.dim
    }
}

/// Copies the first `dim` components of an FFT-layout grid into `out` (`dim` values per grid
/// point), interleaved.
pub fn interleave<T: Real>(layout: &GridLayout, dim: usize, grid: &[T], out: &mut [T], par: Par) {
    let [mx, my, mz] = layout.global;
    let rl = layout.real_len();
    let stride = layout.row_stride();
    assert_eq!(out.len(), mx * my * mz * dim, "interleaved grid length");
    let plane = |(z, o): (usize, &mut [T])| {
        for y in 0..my {
            for c in 0..dim {
                let src = &grid[c * rl + (z * my + y) * stride..][..mx];
                for (x, &v) in src.iter().enumerate() {
                    o[(y * mx + x) * dim + c] = v;
                }
            }
        }
    };
    match par {
        Par::Seq => out.chunks_mut(mx * my * dim).enumerate().for_each(plane),
        Par::Rayon(_) => out.par_chunks_mut(mx * my * dim).enumerate().for_each(plane),
    }
}

/// Interpolates `grid` at `targets`; writes `grid.dim()` values per target into `out` (input
/// order), overwriting; the hot loops run compiled for `isa`.
pub fn g2p<T: Real>(
    variant: G2pVariant,
    win: &GridWindow<T>,
    grid: &GatherGrid<T>,
    targets: Points<'_, T>,
    out: &mut [T],
    isa: Isa,
    par: Par,
) {
    drive(variant, win, targets, out, grid.dim, par, |order, range, writer, offset| {
        gather_chunk(isa, win, grid, targets, order, range, writer, offset)
    });
}

/// The potential and the field of one potential component: writes `[u, E_x, E_y, E_z]` per
/// target into `out`, with `E = -grad u = -sum_g grad W(x - g) v(g)`, the window's derivative
/// weights ([`GridWindow::footprint_with_derivative`]) in place of its weights along one axis
/// at a time. The rows are read once: per z layer, `sum_y w_y v` and `sum_y w_y' v` (two FMAs per
/// grid point, against one for the potential alone).
pub fn g2p_field<T: Real>(
    variant: G2pVariant,
    win: &GridWindow<T>,
    grid: &GatherGrid<T>,
    targets: Points<'_, T>,
    out: &mut [T],
    isa: Isa,
    par: Par,
) {
    assert_eq!(grid.dim, 1, "the field differentiates one potential component");
    drive(variant, win, targets, out, 4, par, |order, range, writer, offset| {
        gather_field_chunk(isa, win, grid, targets, order, range, writer, offset)
    });
}

/// Runs `gather(order, range, out, offset)` over chunks of targets, in input order or sorted by
/// far-field cell (`variant`), writing `dim` values per target.
fn drive<T: Real>(
    variant: G2pVariant,
    win: &GridWindow<T>,
    targets: Points<'_, T>,
    out: &mut [T],
    dim: usize,
    par: Par,
    gather: impl Fn(&[u32], (usize, usize), &DisjointSlice<T>, usize) + Sync,
) {
    assert_eq!(out.len(), targets.len() * dim, "G2P output length");
    let chunk = 256;
    match variant {
        G2pVariant::Base => {
            let work = |(i, u): (usize, &mut [T])| {
                let range = (i * chunk, i * chunk + u.len() / dim);
                gather(&[], range, &DisjointSlice::new(u), i * chunk);
            };
            match par {
                Par::Seq => out.chunks_mut(chunk * dim).enumerate().for_each(work),
                Par::Rayon(_) => out.par_chunks_mut(chunk * dim).enumerate().for_each(work),
            }
        }
        G2pVariant::TargetSorted => {
            let half = (win.p / 2).max(1);
            let ncell = win.layout.global.map(|m| m.div_ceil(half));
            let key = |j: usize| -> u32 {
                let x = targets.at(j);
                let c = [0, 1, 2].map(|d| {
                    let g = (x[d] * win.inv_h[d]).floor().max(0.0) as usize;
                    (g / half).min(ncell[d] - 1)
                });
                ((c[2] * ncell[1] + c[1]) * ncell[0] + c[0]) as u32
            };
            let keys: Vec<u32> = (0..targets.len()).map(key).collect();
            let b = counting_sort(&keys, ncell.iter().product(), par);
            let writer = DisjointSlice::new(out);
            let chunks = b.order.len().div_ceil(chunk);
            let work = |i: usize| {
                let range = (i * chunk, ((i + 1) * chunk).min(b.order.len()));
                gather(&b.order, range, &writer, 0);
            };
            match par {
                Par::Seq => (0..chunks).for_each(work),
                Par::Rayon(_) => (0..chunks).into_par_iter().for_each(work),
            }
        }
    }
}

isa_dispatch! {
    /// Gathers targets `order[k]` (or `k` when `order` is empty), `k` in `range`, into `out`
    /// (`dim` values at `(j - offset) * dim` for target `j`).
    fn gather_chunk<T: Real>(
        win: &GridWindow<T>,
        grid: &GatherGrid<T>,
        targets: Points<'_, T>,
        order: &[u32],
        range: (usize, usize),
        out: &DisjointSlice<T>,
        offset: usize,
    ) {
        macro_rules! fixed {
            ($($p:literal),*) => {
                match (win.p, grid.dim) {
                    $(($p, 1) => return gather_fixed::<T, $p, 1>(win, grid, targets, order, range, out, offset),
                      ($p, 3) => return gather_fixed::<T, $p, 3>(win, grid, targets, order, range, out, offset),
                      ($p, 4) => return gather_fixed::<T, $p, 4>(win, grid, targets, order, range, out, offset),)*
                    _ => {}
                }
            };
        }
        fixed!(4, 6, 8, 10, 12, 14, 16);
        let dim = grid.dim;
        let [_, my, mz] = win.layout.global;
        let p = win.p;
        for k in range.0..range.1 {
            let j = target_at(targets, order, k);
            let f = win.footprint(&targets.at(j));
            let (x0, len1) = win.x_run(f.anchor[0]);
            let mut tmp = [T::ZERO; 3 * MAX_P];
            {
                let (ta, tb) = tmp[..p * dim].split_at_mut(len1 * dim);
                for l in 0..p {
                    let iz = (f.anchor[2] + l) % mz;
                    for m in 0..p {
                        let iy = (f.anchor[1] + m) % my;
                        let wyz = f.w[2][l] * f.w[1][m];
                        let row = &grid.data[iz * grid.plane + iy * grid.row..];
                        for (t, &g) in ta.iter_mut().zip(&row[x0 * dim..(x0 + len1) * dim]) {
                            *t = g.mul_add(wyz, *t);
                        }
                        for (t, &g) in tb.iter_mut().zip(&row[..(p - len1) * dim]) {
                            *t = g.mul_add(wyz, *t);
                        }
                    }
                }
            }
            let at = (j - offset) * dim;
            // SAFETY: every target index is gathered by exactly one chunk, so the output ranges
            // of two chunks never overlap.
            let u = unsafe { out.range_mut(at, at + dim) };
            for (c, uc) in u.iter_mut().enumerate() {
                let mut acc = T::ZERO;
                for k in 0..p {
                    acc = tmp[k * dim + c].mul_add(f.w[0][k], acc);
                }
                *uc = acc;
            }
        }
    }
}

isa_dispatch! {
    /// As `gather_chunk` for [`g2p_field`]: `[u, E]` of one component.
    fn gather_field_chunk<T: Real>(
        win: &GridWindow<T>,
        grid: &GatherGrid<T>,
        targets: Points<'_, T>,
        order: &[u32],
        range: (usize, usize),
        out: &DisjointSlice<T>,
        offset: usize,
    ) {
        macro_rules! fixed {
            ($($p:literal),*) => {
                match win.p {
                    $($p => return gather_field_fixed::<T, $p>(win, grid, targets, order, range, out, offset),)*
                    _ => {}
                }
            };
        }
        fixed!(4, 6, 8, 10, 12, 14, 16);
        let [_, my, mz] = win.layout.global;
        let p = win.p;
        for k in range.0..range.1 {
            let j = target_at(targets, order, k);
            let (f, dw) = win.footprint_with_derivative(&targets.at(j));
            let (x0, len1) = win.x_run(f.anchor[0]);
            // per x index of the support: sum_yz w_y w_z v, sum_yz w_y' w_z v, sum_yz w_y w_z' v
            let (mut t0, mut ty, mut tz) = ([T::ZERO; MAX_P], [T::ZERO; MAX_P], [T::ZERO; MAX_P]);
            let (mut s0, mut s1) = ([T::ZERO; MAX_P], [T::ZERO; MAX_P]);
            for l in 0..p {
                let iz = (f.anchor[2] + l) % mz;
                s0[..p].fill(T::ZERO);
                s1[..p].fill(T::ZERO);
                {
                    // the periodic x run in two contiguous pieces, as in `gather_chunk`
                    let (s0a, s0b) = s0[..p].split_at_mut(len1);
                    let (s1a, s1b) = s1[..p].split_at_mut(len1);
                    for (m, (&wy, &dy)) in f.w[1][..p].iter().zip(&dw[1][..p]).enumerate() {
                        let iy = (f.anchor[1] + m) % my;
                        let row = &grid.data[iz * grid.plane + iy * grid.row..];
                        let (ra, rb) = (&row[x0..x0 + len1], &row[..p - len1]);
                        for ((a, b), &g) in s0a.iter_mut().zip(s1a.iter_mut()).zip(ra) {
                            *a = g.mul_add(wy, *a);
                            *b = g.mul_add(dy, *b);
                        }
                        for ((a, b), &g) in s0b.iter_mut().zip(s1b.iter_mut()).zip(rb) {
                            *a = g.mul_add(wy, *a);
                            *b = g.mul_add(dy, *b);
                        }
                    }
                }
                let (wz, dz) = (f.w[2][l], dw[2][l]);
                for q in 0..p {
                    t0[q] = s0[q].mul_add(wz, t0[q]);
                    ty[q] = s1[q].mul_add(wz, ty[q]);
                    tz[q] = s0[q].mul_add(dz, tz[q]);
                }
            }
            let mut acc = [T::ZERO; 4];
            for q in 0..p {
                let (wx, dx) = (f.w[0][q], dw[0][q]);
                acc[0] = t0[q].mul_add(wx, acc[0]);
                acc[1] = t0[q].mul_add(dx, acc[1]);
                acc[2] = ty[q].mul_add(wx, acc[2]);
                acc[3] = tz[q].mul_add(wx, acc[3]);
            }
            let at = (j - offset) * 4;
            // SAFETY: every target index is gathered by exactly one chunk, so the output ranges
            // of two chunks never overlap.
            let u = unsafe { out.range_mut(at, at + 4) };
            u[0] = acc[0];
            for d in 0..3 {
                u[1 + d] = -acc[1 + d];
            }
        }
    }
}

/// The target visited `k`-th: `order[k]`, or `k` when `order` is empty; with an order,
/// prefetches the target `PREFETCH_AHEAD` visits on (the sorted order reads the positions
/// scattered).
#[inline(always)]
fn target_at<T>(targets: Points<'_, T>, order: &[u32], k: usize) -> usize {
    if order.is_empty() {
        return k;
    }
    prefetch_ordered(targets.positions, order, k);
    if let Some(r) = targets.residuals {
        prefetch_ordered(r, order, k);
    }
    order[k] as usize
}

/// Row offsets of the `P` support indices from `anchor` along an axis of `m` points with
/// stride `stride` (the periodic wrap by a compare, not a division).
#[inline(always)]
fn wrapped_offsets<const P: usize>(anchor: usize, m: usize, stride: usize) -> [usize; P] {
    std::array::from_fn(|l| {
        let i = anchor + l;
        (if i >= m { i - m } else { i }) * stride
    })
}

/// The `P * D` values of one grid row of the support from x index `x0`: a plain slice copy
/// when the run does not wrap, else the two periodic pieces.
#[inline(always)]
fn support_row<T: Real, const P: usize, const D: usize>(
    data: &[T],
    base: usize,
    x0: usize,
    mx: usize,
    row: &mut [[T; D]; P],
) {
    if x0 + P <= mx {
        let src = &data[base + x0 * D..base + (x0 + P) * D];
        for (q, r) in row.iter_mut().enumerate() {
            r.copy_from_slice(&src[q * D..(q + 1) * D]);
        }
    } else {
        for (q, r) in row.iter_mut().enumerate() {
            let ix = if x0 + q >= mx { x0 + q - mx } else { x0 + q };
            r.copy_from_slice(&data[base + ix * D..base + (ix + 1) * D]);
        }
    }
}

/// `gather_chunk` for a support `P` and `D` components known at compile time: the same sums
/// in the same order (bitwise equal results), with the row and weight loops unrolled.
// indices over fixed-size arrays read several arrays at once and unroll
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
#[inline(always)]
fn gather_fixed<T: Real, const P: usize, const D: usize>(
    win: &GridWindow<T>,
    grid: &GatherGrid<T>,
    targets: Points<'_, T>,
    order: &[u32],
    range: (usize, usize),
    out: &DisjointSlice<T>,
    offset: usize,
) {
    let [mx, my, mz] = win.layout.global;
    for k in range.0..range.1 {
        let j = target_at(targets, order, k);
        let (anchor, w) = win.footprint_fixed::<P>(&targets.at(j));
        let zoff = wrapped_offsets::<P>(anchor[2], mz, grid.plane);
        let yoff = wrapped_offsets::<P>(anchor[1], my, grid.row);
        let mut tmp = [[T::ZERO; D]; P];
        let mut row = [[T::ZERO; D]; P];
        for l in 0..P {
            for m in 0..P {
                let wyz = w[2][l] * w[1][m];
                support_row::<T, P, D>(grid.data, zoff[l] + yoff[m], anchor[0], mx, &mut row);
                for q in 0..P {
                    for c in 0..D {
                        tmp[q][c] = row[q][c].mul_add(wyz, tmp[q][c]);
                    }
                }
            }
        }
        let at = (j - offset) * D;
        // SAFETY: every target index is gathered by exactly one chunk, so the output ranges of
        // two chunks never overlap.
        let u = unsafe { out.range_mut(at, at + D) };
        for (c, uc) in u.iter_mut().enumerate() {
            let mut acc = T::ZERO;
            for q in 0..P {
                acc = tmp[q][c].mul_add(w[0][q], acc);
            }
            *uc = acc;
        }
    }
}

/// `gather_field_chunk` for a support `P` known at compile time: the same sums in the same
/// order (bitwise equal results), with the row and weight loops unrolled.
// indices over fixed-size arrays read several arrays at once and unroll
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
#[inline(always)]
fn gather_field_fixed<T: Real, const P: usize>(
    win: &GridWindow<T>,
    grid: &GatherGrid<T>,
    targets: Points<'_, T>,
    order: &[u32],
    range: (usize, usize),
    out: &DisjointSlice<T>,
    offset: usize,
) {
    let [mx, my, mz] = win.layout.global;
    for k in range.0..range.1 {
        let j = target_at(targets, order, k);
        let (anchor, w, dw) = win.footprint_fixed_with_derivative::<P>(&targets.at(j));
        let zoff = wrapped_offsets::<P>(anchor[2], mz, grid.plane);
        let yoff = wrapped_offsets::<P>(anchor[1], my, grid.row);
        let (mut t0, mut ty, mut tz) = ([T::ZERO; P], [T::ZERO; P], [T::ZERO; P]);
        let mut row = [[T::ZERO; 1]; P];
        for l in 0..P {
            let (mut s0, mut s1) = ([T::ZERO; P], [T::ZERO; P]);
            for m in 0..P {
                support_row::<T, P, 1>(grid.data, zoff[l] + yoff[m], anchor[0], mx, &mut row);
                for q in 0..P {
                    s0[q] = row[q][0].mul_add(w[1][m], s0[q]);
                    s1[q] = row[q][0].mul_add(dw[1][m], s1[q]);
                }
            }
            for q in 0..P {
                t0[q] = s0[q].mul_add(w[2][l], t0[q]);
                ty[q] = s1[q].mul_add(w[2][l], ty[q]);
                tz[q] = s0[q].mul_add(dw[2][l], tz[q]);
            }
        }
        let mut acc = [T::ZERO; 4];
        for q in 0..P {
            acc[0] = t0[q].mul_add(w[0][q], acc[0]);
            acc[1] = t0[q].mul_add(dw[0][q], acc[1]);
            acc[2] = ty[q].mul_add(w[0][q], acc[2]);
            acc[3] = tz[q].mul_add(w[0][q], acc[3]);
        }
        let at = (j - offset) * 4;
        // SAFETY: every target index is gathered by exactly one chunk, so the output ranges of
        // two chunks never overlap.
        let u = unsafe { out.range_mut(at, at + 4) };
        u[0] = acc[0];
        for d in 0..3 {
            u[1 + d] = -acc[1 + d];
        }
    }
}
