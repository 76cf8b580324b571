//! `parki-dist run` for `[problem] equation = "poisson"`: `lap(phi) = f` on a uniform grid with
//! per-axis boundary conditions ([`parki_poisson::PoissonSolver`]), a scalar, a vector (three
//! components in one solve) or the rotational mode (`u = curl(psi)`, `lap(psi) = -f`).
//!
//! The right-hand side is a `.npy` grid file (`(n0, n1, n2)` or `(n0, n1, n2, 3)`, float64 or
//! float32, C order, axis 0 slowest), of which each rank reads only its own block, or one of the
//! validation's manufactured fields with its exact solution ([`parki_poisson::fields`]), whose
//! error the run then reports. The solution is written in the same layout, each rank writing
//! its block into one file. As for particle runs: the outputs are settled before anything is
//! read, every failure is agreed on by all ranks, rank 0 prints progress and the per-stage
//! table (min/avg/max over ranks) with the bytes of each switch.

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use parki_comm::{Comm, StageStats, TrafficStats};
use parki_core::{Error, Result, StageKind, StageName};
use parki_fft3d::{FftStage, LineEngine, PlanRigor, R2rMethod};
use parki_poisson::fields::{curl, Manufactured, Sample, COMPONENT_AMPLITUDES};
use parki_poisson::{Bc, Centering, Differentiation, FieldMode, GreenKind, PoissonOptions, PoissonSolver};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::app::{check_grid, parallel_options, plural, warn, word, Log, RunArgs, RunSummary};
use crate::config::{repeat_error, resolve, three_entries, ParallelSection};
use crate::npy;
use crate::outputs::{self, OutputPaths, Staged};
use crate::report::{self, communication, min_avg_max, Provenance};
use crate::wisdom::Wisdom;

/// A Poisson run.toml.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoissonConfig {
    /// `[problem]`.
    pub problem: PoissonProblem,
    /// `[input]`.
    pub input: PoissonInput,
    /// `[output]`.
    #[serde(default)]
    pub output: PoissonOutput,
    /// `[run]`.
    #[serde(default)]
    pub run: PoissonRun,
    /// `[parallel]`.
    #[serde(default)]
    pub parallel: ParallelSection,
}

/// `[problem]` of a Poisson run.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoissonProblem {
    /// `"poisson"`.
    pub equation: String,
    /// Box side lengths (3).
    #[serde(rename = "box")]
    pub box_lengths: Vec<f64>,
    /// Cells per axis (3).
    pub grid: Vec<i64>,
    /// `"cell"` (default) or `"node"`.
    pub centering: Option<String>,
    /// Per axis `[low, high]`; a side is a word (every component) or three words (one per
    /// component of a vector or curl field).
    pub bc: toml::Value,
    /// The Green's function (default `"chat2"`).
    pub green: Option<String>,
    /// HEJ smoothing ratio `eps / h` (default 2).
    pub alpha: Option<f64>,
    /// `"scalar"` (default), `"vector"` or `"curl"`.
    pub field: Option<String>,
    /// The curl's derivatives: `"spectral"` (default) or `"fd2"`.
    pub differentiation: Option<String>,
}

/// `[input]`: a file or a generated field.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoissonInput {
    /// The right-hand side, `.npy`.
    pub rhs: Option<PathBuf>,
    /// `generate = { field = "blob" }`.
    pub generate: Option<GenerateField>,
}

/// `generate = { field = "blob", amplitude = 1.0 }`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenerateField {
    /// `"blob"`: the validation's manufactured solution for the boundary conditions.
    pub field: String,
    /// Amplitude of the solution (default 1).
    pub amplitude: Option<f64>,
}

/// `[output]` of a Poisson run.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoissonOutput {
    /// The solution, `.npy`, the right-hand side's layout.
    pub solution: Option<PathBuf>,
    /// JSON report.
    pub report: Option<PathBuf>,
}

