//! Strided 1-D transforms (complex, or real-to-real) along a slow axis, executed in
//! cache-sized blocks.
//!
//! The y and z transforms of the distributed FFT run along axes whose stride is a whole row or
//! plane of the local block (x stays fastest in every topology). One FFTW plan over all lines
//! at once walks `n` points a plane apart for every line, so that each point of each line is a
//! cache (and TLB) miss on large grids: 3.5x slower than FFTW-MPI at 256^3 in our first
//! measurement. Here the lines are cut into blocks of `B` adjacent columns: one block (`n x B`
//! complex values, about 64 KiB) is read from memory once and transformed in cache, FFTW
//! vectorising across its contiguous columns. Blocks are independent and run in parallel.
//!
//! Three ways to run a block (design.md, "Measured block plans", "The strided passes' lines on
//! RustFFT"):
//! - *native* ([`LineEngine::RustFft`], complex lines; the default): the block's `B` lines
//!   gathered into `B` contiguous lines of a scratch (the padding points written as zeros),
//!   transformed there by one RustFFT plan of the line length, and scattered back. RustFFT plans
//!   instantly and the same in every process, and its AVX algorithms run contiguous lines of
//!   every length at 16-31 GFLOP/s in cache on this project's AVX-512 Xeon (210 points: 16, 216:
//!   24, 256: 31), where FFTW_ESTIMATE's strided block plans run 5-9 on lengths other than
//!   powers of two (and FFTW_MEASURE's 12-17).
//! - *in place* ([`LineEngine::Fftw`], [`PlanRigor::Estimate`]; real-to-real lines): one FFTW_ESTIMATE plan, FFTW_UNALIGNED, executed at
//!   each block's offset of the buffer; no planning cost, the same plan in every process;
//! - *gathered* ([`LineEngine::Fftw`], [`PlanRigor::MeasureLines`], [`PlanRigor::Measure`];
//!   real-to-real lines): the block's `n` rows of
//!   `B` columns are copied into a contiguous, aligned scratch (the padding rows of
//!   [`zeroing`](BlockedLines::zeroing) written as zeros, never read), transformed there by plans
//!   FFTW_MEASURE made on that scratch, and copied back. The problem FFTW measures is a small
//!   one in cache (`n x B` values at stride `B`) whatever the grid, so measuring costs 0.05-0.2 s
//!   per line length, direction and block width (against 1-1.7 s for measuring the strided
//!   plans of a 1P grid in place), and FFTW's wisdom serves the same problem in every pass,
//!   process and later run. In cache,
//!   FFTW_ESTIMATE's plans of such blocks run 210-point lines at 6-7 GFLOP/s, the measured ones
//!   at 13-15; FFTW's own buffered plans copy the block the same way.

use parki_core::memory::prefetch_bytes;
use parki_core::{Par, Result};
use rayon::prelude::{IntoParallelIterator, ParallelIterator};

use crate::ffi::{Kind, NativeLines, Plan1d};
use crate::ptr::Ptr;
use crate::scratch::{odd_cache_lines, Scratch, ScratchPool};
use crate::{FftReal, LineEngine, PlanRigor};

/// Bytes of one block's lines: `n x B` complex values, kept within L2.
const BLOCK_BYTES: usize = 64 * 1024;

/// The distance, in complex points, between the lines of a native block's scratch: `n`
/// rounded up to an odd number of cache lines ([`odd_cache_lines`]). The gather writes one
/// value to each of the block's lines per grid row, and the scatter reads them back. Measured
/// on this project's Xeon (performance.md §7.17): the one-rank round trip of 256^3 from 0.78 to
/// 0.53 s, with `n` points between the lines before.
pub(crate) fn native_line_distance<T: FftReal>(n: usize) -> usize {
    odd_cache_lines(n, 64 / (2 * T::BYTES))
}

/// How many rows ahead a native block's gather prefetches the grid's row. Each of a block's
/// `n` rows lies a whole row or plane of the grid from the last, on another page, where the
/// hardware's prefetchers do not follow, so without it every row's first load waits for
/// memory (half of the gather's samples sat on those loads at 216^3). 8 rows ahead took the
/// one-rank round trip of 216^3 and 162^3 from 0.36 and 0.155 s to 0.335 and 0.141 (2, 4 and
/// 16 rows: within 3 % of 8; design.md, "The strided passes' lines on RustFFT").
const ROWS_AHEAD: usize = 8;

