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
use parki_fft3d::{
    memory_order_by, proc_grid_limits_in_order, AxisSpec, DistFft, DistFftOptions, FftTimes, LineEngine, PlanRigor,
    R2rMethod,
};

use crate::bc::{AxisClass, Bc, Centering};
use crate::green::{Green, GreenKind};
use crate::lgf::{screened_1d, Lattice2, Lattice3};

/// How the rotational mode differentiates `psi` (in spectral space, slot by slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Differentiation {
    /// `i k` (DFT axes), `-+k` into the other parity (real-to-real axes).
    Spectral,
    /// The second-order central difference `(psi(x + h) - psi(x - h)) / 2h`: `k` replaced by
    /// `sin(k h) / h`. Along unbounded and semi-unbounded axes the neighbours outside the box
    /// are the free-space solution's (the doubled domain's first padded cells hold it exactly),
    /// at symmetric sides the mirror images.
    Fd2,
}

impl Differentiation {
    /// Name in run.toml: `spectral`, `fd2`.
    pub fn name(self) -> &'static str {
        match self {
            Differentiation::Spectral => "spectral",
            Differentiation::Fd2 => "fd2",
        }
    }

    /// Parses a name of [`name`](Self::name).
    pub fn parse(s: &str) -> Option<Self> {
        [Differentiation::Spectral, Differentiation::Fd2].into_iter().find(|d| d.name() == s)
    }
}

/// What is solved for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldMode {
    /// `lap(phi) = f`, one component.
    Scalar,
    /// `lap(phi_c) = f_c`, three components in one solve.
    Vector,
    /// The rotational (Biot-Savart) mode: `lap(psi) = -omega`, `u = curl(psi)`; the input is
    /// `omega`, the output `u`.
    Curl(Differentiation),
}

impl FieldMode {
    /// Components of the input and the output.
    pub fn components(self) -> usize {
        match self {
            FieldMode::Scalar => 1,
            _ => 3,
        }
    }
}

/// What a [`PoissonSolver`] is planned for.
#[derive(Clone, Debug)]
pub struct PoissonOptions {
    /// Box lengths.
    pub lengths: [f64; 3],
    /// Cells per axis.
    pub cells: [usize; 3],
    /// Cell- or node-centred data ([`PoissonOptions::extents`] values per axis).
    pub centering: Centering,
    /// Boundary conditions per axis: `[low, high]` (of every component unless
    /// `component_bc` is given).
    pub bc: [[Bc; 2]; 3],
    /// Boundary conditions per component of a vector right-hand side (`[c][axis][side]`):
    /// along each axis the components' conditions may differ in their parities only (even
    /// and odd sides; a vorticity's normal and tangential components at a symmetry plane).
    pub component_bc: Option<[[[Bc; 2]; 3]; 3]>,
    /// The Green's function.
    pub green: GreenKind,
    /// HEJ smoothing ratio `eps / h` (FLUPS's `alpha`, 2 by default).
    pub alpha: f64,
    /// Scalar, vector or rotational.
    pub field: FieldMode,
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
    /// What transforms the strided passes' complex lines (RustFFT by default).
    pub lines: LineEngine,
    /// How the DCT-II/III and DST-II/III are computed (through real FFTs by default).
    pub r2r: R2rMethod,
}

impl PoissonOptions {
    /// A scalar problem with CHAT2, one thread, all-to-all-v switches.
    pub fn new(lengths: [f64; 3], cells: [usize; 3], bc: [[Bc; 2]; 3]) -> Self {
        Self {
            lengths,
            cells,
            centering: Centering::Cell,
            bc,
            component_bc: None,
            green: GreenKind::Chat2,
            alpha: 2.0,
            field: FieldMode::Scalar,
            decomposition: Decomposition::Auto,
            proc_grid: None,
            backend: Backend::Alltoallv,
            threads: 1,
            rigor: PlanRigor::Estimate,
            lines: LineEngine::default(),
            r2r: R2rMethod::default(),
        }
    }

    /// Components of the right-hand side and of the solution.
    pub fn components(&self) -> usize {
        self.field.components()
    }

    /// Data points per axis: the cells, or the nodes (`N + 1`, `N` on a periodic axis).
    pub fn extents(&self) -> [usize; 3] {
        [0, 1, 2].map(|a| match AxisClass::of(a, self.bc[a]) {
            Ok(c) => c.extent(self.cells[a], self.centering),
            Err(_) => self.cells[a],
        })
    }

    /// The boundary conditions of component `c` of the right-hand side.
    pub fn bc_of(&self, c: usize) -> [[Bc; 2]; 3] {
        self.component_bc.map_or(self.bc, |b| b[c])
    }
}

/// Seconds per stage of the solves so far.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PoissonTimes {
    /// Copying the right-hand side in.
    pub load: f64,
    /// Forward transform (its FFTs and switches are also in `fft`).
    pub forward: f64,
    /// Multiplying by the Green's spectrum (and differentiating, in the rotational mode).
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

/// The stages of a solve, for per-stage timing tables (min/avg/max over ranks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PoissonStage {
    /// Copying the right-hand side into the transform buffers.
    Load,
    /// The forward transforms (1-D FFTs and switches).
    Forward,
    /// The Green's spectrum (and the curl's derivatives).
    Multiply,
    /// The backward transforms.
    Backward,
    /// Copying the solution out.
    Store,
}

impl parki_core::StageKind for PoissonStage {
    const ALL: &'static [Self] = &[
        PoissonStage::Load,
        PoissonStage::Forward,
        PoissonStage::Multiply,
        PoissonStage::Backward,
        PoissonStage::Store,
    ];

    fn name(self) -> &'static str {
        match self {
            PoissonStage::Load => "load",
            PoissonStage::Forward => "forward",
            PoissonStage::Multiply => "multiply",
            PoissonStage::Backward => "backward",
            PoissonStage::Store => "store",
        }
    }
}

