//! The four interaction lists applied to one target tree from one source side (BLDTT paper
//! §2.4, eqs. (6), (8), (12), (15)), and the downward pass that ends an evaluation.
//!
//! A [`SourceSide`] is any set of source clusters that lists refer to by index: the local tree
//! (particles in tree order, proxies of its clusters) or the clusters fetched from other ranks
//! (the locally essential tree). The target side ([`TargetSide`]) and its accumulators
//! ([`Accumulators`]) are shared by every source side, so the local and the remote lists add
//! into one set of target potentials and proxy potentials, and one downward pass follows.

use parki_core::isa::Isa;
use parki_core::par::DisjointSlice;
use parki_core::Par;
use rayon::prelude::{IntoParallelIterator, ParallelIterator};

use crate::cheb::AxisNodes;
use crate::compute::{accumulate, Csr, Soa};
use crate::downward::downward_pass;
use crate::kernel::PairKernel;
use crate::traversal::Interactions;
use crate::tree::Tree;
use crate::upward::cluster_nodes;

/// The targets in tree order, their tree and the proxy nodes of its clusters.
pub(crate) struct TargetSide {
    pub tree: Tree,
    pub points: Soa,
    pub nodes: Vec<[AxisNodes; 3]>,
    leaf_begins: Vec<usize>,
    pub np: usize,
}

impl TargetSide {
    /// The target side of `tree` over `targets` (input order) at degree `n` (the targets
    /// gathered into tree order over the threads with `par`).
    pub fn new(tree: Tree, targets: &[[f64; 3]], n: usize, par: Par) -> Self {
        let points = crate::evaluate::tree_order(&tree, targets, &[], 0, par);
        let nodes: Vec<[AxisNodes; 3]> = tree.clusters.iter().map(|c| cluster_nodes(n, c)).collect();
        let leaf_begins = tree.leaves.iter().map(|&l| tree.clusters[l].begin).collect();
        Self { tree, points, nodes, leaf_begins, np: (n + 1).pow(3) }
    }
}

/// What the lists add into: target potentials (tree order) and the target clusters' proxy
/// potentials with their active flags.
pub(crate) struct Accumulators {
    pub out: Vec<f64>,
    pub potentials: Vec<f64>,
    pub active: Vec<bool>,
    nv: usize,
}

impl Accumulators {
    /// Zeros for `nv` values per target and per proxy of every cluster of `ts`.
    pub fn new(ts: &TargetSide, nv: usize) -> Self {
        let nc = ts.tree.clusters.len();
        Self {
            out: vec![0.0; ts.points.len() * nv],
            potentials: vec![0.0; nc * ts.np * nv],
            active: vec![false; nc],
            nv,
        }
    }

    /// The downward pass, then the values in the targets' input order.
    pub fn finish(mut self, ts: &TargetSide, par: Par) -> Vec<f64> {
        let nv = self.nv;
        let n = ts.points.len();
        downward_pass(
            &ts.tree,
            &ts.nodes,
            nv,
            &mut self.potentials,
            &mut self.active,
            ts.points.xyz(0, n),
            &mut self.out,
            par,
        );
        in_input_order(&ts.tree, &self.out, nv)
    }
}

/// Values in tree order (`nv` per point) put back in the input order of `tree`'s points.
pub(crate) fn in_input_order(tree: &Tree, v: &[f64], nv: usize) -> Vec<f64> {
    let mut out = vec![0.0; v.len()];
    for (k, &i) in tree.order.iter().enumerate() {
        let i = i as usize;
        out[i * nv..(i + 1) * nv].copy_from_slice(&v[k * nv..(k + 1) * nv]);
    }
    out
}

/// Sources that lists refer to by cluster index: `ranges[s]`, cluster `s`'s particles in
/// `particles`; `slots[s]`, its block of proxies in `proxies` (`usize::MAX` when it has none).
pub(crate) struct SourceSide {
    pub particles: Soa,
    pub ranges: Vec<(usize, usize)>,
    pub proxies: Soa,
    pub slots: Vec<usize>,
}

/// Proxy points of the clusters with `nodes`, block `i` for `nodes[i]`, and their charges
/// (`charges(i)`: `(n + 1)^3 ncomp` values, components innermost) stored component-major.
pub(crate) fn proxy_soa<'a>(
    nodes: &[&[AxisNodes; 3]],
    np: usize,
    ncomp: usize,
    charges: impl Fn(usize) -> Option<&'a [f64]>,
) -> Soa {
    let len = nodes.len() * np;
    let mut soa = Soa::zeroed(len, ncomp);
    for (slot, nd) in nodes.iter().enumerate() {
        let m = nd[0].s.len();
        for k3 in 0..m {
            for k2 in 0..m {
                for k1 in 0..m {
                    let k = k1 + m * (k2 + m * k3);
                    let i = slot * np + k;
                    soa.x[i] = nd[0].s[k1];
                    soa.y[i] = nd[1].s[k2];
                    soa.z[i] = nd[2].s[k3];
                }
            }
        }
        if let Some(q) = charges(slot) {
            for k in 0..np {
                for comp in 0..ncomp {
                    soa.q[comp * len + slot * np + k] = q[k * ncomp + comp];
                }
            }
        }
    }
    soa
}

