//! The dual traversal of the target and source octrees into M2L and P2P lists, with the
//! separation ratio of the paper's error bound as the admissibility test, and the paper's
//! modified stencil (seed 001, §3.5) as its splitting order.
//!
//! **Admissibility** (eqs. (20)-(22)): a target box `A` and a source box `B`, in spheres of radii
//! `R_A`, `R_B` (half the box diagonals) with centres `D` apart, interact by M2L when
//! `eta = max(R_A, R_B) / (D - min(R_A, R_B)) <= eta*` (default `eta* = sqrt 3 / (4 - sqrt 3)
//! = 0.7637`, the worst case of the standard interaction list); the error of the translation
//! is then below `C eta*^p`. Two boxes of one level pass exactly when they are not adjacent.
//!
//! **Splitting.** A pair that fails is split: with `stencil` (the default) the source box first
//! whenever it is at least as large as the target box, else the target box. On a uniform tree
//! this reproduces the paper's modified stencil exactly: a parent-level target box meets the
//! children of its 27 colleagues, the 80 of them farther than `D* = 3.134` child edges from
//! its centre pass with the parent ("type 2", translated to the parent), and the rest are
//! split again into the 109 "type 1" boxes of each child: 119 translations per box on average
//! instead of the 189 of the standard interaction list (which `stencil = false`, splitting both
//! boxes of a pair of equal size, reproduces). On an adaptive tree the same rule gives
//! translations between boxes of different sizes wherever the bound allows them, the role of
//! the U, V, W and X lists of adaptive FMMs, with one error bound for all.
//!
//! Pairs of leaves that fail are P2P pairs. The order of each M2L is lowered to
//! `q = ceil(p ln eta* / ln eta)` (eq. (24)) when `variable_order` is set.

use parki_core::Par;
use rayon::iter::{IntoParallelIterator, ParallelIterator};

use crate::fast_hash::FastMap;
use crate::octree::{OctBox, Octree, RootCube, MAX_LEVEL};

/// The default admissibility bound `sqrt 3 / (4 - sqrt 3)`.
pub fn eta_star() -> f64 {
    3f64.sqrt() / (4.0 - 3f64.sqrt())
}

/// The default reference ratio of eq. (24), measured: with the paper's `eta* = 0.7637` the
/// lowered orders lose two digits (p = 12: 7.1e-4 against 5.0e-6 at fixed order, 4000 uniform
/// points, leaves of 32), because the bound `C eta*^p` is reached only by the worst pair while
/// far pairs come close to theirs; with 0.55 the error stays within 1.3x of the fixed order's
/// at p = 8, 12 and 20 and the M2L work (`sum q^3 / p^3`) is 65 % (docs/fmm.md).
pub const ORDER_REFERENCE: f64 = 0.55;

/// The lowest order whose translations eq. (24) lowers: below it the ceiling's steps are too
/// coarse (at p = 4 the lowered orders gave 3.0e-4 against 2.0e-4 at the fixed order, on
/// 2e4 uniform points with charges in U(0, 1), for no measurable time).
pub const MIN_VARIABLE_ORDER: usize = 8;

/// How the traversal decides.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TraversalParams {
    /// Admissibility bound `eta*`, `0 < eta* < 1`.
    pub eta: f64,
    /// The modified stencil (split the source box first).
    pub stencil: bool,
    /// Lower each M2L's order by eq. (24) (from order [`MIN_VARIABLE_ORDER`] up).
    pub variable_order: bool,
    /// The separation ratio whose `p`-th power eq. (24) holds each M2L's error to.
    pub order_reference: f64,
}

impl Default for TraversalParams {
    fn default() -> Self {
        Self { eta: eta_star(), stencil: true, variable_order: true, order_reference: ORDER_REFERENCE }
    }
}

/// One M2L of a target box.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct M2lEntry {
    /// Source box.
    pub source: u32,
    /// Index of the polar angle of `t` in [`Lists::betas`].
    pub beta: u32,
    /// Order of the translation (`<= p`).
    pub order: u8,
}

