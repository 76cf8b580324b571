//! `parki-dist run` for `[problem] method = "fmm"`: the free-space fast multipole method
//! ([`parki_fmm`]) for the Laplace kernel (potential and field) and the Stokeslet (four harmonic
//! FMMs), the order from the tolerance and the leaf size from the cost model (the CPU's unit
//! costs, or the device's, `CostModel::device`, on the CUDA backend), or fixed in an
//! optional `[fmm]` table, every choice reported.
//!
//! ```toml
//! [problem]
//! method = "fmm"
//! kernel = "laplace"         # or "stokeslet"
//! tolerance = 1e-8           # of the potential (and of the field when it is written)
//! precision = "f64"          # or "f32": the near field in f32 (2.2x faster), results rounded
//! periodic = [false, false, false]
//!
//! [sources]
//! generate = { distribution = "plummer", count = 1000000, seed = 1 }
//!
//! [output]
//! potential = "u.npy"        # (M,) Laplace, (M, 3) Stokeslet velocity
//! field = "e.npy"            # Laplace: E = -grad u, (M, 3)
//!
//! [fmm]                      # optional; each key overrides the tolerance's or the model's choice
//! order = 12
//! max_leaf = 256
//! stencil = true             # the paper's modified stencil (false: the 189-box list)
//!
//! [run]
//! backend = "cuda"           # optional: P2M, M2M, M2L, L2L, L2P, P2P on the GPU ("cpu", "auto")
//! ```
//!
//! On several ranks each reads (or generates) its rows of every input, the distributed FMM
//! ([`parki_fmm::distributed`]: Morton partition, shared boxes, the LET by one-sided MPI) sums
//! over every rank's sources, and each rank writes its rows of the outputs; the report adds the
//! LET's traffic.

use std::path::PathBuf;
use std::time::{Instant, SystemTime};

use parki_comm::{Comm, StageStats};
use parki_core::isa::Isa;
use parki_core::{Error, Par, Result, StageKind};
use parki_fmm::cost::CostModel;
use parki_fmm::traversal::TraversalParams;
use parki_fmm::{
    evaluate_distributed_on, evaluate_stokeslet_distributed_on, for_tolerance_of, FmmBackend, FmmKernel, FmmParams,
    FmmStats, Precision,
};
use parki_treecode::TreeKernel;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::app::{plural, warn, Log, RunArgs, RunSummary};
use crate::backend::{self, Choice, Compute, Request};
use crate::config::{repeat_error, resolve, ParticleSection};
use crate::npy;
use crate::outputs::{self, OutputPaths, Staged};
use crate::report::{self, min_avg_max, Provenance};
use crate::treecode::{check_error, particles, TreeRun};
use crate::units::{RunUnits, Units};

/// An FMM run.toml.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FmmConfig {
    /// `[problem]`.
    pub problem: FmmProblem,
    /// `[sources]`.
    pub sources: ParticleSection,
    /// `[targets]` (absent: the sources).
    pub targets: Option<ParticleSection>,
    /// `[output]`.
    #[serde(default)]
    pub output: FmmOutputPaths,
    /// `[fmm]`.
    #[serde(default)]
    pub fmm: FmmSection,
    /// `[run]`.
    #[serde(default)]
    pub run: TreeRun,
}

/// `[problem]` of an FMM run.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FmmProblem {
    /// `"fmm"`.
    pub method: String,
    /// `"particles"` (the default) if given.
    pub equation: Option<String>,
    /// `"laplace"` or `"stokeslet"`.
    pub kernel: String,
    /// Relative l2 tolerance (sets the order; optional when `[fmm] order` is given).
    pub tolerance: Option<f64>,
    /// Must be `[false, false, false]` (free space) if given.
    pub periodic: Option<Vec<bool>>,
    /// `"f64"` (the default) or `"f32"`: the near field's arithmetic and the results' rounding
    /// (the expansions stay in f64).
    pub precision: Option<String>,
    /// Ignored (free space has no box); accepted so that a particle run.toml switches method by
    /// one line.
    #[serde(rename = "box")]
    pub box_lengths: Option<Vec<f64>>,
}

