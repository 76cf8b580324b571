//! The CUDA device: cudarc's driver API, NVRTC and cuFFT, all loaded at run time.
//!
//! [`CudaDevice`] implements [`Device`] on one GPU: its primary context, one stream on which
//! every copy, launch and FFT is queued in order, and the kernels of `kernels/` compiled by
//! NVRTC for the GPU's architecture (once per process and architecture) and loaded as one
//! module. Entry points are looked up by name (they are `extern "C"`, so unmangled) and cached.
//!
//! Nothing here links against CUDA: cudarc opens `libcuda.so.1`, `libnvrtc.so.13` and
//! `libcufft.so.12` with `dlopen` at first use. NVRTC and cuFFT are often not on the
//! library path (the driver is installed system-wide, the toolkit libraries come from pip
//! wheels), so [`preload_libraries`] first opens them by full path from the folders
//! [`library_dirs`] lists; once a library with the same SONAME is loaded, cudarc's `dlopen` by
//! name finds it. Every entry point checks that the library it needs can be loaded before
//! cudarc touches it (cudarc panics on a missing library): without a driver,
//! [`CudaDevice::open`] returns an error.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CString};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::cufft::result as fft;
use cudarc::cufft::sys as fft_sys;
use cudarc::driver::result as cu;
use cudarc::driver::sys as cu_sys;
use cudarc::driver::{CudaContext, DriverError};
use cudarc::nvrtc::result as rtc;
use cudarc::nvrtc::sys as rtc_sys;
use parki_core::{Error, Result};
use parki_decomp::GridLayout;

use crate::device::{Args, Device, DeviceInfo, DevicePtr, Precision};
use crate::kernels;

/// Environment variable naming folders (separated by `:`) searched first for NVRTC and cuFFT.
pub const LIBS_ENV: &str = "PARKI_CUDA_LIBS";

/// NVRTC options besides the architecture: C++17, line information for the profilers, and
/// IEEE arithmetic (no `--use_fast_math`: the kernels' accuracy is tested against the CPU).
pub const NVRTC_OPTIONS: &[&str] = &["-std=c++17", "-lineinfo"];

/// Entry point of a probe kernel NVRTC compiles with kernels/ (appended by this module, not in
/// [`kernels::ENTRY_POINTS`]): `parki_probe_axpy(u64 n, double a, double* x)` sets
/// `x[i] = a x[i] + i` for `i < n`. The device tests launch it to check copies and launches
/// end to end, whatever kernels/ holds.
pub const PROBE_KERNEL: &str = "parki_probe_axpy";

/// The probe kernel's source.
const PROBE_SOURCE: &str = "
// ---- crates/gpu/src/cuda.rs: the device tests' probe
extern \"C\" __global__ void parki_probe_axpy(unsigned long long n, double a, double* x) {
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  if (i < n) x[i] = a * x[i] + (double)i;
}
";

/// Dynamic shared memory a kernel gets without opting in (`cuFuncSetAttribute`).
const DEFAULT_SHARED: u32 = 48 * 1024;

/// A library [`preload_libraries`] looks for: its file names, most wanted first, and the
/// libraries it opens itself, loaded first from the same folder.
struct Wanted {
    /// What the messages call it.
    what: &'static str,
    /// File names (SONAMEs) tried in each folder.
    files: &'static [&'static str],
    /// Prefixes of companion libraries in the same folder (the highest version is taken).
    companions: &'static [&'static str],
}

/// NVRTC with its builtins (NVRTC opens them itself, through its `$ORIGIN` run path in the
/// wheels; loading them first also serves folders where NVRTC has no run path), then cuFFT
/// (`libcufft.so.12` is cuFFT 12, that of CUDA 13).
const WANTED: &[Wanted] = &[
    Wanted {
        what: "NVRTC",
        files: &["libnvrtc.so.13", "libnvrtc.so.12"],
        companions: &["libnvrtc-builtins.so.13", "libnvrtc-builtins.so.12"],
    },
    Wanted { what: "cuFFT", files: &["libcufft.so.12", "libcufft.so.13", "libcufft.so.11"], companions: &[] },
];

/// What [`preload_libraries`] did, kept for the life of the process (the handles keep the
/// libraries loaded).
struct Preloaded {
    libraries: Vec<libloading::Library>,
    paths: Vec<PathBuf>,
}

/// The folders searched for NVRTC and cuFFT, in order: those in `PARKI_CUDA_LIBS` (separated
/// by `:`), then `$HOME/.cache/parki/cuda/nvidia/*/lib` (where `.ci/setup` installs the pip
/// wheels `nvidia-cuda-nvrtc` and `nvidia-cufft`, whose libraries lie in `nvidia/cu13/lib`;
/// newest CUDA first), then the toolkit's `/usr/local/cuda/lib64`. The system's library path
/// comes after all of them (cudarc's own `dlopen` by name).
pub fn library_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(list) = std::env::var_os(LIBS_ENV) {
        dirs.extend(std::env::split_paths(&list).filter(|p| !p.as_os_str().is_empty()));
    }
    if let Some(home) = std::env::var_os("HOME") {
        let nvidia = Path::new(&home).join(".cache/parki/cuda/nvidia");
        if let Ok(entries) = std::fs::read_dir(&nvidia) {
            let mut found: Vec<PathBuf> =
                entries.filter_map(|e| e.ok()).map(|e| e.path().join("lib")).filter(|p| p.is_dir()).collect();
            // cu13 before cu12
            found.sort();
            found.reverse();
            dirs.extend(found);
        }
    }
    for toolkit in ["/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"] {
        let p = PathBuf::from(toolkit);
        if p.is_dir() {
            dirs.push(p);
        }
    }
    dirs
}

