//! What defines a solver: [`EwaldOptions`] (kernel, box, tolerance and optional fixed
//! parameters) and [`ParallelOptions`] (process grid and switch backend), built with
//! constructors and chainable setters so that new options never break callers.

use parki_comm::Backend;
use parki_core::{Domain, Kernel, Output, Result};
use parki_decomp::Decomposition;
use parki_farfield::{CostModel, FieldMethod, G2pVariant, Occupancy, P2gVariant};
use parki_fft3d::{LineEngine, PlanRigor};
use parki_nearfield::{Isa, PairAccuracy};

use crate::statistics::SourceStatistics;

/// Everything that defines a spectral Ewald solver.
///
/// ```
/// use parki_dist::{Domain, EwaldOptions, Kernel, P2gVariant};
/// let opts = EwaldOptions::new(Kernel::Stokeslet, Domain::triply_periodic([1.0, 1.2, 0.9]).unwrap(), 1e-9)
///     .threads(4)
///     .p2g(P2gVariant::Blocked);
/// assert_eq!(opts.tolerance, 1e-9);
/// ```
///
/// The fields are readable; new options are added as fields with defaults and setters, so the
/// struct cannot be built by a literal outside this crate (`#[non_exhaustive]`).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct EwaldOptions {
    /// Kernel.
    pub kernel: Kernel,
    /// Box.
    pub domain: Domain,
    /// Relative RMS tolerance.
    pub tolerance: f64,
    /// The Laplace field `E = -grad u` after the potential (`[u, E_x, E_y, E_z]` per target; the
    /// tolerance holds for each).
    pub field: bool,
    /// How the field's far part is computed (window derivative in G2P, or `-i k` in CNV).
    pub field_method: FieldMethod,
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
    /// How P2P evaluates its pair functions on the CPU (`None`: from the tolerance,
    /// [`PairAccuracy::for_tolerance`]).
    pub pair_accuracy: Option<PairAccuracy>,
    /// Which pairs P2P sums on the CPU (default: [`NearPairs::Sphere`]).
    pub near_pairs: NearPairs,
    /// Variants of the device backends (ignored on the CPU).
    pub device: DeviceVariants,
    /// Threads per process (0: all available).
    pub threads: usize,
    /// FFTW planning effort.
    pub fft_rigor: PlanRigor,
    /// What transforms the strided passes' complex lines (CPU; default RustFFT).
    pub fft_lines: LineEngine,
    /// Largest grid memory, bytes (default: half the available memory); per rank for the
    /// distributed solver (default there: half the node's available memory over the ranks on
    /// the node).
    pub max_grid_bytes: Option<usize>,
    /// Cost constants for the choice of `rc` (`None`: the backend's, else this CPU's defaults).
    pub cost: Option<CostModel>,
    /// Force an instruction set for P2P (default: the best this CPU has).
    pub isa: Option<Isa>,
    /// Reject fixed parameters (`rc`, `window_support`, `oversampling`) whose estimated error
    /// exceeds the tolerance (default `true`); `false` only reports the estimate.
    pub enforce_tolerance: bool,
    /// Close-pair statistics of the particles ([`SourceStatistics::measure`]): the error model
    /// then knows the stresslet's magnitude on clustered and surface particles and the round-off
    /// of positions narrowed to f32 (`None`: the uniform-density model, safe but
    /// over-resolving the stresslet on clustered particles).
    pub statistics: Option<SourceStatistics>,
    /// Neighbour-cell occupancy of the particles ([`crate::measure_occupancy`]): the cost model
    /// of P2P then counts the pairs clustered particles make and picks a smaller cut-off and a
    /// finer grid for them (`None`: the uniform count).
    pub occupancy: Option<Occupancy>,
    /// Evaluations one plan serves (default 1): with free axes the parameter choice prices the
    /// plan's kernel tables over them.
    pub evaluations: usize,
}

