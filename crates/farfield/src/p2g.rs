//! P2G: spreading sources onto the periodic grid (Ewald paper eq. (6)),
//! `phi_c(g) = sum_j sum_p W(g - y_j + p) s_jc` for every grid component `c`.
//!
//! Two variants, which agree to rounding:
//! - [`P2gVariant::Scatter`], the baseline (the paper's P2G-base, Alg. 3): one task per source in
//!   input order, `P^3` atomic adds per component (compare-and-swap on the bit pattern) straight
//!   into the FFT layout.
//! - [`P2gVariant::Blocked`], the cell-blocked hybrid of the paper's Alg. 5 adapted to CPU
//!   threads. Sources are sorted by far-field cell (anchor plane, then `P/2`-wide cells in y and
//!   x; counting sort) and their footprints computed once. The grid is cut into slabs of
//!   `z`-planes, each owned by one task: the task accumulates every source whose support meets
//!   its slab into a slab-local buffer with the components interleaved (`[z][y][x][c]`, so each
//!   grid row of a source is one contiguous run of `P * ncomp` FMAs), then copies its planes into
//!   the FFT layout. No atomics, no false sharing, no zeroing pass; every grid value receives its
//!   sources in sort order, so the result does not depend on the slab thickness or thread count.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use parki_core::isa::Isa;
use parki_core::memory::{ahead, touched_vec};
use parki_core::par::DisjointSlice;
use parki_core::{isa_dispatch, Kernel, Par, Real, SourceSet};
use parki_decomp::sort::counting_sort;
use rayon::prelude::{IndexedParallelIterator, IntoParallelIterator, ParallelIterator, ParallelSliceMut};

use crate::gridwin::{grid_density, GridWindow};

/// Which P2G algorithm to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum P2gVariant {
    /// Atomic scatter in input order (baseline).
    Scatter,
    /// Slab-blocked, sorted sources, no atomics (default).
    #[default]
    Blocked,
}

impl P2gVariant {
    /// Name in run.toml and reports.
    pub fn name(self) -> &'static str {
        match self {
            P2gVariant::Scatter => "scatter",
            P2gVariant::Blocked => "blocked",
        }
    }

    /// Parses a run.toml name: `"blocked"` or `"scatter"` (the inverse of [`P2gVariant::name`]).
    pub fn parse(s: &str) -> Option<Self> {
        [P2gVariant::Blocked, P2gVariant::Scatter].into_iter().find(|v| v.name() == s)
    }
}

/// A real type with an atomic add on its bit pattern.
pub trait AtomicReal: Real {
    /// `*slot += v` atomically.
    ///
    /// # Safety
    /// `slot` must be valid, aligned, and only accessed atomically while others may add to it.
    unsafe fn atomic_add(slot: *mut Self, v: Self);
}

macro_rules! impl_atomic_real {
    ($t:ty, $atomic:ty, $bits:ty) => {
        impl AtomicReal for $t {
            unsafe fn atomic_add(slot: *mut $t, v: $t) {
                // SAFETY: the float and its atomic integer have the same size and alignment; the
                // caller guarantees that all concurrent access is atomic.
                let a = unsafe { <$atomic>::from_ptr(slot as *mut $bits) };
                let mut cur = a.load(Ordering::Relaxed);
                loop {
                    let new = (<$t>::from_bits(cur) + v).to_bits();
                    match a.compare_exchange_weak(cur, new, Ordering::Relaxed, Ordering::Relaxed) {
                        Ok(_) => break,
                        Err(x) => cur = x,
                    }
                }
            }
        }
    };
}

impl_atomic_real!(f64, AtomicU64, u64);
impl_atomic_real!(f32, AtomicU32, u32);

