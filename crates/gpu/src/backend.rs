//! [`GpuBackend`]: the spectral Ewald stages on a [`Device`] (docs/design.md, "The backend
//! seam" and "The CUDA backend").
//!
//! Per evaluation: `near_field` uploads the sources (positions, packed densities, cells) and
//! the targets once, builds both cell lists on the device by counting sort and runs P2P;
//! `spread` runs P2G from the same device arrays (the owned sources are their first part);
//! on one rank the FFTs (cuFFT, batched over components), CNV and G2P run on the device-resident
//! grid; `sum_into` adds near, far and background on the device and downloads the result once.
//!
//! With free axes (0P, 1P, 2P) P2G and G2P work on the data block and `pad_grid` copies it into
//! the zero-padded FFT grid and back; CNV multiplies by the kernel tables of
//! [`parki_farfield::FreeCnv`], computed on the host at plan time and uploaded (`cnv_free`).
//! The Laplace field: P2P's field kernel, and either G2P with the window's derivative
//! (`g2p_field`, the default) or `-i k` in CNV and a four-component G2P (`field_method =
//! "spectral"`).
//!
//! On several ranks the grid block stays on the device for P2G and G2P, and the distributed
//! FFT runs on the host (`DistFft`, FFTW over the slab/pencil switches): the halo rows are
//! packed by a kernel and staged through host memory (see docs/design.md for what remains:
//! the distributed FFT on the device).

use std::sync::Arc;

use rayon::prelude::{IndexedParallelIterator, ParallelIterator, ParallelSlice, ParallelSliceMut};

use parki_comm::Comm;
use parki_core::{Error, Kernel, Output, Points, Result, SourceSet};
use parki_decomp::{GridLayout, HaloPlan, RowLayout};
use parki_dist::{
    BackendSetup, DeviceErfc, DeviceFft, DeviceOverlap, DeviceP2g, DeviceP2p, EwaldBackend, NearStats, P2gVariant,
    PlanningHints, PlanningQuery, SolverReal,
};
use parki_farfield::{Cnv, FieldMethod, FreeCnv, G2pVariant, KaiserBessel};
use parki_fft3d::{DistFft, DistFftOptions, R2rMethod};
use parki_nearfield::{CellGrid, NearCutoff, PairAccuracy};

use crate::buffer::{bytes_of, DeviceBuffer, PinnedBuffer};
use crate::device::{Args, Device, DevicePtr, Precision};
use crate::params::{kernel_code, CellParams, WindowParams};

/// Threads per block of the one-thread-per-item kernels.
const BLOCK: u32 = 256;

/// Threads per block of GM-1D's P2P: with 84 to 96 registers per thread (the Stokes kernels in
/// f64) a GH100 SM holds five blocks of 128 threads (20 warps) where it holds two of 256 (16);
/// the same 24 warps for Laplace (docs/performance.md §8.11). kernels/p2p.cu's launch bounds
/// (`PARKI_P2P_THREADS`) allow no more.
const P2P_BLOCK: u32 = 128;

/// P2P's entry point for `variant` (`"p2p_gm1d"`, `"p2p_shared"`), the kernel (the Laplace
/// potential with its field apart) and the pair functions: CUDA's erfc (`lib`), else the
/// fitted one at full accuracy (`fit`) or f64's medium pair functions (`med`). One per
/// combination, each with its own register allocation (kernels/p2p.cu).
fn p2p_entry(variant: &str, kernel: Kernel, field: bool, erfc: DeviceErfc, medium: bool) -> String {
    let k = match kernel {
        Kernel::Laplace if field => "field",
        Kernel::Laplace => "laplace",
        Kernel::Stokeslet => "stokeslet",
        Kernel::Stresslet => "stresslet",
        Kernel::Stokes => "stokes",
    };
    let e = match erfc {
        DeviceErfc::Library => "lib",
        DeviceErfc::Fitted if medium => "med",
        DeviceErfc::Fitted => "fit",
    };
    format!("{variant}_{k}_{e}")
}

/// Copies `from` into `to` (of the same length) on the threads, `chunk` values per task.
fn par_copy<V: Copy + Send + Sync>(to: &mut [V], from: &[V], chunk: usize) {
    to.par_chunks_mut(chunk).zip(from.par_chunks(chunk)).for_each(|(a, b)| a.copy_from_slice(b));
}

/// P2G as the device runs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceSpread {
    /// A thread per source, atomics (the paper's P2G-base).
    Atomic,
    /// Sources by far-field cell, staged in shared memory (the paper's Alg. 5).
    Hybrid,
    /// The precomputed spreading operator (seed 004).
    Operator,
}

impl DeviceSpread {
    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            DeviceSpread::Atomic => "atomic",
            DeviceSpread::Hybrid => "hybrid",
            DeviceSpread::Operator => "operator",
        }
    }
}

/// A counting sort's device arrays: per-bin counts, offsets (bins + 1), cursors, and the order.
struct Sorted<D: Device> {
    counts: DeviceBuffer<D>,
    offsets: DeviceBuffer<D>,
    cursor: DeviceBuffer<D>,
    order: DeviceBuffer<D>,
    /// The order with every cell sorted by x (`cell_sort_x`), swapped with `order` after it.
    by_x: DeviceBuffer<D>,
}

impl<D: Device> Sorted<D> {
    fn new(dev: &Arc<D>) -> Self {
        Self {
            counts: DeviceBuffer::empty(dev, "cell counts"),
            offsets: DeviceBuffer::empty(dev, "cell offsets"),
            cursor: DeviceBuffer::empty(dev, "cell cursors"),
            order: DeviceBuffer::empty(dev, "sort order"),
            by_x: DeviceBuffer::empty(dev, "sort order"),
        }
    }

    fn bytes(&self) -> usize {
        self.counts.bytes() + self.offsets.bytes() + self.cursor.bytes() + self.order.bytes() + self.by_x.bytes()
    }
}

/// Particles in cell order: coordinates relative to their cell, densities by component, and the
/// cell of every slot (targets).
struct CellList<D: Device> {
    x: DeviceBuffer<D>,
    y: DeviceBuffer<D>,
    z: DeviceBuffer<D>,
    dens: DeviceBuffer<D>,
    cell: DeviceBuffer<D>,
}

impl<D: Device> CellList<D> {
    fn new(dev: &Arc<D>) -> Self {
        Self {
            x: DeviceBuffer::empty(dev, "sorted x"),
            y: DeviceBuffer::empty(dev, "sorted y"),
            z: DeviceBuffer::empty(dev, "sorted z"),
            dens: DeviceBuffer::empty(dev, "sorted densities"),
            cell: DeviceBuffer::empty(dev, "cell of slot"),
        }
    }

    fn bytes(&self) -> usize {
        self.x.bytes() + self.y.bytes() + self.z.bytes() + self.dens.bytes() + self.cell.bytes()
    }
}

/// Position residuals on the device (f32 on f64 positions, `evaluate_exact`): the buffer, and
/// whether the last upload had them (the kernels take address 0 for none).
struct DeviceResiduals<D: Device> {
    buf: DeviceBuffer<D>,
    present: bool,
}

impl<D: Device> DeviceResiduals<D> {
    /// Uploads `v` (12 bytes per particle in f32, from pageable memory), or records none.
    fn upload<T: Copy>(&mut self, v: Option<&[[T; 3]]>) -> Result<()> {
        self.present = v.is_some();
        match v {
            Some(v) if !v.is_empty() => self.buf.upload(v.as_flattened()),
            _ => Ok(()),
        }
    }

    /// The residuals' device address, 0 unless the last upload had them.
    fn ptr(&self) -> DevicePtr {
        if self.present {
            self.buf.ptr()
        } else {
            0
        }
    }
}

/// The precomputed spreading operator and the positions it was built for.
struct SpreadOperator<D: Device> {
    /// Positions and their residuals (host copy, bytes) the operator belongs to.
    positions: Vec<u8>,
    /// Entries per grid point: offsets (points + 1).
    sorted: Sorted<D>,
    keys: DeviceBuffer<D>,
    weights: DeviceBuffer<D>,
    src: DeviceBuffer<D>,
    wsorted: DeviceBuffer<D>,
    /// Builds so far (reported: the break-even needs the reuse count).
    builds: usize,
}

