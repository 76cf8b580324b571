//! `precision = "f32"` on f64 inputs: the solver is given the positions as read and rounds them
//! relative to their cells, not the box (docs/design.md, "f32 on f64 positions").

use parki_app::npy;
use parki_reference::generate::{self, Distribution, Rng};

use crate::common::{run_quiet, succeeded, Dir};

fn run(config: &std::path::Path) -> String {
    succeeded(&run_quiet(config, &[]))
}

/// The checked error printed by a run.
fn checked_error(text: &str) -> f64 {
    let line = text.lines().find(|l| l.starts_with("check: relative RMS error")).expect("check line");
    line.split_whitespace().nth(4).unwrap().parse().unwrap()
}

/// 1e5 uniform particles at tol 1e-6 in f32: refused before (`>= 6.2e-6`: the positions
/// rounded in the box), held now.
#[test]
fn f32_holds_1e_6_on_1e5_particles() {
    let dir = Dir::new("precision-1e5");
    let cfg = dir.file(
        "run.toml",
        "[problem]\nkernel = \"laplace\"\nbox = [1.0, 1.0, 1.0]\ntolerance = 1e-6\nprecision = \"f32\"\n\
         [sources]\ngenerate = { distribution = \"uniform\", count = 100000, seed = 3 }\n\
         [output]\npotential = \"u.npy\"\n[run]\ncheck = 200\n",
    );
    let text = run(&cfg);
    let e = checked_error(&text);
    assert!(e <= 1e-6, "{e}: {text}");
    assert!(!text.contains("is estimated faster"), "{text}");
}

/// Two charges 1.4e-4 apart among 2e4 uniform ones at tol 5e-6 (refused below 3.2e-6): f32
/// holds the tolerance only in cells fine enough that its plan costs more than f64's, and the
/// run says so.
#[test]
fn f32_says_when_f64_is_faster() {
    let dir = Dir::new("precision-pair");
    let n = 20_000;
    let domain = parki_core::Domain::triply_periodic([1.0, 1.0, 1.0]).unwrap();
    let mut rng = Rng::new(8);
    let mut pos = generate::positions(&domain, Distribution::Uniform, n, &mut rng);
    pos[1] = [pos[0][0] + 1.0e-4, pos[0][1] + 0.9e-4, pos[0][2] + 0.5e-4].map(|x: f64| x.min(0.999));
    let mut q = generate::neutral_scalars(n, &mut rng);
    (q[0], q[1]) = (3.0 + q[0], -3.0 + q[1]);
    npy::write(&dir.path("x.npy"), &[n, 3], &pos.iter().flatten().cloned().collect::<Vec<f64>>()).unwrap();
    npy::write(&dir.path("q.npy"), &[n], &q).unwrap();
    let cfg = dir.file(
        "run.toml",
        "[problem]\nkernel = \"laplace\"\nbox = [1.0, 1.0, 1.0]\ntolerance = 5e-6\nprecision = \"f32\"\n\
         [sources]\npositions = \"x.npy\"\ncharges = \"q.npy\"\n[output]\npotential = \"u.npy\"\n",
    );
    let text = run(&cfg);
    assert!(text.contains("precision = \"f64\" is estimated faster"), "{text}");
    assert!(text.contains("round-off of their closest pairs"), "{text}");
}
