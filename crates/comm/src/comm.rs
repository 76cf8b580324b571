//! [`Comm`]: a communicator over MPI (feature `mpi`) or a single process, with typed collectives,
//! all-to-all-v, neighbour exchange and error agreement. Every call made through it is counted
//! under the current stage name ([`Comm::stage`]).

use std::sync::Arc;
#[cfg(feature = "mpi")]
use std::time::Instant;

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

/// Element types of reductions.
pub trait Reducible: Pod + PartialOrd + std::ops::Add<Output = Self> {
    /// The MPI datatype.
    #[cfg(feature = "mpi")]
    #[doc(hidden)]
    fn datatype() -> ffi::MPI_Datatype;
}

macro_rules! reducible {
    ($t:ty, $dt:ident) => {
        impl Reducible for $t {
            #[cfg(feature = "mpi")]
            fn datatype() -> ffi::MPI_Datatype {
                // SAFETY: a predefined datatype handle, valid after MPI_Init.
                unsafe { ffi::$dt }
            }
        }
    };
}
reducible!(f64, RSMPI_DOUBLE);
reducible!(f32, RSMPI_FLOAT);
reducible!(u64, RSMPI_UINT64_T);
reducible!(i64, RSMPI_INT64_T);

/// The MPI handle behind a [`Comm`]; freed on drop when this process created it.
pub(crate) struct Handle {
    #[cfg(feature = "mpi")]
    pub(crate) raw: Option<ffi::MPI_Comm>,
    #[cfg(feature = "mpi")]
    owned: bool,
}

// SAFETY: an MPI communicator handle is an opaque value; parki-dist calls MPI from one thread
// at a time (MPI_THREAD_FUNNELED), which `&mut`/ownership of the calling structures ensures.
unsafe impl Send for Handle {}
// SAFETY: see Send.
unsafe impl Sync for Handle {}

#[cfg(feature = "mpi")]
pub(crate) fn mpi_live() -> bool {
    let (mut init, mut fin) = (0, 0);
    // SAFETY: both queries may be called at any time.
    unsafe {
        ffi::MPI_Initialized(&mut init);
        ffi::MPI_Finalized(&mut fin);
    }
    init != 0 && fin == 0
}

