//! Runs in any units (`parki_app::units`): a problem whose lengths are a power of two `2^k`
//! times another's gives, bit for bit, that problem's potential times `2^-k` and field times
//! `2^-2k`, for the spectral Ewald sum (3P and 0P, f64 and f32), the treecode (with a kernel
//! parameter) and the FMM, at `k` far beyond what the solvers could compute in directly
//! (`2^-600` is about `2.4e-181`); and the same over MPI ranks.

use parki_app::npy;
use parki_reference::generate::{self, Distribution, Rng};

use crate::common::{mpirun_run, read_report, run_app, succeeded, Dir};

const N: usize = 400;

/// `2^k` (exact).
fn two_to(k: i32) -> f64 {
    2f64.powi(k)
}

/// Writes the sources: positions in `[0, 1) x [0, 1) x [0, 0.9)` and dipoles, both times `2^k`
/// (their extent near 1, so the tree methods' length unit is `2^k` too).
fn write_inputs(dir: &Dir, k: i32) {
    let domain = parki_core::Domain::triply_periodic([1.0, 1.0, 0.9]).unwrap();
    let mut rng = Rng::new(11);
    let s = two_to(k);
    let pos = generate::positions(&domain, Distribution::Uniform, N, &mut rng);
    let flat = |v: &[[f64; 3]], f: f64| v.iter().flatten().map(|x| x * f).collect::<Vec<f64>>();
    npy::write(&dir.path("x.npy"), &[N, 3], &flat(&pos, s)).unwrap();
    npy::write(&dir.path("q.npy"), &[N], &generate::neutral_scalars(N, &mut rng)).unwrap();
    npy::write(&dir.path("f.npy"), &[N, 3], &flat(&generate::neutral_vectors(N, &mut rng), 1.0)).unwrap();
    npy::write(&dir.path("d.npy"), &[N, 3], &flat(&generate::normal_vectors(N, &mut rng), s)).unwrap();
    npy::write(&dir.path("n.npy"), &[N, 3], &flat(&generate::normal_vectors(N, &mut rng), 1.0)).unwrap();
}

/// Runs `toml` (with `{S}`, `{S12}` and `{S09}` replaced by `2^k`, `1.2 2^k` and `0.9 2^k`
/// where a length goes, `{K}` by `2^-k` where an inverse length goes) on inputs scaled by `2^k`;
/// returns the potential, the field (empty without one) and the report.
fn run_at(name: &str, toml: &str, k: i32, ranks: usize) -> (Vec<f64>, Vec<f64>, serde_json::Value) {
    let dir = Dir::new(&format!("units-{name}-{k}-{ranks}"));
    write_inputs(&dir, k);
    let s = two_to(k);
    let text = toml
        .replace("{S}", &format!("{s:e}"))
        .replace("{S12}", &format!("{:e}", 1.2 * s))
        .replace("{S09}", &format!("{:e}", 0.9 * s))
        .replace("{K}", &format!("{:e}", two_to(-k)));
    let cfg = dir.file("run.toml", &text);
    let out = if ranks == 1 { run_app(&cfg) } else { mpirun_run(ranks, &cfg) };
    succeeded(&out);
    let u = npy::read(&dir.path("u.npy"), "u").unwrap().data;
    let e = if text.contains("e.npy") { npy::read(&dir.path("e.npy"), "e").unwrap().data } else { Vec::new() };
    (u, e, read_report(&dir))
}

/// The runs at `k = 0` and at each of `ks` agree bit for bit after the scaling.
fn equal_in_every_unit(name: &str, toml: &str, ks: &[i32]) -> serde_json::Value {
    let (u0, e0, report0) = run_at(name, toml, 0, 1);
    assert!(u0.iter().all(|v| v.is_finite()) && u0.iter().any(|&v| v != 0.0), "{name}: {:?}", &u0[..4]);
    let mut last = serde_json::Value::Null;
    for &k in ks {
        let (u, e, report) = run_at(name, toml, k, 1);
        let s = two_to(k);
        let bad_u = u.iter().zip(&u0).filter(|(a, b)| **a * s != **b).count();
        let bad_e = e.iter().zip(&e0).filter(|(a, b)| **a * s * s != **b).count();
        assert_eq!((bad_u, bad_e, e.len()), (0, 0, e0.len()), "{name} at 2^{k}: values differ from 2^0's");
        // (the JSON's decimal round trip is not exact to the last bit)
        let length = report["units"]["length"].as_f64().unwrap_or(0.0);
        assert!((length / s - 1.0).abs() < 1e-14, "{name} at 2^{k}: {}", report["units"]);
        // a check's absolute values in the input's units too
        if let Some(e0) = report0["check"]["max_abs_error"].as_f64() {
            let e = report["check"]["max_abs_error"].as_f64().unwrap_or(0.0) * s;
            assert!(e0 > 0.0 && (e / e0 - 1.0).abs() < 1e-14, "{name} at 2^{k}: check {e:e} against {e0:e}");
        }
        last = report;
    }
    last
}

