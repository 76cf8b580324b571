//! One FMM evaluation on one process (seed 001, §2): trees, P2M, M2M, the dual traversal,
//! M2L, L2L, L2P and P2P, results in the caller's order with per-stage times.

use parki_core::isa::Isa;
use parki_core::par::DisjointSlice;
use parki_core::timing::{StageKind, StageTimes};
use parki_core::{Error, Par, Result};
use parki_nearfield::free::{laplace, FreeSources};
use rayon::prelude::{IndexedParallelIterator, IntoParallelIterator, ParallelIterator, ParallelSliceMut};

use crate::basis::MAX_ORDER;
use crate::cost::CostModel;
use crate::expansion::{l2p_box, p2m_box, LaneScratch};
use crate::octree::{OctBox, RootCube, SortedPoints};
use crate::rotation::YRotation;
use crate::translate::{Geometry, Op, Operators, Scratch};
use crate::traversal::{traverse, Lists, TraversalParams};

/// The FMM's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FmmParams {
    /// Expansion order `p` (degrees `n < p`, `p^2` coefficients), `1..=MAX_ORDER`.
    pub order: usize,
    /// Most points per leaf box (the paper's `s_max`); `None`: chosen by `cost`.
    pub max_leaf: Option<usize>,
    /// The unit costs that choose the leaf size when `max_leaf` is `None`.
    pub cost: CostModel,
    /// Admissibility, stencil and variable order.
    pub traversal: TraversalParams,
    /// Whether the gradient is computed.
    pub gradient: bool,
}

impl FmmParams {
    /// Order `p`, leaves of `max_leaf` (`None`: chosen by the CPU's cost model), the default
    /// traversal, potential and gradient.
    pub fn new(order: usize, max_leaf: Option<usize>) -> Self {
        Self { order, max_leaf, cost: CostModel::cpu(), traversal: TraversalParams::default(), gradient: true }
    }

    /// Checks the ranges.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] naming `fmm.order`, `fmm.max_leaf` or `fmm.eta`.
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &str, value: String, allowed: &str| {
            Err(Error::OutOfRange { field: format!("fmm.{field}"), value, allowed: allowed.into() })
        };
        if !(1..=MAX_ORDER).contains(&self.order) {
            return bad("order", self.order.to_string(), &format!("1 to {MAX_ORDER}"));
        }
        if self.max_leaf == Some(0) {
            return bad("max_leaf", "0".into(), ">= 1");
        }
        let eta = self.traversal.eta;
        if !(eta.is_finite() && eta > 0.0 && eta < 1.0) {
            return bad("eta", eta.to_string(), "0 < eta < 1");
        }
        Ok(())
    }
}

/// Measured `(error, order)`, loosest first (see [`for_tolerance`]): for each order, the worst
/// of the relative l2 errors of the potential and of the gradient, on the uniform cube and on
/// the Plummer sphere (1e5 points, standard normal charges, 300 sampled targets, the leaf size
/// of the CPU's cost model, the default traversal; docs/fmm.md §2). The Plummer sphere is the
/// worse at every order (up to 60x at p = 40): its deep, uneven tree has more translations
/// between boxes of different sizes near the admissibility bound.
pub const TOLERANCE_TABLE: [(f64, usize); 26] = [
    (9.8e-3, 4),
    (1.6e-3, 6),
    (2.5e-4, 8),
    (7.3e-5, 10),
    (3.7e-5, 12),
    (1.1e-5, 14),
    (3.9e-6, 16),
    (1.1e-6, 18),
    (5.5e-7, 20),
    (7.4e-8, 22),
    (3.3e-8, 24),
    (1.3e-8, 26),
    (6.0e-9, 30),
    (2.4e-9, 32),
    (9.2e-10, 34),
    (4.3e-10, 36),
    (2.1e-10, 38),
    (1.1e-10, 40),
    (4.9e-11, 42),
    (2.1e-11, 44),
    (8.8e-12, 46),
    (3.7e-12, 48),
    (1.6e-12, 50),
    (7.2e-13, 52),
    (1.8e-13, 56),
    (4.4e-14, 60),
];

