//! `parki-dist run` for `[problem] method = "treecode"`: the free-space BLDTT treecode
//! ([`parki_treecode`]) of any of its kernels, parameters from the tolerance or fixed in an
//! optional `[treecode]` table, every choice reported.
//!
//! ```toml
//! [problem]
//! method = "treecode"
//! kernel = "yukawa"          # laplace, yukawa, regularized-coulomb, regularized-yukawa,
//! kappa = 0.5                # sin-over-r, stokeslet, stresslet, stokes
//! tolerance = 1e-8           # or fix degree and theta in [treecode]
//! periodic = [false, false, false]
//!
//! [sources]
//! generate = { distribution = "plummer", count = 1000000, seed = 1 }
//!
//! [run]
//! backend = "cuda"           # optional: upward pass, lists, downward pass on the GPU
//!
//! [treecode]                 # optional; each key overrides the tolerance's choice
//! degree = 8
//! theta = 0.7
//! max_leaf = 2000
//! max_batch = 2000
//! ```
//!
//! On several ranks each reads (or generates) its rows of every input, the sources are
//! partitioned by RCB (Zoltan), the targets follow the boxes, the locally essential tree is read
//! by one-sided MPI ([`parki_treecode::distributed`]), and each rank writes its rows of the
//! potential in place. The report adds the LET's bytes and messages and the particles each rank
//! owned, min/avg/max over the ranks.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use parki_comm::{Comm, ReduceOp, StageStats};
use parki_core::isa::Isa;
use parki_core::{Error, Par, Result, StageKind};
use parki_decomp::split_range;
use parki_reference::generate::{particle_rng, unit_vector, Cloud};
use parki_treecode::direct::{direct_sum, relative_l2};
use parki_treecode::{evaluate_kernel_distributed_on, for_tolerance, TreeBackend, TreeKernel, TreecodeParams};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::app::{plural, warn, Log, RunArgs, RunSummary};
use crate::backend::{self, Choice, Compute, Request};
use crate::config::{repeat_error, resolve, ParticleSection};
use crate::npy;
use crate::outputs::{self, OutputPaths, Staged};
use crate::report::{self, min_avg_max, Provenance};
use crate::units::{RunUnits, Units};

/// A treecode run.toml.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TreecodeConfig {
    /// `[problem]`.
    pub problem: TreeProblem,
    /// `[sources]`.
    pub sources: ParticleSection,
    /// `[targets]` (absent: the sources).
    pub targets: Option<ParticleSection>,
    /// `[output]`.
    #[serde(default)]
    pub output: TreeOutput,
    /// `[treecode]`.
    #[serde(default)]
    pub treecode: TreeSection,
    /// `[run]`.
    #[serde(default)]
    pub run: TreeRun,
}

/// `[problem]` of a treecode run.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TreeProblem {
    /// `"treecode"`.
    pub method: String,
    /// `"particles"` (the default) if given.
    pub equation: Option<String>,
    /// The kernel ([`TreeKernel::NAMES`]).
    pub kernel: String,
    /// Yukawa screening.
    pub kappa: Option<f64>,
    /// Regularisation.
    pub epsilon: Option<f64>,
    /// Wavenumber of `sin(kr)/r`.
    pub wavenumber: Option<f64>,
    /// Relative l2 tolerance (sets degree, theta and leaf sizes; optional when `[treecode]`
    /// fixes degree and theta).
    pub tolerance: Option<f64>,
    /// Must be `[false, false, false]` (free space) if given.
    pub periodic: Option<Vec<bool>>,
    /// Ignored by the treecode if given (free space has no box); accepted so that a particle
    /// run.toml switches method by one line.
    #[serde(rename = "box")]
    pub box_lengths: Option<Vec<f64>>,
}

/// `[output]` of a treecode run.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TreeOutput {
    /// Potential, `(M,)` or `(M, 3)` float64 in the targets' order.
    pub potential: Option<PathBuf>,
    /// JSON report.
    pub report: Option<PathBuf>,
}

