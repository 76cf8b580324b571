//! The seam where a compute backend attaches to the spectral Ewald pipeline.
//!
//! The pipeline ([`crate::DistEwaldSolver`]) owns what is host-side and collective: input
//! checks, MPI-SORT, ghost sources, the halo row pattern, the return of results. An
//! [`EwaldBackend`] owns the rest and the data that stay between stages: the cell lists of
//! owned and ghost sources and of the owned targets, the near-field values in sorted order, the
//! P2G grid block, the FFT grid and its plans, the gather grid and the far-field values. The
//! pipeline hands particles over once per evaluation ([`EwaldBackend::bin`],
//! [`EwaldBackend::spread`], [`EwaldBackend::interpolate`]), lets the backend pack and unpack
//! grid rows for the halo exchanges itself ([`EwaldBackend::halo_spread`],
//! [`EwaldBackend::halo_gather`]: host memcpys on the CPU, device kernels and pinned staging on
//! a GPU), and reads the result once ([`EwaldBackend::sum_into`]).
//!
//! [`CpuBackend`] is the CPU implementation (rayon + SIMD). docs/design.md ("The backend seam")
//! describes how the CUDA backend implements the same trait.

mod cpu;

pub use cpu::CpuBackend;

use parki_comm::{Backend as SwitchBackend, Comm};
use parki_core::{Kernel, Output, Points, Result, SourceSet};
use parki_decomp::{HaloPlan, ProcGrid};
use parki_farfield::{CostModel, FieldMethod, G2pVariant, GridWindow, P2gVariant, Params};
use parki_fft3d::{LineEngine, PlanRigor};
use parki_nearfield::{CellGrid, Isa};

use crate::SolverReal;

/// What a backend is planned for: one solver's parameters and this rank's share.
pub struct BackendSetup<'a, T> {
    /// Kernel.
    pub kernel: Kernel,
    /// What each target gets: the potential, and the Laplace field if asked.
    pub output: Output,
    /// How the field's far part is computed (`None`: no field).
    pub field_method: Option<FieldMethod>,
    /// The chosen parameters (`xi`, grid, window, ...).
    pub params: &'a Params,
    /// Box lengths.
    pub lengths: [f64; 3],
    /// This rank's window of the cell grid (owned columns plus the ghost ring).
    pub cells: &'a CellGrid,
    /// The window on this rank's P2G grid block.
    pub window: &'a GridWindow<T>,
    /// Whether the block is the FFT grid itself (one rank, or no split axis): P2G and G2P then
    /// work on the FFT's data and no halo exchange runs.
    pub direct: bool,
    /// The communicator of the distributed FFT.
    pub comm: &'a Comm,
    /// The process grid.
    pub pgrid: ProcGrid,
    /// Switch backend of the distributed FFT.
    pub switches: SwitchBackend,
    /// FFTW planning effort (CPU).
    pub fft_rigor: PlanRigor,
    /// What transforms the strided passes' complex lines (CPU).
    pub fft_lines: LineEngine,
    /// P2G variant.
    pub p2g: P2gVariant,
    /// G2P variant.
    pub g2p: G2pVariant,
    /// P2P instruction set (CPU).
    pub isa: Isa,
    /// How P2P evaluates its pair functions (chosen at planning; loose only where the
    /// backend's hints say it has the loose pairs).
    pub pair_accuracy: parki_nearfield::PairAccuracy,
    /// Threads.
    pub threads: usize,
    /// Device variants (device backends).
    pub device: crate::options::DeviceVariants,
    /// This rank's index among the ranks on its node (device backends pick device
    /// `local_rank mod devices`).
    pub local_rank: usize,
    /// Sources this rank is expected to own (scratch sized at plan time).
    pub sources: usize,
    /// Targets this rank is expected to own.
    pub targets: usize,
}

/// What a backend is asked before the parameters are chosen (see [`EwaldBackend::planning`]).
#[derive(Clone, Copy, Debug)]
pub struct PlanningQuery {
    /// Kernel.
    pub kernel: Kernel,
    /// Whether the Laplace field follows the potential (three more values per target).
    pub field: bool,
    /// Ranks the problem is split over.
    pub ranks: usize,
    /// This rank's index among the ranks on its node.
    pub local_rank: usize,
    /// Sources this rank is expected to own.
    pub sources: usize,
    /// Targets this rank is expected to own.
    pub targets: usize,
    /// Device variants (device backends).
    pub device: crate::options::DeviceVariants,
    /// Some axis is free (the grid is zero-padded along it, with the kernel tables).
    pub free_axes: bool,
}

