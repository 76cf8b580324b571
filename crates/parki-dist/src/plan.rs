//! Planning shared by every solver: the parameters from the tolerance, threads, instruction
//! set, the memory budgets of a node's ranks, and the memory estimate of a whole run.

use parki_comm::Comm;
use parki_core::memory::{available_memory, format_bytes};
use parki_core::{Error, Result};
use parki_farfield::{Params, PositionRounding};
use parki_nearfield::{Isa, PairAccuracy};

use crate::backend::PlanningHints;
use crate::options::EwaldOptions;
use crate::SolverReal;

/// Parameters, threads, instruction set and P2P pair accuracy of a plan.
pub(crate) struct Choice {
    pub(crate) params: Params,
    pub(crate) threads: usize,
    pub(crate) isa: Isa,
    pub(crate) pair_accuracy: PairAccuracy,
}

/// Ranks of `comm` on this rank's node (counted by host name) and the node's available memory.
/// Collective.
pub(crate) fn node_share(comm: &Comm) -> (usize, usize) {
    let id = host_id();
    let on_node = comm.all_gather(&[id]).iter().filter(|&&h| h == id).count().max(1);
    (on_node, available_memory())
}

/// FNV-1a hash of this machine's host name: ranks with the same one share a node.
fn host_id() -> u64 {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    host.trim().bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

/// This rank's index among the ranks on its node (same host name): device backends open device
/// `node_rank mod devices`. Collective.
pub fn node_rank(comm: &Comm) -> usize {
    let id = host_id();
    comm.all_gather(&[id]).iter().take(comm.rank()).filter(|&&h| h == id).count()
}

/// Bytes the whole far-field grid may take: the smallest rank's budget times the ranks (the
/// grid is split evenly). A rank's budget is `opts.max_grid_bytes`, else half the available
/// memory shared by the ranks on its node. Collective.
pub(crate) fn grid_budget(comm: &Comm, opts: &EwaldOptions, share: (usize, usize)) -> usize {
    let mine = opts.max_grid_bytes.unwrap_or(share.1 / 2 / share.0);
    (comm.min(mine as u64) as usize).saturating_mul(comm.size())
}

/// Chooses the parameters for `sources` and `targets` particles in total, the threads and the
/// P2P instruction set. `grid_budget` bounds the bytes of the whole far-field grid; `hints` are
/// the backend's (its cost model and cell-list padding, over the CPU's).
pub(crate) fn choose<T: SolverReal>(
    opts: &EwaldOptions,
    sources: usize,
    targets: usize,
    grid_budget: usize,
    hints: &PlanningHints,
) -> Result<Choice> {
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
    let threads = opts.thread_count();
    let isa = match opts.isa {
        None => Isa::detect(),
        Some(i) if i.available() => i,
        Some(i) => return Err(Error::Unsupported { what: format!("instruction set {} on this CPU", i.name()) }),
    };
    opts.output()?;
    // a backend with the CPU's pair accuracies evaluates medium and loose pairs for less
    // (measured: docs/performance.md §7.2, §7.14), the loose ones on packed rows; a device
    // has the medium ones (§8.13)
    let accuracy = if hints.loose_pairs {
        opts.pair_accuracy_for::<T>()
    } else if hints.medium_pairs {
        opts.medium_pair_accuracy_for::<T>()
    } else {
        PairAccuracy::Full
    };
    let loose = accuracy == PairAccuracy::Loose;
    let mut cost = opts.cost.or(hints.cost).unwrap_or_default();
    if accuracy != PairAccuracy::Full {
        cost.p2p_pair = cost.p2p_pair.map(|c| c * accuracy.cost());
    }
    let request = parki_farfield::Request {
        kernel: opts.kernel,
        field: opts.field_request(),
        domain: opts.domain,
        sources,
        targets,
        tolerance: opts.tolerance,
        real_bytes: T::BYTES,
        rc,
        window_p: opts.window_support,
        oversampling: opts.oversampling,
        lanes: hints.lanes.unwrap_or_else(|| isa.lanes::<T>()),
        max_grid_bytes: grid_budget,
        cost,
        enforce_tolerance: opts.enforce_tolerance,
        pairs: opts.statistics.map(|s| s.pairs),
        position_rounding: opts.statistics.map_or(PositionRounding::Exact, |s| s.rounding),
        pair_error: accuracy.pair_error(T::BYTES),
        merged_rows: loose,
        sphere_cutoff: hints.sphere_cutoff && opts.near_pairs == crate::options::NearPairs::Sphere,
        occupancy: opts.occupancy,
        evaluations: opts.evaluations,
    };
    let params = parki_farfield::select(&request)?;
    Ok(Choice { params, threads, isa, pair_accuracy: accuracy })
}

/// Estimated peak memory of one rank during an evaluation, bytes (the caller's own input arrays
/// not included).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MemoryEstimate {
    /// Particles received by MPI-SORT, ghost sources, and the send buffers of the exchanges;
    /// for a box far from 1, the copies of the inputs in the solver's length unit.
    pub particles: f64,
    /// Cell lists: padded sources, sorted targets, keys and offsets (0 where a device holds
    /// them).
    pub cell_lists: f64,
    /// Grids: the FFT grid with its switch buffers, the P2G block, the G2P gather grid; with
    /// free axes the zero-padded FFT grid and the kernel tables (0 where a device holds them).
    pub grids: f64,
    /// Scratch: P2G footprints and slab buffers, near- and far-field values, results; a
    /// device's upload staging.
    pub scratch: f64,
    /// The caller's own arrays, as the caller declared them (0 for the library alone).
    pub caller: f64,
    /// Sum of the parts.
    pub total: f64,
}

