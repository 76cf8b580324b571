//! References for one and two periodic axes, independent of the Ewald split of the fast path.
//!
//! - [`line_sum`] (1P): the image sum along the periodic axis, `sum_n G(d + n L e)` with the
//!   terms `n = -N..N` summed explicitly and the tail `|n| > N` by the Euler-Maclaurin formula
//!   (the integral by Gauss-Legendre panels in `u = 1/t`, the end corrections `f(N)/2`,
//!   `f'(N)/12` and `f'''(N)/720` by differences; the next one, `f^(5)(N)/30240`, is below
//!   `1e-13` relative for `N = 48`). Laplace and the Stokeslet
//!   sum the pair form `G(d + n L e) + G(d - n L e) - 2 G(n L e)`, which equals the symmetric
//!   image sum for neutral sources (the subtracted terms cancel over the sources) and converges
//!   like `n^-3`; the stresslet's terms decay like `n^-2` and are summed as they are (also
//!   within the combined kernel).
//! - [`planar_from_tall_box`] (2P): the classical triply periodic Ewald sum of a box made tall
//!   along the free axis, minus its zero mode (which the classical sum drops), plus the planar
//!   correction (Laplace `-(2 pi / V) sum_j q_j (z - z_j)^2`, Stokeslet `-(4 pi / V) sum_j f_j,par
//!   (z - z_j)^2`, stresslet `-(8 pi / V) sum_j (z - z_j) V_j` with `V_j = e_z (q_j . n_j) + q_jz
//!   n_j + n_jz q_j - 2 e_z q_jz n_jz`), up to terms `e^{-2 pi L_tall / L_p}`: the limit of the
//!   square truncations `|a|, |b| <= M` of the planar image sum.

use parki_core::quadrature::gauss_legendre;
use parki_core::{Domain, Output, Sources};
use rayon::prelude::{IndexedParallelIterator, IntoParallelRefIterator, ParallelIterator, ParallelSliceMut};

use crate::classical::ClassicalEwald;
use crate::direct::add_source;

/// `int_N^inf f(t) dt` of a line-sum term at displacement `|d| = rho L` from its source
/// (Gauss-Legendre, `gx`/`gw` on `[-1, 1]`). Each term of `f` is a power of `|d + t L e|` times
/// a polynomial in `t`: about `t = infinity` it is `t^-2` (stresslet) or `t^-3` (pair form)
/// times a power series in `u = 1/t` that converges for `|u| < 1 / rho`. Beyond `T = max(N, 4
/// rho)` the integral is taken in `u`, `int_0^{1/T} f(1/u) u^-2 du`, whose integrand's nearest
/// singularity lies at least 4x the interval's length away: two panels reach it to rounding.
/// Between `N` and `T` (pairs more than 12 periods apart, in boxes whose free sides are that
/// long) panels `[a, 2a]` in `t`. The 24 doubling panels in `t` that this replaced took 12x the
/// kernel evaluations for the same sums (test `tail_integral_matches_closed_forms`).
fn tail_integral(n: f64, rho: f64, gx: &[f64], gw: &[f64], mut f: impl FnMut(f64, &mut [f64; 4])) -> [f64; 4] {
    let mut tail = [0.0f64; 4];
    let mut panel = |a: f64, b: f64, in_u: bool| {
        for (&xg, &wg) in gx.iter().zip(gw) {
            let x = 0.5 * (a + b) + 0.5 * (b - a) * xg;
            let mut v = [0.0; 4];
            // t = 1/u, dt = -du / u^2
            let (t, jacobian) = if in_u { (1.0 / x, 1.0 / (x * x)) } else { (x, 1.0) };
            f(t, &mut v);
            (0..4).for_each(|c| tail[c] += 0.5 * (b - a) * wg * jacobian * v[c]);
        }
    };
    let switch = n.max(4.0 * rho);
    let mut a = n;
    while a < switch {
        let b = (2.0 * a).min(switch);
        panel(a, b, false);
        a = b;
    }
    let u = 1.0 / switch;
    panel(0.0, 0.5 * u, true);
    panel(0.5 * u, u, true);
    tail
}

