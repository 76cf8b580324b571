//! P2G: spreading sources onto the periodic grid (Ewald paper eq. (6)),
//! `phi_c(g) = sum_j sum_p W(g - y_j + p) s_jc` for every grid component `c`.
//!
//! Two variants, which agree to rounding:
//! - [`P2gVariant::Scatter`], the baseline (the paper's P2G-base, Alg. 3): one task per source in
//!   input order, `P^3` atomic adds per component (compare-and-swap on the bit pattern).
//! - [`P2gVariant::Blocked`], the cell-blocked hybrid of the paper's Alg. 5 adapted to CPU
//!   threads: the grid is cut into slabs of `z`-planes, each owned by one task; sources are
//!   sorted by the plane of their anchor (counting sort), their footprints computed once, and a
//!   slab task adds every source whose support meets the slab, clipped to its planes. No atomics,
//!   no false sharing; each grid value receives its sources in plane order, so the result does not
//!   depend on the slab thickness or the thread count.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use parki_core::par::DisjointSlice;
use parki_core::{Kernel, Par, Real, Sources};
use parki_decomp::sort::counting_sort;
use rayon::prelude::{
    IndexedParallelIterator, IntoParallelIterator, ParallelIterator, ParallelSliceMut,
};

use crate::gridwin::{grid_density, Footprint, GridWindow};

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
}

/// A real type with an atomic add on its bit pattern.
pub trait AtomicReal: Real {
    /// `*slot += v` atomically.
    ///
    /// # Safety
    /// `slot` must be valid, aligned, and only accessed atomically while others may add to it.
    unsafe fn atomic_add(slot: *mut Self, v: Self);
}

impl AtomicReal for f64 {
    unsafe fn atomic_add(slot: *mut f64, v: f64) {
        // SAFETY: f64 and AtomicU64 have the same size and alignment; the caller guarantees
        // exclusive atomic access.
        let a = unsafe { AtomicU64::from_ptr(slot as *mut u64) };
        let mut cur = a.load(Ordering::Relaxed);
        loop {
            let new = (f64::from_bits(cur) + v).to_bits();
            match a.compare_exchange_weak(cur, new, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => break,
                Err(x) => cur = x,
            }
        }
    }
}

impl AtomicReal for f32 {
    unsafe fn atomic_add(slot: *mut f32, v: f32) {
        // SAFETY: as for f64.
        let a = unsafe { AtomicU32::from_ptr(slot as *mut u32) };
        let mut cur = a.load(Ordering::Relaxed);
        loop {
            let new = (f32::from_bits(cur) + v).to_bits();
            match a.compare_exchange_weak(cur, new, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => break,
                Err(x) => cur = x,
            }
        }
    }
}

/// Spreads `sources` onto the first `kernel.grid_components()` components of `grid`
/// (components back to back, each `layout.real_len()` long), overwriting them.
pub fn p2g<T: AtomicReal>(
    variant: P2gVariant,
    kernel: Kernel,
    win: &GridWindow<T>,
    sources: &Sources<T>,
    grid: &mut [T],
    par: Par,
) {
    let ncomp = kernel.grid_components();
    let rl = win.layout.real_len();
    assert!(grid.len() >= ncomp * rl, "grid buffer too short");
    let grid = &mut grid[..ncomp * rl];
    match par {
        Par::Seq => grid.iter_mut().for_each(|v| *v = T::ZERO),
        Par::Rayon(_) => grid
            .par_chunks_mut(1 << 16)
            .for_each(|c| c.iter_mut().for_each(|v| *v = T::ZERO)),
    }
    match variant {
        P2gVariant::Scatter => scatter(kernel, win, sources, grid, par),
        P2gVariant::Blocked => blocked(kernel, win, sources, grid, par),
    }
}

fn scatter<T: AtomicReal>(
    kernel: Kernel,
    win: &GridWindow<T>,
    sources: &Sources<T>,
    grid: &mut [T],
    par: Par,
) {
    let ncomp = kernel.grid_components();
    let layout = win.layout;
    let rl = layout.real_len();
    let [mx, my, mz] = layout.global;
    let p = win.p;
    let base = grid.as_mut_ptr() as usize;
    let work = |j: usize| {
        let f = win.footprint(&sources.positions[j]);
        let mut s = [T::ZERO; 9];
        grid_density(kernel, sources, j, &mut s);
        let (x0, len1) = win.x_run(f.anchor[0]);
        for l in 0..p {
            let iz = (f.anchor[2] + l) % mz;
            for m in 0..p {
                let iy = (f.anchor[1] + m) % my;
                let wyz = f.w[2][l] * f.w[1][m];
                let row = layout.real_index(0, iy, iz);
                for (c, &sc) in s[..ncomp].iter().enumerate() {
                    let v = wyz * sc;
                    let ptr = (base as *mut T).wrapping_add(c * rl + row);
                    for k in 0..p {
                        let ix = if k < len1 { x0 + k } else { k - len1 };
                        debug_assert!(ix < mx);
                        // SAFETY: ix < Mx, row + ix lies in component c; all concurrent access to
                        // the grid is through atomic_add.
                        unsafe { T::atomic_add(ptr.add(ix), f.w[0][k] * v) };
                    }
                }
            }
        }
    };
    match par {
        Par::Seq => (0..sources.len()).for_each(work),
        Par::Rayon(_) => (0..sources.len())
            .into_par_iter()
            .with_min_len(256)
            .for_each(work),
    }
}

