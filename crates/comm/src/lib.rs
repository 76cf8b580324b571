//! Communication layer of parki-dist.
//!
//! Every collective the rest of the code needs goes through [`Communicator`]. This crate is the
//! only one that will call MPI: the rsmpi-backed communicator (feature `mpi`) arrives with the
//! distributed solver (issue 3). [`SelfComm`] is the single-process communicator used by the
//! one-process solver, the tests and the library when it is embedded without MPI.
//!
//! [`StageStats`] reduces per-stage timers to min/avg/max over ranks for the timing table.

use parki_core::{Stage, StageTimes};

/// A reduction operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// Sum.
    Sum,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
}

/// The collectives parki-dist needs from a group of processes.
pub trait Communicator: Sync {
    /// This process's rank in `0..size()`.
    fn rank(&self) -> usize;
    /// Number of processes.
    fn size(&self) -> usize;
    /// In-place all-reduce of `values` with `op`.
    fn all_reduce_f64(&self, values: &mut [f64], op: ReduceOp);
    /// Waits for all processes.
    fn barrier(&self);
}

/// The communicator of a single process: rank 0 of 1; collectives are the identity.
#[derive(Clone, Copy, Debug, Default)]
pub struct SelfComm;

impl Communicator for SelfComm {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn all_reduce_f64(&self, _values: &mut [f64], _op: ReduceOp) {}
    fn barrier(&self) {}
}

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
    pub fn reduce(comm: &dyn Communicator, times: &StageTimes) -> StageStats {
        let mut values: Vec<f64> = times.iter().map(|(_, t)| t).collect();
        values.push(times.total());
        let mut lo = values.clone();
        let mut hi = values.clone();
        let mut sum = values;
        comm.all_reduce_f64(&mut lo, ReduceOp::Min);
        comm.all_reduce_f64(&mut hi, ReduceOp::Max);
        comm.all_reduce_f64(&mut sum, ReduceOp::Sum);
        let n = comm.size() as f64;
        let rows = Stage::ALL.iter().enumerate().map(|(i, &s)| (s, lo[i], sum[i] / n, hi[i])).collect();
        let k = Stage::ALL.len();
        StageStats { rows, total: (lo[k], sum[k] / n, hi[k]), ranks: comm.size() }
    }

    /// The timing table printed at the end of a run.
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
            s += &format!("{:<10} {:>12.4} {:>12.4} {:>12.4}\n", stage.name(), lo, avg, hi);
        }
        let (lo, avg, hi) = self.total;
        s += &format!("{:<10} {:>12.4} {:>12.4} {:>12.4}\n", "total", lo, avg, hi);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::{SelfComm, StageStats};
    use parki_core::{Stage, StageTimes};

    #[test]
    fn single_rank_stats_equal_the_times() {
        let mut t = StageTimes::default();
        t.add(Stage::P2P, 2.0);
        t.add(Stage::FFT, 0.5);
        let s = StageStats::reduce(&SelfComm, &t);
        let p2p = s.rows.iter().find(|r| r.0 == Stage::P2P).unwrap();
        assert_eq!((p2p.1, p2p.2, p2p.3), (2.0, 2.0, 2.0));
        assert_eq!(s.total, (2.5, 2.5, 2.5));
        assert!(s.table().contains("P2P"));
    }
}
