//! `parki-dist calibrate`: this machine's constants of the spectral Ewald sum's cost model
//! ([`CostModel`]), measured once and saved to a file that later runs read.
//!
//! The parameter selection ([`parki_farfield::select`]) picks the cell size, the grid and the
//! window by predicted seconds per stage, `c_stage x work`. The built-in constants were measured
//! on one machine (docs/performance.md §4); on another the stages' ratios differ (an Intel Xeon
//! measured P2P at 1.5-2.3x and the FFT at 1.45x the built-in constants, docs/performance.md
//! §7.8), and with them the best parameters. `parki-dist calibrate` measures the constants
//! here, as thread-seconds on the threads the runs will use (`wall x threads`: the stages' own
//! parallel efficiency enters each constant):
//!
//! - per kernel, P2P per pair, P2G per `source P^3 component`, G2P per `target P^3 component`;
//!   the FFT per `point log2(points) component`, CNV per mode: evaluations of uniform particles
//!   in the unit cube (3P) at tolerances 1e-6 and 1e-9, each stage's time the second
//!   evaluation's, each constant the mean over the two tolerances;
//! - the plan with free axes: the kernel tables of a 0P and a 1P case against their built-in
//!   model ([`parki_farfield::FreeGrid::plan_seconds`]) as one ratio, and fresh memory's page
//!   faults per byte (a buffer allocated and first written by the threads).
//!
//! The file (TOML, [`Calibration::to_toml`]) names the CPU, the instruction set and the threads
//! it was measured on. `[ewald] cost_model` chooses what a run uses ([`resolve`]): `"auto"`
//! (default) the file at [`default_path`] when it exists and was measured on this CPU model and
//! instruction set, else the built-in constants; `"builtin"`; or a path. The report's
//! `cost_model` section says which, and why.

use std::path::{Path, PathBuf};
use std::time::Instant;

use parki_comm::Comm;
use parki_core::{Domain, Error, Kernel, Par, Result, Sources};
use parki_dist::{CostModel, EwaldOptions, EwaldSolver, EwaldStage, Isa, Targets};
use parki_farfield::{FreeCnv, FreeGrid, KaiserBessel};
use parki_nearfield::PairAccuracy;
use parki_reference::generate::{self, Distribution, Rng};
use serde::Deserialize;
use serde_json::{json, Value};

/// The environment variable naming the calibration file (over [`default_path`]'s cache path).
pub const FILE_ENV: &str = "PARKI_COST_MODEL";

/// The calibration file `parki-dist calibrate` writes and `cost_model = "auto"` reads:
/// `$PARKI_COST_MODEL`, else `$XDG_CACHE_HOME/parki/cost-model.toml`, else
/// `$HOME/.cache/parki/cost-model.toml` (`None` without any of them).
pub fn default_path() -> Option<PathBuf> {
    env_path(FILE_ENV).or_else(|| Some(cache_folder()?.join("cost-model.toml")))
}

/// The environment variable `name` as a path (`None` when unset or empty).
pub(crate) fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// This machine's parki cache folder: `$XDG_CACHE_HOME/parki`, else `$HOME/.cache/parki`
/// (`None` without either): the cost model's file and the FFTW wisdom ([`crate::wisdom`]).
pub fn cache_folder() -> Option<PathBuf> {
    Some(env_path("XDG_CACHE_HOME").or_else(|| env_path("HOME").map(|h| h.join(".cache")))?.join("parki"))
}

/// This machine's CPU model (`model name` of /proc/cpuinfo; `"unknown"` without it).
pub fn this_cpu() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string())
}

/// A measured cost model and the machine it belongs to.
#[derive(Clone, Debug, PartialEq)]
pub struct Calibration {
    /// The CPU model ([`this_cpu`]).
    pub cpu: String,
    /// P2P's instruction set ([`Isa::name`]).
    pub isa: String,
    /// Threads the constants were measured on.
    pub threads: usize,
    /// Particles of the evaluations measured.
    pub particles: usize,
    /// When (seconds since the Unix epoch).
    pub unix_time: u64,
    /// The constants (thread-seconds, as nanoseconds per unit of work).
    pub cost: CostModel,
}

