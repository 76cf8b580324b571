//! The FFTW calls, behind one trait for both precisions.

use std::os::raw::{c_char, c_int};

use fftw_sys as sys;
use parki_core::{Error, Real, Result};
use parki_decomp::GridLayout;

use crate::PlanRigor;

// fftw-sys links libfftw3 and libfftw3f; the threaded planner lives in separate libraries.
#[link(name = "fftw3_threads")]
extern "C" {}
#[link(name = "fftw3f_threads")]
extern "C" {}

const FFTW_MEASURE: u32 = 0;
const FFTW_ESTIMATE: u32 = 1 << 6;
const FFTW_UNALIGNED: u32 = 1 << 1;

/// The alignment, in bytes, that the new arrays of a plan made without `FFTW_UNALIGNED` must
/// share with the array it was planned on: FFTW checks 16 bytes (`fftw_alignment_of`), its AVX
/// and AVX-512 codelets' aligned loads assume up to 64; a pointer agreeing modulo 64 satisfies
/// both.
pub(crate) const SIMD_ALIGN: usize = 64;

/// A real type FFTW transforms (`f64` through `fftw_*`, `f32` through `fftwf_*`).
pub trait FftReal: Real + parki_comm::Pod + Default {
    /// Opaque plan pointer.
    #[doc(hidden)]
    type RawPlan: Copy;
    /// RustFFT's complex transform of `n` points (`forward`: `e^{-i k x}`), for contiguous
    /// lines of interleaved complex values.
    #[doc(hidden)]
    fn native_lines(n: usize, forward: bool) -> Box<dyn NativeLines<Self>>;
    /// RustFFT's real-to-complex (`forward`) or complex-to-real transform of `n` real points
    /// (`n` even), through the `realfft` crate, for rows in FFTW's in-place r2c layout.
    #[doc(hidden)]
    fn native_rows(n: usize, forward: bool) -> Box<dyn NativeRows<Self>>;
    /// Plans `howmany` in-place transforms.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn plan_many(
        n: &[c_int; 3],
        howmany: c_int,
        data: *mut Self,
        real_embed: &[c_int; 3],
        real_dist: c_int,
        complex_embed: &[c_int; 3],
        complex_dist: c_int,
        forward: bool,
        flags: u32,
    ) -> Self::RawPlan;
    /// Whether the plan is null.
    #[doc(hidden)]
    fn is_null(plan: Self::RawPlan) -> bool;
    /// Executes on new data with the planned layout.
    #[doc(hidden)]
    unsafe fn execute(plan: Self::RawPlan, data: *mut Self, forward: bool);
    /// Destroys the plan.
    #[doc(hidden)]
    unsafe fn destroy(plan: Self::RawPlan);
    /// Sets the thread count for plans made afterwards.
    #[doc(hidden)]
    unsafe fn plan_with_nthreads(n: c_int);
    /// Plans an in-place 1-D transform of `n` points with input/output strides `stride` (in
    /// units of the input and output element: reals or complex) over the loops `howmany`
    /// (`(count, input stride, output stride)`).
    #[doc(hidden)]
    unsafe fn plan_guru(
        kind: Kind,
        n: isize,
        stride: (isize, isize),
        howmany: &[(isize, isize, isize)],
        data: *mut Self,
        flags: u32,
    ) -> Self::RawPlan;
    /// Adds FFTW wisdom in its text form (a NUL-terminated string) to this precision's
    /// wisdom; nonzero when FFTW accepted it.
    #[doc(hidden)]
    unsafe fn import_wisdom(text: *const c_char) -> c_int;
    /// This precision's wisdom in FFTW's text form, allocated by FFTW with `malloc` (null when
    /// FFTW could not allocate it).
    #[doc(hidden)]
    unsafe fn export_wisdom() -> *mut c_char;
    /// Executes a guru plan on `data`.
    #[doc(hidden)]
    unsafe fn execute_guru(plan: Self::RawPlan, kind: Kind, data: *mut Self);
    /// Plans an in-place multi-dimensional real-to-real transform: `dims` are
    /// `(n, input stride, output stride)` slowest first, one kind each, over the loops `howmany`.
    #[doc(hidden)]
    unsafe fn plan_guru_r2r(
        dims: &[(isize, isize, isize)],
        kinds: &[R2rKind],
        howmany: &[(isize, isize, isize)],
        data: *mut Self,
        flags: u32,
    ) -> Self::RawPlan;
}

