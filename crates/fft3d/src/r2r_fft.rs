//! Real-to-real transforms through complex FFTs: DCT-II/III and DST-II/III through one
//! real-to-complex FFT of the same length (Makhoul 1980), DCT-IV and DST-IV of even length
//! through one complex FFT of half the length.
//!
//! FFTW computes its REDFT10/01/11 and RODFT10/01/11 with scalar real-to-real codelets; with
//! `FFTW_ESTIMATE` a 256^3 all-even Poisson solve spends over 90% of its time there. Its
//! real-to-complex and complex transforms have SIMD codelets. With FFTW's definitions (digest
//! seed-002 §2.1, eqs. 2.5-2.8):
//!
//! **DCT-II** (Makhoul), any `N`:
//! - reorder: `v_m = x_{2m}` and `v_{N-1-m} = x_{2m+1}`;
//! - `V = DFT(v)` (real-to-complex, `V_k = sum_m v_m e^{-2 pi i m k / N}`);
//! - with `z_k = e^{-i pi k / (2N)} V_k`: `Y_k = 2 Re z_k` and `Y_{N-k} = -2 Im z_k`
//!   (`0 < k <= N/2`).
//!
//! **DCT-III**: the same steps transposed and run backwards: `V_k = e^{i pi k / (2N)} (X_k - i
//! X_{N-k})` (`X_N = 0`), `v` = the unnormalised complex-to-real DFT of `V`, and `x_{2m} = v_m`,
//! `x_{2m+1} = v_{N-1-m}`; it equals FFTW's REDFT01 (DCT-III of DCT-II is `2N` times the
//! identity). **DST-II/III** follow from `DST-II(x)_k = DCT-II((-1)^j x_j)_{N-1-k}` and
//! `DST-III(X)_k = (-1)^k DCT-III(X_{N-1-j})_k`: a sign in the reordering and a reversal in
//! the twiddle.
//!
//! **DCT-IV**, `N = 2M` even: splitting `j` into `2m` and `N - 1 - 2m`,
//! `Y_{2k} = 2 Re w_k` and `Y_{N-1-2k} = -2 Im w_k` with `w_k = e^{-i pi k / N} Z_k`, `Z =
//! DFT_M(z)` (complex, `M` points) and `z_m = (x_{2m} + i x_{N-1-2m}) e^{-i pi (m + 1/4) / N}`
//! (the angle `pi (2m + 1/2)(2k + 1/2) / N` is `2 pi m k / M + pi (m + k + 1/4) / N`).
//! **DST-IV**: `DST-IV(x)_k = (-1)^k DCT-IV(x_{N-1-j})_k`. Both are their own inverses up to `2N`.
//!
//! The lines are processed in blocks of `B` lines: each block is gathered (reordered) into a
//! per-thread scratch of `B` contiguous lines, transformed there by one batched FFTW plan made
//! for that scratch, and scattered (twiddled) back. Each thread owns one scratch, allocated with
//! the plan; executing allocates nothing.

use parki_core::memory::HugeBuffer;
use parki_core::{Error, Par, Result};
use rayon::prelude::{IntoParallelIterator, ParallelIterator};

use crate::ffi::{Kind, Plan1d, R2rKind};
use crate::ptr::Ptr;
use crate::scratch::odd_cache_lines;
use crate::{FftReal, PlanRigor};

/// Bytes of one block's scratch, kept within L2 (64 KiB measured fastest at 64^3 and 256^3
/// among 16 KiB to 512 KiB; rounding the block down to whole cache lines of columns was slower).
const BLOCK_BYTES: usize = 64 * 1024;
/// Most lines per block (the gather keeps their starts on the stack).
const MAX_BLOCK: usize = 64;
/// Scratch lines start 64 bytes apart at least, so that every thread's lines have the alignment
/// FFTW planned for.
const LINE_ALIGN_BYTES: usize = 64;

/// A set of lines of `n` elements (reals) at stride `stride`: line `i` of the flattened loops
/// `loops` (outermost first, `(count, distance)`) starts at `start + sum_l i_l * distance_l`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LineSet {
    pub(crate) n: usize,
    pub(crate) stride: usize,
    pub(crate) start: usize,
    pub(crate) loops: [(usize, usize); 3],
}

