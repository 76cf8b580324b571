//! [`DistFft`]: a distributed 3-D transform of several components at once over a slab or
//! pencil process grid, with per-axis transforms ([`AxisSpec`]: DFT, DCT/DST or none, with
//! zero padding) and FLUPS-style topology switches (digest seed-002 §2 and §4).
//!
//! The axes are stored in a memory order `[a0, a1, a2]` (a0 fastest) derived from their
//! transforms ([`memory_order`]: the real-to-complex axis first; for the periodic Ewald grid it
//! is `[x, y, z]`). Three topologies over the process grid `[P_1, P_2]`, all stored
//! `[component][a2][a1][a0]`, in elements of one real (every axis real-to-real) or one complex
//! value, `L_j` the slots of axis `a_j`'s line and `n_j` its data points:
//!
//! | topology | a0          | a1          | a2          | 1-D transform                  |
//! |----------|-------------|-------------|-------------|--------------------------------|
//! | T0 real  | whole `L0`  | `n1` / P_1  | `n2` / P_2  | along a0, stride 1             |
//! | T1       | `L0` / P_1  | whole `L1`  | `n2` / P_2  | along a1, stride `L0_loc`      |
//! | T2       | `L0` / P_1  | `L1` / P_2  | whole `L2`  | along a2, stride `L1_loc L0_loc` |
//!
//! Because a0 stays fastest everywhere, each block of a switch is a set of contiguous runs on
//! both sides: packing and unpacking are plain copies, no local transposes. The a1 and a2
//! transforms are strided FFTW guru plans vectorised over the contiguous a0 run. An axis's zero
//! padding appears at the switch that makes it whole (the unpacked data land at the axis's data
//! offset, the rest of the line is zeroed), so the transforms before it skip the padding. The
//! switch T0 -> T1 runs in the sub-communicator of the `P_1` ranks that share an a2 part, T1 ->
//! T2 in that of the `P_2` ranks that share an a0 part (FLUPS §4.3: only ranks with a common
//! interface talk). A switch along an axis with one part is a local re-layout (or nothing when
//! the axis has no padding). The spectrum stays in T2, where the caller multiplies on local
//! data (CNV, a Green's function), and the inverse runs the steps back.
//!
//! Each switch is an [`ExchangePlan`] built once, executed by `MPI_Alltoallv` or persistent
//! point-to-point with `MPI_Waitany` unpacking ([`Backend`]), chosen at run time. Transforms are
//! unnormalised (FFTW's definitions).

use std::time::Instant;

use parki_comm::{Backend, Comm, Dir, ExchangePlan};
use parki_core::memory::HugeBuffer;
use parki_core::{Error, Par, Result};
use parki_decomp::{split_range, GridTopology, ProcGrid, RowLayout, SpectralBlock};
use rayon::prelude::{IntoParallelIterator, ParallelIterator};

use crate::axes::{memory_order, AxisSpec, AxisTransform, ModeClass};
use crate::ffi::{Kind, Plan1d, R2rKind};
use crate::lines::{BlockedLines, Lines};
use crate::planes::{PlaneGeometry, PlanePasses, RowSpec};
use crate::ptr::Ptr;
use crate::r2r_fft::{self, FftR2r, LineSet};
use crate::rows::{NativeRowPass, RowSet};
use crate::{FftReal, LineEngine, PlanRigor};

/// Options of a distributed transform.
#[derive(Clone, Copy, Debug)]
pub struct DistFftOptions {
    /// Components transformed forward.
    pub forward_components: usize,
    /// Components transformed backward (0: a forward-only transform; more than forward when
    /// the spectrum is turned into several outputs, e.g. a potential and its gradient; the
    /// buffer holds the larger count).
    pub backward_components: usize,
    /// Complex input (c2c along x) instead of real (r2c).
    pub complex: bool,
    /// Switch backend.
    pub backend: Backend,
    /// Threads of the 1-D transforms and of packing.
    pub threads: usize,
    /// FFTW planning effort.
    pub rigor: PlanRigor,
    /// What transforms the strided passes' complex lines.
    pub lines: LineEngine,
    /// How the DCT-II/III and DST-II/III are computed.
    pub r2r: R2rMethod,
    /// Where the process grid has one part along a1, run the a0 and a1 passes (and the
    /// re-layout between them) per a2 plane in cache (module `planes`) instead of pass by pass.
    pub fuse_planes: bool,
}

/// How the DCT/DST-II, III and IV axes are transformed (DCT-I and DST-I, and type IV of an odd
/// length, always go through FFTW's r2r).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum R2rMethod {
    /// Through FFTs (module `r2r_fft`): types II and III by one real-to-complex FFT per line
    /// (Makhoul's reordering and twiddle), type IV by one complex FFT of half the length.
    /// FFTW's SIMD codelets instead of its scalar r2r ones.
    #[default]
    Fft,
    /// FFTW's r2r (REDFT10/01/11, RODFT10/01/11); on one rank with every axis real-to-real,
    /// one 3-D plan.
    Fftw,
}

impl R2rMethod {
    /// Name in run.toml and reports: `"fft"` or `"fftw"`.
    pub fn name(self) -> &'static str {
        match self {
            R2rMethod::Fft => "fft",
            R2rMethod::Fftw => "fftw",
        }
    }

    /// Parses a run.toml name (the inverse of [`R2rMethod::name`]).
    pub fn parse(s: &str) -> Option<Self> {
        [R2rMethod::Fft, R2rMethod::Fftw].into_iter().find(|v| v.name() == s)
    }
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
            lines: LineEngine::default(),
            r2r: R2rMethod::default(),
            fuse_planes: true,
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
    /// T0 <-> T1: a0-pencils to a1-pencils, among the `P_1` ranks that share an a2 part.
    Switch1,
    /// T1 <-> T2: a1-pencils to a2-pencils, among the `P_2` ranks that share an a0 part.
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

/// The transform along a0 (contiguous lines, FFTW-threaded) and where in the buffer it starts.
struct RowPlan<T: FftReal> {
    plan: Plan1d<T>,
    /// First real of the planned layout.
    offset: usize,
}

/// The 1-D transforms along one axis.
enum Pass<T: FftReal> {
    /// Contiguous a0 rows, one FFTW plan (threaded by FFTW).
    Row(RowPlan<T>),
    /// Contiguous a0 rows on RustFFT (`realfft` for real rows), in runs over the threads.
    NativeRows(NativeRowPass<T>),
    /// Strided lines in cache-sized blocks.
    Lines(BlockedLines<T>),
    /// A DCT/DST-II, III or IV through FFTs on per-thread scratch.
    FftR2r(FftR2r<T>),
    /// Strided lines of several lengths, one set per [`ModeClass`] (padding per periodic mode).
    Classes(Vec<BlockedLines<T>>),
}

impl<T: FftReal> Pass<T> {
    /// # Safety
    /// `p` must be the buffer planned for (or one of the same layout), holding the topology the
    /// pass was planned on.
    unsafe fn execute(&mut self, p: *mut T, par: Par) {
        // SAFETY: forwarded to the caller.
        unsafe {
            match self {
                Pass::Row(x) => x.plan.execute(p.add(x.offset)),
                Pass::NativeRows(r) => r.execute(p, par),
                Pass::Lines(l) => l.execute(p, par),
                Pass::FftR2r(m) => m.execute(p, par),
                Pass::Classes(c) => c.iter().for_each(|l| l.execute(p, par)),
            }
        }
    }

    /// Bytes of scratch the pass holds.
    fn bytes(&self) -> usize {
        match self {
            Pass::FftR2r(m) => m.bytes(),
            _ => 0,
        }
    }
}

