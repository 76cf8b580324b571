//! [`Comm`]: a communicator over MPI (feature `mpi`) or a single process, with typed collectives,
//! all-to-all-v, neighbour exchange and error agreement. Every call made through it is counted
//! under the current stage name ([`Comm::stage`]).
//!
//! MPI is reached through rsmpi's safe calls; raw `ffi` remains only where rsmpi 0.8 has nothing
//! (persistent requests in [`ExchangePlan`](crate::ExchangePlan), the raw handle of
//! [`Comm::from_raw`]/[`Comm::as_raw`]), and every such call's return code is checked
//! (`mpi_check`).

use std::sync::Arc;
#[cfg(feature = "mpi")]
use std::sync::{Mutex, MutexGuard};
#[cfg(feature = "mpi")]
use std::time::Instant;

#[cfg(feature = "mpi")]
use mpi::collective::SystemOperation;
#[cfg(feature = "mpi")]
use mpi::datatype::{MutView, Partition, PartitionMut, UserDatatype, View};
#[cfg(feature = "mpi")]
use mpi::request::{multiple_scope, RequestCollection};
#[cfg(feature = "mpi")]
use mpi::topology::{CartesianCommunicator, Color, SimpleCommunicator};
#[cfg(feature = "mpi")]
use mpi::traits::{Communicator, CommunicatorCollectives, Destination, Equivalence, FromRaw, Root, Source};
use parki_core::{Error, Result, StageName};

use crate::pod::Pod;
#[cfg(feature = "mpi")]
use crate::pod::{as_bytes, as_bytes_mut};
use crate::traffic::{Counters, StageGuard, TrafficRow};

#[cfg(feature = "mpi")]
pub(crate) use mpi::ffi;

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

/// Element types of reductions (`f64`, `f32`, `u64`, `i64`): numbers with a predefined MPI
/// datatype (rsmpi's `Equivalence`), so that MPI itself can add and compare them.
#[cfg(feature = "mpi")]
pub trait Reducible: Pod + PartialOrd + std::ops::Add<Output = Self> + Equivalence {}

/// Element types of reductions (`f64`, `f32`, `u64`, `i64`).
#[cfg(not(feature = "mpi"))]
pub trait Reducible: Pod + PartialOrd + std::ops::Add<Output = Self> {}

impl Reducible for f64 {}
impl Reducible for f32 {}
impl Reducible for u64 {}
impl Reducible for i64 {}

/// Serialises this process's MPI calls. parki-dist needs `MPI_THREAD_SERIALIZED` (checked by
/// [`Universe::init`](crate::Universe::init)): MPI may be called from any thread, never from two
/// at once. Every MPI call of this crate (except `MPI_Abort`) runs under this lock, so that two
/// threads sharing a [`Comm`] cannot break that rule, whatever they do. A blocking call (a
/// collective, a wait) holds the lock until it returns, so two threads that communicate at the
/// same time wait for each other, which can deadlock across ranks: parki-dist drives MPI from one
/// thread at a time (concurrent communication would need `MPI_THREAD_MULTIPLE` and no lock).
#[cfg(feature = "mpi")]
static MPI_LOCK: Mutex<()> = Mutex::new(());

#[cfg(feature = "mpi")]
pub(crate) fn mpi_serial() -> MutexGuard<'static, ()> {
    MPI_LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Panics, naming the call and MPI's description of the error, unless `code` is `MPI_SUCCESS`.
/// For the raw `ffi` calls left (rsmpi wraps the others); with MPI's default error handler
/// (`MPI_ERRORS_ARE_FATAL`) an error aborts inside MPI before this check, with
/// `MPI_ERRORS_RETURN` (set by an embedding code, say) it stops here. Called with the MPI lock
/// held (`MPI_Error_string` is an MPI call too).
#[cfg(feature = "mpi")]
pub(crate) fn mpi_check(code: std::os::raw::c_int, call: &str) {
    if code != ffi::MPI_SUCCESS as std::os::raw::c_int {
        panic!("{}", mpi_error_message(code, call));
    }
}

