//! Aligned scratch buffers kept by a plan for the threads that execute it.
//!
//! A plan that copies blocks of lines into contiguous memory ([`BlockedLines`]'s gathered
//! blocks) needs one buffer per concurrent executor: the threads of its own parallel loop, or
//! the callers that run it at once on different planes ([`PlanePasses`]). The pool hands out
//! a buffer per executor and takes it back; it allocates only while more executors run at once
//! than ever before (the first execution), so the hot loops allocate nothing afterwards. Every
//! buffer starts at a multiple of [`SIMD_ALIGN`] bytes, the alignment the plans executed on it
//! were made for.
//!
//! [`BlockedLines`]: crate::lines::BlockedLines
//! [`PlanePasses`]: crate::planes::PlanePasses

use std::sync::Mutex;

use crate::ffi::SIMD_ALIGN;
use crate::FftReal;

/// `len` values rounded up to a whole, odd number of 64-byte cache lines of `per_line` values
/// each: the distance between the lines of a scratch that a gather fills one value per line at
/// a time. Lines a multiple of 4 KiB apart (256 complex `f64` points) put those values into one
/// set of L1, whose 64 sets repeat every 4 KiB, and its 12 ways hold fewer than a block's 16
/// lines; an odd number of cache lines between them puts consecutive lines' values into
/// different sets (design.md, "The scratch's lines lie an odd number of cache lines apart").
pub(crate) fn odd_cache_lines(len: usize, per_line: usize) -> usize {
    let lines = len.div_ceil(per_line);
    (lines + 1 - lines % 2) * per_line
}

/// One buffer of `len` values starting at a [`SIMD_ALIGN`]-byte boundary.
pub(crate) struct Scratch<T> {
    buf: Vec<T>,
    offset: usize,
}

impl<T: FftReal> Scratch<T> {
    /// A zero-filled buffer of `len` values.
    pub(crate) fn new(len: usize) -> Self {
        let extra = SIMD_ALIGN / T::BYTES;
        let buf = vec![T::ZERO; len + extra];
        let misalign = (buf.as_ptr() as usize % SIMD_ALIGN) / T::BYTES;
        let offset = if misalign == 0 { 0 } else { extra - misalign };
        Self { buf, offset }
    }

    /// The aligned start.
    pub(crate) fn ptr(&mut self) -> *mut T {
        // SAFETY: `offset < extra`, so the aligned start and `len` values after it lie in `buf`.
        unsafe { self.buf.as_mut_ptr().add(self.offset) }
    }
}

/// Buffers of one length for the executors of one plan.
pub(crate) struct ScratchPool<T> {
    len: usize,
    free: Mutex<Vec<Scratch<T>>>,
}

impl<T: FftReal> ScratchPool<T> {
    /// A pool of buffers of `len` values holding `first` (a buffer the plan was made on).
    pub(crate) fn new(len: usize, first: Scratch<T>) -> Self {
        Self { len, free: Mutex::new(vec![first]) }
    }

    /// A buffer for one executor: a returned one, or a new one when all are in use.
    pub(crate) fn take(&self) -> Scratch<T> {
        let reused = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop();
        reused.unwrap_or_else(|| Scratch::new(self.len))
    }

    /// Returns a buffer taken by [`take`](Self::take).
    pub(crate) fn give(&self, s: Scratch<T>) {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).push(s);
    }
}
