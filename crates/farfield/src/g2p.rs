//! G2P: interpolating the far-field grid at the targets (Ewald paper eq. (8)),
//! `u_c(x) = sum_g W(x - g) v_c(g)` (the `1/V` of the paper's `h^3` and the FFT normalisation are
//! folded into CNV).
//!
//! Two variants, bitwise identical per target:
//! - [`G2pVariant::Base`]: targets in input order.
//! - [`G2pVariant::TargetSorted`]: targets sorted by far-field cell (`P/2` grid points wide, the
//!   paper's C^F) so that neighbouring tasks gather overlapping grid regions; results are
//!   scattered back to input order.
//!
//! The gather accumulates whole x-runs (`tmp[k] += w_y w_z v[row + k]`) and dots with the x
//! weights at the end, so the inner loop vectorises without reordering a reduction.

use parki_core::par::DisjointSlice;
use parki_core::{Par, Real};
use parki_decomp::sort::counting_sort;
use rayon::prelude::{IndexedParallelIterator, ParallelIterator, ParallelSliceMut};

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
}

/// Interpolates the first `dim` components of `grid` at `targets`; writes `dim` values per
/// target into `out` (input order), overwriting.
pub fn g2p<T: Real>(
    variant: G2pVariant,
    dim: usize,
    win: &GridWindow<T>,
    grid: &[T],
    targets: &[[T; 3]],
    out: &mut [T],
    par: Par,
) {
    assert_eq!(out.len(), targets.len() * dim, "G2P output length");
    assert!(
        grid.len() >= dim * win.layout.real_len(),
        "grid buffer too short"
    );
    match variant {
        G2pVariant::Base => {
            let one = |(u, x): (&mut [T], &[T; 3])| gather(win, grid, dim, x, u);
            match par {
                Par::Seq => out.chunks_mut(dim).zip(targets).for_each(one),
                Par::Rayon(_) => {
                    let chunk = 64;
                    out.par_chunks_mut(dim * chunk)
                        .enumerate()
                        .for_each(|(i, us)| {
                            for (k, u) in us.chunks_mut(dim).enumerate() {
                                gather(win, grid, dim, &targets[i * chunk + k], u);
                            }
                        })
                }
            }
        }
        G2pVariant::TargetSorted => {
            let half = (win.p / 2).max(1);
            let ncell = win.layout.global.map(|m| m.div_ceil(half));
            let key = |x: &[T; 3]| -> u32 {
                let c = [0, 1, 2].map(|d| {
                    let g = (x[d].to_f64() * win.inv_h[d]).floor().max(0.0) as usize;
                    (g / half).min(ncell[d] - 1)
                });
                ((c[2] * ncell[1] + c[1]) * ncell[0] + c[0]) as u32
            };
            let keys: Vec<u32> = targets.iter().map(key).collect();
            let b = counting_sort(&keys, ncell.iter().product(), par);
            let writer = DisjointSlice::new(out);
            let chunk = 64;
            let run = |(ci, ks): (usize, &[u32])| {
                let _ = ci;
                for &j in ks {
                    let j = j as usize;
                    // SAFETY: each target index appears once in the sort order, so its output
                    // range is written by one task only.
                    let u = unsafe { writer.range_mut(j * dim, (j + 1) * dim) };
                    gather(win, grid, dim, &targets[j], u);
                }
            };
            match par {
                Par::Seq => b.order.chunks(chunk).enumerate().for_each(run),
                Par::Rayon(_) => {
                    use rayon::prelude::ParallelSlice;
                    b.order.par_chunks(chunk).enumerate().for_each(run)
                }
            }
        }
    }
}

#[inline(always)]
fn gather<T: Real>(win: &GridWindow<T>, grid: &[T], dim: usize, x: &[T; 3], u: &mut [T]) {
    let layout = &win.layout;
    let [_, my, mz] = layout.global;
    let rl = layout.real_len();
    let p = win.p;
    let f = win.footprint(x);
    let (x0, len1) = win.x_run(f.anchor[0]);
    let mut tmp = [[T::ZERO; MAX_P]; 3];
    for l in 0..p {
        let iz = (f.anchor[2] + l) % mz;
        for m in 0..p {
            let iy = (f.anchor[1] + m) % my;
            let wyz = f.w[2][l] * f.w[1][m];
            let row = layout.real_index(0, iy, iz);
            for (c, t) in tmp.iter_mut().enumerate().take(dim) {
                let g = &grid[c * rl + row..c * rl + row + layout.row_stride()];
                let (ta, tb) = t[..p].split_at_mut(len1);
                for (ti, &gi) in ta.iter_mut().zip(&g[x0..x0 + len1]) {
                    *ti = gi.mul_add(wyz, *ti);
                }
                for (ti, &gi) in tb.iter_mut().zip(&g[..p - len1]) {
                    *ti = gi.mul_add(wyz, *ti);
                }
            }
        }
    }
    for (c, t) in tmp.iter().enumerate().take(dim) {
        let mut acc = T::ZERO;
        for k in 0..p {
            acc = t[k].mul_add(f.w[0][k], acc);
        }
        u[c] = acc;
    }
}