/// `"<call> failed: MPI error <code>: <MPI_Error_string>"`.
#[cfg(feature = "mpi")]
pub(crate) fn mpi_error_message(code: std::os::raw::c_int, call: &str) -> String {
    let mut buf = vec![0 as std::os::raw::c_char; ffi::MPI_MAX_ERROR_STRING as usize + 1];
    let mut len: std::os::raw::c_int = 0;
    // SAFETY: `buf` holds MPI_MAX_ERROR_STRING characters (plus one), as MPI_Error_string needs;
    // it writes the length to `len`.
    let rc = unsafe { ffi::MPI_Error_string(code, buf.as_mut_ptr(), &mut len) };
    let text = if rc == ffi::MPI_SUCCESS as std::os::raw::c_int {
        let n = (len.max(0) as usize).min(buf.len());
        let bytes: Vec<u8> = buf[..n].iter().map(|&c| c as u8).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    } else {
        format!("no description (MPI_Error_string returned {rc})")
    };
    format!("{call} failed: MPI error {code}: {text}")
}

/// Whether MPI is initialised and not yet finalised (MPI objects may be freed).
#[cfg(feature = "mpi")]
pub(crate) fn mpi_live() -> bool {
    mpi::environment::is_initialized() && !mpi::environment::is_finalized()
}

/// The rsmpi communicator behind a [`Comm`].
#[cfg(feature = "mpi")]
enum MpiComm {
    Simple(SimpleCommunicator),
    Cartesian(CartesianCommunicator),
}

#[cfg(feature = "mpi")]
impl MpiComm {
    fn get(&self) -> &dyn Communicator {
        match self {
            MpiComm::Simple(c) => c,
            MpiComm::Cartesian(c) => c,
        }
    }
}

/// The MPI communicator behind a [`Comm`] (none for a single process); freed on drop when this
/// process created it and MPI is still live, never when it was lent by [`Comm::from_raw`].
pub(crate) struct Handle {
    #[cfg(feature = "mpi")]
    comm: Option<MpiComm>,
    #[cfg(feature = "mpi")]
    owned: bool,
}

// SAFETY: the handle is an opaque MPI object (rsmpi's communicators are not Send because Open
// MPI's handles are raw pointers) that any thread may hold. Using it from another
// thread than the one that initialised MPI is allowed at the thread level `Universe::init`
// requires and checks, MPI_THREAD_SERIALIZED; calls from two threads at once are excluded
// because every MPI call of this crate holds `MPI_LOCK` (`mpi_serial`).
unsafe impl Send for Handle {}
// SAFETY: see Send: shared use only reaches MPI under `MPI_LOCK`.
unsafe impl Sync for Handle {}

impl Drop for Handle {
    fn drop(&mut self) {
        #[cfg(feature = "mpi")]
        if let Some(c) = self.comm.take() {
            if self.owned && mpi_live() {
                let _serial = mpi_serial();
                drop(c); // rsmpi frees a communicator this process created (MPI_Comm_free)
            } else {
                // lent by the embedding code, or MPI already finalised: nothing to free
                std::mem::forget(c);
            }
        }
    }
}

/// A committed contiguous MPI datatype of `size_of::<T>()` bytes (one element of a `Pod` type
/// `T`), freed on drop while MPI is live.
#[cfg(feature = "mpi")]
pub(crate) struct ElementType(Option<UserDatatype>);

#[cfg(feature = "mpi")]
impl ElementType {
    pub(crate) fn of<T: Pod>() -> Self {
        let bytes = count_i32(std::mem::size_of::<T>(), "element size in bytes");
        let _serial = mpi_serial();
        Self(Some(UserDatatype::contiguous(bytes, &u8::equivalent_datatype())))
    }

    pub(crate) fn get(&self) -> &UserDatatype {
        self.0.as_ref().expect("datatype present until drop")
    }
}

