//! The `parki-dist run` application: read run.toml, load this rank's share of the particles,
//! plan, evaluate, check, write the potential and the report, print progress and the timing
//! table. The same code runs one process or R MPI ranks (`mpirun -n R parki-dist run run.toml`):
//! every rank reads its own rows of the inputs, rank 0 prints, the potential is written in the
//! global input order by every rank into its own rows of one file (a temporary file renamed
//! into place when complete, [`crate::outputs`]), and every step that can fail on one rank is
//! agreed on, so that all ranks stop with the same error (printed once, by rank 0, naming the
//! rank it arose on). The compute backend (`[run] backend`, [`crate::backend`]) is chosen once,
//! agreed on by every rank, and `Run::typed` is instantiated for each backend and precision.

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use parki_comm::{Backend, Comm, ReduceOp, StageStats, TrafficStats};
use parki_core::validate::narrow_positions;
use parki_core::{Error, Real, Result, Sources, StageKind};
use parki_decomp::Decomposition;
use parki_dist::{
    measure_occupancy, CpuBackend, DeviceFft, DeviceOverlap, DeviceP2g, DeviceP2p, DeviceVariants, DistEwaldSolver,
    Evaluation, EwaldOptions, EwaldStage, ExactPositions, NearPairs, ParallelOptions, PositionRounding, SolverReal,
    SortMode, SourceStatistics, Targets,
};
use parki_farfield::{FieldMethod, G2pVariant, Occupancy, P2gVariant};
use parki_fft3d::{LineEngine, PlanRigor};
use parki_nearfield::{Isa, PairAccuracy};
use serde_json::Value;

use crate::backend::{self, Choice, Compute, Request, RunBackend};
use crate::calibrate;
use crate::config::{repeat_error, RunConfig};
use crate::input::{load_problem, neutralise, prepare, Problem};
use crate::npy;
use crate::outputs::{self, Staged};
use crate::report::{self, EvaluationTimes, Provenance, ReportInputs};
use crate::units::{RunUnits, Units};
use crate::verify;
use crate::wisdom::Wisdom;

