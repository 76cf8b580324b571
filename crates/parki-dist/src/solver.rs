//! [`EwaldSolver`]: plan once, evaluate many times.
//!
//! ```no_run
//! use parki_dist::{EwaldOptions, EwaldSolver, Targets};
//! use parki_core::{Domain, Kernel, Sources};
//!
//! let domain = Domain::triply_periodic([1.0, 1.2, 0.9]).unwrap();
//! let opts = EwaldOptions::new(Kernel::Stokeslet, domain, 1e-9);
//! let (pos, f): (Vec<[f64; 3]>, Vec<[f64; 3]>) = (vec![], vec![]);
//! let mut solver = EwaldSolver::<f64>::new(&opts, pos.len(), pos.len()).unwrap();
//! let mut u = vec![0.0; 3 * pos.len()];
//! let report = solver.evaluate(&Sources::stokeslet(&pos, &f), Targets::Sources, &mut u).unwrap();
//! println!("{:?}", report.times);
//! ```

use std::f64::consts::PI;

use parki_core::memory::{touched_vec, HugeBuffer};
use parki_core::{Domain, Error, Kernel, Par, Real, Result, Sources, Stage, StageTimes};
use parki_farfield::{
    g2p, interleave, p2g, AtomicReal, Cnv, CostModel, G2pVariant, GatherGrid, GridWindow, KaiserBessel, P2gScratch,
    P2gVariant, Params,
};
use parki_fft3d::{Fft3d, FftReal, GridBuffer, PlanRigor};
use parki_nearfield::{p2p, CellGrid, Isa, P2pReal, PaddedSources, SortedTargets};

/// A real type the whole solver runs in: `f32` or `f64`.
pub trait SolverReal: P2pReal + AtomicReal + FftReal {}
impl SolverReal for f64 {}
impl SolverReal for f32 {}

/// Everything that defines a solver.
#[derive(Clone, Debug)]
pub struct EwaldOptions {
    /// Kernel.
    pub kernel: Kernel,
    /// Box.
    pub domain: Domain,
    /// Relative RMS tolerance.
    pub tolerance: f64,
    /// Fixed real-space cut-off (the cells are at least this wide).
    pub rc: Option<f64>,
    /// Fixed mean number of sources per cell (sets `rc`), as ParkiPy's `cell_size`.
    pub cell_size: Option<f64>,
    /// Fixed window support (even, 4 to 32).
    pub window_support: Option<usize>,
    /// Fixed grid oversampling (1 to 4) over the Fourier truncation's need.
    pub oversampling: Option<f64>,
    /// P2G algorithm.
    pub p2g: P2gVariant,
    /// G2P algorithm.
    pub g2p: G2pVariant,
    /// Threads (0: all available).
    pub threads: usize,
    /// FFTW planning effort.
    pub fft_rigor: PlanRigor,
    /// Largest grid memory, bytes (default: half the available memory); per rank for the
    /// distributed solver (default there: half the node's available memory over the ranks on
    /// the node).
    pub max_grid_bytes: Option<usize>,
    /// Cost constants for the choice of `rc`.
    pub cost: CostModel,
    /// Force an instruction set for P2P (default: the best this CPU has).
    pub isa: Option<Isa>,
    /// Reject fixed parameters (`rc`, `window_support`, `oversampling`) whose estimated error
    /// exceeds the tolerance (default `true`); `false` only reports the estimate.
    pub enforce_tolerance: bool,
}

impl EwaldOptions {
    /// Defaults for `kernel` on `domain` at `tolerance`.
    pub fn new(kernel: Kernel, domain: Domain, tolerance: f64) -> Self {
        Self {
            kernel,
            domain,
            tolerance,
            rc: None,
            cell_size: None,
            window_support: None,
            oversampling: None,
            p2g: P2gVariant::default(),
            g2p: G2pVariant::default(),
            threads: 0,
            fft_rigor: PlanRigor::Estimate,
            max_grid_bytes: None,
            cost: CostModel::default(),
            isa: None,
            enforce_tolerance: true,
        }
    }
}

