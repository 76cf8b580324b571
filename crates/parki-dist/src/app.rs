//! The `parki-dist run` application: read run.toml, load this rank's share of the particles,
//! plan, evaluate, check, write the potential and the report, print progress and the timing
//! table. The same code runs one process or R MPI ranks (`mpirun -n R parki-dist run run.toml`):
//! every rank reads its own rows of the inputs, rank 0 prints, the potential is written in the
//! global input order by every rank into its own rows of one file, and every step that can fail
//! on one rank is agreed on, so that all ranks stop with the same message.

use std::path::Path;
use std::time::Instant;

use parki_comm::{Backend, Comm, StageStats, TrafficStats};
use parki_core::validate::{narrow_positions, wrap_positions};
use parki_core::{Error, Real, Result, Sources, StageKind};
use parki_decomp::Decomposition;
use parki_farfield::{G2pVariant, P2gVariant};
use parki_fft3d::PlanRigor;
use parki_nearfield::Isa;
use serde_json::Value;

use crate::config::{resolve, GridChoice, RunConfig};
use crate::input::{load_problem, neutralise, Problem};
use crate::npy;
use crate::report::{self, ReportInputs};
use crate::verify;
use crate::{
    check_inputs, DistEwaldSolver, Evaluation, EwaldOptions, EwaldStage, ParallelOptions, SolverReal, SortMode, Targets,
};

/// Command-line overrides of run.toml.
#[derive(Clone, Debug, Default)]
pub struct RunArgs {
    /// The run.toml.
    pub config: std::path::PathBuf,
    /// `--check K`.
    pub check: Option<usize>,
    /// `--threads N`.
    pub threads: Option<usize>,
    /// `--repeat R`.
    pub repeat: Option<usize>,
    /// No progress lines.
    pub quiet: bool,
}

/// What a run produced (the JSON report and the tables), the same on every rank.
#[derive(Clone, Debug)]
pub struct RunSummary {
    /// The report.
    pub report: Value,
    /// The timing table (and, on several ranks, the communication table).
    pub table: String,
}

/// Progress lines on stderr, from rank 0 only.
#[derive(Clone, Copy, Debug)]
struct Log {
    on: bool,
}

impl Log {
    fn line(&self, msg: &str) {
        if self.on {
            eprintln!("[parki-dist] {msg}");
        }
    }
}