/// The last (highest version) file in `dir` whose name starts with `prefix`.
fn find_prefixed(dir: &Path, prefix: &str) -> Option<PathBuf> {
    let mut hits: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.file_name().is_some_and(|f| f.to_string_lossy().starts_with(prefix)))
        .collect();
    hits.sort();
    hits.pop()
}

/// Opens `path`, keeping the handle in `done`.
fn load_into(done: &mut Preloaded, what: &str, path: PathBuf) {
    // SAFETY: loading NVIDIA's NVRTC or cuFFT runs their initialisers, which have no
    // preconditions; the handle is kept for the life of the process, so no symbol cudarc
    // resolves later outlives the library.
    match unsafe { libloading::Library::new(&path) } {
        Ok(lib) => {
            done.libraries.push(lib);
            done.paths.push(path);
        }
        // left to the system's library path
        Err(e) => {
            if std::env::var_os("PARKI_CUDA_DEBUG").is_some() {
                eprintln!("parki-gpu: could not load {what} from {}: {e}", path.display());
            }
        }
    }
}

/// Opens NVRTC (and its builtins) and cuFFT by full path from the first of [`library_dirs`]
/// that holds them, before cudarc's first use, so that cudarc's `dlopen` by SONAME finds them
/// already loaded. Idempotent and cheap after the first call; a library found nowhere is left
/// to the system's library path. Returns the files loaded.
///
/// Called by [`CudaDevice::open`] and [`compile_ptx`]; call it yourself before using cudarc's
/// NVRTC or cuFFT modules directly.
pub fn preload_libraries() -> &'static [PathBuf] {
    static PRELOADED: OnceLock<Preloaded> = OnceLock::new();
    let preloaded = PRELOADED.get_or_init(|| {
        let dirs = library_dirs();
        let mut done = Preloaded { libraries: Vec::new(), paths: Vec::new() };
        for wanted in WANTED {
            let found = dirs.iter().find_map(|dir| wanted.files.iter().map(|f| dir.join(f)).find(|p| p.is_file()));
            let Some(path) = found else { continue };
            let dir = path.parent().unwrap_or(Path::new("."));
            if let Some(companion) = wanted.companions.iter().find_map(|prefix| find_prefixed(dir, prefix)) {
                load_into(&mut done, wanted.what, companion);
            }
            load_into(&mut done, wanted.what, path);
        }
        done
    });
    &preloaded.paths
}

/// The folders searched, for messages: `"a, b (and the system's library path)"`.
fn searched() -> String {
    let dirs: Vec<String> = library_dirs().iter().map(|d| d.display().to_string()).collect();
    if dirs.is_empty() {
        format!("the system's library path ({LIBS_ENV} unset, no ~/.cache/parki/cuda/nvidia/*/lib)")
    } else {
        format!("{} and the system's library path", dirs.join(", "))
    }
}

/// Whether NVRTC can be loaded (after [`preload_libraries`]).
pub fn nvrtc_available() -> bool {
    preload_libraries();
    // SAFETY: only opens and closes the library by its candidate names.
    unsafe { rtc_sys::is_culib_present() }
}

/// Whether cuFFT can be loaded (after [`preload_libraries`]).
pub fn cufft_available() -> bool {
    preload_libraries();
    // SAFETY: only opens and closes the library by its candidate names.
    unsafe { fft_sys::is_culib_present() }
}

/// Whether the CUDA driver library (`libcuda.so.1`) can be loaded. Says nothing about a device.
pub fn driver_available() -> bool {
    // SAFETY: only opens and closes the library by its candidate names.
    unsafe { cu_sys::is_culib_present() }
}

fn require_nvrtc() -> Result<()> {
    if nvrtc_available() {
        Ok(())
    } else {
        Err(Error::Resource {
            message: format!(
                "NVRTC (libnvrtc.so.13) not found in {}; install the wheel with \
                 `pip install --target ~/.cache/parki/cuda nvidia-cuda-nvrtc==13.*` (as .ci/setup does) \
                 or name its folder in {LIBS_ENV}",
                searched()
            ),
        })
    }
}

fn require_cufft() -> Result<()> {
    if cufft_available() {
        Ok(())
    } else {
        Err(Error::Resource {
            message: format!(
                "cuFFT (libcufft.so.12) not found in {}; install the wheel with \
                 `pip install --target ~/.cache/parki/cuda nvidia-cufft==12.*` or name its folder in {LIBS_ENV}",
                searched()
            ),
        })
    }
}

/// The version of the NVRTC that is loaded, `(major, minor)`.
///
/// # Errors
/// [`Error::Resource`] when NVRTC cannot be loaded.
pub fn nvrtc_version() -> Result<(u32, u32)> {
    require_nvrtc()?;
    let (mut major, mut minor): (c_int, c_int) = (0, 0);
    // SAFETY: NVRTC is loaded; both pointers are valid for writes.
    unsafe { rtc_sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| Error::Resource { message: format!("nvrtcVersion failed: {e:?}") })?;
    Ok((major as u32, minor as u32))
}

/// The version of the cuFFT that is loaded (`cufftGetVersion`: 12000 for cuFFT 12.0). Needs no
/// driver.
///
/// # Errors
/// [`Error::Resource`] when cuFFT cannot be loaded.
pub fn cufft_version() -> Result<i32> {
    require_cufft()?;
    fft::get_version().map_err(|e| cufft_error("cufftGetVersion", e))
}

