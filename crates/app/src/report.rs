//! The JSON report and the end-of-run tables of `parki-dist run`. Every field of the report is
//! documented, with its unit, in docs/report.md (a test checks that none is missing).

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use parki_comm::{Backend, StageStats, TrafficStats};
use parki_core::StageKind;
use parki_decomp::ProcGrid;
use parki_farfield::Params;
use serde_json::{json, Map, Value};

use crate::backend::{Choice, DeviceReport, Request};
use crate::input::Problem;
use crate::verify::Check;
use parki_dist::{DeviceErfc, EwaldOptions, EwaldStage};

/// Everything a report states, gathered at the end of a run (reduced over ranks already).
pub struct ReportInputs<'a> {
    /// The problem (this rank's share; only global fields are reported).
    pub prob: &'a Problem,
    /// `"f64"` or `"f32"`.
    pub precision: &'static str,
    /// Threads per rank.
    pub threads: usize,
    /// P2P instruction set (`"cuda"` on the CUDA backend).
    pub isa: &'static str,
    /// The compute backend and why it was chosen.
    pub compute: &'a Choice,
    /// Rank 0's device (device backends).
    pub device: Option<&'a DeviceReport>,
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
    /// Every evaluation's time (the slowest rank's).
    pub evaluations: &'a EvaluationTimes,
    /// Bytes per communication stage (empty on one rank).
    pub traffic: &'a [TrafficStats],
    /// P2P pairs over all ranks.
    pub pairs: u64,
    /// Rank 0's padding efficiency.
    pub padding_efficiency: f64,
    /// P2P's device seconds where it ran on the side stream overlapping the far field
    /// (`[run] device_overlap = "p2p"`), min/avg/max over ranks.
    pub overlapped_p2p: Option<[f64; 3]>,
    /// The accuracy check, if asked for.
    pub check: Option<&'a Check>,
    /// Input warnings.
    pub warnings: &'a [String],
    /// The parameter choice's cost constants and where they came from
    /// ([`crate::calibrate::CostChoice::report`]).
    pub cost_model: &'a Value,
    /// The FFTW wisdom the plan imported and saved ([`crate::wisdom::Wisdom::report`]).
    pub fftw_wisdom: &'a Value,
    /// Where, when and how the run was made.
    pub provenance: &'a Provenance,
    /// The units the run computed in (`prob` is in them; the report converts back).
    pub units: crate::units::Units,
}

/// Where, when and how a run was made: the report's `provenance`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provenance {
    /// The run.toml, absolute where it can be resolved.
    pub run_toml: String,
    /// The command line, program first.
    pub command_line: Vec<String>,
    /// Start of the run, RFC 3339 UTC (`2025-01-31T12:00:00Z`).
    pub start_time: String,
    /// Host name of rank 0.
    pub host: String,
    /// MPI ranks.
    pub ranks: usize,
}

impl Provenance {
    /// The provenance of a run of `config` started at `started` on `ranks` ranks.
    pub fn new(config: &Path, command_line: &[String], started: SystemTime, ranks: usize) -> Self {
        let run_toml = std::fs::canonicalize(config).unwrap_or_else(|_| config.to_path_buf());
        Self {
            run_toml: run_toml.display().to_string(),
            command_line: command_line.to_vec(),
            start_time: rfc3339_utc(started),
            host: host_name(),
            ranks,
        }
    }

    /// The report's `provenance` object, with the version and the git commit of the build.
    pub fn to_json(&self) -> Value {
        let dirty = match env!("PARKI_GIT_DIRTY") {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => Value::Null,
        };
        json!({
            "run_toml": self.run_toml,
            "command_line": self.command_line,
            "start_time": self.start_time,
            "host": self.host,
            "ranks": self.ranks,
            "version": env!("CARGO_PKG_VERSION"),
            "git_commit": env!("PARKI_GIT_COMMIT"),
            "git_dirty": dirty,
        })
    }
}

/// The host name (Linux: /proc/sys/kernel/hostname; else `$HOSTNAME`; else `unknown`).
fn host_name() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()))
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".into())
}

/// `t` as RFC 3339 UTC to the second, e.g. `2024-02-29T13:05:09Z`.
pub fn rfc3339_utc(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let s = secs % 86_400;
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", s / 3600, s / 60 % 60, s % 60)
}

