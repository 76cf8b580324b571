//! One FMM evaluation on one process (seed 001, §2): trees, P2M, M2M, the dual traversal,
//! M2L, L2L, L2P and P2P, results in the caller's order with per-stage times.

use parki_comm::Transport;
use parki_core::isa::Isa;
use parki_core::par::{DisjointSlice, ThreadScratch};
use parki_core::timing::{StageKind, StageTimes};
use parki_core::units::{self, Units};
use parki_core::{Error, Par, Result};
use parki_nearfield::free::{laplace, stokeslet, FreeReal, FreeSources};
use rayon::prelude::{
    IndexedParallelIterator, IntoParallelRefIterator, ParallelIterator, ParallelSlice, ParallelSliceMut,
};

use crate::backend::{DeviceFmm, FmmBackend, FmmSession, SourceSide};
use crate::basis::MAX_ORDER;
use crate::cost::CostModel;
use crate::expansion::{l2p_box, p2m_box, LaneScratch};
use crate::fast_hash::FastMap;
use crate::octree::{OctBox, Octree, RootCube, SortedPoints};
use crate::rotation::YRotation;
use crate::translate::{Geometry, LaneScratch8, Op, Operators, Scratch};
use crate::traversal::{traverse_with, Lists, TraversalParams};

/// The arithmetic of the near field (P2P) and of the results. The expansions and translations
/// run in f64 in both: on the CPU their cost is in per-degree overheads more than in vector
/// width, and f64 expansions keep the far field's round-off below the truncation error at every
/// order (docs/fmm.md §2.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Precision {
    /// Everything in f64.
    #[default]
    F64,
    /// The near field in f32 (sixteen lanes per AVX-512 vector), the results rounded to f32.
    F32,
}

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
    /// The near field's arithmetic.
    pub precision: Precision,
}

impl FmmParams {
    /// Order `p`, leaves of `max_leaf` (`None`: chosen by the CPU's cost model), the default
    /// traversal, potential and gradient.
    pub fn new(order: usize, max_leaf: Option<usize>) -> Self {
        Self {
            order,
            max_leaf,
            cost: CostModel::cpu(),
            traversal: TraversalParams::default(),
            gradient: true,
            precision: Precision::F64,
        }
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

/// Measured `(order, potential error, gradient error)`, loosest first (see [`for_tolerance`]):
/// for each order, the worst of the relative l2 errors on the uniform cube and the Plummer
/// sphere at 1e5 points (seed 1) and at 2e4 points (seeds 1 and 5 for Plummer), standard normal
/// charges, 300-500 sampled targets, the leaf size of the CPU's cost model, the default
/// traversal (docs/fmm.md §2; `parki-bench-fmm --n N --cloud uniform,plummer --order 4,6,...,60
/// --seed S`). The Plummer sphere is the worst at every order, and the smaller set: at p = 24
/// its potential's error is 8.2e-8 at 2e4 points, 3.3e-8 at 1e5 and 8.8e-9 at 4e5.
pub const TOLERANCE_TABLE: [(usize, f64, f64); 27] = [
    (4, 5.8e-03, 9.8e-03),
    (6, 7.9e-04, 1.6e-03),
    (8, 1.8e-04, 3.2e-04),
    (10, 6.7e-05, 8.1e-05),
    (12, 2.2e-05, 3.7e-05),
    (14, 7.9e-06, 1.2e-05),
    (16, 2.7e-06, 4.3e-06),
    (18, 1.1e-06, 1.2e-06),
    (20, 5.1e-07, 5.3e-07),
    (22, 2.0e-07, 3.4e-07),
    (24, 8.2e-08, 1.6e-07),
    (26, 3.4e-08, 6.7e-08),
    (28, 1.2e-08, 2.0e-08),
    (30, 4.8e-09, 1.0e-08),
    (32, 1.9e-09, 5.3e-09),
    (34, 8.1e-10, 2.6e-09),
    (36, 3.6e-10, 9.8e-10),
    (38, 2.0e-10, 3.8e-10),
    (40, 6.8e-11, 1.8e-10),
    (42, 3.0e-11, 9.2e-11),
    (44, 1.5e-11, 4.1e-11),
    (46, 7.2e-12, 1.5e-11),
    (48, 3.3e-12, 5.8e-12),
    (50, 1.6e-12, 8.6e-13),
    (52, 6.9e-13, 4.2e-13),
    (56, 1.1e-13, 9.7e-14),
    (60, 2.1e-14, 2.7e-14),
];

/// The order for a relative l2 tolerance of the potential and, with `gradient`, of the
/// gradient too: the first row of [`TOLERANCE_TABLE`] whose measured errors are at most a
/// quarter of `tol`, and the row's index. The leaf size is left to the cost model. (The margin
/// of 4: on clustered sets the error on a few hundred sampled targets varies by 3x with the
/// sample and the set's size: Plummer, 2e4 points, p = 24 measured 3.8e-8 and 1.2e-7.)
///
/// # Errors
/// [`Error::OutOfRange`] naming `problem.tolerance` outside `[1e-12, 1)`.
pub fn for_tolerance(tol: f64, gradient: bool) -> Result<(usize, usize)> {
    if !(tol.is_finite() && (1e-12..1.0).contains(&tol)) {
        return Err(Error::OutOfRange {
            field: "problem.tolerance".into(),
            value: tol.to_string(),
            allowed: "1e-12 <= tolerance < 1".into(),
        });
    }
    let row = TOLERANCE_TABLE
        .iter()
        .position(|r| r.1 <= 0.25 * tol && (!gradient || r.2 <= 0.25 * tol))
        .unwrap_or(TOLERANCE_TABLE.len() - 1);
    Ok((TOLERANCE_TABLE[row].0, row))
}

/// The order for a tolerance and a kernel: [`for_tolerance`] for Laplace; for the Stokeslet,
/// whose velocity combines four harmonic potentials and gradients with cancellation (measured
/// up to 8x the harmonic errors at one order, docs/fmm.md), the gradient's order of `tol / 10`.
///
/// # Errors
/// As [`for_tolerance`].
pub fn for_tolerance_of(kernel: FmmKernel, tol: f64, gradient: bool) -> Result<(usize, usize)> {
    for_tolerance(tol, gradient)?;
    match kernel {
        FmmKernel::Laplace => for_tolerance(tol, gradient),
        FmmKernel::Stokeslet => Ok(for_tolerance((tol / 10.0).max(1e-12), true)
            .unwrap_or((TOLERANCE_TABLE[TOLERANCE_TABLE.len() - 1].0, TOLERANCE_TABLE.len() - 1))),
    }
}

/// The stages of an FMM evaluation, in order (the columns of the paper's Table 8, with the
/// tree and the traversal, which the paper leaves untimed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FmmStage {
    /// Distributed: the root cube, the splitters and the particles to their ranks.
    Partition,
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
    /// Distributed: the shared boxes' sums and the reads of remote boxes, multipoles and
    /// particles (the traversal's own time is under `Traversal`).
    Let,
}

impl StageKind for FmmStage {
    const ALL: &'static [Self] = &[
        FmmStage::Partition,
        FmmStage::TreeBuild,
        FmmStage::P2M,
        FmmStage::M2M,
        FmmStage::Traversal,
        FmmStage::M2L,
        FmmStage::L2L,
        FmmStage::L2P,
        FmmStage::Let,
        FmmStage::P2P,
    ];