/// Kind of a 1-D transform.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Real to half-complex, forward.
    R2c,
    /// Half-complex to real, backward.
    C2r,
    /// Complex, forward (`e^{-i k x}`).
    C2cForward,
    /// Complex, backward.
    C2cBackward,
    /// Real to real (DCT or DST), in place on real data.
    R2r(R2rKind),
}

/// The real-to-real transforms of FFTW (unnormalised, FFTW's definitions).
///
/// With `N` the transform length: DCT-II `Y_k = 2 sum_j X_j cos(pi (j + 1/2) k / N)`, DCT-III
/// its inverse up to `2N`, DCT-IV `Y_k = 2 sum_j X_j cos(pi (j + 1/2)(k + 1/2) / N)`, DST-II
/// `Y_k = 2 sum_j X_j sin(pi (j + 1/2)(k + 1) / N)`, DST-III its inverse, DST-IV with
/// `sin(pi (j + 1/2)(k + 1/2) / N)`, and DCT-I `Y_k = X_0 + (-1)^k X_{N-1} + 2 sum_{j=1}^{N-2}
/// X_j cos(pi j k / (N - 1))` (digest seed-002 §2.1, eqs. 2.5-2.8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum R2rKind {
    /// DCT-I (`REDFT00`).
    Dct1,
    /// DCT-II (`REDFT10`).
    Dct2,
    /// DCT-III (`REDFT01`).
    Dct3,
    /// DCT-IV (`REDFT11`).
    Dct4,
    /// DST-I (`RODFT00`).
    Dst1,
    /// DST-II (`RODFT10`).
    Dst2,
    /// DST-III (`RODFT01`).
    Dst3,
    /// DST-IV (`RODFT11`).
    Dst4,
}

impl R2rKind {
    fn fftw(self) -> sys::fftw_r2r_kind {
        use sys::fftw_r2r_kind as K;
        match self {
            R2rKind::Dct1 => K::FFTW_REDFT00,
            R2rKind::Dct2 => K::FFTW_REDFT10,
            R2rKind::Dct3 => K::FFTW_REDFT01,
            R2rKind::Dct4 => K::FFTW_REDFT11,
            R2rKind::Dst1 => K::FFTW_RODFT00,
            R2rKind::Dst2 => K::FFTW_RODFT10,
            R2rKind::Dst3 => K::FFTW_RODFT01,
            R2rKind::Dst4 => K::FFTW_RODFT11,
        }
    }

    /// The logical length of the periodic extension FFTW normalises by: forward then
    /// backward (or DCT-I twice) multiplies by this. `2 (N - 1)` for DCT-I, `2 (N + 1)` for
    /// DST-I, `2 N` otherwise.
    pub fn logical_len(self, n: usize) -> usize {
        match self {
            R2rKind::Dct1 => 2 * (n.max(2) - 1),
            R2rKind::Dst1 => 2 * (n + 1),
            _ => 2 * n,
        }
    }
}

/// Initialises FFTW's threads for both precisions.
///
/// # Safety
/// Must run once, before any plan is made.
pub unsafe fn init_threads() {
    // SAFETY: forwarded to the caller.
    unsafe {
        sys::fftw_init_threads();
        sys::fftwf_init_threads();
    }
}

/// Complex transforms of one length over contiguous lines of interleaved complex values
/// (`re, im` pairs of `T`), in place.
#[doc(hidden)]
pub trait NativeLines<T>: Send + Sync {
    /// Scratch values (reals: twice the complex points) that [`process`](Self::process) needs.
    fn scratch_len(&self) -> usize;
    /// Transforms each line of `lines` (a multiple of the length, in complex points), using
    /// `scratch` (at least [`scratch_len`](Self::scratch_len) reals).
    fn process(&self, lines: &mut [T], scratch: &mut [T]);
}

/// [`NativeLines`] through a RustFFT plan.
struct RustFftLines<U: rustfft::FftNum>(std::sync::Arc<dyn rustfft::Fft<U>>);

impl<U: rustfft::FftNum> NativeLines<U> for RustFftLines<U> {
    fn scratch_len(&self) -> usize {
        2 * self.0.get_inplace_scratch_len()
    }

