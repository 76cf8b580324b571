//! The classical Ewald reference against literature constants, against itself at another
//! splitting parameter, and the stresslet against derivatives of the Stokeslet and Laplace sums.

use parki_core::{Domain, Kernel, Sources};
use parki_reference::ClassicalEwald;

/// Simple cubic lattice of unit charges in a neutralising background, potential at a charge
/// (images only): -2.8372974794806196 / L (the Wigner / Madelung constant of the sc lattice).
const SC_CONSTANT: f64 = 2.837_297_479_480_619_6;
/// NaCl Madelung constant (per nearest-neighbour distance).
const NACL_MADELUNG: f64 = 1.747_564_594_633_182;

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64) / ((1u64 << 53) as f64)
    }
    fn vec(&mut self) -> [f64; 3] {
        [self.next() - 0.5, self.next() - 0.5, self.next() - 0.5]
    }
}

#[test]
fn laplace_simple_cubic_constant() {
    for l in [1.0, 2.5] {
        let d = Domain::triply_periodic([l; 3]).unwrap();
        let pos = [[0.3 * l, 0.7 * l, 0.1 * l]];
        let q = [1.0];
        for xi in [3.0 / l, 7.0 / l] {
            let u = ClassicalEwald::with_xi(d, xi).evaluate(Kernel::Laplace, &Sources::laplace(&pos, &q), &pos);
            assert!((u[0] + SC_CONSTANT / l).abs() < 1e-14, "L={l} xi={xi}: {}", u[0]);
        }
    }
}

#[test]
fn laplace_nacl_madelung() {
    let pos = [
        [0.0, 0.0, 0.0],
        [0.5, 0.5, 0.0],
        [0.5, 0.0, 0.5],
        [0.0, 0.5, 0.5],
        [0.5, 0.0, 0.0],
        [0.0, 0.5, 0.0],
        [0.0, 0.0, 0.5],
        [0.5, 0.5, 0.5],
    ];
    let q = [1.0, 1.0, 1.0, 1.0, -1.0, -1.0, -1.0, -1.0];
    let d = Domain::triply_periodic([1.0; 3]).unwrap();
    let u = ClassicalEwald::new(d, 8, 8).evaluate(Kernel::Laplace, &Sources::laplace(&pos, &q), &pos);
    for (i, ui) in u.iter().enumerate() {
        let expect = -q[i] * NACL_MADELUNG / 0.5;
        assert!((ui - expect).abs() < 1e-13, "ion {i}: {ui} vs {expect}");
    }
}

#[test]
fn stokeslet_hasimoto_constant() {
    // Hasimoto (1959) / Duenweg-Kremer (1993): a point force in a periodic cube (zero mean flow)
    // feels its images as u = -(4/3) 2.837297 f / L, i.e. mobility 1/(6 pi eta a) (1 - 2.837297 a/L).
    let l = 1.7;
    let d = Domain::triply_periodic([l; 3]).unwrap();
    let pos = [[0.2, 1.1, 0.4]];
    let f = [[0.3, -1.2, 0.7]];
    let u = ClassicalEwald::new(d, 1, 1).evaluate(Kernel::Stokeslet, &Sources::stokeslet(&pos, &f), &pos);
    for a in 0..3 {
        let expect = -4.0 / 3.0 * SC_CONSTANT / l * f[0][a];
        assert!((u[a] - expect).abs() < 1e-13, "component {a}: {} vs {expect}", u[a]);
    }
}

/// Positions, charges, forces, dipoles, normals.
type RandomProblem = (Vec<[f64; 3]>, Vec<f64>, Vec<[f64; 3]>, Vec<[f64; 3]>, Vec<[f64; 3]>);

fn random_problem(n: usize, seed: u64, l: [f64; 3]) -> RandomProblem {
    let mut g = Lcg(seed);
    let pos: Vec<[f64; 3]> = (0..n).map(|_| [g.next() * l[0], g.next() * l[1], g.next() * l[2]]).collect();
    let mut q: Vec<f64> = (0..n).map(|_| g.next() - 0.5).collect();
    let mean = q.iter().sum::<f64>() / n as f64;
    q.iter_mut().for_each(|v| *v -= mean);
    let f: Vec<[f64; 3]> = (0..n).map(|_| g.vec()).collect();
    let dq: Vec<[f64; 3]> = (0..n).map(|_| g.vec()).collect();
    let nn: Vec<[f64; 3]> = (0..n).map(|_| g.vec()).collect();
    (pos, q, f, dq, nn)
}

fn rel_diff(a: &[f64], b: &[f64]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den).sqrt()
}

