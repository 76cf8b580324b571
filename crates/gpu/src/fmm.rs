//! The FMM's compute stages on a device: [`GpuFmm`] is a [`parki_fmm::FmmBackend`] over
//! `kernels/fmm.cu`.
//!
//! One evaluation ([`parki_fmm::FmmSession`]) keeps on the device: the source tree's points,
//! harmonic densities and multipoles, the target tree's points, locals and values, and the
//! operators of the order (the P2M and L2P weights, the three unit coaxial matrices, the
//! parent-child rotations; the M2L rotations of the traversal's polar angles are uploaded with
//! the lists). The launches:
//! - `fmm_p2m` over the source leaves (a block per leaf), `fmm_m2m` once per level from the
//!   deepest (a block per parent);
//! - `fmm_m2l`, one launch for every M2L translation: a block per target box, its entries one
//!   after the other, so no atomics and a deterministic sum;
//! - `fmm_l2l` once per level from the top (a block per box);
//! - `fmm_l2p` a thread per target; `fmm_p2p` a block per piece of at most [`BLOCK`] targets
//!   of a leaf (sources staged in shared memory) or `fmm_p2p_global` a thread per target
//!   ([`P2pVariant`]); the values cross the bus once.
//!
//! Each stage waits for the device before it returns, so that the per-stage times of the report
//! are the device's. The host keeps the trees, the traversal and the locally essential tree
//! (parki-fmm). Double precision.

use std::sync::Arc;

use parki_core::{Error, Result};
use parki_fmm::backend::{DeviceFmm, FmmBackend, FmmSession, SourceSide};
use parki_fmm::rotation::YRotation;
use parki_fmm::traversal::Lists;
use parki_fmm::{FmmKernel, OctBox, Octree, Op};

use crate::buffer::DeviceBuffer;
use crate::device::{Args, Device, DevicePtr};

/// Threads per block of every FMM kernel (`FMM_BLOCK`).
const BLOCK: u32 = 128;

/// Dynamic shared memory a translation block may use for its two work vectors: the 48 KB a
/// kernel gets without opting in, less its static shared tables (2 KB) and a margin; above it
/// (orders beyond 53) the vectors live in global scratch.
const SHARED_LIMIT: usize = 44 << 10;

/// Most blocks of a translation launch whose work vectors live in global scratch.
const SCRATCH_BLOCKS: usize = 1024;

/// Most blocks of any launch (the kernels loop over their items with a stride of the grid).
const MAX_GRID: usize = 65_535;

/// The scalars of every FMM kernel (`FmmParams` in kernels/fmm.cu).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct FmmArgs {
    p: i32,
    nc: i32,
    kernel: i32,
    gradient: i32,
    items: u32,
    rstride: u32,
    cstride: u32,
    origin: [f64; 3],
}

/// Most order of the thread-per-translation M2L (`FMM_THREAD_P`).
pub const M2L_THREAD_MAX_ORDER: usize = 16;

/// How M2L runs on the device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum M2lVariant {
    /// [`M2lVariant::Thread`] up to order [`M2L_THREAD_MAX_ORDER`], [`M2lVariant::Block`] above.
    #[default]
    Auto,
    /// `fmm_m2l`: a block per target box, each translation by the whole block (its
    /// coefficients over the threads, five barriers per translation).
    Block,
    /// `fmm_m2l_thread`: a block per target box, a thread per translation (its entries over
    /// the threads, whole translations in each thread's memory), the block's sums by shared
    /// atomics; orders up to [`M2L_THREAD_MAX_ORDER`].
    Thread,
}

impl M2lVariant {
    /// The variant that runs at order `p`.
    pub fn resolve(self, p: usize) -> Self {
        match self {
            M2lVariant::Auto if p <= M2L_THREAD_MAX_ORDER => M2lVariant::Thread,
            M2lVariant::Auto => M2lVariant::Block,
            M2lVariant::Thread if p > M2L_THREAD_MAX_ORDER => M2lVariant::Block,
            v => v,
        }
    }

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            M2lVariant::Auto => "auto",
            M2lVariant::Block => "block",
            M2lVariant::Thread => "thread",
        }
    }
}

