//! `parki-dist run` for `equation = "poisson"`: generated fields against their exact solutions,
//! a right-hand side read from a file and the solution written to one (equal at 1 to 4 ranks),
//! the rotational mode, and errors that name the field and the value.

use std::path::Path;
use std::process::{Command, Output};

use parki_app::npy;
use parki_poisson::fields::Manufactured;
use parki_poisson::Bc;

use crate::common::{assert_error, succeeded, Dir};

fn run(config: &Path, ranks: usize) -> Output {
    if ranks == 0 {
        return Command::new(env!("CARGO_BIN_EXE_parki-dist")).arg("run").arg(config).arg("--quiet").output().unwrap();
    }
    Command::new("timeout")
        .args(["600", "mpirun", "-n", &ranks.to_string(), "--oversubscribe"])
        .arg(env!("CARGO_BIN_EXE_parki-dist"))
        .arg("run")
        .arg(config)
        .arg("--quiet")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .output()
        .expect("mpirun must be installed (openmpi-bin); see README")
}

fn report(dir: &Dir) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.path("report.json")).unwrap()).unwrap()
}

#[test]
fn generated_fields_meet_their_exact_solutions() {
    let dir = Dir::new("poisson-generated");
    // (bc, green, field, grid, bound on the relative max error)
    let cases = [
        (r#"[["unb", "unb"], ["even", "odd"], ["per", "per"]]"#, "hej6", "scalar", "[32, 32, 32]", 1e-2),
        (r#"[["unb", "unb"], ["unb", "unb"], ["unb", "unb"]]"#, "chat2", "vector", "[32, 32, 32]", 1e-2),
        (r#"[["per", "per"], ["per", "per"], ["per", "per"]]"#, "chat2", "scalar", "[16, 16, 16]", 1e-12),
        (r#"[["per", "per"], ["unb", "unb"], ["unb", "unb"]]"#, "hej4", "curl", "[64, 64, 64]", 2e-2),
    ];
    for (bc, green, field, grid, bound) in cases {
        let cfg = dir.file(
            "run.toml",
            &format!(
                "[problem]\nequation = \"poisson\"\nbox = [1.0, 1.0, 1.0]\ngrid = {grid}\nbc = {bc}\ngreen = \
                 \"{green}\"\nfield = \"{field}\"\n[input]\ngenerate = {{ field = \"blob\" }}\n[output]\nreport = \
                 \"report.json\"\n"
            ),
        );
        succeeded(&run(&cfg, 0));
        let r = report(&dir);
        let e = r["error"]["relative_max"].as_f64().unwrap();
        println!("{bc} {green} {field}: relative max error {e:.2e}");
        assert!(e < bound, "{bc} {green} {field}: {e:.3e} >= {bound:e}");
        assert!(r["timings_seconds"]["forward"]["max"].as_f64().unwrap() > 0.0);
        assert!(r["memory"]["bytes_per_unknown"].as_f64().unwrap() > 8.0);
    }
}

/// A free-space box far from 1 (the solver computes in a power-of-two unit of length): the
/// same error against the exact solution as the unit box, on one process and on 3 ranks.
/// Before, boxes of `1e-150` and `1e150` returned NaN with exit code 0 and a report of
/// "relative max 0".
#[test]
fn free_space_boxes_far_from_one_meet_their_exact_solutions() {
    let dir = Dir::new("poisson-units");
    let mut errors = Vec::new();
    for b in ["1.0", "1e-150", "1e150"] {
        let cfg = dir.file(
            "run.toml",
            &format!(
                "[problem]\nequation = \"poisson\"\nbox = [{b}, {b}, {b}]\ngrid = [24, 24, 24]\nbc = [[\"unb\", \
                 \"unb\"], [\"unb\", \"unb\"], [\"unb\", \"unb\"]]\ngreen = \"chat2\"\nfield = \"vector\"\n[input]\n\
                 generate = {{ field = \"blob\" }}\n[output]\nreport = \"report.json\"\n"
            ),
        );
        // one process, and the box of 1e-150 over 3 ranks (pencils)
        for ranks in if b == "1e-150" { vec![0, 3] } else { vec![0] } {
            succeeded(&run(&cfg, ranks));
            let r = report(&dir);
            let e = [r["error"]["relative_l2"].as_f64(), r["error"]["relative_max"].as_f64()];
            println!("box {b}, {ranks} ranks: {e:?}");
            errors.push(e.map(|v| v.expect("a finite error")));
        }
    }
    for e in &errors[1..] {
        for (a, b) in e.iter().zip(&errors[0]) {
            assert!((a - b).abs() <= 1e-12 * b, "{errors:?}");
        }
    }
}

#[test]
fn file_input_and_output_are_equal_at_one_to_four_ranks() {
    let dir = Dir::new("poisson-files");
    let n = [12, 10, 9];
    let l = [1.2, 1.0, 0.9];
    let bc = [[Bc::Unbounded, Bc::Unbounded], [Bc::Even, Bc::Unbounded], [Bc::Periodic, Bc::Periodic]];
    let m = Manufactured::new(l, bc);
    let (mut f, mut exact) = (Vec::new(), Vec::new());
    for i in 0..n[0] {
        for j in 0..n[1] {
            for k in 0..n[2] {
                let x = [i, j, k].map(|q| q as f64 + 0.5);
                let s = m.at([x[0] * l[0] / 12.0, x[1] * l[1] / 10.0, x[2] * l[2] / 9.0]);
                f.push(s.laplacian);
                exact.push(s.value);
            }
        }
    }
    npy::write(&dir.path("f.npy"), &n, &f).unwrap();
    let mut first: Option<Vec<f64>> = None;
    for ranks in 1..=4 {
        let layout = if ranks == 4 { "pencil" } else { "slab" };
        let cfg = dir.file(
            "run.toml",
            &format!(
                "[problem]\nequation = \"poisson\"\nbox = [1.2, 1.0, 0.9]\ngrid = [12, 10, 9]\nbc = [[\"unb\", \
                 \"unb\"], [\"even\", \"unb\"], [\"per\", \"per\"]]\n[input]\nrhs = \"f.npy\"\n[output]\nsolution = \
                 \"phi.npy\"\n[parallel]\ndecomposition = \"{layout}\"\n"
            ),
        );
        succeeded(&run(&cfg, ranks));
        let phi = npy::read(&dir.path("phi.npy"), "phi").unwrap();
        assert_eq!(phi.shape, vec![12, 10, 9]);
        let err = phi.data.iter().zip(&exact).fold(0.0f64, |e, (a, b)| e.max((a - b).abs()));
        let scale = exact.iter().fold(0.0f64, |e, b| e.max(b.abs()));
        // CHAT2 at 10 cells: second order, a few percent
        assert!(err / scale < 0.1, "{ranks} ranks: {:.3e}", err / scale);
        match &first {
            None => first = Some(phi.data),
            Some(one) => {
                let d = one.iter().zip(&phi.data).fold(0.0f64, |e, (a, b)| e.max((a - b).abs()));
                println!("{ranks} ranks ({layout}) against 1: {d:.2e}");
                assert!(d <= 1e-14 * scale, "{ranks} ranks differ from 1 by {d:.3e}");
            }
        }
    }
}

#[test]
fn vortex_example_runs_with_per_component_conditions() {
    let out = run(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/poisson/vortex.toml")), 2);
    let text = succeeded(&out);
    assert!(text.contains("error against the exact solution"), "{text}");
    let _ = std::fs::remove_file(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/poisson/u.npy"));
}

#[test]
fn bad_inputs_are_errors_naming_the_field_and_value() {
    let dir = Dir::new("poisson-errors");
    npy::write(&dir.path("small.npy"), &[4, 4, 4], &[0.0; 64]).unwrap();
    let base = |problem: &str, input: &str| {
        format!("[problem]\nequation = \"poisson\"\nbox = [1.0, 1.0, 1.0]\n{problem}\n[input]\n{input}\n")
    };
    let gen = "generate = { field = \"blob\" }";
    let grid = "grid = [8, 8, 8]";
    let cases: Vec<(String, usize, Vec<&str>)> = vec![
        (base(&format!("{grid}\nbc = [[\"per\", \"even\"], [\"per\", \"per\"], [\"per\", \"per\"]]"), gen), 0, vec![
            "problem.bc[0]",
            "periodic on both sides",
        ]),
        (base(&format!("{grid}\nbc = [[\"per\", \"per\"], [\"wall\", \"per\"], [\"per\", \"per\"]]"), gen), 0, vec![
            "problem.bc[1][0]",
            "wall",
        ]),
        (
            base(
                "grid = [8, 8, 16]\nbc = [[\"unb\", \"unb\"], [\"unb\", \"unb\"], [\"unb\", \"unb\"]]\ngreen = \"hej4\"",
                gen,
            ),
            0,
            vec!["problem.green", "isotropic"],
        ),
        (base(&format!("{grid}\nbc = [[\"per\", \"per\"], [\"per\", \"per\"], [\"per\", \"per\"]]"), "rhs = \"small.npy\""), 0, vec![
            "input.rhs",
            "[8, 8, 8]",
            "[4, 4, 4]",
        ]),
        (base(&format!("{grid}\nbc = [[\"per\", \"per\"], [\"per\", \"per\"], [\"per\", \"per\"]]"), "rhs = \"missing.npy\""), 0, vec![
            "missing.npy",
        ]),
        (base(&format!("{grid}\nbc = [[\"per\", \"per\"], [\"per\", \"per\"], [\"per\", \"per\"]]\ncentering = \"nodes\""), gen), 0, vec![
            "problem.centering",
            "nodes",
        ]),
        (base(&format!("{grid}\nbc = [[\"per\", \"per\"], [\"per\", \"per\"], [\"per\", \"per\"]]\ncentering = \"node\"\nfield = \"curl\""), gen), 0, vec![
            "problem.centering",
            "curl",
        ]),
        (base(&format!("{grid}\nbc = [[\"per\", \"per\"], [\"per\", \"per\"], [\"per\", \"per\"]]\ncentering = \"node\""), "rhs = \"small.npy\""), 0, vec![
            "input.rhs",
            "[8, 8, 8]",
            "nodes",
        ]),
        (base(&format!("{grid}\nbc = [[\"per\", \"per\"], [\"even\", \"even\"], [\"unb\", \"unb\"]]\nfield = \"curl\""), gen), 0, vec![
            "problem.bc",
            "vorticity",
        ]),
        (base(&format!("{grid}\nbc = [[\"per\", \"per\"], [\"per\", \"per\"], [\"per\", \"per\"]]\nfield = \"tensor\""), gen), 0, vec![
            "problem.field",
            "tensor",
        ]),
        (base("grid = [2, 2, 2]\nbc = [[\"per\", \"per\"], [\"per\", \"per\"], [\"per\", \"per\"]]", gen), 3, vec![
            "parallel",
        ]),
        (base("grid = [8, 0, 8]\nbc = [[\"per\", \"per\"], [\"per\", \"per\"], [\"per\", \"per\"]]", gen), 2, vec![
            "problem.grid[1]",
        ]),
    ];
    for (text, ranks, needles) in cases {
        let cfg = dir.file("run.toml", &text);
        let out = run(&cfg, ranks);
        assert_error(&out, &needles);
        if ranks > 1 {
            // printed once, by rank 0
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(err.matches("error").count(), 1, "{err}");
        }
    }
}

#[test]
fn a_non_zero_mean_is_removed_with_a_warning() {
    let dir = Dir::new("poisson-mean");
    npy::write(&dir.path("one.npy"), &[4, 4, 4], &[1.0; 64]).unwrap();
    let cfg = dir.file(
        "run.toml",
        "[problem]\nequation = \"poisson\"\nbox = [1.0, 1.0, 1.0]\ngrid = [4, 4, 4]\nbc = [[\"per\", \"per\"], \
         [\"even\", \"even\"], [\"per\", \"per\"]]\n[input]\nrhs = \"one.npy\"\n[output]\nsolution = \"phi.npy\"\n",
    );
    let text = succeeded(&run(&cfg, 0));
    assert!(text.contains("warning") && text.contains("mean 1.0"), "{text}");
    let phi = npy::read(&dir.path("phi.npy"), "phi").unwrap();
    assert!(phi.data.iter().all(|v| v.abs() < 1e-14), "{:?}", &phi.data[..4]);
}

#[test]
fn node_centred_data_through_files_and_generators() {
    // (N + 1) nodes on the non-periodic axes, N on the periodic one, zero on the odd side's
    // nodes; the file solution equal at 1 to 3 ranks and close to the exact one
    let dir = Dir::new("poisson-node");
    // 12 x 10 x 9 cells: 13 x 11 nodes and 9 periodic ones
    let e = [13, 11, 9];
    let l = [1.2, 1.0, 0.9];
    let bc = [[Bc::Unbounded, Bc::Unbounded], [Bc::Even, Bc::Odd], [Bc::Periodic, Bc::Periodic]];
    let m = Manufactured::new(l, bc);
    let (mut f, mut exact) = (Vec::new(), Vec::new());
    for i in 0..e[0] {
        for j in 0..e[1] {
            for k in 0..e[2] {
                let s = m.at([i as f64 * l[0] / 12.0, j as f64 * l[1] / 10.0, k as f64 * l[2] / 9.0]);
                f.push(s.laplacian);
                exact.push(s.value);
            }
        }
    }
    npy::write(&dir.path("f.npy"), &e, &f).unwrap();
    let mut first: Option<Vec<f64>> = None;
    for ranks in 1..=3 {
        let cfg = dir.file(
            "run.toml",
            "[problem]\nequation = \"poisson\"\nbox = [1.2, 1.0, 0.9]\ngrid = [12, 10, 9]\ncentering = \"node\"\nbc = \
             [[\"unb\", \"unb\"], [\"even\", \"odd\"], [\"per\", \"per\"]]\n[input]\nrhs = \"f.npy\"\n[output]\nsolution = \
             \"phi.npy\"\nreport = \"report.json\"\n",
        );
        succeeded(&run(&cfg, ranks));
        let out = npy::read(&dir.path("phi.npy"), "phi").unwrap();
        assert_eq!(out.shape, e.to_vec());
        let phi = out.data;
        assert_eq!(report(&dir)["centering"], "node");
        // the odd side's nodes (y = L) are zero
        for i in 0..e[0] {
            for k in 0..e[2] {
                assert_eq!(phi[(i * e[1] + 10) * e[2] + k], 0.0);
            }
        }
        let scale = exact.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        let err = phi.iter().zip(&exact).fold(0.0f64, |a, (p, x)| a.max((p - x).abs())) / scale;
        println!("node-centred file at {ranks} ranks: relative max error {err:.2e}");
        // CHAT2 at 9 to 12 cells: second order, about 1e-1 (8.6e-2 at 12^3 on the unit cube)
        assert!(err < 0.2, "{err:.3e}");
        match &first {
            None => first = Some(phi),
            Some(p) => assert_eq!(p, &phi, "{ranks} ranks differ from one"),
        }
    }
    // generated: fully spectral node data are exact
    let cfg = dir.file(
        "run.toml",
        "[problem]\nequation = \"poisson\"\nbox = [1.0, 1.0, 1.0]\ngrid = [16, 16, 16]\ncentering = \"node\"\nbc = \
         [[\"even\", \"even\"], [\"odd\", \"odd\"], [\"even\", \"odd\"]]\nfield = \"vector\"\n[input]\ngenerate = \
         { field = \"blob\" }\n[output]\nreport = \"report.json\"\n",
    );
    succeeded(&run(&cfg, 2));
    let r = report(&dir);
    let err = r["error"]["relative_max"].as_f64().unwrap();
    println!("node-centred generated vector field: {err:.2e}");
    assert!(err < 1e-12, "{err:.3e}");
}
