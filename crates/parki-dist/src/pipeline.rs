//! [`DistEwaldSolver`]: the spectral Ewald pipeline over the ranks of a communicator (data flow
//! of ARCHITECTURE.md); one rank is the single-process solver ([`crate::EwaldSolver`]).
//!
//! Ownership follows cells: the process grid `[P_y, P_z]` splits the cell layers of the global
//! cell grid (cells at least `r_c` wide) and a particle belongs to the owner of its cell column
//! ([`CellOwnership`]), so the near field sums exactly the pairs of the single-process solver
//! and distributed results agree with it to rounding. The FFT grid is split evenly over the
//! same process grid, independently of the cells (FLUPS topologies, `parki_fft3d::DistFft`).
//!
//! One evaluation ([`DistEwaldSolver::evaluate`]) is the list of its stages ([`EwaldStage`]):
//! checks, MPI-SORT ([`Route`]), ghost sources ([`GhostPlan`]), P2P on the window cell grid,
//! P2G onto the grid block, the reverse halo exchange ([`HaloPlan`]), FFT, CNV, IFFT, the
//! ghost-grid exchange, G2P, and the return of the results. The host-side, collective steps are
//! here; the compute stages and their resident data are the backend's ([`EwaldBackend`]). On
//! one rank the sort, ghost, halo and return steps do nothing and copy nothing: the stages read
//! the caller's arrays and write the caller's output.
//!
//! A box far from 1 is planned and evaluated in a power-of-two unit of length near its longest
//! side, and strengths far from 1 are evaluated in a power-of-two unit near the largest
//! ([`crate::units`]): the options, the parameters and the inputs are converted exactly, and
//! every value the caller sees (parameters, errors, results) is in the caller's units.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use parki_comm::{Comm, ReduceOp};
use parki_core::{
    Error, Output, PackedSet, PackedSources, Par, Points, Result, SourceSet, Sources, StageName, StageTimes,
};
use parki_decomp::{
    split_range, BlockPlacement, CellOwnership, GhostPlan, HaloPlan, OwnedRows, ProcGrid, Route, SortMode,
};
use parki_farfield::{GridWindow, Params};
use parki_nearfield::{CellGrid, Isa};

use crate::backend::{BackendSetup, CpuBackend, EwaldBackend, PlanningQuery};
use crate::inputs::{check_exact, check_inputs, Neutrality};
use crate::options::{EwaldOptions, ExactPositions, ParallelOptions, Targets};
use crate::plan::{self, MemoryEstimate};
use crate::stage::EwaldStage;
use crate::units::{self, ScaledInputs, Units};
use crate::SolverReal;

/// What one evaluation reports.
#[derive(Clone, Debug, Default)]
pub struct Evaluation {
    /// Wall time per stage (this rank).
    pub times: StageTimes<EwaldStage>,
    /// Warnings about the input (non-neutral charge, net force).
    pub warnings: Vec<String>,
    /// Real sources per padded slot in the cell lists (padding overhead).
    pub padding_efficiency: f64,
    /// Evaluated P2P pairs on this rank (padding included).
    pub pairs: u64,
    /// P2P's device seconds on this rank where it ran overlapped with the far field
    /// ([`crate::DeviceOverlap::P2p`]): the `P2P` stage's time then only queued it, and the
    /// stages after it hold what the overlap did not hide.
    pub overlapped_p2p: Option<f64>,
    /// The strength unit `w` the evaluation computed in: 1, or for strengths beyond `2^40` or
    /// below `2^-40` the power of two nearest the largest (charges and forces over `w`, dipoles
    /// over `w s`, the results times `w`: exact; docs/design.md, "Units").
    pub strength_unit: f64,
}

impl Evaluation {
    /// P2P's seconds: the device's where it ran overlapped, else its stage's.
    pub fn p2p_seconds(&self) -> f64 {
        self.overlapped_p2p.unwrap_or_else(|| self.times.get(EwaldStage::P2P))
    }
}

/// What [`DistEwaldSolver::prepare`] finds for one evaluation.
struct Prepared {
    warnings: Vec<String>,
    background: f64,
    constant: [f64; 3],
    net_charge: f64,
    units: Units,
}

/// A planned spectral Ewald solver over the ranks of a communicator (see the module
/// documentation), computing on the backend `B` (the CPU by default).
pub struct DistEwaldSolver<T: SolverReal, B: EwaldBackend<T> = CpuBackend<T>> {
    comm: Comm,
    /// The options in the length unit `unit` (the caller's when `unit` is 1).
    opts: EwaldOptions,
    /// The caller's options.
    user_opts: EwaldOptions,
    /// The length unit the solver computes in ([`crate::units`]).
    unit: f64,
    /// The caller's positions, dipoles and targets over `unit` (empty when it is 1).
    scaled: ScaledInputs<T>,
    output: Output,
    popts: ParallelOptions,
    /// The parameters in the length unit `unit`.
    unit_params: Params,
    /// `unit_params` in the caller's units.
    params: Params,
    threads: usize,
    isa: Isa,
    pool: Arc<rayon::ThreadPool>,
    own: CellOwnership,
    cells: CellGrid,
    ghosts: GhostPlan,
    neighbours: Vec<usize>,
    halo: Option<HaloPlan>,
    memory: MemoryEstimate,
    backend: B,
    _real: std::marker::PhantomData<T>,
}

