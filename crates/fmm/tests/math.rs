//! The digest's §8.1 unit tests: the recursion against the closed form, P2M and L2P against
//! `1/|r - r0|`, the gradient, the rotations, and every translation against direct evaluation
//! with an error below `C eta^p`.

use parki_core::isa::Isa;
use parki_fmm::basis::{add_gradient, gradient_coefficients, idx, regular, regular_lanes, Scalings, LANES};
use parki_fmm::expansion::{l2p, l2p_box, m2p, p2m, p2m_box, LaneScratch};
use parki_fmm::rotation::{angle_table, rot_y, rot_z, rotate_z, rotation_by_quadrature, YRotation};
use parki_fmm::translate::{Geometry, LaneScratch8, Op, Operators, Scratch};

/// Associated Legendre `P^_n^k(x)` without the Condon-Shortley phase, for `n < p`.
fn legendre(x: f64, p: usize) -> Vec<Vec<f64>> {
    let s = (1.0 - x * x).max(0.0).sqrt();
    let mut t = vec![vec![0.0; p]; p];
    t[0][0] = 1.0;
    for k in 1..p {
        t[k][k] = t[k - 1][k - 1] * (2 * k - 1) as f64 * s;
    }
    for k in 0..p {
        if k + 1 < p {
            t[k + 1][k] = (2 * k + 1) as f64 * x * t[k][k];
        }
        for n in k + 2..p {
            t[n][k] = ((2 * n - 1) as f64 * x * t[n - 1][k] - (n + k - 1) as f64 * t[n - 2][k]) / (n - k) as f64;
        }
    }
    t
}

fn closed_form(v: [f64; 3], p: usize) -> Vec<f64> {
    let r = (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
    let phi = v[1].atan2(v[0]);
    let leg = legendre(v[2] / r, p);
    let fact = |n: usize| (2..=n).fold(1.0f64, |a, i| a * i as f64);
    let mut out = vec![0.0; p * p];
    for n in 0..p {
        let sign = if n % 2 == 1 { -1.0 } else { 1.0 };
        for k in 0..=n {
            let base = sign * r.powi(n as i32) * leg[n][k] / fact(n + k);
            out[idx(n, k as isize)] = base * (k as f64 * phi).cos();
            if k > 0 {
                out[idx(n, -(k as isize))] = -base * (k as f64 * phi).sin();
            }
        }
    }
    out
}

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    fn point(&mut self, c: [f64; 3], h: f64) -> [f64; 3] {
        [c[0] + h * (self.next() - 0.5), c[1] + h * (self.next() - 0.5), c[2] + h * (self.next() - 0.5)]
    }
}

#[test]
fn recursion_matches_closed_form() {
    let p = 30;
    let mut rng = Lcg(1);
    let mut reg = vec![0.0; p * p];
    for _ in 0..50 {
        let v = [rng.next() - 0.5, rng.next() - 0.5, rng.next() - 0.5];
        regular(v, p, &mut reg);
        let c = closed_form(v, p);
        for n in 0..p {
            // Compare against the degree's largest magnitude (cancellation in the closed form).
            let scale = (0..2 * n + 1).map(|j| c[n * n + j].abs()).fold(0.0, f64::max);
            for j in 0..2 * n + 1 {
                let e = (reg[n * n + j] - c[n * n + j]).abs() / scale;
                assert!(e < 1e-12, "n {n} j {j}: {} vs {} ({e:e})", reg[n * n + j], c[n * n + j]);
            }
        }
    }
}

#[test]
fn gradient_matches_finite_differences() {
    let p = 12;
    let mut rng = Lcg(2);
    let d: Vec<f64> = (0..p * p).map(|_| rng.next() - 0.5).collect();
    let f = |v: [f64; 3]| {
        let mut reg = vec![0.0; p * p];
        regular(v, p, &mut reg);
        reg.iter().zip(&d).map(|(a, b)| a * b).sum::<f64>()
    };
    for _ in 0..10 {
        let v = [rng.next() - 0.5, rng.next() - 0.5, rng.next() - 0.5];
        let mut reg = vec![0.0; p * p];
        regular(v, p, &mut reg);
        let mut g = [0.0; 3];
        add_gradient(&d, &reg, p, &mut g);
        let hs = 1e-5;
        for a in 0..3 {
            let (mut vp, mut vm) = (v, v);
            vp[a] += hs;
            vm[a] -= hs;
            let fd = (f(vp) - f(vm)) / (2.0 * hs);
            assert!((fd - g[a]).abs() < 1e-8 * (1.0 + fd.abs()), "axis {a}: {fd} vs {}", g[a]);
        }
    }
}

