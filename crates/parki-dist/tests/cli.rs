//! The `parki-dist` command end to end: help, a run with report and output, file inputs, and
//! every bad input as a clear error with a non-zero exit and no panic.

use std::path::Path;
use std::process::{Command, Output};

use parki_dist::npy;
use parki_reference::generate::{self, Distribution, Rng};

mod common;
use common::Dir;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_parki-dist"))
}

fn run(config: &Path, extra: &[&str]) -> Output {
    bin().arg("run").arg(config).args(["--quiet", "--threads", "2"]).args(extra).output().unwrap()
}

fn assert_error(out: &Output, needles: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "expected failure, got success; stderr: {err}");
    assert_eq!(out.status.code(), Some(2), "exit code; stderr: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    for n in needles {
        assert!(err.contains(n), "stderr lacks {n:?}: {err}");
    }
}

/// Writes a Stokes problem as .npy files.
fn write_inputs(dir: &Dir, n: usize) -> Vec<[f64; 3]> {
    let domain = parki_core::Domain::triply_periodic([1.0, 1.2, 0.9]).unwrap();
    let mut rng = Rng::new(5);
    let pos = generate::positions(&domain, Distribution::Uniform, n, &mut rng);
    let flat = |v: &[[f64; 3]]| v.iter().flatten().cloned().collect::<Vec<f64>>();
    npy::write(&dir.path("src.npy"), &[n, 3], &flat(&pos)).unwrap();
    npy::write(&dir.path("q.npy"), &[n], &generate::neutral_scalars(n, &mut rng)).unwrap();
    npy::write(&dir.path("f.npy"), &[n, 3], &flat(&generate::neutral_vectors(n, &mut rng))).unwrap();
    npy::write(&dir.path("d.npy"), &[n, 3], &flat(&generate::normal_vectors(n, &mut rng))).unwrap();
    npy::write(&dir.path("n.npy"), &[n, 3], &flat(&generate::normal_vectors(n, &mut rng))).unwrap();
    pos
}

const FILES: &str = r#"
[problem]
kernel = "stokes"
box = [1.0, 1.2, 0.9]
tolerance = 1e-7
[sources]
positions = "src.npy"
forces = "f.npy"
dipoles = "d.npy"
normals = "n.npy"
[output]
potential = "u.npy"
report = "report.json"
"#;

