//! The treecode over MPI ranks (BLDTT paper §3; digest §2): RCB partitions, a local tree on
//! each rank, and the locally essential tree (LET) of remote clusters and particles fetched by
//! passive-target one-sided reads.
//!
//! 1. **Partition** ([`evaluate_distributed`]): Zoltan's RCB over the sources
//!    (`RCB_RECTILINEAR_BLOCKS`, [`parki_decomp::Rcb`]); each target goes to the rank whose box
//!    holds it; particles move by [`parki_decomp::Route`] and the results come back in the
//!    caller's order.
//! 2. **Local trees** ([`evaluate_owned`]): source and target trees of the rank's own
//!    particles, the upward pass, and the local traversal, as on one process.
//! 3. **Exposure**: every rank exposes, in one window, its source clusters in breadth-first
//!    order (so that a cluster's children are one contiguous block of records), its sources in
//!    tree order (position and densities per particle) and its clusters' proxy charges; the
//!    roots' records are all-gathered (one record per rank).
//! 4. **LET**: on one thread, the dual traversal of the local target tree against every remote
//!    tree runs from the remote roots; where it must split a remote cluster whose children are
//!    not known, the pair waits, and the children of all such clusters are read in one
//!    shared-lock epoch per remote rank (`MPI_Get` of each block); rounds repeat until nothing
//!    waits (at most the remote trees' depth). Only the clusters that the local targets reach
//!    are read: a rank never reads another rank's whole tree, which is the scaling limit the
//!    paper reports for BaryTree, where every rank fetches every other rank's tree (§5). Then
//!    the particles of the remote PP and CP sources (merged intervals) and the proxies of the
//!    PC and CC sources are read, one epoch per rank.
//! 5. **Compute**: the local lists run (rayon) while the LET is fetched; then the remote lists;
//!    then one downward pass over both.
//!
//! The remote traversal makes the decisions that `Interactions::build` makes for the local
//! target tree against the remote rank's tree, so the result on each rank equals, up to
//! rounding, the sum over ranks `q` of the one-process treecode of the rank's targets against
//! rank `q`'s sources (the distributed tests check this within 1e-13).

use std::time::Instant;

use parki_comm::{as_bytes, as_bytes_mut, Comm, ReduceOp, Transport, Window};
use parki_core::isa::Isa;
use parki_core::units::{self, Units};
use parki_core::{Error, Par, Result};
use parki_decomp::{Rcb, Route, SortMode};

use crate::backend::{ListWork, Rows, SidePoints, TreeBackend, TreeSession, TreeView};
use crate::cheb::AxisNodes;
use crate::compute::Soa;
use crate::downward::propagate_active;
use crate::evaluate::{local_side, tree_order, validate, KernelVisitor, TreeStage, TreecodeParams, TreecodeStats};
use crate::kernel::{PairKernel, TreeKernel, MAX_DENSITY, MAX_VALUE};
use crate::lists::{
    apply_lists, in_input_order, plan_lists, proxy_soa, used_clusters, Accumulators, PlannedLists, SourceSide,
    TargetSide,
};
use crate::traversal::{geometry, oscillation_radius, traverse, Interactions, SourceTree};
use crate::tree::{Cluster, Tree, TreeParams};
use crate::upward::{cluster_nodes, upward_pass, ProxyCharges};

/// What the LET of one rank moved.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LetStats {
    /// Remote cluster records read (roots included).
    pub clusters: usize,
    /// Remote particles read.
    pub particles: usize,
    /// Remote clusters whose proxy charges were read.
    pub proxies: usize,
    /// Bytes read by one-sided gets.
    pub bytes: u64,
    /// One-sided gets.
    pub messages: u64,
    /// Traversal rounds (each one epoch per remote rank that had clusters to expand).
    pub rounds: usize,
    /// How the reads travelled (one-sided MPI, or messages where windows fail).
    pub transport: Transport,
}

/// One cluster of an exposed tree: `[lo; 3], [hi; 3], count, begin, first child, children]`
/// (integers stored exactly as `f64`; a count of 0 marks a rank without sources).
type Record = [f64; 10];

fn record(c: &Cluster, first_child: usize) -> Record {
    let [a, b, d] = c.lo;
    let [e, f, g] = c.hi;
    [a, b, d, e, f, g, c.count() as f64, c.begin as f64, first_child as f64, c.children.len() as f64]
}

