//! The `parki-dist run` application: read run.toml, load or generate particles, plan, evaluate,
//! check, write the potential and the report, print progress and the timing table.

use std::path::{Path, PathBuf};
use std::time::Instant;

use parki_comm::{Comm, StageStats};
use parki_core::validate::{narrow_positions, wrap_positions};
use parki_core::{Domain, Error, Kernel, Real, Result, Sources, Stage};
use parki_farfield::{G2pVariant, P2gVariant};
use parki_fft3d::PlanRigor;
use parki_nearfield::Isa;
use parki_reference::ClassicalEwald;
use serde_json::{json, Value};

use crate::config::{resolve, Generate, ParticleSection, RunConfig};
use crate::generate::{self, Distribution, Rng};
use crate::npy;
use crate::solver::{Evaluation, EwaldOptions, EwaldSolver, SolverReal, Targets};

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
}

/// What a run produced (the JSON report and the table).
#[derive(Clone, Debug)]
pub struct RunSummary {
    /// The report.
    pub report: Value,
    /// The timing table.
    pub table: String,
}

/// A problem in f64, as read or generated.
#[derive(Clone, Debug)]
pub struct Problem {
    /// Kernel.
    pub kernel: Kernel,
    /// Box.
    pub domain: Domain,
    /// Tolerance.
    pub tolerance: f64,
    /// `"f64"` or `"f32"`.
    pub precision: String,
    /// Wrap periodic coordinates.
    pub wrap: bool,
    /// Source positions.
    pub positions: Vec<[f64; 3]>,
    /// Charges.
    pub charges: Option<Vec<f64>>,
    /// Forces.
    pub forces: Option<Vec<[f64; 3]>>,
    /// Dipoles.
    pub dipoles: Option<Vec<[f64; 3]>>,
    /// Normals.
    pub normals: Option<Vec<[f64; 3]>>,
    /// Separate targets.
    pub targets: Option<Vec<[f64; 3]>>,
}

fn log(quiet: bool, msg: &str) {
    if !quiet {
        eprintln!("[parki-dist] {msg}");
    }
}

fn generate_positions(domain: &Domain, g: &Generate, field: &str) -> Result<Vec<[f64; 3]>> {
    let dist = Distribution::from_name(&g.distribution, &format!("{field}.generate.distribution"))?;
    if g.count == 0 {
        return Err(Error::OutOfRange {
            field: format!("{field}.generate.count"),
            value: "0".into(),
            allowed: "at least 1".into(),
        });
    }
    Ok(generate::positions(domain, dist, g.count, &mut Rng::new(g.seed)))
}

fn read_rows(base: &Path, p: &Path, field: &str) -> Result<Vec<[f64; 3]>> {
    npy::read(&resolve(base, p), field)?.rows3(field)
}

