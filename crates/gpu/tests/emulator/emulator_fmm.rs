//! The FMM's device path (`GpuFmm`, kernels/fmm.cu) on the host emulator against the host FMM:
//! Laplace potential and gradient on uniform, Gaussian, Plummer and sphere-shell points (M2L a
//! thread per translation, and on the uniform cube a block per translation too), targets
//! apart from the sources and the sources as targets, at orders 6, 8, 12 and 58 (the last with the
//! translations' work vectors in global scratch instead of shared memory); the potential alone;
//! the Stokeslet; and over 2 and 3 MPI ranks (the locally essential tree's remote multipoles and
//! particles uploaded to the device) against the host on the same ranks.
//!
//! The distributed test re-runs this test binary under mpirun with `PARKI_FMM_MPI_CHILD` set.

use std::process::Command;

use parki_comm::Universe;
use parki_core::isa::Isa;
use parki_core::Par;
use parki_fmm::{
    evaluate_distributed_on, evaluate_on, evaluate_stokeslet_distributed_on, evaluate_stokeslet_on, FmmBackend,
    FmmParams, FmmStats,
};
use parki_gpu::{Emulator, GpuFmm, M2lVariant, P2pVariant};
use parki_reference::generate::Cloud;

use crate::fmm_common::{charges, rel_l2};

fn params(order: usize, leaf: usize, gradient: bool) -> FmmParams {
    let mut p = FmmParams::new(order, Some(leaf));
    p.gradient = gradient;
    p
}

/// The same lists and counts on both paths.
fn same_work(host: &FmmStats, device: &FmmStats) {
    assert_eq!(host.m2l, device.m2l, "M2L translations");
    assert_eq!(host.p2p, device.p2p, "P2P pairs");
    assert_eq!(host.boxes, device.boxes, "boxes");
}

#[test]
fn laplace_device_equals_the_host() {
    let gpu = GpuFmm::<Emulator>::open(0).unwrap();
    let dev = &gpu as &dyn FmmBackend;
    // the other variants: M2L by blocks, and P2P by blocks (leaves of 40 take global by default)
    let block = GpuFmm::<Emulator>::open(0).unwrap().with_m2l(M2lVariant::Block).with_p2p(P2pVariant::Shared);
    let mut worst: f64 = 0.0;
    for cloud in [Cloud::Uniform, Cloud::Gaussian, Cloud::Plummer, Cloud::Shell] {
        let sources = cloud.points(61, 0..2000);
        let apart = cloud.points(62, 0..1200);
        let q = charges(sources.len(), 7);
        let orders: &[usize] = if cloud == Cloud::Uniform { &[6, 12] } else { &[8] };
        for &order in orders {
            for (label, targets) in [("targets", Some(&apart[..])), ("sources as targets", None)] {
                let p = params(order, 40, true);
                let host = evaluate_on(&sources, &q, targets, &p, Isa::detect(), Par::Seq, None).unwrap();
                let device = evaluate_on(&sources, &q, targets, &p, Isa::detect(), Par::Seq, Some(dev)).unwrap();
                same_work(&host.stats, &device.stats);
                assert_eq!(host.stats.device_variants, None);
                // order <= 16 and leaves of 40: a thread per translation, a thread per target
                assert_eq!(device.stats.device_variants.as_deref(), Some("M2L thread, P2P global"));
                // the block-per-translation M2L too, on the uniform cube
                if cloud == Cloud::Uniform {
                    let d = evaluate_on(&sources, &q, targets, &p, Isa::detect(), Par::Seq, Some(&block)).unwrap();
                    assert_eq!(d.stats.device_variants.as_deref(), Some("M2L block, P2P shared"));
                    let db = rel_l2(&d.potential, &host.potential);
                    println!("{:>8} p {order:>2} {label:>18}: M2L and P2P by blocks, potential {db:.2e}", cloud.name());
                    assert!(db <= 1e-13, "M2L by blocks: {db:e}");
                }
                assert!(host.stats.m2l > 0 && host.stats.p2p[1] > 0, "both fields present");
                let dp = rel_l2(&device.potential, &host.potential);
                let g = |v: &[[f64; 3]]| -> Vec<f64> { v.iter().flatten().copied().collect() };
                let dg = rel_l2(&g(&device.gradient), &g(&host.gradient));
                println!(
                    "{:>8} p {order:>2} {label:>18}: potential {dp:.2e}, gradient {dg:.2e} ({} M2L)",
                    cloud.name(),
                    host.stats.m2l
                );
                assert!(dp <= 1e-13 && dg <= 1e-13, "{} p {order} {label}: {dp:e} {dg:e}", cloud.name());
                worst = worst.max(dp).max(dg);
            }
        }
    }
    println!("worst device vs host: {worst:.2e}");
}

