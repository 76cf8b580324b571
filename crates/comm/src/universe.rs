//! [`Universe`]: MPI initialisation and finalisation.

#[cfg(feature = "mpi")]
use crate::comm::ffi;
use crate::comm::Comm;

/// The MPI environment of a process. Initialises MPI (thread level FUNNELED: only the thread
/// that calls parki-dist talks to MPI) unless the embedding code did, and finalises it on drop
/// if it initialised it.
pub struct Universe {
    world: Comm,
    #[cfg(feature = "mpi")]
    _rsmpi: Option<mpi::environment::Universe>,
}

impl Universe {
    /// Initialises MPI if this build has it and the process has not; a single process otherwise.
    pub fn init() -> Self {
        #[cfg(feature = "mpi")]
        {
            let already = {
                let mut flag = 0;
                // SAFETY: may be called before MPI_Init.
                unsafe { ffi::MPI_Initialized(&mut flag) };
                flag != 0
            };
            let rsmpi =
                if already { None } else { mpi::initialize_with_threading(mpi::Threading::Funneled).map(|(u, _)| u) };
            // SAFETY: MPI_COMM_WORLD is valid from initialisation to finalisation, which happens
            // when `_rsmpi` drops, after `world` (field order) has released nothing it owns.
            let world = unsafe { Comm::from_raw(ffi::RSMPI_COMM_WORLD) };
            Self { world, _rsmpi: rsmpi }
        }
        #[cfg(not(feature = "mpi"))]
        Self { world: Comm::single() }
    }

    /// The communicator of all processes.
    pub fn world(&self) -> Comm {
        self.world.clone()
    }

    /// Makes a panic on any rank stop the whole job: after the usual panic message (prefixed
    /// with the rank), the hook calls `MPI_Abort` on the world when it has more than one rank,
    /// so that the other ranks do not wait forever in their next collective.
    pub fn abort_on_panic(&self) {
        let (rank, size) = (self.world.rank(), self.world.size());
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if size > 1 {
                eprintln!("parki-dist: rank {rank} of {size} panicked; aborting all ranks");
            }
            previous(info);
            #[cfg(feature = "mpi")]
            if size > 1 && crate::comm::mpi_live() {
                // SAFETY: MPI is initialised and not finalised; aborting is always allowed.
                unsafe { ffi::MPI_Abort(ffi::RSMPI_COMM_WORLD, 101) };
            }
        }));
    }

    /// Whether this build links MPI.
    pub fn has_mpi() -> bool {
        cfg!(feature = "mpi")
    }
}