/// Runs a run.toml on the ranks of `comm` (collective: every rank calls it with the same
/// arguments). Any rank's error is returned on every rank.
pub fn run(args: &RunArgs, comm: &Comm) -> Result<RunSummary> {
    let t0 = Instant::now();
    let log = Log { on: !args.quiet && comm.rank() == 0 };
    let cfg = comm.agree(RunConfig::load(&args.config))?;
    let popts = comm.agree(parallel_options(&cfg).and_then(|p| check_grid(p, comm.size())))?;
    log.line(&format!("reading {} on {} rank{}", args.config.display(), comm.size(), plural(comm.size())));
    let mut prob = comm.agree(load_problem(&cfg, &args.config, comm.rank(), comm.size()))?;
    neutralise(comm, &mut prob);
    log.line(&format!(
        "{} sources, {} targets, kernel {}, {}, tolerance {:e}",
        prob.sources_total,
        prob.targets_total(),
        prob.kernel.name(),
        prob.precision,
        prob.tolerance
    ));
    let summary = match prob.precision.as_str() {
        "f32" => run_typed::<f32>(&cfg, &prob, popts, args, comm, log),
        _ => run_typed::<f64>(&cfg, &prob, popts, args, comm, log),
    }?;
    log.line(&format!("done in {:.2} s", t0.elapsed().as_secs_f64()));
    Ok(summary)
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Checks an explicit process grid against the rank count before any input is read.
fn check_grid(p: ParallelOptions, ranks: usize) -> Result<ParallelOptions> {
    match p.grid {
        Some(g) if g[0] * g[1] != ranks => Err(Error::OutOfRange {
            field: "parallel.grid".into(),
            value: format!("{g:?} on {ranks} rank{}", plural(ranks)),
            allowed: format!("[P_y, P_z] with P_y P_z = {ranks}, the rank count, or \"auto\""),
        }),
        _ => Ok(p),
    }
}

const ALLOWED_DECOMP: &str = "\"auto\", \"slab\" or \"pencil\"";

/// A run.toml word: `None` (absent) or the value `parse` accepts; anything else is an error
/// naming the field, the value and the words allowed.
fn word<V>(field: &str, value: Option<&str>, parse: impl Fn(&str) -> Option<V>, allowed: &str) -> Result<Option<V>> {
    value
        .map(|v| {
            parse(v).ok_or_else(|| Error::OutOfRange {
                field: field.into(),
                value: format!("\"{v}\""),
                allowed: allowed.into(),
            })
        })
        .transpose()
}

/// The `[parallel]` table as solver options.
pub fn parallel_options(cfg: &RunConfig) -> Result<ParallelOptions> {
    let p = &cfg.parallel;
    let grid = match &p.grid {
        None => None,
        Some(GridChoice::Word(w)) if w == "auto" => None,
        Some(GridChoice::Word(w)) => {
            return Err(Error::OutOfRange {
                field: "parallel.grid".into(),
                value: format!("\"{w}\""),
                allowed: "\"auto\" or [P_y, P_z]".into(),
            })
        }
        Some(GridChoice::Dims(d)) => Some(*d),
    };
    let decomposition =
        word("parallel.decomposition", p.decomposition.as_deref(), Decomposition::parse, ALLOWED_DECOMP)?
            .unwrap_or(Decomposition::Auto);
    let backend = word("parallel.backend", p.backend.as_deref(), Backend::parse, "\"alltoallv\" or \"persistent\"")?
        .unwrap_or(Backend::Alltoallv);
    Ok(ParallelOptions { grid, decomposition, backend })
}

/// The solver options a run.toml asks for.
pub fn options(cfg: &RunConfig, prob: &Problem, args: &RunArgs) -> Result<EwaldOptions> {
    let mut o = EwaldOptions::new(prob.kernel, prob.domain, prob.tolerance);
    let e = &cfg.ewald;
    o.rc = e.rc;
    o.cell_size = e.cell_size;
    o.window_support = e.window_support;
    o.oversampling = e.oversampling;
    let p2g = |v: &str| match v {
        "blocked" => Some(P2gVariant::Blocked),
        "scatter" => Some(P2gVariant::Scatter),
        _ => None,
    };
    o.p2g = word("ewald.p2g", e.p2g.as_deref(), p2g, "\"blocked\" or \"scatter\"")?.unwrap_or(P2gVariant::Blocked);
    let g2p = |v: &str| match v {
        "sorted" => Some(G2pVariant::TargetSorted),
        "base" => Some(G2pVariant::Base),
        _ => None,
    };
    o.g2p = word("ewald.g2p", e.g2p.as_deref(), g2p, "\"sorted\" or \"base\"")?.unwrap_or(G2pVariant::TargetSorted);
    let rigor = |v: &str| match v {
        "estimate" => Some(PlanRigor::Estimate),
        "measure" => Some(PlanRigor::Measure),
        _ => None,
    };
    o.fft_rigor = word("ewald.fft_plan", e.fft_plan.as_deref(), rigor, "\"estimate\" or \"measure\"")?
        .unwrap_or(PlanRigor::Estimate);
    o.isa = word("ewald.isa", e.isa.as_deref(), Isa::from_name, "\"avx512\", \"avx2\" or \"scalar\"")?;
    o.threads = args.threads.or(cfg.run.threads).unwrap_or(0);
    if let Some(gb) = cfg.run.max_grid_gb {
        if !(gb.is_finite() && gb > 0.0) {
            return Err(Error::OutOfRange {
                field: "run.max_grid_gb".into(),
                value: format!("{gb}"),
                allowed: "a positive number of GB".into(),
            });
        }
        o.max_grid_bytes = Some((gb * 1e9) as usize);
    }
    Ok(o)
}

fn convert3<T: Real>(v: &[[f64; 3]]) -> Vec<[T; 3]> {
    v.iter().map(|p| p.map(T::from_f64)).collect()
}

fn run_typed<T: SolverReal>(
    cfg: &RunConfig,
    prob: &Problem,
    popts: ParallelOptions,
    args: &RunArgs,
    comm: &Comm,
    log: Log,
) -> Result<RunSummary> {
    let domain = prob.domain;
    let kernel = prob.kernel;
    let mut pos: Vec<[T; 3]> = narrow_positions(&prob.positions, &domain);
    let mut trg: Option<Vec<[T; 3]>> = prob.targets.as_ref().map(|t| narrow_positions(t, &domain));
    let charges: Option<Vec<T>> = prob.charges.as_ref().map(|q| q.iter().map(|&v| T::from_f64(v)).collect());
    let forces = prob.forces.as_ref().map(|f| convert3::<T>(f));
    let dipoles = prob.dipoles.as_ref().map(|f| convert3::<T>(f));
    let normals = prob.normals.as_ref().map(|f| convert3::<T>(f));
    // input checks with the rows of the user's files, agreed before any collective
    let dim = kernel.output_dim();
    let nt = prob.local_targets();
    let wrapped = if prob.wrap {
        wrap_positions("sources.positions", &mut pos, &domain)
            .and_then(|()| trg.as_mut().map_or(Ok(()), |t| wrap_positions("targets.positions", t, &domain)))
    } else {
        Ok(())
    };
    let sources = Sources {
        positions: &pos,
        charges: charges.as_deref(),
        forces: forces.as_deref(),
        dipoles: dipoles.as_deref(),
        normals: normals.as_deref(),
    };
    let checked = wrapped.and_then(|()| {
        let targets = trg.as_deref().map_or(Targets::Sources, Targets::Points);
        check_inputs(kernel, &domain, &sources, targets, nt * dim).map(drop)
    });
    comm.agree(checked.map_err(|e| prob.globalise(e)))?;
    let opts = comm.agree(options(cfg, prob, args))?;
    let t_plan = Instant::now();
    let mut engine = DistEwaldSolver::<T>::new(comm, &opts, popts, prob.sources_total, prob.targets_total())?;
    let plan_seconds = comm.max(t_plan.elapsed().as_secs_f64());
    let p = engine.params().clone();
    let pg = engine.proc_grid();
    log.line(&format!(
        "planned in {:.2} s: xi = {:.6}, rc = {:.6} ({}x{}x{} cells, {:.1} sources/cell), grid {}x{}x{}, P = {}, \
         estimated error {:.2e}, {} threads per rank, P2P {}",
        plan_seconds,
        p.xi,
        p.rc_effective,
        p.cells[0],
        p.cells[1],
        p.cells[2],
        p.sources_per_cell,
        p.grid[0],
        p.grid[1],
        p.grid[2],
        p.p,
        p.estimate.total,
        engine.threads(),
        engine.isa().name()
    ));
    if comm.size() > 1 {
        log.line(&format!(
            "{} ranks as a {} process grid [P_y, P_z] = {:?}, switch backend {}",
            comm.size(),
            pg.kind(),
            pg.dims,
            popts.backend.name()
        ));
    }
    let mut u = vec![T::ZERO; nt * dim];
    let repeat = args.repeat.or(cfg.run.repeat).unwrap_or(1).max(1);
    let mut ev = Evaluation::default();
    for r in 0..repeat {
        if repeat > 1 {
            log.line(&format!("evaluation {} of {repeat}", r + 1));
        }
        comm.reset_traffic();
        let targets = trg.as_deref().map_or(Targets::Sources, Targets::Points);
        ev = engine.evaluate_with_progress(
            &sources,
            targets,
            &mut u,
            SortMode::Full,
            &mut |s: EwaldStage, dt: f64| {
                log.line(&format!("{:<10} {:>9.4} s (rank 0)", s.name(), dt));
            },
        )?;
    }
    for w in &ev.warnings {
        if comm.rank() == 0 {
            eprintln!("[parki-dist] warning: {w}");
        }
    }
    let stats = StageStats::reduce(comm, &ev.times);
    let traffic = if comm.size() > 1 { TrafficStats::reduce(comm, &engine.traffic_stages()) } else { Vec::new() };
    let pairs = comm.sum(ev.pairs);
    let u64v: Vec<f64> = u.iter().map(|v| v.to_f64()).collect();

    let check_count = args.check.or(cfg.run.check).unwrap_or(0);
    let check = if check_count > 0 {
        log.line(&format!(
            "checking {} random targets against the classical Ewald sum",
            check_count.min(prob.targets_total())
        ));
        Some(verify::classical_check(comm, prob, &sources, trg.as_deref(), &u64v, check_count))
    } else {
        None
    };
    if let Some(c) = &check {
        log.line(&format!(
            "relative RMS error {:.3e} on {} targets (tolerance {:e}), {:.2} s",
            c.relative_rms_error, c.targets, prob.tolerance, c.seconds
        ));
    }
    if let Some(path) = &cfg.output.potential {
        let path = resolve(&args.config, path);
        write_potential(comm, &path, prob, dim, &u64v)?;
        log.line(&format!("wrote {}", path.display()));
    }
    let inputs = ReportInputs {
        prob,
        precision: T::NAME,
        threads: engine.threads(),
        isa: engine.isa().name(),
        opts: &opts,
        params: &p,
        ranks: comm.size(),
        proc_grid: pg,
        backend: popts.backend,
        plan_seconds,
        stats: &stats,
        traffic: &traffic,
        pairs,
        padding_efficiency: ev.padding_efficiency,
        check: check.as_ref(),
        warnings: &ev.warnings,
    };
    let report = report::build(&inputs);
    if let Some(path) = &cfg.output.report {
        let path = resolve(&args.config, path);
        let written = if comm.rank() == 0 {
            let text = serde_json::to_string_pretty(&report).expect("report serialises");
            std::fs::write(&path, text + "\n").map_err(|e| Error::Io { path: path.clone(), message: e.to_string() })
        } else {
            Ok(())
        };
        comm.agree(written)?;
        log.line(&format!("wrote {}", path.display()));
    }
    Ok(RunSummary { table: report::table(&inputs), report })
}

/// Writes the potential in the global input order: rank 0 creates the file at its full length,
/// then every rank writes its rows in place (no gather through one rank).
fn write_potential(comm: &Comm, path: &Path, prob: &Problem, dim: usize, u: &[f64]) -> Result<()> {
    let total = prob.targets_total();
    let shape: Vec<usize> = if dim == 1 { vec![total] } else { vec![total, dim] };
    let created = if comm.rank() == 0 { npy::create(path, &shape) } else { Ok(0) };
    // only rank 0 knows the header length
    let offset = comm.max(comm.agree(created)? as u64) as usize;
    let rows = &prob.target_rows;
    let written = if rows.is_empty() { Ok(()) } else { npy::write_rows(path, offset, rows.start, dim, u) };
    comm.agree(written)
}
