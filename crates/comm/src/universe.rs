//! [`Universe`]: MPI initialisation at the thread level parki-dist needs, and finalisation.

#[cfg(feature = "mpi")]
use mpi::topology::SimpleCommunicator;
#[cfg(feature = "mpi")]
use mpi::traits::Communicator;
use parki_core::{Error, Result};

use crate::comm::Comm;

/// A level of thread support of an MPI library (`MPI_Init_thread`, MPI-3.1 §12.4.3), in
/// increasing order: each level allows what the ones below it allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ThreadLevel {
    /// `MPI_THREAD_SINGLE`: the process has one thread.
    Single,
    /// `MPI_THREAD_FUNNELED`: only the thread that initialised MPI calls it.
    Funneled,
    /// `MPI_THREAD_SERIALIZED`: any thread calls MPI, never two at once.
    Serialized,
    /// `MPI_THREAD_MULTIPLE`: any thread calls MPI, at any time.
    Multiple,
}

impl ThreadLevel {
    /// The name of the level in the MPI standard, e.g. `MPI_THREAD_SERIALIZED`.
    pub fn name(self) -> &'static str {
        match self {
            ThreadLevel::Single => "MPI_THREAD_SINGLE",
            ThreadLevel::Funneled => "MPI_THREAD_FUNNELED",
            ThreadLevel::Serialized => "MPI_THREAD_SERIALIZED",
            ThreadLevel::Multiple => "MPI_THREAD_MULTIPLE",
        }
    }

    #[cfg(feature = "mpi")]
    fn to_rsmpi(self) -> mpi::Threading {
        match self {
            ThreadLevel::Single => mpi::Threading::Single,
            ThreadLevel::Funneled => mpi::Threading::Funneled,
            ThreadLevel::Serialized => mpi::Threading::Serialized,
            ThreadLevel::Multiple => mpi::Threading::Multiple,
        }
    }

    #[cfg(feature = "mpi")]
    fn from_rsmpi(t: mpi::Threading) -> Self {
        match t {
            mpi::Threading::Single => ThreadLevel::Single,
            mpi::Threading::Funneled => ThreadLevel::Funneled,
            mpi::Threading::Serialized => ThreadLevel::Serialized,
            mpi::Threading::Multiple => ThreadLevel::Multiple,
        }
    }
}

impl std::fmt::Display for ThreadLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Who initialised MPI: the thread level was asked for by [`Universe::init`] or by the code that
/// embeds parki-dist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) enum InitBy {
    Universe,
    Embedder,
}

/// `Ok` when `provided` is at least `required`; otherwise [`Error::Unsupported`] naming both
/// levels, why parki-dist needs `required`, and what to change.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) fn check_thread_level(required: ThreadLevel, provided: ThreadLevel, by: InitBy) -> Result<()> {
    if provided >= required {
        return Ok(());
    }
    let remedy = match by {
        InitBy::Universe => format!(
            "MPI_Init_thread asked for {required} and the MPI library granted {provided}; use an MPI \
             library built with thread support"
        ),
        InitBy::Embedder => format!(
            "MPI was initialised by the calling code with {provided}; initialise it with \
             MPI_Init_thread and {required} or {} instead",
            ThreadLevel::Multiple
        ),
    };
    Err(Error::Unsupported {
        what: format!(
            "MPI thread level {provided}: parki-dist needs {required} (it calls MPI from a worker \
             thread of its thread pool, one call at a time); {remedy}"
        ),
    })
}

/// The MPI environment of a process. Initialises MPI at thread level
/// [`THREAD_LEVEL`](Self::THREAD_LEVEL) unless the embedding code did, checks the level granted,
/// and finalises MPI on drop if it initialised it.
pub struct Universe {
    world: Comm,
    level: Option<ThreadLevel>,
    #[cfg(feature = "mpi")]
    _rsmpi: Option<mpi::environment::Universe>,
}

impl Universe {
    /// The MPI thread level parki-dist needs: `MPI_THREAD_SERIALIZED`, because the distributed
    /// FFT and the grid exchanges call MPI from a worker thread of the solver's thread pool (not
    /// the thread that initialised MPI), one call at a time.
    pub const THREAD_LEVEL: ThreadLevel = ThreadLevel::Serialized;

    /// Initialises MPI if this build has it and the process has not; a single process otherwise.
    ///
    /// MPI is initialised with `MPI_Init_thread` asking for [`THREAD_LEVEL`](Self::THREAD_LEVEL);
    /// when the embedding code initialised MPI itself, the level it obtained is queried
    /// (`MPI_Query_thread`). Either way the level is checked before anything else runs.
    ///
    /// # Errors
    /// [`Error::Unsupported`] when the MPI library provides less than
    /// [`THREAD_LEVEL`](Self::THREAD_LEVEL) (the message names the level asked for and the level
    /// granted; MPI is finalised again if this call initialised it), or when MPI was already
    /// finalised.
    pub fn init() -> Result<Self> {
        #[cfg(feature = "mpi")]
        {
            let required = Self::THREAD_LEVEL;
            if mpi::environment::is_finalized() {
                return Err(Error::Unsupported {
                    what: "MPI was already finalised: parki-dist cannot initialise it again".into(),
                });
            }
            let (rsmpi, provided, by) = match mpi::initialize_with_threading(required.to_rsmpi()) {
                Some((u, granted)) => (Some(u), ThreadLevel::from_rsmpi(granted), InitBy::Universe),
                None => (None, ThreadLevel::from_rsmpi(mpi::environment::threading_support()), InitBy::Embedder),
            };
            // on error `rsmpi` drops here, finalising MPI if this call initialised it
            check_thread_level(required, provided, by)?;
            let world = Comm::world();
            Ok(Self { world, level: Some(provided), _rsmpi: rsmpi })
        }
        #[cfg(not(feature = "mpi"))]
        Ok(Self { world: Comm::single(), level: None })
    }

    /// The communicator of all processes.
    pub fn world(&self) -> Comm {
        self.world.clone()
    }

    /// The MPI thread level the library provides (at least [`THREAD_LEVEL`](Self::THREAD_LEVEL));
    /// `None` in a build without MPI.
    pub fn thread_level(&self) -> Option<ThreadLevel> {
        self.level
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
                // no MPI lock: the panicking thread may hold it; aborting is always allowed
                SimpleCommunicator::world().abort(101);
            }
        }));
    }

    /// Whether this build links MPI.
    pub fn has_mpi() -> bool {
        cfg!(feature = "mpi")
    }
}