/// An NVRTC program, destroyed on drop.
struct Program(rtc_sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the program came from nvrtcCreateProgram and is destroyed once, here.
        let _ = unsafe { rtc::destroy_program(self.0) };
    }
}

/// NVRTC's output wanted from a compilation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Output {
    /// PTX text (NUL-terminated), for a virtual (`compute_XY`) or real architecture.
    Ptx,
    /// A CUBIN (machine code) for a real architecture (`sm_XY`).
    Cubin,
}

/// Bytes from NVRTC (`c_char`) as `u8`.
fn to_bytes(v: Vec<c_char>) -> Vec<u8> {
    v.into_iter().map(|c| c as u8).collect()
}

/// NVRTC's compilation log of `prog`, trimmed.
fn program_log(prog: rtc_sys::nvrtcProgram) -> String {
    // SAFETY: `prog` is a live program.
    match unsafe { rtc::get_program_log(prog) } {
        Ok(log) => String::from_utf8_lossy(&to_bytes(log)).trim_end_matches('\0').trim().to_string(),
        Err(e) => format!("(no log: {e:?})"),
    }
}

/// Compiles [`kernels::nvrtc_source`] for `arch` with NVRTC (no cache).
fn nvrtc_compile(arch: &str, output: Output) -> Result<Vec<u8>> {
    require_nvrtc()?;
    let version = nvrtc_version().map(|(a, b)| format!("{a}.{b}")).unwrap_or_default();
    let source = CString::new(kernels::nvrtc_source() + PROBE_SOURCE)
        .map_err(|_| Error::Resource { message: "kernels/: the sources hold a NUL byte".into() })?;
    let prog = rtc::create_program(&source, Some(c"parki_kernels.cu"))
        .map_err(|e| Error::Resource { message: format!("nvrtcCreateProgram failed: {e:?}") })?;
    let prog = Program(prog);
    let mut options = vec![format!("--gpu-architecture={arch}")];
    options.extend(NVRTC_OPTIONS.iter().map(|o| o.to_string()));
    // SAFETY: `prog` is a live program; the options are plain strings.
    let compiled = unsafe { rtc::compile_program(prog.0, &options) };
    if let Err(e) = compiled {
        return Err(Error::Resource {
            message: format!(
                "NVRTC {version} could not compile kernels/ for {arch} ({:?}, options {}):\n{}",
                e.0,
                options.join(" "),
                program_log(prog.0)
            ),
        });
    }
    let image = match output {
        // SAFETY: `prog` is a live, compiled program.
        Output::Ptx => unsafe { rtc::get_ptx(prog.0) }.map(to_bytes),
        Output::Cubin => {
            let mut size = 0usize;
            // SAFETY: `prog` is a live, compiled program; `size` is valid for writes.
            unsafe { rtc_sys::nvrtcGetCUBINSize(prog.0, &mut size) }.result().and_then(|()| {
                let mut cubin = vec![0u8; size];
                // SAFETY: `cubin` holds the `size` bytes NVRTC writes.
                unsafe { rtc_sys::nvrtcGetCUBIN(prog.0, cubin.as_mut_ptr() as *mut c_char) }.result().map(|()| cubin)
            })
        }
    };
    image.map_err(|e| Error::Resource { message: format!("NVRTC {version}: no {output:?} for {arch}: {e:?}") })
}

/// Environment variable naming a folder where compiled kernels are kept between processes
/// (unset: `$HOME/.cache/parki/kernels`; empty or `off`: no disk cache). The kernels are
/// compiled per kernel and window support, so NVRTC takes a while (tens of seconds) the first
/// time on a machine; later processes read the file. Files are named by a hash of the source,
/// the options, NVRTC's version and the architecture, so a stale file is never read.
pub const KERNEL_CACHE_ENV: &str = "PARKI_KERNEL_CACHE";

/// The folder of the disk cache ([`KERNEL_CACHE_ENV`]).
fn kernel_cache_dir() -> Option<PathBuf> {
    match std::env::var_os(KERNEL_CACHE_ENV) {
        Some(d) if d.is_empty() || d == "off" => None,
        Some(d) => Some(PathBuf::from(d)),
        None => std::env::var_os("HOME").filter(|h| !h.is_empty()).map(|h| Path::new(&h).join(".cache/parki/kernels")),
    }
}