#[test]
fn the_spectral_ewald_sum_in_any_units() {
    let stokes = r#"
[problem]
kernel = "stokes"
box = [{S}, {S12}, {S09}]
tolerance = 1e-8
[sources]
positions = "x.npy"
forces = "f.npy"
dipoles = "d.npy"
normals = "n.npy"
[output]
potential = "u.npy"
report = "report.json"
[run]
check = 20
"#;
    let report = equal_in_every_unit("stokes", stokes, &[-600, 700]);
    // the report's lengths in the input's units (the last run's: 2^700)
    let (rc, side) = (report["parameters"]["rc"].as_f64().unwrap(), report["box"][1].as_f64().unwrap());
    let s = two_to(700);
    assert!(side == 1.2 * s && rc > 0.01 * s && rc < 0.4 * s, "rc {rc:e}, box {side:e}");
    let laplace_0p = r#"
[problem]
kernel = "laplace"
box = [{S}, {S}, {S}]
periodic = [false, false, false]
tolerance = 1e-7
[sources]
positions = "x.npy"
charges = "q.npy"
[output]
potential = "u.npy"
field = "e.npy"
report = "report.json"
"#;
    equal_in_every_unit("laplace0p", laplace_0p, &[-500, 400]);
    let stresslet_f32 = r#"
[problem]
kernel = "stresslet"
box = [{S}, {S}, {S}]
tolerance = 1e-5
precision = "f32"
[sources]
positions = "x.npy"
dipoles = "d.npy"
normals = "n.npy"
[output]
potential = "u.npy"
report = "report.json"
"#;
    // a micrometre in SI units: the stresslet's 1/r^5 overflowed f32 before the rescaling
    equal_in_every_unit("stresslet32", stresslet_f32, &[-20, 30]);
}

#[test]
fn the_tree_methods_in_any_units() {
    let yukawa = r#"
[problem]
method = "treecode"
kernel = "regularized-yukawa"
kappa = {K}
epsilon = {S}
tolerance = 1e-6
periodic = [false, false, false]
[sources]
positions = "x.npy"
charges = "q.npy"
[treecode]
max_leaf = 50
[output]
potential = "u.npy"
report = "report.json"
"#;
    // kappa 2^-k and epsilon 2^k: kappa r and r / epsilon as at k = 0
    equal_in_every_unit("yukawa", yukawa, &[-700, 600]);
    let fmm = r#"
[problem]
method = "fmm"
kernel = "laplace"
tolerance = 1e-8
periodic = [false, false, false]
[sources]
positions = "x.npy"
charges = "q.npy"
[fmm]
max_leaf = 40
[output]
potential = "u.npy"
field = "e.npy"
report = "report.json"
"#;
    // the field (1/r^2) at 2^-700 would be near 2^1400, beyond f64: the user's field itself
    equal_in_every_unit("fmm", fmm, &[-500, 450]);
}

#[test]
fn ranks_agree_in_tiny_units() {
    let toml = r#"
[problem]
kernel = "stokeslet"
box = [{S}, {S}, {S}]
tolerance = 1e-8
[sources]
positions = "x.npy"
forces = "f.npy"
[output]
potential = "u.npy"
report = "report.json"
"#;
    let (u1, _, _) = run_at("mpi", toml, -800, 1);
    let (u3, _, report) = run_at("mpi", toml, -800, 3);
    assert_eq!(report["ranks"], 3);
    // the potentials are near 2^800: compared in units of it
    let s = two_to(-800);
    let norm = u1.iter().map(|v| (v * s).powi(2)).sum::<f64>().sqrt();
    let diff = u1.iter().zip(&u3).map(|(a, b)| ((a - b) * s).powi(2)).sum::<f64>().sqrt();
    assert!(norm.is_finite() && norm > 0.0 && diff <= 1e-13 * norm, "3 ranks against 1: {diff:e} of {norm:e}");
}