    fn process(&self, lines: &mut [U], scratch: &mut [U]) {
        self.0.process_with_scratch(as_complex(lines), as_complex(scratch));
    }
}

/// Real-to-complex or complex-to-real transforms of one even length `n` on rows in FFTW's
/// in-place layout (`2 (n/2 + 1)` reals: `n` reals in, `n/2 + 1` complex values out, or back).
#[doc(hidden)]
pub trait NativeRows<T>: Send + Sync {
    /// Scratch reals that [`process`](Self::process) needs.
    fn scratch_len(&self) -> usize;
    /// Transforms one row (`row` holds at least `2 (n/2 + 1)` reals) in place, through
    /// `scratch` (at least [`scratch_len`](Self::scratch_len) reals). Backward, the imaginary
    /// parts of the zero and Nyquist modes are ignored, as FFTW's complex-to-real ignores them.
    fn process(&self, row: &mut [T], scratch: &mut [T]);
}

/// [`NativeRows`] through a `realfft` plan.
enum RealFftRows<U: rustfft::FftNum> {
    Forward(std::sync::Arc<dyn realfft::RealToComplex<U>>),
    Backward(std::sync::Arc<dyn realfft::ComplexToReal<U>>),
}

/// `v`'s pairs of reals as complex values (`Complex<U>` is `repr(C)`, `re` then `im`).
fn as_complex<U: rustfft::FftNum>(v: &mut [U]) -> &mut [rustfft::num_complex::Complex<U>] {
    // SAFETY: the layout of `Complex<U>` is two `U`s; the length is halved (rounded down).
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut rustfft::num_complex::Complex<U>, v.len() / 2) }
}

impl<U: rustfft::FftNum> NativeRows<U> for RealFftRows<U> {
    fn scratch_len(&self) -> usize {
        match self {
            RealFftRows::Forward(p) => p.len() + 2 * p.get_scratch_len(),
            RealFftRows::Backward(p) => 2 * (p.len() / 2 + 1) + 2 * p.get_scratch_len(),
        }
    }

    fn process(&self, row: &mut [U], scratch: &mut [U]) {
        match self {
            RealFftRows::Forward(p) => {
                let n = p.len();
                let (input, rest) = scratch.split_at_mut(n);
                input.copy_from_slice(&row[..n]);
                let work = 2 * p.get_scratch_len();
                let result = p.process_with_scratch(
                    input,
                    as_complex(&mut row[..2 * (n / 2 + 1)]),
                    as_complex(&mut rest[..work]),
                );
                // the lengths are the plan's by construction: no error is possible
                debug_assert!(result.is_ok(), "{result:?}");
            }
            RealFftRows::Backward(p) => {
                let (n, h) = (p.len(), 2 * (p.len() / 2 + 1));
                let (input, rest) = scratch.split_at_mut(h);
                input.copy_from_slice(&row[..h]);
                // realfft refuses non-zero imaginary parts of the zero and Nyquist modes;
                // FFTW ignores them, and so do we
                input[1] = U::zero();
                if n.is_multiple_of(2) {
                    input[h - 1] = U::zero();
                }
                let work = 2 * p.get_scratch_len();
                let result = p.process_with_scratch(as_complex(input), &mut row[..n], as_complex(&mut rest[..work]));
                debug_assert!(result.is_ok(), "{result:?}");
            }
        }
    }
}

