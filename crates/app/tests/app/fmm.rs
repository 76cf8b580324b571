//! `parki-dist run` for `method = "fmm"`: inputs from files, potential and field written in the
//! targets' order and equal to the library's, the order from the tolerance (Laplace and
//! Stokeslet) with the check against the direct sum, and errors that name the field and the
//! value; on 3 ranks (the distributed FMM) the files equal the one-process library's.

use parki_app::npy;
use parki_core::isa::Isa;
use parki_core::Par;
use parki_fmm::{evaluate, FmmParams};
use parki_reference::generate::Cloud;

use crate::common::{assert_error, mpirun_run as mpirun, read_report as report, run_app as run, succeeded, Dir};

#[test]
fn files_in_potential_and_field_out_as_the_library_computes() {
    let dir = Dir::new("fmm-files");
    let sources = Cloud::Gaussian.points(3, 0..20000);
    let targets = Cloud::Uniform.points(4, 0..5000);
    let q: Vec<f64> = (0..20000).map(|k| ((k * 7919) % 1000) as f64 / 500.0 - 1.0).collect();
    npy::write(&dir.path("x.npy"), &[20000, 3], &sources.concat()).unwrap();
    npy::write(&dir.path("q.npy"), &[20000], &q).unwrap();
    npy::write(&dir.path("t.npy"), &[5000, 3], &targets.concat()).unwrap();
    let cfg = dir.file(
        "run.toml",
        r#"
[problem]
method = "fmm"
kernel = "laplace"
periodic = [false, false, false]

[sources]
positions = "x.npy"
charges = "q.npy"

[targets]
positions = "t.npy"

[fmm]
order = 14
max_leaf = 100

[output]
potential = "u.npy"
field = "e.npy"
report = "report.json"

[run]
check = 100
"#,
    );
    let out =
        evaluate(&sources, &q, Some(&targets), &FmmParams::new(14, Some(100)), Isa::detect(), Par::Rayon(2)).unwrap();
    for ranks in [1, 3] {
        let text = succeeded(&if ranks == 1 { run(&cfg) } else { mpirun(ranks, &cfg) });
        assert!(text.contains("M2L") && text.contains("order 14, leaves of 100 (run.toml)"), "timing table: {text}");
        check_files(&dir, &out, ranks);
    }
}

/// The files of a run against the library's output.
fn check_files(dir: &Dir, out: &parki_fmm::FmmOutput, ranks: usize) {
    let u = npy::read(&dir.path("u.npy"), "u").unwrap();
    let e = npy::read(&dir.path("e.npy"), "e").unwrap();
    assert_eq!((u.shape.clone(), e.shape.clone()), (vec![5000], vec![5000, 3]));
    let du = u.data.iter().zip(&out.potential).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    let de = e
        .data
        .chunks(3)
        .zip(&out.gradient)
        .map(|(a, g)| (0..3).map(|k| (a[k] + g[k]).abs()).fold(0.0, f64::max))
        .fold(0.0, f64::max);
    // relative to the largest value (a target near a source has a field of 1e4 and more)
    let umax = out.potential.iter().map(|v| v.abs()).fold(0.0, f64::max);
    let emax = out.gradient.iter().flatten().map(|v| v.abs()).fold(0.0, f64::max);
    let (du, de) = (du / umax, de / emax);
    assert!(du < 1e-13 && de < 1e-13, "{ranks} ranks: run and library differ by {du:.3e}, {de:.3e} (relative)");
    let r = report(dir);
    assert_eq!(r["ranks"], ranks);
    if ranks > 1 {
        assert!(r["let"]["bytes"].as_u64().unwrap() > 0 && r["let"]["shared_boxes"].as_u64().unwrap() > 0);
    }
    assert_eq!(r["method"], "fmm");
    assert_eq!(r["fmm"]["order"], 14);
    assert_eq!(r["fmm"]["chosen_by"]["max_leaf"], "run.toml");
    assert!(r["error"]["relative_l2"].as_f64().unwrap() < 1e-5);
    assert!(r["interactions"]["m2l"].as_u64().unwrap() > 0 && r["timings_seconds"]["M2L"]["max"].as_f64().is_some());
}