/// The 1-D transforms of one direction along a0, a1 and a2 (`None`: the identity), or the
/// a0 and a1 passes fused per a2 plane (`planes`; `passes[0]` and `passes[1]` then `None`).
struct AxisPlans<T: FftReal> {
    passes: [Option<Pass<T>>; 3],
    planes: Option<PlanePasses<T>>,
    /// The a2 pass zeroes a2's padding itself (forward: switch 2 leaves it).
    a2_zeroes_padding: bool,
}

/// How the transforms run: FFTW's batched 3-D plans on one rank (periodic real grid, no
/// switch, the grid is the whole `GridLayout`), 1-D transforms between the switches otherwise.
enum Engine<T: FftReal> {
    Whole {
        forward: crate::ffi::Plan<T>,
        backward: crate::ffi::Plan<T>,
    },
    /// One rank, every axis a real-to-real transform over its whole line: one FFTW 3-D r2r plan
    /// per direction (no switch, no padding; the T0 and T2 layouts coincide).
    WholeR2r {
        forward: Plan1d<T>,
        backward: Plan1d<T>,
    },
    Pencils {
        forward: Box<AxisPlans<T>>,
        backward: Box<AxisPlans<T>>,
    },
}

struct Switch<T: FftReal> {
    plan: Option<ExchangePlan<T>>,
}

/// A planned distributed 3-D transform (see the module documentation).
pub struct DistFft<T: FftReal> {
    comm: Comm,
    grid: ProcGrid,
    /// Data points per user axis.
    global: [usize; 3],
    opts: DistFftOptions,
    /// The axes in memory order (`axes[j]` is user axis `order[j]`).
    axes: [AxisSpec; 3],
    order: [usize; 3],
    /// Real-to-complex along a0.
    r2c: bool,
    /// Reals per element (1: every axis real-to-real, 2: complex).
    nf: usize,
    /// Line slots in memory order.
    lines: [usize; 3],
    t0: GridTopology,
    t1: GridTopology,
    t2: GridTopology,
    cs: usize,
    data: HugeBuffer<T>,
    engine: Engine<T>,
    sw1: [Switch<T>; 2],
    sw2: [Switch<T>; 2],
    /// The a1 and a2 transform lengths per a0 spectral slot (one class of the axes' own
    /// lengths without padding per periodic mode).
    classes: Vec<ModeClass>,
    times: FftTimes,
}

/// The forward and backward kinds per memory-order axis when one 3-D real-to-real plan does the
/// whole transform: one rank, real data, every axis real-to-real over its whole line (no
/// padding, no offsets, the same slots both ways).
fn whole_r2r_kinds(axes: &[AxisSpec; 3], ranks: usize, complex: bool) -> Option<[[R2rKind; 3]; 2]> {
    if ranks != 1 || complex {
        return None;
    }
    let mut kinds = [[R2rKind::Dct1; 3]; 2];
    for (j, a) in axes.iter().enumerate() {
        let AxisTransform::R2r { forward, backward } = a.transform else {
            return None;
        };
        let plain = a.n == a.fft_len && a.n == a.line && a.fft_offset == 0 && a.data_offset == 0;
        if !plain || a.backward_fft_offset != 0 || a.backward_data_offset != 0 {
            return None;
        }
        kinds[0][j] = forward;
        kinds[1][j] = backward;
    }
    Some(kinds)
}

/// Whether some axis's transform runs through [`FftR2r`] with `method`.
fn uses_fft_r2r(axes: &[AxisSpec; 3], method: R2rMethod) -> bool {
    method == R2rMethod::Fft
        && axes.iter().any(|a| match a.transform {
            AxisTransform::R2r { forward, backward } => {
                r2r_fft::supports(forward, a.fft_len) || r2r_fft::supports(backward, a.fft_len)
            }
            _ => false,
        })
}

/// Zeroes, in each of `comps` components (`cs` reals apart) and `outer` groups, the slots of a
/// line of `l` slots outside `[d, d + n)`, a slot being `inner` reals.
fn zero_padding<T: FftReal>(data: &mut [T], cs: usize, comps: usize, outer: usize, inner: usize, nld: [usize; 3]) {
    let [n, l, d] = nld;
    if n == l {
        return;
    }
    for c in 0..comps {
        for o in 0..outer {
            let g = c * cs + o * l * inner;
            data[g..g + d * inner].fill(T::ZERO);
            data[g + (d + n) * inner..g + l * inner].fill(T::ZERO);
        }
    }
}

/// Moves, in place, each group of `n` slots (`inner` reals each) to `d` slots into a line of
/// `l` slots (`expand`, zeroing the rest), or back (`!expand`), over `comps x outer` groups.
fn relayout<T: FftReal>(
    data: &mut [T],
    cs: usize,
    comps: usize,
    outer: usize,
    inner: usize,
    nld: [usize; 3],
    expand: bool,
) {
    let [n, l, d] = nld;
    if n == l {
        return;
    }
    let groups = comps * outer;
    let at = |g: usize| ((g / outer) * cs, g % outer);
    if expand {
        // descending: each destination lies at or above its source and above every lower group
        for g in (0..groups).rev() {
            let (base, o) = at(g);
            let (src, dst) = (base + o * n * inner, base + (o * l + d) * inner);
            if src != dst {
                data.copy_within(src..src + n * inner, dst);
            }
        }
        zero_padding(data, cs, comps, outer, inner, nld);
    } else {
        // ascending: each destination lies at or below its source and below every higher group
        for g in 0..groups {
            let (base, o) = at(g);
            let (src, dst) = (base + (o * l + d) * inner, base + o * n * inner);
            if src != dst {
                data.copy_within(src..src + n * inner, dst);
            }
        }
    }
}

impl<T: FftReal> DistFft<T> {
    /// Plans a periodic transform of a `global` grid over `grid` (its rank count must be
    /// `comm.size()`): real-to-complex along x (complex-to-complex with `opts.complex`), then
    /// complex along y and z. Collective over `comm`.
    pub fn new(comm: &Comm, global: [usize; 3], grid: ProcGrid, opts: DistFftOptions) -> Result<Self> {
        if global.contains(&0) || (!opts.complex && !global[0].is_multiple_of(2)) {
            return Err(Error::OutOfRange {
                field: "fft.grid".into(),
                value: format!("{global:?}"),
                allowed: "positive sizes, Mx even for a real transform".into(),
            });
        }
        Self::with_axes(comm, global.map(AxisSpec::periodic), grid, opts)
    }

    /// Plans a transform with one [`AxisSpec`] per axis over `grid`. The memory order of the
    /// axes is [`memory_order`]`(&axes)`. Collective over `comm`.
    pub fn with_axes(comm: &Comm, user_axes: [AxisSpec; 3], grid: ProcGrid, opts: DistFftOptions) -> Result<Self> {
        Self::with_axes_in_order(comm, user_axes, memory_order(&user_axes), grid, opts)
    }

    /// As [`with_axes`](Self::with_axes) with the memory order given (a permutation of `0..3`,
    /// fastest first): a second transform whose spectrum must share the first's layout (a
    /// Green's function beside its field) takes the first's [`order`](Self::order).
    pub fn with_axes_in_order(
        comm: &Comm,
        user_axes: [AxisSpec; 3],
        order: [usize; 3],
        grid: ProcGrid,
        opts: DistFftOptions,
    ) -> Result<Self> {
        Self::with_mode_classes(comm, user_axes, order, grid, opts, &[])
    }

