//! f32 solvers given the f64 positions their positions were rounded from
//! ([`parki_dist::EwaldSolver::evaluate_exact`]; docs/design.md, "f32 on f64 positions").
//!
//! Rounding f64 positions to f32 at the scale of the box moves a pair `r` apart by about
//! `eps L`, so that its term changes by `q eps L / r^2`: on 1e5 uniform points one pair 1.4e-4
//! apart made the narrowed f32 run 4.1e-5 off (Laplace at tol 1e-6). Given the f64 positions
//! the cell lists round coordinates relative to their cells and the far field places its
//! windows at the f64 positions; the error model prices the cells' rounding per cut-off.

use crate::common::{mpirun_child, rel_rms, Data};
use parki_comm::ReduceOp;
use parki_core::{Domain, Error, Kernel, Sources};
use parki_dist::{
    Comm, Decomposition, DistEwaldSolver, EwaldOptions, EwaldSolver, ExactPositions, ParallelOptions, PositionRounding,
    SortMode, SourceStatistics, Targets, Universe,
};
use parki_reference::generate::{Distribution, Rng};

/// The f64 solver at tol 1e-11 on the exact data (validated against the classical sum and
/// the direct sums elsewhere), at every target.
fn reference(opts: &EwaldOptions, data: &Data, targets: Option<&[[f64; 3]]>) -> Vec<f64> {
    let o = EwaldOptions::new(opts.kernel, opts.domain, 1e-11).field(opts.field_request().is_some());
    let nt = targets.map_or(data.pos.len(), <[_]>::len);
    let mut u = vec![0.0; nt * o.output_dim()];
    let t = targets.map_or(Targets::Sources, Targets::Points);
    EwaldSolver::<f64>::new(&o, data.pos.len(), nt).unwrap().evaluate(&data.sources(), t, &mut u).unwrap();
    u
}