/// Where the potential is evaluated.
#[derive(Clone, Copy, Debug)]
pub enum Targets<'a, T> {
    /// At the sources themselves (each skips its own free-space term).
    Sources,
    /// At separate points.
    Points(&'a [[T; 3]]),
}

/// What one evaluation reports.
#[derive(Clone, Debug, Default)]
pub struct Evaluation {
    /// Wall time per stage.
    pub times: StageTimes,
    /// Warnings about the input (non-neutral charge, net force).
    pub warnings: Vec<String>,
    /// Real sources per padded slot in the cell lists (padding overhead).
    pub padding_efficiency: f64,
    /// Evaluated P2P pairs (padding included).
    pub pairs: u64,
}

/// A planned spectral Ewald solver for one kernel, box, tolerance and precision.
pub struct EwaldSolver<T: SolverReal> {
    opts: EwaldOptions,
    params: Params,
    threads: usize,
    pool: rayon::ThreadPool,
    isa: Isa,
    cells: CellGrid,
    window: GridWindow<T>,
    cnv: Cnv,
    buffer: GridBuffer<T>,
    fft: Fft3d<T>,
    far: Vec<T>,
    near: Vec<T>,
    gather: HugeBuffer<T>,
    p2g_scratch: P2gScratch<T>,
}

pub(crate) fn available_memory() -> usize {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse::<usize>().ok()).map(|kb| kb * 1024))
        })
        .unwrap_or(8 << 30)
}

impl<T: SolverReal> EwaldSolver<T> {
    /// Plans a solver for `sources` sources and `targets` targets: chooses the parameters,
    /// builds the window, the FFT plans and the grid buffer.
    pub fn new(opts: &EwaldOptions, sources: usize, targets: usize) -> Result<Self> {
        let PlanParts { params, threads, isa, pool } = plan_parts::<T>(opts, sources, targets, None)?;
        let cells = CellGrid::new(&opts.domain, params.rc)?;
        let layout = parki_decomp::GridLayout::new(params.grid)?;
        let window = GridWindow::new(layout, params.h, &params.poly);
        let cnv = Cnv::new(opts.kernel, layout, opts.domain.lengths(), &KaiserBessel::new(params.p), params.xi);
        let mut buffer = GridBuffer::new(layout, opts.kernel.grid_components(), threads);
        let fft =
            Fft3d::plan(&mut buffer, opts.kernel.grid_components(), opts.kernel.output_dim(), threads, opts.fft_rigor)?;
        // allocate and touch the evaluation scratch now: evaluations then fault in no pages
        let dim = opts.kernel.output_dim();
        let gather = HugeBuffer::new(if dim > 1 { dim * layout.points() } else { 0 }, T::ZERO, threads);
        let (near, far) = (touched_vec(targets * dim, T::ZERO), touched_vec(targets * dim, T::ZERO));
        let p2g_scratch = p2g_scratch(opts, &window, sources, threads);
        Ok(Self {
            opts: opts.clone(),
            params,
            threads,
            pool,
            isa,
            cells,
            window,
            cnv,
            buffer,
            fft,
            far,
            near,
            gather,
            p2g_scratch,
        })
    }

    /// The chosen parameters.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// The options the solver was planned with.
    pub fn options(&self) -> &EwaldOptions {
        &self.opts
    }

    /// Threads used.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Instruction set of P2P.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// The cell grid of the near field.
    pub fn cells(&self) -> &CellGrid {
        &self.cells
    }

    fn par(&self) -> Par {
        Par::with_threads(self.threads)
    }

