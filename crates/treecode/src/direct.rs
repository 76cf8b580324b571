//! The direct sum every treecode result is checked against (tests, `[run] check`, the
//! benchmark), written from the kernels' formulas in scalar code, separately from the vector
//! kernels of [`crate::kernel`]: the Stokes kernels through `parki_core::kernel::free_space` with
//! the caller's dipoles and normals (not the treecode's symmetric tensors), libm's `exp` and `sin`.

use parki_core::kernel::free_space;
use rayon::prelude::{IntoParallelRefIterator, ParallelIterator};

use crate::kernel::TreeKernel;

/// Adds `G(r)` applied to one source's inputs (`kernel.input_width()` values) to `acc`, with
/// the self-term rules of the kernels (`r = 0` skipped except by the regularised ones).
pub fn add_pair(kernel: TreeKernel, r: [f64; 3], q: &[f64], acc: &mut [f64; 3]) {
    let r2: f64 = r.iter().map(|c| c * c).sum();
    let d = r2.sqrt();
    let regularised = matches!(kernel, TreeKernel::RegularizedCoulomb { .. } | TreeKernel::RegularizedYukawa { .. });
    if r2 == 0.0 && !regularised {
        return;
    }
    match kernel {
        TreeKernel::Coulomb => acc[0] += q[0] / d,
        TreeKernel::Yukawa { kappa } => acc[0] += q[0] * (-kappa * d).exp() / d,
        TreeKernel::RegularizedCoulomb { epsilon } => acc[0] += q[0] / (r2 + epsilon * epsilon).sqrt(),
        TreeKernel::RegularizedYukawa { kappa, epsilon } => {
            acc[0] += q[0] * (-kappa * d).exp() / (r2 + epsilon * epsilon).sqrt()
        }
        TreeKernel::SinOverR { wavenumber } => acc[0] += q[0] * (wavenumber * d).sin() / d,
        TreeKernel::Stokeslet => {
            let v = free_space::stokeslet(r, [q[0], q[1], q[2]]);
            (0..3).for_each(|a| acc[a] += v[a]);
        }
        TreeKernel::Stresslet => {
            let v = free_space::stresslet(r, [q[0], q[1], q[2]], [q[3], q[4], q[5]]);
            (0..3).for_each(|a| acc[a] += v[a]);
        }
        TreeKernel::Stokes => {
            let v = free_space::stokeslet(r, [q[0], q[1], q[2]]);
            let w = free_space::stresslet(r, [q[3], q[4], q[5]], [q[6], q[7], q[8]]);
            (0..3).for_each(|a| acc[a] += v[a] + w[a]);
        }
    }
}

/// The direct sum over all `sources` (with the caller's `inputs`) at the targets `sample`
/// (indices into `targets`): `kernel.value_width()` values per sampled target, on rayon's
/// threads.
pub fn direct_sum(
    kernel: TreeKernel,
    sources: &[[f64; 3]],
    inputs: &[f64],
    targets: &[[f64; 3]],
    sample: &[usize],
) -> Vec<f64> {
    let (w, nv) = (kernel.input_width(), kernel.value_width());
    sample
        .par_iter()
        .flat_map_iter(|&i| {
            let x = targets[i];
            let mut acc = [0.0; 3];
            for (j, y) in sources.iter().enumerate() {
                add_pair(kernel, [x[0] - y[0], x[1] - y[1], x[2] - y[2]], &inputs[j * w..(j + 1) * w], &mut acc);
            }
            acc[..nv].to_vec()
        })
        .collect()
}

/// The BLDTT paper's eq. (22): the relative l2 error of `fast` (`nv` values per target, every
/// target) against `reference` (`nv` per sampled target) at `sample`.
pub fn relative_l2(fast: &[f64], nv: usize, sample: &[usize], reference: &[f64]) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for (s, &i) in sample.iter().enumerate() {
        for v in 0..nv {
            let (a, b) = (fast[i * nv + v], reference[s * nv + v]);
            num += (a - b) * (a - b);
            den += b * b;
        }
    }
    (num / den).sqrt()
}