/// The record as a cluster with the same box and count (for the MAC's centre and radius, and
/// the proxy nodes, computed by the same code as for local clusters).
fn as_cluster(r: &Record) -> Cluster {
    Cluster {
        begin: 0,
        end: r[6] as usize,
        lo: [r[0], r[1], r[2]],
        hi: [r[3], r[4], r[5]],
        level: 0,
        parent: None,
        children: Vec::new(),
    }
}

/// Where the three sections of a rank's exposed buffer start: `[records, particles, proxies,
/// number of records]` (bytes, bytes, bytes, count).
type Header = [u64; 4];

/// A rank's exposed buffer: its source clusters in breadth-first order, its sources in tree
/// order (`3 + nd` values each), and the proxy charges of each cluster in breadth-first order.
fn exposure(
    stree: Option<&Tree>,
    sources: &[[f64; 3]],
    densities: &[f64],
    proxies: Option<&ProxyCharges>,
) -> (Vec<f64>, Header, Record) {
    let (Some(tree), Some(prox)) = (stree, proxies) else {
        return (Vec::new(), [0; 4], [0.0; 10]);
    };
    let nd = prox.ncomp;
    // breadth-first order: children of a cluster contiguous
    let mut bfs = vec![0usize];
    let mut k = 0;
    while k < bfs.len() {
        let c = bfs[k];
        bfs.extend_from_slice(&tree.clusters[c].children);
        k += 1;
    }
    let mut place = vec![0usize; tree.clusters.len()];
    for (i, &c) in bfs.iter().enumerate() {
        place[c] = i;
    }
    let nrec = bfs.len();
    let block = prox.block();
    let npart = sources.len() * (3 + nd);
    let mut buf = Vec::with_capacity(nrec * 10 + npart + nrec * block);
    for &c in &bfs {
        let cl = &tree.clusters[c];
        let first = cl.children.first().map_or(0, |&ch| place[ch]);
        buf.extend_from_slice(&record(cl, first));
    }
    for &j in &tree.order {
        let j = j as usize;
        buf.extend_from_slice(&sources[j]);
        buf.extend_from_slice(&densities[j * nd..(j + 1) * nd]);
    }
    for &c in &bfs {
        buf.extend_from_slice(prox.of(c));
    }
    let f = 8u64;
    let header = [0, (nrec * 10) as u64 * f, (nrec * 10 + npart) as u64 * f, nrec as u64];
    let root = record(&tree.clusters[0], if nrec > 1 { 1 } else { 0 });
    (buf, header, root)
}

/// A remote cluster known to this rank.
struct LetCluster {
    rank: usize,
    /// Its breadth-first index on `rank` (where its record and proxies are).
    index: usize,
    record: Record,
    geometry: ([f64; 3], f64),
    /// The LET ids of its children (contiguous), once read.
    children: Option<(u32, u32)>,
}

/// The remote clusters known so far, indexed by LET id.
#[derive(Default)]
struct LetTree {
    clusters: Vec<LetCluster>,
}

impl LetTree {
    fn push(&mut self, rank: usize, index: usize, record: Record) -> u32 {
        let c = as_cluster(&record);
        self.clusters.push(LetCluster { rank, index, record, geometry: (c.centre(), c.radius()), children: None });
        (self.clusters.len() - 1) as u32
    }
}

impl SourceTree for LetTree {
    fn geometry(&self, s: u32) -> ([f64; 3], f64) {
        self.clusters[s as usize].geometry
    }
    fn count(&self, s: u32) -> usize {
        self.clusters[s as usize].record[6] as usize
    }
    fn is_leaf(&self, s: u32) -> bool {
        self.clusters[s as usize].record[9] == 0.0
    }
    fn push_children(&self, t: u32, s: u32, stack: &mut Vec<(u32, u32)>) -> bool {
        match self.clusters[s as usize].children {
            Some((first, n)) => {
                stack.extend((first..first + n).rev().map(|c| (t, c)));
                true
            }
            None => false,
        }
    }
}

/// Everything the remote lists need: the lists (sources by LET id) and the source side.
struct Remote {
    lists: Interactions,
    /// Particles of each LET cluster.
    counts: Vec<usize>,
    side: SourceSide,
    stats: LetStats,
    seconds: f64,
}

/// Reads `reads` (byte offset, destination) from `rank`, counting into `stats`.
fn get(win: &Window, rank: usize, reads: &mut [(usize, &mut [u8])], stats: &mut LetStats) {
    if reads.is_empty() {
        return;
    }
    stats.bytes += reads.iter().map(|r| r.1.len() as u64).sum::<u64>();
    stats.messages += reads.len() as u64;
    win.get(rank, reads);
}

