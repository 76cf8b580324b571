//! The compute backend of a run: `[run] backend = "cpu" | "cuda" | "auto"` in run.toml.
//!
//! `"cpu"` (the default) runs the CPU backend of parki-dist. `"cuda"` runs
//! [`parki_gpu::GpuBackend`] on a `parki_gpu::cuda::CudaDevice`: it needs a binary built with
//! `--features cuda`, a CUDA driver and a device on every rank, and is an error otherwise (the
//! same error on every rank). `"auto"` runs CUDA where `"cuda"` would succeed and the CPU
//! otherwise, and says which it chose and why. The choice is made once, before any input is
//! read, and agreed on by every rank ([`resolve`]).

use parki_comm::Comm;
use parki_core::{Error, Result};
use parki_dist::{CpuBackend, EwaldBackend, SolverReal};
use parki_gpu::{DeviceInfo, GpuBackend};

/// Whether this binary has the CUDA backend (parki-app's feature `cuda`).
pub const HAS_CUDA: bool = cfg!(feature = "cuda");

/// `[run] backend` as run.toml asks for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Request {
    /// The CPU backend (default).
    #[default]
    Cpu,
    /// The CUDA backend, or an error.
    Cuda,
    /// CUDA where a device opens on every rank, else the CPU.
    Auto,
}

impl Request {
    /// Name in run.toml and reports.
    pub fn name(self) -> &'static str {
        match self {
            Request::Cpu => "cpu",
            Request::Cuda => "cuda",
            Request::Auto => "auto",
        }
    }

    /// Parses a run.toml name (the inverse of [`Request::name`]).
    pub fn parse(s: &str) -> Option<Self> {
        [Request::Cpu, Request::Cuda, Request::Auto].into_iter().find(|r| r.name() == s)
    }
}

/// The backend a run computes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compute {
    /// [`parki_dist::CpuBackend`].
    Cpu,
    /// [`parki_gpu::GpuBackend`] on a CUDA device (only chosen in a binary with feature `cuda`).
    Cuda,
}

impl Compute {
    /// Name in reports: `"cpu"` or `"cuda"`.
    pub fn name(self) -> &'static str {
        match self {
            Compute::Cpu => "cpu",
            Compute::Cuda => "cuda",
        }
    }
}

/// The backend chosen for a run, the same on every rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    /// What run.toml asked for.
    pub requested: Request,
    /// What the run computes on.
    pub compute: Compute,
    /// Why: the run.toml key, or for `"auto"` what was found.
    pub reason: String,
}

/// `[run] backend` of a method's run.toml (`None`: the default).
///
/// # Errors
/// [`Error::OutOfRange`] naming `run.backend` and the value.
pub fn request(name: Option<&str>) -> Result<Request> {
    match name {
        None => Ok(Request::default()),
        Some(name) => Request::parse(name).ok_or_else(|| Error::OutOfRange {
            field: "run.backend".into(),
            value: format!("\"{name}\""),
            allowed: "\"cpu\", \"cuda\" or \"auto\"".into(),
        }),
    }
}

/// `backend = "cuda"` in a binary without the CUDA backend.
pub fn feature_error() -> Error {
    Error::Unsupported {
        what: "[run] backend = \"cuda\" needs a binary built with --features cuda \
               (cargo build --release -p parki-app --features cuda)"
            .into(),
    }
}

/// Chooses the backend for `requested` (`explicit`: the key was written in run.toml) on every
/// rank of `comm`. Collective: every rank calls it with the same arguments and gets the same
/// choice, or the same error.
///
/// `"cuda"` opens the device every rank will use (device `node rank mod devices`, the kernels
/// compiled for it) and closes it again, so that a missing driver, device or NVRTC stops the
/// run before any input is read; the solver opens it again when it plans (the compiled
/// kernels are cached in the process).
///
/// # Errors
/// `"cuda"` in a binary without feature `cuda` ([`feature_error`]), or where any rank cannot
/// open its device (the device's error, agreed on by every rank).
pub fn resolve(requested: Request, explicit: bool, comm: &Comm) -> Result<Choice> {
    let asked = format!("[run] backend = \"{}\"{}", requested.name(), if explicit { "" } else { " (the default)" });
    let choice = |compute, reason| Ok(Choice { requested, compute, reason });
    match requested {
        Request::Cpu => choice(Compute::Cpu, asked),
        Request::Cuda if !HAS_CUDA => Err(feature_error()),
        Request::Cuda => {
            comm.agree(probe(comm, false))?;
            choice(Compute::Cuda, asked)
        }
        Request::Auto if !HAS_CUDA => choice(Compute::Cpu, "this binary was built without --features cuda".into()),
        Request::Auto => match comm.agree(probe(comm, true)) {
            Ok(found) => choice(Compute::Cuda, found),
            Err(e) => choice(Compute::Cpu, reason(&e)),
        },
    }
}

