//! Cell grids and padded cell lists (ParkiPy's C^N, adapted to CPU SIMD).
//!
//! The box is cut into `n_d = floor(L_d / r_c)` cells per axis, so every cell is at least `r_c`
//! wide and a target's neighbours within `r_c` lie in its 27 colleague cells (periodic wrap).
//! At least 3 cells per axis are required, so the 27 colleagues are distinct cells.
//!
//! Sources are stored cell by cell, structure of arrays, and each cell is padded to a multiple of
//! the SIMD width with zero-strength dummies far outside the colleague cells (the GPU paper pads
//! every cell to the largest count for coalescing; on a CPU padding to the lane count suffices
//! and wastes nothing on clustered inputs). Both lists are built by the deterministic two-pass
//! counting sort of `parki_decomp::sort`, in parallel.
//!
//! Coordinates are stored relative to the origin of their cell ([`CellGrid::origin`]), so that
//! the P2P displacement `r = x - (y + s)` of a pair in colleague cells is formed as
//! `(x_rel + o) - y_rel` with the per-colleague offset `o = origin(target cell) - origin(source
//! cell) - s` ([`CellGrid::colleague_offsets`]): one rounding of a number of at most two cell
//! widths and one subtraction that is exact for close pairs. Origins are rounded to the working
//! precision `T`, which makes `x_rel = x - origin` exact (Sterbenz) for inputs in `T`, and the
//! last cell of each axis takes its upper face `L` as origin, which makes the offset across the
//! periodic boundary tiny. The displacement of every close pair is thus rounded once at its own
//! magnitude, inside the box as with absolute coordinates and also across the periodic
//! boundary (issue 8, defect 2: in f32, `x - s` rounded at the box length made a cluster that
//! straddles a face up to 10x less accurate than the same cluster inside the box).

use parki_core::memory::{ahead, prefetch_ordered};
use parki_core::par::DisjointSlice;
use parki_core::{Domain, Error, Kernel, Par, Real, Result, SourceSet};
use parki_decomp::sort::{counting_sort, Binned};
use rayon::prelude::{
    IndexedParallelIterator, IntoParallelIterator, ParallelIterator, ParallelSlice, ParallelSliceMut,
};

/// A cell grid on a box, or a window of one (the cells a rank owns plus one ghost layer along
/// the split axes).
///
/// Along a wrapped (periodic, unsplit) axis the grid holds every cell and colleagues wrap with a
/// shift of `±L`. Along a windowed axis local cell `l` is global cell `origin + l` (unwrapped:
/// it may lie below 0 or past `n`), and the sources stored there are images shifted by
/// `floor((origin + l)/n) L`; colleagues do not wrap. A free (non-periodic) axis is always
/// windowed, with one empty layer beyond each face of the box: no source lies there, so a
/// target in a boundary cell sees no image across the face.
#[derive(Clone, Debug, PartialEq)]
pub struct CellGrid {
    n: [usize; 3],
    width: [f64; 3],
    lengths: [f64; 3],
    global_n: [usize; 3],
    origin: [i64; 3],
    wrap: [bool; 3],
    periodic: [bool; 3],
}

impl CellGrid {
    /// The finest grid whose cells are at least `min_width` wide on every axis (free axes:
    /// windows of the whole axis plus the empty layers beyond the faces).
    ///
    /// Errors unless the box holds at least 3 cells per axis.
    pub fn new(domain: &Domain, min_width: f64) -> Result<Self> {
        let lengths = domain.lengths();
        let Some(n) = parki_decomp::cells_per_axis(lengths, min_width) else {
            return Err(Error::OutOfRange {
                field: "rc".into(),
                value: format!("{min_width}"),
                allowed: format!("at most L/3 = {} so that the box holds 3 cells per axis", domain.min_length() / 3.0),
            });
        };
        let width = [0, 1, 2].map(|d| lengths[d] / n[d] as f64);
        let periodic = domain.periodic();
        let g = Self { n, width, lengths, global_n: n, origin: [0; 3], wrap: periodic, periodic };
        Ok(g.window([0; 3], n, [true; 3]))
    }

