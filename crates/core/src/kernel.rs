//! Kernels, without physical prefactors (the convention of the seed papers).
//!
//! - Laplace: `G(r) = 1/|r|`, scalar charges `q`.
//! - Stokeslet: `G(r) = I/|r| + r r^T/|r|^3`, force vectors `f`.
//! - Stresslet: `T_ijk(r) = -6 r_i r_j r_k / |r|^5`, applied to `q (x) n` (dipole `q`, normal `n`):
//!   `u_i = T_ijk q_j n_k = -6 (r.q)(r.n) r_i / |r|^5`.
//! - Stokes: the combined single + double layer `G f + T (q (x) n)` in one call.
//!
//! A target that coincides with a source skips that source's free-space term.

use crate::error::{Error, Result};

/// The kernel of one evaluation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// `1/r` with scalar charges.
    Laplace,
    /// Stokeslet with force vectors.
    Stokeslet,
    /// Stresslet with dipole and normal vectors.
    Stresslet,
    /// Stokeslet + stresslet (single + double layer).
    Stokes,
}

/// One physical part of a kernel; [`Kernel::Stokes`] has two.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelPart {
    /// `1/r`.
    Laplace,
    /// `I/r + r r^T / r^3`.
    Stokeslet,
    /// `-6 r r r / r^5` applied to `q (x) n`.
    Stresslet,
}

impl Kernel {
    /// All kernels, in the order used by tables.
    pub const ALL: [Kernel; 4] = [Kernel::Laplace, Kernel::Stokeslet, Kernel::Stresslet, Kernel::Stokes];

    /// Name used in run.toml and reports.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Laplace => "laplace",
            Kernel::Stokeslet => "stokeslet",
            Kernel::Stresslet => "stresslet",
            Kernel::Stokes => "stokes",
        }
    }

    /// Parses a name as written in run.toml.
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "laplace" => Ok(Kernel::Laplace),
            "stokeslet" => Ok(Kernel::Stokeslet),
            "stresslet" => Ok(Kernel::Stresslet),
            "stokes" => Ok(Kernel::Stokes),
            other => Err(Error::OutOfRange {
                field: "problem.kernel".into(),
                value: format!("\"{other}\""),
                allowed: "\"laplace\", \"stokeslet\", \"stresslet\" or \"stokes\"".into(),
            }),
        }
    }

    /// Components of the potential per target: 1 for Laplace, 3 otherwise.
    pub fn output_dim(self) -> usize {
        match self {
            Kernel::Laplace => 1,
            _ => 3,
        }
    }

    /// The physical parts.
    pub fn parts(self) -> &'static [KernelPart] {
        match self {
            Kernel::Laplace => &[KernelPart::Laplace],
            Kernel::Stokeslet => &[KernelPart::Stokeslet],
            Kernel::Stresslet => &[KernelPart::Stresslet],
            Kernel::Stokes => &[KernelPart::Stokeslet, KernelPart::Stresslet],
        }
    }

    /// Number of grid components spread by P2G and transformed by the forward FFT.
    ///
    /// The stresslet tensor `T_ijk` is symmetric in all indices, so `T_ijk S_jk` depends only on
    /// the symmetric part of `S = q (x) n`: six components instead of nine. The combined kernel
    /// therefore spreads 3 + 6 = 9 components (ParkiPy spreads 12).
    pub fn grid_components(self) -> usize {
        match self {
            Kernel::Laplace => 1,
            Kernel::Stokeslet => 3,
            Kernel::Stresslet => 6,
            Kernel::Stokes => 9,
        }
    }

    /// Reals per source of the densities the kernel reads, in the packed order every stage uses
    /// (see [`crate::SourceSet`]): Laplace `[q]` (1), Stokeslet `[f]` (3), stresslet
    /// `[q, n]` (6), Stokes `[f, q, n]` (9).
    pub fn density_width(self) -> usize {
        match self {
            Kernel::Laplace => 1,
            Kernel::Stokeslet => 3,
            Kernel::Stresslet => 6,
            Kernel::Stokes => 9,
        }
    }

    /// Whether the sources carry charges (Laplace).
    pub fn needs_charges(self) -> bool {
        self == Kernel::Laplace
    }

    /// Whether the sources carry forces (Stokeslet, Stokes).
    pub fn needs_forces(self) -> bool {
        matches!(self, Kernel::Stokeslet | Kernel::Stokes)
    }

    /// Whether the sources carry dipoles and normals (stresslet, Stokes).
    pub fn needs_dipoles(self) -> bool {
        matches!(self, Kernel::Stresslet | Kernel::Stokes)
    }
}