/// A backend's say in the parameter selection (every field `None`: the CPU's defaults).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PlanningHints {
    /// The backend's cost model, used unless the options fix one.
    pub cost: Option<CostModel>,
    /// Sources per padded slot of the backend's source cell lists (SIMD lanes; 1 unpadded).
    pub lanes: Option<usize>,
    /// Largest far-field grid, in the bytes [`Params::grid_bytes`] counts for the whole grid,
    /// that this rank's memory allows the backend (a device's free memory less its per-particle
    /// arrays and FFT work areas). The selection takes the smallest over the ranks, and the
    /// smaller of it and the host's budget; it then prefers a coarser grid to a refusal.
    pub grid_budget: Option<usize>,
    /// The backend's P2P has the CPU's pair accuracies (`PairAccuracy::Medium`, and
    /// `PairAccuracy::Loose` on packed rows): the options' pair accuracy applies; otherwise its
    /// pairs are full accuracy, or medium ones with `medium_pairs`.
    pub loose_pairs: bool,
    /// The backend's P2P has the CPU's medium pair functions but not its loose ones (a CUDA
    /// device): a medium pair accuracy applies, a loose one runs as medium.
    pub medium_pairs: bool,
    /// The backend's P2P can drop the colleague cells' pairs beyond a cut-off sphere (the
    /// CPU's, [`parki_nearfield::NearCutoff::Sphere`]): the options' [`NearPairs`] applies;
    /// otherwise it sums every pair of the cells.
    ///
    /// [`NearPairs`]: crate::options::NearPairs
    pub sphere_cutoff: bool,
    /// The backend holds the far-field grid (its transforms, tables and P2G block) and the cell
    /// lists in its own memory (a device on one rank), which `grid_budget` bounds and its plan
    /// checks: the host's grid budget does not bound the selection then, and the host's memory
    /// estimate counts the backend's upload staging instead of the grids and cell lists.
    pub device_resident: bool,
}

/// Statistics of one near-field evaluation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct NearStats {
    /// Real sources per padded slot in the cell lists.
    pub padding_efficiency: f64,
    /// Evaluated P2P pairs (padding included).
    pub pairs: u64,
    /// P2P's device seconds where it ran on a second stream, overlapping the far field
    /// ([`crate::DeviceOverlap::P2p`]): its pipeline stage then only queued it.
    pub overlapped_seconds: Option<f64>,
}

/// A compute backend of the spectral Ewald pipeline (see the module documentation). The
/// pipeline calls, per evaluation, in this order: `bin`, `near_field`, `spread`, `halo_spread` (when
/// the block is not the FFT grid), `fft_forward`, `convolve`, `fft_backward`, `halo_gather`,
/// `interpolate`, `sum_into`, `near_stats`.
pub trait EwaldBackend<T: SolverReal>: Sized + Send {
    /// Plans the backend: allocates its grids, plans its FFTs, sizes its scratch. Collective
    /// over `setup.comm` (the distributed FFT is planned here).
    ///
    /// # Errors
    /// A resource error when memory, FFT plans or the device cannot be had.
    fn plan(setup: &BackendSetup<'_, T>) -> Result<Self>;

    /// The backend's cost model, cell-list padding and memory budget for the parameter
    /// selection, asked once per plan before the parameters are chosen (a device backend opens
    /// its device to read the free memory). Default: none (the CPU's).
    ///
    /// # Errors
    /// The backend cannot run here (no device); agreed over the ranks by the caller.
    fn planning(query: &PlanningQuery) -> Result<PlanningHints> {
        let _ = query;
        Ok(PlanningHints::default())
    }

    /// Name in reports: `"cpu"`, `"cuda"`.
    fn name(&self) -> &'static str;

    /// Bytes the backend holds (grids, plans' buffers, scratch).
    fn bytes(&self) -> usize;

    /// Bins `sources` (their cells in `keys`, window-local linear cell indices) and `targets`
    /// into cell lists (the pipeline's `cell_lists` stage); they stay on the backend. Where the
    /// sources have position residuals ([`SourceSet::residuals`]) the targets have theirs, and
    /// the cell lists' coordinates are formed from both (`parki_nearfield::PaddedSources`).
    fn bin<S: SourceSet<T>>(&mut self, sources: &S, keys: &[u32], targets: Points<'_, T>);

    /// P2P: the near field at the targets binned by [`bin`](Self::bin), from its sources; the
    /// result stays on the backend. A device may only queue it here, to run beside the far
    /// field until [`sum_into`](Self::sum_into).
    fn near_field(&mut self);

    /// The statistics of the last [`near_field`](Self::near_field), asked after
    /// [`sum_into`](Self::sum_into).
    fn near_stats(&mut self) -> NearStats;

    /// P2G of `sources` onto the grid block (or the FFT grid when direct).
    fn spread<S: SourceSet<T>>(&mut self, sources: &S);

    /// The reverse halo exchange: adds the block's rows into their owners' FFT rows.
    fn halo_spread(&mut self, halo: &mut HaloPlan, comm: &Comm);

    /// Forward FFT of the grid components.
    fn fft_forward(&mut self);

    /// CNV: the Fourier-space kernel and window deconvolution on the local spectrum.
    /// `net_charge`: the sum of the charges over every rank (Laplace, else 0), the exact zero
    /// mode along free axes ([`parki_farfield::FreeCnv::apply`]).
    fn convolve(&mut self, net_charge: f64);

    /// Inverse FFT of the output components.
    fn fft_backward(&mut self);

    /// The forward ghost-grid exchange: copies the owners' rows back into the block.
    fn halo_gather(&mut self, halo: &mut HaloPlan, comm: &Comm);

    /// G2P at `targets` (the same targets as `bin`, placed with their residuals where they have
    /// them, [`Points::at`]); the result stays on the backend.
    fn interpolate(&mut self, targets: Points<'_, T>);

    /// The first error of a stage since the last call (a device failure: stages cannot fail
    /// on the CPU). A failed stage leaves its results invalid but keeps taking part in the
    /// collective exchanges, so that every rank reaches the check after the evaluation.
    fn take_error(&mut self) -> Option<parki_core::Error> {
        None
    }

    /// Writes near + far + `background` into `out` (`output.dim()` values per target, in the
    /// order of the targets given to `bin`; the background adds to the potential only,
    /// a uniform background has no field).
    fn sum_into(&mut self, background: f64, out: &mut [T]);
}
