//! [`PoissonSolver`]: `lap(phi) = f` on a uniform cell-centred grid with per-axis boundary
//! conditions, by `phi^ = G^ f^` over the distributed transform (digest seed-002 §1-3).
//!
//! Plan once: the field's transform (per-axis kinds from the boundary conditions, zero
//! padding for unbounded directions, semi-unbounded lines of `2N + 1` slots), and the Green's
//! spectrum on the same spectral layout, computed once by a second transform of the sampled
//! kernel (a DFT of the `2N` samples mirrored about `N` along unbounded axes, a DCT-I of the
//! `2N + 1` vertex samples along semi-unbounded ones, the closed form along spectral ones) and
//! kept with every normalisation folded in. Solve many times: copy the right-hand side in,
//! forward, multiply, backward, copy the solution out. Every buffer is owned by the plan.

use std::ops::Range;
use std::time::Instant;

use parki_comm::{Backend, Comm};
use parki_core::{Error, Result};
use parki_decomp::{Decomposition, ProcGrid};
use parki_fft3d::{proc_grid_limits, AxisSpec, DistFft, DistFftOptions, FftTimes, PlanRigor};

use crate::bc::{AxisClass, Bc};
use crate::green::{Green, GreenKind};

/// What a [`PoissonSolver`] is planned for.
#[derive(Clone, Debug)]
pub struct PoissonOptions {
    /// Box lengths.
    pub lengths: [f64; 3],
    /// Cells per axis.
    pub cells: [usize; 3],
    /// Boundary conditions per axis: `[low, high]`.
    pub bc: [[Bc; 2]; 3],
    /// The Green's function.
    pub green: GreenKind,
    /// HEJ smoothing ratio `eps / h` (FLUPS's `alpha`, 2 by default).
    pub alpha: f64,
    /// Components solved at once (1 scalar, 3 vector).
    pub components: usize,
    /// Process grid shape.
    pub decomposition: Decomposition,
    /// An explicit process grid `[P_1, P_2]` (memory-order axes), or `None` to choose.
    pub proc_grid: Option<[usize; 2]>,
    /// Switch backend.
    pub backend: Backend,
    /// Threads of the transforms.
    pub threads: usize,
    /// FFTW planning effort.
    pub rigor: PlanRigor,
}

impl PoissonOptions {
    /// A scalar problem with CHAT2, one thread, all-to-all-v switches.
    pub fn new(lengths: [f64; 3], cells: [usize; 3], bc: [[Bc; 2]; 3]) -> Self {
        Self {
            lengths,
            cells,
            bc,
            green: GreenKind::Chat2,
            alpha: 2.0,
            components: 1,
            decomposition: Decomposition::Auto,
            proc_grid: None,
            backend: Backend::Alltoallv,
            threads: 1,
            rigor: PlanRigor::Estimate,
        }
    }
}

/// Seconds per stage of the solves so far.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PoissonTimes {
    /// Copying the right-hand side in.
    pub load: f64,
    /// Forward transform (its FFTs and switches are also in `fft`).
    pub forward: f64,
    /// Multiplying by the Green's spectrum.
    pub multiply: f64,
    /// Backward transform.
    pub backward: f64,
    /// Copying the solution out.
    pub store: f64,
    /// The transforms' 1-D FFTs and switches.
    pub fft: FftTimes,
    /// Solves.
    pub solves: usize,
}

/// What a solve found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SolveReport {
    /// Per component, the mean of the right-hand side removed because no solution exists
    /// otherwise (every axis periodic or even-even), when it was not zero.
    pub mean_removed: Vec<Option<f64>>,
}

/// A planned Poisson solve (see the module documentation).
pub struct PoissonSolver {
    comm: Comm,
    opts: PoissonOptions,
    classes: [AxisClass; 3],
    green: Green,
    fft: DistFft<f64>,
    /// `G^` times every normalisation, one per local spectral element.
    table: Vec<f64>,
    /// Owned cells per user axis.
    block: [Range<usize>; 3],
    /// Whether a zero mode exists (every axis periodic or even-even).
    zero_mode: bool,
    times: PoissonTimes,
}

