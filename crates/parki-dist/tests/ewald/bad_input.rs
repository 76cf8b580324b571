//! Acceptance 4 (library side): every bad input is a typed error that names the field and the
//! value, never a panic; non-neutral input is computed with a warning.

use crate::common::{box_unequal, rel_rms, Data};
use parki_core::{Error, Kernel, Sources};
use parki_dist::{EwaldOptions, EwaldSolver, Targets};
use parki_reference::generate::Distribution;
use parki_reference::ClassicalEwald;

const N: usize = 300;

fn solver(kernel: Kernel, tol: f64) -> EwaldSolver<f64> {
    EwaldSolver::<f64>::new(&EwaldOptions::new(kernel, box_unequal(), tol), N, N).unwrap()
}

fn eval(kernel: Kernel, src: &Sources<f64>, targets: Targets<f64>, nt: usize) -> Result<Vec<f64>, Error> {
    let mut u = vec![0.0; nt * kernel.output_dim()];
    solver(kernel, 1e-6).evaluate(src, targets, &mut u).map(|_| u)
}

#[test]
fn particle_outside_the_box_names_its_index_and_coordinate() {
    let data = Data::new(&box_unequal(), Distribution::Uniform, N, 41);
    for (index, axis, value) in [(7usize, 0usize, 1.0), (12, 2, -1e-9), (N - 1, 1, 1.7)] {
        let mut pos = data.pos.clone();
        pos[index][axis] = value;
        let src = Sources { positions: &pos, ..data.sources() };
        let e = eval(Kernel::Laplace, &src, Targets::Sources, N).unwrap_err();
        assert_eq!(
            e,
            Error::OutsideBox {
                field: "sources.positions".into(),
                index,
                axis,
                value,
                length: box_unequal().lengths()[axis],
                periodic: true,
            }
        );
        let msg = e.to_string();
        assert!(msg.contains(&format!("sources.positions[{index}]")) && msg.contains("outside"), "{msg}");
    }
    let mut trg = data.pos.clone();
    trg[3][1] = 5.0;
    let e = eval(Kernel::Stokeslet, &data.sources(), Targets::Points(&trg), N).unwrap_err();
    assert!(matches!(e, Error::OutsideBox { ref field, index: 3, axis: 1, .. } if field == "targets.positions"), "{e}");
}

#[test]
fn nan_and_inf_are_rejected_with_field_and_index() {
    let data = Data::new(&box_unequal(), Distribution::Uniform, N, 42);
    let mut pos = data.pos.clone();
    pos[5][2] = f64::NAN;
    let src = Sources { positions: &pos, ..data.sources() };
    let e = eval(Kernel::Laplace, &src, Targets::Sources, N).unwrap_err();
    assert!(
        matches!(e, Error::NonFinite { ref field, index: 5, component: 2, .. } if field == "sources.positions"),
        "{e}"
    );
    let mut f = data.f.clone();
    f[9][0] = f64::INFINITY;
    let src = Sources { forces: Some(&f), ..data.sources() };
    let e = eval(Kernel::Stokes, &src, Targets::Sources, N).unwrap_err();
    assert!(e.to_string().contains("sources.forces[9][0] = inf"), "{e}");
    let mut q = data.q.clone();
    q[0] = f64::NAN;
    let src = Sources { charges: Some(&q), ..data.sources() };
    assert!(matches!(eval(Kernel::Laplace, &src, Targets::Sources, N), Err(Error::NonFinite { .. })));
    let mut n = data.n.clone();
    n[2][1] = f64::NEG_INFINITY;
    let src = Sources { normals: Some(&n), ..data.sources() };
    assert!(eval(Kernel::Stresslet, &src, Targets::Sources, N)
        .unwrap_err()
        .to_string()
        .contains("sources.normals[2][1]"));
}

