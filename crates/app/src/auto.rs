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
use parki_dist::{DistEwaldSolver, EwaldOptions, Occupancy, ParallelOptions};
use parki_fmm::cost::CostModel;
use parki_fmm::octree::{bounds, RootCube, SortedPoints};
use parki_fmm::{for_tolerance_of, FmmKernel};
use parki_treecode::{for_tolerance, Interactions, Tree, TreeKernel, TreeParams};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::app::{RunArgs, RunSummary};
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
            let (order, _) = for_tolerance_of(k, tol, field)?;
            let cube = match &xt {
                Some(t) => RootCube::around(&[&xs, t]),
                None => RootCube::around(&[&xs]),
            };
            let precision = if f32_run { parki_fmm::Precision::F32 } else { parki_fmm::Precision::F64 };
            let model = CostModel::cpu().for_kernel(k, field).for_precision(precision);
            let (leaf, stages) = model.estimate_from_sample(&SortedPoints::new(&xs, cube), ns, order, 0.65);
            let one = stages.total();
            // separate targets: the P2P and L2P halves scale with them, P2M with the sources
            let one = if xt.is_some() { one * (ns + nt) as f64 / (2 * ns.max(1)) as f64 } else { one };
            estimates.push(Estimate {
                method: Method::Fmm,
                seconds: repeat as f64 * one / cores,
                detail: json!({"order": order, "max_leaf": leaf, "one_thread_seconds": one,
                               "stages_one_thread": {"P2P": stages.p2p, "M2L": stages.m2l, "expansions": stages.expansions}}),
            });
        }
    }
    // the treecode
    let tree_kernel = TreeKernel::from_name(&p.kernel, p.kappa, p.epsilon, p.wavenumber);
    match (tree_kernel, fits_treecode) {
        (Err(e), _) => excluded.push(json!({"method": "treecode", "why": e.to_string()})),
        (Ok(_), Err(e)) => excluded.push(json!({"method": "treecode", "why": unread(e.to_string())})),
        (Ok(k), Ok(())) => {
            let (params, _) = for_tolerance(tol)?;
            let scale_s = ns as f64 / xs.len().max(1) as f64;
            let leaf = ((params.max_leaf as f64 / scale_s).round() as usize).max(1);
            let st = Tree::build(&xs, TreeParams { max_leaf: leaf });
            let tt = xt.as_ref().map(|t| Tree::build(t, TreeParams { max_leaf: leaf }));
            let tref = tt.as_ref().unwrap_or(&st);
            let np = params.proxies();
            // the traversal compares counts with the proxies: the sample's counts against
            // `np / scale` make the whole set's decisions
            let np_sample = ((np as f64 / scale_s).round() as usize).max(1);
            let lists = Interactions::build(tref, &st, params.theta, np_sample);
            let [pp, pc, cp, cc] = lists.evaluations(tref, &st, np).map(|e| e as f64);
            let scale_t = xt.as_ref().map_or(scale_s, |t| nt as f64 / t.len().max(1) as f64);
            let evaluations = pp * scale_s * scale_t + pc * scale_t + cp * scale_s + cc;
            let ns_per = TREE_NS_PER_EVALUATION.iter().find(|e| e.0 == k.name()).map_or(4.0, |e| e.1);
            let one = evaluations * ns_per * 1e-9;
            estimates.push(Estimate {
                method: Method::Treecode,
                seconds: repeat as f64 * one / cores,
                detail: json!({"degree": params.degree, "theta": params.theta, "evaluations": evaluations,
                               "ns_per_evaluation": ns_per, "one_thread_seconds": one}),
            });
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
            tol,
            field,
            &src.positions,
            tgt.as_ref().map(|t| &t.positions[..]),
            &xs,
            xt.as_deref(),
            ns,
            nt,
            repeat,
        ),
    };
    match ewald {
        Ok((one, plan, detail)) => {
            let seconds = plan / cores.powf(PLAN_SPEEDUP_EXPONENT) + repeat as f64 * one / cores;
            estimates.push(Estimate { method: Method::Ewald, seconds, detail })
        }
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
    let reason = format!(
        "free space, {ns} sources, kernel {}, tolerance {tol:e}, {threads} thread(s) x {ranks} rank(s), {repeat} \
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
        "sampled": {"sources": xs.len(), "targets": xt.as_ref().map_or(xs.len(), |t| t.len())},
    });
    Ok(AutoChoice { method: best.method, reason, report, report_path })
}

/// The free-space Ewald sum's one-thread estimates of one evaluation and of its plan (the
/// kernel tables of the free axes), and its parameters, or why it is not a candidate.
/// Collective.
#[allow(clippy::too_many_arguments)]
fn ewald_estimate(
    comm: &Comm,
    p: &AutoProblem,
    tol: f64,
    field: bool,
    sources: &[[f64; 3]],
    targets: Option<&[[f64; 3]]>,
    xs: &[[f64; 3]],
    xt: Option<&[[f64; 3]]>,
    ns: usize,
    nt: usize,
    repeat: usize,
) -> std::result::Result<(f64, f64, Value), String> {
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
    let domain = Domain::new(lengths, [false; 3]).map_err(|e| e.to_string())?;
    let mut opts = EwaldOptions::new(kernel, domain, tol);
    opts.field = field;
    // the sample's occupancy of the cells stands for the whole set's (as the run measures it)
    opts.occupancy = Some(Occupancy::measure(&domain, xs, ns, xt.unwrap_or(xs), xt.is_none()));
    opts.evaluations = repeat;
    let params = match p.precision.as_deref() {
        Some("f32") => DistEwaldSolver::<f32>::parameters(comm, &opts, ParallelOptions::default(), ns, nt),
        _ => DistEwaldSolver::<f64>::parameters(comm, &opts, ParallelOptions::default(), ns, nt),
    }
    .map_err(|e| e.to_string())?;
    let c = params.cost;
    let one = c.total();
    let plan = params.plan_seconds;
    Ok((
        one,
        plan,
        json!({"grid": params.grid, "cells": params.cells, "window": params.p, "cell_occupancy": params.occupancy,
               "stages_one_thread": {"P2P": c.p2p, "P2G": c.p2g, "FFT": c.fft, "CNV": c.cnv, "G2P": c.g2p},
               "one_thread_seconds": one, "plan_one_thread_seconds": plan}),
    ))
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