    fn name(self) -> &'static str {
        match self {
            FmmStage::Partition => "partition",
            FmmStage::TreeBuild => "tree build",
            FmmStage::P2M => "P2M",
            FmmStage::M2M => "M2M",
            FmmStage::Traversal => "traversal",
            FmmStage::M2L => "M2L",
            FmmStage::L2L => "L2L",
            FmmStage::L2P => "L2P",
            FmmStage::P2P => "P2P",
            FmmStage::Let => "LET",
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
    /// Distributed: sources and targets this rank owned after the partition.
    pub owned: [usize; 2],
    /// Distributed: what the locally essential tree moved.
    pub let_tree: LetStats,
    /// On a device: the variants the evaluation ran ([`FmmSession::variants`]).
    pub device_variants: Option<String>,
}

/// What the locally essential tree of one rank moved (all zero on one process).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LetStats {
    /// Boxes shared by several ranks (summed by one all-reduce).
    pub shared: usize,
    /// Remote box records read (the frontier's all-gather included).
    pub boxes: usize,
    /// Remote multipole expansions read.
    pub multipoles: usize,
    /// Remote particles read.
    pub particles: usize,
    /// Bytes read by one-sided gets.
    pub bytes: u64,
    /// One-sided gets.
    pub messages: u64,
    /// Traversal rounds that waited for remote children.
    pub rounds: usize,
    /// How the reads travelled (one-sided MPI, or messages where windows fail).
    pub transport: Transport,
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

pub(crate) fn validate(sources: &[[f64; 3]], charges: &[f64], targets: &[[f64; 3]]) -> Result<()> {
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

/// Mean of `q^3 / p^3` over the M2L translations of order `q` (eq. (24)'s saving); 0 without
/// translations (not the empty float sum's -0).
fn m2l_work(m2l: &[crate::traversal::M2lEntry], p: usize) -> f64 {
    if m2l.is_empty() {
        return 0.0;
    }
    m2l.iter().map(|e| (e.order as f64 / p as f64).powi(3)).sum::<f64>() / m2l.len() as f64
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

/// The sums the FMM evaluates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FmmKernel {
    /// `phi(y) = sum q / r` and its gradient: one harmonic density.
    Laplace,
    /// `u(y) = sum f / r + (f . d) d / r^3`: four harmonic densities (Tornberg and Greengard),
    /// `phi_k` of the force components `f_k` and `psi` of `f . (x - c)`, with
    /// `u_i = phi_i - (y - c)_k d_i phi_k + d_i psi` in the far field (`c` the root cube's
    /// centre, which keeps the cancellation small) and the Stokeslet itself in the near field.
    Stokeslet,
}

/// An evaluation's values, which [`in_units`] scales back to the caller's units.
pub(crate) trait Restore {
    /// Values computed in `units` to the caller's (exact for powers of two).
    fn restore(&mut self, units: Units);
}

impl Restore for FmmOutput {
    /// The potential times `w / s`, the gradient times `w / s^2` (each in one step: exact,
    /// overflowing only where the value itself does).
    fn restore(&mut self, units: Units) {
        self.potential.iter_mut().for_each(|v| *v = units.restore(*v, 1));
        self.gradient.iter_mut().for_each(|g| *g = g.map(|v| units.restore(v, 2)));
    }
}

/// A source strength the FMM sums: a charge or a force.
pub(crate) trait Strength: Copy {
    /// The largest magnitude (component) of `v`.
    fn largest(v: &[Self]) -> f64;
    /// The strength in `units` (over `w`).
    fn in_units(self, units: &Units) -> Self;
}

impl Strength for f64 {
    fn largest(v: &[f64]) -> f64 {
        v.iter().fold(0.0, |m, q| m.max(q.abs()))
    }
    fn in_units(self, units: &Units) -> f64 {
        units.strength_of(self)
    }
}

impl Strength for [f64; 3] {
    fn largest(v: &[[f64; 3]]) -> f64 {
        v.iter().flatten().fold(0.0, |m, q| m.max(q.abs()))
    }
    fn in_units(self, units: &Units) -> [f64; 3] {
        self.map(|q| units.strength_of(q))
    }
}

/// `eval` of the sources, strengths and targets in `units` (copies), its values scaled back by
/// [`Restore::restore`].
pub(crate) fn in_units<O: Restore, S: Strength>(
    units: Units,
    sources: &[[f64; 3]],
    strengths: &[S],
    targets: Option<&[[f64; 3]]>,
    eval: impl FnOnce(&[[f64; 3]], &[S], Option<&[[f64; 3]]>) -> Result<O>,
) -> Result<O> {
    let y = targets.map(|t| units::points_in_unit(t, units.length));
    let q: Vec<S> = strengths.iter().map(|q| q.in_units(&units)).collect();
    let mut out = eval(&units::points_in_unit(sources, units.length), &q, y.as_deref())?;
    out.restore(units);
    Ok(out)
}

/// The units the evaluation computes in ([`parki_core::units::Units::of`]): for sources and
/// targets (over the ranks of `comm` when given) of an extent far from 1, lengths over the power
/// of two nearest it; for strengths far from 1, strengths over the power of two nearest the
/// largest. The kernels are homogeneous (`1/r`, the Stokeslet: `G(s r) = G(r) / s`) and the
/// sums linear, so the evaluation in these units gives the values times `s / w`, exactly,
/// without `r^2` or the expansions under- or overflowing. One maximum over the ranks of `comm`
/// when given.
pub(crate) fn units_of<S: Strength>(
    comm: Option<&parki_comm::Comm>,
    sources: &[[f64; 3]],
    strengths: &[S],
    targets: Option<&[[f64; 3]]>,
) -> Units {
    let mut m = units::extent_and_strength(&[sources, targets.unwrap_or(&[])], S::largest(strengths));
    if let Some(comm) = comm {
        comm.all_reduce_f64(&mut m, parki_comm::ReduceOp::Max);
    }
    Units::of(&m)
}

/// The result of an evaluation, in the caller's order.
#[derive(Clone, Debug)]
pub struct StokesletOutput {
    /// `u(y_j)`.
    pub velocity: Vec<[f64; 3]>,
    /// Counts and times.
    pub stats: FmmStats,
}

impl Restore for StokesletOutput {
    /// The velocity times `w / s`.
    fn restore(&mut self, units: Units) {
        self.velocity.iter_mut().for_each(|u| *u = u.map(|v| units.restore(v, 1)));
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
    evaluate_on(sources, charges, targets, params, isa, par, None)
}

/// [`evaluate`] with the compute stages (P2M, M2M, M2L, L2L, L2P, P2P) on `device` when given
/// (the trees and the traversal stay on the host; [`crate::backend`]). On a device every stage
/// runs in f64; with [`Precision::F32`] the results are rounded to f32.
///
/// # Errors
/// As [`evaluate`], and the device's (memory, launches).
pub fn evaluate_on(
    sources: &[[f64; 3]],
    charges: &[f64],
    targets: Option<&[[f64; 3]]>,
    params: &FmmParams,
    isa: Isa,
    par: Par,
    device: Option<&dyn FmmBackend>,
) -> Result<FmmOutput> {
    params.validate()?;
    validate(sources, charges, targets.unwrap_or(sources))?;
    let u = units_of(None, sources, charges, targets);
    if u.rescaled() {
        return in_units(u, sources, charges, targets, |x, q, y| evaluate_on(x, q, y, params, isa, par, device));
    }
    let core = run_with(FmmKernel::Laplace, sources, &[charges], None, targets, params, isa, par, device)?;
    let order = &core.order;
    let mut potential = vec![0.0; order.len()];
    for (k, &i) in order.iter().enumerate() {
        potential[i] = core.values[k][0];
    }
    let mut gradient = vec![[0.0; 3]; if params.gradient { order.len() } else { 0 }];
    if params.gradient {
        for (k, &i) in order.iter().enumerate() {
            gradient[i] = [core.values[k][1], core.values[k][2], core.values[k][3]];
        }
    }
    Ok(FmmOutput { potential, gradient, stats: core.stats })
}

/// The result of an f32 evaluation, in the caller's order.
#[derive(Clone, Debug)]
pub struct FmmOutputF32 {
    /// `phi(y_j)`.
    pub potential: Vec<f32>,
    /// `grad phi(y_j)` (empty unless asked for).
    pub gradient: Vec<[f32; 3]>,
    /// Counts and times.
    pub stats: FmmStats,
}

/// [`evaluate`] for f32 data: the near field in f32, the expansions in f64 (see
/// [`Precision`]), the results rounded to f32 (`params.precision` is taken as
/// [`Precision::F32`]).
///
/// # Errors
/// As [`evaluate`].
pub fn evaluate_f32(
    sources: &[[f32; 3]],
    charges: &[f32],
    targets: Option<&[[f32; 3]]>,
    params: &FmmParams,
    isa: Isa,
    par: Par,
) -> Result<FmmOutputF32> {
    let wide = |v: &[[f32; 3]]| -> Vec<[f64; 3]> { v.iter().map(|x| x.map(f64::from)).collect() };
    let x = wide(sources);
    let y = targets.map(wide);
    let q: Vec<f64> = charges.iter().map(|&c| f64::from(c)).collect();
    let p = FmmParams { precision: Precision::F32, ..*params };
    let out = evaluate(&x, &q, y.as_deref(), &p, isa, par)?;
    Ok(FmmOutputF32 {
        potential: out.potential.iter().map(|&v| v as f32).collect(),
        gradient: out.gradient.iter().map(|g| g.map(|v| v as f32)).collect(),
        stats: out.stats,
    })
}

/// The Stokeslet velocity `u(y_j) = sum_i f_i / r + (f_i . d) d / r^3` (`d = y_j - x_i`, no
/// prefactor, pairs at zero distance skipped) at `targets` (the sources when `None`), by four
/// harmonic FMMs sharing one tree ([`FmmKernel::Stokeslet`]). `params.gradient` is ignored.
///
/// # Errors
/// As [`evaluate`], the forces named `sources.forces`.
pub fn evaluate_stokeslet(
    sources: &[[f64; 3]],
    forces: &[[f64; 3]],
    targets: Option<&[[f64; 3]]>,
    params: &FmmParams,
    isa: Isa,
    par: Par,
) -> Result<StokesletOutput> {
    evaluate_stokeslet_on(sources, forces, targets, params, isa, par, None)
}

/// [`evaluate_stokeslet`] with the compute stages on `device` when given (see
/// [`evaluate_on`]).
///
/// # Errors
/// As [`evaluate_stokeslet`], and the device's.
pub fn evaluate_stokeslet_on(
    sources: &[[f64; 3]],
    forces: &[[f64; 3]],
    targets: Option<&[[f64; 3]]>,
    params: &FmmParams,
    isa: Isa,
    par: Par,
    device: Option<&dyn FmmBackend>,
) -> Result<StokesletOutput> {
    validate_stokeslet(sources, forces, targets, params)?;
    let u = units_of(None, sources, forces, targets);
    if u.rescaled() {
        return in_units(u, sources, forces, targets, |x, f, y| {
            evaluate_stokeslet_on(x, f, y, params, isa, par, device)
        });
    }
    let cube = match targets {
        Some(t) => RootCube::around(&[sources, t]),
        None => RootCube::around(&[sources]),
    };
    let [f0, f1, f2, psi] = stokeslet_densities(sources, forces, &cube);
    let mut p = *params;
    p.gradient = true;
    let core =
        run_with(FmmKernel::Stokeslet, sources, &[&f0, &f1, &f2, &psi], Some(forces), targets, &p, isa, par, device)?;
    let mut velocity = vec![[0.0; 3]; core.order.len()];
    for (k, &i) in core.order.iter().enumerate() {
        velocity[i] = [core.values[k][0], core.values[k][1], core.values[k][2]];
    }
    Ok(StokesletOutput { velocity, stats: core.stats })
}

/// The four harmonic densities of the Stokeslet ([`FmmKernel::Stokeslet`]): the force
/// components and `f . (x - c)`, `c` the centre of `cube`.
pub(crate) fn stokeslet_densities(sources: &[[f64; 3]], forces: &[[f64; 3]], cube: &RootCube) -> [Vec<f64>; 4] {
    let c = [0, 1, 2].map(|a| cube.origin[a] + 0.5 * cube.size);
    let psi: Vec<f64> = sources
        .iter()
        .zip(forces)
        .map(|(x, f)| f[0] * (x[0] - c[0]) + f[1] * (x[1] - c[1]) + f[2] * (x[2] - c[2]))
        .collect();
    let [f0, f1, f2] = [0, 1, 2].map(|a| forces.iter().map(|f| f[a]).collect());
    [f0, f1, f2, psi]
}

/// The checks of [`evaluate_stokeslet`].
pub(crate) fn validate_stokeslet(
    sources: &[[f64; 3]],
    forces: &[[f64; 3]],
    targets: Option<&[[f64; 3]]>,
    params: &FmmParams,
) -> Result<()> {
    params.validate()?;
    if forces.len() != sources.len() {
        return Err(Error::LengthMismatch {
            field: "sources.forces".into(),
            found: forces.len(),
            reference: "sources.positions".into(),
            expected: sources.len(),
        });
    }
    let zero = vec![0.0; sources.len()];
    validate(sources, &zero, targets.unwrap_or(sources))?;
    for (i, f) in forces.iter().enumerate() {
        for (c, &v) in f.iter().enumerate() {
            if !v.is_finite() {
                return Err(Error::NonFinite { field: "sources.forces".into(), index: i, component: c, value: v });
            }
        }
    }
    Ok(())
}

/// Per-thread buffers of the P2P stage: source runs, potentials and gradients of one leaf.
type LeafScratch<T> = (Vec<(usize, usize)>, Vec<T>, Vec<[T; 3]>);

/// Per target in tree order: Laplace `[phi, gx, gy, gz]`, Stokeslet `[ux, uy, uz, 0]`.
struct Core {
    values: Vec<[f64; 4]>,
    order: Vec<usize>,
    stats: FmmStats,
}

/// The evaluation: trees, the far field of every harmonic density, the near field of the
/// kernel, combined per target.
#[allow(clippy::too_many_arguments)]
fn run_with(
    kernel: FmmKernel,
    sources: &[[f64; 3]],
    densities: &[&[f64]],
    forces: Option<&[[f64; 3]]>,
    targets: Option<&[[f64; 3]]>,
    params: &FmmParams,
    isa: Isa,
    par: Par,
    device: Option<&dyn FmmBackend>,
) -> Result<Core> {
    let p = params.order;
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
                let (l, all) = params
                    .cost
                    .for_kernel(kernel, params.gradient)
                    .for_precision(params.precision)
                    .choose_leaf(&sorted, p, 0.65, par);
                stats.leaf_estimates = all;
                l
            }
        };
        stats.max_leaf = (leaf, params.max_leaf.is_none());
        let s = sorted.into_tree(leaf);
        let t = targets.map(|t| SortedPoints::new(t, cube).into_tree(leaf));
        (s, t)
    });
    let ttree = ttree_own.as_ref().unwrap_or(&stree);
    stats.boxes = [stree.boxes.len(), ttree.boxes.len()];
    stats.depth = [stree.depth(), ttree.depth()];
    let dens: Vec<Vec<f64>> = densities.iter().map(|d| stree.order.iter().map(|&i| d[i]).collect()).collect();
    let forces: Option<Vec<[f64; 3]>> = forces.map(|f| stree.order.iter().map(|&i| f[i]).collect());
    let values = match device {
        None => {
            let multipoles = upward(&stree, &dens, p, isa, par, &mut times);
            let lists: Lists =
                times.time(FmmStage::Traversal, || traverse_with(ttree, &stree, p, params.traversal, par));
            let near = NearSources::new(params.precision, &stree.points, &dens[0], forces.as_deref());
            near.far_and_near(
                kernel,
                ttree,
                &stree.boxes,
                &lists,
                &multipoles,
                params,
                isa,
                par,
                &mut times,
                &mut stats,
            )
        }
        Some(dev) => {
            let ops = Operators::shared(p);
            let pc = ParentChild::new(&ops);
            let mut session = dev.begin(device_spec(kernel, &ops, &pc, params, &stree, &dens, ttree))?;
            device_upward(&mut *session, &mut times)?;
            let lists: Lists =
                times.time(FmmStage::Traversal, || traverse_with(ttree, &stree, p, params.traversal, par));
            let cols: Vec<Vec<f64>> = match &forces {
                Some(f) => (0..3).map(|a| f.iter().map(|v| v[a]).collect()).collect(),
                None => vec![dens[0].clone()],
            };
            let near: Vec<&[f64]> = cols.iter().map(|c| c.as_slice()).collect();
            let side = SourceSide { boxes: &stree.boxes, multipoles: None, points: &stree.points, near: &near };
            let mut v = device_far_and_near(&mut *session, ttree, &side, &lists, &ops, par, &mut times, &mut stats)?;
            if params.precision == Precision::F32 {
                round_to_f32(&mut v);
            }
            v
        }
    };
    stats.times = times;
    Ok(Core { values, order: ttree.order.clone(), stats })
}