/// Clusters listed (as the first element when `target`, else the second) in `lists`, sorted,
/// and the map from cluster to its place among them (`usize::MAX` for the others).
pub(crate) fn used_clusters(n: usize, lists: &[&[(u32, u32)]], target: bool) -> (Vec<usize>, Vec<usize>) {
    let mut slot = vec![usize::MAX; n];
    let mut mark = vec![false; n];
    for l in lists {
        for &(t, s) in l.iter() {
            mark[if target { t } else { s } as usize] = true;
        }
    }
    let used: Vec<usize> = (0..n).filter(|&c| mark[c]).collect();
    for (i, &c) in used.iter().enumerate() {
        slot[c] = i;
    }
    (used, slot)
}

/// One source side's four lists as work items: PP and PC by target leaf (an entry above the
/// leaves goes to each leaf below it), CP and CC by used target cluster (`tused`, sorted), each
/// entry a block of the side's particles (`ranges`) or proxies (block `slots[s]` of `np`).
pub(crate) struct PlannedLists {
    pub pp: Csr,
    pub pc: Csr,
    pub cp: Csr,
    pub cc: Csr,
    pub tused: Vec<usize>,
}

/// The work items of `lists` against a source side whose cluster `s` has particles
/// `ranges[s]` and proxy block `slots[s]`.
pub(crate) fn plan_lists(
    ts: &TargetSide,
    lists: &Interactions,
    ranges: &[(usize, usize)],
    slots: &[usize],
) -> PlannedLists {
    let np = ts.np;
    let tree = &ts.tree;
    let (tused, tslot) = used_clusters(tree.clusters.len(), &[&lists.cp, &lists.cc], true);
    let by_leaf = |list: &[(u32, u32)], range: &dyn Fn(usize) -> (usize, usize)| -> Csr {
        let mut pairs = Vec::with_capacity(list.len());
        for &(t, s) in list {
            let cl = &tree.clusters[t as usize];
            let first = ts.leaf_begins.partition_point(|&b| b < cl.begin);
            let last = ts.leaf_begins.partition_point(|&b| b < cl.end);
            for leaf in first..last {
                pairs.push((leaf, range(s as usize)));
            }
        }
        Csr::from_pairs(tree.leaves.len(), pairs)
    };
    let particles = |s: usize| ranges[s];
    let proxy_block = |s: usize| (slots[s] * np, (slots[s] + 1) * np);
    let by_cluster = |list: &[(u32, u32)], range: &dyn Fn(usize) -> (usize, usize)| -> Csr {
        Csr::from_pairs(tused.len(), list.iter().map(|&(t, s)| (tslot[t as usize], range(s as usize))).collect())
    };
    PlannedLists {
        pp: by_leaf(&lists.pp, &particles),
        pc: by_leaf(&lists.pc, &proxy_block),
        cp: by_cluster(&lists.cp, &particles),
        cc: by_cluster(&lists.cc, &proxy_block),
        tused,
    }
}

/// Adds the PP, PC, CP and CC sums of `lists` (target clusters of `ts`, source clusters of
/// `side`) into `acc`, the work items of [`plan_lists`] in parallel under `par`.
pub(crate) fn apply_lists<K: PairKernel>(
    kernel: &K,
    ts: &TargetSide,
    lists: &Interactions,
    side: &SourceSide,
    acc: &mut Accumulators,
    par: Par,
    isa: Isa,
) {
    let (np, nv) = (ts.np, acc.nv);
    let tree = &ts.tree;
    let PlannedLists { pp, pc, cp, cc, tused } = plan_lists(ts, lists, &side.ranges, &side.slots);
    let tnodes: Vec<&[AxisNodes; 3]> = tused.iter().map(|&c| &ts.nodes[c]).collect();
    let tprox = proxy_soa(&tnodes, np, 0, |_| None);

    {
        let writer = DisjointSlice::new(&mut acc.out);
        let leaf = |i: usize| {
            let cl = &tree.clusters[tree.leaves[i]];
            // SAFETY: leaves own disjoint target ranges.
            let o = unsafe { writer.range_mut(cl.begin * nv, cl.end * nv) };
            let xyz = ts.points.xyz(cl.begin, cl.end);
            accumulate(isa, kernel, xyz, &side.particles, pp.of(i), o);
            accumulate(isa, kernel, xyz, &side.proxies, pc.of(i), o);
        };
        run(par, tree.leaves.len(), leaf);
    }
    let block = np * nv;
    {
        let writer = DisjointSlice::new(&mut acc.potentials);
        let cluster = |i: usize| {
            let c = tused[i];
            // SAFETY: each target cluster's proxy block is written by its own task.
            let o = unsafe { writer.range_mut(c * block, (c + 1) * block) };
            let xyz = tprox.xyz(i * np, (i + 1) * np);
            accumulate(isa, kernel, xyz, &side.particles, cp.of(i), o);
            accumulate(isa, kernel, xyz, &side.proxies, cc.of(i), o);
        };
        run(par, tused.len(), cluster);
    }
    for &c in &tused {
        acc.active[c] = true;
    }
}

/// Runs `f(i)` for `i < n`, on rayon's threads unless `par` is sequential.
pub(crate) fn run(par: Par, n: usize, f: impl Fn(usize) + Sync + Send) {
    match par {
        Par::Seq => (0..n).for_each(f),
        Par::Rayon(_) => (0..n).into_par_iter().for_each(f),
    }
}