#[test]
fn rotations_are_orthogonal_and_agree() {
    let p = 16;
    let s = Scalings::new(p);
    // rotate_z against the quadrature matrix of R_z.
    let g = 0.7;
    let wz = rotation_by_quadrature(&rot_z(g), &s);
    let mut cs = vec![(0.0, 0.0); p];
    angle_table(g, p, &mut cs);
    let mut rng = Lcg(3);
    let v: Vec<f64> = (0..p * p).map(|_| rng.next() - 0.5).collect();
    for transpose in [false, true] {
        let mut w = v.clone();
        rotate_z(&mut w, p, &cs, transpose);
        for n in 0..p {
            let d = 2 * n + 1;
            for i in 0..d {
                let e: f64 =
                    (0..d).map(|j| if transpose { wz[n][j * d + i] } else { wz[n][i * d + j] } * v[n * n + j]).sum();
                assert!((e - w[n * n + i]).abs() < 1e-12, "z rotation n {n} i {i}: {e} vs {}", w[n * n + i]);
            }
        }
    }
    // YRotation against the quadrature matrix of R_y, and orthogonality.
    let ops = Operators::new(p);
    let b = 1.1;
    let wy = rotation_by_quadrature(&rot_y(-b), &s);
    let yr = ops.y_rotation(b);
    let mut tmp = vec![0.0; 2 * p + 2];
    for transpose in [false, true] {
        let mut w = v.clone();
        yr.apply(&mut w, p, transpose, &mut tmp);
        for n in 0..p {
            let d = 2 * n + 1;
            for i in 0..d {
                let e: f64 =
                    (0..d).map(|j| if transpose { wy[n][j * d + i] } else { wy[n][i * d + j] } * v[n * n + j]).sum();
                assert!((e - w[n * n + i]).abs() < 1e-11, "y rotation n {n} i {i}: {e} vs {}", w[n * n + i]);
            }
            for i in 0..d {
                for j in 0..d {
                    let dot: f64 = (0..d).map(|k| wy[n][i * d + k] * wy[n][j * d + k]).sum();
                    let want = if i == j { 1.0 } else { 0.0 };
                    assert!((dot - want).abs() < 1e-12, "W_{n} not orthogonal: {dot}");
                }
            }
        }
    }
}

/// The direct potential of `(x, q)` at `y`.
fn direct(x: &[[f64; 3]], q: &[f64], y: [f64; 3]) -> f64 {
    x.iter()
        .zip(q)
        .map(|(xi, qi)| qi / ((xi[0] - y[0]).powi(2) + (xi[1] - y[1]).powi(2) + (xi[2] - y[2]).powi(2)).sqrt())
        .sum()
}

fn direct_grad(x: &[[f64; 3]], q: &[f64], y: [f64; 3]) -> [f64; 3] {
    let mut g = [0.0; 3];
    for (xi, qi) in x.iter().zip(q) {
        let d = [y[0] - xi[0], y[1] - xi[1], y[2] - xi[2]];
        let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
        let f = -qi / (r2 * r2.sqrt());
        for a in 0..3 {
            g[a] += f * d[a];
        }
    }
    g
}

fn geometry<'a>(yr: &'a YRotation, t: [f64; 3], h_in: f64, h_out: f64) -> Geometry<'a> {
    let tn = (t[0] * t[0] + t[1] * t[1] + t[2] * t[2]).sqrt();
    let rho = (t[0] * t[0] + t[1] * t[1]).sqrt();
    let az = if rho > 0.0 { (t[0] / rho, t[1] / rho) } else { (1.0, 0.0) };
    Geometry { yrot: yr, azimuth: az, t: tn, h_in, h_out }
}

fn polar(t: [f64; 3]) -> f64 {
    let tn = (t[0] * t[0] + t[1] * t[1] + t[2] * t[2]).sqrt();
    (t[2] / tn).clamp(-1.0, 1.0).acos()
}