impl PoissonTimes {
    /// The stage seconds as a [`StageTimes`](parki_core::StageTimes) record.
    pub fn stages(&self) -> parki_core::StageTimes<PoissonStage> {
        let mut t = parki_core::StageTimes::default();
        t.add(PoissonStage::Load, self.load);
        t.add(PoissonStage::Forward, self.forward);
        t.add(PoissonStage::Multiply, self.multiply);
        t.add(PoissonStage::Backward, self.backward);
        t.add(PoissonStage::Store, self.store);
        t
    }

    /// The times since `earlier` (of the same solver).
    pub fn since(&self, earlier: &PoissonTimes) -> PoissonTimes {
        PoissonTimes {
            load: self.load - earlier.load,
            forward: self.forward - earlier.forward,
            multiply: self.multiply - earlier.multiply,
            backward: self.backward - earlier.backward,
            store: self.store - earlier.store,
            fft: FftTimes { fft: self.fft.fft - earlier.fft.fft, switch: self.fft.switch - earlier.fft.switch },
            solves: self.solves - earlier.solves,
        }
    }
}

/// What a solve found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SolveReport {
    /// Per component, the mean of the right-hand side removed because no solution exists
    /// otherwise (every axis periodic or even-even), when it was not zero.
    pub mean_removed: Vec<Option<f64>>,
}

/// The components that share one transform (the same kinds along every axis).
struct Group {
    fft: DistFft<f64>,
    /// The user components in the transform's component order.
    comps: Vec<usize>,
    /// The rows of the right-hand side and of the solution.
    rows_in: Rows,
    rows_out: Rows,
    /// Node-centred data: the nodes pinned to zero.
    pinned: Pinned,
}

/// A planned Poisson solve (see the module documentation).
pub struct PoissonSolver {
    comm: Comm,
    /// The options in the length unit `unit` (the caller's when `unit` is 1).
    opts: PoissonOptions,
    /// The caller's options.
    user_opts: PoissonOptions,
    /// The length unit the solver computes in ([`PoissonSolver::length_unit`]).
    unit: f64,
    /// Classes of the right-hand side's components, `[c][axis]`.
    classes: Vec<[AxisClass; 3]>,
    /// Whether the slots of both parities are aligned (see [`AxisClass::field_axis`]).
    aligned: bool,
    green: Green,
    groups: Vec<Group>,
    /// `(group, component in it)` of each user component.
    place: Vec<(usize, usize)>,
    /// `G^` times every normalisation, one per local spectral element.
    table: Vec<f64>,
    /// The rotational mode's derivative factors per memory-order axis over the local spectral
    /// block (`kappa`: `k` or `sin(k h) / h`, 0 at a DFT axis's Nyquist slot).
    kappa: [Vec<f64>; 3],
    /// Owned cells per user axis.
    block: [Range<usize>; 3],
    /// Per component, whether a zero mode exists (every axis periodic or even-even).
    zero_mode: Vec<bool>,
    times: PoissonTimes,
}

/// `u_c = sum of sign * d/dx_d psi_p` for the curl: `(c, [(sign, d, p); 2])`.
const CURL: [[(f64, usize, usize); 2]; 3] =
    [[(1.0, 1, 2), (-1.0, 2, 1)], [(1.0, 2, 0), (-1.0, 0, 2)], [(1.0, 0, 1), (-1.0, 1, 0)]];

impl PoissonSolver {
    /// Plans the solver (collective over `comm`): checks the options, plans the field's
    /// transforms (one per set of components with the same kinds) and computes the Green's
    /// spectrum. A box of three unbounded (or semi-unbounded) axes whose longest side lies far
    /// from 1 is planned in a length unit ([`length_unit`](Self::length_unit)).
    pub fn plan(comm: &Comm, opts: PoissonOptions) -> Result<Self> {
        let unit = Self::unit_for(&opts);
        if unit == 1.0 {
            return Self::plan_in_unit(comm, opts);
        }
        let mut inner = opts.clone();
        inner.lengths = opts.lengths.map(|l| l / unit);
        let mut solver = Self::plan_in_unit(comm, inner)?;
        solver.user_opts = opts;
        solver.unit = unit;
        Ok(solver)
    }

    /// The length unit of `opts`: with three non-spectral axes (the free-space kernel `G(r)`,
    /// `1/r` at large `r`, sampled times the cell volume `h^3`: beyond about `1e100` or below
    /// `1e-100` they leave f64's range and the solution is NaN or 0), the power of two nearest
    /// the longest side when it lies outside `[2^-10, 2^10]` ([`parki_core::units`]); else 1.
    /// With a spectral axis the kernels stay in range at every length (their reductions
    /// depend on `k r` and `ln r`, and a unit would shift the 2-D logarithm by a constant).
    fn unit_for(opts: &PoissonOptions) -> f64 {
        let bc = opts.bc_of(0);
        let free = (0..3).all(|a| AxisClass::of(a, bc[a]).is_ok_and(|c| !c.is_spectral()));
        let valid = opts.lengths.iter().all(|l| l.is_finite() && *l > 0.0);
        if free && valid {
            parki_core::units::box_unit(opts.lengths)
        } else {
            1.0
        }
    }

    /// The length unit the solver computes in: 1, or for a box of three unbounded (or
    /// semi-unbounded) axes whose longest side lies outside `[2^-10, 2^10]` the power of two
    /// `s` nearest it. With lengths over `s` the Laplacian is `s^2` times the caller's, so the
    /// solver solves for the right-hand side times `s^2` (in the rotational mode, `s`: the curl
    /// differentiates once) and the solution is the caller's, exactly (docs/design.md, "Units").
    pub fn length_unit(&self) -> f64 {
        self.unit
    }

