//! `parki-dist run` for `[problem] method = "auto"`: the method is chosen by the measured cost
//! models of the spectral Ewald sum, the treecode and the FMM for the run's particles, kernel,
//! tolerance, threads and ranks, then the chosen method runs the same run.toml; the report's
//! `auto` section has every candidate's estimate and the reason.
//!
//! - **Periodic axes**: only the spectral Ewald sum handles them: it is chosen.
//! - **Free space**: the candidates are the methods with the kernel: the FMM (Laplace,
//!   Stokeslet), the treecode (every kernel), and the free-space Ewald sum (0P: Laplace,
//!   Stokeslet, stresslet, Stokes) when `problem.box` is given and holds every particle. Each is
//!   priced on a sample of the particles (at most [`SAMPLE`], the same on every rank):
//!   - the FMM by its cost model ([`parki_fmm::cost::CostModel::estimate_from_sample`]): the
//!     sample's trees stand for the whole set's at each candidate leaf size;
//!   - the treecode by its kernel evaluations (the traversal of the sample's trees with
//!     `n_p s/n` proxies, so that it decides as on the whole set; pairs scaled by `(n/s)^2`,
//!     particle-proxy terms by `n/s`) times the measured time per
//!     evaluation of the kernel ([`TREE_NS_PER_EVALUATION`]);
//!   - the Ewald sum (particles from files only: its generator makes other particles than the
//!     tree methods') by its parameter selection's cost model, with the sample's occupancy of
//!     the cells ([`parki_farfield::occupancy`], as the run measures it on all particles), so
//!     that clustered particles get the parameters, and the price, the run will have.
//!
//!   On the CUDA backend (`[run] backend = "cuda"`, or `"auto"` where it finds a device)
//!   the methods are priced on the device ([`Pricing::Device`]): the FMM by the device's
//!   constants ([`CostModel::device`]), the treecode by the device's time per kernel
//!   evaluation ([`TREE_DEVICE_NS_PER_EVALUATION`]), the Ewald sum by its device plan repriced
//!   at the device's constants ([`parki_dist::CostModel::device`]) and its cell lists; the
//!   host's parts (the tree methods' trees and traversal, the Ewald sum's kernel tables) at
//!   what they took on the node of those measurements ([`DEVICE_HOST_NS_PER_POINT`]).
//!
//!   A run's estimate is its plan (the Ewald sum's kernel tables of the free axes,
//!   [`parki_farfield::params::plan_seconds`]: 0.2-1x one evaluation) and its `repeat`
//!   evaluations (`--repeat`, `[run] repeat`), one thread's seconds divided by the threads and
//!   ranks: a single evaluation favours the tree methods, a time-stepping run with one plan the
//!   Ewald sum. A method is a candidate
//!   only if it reads the whole run.toml: `[output] field` leaves the FMM and the Ewald sum
//!   (Laplace), `precision` the FMM and the Ewald sum, a treecode kernel parameter the
//!   treecode; the report lists each excluded method with the key that excluded it. No
//!   method's own table (`[fmm]`, `[treecode]`, `[ewald]`, `[parallel]`) is allowed, and a
//!   tolerance is required.

use parki_comm::Comm;
use parki_core::{Domain, Error, Kernel, Result};
use parki_dist::{DistEwaldSolver, EwaldOptions, Occupancy, ParallelOptions, Params};
use parki_fmm::cost::CostModel;
use parki_fmm::octree::{bounds, RootCube, SortedPoints};
use parki_fmm::{for_tolerance_of, FmmKernel};
use parki_treecode::{for_tolerance, Interactions, Tree, TreeKernel, TreeParams};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::app::{RunArgs, RunSummary};
use crate::backend::{self, Compute};
use crate::config::{ParticleSection, RunConfig};
use crate::fmm::FmmConfig;
use crate::report;
use crate::treecode::{particles, TreecodeConfig};

/// Most sampled particles (sources and targets each).
pub const SAMPLE: usize = 200_000;

/// Seconds per kernel evaluation of the treecode on one thread (its near and far lists, with
/// the upward and downward passes spread over them), measured on the machine of
/// docs/treecode.md: `parki-dist run` with `method = "treecode"`, tolerance 1e-6 (degree 7,
/// theta 0.6), 1e5 uniform points, `--threads 1`, divided by the evaluations this module
/// counts for the same run (5.25e9; docs/fmm.md §4.2).
pub const TREE_NS_PER_EVALUATION: [(&str, f64); 8] = [
    ("laplace", 0.58),
    ("yukawa", 1.49),
    ("regularized-coulomb", 0.55),
    ("regularized-yukawa", 1.74),
    ("sin-over-r", 3.91),
    ("stokeslet", 2.60),
    ("stresslet", 1.54),
    ("stokes", 2.10),
];

/// Seconds per kernel evaluation of the treecode's four lists on a CUDA device (the whole
/// device), nanoseconds. Measured on an NVIDIA H200 (docs/treecode.md §6): Laplace (Coulomb)
/// 1.31e12 evaluations in 3.34 s (1e7 uniform points, degree 8, theta 0.7), the Stokeslet
/// from its 1e7 run at tolerance 1e-6 (7.18 s, less the host's 0.92 s, over the 1.11e12
/// evaluations this module counts for it); the other kernels at their CPU time's ratio to Laplace's
/// ([`TREE_NS_PER_EVALUATION`]).
pub const TREE_DEVICE_NS_PER_EVALUATION: [(&str, f64); 2] = [("laplace", 2.55e-3), ("stokeslet", STOKESLET_DEVICE_NS)];

