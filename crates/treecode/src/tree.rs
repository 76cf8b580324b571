//! Cluster trees by bisection (BLDTT paper §2.3; digest §1.6).
//!
//! The root is the minimal bounding box of all particles. A cluster with more than `max_leaf`
//! particles is split: at most 2 children while it holds fewer than `2 max_leaf` particles, 4
//! below `4 max_leaf`, else 8, so that leaves do not average fewer than `max_leaf / 2`. The
//! aspect-ratio rule picks the axes to bisect: every axis at least `l_max / sqrt(2)` long; with at
//! most 4 children and all three picked, the shortest is dropped (x on a tie); with at most 2,
//! only the longest stays. Each picked axis is bisected at the box midpoint; empty children are
//! discarded, and every cluster is then shrunk to the minimal bounding box of its particles
//! (its Chebyshev grid lives on that box). A cluster whose particles all coincide is a leaf
//! whatever its count.
//!
//! Particles are stored in tree order: cluster `c` owns `order[begin..end]` (input indices), a
//! contiguous range; clusters are numbered in depth-first pre-order, so a cluster's descendants
//! follow it. Levels (root = 0) and leaves are listed for the level-synchronous passes.

use parki_core::par::DisjointSlice;
use parki_core::Par;
use rayon::iter::{IndexedParallelIterator, IntoParallelIterator, IntoParallelRefIterator, ParallelIterator};
use rayon::slice::{ParallelSlice, ParallelSliceMut};

/// Tree parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TreeParams {
    /// Largest number of particles in a leaf (the paper's `N_0` / `M_0`; it uses 2000).
    pub max_leaf: usize,
}

/// One cluster: a contiguous range of particles in tree order and their bounding box.
#[derive(Clone, Debug, PartialEq)]
pub struct Cluster {
    /// First particle (tree order).
    pub begin: usize,
    /// One past the last particle.
    pub end: usize,
    /// Lower corner of the minimal bounding box.
    pub lo: [f64; 3],
    /// Upper corner.
    pub hi: [f64; 3],
    /// Depth (root 0).
    pub level: usize,
    /// Parent cluster (none for the root).
    pub parent: Option<usize>,
    /// Children (2, 4 or 8 of them before empty ones are discarded; none for a leaf).
    pub children: Vec<usize>,
}

impl Cluster {
    /// Number of particles.
    pub fn count(&self) -> usize {
        self.end - self.begin
    }

    /// Whether the cluster has no children.
    pub fn is_leaf(&self) -> bool {
        self.children.is_empty()
    }

    /// Centre of the box.
    pub fn centre(&self) -> [f64; 3] {
        [0, 1, 2].map(|d| 0.5 * (self.lo[d] + self.hi[d]))
    }

    /// Radius: half the box diagonal (the MAC's `r`).
    pub fn radius(&self) -> f64 {
        0.5 * (0..3).map(|d| (self.hi[d] - self.lo[d]).powi(2)).sum::<f64>().sqrt()
    }
}

/// A cluster tree over a set of points.
#[derive(Clone, Debug)]
pub struct Tree {
    /// Clusters in depth-first pre-order (the root first).
    pub clusters: Vec<Cluster>,
    /// `order[k]`: the input index of the `k`-th particle in tree order.
    pub order: Vec<u32>,
    /// Clusters of each level.
    pub levels: Vec<Vec<usize>>,
    /// The leaves.
    pub leaves: Vec<usize>,
}

impl Tree {
    /// Builds the tree of `positions` (finite; not empty) with `params`, on one thread
    /// ([`Tree::build_with`]).
    ///
    /// Panics if `positions` is empty or `max_leaf` is 0 (the callers validate both).
    pub fn build(positions: &[[f64; 3]], params: TreeParams) -> Self {
        Self::build_with(positions, params, Par::Seq)
    }

