//! What defines a solver: [`EwaldOptions`] (kernel, box, tolerance and optional fixed
//! parameters) and [`ParallelOptions`] (process grid and switch backend), built with
//! constructors and chainable setters so that new options never break callers.

use parki_comm::{Backend, Comm};
use parki_core::{Domain, Kernel, Real, Sources};
use parki_decomp::Decomposition;
use parki_farfield::{CostModel, G2pVariant, P2gVariant, PairStatistics};
use parki_fft3d::PlanRigor;
use parki_nearfield::Isa;

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
    /// Threads per process (0: all available).
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
    /// Close-pair statistics of the particles ([`SourceStatistics::measure`]): the error model
    /// then knows the stresslet's magnitude on clustered and surface particles and the round-off
    /// of positions narrowed to f32 (`None`: the uniform-density model, safe but
    /// over-resolving the stresslet on clustered particles).
    pub statistics: Option<SourceStatistics>,
}

/// Close-pair statistics of a particle set for the error model
/// ([`parki_farfield::stats`]), and whether the solver's positions are the caller's exact
/// ones or rounded from f64 to f32.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SourceStatistics {
    pub(crate) pairs: PairStatistics,
    pub(crate) position_rounding2: f64,
}

impl SourceStatistics {
    /// Measures the statistics of `sources` and `targets` (`None`: the sources) in `domain`,
    /// each rank passing the particles it holds. Collective: on several ranks the sources move
    /// to slabs along z with their neighbours within `r_0` and the sampled targets to their
    /// slab, so every close pair is counted once and the result does not depend on the rank
    /// count or the split. `O(N)`, at most about 100 000 sampled targets in all.
    /// `rounded_to_f32`: the positions are f64 data that the solver will see narrowed to f32
    /// (the application's `precision = "f32"`), so their round-off enters the error estimate
    /// and a tolerance below it is refused.
    pub fn measure<T: Real>(
        comm: &Comm,
        kernel: Kernel,
        domain: &Domain,
        sources: &Sources<T>,
        targets: Option<&[[T; 3]]>,
        rounded_to_f32: bool,
    ) -> Self {
        let pairs = if comm.size() == 1 {
            PairStatistics::measure(kernel.parts(), domain, sources, targets)
        } else {
            distributed_pairs(comm, kernel.parts(), domain, sources, targets)
        };
        let position_rounding2 =
            if rounded_to_f32 { parki_farfield::stats::f32_position_rounding2(domain.lengths()) } else { 0.0 };
        Self { pairs, position_rounding2 }
    }

    /// The pair statistics.
    pub fn pairs(&self) -> &PairStatistics {
        &self.pairs
    }
}

/// Distance along z from `z` to the slab `[s t, (s + 1) t)` of a periodic axis of length `lz`.
fn slab_distance(z: f64, s: usize, t: f64, lz: f64) -> f64 {
    let (lo, hi) = (s as f64 * t, (s + 1) as f64 * t);
    [-lz, 0.0, lz].iter().map(|&shift| (lo - (z + shift)).max(z + shift - hi).max(0.0)).fold(f64::INFINITY, f64::min)
}

