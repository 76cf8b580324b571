//! [`Emulator`]: a [`Device`] on the host that runs kernels/ compiled as C++ (crates/gpu/emu),
//! FFTs by FFTW. It exists to test the kernels and [`crate::GpuBackend`]'s data flow against the
//! CPU backend where no GPU is present (CI, most development machines); it is not a backend for
//! production runs (one thread, blocks one after another).

use std::alloc::Layout;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use parki_core::{Error, Result};
use parki_decomp::GridLayout;
use parki_fft3d::{Fft3d, GridBuffer, PlanRigor};

use crate::device::{Args, Device, DeviceInfo, DevicePtr, Precision};

extern "C" {
    fn parki_emu_launch(
        name: *const c_char,
        grid: *const u32,
        block: *const u32,
        shared: u32,
        args: *const *mut c_void,
    ) -> c_int;
    fn parki_emu_has(name: *const c_char) -> c_int;
}

/// Whether the emulator has entry point `name`.
pub fn has_entry_point(name: &str) -> bool {
    let c = CString::new(name).expect("no NUL in kernel names");
    // SAFETY: a NUL-terminated string that outlives the call.
    unsafe { parki_emu_has(c.as_ptr()) != 0 }
}

/// The host emulator of a device.
pub struct Emulator {
    info: DeviceInfo,
    allocations: Mutex<HashMap<DevicePtr, Layout>>,
    /// "Pinned" host allocations (ordinary memory here).
    pinned: Mutex<HashMap<DevicePtr, Layout>>,
    /// The side stream: its launches wait here until [`Device::join`] (or a free) runs them,
    /// as late as a device may run them, so that a missing fork or join shows in the results.
    side: Mutex<Vec<SideLaunch>>,
}

/// A launch queued on the emulator's side stream.
struct SideLaunch {
    name: String,
    grid: [u32; 3],
    block: [u32; 3],
    shared: u32,
    args: Args,
}

/// An FFT plan of the emulator: FFTW plans on a host buffer the data are copied through.
pub enum EmuFft {
    /// Single precision.
    F32(Fft3d<f32>, GridBuffer<f32>),
    /// Double precision.
    F64(Fft3d<f64>, GridBuffer<f64>),
}

// SAFETY: the plans and buffers are only used through `&mut EmuFft`, by one thread at a time.
unsafe impl Send for EmuFft {}

const ALIGN: usize = 256;

/// The memory of the emulated device, bytes (unbounded by default).
static MEMORY: AtomicU64 = AtomicU64::new(u64::MAX / 2);

impl Emulator {
    /// Sets the memory every emulated device has from now on (tests of the memory-aware
    /// planning and of its refusals): `free_memory` reports it less what the emulator holds,
    /// and allocations beyond it fail as a device's would.
    pub fn set_memory(bytes: u64) {
        MEMORY.store(bytes, Ordering::Relaxed);
    }

    /// Bytes allocated by this emulator.
    fn allocated(&self) -> u64 {
        self.allocations.lock().expect("allocation table").values().map(|l| l.size() as u64).sum()
    }

    /// Runs the side stream's queued launches in order; their seconds.
    fn run_side(&self) -> Result<f64> {
        let queued = std::mem::take(&mut *self.side.lock().expect("side stream"));
        let start = Instant::now();
        for mut l in queued {
            let p = l.args.pointers();
            // SAFETY: `launch_side`'s contract: the arguments match the kernel and what it
            // uses is alive and unchanged until the join that runs it (here).
            unsafe { self.launch(&l.name, l.grid, l.block, l.shared, &p[..l.args.len()])? };
        }
        Ok(start.elapsed().as_secs_f64())
    }
}

/// Zeroed host memory of `bytes` (at least 1), recorded in `table` by its address.
fn host_alloc(table: &Mutex<HashMap<DevicePtr, Layout>>, bytes: usize, what: &str) -> Result<DevicePtr> {
    let layout = Layout::from_size_align(bytes.max(1), ALIGN)
        .map_err(|e| Error::Resource { message: format!("{what}: {bytes} bytes: {e}") })?;
    // SAFETY: the layout has non-zero size.
    let p = unsafe { std::alloc::alloc_zeroed(layout) };
    if p.is_null() {
        return Err(Error::Resource { message: format!("cannot allocate {bytes} bytes for {what}") });
    }
    table.lock().expect("allocation table").insert(p as DevicePtr, layout);
    Ok(p as DevicePtr)
}

/// Frees the allocation at `ptr` if `table` records it (and every one with `ptr = None`).
fn host_free(table: &Mutex<HashMap<DevicePtr, Layout>>, ptr: Option<DevicePtr>) {
    let mut table = table.lock().expect("allocation table");
    let entries: Vec<(DevicePtr, Layout)> = match ptr {
        Some(p) => table.remove(&p).map(|l| (p, l)).into_iter().collect(),
        None => table.drain().collect(),
    };
    for (p, layout) in entries {
        // SAFETY: every entry is a live allocation made by `host_alloc` with this layout,
        // removed from the table here, so freed once.
        unsafe { std::alloc::dealloc(p as *mut u8, layout) };
    }
}

impl Device for Emulator {
    type FftPlan = EmuFft;

