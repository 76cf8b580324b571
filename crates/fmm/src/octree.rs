//! Octrees by Morton keys, empty boxes skipped, adaptive depth (seed 001, §2 and §4; the paper
//! has a uniform depth, parki-dist splits only boxes holding more than `max_leaf` points).
//!
//! Points are scaled into the root cube, given 63-bit Morton keys (21 bits per axis, bit `b` of
//! `x`, `y`, `z` at key bits `3b`, `3b + 1`, `3b + 2`) and sorted by key, so every box owns a
//! contiguous range of the sorted points (the paper's "bookmarks"). Boxes are made level by
//! level (breadth first): the boxes of a level are contiguous, and so are the children of a
//! box, which lets the upward and downward passes run a level at a time in parallel.

use parki_core::Par;
use rayon::prelude::{IntoParallelIterator, IntoParallelRefIterator, ParallelIterator, ParallelSliceMut};

/// Deepest level (21 bits per axis).
pub const MAX_LEVEL: usize = 21;

/// One box of an [`Octree`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OctBox {
    /// Level (0 is the root cube).
    pub level: u8,
    /// Integer coordinates at its level, `0..2^level` per axis.
    pub anchor: [u32; 3],
    /// First sorted point.
    pub begin: usize,
    /// One past the last sorted point.
    pub end: usize,
    /// Index of the first child (children are contiguous); meaningless for a leaf.
    pub first_child: u32,
    /// Number of (non-empty) children, 0 for a leaf.
    pub children: u8,
    /// Index of the parent (the root's is 0).
    pub parent: u32,
}

impl OctBox {
    /// Whether the box has no children.
    pub fn is_leaf(&self) -> bool {
        self.children == 0
    }

    /// Number of points.
    pub fn count(&self) -> usize {
        self.end - self.begin
    }

    /// Child indices.
    pub fn child_range(&self) -> std::ops::Range<usize> {
        self.first_child as usize..self.first_child as usize + self.children as usize
    }

    /// The Morton keys of the box: `[first, last]` (every point of the box has a key in it).
    pub fn key_range(&self) -> [u64; 2] {
        let shift = 3 * (MAX_LEVEL - self.level as usize);
        let k = spread(self.anchor[0] as u64) | spread(self.anchor[1] as u64) << 1 | spread(self.anchor[2] as u64) << 2;
        [k << shift, (k << shift) | ((1u64 << shift) - 1)]
    }
}

/// The root cube shared by the source and target trees.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RootCube {
    /// Lower corner.
    pub origin: [f64; 3],
    /// Edge.
    pub size: f64,
}

impl RootCube {
    /// The smallest cube holding every point of `sets` (edge enlarged by a relative 1e-9 so
    /// that the largest coordinate falls inside; edge 1 for a single point).
    pub fn around(sets: &[&[[f64; 3]]]) -> Self {
        let [lo, hi] = bounds(sets);
        Self::from_bounds(lo, hi)
    }

    /// The cube of [`RootCube::around`] for points within `[lo, hi]` (the bounds of
    /// [`bounds`]; infinite bounds: no points).
    pub fn from_bounds(lo: [f64; 3], hi: [f64; 3]) -> Self {
        if !lo[0].is_finite() {
            return Self { origin: [0.0; 3], size: 1.0 };
        }
        let ext = (0..3).map(|a| hi[a] - lo[a]).fold(0.0, f64::max);
        let size = if ext > 0.0 { ext * (1.0 + 1e-9) } else { 1.0 };
        let mid = [(lo[0] + hi[0]) / 2.0, (lo[1] + hi[1]) / 2.0, (lo[2] + hi[2]) / 2.0];
        Self { origin: [mid[0] - size / 2.0, mid[1] - size / 2.0, mid[2] - size / 2.0], size }
    }

    /// Edge of a box at `level`.
    pub fn edge(&self, level: usize) -> f64 {
        self.size / (1u64 << level) as f64
    }