    /// As [`with_axes_in_order`](Self::with_axes_in_order), the a1 and a2 transforms over the
    /// lengths of `classes` per a0 spectral slot (padding per periodic mode, [`ModeClass`]; the
    /// slots outside every class at the axes' own lengths). With classes, a0 must be a DFT and
    /// a1 and a2 padded DFTs with their data and transforms first in the line, each class's
    /// lengths between the axis's data points and its transform length.
    pub fn with_mode_classes(
        comm: &Comm,
        user_axes: [AxisSpec; 3],
        order: [usize; 3],
        grid: ProcGrid,
        opts: DistFftOptions,
        classes: &[ModeClass],
    ) -> Result<Self> {
        let [py, pz] = grid.dims;
        let mut sorted = order;
        sorted.sort_unstable();
        if sorted != [0, 1, 2] {
            return Err(Error::OutOfRange {
                field: "fft order".into(),
                value: format!("{order:?}"),
                allowed: "a permutation of [0, 1, 2]".into(),
            });
        }
        if grid.ranks() != comm.size() {
            return Err(Error::OutOfRange {
                field: "parallel.grid".into(),
                value: format!("{:?}", grid.dims),
                allowed: format!("a process grid of {} ranks", comm.size()),
            });
        }
        if opts.forward_components == 0 {
            return Err(Error::OutOfRange {
                field: "fft.components".into(),
                value: format!("{} forward, {} backward", opts.forward_components, opts.backward_components),
                allowed: "at least one forward component".into(),
            });
        }
        for (i, a) in user_axes.iter().enumerate() {
            a.validate(i)?;
        }
        let axes = order.map(|i| user_axes[i]);
        let any_dft = axes.iter().any(|a| a.transform == AxisTransform::Dft);
        let r2c = !opts.complex && axes[0].transform == AxisTransform::Dft;
        if r2c && axes[0].data_offset != 0 {
            return Err(Error::OutOfRange {
                field: format!("fft axis {}", order[0]),
                value: format!("data offset {}", axes[0].data_offset),
                allowed: "0 on the real-to-complex axis".into(),
            });
        }
        let nf = if opts.complex || any_dft { 2 } else { 1 };
        let lines = [axes[0].line_slots(r2c), axes[1].line, axes[2].line];
        let n = axes.map(|a| a.n);
        check_classes(&axes, order, lines[0], classes)?;
        let classes = ModeClass::cover(classes, lines[0], [axes[1].fft_len, axes[2].fft_len]);
        if py > n[1].min(lines[0]) || pz > n[2].min(lines[1]) {
            return Err(Error::OutOfRange {
                field: "parallel.grid".into(),
                value: format!("[{py}, {pz}] on a {}x{}x{} grid", user_axes[0].n, user_axes[1].n, user_axes[2].n),
                allowed: format!(
                    "P_1 <= {} and P_2 <= {} so that every rank owns part of every topology",
                    n[1].min(lines[0]),
                    n[2].min(lines[1])
                ),
            });
        }
        let [iy, iz] = grid.coords(comm.rank());
        let [l0, l1, l2] = lines;
        let t0 = GridTopology { global: [l0, n[1], n[2]], parts: [1, py, pz], coords: [0, iy, iz] };
        let t1 = GridTopology { global: [l0, l1, n[2]], parts: [py, 1, pz], coords: [iy, 0, iz] };
        let t2 = GridTopology { global: [l0, l1, l2], parts: [py, pz, 1], coords: [iy, iz, 0] };
        let cs = nf * t0.local_len().max(t1.local_len()).max(t2.local_len());
        let threads = opts.threads.max(1);
        let mut data = HugeBuffer::new(cs * opts.forward_components.max(opts.backward_components), T::ZERO, threads);
        let ptr = data.as_mut_slice().as_mut_ptr();

        crate::ensure_fftw_threads();
        let periodic = user_axes.iter().all(|a| *a == AxisSpec::periodic(a.n));
        let whole =
            grid.ranks() == 1 && !opts.complex && periodic && n[0].is_multiple_of(2) && whole_plan(n, opts.lines);
        let engine = if whole {
            // one rank: the layouts of T0 and T2 are the padded r2c layout of the whole grid,
            // where FFTW's 3-D plans beat three passes of FFTW's 1-D transforms (and of
            // RustFFT's lines on small power-of-two grids, `whole_plan`)
            let layout = parki_decomp::GridLayout { global: n, stride: None };
            debug_assert_eq!(cs, layout.real_len());
            let forward = crate::ffi::Plan::many(&layout, opts.forward_components, ptr, true, threads, opts.rigor)?;
            let backward = crate::ffi::Plan::many(&layout, opts.backward_components, ptr, false, threads, opts.rigor)?;
            Engine::Whole { forward, backward }
        } else if let Some(kinds) =
            whole_r2r_kinds(&axes, grid.ranks(), opts.complex).filter(|_| !uses_fft_r2r(&axes, opts.r2r))
        {
            // FFTW's guru layout, slowest axis first: (n, stride, stride) in reals
            let dims = [(n[2], n[1] * l0, n[1] * l0), (n[1], l0, l0), (l0, 1, 1)];
            let plan = |k: [R2rKind; 3], comps: usize| {
                Plan1d::r2r_nd(&dims, &[k[2], k[1], k[0]], &[(comps, cs, cs)], ptr, threads, opts.rigor)
            };
            let forward = plan(kinds[0], opts.forward_components)?;
            let backward = plan(kinds[1], opts.backward_components)?;
            Engine::WholeR2r { forward, backward }
        } else {
            let planner = Planner {
                axes: &axes,
                r2c,
                nf,
                cs,
                t0,
                t1,
                t2,
                ptr,
                threads,
                rigor: opts.rigor,
                lines: opts.lines,
                r2r: opts.r2r,
                classes: &classes,
                fuse: opts.fuse_planes && py == 1,
            };
            let forward = Box::new(planner.plans(opts.forward_components, true)?);
            let backward = Box::new(planner.plans(opts.backward_components.max(1), false)?);
            Engine::Pencils { forward, backward }
        };

        // switches: sub-communicators of the ranks sharing an a2 part (T0 <-> T1) and an a0 part
        let sub1 = comm.split(iz, iy);
        let sub2 = comm.split(iy, iz);
        let switch1 = |comps: usize| -> Switch<T> {
            if py == 1 {
                return Switch { plan: None };
            }
            let [_, yl0, zl0] = t0.local();
            let [xl1, _, _] = t1.local();
            let a: Vec<usize> = (0..py).map(|j| nf * comps * zl0 * yl0 * split_range(l0, py, j).len()).collect();
            let b: Vec<usize> = (0..py).map(|i| nf * comps * zl0 * split_range(n[1], py, i).len() * xl1).collect();
            Switch { plan: Some(ExchangePlan::new(&sub1, &a, &b, opts.backend)) }
        };
        let switch2 = |comps: usize| -> Switch<T> {
            if pz == 1 {
                return Switch { plan: None };
            }
            let [xl1, _, zl1] = t1.local();
            let [_, yl2, _] = t2.local();
            let a: Vec<usize> = (0..pz).map(|j| nf * comps * zl1 * split_range(l1, pz, j).len() * xl1).collect();
            let b: Vec<usize> = (0..pz).map(|i| nf * comps * split_range(n[2], pz, i).len() * yl2 * xl1).collect();
            Switch { plan: Some(ExchangePlan::new(&sub2, &a, &b, opts.backend)) }
        };
        // the backward switches reuse the forward ones when they move as many components
        let backward = opts.backward_components.max(1);
        let same = backward == opts.forward_components;
        let sw1 = [switch1(opts.forward_components), if same { Switch { plan: None } } else { switch1(backward) }];
        let sw2 = [switch2(opts.forward_components), if same { Switch { plan: None } } else { switch2(backward) }];
        Ok(Self {
            comm: comm.clone(),
            grid,
            global: user_axes.map(|a| a.n),
            opts,
            axes,
            order,
            r2c,
            nf,
            lines,
            t0,
            t1,
            t2,
            cs,
            data,
            engine,
            sw1,
            sw2,
            classes,
            times: FftTimes::default(),
        })
    }