/// The order for a relative l2 tolerance (of the potential, and of the gradient when it is
/// computed): the first row of [`TOLERANCE_TABLE`] whose measured error is at most half of
/// `tol`, and the row's index. The leaf size is left to the cost model.
///
/// # Errors
/// [`Error::OutOfRange`] naming `problem.tolerance` outside `[1e-12, 1)`.
pub fn for_tolerance(tol: f64) -> Result<(usize, usize)> {
    if !(tol.is_finite() && (1e-12..1.0).contains(&tol)) {
        return Err(Error::OutOfRange {
            field: "problem.tolerance".into(),
            value: tol.to_string(),
            allowed: "1e-12 <= tolerance < 1".into(),
        });
    }
    let row = TOLERANCE_TABLE.iter().position(|r| r.0 <= 0.5 * tol).unwrap_or(TOLERANCE_TABLE.len() - 1);
    Ok((TOLERANCE_TABLE[row].1, row))
}

/// The stages of an FMM evaluation, in order (the columns of the paper's Table 8, with the
/// tree and the traversal, which the paper leaves untimed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FmmStage {
    /// Source and target octrees.
    TreeBuild,
    /// Multipole expansions of the leaves ("S exp").
    P2M,
    /// Multipoles to parents ("Up").
    M2M,
    /// The dual traversal into M2L and P2P lists.
    Traversal,
    /// Multipole to local ("Down", translations).
    M2L,
    /// Locals to children ("Down", LevelDown3).
    L2L,
    /// Locals at the targets ("R eval").
    L2P,
    /// The near field ("Sparse").
    P2P,
}

impl StageKind for FmmStage {
    const ALL: &'static [Self] = &[
        FmmStage::TreeBuild,
        FmmStage::P2M,
        FmmStage::M2M,
        FmmStage::Traversal,
        FmmStage::M2L,
        FmmStage::L2L,
        FmmStage::L2P,
        FmmStage::P2P,
    ];

    fn name(self) -> &'static str {
        match self {
            FmmStage::TreeBuild => "tree build",
            FmmStage::P2M => "P2M",
            FmmStage::M2M => "M2M",
            FmmStage::Traversal => "traversal",
            FmmStage::M2L => "M2L",
            FmmStage::L2L => "L2L",
            FmmStage::L2P => "L2P",
            FmmStage::P2P => "P2P",
        }
    }
}

/// What an evaluation did.
#[derive(Clone, Debug, Default)]
pub struct FmmStats {
    /// The leaf size used, and whether the cost model chose it.
    pub max_leaf: (usize, bool),
    /// The cost model's estimates per candidate leaf size (`(leaf, seconds on one thread)`),
    /// when it chose.
    pub leaf_estimates: Vec<(usize, f64)>,
    /// Boxes of the source and target trees.
    pub boxes: [usize; 2],
    /// Levels of the source and target trees.
    pub depth: [usize; 2],
    /// M2L translations.
    pub m2l: usize,
    /// Mean of `q^3 / p^3` over the M2L translations (the saving of eq. (24)).
    pub m2l_work: f64,
    /// Distinct polar angles of the M2L translations (rotation tables made).
    pub betas: usize,
    /// P2P leaf pairs and pairwise interactions.
    pub p2p: [u64; 2],
    /// Seconds per stage.
    pub times: StageTimes<FmmStage>,
}

/// The result of an evaluation, in the caller's order.
#[derive(Clone, Debug)]
pub struct FmmOutput {
    /// `phi(y_j)`.
    pub potential: Vec<f64>,
    /// `grad phi(y_j)` (empty unless asked for).
    pub gradient: Vec<[f64; 3]>,
    /// Counts and times.
    pub stats: FmmStats,
}

