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

/// Sources `n` per cell of `cell`, replicated `copies[d]` times along each axis: the same
/// periodic system in the box `cell * copies`.
fn replicated(cell: [f64; 3], copies: [usize; 3], n: usize) -> (RandomProblem, RandomProblem) {
    let mut one = random_problem(n, 21, cell);
    // positions on a grid of 2^-10, so that the copies' positions are exact
    one.0.iter_mut().for_each(|p| p.iter_mut().for_each(|x| *x = (*x * 1024.0).floor() / 1024.0));
    let (pos, q, f, dq, nn) = &one;
    let mut many: RandomProblem = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for a in 0..copies[0] {
        for b in 0..copies[1] {
            for c in 0..copies[2] {
                let shift = [a as f64 * cell[0], b as f64 * cell[1], c as f64 * cell[2]];
                for j in 0..n {
                    many.0.push([0, 1, 2].map(|d| pos[j][d] + shift[d]));
                    many.1.push(q[j]);
                    many.2.push(f[j]);
                    many.3.push(dq[j]);
                    many.4.push(nn[j]);
                }
            }
        }
    }
    (one, many)
}

/// The bound on the work per source-target pair of a reference sum in an elongated box.
const WORK: f64 = 2000.0;

#[test]
fn elongated_boxes_cost_in_proportion_and_match_the_cell() {
    // A needle and a plate: 300 and 900 copies of a cell of 2 particles. The sum in the long
    // box equals the sum in the cell (the same periodic system), computed with the cell's own
    // splitting. The work (counted terms, in Fourier-term units) must stay within WORK per
    // source-target pair: a splitting chosen for a cube of the short side (xi = 6.5 / (3 L_min),
    // the previous choice) takes 15 600 per pair on the needle. The
    // needle's longest waves weigh the structure factors' rounding by L_z / (pi L_x L_y) ~ 70,
    // hence 1e-12 rather than 1e-14.
    let cell = [1.0, 1.25, 0.75];
    let targets = [[0.3, 0.5, 0.7], [0.9, 0.1, 0.2], [0.5, 1.1, 0.05], [0.01, 0.6, 0.45]];
    let per_pair_bound = WORK;
    for copies in [[1, 1, 300], [30, 30, 1]] {
        let lengths = [0, 1, 2].map(|d| cell[d] * copies[d] as f64);
        let (one, many) = replicated(cell, copies, 2);
        let long = Domain::triply_periodic(lengths).unwrap();
        let ns = many.0.len();
        let ewald = ClassicalEwald::new(long, ns, targets.len());
        for kernel in [Kernel::Laplace, Kernel::Stokes] {
            let src = |p: &RandomProblem| -> Vec<f64> {
                let s = Sources {
                    positions: &p.0,
                    charges: Some(&p.1),
                    forces: Some(&p.2),
                    dipoles: Some(&p.3),
                    normals: Some(&p.4),
                };
                if std::ptr::eq(p, &one) {
                    ClassicalEwald::new(Domain::triply_periodic(cell).unwrap(), 2, targets.len())
                        .evaluate(kernel, &s, &targets)
                } else {
                    let prepared = ewald.prepare(kernel, &s);
                    let (u, w) = prepared.evaluate_counted(&targets);
                    let total = w.weighted() + prepared.source_work().weighted();
                    let per_pair = total / (ns * targets.len()) as f64;
                    println!(
                        "{lengths:?} {}: xi {:.4}, {} modes, {:.1} images per pair, work {total:.3e} ({per_pair:.0} \
                         per pair, estimate {:.3e})",
                        kernel.name(),
                        ewald.xi(),
                        w.modes,
                        w.image_terms as f64 / w.pairs as f64,
                        ewald.estimated_work(ns, targets.len())
                    );
                    assert!(per_pair <= per_pair_bound, "{lengths:?}: {per_pair:.0} units per pair");
                    u
                }
            };
            let (reference, u) = (src(&one), src(&many));
            let e = rel_diff(&u, &reference);
            println!("{lengths:?} {}: relative difference to the cell's sum {e:.2e}", kernel.name());
            assert!(e < 1e-12, "{lengths:?} {}: {e:e}", kernel.name());
        }
    }
}