/// See [`TREE_DEVICE_NS_PER_EVALUATION`].
const STOKESLET_DEVICE_NS: f64 = 5.64e-3;

/// Host seconds per point (sources, and targets when apart) of a tree method's evaluation on
/// the CUDA backend, nanoseconds: the host builds the trees and traverses them (and the
/// treecode's passes are launched per level), measured on the H200's node (16 host
/// threads): the FMM's tree build and traversal 0.089 s at 1e6 and 1.0 s at 1e7 uniform
/// points (docs/fmm.md §5.1, before session 33's cheaper leaf choice), the treecode's tree
/// build, traversal and passes 0.92 s at 1e7 (docs/treecode.md §6). The Ewald sum's cell
/// lists and uploads run on the device: [`DEVICE_EWALD_NS_PER_PARTICLE`].
pub const DEVICE_HOST_NS_PER_POINT: [(Method, f64); 2] = [(Method::Fmm, 95.0), (Method::Treecode, 92.0)];

/// The Ewald sum's stages on a device outside its cost model, per source and per target,
/// nanoseconds: the cell lists (counting sorts) and the uploads, measured on the H200 (0.5
/// to 0.8 of `4 N` ns at N = 1e6, 4e6 and 1.6e7 in 3P: docs/performance.md §8.8).
pub const DEVICE_EWALD_NS_PER_PARTICLE: f64 = 4.0;

/// The Ewald sum's plan (the kernel tables of the free axes) on `c` cores takes its one-thread
/// time over `c^PLAN_SPEEDUP_EXPONENT`: measured 1.35x (1e5 points, tolerance 1e-6) and 1.68x
/// (1e6) on two threads (its page faults and the transforms of one mode scale worse than the
/// evaluation).
pub const PLAN_SPEEDUP_EXPONENT: f64 = 0.6;

/// The keys `method = "auto"` reads from `[problem]` (the rest is the chosen method's).
#[derive(Clone, Debug, Deserialize)]
struct AutoProblem {
    kernel: String,
    tolerance: Option<f64>,
    periodic: Option<Vec<bool>>,
    #[serde(rename = "box")]
    box_lengths: Option<Vec<f64>>,
    kappa: Option<f64>,
    epsilon: Option<f64>,
    wavenumber: Option<f64>,
    precision: Option<String>,
}

/// The sections `method = "auto"` reads.
#[derive(Clone, Debug, Deserialize)]
struct AutoConfig {
    problem: AutoProblem,
    sources: ParticleSection,
    targets: Option<ParticleSection>,
}

/// A method `auto` can choose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// The spectral Ewald sum.
    Ewald,
    /// The BLDTT treecode.
    Treecode,
    /// The fast multipole method.
    Fmm,
}

impl Method {
    /// The name `[problem] method` takes.
    pub fn name(self) -> &'static str {
        match self {
            Method::Ewald => "ewald",
            Method::Treecode => "treecode",
            Method::Fmm => "fmm",
        }
    }
}

/// Where `auto` prices the methods: the backend the chosen method will run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pricing {
    /// The CPU: one thread's seconds over the run's cores.
    Cpu,
    /// A CUDA device per rank: the devices' seconds over the ranks, and the host's parts.
    Device,
}

impl Pricing {
    /// Name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Pricing::Cpu => "cpu",
            Pricing::Device => "device",
        }
    }
}

/// The spectral Ewald sum's parameters as a backend would choose them: `(comm, options,
/// f32, sources, targets)`. Collective.
pub type Planner = fn(&Comm, &EwaldOptions, bool, usize, usize) -> Result<Params>;

/// [`Planner`] of the CPU backend.
pub fn cpu_planner(comm: &Comm, opts: &EwaldOptions, f32: bool, ns: usize, nt: usize) -> Result<Params> {
    if f32 {
        DistEwaldSolver::<f32>::parameters(comm, opts, ParallelOptions::default(), ns, nt)
    } else {
        DistEwaldSolver::<f64>::parameters(comm, opts, ParallelOptions::default(), ns, nt)
    }
}

/// [`Planner`] of the CUDA backend on devices `D` (its lanes, its cut-off sphere and its
/// memory).
pub fn device_planner<D: parki_gpu::Device>(
    comm: &Comm,
    opts: &EwaldOptions,
    f32: bool,
    ns: usize,
    nt: usize,
) -> Result<Params> {
    use parki_gpu::GpuBackend;
    if f32 {
        DistEwaldSolver::<f32, GpuBackend<f32, D>>::parameters(comm, opts, ParallelOptions::default(), ns, nt)
    } else {
        DistEwaldSolver::<f64, GpuBackend<f64, D>>::parameters(comm, opts, ParallelOptions::default(), ns, nt)
    }
}

/// The planner of this binary's CUDA backend.
#[cfg(feature = "cuda")]
const CUDA_PLANNER: Planner = device_planner::<parki_gpu::cuda::CudaDevice>;