/// The file's layout (every key required, none unknown).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileLayout {
    machine: MachineSection,
    cost: CostSection,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MachineSection {
    cpu: String,
    isa: String,
    threads: usize,
    particles: usize,
    unix_time: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CostSection {
    p2p_pair: [f64; 4],
    p2g: [f64; 4],
    fft: f64,
    cnv: f64,
    g2p: [f64; 4],
    f32_ratio: f64,
    plan_tables: f64,
    plan_touch: f64,
}

impl Calibration {
    /// The file's text: the machine, then the constants, each with its unit.
    pub fn to_toml(&self) -> String {
        let c = &self.cost;
        let four = |v: &[f64; 4]| format!("[{:.4}, {:.4}, {:.4}, {:.4}]", v[0], v[1], v[2], v[3]);
        let lines = [
            ("p2p_pair", four(&c.p2p_pair), "per pair, padding included"),
            ("p2g", four(&c.p2g), "per source, P^3 and grid component"),
            ("fft", format!("{:.4}", c.fft), "per point, log2(points) and component"),
            ("cnv", format!("{:.4}", c.cnv), "per half-spectrum mode"),
            ("g2p", four(&c.g2p), "per target, P^3 and output component"),
            ("f32_ratio", format!("{:.4}", c.f32_ratio), "f32 over f64 (built-in)"),
            ("plan_tables", format!("{:.4}", c.plan_tables), "free axes' kernel tables over the built-in model"),
            ("plan_touch", format!("{:.4}", c.plan_touch), "per byte of fresh grid memory"),
        ];
        let cost: String =
            lines.iter().map(|(k, v, what)| format!("{:<52} # {what}\n", format!("{k} = {v}"))).collect();
        format!(
            "# parki-dist calibrate: the spectral Ewald sum's cost constants on this machine, in ns of\n\
             # thread time (wall x threads) per unit of work; per-kernel arrays: laplace, stokeslet,\n\
             # stresslet, stokes. Runs read it with [ewald] cost_model = \"auto\" (the default) when\n\
             # the CPU and the instruction set match. docs/design.md, \"Calibrated cost constants\".\n\
             [machine]\n\
             cpu = {cpu:?}\n\
             isa = {isa:?}\n\
             threads = {threads}\n\
             particles = {particles}\n\
             unix_time = {time}\n\
             \n\
             [cost]\n\
             {cost}",
            cpu = self.cpu,
            isa = self.isa,
            threads = self.threads,
            particles = self.particles,
            time = self.unix_time,
        )
    }

    /// Parses a calibration file's text; errors name `path` and the key.
    ///
    /// # Errors
    /// TOML that does not parse, a missing or unknown key, or a constant that is not a finite
    /// positive number.
    pub fn parse(text: &str, path: &Path) -> Result<Self> {
        let field = |key: &str| format!("{} ({key})", path.display());
        let f: FileLayout = toml::from_str(text).map_err(|e| Error::OutOfRange {
            field: field("calibration file"),
            value: e.message().to_string(),
            allowed: "the TOML `parki-dist calibrate` writes ([machine] and [cost])".into(),
        })?;
        let c = &f.cost;
        let arrays = [("p2p_pair", c.p2p_pair), ("p2g", c.p2g), ("g2p", c.g2p)];
        let scalars = [
            ("fft", c.fft),
            ("cnv", c.cnv),
            ("f32_ratio", c.f32_ratio),
            ("plan_tables", c.plan_tables),
            ("plan_touch", c.plan_touch),
        ];
        let named = arrays.iter().flat_map(|(k, v)| v.iter().map(move |x| (*k, *x))).chain(scalars);
        for (key, v) in named {
            if !(v.is_finite() && v > 0.0) {
                return Err(Error::OutOfRange {
                    field: field(&format!("cost.{key}")),
                    value: format!("{v}"),
                    allowed: "finite positive nanoseconds (run parki-dist calibrate again)".into(),
                });
            }
        }
        if f.machine.threads == 0 {
            return Err(Error::OutOfRange {
                field: field("machine.threads"),
                value: "0".into(),
                allowed: "the threads it was measured on, at least 1".into(),
            });
        }
        let cost = CostModel {
            p2p_pair: c.p2p_pair,
            p2g: c.p2g,
            fft: c.fft,
            cnv: c.cnv,
            g2p: c.g2p,
            f32_ratio: c.f32_ratio,
            plan_tables: c.plan_tables,
            plan_touch: c.plan_touch,
            ..CostModel::default()
        };
        Ok(Self {
            cpu: f.machine.cpu,
            isa: f.machine.isa,
            threads: f.machine.threads,
            particles: f.machine.particles,
            unix_time: f.machine.unix_time,
            cost,
        })
    }

    /// Reads and parses the file at `path`.
    ///
    /// # Errors
    /// A missing or unreadable file (named), or [`Calibration::parse`]'s.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Io { path: path.to_path_buf(), message: e.to_string() })?;
        Self::parse(&text, path)
    }

    /// Writes the file at `path` (its folder made if missing) through a temporary file renamed
    /// into place: a failed write leaves no partial file.
    ///
    /// # Errors
    /// The folder or the file cannot be written (named).
    pub fn save(&self, path: &Path) -> Result<()> {
        let io = |p: &Path, e: std::io::Error| Error::Io { path: p.to_path_buf(), message: e.to_string() };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        }
        let name = path.file_name().map_or_else(|| "cost-model.toml".into(), |n| n.to_string_lossy().into_owned());
        let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
        std::fs::write(&tmp, self.to_toml()).map_err(|e| io(&tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            io(path, e)
        })
    }

    /// The report's description of the machine and the constants.
    pub fn to_json(&self) -> Value {
        let c = &self.cost;
        json!({
            "cpu": self.cpu,
            "isa": self.isa,
            "threads": self.threads,
            "particles": self.particles,
            "unix_time": self.unix_time,
            "constants_ns": {
                "p2p_pair": c.p2p_pair, "p2g": c.p2g, "fft": c.fft, "cnv": c.cnv, "g2p": c.g2p,
                "f32_ratio": c.f32_ratio, "plan_tables": c.plan_tables, "plan_touch": c.plan_touch,
            },
        })
    }
}