/// What a device's evaluation is made of ([`DeviceFmm`]): the order's operators, the
/// parent-child rotations, the source tree with its harmonic densities and the target tree.
pub(crate) fn device_spec<'a>(
    kernel: FmmKernel,
    ops: &'a Operators,
    pc: &'a ParentChild,
    params: &FmmParams,
    stree: &'a Octree,
    dens: &'a [Vec<f64>],
    ttree: &'a Octree,
) -> DeviceFmm<'a> {
    DeviceFmm {
        kernel,
        ops,
        gradient: params.gradient,
        updown: [&pc.updown[0], &pc.updown[1]],
        sources: stree,
        densities: dens,
        targets: ttree,
    }
}

/// Every value rounded to f32 (the results of [`Precision::F32`]).
pub(crate) fn round_to_f32(values: &mut [[f64; 4]]) {
    for x in values.iter_mut().flatten() {
        *x = *x as f32 as f64;
    }
}

/// P2M and M2M on a device, timed as the host's stages.
pub(crate) fn device_upward(session: &mut dyn FmmSession, times: &mut StageTimes<FmmStage>) -> Result<()> {
    times.time(FmmStage::P2M, || session.p2m())?;
    times.time(FmmStage::M2M, || session.m2m())
}

/// M2L, L2L, L2P and P2P on a device against `side`, by `lists`; the statistics as
/// [`far_and_near`]'s. Returns the values per target in tree order.
#[allow(clippy::too_many_arguments)]
pub(crate) fn device_far_and_near(
    session: &mut dyn FmmSession,
    ttree: &Octree,
    side: &SourceSide<'_>,
    lists: &Lists,
    ops: &Operators,
    par: Par,
    times: &mut StageTimes<FmmStage>,
    stats: &mut FmmStats,
) -> Result<Vec<[f64; 4]>> {
    let p = ops.p;
    let split = min_len(par);
    stats.device_variants = Some(session.variants());
    stats.m2l = lists.m2l.len();
    stats.betas = lists.betas.len();
    stats.m2l_work = m2l_work(&lists.m2l, p);
    times.time(FmmStage::M2L, || {
        let yrots: Vec<YRotation> =
            lists.betas.par_chunks(8).with_min_len(split.div_ceil(8)).flat_map_iter(|b| ops.y_rotations(b)).collect();
        session.m2l(side, lists, &yrots)
    })?;
    times.time(FmmStage::L2L, || session.l2l())?;
    times.time(FmmStage::L2P, || session.l2p())?;
    times.time(FmmStage::P2P, || session.p2p(side, lists))?;
    let mut counts = [0u64; 2];
    for &li in &ttree.leaves() {
        let n = ttree.boxes[li].count() as u64;
        for &s in lists.p2p_of(li) {
            counts[0] += 1;
            counts[1] += n * side.boxes[s as usize].count() as u64;
        }
    }
    stats.p2p = counts;
    session.values()
}

