//! Who owns what: grid layouts and topologies, particle ownership and redistribution.
//!
//! A [`GridLayout`] describes a global periodic grid of `M = [Mx, My, Mz]` points and the block of
//! it this process owns, in the memory layout of an in-place real-to-complex FFT:
//! real data `[z][y][x]` with `x` fastest and each x-row padded to `2 (Mx/2 + 1)` reals, so that
//! the half spectrum `[z][y][kx]`, `kx = 0..Mx/2`, overwrites it. On one process the owned block
//! is the whole grid; [`topology`] splits grids over slab and pencil process grids.
//!
//! [`sort`] assigns particles to bins (cells, grid slabs) with a deterministic parallel counting
//! sort: the order inside a bin is the input order, whatever the thread count.
//!
//! Redistribution over MPI ranks, shared by every distributed method:
//! - [`ownership`]: owners of cell columns over a process grid, windows, ghost rings;
//! - [`route`]: MPI-SORT of particles to their owners and the results back ([`Route`]);
//! - [`ghost`]: the static ghost-source exchange of cell-list methods ([`GhostPlan`]);
//! - [`halo`]: grid-block rows and their owners in an evenly split grid ([`HaloPlan`]).
//! - [`rcb`]: recursive coordinate bisection of particles by Zoltan ([`Rcb`]), for tree codes.

pub mod ghost;
pub mod halo;
pub mod ownership;
pub mod rcb;
pub mod route;
pub mod sort;
pub mod topology;

pub use ghost::{GhostPlan, Ghosts};
pub use halo::{BlockPlacement, HaloPlan, OwnedRows, RowLayout};
pub use ownership::{CellOwnership, WindowAxis};
pub use rcb::Rcb;
pub use route::{Received, Route, SortMode};
pub use topology::{split_owner, split_range, split_start, Decomposition, GridTopology, ProcGrid};

use parki_core::{Error, Result};

/// Layout of one component of a periodic grid in in-place r2c storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GridLayout {
    /// Global points per axis `[Mx, My, Mz]`.
    pub global: [usize; 3],
    /// Reals between components when larger than one component's rows (a distributed
    /// transform's buffer keeps room for its padded topologies); `None`: the rows alone.
    pub stride: Option<usize>,
}

impl GridLayout {
    /// A layout for `global = [Mx, My, Mz]` points; every size must be even and at least 4.
    pub fn new(global: [usize; 3]) -> Result<Self> {
        for (axis, &m) in global.iter().enumerate() {
            if m < 4 || !m.is_multiple_of(2) {
                return Err(Error::OutOfRange {
                    field: format!("grid[{axis}]"),
                    value: m.to_string(),
                    allowed: "an even number of points, at least 4".into(),
                });
            }
        }
        Ok(Self { global, stride: None })
    }

    /// The layout of `global` points with components `stride` reals apart (at least the rows).
    pub fn with_stride(global: [usize; 3], stride: usize) -> Self {
        let l = Self { global, stride: None };
        assert!(stride >= l.real_len(), "a component stride holds the component's rows");
        Self { global, stride: Some(stride) }
    }

    /// Reals per padded x-row: `2 (Mx/2 + 1)`.
    pub fn row_stride(&self) -> usize {
        2 * (self.global[0] / 2 + 1)
    }

    /// Complex values per x-row of the half spectrum: `Mx/2 + 1`.
    pub fn complex_row(&self) -> usize {
        self.global[0] / 2 + 1
    }

    /// Reals in one component's buffer (padding included): the reals between components.
    pub fn real_len(&self) -> usize {
        self.stride.unwrap_or(self.row_stride() * self.global[1] * self.global[2])
    }

    /// Complex values in one component's half spectrum.
    pub fn complex_len(&self) -> usize {
        self.complex_row() * self.global[1] * self.global[2]
    }

    /// Number of grid points `Mx My Mz` (the FFT normalisation).
    pub fn points(&self) -> usize {
        self.global.iter().product()
    }

    /// The whole half spectrum as a [`SpectralBlock`] (one component per `real_len()` reals).
    pub fn spectral_block(&self) -> SpectralBlock {
        SpectralBlock {
            x: (0, self.complex_row()),
            y: (0, self.global[1]),
            z: self.global[2],
            row_stride: self.row_stride(),
            component_stride: self.real_len(),
        }
    }

    /// Offset of real grid point `(ix, iy, iz)` in a component buffer.
    #[inline(always)]
    pub fn real_index(&self, ix: usize, iy: usize, iz: usize) -> usize {
        (iz * self.global[1] + iy) * self.row_stride() + ix
    }

    /// Signed wavenumber index of FFT index `i` on an axis of `m` points: `i` for `i <= m/2`,
    /// `i - m` otherwise.
    #[inline(always)]
    pub fn signed_mode(i: usize, m: usize) -> i64 {
        if i <= m / 2 {
            i as i64
        } else {
            i as i64 - m as i64
        }
    }

    /// Whether FFT index `i` is the Nyquist mode of an even axis of `m` points.
    #[inline(always)]
    pub fn is_nyquist(i: usize, m: usize) -> bool {
        2 * i == m
    }
}