/// Spreads `sources` onto the first `kernel.grid_components()` components of `grid`
/// (components back to back, each `layout.real_len()` long), overwriting them; the hot loops
/// run compiled for `isa`.
#[allow(clippy::too_many_arguments)]
pub fn p2g<T: AtomicReal, S: SourceSet<T>>(
    variant: P2gVariant,
    kernel: Kernel,
    win: &GridWindow<T>,
    sources: &S,
    grid: &mut [T],
    scratch: &mut P2gScratch<T>,
    isa: Isa,
    par: Par,
) {
    let ncomp = kernel.grid_components();
    let rl = win.layout.real_len();
    assert!(grid.len() >= ncomp * rl, "grid buffer too short");
    let grid = &mut grid[..ncomp * rl];
    match variant {
        P2gVariant::Scatter => {
            match par {
                Par::Seq => grid.iter_mut().for_each(|v| *v = T::ZERO),
                Par::Rayon(_) => grid.par_chunks_mut(1 << 16).for_each(|c| c.iter_mut().for_each(|v| *v = T::ZERO)),
            }
            let base = SharedGrid(grid.as_mut_ptr());
            let chunk = 256;
            let work = |c: usize| {
                scatter_chunk(isa, kernel, win, sources, c * chunk, ((c + 1) * chunk).min(sources.count()), &base)
            };
            let chunks = sources.count().div_ceil(chunk);
            match par {
                Par::Seq => (0..chunks).for_each(work),
                Par::Rayon(_) => (0..chunks).into_par_iter().for_each(work),
            }
        }
        P2gVariant::Blocked => blocked(kernel, win, sources, grid, scratch, isa, par),
    }
}

/// The grid shared by the atomic scatter.
struct SharedGrid<T>(*mut T);
// SAFETY: all concurrent access through the pointer is by `atomic_add`.
unsafe impl<T> Sync for SharedGrid<T> {}

isa_dispatch! {
    fn scatter_chunk<T: AtomicReal, S: SourceSet<T>>(
        kernel: Kernel,
        win: &GridWindow<T>,
        sources: &S,
        start: usize,
        end: usize,
        grid: &SharedGrid<T>,
    ) {
        let ncomp = kernel.grid_components();
        let layout = win.layout;
        let rl = layout.real_len();
        let [_, my, mz] = layout.global;
        let p = win.p;
        let mut packed = [T::ZERO; 9];
        for j in start..end {
            let f = win.footprint(&sources.position_f64(j));
            let mut s = [T::ZERO; 9];
            sources.density(kernel, j, &mut packed);
            grid_density(kernel, &packed, &mut s);
            let (x0, len1) = win.x_run(f.anchor[0]);
            for l in 0..p {
                let iz = (f.anchor[2] + l) % mz;
                for m in 0..p {
                    let iy = (f.anchor[1] + m) % my;
                    let wyz = f.w[2][l] * f.w[1][m];
                    let row = layout.real_index(0, iy, iz);
                    for (c, &sc) in s[..ncomp].iter().enumerate() {
                        let v = wyz * sc;
                        let ptr = grid.0.wrapping_add(c * rl + row);
                        for k in 0..p {
                            let ix = if k < len1 { x0 + k } else { k - len1 };
                            // SAFETY: ix < Mx, so row + ix lies in component c; all concurrent
                            // access to the grid is through atomic_add.
                            unsafe { T::atomic_add(ptr.add(ix), f.w[0][k] * v) };
                        }
                    }
                }
            }
        }
    }
}

/// Scratch of the blocked P2G, kept by the caller across evaluations: the sources sorted by
/// far-field cell with their anchors, window weights (`3P` per source) and grid densities, and
/// one slab buffer per thread.
#[derive(Debug, Default)]
pub struct P2gScratch<T> {
    keys: Vec<u32>,
    plane_start: Vec<usize>,
    anchors: Vec<[u32; 3]>,
    weights: Vec<T>,
    dens: Vec<T>,
    slabs: parki_core::par::ThreadScratch<T>,
}

impl<T: Real> P2gScratch<T> {
    /// Scratch for `sources` sources of `kernel` on `win`'s grid and `threads` workers, with all
    /// memory allocated and touched now (so that evaluations do not fault pages in).
    pub fn planned(kernel: Kernel, win: &GridWindow<T>, sources: usize, threads: usize) -> Self {
        let touched = |n: usize| touched_vec(n, T::ZERO);
        let p = win.p;
        let [mx, my, _] = win.layout.global;
        let ncomp = kernel.grid_components();
        let s = Self {
            keys: vec![0; sources],
            plane_start: Vec::with_capacity(win.layout.global[2] + 1),
            anchors: vec![[0; 3]; sources],
            weights: touched(3 * p * sources),
            dens: touched(ncomp * sources),
            slabs: parki_core::par::ThreadScratch::new(threads),
        };
        for t in 0..threads.max(1) {
            *s.slabs.slot(t) = touched((p / 2).max(1) * my * mx * ncomp);
        }
        s
    }