/// `[run]` of a Poisson run.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoissonRun {
    /// Threads of the transforms (default 1 per rank).
    pub threads: Option<usize>,
    /// Solves with one plan (timings of the last).
    pub repeat: Option<usize>,
    /// FFTW planning: `"estimate"` (default), `"measure-lines"` or `"measure"`.
    pub fft_plan: Option<String>,
    /// `"rustfft"` (default) or `"fftw"`: what transforms the strided passes' complex lines.
    pub fft_lines: Option<String>,
    /// DCT/DST-II, III and IV: `"fft"` (default, through FFTs) or `"fftw"` (FFTW's r2r).
    pub r2r: Option<String>,
    /// FFTW wisdom folder: `"auto"` (default), `"off"` or a folder ([`crate::wisdom`]).
    pub fftw_wisdom: Option<String>,
}

impl PoissonConfig {
    /// Reads and parses `path`.
    pub fn load(path: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).map_err(|e| Error::Io { path: path.into(), message: e.to_string() })?;
        let cfg: PoissonConfig =
            toml::from_str(&text).map_err(|e| Error::Config { path: path.into(), message: e.to_string() })?;
        if cfg.run.repeat == Some(0) {
            return Err(repeat_error("run.repeat"));
        }
        Ok(cfg)
    }

    /// The solver options the file asks for (every field checked and named in errors).
    pub fn options(&self, threads: Option<usize>) -> Result<PoissonOptions> {
        let p = &self.problem;
        three_entries("problem.box", p.box_lengths.len(), format!("{:?}", p.box_lengths))?;
        three_entries("problem.grid", p.grid.len(), format!("{:?}", p.grid))?;
        if let Some(i) = (0..3).find(|&i| p.grid[i] < 1) {
            return Err(Error::OutOfRange {
                field: format!("problem.grid[{i}]"),
                value: p.grid[i].to_string(),
                allowed: "at least one cell".into(),
            });
        }
        if let Some(i) = (0..3).find(|&i| !(p.box_lengths[i].is_finite() && p.box_lengths[i] > 0.0)) {
            return Err(Error::OutOfRange {
                field: format!("problem.box[{i}]"),
                value: p.box_lengths[i].to_string(),
                allowed: "a positive finite length".into(),
            });
        }
        let centering = word("problem.centering", p.centering.as_deref(), Centering::parse, "\"cell\" or \"node\"")?
            .unwrap_or(Centering::Cell);
        let field = p.field.as_deref().unwrap_or("scalar");
        let diff = word(
            "problem.differentiation",
            p.differentiation.as_deref(),
            Differentiation::parse,
            "\"spectral\" or \"fd2\"",
        )?;
        let mode = match field {
            "scalar" => FieldMode::Scalar,
            "vector" => FieldMode::Vector,
            "curl" => FieldMode::Curl(diff.unwrap_or(Differentiation::Spectral)),
            f => {
                return Err(Error::OutOfRange {
                    field: "problem.field".into(),
                    value: format!("\"{f}\""),
                    allowed: "\"scalar\", \"vector\" or \"curl\" (u = curl psi, lap psi = -f)".into(),
                })
            }
        };
        if diff.is_some() && !matches!(mode, FieldMode::Curl(_)) {
            return Err(Error::OutOfRange {
                field: "problem.differentiation".into(),
                value: format!("\"{}\"", p.differentiation.as_deref().unwrap_or("")),
                allowed: "only with field = \"curl\"".into(),
            });
        }
        let (bc, component_bc) = parse_bc(&p.bc, mode.components())?;
        let lengths = [0, 1, 2].map(|i| p.box_lengths[i]);
        let cells = [0, 1, 2].map(|i| p.grid[i] as usize);
        let mut o = PoissonOptions::new(lengths, cells, bc);
        o.component_bc = component_bc;
        o.field = mode;
        o.centering = centering;
        o.green = word(
            "problem.green",
            p.green.as_deref(),
            GreenKind::parse,
            "\"chat2\", \"hej2\", \"hej4\", \"hej6\", \"hej8\", \"hej10\", \"hej0\" or \"lgf2\"",
        )?
        .unwrap_or(GreenKind::Chat2);
        if let Some(a) = p.alpha {
            o.alpha = a;
        }
        o.threads = threads.or(self.run.threads).unwrap_or(1).max(1);
        o.rigor =
            word("run.fft_plan", self.run.fft_plan.as_deref(), PlanRigor::parse, PlanRigor::NAMES)?.unwrap_or_default();
        o.lines = word("run.fft_lines", self.run.fft_lines.as_deref(), LineEngine::parse, LineEngine::NAMES)?
            .unwrap_or_default();
        o.r2r = word("run.r2r", self.run.r2r.as_deref(), R2rMethod::parse, "\"fft\" or \"fftw\"")?.unwrap_or_default();
        let popts = parallel_options(&self.parallel)?;
        o.decomposition = popts.decomposition;
        o.proc_grid = popts.grid;
        o.backend = popts.backend;
        Ok(o)
    }
}

