//! One treecode evaluation on one process: `phi(x_i) = sum_j G(x_i, y_j) q_j` for targets `x_i`
//! and sources `y_j`, with the BLDTT (paper Algorithm 1): trees, upward pass, dual traversal,
//! the four interaction lists, downward pass, and the results in the caller's order.

use parki_comm::Comm;
use parki_core::isa::Isa;
use parki_core::timing::{StageKind, StageTimes};
use parki_core::{Error, Par, Result};
use rayon::iter::{IndexedParallelIterator, ParallelIterator};
use rayon::slice::ParallelSliceMut;

use crate::cheb::AxisNodes;
use crate::compute::Soa;
use crate::distributed::{evaluate_owned, LetStats};
use crate::kernel::{
    Coulomb, PairKernel, RegularizedCoulomb, RegularizedYukawa, SinOverR, Stokes, Stokeslet, Stresslet, TreeKernel,
    Yukawa,
};
use crate::lists::{proxy_soa, used_clusters, SourceSide};
use crate::traversal::Interactions;
use crate::tree::Tree;
use crate::upward::ProxyCharges;

/// Largest interpolation degree accepted.
pub const MAX_DEGREE: usize = 16;

/// The treecode's parameters (BaryTree's `interpOrder`, `theta`, `maxPerSourceLeaf`,
/// `maxPerTargetLeaf`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TreecodeParams {
    /// Interpolation degree `n` (`(n + 1)^3` proxies per cluster), `1..=16`.
    pub degree: usize,
    /// MAC parameter, `0 <= theta < 1`; 0 gives the direct sum.
    pub theta: f64,
    /// Most sources per source leaf.
    pub max_leaf: usize,
    /// Most targets per target leaf (batch).
    pub max_batch: usize,
}

impl TreecodeParams {
    /// Checks the ranges.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] naming `treecode.degree`, `treecode.theta`, `treecode.max_leaf` or
    /// `treecode.max_batch`.
    pub fn validate(&self) -> Result<()> {
        let bad = |field: &str, value: String, allowed: &str| {
            Err(Error::OutOfRange { field: format!("treecode.{field}"), value, allowed: allowed.into() })
        };
        if !(1..=MAX_DEGREE).contains(&self.degree) {
            return bad("degree", self.degree.to_string(), "1 to 16");
        }
        if !(self.theta.is_finite() && (0.0..1.0).contains(&self.theta)) {
            return bad("theta", self.theta.to_string(), "0 <= theta < 1");
        }
        if self.max_leaf == 0 {
            return bad("max_leaf", "0".into(), ">= 1");
        }
        if self.max_batch == 0 {
            return bad("max_batch", "0".into(), ">= 1");
        }
        Ok(())
    }

    /// The leaf and batch size for degree `n`: `1.5 (n + 1)^3`, at least 32 (the fastest
    /// measured at degrees 4 and 8, docs/treecode.md §2).
    pub fn default_leaf(degree: usize) -> usize {
        ((degree + 1).pow(3) * 3 / 2).max(32)
    }

    /// Proxies per cluster, `(n + 1)^3`.
    pub fn proxies(&self) -> usize {
        (self.degree + 1).pow(3)
    }
}