/// The near field's sources in the arithmetic of a [`Precision`].
pub(crate) enum NearSources {
    F64(FreeSources<f64>),
    F32(FreeSources<f32>),
}

impl NearSources {
    /// Sources at `points` with `charges`, or, for the Stokeslet, `forces`.
    pub(crate) fn new(precision: Precision, points: &[[f64; 3]], charges: &[f64], forces: Option<&[[f64; 3]]>) -> Self {
        fn make<T: FreeReal>(points: &[[f64; 3]], charges: &[f64], forces: Option<&[[f64; 3]]>) -> FreeSources<T> {
            match forces {
                Some(f) => FreeSources::with_forces(points, f),
                None => FreeSources::new(points, charges),
            }
        }
        match precision {
            Precision::F64 => Self::F64(make(points, charges, forces)),
            Precision::F32 => Self::F32(make(points, charges, forces)),
        }
    }

    /// [`far_and_near`] with these sources.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn far_and_near(
        &self,
        kernel: FmmKernel,
        ttree: &Octree,
        sboxes: &[OctBox],
        lists: &Lists,
        multipoles: &[f64],
        params: &FmmParams,
        isa: Isa,
        par: Par,
        times: &mut StageTimes<FmmStage>,
        stats: &mut FmmStats,
    ) -> Vec<[f64; 4]> {
        match self {
            Self::F64(src) => {
                far_and_near(kernel, ttree, sboxes, lists, multipoles, src, params, isa, par, times, stats)
            }
            Self::F32(src) => {
                let mut v = far_and_near(kernel, ttree, sboxes, lists, multipoles, src, params, isa, par, times, stats);
                round_to_f32(&mut v);
                v
            }
        }
    }
}