macro_rules! impl_fft_real {
    ($t:ty, $plan:ty, $complex:ty, $r2c:ident, $c2r:ident, $exec_r2c:ident, $exec_c2r:ident, $destroy:ident, $threads:ident,
     $iodim:ident, $g_r2c:ident, $g_c2r:ident, $g_dft:ident, $exec_dft:ident, $g_r2r:ident, $exec_r2r:ident, $import:ident, $export:ident) => {
        impl FftReal for $t {
            type RawPlan = $plan;
            fn native_rows(n: usize, forward: bool) -> Box<dyn NativeRows<$t>> {
                let mut planner = realfft::RealFftPlanner::<$t>::new();
                Box::new(if forward {
                    RealFftRows::Forward(planner.plan_fft_forward(n))
                } else {
                    RealFftRows::Backward(planner.plan_fft_inverse(n))
                })
            }
            fn native_lines(n: usize, forward: bool) -> Box<dyn NativeLines<$t>> {
                let mut planner = rustfft::FftPlanner::<$t>::new();
                let fft = if forward { planner.plan_fft_forward(n) } else { planner.plan_fft_inverse(n) };
                Box::new(RustFftLines(fft))
            }
            #[allow(clippy::too_many_arguments)]
            unsafe fn plan_many(
                n: &[c_int; 3],
                howmany: c_int,
                data: *mut $t,
                real_embed: &[c_int; 3],
                real_dist: c_int,
                complex_embed: &[c_int; 3],
                complex_dist: c_int,
                forward: bool,
                flags: u32,
            ) -> Self::RawPlan {
                let c = data as *mut $complex;
                // SAFETY: the caller passes a buffer of `howmany * real_dist` reals.
                unsafe {
                    if forward {
                        sys::$r2c(
                            3,
                            n.as_ptr(),
                            howmany,
                            data,
                            real_embed.as_ptr(),
                            1,
                            real_dist,
                            c,
                            complex_embed.as_ptr(),
                            1,
                            complex_dist,
                            flags,
                        )
                    } else {
                        sys::$c2r(
                            3,
                            n.as_ptr(),
                            howmany,
                            c,
                            complex_embed.as_ptr(),
                            1,
                            complex_dist,
                            data,
                            real_embed.as_ptr(),
                            1,
                            real_dist,
                            flags,
                        )
                    }
                }
            }
            fn is_null(plan: Self::RawPlan) -> bool {
                plan.is_null()
            }
            unsafe fn execute(plan: Self::RawPlan, data: *mut $t, forward: bool) {
                let c = data as *mut $complex;
                // SAFETY: same layout and alignment as planned (caller's contract).
                unsafe {
                    if forward {
                        sys::$exec_r2c(plan, data, c)
                    } else {
                        sys::$exec_c2r(plan, c, data)
                    }
                }
            }
            unsafe fn destroy(plan: Self::RawPlan) {
                // SAFETY: plan came from plan_many and is destroyed once.
                unsafe { sys::$destroy(plan) }
            }
            unsafe fn plan_with_nthreads(n: c_int) {
                // SAFETY: planner state, called under the planner mutex.
                unsafe { sys::$threads(n) }
            }
            unsafe fn plan_guru(
                kind: Kind,
                n: isize,
                stride: (isize, isize),
                howmany: &[(isize, isize, isize)],
                data: *mut $t,
                flags: u32,
            ) -> Self::RawPlan {
                let dims = [sys::$iodim { n, is: stride.0, os: stride.1 }];
                let loops: Vec<sys::$iodim> = howmany.iter().map(|&(n, is, os)| sys::$iodim { n, is, os }).collect();
                let c = data as *mut $complex;
                let hr = loops.len() as c_int;
                // SAFETY: the caller describes an in-place layout inside `data`.
                unsafe {
                    match kind {
                        Kind::R2c => sys::$g_r2c(1, dims.as_ptr(), hr, loops.as_ptr(), data, c, flags),
                        Kind::C2r => sys::$g_c2r(1, dims.as_ptr(), hr, loops.as_ptr(), c, data, flags),
                        Kind::C2cForward => sys::$g_dft(1, dims.as_ptr(), hr, loops.as_ptr(), c, c, -1, flags),
                        Kind::C2cBackward => sys::$g_dft(1, dims.as_ptr(), hr, loops.as_ptr(), c, c, 1, flags),
                        Kind::R2r(k) => {
                            let kind = [k.fftw()];
                            sys::$g_r2r(1, dims.as_ptr(), hr, loops.as_ptr(), data, data, kind.as_ptr(), flags)
                        }
                    }
                }
            }
            unsafe fn plan_guru_r2r(
                dims: &[(isize, isize, isize)],
                kinds: &[R2rKind],
                howmany: &[(isize, isize, isize)],
                data: *mut $t,
                flags: u32,
            ) -> Self::RawPlan {
                let d: Vec<sys::$iodim> = dims.iter().map(|&(n, is, os)| sys::$iodim { n, is, os }).collect();
                let loops: Vec<sys::$iodim> = howmany.iter().map(|&(n, is, os)| sys::$iodim { n, is, os }).collect();
                let k: Vec<_> = kinds.iter().map(|k| k.fftw()).collect();
                // SAFETY: the caller describes an in-place layout inside `data`.
                unsafe {
                    sys::$g_r2r(
                        d.len() as c_int,
                        d.as_ptr(),
                        loops.len() as c_int,
                        loops.as_ptr(),
                        data,
                        data,
                        k.as_ptr(),
                        flags,
                    )
                }
            }
            unsafe fn import_wisdom(text: *const c_char) -> c_int {
                // SAFETY: the caller passes a NUL-terminated string and holds the planner mutex.
                unsafe { sys::$import(text) }
            }
            unsafe fn export_wisdom() -> *mut c_char {
                // SAFETY: the caller holds the planner mutex.
                unsafe { sys::$export() }
            }
            unsafe fn execute_guru(plan: Self::RawPlan, kind: Kind, data: *mut $t) {
                let c = data as *mut $complex;
                // SAFETY: same layout as planned (caller's contract).
                unsafe {
                    match kind {
                        Kind::R2c => sys::$exec_r2c(plan, data, c),
                        Kind::C2r => sys::$exec_c2r(plan, c, data),
                        Kind::R2r(_) => sys::$exec_r2r(plan, data, data),
                        Kind::C2cForward | Kind::C2cBackward => sys::$exec_dft(plan, c, c),
                    }
                }
            }
        }
    };
}