    /// The window of this (global) grid that holds global cells `origin[d] .. origin[d] +
    /// dims[d]` (unwrapped) along the axes with `wrap[d] == false`; wrapped axes keep every cell.
    /// A free axis asked to wrap holds every cell plus the empty layer beyond each face.
    pub fn window(&self, origin: [i64; 3], dims: [usize; 3], wrap: [bool; 3]) -> Self {
        let mut g = self.clone();
        for d in 0..3 {
            if wrap[d] && self.periodic[d] {
                g.n[d] = self.global_n[d];
                g.origin[d] = 0;
                g.wrap[d] = true;
            } else if wrap[d] {
                g.n[d] = self.global_n[d] + 2;
                g.origin[d] = -1;
                g.wrap[d] = false;
            } else {
                g.n[d] = dims[d];
                g.origin[d] = origin[d];
                g.wrap[d] = false;
            }
        }
        g
    }

    /// Global cells per axis.
    pub fn global_dims(&self) -> [usize; 3] {
        self.global_n
    }

    /// Global cell coordinates of a point in the box (clamped into the grid).
    #[inline]
    pub fn global_cell<T: Real>(&self, p: &[T; 3]) -> [usize; 3] {
        let mut c = [0usize; 3];
        for d in 0..3 {
            let i = (p[d].to_f64() / self.width[d]).floor();
            c[d] = (i.max(0.0) as usize).min(self.global_n[d] - 1);
        }
        c
    }

    /// Linear local index of local cell coordinates.
    #[inline]
    pub fn linear(&self, c: [usize; 3]) -> u32 {
        ((c[2] * self.n[1] + c[1]) * self.n[0] + c[0]) as u32
    }

    /// Local cell coordinates of linear index `c` (inverse of [`linear`](Self::linear)).
    #[inline]
    fn coords(&self, c: usize) -> [usize; 3] {
        [c % self.n[0], (c / self.n[0]) % self.n[1], c / (self.n[0] * self.n[1])]
    }

    /// Origin of local cell `c`: the point its coordinates are stored relative to, per axis
    /// the lower face `g w` of the global cell `g` the cell holds, except for the last cell
    /// `g = n - 1`, whose origin is its upper face, the box length `L`; rounded to `T`.
    ///
    /// For a window's ghost cells `g` is the periodic image `u mod n` of the unwrapped cell `u`
    /// (their sources are stored unshifted). Rounded to `T`, the origin makes `p - origin` exact
    /// in `T` for every `p` in `T` inside the cell (both lie within a factor of 2 of each other,
    /// Sterbenz's lemma, or the origin is 0). The upper face for the last cell makes the offset
    /// between the two cells at the periodic boundary tiny (`±(L - fl_T(L))`, see
    /// [`colleague_offsets`](Self::colleague_offsets)), so that a pair across the boundary is
    /// rounded at its own scale, not at that of a cell or the box.
    #[inline]
    pub fn origin<T: Real>(&self, c: usize) -> [f64; 3] {
        let l = self.coords(c);
        [0, 1, 2].map(|d| self.axis_origin::<T>(d, l[d]))
    }

    /// [`origin`](Self::origin) along axis `d` of the cells with local coordinate `l` there.
    #[inline]
    fn axis_origin<T: Real>(&self, d: usize, l: usize) -> f64 {
        let g = self.axis_global(d, l);
        let o = if g == self.global_n[d] as i64 - 1 { self.lengths[d] } else { g as f64 * self.width[d] };
        T::from_f64(o).to_f64()
    }

    /// The global cell along axis `d` of local coordinate `l` (a window's ghost cells: the
    /// periodic image `u mod n` of the unwrapped cell `u`).
    #[inline]
    fn axis_global(&self, d: usize, l: usize) -> i64 {
        if self.wrap[d] {
            l as i64
        } else {
            (self.origin[d] + l as i64).rem_euclid(self.global_n[d] as i64)
        }
    }

    /// Local coordinate along a windowed axis `d` of unwrapped global cell `u`.
    #[inline]
    pub fn local_of_unwrapped(&self, d: usize, u: i64) -> Option<usize> {
        let l = u - self.origin[d];
        (l >= 0 && (l as usize) < self.n[d]).then_some(l as usize)
    }

    /// Cells per axis.
    pub fn dims(&self) -> [usize; 3] {
        self.n
    }

    /// Number of cells.
    pub fn cells(&self) -> usize {
        self.n.iter().product()
    }

    /// Cell widths per axis.
    pub fn widths(&self) -> [f64; 3] {
        self.width
    }