    /// The a1 and a2 transform lengths per a0 spectral slot, covering every slot (one class at
    /// the axes' own lengths without padding per periodic mode).
    pub fn mode_classes(&self) -> &[ModeClass] {
        &self.classes
    }

    /// The process grid.
    pub fn proc_grid(&self) -> ProcGrid {
        self.grid
    }

    /// Data points per axis (user order).
    pub fn global(&self) -> [usize; 3] {
        self.global
    }

    /// The options.
    pub fn options(&self) -> &DistFftOptions {
        &self.opts
    }

    /// The memory order of the axes: `order()[j]` is the user axis stored as `a_j` (a0
    /// fastest).
    pub fn order(&self) -> [usize; 3] {
        self.order
    }

    /// The axes in memory order.
    pub fn axes(&self) -> [AxisSpec; 3] {
        self.axes
    }

    /// Reals per element of the topologies: 2 when values are complex, 1 when every axis is
    /// real-to-real and the input real.
    pub fn element_reals(&self) -> usize {
        self.nf
    }

    /// Whether a0 is transformed real-to-complex (T0 rows then hold `2 L0` reals).
    pub fn is_r2c(&self) -> bool {
        self.r2c
    }

    /// Topology `t` (0: real space, 2: spectrum), sizes in elements, axes in memory order.
    pub fn topology(&self, t: usize) -> GridTopology {
        [self.t0, self.t1, self.t2][t]
    }

    /// The real-space topology T0 (for the periodic transform: `global[0]` counts complex row
    /// entries; the real x-row is the whole `Mx`).
    pub fn real_topology(&self) -> GridTopology {
        self.t0
    }