#[cfg(feature = "mpi")]
impl Drop for ElementType {
    fn drop(&mut self) {
        if let Some(d) = self.0.take() {
            if mpi_live() {
                let _serial = mpi_serial();
                drop(d); // MPI_Type_free
            } else {
                std::mem::forget(d);
            }
        }
    }
}

/// A group of processes and the collectives parki-dist needs. Cheap to clone; clones and
/// communicators split from it share one set of traffic counters.
#[derive(Clone)]
pub struct Comm {
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub(crate) handle: Arc<Handle>,
    rank: usize,
    size: usize,
    pub(crate) counters: Counters,
    cart: Option<Vec<usize>>,
}

impl std::fmt::Debug for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Comm {{ rank: {}, size: {}, cart: {:?} }}", self.rank, self.size, self.cart)
    }
}

#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) fn count_i32(v: usize, what: &str) -> i32 {
    i32::try_from(v).unwrap_or_else(|_| panic!("{what} = {v} exceeds MPI's int range"))
}

/// Displacements (exclusive prefix sums) of `counts`, each checked to fit MPI's int.
#[cfg(feature = "mpi")]
fn displacements(counts: &[usize], what: &str) -> Vec<i32> {
    let mut d = Vec::with_capacity(counts.len());
    let mut acc = 0usize;
    for &v in counts {
        d.push(count_i32(acc, what));
        acc += v;
    }
    d
}

impl Comm {
    /// The communicator of this process alone (rank 0 of 1); collectives copy locally.
    pub fn single() -> Self {
        Self {
            handle: Arc::new(Handle {
                #[cfg(feature = "mpi")]
                comm: None,
                #[cfg(feature = "mpi")]
                owned: false,
            }),
            rank: 0,
            size: 1,
            counters: Counters::default(),
            cart: None,
        }
    }

    /// `MPI_COMM_WORLD` (MPI initialised).
    #[cfg(feature = "mpi")]
    pub(crate) fn world() -> Self {
        Self::wrap(MpiComm::Simple(SimpleCommunicator::world()), false, None)
    }

    /// Wraps a raw MPI intra-communicator (not freed by parki-dist), e.g. the communicator of a
    /// code that embeds the library.
    ///
    /// # Safety
    /// MPI must be initialised (at `MPI_THREAD_SERIALIZED` or above, see
    /// [`Universe::init`](crate::Universe::init)), and `raw` must be a valid intra-communicator
    /// (not an inter-communicator) for as long as the returned `Comm` and its clones live.
    ///
    /// # Panics
    /// If `raw` is `MPI_COMM_NULL` or an inter-communicator.
    #[cfg(feature = "mpi")]
    pub unsafe fn from_raw(raw: ffi::MPI_Comm) -> Self {
        // SAFETY: predefined handle values, readable after MPI_Init.
        let (null, world, own) = unsafe { (ffi::RSMPI_COMM_NULL, ffi::RSMPI_COMM_WORLD, ffi::RSMPI_COMM_SELF) };
        assert!(raw != null, "Comm::from_raw: the communicator is MPI_COMM_NULL");
        let comm = if raw == world {
            SimpleCommunicator::world()
        } else if raw == own {
            SimpleCommunicator::self_comm()
        } else {
            let _serial = mpi_serial();
            // SAFETY: `raw` is a live intra-communicator (caller's contract) other than the
            // predefined ones (compared above); rsmpi never frees it because the handle is not
            // owned (see Handle::drop, which forgets it).
            unsafe { SimpleCommunicator::from_raw(raw) }
        };
        let inter = {
            let _serial = mpi_serial();
            comm.test_inter()
        };
        if inter {
            std::mem::forget(comm);
            panic!("Comm::from_raw: an inter-communicator; parki-dist needs an intra-communicator");
        }
        Self::wrap(MpiComm::Simple(comm), false, None)
    }