fn add_kernel(output: Output, sources: &Sources<f64>, j: usize, r: [f64; 3], w: f64, acc: &mut [f64; 4]) {
    add_source(output, sources, j, r, w, acc, false);
}

/// The 1P image sum at `targets` of a box periodic along exactly one axis (see the module
/// documentation), with the Laplace field if `output` asks for it (the pair form's constant
/// subtraction has none). Laplace charges and Stokeslet forces must sum to zero.
pub fn line_sum(output: impl Into<Output>, domain: &Domain, sources: &Sources<f64>, targets: &[[f64; 3]]) -> Vec<f64> {
    let output = output.into();
    let per = domain.periodic();
    assert_eq!(domain.periodicity(), 1, "one periodic axis");
    let axis = (0..3).find(|&d| per[d]).unwrap_or(0);
    let l = domain.lengths()[axis];
    const N: i64 = 48;
    let (gx, gw) = gauss_legendre(16);
    let dim = output.dim();
    let mut out = vec![0.0; targets.len() * dim];
    out.par_chunks_mut(dim).zip(targets.par_iter()).for_each(|(u, x)| {
        let mut acc = [0.0f64; 4];
        for (j, y) in sources.positions.iter().enumerate() {
            let d = [x[0] - y[0], x[1] - y[1], x[2] - y[2]];
            let shifted = |t: f64| {
                let mut r = d;
                r[axis] += t * l;
                r
            };
            // f(t) of the pair form, for the tail
            let f = |t: f64, acc: &mut [f64; 4]| {
                add_kernel(output, sources, j, shifted(t), 1.0, acc);
                add_kernel(output, sources, j, shifted(-t), 1.0, acc);
                // the pair form's subtraction, for the charges and forces (they sum to zero)
                let mut r = [0.0; 3];
                r[axis] = t * l;
                add_source(output, sources, j, r, -2.0, acc, true);
            };
            add_kernel(output, sources, j, d, 1.0, &mut acc);
            // explicit terms n = 1..=N, summed from the smallest up
            let mut part = [0.0f64; 4];
            for n in (1..=N).rev() {
                f(n as f64, &mut part);
            }
            // Euler-Maclaurin: int_N^inf f - f(N)/2 - f'(N)/12 + f'''(N)/720 (derivatives by
            // differences of step 1/2); the integral as tail_integral documents
            let norm = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
            let tail = tail_integral(N as f64, norm / l, &gx, &gw, &f);
            let mut fn0 = [0.0; 4];
            f(N as f64, &mut fn0);
            let hh = 0.5;
            let (mut d1, mut d3) = ([0.0; 4], [0.0; 4]);
            // f' to O(h^4), f''' to O(h^2)
            for (k, w1, w3) in [(-2.0, 1.0, -1.0), (-1.0, -8.0, 2.0), (1.0, 8.0, -2.0), (2.0, -1.0, 1.0)] {
                let mut v = [0.0; 4];
                f(N as f64 + k * hh, &mut v);
                (0..4).for_each(|c| {
                    d1[c] += w1 * v[c] / (12.0 * hh);
                    d3[c] += w3 * v[c] / (2.0 * hh * hh * hh);
                });
            }
            for c in 0..4 {
                acc[c] += part[c] + tail[c] - 0.5 * fn0[c] - d1[c] / 12.0 + d3[c] / 720.0;
            }
        }
        u.copy_from_slice(&acc[..dim]);
    });
    out
}