/// CNV on the device (one rank).
enum DeviceCnv<D: Device> {
    /// Triply periodic: the Green's functions on the fly from the per-axis tables of `cnv`
    /// (`k_d` and the screened window deconvolution `f_d`, [`table_offsets`]).
    Periodic { tables: DeviceBuffer<D>, cnv: Cnv },
    /// Free axes: the kernel tables of [`FreeCnv`] on the padded grid (`layout`), stored on its
    /// folded spectrum (`stored`: the slots along `y` and `z`), the stresslet's table map and
    /// the folding's ([`FreeCnv::fold_map`]), the data block P2G writes and G2P reads
    /// (`pad_grid` copies it into the zero-padded FFT grid and back), and the exact zero mode
    /// per unit charge ([`FreeCnv::zero_mode`]).
    Free {
        tables: DeviceBuffer<D>,
        map: DeviceBuffer<D>,
        stored: [usize; 2],
        block: DeviceBuffer<D>,
        layout: GridLayout,
        zero_mode: Option<f64>,
    },
}

/// CNV on the host (several ranks), as the CPU backend runs it.
enum HostCnv<T> {
    Periodic(Cnv),
    Free(Box<FreeCnv<T>>),
}

/// Where the FFT runs.
enum FarGrid<T: SolverReal, D: Device> {
    /// One rank: the grid, cuFFT plans and CNV on the device.
    Device { grid: DeviceBuffer<D>, plan: D::FftPlan, cnv: DeviceCnv<D> },
    /// Several ranks: the distributed FFT and CNV on the host; the P2G/G2P block on the device.
    Host {
        fft: Box<DistFft<T>>,
        cnv: HostCnv<T>,
        block: DeviceBuffer<D>,
        staging: DeviceBuffer<D>,
        rows: DeviceBuffer<D>,
    },
}

/// The spectral Ewald stages on a device `D` (see the module documentation).
pub struct GpuBackend<T: SolverReal, D: Device> {
    dev: Arc<D>,
    precision: Precision,
    kernel: Kernel,
    /// The potential, and the Laplace field when asked.
    output: Output,
    /// Components of the grid the inverse transform returns (the field's too with `-i k`).
    grid_out: usize,
    /// The field by the window's derivative in G2P (`g2p_field`, `dcoeffs`).
    window_field: bool,
    xi: f64,
    threads: usize,
    cells: CellGrid,
    cellp: CellParams,
    winp: WindowParams,
    window_layout: GridLayout,
    /// Values per grid row that carry data (the halo exchanges move these): the grid's x
    /// points, or the data points of a free x axis (its rows are as long as its transform).
    row_data: usize,
    direct: bool,
    coeffs: DeviceBuffer<D>,
    /// The window's derivative coefficients (the field's G2P; empty otherwise).
    dcoeffs: DeviceBuffer<D>,
    p2p: DeviceP2p,
    /// P2P's erfc.
    erfc: DeviceErfc,
    /// P2P evaluates f64's medium pair functions (`PairAccuracy::Medium`, with the fitted erfc).
    medium_pairs: bool,
    /// Squared radius P2P's windows are cut to ([`NearCutoff::window_radius2`] of
    /// [`parki_farfield::Params::near_cut`], as on the CPU); negative: every pair of the cells.
    near_r2: f64,
    spread: DeviceSpread,
    /// Far-field cell width of the hybrid P2G (0: `P`).
    far_cell: u32,
    /// The transforms: one batched plan, or one component's plan run per component.
    fft_plans: DeviceFft,
    /// P2P on the side stream, beside the far field.
    overlap: DeviceOverlap,
    /// P2P was queued on the side stream and not yet joined.
    near_pending: bool,
    /// The last P2P's statistics (complete once it is joined).
    near_stats: NearStats,
    g2p: G2pVariant,
    // sources of the current evaluation
    src_pos: DeviceBuffer<D>,
    /// The sources' position residuals where the evaluation has them (f32 on f64 positions).
    src_lo: DeviceResiduals<D>,
    src_packed: DeviceBuffer<D>,
    src_keys: DeviceBuffer<D>,
    src_sort: Sorted<D>,
    src_cells: CellList<D>,
    /// Address and count of the host positions uploaded by `near_field`.
    src_host: (usize, usize),
    // targets of the current evaluation
    tgt_pos: DeviceBuffer<D>,
    /// The targets' position residuals where the evaluation has them.
    tgt_lo: DeviceResiduals<D>,
    tgt_keys: DeviceBuffer<D>,
    tgt_sort: Sorted<D>,
    tgt_cells: CellList<D>,
    n_tgt: usize,
    // far-field cells (hybrid P2G, sorted G2P)
    far_keys: DeviceBuffer<D>,
    far_sort: Sorted<D>,
    operator: Option<SpreadOperator<D>>,
    near: DeviceBuffer<D>,
    far: DeviceBuffer<D>,
    out: DeviceBuffer<D>,
    grid: FarGrid<T, D>,
    /// Pinned staging of the particles' uploads.
    staging: PinnedBuffer<D>,
    /// Pinned staging of the sources' cell keys.
    key_staging: PinnedBuffer<D>,
    host_rows: Vec<u32>,
    /// Sources binned by the last `bin`.
    n_src: usize,
    /// The pair count of P2P (one u64).
    pairs: DeviceBuffer<D>,
    error: Option<Error>,
}

/// Launches entry point `base` (its `precision` instantiation where it has one) on `grid`
/// blocks of `block` threads.
fn launch_on<D: Device>(
    dev: &D,
    precision: Precision,
    base: &str,
    grid: [u32; 3],
    block: [u32; 3],
    shared: u32,
    args: &mut Args,
) -> Result<()> {
    let name = entry_name(precision, base);
    let p = args.pointers();
    // SAFETY: every call site passes the kernel's parameters in order and type (checked
    // against kernels/ by the emulator tests), with device addresses of live buffers.
    unsafe { dev.launch(&name, grid, block, shared, &p[..args.len()]) }
}

/// Entry point `base`'s name: its `precision` instantiation where it has one.
fn entry_name(precision: Precision, base: &str) -> String {
    let full = crate::kernels::entry(base, precision);
    if crate::kernels::ENTRY_POINTS.contains(&full.as_str()) {
        full
    } else {
        base.to_string()
    }
}

/// A device backend's bytes by part ([`GpuBackend::memory`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceMemory {
    /// The FFT grid, and with free axes the P2G block, the kernel tables and their maps (the
    /// host's staging with several ranks).
    pub grid: usize,
    /// cuFFT's work area.
    pub fft_work: usize,
    /// The precomputed spreading operator (`spread = "operator"`).
    pub operator: usize,
    /// The particles' arrays, the cell lists, the window's coefficients and the values.
    pub particles: usize,
}

impl DeviceMemory {
    /// Every part.
    pub fn total(&self) -> usize {
        self.grid + self.fft_work + self.operator + self.particles
    }
}

/// Runs `plan` on the `count` components at `data` (`stride` bytes apart), in place: once
/// over all of them (a batched plan), or once per component (`per_component`: a plan of one).
///
/// # Safety
/// `data` holds `count` components of the plan's layout and precision, `stride` bytes apart.
unsafe fn transform<D: Device>(
    dev: &D,
    plan: &mut D::FftPlan,
    data: DevicePtr,
    count: usize,
    stride: usize,
    per_component: bool,
    forward: bool,
) -> Result<()> {
    if !per_component {
        // SAFETY: the caller's contract.
        return unsafe { dev.fft(plan, data, forward) };
    }
    for c in 0..count {
        // SAFETY: component `c` of the caller's `count` lies at `data + c stride`.
        unsafe { dev.fft(plan, data + (c * stride) as DevicePtr, forward)? };
    }
    Ok(())
}

/// A one-thread-per-item launch of `base` over `n` items.
fn launch_items<D: Device>(dev: &D, precision: Precision, base: &str, n: usize, args: &mut Args) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    let blocks = n.div_ceil(BLOCK as usize) as u32;
    launch_on(dev, precision, base, [blocks, 1, 1], [BLOCK, 1, 1], 0, args)
}

impl<T: SolverReal, D: Device> GpuBackend<T, D> {
    /// The device the backend runs on.
    pub fn device(&self) -> &D {
        &self.dev
    }

    /// The P2P, P2G and G2P variants used, for the report.
    pub fn variants(&self) -> String {
        let cell = match self.spread {
            DeviceSpread::Hybrid if self.far_cell > 0 => format!(" (far cells of {} points)", self.far_cell),
            _ => String::new(),
        };
        format!(
            "p2p {} (erfc {}{}, {}{}), p2g {}{cell}, g2p {}{}",
            self.p2p.name(),
            self.erfc.name(),
            if self.medium_pairs && self.erfc == DeviceErfc::Fitted { ", medium" } else { "" },
            if self.near_r2 < 0.0 { "cells" } else { "sphere" },
            if self.overlap == DeviceOverlap::P2p { ", overlapping the far field" } else { "" },
            self.spread.name(),
            self.g2p.name(),
            // the plans of one component run on the device's grid (one rank) only
            if self.fft_plans == DeviceFft::Components && matches!(self.grid, FarGrid::Device { .. }) {
                ", fft per component"
            } else {
                ""
            }
        )
    }

