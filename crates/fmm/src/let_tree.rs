//! The locally essential tree (LET) of a distributed FMM: the global source tree as one rank
//! sees it, built from its own local tree, the shared boxes (summed over ranks), the frontier
//! (the unshared children of shared boxes, all-gathered), and the remote boxes, multipoles and
//! particles read by one-sided gets where the traversal needs them.
//!
//! Every rank exposes, in one window, its local tree's box records (breadth first, so a box's
//! children are one contiguous block) followed by its particles in key order (position and
//! densities), and its multipoles in a second window. The LET keeps the local tree's boxes
//! first, so the local multipoles and particles index them unchanged; the top (shared boxes and
//! frontier, children contiguous) and the remote boxes follow.

use std::collections::HashMap;
use std::time::Instant;

use parki_comm::{as_bytes_mut, Window};

use crate::evaluate::LetStats;
use crate::octree::{OctBox, Octree};
use crate::partition::{anchor_of, box_keys};
use crate::traversal::{Lists, SourceBoxes, TraversalParams, Traverser};

/// A box record of the exposure: `[level, anchor x, y, z, count, children, first child,
/// begin, end]` (integers stored exactly as `f64`).
pub type Record = [f64; 9];

/// Bytes of a [`Record`].
pub const RECORD_BYTES: usize = 72;

/// The record of a box.
pub fn record(b: &OctBox) -> Record {
    [
        b.level as f64,
        b.anchor[0] as f64,
        b.anchor[1] as f64,
        b.anchor[2] as f64,
        b.count() as f64,
        b.children as f64,
        b.first_child as f64,
        b.begin as f64,
        b.end as f64,
    ]
}

/// A box's `(level, first key)`: siblings sort by it, and it finds the parent.
pub fn box_id(b: &OctBox) -> (u8, u64) {
    (b.level, b.key_range()[0])
}

/// The parent's `(level, first key)` of a box given by its own.
fn parent_id(id: (u8, u64)) -> (u8, u64) {
    let l = id.0 as usize - 1;
    (l as u8, box_keys(id.1, l)[0])
}

/// A frontier record as all-gathered: the [`Record`] and the box's index on its rank (padding
/// slots have level `-1`).
pub type FrontierSlot = [f64; 10];

/// Where a box of the LET comes from.
#[derive(Clone, Copy, Debug)]
enum Origin {
    /// This rank's box (its index in the local tree).
    Local(usize),
    /// A shared box (its index in the shared list).
    Shared(usize),
    /// Box `index` of `rank`, whose children start at its box `first`, and whose points are
    /// `begin..end` of its sorted points.
    Remote { rank: usize, index: usize, first: usize, begin: usize, end: usize },
}

/// The shared boxes, with their global counts and multipoles (summed over ranks).
pub struct Shared<'a> {
    /// `(level, first key)` of each.
    pub ids: &'a [(u8, u64)],
    /// Points of each over all ranks (0: the box does not exist).
    pub counts: &'a [u64],
    /// Multipoles, `bs` per box.
    pub multipoles: &'a [f64],
    /// Coefficients per box (densities times `p^2`).
    pub bs: usize,
}

/// The top boxes below each parent, `(level, first key)` of each.
type Below = HashMap<(u8, u64), Vec<((u8, u64), Top)>>;

/// A top box before placement.
enum Top {
    Shared(usize),
    Frontier { rank: usize, index: usize, record: Record },
}

/// The LET of one rank. Its root is box `root`; boxes `0..local` are the local tree's.
pub struct LetTree {
    /// Boxes: the local tree's, then the top, then remote boxes as they are read.
    pub boxes: Vec<OctBox>,
    known: Vec<bool>,
    origin: Vec<Origin>,
    /// The root (none when no rank has sources).
    pub root: Option<u32>,
    local: usize,
}

impl SourceBoxes for LetTree {
    fn source_box(&self, s: u32) -> &OctBox {
        &self.boxes[s as usize]
    }
    fn known_children(&self, s: u32) -> Option<std::ops::Range<usize>> {
        self.known[s as usize].then(|| self.boxes[s as usize].child_range())
    }
}

