//! Boxes far from 1 ([`parki_dist::DistEwaldSolver::length_unit`]): a solver planned for a box
//! of sides `s L` computes in the unit `s` (a power of two), so with positions and dipoles times
//! `s` every value it returns is the unit box's over `s` (the field over `s^2`), bit for bit, in
//! f64 from `2^-700` to `2^700` and in f32 from `2^-40` to `2^30`, every kernel, triply periodic
//! and free space, separate targets, measured statistics, on one process and over 3 ranks; and
//! the unit box's error lies in `[tol/100, tol]` against the classical Ewald sum (3P) or the
//! direct sum (0P). Before, the solver refused boxes outside `[1e-30, 1e30]` (f64) and
//! `[1e-4, 1e4]` (f32), and without a check it answered NaN or errors of 0.5 there.
//!
//! Strengths far from 1 ([`parki_dist::Evaluation::strength_unit`]): with charges, forces and
//! dipoles times `2^k` every value is the unit strengths' times `2^k` (rounded once), from
//! subnormal strengths to outputs next to the largest finite number, f32 and f64, every kernel,
//! 3P and 0P, on one process and over 3 ranks. Before, f32 strengths of `1e35` answered NaN and
//! subnormal ones (`1e-40`) put the stresslet 3 % off, silently.

use crate::common::{mpirun_child, rel_rms, Data, KERNELS};
use parki_core::{Domain, Kernel, Real, Sources};
use parki_dist::{
    measure_occupancy, Comm, Decomposition, DistEwaldSolver, EwaldOptions, EwaldSolver, ParallelOptions,
    PositionRounding, SolverReal, SortMode, SourceStatistics, Targets, Universe,
};
use parki_reference::direct::free_space_sum;
use parki_reference::generate::Distribution;
use parki_reference::ClassicalEwald;

const N: usize = 300;

/// A box of sides 1 and longer: its longest side times `s` rounds to `s` in `log2`, so the
/// solver's unit for the scaled box is `s` itself.
fn unit_domain(periodic: bool) -> Domain {
    Domain::new([1.0, 1.05, 1.1], [periodic; 3]).unwrap()
}

/// The problem times `s` in precision `T`: positions and dipoles times `s` (exact), a far-edge
/// coordinate that rounds onto the box's side moved inside.
struct Scaled<T> {
    domain: Domain,
    data: Data<T>,
    targets: Vec<[T; 3]>,
}