/// The local block of a half spectrum stored `[component][kz][ky][kx]`, `kx` fastest (complex
/// values as pairs of reals): what a distributed FFT ends in and what CNV works on. On one
/// process it is the whole half spectrum of a [`GridLayout`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpectralBlock {
    /// First global `kx` and count.
    pub x: (usize, usize),
    /// First global `ky` and count.
    pub y: (usize, usize),
    /// Number of `kz` (all of them).
    pub z: usize,
    /// Reals between consecutive `ky` rows.
    pub row_stride: usize,
    /// Reals between components.
    pub component_stride: usize,
}

/// Cells per axis of the finest cell grid whose cells are at least `min_width` wide (up to a
/// relative rounding slack of `1e-12`, so that `L / (L/n)` gives `n`), or `None` when an axis
/// would hold fewer than 3 cells. Shared by the parameter selection and the cell lists.
pub fn cells_per_axis(lengths: [f64; 3], min_width: f64) -> Option<[usize; 3]> {
    let mut n = [0usize; 3];
    for d in 0..3 {
        let c = (lengths[d] / min_width * (1.0 + 1e-12)).floor();
        if c.is_nan() || c < 3.0 {
            return None;
        }
        n[d] = (c as usize).min(1 << 20);
    }
    Some(n)
}

/// Smallest size `>= n` whose only prime factors are 2, 3, 5 and 7 and which is even
/// (the sizes FFTW transforms fastest).
pub fn fft_friendly_size(n: usize) -> usize {
    let mut m = n.max(4);
    loop {
        if m.is_multiple_of(2) {
            let mut r = m;
            for p in [2, 3, 5, 7] {
                while r.is_multiple_of(p) {
                    r /= p;
                }
            }
            if r == 1 {
                return m;
            }
        }
        m += 1;
    }
}

/// Cost weight of the slow transform lengths over other FFT-friendly lengths, per point and
/// `log2`: lengths `n = s r` with `r = 5^c 7^d >= 25` (5^2, 7^2 or 5 x 7 among the factors) and
/// a small `s = 2^a 3^b <= 8`. RustFFT's lines (and `realfft`'s rows over half their length)
/// ran 1.15-2.1x slower per point and `log2` than the median length in 1-D on those (50, 70, 98,
/// 100, 140, 150, 196, 200, 210, 250, 294, 350, 490, 500) and whole grids of them 1.2-1.45x,
/// while with a larger `s` (300, 400, 420, 450) they ran as fast as the others
/// (docs/performance.md §7.16, `parki-bench-dist lines`).
pub const SLOW_LINE_WEIGHT: f64 = 1.3;

/// Relative work of one transform line of length `n`: `n log2 n`, times [`SLOW_LINE_WEIGHT`]
/// on the slow lengths (see there). The cost models sum it over the lines of each pass instead
/// of `N log2 N` over the grid, so that a grid one friendly size longer wins where its lines are
/// that much faster.
pub fn fft_line_work(n: usize) -> f64 {
    let mut r = n.max(1);
    for p in [2, 3] {
        while r.is_multiple_of(p) {
            r /= p;
        }
    }
    let slow = r >= 25 && n / r <= 8;
    let nf = n as f64;
    nf * nf.log2() * if slow { SLOW_LINE_WEIGHT } else { 1.0 }
}

/// Transform work of a whole grid of one component: `sum over axes d of (N / n_d)
/// fft_line_work(n_d)`, which is `N log2 N` where no length is slow.
pub fn fft_grid_work(grid: [usize; 3]) -> f64 {
    let points: f64 = grid.iter().map(|&n| n as f64).product();
    grid.iter().map(|&n| points / n as f64 * fft_line_work(n)).sum()
}

#[cfg(test)]
mod tests {
    use super::{fft_friendly_size, fft_grid_work, fft_line_work, GridLayout};

    #[test]
    fn friendly_sizes() {
        assert_eq!(fft_friendly_size(1), 4);
        assert_eq!(fft_friendly_size(11), 12);
        assert_eq!(fft_friendly_size(97), 98);
        assert_eq!(fft_friendly_size(127), 128);
        assert_eq!(fft_friendly_size(129), 140);
    }

    #[test]
    fn slow_lines_weigh_more() {
        for n in [64, 96, 108, 126, 128, 160, 162, 180, 224, 270, 300, 320, 400, 420, 450] {
            assert_eq!(fft_line_work(n), n as f64 * (n as f64).log2(), "{n}");
        }
        for n in [50, 70, 98, 100, 140, 150, 196, 200, 210, 250, 280, 350, 392, 490, 500] {
            let plain = n as f64 * (n as f64).log2();
            assert!((fft_line_work(n) / plain - 1.3).abs() < 1e-12, "{n}");
        }
        let n = 180.0f64.powi(3);
        assert!((fft_grid_work([180; 3]) - n * n.log2()).abs() < 1e-6 * n);
        assert!(fft_grid_work([150, 160, 160]) > fft_grid_work([160, 160, 160]) * 150.0 / 160.0);
    }

    #[test]
    fn layout_sizes_and_modes() {
        let g = GridLayout::new([8, 6, 4]).unwrap();
        assert_eq!(g.row_stride(), 10);
        assert_eq!(g.real_len(), 240);
        assert_eq!(g.complex_len(), 120);
        assert_eq!(g.real_index(1, 2, 3), (3 * 6 + 2) * 10 + 1);
        assert_eq!(GridLayout::signed_mode(5, 8), -3);
        assert!(GridLayout::is_nyquist(4, 8));
        assert!(GridLayout::new([7, 8, 8]).is_err());
    }
}
