//! [`DeviceBuffer`]: an owned device allocation that grows on demand and frees itself;
//! [`PinnedBuffer`]: the same for page-locked host memory (the uploads' staging).

use std::sync::Arc;

use parki_core::Result;

use crate::device::{Device, DevicePtr};

/// Bytes of a slice of plain numbers.
pub fn bytes_of<T: Copy>(v: &[T]) -> &[u8] {
    // SAFETY: T is a plain number type (f32, f64, u32, [T; 3]); any initialised value is valid
    // as bytes, and the length covers exactly the slice.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

/// Mutable bytes of a slice of plain numbers.
pub fn bytes_of_mut<T: Copy>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: as in `bytes_of`; every bit pattern is a valid f32, f64 or u32.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, std::mem::size_of_val(v)) }
}

/// A device allocation of at least `bytes` bytes.
pub struct DeviceBuffer<D: Device> {
    dev: Arc<D>,
    ptr: DevicePtr,
    bytes: usize,
    what: &'static str,
}

impl<D: Device> DeviceBuffer<D> {
    /// An empty buffer named `what` (in allocation errors).
    pub fn empty(dev: &Arc<D>, what: &'static str) -> Self {
        Self { dev: dev.clone(), ptr: 0, bytes: 0, what }
    }

    /// A buffer of `bytes` bytes.
    pub fn new(dev: &Arc<D>, bytes: usize, what: &'static str) -> Result<Self> {
        let mut b = Self::empty(dev, what);
        b.ensure(bytes)?;
        Ok(b)
    }

    /// A buffer named `what` holding a copy of `v`.
    pub fn from_slice<T: Copy>(dev: &Arc<D>, v: &[T], what: &'static str) -> Result<Self> {
        let mut b = Self::empty(dev, what);
        b.upload(v)?;
        Ok(b)
    }

    /// Grows the buffer to at least `bytes` (contents are not kept).
    pub fn ensure(&mut self, bytes: usize) -> Result<()> {
        if bytes <= self.bytes && self.ptr != 0 {
            return Ok(());
        }
        self.release();
        // round up by an eighth so that small growth does not reallocate every time
        let want = bytes.max(256) + bytes / 8;
        self.ptr = self.dev.alloc(want, self.what)?;
        self.bytes = want;
        Ok(())
    }

    fn release(&mut self) {
        if self.ptr != 0 {
            // SAFETY: the pointer came from this device's alloc and is dropped here.
            unsafe { self.dev.free(self.ptr) };
            self.ptr = 0;
            self.bytes = 0;
        }
    }

    /// The device address.
    pub fn ptr(&self) -> DevicePtr {
        self.ptr
    }

    /// Bytes allocated.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Grows to `v` and copies it in.
    pub fn upload<T: Copy>(&mut self, v: &[T]) -> Result<()> {
        let b = bytes_of(v);
        self.ensure(b.len())?;
        // SAFETY: the allocation holds at least b.len() bytes.
        unsafe { self.dev.upload(self.ptr, b) }
    }

    /// Copies `v` to byte offset `at`, the buffer already holding `at` plus `v`'s bytes (from
    /// pinned memory the copy is queued: see [`Device::upload`]).
    pub fn upload_at<T: Copy>(&self, at: usize, v: &[T]) -> Result<()> {
        let b = bytes_of(v);
        assert!(
            at + b.len() <= self.bytes,
            "upload of {} bytes at {at} into a {}-byte {}",
            b.len(),
            self.bytes,
            self.what
        );
        // SAFETY: checked above: the allocation holds the bytes written.
        unsafe { self.dev.upload(self.ptr + at as DevicePtr, b) }
    }

    /// Grows to `bytes` and copies the first `bytes` bytes of `src` in, on the device.
    pub fn copy_from(&mut self, src: &DeviceBuffer<D>, bytes: usize) -> Result<()> {
        assert!(bytes <= src.bytes, "copy of {bytes} bytes from a {}-byte {}", src.bytes, src.what);
        self.ensure(bytes)?;
        // SAFETY: both allocations hold `bytes` bytes (checked and ensured above); they are
        // distinct buffers, so the ranges do not overlap.
        unsafe { self.dev.copy(self.ptr, src.ptr, bytes) }
    }

    /// Copies the first `v.len()` values out.
    pub fn download<T: Copy>(&self, v: &mut [T]) -> Result<()> {
        let b = bytes_of_mut(v);
        assert!(b.len() <= self.bytes, "download of {} bytes from a {}-byte {}", b.len(), self.bytes, self.what);
        // SAFETY: checked above: the allocation holds the bytes read.
        unsafe { self.dev.download(b, self.ptr) }
    }

    /// Zeroes the first `bytes` bytes.
    pub fn zero(&self, bytes: usize) -> Result<()> {
        assert!(bytes <= self.bytes, "zeroing past the end of {}", self.what);
        // SAFETY: checked above.
        unsafe { self.dev.zero(self.ptr, bytes) }
    }
}

impl<D: Device> Drop for DeviceBuffer<D> {
    fn drop(&mut self) {
        self.release();
    }
}

/// Page-locked host memory of at least `bytes` bytes, zeroed when (re)allocated: the staging
/// area of the particles' uploads (filled in place by the host, then copied asynchronously).
pub struct PinnedBuffer<D: Device> {
    dev: Arc<D>,
    ptr: *mut u8,
    bytes: usize,
    what: &'static str,
}

// SAFETY: the buffer owns its allocation and hands it out only through `&mut self`.
unsafe impl<D: Device> Send for PinnedBuffer<D> {}

impl<D: Device> PinnedBuffer<D> {
    /// An empty buffer named `what` (in allocation errors).
    pub fn empty(dev: &Arc<D>, what: &'static str) -> Self {
        Self { dev: dev.clone(), ptr: std::ptr::null_mut(), bytes: 0, what }
    }

    /// Bytes allocated.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The first `len` values of type `T`, the buffer grown to hold them first (contents are
    /// not kept when it grows; a growth waits for the uploads queued from the old memory).
    /// The caller must not write to memory an upload queued since the last synchronize reads.
    pub fn slice<T: Copy>(&mut self, len: usize) -> Result<&mut [T]> {
        let bytes = len * std::mem::size_of::<T>();
        if bytes > self.bytes || self.ptr.is_null() {
            self.release();
            let want = bytes.max(4096) + bytes / 8;
            let p = self.dev.alloc_pinned(want, self.what)?;
            // SAFETY: `want` bytes were just allocated at `p`; zeroing makes every value valid.
            unsafe { std::ptr::write_bytes(p, 0, want) };
            self.ptr = p;
            self.bytes = want;
        }
        assert_eq!(self.ptr as usize % std::mem::align_of::<T>(), 0, "pinned memory is page-aligned");
        // SAFETY: the allocation holds `bytes` initialised (zeroed or written) bytes, aligned
        // for T, borrowed mutably through `&mut self`; T is a plain number type.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut T, len) })
    }

    fn release(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: the pointer came from this device's alloc_pinned and is dropped here.
            unsafe { self.dev.free_pinned(self.ptr) };
            self.ptr = std::ptr::null_mut();
            self.bytes = 0;
        }
    }
}

impl<D: Device> Drop for PinnedBuffer<D> {
    fn drop(&mut self) {
        self.release();
    }
}