    /// The exponents of the powers of two the right-hand side and the solution are multiplied
    /// by in the solver's units: the right-hand side by `s^2 / w` (`s / w` in the rotational
    /// mode) with `s` the [`length_unit`](Self::length_unit) and `w` the strength unit of the
    /// right-hand side times `s^2` (`w` = 1 unless its largest value over every rank,
    /// `largest`, times `s^2` lies outside `[2^-40, 2^40]`), the solution by `w`. The solve is linear: without `w` a
    /// right-hand side of `1e303` overflowed in the transforms (NaN) where the solution is
    /// finite. Exponents rather than factors: `s^2` alone leaves f64's range below `2^-537`.
    fn scale_exponents(&self, largest: f64) -> (i32, i32) {
        use parki_core::units::{exponent_of, strength_unit, times_two_to};
        let p = if matches!(self.opts.field, FieldMode::Curl(_)) { 1 } else { 2 };
        let length = p * exponent_of(self.unit);
        // the strength unit of the right-hand side in the length unit
        let w = exponent_of(strength_unit(times_two_to(largest, length)));
        (length - w, w)
    }

    /// [`plan`](Self::plan) of options in the solver's length unit.
    fn plan_in_unit(comm: &Comm, opts: PoissonOptions) -> Result<Self> {
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
        if opts.component_bc.is_some() && opts.field == FieldMode::Scalar {
            return Err(Error::OutOfRange {
                field: "problem.bc".into(),
                value: "conditions per component".into(),
                allowed: "one pair per axis for a scalar field".into(),
            });
        }
        if !(opts.alpha.is_finite() && opts.alpha > 0.0) {
            return Err(Error::OutOfRange {
                field: "problem.alpha".into(),
                value: opts.alpha.to_string(),
                allowed: "a positive smoothing ratio eps/h".into(),
            });
        }
        let comps = opts.components();
        let mut classes = Vec::with_capacity(comps);
        for c in 0..comps {
            let bc = opts.bc_of(c);
            classes.push([AxisClass::of(0, bc[0])?, AxisClass::of(1, bc[1])?, AxisClass::of(2, bc[2])?]);
        }
        let field_name = |c: usize, a: usize| {
            if opts.component_bc.is_some() {
                format!("problem.bc[{a}] of component {c}")
            } else {
                format!("problem.bc[{a}]")
            }
        };
        for (c, cl) in classes.iter().enumerate().skip(1) {
            for a in 0..3 {
                if !cl[a].shares_slots(classes[0][a]) {
                    return Err(Error::OutOfRange {
                        field: field_name(c, a),
                        value: format!("{:?} beside {:?} of component 0", opts.bc_of(c)[a], opts.bc_of(0)[a]),
                        allowed: "conditions that differ from the other components' in their parities only".into(),
                    });
                }
            }
        }
        let node = opts.centering == Centering::Node;
        if node {
            if let FieldMode::Curl(_) = opts.field {
                return Err(Error::Unsupported {
                    what: "problem.centering = \"node\" with field = \"curl\" (node-centred data are solved for \
                           scalar and vector fields; the rotational mode takes cell-centred data)"
                        .into(),
                });
            }
            for a in 0..3 {
                let odd_odd = AxisClass::Symmetric { low: Bc::Odd, high: Bc::Odd };
                if opts.cells[a] < 2 && classes.iter().any(|c| c[a] == odd_odd) {
                    return Err(Error::OutOfRange {
                        field: "problem.grid".into(),
                        value: format!("{:?}", opts.cells),
                        allowed: format!("at least 2 cells along axis {a}, odd on both sides with node-centred data"),
                    });
                }
                // even-odd and odd-even node transforms put their modes one slot apart
                let kinds = |l: Bc, h: Bc| classes.iter().any(|c| c[a] == AxisClass::Symmetric { low: l, high: h });
                if kinds(Bc::Even, Bc::Odd) && kinds(Bc::Odd, Bc::Even) {
                    return Err(Error::Unsupported {
                        what: format!(
                            "problem.bc[{a}]: components even-odd and odd-even along the same axis with node-centred \
                             data"
                        ),
                    });
                }
            }
        }
        // the output's classes: the curl's components differentiate the others
        let out: Vec<[AxisClass; 3]> = match opts.field {
            FieldMode::Curl(_) => {
                let mut out = Vec::with_capacity(3);
                for terms in CURL {
                    let of = |(_, d, p): (f64, usize, usize)| {
                        [0, 1, 2].map(|a| if a == d { classes[p][a].derivative() } else { classes[p][a] })
                    };
                    let (x, y) = (of(terms[0]), of(terms[1]));
                    if let Some(a) = (0..3).find(|&a| x[a] != y[a]) {
                        return Err(Error::OutOfRange {
                            field: "problem.bc".into(),
                            value: format!(
                                "components {} and {} along axis {a}: their derivatives in the curl have different \
                                 parities ({:?}, {:?})",
                                terms[0].2, terms[1].2, x[a], y[a]
                            ),
                            allowed: "the conditions of a vorticity: at a symmetry plane the normal component even \
                                      and the tangential ones odd, or the reverse (give them per component)"
                                .into(),
                        });
                    }
                    out.push(x);
                }
                out
            }
            _ => classes.clone(),
        };
        let aligned = matches!(opts.field, FieldMode::Curl(_)) || classes.iter().any(|c| *c != classes[0]);
        let h = [0, 1, 2].map(|i| opts.lengths[i] / opts.cells[i] as f64);
        let green = Green::new(opts.green, h, opts.alpha)?;
        let u = classes[0].iter().filter(|c| !c.is_spectral()).count();
        green.check_reduction(u)?;
        // the transforms: one per distinct set of kinds
        let mut specs: Vec<([AxisSpec; 3], Vec<usize>)> = Vec::new();
        for c in 0..comps {
            let axes = [0, 1, 2].map(|a| {
                let (i, o) = (classes[c][a], out[c][a]);
                if node {
                    i.node_axis(opts.cells[a])
                } else if aligned {
                    i.field_axis_to(o, opts.cells[a]).expect("classes checked to share slots")
                } else {
                    i.field_axis(opts.cells[a], false)
                }
            });
            match specs.iter_mut().find(|(s, _)| *s == axes) {
                Some((_, v)) => v.push(c),
                None => specs.push((axes, vec![c])),
            }
        }
        // the caller's block is C order: its last axis contiguous in the transforms' memory
        // wherever their kinds allow, so that loading and storing copy contiguous runs
        let order = memory_order_by(&specs[0].0, [2, 1, 0]);
        let limits = proc_grid_limits_in_order(&specs[0].0, order, false);
        let pg = ProcGrid::choose(comm.size(), opts.decomposition, opts.proc_grid, limits)?;
        let mut groups: Vec<Group> = Vec::with_capacity(specs.len());
        for (axes, members) in specs {
            let fopts = DistFftOptions {
                forward_components: members.len(),
                backward_components: members.len(),
                complex: false,
                backend: opts.backend,
                threads: opts.threads.max(1),
                rigor: opts.rigor,
                lines: opts.lines,
                r2r: opts.r2r,
                fuse_planes: true,
            };
            let fft = DistFft::<f64>::with_axes_in_order(comm, axes, order, pg, fopts)?;
            let pinned = Pinned::new(&fft, &classes[members[0]], opts.cells, opts.centering);
            groups.push(Group { fft, comps: members, rows_in: Rows::EMPTY, rows_out: Rows::EMPTY, pinned });
        }
        let mut place = vec![(0, 0); comps];
        for (g, group) in groups.iter().enumerate() {
            for (j, &c) in group.comps.iter().enumerate() {
                place[c] = (g, j);
            }
        }
        let zero_mode = classes
            .iter()
            .map(|cl| {
                cl.iter()
                    .all(|c| matches!(c, AxisClass::Periodic | AxisClass::Symmetric { low: Bc::Even, high: Bc::Even }))
            })
            .collect();
        let t0 = groups[0].fft.topology(0);
        let mut block = [0..0, 0..0, 0..0];
        block[order[0]] = 0..opts.extents()[order[0]];
        block[order[1]] = t0.range(1);
        block[order[2]] = t0.range(2);
        for g in &mut groups {
            g.rows_in = Rows::new(&g.fft, &block, &g.comps, comps, true);
            g.rows_out = Rows::new(&g.fft, &block, &g.comps, comps, false);
        }
        let mut s = Self {
            comm: comm.clone(),
            user_opts: opts.clone(),
            unit: 1.0,
            opts,
            classes,
            aligned,
            green,
            groups,
            place,
            table: Vec::new(),
            kappa: [Vec::new(), Vec::new(), Vec::new()],
            block,
            zero_mode,
            times: PoissonTimes::default(),
        };
        s.table = s.green_table(pg)?;
        if let FieldMode::Curl(d) = s.opts.field {
            s.kappa = s.derivative_factors(d);
        }
        Ok(s)
    }

