//! [`ExchangePlan`]: a fixed pattern of blocks between ranks (a topology switch, a ghost-grid
//! exchange), planned once and executed many times, forward or backward, by one of two backends
//! chosen at run time:
//!
//! - [`Backend::Alltoallv`]: pack every block, one `MPI_Alltoallv`, unpack every block;
//! - [`Backend::Persistent`]: persistent requests made once (`MPI_Send_init` / `MPI_Recv_init`
//!   on both buffers, for both directions, as FLUPS §4.5(b)); at each call the receives start,
//!   each block is packed and its send started at once, the self block is unpacked, then every
//!   block is unpacked as soon as `MPI_Waitany` returns it, while the others are in flight.
//!
//! The plan owns both buffers (`A` and `B`): forward sends from `A` and receives into `B`,
//! backward the reverse, through the same buffers and requests in opposite roles. The self
//! block, which no message carries, is held once, at the end of `B`: it is packed there and
//! unpacked from there in both directions, so the buffers hold the local block 1.5 times on
//! two ranks instead of twice.
//!
//! rsmpi 0.8 has no persistent requests, so the persistent backend calls `MPI_Send_init`,
//! `MPI_Recv_init`, `MPI_Start`, `MPI_Startall`, `MPI_Waitany`, `MPI_Waitall` and
//! `MPI_Request_free` through its `ffi`, each under the crate's MPI lock and with its return code
//! checked (a failure panics with the call's name and MPI's error string).

use std::time::Instant;

#[cfg(feature = "mpi")]
use mpi::traits::AsRaw;

use crate::comm::Comm;
#[cfg(feature = "mpi")]
use crate::comm::{count_i32, ffi, mpi_check, mpi_live, mpi_serial, ElementType};
use crate::pod::Pod;

/// How the blocks of an exchange travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Backend {
    /// One `MPI_Alltoallv` per call.
    #[default]
    Alltoallv,
    /// Persistent non-blocking point-to-point, unpacking blocks as they arrive.
    Persistent,
}

impl Backend {
    /// Name used in configuration files and reports.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Alltoallv => "alltoallv",
            Backend::Persistent => "persistent",
        }
    }

    /// Parses a name of [`name`](Self::name).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "alltoallv" => Some(Backend::Alltoallv),
            "persistent" | "p2p" => Some(Backend::Persistent),
            _ => None,
        }
    }
}

/// Direction of an exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// From buffer `A` to buffer `B`.
    Forward,
    /// From buffer `B` to buffer `A`.
    Backward,
}

/// One side's blocks: the peers' blocks contiguous in rank order from offset 0 (the layout
/// `MPI_Alltoallv` sees, with a zero count for this rank), then the self block when this side
/// holds it.
#[derive(Clone, Debug)]
struct Side {
    counts: Vec<usize>,
    /// `counts` with this rank's entry zero.
    peer_counts: Vec<usize>,
    offsets: Vec<usize>,
    /// Elements in the peers' blocks.
    peers_len: usize,
    len: usize,
}

impl Side {
    fn new(counts: &[usize], me: usize, holds_self: bool) -> Self {
        let mut offsets = vec![0; counts.len()];
        let mut acc = 0;
        for (peer, &c) in counts.iter().enumerate().filter(|&(p, _)| p != me) {
            offsets[peer] = acc;
            acc += c;
        }
        offsets[me] = acc;
        let mut peer_counts = counts.to_vec();
        peer_counts[me] = 0;
        let len = if holds_self { acc + counts[me] } else { acc };
        Self { counts: counts.to_vec(), peer_counts, offsets, peers_len: acc, len }
    }
}

#[cfg(feature = "mpi")]
struct Requests {
    peers: Vec<usize>,
    raw: Vec<ffi::MPI_Request>,
}

#[cfg(feature = "mpi")]
impl Requests {
    fn empty() -> Self {
        Self { peers: Vec::new(), raw: Vec::new() }
    }
}

/// A planned exchange of one block per peer (see the module documentation).
pub struct ExchangePlan<T: Pod> {
    comm: Comm,
    backend: Backend,
    a: Vec<T>,
    b: Vec<T>,
    side_a: Side,
    side_b: Side,
    #[cfg(feature = "mpi")]
    _dtype: Option<ElementType>,
    /// forward sends (from A), forward receives (into B), backward sends (from B), backward
    /// receives (into A)
    #[cfg(feature = "mpi")]
    reqs: [Requests; 4],
}

// SAFETY: the raw requests refer to the plan's own heap buffers, which move with it; the plan is
// used by one thread at a time (`execute` takes `&mut self`, and the plan is not Sync). Starting
// or completing the requests from another thread than the one that initialised MPI is allowed at
// MPI_THREAD_SERIALIZED, which `Universe::init` requires, and every call holds the MPI lock.
unsafe impl<T: Pod> Send for ExchangePlan<T> {}