    #[cfg(feature = "mpi")]
    fn wrap(comm: MpiComm, owned: bool, cart: Option<Vec<usize>>) -> Self {
        let (rank, size) = {
            let _serial = mpi_serial();
            (comm.get().rank(), comm.get().size())
        };
        Self {
            handle: Arc::new(Handle { comm: Some(comm), owned }),
            rank: usize::try_from(rank).expect("MPI ranks are non-negative"),
            size: usize::try_from(size).expect("MPI sizes are non-negative"),
            counters: Counters::default(),
            cart,
        }
    }

    /// The rsmpi communicator when there is more than one process.
    #[cfg(feature = "mpi")]
    fn mpi(&self) -> Option<&dyn Communicator> {
        self.handle.comm.as_ref().map(MpiComm::get).filter(|_| self.size > 1)
    }

    /// The raw MPI handle (`None` for a single process without MPI), e.g. for FFTW-MPI.
    #[cfg(feature = "mpi")]
    pub fn as_raw(&self) -> Option<ffi::MPI_Comm> {
        self.handle.comm.as_ref().map(|c| c.get().as_raw())
    }

    /// Runs `f` with the raw MPI handle while holding this process's MPI lock, for a library
    /// that calls MPI itself on this communicator (Zoltan); `None` for a single process without
    /// MPI. `f` must not call back into this crate (the lock is not re-entrant).
    #[cfg(feature = "mpi")]
    pub fn with_raw_locked<R>(&self, f: impl FnOnce(ffi::MPI_Comm) -> R) -> Option<R> {
        let raw = self.as_raw()?;
        let t = Instant::now();
        let r = {
            let _serial = mpi_serial();
            f(raw)
        };
        self.counters.add(0, 0, t);
        Some(r)
    }

    /// This process's rank in `0..size()`.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of processes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Counts the communication that follows under `stage` (any method's [`StageKind`]
    /// value, or its [`StageName`]) until the guard is dropped.
    ///
    /// [`StageKind`]: parki_core::StageKind
    pub fn stage(&self, stage: impl Into<StageName>) -> StageGuard {
        let previous = self.counters.set_stage(stage.into().as_str());
        StageGuard { counters: self.counters.clone(), previous }
    }

    /// Bytes, messages and seconds per stage since the last reset, in order of first use.
    pub fn traffic(&self) -> Vec<(String, TrafficRow)> {
        self.counters.rows()
    }

    /// Clears the traffic counters.
    pub fn reset_traffic(&self) {
        self.counters.reset()
    }

    /// Splits into sub-communicators of the ranks with equal `color`, ordered by `key` then rank.
    /// The children share this communicator's traffic counters.
    pub fn split(&self, color: usize, key: usize) -> Comm {
        #[cfg(feature = "mpi")]
        if let Some(comm) = self.handle.comm.as_ref() {
            let (color, key) = (count_i32(color, "color"), count_i32(key, "key"));
            let out = {
                let _serial = mpi_serial();
                comm.get().split_by_color_with_key(Color::with_value(color), key)
            };
            let out = out.expect("MPI_Comm_split with a defined colour returns a communicator");
            let mut c = Self::wrap(MpiComm::Simple(out), true, None);
            c.counters = self.counters.clone();
            return c;
        }
        let _ = (color, key);
        self.clone()
    }

