//! Recursive coordinate bisection (RCB) partitions of particles over the ranks, by Zoltan
//! (`LB_METHOD = RCB`, through the workspace's `zoltan-sys`), as BaryTree partitions its
//! particles (seed 003, §3.1).
//!
//! - `RCB_RECTILINEAR_BLOCKS = 1`: points on a cut all go to one side, so every part is an
//!   axis-aligned box (a rank's tree then covers a box, and boxes of different ranks do not
//!   overlap);
//! - `KEEP_CUTS = 1`: the cuts are kept, so that any other point (a target) is assigned to the
//!   part whose box holds it ([`Rcb::owner`], `Zoltan_LB_Point_Assign`);
//! - unit weights: equal particle counts per rank (up to the points on a cut).
//!
//! On one rank (or in a build without the `mpi` feature, where there is one rank) every point
//! belongs to rank 0 and Zoltan is not called.

use parki_comm::Comm;
use parki_core::{Error, Result};

/// An RCB partition: the owner of every point of the partitioned set, and the cuts.
pub struct Rcb {
    #[cfg(feature = "mpi")]
    zoltan: Option<zoltan::Handle>,
}

impl std::fmt::Debug for Rcb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Rcb")
    }
}

impl Rcb {
    /// Partitions the ranks' `points` (each rank passes its own, any number, none included) into
    /// `comm.size()` boxes of about equal counts; returns the cuts and the owning rank of each
    /// of this rank's points. Collective.
    ///
    /// # Errors
    /// [`Error::Unsupported`] when several ranks run without the `mpi` feature of this crate,
    /// or there are `2^32` points or more in all; [`Error::Resource`] when Zoltan fails (its
    /// code named). Every rank gets the error.
    pub fn partition(comm: &Comm, points: &[[f64; 3]]) -> Result<(Rcb, Vec<u32>)> {
        if comm.size() == 1 {
            return Ok((
                Rcb {
                    #[cfg(feature = "mpi")]
                    zoltan: None,
                },
                vec![0; points.len()],
            ));
        }
        #[cfg(feature = "mpi")]
        {
            let counts = comm.all_gather(&[points.len() as u64]);
            let total: u64 = counts.iter().sum();
            let r = if total >= u64::from(u32::MAX) {
                Err(Error::Unsupported {
                    what: format!("an RCB partition of {total} points (Zoltan's ids are 32-bit)"),
                })
            } else {
                Ok(())
            };
            comm.agree(r)?;
            if total < 2 {
                // Zoltan's RCB fails (ZOLTAN_FATAL) on a set of one point or none: rank 0 owns it
                return Ok((Rcb { zoltan: None }, vec![0; points.len()]));
            }
            let offset: u64 = counts[..comm.rank()].iter().sum();
            let (handle, owners) = zoltan::partition(comm, points, offset as u32);
            let r = comm.agree(owners.map_err(|message| Error::Resource { message }));
            let owners = r?;
            Ok((Rcb { zoltan: Some(handle) }, owners))
        }
        #[cfg(not(feature = "mpi"))]
        {
            let _ = points;
            Err(Error::Unsupported {
                what: format!(
                    "{} ranks: parki-decomp was built without its \"mpi\" feature (RCB by Zoltan)",
                    comm.size()
                ),
            })
        }
    }

    /// The rank whose box holds `p` (`Zoltan_LB_Point_Assign` on the kept cuts; rank 0 on one
    /// rank). Points outside every box go to the nearest box across the cuts.
    pub fn owner(&self, p: [f64; 3]) -> usize {
        #[cfg(feature = "mpi")]
        if let Some(z) = &self.zoltan {
            return z.point_owner(p);
        }
        let _ = p;
        0
    }
}

#[cfg(feature = "mpi")]
mod zoltan {
    //! The Zoltan calls, each under the communicator's MPI lock (Zoltan calls MPI itself).

    use std::ffi::CString;
    use std::os::raw::{c_char, c_int, c_void};
    use std::sync::Once;

    use parki_comm::Comm;
    use zoltan_sys as z;

    /// A Zoltan structure holding the cuts; destroyed (collectively freeing its communicator
    /// duplicate) on drop.
    pub(super) struct Handle {
        zz: *mut z::Zoltan_Struct,
        comm: Comm,
    }

    // SAFETY: the structure is only touched through `&self`/`drop` under the MPI lock
    // (`Comm::with_raw_locked`), or by Zoltan_LB_Point_Assign, which reads the kept cuts only.
    unsafe impl Send for Handle {}
    // SAFETY: see Send.
    unsafe impl Sync for Handle {}