/// FNV-1a, 64 bits: a hash that is the same in every build.
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in *part {
            h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
        h = (h ^ 0xff).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The file of the disk cache for `arch` and `output` ([`kernel_cache_dir`]).
fn disk_cache_file(arch: &str, output: Output) -> Option<PathBuf> {
    let dir = kernel_cache_dir()?;
    let (major, minor) = nvrtc_version().ok()?;
    let source = kernels::nvrtc_source() + PROBE_SOURCE;
    let version = format!("{major}.{minor}");
    let kind = format!("{output:?}");
    let options = NVRTC_OPTIONS.join(" ");
    let h = fnv1a(&[source.as_bytes(), options.as_bytes(), version.as_bytes(), arch.as_bytes(), kind.as_bytes()]);
    let ext = if output == Output::Cubin { "cubin" } else { "ptx" };
    Some(dir.join(format!("parki-{arch}-{h:016x}.{ext}")))
}

/// [`nvrtc_compile`], cached per process by architecture and output, and on disk
/// ([`kernel_cache_dir`]).
fn compiled(arch: &str, output: Output) -> Result<Arc<Vec<u8>>> {
    type Cache = Mutex<HashMap<(String, Output), Arc<Vec<u8>>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    // a compilation at a time: concurrent callers wait for the first one's result
    let mut cache = CACHE.get_or_init(Cache::default).lock().unwrap_or_else(|e| e.into_inner());
    let key = (arch.to_string(), output);
    if let Some(image) = cache.get(&key) {
        return Ok(image.clone());
    }
    let file = disk_cache_file(arch, output);
    let stored = file.as_ref().and_then(|f| std::fs::read(f).ok()).filter(|b| !b.is_empty());
    let image = match stored {
        Some(bytes) => Arc::new(bytes),
        None => {
            let image = Arc::new(nvrtc_compile(arch, output)?);
            if let Some(f) = &file {
                // best effort: written aside, then renamed, so that readers see whole files
                let tmp = f.with_extension(format!("tmp{}", std::process::id()));
                let written =
                    f.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| std::fs::write(&tmp, &*image));
                if written.and_then(|()| std::fs::rename(&tmp, f)).is_err() {
                    let _ = std::fs::remove_file(&tmp);
                }
            }
            image
        }
    };
    cache.insert(key, image.clone());
    Ok(image)
}

/// The PTX of the whole kernel program ([`kernels::nvrtc_source`] and [`PROBE_KERNEL`]) compiled by NVRTC for
/// `arch` (`"compute_90"`, `"sm_80"`, ...), with [`NVRTC_OPTIONS`]. Needs NVRTC only, no
/// driver or device; cached per process.
///
/// # Errors
/// [`Error::Resource`] when NVRTC cannot be loaded, or with NVRTC's log when the kernels do
/// not compile.
pub fn compile_ptx(arch: &str) -> Result<String> {
    preload_libraries();
    let ptx = compiled(arch, Output::Ptx)?;
    Ok(String::from_utf8_lossy(&ptx).trim_end_matches('\0').to_string())
}

/// The whole kernel program compiled by NVRTC to machine code (a CUBIN) for a real
/// architecture `arch` (`"sm_90"`): what [`CudaDevice::open`] loads. Needs NVRTC only; cached
/// per process.
///
/// # Errors
/// As [`compile_ptx`].
pub fn compile_cubin(arch: &str) -> Result<Vec<u8>> {
    preload_libraries();
    Ok(compiled(arch, Output::Cubin)?.to_vec())
}

/// A driver error as [`Error::Resource`], with what failed.
fn driver_error(what: &str, e: DriverError) -> Error {
    Error::Resource { message: format!("CUDA: {what} failed: {e}") }
}

/// A cuFFT error as [`Error::Resource`], with what failed.
fn cufft_error(what: &str, e: fft::CufftError) -> Error {
    Error::Resource { message: format!("cuFFT: {what} failed: {:?}", e.0) }
}

/// The driver API version, `"13.0"`.
fn driver_version() -> Result<String> {
    let mut v: c_int = 0;
    // SAFETY: the driver is loaded and initialised; `v` is valid for writes.
    unsafe { cu_sys::cuDriverGetVersion(&mut v) }.result().map_err(|e| driver_error("cuDriverGetVersion", e))?;
    Ok(format!("{}.{}", v / 1000, (v % 1000) / 10))
}

/// A kernel entry point of the loaded module.
#[derive(Clone, Copy)]
struct Function {
    handle: cu_sys::CUfunction,
    /// Dynamic shared memory the function may use (raised past 48 KiB on demand).
    shared: u32,
}

/// One GPU: its primary context, its stream (the highest priority) and side stream (the
/// lowest), the events that order and time them, the kernels' module, and the entry points
/// looked up so far. Every operation is queued on the stream, in order, except
/// [`Device::launch_side`]'s.
pub struct CudaDevice {
    info: DeviceInfo,
    ctx: Arc<CudaContext>,
    stream: cu_sys::CUstream,
    side: cu_sys::CUstream,
    /// Recorded on the stream by `fork`, waited for by the side stream (no timing).
    forked: cu_sys::CUevent,
    /// Recorded on the side stream by `fork` and `join`: its seconds between them.
    side_start: cu_sys::CUevent,
    side_end: cu_sys::CUevent,
    module: cu_sys::CUmodule,
    functions: Mutex<HashMap<String, Function>>,
    /// Dynamic shared memory per block a function can opt in to.
    max_shared: u32,
}

// SAFETY: the driver's handles (stream, module, functions) may be used from any thread once
// the context is current there: every method binds the context first; the function table is
// behind a mutex, and the stream orders the work whatever thread queues it.
unsafe impl Send for CudaDevice {}
// SAFETY: as for Send; no method hands out interior references.
unsafe impl Sync for CudaDevice {}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaDevice").field("info", &self.info).finish_non_exhaustive()
    }
}

/// A panic's message.
fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

impl CudaDevice {
    /// The architecture the kernels are compiled for: `sm_XY` of compute capability X.Y.
    pub fn arch(&self) -> String {
        format!("sm_{}{}", self.info.compute.0, self.info.compute.1)
    }

