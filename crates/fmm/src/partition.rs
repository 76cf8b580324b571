//! Morton partitions of a distributed FMM: the global root cube, splitter keys that cut
//! neither the source tree's nor the target tree's leaves, the particles moved to the ranks
//! owning their keys, and the boxes that several ranks share.
//!
//! Rank `r` owns the keys in `[s_r, s_(r+1))` (`s_0 = 0`, the last range open). The first
//! splitters are quantiles of the source keys (an all-gather of [`SAMPLES`] keys per rank,
//! weighted by the rank's count); the particles move there; the leaf size is chosen there (the
//! cost model's estimates summed over ranks); then each splitter moves down to the first key
//! of the global leaf holding it, in the source tree and in the target tree
//! ([`snap_splitters`]: a descent from the root with the global count of the box holding the
//! splitter at each level, one all-reduce per level), and the few particles between the two
//! splitters move again. No leaf of either global tree then holds points of two ranks, and a
//! box holds points of several ranks exactly when it strictly encloses a splitter
//! ([`shared_boxes`]: at most 21 per splitter, the same list on every rank).

use parki_comm::{Comm, ReduceOp};
use parki_core::Par;
use parki_decomp::{Route, SortMode};

use crate::cost::{best_leaf, CostModel, LEAF_CANDIDATES};
use crate::octree::{bounds, RootCube, SortedPoints, MAX_LEVEL};

/// Key samples per rank for the first splitters.
pub const SAMPLES: usize = 64;

/// The root cube of every rank's sources and targets (that of [`RootCube::around`] over all
/// of them). Collective.
pub fn global_cube(comm: &Comm, sources: &[[f64; 3]], targets: Option<&[[f64; 3]]>) -> RootCube {
    let [mut lo, mut hi] = match targets {
        Some(t) => bounds(&[sources, t]),
        None => bounds(&[sources]),
    };
    comm.all_reduce(&mut lo, ReduceOp::Min);
    comm.all_reduce(&mut hi, ReduceOp::Max);
    RootCube::from_bounds(lo, hi)
}

/// The rank owning key `k`.
pub fn owner(splitters: &[u64], k: u64) -> u32 {
    splitters.partition_point(|&s| s <= k) as u32
}

/// The keys of the box at `level` holding key `k`: `[first, last]`.
pub fn box_keys(k: u64, level: usize) -> [u64; 2] {
    let mask = (1u64 << (3 * (MAX_LEVEL - level))) - 1;
    [k & !mask, (k & !mask) | mask]
}

/// The anchor of the box at `level` whose first key is `key`.
pub fn anchor_of(key: u64, level: usize) -> [u32; 3] {
    let k = key >> (3 * (MAX_LEVEL - level));
    let mut a = [0u32; 3];
    for bit in 0..level {
        for (axis, v) in a.iter_mut().enumerate() {
            *v |= (((k >> (3 * bit + axis)) & 1) as u32) << bit;
        }
    }
    a
}

/// `size - 1` splitters at the quantiles of every rank's (sorted) `keys`, from [`SAMPLES`]
/// samples per rank weighted by the rank's count. Collective.
pub fn quantile_splitters(comm: &Comm, keys: &[u64]) -> Vec<u64> {
    let n = keys.len();
    let sample: Vec<u64> =
        (0..SAMPLES).map(|i| if n == 0 { 0 } else { keys[((2 * i + 1) * n / (2 * SAMPLES)).min(n - 1)] }).collect();
    let all = comm.all_gather(&sample);
    let counts = comm.all_gather(&[n as u64]);
    let mut weighted: Vec<(u64, f64)> = all
        .chunks(SAMPLES)
        .zip(&counts)
        .flat_map(|(s, &c)| s.iter().map(move |&k| (k, c as f64 / SAMPLES as f64)))
        .filter(|w| w.1 > 0.0)
        .collect();
    weighted.sort_by_key(|w| w.0);
    let total: f64 = counts.iter().map(|&c| c as f64).sum();
    let size = comm.size();
    let mut out = Vec::with_capacity(size - 1);
    let mut cum = 0.0;
    let mut it = weighted.iter();
    for j in 1..size {
        let goal = total * j as f64 / size as f64;
        let mut s = out.last().copied().unwrap_or(0);
        while cum < goal {
            match it.next() {
                Some(&(k, w)) => {
                    cum += w;
                    s = k;
                }
                None => {
                    s = u64::MAX;
                    break;
                }
            }
        }
        out.push(s);
    }
    out
}

