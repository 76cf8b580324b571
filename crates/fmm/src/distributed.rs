//! The FMM over MPI ranks: Morton partitions, local octrees of one global tree, shared boxes
//! summed by one all-reduce, and the locally essential tree (LET) of remote boxes, multipoles
//! and particles read by passive-target one-sided gets.
//!
//! 1. **Root cube**: the bounds of every rank's points (two all-reduces), so the cube, the
//!    Morton keys and every box are those of the one-process evaluation.
//! 2. **Partition** by splitter keys ([`crate::partition`]): rank `r` owns the keys in
//!    `[s_r, s_(r+1))`, and no leaf of the global source or target tree holds points of two
//!    ranks.
//! 3. **Local trees** ([`SortedPoints::tree_split`]): each rank's octree of its own points, in
//!    which the boxes that strictly enclose a splitter (the *shared* boxes, at most 21 per
//!    splitter, the same list on every rank) are split whatever their local count. Every other
//!    box lies in one rank's key range, so its count, its children and its split decision are
//!    the global tree's: the local trees are the global tree cut along the splitters.
//! 4. **Upward pass** on each local tree; the shared boxes' partial multipoles (and counts) are
//!    summed by one all-reduce. M2M is linear, so these are the global tree's multipoles.
//! 5. **LET** ([`crate::let_tree`]): each rank exposes its boxes (records in breadth-first order, so a box's
//!    children are one contiguous block), its multipoles and its particles (in key order). The
//!    *frontier* (the unshared children of shared boxes, and an unshared root) is all-gathered.
//!    Every rank then knows the global tree's top: the shared boxes, the frontier, and its own
//!    subtrees in full. The dual traversal of its target tree runs against that; where it must
//!    split a remote box whose children it does not know, the pair waits, the children of all
//!    such boxes are read (one shared-lock epoch per remote rank), and the waiting pairs go on
//!    (at most the tree's depth of rounds). Then the multipoles of the remote M2L sources and
//!    the particles of the remote P2P leaves (merged intervals) are read.
//! 6. **Downward**: M2L, L2L, L2P and P2P as on one process, against the LET; the values go
//!    back to the callers through both routes.
//!
//! The traversal makes the one-process traversal's decisions (the boxes, their levels and
//! whether they are leaves are the global tree's), and every multipole is the global one, so
//! the values equal the one-process evaluation's up to the order of summation (the tests check
//! 1e-13) when the leaf size is given; the cost model's choice sums per-rank estimates, which
//! may differ from the one-process estimate near the splitters.

use std::collections::HashMap;
use std::time::Instant;

use parki_comm::{as_bytes, Comm, ReduceOp};
use parki_core::isa::Isa;
use parki_core::timing::StageTimes;
use parki_core::{Par, Result};

use crate::backend::{FmmBackend, FmmSession, SourceSide};
use crate::evaluate::{
    device_far_and_near, device_spec, device_upward, evaluate_on, evaluate_stokeslet_on, in_units, round_to_f32,
    stokeslet_densities, units_of, upward, validate, validate_stokeslet, FmmKernel, FmmOutput, FmmParams, FmmStage,
    FmmStats, NearSources, ParentChild, Precision, StokesletOutput,
};
use crate::let_tree::{box_id, record, FrontierSlot, LetTree, Shared, RECORD_BYTES};
use crate::octree::{encloses, Octree, RootCube, SortedPoints};
use crate::partition::{global_cube, shared_boxes, Partition};
use crate::translate::Operators;

/// `phi` and its gradient, as [`evaluate`](fn@crate::evaluate), for the sources and targets of every rank of
/// `comm`: each rank passes any part of the sources (with their charges) and of the targets
/// (its sources when `None`) and gets its targets' values, summed over every rank's sources.
/// On one rank this is [`evaluate`](fn@crate::evaluate). Collective.
///
/// # Errors
/// As [`evaluate`](fn@crate::evaluate), on every rank when any rank's input is bad.
pub fn evaluate_distributed(
    comm: &Comm,
    sources: &[[f64; 3]],
    charges: &[f64],
    targets: Option<&[[f64; 3]]>,
    params: &FmmParams,
    isa: Isa,
    par: Par,
) -> Result<FmmOutput> {
    evaluate_distributed_on(comm, sources, charges, targets, params, isa, par, None)
}