/// The rotations of the parent-child translations (polar angle `acos(+-1/sqrt 3)` of `t`).
pub(crate) struct ParentChild {
    pub(crate) updown: [YRotation; 2],
}

impl ParentChild {
    pub(crate) fn new(ops: &Operators) -> Self {
        let b0 = (1.0 / 3f64.sqrt()).acos();
        Self { updown: [ops.y_rotation(b0), ops.y_rotation(std::f64::consts::PI - b0)] }
    }

    /// The rotation of the translation from box `from` to box `to` (parent and child).
    fn rot(&self, from: &OctBox, to: &OctBox) -> &YRotation {
        let up = RootCube::centre_units(to)[2] > RootCube::centre_units(from)[2];
        &self.updown[if up { 0 } else { 1 }]
    }
}

/// The upward pass of `stree` for the densities `dens` (each in tree order): P2M at the leaves,
/// then M2M level by level. Returns `densities * p^2` coefficients per box.
pub(crate) fn upward(
    stree: &Octree,
    dens: &[Vec<f64>],
    p: usize,
    isa: Isa,
    par: Par,
    times: &mut StageTimes<FmmStage>,
) -> Vec<f64> {
    let p2 = p * p;
    let bs = dens.len() * p2;
    let split = min_len(par);
    let cube = stree.cube;
    let ops = Operators::shared(p);
    let pc = ParentChild::new(&ops);
    let mut multipoles = vec![0.0; stree.boxes.len() * bs];
    times.time(FmmStage::P2M, || {
        multipoles.par_chunks_mut(bs).with_min_len(split).enumerate().for_each_init(
            || LaneScratch::new(p),
            |w, (i, out)| {
                let b = &stree.boxes[i];
                if b.is_leaf() {
                    let x = &stree.points[b.begin..b.end];
                    for (c, o) in out.chunks_mut(p2).enumerate() {
                        let q = &dens[c][b.begin..b.end];
                        p2m_box(isa, x, q, cube.centre(b), cube.edge(b.level as usize), &ops.scalings, o, w);
                    }
                }
            },
        );
    });
    times.time(FmmStage::M2M, || {
        for l in (0..stree.depth()).rev() {
            let (lo, hi) = (stree.levels[l], stree.levels[l + 1]);
            let (head, below) = multipoles.split_at_mut(hi * bs);
            let below = &*below;
            head[lo * bs..].par_chunks_mut(bs).with_min_len(split).enumerate().for_each_init(
                || Scratch::new(p),
                |scr, (j, out)| {
                    let b = &stree.boxes[lo + j];
                    for ch in b.child_range() {
                        let child = &stree.boxes[ch];
                        let g = geometry(&cube, child, b, pc.rot(child, b));
                        let cin = &below[(ch - hi) * bs..(ch - hi + 1) * bs];
                        for (o, i) in out.chunks_mut(p2).zip(cin.chunks(p2)) {
                            ops.translate(Op::M2M, &g, p, i, o, scr);
                        }
                    }
                },
            );
        }
    });

    multipoles
}

