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

use parki_core::{Par, Result};
use rayon::prelude::{IntoParallelIterator, ParallelIterator};

use crate::ffi::{ClassPlans, Kind, Plan1d};
use crate::ptr::Ptr;
use crate::{FftReal, PlanRigor};

/// Bytes of one block's lines: `n x B` complex values, kept within L2.
const BLOCK_BYTES: usize = 64 * 1024;

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

/// Transforms along [`Lines`], in blocks of adjacent columns.
pub(crate) struct BlockedLines<T: FftReal> {
    full: Plan1d<T>,
    rest: Option<Plan1d<T>>,
    /// Measured SIMD plans of the full and the last block width per address class of the
    /// blocks' starts (empty under FFTW_ESTIMATE); the unaligned plans run the others.
    simd_full: ClassPlans<T>,
    simd_rest: ClassPlans<T>,
    /// Reals per element of the transform (2 complex, 1 real).
    unit: usize,
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
    /// line). With [`PlanRigor::Measure`] each address class of the block starts also gets a
    /// measured SIMD plan (design.md, "Strided plans").
    pub(crate) fn new(kind: Kind, lines: Lines, data: *mut T, rigor: PlanRigor) -> Result<Self> {
        let Lines { n, start, stride, width, outer, inner } = lines;
        let unit = match kind {
            Kind::R2r(_) => 1,
            _ => 2,
        };
        let per_column = n.max(1) * unit * T::BYTES;
        let block = (BLOCK_BYTES / per_column).clamp(4, 64).min(width.max(1));
        // FFTW_UNALIGNED (scalar codelets): the blocks execute at many offsets of `data`. With
        // FFTW_ESTIMATE, plans allowed SIMD were 3x slower at 128^3 and 256^3 (docs/design.md,
        // "Strided plans stay unaligned"), so only measured plans get SIMD, one per address class.
        let plan = |b: usize| Plan1d::single(kind, n, (stride, stride), &[(b, 1, 1)], data, rigor, false);
        let full = plan(block)?;
        let rest = if !width.is_multiple_of(block) { Some(plan(width % block)?) } else { None };
        let mut me = Self {
            full,
            rest,
            simd_full: ClassPlans::none(),
            simd_rest: ClassPlans::none(),
            unit,
            stride,
            zero: 0..0,
            start,
            block,
            width,
            outer,
            inner,
        };
        if rigor == PlanRigor::Measure {
            // the first elements of the full (or the last, narrower) blocks
            let starts = |rest: bool| {
                let me = &me;
                (0..me.tasks()).map(|t| me.column(t)).filter(move |c| c.1 == rest).map(|c| {
                    // SAFETY: every block's first element lies inside the planned layout.
                    unsafe { data.add(unit * c.0) }
                })
            };
            let simd =
                |b: usize| move |p: *mut T| Plan1d::single(kind, n, (stride, stride), &[(b, 1, 1)], p, rigor, true);
            let simd_full = ClassPlans::new(starts(false), simd(block))?;
            let simd_rest = ClassPlans::new(starts(true), simd(width % block))?;
            me.simd_full = simd_full;
            me.simd_rest = simd_rest;
        }
        Ok(me)
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

    /// The first element of block `task`, and whether it is its group's last, narrower block.
    fn column(&self, task: usize) -> (usize, bool) {
        let per_group = self.width.div_ceil(self.block);
        let (g, b) = (task / per_group, task % per_group);
        let (i, k) = (g / self.inner.0, g % self.inner.0);
        let column = self.start + i * self.outer.1 + k * self.inner.1 + b * self.block;
        (column, (b + 1) * self.block > self.width)
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
        let run = |task: usize| {
            let (column, last) = self.column(task);
            // SAFETY: element `column` (real `unit * column`) lies inside the caller's buffer.
            let p = unsafe { shared.get().add(self.unit * column) };
            let plan = if last {
                self.simd_rest.at(p).or(self.rest.as_ref())
            } else {
                self.simd_full.at(p).or(Some(&self.full))
            };
            if let Some(plan) = plan {
                let columns = if last { self.width % self.block } else { self.block };
                // SAFETY: the block's lines lie inside the caller's buffer (the planned layout),
                // no other task touches its columns, and a SIMD plan runs only at its class.
                unsafe {
                    for j in self.zero.clone() {
                        std::ptr::write_bytes(p.add(self.unit * j * self.stride), 0, self.unit * columns);
                    }
                    plan.execute(p)
                };
            }
        };
        match par {
            Par::Rayon(_) => (0..self.tasks()).into_par_iter().for_each(run),
            Par::Seq => (0..self.tasks()).for_each(run),
        }
    }
}
