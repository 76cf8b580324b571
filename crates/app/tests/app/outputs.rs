//! The outputs of `parki-dist run`: an output path that names an input or the other output is
//! refused before anything is computed, with the input intact; output directories are checked
//! first; outputs appear only when complete, and a failed run leaves neither a partial nor a
//! stale output (nor a temporary file) behind.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use parki_app::npy;
use parki_reference::generate::{self, Distribution, Rng};

use crate::common::Dir;

fn run(config: &Path) -> Output {
    // progress lines on: the tests check that nothing was planned before a refusal
    Command::new(env!("CARGO_BIN_EXE_parki-dist")).arg("run").arg(config).args(["--threads", "2"]).output().unwrap()
}

fn assert_refused(out: &Output, needles: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "exit code; stderr: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    assert!(!err.contains("planned in"), "refused only after planning: {err}");
    for n in needles {
        assert!(err.contains(n), "stderr lacks {n:?}: {err}");
    }
}

/// Every file of the folder (not the hidden ones) with its bytes.
fn snapshot(dir: &Dir) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(&dir.0)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().map(|t| t.is_file()).unwrap_or(false))
        .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
        .collect()
}

/// Names of the temporary files a run may have left.
fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".partial"))
        .collect()
}

fn write_inputs(dir: &Dir, n: usize) {
    let domain = parki_core::Domain::triply_periodic([1.0, 1.2, 0.9]).unwrap();
    let mut rng = Rng::new(5);
    let pos = generate::positions(&domain, Distribution::Uniform, n, &mut rng);
    let flat = |v: &[[f64; 3]]| v.iter().flatten().cloned().collect::<Vec<f64>>();
    npy::write(&dir.path("src.npy"), &[n, 3], &flat(&pos)).unwrap();
    npy::write(&dir.path("trg.npy"), &[n / 2, 3], &flat(&pos[..n / 2])).unwrap();
    npy::write(&dir.path("q.npy"), &[n], &generate::neutral_scalars(n, &mut rng)).unwrap();
    npy::write(&dir.path("f.npy"), &[n, 3], &flat(&generate::neutral_vectors(n, &mut rng))).unwrap();
    npy::write(&dir.path("d.npy"), &[n, 3], &flat(&generate::normal_vectors(n, &mut rng))).unwrap();
    npy::write(&dir.path("n.npy"), &[n, 3], &flat(&generate::normal_vectors(n, &mut rng))).unwrap();
}

/// A Stokes run from the files, with `output` as its [output] table and `targets` as its
/// [targets] table (or none).
fn config(output: &str, targets: &str) -> String {
    format!(
        "[problem]\nkernel = \"stokes\"\nbox = [1.0, 1.2, 0.9]\ntolerance = 1e-6\n\
         [sources]\npositions = \"src.npy\"\nforces = \"f.npy\"\ndipoles = \"d.npy\"\nnormals = \"n.npy\"\n\
         charges = \"q.npy\"\n{targets}[output]\n{output}\n"
    )
}

#[test]
fn outputs_that_name_an_input_are_refused_before_computing() {
    let dir = Dir::new("collide");
    write_inputs(&dir, 200);
    std::fs::create_dir_all(dir.path("sub")).unwrap();
    std::os::unix::fs::symlink(dir.path("src.npy"), dir.path("link.npy")).unwrap();
    let abs = |name: &str| dir.path(name).display().to_string();
    let with_targets = "[targets]\npositions = \"trg.npy\"\n";
    let cases: Vec<(String, &str, Vec<&str>)> = vec![
        ("potential = \"src.npy\"".into(), "", vec!["output.potential and sources.positions"]),
        ("potential = \"./f.npy\"".into(), "", vec!["output.potential and sources.forces"]),
        (format!("report = \"{}\"", abs("d.npy")), "", vec!["output.report and sources.dipoles"]),
        ("potential = \"sub/../n.npy\"".into(), "", vec!["output.potential and sources.normals"]),
        // charges the Stokes kernel does not use are still the user's file
        ("report = \"q.npy\"".into(), "", vec!["output.report and sources.charges"]),
        ("potential = \"trg.npy\"".into(), with_targets, vec!["output.potential and targets.positions"]),
        ("report = \"run.toml\"".into(), "", vec!["output.report and run.toml"]),
        (format!("potential = \"{}\"", abs("run.toml")), "", vec!["output.potential and run.toml"]),
        ("potential = \"link.npy\"".into(), "", vec!["output.potential and sources.positions"]),
        (
            "potential = \"u.npy\"\nreport = \"./u.npy\"".into(),
            "",
            vec!["output.report and output.potential", "each output needs its own file"],
        ),
    ];
    for (output, targets, needles) in cases {
        let cfg = dir.file("run.toml", &config(&output, targets));
        let before = snapshot(&dir);
        let out = run(&cfg);
        assert_refused(&out, &needles);
        assert_eq!(snapshot(&dir), before, "{output}: the folder changed");
        assert!(leftovers(&dir.0).is_empty(), "{output}: temporary files left");
    }
}

