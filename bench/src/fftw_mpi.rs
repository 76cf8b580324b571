//! FFTW's own MPI transform (libfftw3_mpi), the baseline of the distributed FFT benchmark:
//! a slab-decomposed r2c/c2r of `howmany` interleaved components, in place, with the output
//! left transposed (`FFTW_MPI_TRANSPOSED_OUT` / `_IN`), which is the FFTW analogue of our
//! spectrum staying in z-pencils.

use std::ffi::{c_int, c_uint};

use fftw_sys::{fftw_complex, fftw_destroy_plan, fftw_execute, fftw_plan};
use mpi::ffi::MPI_Comm;

const FFTW_MPI_DEFAULT_BLOCK: isize = 0;
const FFTW_MPI_TRANSPOSED_IN: c_uint = 1 << 29;
const FFTW_MPI_TRANSPOSED_OUT: c_uint = 1 << 30;
const FFTW_MEASURE: c_uint = 0;
const FFTW_ESTIMATE: c_uint = 1 << 6;

#[link(name = "fftw3_mpi")]
extern "C" {
    fn fftw_mpi_init();
    fn fftw_mpi_local_size_many_transposed(
        rnk: c_int,
        n: *const isize,
        howmany: isize,
        block0: isize,
        block1: isize,
        comm: MPI_Comm,
        local_n0: *mut isize,
        local_0_start: *mut isize,
        local_n1: *mut isize,
        local_1_start: *mut isize,
    ) -> isize;
    fn fftw_mpi_plan_many_dft_r2c(
        rnk: c_int,
        n: *const isize,
        howmany: isize,
        iblock: isize,
        oblock: isize,
        input: *mut f64,
        output: *mut fftw_complex,
        comm: MPI_Comm,
        flags: c_uint,
    ) -> fftw_plan;
    fn fftw_mpi_plan_many_dft_c2r(
        rnk: c_int,
        n: *const isize,
        howmany: isize,
        iblock: isize,
        oblock: isize,
        input: *mut fftw_complex,
        output: *mut f64,
        comm: MPI_Comm,
        flags: c_uint,
    ) -> fftw_plan;
}

/// A planned forward and backward FFTW-MPI transform on its own buffer.
pub struct FftwMpi {
    data: Vec<f64>,
    forward: fftw_plan,
    backward: fftw_plan,
}

impl FftwMpi {
    /// Plans a `[mx, my, mz]` (x fastest) transform of `howmany` components over `comm`.
    pub fn new(comm: MPI_Comm, grid: [usize; 3], howmany: usize, measure: bool) -> Self {
        let [mx, my, mz] = grid;
        // SAFETY: FFTW-MPI calls with valid pointers and an initialised communicator; the plans
        // are made for `data`, which lives as long as they do.
        unsafe {
            fftw_mpi_init();
            let n = [mz as isize, my as isize, mx as isize];
            let nc = [mz as isize, my as isize, (mx / 2 + 1) as isize];
            let (mut n0, mut s0, mut n1, mut s1) = (0, 0, 0, 0);
            let alloc = fftw_mpi_local_size_many_transposed(
                3,
                nc.as_ptr(),
                howmany as isize,
                FFTW_MPI_DEFAULT_BLOCK,
                FFTW_MPI_DEFAULT_BLOCK,
                comm,
                &mut n0,
                &mut s0,
                &mut n1,
                &mut s1,
            );
            let mut data = vec![0.0f64; 2 * alloc.max(1) as usize];
            let flags = if measure { FFTW_MEASURE } else { FFTW_ESTIMATE };
            let p = data.as_mut_ptr();
            let forward = fftw_mpi_plan_many_dft_r2c(
                3,
                n.as_ptr(),
                howmany as isize,
                FFTW_MPI_DEFAULT_BLOCK,
                FFTW_MPI_DEFAULT_BLOCK,
                p,
                p as *mut fftw_complex,
                comm,
                flags | FFTW_MPI_TRANSPOSED_OUT,
            );
            let backward = fftw_mpi_plan_many_dft_c2r(
                3,
                n.as_ptr(),
                howmany as isize,
                FFTW_MPI_DEFAULT_BLOCK,
                FFTW_MPI_DEFAULT_BLOCK,
                p as *mut fftw_complex,
                p,
                comm,
                flags | FFTW_MPI_TRANSPOSED_IN,
            );
            assert!(!forward.is_null() && !backward.is_null(), "FFTW-MPI could not plan a {grid:?} transform");
            // planning with MEASURE overwrites the buffer: fill it afterwards
            let local = n0 as usize * my * 2 * (mx / 2 + 1) * howmany;
            data[..local].iter_mut().enumerate().for_each(|(i, v)| *v = ((i % 977) as f64).sin());
            Self { data, forward, backward }
        }
    }

    /// Forward then backward.
    pub fn round_trip(&mut self) {
        // SAFETY: plans made for this buffer.
        unsafe {
            fftw_execute(self.forward);
            fftw_execute(self.backward);
        }
    }

    /// Scales the data (undoes the unnormalised round trip's growth between repetitions).
    pub fn scale(&mut self, s: f64) {
        self.data.iter_mut().for_each(|v| *v *= s);
    }
}

impl Drop for FftwMpi {
    fn drop(&mut self) {
        // SAFETY: plans made by FFTW, destroyed once.
        unsafe {
            fftw_destroy_plan(self.forward);
            fftw_destroy_plan(self.backward);
        }
    }
}
