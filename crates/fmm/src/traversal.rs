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

use std::collections::HashMap;

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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

/// Compressed rows from `(row, value)` pairs (stable within a row).
fn csr<T: Copy>(rows: usize, mut pairs: Vec<(u32, T)>) -> (Vec<T>, Vec<usize>) {
    pairs.sort_by_key(|p| p.0);
    let mut offsets = vec![0usize; rows + 1];
    for &(r, _) in &pairs {
        offsets[r as usize + 1] += 1;
    }
    for i in 0..rows {
        offsets[i + 1] += offsets[i];
    }
    (pairs.into_iter().map(|p| p.1).collect(), offsets)
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
    betas: Vec<f64>,
    beta_index: HashMap<(bool, u64, u64), u32>,
    m2l: Vec<(u32, M2lEntry)>,
    p2p: Vec<(u32, u32)>,
}

impl Traverser {
    /// A traversal for expansions of order `p`.
    pub fn new(p: usize, params: TraversalParams) -> Self {
        Self { p, params, betas: Vec::new(), beta_index: HashMap::new(), m2l: Vec::new(), p2p: Vec::new() }
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
                let betas = &mut self.betas;
                let beta = *self.beta_index.entry(key).or_insert_with(|| {
                    betas.push((t[2] as f64 / d).clamp(-1.0, 1.0).acos());
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
        let mut lists = Lists { betas: self.betas, ..Lists::default() };
        (lists.m2l, lists.m2l_offsets) = csr(nt, self.m2l);
        (lists.p2p, lists.p2p_offsets) = csr(nt, self.p2p);
        lists
    }
}

/// Traverses `targets` against `sources` (trees of one [`RootCube`]) for expansions of order
/// `p`.
pub fn traverse(targets: &Octree, sources: &Octree, p: usize, params: TraversalParams) -> Lists {
    let mut t = Traverser::new(p, params);
    if targets.boxes[0].count() > 0 && sources.boxes[0].count() > 0 {
        t.run(targets, sources, vec![(0, 0)]);
    }
    t.finish(targets.boxes.len())
}
