//! [`DistFft`]: a distributed 3-D FFT of several components at once over a slab or pencil
//! process grid, with FLUPS-style topology switches (digest seed-002 §4).
//!
//! Three topologies of the global `Mx x My x Mz` grid over the process grid `[P_y, P_z]`, all
//! stored `[component][z][y][x]` with x fastest (complex values in the spectral ones):
//!
//! | topology | x        | y        | z        | 1-D transform             |
//! |----------|----------|----------|----------|---------------------------|
//! | T0 real  | whole    | P_y parts| P_z parts| r2c (or c2c) along x, stride 1 |
//! | T1       | P_y parts| whole    | P_z parts| c2c along y, stride `kx_loc`    |
//! | T2       | P_y parts| P_z parts| whole    | c2c along z, stride `ky_loc kx_loc` |
//!
//! Because x stays fastest everywhere, each block of a switch is a set of contiguous runs on
//! both sides: packing and unpacking are plain copies, no local transposes. The y and z
//! transforms are strided FFTW guru plans vectorised over the contiguous x run. The switch
//! T0 -> T1 runs in the sub-communicator of the `P_y` ranks that share a z part, T1 -> T2 in
//! that of the `P_z` ranks that share an x part (FLUPS §4.3: only ranks with a common interface
//! talk). A switch along an axis with one part is skipped: the layouts coincide. The spectrum
//! stays in T2 (z-pencils), where CNV works on local data, and the inverse runs the steps back.
//!
//! Each switch is an [`ExchangePlan`] built once, executed by `MPI_Alltoallv` or persistent
//! point-to-point with `MPI_Waitany` unpacking ([`Backend`]), chosen at run time. Transforms are
//! unnormalised: forward then backward multiplies by `Mx My Mz`.

use std::time::Instant;

use parki_comm::{Backend, Comm, Dir, ExchangePlan};
use parki_core::memory::HugeBuffer;
use parki_core::{Error, Par, Result};
use parki_decomp::{split_range, GridTopology, ProcGrid, RowLayout, SpectralBlock};
use rayon::prelude::{IntoParallelIterator, ParallelIterator};

use crate::ffi::{Kind, Plan1d};
use crate::lines::{BlockedLines, Lines};
use crate::{FftReal, PlanRigor};

/// Options of a distributed transform.
#[derive(Clone, Copy, Debug)]
pub struct DistFftOptions {
    /// Components transformed forward.
    pub forward_components: usize,
    /// Components transformed backward (at most `forward_components`).
    pub backward_components: usize,
    /// Complex input (c2c along x) instead of real (r2c).
    pub complex: bool,
    /// Switch backend.
    pub backend: Backend,
    /// Threads of the 1-D transforms and of packing.
    pub threads: usize,
    /// FFTW planning effort.
    pub rigor: PlanRigor,
}

impl DistFftOptions {
    /// `components` real components both ways, all-to-all-v, one thread, estimated plans.
    pub fn new(components: usize) -> Self {
        Self {
            forward_components: components,
            backward_components: components,
            complex: false,
            backend: Backend::Alltoallv,
            threads: 1,
            rigor: PlanRigor::Estimate,
        }
    }
}

/// Seconds spent in the 1-D transforms and in the switches (packing, communication, unpacking).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FftTimes {
    /// 1-D FFTs.
    pub fft: f64,
    /// Topology switches.
    pub switch: f64,
}

/// The communication stages of a distributed transform: the two topology switches (the
/// inverse transform's switches are counted under the same stages).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FftStage {
    /// T0 <-> T1: x-pencils to y-pencils, among the `P_y` ranks that share a z part.
    Switch1,
    /// T1 <-> T2: y-pencils to z-pencils, among the `P_z` ranks that share an x part.
    Switch2,
}

impl parki_core::StageKind for FftStage {
    const ALL: &'static [Self] = &[FftStage::Switch1, FftStage::Switch2];

    fn name(self) -> &'static str {
        match self {
            FftStage::Switch1 => "fft_switch1",
            FftStage::Switch2 => "fft_switch2",
        }
    }
}

/// A raw pointer that may cross threads (for disjoint parallel copies).
#[derive(Clone, Copy)]
struct Ptr<T>(*mut T);
// SAFETY: used only for disjoint ranges, see each use.
unsafe impl<T> Send for Ptr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Ptr<T> {}

