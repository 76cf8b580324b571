//! The box sizes the solvers accept ([`parki_core::validate::length_range`]): at both ends of
//! the range, every kernel, triply periodic and free space, f64 and f32, the measured error lies
//! in `[tol/100, tol]`; just outside it the solver refuses the box, naming it. The reference is
//! the unit box's (classical Ewald sum in 3P, direct sum in 0P) scaled by homogeneity: with
//! positions and dipoles times `s`, every kernel's potential is the unit box's over `s`.

use crate::common::{rel_rms, Data, KERNELS};
use parki_core::{Domain, Error, Kernel};
use parki_dist::{EwaldOptions, EwaldSolver, SolverReal, Targets};
use parki_reference::direct::free_space_sum;
use parki_reference::generate::Distribution;
use parki_reference::ClassicalEwald;

const N: usize = 300;

/// The unit box's data and its reference potential for `kernel`: a box of sides 1 and longer
/// (`longer`) or shorter, so that times `s` at an end of the range it has a side at that end
/// and the others inside.
fn unit_problem(kernel: Kernel, periodic: bool, longer: bool) -> (Domain, Data, Vec<f64>) {
    let lengths = if longer { [1.0, 1.05, 1.1] } else { [1.0, 0.95, 0.9] };
    let domain = Domain::new(lengths, [periodic; 3]).unwrap();
    let data = Data::new(&domain, Distribution::Uniform, N, 41);
    let reference = if periodic {
        ClassicalEwald::new(domain, N, N).evaluate(kernel, &data.sources(), &data.pos)
    } else {
        free_space_sum(kernel, &data.sources(), &data.pos)
    };
    (domain, data, reference)
}

/// The solver's relative error on the unit problem scaled by `s` (box, positions, dipoles), in
/// precision `T`.
fn scaled_error<T: SolverReal>(kernel: Kernel, periodic: bool, s: f64, tol: f64) -> Result<f64, Error> {
    let (domain, data, reference) = unit_problem(kernel, periodic, s < 1.0);
    let big = Domain::new(domain.lengths().map(|l| l * s), domain.periodic())?;
    let scale3 = |v: &[[f64; 3]]| -> Vec<[T; 3]> {
        v.iter()
            .map(|p| {
                // inside the box after rounding (a coordinate at the far edge could round onto it)
                let mut q = p.map(|x| T::from_f64(x * s));
                for (a, c) in q.iter_mut().enumerate() {
                    if c.to_f64() >= big.lengths()[a] {
                        *c = T::from_f64(big.lengths()[a] * (1.0 - 1e-6));
                    }
                }
                q
            })
            .collect()
    };
    let pos = scale3(&data.pos);
    let dipoles: Vec<[T; 3]> = data.d.iter().map(|d| d.map(|x| T::from_f64(x * s))).collect();
    let cast3 = |v: &[[f64; 3]]| -> Vec<[T; 3]> { v.iter().map(|p| p.map(T::from_f64)).collect() };
    let (forces, normals) = (cast3(&data.f), cast3(&data.n));
    let charges: Vec<T> = data.q.iter().map(|&q| T::from_f64(q)).collect();
    let sources = parki_core::Sources {
        positions: &pos,
        charges: Some(&charges),
        forces: Some(&forces),
        dipoles: Some(&dipoles),
        normals: Some(&normals),
    };
    let mut solver = EwaldSolver::<T>::new(&EwaldOptions::new(kernel, big, tol), N, N)?;
    let mut u = vec![T::ZERO; N * kernel.output_dim()];
    solver.evaluate(&sources, Targets::Sources, &mut u)?;
    let u: Vec<f64> = u.iter().map(|v| v.to_f64() * s).collect();
    Ok(rel_rms(&u, &reference))
}

#[test]
fn the_ends_of_the_length_range_hold_the_tolerance() {
    let mut failures = Vec::new();
    for periodic in [true, false] {
        for kernel in KERNELS {
            let cases: [(&str, f64, f64); 4] =
                [("f64", 1e-30, 1e-6), ("f64", 1e30, 1e-6), ("f32", 1e-4, 1e-4), ("f32", 1e4, 1e-4)];
            for (precision, s, tol) in cases {
                let e = if precision == "f64" {
                    scaled_error::<f64>(kernel, periodic, s, tol)
                } else {
                    scaled_error::<f32>(kernel, periodic, s, tol)
                };
                let label = format!("{} {} {precision} box x {s:e}", if periodic { "3P" } else { "0P" }, kernel.name());
                match e {
                    Ok(e) => {
                        println!("{label}: error {e:.3e} ({:.3} tol)", e / tol);
                        if !(e <= tol && e >= tol / 100.0) {
                            failures.push(format!("{label}: error {e:e} at tol {tol:e}"));
                        }
                    }
                    Err(err) => failures.push(format!("{label}: {err}")),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn a_box_beyond_the_range_is_refused_by_name() {
    for (s, f32) in [(1e-31, false), (1e31, false), (1e-5, true), (1e5, true)] {
        let e = if f32 {
            scaled_error::<f32>(Kernel::Stresslet, true, s, 1e-4)
        } else {
            scaled_error::<f64>(Kernel::Stresslet, true, s, 1e-6)
        };
        let msg = e.expect_err("refused").to_string();
        assert!(msg.contains("problem.box[") && msg.contains("rescale"), "box x {s:e}: {msg}");
    }
}
