//! Per-stage min/avg/max of wall time and bytes over ranks, and the timing table.

use parki_core::{Stage, StageTimes};

use crate::comm::{Comm, ReduceOp};

/// Per-stage min/avg/max of wall time over ranks.
#[derive(Clone, Debug, PartialEq)]
pub struct StageStats {
    /// `(stage, min, avg, max)` in execution order.
    pub rows: Vec<(Stage, f64, f64, f64)>,
    /// Total wall time: min/avg/max over ranks of each rank's sum.
    pub total: (f64, f64, f64),
    /// Number of ranks reduced over.
    pub ranks: usize,
}

impl StageStats {
    /// Reduces each rank's `times` over `comm` (collective: every rank must call it).
    pub fn reduce(comm: &Comm, times: &StageTimes) -> StageStats {
        let mut values: Vec<f64> = times.iter().map(|(_, t)| t).collect();
        values.push(times.total());
        let mut lo = values.clone();
        let mut hi = values.clone();
        let mut sum = values;
        comm.all_reduce(&mut lo, ReduceOp::Min);
        comm.all_reduce(&mut hi, ReduceOp::Max);
        comm.all_reduce(&mut sum, ReduceOp::Sum);
        let n = comm.size() as f64;
        let rows = Stage::ALL.iter().enumerate().map(|(i, &s)| (s, lo[i], sum[i] / n, hi[i])).collect();
        let k = Stage::ALL.len();
        StageStats { rows, total: (lo[k], sum[k] / n, hi[k]), ranks: comm.size() }
    }

    /// The timing table printed at the end of a run (on one rank without the stages that did
    /// not run).
    pub fn table(&self) -> String {
        let mut s = format!(
            "{:<10} {:>12} {:>12} {:>12}   (seconds over {} rank{})\n",
            "stage",
            "min",
            "avg",
            "max",
            self.ranks,
            if self.ranks == 1 { "" } else { "s" }
        );
        for &(stage, lo, avg, hi) in &self.rows {
            if self.ranks == 1 && hi == 0.0 {
                // a stage that only runs on several ranks (sort, ghost, halo, ...)
                continue;
            }
            s += &format!("{:<10} {:>12.4} {:>12.4} {:>12.4}\n", stage.name(), lo, avg, hi);
        }
        let (lo, avg, hi) = self.total;
        s += &format!("{:<10} {:>12.4} {:>12.4} {:>12.4}\n", "total", lo, avg, hi);
        s
    }
}

/// Bytes, messages and communication seconds of one named stage, min/avg/max over ranks.
#[derive(Clone, Debug, PartialEq)]
pub struct TrafficStats {
    /// Stage name.
    pub stage: String,
    /// Bytes sent per rank: min, avg, max.
    pub bytes: (f64, f64, f64),
    /// Bytes sent by all ranks together.
    pub total_bytes: f64,
    /// Messages per rank: max.
    pub max_messages: f64,
    /// Seconds in communication per rank: min, avg, max.
    pub seconds: (f64, f64, f64),
}

impl TrafficStats {
    /// Reduces the traffic counters of `comm` over its ranks for the stages `names` (collective;
    /// every rank must pass the same names).
    pub fn reduce(comm: &Comm, names: &[&str]) -> Vec<TrafficStats> {
        let rows = comm.traffic();
        let get = |n: &str| rows.iter().find(|(k, _)| k == n).map(|(_, r)| *r).unwrap_or_default();
        let mut v: Vec<f64> = Vec::new();
        for n in names {
            let r = get(n);
            v.extend_from_slice(&[r.bytes as f64, r.messages as f64, r.seconds]);
        }
        let (mut lo, mut hi, mut sum) = (v.clone(), v.clone(), v);
        comm.all_reduce(&mut lo, ReduceOp::Min);
        comm.all_reduce(&mut hi, ReduceOp::Max);
        comm.all_reduce(&mut sum, ReduceOp::Sum);
        let n = comm.size() as f64;
        names
            .iter()
            .enumerate()
            .map(|(i, name)| TrafficStats {
                stage: name.to_string(),
                bytes: (lo[3 * i], sum[3 * i] / n, hi[3 * i]),
                total_bytes: sum[3 * i],
                max_messages: hi[3 * i + 1],
                seconds: (lo[3 * i + 2], sum[3 * i + 2] / n, hi[3 * i + 2]),
            })
            .collect()
    }

    /// The bytes table printed at the end of a distributed run.
    pub fn table(rows: &[TrafficStats]) -> String {
        let mut s = format!(
            "{:<14} {:>12} {:>12} {:>12} {:>10} {:>10}\n",
            "communication", "MB/rank min", "avg", "max", "messages", "s max"
        );
        for r in rows {
            s += &format!(
                "{:<14} {:>12.3} {:>12.3} {:>12.3} {:>10} {:>10.4}\n",
                r.stage,
                r.bytes.0 / 1e6,
                r.bytes.1 / 1e6,
                r.bytes.2 / 1e6,
                r.max_messages,
                r.seconds.2
            );
        }
        s
    }
}