/// [`evaluate_distributed`] with each rank's compute stages on `device` when given (its own
/// device: the caller opens the rank's one; see [`crate::evaluate::evaluate_on`]). A device
/// error on any rank is every rank's error, after the collective steps. Collective.
///
/// # Errors
/// As [`evaluate_distributed`], and the device's.
#[allow(clippy::too_many_arguments)]
pub fn evaluate_distributed_on(
    comm: &Comm,
    sources: &[[f64; 3]],
    charges: &[f64],
    targets: Option<&[[f64; 3]]>,
    params: &FmmParams,
    isa: Isa,
    par: Par,
    device: Option<&dyn FmmBackend>,
) -> Result<FmmOutput> {
    comm.agree(params.validate().and_then(|()| validate(sources, charges, targets.unwrap_or(sources))))?;
    let u = units_of(Some(comm), sources, charges, targets);
    if u.rescaled() {
        return in_units(u, sources, charges, targets, |x, q, y| {
            evaluate_distributed_on(comm, x, q, y, params, isa, par, device)
        });
    }
    if comm.size() == 1 {
        return evaluate_on(sources, charges, targets, params, isa, par, device);
    }
    let cube = global_cube(comm, sources, targets);
    let (values, stats) =
        run_distributed(comm, FmmKernel::Laplace, cube, sources, &[charges], targets, params, isa, par, device)?;
    let potential = values.iter().map(|v| v[0]).collect();
    let gradient = match params.gradient {
        true => values.iter().map(|v| [v[1], v[2], v[3]]).collect(),
        false => Vec::new(),
    };
    Ok(FmmOutput { potential, gradient, stats })
}

/// The Stokeslet velocity, as [`evaluate_stokeslet`](crate::evaluate_stokeslet), over the ranks of `comm` (see
/// [`evaluate_distributed`]). Collective.
///
/// # Errors
/// As [`evaluate_stokeslet`](crate::evaluate_stokeslet), on every rank when any rank's input is bad.
pub fn evaluate_stokeslet_distributed(
    comm: &Comm,
    sources: &[[f64; 3]],
    forces: &[[f64; 3]],
    targets: Option<&[[f64; 3]]>,
    params: &FmmParams,
    isa: Isa,
    par: Par,
) -> Result<StokesletOutput> {
    evaluate_stokeslet_distributed_on(comm, sources, forces, targets, params, isa, par, None)
}

/// [`evaluate_stokeslet_distributed`] with each rank's compute stages on `device` when given
/// (see [`evaluate_distributed_on`]). Collective.
///
/// # Errors
/// As [`evaluate_stokeslet_distributed`], and the device's.
#[allow(clippy::too_many_arguments)]
pub fn evaluate_stokeslet_distributed_on(
    comm: &Comm,
    sources: &[[f64; 3]],
    forces: &[[f64; 3]],
    targets: Option<&[[f64; 3]]>,
    params: &FmmParams,
    isa: Isa,
    par: Par,
    device: Option<&dyn FmmBackend>,
) -> Result<StokesletOutput> {
    comm.agree(validate_stokeslet(sources, forces, targets, params))?;
    let u = units_of(Some(comm), sources, forces, targets);
    if u.rescaled() {
        return in_units(u, sources, forces, targets, |x, f, y| {
            evaluate_stokeslet_distributed_on(comm, x, f, y, params, isa, par, device)
        });
    }
    if comm.size() == 1 {
        return evaluate_stokeslet_on(sources, forces, targets, params, isa, par, device);
    }
    let cube = global_cube(comm, sources, targets);
    let [f0, f1, f2, psi] = stokeslet_densities(sources, forces, &cube);
    let mut p = *params;
    p.gradient = true;
    let (values, stats) = run_distributed(
        comm,
        FmmKernel::Stokeslet,
        cube,
        sources,
        &[&f0, &f1, &f2, &psi],
        targets,
        &p,
        isa,
        par,
        device,
    )?;
    Ok(StokesletOutput { velocity: values.iter().map(|v| [v[0], v[1], v[2]]).collect(), stats })
}