/// This rank's particles during one evaluation: the caller's own arrays on one rank, what
/// MPI-SORT delivered (ghost sources appended) on several.
struct Local<'a, T: Copy> {
    caller: Option<Sources<'a, T>>,
    received: PackedSet<T>,
    owned: usize,
    targets: LocalTargets<'a, T>,
    routes: Option<(Route, Option<Route>)>,
    /// Window cells of the ghost sources (they follow from where a ghost came from).
    ghost_keys: Vec<u32>,
    /// The sources' position residuals (owned, then ghosts), where the evaluation has them
    /// ([`DistEwaldSolver::evaluate_exact`]).
    residuals: Option<Cow<'a, [[T; 3]]>>,
    /// The separate targets' position residuals, where the evaluation has them.
    target_residuals: Option<Cow<'a, [[T; 3]]>>,
    result: Vec<T>,
}

enum LocalTargets<'a, T> {
    /// The owned sources.
    Sources,
    /// The caller's points (one rank).
    Caller(&'a [[T; 3]]),
    /// Points received by MPI-SORT.
    Received(Vec<[T; 3]>),
}

/// A source set of one evaluation: the caller's arrays or packed received ones, with their
/// position residuals where the evaluation has them.
#[derive(Clone, Copy)]
struct View<'a, T> {
    set: ViewSet<'a, T>,
    residuals: Option<&'a [[T; 3]]>,
}

#[derive(Clone, Copy)]
enum ViewSet<'a, T> {
    Caller(Sources<'a, T>),
    Packed(PackedSources<'a, T>),
}

impl<T: SolverReal> SourceSet<T> for View<'_, T> {
    fn positions(&self) -> &[[T; 3]] {
        match &self.set {
            ViewSet::Caller(s) => s.positions,
            ViewSet::Packed(p) => p.positions,
        }
    }

    #[inline]
    fn density(&self, kernel: parki_core::Kernel, j: usize, out: &mut [T]) {
        match &self.set {
            ViewSet::Caller(s) => s.density(kernel, j, out),
            ViewSet::Packed(p) => p.density(kernel, j, out),
        }
    }

    #[inline]
    fn prefetch(&self, kernel: parki_core::Kernel, j: usize) {
        match &self.set {
            ViewSet::Caller(s) => s.prefetch(kernel, j),
            ViewSet::Packed(p) => p.prefetch(kernel, j),
        }
    }

    fn residuals(&self) -> Option<&[[T; 3]]> {
        self.residuals
    }
}

impl<'a, T: SolverReal> Local<'a, T> {
    /// Owned and ghost sources.
    fn all(&self) -> View<'_, T> {
        let set = match self.caller {
            Some(s) => ViewSet::Caller(s),
            None => ViewSet::Packed(self.received.view()),
        };
        View { set, residuals: self.residuals.as_deref() }
    }

    /// Owned sources.
    fn owned(&self) -> View<'_, T> {
        let set = match self.caller {
            Some(s) => ViewSet::Caller(s),
            None => ViewSet::Packed(self.received.first(self.owned)),
        };
        View { set, residuals: self.residuals.as_deref().map(|r| &r[..self.owned]) }
    }

    /// The owned targets with their position residuals, where the evaluation has them.
    fn target_points(&self) -> Points<'_, T> {
        let residuals = match &self.targets {
            LocalTargets::Sources => self.residuals.as_deref().map(|r| &r[..self.owned]),
            _ => self.target_residuals.as_deref(),
        };
        Points { positions: self.targets(), residuals }
    }

    /// Owned targets.
    fn targets(&self) -> &[[T; 3]] {
        match &self.targets {
            LocalTargets::Sources => match self.caller {
                Some(s) => s.positions,
                None => &self.received.positions[..self.owned],
            },
            LocalTargets::Caller(p) => p,
            LocalTargets::Received(v) => v,
        }
    }
}

/// Runs the stages of one evaluation, timing each and reporting it to `progress`.
struct Stages<'p> {
    times: StageTimes<EwaldStage>,
    progress: &'p mut (dyn FnMut(EwaldStage, f64) + Send),
}

impl Stages<'_> {
    fn run<R>(&mut self, stage: EwaldStage, f: impl FnOnce() -> R) -> R {
        let t = Instant::now();
        let r = f();
        let dt = t.elapsed().as_secs_f64();
        self.times.add(stage, dt);
        (self.progress)(stage, dt);
        r
    }
}

impl<T: SolverReal> DistEwaldSolver<T> {
    /// Plans a solver on the CPU over `comm` for `sources` and `targets` particles in total
    /// (over all ranks). Collective; every rank gets the same error if one fails.
    ///
    /// # Errors
    /// A tolerance or fixed parameter out of range, a process grid the problem cannot be split
    /// over, or a problem whose estimated memory exceeds what the node's ranks have (the message
    /// names the counts and the estimate).
    pub fn new(
        comm: &Comm,
        opts: &EwaldOptions,
        popts: ParallelOptions,
        sources: usize,
        targets: usize,
    ) -> Result<Self> {
        Self::with_backend(comm, opts, popts, sources, targets)
    }
}