impl PoissonSolver {
    /// Plans the solver (collective over `comm`): checks the options, plans the field's
    /// transform and computes the Green's spectrum.
    pub fn plan(comm: &Comm, opts: PoissonOptions) -> Result<Self> {
        for i in 0..3 {
            if opts.cells[i] == 0 {
                return Err(Error::OutOfRange {
                    field: "problem.grid".into(),
                    value: format!("{:?}", opts.cells),
                    allowed: "at least one cell per axis".into(),
                });
            }
            if !(opts.lengths[i].is_finite() && opts.lengths[i] > 0.0) {
                return Err(Error::OutOfRange {
                    field: "problem.box".into(),
                    value: format!("{:?}", opts.lengths),
                    allowed: "positive finite lengths".into(),
                });
            }
        }
        if !(opts.components == 1 || opts.components == 3) {
            return Err(Error::OutOfRange {
                field: "components".into(),
                value: opts.components.to_string(),
                allowed: "1 (scalar) or 3 (vector)".into(),
            });
        }
        if !(opts.alpha.is_finite() && opts.alpha > 0.0) {
            return Err(Error::OutOfRange {
                field: "problem.alpha".into(),
                value: opts.alpha.to_string(),
                allowed: "a positive smoothing ratio eps/h".into(),
            });
        }
        let classes = [AxisClass::of(0, opts.bc[0])?, AxisClass::of(1, opts.bc[1])?, AxisClass::of(2, opts.bc[2])?];
        let h = [0, 1, 2].map(|i| opts.lengths[i] / opts.cells[i] as f64);
        let green = Green::new(opts.green, h, opts.alpha)?;
        let u = classes.iter().filter(|c| !c.is_spectral()).count();
        green.check_reduction(u)?;
        let axes = [0, 1, 2].map(|i| classes[i].field_axis(opts.cells[i]));
        let limits = proc_grid_limits(&axes, false);
        let pg = ProcGrid::choose(comm.size(), opts.decomposition, opts.proc_grid, limits)?;
        let fopts = DistFftOptions {
            forward_components: opts.components,
            backward_components: opts.components,
            complex: false,
            backend: opts.backend,
            threads: opts.threads.max(1),
            rigor: opts.rigor,
        };
        let fft = DistFft::<f64>::with_axes(comm, axes, pg, fopts)?;
        let zero_mode = classes
            .iter()
            .all(|c| matches!(c, AxisClass::Periodic | AxisClass::Symmetric { low: Bc::Even, high: Bc::Even }));
        let t0 = fft.topology(0);
        let order = fft.order();
        let mut block = [0..0, 0..0, 0..0];
        block[order[0]] = 0..opts.cells[order[0]];
        block[order[1]] = t0.range(1);
        block[order[2]] = t0.range(2);
        let mut s = Self {
            comm: comm.clone(),
            opts,
            classes,
            green,
            fft,
            table: Vec::new(),
            block,
            zero_mode,
            times: PoissonTimes::default(),
        };
        s.table = s.green_table(pg)?;
        Ok(s)
    }

    /// Wavenumber of field spectral slot `s` along user axis `a`.
    fn wavenumber(&self, a: usize, s: usize) -> f64 {
        let r2c = self.fft.is_r2c() && self.fft.order()[0] == a;
        self.classes[a].wavenumber(self.opts.cells[a], self.opts.lengths[a], s, r2c)
    }

