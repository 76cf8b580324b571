//! The application's integration tests, one binary: every module below was a test binary of its
//! own, and each of those linked the whole workspace again (one compile and link instead of
//! thirteen). Run one module with `cargo test --release -p parki-app --test app treecode::` (a
//! name filter). The tests of all modules run in one process, on the test threads together:
//! each names its own scratch folder (`common::Dir`), unique across the modules.

mod auto;
mod backend;
mod calibrate;
mod cli;
mod clustered;
mod common;
mod fmm;
mod mpi;
mod outputs;
mod poisson;
mod precision;
mod readme;
mod report;
mod treecode;
mod units;
mod wisdom;
