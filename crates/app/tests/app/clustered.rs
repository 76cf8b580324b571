//! The Ewald sum on clustered particles with the measured occupancy of the cells
//! (`[ewald] occupancy`, `parki_farfield::occupancy`): the tolerance holds, which the uniform
//! model alone does not on these particles, checked against the free-space direct sum and
//! classical Ewald; the occupancy is reported; a bad value is named. (That the occupancy moves
//! the choice to finer cells: `parki_farfield::occupancy::tests`.)

use parki_app::npy;
use parki_reference::generate::Cloud;

use crate::common::{assert_error, read_report as report, run_app as run, succeeded, Dir};

/// A normal cloud of width `sigma` about the centre of the unit box, folded into it, with
/// charges and forces summing to zero.
fn write_cloud(dir: &Dir, n: usize, sigma: f64) {
    let x: Vec<[f64; 3]> =
        Cloud::Gaussian.points(5, 0..n).iter().map(|p| p.map(|v| (0.5 + sigma * v).rem_euclid(1.0))).collect();
    let mut q: Vec<f64> = (0..n).map(|k| ((k * 7919) % 1000) as f64 / 500.0 - 1.0).collect();
    let mean = q.iter().sum::<f64>() / n as f64;
    q.iter_mut().for_each(|v| *v -= mean);
    let mut f: Vec<[f64; 3]> =
        (0..n).map(|k| [0, 1, 2].map(|d| ((k * 104729 + d * 7) % 997) as f64 / 498.5 - 1.0)).collect();
    for d in 0..3 {
        let m = f.iter().map(|v| v[d]).sum::<f64>() / n as f64;
        f.iter_mut().for_each(|v| v[d] -= m);
    }
    npy::write(&dir.path("x.npy"), &[n, 3], &x.concat()).unwrap();
    npy::write(&dir.path("q.npy"), &[n], &q).unwrap();
    npy::write(&dir.path("f.npy"), &[n, 3], &f.concat()).unwrap();
}

fn config(dir: &Dir, kernel: &str, periodic: bool, tol: f64, occupancy: &str) -> std::path::PathBuf {
    let (strengths, field) =
        if kernel == "laplace" { ("charges = \"q.npy\"", "field = \"e.npy\"") } else { ("forces = \"f.npy\"", "") };
    dir.file(
        "run.toml",
        &format!(
            r#"
[problem]
kernel = "{kernel}"
tolerance = {tol:e}
box = [1.0, 1.0, 1.0]
periodic = [{periodic}, {periodic}, {periodic}]

[sources]
positions = "x.npy"
{strengths}

[ewald]
occupancy = "{occupancy}"

[output]
potential = "u.npy"
{field}
report = "report.json"

[run]
check = 200
"#
        ),
    )
}

#[test]
fn clustered_particles_keep_the_tolerance() {
    let dir = Dir::new("clustered");
    write_cloud(&dir, 30000, 0.05);
    for periodic in [false, true] {
        for kernel in ["laplace", "stokeslet"] {
            for tol in [1e-4, 1e-6, 1e-9] {
                succeeded(&run(&config(&dir, kernel, periodic, tol, "measured")));
                let r = report(&dir);
                let what = format!("{kernel} periodic {periodic} tol {tol:e}");
                let e = r["check"]["relative_rms_error"].as_f64().unwrap();
                assert!(e <= tol && e >= tol / 100.0, "{what}: error {e:e}");
                if let Some(fe) = r["check"]["field"]["relative_rms_error"].as_f64() {
                    assert!(fe <= tol && fe >= tol / 100.0, "{what}: field error {fe:e}");
                }
                // the occupancy at the chosen cells is reported (the uniform model's is 1)
                let occ = r["parameters"]["cell_occupancy"].as_f64().unwrap();
                assert!(occ != 1.0 && occ > 0.3, "{what}: R = {occ}");
            }
        }
    }
    // the uniform model alone: R = 1 reported (and on these particles it misses the
    // tolerance: the Stokeslet measured 1.08e-4 at tol 1e-4, free space)
    succeeded(&run(&config(&dir, "laplace", false, 1e-4, "uniform")));
    assert_eq!(report(&dir)["parameters"]["cell_occupancy"].as_f64(), Some(1.0));
}

#[test]
fn a_bad_occupancy_is_named() {
    let dir = Dir::new("clustered-bad");
    write_cloud(&dir, 100, 0.1);
    assert_error(&run(&config(&dir, "laplace", false, 1e-6, "adaptive")), &["ewald.occupancy", "adaptive"]);
}
