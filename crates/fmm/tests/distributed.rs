//! The distributed FMM under `mpirun` (1, 2, 3 and 4 ranks, oversubscribed): uniform cube and
//! Plummer sphere, Laplace and the Stokeslet, targets the sources and `M != N`, the callers'
//! particles in contiguous blocks or all on one rank:
//!
//! - **equal to one process**: the values in the caller's order equal the one-process
//!   [`evaluate`] of the whole set within 1e-13 relative l2 (the local trees are the global
//!   tree cut along the splitters, the shared boxes' multipoles are summed, and the LET
//!   traversal makes the one-process decisions: only the order of summation differs);
//! - **accurate**, with the leaf size of the cost model: the error against the direct sum on
//!   sampled targets is below the tolerance's bound.
//!
//! The test re-runs this test binary under mpirun with `PARKI_FMM_MPI_CHILD` set; in the
//! children, `mpi_child` runs the cases.

use std::process::Command;

use parki_comm::{Comm, Universe};
use parki_core::isa::Isa;
use parki_core::Par;
use parki_fmm::{
    evaluate, evaluate_distributed, evaluate_stokeslet, evaluate_stokeslet_distributed, for_tolerance, FmmParams,
};
use parki_reference::generate::{particle_rng, Cloud};

const N: usize = 12_000;
const M: usize = 9_000;

fn relative(a: &[f64], b: &[f64]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den).sqrt()
}

/// The caller's block of `n` items on this rank: contiguous blocks, or all on rank 0.
fn block(comm: &Comm, n: usize, all_on_zero: bool) -> std::ops::Range<usize> {
    let (r, s) = (comm.rank(), comm.size());
    match all_on_zero {
        true if r == 0 => 0..n,
        true => n..n,
        false => r * n / s..(r + 1) * n / s,
    }
}

/// Laplace on `cloud`, targets the sources or separate: distributed against one process.
fn laplace_case(comm: &Comm, cloud: Cloud, separate: bool, all_on_zero: bool) {
    let x = cloud.points(21, 0..N);
    let y = cloud.points(22, 0..M);
    let q: Vec<f64> = (0..N).map(|i| particle_rng(23, i as u64).normal()).collect();
    let name = format!(
        "{}{}{}",
        cloud.name(),
        if separate { ", M != N" } else { "" },
        if all_on_zero { ", all on rank 0" } else { "" }
    );
    laplace_against_one(comm, &name, &x, &q, separate.then_some(&y[..]), all_on_zero, FmmParams::new(12, Some(48)));
}

/// Edge cases: fewer points than ranks make boxes, and points repeated at a few positions
/// (leaves at the deepest level, holding more than `max_leaf` points).
fn edge_cases(comm: &Comm) {
    let x = Cloud::Uniform.points(41, 0..7);
    let q: Vec<f64> = (0..7).map(|i| particle_rng(42, i as u64).normal()).collect();
    laplace_against_one(comm, "7 points", &x, &q, None, false, FmmParams::new(6, Some(1)));
    let base = Cloud::Gaussian.points(43, 0..30);
    let x: Vec<[f64; 3]> = (0..600).map(|i| base[i % 30]).collect();
    let q: Vec<f64> = (0..600).map(|i| particle_rng(44, i as u64).normal()).collect();
    laplace_against_one(comm, "30 positions x 20", &x, &q, None, false, FmmParams::new(8, Some(4)));
}

/// Distributed against one process for sources `x` with charges `q` and targets `targets` (the
/// sources when `None`).
fn laplace_against_one(
    comm: &Comm,
    name: &str,
    x: &[[f64; 3]],
    q: &[f64],
    targets: Option<&[[f64; 3]]>,
    all_on_zero: bool,
    params: FmmParams,
) {
    let (par, isa) = (Par::Seq, Isa::detect());
    let separate = targets.is_some();
    let (n, m) = (x.len(), targets.map_or(x.len(), |t| t.len()));
    let ms = block(comm, n, all_on_zero);
    let mt = if separate { block(comm, m, all_on_zero) } else { ms.clone() };
    let mine = targets.map(|t| &t[mt.clone()]);
    let out = evaluate_distributed(comm, &x[ms.clone()], &q[ms.clone()], mine, &params, isa, par).unwrap();
    let one = evaluate(x, q, targets, &params, isa, par).unwrap();
    let flat = |pot: &[f64], grad: &[[f64; 3]]| -> Vec<f64> {
        pot.iter().zip(grad).flat_map(|(p, g)| [*p, g[0], g[1], g[2]]).collect()
    };
    let dist = comm.all_gatherv(&flat(&out.potential, &out.gradient));
    let reference = flat(&one.potential, &one.gradient);
    let equal = relative(&dist, &reference);
    let s = &out.stats.let_tree;
    let (bytes, shared) = (comm.sum(s.bytes), comm.max(s.shared as u64));
    if comm.rank() == 0 {
        println!("fmm {} ranks, laplace {name}: equal {equal:.1e}, LET {bytes} B, {shared} shared boxes", comm.size(),);
    }
    assert!(equal <= 1e-13, "{} ranks, {name}: distributed vs one process {equal:e}", comm.size());
    if comm.size() > 1 && n > 100 {
        assert!(bytes > 0 && shared > 0, "remote boxes were read");
    }
}