#[test]
fn p2m_m2p_and_every_translation_against_direct_sums() {
    for p in [4usize, 8, 12, 16, 24] {
        let ops = Operators::new(p);
        let s = &ops.scalings;
        let mut rng = Lcg(p as u64 + 10);
        let mut reg = vec![0.0; p * p];
        let mut dd = vec![0.0; p * p];
        let mut scratch = Scratch::new(p);
        // Sources in a child box of edge 1 at cs; its parent of edge 2 at cp.
        let hc = 1.0;
        let cs = [0.3, -0.2, 0.1];
        let off = [0.5, -0.5, 0.5];
        let cp = [cs[0] + off[0], cs[1] + off[1], cs[2] + off[2]];
        let x: Vec<[f64; 3]> = (0..40).map(|_| rng.point(cs, hc)).collect();
        let q: Vec<f64> = (0..40).map(|_| rng.next() - 0.5).collect();
        let mut mc = vec![0.0; p * p];
        p2m(&x, &q, cs, hc, s, &mut mc, &mut reg);
        // M2P at a well separated point: error below C eta^p with eta = R1/|y - c|.
        let y = [cs[0] + 2.0, cs[1] + 0.7, cs[2] - 1.3];
        let ex = direct(&x, &q, y);
        let e = (m2p(&mc, y, cs, hc, s, &mut reg) - ex).abs() / ex.abs();
        let eta = (0.75f64).sqrt() / 2.51f64;
        assert!(e < 20.0 * eta.powi(p as i32), "P2M/M2P p {p}: {e:e}");
        // M2M to the parent, then M2P from the parent.
        let tpc = [cp[0] - cs[0], cp[1] - cs[1], cp[2] - cs[2]];
        let yr = ops.y_rotation(polar(tpc));
        let mut mp = vec![0.0; p * p];
        ops.translate(Op::M2M, &geometry(&yr, tpc, hc, 2.0 * hc), p, &mc, &mut mp, &mut scratch);
        let yfar = [cp[0] + 5.0, cp[1] - 3.0, cp[2] + 2.0];
        let exf = direct(&x, &q, yfar);
        let ef = (m2p(&mp, yfar, cp, 2.0, s, &mut reg) - exf).abs() / exf.abs();
        let eta_p = 3f64.sqrt() / (25.0f64 + 9.0 + 4.0).sqrt();
        assert!(ef < 20.0 * eta_p.powi(p as i32), "M2M p {p}: {ef:e}");
        // M2L to a target box of edge 1 at distance 2 (the worst case of the stencil, eta*),
        // along a generic direction, then L2P with the gradient.
        for (ti, t) in [[2.0, 0.0, 0.0], [0.0, 0.0, -2.0], [2.0, 2.0, 1.0], [-3.0, 1.0, 2.0], [0.0, 2.0, 2.0]]
            .into_iter()
            .enumerate()
        {
            let ct = [cs[0] + t[0], cs[1] + t[1], cs[2] + t[2]];
            let yr = ops.y_rotation(polar(t));
            let mut loc = vec![0.0; p * p];
            ops.translate(Op::M2L, &geometry(&yr, t, hc, hc), p, &mc, &mut loc, &mut scratch);
            let tn = (t[0] * t[0] + t[1] * t[1] + t[2] * t[2]).sqrt();
            let r = 0.75f64.sqrt();
            let eta = r / (tn - r);
            let mut worst: f64 = 0.0;
            for _ in 0..20 {
                let yt = rng.point(ct, hc);
                let mut g = [0.0; 3];
                let phi = l2p(&loc, yt, ct, hc, s, Some(&mut g), &mut dd, &mut reg);
                let ex = direct(&x, &q, yt);
                let eg = direct_grad(&x, &q, yt);
                let gn = (eg[0] * eg[0] + eg[1] * eg[1] + eg[2] * eg[2]).sqrt();
                worst = worst.max((phi - ex).abs() / ex.abs().max(1e-3));
                let ge = ((g[0] - eg[0]).powi(2) + (g[1] - eg[1]).powi(2) + (g[2] - eg[2]).powi(2)).sqrt() / gn;
                worst = worst.max(ge / (p as f64));
            }
            eprintln!("p {p} t{ti}: {worst:.3e} eta^p {:.3e}", eta.powi(p as i32));
            assert!(
                worst < 30.0 * eta.powi(p as i32),
                "M2L p {p} t{ti} {t:?}: {worst:e} vs eta^p {:e}",
                eta.powi(p as i32)
            );
            // L2L to a child of the target box, evaluated there.
            let tc = [-0.25, 0.25, 0.25];
            let cc = [ct[0] + tc[0], ct[1] + tc[1], ct[2] + tc[2]];
            let yr2 = ops.y_rotation(polar(tc));
            let mut lc = vec![0.0; p * p];
            ops.translate(Op::L2L, &geometry(&yr2, tc, hc, 0.5 * hc), p, &loc, &mut lc, &mut scratch);
            for _ in 0..10 {
                let yt = rng.point(cc, 0.5);
                let a = l2p(&lc, yt, cc, 0.5, s, None, &mut dd, &mut reg);
                let b = l2p(&loc, yt, ct, hc, s, None, &mut dd, &mut reg);
                assert!((a - b).abs() < 1e-12 * b.abs().max(1.0), "L2L p {p}: {a} vs {b}");
            }
        }
    }
}