/// The evaluation on more than one rank (see the module documentation). Returns the values
/// per caller's target (Laplace `[phi, grad]`, Stokeslet `[u, 0]`) and the statistics.
#[allow(clippy::too_many_arguments)]
fn run_distributed(
    comm: &Comm,
    kernel: FmmKernel,
    cube: RootCube,
    sources: &[[f64; 3]],
    densities: &[&[f64]],
    targets: Option<&[[f64; 3]]>,
    params: &FmmParams,
    isa: Isa,
    par: Par,
    device: Option<&dyn FmmBackend>,
) -> Result<(Vec<[f64; 4]>, FmmStats)> {
    let (me, size) = (comm.rank(), comm.size());
    let p = params.order;
    let nc = densities.len();
    let bs = nc * p * p;
    let mut stats = FmmStats::default();
    let mut times = StageTimes::<FmmStage>::default();

    // 1-2. The partition.
    let clock = Instant::now();
    let packed: Vec<f64> = (0..sources.len()).flat_map(|i| densities.iter().map(move |d| d[i])).collect();
    let part = Partition::new(
        comm,
        &cube,
        sources,
        &packed,
        nc,
        targets,
        params.max_leaf,
        &params.cost.for_kernel(kernel, params.gradient).for_precision(params.precision),
        p,
        par,
    );
    drop(packed);
    stats.max_leaf = (part.max_leaf, params.max_leaf.is_none());
    stats.leaf_estimates = part.leaf_estimates.clone();
    stats.owned = [part.sources.len(), part.targets.as_ref().map_or(part.sources.len(), |t| t.len())];
    times.add(FmmStage::Partition, clock.elapsed().as_secs_f64());

    // 3. Local trees cut along the splitters.
    let clock = Instant::now();
    let stree = SortedPoints::new(&part.sources, cube).tree_split(part.max_leaf, &part.splitters);
    let ttree_own =
        part.targets.as_ref().map(|t| SortedPoints::new(t, cube).tree_split(part.max_leaf, &part.splitters));
    let ttree = ttree_own.as_ref().unwrap_or(&stree);
    stats.boxes = [stree.boxes.len(), ttree.boxes.len()];
    stats.depth = [stree.depth(), ttree.depth()];
    times.add(FmmStage::TreeBuild, clock.elapsed().as_secs_f64());

    // 4. Upward pass and the shared boxes' sums.
    let dens: Vec<Vec<f64>> =
        (0..nc).map(|c| stree.order.iter().map(|&i| part.densities[i * nc + c]).collect()).collect();
    // On a device: P2M and M2M there, the multipoles downloaded for the shared sums and the
    // exposure; a device error is agreed on here, a point every rank reaches.
    let ops = Operators::shared(p);
    // the parent-child rotations the device's session borrows (the host's upward pass makes its own)
    let pc = device.map(|_| ParentChild::new(&ops));
    let mut session: Option<Box<dyn FmmSession + '_>> = None;
    let multipoles = match (device, &pc) {
        (Some(dev), Some(pc)) => {
            let made = dev.begin(device_spec(kernel, &ops, pc, params, &stree, &dens, ttree)).and_then(|mut s| {
                device_upward(&mut *s, &mut times)?;
                let m = s.multipoles()?;
                Ok((s, m))
            });
            let (s, m) = comm.agree(made)?;
            session = Some(s);
            m
        }
        _ => upward(&stree, &dens, p, isa, par, &mut times),
    };
    let clock = Instant::now();
    let ids = shared_boxes(&part.splitters);
    let (counts, shared_multipoles) = shared_sums(comm, &stree, &part.splitters, &ids, &multipoles, bs);
    let shared = Shared { ids: &ids, counts: &counts, multipoles: &shared_multipoles, bs };
    stats.let_tree.shared = counts.iter().filter(|&&c| c > 0).count();

    // 5. Exposure, the frontier, the LET's top; the traversal reading remote children; the
    // remote multipoles and particles.
    let width = 3 + nc;
    let nl = stree.boxes.len();
    let mut exposed: Vec<f64> = Vec::with_capacity(nl * 9 + stree.points.len() * width);
    for b in &stree.boxes {
        exposed.extend_from_slice(&record(b));
    }
    for (k, x) in stree.points.iter().enumerate() {
        exposed.extend_from_slice(x);
        exposed.extend(dens.iter().map(|d| d[k]));
    }
    let (frontier, per_rank, local_frontier) = gather_frontier(comm, &stree, &part.splitters);
    let boxes_per_rank = comm.all_gather(&[nl as u64]);
    let particles_at: Vec<usize> = boxes_per_rank.iter().map(|&n| n as usize * RECORD_BYTES).collect();
    let mut tree = LetTree::new(&stree, me, &shared, &frontier, per_rank);
    stats.let_tree.boxes = frontier.iter().filter(|s| s[0] >= 0.0).count() - local_frontier;
    times.add(FmmStage::Let, clock.elapsed().as_secs_f64());

    let clock = Instant::now();
    let records = comm.expose(as_bytes(&exposed));
    let window = comm.expose(as_bytes(&multipoles));
    let mut let_stats = stats.let_tree;
    let_stats.transport = window.transport();
    let (lists, traversal) = tree.traverse(ttree, &records, size, p, params.traversal, &mut let_stats);
    times.add(FmmStage::Traversal, traversal);
    let (extra, remote) = tree.read_sources(
        &lists,
        me,
        [&records, &window],
        &particles_at,
        &multipoles,
        &shared,
        width,
        stree.points.len(),
        &mut let_stats,
    );
    window.free();
    records.free();
    drop(exposed);
    let mut all_multipoles = multipoles;
    all_multipoles.extend_from_slice(&extra);
    drop(extra);
    stats.let_tree = let_stats;
    let (points, cols) = let_points(&stree.points, &dens, &remote, width);
    times.add(FmmStage::Let, (clock.elapsed().as_secs_f64() - traversal).max(0.0));

    // 6. Downward, and the values back to the callers.
    let values = match session.as_mut() {
        None => {
            let src = let_sources(params.precision, &points, &cols);
            src.far_and_near(
                kernel,
                ttree,
                &tree.boxes,
                &lists,
                &all_multipoles,
                params,
                isa,
                par,
                &mut times,
                &mut stats,
            )
        }
        Some(s) => {
            let near: Vec<&[f64]> = match kernel {
                FmmKernel::Laplace => vec![&cols[0]],
                FmmKernel::Stokeslet => cols[..3].iter().map(|c| c.as_slice()).collect(),
            };
            let side =
                SourceSide { boxes: &tree.boxes, multipoles: Some(&all_multipoles), points: &points, near: &near };
            let done = device_far_and_near(&mut **s, ttree, &side, &lists, &ops, par, &mut times, &mut stats);
            let mut v = comm.agree(done)?;
            if params.precision == Precision::F32 {
                round_to_f32(&mut v);
            }
            v
        }
    };
    drop(session);
    let clock = Instant::now();
    let mut by_owned = vec![0.0; values.len() * 4];
    for (k, &i) in ttree.order.iter().enumerate() {
        by_owned[i * 4..i * 4 + 4].copy_from_slice(&values[k]);
    }
    let out = part.return_to_callers(comm, &by_owned, 4, targets.map_or(sources.len(), |t| t.len()));
    times.add(FmmStage::Partition, clock.elapsed().as_secs_f64());
    stats.times = times;
    Ok((out.chunks_exact(4).map(|v| [v[0], v[1], v[2], v[3]]).collect(), stats))
}