    /// Box lengths.
    pub fn lengths(&self) -> [f64; 3] {
        self.lengths
    }

    /// Whether each axis holds every cell and wraps (false: a window along that axis).
    pub fn wrap_axes(&self) -> [bool; 3] {
        self.wrap
    }

    /// Unwrapped global cell of local cell 0 along windowed axes (0 along wrapped ones).
    pub fn window_origin(&self) -> [i64; 3] {
        self.origin
    }

    /// Smallest cell width: every pair closer than this is in colleague cells.
    pub fn min_width(&self) -> f64 {
        self.width.iter().cloned().fold(f64::INFINITY, f64::min)
    }

    /// Linear cell index `(iz n_y + iy) n_x + ix` of a point in the box (for a window: of a
    /// point in one of its own, unshifted, cells).
    #[inline]
    pub fn cell_of<T: Real>(&self, p: &[T; 3]) -> u32 {
        let g = self.global_cell(p);
        let c = [0, 1, 2].map(|d| {
            if self.wrap[d] {
                g[d]
            } else {
                ((g[d] as i64 - self.origin[d]).clamp(0, self.n[d] as i64 - 1)) as usize
            }
        });
        self.linear(c)
    }

    /// Pairs P2P evaluates: `sum_c targets(c) sum_{c' colleague of c} sources(c')` with the
    /// counts per cell (padding included where `sources` counts padded slots); cells without
    /// targets are skipped, the cells are split over the current rayon pool.
    pub fn pairs(&self, targets: impl Fn(usize) -> u64 + Sync, sources: impl Fn(usize) -> u64 + Sync) -> u64 {
        (0..self.cells())
            .into_par_iter()
            .with_min_len(256)
            .map(|c| match targets(c) {
                0 => 0,
                nt => nt * self.colleagues(c).iter().map(|&(s, _)| sources(s)).sum::<u64>(),
            })
            .sum()
    }

    /// The 27 colleagues of cell `c`: `(cell, s)` where the source images to use are `y + s`.
    pub fn colleagues(&self, c: usize) -> [(usize, [f64; 3]); 27] {
        let ix = self.coords(c);
        let steps = [0, 1, 2].map(|d| self.axis_steps(d, ix[d]));
        let mut out = [(0usize, [0.0; 3]); 27];
        for (k, o) in out.iter_mut().enumerate() {
            let (z, y, x) = (steps[2][k / 9], steps[1][(k / 3) % 3], steps[0][k % 3]);
            *o = ((z.0 * self.n[1] + y.0) * self.n[0] + x.0, [x.1, y.1, z.1]);
        }
        out
    }

    /// Along axis `d`, the neighbours of local coordinate `i` at steps -1, 0, 1: their local
    /// coordinate and image shift (see [`colleagues`](Self::colleagues)).
    #[inline]
    fn axis_steps(&self, d: usize, i: usize) -> [(usize, f64); 3] {
        let n = self.n[d] as i64;
        [-1i64, 0, 1].map(|step| {
            let v = i as i64 + step;
            if !self.wrap[d] {
                // windowed: no wrap; the shift is that of the ghost layer's image
                // (cells without targets may reach past the window: clamped, unused)
                let v = v.clamp(0, n - 1);
                let g = self.global_n[d] as i64;
                (v as usize, (self.origin[d] + v).div_euclid(g) as f64 * self.lengths[d])
            } else if v < 0 {
                ((v + n) as usize, -self.lengths[d])
            } else if v >= n {
                ((v - n) as usize, self.lengths[d])
            } else {
                (v as usize, 0.0)
            }
        })
    }

    /// Per axis `d`, the colleagues of cell `c` at steps -1, 0, 1 along it: `(coordinate j,
    /// shift s, offset o)` with `o = origin_d(c) - origin_d(j) - s`, the axis factors of
    /// [`colleagues`](Self::colleagues) and [`colleague_offsets`](Self::colleague_offsets)
    /// (the 27 colleagues are their products, `z` slowest): one division-free pass per axis
    /// instead of one per colleague.
    #[inline]
    pub fn colleague_axes<T: Real>(&self, c: usize) -> [[(usize, f64, f64); 3]; 3] {
        let ix = self.coords(c);
        [0, 1, 2].map(|d| {
            let o = self.axis_origin::<T>(d, ix[d]);
            self.axis_steps(d, ix[d]).map(|(j, s)| (j, s, (o - self.axis_origin::<T>(d, j)) - s))
        })
    }

