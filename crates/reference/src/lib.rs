//! Independent references for parki-dist, written separately from the fast path (they share
//! only the vocabulary of `parki-core`):
//!
//! - [`direct`]: the free-space direct sum, `O(Ns Nt)`.
//! - [`classical`]: the classical triply periodic Ewald sum: a real-space sum over explicit
//!   periodic images plus an explicit sum over wave vectors, `O(N^2)`, with the zero mode dropped.
//!
//! Everything is in `f64`. Both are used by the tests and by `parki-dist run --check K`.

pub mod classical;
pub mod direct;

pub use classical::ClassicalEwald;