/// Mean targets per target leaf below which [`P2pVariant::Auto`] takes
/// [`P2pVariant::Global`] (a block of `BLOCK` threads per piece of a leaf would idle).
pub const P2P_GLOBAL_BELOW: usize = 64;

/// How P2P runs on the device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum P2pVariant {
    /// [`P2pVariant::Global`] when the target leaves hold fewer than [`P2P_GLOBAL_BELOW`]
    /// points on average, else [`P2pVariant::Shared`].
    #[default]
    Auto,
    /// `fmm_p2p`: a block per piece of at most 128 targets of a leaf, the near list's sources
    /// staged through shared memory.
    Shared,
    /// `fmm_p2p_global`: a thread per target over all targets, the sources read from global
    /// memory (the threads of one leaf read the same source at once).
    Global,
}

impl P2pVariant {
    /// The variant for target leaves of `mean` points on average.
    pub fn resolve(self, mean: f64) -> Self {
        match self {
            P2pVariant::Auto if mean < P2P_GLOBAL_BELOW as f64 => P2pVariant::Global,
            P2pVariant::Auto => P2pVariant::Shared,
            v => v,
        }
    }

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            P2pVariant::Auto => "auto",
            P2pVariant::Shared => "shared",
            P2pVariant::Global => "global",
        }
    }
}

/// The FMM backend on device `D` (a CUDA device, or the host emulator in tests).
pub struct GpuFmm<D: Device> {
    dev: Arc<D>,
    m2l: M2lVariant,
    p2p: P2pVariant,
}

impl<D: Device> GpuFmm<D> {
    /// The backend on an open device.
    pub fn new(dev: Arc<D>) -> Self {
        Self { dev, m2l: M2lVariant::Auto, p2p: P2pVariant::Auto }
    }

    /// The same backend with M2L by `variant`.
    pub fn with_m2l(mut self, variant: M2lVariant) -> Self {
        self.m2l = variant;
        self
    }

    /// The same backend with P2P by `variant`.
    pub fn with_p2p(mut self, variant: P2pVariant) -> Self {
        self.p2p = variant;
        self
    }

    /// Another backend on the same device, with the default variants.
    pub fn on_the_same_device(&self) -> Self {
        Self::new(self.dev.clone())
    }

    /// Opens the device of local (node) rank `local_rank` ([`Device::open`]).
    ///
    /// # Errors
    /// The device's: no driver or device, kernels that do not compile.
    pub fn open(local_rank: usize) -> Result<Self> {
        Ok(Self::new(Arc::new(D::open(local_rank)?)))
    }

    /// The device.
    pub fn device(&self) -> &D {
        &self.dev
    }

    /// Device bytes one evaluation needs: `nc` harmonic densities at order `p`, `sources` and
    /// `targets` points and boxes: points with their densities or values, every box's
    /// description and expansions, the operators, and a margin for the lists and a locally
    /// essential tree's remote boxes (a quarter of the local ones).
    pub fn estimate_bytes(p: usize, nc: usize, sources: [usize; 2], targets: [usize; 2]) -> usize {
        let bs = nc * p * p * 8;
        let per_box = 32 + 16 + 4;
        let s = sources[0] * (3 + nc + 3) * 8 + sources[1] * (bs + per_box);
        let t = targets[0] * (3 + 4) * 8 + targets[1] * (bs + per_box + 8);
        let ops = 3 * p * p * p * 8 + 8 * p * p * p * 8;
        let lists = targets[1] * 200 * 12 + targets[1] * 27 * 4;
        let scratch = SCRATCH_BLOCKS * 2 * p * p * 8;
        s + t + s / 4 + ops + lists + scratch + (16 << 20)
    }
}

impl<D: Device> FmmBackend for GpuFmm<D> {
    fn describe(&self) -> String {
        let i = self.dev.info();
        format!(
            "{} (device {} of {}), FMM stages on the device, M2L in one launch ({}: a thread per translation up to \
             order {M2L_THREAD_MAX_ORDER}, a block above), P2P {} (auto: a thread per target below {P2P_GLOBAL_BELOW} \
             per leaf, a block per leaf above), f64",
            i.name,
            i.ordinal,
            i.count,
            self.m2l.name(),
            self.p2p.name()
        )
    }

