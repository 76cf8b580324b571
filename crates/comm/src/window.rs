//! [`Window`]: passive-target one-sided reads of another rank's exposed memory (MPI-3 RMA:
//! `MPI_Win_create`, `MPI_Win_lock(MPI_LOCK_SHARED)`, `MPI_Get`, `MPI_Win_unlock`), for data
//! that a rank needs from a few others and that the owners need not take part in sending: the
//! treecode's locally essential tree.
//!
//! A window is created and freed collectively ([`Comm::expose`], [`Window::free`]); between the
//! two, any rank reads any byte range of any rank's exposed buffer with [`Window::get`], one
//! shared-lock epoch per call (several reads of one rank in one epoch), while the owner computes.
//! Reads from this rank are copies. Every read is counted (bytes received, messages, seconds)
//! under the communicator's current stage.
//!
//! **Transport.** One-sided MPI by default ([`Transport::OneSided`]). Where the MPI library
//! cannot create a window (`MPI_Win_create` fails on any rank: Open MPI 4.1's `osc` components
//! do on some machines), the ranks agree on it and carry the same reads by messages instead
//! ([`Transport::Messages`], crate `served`): the results are the same bytes, the owner still
//! takes no part in the reads (a server thread answers them), and rank 0 says once why. The
//! environment variable [`ONE_SIDED_ENV`] (`PARKI_ONE_SIDED`) = `messages` chooses messages
//! from the start (no attempt), `one-sided` refuses the fallback (a failing `MPI_Win_create`
//! is then an error), and `fail:<rank>` makes that rank act as if `MPI_Win_create` had failed
//! (to test the fallback where windows work).

#[cfg(feature = "mpi")]
use std::sync::atomic::{AtomicBool, Ordering};
#[cfg(feature = "mpi")]
use std::time::Instant;

use crate::comm::Comm;
#[cfg(feature = "mpi")]
use crate::comm::ReduceOp;
#[cfg(feature = "mpi")]
use crate::comm::{count_i32, ffi, mpi_check, mpi_error_message, mpi_live, mpi_serial};
#[cfg(feature = "mpi")]
use crate::served::Served;

/// Environment variable choosing a window's transport: `messages` (point-to-point messages
/// from the start), `one-sided` (one-sided MPI, no fallback), unset or `auto` (one-sided MPI,
/// messages where the library cannot create windows).
pub const ONE_SIDED_ENV: &str = "PARKI_ONE_SIDED";

/// How a window's reads travel between ranks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Transport {
    /// One process: reads are copies.
    #[default]
    Local,
    /// Passive-target one-sided MPI (`MPI_Win_create`, `MPI_Get`).
    OneSided,
    /// Requests answered by a server thread on the owner (`MPI_Isend`/`MPI_Irecv` on a private
    /// communicator).
    Messages,
}

impl Transport {
    /// The name in reports: `"local"`, `"one-sided"` or `"messages"`.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Local => "local",
            Transport::OneSided => "one-sided",
            Transport::Messages => "messages",
        }
    }
}

/// What [`ONE_SIDED_ENV`] asks for.
#[cfg(feature = "mpi")]
#[derive(Clone, Copy, PartialEq, Eq)]
enum Asked {
    Auto,
    OneSided,
    Messages,
    /// `fail:<rank>`: that rank acts as if `MPI_Win_create` had failed (to test the fallback).
    FailOn(usize),
}

#[cfg(feature = "mpi")]
fn asked() -> Asked {
    match std::env::var(ONE_SIDED_ENV).map(|v| v.trim().to_ascii_lowercase()) {
        Ok(v) if v == "messages" => Asked::Messages,
        Ok(v) if v == "one-sided" || v == "onesided" || v == "rma" => Asked::OneSided,
        Ok(v) if v.starts_with("fail:") => v[5..].parse().map_or(Asked::Auto, Asked::FailOn),
        _ => Asked::Auto,
    }
}

/// Set once `MPI_Win_create` has failed on some rank (agreed by all): later windows go to
/// messages without another attempt. The same on every rank (set after the agreement).
#[cfg(feature = "mpi")]
static ONE_SIDED_FAILED: AtomicBool = AtomicBool::new(false);

