//! The treecode's compute stages on a device: [`GpuTreecode`] is a
//! [`parki_treecode::TreeBackend`] over `kernels/treecode.cu`.
//!
//! One evaluation ([`parki_treecode::TreeSession`]) keeps on the device: the sources in tree
//! order, the source clusters' nodes and proxy charges, the targets in tree order, the target
//! clusters' proxy potentials and the targets' values. The launches:
//! - upward: `tc_anterpolate` over every source leaf (eq. (9)), then `tc_upward_level` once per
//!   level from the deepest (eq. (16), tensor-factored);
//! - each source side: `tc_lists`, one launch for its PP, PC, CP and CC (a block per piece of
//!   at most 128 targets of a target leaf, or of the proxies of a target cluster that CP or CC
//!   reaches, so that large leaves still fill the device); the local side's proxies are gathered
//!   on the device (`tc_proxy_soa`), a remote side's are uploaded;
//! - downward: `tc_downward_level` once per level from the root (eq. (20)), then
//!   `tc_interpolate` over pieces of the active leaves (eq. (21)); the values cross the bus
//!   once.
//!
//! Each stage waits for the device before it returns, so that the per-stage times of the
//! report (upward pass, compute local and remote, downward pass) are the device's.
//!
//! The host keeps the trees, the traversal and the locally essential tree (parki-treecode).
//! Double precision, as the host's treecode.

use std::sync::Arc;

use parki_core::{Error, Result};
use parki_treecode::backend::{DeviceKernel, ListWork, SidePoints, TreeBackend, TreeSession, TreeView};
use parki_treecode::Tree;

use crate::buffer::DeviceBuffer;
use crate::device::{Args, Device, DevicePtr};

/// Threads per block of every treecode kernel.
const BLOCK: u32 = 128;

/// `tc_lists`' item kind of a piece of a target leaf (`TC_LEAF`).
const LEAF: u32 = u32::MAX;

/// Calls `f(b, e)` for the pieces `b..e` of `begin..end`, at most [`BLOCK`] long each: the work
/// items of `tc_lists` and `tc_interpolate`, a block each.
fn pieces(begin: usize, end: usize, mut f: impl FnMut(u32, u32)) {
    let mut b = begin;
    while b < end {
        let e = (b + BLOCK as usize).min(end);
        f(b as u32, e as u32);
        b = e;
    }
}

/// Scratch of the level passes (two `m^3 nc` blocks per resident block), at most.
const PASS_SCRATCH_BYTES: usize = 64 << 20;

/// `tc_lists`' scalars (`TcListParams` in kernels/treecode.cu).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct ListParams {
    p0: f64,
    p1: f64,
    kernel: i32,
    m: i32,
    np: u32,
    pstride: u32,
    xstride: u32,
}

/// The pass kernels' scalars (`TcPassParams`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct PassParams {
    m: i32,
    nc: i32,
    items: u32,
    stride: u32,
}

/// The treecode backend on device `D` (a CUDA device, or the host emulator in tests).
pub struct GpuTreecode<D: Device> {
    dev: Arc<D>,
}

impl<D: Device> GpuTreecode<D> {
    /// The backend on an open device.
    pub fn new(dev: Arc<D>) -> Self {
        Self { dev }
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

    /// Device bytes one evaluation needs: the points with their densities or values, every
    /// cluster's nodes, charges or potentials, the level passes' scratch, and a margin for the
    /// lists (which grow with the traversal and are allocated as they come).
    pub fn estimate_bytes(
        density: usize,
        value: usize,
        degree: usize,
        sources: [usize; 2],
        targets: [usize; 2],
    ) -> usize {
        let m = degree + 1;
        let np = m * m * m;
        let cluster = 3 * m * 8 + 20;
        let s = sources[0] * (3 + density) * 8 + sources[1] * (cluster + np * density * 8);
        let t = targets[0] * (3 + value) * 8 + targets[1] * (cluster + np * value * 8);
        // the local side's proxies (at most every source cluster) and the lists' rows
        let proxies = sources[1] * np * (3 + density) * 8;
        s + t + proxies + PASS_SCRATCH_BYTES / 4
    }
}

impl<D: Device> TreeBackend for GpuTreecode<D> {
    fn describe(&self) -> String {
        let i = self.dev.info();
        format!("{} (device {} of {}), treecode lists in one launch per source side, f64", i.name, i.ordinal, i.count)
    }

