//! Shared helpers of the application's integration tests.
#![allow(dead_code, missing_docs)]

/// A scratch folder of one test, removed when dropped.
pub struct Dir(pub std::path::PathBuf);

impl Dir {
    /// A fresh folder `parki-app-test-<name>-<pid>` in the temporary directory.
    pub fn new(name: &str) -> Self {
        let d = std::env::temp_dir().join(format!("parki-app-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    /// Writes `text` to the file `name` and returns its path.
    pub fn file(&self, name: &str, text: &str) -> std::path::PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// The path of `name` in the folder.
    pub fn path(&self, name: &str) -> std::path::PathBuf {
        self.0.join(name)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `parki-dist run config --quiet --threads 2` with `extra` arguments.
pub fn run_quiet(config: &std::path::Path, extra: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_parki-dist"))
        .arg("run")
        .arg(config)
        .args(["--quiet", "--threads", "2"])
        .args(extra)
        .output()
        .unwrap()
}

/// The run's output (stdout then stderr), asserting it succeeded.
pub fn succeeded(out: &std::process::Output) -> String {
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "failed:\n{text}");
    text
}

/// Asserts the run failed without a panic, its stderr naming every one of `needles`.
pub fn assert_error(out: &std::process::Output, needles: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "expected failure, got success; stderr: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    for n in needles {
        assert!(err.contains(n), "stderr lacks {n:?}: {err}");
    }
}

/// `mpirun -n ranks --oversubscribe parki-dist run config --quiet --threads 1` (as root too).
pub fn mpirun_run(ranks: usize, config: &std::path::Path) -> std::process::Output {
    mpirun_run_env(ranks, config, &[])
}

/// [`mpirun_run`] with environment variables (`-x NAME` passes each to every rank).
pub fn mpirun_run_env(ranks: usize, config: &std::path::Path, env: &[(&str, &str)]) -> std::process::Output {
    // under `timeout`: a hang of the ranks fails the test instead of the CI's whole run
    let mut cmd = std::process::Command::new("timeout");
    cmd.args(["600", "mpirun", "-n", &ranks.to_string(), "--oversubscribe"]);
    for (name, value) in env {
        cmd.args(["-x", name]).env(name, value);
    }
    cmd.arg(env!("CARGO_BIN_EXE_parki-dist"))
        .arg("run")
        .arg(config)
        .args(["--quiet", "--threads", "1"])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .output()
        .expect("mpirun must be installed (openmpi-bin); see README")
}

/// `parki-dist run config --quiet --threads 2` in one process.
pub fn run_app(config: &std::path::Path) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_parki-dist"))
        .arg("run")
        .arg(config)
        .args(["--quiet", "--threads", "2"])
        .output()
        .unwrap()
}

/// The JSON report `report.json` of a run in `dir`.
pub fn read_report(dir: &Dir) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.path("report.json")).unwrap()).unwrap()
}