impl<T: Real> Scaled<T> {
    fn new(data: &Data, targets: &[[f64; 3]], domain: &Domain, s: f64) -> Self {
        let big = Domain::new(domain.lengths().map(|l| l * s), domain.periodic()).unwrap();
        let inside = |v: &[[f64; 3]]| -> Vec<[T; 3]> {
            v.iter()
                .map(|p| {
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
        let cast =
            |v: &[[f64; 3]], by: f64| -> Vec<[T; 3]> { v.iter().map(|p| p.map(|x| T::from_f64(x * by))).collect() };
        let data = Data {
            pos: inside(&data.pos),
            q: data.q.iter().map(|&q| T::from_f64(q)).collect(),
            f: cast(&data.f, 1.0),
            d: cast(&data.d, s),
            n: cast(&data.n, 1.0),
        };
        Self { domain: big, data, targets: inside(targets) }
    }

    fn sources(&self) -> Sources<'_, T> {
        self.data.sources()
    }
}

/// One solve of `kernel` (with the field for Laplace when `field`) at the sources or at the
/// separate targets, with statistics measured on the scaled problem when `measured`.
fn solve<T: SolverReal>(
    kernel: Kernel,
    p: &Scaled<T>,
    tol: f64,
    field: bool,
    separate: bool,
    measured: bool,
) -> (Vec<f64>, EwaldSolver<T>) {
    let comm = Comm::single();
    let targets = separate.then_some(&p.targets[..]);
    let mut opts = EwaldOptions::new(kernel, p.domain, tol).field(field);
    if measured {
        let stats = SourceStatistics::measure(&comm, kernel, &p.domain, &p.sources(), targets, PositionRounding::Exact);
        let occupancy = measure_occupancy(&comm, &p.domain, &p.data.pos, targets);
        opts = opts.statistics(Some(stats)).occupancy(Some(occupancy));
    }
    let nt = if separate { p.targets.len() } else { N };
    let mut solver = EwaldSolver::<T>::new(&opts, N, nt).unwrap();
    let mut u = vec![T::ZERO; nt * opts.output_dim()];
    let t = if separate { Targets::Points(&p.targets) } else { Targets::Sources };
    solver.evaluate(&p.sources(), t, &mut u).unwrap();
    (u.iter().map(|v| v.to_f64()).collect(), solver)
}

/// Every value of `got` is `unit`'s over `s` (the field, the last 3 of each `dim`, over `s^2`)
/// bit for bit.
fn assert_scaled(label: &str, got: &[f64], unit: &[f64], dim: usize, potential: usize, s: f64) {
    assert_eq!(got.len(), unit.len());
    for (k, (a, b)) in got.iter().zip(unit).enumerate() {
        let expected = if k % dim < potential { b / s } else { b / s / s };
        assert_eq!(a.to_bits(), expected.to_bits(), "{label}: value {k}: {a:e} against {expected:e}");
    }
}

fn reference(kernel: Kernel, domain: &Domain, data: &Data) -> Vec<f64> {
    if domain.periodicity() == 3 {
        ClassicalEwald::new(*domain, N, N).evaluate(kernel, &data.sources(), &data.pos)
    } else {
        free_space_sum(kernel, &data.sources(), &data.pos)
    }
}

fn case<T: SolverReal>(kernel: Kernel, periodic: bool, scales: [f64; 2], tol: f64, failures: &mut Vec<String>) {
    let domain = unit_domain(periodic);
    let data = Data::new(&domain, Distribution::Uniform, N, 41);
    let one = Scaled::<T>::new(&data, &[], &domain, 1.0);
    let (unit, unit_solver) = solve(kernel, &one, tol, false, false, false);
    let label = format!("{} {} {}", if periodic { "3P" } else { "0P" }, kernel.name(), T::NAME);
    let e = rel_rms(&unit, &reference(kernel, &domain, &data));
    println!("{label}: unit box error {e:.3e} ({:.3} tol)", e / tol);
    if !(e <= tol && e >= tol / 100.0) {
        failures.push(format!("{label}: unit box error {e:e} at tol {tol:e}"));
    }
    for s in scales {
        let (got, solver) = solve(kernel, &Scaled::<T>::new(&data, &[], &domain, s), tol, false, false, false);
        assert_eq!(solver.length_unit(), s, "{label}: the unit of a box of {s:e}");
        assert_scaled(&format!("{label} box x {s:e}"), &got, &unit, kernel.output_dim(), kernel.output_dim(), s);
        // the parameters in the caller's units
        let (a, b) = (solver.params(), unit_solver.params());
        assert_eq!((a.grid, a.cells, a.xi.to_bits()), (b.grid, b.cells, (b.xi / s).to_bits()), "{label}: xi");
        assert_eq!(a.rc.to_bits(), (b.rc * s).to_bits(), "{label}: rc");
    }
}

#[test]
fn far_from_one_boxes_give_the_unit_boxs_values_exactly() {
    let mut failures = Vec::new();
    for periodic in [true, false] {
        for kernel in KERNELS {
            case::<f64>(kernel, periodic, [2f64.powi(-700), 2f64.powi(700)], 1e-6, &mut failures);
            case::<f32>(kernel, periodic, [2f64.powi(-40), 2f64.powi(30)], 1e-4, &mut failures);
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The Laplace field at separate targets, with statistics and occupancy measured on the scaled
/// problem (they are measured in the solver's unit): the unit box's, scaled.
#[test]
fn field_targets_and_measured_statistics_scale_exactly() {
    for periodic in [true, false] {
        let domain = unit_domain(periodic);
        let data = Data::new(&domain, Distribution::Normal, N, 43);
        let targets = Data::new(&domain, Distribution::Uniform, 200, 44).pos;
        let dim = 4;
        let unit = solve(Kernel::Laplace, &Scaled::<f64>::new(&data, &targets, &domain, 1.0), 1e-8, true, true, true).0;
        for s in [2f64.powi(-500), 2f64.powi(480)] {
            let p = Scaled::<f64>::new(&data, &targets, &domain, s);
            let got = solve(Kernel::Laplace, &p, 1e-8, true, true, true).0;
            assert_scaled(&format!("periodic {periodic} field x {s:e}"), &got, &unit, dim, 1, s);
        }
        let unit = solve(Kernel::Laplace, &Scaled::<f32>::new(&data, &targets, &domain, 1.0), 1e-4, true, true, true).0;
        let s = 2f64.powi(-20);
        let got = solve(Kernel::Laplace, &Scaled::<f32>::new(&data, &targets, &domain, s), 1e-4, true, true, true).0;
        assert_scaled(&format!("periodic {periodic} f32 field x {s:e}"), &got, &unit, dim, 1, s);
    }
}

#[test]
fn errors_name_the_callers_values() {
    let domain = unit_domain(true);
    let data = Data::new(&domain, Distribution::Uniform, N, 45);
    let s = 2f64.powi(-300);
    let p = Scaled::<f64>::new(&data, &[], &domain, s);
    // a fixed cut-off over a third of the box, in the caller's units
    let rc = 0.5 * s;
    let opts = EwaldOptions::new(Kernel::Laplace, p.domain, 1e-6).rc(Some(rc));
    let msg = EwaldSolver::<f64>::new(&opts, N, N).err().expect("refused").to_string();
    assert!(msg.contains("ewald.rc") && msg.contains(&format!("{rc}")), "{msg}");
    // a particle outside the box, named with its own coordinate
    let mut solver = EwaldSolver::<f64>::new(&EwaldOptions::new(Kernel::Laplace, p.domain, 1e-6), N, N).unwrap();
    let mut pos = p.data.pos.clone();
    pos[7][1] = 2.0 * s;
    let sources = Sources { positions: &pos, ..p.sources() };
    let mut u = vec![0.0; N];
    let msg = solver.evaluate(&sources, Targets::Sources, &mut u).expect_err("refused").to_string();
    assert!(msg.contains("sources.positions[7]") && msg.contains(&format!("{:e}", 2.0 * s)), "{msg}");
}

/// `v 2^k` in `T`, one rounding (what a solver scaling its results back does).
fn times_two_to<T: Real>(v: T, k: i32) -> T {
    T::from_f64(parki_core::units::times_two_to(v.to_f64(), k))
}

/// The problem's strengths (charges, forces, dipoles; not the normals) times `2^k` in `T`, and
/// the unit problem those are `2^k` times exactly (where `2^k` makes them subnormal, the unit
/// problem holds the digits they kept).
fn strengths_times<T: Real>(data: &Data, k: i32) -> (Data<T>, Data<T>) {
    let cast = |x: f64| T::from_f64(parki_core::units::times_two_to(x, k));
    let back = |x: T| times_two_to(x, -k);
    let v3 = |v: &[[f64; 3]]| -> Vec<[T; 3]> { v.iter().map(|p| p.map(cast)).collect() };
    let big = Data::<T> {
        pos: data.pos.iter().map(|p| p.map(T::from_f64)).collect(),
        q: data.q.iter().map(|&q| cast(q)).collect(),
        f: v3(&data.f),
        d: v3(&data.d),
        n: data.n.iter().map(|p| p.map(T::from_f64)).collect(),
    };
    let unit = Data::<T> {
        pos: big.pos.clone(),
        q: big.q.iter().map(|&q| back(q)).collect(),
        f: big.f.iter().map(|p| p.map(back)).collect(),
        d: big.d.iter().map(|p| p.map(back)).collect(),
        n: big.n.clone(),
    };
    (big, unit)
}

/// One evaluation of `kernel` (with the Laplace field) at the sources: the values and the
/// strength unit the solver chose.
fn solve_strengths<T: SolverReal>(kernel: Kernel, domain: &Domain, data: &Data<T>, tol: f64) -> (Vec<T>, f64) {
    let field = kernel == Kernel::Laplace;
    let opts = EwaldOptions::new(kernel, *domain, tol).field(field);
    let mut solver = EwaldSolver::<T>::new(&opts, N, N).unwrap();
    let mut u = vec![T::ZERO; N * opts.output_dim()];
    let e = solver.evaluate(&data.sources(), Targets::Sources, &mut u).unwrap();
    (u, e.strength_unit)
}

fn strength_case<T: SolverReal>(kernel: Kernel, periodic: bool, tol: f64) {
    let domain = unit_domain(periodic);
    let data = Data::new(&domain, Distribution::Uniform, N, 49);
    let label = format!("{} {} {}", if periodic { "3P" } else { "0P" }, kernel.name(), T::NAME);
    // the largest exponent whose outputs stay finite (a factor 4 to spare), and one that makes
    // the strengths subnormal (16 bits of f32's 24, 40 of f64's 53 left)
    let (unit, w) = solve_strengths(kernel, &domain, &strengths_times::<T>(&data, 0).1, tol);
    assert_eq!(w, 1.0, "{label}");
    let largest = unit.iter().fold(0.0f64, |m, v| m.max(v.to_f64().abs()));
    let max = if T::BYTES == 4 { f32::MAX as f64 } else { f64::MAX };
    let huge = (max / largest).log2().floor() as i32 - 2;
    let tiny = if T::BYTES == 4 { -134 } else { -1035 };
    for k in [huge, tiny] {
        let (big, unit_data) = strengths_times::<T>(&data, k);
        let (unit, w) = solve_strengths(kernel, &domain, &unit_data, tol);
        assert_eq!(w, 1.0, "{label}");
        let (got, w) = solve_strengths(kernel, &domain, &big, tol);
        assert!(w != 1.0, "{label} 2^{k}: strengths left as they are");
        let mut finite = 0;
        for (i, (a, b)) in got.iter().zip(&unit).enumerate() {
            let expected = times_two_to(*b, k);
            assert_eq!(
                a.to_f64().to_bits(),
                expected.to_f64().to_bits(),
                "{label} 2^{k}: value {i}: {a:e} against {expected:e}"
            );
            finite += usize::from(a.to_f64().is_finite() && *a != T::ZERO);
        }
        assert_eq!(finite, got.len(), "{label} 2^{k}: zero or non-finite values");
        println!("{label}: strengths x 2^{k} (unit 2^{}) equal the unit strengths' x 2^{k}", w.log2());
    }
}

#[test]
fn far_from_one_strengths_give_the_unit_strengths_values_exactly() {
    for periodic in [true, false] {
        for kernel in KERNELS {
            strength_case::<f64>(kernel, periodic, 1e-8);
            strength_case::<f32>(kernel, periodic, 1e-4);
        }
    }
}

/// Statistics measured on strengths of `2^600` (f64; their squares summed overflowed before)
/// choose the parameters the unit strengths' choose; a net charge is reported in the caller's
/// units (with one periodic axis it is an error).
#[test]
fn measured_statistics_and_messages_of_far_from_one_strengths() {
    let comm = Comm::single();
    let domain = unit_domain(true);
    let data = Data::new(&domain, Distribution::Normal, N, 51);
    for kernel in KERNELS {
        let params = |k: i32| {
            let (big, _) = strengths_times::<f64>(&data, k);
            let stats =
                SourceStatistics::measure(&comm, kernel, &domain, &big.sources(), None, PositionRounding::Exact);
            let opts = EwaldOptions::new(kernel, domain, 1e-8).statistics(Some(stats));
            EwaldSolver::<f64>::new(&opts, N, N).unwrap().params().clone()
        };
        let (a, b) = (params(0), params(600));
        assert_eq!(
            (a.grid, a.cells, a.xi.to_bits(), a.rc.to_bits()),
            (b.grid, b.cells, b.xi.to_bits(), b.rc.to_bits()),
            "{}",
            kernel.name()
        );
    }
    let line = Domain::new([1.0, 1.05, 1.1], [true, false, false]).unwrap();
    let pos: Vec<[f32; 3]> =
        Data::new(&line, Distribution::Uniform, N, 52).pos.iter().map(|p| p.map(|x| x as f32)).collect();
    let q = vec![1e-40f32; N];
    let opts = EwaldOptions::new(Kernel::Laplace, line, 1e-4);
    let mut solver = EwaldSolver::<f32>::new(&opts, N, N).unwrap();
    let mut u = vec![0.0f32; N];
    let msg =
        solver.evaluate(&Sources::laplace(&pos, &q), Targets::Sources, &mut u).expect_err("net charge").to_string();
    let net = format!("{:.6e}", N as f64 * 1e-40f32 as f64);
    assert!(msg.contains(&net), "{msg} does not name the net charge {net}");
}

/// Over 3 ranks (mpirun, this test binary again): each rank's share of a box of `2^-600`
/// gives the unit box's values over `s`, bit for bit, in slabs and in pencils (3P and 0P).
#[test]
fn distributed_far_from_one_boxes_scale_exactly() {
    if std::env::var("PARKI_EWALD_UNITS_CHILD").is_ok() {
        let universe = Universe::init().unwrap();
        let comm = universe.world();
        distributed_child(&comm);
        return;
    }
    let test = "units::distributed_far_from_one_boxes_scale_exactly";
    let Some(text) = mpirun_child(test, "PARKI_EWALD_UNITS_CHILD", 3) else { return };
    assert_eq!(text.matches("units over 3 ranks: equal").count(), 3 * 4, "{text}");
    assert_eq!(text.matches("strengths over 3 ranks: equal").count(), 3 * 2, "{text}");
}

fn distributed_child(comm: &Comm) {
    let (rank, size) = (comm.rank(), comm.size());
    let mine = rank * N / size..(rank + 1) * N / size;
    for periodic in [true, false] {
        let domain = unit_domain(periodic);
        let data = Data::new(&domain, Distribution::Uniform, N, 47);
        let run = |s: f64, pencils: bool| -> Vec<f64> {
            let p = Scaled::<f64>::new(&data, &[], &domain, s);
            let kernel = Kernel::Stokes;
            let popts = ParallelOptions::new().decomposition(match pencils {
                true => Decomposition::Pencil,
                false => Decomposition::Slab,
            });
            let opts = EwaldOptions::new(kernel, p.domain, 1e-6).threads(1);
            let mut solver = DistEwaldSolver::<f64>::new(comm, &opts, popts, N, N).unwrap();
            let m = mine.clone();
            let sources = Sources {
                positions: &p.data.pos[m.clone()],
                charges: None,
                forces: Some(&p.data.f[m.clone()]),
                dipoles: Some(&p.data.d[m.clone()]),
                normals: Some(&p.data.n[m.clone()]),
            };
            let mut u = vec![0.0; m.len() * 3];
            solver.evaluate(&sources, Targets::Sources, &mut u, SortMode::Full).unwrap();
            u
        };
        for pencils in [false, true] {
            let s = 2f64.powi(-600);
            let (unit, got) = (run(1.0, pencils), run(s, pencils));
            assert_scaled(&format!("{size} ranks, periodic {periodic}"), &got, &unit, 3, 3, s);
            println!("units over {size} ranks: equal (periodic {periodic}, pencils {pencils})");
        }
        // forces of 2^-1000: every rank agrees on the strength unit though only the last
        // holds the largest force
        let k = -1000;
        let j = (size - 1) * N / size;
        let mut unit_f = data.f.clone();
        unit_f[j] = unit_f[j].map(|x| x * 64.0);
        let big_f: Vec<[f64; 3]> = unit_f.iter().map(|p| p.map(|x| x * 2f64.powi(k))).collect();
        let run = |f: &[[f64; 3]]| -> (Vec<f64>, f64) {
            let m = mine.clone();
            let sources = Sources::stokeslet(&data.pos[m.clone()], &f[m.clone()]);
            let opts = EwaldOptions::new(Kernel::Stokeslet, domain, 1e-6).threads(1);
            let mut solver = DistEwaldSolver::<f64>::new(comm, &opts, ParallelOptions::new(), N, N).unwrap();
            let mut u = vec![0.0; m.len() * 3];
            let e = solver.evaluate(&sources, Targets::Sources, &mut u, SortMode::Full).unwrap();
            (u, e.strength_unit)
        };
        let (unit, _) = run(&unit_f);
        let (got, w) = run(&big_f);
        assert!(w != 1.0, "{size} ranks: strengths left as they are");
        for (i, (a, b)) in got.iter().zip(&unit).enumerate() {
            assert_eq!(a.to_bits(), (b * 2f64.powi(k)).to_bits(), "{size} ranks, strengths: value {i}");
        }
        println!("strengths over {size} ranks: equal (periodic {periodic}, unit 2^{})", w.log2());
    }
}