    /// Launches on `stream` (the stream or the side stream); an empty grid launches nothing.
    ///
    /// # Safety
    /// As for [`Device::launch`].
    unsafe fn launch_in(
        &self,
        stream: cu_sys::CUstream,
        name: &str,
        grid: [u32; 3],
        block: [u32; 3],
        shared: u32,
        args: &[*mut c_void],
    ) -> Result<()> {
        self.bind()?;
        let f = self.function(name)?;
        if grid.contains(&0) {
            return Ok(());
        }
        self.allow_shared(name, f, shared)?;
        // SAFETY: `f` is a function of the loaded module; `args` holds one pointer per kernel
        // parameter, each to a value of the parameter's type, which cuLaunchKernel copies
        // before returning (the caller's contract); the addresses in them are valid for the
        // kernel (likewise).
        unsafe {
            cu_sys::cuLaunchKernel(
                f.handle,
                grid[0],
                grid[1],
                grid[2],
                block[0],
                block[1],
                block[2],
                shared,
                stream,
                args.as_ptr() as *mut *mut c_void,
                std::ptr::null_mut(),
            )
        }
        .result()
        .map_err(|e| driver_error(&format!("launching {name} on {grid:?} x {block:?} ({shared} bytes shared)"), e))
    }

    fn bind(&self) -> Result<()> {
        self.ctx.bind_to_thread().map_err(|e| driver_error("binding the context to the thread", e))
    }

