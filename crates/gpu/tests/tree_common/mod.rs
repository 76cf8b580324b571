//! What the treecode's device tests share: the kernels, their inputs, the comparison.

use parki_reference::generate::particle_rng;
use parki_treecode::TreeKernel;

/// Every built-in kernel with parameters (`sin(kr)/r` at `k = 1`: the traversal approximates
/// only clusters small against `1/k`, `parki_treecode::traversal::oscillation_radius`, and at
/// a few thousand points `k = 3` leaves every pair direct).
pub fn kernels() -> Vec<TreeKernel> {
    vec![
        TreeKernel::Coulomb,
        TreeKernel::Yukawa { kappa: 0.8 },
        TreeKernel::RegularizedCoulomb { epsilon: 0.05 },
        TreeKernel::RegularizedYukawa { kappa: 0.8, epsilon: 0.05 },
        TreeKernel::SinOverR { wavenumber: 1.0 },
        TreeKernel::Stokeslet,
        TreeKernel::Stresslet,
        TreeKernel::Stokes,
    ]
}

/// The caller's inputs of `k` for `n` sources (normal, an offset per component), from `seed`.
pub fn inputs(k: TreeKernel, n: usize, seed: u64) -> Vec<f64> {
    let w = k.input_width();
    (0..n * w).map(|i| particle_rng(seed, (i / w) as u64).normal() + (i % w) as f64 * 0.1).collect()
}

/// Relative l2 difference of `a` from `b`.
pub fn rel_l2(a: &[f64], b: &[f64]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den).sqrt()
}
