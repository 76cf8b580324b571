//! The Laplace fast multipole method of parki-dist (seed 001: Gumerov and Duraiswami, "Fast
//! multipole methods on graphics processors"; digest `seed-001-fmm.md`):
//! `phi(y_j) = sum_i q_i / |y_j - x_i|` and its gradient, to a tolerance.
//!
//! - [`basis`]: the paper's real, normalised regular harmonics by the recursion of eq. (15),
//!   the orthonormal scaling the expansions are stored in, and the sparse gradient.
//! - [`expansion`]: P2M, L2P (with the gradient) and M2P.
//! - [`rotation`]: rotations of expansions about `z` (2 x 2 blocks) and `y` (parity blocks).
//! - [`translate`]: M2M, M2L and L2L by rotation, coaxial translation and rotation back,
//!   `O(p^3)`, with the scaling of eq. (35) and the variable truncation of eq. (24).
//! - [`octree`]: adaptive octrees by Morton keys, empty boxes skipped.
//! - [`traversal`]: the dual traversal with the paper's error bound as admissibility and its
//!   modified stencil as splitting order, into M2L and P2P lists.
//! - [`cost`]: the cost model that chooses the leaf size per backend.
//! - [`evaluate`](mod@evaluate): one evaluation end to end.
//! - [`backend`]: the seam to a device (parki-gpu's CUDA FMM).
//!
//! Every evaluation computes points whose extent (over every rank) lies outside
//! `[2^-10, 2^10]`, and charges or forces whose largest lies outside `[2^-40, 2^40]`, in units of
//! powers of two near them, and scales the values back exactly (`parki_core::units`;
//! docs/design.md, "Units"): `r^2` and the expansions stay in f64's range at any extent.

pub mod backend;
pub mod basis;
pub mod cost;
pub mod distributed;
pub mod evaluate;
pub mod expansion;
pub mod fast_hash;
pub mod let_tree;
pub mod octree;
pub mod partition;
pub mod rotation;
pub mod translate;
pub mod traversal;

pub use backend::{DeviceFmm, FmmBackend, FmmSession, SourceSide};
pub use basis::{idx, regular, Scalings, MAX_ORDER};
pub use distributed::{
    evaluate_distributed, evaluate_distributed_on, evaluate_stokeslet_distributed, evaluate_stokeslet_distributed_on,
};
pub use evaluate::{
    evaluate, evaluate_f32, evaluate_on, evaluate_stokeslet, evaluate_stokeslet_on, for_tolerance, for_tolerance_of,
    FmmKernel, FmmOutput, FmmOutputF32, FmmParams, FmmStage, FmmStats, LetStats, Precision, StokesletOutput,
    TOLERANCE_TABLE,
};
pub use octree::{OctBox, Octree, RootCube};
pub use translate::{Geometry, LaneScratch8, Op, Operators, Scratch};
pub use traversal::{traverse, Lists, M2lEntry, TraversalParams};