/// Command-line overrides of run.toml.
#[derive(Clone, Debug, Default)]
pub struct RunArgs {
    /// The run.toml.
    pub config: PathBuf,
    /// `--check K`.
    pub check: Option<usize>,
    /// `--threads N`.
    pub threads: Option<usize>,
    /// `--repeat R`.
    pub repeat: Option<usize>,
    /// No progress lines.
    pub quiet: bool,
    /// `--json`: the report goes to standard output.
    pub json: bool,
    /// The command line, for the report's provenance.
    pub command_line: Vec<String>,
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
pub(crate) struct Log {
    pub(crate) on: bool,
}

impl Log {
    pub(crate) fn line(&self, msg: &str) {
        if self.on {
            eprintln!("[parki-dist] {msg}");
        }
    }
}

/// Warnings on stderr, from rank 0 only (even with `--quiet`).
pub(crate) fn warn(comm: &Comm, msg: &str) {
    if comm.rank() == 0 {
        eprintln!("[parki-dist] warning: {msg}");
    }
}

/// Runs a run.toml on the ranks of `comm` (collective: every rank calls it with the same
/// arguments). Any rank's error is returned on every rank.
///
/// Order: the configuration, then the outputs ([`outputs::check`], [`Staged::begin`]: nothing
/// is read or computed for a run that could not write its results, and an earlier run's outputs
/// are removed), then the compute backend (`choose_backend`: a device that cannot be opened
/// stops the run here), the inputs (read, wrapped and checked in f64), the plan, the
/// evaluations, the check, and the outputs written into temporary files and renamed into place.
pub fn run(args: &RunArgs, comm: &Comm) -> Result<RunSummary> {
    let started = SystemTime::now();
    let t0 = Instant::now();
    let log = Log { on: !args.quiet && comm.rank() == 0 };
    let text = std::fs::read_to_string(&args.config)
        .map_err(|e| Error::Io { path: args.config.clone(), message: e.to_string() });
    let kind =
        text.and_then(|t| Ok((crate::config::equation(&t, &args.config)?, crate::treecode::method(&t, &args.config)?)));
    let (equation, method) = comm.agree(kind)?;
    if equation.as_deref() == Some("poisson") {
        return crate::poisson::run(args, comm);
    }
    match method.as_deref() {
        Some("treecode") => return comm.agree(crate::treecode::run(args, comm)),
        Some("fmm") => return comm.agree(crate::fmm::run(args, comm)),
        Some("auto") => {
            let choice = comm.agree(crate::auto::choose(args, comm))?;
            log.line(&format!("method = \"auto\": {}", choice.reason));
            let summary = match choice.method {
                crate::auto::Method::Fmm => comm.agree(crate::fmm::run(args, comm))?,
                crate::auto::Method::Treecode => comm.agree(crate::treecode::run(args, comm))?,
                crate::auto::Method::Ewald => run_ewald(args, comm, started, t0, log)?,
            };
            return comm.agree(crate::auto::annotate(comm, &choice, summary));
        }
        _ => {}
    }
    run_ewald(args, comm, started, t0, log)
}

/// The spectral Ewald run (the default method), the rest of [`run`].
fn run_ewald(args: &RunArgs, comm: &Comm, started: SystemTime, t0: Instant, log: Log) -> Result<RunSummary> {
    let cfg = comm.agree(RunConfig::load(&args.config))?;
    let popts = comm.agree(parallel_options(&cfg.parallel).and_then(|p| check_grid(p, comm.size())))?;
    if args.repeat == Some(0) {
        return Err(repeat_error("--repeat"));
    }
    let paths = comm.agree(outputs::check(&cfg, &args.config))?;
    if paths.is_empty() && !args.json {
        warn(
            comm,
            "run.toml has no [output] potential, field or report (and no --json): the potential is \
             computed and discarded, only the timing table is printed",
        );
    }
    let staged = Staged::begin(comm, &paths)?;
    check_memory(&cfg, args, comm, popts)?;
    let choice = choose_backend(&cfg, comm, log)?;
    log.line(&format!("reading {} on {} rank{}", args.config.display(), comm.size(), plural(comm.size())));
    let mut prob = comm.agree(load_problem(&cfg, &args.config, comm.rank(), comm.size()))?;
    prob.warnings.iter().for_each(|w| warn(comm, w));
    neutralise(comm, &mut prob);
    let prepared = prepare(&mut prob);
    comm.agree(prepared.map_err(|e| prob.globalise(e)))?;
    log.line(&format!(
        "{} sources, {} targets, kernel {}, {}, tolerance {:e}",
        prob.sources_total,
        prob.targets_total(),
        prob.kernel.name(),
        prob.precision,
        prob.tolerance
    ));
    // from here on the run computes in units near 1 (exact powers of two; `units`)
    let units = Units::for_ewald(comm, &prob);
    comm.agree(units.apply_ewald(&mut prob))?;
    if let Some(line) = units.line() {
        log.line(&line);
    }
    let provenance = Provenance::new(&args.config, &args.command_line, started, comm.size());
    let run = Run {
        cfg: &cfg,
        prob: &prob,
        popts,
        args,
        comm,
        log,
        provenance: &provenance,
        staged: &staged,
        backend: &choice,
        units,
    };
    let summary = match (prob.precision.as_str(), choice.compute) {
        ("f32", Compute::Cpu) => run.typed::<f32, CpuBackend<f32>>(),
        (_, Compute::Cpu) => run.typed::<f64, CpuBackend<f64>>(),
        (precision, Compute::Cuda) => run.cuda(precision),
    }?;
    staged.commit(comm)?;
    for p in [&paths.potential, &paths.field, &paths.report].into_iter().flatten() {
        log.line(&format!("wrote {}", p.display()));
    }
    log.line(&format!("done in {:.2} s", t0.elapsed().as_secs_f64()));
    Ok(summary)
}

/// The compute backend of `[run] backend`, the same on every rank ([`backend::resolve`]);
/// `"auto"` says on rank 0 which it chose and why. Collective.
fn choose_backend(cfg: &RunConfig, comm: &Comm, log: Log) -> Result<Choice> {
    let requested = comm.agree(backend_request(cfg))?;
    let choice = backend::resolve(requested, cfg.run.backend.is_some(), comm)?;
    if requested == Request::Auto {
        log.line(&format!("backend auto: {} ({})", choice.compute.name(), choice.reason));
    }
    Ok(choice)
}

/// `[run] backend` (default `"cpu"`).
pub fn backend_request(cfg: &RunConfig) -> Result<Request> {
    Ok(word("run.backend", cfg.run.backend.as_deref(), Request::parse, "\"cpu\", \"cuda\" or \"auto\"")?
        .unwrap_or_default())
}

/// Refuses, before any input is read or generated, a run whose memory per rank (the solver's
/// estimate plus this application's arrays: inputs in f64 and in the working precision, the
/// potential) exceeds what the node's ranks have. Collective.
fn check_memory(cfg: &RunConfig, args: &RunArgs, comm: &Comm, popts: ParallelOptions) -> Result<()> {
    let (sources, targets) = comm.agree(crate::input::counts(cfg, &args.config))?;
    let opts = comm.agree(options(cfg, args))?;
    let k = opts.kernel;
    let single = cfg.problem.precision == "f32";
    let real = if single { 4.0 } else { 8.0 };
    let ranks = comm.size() as f64;
    let per_source = (3.0 + k.density_width() as f64) * (8.0 + real);
    let separate = if cfg.targets.is_some() { 3.0 * (8.0 + real) } else { 0.0 };
    let per_target = separate + opts.output_dim() as f64 * (real + 8.0);
    let caller = (sources as f64 * per_source + targets as f64 * per_target) / ranks;
    let checked = if single {
        DistEwaldSolver::<f32>::check_memory(comm, &opts, popts, sources, targets, caller).map(drop)
    } else {
        DistEwaldSolver::<f64>::check_memory(comm, &opts, popts, sources, targets, caller).map(drop)
    };
    // name where the count came from, so the user knows which line of run.toml to change
    checked.map_err(|e| match e {
        Error::Resource { message } => {
            let origin = match cfg.sources.generate {
                Some(_) => format!("sources.generate.count = {sources}"),
                None => format!("sources.positions: {sources} rows"),
            };
            Error::Resource { message: format!("{origin}: {message}") }
        }
        e => e,
    })
}

/// The line rank 0 prints for an error that stopped the run: `program: error: message` on one
/// rank, `program: error (rank R of N): message` on several, where `R` is the rank the error
/// arose on ([`Error::Remote`] carries it to the others).
pub fn error_line(program: &str, e: &Error, ranks: usize) -> String {
    match e {
        Error::Remote { rank, message } => format!("{program}: error (rank {rank} of {ranks}): {message}"),
        _ if ranks > 1 => format!("{program}: error (rank 0 of {ranks}): {e}"),
        _ => format!("{program}: error: {e}"),
    }
}

pub(crate) fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Checks an explicit process grid against the rank count before any input is read.
pub(crate) fn check_grid(p: ParallelOptions, ranks: usize) -> Result<ParallelOptions> {
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
pub(crate) fn word<V>(
    field: &str,
    value: Option<&str>,
    parse: impl Fn(&str) -> Option<V>,
    allowed: &str,
) -> Result<Option<V>> {
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
pub fn parallel_options(p: &crate::config::ParallelSection) -> Result<ParallelOptions> {
    let grid = match &p.grid {
        None => None,
        Some(toml::Value::String(w)) if w == "auto" => None,
        Some(toml::Value::Array(a)) if a.len() == 2 && a.iter().all(|v| v.as_integer().is_some_and(|n| n > 0)) => {
            Some([0, 1].map(|i| a[i].as_integer().unwrap_or(1) as usize))
        }
        Some(other) => {
            return Err(Error::OutOfRange {
                field: "parallel.grid".into(),
                value: other.to_string(),
                allowed: "\"auto\" or [P_y, P_z], two positive integers whose product is the rank count".into(),
            })
        }
    };
    let decomposition =
        word("parallel.decomposition", p.decomposition.as_deref(), Decomposition::parse, ALLOWED_DECOMP)?
            .unwrap_or(Decomposition::Auto);
    let backend = word("parallel.backend", p.backend.as_deref(), Backend::parse, "\"alltoallv\" or \"persistent\"")?
        .unwrap_or(Backend::Alltoallv);
    Ok(ParallelOptions::new().grid(grid).decomposition(decomposition).backend(backend))
}

/// Whether the run measures the particles' occupancy of the cells for the parameter choice
/// (`[ewald] occupancy`, default `"measured"`).
///
/// # Errors
/// A value other than `"measured"` or `"uniform"` (names `ewald.occupancy`).
pub fn measured_occupancy(cfg: &RunConfig) -> Result<bool> {
    let parse = |v: &str| match v {
        "measured" => Some(true),
        "uniform" => Some(false),
        _ => None,
    };
    Ok(word("ewald.occupancy", cfg.ewald.occupancy.as_deref(), parse, "\"measured\" or \"uniform\"")?.unwrap_or(true))
}

/// The solver options a run.toml asks for.
pub fn options(cfg: &RunConfig, args: &RunArgs) -> Result<EwaldOptions> {
    let kernel = parki_core::Kernel::from_name(&cfg.problem.kernel)?;
    let lengths = cfg.problem.lengths();
    let domain = parki_core::Domain::new(lengths, cfg.problem.periodic_axes())?;
    let e = &cfg.ewald;
    if let Some(rc) = e.rc {
        // checked in the input's units before the solver sees it in the run's
        parki_farfield::params::check_fixed_rc(rc, &domain)?;
    }
    // the box and the fixed cut-off in the units the run computes in
    let s = parki_core::units::box_unit(lengths);
    let domain = parki_core::Domain::new(lengths.map(|l| l / s), cfg.problem.periodic_axes())?;
    let mut o = EwaldOptions::new(kernel, domain, cfg.problem.tolerance);
    o.rc = e.rc.map(|rc| rc / s);
    o.cell_size = e.cell_size;
    o.window_support = e.window_support;
    o.oversampling = e.oversampling;
    o.p2g = word("ewald.p2g", e.p2g.as_deref(), P2gVariant::parse, "\"blocked\" or \"scatter\"")?.unwrap_or_default();
    o.g2p = word("ewald.g2p", e.g2p.as_deref(), G2pVariant::parse, "\"sorted\" or \"base\"")?.unwrap_or_default();
    let accuracy = |v: &str| if v == "auto" { Some(None) } else { PairAccuracy::parse(v).map(Some) };
    o.pair_accuracy = word(
        "ewald.pair_accuracy",
        e.pair_accuracy.as_deref(),
        accuracy,
        "\"auto\", \"full\", \"medium\" or \"loose\"",
    )?
    .flatten();
    o.near_pairs = word("ewald.near_cutoff", e.near_cutoff.as_deref(), NearPairs::parse, "\"sphere\" or \"cells\"")?
        .unwrap_or_default();
    o.field = cfg.output.field.is_some();
    o.field_method =
        word("ewald.field_method", e.field_method.as_deref(), FieldMethod::parse, "\"window\" or \"spectral\"")?
            .unwrap_or_default();
    o.output()?;
    o.fft_rigor =
        word("ewald.fft_plan", e.fft_plan.as_deref(), PlanRigor::parse, PlanRigor::NAMES)?.unwrap_or_default();
    o.fft_lines =
        word("ewald.fft_lines", e.fft_lines.as_deref(), LineEngine::parse, LineEngine::NAMES)?.unwrap_or_default();
    o.isa = word("ewald.isa", e.isa.as_deref(), Isa::from_name, "\"avx512\", \"avx2\" or \"scalar\"")?;
    o.threads = args.threads.or(cfg.run.threads).unwrap_or(0);
    let p2p = word("run.p2p", cfg.run.p2p.as_deref(), DeviceP2p::parse, "\"gm1d\" or \"shared\"")?;
    let spread = word("run.spread", cfg.run.spread.as_deref(), DeviceP2g::parse, "\"auto\" or \"operator\"")?;
    let fft = word("run.device_fft", cfg.run.device_fft.as_deref(), DeviceFft::parse, "\"batched\" or \"components\"")?;
    let overlap =
        word("run.device_overlap", cfg.run.device_overlap.as_deref(), DeviceOverlap::parse, "\"none\" or \"p2p\"")?;
    o = o.device(
        DeviceVariants::new(p2p.unwrap_or_default(), spread.unwrap_or_default())
            .fft(fft.unwrap_or_default())
            .overlap(overlap.unwrap_or_default()),
    );
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

/// `x` with 6 decimals where that shows it (`1e-3 <= |x| < 1e6`), else in scientific notation:
/// a box of `1e-9` has a cut-off of `3e-11` and `xi` of `4e10`.
fn length_like(x: f64) -> String {
    if (1e-3..1e6).contains(&x.abs()) {
        format!("{x:.6}")
    } else {
        format!("{x:.6e}")
    }
}

fn convert3<T: Real>(v: &[[f64; 3]]) -> Vec<[T; 3]> {
    v.iter().map(|p| p.map(T::from_f64)).collect()
}

/// One run between reading the inputs and committing the outputs.
struct Run<'a> {
    cfg: &'a RunConfig,
    prob: &'a Problem,
    popts: ParallelOptions,
    args: &'a RunArgs,
    comm: &'a Comm,
    log: Log,
    provenance: &'a Provenance,
    staged: &'a Staged,
    backend: &'a Choice,
    /// The units the run computes in (`prob` is in them).
    units: Units,
}

/// Where the f32 plan is estimated slower than an f64 one for the same particles (the
/// positions' round-off in f32 can hold the tolerance only in cells smaller than f64 needs), a
/// warning saying so; `None` otherwise, or when f64 cannot be planned. CPU cost model;
/// collective.
fn f64_would_be_faster(
    comm: &Comm,
    opts: &EwaldOptions,
    popts: ParallelOptions,
    f32_params: &parki_dist::Params,
    prob: &Problem,
) -> Option<String> {
    let stats = opts.statistics.map(|s| s.with_rounding(PositionRounding::Exact));
    let o64 = opts.clone().statistics(stats);
    let p64 = DistEwaldSolver::<f64>::parameters(comm, &o64, popts, prob.sources_total, prob.targets_total()).ok()?;
    let (c32, c64) = (f32_params.cost.total(), p64.cost.total());
    (c64 < 0.8 * c32).then(|| {
        format!(
            "precision = \"f64\" is estimated faster for these particles ({c64:.3} s against {c32:.3} s per evaluation): \
             in f32 the round-off of their closest pairs holds tolerance {:e} only in cells of {}x{}x{} (f64: {}x{}x{})",
            opts.tolerance,
            f32_params.cells[0],
            f32_params.cells[1],
            f32_params.cells[2],
            p64.cells[0],
            p64.cells[1],
            p64.cells[2]
        )
    })
}

impl Run<'_> {
    /// [`Run::typed`] on the CUDA device.
    #[cfg(feature = "cuda")]
    fn cuda(&self, precision: &str) -> Result<RunSummary> {
        use parki_gpu::cuda::CudaDevice;
        use parki_gpu::GpuBackend;
        match precision {
            "f32" => self.typed::<f32, GpuBackend<f32, CudaDevice>>(),
            _ => self.typed::<f64, GpuBackend<f64, CudaDevice>>(),
        }
    }

    /// Without the CUDA backend ([`backend::resolve`] never chooses it here).
    #[cfg(not(feature = "cuda"))]
    fn cuda(&self, _precision: &str) -> Result<RunSummary> {
        Err(backend::feature_error())
    }

    /// Plans, evaluates, checks and writes in precision `T` on the backend `B`.
    fn typed<T: SolverReal, B: RunBackend<T>>(&self) -> Result<RunSummary> {
        let (prob, comm, log, args) = (self.prob, self.comm, self.log, self.args);
        let domain = prob.domain;
        let kernel = prob.kernel;
        // the positions were wrapped and checked in f64 (`input::prepare`); narrowing keeps a
        // coordinate inside [0, L) inside
        let pos: Vec<[T; 3]> = narrow_positions(&prob.positions, &domain);
        let trg: Option<Vec<[T; 3]>> = prob.targets.as_ref().map(|t| narrow_positions(t, &domain));
        let charges: Option<Vec<T>> = prob.charges.as_ref().map(|q| q.iter().map(|&v| T::from_f64(v)).collect());
        let forces = prob.forces.as_ref().map(|f| convert3::<T>(f));
        let dipoles = prob.dipoles.as_ref().map(|f| convert3::<T>(f));
        let normals = prob.normals.as_ref().map(|f| convert3::<T>(f));
        let nt = prob.local_targets();
        let sources = Sources {
            positions: &pos,
            charges: charges.as_deref(),
            forces: forces.as_deref(),
            dipoles: dipoles.as_deref(),
            normals: normals.as_deref(),
        };
        // close-pair statistics of the particles as read (f64) for the error model: the
        // stresslet's magnitude, and in f32 the round-off of narrowing the positions (the
        // solver is given the f64 positions too, and rounds them relative to their cells)
        let t_stats = Instant::now();
        let read = Sources {
            positions: &prob.positions,
            charges: prob.charges.as_deref(),
            forces: prob.forces.as_deref(),
            dipoles: prob.dipoles.as_deref(),
            normals: prob.normals.as_deref(),
        };
        let rounding = if T::BYTES == 4 { PositionRounding::F32Cells } else { PositionRounding::Exact };
        let stats = SourceStatistics::measure(comm, kernel, &domain, &read, prob.targets.as_deref(), rounding);
        log.line(&format!(
            "pair statistics in {:.2} s: source density seen by the targets {:.2} x the mean",
            comm.max(t_stats.elapsed().as_secs_f64()),
            stats.pairs().density_ratio(0)
        ));
        let repeat = args.repeat.or(self.cfg.run.repeat).unwrap_or(1);
        // the sources' occupancy of the cells around the targets for P2P's cost model
        let t_occ = Instant::now();
        let occupancy = if comm.agree(measured_occupancy(self.cfg))? {
            measure_occupancy(comm, &domain, &prob.positions, prob.targets.as_deref())
        } else {
            Occupancy::uniform()
        };
        log.line(&format!(
            "cell occupancy in {:.2} s: sources around a target {:.2} x the uniform count (cells of a third of \
             the box) to {:.2} x (a quarter of the particle spacing); 1/r potentials' mean square {:.2} x uniform",
            comm.max(t_occ.elapsed().as_secs_f64()),
            occupancy.steps().next().map_or(1.0, |s| s.1),
            occupancy.steps().last().map_or(1.0, |s| s.1),
            occupancy.magnitude(),
        ));
        let mut opts = comm
            .agree(options(self.cfg, args))?
            .statistics(Some(stats))
            .occupancy(occupancy.is_measured().then_some(occupancy))
            .evaluations(repeat);
        // `options` rescales the box as `Units::for_ewald` rescaled the problem's
        debug_assert_eq!(opts.domain, prob.domain);
        // relative paths of the run.toml (the cost model's file, the FFTW wisdom folder)
        let base = args.config.parent().unwrap_or(Path::new("."));
        // the CPU's cost constants: calibrated on this machine, or built in (a device has its own)
        let cost_choice = if self.backend.compute == Compute::Cpu {
            let setting = self.cfg.ewald.cost_model.as_deref();
            let choice = comm.agree(calibrate::resolve(comm, setting, base, opts.thread_count()))?;
            log.line(&choice.line);
            if let Some(w) = &choice.warning {
                warn(comm, w);
            }
            if let Some(c) = choice.cost {
                opts = opts.cost_model(c);
            }
            Some(choice)
        } else {
            None
        };
        let dim = opts.output_dim();
        let t_plan = Instant::now();
        let mut wisdom = Wisdom::load::<T>(comm, crate::wisdom::folder(self.cfg.run.fftw_wisdom.as_deref(), base), log);
        let mut engine =
            DistEwaldSolver::<T, B>::with_backend(comm, &opts, self.popts, prob.sources_total, prob.targets_total())?;
        wisdom.save::<T>(comm, opts.fft_rigor, log);
        if let Some(w) = wisdom.warning() {
            warn(comm, w);
        }
        let plan_seconds = comm.max(t_plan.elapsed().as_secs_f64());
        let device = engine.backend().device_report();
        // P2P runs on the device with the CUDA backend
        let isa = if device.is_some() { engine.backend_name() } else { engine.isa().name() };
        // the parameters in the input's units
        let p = engine.params().in_length_unit(self.units.length);
        let pg = engine.proc_grid();
        log.line(&format!(
            "planned in {:.2} s: xi = {}, rc = {} ({}x{}x{} cells, {:.1} sources/cell), grid {}x{}x{}, P = {}, \
             estimated error {:.2e}, {} threads per rank, P2P {}",
            plan_seconds,
            length_like(p.xi),
            length_like(p.rc_effective),
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
            isa
        ));
        if T::BYTES == 4 && self.backend.compute == Compute::Cpu {
            if let Some(w) = f64_would_be_faster(comm, &opts, self.popts, engine.params(), prob) {
                warn(comm, &w);
            }
        }
        if let Some(d) = &device {
            log.line(&format!("backend {}: {}", engine.backend_name(), d.line()));
        }
        if comm.size() > 1 {
            log.line(&format!(
                "{} ranks as a {} process grid [P_y, P_z] = {:?}, switch backend {}",
                comm.size(),
                pg.kind(),
                pg.dims,
                self.popts.backend.name()
            ));
        }
        let mut u = vec![T::ZERO; nt * dim];
        let mut ev = Evaluation::default();
        // each evaluation's total on this rank, reduced to the slowest rank's after the loop
        let mut totals = Vec::with_capacity(repeat);
        for r in 0..repeat {
            if repeat > 1 {
                log.line(&format!("evaluation {} of {repeat}", r + 1));
            }
            comm.reset_traffic();
            let targets = trg.as_deref().map_or(Targets::Sources, Targets::Points);
            let progress = &mut |s: EwaldStage, dt| {
                log.line(&format!("{:<10} {:>9.4} s (rank 0)", s.name(), dt));
            };
            ev = if T::BYTES == 4 {
                // the f64 positions as read: the cell lists round them relative to their cells
                let exact = ExactPositions { sources: &prob.positions, targets: prob.targets.as_deref() };
                engine.evaluate_exact_with_progress(&sources, targets, exact, &mut u, SortMode::Full, progress)?
            } else {
                engine.evaluate_with_progress(&sources, targets, &mut u, SortMode::Full, progress)?
            };
            totals.push(ev.times.total());
        }
        comm.all_reduce_f64(&mut totals, ReduceOp::Max);
        let evaluations = EvaluationTimes::new(&totals);
        ev.warnings.iter().for_each(|w| warn(comm, w));
        let stats = StageStats::reduce(comm, &ev.times);
        let traffic = if comm.size() > 1 { TrafficStats::reduce(comm, &engine.traffic_stages()) } else { Vec::new() };
        let pairs = comm.sum(ev.pairs);
        // every rank runs the same backend and variants: all or none have the overlap's time
        let overlapped_p2p = ev.overlapped_p2p.map(|t| {
            let mut m = [-t, t];
            comm.all_reduce_f64(&mut m, ReduceOp::Max);
            [-m[0], comm.sum(t) / comm.size() as f64, m[1]]
        });
        let mut u64v: Vec<f64> = u.iter().map(|v| v.to_f64()).collect();

        let check_count = args.check.or(self.cfg.run.check).unwrap_or(0);
        let check = if check_count > 0 {
            log.line(&format!(
                "checking {} random targets against the {} (f64 positions as read)",
                check_count.min(prob.targets_total()),
                verify::reference_name(prob.domain.periodicity())
            ));
            Some(verify::classical_check(comm, prob, opts.field, &u64v, check_count, &|m: &str| log.line(m)))
        } else {
            None
        };
        let check = check.map(|mut c| {
            // its absolute values in the input's units (the check ran in the run's)
            c.max_abs_error *= self.units.potential_factor();
            c.reference_rms *= self.units.potential_factor();
            c
        });
        if let Some(c) = &check {
            if c.reference_rms > 0.0 {
                log.line(&format!(
                    "relative RMS error {:.3e} from {} targets (tolerance {:e}; over the checked targets' own norm \
                     {:.3e}), {:.2} s",
                    c.relative_rms_error, c.targets, prob.tolerance, c.sample_relative_rms_error, c.seconds
                ));
            } else {
                // a relative error of a zero potential is not a number: say what was measured
                log.line(&format!(
                    "the reference potential is zero at the {} checked targets (zero strengths, or a single source \
                     at itself), so the tolerance, relative to the potential's RMS, does not apply: largest absolute \
                     error {:.3e}, {:.2} s",
                    c.targets, c.max_abs_error, c.seconds
                ));
            }
            if let Some((whole, sample)) = c.field {
                log.line(&format!(
                    "field: relative RMS error {whole:.3e} (over the checked targets' own norm {sample:.3e})"
                ));
            }
        }
        // the potential's and the field's columns of the results, in the input's units
        let kdim = kernel.output_dim();
        if self.units.rescaled() {
            for row in u64v.chunks_exact_mut(dim) {
                let (u, e) = row.split_at_mut(kdim);
                self.units.scale_back(u, 1);
                self.units.scale_back(e, 2);
            }
        }
        let columns = |range: std::ops::Range<usize>| -> Vec<f64> {
            u64v.chunks_exact(dim).flat_map(|row| row[range.clone()].iter().copied()).collect()
        };
        if let Some(path) = self.staged.potential() {
            // without a field the results are the potential: written as they are
            let split;
            let potential = if dim == kdim {
                &u64v[..]
            } else {
                split = columns(0..kdim);
                &split[..]
            };
            write_rows(comm, path, prob, kdim, potential)?;
        }
        if let Some(path) = self.staged.field() {
            write_rows(comm, path, prob, 3, &columns(kdim..dim))?;
        }
        let mut warnings = prob.warnings.clone();
        warnings.extend(ev.warnings.iter().cloned());
        warnings.extend(cost_choice.as_ref().and_then(|c| c.warning.clone()));
        warnings.extend(wisdom.warning().map(str::to_string));
        let cost_model = cost_choice.map_or_else(
            || serde_json::json!({"source": "backend", "reason": "the device's own constants"}),
            |c| c.report,
        );
        let inputs = ReportInputs {
            prob,
            precision: T::NAME,
            threads: engine.threads(),
            isa,
            compute: self.backend,
            device: device.as_ref(),
            opts: &opts,
            params: &p,
            ranks: comm.size(),
            proc_grid: pg,
            backend: self.popts.backend,
            plan_seconds,
            stats: &stats,
            evaluations: &evaluations,
            traffic: &traffic,
            pairs,
            padding_efficiency: ev.padding_efficiency,
            overlapped_p2p,
            check: check.as_ref(),
            warnings: &warnings,
            cost_model: &cost_model,
            fftw_wisdom: &wisdom.report(),
            provenance: self.provenance,
            units: self.units,
        };
        let report = report::build(&inputs);
        if let Some(path) = self.staged.report() {
            report::write(comm, path, &report)?;
        }
        Ok(RunSummary { table: report::table(&inputs), report })
    }
}

/// Writes the potential or the field (`dim` values per target) in the global input order into
/// `path` (the staged temporary file): rank 0 creates it at its full length, then every rank
/// writes its rows in place (no gather through one rank).
fn write_rows(comm: &Comm, path: &Path, prob: &Problem, dim: usize, u: &[f64]) -> Result<()> {
    let total = prob.targets_total();
    let shape: Vec<usize> = if dim == 1 { vec![total] } else { vec![total, dim] };
    let offset = outputs::create_npy(comm, path, &shape)?;
    let rows = &prob.target_rows;
    let written = if rows.is_empty() { Ok(()) } else { npy::write_rows(path, offset, rows.start, dim, u) };
    comm.agree(written)
}