/// Fetches the LET for the local target side and builds the remote lists and source side
/// (see the module documentation, steps 4 and the reads of step 5's sources).
#[allow(clippy::too_many_arguments)]
fn fetch_let(
    comm: &Comm,
    win: &Window,
    headers: &[Header],
    roots: &[Record],
    ts: &TargetSide,
    (theta, max_radius): (f64, f64),
    n: usize,
    nd: usize,
) -> Remote {
    let clock = Instant::now();
    let np = (n + 1).pow(3);
    let mut stats = LetStats { transport: win.transport(), ..LetStats::default() };
    let mut tree = LetTree::default();
    let mut lists = Interactions::default();
    let me = comm.rank();
    let mut pending = Vec::new();
    for (q, root) in roots.iter().enumerate() {
        if q != me && root[6] > 0.0 {
            let id = tree.push(q, 0, *root);
            pending.push((0u32, id));
        }
    }
    stats.clusters = tree.clusters.len();
    let tgeo = geometry(&ts.tree);
    while !pending.is_empty() {
        let deferred = traverse(&ts.tree, &tgeo, &tree, (theta, max_radius), np, pending, &mut lists);
        if deferred.is_empty() {
            break;
        }
        stats.rounds += 1;
        // the clusters to expand, each once, by rank
        let mut need: Vec<u32> = deferred.iter().map(|&(_, s)| s).collect();
        need.sort_unstable();
        need.dedup();
        for (q, header) in headers.iter().enumerate() {
            let mine: Vec<u32> = need.iter().copied().filter(|&s| tree.clusters[s as usize].rank == q).collect();
            if mine.is_empty() {
                continue;
            }
            let sizes: Vec<usize> = mine.iter().map(|&s| tree.clusters[s as usize].record[9] as usize).collect();
            let mut got: Vec<Vec<Record>> = sizes.iter().map(|&m| vec![[0.0; 10]; m]).collect();
            {
                let mut reads: Vec<(usize, &mut [u8])> = mine
                    .iter()
                    .zip(got.iter_mut())
                    .map(|(&s, g)| {
                        let first = tree.clusters[s as usize].record[8] as usize;
                        (header[0] as usize + first * 80, as_bytes_mut(&mut g[..]))
                    })
                    .collect();
                get(win, q, &mut reads, &mut stats);
            }
            for (&s, g) in mine.iter().zip(got) {
                let first = tree.clusters.len() as u32;
                let index = tree.clusters[s as usize].record[8] as usize;
                for (i, r) in g.into_iter().enumerate() {
                    tree.push(q, index + i, r);
                }
                tree.clusters[s as usize].children = Some((first, tree.clusters.len() as u32 - first));
            }
        }
        stats.clusters = tree.clusters.len();
        pending = deferred;
    }
    lists.sort();

    // sources: particles of PP and CP sources (merged intervals per rank), proxies of PC and CC
    let nlet = tree.clusters.len();
    let (pused, _) = used_clusters(nlet, &[&lists.pp, &lists.cp], false);
    let (xused, slots) = used_clusters(nlet, &[&lists.pc, &lists.cc], false);
    let width = 3 + nd;
    let mut ranges = vec![(0usize, 0usize); nlet];
    let mut particles_aos: Vec<f64> = Vec::new();
    let mut proxy_charges: Vec<f64> = vec![0.0; xused.len() * np * nd];
    for (q, header) in headers.iter().enumerate() {
        // particle intervals [begin, end) in rank q's tree order, merged
        let mut iv: Vec<(usize, usize, u32)> = pused
            .iter()
            .filter(|&&s| tree.clusters[s].rank == q)
            .map(|&s| {
                let r = &tree.clusters[s].record;
                (r[7] as usize, r[7] as usize + r[6] as usize, s as u32)
            })
            .collect();
        iv.sort_unstable();
        let mut merged: Vec<(usize, usize)> = Vec::new();
        for &(b, e, _) in &iv {
            match merged.last_mut() {
                Some(last) if b <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((b, e)),
            }
        }
        let base = particles_aos.len() / width;
        let mut starts = Vec::with_capacity(merged.len());
        let mut at = base;
        for &(b, e) in &merged {
            starts.push(at);
            at += e - b;
        }
        for &(b, e, s) in &iv {
            let m = merged.partition_point(|&(mb, _)| mb <= b) - 1;
            let off = starts[m] + (b - merged[m].0);
            ranges[s as usize] = (off, off + (e - b));
        }
        particles_aos.resize(at * width, 0.0);
        let xs: Vec<usize> = xused.iter().copied().filter(|&s| tree.clusters[s].rank == q).collect();
        let mut reads: Vec<(usize, &mut [u8])> = Vec::with_capacity(merged.len() + xs.len());
        let mut rest = &mut particles_aos[base * width..];
        for &(b, e) in &merged {
            let (head, tail) = rest.split_at_mut((e - b) * width);
            reads.push((header[1] as usize + b * width * 8, as_bytes_mut(head)));
            rest = tail;
        }
        // proxy blocks of rank q's clusters, in slot order
        let block = np * nd;
        let mut chunks: Vec<(usize, &mut [f64])> = proxy_charges.chunks_mut(block).enumerate().collect();
        chunks.retain(|(i, _)| tree.clusters[xused[*i]].rank == q);
        for (i, chunk) in chunks {
            let bfs = tree.clusters[xused[i]].index;
            reads.push((header[2] as usize + bfs * block * 8, as_bytes_mut(chunk)));
        }
        get(win, q, &mut reads, &mut stats);
        stats.proxies += xs.len();
    }
    let npart = particles_aos.len() / width;
    stats.particles = npart;
    let mut particles = Soa::zeroed(npart, nd);
    for (k, p) in particles_aos.chunks_exact(width).enumerate() {
        [particles.x[k], particles.y[k], particles.z[k]] = [p[0], p[1], p[2]];
        for c in 0..nd {
            particles.q[c * npart + k] = p[3 + c];
        }
    }
    let boxes: Vec<[AxisNodes; 3]> =
        xused.iter().map(|&s| cluster_nodes(n, &as_cluster(&tree.clusters[s].record))).collect();
    let nodes: Vec<&[AxisNodes; 3]> = boxes.iter().collect();
    let proxies = proxy_soa(&nodes, np, nd, |i| Some(&proxy_charges[i * np * nd..(i + 1) * np * nd]));
    let side = SourceSide { particles, ranges, proxies, slots };
    let counts = tree.clusters.iter().map(|c| c.record[6] as usize).collect();
    Remote { lists, counts, side, stats, seconds: clock.elapsed().as_secs_f64() }
}