    /// The transform of the first group (every group has its layout).
    fn fft(&self) -> &DistFft<f64> {
        &self.groups[0].fft
    }

    /// The derivative factors per memory-order axis over the local spectral block.
    fn derivative_factors(&self, d: Differentiation) -> [Vec<f64>; 3] {
        let fft = self.fft();
        let order = fft.order();
        let t2 = fft.topology(2);
        let ranges = [t2.range(0), t2.range(1), 0..t2.global[2]];
        [0, 1, 2].map(|j| {
            let a = order[j];
            let (n, l) = (self.opts.cells[a], self.opts.lengths[a]);
            let h = l / n as f64;
            let class = self.classes[0][a];
            ranges[j]
                .clone()
                .map(|s| {
                    if class.is_nyquist(n, s) {
                        return 0.0;
                    }
                    let k = self.wavenumber(a, s);
                    match d {
                        Differentiation::Spectral => k,
                        Differentiation::Fd2 => (k * h).sin() / h,
                    }
                })
                .collect()
        })
    }

    /// Wavenumber of field spectral slot `s` along user axis `a`.
    fn wavenumber(&self, a: usize, s: usize) -> f64 {
        let r2c = self.fft().is_r2c() && self.fft().order()[0] == a;
        let (class, n, l) = (self.classes[0][a], self.opts.cells[a], self.opts.lengths[a]);
        match self.opts.centering {
            Centering::Cell => class.wavenumber(n, l, s, r2c, self.aligned),
            Centering::Node => class.node_wavenumber(n, l, s, r2c),
        }
    }

