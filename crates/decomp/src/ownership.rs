//! [`CellOwnership`]: which rank owns which particles, by the cell column they lie in.
//!
//! A process grid `[P_y, P_z]` splits the y and z *cell layers* of a global periodic cell grid
//! (FLUPS splits, [`split_range`]): rank `(i_y, i_z)` owns the columns `cy in
//! split_range(n_y, P_y, i_y)`, `cz in split_range(n_z, P_z, i_z)` (all `cx`). A particle
//! belongs to the owner of its cell column. Because ownership follows cells, a method that sums
//! all pairs of neighbouring cells (P2P on cell lists) sums exactly the pairs of the
//! single-process computation when each rank also holds a one-layer ring of ghost columns around
//! its own: its *window*.

use std::ops::Range;

use crate::topology::{split_owner, split_range, ProcGrid};

/// Ownership of the cell columns of a global cell grid over a process grid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CellOwnership {
    /// The process grid over the y and z axes.
    pub pgrid: ProcGrid,
    /// Global cells per axis.
    pub ncell: [usize; 3],
    /// Periodic axes: along a free axis windows do not wrap, the ring stops at the faces of
    /// the box, and an unsplit axis is a window with an empty layer beyond each face.
    pub periodic: [bool; 3],
}

/// One window axis (y or z) of a rank: local cell `l` is global cell `origin + l` (unwrapped).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowAxis {
    /// Unwrapped global index of local cell 0.
    pub origin: i64,
    /// Local cells.
    pub len: usize,
    /// The axis is not split: the window holds every cell and wraps periodically.
    pub wrap: bool,
}

impl CellOwnership {
    /// Ownership of a grid of `ncell` cells over `pgrid`, periodic along `periodic`.
    pub fn new(pgrid: ProcGrid, ncell: [usize; 3], periodic: [bool; 3]) -> Self {
        Self { pgrid, ncell, periodic }
    }

    /// The y and z cell ranges whose columns `rank` owns.
    pub fn columns(&self, rank: usize) -> [Range<usize>; 2] {
        let [iy, iz] = self.pgrid.coords(rank);
        [split_range(self.ncell[1], self.pgrid.dims[0], iy), split_range(self.ncell[2], self.pgrid.dims[1], iz)]
    }

    /// Number of columns `rank` owns.
    pub fn column_count(&self, rank: usize) -> usize {
        let [y, z] = self.columns(rank);
        y.len() * z.len()
    }

    /// Index `(cy - y0) + n_y (cz - z0)` of owned column `(cy, cz)` among `rank`'s columns.
    #[inline]
    pub fn column_index(&self, rank: usize, cy: usize, cz: usize) -> usize {
        let [y, z] = self.columns(rank);
        (cy - y.start) + y.len() * (cz - z.start)
    }

    /// The rank that owns column `(cy, cz)`.
    #[inline]
    pub fn owner(&self, cy: usize, cz: usize) -> usize {
        let iy = split_owner(self.ncell[1], self.pgrid.dims[0], cy);
        let iz = split_owner(self.ncell[2], self.pgrid.dims[1], cz);
        iy + self.pgrid.dims[0] * iz
    }

    /// `rank`'s window along y (`axis = 0`) or z (`axis = 1`): its owned layers plus one ghost
    /// layer on each side along a split axis, every layer (wrapping) along an unsplit periodic
    /// one, every layer plus an empty one beyond each face along an unsplit free one.
    pub fn window(&self, rank: usize, axis: usize) -> WindowAxis {
        let n = self.ncell[1 + axis];
        if self.pgrid.dims[axis] == 1 {
            if self.periodic[1 + axis] {
                WindowAxis { origin: 0, len: n, wrap: true }
            } else {
                WindowAxis { origin: -1, len: n + 2, wrap: false }
            }
        } else {
            let r = &self.columns(rank)[axis];
            WindowAxis { origin: r.start as i64 - 1, len: r.len() + 2, wrap: false }
        }
    }

    /// The window along x (never split): every cell, wrapping when x is periodic, with an empty
    /// layer beyond each face when it is free.
    pub fn window_x(&self) -> WindowAxis {
        if self.periodic[0] {
            WindowAxis { origin: 0, len: self.ncell[0], wrap: true }
        } else {
            WindowAxis { origin: -1, len: self.ncell[0] + 2, wrap: false }
        }
    }

    /// The ghost ring of `rank`: window-local `(ly, lz)` and wrapped global `(cy, cz)` of every
    /// window column `rank` does not own, in a fixed order that every rank computes alike.
    pub fn ring(&self, rank: usize) -> Vec<([usize; 2], [usize; 2])> {
        let (wy, wz) = (self.window(rank, 0), self.window(rank, 1));
        let mut out = Vec::new();
        for lz in 0..wz.len {
            for ly in 0..wy.len {
                let inner_y = wy.wrap || (ly >= 1 && ly + 1 < wy.len);
                let inner_z = wz.wrap || (lz >= 1 && lz + 1 < wz.len);
                if inner_y && inner_z {
                    continue;
                }
                // along a free axis nothing lies beyond the faces
                let (uy, uz) = (wy.origin + ly as i64, wz.origin + lz as i64);
                let outside = |u: i64, a: usize| !self.periodic[a] && (u < 0 || u >= self.ncell[a] as i64);
                if outside(uy, 1) || outside(uz, 2) {
                    continue;
                }
                let cy = (wy.origin + ly as i64).rem_euclid(self.ncell[1] as i64) as usize;
                let cz = (wz.origin + lz as i64).rem_euclid(self.ncell[2] as i64) as usize;
                out.push(([ly, lz], [cy, cz]));
            }
        }
        out
    }

    /// Distinct ranks of the 3x3 process-grid neighbourhood of `rank` (itself included), sorted.
    pub fn neighbours(&self, rank: usize) -> Vec<usize> {
        let [iy, iz] = self.pgrid.coords(rank);
        let mut v = Vec::with_capacity(9);
        for dz in -1i64..=1 {
            for dy in -1i64..=1 {
                v.push(self.pgrid.rank([iy as i64 + dy, iz as i64 + dz]));
            }
        }
        v.sort_unstable();
        v.dedup();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::CellOwnership;
    use crate::topology::ProcGrid;

    #[test]
    fn every_column_has_one_owner_and_rings_are_consistent() {
        for dims in [[1, 1], [1, 3], [2, 2], [3, 2]] {
            let own = CellOwnership::new(ProcGrid { dims }, [5, 7, 6], [true; 3]);
            let ranks = dims[0] * dims[1];
            let mut owned = [0; 7 * 6];
            for r in 0..ranks {
                let [y, z] = own.columns(r);
                for cz in z.clone() {
                    for cy in y.clone() {
                        owned[cy + 7 * cz] += 1;
                        assert_eq!(own.owner(cy, cz), r);
                        assert!(own.column_index(r, cy, cz) < own.column_count(r));
                    }
                }
                // the ring's columns are owned by neighbours, never by the rank itself unless
                // an axis has fewer than three parts (then a column may come back shifted)
                let nb = own.neighbours(r);
                for (_, c) in own.ring(r) {
                    assert!(nb.contains(&own.owner(c[0], c[1])));
                }
            }
            assert!(owned.iter().all(|&c| c == 1));
        }
        // one rank: no ring, the window wraps
        let own = CellOwnership::new(ProcGrid { dims: [1, 1] }, [4, 4, 4], [true; 3]);
        assert!(own.ring(0).is_empty() && own.window(0, 1).wrap);
    }
}
