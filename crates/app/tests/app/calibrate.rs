//! `parki-dist calibrate` and `[ewald] cost_model`: the file it writes, a run that reads it (on
//! one process and on two ranks), the constants changing the parameter choice, and every bad
//! file or path as a clear error.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::common::{assert_error, mpirun_run, succeeded, Dir};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_parki-dist"))
}

/// A Laplace run.toml in 3P on generated particles with `cost_model` (none: the key absent).
fn config(dir: &Dir, name: &str, cost_model: Option<&str>) -> std::path::PathBuf {
    let key = cost_model.map_or(String::new(), |c| format!("[ewald]\ncost_model = \"{c}\"\n"));
    dir.file(
        name,
        &format!(
            "[problem]\nkernel = \"laplace\"\nbox = [1.0, 1.0, 1.0]\ntolerance = 1e-6\n\
             [sources]\ngenerate = {{ distribution = \"uniform\", count = 3000, seed = 2 }}\n{key}"
        ),
    )
}

/// The JSON report of `parki-dist run config --json` with `$PARKI_COST_MODEL` set to `env`.
fn report(config: &Path, env: &Path) -> Value {
    let out: Output = bin()
        .arg("run")
        .arg(config)
        .args(["--quiet", "--threads", "2", "--json"])
        .env("PARKI_COST_MODEL", env)
        .output()
        .unwrap();
    serde_json::from_str(&succeeded_stdout(&out)).expect("JSON report")
}

fn succeeded_stdout(out: &Output) -> String {
    succeeded(out);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The calibration file of `calibrate --particles 3000` with `p2p_pair` replaced.
fn with_p2p(text: &str, p2p: f64) -> String {
    text.lines()
        .map(
            |l| {
                if l.starts_with("p2p_pair") {
                    format!("p2p_pair = [{p2p}, {p2p}, {p2p}, {p2p}]")
                } else {
                    l.to_string()
                }
            },
        )
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn calibrate_writes_the_file_runs_read() {
    let dir = Dir::new("calibrate");
    let out = bin()
        .args(["calibrate", "--particles", "3000", "--threads", "2", "--quiet", "--output"])
        .arg(dir.path("cal/c.toml"))
        .output()
        .unwrap();
    let printed = succeeded_stdout(&out);
    let text = std::fs::read_to_string(dir.path("cal/c.toml")).expect("the file is written (its folder made)");
    assert_eq!(printed, text, "it prints what it saves");
    let cal = parki_app::calibrate::Calibration::parse(&text, &dir.path("cal/c.toml")).expect("parses");
    assert_eq!((cal.threads, cal.particles), (2, 3000));
    assert_eq!(cal.cpu, parki_app::calibrate::this_cpu());
    let c = cal.cost;
    for v in c.p2p_pair.iter().chain(&c.p2g).chain(&c.g2p).chain(&[c.fft, c.cnv, c.plan_tables, c.plan_touch]) {
        assert!(v.is_finite() && *v > 0.0 && *v < 1e4, "constant {v} in\n{text}");
    }

    // "auto" (the default) reads $PARKI_COST_MODEL; "builtin" and a missing file do not
    let auto = report(&config(&dir, "auto.toml", None), &dir.path("cal/c.toml"));
    assert_eq!(auto["cost_model"]["source"], "calibrated", "{}", auto["cost_model"]);
    assert_eq!(auto["cost_model"]["threads"], 2);
    let builtin = report(&config(&dir, "builtin.toml", Some("builtin")), &dir.path("cal/c.toml"));
    assert_eq!(builtin["cost_model"]["source"], "built-in");
    let none = report(&config(&dir, "none.toml", None), &dir.path("cal/missing.toml"));
    assert_eq!(none["cost_model"]["source"], "built-in");
    assert!(
        none["cost_model"]["reason"].as_str().is_some_and(|r| r.contains("missing.toml")),
        "{}",
        none["cost_model"]
    );

    // the constants choose the parameters: P2P 100x dearer buys smaller cells and a finer grid
    dir.file("cal/dear.toml", &with_p2p(&text, 300.0));
    dir.file("cal/cheap.toml", &with_p2p(&text, 0.3));
    let dear = report(&config(&dir, "dear.toml", Some("cal/dear.toml")), &dir.path("cal/missing.toml"));
    let cheap = report(&config(&dir, "cheap.toml", Some("cal/cheap.toml")), &dir.path("cal/missing.toml"));
    let cells = |r: &Value| r["parameters"]["cells"][0].as_u64().expect("cells");
    let grid = |r: &Value| r["parameters"]["grid"][0].as_u64().expect("grid");
    assert!(cells(&dear) > cells(&cheap), "cells {} (dear P2P) against {} (cheap)", cells(&dear), cells(&cheap));
    assert!(grid(&dear) > grid(&cheap), "grid {} (dear P2P) against {} (cheap)", grid(&dear), grid(&cheap));
    assert_eq!(dear["cost_model"]["constants_ns"]["p2p_pair"][0], 300.0);
    // both meet the tolerance all the same (the estimate; the checks of other tests measure it)
    for r in [&dear, &cheap] {
        assert!(r["error_estimate"]["total"].as_f64().expect("estimate") <= 1e-6, "{}", r["error_estimate"]);
    }

    // two ranks read rank 0's file and agree
    let two = config(&dir, "two.toml", Some("cal/dear.toml"));
    succeeded(&mpirun_run(2, &two));
}

#[test]
fn bad_cost_model_settings_are_errors_naming_them() {
    let dir = Dir::new("calibrate-bad");
    let run = |cfg: &Path| bin().arg("run").arg(cfg).args(["--quiet", "--threads", "1"]).output().unwrap();
    assert_error(&run(&config(&dir, "missing.toml", Some("nowhere/c.toml"))), &["ewald.cost_model", "nowhere/c.toml"]);
    dir.file("bad.toml", "[machine]\ncpu = \"x\"\n");
    assert_error(&run(&config(&dir, "bad_run.toml", Some("bad.toml"))), &["bad.toml", "calibration file"]);
    let good = parki_app::calibrate::Calibration {
        cpu: "x".into(),
        isa: "scalar".into(),
        threads: 1,
        particles: 1000,
        unix_time: 0,
        cost: parki_dist::CostModel::default(),
    };
    dir.file("neg.toml", &good.to_toml().replace("fft = 0.3400", "fft = -1"));
    assert_error(&run(&config(&dir, "neg_run.toml", Some("neg.toml"))), &["neg.toml", "cost.fft", "-1"]);
    let out = bin().args(["calibrate", "--particles", "10", "--output"]).arg(dir.path("c.toml")).output().unwrap();
    assert_error(&out, &["--particles", "10"]);
}
