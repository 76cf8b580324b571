//! Issue 11: the Laplace field `E = -grad u` for every periodicity (3P, 2P, 1P, 0P) and both
//! far-field methods (the window's derivative in G2P, `-i k` in CNV), against the gradients of
//! references independent of the Ewald split: the classical Ewald sum (3P), the classical sum of
//! a tall box with the planar correction (2P), the image sum with an Euler-Maclaurin tail (1P)
//! and the free-space direct sum (0P). The field's error must lie in `[tol/100, tol]` and the
//! potential computed with it must still meet the tolerance.

use crate::common::{rel_rms, Data};
use parki_core::{Domain, Kernel, Output};
use parki_dist::Comm;
use parki_dist::{EwaldOptions, EwaldSolver, FieldMethod, PositionRounding, SourceStatistics, Targets};
use parki_reference::direct::free_space_sum;
use parki_reference::generate::Distribution;
use parki_reference::images::{line_sum, planar_from_tall_box};
use parki_reference::ClassicalEwald;

/// `[u, E]` per target from the reference of the box's periodicity.
fn reference(domain: &Domain, data: &Data, targets: &[[f64; 3]]) -> Vec<f64> {
    let out = Output::with_field(Kernel::Laplace).unwrap();
    let s = data.sources();
    match domain.periodicity() {
        0 => free_space_sum(out, &s, targets),
        1 => line_sum(out, domain, &s, targets),
        2 => planar_from_tall_box(out, domain, &s, targets, 8.0),
        _ => ClassicalEwald::new(*domain, data.pos.len(), targets.len()).evaluate(out, &s, targets),
    }
}

/// The potential's and the field's columns of `[u, E]` rows.
fn split<T: Copy + Into<f64>>(v: &[T]) -> (Vec<f64>, Vec<f64>) {
    let u = v.chunks_exact(4).map(|r| r[0].into()).collect();
    let e = v.chunks_exact(4).flat_map(|r| r[1..].iter().map(|&x| x.into())).collect();
    (u, e)
}