    /// Device bytes held now, by part ([`EwaldBackend::bytes`] is their sum).
    pub fn memory(&self) -> DeviceMemory {
        let (grid, fft_work) = match &self.grid {
            FarGrid::Device { grid, plan, cnv } => {
                let cnv = match cnv {
                    DeviceCnv::Periodic { tables, .. } => tables.bytes(),
                    DeviceCnv::Free { tables, map, block, .. } => tables.bytes() + map.bytes() + block.bytes(),
                };
                (grid.bytes() + cnv, D::fft_work_bytes(plan))
            }
            FarGrid::Host { block, staging, rows, .. } => (block.bytes() + staging.bytes() + rows.bytes(), 0),
        };
        let operator = self
            .operator
            .as_ref()
            .map_or(0, |o| o.sorted.bytes() + o.keys.bytes() + o.weights.bytes() + o.src.bytes() + o.wsorted.bytes());
        let particles = self.coeffs.bytes()
            + self.dcoeffs.bytes()
            + self.src_pos.bytes()
            + self.src_lo.buf.bytes()
            + self.src_packed.bytes()
            + self.src_keys.bytes()
            + self.src_sort.bytes()
            + self.src_cells.bytes()
            + self.tgt_pos.bytes()
            + self.tgt_lo.buf.bytes()
            + self.tgt_keys.bytes()
            + self.tgt_sort.bytes()
            + self.tgt_cells.bytes()
            + self.far_keys.bytes()
            + self.far_sort.bytes()
            + self.near.bytes()
            + self.far.bytes()
            + self.out.bytes();
        DeviceMemory { grid, fft_work, operator, particles }
    }

    /// Times the spreading operator was built (one per change of positions).
    pub fn operator_builds(&self) -> usize {
        self.operator.as_ref().map_or(0, |o| o.builds)
    }

    /// Device bytes a backend for `setup` needs before the particles' arrays grow: the grid(s),
    /// on one rank cuFFT's work area (one, shared by the forward and backward plans, taken as
    /// large as the larger plan's data: on an H100, with a work area per plan, the Stokes
    /// kernel's 3 c2r transforms of 784^3 in f64 could not be planned after its 9 r2c ones, a
    /// 35 GB grid and a work area of about its size), the
    /// cell lists' bins, and per particle its arrays (positions, densities, keys, sorted copies,
    /// near and far values); the operator's entries when it is chosen. With free axes on one
    /// rank the FFT grid is the padded one, and the data block P2G writes and the kernel tables
    /// come on top.
    pub fn estimate_bytes(setup: &BackendSetup<'_, T>) -> usize {
        let t = T::BYTES;
        let k = setup.kernel;
        let grid_out = FieldMethod::grid_outputs(setup.field_method, k);
        let layout = &setup.window.layout;
        let comps = k.grid_components().max(grid_out);
        let block = comps * layout.real_len() * t;
        let cells = setup.cells.cells() * 4 * 4;
        let p3 = setup.window.p.pow(3);
        let operator =
            if setup.device.p2g == DeviceP2g::Operator { setup.sources * p3 * (4 + t + 4 + 4 + t) } else { 0 };
        // one rank: the FFT grid and the work area shared by the forward plan (every grid
        // component) and the backward one (the outputs), as large as the grid, or as one
        // component with plans of one component
        let work = |grid: usize| grid / comps.max(1) * setup.device.fft.batch(comps);
        let far = match (&setup.params.free, setup.comm.size() == 1) {
            (_, false) => block,
            (None, true) => block + work(block),
            (Some(f), true) => {
                let half = (f.fft_len[0] / 2 + 1) * f.fft_len[1] * f.fft_len[2];
                // the tables on the folded spectrum of one rank
                let stored = parki_farfield::fold::stored_elements_one_rank(f.fft_len);
                let spectral = setup.field_method == Some(FieldMethod::Spectral);
                let tables = parki_farfield::free::table_count(k, spectral) * stored * t;
                let padded = comps * 2 * half * t;
                padded + work(padded) + block + tables
            }
        };
        far + cells + Self::particle_bytes(k, setup.output.dim(), setup.sources, setup.targets) + operator
    }

    /// Device bytes of the particles' arrays: per source its position, packed and sorted
    /// densities, sorted coordinates, cell and sort slots (two orders with the cut-off sphere's
    /// x sort); per target (at least as many as the
    /// sources: the sources' near, far and result values when they are the targets) its
    /// position, sorted coordinates, near, far and result values, cell and sort slots; in f32
    /// also each one's position residual (`evaluate_exact`).
    fn particle_bytes(kernel: Kernel, dim: usize, sources: usize, targets: usize) -> usize {
        let t = T::BYTES;
        let dw = kernel.density_width();
        let residual = if t < 8 { 3 } else { 0 };
        let per_source = t * (3 + 2 * dw + 3 + residual) + 4 * 4;
        let per_target = t * (3 + 3 + 3 * dim + residual) + 4 * 5;
        sources * per_source + targets.max(sources) * per_target
    }

    /// The far-field grid the parameter selection may choose on a device with `free` bytes, in
    /// the bytes `Params::grid_bytes` counts for the whole grid: what stays after the
    /// particles' arrays and a reserve (5 % and 256 MiB: the context, cuFFT's plans, the cell
    /// lists' bins, allocation rounding), over the device bytes per grid byte. On one rank
    /// the device holds the grid and cuFFT's work area (as large as the grid: two device bytes
    /// per grid byte; `1 + 1/c` for `c` components with [`DeviceFft::Components`]); on several
    /// ranks its P2G block, taken as at most twice the rank's share of the grid.
    /// `estimate_bytes` checks the chosen plan exactly (and counts the spreading operator,
    /// whose size depends on the chosen `P`).
    pub fn grid_budget(query: &PlanningQuery, free: u64) -> usize {
        let k = query.kernel;
        let reserve = 0.05 * free as f64 + (256u64 << 20) as f64;
        let dim = k.output_dim() + if query.field { 3 } else { 0 };
        let particles = Self::particle_bytes(k, dim, query.sources, query.targets) as f64;
        let avail = (free as f64 - reserve - particles).max(0.0);
        // one rank: the grid and the work area (as large as the grid, or as one component with
        // plans of one); several: the block is at most twice the rank's share of the grid
        let per_grid_byte = if query.ranks == 1 { Self::device_bytes_per_grid_byte(query) } else { 2.0 };
        (avail * query.ranks as f64 / per_grid_byte).min(usize::MAX as f64 / 2.0) as usize
    }

    /// Device bytes per byte of `Params::grid_bytes` on one rank. The selection counts the
    /// grid's `c` components (`c = max(spread, returned)`), and for `o > 1` returned components
    /// the CPU's interleaved copy G2P gathers from (`o` more, data points only); the device
    /// holds the `c` components and cuFFT's work area (`w c`: `w = 1` for the batched plans,
    /// `1/c` per component) and no gather copy. Triply periodic: `c (1 + w) / (c + o)` (1 for
    /// the batched Stokeslet, whose three outputs the selection counts twice; 1.5 for the
    /// combined kernel's nine components and three outputs; 2 for Laplace). With free axes the
    /// padded grid is at least 8 times the data the copy covers: `1 + w`. The Laplace field's
    /// method is not known here: the window's (one returned component) is assumed, the larger
    /// ratio.
    fn device_bytes_per_grid_byte(query: &PlanningQuery) -> f64 {
        let k = query.kernel;
        let returned = FieldMethod::grid_outputs(query.field.then_some(FieldMethod::Window), k);
        let comps = k.grid_components().max(returned) as f64;
        let w = query.device.fft.batch(comps as usize) as f64 / comps;
        let gather = if returned > 1 { returned as f64 } else { 0.0 };
        if query.free_axes {
            1.0 + w
        } else {
            comps * (1.0 + w) / (comps + gather)
        }
    }

    fn launch(&self, name: &str, grid: [u32; 3], block: [u32; 3], shared: u32, args: &mut Args) -> Result<()> {
        launch_on(&*self.dev, self.precision, name, grid, block, shared, args)
    }

    fn launch_n(&self, name: &str, n: usize, args: &mut Args) -> Result<()> {
        launch_items(&*self.dev, self.precision, name, n, args)
    }

    /// Threads per block of a block-wide kernel: `on_device` on a GPU, 32 on the emulator
    /// (which runs a block's threads as fibers, one after another).
    fn block_threads(&self, on_device: u32) -> u32 {
        if self.dev.info().compute.0 == 0 {
            32
        } else {
            on_device
        }
    }

