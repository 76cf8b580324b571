//! Gauss–Legendre quadrature on panels, for the error model.

use std::sync::OnceLock;

const N: usize = 16;

fn nodes() -> &'static ([f64; N], [f64; N]) {
    static NODES: OnceLock<([f64; N], [f64; N])> = OnceLock::new();
    NODES.get_or_init(|| {
        let mut x = [0.0; N];
        let mut w = [0.0; N];
        for i in 0..N {
            // Newton on P_N from the Chebyshev guess
            let mut z = (std::f64::consts::PI * (i as f64 + 0.75) / (N as f64 + 0.5)).cos();
            let mut dp = 0.0;
            for _ in 0..100 {
                let (mut p0, mut p1) = (1.0, z);
                for k in 2..=N {
                    let p2 = ((2 * k - 1) as f64 * z * p1 - (k - 1) as f64 * p0) / k as f64;
                    p0 = p1;
                    p1 = p2;
                }
                dp = N as f64 * (z * p1 - p0) / (z * z - 1.0);
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
    })
}

/// `int_a^b f` with 16-point Gauss–Legendre on `panels` equal panels.
pub fn integrate(f: &dyn Fn(f64) -> f64, a: f64, b: f64, panels: usize) -> f64 {
    let (x, w) = nodes();
    let h = (b - a) / panels as f64;
    let mut s = 0.0;
    for p in 0..panels {
        let lo = a + p as f64 * h;
        let mid = lo + 0.5 * h;
        for i in 0..N {
            s += w[i] * f(mid + 0.5 * h * x[i]);
        }
    }
    0.5 * h * s
}

/// `int_a^b f` on geometric panels `[a, a+t], [a+t, a+2t], [a+2t, a+4t], ...` for integrands
/// that vary on the scale `t` near `a` and slowly further out.
pub fn integrate_geometric(f: &dyn Fn(f64) -> f64, a: f64, b: f64, t: f64) -> f64 {
    let mut s = integrate(f, a, (a + t).min(b), 1);
    let mut lo = a + t;
    let mut width = t;
    while lo < b {
        let hi = (lo + width).min(b);
        s += integrate(f, lo, hi, 1);
        lo = hi;
        width *= 2.0;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::{integrate, integrate_geometric};

    #[test]
    fn integrates_exactly_and_on_geometric_panels() {
        let p = integrate(&|x: f64| x.powi(7) - 3.0 * x, 0.0, 2.0, 1);
        assert!((p - (32.0 - 6.0)).abs() < 1e-12);
        let e = integrate_geometric(&|x: f64| 1.0 / (x * x), 1e-3, 1e4, 1e-3);
        assert!((e - (1e3 - 1e-4)).abs() < 1e-9 * 1e3);
    }
}
