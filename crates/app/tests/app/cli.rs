//! The `parki-dist` command end to end: help, a run with report and output, file inputs, and
//! every bad input as a clear error with a non-zero exit and no panic.

use std::process::{Command, Output};

use parki_app::npy;
use parki_core::{Kernel, Sources};
use parki_reference::generate::{self, Distribution, Rng};
use parki_reference::ClassicalEwald;

use crate::common::{run_quiet as run, Dir};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_parki-dist"))
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

/// Relative RMS difference of `a` against `b`.
fn rel_rms(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den).sqrt()
}

#[test]
fn f32_wrap_of_particles_far_outside_keeps_the_accuracy_and_the_check_sees_it() {
    // Stokeslet sources and targets in the box, then moved by whole box lengths: 100 along
    // x (sources) and 1e6 along z (targets), so that wrapping in f64 returns the same points.
    // The potential must match the classical sum of the points in the box to the tolerance,
    // and the check must report that error (the old code rounded to f32 before wrapping and
    // checked against its own rounded positions: 7e-5 and 22 % error, a check of 6e-6).
    let dir = Dir::new("farwrap");
    let l = [1.0, 1.2, 0.9];
    let domain = parki_core::Domain::triply_periodic(l).unwrap();
    let mut rng = Rng::new(17);
    let n = 400;
    let pos = generate::positions(&domain, Distribution::Uniform, n, &mut rng);
    let f = generate::neutral_vectors(n, &mut rng);
    let trg = generate::positions(&domain, Distribution::Uniform, 200, &mut rng);
    let far_src: Vec<[f64; 3]> = pos.iter().map(|p| [p[0] + 100.0 * l[0], p[1] - 3.0 * l[1], p[2]]).collect();
    let far_trg: Vec<[f64; 3]> = trg.iter().map(|p| [p[0], p[1], p[2] - 1e6 * l[2]]).collect();
    let flat = |v: &[[f64; 3]]| v.iter().flatten().cloned().collect::<Vec<f64>>();
    npy::write(&dir.path("src.npy"), &[n, 3], &flat(&far_src)).unwrap();
    npy::write(&dir.path("trg.npy"), &[200, 3], &flat(&far_trg)).unwrap();
    npy::write(&dir.path("f.npy"), &[n, 3], &flat(&f)).unwrap();
    let cfg = dir.file(
        "run.toml",
        "[problem]\nkernel = \"stokeslet\"\nbox = [1.0, 1.2, 0.9]\ntolerance = 1e-5\nprecision = \"f32\"\nwrap = true\n\
         [sources]\npositions = \"src.npy\"\nforces = \"f.npy\"\n[targets]\npositions = \"trg.npy\"\n\
         [output]\npotential = \"u.npy\"\n",
    );
    let out = run(&cfg, &["--check", "200", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let u = npy::read(&dir.path("u.npy"), "u").unwrap().data;
    let reference =
        ClassicalEwald::new(domain, n, 200).evaluate(Kernel::Stokeslet, &Sources::stokeslet(&pos, &f), &trg);
    let error = rel_rms(&u, &reference);
    let checked = report["check"]["relative_rms_error"].as_f64().unwrap();
    println!("f32, wrapped from 100 and 1e6 box lengths: error {error:.3e}, check {checked:.3e}");
    assert!(error <= 1e-5, "error {error:.3e} against the points in the box");
    assert!((checked - error).abs() <= 0.05 * error, "check {checked:.3e} does not measure the error {error:.3e}");
}

#[test]
fn box_and_periodic_need_exactly_three_entries() {
    let dir = Dir::new("three");
    write_inputs(&dir, 40);
    let cases: [(&str, &str, &[&str]); 4] = [
        ("box = [1.0, 1.2, 0.9]", "box = [1.0, 1.2, 0.9, 4.0]", &["problem.box", "3 entries", "4 entries"]),
        ("box = [1.0, 1.2, 0.9]", "box = [1.0, 1.2]", &["problem.box", "3 entries", "2 entries"]),
        (
            "box = [1.0, 1.2, 0.9]",
            "box = [1.0, 1.2, 0.9]\nperiodic = [true, true, true, false]",
            &["problem.periodic", "4 entries"],
        ),
        ("box = [1.0, 1.2, 0.9]", "box = [1.0, 1.2, 0.9]\nperiodic = [true, true]", &["problem.periodic", "2 entries"]),
    ];
    for (from, to, needles) in cases {
        let cfg = dir.file("run.toml", &FILES.replace(from, to));
        assert_error(&run(&cfg, &[]), needles);
    }
}

#[test]
fn configuration_words_say_what_is_allowed() {
    let dir = Dir::new("words");
    write_inputs(&dir, 40);
    let cases: [(&str, &str, &[&str]); 7] = [
        (
            "[output]",
            "[parallel]\ngrid = [1, 3, 7]\n[output]",
            &["parallel.grid = [1, 3, 7]", "\"auto\" or [P_y, P_z]"],
        ),
        ("[output]", "[parallel]\ngrid = \"fast\"\n[output]", &["parallel.grid = \"fast\"", "\"auto\" or [P_y, P_z]"]),
        ("[output]", "[parallel]\ngrid = [0, 1]\n[output]", &["parallel.grid = [0, 1]", "positive integers"]),
        ("[output]", "[ewald]\ng2p = \"fast\"\n[output]", &["ewald.g2p = \"fast\"", "\"sorted\" or \"base\""]),
        ("[output]", "[ewald]\nfft_plan = \"patient\"\n[output]", &["ewald.fft_plan", parki_fft3d::PlanRigor::NAMES]),
        (
            "[output]",
            "[ewald]\nfft_lines = \"mkl\"\n[output]",
            &["ewald.fft_lines = \"mkl\"", parki_fft3d::LineEngine::NAMES],
        ),
        ("[output]", "[run]\nrepeat = 0\n[output]", &["run.repeat = 0", "at least 1"]),
    ];
    for (from, to, needles) in cases {
        let cfg = dir.file("run.toml", &FILES.replace(from, to));
        assert_error(&run(&cfg, &[]), needles);
    }
    let cfg = dir.file("run.toml", FILES);
    assert_error(&run(&cfg, &["--repeat", "0"]), &["--repeat = 0", "at least 1"]);
}

#[test]
fn variant_names_parse_themselves() {
    use parki_farfield::{G2pVariant, P2gVariant};
    use parki_fft3d::PlanRigor;
    for v in [P2gVariant::Blocked, P2gVariant::Scatter] {
        assert_eq!(P2gVariant::parse(v.name()), Some(v));
    }
    for v in [G2pVariant::TargetSorted, G2pVariant::Base] {
        assert_eq!(G2pVariant::parse(v.name()), Some(v));
    }
    for v in [PlanRigor::Estimate, PlanRigor::MeasureLines, PlanRigor::Measure] {
        assert_eq!(PlanRigor::parse(v.name()), Some(v));
    }
    assert_eq!((P2gVariant::parse("fast"), G2pVariant::parse(""), PlanRigor::parse("Measure")), (None, None, None));
}

#[test]
fn a_run_without_output_and_unused_strengths_warn() {
    let dir = Dir::new("warn");
    write_inputs(&dir, 100);
    let cfg = dir.file(
        "run.toml",
        "[problem]\nkernel = \"laplace\"\nbox = [1.0, 1.2, 0.9]\ntolerance = 1e-6\n\
         [sources]\npositions = \"src.npy\"\ncharges = \"q.npy\"\nforces = \"f.npy\"\nnormals = \"nope.npy\"\n",
    );
    let out = run(&cfg, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    for needle in ["warning: run.toml has no [output]", "sources.forces = \"f.npy\" is ignored", "sources.normals"] {
        assert!(err.contains(needle), "stderr lacks {needle:?}: {err}");
    }
    // --json delivers the report: no warning about outputs
    let out = run(&cfg, &["--json"]);
    assert!(out.status.success() && !String::from_utf8_lossy(&out.stderr).contains("no [output]"));
    // strength files next to a generator are an error, not ignored
    let cfg = dir.file(
        "run.toml",
        "[problem]\nkernel = \"stokeslet\"\nbox = [1.0, 1.2, 0.9]\ntolerance = 1e-6\n\
         [sources]\ngenerate = { distribution = \"uniform\", count = 100 }\nforces = \"f.npy\"\n",
    );
    assert_error(&run(&cfg, &[]), &["sources.forces", "f.npy", "sources.generate"]);
}

#[test]
fn values_beyond_f32_are_rescaled_and_far_positions_named() {
    let dir = Dir::new("overflow");
    write_inputs(&dir, 60);
    let mut f = npy::read(&dir.path("f.npy"), "f").unwrap().data;
    f[3 * 7 + 1] = 1e39;
    npy::write(&dir.path("big.npy"), &[60, 3], &f).unwrap();
    let f32_cfg = FILES.replace("tolerance = 1e-7", "tolerance = 1e-5\nprecision = \"f32\"");
    // a force beyond f32's range: the run computes in units of a power of two near it
    // (crate::units), in f32 as in f64, and both agree to the f32 tolerance
    let mut u = Vec::new();
    for text in [&f32_cfg, &FILES.to_string()] {
        let cfg = dir.file("run.toml", &text.replace("f.npy", "big.npy"));
        let out = run(&cfg, &[]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        u.push(npy::read(&dir.path("u.npy"), "u").unwrap().data);
    }
    let norm = u[1].iter().map(|v| v * v).sum::<f64>().sqrt();
    let diff = u[0].iter().zip(&u[1]).map(|(a, b)| (a - b) * (a - b)).sum::<f64>().sqrt();
    assert!(norm > 1e30 && diff < 1e-5 * norm, "f32 against f64: {diff:e} of {norm:e}");
    // a position that overflows f32 lies outside the box
    let mut p = npy::read(&dir.path("src.npy"), "p").unwrap().data;
    p[3 * 5 + 2] = -2e39;
    npy::write(&dir.path("far.npy"), &[60, 3], &p).unwrap();
    let cfg = dir.file("run.toml", &f32_cfg.replace("src.npy", "far.npy"));
    assert_error(&run(&cfg, &[]), &["sources.positions[5] lies outside the box", "coordinate 2"]);
    // ... and wrapping cannot place it: f64 does not resolve the box at that distance
    let cfg =
        dir.file("run.toml", &f32_cfg.replace("src.npy", "far.npy").replace("[problem]", "[problem]\nwrap = true"));
    assert_error(&run(&cfg, &[]), &["sources.positions[5][2]", "too far"]);
}

#[test]
fn huge_counts_are_errors_not_aborts() {
    let dir = Dir::new("huge");
    write_inputs(&dir, 40);
    // a .npy header claiming 1e11 rows of a file of 40
    let mut h = "{'descr': '<f8', 'fortran_order': False, 'shape': (100000000000, 3), }".to_string();
    h.push_str(&" ".repeat(117 - h.len()));
    h.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(h.len() as u16).to_le_bytes());
    bytes.extend_from_slice(h.as_bytes());
    bytes.extend_from_slice(&[0u8; 40 * 24]);
    std::fs::write(dir.path("huge.npy"), &bytes).unwrap();
    let cfg = dir.file(
        "run.toml",
        "[problem]\nkernel = \"laplace\"\nbox = [1.0, 1.2, 0.9]\ntolerance = 1e-6\n\
         [sources]\npositions = \"huge.npy\"\n",
    );
    assert_error(&run(&cfg, &[]), &["sources.positions", "huge.npy", "truncated"]);
    // a shape whose size overflows an address
    let big = "{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 3), }";
    let h2 = format!("{big}{}\n", " ".repeat(117 - big.len()));
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(h2.len() as u16).to_le_bytes());
    bytes.extend_from_slice(h2.as_bytes());
    std::fs::write(dir.path("huge.npy"), &bytes).unwrap();
    assert_error(&run(&cfg, &[]), &["sources.positions", "4611686018427387904"]);
    // a generator asked for 1e10 particles
    let cfg = dir.file(
        "run.toml",
        "[problem]\nkernel = \"stokeslet\"\nbox = [1.0, 1.2, 0.9]\ntolerance = 1e-6\n\
         [sources]\ngenerate = { distribution = \"uniform\", count = 10000000000 }\n",
    );
    assert_error(&run(&cfg, &[]), &["sources.generate.count = 10000000000", "GB"]);
}

#[test]
fn check_on_an_elongated_box_is_accurate_and_reports_progress() {
    let dir = Dir::new("needle");
    let cfg = dir.file(
        "run.toml",
        "[problem]\nkernel = \"laplace\"\nbox = [1.0, 1.0, 400.0]\ntolerance = 1e-6\n\
         [sources]\ngenerate = { distribution = \"uniform\", count = 2000, seed = 3 }\n[run]\ncheck = 5\n",
    );
    let out = bin().arg("run").arg(&cfg).args(["--threads", "2", "--json"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("check: classical Ewald sum with xi"), "no check progress: {err}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let e = report["check"]["relative_rms_error"].as_f64().unwrap();
    println!("box 1 x 1 x 400, 2000 sources, 5 targets checked: {e:.3e} in {} s", report["check"]["seconds"]);
    assert!(e <= 1e-6, "{e:e}");
}

/// `[output] field`: the Laplace field E = -grad u written as (N, 3) next to the potential
/// (N,), checked by `--check` against the reference's field, equal to the classical sum's
/// field to the tolerance, with both far-field methods; and its errors.
#[test]
fn laplace_field_is_written_checked_and_accurate() {
    let dir = Dir::new("field");
    let pos = write_inputs(&dir, 600);
    let q = npy::read(&dir.path("q.npy"), "q").unwrap().data;
    let domain = parki_core::Domain::triply_periodic([1.0, 1.2, 0.9]).unwrap();
    let out = parki_core::Output::with_field(Kernel::Laplace).unwrap();
    let reference = ClassicalEwald::new(domain, 600, 600).evaluate(out, &Sources::laplace(&pos, &q), &pos);
    let want: Vec<f64> = reference.chunks(4).flat_map(|r| r[1..].to_vec()).collect();
    for method in ["window", "spectral"] {
        let cfg = dir.file(
            "run.toml",
            &format!(
                "[problem]\nkernel = \"laplace\"\nbox = [1.0, 1.2, 0.9]\ntolerance = 1e-8\n[sources]\n\
                 positions = \"src.npy\"\ncharges = \"q.npy\"\n[output]\npotential = \"u.npy\"\nfield = \"e.npy\"\n\
                 report = \"report.json\"\n[ewald]\nfield_method = \"{method}\"\n"
            ),
        );
        let run_out = run(&cfg, &["--check", "100"]);
        assert!(run_out.status.success(), "{}", String::from_utf8_lossy(&run_out.stderr));
        assert!(String::from_utf8_lossy(&run_out.stdout).contains("check: field relative RMS error"));
        assert_eq!(npy::read(&dir.path("u.npy"), "u").unwrap().shape, vec![600]);
        let e = npy::read(&dir.path("e.npy"), "e").unwrap();
        assert_eq!(e.shape, vec![600, 3]);
        let err = rel_rms(&e.data, &want);
        assert!((1e-10..=1e-8).contains(&err), "{method}: field error {err:e}");
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path("report.json")).unwrap()).unwrap();
        assert_eq!(report["field"], method);
        let checked = report["check"]["field"]["relative_rms_error"].as_f64().unwrap();
        assert!(checked <= 1e-8, "{method}: checked field error {checked:e}");
    }
    // the field of another kernel, an unknown method, one file for two outputs
    let bad = |kernel: &str, extra: &str| {
        format!(
            "[problem]\nkernel = \"{kernel}\"\nbox = [1.0, 1.2, 0.9]\ntolerance = 1e-6\n[sources]\n\
             generate = {{ distribution = \"uniform\", count = 200 }}\n[output]\nfield = \"e.npy\"\n{extra}"
        )
    };
    let cases = [
        (bad("stokeslet", ""), vec!["output.field", "stokeslet", "laplace"]),
        (bad("laplace", "[ewald]\nfield_method = \"ik\"\n"), vec!["ewald.field_method", "\"ik\"", "spectral"]),
        (bad("laplace", "potential = \"e.npy\"\n"), vec!["output.field", "output.potential", "same file"]),
    ];
    for (text, needles) in cases {
        let cfg = dir.file("bad.toml", &text);
        assert_error(&run(&cfg, &[]), &needles);
    }
    // "auto" computes the field where it runs (the CUDA backend has the field too): on the CPU
    // in a binary without the CUDA backend
    let cfg = dir.file("auto.toml", &bad("laplace", "report = \"auto.json\"\n[run]\nbackend = \"auto\"\n"));
    let out = bin().arg("run").arg(&cfg).args(["--threads", "2"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path("auto.json")).unwrap()).unwrap();
    if !cfg!(feature = "cuda") {
        assert_eq!(report["backend"], "cpu");
    }
    assert_eq!(report["field"], "window");
}