    /// Uploads the sources' positions and packed densities and the targets' positions: packed
    /// on the solver's threads into the pinned staging buffer a piece at a time, each piece's
    /// copy queued before the next is packed, so that the bus copies while the host packs.
    /// Targets that are the first sources' positions (the pipeline's targets when they are the
    /// sources) are not staged or sent again: the device copies them from the sources'.
    fn upload_particles<S: SourceSet<T>>(&mut self, sources: &S, targets: &[[T; 3]]) -> Result<()> {
        const CHUNK: usize = 1 << 14; // particles per task on the threads
        const PIECES: usize = 8; // queued copies per array
        let (kernel, n, nt) = (self.kernel, sources.count(), targets.len());
        let dw = kernel.density_width();
        let t = T::BYTES;
        let aliased = nt > 0 && nt <= n && std::ptr::eq(targets.as_ptr(), sources.positions().as_ptr());
        let staged_targets = if aliased { 0 } else { nt };
        // copies queued from the staging buffer (an earlier upload of this evaluation) finish
        // before it is written again
        self.dev.synchronize()?;
        self.src_pos.ensure(3 * n * t)?;
        self.src_packed.ensure(dw * n * t)?;
        self.tgt_pos.ensure(3 * nt * t)?;
        let all = self.staging.slice::<T>(3 * n + dw * n + 3 * staged_targets)?;
        let (pos, rest) = all.split_at_mut(3 * n);
        let (dens, tgt) = rest.split_at_mut(dw * n);
        let from = sources.positions().as_flattened();
        let piece = n.div_ceil(PIECES).max(1);
        for p0 in (0..n).step_by(piece) {
            let p1 = (p0 + piece).min(n);
            let (to_pos, to_dens) = (&mut pos[3 * p0..3 * p1], &mut dens[dw * p0..dw * p1]);
            par_copy(to_pos, &from[3 * p0..3 * p1], 3 * CHUNK);
            to_dens.par_chunks_mut(dw * CHUNK).enumerate().for_each(|(c, block)| {
                for (k, d) in block.chunks_exact_mut(dw).enumerate() {
                    sources.density(kernel, p0 + c * CHUNK + k, d);
                }
            });
            self.src_pos.upload_at(3 * p0 * t, to_pos)?;
            self.src_packed.upload_at(dw * p0 * t, to_dens)?;
        }
        if aliased {
            self.tgt_pos.copy_from(&self.src_pos, 3 * nt * t)?;
        } else {
            let from = targets.as_flattened();
            let piece = nt.div_ceil(PIECES).max(1);
            for p0 in (0..nt).step_by(piece) {
                let p1 = (p0 + piece).min(nt);
                let to = &mut tgt[3 * p0..3 * p1];
                par_copy(to, &from[3 * p0..3 * p1], 3 * CHUNK);
                self.tgt_pos.upload_at(3 * p0 * t, to)?;
            }
        }
        self.src_host = (sources.positions().as_ptr() as usize, n);
        Ok(())
    }

    /// Uploads the sources' cell keys through the pinned key staging (after
    /// [`upload_particles`](Self::upload_particles), which waited for earlier copies).
    fn upload_keys(&mut self, keys: &[u32]) -> Result<()> {
        self.src_keys.ensure(4 * keys.len())?;
        let staged = self.key_staging.slice::<u32>(keys.len())?;
        par_copy(staged, keys, 1 << 16);
        self.src_keys.upload_at(0, staged)
    }

    /// Counting sort of `n` keys at `keys` into `bins` bins.
    fn counting_sort(&self, keys: DevicePtr, n: usize, bins: usize, s: &mut Sorted<D>) -> Result<()> {
        s.counts.ensure(4 * bins.max(1))?;
        s.offsets.ensure(4 * (bins + 1))?;
        s.cursor.ensure(4 * bins.max(1))?;
        s.order.ensure(4 * n.max(1))?;
        s.counts.zero(4 * bins)?;
        s.cursor.zero(4 * bins)?;
        self.launch_n("sort_count", n, Args::new().push(keys).push(n as u32).push(s.counts.ptr()))?;
        let b = self.block_threads(1024);
        self.launch(
            "scan_exclusive",
            [1, 1, 1],
            [b, 1, 1],
            4 * b,
            Args::new().push(s.counts.ptr()).push(bins as u32).push(s.offsets.ptr()),
        )?;
        self.launch_n(
            "sort_scatter",
            n,
            Args::new().push(keys).push(n as u32).push(s.offsets.ptr()).push(s.cursor.ptr()).push(s.order.ptr()),
        )
    }

    /// With P2P's cut-off sphere, the particles of every cell of `sort` ordered by x (ties by
    /// index, as the CPU's `sort_bins_by_x`): its windows are found by binary search. Without
    /// it the counting sort's order stays.
    /// `lo`: the position residuals (0: none).
    fn sort_cells_by_x(
        &self,
        pos: DevicePtr,
        lo: DevicePtr,
        keys: DevicePtr,
        n: usize,
        s: &mut Sorted<D>,
    ) -> Result<()> {
        if self.near_r2 < 0.0 {
            return Ok(());
        }
        s.by_x.ensure(4 * n.max(1))?;
        let mut a = Args::new();
        a.push(pos).push(lo).push(keys).push(s.offsets.ptr()).push(s.order.ptr()).push(n as u32).push(s.by_x.ptr());
        self.launch_n("cell_sort_x", n, &mut a)?;
        std::mem::swap(&mut s.order, &mut s.by_x);
        Ok(())
    }

    /// Gathers `n` particles in the order of `sort` into `list` (`lo`: their position
    /// residuals, 0 for none).
    #[allow(clippy::too_many_arguments)]
    fn gather_cells(
        &self,
        pos: DevicePtr,
        lo: DevicePtr,
        packed: DevicePtr,
        dw: usize,
        keys: DevicePtr,
        sort: &Sorted<D>,
        n: usize,
        list: &mut CellList<D>,
        with_cells: bool,
    ) -> Result<()> {
        let t = T::BYTES;
        list.x.ensure(t * n.max(1))?;
        list.y.ensure(t * n.max(1))?;
        list.z.ensure(t * n.max(1))?;
        list.dens.ensure(t * (dw * n).max(1))?;
        if with_cells {
            list.cell.ensure(4 * n.max(1))?;
        }
        let cell = if with_cells { list.cell.ptr() } else { 0 };
        self.launch_n(
            "cell_gather",
            n,
            Args::new()
                .push(self.cellp)
                .push(pos)
                .push(lo)
                .push(packed)
                .push(dw as i32)
                .push(keys)
                .push(sort.order.ptr())
                .push(n as u32)
                .push(list.x.ptr())
                .push(list.y.ptr())
                .push(list.z.ptr())
                .push(list.dens.ptr())
                .push(cell),
        )
    }

    /// Uploads the sources, their cells and the targets, and builds both cell lists on the
    /// device (the pipeline's `cell_lists` stage); with position residuals, from both.
    fn try_bin<S: SourceSet<T>>(&mut self, sources: &S, keys: &[u32], targets: Points<'_, T>) -> Result<()> {
        let dw = self.kernel.density_width();
        let (ns, nt) = (sources.count(), targets.len());
        self.n_src = ns;
        self.upload_particles(sources, targets.positions)?;
        self.upload_keys(keys)?;
        self.src_lo.upload(sources.residuals())?;
        self.tgt_lo.upload(targets.residuals)?;
        let (src_lo, tgt_lo) = (self.src_lo.ptr(), self.tgt_lo.ptr());
        let mut sort = std::mem::replace(&mut self.src_sort, Sorted::new(&self.dev));
        let mut list = std::mem::replace(&mut self.src_cells, CellList::new(&self.dev));
        let r = self
            .counting_sort(self.src_keys.ptr(), ns, self.cells.cells(), &mut sort)
            .and_then(|_| self.sort_cells_by_x(self.src_pos.ptr(), src_lo, self.src_keys.ptr(), ns, &mut sort))
            .and_then(|_| {
                self.gather_cells(
                    self.src_pos.ptr(),
                    src_lo,
                    self.src_packed.ptr(),
                    dw,
                    self.src_keys.ptr(),
                    &sort,
                    ns,
                    &mut list,
                    false,
                )
            });
        self.src_sort = sort;
        self.src_cells = list;
        r?;
        // targets: cells on the device
        self.tgt_keys.ensure(4 * nt.max(1))?;
        self.n_tgt = nt;
        self.launch_n(
            "cell_keys",
            nt,
            Args::new().push(self.cellp).push(self.tgt_pos.ptr()).push(nt as u32).push(self.tgt_keys.ptr()),
        )?;
        let mut sort = std::mem::replace(&mut self.tgt_sort, Sorted::new(&self.dev));
        let mut list = std::mem::replace(&mut self.tgt_cells, CellList::new(&self.dev));
        let r = self
            .counting_sort(self.tgt_keys.ptr(), nt, self.cells.cells(), &mut sort)
            .and_then(|_| self.sort_cells_by_x(self.tgt_pos.ptr(), tgt_lo, self.tgt_keys.ptr(), nt, &mut sort))
            .and_then(|_| {
                self.gather_cells(self.tgt_pos.ptr(), tgt_lo, 0, 0, self.tgt_keys.ptr(), &sort, nt, &mut list, true)
            });
        self.tgt_sort = sort;
        self.tgt_cells = list;
        r
    }

