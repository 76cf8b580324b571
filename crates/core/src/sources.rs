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