/// The 2P sum at `targets` of a box periodic along exactly two axes, from the classical Ewald
/// sum of the box made `tall` times as long as its longest periodic side along the free axis
/// (see the module documentation), with the Laplace field if `output` asks for it (the
/// correction's field is `E_z = (4 pi / V) sum_j q_j (z - z_j)`). The box's free side must hold
/// the particles.
pub fn planar_from_tall_box(
    output: impl Into<Output>,
    domain: &Domain,
    sources: &Sources<f64>,
    targets: &[[f64; 3]],
    tall: f64,
) -> Vec<f64> {
    let per = domain.periodic();
    assert_eq!(domain.periodicity(), 2, "two periodic axes");
    let z = (0..3).find(|&d| !per[d]).unwrap_or(2);
    let mut lengths = domain.lengths();
    let lp = (0..3).filter(|&d| per[d]).map(|d| lengths[d]).fold(0.0, f64::max);
    lengths[z] = (tall * lp).max(3.0 * lengths[z]);
    let boxed = Domain::triply_periodic(lengths).expect("a tall box");
    let volume = boxed.volume();
    let output = output.into();
    let kernel = output.kernel;
    let mut out = ClassicalEwald::new(boxed, sources.len(), targets.len()).evaluate(output, sources, targets);
    let dim = output.dim();
    let pi = std::f64::consts::PI;
    out.par_chunks_mut(dim).zip(targets.par_iter()).for_each(|(u, x)| {
        for (j, y) in sources.positions.iter().enumerate() {
            let dz = x[z] - y[z];
            if kernel.needs_charges() {
                let q = sources.charges.expect("charges")[j];
                u[0] -= 2.0 * pi / volume * q * dz * dz;
                if output.field {
                    u[1 + z] += 4.0 * pi / volume * q * dz;
                }
            }
            if kernel.needs_forces() {
                let f = sources.forces.expect("forces")[j];
                for a in (0..3).filter(|&a| a != z) {
                    u[a] -= 4.0 * pi / volume * f[a] * dz * dz;
                }
            }
            if kernel.needs_dipoles() {
                let q = sources.dipoles.expect("dipoles")[j];
                let n = sources.normals.expect("normals")[j];
                let qn = q[0] * n[0] + q[1] * n[1] + q[2] * n[2];
                for a in 0..3 {
                    let ez = if a == z { 1.0 } else { 0.0 };
                    let v = ez * qn + q[z] * n[a] + n[z] * q[a] - 2.0 * ez * q[z] * n[z];
                    u[a] -= 8.0 * pi / volume * dz * v;
                }
            }
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use parki_core::quadrature::gauss_legendre;

    use super::tail_integral;

    /// `int_N^inf` of `1 / ((t - c)^2 + b^2)` (a `t^-2` tail) and of its power `3/2` (`t^-3`),
    /// whose singularities `t = c +- i b` lie at `|u| = 1 / rho`, `rho = |c + i b|`, as a term's
    /// at displacement `rho` periods (`c` within a period along the axis, `b` across it: the
    /// pair nearly on the axis, near, and far enough for the panels in `t`; two beyond a box).
    #[test]
    fn tail_integral_matches_closed_forms() {
        let (gx, gw) = gauss_legendre(16);
        let n = 48.0;
        for (c, b) in [(1.0, 0.5), (-1.0, 0.01), (0.2, 1.8), (0.5, 40.0), (-0.9, 300.0), (30.0, 40.0), (-200.0, 70.0)] {
            let rho = f64::hypot(c, b);
            let got = tail_integral(n, rho, &gx, &gw, |t, v| {
                let q = (t - c) * (t - c) + b * b;
                v[0] += 1.0 / q;
                v[1] += 1.0 / (q * q.sqrt());
            });
            // (pi/2 - atan(s / b)) / b and (1 - s / r) / b^2, written without their cancellations
            let (s, r) = (n - c, f64::hypot(n - c, b));
            let exact = if s > 0.0 {
                [(b / s).atan() / b, 1.0 / (r * (r + s))]
            } else {
                [(std::f64::consts::FRAC_PI_2 - (s / b).atan()) / b, (1.0 - s / r) / (b * b)]
            };
            for k in 0..2 {
                let e = (got[k] - exact[k]).abs() / exact[k].abs();
                assert!(e < 1e-13, "c {c} b {b} term {k}: {} against {} ({e:e})", got[k], exact[k]);
            }
        }
    }
}