#[test]
fn high_order_and_potential_only() {
    let gpu = GpuFmm::<Emulator>::open(0).unwrap();
    let dev = &gpu as &dyn FmmBackend;
    let sources = Cloud::Uniform.points(71, 0..1500);
    let q = charges(sources.len(), 9);
    // order 58: 2 p^2 doubles are 53.8 KB, beyond the shared memory the translations use
    let p = params(58, 200, true);
    let host = evaluate_on(&sources, &q, None, &p, Isa::detect(), Par::Seq, None).unwrap();
    let device = evaluate_on(&sources, &q, None, &p, Isa::detect(), Par::Seq, Some(dev)).unwrap();
    same_work(&host.stats, &device.stats);
    assert!(host.stats.m2l > 0, "translations at p = 58");
    // above order 16 the block variant, and leaves of 200 hold 64 or more on average
    assert_eq!(device.stats.device_variants.as_deref(), Some("M2L block, P2P shared"));
    let dp = rel_l2(&device.potential, &host.potential);
    println!("uniform p 58: potential {dp:.2e} ({} M2L)", host.stats.m2l);
    assert!(dp <= 1e-13, "p 58: {dp:e}");
    let p = params(10, 40, false);
    let host = evaluate_on(&sources, &q, None, &p, Isa::detect(), Par::Seq, None).unwrap();
    let device = evaluate_on(&sources, &q, None, &p, Isa::detect(), Par::Seq, Some(dev)).unwrap();
    assert!(device.gradient.is_empty(), "no gradient asked for");
    let dp = rel_l2(&device.potential, &host.potential);
    println!("uniform p 10 potential only: {dp:.2e}");
    assert!(dp <= 1e-13, "potential only: {dp:e}");
}

#[test]
fn stokeslet_device_equals_the_host() {
    let gpu = GpuFmm::<Emulator>::open(0).unwrap();
    let dev = &gpu as &dyn FmmBackend;
    for cloud in [Cloud::Uniform, Cloud::Plummer] {
        let sources = cloud.points(81, 0..1500);
        let targets = cloud.points(82, 0..1000);
        let c: Vec<Vec<f64>> = (0..3).map(|a| charges(sources.len(), 11 + a)).collect();
        let f: Vec<[f64; 3]> = (0..sources.len()).map(|i| [c[0][i], c[1][i], c[2][i]]).collect();
        for (label, t) in [("targets", Some(&targets[..])), ("sources as targets", None)] {
            let p = params(12, 40, true);
            let host = evaluate_stokeslet_on(&sources, &f, t, &p, Isa::detect(), Par::Seq, None).unwrap();
            let device = evaluate_stokeslet_on(&sources, &f, t, &p, Isa::detect(), Par::Seq, Some(dev)).unwrap();
            same_work(&host.stats, &device.stats);
            let flat = |v: &[[f64; 3]]| -> Vec<f64> { v.iter().flatten().copied().collect() };
            let d = rel_l2(&flat(&device.velocity), &flat(&host.velocity));
            println!("{:>8} Stokeslet p 12 {label:>18}: velocity {d:.2e}", cloud.name());
            assert!(d <= 1e-13, "{} Stokeslet {label}: {d:e}", cloud.name());
        }
    }
}