impl_fft_real!(
    f64,
    sys::fftw_plan,
    sys::fftw_complex,
    fftw_plan_many_dft_r2c,
    fftw_plan_many_dft_c2r,
    fftw_execute_dft_r2c,
    fftw_execute_dft_c2r,
    fftw_destroy_plan,
    fftw_plan_with_nthreads,
    fftw_iodim64,
    fftw_plan_guru64_dft_r2c,
    fftw_plan_guru64_dft_c2r,
    fftw_plan_guru64_dft,
    fftw_execute_dft,
    fftw_plan_guru64_r2r,
    fftw_execute_r2r,
    fftw_import_wisdom_from_string,
    fftw_export_wisdom_to_string
);
impl_fft_real!(
    f32,
    sys::fftwf_plan,
    sys::fftwf_complex,
    fftwf_plan_many_dft_r2c,
    fftwf_plan_many_dft_c2r,
    fftwf_execute_dft_r2c,
    fftwf_execute_dft_c2r,
    fftwf_destroy_plan,
    fftwf_plan_with_nthreads,
    fftwf_iodim64,
    fftwf_plan_guru64_dft_r2c,
    fftwf_plan_guru64_dft_c2r,
    fftwf_plan_guru64_dft,
    fftwf_execute_dft,
    fftwf_plan_guru64_r2r,
    fftwf_execute_r2r,
    fftwf_import_wisdom_from_string,
    fftwf_export_wisdom_to_string
);

/// FFTW planner flags for `rigor`.
fn planner_flags(rigor: PlanRigor) -> u32 {
    match rigor {
        PlanRigor::Estimate | PlanRigor::MeasureLines => FFTW_ESTIMATE,
        PlanRigor::Measure => FFTW_MEASURE,
    }
}

/// A plan pointer owned by one [`Plan`] or [`Plan1d`], destroyed on drop.
struct Owned<T: FftReal>(T::RawPlan);

// SAFETY: FFTW plans may be executed from any thread (only planning is not thread safe), and
// executing one plan concurrently is prevented by `&mut` on the buffer.
unsafe impl<T: FftReal> Send for Owned<T> {}
// SAFETY: see Send.
unsafe impl<T: FftReal> Sync for Owned<T> {}

impl<T: FftReal> Drop for Owned<T> {
    fn drop(&mut self) {
        let _lock = fftw::FFTW_MUTEX.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: destroyed once, under the planner mutex.
        unsafe { T::destroy(self.0) }
    }
}

/// An owned FFTW plan of `howmany` components (or none when `howmany == 0`).
pub struct Plan<T: FftReal> {
    raw: Option<Owned<T>>,
    forward: bool,
}

