//! Owned particle storage and the flat packing of densities that MPI-SORT and the ghost
//! exchange move: per particle `[q?, f?, q_dipole n?]` in the order of [`density_width`].

use parki_core::{Kernel, Real, Sources};

/// Reals per particle of the densities `kernel` reads: charges 1, forces 3, dipoles and normals 6.
pub fn density_width(kernel: Kernel) -> usize {
    usize::from(kernel.needs_charges())
        + 3 * usize::from(kernel.needs_forces())
        + 6 * usize::from(kernel.needs_dipoles())
}

/// Writes the densities of particle `j` of `s` into `out` (`density_width` values).
#[inline]
pub fn pack_density<T: Real>(kernel: Kernel, s: &Sources<T>, j: usize, out: &mut [T]) {
    let mut k = 0;
    if kernel.needs_charges() {
        out[0] = s.charges.expect("charges")[j];
        k = 1;
    }
    if kernel.needs_forces() {
        out[k..k + 3].copy_from_slice(&s.forces.expect("forces")[j]);
        k += 3;
    }
    if kernel.needs_dipoles() {
        out[k..k + 3].copy_from_slice(&s.dipoles.expect("dipoles")[j]);
        out[k + 3..k + 6].copy_from_slice(&s.normals.expect("normals")[j]);
    }
}

/// Particles with their densities, owned (structure of arrays, as [`Sources`] views them).
#[derive(Clone, Debug, Default)]
pub struct ParticleSet<T> {
    /// Positions.
    pub positions: Vec<[T; 3]>,
    /// Charges (Laplace).
    pub charges: Vec<T>,
    /// Forces (Stokeslet, Stokes).
    pub forces: Vec<[T; 3]>,
    /// Dipole strengths (stresslet, Stokes).
    pub dipoles: Vec<[T; 3]>,
    /// Normals (stresslet, Stokes).
    pub normals: Vec<[T; 3]>,
}

impl<T: Real> ParticleSet<T> {
    /// Empties the set, keeping capacity.
    pub fn clear(&mut self) {
        self.positions.clear();
        self.charges.clear();
        self.forces.clear();
        self.dipoles.clear();
        self.normals.clear();
    }

    /// Number of particles.
    pub fn len(&self) -> usize {
        self.positions.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }

    /// Appends particles from positions and packed densities.
    pub fn extend_packed(&mut self, kernel: Kernel, positions: &[[T; 3]], dens: &[T]) {
        let w = density_width(kernel);
        self.positions.extend_from_slice(positions);
        for d in dens.chunks_exact(w.max(1)).take(positions.len()) {
            let mut k = 0;
            if kernel.needs_charges() {
                self.charges.push(d[0]);
                k = 1;
            }
            if kernel.needs_forces() {
                self.forces.push([d[k], d[k + 1], d[k + 2]]);
                k += 3;
            }
            if kernel.needs_dipoles() {
                self.dipoles.push([d[k], d[k + 1], d[k + 2]]);
                self.normals.push([d[k + 3], d[k + 4], d[k + 5]]);
            }
        }
    }

    /// Appends the particles of `other`.
    pub fn append(&mut self, other: &ParticleSet<T>) {
        self.positions.extend_from_slice(&other.positions);
        self.charges.extend_from_slice(&other.charges);
        self.forces.extend_from_slice(&other.forces);
        self.dipoles.extend_from_slice(&other.dipoles);
        self.normals.extend_from_slice(&other.normals);
    }

    /// A [`Sources`] view for `kernel`.
    pub fn view(&self, kernel: Kernel) -> Sources<'_, T> {
        self.view_first(kernel, self.len())
    }

    /// A [`Sources`] view of the first `n` particles for `kernel`.
    pub fn view_first(&self, kernel: Kernel, n: usize) -> Sources<'_, T> {
        Sources {
            positions: &self.positions[..n],
            charges: kernel.needs_charges().then(|| &self.charges[..n]),
            forces: kernel.needs_forces().then(|| &self.forces[..n]),
            dipoles: kernel.needs_dipoles().then(|| &self.dipoles[..n]),
            normals: kernel.needs_dipoles().then(|| &self.normals[..n]),
        }
    }
}