    fn open(_local_rank: usize) -> Result<Self> {
        Ok(Self {
            info: DeviceInfo {
                name: "host emulator".into(),
                ordinal: 0,
                count: 1,
                compute: (0, 0),
                driver: String::new(),
                cuda: String::new(),
                memory: 0,
            },
            allocations: Mutex::new(HashMap::new()),
            pinned: Mutex::new(HashMap::new()),
            side: Mutex::new(Vec::new()),
        })
    }

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn free_memory(&self) -> Result<u64> {
        Ok(MEMORY.load(Ordering::Relaxed).saturating_sub(self.allocated()))
    }

    fn alloc(&self, bytes: usize, what: &str) -> Result<DevicePtr> {
        if bytes as u64 > self.free_memory()? {
            return Err(Error::Resource {
                message: format!("out of (emulated) device memory: {bytes} bytes for {what}"),
            });
        }
        host_alloc(&self.allocations, bytes, what)
    }

    /// Runs the side stream's queued launches first (a device's free waits for both streams).
    unsafe fn free(&self, ptr: DevicePtr) {
        let _ = self.run_side();
        host_free(&self.allocations, Some(ptr));
    }

    fn alloc_pinned(&self, bytes: usize, what: &str) -> Result<*mut u8> {
        host_alloc(&self.pinned, bytes, what).map(|p| p as *mut u8)
    }

    unsafe fn free_pinned(&self, ptr: *mut u8) {
        host_free(&self.pinned, Some(ptr as DevicePtr));
    }

    unsafe fn upload(&self, dst: DevicePtr, src: &[u8]) -> Result<()> {
        // SAFETY: the caller guarantees that dst .. dst + len lies in a live allocation.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst as *mut u8, src.len()) };
        Ok(())
    }

    unsafe fn download(&self, dst: &mut [u8], src: DevicePtr) -> Result<()> {
        // SAFETY: the caller guarantees that src .. src + len lies in a live allocation.
        unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    unsafe fn copy(&self, dst: DevicePtr, src: DevicePtr, bytes: usize) -> Result<()> {
        // SAFETY: the caller guarantees two live, disjoint ranges of `bytes` bytes.
        unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, bytes) };
        Ok(())
    }

    unsafe fn zero(&self, dst: DevicePtr, bytes: usize) -> Result<()> {
        // SAFETY: the caller guarantees that dst .. dst + bytes lies in a live allocation.
        unsafe { std::ptr::write_bytes(dst as *mut u8, 0, bytes) };
        Ok(())
    }

    unsafe fn launch(
        &self,
        name: &str,
        grid: [u32; 3],
        block: [u32; 3],
        shared: u32,
        args: &[*mut c_void],
    ) -> Result<()> {
        if grid.contains(&0) {
            return Ok(());
        }
        let c = CString::new(name).expect("no NUL in kernel names");
        // SAFETY: the caller guarantees that `args` match the kernel; grid and block are arrays
        // of three, `c` is NUL-terminated; all outlive the (synchronous) call.
        let rc = unsafe { parki_emu_launch(c.as_ptr(), grid.as_ptr(), block.as_ptr(), shared, args.as_ptr()) };
        if rc != 0 {
            return Err(Error::Resource { message: format!("emulator: no kernel named {name}") });
        }
        Ok(())
    }

    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    fn fork(&self) -> Result<()> {
        Ok(())
    }

    unsafe fn launch_side(&self, name: &str, grid: [u32; 3], block: [u32; 3], shared: u32, args: Args) -> Result<()> {
        if !has_entry_point(name) {
            return Err(Error::Resource { message: format!("emulator: no kernel named {name}") });
        }
        let l = SideLaunch { name: name.to_string(), grid, block, shared, args };
        self.side.lock().expect("side stream").push(l);
        Ok(())
    }

    fn join(&self) -> Result<f64> {
        self.run_side()
    }

    fn fft_plan(&self, layout: &GridLayout, forward: usize, backward: usize, precision: Precision) -> Result<EmuFft> {
        let comps = forward.max(backward);
        Ok(match precision {
            Precision::F32 => {
                let mut b = GridBuffer::<f32>::new(*layout, comps, 1);
                let p = Fft3d::plan(&mut b, forward, backward, 1, PlanRigor::Estimate)?;
                EmuFft::F32(p, b)
            }
            Precision::F64 => {
                let mut b = GridBuffer::<f64>::new(*layout, comps, 1);
                let p = Fft3d::plan(&mut b, forward, backward, 1, PlanRigor::Estimate)?;
                EmuFft::F64(p, b)
            }
        })
    }

    /// The emulator's transforms run on host buffers: no device bytes.
    fn fft_work_bytes(_plan: &EmuFft) -> usize {
        0
    }

    unsafe fn fft(&self, plan: &mut EmuFft, data: DevicePtr, forward: bool) -> Result<()> {
        fn run<T: parki_fft3d::FftReal>(p: &Fft3d<T>, b: &mut GridBuffer<T>, data: DevicePtr, forward: bool) {
            let n = b.as_slice().len();
            // SAFETY: the caller guarantees that `data` holds the planned components, which is
            // what the buffer holds (`n` reals).
            let dev = unsafe { std::slice::from_raw_parts_mut(data as *mut T, n) };
            b.as_mut_slice().copy_from_slice(dev);
            if forward {
                p.forward(b);
            } else {
                p.backward(b);
            }
            dev.copy_from_slice(b.as_slice());
        }
        match plan {
            EmuFft::F32(p, b) => run(p, b, data, forward),
            EmuFft::F64(p, b) => run(p, b, data, forward),
        }
        Ok(())
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.run_side();
        host_free(&self.allocations, None);
        host_free(&self.pinned, None);
    }
}