/// Runs both methods at `tols` (f64) and `tols32` (f32) at the sources and at separate
/// targets; returns the failures.
fn sweep(domain: Domain, data: &Data, targets: &[[f64; 3]], tols: &[f64], tols32: &[f64], label: &str) -> Vec<String> {
    let n = data.pos.len();
    let mut failures = Vec::new();
    let (ref_s, ref_t) = (split(&reference(&domain, data, &data.pos)), split(&reference(&domain, data, targets)));
    let data32 = data.cast();
    let wide32 = data32.widen();
    let targets32: Vec<[f32; 3]> = targets.iter().map(|p| p.map(|x| x as f32)).collect();
    let targets32w: Vec<[f64; 3]> = targets32.iter().map(|p| p.map(|x| x as f64)).collect();
    let ref32 = if tols32.is_empty() {
        None
    } else {
        Some((split(&reference(&domain, &wide32, &wide32.pos)), split(&reference(&domain, &wide32, &targets32w))))
    };
    let comm = Comm::single();
    let k = Kernel::Laplace;
    for method in [FieldMethod::Window, FieldMethod::Spectral] {
        let opts = |tol: f64, t: Option<&[[f64; 3]]>, d: &Data| {
            let stats = SourceStatistics::measure(&comm, k, &domain, &d.sources(), t, PositionRounding::Exact);
            EwaldOptions::new(k, domain, tol).field(true).field_method(method).statistics(Some(stats))
        };
        let mut check = |what: &str, tol: f64, got: (Vec<f64>, Vec<f64>), want: &(Vec<f64>, Vec<f64>)| {
            let (eu, ee) = (rel_rms(&got.0, &want.0), rel_rms(&got.1, &want.1));
            println!(
                "{label} {:<8} {what:<11} tol {tol:.0e}: field {ee:.3e} ({:.3} tol), potential {eu:.3e} ({:.3} tol)",
                method.name(),
                ee / tol,
                eu / tol
            );
            if !(ee <= tol && ee >= tol / 100.0 && eu <= tol) {
                failures.push(format!("{label} {} {what} tol {tol:e}: field {ee:e}, potential {eu:e}", method.name()));
            }
        };
        for &tol in tols {
            let mut s = EwaldSolver::<f64>::new(&opts(tol, None, data), n, n).unwrap();
            let mut u = vec![0.0; 4 * n];
            s.evaluate(&data.sources(), Targets::Sources, &mut u).unwrap();
            check("f64 sources", tol, split(&u), &ref_s);
            let mut s = EwaldSolver::<f64>::new(&opts(tol, Some(targets), data), n, targets.len()).unwrap();
            let mut v = vec![0.0; 4 * targets.len()];
            s.evaluate(&data.sources(), Targets::Points(targets), &mut v).unwrap();
            check("f64 targets", tol, split(&v), &ref_t);
        }
        let Some((r32s, r32t)) = &ref32 else { continue };
        for &tol in tols32 {
            let with = |t: Option<&[[f64; 3]]>| {
                let stats = SourceStatistics::measure(&comm, k, &domain, &wide32.sources(), t, PositionRounding::Exact);
                EwaldOptions::new(k, domain, tol).field(true).field_method(method).statistics(Some(stats))
            };
            let mut s = EwaldSolver::<f32>::new(&with(None), n, n).unwrap();
            let mut u = vec![0.0f32; 4 * n];
            s.evaluate(&data32.sources(), Targets::Sources, &mut u).unwrap();
            check("f32 sources", tol, split(&u), r32s);
            let mut s = EwaldSolver::<f32>::new(&with(Some(&targets32w)), n, targets.len()).unwrap();
            let mut v = vec![0.0f32; 4 * targets.len()];
            s.evaluate(&data32.sources(), Targets::Points(&targets32), &mut v).unwrap();
            check("f32 targets", tol, split(&v), r32t);
        }
    }
    failures
}

#[test]
fn triply_periodic_field_matches_the_classical_sum() {
    let domain = Domain::triply_periodic([1.0, 1.2, 0.9]).unwrap();
    let mut failures = Vec::new();
    for (dist, name, n) in [
        (Distribution::Uniform, "3P uniform", 1000),
        (Distribution::Normal, "3P normal", 800),
        (Distribution::Sphere, "3P sphere", 800),
    ] {
        let data = Data::new(&domain, dist, n, 11);
        let targets = Data::new(&domain, Distribution::Uniform, 200, 12).pos;
        let (tols, tols32): (&[f64], &[f64]) = if dist == Distribution::Uniform {
            (&[1e-3, 1e-6, 1e-9, 1e-12], &[1e-3, 1e-5])
        } else {
            (&[1e-4, 1e-8], &[])
        };
        failures.extend(sweep(domain, &data, &targets, tols, tols32, name));
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn free_and_partly_periodic_fields_match_the_references() {
    let mut failures = Vec::new();
    for (periodic, name, dist) in [
        ([true, true, false], "2P xy", Distribution::Uniform),
        ([false, true, true], "2P yz", Distribution::Normal),
        ([true, false, false], "1P x", Distribution::Uniform),
        ([false, false, true], "1P z", Distribution::Sphere),
        ([false; 3], "0P", Distribution::Uniform),
        ([false; 3], "0P", Distribution::Normal),
    ] {
        let domain = Domain::new([1.0, 1.2, 0.9], periodic).unwrap();
        let data = Data::new(&domain, dist, 400, 13);
        let targets = Data::new(&domain, Distribution::Uniform, 150, 14).pos;
        let tols32: &[f64] = if dist == Distribution::Uniform { &[1e-3, 1e-4] } else { &[] };
        failures.extend(sweep(domain, &data, &targets, &[1e-3, 1e-6, 1e-9, 1e-12], tols32, name));
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