    fn begin<'a>(&'a self, spec: DeviceFmm<'a>) -> Result<Box<dyn FmmSession + 'a>> {
        let p = spec.ops.p;
        let nc = spec.densities.len();
        let (src, trg) = (spec.sources, spec.targets);
        let need =
            Self::estimate_bytes(p, nc, [src.points.len(), src.boxes.len()], [trg.points.len(), trg.boxes.len()]);
        let free = self.dev.free_memory()?;
        if need as u64 > free {
            return Err(Error::Resource {
                message: format!(
                    "the FMM needs about {:.2} GB of device memory ({} sources, {} targets, order {p}); {:.2} GB are \
                     free: use more ranks (GPUs) or a lower tolerance",
                    need as f64 / 1e9,
                    src.points.len(),
                    trg.points.len(),
                    free as f64 / 1e9
                ),
            });
        }
        let m2l = self.m2l.resolve(p);
        let leaves = trg.boxes.iter().filter(|b| b.is_leaf()).count().max(1);
        let p2p = self.p2p.resolve(trg.points.len() as f64 / leaves as f64);
        Session::new(&self.dev, spec, m2l, p2p).map(|s| Box::new(s) as Box<dyn FmmSession + 'a>)
    }
}

/// Centres and edges (`[x, y, z, h]`) and spans (`[begin, end, first child, children]`) of
/// `boxes` in `cube`.
fn describe_boxes(cube: &parki_fmm::RootCube, boxes: &[OctBox]) -> (Vec<[f64; 4]>, Vec<[u32; 4]>) {
    let cent = boxes
        .iter()
        .map(|b| {
            let c = cube.centre(b);
            [c[0], c[1], c[2], cube.edge(b.level as usize)]
        })
        .collect();
    let span = boxes.iter().map(|b| [b.begin as u32, b.end as u32, b.first_child, b.children as u32]).collect();
    (cent, span)
}

/// Pieces `[box, begin, end]` of at most [`BLOCK`] points of each leaf of `tree`.
fn leaf_pieces(tree: &Octree) -> Vec<[u32; 3]> {
    let mut out = Vec::new();
    for (i, b) in tree.boxes.iter().enumerate() {
        if b.is_leaf() {
            let mut s = b.begin;
            while s < b.end {
                let e = (s + BLOCK as usize).min(b.end);
                out.push([i as u32, s as u32, e as u32]);
                s = e;
            }
        }
    }
    out
}

/// The rotations `rots` as one array (each [`YRotation::data`] of one order, the same length).
fn rotation_data(rots: &[&YRotation]) -> Vec<f64> {
    let mut v = Vec::with_capacity(rots.iter().map(|r| r.data().len()).sum());
    for r in rots {
        v.extend_from_slice(r.data());
    }
    v
}

/// One evaluation's device state.
struct Session<'a, D: Device> {
    dev: &'a Arc<D>,
    spec: DeviceFmm<'a>,
    m2l: M2lVariant,
    p2p: P2pVariant,
    p: usize,
    nc: usize,
    /// Doubles per y rotation, per coaxial operator.
    rstride: usize,
    cstride: usize,
    // operators
    p2m_w: DeviceBuffer<D>,
    l2p_w: DeviceBuffer<D>,
    coax: DeviceBuffer<D>,
    coff: DeviceBuffer<D>,
    yoff: DeviceBuffer<D>,
    updown: DeviceBuffer<D>,
    // the source tree
    scent: DeviceBuffer<D>,
    sspan: DeviceBuffer<D>,
    spoints: [DeviceBuffer<D>; 3],
    sdens: DeviceBuffer<D>,
    multipoles: DeviceBuffer<D>,
    // the target tree
    tcent: DeviceBuffer<D>,
    tparent: DeviceBuffer<D>,
    /// The leaf box of every target (tree order).
    tleaf: DeviceBuffer<D>,
    tpoints: [DeviceBuffer<D>; 3],
    locals: DeviceBuffer<D>,
    values: DeviceBuffer<D>,
    // lists and another source side
    index: DeviceBuffer<D>,
    offsets: DeviceBuffer<D>,
    entries: DeviceBuffer<D>,
    yrots: DeviceBuffer<D>,
    side_cent: DeviceBuffer<D>,
    side_span: DeviceBuffer<D>,
    side_multipoles: DeviceBuffer<D>,
    side_points: [DeviceBuffer<D>; 3],
    side_near: [DeviceBuffer<D>; 3],
    scratch: DeviceBuffer<D>,
}

