//! Communication layer of parki-dist: the only crate that calls MPI (through rsmpi and its
//! `ffi` for what rsmpi does not wrap, such as persistent requests).
//!
//! - [`Universe`] initialises MPI (or not, in a build without the `mpi` feature);
//! - [`Comm`] is a communicator: world, split sub-communicators, Cartesian; typed reductions,
//!   gathers, all-to-all-v, sparse and neighbour exchange, and [`Comm::agree`], which makes
//!   every rank stop with the same error instead of hanging;
//! - [`ExchangePlan`] is a block exchange planned once and executed many times by
//!   `MPI_Alltoallv` or persistent point-to-point requests (`MPI_Send_init`/`MPI_Recv_init`,
//!   `MPI_Startall`, `MPI_Waitany`), chosen at run time;
//! - every call is counted (bytes, messages, seconds) under the stage named by [`Comm::stage`];
//!   [`StageStats`] and [`TrafficStats`] reduce timers and counters to min/avg/max over ranks.
//!
//! Without the `mpi` feature the same API runs a single process.

mod comm;
mod exchange;
mod pod;
mod stats;
mod traffic;
mod universe;

pub use comm::{Comm, ReduceOp, Reducible};
pub use exchange::{Backend, Dir, ExchangePlan};
pub use pod::{as_bytes, as_bytes_mut, Pod};
pub use stats::{StageStats, TrafficStats};
pub use traffic::{StageGuard, TrafficRow};
pub use universe::Universe;

#[cfg(test)]
mod tests {
    use super::{Backend, Comm, Dir, ExchangePlan, StageStats, TrafficStats};
    use parki_core::{StageKind, StageName, StageTimes};

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Demo {
        Near,
        Far,
    }

    impl StageKind for Demo {
        const ALL: &'static [Self] = &[Demo::Near, Demo::Far];
        fn name(self) -> &'static str {
            match self {
                Demo::Near => "P2P",
                Demo::Far => "FFT",
            }
        }
    }

    #[test]
    fn single_rank_stats_equal_the_times() {
        let mut t = StageTimes::default();
        t.add(Demo::Near, 2.0);
        t.add(Demo::Far, 0.5);
        let s = StageStats::reduce(&Comm::single(), &t);
        let p2p = s.rows.iter().find(|r| r.0 == Demo::Near).unwrap();
        assert_eq!((p2p.1, p2p.2, p2p.3), (2.0, 2.0, 2.0));
        assert_eq!(s.total, (2.5, 2.5, 2.5));
        assert!(s.table().contains("P2P"));
        // traffic is counted under the typed stage that is current
        let c = Comm::single();
        {
            let _g = c.stage(Demo::Far);
            c.reset_traffic();
        }
        let rows = TrafficStats::reduce(&c, &[StageName::from(Demo::Far)]);
        assert_eq!((rows[0].stage.as_str(), rows[0].total_bytes), ("FFT", 0));
    }

    #[test]
    fn single_process_exchange_copies_the_self_block() {
        let c = Comm::single();
        for backend in [Backend::Alltoallv, Backend::Persistent] {
            let mut plan = ExchangePlan::<f64>::new(&c, &[3], &[3], backend);
            let mut got = Vec::new();
            plan.execute(Dir::Forward, |_, b| b.copy_from_slice(&[1.0, 2.0, 3.0]), |_, b| got.extend_from_slice(b));
            plan.execute(Dir::Backward, |_, b| b.copy_from_slice(&[4.0, 5.0, 6.0]), |_, b| got.extend_from_slice(b));
            assert_eq!(got, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        }
        let r: parki_core::Result<()> = Err(parki_core::Error::Unsupported { what: "x".into() });
        assert!(c.agree(r).is_err());
        assert_eq!(c.cartesian(&[1, 1]).unwrap().cart_coords(0), Some(vec![0, 0]));
    }
}
