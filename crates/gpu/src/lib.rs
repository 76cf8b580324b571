//! The CUDA backend of parki-dist.
//!
//! [`GpuBackend`] implements the pipeline's [`parki_dist::EwaldBackend`] on a [`Device`]: the
//! cell lists, P2P, P2G, CNV, the FFTs and G2P run on the device and the particles cross the
//! bus once each way per evaluation. The kernels are CUDA C in `kernels/` at the repository
//! root ([`kernels`]), compiled at first use by NVRTC for the device's architecture.
//!
//! [`GpuFmm`] runs the FMM's P2M, M2M, M2L, L2L, L2P and P2P (parki-fmm's
//! [`parki_fmm::FmmBackend`]) there too.
//!
//! [`GpuTreecode`] runs the treecode's upward pass, interaction lists and downward pass
//! (parki-treecode's [`parki_treecode::TreeBackend`]) on the same devices.
//!
//! Two devices: `cuda::CudaDevice` (feature `cuda`; cudarc with dynamic loading, so the
//! binary builds without the CUDA toolkit and runs on the CPU where no driver is present), and
//! [`Emulator`], the same kernels compiled as C++ and run on the host, which tests the kernels
//! and the backend's data flow against the CPU backend on machines without a GPU.

pub mod device;
pub mod kernels;

#[cfg(feature = "cuda")]
pub mod cuda;

pub use device::{Args, Device, DeviceInfo, DevicePtr, Precision};

mod backend;
mod buffer;
mod emulator;
mod fmm;
pub mod params;
mod treecode;

pub use backend::{DeviceMemory, DeviceSpread, GpuBackend};
pub use buffer::{bytes_of, bytes_of_mut, DeviceBuffer, PinnedBuffer};
pub use emulator::{has_entry_point, EmuFft, Emulator};
pub use fmm::{GpuFmm, M2lVariant, P2pVariant, M2L_THREAD_MAX_ORDER, P2P_GLOBAL_BELOW};
pub use treecode::GpuTreecode;