    fn open_device(local_rank: usize) -> Result<Self> {
        preload_libraries();
        if !driver_available() {
            return Err(Error::Resource {
                message: "backend = \"cuda\": no CUDA driver (libcuda.so.1) on this machine".into(),
            });
        }
        cu::init().map_err(|e| driver_error("cuInit (backend = \"cuda\")", e))?;
        let count = cu::device::get_count().map_err(|e| driver_error("cuDeviceGetCount", e))?;
        if count <= 0 {
            return Err(Error::Resource {
                message: "backend = \"cuda\": the CUDA driver sees no device (CUDA_VISIBLE_DEVICES?)".into(),
            });
        }
        let count = count as usize;
        let ordinal = local_rank % count;
        let ctx = CudaContext::new(ordinal)
            .map_err(|e| driver_error(&format!("creating a context on device {ordinal}"), e))?;
        let (major, minor) = ctx.compute_capability().map_err(|e| driver_error("cuDeviceGetAttribute", e))?;
        let name = ctx.name().map_err(|e| driver_error("cuDeviceGetName", e))?;
        let memory = ctx.total_mem().map_err(|e| driver_error("cuDeviceTotalMem", e))? as u64;
        let max_shared = ctx
            .attribute(cu_sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .map_err(|e| driver_error("cuDeviceGetAttribute", e))?
            .max(0) as u32;
        let driver = driver_version()?;
        let (nvrtc_major, nvrtc_minor) = nvrtc_version()?;
        // the stream first, the side stream's blocks where its kernels leave room
        let (mut least, mut greatest): (c_int, c_int) = (0, 0);
        // SAFETY: the context is current (CudaContext::new binds it); both are valid for writes.
        unsafe { cu_sys::cuCtxGetStreamPriorityRange(&mut least, &mut greatest) }
            .result()
            .map_err(|e| driver_error("cuCtxGetStreamPriorityRange", e))?;
        let stream = |priority: c_int| {
            cu::stream::create_with_priority(cu::stream::StreamKind::NonBlocking, priority)
                .map_err(|e| driver_error("cuStreamCreateWithPriority", e))
        };
        let (stream, side) = (stream(greatest)?, stream(least)?);
        let event = |timed: bool| {
            let flags = if timed {
                cu_sys::CUevent_flags::CU_EVENT_DEFAULT
            } else {
                cu_sys::CUevent_flags::CU_EVENT_DISABLE_TIMING
            };
            cu::event::create(flags).map_err(|e| driver_error("cuEventCreate", e))
        };
        let (forked, side_start, side_end) = (event(false)?, event(true)?, event(true)?);
        let mut device = CudaDevice {
            info: DeviceInfo {
                name,
                ordinal,
                count,
                compute: (major.max(0) as u32, minor.max(0) as u32),
                driver,
                cuda: format!("{nvrtc_major}.{nvrtc_minor}"),
                memory,
            },
            ctx,
            stream,
            side,
            forked,
            side_start,
            side_end,
            module: std::ptr::null_mut(),
            functions: Mutex::new(HashMap::new()),
            max_shared: max_shared.max(DEFAULT_SHARED),
        };
        // machine code for this GPU: loads on any driver of the same major version, where PTX
        // from a newer NVRTC than the driver would not
        let arch = device.arch();
        let cubin = compiled(&arch, Output::Cubin)?;
        // SAFETY: the context is current (CudaContext::new binds it); `cubin` is a complete
        // CUBIN image from NVRTC, alive during the call.
        device.module = unsafe { cu::module::load_data(cubin.as_ptr() as *const c_void) }.map_err(|e| {
            let what = format!(
                "loading the kernels NVRTC {} compiled for {arch} with driver {} (cuModuleLoadData; a driver \
                     of an older major version than NVRTC cannot load them)",
                device.info.cuda, device.info.driver
            );
            driver_error(&what, e)
        })?;
        Ok(device)
    }

    /// The entry point `name`, looked up once.
    fn function(&self, name: &str) -> Result<Function> {
        let mut functions = self.functions.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = functions.get(name) {
            return Ok(*f);
        }
        let cname = CString::new(name).map_err(|_| Error::Unsupported { what: format!("kernel name {name:?}") })?;
        // SAFETY: the module is loaded in the current context and stays loaded while `self`
        // lives; the name is a valid C string.
        let handle = unsafe { cu::module::get_function(self.module, cname) }.map_err(|e| Error::Unsupported {
            what: format!("kernel entry point {name:?} (not in kernels/ as compiled for {}: {e})", self.arch()),
        })?;
        let f = Function { handle, shared: DEFAULT_SHARED };
        functions.insert(name.to_string(), f);
        Ok(f)
    }

    /// Lets `name` use `shared` bytes of dynamic shared memory (past the default 48 KiB).
    fn allow_shared(&self, name: &str, f: Function, shared: u32) -> Result<()> {
        if shared <= f.shared {
            return Ok(());
        }
        if shared > self.max_shared {
            return Err(Error::Resource {
                message: format!(
                    "kernel {name}: {shared} bytes of shared memory per block, {} allows {}",
                    self.info.name, self.max_shared
                ),
            });
        }
        // SAFETY: `f.handle` is a function of the loaded module; the value is within the
        // device's opt-in limit.
        unsafe {
            cu::function::set_function_attribute(
                f.handle,
                cu_sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                shared as i32,
            )
        }
        .map_err(|e| driver_error(&format!("cuFuncSetAttribute({name}, {shared} bytes of shared memory)"), e))?;
        let mut functions = self.functions.lock().unwrap_or_else(|e| e.into_inner());
        functions.insert(name.to_string(), Function { shared, ..f });
        Ok(())
    }

    /// Plans one direction of [`Device::fft_plan`] without a work area of its own: the handle
    /// and the bytes of work area it needs (set by the caller with `cufftSetWorkArea`).
    fn plan(
        &self,
        layout: &GridLayout,
        batch: usize,
        forward: bool,
        precision: Precision,
    ) -> Result<(fft_sys::cufftHandle, usize)> {
        let [mx, my, mz] = layout.global.map(|m| m as i64);
        let real_len = layout.real_len() as i64;
        let mut n = [mz, my, mx];
        let real = [mz, my, layout.row_stride() as i64];
        let complex = [mz, my, layout.complex_row() as i64];
        let (mut inembed, idist, mut onembed, odist) =
            if forward { (real, real_len, complex, real_len / 2) } else { (complex, real_len / 2, real, real_len) };
        use fft_sys::cufftType::{CUFFT_C2R, CUFFT_D2Z, CUFFT_R2C, CUFFT_Z2D};
        let kind = match (precision, forward) {
            (Precision::F32, true) => CUFFT_R2C,
            (Precision::F32, false) => CUFFT_C2R,
            (Precision::F64, true) => CUFFT_D2Z,
            (Precision::F64, false) => CUFFT_Z2D,
        };
        let handle = fft::create().map_err(|e| cufft_error("cufftCreate", e))?;
        let plan = CufftHandle(handle);
        // SAFETY: a new plan and this device's live stream (cuFFT's stream type is the driver's).
        unsafe { fft::set_stream(plan.0, self.stream as fft_sys::cudaStream_t) }
            .map_err(|e| cufft_error("cufftSetStream", e))?;
        // SAFETY: a new plan, not yet made: its work area is then the caller's to set.
        unsafe { fft::set_auto_allocation(plan.0, false) }.map_err(|e| cufft_error("cufftSetAutoAllocation", e))?;
        // SAFETY: a new plan; the three arrays of three sizes live during the call.
        let made = unsafe {
            fft::make_plan_many64(
                plan.0,
                3,
                n.as_mut_ptr(),
                inembed.as_mut_ptr(),
                1,
                idist,
                onembed.as_mut_ptr(),
                1,
                odist,
                kind,
                batch as i64,
            )
        };
        let work = made.map_err(|e| {
            let what = format!(
                "planning {batch} in-place {} transforms of {mx}x{my}x{mz} ({precision:?}) on {}",
                if forward { "r2c" } else { "c2r" },
                self.info.name
            );
            match e.0 {
                fft_sys::cufftResult::CUFFT_ALLOC_FAILED => {
                    let free = self.free_memory().unwrap_or(0);
                    Error::Resource {
                        message: format!("cuFFT: {what}: no memory for its work area ({free} bytes free)"),
                    }
                }
                _ => cufft_error(&what, e),
            }
        })?;
        Ok((plan.into_raw(), work))
    }
}

impl Drop for CudaDevice {
    fn drop(&mut self) {
        if self.bind().is_err() {
            return;
        }
        // SAFETY: the streams and events are this device's; they are destroyed after their
        // work is done and the module unloaded after that, each once, here.
        unsafe {
            let _ = cu::stream::synchronize(self.side);
            let _ = cu::stream::synchronize(self.stream);
            if !self.module.is_null() {
                let _ = cu::module::unload(self.module);
            }
            for e in [self.forked, self.side_start, self.side_end] {
                let _ = cu::event::destroy(e);
            }
            let _ = cu::stream::destroy(self.side);
            let _ = cu::stream::destroy(self.stream);
        }
    }
}

/// A cuFFT plan handle, destroyed on drop unless taken.
struct CufftHandle(fft_sys::cufftHandle);

impl CufftHandle {
    fn into_raw(self) -> fft_sys::cufftHandle {
        let h = self.0;
        std::mem::forget(self);
        h
    }
}

impl Drop for CufftHandle {
    fn drop(&mut self) {
        // SAFETY: the handle came from cufftCreate and is destroyed once, here.
        let _ = unsafe { fft::destroy(self.0) };
    }
}

/// Batched in-place 3-D r2c and c2r plans of [`CudaDevice`] (cuFFT, on the device's stream),
/// sharing one work area as large as the larger of theirs (the two never run at once).
pub struct CudaFftPlan {
    forward: Option<fft_sys::cufftHandle>,
    backward: Option<fft_sys::cufftHandle>,
    precision: Precision,
    ctx: Arc<CudaContext>,
    /// The shared work area (0: none needed) and its bytes.
    work: (DevicePtr, usize),
}

impl std::fmt::Debug for CudaFftPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaFftPlan")
            .field("forward", &self.forward.is_some())
            .field("backward", &self.backward.is_some())
            .field("precision", &self.precision)
            .field("work_bytes", &self.work.1)
            .finish()
    }
}

