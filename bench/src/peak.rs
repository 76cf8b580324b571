//! The floating-point peak of the cores, measured by a loop of independent FMAs in the widest
//! vectors this CPU has, on every thread at once.

use std::time::Instant;

use parki_nearfield::simd::fma_chains;
use parki_nearfield::{Isa, IsaToken, P2pReal};

/// Flops per second of all `threads` threads running the FMA loop at once, in the vectors of
/// `isa` (scalar code if this CPU lacks it: the loop runs behind an [`IsaToken`]).
pub fn fma_peak<T: P2pReal>(isa: Isa, threads: usize) -> f64 {
    let token = IsaToken::new(isa).unwrap_or_else(IsaToken::scalar);
    let iters = 100_000_000u64;
    let mut best: f64 = 0.0;
    for _ in 0..3 {
        let t = Instant::now();
        let lanes = std::thread::scope(|s| {
            let hs: Vec<_> =
                (0..threads).map(|_| s.spawn(|| std::hint::black_box(fma_chains::<T>(token, iters)))).collect();
            hs.into_iter().map(|h| std::hint::black_box(h.join().expect("thread")).1).max().unwrap_or(1)
        });
        let secs = t.elapsed().as_secs_f64();
        best = best.max(threads as f64 * iters as f64 * 16.0 * lanes as f64 * 2.0 / secs);
    }
    best
}