/// `[treecode]`: each key fixes what the tolerance would choose.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TreeSection {
    /// Interpolation degree.
    pub degree: Option<usize>,
    /// MAC parameter.
    pub theta: Option<f64>,
    /// Sources per leaf.
    pub max_leaf: Option<usize>,
    /// Targets per batch.
    pub max_batch: Option<usize>,
    /// `"avx512"`, `"avx2"` or `"scalar"` (default: the best available).
    pub isa: Option<String>,
}

/// `[run]` of a treecode run.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TreeRun {
    /// Threads (default: all cores).
    pub threads: Option<usize>,
    /// Measure the error on this many targets against the direct sum.
    pub check: Option<usize>,
    /// Evaluations (timings of the last).
    pub repeat: Option<usize>,
    /// Compute backend of the upward pass, the lists and the downward pass: `"cpu"` (default),
    /// `"cuda"` or `"auto"` (see [`crate::backend`]); trees, traversal and LET stay on the host.
    pub backend: Option<String>,
}

/// Whether a run.toml's `[problem]` names `method = "treecode"` (read before the rest, as
/// [`crate::config::equation`]).
pub fn is_treecode(text: &str, path: &Path) -> Result<bool> {
    Ok(method(text, path)?.as_deref() == Some("treecode"))
}

/// The `[problem] method` a run.toml names, if any (read before the rest).
pub fn method(text: &str, path: &Path) -> Result<Option<String>> {
    let table: toml::Table =
        toml::from_str(text).map_err(|e| Error::Config { path: path.into(), message: e.to_string() })?;
    Ok(table.get("problem").and_then(|p| p.get("method")).and_then(|m| m.as_str()).map(str::to_string))
}

/// The parameters: the tolerance's row, then the `[treecode]` overrides; and where each came
/// from.
fn parameters(cfg: &TreecodeConfig) -> Result<(TreecodeParams, Value)> {
    let t = &cfg.treecode;
    let (base, row) = match cfg.problem.tolerance {
        Some(tol) => {
            let (p, row) = for_tolerance(tol)?;
            (Some(p), Some(row))
        }
        None => (None, None),
    };
    let missing = |field: &str| Error::Missing {
        field: format!("treecode.{field}"),
        reason: "no problem.tolerance to choose it from".into(),
    };
    let degree = t.degree.or(base.map(|b| b.degree)).ok_or_else(|| missing("degree"))?;
    let theta = t.theta.or(base.map(|b| b.theta)).ok_or_else(|| missing("theta"))?;
    let default_leaf = TreecodeParams::default_leaf(degree);
    let p = TreecodeParams {
        degree,
        theta,
        max_leaf: t.max_leaf.unwrap_or(default_leaf),
        max_batch: t.max_batch.unwrap_or(default_leaf),
    };
    p.validate()?;
    let from = |given: bool| {
        if given {
            "run.toml"
        } else if row.is_some() {
            "tolerance table"
        } else {
            "1.5 (n + 1)^3"
        }
    };
    let provenance = json!({
        "degree": from(t.degree.is_some()),
        "theta": from(t.theta.is_some()),
        "max_leaf": if t.max_leaf.is_some() { "run.toml" } else { "1.5 (n + 1)^3" },
        "max_batch": if t.max_batch.is_some() { "run.toml" } else { "1.5 (n + 1)^3" },
        "tolerance_table_row": row,
    });
    Ok((p, provenance))
}

/// This rank's rows of one particle set.
pub(crate) struct Rows {
    /// Particles over all ranks.
    pub total: usize,
    /// This rank's rows of them.
    pub rows: Range<usize>,
    /// Their positions.
    pub positions: Vec<[f64; 3]>,
    /// The kernel's inputs (row-major, `input_width` each; empty for targets).
    pub inputs: Vec<f64>,
}