/// The Stokeslet on the Plummer sphere with separate targets and the cost model's leaf:
/// against one process (when the leaf agrees) and against the direct sum.
fn stokeslet_case(comm: &Comm) {
    let cloud = Cloud::Plummer;
    let x = cloud.points(31, 0..N);
    let y = cloud.points(32, 0..M);
    let f: Vec<[f64; 3]> = (0..N)
        .map(|i| {
            let mut r = particle_rng(33, i as u64);
            [r.normal(), r.normal(), r.normal()]
        })
        .collect();
    let tol = 1e-6;
    let params = FmmParams::new(for_tolerance(tol / 10.0, true).unwrap().0, None);
    let (par, isa) = (Par::Seq, Isa::detect());
    let (ms, mt) = (block(comm, N, false), block(comm, M, false));
    let out = evaluate_stokeslet_distributed(comm, &x[ms.clone()], &f[ms], Some(&y[mt]), &params, isa, par).unwrap();
    let dist = comm.all_gatherv(&out.velocity.iter().flatten().copied().collect::<Vec<_>>());
    let one = evaluate_stokeslet(&x, &f, Some(&y), &params, isa, par).unwrap();
    let reference: Vec<f64> = one.velocity.iter().flatten().copied().collect();
    let equal = relative(&dist, &reference);
    // the direct sum at every 45th target
    let (mut num, mut den) = (0.0, 0.0);
    for j in (0..M).step_by(45) {
        let mut u = [0.0; 3];
        for (xi, fi) in x.iter().zip(&f) {
            let d = [y[j][0] - xi[0], y[j][1] - xi[1], y[j][2] - xi[2]];
            let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
            let r = r2.sqrt();
            let fd = (fi[0] * d[0] + fi[1] * d[1] + fi[2] * d[2]) / (r2 * r);
            for a in 0..3 {
                u[a] += fi[a] / r + fd * d[a];
            }
        }
        for a in 0..3 {
            num += (dist[3 * j + a] - u[a]).powi(2);
            den += u[a] * u[a];
        }
    }
    let err = (num / den).sqrt();
    let same_leaf = out.stats.max_leaf.0 == one.stats.max_leaf.0;
    if comm.rank() == 0 {
        println!(
            "fmm {} ranks, stokeslet plummer, M != N, leaf {} (one process {}): equal {equal:.1e}, error {err:.1e}",
            comm.size(),
            out.stats.max_leaf.0,
            one.stats.max_leaf.0
        );
    }
    assert!(err <= tol, "{} ranks: Stokeslet error {err:e} above {tol:e}", comm.size());
    if same_leaf {
        assert!(equal <= 1e-13, "{} ranks: Stokeslet distributed vs one process {equal:e}", comm.size());
    }
}

#[test]
fn mpi_child() {
    if std::env::var("PARKI_FMM_MPI_CHILD").is_err() {
        return;
    }
    let universe = Universe::init().unwrap();
    let comm = universe.world();
    laplace_case(&comm, Cloud::Uniform, false, false);
    laplace_case(&comm, Cloud::Plummer, true, false);
    laplace_case(&comm, Cloud::Plummer, false, true);
    stokeslet_case(&comm);
    edge_cases(&comm);
    far_from_one(&comm);
}

