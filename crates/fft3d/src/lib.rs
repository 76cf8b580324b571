//! 3-D FFTs over [`GridLayout`]s.
//!
//! [`Fft3d`] plans batched, in-place real-to-complex (forward) and complex-to-real (backward)
//! transforms of `howmany` grid components stored back to back, each in the padded r2c layout of
//! [`GridLayout`]. Plans are made once (FFTW, threaded) and executed many times on the
//! [`GridBuffer`] they were planned for. Transforms are unnormalised: forward then backward
//! multiplies by `Mx My Mz`.
//!
//! [`DistFft`] is the distributed transform over slab and pencil process grids (module [`dist`]).

pub mod axes;
pub mod dist;
mod ffi;
mod lines;
pub mod local;
mod planes;
mod ptr;
mod r2r_fft;
mod rows;
mod scratch;
pub mod wisdom;

use std::sync::Once;

use parki_core::memory::HugeBuffer;
use parki_core::{Error, Result};
use parki_decomp::GridLayout;

pub use axes::{
    memory_order, memory_order_by, proc_grid_limits, proc_grid_limits_in_order, AxisSpec, AxisTransform, ModeClass,
};
pub use dist::{DistFft, DistFftOptions, FftStage, FftTimes, R2rMethod};
pub use ffi::{FftReal, R2rKind};
pub use local::LocalR2r;

/// What transforms the complex lines of the strided passes (a1 and a2 complex DFTs) and the
/// a0 pass's contiguous rows (real-to-complex of even length, or complex); real-to-real lines
/// always run on FFTW or through FFTs ([`R2rMethod`]). design.md, "The strided passes' lines on
/// RustFFT".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LineEngine {
    /// RustFFT (its AVX algorithms where the CPU has them) on each block's lines gathered
    /// into contiguous lines in cache, then scattered back, and on the a0 rows (`realfft` for
    /// real rows) fused per plane or as a pass of their own: no planning cost, the same plan in
    /// every process, and 1.5-2x FFTW_ESTIMATE's strided plans on lengths that are not powers
    /// of two. On one rank a periodic grid then runs as three passes rather than FFTW's 3-D
    /// plan, except on the small power-of-two grids where that plan is faster.
    #[default]
    RustFft,
    /// FFTW's plans, in place or gathered per [`PlanRigor`]; on one rank a periodic grid runs
    /// as one FFTW 3-D plan.
    Fftw,
}

impl LineEngine {
    /// Name in run.toml and reports: `"rustfft"` or `"fftw"`.
    pub fn name(self) -> &'static str {
        match self {
            LineEngine::RustFft => "rustfft",
            LineEngine::Fftw => "fftw",
        }
    }

    /// Parses a run.toml name (the inverse of [`LineEngine::name`]).
    pub fn parse(s: &str) -> Option<Self> {
        [LineEngine::RustFft, LineEngine::Fftw].into_iter().find(|v| v.name() == s)
    }

    /// The names [`parse`](Self::parse) accepts, for error messages.
    pub const NAMES: &'static str = "\"rustfft\" or \"fftw\"";
}

/// How hard FFTW searches for a fast plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PlanRigor {
    /// Heuristic plans, instant, the same in every process (FFTW_ESTIMATE).
    #[default]
    Estimate,
    /// The strided passes' blocks gathered into a contiguous scratch and transformed by plans
    /// measured there (FFTW_MEASURE on an `n x B` block in cache: 0.05-0.2 s per line length
    /// and direction), every other plan estimated (design.md, "Measured block plans").
    MeasureLines,
    /// Every plan measured (FFTW_MEASURE): slower to make (seconds on large 3-D plans), faster
    /// to run.
    Measure,
}

impl PlanRigor {
    /// Name in run.toml and reports: `"estimate"`, `"measure-lines"` or `"measure"`.
    pub fn name(self) -> &'static str {
        match self {
            PlanRigor::Estimate => "estimate",
            PlanRigor::MeasureLines => "measure-lines",
            PlanRigor::Measure => "measure",
        }
    }

    /// Parses a run.toml name (the inverse of [`PlanRigor::name`]).
    pub fn parse(s: &str) -> Option<Self> {
        [PlanRigor::Estimate, PlanRigor::MeasureLines, PlanRigor::Measure].into_iter().find(|v| v.name() == s)
    }

    /// The names [`parse`](Self::parse) accepts, for error messages.
    pub const NAMES: &'static str = "\"estimate\", \"measure-lines\" or \"measure\"";

    /// Whether any plan is measured (the runs that have wisdom to save).
    pub fn measures(self) -> bool {
        self != PlanRigor::Estimate
    }
}

/// Grid storage for `components` components of `layout`: 2 MiB aligned (huge pages where
/// available), zero-filled in parallel at creation.
pub struct GridBuffer<T: FftReal> {
    data: HugeBuffer<T>,
    layout: GridLayout,
    components: usize,
}

impl<T: FftReal> GridBuffer<T> {
    /// Zero-filled storage, touched by `threads` threads.
    pub fn new(layout: GridLayout, components: usize, threads: usize) -> Self {
        Self { data: HugeBuffer::new(layout.real_len() * components, T::ZERO, threads), layout, components }
    }

    /// The layout of each component.
    pub fn layout(&self) -> &GridLayout {
        &self.layout
    }