    /// Scratch for `threads` workers, allocated on first use.
    pub fn new(threads: usize) -> Self {
        Self {
            keys: Vec::new(),
            plane_start: Vec::new(),
            anchors: Vec::new(),
            weights: Vec::new(),
            dens: Vec::new(),
            slabs: parki_core::par::ThreadScratch::new(threads),
        }
    }
}

isa_dispatch! {
    /// Anchors, weights and densities of the sources `order[start..end]`, written to the
    /// sorted positions `start..end` of the output slices (which begin at `start`).
    fn sorted_footprints<T: Real, S: SourceSet<T>>(
        kernel: Kernel,
        win: &GridWindow<T>,
        sources: &S,
        order: &[u32],
        start: usize,
        anchors: &mut [[u32; 3]],
        weights: &mut [T],
        dens: &mut [T],
    ) {
        let p = win.p;
        let ncomp = kernel.grid_components();
        let mut s = [T::ZERO; 9];
        let mut packed = [T::ZERO; 9];
        // the sorted order reads the sources scattered: keep PREFETCH_AHEAD of them in flight
        let fetch_ahead = |i: usize| {
            if let Some(j) = ahead(order, i) {
                sources.prefetch(kernel, j);
            }
        };
        macro_rules! fixed {
            ($($p:literal),*) => {
                match p {
                    $($p => {
                        for (k, a) in anchors.iter_mut().enumerate() {
                            fetch_ahead(start + k);
                            let j = order[start + k] as usize;
                            let (anchor, w) = win.footprint_fixed::<$p>(&sources.position_f64(j));
                            *a = anchor.map(|v| v as u32);
                            weights[3 * $p * k..3 * $p * (k + 1)].copy_from_slice(w.as_flattened());
                            sources.density(kernel, j, &mut packed);
                            grid_density(kernel, &packed, &mut s);
                            dens[k * ncomp..(k + 1) * ncomp].copy_from_slice(&s[..ncomp]);
                        }
                        return;
                    })*
                    _ => {}
                }
            };
        }
        fixed!(4, 6, 8, 10, 12, 14, 16);
        for (k, a) in anchors.iter_mut().enumerate() {
            fetch_ahead(start + k);
            let j = order[start + k] as usize;
            let f = win.footprint(&sources.position_f64(j));
            *a = f.anchor.map(|v| v as u32);
            for d in 0..3 {
                weights[(3 * k + d) * p..(3 * k + d + 1) * p].copy_from_slice(&f.w[d][..p]);
            }
            sources.density(kernel, j, &mut packed);
            grid_density(kernel, &packed, &mut s);
            dens[k * ncomp..(k + 1) * ncomp].copy_from_slice(&s[..ncomp]);
        }
    }
}

fn sort_sources<T: Real, S: SourceSet<T>>(
    kernel: Kernel,
    win: &GridWindow<T>,
    sources: &S,
    scratch: &mut P2gScratch<T>,
    isa: Isa,
    par: Par,
) {
    let n = sources.count();
    let [mx, my, mz] = win.layout.global;
    let p = win.p;
    let ncomp = kernel.grid_components();
    let half = (p / 2).max(1);
    let (ncx, ncy) = (mx.div_ceil(half), my.div_ceil(half));
    // the anchors of the positions the footprints are placed at (with their residuals)
    let key = |j: usize| -> u32 {
        let a = win.anchor(&sources.position_f64(j));
        ((a[2] * ncy + a[1] / half) * ncx + a[0] / half) as u32
    };
    scratch.keys.clear();
    match par {
        Par::Seq => scratch.keys.extend((0..n).map(key)),
        Par::Rayon(_) => {
            use rayon::prelude::{IntoParallelIterator, ParallelExtend};
            scratch.keys.par_extend((0..n).into_par_iter().map(key))
        }
    }
    let b = counting_sort(&scratch.keys, mz * ncy * ncx, par);
    scratch.plane_start.clear();
    scratch.plane_start.extend((0..=mz).map(|z| b.offsets[z * ncy * ncx]));
    scratch.anchors.resize(n, [0; 3]);
    scratch.weights.resize(3 * p * n, T::ZERO);
    scratch.dens.resize(ncomp * n, T::ZERO);
    let chunk = 1024;
    let (anchors, weights, dens) = (&mut scratch.anchors, &mut scratch.weights, &mut scratch.dens);
    match par {
        Par::Seq => sorted_footprints(isa, kernel, win, sources, &b.order, 0, anchors, weights, dens),
        Par::Rayon(_) => anchors
            .par_chunks_mut(chunk)
            .zip(weights.par_chunks_mut(chunk * 3 * p))
            .zip(dens.par_chunks_mut(chunk * ncomp))
            .enumerate()
            .for_each(|(i, ((a, w), d))| sorted_footprints(isa, kernel, win, sources, &b.order, i * chunk, a, w, d)),
    }
}