    /// P2P over the cell lists of [`try_bin`](Self::try_bin): run, and its pairs counted; or,
    /// with [`DeviceOverlap::P2p`], queued on the side stream until
    /// [`join_near`](Self::join_near).
    fn try_near_field(&mut self) -> Result<()> {
        let kernel = self.kernel;
        let (dw, dim) = (kernel.density_width(), self.output.dim());
        let (ns, nt) = (self.n_src, self.n_tgt);
        let t = T::BYTES;
        self.near.ensure(t * (dim * nt).max(1))?;
        let mut a = Args::new();
        a.push(self.cellp);
        match self.precision {
            Precision::F32 => a.push(self.xi as f32),
            Precision::F64 => a.push(self.xi),
        };
        a.push(self.near_r2);
        // the pairs, counted by the kernel (per thread its windows, one atomic add)
        self.pairs.ensure(8)?;
        self.pairs.zero(8)?;
        let (s, tl) = (&self.src_cells, &self.tgt_cells);
        let (variant, grid, block, shared) = match self.p2p {
            DeviceP2p::GlobalMemory => {
                a.push(nt as u32).push(tl.cell.ptr());
                ("p2p_gm1d", [nt.div_ceil(P2P_BLOCK as usize) as u32, 1, 1], [P2P_BLOCK, 1, 1], 0)
            }
            DeviceP2p::SharedMemory => {
                a.push(self.tgt_sort.offsets.ptr());
                let b = self.block_threads(128);
                ("p2p_shared", [self.cells.cells() as u32, 1, 1], [b, 1, 1], b as usize * (3 + dw) * t)
            }
        };
        let name = p2p_entry(variant, kernel, self.output.field, self.erfc, self.medium_pairs);
        a.push(tl.x.ptr()).push(tl.y.ptr()).push(tl.z.ptr()).push(self.src_sort.offsets.ptr());
        a.push(s.x.ptr()).push(s.y.ptr()).push(s.z.ptr()).push(s.dens.ptr()).push(ns as u32);
        a.push(self.near.ptr()).push(self.pairs.ptr());
        if nt == 0 {
            return self.count_pairs(None);
        }
        if self.overlap == DeviceOverlap::P2p {
            // the side stream starts after the cell lists and the zeroed count; nothing the
            // far field queues before the join writes what P2P reads (the cell lists, their
            // offsets) or uses `near` and `pairs`
            self.dev.fork()?;
            let name = entry_name(self.precision, &name);
            // SAFETY: P2P's parameters in order and type (checked by the emulator tests), the
            // addresses of live buffers that stay unchanged until `join_near`.
            unsafe { self.dev.launch_side(&name, grid, block, shared as u32, a)? };
            self.near_pending = true;
            return Ok(());
        }
        self.launch(&name, grid, block, shared as u32, &mut a)?;
        self.count_pairs(None)
    }

    /// The pairs the finished P2P counted into the statistics (`overlapped`: its side
    /// stream's seconds).
    fn count_pairs(&mut self, overlapped: Option<f64>) -> Result<()> {
        let mut pairs = [0u64];
        self.pairs.download(&mut pairs)?;
        self.near_stats = NearStats { padding_efficiency: 1.0, pairs: pairs[0], overlapped_seconds: overlapped };
        Ok(())
    }

    /// Makes the stream wait for a P2P queued on the side stream, and counts its pairs.
    fn join_near(&mut self) -> Result<()> {
        if !std::mem::take(&mut self.near_pending) {
            return Ok(());
        }
        let seconds = self.dev.join()?;
        self.count_pairs(Some(seconds))
    }

    /// The grid P2G writes and G2P reads, with its parameter block.
    fn work_grid(&self) -> DevicePtr {
        match &self.grid {
            FarGrid::Device { cnv: DeviceCnv::Free { block, .. }, .. } => block.ptr(),
            FarGrid::Device { grid, .. } => grid.ptr(),
            FarGrid::Host { block, .. } => block.ptr(),
        }
    }

    fn try_spread<S: SourceSet<T>>(&mut self, sources: &S) -> Result<()> {
        let kernel = self.kernel;
        let n = sources.count();
        // the owned sources are the first of those near_field uploaded
        let same = sources.positions().as_ptr() as usize == self.src_host.0 && n <= self.src_host.1;
        if !same {
            self.upload_particles(sources, &[])?;
            self.src_lo.upload(sources.residuals())?;
        }
        let lo = self.src_lo.ptr();
        let grid = self.work_grid();
        let ncomp = kernel.grid_components();
        let t = T::BYTES;
        // SAFETY: the work grid holds max(ncomp, grid_out) components of real_len reals
        // (allocated at plan).
        unsafe { self.dev.zero(grid, ncomp * self.window_layout.real_len() * t)? };
        let code = kernel_code(kernel);
        match self.spread {
            DeviceSpread::Atomic => {
                let mut a = Args::new();
                a.push(self.winp).push(self.coeffs.ptr()).push(code).push(n as u32);
                a.push(self.src_pos.ptr()).push(lo).push(self.src_packed.ptr()).push(grid);
                self.launch_n("p2g_atomic", n, &mut a)
            }
            DeviceSpread::Hybrid => {
                let cw = if self.far_cell > 0 { self.far_cell } else { self.winp.p as u32 };
                let nf = self.sort_by_far_cell(self.src_pos.ptr(), lo, n, cw)?;
                let p = self.winp.p as usize;
                let per = (3 * p + ncomp) * t + 12;
                let batch = (40 * 1024 / per).clamp(1, 64) as u32;
                let shared = batch as usize * per;
                let b = self.block_threads(256);
                let mut a = Args::new();
                a.push(self.winp).push(self.coeffs.ptr()).push(code).push(cw).push(self.far_sort.offsets.ptr());
                a.push(self.far_sort.order.ptr())
                    .push(self.src_pos.ptr())
                    .push(lo)
                    .push(self.src_packed.ptr())
                    .push(batch)
                    .push(grid);
                self.launch("p2g_hybrid", [nf as u32, 1, 1], [b, 1, 1], shared as u32, &mut a)
            }
            DeviceSpread::Operator => {
                self.build_operator(sources.positions(), sources.residuals(), n)?;
                let op = self.operator.as_ref().expect("built above");
                let points = self.window_layout.points();
                let mut a = Args::new();
                a.push(self.winp).push(code).push(op.sorted.offsets.ptr()).push(op.src.ptr());
                a.push(op.wsorted.ptr()).push(self.src_packed.ptr()).push(grid);
                self.launch_n("p2g_operator_apply", points, &mut a)
            }
        }
    }

    /// Sorts the `n` points at device `positions` (with their residuals at `lo`, 0 for none) by
    /// far-field cell of `cw` grid points a side into `far_sort` (keys by `farcell_keys`, then
    /// the counting sort); returns the number of cells.
    fn sort_by_far_cell(&mut self, positions: DevicePtr, lo: DevicePtr, n: usize, cw: u32) -> Result<usize> {
        let nf: usize = (0..3).map(|d| (self.winp.m[d] as usize).div_ceil(cw as usize)).product();
        self.far_keys.ensure(4 * n.max(1))?;
        let mut a = Args::new();
        a.push(self.winp).push(cw).push(n as u32).push(positions).push(lo).push(self.far_keys.ptr());
        self.launch_n("farcell_keys", n, &mut a)?;
        let mut sort = std::mem::replace(&mut self.far_sort, Sorted::new(&self.dev));
        let r = self.counting_sort(self.far_keys.ptr(), n, nf, &mut sort);
        self.far_sort = sort;
        r.map(|_| nf)
    }