/// [`SourceStatistics::measure`] on several ranks: sources to their z slab and to every slab
/// within `r_0` of them, sampled targets to their slab, [`parki_farfield::stats::pair_sums`] on
/// each rank, the sums added up.
fn distributed_pairs<T: Real>(
    comm: &Comm,
    parts: &[parki_core::KernelPart],
    domain: &Domain,
    sources: &Sources<T>,
    targets: Option<&[[T; 3]]>,
) -> PairStatistics {
    use parki_farfield::stats;
    let ranks = comm.size();
    let l = domain.lengths();
    let ns_total = comm.sum(sources.positions.len() as f64);
    let radius = (domain.volume() / ns_total.max(1.0)).cbrt();
    let w = stats::strengths(parts, sources);
    let thick = l[2] / ranks as f64;
    let slab_of = |z: f64| ((z.rem_euclid(l[2]) / thick) as usize).min(ranks - 1);
    let reach = (radius / thick).ceil() as i64;
    // sources: [x, y, z, w0, w1] to the owning slab and the slabs within r_0
    let mut per_rank: Vec<Vec<f64>> = vec![Vec::new(); ranks];
    let mut slabs = Vec::new();
    for (j, p) in sources.positions.iter().enumerate() {
        let x = p.map(|v| v.to_f64());
        let own = slab_of(x[2]) as i64;
        slabs.clear();
        for k in -reach..=reach {
            let s = (own + k).rem_euclid(ranks as i64) as usize;
            if k == 0 || slab_distance(x[2].rem_euclid(l[2]), s, thick, l[2]) < radius {
                slabs.push(s);
            }
        }
        slabs.sort_unstable();
        slabs.dedup();
        for &s in &slabs {
            per_rank[s].extend_from_slice(&[x[0], x[1], x[2], w[j][0], w[j][1]]);
        }
    }
    let counts: Vec<usize> = per_rank.iter().map(Vec::len).collect();
    let flat: Vec<f64> = per_rank.concat();
    let mut recv = Vec::new();
    comm.alltoallv(&flat, &counts, &mut recv);
    let pos: Vec<[f64; 3]> = recv.chunks_exact(5).map(|c| [c[0], c[1], c[2]]).collect();
    let rw: Vec<[f64; 2]> = recv.chunks_exact(5).map(|c| [c[3], c[4]]).collect();
    // sampled targets to their slab
    let local: Vec<[f64; 3]> = match targets {
        Some(t) => t.iter().map(|p| p.map(|x| x.to_f64())).collect(),
        None => sources.positions.iter().map(|p| p.map(|x| x.to_f64())).collect(),
    };
    let stride = stats::stride(comm.sum(local.len() as f64) as usize);
    let mut per_rank: Vec<Vec<f64>> = vec![Vec::new(); ranks];
    for x in local.iter().filter(|x| stats::sampled(x, stride)) {
        per_rank[slab_of(x[2])].extend_from_slice(x);
    }
    let counts: Vec<usize> = per_rank.iter().map(Vec::len).collect();
    let mut recv = Vec::new();
    comm.alltoallv(&per_rank.concat(), &counts, &mut recv);
    let sample: Vec<[f64; 3]> = recv.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect();
    let per_target = stats::pair_sums(domain, radius, &pos, &rw, &sample);
    // every rank gets every sampled target's sums (at most about 1e5 x 6 values), so that the
    // typical-target quantile is the same on every rank and for every split
    let flat: Vec<f64> = per_target.iter().flatten().cloned().collect();
    let send: Vec<f64> = (0..ranks).flat_map(|_| flat.iter().cloned()).collect();
    let mut recv = Vec::new();
    comm.alltoallv(&send, &vec![flat.len(); ranks], &mut recv);
    let all: Vec<[f64; 6]> = recv.chunks_exact(6).map(|c| std::array::from_fn(|k| c[k])).collect();
    let mut q = [w.iter().map(|x| x[0]).sum(), w.iter().map(|x| x[1]).sum()];
    comm.all_reduce_f64(&mut q, parki_comm::ReduceOp::Sum);
    stats::from_targets(radius, &all, ns_total, q)
}

impl EwaldOptions {
    /// Defaults for `kernel` on `domain` at `tolerance`: every parameter chosen from the
    /// tolerance, all cores, the blocked P2G and target-sorted G2P, estimated FFT plans.
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
            statistics: None,
        }
    }

    /// Close-pair statistics of the particles for the error model (`None`: uniform model).
    pub fn statistics(mut self, statistics: Option<SourceStatistics>) -> Self {
        self.statistics = statistics;
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

    /// Largest grid memory in bytes (`None`: from the available memory).
    pub fn max_grid_bytes(mut self, bytes: Option<usize>) -> Self {
        self.max_grid_bytes = bytes;
        self
    }

    /// Cost constants of the parameter selection (measured by `parki-bench calibrate`).
    pub fn cost_model(mut self, cost: CostModel) -> Self {
        self.cost = cost;
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

/// Where the potential is evaluated.
#[derive(Clone, Copy, Debug)]
pub enum Targets<'a, T> {
    /// At the sources themselves (each skips its own free-space term).
    Sources,
    /// At separate points.
    Points(&'a [[T; 3]]),
}
