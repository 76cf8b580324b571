//! Issue 8, defect 2: single precision across the periodic boundary.
//!
//! A dense ball of particles that straddles a box face (or a corner) holds close pairs whose
//! displacement crosses the boundary. In f32 that displacement must be rounded at the scale of
//! the pair, not of the box length: the error stays within the tolerance, as for the same ball
//! in the middle of the box. The reference is the classical Ewald sum in f64 on the f32-rounded
//! positions and strengths, so that the input rounding is not counted.
//!
//! Measured (relative RMS error, tol 1e-6), before the fix / after:
//!
//! | ball   | laplace         | stokeslet       | stresslet       | stokes          |
//! |--------|-----------------|-----------------|-----------------|-----------------|
//! | middle | 2.87e-7/2.87e-7 | 3.23e-7/3.23e-7 | 1.98e-7/1.98e-7 | 1.96e-7/1.96e-7 |
//! | face   | 5.93e-6/2.90e-7 | 4.35e-6/3.38e-7 | 1.94e-6/3.08e-7 | 1.93e-6/2.61e-7 |
//! | corner | 7.37e-6/2.87e-7 | 5.32e-6/3.14e-7 | 3.48e-6/2.88e-7 | 3.48e-6/3.65e-7 |

use crate::common::{rel_rms, Data, KERNELS};
use parki_core::Domain;
use parki_dist::{EwaldOptions, EwaldSolver, Targets};
use parki_reference::generate::{self, Rng};
use parki_reference::ClassicalEwald;

/// `count` particles uniform in the ball of radius `radius` around `centre`, wrapped into the
/// box, with neutral strengths; positions whose f32 rounding would reach `L` are left out.
fn ball(domain: &Domain, centre: [f64; 3], radius: f64, count: usize, seed: u64) -> Data<f64> {
    let l = domain.lengths();
    let mut rng = Rng::new(seed);
    let mut pos = Vec::with_capacity(count);
    while pos.len() < count {
        let v = [0, 1, 2].map(|_| 2.0 * rng.uniform() - 1.0);
        if v.iter().map(|x| x * x).sum::<f64>() > 1.0 {
            continue;
        }
        let p = [0, 1, 2].map(|d| (centre[d] + radius * v[d]).rem_euclid(l[d]));
        if (0..3).all(|d| ((p[d] as f32) as f64) < l[d]) {
            pos.push(p);
        }
    }
    let q = generate::neutral_scalars(count, &mut rng);
    let f = generate::neutral_vectors(count, &mut rng);
    let d = generate::normal_vectors(count, &mut rng);
    let n = (0..count).map(|_| generate::unit_vector(&mut rng)).collect();
    Data { pos, q, f, d, n }
}

#[test]
fn f32_ball_across_a_face_or_a_corner_is_within_tolerance() {
    let domain = Domain::triply_periodic([1.0, 1.2, 0.9]).unwrap();
    let l = domain.lengths();
    // 300 particles in a ball of radius 0.01 (close pairs ~1e-3 apart), cells ~0.2-0.3 wide:
    // a rounding at the box length (6e-8) is 6e-5 of such a pair's distance
    let (count, radius, tol, seed) = (300, 0.01, 1e-6, 9);
    let cases = [
        ("middle", [0.5 * l[0], 0.5 * l[1], 0.5 * l[2]]),
        ("face", [0.0, 0.5 * l[1], 0.5 * l[2]]),
        ("corner", [0.0, 0.0, 0.0]),
    ];
    let mut failures = Vec::new();
    println!("{:<10} {:<7} {:>11} {:>11}", "kernel", "ball", "measured", "tol");
    for (name, centre) in cases {
        let data32 = ball(&domain, centre, radius, count, seed).cast();
        let wide = data32.widen();
        for kernel in KERNELS {
            let reference = ClassicalEwald::new(domain, count, count).evaluate(kernel, &wide.sources(), &wide.pos);
            let opts = EwaldOptions::new(kernel, domain, tol);
            let mut s = EwaldSolver::<f32>::new(&opts, count, count).unwrap();
            let mut u = vec![0.0f32; count * kernel.output_dim()];
            s.evaluate(&data32.sources(), Targets::Sources, &mut u).unwrap();
            let e = rel_rms(&u, &reference);
            println!("{:<10} {:<7} {:>11.3e} {:>11.0e}", kernel.name(), name, e, tol);
            if e.is_nan() || e > tol {
                failures.push(format!("{} {name}: error {e:e} > tol {tol:e}", kernel.name()));
            }
        }
    }
    assert!(failures.is_empty(), "f32 ball errors above the tolerance:\n{}", failures.join("\n"));
}
