//! The downward pass (BLDTT paper §2.7, eqs. (20)-(21); digest §1.4): the proxy potentials that
//! CP and CC left on target clusters are carried from each cluster to its children's proxies
//! and, at the leaves, interpolated to the targets.
//!
//! - Parent to child, eq. (20): `phi(t'_k') += sum_k L_k(t'_k') phi(t_k)`, the parent's basis at
//!   the child's proxies: the transpose of the upward pass's child-to-parent operator, applied
//!   one axis at a time with the same factors `A_d` (`3 (n + 1)^4` multiply-adds per child and
//!   value component).
//! - Leaves, eq. (21): `phi(x_i) += sum_k L_k1(x_i^1) L_k2(x_i^2) L_k3(x_i^3) phi(t_k)`.
//!
//! Only clusters that received a potential, or whose ancestor did, take part.

use parki_core::par::DisjointSlice;
use parki_core::Par;

use crate::cheb::AxisNodes;
use crate::tree::Tree;
use crate::upward::{for_each_with_scratch, transfer_matrices, TransferScratch};

/// Adds the parent's proxy potentials `phi` (`nv` values per proxy, flat index
/// `k1 + m (k2 + m k3)`, values innermost), carried to the child's proxies by eq. (20), into
/// `out`; `s.a` holds the factors of [`transfer_matrices`] for this pair.
fn parent_to_child(m: usize, nv: usize, phi: &[f64], s: &mut TransferScratch, out: &mut [f64]) {
    let row = m * nv;
    // x: t1[k3][k2][k1'][v] = sum_k1 Ax[k1][k1'] phi[k3][k2][k1][v]
    for r in 0..m * m {
        let src = &phi[r * row..(r + 1) * row];
        let dst = &mut s.t1[r * row..(r + 1) * row];
        dst.fill(0.0);
        for k1 in 0..m {
            let arow = &s.a[0][k1 * m..(k1 + 1) * m];
            let sv = &src[k1 * nv..(k1 + 1) * nv];
            for (kp, &a) in arow.iter().enumerate() {
                for v in 0..nv {
                    dst[kp * nv + v] = a.mul_add(sv[v], dst[kp * nv + v]);
                }
            }
        }
    }
    // y: t2[k3][k2'][k1'][v] = sum_k2 Ay[k2][k2'] t1[k3][k2][k1'][v]
    for k3 in 0..m {
        let plane = k3 * m * row;
        s.t2[plane..plane + m * row].fill(0.0);
        for k2 in 0..m {
            let src = plane + k2 * row;
            for k2p in 0..m {
                let a = s.a[1][k2 * m + k2p];
                let dst = plane + k2p * row;
                for i in 0..row {
                    s.t2[dst + i] = a.mul_add(s.t1[src + i], s.t2[dst + i]);
                }
            }
        }
    }
    // z: out[k3'][k2'][k1'][v] += sum_k3 Az[k3][k3'] t2[k3][k2'][k1'][v]
    let plane = m * row;
    for k3 in 0..m {
        let src = &s.t2[k3 * plane..(k3 + 1) * plane];
        for k3p in 0..m {
            let a = s.a[2][k3 * m + k3p];
            for (o, &v) in out[k3p * plane..(k3p + 1) * plane].iter_mut().zip(src) {
                *o = a.mul_add(v, *o);
            }
        }
    }
}

/// Adds, for the targets `x[i]`, `y[i]`, `z[i]` of a leaf, the interpolant of the leaf's proxy
/// potentials `phi` (eq. (21)) into `out` (`nv` values per target).
fn interpolate(
    nodes: &[AxisNodes; 3],
    nv: usize,
    phi: &[f64],
    xyz: [&[f64]; 3],
    l: &mut [Vec<f64>; 3],
    out: &mut [f64],
) {
    let m = nodes[0].degree() + 1;
    let mut acc = [0.0f64; crate::kernel::MAX_VALUE];
    for i in 0..xyz[0].len() {
        for d in 0..3 {
            nodes[d].basis(xyz[d][i], &mut l[d]);
        }
        acc[..nv].fill(0.0);
        for (k3, &lz) in l[2].iter().enumerate() {
            if lz == 0.0 {
                continue;
            }
            for (k2, &ly) in l[1].iter().enumerate() {
                let lyz = ly * lz;
                if lyz == 0.0 {
                    continue;
                }
                let row = &phi[(k3 * m + k2) * m * nv..(k3 * m + k2 + 1) * m * nv];
                for (k1, &lx) in l[0].iter().enumerate() {
                    let w = lx * lyz;
                    for v in 0..nv {
                        acc[v] = w.mul_add(row[k1 * nv + v], acc[v]);
                    }
                }
            }
        }
        for v in 0..nv {
            out[i * nv + v] += acc[v];
        }
    }
}

/// Marks every cluster below an active one active: the clusters the downward pass visits.
pub(crate) fn propagate_active(tree: &Tree, active: &mut [bool]) {
    // pre-order: a parent precedes its children
    for c in 0..tree.clusters.len() {
        if let Some(p) = tree.clusters[c].parent {
            active[c] |= active[p];
        }
    }
}