/// The Laplace field of every reference (free space, 1P line sum, 2P tall box, 3P classical)
/// is minus the gradient of its potential: compared with fourth-order central differences of
/// the potential at targets off the sources.
#[test]
fn laplace_fields_are_minus_the_gradient_of_the_potentials() {
    use parki_core::Output;
    use parki_reference::direct::free_space_sum;
    use parki_reference::images::{line_sum, planar_from_tall_box};
    let l = [1.0, 1.2, 0.9];
    let (pos, q, ..) = random_problem(40, 17, l);
    let src = Sources::laplace(&pos, &q);
    let mut g = Lcg(5);
    let targets: Vec<[f64; 3]> = (0..6).map(|_| [g.next() * l[0], g.next() * l[1], g.next() * l[2]]).collect();
    let field = Output::with_field(Kernel::Laplace).unwrap();
    type Eval<'a> = Box<dyn Fn(Output, &[[f64; 3]]) -> Vec<f64> + 'a>;
    let cases: Vec<(&str, Eval)> = vec![
        ("free space", Box::new(|o, t| free_space_sum(o, &src, t))),
        ("1P line", Box::new(|o, t| line_sum(o, &Domain::new(l, [false, true, false]).unwrap(), &src, t))),
        (
            "2P tall box",
            Box::new(|o, t| planar_from_tall_box(o, &Domain::new(l, [true, true, false]).unwrap(), &src, t, 8.0)),
        ),
        (
            "3P classical",
            Box::new(|o, t| ClassicalEwald::new(Domain::triply_periodic(l).unwrap(), 40, t.len()).evaluate(o, &src, t)),
        ),
    ];
    for (name, eval) in &cases {
        let with = eval(field, &targets);
        let pot = eval(Output::from(Kernel::Laplace), &targets);
        let h = 1e-3;
        let (mut num, mut den) = (0.0, 0.0);
        for (i, x) in targets.iter().enumerate() {
            assert!((with[4 * i] - pot[i]).abs() < 1e-13 * pot[i].abs().max(1.0), "{name}: potential changed");
            for d in 0..3 {
                let at = |s: f64| {
                    let mut y = *x;
                    y[d] += s * h;
                    y
                };
                let pts = [at(-2.0), at(-1.0), at(1.0), at(2.0)];
                let u = eval(Output::from(Kernel::Laplace), &pts);
                let grad = (u[0] - 8.0 * u[1] + 8.0 * u[2] - u[3]) / (12.0 * h);
                num += (with[4 * i + 1 + d] + grad).powi(2);
                den += grad * grad;
            }
        }
        let e = (num / den).sqrt();
        println!("{name}: field against differences {e:.2e}");
        assert!(e < 1e-8, "{name}: field against -grad u: {e:e}");
    }
}

/// f32 test sets keep every coordinate inside the periodic box: seed 7's uniform positions hold
/// an f64 just below 1 (row 1 755 174, axis 1) that plain rounding to f32 makes 1.0, which the
/// solver rightly refuses (found by parki-gpu-bench's f32 cases at N = 4e6 on a GPU).
#[test]
fn f32_particles_stay_inside_the_box() {
    use parki_reference::generate::{Distribution, Particles};
    let domain = Domain::triply_periodic([1.0, 1.0, 1.0]).unwrap();
    let data = Particles::<f32>::new(&domain, Distribution::Uniform, 1_755_175, 7);
    let wide = Particles::<f64>::new(&domain, Distribution::Uniform, 1_755_175, 7);
    let row = 1_755_174;
    assert!(wide.pos[row][1] < 1.0 && wide.pos[row][1] as f32 == 1.0, "the case this test guards");
    assert_eq!(data.pos[row][1], 1.0f32.next_down());
    for (i, p) in data.pos.iter().enumerate() {
        assert!(p.iter().all(|&x| (0.0..1.0).contains(&x)), "row {i}: {p:?}");
    }
}