fn blocked<T: Real, S: SourceSet<T>>(
    kernel: Kernel,
    win: &GridWindow<T>,
    sources: &S,
    grid: &mut [T],
    scratch: &mut P2gScratch<T>,
    isa: Isa,
    par: Par,
) {
    let ncomp = kernel.grid_components();
    let [mx, my, mz] = win.layout.global;
    let p = win.p;
    sort_sources(kernel, win, sources, scratch, isa, par);
    // slabs of P/2 planes: the working set of a band of sources stays in cache
    let slab = (p / 2).clamp(1, mz);
    let nslabs = mz.div_ceil(slab);
    let writer = DisjointSlice::new(grid);
    let sorted = &*scratch;
    let work = |b: usize| {
        let (z0, z1) = (b * slab, ((b + 1) * slab).min(mz));
        let mut local = sorted.slabs.slot(rayon::current_thread_index().unwrap_or(0));
        local.clear();
        local.resize((z1 - z0) * my * mx * ncomp, T::ZERO);
        spread_slab(isa, win, sorted, ncomp, z0, z1, &mut local);
        // SAFETY: slab b owns planes z0..z1 of every component; slabs are disjoint.
        unsafe { copy_out(win, ncomp, z0, z1, &local, &writer) };
    };
    match par {
        Par::Seq => (0..nslabs).for_each(work),
        Par::Rayon(_) => (0..nslabs).into_par_iter().for_each(work),
    }
}

isa_dispatch! {
    /// Adds every source whose support meets planes `z0..z1` into `local`
    /// (`[z - z0][y][x][c]`).
    fn spread_slab<T: Real>(
        win: &GridWindow<T>,
        sorted: &P2gScratch<T>,
        ncomp: usize,
        z0: usize,
        z1: usize,
        local: &mut [T],
    ) {
        macro_rules! fixed {
            ($($p:literal),*) => {
                match (win.p, ncomp) {
                    $(($p, 1) => return spread_slab_fixed::<T, $p, 1>(win, sorted, z0, z1, local),
                      ($p, 3) => return spread_slab_fixed::<T, $p, 3>(win, sorted, z0, z1, local),)*
                    _ => {}
                }
            };
        }
        let [mx, my, mz] = win.layout.global;
        let p = win.p;
        fixed!(4, 6, 8, 10, 12, 14, 16);
        let row_len = mx * ncomp;
        // anchor planes whose support meets z0..z1: z0-P+1 ..= z1-1 (mod Mz), each visited once
        let visit = (z1 - z0 + p - 1).min(mz);
        let first = (z0 + mz * (p / mz + 1) - (p - 1)) % mz;
        // B0 = w_x (x) s: the source's row, components interleaved, the same for every (z, y)
        let mut b0 = [T::ZERO; 9 * crate::gridwin::MAX_P];
        for off in 0..visit {
            let az = (first + off) % mz;
            for k in sorted.plane_start[az]..sorted.plane_start[az + 1] {
                let a = sorted.anchors[k].map(|v| v as usize);
                let w = &sorted.weights[3 * p * k..3 * p * (k + 1)];
                let (wx, wy, wz) = (&w[..p], &w[p..2 * p], &w[2 * p..]);
                let s = &sorted.dens[ncomp * k..ncomp * (k + 1)];
                for kx in 0..p {
                    for c in 0..ncomp {
                        b0[kx * ncomp + c] = wx[kx] * s[c];
                    }
                }
                let (x0, len1) = win.x_run(a[0]);
                let (ba, bb) = b0[..p * ncomp].split_at(len1 * ncomp);
                for (l, &wzl) in wz.iter().enumerate() {
                    let iz = wrap(a[2] + l, mz);
                    if iz < z0 || iz >= z1 {
                        continue;
                    }
                    for (m, &wym) in wy.iter().enumerate() {
                        let iy = wrap(a[1] + m, my);
                        let wyz = wzl * wym;
                        let row = ((iz - z0) * my + iy) * row_len;
                        let ga = &mut local[row + x0 * ncomp..row + (x0 + len1) * ncomp];
                        for (g, &b) in ga.iter_mut().zip(ba) {
                            *g = b.mul_add(wyz, *g);
                        }
                        let gb = &mut local[row..row + (p - len1) * ncomp];
                        for (g, &b) in gb.iter_mut().zip(bb) {
                            *g = b.mul_add(wyz, *g);
                        }
                    }
                }
            }
        }
    }
}