#[test]
fn vectorised_p2m_and_l2p_equal_the_scalar_ones() {
    let p = 14;
    let s = Scalings::new(p);
    let mut rng = Lcg(5);
    let c = [0.1, 0.2, 0.3];
    let x: Vec<[f64; 3]> = (0..21).map(|_| rng.point(c, 1.0)).collect();
    let q: Vec<f64> = (0..21).map(|_| rng.next() - 0.5).collect();
    let mut reg = vec![0.0; p * p];
    let mut a = vec![0.0; p * p];
    p2m(&x, &q, c, 1.0, &s, &mut a, &mut reg);
    let mut w = LaneScratch::new(p);
    for isa in [Isa::detect(), Isa::Scalar] {
        let mut b = vec![0.0; p * p];
        p2m_box(isa, &x, &q, c, 1.0, &s, &mut b, &mut w);
        for i in 0..p * p {
            assert!((a[i] - b[i]).abs() < 1e-13 * a[i].abs().max(1e-3), "P2M {isa:?} {i}");
        }
        let local: Vec<f64> = (0..p * p).map(|_| rng.next() - 0.5).collect();
        let mut pot = vec![0.0; x.len()];
        let mut grad = vec![[0.0; 3]; x.len()];
        l2p_box(isa, &local, &x, c, 1.0, &s, &mut pot, Some(&mut grad), &mut w);
        let mut d = vec![0.0; p * p];
        for (j, y) in x.iter().enumerate() {
            let mut g = [0.0; 3];
            let phi = l2p(&local, *y, c, 1.0, &s, Some(&mut g), &mut d, &mut reg);
            assert!((phi - pot[j]).abs() < 1e-12 * phi.abs().max(1.0), "L2P {isa:?}");
            for k in 0..3 {
                assert!((g[k] - grad[j][k]).abs() < 1e-11 * g[k].abs().max(1.0), "L2P gradient {isa:?}");
            }
        }
    }
    // The gradient coefficients reproduce the sparse rules.
    let dd: Vec<f64> = (0..p * p).map(|_| rng.next() - 0.5).collect();
    let mut gc: [Vec<f64>; 3] = Default::default();
    gradient_coefficients(&dd, p, &mut gc);
    let v = [0.2, -0.3, 0.1];
    regular(v, p, &mut reg);
    let mut g = [0.0; 3];
    add_gradient(&dd, &reg, p, &mut g);
    for k in 0..3 {
        let e: f64 = gc[k].iter().zip(&reg).map(|(a, b)| a * b).sum();
        assert!((e - g[k]).abs() < 1e-13 * g[k].abs().max(1.0));
    }
    let mut lanes = vec![[0.0; LANES]; p * p];
    regular_lanes(&[[v[0]; LANES], [v[1]; LANES], [v[2]; LANES]], p, &mut lanes);
    assert!(lanes.iter().zip(&reg).all(|(a, b)| a.iter().all(|x| x == b)));
}

#[test]
fn eight_lane_translations_equal_the_single_ones() {
    for p in [5usize, 13, 30] {
        let ops = Operators::new(p);
        let mut rng = Lcg(40 + p as u64);
        let t = [2.0, -1.0, 3.0];
        let yr = ops.y_rotation(polar(t));
        let inputs: Vec<Vec<f64>> = (0..8).map(|_| (0..p * p).map(|_| rng.next() - 0.5).collect()).collect();
        let mut lanes = LaneScratch8::new(p);
        for op in [Op::M2L, Op::M2M, Op::L2L] {
            for q in [p, p - 2] {
                let g = geometry(&yr, t, 1.0, if op == Op::M2M { 2.0 } else { 0.5 });
                for (i, c) in lanes.input.iter_mut().enumerate() {
                    for l in 0..8 {
                        c[l] = inputs[l][i];
                    }
                }
                ops.translate_lanes(op, &g, q, &mut lanes);
                let mut scratch = Scratch::new(p);
                for (l, input) in inputs.iter().enumerate() {
                    let mut out = vec![0.0; p * p];
                    ops.translate(op, &g, q, input, &mut out, &mut scratch);
                    for (i, (&o, y)) in out[..q * q].iter().zip(&lanes.output).enumerate() {
                        let d = (o - y[l]).abs();
                        assert!(d <= 1e-13 * o.abs().max(1e-3), "{op:?} p {p} q {q} lane {l} coef {i}: {d:e}");
                    }
                }
            }
        }
    }
}