fn validate(sources: &[[f64; 3]], charges: &[f64], targets: &[[f64; 3]]) -> Result<()> {
    if charges.len() != sources.len() {
        return Err(Error::LengthMismatch {
            field: "sources.charges".into(),
            found: charges.len(),
            reference: "sources.positions".into(),
            expected: sources.len(),
        });
    }
    for (field, set) in [("sources.positions", sources), ("targets.positions", targets)] {
        for (i, x) in set.iter().enumerate() {
            for (a, &v) in x.iter().enumerate() {
                if !v.is_finite() {
                    return Err(Error::NonFinite { field: field.into(), index: i, component: a, value: v });
                }
            }
        }
    }
    for (i, &q) in charges.iter().enumerate() {
        if !q.is_finite() {
            return Err(Error::NonFinite { field: "sources.charges".into(), index: i, component: 0, value: q });
        }
    }
    Ok(())
}

/// Rayon's minimum split length: no split for [`Par::Seq`].
fn min_len(par: Par) -> usize {
    match par {
        Par::Seq => usize::MAX,
        Par::Rayon(_) => 1,
    }
}

/// The translation geometry from box `from` to box `to` (`t` = centre of `to` minus centre of
/// `from`).
fn geometry<'a>(cube: &RootCube, from: &OctBox, to: &OctBox, yrot: &'a YRotation) -> Geometry<'a> {
    let a = cube.centre(from);
    let b = cube.centre(to);
    let t = [b[0] - a[0], b[1] - a[1], b[2] - a[2]];
    let rho = t[0].hypot(t[1]);
    let azimuth = if rho > 0.0 { (t[0] / rho, t[1] / rho) } else { (1.0, 0.0) };
    Geometry {
        yrot,
        azimuth,
        t: (rho * rho + t[2] * t[2]).sqrt(),
        h_in: cube.edge(from.level as usize),
        h_out: cube.edge(to.level as usize),
    }
}