/// Rows of one particle set on this rank: `split_range(total, ranks, rank)` of every input,
/// generated or read (only those bytes of each `.npy`), so that the ranks together hold the
/// set one process reads.
pub(crate) fn particles(
    sec: &ParticleSection,
    field: &str,
    config: &Path,
    kernel: Option<TreeKernel>,
    rank: usize,
    ranks: usize,
) -> Result<Rows> {
    if let Some(g) = &sec.generate {
        let files = [&sec.positions, &sec.charges, &sec.forces, &sec.dipoles, &sec.normals];
        if files.iter().any(|f| f.is_some()) {
            return Err(Error::OutOfRange {
                field: format!("{field}.generate"),
                value: "together with files".into(),
                allowed: "either generate or files, not both".into(),
            });
        }
        let cloud = Cloud::from_name(&g.distribution, &format!("{field}.generate.distribution"))?;
        let seed = g.seed;
        let rows = split_range(g.count, ranks, rank);
        let pos = cloud.points(seed, rows.clone());
        let inputs = match kernel {
            None => Vec::new(),
            Some(k) => rows
                .clone()
                .flat_map(|i| {
                    let mut rng = particle_rng(seed ^ 0x7ee5_c0de, i as u64);
                    let mut v: Vec<f64> = (0..k.input_width()).map(|_| rng.normal()).collect();
                    if k.input_width() >= 6 {
                        let w = v.len();
                        v[w - 3..].copy_from_slice(&unit_vector(&mut rng));
                    }
                    v
                })
                .collect(),
        };
        return Ok(Rows { total: g.count, rows, positions: pos, inputs });
    }
    let need = |f: &Option<PathBuf>, name: &str, why: &str| -> Result<PathBuf> {
        f.as_ref()
            .map(|p| resolve(config, p))
            .ok_or_else(|| Error::Missing { field: format!("{field}.{name}"), reason: why.into() })
    };
    // an input's header, checked for its columns, completeness and (after the positions) rows
    let open = |path: &Path, name: &str, columns: usize, rows: Option<usize>| -> Result<npy::Header> {
        let named = format!("{field}.{name}");
        let h = npy::read_header(path, &named)?;
        h.expect_columns(columns, &format!("{named} ({})", path.display()))?;
        npy::check_complete(path, &named, &h)?;
        if let Some(n) = rows.filter(|&n| n != h.rows()) {
            return Err(Error::LengthMismatch {
                field: named,
                found: h.rows(),
                reference: format!("{field}.positions"),
                expected: n,
            });
        }
        Ok(h)
    };
    let pos_path = need(&sec.positions, "positions", "give positions or generate")?;
    let ph = open(&pos_path, "positions", 3, None)?;
    let n = ph.rows();
    let rows = split_range(n, ranks, rank);
    let pos: Vec<[f64; 3]> = npy::read_rows(&pos_path, &format!("{field}.positions"), &ph, rows.clone())?
        .chunks_exact(3)
        .map(|c| [c[0], c[1], c[2]])
        .collect();
    finite(&format!("{field}.positions"), rows.start, &pos, &[], 1)?;
    let Some(k) = kernel else { return Ok(Rows { total: n, rows, positions: pos, inputs: Vec::new() }) };
    let read = |f: &Option<PathBuf>, name: &str, columns: usize| -> Result<Vec<f64>> {
        let path = need(f, name, &format!("kernel \"{}\" needs it", k.name()))?;
        let h = open(&path, name, columns, Some(n))?;
        let v = npy::read_rows(&path, &format!("{field}.{name}"), &h, rows.clone())?;
        finite(&format!("{field}.{name}"), rows.start, &[], &v, columns)?;
        Ok(v)
    };
    let parts: Vec<(Vec<f64>, usize)> = match k {
        TreeKernel::Stokeslet => vec![(read(&sec.forces, "forces", 3)?, 3)],
        TreeKernel::Stresslet => vec![(read(&sec.dipoles, "dipoles", 3)?, 3), (read(&sec.normals, "normals", 3)?, 3)],
        TreeKernel::Stokes => vec![
            (read(&sec.forces, "forces", 3)?, 3),
            (read(&sec.dipoles, "dipoles", 3)?, 3),
            (read(&sec.normals, "normals", 3)?, 3),
        ],
        _ => vec![(read(&sec.charges, "charges", 1)?, 1)],
    };
    let mut inputs = Vec::with_capacity(rows.len() * k.input_width());
    for i in 0..rows.len() {
        for (p, w) in &parts {
            inputs.extend_from_slice(&p[i * w..(i + 1) * w]);
        }
    }
    Ok(Rows { total: n, rows, positions: pos, inputs })
}

