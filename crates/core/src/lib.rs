//! Shared vocabulary of parki-dist.
//!
//! This crate has no MPI, no GPU and no heavy dependencies. It defines
//! - [`Real`], the floating-point trait every compute crate is generic over (f32, f64);
//! - [`Domain`], the box `[0,L1) x [0,L2) x [0,L3)` and which axes are periodic;
//! - [`Kernel`] and [`KernelPart`], the kernels without physical prefactors
//!   (Laplace `1/r`, Stokeslet `I/r + r r^T/r^3`, stresslet `-6 r r r / r^5`);
//! - [`Sources`], a borrowed view of a particle set in the library's `(N, 3)` row-major layout;
//! - [`Error`], the typed error that names the offending field and value;
//! - [`StageKind`], [`StageTimes`] and [`StageName`], typed and open per-stage timers (each method
//!   lists its own stages);
//! - [`units`], the powers of two the solvers rescale far-from-1 lengths by.

pub mod domain;
pub mod error;
pub mod isa;
pub mod kernel;
pub mod memory;
pub mod par;
pub mod quadrature;
pub mod real;
pub mod sources;
pub mod special;
pub mod timing;
pub mod units;
pub mod validate;

pub use domain::Domain;
pub use error::{Error, Result};
pub use kernel::{Kernel, KernelPart, Output};
pub use par::Par;
pub use real::Real;
pub use sources::{residual, PackedSet, PackedSources, Points, SourceSet, Sources};
pub use timing::{StageKind, StageName, StageTimes};
