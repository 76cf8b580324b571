//! The upward pass: proxy charges of every cluster (BLDTT paper §2.5, eqs. (9) and (16)).
//!
//! A cluster's proxy particles are the tensor grid of its box's Chebyshev nodes
//! ([`crate::cheb`]), `(n + 1)^3` of them, flat index `k1 + (n + 1) (k2 + (n + 1) k3)` (x
//! fastest), with `ncomp` charge components each (1 for Coulomb-type kernels, 3 for the
//! Stokeslet's forces, ...), components innermost.
//!
//! - Leaves, eq. (9): `q^_k = sum_j L_k1(y_j^1) L_k2(y_j^2) L_k3(y_j^3) q_j`.
//! - Parents, eq. (16): `q^_k = sum_children sum_k' L_k(s'_k') q^'_k'`, the parent's basis at the
//!   child's proxies. That operator is the tensor product of three `(n + 1) x (n + 1)` matrices
//!   `A_d[k][k'] = L_k(s'_{d,k'})`, applied one axis at a time: `3 (n + 1)^4` multiply-adds per
//!   child and component instead of the paper's `(n + 1)^6` (digest §1.3, "\[I\] optimisation").
//!   Exact: a child's interpolant of the parent's degree-`n` basis polynomials is the
//!   polynomial itself (eq. (17)), so the result equals anterpolating the parent's particles
//!   directly, to rounding.

use parki_core::par::DisjointSlice;
use parki_core::Par;
use rayon::prelude::{IntoParallelRefIterator, ParallelIterator};

use crate::cheb::AxisNodes;
use crate::tree::{Cluster, Tree};

/// The proxies of every cluster of a tree: their nodes and charges.
#[derive(Clone, Debug)]
pub struct ProxyCharges {
    /// Interpolation degree `n`.
    pub degree: usize,
    /// Charge components per proxy.
    pub ncomp: usize,
    /// The nodes of each cluster's box, per axis.
    pub nodes: Vec<[AxisNodes; 3]>,
    /// Charges: cluster `c`'s block of `(n + 1)^3 ncomp` values at `c (n + 1)^3 ncomp`.
    pub charges: Vec<f64>,
}

impl ProxyCharges {
    /// Values per cluster.
    pub fn block(&self) -> usize {
        (self.degree + 1).pow(3) * self.ncomp
    }

    /// Cluster `c`'s charges.
    pub fn of(&self, c: usize) -> &[f64] {
        let b = self.block();
        &self.charges[c * b..(c + 1) * b]
    }
}

/// The nodes of degree `n` on a cluster's box.
pub fn cluster_nodes(n: usize, c: &Cluster) -> [AxisNodes; 3] {
    [0, 1, 2].map(|d| AxisNodes::new(n, c.lo[d], c.hi[d]))
}

/// Anterpolates particles onto proxies, eq. (9): adds `L_k(y_j) q_j` into `out`
/// (`(n + 1)^3 ncomp` values) for the points `idx` of `pos` with charges `q` (`ncomp` per
/// particle, input order).
pub fn anterpolate(nodes: &[AxisNodes; 3], pos: &[[f64; 3]], q: &[f64], ncomp: usize, idx: &[u32], out: &mut [f64]) {
    let m = nodes[0].degree() + 1;
    let mut l = [vec![0.0; m], vec![0.0; m], vec![0.0; m]];
    anterpolate_with(nodes, pos, q, ncomp, idx, &mut l, out);
}