impl MemoryEstimate {
    /// The estimate for `ranks` ranks sharing `sources` and `targets` evenly, of a plan with
    /// `params` for `opts` (`ghost_factor`: window columns over owned columns, 1 on one rank).
    /// Without `params` only the per-particle memory is counted (a lower bound that needs no
    /// parameter selection).
    pub(crate) fn new<T: SolverReal>(
        opts: &EwaldOptions,
        params: Option<&Params>,
        sources: usize,
        targets: usize,
        ranks: usize,
        threads: usize,
        ghost_factor: f64,
    ) -> Self {
        let t = T::BYTES as f64;
        let kernel = opts.kernel;
        let (w, dim) = (kernel.density_width() as f64, opts.output_dim() as f64);
        // the grid's components: spread, and returned by the inverse transform
        let grid_out = parki_farfield::FieldMethod::grid_outputs(opts.field_request(), kernel);
        let ncomp = kernel.grid_components().max(grid_out) as f64;
        let r = ranks.max(1) as f64;
        let ns = sources as f64 / r;
        let nt = targets as f64 / r;
        let n_all = ns * ghost_factor;
        let ncells = params.map_or(0.0, |p| p.cells.iter().map(|&c| c as f64).product::<f64>() / r * ghost_factor);
        let lanes = 16.0;
        // MPI-SORT and ghosts only on several ranks: received copies plus send buffers
        let particles = if ranks > 1 { (2.0 * n_all * (3.0 + w) + 2.0 * nt * 3.0) * t + 16.0 * (ns + nt) } else { 0.0 };
        let cell_lists = (n_all + lanes * ncells) * (3.0 + w) * t + nt * (3.0 * t + 4.0) + 4.0 * n_all + 16.0 * ncells;
        let (grids, p2g_slabs, p) = match params {
            Some(params) => {
                let [mx, my, mz] = params.grid.map(|m| m as f64);
                let real = 2.0 * (mx / 2.0 + 1.0) * my * mz / r;
                // the block and the gather grid cover the owned part plus the window's reach
                let reach = if ranks > 1 { ((mz / r + params.p as f64 + 3.0) / (mz / r)).min(r) } else { 1.0 };
                let gather = if grid_out > 1 { grid_out as f64 * mx * my * mz / r * reach * t } else { 0.0 };
                let grids = match &params.free {
                    None => {
                        // FFT data, and on several ranks the switch plans' two buffers
                        let fft = ncomp * real * t * if ranks > 1 { 3.0 } else { 1.0 };
                        let block = if ranks > 1 { ncomp * real * t * reach } else { 0.0 };
                        fft + block + gather
                    }
                    Some(f) => {
                        // free axes: the zero-padded FFT grid (with the switch buffers), the data
                        // block P2G writes (M + P - 1 points along free axes), and the kernel
                        // tables on the folded spectrum (parki_farfield::fold)
                        let n = f.fft_len.map(|v| v as f64);
                        let padded = 2.0 * (n[0] / 2.0 + 1.0) * n[1] * n[2] / r;
                        let fft = ncomp * padded * t * if ranks > 1 { 3.0 } else { 1.0 };
                        let data: f64 = f.data.iter().map(|&v| v as f64).product::<f64>() / r;
                        let block = ncomp * data * t * reach;
                        let count = parki_farfield::free::table_count(
                            kernel,
                            opts.field_request() == Some(parki_farfield::FieldMethod::Spectral),
                        ) as f64;
                        let tables = count * parki_farfield::fold::stored_elements_bound(f.fft_len) as f64 / r * t;
                        fft + block + gather + tables
                    }
                };
                let p = params.p as f64;
                (grids, threads as f64 * (p / 2.0) * mx * my * ncomp * t, p)
            }
            None => (0.0, 0.0, 4.0),
        };
        let p2g = ns * (16.0 + 3.0 * p * t + ncomp * t) + p2g_slabs;
        let scratch = p2g + nt * dim * t * if ranks > 1 { 3.0 } else { 2.0 } + 8.0 * nt;
        let total = particles + cell_lists + grids + scratch;
        Self { particles, cell_lists, grids, scratch, caller: 0.0, total }
    }