    /// Evaluates the potential at `targets` into `out` (`output_dim` values per target, input
    /// order), overwriting it.
    pub fn evaluate(&mut self, sources: &Sources<T>, targets: Targets<T>, out: &mut [T]) -> Result<Evaluation> {
        self.evaluate_with_progress(sources, targets, out, &mut |_, _| {})
    }

    /// As [`evaluate`](Self::evaluate), calling `progress(stage, seconds)` after every stage.
    pub fn evaluate_with_progress(
        &mut self,
        sources: &Sources<T>,
        targets: Targets<T>,
        out: &mut [T],
        progress: &mut dyn FnMut(Stage, f64),
    ) -> Result<Evaluation> {
        let kernel = self.opts.kernel;
        let dim = kernel.output_dim();
        let domain = self.opts.domain;
        let par = self.par();
        let mut ev = Evaluation::default();
        let mut stage = |ev: &mut Evaluation, s: Stage, t: std::time::Instant| {
            let dt = t.elapsed().as_secs_f64();
            ev.times.add(s, dt);
            progress(s, dt);
        };

        // prepare: checks and cell lists
        let t = std::time::Instant::now();
        let target_positions = check_inputs(kernel, &domain, sources, targets, out.len())?;
        let nt = target_positions.len();
        let sums = neutrality_sums(kernel, sources);
        let net_charge = net_charge(kernel, &sums);
        ev.warnings = neutrality_warnings(kernel, &sums, T::BYTES == 4);
        let (cells, isa) = (&self.cells, self.isa);
        let (padded, sorted) = self.pool.install(|| {
            let padded = PaddedSources::build(cells, kernel, sources, isa.lanes::<T>(), par);
            let sorted = SortedTargets::build(cells, target_positions, par);
            (padded, sorted)
        });
        ev.padding_efficiency = padded.count as f64 / padded.slots().max(1) as f64;
        ev.pairs = (0..cells.cells())
            .map(|c| {
                let n_t = sorted.binned.count(c) as u64;
                let n_s: usize =
                    cells.colleagues(c).iter().map(|&(s, _)| padded.offsets[s + 1] - padded.offsets[s]).sum();
                n_t * n_s as u64
            })
            .sum();
        stage(&mut ev, Stage::Prepare, t);

        // P2P
        let t = std::time::Instant::now();
        self.near.resize(nt * dim, T::ZERO);
        let (xi, near) = (self.params.xi, &mut self.near);
        self.pool.install(|| p2p(kernel, xi, cells, &padded, &sorted, near, isa, par));
        sorted.unsort(&self.near, dim, out);
        drop(padded);
        drop(sorted);
        stage(&mut ev, Stage::P2P, t);

        // P2G
        let t = std::time::Instant::now();
        let (window, buffer, scratch) = (&self.window, &mut self.buffer, &mut self.p2g_scratch);
        let variant = self.opts.p2g;
        self.pool.install(|| p2g(variant, kernel, window, sources, buffer.as_mut_slice(), scratch, isa, par));
        stage(&mut ev, Stage::P2G, t);

        // FFT, CNV, IFFT
        let t = std::time::Instant::now();
        self.fft.forward(&mut self.buffer);
        stage(&mut ev, Stage::FFT, t);
        let t = std::time::Instant::now();
        let (cnv, buffer) = (&self.cnv, &mut self.buffer);
        self.pool.install(|| cnv.apply(buffer.as_mut_slice(), par));
        stage(&mut ev, Stage::CNV, t);
        let t = std::time::Instant::now();
        self.fft.backward(&mut self.buffer);
        stage(&mut ev, Stage::IFFT, t);

        // G2P and sum
        let t = std::time::Instant::now();
        self.far.resize(nt * dim, T::ZERO);
        let (window, grid) = (&self.window, self.buffer.as_slice());
        let (far, gather) = (&mut self.far, &mut self.gather);
        let variant = self.opts.g2p;
        self.pool.install(|| interpolate(variant, window, dim, grid, gather, target_positions, far, isa, par));
        let background = -PI * net_charge / (domain.volume() * self.params.xi * self.params.xi);
        for (o, f) in out.iter_mut().zip(&self.far) {
            *o += *f + T::from_f64(background);
        }
        stage(&mut ev, Stage::G2P, t);
        Ok(ev)
    }
}