/// `i mod m` for `i < 2 m` (an anchor plus a support index) by a compare, not a division.
#[inline(always)]
fn wrap(i: usize, m: usize) -> usize {
    debug_assert!(i < 2 * m);
    if i >= m {
        i - m
    } else {
        i
    }
}

/// `spread_slab` for a support `P` and `D` grid components known at compile time: the same
/// sums in the same order (bitwise equal results), the row loops unrolled.
// indices over fixed-size arrays read several arrays at once and unroll
#[allow(clippy::needless_range_loop)]
#[inline(always)]
fn spread_slab_fixed<T: Real, const P: usize, const D: usize>(
    win: &GridWindow<T>,
    sorted: &P2gScratch<T>,
    z0: usize,
    z1: usize,
    local: &mut [T],
) {
    let [mx, my, mz] = win.layout.global;
    let row_len = mx * D;
    let visit = (z1 - z0 + P - 1).min(mz);
    let first = (z0 + mz * (P / mz + 1) - (P - 1)) % mz;
    for off in 0..visit {
        let az = wrap(first + off, mz);
        for k in sorted.plane_start[az]..sorted.plane_start[az + 1] {
            let a = sorted.anchors[k].map(|v| v as usize);
            let wk = &sorted.weights[3 * P * k..3 * P * (k + 1)];
            let wx: [T; P] = std::array::from_fn(|q| wk[q]);
            let wy: [T; P] = std::array::from_fn(|q| wk[P + q]);
            let wz: [T; P] = std::array::from_fn(|q| wk[2 * P + q]);
            let sk = &sorted.dens[D * k..D * (k + 1)];
            let s: [T; D] = std::array::from_fn(|c| sk[c]);
            let b0: [[T; D]; P] = std::array::from_fn(|q| std::array::from_fn(|c| wx[q] * s[c]));
            let x0 = a[0];
            let contiguous = x0 + P <= mx;
            for l in 0..P {
                let iz = wrap(a[2] + l, mz);
                if iz < z0 || iz >= z1 {
                    continue;
                }
                for m in 0..P {
                    let iy = wrap(a[1] + m, my);
                    let wyz = wz[l] * wy[m];
                    let row = ((iz - z0) * my + iy) * row_len;
                    if contiguous {
                        let g = &mut local[row + x0 * D..row + (x0 + P) * D];
                        for q in 0..P {
                            for c in 0..D {
                                g[q * D + c] = b0[q][c].mul_add(wyz, g[q * D + c]);
                            }
                        }
                    } else {
                        for q in 0..P {
                            let ix = wrap(x0 + q, mx);
                            for c in 0..D {
                                let g = &mut local[row + ix * D + c];
                                *g = b0[q][c].mul_add(wyz, *g);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Copies a slab-local interleaved buffer into the FFT layout.
///
/// # Safety
/// Planes `z0..z1` of every component must be owned by the caller.
unsafe fn copy_out<T: Real>(
    win: &GridWindow<T>,
    ncomp: usize,
    z0: usize,
    z1: usize,
    local: &[T],
    writer: &DisjointSlice<T>,
) {
    let layout = &win.layout;
    let [mx, my, _] = layout.global;
    let rl = layout.real_len();
    let plane = my * layout.row_stride();
    for c in 0..ncomp {
        // SAFETY: forwarded to the caller.
        let out = unsafe { writer.range_mut(c * rl + z0 * plane, c * rl + z1 * plane) };
        for z in z0..z1 {
            for y in 0..my {
                let src = ((z - z0) * my + y) * mx * ncomp;
                let dst = (z - z0) * plane + y * layout.row_stride();
                for x in 0..mx {
                    out[dst + x] = local[src + x * ncomp + c];
                }
            }
        }
    }
}