impl<T: FftReal> Plan<T> {
    pub(crate) fn many(
        layout: &GridLayout,
        howmany: usize,
        data: *mut T,
        forward: bool,
        threads: usize,
        rigor: PlanRigor,
    ) -> Result<Self> {
        if howmany == 0 {
            return Ok(Self { raw: None, forward });
        }
        let [mx, my, mz] = layout.global;
        let to_int = |v: usize| -> Result<c_int> {
            c_int::try_from(v)
                .map_err(|_| Error::Resource { message: format!("grid dimension {v} exceeds FFTW's int range") })
        };
        let n = [to_int(mz)?, to_int(my)?, to_int(mx)?];
        let real_embed = [n[0], n[1], to_int(layout.row_stride())?];
        let complex_embed = [n[0], n[1], to_int(layout.complex_row())?];
        let flags = planner_flags(rigor);
        let raw = {
            let _lock = fftw::FFTW_MUTEX.lock().unwrap_or_else(|e| e.into_inner());
            // SAFETY: planner calls under FFTW's global planner mutex; `data` holds `howmany`
            // components of `layout.real_len()` reals (checked by the caller).
            unsafe {
                T::plan_with_nthreads(threads.max(1) as c_int);
                T::plan_many(
                    &n,
                    to_int(howmany)?,
                    data,
                    &real_embed,
                    to_int(layout.real_len())?,
                    &complex_embed,
                    to_int(layout.complex_len())?,
                    forward,
                    flags,
                )
            }
        };
        if T::is_null(raw) {
            return Err(Error::Resource { message: format!("FFTW could not plan a {mx}x{my}x{mz} transform") });
        }
        Ok(Self { raw: Some(Owned(raw)), forward })
    }

    /// # Safety
    /// `data` must have the layout, component count and alignment the plan was made for.
    pub(crate) unsafe fn execute(&self, data: *mut T) {
        if let Some(Owned(raw)) = self.raw {
            // SAFETY: forwarded to the caller.
            unsafe { T::execute(raw, data, self.forward) }
        }
    }
}

/// SIMD plans of one transform layout, one per address class (modulo [`SIMD_ALIGN`]) of the
/// pointers it runs at (FFTW's new-array execute needs the planned alignment).
pub(crate) struct ClassPlans<T: FftReal> {
    plans: Vec<(usize, Plan1d<T>)>,
}

impl<T: FftReal> ClassPlans<T> {
    /// Plans with `make` at the first of `at` in each address class.
    pub(crate) fn new(
        at: impl IntoIterator<Item = *mut T>,
        make: impl Fn(*mut T) -> Result<Plan1d<T>>,
    ) -> Result<Self> {
        let mut plans: Vec<(usize, Plan1d<T>)> = Vec::new();
        for p in at {
            let class = p as usize % SIMD_ALIGN;
            if !plans.iter().any(|q| q.0 == class) {
                plans.push((class, make(p)?));
            }
        }
        Ok(Self { plans })
    }

    /// The plan for a pointer's class, if one was made.
    pub(crate) fn at(&self, p: *mut T) -> Option<&Plan1d<T>> {
        let class = p as usize % SIMD_ALIGN;
        self.plans.iter().find(|c| c.0 == class).map(|c| &c.1)
    }
}

/// An owned 1-D guru plan (in place), executed on the buffer it was planned for.
pub(crate) struct Plan1d<T: FftReal> {
    raw: Option<Owned<T>>,
    kind: Kind,
}