/// The parameters for a relative l2 tolerance, and which row of [`TOLERANCE_TABLE`] gave
/// them.
///
/// The table is measured (docs/treecode.md): Coulomb at 1e5 points, random normal charges,
/// leaves of `1.5 (n + 1)^3`, the error of eq. (22) at 1000 targets, for every degree 2..10
/// and theta 0.5..0.8, on the uniform cube and on the Plummer sphere; each row is the worse of
/// the two errors, and the rows are the settings no other beats on both that error and the
/// summed time. The first row whose error is at most half of `tol` is chosen; the leaf and batch
/// sizes are `1.5 (n + 1)^3` (at least 32), the fastest at degrees 4 and 8. (Theta 0.8 costs
/// the Plummer sphere 28x the cube's error at degree 8, theta 0.5 nothing: one table for the
/// uniform cube alone would miss clustered sets by an order of magnitude.) Other kernels and
/// sets have their own constants: `[run] check` measures a run's error.
///
/// # Errors
/// [`Error::OutOfRange`] naming `problem.tolerance` outside `[1e-12, 1)`.
pub fn for_tolerance(tol: f64) -> Result<(TreecodeParams, usize)> {
    if !(tol.is_finite() && (1e-12..1.0).contains(&tol)) {
        return Err(Error::OutOfRange {
            field: "problem.tolerance".into(),
            value: tol.to_string(),
            allowed: "1e-12 <= tolerance < 1".into(),
        });
    }
    let row = TOLERANCE_TABLE.iter().position(|r| r.0 <= 0.5 * tol).unwrap_or(TOLERANCE_TABLE.len() - 1);
    let (_, degree, theta) = TOLERANCE_TABLE[row];
    let leaf = TreecodeParams::default_leaf(degree);
    Ok((TreecodeParams { degree, theta, max_leaf: leaf, max_batch: leaf }, row))
}

/// Measured `(error, degree, theta)`, loosest first (see [`for_tolerance`]): the worse of the
/// uniform cube's and the Plummer sphere's errors.
pub const TOLERANCE_TABLE: [(f64, usize, f64); 18] = [
    (3.3e-3, 2, 0.8),
    (6.7e-4, 3, 0.8),
    (1.6e-4, 4, 0.8),
    (6.7e-5, 4, 0.7),
    (4.6e-5, 5, 0.8),
    (2.2e-5, 4, 0.6),
    (1.4e-5, 6, 0.8),
    (4.1e-6, 7, 0.8),
    (2.9e-6, 6, 0.7),
    (7.2e-7, 7, 0.7),
    (5.7e-7, 6, 0.6),
    (6.3e-8, 7, 0.6),
    (5.7e-8, 6, 0.5),
    (5.0e-9, 8, 0.6),
    (2.9e-9, 7, 0.5),
    (6.0e-11, 8, 0.5),
    (2.1e-12, 9, 0.5),
    (1.2e-13, 10, 0.5),
];

/// The stages of a treecode evaluation, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TreeStage {
    /// RCB partition and redistribution of the particles, and the results back (distributed
    /// runs).
    Partition,
    /// Source and target trees.
    TreeBuild,
    /// Proxy charges.
    Upward,
    /// The dual traversal into the four lists.
    Traversal,
    /// Fetching the locally essential tree (distributed runs).
    Let,
    /// PP, PC, CP and CC against local sources.
    ComputeLocal,
    /// PP, PC, CP and CC against remote sources (distributed runs).
    ComputeRemote,
    /// Proxy potentials to the targets.
    Downward,
}

impl StageKind for TreeStage {
    const ALL: &'static [Self] = &[
        TreeStage::Partition,
        TreeStage::TreeBuild,
        TreeStage::Upward,
        TreeStage::Traversal,
        TreeStage::Let,
        TreeStage::ComputeLocal,
        TreeStage::ComputeRemote,
        TreeStage::Downward,
    ];

    fn name(self) -> &'static str {
        match self {
            TreeStage::Partition => "partition",
            TreeStage::TreeBuild => "tree build",
            TreeStage::Upward => "upward pass",
            TreeStage::Traversal => "traversal",
            TreeStage::Let => "LET",
            TreeStage::ComputeLocal => "compute local",
            TreeStage::ComputeRemote => "compute remote",
            TreeStage::Downward => "downward pass",
        }
    }
}

/// What an evaluation did.
#[derive(Clone, Debug, Default)]
pub struct TreecodeStats {
    /// Entries of the PP, PC, CP and CC lists.
    pub interactions: [usize; 4],
    /// Kernel evaluations of the four lists.
    pub evaluations: [u64; 4],
    /// Clusters of the source and target trees.
    pub clusters: [usize; 2],
    /// Seconds per stage.
    pub times: StageTimes<TreeStage>,
    /// What the locally essential tree moved (distributed runs).
    pub let_tree: LetStats,
    /// Sources and targets this rank owned after the partition (distributed runs).
    pub owned: [usize; 2],
}