/// `phi(y_j) = sum_i q_i / |y_j - x_i|` (pairs at zero distance skipped) and its gradient at
/// `targets` (the sources themselves when `None`), by the FMM.
///
/// # Errors
/// A parameter out of range, mismatched lengths, or a non-finite position or charge, each
/// named.
pub fn evaluate(
    sources: &[[f64; 3]],
    charges: &[f64],
    targets: Option<&[[f64; 3]]>,
    params: &FmmParams,
    isa: Isa,
    par: Par,
) -> Result<FmmOutput> {
    params.validate()?;
    let tgt = targets.unwrap_or(sources);
    validate(sources, charges, tgt)?;
    let p = params.order;
    let p2 = p * p;
    let split = min_len(par);
    let mut stats = FmmStats::default();
    let mut times = StageTimes::<FmmStage>::default();

    // Trees: one root cube for both, one tree when the targets are the sources.
    let (stree, ttree_own) = times.time(FmmStage::TreeBuild, || {
        let cube = match targets {
            Some(t) => RootCube::around(&[sources, t]),
            None => RootCube::around(&[sources]),
        };
        let sorted = SortedPoints::new(sources, cube);
        let leaf = match params.max_leaf {
            Some(l) => l,
            None => {
                let (l, all) = params.cost.choose_leaf(&sorted, p, 0.65);
                stats.leaf_estimates = all;
                l
            }
        };
        stats.max_leaf = (leaf, params.max_leaf.is_none());
        let s = sorted.tree(leaf);
        let t = targets.map(|t| SortedPoints::new(t, cube).tree(leaf));
        (s, t)
    });
    let ttree = ttree_own.as_ref().unwrap_or(&stree);
    let cube = stree.cube;
    stats.boxes = [stree.boxes.len(), ttree.boxes.len()];
    stats.depth = [stree.depth(), ttree.depth()];
    let ops = Operators::new(p);
    let src = FreeSources::<f64>::new(&stree.points, &stree.order.iter().map(|&i| charges[i]).collect::<Vec<_>>());
    let txyz: [Vec<f64>; 3] = [0, 1, 2].map(|a| ttree.points.iter().map(|y| y[a]).collect());

    // Rotations of the parent-child translations: polar angle acos(+-1/sqrt 3) of t.
    let b0 = (1.0 / 3f64.sqrt()).acos();
    let updown = [ops.y_rotation(b0), ops.y_rotation(std::f64::consts::PI - b0)];
    let rot_for = |from: &OctBox, to: &OctBox| {
        let up = RootCube::centre_units(to)[2] > RootCube::centre_units(from)[2];
        &updown[if up { 0 } else { 1 }]
    };

    // Upward pass: P2M at the leaves, then M2M level by level.
    let mut multipoles = vec![0.0; stree.boxes.len() * p2];
    times.time(FmmStage::P2M, || {
        multipoles.par_chunks_mut(p2).with_min_len(split).enumerate().for_each_init(
            || LaneScratch::new(p),
            |w, (i, out)| {
                let b = &stree.boxes[i];
                if b.is_leaf() {
                    let (x, q) = (&stree.points[b.begin..b.end], &src.q[b.begin..b.end]);
                    p2m_box(isa, x, q, cube.centre(b), cube.edge(b.level as usize), &ops.scalings, out, w);
                }
            },
        );
    });
    times.time(FmmStage::M2M, || {
        for l in (0..stree.depth()).rev() {
            let (lo, hi) = (stree.levels[l], stree.levels[l + 1]);
            let (head, below) = multipoles.split_at_mut(hi * p2);
            let below = &*below;
            head[lo * p2..].par_chunks_mut(p2).with_min_len(split).enumerate().for_each_init(
                || Scratch::new(p),
                |scr, (j, out)| {
                    let b = &stree.boxes[lo + j];
                    for c in b.child_range() {
                        let child = &stree.boxes[c];
                        let g = geometry(&cube, child, b, rot_for(child, b));
                        ops.translate(Op::M2M, &g, p, &below[(c - hi) * p2..(c - hi + 1) * p2], out, scr);
                    }
                },
            );
        }
    });

    // Dual traversal.
    let lists: Lists = times.time(FmmStage::Traversal, || traverse(ttree, &stree, p, params.traversal));
    stats.m2l = lists.m2l.len();
    stats.betas = lists.betas.len();
    stats.m2l_work =
        lists.m2l.iter().map(|e| (e.order as f64 / p as f64).powi(3)).sum::<f64>() / lists.m2l.len().max(1) as f64;

    // M2L into every target box.
    let mut locals = vec![0.0; ttree.boxes.len() * p2];
    times.time(FmmStage::M2L, || {
        let yrots: Vec<YRotation> =
            lists.betas.clone().into_par_iter().with_min_len(split).map(|b| ops.y_rotation(b)).collect();
        locals.par_chunks_mut(p2).with_min_len(split).enumerate().for_each_init(
            || Scratch::new(p),
            |scr, (i, out)| {
                let tb = &ttree.boxes[i];
                for e in lists.m2l_of(i) {
                    let sb = &stree.boxes[e.source as usize];
                    let g = geometry(&cube, sb, tb, &yrots[e.beta as usize]);
                    let s = e.source as usize;
                    ops.translate(Op::M2L, &g, e.order as usize, &multipoles[s * p2..(s + 1) * p2], out, scr);
                }
            },
        );
    });

    // Downward pass: L2L level by level.
    times.time(FmmStage::L2L, || {
        for l in 1..ttree.depth() {
            let (lo, hi) = (ttree.levels[l], ttree.levels[l + 1]);
            let (above, rest) = locals.split_at_mut(lo * p2);
            let above = &*above;
            rest[..(hi - lo) * p2].par_chunks_mut(p2).with_min_len(split).enumerate().for_each_init(
                || Scratch::new(p),
                |scr, (j, out)| {
                    let b = &ttree.boxes[lo + j];
                    let pi = b.parent as usize;
                    let parent = &ttree.boxes[pi];
                    let g = geometry(&cube, parent, b, rot_for(parent, b));
                    ops.translate(Op::L2L, &g, p, &above[pi * p2..(pi + 1) * p2], out, scr);
                },
            );
        }
    });

    // L2P and P2P at the target leaves, in tree order.
    let leaves = ttree.leaves();
    let nt = tgt.len();
    let mut pot = vec![0.0; nt];
    let mut grad = vec![[0.0; 3]; if params.gradient { nt } else { 0 }];
    {
        let pot_w = DisjointSlice::new(&mut pot);
        let grad_w = DisjointSlice::new(&mut grad);
        let with_grad = params.gradient;
        times.time(FmmStage::L2P, || {
            leaves.par_iter_chunks(split).for_each_init(
                || LaneScratch::new(p),
                |w, &li| {
                    let b = &ttree.boxes[li];
                    // SAFETY: leaves own disjoint point ranges.
                    let pots = unsafe { pot_w.range_mut(b.begin, b.end) };
                    // SAFETY: as above.
                    let grads = with_grad.then(|| unsafe { grad_w.range_mut(b.begin, b.end) });
                    let local = &locals[li * p2..(li + 1) * p2];
                    let (c, h) = (cube.centre(b), cube.edge(b.level as usize));
                    let y = &ttree.points[b.begin..b.end];
                    l2p_box(isa, local, y, c, h, &ops.scalings, pots, grads, w);
                },
            );
        });
        let p2p_counts = times.time(FmmStage::P2P, || {
            leaves
                .par_iter_chunks(split)
                .map_init(Vec::new, |ranges: &mut Vec<(usize, usize)>, &li| {
                    let b = &ttree.boxes[li];
                    ranges.clear();
                    ranges.extend(lists.p2p_of(li).iter().map(|&s| {
                        let sb = &stree.boxes[s as usize];
                        (sb.begin, sb.end)
                    }));
                    let pairs: u64 = ranges.iter().map(|r| ((r.1 - r.0) * b.count()) as u64).sum();
                    // SAFETY: leaves own disjoint point ranges.
                    let pots = unsafe { pot_w.range_mut(b.begin, b.end) };
                    let targets = [0, 1, 2].map(|a| &txyz[a][b.begin..b.end]);
                    // SAFETY: as above.
                    let grads = with_grad.then(|| unsafe { grad_w.range_mut(b.begin, b.end) });
                    laplace(isa, targets, &src, ranges, pots, grads);
                    [ranges.len() as u64, pairs]
                })
                .reduce(|| [0, 0], |a, b| [a[0] + b[0], a[1] + b[1]])
        });
        stats.p2p = p2p_counts;
    }

    // Back to the caller's order.
    let mut potential = vec![0.0; nt];
    for (k, &i) in ttree.order.iter().enumerate() {
        potential[i] = pot[k];
    }
    let mut gradient = vec![[0.0; 3]; grad.len()];
    if params.gradient {
        for (k, &i) in ttree.order.iter().enumerate() {
            gradient[i] = grad[k];
        }
    }
    stats.times = times;
    Ok(FmmOutput { potential, gradient, stats })
}

/// Parallel iteration over a slice with rayon's minimum split length.
trait ParIterChunks<T: Sync> {
    fn par_iter_chunks(&self, min: usize) -> rayon::iter::MinLen<rayon::slice::Iter<'_, T>>;
}

impl<T: Sync> ParIterChunks<T> for Vec<T> {
    fn par_iter_chunks(&self, min: usize) -> rayon::iter::MinLen<rayon::slice::Iter<'_, T>> {
        use rayon::prelude::IntoParallelRefIterator;
        self.par_iter().with_min_len(min)
    }
}