    /// Builds the spreading operator unless it was built for these positions (and residuals).
    fn build_operator(&mut self, positions: &[[T; 3]], residuals: Option<&[[T; 3]]>, n: usize) -> Result<()> {
        let (pos, res) = (bytes_of(&positions[..n]), residuals.map_or(&[][..], |r| bytes_of(&r[..n])));
        let current = |o: &SpreadOperator<D>| {
            o.positions.len() == pos.len() + res.len()
                && o.positions[..pos.len()] == *pos
                && o.positions[pos.len()..] == *res
        };
        if self.operator.as_ref().is_some_and(current) {
            return Ok(());
        }
        let p3 = (self.winp.p as usize).pow(3);
        let entries = n * p3;
        if entries > u32::MAX as usize {
            return Err(Error::Unsupported {
                what: format!("the spreading operator for {n} sources of {p3} entries each (more than 2^32 entries)"),
            });
        }
        let t = T::BYTES;
        let mut op = match self.operator.take() {
            Some(o) => o,
            None => SpreadOperator {
                positions: Vec::new(),
                sorted: Sorted::new(&self.dev),
                keys: DeviceBuffer::empty(&self.dev, "operator keys"),
                weights: DeviceBuffer::empty(&self.dev, "operator weights"),
                src: DeviceBuffer::empty(&self.dev, "operator sources"),
                wsorted: DeviceBuffer::empty(&self.dev, "operator sorted weights"),
                builds: 0,
            },
        };
        op.keys.ensure(4 * entries.max(1))?;
        op.weights.ensure(t * entries.max(1))?;
        op.src.ensure(4 * entries.max(1))?;
        op.wsorted.ensure(t * entries.max(1))?;
        let mut a = Args::new();
        a.push(self.winp).push(self.coeffs.ptr()).push(n as u32).push(self.src_pos.ptr()).push(self.src_lo.ptr());
        a.push(op.keys.ptr()).push(op.weights.ptr());
        self.launch_n("p2g_operator_entries", n, &mut a)?;
        self.counting_sort(op.keys.ptr(), entries, self.window_layout.points(), &mut op.sorted)?;
        let mut a = Args::new();
        a.push(entries as u64).push(p3 as u32).push(op.sorted.order.ptr()).push(op.weights.ptr());
        a.push(op.src.ptr()).push(op.wsorted.ptr());
        self.launch_n("p2g_operator_pack", entries, &mut a)?;
        op.positions.clear();
        op.positions.extend_from_slice(pos);
        op.positions.extend_from_slice(res);
        op.builds += 1;
        self.operator = Some(op);
        Ok(())
    }

    fn try_interpolate(&mut self, targets: Points<'_, T>) -> Result<()> {
        let nt = targets.len();
        let lo = self.tgt_lo.ptr();
        debug_assert_eq!(nt, self.n_tgt, "G2P at the targets of the near field");
        self.far.ensure(T::BYTES * (self.output.dim() * nt).max(1))?;
        let grid = self.work_grid();
        let order = match self.g2p {
            G2pVariant::Base => 0,
            G2pVariant::TargetSorted => {
                let cw = (self.winp.p as u32 / 2).max(1);
                self.sort_by_far_cell(self.tgt_pos.ptr(), lo, nt, cw)?;
                self.far_sort.order.ptr()
            }
        };
        let mut a = Args::new();
        if self.window_field {
            a.push(self.winp).push(self.coeffs.ptr()).push(self.dcoeffs.ptr()).push(nt as u32);
            a.push(self.tgt_pos.ptr()).push(lo).push(order).push(grid).push(self.far.ptr());
            return self.launch_n("g2p_field", nt, &mut a);
        }
        a.push(self.winp).push(self.coeffs.ptr()).push(self.grid_out as i32).push(nt as u32).push(self.tgt_pos.ptr());
        a.push(lo).push(order).push(grid).push(self.far.ptr());
        self.launch_n("g2p", nt, &mut a)
    }

    fn try_sum_into(&mut self, background: f64, out: &mut [T]) -> Result<()> {
        let dim = self.output.dim();
        let nt = self.n_tgt;
        assert_eq!(out.len(), nt * dim, "one result per target");
        self.out.ensure(T::BYTES * out.len().max(1))?;
        let mut a = Args::new();
        a.push(nt as u32).push(dim as i32).push(self.tgt_sort.order.ptr()).push(self.near.ptr()).push(self.far.ptr());
        match self.precision {
            Precision::F32 => a.push(background as f32),
            Precision::F64 => a.push(background),
        };
        a.push(self.out.ptr());
        self.launch_n("sum_into", nt, &mut a)?;
        self.out.download(out)
    }

    fn try_fft(&mut self, forward: bool) -> Result<()> {
        let ncomp = self.kernel.grid_components();
        let dim = self.grid_out;
        let rl = self.window_layout.real_len();
        let direct = self.direct;
        let per_component = self.fft_plans == DeviceFft::Components;
        let (dev, precision, window) = (&self.dev, self.precision, &self.window_layout);
        match &mut self.grid {
            FarGrid::Device { grid, plan, cnv: DeviceCnv::Free { block, layout, .. } } => {
                // the data block into the zero-padded grid, the transforms, the data points back
                let pad = |pad: i32, comps: usize| {
                    let (m, n) = (window.global, layout.global);
                    let points = if pad == 1 { layout.points() } else { window.points() };
                    let mut a = Args::new();
                    a.push(pad).push(comps as i32);
                    a.push(m[0] as i32).push(m[1] as i32).push(m[2] as i32);
                    a.push(window.row_stride() as i32).push(window.real_len() as i64);
                    a.push(n[0] as i32).push(n[1] as i32).push(n[2] as i32);
                    a.push(layout.row_stride() as i32).push(layout.real_len() as i64);
                    a.push(block.ptr()).push(grid.ptr());
                    launch_items(&**dev, precision, "pad_grid", comps * points, &mut a)
                };
                if forward {
                    pad(1, ncomp)?;
                }
                let count = if forward { ncomp } else { dim };
                // SAFETY: the grid holds `count` components of the planned layout.
                unsafe {
                    transform(&**dev, plan, grid.ptr(), count, layout.real_len() * T::BYTES, per_component, forward)?
                };
                if !forward {
                    pad(0, dim)?;
                }
                Ok(())
            }
            FarGrid::Device { grid, plan, .. } => {
                let count = if forward { ncomp } else { dim };
                // SAFETY: the grid holds `count` components of the planned layout.
                unsafe { transform(&**dev, plan, grid.ptr(), count, rl * T::BYTES, per_component, forward) }
            }
            FarGrid::Host { fft, block, .. } => {
                if forward {
                    if direct {
                        block.download(&mut fft.data_mut()[..ncomp * rl])?;
                    }
                    fft.forward();
                } else {
                    fft.backward();
                    if direct {
                        let mut b = std::mem::replace(block, DeviceBuffer::empty(&self.dev, "grid block"));
                        let r = b.upload(&fft.data()[..dim * rl]);
                        *block = b;
                        r?;
                    }
                }
                Ok(())
            }
        }
    }

    fn try_convolve(&mut self, net_charge: f64) -> Result<()> {
        let threads = self.threads;
        let field = i32::from(self.grid_out > self.kernel.output_dim());
        match &mut self.grid {
            FarGrid::Device { grid, cnv: DeviceCnv::Free { tables, map, stored, layout, zero_mode, .. }, .. } => {
                let (mxc, my, mz) = (layout.complex_row(), layout.global[1], layout.global[2]);
                let mut a = Args::new();
                a.push(kernel_code(self.kernel)).push(field).push(mxc as i32).push(my as i32).push(mz as i32);
                a.push(stored[0] as i32).push(stored[1] as i32);
                a.push(layout.row_stride() as i32).push(layout.real_len() as i64);
                a.push(i32::from(zero_mode.is_some())).push(zero_mode.map_or(0.0, |w0| net_charge * w0));
                a.push(tables.ptr()).push(map.ptr()).push(grid.ptr());
                launch_items(&*self.dev, self.precision, "cnv_free", mxc * my * mz, &mut a)
            }
            FarGrid::Device { grid, cnv: DeviceCnv::Periodic { tables, cnv }, .. } => {
                let l = &self.window_layout;
                let (mxc, my, mz) = (l.complex_row(), l.global[1], l.global[2]);
                let offs = table_offsets(l);
                let base = tables.ptr();
                let mut a = Args::new();
                a.push(kernel_code(self.kernel)).push(field).push(mxc as i32).push(my as i32).push(mz as i32);
                a.push(l.row_stride() as i32).push(l.real_len() as i64).push(cnv.volume()).push(cnv.inv4xi2());
                for o in offs {
                    a.push(base + 8 * o as u64);
                }
                a.push(grid.ptr());
                launch_items(&*self.dev, self.precision, "cnv", mxc * my * mz, &mut a)
            }
            FarGrid::Host { fft, cnv, .. } => {
                let par = parki_core::Par::with_threads(threads);
                match cnv {
                    HostCnv::Periodic(cnv) => {
                        let block = fft.spectral_layout();
                        cnv.apply_block(fft.data_mut(), &block, par);
                    }
                    HostCnv::Free(cnv) => cnv.apply(fft.data_mut(), par, net_charge),
                }
                Ok(())
            }
        }
    }