/// Reads `reads` (byte offset, destination) from `rank`, counting into `stats`.
pub fn get(win: &Window, rank: usize, reads: &mut [(usize, &mut [u8])], stats: &mut LetStats) {
    if reads.is_empty() {
        return;
    }
    stats.bytes += reads.iter().map(|r| r.1.len() as u64).sum::<u64>();
    stats.messages += reads.len() as u64;
    win.get(rank, reads);
}

impl LetTree {
    /// The local tree `stree` of rank `me`, and the top: the shared boxes with points and the
    /// frontier of every rank (`frontier`: `per_rank` slots per rank), placed breadth first
    /// below the root with each box's children contiguous and in key order.
    pub fn new(stree: &Octree, me: usize, shared: &Shared, frontier: &[FrontierSlot], per_rank: usize) -> Self {
        let nl = stree.boxes.len();
        let mut tree = Self {
            boxes: stree.boxes.clone(),
            known: vec![true; nl],
            origin: (0..nl).map(Origin::Local).collect(),
            root: None,
            local: nl,
        };
        let mut children_of = Below::new();
        let mut top_root = None;
        let mut place = |id: (u8, u64), top: Top| match id.0 {
            0 => top_root = Some(top),
            _ => children_of.entry(parent_id(id)).or_default().push((id, top)),
        };
        for (j, &id) in shared.ids.iter().enumerate().filter(|&(j, _)| shared.counts[j] > 0) {
            place(id, Top::Shared(j));
        }
        for (rank, block) in frontier.chunks(per_rank).enumerate() {
            for slot in block.iter().filter(|s| s[0] >= 0.0) {
                let mut record = [0.0; 9];
                record.copy_from_slice(&slot[..9]);
                let level = record[0] as u8;
                let anchor = [record[1] as u32, record[2] as u32, record[3] as u32];
                let b = OctBox { level, anchor, begin: 0, end: 0, first_child: 0, children: 0, parent: 0 };
                place(box_id(&b), Top::Frontier { rank, index: slot[9] as usize, record });
            }
        }
        let Some(top) = top_root else { return tree };
        let root = tree.add_top(stree, me, shared, &top, 0);
        tree.root = Some(root);
        let mut queue = vec![root];
        while let Some(x) = queue.pop() {
            if !matches!(tree.origin[x as usize], Origin::Shared(_)) {
                continue;
            }
            let mut kids = children_of.remove(&box_id(&tree.boxes[x as usize])).unwrap_or_default();
            kids.sort_by_key(|k| k.0);
            let first = tree.boxes.len() as u32;
            for (_, top) in &kids {
                queue.push(tree.add_top(stree, me, shared, top, x));
            }
            tree.boxes[x as usize].first_child = first;
            tree.boxes[x as usize].children = kids.len() as u8;
        }
        tree
    }

    /// Places a top box below `parent`.
    fn add_top(&mut self, stree: &Octree, me: usize, shared: &Shared, top: &Top, parent: u32) -> u32 {
        match *top {
            Top::Shared(j) => {
                let (level, key) = shared.ids[j];
                let end = shared.counts[j] as usize;
                let anchor = anchor_of(key, level as usize);
                self.boxes.push(OctBox { level, anchor, begin: 0, end, first_child: 0, children: 0, parent });
                self.known.push(true);
                self.origin.push(Origin::Shared(j));
            }
            Top::Frontier { rank, index, .. } if rank == me => {
                self.boxes.push(OctBox { parent, ..stree.boxes[index] });
                self.known.push(true);
                self.origin.push(Origin::Local(index));
            }
            Top::Frontier { rank, index, ref record } => return self.push_remote(rank, index, record, parent),
        }
        (self.boxes.len() - 1) as u32
    }