/// Where the lines are: transforms of `n` points at stride `stride` (in elements of the
/// transform: complex for c2c, reals for r2r), in groups `(i, k)` (`i < outer.0`, `k <
/// inner.0`) whose first point is element `start + i * outer.1 + k * inner.1` and that hold
/// `width` contiguous columns, one line each.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lines {
    pub(crate) n: usize,
    pub(crate) start: usize,
    pub(crate) stride: usize,
    pub(crate) width: usize,
    pub(crate) outer: (usize, usize),
    pub(crate) inner: (usize, usize),
}

/// How a block runs (module documentation).
enum BlockRun<T: FftReal> {
    /// FFTW in place: the plan of a full block, and of each group's last, narrower block.
    InPlace { full: Plan1d<T>, rest: Option<Plan1d<T>> },
    /// FFTW on a gathered copy (`n` rows of `block` columns; a narrower last block's missing
    /// columns are zeros there).
    Gathered { plan: Plan1d<T>, pool: ScratchPool<T> },
    /// RustFFT on contiguous lines: the scratch holds `block` lines of `n` points, then the
    /// transform's own scratch (`fft.scratch_len()` reals).
    /// `ld` complex points apart (`n` rounded up to an odd number of cache lines:
    /// [`native_line_distance`]).
    Native { fft: Box<dyn NativeLines<T>>, pool: ScratchPool<T>, ld: usize },
}

/// Transforms along [`Lines`], in blocks of adjacent columns.
pub(crate) struct BlockedLines<T: FftReal> {
    run: BlockRun<T>,
    /// Reals per element of the transform (2 complex, 1 real).
    unit: usize,
    /// Points per line.
    n: usize,
    /// Elements between the points of a line.
    stride: usize,
    /// Points of every line zeroed in cache before its block is transformed (a padding that no
    /// earlier step wrote: [`zeroing`](Self::zeroing)).
    zero: std::ops::Range<usize>,
    start: usize,
    block: usize,
    width: usize,
    outer: (usize, usize),
    inner: (usize, usize),
}

impl<T: FftReal> BlockedLines<T> {
    /// Plans the block transforms of `kind` (c2c or r2r) on `data` (a buffer that holds every
    /// line): complex lines on RustFFT under [`LineEngine::RustFft`]; otherwise FFTW's plans in
    /// place under [`PlanRigor::Estimate`], gathered and measured under the other rigors
    /// (module documentation). In place FFTW only reads `data`'s address; otherwise `data` is
    /// not touched.
    pub(crate) fn new(kind: Kind, lines: Lines, data: *mut T, rigor: PlanRigor, engine: LineEngine) -> Result<Self> {
        let Lines { n, start, stride, width, outer, inner } = lines;
        let unit = match kind {
            Kind::R2r(_) => 1,
            _ => 2,
        };
        let per_column = n.max(1) * unit * T::BYTES;
        let widest = (BLOCK_BYTES / per_column).clamp(4, 64).min(width.max(1));
        // the groups' columns in blocks of equal width (the last one narrower by less than the
        // number of blocks), so that one plan runs them all
        let even = width.max(1).div_ceil(width.max(1).div_ceil(widest));
        let complex = matches!(kind, Kind::C2cForward | Kind::C2cBackward);
        let (run, block) = if complex && engine == LineEngine::RustFft {
            let fft = T::native_lines(n, kind == Kind::C2cForward);
            let ld = native_line_distance::<T>(n);
            let len = 2 * ld * even + fft.scratch_len();
            (BlockRun::Native { fft, pool: ScratchPool::new(len, Scratch::new(len)), ld }, even)
        } else if !rigor.measures() {
            // FFTW_UNALIGNED (scalar codelets): the blocks execute at many offsets of `data`.
            // Plans allowed SIMD were 3x slower at 128^3 and 256^3 (docs/design.md, "Strided
            // plans stay unaligned").
            let plan = |b: usize| Plan1d::single(kind, n, (stride, stride), &[(b, 1, 1)], data, rigor, false);
            let rest = if width % widest > 0 { Some(plan(width % widest)?) } else { None };
            (BlockRun::InPlace { full: plan(widest)?, rest }, widest)
        } else {
            let len = n * even * unit;
            let mut first = Scratch::new(len);
            let at = first.ptr();
            let plan = Plan1d::single(kind, n, (even, even), &[(even, 1, 1)], at, PlanRigor::Measure, true)?;
            (BlockRun::Gathered { plan, pool: ScratchPool::new(len, first) }, even)
        };
        Ok(Self { run, unit, n, stride, zero: 0..0, start, block, width, outer, inner })
    }