/// Launches `name` (a precision-independent entry point) on `grid` blocks.
fn launch<D: Device>(dev: &D, name: &str, grid: usize, shared: usize, args: &mut Args) -> Result<()> {
    if grid == 0 {
        return Ok(());
    }
    let p = args.pointers();
    // SAFETY: every call site passes the kernel's parameters in order and type (kernels/fmm.cu;
    // checked against the host FMM by the emulator tests), with device addresses of live
    // buffers sized for what the kernel touches.
    unsafe { dev.launch(name, [grid.min(MAX_GRID) as u32, 1, 1], [BLOCK, 1, 1], shared as u32, &p[..args.len()]) }
}

impl<'a, D: Device> Session<'a, D> {
    fn new(dev: &'a Arc<D>, spec: DeviceFmm<'a>, m2l: M2lVariant, p2p: P2pVariant) -> Result<Self> {
        let ops = spec.ops;
        let p = ops.p;
        let nc = spec.densities.len();
        let (src, trg) = (spec.sources, spec.targets);
        // operators
        let mut coax = Vec::new();
        let mut coff = Vec::with_capacity(p);
        for op in [Op::M2M, Op::M2L, Op::L2L] {
            for (k, c) in ops.coaxial(op).iter().enumerate() {
                if op == Op::M2M {
                    coff.push(coax.len() as u32);
                }
                debug_assert_eq!(c.len(), (p - k) * (p - k));
                coax.extend_from_slice(c);
            }
        }
        let cstride = coax.len() / 3;
        let yoff: Vec<u32> = spec.updown[0].offsets().iter().map(|&o| o as u32).collect();
        let rstride = spec.updown[0].data().len();
        let (sc, ss) = describe_boxes(&src.cube, &src.boxes);
        let (tc, _) = describe_boxes(&trg.cube, &trg.boxes);
        let tparent: Vec<u32> = trg.boxes.iter().map(|b| b.parent).collect();
        let mut tleaf = vec![0u32; trg.points.len()];
        for (i, b) in trg.boxes.iter().enumerate() {
            if b.is_leaf() {
                tleaf[b.begin..b.end].fill(i as u32);
            }
        }
        let axis = |pts: &[[f64; 3]], a: usize| -> Vec<f64> { pts.iter().map(|x| x[a]).collect() };
        let mut dens = Vec::with_capacity(nc * src.points.len());
        for d in spec.densities {
            dens.extend_from_slice(d);
        }
        let bs = nc * p * p;
        let buf = |what| DeviceBuffer::empty(dev, what);
        let multipoles = DeviceBuffer::new(dev, src.boxes.len() * bs * 8, "FMM multipoles")?;
        multipoles.zero(src.boxes.len() * bs * 8)?;
        let locals = DeviceBuffer::new(dev, trg.boxes.len() * bs * 8, "FMM locals")?;
        locals.zero(trg.boxes.len() * bs * 8)?;
        let values = DeviceBuffer::new(dev, trg.points.len().max(1) * 4 * 8, "FMM target values")?;
        Ok(Self {
            dev,
            spec,
            m2l,
            p2p,
            p,
            nc,
            rstride,
            cstride,
            p2m_w: DeviceBuffer::from_slice(dev, &ops.scalings.p2m, "FMM operators")?,
            l2p_w: DeviceBuffer::from_slice(dev, &ops.scalings.l2p, "FMM operators")?,
            coax: DeviceBuffer::from_slice(dev, &coax, "FMM coaxial matrices")?,
            coff: DeviceBuffer::from_slice(dev, &coff, "FMM operators")?,
            yoff: DeviceBuffer::from_slice(dev, &yoff, "FMM operators")?,
            updown: DeviceBuffer::from_slice(dev, &rotation_data(&spec.updown), "FMM rotations")?,
            scent: DeviceBuffer::from_slice(dev, &sc, "FMM source boxes")?,
            sspan: DeviceBuffer::from_slice(dev, &ss, "FMM source boxes")?,
            spoints: [
                DeviceBuffer::from_slice(dev, &axis(&src.points, 0), "FMM sources")?,
                DeviceBuffer::from_slice(dev, &axis(&src.points, 1), "FMM sources")?,
                DeviceBuffer::from_slice(dev, &axis(&src.points, 2), "FMM sources")?,
            ],
            sdens: DeviceBuffer::from_slice(dev, &dens, "FMM source densities")?,
            multipoles,
            tcent: DeviceBuffer::from_slice(dev, &tc, "FMM target boxes")?,
            tparent: DeviceBuffer::from_slice(dev, &tparent, "FMM target boxes")?,
            tleaf: DeviceBuffer::from_slice(dev, &tleaf, "FMM target leaves")?,
            tpoints: [
                DeviceBuffer::from_slice(dev, &axis(&trg.points, 0), "FMM targets")?,
                DeviceBuffer::from_slice(dev, &axis(&trg.points, 1), "FMM targets")?,
                DeviceBuffer::from_slice(dev, &axis(&trg.points, 2), "FMM targets")?,
            ],
            locals,
            values,
            index: buf("FMM work items"),
            offsets: buf("FMM list offsets"),
            entries: buf("FMM list entries"),
            yrots: buf("FMM rotations"),
            side_cent: buf("FMM remote boxes"),
            side_span: buf("FMM remote boxes"),
            side_multipoles: buf("FMM remote multipoles"),
            side_points: [buf("FMM remote particles"), buf("FMM remote particles"), buf("FMM remote particles")],
            side_near: [buf("FMM near densities"), buf("FMM near densities"), buf("FMM near densities")],
            scratch: buf("FMM translation scratch"),
        })
    }