/// Evaluates the treecode over the ranks of `comm` for the particles each rank owns: every
/// rank passes its own sources (with `K::DENSITY` densities each) and targets (any number,
/// none included) and gets `K::VALUE` values per target, in its targets' order, summed over
/// the sources of every rank. No particle moves: [`evaluate_distributed`] partitions first.
/// Collective.
///
/// The local lists are evaluated while the LET is fetched (on a second thread); see the
/// module documentation for the steps.
///
/// # Errors
/// As [`crate::evaluate()`], on every rank when any rank's input is bad.
#[allow(clippy::too_many_arguments)]
pub fn evaluate_owned<K: PairKernel>(
    comm: &Comm,
    kernel: &K,
    params: &TreecodeParams,
    sources: &[[f64; 3]],
    densities: &[f64],
    targets: &[[f64; 3]],
    par: Par,
    isa: Isa,
) -> Result<(Vec<f64>, TreecodeStats)> {
    let checked = params.validate().and_then(|()| validate(sources, densities, K::DENSITY, targets));
    comm.agree(checked)?;
    in_units(comm, kernel, sources, densities, targets, |k, x, q, y| {
        comm.agree(owned_checked(comm, k, params, x, q, y, par, isa, None))
    })
}

/// `eval(kernel, sources, densities, targets)`, computed in the units of the points and
/// densities of every rank ([`parki_core::units`]): where their extent lies far from 1 and the
/// kernel has a length unit ([`PairKernel::in_length_unit`]), on the points over `s` and the
/// scaled densities, the values times `s^-p`; where the largest density (in that unit) lies far
/// from 1, on the densities over `w` (the sums are linear in them, whatever the kernel), the
/// values times `w`. Exact: `s` and `w` are powers of two. Collective (two maxima).
fn in_units<K: PairKernel>(
    comm: &Comm,
    kernel: &K,
    sources: &[[f64; 3]],
    densities: &[f64],
    targets: &[[f64; 3]],
    eval: impl FnOnce(&K, &[[f64; 3]], &[f64], &[[f64; 3]]) -> Result<(Vec<f64>, TreecodeStats)>,
) -> Result<(Vec<f64>, TreecodeStats)> {
    let mut b = units::negated_bounds(&[sources, targets]);
    comm.all_reduce_f64(&mut b, ReduceOp::Max);
    let s = units::length_unit(&b);
    let rescaled = (s != 1.0).then(|| kernel.in_length_unit(s)).flatten();
    let nd = K::DENSITY;
    let scale = rescaled.as_ref().map_or([1.0; MAX_DENSITY], |r| r.density_scale);
    let largest = densities
        .chunks_exact(nd)
        .map(|row| row.iter().zip(&scale).fold(0.0f64, |m, (q, d)| m.max((q * d).abs())))
        .fold(0.0, f64::max);
    let w = units::strength_unit(comm.max(largest));
    if rescaled.is_none() && w == 1.0 {
        return eval(kernel, sources, densities, targets);
    }
    let (k, power, length) = match &rescaled {
        Some(r) => (&r.kernel, r.power, s),
        None => (kernel, 0, 1.0),
    };
    let u = Units { length, strength: w };
    let lw = units::exponent_of(w);
    let e: Vec<i32> = scale[..nd].iter().map(|&d| units::exponent_of(d) - lw).collect();
    let q: Vec<f64> = densities
        .chunks_exact(nd)
        .flat_map(|row| row.iter().zip(&e).map(|(&q, &e)| units::times_two_to(q, e)))
        .collect();
    let (x, y) = (units::points_in_unit(sources, length), units::points_in_unit(targets, length));
    let (mut values, stats) = eval(k, &x, &q, &y)?;
    values.iter_mut().for_each(|v| *v = u.restore(*v, power));
    Ok((values, stats))
}