/// Validates positions (finite) and the densities' length.
pub(crate) fn validate(sources: &[[f64; 3]], densities: &[f64], width: usize, targets: &[[f64; 3]]) -> Result<()> {
    if densities.len() != sources.len() * width {
        return Err(Error::LengthMismatch {
            field: "sources.densities".into(),
            found: densities.len(),
            reference: format!("sources.positions x {width}"),
            expected: sources.len() * width,
        });
    }
    for (field, pts) in [("sources.positions", sources), ("targets.positions", targets)] {
        for (index, p) in pts.iter().enumerate() {
            if let Some(component) = (0..3).find(|&d| !p[d].is_finite()) {
                return Err(Error::NonFinite { field: field.into(), index, component, value: p[component] });
            }
        }
    }
    if let Some(k) = densities.iter().position(|v| !v.is_finite()) {
        return Err(Error::NonFinite {
            field: "sources.densities".into(),
            index: k / width,
            component: k % width,
            value: densities[k],
        });
    }
    Ok(())
}

/// Evaluates the treecode sum of `kernel` at `targets` from `sources` with `densities`
/// (`K::DENSITY` per source, row-major, input order): `K::VALUE` values per target, row-major,
/// in the targets' order, and what it did.
///
/// `par` splits every stage over rayon's threads (the leaves of the PP and PC lists, the target
/// clusters of CP and CC, the clusters of a level in both passes); `isa` picks the vector code.
///
/// # Errors
/// Parameters out of range ([`TreecodeParams::validate`]), densities of the wrong length, and
/// coordinates or densities that are not finite, each naming the field and the value.
pub fn evaluate<K: PairKernel>(
    kernel: &K,
    params: &TreecodeParams,
    sources: &[[f64; 3]],
    densities: &[f64],
    targets: &[[f64; 3]],
    par: Par,
    isa: Isa,
) -> Result<(Vec<f64>, TreecodeStats)> {
    // one process is the distributed evaluation on a communicator of one (no window, no LET)
    evaluate_owned(&Comm::single(), kernel, params, sources, densities, targets, par, isa)
}

/// The local tree as a source side: `sources` (input order, `proxies.ncomp` densities each) in
/// tree order, and the proxies of the clusters that the PC and CC lists use.
pub(crate) fn local_side(
    stree: &Tree,
    sources: &[[f64; 3]],
    densities: &[f64],
    proxies: &ProxyCharges,
    lists: &Interactions,
    par: Par,
) -> SourceSide {
    let nd = proxies.ncomp;
    let np = (proxies.degree + 1).pow(3);
    let src = tree_order(stree, sources, densities, nd, par);
    let (sused, slots) = used_clusters(stree.clusters.len(), &[&lists.pc, &lists.cc], false);
    let nodes: Vec<&[AxisNodes; 3]> = sused.iter().map(|&c| &proxies.nodes[c]).collect();
    let sprox = proxy_soa(&nodes, np, nd, |i| Some(proxies.of(sused[i])));
    SourceSide {
        particles: src,
        ranges: stree.clusters.iter().map(|c| (c.begin, c.end)).collect(),
        proxies: sprox,
        slots,
    }
}

/// `sources` (input order, `nd` densities each) in `stree`'s order, densities component-major;
/// in chunks over the threads with `par`.
pub(crate) fn tree_order(stree: &Tree, sources: &[[f64; 3]], densities: &[f64], nd: usize, par: Par) -> Soa {
    const CHUNK: usize = 1 << 14;
    let ns = sources.len();
    let order = &stree.order[..];
    let mut src = Soa::zeroed(ns, nd);
    type Chunk<'a> = (usize, ((&'a mut [f64], &'a mut [f64]), &'a mut [f64]));
    let coords = |(c, ((x, y), z)): Chunk| {
        for (k, &j) in order[c * CHUNK..].iter().take(x.len()).enumerate() {
            [x[k], y[k], z[k]] = sources[j as usize];
        }
    };
    let density = |comp: usize| {
        move |(c, q): (usize, &mut [f64])| {
            for (k, &j) in order[c * CHUNK..].iter().take(q.len()).enumerate() {
                q[k] = densities[j as usize * nd + comp];
            }
        }
    };
    let Soa { x, y, z, q } = &mut src;
    match par {
        Par::Rayon(_) => {
            x.par_chunks_mut(CHUNK)
                .zip(y.par_chunks_mut(CHUNK))
                .zip(z.par_chunks_mut(CHUNK))
                .enumerate()
                .for_each(coords);
            for (comp, qc) in q.chunks_mut(ns.max(1)).enumerate().take(nd) {
                qc.par_chunks_mut(CHUNK).enumerate().for_each(density(comp));
            }
        }
        Par::Seq => {
            x.chunks_mut(CHUNK).zip(y.chunks_mut(CHUNK)).zip(z.chunks_mut(CHUNK)).enumerate().for_each(coords);
            for (comp, qc) in q.chunks_mut(ns.max(1)).enumerate().take(nd) {
                qc.chunks_mut(CHUNK).enumerate().for_each(density(comp));
            }
        }
    }
    src
}