impl Drop for CudaFftPlan {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        for h in [self.forward.take(), self.backward.take()].into_iter().flatten() {
            // SAFETY: each handle came from cufftCreate and is destroyed once, here.
            let _ = unsafe { fft::destroy(h) };
        }
        if self.work.0 != 0 {
            // SAFETY: the work area came from cuMemAlloc in `fft_plan`, its plans are destroyed
            // above, and it is freed once, here (cuMemFree waits for work that uses it).
            let _ = unsafe { cu::free_sync(self.work.0) };
            self.work.0 = 0;
        }
    }
}

impl Device for CudaDevice {
    type FftPlan = CudaFftPlan;

    /// Device `local_rank mod count` of the node, its primary context and a stream, and the
    /// kernels compiled by NVRTC as machine code for its architecture (`sm_XY`; cached per
    /// process).
    fn open(local_rank: usize) -> Result<Self> {
        // cudarc panics where a library or a symbol is missing: an error here instead
        std::panic::catch_unwind(|| Self::open_device(local_rank)).unwrap_or_else(|p| {
            Err(Error::Resource {
                message: format!("backend = \"cuda\": the CUDA libraries failed to load: {}", panic_message(&*p)),
            })
        })
    }

    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn free_memory(&self) -> Result<u64> {
        self.bind()?;
        let (free, _total) = cu::mem_get_info().map_err(|e| driver_error("cuMemGetInfo", e))?;
        Ok(free as u64)
    }

    fn alloc(&self, bytes: usize, what: &str) -> Result<DevicePtr> {
        self.bind()?;
        // SAFETY: the context is current; the memory is returned uninitialised, as documented.
        match unsafe { cu::malloc_sync(bytes.max(1)) } {
            Ok(ptr) => Ok(ptr),
            Err(e) => {
                let free = self
                    .free_memory()
                    .map(|f| format!("{f} bytes free"))
                    .unwrap_or_else(|_| "free memory unknown".into());
                Err(Error::Resource {
                    message: format!(
                        "cannot allocate {what}: {bytes} bytes on {} (device {}, {} bytes, {free}): {e}",
                        self.info.name, self.info.ordinal, self.info.memory
                    ),
                })
            }
        }
    }

    unsafe fn free(&self, ptr: DevicePtr) {
        if self.bind().is_err() {
            return;
        }
        // SAFETY: work queued on either stream may still use `ptr`: it finishes first; `ptr`
        // came from `alloc` and is freed once (the caller's contract).
        unsafe {
            let _ = cu::stream::synchronize(self.side);
            let _ = cu::stream::synchronize(self.stream);
            let _ = cu::free_sync(ptr);
        }
    }