/// Opens and closes this rank's device; what it found. Collective (the node rank). With
/// `auto`, a missing driver is said briefly.
#[cfg(feature = "cuda")]
fn probe(comm: &Comm, auto: bool) -> Result<String> {
    use parki_gpu::Device;
    let local = parki_dist::node_rank(comm);
    if auto && !parki_gpu::cuda::driver_available() {
        return Err(Error::Resource { message: "no CUDA driver on this machine".into() });
    }
    let dev = parki_gpu::cuda::CudaDevice::open(local)?;
    let i = dev.info();
    Ok(format!("{}, device {} of {}", i.name, i.ordinal, i.count))
}

#[cfg(not(feature = "cuda"))]
fn probe(_comm: &Comm, _auto: bool) -> Result<String> {
    Err(feature_error())
}

/// Why `"auto"` fell back to the CPU: the device's message, without the error kind, and the
/// rank it came from when not rank 0's own.
fn reason(e: &Error) -> String {
    let kind = Error::Resource { message: String::new() }.to_string();
    match e {
        Error::Resource { message } => message.clone(),
        Error::Remote { rank, message } => {
            format!("rank {rank}: {}", message.strip_prefix(kind.as_str()).unwrap_or(message))
        }
        e => e.to_string(),
    }
}

/// What the report says about a device.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceReport {
    /// Rank 0's device.
    pub info: DeviceInfo,
    /// The P2P, P2G and G2P variants the device runs (`"p2p gm1d, p2g hybrid, g2p sorted"`).
    pub variants: String,
}

impl DeviceReport {
    /// One line for the summary: `NAME (device 0 of 1, compute 9.0, driver 13.0, CUDA 13.0), p2p ...`.
    pub fn line(&self) -> String {
        let i = &self.info;
        format!(
            "{} (device {} of {}, compute {}.{}, driver {}, CUDA {}), {}",
            i.name, i.ordinal, i.count, i.compute.0, i.compute.1, i.driver, i.cuda, self.variants
        )
    }
}

/// A backend the application runs: the solver's backend, and what the report says about it.
pub trait RunBackend<T: SolverReal>: EwaldBackend<T> {
    /// The device (`None` on the CPU).
    fn device_report(&self) -> Option<DeviceReport>;
}

impl<T: SolverReal> RunBackend<T> for CpuBackend<T> {
    fn device_report(&self) -> Option<DeviceReport> {
        None
    }
}

impl<T: SolverReal, D: parki_gpu::Device> RunBackend<T> for GpuBackend<T, D> {
    fn device_report(&self) -> Option<DeviceReport> {
        Some(DeviceReport { info: self.device().info().clone(), variants: self.variants() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_themselves() {
        for r in [Request::Cpu, Request::Cuda, Request::Auto] {
            assert_eq!(Request::parse(r.name()), Some(r));
        }
        assert_eq!(Request::parse("gpu"), None);
    }

    #[test]
    fn auto_falls_back_with_a_reason() {
        let comm = Comm::single();
        let c = resolve(Request::Auto, true, &comm).unwrap();
        if !HAS_CUDA {
            assert_eq!(c.compute, Compute::Cpu);
            assert!(c.reason.contains("--features cuda"), "{}", c.reason);
        }
        assert!(!c.reason.is_empty());
        let c = resolve(Request::Cpu, false, &comm).unwrap();
        assert_eq!((c.compute, c.reason.as_str()), (Compute::Cpu, "[run] backend = \"cpu\" (the default)"));
    }

    #[test]
    fn remote_reasons_drop_the_error_kind() {
        let e = Error::Remote { rank: 2, message: "insufficient resources: no CUDA driver on this machine".into() };
        assert_eq!(reason(&e), "rank 2: no CUDA driver on this machine");
        assert_eq!(reason(&Error::Resource { message: "no device".into() }), "no device");
    }
}