/// Where the lists and the passes run: the host's accumulators, or a device's session.
enum Engine<'a> {
    Host(Accumulators),
    Device(Box<dyn TreeSession + 'a>),
}

/// [`evaluate_owned`] on input already checked on every rank (parameters, lengths, finite
/// values), on the host or, with `device`, on a device. A device's error is returned after
/// every collective step has run (a rank whose upward pass failed exposes no tree), so that
/// the caller agrees on it without a hang.
#[allow(clippy::too_many_arguments)]
fn owned_checked<K: PairKernel>(
    comm: &Comm,
    kernel: &K,
    params: &TreecodeParams,
    sources: &[[f64; 3]],
    densities: &[f64],
    targets: &[[f64; 3]],
    par: Par,
    isa: Isa,
    device: Option<&dyn TreeBackend>,
) -> Result<(Vec<f64>, TreecodeStats)> {
    assert!(K::DENSITY <= MAX_DENSITY && K::VALUE <= MAX_VALUE, "kernel widths within MAX_DENSITY and MAX_VALUE");
    let (nd, nv) = (K::DENSITY, K::VALUE);
    let (n, np) = (params.degree, params.proxies());
    let mut stats = TreecodeStats::default();

    let clock = Instant::now();
    let build = |pts: &[[f64; 3]], max_leaf: usize| {
        (!pts.is_empty()).then(|| Tree::build_with(pts, TreeParams { max_leaf }, par))
    };
    let (stree, ttree) = match par {
        Par::Seq => (build(sources, params.max_leaf), build(targets, params.max_batch)),
        Par::Rayon(_) => rayon::join(|| build(sources, params.max_leaf), || build(targets, params.max_batch)),
    };
    stats.clusters = [stree.as_ref().map_or(0, |t| t.clusters.len()), ttree.as_ref().map_or(0, |t| t.clusters.len())];
    let ts = ttree.map(|t| TargetSide::new(t, targets, n, par));
    // the device's copy of the sources in tree order, and their clusters' nodes
    let on_device = device.map(|_| {
        let soa = stree.as_ref().map(|t| tree_order(t, sources, densities, nd, par));
        let nodes: Vec<[AxisNodes; 3]> =
            stree.as_ref().map_or(Vec::new(), |t| t.clusters.iter().map(|c| cluster_nodes(n, c)).collect());
        (soa, nodes)
    });
    stats.times.add(TreeStage::TreeBuild, clock.elapsed().as_secs_f64());

    let distributed = comm.size() > 1;
    let clock = Instant::now();
    let mut failed: Result<()> = Ok(());
    let mut session: Option<Box<dyn TreeSession + '_>> = None;
    let proxies = match (device, &on_device, &stree) {
        (None, _, Some(t)) => Some(upward_pass(t, sources, densities, nd, n, par)),
        (Some(dev), Some((soa, snodes)), _) => {
            let sview = match (&stree, soa) {
                (Some(t), Some(p)) => Some(view(t, snodes, p)),
                _ => None,
            };
            let tview = ts.as_ref().map(|t| view(&t.tree, &t.nodes, &t.points));
            let opened = kernel
                .device()
                .ok_or_else(|| Error::Unsupported { what: "a kernel without a device form on a device".into() })
                .and_then(|k| dev.begin(k, nd, nv, n, sview, tview));
            let charges = opened.and_then(|mut s| {
                let c = if stree.is_some() { s.upward(distributed)? } else { None };
                session = Some(s);
                Ok(c)
            });
            match charges {
                Ok(c) => c.map(|charges| ProxyCharges { degree: n, ncomp: nd, nodes: snodes.clone(), charges }),
                Err(e) => {
                    failed = Err(e);
                    None
                }
            }
        }
        _ => None,
    };
    stats.times.add(TreeStage::Upward, clock.elapsed().as_secs_f64());

    let clock = Instant::now();
    // an oscillatory kernel's clusters small against its wavelength (`oscillation_radius`)
    let max_radius = oscillation_radius(kernel.wavenumber(), n, params.theta);
    let local = match (&ts, &stree) {
        (Some(tt), Some(st)) => Some(Interactions::build_capped(&tt.tree, st, params.theta, max_radius, np)),
        _ => None,
    };
    stats.times.add(TreeStage::Traversal, clock.elapsed().as_secs_f64());

    // exposure: every rank, collectively (nothing on one rank: there is nobody to read it)
    let (buf, header, root) = match distributed {
        true => exposure(stree.as_ref(), sources, densities, proxies.as_ref()),
        false => (Vec::new(), [0; 4], [0.0; 10]),
    };
    let headers: Vec<Header> = comm.all_gather(&[header]);
    let roots: Vec<Record> = comm.all_gather(&[root]);
    let win = comm.expose(as_bytes(&buf));

    let mut values = vec![0.0; targets.len() * nv];
    if let Some(ts) = &ts {
        let mut engine = match session.take() {
            Some(s) => Engine::Device(s),
            None => Engine::Host(Accumulators::new(ts, nv)),
        };
        let mut active = vec![false; ts.tree.clusters.len()];
        let clock = Instant::now();
        let fetch = || fetch_let(comm, &win, &headers, &roots, ts, (params.theta, max_radius), n, nd);
        let mut compute_local = || -> Result<()> {
            let (Some(lists), Some(st)) = (&local, &stree) else { return Ok(()) };
            match &mut engine {
                Engine::Host(acc) => {
                    if let Some(prox) = &proxies {
                        let side = local_side(st, sources, densities, prox, lists, par);
                        apply_lists(kernel, ts, lists, &side, acc, par, isa);
                    }
                    Ok(())
                }
                Engine::Device(s) => {
                    let (sused, slots) = used_clusters(st.clusters.len(), &[&lists.pc, &lists.cc], false);
                    let ranges: Vec<(usize, usize)> = st.clusters.iter().map(|c| (c.begin, c.end)).collect();
                    let planned = plan_lists(ts, lists, &ranges, &slots);
                    mark(&mut active, &planned.tused);
                    let used: Vec<u32> = sused.iter().map(|&c| c as u32).collect();
                    s.apply_local(&list_work(&planned), &used)
                }
            }
        };
        let (remote, local_done) = if distributed {
            std::thread::scope(|scope| {
                let fetching = scope.spawn(fetch);
                let done = compute_local();
                (fetching.join().unwrap_or_else(|e| std::panic::resume_unwind(e)), done)
            })
        } else {
            let done = compute_local();
            (fetch(), done)
        };
        failed = failed.and(local_done);
        let overlapped = clock.elapsed().as_secs_f64();
        stats.times.add(TreeStage::Let, remote.seconds);
        stats.times.add(TreeStage::ComputeLocal, (overlapped - remote.seconds).max(0.0));
        stats.let_tree = remote.stats;

        let clock = Instant::now();
        match &mut engine {
            Engine::Host(acc) => apply_lists(kernel, ts, &remote.lists, &remote.side, acc, par, isa),
            Engine::Device(s) if failed.is_ok() && !remote.lists.counts().iter().all(|&c| c == 0) => {
                let planned = plan_lists(ts, &remote.lists, &remote.side.ranges, &remote.side.slots);
                mark(&mut active, &planned.tused);
                let (p, x) = (&remote.side.particles, &remote.side.proxies);
                let side = SidePoints {
                    particles: [&p.x[..], &p.y[..], &p.z[..]],
                    particle_densities: &p.q[..],
                    proxies: [&x.x[..], &x.y[..], &x.z[..]],
                    proxy_densities: &x.q[..],
                };
                failed = s.apply_remote(&list_work(&planned), &side);
            }
            Engine::Device(_) => {}
        }
        stats.times.add(TreeStage::ComputeRemote, clock.elapsed().as_secs_f64());

        if let (Some(lists), Some(st)) = (&local, &stree) {
            stats.interactions = lists.counts();
            stats.evaluations = lists.evaluations(&ts.tree, st, np);
        }
        let tsize = |c: u32| ts.tree.clusters[c as usize].count() as u64;
        let let_size = |c: u32| remote.counts[c as usize] as u64;
        let r = remote.lists.evaluations_by(tsize, let_size, np);
        for (k, c) in remote.lists.counts().into_iter().enumerate() {
            stats.interactions[k] += c;
            stats.evaluations[k] += r[k];
        }

        let clock = Instant::now();
        values = match engine {
            Engine::Host(acc) => acc.finish(ts, par),
            Engine::Device(mut s) if failed.is_ok() => {
                propagate_active(&ts.tree, &mut active);
                match s.finish(&active) {
                    Ok(tree_order) => in_input_order(&ts.tree, &tree_order, nv),
                    Err(e) => {
                        failed = Err(e);
                        values
                    }
                }
            }
            Engine::Device(_) => values,
        };
        stats.times.add(TreeStage::Downward, clock.elapsed().as_secs_f64());
    }
    win.free();
    failed.map(|()| (values, stats))
}