/// The planner of this binary's CUDA backend (none: [`backend::resolve`] never chooses it).
#[cfg(not(feature = "cuda"))]
const CUDA_PLANNER: Planner = |_, _, _, _, _| Err(backend::feature_error());

/// The choice and what it was made from.
#[derive(Clone, Debug)]
pub struct AutoChoice {
    /// The chosen method.
    pub method: Method,
    /// Why.
    pub reason: String,
    /// The report's `auto` section.
    pub report: Value,
    /// `[output] report`, resolved against the run.toml, if given.
    pub report_path: Option<std::path::PathBuf>,
}

/// Every `total / SAMPLE`-th row (rounded up) of this rank's `rows` (starting at global row
/// `start`), gathered from every rank.
fn sample(comm: &Comm, positions: &[[f64; 3]], start: usize, total: usize) -> Vec<[f64; 3]> {
    let step = total.div_ceil(SAMPLE).max(1);
    let first = (step - start % step) % step;
    let mine: Vec<[f64; 3]> = positions.iter().skip(first).step_by(step).copied().collect();
    comm.all_gatherv(&mine)
}

/// One candidate's estimate: seconds on the run's cores and a note.
struct Estimate {
    method: Method,
    /// The run's seconds on its cores: plan and every evaluation.
    seconds: f64,
    detail: Value,
}

/// Chooses the method for the run.toml of `args`. Collective (every rank gets the same
/// choice).
///
/// # Errors
/// A run.toml that does not parse, a kernel no method has, a missing tolerance, unreadable
/// particles.
pub fn choose(args: &RunArgs, comm: &Comm) -> Result<AutoChoice> {
    choose_with(args, comm, None)
}

