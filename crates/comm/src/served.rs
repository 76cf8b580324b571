//! The messages transport of a [`Window`](crate::Window): the same reads as one-sided MPI
//! (`MPI_Get` in a passive-target epoch), carried by point-to-point messages where an MPI
//! library cannot create windows (`MPI_Win_create` failing, as Open MPI 4.1's `osc` components
//! do on some machines), or where the user asks for it (`PARKI_ONE_SIDED=messages`).
//!
//! Each rank runs a server thread for as long as the window lives. The server answers requests
//! (a list of `(offset, length)` byte ranges of its exposed buffer) with one reply holding the
//! ranges back to back, so the owner need not take part in the reads, as with one-sided MPI. A
//! read sends its request and waits for the reply on a private duplicate of the communicator
//! (its tags cannot meet any other traffic). Freeing the window tells every other rank that
//! this one is done reading; a server stops once every other rank is done, so no request can
//! arrive after it.
//!
//! MPI is called at `MPI_THREAD_SERIALIZED` under the crate's lock: the server and the reader
//! only test non-blocking requests and probe, releasing the lock between polls (a blocking
//! receive holding the lock would keep this rank's server from answering another reader), and
//! sleep between idle polls (from 20 microseconds up to 1 millisecond) rather than spin on a
//! core that the local computation uses meanwhile.

use std::os::raw::{c_int, c_void};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::comm::{count_i32, ffi, mpi_check, mpi_serial};

/// A request: `(offset, length)` pairs in bytes, as `u64`.
const TAG_REQUEST: c_int = 1;
/// The reply to a request: the ranges back to back.
const TAG_REPLY: c_int = 2;
/// This rank reads nothing more from the receiver (an empty message).
const TAG_DONE: c_int = 3;

/// Largest reply of one request (MPI counts are `int`); longer reads are split.
pub(crate) const MAX_REPLY: usize = 1 << 30;

/// A communicator handle the server thread may hold (calls are serialised by the crate's lock).
#[derive(Clone, Copy)]
struct RawComm(ffi::MPI_Comm);
// SAFETY: an MPI communicator handle is an opaque object; any thread may use it at
// MPI_THREAD_SERIALIZED, and every call on it here holds MPI_LOCK.
unsafe impl Send for RawComm {}

/// A pending non-blocking request with the buffer it reads or writes.
struct Pending {
    request: ffi::MPI_Request,
    _buffer: Vec<u8>,
}
// SAFETY: see RawComm; the buffer is owned and stays put until the request completes.
unsafe impl Send for Pending {}

/// One rank's side of a window over messages: the private communicator and the server thread.
pub(crate) struct Served {
    comm: RawComm,
    size: usize,
    rank: usize,
    server: Option<JoinHandle<()>>,
}

/// Sleeps a little longer after each idle poll, up to a millisecond.
struct Backoff(u64);

impl Backoff {
    fn idle(&mut self) {
        std::thread::sleep(Duration::from_micros(self.0));
        self.0 = (self.0 * 2).min(1000);
    }
    fn busy(&mut self) {
        self.0 = 20;
    }
}

