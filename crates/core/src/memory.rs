//! Large buffers: 2 MiB aligned from 32 MiB up, backed by transparent huge pages where the kernel offers them
//! (`madvise(MADV_HUGEPAGE)` on Linux), and first touched in parallel at allocation. Grids of
//! gigabytes otherwise spend seconds in single-threaded 4 KiB page faults on first use.

use std::alloc::{alloc, dealloc, Layout};
use std::ptr::NonNull;

use crate::error::{Error, Result};

const ALIGN: usize = 2 << 20;

/// Buffers from this size up are aligned to a huge page; smaller ones to a cache line, so that
/// the alignment slack (up to 2 MiB per buffer, which the allocator reserves) stays below 1/16
/// of the buffer.
const HUGE_FROM: usize = 16 * ALIGN;

/// The alignment of a buffer of `bytes`.
fn alignment(bytes: usize) -> usize {
    if bytes >= HUGE_FROM {
        ALIGN
    } else {
        64
    }
}

/// A fixed-length heap buffer of `T`, 2 MiB aligned from 32 MiB up (64 bytes below), filled in
/// parallel at creation.
pub struct HugeBuffer<T> {
    ptr: NonNull<T>,
    len: usize,
}

// SAFETY: the buffer owns its elements like a Vec<T>.
unsafe impl<T: Send> Send for HugeBuffer<T> {}
// SAFETY: shared access is read-only, like &[T].
unsafe impl<T: Sync> Sync for HugeBuffer<T> {}

impl<T: Copy + Send + Sync> HugeBuffer<T> {
    /// `len` copies of `value`, written by `threads` threads.
    ///
    /// Panics if the memory cannot be allocated; [`try_new`](Self::try_new) returns an error.
    pub fn new(len: usize, value: T, threads: usize) -> Self {
        Self::try_new(len, value, threads, "buffer").unwrap_or_else(|e| panic!("{e}"))
    }

    /// `len` copies of `value`, written by `threads` threads, or an error naming `what` and the
    /// bytes when the allocation fails.
    ///
    /// # Errors
    /// [`Error::Resource`] when the size overflows or the allocator refuses.
    pub fn try_new(len: usize, value: T, threads: usize, what: &str) -> Result<Self> {
        if len == 0 || std::mem::size_of::<T>() == 0 {
            return Ok(Self { ptr: NonNull::dangling(), len });
        }
        let refused = || Error::Resource {
            message: format!(
                "cannot allocate {} for {what} ({len} values)",
                format_bytes(len.saturating_mul(std::mem::size_of::<T>()) as f64)
            ),
        };
        let layout = Self::layout(len).ok_or_else(refused)?;
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc(layout) } as *mut T;
        let ptr = NonNull::new(raw).ok_or_else(refused)?;
        advise_huge_pages(raw as *mut u8, layout.size());
        let chunk = len.div_ceil(threads.max(1)).max(1 << 16);
        let base = raw as usize;
        std::thread::scope(|s| {
            let mut start = 0;
            while start < len {
                let end = (start + chunk).min(len);
                s.spawn(move || {
                    let p = base as *mut T;
                    for i in start..end {
                        // SAFETY: i < len, inside the allocation; chunks are disjoint.
                        unsafe { p.add(i).write(value) };
                    }
                });
                start = end;
            }
        });
        Ok(Self { ptr, len })
    }
}

