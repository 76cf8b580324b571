//! The floating-point peak of the cores, measured by a loop of independent FMAs in the widest
//! vectors this CPU has, on every thread at once.

use std::time::Instant;

use parki_core::Real;
use parki_nearfield::simd::Simd;
use parki_nearfield::Isa;

/// 16 independent accumulators: enough to cover FMA latency on two pipes.
#[inline(always)]
fn fma_loop<V: Simd>(iters: u64) -> V::Scalar {
    let a = V::splat(std::hint::black_box(V::Scalar::from_f64(0.999_999_9)));
    let b = V::splat(std::hint::black_box(V::Scalar::from_f64(1e-7)));
    let mut acc = [V::splat(V::Scalar::ONE); 16];
    for _ in 0..std::hint::black_box(iters) {
        for x in acc.iter_mut() {
            *x = x.mul_add(a, b);
        }
    }
    let mut s = V::splat(V::Scalar::ZERO);
    for x in acc {
        s = s + x;
    }
    s.reduce_add()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn loop512<V: Simd>(iters: u64) -> V::Scalar {
    fma_loop::<V>(iters)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn loop256<V: Simd>(iters: u64) -> V::Scalar {
    fma_loop::<V>(iters)
}

fn one<T: Real>(isa: Isa, iters: u64) -> (T, usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use parki_nearfield::simd::{F32x16, F32x8, F64x4, F64x8};
        let is64 = T::BYTES == 8;
        // SAFETY: `isa` comes from `Isa::detect`, so the CPU has the features.
        unsafe {
            match (isa, is64) {
                (Isa::Avx512, true) => return (T::from_f64(loop512::<F64x8>(iters)), 8),
                (Isa::Avx512, false) => return (T::from_f64(loop512::<F32x16>(iters) as f64), 16),
                (Isa::Avx2, true) => return (T::from_f64(loop256::<F64x4>(iters)), 4),
                (Isa::Avx2, false) => return (T::from_f64(loop256::<F32x8>(iters) as f64), 8),
                _ => {}
            }
        }
    }
    let _ = isa;
    (T::from_f64(fma_loop::<f64>(iters)), 1)
}

/// Flops per second of all `threads` threads running the FMA loop at once.
pub fn fma_peak<T: Real>(isa: Isa, threads: usize) -> f64 {
    let iters = 100_000_000u64;
    let mut best: f64 = 0.0;
    for _ in 0..3 {
        let t = Instant::now();
        let lanes = std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads).map(|_| s.spawn(|| std::hint::black_box(one::<T>(isa, iters)))).collect();
            hs.into_iter().map(|h| std::hint::black_box(h.join().expect("thread")).1).max().unwrap_or(1)
        });
        let secs = t.elapsed().as_secs_f64();
        best = best.max(threads as f64 * iters as f64 * 16.0 * lanes as f64 * 2.0 / secs);
    }
    best
}