/// `[output]` of an FMM run.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FmmOutputPaths {
    /// Potential `(M,)` (Laplace) or velocity `(M, 3)` (Stokeslet), float64 in the targets'
    /// order.
    pub potential: Option<PathBuf>,
    /// Laplace field `E = -grad u`, `(M, 3)`.
    pub field: Option<PathBuf>,
    /// JSON report.
    pub report: Option<PathBuf>,
}

/// `[fmm]`: each key fixes what the tolerance or the cost model would choose.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FmmSection {
    /// Expansion order `p`.
    pub order: Option<usize>,
    /// Points per leaf.
    pub max_leaf: Option<usize>,
    /// The paper's modified stencil (default true).
    pub stencil: Option<bool>,
    /// `"avx512"`, `"avx2"` or `"scalar"` (default: the best available).
    pub isa: Option<String>,
}

/// What an FMM run.toml asks for, checked.
struct Setup {
    cfg: FmmConfig,
    request: Request,
    kernel: FmmKernel,
    params: FmmParams,
    choice: Value,
    isa: Isa,
    threads: usize,
    paths: OutputPaths,
}

/// Reads and checks the run.toml (no collective calls).
fn setup(args: &RunArgs) -> Result<Setup> {
    let text = std::fs::read_to_string(&args.config)
        .map_err(|e| Error::Io { path: args.config.clone(), message: e.to_string() })?;
    let cfg: FmmConfig =
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
            allowed: "\"particles\" (the FMM sums kernels over particles)".into(),
        });
    }
    if let Some(per) = &p.periodic {
        if per.len() != 3 || per.iter().any(|&b| b) {
            return Err(Error::OutOfRange {
                field: "problem.periodic".into(),
                value: format!("{per:?}"),
                allowed: "[false, false, false]: the FMM is free space (periodic axes: method = \"ewald\")".into(),
            });
        }
    }
    let kernel = match p.kernel.as_str() {
        "laplace" => FmmKernel::Laplace,
        "stokeslet" => FmmKernel::Stokeslet,
        other => {
            return Err(Error::OutOfRange {
                field: "problem.kernel".into(),
                value: format!("\"{other}\""),
                allowed: "\"laplace\" or \"stokeslet\" for method = \"fmm\" (other kernels: method = \"treecode\")"
                    .into(),
            })
        }
    };
    let f = &cfg.fmm;
    let row = match p.tolerance {
        Some(tol) => Some(for_tolerance_of(kernel, tol, cfg.output.field.is_some())?),
        None => None,
    };
    let order = f.order.or(row.map(|r| r.0)).ok_or_else(|| Error::Missing {
        field: "fmm.order".into(),
        reason: "no problem.tolerance to choose it from".into(),
    })?;
    let precision = match p.precision.as_deref() {
        None | Some("f64") => Precision::F64,
        Some("f32") => Precision::F32,
        Some(other) => {
            return Err(Error::OutOfRange {
                field: "problem.precision".into(),
                value: format!("\"{other}\""),
                allowed: "\"f64\" or \"f32\"".into(),
            })
        }
    };
    if let (Precision::F32, Some(tol)) = (precision, p.tolerance) {
        if tol < 1e-6 {
            return Err(Error::OutOfRange {
                field: "problem.tolerance".into(),
                value: tol.to_string(),
                allowed: ">= 1e-6 with precision = \"f32\" (its near field rounds at about 1e-7)".into(),
            });
        }
    }
    let mut params = FmmParams::new(order, f.max_leaf);
    params.precision = precision;
    params.traversal = TraversalParams { stencil: f.stencil.unwrap_or(true), ..TraversalParams::default() };
    params.gradient = kernel == FmmKernel::Laplace && cfg.output.field.is_some();
    params.validate()?;
    if kernel == FmmKernel::Stokeslet && cfg.output.field.is_some() {
        return Err(Error::OutOfRange {
            field: "output.field".into(),
            value: "given".into(),
            allowed: "only with kernel = \"laplace\" (the Stokeslet's velocity is output.potential)".into(),
        });
    }
    let choice = json!({
        "order": if f.order.is_some() { "run.toml" } else { "tolerance table" },
        "max_leaf": if f.max_leaf.is_some() { "run.toml" } else { "cost model" },
        "tolerance_table_row": row.map(|r| r.1),
    });
    let isa = match f.isa.as_deref() {
        None => Isa::detect(),
        Some(name) => Isa::from_name(name).ok_or_else(|| Error::OutOfRange {
            field: "fmm.isa".into(),
            value: format!("\"{name}\""),
            allowed: "\"avx512\", \"avx2\" or \"scalar\"".into(),
        })?,
    };
    let request = backend::request(cfg.run.backend.as_deref())?;
    let threads = args.threads.or(cfg.run.threads).unwrap_or_else(rayon::current_num_threads).max(1);
    let inputs = outputs::particle_inputs(&args.config, &cfg.sources, cfg.targets.as_ref());
    let paths = OutputPaths {
        potential: cfg.output.potential.as_ref().map(|p| resolve(&args.config, p)),
        field: cfg.output.field.as_ref().map(|p| resolve(&args.config, p)),
        report: cfg.output.report.as_ref().map(|p| resolve(&args.config, p)),
        data_field: "output.potential",
    };
    let paths = outputs::check_paths(&args.config, &inputs, paths)?;
    Ok(Setup { cfg, request, kernel, params, choice, isa, threads, paths })
}