    /// The Green's spectrum on this rank's spectral block, normalisations folded in.
    fn green_table(&self, pg: ProcGrid) -> Result<Vec<f64>> {
        let order = self.fft.order();
        let field_axes = self.fft.axes();
        let mut lines = [0; 3];
        for j in 0..3 {
            lines[order[j]] = self.fft.topology(2).global[j];
        }
        let n = self.opts.cells;
        let h = [0, 1, 2].map(|i| self.opts.lengths[i] / n[i] as f64);
        let gaxes: [AxisSpec; 3] = [0, 1, 2].map(|a| self.classes[a].green_axis(n[a], lines[a]));
        let gopts = DistFftOptions {
            forward_components: 1,
            backward_components: 0,
            complex: false,
            backend: self.opts.backend,
            threads: self.opts.threads.max(1),
            rigor: PlanRigor::Estimate,
        };
        let mut gfft = DistFft::<f64>::with_axes_in_order(&self.comm, gaxes, order, pg, gopts)?;
        // sample the kernel in the Green's real-space topology
        let spectral: Vec<usize> = (0..3).filter(|&a| self.classes[a].is_spectral()).collect();
        let physical: Vec<usize> = (0..3).filter(|&a| !self.classes[a].is_spectral()).collect();
        let t0 = gfft.topology(0);
        let (r1, r2) = (t0.range(1), t0.range(2));
        let n0 = gfft.axes()[0].n;
        for i2 in r2.clone() {
            for i1 in r1.clone() {
                for i0 in 0..n0 {
                    let idx = [i0, i1, i2];
                    let mut at = [0; 3];
                    for j in 0..3 {
                        at[order[j]] = idx[j];
                    }
                    let x: Vec<f64> = physical.iter().map(|&a| self.classes[a].sample(n[a], h[a], at[a])).collect();
                    let k: Vec<f64> = spectral.iter().map(|&a| self.wavenumber(a, at[a])).collect();
                    let v = match physical.len() {
                        3 => self.green.g3((x[0] * x[0] + x[1] * x[1] + x[2] * x[2]).sqrt()),
                        2 => {
                            let cell = [h[physical[0]], h[physical[1]]];
                            // None: given in full Fourier space instead (filled in below)
                            self.green.g2((x[0] * x[0] + x[1] * x[1]).sqrt(), k[0], cell).unwrap_or(0.0)
                        }
                        1 => self.green.g1(x[0], (k[0] * k[0] + k[1] * k[1]).sqrt()),
                        _ => self.green.spectral([k[0], k[1], k[2]]),
                    };
                    let r = gfft.real_index(i0, i1 - r1.start, i2 - r2.start);
                    gfft.data_mut()[r] = v;
                }
            }
        }
        gfft.forward();
        // the spectrum, with the normalisations and, where the kernel is given in full Fourier
        // space (HEJ with two unbounded axes, k != 0), its value there
        let factor: f64 = (0..3).map(|j| self.classes[order[j]].factor(&field_axes[j], h[order[j]])).product();
        let h_physical: f64 = physical.iter().map(|&a| h[a]).product();
        let t2 = self.fft.topology(2);
        let (s0, s1, l2) = (t2.range(0), t2.range(1), t2.global[2]);
        let mut table = Vec::with_capacity(s0.len() * s1.len() * l2);
        // HEJ with two unbounded axes: given in full Fourier space at k != 0 (on every rank)
        let spectral_missing = matches!(self.green.kind, GreenKind::Hej(_)) && physical.len() == 2;
        for i2 in 0..l2 {
            for i1 in s1.clone() {
                for i0 in s0.clone() {
                    let idx = [i0, i1, i2];
                    let mut at = [0; 3];
                    for j in 0..3 {
                        at[order[j]] = idx[j];
                    }
                    let g = gfft.data()[gfft.spectral_index(i0 - s0.start, i1 - s1.start, i2)];
                    let g = if spectral_missing && spectral.iter().any(|&a| self.wavenumber(a, at[a]) != 0.0) {
                        let k = [0, 1, 2].map(|a| self.wavenumber(a, at[a]));
                        self.green.spectral(k) / h_physical
                    } else {
                        g
                    };
                    table.push(g * factor);
                }
            }
        }
        Ok(table)
    }

    /// The options planned for.
    pub fn options(&self) -> &PoissonOptions {
        &self.opts
    }

    /// The process grid.
    pub fn proc_grid(&self) -> ProcGrid {
        self.fft.proc_grid()
    }

    /// The cells this rank owns, per axis: the right-hand side and the solution of
    /// [`solve`](Self::solve) cover this block, C order (axis 0 slowest), components fastest.
    pub fn local_block(&self) -> [Range<usize>; 3] {
        self.block.clone()
    }

    /// Values in this rank's block (cells times components).
    pub fn local_len(&self) -> usize {
        self.block.iter().map(|r| r.len()).product::<usize>() * self.opts.components
    }

    /// The memory order of the transform's axes (a0 fastest).
    pub fn order(&self) -> [usize; 3] {
        self.fft.order()
    }

    /// Bytes held by the plan on this rank (transform buffer and Green's spectrum; the
    /// switches' exchange buffers come on top).
    pub fn bytes(&self) -> usize {
        self.fft.bytes() + self.table.len() * 8
    }

    /// Reals each switch sends to other ranks per transform, `[T0->T1, T1->T2]`.
    pub fn switch_elements(&self) -> [usize; 2] {
        self.fft.switch_elements()
    }

    /// Stage times so far.
    pub fn times(&self) -> PoissonTimes {
        PoissonTimes { fft: self.fft.times(), ..self.times }
    }

