//! Grid Poisson solver with per-axis boundary conditions over the distributed FFT, after
//! FLUPS (Caprace, Gillis & Chatelain; digest `seed-002-flups.md`).
//!
//! `lap(phi) = f` on a uniform grid (cell- or node-centred) in a box, each axis periodic, symmetric
//! (even or odd on each side), unbounded, or semi-unbounded (unbounded on one side, even or
//! odd on the other): 10 classes per axis, 1000 combinations. The solution is the convolution
//! with a Green's function ([`GreenKind`]: CHAT2, HEJ2..HEJ10, HEJ0, LGF2) computed spectrally.
//!
//! - [`bc`]: boundary conditions, axis classes and their transforms.
//! - [`fields`]: manufactured solutions (the validation's and the application's test fields).
//! - [`green`]: the Green's functions in their 3-D, 2-D, 1-D and spectral forms.
//! - [`lgf`]: the lattice Green's functions of LGF2.
//! - [`special`]: the special functions they need.
//! - [`solver`]: [`PoissonSolver`], plan once, solve many times.

pub mod bc;
pub mod fields;
pub mod green;
pub mod lgf;
pub mod solver;
pub use parki_core::special;

pub use bc::{AxisClass, Bc, Centering};
pub use green::{Green, GreenKind};
pub use solver::{Differentiation, FieldMode, PoissonOptions, PoissonSolver, PoissonStage, PoissonTimes, SolveReport};