    /// Packs `rows` of `comps` components of the device `grid` (row layout `layout`) into
    /// `output` through the staging buffer (mode 0), or writes `input` into them (1: add,
    /// 2: copy).
    #[allow(clippy::too_many_arguments)]
    fn rows(
        dev: &Arc<D>,
        precision: Precision,
        mode: i32,
        rows: &[usize],
        comps: usize,
        layout: RowLayout,
        grid: DevicePtr,
        staging: &mut DeviceBuffer<D>,
        row_buf: &mut DeviceBuffer<D>,
        host_rows: &mut Vec<u32>,
        input: &[T],
        output: &mut [T],
    ) -> Result<()> {
        let n = rows.len() * comps * layout.mx;
        if n == 0 {
            return Ok(());
        }
        host_rows.clear();
        host_rows.extend(rows.iter().map(|&r| r as u32));
        row_buf.upload(host_rows)?;
        staging.ensure(n * T::BYTES)?;
        if mode != 0 {
            staging.upload(&input[..n])?;
        }
        let mut a = Args::new();
        a.push(mode).push(rows.len() as u32).push(row_buf.ptr()).push(comps as i32).push(layout.mx as i32);
        a.push(layout.row_stride as i32).push(layout.component_stride as i64).push(grid).push(staging.ptr());
        launch_items(&**dev, precision, "rows", n, &mut a)?;
        if mode == 0 {
            staging.download(&mut output[..n])?;
        }
        Ok(())
    }

    /// Records a stage's error; a stage that ran waits for the device, so that the pipeline's
    /// per-stage wall times are the device's (a few microseconds per stage).
    fn record(&mut self, r: Result<()>) {
        let r = r.and_then(|_| self.dev.synchronize());
        if let Err(e) = r {
            self.error.get_or_insert(e);
        }
    }
}

/// Offsets (in f64) of the six CNV tables `k_x, k_y, k_z, f_x, f_y, f_z` in one buffer.
fn table_offsets(l: &GridLayout) -> [usize; 6] {
    let n = [l.complex_row(), l.global[1], l.global[2]];
    [0, n[0], n[0] + n[1], n[0] + n[1] + n[2], 2 * n[0] + n[1] + n[2], 2 * n[0] + 2 * n[1] + n[2]]
}

impl<T: SolverReal, D: Device> EwaldBackend<T> for GpuBackend<T, D> {
    /// Opens the device for the free memory: the grid budget of [`GpuBackend::grid_budget`],
    /// and source cell lists unpadded (P2P on the device runs a thread per target, not SIMD
    /// lanes over sources), P2P's cut-off sphere (the options' `NearPairs`; its windows in
    /// `p2p_gm1d` and `p2p_shared`), and f64's medium pair functions (not the loose ones: a
    /// loose accuracy runs medium). The cost model stays the CPU's: the device's constants
    /// (`parki-gpu-bench --modes calibrate`, an H200 in session 33) planned 1-11 % slower
    /// evaluations than the CPU's model (docs/performance.md §8.8).
    fn planning(query: &PlanningQuery) -> Result<PlanningHints> {
        let dev = D::open(query.local_rank)?;
        let free = dev.free_memory()?;
        Ok(PlanningHints {
            cost: None,
            lanes: Some(1),
            grid_budget: Some(Self::grid_budget(query, free)),
            loose_pairs: false,
            medium_pairs: true,
            sphere_cutoff: true,
            // one rank: the grid, its transforms and the cell lists live on the device
            device_resident: query.ranks == 1,
        })
    }

    fn plan(s: &BackendSetup<'_, T>) -> Result<Self> {
        let dev = Arc::new(D::open(s.local_rank)?);
        let precision = if T::BYTES == 4 { Precision::F32 } else { Precision::F64 };
        let p = s.params;
        let kernel = s.kernel;
        let ncomp = kernel.grid_components();
        let grid_out = FieldMethod::grid_outputs(s.field_method, kernel);
        // the components each transform plan covers (one, run per component, or all)
        let (plan_ncomp, plan_out) = (s.device.fft.batch(ncomp), s.device.fft.batch(grid_out));
        let spectral_field = s.field_method == Some(FieldMethod::Spectral);
        // device memory, estimated before anything is allocated
        let need = Self::estimate_bytes(s);
        let free = dev.free_memory()?;
        if need as u64 > free {
            return Err(Error::Resource {
                message: format!(
                    "the CUDA backend needs about {} of device memory for this rank ({} sources, {} targets, grid {:?}) \
                     but {} is free on {}: use more ranks or GPUs, or backend = \"cpu\"",
                    parki_core::memory::format_bytes(need as f64),
                    s.sources,
                    s.targets,
                    p.grid,
                    parki_core::memory::format_bytes(free as f64),
                    dev.info().name
                ),
            });
        }
        if p.free.as_ref().is_some_and(|f| !f.classes.is_empty()) {
            // cuFFT's plans and the device CNV pad every periodic mode alike
            return Err(Error::Unsupported {
                what: "padding per periodic mode (FreeGrid::classes) on the CUDA backend".into(),
            });
        }
        let kb = KaiserBessel::new(p.p);
        let comps = ncomp.max(grid_out);
        let block_bytes = comps * s.window.layout.real_len() * T::BYTES;
        let threads = s.threads.max(1);
        let grid = if s.comm.size() == 1 {
            match &p.free {
                None => {
                    let layout = GridLayout::new(p.grid)?;
                    let cnv = Cnv::new(kernel, layout, s.lengths, &kb, p.xi);
                    let cnv = if spectral_field { cnv.with_field() } else { cnv };
                    let grid = DeviceBuffer::new(&dev, comps * layout.real_len() * T::BYTES, "the FFT grid")?;
                    let plan = dev.fft_plan(&layout, plan_ncomp, plan_out, precision)?;
                    let (k, f) = cnv.tables();
                    let mut t = Vec::new();
                    for v in k.iter().chain(f.iter()) {
                        t.extend_from_slice(v);
                    }
                    let mut tables = DeviceBuffer::empty(&dev, "the CNV tables");
                    tables.upload(&t)?;
                    FarGrid::Device { grid, plan, cnv: DeviceCnv::Periodic { tables, cnv } }
                }
                Some(free) => {
                    // the zero-padded grid of the aperiodic convolutions, its spectrum in
                    // cuFFT's (and FFTW's) in-place layout: the tables are made for that block
                    let layout = GridLayout::new(free.fft_len)?;
                    let block = parki_decomp::SpectralBlock {
                        x: (0, layout.complex_row()),
                        y: (0, layout.global[1]),
                        z: layout.global[2],
                        row_stride: layout.row_stride(),
                        component_stride: layout.real_len(),
                    };
                    let par = parki_core::Par::with_threads(threads);
                    let cnv =
                        FreeCnv::<T>::new(kernel, spectral_field, free, s.lengths, &kb, p.xi, &block, s.comm, par)?;
                    let grid = DeviceBuffer::new(&dev, comps * layout.real_len() * T::BYTES, "the padded FFT grid")?;
                    let plan = dev.fft_plan(&layout, plan_ncomp, plan_out, precision)?;
                    let mut tables = DeviceBuffer::empty(&dev, "the free-space kernel tables");
                    tables.upload(cnv.tables())?;
                    let mut map = DeviceBuffer::empty(&dev, "the tables' maps");
                    let mut m = cnv.stress_map().to_vec();
                    m.extend(cnv.fold_map());
                    map.upload(&m)?;
                    let [_, ys, zs] = cnv.stored();
                    let stored = [ys, zs];
                    let data = DeviceBuffer::new(&dev, block_bytes, "the P2G grid block")?;
                    let zero_mode = cnv.zero_mode();
                    FarGrid::Device {
                        grid,
                        plan,
                        cnv: DeviceCnv::Free { tables, map, stored, block: data, layout, zero_mode },
                    }
                }
            }
        } else {
            let fopts = DistFftOptions {
                forward_components: ncomp,
                backward_components: grid_out,
                complex: false,
                backend: s.switches,
                threads,
                rigor: s.fft_rigor,
                lines: s.fft_lines,
                r2r: R2rMethod::default(),
                fuse_planes: true,
            };
            let (fft, cnv) = match &p.free {
                None => {
                    let fft = DistFft::<T>::new(s.comm, p.grid, s.pgrid, fopts)?;
                    let cnv = Cnv::new(kernel, GridLayout::new(p.grid)?, s.lengths, &kb, p.xi);
                    (fft, HostCnv::Periodic(if spectral_field { cnv.with_field() } else { cnv }))
                }
                Some(free) => {
                    let fft = DistFft::<T>::with_axes_in_order(s.comm, free.axes(), [0, 1, 2], s.pgrid, fopts)?;
                    let block = fft.spectral_layout();
                    let par = parki_core::Par::with_threads(threads);
                    let cnv = FreeCnv::new(kernel, spectral_field, free, s.lengths, &kb, p.xi, &block, s.comm, par)?;
                    (fft, HostCnv::Free(Box::new(cnv)))
                }
            };
            let block = DeviceBuffer::new(&dev, block_bytes, "the P2G grid block")?;
            FarGrid::Host {
                fft: Box::new(fft),
                cnv,
                block,
                staging: DeviceBuffer::empty(&dev, "halo staging"),
                rows: DeviceBuffer::empty(&dev, "halo rows"),
            }
        };
        let mut coeffs = DeviceBuffer::empty(&dev, "window coefficients");
        coeffs.upload(s.window.coeffs())?;
        let window_field = s.field_method == Some(FieldMethod::Window);
        let mut dcoeffs = DeviceBuffer::empty(&dev, "window derivative coefficients");
        if window_field {
            dcoeffs.upload(s.window.derivative_coeffs())?;
        }
        let spread = match (s.device.p2g, s.p2g) {
            (DeviceP2g::Operator, _) => DeviceSpread::Operator,
            (_, P2gVariant::Scatter) => DeviceSpread::Atomic,
            _ => DeviceSpread::Hybrid,
        };
        if spread == DeviceSpread::Operator && s.sources * s.window.p.pow(3) > u32::MAX as usize {
            return Err(Error::Unsupported {
                what: format!(
                    "p2g = \"operator\" for {} sources with window support {} (more than 2^32 operator entries)",
                    s.sources, s.window.p
                ),
            });
        }
        let winp = WindowParams::new(s.window);
        let b = |what| DeviceBuffer::empty(&dev, what);
        Ok(Self {
            precision,
            kernel,
            output: s.output,
            grid_out,
            window_field,
            xi: p.xi,
            threads,
            cells: s.cells.clone(),
            cellp: CellParams::new(s.cells),
            winp,
            window_layout: s.window.layout,
            row_data: p.free.as_ref().map_or(p.grid[0], |f| f.data[0]),
            direct: s.direct,
            coeffs,
            dcoeffs,
            p2p: s.device.p2p,
            erfc: s.device.erfc,
            medium_pairs: precision == Precision::F64 && s.pair_accuracy == PairAccuracy::Medium,
            near_r2: p.near_cut.and_then(|c| NearCutoff::Sphere(c).window_radius2()).unwrap_or(-1.0),
            spread,
            far_cell: s.device.far_cell,
            fft_plans: s.device.fft,
            overlap: s.device.overlap,
            near_pending: false,
            near_stats: NearStats::default(),
            g2p: s.g2p,
            src_pos: b("source positions"),
            src_lo: DeviceResiduals { buf: b("source position residuals"), present: false },
            src_packed: b("source densities"),
            src_keys: b("source cells"),
            src_sort: Sorted::new(&dev),
            src_cells: CellList::new(&dev),
            src_host: (0, 0),
            tgt_pos: b("target positions"),
            tgt_lo: DeviceResiduals { buf: b("target position residuals"), present: false },
            tgt_keys: b("target cells"),
            tgt_sort: Sorted::new(&dev),
            tgt_cells: CellList::new(&dev),
            n_tgt: 0,
            far_keys: b("far-field cells"),
            far_sort: Sorted::new(&dev),
            operator: None,
            near: b("the near field"),
            far: b("the far field"),
            out: b("the result"),
            grid,
            staging: PinnedBuffer::empty(&dev, "the upload staging"),
            key_staging: PinnedBuffer::empty(&dev, "the cell keys' staging"),
            host_rows: Vec::new(),
            n_src: 0,
            pairs: b("the pair count"),
            error: None,
            dev,
        })
    }

