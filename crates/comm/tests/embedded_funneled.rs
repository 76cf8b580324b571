//! A code that embeds parki-dist and initialised MPI itself at MPI_THREAD_FUNNELED: `Universe::init`
//! must refuse it (parki-dist calls MPI from pool threads, which needs MPI_THREAD_SERIALIZED),
//! naming both levels, and leave the embedder's MPI initialised. A test binary of its own: MPI
//! is initialised once per process.
#![cfg(feature = "mpi")]

use parki_comm::Universe;

#[test]
fn embedder_funneled_mpi_is_refused() {
    let (embedder, granted) =
        mpi::initialize_with_threading(mpi::Threading::Funneled).expect("the embedder initialises MPI");
    assert_eq!(granted, mpi::Threading::Funneled, "Open MPI grants the level asked for");
    let err = match Universe::init() {
        Ok(_) => panic!("Universe::init accepted MPI_THREAD_FUNNELED"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("MPI thread level MPI_THREAD_FUNNELED"), "{err}");
    assert!(err.contains("needs MPI_THREAD_SERIALIZED"), "{err}");
    assert!(err.contains("initialised by the calling code"), "{err}");
    assert!(mpi::is_initialized() && !mpi::is_finalized(), "the embedder's MPI stays up");
    drop(embedder);
}