#[test]
fn mismatched_and_missing_arrays_are_rejected() {
    let data = Data::new(&box_unequal(), Distribution::Uniform, N, 43);
    let src = Sources { forces: Some(&data.f[..N - 1]), ..data.sources() };
    let e = eval(Kernel::Stokeslet, &src, Targets::Sources, N).unwrap_err();
    assert_eq!(
        e,
        Error::LengthMismatch {
            field: "sources.forces".into(),
            found: N - 1,
            reference: "sources.positions".into(),
            expected: N
        }
    );
    let src = Sources { dipoles: None, ..data.sources() };
    let e = eval(Kernel::Stresslet, &src, Targets::Sources, N).unwrap_err();
    assert!(matches!(e, Error::Missing { ref field, .. } if field == "sources.dipoles"), "{e}");
    let src = Sources { charges: None, ..data.sources() };
    assert!(eval(Kernel::Laplace, &src, Targets::Sources, N)
        .unwrap_err()
        .to_string()
        .contains("sources.charges is missing"));
    // output of the wrong length
    let mut u = vec![0.0; 2 * N];
    let e = solver(Kernel::Stokeslet, 1e-6).evaluate(&data.sources(), Targets::Sources, &mut u).unwrap_err();
    assert!(matches!(e, Error::LengthMismatch { ref field, .. } if field == "output"), "{e}");
}

#[test]
fn tolerance_and_parameters_out_of_range_are_rejected() {
    let d = box_unequal();
    for tol in [1e-14, 0.5, f64::NAN, -1e-6, 0.0] {
        let e = EwaldSolver::<f64>::new(&EwaldOptions::new(Kernel::Laplace, d, tol), N, N).err().unwrap();
        assert!(matches!(e, Error::OutOfRange { ref field, .. } if field == "problem.tolerance"), "{tol}: {e}");
    }
    let e = EwaldSolver::<f32>::new(&EwaldOptions::new(Kernel::Laplace, d, 1e-8), N, N).err().unwrap();
    assert!(e.to_string().contains("f32"), "{e}");
    let mut o = EwaldOptions::new(Kernel::Laplace, d, 1e-6);
    o.rc = Some(0.5);
    let e = EwaldSolver::<f64>::new(&o, N, N).err().unwrap();
    assert!(matches!(e, Error::OutOfRange { ref field, .. } if field == "ewald.rc"), "{e}");
    let mut o = EwaldOptions::new(Kernel::Laplace, d, 1e-6);
    o.window_support = Some(7);
    let e = EwaldSolver::<f64>::new(&o, N, N).err().unwrap();
    assert!(matches!(e, Error::OutOfRange { ref field, .. } if field == "ewald.window_support"), "{e}");
    let mut o = EwaldOptions::new(Kernel::Stokes, d, 1e-12);
    o.max_grid_bytes = Some(1000);
    let e = EwaldSolver::<f64>::new(&o, N, N).err().unwrap();
    assert!(matches!(e, Error::Resource { .. }) && e.to_string().contains("limit of 1.00 kB"), "{e}");
    let e = parki_core::Domain::new([1.0, 0.0, 1.0], [true; 3]).unwrap_err();
    assert!(e.to_string().contains("problem.box[1]"), "{e}");
}