impl LineSet {
    fn count(&self) -> usize {
        self.loops.iter().map(|l| l.0).product()
    }

    /// First element of line `i`.
    #[inline]
    fn base(&self, i: usize) -> usize {
        let [(_, d0), (c1, d1), (c2, d2)] = self.loops;
        let (i2, rest) = (i % c2, i / c2);
        self.start + (rest / c1) * d0 + (rest % c1) * d1 + i2 * d2
    }
}

/// Whether [`FftR2r`] computes `kind` on lines of `n`.
pub(crate) fn supports(kind: R2rKind, n: usize) -> bool {
    match kind {
        R2rKind::Dct2 | R2rKind::Dct3 | R2rKind::Dst2 | R2rKind::Dst3 => true,
        R2rKind::Dct4 | R2rKind::Dst4 => n.is_multiple_of(2),
        R2rKind::Dct1 | R2rKind::Dst1 => false,
    }
}

/// DCT/DST-II, III or IV (FFTW's definitions and scaling) along a [`LineSet`], through batched
/// real-to-complex (II), complex-to-real (III) or complex (IV) FFTs on per-thread scratch.
pub(crate) struct FftR2r<T: FftReal> {
    kind: R2rKind,
    lines: LineSet,
    /// Lines per block.
    block: usize,
    /// Reals between scratch lines (at least `2 (N/2 + 1)`).
    ld: usize,
    full: Plan1d<T>,
    rest: Option<Plan1d<T>>,
    /// II/III: `cos` and `sin` of `pi k / (2N)`, `k = 0..=N/2`. IV: of `pi k / N`, `k < N/2`
    /// (the post-twiddle), then of `pi (m + 1/4) / N`, `m < N/2` (the pre-twiddle).
    cos: Vec<T>,
    sin: Vec<T>,
    scratch: HugeBuffer<T>,
    threads: usize,
}

impl<T: FftReal> FftR2r<T> {
    /// Plans `kind` (one [`supports`]) along `lines` for execution on `threads` threads.
    pub(crate) fn new(kind: R2rKind, lines: LineSet, threads: usize, rigor: PlanRigor) -> Result<Self> {
        let n = lines.n.max(1);
        if !supports(kind, n) {
            return Err(Error::OutOfRange {
                field: "fft r2r kind".into(),
                value: format!("{kind:?} of {n} points"),
                allowed: "DCT/DST-II or III, or DCT/DST-IV of an even length, for the FFT path".into(),
            });
        }
        let four = matches!(kind, R2rKind::Dct4 | R2rKind::Dst4);
        let h = if four { n / 2 } else { n / 2 + 1 };
        let align = (LINE_ALIGN_BYTES / T::BYTES).max(2);
        // an odd number of cache lines per line: the permutations' values of one grid row
        // spread over L1's sets
        let ld = odd_cache_lines(2 * h, align);
        let block = (BLOCK_BYTES / (ld * T::BYTES)).clamp(4, MAX_BLOCK).min(lines.count().max(1));
        let threads = threads.max(1);
        let mut scratch = HugeBuffer::try_new(threads * block * ld, T::ZERO, 1, "real-to-real scratch")?;
        let ptr = scratch.as_mut_slice().as_mut_ptr();
        let plan = |b: usize| match kind {
            R2rKind::Dct2 | R2rKind::Dst2 => Plan1d::new(Kind::R2c, n, (1, 1), &[(b, ld, ld / 2)], ptr, 1, rigor),
            R2rKind::Dct3 | R2rKind::Dst3 => Plan1d::new(Kind::C2r, n, (1, 1), &[(b, ld / 2, ld)], ptr, 1, rigor),
            _ => Plan1d::new(Kind::C2cForward, h, (1, 1), &[(b, ld / 2, ld / 2)], ptr, 1, rigor),
        };
        let full = plan(block)?;
        let tail = lines.count() % block;
        let rest = if tail != 0 { Some(plan(tail)?) } else { None };
        let pi = std::f64::consts::PI;
        let angles: Vec<f64> = if four {
            let post = (0..h).map(|k| pi * k as f64 / n as f64);
            post.chain((0..h).map(|m| pi * (m as f64 + 0.25) / n as f64)).collect()
        } else {
            (0..h).map(|k| pi * k as f64 / (2 * n) as f64).collect()
        };
        let cos = angles.iter().map(|a| T::from_f64(a.cos())).collect();
        let sin = angles.iter().map(|a| T::from_f64(a.sin())).collect();
        Ok(Self { kind, lines, block, ld, full, rest, cos, sin, scratch, threads })
    }