#[test]
fn mpi_child() {
    if std::env::var("PARKI_FMM_MPI_CHILD").is_err() {
        return;
    }
    let universe = Universe::init().unwrap();
    let comm = universe.world();
    let (rank, size) = (comm.rank(), comm.size());
    let gpu = GpuFmm::<Emulator>::open(0).unwrap();
    let dev = &gpu as &dyn FmmBackend;
    let (ns, nt) = (3000, 2000);
    for cloud in [Cloud::Uniform, Cloud::Plummer] {
        let sources = cloud.points(91, 0..ns);
        let targets = cloud.points(92, 0..nt);
        let q = charges(ns, 13);
        let ms = rank * ns / size..(rank + 1) * ns / size;
        let mt = rank * nt / size..(rank + 1) * nt / size;
        let p = params(10, 40, true);
        let run = |d: Option<&dyn FmmBackend>| {
            let (s, qs, t) = (&sources[ms.clone()], &q[ms.clone()], &targets[mt.clone()]);
            evaluate_distributed_on(&comm, s, qs, Some(t), &p, Isa::detect(), Par::Seq, d).unwrap()
        };
        let host = run(None);
        let mine = run(Some(dev));
        let pack = |o: &parki_fmm::FmmOutput| -> Vec<f64> {
            o.potential.iter().copied().chain(o.gradient.iter().flatten().copied()).collect()
        };
        let one = comm.all_gatherv(&pack(&host));
        let all = comm.all_gatherv(&pack(&mine));
        let remote = comm.sum(mine.stats.let_tree.multipoles as u64 + mine.stats.let_tree.particles as u64);
        let d = rel_l2(&all, &one);
        if rank == 0 {
            println!("fmm device {size} ranks laplace {}: vs the host {d:.2e}, {remote} remote items", cloud.name());
        }
        assert!(d <= 1e-13, "{size} ranks laplace {}: {d:e}", cloud.name());
        assert!(remote > 0, "the remote side was used");
        // the Stokeslet, uniform points
        if cloud == Cloud::Uniform {
            let f: Vec<[f64; 3]> = (0..ns).map(|i| [q[i], q[(i + 7) % ns], q[(i + 19) % ns]]).collect();
            let run = |d: Option<&dyn FmmBackend>| {
                let (s, fs, t) = (&sources[ms.clone()], &f[ms.clone()], &targets[mt.clone()]);
                let o =
                    evaluate_stokeslet_distributed_on(&comm, s, fs, Some(t), &p, Isa::detect(), Par::Seq, d).unwrap();
                o.velocity.iter().flatten().copied().collect::<Vec<f64>>()
            };
            let one = comm.all_gatherv(&run(None));
            let all = comm.all_gatherv(&run(Some(dev)));
            let d = rel_l2(&all, &one);
            if rank == 0 {
                println!("fmm device {size} ranks stokeslet uniform: vs the host {d:.2e}");
            }
            assert!(d <= 1e-13, "{size} ranks stokeslet: {d:e}");
        }
    }
}

#[test]
fn distributed_device_equals_the_host() {
    if std::env::var("PARKI_FMM_MPI_CHILD").is_ok() || !Universe::has_mpi() {
        println!("skipped: built without MPI");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    for ranks in [2, 3] {
        let out = Command::new("timeout")
            .args(["600", "mpirun", "-n", &ranks.to_string(), "--oversubscribe"])
            .arg(&exe)
            .args(["--exact", "emulator_fmm::mpi_child", "--nocapture", "--test-threads", "1"])
            .env("PARKI_FMM_MPI_CHILD", "1")
            .env("RAYON_NUM_THREADS", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .output()
            .expect("mpirun must be installed (openmpi-bin)");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let lines: Vec<&str> = text.lines().filter_map(|l| l.find("fmm device").map(|k| &l[k..])).collect();
        for l in &lines {
            println!("{l}");
        }
        assert!(out.status.success(), "mpirun -n {ranks}: {text}");
        assert_eq!(lines.len(), 3, "{text}");
    }
}
