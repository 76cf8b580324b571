//! Free-space direct sums, `u(x_i) = sum_j G(x_i - y_j) s_j`, skipping coincident pairs, and
//! for Laplace the field `E(x_i) = sum_j q_j (x_i - y_j) / |x_i - y_j|^3`.

use parki_core::kernel::free_space;
use parki_core::{Output, Sources};
use rayon::prelude::{IndexedParallelIterator, IntoParallelRefIterator, ParallelIterator, ParallelSliceMut};

/// Adds `w` times the free-space kernel of source `j` at displacement `r` into `acc` (the
/// `output.dim()` values of [`Output`]; nothing at `r = 0`: a coincident source is skipped).
/// `monopoles`: the Laplace and Stokeslet potentials only, and no field (the constant
/// subtractions of the pair form).
pub(crate) fn add_source(
    output: Output,
    sources: &Sources<f64>,
    j: usize,
    r: [f64; 3],
    w: f64,
    acc: &mut [f64; 4],
    monopoles: bool,
) {
    if r == [0.0; 3] {
        return;
    }
    let kernel = output.kernel;
    if let (true, Some(q)) = (kernel.needs_charges(), sources.charges) {
        let g = free_space::laplace(r);
        acc[0] += w * g * q[j];
        if output.field && !monopoles {
            let e = w * q[j] * g * g * g;
            (0..3).for_each(|a| acc[1 + a] += e * r[a]);
        }
    }
    if kernel.needs_forces() {
        let v = free_space::stokeslet(r, sources.forces.expect("forces")[j]);
        (0..3).for_each(|a| acc[a] += w * v[a]);
    }
    if kernel.needs_dipoles() && !monopoles {
        let v = free_space::stresslet(r, sources.dipoles.expect("dipoles")[j], sources.normals.expect("normals")[j]);
        (0..3).for_each(|a| acc[a] += w * v[a]);
    }
}

/// Evaluates the free-space sum at `targets` (output `(Nt, dim)` row-major, `dim` =
/// [`Output::dim`]). A target that coincides exactly with a source skips it.
pub fn free_space_sum(output: impl Into<Output>, sources: &Sources<f64>, targets: &[[f64; 3]]) -> Vec<f64> {
    let output = output.into();
    let dim = output.dim();
    let mut out = vec![0.0; targets.len() * dim];
    out.par_chunks_mut(dim).zip(targets.par_iter()).for_each(|(u, x)| {
        let mut acc = [0.0f64; 4];
        for (j, y) in sources.positions.iter().enumerate() {
            add_source(output, sources, j, [x[0] - y[0], x[1] - y[1], x[2] - y[2]], 1.0, &mut acc, false);
        }
        u.copy_from_slice(&acc[..dim]);
    });
    out
}