impl<T> HugeBuffer<T> {
    /// The allocation's layout for `len` elements (the same at allocation and at drop).
    fn layout(len: usize) -> Option<Layout> {
        let bytes = len.checked_mul(std::mem::size_of::<T>())?;
        Layout::from_size_align(bytes, alignment(bytes).max(std::mem::align_of::<T>())).ok()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The elements.
    pub fn as_slice(&self) -> &[T] {
        // SAFETY: ptr is valid for len initialised elements (or dangling with len 0).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The elements, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as above, and &mut self is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> Drop for HugeBuffer<T> {
    fn drop(&mut self) {
        if self.len > 0 && std::mem::size_of::<T>() > 0 {
            let layout = Self::layout(self.len).expect("layout of a live buffer");
            // SAFETY: allocated in `new` with this layout.
            unsafe { dealloc(self.ptr.as_ptr() as *mut u8, layout) };
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for HugeBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HugeBuffer({} elements)", self.len)
    }
}

/// Asks the memory system for the cache line holding `value` (x86_64 `prefetcht0`; nothing
/// on other targets). Never faults. Loops that read through an index array (`a[order[k]]`)
/// call it `PREFETCH_AHEAD` elements ahead, so that the scattered loads overlap instead of
/// each stalling the loop (at 1e6 particles these reads took half of G2P and most of P2G's
/// footprint pass).
#[inline(always)]
pub fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is a hint; it reads nothing architecturally and cannot fault.
        #[allow(unused_unsafe)]
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(value as *const T as *const i8)
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// Asks the memory system for the cache lines of `bytes` bytes from `p` (x86_64 `prefetcht0`
/// per 64-byte line; nothing on other targets). A hint: `p` need not point into an
/// allocation, nothing is read architecturally and nothing faults. Loops over rows far apart
/// in memory (a strided FFT pass reads each row of a block from another page, which the
/// hardware's prefetchers do not follow) call it some rows ahead.
#[inline(always)]
pub fn prefetch_bytes<T>(p: *const T, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let first = p as usize & !63;
        let last = (p as usize).wrapping_add(bytes.max(1) - 1);
        let mut line = first;
        while line <= last {
            // SAFETY: a prefetch is a hint; it reads nothing architecturally and cannot fault.
            #[allow(unused_unsafe)]
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(line as *const i8)
            };
            line += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, bytes);
}

/// How many elements ahead an indexed loop prefetches (see [`prefetch`]): enough loads in
/// flight to cover a DRAM latency at a few nanoseconds per element.
pub const PREFETCH_AHEAD: usize = 16;

/// The element an indexed loop at position `k` of `order` prefetches: `order[k +
/// PREFETCH_AHEAD]`, none near the end.
#[inline(always)]
pub fn ahead(order: &[u32], k: usize) -> Option<usize> {
    order.get(k + PREFETCH_AHEAD).map(|&j| j as usize)
}

/// Prefetches `values[order[k + PREFETCH_AHEAD]]` for a loop that reads `values[order[k]]`
/// (see [`prefetch`]); nothing near the end or out of range.
#[inline(always)]
pub fn prefetch_ordered<T>(values: &[T], order: &[u32], k: usize) {
    if let Some(v) = ahead(order, k).and_then(|j| values.get(j)) {
        prefetch(v);
    }
}

/// A `Vec` of `len` copies of `value`, written now: its pages are faulted in at allocation, not
/// on first use in a hot stage.
pub fn touched_vec<T: Clone>(len: usize, value: T) -> Vec<T> {
    let mut v = Vec::with_capacity(len);
    v.resize(len, value);
    v
}

/// A `Vec` of `len` copies of `value`, written now, or an error naming `what` and the bytes
/// when the allocation fails (instead of aborting the process).
///
/// # Errors
/// [`Error::Resource`] when the allocator refuses.
pub fn try_touched_vec<T: Clone>(len: usize, value: T, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| Error::Resource {
        message: format!(
            "cannot allocate {} for {what} ({len} values)",
            format_bytes(len as f64 * std::mem::size_of::<T>() as f64)
        ),
    })?;
    v.resize(len, value);
    Ok(v)
}

/// Bytes in the largest unit that keeps at least one digit before the point: `512 B`,
/// `3.21 MB`, `1.50 GB`, `2.40 TB` (decimal units).
pub fn format_bytes(bytes: f64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut v = bytes;
    let mut u = 0;
    while v >= 1000.0 && u + 1 < UNITS.len() {
        v /= 1000.0;
        u += 1;
    }
    if u == 0 {
        format!("{v:.0} B")
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

/// Bytes of memory this process may still use: `MemAvailable` of `/proc/meminfo` (Linux), else
/// 8 GB.
pub fn available_memory() -> usize {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse::<usize>().ok()).map(|kb| kb * 1024))
        })
        .unwrap_or(8_000_000_000)
}

/// Heap bytes in use by this process: glibc's `mallinfo2` (bytes in allocated arena chunks
/// plus mmapped chunks), so that a plan's heap growth can be measured as FLUPS's benchmark
/// driver measures it; `None` off glibc.
pub fn heap_in_use() -> Option<usize> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        /// glibc's `struct mallinfo2` (glibc 2.33 and later).
        #[repr(C)]
        struct MallInfo2 {
            arena: usize,
            ordblks: usize,
            smblks: usize,
            hblks: usize,
            hblkhd: usize,
            usmblks: usize,
            fsmblks: usize,
            uordblks: usize,
            fordblks: usize,
            keepcost: usize,
        }
        extern "C" {
            fn mallinfo2() -> MallInfo2;
        }
        // SAFETY: mallinfo2 takes no arguments and returns a plain struct by value.
        let m = unsafe { mallinfo2() };
        Some(m.uordblks + m.hblkhd)
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    None
}

/// Asks the kernel to back `[ptr, ptr + bytes)` with transparent huge pages (Linux; a no-op
/// elsewhere or when the kernel declines).
fn advise_huge_pages(ptr: *mut u8, bytes: usize) {
    #[cfg(target_os = "linux")]
    {
        const MADV_HUGEPAGE: i32 = 14;
        extern "C" {
            fn madvise(addr: *mut std::ffi::c_void, length: usize, advice: i32) -> i32;
        }
        if bytes >= ALIGN && (ptr as usize).is_multiple_of(4096) {
            // SAFETY: the range is a live allocation; madvise only changes paging policy.
            let _ = unsafe { madvise(ptr as *mut std::ffi::c_void, bytes, MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, bytes);
}

#[cfg(test)]
mod tests {
    use super::HugeBuffer;

    #[test]
    fn filled_aligned_and_writable() {
        let mut b = HugeBuffer::new(5_000_001, 1.5f64, 3);
        assert_eq!(b.len(), 5_000_001);
        assert!(b.as_slice().iter().all(|&v| v == 1.5));
        assert_eq!(b.as_slice().as_ptr() as usize % (2 << 20), 0);
        let small = HugeBuffer::new(1000, 0.5f64, 1);
        assert_eq!(small.as_slice().as_ptr() as usize % 64, 0);
        b.as_mut_slice()[7] = 2.0;
        assert_eq!(b.as_slice()[7], 2.0);
        let e = HugeBuffer::new(0, 0u32, 2);
        assert!(e.is_empty() && e.as_slice().is_empty());
    }

    #[test]
    fn impossible_allocations_are_errors() {
        let e = HugeBuffer::try_new(usize::MAX / 4, 0.0f64, 1, "the grid").unwrap_err().to_string();
        assert!(e.contains("the grid") && e.contains("cannot allocate"), "{e}");
        let e = super::try_touched_vec(1usize << 60, 0u64, "positions").unwrap_err().to_string();
        assert!(e.contains("positions"), "{e}");
        assert_eq!(super::format_bytes(0.0), "0 B");
        assert_eq!(super::format_bytes(3.2e9), "3.20 GB");
        assert_eq!(super::format_bytes(2.4e5), "240.00 kB");
    }
}