    /// On a backend that holds the grids and the cell lists in its own memory (`resident`,
    /// [`crate::PlanningHints::device_resident`]; one rank): the host keeps the backend's
    /// upload staging (positions and packed densities of the sources, positions of the
    /// targets) and the results instead of them and of P2G's footprints, all counted as
    /// scratch. Unchanged otherwise.
    pub(crate) fn device_resident(
        mut self,
        resident: bool,
        opts: &EwaldOptions,
        sources: usize,
        targets: usize,
        real_bytes: usize,
    ) -> Self {
        if resident {
            let t = real_bytes as f64;
            let w = opts.kernel.density_width() as f64;
            let staging = (sources as f64 * (3.0 + w) + targets as f64 * 3.0) * t;
            let results = targets as f64 * (opts.output_dim() as f64 * t * 2.0 + 8.0);
            self.total += staging + results - self.grids - self.cell_lists - self.scratch;
            self.grids = 0.0;
            self.cell_lists = 0.0;
            self.scratch = staging + results;
        }
        self
    }

    /// Adds `bytes` per rank of the copies of the inputs in the solver's length unit
    /// (`crate::units`) to the particles.
    pub(crate) fn with_copies(mut self, bytes: f64) -> Self {
        self.particles += bytes;
        self.total += bytes;
        self
    }

    /// Adds `bytes` of the caller's own arrays per rank.
    pub(crate) fn with_caller(mut self, bytes: f64) -> Self {
        self.caller += bytes;
        self.total += bytes;
        self
    }

    /// Errors unless the estimate fits the memory one rank may use: the node's available
    /// memory shared by its `ranks_on_node` ranks.
    pub(crate) fn check(&self, sources: usize, targets: usize, ranks_on_node: usize, available: usize) -> Result<()> {
        let budget = available as f64 / ranks_on_node.max(1) as f64;
        if self.total <= budget {
            return Ok(());
        }
        Err(Error::Resource {
            message: format!(
                "{sources} sources and {targets} targets need about {} per rank (particles {}, cell lists {}, \
                 grids {}, scratch {}, inputs and outputs {}), but {} is available for each of the \
                 {ranks_on_node} rank{} on this node: use more ranks or nodes, fewer particles, or a looser \
                 tolerance",
                format_bytes(self.total),
                format_bytes(self.particles),
                format_bytes(self.cell_lists),
                format_bytes(self.grids),
                format_bytes(self.scratch),
                format_bytes(self.caller),
                format_bytes(budget),
                if ranks_on_node == 1 { "" } else { "s" },
            ),
        })
    }
}