/// The proleptic Gregorian date `(year, month, day)` of day `z` since 1970-01-01 (the
/// days-to-civil algorithm of H. Hinnant: 400-year eras of 146 097 days, years starting in
/// March so that the leap day is the last of the year).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of the era, [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // year of the era, [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // day of the year from March 1, [0, 365]
    let mp = (5 * doy + 2) / 153; // month from March, [0, 11]
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

pub(crate) fn min_avg_max(v: (f64, f64, f64)) -> Value {
    json!({"min": v.0, "avg": v.1, "max": v.2})
}

/// Writes `report` as pretty JSON into `path` (rank 0). Collective, agreed.
pub fn write(comm: &parki_comm::Comm, path: &Path, report: &Value) -> parki_core::Result<()> {
    let written = if comm.rank() == 0 {
        let text = serde_json::to_string_pretty(report).expect("report serialises");
        std::fs::write(path, text + "\n")
            .map_err(|e| parki_core::Error::Io { path: path.into(), message: e.to_string() })
    } else {
        Ok(())
    };
    comm.agree(written)
}

/// The report's `communication` object: per stage, bytes per rank, messages and seconds.
pub(crate) fn communication(traffic: &[TrafficStats]) -> Map<String, Value> {
    traffic
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
        .collect()
}

/// The JSON report.
pub fn build(r: &ReportInputs) -> Value {
    let (p, prob) = (r.params, r.prob);
    let nt = prob.targets_total();
    let total = r.stats.total.2;
    let timings: Map<String, Value> =
        r.stats.rows.iter().map(|&(s, lo, avg, hi)| (s.name().to_string(), min_avg_max((lo, avg, hi)))).collect();
    let communication = communication(r.traffic);
    json!({
        "provenance": r.provenance.to_json(),
        "kernel": prob.kernel.name(),
        "field": r.opts.field_request().map(|m| m.name()),
        "precision": r.precision,
        "box": prob.domain.lengths().map(|l| l * r.units.length),
        "units": crate::units::RunUnits::to_json(&r.units),
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
        "backend": r.compute.compute.name(),
        "backend_requested": r.compute.requested.name(),
        "backend_reason": r.compute.reason,
        "device": r.device.map(device_json),
        "p2p_isa": r.isa,
        "variants": {
            "p2g": r.opts.p2g.name(),
            "g2p": r.opts.g2p.name(),
            "pair_accuracy": if r.compute.compute.name() != "cpu" {
                device_pair_accuracy(r.opts, r.precision)
            } else if r.precision == "f32" {
                r.opts.pair_accuracy_for::<f32>().name()
            } else {
                r.opts.pair_accuracy_for::<f64>().name()
            },
            "near_cutoff": if p.near_cut.is_some() { "sphere" } else { "cells" },
            "fft_plan": r.opts.fft_rigor.name(),
            "fft_lines": r.opts.fft_lines.name(),
        },
        "parameters": {
            "xi": p.xi,
            "rc": p.rc,
            "rc_effective": p.rc_effective,
            "near_cut": p.near_cut,
            "cells": p.cells,
            "sources_per_cell": p.sources_per_cell,
            "cell_occupancy": p.occupancy,
            "grid": p.grid,
            "free_axes": p.free.as_ref().map(|f| json!({
                "data_points": f.data,
                "padded_grid": f.fft_len,
                "upsampled_grid_plan_time": f.upsampled,
                "truncation_radius": f.radius,
            })),
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
            "self_interaction": p.estimate.self_interaction, "rounding": p.estimate.rounding,
            "total": p.estimate.total,
        },
        "predicted_seconds_one_thread": {
            "P2P": p.cost.p2p, "P2G": p.cost.p2g, "FFT": p.cost.fft, "CNV": p.cost.cnv, "G2P": p.cost.g2p,
        },
        "plan_seconds": r.plan_seconds,
        "timings": timings,
        "communication": communication,
        "total_seconds": total,
        "evaluations": r.evaluations.to_json(),
        "throughput_particles_per_second": nt as f64 / total,
        "p2p_pairs": r.pairs,
        "padding_efficiency": r.padding_efficiency,
        "p2p_overlapped_seconds": r.overlapped_p2p.map(|[min, avg, max]| json!({"min": min, "avg": avg, "max": max})),
        "check": r.check.map(Check::to_json),
        "warnings": r.warnings,
        "cost_model": r.cost_model,
        "fftw_wisdom": r.fftw_wisdom,
    })
}