/// A tree, its nodes and its points (tree order) as a device takes them.
fn view<'a>(tree: &'a Tree, nodes: &'a [[AxisNodes; 3]], p: &'a Soa) -> TreeView<'a> {
    TreeView { tree, nodes, points: [&p.x[..], &p.y[..], &p.z[..]], densities: &p.q[..] }
}

/// Marks the clusters `used` (CP and CC targets) active.
fn mark(active: &mut [bool], used: &[usize]) {
    for &c in used {
        active[c] = true;
    }
}

/// The device's work items of one source side: the leaves' PP and PC, then the clusters' CP
/// and CC.
fn list_work(p: &PlannedLists) -> ListWork {
    ListWork {
        clusters: p.tused.iter().map(|&c| c as u32).collect(),
        particles: Rows::concat(&p.pp, &p.cp),
        proxies: Rows::concat(&p.pc, &p.cc),
    }
}

/// Evaluates the treecode over the ranks of `comm`, each rank passing any of the sources and
/// targets (positions, `K::DENSITY` densities per source): RCB partitions of the sources by
/// Zoltan, targets to the rank whose box holds them, [`evaluate_owned`], and each rank's values
/// back in its targets' order (on one rank: no partition, the caller's points as they are).
/// Collective.
///
/// # Errors
/// As [`crate::evaluate()`], on every rank when any rank's input is bad; a failed partition
/// ([`Rcb::partition`]).
#[allow(clippy::too_many_arguments)]
pub fn evaluate_distributed<K: PairKernel>(
    comm: &Comm,
    kernel: &K,
    params: &TreecodeParams,
    sources: &[[f64; 3]],
    densities: &[f64],
    targets: &[[f64; 3]],
    par: Par,
    isa: Isa,
) -> Result<(Vec<f64>, TreecodeStats)> {
    evaluate_distributed_on(comm, kernel, params, sources, densities, targets, par, isa, None)
}