    /// The same transforms, each block's lines first set to zero at points `zero` (the padding
    /// after the data along a padded axis), so that no separate pass over memory writes it.
    pub(crate) fn zeroing(self, zero: std::ops::Range<usize>) -> Self {
        Self { zero, ..self }
    }

    /// Blocks in all groups.
    fn tasks(&self) -> usize {
        self.outer.0 * self.inner.0 * self.width.div_ceil(self.block)
    }

    /// The first element of block `task` and its columns (fewer than `block` in a group's last
    /// block).
    fn column(&self, task: usize) -> (usize, usize) {
        let per_group = self.width.div_ceil(self.block);
        let (g, b) = (task / per_group, task % per_group);
        let (i, k) = (g / self.inner.0, g % self.inner.0);
        let column = self.start + i * self.outer.1 + k * self.inner.1 + b * self.block;
        (column, self.block.min(self.width - b * self.block))
    }

    /// Transforms every line of `data` (the buffer planned on, or one of the same layout).
    ///
    /// # Safety
    /// `data` must hold every line of the planned layout.
    pub(crate) unsafe fn execute(&self, data: *mut T, par: Par) {
        if self.width == 0 {
            return;
        }
        let shared = Ptr(data);
        let tasks = self.tasks();
        let pool = match &self.run {
            BlockRun::InPlace { full, rest } => {
                let run = |task: usize| {
                    let (column, columns) = self.column(task);
                    // SAFETY: element `column` (real `unit * column`) lies inside the caller's
                    // buffer.
                    let p = unsafe { shared.get().add(self.unit * column) };
                    let plan = match rest {
                        Some(rest) if columns < self.block => rest,
                        _ => full,
                    };
                    // SAFETY: the block's lines lie inside the caller's buffer (the planned
                    // layout), no other task touches its columns, and the unaligned plan runs at
                    // any offset.
                    unsafe {
                        for j in self.zero.clone() {
                            std::ptr::write_bytes(p.add(self.unit * j * self.stride), 0, self.unit * columns);
                        }
                        plan.execute(p)
                    };
                };
                match par {
                    Par::Rayon(_) => (0..tasks).into_par_iter().for_each(run),
                    Par::Seq => (0..tasks).for_each(run),
                }
                return;
            }
            BlockRun::Gathered { pool, .. } | BlockRun::Native { pool, .. } => pool,
        };
        // contiguous runs of blocks, one scratch each
        let runs = match par {
            Par::Rayon(threads) => threads.clamp(1, tasks),
            Par::Seq => 1,
        };
        let per_run = tasks.div_ceil(runs);
        let run = |r: usize| {
            let mut scratch = pool.take();
            for task in r * per_run..((r + 1) * per_run).min(tasks) {
                // SAFETY: the block's columns are this task's alone (as in place above); the
                // scratch is this run's own, a pool buffer of the planned length.
                unsafe {
                    match &self.run {
                        BlockRun::Native { fft, ld, .. } => {
                            self.native_block(shared.get(), task, (scratch.ptr(), *ld), fft.as_ref())
                        }
                        BlockRun::Gathered { plan, .. } => self.gathered_block(shared.get(), task, scratch.ptr(), plan),
                        BlockRun::InPlace { .. } => unreachable!("in-place blocks returned above"),
                    }
                }
            }
            pool.give(scratch);
        };
        match par {
            Par::Rayon(_) => (0..runs).into_par_iter().for_each(run),
            Par::Seq => run(0),
        }
    }