/// Whether `request` has completed (`MPI_Test`), under the lock.
fn test(request: &mut ffi::MPI_Request) -> bool {
    let mut flag: c_int = 0;
    let _serial = mpi_serial();
    // SAFETY: `request` is a live request (or MPI_REQUEST_NULL after completion, which
    // MPI_Test accepts); the status is ignored.
    let rc = unsafe { ffi::MPI_Test(request, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
    mpi_check(rc, "MPI_Test");
    flag != 0
}

/// Which non-blocking operation [`post`] starts.
#[derive(Clone, Copy)]
enum Post {
    /// `MPI_Isend` of the buffer.
    Send,
    /// `MPI_Irecv` into the buffer.
    Recv,
}

/// Starts a send of, or a receive into, the `bytes` at `buffer` with `peer` (`MPI_Isend`,
/// `MPI_Irecv`). The caller keeps the buffer alive, unmoved and (for a send) unchanged until the
/// request completes: a send's buffer in a [`Pending`] or waited for, a receive's waited for
/// before it is read.
fn post(comm: RawComm, op: Post, buffer: *mut c_void, bytes: usize, peer: usize, tag: c_int) -> ffi::MPI_Request {
    // SAFETY: an all-zero bit pattern is a valid (null) handle, overwritten by MPI.
    let mut request: ffi::MPI_Request = unsafe { std::mem::zeroed() };
    let (count, peer) = (count_i32(bytes, "message bytes"), count_i32(peer, "rank"));
    let _serial = mpi_serial();
    // SAFETY: `buffer` holds `bytes` bytes and stays valid until the request completes (the
    // callers' contract above); the communicator is live.
    let rc = unsafe {
        match op {
            Post::Send => ffi::MPI_Isend(buffer, count, ffi::RSMPI_UINT8_T, peer, tag, comm.0, &mut request),
            Post::Recv => ffi::MPI_Irecv(buffer, count, ffi::RSMPI_UINT8_T, peer, tag, comm.0, &mut request),
        }
    };
    mpi_check(rc, if matches!(op, Post::Send) { "MPI_Isend" } else { "MPI_Irecv" });
    request
}

/// [`post`] of a send of `buffer`.
fn isend(comm: RawComm, buffer: &[u8], to: usize, tag: c_int) -> ffi::MPI_Request {
    post(comm, Post::Send, buffer.as_ptr() as *mut c_void, buffer.len(), to, tag)
}

/// [`post`] of a receive into `buffer`.
fn irecv(comm: RawComm, buffer: &mut [u8], from: usize, tag: c_int) -> ffi::MPI_Request {
    post(comm, Post::Recv, buffer.as_mut_ptr() as *mut c_void, buffer.len(), from, tag)
}

/// Waits for `requests` by polling, releasing the lock between polls.
fn wait_all(requests: &mut [ffi::MPI_Request]) {
    let mut backoff = Backoff(20);
    let mut open: Vec<usize> = (0..requests.len()).collect();
    while !open.is_empty() {
        open.retain(|&i| !test(&mut requests[i]));
        if !open.is_empty() {
            backoff.idle();
        }
    }
}

/// The next message waiting for this rank, if any: `(source, tag, bytes)` (`MPI_Iprobe`).
fn probe(comm: RawComm) -> Option<(usize, c_int, usize)> {
    let mut flag: c_int = 0;
    // SAFETY: MPI_Iprobe fills the status before it is read.
    let mut status: ffi::MPI_Status = unsafe { std::mem::zeroed() };
    let _serial = mpi_serial();
    // SAFETY: the communicator is live; `status` is writable.
    let rc = unsafe { ffi::MPI_Iprobe(ffi::RSMPI_ANY_SOURCE, ffi::RSMPI_ANY_TAG, comm.0, &mut flag, &mut status) };
    mpi_check(rc, "MPI_Iprobe");
    if flag == 0 {
        return None;
    }
    let mut count: c_int = 0;
    // SAFETY: `status` came from a successful probe.
    let rc = unsafe { ffi::MPI_Get_count(&status, ffi::RSMPI_UINT8_T, &mut count) };
    mpi_check(rc, "MPI_Get_count");
    Some((status.MPI_SOURCE as usize, status.MPI_TAG, count.max(0) as usize))
}

/// Receives the probed message (it is there: the receive returns at once).
fn recv_probed(comm: RawComm, from: usize, tag: c_int, bytes: usize) -> Vec<u8> {
    let mut buffer = vec![0u8; bytes];
    let _serial = mpi_serial();
    // SAFETY: `buffer` holds the probed message's `bytes`; source and tag match it, so the
    // receive completes without waiting.
    let rc = unsafe {
        ffi::MPI_Recv(
            buffer.as_mut_ptr() as *mut c_void,
            count_i32(bytes, "message bytes"),
            ffi::RSMPI_UINT8_T,
            count_i32(from, "rank"),
            tag,
            comm.0,
            ffi::RSMPI_STATUS_IGNORE,
        )
    };
    mpi_check(rc, "MPI_Recv");
    buffer
}

/// The server's loop: answers requests until every other rank is done.
/// `data` is the server's copy of the exposed bytes (it must not outlive a borrow).
fn serve(comm: RawComm, size: usize, data: Arc<[u8]>) {
    let mut done = 0;
    let mut replies: Vec<Pending> = Vec::new();
    let mut backoff = Backoff(20);
    while done + 1 < size || !replies.is_empty() {
        replies.retain_mut(|p| !test(&mut p.request));
        let Some((from, tag, bytes)) = (if done + 1 < size { probe(comm) } else { None }) else {
            backoff.idle();
            continue;
        };
        backoff.busy();
        let message = recv_probed(comm, from, tag, bytes);
        match tag {
            TAG_REQUEST => {
                let ranges: Vec<u64> =
                    message.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
                let total: u64 = ranges.chunks_exact(2).map(|r| r[1]).sum();
                let mut reply = Vec::with_capacity(total as usize);
                for r in ranges.chunks_exact(2) {
                    let (offset, len) = (r[0] as usize, r[1] as usize);
                    let end = offset.checked_add(len).filter(|&e| e <= data.len());
                    let end = end.unwrap_or_else(|| {
                        panic!(
                            "Window::get from rank {from}: bytes {offset}..{} past the {} exposed",
                            offset.saturating_add(len),
                            data.len()
                        )
                    });
                    reply.extend_from_slice(&data[offset..end]);
                }
                let request = isend(comm, &reply, from, TAG_REPLY);
                replies.push(Pending { request, _buffer: reply });
            }
            TAG_DONE => done += 1,
            other => panic!("window server: unexpected tag {other} from rank {from}"),
        }
    }
}

impl Served {
    /// Starts the transport over `comm` for `local` (collective: duplicates the communicator).
    pub(crate) fn start(comm: ffi::MPI_Comm, local: &[u8]) -> Served {
        // SAFETY: an all-zero bit pattern is a valid (null) handle, overwritten by MPI_Comm_dup.
        let mut private: ffi::MPI_Comm = unsafe { std::mem::zeroed() };
        let (mut size, mut rank): (c_int, c_int) = (0, 0);
        {
            let _serial = mpi_serial();
            // SAFETY: `comm` is a live communicator; every rank calls this (expose is collective).
            let rc = unsafe { ffi::MPI_Comm_dup(comm, &mut private) };
            mpi_check(rc, "MPI_Comm_dup");
            // SAFETY: `private` was just created.
            mpi_check(unsafe { ffi::MPI_Comm_size(private, &mut size) }, "MPI_Comm_size");
            // SAFETY: as above.
            mpi_check(unsafe { ffi::MPI_Comm_rank(private, &mut rank) }, "MPI_Comm_rank");
        }
        let raw = RawComm(private);
        let (size, rank) = (size as usize, rank as usize);
        let exposed: Arc<[u8]> = Arc::from(local);
        let server = std::thread::Builder::new()
            .name("parki-window-server".into())
            .spawn(move || serve(raw, size, exposed))
            .expect("spawning the window's server thread");
        Served { comm: raw, size, rank, server: Some(server) }
    }

    /// Reads `reads` (byte offset, destination) from `rank`'s exposed buffer: one request and
    /// one reply per at most [`MAX_REPLY`] bytes. Returns (bytes, messages).
    pub(crate) fn get(&self, rank: usize, reads: &mut [(usize, &mut [u8])]) -> (u64, u64) {
        let (mut bytes, mut messages) = (0u64, 0u64);
        let mut start = 0;
        while start < reads.len() {
            // as many reads as fit one reply (a read longer than that alone, split)
            let mut end = start;
            let mut total = 0usize;
            while end < reads.len() && (end == start || total + reads[end].1.len() <= MAX_REPLY) {
                total += reads[end].1.len();
                end += 1;
            }
            if end == start + 1 && total > MAX_REPLY {
                let (offset, buf) = &mut reads[start];
                for (k, part) in buf.chunks_mut(MAX_REPLY).enumerate() {
                    let b = self.exchange(rank, &mut [(*offset + k * MAX_REPLY, part)]);
                    bytes += b;
                    messages += 1;
                }
            } else {
                bytes += self.exchange(rank, &mut reads[start..end]);
                messages += 1;
            }
            start = end;
        }
        (bytes, messages)
    }

    /// One request and its reply (at most [`MAX_REPLY`] bytes).
    fn exchange(&self, rank: usize, reads: &mut [(usize, &mut [u8])]) -> u64 {
        let mut request = Vec::with_capacity(reads.len() * 16);
        let mut total = 0usize;
        for (offset, buf) in reads.iter() {
            request.extend_from_slice(&(*offset as u64).to_le_bytes());
            request.extend_from_slice(&(buf.len() as u64).to_le_bytes());
            total += buf.len();
        }
        let mut reply = vec![0u8; total];
        // the receive first, so the reply finds it posted
        let mut requests =
            [irecv(self.comm, &mut reply, rank, TAG_REPLY), isend(self.comm, &request, rank, TAG_REQUEST)];
        wait_all(&mut requests);
        let mut at = 0;
        for (_, buf) in reads.iter_mut() {
            let n = buf.len();
            buf.copy_from_slice(&reply[at..at + n]);
            at += n;
        }
        total as u64
    }

    /// Tells every other rank that this one reads no more, waits until every other rank has
    /// said the same to this rank's server (which has then answered everything), and frees the
    /// private communicator (collective).
    pub(crate) fn finish(&mut self) {
        let empty: [u8; 0] = [];
        let mut requests: Vec<ffi::MPI_Request> =
            (0..self.size).filter(|&q| q != self.rank).map(|q| isend(self.comm, &empty, q, TAG_DONE)).collect();
        wait_all(&mut requests);
        if let Some(server) = self.server.take() {
            if let Err(panic) = server.join() {
                std::panic::resume_unwind(panic);
            }
        }
        let _serial = mpi_serial();
        // SAFETY: the private communicator of `start`, freed once; no request on it is pending
        // (the server's replies completed before it returned, this rank's reads and DONE
        // messages above).
        let rc = unsafe { ffi::MPI_Comm_free(&mut self.comm.0) };
        mpi_check(rc, "MPI_Comm_free");
    }
}