    /// Solves `lap(phi) = f` for `f = rhs` (this rank's [`local_block`](Self::local_block),
    /// C order, components fastest) into `phi`, same layout. Collective over the plan's
    /// communicator.
    pub fn solve(&mut self, rhs: &[f64], phi: &mut [f64]) -> Result<SolveReport> {
        // checked on every rank and agreed, so that a bad block stops every rank
        self.comm.agree(self.check_rhs(rhs, phi))?;
        let comps = self.opts.components;
        let rows = self.rows();

        let t = Instant::now();
        let mut report = SolveReport { mean_removed: vec![None; comps] };
        if self.zero_mode {
            let total = self.opts.cells.iter().product::<usize>() as f64;
            let mut sums = vec![0.0; comps];
            let mut max = 0.0f64;
            for (q, &v) in rhs.iter().enumerate() {
                sums[q % comps] += v;
                max = max.max(v.abs());
            }
            self.comm.all_reduce_f64(&mut sums, parki_comm::ReduceOp::Sum);
            let max = self.comm.max(max);
            for (c, sum) in sums.into_iter().enumerate() {
                let mean = sum / total;
                if mean.abs() > 1e-12 * max {
                    report.mean_removed[c] = Some(mean);
                }
            }
        }
        {
            let data = self.fft.data_mut();
            rows.for_each(|row, user| {
                for i0 in 0..rows.n0 {
                    data[row + i0] = rhs[user + i0 * rows.stride0];
                }
            });
        }
        self.times.load += t.elapsed().as_secs_f64();
        let t = Instant::now();
        self.fft.forward();
        self.times.forward += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let nf = self.fft.element_reals();
        let cs = self.fft.component_stride();
        {
            let table = &self.table;
            let data = self.fft.data_mut();
            for c in 0..comps {
                let part = &mut data[c * cs..c * cs + nf * table.len()];
                if nf == 2 {
                    for (v, g) in part.chunks_exact_mut(2).zip(table) {
                        v[0] *= g;
                        v[1] *= g;
                    }
                } else {
                    for (v, g) in part.iter_mut().zip(table) {
                        *v *= g;
                    }
                }
            }
        }
        self.times.multiply += t.elapsed().as_secs_f64();
        let t = Instant::now();
        self.fft.backward();
        self.times.backward += t.elapsed().as_secs_f64();
        let t = Instant::now();
        let data = self.fft.data();
        rows.for_each(|row, user| {
            for i0 in 0..rows.n0 {
                phi[user + i0 * rows.stride0] = data[row + i0];
            }
        });
        self.times.store += t.elapsed().as_secs_f64();
        self.times.solves += 1;
        Ok(report)
    }

    /// This rank's check of a solve's arguments: lengths and finite values.
    fn check_rhs(&self, rhs: &[f64], phi: &[f64]) -> Result<()> {
        let len = self.local_len();
        if rhs.len() != len || phi.len() != len {
            return Err(Error::OutOfRange {
                field: "poisson right-hand side".into(),
                value: format!("{} values in, {} out", rhs.len(), phi.len()),
                allowed: format!(
                    "{len} values: this rank's block {:?} times {} components",
                    self.block, self.opts.components
                ),
            });
        }
        if let Some(i) = rhs.iter().position(|v| !v.is_finite()) {
            return Err(Error::OutOfRange {
                field: "poisson right-hand side".into(),
                value: format!("{} at local value {i}", rhs[i]),
                allowed: "finite values".into(),
            });
        }
        Ok(())
    }

    /// Where the a0 rows of the real-space block are, in the transform's buffer and in the
    /// caller's C-order block.
    fn rows(&self) -> Rows {
        let comps = self.opts.components;
        let order = self.fft.order();
        let ext = self.block.clone().map(|r| r.len());
        // element stride of each memory-order axis in the caller's C-order block
        let user_stride = [ext[1] * ext[2], ext[2], 1];
        let stride = order.map(|a| user_stride[a] * comps);
        let [_, yl, zl] = self.fft.topology(0).local();
        let a0 = self.fft.axes()[0];
        debug_assert!(self.fft.element_reals() == 1 || self.fft.is_r2c(), "real rows: one real per slot");
        Rows {
            comps,
            yl,
            zl,
            n0: a0.n,
            first: a0.data_offset,
            row_stride: self.fft.row_stride(),
            component_stride: self.fft.component_stride(),
            stride0: stride[0],
            stride: [stride[1], stride[2]],
        }
    }
}

/// The a0 rows of a solver's real-space block: `n0` values each, `stride0` apart in the
/// caller's block, contiguous from the row's data offset in the transform's buffer.
#[derive(Clone, Copy)]
struct Rows {
    comps: usize,
    yl: usize,
    zl: usize,
    n0: usize,
    first: usize,
    row_stride: usize,
    component_stride: usize,
    stride0: usize,
    stride: [usize; 2],
}

impl Rows {
    /// Calls `f(buffer offset, caller offset)` for the first value of every row.
    fn for_each(&self, mut f: impl FnMut(usize, usize)) {
        for c in 0..self.comps {
            for i2 in 0..self.zl {
                for i1 in 0..self.yl {
                    let row = c * self.component_stride + (i2 * self.yl + i1) * self.row_stride + self.first;
                    f(row, i1 * self.stride[0] + i2 * self.stride[1] + c);
                }
            }
        }
    }
}