/// `MPI_Win_create` over `local` with errors returned rather than fatal (the communicator's
/// handler is put back afterwards): the window, or MPI's message.
#[cfg(feature = "mpi")]
fn try_create(raw: ffi::MPI_Comm, local: &[u8]) -> Result<ffi::MPI_Win, String> {
    let mut win = ffi::MPI_Win(std::ptr::null_mut());
    let _serial = mpi_serial();
    let mut previous = ffi::MPI_Errhandler(std::ptr::null_mut());
    // SAFETY: `raw` is a live communicator; MPI_Comm_get_errhandler gives a reference to its
    // handler, freed below after it is put back.
    mpi_check(unsafe { ffi::MPI_Comm_get_errhandler(raw, &mut previous) }, "MPI_Comm_get_errhandler");
    // SAFETY: MPI_ERRORS_RETURN is a predefined handler.
    mpi_check(unsafe { ffi::MPI_Comm_set_errhandler(raw, ffi::RSMPI_ERRORS_RETURN) }, "MPI_Comm_set_errhandler");
    // SAFETY: `local` outlives the window (the borrow of the `Window`; it is freed in `free` or
    // on drop, before the borrow ends); MPI only reads it (the window is only ever the target of
    // MPI_Get). `raw` is this live communicator.
    let rc = unsafe {
        ffi::MPI_Win_create(
            local.as_ptr() as *mut std::os::raw::c_void,
            local.len() as ffi::MPI_Aint,
            1,
            ffi::RSMPI_INFO_NULL,
            raw,
            &mut win,
        )
    };
    // SAFETY: `previous` is the handler read above.
    mpi_check(unsafe { ffi::MPI_Comm_set_errhandler(raw, previous) }, "MPI_Comm_set_errhandler");
    // SAFETY: the reference from MPI_Comm_get_errhandler, released once.
    mpi_check(unsafe { ffi::MPI_Errhandler_free(&mut previous) }, "MPI_Errhandler_free");
    if rc == ffi::MPI_SUCCESS as std::os::raw::c_int {
        Ok(win)
    } else {
        Err(mpi_error_message(rc, "MPI_Win_create"))
    }
}

/// The remote side of a window.
#[cfg(feature = "mpi")]
enum Remote {
    /// One process.
    None,
    OneSided(ffi::MPI_Win),
    Messages(Served),
}

/// Largest byte count of one `MPI_Get` (MPI counts are `int`); longer reads are split.
#[cfg(feature = "mpi")]
const MAX_GET: usize = 1 << 30;

/// A buffer of this rank exposed to one-sided reads by every rank of a communicator, for as
/// long as the window lives (the buffer is borrowed, so it cannot change meanwhile).
pub struct Window<'a> {
    comm: &'a Comm,
    local: &'a [u8],
    #[cfg(feature = "mpi")]
    remote: Remote,
}

// SAFETY: an MPI window handle is an opaque object that any thread may use at
// MPI_THREAD_SERIALIZED (checked by Universe::init); every call on it holds MPI_LOCK, so no two
// threads call MPI at once. The exposed buffer is a shared borrow, never written.
unsafe impl Send for Window<'_> {}
// SAFETY: see Send.
unsafe impl Sync for Window<'_> {}

impl Comm {
    /// Exposes `local` to one-sided reads by every rank (`MPI_Win_create`, displacement unit
    /// one byte; or the messages transport, see the module documentation). Collective: every
    /// rank calls it, each with its own buffer (any length, empty included).
    ///
    /// # Panics
    /// With `PARKI_ONE_SIDED=one-sided` where `MPI_Win_create` fails (on every rank, with the
    /// failing ranks' count and MPI's message on the failing ones).
    pub fn expose<'a>(&'a self, local: &'a [u8]) -> Window<'a> {
        #[cfg(feature = "mpi")]
        if let (Some(raw), true) = (self.as_raw(), self.size() > 1) {
            let t = Instant::now();
            let asked = asked();
            let remote = if asked == Asked::Messages || ONE_SIDED_FAILED.load(Ordering::Relaxed) {
                Remote::Messages(Served::start(raw, local))
            } else {
                // the window, or why not (with the window where one was made: a simulated failure)
                let created: std::result::Result<ffi::MPI_Win, (Option<ffi::MPI_Win>, String)> = match asked {
                    Asked::FailOn(r) if r == self.rank() => {
                        Err((try_create(raw, local).ok(), format!("a failure simulated by {ONE_SIDED_ENV}=fail:{r}")))
                    }
                    _ => try_create(raw, local).map_err(|why| (None, why)),
                };
                let (window, why) = match created {
                    Ok(win) => (Some(win), None),
                    Err((win, why)) => (win, Some(why)),
                };
                // ranks that failed, ranks that hold a window: one reduction
                let mut counts = [u64::from(why.is_some()), u64::from(window.is_some())];
                self.all_reduce(&mut counts, ReduceOp::Sum);
                let [failed, holding] = counts;
                match window {
                    Some(win) if failed == 0 => Remote::OneSided(win),
                    window => {
                        assert!(
                            asked != Asked::OneSided,
                            "{ONE_SIDED_ENV}=one-sided, but MPI_Win_create failed on {failed} of {} ranks \
                             (rank {}: {})",
                            self.size(),
                            self.rank(),
                            why.as_deref().unwrap_or("created here")
                        );
                        // windows made while another rank failed: freed where every rank holds
                        // one (MPI_Win_free is collective), else left alone
                        if let (Some(mut win), true) = (window, holding == self.size() as u64) {
                            let _serial = mpi_serial();
                            // SAFETY: a live window created above on every rank, freed once.
                            mpi_check(unsafe { ffi::MPI_Win_free(&mut win) }, "MPI_Win_free");
                        }
                        if self.rank() == 0 {
                            eprintln!(
                                "parki-dist: MPI_Win_create failed on {failed} of {} ranks ({}); \
                                 one-sided reads (the locally essential trees) travel by messages instead \
                                 ({ONE_SIDED_ENV}=messages skips the attempt; with Open MPI, `--mca osc pt2pt` \
                                 or `--mca osc ^ucx` may make windows work)",
                                self.size(),
                                why.map_or_else(|| "rank 0 made its window".to_string(), |w| format!("rank 0: {w}"))
                            );
                        }
                        ONE_SIDED_FAILED.store(true, Ordering::Relaxed);
                        Remote::Messages(Served::start(raw, local))
                    }
                }
            };
            self.counters.add(0, 0, t);
            return Window { comm: self, local, remote };
        }
        Window {
            comm: self,
            local,
            #[cfg(feature = "mpi")]
            remote: Remote::None,
        }
    }
}

