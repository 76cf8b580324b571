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

/// The factor on the bound's radius in [`oscillation_radius`]. Measured (`sin(kr)/r`, 2e4
/// uniform points in the unit cube, leaves of 40, `cargo test --release -p parki-treecode
/// --test evaluate oscillatory`): at tolerance 1e-4 (degree 5, theta 0.8) and `k = 3` the
/// error is 4e-15 at factor 1 (every pair direct), 2.6e-6 at 2, 3.8e-5 at 4, and at `k = 10`
/// 4.3e-3 at 6; 2 keeps the error near 3 % of the tolerance.
pub const OSCILLATION_SLACK: f64 = 2.0;

/// The largest cluster radius `a` the traversal approximates for an oscillatory kernel of
/// wavenumber `k` at interpolation degree `n` and MAC `theta` (infinite for `k = 0`).
///
/// The MAC bounds the interpolation error of the `1/r` part; the factor `e^{i k |x - y|}` needs
/// clusters small against `1/k` besides: along one axis of a cluster of radius `a` its
/// Chebyshev coefficients are `2 i^m J_m(k a)`, so the degree-`n` interpolant misses by about
/// `2 J_{n+1}(k a) <= 2 (k a / 2)^{n+1} / (n + 1)!`, and by three times that over the three
/// axes. The radius is the `a` where that bound equals the error the degree and `theta` reach
/// on Coulomb (the measured [`crate::evaluate::TOLERANCE_TABLE`]: the smallest error of the
/// rows with at most this degree and at least this theta, `1e-2` without one), so the
/// oscillation adds no more than the interpolation's own error. Measured: `sin(kr)/r` on a
/// uniform cube at tolerance `1e-6` erred `1.4e-4` at `k = 10` and `8e-2` at `k = 100` without
/// this radius (docs/treecode.md).
///
/// The bound is pessimistic (it holds for every cluster at once; the far contributions' errors
/// add with mixed signs), so the radius is [`OSCILLATION_SLACK`] times the bound's.
pub fn oscillation_radius(k: f64, degree: usize, theta: f64) -> f64 {
    if !(k.is_finite() && k > 0.0) {
        return f64::INFINITY;
    }
    let eps = crate::evaluate::TOLERANCE_TABLE
        .iter()
        .filter(|r| r.1 <= degree && r.2 >= theta - 1e-12)
        .map(|r| r.0)
        .fold(1e-2, f64::min);
    // 6 (k a / 2)^(n+1) / (n+1)! = eps
    let m = degree as f64 + 1.0;
    let log_factorial: f64 = (1..=degree + 1).map(|i| (i as f64).ln()).sum();
    let ka = 2.0 * (((eps / 6.0).ln() + log_factorial) / m).exp();
    OSCILLATION_SLACK * ka / k
}

/// The interaction of a well-separated pair of clusters/// The interaction of a well-separated pair of clusters with `nt` and `ns` particles for
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

/// The source side of a traversal: cluster geometry, particle counts and children, which a
/// remote tree fetched on demand may not know yet.
pub(crate) trait SourceTree {
    /// Centre and radius of cluster `s`.
    fn geometry(&self, s: u32) -> ([f64; 3], f64);
    /// Particles of cluster `s`.
    fn count(&self, s: u32) -> usize;
    /// Whether cluster `s` has no children.
    fn is_leaf(&self, s: u32) -> bool;
    /// Pushes `(t, child)` for the children of `s` in reverse order (so that they are visited
    /// in order), or returns false when they are not known yet.
    fn push_children(&self, t: u32, s: u32, stack: &mut Vec<(u32, u32)>) -> bool;
}

/// A local tree as a traversal's source side.
struct Local<'a> {
    tree: &'a Tree,
    geo: Vec<([f64; 3], f64)>,
}

impl SourceTree for Local<'_> {
    fn geometry(&self, s: u32) -> ([f64; 3], f64) {
        self.geo[s as usize]
    }
    fn count(&self, s: u32) -> usize {
        self.tree.clusters[s as usize].count()
    }
    fn is_leaf(&self, s: u32) -> bool {
        self.tree.clusters[s as usize].is_leaf()
    }
    fn push_children(&self, t: u32, s: u32, stack: &mut Vec<(u32, u32)>) -> bool {
        stack.extend(self.tree.clusters[s as usize].children.iter().rev().map(|&c| (t, c as u32)));
        true
    }
}

/// Centres and radii of a tree's clusters.
pub(crate) fn geometry(t: &Tree) -> Vec<([f64; 3], f64)> {
    t.clusters.iter().map(|c| (c.centre(), c.radius())).collect()
}