impl<T: SolverReal, B: EwaldBackend<T>> DistEwaldSolver<T, B> {
    /// Plans a solver computing on the backend `B` (see [`DistEwaldSolver::new`]).
    ///
    /// # Errors
    /// As [`DistEwaldSolver::new`], and the backend's own (device memory, device absent).
    pub fn with_backend(
        comm: &Comm,
        opts: &EwaldOptions,
        popts: ParallelOptions,
        sources: usize,
        targets: usize,
    ) -> Result<Self> {
        let (opts_in, unit) = comm.agree(in_unit(opts))?;
        let (choice, pgrid, memory) = comm.agree(Self::choose(comm, &opts_in, unit, popts, sources, targets, 0.0))?;
        comm.agree(Self::build(comm, &opts_in, (opts, unit), popts, choice, pgrid, memory, sources, targets))
    }

    /// The memory one rank would need for `sources` and `targets` particles in total, without
    /// allocating anything; errors as [`new`](DistEwaldSolver::new) would. Collective.
    ///
    /// # Errors
    /// As [`DistEwaldSolver::new`].
    pub fn estimate_memory(
        comm: &Comm,
        opts: &EwaldOptions,
        popts: ParallelOptions,
        sources: usize,
        targets: usize,
    ) -> Result<MemoryEstimate> {
        let (opts, unit) = comm.agree(in_unit(opts))?;
        comm.agree(Self::choose(comm, &opts, unit, popts, sources, targets, 0.0)).map(|(_, _, m)| m)
    }

    /// The parameters a solver for `sources` and `targets` would use (with their predicted
    /// cost), without allocating anything. Collective.
    ///
    /// # Errors
    /// As [`DistEwaldSolver::new`].
    pub fn parameters(
        comm: &Comm,
        opts: &EwaldOptions,
        popts: ParallelOptions,
        sources: usize,
        targets: usize,
    ) -> Result<Params> {
        let (opts, unit) = comm.agree(in_unit(opts))?;
        comm.agree(Self::choose(comm, &opts, unit, popts, sources, targets, 0.0))
            .map(|(c, _, _)| c.params.in_length_unit(unit))
    }

    /// As [`estimate_memory`](Self::estimate_memory), with `caller_bytes` more per rank (the
    /// caller's own arrays: inputs, outputs) counted against the node's memory: what an
    /// application asks before it reads or generates its particles. Collective.
    ///
    /// # Errors
    /// As [`DistEwaldSolver::new`], counting the caller's bytes too.
    pub fn check_memory(
        comm: &Comm,
        opts: &EwaldOptions,
        popts: ParallelOptions,
        sources: usize,
        targets: usize,
        caller_bytes: f64,
    ) -> Result<MemoryEstimate> {
        let (opts, unit) = comm.agree(in_unit(opts))?;
        comm.agree(Self::choose(comm, &opts, unit, popts, sources, targets, caller_bytes)).map(|(_, _, m)| m)
    }