    fn begin<'a>(
        &'a self,
        kernel: DeviceKernel,
        density: usize,
        value: usize,
        degree: usize,
        sources: Option<TreeView<'a>>,
        targets: Option<TreeView<'a>>,
    ) -> Result<Box<dyn TreeSession + 'a>> {
        let counts =
            |v: &Option<TreeView<'_>>| v.as_ref().map_or([0, 0], |v| [v.points[0].len(), v.tree.clusters.len()]);
        let need = Self::estimate_bytes(density, value, degree, counts(&sources), counts(&targets));
        let free = self.dev.free_memory()?;
        if need as u64 > free {
            return Err(Error::Resource {
                message: format!(
                    "the treecode needs about {:.2} GB of device memory ({} sources, {} targets, degree {degree}); \
                     {:.2} GB are free: use more ranks (GPUs)",
                    need as f64 / 1e9,
                    counts(&sources)[0],
                    counts(&targets)[0],
                    free as f64 / 1e9
                ),
            });
        }
        let dev = &self.dev;
        let m = degree + 1;
        let side = |v: TreeView<'a>, what: [&'static str; 4]| -> Result<DeviceTree<'a, D>> {
            DeviceTree::upload(dev, v, m, what)
        };
        let src = sources
            .map(|v| side(v, ["treecode sources", "source nodes", "source flags", "source ranges"]))
            .transpose()?;
        let trg = targets
            .map(|v| side(v, ["treecode targets", "target nodes", "target flags", "target ranges"]))
            .transpose()?;
        let buf = |what| DeviceBuffer::empty(dev, what);
        let mut s = Session {
            dev,
            kernel,
            nd: density,
            nv: value,
            m,
            charges: buf("proxy charges"),
            out: buf("target values"),
            pot: buf("proxy potentials"),
            scratch: buf("pass scratch"),
            items: buf("list items"),
            poff: buf("particle rows"),
            pranges: buf("particle blocks"),
            xoff: buf("proxy rows"),
            xranges: buf("proxy blocks"),
            side: [buf("side x"), buf("side y"), buf("side z"), buf("side densities")],
            proxies: [buf("proxy x"), buf("proxy y"), buf("proxy z"), buf("proxy densities")],
            index: buf("cluster lists"),
            src,
            trg,
        };
        let np = m * m * m;
        if let Some(t) = &s.src {
            s.charges.ensure(t.view.tree.clusters.len() * np * density * 8)?;
        }
        if let Some(t) = &s.trg {
            let (nt, nc) = (t.view.points[0].len(), t.view.tree.clusters.len());
            s.out.ensure(nt * value * 8)?;
            s.out.zero(nt * value * 8)?;
            s.pot.ensure(nc * np * value * 8)?;
            s.pot.zero(nc * np * value * 8)?;
        }
        Ok(Box::new(s))
    }
}

/// A tree on the device: its points (and densities), its clusters' nodes, degenerate flags and
/// particle ranges.
struct DeviceTree<'a, D: Device> {
    view: TreeView<'a>,
    points: [DeviceBuffer<D>; 4],
    nodes: DeviceBuffer<D>,
    degen: DeviceBuffer<D>,
    ranges: DeviceBuffer<D>,
}

impl<'a, D: Device> DeviceTree<'a, D> {
    fn upload(dev: &Arc<D>, view: TreeView<'a>, m: usize, what: [&'static str; 4]) -> Result<Self> {
        let nc = view.tree.clusters.len();
        let mut nodes = Vec::with_capacity(nc * 3 * m);
        let mut degen = Vec::with_capacity(nc * 3);
        for axes in view.nodes {
            for a in axes {
                nodes.extend_from_slice(&a.s);
                degen.push(a.degenerate as u32);
            }
        }
        let ranges: Vec<u32> = view.tree.clusters.iter().flat_map(|c| [c.begin as u32, c.end as u32]).collect();
        let up = |v: &[f64]| DeviceBuffer::from_slice(dev, v, what[0]);
        let [x, y, z] = view.points;
        let points = [up(x)?, up(y)?, up(z)?, up(view.densities)?];
        let nodes = DeviceBuffer::from_slice(dev, &nodes, what[1])?;
        let degen = DeviceBuffer::from_slice(dev, &degen, what[2])?;
        let ranges = DeviceBuffer::from_slice(dev, &ranges, what[3])?;
        Ok(Self { view, points, nodes, degen, ranges })
    }

    fn tree(&self) -> &'a Tree {
        self.view.tree
    }
}

