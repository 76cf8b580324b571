//! The device a [`crate::GpuBackend`] runs on: memory, kernel launches by name, batched 3-D
//! FFTs. Two implementations: `crate::cuda::CudaDevice` (feature `cuda`: cudarc, NVRTC,
//! cuFFT) and [`crate::Emulator`] (the kernels compiled as C++ and run on the host, so that the
//! backend's data flow and every kernel are tested on machines without a GPU).

use std::ffi::c_void;

use parki_core::Result;
use parki_decomp::GridLayout;

/// A device address.
pub type DevicePtr = u64;

/// Floating-point precision of a kernel instantiation or FFT plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    /// `float`, kernels suffixed `_f32`.
    F32,
    /// `double`, kernels suffixed `_f64`.
    F64,
}

impl Precision {
    /// The suffix of the kernels' entry points.
    pub fn suffix(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F64 => "f64",
        }
    }

    /// Bytes per real.
    pub fn bytes(self) -> usize {
        match self {
            Precision::F32 => 4,
            Precision::F64 => 8,
        }
    }
}

/// What the report says about the device.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceInfo {
    /// Device name (`"NVIDIA H100 80GB HBM3"`, `"host emulator"`).
    pub name: String,
    /// Device ordinal on the node.
    pub ordinal: usize,
    /// Devices on the node.
    pub count: usize,
    /// Compute capability `(major, minor)` (0, 0 for the emulator).
    pub compute: (u32, u32),
    /// Driver API version as `major.minor` (empty for the emulator).
    pub driver: String,
    /// CUDA version the kernels were compiled for (NVRTC's), `major.minor`.
    pub cuda: String,
    /// Total device memory in bytes.
    pub memory: u64,
}

/// A device: allocation, copies, launches and FFTs on one stream, in order, and launches on a
/// side stream that overlaps it (between [`Device::fork`] and [`Device::join`]).
pub trait Device: Sized + Send + Sync + 'static {
    /// A planned batched 3-D FFT.
    type FftPlan: Send;

    /// Opens the device for a rank with local (node) rank `local_rank`: device `local_rank mod
    /// count`, its context, the kernels compiled for it (cached per process).
    ///
    /// # Errors
    /// [`parki_core::Error::Resource`] when no driver or device is present or the kernels do
    /// not compile.
    fn open(local_rank: usize) -> Result<Self>;

    /// The device's description.
    fn info(&self) -> &DeviceInfo;

    /// Free device memory in bytes.
    fn free_memory(&self) -> Result<u64>;

    /// Allocates `bytes` (at least 256-byte aligned); `what` names the buffer in the error.
    fn alloc(&self, bytes: usize, what: &str) -> Result<DevicePtr>;

    /// Frees an allocation.
    ///
    /// # Safety
    /// `ptr` came from [`alloc`](Self::alloc) of this device and is not used afterwards.
    unsafe fn free(&self, ptr: DevicePtr);

    /// Copies `src` to device address `dst`. From pageable memory the copy is staged before the
    /// call returns; from pinned memory ([`alloc_pinned`](Self::alloc_pinned)) it is queued on
    /// the stream, and `src` must not change until the stream has run it (the next
    /// [`synchronize`](Self::synchronize)).
    ///
    /// # Safety
    /// `dst .. dst + src.len()` lies in one live allocation.
    unsafe fn upload(&self, dst: DevicePtr, src: &[u8]) -> Result<()>;

    /// Allocates `bytes` of page-locked host memory, from which uploads run asynchronously at
    /// the bus's full rate (on the emulator, ordinary host memory); `what` names it in errors.
    fn alloc_pinned(&self, bytes: usize, what: &str) -> Result<*mut u8>;

    /// Frees pinned memory, after the stream has run what is queued (copies may read it).
    ///
    /// # Safety
    /// `ptr` came from [`alloc_pinned`](Self::alloc_pinned) of this device and is not used
    /// afterwards.
    unsafe fn free_pinned(&self, ptr: *mut u8);

    /// Copies device memory at `src` into `dst` (waits for the stream).
    ///
    /// # Safety
    /// `src .. src + dst.len()` lies in one live allocation.
    unsafe fn download(&self, dst: &mut [u8], src: DevicePtr) -> Result<()>;

    /// Copies `bytes` bytes from device address `src` to `dst`, queued on the stream.
    ///
    /// # Safety
    /// `src .. src + bytes` and `dst .. dst + bytes` lie in live allocations and do not overlap.
    unsafe fn copy(&self, dst: DevicePtr, src: DevicePtr, bytes: usize) -> Result<()>;

    /// Sets `bytes` bytes at `dst` to zero.
    ///
    /// # Safety
    /// `dst .. dst + bytes` lies in one live allocation.
    unsafe fn zero(&self, dst: DevicePtr, bytes: usize) -> Result<()>;

    /// Launches entry point `name` on `grid` blocks of `block` threads with `shared` bytes of
    /// dynamic shared memory; `args` as for `cuLaunchKernel` (one pointer per parameter).
    ///
    /// # Safety
    /// The arguments match the kernel's parameters in number and type, and every device
    /// address they hold is valid for what the kernel reads and writes.
    unsafe fn launch(
        &self,
        name: &str,
        grid: [u32; 3],
        block: [u32; 3],
        shared: u32,
        args: &[*mut c_void],
    ) -> Result<()>;

    /// Waits for everything queued on the stream (not the side stream's work: see
    /// [`join`](Self::join)).
    fn synchronize(&self) -> Result<()>;

    /// Makes the side stream wait for the work queued on the stream so far, and starts the
    /// side stream's clock: work launched by [`launch_side`](Self::launch_side) afterwards
    /// runs after it, concurrently with what is queued on the stream later.
    fn fork(&self) -> Result<()>;

    /// Queues entry point `name` on the side stream (as [`launch`](Self::launch) does on the
    /// stream), after the work of the last [`fork`](Self::fork). The side stream runs at a
    /// lower priority than the stream: its blocks fill what the stream's kernels leave free.
    ///
    /// # Safety
    /// As for [`launch`](Self::launch); besides, nothing queued on the stream before the next
    /// [`join`](Self::join) writes what the kernel reads or touches what it writes, and what
    /// it uses is not freed before then.
    unsafe fn launch_side(&self, name: &str, grid: [u32; 3], block: [u32; 3], shared: u32, args: Args) -> Result<()>;

    /// Makes the stream wait for the work queued on the side stream so far; returns the side
    /// stream's seconds from the [`fork`](Self::fork) to the end of that work (waiting for it).
    fn join(&self) -> Result<f64>;

    /// Plans in-place batched r2c (first `forward` components) and c2r (first `backward`
    /// components) transforms of the padded layout `layout` (components `layout.real_len()`
    /// reals apart, FFTW's in-place layout).
    fn fft_plan(
        &self,
        layout: &GridLayout,
        forward: usize,
        backward: usize,
        precision: Precision,
    ) -> Result<Self::FftPlan>;

    /// Device bytes of `plan`'s work area (shared by its two directions).
    fn fft_work_bytes(plan: &Self::FftPlan) -> usize;

    /// Runs the forward (r2c) or backward (c2r, unnormalised) transform in place at `data`.
    ///
    /// # Safety
    /// `data` holds the planned components of the planned layout and precision.
    unsafe fn fft(&self, plan: &mut Self::FftPlan, data: DevicePtr, forward: bool) -> Result<()>;
}

