//! The Ewald solver's integration tests, one binary: every module below was a test binary of
//! its own, and each of those compiled and optimised the generic pipeline again (the CI's test
//! build took 10 min; one binary shares the instantiations). Run one module with
//! `cargo test --release -p parki-dist --test ewald free_space::` (a name filter).

mod accuracy;
mod bad_input;
mod common;
mod conventions;
mod error_model;
mod exact_positions;
mod f32_boundary;
mod field;
mod free_space;
mod rc_sweep;
mod tolerance_sweep;
mod units;
mod variants;