/// `problem.bc`: three `[low, high]` pairs; a side is a word or, for three components, a list
/// of three words. Returns the conditions of component 0 and, where the components differ,
/// every component's.
#[allow(clippy::type_complexity)]
fn parse_bc(v: &toml::Value, comps: usize) -> Result<([[Bc; 2]; 3], Option<[[[Bc; 2]; 3]; 3]>)> {
    const ALLOWED: &str = "three [low, high] pairs of \"per\", \"even\", \"odd\" or \"unb\" (a side may be a list \
                           of three, one per component of a vector or curl field)";
    let bad = |field: String, value: String| Error::OutOfRange { field, value, allowed: ALLOWED.into() };
    let axes = v.as_array().filter(|a| a.len() == 3).ok_or_else(|| bad("problem.bc".into(), v.to_string()))?;
    let mut out = [[[Bc::Periodic; 2]; 3]; 3];
    let mut per_component = false;
    for (a, pair) in axes.iter().enumerate() {
        let sides = pair
            .as_array()
            .filter(|s| s.len() == 2)
            .ok_or_else(|| bad(format!("problem.bc[{a}]"), pair.to_string()))?;
        for (side, s) in sides.iter().enumerate() {
            let field = format!("problem.bc[{a}][{side}]");
            let one = |w: &toml::Value| w.as_str().and_then(Bc::parse).ok_or_else(|| bad(field.clone(), w.to_string()));
            match s {
                toml::Value::Array(list) if list.len() == 3 && comps == 3 => {
                    per_component = true;
                    for c in 0..3 {
                        out[c][a][side] = one(&list[c])?;
                    }
                }
                toml::Value::Array(_) => {
                    return Err(Error::OutOfRange {
                        field,
                        value: s.to_string(),
                        allowed: if comps == 3 {
                            "a word, or a list of three (one per component)".into()
                        } else {
                            "a word (a scalar field has one condition per side)".into()
                        },
                    })
                }
                w => {
                    let b = one(w)?;
                    for o in out.iter_mut() {
                        o[a][side] = b;
                    }
                }
            }
        }
    }
    let differ = per_component && (out[1] != out[0] || out[2] != out[0]);
    Ok((out[0], differ.then_some(out)))
}

/// The right-hand side's source.
enum Rhs {
    /// A `.npy` file and its header.
    File(PathBuf, npy::Header),
    /// A manufactured field, one solution per component.
    Generated(Vec<Manufactured>),
}