    /// A box from a remote record (children unknown unless it is a leaf).
    fn push_remote(&mut self, rank: usize, index: usize, r: &Record, parent: u32) -> u32 {
        let b = OctBox {
            level: r[0] as u8,
            anchor: [r[1] as u32, r[2] as u32, r[3] as u32],
            begin: 0,
            end: r[4] as usize,
            first_child: u32::MAX,
            children: r[5] as u8,
            parent,
        };
        self.boxes.push(b);
        self.known.push(b.children == 0);
        self.origin.push(Origin::Remote {
            rank,
            index,
            first: r[6] as usize,
            begin: r[7] as usize,
            end: r[8] as usize,
        });
        (self.boxes.len() - 1) as u32
    }

    /// The dual traversal of `ttree` against the LET for order `p`: where it must split a
    /// remote box whose children are not known, the pair waits; the children of all such
    /// boxes are read from `records` (one epoch per remote rank), and the waiting pairs go on.
    /// Returns the lists and the seconds spent traversing (the rest is reading).
    pub fn traverse(
        &mut self,
        ttree: &Octree,
        records: &Window,
        ranks: usize,
        p: usize,
        params: TraversalParams,
        stats: &mut LetStats,
    ) -> (Lists, f64) {
        let mut seconds = 0.0;
        let mut tr = Traverser::new(p, params);
        let mut pending = match self.root {
            Some(root) if ttree.boxes[0].count() > 0 => vec![(0u32, root)],
            _ => Vec::new(),
        };
        while !pending.is_empty() {
            let clock = Instant::now();
            let deferred = tr.run(ttree, &*self, pending);
            seconds += clock.elapsed().as_secs_f64();
            if deferred.is_empty() {
                break;
            }
            stats.rounds += 1;
            let mut need: Vec<u32> = deferred.iter().map(|&(_, s)| s).collect();
            need.sort_unstable();
            need.dedup();
            for q in 0..ranks {
                self.read_children(records, q, &need, stats);
            }
            pending = deferred;
        }
        (tr.finish(ttree.boxes.len()), seconds)
    }

    /// Reads the children of the boxes of `need` that live on rank `q`.
    fn read_children(&mut self, records: &Window, q: usize, need: &[u32], stats: &mut LetStats) {
        let mine: Vec<(u32, usize, usize)> = need
            .iter()
            .filter_map(|&s| match self.origin[s as usize] {
                Origin::Remote { rank, first, .. } if rank == q => {
                    Some((s, first, self.boxes[s as usize].children as usize))
                }
                _ => None,
            })
            .collect();
        if mine.is_empty() {
            return;
        }
        let mut got: Vec<Vec<Record>> = mine.iter().map(|&(_, _, m)| vec![[0.0; 9]; m]).collect();
        {
            let mut reads: Vec<(usize, &mut [u8])> = mine
                .iter()
                .zip(got.iter_mut())
                .map(|(&(_, f, _), g)| (f * RECORD_BYTES, as_bytes_mut(&mut g[..])))
                .collect();
            get(records, q, &mut reads, stats);
        }
        for (&(s, f, _), g) in mine.iter().zip(got) {
            let start = self.boxes.len() as u32;
            for (i, r) in g.iter().enumerate() {
                self.push_remote(q, f + i, r, s);
            }
            stats.boxes += g.len();
            self.boxes[s as usize].first_child = start;
            self.known[s as usize] = true;
        }
    }

