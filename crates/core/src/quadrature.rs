//! Gauss–Legendre rules, shared by the error model's integrals (farfield) and the lattice
//! Green's functions' Bessel integrals (poisson).

use std::f64::consts::PI;

/// The `n`-point Gauss–Legendre nodes and weights on `[-1, 1]` (Newton on `P_n` from the
/// Chebyshev guess; nodes in decreasing order).
pub fn gauss_legendre(n: usize) -> (Vec<f64>, Vec<f64>) {
    let (mut x, mut w) = (vec![0.0; n], vec![0.0; n]);
    for i in 0..n {
        let mut z = (PI * (i as f64 + 0.75) / (n as f64 + 0.5)).cos();
        let mut dp = 0.0;
        for _ in 0..100 {
            // P_n(z) and P_{n-1}(z) by the three-term recurrence
            let (mut p0, mut p1) = (1.0, z);
            for k in 2..=n {
                let p2 = ((2 * k - 1) as f64 * z * p1 - (k - 1) as f64 * p0) / k as f64;
                p0 = p1;
                p1 = p2;
            }
            dp = n as f64 * (z * p1 - p0) / (z * z - 1.0);
            let dz = p1 / dp;
            z -= dz;
            if dz.abs() < 1e-16 {
                break;
            }
        }
        x[i] = z;
        w[i] = 2.0 / ((1.0 - z * z) * dp * dp);
    }
    (x, w)
}

#[cfg(test)]
mod tests {
    use super::gauss_legendre;

    #[test]
    fn integrates_polynomials_to_degree_2n_minus_1() {
        for n in [2, 16, 32] {
            let (x, w) = gauss_legendre(n);
            for p in [0, 1, 2, 2 * n as i32 - 2, 2 * n as i32 - 1] {
                let s: f64 = x.iter().zip(&w).map(|(x, w)| w * x.powi(p)).sum();
                let want = if p % 2 == 1 { 0.0 } else { 2.0 / (p + 1) as f64 };
                assert!((s - want).abs() < 1e-14, "n = {n}, x^{p}: {s} vs {want}");
            }
        }
    }
}
