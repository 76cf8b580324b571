//! Issue 11: free space (0P) and one or two periodic axes (1P, 2P), every kernel, against
//! references independent of the Ewald split: the free-space direct sum (0P), the image sum
//! along the periodic axis with an Euler-Maclaurin tail (1P), and the classical sum of a tall
//! box with the planar correction (2P). The measured error must lie in `[tol/100, tol]`.

use crate::common::{rel_rms, Data, KERNELS};
use parki_core::{Domain, Error, Kernel};
use parki_dist::{Comm, EwaldOptions, EwaldSolver, PositionRounding, SourceStatistics, Targets};
use parki_reference::direct::free_space_sum;
use parki_reference::generate::Distribution;
use parki_reference::images::{line_sum, planar_from_tall_box};

fn reference(kernel: Kernel, domain: &Domain, data: &Data, targets: &[[f64; 3]]) -> Vec<f64> {
    match domain.periodicity() {
        0 => free_space_sum(kernel, &data.sources(), targets),
        1 => line_sum(kernel, domain, &data.sources(), targets),
        2 => planar_from_tall_box(kernel, domain, &data.sources(), targets, 8.0),
        _ => unreachable!(),
    }
}

/// Runs every kernel at `tols` (f64) and `tols32` (f32) on `data`, at the sources and at
/// separate targets; returns the failures.
fn sweep(domain: Domain, data: &Data, targets: &[[f64; 3]], tols: &[f64], tols32: &[f64], label: &str) -> Vec<String> {
    let n = data.pos.len();
    let mut failures = Vec::new();
    let data32 = data.cast();
    let wide32 = data32.widen();
    let targets32: Vec<[f32; 3]> = targets.iter().map(|p| p.map(|x| x as f32)).collect();
    let targets32w: Vec<[f64; 3]> = targets32.iter().map(|p| p.map(|x| x as f64)).collect();
    for kernel in KERNELS {
        let dim = kernel.output_dim();
        let at_sources = reference(kernel, &domain, data, &data.pos);
        let at_targets = reference(kernel, &domain, data, targets);
        // the particle statistics the application measures (the stresslet's close pairs)
        let comm = Comm::single();
        let stats = SourceStatistics::measure(&comm, kernel, &domain, &data.sources(), None, PositionRounding::Exact);
        let stats_t =
            SourceStatistics::measure(&comm, kernel, &domain, &data.sources(), Some(targets), PositionRounding::Exact);
        let stats32 =
            SourceStatistics::measure(&comm, kernel, &domain, &data32.sources(), None, PositionRounding::Exact);
        let stats32t = SourceStatistics::measure(
            &comm,
            kernel,
            &domain,
            &data32.sources(),
            Some(&targets32),
            PositionRounding::Exact,
        );
        let with = |tol: f64, s: SourceStatistics| EwaldOptions::new(kernel, domain, tol).statistics(Some(s));
        let mut check = |what: &str, tol: f64, e: f64| {
            println!("{label} {:<10} {what:<14} tol {tol:.0e}: error {e:.3e} ({:.3} tol)", kernel.name(), e / tol);
            if !(e <= tol && e >= tol / 100.0) {
                failures.push(format!("{label} {} {what} tol {tol:e}: error {e:e}", kernel.name()));
            }
        };
        for &tol in tols {
            let mut s = EwaldSolver::<f64>::new(&with(tol, stats), n, n).unwrap();
            let mut u = vec![0.0; n * dim];
            s.evaluate(&data.sources(), Targets::Sources, &mut u).unwrap();
            check("f64 sources", tol, rel_rms(&u, &at_sources));
            let mut s = EwaldSolver::<f64>::new(&with(tol, stats_t), n, targets.len()).unwrap();
            let mut v = vec![0.0; targets.len() * dim];
            s.evaluate(&data.sources(), Targets::Points(targets), &mut v).unwrap();
            check("f64 targets", tol, rel_rms(&v, &at_targets));
        }
        if tols32.is_empty() {
            continue;
        }
        let ref32 = reference(kernel, &domain, &wide32, &wide32.pos);
        let ref32t = reference(kernel, &domain, &wide32, &targets32w);
        for &tol in tols32 {
            let mut s = EwaldSolver::<f32>::new(&with(tol, stats32), n, n).unwrap();
            let mut u = vec![0.0f32; n * dim];
            s.evaluate(&data32.sources(), Targets::Sources, &mut u).unwrap();
            check("f32 sources", tol, rel_rms(&u, &ref32));
            let mut s = EwaldSolver::<f32>::new(&with(tol, stats32t), n, targets.len()).unwrap();
            let mut v = vec![0.0f32; targets.len() * dim];
            s.evaluate(&data32.sources(), Targets::Points(&targets32), &mut v).unwrap();
            check("f32 targets", tol, rel_rms(&v, &ref32t));
        }
    }
    failures
}