/// One evaluation's device state.
struct Session<'a, D: Device> {
    dev: &'a Arc<D>,
    kernel: DeviceKernel,
    nd: usize,
    nv: usize,
    m: usize,
    src: Option<DeviceTree<'a, D>>,
    trg: Option<DeviceTree<'a, D>>,
    charges: DeviceBuffer<D>,
    out: DeviceBuffer<D>,
    pot: DeviceBuffer<D>,
    scratch: DeviceBuffer<D>,
    items: DeviceBuffer<D>,
    poff: DeviceBuffer<D>,
    pranges: DeviceBuffer<D>,
    xoff: DeviceBuffer<D>,
    xranges: DeviceBuffer<D>,
    /// A remote side's particles.
    side: [DeviceBuffer<D>; 4],
    /// The current side's proxies.
    proxies: [DeviceBuffer<D>; 4],
    /// Cluster indices of the passes (leaves, parents, children).
    index: DeviceBuffer<D>,
}

/// Launches `name` (a precision-independent entry point) with `args`.
fn launch<D: Device>(dev: &D, name: &str, grid: u32, shared: u32, args: &mut Args) -> Result<()> {
    if grid == 0 {
        return Ok(());
    }
    let p = args.pointers();
    // SAFETY: every call site passes the kernel's parameters in order and type (kernels/
    // treecode.cu; checked against the host treecode by the emulator tests), with device
    // addresses of live buffers sized for what the kernel touches.
    unsafe { dev.launch(name, [grid, 1, 1], [BLOCK, 1, 1], shared, &p[..args.len()]) }
}

/// `base + bytes` as a device address.
fn at(base: DevicePtr, bytes: usize) -> DevicePtr {
    base + bytes as u64
}

/// The clusters of the level passes in one index array: per launch, its parents, their
/// children's offsets (relative to the launch's children) and the children.
struct LevelLists {
    index: Vec<u32>,
    /// Per launch: (parents at, children offsets at, children at, parents) in `index`.
    launches: Vec<(usize, usize, usize, usize)>,
}

impl LevelLists {
    /// One launch per level in `levels` order, with the parents that `keep` accepts among the
    /// level's non-leaves.
    fn new<'l>(tree: &Tree, levels: impl Iterator<Item = &'l Vec<usize>>, keep: impl Fn(usize) -> bool) -> Self {
        let mut index = Vec::new();
        let mut launches = Vec::new();
        for level in levels {
            let parents: Vec<usize> =
                level.iter().copied().filter(|&c| !tree.clusters[c].is_leaf() && keep(c)).collect();
            if parents.is_empty() {
                continue;
            }
            let p_at = index.len();
            index.extend(parents.iter().map(|&c| c as u32));
            let off_at = index.len();
            let mut off = 0u32;
            index.push(0);
            for &c in &parents {
                off += tree.clusters[c].children.len() as u32;
                index.push(off);
            }
            let ch_at = index.len();
            for &c in &parents {
                index.extend(tree.clusters[c].children.iter().map(|&ch| ch as u32));
            }
            launches.push((p_at, off_at, ch_at, parents.len()));
        }
        Self { index, launches }
    }
}