/// [`evaluate_distributed`] with the upward pass, the lists and the downward pass on `device`
/// when given (trees, traversal and LET stay on the host, on `par`'s threads). Collective.
///
/// # Errors
/// As [`evaluate_distributed`]; a kernel without a device form
/// ([`PairKernel::device`]), and the device's errors, on every rank.
#[allow(clippy::too_many_arguments)]
pub fn evaluate_distributed_on<K: PairKernel>(
    comm: &Comm,
    kernel: &K,
    params: &TreecodeParams,
    sources: &[[f64; 3]],
    densities: &[f64],
    targets: &[[f64; 3]],
    par: Par,
    isa: Isa,
    device: Option<&dyn TreeBackend>,
) -> Result<(Vec<f64>, TreecodeStats)> {
    let checked = params.validate().and_then(|()| validate(sources, densities, K::DENSITY, targets));
    comm.agree(checked)?;
    in_units(comm, kernel, sources, densities, targets, |k, x, q, y| {
        distributed_checked(comm, k, params, x, q, y, par, isa, device)
    })
}

/// [`evaluate_distributed_on`] on input checked on every rank.
#[allow(clippy::too_many_arguments)]
fn distributed_checked<K: PairKernel>(
    comm: &Comm,
    kernel: &K,
    params: &TreecodeParams,
    sources: &[[f64; 3]],
    densities: &[f64],
    targets: &[[f64; 3]],
    par: Par,
    isa: Isa,
    device: Option<&dyn TreeBackend>,
) -> Result<(Vec<f64>, TreecodeStats)> {
    let (nd, nv) = (K::DENSITY, K::VALUE);
    if comm.size() == 1 {
        // one rank owns everything: no partition and no routes (they would copy every point
        // and density twice and give the same order back), the same values
        let (values, mut stats) = owned_checked(comm, kernel, params, sources, densities, targets, par, isa, device)?;
        stats.times.add(TreeStage::Partition, 0.0);
        stats.owned = [sources.len(), targets.len()];
        return Ok((values, stats));
    }
    let clock = Instant::now();
    let (rcb, owners) = Rcb::partition(comm, sources)?;
    let towners: Vec<u32> = targets.iter().map(|&p| rcb.owner(p) as u32).collect();
    let (sroute, sgot) = Route::send_to_owners(comm, &owners, &[], SortMode::Full, sources, None, par);
    let owned_densities = sroute.forward(comm, densities, nd);
    let (troute, tgot) = Route::send_to_owners(comm, &towners, &[], SortMode::Full, targets, None, par);
    let partition = clock.elapsed().as_secs_f64();
    let owned =
        owned_checked(comm, kernel, params, &sgot.positions, &owned_densities, &tgot.positions, par, isa, device);
    let (values, mut stats) = comm.agree(owned)?;
    stats.times.add(TreeStage::Partition, partition);
    stats.owned = [sgot.positions.len(), tgot.positions.len()];
    let clock = Instant::now();
    let mut out = vec![0.0; targets.len() * nv];
    troute.return_to_callers(comm, &values, nv, &mut out);
    stats.times.add(TreeStage::Partition, clock.elapsed().as_secs_f64());
    Ok((out, stats))
}

