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
    /// Builds the tree of `positions` (finite; not empty) with `params`.
    ///
    /// Panics if `positions` is empty or `max_leaf` is 0 (the callers validate both).
    pub fn build(positions: &[[f64; 3]], params: TreeParams) -> Self {
        assert!(!positions.is_empty(), "a tree needs at least one particle");
        assert!(params.max_leaf > 0, "max_leaf must be positive");
        assert!(positions.len() <= u32::MAX as usize, "at most 2^32 - 1 particles per tree");
        let mut order: Vec<u32> = (0..positions.len() as u32).collect();
        let mut t = Tree { clusters: Vec::new(), order: Vec::new(), levels: Vec::new(), leaves: Vec::new() };
        let mut scratch = Vec::with_capacity(positions.len());
        t.split(positions, &mut order, 0, positions.len(), 0, None, params, &mut scratch);
        t.order = order;
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

    /// Creates the cluster of `order[begin..end]` and, if it is to be split, its subtree;
    /// returns its index.
    #[allow(clippy::too_many_arguments)]
    fn split(
        &mut self,
        pos: &[[f64; 3]],
        order: &mut [u32],
        begin: usize,
        end: usize,
        level: usize,
        parent: Option<usize>,
        params: TreeParams,
        scratch: &mut Vec<u32>,
    ) -> usize {
        let (lo, hi) = bounding_box(pos, &order[begin..end]);
        let me = self.clusters.len();
        self.clusters.push(Cluster { begin, end, lo, hi, level, parent, children: Vec::new() });
        let count = end - begin;
        if count <= params.max_leaf {
            return me;
        }
        let axes = split_axes(lo, hi, count, params.max_leaf);
        if !axes.iter().any(|&a| a) {
            // every particle at one point: nothing to bisect
            return me;
        }
        let mid = [0, 1, 2].map(|d| 0.5 * (lo[d] + hi[d]));
        let code = |j: u32| -> usize {
            let p = &pos[j as usize];
            (0..3).filter(|&d| axes[d] && p[d] >= mid[d]).map(|d| 1 << d).sum()
        };
        // stable counting sort of the range by child code
        let mut counts = [0usize; 8];
        for &j in &order[begin..end] {
            counts[code(j)] += 1;
        }
        let mut start = [0usize; 9];
        for b in 0..8 {
            start[b + 1] = start[b] + counts[b];
        }
        scratch.clear();
        scratch.resize(count, 0);
        let mut fill = start;
        for &j in &order[begin..end] {
            let b = code(j);
            scratch[fill[b]] = j;
            fill[b] += 1;
        }
        order[begin..end].copy_from_slice(scratch);
        let mut children = Vec::new();
        for b in 0..8 {
            if counts[b] > 0 {
                let child = self.split(
                    pos,
                    order,
                    begin + start[b],
                    begin + start[b + 1],
                    level + 1,
                    Some(me),
                    params,
                    scratch,
                );
                children.push(child);
            }
        }
        self.clusters[me].children = children;
        me
    }
}

/// Minimal bounding box of the points `idx` of `pos`.
fn bounding_box(pos: &[[f64; 3]], idx: &[u32]) -> ([f64; 3], [f64; 3]) {
    let mut lo = [f64::INFINITY; 3];
    let mut hi = [f64::NEG_INFINITY; 3];
    for &j in idx {
        let p = &pos[j as usize];
        for d in 0..3 {
            lo[d] = lo[d].min(p[d]);
            hi[d] = hi[d].max(p[d]);
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