/// [`choose`], priced as `pricing` says (`None`: on the backend `[run] backend` resolves to,
/// [`backend::resolve`], a device opened and closed on every rank for `"cuda"` and `"auto"`).
/// Collective.
///
/// # Errors
/// As [`choose`]; a `[run] backend` that cannot run ([`backend::resolve`]).
pub fn choose_with(args: &RunArgs, comm: &Comm, pricing: Option<(Pricing, Planner)>) -> Result<AutoChoice> {
    let path = &args.config;
    let text = std::fs::read_to_string(path).map_err(|e| Error::Io { path: path.clone(), message: e.to_string() })?;
    let table: toml::Table =
        toml::from_str(&text).map_err(|e| Error::Config { path: path.clone(), message: e.to_string() })?;
    let mut view = toml::Table::new();
    for key in ["problem", "sources", "targets"] {
        if let Some(v) = table.get(key) {
            view.insert(key.into(), v.clone());
        }
    }
    let cfg: AutoConfig = view.try_into().map_err(|e: toml::de::Error| Error::Config {
        path: path.clone(),
        message: format!("method = \"auto\": {e}"),
    })?;
    let p = &cfg.problem;
    // which methods read the whole run.toml (each method's own parse, as its run would)
    let fits_fmm = toml::from_str::<FmmConfig>(&text).map(|c| c.output.field.is_some());
    let fits_treecode = toml::from_str::<TreecodeConfig>(&text).map(|_| ());
    let fits_ewald = RunConfig::parse(&text, path).map(|c| c.output.field.is_some());
    let field = matches!(fits_fmm, Ok(true)) || matches!(fits_ewald, Ok(true));
    let unread = |e: String| format!("it does not read this run.toml: {e}");
    for section in ["ewald", "treecode", "fmm", "parallel", "backend"] {
        if table.contains_key(section) {
            return Err(Error::OutOfRange {
                field: section.into(),
                value: "given".into(),
                allowed: "no method's own table with method = \"auto\" (choose the method to set its parameters)"
                    .into(),
            });
        }
    }
    let report_path = table
        .get("output")
        .and_then(|o| o.get("report"))
        .and_then(toml::Value::as_str)
        .map(|r| crate::config::resolve(path, std::path::Path::new(r)));
    let periodic = p.periodic.clone().unwrap_or_else(|| vec![false; 3]);
    if periodic.iter().any(|&b| b) {
        let reason = format!("periodic = {periodic:?}: only the spectral Ewald sum handles periodic axes");
        let report = json!({"chosen": "ewald", "reason": reason});
        return Ok(AutoChoice { method: Method::Ewald, report, reason, report_path });
    }
    let tol = p.tolerance.ok_or_else(|| Error::Missing {
        field: "problem.tolerance".into(),
        reason: "method = \"auto\" prices each method at the tolerance".into(),
    })?;
    // the backend the chosen method will run on (it resolves the same key again)
    let (pricing, planner, compute) = match pricing {
        Some((pricing, planner)) => (pricing, planner, format!("{} (given)", pricing.name())),
        None => {
            let key = table.get("run").and_then(|r| r.get("backend"));
            let request = backend::request(key.and_then(toml::Value::as_str))?;
            let choice = backend::resolve(request, key.is_some(), comm)?;
            match choice.compute {
                Compute::Cpu => (Pricing::Cpu, cpu_planner as Planner, choice.reason),
                Compute::Cuda => (Pricing::Device, CUDA_PLANNER, choice.reason),
            }
        }
    };
    let (rank, ranks) = (comm.rank(), comm.size());
    let threads = args.threads.unwrap_or_else(rayon::current_num_threads).max(1);
    let cores = (threads * ranks) as f64;
    // evaluations of the run (one plan): `--repeat`, else `[run] repeat`, else 1
    let repeat = match args.repeat {
        Some(r) => r,
        None => match table.get("run").and_then(|r| r.get("repeat")).and_then(toml::Value::as_integer) {
            Some(r) => usize::try_from(r).unwrap_or(1),
            None => 1,
        },
    }
    .max(1);
    let src = comm.agree(particles(&cfg.sources, "sources", path, None, rank, ranks))?;
    let tgt = match &cfg.targets {
        Some(t) => Some(comm.agree(particles(t, "targets", path, None, rank, ranks))?),
        None => None,
    };
    let (ns, nt) = (src.total, tgt.as_ref().map_or(src.total, |t| t.total));
    let xs = sample(comm, &src.positions, src.rows.start, ns);
    let xt = tgt.as_ref().map(|t| sample(comm, &t.positions, t.rows.start, nt));
    let f32_run = p.precision.as_deref() == Some("f32");

    let shape = Shape { ns, nt, tol, field, f32_run, repeat, cores, ranks };
    let mut estimates: Vec<Estimate> = Vec::new();
    let mut excluded: Vec<Value> = Vec::new();
    // the FMM
    let fmm_kernel = match p.kernel.as_str() {
        "laplace" => Some(FmmKernel::Laplace),
        "stokeslet" => Some(FmmKernel::Stokeslet),
        _ => None,
    };
    match (fmm_kernel, &fits_fmm) {
        (None, _) => {
            excluded.push(json!({"method": "fmm", "why": format!("no kernel \"{}\" (laplace, stokeslet)", p.kernel)}))
        }
        (Some(_), Err(e)) => excluded.push(json!({"method": "fmm", "why": unread(e.to_string())})),
        (Some(k), Ok(_)) => {
            let (seconds, detail) = fmm_estimate(&shape, k, &xs, xt.as_deref(), pricing)?;
            estimates.push(Estimate { method: Method::Fmm, seconds, detail });
        }
    }
    // the treecode
    let tree_kernel = TreeKernel::from_name(&p.kernel, p.kappa, p.epsilon, p.wavenumber);
    match (tree_kernel, fits_treecode) {
        (Err(e), _) => excluded.push(json!({"method": "treecode", "why": e.to_string()})),
        (Ok(_), Err(e)) => excluded.push(json!({"method": "treecode", "why": unread(e.to_string())})),
        (Ok(k), Ok(())) => {
            let (seconds, detail) = treecode_estimate(&shape, k, &xs, xt.as_deref(), pricing)?;
            estimates.push(Estimate { method: Method::Treecode, seconds, detail });
        }
    }
    // the free-space Ewald sum
    let generated = cfg.sources.generate.is_some() || cfg.targets.as_ref().is_some_and(|t| t.generate.is_some());
    let ewald = match (generated, &fits_ewald) {
        (_, Err(e)) if Kernel::from_name(&p.kernel).is_ok() => Err(unread(e.to_string())),
        (true, _) => {
            Err("generated particles: the Ewald sum generates its own in the box (uniform, normal, ...), the \
                     tree methods theirs around the origin; give .npy files to compare all three"
                .to_string())
        }
        (false, _) => ewald_estimate(
            comm,
            p,
            &shape,
            &src.positions,
            tgt.as_ref().map(|t| &t.positions[..]),
            &xs,
            xt.as_deref(),
            (pricing, planner),
        ),
    };
    match ewald {
        Ok((seconds, detail)) => estimates.push(Estimate { method: Method::Ewald, seconds, detail }),
        Err(why) => excluded.push(json!({"method": "ewald", "why": why})),
    }
    let best = estimates.iter().min_by(|a, b| a.seconds.total_cmp(&b.seconds)).ok_or_else(|| {
        let why: Vec<String> = excluded
            .iter()
            .map(|e| format!("{}: {}", e["method"].as_str().unwrap_or("?"), e["why"].as_str().unwrap_or("?")))
            .collect();
        Error::Config {
            path: path.clone(),
            message: format!("method = \"auto\": no method runs it ({})", why.join("; ")),
        }
    })?;
    let others: Vec<String> = estimates
        .iter()
        .filter(|e| e.method != best.method)
        .map(|e| format!("{} {:.3} s", e.method.name(), e.seconds))
        .collect();
    let on = match pricing {
        Pricing::Cpu => format!("{threads} thread(s) x {ranks} rank(s)"),
        Pricing::Device => format!("{ranks} device(s), priced by the device's models"),
    };
    let reason = format!(
        "free space, {ns} sources, kernel {}, tolerance {tol:e}, {on}, {repeat} \
         evaluation(s): {} estimated {:.3} s{}",
        p.kernel,
        best.method.name(),
        best.seconds,
        if others.is_empty() { String::new() } else { format!(" against {}", others.join(", ")) }
    );
    let report = json!({
        "chosen": best.method.name(),
        "reason": reason,
        "estimates": estimates.iter().map(|e| json!({"method": e.method.name(), "seconds": e.seconds, "model": e.detail})).collect::<Vec<_>>(),
        "excluded": excluded,
        "pricing": pricing.name(),
        "backend_reason": compute,
        "sampled": {"sources": xs.len(), "targets": xt.as_ref().map_or(xs.len(), |t| t.len())},
    });
    Ok(AutoChoice { method: best.method, reason, report, report_path })
}

