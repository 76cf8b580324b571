//! A borrowed view of a source set in the library's `(N, 3)` row-major layout.

use crate::error::{Error, Result};
use crate::kernel::Kernel;
use crate::real::Real;

/// Sources: positions plus the densities the kernel needs.
///
/// | kernel | densities |
/// |---|---|
/// | Laplace | `charges` (N) |
/// | Stokeslet | `forces` (N,3) |
/// | stresslet | `dipoles` q (N,3) and `normals` n (N,3) |
/// | Stokes | `forces`, `dipoles`, `normals` |
#[derive(Clone, Copy, Debug)]
pub struct Sources<'a, T> {
    /// Positions, `(N, 3)`.
    pub positions: &'a [[T; 3]],
    /// Charges for Laplace, `(N,)`.
    pub charges: Option<&'a [T]>,
    /// Forces for the Stokeslet, `(N, 3)`.
    pub forces: Option<&'a [[T; 3]]>,
    /// Dipoles `q` for the stresslet, `(N, 3)`.
    pub dipoles: Option<&'a [[T; 3]]>,
    /// Normals `n` for the stresslet, `(N, 3)`.
    pub normals: Option<&'a [[T; 3]]>,
}

impl<'a, T: Real> Sources<'a, T> {
    /// Laplace sources.
    pub fn laplace(positions: &'a [[T; 3]], charges: &'a [T]) -> Self {
        Self { positions, charges: Some(charges), forces: None, dipoles: None, normals: None }
    }

    /// Stokeslet sources.
    pub fn stokeslet(positions: &'a [[T; 3]], forces: &'a [[T; 3]]) -> Self {
        Self { positions, charges: None, forces: Some(forces), dipoles: None, normals: None }
    }

    /// Stresslet sources.
    pub fn stresslet(positions: &'a [[T; 3]], dipoles: &'a [[T; 3]], normals: &'a [[T; 3]]) -> Self {
        Self { positions, charges: None, forces: None, dipoles: Some(dipoles), normals: Some(normals) }
    }

    /// Combined single + double layer sources.
    pub fn stokes(positions: &'a [[T; 3]], forces: &'a [[T; 3]], dipoles: &'a [[T; 3]], normals: &'a [[T; 3]]) -> Self {
        Self { positions, charges: None, forces: Some(forces), dipoles: Some(dipoles), normals: Some(normals) }
    }

    /// Number of sources.
    pub fn len(&self) -> usize {
        self.positions.len()
    }

    /// Whether there are no sources.
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }

    /// Checks that the densities `kernel` needs are present, have as many rows as `positions`,
    /// and are finite. Positions are checked separately against the domain.
    pub fn check_densities(&self, kernel: Kernel) -> Result<()> {
        let n = self.positions.len();
        let need = |present: bool, field: &str, what: &str| -> Result<()> {
            if present {
                Ok(())
            } else {
                Err(Error::Missing {
                    field: format!("sources.{field}"),
                    reason: format!("kernel \"{}\" needs {what}", kernel.name()),
                })
            }
        };
        let rows = |field: &str, len: usize| -> Result<()> {
            if len == n {
                Ok(())
            } else {
                Err(Error::LengthMismatch {
                    field: format!("sources.{field}"),
                    found: len,
                    reference: "sources.positions".into(),
                    expected: n,
                })
            }
        };
        if kernel.needs_charges() {
            need(self.charges.is_some(), "charges", "scalar charges (N,)")?;
            let q = self.charges.unwrap_or(&[]);
            rows("charges", q.len())?;
            crate::validate::check_finite_scalars("sources.charges", q)?;
        }
        if kernel.needs_forces() {
            need(self.forces.is_some(), "forces", "force vectors (N,3)")?;
            let f = self.forces.unwrap_or(&[]);
            rows("forces", f.len())?;
            crate::validate::check_finite_vectors("sources.forces", f)?;
        }
        if kernel.needs_dipoles() {
            need(self.dipoles.is_some(), "dipoles", "dipole vectors q (N,3)")?;
            need(self.normals.is_some(), "normals", "normal vectors n (N,3)")?;
            let q = self.dipoles.unwrap_or(&[]);
            let nn = self.normals.unwrap_or(&[]);
            rows("dipoles", q.len())?;
            rows("normals", nn.len())?;
            crate::validate::check_finite_vectors("sources.dipoles", q)?;
            crate::validate::check_finite_vectors("sources.normals", nn)?;
        }
        Ok(())
    }
}