    /// Owned real-space a1 and a2 ranges (the whole a0 line is owned).
    pub fn real_ranges(&self) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
        (self.t0.range(1), self.t0.range(2))
    }

    /// Reals per a0 row in real space: `2 (Mx/2 + 1)` (r2c padding), `2 L0` (complex) or `L0`.
    pub fn row_stride(&self) -> usize {
        self.nf * self.lines[0]
    }

    /// Reals between components.
    pub fn component_stride(&self) -> usize {
        self.cs
    }

    /// The a0 rows of the local real-space block (whole rows, for halo exchanges).
    pub fn row_layout(&self) -> RowLayout {
        RowLayout { mx: self.axes[0].n, row_stride: self.row_stride(), component_stride: self.cs }
    }

    /// Offset of real-space point `(i0, i1_loc, i2_loc)` of component 0 (memory-order axes,
    /// `i0` a slot of the a0 line; add `c * component_stride()`); for complex values, of the
    /// real part.
    #[inline]
    pub fn real_index(&self, x: usize, y_loc: usize, z_loc: usize) -> usize {
        let yl = self.t0.local()[1];
        (z_loc * yl + y_loc) * self.row_stride() + if self.r2c { x } else { self.nf * x }
    }

    /// Offset of local spectral element `(i0_loc, i1_loc, i2)` of component 0 in T2
    /// (memory-order axes; add `c * component_stride()`).
    #[inline]
    pub fn spectral_index(&self, i0: usize, i1: usize, i2: usize) -> usize {
        let [xl, yl, _] = self.t2.local();
        self.nf * ((i2 * yl + i1) * xl + i0)
    }

    /// The local spectrum after [`forward`](Self::forward) (axes in memory order).
    pub fn spectral_layout(&self) -> SpectralBlock {
        let r0 = self.t2.range(0);
        let r1 = self.t2.range(1);
        SpectralBlock {
            x: (r0.start, r0.len()),
            y: (r1.start, r1.len()),
            z: self.lines[2],
            row_stride: self.nf * r0.len(),
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

    /// Bytes of the local buffer, of the switches' exchange buffers and of the transforms'
    /// scratch.
    pub fn bytes(&self) -> usize {
        let switches: usize =
            self.sw1.iter().chain(&self.sw2).filter_map(|s| s.plan.as_ref()).map(ExchangePlan::bytes).sum();
        let scratch = match &self.engine {
            Engine::Pencils { forward, backward } => {
                forward.passes.iter().chain(&backward.passes).flatten().map(Pass::bytes).sum()
            }
            _ => 0,
        };
        self.cs * self.opts.forward_components.max(self.opts.backward_components) * T::BYTES + switches + scratch
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
        [self.nf * c * (self.t0.local_len() - stay1), self.nf * c * (self.t1.local_len() - stay2)]
    }

    fn par(&self) -> Par {
        Par::with_threads(self.opts.threads)
    }

    /// Zeroes each T0 row outside its data, so that every slot the forward transform does not
    /// write holds zero (a backward transform of the other parity, reading the spectrum one slot
    /// further along, then reads zero there).
    fn clear_row_padding(&mut self, comps: usize) {
        let a = self.axes[0];
        if a.transform == AxisTransform::Identity {
            return;
        }
        let (row, [_, yl, zl]) = (self.row_stride(), self.t0.local());
        // reals of the data within a row
        let data = if self.r2c { 0..a.n } else { self.nf * a.data_offset..self.nf * (a.data_offset + a.n) };
        if data.start == 0 && data.end >= row {
            return;
        }
        let cs = self.cs;
        let buf = self.data.as_mut_slice();
        for c in 0..comps {
            for r in 0..yl * zl {
                let base = c * cs + r * row;
                buf[base..base + data.start].fill(T::ZERO);
                buf[base + data.end..base + row].fill(T::ZERO);
            }
        }
    }

    /// Runs the whole transform in `dir` when one FFTW plan does it (the one-rank engines);
    /// `false` when the transform runs as 1-D passes between switches.
    fn run_whole(&mut self, dir: Dir) -> bool {
        let p = self.data.as_mut_slice().as_mut_ptr();
        let forward = dir == Dir::Forward;
        let t = Instant::now();
        match &self.engine {
            // SAFETY: the plan was made for this buffer's layout and its direction's components.
            Engine::Whole { forward: f, backward: b } => unsafe { if forward { f } else { b }.execute(p) },
            // SAFETY: as above.
            Engine::WholeR2r { forward: f, backward: b } => unsafe { if forward { f } else { b }.execute(p) },
            Engine::Pencils { .. } => return false,
        }
        self.times.fft += t.elapsed().as_secs_f64();
        true
    }

    /// Runs the pass along memory axis `j` of direction `dir`, timed as transform time.
    fn pass(&mut self, dir: Dir, j: usize) {
        let p = self.data.as_mut_slice().as_mut_ptr();
        let par = self.par();
        let t = Instant::now();
        if let Engine::Pencils { forward, backward } = &mut self.engine {
            let plans = if dir == Dir::Forward { forward } else { backward };
            if let Some(pass) = plans.passes[j].as_mut() {
                // SAFETY: the pass was planned for this buffer and the topology that holds axis
                // j whole, which the switches have left in it.
                unsafe { pass.execute(p, par) };
            }
        }
        self.times.fft += t.elapsed().as_secs_f64();
    }

    /// Runs the a0 and a1 passes of `dir` fused per a2 plane when they were planned so
    /// (module `planes`), timed as transform time; `false` when they run pass by pass.
    fn planes(&mut self, dir: Dir) -> bool {
        let p = self.data.as_mut_slice().as_mut_ptr();
        let par = self.par();
        let Engine::Pencils { forward, backward } = &self.engine else {
            return false;
        };
        let Some(planes) = (if dir == Dir::Forward { forward } else { backward }).planes.as_ref() else {
            return false;
        };
        let t = Instant::now();
        // SAFETY: planned for this buffer; the data are in T0 (forward) or T1 (backward).
        unsafe { planes.execute(p, par) };
        self.times.fft += t.elapsed().as_secs_f64();
        true
    }

    /// Whether the a0 and a1 passes run fused per a2 plane (module `planes`), both ways.
    pub fn fuses_planes(&self) -> bool {
        matches!(&self.engine, Engine::Pencils { forward, backward } if forward.planes.is_some() && backward.planes.is_some())
    }

    /// Forward transform of the first `forward_components` components (T0 real -> T2 spectrum).
    pub fn forward(&mut self) {
        let comps = self.opts.forward_components;
        if self.run_whole(Dir::Forward) {
            return;
        }
        if !self.planes(Dir::Forward) {
            self.clear_row_padding(comps);
            self.pass(Dir::Forward, 0);
            self.switch1(Dir::Forward, comps);
            self.pass(Dir::Forward, 1);
        }
        self.switch2(Dir::Forward, comps);
        self.pass(Dir::Forward, 2);
    }

    /// Backward transform of the first `backward_components` components (T2 -> T0 real).
    pub fn backward(&mut self) {
        let c = self.opts.backward_components;
        if c == 0 || self.run_whole(Dir::Backward) {
            return;
        }
        self.pass(Dir::Backward, 2);
        self.switch2(Dir::Backward, c);
        if !self.planes(Dir::Backward) {
            self.pass(Dir::Backward, 1);
            self.switch1(Dir::Backward, c);
            self.pass(Dir::Backward, 0);
        }
    }

    /// T0 <-> T1 within the ranks sharing an a2 part: blocks `[c][a2][a1 rows][L0 part]`.
    fn switch1(&mut self, dir: Dir, comps: usize) {
        let k = usize::from(dir == Dir::Backward && comps != self.opts.forward_components);
        let par = self.par();
        let (py, nf, cs) = (self.grid.dims[0], self.nf, self.cs);
        let (l0, l1, n1, d1) =
            (self.lines[0], self.lines[1], self.axes[1].n, self.axes[1].offsets(dir == Dir::Forward).1);
        let (t0, t1) = (self.t0, self.t1);
        let [_, yl0, zl0] = t0.local();
        let xl1 = t1.local()[0];
        let nld = [n1, l1, d1];
        let Some(plan) = self.sw1[k].plan.as_mut() else {
            // one part along a0: T0 and T1 differ only by a1's padding
            if n1 != l1 {
                let t = Instant::now();
                relayout(self.data.as_mut_slice(), cs, comps, zl0, nf * l0, nld, dir == Dir::Forward);
                self.times.switch += t.elapsed().as_secs_f64();
            }
            return;
        };
        let _g = self.comm.stage(FftStage::Switch1);
        let t = Instant::now();
        let data = Ptr(self.data.as_mut_slice().as_mut_ptr());
        // T0 side, peer j: runs of its L0 part, one per (c, a2, a1)
        let t0_runs = |j: usize| {
            let r = split_range(l0, py, j);
            (comps * zl0 * yl0, nf * r.len(), move |q: usize| {
                let (c, zy) = (q / (zl0 * yl0), q % (zl0 * yl0));
                c * cs + nf * (zy * l0 + r.start)
            })
        };
        // T1 side, peer i: runs of its a1 rows (at the data offset), one per (c, a2)
        let t1_runs = |i: usize| {
            let r = split_range(n1, py, i);
            (comps * zl0, nf * r.len() * xl1, move |q: usize| {
                let (c, z) = (q / zl0, q % zl0);
                c * cs + nf * (z * l1 + d1 + r.start) * xl1
            })
        };
        run_switch(plan, dir, data, par, t0_runs, t1_runs);
        if dir == Dir::Forward {
            zero_padding(self.data.as_mut_slice(), cs, comps, zl0, nf * xl1, nld);
        }
        self.times.switch += t.elapsed().as_secs_f64();
    }

    /// T1 <-> T2 within the ranks sharing an a0 part: blocks `[c][a2 part][a1 part][L0_loc]`.
    fn switch2(&mut self, dir: Dir, comps: usize) {
        let k = usize::from(dir == Dir::Backward && comps != self.opts.forward_components);
        let par = self.par();
        let (pz, nf, cs) = (self.grid.dims[1], self.nf, self.cs);
        let (l1, l2, n2, d2) =
            (self.lines[1], self.lines[2], self.axes[2].n, self.axes[2].offsets(dir == Dir::Forward).1);
        let (t1, t2) = (self.t1, self.t2);
        let [xl1, _, zl1] = t1.local();
        let yl2 = t2.local()[1];
        let nld = [n2, l2, d2];
        // forward: whether the a2 pass zeroes the padding itself
        let folded =
            dir == Dir::Forward && matches!(&self.engine, Engine::Pencils { forward, .. } if forward.a2_zeroes_padding);
        let Some(plan) = self.sw2[k].plan.as_mut() else {
            // (folded: the data first in the line, so the re-layout would only zero)
            if n2 != l2 && !folded {
                let t = Instant::now();
                relayout(self.data.as_mut_slice(), cs, comps, 1, nf * xl1 * yl2, nld, dir == Dir::Forward);
                self.times.switch += t.elapsed().as_secs_f64();
            }
            return;
        };
        let _g = self.comm.stage(FftStage::Switch2);
        let t = Instant::now();
        let data = Ptr(self.data.as_mut_slice().as_mut_ptr());
        // T1 side, peer j: runs of its a1 part, one per (c, a2)
        let t1_runs = |j: usize| {
            let r = split_range(l1, pz, j);
            (comps * zl1, nf * r.len() * xl1, move |q: usize| {
                let (c, z) = (q / zl1, q % zl1);
                c * cs + nf * (z * l1 + r.start) * xl1
            })
        };
        // T2 side, peer i: one run of its a2 planes (at the data offset) per c
        let t2_runs = |i: usize| {
            let r = split_range(n2, pz, i);
            (comps, nf * r.len() * yl2 * xl1, move |c: usize| c * cs + nf * (d2 + r.start) * yl2 * xl1)
        };
        run_switch(plan, dir, data, par, t1_runs, t2_runs);
        if dir == Dir::Forward && !folded {
            zero_padding(self.data.as_mut_slice(), cs, comps, 1, nf * xl1 * yl2, nld);
        }
        self.times.switch += t.elapsed().as_secs_f64();
    }
}

/// Checks `classes` against the axes in memory order (`l0` spectral slots along a0).
fn check_classes(axes: &[AxisSpec; 3], order: [usize; 3], l0: usize, classes: &[ModeClass]) -> Result<()> {
    if classes.is_empty() {
        return Ok(());
    }
    let bad = |value: String, allowed: &str| {
        Err(Error::OutOfRange { field: "fft mode classes".into(), value, allowed: allowed.into() })
    };
    if axes[0].transform != AxisTransform::Dft {
        return bad(
            format!("axis {} transformed first is {:?}", order[0], axes[0].transform),
            "a DFT along the first axis",
        );
    }
    for j in 1..3 {
        let a = axes[j];
        if a.transform != AxisTransform::Dft || a.fft_offset != 0 || a.data_offset != 0 {
            return bad(
                format!("axis {}: {a:?}", order[j]),
                "padded DFTs with data and transform first along the others",
            );
        }
    }
    let mut at = 0;
    for c in classes {
        if c.slots.start < at || c.slots.end > l0 {
            return bad(format!("{:?} of {l0} slots", c.slots), "ascending, disjoint slot ranges inside the spectrum");
        }
        for j in 0..2 {
            let a = axes[1 + j];
            if c.len[j] < a.n || c.len[j] > a.fft_len {
                return bad(
                    format!("length {} along axis {}", c.len[j], order[1 + j]),
                    &format!("from the {} data points to the transform length {}", a.n, a.fft_len),
                );
            }
        }
        at = c.slots.end;
    }
    Ok(())
}

/// Whether a periodic grid of `n` points on one rank runs as FFTW's 3-D plan rather than as
/// three passes: always with FFTW's lines; with RustFFT's (round trips of three components,
/// one thread, FFTW_ESTIMATE, `parki-bench-dist fft`; design.md, "The strided passes' lines
/// on RustFFT") only on power-of-two grids of at most 128 points per axis, where FFTW's 3-D
/// plan ran 0.60-0.81x the passes' time (64^3, 128^3), against 1.2-1.8x everywhere else
/// measured (96^3 to 256^3).
fn whole_plan(n: [usize; 3], lines: LineEngine) -> bool {
    lines == LineEngine::Fftw || n.iter().all(|&m| m.is_power_of_two() && m <= 128)
}

/// What the 1-D plans of a [`DistFft`] are made from.
struct Planner<'a, T: FftReal> {
    axes: &'a [AxisSpec; 3],
    r2c: bool,
    nf: usize,
    cs: usize,
    t0: GridTopology,
    t1: GridTopology,
    t2: GridTopology,
    ptr: *mut T,
    threads: usize,
    rigor: PlanRigor,
    lines: LineEngine,
    r2r: R2rMethod,
    /// The a1 and a2 lengths per a0 slot (covering every slot).
    classes: &'a [ModeClass],
    /// Whether the a0 and a1 passes may run fused per a2 plane (one part along a1).
    fuse: bool,
}

