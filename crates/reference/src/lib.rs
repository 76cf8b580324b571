//! Independent references for parki-dist, written separately from the fast path (they share
//! only the vocabulary of `parki-core`):
//!
//! - [`direct`]: the free-space direct sum, `O(Ns Nt)`.
//! - [`classical`]: the classical triply periodic Ewald sum: a real-space sum over explicit
//!   periodic images plus an explicit sum over wave vectors, `O(N^2)`, with the zero mode dropped.
//!
//! - [`images`]: one and two periodic axes: the 1P image sum (pair form, Euler-Maclaurin tail)
//!   and the 2P sum from the classical sum of a tall box with the planar correction.
//! - [`transforms`]: 1-D DFT and DCT/DST by their defining sums, `O(N^2)`.
//! - [`generate`]: the seeded particle distributions and strengths of the tests, the benchmarks
//!   and run.toml's `generate = { ... }` (counter-based, so any slice of a set can be made on
//!   its own).
//!
//! Everything is in `f64`. They are used by the tests and by `parki-dist run --check K`.

pub mod classical;
pub mod direct;
pub mod generate;
pub mod images;
pub mod transforms;

pub use classical::ClassicalEwald;