impl<T: Pod + Default> ExchangePlan<T> {
    /// Plans blocks of `a_counts[r]` elements between this rank's `A` and rank `r`, and
    /// `b_counts[r]` between its `B` and rank `r` (rank `r`'s `B` count for this rank must equal
    /// this rank's `A` count for `r`). Collective over `comm`.
    pub fn new(comm: &Comm, a_counts: &[usize], b_counts: &[usize], backend: Backend) -> Self {
        assert_eq!(a_counts.len(), comm.size(), "one A count per rank");
        assert_eq!(b_counts.len(), comm.size(), "one B count per rank");
        assert_eq!(a_counts[comm.rank()], b_counts[comm.rank()], "self block sizes differ");
        let me = comm.rank();
        let (side_a, side_b) = (Side::new(a_counts, me, false), Side::new(b_counts, me, true));
        #[cfg_attr(not(feature = "mpi"), allow(unused_mut))]
        let mut plan = Self {
            comm: comm.clone(),
            backend,
            a: vec![T::default(); side_a.len],
            b: vec![T::default(); side_b.len],
            side_a,
            side_b,
            #[cfg(feature = "mpi")]
            _dtype: None,
            #[cfg(feature = "mpi")]
            reqs: [Requests::empty(), Requests::empty(), Requests::empty(), Requests::empty()],
        };
        #[cfg(feature = "mpi")]
        if let (Some(raw), Backend::Persistent, true) = (comm.as_raw(), backend, comm.size() > 1) {
            let dt = ElementType::of::<T>();
            let me = comm.rank();
            let make = |buf: *mut T, side: &Side, send: bool, tag: i32| -> Requests {
                let mut r = Requests::empty();
                for (peer, &c) in side.counts.iter().enumerate() {
                    if c == 0 || peer == me {
                        continue;
                    }
                    let (count, rank) = (count_i32(c, "exchange block length"), count_i32(peer, "peer rank"));
                    // SAFETY: a predefined handle value, overwritten below.
                    let mut rq = unsafe { ffi::RSMPI_REQUEST_NULL };
                    let _serial = mpi_serial();
                    // SAFETY: the block of `count` elements of the committed datatype `dt` (one
                    // element each) lies in `buf`, a buffer owned by the plan that never moves
                    // (its Vec is not resized) and outlives the requests (freed in Drop); `raw`
                    // is the live communicator of `comm`.
                    let rc = unsafe {
                        let p = buf.add(side.offsets[peer]);
                        if send {
                            ffi::MPI_Send_init(p as *const _, count, dt.get().as_raw(), rank, tag, raw, &mut rq)
                        } else {
                            ffi::MPI_Recv_init(p as *mut _, count, dt.get().as_raw(), rank, tag, raw, &mut rq)
                        }
                    };
                    mpi_check(rc, if send { "MPI_Send_init" } else { "MPI_Recv_init" });
                    r.peers.push(peer);
                    r.raw.push(rq);
                }
                r
            };
            let (pa, pb) = (plan.a.as_mut_ptr(), plan.b.as_mut_ptr());
            plan.reqs = [
                make(pa, &plan.side_a, true, 11),
                make(pb, &plan.side_b, false, 11),
                make(pb, &plan.side_b, true, 12),
                make(pa, &plan.side_a, false, 12),
            ];
            plan._dtype = Some(dt);
        }
        plan
    }

    /// The backend.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Bytes of the plan's two buffers.
    pub fn bytes(&self) -> usize {
        (self.a.len() + self.b.len()) * std::mem::size_of::<T>()
    }

    /// Elements sent to other ranks per call in direction `dir`.
    pub fn elements_sent(&self, dir: Dir) -> usize {
        let s = if dir == Dir::Forward { &self.side_a } else { &self.side_b };
        s.peers_len
    }