    /// Builds the tree of `positions` (finite; not empty) with `params`; with `Par::Rayon`
    /// the children of a cluster of more than [`PAR_MIN_PARTICLES`] particles are built in
    /// parallel, and a cluster of more than [`PAR_SPLIT_PARTICLES`] is itself split over the
    /// threads (its bounding box and its counting sort by child, in chunks: the top levels, which
    /// one thread would otherwise do alone). The tree is the same whatever `par` (the same
    /// clusters, numbering and order: the chunked sort is stable).
    ///
    /// The points travel with their input indices through the sorts (32 bytes each), so each
    /// level reads and writes contiguous memory instead of gathering `positions[order[k]]`.
    ///
    /// Panics if `positions` is empty or `max_leaf` is 0 (the callers validate both).
    pub fn build_with(positions: &[[f64; 3]], params: TreeParams, par: Par) -> Self {
        assert!(!positions.is_empty(), "a tree needs at least one particle");
        assert!(params.max_leaf > 0, "max_leaf must be positive");
        assert!(positions.len() <= u32::MAX as usize, "at most 2^32 - 1 particles per tree");
        let item = |(i, &p): (usize, &[f64; 3])| Item { p, i: i as u32 };
        let (mut items, mut scratch): (Vec<Item>, Vec<Item>) = match par {
            Par::Rayon(_) if positions.len() > PAR_SPLIT_PARTICLES => {
                let items: Vec<Item> = positions.par_iter().enumerate().map(item).collect();
                let scratch = items.par_iter().copied().collect();
                (items, scratch)
            }
            _ => (positions.iter().enumerate().map(item).collect(), vec![Item { p: [0.0; 3], i: 0 }; positions.len()]),
        };
        let clusters = subtree(&mut items, &mut scratch, 0, 0, params, par);
        let mut t =
            Tree { clusters, order: items.iter().map(|it| it.i).collect(), levels: Vec::new(), leaves: Vec::new() };
        for (c, cl) in t.clusters.iter().enumerate() {
            if t.levels.len() <= cl.level {
                t.levels.resize(cl.level + 1, Vec::new());
            }
            t.levels[cl.level].push(c);
            if cl.is_leaf() {
                t.leaves.push(c);
            }
        }
        t
    }

    /// The root.
    pub fn root(&self) -> &Cluster {
        &self.clusters[0]
    }
}

/// Clusters of more particles than this build their children in parallel under `Par::Rayon`
/// (below it a subtree is a few hundred microseconds of work, less than the task's cost pays for).
pub const PAR_MIN_PARTICLES: usize = 1 << 15;

/// Clusters of more particles than this are split over the threads under `Par::Rayon` (their
/// bounding box and counting sort in chunks of `SPLIT_CHUNK`).
pub const PAR_SPLIT_PARTICLES: usize = 1 << 17;

/// Particles per chunk of a split over the threads.
const SPLIT_CHUNK: usize = 1 << 14;

/// A point with its input index, sorted together.
#[derive(Clone, Copy)]
struct Item {
    p: [f64; 3],
    i: u32,
}

/// The clusters of the subtree over `items` (which become tree order; `begin` is the first
/// one's place in the whole tree), in depth-first pre-order with indices relative to the
/// returned vector: the subtree's root first, its parent `None` (the caller's to set).
/// `scratch` is as long as `items`.
fn subtree(
    items: &mut [Item],
    scratch: &mut [Item],
    begin: usize,
    level: usize,
    params: TreeParams,
    par: Par,
) -> Vec<Cluster> {
    let count = items.len();
    let split = matches!(par, Par::Rayon(_)) && count > PAR_SPLIT_PARTICLES;
    let (lo, hi) = if split {
        items.par_chunks(SPLIT_CHUNK).map(bounding_box).reduce(
            || ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]),
            |a, b| ([0, 1, 2].map(|d| a.0[d].min(b.0[d])), [0, 1, 2].map(|d| a.1[d].max(b.1[d]))),
        )
    } else {
        bounding_box(items)
    };
    let mut out = vec![Cluster { begin, end: begin + count, lo, hi, level, parent: None, children: Vec::new() }];
    if count <= params.max_leaf {
        return out;
    }
    let axes = split_axes(lo, hi, count, params.max_leaf);
    if !axes.iter().any(|&a| a) {
        // every particle at one point: nothing to bisect
        return out;
    }
    let mid = [0, 1, 2].map(|d| 0.5 * (lo[d] + hi[d]));
    let code = |p: &[f64; 3]| -> usize { (0..3).filter(|&d| axes[d] && p[d] >= mid[d]).map(|d| 1 << d).sum() };
    let counts = if split { sort_by_code_chunked(items, scratch, &code) } else { sort_by_code(items, scratch, &code) };
    let mut start = [0usize; 9];
    for b in 0..8 {
        start[b + 1] = start[b] + counts[b];
    }
    // the non-empty children's ranges, as disjoint slices of items and scratch
    let mut pieces: Vec<(&mut [Item], &mut [Item], usize)> = Vec::with_capacity(8);
    let (mut rest_items, mut rest_scratch) = (items, scratch);
    for b in 0..8 {
        let (head, tail) = std::mem::take(&mut rest_items).split_at_mut(counts[b]);
        let (shead, stail) = std::mem::take(&mut rest_scratch).split_at_mut(counts[b]);
        (rest_items, rest_scratch) = (tail, stail);
        if counts[b] > 0 {
            pieces.push((head, shead, begin + start[b]));
        }
    }
    let build = |(it, sc, b): (&mut [Item], &mut [Item], usize)| subtree(it, sc, b, level + 1, params, par);
    let subs: Vec<Vec<Cluster>> = match par {
        Par::Rayon(_) if count > PAR_MIN_PARTICLES => pieces.into_par_iter().map(build).collect(),
        _ => pieces.into_iter().map(build).collect(),
    };
    for sub in subs {
        let offset = out.len();
        out[0].children.push(offset);
        out.extend(sub.into_iter().map(|mut c| {
            c.parent = Some(c.parent.map_or(0, |q| q + offset));
            for child in &mut c.children {
                *child += offset;
            }
            c
        }));
    }
    out
}