impl<T> Ptr<T> {
    #[inline]
    fn get(self) -> *mut T {
        self.0
    }
}

/// Copies `count` runs of `len` reals: run `k` from `src + s(k)` to `dst + d(k)`.
///
/// # Safety
/// Every run must lie inside its buffer, and the destination runs must be pairwise disjoint.
unsafe fn copy_runs<T: Copy + Send + Sync>(
    count: usize,
    len: usize,
    src: Ptr<T>,
    s: impl Fn(usize) -> usize + Sync,
    dst: Ptr<T>,
    d: impl Fn(usize) -> usize + Sync,
    par: Par,
) {
    let run = |k: usize| {
        // SAFETY: forwarded to the caller.
        unsafe { std::ptr::copy_nonoverlapping(src.get().add(s(k)), dst.get().add(d(k)), len) };
    };
    match par {
        Par::Rayon(_) if count * len > 1 << 15 => (0..count).into_par_iter().for_each(run),
        _ => (0..count).for_each(run),
    }
}

/// The runs of one peer's block in the data array: `(count, len, offset of run k)`.
type Runs<O> = (usize, usize, O);

/// Executes a switch between topologies A (the plan's `A` side) and B: `a(peer)` and `b(peer)`
/// are the peer's block as runs of the data array in A and in B. Forward packs A runs and
/// unpacks into B runs, backward the reverse; each block is its runs back to back.
fn run_switch<T: FftReal, OA, OB>(
    plan: &mut ExchangePlan<T>,
    dir: Dir,
    data: Ptr<T>,
    par: Par,
    a: impl Fn(usize) -> Runs<OA>,
    b: impl Fn(usize) -> Runs<OB>,
) where
    OA: Fn(usize) -> usize + Sync,
    OB: Fn(usize) -> usize + Sync,
{
    fn pack<T: Copy + Send + Sync, O: Fn(usize) -> usize + Sync>(
        (n, len, off): Runs<O>,
        data: Ptr<T>,
        block: &mut [T],
        par: Par,
    ) {
        // SAFETY: the runs lie inside the data buffer; the block holds n runs of len.
        unsafe { copy_runs(n, len, data, off, Ptr(block.as_mut_ptr()), |q| q * len, par) }
    }
    fn unpack<T: Copy + Send + Sync, O: Fn(usize) -> usize + Sync>(
        (n, len, off): Runs<O>,
        data: Ptr<T>,
        block: &[T],
        par: Par,
    ) {
        // SAFETY: the destination runs of distinct peers cover distinct index ranges of the
        // split axis, so they are disjoint; every pack ran before this unpack (ExchangePlan).
        unsafe { copy_runs(n, len, Ptr(block.as_ptr() as *mut T), |q| q * len, data, off, par) }
    }
    let forward = dir == Dir::Forward;
    plan.execute(
        dir,
        |peer, block| if forward { pack(a(peer), data, block, par) } else { pack(b(peer), data, block, par) },
        |peer, block| if forward { unpack(b(peer), data, block, par) } else { unpack(a(peer), data, block, par) },
    );
}

/// The 1-D transforms of one direction: x (contiguous rows, r2c/c2r or c2c, FFTW-threaded),
/// y and z (strided lines in cache-sized blocks).
struct AxisPlans<T: FftReal> {
    x: Plan1d<T>,
    y: BlockedLines<T>,
    z: BlockedLines<T>,
}

/// How the transforms run: FFTW's batched 3-D plans on one rank (no switch, the grid is the
/// whole `GridLayout`), 1-D transforms between the topology switches otherwise.
enum Engine<T: FftReal> {
    Whole { forward: crate::ffi::Plan<T>, backward: crate::ffi::Plan<T> },
    Pencils { forward: AxisPlans<T>, backward: AxisPlans<T> },
}

struct Switch<T: FftReal> {
    plan: Option<ExchangePlan<T>>,
}

/// A planned distributed 3-D FFT (see the module documentation).
pub struct DistFft<T: FftReal> {
    comm: Comm,
    grid: ProcGrid,
    global: [usize; 3],
    opts: DistFftOptions,
    kx: usize,
    t0: GridTopology,
    t1: GridTopology,
    t2: GridTopology,
    cs: usize,
    data: HugeBuffer<T>,
    engine: Engine<T>,
    sw1: [Switch<T>; 2],
    sw2: [Switch<T>; 2],
    times: FftTimes,
}