/// Mean of the values.
fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// Measures this machine's constants on `threads` threads with `particles` uniform particles
/// (see the module documentation); `progress` gets a line per measurement.
///
/// # Errors
/// Fewer than 1000 particles or no thread; a plan or an evaluation that fails.
pub fn measure(threads: usize, particles: usize, progress: &mut dyn FnMut(&str)) -> Result<Calibration> {
    if particles < 1000 {
        return Err(Error::OutOfRange {
            field: "calibrate --particles".into(),
            value: particles.to_string(),
            allowed: "at least 1000 (default 200000)".into(),
        });
    }
    if threads == 0 {
        return Err(Error::OutOfRange {
            field: "calibrate --threads".into(),
            value: "0".into(),
            allowed: "at least 1".into(),
        });
    }
    let domain = Domain::triply_periodic([1.0; 3])?;
    let mut rng = Rng::new(3);
    let pos = generate::positions(&domain, Distribution::Uniform, particles, &mut rng);
    let q = generate::neutral_scalars(particles, &mut rng);
    let f = generate::neutral_vectors(particles, &mut rng);
    let d = generate::normal_vectors(particles, &mut rng);
    let nrm: Vec<[f64; 3]> = (0..particles).map(|_| generate::unit_vector(&mut rng)).collect();
    let src = Sources { positions: &pos, charges: Some(&q), forces: Some(&f), dipoles: Some(&d), normals: Some(&nrm) };
    let tt = threads as f64;
    let n = particles as f64;
    let (mut p2p, mut p2g, mut g2p) = ([0.0; 4], [0.0; 4], [0.0; 4]);
    let (mut fft, mut cnv) = (Vec::new(), Vec::new());
    let mut isa = Isa::detect();
    for (k, kernel) in Kernel::ALL.iter().enumerate() {
        for tol in [1e-6, 1e-9] {
            // the full pair functions: the plan scales them for the looser ones (PairAccuracy::cost)
            let mut opts = EwaldOptions::new(*kernel, domain, tol).pair_accuracy(PairAccuracy::Full);
            opts.threads = threads;
            let mut solver = EwaldSolver::<f64>::new(&opts, particles, particles)?;
            isa = solver.isa();
            let mut u = vec![0.0; particles * kernel.output_dim()];
            // the first evaluation faults in the scratch memory; the second is measured
            solver.evaluate(&src, Targets::Sources, &mut u)?;
            let ev = solver.evaluate(&src, Targets::Sources, &mut u)?;
            let par = solver.params();
            let p3 = (par.p * par.p * par.p) as f64;
            let (ncomp, dim) = (kernel.grid_components() as f64, kernel.output_dim() as f64);
            let half = ((par.grid[0] / 2 + 1) * par.grid[1] * par.grid[2]) as f64;
            let t = |s: EwaldStage| ev.times.get(s) * tt * 1e9;
            p2p[k] += 0.5 * t(EwaldStage::P2P) / ev.pairs.max(1) as f64;
            p2g[k] += 0.5 * t(EwaldStage::P2G) / (n * p3 * ncomp);
            g2p[k] += 0.5 * t(EwaldStage::G2P) / (n * p3 * dim);
            fft.push(
                (t(EwaldStage::FFT) + t(EwaldStage::IFFT)) / (parki_decomp::fft_grid_work(par.grid) * (ncomp + dim)),
            );
            cnv.push(t(EwaldStage::CNV) / half);
            progress(&format!(
                "{} tol {tol:.0e}: grid {:?}, P {}, {:.3e} pairs; P2P {:.3} s, P2G {:.3} s, FFT+IFFT {:.3} s, CNV {:.3} s, G2P {:.3} s",
                kernel.name(),
                par.grid,
                par.p,
                ev.pairs as f64,
                ev.times.get(EwaldStage::P2P),
                ev.times.get(EwaldStage::P2G),
                ev.times.get(EwaldStage::FFT) + ev.times.get(EwaldStage::IFFT),
                ev.times.get(EwaldStage::CNV),
                ev.times.get(EwaldStage::G2P),
            ));
        }
    }
    let plan_tables = measure_tables(threads, progress)?;
    let plan_touch = measure_touch(threads, progress);
    let unix_time = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let cost = CostModel {
        p2p_pair: p2p,
        p2g,
        fft: mean(&fft),
        cnv: mean(&cnv),
        g2p,
        plan_tables,
        plan_touch,
        ..CostModel::default()
    };
    Ok(Calibration { cpu: this_cpu(), isa: isa.name().to_string(), threads, particles, unix_time, cost })
}