    /// Bytes of the scratch and twiddles.
    pub(crate) fn bytes(&self) -> usize {
        (self.scratch.len() + 2 * self.cos.len()) * T::BYTES
    }

    /// Transforms every line of `data` (a buffer holding the planned [`LineSet`]).
    ///
    /// # Safety
    /// Every element of every line must lie inside `data`'s allocation, and no other thread may
    /// access those elements meanwhile.
    pub(crate) unsafe fn execute(&mut self, data: *mut T, par: Par) {
        let total = self.lines.count();
        if total == 0 || self.lines.n == 0 {
            return;
        }
        let blocks = total.div_ceil(self.block);
        let workers = match par {
            Par::Seq => 1,
            Par::Rayon(t) => t.min(self.threads).min(blocks).max(1),
        };
        let (data, scratch) = (Ptr(data), Ptr(self.scratch.as_mut_slice().as_mut_ptr()));
        let this = &*self;
        let run = |w: usize| {
            // SAFETY: worker w owns scratch block w (w < threads) and the lines of its blocks.
            let s = unsafe { scratch.get().add(w * this.block * this.ld) };
            for b in (w * blocks / workers)..((w + 1) * blocks / workers) {
                let first = b * this.block;
                let count = this.block.min(total - first);
                // SAFETY: forwarded from the caller; the scratch holds `block` lines of `ld`.
                unsafe { this.run_block(data.get(), s, first, count) };
            }
        };
        if workers == 1 {
            run(0);
        } else {
            (0..workers).into_par_iter().for_each(run);
        }
    }

    /// Transforms lines `first..first + count` (`count <= block`) through scratch `s`.
    ///
    /// # Safety
    /// As [`execute`](Self::execute); `s` holds `block * ld` reals owned by this call.
    unsafe fn run_block(&self, x: *mut T, s: *mut T, first: usize, count: usize) {
        let mut bases = [0usize; MAX_BLOCK];
        for (c, b) in bases[..count].iter_mut().enumerate() {
            *b = self.lines.base(first + c);
        }
        let bases = &bases[..count];
        let plan = if count == self.block { &self.full } else { self.rest.as_ref().unwrap_or(&self.full) };
        // SAFETY: forwarded; the plan was made for `count` lines of this scratch's layout and
        // alignment (every worker's scratch starts a multiple of 64 bytes from the first).
        unsafe {
            match self.kind {
                R2rKind::Dct2 | R2rKind::Dst2 => {
                    self.permute::<true>(x, s, bases, self.kind == R2rKind::Dst2);
                    plan.execute(s);
                    self.twiddle(x, s, bases, self.kind == R2rKind::Dst2);
                }
                R2rKind::Dct3 | R2rKind::Dst3 => {
                    self.untwiddle(x, s, bases, self.kind == R2rKind::Dst3);
                    plan.execute(s);
                    self.permute::<false>(x, s, bases, self.kind == R2rKind::Dst3);
                }
                _ => {
                    self.fold4(x, s, bases, self.kind == R2rKind::Dst4);
                    plan.execute(s);
                    self.unfold4(x, s, bases, self.kind == R2rKind::Dst4);
                }
            }
        }
    }

    /// Slot of `x_j` in the reordered line `v`.
    #[inline]
    fn slot(n: usize, j: usize) -> usize {
        if j.is_multiple_of(2) {
            j / 2
        } else {
            n - 1 - j / 2
        }
    }