    /// Parameters, process grid and memory estimate, checked against the node's memory with
    /// `caller_bytes` of the caller's own arrays per rank; `opts` in the length unit `unit`
    /// (the copies of the inputs in it are counted when it is not 1).
    fn choose(
        comm: &Comm,
        opts: &EwaldOptions,
        unit: f64,
        popts: ParallelOptions,
        sources: usize,
        targets: usize,
        caller_bytes: f64,
    ) -> Result<(plan::Choice, ProcGrid, MemoryEstimate)> {
        // the collectives first, on every rank whatever fails later on one of them: the node's
        // share of the memory, the host's grid budget, the backend's hints (agreed: a device
        // missing on one rank is every rank's error) and its grid budget
        let share = plan::node_share(comm);
        let host_budget = plan::grid_budget(comm, opts, share);
        let ranks = comm.size();
        let query = PlanningQuery {
            kernel: opts.kernel,
            field: opts.field,
            ranks,
            local_rank: plan::node_rank(comm),
            sources: sources.div_ceil(ranks) + 1,
            targets: if ranks == 1 { targets } else { targets.div_ceil(ranks) + 1 },
            device: opts.device,
            free_axes: opts.domain.periodicity() < 3,
        };
        let hints = comm.agree(B::planning(&query))?;
        let device_budget = comm.min(hints.grid_budget.map_or(u64::MAX, |b| b as u64));
        let device_budget_bytes = usize::try_from(device_budget).unwrap_or(usize::MAX);
        // a backend holding the grid in its own memory is bounded by that memory alone (unless
        // the options fix a limit)
        let (budget, device_limited) = match (hints.device_resident, opts.max_grid_bytes) {
            (true, None) => (device_budget_bytes, true),
            _ => (host_budget.min(device_budget_bytes), device_budget < host_budget as u64),
        };
        parki_core::validate::check_tolerance::<T>(opts.tolerance)?;
        // the particles alone must fit before any parameter is chosen for them
        let threads = opts.threads.max(1);
        let per_rank = |n: usize| n.div_ceil(ranks) as f64;
        let copies = if unit == 1.0 {
            0.0
        } else {
            // the targets as if separate (an evaluation on the sources copies none)
            ScaledInputs::<T>::bytes(per_rank(sources), per_rank(targets), opts.kernel.needs_dipoles())
        };
        // in f32, the position residuals of `evaluate_exact` (the caller's, and on several ranks
        // the routed ones with the ghosts'), counted whether or not an evaluation has them
        let copies = copies + ScaledInputs::<T>::residual_bytes(per_rank(sources), per_rank(targets), ranks > 1);
        MemoryEstimate::new::<T>(opts, None, sources, targets, comm.size(), threads, 1.0)
            .device_resident(hints.device_resident, opts, sources, targets, T::BYTES)
            .with_copies(copies)
            .with_caller(caller_bytes)
            .check(sources, targets, share.0, share.1)?;
        let choice = plan::choose::<T>(opts, sources, targets, budget, &hints).map_err(|e| match e {
            Error::Resource { message } if device_limited => Error::Resource {
                message: format!(
                    "{message}; here the limit is the device's: its free memory less the particles' arrays and \
                     the FFT's work areas (use more ranks on more devices, or loosen the tolerance)"
                ),
            },
            e => e,
        })?;
        let p = &choice.params;
        let ncell = p.cells;
        let [mx, my, mz] = p.grid;
        let fft_limits = match &p.free {
            None => [my.min(mx / 2 + 1), mz.min(my)],
            Some(f) => parki_fft3d::proc_grid_limits_in_order(&f.axes(), [0, 1, 2], false),
        };
        let pgrid = ProcGrid::choose(
            comm.size(),
            popts.decomposition,
            popts.grid,
            [fft_limits[0].min(ncell[1]), fft_limits[1].min(ncell[2])],
        )?;
        let own = CellOwnership::new(pgrid, ncell, opts.domain.periodic());
        let (wy, wz) = (own.window(comm.rank(), 0), own.window(comm.rank(), 1));
        let ghost_factor = (wy.len * wz.len) as f64 / own.column_count(comm.rank()).max(1) as f64;
        let memory =
            MemoryEstimate::new::<T>(opts, Some(p), sources, targets, comm.size(), choice.threads, ghost_factor)
                .device_resident(hints.device_resident, opts, sources, targets, T::BYTES)
                .with_copies(copies)
                .with_caller(caller_bytes);
        memory.check(sources, targets, share.0, share.1)?;
        Ok((choice, pgrid, memory))
    }