    /// A Cartesian communicator of `dims` (product = `size()`), periodic in every direction, rank
    /// order kept (row-major: the last coordinate varies fastest, as `MPI_Cart_create`).
    ///
    /// # Errors
    /// [`Error::OutOfRange`] (field `parallel.grid`) when `dims` is empty or its product is not
    /// the rank count.
    pub fn cartesian(&self, dims: &[usize]) -> Result<Comm> {
        let total: usize = dims.iter().product();
        if total != self.size || dims.is_empty() {
            return Err(Error::OutOfRange {
                field: "parallel.grid".into(),
                value: format!("{dims:?}"),
                allowed: format!("process-grid dimensions whose product is the rank count {}", self.size),
            });
        }
        #[cfg(feature = "mpi")]
        if let Some(comm) = self.handle.comm.as_ref() {
            let d: Vec<i32> = dims.iter().map(|&v| count_i32(v, "dims")).collect();
            let periods = vec![true; dims.len()];
            let out = {
                let _serial = mpi_serial();
                comm.get().create_cartesian_communicator(&d, &periods, false)
            };
            let out = out.expect("MPI_Cart_create over all ranks returns a communicator on every rank");
            let mut c = Self::wrap(MpiComm::Cartesian(out), true, Some(dims.to_vec()));
            c.counters = self.counters.clone();
            return Ok(c);
        }
        let mut c = self.clone();
        c.cart = Some(dims.to_vec());
        Ok(c)
    }

    /// Dimensions of a Cartesian communicator.
    pub fn cart_dims(&self) -> Option<&[usize]> {
        self.cart.as_deref()
    }

    /// Coordinates of `rank` in a Cartesian communicator (row-major, last fastest).
    pub fn cart_coords(&self, rank: usize) -> Option<Vec<usize>> {
        let dims = self.cart.as_ref()?;
        let mut c = vec![0; dims.len()];
        let mut r = rank;
        for (k, &d) in dims.iter().enumerate().rev() {
            c[k] = r % d;
            r /= d;
        }
        Some(c)
    }

    /// Rank of the process at `coords` (wrapped periodically) in a Cartesian communicator.
    pub fn cart_rank(&self, coords: &[i64]) -> Option<usize> {
        let dims = self.cart.as_ref()?;
        let mut r = 0usize;
        for (&c, &d) in coords.iter().zip(dims) {
            r = r * d + c.rem_euclid(d as i64) as usize;
        }
        Some(r)
    }

    /// Waits for all processes.
    pub fn barrier(&self) {
        #[cfg(feature = "mpi")]
        if let Some(comm) = self.handle.comm.as_ref() {
            let _serial = mpi_serial();
            comm.get().barrier();
        }
    }

    /// In-place all-reduce of `values` with `op`.
    pub fn all_reduce<T: Reducible>(&self, values: &mut [T], op: ReduceOp) {
        #[cfg(feature = "mpi")]
        if let Some(comm) = self.mpi() {
            let t = Instant::now();
            count_i32(values.len(), "all_reduce length");
            let send = values.to_vec();
            let o = match op {
                ReduceOp::Sum => SystemOperation::sum(),
                ReduceOp::Min => SystemOperation::min(),
                ReduceOp::Max => SystemOperation::max(),
            };
            {
                let _serial = mpi_serial();
                comm.all_reduce_into(&send[..], values, o);
            }
            self.counters.add(std::mem::size_of_val(values) as u64, 1, t);
        }
        let _ = (values, op);
    }

    /// In-place all-reduce of `f64` values.
    pub fn all_reduce_f64(&self, values: &mut [f64], op: ReduceOp) {
        self.all_reduce(values, op)
    }

    /// Sum of one value over all ranks.
    pub fn sum<T: Reducible>(&self, v: T) -> T {
        let mut a = [v];
        self.all_reduce(&mut a, ReduceOp::Sum);
        a[0]
    }

    /// Maximum of one value over all ranks.
    pub fn max<T: Reducible>(&self, v: T) -> T {
        let mut a = [v];
        self.all_reduce(&mut a, ReduceOp::Max);
        a[0]
    }

    /// Minimum of one value over all ranks.
    pub fn min<T: Reducible>(&self, v: T) -> T {
        let mut a = [v];
        self.all_reduce(&mut a, ReduceOp::Min);
        a[0]
    }

