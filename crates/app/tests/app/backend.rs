//! `[run] backend`: `"auto"` runs here and says what it chose, `"cuda"` without the CUDA backend
//! (the default build) or without a device is one clear error on every rank, and a wrong name
//! or variant is an error naming the field and the value.

use std::process::{Command, Output};

use parki_app::backend::HAS_CUDA;
use serde_json::Value;

use crate::common::Dir;

const RUN: &str = "[problem]\nkernel = \"laplace\"\nbox = [1.0, 1.2, 0.9]\ntolerance = 1e-5\n\
                   [sources]\ngenerate = { distribution = \"uniform\", count = 300 }\n\
                   [output]\nreport = \"report.json\"\n[run]\n";

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_parki-dist"))
}

/// Runs `RUN` with `run` appended to its `[run]` table.
fn run(dir: &Dir, run: &str, extra: &[&str]) -> Output {
    let cfg = dir.file("run.toml", &format!("{RUN}{run}\n"));
    bin().arg("run").arg(&cfg).args(["--threads", "2"]).args(extra).output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn assert_error(out: &Output, needles: &[&str]) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "expected exit 2; stderr: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    for n in needles {
        assert!(err.contains(n), "stderr lacks {n:?}: {err}");
    }
}

/// Whether the CUDA driver library can be loaded here (never asked without the CUDA backend).
fn driver_present() -> bool {
    #[cfg(feature = "cuda")]
    return parki_gpu::cuda::driver_available();
    #[cfg(not(feature = "cuda"))]
    false
}

#[test]
fn auto_runs_and_says_what_it_chose() {
    let dir = Dir::new("backend-auto");
    let out = run(&dir, "backend = \"auto\"", &[]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(dir.path("report.json")).unwrap()).unwrap();
    assert_eq!(report["backend_requested"], "auto");
    let chose = report["backend"].as_str().unwrap();
    let reason = report["backend_reason"].as_str().unwrap();
    // rank 0 says which and why, and so does the summary
    let line = format!("backend auto: {chose} ({reason})");
    assert!(err.contains(&line), "stderr lacks {line:?}: {err}");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains(&format!("backend {chose}")), "{table}");
    if !HAS_CUDA {
        assert_eq!((chose, reason), ("cpu", "this binary was built without --features cuda"));
    } else if !driver_present() {
        assert_eq!((chose, reason), ("cpu", "no CUDA driver on this machine"));
    }
    if chose == "cpu" {
        assert!(report["device"].is_null());
        assert_ne!(report["p2p_isa"], "cuda");
    } else {
        let d = &report["device"];
        assert!(!d["name"].as_str().unwrap().is_empty(), "{d}");
        assert!(d["compute_capability"].as_str().unwrap().contains('.'), "{d}");
        assert!(d["variants"].as_str().unwrap().starts_with("p2p gm1d"), "{d}");
        assert_eq!(report["p2p_isa"], "cuda");
    }
    // --quiet: no line
    let out = run(&dir, "backend = \"auto\"", &["--quiet"]);
    assert!(out.status.success());
    assert!(!stderr(&out).contains("backend auto"), "{}", stderr(&out));
}

#[test]
fn cpu_is_the_default_and_named() {
    let dir = Dir::new("backend-cpu");
    let out = run(&dir, "", &["--quiet"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(dir.path("report.json")).unwrap()).unwrap();
    assert_eq!(report["backend"], "cpu");
    assert_eq!(report["backend_requested"], "cpu");
    assert_eq!(report["backend_reason"], "[run] backend = \"cpu\" (the default)");
    assert!(report["device"].is_null());
    assert!(String::from_utf8_lossy(&out.stdout).contains("backend cpu\n"));
    // the device variants are accepted (and unused) on the CPU
    let out = run(&dir, "backend = \"cpu\"\np2p = \"shared\"\nspread = \"operator\"", &["--quiet"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn cuda_without_the_feature_or_a_device_is_an_error() {
    if HAS_CUDA && driver_present() {
        return; // a GPU machine: `cuda` may run here (the device tests cover it)
    }
    let dir = Dir::new("backend-cuda");
    let out = run(&dir, "backend = \"cuda\"", &["--quiet"]);
    if HAS_CUDA {
        assert_error(&out, &["backend = \"cuda\"", "no CUDA driver"]);
    } else {
        assert_error(&out, &["backend = \"cuda\" needs a binary built with --features cuda"]);
    }
    assert!(!dir.path("report.json").exists());
    // on two ranks: every rank stops, rank 0 prints the error once
    let cfg = dir.path("run.toml");
    let out = Command::new("timeout")
        .args(["600", "mpirun", "-n", "2", "--oversubscribe", env!("CARGO_BIN_EXE_parki-dist"), "run"])
        .arg(&cfg)
        .args(["--quiet", "--threads", "1"])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("mpirun must be installed (openmpi-bin); see README");
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("parki-dist: error")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].starts_with("parki-dist: error (rank 0 of 2): ") && lines[0].contains("backend = \"cuda\""),
        "{err}"
    );
}

#[test]
fn wrong_names_are_errors_naming_the_field_and_value() {
    let dir = Dir::new("backend-words");
    let cases: [(&str, &[&str]); 6] = [
        ("backend = \"gpu\"", &["run.backend = \"gpu\"", "\"cpu\", \"cuda\" or \"auto\""]),
        ("backend = \"CUDA\"", &["run.backend = \"CUDA\""]),
        ("p2p = \"fast\"", &["run.p2p = \"fast\"", "\"gm1d\" or \"shared\""]),
        ("spread = \"atomic\"", &["run.spread = \"atomic\"", "\"auto\" or \"operator\""]),
        ("device_fft = \"fused\"", &["run.device_fft = \"fused\"", "\"batched\" or \"components\""]),
        ("device_overlap = \"all\"", &["run.device_overlap = \"all\"", "\"none\" or \"p2p\""]),
    ];
    for (line, needles) in cases {
        assert_error(&run(&dir, line, &["--quiet"]), needles);
    }
}

#[test]
fn help_documents_the_backend() {
    let out = bin().args(["run", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for key in [
        "backend = \"cpu\"",
        "\"auto\"",
        "--features cuda",
        "p2p = \"gm1d\"",
        "spread = \"auto\"",
        "device_fft = \"batched\"",
        "device_overlap = \"none\"",
    ] {
        assert!(text.contains(key), "run --help lacks {key}");
    }
}