/// The global counts and multipoles of the shared boxes `ids` (one all-reduce each), from the
/// local tree's partial ones.
fn shared_sums(
    comm: &Comm,
    stree: &Octree,
    splitters: &[u64],
    ids: &[(u8, u64)],
    multipoles: &[f64],
    bs: usize,
) -> (Vec<u64>, Vec<f64>) {
    let local: HashMap<(u8, u64), usize> =
        stree.boxes.iter().enumerate().filter(|(_, b)| encloses(b, splitters)).map(|(i, b)| (box_id(b), i)).collect();
    let mut counts = vec![0u64; ids.len()];
    let mut sums = vec![0.0; ids.len() * bs];
    for (j, id) in ids.iter().enumerate() {
        if let Some(&i) = local.get(id) {
            counts[j] = stree.boxes[i].count() as u64;
            sums[j * bs..(j + 1) * bs].copy_from_slice(&multipoles[i * bs..(i + 1) * bs]);
        }
    }
    comm.all_reduce(&mut counts, ReduceOp::Sum);
    comm.all_reduce(&mut sums, ReduceOp::Sum);
    (counts, sums)
}

/// Every rank's frontier (its unshared boxes with points whose parent is shared, and its root
/// when that is unshared), all-gathered: the slots, the slots per rank, and this rank's count.
fn gather_frontier(comm: &Comm, stree: &Octree, splitters: &[u64]) -> (Vec<FrontierSlot>, usize, usize) {
    let shared = |i: usize| encloses(&stree.boxes[i], splitters);
    let mine: Vec<FrontierSlot> = (0..stree.boxes.len())
        .filter(|&i| {
            let b = &stree.boxes[i];
            b.count() > 0 && !shared(i) && (i == 0 || shared(b.parent as usize))
        })
        .map(|i| {
            let mut slot = [0.0; 10];
            slot[..9].copy_from_slice(&record(&stree.boxes[i]));
            slot[9] = i as f64;
            slot
        })
        .collect();
    let per_rank = comm.all_gather(&[mine.len() as u64]).into_iter().max().unwrap_or(0).max(1) as usize;
    let mut padded = vec![[-1.0; 10]; per_rank];
    padded[..mine.len()].copy_from_slice(&mine);
    (comm.all_gather(&padded), per_rank, mine.len())
}

/// The near field's particles of the LET: the local ones (in tree order, densities `dens`)
/// followed by the remote ones (`width` values each: position and densities), as positions and
/// one column per density.
fn let_points(local: &[[f64; 3]], dens: &[Vec<f64>], remote: &[f64], width: usize) -> (Vec<[f64; 3]>, Vec<Vec<f64>>) {
    let mut points = local.to_vec();
    let mut cols: Vec<Vec<f64>> = dens.to_vec();
    for r in remote.chunks_exact(width) {
        points.push([r[0], r[1], r[2]]);
        for (c, col) in cols.iter_mut().enumerate() {
            col.push(r[3 + c]);
        }
    }
    (points, cols)
}

/// The near field's sources of the LET's particles ([`let_points`]).
fn let_sources(precision: Precision, points: &[[f64; 3]], cols: &[Vec<f64>]) -> NearSources {
    // the Stokeslet's four densities are the force components and f . (x - c)
    let forces: Option<Vec<[f64; 3]>> =
        (cols.len() == 4).then(|| (0..points.len()).map(|k| [cols[0][k], cols[1][k], cols[2][k]]).collect());
    NearSources::new(precision, points, &cols[0], forces.as_deref())
}