    fn name(&self) -> &'static str {
        "cuda"
    }

    fn bytes(&self) -> usize {
        self.memory().total()
    }

    fn bin<S: SourceSet<T>>(&mut self, sources: &S, keys: &[u32], targets: Points<'_, T>) {
        // a P2P an earlier evaluation left on the side stream reads the cell lists rebuilt here
        if let Err(e) = self.join_near() {
            self.error.get_or_insert(e);
        }
        if self.error.is_none() {
            let r = self.try_bin(sources, keys, targets);
            self.record(r);
        }
    }

    fn near_field(&mut self) {
        self.near_stats = NearStats::default();
        if self.error.is_none() {
            let r = self.try_near_field();
            self.record(r);
        }
    }

    fn near_stats(&mut self) -> NearStats {
        self.near_stats
    }

    fn spread<S: SourceSet<T>>(&mut self, sources: &S) {
        if self.error.is_none() {
            let r = self.try_spread(sources);
            self.record(r);
        }
    }

    fn halo_spread(&mut self, halo: &mut HaloPlan, comm: &Comm) {
        let ncomp = self.kernel.grid_components();
        let block_rows = RowLayout { mx: self.row_data, ..RowLayout::padded(&self.window_layout) };
        let failed = self.error.is_some();
        let (dev, precision) = (self.dev.clone(), self.precision);
        let host_rows = &mut self.host_rows;
        let mut err = None;
        if let FarGrid::Host { fft, block, staging, rows, .. } = &mut self.grid {
            let fft_rows = fft.row_layout();
            let loc = fft.real_topology().local();
            let owned_rows = loc[1] * loc[2];
            let data = fft.data_mut();
            for c in 0..ncomp {
                let at = c * fft_rows.component_stride;
                data[at..at + owned_rows * fft_rows.row_stride].fill(T::ZERO);
            }
            let grid = block.ptr();
            halo.spread(
                comm,
                |r, buf: &mut [T]| {
                    if failed || err.is_some() {
                        return;
                    }
                    let res =
                        Self::rows(&dev, precision, 0, r, ncomp, block_rows, grid, staging, rows, host_rows, &[], buf);
                    if let Err(e) = res {
                        err = Some(e);
                    }
                },
                |r, buf| fft_rows.add(data, r, ncomp, buf),
            );
        }
        if let Some(e) = err {
            self.error.get_or_insert(e);
        }
    }

    fn fft_forward(&mut self) {
        if self.error.is_none() {
            let r = self.try_fft(true);
            self.record(r);
        } else if let FarGrid::Host { fft, .. } = &mut self.grid {
            fft.forward(); // collective: every rank takes part
        }
    }

    fn convolve(&mut self, net_charge: f64) {
        if self.error.is_none() {
            let r = self.try_convolve(net_charge);
            self.record(r);
        }
    }

    fn fft_backward(&mut self) {
        if self.error.is_none() {
            let r = self.try_fft(false);
            self.record(r);
        } else if let FarGrid::Host { fft, .. } = &mut self.grid {
            fft.backward();
        }
    }

    fn halo_gather(&mut self, halo: &mut HaloPlan, comm: &Comm) {
        let dim = self.grid_out;
        let block_rows = RowLayout { mx: self.row_data, ..RowLayout::padded(&self.window_layout) };
        let failed = self.error.is_some();
        let (dev, precision) = (self.dev.clone(), self.precision);
        let host_rows = &mut self.host_rows;
        let mut err = None;
        if let FarGrid::Host { fft, block, staging, rows, .. } = &mut self.grid {
            let fft_rows = fft.row_layout();
            let data = fft.data();
            let grid = block.ptr();
            halo.gather(
                comm,
                |r, buf| fft_rows.pack(data, r, dim, buf),
                |r, buf: &[T]| {
                    if failed || err.is_some() {
                        return;
                    }
                    let res = Self::rows(
                        &dev,
                        precision,
                        2,
                        r,
                        dim,
                        block_rows,
                        grid,
                        staging,
                        rows,
                        host_rows,
                        buf,
                        &mut [],
                    );
                    if let Err(e) = res {
                        err = Some(e);
                    }
                },
            );
        }
        if let Some(e) = err {
            self.error.get_or_insert(e);
        }
    }

    fn interpolate(&mut self, targets: Points<'_, T>) {
        if self.error.is_none() {
            let r = self.try_interpolate(targets);
            self.record(r);
        }
    }

    fn sum_into(&mut self, background: f64, out: &mut [T]) {
        // joined even after a failed stage: nothing may still run on the side stream
        let joined = self.join_near();
        if self.error.is_none() {
            let r = joined.and_then(|_| self.try_sum_into(background, out));
            self.record(r);
        }
        if self.error.is_some() {
            out.fill(T::from_f64(f64::NAN));
        }
    }

    fn take_error(&mut self) -> Option<Error> {
        self.error.take()
    }
}