    /// Makhoul's permutation between the lines and the scratch: `GATHER` copies `s[c][slot(j)]
    /// = (-1)^j? x[base_c + j stride]` (the sign for the sine transform), otherwise the inverse
    /// `x[base_c + j stride] = (-1)^j? s[c][slot(j)]`.
    unsafe fn permute<const GATHER: bool>(&self, x: *mut T, s: *mut T, bases: &[usize], sine: bool) {
        let (n, stride, ld) = (self.lines.n, self.lines.stride, self.ld);
        let sign = |j: usize| if sine && j % 2 == 1 { -T::ONE } else { T::ONE };
        // SAFETY: `p` is line element `b + off` of `x` (inside it: the caller) and `q` scratch
        // element `c * ld + slot` (below count * ld).
        let copy = |p: *mut T, q: *mut T, sg: T| unsafe {
            if GATHER {
                *q = sg * *p;
            } else {
                *p = sg * *q;
            }
        };
        // SAFETY: as in `copy`.
        unsafe {
            if stride == 1 {
                for (c, &b) in bases.iter().enumerate() {
                    for j in 0..n {
                        copy(x.add(b + j), s.add(c * ld + Self::slot(n, j)), sign(j));
                    }
                }
            } else {
                for j in 0..n {
                    let (slot, sg, off) = (Self::slot(n, j), sign(j), j * stride);
                    for (c, &b) in bases.iter().enumerate() {
                        copy(x.add(b + off), s.add(c * ld + slot), sg);
                    }
                }
            }
        }
    }

    /// DCT-II from the half spectrum `V` in scratch: `z_k = e^{-i pi k / 2N} V_k`, `Y_k = 2 Re
    /// z_k`, `Y_{N-k} = -2 Im z_k`; the sine transform stores `Y_k` at `N - 1 - k`.
    unsafe fn twiddle(&self, x: *mut T, s: *mut T, bases: &[usize], sine: bool) {
        let (n, stride, ld) = (self.lines.n, self.lines.stride, self.ld);
        let two = T::from_f64(2.0);
        let pos = |k: usize| if sine { n - 1 - k } else { k };
        // SAFETY: line elements inside `x` (the caller), scratch indices below count * ld.
        unsafe {
            for k in 0..=n / 2 {
                let (co, si) = (self.cos[k], self.sin[k]);
                let (pk, pm) = (pos(k) * stride, pos((n - k) % n) * stride);
                let pair = k != 0 && 2 * k != n;
                for (c, &b) in bases.iter().enumerate() {
                    let (re, im) = (*s.add(c * ld + 2 * k), *s.add(c * ld + 2 * k + 1));
                    *x.add(b + pk) = two * (co * re + si * im);
                    if pair {
                        *x.add(b + pm) = two * (si * re - co * im);
                    }
                }
            }
        }
    }

    /// The DCT-III's first step: `V_k = e^{i pi k / 2N} (X_k - i X_{N-k})` into scratch (`X_N =
    /// 0`); the sine transform reads `X_{N-1-k}` for `X_k`.
    unsafe fn untwiddle(&self, x: *mut T, s: *mut T, bases: &[usize], sine: bool) {
        let (n, stride, ld) = (self.lines.n, self.lines.stride, self.ld);
        let pos = |k: usize| if sine { n - 1 - k } else { k };
        // SAFETY: line elements inside `x` (the caller), scratch indices below count * ld.
        unsafe {
            for k in 0..=n / 2 {
                let (co, si) = (self.cos[k], self.sin[k]);
                let pk = pos(k) * stride;
                let pm = if k == 0 { None } else { Some(pos(n - k) * stride) };
                for (c, &b) in bases.iter().enumerate() {
                    let a = *x.add(b + pk);
                    let m = pm.map_or(T::ZERO, |p| *x.add(b + p));
                    *s.add(c * ld + 2 * k) = co * a + si * m;
                    *s.add(c * ld + 2 * k + 1) = si * a - co * m;
                }
            }
        }
    }