    /// Gathers `local` (the same length on every rank) from all ranks, in rank order.
    pub fn all_gather<T: Pod>(&self, local: &[T]) -> Vec<T> {
        let mut out = vec![local[0]; local.len() * self.size];
        #[cfg(feature = "mpi")]
        if let Some(comm) = self.mpi() {
            let t = Instant::now();
            let n = count_i32(std::mem::size_of_val(local), "all_gather bytes");
            count_i32(std::mem::size_of_val(&out[..]), "all_gather total bytes");
            {
                let _serial = mpi_serial();
                comm.all_gather_into(as_bytes(local), as_bytes_mut(&mut out));
            }
            self.counters.add(n as u64 * (self.size as u64 - 1), self.size as u64 - 1, t);
            return out;
        }
        out.copy_from_slice(local);
        out
    }

    /// Broadcasts `data` from `root` (its length too, which may be 0) to every rank.
    pub fn broadcast_bytes(&self, root: usize, data: &mut Vec<u8>) {
        #[cfg(feature = "mpi")]
        if let Some(comm) = self.mpi() {
            let t = Instant::now();
            let root_i32 = count_i32(root, "broadcast root");
            let mut len = [data.len() as u64];
            {
                let _serial = mpi_serial();
                let from = comm.process_at_rank(root_i32);
                from.broadcast_into(&mut len[..]);
                data.resize(len[0] as usize, 0);
                count_i32(data.len(), "broadcast bytes");
                // an empty buffer is a null pointer to MPI (MPI_ERR_ARG): its length said all
                if !data.is_empty() {
                    from.broadcast_into(&mut data[..]);
                }
            }
            let sent = if self.rank == root { data.len() as u64 } else { 0 };
            self.counters.add(sent, u64::from(self.rank == root), t);
        }
        let _ = (root, data);
    }

    /// Exchanges one count per rank: returns what every rank sends to this one.
    pub fn alltoall_counts(&self, send: &[usize]) -> Vec<usize> {
        assert_eq!(send.len(), self.size, "alltoall_counts: one count per rank");
        #[cfg(feature = "mpi")]
        if let Some(comm) = self.mpi() {
            let t = Instant::now();
            let s: Vec<u64> = send.iter().map(|&v| v as u64).collect();
            let mut r = vec![0u64; self.size];
            {
                let _serial = mpi_serial();
                comm.all_to_all_into(&s[..], &mut r[..]);
            }
            self.counters.add(8 * (self.size as u64 - 1), self.size as u64 - 1, t);
            return r.into_iter().map(|v| v as usize).collect();
        }
        send.to_vec()
    }

    /// All-to-all-v with known counts: `send` holds `send_counts[r]` elements for rank `r`, back
    /// to back in rank order; `recv` receives `recv_counts[r]` from rank `r`, likewise.
    ///
    /// # Panics
    /// If the counts do not describe the buffers, or a count, displacement or buffer length (in
    /// elements) exceeds MPI's int range.
    pub fn alltoallv_known<T: Pod>(&self, send: &[T], send_counts: &[usize], recv: &mut [T], recv_counts: &[usize]) {
        assert_eq!(send_counts.len(), self.size, "alltoallv: one send count per rank");
        assert_eq!(recv_counts.len(), self.size, "alltoallv: one receive count per rank");
        assert_eq!(send.len(), send_counts.iter().sum::<usize>(), "alltoallv: send length");
        assert_eq!(recv.len(), recv_counts.iter().sum::<usize>(), "alltoallv: receive length");
        #[cfg(feature = "mpi")]
        if let Some(comm) = self.mpi() {
            let t = Instant::now();
            let sc: Vec<i32> = send_counts.iter().map(|&v| count_i32(v, "alltoallv count")).collect();
            let rc: Vec<i32> = recv_counts.iter().map(|&v| count_i32(v, "alltoallv count")).collect();
            let sd = displacements(send_counts, "alltoallv displacement");
            let rd = displacements(recv_counts, "alltoallv displacement");
            let (sn, rn) =
                (count_i32(send.len(), "alltoallv send length"), count_i32(recv.len(), "alltoallv receive length"));
            let dt = ElementType::of::<T>();
            // SAFETY: the datatype is `size_of::<T>()` contiguous bytes, one element of the byte
            // view of `send` (`recv`), whose length is exactly `sn` (`rn`) such elements; T is Pod
            // (no padding, every bit pattern valid).
            let (sv, mut rv) = unsafe {
                (
                    View::with_count_and_datatype(as_bytes(send), sn, dt.get()),
                    MutView::with_count_and_datatype(as_bytes_mut(recv), rn, dt.get()),
                )
            };
            {
                let s = Partition::new(&sv, &sc[..], &sd[..]);
                let mut r = PartitionMut::new(&mut rv, &rc[..], &rd[..]);
                let _serial = mpi_serial();
                comm.all_to_all_varcount_into(&s, &mut r);
            }
            let (bytes, msgs) = send_counts
                .iter()
                .enumerate()
                .filter(|&(r, &c)| r != self.rank && c > 0)
                .fold((0u64, 0u64), |(b, m), (_, &c)| (b + (c * std::mem::size_of::<T>()) as u64, m + 1));
            self.counters.add(bytes, msgs, t);
            return;
        }
        recv.copy_from_slice(send);
    }