impl<T: FftReal> DistFft<T> {
    /// Plans a transform of a `global` grid over `grid` (its rank count must be `comm.size()`).
    /// Collective over `comm`.
    pub fn new(comm: &Comm, global: [usize; 3], grid: ProcGrid, opts: DistFftOptions) -> Result<Self> {
        let [mx, my, mz] = global;
        let [py, pz] = grid.dims;
        if grid.ranks() != comm.size() {
            return Err(Error::OutOfRange {
                field: "parallel.grid".into(),
                value: format!("{:?}", grid.dims),
                allowed: format!("a process grid of {} ranks", comm.size()),
            });
        }
        if opts.backward_components > opts.forward_components || opts.forward_components == 0 {
            return Err(Error::OutOfRange {
                field: "fft.components".into(),
                value: format!("{} forward, {} backward", opts.forward_components, opts.backward_components),
                allowed: "at least one forward component and at most as many backward".into(),
            });
        }
        let kx = if opts.complex { mx } else { mx / 2 + 1 };
        if global.contains(&0) || (!opts.complex && !mx.is_multiple_of(2)) {
            return Err(Error::OutOfRange {
                field: "fft.grid".into(),
                value: format!("{global:?}"),
                allowed: "positive sizes, Mx even for a real transform".into(),
            });
        }
        if py > my.min(kx) || pz > mz.min(my) {
            return Err(Error::OutOfRange {
                field: "parallel.grid".into(),
                value: format!("[{py}, {pz}] on a {mx}x{my}x{mz} grid"),
                allowed: format!(
                    "P_y <= min(My, Mx/2+1) = {} and P_z <= min(Mz, My) = {} so that every rank owns part of \
                     every topology",
                    my.min(kx),
                    mz.min(my)
                ),
            });
        }
        let [iy, iz] = grid.coords(comm.rank());
        let t0 = GridTopology { global: [kx, my, mz], parts: [1, py, pz], coords: [0, iy, iz] };
        let t1 = GridTopology { global: [kx, my, mz], parts: [py, 1, pz], coords: [iy, 0, iz] };
        let t2 = GridTopology { global: [kx, my, mz], parts: [py, pz, 1], coords: [iy, iz, 0] };
        let cs = 2 * t0.local_len().max(t1.local_len()).max(t2.local_len());
        let ncomp = opts.forward_components;
        let threads = opts.threads.max(1);
        let mut data = HugeBuffer::new(cs * ncomp, T::ZERO, threads);
        let ptr = data.as_mut_slice().as_mut_ptr();

        // 1-D plans for f (forward) and b (backward) components
        let plans = |comps: usize, forward: bool| -> Result<AxisPlans<T>> {
            let [_, yl0, zl0] = t0.local();
            let rows = yl0 * zl0;
            let x = if opts.complex {
                let k = if forward { Kind::C2cForward } else { Kind::C2cBackward };
                Plan1d::new(k, mx, (1, 1), &[(rows, kx, kx), (comps, cs / 2, cs / 2)], ptr, threads, opts.rigor)?
            } else if forward {
                Plan1d::new(
                    Kind::R2c,
                    mx,
                    (1, 1),
                    &[(rows, 2 * kx, kx), (comps, cs, cs / 2)],
                    ptr,
                    threads,
                    opts.rigor,
                )?
            } else {
                Plan1d::new(
                    Kind::C2r,
                    mx,
                    (1, 1),
                    &[(rows, kx, 2 * kx), (comps, cs / 2, cs)],
                    ptr,
                    threads,
                    opts.rigor,
                )?
            };
            // y: lines a row apart in each (component, z) plane of T1; z: lines a plane apart
            let [xl1, _, zl1] = t1.local();
            let (half, row) = (cs / 2, my * xl1);
            let y_lines = Lines { n: my, stride: xl1, width: xl1, outer: (comps, half), inner: (zl1, row) };
            let y = BlockedLines::new(forward, y_lines, ptr, opts.rigor)?;
            let [xl2, yl2, _] = t2.local();
            let plane = xl2 * yl2;
            let z_lines = Lines { n: mz, stride: plane, width: plane, outer: (comps, half), inner: (1, 0) };
            let z = BlockedLines::new(forward, z_lines, ptr, opts.rigor)?;
            Ok(AxisPlans { x, y, z })
        };
        crate::ensure_fftw_threads();
        let engine = if grid.ranks() == 1 && !opts.complex {
            // one rank: the layouts of T0 and T2 are the padded r2c layout of the whole grid,
            // where FFTW's 3-D plans beat three passes of 1-D transforms
            let layout = parki_decomp::GridLayout { global };
            debug_assert_eq!(cs, layout.real_len());
            let forward = crate::ffi::Plan::many(&layout, opts.forward_components, ptr, true, threads, opts.rigor)?;
            let backward = crate::ffi::Plan::many(&layout, opts.backward_components, ptr, false, threads, opts.rigor)?;
            Engine::Whole { forward, backward }
        } else {
            let forward = plans(opts.forward_components, true)?;
            let backward = plans(opts.backward_components.max(1), false)?;
            Engine::Pencils { forward, backward }
        };

        // switches: sub-communicators of the ranks sharing a z part (T0 <-> T1) and an x part
        let sub1 = comm.split(iz, iy);
        let sub2 = comm.split(iy, iz);
        let switch1 = |comps: usize| -> Switch<T> {
            if py == 1 {
                return Switch { plan: None };
            }
            let [_, yl0, zl0] = t0.local();
            let [xl1, _, _] = t1.local();
            let a: Vec<usize> = (0..py).map(|j| 2 * comps * zl0 * yl0 * split_range(kx, py, j).len()).collect();
            let b: Vec<usize> = (0..py).map(|i| 2 * comps * zl0 * split_range(my, py, i).len() * xl1).collect();
            Switch { plan: Some(ExchangePlan::new(&sub1, &a, &b, opts.backend)) }
        };
        let switch2 = |comps: usize| -> Switch<T> {
            if pz == 1 {
                return Switch { plan: None };
            }
            let [xl1, _, zl1] = t1.local();
            let [_, yl2, _] = t2.local();
            let a: Vec<usize> = (0..pz).map(|j| 2 * comps * zl1 * split_range(my, pz, j).len() * xl1).collect();
            let b: Vec<usize> = (0..pz).map(|i| 2 * comps * split_range(mz, pz, i).len() * yl2 * xl1).collect();
            Switch { plan: Some(ExchangePlan::new(&sub2, &a, &b, opts.backend)) }
        };
        let sw1 = [switch1(opts.forward_components), switch1(opts.backward_components.max(1))];
        let sw2 = [switch2(opts.forward_components), switch2(opts.backward_components.max(1))];
        Ok(Self {
            comm: comm.clone(),
            grid,
            global,
            opts,
            kx,
            t0,
            t1,
            t2,
            cs,
            data,
            engine,
            sw1,
            sw2,
            times: FftTimes::default(),
        })
    }