/// [`anterpolate`] with the three per-axis basis buffers (`n + 1` values each) given.
fn anterpolate_with(
    nodes: &[AxisNodes; 3],
    pos: &[[f64; 3]],
    q: &[f64],
    ncomp: usize,
    idx: &[u32],
    l: &mut [Vec<f64>; 3],
    out: &mut [f64],
) {
    let m = nodes[0].degree() + 1;
    assert_eq!(out.len(), m * m * m * ncomp, "proxy block length");
    for &j in idx {
        let j = j as usize;
        for d in 0..3 {
            nodes[d].basis(pos[j][d], &mut l[d]);
        }
        let qj = &q[j * ncomp..(j + 1) * ncomp];
        for (k3, &lz) in l[2].iter().enumerate() {
            if lz == 0.0 {
                continue;
            }
            for (k2, &ly) in l[1].iter().enumerate() {
                let lyz = ly * lz;
                if lyz == 0.0 {
                    continue;
                }
                let row = &mut out[(k3 * m + k2) * m * ncomp..(k3 * m + k2 + 1) * m * ncomp];
                for (k1, &lx) in l[0].iter().enumerate() {
                    let w = lx * lyz;
                    for (o, &qc) in row[k1 * ncomp..(k1 + 1) * ncomp].iter_mut().zip(qj) {
                        *o = w.mul_add(qc, *o);
                    }
                }
            }
        }
    }
}

/// Scratch of one worker of either pass: the transfer matrices and two partial sums of the
/// child-parent operator, and the per-axis basis values of anterpolation and interpolation.
pub(crate) struct TransferScratch {
    pub(crate) a: [Vec<f64>; 3],
    pub(crate) t1: Vec<f64>,
    pub(crate) t2: Vec<f64>,
    pub(crate) basis: Vec<f64>,
    pub(crate) l: [Vec<f64>; 3],
}

impl TransferScratch {
    /// For degree `m - 1` and `ncomp` values per proxy.
    pub(crate) fn new(m: usize, ncomp: usize) -> Self {
        let v = m * m * m * ncomp;
        Self {
            a: [vec![0.0; m * m], vec![0.0; m * m], vec![0.0; m * m]],
            t1: vec![0.0; v],
            t2: vec![0.0; v],
            basis: vec![0.0; m],
            l: [vec![0.0; m], vec![0.0; m], vec![0.0; m]],
        }
    }
}

/// Runs `work` on every item of `items` with a [`TransferScratch`] per worker (`m`, `ncomp` as
/// [`TransferScratch::new`]), on `par`'s threads.
pub(crate) fn for_each_with_scratch<T: Sync>(
    par: Par,
    items: &[T],
    m: usize,
    ncomp: usize,
    work: impl Fn(&mut TransferScratch, &T) + Sync + Send,
) {
    match par {
        Par::Seq => {
            let mut s = TransferScratch::new(m, ncomp);
            items.iter().for_each(|c| work(&mut s, c));
        }
        Par::Rayon(_) => items.par_iter().for_each_init(|| TransferScratch::new(m, ncomp), work),
    }
}

/// The per-axis factors of the child-to-parent operator, `A_d[k][k'] = L^parent_k(s^child_{d,k'})`
/// (row `k`, `(n + 1)^2` values per axis), with `basis` as scratch (`n + 1` values). The
/// downward pass applies their transposes (eq. (20)).
pub(crate) fn transfer_matrices(
    parent: &[AxisNodes; 3],
    child: &[AxisNodes; 3],
    basis: &mut [f64],
    a: &mut [Vec<f64>; 3],
) {
    let m = parent[0].degree() + 1;
    for d in 0..3 {
        for (kp, &x) in child[d].s.iter().enumerate() {
            parent[d].basis(x, basis);
            for k in 0..m {
                a[d][k * m + kp] = basis[k];
            }
        }
    }
}