/// Checks the right-hand side's file (shape, order, completeness) or generator. Local.
fn rhs_source(cfg: &PoissonConfig, config: &Path, opts: &PoissonOptions) -> Result<Rhs> {
    let comps = opts.components();
    match (&cfg.input.rhs, &cfg.input.generate) {
        (Some(_), Some(_)) | (None, None) => Err(Error::Missing {
            field: "input".into(),
            reason: "give exactly one of input.rhs (a .npy file) and input.generate".into(),
        }),
        (Some(f), None) => {
            let path = resolve(config, f);
            let h = npy::read_header(&path, "input.rhs")?;
            let n = opts.extents();
            let want: Vec<usize> = if comps == 1 { n.to_vec() } else { vec![n[0], n[1], n[2], 3] };
            if h.shape != want || h.fortran {
                return Err(Error::Shape {
                    field: format!("input.rhs ({})", path.display()),
                    expected: format!(
                        "shape {want:?} in C order (problem.grid{}{})",
                        if opts.centering == Centering::Node { " + 1 nodes per non-periodic axis" } else { "" },
                        if comps == 3 { ", 3 components" } else { "" }
                    ),
                    found: format!("shape {:?}{}", h.shape, if h.fortran { " in Fortran order" } else { "" }),
                });
            }
            npy::check_complete(&path, "input.rhs", &h)?;
            Ok(Rhs::File(path, h))
        }
        (None, Some(g)) => {
            if g.field != "blob" {
                return Err(Error::OutOfRange {
                    field: "input.generate.field".into(),
                    value: format!("\"{}\"", g.field),
                    allowed: "\"blob\" (the manufactured solution of the validation: a compact blob along \
                              unbounded axes, sines and cosines along the others)"
                        .into(),
                });
            }
            let amp = g.amplitude.unwrap_or(1.0);
            if !amp.is_finite() {
                return Err(Error::OutOfRange {
                    field: "input.generate.amplitude".into(),
                    value: amp.to_string(),
                    allowed: "a finite number".into(),
                });
            }
            let scale = |c: usize| if comps == 1 { amp } else { amp * COMPONENT_AMPLITUDES[c] };
            Ok(Rhs::Generated(
                (0..comps).map(|c| Manufactured::new(opts.lengths, opts.bc_of(c)).scaled(scale(c))).collect(),
            ))
        }
    }
}

/// The generated right-hand side and exact solution on `block`.
fn generate(
    fields: &[Manufactured],
    opts: &PoissonOptions,
    block: &[std::ops::Range<usize>; 3],
) -> (Vec<f64>, Vec<f64>) {
    let h = [0, 1, 2].map(|a| opts.lengths[a] / opts.cells[a] as f64);
    let shift = if opts.centering == Centering::Node { 0.0 } else { 0.5 };
    let len = block.iter().map(|r| r.len()).product::<usize>() * fields.len();
    let (mut f, mut exact) = (Vec::with_capacity(len), Vec::with_capacity(len));
    for i in block[0].clone() {
        for j in block[1].clone() {
            for k in block[2].clone() {
                let x = [(i as f64 + shift) * h[0], (j as f64 + shift) * h[1], (k as f64 + shift) * h[2]];
                match opts.field {
                    FieldMode::Curl(_) => {
                        let s: [Sample; 3] = [0, 1, 2].map(|c| fields[c].at(x));
                        f.extend(s.iter().map(|s| -s.laplacian));
                        exact.extend(curl(&s));
                    }
                    _ => {
                        for m in fields {
                            let s = m.at(x);
                            f.push(s.laplacian);
                            exact.push(s.value);
                        }
                    }
                }
            }
        }
    }
    (f, exact)
}

/// The solution's error against the exact one, over all ranks: relative L2 and max.
fn error(comm: &Comm, phi: &[f64], exact: &[f64]) -> (f64, f64) {
    // [squared error, squared reference, non-finite values]: a NaN in the solution is an error
    // of NaN, not one that a maximum skips
    let mut sums = [0.0, 0.0, 0.0];
    let (mut max_err, mut max_ref) = (0.0f64, 0.0f64);
    for (a, b) in phi.iter().zip(exact) {
        sums[0] += (a - b) * (a - b);
        sums[1] += b * b;
        sums[2] += f64::from(u8::from(!a.is_finite()));
        max_err = max_err.max((a - b).abs());
        max_ref = max_ref.max(b.abs());
    }
    comm.all_reduce_f64(&mut sums, parki_comm::ReduceOp::Sum);
    if sums[2] > 0.0 {
        return (f64::NAN, f64::NAN);
    }
    ((sums[0] / sums[1]).sqrt(), comm.max(max_err) / comm.max(max_ref))
}