/// Each splitter moved down to the first key of the leaf holding it in every tree of `sets`
/// (each set's keys sorted, on any ranks; the global tree of a set has leaves of at most
/// `max_leaf` of its points): the leaf is found by descending from the root with the global
/// count of the box holding the splitter (one all-reduce per level). A splitter in no leaf (an
/// empty region of a tree) stays for that tree. Leaves are disjoint and ordered, so the
/// splitters stay sorted; and since boxes nest, the smaller of a source leaf's and a target
/// leaf's first keys is inside no leaf of either tree. Collective.
pub fn snap_splitters(comm: &Comm, splitters: &[u64], sets: &[&[u64]], max_leaf: usize) -> Vec<u64> {
    let (ns, nt) = (splitters.len(), sets.len());
    let mut start: Vec<Option<u64>> = vec![None; ns * nt];
    for level in 0..=MAX_LEVEL {
        let open: Vec<usize> = (0..ns * nt).filter(|&i| start[i].is_none()).collect();
        if open.is_empty() {
            break;
        }
        let mut counts: Vec<u64> = open
            .iter()
            .map(|&i| {
                let [first, last] = box_keys(splitters[i / nt], level);
                let keys = sets[i % nt];
                (keys.partition_point(|&k| k <= last) - keys.partition_point(|&k| k < first)) as u64
            })
            .collect();
        comm.all_reduce(&mut counts, ReduceOp::Sum);
        for (&i, &c) in open.iter().zip(&counts) {
            let s = splitters[i / nt];
            if c == 0 {
                start[i] = Some(s);
            } else if c <= max_leaf.max(1) as u64 || level == MAX_LEVEL {
                start[i] = Some(box_keys(s, level)[0]);
            }
        }
    }
    (0..ns).map(|s| (0..nt).filter_map(|t| start[s * nt + t]).min().unwrap_or(splitters[s])).collect()
}