/// A computation generic over the kernel, run by [`TreeKernel::visit`] with the concrete
/// kernel type of a built-in kernel.
pub trait KernelVisitor {
    /// What the computation returns.
    type Output;
    /// Runs with `kernel`.
    fn visit<K: PairKernel>(self, kernel: &K) -> Self::Output;
}

impl TreeKernel {
    /// Runs `v` with this kernel's [`PairKernel`] type.
    pub fn visit<V: KernelVisitor>(self, v: V) -> V::Output {
        match self {
            TreeKernel::Coulomb => v.visit(&Coulomb),
            TreeKernel::Yukawa { kappa } => v.visit(&Yukawa { kappa }),
            TreeKernel::RegularizedCoulomb { epsilon } => v.visit(&RegularizedCoulomb { epsilon }),
            TreeKernel::RegularizedYukawa { kappa, epsilon } => v.visit(&RegularizedYukawa { kappa, epsilon }),
            TreeKernel::SinOverR { wavenumber } => v.visit(&SinOverR { wavenumber }),
            TreeKernel::Stokeslet => v.visit(&Stokeslet),
            TreeKernel::Stresslet => v.visit(&Stresslet),
            TreeKernel::Stokes => v.visit(&Stokes),
        }
    }

    /// The summed densities of the caller's per-source `inputs` ([`TreeKernel::input_width`]
    /// each), their length checked against `sources.inputs`.
    ///
    /// # Errors
    /// [`Error::LengthMismatch`] naming `sources.inputs`.
    pub fn checked_densities(self, sources: usize, inputs: &[f64]) -> Result<Vec<f64>> {
        let w = self.input_width();
        if inputs.len() != sources * w {
            return Err(Error::LengthMismatch {
                field: "sources.inputs".into(),
                found: inputs.len(),
                reference: format!("sources.positions x {w}"),
                expected: sources * w,
            });
        }
        Ok(self.densities(inputs))
    }
}

/// [`evaluate`] for a built-in kernel, with the caller's per-source inputs
/// ([`TreeKernel::input_width`] each: charges, forces, or dipoles and normals) converted to the
/// summed densities.
///
/// # Errors
/// As [`evaluate`]; the inputs' length is checked against `sources.inputs`.
pub fn evaluate_kernel(
    kernel: TreeKernel,
    params: &TreecodeParams,
    sources: &[[f64; 3]],
    inputs: &[f64],
    targets: &[[f64; 3]],
    par: Par,
    isa: Isa,
) -> Result<(Vec<f64>, TreecodeStats)> {
    let q = kernel.checked_densities(sources.len(), inputs)?;
    struct One<'a>(&'a TreecodeParams, &'a [[f64; 3]], &'a [f64], &'a [[f64; 3]], Par, Isa);
    impl KernelVisitor for One<'_> {
        type Output = Result<(Vec<f64>, TreecodeStats)>;
        fn visit<K: PairKernel>(self, k: &K) -> Self::Output {
            evaluate(k, self.0, self.1, self.2, self.3, self.4, self.5)
        }
    }
    kernel.visit(One(params, sources, &q, targets, par, isa))
}