/// The free axes' kernel tables of a 0P Laplace case (grid 160) and a 1P Stokeslet case (grid
/// 64), made on `threads` threads: their thread-seconds over the built-in model's seconds.
fn measure_tables(threads: usize, progress: &mut dyn FnMut(&str)) -> Result<f64> {
    let comm = Comm::single();
    let par = Par::with_threads(threads);
    let (p, tol) = (8, 1e-6);
    let kb = KaiserBessel::new(p);
    let (mut measured, mut model) = (0.0, 0.0);
    for (periodic, kernel, grid) in
        [([false; 3], Kernel::Laplace, 160usize), ([true, false, false], Kernel::Stokeslet, 64usize)]
    {
        let h = 1.0 / grid as f64;
        let xi = 0.4 * grid as f64;
        let free = FreeGrid::new(periodic, [grid; 3], [h; 3], p, xi, tol);
        // the spectral block of one rank, as the solver's transform lays it out
        let limits = parki_fft3d::proc_grid_limits_in_order(&free.axes(), [0, 1, 2], false);
        let pg = parki_decomp::ProcGrid::choose(1, parki_decomp::Decomposition::Auto, None, limits)?;
        let opts = parki_fft3d::DistFftOptions { threads, ..parki_fft3d::DistFftOptions::new(1) };
        let block =
            parki_fft3d::DistFft::<f64>::with_axes_in_order(&comm, free.axes(), [0, 1, 2], pg, opts)?.spectral_layout();
        let t = Instant::now();
        let tables = FreeCnv::<f64>::new(kernel, false, &free, [1.0; 3], &kb, xi, &block, &comm, par)?;
        let seconds = t.elapsed().as_secs_f64();
        drop(tables);
        let predicted = free.plan_seconds(kernel, false);
        progress(&format!(
            "kernel tables {} {}^3 ({}): {seconds:.3} s on {threads} thread(s), built-in model {predicted:.3} s on one",
            kernel.name(),
            grid,
            if periodic[0] { "1P" } else { "0P" },
        ));
        measured += seconds * threads as f64;
        model += predicted;
    }
    Ok(measured / model)
}