impl EwaldOptions {
    /// Defaults for `kernel` on `domain` at `tolerance`: every parameter chosen from the
    /// tolerance, all cores, the blocked P2G and target-sorted G2P, estimated FFT plans.
    pub fn new(kernel: Kernel, domain: Domain, tolerance: f64) -> Self {
        Self {
            kernel,
            domain,
            tolerance,
            field: false,
            field_method: FieldMethod::default(),
            rc: None,
            cell_size: None,
            window_support: None,
            oversampling: None,
            p2g: P2gVariant::default(),
            g2p: G2pVariant::default(),
            pair_accuracy: None,
            near_pairs: NearPairs::default(),
            device: DeviceVariants::default(),
            threads: 0,
            fft_rigor: PlanRigor::Estimate,
            fft_lines: LineEngine::RustFft,
            max_grid_bytes: None,
            cost: None,
            isa: None,
            enforce_tolerance: true,
            statistics: None,
            occupancy: None,
            evaluations: 1,
        }
    }

    /// Evaluates the Laplace field `E = -grad u` too: `[u, E_x, E_y, E_z]` per target (the
    /// solver refuses it for other kernels, naming `output.field`).
    pub fn field(mut self, field: bool) -> Self {
        self.field = field;
        self
    }

    /// How the field's far part is computed (default: the window's derivative in G2P).
    pub fn field_method(mut self, method: FieldMethod) -> Self {
        self.field_method = method;
        self
    }

    /// What an evaluation writes per target.
    ///
    /// # Errors
    /// A field asked of a kernel other than Laplace (names `output.field`).
    pub fn output(&self) -> Result<Output> {
        Output::new(self.kernel, self.field)
    }

    /// Values per target an evaluation writes (the kernel's, plus 3 with the field).
    pub fn output_dim(&self) -> usize {
        Output { kernel: self.kernel, field: self.field }.dim()
    }

    /// The field's far-field method when a field is asked for (`None`: the potential only).
    pub fn field_request(&self) -> Option<FieldMethod> {
        self.field.then_some(self.field_method)
    }

    /// Close-pair statistics of the particles for the error model (`None`: uniform model).
    pub fn statistics(mut self, statistics: Option<SourceStatistics>) -> Self {
        self.statistics = statistics;
        self
    }

    /// Neighbour-cell occupancy of the particles for the cost model (`None`: uniform).
    pub fn occupancy(mut self, occupancy: Option<Occupancy>) -> Self {
        self.occupancy = occupancy;
        self
    }

    /// Evaluations one plan serves (at least 1; default 1).
    pub fn evaluations(mut self, evaluations: usize) -> Self {
        self.evaluations = evaluations.max(1);
        self
    }

    /// Fixes the real-space cut-off (`None`: chosen from the tolerance).
    pub fn rc(mut self, rc: Option<f64>) -> Self {
        self.rc = rc;
        self
    }

    /// Fixes the mean number of sources per cell, which sets `rc` (`None`: chosen).
    pub fn cell_size(mut self, cell_size: Option<f64>) -> Self {
        self.cell_size = cell_size;
        self
    }

    /// Fixes the window support `P` (`None`: chosen).
    pub fn window_support(mut self, p: Option<usize>) -> Self {
        self.window_support = p;
        self
    }

    /// Fixes the grid oversampling (`None`: chosen).
    pub fn oversampling(mut self, sigma: Option<f64>) -> Self {
        self.oversampling = sigma;
        self
    }

    /// Chooses the P2G algorithm.
    pub fn p2g(mut self, variant: P2gVariant) -> Self {
        self.p2g = variant;
        self
    }

    /// Chooses the G2P algorithm.
    pub fn g2p(mut self, variant: G2pVariant) -> Self {
        self.g2p = variant;
        self
    }

    /// Fixes how P2P evaluates its pair functions (default in f64: loose from
    /// [`PairAccuracy::LOOSE_MIN_TOLERANCE`] on, medium from
    /// [`PairAccuracy::MEDIUM_MIN_TOLERANCE`], full below).
    pub fn pair_accuracy(mut self, accuracy: PairAccuracy) -> Self {
        self.pair_accuracy = Some(accuracy);
        self
    }

    /// Chooses which pairs P2P sums on the CPU ([`NearPairs`]).
    pub fn near_pairs(mut self, pairs: NearPairs) -> Self {
        self.near_pairs = pairs;
        self
    }

