//! The JSON report and the end-of-run tables of `parki-dist run`.

use parki_comm::{Backend, StageStats, TrafficStats};
use parki_core::StageKind;
use parki_decomp::ProcGrid;
use parki_farfield::Params;
use serde_json::{json, Map, Value};

use crate::input::Problem;
use crate::verify::Check;
use crate::{EwaldOptions, EwaldStage};

/// Everything a report states, gathered at the end of a run (reduced over ranks already).
pub struct ReportInputs<'a> {
    /// The problem (this rank's share; only global fields are reported).
    pub prob: &'a Problem,
    /// `"f64"` or `"f32"`.
    pub precision: &'static str,
    /// Threads per rank.
    pub threads: usize,
    /// P2P instruction set.
    pub isa: &'static str,
    /// Solver options.
    pub opts: &'a EwaldOptions,
    /// Chosen parameters.
    pub params: &'a Params,
    /// Ranks.
    pub ranks: usize,
    /// Process grid.
    pub proc_grid: ProcGrid,
    /// Switch backend.
    pub backend: Backend,
    /// Planning seconds (max over ranks).
    pub plan_seconds: f64,
    /// Per-stage times, min/avg/max over ranks.
    pub stats: &'a StageStats<EwaldStage>,
    /// Bytes per communication stage (empty on one rank).
    pub traffic: &'a [TrafficStats],
    /// P2P pairs over all ranks.
    pub pairs: u64,
    /// Rank 0's padding efficiency.
    pub padding_efficiency: f64,
    /// The accuracy check, if asked for.
    pub check: Option<&'a Check>,
    /// Input warnings.
    pub warnings: &'a [String],
}

fn min_avg_max(v: (f64, f64, f64)) -> Value {
    json!({"min": v.0, "avg": v.1, "max": v.2})
}

/// The JSON report.
pub fn build(r: &ReportInputs) -> Value {
    let (p, prob) = (r.params, r.prob);
    let nt = prob.targets_total();
    let total = r.stats.total.2;
    let timings: Map<String, Value> =
        r.stats.rows.iter().map(|&(s, lo, avg, hi)| (s.name().to_string(), min_avg_max((lo, avg, hi)))).collect();
    let communication: Map<String, Value> = r
        .traffic
        .iter()
        .map(|t| {
            (
                t.stage.as_str().to_string(),
                json!({
                    "bytes_per_rank": {"min": t.bytes.0, "avg": t.bytes_avg, "max": t.bytes.1},
                    "bytes_total": t.total_bytes,
                    "max_messages_per_rank": t.max_messages,
                    "seconds": min_avg_max(t.seconds),
                }),
            )
        })
        .collect();
    json!({
        "parki_dist": env!("CARGO_PKG_VERSION"),
        "kernel": prob.kernel.name(),
        "precision": r.precision,
        "box": prob.domain.lengths(),
        "periodic": prob.domain.periodic(),
        "tolerance": prob.tolerance,
        "sources": prob.sources_total,
        "targets": nt,
        "targets_are_sources": prob.targets_total.is_none(),
        "threads": r.threads,
        "ranks": r.ranks,
        "parallel": {
            "process_grid": r.proc_grid.dims,
            "topology": if r.ranks == 1 { "single" } else { r.proc_grid.kind() },
            "backend": r.backend.name(),
        },
        "p2p_isa": r.isa,
        "variants": { "p2g": r.opts.p2g.name(), "g2p": r.opts.g2p.name() },
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
        "plan_seconds": r.plan_seconds,
        "timings": timings,
        "communication": communication,
        "total_seconds": total,
        "throughput_particles_per_second": nt as f64 / total,
        "p2p_pairs": r.pairs,
        "padding_efficiency": r.padding_efficiency,
        "check": r.check.map(Check::to_json),
        "warnings": r.warnings,
    })
}

/// The tables printed at the end of a run: per-stage seconds (min/avg/max over ranks), on
/// several ranks the bytes per communication stage and the process grid, and the throughput.
pub fn table(r: &ReportInputs) -> String {
    let mut s = r.stats.table();
    if r.ranks > 1 {
        s += &TrafficStats::table(r.traffic);
        s += &format!(
            "process grid [P_y, P_z] = {:?} ({}), switch backend {}\n",
            r.proc_grid.dims,
            r.proc_grid.kind(),
            r.backend.name()
        );
    }
    let nt = r.prob.targets_total();
    s += &format!("throughput {:.4e} particles/s ({} targets)\n", nt as f64 / r.stats.total.2, nt);
    s
}