    /// Gathers `local` (any length on each rank) from all ranks, in rank order, on every rank:
    /// an all-to-all-v that sends `local` to every rank.
    pub fn all_gatherv<T: Pod + Default>(&self, local: &[T]) -> Vec<T> {
        let send: Vec<T> = (0..self.size).flat_map(|_| local.iter().copied()).collect();
        let mut out = Vec::new();
        self.alltoallv(&send, &vec![local.len(); self.size], &mut out);
        out
    }

    /// All-to-all-v that first exchanges the counts; returns the receive counts per rank.
    pub fn alltoallv<T: Pod + Default>(&self, send: &[T], send_counts: &[usize], recv: &mut Vec<T>) -> Vec<usize> {
        let recv_counts = self.alltoall_counts(send_counts);
        recv.clear();
        recv.resize(recv_counts.iter().sum(), T::default());
        self.alltoallv_known(send, send_counts, recv, &recv_counts);
        recv_counts
    }

    /// Sparse exchange with known sizes: sends `sends[k].1` to rank `sends[k].0` and receives
    /// into `recvs[k].1` from rank `recvs[k].0`, all at once (non-blocking, then wait for all).
    /// A rank may appear more than once; messages between one pair match in list order. Self
    /// messages are copies.
    pub fn exchange<T: Pod>(&self, sends: &[(usize, &[T])], recvs: &mut [(usize, &mut [T])]) {
        // self messages: k-th send to self goes to the k-th receive from self
        let own_s: Vec<usize> = (0..sends.len()).filter(|&k| sends[k].0 == self.rank).collect();
        let own_r: Vec<usize> = (0..recvs.len()).filter(|&k| recvs[k].0 == self.rank).collect();
        assert_eq!(own_s.len(), own_r.len(), "exchange: self sends and receives must pair up");
        for (&s, &r) in own_s.iter().zip(&own_r) {
            recvs[r].1.copy_from_slice(sends[s].1);
        }
        #[cfg(feature = "mpi")]
        if let Some(comm) = self.mpi() {
            const TAG: i32 = 7;
            let t = Instant::now();
            let (mut bytes, mut msgs) = (0u64, 0u64);
            let me = self.rank;
            let peer = |p: usize| comm.process_at_rank(count_i32(p, "exchange peer"));
            let recv_bufs: Vec<(usize, &mut [u8])> =
                recvs.iter_mut().filter(|(p, _)| *p != me).map(|(p, b)| (*p, as_bytes_mut(b))).collect();
            let send_bufs: Vec<(usize, &[u8])> =
                sends.iter().filter(|(p, _)| *p != me).map(|(p, b)| (*p, as_bytes(b))).collect();
            for (_, b) in &recv_bufs {
                count_i32(b.len(), "message bytes");
            }
            for (_, b) in &send_bufs {
                count_i32(b.len(), "message bytes");
                bytes += b.len() as u64;
                msgs += 1;
            }
            multiple_scope(recv_bufs.len() + send_bufs.len(), |scope, all: &mut RequestCollection<'_, [u8]>| {
                let _serial = mpi_serial();
                for (p, b) in recv_bufs {
                    all.add(peer(p).immediate_receive_into_with_tag(scope, b, TAG));
                }
                for (p, b) in send_bufs {
                    all.add(peer(p).immediate_send_with_tag(scope, b, TAG));
                }
                let mut done = Vec::with_capacity(all.incomplete());
                all.wait_all(&mut done);
            });
            self.counters.add(bytes, msgs, t);
            return;
        }
        assert!(
            sends.iter().all(|s| s.0 == self.rank) && recvs.iter().all(|r| r.0 == self.rank),
            "exchange: a single process can only talk to itself"
        );
    }

    /// Neighbour exchange of variable-sized messages: `sends[k]` goes to `peers[k]`, and the
    /// message from `peers[k]` is returned at position `k` (sizes are exchanged first, with the
    /// peers only). Every peer relation must be symmetric.
    pub fn neighbour_exchange<T: Pod + Default>(&self, peers: &[usize], sends: &[Vec<T>]) -> Vec<Vec<T>> {
        assert_eq!(peers.len(), sends.len(), "neighbour_exchange: one message per peer");
        let counts: Vec<[u64; 1]> = sends.iter().map(|s| [s.len() as u64]).collect();
        let mut rcounts = vec![[0u64; 1]; peers.len()];
        {
            let s: Vec<(usize, &[[u64; 1]])> =
                peers.iter().zip(&counts).map(|(&p, c)| (p, std::slice::from_ref(c))).collect();
            let mut r: Vec<(usize, &mut [[u64; 1]])> =
                peers.iter().zip(rcounts.iter_mut()).map(|(&p, c)| (p, std::slice::from_mut(c))).collect();
            self.exchange(&s, &mut r);
        }
        let mut out: Vec<Vec<T>> = rcounts.iter().map(|c| vec![T::default(); c[0] as usize]).collect();
        {
            let s: Vec<(usize, &[T])> = peers.iter().zip(sends).map(|(&p, v)| (p, &v[..])).collect();
            let mut r: Vec<(usize, &mut [T])> =
                peers.iter().zip(out.iter_mut()).map(|(&p, v)| (p, &mut v[..])).collect();
            self.exchange(&s, &mut r);
        }
        out
    }

    /// Makes every rank agree on the outcome of a step: if any rank holds an error, every rank
    /// returns the error of the lowest such rank (its message prefixed by the rank when it came
    /// from another rank), so that all ranks stop together instead of some waiting forever.
    pub fn agree<T>(&self, r: Result<T>) -> Result<T> {
        if self.size == 1 {
            return r;
        }
        let me = if r.is_err() { self.rank as u64 } else { u64::MAX };
        let first = self.min(me);
        if first == u64::MAX {
            return r;
        }
        let mut msg = match &r {
            Err(e) if first == self.rank as u64 => e.to_string().into_bytes(),
            _ => Vec::new(),
        };
        self.broadcast_bytes(first as usize, &mut msg);
        match r {
            Err(e) if first == self.rank as u64 => Err(e),
            _ => Err(Error::Remote { rank: first as usize, message: String::from_utf8_lossy(&msg).into_owned() }),
        }
    }

    /// Aborts every process of the job with `code` (MPI_Abort on the world), or exits this one.
    pub fn abort(&self, code: i32) -> ! {
        #[cfg(feature = "mpi")]
        if mpi_live() {
            // no MPI_LOCK: aborting must work even from a thread that holds it
            SimpleCommunicator::world().abort(code);
        }
        std::process::exit(code)
    }
}