#[test]
fn free_space_matches_the_direct_sum() {
    let domain = Domain::new([1.0, 1.2, 0.9], [false; 3]).unwrap();
    let mut failures = Vec::new();
    for (dist, name, n) in [
        (Distribution::Uniform, "0P uniform", 1000),
        (Distribution::Normal, "0P normal", 1000),
        (Distribution::Sphere, "0P sphere", 800),
    ] {
        let data = Data::new(&domain, dist, n, 5);
        let targets = Data::new(&domain, Distribution::Uniform, 300, 6).pos;
        let tols: &[f64] = if dist == Distribution::Uniform { &[1e-3, 1e-6, 1e-9, 1e-12] } else { &[1e-4, 1e-8] };
        let tols32: &[f64] = if dist == Distribution::Uniform { &[1e-3, 1e-5, 1e-6] } else { &[] };
        failures.extend(sweep(domain, &data, &targets, tols, tols32, name));
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn one_and_two_periodic_axes_match_the_image_sums() {
    let mut failures = Vec::new();
    for (periodic, name) in [
        ([true, true, false], "2P xy"),
        ([false, true, true], "2P yz"),
        ([true, false, false], "1P x"),
        ([false, false, true], "1P z"),
    ] {
        let domain = Domain::new([1.0, 1.2, 0.9], periodic).unwrap();
        let dist =
            if name.ends_with('y') || name.ends_with('x') { Distribution::Uniform } else { Distribution::Normal };
        let data = Data::new(&domain, dist, 400, 7);
        let targets = Data::new(&domain, Distribution::Uniform, 150, 8).pos;
        let tols32: &[f64] = if name == "2P xy" || name == "1P x" { &[1e-4, 1e-5, 1e-6] } else { &[] };
        failures.extend(sweep(domain, &data, &targets, &[1e-3, 1e-6, 1e-9, 1e-12], tols32, name));
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The ladder between the asserted tolerances, where the window support steps from 6 to 8
/// (the zero-mode aliasing showed at 1e-5): 0P and the four 1P/2P boxes, uniform sources, every
/// kernel, f64 and f32, at the sources and at separate targets, tol 1e-4, 3e-5, 1e-5, 3e-6,
/// 1e-6 (400 runs, a few minutes; `-- --ignored`).
#[test]
#[ignore]
fn free_and_partly_periodic_tolerance_ladder() {
    let tols = [1e-4, 3e-5, 1e-5, 3e-6, 1e-6];
    let mut failures = Vec::new();
    for (periodic, name) in [
        ([false; 3], "0P"),
        ([true, true, false], "2P xy"),
        ([false, true, true], "2P yz"),
        ([true, false, false], "1P x"),
        ([false, false, true], "1P z"),
    ] {
        let domain = Domain::new([1.0, 1.2, 0.9], periodic).unwrap();
        let data = Data::new(&domain, Distribution::Uniform, 1000, 5);
        let targets = Data::new(&domain, Distribution::Uniform, 300, 6).pos;
        failures.extend(sweep(domain, &data, &targets, &tols, &tols, name));
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The Laplace potential's zero mode along free axes is set to its exact value
/// (`FreeCnv::zero_mode`): the spread grid's carries the window's aliasing (the partition of
/// unity varies with a source's offset in its cell, about `1e-6` at `P = 6`), which the
/// truncated kernel's large `k = 0` weight turned into a constant in every potential, up to 7x
/// the estimate. At window support 6 and these oversamplings the error was 2.9e-5 to 3.7e-5
/// against estimates of 5.4e-6 (2P), 1.4e-5 (1P), 8.7e-6 (0P); now within 1.7x of the estimate.
#[test]
fn free_axes_have_no_window_aliasing_in_the_zero_mode() {
    let mut failures = Vec::new();
    for periodic in [[true, true, false], [true, false, false], [false; 3]] {
        let domain = Domain::new([1.0, 1.2, 0.9], periodic).unwrap();
        let data = Data::new(&domain, Distribution::Uniform, 1000, 5);
        let kernel = Kernel::Laplace;
        let at_sources = reference(kernel, &domain, &data, &data.pos);
        let stats =
            SourceStatistics::measure(&Comm::single(), kernel, &domain, &data.sources(), None, PositionRounding::Exact);
        for sigma in [1.25, 1.4, 1.5] {
            let opts = EwaldOptions::new(kernel, domain, 1e-5)
                .statistics(Some(stats))
                .window_support(Some(6))
                .oversampling(Some(sigma));
            let mut s = EwaldSolver::<f64>::new(&opts, 1000, 1000).unwrap();
            let estimate = s.params().estimate.total;
            let mut u = vec![0.0; 1000];
            s.evaluate(&data.sources(), Targets::Sources, &mut u).unwrap();
            let e = rel_rms(&u, &at_sources);
            println!("{periodic:?} P 6 sigma {sigma}: error {e:.3e}, estimate {estimate:.3e} ({:.2}x)", e / estimate);
            if e > 2.5 * estimate || e > 1e-5 {
                failures.push(format!("{periodic:?} sigma {sigma}: error {e:e} against estimate {estimate:e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn one_and_two_periodic_axes_need_neutral_charges_and_forces() {
    for periodic in [[true, true, false], [true, false, false]] {
        let domain = Domain::new([1.0, 1.2, 0.9], periodic).unwrap();
        let mut data = Data::new(&domain, Distribution::Uniform, 200, 9);
        data.q[0] += 0.5;
        data.f[3][1] += 0.5;
        for (kernel, field) in [(Kernel::Laplace, "sources.charges"), (Kernel::Stokeslet, "sources.forces")] {
            let mut s = EwaldSolver::<f64>::new(&EwaldOptions::new(kernel, domain, 1e-6), 200, 200).unwrap();
            let mut u = vec![0.0; 200 * kernel.output_dim()];
            let e = s.evaluate(&data.sources(), Targets::Sources, &mut u).unwrap_err();
            assert!(matches!(&e, Error::OutOfRange { field: f, .. } if f == field), "{e}");
            assert!(e.to_string().contains("net"), "{e}");
        }
        // the stresslet needs nothing
        let mut s = EwaldSolver::<f64>::new(&EwaldOptions::new(Kernel::Stresslet, domain, 1e-6), 200, 200).unwrap();
        let mut u = vec![0.0; 600];
        s.evaluate(&data.sources(), Targets::Sources, &mut u).unwrap();
    }
    // free space: a net charge and a net force are plain sums
    let domain = Domain::new([1.0, 1.2, 0.9], [false; 3]).unwrap();
    let mut data = Data::new(&domain, Distribution::Uniform, 300, 9);
    data.q.iter_mut().for_each(|q| *q += 0.3);
    data.f.iter_mut().for_each(|f| f[2] += 0.3);
    for kernel in [Kernel::Laplace, Kernel::Stokeslet] {
        let reference = free_space_sum(kernel, &data.sources(), &data.pos);
        let mut s = EwaldSolver::<f64>::new(&EwaldOptions::new(kernel, domain, 1e-8), 300, 300).unwrap();
        let mut u = vec![0.0; 300 * kernel.output_dim()];
        s.evaluate(&data.sources(), Targets::Sources, &mut u).unwrap();
        let e = rel_rms(&u, &reference);
        assert!(e <= 1e-8, "{} with a net monopole: {e:e}", kernel.name());
    }
}
