//! The dual tree traversal (BLDTT paper §2.6, Algorithm 2; digest §1.5): every pair of a target
//! cluster and a source cluster that the traversal reaches is either well separated by the MAC
//! `(r_t + r_s) < theta R` (radii half the box diagonals, `R` the distance of the centres) and
//! then approximated, or split.
//!
//! A well-separated pair becomes one of four interactions by the clusters' particle counts
//! against the `n_p = (n + 1)^3` proxies (the cheapest of the four in kernel evaluations):
//! CC if both hold more than `n_p` particles, CP if only the target does, PC if only the
//! source does, PP if neither. A pair that is not well separated is PP if both are leaves;
//! else the target is split if the source is a leaf, the source if the target is, and
//! otherwise the one with more particles (the source on a tie).
//!
//! The result is four flat lists of `(target cluster, source cluster)` pairs, each sorted by
//! target cluster, so that an evaluation runs over target clusters in parallel and writes
//! disjoint outputs.

use crate::tree::Tree;

/// The interaction lists of a traversal.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Interactions {
    /// Particle-particle: direct sums.
    pub pp: Vec<(u32, u32)>,
    /// Particle-cluster: targets' particles against the source's proxies.
    pub pc: Vec<(u32, u32)>,
    /// Cluster-particle: the target's proxies against the source's particles.
    pub cp: Vec<(u32, u32)>,
    /// Cluster-cluster: proxies against proxies.
    pub cc: Vec<(u32, u32)>,
}

/// What the traversal decided for one pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interaction {
    /// Direct sum.
    Pp,
    /// Source proxies.
    Pc,
    /// Target proxies.
    Cp,
    /// Both proxies.
    Cc,
}

/// The MAC: `(r_t + r_s) < theta R`, strict (BaryTree's form, no division).
#[inline]
pub fn well_separated(rt: f64, rs: f64, ct: [f64; 3], cs: [f64; 3], theta: f64) -> bool {
    let r2: f64 = (0..3).map(|d| (ct[d] - cs[d]).powi(2)).sum();
    rt + rs < theta * r2.sqrt()
}

/// The interaction of a well-separated pair of clusters with `nt` and `ns` particles for
/// `np` proxies per cluster.
#[inline]
pub fn approximation(nt: usize, ns: usize, np: usize) -> Interaction {
    match (nt > np, ns > np) {
        (true, true) => Interaction::Cc,
        (true, false) => Interaction::Cp,
        (false, true) => Interaction::Pc,
        (false, false) => Interaction::Pp,
    }
}

impl Interactions {
    /// The traversal of `targets` against `sources` with the MAC parameter `theta` (0 < theta
    /// < 1 in practice; 0 gives the direct sum) and `np` proxies per cluster.
    pub fn build(targets: &Tree, sources: &Tree, theta: f64, np: usize) -> Self {
        let mut out = Interactions::default();
        let geo = |t: &Tree| -> Vec<([f64; 3], f64)> { t.clusters.iter().map(|c| (c.centre(), c.radius())).collect() };
        let (gt, gs) = (geo(targets), geo(sources));
        let mut stack: Vec<(u32, u32)> = vec![(0, 0)];
        while let Some((t, s)) = stack.pop() {
            let (ct, cs) = (&targets.clusters[t as usize], &sources.clusters[s as usize]);
            let ((xt, rt), (xs, rs)) = (gt[t as usize], gs[s as usize]);
            if well_separated(rt, rs, xt, xs, theta) {
                let list = match approximation(ct.count(), cs.count(), np) {
                    Interaction::Pp => &mut out.pp,
                    Interaction::Pc => &mut out.pc,
                    Interaction::Cp => &mut out.cp,
                    Interaction::Cc => &mut out.cc,
                };
                list.push((t, s));
                continue;
            }
            let split_target = match (ct.is_leaf(), cs.is_leaf()) {
                (true, true) => {
                    out.pp.push((t, s));
                    continue;
                }
                (false, true) => true,
                (true, false) => false,
                (false, false) => cs.count() < ct.count(),
            };
            // children pushed in reverse so that they are visited in order
            if split_target {
                stack.extend(ct.children.iter().rev().map(|&c| (c as u32, s)));
            } else {
                stack.extend(cs.children.iter().rev().map(|&c| (t, c as u32)));
            }
        }
        for l in [&mut out.pp, &mut out.pc, &mut out.cp, &mut out.cc] {
            l.sort_by_key(|&(t, _)| t);
        }
        out
    }

    /// Kernel evaluations of the four lists: `|C_t| |C_s|`, `|C_t| n_p`, `n_p |C_s|`, `n_p^2`.
    pub fn evaluations(&self, targets: &Tree, sources: &Tree, np: usize) -> [u64; 4] {
        let n = |t: &Tree, c: u32| t.clusters[c as usize].count() as u64;
        let np = np as u64;
        [
            self.pp.iter().map(|&(t, s)| n(targets, t) * n(sources, s)).sum(),
            self.pc.iter().map(|&(t, _)| n(targets, t) * np).sum(),
            self.cp.iter().map(|&(_, s)| np * n(sources, s)).sum(),
            self.cc.len() as u64 * np * np,
        ]
    }
}