/// Runs a Poisson run.toml on the ranks of `comm` (collective). Any rank's error is returned
/// on every rank.
pub fn run(args: &RunArgs, comm: &Comm) -> Result<RunSummary> {
    let started = SystemTime::now();
    let t0 = Instant::now();
    let log = Log { on: !args.quiet && comm.rank() == 0 };
    let cfg = comm.agree(PoissonConfig::load(&args.config))?;
    if args.repeat == Some(0) {
        return Err(repeat_error("--repeat"));
    }
    if args.check.is_some() {
        return Err(Error::OutOfRange {
            field: "--check".into(),
            value: format!("{}", args.check.unwrap_or(0)),
            allowed: "no --check for a Poisson run: input.generate reports the error against the exact solution".into(),
        });
    }
    let opts = comm.agree(cfg.options(args.threads))?;
    comm.agree(parallel_options(&cfg.parallel).and_then(|p| check_grid(p, comm.size())))?;
    let mut inputs = vec![("run.toml".to_string(), args.config.clone())];
    if let Some(f) = &cfg.input.rhs {
        inputs.push(("input.rhs".into(), resolve(&args.config, f)));
    }
    let paths = OutputPaths {
        potential: cfg.output.solution.as_ref().map(|p| resolve(&args.config, p)),
        field: None,
        report: cfg.output.report.as_ref().map(|p| resolve(&args.config, p)),
        data_field: "output.solution",
    };
    let paths = comm.agree(outputs::check_paths(&args.config, &inputs, paths))?;
    if paths.is_empty() && !args.json {
        warn(comm, "run.toml has no [output] solution or report (and no --json): only the timing table is printed");
    }
    let staged = Staged::begin(comm, &paths)?;
    let source = comm.agree(rhs_source(&cfg, &args.config, &opts))?;
    let cells = opts.cells;
    let comps = opts.components();
    log.line(&format!(
        "poisson {}x{}x{} cells ({}-centred) on {} rank{}, bc {}, green {}, field {}",
        cells[0],
        cells[1],
        cells[2],
        opts.centering.name(),
        comm.size(),
        plural(comm.size()),
        bc_text(&opts),
        opts.green.name(),
        field_name(opts.field)
    ));
    let t_plan = Instant::now();
    let base = args.config.parent().unwrap_or(Path::new("."));
    let mut wisdom = Wisdom::load::<f64>(comm, crate::wisdom::folder(cfg.run.fftw_wisdom.as_deref(), base), log);
    let heap_before = parki_core::memory::heap_in_use();
    let mut solver = comm.agree(PoissonSolver::plan(comm, opts.clone()))?;
    let heap_after = parki_core::memory::heap_in_use();
    wisdom.save::<f64>(comm, opts.rigor, log);
    let plan_seconds = comm.max(t_plan.elapsed().as_secs_f64());
    // the plan's heap growth (everything it allocated and still holds), as FLUPS's driver
    // measures it; summed over ranks
    let heap_growth = heap_before.zip(heap_after).map(|(a, b)| b.saturating_sub(a) as u64);
    let pg = solver.proc_grid();
    log.line(&format!(
        "planned in {plan_seconds:.2} s: memory order {:?}, process grid {:?} ({}), {} transform{}",
        solver.order(),
        pg.dims,
        pg.kind(),
        solver.transforms(),
        plural(solver.transforms())
    ));
    let block = solver.local_block();
    let t_read = Instant::now();
    let (rhs, exact) = match &source {
        Rhs::File(path, h) => (comm.agree(npy::read_block(path, "input.rhs", h, &block, comps))?, None),
        Rhs::Generated(fields) => {
            let (f, e) = generate(fields, &opts, &block);
            (f, Some(e))
        }
    };
    let read_seconds = comm.max(t_read.elapsed().as_secs_f64());
    log.line(&format!("right-hand side in {read_seconds:.2} s"));
    let mut phi = vec![0.0; rhs.len()];
    let repeat = args.repeat.or(cfg.run.repeat).unwrap_or(1);
    let mut report = Default::default();
    let mut last = solver.times();
    // the fastest solve, each timed on its slowest rank (FLUPS's driver reports the same)
    let mut best = f64::INFINITY;
    for r in 0..repeat {
        last = solver.times();
        comm.reset_traffic();
        let t = Instant::now();
        report = solver.solve(&rhs, &mut phi)?;
        let seconds = t.elapsed().as_secs_f64();
        best = best.min(comm.max(seconds));
        log.line(&format!("solve {} of {repeat}: {seconds:.4} s (rank 0)", r + 1));
    }
    let times = solver.times().since(&last);
    let mut warnings = Vec::new();
    if let Some(w) = wisdom.warning() {
        warn(comm, w);
        warnings.push(w.to_string());
    }
    for (c, m) in report.mean_removed.iter().enumerate() {
        if let Some(m) = m {
            let w = format!(
                "the right-hand side{} has mean {m:.6e}: with these boundary conditions lap(phi) = f has a \
                 solution only for zero mean, so the mean was removed (phi solves lap(phi) = f - mean)",
                if comps > 1 { format!(" component {c}") } else { String::new() }
            );
            warn(comm, &w);
            warnings.push(w);
        }
    }
    let stats = StageStats::reduce(comm, &times.stages());
    let traffic_stages: Vec<StageName> = FftStage::ALL.iter().map(|&s| StageName::from(s)).collect();
    let traffic = if comm.size() > 1 { TrafficStats::reduce(comm, &traffic_stages) } else { Vec::new() };
    let fft_stats = {
        let mut v = [times.fft.fft, times.fft.switch];
        let (mut lo, mut hi, mut sum) = (v, v, v);
        comm.all_reduce_f64(&mut lo, parki_comm::ReduceOp::Min);
        comm.all_reduce_f64(&mut hi, parki_comm::ReduceOp::Max);
        comm.all_reduce_f64(&mut sum, parki_comm::ReduceOp::Sum);
        v = sum.map(|s| s / comm.size() as f64);
        [(lo[0], v[0], hi[0]), (lo[1], v[1], hi[1])]
    };
    let err = exact.as_ref().map(|e| error(comm, &phi, e));
    if let Some((l2, max)) = err {
        log.line(&format!("error against the exact solution: relative L2 {l2:.3e}, relative max {max:.3e}"));
    }
    if let Some(path) = staged.potential() {
        let n = opts.extents();
        let shape: Vec<usize> = if comps == 1 { n.to_vec() } else { vec![n[0], n[1], n[2], 3] };
        let offset = outputs::create_npy(comm, path, &shape)?;
        comm.agree(npy::write_block(path, offset, n, comps, &block, &phi))?;
    }
    let unknowns = (cells.iter().product::<usize>() * comps) as f64;
    let bytes = comm.sum(solver.bytes() as u64) as usize;
    let heap_per_unknown = heap_growth.map(|h| comm.sum(h) as f64 / unknowns);
    let switch = solver.switch_elements().map(|e| comm.sum(e as u64) as usize * 8);
    let provenance = Provenance::new(&args.config, &args.command_line, started, comm.size());
    let timings: serde_json::Map<String, Value> =
        stats.rows.iter().map(|&(s, lo, avg, hi)| (s.name().to_string(), min_avg_max((lo, avg, hi)))).collect();
    let report_json = json!({
        "provenance": provenance.to_json(),
        "equation": "poisson",
        "box": opts.lengths,
        "grid": cells,
        "centering": opts.centering.name(),
        "bc": bc_text(&opts),
        "green": opts.green.name(),
        "alpha": opts.alpha,
        "field": field_name(opts.field),
        "components": comps,
        "ranks": comm.size(),
        "threads": opts.threads,
        "process_grid": pg.dims,
        "decomposition": pg.kind().to_string(),
        "memory_order": solver.order(),
        "transforms": solver.transforms(),
        "switch_backend": opts.backend.name(),
        "fft_plan": opts.rigor.name(),
        "fft_lines": opts.lines.name(),
        "fftw_wisdom": wisdom.report(),
        "r2r": opts.r2r.name(),
        "plan_seconds": plan_seconds,
        "read_seconds": read_seconds,
        "solves": repeat,
        "timings_seconds": timings,
        "solve_seconds": min_avg_max(stats.total),
        "solve_best_seconds": best,
        "fft_seconds": min_avg_max(fft_stats[0]),
        "switch_seconds": min_avg_max(fft_stats[1]),
        "memory": {
            "plan_bytes_total": bytes,
            "bytes_per_unknown": bytes as f64 / unknowns,
            "heap_bytes_per_unknown": heap_per_unknown,
        },
        "switch_bytes_per_solve": {"t0_t1": 2 * switch[0], "t1_t2": 2 * switch[1]},
        "communication": communication(&traffic),
        "mean_removed": report.mean_removed,
        "error": err.map(|(l2, max)| json!({"relative_l2": l2, "relative_max": max})),
        "warnings": warnings,
    });
    if let Some(path) = staged.report() {
        report::write(comm, path, &report_json)?;
    }
    let mut table = stats.table();
    table += &format!(
        "{:<10} {:>12.4} {:>12.4} {:>12.4}\n{:<10} {:>12.4} {:>12.4} {:>12.4}\n",
        "(1-D FFTs)",
        fft_stats[0].0,
        fft_stats[0].1,
        fft_stats[0].2,
        "(switches)",
        fft_stats[1].0,
        fft_stats[1].1,
        fft_stats[1].2
    );
    if comm.size() > 1 {
        table += &TrafficStats::table(&traffic);
        table += &format!("process grid {:?} ({}), switch backend {}\n", pg.dims, pg.kind(), opts.backend.name());
    }
    let heap_text = heap_per_unknown.map_or(String::new(), |h| format!(" (heap growth {h:.1})"));
    table += &format!(
        "plan {plan_seconds:.3} s, memory {:.1} bytes per unknown{heap_text}, {:.4e} unknowns/s per solve\n",
        bytes as f64 / unknowns,
        unknowns / stats.total.2.max(f64::MIN_POSITIVE)
    );
    if let Some((l2, max)) = err {
        table += &format!("error against the exact solution: relative L2 {l2:.3e}, relative max {max:.3e}\n");
    }
    staged.commit(comm)?;
    let (solution, report_path) = (paths.potential.as_deref(), paths.report.as_deref());
    for p in solution.into_iter().chain(report_path) {
        log.line(&format!("wrote {}", p.display()));
    }
    log.line(&format!("done in {:.2} s", t0.elapsed().as_secs_f64()));
    Ok(RunSummary { report: report_json, table })
}

fn field_name(f: FieldMode) -> String {
    match f {
        FieldMode::Scalar => "scalar".into(),
        FieldMode::Vector => "vector".into(),
        FieldMode::Curl(d) => format!("curl ({} derivatives)", d.name()),
    }
}

/// The boundary conditions as run.toml writes them.
fn bc_text(o: &PoissonOptions) -> String {
    let pair = |b: [[Bc; 2]; 3]| {
        b.iter().map(|p| format!("[{}, {}]", p[0].name(), p[1].name())).collect::<Vec<_>>().join(", ")
    };
    match o.component_bc {
        None => pair(o.bc),
        Some(c) => {
            c.iter().enumerate().map(|(i, b)| format!("component {i}: {}", pair(*b))).collect::<Vec<_>>().join("; ")
        }
    }
}