/// Errors on a coordinate (`pos`) or value (`values`, `width` per row) that is not finite,
/// naming `field` and the global row (`first` + local row).
fn finite(field: &str, first: usize, pos: &[[f64; 3]], values: &[f64], width: usize) -> Result<()> {
    let bad = |index: usize, component: usize, value: f64| {
        Err(Error::NonFinite { field: field.to_string(), index: first + index, component, value })
    };
    for (i, p) in pos.iter().enumerate() {
        if let Some(d) = (0..3).find(|&d| !p[d].is_finite()) {
            return bad(i, d, p[d]);
        }
    }
    match values.iter().position(|v| !v.is_finite()) {
        Some(k) => bad(k / width, k % width, values[k]),
        None => Ok(()),
    }
}

/// What a treecode run.toml asks for, checked.
struct Setup {
    cfg: TreecodeConfig,
    request: Request,
    kernel: TreeKernel,
    params: TreecodeParams,
    choice: Value,
    isa: Isa,
    threads: usize,
    paths: OutputPaths,
}

/// Reads and checks the run.toml (no collective calls).
fn setup(args: &RunArgs) -> Result<Setup> {
    let text = std::fs::read_to_string(&args.config)
        .map_err(|e| Error::Io { path: args.config.clone(), message: e.to_string() })?;
    let cfg: TreecodeConfig =
        toml::from_str(&text).map_err(|e| Error::Config { path: args.config.clone(), message: e.to_string() })?;
    if cfg.run.repeat == Some(0) {
        return Err(repeat_error("run.repeat"));
    }
    if args.repeat == Some(0) {
        return Err(repeat_error("--repeat"));
    }
    let p = &cfg.problem;
    if let Some(e) = p.equation.as_deref().filter(|&e| e != "particles") {
        return Err(Error::OutOfRange {
            field: "problem.equation".into(),
            value: format!("\"{e}\""),
            allowed: "\"particles\" (the treecode sums kernels over particles)".into(),
        });
    }
    if let Some(per) = &p.periodic {
        if per.len() != 3 || per.iter().any(|&b| b) {
            return Err(Error::OutOfRange {
                field: "problem.periodic".into(),
                value: format!("{per:?}"),
                allowed: "[false, false, false]: the treecode is free space (periodic axes: method = \"ewald\")".into(),
            });
        }
    }
    let kernel = TreeKernel::from_name(&p.kernel, p.kappa, p.epsilon, p.wavenumber)?;
    let (params, choice) = parameters(&cfg)?;
    let isa = match cfg.treecode.isa.as_deref() {
        None => Isa::detect(),
        Some(name) => Isa::from_name(name).ok_or_else(|| Error::OutOfRange {
            field: "treecode.isa".into(),
            value: format!("\"{name}\""),
            allowed: "\"avx512\", \"avx2\" or \"scalar\"".into(),
        })?,
    };
    let request = backend::request(cfg.run.backend.as_deref())?;
    let threads = args.threads.or(cfg.run.threads).unwrap_or_else(rayon::current_num_threads).max(1);
    let inputs = outputs::particle_inputs(&args.config, &cfg.sources, cfg.targets.as_ref());
    let paths = OutputPaths {
        potential: cfg.output.potential.as_ref().map(|p| resolve(&args.config, p)),
        field: None,
        report: cfg.output.report.as_ref().map(|p| resolve(&args.config, p)),
        data_field: "output.potential",
    };
    let paths = outputs::check_paths(&args.config, &inputs, paths)?;
    Ok(Setup { cfg, request, kernel, params, choice, isa, threads, paths })
}

/// The device of a run that computes on CUDA (`None` on the CPU): this rank's device (node
/// rank modulo the devices), its kernels compiled.
fn open_device(choice: &Choice, comm: &Comm) -> Result<Option<Box<dyn TreeBackend>>> {
    match choice.compute {
        Compute::Cpu => Ok(None),
        Compute::Cuda => cuda_device(comm),
    }
}

