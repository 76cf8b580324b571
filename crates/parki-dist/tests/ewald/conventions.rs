//! Issue 11's conventions for one and two periodic axes, asserted on the Ewald results
//! themselves (the image-sum references of tests/ewald/free_space.rs encode them implicitly): every
//! image sum is the limit of symmetric truncations, with no additive constant, so the mean over
//! the periodic directions is the free-space field of the averaged sources.
//!
//! - 2P (periodic x, y; area `A`): at height `z` the in-plane mean of the Laplace potential is
//!   `-(2 pi / A) sum_j q_j |z - z_j|` and of its field `E_z = (2 pi / A) sum_j q_j sign(z -
//!   z_j)`, `E_x = E_y = 0`; of the Stokeslet `-(4 pi / A) sum_j f_j,par |z - z_j|` with no
//!   normal component; of the stresslet `-(4 pi / A) sum_j V_j sign(z - z_j)`, `V_j = e_z (q_j .
//!   n_j) + q_jz n_j + n_jz q_j - 2 e_z q_jz n_jz` (the plane integrals of `1/r`, `S` and `T`,
//!   derived in docs/design.md, "Free directions: conventions"). For neutral charges and forces
//!   the field and the velocity tend to constants away from the sheet: nothing grows.
//! - 1P (periodic x, period `L`): the mean along the axis at `rho = (y, z)` is the 2-D field of
//!   the line-averaged sources: Laplace `-(2/L) sum_j q_j ln|rho - rho_j|` (field `(2/L) sum_j
//!   q_j (rho - rho_j)/|rho - rho_j|^2`); Stokeslet `(2/L) sum_j [-ln|rho_j'| I + rho_j' rho_j'^T
//!   / |rho_j'|^2] f_j,perp` across and `-(4/L) sum_j ln|rho_j'| f_j,x` along the axis (`rho_j' =
//!   rho - rho_j`); stresslet `(1/L) sum_j T2_ikl q_jk n_jl` with `T2_abc = -8 rho_a rho_b rho_c
//!   / rho^4` across, `T2 = -4 rho_a / rho^2` with two indices along the axis, 0 otherwise.
//!
//! The means are taken over a uniform grid of targets on a plane (a line) at least 0.1 from
//! every source: the trapezoidal rule of a smooth periodic function, exact far below the
//! tolerance.

use std::f64::consts::PI;

use crate::common::Data;
use parki_core::{Domain, Kernel};
use parki_dist::{EwaldOptions, EwaldSolver, Targets};
use parki_reference::generate::Distribution;

const TOL: f64 = 1e-10;
const LENGTHS: [f64; 3] = [1.0, 1.2, 0.9];

/// The Ewald values at `targets` (`dim` per target, the field after the potential).
fn ewald(domain: Domain, kernel: Kernel, field: bool, data: &Data, targets: &[[f64; 3]]) -> Vec<f64> {
    let opts = EwaldOptions::new(kernel, domain, TOL).field(field);
    let dim = kernel.output_dim() + if field { 3 } else { 0 };
    let mut s = EwaldSolver::<f64>::new(&opts, data.pos.len(), targets.len()).unwrap();
    let mut u = vec![0.0; targets.len() * dim];
    s.evaluate(&data.sources(), Targets::Points(targets), &mut u).unwrap();
    u
}

/// Mean over each group of `per` consecutive targets: `dim` values per group.
fn means(u: &[f64], dim: usize, per: usize) -> Vec<Vec<f64>> {
    u.chunks(per * dim)
        .map(|g| (0..dim).map(|c| g.iter().skip(c).step_by(dim).sum::<f64>() / per as f64).collect())
        .collect()
}

/// Largest difference of the means from `expected`, relative to the rms of the values.
fn check(label: &str, u: &[f64], got: &[Vec<f64>], expected: &[Vec<f64>]) {
    let scale = (u.iter().map(|v| v * v).sum::<f64>() / u.len() as f64).sqrt();
    let mut worst: f64 = 0.0;
    for (g, e) in got.iter().zip(expected) {
        for (a, b) in g.iter().zip(e) {
            worst = worst.max((a - b).abs() / scale);
        }
    }
    println!("{label}: mean against the convention {worst:.1e} of the rms value (tol {TOL:.0e})");
    println!("  means {got:.6?}\n  expected {expected:.6?}");
    assert!(worst <= 10.0 * TOL, "{label}: {worst:e}");
}

/// Sources uniform in x, y (and along the periodic axes) with coordinates `lo..hi` along the
/// free axes `free`, two layers along z for 2P.
fn sources(domain: &Domain, free: &[(usize, f64, f64)], seed: u64) -> Data {
    let mut data = Data::new(domain, Distribution::Uniform, 200, seed);
    for (i, p) in data.pos.iter_mut().enumerate() {
        for &(d, lo, hi) in free {
            let t = p[d] / LENGTHS[d];
            p[d] = lo + (hi - lo) * t;
        }
        // 2P: every other source in the upper layer
        if free.len() == 1 && i % 2 == 1 {
            p[2] += 0.35;
        }
    }
    data
}

