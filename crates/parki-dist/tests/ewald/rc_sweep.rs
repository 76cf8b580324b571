//! Acceptance 3: with the tolerance fixed and `r_c` varied, all results agree within `30 tol`
//! (and each is within `tol` of the classical reference). This exercises the near/far split
//! independently of the automatic choice of `xi`.

use crate::common::{box_unequal, rel_rms, Data, KERNELS};
use parki_dist::{EwaldOptions, EwaldSolver, Targets};
use parki_reference::generate::Distribution;
use parki_reference::ClassicalEwald;

const N: usize = 1200;
const RC: [f64; 6] = [0.06, 0.09, 0.13, 0.18, 0.23, 0.3];

/// Largest relative RMS difference between any two runs.
fn max_pairwise(runs: &[Vec<f64>]) -> f64 {
    let mut m: f64 = 0.0;
    for a in runs {
        for b in runs {
            m = m.max(rel_rms(a, b));
        }
    }
    m
}

#[test]
fn results_agree_over_a_range_of_cutoffs() {
    let domain = box_unequal();
    let data = Data::new(&domain, Distribution::Uniform, N, 31);
    let data32 = data.cast();
    for kernel in KERNELS {
        let dim = kernel.output_dim();
        let reference = ClassicalEwald::new(domain, N, N).evaluate(kernel, &data.sources(), &data.pos);
        for tol in [1e-5, 1e-9] {
            let runs: Vec<Vec<f64>> = RC
                .iter()
                .map(|&rc| {
                    let mut o = EwaldOptions::new(kernel, domain, tol);
                    o.rc = Some(rc);
                    let mut s = EwaldSolver::<f64>::new(&o, N, N).unwrap();
                    let mut u = vec![0.0; N * dim];
                    s.evaluate(&data.sources(), Targets::Sources, &mut u).unwrap();
                    let e = rel_rms(&u, &reference);
                    assert!(e <= tol, "{} tol {tol:e} rc {rc}: error {e:e}", kernel.name());
                    u
                })
                .collect();
            let spread = max_pairwise(&runs);
            println!(
                "{:<10} f64 tol {tol:>6.0e}: largest difference between rc values {spread:.2e} ({:.2} tol)",
                kernel.name(),
                spread / tol
            );
            for (i, u) in runs.iter().enumerate() {
                let d = rel_rms(u, &runs[0]);
                assert!(d <= 30.0 * tol, "{} tol {tol:e}: rc {} vs {}: {d:e}", kernel.name(), RC[i], RC[0]);
            }
        }
        let wide = data32.widen();
        let reference32 = ClassicalEwald::new(domain, N, N).evaluate(kernel, &wide.sources(), &wide.pos);
        for tol in [1e-3, 1e-5] {
            let runs: Vec<Vec<f64>> = RC
                .iter()
                .map(|&rc| {
                    let mut o = EwaldOptions::new(kernel, domain, tol);
                    o.rc = Some(rc);
                    let mut s = EwaldSolver::<f32>::new(&o, N, N).unwrap();
                    let mut u = vec![0.0f32; N * dim];
                    s.evaluate(&data32.sources(), Targets::Sources, &mut u).unwrap();
                    let u: Vec<f64> = u.iter().map(|&v| v as f64).collect();
                    let e = rel_rms(&u, &reference32);
                    assert!(e <= tol, "{} f32 tol {tol:e} rc {rc}: error {e:e}", kernel.name());
                    u
                })
                .collect();
            let spread = max_pairwise(&runs);
            println!(
                "{:<10} f32 tol {tol:>6.0e}: largest difference between rc values {spread:.2e} ({:.2} tol)",
                kernel.name(),
                spread / tol
            );
            for (i, u) in runs.iter().enumerate() {
                let d = rel_rms(u, &runs[0]);
                assert!(d <= 30.0 * tol, "{} f32 tol {tol:e}: rc {} vs {}: {d:e}", kernel.name(), RC[i], RC[0]);
            }
        }
    }
}
