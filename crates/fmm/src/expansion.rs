//! P2M, L2P and M2P: expansions formed from particles and evaluated at targets (seed 001, §3.2,
//! eq. (14), §3.4), all through the regular harmonics of [`crate::basis`].
//!
//! A box of edge `h` and centre `c` stores `a_n^m / h^n` (multipole) and `b_n^m h^n` (local):
//!
//! - P2M: `a_n^m / h^n += q 4 pi/(2n+1) |u|^n Y^_n^m(u^)` with `u = (x - c)/h`, that is
//!   `q p2m_n^m R~_n^m(u)`;
//! - L2P: `phi(y) = sum b_n^m h^-n |y - c|^n Y^_n^m = sum l2p_n^m (b_n^m h^n) R~_n^m(u)`,
//!   `u = (y - c)/h`, and `grad phi = (1/h) grad_u` by the sparse differentiation of
//!   [`crate::basis::add_gradient`];
//! - M2P: `phi(y) = (1/r) sum l2p_n^m (a_n^m / h^n) R~_n^m(h (y - c)/r^2)`, `r = |y - c|`
//!   (the Kelvin inversion `R~_n^m(h x/r^2) = c_n^m (h/r)^n Y^_n^m(x^)`).

use crate::basis::{add_gradient, regular, Scalings};

/// Adds the multipole expansion of the charges `q` at `x` to `out` (box centre `c`, edge `h`),
/// with `reg` as scratch (`p^2` values).
pub fn p2m(x: &[[f64; 3]], q: &[f64], c: [f64; 3], h: f64, s: &Scalings, out: &mut [f64], reg: &mut [f64]) {
    let p = s.p;
    let inv = 1.0 / h;
    for (xi, &qi) in x.iter().zip(q) {
        let u = [(xi[0] - c[0]) * inv, (xi[1] - c[1]) * inv, (xi[2] - c[2]) * inv];
        regular(u, p, reg);
        for ((o, &r), &w) in out[..p * p].iter_mut().zip(reg.iter()).zip(&s.p2m) {
            *o = (qi * w).mul_add(r, *o);
        }
    }
}

/// The local expansion `local` (box centre `c`, edge `h`) at `y`: the potential and, if
/// `grad` is given, its gradient added there. `d` and `reg` are scratch (`p^2` values each).
#[allow(clippy::too_many_arguments)]
pub fn l2p(
    local: &[f64],
    y: [f64; 3],
    c: [f64; 3],
    h: f64,
    s: &Scalings,
    grad: Option<&mut [f64; 3]>,
    d: &mut [f64],
    reg: &mut [f64],
) -> f64 {
    let p = s.p;
    let inv = 1.0 / h;
    let u = [(y[0] - c[0]) * inv, (y[1] - c[1]) * inv, (y[2] - c[2]) * inv];
    regular(u, p, reg);
    let mut phi = 0.0;
    for i in 0..p * p {
        d[i] = local[i] * s.l2p[i];
        phi = d[i].mul_add(reg[i], phi);
    }
    if let Some(g) = grad {
        let mut gu = [0.0; 3];
        add_gradient(&d[..p * p], reg, p, &mut gu);
        for a in 0..3 {
            g[a] = gu[a].mul_add(inv, g[a]);
        }
    }
    phi
}

/// The multipole expansion `multipole` (box centre `c`, edge `h`) at `y`, outside the box's
/// sphere; `reg` is scratch (`p^2` values).
pub fn m2p(multipole: &[f64], y: [f64; 3], c: [f64; 3], h: f64, s: &Scalings, reg: &mut [f64]) -> f64 {
    let p = s.p;
    let x = [y[0] - c[0], y[1] - c[1], y[2] - c[2]];
    let r2 = x[0] * x[0] + x[1] * x[1] + x[2] * x[2];
    let f = h / r2;
    regular([x[0] * f, x[1] * f, x[2] * f], p, reg);
    let mut phi = 0.0;
    for i in 0..p * p {
        phi = (multipole[i] * s.l2p[i]).mul_add(reg[i], phi);
    }
    phi / r2.sqrt()
}