/// Stable counting sort of `items` by `code` (0..8) through `scratch`; the counts per code.
fn sort_by_code(items: &mut [Item], scratch: &mut [Item], code: &impl Fn(&[f64; 3]) -> usize) -> [usize; 8] {
    let mut counts = [0usize; 8];
    for it in items.iter() {
        counts[code(&it.p)] += 1;
    }
    let mut fill = [0usize; 8];
    for b in 1..8 {
        fill[b] = fill[b - 1] + counts[b - 1];
    }
    for it in items.iter() {
        let b = code(&it.p);
        scratch[fill[b]] = *it;
        fill[b] += 1;
    }
    items.copy_from_slice(scratch);
    counts
}

/// [`sort_by_code`] over the threads: counts per chunk of [`SPLIT_CHUNK`], each chunk's items
/// scattered to its own slots of every code (chunks in order, so the sort stays stable and the
/// result is [`sort_by_code`]'s), the copy back in chunks.
fn sort_by_code_chunked(
    items: &mut [Item],
    scratch: &mut [Item],
    code: &(impl Fn(&[f64; 3]) -> usize + Sync),
) -> [usize; 8] {
    let chunk_counts: Vec<[usize; 8]> = items
        .par_chunks(SPLIT_CHUNK)
        .map(|c| {
            let mut n = [0usize; 8];
            for it in c {
                n[code(&it.p)] += 1;
            }
            n
        })
        .collect();
    let mut counts = [0usize; 8];
    for n in &chunk_counts {
        for b in 0..8 {
            counts[b] += n[b];
        }
    }
    // the first slot of every (chunk, code): the code's start plus the earlier chunks' counts
    let mut next = [0usize; 8];
    for b in 1..8 {
        next[b] = next[b - 1] + counts[b - 1];
    }
    let firsts: Vec<[usize; 8]> = chunk_counts
        .iter()
        .map(|n| {
            let f = next;
            for b in 0..8 {
                next[b] += n[b];
            }
            f
        })
        .collect();
    let out = DisjointSlice::new(scratch);
    items.par_chunks(SPLIT_CHUNK).zip(firsts.par_iter().zip(&chunk_counts)).for_each(|(c, (f, n))| {
        // SAFETY: chunk k's slots of code b are firsts[k][b]..firsts[k][b] + counts_k[b]: the
        // codes' ranges are disjoint, and within a code the chunks' ranges follow each other.
        let views: [&mut [Item]; 8] = std::array::from_fn(|b| unsafe { out.range_mut(f[b], f[b] + n[b]) });
        let mut fill = [0usize; 8];
        for it in c {
            let b = code(&it.p);
            views[b][fill[b]] = *it;
            fill[b] += 1;
        }
    });
    items.par_chunks_mut(SPLIT_CHUNK).zip(scratch.par_chunks(SPLIT_CHUNK)).for_each(|(a, b)| a.copy_from_slice(b));
    counts
}

/// Minimal bounding box of `items`.
fn bounding_box(items: &[Item]) -> ([f64; 3], [f64; 3]) {
    let mut lo = [f64::INFINITY; 3];
    let mut hi = [f64::NEG_INFINITY; 3];
    for it in items {
        for d in 0..3 {
            lo[d] = lo[d].min(it.p[d]);
            hi[d] = hi[d].max(it.p[d]);
        }
    }
    (lo, hi)
}

/// The axes to bisect for a box `lo..hi` of `count` particles (see the module documentation);
/// none when the box is a point.
pub fn split_axes(lo: [f64; 3], hi: [f64; 3], count: usize, max_leaf: usize) -> [bool; 3] {
    let l = [0, 1, 2].map(|d| hi[d] - lo[d]);
    let lmax = l[0].max(l[1]).max(l[2]);
    if lmax <= 0.0 {
        return [false; 3];
    }
    let crit = lmax / std::f64::consts::SQRT_2;
    let mut axes = [0, 1, 2].map(|d| l[d] > 0.0 && l[d] >= crit);
    let max_children = if count < 2 * max_leaf {
        2
    } else if count < 4 * max_leaf {
        4
    } else {
        8
    };
    if max_children <= 4 && axes.iter().all(|&a| a) {
        // drop the strictly shortest axis, x when none is
        let shortest = (0..3).min_by(|&a, &b| l[a].total_cmp(&l[b])).unwrap_or(0);
        let strictly = (0..3).filter(|&d| d != shortest).all(|d| l[d] > l[shortest]);
        axes[if strictly { shortest } else { 0 }] = false;
    }
    if max_children == 2 {
        // only the longest (the first of equals)
        let longest = (0..3).find(|&d| l[d] == lmax).unwrap_or(0);
        axes = [0, 1, 2].map(|d| d == longest);
    }
    axes
}