    impl Handle {
        pub(super) fn point_owner(&self, p: [f64; 3]) -> usize {
            let mut coords = p;
            let mut proc_: c_int = 0;
            // SAFETY: `zz` is live with KEEP_CUTS set; `coords` holds the 3 coordinates of the
            // partition's dimension; the call reads the cuts and writes `proc_`.
            let rc = unsafe { z::Zoltan_LB_Point_Assign(self.zz, coords.as_mut_ptr(), &mut proc_) };
            assert!(rc == z::ZOLTAN_OK as c_int || rc == z::ZOLTAN_WARN as c_int, "Zoltan_LB_Point_Assign: {rc}");
            proc_ as usize
        }
    }

    impl Drop for Handle {
        fn drop(&mut self) {
            if self.zz.is_null() {
                return;
            }
            let zz = &mut self.zz;
            let freed = self.comm.with_raw_locked(|_| {
                // SAFETY: `zz` was made by Zoltan_Create and is destroyed once; MPI is live
                // (the communicator is).
                unsafe { z::Zoltan_Destroy(zz) }
            });
            debug_assert!(freed.is_some());
        }
    }

    /// The points Zoltan's callbacks read.
    struct Points<'a> {
        points: &'a [[f64; 3]],
        offset: u32,
    }

    unsafe extern "C" fn num_obj(data: *mut c_void, ierr: *mut c_int) -> c_int {
        // SAFETY: `data` is the `Points` registered with the callback, alive during the call.
        let p = unsafe { &*(data as *const Points) };
        // SAFETY: Zoltan passes a writable error code.
        unsafe { *ierr = z::ZOLTAN_OK as c_int };
        p.points.len() as c_int
    }

    unsafe extern "C" fn obj_list(
        data: *mut c_void,
        _ngid: c_int,
        _nlid: c_int,
        gids: z::ZOLTAN_ID_PTR,
        lids: z::ZOLTAN_ID_PTR,
        _wdim: c_int,
        _wgts: *mut f32,
        ierr: *mut c_int,
    ) {
        // SAFETY: as in `num_obj`; Zoltan allocated one global and one local id (one entry
        // each, NUM_GID_ENTRIES = NUM_LID_ENTRIES = 1) per object.
        let p = unsafe { &*(data as *const Points) };
        let n = p.points.len();
        // SAFETY: see above.
        let (g, l) = unsafe { (std::slice::from_raw_parts_mut(gids, n), std::slice::from_raw_parts_mut(lids, n)) };
        for i in 0..n {
            g[i] = p.offset + i as u32;
            l[i] = i as u32;
        }
        // SAFETY: a writable error code.
        unsafe { *ierr = z::ZOLTAN_OK as c_int };
    }

    unsafe extern "C" fn num_geom(_data: *mut c_void, ierr: *mut c_int) -> c_int {
        // SAFETY: a writable error code.
        unsafe { *ierr = z::ZOLTAN_OK as c_int };
        3
    }

    unsafe extern "C" fn geom_multi(
        data: *mut c_void,
        _ngid: c_int,
        _nlid: c_int,
        num_obj: c_int,
        _gids: z::ZOLTAN_ID_PTR,
        lids: z::ZOLTAN_ID_PTR,
        num_dim: c_int,
        geom: *mut f64,
        ierr: *mut c_int,
    ) {
        // SAFETY: as in `obj_list`: `num_obj` local ids, `num_obj * num_dim` coordinates.
        let p = unsafe { &*(data as *const Points) };
        let n = num_obj.max(0) as usize;
        // SAFETY: see above.
        let (l, g) = unsafe { (std::slice::from_raw_parts(lids, n), std::slice::from_raw_parts_mut(geom, n * 3)) };
        if num_dim != 3 {
            // SAFETY: a writable error code.
            unsafe { *ierr = z::ZOLTAN_FATAL };
            return;
        }
        for k in 0..n {
            g[3 * k..3 * k + 3].copy_from_slice(&p.points[l[k] as usize]);
        }
        // SAFETY: a writable error code.
        unsafe { *ierr = z::ZOLTAN_OK as c_int };
    }

    static INIT: Once = Once::new();

    /// Runs RCB over the ranks' points (global ids from `offset`): the handle with the cuts and
    /// each local point's part, or Zoltan's failure.
    pub(super) fn partition(comm: &Comm, points: &[[f64; 3]], offset: u32) -> (Handle, Result<Vec<u32>, String>) {
        let data = Points { points, offset };
        let data_ptr = &data as *const Points as *mut c_void;
        let run = comm.with_raw_locked(|raw| {
            let mut failure: Option<String> = None;
            INIT.call_once(|| {
                let mut ver = 0f32;
                // SAFETY: MPI is initialised (a communicator exists), so Zoltan ignores argc/argv.
                let rc = unsafe { z::Zoltan_Initialize(0, std::ptr::null_mut(), &mut ver) };
                if rc != z::ZOLTAN_OK as c_int {
                    failure = Some(format!("Zoltan_Initialize returned {rc}"));
                }
            });
            // SAFETY: `raw` is the live communicator; Zoltan duplicates it.
            let zz = unsafe { z::Zoltan_Create(raw) };
            if zz.is_null() {
                return (zz, Err("Zoltan_Create returned null".to_string()));
            }
            let params = [
                ("DEBUG_LEVEL", "0"),
                ("LB_METHOD", "RCB"),
                ("NUM_GID_ENTRIES", "1"),
                ("NUM_LID_ENTRIES", "1"),
                ("OBJ_WEIGHT_DIM", "0"),
                ("RETURN_LISTS", "PARTS"),
                ("RCB_RECTILINEAR_BLOCKS", "1"),
                ("KEEP_CUTS", "1"),
                ("RCB_OUTPUT_LEVEL", "0"),
            ];
            for (k, v) in params {
                let (k, v) = (CString::new(k).expect("no NUL"), CString::new(v).expect("no NUL"));
                // SAFETY: `zz` is live; both strings are NUL-terminated and outlive the call.
                let rc = unsafe { z::Zoltan_Set_Param(zz, k.as_ptr() as *const c_char, v.as_ptr() as *const c_char) };
                if rc != z::ZOLTAN_OK as c_int && failure.is_none() {
                    failure = Some(format!("Zoltan_Set_Param({k:?}, {v:?}) returned {rc}"));
                }
            }
            // SAFETY: the callbacks match Zoltan's signatures and read `data`, which outlives
            // Zoltan_LB_Partition below (the only call that invokes them).
            unsafe {
                z::Zoltan_Set_Num_Obj_Fn(zz, Some(num_obj), data_ptr);
                z::Zoltan_Set_Obj_List_Fn(zz, Some(obj_list), data_ptr);
                z::Zoltan_Set_Num_Geom_Fn(zz, Some(num_geom), data_ptr);
                z::Zoltan_Set_Geom_Multi_Fn(zz, Some(geom_multi), data_ptr);
            }
            let mut owners = vec![0u32; points.len()];
            let (mut changes, mut ngid, mut nlid, mut nimp, mut nexp) = (0, 0, 0, 0, 0);
            let mut imp_g: z::ZOLTAN_ID_PTR = std::ptr::null_mut();
            let mut imp_l: z::ZOLTAN_ID_PTR = std::ptr::null_mut();
            let mut exp_g: z::ZOLTAN_ID_PTR = std::ptr::null_mut();
            let mut exp_l: z::ZOLTAN_ID_PTR = std::ptr::null_mut();
            let (mut imp_p, mut imp_t, mut exp_p, mut exp_t): (*mut c_int, *mut c_int, *mut c_int, *mut c_int) =
                (std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut());
            // SAFETY: every out-pointer is a valid local; Zoltan allocates the lists, freed
            // below by Zoltan_LB_Free_Part.
            let rc = unsafe {
                z::Zoltan_LB_Partition(
                    zz,
                    &mut changes,
                    &mut ngid,
                    &mut nlid,
                    &mut nimp,
                    &mut imp_g,
                    &mut imp_l,
                    &mut imp_p,
                    &mut imp_t,
                    &mut nexp,
                    &mut exp_g,
                    &mut exp_l,
                    &mut exp_p,
                    &mut exp_t,
                )
            };
            if rc != z::ZOLTAN_OK as c_int && rc != z::ZOLTAN_WARN as c_int {
                failure.get_or_insert(format!("Zoltan_LB_Partition (RCB) returned {rc}"));
            } else {
                // RETURN_LISTS = PARTS: the export lists hold every local object and its part
                let n = nexp.max(0) as usize;
                if n != points.len() {
                    failure.get_or_insert(format!("Zoltan returned {n} part assignments for {} points", points.len()));
                } else if n > 0 {
                    // SAFETY: Zoltan allocated `n` local ids and `n` parts.
                    let (l, t) =
                        unsafe { (std::slice::from_raw_parts(exp_l, n), std::slice::from_raw_parts(exp_t, n)) };
                    for k in 0..n {
                        owners[l[k] as usize] = t[k] as u32;
                    }
                }
            }
            // SAFETY: the lists Zoltan_LB_Partition allocated, freed once (null ones skipped).
            unsafe {
                z::Zoltan_LB_Free_Part(&mut imp_g, &mut imp_l, &mut imp_p, &mut imp_t);
                z::Zoltan_LB_Free_Part(&mut exp_g, &mut exp_l, &mut exp_p, &mut exp_t);
            }
            (zz, failure.map_or(Ok(owners), Err))
        });
        let (zz, owners) = run.expect("several ranks have an MPI communicator");
        (Handle { zz, comm: comm.clone() }, owners)
    }
}
