//! Acceptance 1: for every kernel, tolerance and distribution, the relative RMS error against the
//! classical Ewald reference is at most `tol` and at least `tol/1000`.

use crate::common::{box_unequal, rel_rms, Data, KERNELS};
use parki_dist::{EwaldOptions, EwaldSolver, Targets};
use parki_reference::generate::Distribution;
use parki_reference::ClassicalEwald;

#[test]
fn error_within_tolerance_for_every_kernel_tolerance_and_distribution() {
    let domain = box_unequal();
    let n = 2000;
    let mut failures = Vec::new();
    println!(
        "{:<10} {:<8} {:<5} {:>8} {:>11} {:>11} {:>6}",
        "kernel", "dist", "prec", "tol", "measured", "estimate", "P"
    );
    for (dist, name, seed) in [(Distribution::Uniform, "uniform", 11u64), (Distribution::Normal, "normal", 12)] {
        let data = Data::new(&domain, dist, n, seed);
        let data32 = data.cast();
        let wide32 = data32.widen();
        for kernel in KERNELS {
            let reference = ClassicalEwald::new(domain, n, n).evaluate(kernel, &data.sources(), &data.pos);
            let reference32 = ClassicalEwald::new(domain, n, n).evaluate(kernel, &wide32.sources(), &wide32.pos);
            for tol in [1e-3, 1e-6, 1e-9, 1e-12] {
                let opts = EwaldOptions::new(kernel, domain, tol);
                let mut s = EwaldSolver::<f64>::new(&opts, n, n).unwrap();
                let mut u = vec![0.0; n * kernel.output_dim()];
                s.evaluate(&data.sources(), Targets::Sources, &mut u).unwrap();
                let e = rel_rms(&u, &reference);
                println!(
                    "{:<10} {:<8} {:<5} {:>8.0e} {:>11.3e} {:>11.3e} {:>6}",
                    kernel.name(),
                    name,
                    "f64",
                    tol,
                    e,
                    s.params().estimate.total,
                    s.params().p
                );
                if !(e <= tol && e >= tol / 1000.0) {
                    failures.push(format!("{} {name} f64 tol {tol:e}: error {e:e}", kernel.name()));
                }
            }
            for tol in [1e-3, 1e-5] {
                let opts = EwaldOptions::new(kernel, domain, tol);
                let mut s = EwaldSolver::<f32>::new(&opts, n, n).unwrap();
                let mut u = vec![0.0f32; n * kernel.output_dim()];
                s.evaluate(&data32.sources(), Targets::Sources, &mut u).unwrap();
                let e = rel_rms(&u, &reference32);
                println!(
                    "{:<10} {:<8} {:<5} {:>8.0e} {:>11.3e} {:>11.3e} {:>6}",
                    kernel.name(),
                    name,
                    "f32",
                    tol,
                    e,
                    s.params().estimate.total,
                    s.params().p
                );
                if !(e <= tol && e >= tol / 1000.0) {
                    failures.push(format!("{} {name} f32 tol {tol:e}: error {e:e}", kernel.name()));
                }
            }
        }
    }
    assert!(failures.is_empty(), "out of [tol/1000, tol]:\n{}", failures.join("\n"));
}

#[test]
fn error_within_tolerance_on_a_sphere_surface() {
    // strongly clustered: 2000 particles on a sphere of radius 0.36 (cells mostly empty)
    let domain = box_unequal();
    let n = 2000;
    let data = Data::new(&domain, Distribution::Sphere, n, 13);
    for kernel in KERNELS {
        let reference = ClassicalEwald::new(domain, n, n).evaluate(kernel, &data.sources(), &data.pos);
        for tol in [1e-4, 1e-8, 1e-11] {
            let mut s = EwaldSolver::<f64>::new(&EwaldOptions::new(kernel, domain, tol), n, n).unwrap();
            let mut u = vec![0.0; n * kernel.output_dim()];
            s.evaluate(&data.sources(), Targets::Sources, &mut u).unwrap();
            let e = rel_rms(&u, &reference);
            println!("{:<10} sphere {tol:>8.0e} {e:>11.3e}", kernel.name());
            assert!(e <= tol, "{} sphere tol {tol:e}: error {e:e}", kernel.name());
        }
    }
}