/// Runs the dual traversal from the pairs `pending` of `targets` (with `tgeo`, its
/// [`geometry`]) against `sources` into `out` (unsorted) with the MAC `theta`, approximating
/// only clusters of radius at most `max_radius` ([`oscillation_radius`]; infinite but for an
/// oscillatory kernel); returns the pairs whose source cluster must be split but whose children
/// `sources` does not know yet, to be continued once they are.
pub(crate) fn traverse(
    targets: &Tree,
    tgeo: &[([f64; 3], f64)],
    sources: &impl SourceTree,
    (theta, max_radius): (f64, f64),
    np: usize,
    pending: Vec<(u32, u32)>,
    out: &mut Interactions,
) -> Vec<(u32, u32)> {
    let mut deferred = Vec::new();
    let mut stack = pending;
    stack.reverse();
    while let Some((t, s)) = stack.pop() {
        let ct = &targets.clusters[t as usize];
        let ((xt, rt), (xs, rs)) = (tgeo[t as usize], sources.geometry(s));
        let ns = sources.count(s);
        if well_separated(rt, rs, xt, xs, theta) && rt.max(rs) <= max_radius {
            let list = match approximation(ct.count(), ns, np) {
                Interaction::Pp => &mut out.pp,
                Interaction::Pc => &mut out.pc,
                Interaction::Cp => &mut out.cp,
                Interaction::Cc => &mut out.cc,
            };
            list.push((t, s));
            continue;
        }
        let split_target = match (ct.is_leaf(), sources.is_leaf(s)) {
            (true, true) => {
                out.pp.push((t, s));
                continue;
            }
            (false, true) => true,
            (true, false) => false,
            (false, false) => ns < ct.count(),
        };
        // children pushed in reverse so that they are visited in order
        if split_target {
            stack.extend(ct.children.iter().rev().map(|&c| (c as u32, s)));
        } else if !sources.push_children(t, s, &mut stack) {
            deferred.push((t, s));
        }
    }
    deferred
}

impl Interactions {
    /// The traversal of `targets` against `sources` with the MAC parameter `theta` (0 < theta
    /// < 1 in practice; 0 gives the direct sum) and `np` proxies per cluster.
    pub fn build(targets: &Tree, sources: &Tree, theta: f64, np: usize) -> Self {
        Self::build_capped(targets, sources, theta, f64::INFINITY, np)
    }

    /// [`Interactions::build`] approximating only clusters of radius at most `max_radius`
    /// ([`oscillation_radius`]).
    pub fn build_capped(targets: &Tree, sources: &Tree, theta: f64, max_radius: f64, np: usize) -> Self {
        let mut out = Interactions::default();
        let view = Local { tree: sources, geo: geometry(sources) };
        let left = traverse(targets, &geometry(targets), &view, (theta, max_radius), np, vec![(0, 0)], &mut out);
        debug_assert!(left.is_empty(), "a local tree knows every child");
        out.sort();
        out
    }

    /// Sorts each list by target cluster (stable: the traversal's order within a target).
    pub(crate) fn sort(&mut self) {
        for l in [&mut self.pp, &mut self.pc, &mut self.cp, &mut self.cc] {
            l.sort_by_key(|&(t, _)| t);
        }
    }

    /// Kernel evaluations of the four lists: `|C_t| |C_s|`, `|C_t| n_p`, `n_p |C_s|`, `n_p^2`.
    pub fn evaluations(&self, targets: &Tree, sources: &Tree, np: usize) -> [u64; 4] {
        self.evaluations_by(
            |c| targets.clusters[c as usize].count() as u64,
            |c| sources.clusters[c as usize].count() as u64,
            np,
        )
    }

    /// [`Interactions::evaluations`] with the clusters' particle counts given by `nt` (target
    /// clusters) and `ns` (source clusters).
    pub fn evaluations_by(&self, nt: impl Fn(u32) -> u64, ns: impl Fn(u32) -> u64, np: usize) -> [u64; 4] {
        let np = np as u64;
        [
            self.pp.iter().map(|&(t, s)| nt(t) * ns(s)).sum(),
            self.pc.iter().map(|&(t, _)| nt(t) * np).sum(),
            self.cp.iter().map(|&(_, s)| np * ns(s)).sum(),
            self.cc.len() as u64 * np * np,
        ]
    }

    /// Entries of the PP, PC, CP and CC lists.
    pub fn counts(&self) -> [usize; 4] {
        [self.pp.len(), self.pc.len(), self.cp.len(), self.cc.len()]
    }
}