    /// The solver for `opts` in the length unit `caller.1` of the caller's options `caller.0`.
    #[allow(clippy::too_many_arguments)]
    fn build(
        comm: &Comm,
        opts: &EwaldOptions,
        caller: (&EwaldOptions, f64),
        popts: ParallelOptions,
        choice: plan::Choice,
        pgrid: ProcGrid,
        memory: MemoryEstimate,
        sources: usize,
        targets: usize,
    ) -> Result<Self> {
        let plan::Choice { params, threads, isa, pair_accuracy } = choice;
        let output = opts.output()?;
        let field_method = opts.field_request();
        let me = comm.rank();
        let global_cells = CellGrid::new(&opts.domain, params.rc)?;
        let ncell = global_cells.global_dims();
        let periodic = opts.domain.periodic();
        let own = CellOwnership::new(pgrid, ncell, periodic);
        let (wx, wy, wz) = (own.window_x(), own.window(me, 0), own.window(me, 1));
        let cells = global_cells.window(
            [wx.origin, wy.origin, wz.origin],
            [wx.len, wy.len, wz.len],
            [wx.wrap, wy.wrap, wz.wrap],
        );

        // the grid: along free axes the data of the extended grid (data index = grid index +
        // offset) and, for x, the padded transform row
        let free = params.free.clone();
        let data = free.as_ref().map_or(params.grid, |f| f.data);
        let offset = free.as_ref().map_or([0; 3], |f| f.offset).map(|o| o as i64);
        let row_x = free.as_ref().map_or(params.grid[0], |f| if periodic[0] { f.grid[0] } else { f.fft_len[0] });

        // the grid block covering the supports of the particles in the owned cells: `(origin
        // as a grid index, points, wraps, split)`
        let half = (params.p / 2) as i64;
        let lengths = opts.domain.lengths();
        let cw = global_cells.widths();
        let owned_cells = own.columns(me);
        let block_axis = |a: usize| -> (i64, usize, bool, bool) {
            let d = a + 1;
            if pgrid.dims[a] == 1 {
                return (-offset[d], data[d], periodic[d], false);
            }
            let r = &owned_cells[a];
            let inv_h = params.grid[d] as f64 / lengths[d];
            let lo = (r.start as f64 * cw[d] * inv_h).floor() as i64 - half - 1;
            let hi = (r.end as f64 * cw[d] * inv_h).floor() as i64 + half + 2;
            if periodic[d] {
                let n = ((hi - lo) as usize).next_multiple_of(2);
                (lo, n, false, true)
            } else {
                // inside the data: grid indices -offset .. data - offset
                let (lo, hi) = (lo.max(-offset[d]), hi.min(data[d] as i64 - offset[d]));
                (lo, (hi - lo) as usize, false, true)
            }
        };
        let (by, bny, bwy, sy) = block_axis(0);
        let (bz, bnz, bwz, sz) = block_axis(1);
        let direct = !sy && !sz;
        let layout = parki_decomp::GridLayout { global: [row_x, bny, bnz], stride: None };
        let window = GridWindow::windowed(
            layout,
            params.grid,
            [-offset[0], by, bz],
            [periodic[0], bwy, bwz],
            params.h,
            &params.poly,
        );
        let kernel = opts.kernel;
        let halo = (!direct).then(|| {
            let [iy, iz] = pgrid.coords(me);
            let rows = OwnedRows {
                global: data,
                pgrid,
                y: split_range(data[1], pgrid.dims[0], iy),
                z: split_range(data[2], pgrid.dims[1], iz),
            };
            let placement = BlockPlacement {
                dims: layout.global,
                origin: [0, by + offset[1], bz + offset[2]],
                wrap: [true, bwy, bwz],
            };
            HaloPlan::new(
                comm,
                placement,
                &rows,
                kernel.grid_components(),
                parki_farfield::FieldMethod::grid_outputs(field_method, kernel),
                T::BYTES,
                popts.backend,
                [EwaldStage::Halo.into(), EwaldStage::GridGhost.into()],
                EwaldStage::Halo.into(),
            )
        });
        let ranks = comm.size();
        let setup = BackendSetup {
            kernel,
            output,
            field_method,
            params: &params,
            lengths,
            cells: &cells,
            window: &window,
            direct,
            comm,
            pgrid,
            switches: popts.backend,
            fft_rigor: opts.fft_rigor,
            fft_lines: opts.fft_lines,
            p2g: opts.p2g,
            g2p: opts.g2p,
            isa,
            pair_accuracy,
            threads,
            device: opts.device,
            local_rank: plan::node_rank(comm),
            sources: sources.div_ceil(ranks) + 1,
            targets: if ranks == 1 { targets } else { 0 },
        };
        let backend = B::plan(&setup)?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .map_err(|e| Error::Resource { message: format!("cannot start {threads} threads: {e}") })?;
        Ok(Self {
            comm: comm.clone(),
            opts: opts.clone(),
            user_opts: caller.0.clone(),
            unit: caller.1,
            scaled: ScaledInputs::default(),
            output,
            popts,
            params: params.in_length_unit(caller.1),
            unit_params: params,
            threads,
            isa,
            pool: Arc::new(pool),
            ghosts: GhostPlan::new(&own, me),
            neighbours: own.neighbours(me),
            own,
            cells,
            halo,
            memory,
            backend,
            _real: std::marker::PhantomData,
        })
    }

    /// The chosen parameters (in the caller's units).
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// The options the solver was planned with (the caller's).
    pub fn options(&self) -> &EwaldOptions {
        &self.user_opts
    }

    /// The length unit the solver computes in: 1, or for a box whose longest side lies outside
    /// `[2^-10, 2^10]` the power of two nearest it ([`parki_core::units`]; [`cells`](Self::cells)
    /// is in this unit).
    pub fn length_unit(&self) -> f64 {
        self.unit
    }

    /// The process grid.
    pub fn proc_grid(&self) -> ProcGrid {
        self.own.pgrid
    }

    /// The parallel options.
    pub fn parallel(&self) -> &ParallelOptions {
        &self.popts
    }

    /// The communicator.
    pub fn comm(&self) -> &Comm {
        &self.comm
    }

