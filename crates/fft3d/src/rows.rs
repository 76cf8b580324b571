//! The a0 pass of an unfused [`DistFft`](crate::DistFft) on RustFFT: its contiguous rows,
//! real-to-complex (`realfft`) or complex, transformed in place row by row. The fused passes
//! (module `planes`) run each plane's real rows through the same pass, on the plane's thread.
//!
//! Where the a0 and a1 passes cannot run fused per plane (module `planes`: pencils with several
//! parts along a1, or mode classes), the a0 pass is a batch of contiguous rows of the T0 block:
//! `rows` rows of `comps` components, each row the `n` reals (or `n` complex values) of one a0
//! line in FFTW's in-place layout. FFTW_ESTIMATE's batched r2c plan of such rows ran 96-point
//! rows at 4.9 GFLOP/s on this project's AVX-512 Xeon against `realfft`'s 13.6 (`2.5 n log2 n`
//! per row, 16 rows in cache; 162 points 6.5 against 13.1, 216 8.0 against 14.4: design.md, "The
//! strided passes' lines on RustFFT"), so under [`LineEngine::RustFft`](crate::LineEngine) the
//! rows go the same way as the fused pass's: each row through the plan's scratch (`realfft`
//! reads a copy, writes the row's `n/2 + 1` complex slots), the rows split into one contiguous
//! run per thread, each run with one scratch from the pool. Nothing is allocated per execution
//! after the first.

use parki_core::Par;
use rayon::prelude::{IntoParallelIterator, ParallelIterator};

use crate::ffi::{Kind, NativeLines, NativeRows};
use crate::ptr::Ptr;
use crate::scratch::{Scratch, ScratchPool};
use crate::FftReal;

/// Below this many reals in all rows a pass runs on the calling thread (a parallel loop costs
/// more than it saves on a few small rows).
const PARALLEL_REALS: usize = 1 << 15;

/// One row's transform.
enum RowFft<T: FftReal> {
    /// Real-to-complex or complex-to-real (`realfft`), even lengths.
    Real(Box<dyn NativeRows<T>>),
    /// Complex, in place (RustFFT) on the row's `n` complex values.
    Complex(Box<dyn NativeLines<T>>),
}

/// Where the rows are, in reals of the transform's buffer: row `r` of component `c` starts at
/// `offset + c * comps.1 + r * rows.1`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowSet {
    /// Points per row (reals for real-to-complex, complex values otherwise).
    pub(crate) n: usize,
    /// Rows per component, and the reals between rows (at least the row's `2 (n/2 + 1)` reals
    /// for a real transform, `2 n` for a complex one).
    pub(crate) rows: (usize, usize),
    /// Components, and the reals between them.
    pub(crate) comps: (usize, usize),
    /// First real of the first row.
    pub(crate) offset: usize,
}

/// The a0 rows of one direction on RustFFT (module documentation).
pub(crate) struct NativeRowPass<T: FftReal> {
    fft: RowFft<T>,
    pool: ScratchPool<T>,
    layout: RowSet,
}

impl<T: FftReal> NativeRowPass<T> {
    /// The pass of `kind` on `layout`, or `None` when RustFFT does not run it here: a real
    /// transform of odd length (`realfft`'s rows are planned for FFTW's even-length layout
    /// only), or a real-to-real kind.
    pub(crate) fn new(kind: Kind, layout: RowSet) -> Option<Self> {
        let n = layout.n;
        let fft = match kind {
            Kind::R2c | Kind::C2r if n.is_multiple_of(2) && n > 0 => {
                debug_assert!(layout.rows.1 >= 2 * (n / 2 + 1) || layout.rows.0 <= 1, "{layout:?}");
                RowFft::Real(T::native_rows(n, kind == Kind::R2c))
            }
            Kind::C2cForward | Kind::C2cBackward if n > 0 => {
                debug_assert!(layout.rows.1 >= 2 * n || layout.rows.0 <= 1, "{layout:?}");
                RowFft::Complex(T::native_lines(n, kind == Kind::C2cForward))
            }
            _ => return None,
        };
        let len = match &fft {
            RowFft::Real(f) => f.scratch_len(),
            RowFft::Complex(f) => f.scratch_len(),
        };
        Some(Self { fft, pool: ScratchPool::new(len, Scratch::new(len)), layout })
    }

