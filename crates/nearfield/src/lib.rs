//! Near field of parki-dist: padded cell lists and SIMD Ewald-screened P2P kernels.
//!
//! - [`cells`]: the cell grid (width at least `r_c`, periodic wrap) and the padded cell lists of
//!   sources and sorted targets, built by a two-pass counting sort.
//! - [`p2p`](mod@p2p): `u^N(x_i) = sum_j sum_p G^N(x_i - y_j + p) s_j` over the 27 colleague cells, for the
//!   Laplace, Stokeslet, stresslet and combined kernels, including the self term of a target that
//!   coincides with a source; explicit SIMD dispatched at run time behind a CPU check
//!   ([`simd`], [`IsaToken`]).
//! - [`special`]: `exp` and `erfc` in SIMD.

#![deny(clippy::undocumented_unsafe_blocks)]

mod erfc_coeffs;

pub mod cells;
pub mod free;
pub mod p2p;
pub mod simd;
pub mod special;

pub use cells::{CellGrid, PaddedSources, SortedTargets};
pub use free::{FreeReal, FreeSources};
pub use p2p::{evaluated_pairs, p2p, p2p_at, p2p_within, NearCutoff, P2pFlops, P2pReal, SourceRuns};
pub use simd::{Isa, IsaToken};
pub use special::{KernelReal, PairAccuracy};
