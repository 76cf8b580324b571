//! The `parki-dist` application: a run.toml ([`config`]) names the problem, the `.npy` inputs
//! ([`npy`], [`input`]) and the outputs; [`app::run`] plans and evaluates the solvers of the
//! `parki-dist` library on one process or over MPI ranks, on the CPU or a CUDA device
//! ([`backend`]), checks the result against a reference sum ([`verify`]) and writes the
//! potential and the JSON report ([`report`]) through temporary files checked before the run
//! ([`outputs`]). `[problem] method = "treecode"` runs the free-space treecode ([`treecode`]), `method = "fmm"` the
//! free-space fast multipole method ([`fmm`]).
//!
//! The library's public surface is the `parki-dist` crate (the solvers and their options); this
//! package holds the application's plumbing and the `parki-dist` and `parki-check` binaries.

pub mod app;
pub mod auto;
pub mod backend;
pub mod calibrate;
pub mod config;
pub mod fmm;
pub mod input;
pub mod npy;
pub mod outputs;
pub mod poisson;
pub mod report;
pub mod treecode;
pub mod units;
pub mod verify;
pub mod wisdom;
