//! Per-stage min/avg/max of wall time and bytes over ranks, and the timing table.

use parki_core::{StageKind, StageName, StageTimes};

use crate::comm::{Comm, ReduceOp};

/// Per-stage min/avg/max of wall time over ranks, for the stages `S` of one method.
#[derive(Clone, Debug, PartialEq)]
pub struct StageStats<S: StageKind> {
    /// `(stage, min, avg, max)` in execution order.
    pub rows: Vec<(S, f64, f64, f64)>,
    /// Total wall time: min/avg/max over ranks of each rank's sum.
    pub total: (f64, f64, f64),
    /// Number of ranks reduced over.
    pub ranks: usize,
}

impl<S: StageKind> StageStats<S> {
    /// Reduces each rank's `times` over `comm` (collective: every rank must call it).
    pub fn reduce(comm: &Comm, times: &StageTimes<S>) -> StageStats<S> {
        let mut values: Vec<f64> = times.as_slice().to_vec();
        values.push(times.total());
        let mut lo = values.clone();
        let mut hi = values.clone();
        let mut sum = values;
        comm.all_reduce(&mut lo, ReduceOp::Min);
        comm.all_reduce(&mut hi, ReduceOp::Max);
        comm.all_reduce(&mut sum, ReduceOp::Sum);
        let n = comm.size() as f64;
        let rows = S::ALL.iter().enumerate().map(|(i, &s)| (s, lo[i], sum[i] / n, hi[i])).collect();
        let k = S::ALL.len();
        StageStats { rows, total: (lo[k], sum[k] / n, hi[k]), ranks: comm.size() }
    }

    /// The timing table printed at the end of a run (on one rank without the stages that did
    /// not run).
    pub fn table(&self) -> String {
        // the name column fits the longest stage name (10 at least)
        let w = self.rows.iter().map(|r| r.0.name().len()).max().unwrap_or(0).max(10);
        let mut s = format!(
            "{:<w$} {:>12} {:>12} {:>12}   (seconds over {} rank{})\n",
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
            s += &format!("{:<w$} {:>12.4} {:>12.4} {:>12.4}\n", stage.name(), lo, avg, hi);
        }
        let (lo, avg, hi) = self.total;
        s += &format!("{:<w$} {:>12.4} {:>12.4} {:>12.4}\n", "total", lo, avg, hi);
        s
    }
}

/// Bytes, messages and communication seconds of one stage, min/avg/max over ranks.
#[derive(Clone, Debug, PartialEq)]
pub struct TrafficStats {
    /// The stage.
    pub stage: StageName,
    /// Bytes sent per rank: min, max.
    pub bytes: (u64, u64),
    /// Bytes sent per rank: average.
    pub bytes_avg: f64,
    /// Bytes sent by all ranks together.
    pub total_bytes: u64,
    /// Messages per rank: max.
    pub max_messages: u64,
    /// Seconds in communication per rank: min, avg, max.
    pub seconds: (f64, f64, f64),
}

impl TrafficStats {
    /// Reduces the traffic counters of `comm` over its ranks for `stages` (collective; every
    /// rank must pass the same stages, as a method's own list does).
    pub fn reduce(comm: &Comm, stages: &[StageName]) -> Vec<TrafficStats> {
        let rows = comm.traffic();
        let get = |n: StageName| rows.iter().find(|(k, _)| k == n.as_str()).map(|(_, r)| *r).unwrap_or_default();
        let mut counts: Vec<u64> = Vec::new();
        let mut secs: Vec<f64> = Vec::new();
        for &n in stages {
            let r = get(n);
            counts.extend_from_slice(&[r.bytes, r.messages]);
            secs.push(r.seconds);
        }
        let (mut lo, mut hi, mut sum) = (counts.clone(), counts.clone(), counts);
        comm.all_reduce(&mut lo, ReduceOp::Min);
        comm.all_reduce(&mut hi, ReduceOp::Max);
        comm.all_reduce(&mut sum, ReduceOp::Sum);
        let (mut slo, mut shi, mut ssum) = (secs.clone(), secs.clone(), secs);
        comm.all_reduce(&mut slo, ReduceOp::Min);
        comm.all_reduce(&mut shi, ReduceOp::Max);
        comm.all_reduce(&mut ssum, ReduceOp::Sum);
        let n = comm.size() as f64;
        stages
            .iter()
            .enumerate()
            .map(|(i, &stage)| TrafficStats {
                stage,
                bytes: (lo[2 * i], hi[2 * i]),
                bytes_avg: sum[2 * i] as f64 / n,
                total_bytes: sum[2 * i],
                max_messages: hi[2 * i + 1],
                seconds: (slo[i], ssum[i] / n, shi[i]),
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
                r.stage.as_str(),
                r.bytes.0 as f64 / 1e6,
                r.bytes_avg / 1e6,
                r.bytes.1 as f64 / 1e6,
                r.max_messages,
                r.seconds.2
            );
        }
        s
    }
}