#[test]
fn tolerance_chooses_the_order_and_is_met() {
    let dir = Dir::new("fmm-tolerance");
    for (kernel, tol, precision) in [("laplace", 1e-7, "f64"), ("stokeslet", 1e-5, "f64"), ("laplace", 1e-5, "f32")] {
        let cfg = dir.file(
            "run.toml",
            &format!(
                r#"
[problem]
method = "fmm"
kernel = "{kernel}"
tolerance = {tol:e}
precision = "{precision}"

[sources]
generate = {{ distribution = "plummer", count = 20000, seed = 5 }}

[output]
potential = "u.npy"
report = "report.json"

[run]
check = 200
"#
            ),
        );
        succeeded(&run(&cfg));
        let r = report(&dir);
        assert_eq!(r["fmm"]["chosen_by"]["order"], "tolerance table", "{kernel}");
        assert_eq!(r["fmm"]["precision"], precision);
        assert_eq!(r["fmm"]["chosen_by"]["max_leaf"], "cost model", "{kernel}");
        let e = r["error"]["relative_l2"].as_f64().unwrap();
        assert!(e < tol && e > tol * 1e-5, "{kernel}: error {e:.3e} against the tolerance {tol:e}");
    }
}

#[test]
fn bad_fmm_runs_are_named() {
    let dir = Dir::new("fmm-errors");
    let base = |problem: &str, extra: &str| {
        format!("[problem]\nmethod = \"fmm\"\n{problem}\n[sources]\ngenerate = {{ distribution = \"uniform\", count = 100 }}\n{extra}")
    };
    let cases: [(String, &[&str]); 9] = [
        (base("kernel = \"laplace\"\ntolerance = 1e-8\nprecision = \"f32\"", ""), &["problem.tolerance", "f32"]),
        (base("kernel = \"laplace\"\ntolerance = 1e-5\nprecision = \"f16\"", ""), &["problem.precision", "f16"]),
        (base("kernel = \"yukawa\"\ntolerance = 1e-6", ""), &["problem.kernel", "yukawa", "treecode"]),
        (base("kernel = \"laplace\"\ntolerance = 1e-6\nperiodic = [true, false, false]", ""), &["problem.periodic"]),
        (base("kernel = \"laplace\"\ntolerance = 1e-14", ""), &["problem.tolerance"]),
        (base("kernel = \"laplace\"", ""), &["fmm.order"]),
        (base("kernel = \"laplace\"\ntolerance = 1e-6", "[fmm]\norder = 99"), &["fmm.order", "99"]),
        (base("kernel = \"stokeslet\"\ntolerance = 1e-6", "[output]\nfield = \"e.npy\""), &["output.field", "laplace"]),
        (base("kernel = \"laplace\"\ntolerance = 1e-6", "[run]\nbackend = \"gpu\""), &["run.backend = \"gpu\""]),
    ];
    for (text, needles) in cases {
        let cfg = dir.file("run.toml", &text);
        assert_error(&run(&cfg), needles);
    }
    // on several ranks too, every rank names it and none hangs
    let cfg = dir.file("run.toml", &base("kernel = \"laplace\"\ntolerance = 1e-6", "[fmm]\norder = 99"));
    assert_error(&mpirun(2, &cfg), &["fmm.order", "99"]);
}

/// `[run] backend`: `"cpu"` and `"auto"` run and say so in the report and the table; `"cuda"`
/// without the CUDA backend (or without a driver) is one clear error.
#[test]
fn the_backend_is_chosen_and_reported() {
    let dir = Dir::new("fmm-backend");
    let cfg = |backend: &str| {
        format!(
            "[problem]\nmethod = \"fmm\"\nkernel = \"laplace\"\ntolerance = 1e-6\n\
             [sources]\ngenerate = {{ distribution = \"plummer\", count = 3000 }}\n\
             [output]\nreport = \"report.json\"\n[run]\nbackend = \"{backend}\"\ncheck = 100\n"
        )
    };
    let text = succeeded(&run(&dir.file("run.toml", &cfg("cpu"))));
    assert!(text.contains("backend cpu"), "{text}");
    let r = report(&dir);
    assert_eq!((r["backend"].as_str(), r["backend_requested"].as_str()), (Some("cpu"), Some("cpu")));
    assert!(r["error"]["relative_l2"].as_f64().unwrap() < 1e-6);
    let out = run(&dir.file("run.toml", &cfg("auto")));
    let text = succeeded(&out);
    let r = report(&dir);
    let chose = r["backend"].as_str().unwrap().to_string();
    assert!(text.contains(&format!("backend {chose}")), "{text}");
    assert!(r["error"]["relative_l2"].as_f64().unwrap() < 1e-6);
    if chose == "cpu" {
        let out = run(&dir.file("run.toml", &cfg("cuda")));
        assert_error(&out, &["backend = \"cuda\""]);
    }
}
