//! The barycentric Lagrange dual tree traversal treecode (BLDTT, seed 003: Wilson, Vaughn and
//! Krasny; digest `seed-003-bldtt.md`), a kernel-independent free-space summation
//! `phi(x_i) = sum_j G(x_i, y_j) q_j` with proxy particles on Chebyshev grids.
//!
//! - [`backend`]: the seam to a device (parki-gpu's CUDA backend) that runs the upward pass,
//!   the lists and the downward pass with the evaluation's data resident on it.
//! - [`cheb`]: Chebyshev points of the second kind and barycentric Lagrange interpolation on a
//!   cluster's box (paper eqs. (2)-(5)), with the exact-hit and degenerate-box rules.
//! - [`tree`]: cluster trees by bisection with the aspect-ratio rule (paper §2.3), minimal
//!   bounding boxes, particles in a contiguous range per cluster.
//! - [`traversal`]: the dual tree traversal with the MAC into PP, PC, CP and CC lists (paper
//!   §2.6, Algorithm 2).
//! - [`upward`]: proxy charges, at the leaves by anterpolation (eq. (9)) and from children to
//!   parents (eq. (16)) with the tensor-factored operator, `O(n^4)` per child.
//! - [`kernel`]: the kernels (Coulomb, Yukawa, regularised Coulomb and Yukawa, `sin(kr)/r`,
//!   Stokeslet, stresslet, Stokes) evaluated a vector of sources at a time, and their self-term
//!   rules.
//! - `compute`: the PP, PC, CP and CC lists evaluated, leaves and target clusters in parallel.
//! - `downward`: proxy potentials from parents to children (eq. (20)) and to the targets
//!   (eq. (21)), the transposed tensor-factored operator.
//! - [`direct`]: the scalar direct sum the results are checked against, and eq. (22)'s error.
//! - [`distributed`]: the same over MPI ranks: RCB partitions by Zoltan, local trees, and the
//!   locally essential tree read by passive-target one-sided MPI, overlapped with local compute.
//! - [`evaluate`](mod@evaluate): one evaluation end to end, results in the caller's order, with the
//!   interaction counts and per-stage times.
//!
//! Every evaluation computes points whose extent (over every rank) lies outside
//! `[2^-10, 2^10]` in a power-of-two length unit near it (for kernels that say how they rescale,
//! [`kernel::PairKernel::in_length_unit`]), and densities whose largest lies outside
//! `[2^-40, 2^40]` over a power of two near it (any kernel: the sums are linear in them), and
//! scales the values back exactly (`parki_core::units`; docs/design.md, "Units").

pub mod backend;
pub mod cheb;
mod compute;
pub mod direct;
pub mod distributed;
mod downward;
pub mod evaluate;
pub mod kernel;
mod lists;
pub mod traversal;
pub mod tree;
pub mod upward;

pub use backend::{DeviceKernel, TreeBackend, TreeSession};
pub use cheb::{lagrange, nodes, AxisNodes};
pub use distributed::{
    evaluate_distributed, evaluate_distributed_on, evaluate_kernel_distributed, evaluate_kernel_distributed_on,
    evaluate_owned, LetStats,
};
pub use evaluate::{evaluate, evaluate_kernel, for_tolerance, KernelVisitor, TreeStage, TreecodeParams, TreecodeStats};
pub use kernel::{PairKernel, Rescaled, TreeKernel};
pub use traversal::{Interaction, Interactions};
pub use tree::{Cluster, Tree, TreeParams};
pub use upward::{anterpolate, upward_pass, ProxyCharges};