/// The boxes that strictly enclose a splitter, as `(level, first key)`, sorted: the same list
/// on every rank.
pub fn shared_boxes(splitters: &[u64]) -> Vec<(u8, u64)> {
    let mut out: Vec<(u8, u64)> = splitters
        .iter()
        .flat_map(|&s| (0..MAX_LEVEL).map(move |l| (l as u8, box_keys(s, l)[0], s)))
        .filter(|&(_, first, s)| first != s)
        .map(|(l, first, _)| (l, first))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Sends `points` (with `width` values each in `values`, or none) to the owners of their keys
/// under `splitters`. Collective.
fn route(
    comm: &Comm,
    cube: &RootCube,
    splitters: &[u64],
    points: &[[f64; 3]],
    values: &[f64],
    width: usize,
    par: Par,
) -> (Route, Vec<[f64; 3]>, Vec<f64>) {
    let owners: Vec<u32> = points.iter().map(|&x| owner(splitters, cube.key(x))).collect();
    let (r, got) = Route::send_to_owners(comm, &owners, &[], SortMode::Full, points, None, par);
    let v = if width > 0 { r.forward(comm, values, width) } else { Vec::new() };
    (r, got.positions, v)
}

/// A rank's part of a Morton partition.
pub struct Partition {
    /// The snapped splitters (sorted, `size - 1`).
    pub splitters: Vec<u64>,
    /// The leaf size.
    pub max_leaf: usize,
    /// The summed estimates per candidate leaf size when the cost model chose.
    pub leaf_estimates: Vec<(usize, f64)>,
    /// The sources this rank owns.
    pub sources: Vec<[f64; 3]>,
    /// Their densities, `width` per source.
    pub densities: Vec<f64>,
    /// The targets this rank owns, when they are not the sources.
    pub targets: Option<Vec<[f64; 3]>>,
    /// The two routes of the sources and of the targets (those of the sources when the targets
    /// are the sources).
    routes: [Route; 2],
    target_routes: Option<[Route; 2]>,
}

impl Partition {
    /// Partitions the caller's `sources` (with `width` densities each in `densities`) and
    /// `targets` in `cube`; the leaf size is `max_leaf` or the one of `cost` at order `p`.
    /// Collective.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        comm: &Comm,
        cube: &RootCube,
        sources: &[[f64; 3]],
        densities: &[f64],
        width: usize,
        targets: Option<&[[f64; 3]]>,
        max_leaf: Option<usize>,
        cost: &CostModel,
        p: usize,
        par: Par,
    ) -> Self {
        let mut keys: Vec<u64> = sources.iter().map(|&x| cube.key(x)).collect();
        keys.sort_unstable();
        let first = quantile_splitters(comm, &keys);
        drop(keys);
        let (rs1, s1, d1) = route(comm, cube, &first, sources, densities, width, par);
        let t1 = targets.map(|t| route(comm, cube, &first, t, &[], 0, par));
        let sorted_s = SortedPoints::new(&s1, *cube);
        let sorted_t = t1.as_ref().map(|t| SortedPoints::new(&t.1, *cube));
        let (leaf, leaf_estimates) = match max_leaf {
            Some(l) => (l, Vec::new()),
            None => {
                let (_, local) = cost.choose_leaf(&sorted_s, p, 0.65, par);
                let mut t: Vec<f64> = local.iter().map(|e| e.1).collect();
                comm.all_reduce(&mut t, ReduceOp::Sum);
                let all: Vec<(usize, f64)> = LEAF_CANDIDATES.iter().copied().zip(t).collect();
                (best_leaf(&all), all)
            }
        };
        let sets: Vec<&[u64]> = match &sorted_t {
            Some(t) => vec![sorted_s.keys(), t.keys()],
            None => vec![sorted_s.keys()],
        };
        let splitters = snap_splitters(comm, &first, &sets, leaf);
        drop((sorted_s, sorted_t));
        let (rs2, own_s, own_d) = route(comm, cube, &splitters, &s1, &d1, width, par);
        let (target_routes, own_t) = match t1 {
            Some((rt1, t1p, _)) => {
                let (rt2, own_t, _) = route(comm, cube, &splitters, &t1p, &[], 0, par);
                (Some([rt1, rt2]), Some(own_t))
            }
            None => (None, None),
        };
        Self {
            splitters,
            max_leaf: leaf,
            leaf_estimates,
            sources: own_s,
            densities: own_d,
            targets: own_t,
            routes: [rs1, rs2],
            target_routes,
        }
    }

    /// Sends `width` values per owned target (in owned order) back to the callers, in their
    /// targets' order (`callers` targets on this rank). Collective.
    pub fn return_to_callers(&self, comm: &Comm, values: &[f64], width: usize, callers: usize) -> Vec<f64> {
        let routes = self.target_routes.as_ref().unwrap_or(&self.routes);
        let mut mid = vec![0.0; routes[0].received() * width];
        routes[1].return_to_callers(comm, values, width, &mut mid);
        let mut out = vec![0.0; callers * width];
        routes[0].return_to_callers(comm, &mid, width, &mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::octree::OctBox;

    #[test]
    fn box_keys_and_anchors_agree_with_the_octree() {
        let b = OctBox { level: 3, anchor: [5, 2, 7], begin: 0, end: 1, first_child: 0, children: 0, parent: 0 };
        let [first, last] = b.key_range();
        assert_eq!(box_keys(first, 3), [first, last]);
        assert_eq!(box_keys(last, 3), [first, last]);
        assert_eq!(anchor_of(first, 3), b.anchor);
        assert_eq!(box_keys(12345, 0), [0, (1u64 << 63) - 1]);
    }

    #[test]
    fn shared_boxes_enclose_the_splitters_strictly() {
        let s = 12345u64 << 33; // first key of a level-10 box, not of its parent
        let list = shared_boxes(&[s]);
        assert_eq!(list.len(), 10, "the boxes above level 10 hold s after their first key");
        assert!(list.iter().all(|&(l, k)| l < 10 && k < s && box_keys(s, l as usize)[0] == k));
        assert!(shared_boxes(&[0]).is_empty());
    }

    #[test]
    fn one_rank_snaps_to_leaf_starts() {
        let comm = Comm::single();
        // 100 keys in two clusters; leaves of 10
        let keys: Vec<u64> = (0..50).map(|i| i * 1000).chain((0..50).map(|i| (1u64 << 60) + i * 7)).collect();
        let s = (1u64 << 60) + 100;
        let snapped = snap_splitters(&comm, &[s], &[&keys], 10);
        assert!(snapped[0] <= s);
        // no box of <= 10 keys holding the snapped key starts before it and ends after it
        for level in 0..=MAX_LEVEL {
            let [f, l] = box_keys(snapped[0], level);
            let c = keys.iter().filter(|&&k| k >= f && k <= l).count();
            if c <= 10 && c > 0 {
                assert_eq!(f, snapped[0], "level {level}: the leaf starts at the splitter");
                break;
            }
        }
        assert_eq!(owner(&snapped, snapped[0]), 1);
        assert_eq!(owner(&snapped, snapped[0] - 1), 0);
    }
}