#[test]
fn output_directories_are_checked_before_computing() {
    let dir = Dir::new("outdirs");
    write_inputs(&dir, 200);
    std::fs::create_dir_all(dir.path("sub")).unwrap();
    let cases: [(&str, &[&str]); 4] = [
        ("potential = \"missing/u.npy\"", &["missing", "output.potential", "directory"]),
        ("potential = \"u.npy\"\nreport = \"nodir/r.json\"", &["nodir", "output.report"]),
        ("potential = \"u.npy\"\nreport = \"src.npy/r.json\"", &["src.npy", "output.report", "not a directory"]),
        ("potential = \"sub\"", &["sub", "output.potential", "is a directory"]),
    ];
    for (output, needles) in cases {
        let cfg = dir.file("run.toml", &config(output, ""));
        assert_refused(&run(&cfg), needles);
        assert!(!dir.path("u.npy").exists(), "{output}: u.npy written by a refused run");
    }
    // a directory this user cannot write in (root writes anywhere: then not tested)
    let ro = dir.path("ro");
    std::fs::create_dir_all(&ro).unwrap();
    std::fs::set_permissions(&ro, std::os::unix::fs::PermissionsExt::from_mode(0o555)).unwrap();
    if std::fs::write(ro.join("probe"), b"x").is_err() {
        let cfg = dir.file("run.toml", &config("potential = \"ro/u.npy\"", ""));
        assert_refused(&run(&cfg), &["output.potential", "ro"]);
    } else {
        println!("running as a user who writes in read-only directories: read-only case skipped");
        std::fs::remove_file(ro.join("probe")).unwrap();
    }
    std::fs::set_permissions(&ro, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

#[test]
fn a_failed_run_leaves_no_output_and_a_good_one_no_temporary_file() {
    let dir = Dir::new("stale");
    write_inputs(&dir, 300);
    let cfg = dir.file("run.toml", &config("potential = \"u.npy\"\nreport = \"out/report.json\"", ""));
    std::fs::create_dir_all(dir.path("out")).unwrap();
    let out = run(&cfg);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(npy::read(&dir.path("u.npy"), "u").unwrap().shape, vec![300, 3]);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path("out/report.json")).unwrap()).unwrap();
    assert_eq!(report["sources"], 300);
    assert!(leftovers(&dir.0).is_empty() && leftovers(&dir.path("out")).is_empty());
    // the same run with a NaN in the forces fails: the earlier outputs must not survive it
    let mut f = npy::read(&dir.path("f.npy"), "f").unwrap().data;
    f[3 * 250] = f64::NAN;
    npy::write(&dir.path("f.npy"), &[300, 3], &f).unwrap();
    let out = run(&cfg);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("sources.forces[250][0] = NaN"), "{err}");
    assert!(!dir.path("u.npy").exists(), "a stale u.npy survived a failed run");
    assert!(!dir.path("out/report.json").exists(), "a stale report survived a failed run");
    assert!(leftovers(&dir.0).is_empty() && leftovers(&dir.path("out")).is_empty(), "temporary files left");
}
