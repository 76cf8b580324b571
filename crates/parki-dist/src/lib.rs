//! parki-dist: fast particle-kernel summation at scale.
//!
//! This crate is the library facade and the `parki-dist` application. The library plans a
//! spectral Ewald solver once ([`EwaldSolver::new`]) and evaluates it many times
//! ([`EwaldSolver::evaluate`]) for Laplace, Stokeslet, stresslet and combined Stokes kernels in a
//! triply periodic box, to a relative RMS tolerance, in f64 or f32, multi-threaded.
//!
//! [`DistEwaldSolver`] is the same solver over MPI ranks (module [`distributed`]).
//!
//! The application reads a run.toml ([`config`]), see `parki-dist --help` and README.md.

pub mod app;
pub mod config;
pub mod distributed;
pub mod input;
pub mod npy;
pub mod report;
pub mod solver;
pub mod verify;

pub use distributed::{DistEwaldSolver, ParallelOptions, SortMode};
pub use parki_comm::{Backend, Comm, Universe};
pub use parki_core::{Domain, Error, Kernel, Result, Sources, Stage, StageTimes};
pub use parki_decomp::{Decomposition, ProcGrid};
pub use parki_farfield::{CostModel, G2pVariant, P2gVariant, Params};
pub use parki_fft3d::PlanRigor;
pub use parki_nearfield::Isa;
pub use solver::{Evaluation, EwaldOptions, EwaldSolver, SolverReal, Targets};
