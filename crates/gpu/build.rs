//! Builds the host emulator of kernels/ (C++, see emu/emu.h) and lists the kernels' entry
//! points for the NVRTC compile test and the emulator's table.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One exported entry point: `(name, uses barriers, its precisions)` (no precisions: one
/// precision-independent entry point).
fn exports(source: &str) -> Vec<(String, bool, &'static [&'static str])> {
    const BOTH: &[&str] = &["f32", "f64"];
    const F64: &[&str] = &["f64"];
    let mut out = Vec::new();
    for line in source.lines() {
        let line = line.trim_start();
        for (prefix, sync, precisions) in [
            ("PARKI_EXPORT_BOTH_LB_SYNC(", true, BOTH),
            ("PARKI_EXPORT_BOTH_LB(", false, BOTH),
            ("PARKI_EXPORT_F64_LB_SYNC(", true, F64),
            ("PARKI_EXPORT_F64_LB(", false, F64),
            ("PARKI_EXPORT_BOTH_SYNC(", true, BOTH),
            ("PARKI_EXPORT_BOTH(", false, BOTH),
            ("PARKI_EXPORT_F64_SYNC(", true, F64),
            ("PARKI_EXPORT_F64(", false, F64),
            ("PARKI_EXPORT_SYNC(", true, &[][..]),
            ("PARKI_EXPORT(", false, &[][..]),
        ] {
            if let Some(rest) = line.strip_prefix(prefix) {
                let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                out.push((name, sync, precisions));
                break;
            }
        }
    }
    out
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let kernels = manifest.join("../../kernels").canonicalize().expect("kernels/ at the repository root");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    println!("cargo:rerun-if-changed={}", kernels.display());
    println!("cargo:rerun-if-changed=emu/emu.h");
    println!("cargo:rerun-if-changed=emu/emu.cpp");

    let mut files: Vec<PathBuf> = std::fs::read_dir(&kernels)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cu"))
        .collect();
    files.sort();
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    let common = kernels.join("common.cuh");

    let mut inc = String::new();
    let mut registry = String::new();
    let mut names = String::from("&[\n");
    let mut sources = String::from("&[\n");
    writeln!(inc, "#include \"{}\"", common.display()).unwrap();
    writeln!(sources, "    (\"common.cuh\", include_str!({:?})),", common.display().to_string()).unwrap();
    for f in &files {
        writeln!(inc, "#include \"{}\"", f.display()).unwrap();
        let file = f.file_name().unwrap().to_string_lossy().to_string();
        writeln!(sources, "    ({:?}, include_str!({:?})),", file, f.display().to_string()).unwrap();
        let text = std::fs::read_to_string(f).unwrap();
        for (name, sync, precisions) in exports(&text) {
            if !precisions.is_empty() {
                for p in precisions {
                    writeln!(registry, "PARKI_REGISTER(parki_{p}::{name}_{p}, \"{name}_{p}\", {sync})").unwrap();
                    writeln!(names, "    \"{name}_{p}\",").unwrap();
                }
            } else {
                writeln!(registry, "PARKI_REGISTER({name}, \"{name}\", {sync})").unwrap();
                writeln!(names, "    \"{name}\",").unwrap();
            }
        }
    }
    names.push(']');
    sources.push(']');
    write(&out.join("kernels.inc"), &inc);
    write(&out.join("registry.inc"), &registry);
    write(&out.join("entry_points.rs"), &names);
    write(&out.join("sources.rs"), &sources);

    cc::Build::new()
        .cpp(true)
        .std("c++20")
        .file(manifest.join("emu/emu.cpp"))
        .include(manifest.join("emu"))
        .include(&out)
        .flag_if_supported("-pthread")
        .flag_if_supported("-Wno-unused-parameter")
        .flag_if_supported("-Wno-unused-variable")
        .flag_if_supported("-fno-fast-math")
        .opt_level(2)
        .compile("parki_emu");
    println!("cargo:rustc-link-lib=stdc++");
}

fn write(path: &Path, text: &str) {
    if std::fs::read_to_string(path).ok().as_deref() != Some(text) {
        std::fs::write(path, text).unwrap();
    }
}