#[test]
fn help_documents_commands_and_run_toml() {
    let out = bin().arg("--help").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for key in ["run", "[problem]", "tolerance", "precision", "generate", "[output]", "window_support", "check"] {
        assert!(text.contains(key), "--help lacks {key}");
    }
    let out = bin().args(["run", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for key in ["--check", "--threads", "--repeat", "--quiet", "--json"] {
        assert!(text.contains(key), "run --help lacks {key}");
    }
}

#[test]
fn run_from_files_writes_potential_and_report_and_checks() {
    let dir = Dir::new("files");
    write_inputs(&dir, 800);
    let cfg = dir.file("run.toml", FILES);
    let out = run(&cfg, &["--check", "100"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8_lossy(&out.stdout);
    for s in ["P2P", "P2G", "FFT", "CNV", "IFFT", "G2P", "min", "avg", "max", "throughput", "check"] {
        assert!(table.contains(s), "table lacks {s}: {table}");
    }
    let u = npy::read(&dir.path("u.npy"), "u").unwrap();
    assert_eq!(u.shape, vec![800, 3]);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path("report.json")).unwrap()).unwrap();
    for key in ["xi", "rc", "grid", "window_support", "h"] {
        assert!(report["parameters"].get(key).is_some(), "report lacks parameters.{key}");
    }
    for stage in ["P2P", "P2G", "FFT", "CNV", "IFFT", "G2P"] {
        assert!(report["timings"][stage]["avg"].as_f64().unwrap() >= 0.0);
    }
    let e = report["check"]["relative_rms_error"].as_f64().unwrap();
    assert!(e <= 1e-7, "checked error {e}");
    assert!(report["error_estimate"]["total"].as_f64().unwrap() <= 1e-7);
}

#[test]
fn progress_lines_name_every_stage() {
    let dir = Dir::new("progress");
    let cfg = dir.file(
        "run.toml",
        "[problem]\nkernel = \"laplace\"\nbox = [1.0, 1.0, 1.0]\ntolerance = 1e-6\n[sources]\ngenerate = { distribution = \"normal\", count = 500 }\n",
    );
    let out = bin().arg("run").arg(&cfg).output().unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    for s in ["planned", "P2P", "P2G", "FFT", "CNV", "IFFT", "G2P", "done"] {
        assert!(err.contains(s), "progress lacks {s}: {err}");
    }
}

#[test]
fn f32_run_and_separate_targets() {
    let dir = Dir::new("f32");
    let cfg = dir.file(
        "run.toml",
        "[problem]\nkernel = \"stokeslet\"\nbox = [1.0, 0.8, 1.1]\ntolerance = 1e-5\nprecision = \"f32\"\n\
         [sources]\ngenerate = { distribution = \"sphere\", count = 600, seed = 4 }\n\
         [targets]\ngenerate = { distribution = \"uniform\", count = 300, seed = 9 }\n\
         [output]\npotential = \"u.npy\"\n",
    );
    let out = run(&cfg, &["--check", "300", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["precision"], "f32");
    assert_eq!(report["targets"], 300);
    assert!(report["check"]["relative_rms_error"].as_f64().unwrap() <= 1e-5);
    assert_eq!(npy::read(&dir.path("u.npy"), "u").unwrap().shape, vec![300, 3]);
}

#[test]
fn missing_file_is_an_error_naming_it() {
    let dir = Dir::new("missing");
    write_inputs(&dir, 50);
    let cfg = dir.file("run.toml", &FILES.replace("f.npy", "nope.npy"));
    assert_error(&run(&cfg, &[]), &["nope.npy", "sources.forces"]);
    assert_error(&run(&dir.path("absent.toml"), &[]), &["absent.toml"]);
}

#[test]
fn wrong_shape_and_mismatched_lengths_are_errors() {
    let dir = Dir::new("shape");
    write_inputs(&dir, 50);
    npy::write(&dir.path("bad.npy"), &[50, 2], &vec![0.1; 100]).unwrap();
    let cfg = dir.file("run.toml", &FILES.replace("src.npy", "bad.npy"));
    assert_error(&run(&cfg, &[]), &["sources.positions", "(N, 3)", "[50, 2]"]);
    npy::write(&dir.path("short.npy"), &[49, 3], &vec![0.1; 147]).unwrap();
    let cfg = dir.file("run.toml", &FILES.replace("d.npy", "short.npy"));
    assert_error(&run(&cfg, &[]), &["sources.dipoles has 49 rows", "sources.positions has 50"]);
    std::fs::write(dir.path("junk.npy"), b"hello").unwrap();
    let cfg = dir.file("run.toml", &FILES.replace("n.npy", "junk.npy"));
    assert_error(&run(&cfg, &[]), &["sources.normals", ".npy"]);
}

#[test]
fn particle_outside_the_box_fails_unless_wrapped() {
    let dir = Dir::new("outside");
    let mut pos = write_inputs(&dir, 60);
    pos[17][1] = 1.25; // box is 1.2 along y
    pos[3][0] = -0.2;
    npy::write(&dir.path("src.npy"), &[60, 3], &pos.iter().flatten().cloned().collect::<Vec<_>>()).unwrap();
    let cfg = dir.file("run.toml", FILES);
    assert_error(&run(&cfg, &[]), &["sources.positions[3]", "outside", "-0.2"]);
    let cfg = dir.file("run.toml", &FILES.replace("tolerance = 1e-7", "tolerance = 1e-7\nwrap = true"));
    let out = run(&cfg, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn nan_in_a_file_is_an_error() {
    let dir = Dir::new("nan");
    write_inputs(&dir, 40);
    let mut f = vec![0.5; 120];
    f[3 * 11 + 2] = f64::NAN;
    npy::write(&dir.path("f.npy"), &[40, 3], &f).unwrap();
    let cfg = dir.file("run.toml", FILES);
    assert_error(&run(&cfg, &[]), &["sources.forces[11][2] = NaN"]);
}

#[test]
fn bad_configuration_values_are_errors() {
    let dir = Dir::new("config");
    write_inputs(&dir, 40);
    let cases: [(&str, &str, &[&str]); 7] = [
        ("tolerance = 1e-7", "tolerance = 1e-15", &["problem.tolerance", "1e-15"]),
        ("tolerance = 1e-7", "tolerance = 1e-7\nprecision = \"f16\"", &["problem.precision", "f16"]),
        ("kernel = \"stokes\"", "kernel = \"helmholtz\"", &["problem.kernel", "helmholtz"]),
        ("tolerance = 1e-7", "tolerance = 1e-7\ntolerence = 1e-3", &["tolerence"]),
        ("box = [1.0, 1.2, 0.9]", "box = [1.0, -1.2, 0.9]", &["problem.box[1]"]),
        ("[output]", "[ewald]\nwindow_support = 5\n[output]", &["ewald.window_support", "5"]),
        ("[output]", "[ewald]\np2g = \"fast\"\n[output]", &["ewald.p2g", "fast"]),
    ];
    for (from, to, needles) in cases {
        let cfg = dir.file("run.toml", &FILES.replace(from, to));
        assert_error(&run(&cfg, &[]), needles);
    }
    let cfg = dir.file("run.toml", "[problem]\nkernel = \"laplace\"\nbox = [1.0, 1.2, 0.9]\ntolerance = 1e-6\n[sources]\npositions = \"src.npy\"\n");
    assert_error(&run(&cfg, &[]), &["sources.charges is missing"]);
}

#[test]
fn non_neutral_input_warns_and_succeeds() {
    let dir = Dir::new("neutral");
    write_inputs(&dir, 200);
    npy::write(&dir.path("q.npy"), &[200], &vec![1.0; 200]).unwrap();
    let cfg = dir.file(
        "run.toml",
        "[problem]\nkernel = \"laplace\"\nbox = [1.0, 1.2, 0.9]\ntolerance = 1e-6\n[sources]\npositions = \"src.npy\"\ncharges = \"q.npy\"\n",
    );
    let out = run(&cfg, &["--check", "50"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("warning: sources.charges: net charge"));
}

#[test]
fn f64_coordinates_just_below_the_box_edge_stay_inside_in_f32() {
    let dir = Dir::new("narrow");
    let mut pos = write_inputs(&dir, 100);
    pos[4] = [1.0 - 1e-12, 1.2 - 1e-12, 0.9 - 1e-13]; // each rounds to L in f32
    npy::write(&dir.path("src.npy"), &[100, 3], &pos.iter().flatten().cloned().collect::<Vec<_>>()).unwrap();
    let cfg = dir.file("run.toml", &FILES.replace("tolerance = 1e-7", "tolerance = 1e-5\nprecision = \"f32\""));
    let out = run(&cfg, &["--check", "100"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