/// What a run is, for pricing: its sizes, tolerance, outputs, evaluations and cores.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Sources.
    pub ns: usize,
    /// Targets (the sources' count when they are the targets).
    pub nt: usize,
    /// Tolerance.
    pub tol: f64,
    /// The Laplace field too.
    pub field: bool,
    /// `precision = "f32"`.
    pub f32_run: bool,
    /// Evaluations on one plan.
    pub repeat: usize,
    /// Threads times ranks.
    pub cores: f64,
    /// Ranks (one device each on the CUDA backend).
    pub ranks: usize,
}

impl Shape {
    /// The host's seconds per evaluation of `method`'s trees on the CUDA backend, per rank.
    fn device_host(&self, method: Method, targets_apart: bool) -> f64 {
        let ns_per = DEVICE_HOST_NS_PER_POINT.iter().find(|e| e.0 == method).map_or(0.0, |e| e.1);
        let points = self.ns + if targets_apart { self.nt } else { 0 };
        1e-9 * ns_per * points as f64 / self.ranks as f64
    }
}

/// The FMM's estimate of the run (seconds, and its model's terms) from the sample `xs` (and
/// `xt`, targets apart) of the sources (targets): the leaf and the stages by the backend's
/// cost model ([`CostModel::estimate_from_sample`]).
///
/// # Errors
/// A tolerance the FMM's orders cannot meet.
pub fn fmm_estimate(
    shape: &Shape,
    kernel: FmmKernel,
    xs: &[[f64; 3]],
    xt: Option<&[[f64; 3]]>,
    pricing: Pricing,
) -> Result<(f64, Value)> {
    let (order, _) = for_tolerance_of(kernel, shape.tol, shape.field)?;
    let cube = match xt {
        Some(t) => RootCube::around(&[xs, t]),
        None => RootCube::around(&[xs]),
    };
    let precision = if shape.f32_run { parki_fmm::Precision::F32 } else { parki_fmm::Precision::F64 };
    let base = match pricing {
        Pricing::Cpu => CostModel::cpu(),
        Pricing::Device => CostModel::device(),
    };
    let model = base.for_kernel(kernel, shape.field).for_precision(precision);
    let (leaf, stages) = model.estimate_from_sample(&SortedPoints::new(xs, cube), shape.ns, order, 0.65);
    let one = stages.total();
    // separate targets: the P2P and L2P halves scale with them, P2M with the sources
    let one = if xt.is_some() { one * (shape.ns + shape.nt) as f64 / (2 * shape.ns.max(1)) as f64 } else { one };
    let stage_json = json!({"P2P": stages.p2p, "M2L": stages.m2l, "expansions": stages.expansions});
    Ok(match pricing {
        Pricing::Cpu => (
            shape.repeat as f64 * one / shape.cores,
            json!({"order": order, "max_leaf": leaf, "one_thread_seconds": one, "stages_one_thread": stage_json}),
        ),
        Pricing::Device => {
            let host = shape.device_host(Method::Fmm, xt.is_some());
            let device = one / shape.ranks as f64;
            (
                shape.repeat as f64 * (device + host),
                json!({"order": order, "max_leaf": leaf, "device_seconds": device, "host_seconds": host,
                       "stages_device": stage_json}),
            )
        }
    })
}

