//! The treecode on a device too small for it: refused before anything is allocated, with the
//! estimate and what is free, on the host emulator with a bounded memory. The test runs in a
//! process of its own (`crate::own_process`): the emulator's memory is process-wide.

use parki_comm::Comm;
use parki_core::isa::Isa;
use parki_core::{Error, Par};
use parki_gpu::{Emulator, GpuTreecode};
use parki_reference::generate::Cloud;
use parki_treecode::{evaluate_kernel_distributed_on, TreeBackend, TreeKernel, TreecodeParams};

#[test]
fn a_device_too_small_is_refused_with_the_estimate() {
    if !crate::own_process("emulator_treecode_memory::a_device_too_small_is_refused_with_the_estimate") {
        return;
    }
    let gpu = GpuTreecode::<Emulator>::open(0).unwrap();
    let p = TreecodeParams { degree: 6, theta: 0.7, max_leaf: 500, max_batch: 500 };
    let sources = Cloud::Uniform.points(1, 0..8_000);
    let q = vec![1.0; sources.len()];
    let comm = Comm::single();
    let run = || {
        let dev: &dyn TreeBackend = &gpu;
        evaluate_kernel_distributed_on(
            &comm,
            TreeKernel::Coulomb,
            &p,
            &sources,
            &q,
            &sources,
            Par::Seq,
            Isa::detect(),
            Some(dev),
        )
    };
    // a device of 1 MB: far below the estimate (points, every cluster's proxies, scratch)
    Emulator::set_memory(1 << 20);
    let e = run().expect_err("1 MB cannot hold the treecode of 8 000 points");
    match &e {
        Error::Resource { message } => {
            assert!(message.contains("GB of device memory") && message.contains("are free"), "{message}");
            assert!(message.contains("8000 sources"), "{message}");
        }
        other => panic!("expected a resource error, got {other:?}"),
    }
    // enough memory: it runs
    let need = GpuTreecode::<Emulator>::estimate_bytes(1, 1, 6, [8_000, 100], [8_000, 100]);
    Emulator::set_memory((4 * need) as u64);
    let (u, _) = run().unwrap();
    assert!(u.iter().all(|v| v.is_finite() && *v > 0.0));
}
