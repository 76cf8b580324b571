//! The run.toml schema. Unknown keys are errors, so that a typo does not silently fall back to
//! a default. Relative paths are relative to the run.toml.

use std::path::{Path, PathBuf};

use parki_core::{Error, Result};
use serde::Deserialize;

/// A whole run.toml.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// `[problem]`.
    pub problem: ProblemSection,
    /// `[sources]`.
    pub sources: ParticleSection,
    /// `[targets]` (absent: the targets are the sources).
    pub targets: Option<ParticleSection>,
    /// `[output]`.
    #[serde(default)]
    pub output: OutputSection,
    /// `[ewald]`: optional overrides of the automatic parameters.
    #[serde(default)]
    pub ewald: EwaldSection,
    /// `[run]`: threads, checks, repetitions, the compute backend.
    #[serde(default)]
    pub run: RunSection,
    /// `[parallel]`: the process grid and the switch backend of a run on several ranks.
    #[serde(default)]
    pub parallel: ParallelSection,
}

/// `[problem]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProblemSection {
    /// `"particles"` (default: a kernel sum over particles); `"poisson"` runs are read by
    /// [`crate::poisson`] instead.
    pub equation: Option<String>,
    /// `"ewald"` (the default, the spectral Ewald sum); `"treecode"` runs are read by
    /// [`crate::treecode`] instead.
    pub method: Option<String>,
    /// `"laplace"`, `"stokeslet"`, `"stresslet"` or `"stokes"`.
    pub kernel: String,
    /// Box side lengths (exactly 3, checked by [`RunConfig::parse`]; see [`ProblemSection::lengths`]).
    #[serde(rename = "box")]
    pub box_lengths: Vec<f64>,
    /// Periodic axes (default: all; exactly 3, see [`ProblemSection::periodic_axes`]).
    #[serde(default = "all_periodic")]
    pub periodic: Vec<bool>,
    /// Relative RMS tolerance.
    pub tolerance: f64,
    /// `"f64"` (default) or `"f32"`.
    #[serde(default = "default_precision")]
    pub precision: String,
    /// Map coordinates outside the box into it along periodic axes (default false: error).
    #[serde(default)]
    pub wrap: bool,
}

fn all_periodic() -> Vec<bool> {
    vec![true; 3]
}

impl ProblemSection {
    /// The box side lengths (three: [`RunConfig::parse`] refuses any other count).
    pub fn lengths(&self) -> [f64; 3] {
        [0, 1, 2].map(|d| self.box_lengths.get(d).copied().unwrap_or(f64::NAN))
    }

    /// The periodic axes (three: [`RunConfig::parse`] refuses any other count).
    pub fn periodic_axes(&self) -> [bool; 3] {
        [0, 1, 2].map(|d| self.periodic.get(d).copied().unwrap_or(true))
    }
}

fn default_precision() -> String {
    "f64".into()
}

/// `[sources]` or `[targets]`: files or a generator.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParticleSection {
    /// Positions, `(N, 3)`.
    pub positions: Option<PathBuf>,
    /// Charges, `(N,)` (Laplace).
    pub charges: Option<PathBuf>,
    /// Forces, `(N, 3)` (Stokeslet, Stokes).
    pub forces: Option<PathBuf>,
    /// Dipoles `q`, `(N, 3)` (stresslet, Stokes).
    pub dipoles: Option<PathBuf>,
    /// Normals `n`, `(N, 3)` (stresslet, Stokes).
    pub normals: Option<PathBuf>,
    /// Generate instead of reading files.
    pub generate: Option<Generate>,
}

/// `generate = { distribution = "uniform", count = 1000000, seed = 1 }`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Generate {
    /// `"uniform"`, `"normal"` or `"sphere"` in the box; for `method = "treecode"` (no box)
    /// a free-space cloud: `"uniform"`, `"gaussian"`, `"plummer"`, `"slab"`, `"rod"` or
    /// `"shell"` (`parki_reference::generate::Cloud`).
    pub distribution: String,
    /// Number of particles.
    pub count: usize,
    /// Seed (default 1).
    #[serde(default = "default_seed")]
    pub seed: u64,
}