/// The device of a run that computes on CUDA (`None` on the CPU): this rank's device (node
/// rank modulo the devices), its kernels compiled.
fn open_device(choice: &Choice, comm: &Comm) -> Result<Option<Box<dyn FmmBackend>>> {
    match choice.compute {
        Compute::Cpu => Ok(None),
        Compute::Cuda => cuda_device(comm),
    }
}

#[cfg(feature = "cuda")]
fn cuda_device(comm: &Comm) -> Result<Option<Box<dyn FmmBackend>>> {
    let local = parki_dist::node_rank(comm);
    Ok(Some(Box::new(parki_gpu::GpuFmm::<parki_gpu::cuda::CudaDevice>::open(local)?)))
}

#[cfg(not(feature = "cuda"))]
fn cuda_device(_comm: &Comm) -> Result<Option<Box<dyn FmmBackend>>> {
    Err(backend::feature_error())
}

/// Runs an FMM run.toml over the ranks of `comm` (collective; every error is agreed on).
pub fn run(args: &RunArgs, comm: &Comm) -> Result<RunSummary> {
    let started = SystemTime::now();
    let t0 = Instant::now();
    let log = Log { on: !args.quiet && comm.rank() == 0 };
    let (rank, ranks) = (comm.rank(), comm.size());
    let Setup { cfg, request, kernel, mut params, mut choice, isa, threads, paths } = comm.agree(setup(args))?;
    let p = &cfg.problem;
    let compute = backend::resolve(request, cfg.run.backend.is_some(), comm)?;
    if request == Request::Auto {
        log.line(&format!("backend auto: {} ({})", compute.compute.name(), compute.reason));
    }
    let device = comm.agree(open_device(&compute, comm))?;
    if device.is_some() {
        // the leaf size by the device's unit costs (its pairs are cheap against its
        // translations: larger leaves than the CPU's)
        params.cost = CostModel::device();
        if cfg.fmm.max_leaf.is_none() {
            choice["max_leaf"] = json!("cost model (device)");
        }
    }
    let device_name = device.as_ref().map(|d| d.describe());
    if let Some(d) = &device_name {
        log.line(&format!("device: {d}"));
    }
    if paths.is_empty() && !args.json {
        warn(
            comm,
            "run.toml has no [output] potential, field or report (and no --json): only the timing table is printed",
        );
    }
    let staged = Staged::begin(comm, &paths)?;
    log.line(&format!("reading {}", args.config.display()));
    let tk = match kernel {
        FmmKernel::Laplace => TreeKernel::Coulomb,
        FmmKernel::Stokeslet => TreeKernel::Stokeslet,
    };
    let src = comm.agree(particles(&cfg.sources, "sources", &args.config, Some(tk), rank, ranks))?;
    let (ns, mut sources, mut q) = (src.total, src.positions, src.inputs);
    let (nt, trows, mut targets) = match &cfg.targets {
        Some(t) => {
            let r = comm.agree(particles(t, "targets", &args.config, None, rank, ranks))?;
            (r.total, r.rows, Some(r.positions))
        }
        None => (ns, src.rows, None),
    };
    // from here on the run computes in units near 1 (exact powers of two; `units`)
    let units = Units::for_free_space(comm, tk, &sources, &q, targets.as_deref());
    units.apply_free_space(tk, &mut sources, &mut q, targets.as_deref_mut().unwrap_or(&mut []));
    if let Some(line) = units.line() {
        log.line(&line);
    }
    let pool = comm.agree(
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .map_err(|e| Error::Resource { message: format!("a pool of {threads} threads: {e}") }),
    )?;
    let par = Par::with_threads(threads);
    log.line(&format!(
        "fmm: {ns} sources, {nt} targets, kernel {}, order {}, {ranks} rank{} x {threads} thread{}, {}",
        p.kernel,
        params.order,
        plural(ranks),
        plural(threads),
        isa.name()
    ));
    let repeat = args.repeat.or(cfg.run.repeat).unwrap_or(1);
    let forces: Vec<[f64; 3]> = if kernel == FmmKernel::Stokeslet {
        q.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect()
    } else {
        Vec::new()
    };
    let mut result: Option<(Vec<f64>, Vec<[f64; 3]>, FmmStats)> = None;
    for r in 0..repeat {
        let t = Instant::now();
        let dev = device.as_deref();
        let out = pool.install(|| -> Result<(Vec<f64>, Vec<[f64; 3]>, FmmStats)> {
            match kernel {
                FmmKernel::Laplace => {
                    let o = evaluate_distributed_on(comm, &sources, &q, targets.as_deref(), &params, isa, par, dev)?;
                    let field: Vec<[f64; 3]> = o.gradient.iter().map(|g| [-g[0], -g[1], -g[2]]).collect();
                    Ok((o.potential, field, o.stats))
                }
                FmmKernel::Stokeslet => {
                    let t = targets.as_deref();
                    let o = evaluate_stokeslet_distributed_on(comm, &sources, &forces, t, &params, isa, par, dev)?;
                    Ok((o.velocity.iter().flatten().copied().collect(), Vec::new(), o.stats))
                }
            }
        })?;
        log.line(&format!("evaluation {} of {repeat}: {:.4} s", r + 1, t.elapsed().as_secs_f64()));
        result = Some(out);
    }
    let (mut u, mut field, stats) = result.expect("at least one evaluation");
    let nv = if kernel == FmmKernel::Laplace { 1 } else { 3 };
    let check = args.check.or(cfg.run.check);
    let tgt = targets.as_deref().unwrap_or(&sources);
    let error = check.filter(|&k| k > 0).map(|k| {
        let (m, l2, max) = check_error(comm, &pool, tk, &sources, &q, tgt, &trows, nt, &u, k);
        log.line(&format!("check on {m} targets against the direct sum: relative l2 {l2:.3e}, relative max {max:.3e}"));
        json!({"targets": m, "relative_l2": l2, "relative_max": max, "tolerance": p.tolerance})
    });
    if let (Some(e), Some(tol)) = (&error, p.tolerance) {
        if e["relative_l2"].as_f64().is_some_and(|v| v > tol) {
            warn(
                comm,
                &format!(
                    "the measured error {:.3e} is above the tolerance {tol:e}: the tolerance table is measured on the \
                     uniform cube and the Plummer sphere; fix [fmm] order for this set",
                    e["relative_l2"].as_f64().unwrap_or(f64::NAN)
                ),
            );
        }
    }
    units.scale_back(&mut u, 1);
    units.scale_back(field.as_flattened_mut(), 2);
    if let Some(path) = staged.potential() {
        let shape: Vec<usize> = if nv == 1 { vec![nt] } else { vec![nt, nv] };
        let offset = outputs::create_npy(comm, path, &shape)?;
        let written = if trows.is_empty() { Ok(()) } else { npy::write_rows(path, offset, trows.start, nv, &u) };
        comm.agree(written)?;
    }
    if let Some(path) = staged.field() {
        let offset = outputs::create_npy(comm, path, &[nt, 3])?;
        let flat: Vec<f64> = field.iter().flatten().copied().collect();
        let written = if trows.is_empty() { Ok(()) } else { npy::write_rows(path, offset, trows.start, 3, &flat) };
        comm.agree(written)?;
    }
    let table_stats = StageStats::reduce(comm, &stats.times);
    let timings: serde_json::Map<String, Value> =
        table_stats.rows.iter().map(|&(s, lo, avg, hi)| (s.name().to_string(), min_avg_max((lo, avg, hi)))).collect();
    let total = table_stats.total.2;
    // interaction counts summed over ranks (a box shared by several ranks counts on each)
    let (m2l, p2p) = (comm.sum(stats.m2l as u64), comm.sum(stats.p2p[1]));
    let provenance = Provenance::new(&args.config, &args.command_line, started, ranks);
    let report_json = json!({
        "provenance": provenance.to_json(),
        "method": "fmm",
        "units": units.to_json(),
        "kernel": p.kernel,
        "sources": ns,
        "targets": nt,
        "ranks": ranks,
        "tolerance": p.tolerance,
        "fmm": {
            "order": params.order,
            "max_leaf": stats.max_leaf.0,
            "stencil": params.traversal.stencil,
            "precision": if params.precision == Precision::F32 { "f32" } else { "f64" },
            "eta": params.traversal.eta,
            "variable_order_reference": params.traversal.order_reference,
            "harmonic_densities": if kernel == FmmKernel::Laplace { 1 } else { 4 },
            "chosen_by": choice,
            "leaf_estimates_seconds": stats.leaf_estimates.iter().map(|&(l, t)| json!([l, t])).collect::<Vec<_>>(),
        },
        "isa": isa.name(),
        "backend": compute.compute.name(),
        "backend_requested": request.name(),
        "backend_reason": compute.reason,
        "device": device_name.as_ref().map(|d| json!({"description": d, "variants": stats.device_variants})),
        "threads": threads,
        "boxes": {"sources": stats.boxes[0], "targets": stats.boxes[1]},
        "depth": {"sources": stats.depth[0], "targets": stats.depth[1]},
        "let": {
            "bytes": comm.sum(stats.let_tree.bytes),
            "messages": comm.sum(stats.let_tree.messages),
            "boxes_read": comm.sum(stats.let_tree.boxes as u64),
            "multipoles_read": comm.sum(stats.let_tree.multipoles as u64),
            "particles_read": comm.sum(stats.let_tree.particles as u64),
            "shared_boxes": stats.let_tree.shared,
            "rounds_max": comm.max(stats.let_tree.rounds as u64),
            "transport": stats.let_tree.transport.name(),
            "owned_sources_min_max": [comm.min(stats.owned[0] as u64), comm.max(stats.owned[0] as u64)],
        },
        "interactions": {"m2l": m2l, "m2l_work": stats.m2l_work, "p2p_leaf_pairs": comm.sum(stats.p2p[0]), "p2p_pairs": p2p},
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
        "order {}, leaves of {} ({}), depth {}; M2L {} (work {:.2} of p^3 each), P2P pairs {:.3e}; {:.4e} targets/s\n",
        params.order,
        stats.max_leaf.0,
        if stats.max_leaf.1 { "cost model" } else { "run.toml" },
        stats.depth[0],
        m2l,
        stats.m2l_work,
        p2p as f64,
        nt as f64 / total.max(f64::MIN_POSITIVE)
    );
    table += &match &stats.device_variants {
        Some(v) => format!("backend {} ({v})\n", compute.compute.name()),
        None => format!("backend {}\n", compute.compute.name()),
    };
    if let Some(e) = &error {
        table += &format!(
            "error on {} targets against the direct sum: relative l2 {:.3e}\n",
            e["targets"],
            e["relative_l2"].as_f64().unwrap_or(f64::NAN)
        );
    }
    staged.commit(comm)?;
    for p in [&paths.potential, &paths.field, &paths.report].into_iter().flatten() {
        log.line(&format!("wrote {}", p.display()));
    }
    log.line(&format!("done in {:.2} s", t0.elapsed().as_secs_f64()));
    Ok(RunSummary { report: report_json, table })
}