    /// The pair accuracy of a run in `T`: the fixed one, else from the tolerance (f32 has
    /// only the full one, whose functions are the loose ones of f64).
    pub fn pair_accuracy_for<T: parki_core::Real>(&self) -> PairAccuracy {
        match self.pair_accuracy {
            Some(a) if T::BYTES == 8 => a,
            Some(_) => PairAccuracy::Full,
            None => PairAccuracy::for_tolerance(self.tolerance, T::BYTES),
        }
    }

    /// The pair accuracy a backend with the medium pair functions but not the loose ones runs
    /// (a CUDA device, `PlanningHints::medium_pairs`): [`pair_accuracy_for`](Self::pair_accuracy_for),
    /// loose taken as medium.
    pub fn medium_pair_accuracy_for<T: parki_core::Real>(&self) -> PairAccuracy {
        match self.pair_accuracy_for::<T>() {
            PairAccuracy::Loose => PairAccuracy::Medium,
            a => a,
        }
    }

    /// Chooses the device backends' variants.
    pub fn device(mut self, variants: DeviceVariants) -> Self {
        self.device = variants;
        self
    }

    /// Threads per process (0: all available).
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = threads;
        self
    }

    /// FFTW planning effort.
    pub fn fft_rigor(mut self, rigor: PlanRigor) -> Self {
        self.fft_rigor = rigor;
        self
    }

    /// What transforms the strided passes' complex lines ([`LineEngine`]).
    pub fn fft_lines(mut self, lines: LineEngine) -> Self {
        self.fft_lines = lines;
        self
    }

    /// Largest grid memory in bytes (`None`: from the available memory).
    pub fn max_grid_bytes(mut self, bytes: Option<usize>) -> Self {
        self.max_grid_bytes = bytes;
        self
    }

    /// Threads per rank the solver runs on: `threads`, or all cores when it is 0.
    pub fn thread_count(&self) -> usize {
        if self.threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            self.threads
        }
    }

    /// Cost constants of the parameter selection (measured by `parki-bench calibrate` on a CPU,
    /// `parki-gpu-bench --modes calibrate` on a device), over the backend's own.
    pub fn cost_model(mut self, cost: CostModel) -> Self {
        self.cost = Some(cost);
        self
    }

    /// Forces an instruction set for P2P (`None`: the best this CPU has).
    pub fn isa(mut self, isa: Option<Isa>) -> Self {
        self.isa = isa;
        self
    }

    /// Whether fixed parameters whose estimated error exceeds the tolerance are refused.
    pub fn enforce_tolerance(mut self, enforce: bool) -> Self {
        self.enforce_tolerance = enforce;
        self
    }
}

/// How the ranks of a distributed solver are arranged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ParallelOptions {
    /// Explicit process grid `[P_y, P_z]` (default: chosen from `decomposition`).
    pub grid: Option<[usize; 2]>,
    /// Slab, pencil or automatic.
    pub decomposition: Decomposition,
    /// Backend of the FFT switches and the grid exchanges.
    pub backend: Backend,
}

impl ParallelOptions {
    /// Automatic process grid, all-to-all-v switches.
    pub fn new() -> Self {
        Self::default()
    }

    /// An explicit process grid `[P_y, P_z]` (`None`: chosen).
    pub fn grid(mut self, grid: Option<[usize; 2]>) -> Self {
        self.grid = grid;
        self
    }

    /// Slab, pencil or automatic.
    pub fn decomposition(mut self, d: Decomposition) -> Self {
        self.decomposition = d;
        self
    }

    /// Backend of the FFT switches and the grid exchanges.
    pub fn backend(mut self, b: Backend) -> Self {
        self.backend = b;
        self
    }
}

/// Which source-target pairs P2P sums on the CPU (`[ewald] near_cutoff`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NearPairs {
    /// The pairs of the colleague cells within a cut-off sphere whose radius the parameter
    /// selection picks where the error estimate does not grow (`Params::near_cut`,
    /// `parki_nearfield::NearCutoff::Sphere`): about 0.6-0.8 of the cells' pairs.
    #[default]
    Sphere,
    /// Every pair of the 27 colleague cells, as the device kernels (for comparisons with them
    /// to round-off).
    Cells,
}