/// M2L, L2L, L2P and P2P for the target tree `ttree` against the source boxes `sboxes` (of
/// one root cube) with their `multipoles` ([`upward`]) and particles `src` (the boxes' point
/// ranges), by the `lists` of a traversal. Returns the values per target in tree order.
#[allow(clippy::too_many_arguments)]
fn far_and_near<T: FreeReal>(
    kernel: FmmKernel,
    ttree: &Octree,
    sboxes: &[OctBox],
    lists: &Lists,
    multipoles: &[f64],
    src: &FreeSources<T>,
    params: &FmmParams,
    isa: Isa,
    par: Par,
    times: &mut StageTimes<FmmStage>,
    stats: &mut FmmStats,
) -> Vec<[f64; 4]> {
    let p = params.order;
    let p2 = p * p;
    let nc = match kernel {
        FmmKernel::Laplace => 1,
        FmmKernel::Stokeslet => 4,
    };
    let bs = nc * p2;
    let split = min_len(par);
    let cube = ttree.cube;
    let ops = Operators::shared(p);
    let pc = ParentChild::new(&ops);
    let txyz: [Vec<T>; 3] = [0, 1, 2].map(|a| ttree.points.iter().map(|y| T::from_f64(y[a])).collect());
    stats.m2l = lists.m2l.len();
    stats.betas = lists.betas.len();
    stats.m2l_work = m2l_work(&lists.m2l, p);

    // M2L by classes of one geometry (the same levels, offset and order): eight box pairs of a
    // class per translation, every operation eight lanes wide. Within a class every target box
    // appears once, so its pairs run in parallel; the classes run one after the other, in the
    // order of their first appearance (the sums are the same at any thread count).
    let mut locals = vec![0.0; ttree.boxes.len() * bs];
    times.time(FmmStage::M2L, || {
        let yrots: Vec<YRotation> =
            lists.betas.par_chunks(8).with_min_len(split.div_ceil(8)).flat_map_iter(|b| ops.y_rotations(b)).collect();
        let classes = m2l_classes(lists, ttree, sboxes);
        let locals_w = DisjointSlice::new(&mut locals);
        // One lane scratch per worker, made once for all classes.
        let scratch = ThreadScratch::<LaneScratch8>::new(rayon::current_num_threads() + 1);
        for class in &classes {
            let (t0, s0) = class.pairs[0];
            let g = geometry(&cube, &sboxes[s0 as usize], &ttree.boxes[t0 as usize], &yrots[class.beta as usize]);
            let q = class.order as usize;
            let nq = q * q;
            class.pairs.par_chunks(8).with_min_len(if split == 1 { 4 } else { split }).for_each(|chunk| {
                let mut slot = scratch.slot(rayon::current_thread_index().map_or(0, |i| i + 1));
                if slot.is_empty() {
                    slot.push(LaneScratch8::new(p));
                }
                let w = &mut slot[0];
                for c in 0..nc {
                    for (l, &(_, sb)) in chunk.iter().enumerate() {
                        let m = &multipoles[sb as usize * bs + c * p2..];
                        for (x, &v) in w.input[..nq].iter_mut().zip(&m[..nq]) {
                            x[l] = v;
                        }
                    }
                    for l in chunk.len()..8 {
                        for x in &mut w.input[..nq] {
                            x[l] = 0.0;
                        }
                    }
                    ops.translate_lanes(Op::M2L, &g, q, w);
                    for (l, &(tb, _)) in chunk.iter().enumerate() {
                        let o = tb as usize * bs + c * p2;
                        // SAFETY: a class holds each target box once and its chunks are
                        // disjoint, so no two tasks write one box's coefficients.
                        let out = unsafe { locals_w.range_mut(o, o + nq) };
                        for (y, x) in out.iter_mut().zip(&w.output[..nq]) {
                            *y += x[l];
                        }
                    }
                }
            });
        }
    });

    // Downward pass: L2L level by level.
    times.time(FmmStage::L2L, || {
        for l in 1..ttree.depth() {
            let (lo, hi) = (ttree.levels[l], ttree.levels[l + 1]);
            let (above, rest) = locals.split_at_mut(lo * bs);
            let above = &*above;
            rest[..(hi - lo) * bs].par_chunks_mut(bs).with_min_len(split).enumerate().for_each_init(
                || Scratch::new(p),
                |scr, (j, out)| {
                    let b = &ttree.boxes[lo + j];
                    let pi = b.parent as usize;
                    let parent = &ttree.boxes[pi];
                    let g = geometry(&cube, parent, b, pc.rot(parent, b));
                    for (o, i) in out.chunks_mut(p2).zip(above[pi * bs..(pi + 1) * bs].chunks(p2)) {
                        ops.translate(Op::L2L, &g, p, i, o, scr);
                    }
                },
            );
        }
    });

    // L2P and P2P at the target leaves, in tree order.
    let leaves = ttree.leaves();
    let nt = ttree.points.len();
    let mut values = vec![[0.0; 4]; nt];
    let origin = [0, 1, 2].map(|a| cube.origin[a] + 0.5 * cube.size);
    {
        let out_w = DisjointSlice::new(&mut values);
        let with_grad = params.gradient;
        times.time(FmmStage::L2P, || {
            leaves.par_iter().with_min_len(split).for_each_init(
                || (LaneScratch::new(p), Vec::<f64>::new(), Vec::<[f64; 3]>::new()),
                |(w, pot, grad), &li| {
                    let b = &ttree.boxes[li];
                    let n = b.count();
                    // SAFETY: leaves own disjoint point ranges.
                    let out = unsafe { out_w.range_mut(b.begin, b.end) };
                    let (c, h) = (cube.centre(b), cube.edge(b.level as usize));
                    let y = &ttree.points[b.begin..b.end];
                    let local = &locals[li * bs..(li + 1) * bs];
                    match kernel {
                        FmmKernel::Laplace => {
                            pot.clear();
                            pot.resize(n, 0.0);
                            grad.clear();
                            grad.resize(n, [0.0; 3]);
                            let g = with_grad.then_some(&mut grad[..]);
                            l2p_box(isa, &local[..p2], y, c, h, &ops.scalings, pot, g, w);
                            for k in 0..n {
                                out[k] = [pot[k], grad[k][0], grad[k][1], grad[k][2]];
                            }
                        }
                        FmmKernel::Stokeslet => {
                            for (comp, lc) in local.chunks(p2).enumerate() {
                                pot.clear();
                                pot.resize(n, 0.0);
                                grad.clear();
                                grad.resize(n, [0.0; 3]);
                                l2p_box(isa, lc, y, c, h, &ops.scalings, pot, Some(&mut grad[..]), w);
                                for k in 0..n {
                                    if comp < 3 {
                                        // phi_comp - (y - c)_comp grad phi_comp
                                        out[k][comp] += pot[k];
                                        let xk = y[k][comp] - origin[comp];
                                        for i in 0..3 {
                                            out[k][i] -= xk * grad[k][i];
                                        }
                                    } else {
                                        for i in 0..3 {
                                            out[k][i] += grad[k][i];
                                        }
                                    }
                                }
                            }
                        }
                    }
                },
            );
        });
        let p2p_counts = times.time(FmmStage::P2P, || {
            leaves
                .par_iter()
                .with_min_len(split)
                .map_init(
                    || (Vec::new(), Vec::<T>::new(), Vec::<[T; 3]>::new()),
                    |(ranges, pot, grad): &mut LeafScratch<T>, &li| {
                        let b = &ttree.boxes[li];
                        let n = b.count();
                        ranges.clear();
                        ranges.extend(lists.p2p_of(li).iter().map(|&s| {
                            let sb = &sboxes[s as usize];
                            (sb.begin, sb.end)
                        }));
                        let pairs: u64 = ranges.iter().map(|r| ((r.1 - r.0) * n) as u64).sum();
                        // SAFETY: leaves own disjoint point ranges.
                        let out = unsafe { out_w.range_mut(b.begin, b.end) };
                        let t = [0, 1, 2].map(|a| &txyz[a][b.begin..b.end]);
                        pot.clear();
                        pot.resize(n, T::ZERO);
                        grad.clear();
                        grad.resize(n, [T::ZERO; 3]);
                        match kernel {
                            FmmKernel::Laplace => {
                                laplace(isa, t, src, ranges, pot, with_grad.then_some(&mut grad[..]));
                                for k in 0..n {
                                    out[k][0] += pot[k].to_f64();
                                    for i in 0..3 {
                                        out[k][i + 1] += grad[k][i].to_f64();
                                    }
                                }
                            }
                            FmmKernel::Stokeslet => {
                                stokeslet(isa, t, src, ranges, grad);
                                for k in 0..n {
                                    for i in 0..3 {
                                        out[k][i] += grad[k][i].to_f64();
                                    }
                                }
                            }
                        }
                        [ranges.len() as u64, pairs]
                    },
                )
                .reduce(|| [0, 0], |a, b| [a[0] + b[0], a[1] + b[1]])
        });
        stats.p2p = p2p_counts;
    }
    values
}