    /// Transforms every row of `data`.
    ///
    /// # Safety
    /// `data` must be the buffer planned for (or one of the same layout): every row of the
    /// layout inside it, and no other thread touching the rows while this runs.
    pub(crate) unsafe fn execute(&self, data: *mut T, par: Par) {
        let RowSet { n, rows, comps, offset } = self.layout;
        let units = rows.0 * comps.0;
        if units == 0 {
            return;
        }
        let runs = match par {
            Par::Rayon(threads) if units * rows.1 > PARALLEL_REALS => threads.clamp(1, units),
            _ => 1,
        };
        let per_run = units.div_ceil(runs);
        let (row_reals, scratch_len) = match &self.fft {
            RowFft::Real(f) => (2 * (n / 2 + 1), f.scratch_len()),
            RowFft::Complex(f) => (2 * n, f.scratch_len()),
        };
        let shared = Ptr(data);
        let run = |r: usize| {
            let mut scratch = self.pool.take();
            // SAFETY: the pool's buffers hold `scratch_len` values.
            let work = unsafe { std::slice::from_raw_parts_mut(scratch.ptr(), scratch_len) };
            for u in r * per_run..((r + 1) * per_run).min(units) {
                let (c, row) = (u / rows.0, u % rows.0);
                // SAFETY: the row lies inside the caller's buffer (the planned layout) and is
                // this run's alone (runs hold disjoint rows).
                let values = unsafe {
                    std::slice::from_raw_parts_mut(shared.get().add(offset + c * comps.1 + row * rows.1), row_reals)
                };
                match &self.fft {
                    RowFft::Real(f) => f.process(values, work),
                    RowFft::Complex(f) => f.process(values, work),
                }
            }
            self.pool.give(scratch);
        };
        if runs > 1 {
            (0..runs).into_par_iter().for_each(run);
        } else {
            run(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use parki_core::Par;

    use super::{NativeRowPass, RowSet};
    use crate::ffi::Kind;

    /// Every row of every component against its defining sum (`X_k = sum_j x_j e^{-+2 pi i j k
    /// / n}`), real rows forward and back, complex rows both ways, with gaps between the rows and
    /// the components that must stay untouched; sequential and over threads alike. Odd real
    /// lengths are left to FFTW.
    #[test]
    fn rows_equal_their_defining_sums() {
        use std::f64::consts::PI;
        assert!(
            NativeRowPass::<f64>::new(Kind::R2c, RowSet { n: 9, rows: (1, 10), comps: (1, 10), offset: 0 }).is_none()
        );
        for (kind, n) in [(Kind::R2c, 12), (Kind::C2r, 10), (Kind::C2cForward, 9), (Kind::C2cBackward, 6)] {
            let (row_reals, rows, comps) = (2 * n + 6, 700, 3);
            let set = RowSet { n, rows: (rows, row_reals), comps: (comps, rows * row_reals + 5), offset: 4 };
            let len = set.offset + comps * set.comps.1;
            let input: Vec<f64> = (0..len).map(|i| ((i * 7919) % 101) as f64 / 50.0 - 1.0).collect();
            let pass = NativeRowPass::<f64>::new(kind, set).expect("a native pass");
            for par in [Par::Seq, Par::Rayon(3)] {
                let mut data = input.clone();
                // SAFETY: the buffer holds every row of the set.
                unsafe { pass.execute(data.as_mut_ptr(), par) };
                let mut touched = vec![false; len];
                for c in 0..comps {
                    for r in 0..rows {
                        let at = set.offset + c * set.comps.1 + r * set.rows.1;
                        let x = &input[at..];
                        let sign = if matches!(kind, Kind::R2c | Kind::C2cForward) { -1.0 } else { 1.0 };
                        // the input as n complex values (real input: imaginary parts zero; c2r:
                        // the half spectrum extended by Hermitian symmetry, the zero and Nyquist
                        // modes' imaginary parts ignored)
                        let value = |j: usize| -> (f64, f64) {
                            match kind {
                                Kind::R2c => (x[j], 0.0),
                                Kind::C2r => {
                                    let (k, conj) = if j <= n / 2 { (j, 1.0) } else { (n - j, -1.0) };
                                    let im = if k == 0 || 2 * k == n { 0.0 } else { conj * x[2 * k + 1] };
                                    (x[2 * k], im)
                                }
                                _ => (x[2 * j], x[2 * j + 1]),
                            }
                        };
                        let outputs = match kind {
                            Kind::R2c => n / 2 + 1,
                            _ => n,
                        };
                        for k in 0..outputs {
                            let (mut re, mut im) = (0.0, 0.0);
                            for j in 0..n {
                                let (a, b) = value(j);
                                let t = sign * 2.0 * PI * (j * k) as f64 / n as f64;
                                re += a * t.cos() - b * t.sin();
                                im += a * t.sin() + b * t.cos();
                            }
                            let got = match kind {
                                Kind::C2r => {
                                    touched[at + k] = true;
                                    (data[at + k], 0.0)
                                }
                                _ => {
                                    touched[at + 2 * k] = true;
                                    touched[at + 2 * k + 1] = true;
                                    (data[at + 2 * k], data[at + 2 * k + 1])
                                }
                            };
                            let want = if kind == Kind::C2r { (re, 0.0) } else { (re, im) };
                            let err = (got.0 - want.0).abs().max((got.1 - want.1).abs());
                            assert!(
                                err < 1e-12 * n as f64,
                                "{kind:?} n {n} row {r} comp {c} mode {k}: {got:?} vs {want:?}"
                            );
                        }
                        // the rest of a row's own slots are the transform's scratch (FFTW's layout
                        // too): only the gaps after them must stay
                        let own =
                            if matches!(kind, Kind::C2cForward | Kind::C2cBackward) { 2 * n } else { 2 * (n / 2 + 1) };
                        touched[at..at + own].iter_mut().for_each(|t| *t = true);
                    }
                }
                for (i, _) in touched.iter().enumerate().filter(|(_, t)| !**t) {
                    assert_eq!(data[i], input[i], "{kind:?}: value {i} outside the rows changed");
                }
            }
        }
    }
}