impl<T: FftReal> Planner<'_, T> {
    /// Whether the a1 and a2 passes run per class (some class shorter than the axes).
    fn per_class(&self) -> bool {
        self.classes.iter().any(|c| c.len != [self.axes[1].fft_len, self.axes[2].fft_len])
    }

    /// The a1 (`j = 1`) or a2 (`j = 2`) pass of `kind` per class: in T1 the lines along a1 of
    /// the class's local a0 columns; in T2 along a2 of its local a0 columns and of the local a1
    /// slots inside the class's a1 spectrum.
    fn class_pass(&self, j: usize, kind: Kind, comps: usize) -> Result<Pass<T>> {
        let comp = self.cs / 2;
        let mut sets = Vec::new();
        for c in self.classes {
            let (t, inner) = if j == 1 {
                let [xl1, _, zl1] = self.t1.local();
                (self.t1, (zl1, self.t1.global[1] * xl1))
            } else {
                let [xl2, _, _] = self.t2.local();
                let ys = self.t2.range(1);
                let yc = c.len[0].min(ys.end).saturating_sub(ys.start);
                (self.t2, (yc, xl2))
            };
            let xs = t.range(0);
            let (a, b) = (c.slots.start.max(xs.start), c.slots.end.min(xs.end));
            if a >= b || inner.0 == 0 {
                continue;
            }
            let [xl, yl, _] = t.local();
            let stride = if j == 1 { xl } else { xl * yl };
            let lines =
                Lines { n: c.len[j - 1], start: a - xs.start, stride, width: b - a, outer: (comps, comp), inner };
            sets.push(BlockedLines::new(kind, lines, self.ptr, self.rigor, self.lines)?);
        }
        Ok(Pass::Classes(sets))
    }

    /// The kind of axis `j`'s transform in direction `forward` (`None`: identity).
    fn kind(&self, j: usize, forward: bool) -> Option<Kind> {
        match self.axes[j].transform {
            AxisTransform::Identity => None,
            AxisTransform::Dft if j == 0 && self.r2c => Some(if forward { Kind::R2c } else { Kind::C2r }),
            AxisTransform::Dft => Some(if forward { Kind::C2cForward } else { Kind::C2cBackward }),
            AxisTransform::R2r { forward: f, backward: b } => Some(Kind::R2r(if forward { f } else { b })),
        }
    }

    /// An [`FftR2r`] pass of `kind` along `lines` when the method asks for one and it computes
    /// `kind` on lines of this length.
    fn fft_r2r(&self, kind: Kind, lines: LineSet) -> Result<Option<Pass<T>>> {
        match kind {
            Kind::R2r(k) if self.r2r == R2rMethod::Fft && r2r_fft::supports(k, lines.n) => {
                Ok(Some(Pass::FftR2r(FftR2r::new(k, lines, self.threads, self.rigor)?)))
            }
            _ => Ok(None),
        }
    }

    /// The a0 and a1 passes of `comps` components in direction `forward` fused per a2 plane
    /// (module `planes`), when the grid has one part along a1, a0 is a DFT and a1 a complex DFT
    /// of one length (no mode classes); `None` otherwise.
    fn plane_passes(&self, comps: usize, forward: bool) -> Result<Option<PlanePasses<T>>> {
        let (Some(k0), Some(k1)) = (self.kind(0, forward), self.kind(1, forward)) else {
            return Ok(None);
        };
        let dft0 = matches!(k0, Kind::R2c | Kind::C2r | Kind::C2cForward | Kind::C2cBackward);
        let dft1 = matches!(k1, Kind::C2cForward | Kind::C2cBackward);
        if !self.fuse || self.nf != 2 || !dft0 || !dft1 || self.per_class() {
            return Ok(None);
        }
        let (a0, a1) = (self.axes[0], self.axes[1]);
        let l0 = self.t0.global[0];
        let n1 = a1.n;
        debug_assert_eq!(self.t0.local()[1], n1);
        let geo = PlaneGeometry {
            comps,
            cs: self.cs,
            planes: self.t0.local()[2],
            row: 2 * l0,
            n1,
            l1: self.t1.global[1],
            d1: a1.offsets(forward).1,
        };
        let start = a0.offsets(forward).0;
        let (rows, offset) = match k0 {
            Kind::R2c => ((n1, 2 * l0, l0), 0),
            Kind::C2r => ((n1, l0, 2 * l0), 0),
            _ => ((n1, l0, l0), 2 * start),
        };
        let row = RowSpec { kind: k0, n: a0.fft_len, stride: (1, 1), rows, offset };
        let xl1 = self.t1.local()[0];
        let lines = Lines {
            n: a1.fft_len,
            start: a1.offsets(forward).0 * xl1,
            stride: xl1,
            width: xl1,
            outer: (1, 0),
            inner: (1, 0),
        };
        // forward: the reals of a row outside the data are zeroed first (clear_row_padding)
        let data = if self.r2c { 0..a0.n } else { 2 * a0.data_offset..2 * (a0.data_offset + a0.n) };
        let row_data = (forward && !(data.start == 0 && data.end >= 2 * l0)).then_some(data);
        Ok(Some(PlanePasses::new(geo, forward, row, (k1, lines), row_data, self.ptr, (self.rigor, self.lines))?))
    }

    /// The a0, a1 and a2 passes of `comps` components in direction `forward`.
    fn plans(&self, comps: usize, forward: bool) -> Result<AxisPlans<T>> {
        let (nf, cs) = (self.nf, self.cs);
        let [l0, l1] = [self.t0.global[0], self.t1.global[1]];
        let planes = self.plane_passes(comps, forward)?;
        let a0 = match self.kind(0, forward) {
            _ if planes.is_some() => None,
            None => None,
            Some(kind) => {
                let a = self.axes[0];
                let [_, yl0, zl0] = self.t0.local();
                let rows = yl0 * zl0;
                let start = a.offsets(forward).0;
                let lines = if nf == 1 {
                    LineSet { n: a.fft_len, stride: 1, start, loops: [(comps, cs), (rows, l0), (1, 0)] }
                } else {
                    LineSet { n: a.fft_len, stride: 2, start: 2 * start, loops: [(comps, cs), (rows, 2 * l0), (2, 1)] }
                };
                // RustFFT's rows where it runs the kind (not real-to-real, not odd real rows)
                let offset = if matches!(kind, Kind::R2c | Kind::C2r) { 0 } else { 2 * start };
                let layout = RowSet { n: a.fft_len, rows: (rows, 2 * l0), comps: (comps, cs), offset };
                let native = (self.lines == LineEngine::RustFft && nf == 2)
                    .then(|| NativeRowPass::new(kind, layout).map(Pass::NativeRows))
                    .flatten();
                let pass = match native {
                    Some(pass) => Some(pass),
                    None => self.fft_r2r(kind, lines)?,
                };
                match pass {
                    Some(pass) => Some(pass),
                    None => {
                        // (stride, loops (count, input stride, output stride), first real)
                        type Layout = ((usize, usize), Vec<(usize, usize, usize)>, usize);
                        let (stride, howmany, offset): Layout = match kind {
                            Kind::R2c => ((1, 1), vec![(rows, 2 * l0, l0), (comps, cs, cs / 2)], 0),
                            Kind::C2r => ((1, 1), vec![(rows, l0, 2 * l0), (comps, cs / 2, cs)], 0),
                            Kind::C2cForward | Kind::C2cBackward => {
                                ((1, 1), vec![(rows, l0, l0), (comps, cs / 2, cs / 2)], 2 * start)
                            }
                            Kind::R2r(_) if nf == 1 => ((1, 1), vec![(rows, l0, l0), (comps, cs, cs)], start),
                            Kind::R2r(_) => {
                                ((2, 2), vec![(rows, 2 * l0, 2 * l0), (comps, cs, cs), (2, 1, 1)], 2 * start)
                            }
                        };
                        // SAFETY: the offset lies inside the buffer (validated axis, cs >= the T0 block).
                        let p = unsafe { self.ptr.add(offset) };
                        Some(Pass::Row(RowPlan {
                            plan: Plan1d::new(kind, a.fft_len, stride, &howmany, p, self.threads, self.rigor)?,
                            offset,
                        }))
                    }
                }
            }
        };
        // the strided axes: elements of the transform per element of the topology
        let per = |kind: Kind| match kind {
            Kind::R2r(_) => (nf, cs),
            _ => (1, cs / 2),
        };
        let strided = |kind: Kind, lines: Lines| -> Result<Pass<T>> {
            let set = LineSet {
                n: lines.n,
                stride: lines.stride,
                start: lines.start,
                loops: [lines.outer, lines.inner, (lines.width, 1)],
            };
            match self.fft_r2r(kind, set)? {
                Some(pass) => Ok(pass),
                None => Ok(Pass::Lines(BlockedLines::new(kind, lines, self.ptr, self.rigor, self.lines)?)),
            }
        };
        let a1 = match self.kind(1, forward) {
            _ if planes.is_some() => None,
            None => None,
            Some(kind) if self.per_class() => Some(self.class_pass(1, kind, comps)?),
            Some(kind) => {
                let (m, comp) = per(kind);
                let [xl1, _, zl1] = self.t1.local();
                let a = self.axes[1];
                let lines = Lines {
                    n: a.fft_len,
                    start: m * a.offsets(forward).0 * xl1,
                    stride: m * xl1,
                    width: m * xl1,
                    outer: (comps, comp),
                    inner: (zl1, m * l1 * xl1),
                };
                Some(strided(kind, lines)?)
            }
        };
        let mut a2_zeroes_padding = false;
        let a2 = match self.kind(2, forward) {
            None => None,
            Some(kind) if self.per_class() => Some(self.class_pass(2, kind, comps)?),
            Some(kind) => {
                let (m, comp) = per(kind);
                let [xl2, yl2, _] = self.t2.local();
                let plane = xl2 * yl2;
                let a = self.axes[2];
                let lines = Lines {
                    n: a.fft_len,
                    start: m * a.offsets(forward).0 * plane,
                    stride: m * plane,
                    width: m * plane,
                    outer: (comps, comp),
                    inner: (1, 0),
                };
                match strided(kind, lines)? {
                    // the padding after the data, zeroed per block in cache instead of by switch 2
                    // (data and transform from the line's first slot, the transform over the line)
                    Pass::Lines(l) if forward && a.data_offset == 0 && a.fft_offset == 0 && a.fft_len == a.line => {
                        a2_zeroes_padding = a.n < a.line;
                        Some(Pass::Lines(l.zeroing(a.n..a.line)))
                    }
                    pass => Some(pass),
                }
            }
        };
        Ok(AxisPlans { passes: [a0, a1, a2], planes, a2_zeroes_padding })
    }
}