/// P2P's pair functions on a device: CUDA's (`"library"`, `DeviceErfc::Library`), else full or,
/// in f64, medium (a loose accuracy runs as medium there: the device has no loose functions).
fn device_pair_accuracy(opts: &EwaldOptions, precision: &str) -> &'static str {
    match (opts.device.erfc, precision) {
        (DeviceErfc::Library, _) => "library",
        (_, "f32") => opts.medium_pair_accuracy_for::<f32>().name(),
        _ => opts.medium_pair_accuracy_for::<f64>().name(),
    }
}

/// The report's `device` object.
fn device_json(d: &DeviceReport) -> Value {
    let i = &d.info;
    json!({
        "name": i.name,
        "ordinal": i.ordinal,
        "count": i.count,
        "compute_capability": format!("{}.{}", i.compute.0, i.compute.1),
        "driver": i.driver,
        "cuda": i.cuda,
        "memory_bytes": i.memory,
        "variants": d.variants,
    })
}

/// The wall time of each of a run's evaluations (`[run] repeat`), each the slowest rank's.
/// The stage table is the last evaluation's; on a noisy machine the fastest evaluation (or the
/// median) is the steadier figure for comparing runs, and the first one carries warm-up costs
/// (page faults on fresh buffers).
#[derive(Clone, Debug, Default)]
pub struct EvaluationTimes {
    /// Seconds per evaluation, in order.
    pub seconds: Vec<f64>,
}

impl EvaluationTimes {
    /// From the per-evaluation totals (already reduced over ranks).
    pub fn new(seconds: &[f64]) -> Self {
        Self { seconds: seconds.to_vec() }
    }

    /// The fastest evaluation's seconds (0 without evaluations).
    pub fn min(&self) -> f64 {
        self.seconds.iter().copied().reduce(f64::min).unwrap_or(0.0)
    }

    /// The median evaluation's seconds (the mean of the middle two for an even count; 0
    /// without evaluations).
    pub fn median(&self) -> f64 {
        let mut v = self.seconds.clone();
        v.sort_by(f64::total_cmp);
        match v.len() {
            0 => 0.0,
            n if n % 2 == 1 => v[n / 2],
            n => 0.5 * (v[n / 2 - 1] + v[n / 2]),
        }
    }

    /// The report's `evaluations` object.
    pub fn to_json(&self) -> Value {
        json!({
            "count": self.seconds.len(),
            "min_seconds": self.min(),
            "median_seconds": self.median(),
            "seconds": self.seconds,
        })
    }
}

/// The tables printed at the end of a run: per-stage seconds (min/avg/max over ranks), on
/// several ranks the bytes per communication stage and the process grid, the compute backend
/// (and rank 0's device), and the throughput.
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
    if let Some([min, avg, max]) = r.overlapped_p2p {
        s += &format!(
            "P2P on the device's side stream, overlapping the far field: min {min:.4} s, avg {avg:.4} s, max {max:.4} s (its row above only queued it)\n"
        );
    }
    s += &format!("backend {}", r.compute.compute.name());
    if let Some(d) = r.device {
        s += &format!(": {}", d.line());
    }
    if r.compute.requested == Request::Auto {
        s += &format!(" (auto: {})", r.compute.reason);
    }
    s += "\n";
    let nt = r.prob.targets_total();
    s += &format!("throughput {:.4e} particles/s ({} targets)\n", nt as f64 / r.stats.total.2, nt);
    let e = r.evaluations;
    if e.seconds.len() > 1 {
        s += &format!(
            "{} evaluations: fastest {:.4} s, median {:.4} s, last {:.4} s (the table above)\n",
            e.seconds.len(),
            e.min(),
            e.median(),
            e.seconds.last().copied().unwrap_or(0.0)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::{rfc3339_utc, EvaluationTimes};

    #[test]
    fn evaluation_times_min_and_median() {
        let e = EvaluationTimes::new(&[0.5, 0.2, 0.9, 0.3]);
        assert_eq!(e.min(), 0.2);
        assert!((e.median() - 0.4).abs() < 1e-15);
        assert_eq!(EvaluationTimes::new(&[0.7, 0.1, 0.4]).median(), 0.4);
        assert_eq!(EvaluationTimes::default().median(), 0.0);
        assert_eq!(e.to_json()["count"], 4);
    }

    #[test]
    fn rfc3339_dates() {
        let at = |s: u64| rfc3339_utc(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(951_868_799), "2000-02-29T23:59:59Z");
        assert_eq!(at(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(at(4_107_542_400), "2100-03-01T00:00:00Z");
        assert_eq!(at(1_709_164_800 + 3_723), "2024-02-29T01:02:03Z");
    }
}