    /// Linear index of the colleague with per-axis coordinates `j` (see
    /// [`colleague_axes`](Self::colleague_axes)).
    #[inline]
    pub fn colleague_index(&self, j: [usize; 3]) -> usize {
        (j[2] * self.n[1] + j[1]) * self.n[0] + j[0]
    }

    /// The 27 colleagues of cell `c` with the offsets of their relative coordinates:
    /// `(cell, o)` with `o = origin(c) - origin(cell) - s` ([`origin`](Self::origin) in
    /// precision `T`, `s` the image shift of [`colleagues`](Self::colleagues)), so that the
    /// displacement from an image of a source to a target of `c` is `(x_rel + o) - y_rel`.
    ///
    /// `o` is computed in f64 from origins in `T` and `s`, exactly for `T = f32` (and to f64
    /// rounding at the scale of a cell for `T = f64`); `|o| < 2.01 w`. Across the periodic
    /// boundary (`s = ∓L`, source cell `n-1` or `0` of a target in cell `0` or `n-1`) it is
    /// `±(L - fl_T(L))`, below half an ulp of `L`: `x_rel + o` keeps the fine bits of a target
    /// near the face, and the pair is rounded at the scale of its own distance. For colleagues
    /// that do not wrap, `x_rel + o = x - origin(cell)` is exact in `T` for close pairs, as is
    /// `(x_rel + o) - y_rel`; the self colleague has `o = 0` exactly.
    pub fn colleague_offsets<T: Real>(&self, c: usize) -> [(usize, [f64; 3]); 27] {
        let a = self.colleague_axes::<T>(c);
        std::array::from_fn(|k| {
            let (z, y, x) = (a[2][k / 9], a[1][(k / 3) % 3], a[0][k % 3]);
            (self.colleague_index([x.0, y.0, z.0]), [x.2, y.2, z.2])
        })
    }

    /// The faces of cell `c` per axis, `(lower, upper)`, in the frame of its relative
    /// coordinates ([`origin`](Self::origin) in precision `T`): `(0, w)` for most cells,
    /// `(-w, 0)` up to rounding for the last cell of an axis (whose origin is its upper face).
    /// P2P's cut-off sphere measures a target's distance to its neighbour rows with them.
    pub fn faces<T: Real>(&self, c: usize) -> [(f64, f64); 3] {
        let l = self.coords(c);
        [0, 1, 2].map(|d| {
            let n = self.global_n[d] as i64;
            let g = self.axis_global(d, l[d]);
            let o = self.axis_origin::<T>(d, l[d]);
            let lower = g as f64 * self.width[d];
            let upper = if g == n - 1 { self.lengths[d] } else { (g + 1) as f64 * self.width[d] };
            (lower - o, upper - o)
        })
    }

    /// The x origin of packed rows ([`PaddedSources::build_packed`]): that of the grid's cell
    /// column 0 in precision `T`, the same for every row.
    pub fn packed_x_origin<T: Real>(&self) -> f64 {
        self.origin::<T>(0)[0]
    }

    /// Coordinates of `p` relative to the origin `o` of its cell, rounded once to `T` (exact for
    /// `p` in `T` inside the cell, see [`origin`](Self::origin)). With the residual `lo` of
    /// positions rounded from f64 ([`SourceSet::residuals`]), `(p - o) + lo` in f64 (both steps
    /// exact: `p` and `o` are `T`, and `lo` lies within an ulp or two of `p`), then rounded once: the
    /// f64 position's coordinates in the cell, rounded at the scale of the cell, not of the box.
    #[inline]
    fn relative<T: Real>(p: &[T; 3], lo: Option<&[T; 3]>, o: &[f64; 3]) -> [T; 3] {
        match lo {
            None => [0, 1, 2].map(|d| T::from_f64(p[d].to_f64() - o[d])),
            Some(lo) => [0, 1, 2].map(|d| T::from_f64((p[d].to_f64() - o[d]) + lo[d].to_f64())),
        }
    }