#[cfg(test)]
mod tests {
    use parki_comm::Comm;
    use parki_decomp::ProcGrid;

    use super::{DistFft, DistFftOptions};
    use crate::axes::{AxisSpec, ModeClass};

    /// The a0 and a1 passes fused per a2 plane (module `planes`) give the spectrum and the round
    /// trip of the passes run one by one: padded and periodic axes in every position, odd sizes
    /// (several waves), data offsets, real and complex input, forward-only components beyond
    /// the backward ones, both precisions, FFTW_ESTIMATE and FFTW_MEASURE.
    #[test]
    fn planes_fused_equal_the_passes_one_by_one() {
        type Plans = (crate::PlanRigor, crate::LineEngine);
        fn case<T: crate::FftReal>(axes: [AxisSpec; 3], complex: bool, plans: [Plans; 2], tol: f64) {
            // the first plan fused, the second pass by pass
            let opts = |fuse_planes: bool, (rigor, lines): Plans| DistFftOptions {
                forward_components: 3,
                backward_components: 2,
                complex,
                threads: 2,
                rigor,
                lines,
                fuse_planes,
                ..DistFftOptions::new(3)
            };
            let plan = |fuse, p: Plans| {
                DistFft::<T>::with_axes_in_order(&Comm::single(), axes, [0, 1, 2], ProcGrid::slab(1), opts(fuse, p))
                    .unwrap()
            };
            let (mut fused, mut passes) = (plan(true, plans[0]), plan(false, plans[1]));
            let periodic_real = !complex && axes.iter().all(|a| *a == AxisSpec::periodic(a.n));
            let whole = periodic_real && super::whole_plan(axes.map(|a| a.n), plans[0].1);
            // one rank's periodic grid runs as one 3-D plan only where `whole_plan` says so
            assert_eq!(fused.fuses_planes(), !whole, "{axes:?}");
            assert!(!passes.fuses_planes());
            let n = axes.map(|a| a.n);
            let (cs, nf) = (fused.component_stride(), if complex { 2 } else { 1 });
            for f in [&mut fused, &mut passes] {
                // garbage outside the data: the transforms must not read it
                f.data_mut().iter_mut().for_each(|v| *v = T::from_f64(1e3));
                for c in 0..3 {
                    for z in 0..n[2] {
                        for y in 0..n[1] {
                            for x in 0..n[0] * nf {
                                let v = ((c * 37 + x * 11 + y * 7 + z * 3) % 23) as f64 - 11.0;
                                let x0 = if complex { 2 * axes[0].data_offset + x } else { x };
                                let i = c * cs + f.real_index(0, y, z) + x0;
                                f.data_mut()[i] = T::from_f64(v);
                            }
                        }
                    }
                }
                f.forward();
            }
            let block = fused.spectral_layout();
            let (mut worst, mut scale) = (0.0f64, 0.0f64);
            for c in 0..3 {
                for i2 in 0..block.z {
                    for i1 in 0..block.y.1 {
                        for i0 in 0..block.x.1 {
                            let k = c * cs + fused.spectral_index(i0, i1, i2);
                            for r in 0..2 {
                                let (a, b) = (fused.data()[k + r].to_f64(), passes.data()[k + r].to_f64());
                                worst = worst.max((a - b).abs());
                                scale = scale.max(b.abs());
                            }
                        }
                    }
                }
            }
            assert!(worst <= tol * scale, "{axes:?} complex {complex}: spectra differ by {worst:e} of {scale:e}");
            fused.backward();
            passes.backward();
            let (mut worst, mut scale) = (0.0f64, 0.0f64);
            for c in 0..2 {
                for z in 0..n[2] {
                    for y in 0..n[1] {
                        for x in 0..n[0] * nf {
                            let x0 = if complex { 2 * axes[0].data_offset + x } else { x };
                            let i = c * cs + fused.real_index(0, y, z) + x0;
                            let (a, b) = (fused.data()[i].to_f64(), passes.data()[i].to_f64());
                            worst = worst.max((a - b).abs());
                            scale = scale.max(b.abs());
                        }
                    }
                }
            }
            assert!(worst <= tol * scale, "{axes:?} complex {complex}: round trips differ by {worst:e} of {scale:e}");
        }
        let (p, pad) = (AxisSpec::periodic, AxisSpec::padded_dft);
        let shifted = AxisSpec { data_offset: 2, backward_data_offset: 2, ..pad(5, 11) };
        let cases = [
            [p(8), pad(7, 15), pad(5, 11)],
            [p(6), pad(9, 20), pad(13, 27)],
            [pad(6, 12), p(7), pad(5, 10)],
            [pad(6, 14), pad(7, 13), p(9)],
            [p(8), shifted, pad(4, 9)],
            [p(10), p(7), p(5)],
            [p(8), p(4), p(16)],
        ];
        use crate::{LineEngine, PlanRigor};
        let x = AxisSpec { data_offset: 1, backward_data_offset: 1, ..pad(5, 12) };
        for rigor in [PlanRigor::Estimate, PlanRigor::MeasureLines, PlanRigor::Measure] {
            // each engine fused against itself pass by pass, then RustFFT's lines fused
            // against FFTW's pass by pass
            for lines in [[LineEngine::RustFft; 2], [LineEngine::Fftw; 2], [LineEngine::RustFft, LineEngine::Fftw]] {
                let plans = lines.map(|l| (rigor, l));
                for axes in cases {
                    case::<f64>(axes, false, plans, 1e-14);
                    case::<f32>(axes, false, plans, 1e-5);
                }
                case::<f64>([pad(5, 11), pad(7, 15), p(6)], true, plans, 1e-14);
                case::<f64>([x, shifted, p(4)], true, plans, 1e-14);
            }
        }
    }