/// Kernel arguments in `cuLaunchKernel`'s form: each value copied into its own 8-byte-aligned
/// slot, [`Args::pointers`] one pointer per slot. Fixed capacity, no allocation.
#[derive(Clone)]
pub struct Args {
    slots: [[u64; 16]; Args::MAX],
    len: usize,
}

impl Default for Args {
    fn default() -> Self {
        Self::new()
    }
}

impl Args {
    /// Most arguments of one kernel.
    pub const MAX: usize = 24;

    /// No arguments.
    pub fn new() -> Self {
        Self { slots: [[0; 16]; Self::MAX], len: 0 }
    }

    /// Appends one argument (a scalar, a device address, or a `#[repr(C)]` parameter block of
    /// at most 128 bytes).
    pub fn push<A: Copy + 'static>(&mut self, v: A) -> &mut Self {
        let size = std::mem::size_of::<A>();
        assert!(size <= 128 && std::mem::align_of::<A>() <= 8, "kernel argument too large");
        assert!(self.len < Self::MAX, "too many kernel arguments");
        let slot = &mut self.slots[self.len];
        // SAFETY: the slot is 128 bytes, 8-byte aligned, and A fits; A is Copy (plain data).
        unsafe { std::ptr::write(slot.as_mut_ptr() as *mut A, v) };
        self.len += 1;
        self
    }

    /// One pointer per argument, valid while `self` lives and is not moved.
    pub fn pointers(&mut self) -> [*mut c_void; Args::MAX] {
        let mut p = [std::ptr::null_mut(); Self::MAX];
        for (k, slot) in self.slots.iter_mut().take(self.len).enumerate() {
            p[k] = slot.as_mut_ptr() as *mut c_void;
        }
        p
    }

    /// Number of arguments.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}
