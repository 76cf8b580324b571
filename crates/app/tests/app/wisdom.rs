//! `[run] fftw_wisdom`: a measured run (`"measure"` or `"measure-lines"`) saves its FFTW wisdom,
//! a later run (estimated too) imports it and gives the same values; `"off"`,
//! `$PARKI_FFTW_WISDOM`, an unwritable folder (a warning, not a failure) and the Poisson run.
//! `[ewald] fft_lines`: RustFFT's lines and FFTW's give the same values.

use std::path::Path;
use std::process::Command;

use parki_app::npy;
use serde_json::Value;

use crate::common::{succeeded, Dir};

/// `parki-dist run config --json` with `$PARKI_FFTW_WISDOM` set to `env` (none: removed).
fn report(config: &Path, env: Option<&Path>) -> Value {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_parki-dist"));
    cmd.arg("run").arg(config).args(["--quiet", "--threads", "2", "--json"]);
    match env {
        Some(e) => cmd.env("PARKI_FFTW_WISDOM", e),
        None => cmd.env_remove("PARKI_FFTW_WISDOM"),
    };
    let out = cmd.output().unwrap();
    succeeded(&out);
    serde_json::from_str(&String::from_utf8_lossy(&out.stdout)).expect("JSON report")
}

/// A 1P Stokeslet run.toml (free axes: the transforms the wisdom matters for).
fn config(dir: &Dir, plan: &str, wisdom: Option<&str>) -> std::path::PathBuf {
    let key = wisdom.map_or(String::new(), |w| format!("fftw_wisdom = \"{w}\"\n"));
    dir.file(
        "run.toml",
        &format!(
            "[problem]\nkernel = \"stokeslet\"\nbox = [1.0, 1.0, 1.0]\nperiodic = [true, false, false]\n\
             tolerance = 1e-6\n[sources]\ngenerate = {{ distribution = \"uniform\", count = 2000, seed = 4 }}\n\
             [ewald]\nfft_plan = \"{plan}\"\n[run]\n{key}[output]\npotential = \"u.npy\"\n"
        ),
    )
}

fn potential(dir: &Dir) -> Vec<f64> {
    npy::read(&dir.path("u.npy"), "u").unwrap().data
}

#[test]
fn measured_wisdom_is_saved_and_reused() {
    let dir = Dir::new("wisdom-ewald");
    let folder = dir.path("wisdom");
    // measured: no file yet, then saved into the folder (created)
    let r = report(&config(&dir, "measure", Some("wisdom")), None);
    let w = &r["fftw_wisdom"];
    let file = w["file"].as_str().expect("a wisdom file");
    assert!(Path::new(file).starts_with(&folder) && file.contains("fftw-wisdom-f64-"), "{w}");
    assert_eq!(w["loaded"], "no file yet", "{w}");
    let saved = w["saved_bytes"].as_u64().unwrap();
    assert_eq!(std::fs::metadata(file).unwrap().len(), saved);
    let measured = potential(&dir);

    // estimated, from the wisdom: imported, nothing saved, the same values
    let r = report(&config(&dir, "estimate", Some("wisdom")), None);
    let w = &r["fftw_wisdom"];
    assert_eq!(w["loaded"]["imported_bytes"].as_u64(), Some(saved), "{w}");
    assert!(w["saved_bytes"].is_null(), "{w}");
    let again = potential(&dir);
    let scale = measured.iter().map(|v| v * v).sum::<f64>().sqrt();
    let diff = measured.iter().zip(&again).map(|(a, b)| (a - b) * (a - b)).sum::<f64>().sqrt();
    assert!(diff <= 1e-12 * scale, "with and without wisdom: {diff:.2e} of {scale:.2e}");

    // "off": no file; "auto": $PARKI_FFTW_WISDOM's folder
    let r = report(&config(&dir, "estimate", Some("off")), Some(&folder));
    assert!(r["fftw_wisdom"]["file"].is_null(), "{}", r["fftw_wisdom"]);
    let r = report(&config(&dir, "estimate", None), Some(&folder));
    assert_eq!(r["fftw_wisdom"]["file"].as_str(), Some(file));
    assert!(r["fftw_wisdom"]["loaded"]["imported_bytes"].as_u64().unwrap() > 0);
    let r = report(&config(&dir, "estimate", None), Some(Path::new("off")));
    assert!(r["fftw_wisdom"]["file"].is_null(), "{}", r["fftw_wisdom"]);

    // a folder that cannot be made: the run succeeds and warns, naming the path
    dir.file("blocker", "a file where the folder would be");
    let r = report(&config(&dir, "measure", Some("blocker/wisdom")), None);
    let warnings = r["warnings"].to_string();
    assert!(warnings.contains("FFTW wisdom not saved") && warnings.contains("blocker"), "{warnings}");
    assert!(r["fftw_wisdom"]["saved_bytes"].is_null());
}

