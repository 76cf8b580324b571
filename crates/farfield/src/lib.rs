//! Far field of parki-dist: `u^F = G2P(IFFT(CNV(FFT(P2G(sources)))))`.
//!
//! - [`window`]: the Kaiser–Bessel window, its exact Fourier transform, its per-bin polynomials.
//! - [`gridwin`]: the window on a periodic grid (anchors, weights, grid densities).
//! - [`p2g`](mod@p2g): spreading, scatter baseline and slab-blocked hybrid.
//! - [`cnv`]: Fourier-space kernels and deconvolution.
//! - [`g2p`](mod@g2p): interpolation, base and target-sorted.
//! - [`params`]: the error model, the cost model and the parameter selection from a tolerance.
//! - [`stats`]: close-pair statistics of the actual particles for the error model.
//! - [`occupancy`]: neighbour-cell occupancy of the actual particles for the cost model.

pub mod cnv;
pub mod error_model;
pub mod fold;
pub mod free;
mod free_split;
pub mod g2p;
pub mod gridwin;
pub mod occupancy;
pub mod p2g;
pub mod params;
mod quad;
pub mod stats;
pub mod truncated;
pub mod window;

pub use cnv::Cnv;
pub use free::{FreeCnv, FreeGrid};
pub use g2p::{g2p, g2p_field, interleave, FieldMethod, G2pVariant, GatherGrid};
pub use gridwin::GridWindow;
pub use occupancy::Occupancy;
pub use p2g::{p2g, AtomicReal, P2gScratch, P2gVariant};
pub use params::{select, CostModel, ErrorEstimate, Params, PositionRounding, Request};
pub use stats::PairStatistics;
pub use window::{KaiserBessel, WindowPoly};