    /// Block `task` copied into `scratch` (`n` rows of `block` columns; the zeroed points and
    /// the columns a narrower last block lacks written as zeros), transformed there by `plan`,
    /// and its columns copied back.
    ///
    /// # Safety
    /// `data` must hold every line of the planned layout, no other thread may touch the block's
    /// columns, and `scratch` must be a pool buffer (`n x block` elements, aligned as planned).
    unsafe fn gathered_block(&self, data: *mut T, task: usize, scratch: *mut T, plan: &Plan1d<T>) {
        let (column, columns) = self.column(task);
        let values = self.unit * columns;
        let missing = self.unit * (self.block - columns);
        let row = |j: usize| {
            // SAFETY: point `j` of the block's first line lies inside the caller's buffer.
            unsafe { data.add(self.unit * (column + j * self.stride)) }
        };
        let slot = |j: usize| {
            // SAFETY: row `j < n` of the scratch.
            unsafe { scratch.add(self.unit * j * self.block) }
        };
        // SAFETY: rows of the caller's block (disjoint from other tasks' columns) and of this
        // executor's scratch; the plan was made on a scratch of the same layout and alignment.
        unsafe {
            for j in 0..self.n {
                if self.zero.contains(&j) {
                    std::ptr::write_bytes(slot(j), 0, values);
                } else {
                    std::ptr::copy_nonoverlapping(row(j), slot(j), values);
                }
                if missing > 0 {
                    std::ptr::write_bytes(slot(j).add(values), 0, missing);
                }
            }
            plan.execute(scratch);
            for j in 0..self.n {
                std::ptr::copy_nonoverlapping(slot(j), row(j), values);
            }
        }
    }

    /// Block `task`'s complex lines gathered into lines of the scratch (line `c` of the block
    /// at `c * ld`, `ld` from [`native_line_distance`]; the zeroed points written as zeros),
    /// transformed there by `fft`, and scattered back. A narrower last block transforms only its
    /// own lines.
    ///
    /// # Safety
    /// As [`gathered_block`](Self::gathered_block); `scratch` holds `2 ld block` reals and then
    /// `fft`'s scratch.
    unsafe fn native_block(&self, data: *mut T, task: usize, (scratch, ld): (*mut T, usize), fft: &dyn NativeLines<T>) {
        let (column, columns) = self.column(task);
        let n = self.n;
        // complex values as pairs of reals (the layout of the caller's buffer and of RustFFT's
        // `Complex<T>`)
        let (src, lines) = (data as *mut [T; 2], scratch as *mut [T; 2]);
        // SAFETY: the block's points lie in the caller's buffer (its columns this task's alone);
        // the scratch holds `block` lines `ld >= n` complex values apart and then `work` reals.
        unsafe {
            for j in 0..n {
                let next = j + ROWS_AHEAD;
                if next < n && !self.zero.contains(&next) {
                    prefetch_bytes(src.add(column + next * self.stride), 2 * columns * T::BYTES);
                }
                if self.zero.contains(&j) {
                    for c in 0..columns {
                        *lines.add(c * ld + j) = [T::ZERO; 2];
                    }
                } else {
                    let row = src.add(column + j * self.stride);
                    for c in 0..columns {
                        *lines.add(c * ld + j) = *row.add(c);
                    }
                }
            }
            let rest = std::slice::from_raw_parts_mut(scratch.add(2 * self.block * ld), fft.scratch_len());
            for c in 0..columns {
                fft.process(std::slice::from_raw_parts_mut(scratch.add(2 * c * ld), 2 * n), rest);
            }
            for j in 0..n {
                let row = src.add(column + j * self.stride);
                for c in 0..columns {
                    *row.add(c) = *lines.add(c * ld + j);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::native_line_distance;

    /// The scratch's lines hold `n` points and lie an odd number of cache lines apart, one more
    /// than `n` rounded up only where that number would be even.
    #[test]
    fn scratch_lines_lie_an_odd_number_of_cache_lines_apart() {
        for n in 1..600 {
            for (ld, bytes) in [(native_line_distance::<f64>(n), 16), (native_line_distance::<f32>(n), 8)] {
                assert!(ld >= n, "{n}: {ld}");
                assert_eq!(ld * bytes % 64, 0, "{n}: {ld}");
                assert_eq!(ld * bytes / 64 % 2, 1, "{n}: {ld}");
                assert!(ld * bytes <= (n * bytes).div_ceil(64) * 64 + 64, "{n}: {ld}");
            }
        }
        assert_eq!(native_line_distance::<f64>(256), 260);
        assert_eq!(native_line_distance::<f64>(216), 220);
        assert_eq!(native_line_distance::<f64>(210), 212);
    }
}