    /// Cell of every position (see [`cell_of`](Self::cell_of)).
    pub fn keys<T: Real>(&self, positions: &[[T; 3]], par: Par) -> Vec<u32> {
        match par {
            Par::Seq => positions.iter().map(|p| self.cell_of(p)).collect(),
            Par::Rayon(_) => {
                let mut k = vec![0u32; positions.len()];
                k.par_chunks_mut(4096).enumerate().for_each(|(i, ch)| {
                    for (j, v) in ch.iter_mut().enumerate() {
                        *v = self.cell_of(&positions[i * 4096 + j]);
                    }
                });
                k
            }
        }
    }
}

/// Sources sorted by cell, structure of arrays, in one of two layouts:
///
/// - padded (default): each cell padded to a multiple of `lanes`; coordinates relative to the
///   origin of the source's cell ([`CellGrid::origin`] in precision `T`), so that the pair
///   loop's subtraction is exact for close pairs;
/// - packed rows ([`PaddedSources::build_packed`]): no padding between cells, so that P2P
///   reads the three x-neighbour colleagues of a row as one run of consecutive sources (9 runs
///   per target instead of 27 padded cells, the last vector of a run masked); `y` and `z`
///   relative to the cell's origin as before, `x` relative to the x origin of the grid's first
///   cell column ([`CellGrid::packed_x_origin`]), the same for the whole row. For f64 at loose
///   tolerances: the subtraction then loses `eps L / r`, not `eps w / r`.
///
/// Within a cell the sources are in increasing x ([`sort_bins_by_x`]), so that a packed row, or
/// a padded cell's real sources, can be cut to the x window of a target's cut-off sphere by a
/// binary search (`crate::p2p`, [`NearCutoff::Sphere`](crate::NearCutoff)).
///
/// Padding dummies (between cells, and `lanes` of them after the last cell) sit at `-5 w_max`
/// on every axis (relative; a padded cell's dummies at the x of its last source, so that its
/// slots stay in increasing x), at least three cell widths from every target of a colleague
/// cell in y and z, with zero strength.
#[derive(Clone, Debug)]
pub struct PaddedSources<T> {
    /// `offsets[c]..offsets[c+1]`: padded slots of cell `c`.
    pub offsets: Vec<usize>,
    /// x coordinates relative to the cell origin.
    pub x: Vec<T>,
    /// y coordinates relative to the cell origin.
    pub y: Vec<T>,
    /// z coordinates relative to the cell origin.
    pub z: Vec<T>,
    /// Density components (`Kernel::density_width`, packed order), one array each.
    pub density: Vec<Vec<T>>,
    /// Largest number of real sources in a cell.
    pub max_count: usize,
    /// Number of non-empty cells.
    pub nonempty: usize,
    /// Real (unpadded) sources.
    pub count: usize,
    /// The packed-rows layout (see the type's documentation).
    pub packed: bool,
}

impl<T: Real> PaddedSources<T> {
    /// Builds the padded list of `sources` on `grid`, padding cells to multiples of `lanes`.
    pub fn build(grid: &CellGrid, kernel: Kernel, sources: &impl SourceSet<T>, lanes: usize, par: Par) -> Self {
        let keys = grid.keys(sources.positions(), par);
        Self::build_keyed(grid, kernel, sources, &keys, lanes, par)
    }

    /// As [`build`](Self::build) with the cell of every source given (ghost sources of a
    /// window, whose cell follows from where they came from rather than their position; they
    /// are stored relative to the origin of that cell, which is that of the global cell they
    /// lie in, unshifted).
    pub fn build_keyed(
        grid: &CellGrid,
        kernel: Kernel,
        sources: &impl SourceSet<T>,
        keys: &[u32],
        lanes: usize,
        par: Par,
    ) -> Self {
        let mut binned = counting_sort(keys, grid.cells(), par);
        sort_bins_by_x(&mut binned, sources.positions(), sources.residuals(), par);
        Self::from_binned(grid, kernel, sources, &binned, lanes, false, par)
    }

    /// The packed-rows layout (see the type's documentation) of `sources` with the cell of
    /// every source given: no padding between cells, `lanes` dummies after the last one.
    pub fn build_packed(
        grid: &CellGrid,
        kernel: Kernel,
        sources: &impl SourceSet<T>,
        keys: &[u32],
        lanes: usize,
        par: Par,
    ) -> Self {
        let mut binned = counting_sort(keys, grid.cells(), par);
        sort_bins_by_x(&mut binned, sources.positions(), sources.residuals(), par);
        Self::from_binned(grid, kernel, sources, &binned, lanes, true, par)
    }

