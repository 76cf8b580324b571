//! Free-space direct sums, `u(x_i) = sum_j G(x_i - y_j) s_j`, skipping coincident pairs.

use parki_core::kernel::free_space;
use parki_core::{Kernel, Sources};
use rayon::prelude::{IndexedParallelIterator, IntoParallelRefIterator, ParallelIterator, ParallelSliceMut};

/// Evaluates the free-space sum at `targets` (output `(Nt, dim)` row-major, `dim` =
/// [`Kernel::output_dim`]). A target that coincides exactly with a source skips it.
pub fn free_space_sum(kernel: Kernel, sources: &Sources<f64>, targets: &[[f64; 3]]) -> Vec<f64> {
    let dim = kernel.output_dim();
    let mut out = vec![0.0; targets.len() * dim];
    out.par_chunks_mut(dim).zip(targets.par_iter()).for_each(|(u, x)| {
        let mut acc = [0.0f64; 3];
        for (j, y) in sources.positions.iter().enumerate() {
            let r = [x[0] - y[0], x[1] - y[1], x[2] - y[2]];
            if r == [0.0; 3] {
                continue;
            }
            if let Some(q) = sources.charges {
                if kernel.needs_charges() {
                    acc[0] += free_space::laplace(r) * q[j];
                }
            }
            if kernel.needs_forces() {
                let f = sources.forces.expect("forces")[j];
                let v = free_space::stokeslet(r, f);
                (0..3).for_each(|a| acc[a] += v[a]);
            }
            if kernel.needs_dipoles() {
                let q = sources.dipoles.expect("dipoles")[j];
                let n = sources.normals.expect("normals")[j];
                let v = free_space::stresslet(r, q, n);
                (0..3).for_each(|a| acc[a] += v[a]);
            }
        }
        u.copy_from_slice(&acc[..dim]);
    });
    out
}