impl NearPairs {
    /// The name in run files and reports.
    pub fn name(self) -> &'static str {
        match self {
            NearPairs::Sphere => "sphere",
            NearPairs::Cells => "cells",
        }
    }

    /// Parses [`name`](Self::name).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "sphere" => Some(NearPairs::Sphere),
            "cells" => Some(NearPairs::Cells),
            _ => None,
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

/// The f64 positions of particles a solver computing in f32 is given rounded
/// ([`crate::DistEwaldSolver::evaluate_exact`]): its cell lists then hold every coordinate
/// relative to its cell rounded at the scale of the cell, not of the box, and its far field
/// places the windows at the f64 positions (docs/design.md, "f32 on f64 positions").
/// `sources[j]` rounded to the solver's precision must be the source position `j` it is given
/// (or the next one below it, [`parki_core::validate::narrow_coordinate`]), and likewise for the
/// targets.
#[derive(Clone, Copy, Debug)]
pub struct ExactPositions<'a> {
    /// The sources' positions, `(N, 3)`.
    pub sources: &'a [[f64; 3]],
    /// The separate targets' positions, `(M, 3)`; `None` when the targets are the sources.
    pub targets: Option<&'a [[f64; 3]]>,
}

/// P2P on a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DeviceP2p {
    /// GM-1D: a thread per target, sources read from global memory (default).
    #[default]
    GlobalMemory,
    /// A block per target cell, colleague sources staged in shared memory.
    SharedMemory,
}

impl DeviceP2p {
    /// Name in run.toml and reports.
    pub fn name(self) -> &'static str {
        match self {
            DeviceP2p::GlobalMemory => "gm1d",
            DeviceP2p::SharedMemory => "shared",
        }
    }

    /// Parses a run.toml name (the inverse of [`DeviceP2p::name`]).
    pub fn parse(s: &str) -> Option<Self> {
        [DeviceP2p::GlobalMemory, DeviceP2p::SharedMemory].into_iter().find(|v| v.name() == s)
    }
}

/// The complementary error function of P2P on a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DeviceErfc {
    /// The CPU's fitted `erfc(x) = e^{-x^2} f(t)/(1 + 2x)` (parki_nearfield::special), from
    /// the Gaussian the pair computes anyway (default): one reciprocal and a polynomial.
    #[default]
    Fitted,
    /// CUDA's `erfc`, which evaluates its own `exp(-x^2)` (for comparison).
    Library,
}

impl DeviceErfc {
    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            DeviceErfc::Fitted => "fitted",
            DeviceErfc::Library => "library",
        }
    }

    /// Parses a name (the inverse of [`DeviceErfc::name`]).
    pub fn parse(s: &str) -> Option<Self> {
        [DeviceErfc::Fitted, DeviceErfc::Library].into_iter().find(|v| v.name() == s)
    }
}

/// The far field's transforms on a device: the grid's components in one batched plan, or one
/// component's plan run once per component. cuFFT's work area is sized by the plan: a batched
/// plan's for all its components, a component's for one (the device's memory per particle).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DeviceFft {
    /// One plan over every component (default).
    #[default]
    Batched,
    /// One component's plan, run once per component (offset by the component's stride).
    Components,
}

impl DeviceFft {
    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            DeviceFft::Batched => "batched",
            DeviceFft::Components => "components",
        }
    }

    /// Parses a name (the inverse of [`DeviceFft::name`]).
    pub fn parse(s: &str) -> Option<Self> {
        [DeviceFft::Batched, DeviceFft::Components].into_iter().find(|v| v.name() == s)
    }

    /// The components one plan transforms at once, of `comps` (cuFFT's work area is sized
    /// for them: `batch(c) / c` of the grid's `c` components).
    pub fn batch(self, comps: usize) -> usize {
        match self {
            DeviceFft::Batched => comps,
            DeviceFft::Components => comps.min(1),
        }
    }
}

