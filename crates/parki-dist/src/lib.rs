//! parki-dist: fast particle-kernel summation at scale.
//!
//! The library plans a spectral Ewald solver once ([`EwaldSolver::new`]) and evaluates it many
//! times ([`EwaldSolver::evaluate`]) for Laplace, Stokeslet, stresslet and combined Stokes
//! kernels in a triply periodic box, to a relative RMS tolerance, in f64 or f32, multi-threaded.
//! [`DistEwaldSolver`] is the same pipeline over MPI ranks; [`EwaldSolver`] is it over one rank.
//! An f32 solver for f64 data takes the f64 positions too ([`EwaldSolver::evaluate_exact`],
//! planned with [`PositionRounding::F32Cells`] statistics), so that its round-off is that of
//! positions rounded in their cells, not in the box.
//!
//! The public surface is the solvers, their options and the vocabulary they take and return.
//! The evaluation stages are listed by [`EwaldStage`]; the compute stages run on an
//! [`EwaldBackend`] ([`CpuBackend`] today).
//!
//! The `parki-dist` application (run.toml, `.npy` files, reports) is the `parki-app` package
//! (crates/app); see `parki-dist --help` and README.md.

mod backend;
mod inputs;
mod options;
mod pipeline;
mod plan;
mod solver;
mod stage;
mod statistics;
mod units;

pub use backend::{BackendSetup, CpuBackend, EwaldBackend, NearStats, PlanningHints, PlanningQuery};
pub use inputs::{check_exact, check_inputs};
pub use options::{
    DeviceErfc, DeviceFft, DeviceOverlap, DeviceP2g, DeviceP2p, DeviceVariants, EwaldOptions, ExactPositions,
    NearPairs, ParallelOptions, Targets,
};
pub use parki_comm::{Backend, Comm, StageStats, TrafficStats, Universe};
pub use parki_core::{Domain, Error, Kernel, Output, Result, SourceSet, Sources, StageKind, StageName, StageTimes};
pub use parki_decomp::{Decomposition, ProcGrid, SortMode};
pub use parki_farfield::{
    CostModel, ErrorEstimate, FieldMethod, G2pVariant, Occupancy, P2gVariant, PairStatistics, Params, PositionRounding,
};
pub use parki_fft3d::{LineEngine, PlanRigor};
pub use parki_nearfield::Isa;
pub use pipeline::{DistEwaldSolver, Evaluation};
pub use plan::{node_rank, MemoryEstimate};
pub use solver::EwaldSolver;
pub use stage::EwaldStage;
pub use statistics::{measure_occupancy, SourceStatistics};

/// A real type the whole solver runs in: `f32` or `f64`.
pub trait SolverReal:
    parki_nearfield::P2pReal + parki_farfield::AtomicReal + parki_fft3d::FftReal + parki_comm::Pod
{
}
impl SolverReal for f64 {}
impl SolverReal for f32 {}