    fn args(&self, items: usize) -> FmmArgs {
        let kernel = match self.spec.kernel {
            FmmKernel::Laplace => 0,
            FmmKernel::Stokeslet => 1,
        };
        let cube = self.spec.targets.cube;
        FmmArgs {
            p: self.p as i32,
            nc: self.nc as i32,
            kernel,
            gradient: self.spec.gradient as i32,
            items: items as u32,
            rstride: self.rstride as u32,
            cstride: self.cstride as u32,
            origin: [0, 1, 2].map(|a| cube.origin[a] + 0.5 * cube.size),
        }
    }

    /// Grid, dynamic shared bytes and scratch address of a translation launch over `items`.
    fn translation_launch(&mut self, items: usize) -> Result<(usize, usize, DevicePtr)> {
        let work = 2 * self.p * self.p * 8;
        if work <= SHARED_LIMIT {
            return Ok((items.min(MAX_GRID), work, 0));
        }
        let grid = items.min(SCRATCH_BLOCKS);
        self.scratch.ensure(grid * work)?;
        Ok((grid, 0, self.scratch.ptr()))
    }
}

impl<D: Device> FmmSession for Session<'_, D> {
    fn variants(&self) -> String {
        format!("M2L {}, P2P {}", self.m2l.name(), self.p2p.name())
    }

    fn p2m(&mut self) -> Result<()> {
        let src = self.spec.sources;
        let leaves: Vec<u32> = (0..src.boxes.len()).filter(|&i| src.boxes[i].is_leaf()).map(|i| i as u32).collect();
        // a block's threads hold the 2p - 1 columns (p <= MAX_ORDER = 64, validated by FmmParams)
        debug_assert!(2 * self.p - 1 <= BLOCK as usize, "fmm_p2m needs 2p - 1 <= {BLOCK} threads");
        self.index.upload(&leaves)?;
        let mut a = Args::new();
        a.push(self.args(leaves.len()))
            .push(self.index.ptr())
            .push(self.scent.ptr())
            .push(self.sspan.ptr())
            .push(self.spoints[0].ptr())
            .push(self.spoints[1].ptr())
            .push(self.spoints[2].ptr())
            .push(self.sdens.ptr())
            .push(src.points.len() as u32)
            .push(self.p2m_w.ptr())
            .push(self.multipoles.ptr());
        launch(&**self.dev, "fmm_p2m", leaves.len(), 0, &mut a)?;
        self.dev.synchronize()
    }

    fn m2m(&mut self) -> Result<()> {
        let src = self.spec.sources;
        // the parents of every level, deepest first, in one index array
        let mut index = Vec::new();
        let mut launches = Vec::new();
        for l in (0..src.depth()).rev() {
            let at = index.len();
            index.extend((src.levels[l]..src.levels[l + 1]).filter(|&i| !src.boxes[i].is_leaf()).map(|i| i as u32));
            if index.len() > at {
                launches.push((at, index.len() - at));
            }
        }
        if launches.is_empty() {
            return self.dev.synchronize();
        }
        self.index.upload(&index)?;
        for (at, n) in launches {
            let (grid, shared, scratch) = self.translation_launch(n)?;
            let mut a = Args::new();
            a.push(self.args(n))
                .push(self.index.ptr() + 4 * at as u64)
                .push(self.scent.ptr())
                .push(self.sspan.ptr())
                .push(self.multipoles.ptr())
                .push(self.updown.ptr())
                .push(self.yoff.ptr())
                .push(self.coax.ptr())
                .push(self.coff.ptr())
                .push(scratch);
            launch(&**self.dev, "fmm_m2m", grid, shared, &mut a)?;
        }
        self.dev.synchronize()
    }

    fn multipoles(&mut self) -> Result<Vec<f64>> {
        let mut v = vec![0.0; self.spec.sources.boxes.len() * self.nc * self.p * self.p];
        self.multipoles.download(&mut v)?;
        Ok(v)
    }

    fn m2l(&mut self, side: &SourceSide<'_>, lists: &Lists, yrots: &[YRotation]) -> Result<()> {
        let trg = self.spec.targets;
        let (scent, smult) = match side.multipoles {
            None => (self.scent.ptr(), self.multipoles.ptr()),
            Some(m) => {
                let (c, _) = describe_boxes(&trg.cube, side.boxes);
                self.side_cent.upload(&c)?;
                self.side_multipoles.upload(m)?;
                (self.side_cent.ptr(), self.side_multipoles.ptr())
            }
        };
        let targets: Vec<u32> = (0..trg.boxes.len())
            .filter(|&i| lists.m2l_offsets[i] < lists.m2l_offsets[i + 1])
            .map(|i| i as u32)
            .collect();
        if targets.is_empty() {
            return self.dev.synchronize();
        }
        let offsets: Vec<u32> = lists.m2l_offsets.iter().map(|&o| o as u32).collect();
        let entries: Vec<[u32; 3]> = lists.m2l.iter().map(|e| [e.source, e.beta, e.order as u32]).collect();
        let rots: Vec<&YRotation> = yrots.iter().collect();
        self.index.upload(&targets)?;
        self.offsets.upload(&offsets)?;
        self.entries.upload(&entries)?;
        self.yrots.upload(&rotation_data(&rots))?;
        let mut a = Args::new();
        a.push(self.args(targets.len()))
            .push(self.index.ptr())
            .push(self.offsets.ptr())
            .push(self.entries.ptr())
            .push(self.tcent.ptr())
            .push(scent)
            .push(smult)
            .push(self.locals.ptr())
            .push(self.yrots.ptr())
            .push(self.yoff.ptr())
            .push(self.coax.ptr())
            .push(self.coff.ptr());
        if self.m2l == M2lVariant::Thread {
            launch(&**self.dev, "fmm_m2l_thread", targets.len(), 0, &mut a)?;
        } else {
            let (grid, shared, scratch) = self.translation_launch(targets.len())?;
            a.push(scratch);
            launch(&**self.dev, "fmm_m2l", grid, shared, &mut a)?;
        }
        self.dev.synchronize()
    }

    fn l2l(&mut self) -> Result<()> {
        let trg = self.spec.targets;
        if trg.depth() < 2 {
            return self.dev.synchronize();
        }
        for l in 1..trg.depth() {
            let (lo, hi) = (trg.levels[l], trg.levels[l + 1]);
            let (grid, shared, scratch) = self.translation_launch(hi - lo)?;
            let mut a = Args::new();
            a.push(self.args(hi - lo))
                .push(lo as u32)
                .push(self.tparent.ptr())
                .push(self.tcent.ptr())
                .push(self.locals.ptr())
                .push(self.updown.ptr())
                .push(self.yoff.ptr())
                .push(self.coax.ptr())
                .push(self.coff.ptr())
                .push(scratch);
            launch(&**self.dev, "fmm_l2l", grid, shared, &mut a)?;
        }
        self.dev.synchronize()
    }

    fn l2p(&mut self) -> Result<()> {
        let nt = self.spec.targets.points.len();
        let mut a = Args::new();
        a.push(self.args(nt))
            .push(self.tleaf.ptr())
            .push(self.tcent.ptr())
            .push(self.tpoints[0].ptr())
            .push(self.tpoints[1].ptr())
            .push(self.tpoints[2].ptr())
            .push(self.locals.ptr())
            .push(self.l2p_w.ptr())
            .push(self.values.ptr());
        launch(&**self.dev, "fmm_l2p", nt.div_ceil(BLOCK as usize), 0, &mut a)?;
        self.dev.synchronize()
    }

    fn p2p(&mut self, side: &SourceSide<'_>, lists: &Lists) -> Result<()> {
        let trg = self.spec.targets;
        let want = match self.spec.kernel {
            FmmKernel::Laplace => 1,
            FmmKernel::Stokeslet => 3,
        };
        if side.near.len() != want || side.near.iter().any(|c| c.len() != side.points.len()) {
            return Err(Error::LengthMismatch {
                field: "fmm near-field densities".into(),
                found: side.near.iter().map(|c| c.len()).find(|&l| l != side.points.len()).unwrap_or(side.near.len()),
                reference: "fmm near-field points".into(),
                expected: side.points.len(),
            });
        }
        let local = side.multipoles.is_none();
        let (sx, sspan) = if local {
            ([self.spoints[0].ptr(), self.spoints[1].ptr(), self.spoints[2].ptr()], self.sspan.ptr())
        } else {
            let (_, s) = describe_boxes(&trg.cube, side.boxes);
            self.side_span.upload(&s)?;
            for a in 0..3 {
                let v: Vec<f64> = side.points.iter().map(|x| x[a]).collect();
                self.side_points[a].upload(&v)?;
            }
            ([self.side_points[0].ptr(), self.side_points[1].ptr(), self.side_points[2].ptr()], self.side_span.ptr())
        };
        let mut q = [0u64; 3];
        for (k, c) in side.near.iter().enumerate() {
            self.side_near[k].upload(c)?;
            q[k] = self.side_near[k].ptr();
        }
        for k in want..3 {
            q[k] = q[0];
        }
        let offsets: Vec<u32> = lists.p2p_offsets.iter().map(|&o| o as u32).collect();
        self.offsets.upload(&offsets)?;
        self.entries.upload(&lists.p2p)?;
        let (name, items, grid) = match self.p2p {
            P2pVariant::Global => {
                let nt = trg.points.len();
                ("fmm_p2p_global", nt, nt.div_ceil(BLOCK as usize))
            }
            _ => {
                let pieces = leaf_pieces(trg);
                self.index.upload(&pieces)?;
                ("fmm_p2p", pieces.len(), pieces.len())
            }
        };
        let items_at = if self.p2p == P2pVariant::Global { self.tleaf.ptr() } else { self.index.ptr() };
        let mut a = Args::new();
        a.push(self.args(items))
            .push(items_at)
            .push(self.offsets.ptr())
            .push(self.entries.ptr())
            .push(sspan)
            .push(self.tpoints[0].ptr())
            .push(self.tpoints[1].ptr())
            .push(self.tpoints[2].ptr())
            .push(sx[0])
            .push(sx[1])
            .push(sx[2])
            .push(q[0])
            .push(q[1])
            .push(q[2])
            .push(self.values.ptr());
        launch(&**self.dev, name, grid, 0, &mut a)?;
        self.dev.synchronize()
    }

    fn values(&mut self) -> Result<Vec<[f64; 4]>> {
        let mut v = vec![[0.0; 4]; self.spec.targets.points.len()];
        self.values.download(&mut v)?;
        Ok(v)
    }
}