#[test]
fn independent_of_the_splitting_parameter() {
    let l = [1.0, 1.3, 0.8];
    let d = Domain::triply_periodic(l).unwrap();
    let (pos, q, f, dq, nn) = random_problem(60, 7, l);
    let trg: Vec<[f64; 3]> = pos[..30].to_vec();
    for kernel in Kernel::ALL {
        let src =
            Sources { positions: &pos, charges: Some(&q), forces: Some(&f), dipoles: Some(&dq), normals: Some(&nn) };
        let a = ClassicalEwald::with_xi(d, 4.0).evaluate(kernel, &src, &trg);
        let b = ClassicalEwald::with_xi(d, 9.0).evaluate(kernel, &src, &trg);
        let e = rel_diff(&a, &b);
        assert!(e < 1e-13, "{}: xi-dependence {e:e}", kernel.name());
    }
    // non-neutral charges and non-zero net force: still independent of xi
    let q1: Vec<f64> = q.iter().map(|v| v + 0.3).collect();
    let f1: Vec<[f64; 3]> = f.iter().map(|v| [v[0] + 0.2, v[1], v[2] - 0.1]).collect();
    let src =
        Sources { positions: &pos, charges: Some(&q1), forces: Some(&f1), dipoles: Some(&dq), normals: Some(&nn) };
    for kernel in [Kernel::Laplace, Kernel::Stokeslet] {
        let a = ClassicalEwald::with_xi(d, 4.0).evaluate(kernel, &src, &trg);
        let b = ClassicalEwald::with_xi(d, 9.0).evaluate(kernel, &src, &trg);
        let e = rel_diff(&a, &b);
        assert!(e < 1e-13, "{} (non-neutral): xi-dependence {e:e}", kernel.name());
    }
}

#[test]
fn stresslet_is_the_stokeslet_and_pressure_derivative() {
    // T_ijk q_j n_k = n_k d_k (G q)_i + d_i (n . G q) - n_i (p . q), p = 2 r/r^3 = -2 grad(1/r),
    // for one source, by fourth-order central differences of the periodic Stokeslet and
    // Laplace sums (both with the zero mode dropped, so derivatives commute with periodisation).
    let l = [1.0, 1.2, 0.9];
    let d = Domain::triply_periodic(l).unwrap();
    let y = [0.41, 0.57, 0.33];
    let q = [0.3, -0.8, 0.5];
    let n = [0.6, 0.2, -0.7];
    let targets = vec![[0.1, 0.2, 0.3], [0.9, 1.1, 0.8], [0.5, 0.3, 0.6]];
    let ewald = ClassicalEwald::with_xi(d, 6.0);
    let stresslet = ewald.evaluate(Kernel::Stresslet, &Sources::stresslet(&[y], &[q], &[n]), &targets);
    let h = 1e-3;
    let stokeslet_at =
        |src: [f64; 3], x: &[[f64; 3]]| ewald.evaluate(Kernel::Stokeslet, &Sources::stokeslet(&[src], &[q]), x);
    let laplace_at = |x: &[[f64; 3]]| ewald.evaluate(Kernel::Laplace, &Sources::laplace(&[y], &[1.0]), x);
    let fd = |f: &dyn Fn(f64) -> Vec<f64>| -> Vec<f64> {
        let (a, b, c, e) = (f(2.0 * h), f(h), f(-h), f(-2.0 * h));
        (0..a.len()).map(|i| (-a[i] + 8.0 * b[i] - 8.0 * c[i] + e[i]) / (12.0 * h)).collect()
    };
    // term 1: n_k d/dr_k (G q) = d/de G(x - (y - e n)) q
    let t1 = fd(&|e| stokeslet_at([y[0] - e * n[0], y[1] - e * n[1], y[2] - e * n[2]], &targets));
    for (t, x) in targets.iter().enumerate() {
        let mut expect = [0.0; 3];
        for i in 0..3 {
            // term 2: d/dx_i (n . u_f(x))
            let shifted = |e: f64| {
                let mut xs = *x;
                xs[i] += e;
                let u = stokeslet_at(y, &[xs]);
                vec![n[0] * u[0] + n[1] * u[1] + n[2] * u[2]]
            };
            let t2 = fd(&shifted)[0];
            // term 3: -n_i p.q with p.q = -2 q . grad(phi)
            let mut grad = [0.0; 3];
            for (a, g) in grad.iter_mut().enumerate() {
                let s = |e: f64| {
                    let mut xs = *x;
                    xs[a] += e;
                    laplace_at(&[xs])
                };
                *g = fd(&s)[0];
            }
            let pq = -2.0 * (q[0] * grad[0] + q[1] * grad[1] + q[2] * grad[2]);
            expect[i] = t1[3 * t + i] + t2 - n[i] * pq;
        }
        for i in 0..3 {
            let got = stresslet[3 * t + i];
            assert!(
                (got - expect[i]).abs() < 1e-7 * (1.0 + expect[i].abs()),
                "target {t} comp {i}: {got} vs {}",
                expect[i]
            );
        }
    }
}

#[test]
fn direct_sum_skips_coincident_points() {
    let pos = [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]];
    let q = [2.0, 3.0];
    let u = parki_reference::direct::free_space_sum(Kernel::Laplace, &Sources::laplace(&pos, &q), &pos);
    assert_eq!(u, vec![3.0, 2.0]);
}