#[test]
fn the_poisson_run_keeps_wisdom_too() {
    let dir = Dir::new("wisdom-poisson");
    let cfg = dir.file(
        "run.toml",
        "[problem]\nequation = \"poisson\"\nbox = [1.0, 1.0, 1.0]\ngrid = [16, 16, 16]\n\
         bc = [[\"unb\", \"unb\"], [\"per\", \"per\"], [\"unb\", \"unb\"]]\n[input]\ngenerate = { field = \"blob\" }\n\
         [run]\nfft_plan = \"measure\"\nfftw_wisdom = \"w\"\n",
    );
    let r = report(&cfg, None);
    assert!(r["fftw_wisdom"]["saved_bytes"].as_u64().unwrap() > 0, "{}", r["fftw_wisdom"]);
    let cfg = dir.file("run.toml", &std::fs::read_to_string(&cfg).unwrap().replace("measure", "estimate"));
    let r = report(&cfg, None);
    assert!(r["fftw_wisdom"]["loaded"]["imported_bytes"].as_u64().unwrap() > 0, "{}", r["fftw_wisdom"]);
}

#[test]
fn measured_line_plans_give_the_estimated_values_and_are_saved() {
    let dir = Dir::new("wisdom-lines");
    report(&config(&dir, "estimate", Some("off")), None);
    let estimated = potential(&dir);
    // the strided passes' blocks by measured plans: the same transform, its wisdom saved
    let r = report(&config(&dir, "measure-lines", Some("w")), None);
    let w = &r["fftw_wisdom"];
    assert_eq!(w["loaded"], "no file yet", "{w}");
    assert!(w["saved_bytes"].as_u64().unwrap() > 0, "{w}");
    let lines = potential(&dir);
    let scale = estimated.iter().map(|v| v * v).sum::<f64>().sqrt();
    let diff = estimated.iter().zip(&lines).map(|(a, b)| (a - b) * (a - b)).sum::<f64>().sqrt();
    assert!(diff <= 1e-12 * scale, "measure-lines against estimate: {diff:.2e} of {scale:.2e}");
    // a second run imports them
    let r = report(&config(&dir, "measure-lines", Some("w")), None);
    assert!(r["fftw_wisdom"]["loaded"]["imported_bytes"].as_u64().unwrap() > 0, "{}", r["fftw_wisdom"]);
}

/// The strided passes' lines on RustFFT (the default) and on FFTW give the same potential in
/// 3P (one rank: RustFFT's passes against FFTW's 3-D plan, on a grid that is not a power of
/// two) and 1P (padded free axes), and the report names the engine.
#[test]
fn line_engines_give_the_same_values() {
    let dir = Dir::new("fft-lines");
    for periodic in ["true, true, true", "true, false, false"] {
        let mut values = Vec::new();
        for lines in ["rustfft", "fftw"] {
            let cfg = dir.file(
                "run.toml",
                &format!(
                    "[problem]\nkernel = \"stokeslet\"\nbox = [1.0, 1.0, 1.0]\nperiodic = [{periodic}]\n\
                     tolerance = 1e-9\n[sources]\ngenerate = {{ distribution = \"uniform\", count = 3000, seed = 5 }}\n\
                     [ewald]\nfft_lines = \"{lines}\"\n[run]\nfftw_wisdom = \"off\"\n[output]\npotential = \"u.npy\"\n"
                ),
            );
            let r = report(&cfg, None);
            assert_eq!(r["variants"]["fft_lines"], lines, "{}", r["variants"]);
            let grid = r["parameters"]["grid"][0].as_u64().unwrap();
            if periodic.starts_with("true, true") {
                assert!(!grid.is_power_of_two(), "3P grid {grid}: RustFFT's passes run only off powers of two");
            }
            values.push(potential(&dir));
        }
        let scale = values[1].iter().map(|v| v * v).sum::<f64>().sqrt();
        let diff = values[0].iter().zip(&values[1]).map(|(a, b)| (a - b) * (a - b)).sum::<f64>().sqrt();
        assert!(diff <= 1e-13 * scale, "[{periodic}] rustfft against fftw: {diff:.2e} of {scale:.2e}");
    }
}
