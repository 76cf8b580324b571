//! Generates the bindings to zoltan.h and links libtrilinos_zoltan.
//!
//! The headers are looked for in `$ZOLTAN_INCLUDE_DIR`, else `/usr/include/trilinos` (Debian's
//! libtrilinos-zoltan-dev); the library in `$ZOLTAN_LIB_DIR` when set, else the linker's
//! default paths. MPI's headers come from the same probe as rsmpi's (mpicc or pkg-config).

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=wrapper.h");
    println!("cargo:rerun-if-env-changed=ZOLTAN_INCLUDE_DIR");
    println!("cargo:rerun-if-env-changed=ZOLTAN_LIB_DIR");
    let include = env::var("ZOLTAN_INCLUDE_DIR").map(PathBuf::from).unwrap_or_else(|_| "/usr/include/trilinos".into());
    if !include.join("zoltan.h").exists() {
        panic!(
            "zoltan.h not found in {}: install Zoltan (Debian: apt-get install libtrilinos-zoltan-dev, as .ci/setup \
             does) or set ZOLTAN_INCLUDE_DIR",
            include.display()
        );
    }
    if let Ok(dir) = env::var("ZOLTAN_LIB_DIR") {
        println!("cargo:rustc-link-search=native={dir}");
    }
    println!("cargo:rustc-link-lib=trilinos_zoltan");

    let mpi = build_probe_mpi::probe().unwrap_or_else(|errs| {
        let why: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        panic!("no MPI found for Zoltan's headers: {}", why.join("; "))
    });
    let mut builder = bindgen::builder()
        .header("wrapper.h")
        .clang_arg(format!("-I{}", include.display()))
        .allowlist_function("Zoltan_.*")
        .allowlist_type("ZOLTAN_.*|Zoltan_.*")
        .allowlist_var("ZOLTAN_.*")
        .blocklist_type("MPI_.*|ompi_.*")
        .derive_default(true)
        .layout_tests(false);
    for dir in &mpi.include_paths {
        builder = builder.clang_arg(format!("-I{}", dir.display()));
    }
    let bindings = builder.generate().expect("bindgen over zoltan.h");
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    bindings.write_to_file(out.join("zoltan.rs")).expect("write the bindings");
}
