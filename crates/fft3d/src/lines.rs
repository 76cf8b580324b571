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

use crate::ffi::{Kind, Plan1d};
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
    /// Reals per element of the transform (2 complex, 1 real).
    unit: usize,
    start: usize,
    block: usize,
    width: usize,
    outer: (usize, usize),
    inner: (usize, usize),
}

impl<T: FftReal> BlockedLines<T> {
    /// Plans the block transforms of `kind` (c2c or r2r) on `data` (a buffer that holds every
    /// line).
    pub(crate) fn new(kind: Kind, lines: Lines, data: *mut T, rigor: PlanRigor) -> Result<Self> {
        let Lines { n, start, stride, width, outer, inner } = lines;
        let unit = match kind {
            Kind::R2r(_) => 1,
            _ => 2,
        };
        let per_column = n.max(1) * unit * T::BYTES;
        let block = (BLOCK_BYTES / per_column).clamp(4, 64).min(width.max(1));
        // FFTW_UNALIGNED (scalar codelets): the blocks execute at many offsets of `data`. f64
        // complex blocks keep FFTW's 16-byte alignment and could be planned aligned (SIMD), but
        // FFTW_ESTIMATE then chose plans 3x slower at 128^3 and 256^3 (1.4x faster at 64^3;
        // no change with FFTW_MEASURE): docs/design.md, "Aligned strided plans".
        let plan = |b: usize| Plan1d::unaligned(kind, n, (stride, stride), &[(b, 1, 1)], data, rigor);
        let full = plan(block)?;
        let rest = if !width.is_multiple_of(block) { Some(plan(width % block)?) } else { None };
        Ok(Self { full, rest, unit, start, block, width, outer, inner })
    }

    /// Transforms every line of `data` (the buffer planned on, or one of the same layout).
    ///
    /// # Safety
    /// `data` must hold every line of the planned layout.
    pub(crate) unsafe fn execute(&self, data: *mut T, par: Par) {
        if self.width == 0 {
            return;
        }
        let per_group = self.width.div_ceil(self.block);
        let groups = self.outer.0 * self.inner.0;
        let shared = Ptr(data);
        let run = |task: usize| {
            let (g, b) = (task / per_group, task % per_group);
            let (i, k) = (g / self.inner.0, g % self.inner.0);
            let column = self.start + i * self.outer.1 + k * self.inner.1 + b * self.block;
            let plan = if (b + 1) * self.block > self.width { self.rest.as_ref() } else { Some(&self.full) };
            if let Some(plan) = plan {
                // SAFETY: the block's lines lie inside the caller's buffer (the planned layout)
                // and no other task touches its columns; element `column` is real
                // `unit * column`.
                unsafe { plan.execute(shared.get().add(self.unit * column)) };
            }
        };
        match par {
            Par::Rayon(_) => (0..groups * per_group).into_par_iter().for_each(run),
            Par::Seq => (0..groups * per_group).for_each(run),
        }
    }
}
