//! Every kernel in kernels/ compiles with NVRTC, and every entry point the build lists is in
//! the PTX. Needs NVRTC only (no driver, no GPU): where it cannot be loaded the test says
//! "skipped" and passes, unless `PARKI_REQUIRE_NVRTC=1` (CI, whose setup installs it).
#![cfg(feature = "cuda")]

use parki_gpu::cuda::{compile_cubin, compile_ptx, nvrtc_available, nvrtc_version, preload_libraries, PROBE_KERNEL};
use parki_gpu::kernels::ENTRY_POINTS;

/// Whether NVRTC is present; panics when it is missing but required.
fn nvrtc_or_skip() -> bool {
    if nvrtc_available() {
        return true;
    }
    let required = std::env::var("PARKI_REQUIRE_NVRTC").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "PARKI_REQUIRE_NVRTC=1 but NVRTC (libnvrtc.so.13) cannot be loaded (folders searched: {:?}); \
         run .ci/setup, or name the folder holding it in PARKI_CUDA_LIBS",
        parki_gpu::cuda::library_dirs()
    );
    println!("skipped: NVRTC not found (install nvidia-cuda-nvrtc, see .ci/setup, or set PARKI_CUDA_LIBS)");
    false
}

/// The entry points a PTX module defines (`.entry NAME(` or `.entry NAME` at a line's end).
fn ptx_entries(ptx: &str) -> Vec<String> {
    ptx.lines()
        .filter_map(|line| {
            let rest = line.trim_start();
            let rest = rest.strip_prefix(".visible ").or_else(|| rest.strip_prefix(".weak ")).unwrap_or(rest);
            let rest = rest.strip_prefix(".entry ")?;
            Some(rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '$').collect())
        })
        .collect()
}

fn check_arch(arch: &str) {
    let ptx = match compile_ptx(arch) {
        Ok(ptx) => ptx,
        Err(e) => panic!("NVRTC failed for {arch}:\n{e}"),
    };
    assert!(ptx.contains(".version"), "{arch}: no PTX header in NVRTC's output");
    let target = ptx.lines().find(|l| l.starts_with(".target")).unwrap_or("");
    let want = arch.trim_start_matches("compute_").trim_start_matches("sm_");
    assert!(target.contains(&format!("sm_{want}")), "{arch}: PTX {target:?}");
    let entries = ptx_entries(&ptx);
    let missing: Vec<&str> = ENTRY_POINTS.iter().copied().filter(|e| !entries.iter().any(|p| p == e)).collect();
    assert!(
        missing.is_empty(),
        "{arch}: entry points listed by build.rs but not in the PTX: {missing:?} (PTX has {entries:?})"
    );
    assert!(entries.iter().any(|e| e == PROBE_KERNEL), "{arch}: no {PROBE_KERNEL} in the PTX");
    println!(
        "{arch}: {} bytes of PTX, {} entry points, all {} listed ones present",
        ptx.len(),
        entries.len(),
        ENTRY_POINTS.len()
    );
}

#[test]
fn kernels_compile_for_ampere() {
    if !nvrtc_or_skip() {
        return;
    }
    let (major, minor) = nvrtc_version().expect("NVRTC version");
    println!("NVRTC {major}.{minor}, loaded from {:?}", preload_libraries());
    check_arch("compute_80");
}

/// What `CudaDevice::open` compiles on an H100 or H200: SASS for `sm_90` in a CUBIN, every
/// listed entry point among its symbols (one compile: the PTX of Hopper is the same front end,
/// checked above for Ampere).
#[test]
fn kernels_compile_to_machine_code_for_hopper() {
    if !nvrtc_or_skip() {
        return;
    }
    let cubin = compile_cubin("sm_90").unwrap_or_else(|e| panic!("NVRTC failed for sm_90:\n{e}"));
    assert_eq!(cubin[..4], *b"\x7fELF", "a CUBIN is an ELF image");
    let has = |name: &str| {
        let mut sym = name.as_bytes().to_vec();
        sym.push(0);
        cubin.windows(sym.len()).any(|w| w == sym.as_slice())
    };
    let missing: Vec<&str> = ENTRY_POINTS.iter().copied().filter(|e| !has(e)).collect();
    assert!(missing.is_empty(), "sm_90: entry points listed by build.rs but not in the CUBIN: {missing:?}");
    println!("sm_90: {} bytes of CUBIN, all {} listed entry points present", cubin.len(), ENTRY_POINTS.len());
}

#[test]
fn compile_errors_carry_nvrtc_log() {
    if !nvrtc_or_skip() {
        return;
    }
    let e = compile_ptx("compute_1").expect_err("no such architecture").to_string();
    println!("{e}");
    assert!(e.contains("compute_1"), "{e}");
}

#[test]
fn entry_point_parser() {
    let ptx = ".version 8.0\n.target sm_90\n.visible .entry p2p_f64(\n\t.param .u64 a\n)\n.entry zero_u32\n";
    assert_eq!(ptx_entries(ptx), ["p2p_f64", "zero_u32"]);
}
