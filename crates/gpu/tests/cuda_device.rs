//! The CUDA device on a machine with a GPU: memory, copies, a kernel launch, the FFTs. Without
//! a driver or device, [`CudaDevice::open`] must fail with an error (never panic) and the
//! tests say "skipped: no CUDA device".
#![cfg(feature = "cuda")]

use std::ffi::c_void;

use parki_core::Error;
use parki_decomp::GridLayout;
use parki_gpu::cuda::{driver_available, CudaDevice, PROBE_KERNEL};
use parki_gpu::{Args, Device, Precision};

/// The device, or `None` (after printing why) where this machine has none.
fn device() -> Option<CudaDevice> {
    match CudaDevice::open(0) {
        Ok(d) => {
            println!("{:?}", d.info());
            Some(d)
        }
        Err(e) => {
            // without a GPU the error is the only outcome; with a driver and a device it must open
            if driver_available() && std::env::var("PARKI_REQUIRE_CUDA").is_ok_and(|v| v == "1") {
                panic!("PARKI_REQUIRE_CUDA=1 but the device does not open: {e}");
            }
            println!("skipped: no CUDA device ({e})");
            None
        }
    }
}

#[test]
fn open_without_driver_is_an_error() {
    if driver_available() {
        println!("skipped: a CUDA driver is present");
        return;
    }
    let e = CudaDevice::open(0).expect_err("no driver, no device");
    match &e {
        Error::Resource { message } => assert!(message.contains("libcuda"), "{message}"),
        other => panic!("expected a resource error, got {other:?}"),
    }
    // twice: nothing cached in a broken state
    assert!(CudaDevice::open(1).is_err());
}

#[test]
fn cufft_loads_where_installed() {
    match parki_gpu::cuda::cufft_version() {
        Ok(v) => println!("cuFFT {v}, loaded from {:?}", parki_gpu::cuda::preload_libraries()),
        Err(e) => println!("skipped: {e}"),
    }
}

#[test]
fn memory_round_trip() {
    let Some(dev) = device() else { return };
    let info = dev.info().clone();
    assert!(info.count >= 1 && info.ordinal < info.count);
    assert!(info.compute.0 >= 5, "{info:?}");
    assert!(info.memory > 0 && !info.driver.is_empty() && !info.cuda.is_empty(), "{info:?}");
    let free = dev.free_memory().unwrap();
    assert!(free > 0 && free <= info.memory);

    let n = 1000usize;
    let data: Vec<u8> = (0..n).map(|k| (k * 7 % 251) as u8).collect();
    let p = dev.alloc(n, "test buffer").unwrap();
    assert_eq!(p % 256, 0);
    let mut back = vec![0u8; n];
    // SAFETY: `p` holds n bytes, live until freed at the end.
    unsafe {
        dev.upload(p, &data).unwrap();
        dev.download(&mut back, p).unwrap();
        assert_eq!(back, data);
        dev.zero(p + 100, 200).unwrap();
        dev.download(&mut back, p).unwrap();
        assert!(back[100..300].iter().all(|&b| b == 0));
        assert_eq!(back[..100], data[..100]);
        assert_eq!(back[300..], data[300..]);
        dev.free(p);
    }

    // too much memory: an error naming the buffer
    let e = dev.alloc(usize::MAX / 2, "an impossible grid").unwrap_err().to_string();
    assert!(e.contains("an impossible grid"), "{e}");
}

#[test]
fn launch_unknown_entry_point_is_an_error() {
    let Some(dev) = device() else { return };
    // SAFETY: the launch is refused before anything runs.
    let r = unsafe { dev.launch("no_such_kernel", [1, 1, 1], [32, 1, 1], 0, &[]) };
    assert!(r.is_err());
}

#[test]
fn probe_kernel_runs() {
    let Some(dev) = device() else { return };
    let n = 1000u64;
    let x: Vec<f64> = (0..n).map(|k| k as f64 * 0.5).collect();
    let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_ne_bytes()).collect();
    let p = dev.alloc(bytes.len(), "probe").unwrap();
    let mut args = Args::new();
    args.push(n).push(3.0f64).push(p);
    let ptrs = args.pointers();
    let mut back = vec![0u8; bytes.len()];
    // SAFETY: the probe takes (u64, double, double*), and `p` holds n doubles.
    unsafe {
        dev.upload(p, &bytes).unwrap();
        dev.launch(PROBE_KERNEL, [(n as u32).div_ceil(128), 1, 1], [128, 1, 1], 0, &ptrs[..args.len()]).unwrap();
        dev.download(&mut back, p).unwrap();
        dev.free(p);
    }
    for (k, b) in back.chunks_exact(8).enumerate() {
        assert_eq!(f64::from_ne_bytes(b.try_into().unwrap()), 3.0 * (k as f64 * 0.5) + k as f64, "x[{k}]");
    }
    dev.synchronize().unwrap();
}