    fn from_binned(
        grid: &CellGrid,
        kernel: Kernel,
        sources: &impl SourceSet<T>,
        b: &Binned,
        lanes: usize,
        packed: bool,
        par: Par,
    ) -> Self {
        let ncells = grid.cells();
        let mut offsets = vec![0usize; ncells + 1];
        for c in 0..ncells {
            let n = b.count(c);
            offsets[c + 1] = offsets[c] + if packed { n } else { n.div_ceil(lanes) * lanes };
        }
        // a vector of dummies after the last cell: a window of P2P's cut-off sphere may start
        // anywhere in a cell and read a whole vector from there
        let total = offsets[ncells] + lanes;
        let x_origin = grid.packed_x_origin::<T>();
        let ncomp = kernel.density_width();
        // dummies: zero strength, relative coordinate -5 w_max: a target of a colleague cell is
        // at relative x_rel + o in [-2.01 w, 2.01 w), so every dummy is at least 2.99 widths away
        // (on every axis; a padded cell's dummies in y and z, see below): no r = 0, and erfc and
        // exp see xi r bounded by the cell grid, not by the box
        let wmax = grid.width.iter().cloned().fold(0.0, f64::max);
        let far = T::from_f64(-5.0 * wmax);
        // padded cells: the dummies after a cell's sources at the x of its last source (far in
        // y and z), so that a cell's slots stay in increasing x (its sources are sorted by x,
        // see `sort_bins_by_x`) and a window that keeps the cell's last source needs no search
        // for its end; the packed rows' tail stays at -5 w_max
        let mut x = vec![far; total];
        let mut y = vec![far; total];
        let mut z = vec![far; total];
        let mut density = vec![vec![T::ZERO; total]; ncomp];
        let residuals = sources.residuals();
        if let Some(r) = residuals {
            assert_eq!(r.len(), sources.count(), "one position residual per source");
        }
        {
            let xs = DisjointSlice::new(&mut x);
            let ys = DisjointSlice::new(&mut y);
            let zs = DisjointSlice::new(&mut z);
            let ds: Vec<_> = density.iter_mut().map(|d| DisjointSlice::new(d)).collect();
            let fill = |c: usize| {
                let o = offsets[c];
                let n = b.count(c);
                let mut origin = grid.origin::<T>(c);
                if packed {
                    origin[0] = x_origin;
                }
                let mut dens = [T::ZERO; 9];
                // SAFETY: cell c owns slots offsets[c]..offsets[c]+n of x, y and z, disjoint from
                // the slots of every other cell, and `fill` runs once per cell.
                let (cx, cy, cz) = unsafe { (xs.range_mut(o, o + n), ys.range_mut(o, o + n), zs.range_mut(o, o + n)) };
                for (k, &j) in b.order[b.offsets[c]..b.offsets[c + 1]].iter().enumerate() {
                    // the order reads the sources scattered: keep PREFETCH_AHEAD in flight
                    if let Some(a) = ahead(&b.order, b.offsets[c] + k) {
                        sources.prefetch(kernel, a);
                    }
                    let j = j as usize;
                    let p = CellGrid::relative(&sources.positions()[j], residuals.map(|r| &r[j]), &origin);
                    cx[k] = p[0];
                    cy[k] = p[1];
                    cz[k] = p[2];
                    sources.density(kernel, j, &mut dens);
                    for (comp, d) in ds.iter().enumerate() {
                        // SAFETY: slot o + k (k < n) of this density component belongs to cell c
                        // only, and cell c is filled by this call only.
                        unsafe { d.range_mut(o + k, o + k + 1)[0] = dens[comp] };
                    }
                }
                if !packed && n > 0 {
                    // SAFETY: slots offsets[c]..offsets[c + 1] (the padding included) are cell
                    // c's alone, filled by this call only.
                    let padding = unsafe { xs.range_mut(o + n, offsets[c + 1]) };
                    padding.fill(cx[n - 1]);
                }
            };
            match par {
                Par::Seq => (0..ncells).for_each(fill),
                Par::Rayon(_) => (0..ncells).into_par_iter().with_min_len(64).for_each(fill),
            }
        }
        Self {
            offsets,
            x,
            y,
            z,
            density,
            max_count: b.max_count(),
            nonempty: b.nonempty(),
            count: sources.count(),
            packed,
        }
    }