    /// Number of components.
    pub fn components(&self) -> usize {
        self.components
    }

    /// All components, back to back.
    pub fn as_slice(&self) -> &[T] {
        self.data.as_slice()
    }

    /// All components, back to back, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        self.data.as_mut_slice()
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.layout.real_len() * self.components * T::BYTES
    }
}

/// Batched in-place r2c / c2r plans for one [`GridLayout`].
pub struct Fft3d<T: FftReal> {
    layout: GridLayout,
    forward: ffi::Plan<T>,
    forward_count: usize,
    backward: ffi::Plan<T>,
    backward_count: usize,
    threads: usize,
}

static INIT_THREADS: Once = Once::new();

/// Initialises FFTW's threads once per process, before any plan is made.
pub(crate) fn ensure_fftw_threads() {
    INIT_THREADS.call_once(|| {
        // SAFETY: FFTW's thread initialisation, called once before any plan is made.
        unsafe {
            ffi::init_threads();
        }
    });
}

impl<T: FftReal> Fft3d<T> {
    /// Plans a forward transform of the first `forward_count` components of `buffer` and a
    /// backward transform of its first `backward_count` components, on `threads` threads.
    ///
    /// With [`PlanRigor::Measure`] FFTW overwrites the buffer while planning.
    pub fn plan(
        buffer: &mut GridBuffer<T>,
        forward_count: usize,
        backward_count: usize,
        threads: usize,
        rigor: PlanRigor,
    ) -> Result<Self> {
        if forward_count > buffer.components || backward_count > buffer.components {
            return Err(Error::OutOfRange {
                field: "fft components".into(),
                value: format!("{forward_count} forward, {backward_count} backward"),
                allowed: format!("at most the {} components of the buffer", buffer.components),
            });
        }
        ensure_fftw_threads();
        let layout = buffer.layout;
        let ptr = buffer.data.as_mut_slice().as_mut_ptr();
        let forward = ffi::Plan::<T>::many(&layout, forward_count, ptr, true, threads, rigor)?;
        let backward = ffi::Plan::<T>::many(&layout, backward_count, ptr, false, threads, rigor)?;
        Ok(Self { layout, forward, forward_count, backward, backward_count, threads })
    }

    /// Forward r2c of the planned components of `buffer`, in place.
    pub fn forward(&self, buffer: &mut GridBuffer<T>) {
        assert!(buffer.layout == self.layout && buffer.components >= self.forward_count);
        // SAFETY: the buffer has the planned layout and at least the planned component count;
        // HugeBuffer is 2 MiB aligned, beyond the alignment FFTW planned for.
        unsafe { self.forward.execute(buffer.data.as_mut_slice().as_mut_ptr()) }
    }

    /// Backward c2r of the planned components of `buffer`, in place (unnormalised).
    pub fn backward(&self, buffer: &mut GridBuffer<T>) {
        assert!(buffer.layout == self.layout && buffer.components >= self.backward_count);
        // SAFETY: as in `forward`.
        unsafe { self.backward.execute(buffer.data.as_mut_slice().as_mut_ptr()) }
    }

    /// Threads the plans run on.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The layout planned for.
    pub fn layout(&self) -> &GridLayout {
        &self.layout
    }
}

#[cfg(test)]
mod tests {
    use super::{Fft3d, GridBuffer, PlanRigor};
    use parki_decomp::GridLayout;

    fn roundtrip<T: super::FftReal>(tol: f64) {
        let layout = GridLayout::new([8, 6, 10]).unwrap();
        let mut buf = GridBuffer::<T>::new(layout, 2, 2);
        let fft = Fft3d::plan(&mut buf, 2, 2, 2, PlanRigor::Estimate).unwrap();
        let m = layout.global;
        let stride = layout.real_len();
        let f = |c: usize, x: usize, y: usize, z: usize| ((c + 1) * (x * 7 + y * 3 + z * z)) as f64 % 5.0 - 2.0;
        for c in 0..2 {
            for z in 0..m[2] {
                for y in 0..m[1] {
                    for x in 0..m[0] {
                        buf.as_mut_slice()[c * stride + layout.real_index(x, y, z)] = T::from_f64(f(c, x, y, z));
                    }
                }
            }
        }
        // The zero mode of the first component equals the sum of its values.
        let sum: f64 = (0..m[2]).flat_map(|z| (0..m[1]).flat_map(move |y| (0..m[0]).map(move |x| f(0, x, y, z)))).sum();
        fft.forward(&mut buf);
        assert!((buf.as_slice()[0].to_f64() - sum).abs() < tol * 100.0);
        fft.backward(&mut buf);
        let n = layout.points() as f64;
        for c in 0..2 {
            for z in 0..m[2] {
                for y in 0..m[1] {
                    for x in 0..m[0] {
                        let v = buf.as_slice()[c * stride + layout.real_index(x, y, z)].to_f64() / n;
                        assert!((v - f(c, x, y, z)).abs() < tol, "{v} vs {}", f(c, x, y, z));
                    }
                }
            }
        }
    }

    #[test]
    fn roundtrip_f64() {
        roundtrip::<f64>(1e-12);
    }

    #[test]
    fn roundtrip_f32() {
        roundtrip::<f32>(1e-4);
    }
}