impl KernelPart {
    /// Name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            KernelPart::Laplace => "laplace",
            KernelPart::Stokeslet => "stokeslet",
            KernelPart::Stresslet => "stresslet",
        }
    }
}

/// Free-space point evaluations in `f64`, the definitions every other module is checked against.
pub mod free_space {
    /// Laplace: `1/|r|`.
    #[inline]
    pub fn laplace(r: [f64; 3]) -> f64 {
        1.0 / (r[0] * r[0] + r[1] * r[1] + r[2] * r[2]).sqrt()
    }

    /// Stokeslet applied to `f`: `f/|r| + (r.f) r/|r|^3`.
    #[inline]
    pub fn stokeslet(r: [f64; 3], f: [f64; 3]) -> [f64; 3] {
        let r2 = r[0] * r[0] + r[1] * r[1] + r[2] * r[2];
        let ri = 1.0 / r2.sqrt();
        let rf = r[0] * f[0] + r[1] * f[1] + r[2] * f[2];
        let c = rf * ri * ri * ri;
        [f[0] * ri + c * r[0], f[1] * ri + c * r[1], f[2] * ri + c * r[2]]
    }

    /// Stresslet applied to `q (x) n`: `-6 (r.q)(r.n) r / |r|^5`.
    #[inline]
    pub fn stresslet(r: [f64; 3], q: [f64; 3], n: [f64; 3]) -> [f64; 3] {
        let r2 = r[0] * r[0] + r[1] * r[1] + r[2] * r[2];
        let ri = 1.0 / r2.sqrt();
        let rq = r[0] * q[0] + r[1] * q[1] + r[2] * q[2];
        let rn = r[0] * n[0] + r[1] * n[1] + r[2] * n[2];
        let c = -6.0 * rq * rn * ri * ri * ri * ri * ri;
        [c * r[0], c * r[1], c * r[2]]
    }
}

/// What an evaluation writes per target: the kernel's potential and, for Laplace, optionally
/// the field `E = -grad u` after it (`[u, E_x, E_y, E_z]`, the force per unit charge that
/// molecular dynamics needs).
///
/// ```
/// use parki_core::{Kernel, Output};
/// assert_eq!(Output::from(Kernel::Stokeslet).dim(), 3);
/// assert_eq!(Output::with_field(Kernel::Laplace).unwrap().dim(), 4);
/// assert!(Output::with_field(Kernel::Stokes).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Output {
    /// Kernel.
    pub kernel: Kernel,
    /// Whether the field follows the potential (Laplace only).
    pub field: bool,
}

impl Output {
    /// The potential of `kernel` alone.
    pub fn potential(kernel: Kernel) -> Self {
        Self { kernel, field: false }
    }

    /// The potential and the field of `kernel`.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] naming `output.field` for a kernel other than Laplace (the field of
    /// the Stokes kernels, the velocity gradient, is not provided).
    pub fn with_field(kernel: Kernel) -> Result<Self> {
        Self::new(kernel, true)
    }

    /// The potential of `kernel`, and its field if `field` (see [`Output::with_field`]).
    ///
    /// # Errors
    /// As [`Output::with_field`].
    pub fn new(kernel: Kernel, field: bool) -> Result<Self> {
        if field && kernel != Kernel::Laplace {
            return Err(Error::OutOfRange {
                field: "output.field".into(),
                value: format!("a field for the {} kernel", kernel.name()),
                allowed: "the laplace kernel (E = -grad u)".into(),
            });
        }
        Ok(Self { kernel, field })
    }

    /// Values per target: the kernel's [`Kernel::output_dim`], plus 3 with the field.
    pub fn dim(self) -> usize {
        self.kernel.output_dim() + if self.field { 3 } else { 0 }
    }
}

impl From<Kernel> for Output {
    fn from(kernel: Kernel) -> Self {
        Self::potential(kernel)
    }
}
