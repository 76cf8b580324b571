//! The treecode's device path (`GpuTreecode`, kernels/treecode.cu) on the host emulator against
//! the host treecode: every kernel on uniform points, and Yukawa and Stokes (the scalar and the
//! widest densities) on Plummer, sphere-shell and planar points (a degenerate axis in every
//! cluster), targets apart from the sources and the sources as
//! targets (the self-term rules), every list type present; and over 2 and 3 MPI ranks (the
//! locally essential tree's remote side uploaded to the device) against the host on the same
//! ranks (the same partition and trees).
//!
//! The distributed test re-runs this test binary under mpirun with `PARKI_TC_MPI_CHILD` set.

use std::process::Command;

use parki_comm::{Comm, Universe};
use parki_core::isa::Isa;
use parki_core::Par;
use parki_gpu::{Emulator, GpuTreecode};
use parki_reference::generate::Cloud;
use parki_treecode::{evaluate_kernel_distributed_on, TreeBackend, TreeKernel, TreecodeParams};

use crate::tree_common::{inputs, kernels, rel_l2};

/// Degree 3 (64 proxies), theta 0.7, leaves of at most 100 sources and 40 targets: clusters
/// on both sides of the proxies' count, so every list type at a few thousand points.
fn params() -> TreecodeParams {
    TreecodeParams { degree: 3, theta: 0.7, max_leaf: 100, max_batch: 40 }
}

/// `n` points of `cloud`, or (`None`) uniform points on the plane z = 0.25.
fn points(cloud: Option<Cloud>, seed: u64, n: usize) -> Vec<[f64; 3]> {
    match cloud {
        Some(c) => c.points(seed, 0..n),
        None => Cloud::Uniform.points(seed, 0..n).into_iter().map(|p| [p[0], p[1], 0.25]).collect(),
    }
}

#[test]
fn device_equals_the_host_for_every_kernel_and_set() {
    let comm = Comm::single();
    let gpu = GpuTreecode::<Emulator>::open(0).unwrap();
    let p = params();
    let clouds = [Some(Cloud::Uniform), Some(Cloud::Plummer), Some(Cloud::Shell), None];
    let mut worst: f64 = 0.0;
    for cloud in clouds {
        let name = cloud.map_or("planar", |c| c.name());
        let sources = points(cloud, 41, 4000);
        let apart = points(cloud, 42, 3000);
        // every kernel on the uniform cube; the scalar and the widest on the other sets
        let ks: Vec<TreeKernel> = match cloud {
            Some(Cloud::Uniform) => kernels(),
            _ => vec![TreeKernel::Yukawa { kappa: 0.8 }, TreeKernel::Stokes],
        };
        for k in ks {
            let q = inputs(k, sources.len(), 31);
            for (label, targets) in [("targets", &apart), ("sources as targets", &sources)] {
                let run = |dev: Option<&GpuTreecode<Emulator>>| {
                    let dev = dev.map(|d| d as &dyn TreeBackend);
                    evaluate_kernel_distributed_on(&comm, k, &p, &sources, &q, targets, Par::Seq, Isa::detect(), dev)
                        .unwrap()
                };
                let (host, hs) = run(None);
                let (device, ds) = run(Some(&gpu));
                assert_eq!(hs.interactions, ds.interactions, "the same lists");
                assert!(
                    hs.interactions.iter().all(|&c| c > 0),
                    "{name} {}: every list type present: {:?}",
                    k.name(),
                    hs.interactions
                );
                let d = rel_l2(&device, &host);
                println!("{name:>8} {:>20} {label:>18}: device vs host {d:.2e}", k.name());
                assert!(d <= 1e-13, "{name} {} {label}: device vs host {d:e}", k.name());
                worst = worst.max(d);
            }
        }
    }
    println!("worst device vs host: {worst:.2e}");
}

#[test]
fn mpi_child() {
    if std::env::var("PARKI_TC_MPI_CHILD").is_err() {
        return;
    }
    let universe = Universe::init().unwrap();
    let comm = universe.world();
    let (rank, size) = (comm.rank(), comm.size());
    let gpu = GpuTreecode::<Emulator>::open(0).unwrap();
    let p = params();
    let (ns, nt) = (3000, 2400);
    for (cloud, k) in [(Cloud::Uniform, TreeKernel::Coulomb), (Cloud::Plummer, TreeKernel::Stokes)] {
        let sources = cloud.points(51, 0..ns);
        let targets = cloud.points(52, 0..nt);
        let q = inputs(k, ns, 31);
        let w = k.input_width();
        let ms = rank * ns / size..(rank + 1) * ns / size;
        let mt = rank * nt / size..(rank + 1) * nt / size;
        let run = |dev: Option<&dyn TreeBackend>| {
            let (s, qs, t) = (&sources[ms.clone()], &q[ms.start * w..ms.end * w], &targets[mt.clone()]);
            evaluate_kernel_distributed_on(&comm, k, &p, s, qs, t, Par::Seq, Isa::detect(), dev).unwrap()
        };
        let (host, _) = run(None);
        let (mine, stats) = run(Some(&gpu));
        let one = comm.all_gatherv(&host);
        let all = comm.all_gatherv(&mine);
        let remote = comm.sum(stats.let_tree.bytes);
        // every rank computes and asserts the same numbers, so that a failure ends every rank
        let d = rel_l2(&all, &one);
        if rank == 0 {
            println!("treecode device {size} ranks {} {}: vs the host {d:.2e}, LET {remote} B", k.name(), cloud.name());
        }
        assert!(d <= 1e-13, "{size} ranks {}: {d:e}", k.name());
        assert!(remote > 0, "the remote side was used");
    }
}

#[test]
fn distributed_device_equals_the_host() {
    if std::env::var("PARKI_TC_MPI_CHILD").is_ok() || !Universe::has_mpi() {
        println!("skipped: built without MPI");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    for ranks in [2, 3] {
        let out = Command::new("timeout")
            .args(["600", "mpirun", "-n", &ranks.to_string(), "--oversubscribe"])
            .arg(&exe)
            .args(["--exact", "emulator_treecode::mpi_child", "--nocapture", "--test-threads", "1"])
            .env("PARKI_TC_MPI_CHILD", "1")
            .env("RAYON_NUM_THREADS", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .output()
            .expect("mpirun must be installed (openmpi-bin)");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let lines: Vec<&str> = text.lines().filter_map(|l| l.find("treecode device").map(|k| &l[k..])).collect();
        for l in &lines {
            println!("{l}");
        }
        assert!(out.status.success(), "mpirun -n {ranks}: {text}");
        assert_eq!(lines.len(), 2, "{text}");
    }
}