/// What a device runs concurrently: each stage after the other on one stream, or P2P on a
/// second, lower-priority stream beside the far field (P2G, the transforms, CNV, G2P and,
/// over several ranks, the host's exchanges and transforms), joined before the sum. P2P is
/// compute-bound (FP64 pairs) and the far field's kernels memory-bound, so P2P's blocks can
/// fill the arithmetic units the far field leaves idle; seed 000 (§10) names this overlap as
/// future work. With it the pipeline's P2P stage only queues the kernel: the device's P2P
/// seconds are reported apart (`Evaluation::overlapped_p2p`), and the stages after it hold
/// what P2P did not hide.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DeviceOverlap {
    /// One stream, the stages in order (default until measured on a device).
    #[default]
    None,
    /// P2P on the side stream, overlapping the far field.
    P2p,
}

impl DeviceOverlap {
    /// Name in run.toml (`[run] device_overlap`) and reports.
    pub fn name(self) -> &'static str {
        match self {
            DeviceOverlap::None => "none",
            DeviceOverlap::P2p => "p2p",
        }
    }

    /// Parses a name (the inverse of [`DeviceOverlap::name`]).
    pub fn parse(s: &str) -> Option<Self> {
        [DeviceOverlap::None, DeviceOverlap::P2p].into_iter().find(|v| v.name() == s)
    }
}

/// P2G on a device: [`P2gVariant`] picks atomic (`Scatter`) or hybrid (`Blocked`, the
/// default); this one can replace both with the precomputed spreading operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DeviceP2g {
    /// As `EwaldOptions::p2g`: atomic for `Scatter`, hybrid for `Blocked` (default).
    #[default]
    FromP2g,
    /// The precomputed sparse spreading operator (seed 004), rebuilt when positions change.
    Operator,
}

impl DeviceP2g {
    /// Name in run.toml (`[run] spread`) and reports.
    pub fn name(self) -> &'static str {
        match self {
            DeviceP2g::FromP2g => "auto",
            DeviceP2g::Operator => "operator",
        }
    }

    /// Parses a run.toml name (the inverse of [`DeviceP2g::name`]).
    pub fn parse(s: &str) -> Option<Self> {
        [DeviceP2g::FromP2g, DeviceP2g::Operator].into_iter().find(|v| v.name() == s)
    }
}

/// Variants of a device backend (see `parki_gpu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct DeviceVariants {
    /// P2P variant.
    pub p2p: DeviceP2p,
    /// P2G variant.
    pub p2g: DeviceP2g,
    /// Grid points per axis of the far-field cells of the hybrid P2G (a block per cell, one
    /// atomic per point of its `(C + P - 1)^3` support region and component): 0 picks `P`.
    /// The paper's (Alg. 5) is `P/2`; cells of `P` hold 8 times the sources per block, so
    /// fewer atomics per source where the grid is fine against the particle spacing (1.8x
    /// faster on an H100 at N = 1e6, tolerances 1e-9 and 1e-5: docs/performance.md §8).
    pub far_cell: u32,
    /// P2P's erfc.
    pub erfc: DeviceErfc,
    /// The transforms' plans.
    pub fft: DeviceFft,
    /// What runs concurrently.
    pub overlap: DeviceOverlap,
}

impl DeviceVariants {
    /// The given P2P and P2G variants.
    pub fn new(p2p: DeviceP2p, p2g: DeviceP2g) -> Self {
        Self {
            p2p,
            p2g,
            far_cell: 0,
            erfc: DeviceErfc::default(),
            fft: DeviceFft::default(),
            overlap: DeviceOverlap::default(),
        }
    }

    /// What runs concurrently.
    pub fn overlap(mut self, overlap: DeviceOverlap) -> Self {
        self.overlap = overlap;
        self
    }

    /// The transforms' plans.
    pub fn fft(mut self, fft: DeviceFft) -> Self {
        self.fft = fft;
        self
    }

    /// P2P's erfc.
    pub fn erfc(mut self, erfc: DeviceErfc) -> Self {
        self.erfc = erfc;
        self
    }

    /// The hybrid P2G's far-field cell width in grid points (0: `P`).
    pub fn far_cell(mut self, points: u32) -> Self {
        self.far_cell = points;
        self
    }
}