#[cfg(feature = "cuda")]
fn cuda_device(comm: &Comm) -> Result<Option<Box<dyn TreeBackend>>> {
    let local = parki_dist::node_rank(comm);
    Ok(Some(Box::new(parki_gpu::GpuTreecode::<parki_gpu::cuda::CudaDevice>::open(local)?)))
}

#[cfg(not(feature = "cuda"))]
fn cuda_device(_comm: &Comm) -> Result<Option<Box<dyn TreeBackend>>> {
    Err(backend::feature_error())
}

/// `(min, avg, max)` of `v` over the ranks.
pub(crate) fn spread(comm: &Comm, v: f64) -> (f64, f64, f64) {
    (comm.min(v), comm.sum(v) / comm.size() as f64, comm.max(v))
}

/// The error of `u` (this rank's targets `trows` of `nt`) on `k` targets spread over the whole
/// set, against the direct sum over every rank's sources: the sampled targets and their values
/// are summed over the ranks (each rank fills its own), each rank adds its sources' direct sum
/// at them, and the sums are reduced. Collective; every rank gets the same numbers.
#[allow(clippy::too_many_arguments)]
pub(crate) fn check_error(
    comm: &Comm,
    pool: &rayon::ThreadPool,
    kernel: TreeKernel,
    sources: &[[f64; 3]],
    q: &[f64],
    targets: &[[f64; 3]],
    trows: &Range<usize>,
    nt: usize,
    u: &[f64],
    k: usize,
) -> (usize, f64, f64) {
    let nv = kernel.value_width();
    let step = (nt / k).max(1);
    let sample: Vec<usize> = (0..nt).step_by(step).take(k).collect();
    let m = sample.len();
    let (mut xs, mut fast) = (vec![0.0; m * 3], vec![0.0; m * nv]);
    for (s, &i) in sample.iter().enumerate() {
        if trows.contains(&i) {
            let l = i - trows.start;
            xs[3 * s..3 * s + 3].copy_from_slice(&targets[l]);
            fast[s * nv..(s + 1) * nv].copy_from_slice(&u[l * nv..(l + 1) * nv]);
        }
    }
    comm.all_reduce_f64(&mut xs, ReduceOp::Sum);
    comm.all_reduce_f64(&mut fast, ReduceOp::Sum);
    let pts: Vec<[f64; 3]> = xs.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect();
    let all: Vec<usize> = (0..m).collect();
    let mut reference = pool.install(|| direct_sum(kernel, sources, q, &pts, &all));
    comm.all_reduce_f64(&mut reference, ReduceOp::Sum);
    let l2 = relative_l2(&fast, nv, &all, &reference);
    let max_err = fast.iter().zip(&reference).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    let max_ref = reference.iter().map(|b| b.abs()).fold(0.0, f64::max);
    (m, l2, max_err / max_ref)
}