    /// DCT-IV's first step: `z_m = (x_{2m} + i x_{N-1-2m}) e^{-i pi (m + 1/4) / N}` into
    /// scratch; the sine transform reads the reversed line (`x_{N-1-2m}` for `x_{2m}`).
    unsafe fn fold4(&self, x: *mut T, s: *mut T, bases: &[usize], sine: bool) {
        let (n, stride, ld) = (self.lines.n, self.lines.stride, self.ld);
        let h = n / 2;
        // SAFETY: line elements inside `x` (the caller), scratch indices below count * ld.
        unsafe {
            for m in 0..h {
                let (co, si) = (self.cos[h + m], self.sin[h + m]);
                let (pa, pb) = if sine { (n - 1 - 2 * m, 2 * m) } else { (2 * m, n - 1 - 2 * m) };
                let (pa, pb) = (pa * stride, pb * stride);
                for (c, &b) in bases.iter().enumerate() {
                    let (a, bb) = (*x.add(b + pa), *x.add(b + pb));
                    *s.add(c * ld + 2 * m) = a * co + bb * si;
                    *s.add(c * ld + 2 * m + 1) = bb * co - a * si;
                }
            }
        }
    }

    /// DCT-IV's last step: `w_k = e^{-i pi k / N} Z_k`, `Y_{2k} = 2 Re w_k`, `Y_{N-1-2k} = -2 Im
    /// w_k`; the sine transform negates the odd outputs (`(-1)^k`).
    unsafe fn unfold4(&self, x: *mut T, s: *mut T, bases: &[usize], sine: bool) {
        let (n, stride, ld) = (self.lines.n, self.lines.stride, self.ld);
        let two = T::from_f64(2.0);
        let odd = if sine { -two } else { two };
        // SAFETY: line elements inside `x` (the caller), scratch indices below count * ld.
        unsafe {
            for k in 0..n / 2 {
                let (co, si) = (self.cos[k], self.sin[k]);
                let (pe, po) = (2 * k * stride, (n - 1 - 2 * k) * stride);
                for (c, &b) in bases.iter().enumerate() {
                    let (re, im) = (*s.add(c * ld + 2 * k), *s.add(c * ld + 2 * k + 1));
                    *x.add(b + pe) = two * (co * re + si * im);
                    *x.add(b + po) = odd * (si * re - co * im);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{FftR2r, LineSet};
    use crate::ffi::{Kind, Plan1d, R2rKind};
    use crate::{FftReal, PlanRigor};
    use parki_core::Par;

    /// FFTW's own r2r of every line, for comparison.
    fn fftw_r2r<T: FftReal>(kind: R2rKind, lines: LineSet, data: &mut [T]) {
        let mut tmp = vec![T::ZERO; lines.n];
        for i in 0..lines.loops.iter().map(|l| l.0).product() {
            let b = lines.base(i);
            for j in 0..lines.n {
                tmp[j] = data[b + j * lines.stride];
            }
            let p =
                Plan1d::new(Kind::R2r(kind), lines.n, (1, 1), &[(1, 1, 1)], tmp.as_mut_ptr(), 1, PlanRigor::Estimate)
                    .unwrap();
            // SAFETY: planned on tmp.
            unsafe { p.execute(tmp.as_mut_ptr()) };
            for j in 0..lines.n {
                data[b + j * lines.stride] = tmp[j];
            }
        }
    }

    fn check<T: FftReal>(kind: R2rKind, lines: LineSet, len: usize, par: Par, tol: f64) {
        crate::ensure_fftw_threads();
        let mut a: Vec<T> = (0..len).map(|i| T::from_f64(((i * 37 + 11) % 101) as f64 / 50.0 - 1.0)).collect();
        let mut b = a.clone();
        let mut m = FftR2r::<T>::new(kind, lines, 2, PlanRigor::Estimate).unwrap();
        // SAFETY: every line lies inside `a` (checked by the layouts below).
        unsafe { m.execute(a.as_mut_ptr(), par) };
        fftw_r2r(kind, lines, &mut b);
        let scale = b.iter().map(|v| v.to_f64().abs()).fold(0.0, f64::max).max(1.0);
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            let e = (x.to_f64() - y.to_f64()).abs() / scale;
            assert!(e < tol, "{kind:?} n={} element {i}: {} vs {} ({e:.2e})", lines.n, x.to_f64(), y.to_f64());
        }
    }

    #[test]
    fn equals_fftw_on_contiguous_and_strided_lines() {
        use R2rKind::{Dct2, Dct3, Dct4, Dst2, Dst3, Dst4};
        for kind in [Dct2, Dct3, Dst2, Dst3, Dct4, Dst4] {
            for n in [1, 2, 3, 4, 5, 6, 7, 8, 15, 16, 33, 64, 100] {
                if !super::supports(kind, n) {
                    continue;
                }
                // rows of n in lines of n + 3 slots at offset 1, two components
                let rows = LineSet { n, stride: 1, start: 1, loops: [(2, 7 * (n + 3)), (7, n + 3), (1, 0)] };
                check::<f64>(kind, rows, 14 * (n + 3), Par::Rayon(2), 1e-13);
                check::<f32>(kind, rows, 14 * (n + 3), Par::Seq, 2e-5);
                // columns: n rows of 9 adjacent columns (stride 9), 3 groups, complex (stride 18)
                let cols = LineSet { n, stride: 18, start: 0, loops: [(3, 18 * n), (9, 2), (2, 1)] };
                check::<f64>(kind, cols, 54 * n, Par::Rayon(2), 1e-13);
                check::<f64>(kind, cols, 54 * n, Par::Seq, 1e-13);
                check::<f32>(kind, cols, 54 * n, Par::Rayon(2), 2e-5);
            }
        }
    }

    #[test]
    fn many_blocks_with_a_remainder() {
        // 300 lines of 48: several blocks per worker and a partial last block
        let lines = LineSet { n: 48, stride: 300, start: 0, loops: [(1, 0), (1, 0), (300, 1)] };
        for kind in [R2rKind::Dct2, R2rKind::Dct3, R2rKind::Dst2, R2rKind::Dst3, R2rKind::Dct4, R2rKind::Dst4] {
            check::<f64>(kind, lines, 300 * 48, Par::Rayon(2), 1e-13);
        }
    }

    #[test]
    fn roundtrip_is_2n_times_identity() {
        crate::ensure_fftw_threads();
        let n = 24;
        let lines = LineSet { n, stride: 1, start: 0, loops: [(1, 0), (5, n), (1, 0)] };
        let pairs = [(R2rKind::Dct2, R2rKind::Dct3), (R2rKind::Dst2, R2rKind::Dst3), (R2rKind::Dct4, R2rKind::Dct4)];
        for (f, b) in pairs.into_iter().chain([(R2rKind::Dst4, R2rKind::Dst4)]) {
            let x: Vec<f64> = (0..5 * n).map(|i| (i as f64 * 0.37).sin()).collect();
            let mut y = x.clone();
            let mut mf = FftR2r::<f64>::new(f, lines, 1, PlanRigor::Estimate).unwrap();
            let mut mb = FftR2r::<f64>::new(b, lines, 1, PlanRigor::Estimate).unwrap();
            // SAFETY: the lines fill `y`.
            unsafe {
                mf.execute(y.as_mut_ptr(), Par::Seq);
                mb.execute(y.as_mut_ptr(), Par::Seq);
            }
            for (u, v) in x.iter().zip(&y) {
                assert!((u * (2 * n) as f64 - v).abs() < 1e-12 * (2 * n) as f64);
            }
        }
    }

    #[test]
    fn refuses_other_kinds() {
        let lines = LineSet { n: 4, stride: 1, start: 0, loops: [(1, 0), (1, 0), (1, 0)] };
        assert!(FftR2r::<f64>::new(R2rKind::Dct1, lines, 1, PlanRigor::Estimate).is_err());
        let odd = LineSet { n: 5, ..lines };
        assert!(FftR2r::<f64>::new(R2rKind::Dct4, odd, 1, PlanRigor::Estimate).is_err());
    }
}