/// P2G scratch sized at plan time for `sources` sources (the blocked variant's bins; the
/// scatter variant needs none), so that evaluations allocate nothing.
pub(crate) fn p2g_scratch<T: SolverReal>(
    opts: &EwaldOptions,
    window: &GridWindow<T>,
    sources: usize,
    threads: usize,
) -> P2gScratch<T> {
    if opts.p2g == P2gVariant::Blocked {
        P2gScratch::planned(opts.kernel, window, sources, threads)
    } else {
        P2gScratch::new(threads)
    }
}

/// Checks the inputs of one evaluation (positions in the box, densities, output length) and
/// returns the target positions.
pub(crate) fn check_inputs<'a, T: Real>(
    kernel: Kernel,
    domain: &Domain,
    sources: &Sources<'a, T>,
    targets: Targets<'a, T>,
    out_len: usize,
) -> Result<&'a [[T; 3]]> {
    parki_core::validate::check_positions("sources.positions", sources.positions, domain)?;
    sources.check_densities(kernel)?;
    let target_positions = match targets {
        Targets::Sources => sources.positions,
        Targets::Points(p) => {
            parki_core::validate::check_positions("targets.positions", p, domain)?;
            p
        }
    };
    let dim = kernel.output_dim();
    if out_len != target_positions.len() * dim {
        return Err(Error::LengthMismatch {
            field: "output".into(),
            found: out_len,
            reference: format!("targets x {dim} components"),
            expected: target_positions.len() * dim,
        });
    }
    Ok(target_positions)
}

/// G2P of `dim` output components from `grid` (components back to back in the window's
/// layout; interleaved into `gather` first when `dim > 1`) at `targets` into `far`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn interpolate<T: SolverReal>(
    variant: G2pVariant,
    window: &GridWindow<T>,
    dim: usize,
    grid: &[T],
    gather: &mut HugeBuffer<T>,
    targets: &[[T; 3]],
    far: &mut [T],
    isa: Isa,
    par: Par,
) {
    let view = if dim == 1 {
        GatherGrid::from_fft(&window.layout, grid)
    } else {
        interleave(&window.layout, dim, grid, gather.as_mut_slice(), par);
        GatherGrid::interleaved(&window.layout, dim, gather.as_slice())
    };
    g2p(variant, window, &view, targets, far, isa, par)
}

/// What every solver plans first: parameters, threads, instruction set, thread pool.
pub(crate) struct PlanParts {
    pub(crate) params: Params,
    pub(crate) threads: usize,
    pub(crate) isa: Isa,
    pub(crate) pool: rayon::ThreadPool,
}