/// What rounding `exact` to `T` removes, given `rounded = T::from_f64(exact)`: `exact -
/// rounded` (exact in f64) rounded to `T`, so that `rounded + residual` holds `exact` to twice
/// `T`'s digits. Zero for f64.
#[inline]
pub fn residual<T: Real>(exact: f64, rounded: T) -> T {
    T::from_f64(exact - rounded.to_f64())
}

/// Points in a working precision `T`, with the residuals of rounding them from f64 where the
/// caller has them ([`SourceSet::residuals`]): point `j` is at [`at(j)`](Self::at).
#[derive(Clone, Copy, Debug)]
pub struct Points<'a, T> {
    /// The positions in `T`.
    pub positions: &'a [[T; 3]],
    /// What rounding them to `T` removed, one per position, or `None` (exact).
    pub residuals: Option<&'a [[T; 3]]>,
}

impl<'a, T: Real> Points<'a, T> {
    /// Exact points in `T`.
    pub fn new(positions: &'a [[T; 3]]) -> Self {
        Self { positions, residuals: None }
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.positions.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }

    /// Point `j` in f64: the position plus its residual (exact in f64).
    #[inline(always)]
    pub fn at(&self, j: usize) -> [f64; 3] {
        let p = &self.positions[j];
        match self.residuals {
            None => p.map(|x| x.to_f64()),
            Some(r) => [0, 1, 2].map(|d| p[d].to_f64() + r[j][d].to_f64()),
        }
    }
}

/// A set of sources as the evaluation stages read it: positions, and per source the
/// `kernel.density_width()` density components in the packed order of
/// [`Kernel::density_width`] (`[q]`, `[f]`, `[q, n]` or `[f, q, n]`).
///
/// Implemented by the caller's [`Sources`] (read in place, no copy) and by [`PackedSources`]
/// (particles received from other ranks, ghosts appended), so that every stage runs on either.
pub trait SourceSet<T>: Sync {
    /// Positions.
    fn positions(&self) -> &[[T; 3]];

    /// Writes the packed densities of source `j` into `out[..kernel.density_width()]`.
    fn density(&self, kernel: Kernel, j: usize, out: &mut [T]);

    /// Number of sources.
    fn count(&self) -> usize {
        self.positions().len()
    }

    /// What rounding the positions to `T` removed, where the set has it: source `j` lies at
    /// `positions()[j] + residuals()[j]` (the sum formed in f64), for an f32 solver given f64
    /// positions ([`residual`]). Only the cell lists read it, so that coordinates relative to a
    /// cell are rounded at the scale of the cell rather than of the box. `None` (the default):
    /// the positions are exact.
    fn residuals(&self) -> Option<&[[T; 3]]> {
        None
    }

    /// Source `j`'s position in f64, with its residual where the set has one (what the far
    /// field's windows are placed at, [`Points::at`]).
    #[inline(always)]
    fn position_f64(&self, j: usize) -> [f64; 3]
    where
        T: Real,
    {
        Points { positions: self.positions(), residuals: self.residuals() }.at(j)
    }

    /// Prefetches the position and densities of source `j` (see [`crate::memory::prefetch`]),
    /// for loops that visit the sources through an order; `j < count()`.
    #[inline]
    fn prefetch(&self, kernel: Kernel, j: usize) {
        let _ = kernel;
        if let Some(p) = self.positions().get(j) {
            crate::memory::prefetch(p);
        }
    }
}

