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
//! [treecode]                 # optional; each key overrides the tolerance's choice
//! degree = 8
//! theta = 0.7
//! max_leaf = 2000
//! max_batch = 2000
//! ```
//!
//! Runs on one rank; the distributed treecode (RCB partitions and the locally essential tree)
//! is refused on several ranks with a message until it exists.

use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use parki_comm::{Comm, StageStats};
use parki_core::isa::Isa;
use parki_core::{Error, Par, Result, StageKind};
use parki_reference::generate::{particle_rng, unit_vector, Cloud};
use parki_treecode::direct::{direct_sum, relative_l2};
use parki_treecode::{evaluate_kernel, for_tolerance, TreeKernel, TreecodeParams};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::app::{plural, warn, Log, RunArgs, RunSummary};
use crate::config::{repeat_error, resolve, ParticleSection};
use crate::npy;
use crate::outputs::{self, OutputPaths, Staged};
use crate::report::{self, min_avg_max, Provenance};

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
}

/// Whether a run.toml's `[problem]` names `method = "treecode"` (read before the rest, as
/// [`crate::config::equation`]).
pub fn is_treecode(text: &str, path: &Path) -> Result<bool> {
    let table: toml::Table =
        toml::from_str(text).map_err(|e| Error::Config { path: path.into(), message: e.to_string() })?;
    let method = table.get("problem").and_then(|p| p.get("method")).and_then(|m| m.as_str());
    Ok(method == Some("treecode"))
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

/// One particle set: positions and the kernel's inputs (row-major, `input_width` each).
fn particles(
    sec: &ParticleSection,
    field: &str,
    config: &Path,
    kernel: Option<TreeKernel>,
) -> Result<(Vec<[f64; 3]>, Vec<f64>)> {
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
        let pos = cloud.points(seed, 0..g.count);
        let inputs = match kernel {
            None => Vec::new(),
            Some(k) => (0..g.count)
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
        return Ok((pos, inputs));
    }
    let need = |f: &Option<PathBuf>, name: &str, why: &str| -> Result<PathBuf> {
        f.as_ref()
            .map(|p| resolve(config, p))
            .ok_or_else(|| Error::Missing { field: format!("{field}.{name}"), reason: why.into() })
    };
    let pos_path = need(&sec.positions, "positions", "give positions or generate")?;
    let pos = npy::read(&pos_path, &format!("{field}.positions"))?.rows3(&format!("{field}.positions"))?;
    let Some(k) = kernel else { return Ok((pos, Vec::new())) };
    let n = pos.len();
    let column = |f: &Option<PathBuf>, name: &str| -> Result<Vec<f64>> {
        let path = need(f, name, &format!("kernel \"{}\" needs it", k.name()))?;
        let v = npy::read(&path, &format!("{field}.{name}"))?.column(&format!("{field}.{name}"))?;
        check_rows(&v, 1, n, field, name)?;
        Ok(v)
    };
    let rows = |f: &Option<PathBuf>, name: &str| -> Result<Vec<f64>> {
        let path = need(f, name, &format!("kernel \"{}\" needs it", k.name()))?;
        let v: Vec<f64> = npy::read(&path, &format!("{field}.{name}"))?.rows3(&format!("{field}.{name}"))?.concat();
        check_rows(&v, 3, n, field, name)?;
        Ok(v)
    };
    let parts: Vec<Vec<f64>> = match k {
        TreeKernel::Stokeslet => vec![rows(&sec.forces, "forces")?],
        TreeKernel::Stresslet => vec![rows(&sec.dipoles, "dipoles")?, rows(&sec.normals, "normals")?],
        TreeKernel::Stokes => {
            vec![rows(&sec.forces, "forces")?, rows(&sec.dipoles, "dipoles")?, rows(&sec.normals, "normals")?]
        }
        _ => vec![column(&sec.charges, "charges")?],
    };
    let widths: Vec<usize> = parts.iter().map(|p| p.len() / n.max(1)).collect();
    let mut inputs = Vec::with_capacity(n * k.input_width());
    for i in 0..n {
        for (p, &w) in parts.iter().zip(&widths) {
            inputs.extend_from_slice(&p[i * w..(i + 1) * w]);
        }
    }
    Ok((pos, inputs))
}

fn check_rows(v: &[f64], w: usize, n: usize, field: &str, name: &str) -> Result<()> {
    if v.len() != n * w {
        return Err(Error::LengthMismatch {
            field: format!("{field}.{name}"),
            found: v.len() / w,
            reference: format!("{field}.positions"),
            expected: n,
        });
    }
    Ok(())
}

/// Runs a treecode run.toml (collective; one rank for now).
pub fn run(args: &RunArgs, comm: &Comm) -> Result<RunSummary> {
    let started = SystemTime::now();
    let t0 = Instant::now();
    let log = Log { on: !args.quiet && comm.rank() == 0 };
    if comm.size() > 1 {
        return Err(Error::Unsupported {
            what: format!(
                "the treecode on {} ranks: its distributed form (RCB partitions and the locally essential tree, \
                 issue 12) is not built yet; run it on one rank (its threads use every core)",
                comm.size()
            ),
        });
    }
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
    let threads = args.threads.or(cfg.run.threads).unwrap_or_else(rayon::current_num_threads).max(1);
    let inputs = outputs::particle_inputs(&args.config, &cfg.sources, cfg.targets.as_ref());
    let paths = OutputPaths {
        potential: cfg.output.potential.as_ref().map(|p| resolve(&args.config, p)),
        field: None,
        report: cfg.output.report.as_ref().map(|p| resolve(&args.config, p)),
        data_field: "output.potential",
    };
    let paths = outputs::check_paths(&args.config, &inputs, paths)?;
    if paths.is_empty() && !args.json {
        warn(comm, "run.toml has no [output] potential or report (and no --json): only the timing table is printed");
    }
    let staged = Staged::begin(comm, &paths)?;
    log.line(&format!("reading {}", args.config.display()));
    let (sources, q) = particles(&cfg.sources, "sources", &args.config, Some(kernel))?;
    let targets = match &cfg.targets {
        Some(t) => particles(t, "targets", &args.config, None)?.0,
        None => sources.clone(),
    };
    log.line(&format!(
        "treecode: {} sources, {} targets, kernel {}, degree {}, theta {}, leaves of {} sources and {} targets, {} \
         thread{}, {}",
        sources.len(),
        targets.len(),
        kernel.name(),
        params.degree,
        params.theta,
        params.max_leaf,
        params.max_batch,
        threads,
        plural(threads),
        isa.name()
    ));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Error::Resource { message: format!("a pool of {threads} threads: {e}") })?;
    let par = Par::with_threads(threads);
    let repeat = args.repeat.or(cfg.run.repeat).unwrap_or(1);
    let mut result = None;
    for r in 0..repeat {
        let t = Instant::now();
        let out = pool.install(|| evaluate_kernel(kernel, &params, &sources, &q, &targets, par, isa))?;
        log.line(&format!("evaluation {} of {repeat}: {:.4} s", r + 1, t.elapsed().as_secs_f64()));
        result = Some(out);
    }
    let (u, stats) = result.expect("at least one evaluation");
    let nv = kernel.value_width();
    let check = args.check.or(cfg.run.check);
    let error = check.filter(|&k| k > 0).map(|k| {
        let step = (targets.len() / k).max(1);
        let sample: Vec<usize> = (0..targets.len()).step_by(step).take(k).collect();
        let reference = pool.install(|| direct_sum(kernel, &sources, &q, &targets, &sample));
        let l2 = relative_l2(&u, nv, &sample, &reference);
        let (mut max_err, mut max_ref) = (0.0f64, 0.0f64);
        for (s, &i) in sample.iter().enumerate() {
            for v in 0..nv {
                max_err = max_err.max((u[i * nv + v] - reference[s * nv + v]).abs());
                max_ref = max_ref.max(reference[s * nv + v].abs());
            }
        }
        log.line(&format!(
            "check on {} targets against the direct sum: relative l2 {l2:.3e}, relative max {:.3e}",
            sample.len(),
            max_err / max_ref
        ));
        json!({"targets": sample.len(), "relative_l2": l2, "relative_max": max_err / max_ref, "tolerance": p.tolerance})
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
    if let Some(path) = staged.potential() {
        let shape: Vec<usize> = if nv == 1 { vec![targets.len()] } else { vec![targets.len(), nv] };
        npy::write(path, &shape, &u)?;
    }
    let table_stats = StageStats::reduce(comm, &stats.times);
    let timings: serde_json::Map<String, Value> =
        table_stats.rows.iter().map(|&(s, lo, avg, hi)| (s.name().to_string(), min_avg_max((lo, avg, hi)))).collect();
    let total = stats.times.total();
    let provenance = Provenance::new(&args.config, &args.command_line, started, comm.size());
    let names = ["pp", "pc", "cp", "cc"];
    let report_json = json!({
        "provenance": provenance.to_json(),
        "method": "treecode",
        "kernel": kernel.name(),
        "kernel_parameters": {"kappa": p.kappa, "epsilon": p.epsilon, "wavenumber": p.wavenumber},
        "sources": sources.len(),
        "targets": targets.len(),
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
        "threads": threads,
        "clusters": {"sources": stats.clusters[0], "targets": stats.clusters[1]},
        "interactions": names.iter().zip(stats.interactions).map(|(n, c)| (n.to_string(), json!(c))).collect::<serde_json::Map<_, _>>(),
        "kernel_evaluations": names.iter().zip(stats.evaluations).map(|(n, c)| (n.to_string(), json!(c))).collect::<serde_json::Map<_, _>>(),
        "evaluations": repeat,
        "timings_seconds": timings,
        "evaluation_seconds": total,
        "targets_per_second": targets.len() as f64 / total.max(f64::MIN_POSITIVE),
        "error": error,
    });
    if let Some(path) = staged.report() {
        report::write(comm, path, &report_json)?;
    }
    let mut table = table_stats.table();
    table += &format!(
        "lists: PP {} PC {} CP {} CC {}; kernel evaluations {:.3e} ({:.3e} direct); {:.4e} targets/s\n",
        stats.interactions[0],
        stats.interactions[1],
        stats.interactions[2],
        stats.interactions[3],
        stats.evaluations.iter().sum::<u64>() as f64,
        sources.len() as f64 * targets.len() as f64,
        targets.len() as f64 / total.max(f64::MIN_POSITIVE)
    );
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