impl<D: Device> Session<'_, D> {
    fn pass(&self, items: u32, nc: usize, stride: usize) -> PassParams {
        PassParams { m: self.m as i32, nc: nc as i32, items, stride: stride as u32 }
    }

    /// Runs `kernel` (`tc_upward_level` or `tc_downward_level`) over `lists` on `tree`'s nodes,
    /// with `data` the charges or potentials (`nc` values per proxy).
    fn levels(&mut self, kernel: &str, lists: &LevelLists, which: Which, nc: usize, data: DevicePtr) -> Result<()> {
        if lists.launches.is_empty() {
            return Ok(());
        }
        self.index.upload(&lists.index)?;
        let block = self.m.pow(3) * nc * 8;
        let most = lists.launches.iter().map(|l| l.3).max().unwrap_or(1);
        let grid = most.min((PASS_SCRATCH_BYTES / (2 * block)).max(1)).min(65_535);
        self.scratch.ensure(grid * 2 * block)?;
        let t = match which {
            Which::Sources => self.src.as_ref(),
            Which::Targets => self.trg.as_ref(),
        }
        .expect("the tree of a pass");
        let base = self.index.ptr();
        for &(p_at, off_at, ch_at, n) in &lists.launches {
            let mut a = Args::new();
            a.push(self.pass(n as u32, nc, 0))
                .push(at(base, p_at * 4))
                .push(at(base, off_at * 4))
                .push(at(base, ch_at * 4))
                .push(t.nodes.ptr())
                .push(t.degen.ptr())
                .push(data)
                .push(self.scratch.ptr());
            launch(&**self.dev, kernel, n.min(grid) as u32, 0, &mut a)?;
        }
        Ok(())
    }

    /// `tc_lists` over `work`: the target leaves then `work.clusters`, against particles
    /// `side[0..4]` (`pstride` of them) and proxies `prox[0..4]` (`xstride`).
    fn lists(
        &mut self,
        work: &ListWork,
        side: [DevicePtr; 4],
        pstride: usize,
        prox: [DevicePtr; 4],
        xstride: usize,
    ) -> Result<()> {
        let t = self.trg.as_ref().expect("lists need targets");
        let tree = t.tree();
        let nleaf = tree.leaves.len();
        let nitems = nleaf + work.clusters.len();
        assert_eq!(work.particles.offsets.len(), nitems + 1, "a row per work item");
        assert_eq!(work.proxies.offsets.len(), nitems + 1, "a row per work item");
        let np = self.m.pow(3);
        // pieces of at most BLOCK targets of every item that has source blocks
        let mut items: Vec<[u32; 4]> = Vec::new();
        let busy = |r: usize| {
            work.particles.offsets[r] < work.particles.offsets[r + 1]
                || work.proxies.offsets[r] < work.proxies.offsets[r + 1]
        };
        for (r, &l) in tree.leaves.iter().enumerate() {
            let c = &tree.clusters[l];
            if busy(r) {
                pieces(c.begin, c.end, |b, e| items.push([LEAF, b, e, r as u32]));
            }
        }
        for (j, &c) in work.clusters.iter().enumerate() {
            let r = nleaf + j;
            if busy(r) {
                pieces(0, np, |b, e| items.push([c, b, e, r as u32]));
            }
        }
        if items.is_empty() {
            return Ok(());
        }
        self.items.upload(&items)?;
        self.poff.upload(&work.particles.offsets)?;
        self.pranges.upload(&work.particles.ranges)?;
        self.xoff.upload(&work.proxies.offsets)?;
        self.xranges.upload(&work.proxies.ranges)?;
        let params = ListParams {
            p0: self.kernel.params[0],
            p1: self.kernel.params[1],
            kernel: self.kernel.code as i32,
            m: self.m as i32,
            np: np as u32,
            pstride: pstride as u32,
            xstride: xstride as u32,
        };
        let t = self.trg.as_ref().expect("lists need targets");
        let mut a = Args::new();
        a.push(params)
            .push(self.items.ptr())
            .push(t.points[0].ptr())
            .push(t.points[1].ptr())
            .push(t.points[2].ptr())
            .push(t.nodes.ptr())
            .push(self.poff.ptr())
            .push(self.pranges.ptr());
        for p in side {
            a.push(p);
        }
        a.push(self.xoff.ptr()).push(self.xranges.ptr());
        for p in prox {
            a.push(p);
        }
        a.push(self.out.ptr()).push(self.pot.ptr());
        let shared = BLOCK as usize * (3 + self.nd) * 8;
        launch(&**self.dev, "tc_lists", items.len() as u32, shared as u32, &mut a)
    }
}

/// Which tree a pass runs on.
#[derive(Clone, Copy)]
enum Which {
    Sources,
    Targets,
}

