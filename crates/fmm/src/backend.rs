//! The seam between the FMM's host side and a device (parki-gpu's CUDA backend).
//!
//! The host builds the octrees, runs the dual traversal and, over MPI, the locally essential
//! tree; an [`FmmBackend`] computes the stages that cost: P2M, M2M, M2L, L2L, L2P and P2P
//! (seed 001, §2), with the expansions of one evaluation resident on the device
//! ([`FmmSession`]). Layouts are the host's: points in tree order, `nc p^2` coefficients per box
//! (harmonic density `c` at `c p^2`, coefficient `(n, m)` at `n^2 + n + m`, in the orthonormal
//! scaling with eq. (35)'s box scaling, [`crate::basis`]), values `[phi, grad]` (Laplace) or
//! `[u, 0]` (Stokeslet) per target in tree order.

use parki_core::Result;

use crate::evaluate::FmmKernel;
use crate::octree::{OctBox, Octree};
use crate::rotation::YRotation;
use crate::translate::Operators;
use crate::traversal::Lists;

/// What one evaluation on a device is made of.
#[derive(Clone, Copy)]
pub struct DeviceFmm<'a> {
    /// The kernel: Laplace (one harmonic density) or the Stokeslet (four).
    pub kernel: FmmKernel,
    /// The translation operators of the order (`ops.p`): scalings, coaxial matrices.
    pub ops: &'a Operators,
    /// Whether the Laplace gradient is wanted (the Stokeslet always uses it).
    pub gradient: bool,
    /// The rotations of the parent-child translations: `[up, down]` (polar angle
    /// `acos(1/sqrt 3)` and its supplement; `up` when the target box's centre lies above the
    /// source box's).
    pub updown: [&'a YRotation; 2],
    /// This process's source tree (points in tree order), whose multipoles [`FmmSession::p2m`]
    /// and [`FmmSession::m2m`] form.
    pub sources: &'a Octree,
    /// Its harmonic densities in tree order (`nc` of them).
    pub densities: &'a [Vec<f64>],
    /// The target tree (points in tree order).
    pub targets: &'a Octree,
}

/// The source side of M2L and P2P: its boxes (the local source tree's, or the locally essential
/// tree's, whose first boxes are the local tree's), and the particles their ranges index.
#[derive(Clone, Copy)]
pub struct SourceSide<'a> {
    /// Boxes of one root cube (M2L sources and P2P leaves index them).
    pub boxes: &'a [OctBox],
    /// Their multipoles (`nc p^2` per box); `None`: the device's own from
    /// [`FmmSession::m2m`] (then `boxes` are the source tree's).
    pub multipoles: Option<&'a [f64]>,
    /// The particles' positions (the boxes' `begin..end` index them).
    pub points: &'a [[f64; 3]],
    /// The near field's densities: `[q]` (Laplace) or the force components `[f_x, f_y, f_z]`
    /// (Stokeslet), each as long as `points`.
    pub near: &'a [&'a [f64]],
}

/// A device that runs the FMM's compute stages (shared by reference with the thread pool the
/// evaluation runs in).
pub trait FmmBackend: Sync {
    /// The device and its variants, for reports.
    fn describe(&self) -> String;

    /// Opens one evaluation: checks the device memory it needs (an error with the estimate
    /// before any allocation) and uploads the source and target trees.
    ///
    /// # Errors
    /// The device's: memory, launches.
    fn begin<'a>(&'a self, spec: DeviceFmm<'a>) -> Result<Box<dyn FmmSession + 'a>>;
}

/// One evaluation on a device. Each stage waits for the device before it returns, so that the
/// report's per-stage times are the device's.
pub trait FmmSession {
    /// The variants this evaluation runs (for reports: [`crate::FmmStats::device_variants`]).
    fn variants(&self) -> String;

    /// P2M at every source leaf (eq. (14)), into the device's multipoles.
    ///
    /// # Errors
    /// The device's.
    fn p2m(&mut self) -> Result<()>;

    /// M2M level by level from the deepest (a parent's multipole is the sum of its children's
    /// translated ones).
    ///
    /// # Errors
    /// The device's.
    fn m2m(&mut self) -> Result<()>;

    /// The source tree's multipoles (`nc p^2` per box), downloaded.
    ///
    /// # Errors
    /// The device's.
    fn multipoles(&mut self) -> Result<Vec<f64>>;

    /// M2L of `lists` (target boxes of the target tree, sources the boxes of `side`), the
    /// polar angles' rotations `yrots` (`lists.betas` order), into the targets' locals.
    ///
    /// # Errors
    /// The device's.
    fn m2l(&mut self, side: &SourceSide<'_>, lists: &Lists, yrots: &[YRotation]) -> Result<()>;

    /// L2L level by level from the top.
    ///
    /// # Errors
    /// The device's.
    fn l2l(&mut self) -> Result<()>;

    /// L2P at every target leaf (potential and gradient; the Stokeslet's combination).
    ///
    /// # Errors
    /// The device's.
    fn l2p(&mut self) -> Result<()>;

    /// P2P of the target leaves against their near lists in `lists` (source leaves of `side`).
    ///
    /// # Errors
    /// The device's.
    fn p2p(&mut self, side: &SourceSide<'_>, lists: &Lists) -> Result<()>;

    /// The values per target in tree order (`[phi, grad]` or `[u, 0]`), downloaded.
    ///
    /// # Errors
    /// The device's.
    fn values(&mut self) -> Result<Vec<[f64; 4]>>;
}