    /// Padded slots in total.
    pub fn slots(&self) -> usize {
        self.x.len()
    }
}

/// Sorts every bin of `b` by the x coordinate of `positions` (plus its `residuals` where given,
/// in f64: the order of the coordinates [`PaddedSources`] stores; ties by input index: the
/// order is deterministic and independent of `par`), in place and in parallel over bins.
///
/// P2P's cut-off sphere reads a window of each colleague run ([`NearCutoff::Sphere`](
/// crate::NearCutoff)), found by binary search in the run's x coordinates; targets in x order
/// make the windows of the two targets evaluated together nearly the same.
pub fn sort_bins_by_x<T: Real>(b: &mut Binned, positions: &[[T; 3]], residuals: Option<&[[T; 3]]>, par: Par) {
    let x = |i: u32| {
        let i = i as usize;
        positions[i][0].to_f64() + residuals.map_or(0.0, |r| r[i][0].to_f64())
    };
    let offsets = &b.offsets;
    let order = DisjointSlice::new(&mut b.order);
    let sort = |bin: usize| {
        let (k0, k1) = (offsets[bin], offsets[bin + 1]);
        if k1 - k0 < 2 {
            return;
        }
        // SAFETY: the bins' ranges of `order` are disjoint and each bin is sorted once.
        let slice = unsafe { order.range_mut(k0, k1) };
        slice.sort_unstable_by(|&i, &j| x(i).total_cmp(&x(j)).then(i.cmp(&j)));
    };
    let bins = offsets.len() - 1;
    match par {
        Par::Seq => (0..bins).for_each(sort),
        Par::Rayon(_) => (0..bins).into_par_iter().with_min_len(64).for_each(sort),
    }
}

/// Targets per task of the copies through the sort order ([`SortedTargets::unsort`],
/// [`SortedTargets::sorted_positions`]).
const ORDER_CHUNK: usize = 4096;

/// Targets sorted by cell (not padded), with the map back to input order.
///
/// Coordinates are relative to the origin of the target's cell ([`CellGrid::origin`] in
/// precision `T`), as those of [`PaddedSources`]: a target at the position of a source has the
/// same relative coordinates, so its self term sees `r = 0` exactly.
#[derive(Clone, Debug)]
pub struct SortedTargets<T> {
    /// Bins and input indices.
    pub binned: Binned,
    /// x coordinates relative to the cell origin (packed: to the sources' x origin), in sorted
    /// order.
    pub x: Vec<T>,
    /// y coordinates relative to the cell origin, in sorted order.
    pub y: Vec<T>,
    /// z coordinates relative to the cell origin, in sorted order.
    pub z: Vec<T>,
    /// `x` in the frame of packed-row sources ([`SortedTargets::build_in_frame`]).
    pub packed: bool,
}

impl<T: Real> SortedTargets<T> {
    /// Sorts `positions` by cell of `grid`.
    pub fn build(grid: &CellGrid, positions: &[[T; 3]], par: Par) -> Self {
        Self::build_in_frame(grid, positions, false, par)
    }

    /// As [`build`](Self::build) with `x` in the frame of packed-row sources when `packed`
    /// (relative to [`CellGrid::packed_x_origin`], rounded as the sources are, so that a target
    /// at a source is at distance zero exactly).
    pub fn build_in_frame(grid: &CellGrid, positions: &[[T; 3]], packed: bool, par: Par) -> Self {
        let keys = grid.keys(positions, par);
        Self::build_keyed_in_frame(grid, positions, None, &keys, packed, par)
    }