    /// Centre of a box.
    pub fn centre(&self, b: &OctBox) -> [f64; 3] {
        let h = self.edge(b.level as usize);
        [
            self.origin[0] + (b.anchor[0] as f64 + 0.5) * h,
            self.origin[1] + (b.anchor[1] as f64 + 0.5) * h,
            self.origin[2] + (b.anchor[2] as f64 + 0.5) * h,
        ]
    }

    /// Centre in integer units of `size / 2^(MAX_LEVEL + 1)`: exact offsets between boxes of
    /// any levels.
    pub fn centre_units(b: &OctBox) -> [i64; 3] {
        let s = 1i64 << (MAX_LEVEL - b.level as usize);
        [(2 * b.anchor[0] as i64 + 1) * s, (2 * b.anchor[1] as i64 + 1) * s, (2 * b.anchor[2] as i64 + 1) * s]
    }

    /// The Morton key of `x`.
    pub fn key(&self, x: [f64; 3]) -> u64 {
        let scale = (1u64 << MAX_LEVEL) as f64 / self.size;
        let top = (1u64 << MAX_LEVEL) - 1;
        let mut key = 0u64;
        for (a, &xa) in x.iter().enumerate() {
            let i = (((xa - self.origin[a]) * scale).floor().max(0.0) as u64).min(top);
            key |= spread(i) << a;
        }
        key
    }
}

/// The componentwise minimum and maximum over the points of `sets` (`[inf; 3]` and `[-inf; 3]`
/// for none).
pub fn bounds(sets: &[&[[f64; 3]]]) -> [[f64; 3]; 2] {
    let mut lo = [f64::INFINITY; 3];
    let mut hi = [f64::NEG_INFINITY; 3];
    for set in sets {
        for x in set.iter() {
            for a in 0..3 {
                lo[a] = lo[a].min(x[a]);
                hi[a] = hi[a].max(x[a]);
            }
        }
    }
    [lo, hi]
}

/// The 21 low bits of `v` spread to every third bit.
fn spread(v: u64) -> u64 {
    let mut x = v & 0x1f_ffff;
    x = (x | (x << 32)) & 0x1f00000000ffff;
    x = (x | (x << 16)) & 0x1f0000ff0000ff;
    x = (x | (x << 8)) & 0x100f00f00f00f00f;
    x = (x | (x << 4)) & 0x10c30c30c30c30c3;
    (x | (x << 2)) & 0x1249249249249249
}

/// Points sorted by Morton key: the expensive half of a tree, from which trees of any leaf
/// size are cut in `O(boxes)` ([`SortedPoints::tree`], [`SortedPoints::leaf_counts`]).
#[derive(Clone, Debug)]
pub struct SortedPoints {
    cube: RootCube,
    keys: Vec<u64>,
    order: Vec<usize>,
    points: Vec<[f64; 3]>,
}

impl SortedPoints {
    /// Sorts `points` by their keys in `cube`.
    pub fn new(points: &[[f64; 3]], cube: RootCube) -> Self {
        let mut keyed: Vec<(u64, usize)> =
            (0..points.len()).into_par_iter().map(|i| (cube.key(points[i]), i)).collect();
        keyed.par_sort_unstable();
        let order: Vec<usize> = keyed.par_iter().map(|k| k.1).collect();
        let sorted: Vec<[f64; 3]> = order.par_iter().map(|&i| points[i]).collect();
        let keys: Vec<u64> = keyed.par_iter().map(|k| k.0).collect();
        Self { cube, keys, order, points: sorted }
    }

    /// The sorted keys.
    pub fn keys(&self) -> &[u64] {
        &self.keys
    }

    /// The number of points with keys in `[first, last]`.
    pub fn count_keys(&self, first: u64, last: u64) -> usize {
        self.keys.partition_point(|&k| k <= last) - self.keys.partition_point(|&k| k < first)
    }