impl Drop for Handle {
    fn drop(&mut self) {
        #[cfg(feature = "mpi")]
        if let (Some(mut raw), true) = (self.raw, self.owned) {
            if mpi_live() {
                // SAFETY: a communicator this process created and frees once.
                unsafe { ffi::MPI_Comm_free(&mut raw) };
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
fn count_i32(v: usize, what: &str) -> i32 {
    i32::try_from(v).unwrap_or_else(|_| panic!("{what} = {v} exceeds MPI's int range"))
}

impl Comm {
    /// The communicator of this process alone (rank 0 of 1); collectives copy locally.
    pub fn single() -> Self {
        Self {
            handle: Arc::new(Handle {
                #[cfg(feature = "mpi")]
                raw: None,
                #[cfg(feature = "mpi")]
                owned: false,
            }),
            rank: 0,
            size: 1,
            counters: Counters::default(),
            cart: None,
        }
    }

    /// Wraps a raw MPI communicator (not freed by parki-dist), e.g. the communicator of a code
    /// that embeds the library.
    ///
    /// # Safety
    /// `raw` must be a valid communicator for as long as the returned `Comm` and its clones live.
    #[cfg(feature = "mpi")]
    pub unsafe fn from_raw(raw: ffi::MPI_Comm) -> Self {
        Self::wrap(raw, false, None)
    }

    #[cfg(feature = "mpi")]
    fn wrap(raw: ffi::MPI_Comm, owned: bool, cart: Option<Vec<usize>>) -> Self {
        let (mut rank, mut size) = (0, 0);
        // SAFETY: `raw` is a valid communicator.
        unsafe {
            ffi::MPI_Comm_rank(raw, &mut rank);
            ffi::MPI_Comm_size(raw, &mut size);
        }
        Self {
            handle: Arc::new(Handle { raw: Some(raw), owned }),
            rank: rank as usize,
            size: size as usize,
            counters: Counters::default(),
            cart,
        }
    }

    /// The raw MPI handle (`None` for a single process without MPI).
    #[cfg(feature = "mpi")]
    pub fn as_raw(&self) -> Option<ffi::MPI_Comm> {
        self.handle.raw
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
        if let Some(raw) = self.handle.raw {
            // SAFETY: RSMPI_COMM_NULL is a valid handle value to be overwritten.
            let mut out = unsafe { ffi::RSMPI_COMM_NULL };
            // SAFETY: collective on a valid communicator.
            unsafe { ffi::MPI_Comm_split(raw, count_i32(color, "color"), count_i32(key, "key"), &mut out) };
            let mut c = Self::wrap(out, true, None);
            c.counters = self.counters.clone();
            return c;
        }
        let _ = (color, key);
        self.clone()
    }

    /// A Cartesian communicator of `dims` (product = `size()`), periodic in every direction, rank
    /// order kept (row-major: the last coordinate varies fastest, as `MPI_Cart_create`).
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
        if let Some(raw) = self.handle.raw {
            let d: Vec<i32> = dims.iter().map(|&v| count_i32(v, "dims")).collect();
            let periods = vec![1i32; dims.len()];
            // SAFETY: as in `split`.
            let mut out = unsafe { ffi::RSMPI_COMM_NULL };
            // SAFETY: collective; arrays of length dims.len().
            unsafe { ffi::MPI_Cart_create(raw, d.len() as i32, d.as_ptr(), periods.as_ptr(), 0, &mut out) };
            let mut c = Self::wrap(out, true, Some(dims.to_vec()));
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
        if let Some(raw) = self.handle.raw {
            // SAFETY: collective on a valid communicator.
            unsafe { ffi::MPI_Barrier(raw) };
        }
    }

    /// In-place all-reduce of `values` with `op`.
    pub fn all_reduce<T: Reducible>(&self, values: &mut [T], op: ReduceOp) {
        #[cfg(feature = "mpi")]
        if let (Some(raw), true) = (self.handle.raw, self.size > 1) {
            let t = Instant::now();
            let send = values.to_vec();
            // SAFETY: predefined handles; reduction of `values.len()` elements.
            unsafe {
                let o = match op {
                    ReduceOp::Sum => ffi::RSMPI_SUM,
                    ReduceOp::Min => ffi::RSMPI_MIN,
                    ReduceOp::Max => ffi::RSMPI_MAX,
                };
                ffi::MPI_Allreduce(
                    send.as_ptr() as *const _,
                    values.as_mut_ptr() as *mut _,
                    count_i32(values.len(), "all_reduce length"),
                    T::datatype(),
                    o,
                    raw,
                );
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
        if let (Some(raw), true) = (self.handle.raw, self.size > 1) {
            let t = Instant::now();
            let n = count_i32(std::mem::size_of_val(local), "all_gather bytes");
            // SAFETY: `out` holds size * len elements; byte datatype.
            unsafe {
                ffi::MPI_Allgather(
                    local.as_ptr() as *const _,
                    n,
                    ffi::RSMPI_UINT8_T,
                    out.as_mut_ptr() as *mut _,
                    n,
                    ffi::RSMPI_UINT8_T,
                    raw,
                );
            }
            self.counters.add(n as u64 * (self.size as u64 - 1), self.size as u64 - 1, t);
            return out;
        }
        out.copy_from_slice(local);
        out
    }

    /// Broadcasts `data` from `root` (its length too) to every rank.
    pub fn broadcast_bytes(&self, root: usize, data: &mut Vec<u8>) {
        #[cfg(feature = "mpi")]
        if let (Some(raw), true) = (self.handle.raw, self.size > 1) {
            let t = Instant::now();
            let mut len = [data.len() as u64];
            // SAFETY: collective; buffers sized before each call.
            unsafe {
                ffi::MPI_Bcast(len.as_mut_ptr() as *mut _, 1, ffi::RSMPI_UINT64_T, root as i32, raw);
                data.resize(len[0] as usize, 0);
                ffi::MPI_Bcast(
                    data.as_mut_ptr() as *mut _,
                    count_i32(data.len(), "broadcast bytes"),
                    ffi::RSMPI_UINT8_T,
                    root as i32,
                    raw,
                );
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
        if let (Some(raw), true) = (self.handle.raw, self.size > 1) {
            let t = Instant::now();
            let s: Vec<u64> = send.iter().map(|&v| v as u64).collect();
            let mut r = vec![0u64; self.size];
            // SAFETY: one u64 to and from every rank.
            unsafe {
                ffi::MPI_Alltoall(
                    s.as_ptr() as *const _,
                    1,
                    ffi::RSMPI_UINT64_T,
                    r.as_mut_ptr() as *mut _,
                    1,
                    ffi::RSMPI_UINT64_T,
                    raw,
                );
            }
            self.counters.add(8 * (self.size as u64 - 1), self.size as u64 - 1, t);
            return r.into_iter().map(|v| v as usize).collect();
        }
        send.to_vec()
    }

    /// All-to-all-v with known counts: `send` holds `send_counts[r]` elements for rank `r`, back
    /// to back in rank order; `recv` receives `recv_counts[r]` from rank `r`, likewise.
    pub fn alltoallv_known<T: Pod>(&self, send: &[T], send_counts: &[usize], recv: &mut [T], recv_counts: &[usize]) {
        assert_eq!(send_counts.len(), self.size, "alltoallv: one send count per rank");
        assert_eq!(recv_counts.len(), self.size, "alltoallv: one receive count per rank");
        assert_eq!(send.len(), send_counts.iter().sum::<usize>(), "alltoallv: send length");
        assert_eq!(recv.len(), recv_counts.iter().sum::<usize>(), "alltoallv: receive length");
        #[cfg(feature = "mpi")]
        if let (Some(raw), true) = (self.handle.raw, self.size > 1) {
            let t = Instant::now();
            let displs = |c: &[usize]| -> Vec<i32> {
                let mut d = Vec::with_capacity(c.len());
                let mut acc = 0usize;
                for &v in c {
                    d.push(count_i32(acc, "alltoallv displacement"));
                    acc += v;
                }
                d
            };
            let sc: Vec<i32> = send_counts.iter().map(|&v| count_i32(v, "alltoallv count")).collect();
            let rc: Vec<i32> = recv_counts.iter().map(|&v| count_i32(v, "alltoallv count")).collect();
            let (sd, rd) = (displs(send_counts), displs(recv_counts));
            let dt = ElementType::<T>::new();
            // SAFETY: counts and displacements describe `send` and `recv` exactly (asserted).
            unsafe {
                ffi::MPI_Alltoallv(
                    send.as_ptr() as *const _,
                    sc.as_ptr(),
                    sd.as_ptr(),
                    dt.raw,
                    recv.as_mut_ptr() as *mut _,
                    rc.as_ptr(),
                    rd.as_ptr(),
                    dt.raw,
                    raw,
                );
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
        if let (Some(raw), true) = (self.handle.raw, self.size > 1) {
            let t = Instant::now();
            let mut reqs = Vec::with_capacity(sends.len() + recvs.len());
            let (mut bytes, mut msgs) = (0u64, 0u64);
            // SAFETY: every buffer outlives the requests, which complete before returning.
            unsafe {
                for (peer, buf) in recvs.iter_mut().filter(|(p, _)| *p != self.rank) {
                    let b = as_bytes_mut(buf);
                    let mut rq = ffi::RSMPI_REQUEST_NULL;
                    ffi::MPI_Irecv(
                        b.as_mut_ptr() as *mut _,
                        count_i32(b.len(), "message bytes"),
                        ffi::RSMPI_UINT8_T,
                        *peer as i32,
                        7,
                        raw,
                        &mut rq,
                    );
                    reqs.push(rq);
                }
                for (peer, buf) in sends.iter().filter(|(p, _)| *p != self.rank) {
                    let b = as_bytes(buf);
                    let mut rq = ffi::RSMPI_REQUEST_NULL;
                    ffi::MPI_Isend(
                        b.as_ptr() as *const _,
                        count_i32(b.len(), "message bytes"),
                        ffi::RSMPI_UINT8_T,
                        *peer as i32,
                        7,
                        raw,
                        &mut rq,
                    );
                    reqs.push(rq);
                    bytes += b.len() as u64;
                    msgs += 1;
                }
                ffi::MPI_Waitall(reqs.len() as i32, reqs.as_mut_ptr(), ffi::RSMPI_STATUSES_IGNORE);
            }
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
            // SAFETY: aborting is always allowed once MPI is initialised.
            unsafe { ffi::MPI_Abort(ffi::RSMPI_COMM_WORLD, code) };
        }
        std::process::exit(code)
    }
}

/// A contiguous MPI datatype of one `T` (its bytes), freed on drop.
#[cfg(feature = "mpi")]
pub(crate) struct ElementType<T> {
    pub(crate) raw: ffi::MPI_Datatype,
    _t: std::marker::PhantomData<T>,
}

#[cfg(feature = "mpi")]
impl<T: Pod> ElementType<T> {
    pub(crate) fn new() -> Self {
        // SAFETY: builds and commits a contiguous type of size_of::<T>() bytes.
        unsafe {
            let mut raw = ffi::RSMPI_DATATYPE_NULL;
            ffi::MPI_Type_contiguous(std::mem::size_of::<T>() as i32, ffi::RSMPI_UINT8_T, &mut raw);
            ffi::MPI_Type_commit(&mut raw);
            Self { raw, _t: std::marker::PhantomData }
        }
    }
}

#[cfg(feature = "mpi")]
impl<T> Drop for ElementType<T> {
    fn drop(&mut self) {
        if mpi_live() {
            // SAFETY: created by `new`, freed once.
            unsafe { ffi::MPI_Type_free(&mut self.raw) };
        }
    }
}
