//! Explicit parallelism (`faer`'s `Par` habit) and a helper for disjoint parallel writes.

use std::marker::PhantomData;

/// How a kernel may run in parallel. Kernels take it as an argument instead of reading global
/// state; `Rayon(n)` means "split the work for `n` threads of the current rayon pool".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Par {
    /// One thread, in order.
    Seq,
    /// The current rayon pool, work split for this many threads.
    Rayon(usize),
}

impl Par {
    /// `Seq` for at most one thread, `Rayon(threads)` otherwise.
    pub fn with_threads(threads: usize) -> Self {
        if threads <= 1 {
            Par::Seq
        } else {
            Par::Rayon(threads)
        }
    }

    /// Number of threads the work is split for.
    pub fn threads(self) -> usize {
        match self {
            Par::Seq => 1,
            Par::Rayon(n) => n.max(1),
        }
    }
}

/// A slice that several threads write to in provably disjoint ranges.
///
/// Used where the disjointness follows from an index structure (cell offsets, grid slabs) that
/// the borrow checker cannot see. Every `unsafe` use states why its ranges are disjoint.
pub struct DisjointSlice<'a, T> {
    ptr: *mut T,
    len: usize,
    _life: PhantomData<&'a mut [T]>,
}

// SAFETY: the only access is `range_mut`, whose contract forbids overlapping ranges across threads.
unsafe impl<T: Send> Send for DisjointSlice<'_, T> {}
// SAFETY: see Send.
unsafe impl<T: Send> Sync for DisjointSlice<'_, T> {}

impl<'a, T> DisjointSlice<'a, T> {
    /// Wraps a mutable slice.
    pub fn new(s: &'a mut [T]) -> Self {
        Self { ptr: s.as_mut_ptr(), len: s.len(), _life: PhantomData }
    }

    /// Length of the wrapped slice.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the wrapped slice is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A mutable view of `start..end`.
    ///
    /// # Safety
    /// No two views that are alive at the same time may overlap.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn range_mut(&self, start: usize, end: usize) -> &mut [T] {
        assert!(start <= end && end <= self.len, "range {start}..{end} outside 0..{}", self.len);
        // SAFETY: in bounds (checked); exclusivity is the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), end - start) }
    }
}

/// Scratch buffers that persist across calls, one per worker thread, so that hot stages
/// allocate (and fault in pages) only on their first evaluation.
#[derive(Debug, Default)]
pub struct ThreadScratch<T> {
    slots: Vec<std::sync::Mutex<Vec<T>>>,
}

impl<T> ThreadScratch<T> {
    /// Buffers for `threads` workers.
    pub fn new(threads: usize) -> Self {
        Self { slots: (0..threads.max(1)).map(|_| std::sync::Mutex::new(Vec::new())).collect() }
    }

    /// The buffer of worker `index` (for example `rayon::current_thread_index()`); an index
    /// past the end shares a buffer, which the lock keeps correct.
    pub fn slot(&self, index: usize) -> std::sync::MutexGuard<'_, Vec<T>> {
        let s = &self.slots[index % self.slots.len()];
        s.lock().unwrap_or_else(|e| e.into_inner())
    }
}