/// Reads or generates the problem of a run.toml.
pub fn load_problem(cfg: &RunConfig, path: &Path) -> Result<Problem> {
    let kernel = Kernel::from_name(&cfg.problem.kernel)?;
    let domain = Domain::new(cfg.problem.box_lengths, cfg.problem.periodic)?;
    if !matches!(cfg.problem.precision.as_str(), "f64" | "f32") {
        return Err(Error::OutOfRange {
            field: "problem.precision".into(),
            value: format!("\"{}\"", cfg.problem.precision),
            allowed: "\"f64\" or \"f32\"".into(),
        });
    }
    let s: &ParticleSection = &cfg.sources;
    let mut prob = Problem {
        kernel,
        domain,
        tolerance: cfg.problem.tolerance,
        precision: cfg.problem.precision.clone(),
        wrap: cfg.problem.wrap,
        positions: Vec::new(),
        charges: None,
        forces: None,
        dipoles: None,
        normals: None,
        targets: None,
    };
    match (&s.generate, &s.positions) {
        (Some(_), Some(_)) => {
            return Err(Error::OutOfRange {
                field: "sources.generate".into(),
                value: "set together with sources.positions".into(),
                allowed: "either files or a generator, not both".into(),
            })
        }
        (None, None) => {
            return Err(Error::Missing {
                field: "sources.positions".into(),
                reason: "give a .npy file or sources.generate = { distribution, count, seed }".into(),
            })
        }
        (Some(g), None) => {
            prob.positions = generate_positions(&domain, g, "sources")?;
            let n = g.count;
            let mut rng = Rng::new(g.seed.wrapping_add(0x5eed));
            if kernel.needs_charges() {
                prob.charges = Some(generate::neutral_scalars(n, &mut rng));
            }
            if kernel.needs_forces() {
                prob.forces = Some(generate::neutral_vectors(n, &mut rng));
            }
            if kernel.needs_dipoles() {
                prob.dipoles = Some(generate::normal_vectors(n, &mut rng));
                prob.normals = Some((0..n).map(|_| generate::unit_vector(&mut rng)).collect());
            }
        }
        (None, Some(p)) => {
            prob.positions = read_rows(path, p, "sources.positions")?;
            if let Some(c) = &s.charges {
                prob.charges = Some(npy::read(&resolve(path, c), "sources.charges")?.column("sources.charges")?);
            }
            if let Some(f) = &s.forces {
                prob.forces = Some(read_rows(path, f, "sources.forces")?);
            }
            if let Some(d) = &s.dipoles {
                prob.dipoles = Some(read_rows(path, d, "sources.dipoles")?);
            }
            if let Some(nn) = &s.normals {
                prob.normals = Some(read_rows(path, nn, "sources.normals")?);
            }
        }
    }
    if let Some(t) = &cfg.targets {
        if t.charges.is_some() || t.forces.is_some() || t.dipoles.is_some() || t.normals.is_some() {
            return Err(Error::OutOfRange {
                field: "targets".into(),
                value: "densities given".into(),
                allowed: "only positions or generate".into(),
            });
        }
        prob.targets = Some(match (&t.generate, &t.positions) {
            (Some(g), None) => generate_positions(&domain, g, "targets")?,
            (None, Some(p)) => read_rows(path, p, "targets.positions")?,
            _ => {
                return Err(Error::Missing {
                    field: "targets.positions".into(),
                    reason: "[targets] needs exactly one of positions or generate".into(),
                })
            }
        });
    }
    Ok(prob)
}

fn convert3<T: Real>(v: &[[f64; 3]]) -> Vec<[T; 3]> {
    v.iter().map(|p| p.map(T::from_f64)).collect()
}

/// Runs a run.toml.
pub fn run(args: &RunArgs) -> Result<RunSummary> {
    let t0 = Instant::now();
    let cfg = RunConfig::load(&args.config)?;
    log(args.quiet, &format!("reading {}", args.config.display()));
    let prob = load_problem(&cfg, &args.config)?;
    log(
        args.quiet,
        &format!(
            "{} sources, {} targets, kernel {}, {}, tolerance {:e}",
            prob.positions.len(),
            prob.targets.as_ref().map_or(prob.positions.len(), |t| t.len()),
            prob.kernel.name(),
            prob.precision,
            prob.tolerance
        ),
    );
    let summary = match prob.precision.as_str() {
        "f32" => run_typed::<f32>(&cfg, &prob, args),
        _ => run_typed::<f64>(&cfg, &prob, args),
    }?;
    log(args.quiet, &format!("done in {:.2} s", t0.elapsed().as_secs_f64()));
    Ok(summary)
}