impl<T: FftReal> Plan1d<T> {
    /// Plans (see [`FftReal::plan_guru`]); no plan when a loop count or `n` is zero.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        kind: Kind,
        n: usize,
        stride: (usize, usize),
        howmany: &[(usize, usize, usize)],
        data: *mut T,
        threads: usize,
        rigor: PlanRigor,
    ) -> Result<Self> {
        Self::with_flags(kind, n, stride, howmany, data, threads, planner_flags(rigor))
    }

    /// As [`new`](Self::new), single-threaded, for FFTW's new-array execute (the caller runs
    /// blocks of lines or planes in parallel). `simd: false` plans with `FFTW_UNALIGNED` (scalar
    /// codelets), executable at any element offset of `data`; `simd: true` allows FFTW's SIMD
    /// codelets, executable only on pointers whose address agrees with `data`'s modulo
    /// [`SIMD_ALIGN`] bytes.
    pub(crate) fn single(
        kind: Kind,
        n: usize,
        stride: (usize, usize),
        howmany: &[(usize, usize, usize)],
        data: *mut T,
        rigor: PlanRigor,
        simd: bool,
    ) -> Result<Self> {
        let flags = planner_flags(rigor) | if simd { 0 } else { FFTW_UNALIGNED };
        Self::with_flags(kind, n, stride, howmany, data, 1, flags)
    }

    /// A multi-dimensional in-place real-to-real plan (see [`FftReal::plan_guru_r2r`]) on
    /// `threads` threads; no plan when a loop count or a size is zero.
    pub(crate) fn r2r_nd(
        dims: &[(usize, usize, usize)],
        kinds: &[R2rKind],
        howmany: &[(usize, usize, usize)],
        data: *mut T,
        threads: usize,
        rigor: PlanRigor,
    ) -> Result<Self> {
        Self::r2r_nd_flags(dims, kinds, howmany, data, threads, planner_flags(rigor))
    }

    /// As [`r2r_nd`](Self::r2r_nd), single-threaded and executable on any buffer of the same
    /// layout (`FFTW_UNALIGNED`, FFTW_ESTIMATE): threads may execute it at once on their own
    /// buffers.
    pub(crate) fn r2r_nd_unaligned(
        dims: &[(usize, usize, usize)],
        kinds: &[R2rKind],
        howmany: &[(usize, usize, usize)],
        data: *mut T,
        threads: usize,
    ) -> Result<Self> {
        let flags = planner_flags(PlanRigor::Estimate) | FFTW_UNALIGNED;
        Self::r2r_nd_flags(dims, kinds, howmany, data, threads, flags)
    }

    fn r2r_nd_flags(
        dims: &[(usize, usize, usize)],
        kinds: &[R2rKind],
        howmany: &[(usize, usize, usize)],
        data: *mut T,
        threads: usize,
        flags: u32,
    ) -> Result<Self> {
        let kind = Kind::R2r(kinds[0]);
        if dims.iter().chain(howmany).any(|h| h.0 == 0) {
            return Ok(Self { raw: None, kind });
        }
        let conv = |v: &[(usize, usize, usize)]| -> Vec<(isize, isize, isize)> {
            v.iter().map(|&(a, b, c)| (a as isize, b as isize, c as isize)).collect()
        };
        let raw = {
            let _lock = fftw::FFTW_MUTEX.lock().unwrap_or_else(|e| e.into_inner());
            // SAFETY: under the planner mutex; the caller's layout lies inside `data`.
            unsafe {
                T::plan_with_nthreads(threads.max(1) as c_int);
                T::plan_guru_r2r(&conv(dims), kinds, &conv(howmany), data, flags)
            }
        };
        if T::is_null(raw) {
            return Err(Error::Resource {
                message: format!("FFTW could not plan a {}-D real-to-real transform", dims.len()),
            });
        }
        Ok(Self { raw: Some(Owned(raw)), kind })
    }

    fn with_flags(
        kind: Kind,
        n: usize,
        stride: (usize, usize),
        howmany: &[(usize, usize, usize)],
        data: *mut T,
        threads: usize,
        flags: u32,
    ) -> Result<Self> {
        if n == 0 || howmany.iter().any(|h| h.0 == 0) {
            return Ok(Self { raw: None, kind });
        }
        let loops: Vec<(isize, isize, isize)> =
            howmany.iter().map(|&(a, b, c)| (a as isize, b as isize, c as isize)).collect();
        let raw = {
            let _lock = fftw::FFTW_MUTEX.lock().unwrap_or_else(|e| e.into_inner());
            // SAFETY: under the planner mutex; the caller's layout lies inside `data`.
            unsafe {
                T::plan_with_nthreads(threads.max(1) as c_int);
                T::plan_guru(kind, n as isize, (stride.0 as isize, stride.1 as isize), &loops, data, flags)
            }
        };
        if T::is_null(raw) {
            return Err(Error::Resource { message: format!("FFTW could not plan a 1-D transform of {n} points") });
        }
        Ok(Self { raw: Some(Owned(raw)), kind })
    }

    /// # Safety
    /// `data` must be the buffer (or one of identical layout and alignment) planned for.
    pub(crate) unsafe fn execute(&self, data: *mut T) {
        if let Some(Owned(raw)) = self.raw {
            // SAFETY: forwarded to the caller.
            unsafe { T::execute_guru(raw, self.kind, data) }
        }
    }
}
