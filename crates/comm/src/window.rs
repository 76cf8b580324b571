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

#[cfg(feature = "mpi")]
use std::time::Instant;

use crate::comm::Comm;
#[cfg(feature = "mpi")]
use crate::comm::{count_i32, ffi, mpi_check, mpi_live, mpi_serial};

/// Largest byte count of one `MPI_Get` (MPI counts are `int`); longer reads are split.
#[cfg(feature = "mpi")]
const MAX_GET: usize = 1 << 30;

/// A buffer of this rank exposed to one-sided reads by every rank of a communicator, for as
/// long as the window lives (the buffer is borrowed, so it cannot change meanwhile).
pub struct Window<'a> {
    comm: &'a Comm,
    local: &'a [u8],
    #[cfg(feature = "mpi")]
    win: Option<ffi::MPI_Win>,
}

// SAFETY: an MPI window handle is an opaque object that any thread may use at
// MPI_THREAD_SERIALIZED (checked by Universe::init); every call on it holds MPI_LOCK, so no two
// threads call MPI at once. The exposed buffer is a shared borrow, never written.
unsafe impl Send for Window<'_> {}
// SAFETY: see Send.
unsafe impl Sync for Window<'_> {}

impl Comm {
    /// Exposes `local` to one-sided reads by every rank (`MPI_Win_create`, displacement unit
    /// one byte). Collective: every rank calls it, each with its own buffer (any length,
    /// empty included).
    pub fn expose<'a>(&'a self, local: &'a [u8]) -> Window<'a> {
        #[cfg(feature = "mpi")]
        if let (Some(raw), true) = (self.as_raw(), self.size() > 1) {
            let t = Instant::now();
            let mut win = ffi::MPI_Win(std::ptr::null_mut());
            {
                let _serial = mpi_serial();
                // SAFETY: `local` outlives the window (the borrow `'a`; the window is freed in
                // `free` or on drop, before the borrow ends); MPI only reads it (the window is
                // only ever the target of MPI_Get). `raw` is this live communicator.
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
                mpi_check(rc, "MPI_Win_create");
            }
            self.counters.add(0, 0, t);
            return Window { comm: self, local, win: Some(win) };
        }
        Window {
            comm: self,
            local,
            #[cfg(feature = "mpi")]
            win: None,
        }
    }
}

impl Window<'_> {
    /// Bytes this rank exposes.
    pub fn local_len(&self) -> usize {
        self.local.len()
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
        if let Some(win) = self.win {
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

    /// Frees the window (`MPI_Win_free`, collective: it returns once every rank is done
    /// reading this rank's buffer). Dropping a window does the same.
    pub fn free(self) {
        drop(self)
    }
}

impl Drop for Window<'_> {
    fn drop(&mut self) {
        #[cfg(feature = "mpi")]
        if let Some(mut win) = self.win.take() {
            if mpi_live() {
                let t = Instant::now();
                {
                    let _serial = mpi_serial();
                    // SAFETY: a live window created by `expose`, freed once.
                    let rc = unsafe { ffi::MPI_Win_free(&mut win) };
                    mpi_check(rc, "MPI_Win_free");
                }
                self.comm.counters.add(0, 0, t);
            }
        }
    }
}