/// The downward pass over the target `tree` with proxy `nodes` per cluster: `potentials` holds
/// `(n + 1)^3 nv` values per cluster (CP and CC results), `active[c]` whether cluster `c` has
/// any; both are updated on the way down. The leaves' interpolants at the targets (`xyz`, in
/// tree order) are added to `out` (tree order, `nv` per target).
#[allow(clippy::too_many_arguments)]
pub(crate) fn downward_pass(
    tree: &Tree,
    nodes: &[[AxisNodes; 3]],
    nv: usize,
    potentials: &mut [f64],
    active: &mut [bool],
    xyz: [&[f64]; 3],
    out: &mut [f64],
    par: Par,
) {
    let m = nodes[0][0].degree() + 1;
    let block = m * m * m * nv;
    propagate_active(tree, active);
    for level in &tree.levels {
        let writer = DisjointSlice::new(potentials);
        let work = |s: &mut TransferScratch, &c: &usize| {
            let cl = &tree.clusters[c];
            if !active[c] || cl.is_leaf() {
                return;
            }
            // SAFETY: cluster c's block is read by this task only; its children's blocks (one level
            // deeper, each child with one parent) are written by this task only.
            let phi = unsafe { writer.range_mut(c * block, (c + 1) * block) };
            for &ch in &cl.children {
                transfer_matrices(&nodes[c], &nodes[ch], &mut s.basis, &mut s.a);
                // SAFETY: as above.
                let child = unsafe { writer.range_mut(ch * block, (ch + 1) * block) };
                parent_to_child(m, nv, phi, s, child);
            }
        };
        for_each_with_scratch(par, level, m, nv, work);
    }
    let writer = DisjointSlice::new(out);
    let potentials = &*potentials;
    let leaf = |s: &mut TransferScratch, &c: &usize| {
        let cl = &tree.clusters[c];
        if !active[c] {
            return;
        }
        // SAFETY: leaves own disjoint particle ranges.
        let o = unsafe { writer.range_mut(cl.begin * nv, cl.end * nv) };
        let pts = xyz.map(|a| &a[cl.begin..cl.end]);
        interpolate(&nodes[c], nv, &potentials[c * block..(c + 1) * block], pts, &mut s.l, o);
    };
    for_each_with_scratch(par, &tree.leaves, m, nv, leaf);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::TreeParams;
    use crate::upward::cluster_nodes;

    /// The recursive pass (eqs. (20)-(21)) equals the direct multilevel sum (eq. (19)): every
    /// target gets the interpolant of each of its ancestors' potentials at its position.
    #[test]
    fn recursive_equals_multilevel_sum() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let pts: Vec<[f64; 3]> = (0..3000).map(|_| [next(), next() * 0.5, next().powi(3)]).collect();
        let tree = Tree::build(&pts, TreeParams { max_leaf: 40 });
        let (n, nv) = (4, 3);
        let block = (n + 1usize).pow(3) * nv;
        let nodes: Vec<[AxisNodes; 3]> = tree.clusters.iter().map(|c| cluster_nodes(n, c)).collect();
        let mut pot: Vec<f64> = (0..tree.clusters.len() * block).map(|_| next() - 0.5).collect();
        // some clusters carry nothing
        let active: Vec<bool> = (0..tree.clusters.len()).map(|c| c % 3 != 1).collect();
        for c in 0..tree.clusters.len() {
            if !active[c] {
                pot[c * block..(c + 1) * block].fill(0.0);
            }
        }
        let direct_pot = pot.clone();
        let sorted: Vec<[f64; 3]> = tree.order.iter().map(|&i| pts[i as usize]).collect();
        let xyz: [Vec<f64>; 3] = [0, 1, 2].map(|d| sorted.iter().map(|p| p[d]).collect());
        for par in [Par::Seq, Par::Rayon(2)] {
            let (mut p, mut a) = (pot.clone(), active.clone());
            let mut out = vec![0.0; pts.len() * nv];
            downward_pass(&tree, &nodes, nv, &mut p, &mut a, [&xyz[0], &xyz[1], &xyz[2]], &mut out, par);
            let mut l = [vec![0.0; n + 1], vec![0.0; n + 1], vec![0.0; n + 1]];
            let mut worst: f64 = 0.0;
            for &leaf in &tree.leaves {
                let cl = &tree.clusters[leaf];
                for i in cl.begin..cl.end {
                    let mut expect = vec![0.0; nv];
                    let mut c = Some(leaf);
                    while let Some(cc) = c {
                        let pt = [&xyz[0][i..=i], &xyz[1][i..=i], &xyz[2][i..=i]];
                        interpolate(&nodes[cc], nv, &direct_pot[cc * block..(cc + 1) * block], pt, &mut l, &mut expect);
                        c = tree.clusters[cc].parent;
                    }
                    for v in 0..nv {
                        worst = worst.max((out[i * nv + v] - expect[v]).abs());
                    }
                }
            }
            assert!(worst < 1e-12, "{par:?}: recursive and multilevel sums differ by {worst:.3e}");
        }
    }
}