    /// Threads per rank.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Instruction set of P2P.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// The backend's name (`"cpu"`).
    pub fn backend_name(&self) -> &'static str {
        self.backend.name()
    }

    /// The backend (its device, variants and memory, for reports).
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The memory estimate the plan was checked against (per rank).
    pub fn memory(&self) -> &MemoryEstimate {
        &self.memory
    }

    /// This rank's window of the cell grid (owned cell columns plus the ghost ring), in the
    /// solver's [`length_unit`](Self::length_unit).
    pub fn cells(&self) -> &CellGrid {
        &self.cells
    }

    /// The stages whose communication a distributed run reports, in data-flow order.
    pub fn traffic_stages(&self) -> Vec<StageName> {
        EwaldStage::traffic()
    }

    /// The owner rank of a position in the box (its cell column's owner): callers that keep
    /// particles on their owners can use the neighbour-only sort.
    pub fn owner_of(&self, p: &[T; 3]) -> usize {
        self.owner_in_unit(&p.map(|x| T::from_f64(x.to_f64() / self.unit)))
    }

    /// [`owner_of`](Self::owner_of) a position in the solver's length unit.
    fn owner_in_unit(&self, p: &[T; 3]) -> usize {
        let c = self.cells.global_cell(p);
        self.own.owner(c[1], c[2])
    }

    fn par(&self) -> Par {
        Par::with_threads(self.threads)
    }

    /// Evaluates the potential of this rank's `sources` at its `targets` into `out`
    /// ([`EwaldOptions::output_dim`] values per target: the potential, then the Laplace field if
    /// asked; this rank's input order), overwriting it. Collective:
    /// every rank calls it with its own share (possibly empty). Strengths whose largest over
    /// every rank lies outside `[2^-40, 2^40]` are computed over a power of two near it, exactly
    /// ([`Evaluation::strength_unit`]).
    ///
    /// # Errors
    /// Any rank's input error (a particle outside the box, a non-finite value, a missing or
    /// mis-sized density or output), returned on every rank.
    pub fn evaluate(
        &mut self,
        sources: &Sources<T>,
        targets: Targets<T>,
        out: &mut [T],
        mode: SortMode,
    ) -> Result<Evaluation> {
        self.evaluate_with_progress(sources, targets, out, mode, &mut |_, _| {})
    }

    /// As [`evaluate`](Self::evaluate), calling `progress(stage, seconds)` after every stage.
    ///
    /// # Errors
    /// As [`evaluate`](Self::evaluate).
    pub fn evaluate_with_progress(
        &mut self,
        sources: &Sources<T>,
        targets: Targets<T>,
        out: &mut [T],
        mode: SortMode,
        progress: &mut (dyn FnMut(EwaldStage, f64) + Send),
    ) -> Result<Evaluation> {
        self.run(sources, targets, None, out, mode, progress)
    }

    /// As [`evaluate`](Self::evaluate) for positions rounded from f64: `exact` holds the f64
    /// positions the sources' and targets' positions were rounded from. A solver in f32 keeps
    /// each one's residual (`exact - rounded`, in f32) and forms every coordinate relative to
    /// its cell, and every window's place on the grid, from both, so that the positions are
    /// rounded at the scale of a cell rather than of the box (the round-off smaller by about
    /// the cells per axis; docs/design.md, "f32 on f64 positions"); plan it with
    /// [`PositionRounding::F32Cells`](crate::PositionRounding) statistics. In f64 it is
    /// [`evaluate`](Self::evaluate) after the checks. Collective as `evaluate`; a rank may pass
    /// its share through `evaluate` instead (its positions then taken as exact).
    ///
    /// # Errors
    /// As [`evaluate`](Self::evaluate), and [`check_exact`](crate::check_exact)'s: exact
    /// positions in other numbers than the positions, or that do not round to them.
    pub fn evaluate_exact(
        &mut self,
        sources: &Sources<T>,
        targets: Targets<T>,
        exact: ExactPositions<'_>,
        out: &mut [T],
        mode: SortMode,
    ) -> Result<Evaluation> {
        self.run(sources, targets, Some(exact), out, mode, &mut |_, _| {})
    }

    /// As [`evaluate_exact`](Self::evaluate_exact), calling `progress(stage, seconds)` after
    /// every stage.
    ///
    /// # Errors
    /// As [`evaluate_exact`](Self::evaluate_exact).
    pub fn evaluate_exact_with_progress(
        &mut self,
        sources: &Sources<T>,
        targets: Targets<T>,
        exact: ExactPositions<'_>,
        out: &mut [T],
        mode: SortMode,
        progress: &mut (dyn FnMut(EwaldStage, f64) + Send),
    ) -> Result<Evaluation> {
        self.run(sources, targets, Some(exact), out, mode, progress)
    }

    /// One evaluation: its stages in order (see the module documentation).
    fn run(
        &mut self,
        sources: &Sources<T>,
        targets: Targets<T>,
        exact: Option<ExactPositions<'_>>,
        out: &mut [T],
        mode: SortMode,
        progress: &mut (dyn FnMut(EwaldStage, f64) + Send),
    ) -> Result<Evaluation> {
        let pool = Arc::clone(&self.pool);
        // the copies in the evaluation's units live outside `self` while the stages borrow it
        let mut scaled = std::mem::take(&mut self.scaled);
        let result = pool.install(|| {
            let mut s = Stages { times: StageTimes::default(), progress };
            let prepared =
                s.run(EwaldStage::Prepare, || self.prepare(sources, targets, exact, out.len(), &mut scaled))?;
            let (sources, targets) = (scaled.sources(sources), scaled.targets(targets));
            let (residuals, target_residuals) = (scaled.residuals(), scaled.target_residuals());
            let mut local = s.run(EwaldStage::Sort, || self.sort(&sources, targets, residuals, target_residuals, mode));
            s.run(EwaldStage::GhostSources, || self.ghost_sources(&mut local));
            s.run(EwaldStage::CellLists, || self.cell_lists(&local));
            s.run(EwaldStage::P2P, || self.backend.near_field());
            s.run(EwaldStage::P2G, || self.backend.spread(&local.owned()));
            s.run(EwaldStage::Halo, || self.halo_spread());
            s.run(EwaldStage::FFT, || self.backend.fft_forward());
            s.run(EwaldStage::CNV, || self.backend.convolve(prepared.net_charge));
            s.run(EwaldStage::IFFT, || self.backend.fft_backward());
            s.run(EwaldStage::GridGhost, || self.halo_gather());
            s.run(EwaldStage::G2P, || self.far_field(&mut local, prepared.background, prepared.constant, out));
            s.run(EwaldStage::Return, || self.return_results(&local, out));
            // a device backend's failure (recorded by its stages, which keep taking part in the
            // exchanges) ends the evaluation on every rank with its error
            self.comm.agree(self.backend.take_error().map_or(Ok(()), Err))?;
            if prepared.units.rescaled() {
                units::restore(self.output, out, prepared.units);
            }
            let near = self.backend.near_stats();
            Ok(Evaluation {
                times: s.times,
                warnings: prepared.warnings,
                padding_efficiency: near.padding_efficiency,
                pairs: near.pairs,
                overlapped_p2p: near.overlapped_seconds,
                strength_unit: prepared.units.strength,
            })
        });
        self.scaled = scaled;
        result
    }

    /// Checks the inputs on every rank (agreed) in the caller's units, so that every message
    /// names the caller's values; picks the evaluation's strength unit (the largest strength
    /// over every rank) and fills `scaled` with the inputs in the evaluation's units where they
    /// differ from the caller's; sums the neutrality over ranks: the warnings (in the caller's
    /// units), the background potential of a net charge, the 0P Stokeslet's constant and the net
    /// charge (CNV's zero mode along free axes), in the evaluation's units. With `exact`
    /// positions (on any rank) and `T` f32, every rank's position residuals too.
    fn prepare(
        &self,
        sources: &Sources<T>,
        targets: Targets<T>,
        exact: Option<ExactPositions<'_>>,
        out_len: usize,
        scaled: &mut ScaledInputs<T>,
    ) -> Result<Prepared> {
        let kernel = self.opts.kernel;
        self.comm.agree(
            check_inputs(self.output, &self.user_opts.domain, sources, targets, out_len)
                .and_then(|_| exact.map_or(Ok(()), |e| check_exact(&self.user_opts.domain, sources, targets, e))),
        )?;
        let largest = self.comm.max(parki_core::units::largest_strength(kernel, sources, self.unit));
        let units = Units { length: self.unit, strength: parki_core::units::strength_unit(largest) };
        let points = match targets {
            Targets::Sources => None,
            Targets::Points(p) => Some(p),
        };
        // copies nothing where the units are the caller's
        scaled.fill(sources, points, units);
        let with_residuals = T::BYTES < 8 && self.comm.max(u64::from(exact.is_some())) > 0;
        scaled.fill_residuals(sources, points, exact, with_residuals);
        let mut sums = Neutrality::of(kernel, &scaled.sources(sources));
        self.comm.all_reduce(sums.as_mut(), ReduceOp::Sum);
        let domain = &self.opts.domain;
        let single = T::BYTES == 4;
        // the messages in the caller's units (times w: exact)
        let caller = sums.times(units.strength);
        caller.check_free(kernel, &self.user_opts.domain, single)?;
        Ok(Prepared {
            warnings: caller.warnings(kernel, &self.user_opts.domain, single),
            background: sums.background(kernel, domain, self.unit_params.xi),
            constant: sums.free_space_constant(kernel, domain, self.unit_params.free.as_ref().map(|f| f.radius)),
            net_charge: sums.net_charge(kernel),
            units,
        })
    }

    /// MPI-SORT: sources and separate targets to the owners of their cell columns, with their
    /// position residuals where the evaluation has them. On one rank the caller's arrays are
    /// used in place.
    fn sort<'a>(
        &self,
        sources: &Sources<'a, T>,
        targets: Targets<'a, T>,
        residuals: Option<&'a [[T; 3]]>,
        target_residuals: Option<&'a [[T; 3]]>,
        mode: SortMode,
    ) -> Local<'a, T> {
        let kernel = self.opts.kernel;
        if self.comm.size() == 1 {
            return Local {
                caller: Some(*sources),
                received: PackedSet::new(kernel),
                owned: sources.len(),
                targets: match targets {
                    Targets::Sources => LocalTargets::Sources,
                    Targets::Points(p) => LocalTargets::Caller(p),
                },
                routes: None,
                ghost_keys: Vec::new(),
                residuals: residuals.map(Cow::Borrowed),
                target_residuals: target_residuals.map(Cow::Borrowed),
                result: Vec::new(),
            };
        }
        let _g = self.comm.stage(EwaldStage::Sort);
        let par = self.par();
        let owners = |p: &[[T; 3]]| -> Vec<u32> { p.iter().map(|x| self.owner_in_unit(x) as u32).collect() };
        let comm = &self.comm;
        let (src_route, got) = Route::send_to_owners(
            comm,
            &owners(sources.positions),
            &self.neighbours,
            mode,
            sources.positions,
            Some((kernel, sources as &dyn SourceSet<T>)),
            par,
        );
        let mut received = PackedSet::new(kernel);
        received.positions = got.positions;
        received.density = got.density;
        let (local_targets, trg_route) = match targets {
            Targets::Sources => (LocalTargets::Sources, None),
            Targets::Points(p) => {
                let (route, got) = Route::send_to_owners(comm, &owners(p), &self.neighbours, mode, p, None, par);
                (LocalTargets::Received(got.positions), Some(route))
            }
        };
        // the residuals along the same routes (every rank has them or none does)
        let forward = |route: &Route, r: &[[T; 3]]| -> Cow<'a, [[T; 3]]> { Cow::Owned(route.forward(comm, r, 1)) };
        let src_residuals = residuals.map(|r| forward(&src_route, r));
        let trg_residuals = match (&trg_route, target_residuals) {
            (Some(route), Some(r)) => Some(forward(route, r)),
            _ => None,
        };
        Local {
            caller: None,
            owned: received.len(),
            received,
            targets: local_targets,
            routes: Some((src_route, trg_route)),
            ghost_keys: Vec::new(),
            residuals: src_residuals,
            target_residuals: trg_residuals,
            result: Vec::new(),
        }
    }

    /// Ghost sources of the ring around this rank's columns, appended to the owned ones, with
    /// their window cells in `local.ghost_keys`.
    fn ghost_sources(&self, local: &mut Local<'_, T>) {
        if self.ghosts.is_empty() {
            return;
        }
        let par = self.par();
        let _g = self.comm.stage(EwaldStage::GhostSources);
        let me = self.comm.rank();
        let columns: Vec<u32> = local
            .owned()
            .positions()
            .iter()
            .map(|p| {
                let c = self.cells.global_cell(p);
                self.own.column_index(me, c[1], c[2]) as u32
            })
            .collect();
        let owned = local.owned();
        let ghosts = self.ghosts.exchange(&self.comm, self.opts.kernel, &owned as &dyn SourceSet<T>, &columns, par);
        for (p, &[ly, lz]) in ghosts.sources.positions.iter().zip(&ghosts.columns) {
            // window-local x (the window of a free x starts one empty layer below the box)
            let cx = (self.cells.global_cell(p)[0] as i64 - self.cells.window_origin()[0]) as usize;
            local.ghost_keys.push(self.cells.linear([cx, ly, lz]));
        }
        local.received.extend(&ghosts.sources.positions, &ghosts.sources.density);
        if let Some(r) = local.residuals.as_mut() {
            r.to_mut().extend_from_slice(&ghosts.residuals);
        }
    }

    /// The cell lists of the window: owned and ghost sources, and the owned targets.
    fn cell_lists(&mut self, local: &Local<'_, T>) {
        let mut keys = self.cells.keys(local.owned().positions(), self.par());
        keys.extend_from_slice(&local.ghost_keys);
        self.backend.bin(&local.all(), &keys, local.target_points());
    }

    fn halo_spread(&mut self) {
        if let Some(h) = self.halo.as_mut() {
            self.backend.halo_spread(h, &self.comm);
        }
    }

    fn halo_gather(&mut self) {
        if let Some(h) = self.halo.as_mut() {
            self.backend.halo_gather(h, &self.comm);
        }
    }

    /// G2P at the owned targets and the sum with the near field and the background: into `out`
    /// on one rank, into the owned results on several.
    /// `constant`: a velocity added to every target (the 0P Stokeslet's, see
    /// [`parki_farfield::truncated::free_space_stokeslet_constant`]).
    fn far_field(&mut self, local: &mut Local<'_, T>, background: f64, constant: [f64; 3], out: &mut [T]) {
        self.backend.interpolate(local.target_points());
        let add = |v: &mut [T]| {
            if constant != [0.0; 3] {
                for row in v.chunks_exact_mut(3) {
                    for (x, &c) in row.iter_mut().zip(&constant) {
                        *x += T::from_f64(c);
                    }
                }
            }
        };
        if local.routes.is_none() {
            self.backend.sum_into(background, out);
            add(out);
        } else {
            let n = local.targets().len() * self.output.dim();
            let mut result = std::mem::take(&mut local.result);
            result.resize(n, T::ZERO);
            self.backend.sum_into(background, &mut result);
            add(&mut result);
            local.result = result;
        }
    }

    /// Results back to the callers' ranks and order.
    fn return_results(&self, local: &Local<'_, T>, out: &mut [T]) {
        let Some((src_route, trg_route)) = &local.routes else { return };
        let _g = self.comm.stage(EwaldStage::Return);
        let dim = self.output.dim();
        trg_route.as_ref().unwrap_or(src_route).return_to_callers(&self.comm, &local.result, dim, out);
    }
}

/// `opts` in the length unit of its box ([`units::box_unit`]) and the unit. A fixed cut-off is
/// checked in the caller's units first, so that its message names the caller's values.
fn in_unit(opts: &EwaldOptions) -> Result<(EwaldOptions, f64)> {
    let unit = units::box_unit(&opts.domain);
    if unit == 1.0 {
        return Ok((opts.clone(), 1.0));
    }
    if let Some(rc) = opts.rc {
        parki_farfield::params::check_fixed_rc(rc, &opts.domain)?;
    }
    let mut o = opts.clone();
    o.domain = units::domain_in(&opts.domain, unit)?;
    o.rc = opts.rc.map(|rc| rc / unit);
    Ok((o, unit))
}
