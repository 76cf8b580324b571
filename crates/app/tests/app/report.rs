//! The JSON report: its provenance, integer byte counts, and every key documented in
//! docs/report.md (so that the documentation cannot drift from the report).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::common::Dir;

const RUN: &str = "[problem]\nkernel = \"stokes\"\nbox = [1.0, 1.2, 0.9]\ntolerance = 1e-5\n\
                   [sources]\ngenerate = { distribution = \"uniform\", count = 1500 }\n\
                   [output]\nreport = \"report.json\"\n[run]\ncheck = 5\n";

fn succeeded(out: Output) -> Output {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    out
}

fn read_report(dir: &Dir) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.path("report.json")).unwrap()).unwrap()
}

/// The report of a run on one rank and of the same run on two.
fn reports(dir: &Dir) -> (Value, Value) {
    let cfg = dir.file("run.toml", RUN);
    let exe = env!("CARGO_BIN_EXE_parki-dist");
    succeeded(Command::new(exe).arg("run").arg(&cfg).args(["--quiet", "--threads", "2"]).output().unwrap());
    let one = read_report(dir);
    succeeded(
        Command::new("timeout")
            .args(["600", "mpirun", "-n", "2", "--oversubscribe", exe, "run"])
            .arg(&cfg)
            .args(["--quiet", "--threads", "1"])
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .output()
            .expect("mpirun must be installed (openmpi-bin); see README"),
    );
    (one, read_report(dir))
}

/// The paths in backticks of docs/report.md.
fn documented() -> (String, BTreeSet<String>) {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/report.md");
    let text = std::fs::read_to_string(&doc).unwrap();
    let spans = text.split('`').skip(1).step_by(2).map(str::to_string).collect();
    (text, spans)
}

/// Keys of `v` at `path` that docs/report.md does not document: a path is documented as
/// itself or through all its children; the stage names under `timings` and `communication`
/// read `<stage>` and must each be named in the document.
fn undocumented(path: &str, v: &Value, doc: &(String, BTreeSet<String>), missing: &mut Vec<String>) {
    if doc.1.contains(path) {
        return;
    }
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, child) in m {
                let key = if path == "timings" || path == "communication" {
                    if !doc.1.contains(k.as_str()) {
                        missing.push(format!("stage {k} of {path}"));
                    }
                    "<stage>"
                } else {
                    k.as_str()
                };
                let sub = if path.is_empty() { key.to_string() } else { format!("{path}.{key}") };
                undocumented(&sub, child, doc, missing);
            }
        }
        _ => missing.push(path.to_string()),
    }
}

#[test]
fn every_report_key_is_documented_and_provenance_is_complete() {
    let dir = Dir::new("report");
    let (one, two) = reports(&dir);
    let doc = documented();
    let mut missing = Vec::new();
    for r in [&one, &two] {
        undocumented("", r, &doc, &mut missing);
    }
    missing.sort();
    missing.dedup();
    assert!(missing.is_empty(), "docs/report.md does not document: {missing:?}");
    // provenance
    let p = &one["provenance"];
    let cfg = std::fs::canonicalize(dir.path("run.toml")).unwrap();
    assert_eq!(p["run_toml"], cfg.display().to_string());
    let line: Vec<&str> = p["command_line"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(line[0].ends_with("parki-dist") && line[1] == "run" && line.contains(&"--threads"), "{line:?}");
    let t = p["start_time"].as_str().unwrap();
    let shape: String = t.chars().map(|c| if c.is_ascii_digit() { '9' } else { c }).collect();
    assert_eq!(shape, "9999-99-99T99:99:99Z", "start time {t}");
    assert!(&t[..4] >= "2024", "start time {t}");
    assert!(!p["host"].as_str().unwrap().is_empty());
    assert_eq!((p["ranks"].as_u64(), two["provenance"]["ranks"].as_u64()), (Some(1), Some(2)));
    assert_eq!(p["version"], env!("CARGO_PKG_VERSION"));
    let commit = p["git_commit"].as_str().unwrap();
    assert!(commit == "unknown" || (commit.len() == 40 && commit.chars().all(|c| c.is_ascii_hexdigit())), "{commit}");
    assert!(p["git_dirty"].is_boolean() || (p["git_dirty"].is_null() && commit == "unknown"));
    // byte and message counts are integers
    let comm = two["communication"].as_object().unwrap();
    assert!(!comm.is_empty());
    for (stage, c) in comm {
        for v in
            [&c["bytes_total"], &c["bytes_per_rank"]["min"], &c["bytes_per_rank"]["max"], &c["max_messages_per_rank"]]
        {
            assert!(v.is_u64(), "{stage}: {v} is not an integer");
        }
    }
    assert!(comm.values().any(|c| c["bytes_total"].as_u64().unwrap() > 0));
}