/// Runs a treecode run.toml over the ranks of `comm` (collective; every error is agreed on).
pub fn run(args: &RunArgs, comm: &Comm) -> Result<RunSummary> {
    let started = SystemTime::now();
    let t0 = Instant::now();
    let log = Log { on: !args.quiet && comm.rank() == 0 };
    let (rank, ranks) = (comm.rank(), comm.size());
    let Setup { cfg, request, kernel, params, choice, isa, threads, paths } = comm.agree(setup(args))?;
    let p = &cfg.problem;
    let compute = backend::resolve(request, cfg.run.backend.is_some(), comm)?;
    if request == Request::Auto {
        log.line(&format!("backend auto: {} ({})", compute.compute.name(), compute.reason));
    }
    let device = comm.agree(open_device(&compute, comm))?;
    let device_name = device.as_ref().map(|d| d.describe());
    if let Some(d) = &device_name {
        log.line(&format!("device: {d}"));
    }
    if paths.is_empty() && !args.json {
        warn(comm, "run.toml has no [output] potential or report (and no --json): only the timing table is printed");
    }
    let staged = Staged::begin(comm, &paths)?;
    log.line(&format!("reading {}", args.config.display()));
    let src = comm.agree(particles(&cfg.sources, "sources", &args.config, Some(kernel), rank, ranks))?;
    let (ns, mut sources, mut q) = (src.total, src.positions, src.inputs);
    let (nt, trows, mut targets) = match &cfg.targets {
        Some(t) => {
            let r = comm.agree(particles(t, "targets", &args.config, None, rank, ranks))?;
            (r.total, r.rows, r.positions)
        }
        None => (ns, src.rows, sources.clone()),
    };
    // from here on the run computes in units near 1 (exact powers of two; `units`)
    let units = Units::for_free_space(comm, kernel, &sources, &q, cfg.targets.is_some().then_some(&targets[..]));
    let kernel = units.apply_free_space(kernel, &mut sources, &mut q, &mut targets);
    if let Some(line) = units.line() {
        log.line(&line);
    }
    log.line(&format!(
        "treecode: {ns} sources, {nt} targets, kernel {}, degree {}, theta {}, leaves of {} sources and {} targets, \
         {ranks} rank{} x {threads} thread{}, {}",
        kernel.name(),
        params.degree,
        params.theta,
        params.max_leaf,
        params.max_batch,
        plural(ranks),
        plural(threads),
        isa.name()
    ));
    let pool = comm.agree(
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .map_err(|e| Error::Resource { message: format!("a pool of {threads} threads: {e}") }),
    )?;
    let par = Par::with_threads(threads);
    let repeat = args.repeat.or(cfg.run.repeat).unwrap_or(1);
    let mut result = None;
    for r in 0..repeat {
        let t = Instant::now();
        let dev = device.as_deref();
        let out = pool
            .install(|| evaluate_kernel_distributed_on(comm, kernel, &params, &sources, &q, &targets, par, isa, dev))?;
        log.line(&format!("evaluation {} of {repeat}: {:.4} s", r + 1, t.elapsed().as_secs_f64()));
        result = Some(out);
    }
    let (mut u, stats) = result.expect("at least one evaluation");
    let nv = kernel.value_width();
    let check = args.check.or(cfg.run.check);
    let error = check.filter(|&k| k > 0).map(|k| {
        let (m, l2, max) = check_error(comm, &pool, kernel, &sources, &q, &targets, &trows, nt, &u, k);
        log.line(&format!("check on {m} targets against the direct sum: relative l2 {l2:.3e}, relative max {max:.3e}"));
        json!({"targets": m, "relative_l2": l2, "relative_max": max, "tolerance": p.tolerance})
    });
    if let (Some(e), Some(tol)) = (&error, p.tolerance) {
        if e["relative_l2"].as_f64().is_some_and(|v| v > tol) {
            warn(
                comm,
                &format!(
                    "the measured error {:.3e} is above the tolerance {tol:e}: the tolerance table is measured on \
                     Coulomb in a uniform cube; fix [treecode] degree and theta for this set",
                    e["relative_l2"].as_f64().unwrap_or(f64::NAN)
                ),
            );
        }
    }
    units.scale_back(&mut u, 1);
    if let Some(path) = staged.potential() {
        let shape: Vec<usize> = if nv == 1 { vec![nt] } else { vec![nt, nv] };
        let offset = outputs::create_npy(comm, path, &shape)?;
        let written = if trows.is_empty() { Ok(()) } else { npy::write_rows(path, offset, trows.start, nv, &u) };
        comm.agree(written)?;
    }
    let table_stats = StageStats::reduce(comm, &stats.times);
    let timings: serde_json::Map<String, Value> =
        table_stats.rows.iter().map(|&(s, lo, avg, hi)| (s.name().to_string(), min_avg_max((lo, avg, hi)))).collect();
    let total = table_stats.total.2;
    let provenance = Provenance::new(&args.config, &args.command_line, started, ranks);
    let names = ["pp", "pc", "cp", "cc"];
    let interactions: Vec<u64> = stats.interactions.iter().map(|&c| comm.sum(c as u64)).collect();
    let evaluations: Vec<u64> = stats.evaluations.iter().map(|&c| comm.sum(c)).collect();
    let clusters: Vec<u64> = stats.clusters.iter().map(|&c| comm.sum(c as u64)).collect();
    let lt = stats.let_tree;
    let let_json = json!({
        "bytes": min_avg_max(spread(comm, lt.bytes as f64)),
        "messages": min_avg_max(spread(comm, lt.messages as f64)),
        "clusters": min_avg_max(spread(comm, lt.clusters as f64)),
        "particles": min_avg_max(spread(comm, lt.particles as f64)),
        "proxy_blocks": min_avg_max(spread(comm, lt.proxies as f64)),
        "rounds": min_avg_max(spread(comm, lt.rounds as f64)),
        "total_bytes": comm.sum(lt.bytes),
        "total_messages": comm.sum(lt.messages),
        "transport": lt.transport.name(),
    });
    let owned = json!({
        "sources": min_avg_max(spread(comm, stats.owned[0] as f64)),
        "targets": min_avg_max(spread(comm, stats.owned[1] as f64)),
    });
    let report_json = json!({
        "provenance": provenance.to_json(),
        "method": "treecode",
        "units": units.to_json(),
        "kernel": kernel.name(),
        "kernel_parameters": {"kappa": p.kappa, "epsilon": p.epsilon, "wavenumber": p.wavenumber},
        "sources": ns,
        "targets": nt,
        "ranks": ranks,
        "partition": if ranks > 1 { "RCB (Zoltan, rectilinear blocks)" } else { "none (one rank)" },
        "owned_per_rank": owned,
        "tolerance": p.tolerance,
        "treecode": {
            "degree": params.degree,
            "theta": params.theta,
            "max_leaf": params.max_leaf,
            "max_batch": params.max_batch,
            "proxies_per_cluster": params.proxies(),
            "chosen_by": choice,
        },
        "isa": isa.name(),
        "backend": compute.compute.name(),
        "backend_requested": request.name(),
        "backend_reason": compute.reason,
        "device": device_name.as_ref().map(|d| json!({"description": d})),
        "threads": threads,
        "clusters": {"sources": clusters[0], "targets": clusters[1]},
        "interactions": names.iter().zip(&interactions).map(|(n, c)| (n.to_string(), json!(c))).collect::<serde_json::Map<_, _>>(),
        "kernel_evaluations": names.iter().zip(&evaluations).map(|(n, c)| (n.to_string(), json!(c))).collect::<serde_json::Map<_, _>>(),
        "let": let_json,
        "evaluations": repeat,
        "timings_seconds": timings,
        "evaluation_seconds": total,
        "targets_per_second": nt as f64 / total.max(f64::MIN_POSITIVE),
        "error": error,
    });
    if let Some(path) = staged.report() {
        report::write(comm, path, &report_json)?;
    }
    let mut table = table_stats.table();
    table += &format!(
        "lists: PP {} PC {} CP {} CC {}; kernel evaluations {:.3e} ({:.3e} direct); {:.4e} targets/s\n",
        interactions[0],
        interactions[1],
        interactions[2],
        interactions[3],
        evaluations.iter().sum::<u64>() as f64,
        ns as f64 * nt as f64,
        nt as f64 / total.max(f64::MIN_POSITIVE)
    );
    table += &format!("backend {}\n", compute.compute.name());
    if ranks > 1 {
        let (b, m) = (spread(comm, lt.bytes as f64), spread(comm, lt.messages as f64));
        table += &format!(
            "LET per rank: {:.3e} / {:.3e} / {:.3e} bytes, {} / {:.1} / {} gets (min/avg/max), {}\n",
            b.0,
            b.1,
            b.2,
            m.0,
            m.1,
            m.2,
            lt.transport.name()
        );
    }
    if let Some(e) = &error {
        table += &format!(
            "error on {} targets against the direct sum: relative l2 {:.3e}\n",
            e["targets"],
            e["relative_l2"].as_f64().unwrap_or(f64::NAN)
        );
    }
    staged.commit(comm)?;
    for p in [&paths.potential, &paths.report].into_iter().flatten() {
        log.line(&format!("wrote {}", p.display()));
    }
    log.line(&format!("done in {:.2} s", t0.elapsed().as_secs_f64()));
    Ok(RunSummary { report: report_json, table })
}