/// [`evaluate_distributed`] for a built-in kernel, with the caller's per-source inputs
/// ([`TreeKernel::input_width`] each) converted to the summed densities. Collective.
///
/// # Errors
/// As [`evaluate_distributed`]; the inputs' length is checked against `sources.inputs` (on
/// every rank).
#[allow(clippy::too_many_arguments)]
pub fn evaluate_kernel_distributed(
    comm: &Comm,
    kernel: TreeKernel,
    params: &TreecodeParams,
    sources: &[[f64; 3]],
    inputs: &[f64],
    targets: &[[f64; 3]],
    par: Par,
    isa: Isa,
) -> Result<(Vec<f64>, TreecodeStats)> {
    evaluate_kernel_distributed_on(comm, kernel, params, sources, inputs, targets, par, isa, None)
}

/// [`evaluate_kernel_distributed`] with the compute stages on `device` when given
/// ([`evaluate_distributed_on`]). Collective.
///
/// # Errors
/// As [`evaluate_distributed_on`]; the inputs' length is checked against `sources.inputs`.
#[allow(clippy::too_many_arguments)]
pub fn evaluate_kernel_distributed_on(
    comm: &Comm,
    kernel: TreeKernel,
    params: &TreecodeParams,
    sources: &[[f64; 3]],
    inputs: &[f64],
    targets: &[[f64; 3]],
    par: Par,
    isa: Isa,
    device: Option<&dyn TreeBackend>,
) -> Result<(Vec<f64>, TreecodeStats)> {
    let q = comm.agree(kernel.checked_densities(sources.len(), inputs))?;
    struct Dist<'a>(
        &'a Comm,
        &'a TreecodeParams,
        &'a [[f64; 3]],
        &'a [f64],
        &'a [[f64; 3]],
        Par,
        Isa,
        Option<&'a dyn TreeBackend>,
    );
    impl KernelVisitor for Dist<'_> {
        type Output = Result<(Vec<f64>, TreecodeStats)>;
        fn visit<K: PairKernel>(self, k: &K) -> Self::Output {
            evaluate_distributed_on(self.0, k, self.1, self.2, self.3, self.4, self.5, self.6, self.7)
        }
    }
    kernel.visit(Dist(comm, params, sources, &q, targets, par, isa, device))
}