/// The lists of a traversal, by target box.
#[derive(Clone, Debug, Default)]
pub struct Lists {
    /// M2L entries of target box `i`: `m2l[m2l_offsets[i]..m2l_offsets[i + 1]]`.
    pub m2l: Vec<M2lEntry>,
    /// Offsets into `m2l`.
    pub m2l_offsets: Vec<usize>,
    /// Source leaves of target leaf `i`: `p2p[p2p_offsets[i]..p2p_offsets[i + 1]]`.
    pub p2p: Vec<u32>,
    /// Offsets into `p2p`.
    pub p2p_offsets: Vec<usize>,
    /// The distinct polar angles of the M2L translations.
    pub betas: Vec<f64>,
}

impl Lists {
    /// M2L entries of target box `i`.
    pub fn m2l_of(&self, i: usize) -> &[M2lEntry] {
        &self.m2l[self.m2l_offsets[i]..self.m2l_offsets[i + 1]]
    }

    /// Source leaves of target box `i`.
    pub fn p2p_of(&self, i: usize) -> &[u32] {
        &self.p2p[self.p2p_offsets[i]..self.p2p_offsets[i + 1]]
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Compressed rows from the `(row, value)` pairs of `parts`, in order (a counting sort: stable
/// within a row, the parts' pairs of one row in the parts' order).
fn csr<T: Copy + Default>(rows: usize, parts: &[&[(u32, T)]]) -> (Vec<T>, Vec<usize>) {
    let mut offsets = vec![0usize; rows + 1];
    for part in parts {
        for &(r, _) in part.iter() {
            offsets[r as usize + 1] += 1;
        }
    }
    for i in 0..rows {
        offsets[i + 1] += offsets[i];
    }
    let mut fill = offsets.clone();
    let mut values = vec![T::default(); offsets[rows]];
    for part in parts {
        for &(r, v) in part.iter() {
            values[fill[r as usize]] = v;
            fill[r as usize] += 1;
        }
    }
    (values, offsets)
}

/// An M2L translation's polar angle, exactly: `(t_z >= 0, t_z^2 / g, |t|^2 / g)` with `g` their
/// greatest common divisor (`cos^2 beta = t_z^2 / |t|^2` in lowest terms).
type BetaKey = (bool, u64, u64);

type BetaMap = FastMap<BetaKey, u32>;

/// The polar angle of a key, `acos(+-sqrt(t_z^2 / |t|^2))` from the reduced ratio: the same
/// value whichever displacement of that direction met it first.
fn beta_of(k: BetaKey) -> f64 {
    let c = (k.1 as f64 / k.2 as f64).sqrt().min(1.0);
    (if k.0 { c } else { -c }).acos()
}

/// A source tree the traversal descends: an [`Octree`], or the locally essential tree of a
/// distributed evaluation, whose remote boxes' children are read on demand.
pub trait SourceBoxes {
    /// Box `s`.
    fn source_box(&self, s: u32) -> &OctBox;
    /// The children of box `s` (a non-leaf), or `None` while they are not known here.
    fn known_children(&self, s: u32) -> Option<std::ops::Range<usize>>;
}

impl SourceBoxes for Octree {
    fn source_box(&self, s: u32) -> &OctBox {
        &self.boxes[s as usize]
    }
    fn known_children(&self, s: u32) -> Option<std::ops::Range<usize>> {
        Some(self.boxes[s as usize].child_range())
    }
}

/// The state of a dual traversal that may stop at source boxes whose children are not known
/// yet and resume once they are ([`Traverser::run`], [`Traverser::finish`]).
pub struct Traverser {
    p: usize,
    params: TraversalParams,
    beta_keys: Vec<BetaKey>,
    beta_index: BetaMap,
    m2l: Vec<(u32, M2lEntry)>,
    p2p: Vec<(u32, u32)>,
    /// Pairs whose target box is at this level are set aside ([`Traverser::run`]) instead of
    /// processed: [`traverse_with`]'s buckets.
    split_level: Option<u8>,
    set_aside: Vec<(u32, u32)>,
}

impl Traverser {
    /// A traversal for expansions of order `p`.
    pub fn new(p: usize, params: TraversalParams) -> Self {
        Self {
            p,
            params,
            beta_keys: Vec::new(),
            beta_index: BetaMap::default(),
            m2l: Vec::new(),
            p2p: Vec::new(),
            split_level: None,
            set_aside: Vec::new(),
        }
    }

    /// Processes the `(target, source)` pairs of `stack` and every pair they lead to; returns
    /// the pairs that must split a source box whose children `sources` does not know.
    pub fn run(&mut self, targets: &Octree, sources: &impl SourceBoxes, mut stack: Vec<(u32, u32)>) -> Vec<(u32, u32)> {
        let params = self.params;
        let p = self.p;
        let half_diag = |level: u8| 3f64.sqrt() * (1u64 << (MAX_LEVEL - level as usize)) as f64;
        let ln_eta = params.order_reference.ln();
        let mut deferred = Vec::new();
        while let Some((ai, bi)) = stack.pop() {
            let a = &targets.boxes[ai as usize];
            if self.split_level == Some(a.level) {
                self.set_aside.push((ai, bi));
                continue;
            }
            let b = sources.source_box(bi);
            let ca = RootCube::centre_units(a);
            let cb = RootCube::centre_units(b);
            let t = [ca[0] - cb[0], ca[1] - cb[1], ca[2] - cb[2]];
            let d2 = (t[0] as f64).powi(2) + (t[1] as f64).powi(2) + (t[2] as f64).powi(2);
            let (ra, rb) = (half_diag(a.level), half_diag(b.level));
            let d = d2.sqrt();
            let (rmax, rmin) = if ra >= rb { (ra, rb) } else { (rb, ra) };
            let admissible = d > ra + rb && rmax <= params.eta * (1.0 + 1e-12) * (d - rmin);
            if admissible {
                let eta = rmax / (d - rmin);
                let order = if params.variable_order && p >= MIN_VARIABLE_ORDER {
                    ((p as f64 * ln_eta / eta.ln()) * (1.0 - 1e-12)).ceil().clamp(1.0, p as f64) as usize
                } else {
                    p
                };
                let tz2 = (t[2] * t[2]) as u64;
                let n2 = (t[0] * t[0] + t[1] * t[1] + t[2] * t[2]) as u64;
                let g = gcd(tz2, n2).max(1);
                let key = (t[2] >= 0, tz2 / g, n2 / g);
                let next = self.beta_index.len() as u32;
                let keys = &mut self.beta_keys;
                let beta = *self.beta_index.entry(key).or_insert_with(|| {
                    keys.push(key);
                    next
                });
                self.m2l.push((ai, M2lEntry { source: bi, beta, order: order as u8 }));
                continue;
            }
            // which box splits: the source (`Some(true)`), the target, or both
            let split_source = match (a.is_leaf(), b.is_leaf()) {
                (true, true) => {
                    self.p2p.push((ai, bi));
                    continue;
                }
                (true, false) => Some(true),
                (false, true) => Some(false),
                (false, false) if params.stencil => Some(b.level <= a.level),
                (false, false) if a.level == b.level => None,
                (false, false) => Some(a.level > b.level),
            };
            if split_source != Some(false) && sources.known_children(bi).is_none() {
                deferred.push((ai, bi));
                continue;
            }
            match split_source {
                Some(true) => {
                    let ch = sources.known_children(bi).unwrap_or(0..0);
                    stack.extend(ch.rev().map(|c| (ai, c as u32)));
                }
                Some(false) => stack.extend(a.child_range().rev().map(|c| (c as u32, bi))),
                None => {
                    let ch = sources.known_children(bi).unwrap_or(0..0);
                    for c in a.child_range().rev() {
                        for e in ch.clone().rev() {
                            stack.push((c as u32, e as u32));
                        }
                    }
                }
            }
        }
        deferred
    }

    /// The lists, by target box of a tree of `nt` boxes.
    pub fn finish(self, nt: usize) -> Lists {
        merge(nt, vec![self])
    }
}

/// The lists of traversals whose target boxes are disjoint (one traversal, or the top levels
/// and the buckets of [`traverse_with`]), in their order. The polar angles are numbered in the
/// order of their exact keys, so the lists do not depend on how the work was split.
fn merge(nt: usize, mut parts: Vec<Traverser>) -> Lists {
    let mut keys: Vec<BetaKey> = parts.iter().flat_map(|t| t.beta_keys.iter().copied()).collect();
    keys.sort_unstable();
    keys.dedup();
    let index: BetaMap = keys.iter().enumerate().map(|(i, &k)| (k, i as u32)).collect();
    for t in &mut parts {
        let global: Vec<u32> = t.beta_keys.iter().map(|k| index[k]).collect();
        for e in &mut t.m2l {
            e.1.beta = global[e.1.beta as usize];
        }
    }
    let m2l: Vec<&[(u32, M2lEntry)]> = parts.iter().map(|t| &t.m2l[..]).collect();
    let p2p: Vec<&[(u32, u32)]> = parts.iter().map(|t| &t.p2p[..]).collect();
    let mut lists = Lists { betas: keys.iter().map(|&k| beta_of(k)).collect(), ..Lists::default() };
    (lists.m2l, lists.m2l_offsets) = csr(nt, &m2l);
    (lists.p2p, lists.p2p_offsets) = csr(nt, &p2p);
    lists
}

/// Traverses `targets` against `sources` (trees of one [`RootCube`]) for expansions of order
/// `p`, on one thread ([`traverse_with`]).
pub fn traverse(targets: &Octree, sources: &Octree, p: usize, params: TraversalParams) -> Lists {
    traverse_with(targets, sources, p, params, Par::Seq)
}

/// The target level below which [`traverse_with`] traverses on one thread; the subtrees of the
/// target boxes of this level go to the threads.
pub const PAR_TARGET_LEVEL: u8 = 3;

/// [`traverse`] over the threads of `par`: the pairs of the top target levels on one thread,
/// setting aside every pair whose target box is at level [`PAR_TARGET_LEVEL`] (in the order they
/// arise), then each such box's pairs, in that order, on its own traversal, in parallel. A
/// target box's pairs arise only from pairs of its ancestors or itself, and the depth-first
/// traversal finishes each pair's descendants before the next pair, so every box gets the same
/// M2L and P2P entries in the same order as on one thread: the same lists, whatever `par`.
pub fn traverse_with(targets: &Octree, sources: &Octree, p: usize, params: TraversalParams, par: Par) -> Lists {
    let nt = targets.boxes.len();
    let mut top = Traverser::new(p, params);
    if targets.boxes[0].count() == 0 || sources.boxes[0].count() == 0 {
        return top.finish(nt);
    }
    if par == Par::Seq {
        top.run(targets, sources, vec![(0, 0)]);
        return top.finish(nt);
    }
    top.split_level = Some(PAR_TARGET_LEVEL);
    top.run(targets, sources, vec![(0, 0)]);
    let aside = std::mem::take(&mut top.set_aside);
    // the set-aside pairs by target box, each box's in the order they arose
    let mut by_box: Vec<Vec<(u32, u32)>> = Vec::new();
    let mut slot: FastMap<u32, usize> = FastMap::default();
    for (a, b) in aside {
        let k = *slot.entry(a).or_insert_with(|| {
            by_box.push(Vec::new());
            by_box.len() - 1
        });
        by_box[k].push((a, b));
    }
    let buckets: Vec<Traverser> = by_box
        .into_par_iter()
        .map(|pairs| {
            let mut t = Traverser::new(p, params);
            // a stack pops its last pair first: the pairs reversed, so they run in their order
            t.run(targets, sources, pairs.into_iter().rev().collect());
            t
        })
        .collect();
    let mut parts = vec![top];
    parts.extend(buckets);
    merge(nt, parts)
}
