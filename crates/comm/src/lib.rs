//! Communication layer of parki-dist: the only crate that calls MPI (through rsmpi's safe calls,
//! and its `ffi` only for what rsmpi does not wrap: persistent requests and raw communicator
//! handles, with every return code checked).
//!
//! - [`Universe`] initialises MPI at `MPI_THREAD_SERIALIZED` and checks the level granted (or
//!   runs a single process, in a build without the `mpi` feature); every MPI call of the crate
//!   holds one process-wide lock, so no two threads ever call MPI at once;
//! - [`Comm`] is a communicator: world, split sub-communicators, Cartesian; typed reductions,
//!   gathers, all-to-all-v, sparse and neighbour exchange, and [`Comm::agree`], which makes
//!   every rank stop with the same error instead of hanging;
//! - [`ExchangePlan`] is a block exchange planned once and executed many times by
//!   `MPI_Alltoallv` or persistent point-to-point requests (`MPI_Send_init`/`MPI_Recv_init`,
//!   `MPI_Startall`, `MPI_Waitany`), chosen at run time;
//! - [`Window`] exposes a buffer to passive-target one-sided reads (`MPI_Get` under a shared
//!   lock), for data a rank needs from a few others without their taking part;
//! - every call is counted (bytes, messages, seconds) under the stage named by [`Comm::stage`];
//!   [`StageStats`] and [`TrafficStats`] reduce timers and counters to min/avg/max over ranks.
//!
//! Without the `mpi` feature the same API runs a single process.

mod comm;
mod exchange;
mod pod;
#[cfg(feature = "mpi")]
mod served;
mod stats;
mod traffic;
mod universe;
mod window;

pub use comm::{Comm, ReduceOp, Reducible};
pub use exchange::{Backend, Dir, ExchangePlan};
pub use pod::{as_bytes, as_bytes_mut, Pod};
pub use stats::{StageStats, TrafficStats};
pub use traffic::{StageGuard, TrafficRow};
pub use universe::{ThreadLevel, Universe};
pub use window::{Transport, Window, ONE_SIDED_ENV};

#[cfg(test)]
mod tests {
    use super::{Backend, Comm, Dir, ExchangePlan, StageStats, ThreadLevel, TrafficStats, Universe};
    use crate::universe::{check_thread_level, InitBy};
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
    fn thread_level_below_serialized_is_refused_naming_both_levels() {
        use ThreadLevel::{Funneled, Multiple, Serialized, Single};
        assert!(Single < Funneled && Funneled < Serialized && Serialized < Multiple);
        assert_eq!(Universe::THREAD_LEVEL, Serialized);
        for by in [InitBy::Universe, InitBy::Embedder] {
            for provided in [Single, Funneled, Serialized, Multiple] {
                let r = check_thread_level(Serialized, provided, by);
                assert_eq!(r.is_ok(), provided >= Serialized, "{provided} ({by:?})");
                if let Err(e) = r {
                    let m = e.to_string();
                    assert!(m.contains("needs MPI_THREAD_SERIALIZED"), "{m}");
                    assert!(m.contains(&format!("MPI thread level {}", provided.name())), "{m}");
                    let who = if by == InitBy::Universe { "asked for MPI_THREAD_SERIALIZED" } else { "calling code" };
                    assert!(m.contains(who), "{m}");
                }
            }
        }
    }

    /// The only test of this binary that initialises MPI (once per process; the other tests use
    /// `Comm::single`, which never calls MPI). A plain `Universe::init` (no mpirun: an Open MPI
    /// singleton) must obtain MPI_THREAD_SERIALIZED; the rsmpi paths run on one rank; FFI
    /// failures name the call and MPI's own description.
    #[cfg(feature = "mpi")]
    #[test]
    fn universe_init_obtains_serialized() {
        let universe = Universe::init().expect("MPI initialises at MPI_THREAD_SERIALIZED");
        assert!(universe.thread_level() >= Some(ThreadLevel::Serialized), "{:?}", universe.thread_level());
        let queried = mpi::environment::threading_support();
        assert!(queried >= mpi::Threading::Serialized, "MPI_Query_thread: {queried:?}");
        let world = universe.world();
        assert_eq!((world.rank(), world.size()), (0, 1));
        // SAFETY: MPI_COMM_WORLD is live until `universe` drops, after `lent`.
        let lent = unsafe { Comm::from_raw(world.as_raw().expect("an MPI communicator")) };
        let sub = lent.split(0, 0);
        let cart = sub.cartesian(&[1, 1]).expect("1 x 1 grid over one rank");
        assert_eq!((cart.size(), cart.cart_coords(0)), (1, Some(vec![0, 0])));
        cart.barrier();
        assert_eq!(cart.sum(2.5f64), 2.5);
        drop((cart, sub, lent));

        crate::comm::mpi_check(mpi::ffi::MPI_SUCCESS as i32, "MPI_Start");
        let code = mpi::ffi::MPI_ERR_RANK as i32;
        let m = crate::comm::mpi_error_message(code, "MPI_Send_init");
        assert!(m.starts_with(&format!("MPI_Send_init failed: MPI error {code}: ")), "{m}");
        assert!(m.to_lowercase().contains("rank"), "MPI_Error_string of MPI_ERR_RANK: {m}");
        let panicked = std::panic::catch_unwind(|| crate::comm::mpi_check(code, "MPI_Waitany"));
        let msg = panicked.expect_err("a failed call panics");
        let msg = msg.downcast_ref::<String>().expect("a formatted message");
        assert!(msg.starts_with("MPI_Waitany failed: MPI error"), "{msg}");
        drop(universe);
        assert!(mpi::environment::is_finalized());
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