/// The treecode's estimate of the run (seconds, and its model's terms): its kernel
/// evaluations, counted by the traversal of the sample's trees with `n_p s/n` proxies (so that
/// it decides as on the whole set; pairs scaled by `(n/s)^2`, particle-proxy terms by `n/s`),
/// times the backend's time per evaluation of the kernel.
///
/// # Errors
/// A tolerance out of the treecode's range.
pub fn treecode_estimate(
    shape: &Shape,
    kernel: TreeKernel,
    xs: &[[f64; 3]],
    xt: Option<&[[f64; 3]]>,
    pricing: Pricing,
) -> Result<(f64, Value)> {
    let (params, _) = for_tolerance(shape.tol)?;
    let scale_s = shape.ns as f64 / xs.len().max(1) as f64;
    let leaf = ((params.max_leaf as f64 / scale_s).round() as usize).max(1);
    let st = Tree::build(xs, TreeParams { max_leaf: leaf });
    let tt = xt.map(|t| Tree::build(t, TreeParams { max_leaf: leaf }));
    let tref = tt.as_ref().unwrap_or(&st);
    let np = params.proxies();
    // the traversal compares counts with the proxies: the sample's counts against `np / scale`
    // make the whole set's decisions
    let np_sample = ((np as f64 / scale_s).round() as usize).max(1);
    // an oscillatory kernel's clusters small against its wavelength, as the run's traversal
    let max_radius = parki_treecode::traversal::oscillation_radius(kernel.wavenumber(), params.degree, params.theta);
    let lists = Interactions::build_capped(tref, &st, params.theta, max_radius, np_sample);
    let [pp, pc, cp, cc] = lists.evaluations(tref, &st, np).map(|e| e as f64);
    let scale_t = xt.map_or(scale_s, |t| shape.nt as f64 / t.len().max(1) as f64);
    let evaluations = pp * scale_s * scale_t + pc * scale_t + cp * scale_s + cc;
    let cpu_ns = |name: &str| TREE_NS_PER_EVALUATION.iter().find(|e| e.0 == name).map_or(4.0, |e| e.1);
    Ok(match pricing {
        Pricing::Cpu => {
            let ns_per = cpu_ns(kernel.name());
            let one = evaluations * ns_per * 1e-9;
            (
                shape.repeat as f64 * one / shape.cores,
                json!({"degree": params.degree, "theta": params.theta, "evaluations": evaluations,
                       "ns_per_evaluation": ns_per, "one_thread_seconds": one}),
            )
        }
        Pricing::Device => {
            let device_ns = |name: &str| TREE_DEVICE_NS_PER_EVALUATION.iter().find(|e| e.0 == name).map(|e| e.1);
            let laplace = device_ns("laplace").unwrap_or(0.0);
            let ns_per =
                device_ns(kernel.name()).unwrap_or_else(|| laplace * cpu_ns(kernel.name()) / cpu_ns("laplace"));
            let device = evaluations * ns_per * 1e-9 / shape.ranks as f64;
            let host = shape.device_host(Method::Treecode, xt.is_some());
            (
                shape.repeat as f64 * (device + host),
                json!({"degree": params.degree, "theta": params.theta, "evaluations": evaluations,
                       "ns_per_evaluation_device": ns_per, "device_seconds": device, "host_seconds": host}),
            )
        }
    })
}

/// The free-space Ewald sum's estimate of the run (its plan, the kernel tables of the free
/// axes, and its evaluations) and its parameters, or why it is not a candidate. The plan is
/// the backend's ([`Planner`]); on a device its stages are repriced at the device's constants
/// ([`parki_dist::CostModel::reprice`]) and its cell lists added
/// ([`DEVICE_EWALD_NS_PER_PARTICLE`]); the tables are made on the host's cores. Collective.
#[allow(clippy::too_many_arguments)]
fn ewald_estimate(
    comm: &Comm,
    p: &AutoProblem,
    shape: &Shape,
    sources: &[[f64; 3]],
    targets: Option<&[[f64; 3]]>,
    xs: &[[f64; 3]],
    xt: Option<&[[f64; 3]]>,
    (pricing, planner): (Pricing, Planner),
) -> std::result::Result<(f64, Value), String> {
    let kernel = Kernel::from_name(&p.kernel).map_err(|_| format!("no kernel \"{}\"", p.kernel))?;
    let lengths = match p.box_lengths.as_deref() {
        Some(&[a, b, c]) => [a, b, c],
        _ => return Err("no problem.box (the free-space Ewald sum needs the box holding the particles)".into()),
    };
    let [lo, hi] = match targets {
        Some(t) => bounds(&[sources, t]),
        None => bounds(&[sources]),
    };
    let outside = (0..3).any(|a| lo[a] < 0.0 || hi[a] > lengths[a]);
    if comm.max(u64::from(outside)) > 0 {
        return Err(format!("particles outside problem.box {lengths:?} (its corner is the origin)"));
    }
    let (ns, nt) = (shape.ns, shape.nt);
    Domain::new(lengths, [false; 3]).map_err(|e| e.to_string())?;
    // priced in the units the run would compute in
    let s = parki_core::units::box_unit(lengths);
    let domain = Domain::new(lengths.map(|l| l / s), [false; 3]).map_err(|e| e.to_string())?;
    let unit = |v: &[[f64; 3]]| -> Vec<[f64; 3]> { v.iter().map(|p| p.map(|x| x / s)).collect() };
    let (xs, xt) = (unit(xs), xt.map(unit));
    let mut opts = EwaldOptions::new(kernel, domain, shape.tol);
    opts.field = shape.field;
    // the sample's occupancy of the cells stands for the whole set's (as the run measures it)
    opts.occupancy = Some(Occupancy::measure(&domain, &xs, ns, xt.as_deref().unwrap_or(&xs), xt.is_none()));
    opts.evaluations = shape.repeat;
    let params = planner(comm, &opts, shape.f32_run, ns, nt).map_err(|e| e.to_string())?;
    let plan = params.plan_seconds;
    let plan_run = plan / shape.cores.powf(PLAN_SPEEDUP_EXPONENT);
    let (c, one, seconds) = match pricing {
        Pricing::Cpu => {
            let one = params.cost.total();
            (params.cost, one, plan_run + shape.repeat as f64 * one / shape.cores)
        }
        Pricing::Device => {
            // the plan was chosen (and its stages priced) with the CPU's built-in constants
            let real_bytes = if shape.f32_run { 4 } else { 8 };
            let from = parki_dist::CostModel::default();
            let c = parki_dist::CostModel::device().reprice(&from, &params.cost, kernel, nt, real_bytes);
            let one = (c.total() + 1e-9 * DEVICE_EWALD_NS_PER_PARTICLE * (ns + nt) as f64) / shape.ranks as f64;
            (c, one, plan_run + shape.repeat as f64 * one)
        }
    };
    let stages = json!({"P2P": c.p2p, "P2G": c.p2g, "FFT": c.fft, "CNV": c.cnv, "G2P": c.g2p});
    let mut detail = json!({"grid": params.grid, "cells": params.cells, "window": params.p,
                            "cell_occupancy": params.occupancy, "plan_one_thread_seconds": plan});
    match pricing {
        Pricing::Cpu => {
            detail["stages_one_thread"] = stages;
            detail["one_thread_seconds"] = json!(one);
        }
        Pricing::Device => {
            detail["stages_device"] = stages;
            detail["device_seconds"] = json!(one);
        }
    }
    Ok((seconds, detail))
}