    /// Padding per periodic mode: each class's spectrum is the DFT of the data zero-padded to
    /// the class's lengths (the defining sums), the slots outside it zero; the round trip with
    /// each class's spectrum divided by its `N_1 N_2` returns `N_0` times the data.
    #[test]
    fn mode_classes_transform_each_class_on_its_own_lengths() {
        let n = [8usize, 5, 4];
        let axes = [AxisSpec::periodic(n[0]), AxisSpec::padded_dft(n[1], 12), AxisSpec::padded_dft(n[2], 10)];
        let classes = [
            ModeClass { slots: 1..3, len: [9, 7] },
            ModeClass { slots: 3..4, len: [6, 4] },
            ModeClass { slots: 4..5, len: [5, 6] },
        ];
        let comps = 2;
        let mut fft = DistFft::<f64>::with_mode_classes(
            &Comm::single(),
            axes,
            [0, 1, 2],
            ProcGrid::slab(1),
            DistFftOptions::new(comps),
            &classes,
        )
        .unwrap();
        let cover = fft.mode_classes().to_vec();
        assert_eq!(cover.len(), 4, "{cover:?}");
        assert_eq!(cover[0], ModeClass { slots: 0..1, len: [12, 10] });
        let value = |c: usize, x: usize, y: usize, z: usize| ((c * 31 + x * 7 + y * 13 + z * 5) % 17) as f64 - 8.0;
        let cs = fft.component_stride();
        for c in 0..comps {
            for z in 0..n[2] {
                for y in 0..n[1] {
                    for x in 0..n[0] {
                        let i = c * cs + fft.real_index(x, y, z);
                        fft.data_mut()[i] = value(c, x, y, z);
                    }
                }
            }
        }
        fft.forward();
        let l = [n[0] / 2 + 1, 12, 10];
        let mut worst = 0.0f64;
        for c in 0..comps {
            for kx in 0..l[0] {
                let len = cover.iter().find(|k| k.slots.contains(&kx)).unwrap().len;
                for kz in 0..l[2] {
                    for ky in 0..l[1] {
                        let (mut re, mut im) = (0.0, 0.0);
                        if ky < len[0] && kz < len[1] {
                            for z in 0..n[2] {
                                for y in 0..n[1] {
                                    for x in 0..n[0] {
                                        let ph = -2.0
                                            * std::f64::consts::PI
                                            * ((kx * x) as f64 / n[0] as f64
                                                + (ky * y) as f64 / len[0] as f64
                                                + (kz * z) as f64 / len[1] as f64);
                                        re += value(c, x, y, z) * ph.cos();
                                        im += value(c, x, y, z) * ph.sin();
                                    }
                                }
                            }
                        }
                        let i = c * cs + fft.spectral_index(kx, ky, kz);
                        let d = fft.data();
                        worst = worst.max((d[i] - re).abs()).max((d[i + 1] - im).abs());
                    }
                }
            }
        }
        assert!(worst < 1e-11, "forward: {worst:e}");
        // each class's spectrum over its N_1 N_2: the round trip gives N_0 times the data
        for c in 0..comps {
            for kx in 0..l[0] {
                let len = cover.iter().find(|k| k.slots.contains(&kx)).unwrap().len;
                let s = 1.0 / (len[0] * len[1]) as f64;
                for kz in 0..l[2] {
                    for ky in 0..l[1] {
                        let i = c * cs + fft.spectral_index(kx, ky, kz);
                        fft.data_mut()[i] *= s;
                        fft.data_mut()[i + 1] *= s;
                    }
                }
            }
        }
        fft.backward();
        let mut rt = 0.0f64;
        for c in 0..comps {
            for z in 0..n[2] {
                for y in 0..n[1] {
                    for x in 0..n[0] {
                        let i = c * cs + fft.real_index(x, y, z);
                        rt = rt.max((fft.data()[i] / n[0] as f64 - value(c, x, y, z)).abs());
                    }
                }
            }
        }
        assert!(rt < 1e-12, "round trip: {rt:e}");
        // classes that do not fit the axes are refused, naming the field
        let bad = [ModeClass { slots: 1..3, len: [4, 7] }];
        let e = DistFft::<f64>::with_mode_classes(
            &Comm::single(),
            axes,
            [0, 1, 2],
            ProcGrid::slab(1),
            DistFftOptions::new(1),
            &bad,
        )
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("fft mode classes") && e.contains("length 4"), "{e}");
    }
}