    /// After the traversal: the multipoles of the LET's boxes past the local tree's (`bs`
    /// per box: copies of `local`'s for the local frontier, the sums of `shared`, and, for the
    /// remote boxes that `lists` translates, read from `multipoles`), and the particles of the
    /// remote P2P leaves (`width` values each, read from `records` past `particles_at[q]`
    /// bytes on rank `q`), whose boxes' point ranges then index the local particles followed
    /// by these. Returns both.
    #[allow(clippy::too_many_arguments)]
    pub fn read_sources(
        &mut self,
        lists: &Lists,
        me: usize,
        windows: [&Window; 2],
        particles_at: &[usize],
        local: &[f64],
        shared: &Shared,
        width: usize,
        local_points: usize,
        stats: &mut LetStats,
    ) -> (Vec<f64>, Vec<f64>) {
        let [records, multipoles] = windows;
        let (nl, nb) = (self.local, self.boxes.len());
        let bs = shared.bs;
        let mut extra = vec![0.0; (nb - nl) * bs];
        let mut m2l_used = vec![false; nb];
        for e in &lists.m2l {
            m2l_used[e.source as usize] = true;
        }
        let mut p2p_used = vec![false; nb];
        for &s in &lists.p2p {
            p2p_used[s as usize] = true;
        }
        for (s, out) in (nl..nb).zip(extra.chunks_mut(bs)) {
            match self.origin[s] {
                Origin::Shared(j) => out.copy_from_slice(&shared.multipoles[j * bs..(j + 1) * bs]),
                Origin::Local(i) => out.copy_from_slice(&local[i * bs..(i + 1) * bs]),
                Origin::Remote { .. } => {}
            }
        }
        let mut points: Vec<f64> = Vec::new();
        for q in (0..particles_at.len()).filter(|&q| q != me) {
            let mut reads: Vec<(usize, &mut [u8])> = Vec::new();
            for (chunk, s) in extra.chunks_mut(bs).zip(nl..nb) {
                if let (true, Origin::Remote { rank, index, .. }) = (m2l_used[s], self.origin[s]) {
                    if rank == q {
                        reads.push((index * bs * 8, as_bytes_mut(chunk)));
                        stats.multipoles += 1;
                    }
                }
            }
            get(multipoles, q, &mut reads, stats);
            // particle intervals of rank q's leaves, merged
            let mut iv: Vec<(usize, usize, usize)> = (nl..nb)
                .filter(|&s| p2p_used[s])
                .filter_map(|s| match self.origin[s] {
                    Origin::Remote { rank, begin, end, .. } if rank == q => Some((begin, end, s)),
                    _ => None,
                })
                .collect();
            iv.sort_unstable();
            let mut merged: Vec<(usize, usize)> = Vec::new();
            for &(b, e, _) in &iv {
                match merged.last_mut() {
                    Some(last) if b <= last.1 => last.1 = last.1.max(e),
                    _ => merged.push((b, e)),
                }
            }
            let base = points.len() / width;
            let mut starts = Vec::with_capacity(merged.len());
            let mut at = base;
            for &(b, e) in &merged {
                starts.push(at);
                at += e - b;
            }
            for &(b, e, s) in &iv {
                let m = merged.partition_point(|&(mb, _)| mb <= b) - 1;
                let off = local_points + starts[m] + (b - merged[m].0);
                self.boxes[s].begin = off;
                self.boxes[s].end = off + (e - b);
            }
            points.resize(at * width, 0.0);
            let mut reads: Vec<(usize, &mut [u8])> = Vec::with_capacity(merged.len());
            let mut rest = &mut points[base * width..];
            for &(b, e) in &merged {
                let (head, tail) = rest.split_at_mut((e - b) * width);
                reads.push((particles_at[q] + b * width * 8, as_bytes_mut(head)));
                rest = tail;
            }
            get(records, q, &mut reads, stats);
        }
        stats.particles = points.len() / width;
        (extra, points)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_and_records() {
        let b = OctBox { level: 3, anchor: [5, 2, 7], begin: 4, end: 9, first_child: 11, children: 3, parent: 0 };
        let (l, k) = box_id(&b);
        let parent = OctBox { level: 2, anchor: [2, 1, 3], begin: 0, end: 0, first_child: 0, children: 0, parent: 0 };
        assert_eq!(parent_id((l, k)), box_id(&parent));
        assert_eq!(record(&b), [3.0, 5.0, 2.0, 7.0, 5.0, 3.0, 11.0, 4.0, 9.0]);
        assert_eq!(std::mem::size_of::<Record>(), RECORD_BYTES);
    }
}