/// Every entry point kernels/ export is in the module the device loaded.
#[test]
fn every_entry_point_resolves() {
    let Some(dev) = device() else { return };
    for name in parki_gpu::kernels::ENTRY_POINTS {
        // a zero-block launch resolves the entry point and runs nothing
        // SAFETY: no thread runs.
        unsafe { dev.launch(name, [0, 1, 1], [1, 1, 1], 0, &[]) }.unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    dev.synchronize().unwrap();
}

/// Forward then backward FFT of a known field: unnormalised round trip gives `M` times it, for
/// the first `backward` of the `forward` components (the plans share one work area).
fn fft_round_trip(precision: Precision, dims: [usize; 3], forward: usize, backward: usize) {
    let Some(dev) = device() else { return };
    let layout = GridLayout::new(dims).unwrap();
    let [nx, ny, nz] = dims;
    let comps = forward;
    let len = layout.real_len();
    let mut field = vec![0f64; comps * len];
    for c in 0..comps {
        for iz in 0..nz {
            for iy in 0..ny {
                for ix in 0..nx {
                    field[c * len + layout.real_index(ix, iy, iz)] =
                        ((ix * 3 + iy * 5 + iz * 7 + c * 11) % 13) as f64 - 6.0;
                }
            }
        }
    }
    let bytes: Vec<u8> = match precision {
        Precision::F64 => field.iter().flat_map(|v| v.to_ne_bytes()).collect(),
        Precision::F32 => field.iter().flat_map(|v| (*v as f32).to_ne_bytes()).collect(),
    };
    let p = dev.alloc(bytes.len(), "fft field").unwrap();
    let mut plan = dev.fft_plan(&layout, forward, backward, precision).unwrap();
    println!(
        "{dims:?} {precision:?}, {forward} forward, {backward} backward: work area {} bytes",
        CudaDevice::fft_work_bytes(&plan)
    );
    let mut back = vec![0u8; bytes.len()];
    // SAFETY: `p` holds the planned components of the planned layout and precision.
    unsafe {
        dev.upload(p, &bytes).unwrap();
        dev.fft(&mut plan, p, true).unwrap();
        dev.fft(&mut plan, p, false).unwrap();
        dev.download(&mut back, p).unwrap();
        dev.free(p);
    }
    let m = layout.points() as f64;
    let got: Vec<f64> = match precision {
        Precision::F64 => back.chunks_exact(8).map(|b| f64::from_ne_bytes(b.try_into().unwrap())).collect(),
        Precision::F32 => back.chunks_exact(4).map(|b| f32::from_ne_bytes(b.try_into().unwrap()) as f64).collect(),
    };
    let tol = if precision == Precision::F64 { 1e-12 } else { 1e-4 };
    for c in 0..backward {
        for iz in 0..nz {
            for iy in 0..ny {
                for ix in 0..nx {
                    let k = c * len + layout.real_index(ix, iy, iz);
                    assert!((got[k] / m - field[k]).abs() < tol * 13.0, "{precision:?} {c} {ix} {iy} {iz}");
                }
            }
        }
    }
}

#[test]
fn fft_round_trip_f64() {
    fft_round_trip(Precision::F64, [8, 6, 4], 2, 2);
    fft_round_trip(Precision::F64, [96, 90, 84], 6, 3);
}

#[test]
fn fft_round_trip_f32() {
    fft_round_trip(Precision::F32, [8, 6, 4], 2, 2);
    fft_round_trip(Precision::F32, [96, 90, 84], 3, 3);
}

#[test]
fn pinned_upload_round_trip() {
    let Some(dev) = device() else { return };
    let n = 1 << 20;
    let host = dev.alloc_pinned(n, "pinned test buffer").unwrap();
    // SAFETY: `host` holds n bytes until freed below.
    let src = unsafe { std::slice::from_raw_parts_mut(host, n) };
    for (k, b) in src.iter_mut().enumerate() {
        *b = (k * 13 % 251) as u8;
    }
    let p = dev.alloc(n, "device test buffer").unwrap();
    let mut back = vec![0u8; n];
    // SAFETY: both hold n bytes; the pinned source is not written until the stream has run
    // the copy (download synchronises).
    unsafe {
        dev.upload(p, src).unwrap();
        dev.download(&mut back, p).unwrap();
        assert!(back.iter().enumerate().all(|(k, &b)| b == (k * 13 % 251) as u8));
        dev.free(p);
        dev.free_pinned(host);
    }
}

#[test]
fn args_launch_shape() {
    // the Args pointers are what launch takes
    let mut args = Args::new();
    args.push(1u64).push(2.0f64);
    let ptrs = args.pointers();
    let slice: &[*mut c_void] = &ptrs[..args.len()];
    assert_eq!(slice.len(), 2);
}