    /// The boxes of the tree with leaves of at most `max_leaf` points, breadth first, and the
    /// level offsets; a box whose keys strictly enclose one of the sorted `splitters` (a key
    /// that is not its first) is split whatever its count (the local part of a distributed
    /// tree, whose shared boxes hold more points on other ranks).
    fn boxes(&self, max_leaf: usize, splitters: &[u64]) -> (Vec<OctBox>, Vec<usize>) {
        let keys = &self.keys;
        let mut boxes = vec![OctBox {
            level: 0,
            anchor: [0; 3],
            begin: 0,
            end: keys.len(),
            first_child: 0,
            children: 0,
            parent: 0,
        }];
        let mut levels = vec![0, 1];
        let mut level = 0;
        while level < MAX_LEVEL {
            let (lo, hi) = (levels[level], levels[level + 1]);
            for bi in lo..hi {
                let b = boxes[bi];
                if b.count() <= max_leaf.max(1) && !encloses(&b, splitters) {
                    continue;
                }
                let first = boxes.len();
                for (digit, (start, end)) in (0u32..).zip(child_ranges(keys, b.begin, b.end, level)) {
                    if end > start {
                        let bit = |a: u32| (digit >> a) & 1;
                        boxes.push(OctBox {
                            level: (level + 1) as u8,
                            anchor: [2 * b.anchor[0] + bit(0), 2 * b.anchor[1] + bit(1), 2 * b.anchor[2] + bit(2)],
                            begin: start,
                            end,
                            first_child: 0,
                            children: 0,
                            parent: bi as u32,
                        });
                    }
                }
                boxes[bi].first_child = first as u32;
                boxes[bi].children = (boxes.len() - first) as u8;
            }
            if boxes.len() == hi {
                break;
            }
            levels.push(boxes.len());
            level += 1;
        }
        (boxes, levels)
    }

    /// For each leaf-size threshold of `thresholds` at once (each at least 1), the sums the
    /// cost model prices of the tree with leaves of at most that many points
    /// ([`SortedPoints::tree`]): the sum over its leaves of the squared point counts, and its
    /// box count. One walk of the finest of those trees: a box is in the tree of threshold `L`
    /// when its parent holds more than `L` points (counts fall down the tree), and is a leaf
    /// there when it holds at most `L` or lies at [`MAX_LEVEL`]. Boxes of the top levels are
    /// walked on the threads with `par`.
    pub fn threshold_sums(&self, thresholds: &[usize], par: Par) -> Vec<(f64, usize)> {
        let t: Vec<usize> = thresholds.iter().map(|&l| l.max(1)).collect();
        let mut out = vec![(0.0, 0); t.len()];
        let walk = Walk { keys: &self.keys, t: &t, finest: t.iter().copied().min().unwrap_or(1), par };
        walk.visit(0, self.keys.len(), 0, usize::MAX, &mut out);
        out
    }

    /// The point counts of the leaves of the tree with leaves of at most `max_leaf` points,
    /// and the number of its boxes.
    pub fn leaf_counts(&self, max_leaf: usize) -> (Vec<usize>, usize) {
        let (boxes, _) = self.boxes(max_leaf, &[]);
        (boxes.iter().filter(|b| b.is_leaf()).map(|b| b.count()).collect(), boxes.len())
    }

    /// The tree with leaves of at most `max_leaf` points, the sorted points copied into it
    /// (for a set that is used again; else [`SortedPoints::into_tree`]).
    pub fn tree(&self, max_leaf: usize) -> Octree {
        let (boxes, levels) = self.boxes(max_leaf, &[]);
        Octree { cube: self.cube, boxes, levels, order: self.order.clone(), points: self.points.clone() }
    }

    /// [`SortedPoints::tree`], taking the sorted points rather than copying them.
    pub fn into_tree(self, max_leaf: usize) -> Octree {
        self.tree_split(max_leaf, &[])
    }

    /// The tree with leaves of at most `max_leaf` points in which, besides, every box strictly
    /// enclosing one of the sorted keys `splitters` is split (see [`encloses`]); it takes the
    /// sorted points.
    pub fn tree_split(self, max_leaf: usize, splitters: &[u64]) -> Octree {
        let (boxes, levels) = self.boxes(max_leaf, splitters);
        Octree { cube: self.cube, boxes, levels, order: self.order, points: self.points }
    }
}