/// Adds a child's proxy charges `child_q` (on `child`'s nodes), transferred to `parent`'s
/// proxies, eq. (16), into `out`: the tensor-factored operator, one axis at a time.
fn child_to_parent(
    parent: &[AxisNodes; 3],
    child: &[AxisNodes; 3],
    child_q: &[f64],
    ncomp: usize,
    s: &mut TransferScratch,
    out: &mut [f64],
) {
    let m = parent[0].degree() + 1;
    transfer_matrices(parent, child, &mut s.basis, &mut s.a);
    let nc = ncomp;
    // x: t1[k3'][k2'][k1][c] = sum_k1' Ax[k1][k1'] q[k3'][k2'][k1'][c]
    for r in 0..m * m {
        let src = &child_q[r * m * nc..(r + 1) * m * nc];
        let dst = &mut s.t1[r * m * nc..(r + 1) * m * nc];
        dst.fill(0.0);
        for k1 in 0..m {
            let arow = &s.a[0][k1 * m..(k1 + 1) * m];
            for (kp, &a) in arow.iter().enumerate() {
                for c in 0..nc {
                    dst[k1 * nc + c] = a.mul_add(src[kp * nc + c], dst[k1 * nc + c]);
                }
            }
        }
    }
    // y: t2[k3'][k2][k1][c] = sum_k2' Ay[k2][k2'] t1[k3'][k2'][k1][c]
    let row = m * nc;
    for k3p in 0..m {
        let plane = k3p * m * row;
        for k2 in 0..m {
            let dst = plane + k2 * row;
            s.t2[dst..dst + row].fill(0.0);
            for k2p in 0..m {
                let a = s.a[1][k2 * m + k2p];
                let src = plane + k2p * row;
                for i in 0..row {
                    s.t2[dst + i] = a.mul_add(s.t1[src + i], s.t2[dst + i]);
                }
            }
        }
    }
    // z: out[k3][k2][k1][c] += sum_k3' Az[k3][k3'] t2[k3'][k2][k1][c]
    let plane = m * row;
    for k3 in 0..m {
        for k3p in 0..m {
            let a = s.a[2][k3 * m + k3p];
            let (dst, src) = (&mut out[k3 * plane..(k3 + 1) * plane], &s.t2[k3p * plane..(k3p + 1) * plane]);
            for (o, &v) in dst.iter_mut().zip(src) {
                *o = a.mul_add(v, *o);
            }
        }
    }
}

/// The upward pass over `tree`: degree-`n` proxy charges of every cluster, from the particles
/// `pos` with `ncomp` charge components each (`q`, input order); leaves by anterpolation,
/// parents from their children, level by level from the deepest, the clusters of a level on
/// `par`'s threads.
pub fn upward_pass(tree: &Tree, pos: &[[f64; 3]], q: &[f64], ncomp: usize, n: usize, par: Par) -> ProxyCharges {
    assert_eq!(q.len(), pos.len() * ncomp, "ncomp charges per particle");
    let m = n + 1;
    let block = m * m * m * ncomp;
    let nodes: Vec<[AxisNodes; 3]> = tree.clusters.iter().map(|c| cluster_nodes(n, c)).collect();
    let mut charges = vec![0.0; tree.clusters.len() * block];
    for level in tree.levels.iter().rev() {
        let writer = DisjointSlice::new(&mut charges);
        let work = |s: &mut TransferScratch, &c: &usize| {
            let cl = &tree.clusters[c];
            // SAFETY: cluster c owns block c; each cluster of the level is visited once, and its
            // children (one level deeper, finished) are only read.
            let out = unsafe { writer.range_mut(c * block, (c + 1) * block) };
            out.fill(0.0);
            if cl.is_leaf() {
                anterpolate_with(&nodes[c], pos, q, ncomp, &tree.order[cl.begin..cl.end], &mut s.l, out);
            } else {
                for &ch in &cl.children {
                    // SAFETY: read-only view of a child's block, written in the previous level
                    // and disjoint from every block of this level.
                    let child_q = unsafe { writer.range_mut(ch * block, (ch + 1) * block) };
                    child_to_parent(&nodes[c], &nodes[ch], child_q, ncomp, s, out);
                }
            }
        };
        for_each_with_scratch(par, level, m, ncomp, work);
    }
    ProxyCharges { degree: n, ncomp, nodes, charges }
}