impl<T: Real> SourceSet<T> for Sources<'_, T> {
    fn positions(&self) -> &[[T; 3]] {
        self.positions
    }

    /// Panics if a density `kernel` needs is absent (checked by [`Sources::check_densities`]).
    #[inline]
    fn density(&self, kernel: Kernel, j: usize, out: &mut [T]) {
        let mut k = 0;
        if kernel.needs_charges() {
            out[0] = self.charges.expect("charges checked")[j];
            k = 1;
        }
        if kernel.needs_forces() {
            out[k..k + 3].copy_from_slice(&self.forces.expect("forces checked")[j]);
            k += 3;
        }
        if kernel.needs_dipoles() {
            out[k..k + 3].copy_from_slice(&self.dipoles.expect("dipoles checked")[j]);
            out[k + 3..k + 6].copy_from_slice(&self.normals.expect("normals checked")[j]);
        }
    }

    #[inline]
    fn prefetch(&self, kernel: Kernel, j: usize) {
        let _ = kernel;
        use crate::memory::prefetch as fetch;
        if let Some(p) = self.positions.get(j) {
            fetch(p);
        }
        if let Some(c) = self.charges.and_then(|c| c.get(j)) {
            fetch(c);
        }
        for a in [self.forces, self.dipoles, self.normals].into_iter().flatten() {
            if let Some(v) = a.get(j) {
                fetch(v);
            }
        }
    }
}

/// A borrowed source set with packed densities: source `j` is `positions[j]` with densities
/// `density[j w .. (j + 1) w]`, `w = kernel.density_width()`.
#[derive(Clone, Copy, Debug)]
pub struct PackedSources<'a, T> {
    /// Positions.
    pub positions: &'a [[T; 3]],
    /// Packed densities, `width` per source.
    pub density: &'a [T],
    /// Reals per source.
    pub width: usize,
}

impl<T: Real> SourceSet<T> for PackedSources<'_, T> {
    fn positions(&self) -> &[[T; 3]] {
        self.positions
    }

    #[inline]
    fn density(&self, kernel: Kernel, j: usize, out: &mut [T]) {
        debug_assert_eq!(kernel.density_width(), self.width, "packed for another kernel");
        let w = self.width;
        out[..w].copy_from_slice(&self.density[j * w..(j + 1) * w]);
    }

    #[inline]
    fn prefetch(&self, kernel: Kernel, j: usize) {
        let _ = kernel;
        if let Some(p) = self.positions.get(j) {
            crate::memory::prefetch(p);
        }
        if let Some(d) = self.density.get(j * self.width) {
            crate::memory::prefetch(d);
        }
    }
}

/// Owned sources with packed densities (what MPI-SORT receives, with ghosts appended).
#[derive(Clone, Debug, Default)]
pub struct PackedSet<T> {
    /// Positions.
    pub positions: Vec<[T; 3]>,
    /// Packed densities, `width` per source.
    pub density: Vec<T>,
    /// Reals per source.
    pub width: usize,
}

impl<T: Real> PackedSet<T> {
    /// An empty set for `kernel`.
    pub fn new(kernel: Kernel) -> Self {
        Self { positions: Vec::new(), density: Vec::new(), width: kernel.density_width() }
    }

    /// Number of sources.
    pub fn len(&self) -> usize {
        self.positions.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }

    /// Empties the set, keeping its capacity.
    pub fn clear(&mut self) {
        self.positions.clear();
        self.density.clear();
    }

    /// Appends sources from positions and packed densities (`width` per position).
    pub fn extend(&mut self, positions: &[[T; 3]], density: &[T]) {
        assert_eq!(density.len(), positions.len() * self.width, "packed densities per position");
        self.positions.extend_from_slice(positions);
        self.density.extend_from_slice(density);
    }

    /// Appends source `j` of `set`.
    pub fn push_from(&mut self, kernel: Kernel, set: &impl SourceSet<T>, j: usize) {
        self.positions.push(set.positions()[j]);
        let o = self.density.len();
        self.density.resize(o + self.width, T::ZERO);
        set.density(kernel, j, &mut self.density[o..]);
    }

    /// A view of the whole set.
    pub fn view(&self) -> PackedSources<'_, T> {
        self.first(self.len())
    }

    /// A view of the first `n` sources.
    pub fn first(&self, n: usize) -> PackedSources<'_, T> {
        PackedSources { positions: &self.positions[..n], density: &self.density[..n * self.width], width: self.width }
    }
}