#[test]
fn two_periodic_axes_have_no_constant() {
    let domain = Domain::new(LENGTHS, [true, true, false]).unwrap();
    // layers z in [0.25, 0.4] and [0.6, 0.75]; planes below, between and above them
    let data = sources(&domain, &[(2, 0.25, 0.4)], 21);
    let planes = [0.05, 0.5, 0.88];
    let (nx, ny) = (64, 64);
    let mut targets = Vec::new();
    for &z in &planes {
        for j in 0..ny {
            for i in 0..nx {
                targets.push([i as f64 * LENGTHS[0] / nx as f64, j as f64 * LENGTHS[1] / ny as f64, z]);
            }
        }
    }
    let area = LENGTHS[0] * LENGTHS[1];
    let per = nx * ny;
    let sign = |x: f64| if x > 0.0 { 1.0 } else { -1.0 };
    let zs: Vec<f64> = data.pos.iter().map(|p| p[2]).collect();

    let u = ewald(domain, Kernel::Laplace, true, &data, &targets);
    let expected: Vec<Vec<f64>> = planes
        .iter()
        .map(|&z| {
            let u: f64 = zs.iter().zip(&data.q).map(|(zj, q)| q * (z - zj).abs()).sum::<f64>() * -2.0 * PI / area;
            let ez: f64 = zs.iter().zip(&data.q).map(|(zj, q)| q * sign(z - zj)).sum::<f64>() * 2.0 * PI / area;
            vec![u, 0.0, 0.0, ez]
        })
        .collect();
    check("2P laplace and field", &u, &means(&u, 4, per), &expected);

    let u = ewald(domain, Kernel::Stokeslet, false, &data, &targets);
    let expected: Vec<Vec<f64>> = planes
        .iter()
        .map(|&z| {
            let mut v = vec![0.0; 3];
            for (zj, f) in zs.iter().zip(&data.f) {
                for a in 0..2 {
                    v[a] -= 4.0 * PI / area * f[a] * (z - zj).abs();
                }
            }
            v
        })
        .collect();
    check("2P stokeslet", &u, &means(&u, 3, per), &expected);

    let u = ewald(domain, Kernel::Stresslet, false, &data, &targets);
    let expected: Vec<Vec<f64>> = planes
        .iter()
        .map(|&z| {
            let mut v = vec![0.0; 3];
            for ((zj, q), n) in zs.iter().zip(&data.d).zip(&data.n) {
                let qn = q[0] * n[0] + q[1] * n[1] + q[2] * n[2];
                let vj = [q[2] * n[0] + n[2] * q[0], q[2] * n[1] + n[2] * q[1], qn];
                for a in 0..3 {
                    v[a] -= 4.0 * PI / area * vj[a] * sign(z - zj);
                }
            }
            v
        })
        .collect();
    check("2P stresslet", &u, &means(&u, 3, per), &expected);
}

#[test]
fn one_periodic_axis_has_no_constant() {
    let domain = Domain::new(LENGTHS, [true, false, false]).unwrap();
    let data = sources(&domain, &[(1, 0.2, 0.5), (2, 0.2, 0.45)], 22);
    let lines = [[1.0, 0.8], [0.1, 0.8], [0.9, 0.1]];
    let nx = 64;
    let mut targets = Vec::new();
    for l in &lines {
        for i in 0..nx {
            targets.push([i as f64 * LENGTHS[0] / nx as f64, l[0], l[1]]);
        }
    }
    let len = LENGTHS[0];
    let rho = |l: &[f64; 2], p: &[f64; 3]| [l[0] - p[1], l[1] - p[2]];

    let u = ewald(domain, Kernel::Laplace, true, &data, &targets);
    let expected: Vec<Vec<f64>> = lines
        .iter()
        .map(|l| {
            let mut v = vec![0.0; 4];
            for (p, q) in data.pos.iter().zip(&data.q) {
                let r = rho(l, p);
                let r2 = r[0] * r[0] + r[1] * r[1];
                v[0] -= 2.0 / len * q * 0.5 * r2.ln();
                v[2] += 2.0 / len * q * r[0] / r2;
                v[3] += 2.0 / len * q * r[1] / r2;
            }
            v
        })
        .collect();
    check("1P laplace and field", &u, &means(&u, 4, nx), &expected);

    let u = ewald(domain, Kernel::Stokeslet, false, &data, &targets);
    let expected: Vec<Vec<f64>> = lines
        .iter()
        .map(|l| {
            let mut v = vec![0.0; 3];
            for (p, f) in data.pos.iter().zip(&data.f) {
                let r = rho(l, p);
                let r2 = r[0] * r[0] + r[1] * r[1];
                let ln = 0.5 * r2.ln();
                v[0] -= 4.0 / len * ln * f[0];
                let rf = r[0] * f[1] + r[1] * f[2];
                for a in 0..2 {
                    v[1 + a] += 2.0 / len * (-ln * f[1 + a] + r[a] * rf / r2);
                }
            }
            v
        })
        .collect();
    check("1P stokeslet", &u, &means(&u, 3, nx), &expected);

    let u = ewald(domain, Kernel::Stresslet, false, &data, &targets);
    let expected: Vec<Vec<f64>> = lines
        .iter()
        .map(|l| {
            let mut v = vec![0.0; 3];
            for ((p, q), n) in data.pos.iter().zip(&data.d).zip(&data.n) {
                let r = rho(l, p);
                let rv = [0.0, r[0], r[1]];
                let r2 = r[0] * r[0] + r[1] * r[1];
                // T2_ikl: every index across (1, 2), or two along the axis (0) and one across
                let t2 = |i: usize, k: usize, m: usize| -> f64 {
                    let along = [i, k, m].iter().filter(|&&a| a == 0).count();
                    match along {
                        0 => -8.0 * rv[i] * rv[k] * rv[m] / (r2 * r2),
                        2 => -4.0 * rv[i + k + m] / r2,
                        _ => 0.0,
                    }
                };
                for (i, vi) in v.iter_mut().enumerate() {
                    for (k, qk) in q.iter().enumerate() {
                        for (m, nm) in n.iter().enumerate() {
                            *vi += t2(i, k, m) * qk * nm / len;
                        }
                    }
                }
            }
            v
        })
        .collect();
    check("1P stresslet", &u, &means(&u, 3, nx), &expected);
}