/// Footprints and densities of the sources, sorted by anchor plane.
struct SortedFootprints<T> {
    offsets: Vec<usize>,
    foot: Vec<Footprint<T>>,
    dens: Vec<[T; 9]>,
}

fn sort_by_plane<T: Real>(
    kernel: Kernel,
    win: &GridWindow<T>,
    sources: &Sources<T>,
    par: Par,
) -> SortedFootprints<T> {
    let n = sources.len();
    let mz = win.layout.global[2];
    let foot_of = |j: usize| win.footprint(&sources.positions[j]);
    let feet: Vec<Footprint<T>> = match par {
        Par::Seq => (0..n).map(foot_of).collect(),
        Par::Rayon(_) => (0..n)
            .into_par_iter()
            .with_min_len(1024)
            .map(foot_of)
            .collect(),
    };
    let keys: Vec<u32> = feet.iter().map(|f| f.anchor[2] as u32).collect();
    let b = counting_sort(&keys, mz, par);
    let gather = |k: usize| {
        let j = b.order[k] as usize;
        let mut s = [T::ZERO; 9];
        grid_density(kernel, sources, j, &mut s);
        (feet[j], s)
    };
    let pairs: Vec<(Footprint<T>, [T; 9])> = match par {
        Par::Seq => (0..n).map(gather).collect(),
        Par::Rayon(_) => (0..n)
            .into_par_iter()
            .with_min_len(1024)
            .map(gather)
            .collect(),
    };
    let (foot, dens) = pairs.into_iter().unzip();
    SortedFootprints {
        offsets: b.offsets,
        foot,
        dens,
    }
}

fn blocked<T: Real>(
    kernel: Kernel,
    win: &GridWindow<T>,
    sources: &Sources<T>,
    grid: &mut [T],
    par: Par,
) {
    let ncomp = kernel.grid_components();
    let layout = win.layout;
    let rl = layout.real_len();
    let [_, my, mz] = layout.global;
    let p = win.p;
    let plane = my * layout.row_stride();
    let sorted = sort_by_plane(kernel, win, sources, par);
    // slabs of B planes: enough slabs to balance the threads
    let slab = (mz / (4 * par.threads())).max(p / 2).max(1).min(mz);
    let nslabs = mz.div_ceil(slab);
    let writer = DisjointSlice::new(grid);
    let work = |b: usize| {
        let (z0, z1) = (b * slab, ((b + 1) * slab).min(mz));
        // SAFETY: slab b owns planes z0..z1 of every component; slabs are disjoint.
        let mut comps: [&mut [T]; 9] = Default::default();
        for (c, slot) in comps.iter_mut().enumerate().take(ncomp) {
            *slot = unsafe { writer.range_mut(c * rl + z0 * plane, c * rl + z1 * plane) };
        }
        // anchor planes whose support meets z0..z1: z0-P+1 ..= z1-1 (mod Mz), each visited once
        let visit = (z1 - z0 + p - 1).min(mz);
        let first = (z0 + mz * (p / mz + 1) - (p - 1)) % mz;
        for off in 0..visit {
            let az = (first + off) % mz;
            for k in sorted.offsets[az]..sorted.offsets[az + 1] {
                let f = &sorted.foot[k];
                let s = &sorted.dens[k];
                add_source(win, f, &s[..ncomp], z0, z1, &mut comps[..ncomp], plane);
            }
        }
    };
    match par {
        Par::Seq => (0..nslabs).for_each(work),
        Par::Rayon(_) => (0..nslabs).into_par_iter().for_each(work),
    }
}

/// Adds one source's footprint to the planes `z0..z1` held in `comps` (plane `z0` first).
#[inline(always)]
fn add_source<T: Real>(
    win: &GridWindow<T>,
    f: &Footprint<T>,
    s: &[T],
    z0: usize,
    z1: usize,
    comps: &mut [&mut [T]],
    plane: usize,
) {
    let layout = &win.layout;
    let [_, my, mz] = layout.global;
    let p = win.p;
    let stride = layout.row_stride();
    let (x0, len1) = win.x_run(f.anchor[0]);
    let (wa, wb) = f.w[0][..p].split_at(len1);
    for l in 0..p {
        let iz = (f.anchor[2] + l) % mz;
        if iz < z0 || iz >= z1 {
            continue;
        }
        let zoff = (iz - z0) * plane;
        for m in 0..p {
            let iy = (f.anchor[1] + m) % my;
            let wyz = f.w[2][l] * f.w[1][m];
            let row = zoff + iy * stride;
            for (c, &sc) in s.iter().enumerate() {
                let v = wyz * sc;
                let g = &mut comps[c][row..row + stride];
                for (gi, &wi) in g[x0..x0 + len1].iter_mut().zip(wa) {
                    *gi = wi.mul_add(v, *gi);
                }
                for (gi, &wi) in g[..p - len1].iter_mut().zip(wb) {
                    *gi = wi.mul_add(v, *gi);
                }
            }
        }
    }
}