/// Chooses the parameters for `sources` and `targets` particles (in total) and starts the pool.
/// The parameters, threads, ISA and thread pool of a plan. `grid_budget` bounds the bytes of
/// the whole far-field grid (default: `opts.max_grid_bytes`, else half the available memory;
/// the distributed solver passes the sum of its ranks' budgets).
pub(crate) fn plan_parts<T: SolverReal>(
    opts: &EwaldOptions,
    sources: usize,
    targets: usize,
    grid_budget: Option<usize>,
) -> Result<PlanParts> {
    parki_core::validate::check_tolerance::<T>(opts.tolerance)?;
    if opts.rc.is_some() && opts.cell_size.is_some() {
        return Err(Error::OutOfRange {
            field: "ewald.cell_size".into(),
            value: format!("{}", opts.cell_size.unwrap_or(0.0)),
            allowed: "unset when ewald.rc is given (they fix the same thing)".into(),
        });
    }
    let rc = match opts.cell_size {
        Some(s) => {
            if !(s.is_finite() && s > 0.0) {
                return Err(Error::OutOfRange {
                    field: "ewald.cell_size".into(),
                    value: format!("{s}"),
                    allowed: "a positive mean number of sources per cell".into(),
                });
            }
            Some((opts.domain.volume() * s / sources.max(1) as f64).cbrt())
        }
        None => opts.rc,
    };
    let threads = if opts.threads == 0 {
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    } else {
        opts.threads
    };
    let isa = match opts.isa {
        None => Isa::detect(),
        Some(i) if i.available() => i,
        Some(i) => return Err(Error::Unsupported { what: format!("instruction set {} on this CPU", i.name()) }),
    };
    let request = parki_farfield::Request {
        kernel: opts.kernel,
        domain: opts.domain,
        sources,
        targets,
        tolerance: opts.tolerance,
        real_bytes: T::BYTES,
        rc,
        window_p: opts.window_support,
        oversampling: opts.oversampling,
        lanes: isa.lanes::<T>(),
        max_grid_bytes: grid_budget.or(opts.max_grid_bytes).unwrap_or_else(|| available_memory() / 2),
        cost: opts.cost,
        enforce_tolerance: opts.enforce_tolerance,
    };
    let params = parki_farfield::select(&request)?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Error::Resource { message: format!("cannot start {threads} threads: {e}") })?;
    Ok(PlanParts { params, threads, isa, pool })
}

/// Partial sums of a source set for the neutrality checks: `[Q, sum |q|, F_x, F_y, F_z, sum |f_d|]`
/// (add them over ranks before [`neutrality_warnings`]).
pub(crate) fn neutrality_sums<T: Real>(kernel: Kernel, sources: &Sources<T>) -> [f64; 6] {
    let mut s = [0.0f64; 6];
    if let (true, Some(q)) = (kernel.needs_charges(), sources.charges) {
        for v in q {
            s[0] += v.to_f64();
            s[1] += v.to_f64().abs();
        }
    }
    if let (true, Some(f)) = (kernel.needs_forces(), sources.forces) {
        for v in f {
            for d in 0..3 {
                s[2 + d] += v[d].to_f64();
                s[5] += v[d].to_f64().abs();
            }
        }
    }
    s
}

/// Net charge of Laplace sources from [`neutrality_sums`] (0 for the other kernels). The Laplace
/// real-space kernel has mean `pi/xi^2`; dropping the zero mode of the whole sum subtracts
/// `pi Q/(V xi^2)` from every target (the potential of a uniform neutralising background).
pub(crate) fn net_charge(kernel: Kernel, sums: &[f64; 6]) -> f64 {
    if kernel.needs_charges() {
        sums[0]
    } else {
        0.0
    }
}

/// Warnings for non-neutral input, from the (global) [`neutrality_sums`].
pub(crate) fn neutrality_warnings(kernel: Kernel, sums: &[f64; 6], single: bool) -> Vec<String> {
    let mut w = Vec::new();
    let rel = if single { 1e-5 } else { 1e-10 };
    if kernel.needs_charges() {
        let net = sums[0];
        if net.abs() > rel * sums[1].max(f64::MIN_POSITIVE) {
            w.push(format!(
                "sources.charges: net charge {net:.6e} is not zero; the zero Fourier mode is dropped, \
                 which adds a uniform neutralising background"
            ));
        }
    }
    if kernel.needs_forces() {
        let net = [sums[2], sums[3], sums[4]];
        if net.iter().any(|n| n.abs() > rel * sums[5].max(f64::MIN_POSITIVE)) {
            w.push(format!(
                "sources.forces: net force [{:.6e}, {:.6e}, {:.6e}] is not zero; the zero Fourier mode is \
                 dropped, which balances it by a uniform pressure gradient (zero mean flow)",
                net[0], net[1], net[2]
            ));
        }
    }
    w
}