    /// The process grid.
    pub fn proc_grid(&self) -> ProcGrid {
        self.grid
    }

    /// Global grid size.
    pub fn global(&self) -> [usize; 3] {
        self.global
    }

    /// The options.
    pub fn options(&self) -> &DistFftOptions {
        &self.opts
    }

    /// The real-space topology T0 (`global[0]` counts complex row entries; the real x-row is
    /// the whole `Mx`).
    pub fn real_topology(&self) -> GridTopology {
        self.t0
    }

    /// Owned real-space y and z ranges (every x is owned).
    pub fn real_ranges(&self) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
        (self.t0.range(1), self.t0.range(2))
    }

    /// Reals per x-row in real space: `2 (Mx/2 + 1)` (r2c padding) or `2 Mx` (complex).
    pub fn row_stride(&self) -> usize {
        2 * self.kx
    }

    /// Reals between components.
    pub fn component_stride(&self) -> usize {
        self.cs
    }

    /// The x rows of the local real-space block (whole x lines, for halo exchanges).
    pub fn row_layout(&self) -> RowLayout {
        RowLayout { mx: self.global[0], row_stride: self.row_stride(), component_stride: self.cs }
    }

    /// Offset of real-space point `(x, y_loc, z_loc)` of component 0 (add `c *
    /// component_stride()`); for complex input, of its real part.
    #[inline]
    pub fn real_index(&self, x: usize, y_loc: usize, z_loc: usize) -> usize {
        let yl = self.t0.local()[1];
        (z_loc * yl + y_loc) * 2 * self.kx + if self.opts.complex { 2 * x } else { x }
    }

    /// The local spectrum after [`forward`](Self::forward).
    pub fn spectral_layout(&self) -> SpectralBlock {
        let r0 = self.t2.range(0);
        let r1 = self.t2.range(1);
        SpectralBlock {
            x: (r0.start, r0.len()),
            y: (r1.start, r1.len()),
            z: self.global[2],
            row_stride: 2 * r0.len(),
            component_stride: self.cs,
        }
    }

    /// The whole local buffer (all components).
    pub fn data(&self) -> &[T] {
        self.data.as_slice()
    }

    /// The whole local buffer, mutable.
    pub fn data_mut(&mut self) -> &mut [T] {
        self.data.as_mut_slice()
    }

    /// Seconds spent so far (see [`FftTimes`]).
    pub fn times(&self) -> FftTimes {
        self.times
    }

    /// Resets [`times`](Self::times).
    pub fn reset_times(&mut self) {
        self.times = FftTimes::default();
    }

    /// Reals each switch sends to other ranks per forward call, `[T0->T1, T1->T2]`.
    pub fn switch_elements(&self) -> [usize; 2] {
        let e = |s: &Switch<T>| s.plan.as_ref().map_or(0, |p| p.elements_sent(Dir::Forward));
        [e(&self.sw1[0]), e(&self.sw2[0])]
    }

    /// Reals a transpose between the topologies must move off this rank at least (the part of
    /// the local block that a different rank owns afterwards), `[T0->T1, T1->T2]`.
    pub fn switch_minimum(&self) -> [usize; 2] {
        let c = self.opts.forward_components;
        let stay1 = {
            let (x, y) = (self.t1.range(0), self.t0.range(1));
            if self.grid.dims[0] == 1 {
                self.t0.local_len()
            } else {
                x.len() * y.len() * self.t0.local()[2]
            }
        };
        let stay2 = {
            let (y, z) = (self.t2.range(1), self.t1.range(2));
            if self.grid.dims[1] == 1 {
                self.t1.local_len()
            } else {
                y.len() * z.len() * self.t1.local()[0]
            }
        };
        [2 * c * (self.t0.local_len() - stay1), 2 * c * (self.t1.local_len() - stay2)]
    }

    fn par(&self) -> Par {
        Par::with_threads(self.opts.threads)
    }

    /// Forward transform of the first `forward_components` components (T0 real -> T2 spectrum).
    pub fn forward(&mut self) {
        let p = self.data.as_mut_slice().as_mut_ptr();
        let par = self.par();
        let t = Instant::now();
        let pencils = match &self.engine {
            Engine::Whole { forward, .. } => {
                // SAFETY: the plan was made for this buffer's layout and component count.
                unsafe { forward.execute(p) };
                None
            }
            Engine::Pencils { forward, .. } => {
                // SAFETY: the 1-D plans were made for this buffer's T0 layout.
                unsafe { forward.x.execute(p) };
                Some(())
            }
        };
        self.times.fft += t.elapsed().as_secs_f64();
        if pencils.is_none() {
            return;
        }
        self.switch1(Dir::Forward, self.opts.forward_components);
        let t = Instant::now();
        if let Engine::Pencils { forward, .. } = &self.engine {
            // SAFETY: the y lines were planned for the T1 layout the switch left in the buffer.
            unsafe { forward.y.execute(p, par) };
        }
        self.times.fft += t.elapsed().as_secs_f64();
        self.switch2(Dir::Forward, self.opts.forward_components);
        let t = Instant::now();
        if let Engine::Pencils { forward, .. } = &self.engine {
            // SAFETY: the z lines were planned for the T2 layout the switch left in the buffer.
            unsafe { forward.z.execute(p, par) };
        }
        self.times.fft += t.elapsed().as_secs_f64();
    }

    /// Backward transform of the first `backward_components` components (T2 -> T0 real).
    pub fn backward(&mut self) {
        let p = self.data.as_mut_slice().as_mut_ptr();
        let c = self.opts.backward_components;
        if c == 0 {
            return;
        }
        let par = self.par();
        let t = Instant::now();
        match &self.engine {
            Engine::Whole { backward, .. } => {
                // SAFETY: the plan was made for this buffer's layout and component count.
                unsafe { backward.execute(p) };
                self.times.fft += t.elapsed().as_secs_f64();
                return;
            }
            Engine::Pencils { backward, .. } => {
                // SAFETY: the z lines were planned for the T2 layout of the spectrum.
                unsafe { backward.z.execute(p, par) };
            }
        }
        self.times.fft += t.elapsed().as_secs_f64();
        self.switch2(Dir::Backward, c);
        let t = Instant::now();
        if let Engine::Pencils { backward, .. } = &self.engine {
            // SAFETY: the y lines were planned for the T1 layout the switch left in the buffer.
            unsafe { backward.y.execute(p, par) };
        }
        self.times.fft += t.elapsed().as_secs_f64();
        self.switch1(Dir::Backward, c);
        let t = Instant::now();
        if let Engine::Pencils { backward, .. } = &self.engine {
            // SAFETY: the x rows were planned for the T0 layout the switch left in the buffer.
            unsafe { backward.x.execute(p) };
        }
        self.times.fft += t.elapsed().as_secs_f64();
    }

    /// T0 <-> T1 within the ranks sharing a z part: blocks `[c][z][y0 rows][kx part]`.
    fn switch1(&mut self, dir: Dir, comps: usize) {
        let k = usize::from(dir == Dir::Backward && comps != self.opts.forward_components);
        let par = self.par();
        let (py, kx, my, cs) = (self.grid.dims[0], self.kx, self.global[1], self.cs);
        let (t0, t1) = (self.t0, self.t1);
        let Some(plan) = self.sw1[k].plan.as_mut() else { return };
        let _g = self.comm.stage(FftStage::Switch1);
        let t = Instant::now();
        let data = Ptr(self.data.as_mut_slice().as_mut_ptr());
        let [_, yl0, zl0] = t0.local();
        let xl1 = t1.local()[0];
        // T0 side, peer j: runs of kx_j complex, one per (c, z, y)
        let t0_runs = |j: usize| {
            let r = split_range(kx, py, j);
            (comps * zl0 * yl0, 2 * r.len(), move |q: usize| {
                let (c, zy) = (q / (zl0 * yl0), q % (zl0 * yl0));
                c * cs + (zy * kx + r.start) * 2
            })
        };
        // T1 side, peer i: runs of y_i kx_loc complex, one per (c, z)
        let t1_runs = |i: usize| {
            let r = split_range(my, py, i);
            (comps * zl0, 2 * r.len() * xl1, move |q: usize| {
                let (c, z) = (q / zl0, q % zl0);
                c * cs + (z * my + r.start) * xl1 * 2
            })
        };
        run_switch(plan, dir, data, par, t0_runs, t1_runs);
        self.times.switch += t.elapsed().as_secs_f64();
    }

    /// T1 <-> T2 within the ranks sharing an x part: blocks `[c][z part][y part][kx_loc]`.
    fn switch2(&mut self, dir: Dir, comps: usize) {
        let k = usize::from(dir == Dir::Backward && comps != self.opts.forward_components);
        let par = self.par();
        let (pz, my, mz, cs) = (self.grid.dims[1], self.global[1], self.global[2], self.cs);
        let (t1, t2) = (self.t1, self.t2);
        let Some(plan) = self.sw2[k].plan.as_mut() else { return };
        let _g = self.comm.stage(FftStage::Switch2);
        let t = Instant::now();
        let data = Ptr(self.data.as_mut_slice().as_mut_ptr());
        let [xl1, _, zl1] = t1.local();
        let yl2 = t2.local()[1];
        // T1 side, peer j: runs of y_j kx_loc complex, one per (c, z)
        let t1_runs = |j: usize| {
            let r = split_range(my, pz, j);
            (comps * zl1, 2 * r.len() * xl1, move |q: usize| {
                let (c, z) = (q / zl1, q % zl1);
                c * cs + (z * my + r.start) * xl1 * 2
            })
        };
        // T2 side, peer i: one run of z_i y_loc kx_loc complex per c
        let t2_runs = |i: usize| {
            let r = split_range(mz, pz, i);
            (comps, 2 * r.len() * yl2 * xl1, move |c: usize| c * cs + r.start * yl2 * xl1 * 2)
        };
        run_switch(plan, dir, data, par, t1_runs, t2_runs);
        self.times.switch += t.elapsed().as_secs_f64();
    }
}