fn default_seed() -> u64 {
    1
}

/// `[output]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputSection {
    /// Potential, `(Nt,)` or `(Nt, 3)` float64 in input order.
    pub potential: Option<PathBuf>,
    /// The Laplace field `E = -grad u`, `(Nt, 3)` float64 in input order (kernel laplace only).
    pub field: Option<PathBuf>,
    /// JSON report.
    pub report: Option<PathBuf>,
}

/// `[ewald]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EwaldSection {
    /// Fixed real-space cut-off.
    pub rc: Option<f64>,
    /// Fixed mean number of sources per cell.
    pub cell_size: Option<f64>,
    /// Fixed window support (even, 4..=32).
    pub window_support: Option<usize>,
    /// Fixed grid oversampling (1 to 4).
    pub oversampling: Option<f64>,
    /// `"blocked"` (default) or `"scatter"`.
    pub p2g: Option<String>,
    /// `"sorted"` (default) or `"base"`.
    pub g2p: Option<String>,
    /// P2P's pair functions on the CPU: `"auto"` (default, in f64: `"loose"` from tolerance
    /// 1e-5 on, `"medium"` from 1e-10), `"full"`, `"medium"` or `"loose"`.
    pub pair_accuracy: Option<String>,
    /// Which pairs P2P sums on the CPU: `"sphere"` (default: those within the cut-off sphere
    /// the parameter selection picks) or `"cells"` (every pair of the 27 colleague cells, as
    /// the device backend).
    pub near_cutoff: Option<String>,
    /// The field's far part: `"window"` (default, the window's derivative in G2P) or
    /// `"spectral"` (`-i k` in CNV).
    pub field_method: Option<String>,
    /// `"estimate"` (default), `"measure-lines"` or `"measure"`.
    pub fft_plan: Option<String>,
    /// `"rustfft"` (default) or `"fftw"`: what transforms the strided passes' complex lines.
    pub fft_lines: Option<String>,
    /// `"avx512"`, `"avx2"` or `"scalar"` (default: the best available).
    pub isa: Option<String>,
    /// The particles' occupancy of the cells in the parameter choice: `"measured"` (default)
    /// or `"uniform"` (the uniform-density model alone).
    pub occupancy: Option<String>,
    /// The cost constants of the parameter choice on the CPU: `"auto"` (default: the file
    /// `parki-dist calibrate` wrote, when measured on this CPU; else the built-in ones),
    /// `"builtin"`, or the path of a calibration file ([`crate::calibrate`]).
    pub cost_model: Option<String>,
}

/// `[run]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSection {
    /// Threads (default: all cores).
    pub threads: Option<usize>,
    /// Measure the error on this many random targets against the reference sum of the box.
    pub check: Option<usize>,
    /// Evaluate this many times (timings are reported per evaluation, the last one kept).
    pub repeat: Option<usize>,
    /// Grid memory limit in GB, per rank (default: half the available memory, shared by the
    /// ranks of a node).
    pub max_grid_gb: Option<f64>,
    /// Compute backend: `"cpu"` (default), `"cuda"` or `"auto"` (see [`crate::backend`]).
    pub backend: Option<String>,
    /// P2P on a device: `"gm1d"` (default: a thread per target) or `"shared"` (a block per
    /// target cell, sources staged in shared memory).
    pub p2p: Option<String>,
    /// P2G on a device: `"auto"` (default: as `ewald.p2g`, atomic for `"scatter"`, hybrid for
    /// `"blocked"`) or `"operator"` (the precomputed spreading operator).
    pub spread: Option<String>,
    /// The far field's transforms on a device: `"batched"` (default: one cuFFT plan over the
    /// grid's components) or `"components"` (one component's plan run per component: cuFFT's
    /// work area for one component, less device memory per particle).
    pub device_fft: Option<String>,
    /// What the device runs concurrently: `"none"` (default: the stages in order on one
    /// stream) or `"p2p"` (P2P on a second, lower-priority stream beside the far field).
    pub device_overlap: Option<String>,
    /// FFTW wisdom folder: `"auto"` (default), `"off"` or a folder ([`crate::wisdom`]).
    pub fftw_wisdom: Option<String>,
}

