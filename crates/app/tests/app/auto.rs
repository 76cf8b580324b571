//! `parki-dist run` with `method = "auto"`: the choice among the FMM, the treecode and the
//! free-space Ewald sum by their cost models, the chosen method's results and the report's
//! reasons; periodic axes go to the Ewald sum; kernels only one method has; bad inputs named.

use parki_app::npy;
use parki_reference::generate::Cloud;

use crate::common::{assert_error, read_report as report, run_app as run, succeeded, Dir};

#[test]
fn auto_prices_every_method_and_runs_the_cheapest() {
    let dir = Dir::new("auto-choice");
    let n = 20000;
    let x: Vec<[f64; 3]> = Cloud::Uniform.points(7, 0..n).iter().map(|p| p.map(|v| 0.5 * (v + 1.0))).collect();
    let q: Vec<f64> = (0..n).map(|k| ((k * 7919) % 1000) as f64 / 500.0 - 1.0).collect();
    npy::write(&dir.path("x.npy"), &[n, 3], &x.concat()).unwrap();
    npy::write(&dir.path("q.npy"), &[n], &q).unwrap();
    let cfg = dir.file(
        "run.toml",
        r#"
[problem]
method = "auto"
kernel = "laplace"
tolerance = 1e-6
box = [1.0, 1.0, 1.0]
periodic = [false, false, false]

[sources]
positions = "x.npy"
charges = "q.npy"

[output]
potential = "u.npy"
report = "report.json"

[run]
check = 100
"#,
    );
    let text = succeeded(&run(&cfg));
    assert!(text.contains("method = \"auto\"") && text.contains("estimated"), "the table says why: {text}");
    let r = report(&dir);
    let chosen = r["auto"]["chosen"].as_str().unwrap().to_string();
    let estimates = r["auto"]["estimates"].as_array().unwrap();
    let names: Vec<&str> = estimates.iter().map(|e| e["method"].as_str().unwrap()).collect();
    assert_eq!(names, ["fmm", "treecode", "ewald"], "{r}");
    let cheapest =
        estimates.iter().min_by(|a, b| a["seconds"].as_f64().unwrap().total_cmp(&b["seconds"].as_f64().unwrap()));
    assert_eq!(cheapest.unwrap()["method"], chosen.as_str());
    assert_eq!(r["method"], chosen.as_str());
    assert_eq!(r["auto"]["pricing"], "cpu", "the default backend: {r}");
    let u = npy::read(&dir.path("u.npy"), "u").unwrap();
    assert_eq!(u.shape, vec![n]);
    // the tree methods report `error.relative_l2`, the Ewald sum `check.relative_rms_error`
    let e = r["error"]["relative_l2"].as_f64().or(r["check"]["relative_rms_error"].as_f64());
    assert!(e.is_some_and(|e| e < 1e-6), "{chosen}: the tolerance holds: {r}");
}

#[test]
fn periodic_axes_go_to_ewald_and_one_method_kernels_to_it() {
    let dir = Dir::new("auto-periodic");
    let cfg = dir.file(
        "run.toml",
        r#"
[problem]
method = "auto"
kernel = "laplace"
tolerance = 1e-5
box = [1.0, 1.0, 1.0]
periodic = [true, true, true]

[sources]
generate = { distribution = "uniform", count = 2000, seed = 3 }

[output]
report = "report.json"
"#,
    );
    succeeded(&run(&cfg));
    let r = report(&dir);
    assert_eq!(r["auto"]["chosen"], "ewald");
    assert!(r["auto"]["reason"].as_str().unwrap().contains("periodic"), "{r}");

    let cfg = dir.file(
        "run.toml",
        r#"
[problem]
method = "auto"
kernel = "yukawa"
kappa = 2.0
tolerance = 1e-5

[sources]
generate = { distribution = "gaussian", count = 3000, seed = 3 }

[output]
report = "report.json"
"#,
    );
    succeeded(&run(&cfg));
    let r = report(&dir);
    assert_eq!(r["auto"]["chosen"], "treecode", "{r}");
    assert_eq!(r["auto"]["excluded"].as_array().unwrap().len(), 2, "the FMM and the Ewald sum lack the kernel: {r}");
}

#[test]
fn bad_auto_runs_are_named() {
    let dir = Dir::new("auto-errors");
    let base = |problem: &str, extra: &str| {
        format!(
            "[problem]\nmethod = \"auto\"\nkernel = \"laplace\"\n{problem}\n[sources]\ngenerate = {{ distribution = \"uniform\", count = 100 }}\n{extra}"
        )
    };
    let cases: [(String, &[&str]); 4] = [
        (base("", ""), &["problem.tolerance", "auto"]),
        (base("tolerance = 1e-6", "[fmm]\norder = 8"), &["fmm", "auto"]),
        (base("tolerance = 1e-6\nkernel2 = 1", ""), &["kernel2"]),
        (base("tolerance = 1e-6", "[run]\nbackend = \"gpu\""), &["run.backend", "gpu"]),
    ];
    for (text, needles) in cases {
        let cfg = dir.file("run.toml", &text);
        assert_error(&run(&cfg), needles);
    }
    // the backend is resolved before the methods are priced: "cuda" in a binary without it
    if !parki_app::backend::HAS_CUDA {
        let cfg = dir.file("run.toml", &base("tolerance = 1e-6", "[run]\nbackend = \"cuda\""));
        assert_error(&run(&cfg), &["--features cuda"]);
    }
}

/// `[run] backend = "auto"` with `method = "auto"`: the methods are priced on the backend it
/// resolves to, and the report says which and why (here, without a device: the CPU).
#[test]
fn auto_prices_on_the_backend_the_run_resolves_to() {
    if parki_app::backend::HAS_CUDA {
        return; // a CUDA binary may find a device here: the CPU pricing is not what it checks
    }
    let dir = Dir::new("auto-backend");
    let cfg = dir.file(
        "run.toml",
        r#"
[problem]
method = "auto"
kernel = "laplace"
tolerance = 1e-4

[sources]
generate = { distribution = "uniform", count = 2000 }

[output]
report = "report.json"

[run]
backend = "auto"
"#,
    );
    succeeded(&run(&cfg));
    let r = report(&dir);
    assert_eq!(r["auto"]["pricing"], "cpu", "{r}");
    let why = r["auto"]["backend_reason"].as_str().unwrap();
    assert!(why.contains("without --features cuda"), "{why}");
}

#[test]
fn a_field_output_leaves_the_methods_that_compute_it() {
    let dir = Dir::new("auto-field");
    let cfg = dir.file(
        "run.toml",
        r#"
[problem]
method = "auto"
kernel = "laplace"
tolerance = 1e-6

[sources]
generate = { distribution = "gaussian", count = 3000, seed = 5 }

[output]
potential = "u.npy"
field = "e.npy"
report = "report.json"
"#,
    );
    succeeded(&run(&cfg));
    let r = report(&dir);
    assert_eq!(r["auto"]["chosen"], "fmm", "{r}");
    let excluded = r["auto"]["excluded"].as_array().unwrap();
    let treecode = excluded.iter().find(|e| e["method"] == "treecode").expect("the treecode is excluded");
    assert!(treecode["why"].as_str().unwrap().contains("field"), "the reason names the key: {r}");
    let e = npy::read(&dir.path("e.npy"), "e").unwrap();
    assert_eq!(e.shape, vec![3000, 3]);
}