impl<D: Device> TreeSession for Session<'_, D> {
    fn upward(&mut self, download: bool) -> Result<Option<Vec<f64>>> {
        let Some(s) = &self.src else { return Ok(None) };
        let tree = s.tree();
        let (m, nd) = (self.m, self.nd);
        let np = m * m * m;
        let ns = s.view.points[0].len();
        let leaves: Vec<u32> = tree.leaves.iter().map(|&c| c as u32).collect();
        self.index.upload(&leaves)?;
        let mut a = Args::new();
        a.push(self.pass(leaves.len() as u32, nd, ns))
            .push(self.index.ptr())
            .push(s.ranges.ptr())
            .push(s.nodes.ptr())
            .push(s.degen.ptr())
            .push(s.points[0].ptr())
            .push(s.points[1].ptr())
            .push(s.points[2].ptr())
            .push(s.points[3].ptr())
            .push(self.charges.ptr());
        let tp = (BLOCK / 4) as usize;
        let shared = tp * (3 * m + nd) * 8;
        launch(&**self.dev, "tc_anterpolate", leaves.len() as u32, shared as u32, &mut a)?;
        let lists = LevelLists::new(tree, tree.levels.iter().rev(), |_| true);
        let charges = self.charges.ptr();
        self.levels("tc_upward_level", &lists, Which::Sources, nd, charges)?;
        if !download {
            // the stage's time is the device's, not the launches' (the report's stage table)
            self.dev.synchronize()?;
            return Ok(None);
        }
        let mut v = vec![0.0; tree.clusters.len() * np * nd];
        self.charges.download(&mut v)?;
        Ok(Some(v))
    }

    fn apply_local(&mut self, work: &ListWork, used: &[u32]) -> Result<()> {
        let s = self.src.as_ref().expect("local lists need the source tree");
        let (m, nd) = (self.m, self.nd);
        let np = m * m * m;
        let ns = s.view.points[0].len();
        let len = used.len() * np;
        if !used.is_empty() {
            self.index.upload(used)?;
            for (k, b) in self.proxies.iter_mut().enumerate() {
                b.ensure(len * if k == 3 { nd } else { 1 } * 8)?;
            }
            let s = self.src.as_ref().expect("checked above");
            let mut a = Args::new();
            a.push(self.pass(used.len() as u32, nd, 0))
                .push(self.index.ptr())
                .push(s.nodes.ptr())
                .push(self.charges.ptr());
            for b in &self.proxies {
                a.push(b.ptr());
            }
            launch(&**self.dev, "tc_proxy_soa", len.div_ceil(BLOCK as usize) as u32, 0, &mut a)?;
        }
        let s = self.src.as_ref().expect("checked above");
        let side = [s.points[0].ptr(), s.points[1].ptr(), s.points[2].ptr(), s.points[3].ptr()];
        let prox = [self.proxies[0].ptr(), self.proxies[1].ptr(), self.proxies[2].ptr(), self.proxies[3].ptr()];
        self.lists(work, side, ns, prox, len)?;
        self.dev.synchronize()
    }

    fn apply_remote(&mut self, work: &ListWork, side: &SidePoints<'_>) -> Result<()> {
        for k in 0..3 {
            self.side[k].upload(side.particles[k])?;
            self.proxies[k].upload(side.proxies[k])?;
        }
        self.side[3].upload(side.particle_densities)?;
        self.proxies[3].upload(side.proxy_densities)?;
        let p = [self.side[0].ptr(), self.side[1].ptr(), self.side[2].ptr(), self.side[3].ptr()];
        let x = [self.proxies[0].ptr(), self.proxies[1].ptr(), self.proxies[2].ptr(), self.proxies[3].ptr()];
        self.lists(work, p, side.particles[0].len(), x, side.proxies[0].len())?;
        self.dev.synchronize()
    }

    fn finish(&mut self, active: &[bool]) -> Result<Vec<f64>> {
        let Some(t) = &self.trg else { return Ok(Vec::new()) };
        let tree = t.tree();
        let nv = self.nv;
        let nt = t.view.points[0].len();
        let lists = LevelLists::new(tree, tree.levels.iter(), |c| active[c]);
        let pot = self.pot.ptr();
        self.levels("tc_downward_level", &lists, Which::Targets, nv, pot)?;
        let mut items: Vec<[u32; 3]> = Vec::new();
        for &l in tree.leaves.iter().filter(|&&l| active[l]) {
            let c = &tree.clusters[l];
            pieces(c.begin, c.end, |b, e| items.push([l as u32, b, e]));
        }
        if !items.is_empty() {
            self.index.upload(&items)?;
            let t = self.trg.as_ref().expect("checked above");
            let mut a = Args::new();
            a.push(self.pass(items.len() as u32, nv, 0))
                .push(self.index.ptr())
                .push(t.nodes.ptr())
                .push(t.degen.ptr())
                .push(t.points[0].ptr())
                .push(t.points[1].ptr())
                .push(t.points[2].ptr())
                .push(self.pot.ptr())
                .push(self.out.ptr());
            launch(&**self.dev, "tc_interpolate", items.len() as u32, 0, &mut a)?;
        }
        let mut v = vec![0.0; nt * nv];
        self.out.download(&mut v)?;
        Ok(v)
    }
}
