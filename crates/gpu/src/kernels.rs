//! The CUDA C sources of kernels/ and their entry points.
//!
//! Every kernel is written once as a `__device__` template over the real type and exported as
//! `extern "C"` entry points `<name>_f32` and `<name>_f64` (`PARKI_EXPORT_BOTH`), or once when
//! it does not depend on the precision (`PARKI_EXPORT`). NVRTC compiles [`nvrtc_source`] (the
//! files concatenated after a short prelude); the emulator compiles the same files as C++.

use crate::device::Precision;

/// `(file name, text)` of `kernels/common.cuh` and every `kernels/*.cu`, in compile order.
pub const SOURCES: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/sources.rs"));

/// Every entry point the kernels export.
pub const ENTRY_POINTS: &[&str] = include!(concat!(env!("OUT_DIR"), "/entry_points.rs"));

/// What NVRTC needs before the sources: the dynamic shared memory declaration.
const NVRTC_PRELUDE: &str = "\
#define PARKI_NVRTC 1
#define PARKI_DYNAMIC_SHARED(T, name) extern __shared__ __align__(16) unsigned char parki_dyn_smem[]; \\
    T* name = reinterpret_cast<T*>(parki_dyn_smem)
";

/// The whole program NVRTC compiles: the prelude, `common.cuh`, then every `.cu` file.
pub fn nvrtc_source() -> String {
    let mut s = String::from(NVRTC_PRELUDE);
    for (file, text) in SOURCES {
        s.push_str(&format!("// ---- kernels/{file}\n"));
        s.push_str(text);
        s.push('\n');
    }
    s
}

/// The entry point of kernel `base` in `precision`: `"{base}_f32"` or `"{base}_f64"`.
pub fn entry(base: &str, precision: Precision) -> String {
    format!("{base}_{}", precision.suffix())
}
