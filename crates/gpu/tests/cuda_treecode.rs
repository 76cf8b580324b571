//! The treecode on a CUDA device against the host treecode: every kernel, uniform and Plummer
//! points, targets apart and the sources as targets, every list type present, within 1e-13
//! (relative l2). Without a driver or device the test says "skipped: no CUDA device" (with
//! `PARKI_REQUIRE_CUDA=1` and a driver it must open).
#![cfg(feature = "cuda")]

use parki_comm::Comm;
use parki_core::isa::Isa;
use parki_core::Par;
use parki_gpu::cuda::{driver_available, CudaDevice};
use parki_gpu::GpuTreecode;
use parki_reference::generate::Cloud;
use parki_treecode::{evaluate_kernel_distributed_on, TreeBackend, TreecodeParams};

mod tree_common;
use tree_common::{inputs, kernels, rel_l2};

fn device() -> Option<GpuTreecode<CudaDevice>> {
    match GpuTreecode::<CudaDevice>::open(0) {
        Ok(d) => Some(d),
        Err(e) => {
            if driver_available() && std::env::var("PARKI_REQUIRE_CUDA").is_ok_and(|v| v == "1") {
                panic!("PARKI_REQUIRE_CUDA=1 but the device does not open: {e}");
            }
            println!("skipped: no CUDA device ({e})");
            None
        }
    }
}

#[test]
fn device_equals_the_host() {
    let Some(gpu) = device() else { return };
    println!("{}", gpu.describe());
    let comm = Comm::single();
    let p = TreecodeParams { degree: 5, theta: 0.7, max_leaf: 400, max_batch: 120 };
    // every list type over the cases (a case need not have all four: uniform targets apart
    // from the sources had no CP at these sizes)
    let mut seen = [0usize; 4];
    for cloud in [Cloud::Uniform, Cloud::Plummer] {
        let sources = cloud.points(61, 0..40_000);
        let apart = cloud.points(62, 0..30_000);
        for k in kernels() {
            let q = inputs(k, sources.len(), 63);
            for (label, targets) in [("targets", &apart), ("sources as targets", &sources)] {
                let run = |dev: Option<&dyn TreeBackend>| {
                    let par = Par::with_threads(rayon::current_num_threads());
                    evaluate_kernel_distributed_on(&comm, k, &p, &sources, &q, targets, par, Isa::detect(), dev)
                        .unwrap()
                };
                let (host, hs) = run(None);
                let (dev, ds) = run(Some(&gpu));
                let d = rel_l2(&dev, &host);
                println!(
                    "{} {} {label}: device vs host {d:.2e}, lists {:?}, compute host {:.3} s device {:.3} s",
                    cloud.name(),
                    k.name(),
                    hs.interactions,
                    hs.times.total(),
                    ds.times.total()
                );
                for (seen, &c) in seen.iter_mut().zip(&hs.interactions) {
                    *seen += c;
                }
                assert!(d <= 1e-13, "{} {} {label}: {d:e}", cloud.name(), k.name());
            }
        }
    }
    assert!(seen.iter().all(|&c| c > 0), "every list type over the cases: {seen:?}");
}