/// The key ranges of the eight children (by Morton digit, empty ones included) of the box of
/// sorted `keys[begin..end]` at `level` (< [`MAX_LEVEL`]).
fn child_ranges(keys: &[u64], begin: usize, end: usize, level: usize) -> [(usize, usize); 8] {
    let shift = 3 * (MAX_LEVEL - level - 1);
    let mut children = [(0usize, 0usize); 8];
    let mut start = begin;
    for (digit, c) in (0u64..).zip(children.iter_mut()) {
        let stop = start + keys[start..end].partition_point(|k| (k >> shift) & 7 <= digit);
        *c = (start, stop);
        start = stop;
    }
    children
}

/// The recursion of [`SortedPoints::threshold_sums`].
struct Walk<'a> {
    keys: &'a [u64],
    t: &'a [usize],
    finest: usize,
    par: Par,
}

/// Levels whose boxes' subtrees [`Walk`] visits on the threads (8^3 subtrees at most).
const WALK_PAR_LEVELS: usize = 3;

impl Walk<'_> {
    /// Adds the box of keys `begin..end` at `level` (its parent holding `parent` points) and
    /// its descendants to `out`.
    fn visit(&self, begin: usize, end: usize, level: usize, parent: usize, out: &mut [(f64, usize)]) {
        let count = end - begin;
        for (o, &l) in out.iter_mut().zip(self.t) {
            if parent > l {
                o.1 += 1;
                if count <= l || level == MAX_LEVEL {
                    o.0 += (count as f64) * (count as f64);
                }
            }
        }
        if count <= self.finest || level == MAX_LEVEL {
            return;
        }
        let children = child_ranges(self.keys, begin, end, level);
        let parallel = matches!(self.par, Par::Rayon(_)) && level < WALK_PAR_LEVELS;
        if parallel {
            let parts: Vec<Vec<(f64, usize)>> = children
                .par_iter()
                .filter(|c| c.1 > c.0)
                .map(|&(b, e)| {
                    let mut part = vec![(0.0, 0); out.len()];
                    self.visit(b, e, level + 1, count, &mut part);
                    part
                })
                .collect();
            for part in parts {
                for (o, p) in out.iter_mut().zip(part) {
                    o.0 += p.0;
                    o.1 += p.1;
                }
            }
        } else {
            for &(b, e) in children.iter().filter(|c| c.1 > c.0) {
                self.visit(b, e, level + 1, count, out);
            }
        }
    }
}

/// Whether one of the sorted `splitters` lies strictly inside the keys of `b` (after its first
/// key): such a box holds points of two ranks of a distributed tree.
pub fn encloses(b: &OctBox, splitters: &[u64]) -> bool {
    let [first, last] = b.key_range();
    let i = splitters.partition_point(|&s| s <= first);
    i < splitters.len() && splitters[i] <= last
}

/// An octree over one point set.
#[derive(Clone, Debug)]
pub struct Octree {
    /// The root cube.
    pub cube: RootCube,
    /// Boxes, breadth first.
    pub boxes: Vec<OctBox>,
    /// Boxes of level `l` are `levels[l]..levels[l + 1]`.
    pub levels: Vec<usize>,
    /// `order[i]`: the caller's index of sorted point `i`.
    pub order: Vec<usize>,
    /// Points in sorted order.
    pub points: Vec<[f64; 3]>,
}

impl Octree {
    /// Builds the tree of `points` in `cube`, splitting boxes with more than `max_leaf`
    /// points (down to [`MAX_LEVEL`]).
    pub fn build(points: &[[f64; 3]], cube: RootCube, max_leaf: usize) -> Self {
        let sorted = SortedPoints::new(points, cube);
        sorted.tree(max_leaf)
    }

    /// Number of levels (the deepest box's level plus one).
    pub fn depth(&self) -> usize {
        self.levels.len() - 1
    }

    /// Indices of the leaves.
    pub fn leaves(&self) -> Vec<usize> {
        (0..self.boxes.len()).filter(|&i| self.boxes[i].is_leaf()).collect()
    }
}