/// Every kernel part, 3P and 0P (the field too, separate targets): the f32 solver planned with
/// [`PositionRounding::F32Cells`] holds the tolerance on the exact positions, while the same
/// solver given only the narrowed positions is several times the tolerance off.
#[test]
fn f32_on_exact_positions_holds_the_tolerance() {
    let cube = Domain::triply_periodic([1.0, 1.0, 1.0]).unwrap();
    let free = Domain::new([1.0, 1.2, 0.9], [false; 3]).unwrap();
    let mut failures = Vec::new();
    for (name, kernel, domain, dist, n, seed, tol, field, separate) in [
        // seed 3: one pair 1.4e-4 apart (the spacing is 2e-2)
        ("laplace 3P", Kernel::Laplace, cube, Distribution::Uniform, 100_000, 3, 1e-6, false, false),
        ("stokeslet 3P", Kernel::Stokeslet, cube, Distribution::Uniform, 100_000, 3, 1e-6, false, false),
        ("stresslet 3P", Kernel::Stresslet, cube, Distribution::Uniform, 100_000, 3, 1e-4, false, false),
        ("laplace + field 0P, targets", Kernel::Laplace, free, Distribution::Normal, 100_000, 5, 1e-5, true, true),
    ] {
        let data = Data::new(&domain, dist, n, seed);
        let d32 = data.cast();
        let targets = separate.then(|| Data::new(&domain, dist, 20_000, seed + 1).pos);
        let t32: Option<Vec<[f32; 3]>> = targets.as_ref().map(|t| t.iter().map(|p| p.map(|x| x as f32)).collect());
        let comm = Comm::single();
        let stats = SourceStatistics::measure(
            &comm,
            kernel,
            &domain,
            &data.sources(),
            targets.as_deref(),
            PositionRounding::F32Cells,
        );
        let opts = EwaldOptions::new(kernel, domain, tol).field(field).statistics(Some(stats));
        let exact_u = reference(&opts, &data, targets.as_deref());
        let nt = targets.as_ref().map_or(n, Vec::len);
        let mut s = EwaldSolver::<f32>::new(&opts, n, nt).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut u = vec![0.0f32; nt * opts.output_dim()];
        let t = t32.as_deref().map_or(Targets::Sources, Targets::Points);
        let exact = ExactPositions { sources: &data.pos, targets: targets.as_deref() };
        s.evaluate_exact(&d32.sources(), t, exact, &mut u).unwrap();
        let fine = rel_rms(&u, &exact_u);
        s.evaluate(&d32.sources(), t, &mut u).unwrap();
        let narrowed = rel_rms(&u, &exact_u);
        let p = s.params();
        println!(
            "{name}, N {n}, tol {tol:e}: cells {:?}, estimate {:.2e} (round-off {:.2e}); error {fine:.3e} on the \
             exact positions, {narrowed:.3e} narrowed",
            p.cells, p.estimate.total, p.estimate.rounding
        );
        if fine > tol {
            failures.push(format!("{name}: {fine:e} above {tol:e}"));
        }
        if narrowed < 3.0 * tol {
            failures.push(format!("{name}: narrowed only {narrowed:e}: the case does not show the rounding"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Exact positions that do not belong to the positions given are errors naming the array and
/// the particle; a coordinate just below a face that rounds to the face (kept inside by the
/// next f32 below, as the application narrows) is accepted and computed.
#[test]
fn exact_positions_are_checked() {
    let domain = Domain::triply_periodic([1.0, 1.0, 1.0]).unwrap();
    let n = 500;
    let mut data = Data::new(&domain, Distribution::Uniform, n, 9);
    data.pos[7][1] = 1.0 - 1e-9;
    let d32: Vec<[f32; 3]> = parki_core::validate::narrow_positions(&data.pos, &domain);
    assert_eq!(d32[7][1], 1.0f32.next_down());
    let opts = EwaldOptions::new(Kernel::Laplace, domain, 1e-5);
    let mut s = EwaldSolver::<f32>::new(&opts, n, n).unwrap();
    let q: Vec<f32> = data.q.iter().map(|&x| x as f32).collect();
    let sources = Sources::laplace(&d32, &q);
    let mut u = vec![0.0f32; n];
    let exact = |p| ExactPositions { sources: p, targets: None };
    s.evaluate_exact(&sources, Targets::Sources, exact(&data.pos), &mut u).unwrap();
    let reference = reference(&opts, &data, None);
    let e = rel_rms(&u, &reference);
    assert!(e < 1e-5, "{e}");
    // one row short
    let err = s.evaluate_exact(&sources, Targets::Sources, exact(&data.pos[1..]), &mut u).unwrap_err();
    assert!(
        matches!(&err, Error::LengthMismatch { field, found, expected, .. }
        if field == "exact.sources" && *found == n - 1 && *expected == n),
        "{err}"
    );
    // a position that does not round to the one given
    let mut moved = data.pos.clone();
    moved[42][2] += 1e-3;
    let err = s.evaluate_exact(&sources, Targets::Sources, exact(&moved), &mut u).unwrap_err();
    assert!(matches!(&err, Error::OutOfRange { field, .. } if field == "exact.sources[42]"), "{err}");
    assert!(err.to_string().contains("sources.positions[42]"), "{err}");
    // NaN and outside the box
    let mut nan = data.pos.clone();
    nan[3][0] = f64::NAN;
    let err = s.evaluate_exact(&sources, Targets::Sources, exact(&nan), &mut u).unwrap_err();
    assert!(matches!(&err, Error::NonFinite { field, index: 3, .. } if field == "exact.sources"), "{err}");
    // separate targets need theirs, and sources as targets none
    let t32 = &d32[..10];
    let mut ut = vec![0.0f32; 10];
    let err = s.evaluate_exact(&sources, Targets::Points(t32), exact(&data.pos), &mut ut).unwrap_err();
    assert!(matches!(&err, Error::Missing { field, .. } if field == "exact.targets"), "{err}");
    let both = ExactPositions { sources: &data.pos, targets: Some(&data.pos[..10]) };
    let err = s.evaluate_exact(&sources, Targets::Sources, both, &mut u).unwrap_err();
    assert!(matches!(&err, Error::Missing { field, .. } if field == "targets.positions"), "{err}");
    s.evaluate_exact(&sources, Targets::Points(t32), both, &mut ut).unwrap();
}

/// Over 3 ranks (mpirun, this test binary again), slabs and pencils, the sources' and the
/// separate targets' residuals travel with them (MPI-SORT and the ghost sources): each rank's
/// share equals the one-process result within f32 rounding, and the distributed error on the
/// exact positions is that of one process, several times below the narrowed positions'.
#[test]
fn distributed_exact_positions_equal_one_process() {
    if std::env::var("PARKI_EWALD_EXACT_CHILD").is_ok() {
        let universe = Universe::init().unwrap();
        distributed_child(&universe.world());
        return;
    }
    let test = "exact_positions::distributed_exact_positions_equal_one_process";
    let Some(text) = mpirun_child(test, "PARKI_EWALD_EXACT_CHILD", 3) else { return };
    assert_eq!(text.matches("exact positions over 3 ranks: equal").count(), 3 * 4, "{text}");
}

/// Moves the first `2 count` particles into pairs `2e-3` apart that straddle the planes between
/// cell layers along y and z (the split axes; some of them are ranks' boundaries, where one of
/// each pair is the other's ghost source).
fn straddle(data: &mut Data, cells: &parki_nearfield::CellGrid, count: usize) {
    let (w, dims) = (cells.widths(), cells.global_dims());
    let mut rng = Rng::new(77);
    for k in 0..count {
        let axis = 1 + k % 2;
        let plane = (1 + rng.next_u64() as usize % (dims[axis] - 1)) as f64 * w[axis];
        let mut p = data.pos[2 * k];
        p[axis] = plane - 1e-3;
        let mut q = p;
        q[axis] = plane + 1e-3;
        q[0] = if q[0] > 0.5 { q[0] - 5e-4 } else { q[0] + 5e-4 };
        data.pos[2 * k] = p;
        data.pos[2 * k + 1] = q;
    }
}

fn distributed_child(comm: &Comm) {
    let (rank, size) = (comm.rank(), comm.size());
    let n = 40_000;
    let mine = rank * n / size..(rank + 1) * n / size;
    for (periodic, separate) in [(true, false), (false, true)] {
        let domain = Domain::new([1.0, 1.0, 1.0], [periodic; 3]).unwrap();
        let mut data = Data::new(&domain, Distribution::Uniform, n, 3);
        let opts = EwaldOptions::new(Kernel::Laplace, domain, 1e-6).threads(1);
        straddle(&mut data, EwaldSolver::<f32>::new(&opts, n, n).unwrap().cells(), 4000);
        let d32 = data.cast();
        let targets = separate.then(|| Data::new(&domain, Distribution::Uniform, 6000, 4).pos);
        let t32: Option<Vec<[f32; 3]>> = targets.as_ref().map(|t| t.iter().map(|p| p.map(|x| x as f32)).collect());
        let nt = targets.as_ref().map_or(n, Vec::len);
        let tmine = rank * nt / size..(rank + 1) * nt / size;
        // one process, every rank alike (f64 reference and the f32 solver)
        let reference = reference(&opts, &data, targets.as_deref());
        let mut single = vec![0.0f32; nt];
        let t = t32.as_deref().map_or(Targets::Sources, Targets::Points);
        let exact = ExactPositions { sources: &data.pos, targets: targets.as_deref() };
        EwaldSolver::<f32>::new(&opts, n, nt).unwrap().evaluate_exact(&d32.sources(), t, exact, &mut single).unwrap();
        for pencils in [false, true] {
            let popts =
                ParallelOptions::new().decomposition(if pencils { Decomposition::Pencil } else { Decomposition::Slab });
            let mut s = DistEwaldSolver::<f32>::new(comm, &opts, popts, n, nt).unwrap();
            let src = Sources::laplace(&d32.pos[mine.clone()], &d32.q[mine.clone()]);
            let mut u = vec![0.0f32; tmine.len()];
            let t = t32.as_ref().map_or(Targets::Sources, |t| Targets::Points(&t[tmine.clone()]));
            let exact = ExactPositions {
                sources: &data.pos[mine.clone()],
                targets: targets.as_ref().map(|t| &t[tmine.clone()]),
            };
            s.evaluate_exact(&src, t, exact, &mut u, SortMode::Full).unwrap();
            let share = if separate { tmine.clone() } else { mine.clone() };
            let one: Vec<f64> = single[share.clone()].iter().map(|&x| x as f64).collect();
            let mut narrowed = vec![0.0f32; tmine.len()];
            s.evaluate(&src, t, &mut narrowed, SortMode::Full).unwrap();
            // squared differences summed over the ranks: from one process, and against the
            // reference with the exact and the narrowed positions, over the reference's norm
            let sq = |v: &[f32], r: &[f64]| v.iter().zip(r).map(|(a, b)| (*a as f64 - b).powi(2)).sum::<f64>();
            let r = &reference[share];
            let mut sums = [sq(&u, &one), sq(&u, r), sq(&narrowed, r), r.iter().map(|x| x * x).sum()];
            comm.all_reduce_f64(&mut sums, ReduceOp::Sum);
            let [diff, fine, coarse] = [0, 1, 2].map(|k| (sums[k] / sums[3]).sqrt());
            assert!(diff < 3e-7, "{diff:e} from one process (periodic {periodic}, pencils {pencils})");
            assert!(fine <= 1e-6 && coarse > 2.0 * fine, "exact {fine:e}, narrowed {coarse:e}");
            println!(
                "exact positions over {size} ranks: equal (periodic {periodic}, pencils {pencils}; {diff:.1e} from one \
                 process; error {fine:.2e}, narrowed {coarse:.2e})"
            );
        }
    }
}