/// Adds the choice to a run's summary (and to its report file, written again).
///
/// # Errors
/// The report file could not be written.
pub fn annotate(comm: &Comm, choice: &AutoChoice, mut summary: RunSummary) -> Result<RunSummary> {
    summary.report["auto"] = choice.report.clone();
    summary.report["method"] = json!(choice.method.name());
    summary.table = format!("method = \"auto\": {}\n{}", choice.reason, summary.table);
    if let Some(path) = &choice.report_path {
        report::write(comm, path, &summary.report)?;
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use parki_comm::Comm;
    use parki_core::{Domain, Kernel};
    use parki_dist::EwaldOptions;
    use parki_fmm::FmmKernel;
    use parki_gpu::Emulator;
    use parki_reference::generate::Cloud;
    use parki_treecode::TreeKernel;

    use super::{
        device_planner, fmm_estimate, treecode_estimate, Pricing, Shape, DEVICE_EWALD_NS_PER_PARTICLE, SAMPLE,
    };

    fn shape(n: usize, tol: f64, field: bool) -> Shape {
        Shape { ns: n, nt: n, tol, field, f32_run: false, repeat: 1, cores: 16.0, ranks: 1 }
    }

    /// The device's models against what the methods took on an NVIDIA H200 (session 33,
    /// docs/fmm.md §5.1, docs/treecode.md §6, docs/performance.md §8.8; uniform points, f64,
    /// one rank): every estimate within 0.5-2x of the measured seconds, printed as a table.
    #[test]
    fn device_prices_follow_the_h200_measurements() {
        let comm = Comm::single();
        let sample = Cloud::Uniform.points(11, 0..SAMPLE);
        let mut rows = Vec::new();
        // the FMM (fmm_cases: the app on the device, best of two evaluations)
        for (kernel, field, tol, n, measured) in [
            (FmmKernel::Laplace, true, 1e-6, 1_000_000, 0.146),
            (FmmKernel::Stokeslet, false, 1e-6, 1_000_000, 0.459),
            (FmmKernel::Laplace, true, 1e-6, 10_000_000, 1.55),
            (FmmKernel::Laplace, true, 1e-9, 10_000_000, 2.80),
        ] {
            let (s, d) = fmm_estimate(&shape(n, tol, field), kernel, &sample, None, Pricing::Device).unwrap();
            rows.push((format!("fmm {kernel:?} field {field} {tol:e} {n}: {d}"), s, measured));
        }
        // the treecode (tree_cases, tolerance 1e-6)
        for (n, measured) in [(100_000, 0.068), (1_000_000, 1.26), (10_000_000, 7.18)] {
            let (s, d) =
                treecode_estimate(&shape(n, 1e-6, false), TreeKernel::Stokeslet, &sample, None, Pricing::Device)
                    .unwrap();
            rows.push((format!("treecode stokeslet 1e-6 {n}: {d}"), s, measured));
        }
        // the Ewald sum (parki-gpu-bench: 3P; the 2-rank check's one-rank run: 0P)
        Emulator::set_memory(141_000_000_000);
        for (kernel, periodic, field, tol, n, measured) in [
            (Kernel::Laplace, true, false, 1e-6, 1_000_000, 0.0180),
            (Kernel::Laplace, true, false, 1e-9, 1_000_000, 0.0288),
            (Kernel::Stokeslet, true, false, 1e-6, 1_000_000, 0.0295),
            (Kernel::Stokeslet, true, false, 1e-9, 1_000_000, 0.0467),
            (Kernel::Stresslet, true, false, 1e-6, 1_000_000, 0.0388),
            (Kernel::Stresslet, true, false, 1e-9, 1_000_000, 0.0683),
            (Kernel::Stokes, true, false, 1e-6, 1_000_000, 0.0441),
            (Kernel::Stokes, true, false, 1e-9, 1_000_000, 0.0795),
            (Kernel::Laplace, true, false, 1e-6, 4_000_000, 0.077),
            (Kernel::Stokeslet, true, false, 1e-6, 4_000_000, 0.115),
            (Kernel::Stokeslet, true, false, 1e-9, 4_000_000, 0.183),
            (Kernel::Stokes, true, false, 1e-6, 4_000_000, 0.195),
            (Kernel::Stokes, true, false, 1e-9, 4_000_000, 0.335),
            (Kernel::Stokeslet, true, false, 1e-9, 16_000_000, 0.761),
            (Kernel::Stokes, true, false, 1e-9, 16_000_000, 1.60),
            // its stages only (P2P, P2G, FFT, CNV, IFFT, G2P): the one evaluation of that
            // process paid the cell lists' first allocations (13.1 ms of its 25.5)
            (Kernel::Laplace, false, true, 1e-8, 200_000, 0.0124),
        ] {
            let domain = Domain::new([1.0; 3], [periodic; 3]).unwrap();
            // the plans of session 33: its grids were bounded by the H200 node's host share
            // (64 GiB, which bound only the combined kernel at 1.6e7: 840^3; the device's
            // budget alone plans 896^3 for it now)
            let opts = EwaldOptions::new(kernel, domain, tol).field(field).max_grid_bytes(Some(64 << 30));
            let params = device_planner::<Emulator>(&comm, &opts, false, n, n).unwrap();
            let c =
                parki_dist::CostModel::device().reprice(&parki_dist::CostModel::default(), &params.cost, kernel, n, 8);
            let cells = if periodic { 1e-9 * DEVICE_EWALD_NS_PER_PARTICLE * (2 * n) as f64 } else { 0.0 };
            let s = c.total() + cells;
            rows.push((
                format!("ewald {kernel:?} periodic {periodic} {tol:e} {n}: grid {:?}, {c:?}", params.grid),
                s,
                measured,
            ));
        }
        let mut bad = Vec::new();
        for (case, estimate, measured) in &rows {
            let r = estimate / measured;
            println!("{r:6.2}  {estimate:8.4} s against {measured:8.4} s  {case}");
            if !(0.5..=2.0).contains(&r) {
                bad.push(case.clone());
            }
        }
        assert!(bad.is_empty(), "estimates outside 0.5-2x the measurements: {bad:#?}");
    }
}

/// `choose_with` on the device (the emulator's planner standing for the CUDA backend's): the
/// report says how it priced, every candidate has the device's and the host's parts, each
/// costs far less than on the CPU, and the choice follows the evaluations: a single one buys
/// no free-space Ewald plan (its tables are made on the host), a hundred on one plan do.
#[cfg(test)]
mod device_choice {
    use std::path::PathBuf;

    use parki_comm::Comm;
    use parki_gpu::Emulator;
    use parki_reference::generate::Cloud;

    use super::{choose_with, cpu_planner, device_planner, Method, Pricing};
    use crate::app::RunArgs;

    fn run_toml(dir: &std::path::Path, repeat: usize) -> PathBuf {
        let n = 100_000;
        // uniform in [-1, 1]^3, moved into the box [0, 2]^3
        let x: Vec<f64> = Cloud::Uniform.points(5, 0..n).iter().flat_map(|p| p.map(|c| c + 1.0)).collect();
        let q: Vec<f64> = (0..n).map(|i| if i % 2 == 0 { 1.0 } else { -1.0 }).collect();
        crate::npy::write(&dir.join("x.npy"), &[n, 3], &x).unwrap();
        crate::npy::write(&dir.join("q.npy"), &[n], &q).unwrap();
        let path = dir.join(format!("auto-{repeat}.toml"));
        let text = format!(
            "[problem]\nmethod = \"auto\"\nkernel = \"laplace\"\ntolerance = 1e-6\nbox = [2.0, 2.0, 2.0]\n\
             periodic = [false, false, false]\n\n[sources]\npositions = \"x.npy\"\ncharges = \"q.npy\"\n\n\
             [run]\nrepeat = {repeat}\n"
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn the_device_prices_every_method_and_the_evaluations_decide() {
        let dir = std::env::temp_dir().join(format!("parki-auto-device-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let comm = Comm::single();
        Emulator::set_memory(80_000_000_000);
        let args = |config: PathBuf| RunArgs {
            config,
            check: None,
            threads: Some(2),
            repeat: None,
            quiet: true,
            json: false,
            command_line: Vec::new(),
        };
        let mut chosen = Vec::new();
        for repeat in [1, 100] {
            let a = args(run_toml(&dir, repeat));
            let dev = choose_with(&a, &comm, Some((Pricing::Device, device_planner::<Emulator>))).unwrap();
            let cpu = choose_with(&a, &comm, Some((Pricing::Cpu, cpu_planner))).unwrap();
            assert_eq!(dev.report["pricing"], "device");
            assert_eq!(cpu.report["pricing"], "cpu");
            assert!(dev.reason.contains("device"), "{}", dev.reason);
            let est = |r: &serde_json::Value, m: &str| {
                r["estimates"].as_array().unwrap().iter().find(|e| e["method"] == m).unwrap().clone()
            };
            for m in ["fmm", "treecode", "ewald"] {
                let (d, c) = (est(&dev.report, m), est(&cpu.report, m));
                assert!(d["model"]["device_seconds"].as_f64().unwrap() > 0.0, "{m}: {d}");
                assert!(d["seconds"].as_f64().unwrap() < c["seconds"].as_f64().unwrap(), "{m}: {d} against {c}");
            }
            for m in ["fmm", "treecode"] {
                assert!(est(&dev.report, m)["model"]["host_seconds"].as_f64().unwrap() > 0.0);
            }
            chosen.push(dev.method);
        }
        assert_eq!(chosen, [Method::Fmm, Method::Ewald], "one evaluation, then a hundred on one plan");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