/// Fresh memory's cost, ns of thread time per byte: a 512 MB buffer allocated (mapped, not
/// touched) and first written by `threads` threads, as the plan's grids are; the mean of two.
fn measure_touch(threads: usize, progress: &mut dyn FnMut(&str)) -> f64 {
    use rayon::prelude::{IndexedParallelIterator, ParallelIterator, ParallelSliceMut};
    const BYTES: usize = 512 << 20;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().ok();
    let touch = || {
        let t = Instant::now();
        let mut buf = vec![0u64; BYTES / 8];
        buf.par_chunks_mut(1 << 16).enumerate().for_each(|(i, c)| c.fill(i as u64 + 1));
        let seconds = t.elapsed().as_secs_f64();
        std::hint::black_box(&buf);
        seconds
    };
    // twice, the mean kept: on a virtual machine the first may meet memory the host has not
    // backed yet (3-7x dearer, docs/performance.md §7.8), as a plan's grids of several GB do
    let seconds = (0..2).map(|_| pool.as_ref().map_or_else(touch, |p| p.install(touch))).sum::<f64>() / 2.0;
    progress(&format!("fresh memory: {:.3} s per GB on {threads} thread(s)", seconds / (BYTES as f64 / 1e9)));
    seconds * threads as f64 * 1e9 / BYTES as f64
}

/// The cost constants a run uses and where they came from.
#[derive(Clone, Debug)]
pub struct CostChoice {
    /// The constants (`None`: the backend's own, on the CPU the built-in ones).
    pub cost: Option<CostModel>,
    /// The report's `cost_model` section.
    pub report: Value,
    /// The progress line.
    pub line: String,
    /// A warning for the report (a file measured on another machine or thread count).
    pub warning: Option<String>,
}

/// Resolves `[ewald] cost_model` (`setting`; `None` is `"auto"`) for a run on `threads` threads
/// per rank; `base` is the run.toml's folder (relative paths). Rank 0 reads the file and sends
/// it to the others, so that every rank chooses the same parameters.
///
/// # Errors
/// A path that is missing or does not parse (named with `ewald.cost_model`); on every rank.
pub fn resolve(comm: &Comm, setting: Option<&str>, base: &Path, threads: usize) -> Result<CostChoice> {
    resolve_with(comm, setting, base, threads, default_path())
}