/// M2L translations of one geometry: target and source levels, offset, order.
pub(crate) struct M2lClass {
    pub(crate) beta: u32,
    pub(crate) order: u8,
    /// `(target box, source box)`, each target once.
    pub(crate) pairs: Vec<(u32, u32)>,
}

/// The M2L entries grouped by geometry, classes in the order of their first entry.
pub(crate) fn m2l_classes(lists: &Lists, ttree: &Octree, sboxes: &[OctBox]) -> Vec<M2lClass> {
    let mut index: FastMap<(u8, u8, [i64; 3], u8), usize> = FastMap::default();
    let mut classes: Vec<M2lClass> = Vec::new();
    for (i, tb) in ttree.boxes.iter().enumerate() {
        let ct = RootCube::centre_units(tb);
        for e in lists.m2l_of(i) {
            let sb = &sboxes[e.source as usize];
            let cs = RootCube::centre_units(sb);
            let key = (tb.level, sb.level, [ct[0] - cs[0], ct[1] - cs[1], ct[2] - cs[2]], e.order);
            let k = *index.entry(key).or_insert_with(|| {
                classes.push(M2lClass { beta: e.beta, order: e.order, pairs: Vec::new() });
                classes.len() - 1
            });
            classes[k].pairs.push((i as u32, e.source));
        }
    }
    classes
}

#[cfg(test)]
mod tests {
    use super::m2l_work;
    use crate::traversal::M2lEntry;

    #[test]
    fn m2l_work_is_the_mean_cube_ratio_and_zero_without_translations() {
        let w = m2l_work(&[], 22);
        assert!(w == 0.0 && w.is_sign_positive(), "{w}");
        let e = |order| M2lEntry { source: 0, beta: 0, order };
        let w = m2l_work(&[e(10), e(20)], 20);
        assert!((w - (0.125 + 1.0) / 2.0).abs() < 1e-15, "{w}");
    }
}