impl Window<'_> {
    /// Bytes this rank exposes.
    pub fn local_len(&self) -> usize {
        self.local.len()
    }

    /// How this window's reads travel.
    pub fn transport(&self) -> Transport {
        #[cfg(feature = "mpi")]
        match self.remote {
            Remote::None => Transport::Local,
            Remote::OneSided(_) => Transport::OneSided,
            Remote::Messages(_) => Transport::Messages,
        }
        #[cfg(not(feature = "mpi"))]
        Transport::Local
    }

    /// Reads `reads[k].1.len()` bytes at byte offset `reads[k].0` of rank `rank`'s buffer into
    /// `reads[k].1`, all in one passive-target epoch (lock shared, `MPI_Get` each, unlock: the
    /// data are in place on return). Not collective: `rank` need not call anything.
    ///
    /// # Panics
    /// If a read reaches past the end of this rank's buffer (for `rank` itself), or `rank` is
    /// not in the communicator. MPI reports reads past a remote buffer.
    pub fn get(&self, rank: usize, reads: &mut [(usize, &mut [u8])]) {
        assert!(rank < self.comm.size(), "Window::get: rank {rank} of {}", self.comm.size());
        if rank == self.comm.rank() {
            for (offset, buf) in reads.iter_mut() {
                let n = buf.len();
                buf.copy_from_slice(&self.local[*offset..*offset + n]);
            }
            return;
        }
        #[cfg(feature = "mpi")]
        if let Remote::Messages(served) = &self.remote {
            let t = Instant::now();
            let (bytes, messages) = served.get(rank, reads);
            self.comm.counters.add(bytes, messages, t);
            return;
        }
        #[cfg(feature = "mpi")]
        if let Remote::OneSided(win) = self.remote {
            let t = Instant::now();
            let target = count_i32(rank, "window rank");
            let (mut bytes, mut messages) = (0u64, 0u64);
            let serial = mpi_serial();
            // SAFETY: `win` is live until `free`; the lock type and rank are valid.
            let rc = unsafe { ffi::MPI_Win_lock(ffi::MPI_LOCK_SHARED as i32, target, 0, win) };
            mpi_check(rc, "MPI_Win_lock");
            for (offset, buf) in reads.iter_mut() {
                let mut done = 0;
                while done < buf.len() {
                    let n = (buf.len() - done).min(MAX_GET);
                    let part = &mut buf[done..done + n];
                    // SAFETY: `part` is writable for `n` bytes and stays borrowed until the
                    // unlock below completes the read; the byte datatype (a predefined handle,
                    // readable after MPI_Init) matches both sides.
                    let rc = unsafe {
                        ffi::MPI_Get(
                            part.as_mut_ptr() as *mut std::os::raw::c_void,
                            n as i32,
                            ffi::RSMPI_UINT8_T,
                            target,
                            (*offset + done) as ffi::MPI_Aint,
                            n as i32,
                            ffi::RSMPI_UINT8_T,
                            win,
                        )
                    };
                    mpi_check(rc, "MPI_Get");
                    done += n;
                    bytes += n as u64;
                    messages += 1;
                }
            }
            // SAFETY: the epoch opened above; completes every MPI_Get of it.
            let rc = unsafe { ffi::MPI_Win_unlock(target, win) };
            mpi_check(rc, "MPI_Win_unlock");
            drop(serial);
            self.comm.counters.add(bytes, messages, t);
            return;
        }
        unreachable!("a window without MPI has only this rank");
    }

    /// Frees the window (`MPI_Win_free`, or the messages transport's end: collective, it
    /// returns once every rank is done reading this rank's buffer). Dropping a window does the
    /// same.
    pub fn free(self) {
        drop(self)
    }
}

impl Drop for Window<'_> {
    fn drop(&mut self) {
        #[cfg(feature = "mpi")]
        match std::mem::replace(&mut self.remote, Remote::None) {
            Remote::OneSided(mut win) if mpi_live() => {
                let t = Instant::now();
                {
                    let _serial = mpi_serial();
                    // SAFETY: a live window created by `expose`, freed once.
                    let rc = unsafe { ffi::MPI_Win_free(&mut win) };
                    mpi_check(rc, "MPI_Win_free");
                }
                self.comm.counters.add(0, 0, t);
            }
            Remote::Messages(mut served) if mpi_live() => {
                let t = Instant::now();
                served.finish();
                self.comm.counters.add(0, 0, t);
            }
            _ => {}
        }
    }
}