    /// Executes in direction `dir`: `pack(peer, block)` fills the block for each peer with a
    /// block (self first), `unpack(peer, block)` consumes each received block (self first, then
    /// in arrival order for the persistent backend, rank order for all-to-all-v). Every `pack`
    /// runs before any `unpack`, so callers may pack from and unpack into the same array.
    pub fn execute(&mut self, dir: Dir, mut pack: impl FnMut(usize, &mut [T]), mut unpack: impl FnMut(usize, &[T])) {
        let me = self.comm.rank();
        let (src, dst, ss, ds) = match dir {
            Dir::Forward => (self.a.as_mut_ptr(), self.b.as_mut_ptr(), &self.side_a, &self.side_b),
            Dir::Backward => (self.b.as_mut_ptr(), self.a.as_mut_ptr(), &self.side_b, &self.side_a),
        };
        // Blocks of one side are disjoint ranges of a buffer the plan owns; MPI reads a send
        // block only after it was packed, and a receive block is read only after its request
        // completed.
        let block = |base: *mut T, s: &Side, peer: usize| {
            // SAFETY: `offsets[peer] + counts[peer]` lies inside the side's buffer (built from the
            // same counts), and the block of `peer` is not aliased by another live slice (above).
            unsafe { std::slice::from_raw_parts_mut(base.add(s.offsets[peer]), s.counts[peer]) }
        };
        let t = Instant::now();
        let size = self.comm.size();
        let sent = ss.peers_len;
        let msgs = (0..size).filter(|&r| r != me && ss.counts[r] > 0).count() as u64;
        let bytes = (sent * std::mem::size_of::<T>()) as u64;
        let persistent = self.backend == Backend::Persistent && size > 1;
        #[cfg(feature = "mpi")]
        let (si, ri) = match dir {
            Dir::Forward => (0, 1),
            Dir::Backward => (2, 3),
        };
        if persistent {
            #[cfg(feature = "mpi")]
            {
                let recv = &mut self.reqs[ri].raw;
                if !recv.is_empty() {
                    let _serial = mpi_serial();
                    // SAFETY: inactive persistent requests on live buffers.
                    let rc = unsafe { ffi::MPI_Startall(recv.len() as i32, recv.as_mut_ptr()) };
                    mpi_check(rc, "MPI_Startall");
                }
            }
        }
        // the self block first, packed where it is unpacked from: the end of B (past the peers'
        // blocks that MPI reads or writes)
        let (b_ptr, sb) = (self.b.as_mut_ptr(), &self.side_b);
        let self_block = || block(b_ptr, sb, me);
        if ss.counts[me] > 0 {
            pack(me, self_block());
        }
        if persistent {
            #[cfg(feature = "mpi")]
            {
                let mut k = 0;
                for peer in 0..size {
                    if peer == me || ss.counts[peer] == 0 {
                        continue;
                    }
                    pack(peer, block(src, ss, peer));
                    debug_assert_eq!(self.reqs[si].peers[k], peer);
                    let _serial = mpi_serial();
                    // SAFETY: the block is packed; the request is inactive.
                    let rc = unsafe { ffi::MPI_Start(&mut self.reqs[si].raw[k]) };
                    mpi_check(rc, "MPI_Start");
                    k += 1;
                }
                if ds.counts[me] > 0 {
                    unpack(me, self_block());
                }
                let n = self.reqs[ri].raw.len();
                for _ in 0..n {
                    let mut idx = 0i32;
                    {
                        let _serial = mpi_serial();
                        let reqs = &mut self.reqs[ri].raw;
                        // SAFETY: started requests; completed ones become inactive and are skipped.
                        let rc = unsafe {
                            ffi::MPI_Waitany(n as i32, reqs.as_mut_ptr(), &mut idx, ffi::RSMPI_STATUS_IGNORE)
                        };
                        mpi_check(rc, "MPI_Waitany");
                    }
                    let peer = usize::try_from(idx)
                        .ok()
                        .and_then(|i| self.reqs[ri].peers.get(i))
                        .copied()
                        .unwrap_or_else(|| panic!("MPI_Waitany returned index {idx} of {n} active receives"));
                    unpack(peer, block(dst, ds, peer));
                }
                let sends = &mut self.reqs[si].raw;
                if !sends.is_empty() {
                    let _serial = mpi_serial();
                    // SAFETY: started sends on live buffers.
                    let rc =
                        unsafe { ffi::MPI_Waitall(sends.len() as i32, sends.as_mut_ptr(), ffi::RSMPI_STATUSES_IGNORE) };
                    mpi_check(rc, "MPI_Waitall");
                }
            }
        } else {
            for peer in (0..size).filter(|&p| p != me && ss.counts[p] > 0) {
                pack(peer, block(src, ss, peer));
            }
            if size > 1 {
                // SAFETY: the peers' blocks of both buffers (the self block lies past them), no
                // block borrowed across the call.
                let (s, d) = unsafe {
                    (std::slice::from_raw_parts(src, ss.peers_len), std::slice::from_raw_parts_mut(dst, ds.peers_len))
                };
                self.comm.alltoallv_known(s, &ss.peer_counts, d, &ds.peer_counts);
            }
            for peer in (0..size).filter(|&p| ds.counts[p] > 0) {
                unpack(peer, if peer == me { self_block() } else { block(dst, ds, peer) });
            }
        }
        if persistent {
            self.comm.counters.add(bytes, msgs, t);
        }
    }
}

impl<T: Pod> Drop for ExchangePlan<T> {
    fn drop(&mut self) {
        #[cfg(feature = "mpi")]
        if mpi_live() {
            let _serial = mpi_serial();
            for r in self.reqs.iter_mut() {
                for rq in r.raw.iter_mut() {
                    // SAFETY: inactive persistent requests, freed once.
                    let rc = unsafe { ffi::MPI_Request_free(rq) };
                    // no panic while dropping (it may run during unwinding): report and go on
                    if rc != ffi::MPI_SUCCESS as i32 {
                        eprintln!("parki-comm: {}", crate::comm::mpi_error_message(rc, "MPI_Request_free"));
                    }
                }
            }
        }
    }
}
