//! [`EwaldSolver`]: plan once, evaluate many times, in one process.
//!
//! ```no_run
//! use parki_dist::{Domain, EwaldOptions, EwaldSolver, Kernel, Sources, Targets};
//!
//! let domain = Domain::triply_periodic([1.0, 1.2, 0.9]).unwrap();
//! let opts = EwaldOptions::new(Kernel::Stokeslet, domain, 1e-9);
//! let (pos, f): (Vec<[f64; 3]>, Vec<[f64; 3]>) = (vec![], vec![]);
//! let mut solver = EwaldSolver::<f64>::new(&opts, pos.len(), pos.len()).unwrap();
//! let mut u = vec![0.0; 3 * pos.len()];
//! let report = solver.evaluate(&Sources::stokeslet(&pos, &f), Targets::Sources, &mut u).unwrap();
//! println!("{:?}", report.times);
//! ```

use parki_comm::Comm;
use parki_core::{Result, Sources};
use parki_decomp::SortMode;
use parki_farfield::Params;
use parki_nearfield::{CellGrid, Isa};

use crate::options::{EwaldOptions, ExactPositions, ParallelOptions, Targets};
use crate::pipeline::{DistEwaldSolver, Evaluation};
use crate::plan::MemoryEstimate;
use crate::stage::EwaldStage;
use crate::SolverReal;

/// A planned spectral Ewald solver for one kernel, box, tolerance and precision, in this
/// process: the distributed pipeline over a one-rank communicator, whose sort, ghost, halo and
/// return steps do nothing (the stages read the caller's arrays in place, or for a box or
/// strengths far from 1 copies of them in the solver's units: [`length_unit`](Self::length_unit),
/// [`Evaluation::strength_unit`]).
pub struct EwaldSolver<T: SolverReal> {
    inner: DistEwaldSolver<T>,
}

impl<T: SolverReal> EwaldSolver<T> {
    /// Plans a solver for `sources` sources and `targets` targets: chooses the parameters,
    /// builds the window, the FFT plans, the grids and the evaluation scratch.
    ///
    /// # Errors
    /// A tolerance or fixed parameter out of range, or a problem whose estimated memory
    /// exceeds the available memory (the message names the counts and the estimate).
    pub fn new(opts: &EwaldOptions, sources: usize, targets: usize) -> Result<Self> {
        Ok(Self { inner: DistEwaldSolver::new(&Comm::single(), opts, ParallelOptions::default(), sources, targets)? })
    }

    /// The memory a solver for `sources` and `targets` would need, without allocating it.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn estimate_memory(opts: &EwaldOptions, sources: usize, targets: usize) -> Result<MemoryEstimate> {
        DistEwaldSolver::<T>::estimate_memory(&Comm::single(), opts, ParallelOptions::default(), sources, targets)
    }

    /// The chosen parameters.
    pub fn params(&self) -> &Params {
        self.inner.params()
    }

    /// The options the solver was planned with.
    pub fn options(&self) -> &EwaldOptions {
        self.inner.options()
    }

    /// Threads used.
    pub fn threads(&self) -> usize {
        self.inner.threads()
    }

    /// Instruction set of P2P.
    pub fn isa(&self) -> Isa {
        self.inner.isa()
    }

    /// The length unit the solver computes in: 1, or for a box whose longest side lies outside
    /// `[2^-10, 2^10]` the power of two nearest it (the caller's positions and dipoles are read
    /// through copies over it and the results scaled back, exactly; docs/design.md, "Units").
    pub fn length_unit(&self) -> f64 {
        self.inner.length_unit()
    }

    /// The cell grid of the near field (in the solver's [`length_unit`](Self::length_unit)).
    pub fn cells(&self) -> &CellGrid {
        self.inner.cells()
    }

    /// The memory estimate the plan was checked against.
    pub fn memory(&self) -> &MemoryEstimate {
        self.inner.memory()
    }

    /// Evaluates the potential at `targets` into `out` (`output_dim` values per target, input
    /// order), overwriting it. Strengths whose largest lies outside `[2^-40, 2^40]` are computed
    /// over a power of two near it, exactly ([`Evaluation::strength_unit`]).
    ///
    /// # Errors
    /// A particle outside the box, a non-finite value, a missing or mis-sized density, or an
    /// output of the wrong length (the message names the field, the particle and the value).
    pub fn evaluate(&mut self, sources: &Sources<T>, targets: Targets<T>, out: &mut [T]) -> Result<Evaluation> {
        self.inner.evaluate(sources, targets, out, SortMode::Full)
    }

    /// As [`evaluate`](Self::evaluate), calling `progress(stage, seconds)` after every stage.
    ///
    /// # Errors
    /// As [`evaluate`](Self::evaluate).
    pub fn evaluate_with_progress(
        &mut self,
        sources: &Sources<T>,
        targets: Targets<T>,
        out: &mut [T],
        progress: &mut (dyn FnMut(EwaldStage, f64) + Send),
    ) -> Result<Evaluation> {
        self.inner.evaluate_with_progress(sources, targets, out, SortMode::Full, progress)
    }

    /// As [`evaluate`](Self::evaluate) for positions rounded from the f64 positions in `exact`
    /// ([`DistEwaldSolver::evaluate_exact`]): in f32 the cell lists and the far field's windows
    /// see them rounded at the scale of a cell rather than of the box.
    ///
    /// # Errors
    /// As [`evaluate`](Self::evaluate), and exact positions in other numbers than the
    /// positions, or that do not round to them.
    pub fn evaluate_exact(
        &mut self,
        sources: &Sources<T>,
        targets: Targets<T>,
        exact: ExactPositions<'_>,
        out: &mut [T],
    ) -> Result<Evaluation> {
        self.inner.evaluate_exact(sources, targets, exact, out, SortMode::Full)
    }
}