    /// As [`build_in_frame`](Self::build_in_frame) with the cell of every target given
    /// (`keys[i] = grid.cell_of(&positions[i])`, e.g. the sources' keys when the targets are
    /// the sources), filled in parallel over cells; with `residuals`, the targets are at
    /// `positions + residuals` (f64 positions rounded to `T`, [`SourceSet::residuals`]).
    pub fn build_keyed_in_frame(
        grid: &CellGrid,
        positions: &[[T; 3]],
        residuals: Option<&[[T; 3]]>,
        keys: &[u32],
        packed: bool,
        par: Par,
    ) -> Self {
        assert_eq!(keys.len(), positions.len(), "one cell key per target");
        if let Some(r) = residuals {
            assert_eq!(r.len(), positions.len(), "one position residual per target");
        }
        let mut binned = counting_sort(keys, grid.cells(), par);
        sort_bins_by_x(&mut binned, positions, residuals, par);
        let n = binned.order.len();
        let (mut x, mut y, mut z) = (vec![T::ZERO; n], vec![T::ZERO; n], vec![T::ZERO; n]);
        {
            let (xs, ys, zs) = (DisjointSlice::new(&mut x), DisjointSlice::new(&mut y), DisjointSlice::new(&mut z));
            let order = &binned.order;
            let fill = |c: usize| {
                let (t0, t1) = (binned.offsets[c], binned.offsets[c + 1]);
                if t0 == t1 {
                    return;
                }
                let mut origin = grid.origin::<T>(c);
                if packed {
                    origin[0] = grid.packed_x_origin::<T>();
                }
                // SAFETY: cell c owns the sorted slots t0..t1, disjoint from every other cell's,
                // and `fill` runs once per cell.
                let (cx, cy, cz) = unsafe { (xs.range_mut(t0, t1), ys.range_mut(t0, t1), zs.range_mut(t0, t1)) };
                for (k, &i) in order[t0..t1].iter().enumerate() {
                    // the order reads the positions scattered: keep PREFETCH_AHEAD in flight
                    prefetch_ordered(positions, order, t0 + k);
                    let i = i as usize;
                    let p = CellGrid::relative(&positions[i], residuals.map(|r| &r[i]), &origin);
                    (cx[k], cy[k], cz[k]) = (p[0], p[1], p[2]);
                }
            };
            match par {
                Par::Seq => (0..grid.cells()).for_each(fill),
                Par::Rayon(_) => (0..grid.cells()).into_par_iter().with_min_len(64).for_each(fill),
            }
        }
        Self { binned, x, y, z, packed }
    }

    /// Number of targets.
    pub fn len(&self) -> usize {
        self.x.len()
    }

    /// Whether there are no targets.
    pub fn is_empty(&self) -> bool {
        self.x.is_empty()
    }

    /// Copies `positions` (the input positions these targets were built from) into `out` in
    /// sorted order, bitwise: for the far field's G2P, which then reads them in the cell order
    /// without an index. Made when G2P runs rather than with the cell lists, so that P2P finds
    /// its own arrays still in cache.
    pub fn sorted_positions(&self, positions: &[[T; 3]], out: &mut [[T; 3]], par: Par) {
        let order = &self.binned.order;
        assert!(positions.len() == order.len() && out.len() == order.len(), "sorted_positions lengths");
        let copy = |(c, o): (usize, &mut [[T; 3]])| {
            let start = c * ORDER_CHUNK;
            for (k, v) in o.iter_mut().enumerate() {
                // the order reads the positions scattered: keep PREFETCH_AHEAD in flight
                prefetch_ordered(positions, order, start + k);
                *v = positions[order[start + k] as usize];
            }
        };
        match par {
            Par::Seq => out.chunks_mut(ORDER_CHUNK).enumerate().for_each(copy),
            Par::Rayon(_) => out.par_chunks_mut(ORDER_CHUNK).enumerate().for_each(copy),
        }
    }

    /// Scatters `sorted` (`dim` values per target, sorted order) into `out` in input order.
    pub fn unsort(&self, sorted: &[T], dim: usize, out: &mut [T], par: Par) {
        let order = &self.binned.order;
        assert!(sorted.len() >= order.len() * dim && out.len() >= order.len() * dim, "unsort lengths");
        let writer = DisjointSlice::new(out);
        let scatter = |(c, vals): (usize, &[T])| {
            for (k, v) in vals.chunks_exact(dim).enumerate() {
                let i = order[c * ORDER_CHUNK + k] as usize;
                // SAFETY: `order` is a permutation, so every input slot i is written once.
                unsafe { writer.range_mut(i * dim, (i + 1) * dim) }.copy_from_slice(v);
            }
        };
        let sorted = &sorted[..order.len() * dim];
        match par {
            Par::Seq => sorted.chunks(ORDER_CHUNK * dim).enumerate().for_each(scatter),
            Par::Rayon(_) => sorted.par_chunks(ORDER_CHUNK * dim).enumerate().for_each(scatter),
        }
    }
}