/// `[parallel]`: read by every rank; ignored by a run on one rank.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParallelSection {
    /// `"auto"` (default) or `[P_y, P_z]` with `P_y P_z` = ranks: any TOML value here, so that
    /// a wrong one is reported with what is allowed (`crate::app::parallel_options`).
    pub grid: Option<toml::Value>,
    /// `"auto"` (default: slabs when they fit, else pencils), `"slab"` or `"pencil"`.
    pub decomposition: Option<String>,
    /// `"alltoallv"` (default) or `"persistent"` (point-to-point, unpacked as blocks arrive).
    pub backend: Option<String>,
}

impl RunConfig {
    /// Reads and parses `path`.
    pub fn load(path: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).map_err(|e| Error::Io { path: path.into(), message: e.to_string() })?;
        Self::parse(&text, path)
    }

    /// Parses run.toml text (`path` for messages) and checks the counts a TOML array cannot
    /// carry in its type: `box` and `periodic` have exactly 3 entries, `repeat` is at least 1.
    pub fn parse(text: &str, path: &Path) -> Result<Self> {
        let cfg: RunConfig =
            toml::from_str(text).map_err(|e| Error::Config { path: path.into(), message: e.to_string() })?;
        let p = &cfg.problem;
        if let Some(e) = p.equation.as_deref().filter(|&e| e != "particles") {
            return Err(Error::OutOfRange {
                field: "problem.equation".into(),
                value: format!("\"{e}\""),
                allowed: "\"particles\" (a kernel sum over particles, the default) or \"poisson\" (a grid Poisson \
                          problem)"
                    .into(),
            });
        }
        if let Some(m) = p.method.as_deref().filter(|&m| m != "ewald" && m != "auto") {
            return Err(Error::OutOfRange {
                field: "problem.method".into(),
                value: format!("\"{m}\""),
                allowed: "\"ewald\" (spectral Ewald, the default), \"treecode\" (free-space BLDTT), \"fmm\" \
                          (free-space FMM) or \"auto\" (the fastest by the cost models)"
                    .into(),
            });
        }
        three_entries("problem.box", p.box_lengths.len(), format!("{:?}", p.box_lengths))?;
        three_entries("problem.periodic", p.periodic.len(), format!("{:?}", p.periodic))?;
        if cfg.run.repeat == Some(0) {
            return Err(repeat_error("run.repeat"));
        }
        Ok(cfg)
    }
}

/// Errors unless a per-axis list (`field`, `len` entries, shown as `shown`) has exactly 3
/// entries, one per axis.
pub fn three_entries(field: &str, len: usize, shown: String) -> Result<()> {
    if len == 3 {
        Ok(())
    } else {
        Err(Error::Shape {
            field: field.into(),
            expected: "3 entries, one per axis (x, y, z)".into(),
            found: format!("{len} entr{}: {shown}", if len == 1 { "y" } else { "ies" }),
        })
    }
}

/// The `equation` of a run.toml's `[problem]` table (`None`: absent, a particle run), read
/// before the rest so that each kind of run parses its own schema.
pub fn equation(text: &str, path: &Path) -> Result<Option<String>> {
    let table: toml::Table =
        toml::from_str(text).map_err(|e| Error::Config { path: path.into(), message: e.to_string() })?;
    Ok(table.get("problem").and_then(|p| p.get("equation")).and_then(|e| e.as_str()).map(str::to_string))
}

/// `repeat = 0` (run.toml) or `--repeat 0`: a run evaluates at least once.
pub fn repeat_error(field: &str) -> Error {
    Error::OutOfRange {
        field: field.into(),
        value: "0".into(),
        allowed: "at least 1 (evaluations with one plan)".into(),
    }
}

/// `path` relative to the directory of the run.toml `base`.
pub fn resolve(base: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.into()
    } else {
        base.parent().unwrap_or(Path::new(".")).join(path)
    }
}