    /// The Green's spectrum on this rank's spectral block, normalisations folded in.
    fn green_table(&self, pg: ProcGrid) -> Result<Vec<f64>> {
        let order = self.fft().order();
        let field_axes = self.fft().axes();
        let mut lines = [0; 3];
        for j in 0..3 {
            lines[order[j]] = self.fft().topology(2).global[j];
        }
        let n = self.opts.cells;
        let h = [0, 1, 2].map(|i| self.opts.lengths[i] / n[i] as f64);
        let gaxes: [AxisSpec; 3] = [0, 1, 2].map(|a| self.classes[0][a].green_axis(n[a], lines[a]));
        let gopts = DistFftOptions {
            forward_components: 1,
            backward_components: 0,
            complex: false,
            backend: self.opts.backend,
            threads: self.opts.threads.max(1),
            rigor: PlanRigor::Estimate,
            lines: self.opts.lines,
            r2r: self.opts.r2r,
            fuse_planes: true,
        };
        let mut gfft = DistFft::<f64>::with_axes_in_order(&self.comm, gaxes, order, pg, gopts)?;
        // sample the kernel in the Green's real-space topology
        let spectral: Vec<usize> = (0..3).filter(|&a| self.classes[0][a].is_spectral()).collect();
        let physical: Vec<usize> = (0..3).filter(|&a| !self.classes[0][a].is_spectral()).collect();
        let t0 = gfft.topology(0);
        let (r1, r2) = (t0.range(1), t0.range(2));
        let n0 = gfft.axes()[0].n;
        // LGF2 with two or three non-spectral axes: the lattice tables, up to the largest offset
        let extent = physical.iter().map(|&a| self.classes[0][a].sample_extent(n[a])).max().unwrap_or(0);
        let (lattice3, lattice2) = match (self.green.kind, physical.len()) {
            (GreenKind::Lgf2, 3) => (Some(Lattice3::new(extent)), None),
            (GreenKind::Lgf2, 2) => (None, Some(Lattice2::new(extent))),
            _ => (None, None),
        };
        let offset = |x: f64, h: f64| (x / h).round() as i64;
        for i2 in r2.clone() {
            for i1 in r1.clone() {
                for i0 in 0..n0 {
                    let idx = [i0, i1, i2];
                    let mut at = [0; 3];
                    for j in 0..3 {
                        at[order[j]] = idx[j];
                    }
                    let x: Vec<f64> = physical.iter().map(|&a| self.classes[0][a].sample(n[a], h[a], at[a])).collect();
                    let k: Vec<f64> = spectral.iter().map(|&a| self.wavenumber(a, at[a])).collect();
                    let hp = |j: usize| h[physical[j]];
                    let v = match physical.len() {
                        3 => match &lattice3 {
                            Some(l) => l.theta([0, 1, 2].map(|j| offset(x[j], hp(j)))) / hp(0),
                            None => self.green.g3((x[0] * x[0] + x[1] * x[1] + x[2] * x[2]).sqrt()),
                        },
                        2 => match &lattice2 {
                            // k != 0: given in full Fourier space instead (filled in below)
                            Some(l) if k[0] == 0.0 => l.green([0, 1].map(|j| offset(x[j], hp(j))), hp(0)),
                            Some(_) => 0.0,
                            None => {
                                let cell = [hp(0), hp(1)];
                                // None: given in full Fourier space instead (filled in below)
                                self.green.g2((x[0] * x[0] + x[1] * x[1]).sqrt(), k[0], cell).unwrap_or(0.0)
                            }
                        },
                        1 => {
                            if self.green.kind == GreenKind::Lgf2 {
                                let hs = [h[spectral[0]], h[spectral[1]]];
                                let sigma = (0..2)
                                    .map(|j| (2.0 * (0.5 * k[j] * hs[j]).sin() / hs[j]).powi(2))
                                    .sum::<f64>()
                                    .sqrt();
                                screened_1d(offset(x[0], hp(0)), sigma, hp(0))
                            } else {
                                self.green.g1(x[0], (k[0] * k[0] + k[1] * k[1]).sqrt())
                            }
                        }
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
        let factor: f64 = (0..3).map(|j| self.classes[0][order[j]].factor(&field_axes[j], h[order[j]])).product();
        let h_physical: f64 = physical.iter().map(|&a| h[a]).product();
        let t2 = self.fft().topology(2);
        let (s0, s1, l2) = (t2.range(0), t2.range(1), t2.global[2]);
        let mut table = Vec::with_capacity(s0.len() * s1.len() * l2);
        // HEJ and LGF2 with two unbounded axes: given in full Fourier space at k != 0 (on every
        // rank), the approximation B.12 of FLUPS
        let spectral_missing = matches!(self.green.kind, GreenKind::Hej(_) | GreenKind::Lgf2) && physical.len() == 2;
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

    /// The options planned for (the caller's).
    pub fn options(&self) -> &PoissonOptions {
        &self.user_opts
    }

    /// The process grid.
    pub fn proc_grid(&self) -> ProcGrid {
        self.fft().proc_grid()
    }

    /// The cells this rank owns, per axis: the right-hand side and the solution of
    /// [`solve`](Self::solve) cover this block, C order (axis 0 slowest), components fastest.
    pub fn local_block(&self) -> [Range<usize>; 3] {
        self.block.clone()
    }

    /// Values in this rank's block (cells times components).
    pub fn local_len(&self) -> usize {
        self.block.iter().map(|r| r.len()).product::<usize>() * self.opts.components()
    }

    /// The memory order of the transform's axes (a0 fastest).
    pub fn order(&self) -> [usize; 3] {
        self.fft().order()
    }

    /// The transforms: one per set of components with the same kinds (one for a scalar, and
    /// for a vector whose components share their conditions).
    pub fn transforms(&self) -> usize {
        self.groups.len()
    }

    /// Bytes held by the plan on this rank: transform buffers, the switches' exchange buffers,
    /// the Green's spectrum and the derivative factors.
    pub fn bytes(&self) -> usize {
        let kappa: usize = self.kappa.iter().map(|k| k.len()).sum();
        self.groups.iter().map(|g| g.fft.bytes()).sum::<usize>() + (self.table.len() + kappa) * 8
    }

    /// Reals each switch sends to other ranks per solve direction, `[T0->T1, T1->T2]`, summed
    /// over the transforms.
    pub fn switch_elements(&self) -> [usize; 2] {
        self.groups.iter().fold([0, 0], |acc, g| {
            let e = g.fft.switch_elements();
            [acc[0] + e[0], acc[1] + e[1]]
        })
    }

    /// Stage times so far.
    pub fn times(&self) -> PoissonTimes {
        let fft = self.groups.iter().fold(FftTimes::default(), |acc, g| {
            let t = g.fft.times();
            FftTimes { fft: acc.fft + t.fft, switch: acc.switch + t.switch }
        });
        PoissonTimes { fft, ..self.times }
    }

    /// Solves `lap(phi) = f` for `f = rhs` (this rank's [`local_block`](Self::local_block),
    /// C order, components fastest) into `phi`, same layout; in the rotational mode `rhs` is
    /// `omega` and `phi` receives `u = curl(psi)`, `lap(psi) = -omega`. Collective over the
    /// plan's communicator.
    pub fn solve(&mut self, rhs: &[f64], phi: &mut [f64]) -> Result<SolveReport> {
        // checked on every rank and agreed, so that a bad block stops every rank
        let largest = self.comm.agree(self.check_rhs(rhs, phi))?;
        let (rhs_exponent, phi_exponent) = self.scale_exponents(self.comm.max(largest));
        let comps = self.opts.components();

        let t = Instant::now();
        let mut report = SolveReport { mean_removed: vec![None; comps] };
        if self.zero_mode.iter().any(|&z| z) {
            let total = self.opts.cells.iter().product::<usize>() as f64;
            // the mean is the zero mode: the trapezoidal rule on node-centred even-even axes
            let ends = [0, 1, 2].map(|a| {
                self.opts.centering == Centering::Node
                    && self.classes[0][a] == AxisClass::Symmetric { low: Bc::Even, high: Bc::Even }
            });
            let weight = |a: usize, u: usize| if ends[a] && (u == 0 || u == self.opts.cells[a]) { 0.5 } else { 1.0 };
            // per component the weighted sum, then the sum of magnitudes: one reduction
            let mut sums = [0.0; 6];
            let run = self.block[2].len() * comps;
            let mut rows = rhs.chunks_exact(run.max(1));
            for w0 in self.block[0].clone().map(|u| weight(0, u)) {
                for w1 in self.block[1].clone().map(|u| weight(1, u)) {
                    let Some(row) = rows.next() else { continue };
                    let (mut s, a) = row_sums(row, comps);
                    // the end nodes of a node-centred even-even axis 2 weigh 1/2
                    for u in [0, self.opts.cells[2]].into_iter().filter(|u| ends[2] && self.block[2].contains(u)) {
                        let at = (u - self.block[2].start) * comps;
                        for c in 0..comps {
                            s[c] -= 0.5 * row[at + c];
                        }
                    }
                    for c in 0..comps {
                        sums[c] += w0 * w1 * s[c];
                        sums[3 + c] += a[c];
                    }
                }
            }
            self.comm.all_reduce_f64(&mut sums, parki_comm::ReduceOp::Sum);
            for c in (0..comps).filter(|&c| self.zero_mode[c]) {
                let mean = sums[c] / total;
                if mean.abs() > 1e-12 * sums[3 + c] / total {
                    report.mean_removed[c] = Some(mean);
                }
            }
        }
        for g in &mut self.groups {
            let rows = g.rows_in;
            let data = g.fft.data_mut();
            rows.load(rhs, data, rhs_exponent);
            g.pinned.zero(&rows, data);
        }
        self.times.load += t.elapsed().as_secs_f64();
        let t = Instant::now();
        for g in &mut self.groups {
            g.fft.forward();
        }
        self.times.forward += t.elapsed().as_secs_f64();
        let t = Instant::now();
        // the rotational mode solves lap(psi) = -omega
        let sign = if matches!(self.opts.field, FieldMode::Curl(_)) { -1.0 } else { 1.0 };
        for g in &mut self.groups {
            multiply(&mut g.fft, g.comps.len(), &self.table, sign);
        }
        if matches!(self.opts.field, FieldMode::Curl(_)) {
            self.curl();
        }
        self.times.multiply += t.elapsed().as_secs_f64();
        let t = Instant::now();
        for g in &mut self.groups {
            g.fft.backward();
        }
        self.times.backward += t.elapsed().as_secs_f64();
        let t = Instant::now();
        for g in &self.groups {
            g.rows_out.store(g.fft.data(), phi, phi_exponent);
        }
        self.times.store += t.elapsed().as_secs_f64();
        self.times.solves += 1;
        Ok(report)
    }

    /// `u^ = curl(psi^)` in place, slot by slot: along a DFT axis `d/dx = i kappa`, along a
    /// real-to-real axis `-kappa` from a cosine series into the sine series of the same slot
    /// and `+kappa` the other way (the aligned lines make the slots match, and each
    /// component's backward transform is of its derivative's parity).
    fn curl(&mut self) {
        let fft = self.fft();
        let (nf, cs) = (fft.element_reals(), fft.component_stride());
        let order = fft.order();
        // per user axis: its memory-order position, and whether it is a DFT axis
        let mut pos = [0; 3];
        for (j, &a) in order.iter().enumerate() {
            pos[a] = j;
        }
        let dft = [0, 1, 2].map(|a| self.classes[0][a].is_dft());
        // the real-to-real derivative's sign of component p along axis a
        let r2r_sign: [[f64; 3]; 3] =
            [0, 1, 2].map(|p| [0, 1, 2].map(|a| if self.classes[p][a].is_cosine() { -1.0 } else { 1.0 }));
        let place = [self.place[0], self.place[1], self.place[2]];
        let [k0, k1, k2] = &self.kappa;
        let mut bufs: [&mut [f64]; 3] = [&mut [], &mut [], &mut []];
        for (b, g) in bufs.iter_mut().zip(self.groups.iter_mut()) {
            *b = g.fft.data_mut();
        }
        let mut t = 0;
        for &z in k2.iter() {
            for &y in k1.iter() {
                for &x in k0.iter() {
                    let kappa_mem = [x, y, z];
                    let kappa = [kappa_mem[pos[0]], kappa_mem[pos[1]], kappa_mem[pos[2]]];
                    // psi^ of the three components: (re, im), im 0 on real data
                    let mut psi = [[0.0; 2]; 3];
                    for p in 0..3 {
                        let (g, j) = place[p];
                        let at = j * cs + nf * t;
                        psi[p][0] = bufs[g][at];
                        if nf == 2 {
                            psi[p][1] = bufs[g][at + 1];
                        }
                    }
                    for (c, terms) in CURL.iter().enumerate() {
                        let mut u = [0.0; 2];
                        for &(sign, d, p) in terms {
                            let v = psi[p];
                            if dft[d] {
                                // i kappa (re + i im) = -kappa im + i kappa re
                                u[0] -= sign * kappa[d] * v[1];
                                u[1] += sign * kappa[d] * v[0];
                            } else {
                                let m = sign * r2r_sign[p][d] * kappa[d];
                                u[0] += m * v[0];
                                u[1] += m * v[1];
                            }
                        }
                        let (g, j) = place[c];
                        let at = j * cs + nf * t;
                        bufs[g][at] = u[0];
                        if nf == 2 {
                            bufs[g][at + 1] = u[1];
                        }
                    }
                    t += 1;
                }
            }
        }
    }

    /// This rank's check of a solve's arguments (lengths and finite values), and the largest
    /// magnitude of its right-hand side (one pass).
    fn check_rhs(&self, rhs: &[f64], phi: &[f64]) -> Result<f64> {
        let len = self.local_len();
        if rhs.len() != len || phi.len() != len {
            return Err(Error::OutOfRange {
                field: "poisson right-hand side".into(),
                value: format!("{} values in, {} out", rhs.len(), phi.len()),
                allowed: format!(
                    "{len} values: this rank's block {:?} times {} components",
                    self.block,
                    self.opts.components()
                ),
            });
        }
        let mut largest = 0.0f64;
        for (i, v) in rhs.iter().enumerate() {
            if !v.is_finite() {
                return Err(Error::OutOfRange {
                    field: "poisson right-hand side".into(),
                    value: format!("{v} at local value {i}"),
                    allowed: "finite values".into(),
                });
            }
            largest = largest.max(v.abs());
        }
        Ok(largest)
    }
}

/// Per component, the sum of the values of `row` (`comps` interleaved components) and the
/// sum of their magnitudes; four partial sums per scalar row so that the loop vectorises.
fn row_sums(row: &[f64], comps: usize) -> ([f64; 3], [f64; 3]) {
    let (mut s, mut a) = ([0.0; 3], [0.0; 3]);
    if comps == 1 {
        let (mut s4, mut a4) = ([0.0; 4], [0.0; 4]);
        let mut chunks = row.chunks_exact(4);
        for ch in &mut chunks {
            for k in 0..4 {
                s4[k] += ch[k];
                a4[k] += ch[k].abs();
            }
        }
        for &v in chunks.remainder() {
            s4[0] += v;
            a4[0] += v.abs();
        }
        s[0] = s4.iter().sum();
        a[0] = a4.iter().sum();
    } else {
        for point in row.chunks_exact(comps) {
            for (c, &v) in point.iter().enumerate() {
                s[c] += v;
                a[c] += v.abs();
            }
        }
    }
    (s, a)
}

/// Multiplies each of the `comps` spectra of `fft` by `sign * table`.
fn multiply(fft: &mut DistFft<f64>, comps: usize, table: &[f64], sign: f64) {
    let nf = fft.element_reals();
    let cs = fft.component_stride();
    let data = fft.data_mut();
    for c in 0..comps {
        let part = &mut data[c * cs..c * cs + nf * table.len()];
        if nf == 2 {
            for (v, g) in part.chunks_exact_mut(2).zip(table) {
                v[0] *= sign * g;
                v[1] *= sign * g;
            }
        } else {
            for (v, g) in part.iter_mut().zip(table) {
                *v *= sign * g;
            }
        }
    }
}

/// The nodes an odd side pins to zero (node-centred data), in a group's first topology: their
/// indices along memory axis 0, and the local rows along memory axes 1 and 2.
#[derive(Clone, Debug, Default)]
struct Pinned {
    line: Vec<usize>,
    rows: [Vec<usize>; 2],
}

impl Pinned {
    fn new(fft: &DistFft<f64>, classes: &[AxisClass; 3], cells: [usize; 3], centering: Centering) -> Self {
        let mut p = Pinned::default();
        if centering == Centering::Cell {
            return p;
        }
        let order = fft.order();
        let t0 = fft.topology(0);
        for (j, &a) in order.iter().enumerate() {
            for node in classes[a].pinned_nodes(cells[a]).into_iter().flatten() {
                if j == 0 {
                    p.line.push(node);
                } else if t0.range(j).contains(&node) {
                    p.rows[j - 1].push(node - t0.range(j).start);
                }
            }
        }
        p
    }

    /// Zeroes the pinned nodes of `data`, whose rows are `rows`.
    fn zero(&self, rows: &Rows, data: &mut [f64]) {
        if self.line.is_empty() && self.rows.iter().all(|r| r.is_empty()) {
            return;
        }
        for c in 0..rows.comps {
            for i2 in 0..rows.zl {
                for i1 in 0..rows.yl {
                    let row = rows.row(c, i1, i2);
                    let line = &mut data[row..row + rows.n0];
                    if self.rows[0].contains(&i1) || self.rows[1].contains(&i2) {
                        line.fill(0.0);
                    } else {
                        for &p in &self.line {
                            line[p] = 0.0;
                        }
                    }
                }
            }
        }
    }
}

/// Rows copied together between the caller's block and a transform when memory axis 0 is not
/// the caller's contiguous axis: per value of `i0` the tile reads (or writes) this many
/// neighbouring values, one cache line of f64.
const TILE: usize = 8;

/// The a0 rows of a transform's real-space block: `n0` values each, `stride0` apart in the
/// caller's block, contiguous from the row's data offset in the transform's buffer.
#[derive(Clone, Copy)]
struct Rows {
    /// Components of the transform (at most 3), and the user component of each.
    comps: usize,
    user: [usize; 3],
    user_comps: usize,
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
    const EMPTY: Rows = Rows {
        comps: 0,
        user: [0; 3],
        user_comps: 0,
        yl: 0,
        zl: 0,
        n0: 0,
        first: 0,
        row_stride: 0,
        component_stride: 0,
        stride0: 0,
        stride: [0, 0],
    };

    /// The rows of `fft` for the caller's `block` of `user_comps` components, the transform's
    /// components being the user components `members`; `forward`: where the right-hand side
    /// goes in, else where the solution comes out.
    fn new(fft: &DistFft<f64>, block: &[Range<usize>; 3], members: &[usize], user_comps: usize, forward: bool) -> Rows {
        let order = fft.order();
        let ext = block.clone().map(|r| r.len());
        // element stride of each memory-order axis in the caller's C-order block
        let user_stride = [ext[1] * ext[2], ext[2], 1];
        let stride = order.map(|a| user_stride[a] * user_comps);
        let [_, yl, zl] = fft.topology(0).local();
        let a0 = fft.axes()[0];
        debug_assert!(fft.element_reals() == 1 || fft.is_r2c(), "real rows: one real per slot");
        let mut user = [0; 3];
        user[..members.len()].copy_from_slice(members);
        Rows {
            comps: members.len(),
            user,
            user_comps,
            yl,
            zl,
            n0: a0.n,
            first: a0.offsets(forward).1,
            row_stride: fft.row_stride(),
            component_stride: fft.component_stride(),
            stride0: stride[0],
            stride: [stride[1], stride[2]],
        }
    }

    /// The buffer offset of the first value of component `c`'s row at local `(i1, i2)`.
    #[inline]
    fn row(&self, c: usize, i1: usize, i2: usize) -> usize {
        c * self.component_stride + (i2 * self.yl + i1) * self.row_stride + self.first
    }

    /// The caller's offset of the first value of component `c`'s row at local `(i1, i2)`.
    #[inline]
    fn user(&self, c: usize, i1: usize, i2: usize) -> usize {
        i1 * self.stride[0] + i2 * self.stride[1] + self.user[c]
    }

    /// Calls `f(tile)` with the `(buffer offset, caller offset)` of rows to be copied
    /// together, every row once. When the caller's contiguous axis is memory axis 0 a tile is
    /// the components at one `(i1, i2)`: their rows interleave in the caller's block. Otherwise
    /// it is the components at up to [`TILE`] neighbours along the memory axis of smaller
    /// caller stride, so that for each `i0` the tile touches neighbouring values of the
    /// caller's block instead of one cache line per value (a blocked transpose).
    fn for_each_tile(&self, mut f: impl FnMut(&[(usize, usize)])) {
        let mut tile = [(0, 0); 3 * TILE];
        let (along_i1, run) = if self.stride0 <= self.user_comps {
            (true, 1)
        } else {
            (self.stride[0] <= self.stride[1], TILE.div_ceil(self.comps).max(1))
        };
        let (outer, inner) = if along_i1 { (self.zl, self.yl) } else { (self.yl, self.zl) };
        for o in 0..outer {
            let mut start = 0;
            while start < inner {
                let end = (start + run).min(inner);
                let mut k = 0;
                for i in start..end {
                    let (i1, i2) = if along_i1 { (i, o) } else { (o, i) };
                    for c in 0..self.comps {
                        tile[k] = (self.row(c, i1, i2), self.user(c, i1, i2));
                        k += 1;
                    }
                }
                f(&tile[..k]);
                start = end;
            }
        }
    }

    /// Copies the caller's `rhs` times `2^e` (exact) into the rows of `data`.
    fn load(&self, rhs: &[f64], data: &mut [f64], e: i32) {
        let (n0, s0) = (self.n0, self.stride0);
        let scale = |v: f64| parki_core::units::times_two_to(v, e);
        self.for_each_tile(|tile| {
            if s0 == 1 {
                for &(row, user) in tile {
                    let (to, from) = (&mut data[row..row + n0], &rhs[user..user + n0]);
                    if e == 0 {
                        to.copy_from_slice(from);
                    } else {
                        to.iter_mut().zip(from).for_each(|(t, f)| *t = scale(*f));
                    }
                }
            } else {
                for i0 in 0..n0 {
                    for &(row, user) in tile {
                        data[row + i0] = scale(rhs[user + i0 * s0]);
                    }
                }
            }
        });
    }

    /// Copies the rows of `data` times `2^e` (exact) into the caller's `phi`.
    fn store(&self, data: &[f64], phi: &mut [f64], e: i32) {
        let (n0, s0) = (self.n0, self.stride0);
        let scale = |v: f64| parki_core::units::times_two_to(v, e);
        self.for_each_tile(|tile| {
            if s0 == 1 {
                for &(row, user) in tile {
                    let (to, from) = (&mut phi[user..user + n0], &data[row..row + n0]);
                    if e == 0 {
                        to.copy_from_slice(from);
                    } else {
                        to.iter_mut().zip(from).for_each(|(t, f)| *t = scale(*f));
                    }
                }
            } else {
                for i0 in 0..n0 {
                    for &(row, user) in tile {
                        phi[user + i0 * s0] = scale(data[row + i0]);
                    }
                }
            }
        });
    }
}