    /// Queues the copy on the stream. From pageable memory the driver copies `src` to a staging
    /// buffer before returning (`src` may be reused at once); from pinned memory the copy runs
    /// later, on the stream (see [`Device::upload`]).
    unsafe fn upload(&self, dst: DevicePtr, src: &[u8]) -> Result<()> {
        if src.is_empty() {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: `dst .. dst + src.len()` lies in one live allocation (the caller's contract);
        // a pageable `src` is staged before the call returns.
        unsafe { cu::memcpy_htod_async(dst, src, self.stream) }
            .map_err(|e| driver_error(&format!("copying {} bytes to the device", src.len()), e))
    }

    fn alloc_pinned(&self, bytes: usize, what: &str) -> Result<*mut u8> {
        self.bind()?;
        // SAFETY: the context is current; flags 0: page-locked, portable to this context only.
        match unsafe { cu::malloc_host(bytes.max(1), 0) } {
            Ok(p) => Ok(p as *mut u8),
            Err(e) => Err(Error::Resource {
                message: format!("cannot allocate {bytes} bytes of pinned host memory for {what}: {e}"),
            }),
        }
    }

    unsafe fn free_pinned(&self, ptr: *mut u8) {
        if self.bind().is_err() {
            return;
        }
        // SAFETY: copies queued from `ptr` finish first; `ptr` came from `alloc_pinned` and is
        // freed once (the caller's contract).
        unsafe {
            let _ = cu::stream::synchronize(self.stream);
            let _ = cu::free_host(ptr as *mut std::ffi::c_void);
        }
    }

    unsafe fn download(&self, dst: &mut [u8], src: DevicePtr) -> Result<()> {
        if dst.is_empty() {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: `src .. src + dst.len()` lies in one live allocation (the caller's contract);
        // `dst` is borrowed until the stream has finished the copy, below.
        unsafe { cu::memcpy_dtoh_async(dst, src, self.stream) }
            .map_err(|e| driver_error(&format!("copying {} bytes from the device", dst.len()), e))?;
        self.synchronize()
    }

    unsafe fn copy(&self, dst: DevicePtr, src: DevicePtr, bytes: usize) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: two live, disjoint device ranges of `bytes` bytes (the caller's contract).
        unsafe { cu::memcpy_dtod_async(dst, src, bytes, self.stream) }
            .map_err(|e| driver_error(&format!("copying {bytes} bytes on the device"), e))
    }

    unsafe fn zero(&self, dst: DevicePtr, bytes: usize) -> Result<()> {
        if bytes == 0 {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: `dst .. dst + bytes` lies in one live allocation (the caller's contract).
        unsafe { cu::memset_d8_async(dst, 0, bytes, self.stream) }
            .map_err(|e| driver_error(&format!("zeroing {bytes} bytes"), e))
    }

    /// Launches on the stream; an empty grid launches nothing.
    unsafe fn launch(
        &self,
        name: &str,
        grid: [u32; 3],
        block: [u32; 3],
        shared: u32,
        args: &[*mut c_void],
    ) -> Result<()> {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.launch_in(self.stream, name, grid, block, shared, args) }
    }

    fn synchronize(&self) -> Result<()> {
        self.bind()?;
        // SAFETY: the stream is this device's and alive.
        unsafe { cu::stream::synchronize(self.stream) }
            .map_err(|e| driver_error("running the queued work (cuStreamSynchronize)", e))
    }

    fn fork(&self) -> Result<()> {
        self.bind()?;
        // SAFETY: the events and streams are this device's and alive; an event recorded again
        // is waited for at its latest recording.
        unsafe {
            cu::event::record(self.forked, self.stream).map_err(|e| driver_error("cuEventRecord", e))?;
            cu::stream::wait_event(self.side, self.forked, cu_sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT)
                .map_err(|e| driver_error("cuStreamWaitEvent", e))?;
            cu::event::record(self.side_start, self.side).map_err(|e| driver_error("cuEventRecord", e))
        }
    }

    unsafe fn launch_side(&self, name: &str, grid: [u32; 3], block: [u32; 3], shared: u32, args: Args) -> Result<()> {
        let mut args = args;
        let p = args.pointers();
        // SAFETY: the caller's contract, passed on; cuLaunchKernel copies the arguments
        // before returning, so `args` may go after it.
        unsafe { self.launch_in(self.side, name, grid, block, shared, &p[..args.len()]) }
    }

    fn join(&self) -> Result<f64> {
        self.bind()?;
        // SAFETY: the events and streams are this device's and alive.
        unsafe {
            cu::event::record(self.side_end, self.side).map_err(|e| driver_error("cuEventRecord", e))?;
            cu::stream::wait_event(self.stream, self.side_end, cu_sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT)
                .map_err(|e| driver_error("cuStreamWaitEvent", e))?;
            cu::event::synchronize(self.side_end)
                .map_err(|e| driver_error("running the side stream's work (cuEventSynchronize)", e))?;
            let ms = cu::event::elapsed(self.side_start, self.side_end)
                .map_err(|e| driver_error("cuEventElapsedTime", e))?;
            Ok(f64::from(ms) * 1e-3)
        }
    }

    fn fft_plan(
        &self,
        layout: &GridLayout,
        forward: usize,
        backward: usize,
        precision: Precision,
    ) -> Result<CudaFftPlan> {
        require_cufft()?;
        self.bind()?;
        let mut plan = CudaFftPlan { forward: None, backward: None, precision, ctx: self.ctx.clone(), work: (0, 0) };
        let mut work = 0;
        if forward > 0 {
            let (h, w) = self.plan(layout, forward, true, precision)?;
            plan.forward = Some(h);
            work = work.max(w);
        }
        if backward > 0 {
            let (h, w) = self.plan(layout, backward, false, precision)?;
            plan.backward = Some(h);
            work = work.max(w);
        }
        if work > 0 {
            plan.work = (self.alloc(work, "cuFFT's work area")?, work);
            for h in [plan.forward, plan.backward].into_iter().flatten() {
                // SAFETY: a made plan of this context and an allocation of at least the bytes
                // it asked for, alive as long as the plan (freed after it, in drop).
                unsafe { fft::set_work_area(h, plan.work.0 as *mut std::ffi::c_void) }
                    .map_err(|e| cufft_error("cufftSetWorkArea", e))?;
            }
        }
        Ok(plan)
    }

    fn fft_work_bytes(plan: &CudaFftPlan) -> usize {
        plan.work.1
    }

    unsafe fn fft(&self, plan: &mut CudaFftPlan, data: DevicePtr, forward: bool) -> Result<()> {
        self.bind()?;
        let handle = if forward { plan.forward } else { plan.backward }.ok_or_else(|| Error::Unsupported {
            what: format!("a {} FFT with a plan of no such components", if forward { "forward" } else { "backward" }),
        })?;
        // SAFETY: `data` holds the planned components of the planned layout and precision
        // (the caller's contract); in place, so input and output are the same address.
        let done = unsafe {
            match (plan.precision, forward) {
                (Precision::F32, true) => fft::exec_r2c(handle, data as *mut f32, data as *mut fft_sys::cufftComplex),
                (Precision::F32, false) => fft::exec_c2r(handle, data as *mut fft_sys::cufftComplex, data as *mut f32),
                (Precision::F64, true) => {
                    fft::exec_d2z(handle, data as *mut f64, data as *mut fft_sys::cufftDoubleComplex)
                }
                (Precision::F64, false) => {
                    fft::exec_z2d(handle, data as *mut fft_sys::cufftDoubleComplex, data as *mut f64)
                }
            }
        };
        done.map_err(|e| cufft_error(if forward { "forward (r2c) transform" } else { "backward (c2r) transform" }, e))
    }
}