/// The solver options a run.toml asks for.
pub fn options(cfg: &RunConfig, prob: &Problem, args: &RunArgs) -> Result<EwaldOptions> {
    let mut o = EwaldOptions::new(prob.kernel, prob.domain, prob.tolerance);
    let e = &cfg.ewald;
    o.rc = e.rc;
    o.cell_size = e.cell_size;
    o.window_support = e.window_support;
    o.oversampling = e.oversampling;
    o.p2g = match e.p2g.as_deref() {
        None | Some("blocked") => P2gVariant::Blocked,
        Some("scatter") => P2gVariant::Scatter,
        Some(v) => {
            return Err(Error::OutOfRange {
                field: "ewald.p2g".into(),
                value: format!("\"{v}\""),
                allowed: "\"blocked\" or \"scatter\"".into(),
            })
        }
    };
    o.g2p = match e.g2p.as_deref() {
        None | Some("sorted") => G2pVariant::TargetSorted,
        Some("base") => G2pVariant::Base,
        Some(v) => {
            return Err(Error::OutOfRange {
                field: "ewald.g2p".into(),
                value: format!("\"{v}\""),
                allowed: "\"sorted\" or \"base\"".into(),
            })
        }
    };
    o.fft_rigor = match e.fft_plan.as_deref() {
        None | Some("estimate") => PlanRigor::Estimate,
        Some("measure") => PlanRigor::Measure,
        Some(v) => {
            return Err(Error::OutOfRange {
                field: "ewald.fft_plan".into(),
                value: format!("\"{v}\""),
                allowed: "\"estimate\" or \"measure\"".into(),
            })
        }
    };
    o.isa = match e.isa.as_deref() {
        None => None,
        Some(v) => Some(Isa::from_name(v).ok_or_else(|| Error::OutOfRange {
            field: "ewald.isa".into(),
            value: format!("\"{v}\""),
            allowed: "\"avx512\", \"avx2\" or \"scalar\"".into(),
        })?),
    };
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

fn run_typed<T: SolverReal>(cfg: &RunConfig, prob: &Problem, args: &RunArgs) -> Result<RunSummary> {
    let quiet = args.quiet;
    let domain = prob.domain;
    let mut pos: Vec<[T; 3]> = narrow_positions(&prob.positions, &domain);
    let mut trg: Option<Vec<[T; 3]>> = prob.targets.as_ref().map(|t| narrow_positions(t, &domain));
    if prob.wrap {
        wrap_positions("sources.positions", &mut pos, &domain)?;
        if let Some(t) = trg.as_mut() {
            wrap_positions("targets.positions", t, &domain)?;
        }
    }
    let charges: Option<Vec<T>> = prob.charges.as_ref().map(|q| q.iter().map(|&v| T::from_f64(v)).collect());
    let forces = prob.forces.as_ref().map(|f| convert3::<T>(f));
    let dipoles = prob.dipoles.as_ref().map(|f| convert3::<T>(f));
    let normals = prob.normals.as_ref().map(|f| convert3::<T>(f));
    let sources = Sources {
        positions: &pos,
        charges: charges.as_deref(),
        forces: forces.as_deref(),
        dipoles: dipoles.as_deref(),
        normals: normals.as_deref(),
    };
    let nt = trg.as_ref().map_or(pos.len(), |t| t.len());
    let opts = options(cfg, prob, args)?;
    let t_plan = Instant::now();
    let mut solver = EwaldSolver::<T>::new(&opts, pos.len(), nt)?;
    let plan_seconds = t_plan.elapsed().as_secs_f64();
    let p = solver.params().clone();
    log(
        quiet,
        &format!(
            "planned in {:.2} s: xi = {:.6}, rc = {:.6} ({}x{}x{} cells, {:.1} sources/cell), grid {}x{}x{}, P = {}, \
             estimated error {:.2e}, {} threads, P2P {}",
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
            solver.threads(),
            solver.isa().name()
        ),
    );
    let dim = prob.kernel.output_dim();
    let mut u = vec![T::ZERO; nt * dim];
    let repeat = args.repeat.or(cfg.run.repeat).unwrap_or(1).max(1);
    let mut ev = Evaluation::default();
    for r in 0..repeat {
        if repeat > 1 {
            log(quiet, &format!("evaluation {} of {repeat}", r + 1));
        }
        let targets = match &trg {
            Some(t) => Targets::Points(t),
            None => Targets::Sources,
        };
        ev = solver.evaluate_with_progress(&sources, targets, &mut u, &mut |s: Stage, dt: f64| {
            log(quiet, &format!("{:<8} {:>9.4} s", s.name(), dt));
        })?;
    }
    for w in &ev.warnings {
        eprintln!("[parki-dist] warning: {w}");
    }
    let stats = StageStats::reduce(&Comm::single(), &ev.times);
    let u64v: Vec<f64> = u.iter().map(|v| v.to_f64()).collect();
    // check against the classical Ewald sum
    let check_count = args.check.or(cfg.run.check).unwrap_or(0);
    let check = if check_count > 0 {
        let k = check_count.min(nt);
        log(quiet, &format!("checking {k} random targets against the classical Ewald sum"));
        let tc = Instant::now();
        let mut rng = Rng::new(0xc4ec);
        let mut idx: Vec<usize> = (0..nt).collect();
        for i in 0..k {
            let j = i + (rng.next_u64() % (nt - i) as u64) as usize;
            idx.swap(i, j);
        }
        idx.truncate(k);
        let p64: Vec<[f64; 3]> = pos.iter().map(|p| p.map(|v| v.to_f64())).collect();
        let tp: Vec<[f64; 3]> = match &trg {
            Some(t) => idx.iter().map(|&i| t[i].map(|v| v.to_f64())).collect(),
            None => idx.iter().map(|&i| p64[i]).collect(),
        };
        let to64 =
            |v: &Option<Vec<[T; 3]>>| v.as_ref().map(|f| f.iter().map(|p| p.map(|x| x.to_f64())).collect::<Vec<_>>());
        let (f64s, d64, n64) = (to64(&forces), to64(&dipoles), to64(&normals));
        let q64: Option<Vec<f64>> = charges.as_ref().map(|q| q.iter().map(|v| v.to_f64()).collect());
        let src64 = Sources {
            positions: &p64,
            charges: q64.as_deref(),
            forces: f64s.as_deref(),
            dipoles: d64.as_deref(),
            normals: n64.as_deref(),
        };
        let reference = ClassicalEwald::new(domain, p64.len(), k).evaluate(prob.kernel, &src64, &tp);
        let (mut num, mut den, mut maxe) = (0.0f64, 0.0f64, 0.0f64);
        for (a, &i) in idx.iter().enumerate() {
            for d in 0..dim {
                let e = u64v[i * dim + d] - reference[a * dim + d];
                num += e * e;
                den += reference[a * dim + d].powi(2);
                maxe = maxe.max(e.abs());
            }
        }
        let rel = (num / den).sqrt();
        let secs = tc.elapsed().as_secs_f64();
        log(
            quiet,
            &format!("relative RMS error {rel:.3e} on {k} targets (tolerance {:e}), {secs:.2} s", prob.tolerance),
        );
        Some(json!({
            "targets": k,
            "relative_rms_error": rel,
            "max_abs_error": maxe,
            "reference_rms": (den / (k * dim) as f64).sqrt(),
            "reference": "classical Ewald sum (parki-reference), f64",
            "seconds": secs,
        }))
    } else {
        None
    };
    if let Some(path) = &cfg.output.potential {
        let path = resolve(&args.config, path);
        let shape: Vec<usize> = if dim == 1 { vec![nt] } else { vec![nt, dim] };
        npy::write(&path, &shape, &u64v)?;
        log(quiet, &format!("wrote {}", path.display()));
    }
    let total = ev.times.total();
    let report = json!({
        "parki_dist": env!("CARGO_PKG_VERSION"),
        "kernel": prob.kernel.name(),
        "precision": T::NAME,
        "box": domain.lengths(),
        "periodic": domain.periodic(),
        "tolerance": prob.tolerance,
        "sources": pos.len(),
        "targets": nt,
        "targets_are_sources": trg.is_none(),
        "threads": solver.threads(),
        "ranks": 1,
        "p2p_isa": solver.isa().name(),
        "variants": { "p2g": opts.p2g.name(), "g2p": opts.g2p.name() },
        "parameters": {
            "xi": p.xi,
            "rc": p.rc,
            "rc_effective": p.rc_effective,
            "cells": p.cells,
            "sources_per_cell": p.sources_per_cell,
            "grid": p.grid,
            "h": p.h,
            "kmax": p.kmax,
            "window_support": p.p,
            "beta": p.beta,
            "window_half_width": p.window_half_width,
            "window_poly_degree": p.poly.degree,
            "window_poly_error": p.poly_error,
            "grid_components": prob.kernel.grid_components(),
            "grid_bytes": p.grid_bytes,
            "grid_oversampling": p.oversampling,
            "candidates_compared": p.candidates,
        },
        "error_estimate": {
            "near": p.estimate.near, "fourier": p.estimate.fourier, "window": p.estimate.window,
            "self_interaction": p.estimate.self_interaction, "total": p.estimate.total,
        },
        "predicted_seconds_one_thread": {
            "P2P": p.cost.p2p, "P2G": p.cost.p2g, "FFT": p.cost.fft, "CNV": p.cost.cnv, "G2P": p.cost.g2p,
        },
        "plan_seconds": plan_seconds,
        "timings": stats.rows.iter().map(|(s, lo, avg, hi)| (s.name().to_string(), json!({"min": lo, "avg": avg, "max": hi}))).collect::<serde_json::Map<String, Value>>(),
        "total_seconds": total,
        "throughput_particles_per_second": nt as f64 / total,
        "p2p_pairs": ev.pairs,
        "padding_efficiency": ev.padding_efficiency,
        "check": check,
        "warnings": ev.warnings,
    });
    if let Some(path) = &cfg.output.report {
        let path = resolve(&args.config, path);
        let text = serde_json::to_string_pretty(&report).expect("report serialises");
        std::fs::write(&path, text + "\n").map_err(|e| Error::Io { path: path.clone(), message: e.to_string() })?;
        log(quiet, &format!("wrote {}", path.display()));
    }
    let mut table = stats.table();
    table += &format!("throughput {:.4e} particles/s ({} targets)\n", nt as f64 / total, nt);
    Ok(RunSummary { report, table })
}