#[test]
fn too_many_particles_are_refused_at_plan_time_with_the_estimate() {
    // issue 8, defect 8: 1e10 particles used to abort in an allocation of 240 GB
    let d = box_unequal();
    let opts = EwaldOptions::new(Kernel::Stokes, d, 1e-6);
    let n = 10_000_000_000usize;
    let e = EwaldSolver::<f64>::new(&opts, n, n).err().unwrap();
    let m = e.to_string();
    assert!(matches!(e, Error::Resource { .. }), "{m}");
    assert!(m.contains("10000000000 sources") && m.contains("per rank") && m.contains("available"), "{m}");
    assert!(m.contains(" GB") || m.contains(" TB"), "the estimate in readable units: {m}");
    // a plan that fits: the estimate is what the plan was checked against, and it counts the
    // grids the plan holds
    let s = EwaldSolver::<f64>::new(&opts, N, N).unwrap();
    let est = EwaldSolver::<f64>::estimate_memory(&opts, N, N).unwrap();
    assert_eq!(&est, s.memory());
    let p = s.params();
    let grid_bytes = (9 * 2 * (p.grid[0] / 2 + 1) * p.grid[1] * p.grid[2] * 8) as f64;
    assert!(est.grids >= grid_bytes && est.total < 20.0 * grid_bytes + 1e4 * N as f64, "{est:?}");
    assert!(est.particles == 0.0 && est.cell_lists > 0.0 && est.scratch > 0.0, "{est:?}");
    // free axes: the zero-padded FFT grid (2x the grid per free axis) and the kernel tables
    let free = parki_core::Domain::new([1.0, 1.2, 0.9], [false; 3]).unwrap();
    let opts = EwaldOptions::new(Kernel::Stokeslet, free, 1e-6);
    let s = EwaldSolver::<f64>::new(&opts, N, N).unwrap();
    let est = EwaldSolver::<f64>::estimate_memory(&opts, N, N).unwrap();
    let n = s.params().free.as_ref().unwrap().fft_len;
    let padded = (3 * 2 * (n[0] / 2 + 1) * n[1] * n[2] * 8) as f64;
    let tables = (6 * (n[0] / 2 + 1) * (n[1] / 2 + 1) * (n[2] / 2 + 1) * 8) as f64;
    assert!(est.grids >= padded + tables && est.grids < 3.0 * (padded + tables), "{est:?} {n:?}");
}

#[test]
fn non_neutral_input_is_computed_with_a_warning() {
    let domain = box_unequal();
    let data = Data::new(&domain, Distribution::Uniform, N, 44);
    let q: Vec<f64> = data.q.iter().map(|v| v + 0.25).collect();
    let f: Vec<[f64; 3]> = data.f.iter().map(|v| [v[0] + 0.1, v[1], v[2] - 0.3]).collect();
    let src = Sources { charges: Some(&q), forces: Some(&f), ..data.sources() };
    for (kernel, word) in
        [(Kernel::Laplace, "net charge"), (Kernel::Stokeslet, "net force"), (Kernel::Stokes, "net force")]
    {
        let mut s = solver(kernel, 1e-8);
        let mut u = vec![0.0; N * kernel.output_dim()];
        let ev = s.evaluate(&src, Targets::Sources, &mut u).unwrap();
        assert!(ev.warnings.iter().any(|w| w.contains(word)), "{}: {:?}", kernel.name(), ev.warnings);
        let reference = ClassicalEwald::new(domain, N, N).evaluate(kernel, &src, &data.pos);
        let e = rel_rms(&u, &reference);
        assert!(e < 1e-8, "{}: {e:e}", kernel.name());
    }
    // neutral input: no warning
    let mut u = vec![0.0; N];
    let ev = solver(Kernel::Laplace, 1e-6).evaluate(&data.sources(), Targets::Sources, &mut u).unwrap();
    assert!(ev.warnings.is_empty(), "{:?}", ev.warnings);
}

#[test]
fn empty_sets_give_zero_potential() {
    let domain = box_unequal();
    let data = Data::new(&domain, Distribution::Uniform, N, 45);
    let none: Vec<[f64; 3]> = Vec::new();
    let src =
        Sources { positions: &none, charges: Some(&[]), forces: Some(&[]), dipoles: Some(&[]), normals: Some(&[]) };
    let mut s = EwaldSolver::<f64>::new(&EwaldOptions::new(Kernel::Stokes, domain, 1e-6), 0, N).unwrap();
    let mut u = vec![1.0; 3 * N];
    s.evaluate(&src, Targets::Points(&data.pos), &mut u).unwrap();
    assert!(u.iter().all(|&v| v == 0.0));
    let mut s = EwaldSolver::<f64>::new(&EwaldOptions::new(Kernel::Stokes, domain, 1e-6), N, 0).unwrap();
    let mut u: Vec<f64> = Vec::new();
    s.evaluate(&data.sources(), Targets::Points(&none), &mut u).unwrap();
}