/// [`resolve`] with `"auto"`'s file at `default` (`None`: no cache folder).
fn resolve_with(
    comm: &Comm,
    setting: Option<&str>,
    base: &Path,
    threads: usize,
    default: Option<PathBuf>,
) -> Result<CostChoice> {
    let builtin = |why: &str| CostChoice {
        cost: None,
        report: json!({"source": "built-in", "reason": why}),
        line: format!("cost model: built-in constants ({why})"),
        warning: None,
    };
    let (path, explicit) = match setting.unwrap_or("auto") {
        "builtin" => return Ok(builtin("ewald.cost_model = \"builtin\"")),
        "auto" => match default {
            Some(p) => (p, false),
            None => return Ok(builtin("no calibration file: neither $PARKI_COST_MODEL nor a cache folder is set")),
        },
        other => (base.join(other), true),
    };
    // rank 0 reads; one message takes every rank its bytes (tag 1) or its error (tag 0)
    let mut message = Vec::new();
    if comm.rank() == 0 {
        message = match std::fs::read(&path) {
            Ok(b) => [vec![1], b].concat(),
            Err(e) => [vec![0], e.to_string().into_bytes()].concat(),
        };
    }
    comm.broadcast_bytes(0, &mut message);
    let (tag, bytes) = message.split_first().map_or((0, &[][..]), |(t, b)| (*t, b));
    if tag == 0 {
        let error = String::from_utf8_lossy(bytes).into_owned();
        if explicit {
            return Err(Error::OutOfRange {
                field: "ewald.cost_model".into(),
                value: path.display().to_string(),
                allowed: format!(
                    "\"auto\", \"builtin\" or a calibration file written by parki-dist calibrate (reading it: {error})"
                ),
            });
        }
        return Ok(builtin(&format!("no calibration file at {} (parki-dist calibrate writes one)", path.display())));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| Error::OutOfRange {
        field: format!("{} (calibration file)", path.display()),
        value: "bytes that are not UTF-8".into(),
        allowed: "the TOML parki-dist calibrate writes".into(),
    })?;
    let cal = Calibration::parse(text, &path)?;
    let (cpu, isa) = (this_cpu(), Isa::detect().name().to_string());
    let same_machine = cal.cpu == cpu && cal.isa == isa;
    if !same_machine && !explicit {
        let mut c = builtin(&format!(
            "the calibration file {} was measured on {} ({}), this is {cpu} ({isa})",
            path.display(),
            cal.cpu,
            cal.isa
        ));
        c.warning = Some(format!(
            "cost model: {} was measured on another CPU ({}); the built-in constants are used (run parki-dist calibrate here)",
            path.display(),
            cal.cpu
        ));
        return Ok(c);
    }
    let mut notes = Vec::new();
    if !same_machine {
        notes.push(format!("measured on {} ({}), this is {cpu} ({isa})", cal.cpu, cal.isa));
    }
    if cal.threads != threads {
        notes.push(format!("measured on {} thread(s), this run uses {threads}", cal.threads));
    }
    let warning = (!notes.is_empty()).then(|| format!("cost model {}: {}", path.display(), notes.join("; ")));
    let mut report = cal.to_json();
    report["source"] = json!("calibrated");
    report["path"] = json!(path.display().to_string());
    Ok(CostChoice {
        cost: Some(cal.cost),
        report,
        line: format!(
            "cost model: calibrated on this machine ({}, {} thread(s), {} particles): {}",
            cal.cpu,
            cal.threads,
            cal.particles,
            path.display()
        ),
        warning,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Calibration {
        Calibration {
            cpu: "Test CPU @ 1 GHz".into(),
            isa: "avx2".into(),
            threads: 3,
            particles: 20_000,
            unix_time: 1_800_000_000,
            cost: CostModel {
                p2p_pair: [4.8, 4.9, 6.7, 6.8],
                p2g: [0.63, 0.52, 0.68, 0.68],
                fft: 0.49,
                cnv: 11.0,
                g2p: [0.44, 0.48, 0.49, 0.52],
                plan_tables: 1.25,
                plan_touch: 0.9,
                ..CostModel::default()
            },
        }
    }

    #[test]
    fn the_file_reads_back_what_was_written() {
        let c = sample();
        let back = Calibration::parse(&c.to_toml(), Path::new("c.toml")).expect("parses");
        assert_eq!(back.cpu, c.cpu);
        assert_eq!(
            (back.isa.as_str(), back.threads, back.particles, back.unix_time),
            ("avx2", 3, 20_000, 1_800_000_000)
        );
        assert_eq!(back.cost.p2p_visit, CostModel::default().p2p_visit);
        let (a, b) = (back.cost, c.cost);
        let pairs = a.p2p_pair.iter().chain(&a.p2g).chain(&a.g2p).zip(b.p2p_pair.iter().chain(&b.p2g).chain(&b.g2p));
        for (x, y) in pairs {
            assert!((x - y).abs() < 1e-4, "{x} against {y}");
        }
        for (x, y) in [(a.fft, b.fft), (a.cnv, b.cnv), (a.plan_tables, b.plan_tables), (a.plan_touch, b.plan_touch)] {
            assert!((x - y).abs() < 1e-4, "{x} against {y}");
        }
    }

    #[test]
    fn bad_files_name_the_file_and_the_key() {
        let text = sample().to_toml();
        let path = Path::new("/x/cost-model.toml");
        let zero = text.replace("cnv = 11.0000", "cnv = 0.0");
        let e = Calibration::parse(&zero, path).expect_err("zero constant").to_string();
        assert!(e.contains("/x/cost-model.toml") && e.contains("cost.cnv"), "{e}");
        let missing = text.replace("fft = 0.4900", "");
        let e = Calibration::parse(&missing, path).expect_err("missing key").to_string();
        assert!(e.contains("/x/cost-model.toml") && e.contains("fft"), "{e}");
        let extra = text.replace("[cost]", "[cost]\nspeed = 2.0");
        let e = Calibration::parse(&extra, path).expect_err("unknown key").to_string();
        assert!(e.contains("speed"), "{e}");
        let short = text.replace("p2p_pair = [4.8000, 4.9000, 6.7000, 6.8000]", "p2p_pair = [4.8, 4.9]");
        assert!(Calibration::parse(&short, path).is_err());
    }

    #[test]
    fn resolve_reads_a_path_and_refuses_a_missing_one() {
        let dir = std::env::temp_dir().join(format!("parki-cal-{}", std::process::id()));
        let path = dir.join("sub").join("c.toml");
        let mut c = sample();
        c.cpu = this_cpu();
        c.isa = Isa::detect().name().to_string();
        c.save(&path).expect("saves");
        let comm = Comm::single();
        let got = resolve(&comm, Some("sub/c.toml"), &dir, 3).expect("resolves");
        assert_eq!(got.cost.map(|k| k.cnv), Some(11.0));
        assert_eq!(got.report["source"], "calibrated");
        assert!(got.warning.is_none(), "{:?}", got.warning);
        let other = resolve(&comm, Some("sub/c.toml"), &dir, 2).expect("resolves");
        assert!(other.warning.as_deref().is_some_and(|w| w.contains("3 thread(s)")), "{:?}", other.warning);
        let e = resolve(&comm, Some("nope.toml"), &dir, 3).expect_err("missing").to_string();
        assert!(e.contains("ewald.cost_model") && e.contains("nope.toml"), "{e}");
        let b = resolve(&comm, Some("builtin"), &dir, 3).expect("builtin");
        assert!(b.cost.is_none() && b.report["source"] == "built-in");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn auto_uses_the_cache_file_of_this_cpu_only() {
        let dir = std::env::temp_dir().join(format!("parki-cal-auto-{}", std::process::id()));
        let path = dir.join("c.toml");
        let comm = Comm::single();
        // no file: the built-in constants, saying where it looked
        let none = resolve_with(&comm, None, &dir, 3, Some(path.clone())).expect("resolves");
        assert!(none.cost.is_none() && none.line.contains("no calibration file"), "{}", none.line);
        // a file of another CPU: not used by "auto" (a warning says so), used by its path
        sample().save(&path).expect("saves");
        let other = resolve_with(&comm, Some("auto"), &dir, 3, Some(path.clone())).expect("resolves");
        assert!(other.cost.is_none() && other.warning.as_deref().is_some_and(|w| w.contains("Test CPU")));
        let explicit = resolve_with(&comm, Some("c.toml"), &dir, 3, None).expect("resolves");
        assert!(explicit.cost.is_some() && explicit.warning.as_deref().is_some_and(|w| w.contains("Test CPU")));
        // this CPU's file: used
        let mut here = sample();
        here.cpu = this_cpu();
        here.isa = Isa::detect().name().to_string();
        here.save(&path).expect("saves");
        let used = resolve_with(&comm, None, &dir, 3, Some(path.clone())).expect("resolves");
        assert_eq!(used.cost, Some(here.cost));
        assert_eq!(used.report["path"], path.display().to_string());
        std::fs::remove_dir_all(&dir).ok();
    }
}
