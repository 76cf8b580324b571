//! References for one and two periodic axes, independent of the Ewald split of the fast path.
//!
//! - [`line_sum`] (1P): the image sum along the periodic axis, `sum_n G(d + n L e)` with the
//!   terms `n = -N..N` summed explicitly and the tail `|n| > N` by the Euler-Maclaurin formula
//!   (the integral by Gauss-Legendre panels `[N 2^i, N 2^{i+1}]`, the end corrections `f(N)/2`,
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
            // differences of step 1/2)
            let mut tail = [0.0f64; 4];
            let mut a = N as f64;
            for _ in 0..24 {
                let b = 2.0 * a;
                for (&xg, &wg) in gx.iter().zip(&gw) {
                    let t = 0.5 * (a + b) + 0.5 * (b - a) * xg;
                    let mut v = [0.0; 4];
                    f(t, &mut v);
                    (0..4).for_each(|c| tail[c] += 0.5 * (b - a) * wg * v[c]);
                }
                a = b;
            }
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
