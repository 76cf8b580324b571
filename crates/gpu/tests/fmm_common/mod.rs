//! What the FMM's device tests share: the charges and the comparison.

use parki_reference::generate::particle_rng;

/// `n` standard normal charges from `seed` (parki-reference's particle streams), their mean
/// removed.
pub fn charges(n: usize, seed: u64) -> Vec<f64> {
    let mut v: Vec<f64> = (0..n).map(|i| particle_rng(seed, i as u64).normal()).collect();
    let mean = v.iter().sum::<f64>() / n.max(1) as f64;
    v.iter_mut().for_each(|x| *x -= mean);
    v
}

/// Relative l2 difference of `a` from `b`.
pub fn rel_l2(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len(), "compared arrays");
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den).sqrt()
}
