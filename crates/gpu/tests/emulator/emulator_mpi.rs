//! The CUDA backend's distributed path on the host emulator: 2, 3 and 4 ranks under `mpirun`
//! (oversubscribed) equal one process of the CPU backend, for every kernel, triply periodic and
//! with free axes (2P, 0P), the Laplace field by both methods, and P2P on the side stream. The device holds each rank's
//! grid block for P2G and G2P, the halo rows go through the `rows` kernel and host staging, and
//! the distributed FFT and CNV run on the host.
//!
//! The test re-runs this test binary under mpirun with `PARKI_GPU_MPI_CHILD` set; in the
//! children, `mpi_child` does the distributed evaluation and compares.

use std::process::Command;

use parki_core::{Domain, Kernel};
use parki_dist::{Comm, CpuBackend, DistEwaldSolver, EwaldOptions, ParallelOptions, SortMode, Targets, Universe};
use parki_farfield::FieldMethod;
use parki_gpu::{Emulator, GpuBackend};
use parki_nearfield::PairAccuracy;
use parki_reference::generate::{Distribution, Particles};

const N: usize = 1200;

/// The cases every rank count runs: `(label, options)`.
fn cases() -> Vec<(String, EwaldOptions)> {
    let mut v = Vec::new();
    for (periodic, name) in [([true; 3], "3P"), ([true, true, false], "2P"), ([false; 3], "0P")] {
        let domain = Domain::new([1.0, 1.2, 0.9], periodic).unwrap();
        let kernels: &[Kernel] = if name == "3P" { &Kernel::ALL } else { &[Kernel::Laplace, Kernel::Stokes] };
        for &kernel in kernels {
            v.push((
                format!("{name} {}", kernel.name()),
                EwaldOptions::new(kernel, domain, 1e-9).threads(1).pair_accuracy(PairAccuracy::Full),
            ));
        }
        // P2P on the side stream, beside the host's exchanges and transforms
        let overlap = parki_dist::DeviceVariants::default().overlap(parki_dist::DeviceOverlap::P2p);
        let o = EwaldOptions::new(Kernel::Stokes, domain, 1e-9)
            .threads(1)
            .pair_accuracy(PairAccuracy::Full)
            .device(overlap);
        v.push((format!("{name} stokes, P2P overlapping the far field"), o));
        if name != "0P" {
            for m in [FieldMethod::Window, FieldMethod::Spectral] {
                let o = EwaldOptions::new(Kernel::Laplace, domain, 1e-9)
                    .threads(1)
                    .field(true)
                    .field_method(m)
                    .pair_accuracy(PairAccuracy::Full);
                v.push((format!("{name} laplace field ({})", m.name()), o));
            }
        }
    }
    v
}

#[test]
fn mpi_child() {
    if std::env::var("PARKI_GPU_MPI_CHILD").is_err() {
        return;
    }
    let universe = Universe::init().unwrap();
    let comm = universe.world();
    let (rank, size) = (comm.rank(), comm.size());
    let mine = rank * N / size..(rank + 1) * N / size;
    for (label, opts) in cases() {
        let data = Particles::<f64>::new(&opts.domain, Distribution::Normal, N, 5);
        let dim = opts.kernel.output_dim() + if opts.field { 3 } else { 0 };
        let mut reference = vec![0.0; N * dim];
        let single = Comm::single();
        let mut one =
            DistEwaldSolver::<f64, CpuBackend<f64>>::with_backend(&single, &opts, ParallelOptions::default(), N, N)
                .unwrap();
        one.evaluate(&data.slice(0..N), Targets::Sources, &mut reference, SortMode::default()).unwrap();
        let mut dist = DistEwaldSolver::<f64, GpuBackend<f64, Emulator>>::with_backend(
            &comm,
            &opts,
            ParallelOptions::default(),
            N,
            N,
        )
        .unwrap();
        let mut u = vec![0.0; mine.len() * dim];
        dist.evaluate(&data.slice(mine.clone()), Targets::Sources, &mut u, SortMode::default()).unwrap();
        let expect = &reference[mine.start * dim..mine.end * dim];
        let num: f64 = u.iter().zip(expect).map(|(a, b)| (a - b).powi(2)).sum();
        let den: f64 = expect.iter().map(|b| b * b).sum();
        let d = comm.max((num / den).sqrt());
        if rank == 0 {
            println!("{size} ranks, emulated GPU, {label}: {d:.1e} against one CPU process");
        }
        assert!(d < 1e-12, "{size} ranks {label}: {d:e}");
    }
}

#[test]
fn distributed_equals_one_process() {
    if std::env::var("PARKI_GPU_MPI_CHILD").is_ok() || !Universe::has_mpi() {
        println!("skipped: built without MPI");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    for ranks in [2, 3, 4] {
        let out = Command::new("timeout")
            .args(["600", "mpirun", "-n", &ranks.to_string(), "--oversubscribe"])
            .arg(&exe)
            .args(["--exact", "emulator_mpi::mpi_child", "--nocapture", "--test-threads", "1"])
            .env("PARKI_GPU_MPI_CHILD", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .output()
            .expect("mpirun must be installed (openmpi-bin)");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        for l in text.lines().filter(|l| l.contains("emulated GPU")) {
            println!("{l}");
        }
        assert!(out.status.success(), "mpirun -n {ranks}: {text}");
        assert_eq!(text.matches("emulated GPU").count(), cases().len(), "{text}");
    }
}
