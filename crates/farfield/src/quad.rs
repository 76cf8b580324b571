//! Gauss–Legendre quadrature on panels, for the error model.

use std::sync::OnceLock;

use parki_core::quadrature::gauss_legendre;

const N: usize = 16;

fn nodes() -> &'static (Vec<f64>, Vec<f64>) {
    static NODES: OnceLock<(Vec<f64>, Vec<f64>)> = OnceLock::new();
    NODES.get_or_init(|| gauss_legendre(N))
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
