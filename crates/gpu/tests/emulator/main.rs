//! The host emulator's integration tests, one binary: every module below was a test binary of
//! its own, and each of those linked the whole workspace again (one compile and link instead of
//! seven). Run one module with `cargo test --release -p parki-gpu --test emulator
//! emulator_treecode::` (a name filter).
//!
//! The distributed tests re-run this binary under `mpirun`, each with `--exact MODULE::mpi_child`
//! and its module's own environment variable set. The two tests that bound the emulator's
//! memory (`Emulator::set_memory`, process-wide) re-run this binary for themselves alone
//! ([`own_process`]), so that the tests on the other threads keep an unbounded device.
//!
//! `fmm_common` and `tree_common` are shared with the CUDA tests (`tests/cuda_fmm.rs`,
//! `tests/cuda_treecode.rs`), which stay test binaries of their own (feature `cuda`).

use std::process::Command;

mod emulator;
mod emulator_fmm;
mod emulator_free;
mod emulator_memory;
mod emulator_mpi;
mod emulator_treecode;
mod emulator_treecode_memory;
#[path = "../fmm_common/mod.rs"]
mod fmm_common;
#[path = "../tree_common/mod.rs"]
mod tree_common;

/// The environment variable naming the test a child of [`own_process`] runs.
const OWN_PROCESS: &str = "PARKI_EMULATOR_OWN_PROCESS";

/// Whether to run the test `name` (`module::test`, its name in this binary) here: true in a
/// process that runs it alone; elsewhere it runs this binary with `--exact name` (the child
/// prints its output), asserts that the one test passed there and returns false.
pub fn own_process(name: &str) -> bool {
    if std::env::var(OWN_PROCESS).is_ok_and(|v| v == name) {
        return true;
    }
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(&exe)
        .args(["--exact", name, "--nocapture", "--test-threads", "1"])
        .env(OWN_PROCESS, name)
        .output()
        .expect("the test binary runs itself");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("{text}");
    assert!(out.status.success(), "{name} in a process of its own: {text}");
    assert!(text.contains("test result: ok. 1 passed"), "{name} names no test of this binary: {text}");
    false
}