/// Every rank's points at `2^-480` and `2^600` of their extent give the unit extent's potential
/// and gradient (Laplace), and velocity (Stokeslet), scaled bit for bit: the unit of length is
/// agreed over the ranks.
fn far_from_one(comm: &Comm) {
    let (rank, size) = (comm.rank(), comm.size());
    let n = 3000;
    let x = Cloud::Uniform.points(45, 0..n);
    let q: Vec<f64> = (0..n).map(|i| particle_rng(46, i as u64).normal()).collect();
    let f: Vec<[f64; 3]> = (0..n).map(|i| [0, 1, 2].map(|a| particle_rng(47 + a, i as u64).normal())).collect();
    let mine = rank * n / size..(rank + 1) * n / size;
    let p = FmmParams::new(8, Some(40));
    let laplace =
        |x: &[[f64; 3]]| evaluate_distributed(comm, x, &q[mine.clone()], None, &p, Isa::detect(), Par::Seq).unwrap();
    let stokeslet = |x: &[[f64; 3]]| {
        evaluate_stokeslet_distributed(comm, x, &f[mine.clone()], None, &p, Isa::detect(), Par::Seq).unwrap()
    };
    let unit = laplace(&x[mine.clone()]);
    let unit_u = stokeslet(&x[mine.clone()]);
    for e in [-480, 600] {
        let s = 2f64.powi(e);
        let xs: Vec<[f64; 3]> = x[mine.clone()].iter().map(|p| p.map(|c| c * s)).collect();
        let same = |a: f64, b: f64, what: &str| assert_eq!(a.to_bits(), b.to_bits(), "{size} ranks, 2^{e}, {what}");
        let got = laplace(&xs);
        got.potential.iter().zip(&unit.potential).for_each(|(a, b)| same(*a, b / s, "potential"));
        for (a, b) in got.gradient.iter().zip(&unit.gradient) {
            (0..3).for_each(|c| same(a[c], b[c] / s / s, "gradient"));
        }
        for (a, b) in stokeslet(&xs).velocity.iter().zip(&unit_u.velocity) {
            (0..3).for_each(|c| same(a[c], b[c] / s, "velocity"));
        }
    }
    // charges and forces of 2^-1000, the largest on the last rank: every rank agrees on the
    // strength unit, and the values are the unit strengths' times 2^-1000
    let w = 2f64.powi(-1000);
    let j = (size - 1) * n / size;
    let (mut q1, mut f1) = (q.clone(), f.clone());
    q1[j] *= 64.0;
    f1[j] = f1[j].map(|c| c * 64.0);
    let qw: Vec<f64> = q1.iter().map(|c| c * w).collect();
    let fw: Vec<[f64; 3]> = f1.iter().map(|v| v.map(|c| c * w)).collect();
    let xm = &x[mine.clone()];
    let run = |q: &[f64]| evaluate_distributed(comm, xm, &q[mine.clone()], None, &p, Isa::detect(), Par::Seq).unwrap();
    let run_u = |f: &[[f64; 3]]| {
        evaluate_stokeslet_distributed(comm, xm, &f[mine.clone()], None, &p, Isa::detect(), Par::Seq).unwrap()
    };
    let same =
        |a: f64, b: f64, what: &str| assert_eq!(a.to_bits(), (b * w).to_bits(), "{size} ranks, strengths, {what}");
    let (unit, got) = (run(&q1), run(&qw));
    unit.potential.iter().zip(&got.potential).for_each(|(b, a)| same(*a, *b, "potential"));
    for (b, a) in unit.gradient.iter().zip(&got.gradient) {
        (0..3).for_each(|c| same(a[c], b[c], "gradient"));
    }
    for (b, a) in run_u(&f1).velocity.iter().zip(&run_u(&fw).velocity) {
        (0..3).for_each(|c| same(a[c], b[c], "velocity"));
    }
}

#[test]
fn distributed_equals_one_process() {
    if std::env::var("PARKI_FMM_MPI_CHILD").is_ok() || !Universe::has_mpi() {
        println!("skipped: built without MPI");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    for ranks in [1, 2, 3, 4] {
        let out = Command::new("timeout")
            .args(["600", "mpirun", "-n", &ranks.to_string(), "--oversubscribe"])
            .arg(&exe)
            .args(["--exact", "mpi_child", "--nocapture", "--test-threads", "1"])
            .env("PARKI_FMM_MPI_CHILD", "1")
            .env("RAYON_NUM_THREADS", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .output()
            .expect("mpirun must be installed (openmpi-bin)");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let lines: Vec<&str> = text.lines().filter_map(|l| l.find("fmm ").map(|k| &l[k..])).collect();
        for l in &lines {
            println!("{l}");
        }
        assert!(out.status.success(), "mpirun -n {ranks}: {text}");
        assert_eq!(lines.len(), 6, "{text}");
    }
}
