//! Process grids and grid topologies (FLUPS §4.1, §4.3 of the digest).
//!
//! A global grid is split over a 1-D (slab: `[1, P]`) or 2-D (pencil: `[P_y, P_z]`) process
//! grid over its y and z axes. Splits are as even as possible: `n` points over `p` parts give
//! the first `n mod p` parts one more point (`start = r floor(n/p) + min(r, n mod p)`), for any
//! rank count. Rank `r` sits at process-grid coordinates `(r mod P_y, r / P_y)`.

use std::ops::Range;

use parki_core::{Error, Result};

/// First index of part `r` of `n` items split into `p` parts.
#[inline]
pub fn split_start(n: usize, p: usize, r: usize) -> usize {
    r * (n / p) + r.min(n % p)
}

/// The items of part `r` of `n` items split into `p` parts.
#[inline]
pub fn split_range(n: usize, p: usize, r: usize) -> Range<usize> {
    split_start(n, p, r)..split_start(n, p, r + 1)
}

/// The part that holds item `i` of `n` items split into `p` parts.
#[inline]
pub fn split_owner(n: usize, p: usize, i: usize) -> usize {
    let (q, m) = (n / p, n % p);
    let big = m * (q + 1);
    if i < big {
        i / (q + 1)
    } else {
        m + (i - big) / q.max(1)
    }
}

/// Slab or pencil, as asked in `[parallel]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Decomposition {
    /// Slab if the ranks fit along z, pencil otherwise.
    #[default]
    Auto,
    /// 1-D process grid over z.
    Slab,
    /// 2-D process grid over y and z.
    Pencil,
}

impl Decomposition {
    /// Parses `auto`, `slab` or `pencil`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "auto" => Some(Self::Auto),
            "slab" => Some(Self::Slab),
            "pencil" => Some(Self::Pencil),
            _ => None,
        }
    }
}

/// A 2-D process grid `[P_y, P_z]` over the y and z axes of the box.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcGrid {
    /// Ranks along y and z.
    pub dims: [usize; 2],
}

impl ProcGrid {
    /// Slabs over z.
    pub fn slab(ranks: usize) -> Self {
        Self { dims: [1, ranks] }
    }

    /// Number of ranks.
    pub fn ranks(&self) -> usize {
        self.dims[0] * self.dims[1]
    }

    /// `"slab"` when only z is split, `"pencil"` otherwise.
    pub fn kind(&self) -> &'static str {
        if self.dims[0] == 1 {
            "slab"
        } else {
            "pencil"
        }
    }

    /// Coordinates `(i_y, i_z)` of `rank`.
    pub fn coords(&self, rank: usize) -> [usize; 2] {
        [rank % self.dims[0], rank / self.dims[0]]
    }

    /// Rank at coordinates `c`, wrapped periodically.
    pub fn rank(&self, c: [i64; 2]) -> usize {
        let y = c[0].rem_euclid(self.dims[0] as i64) as usize;
        let z = c[1].rem_euclid(self.dims[1] as i64) as usize;
        y + self.dims[0] * z
    }

    /// Chooses a process grid for `ranks` ranks: `explicit` if given, else by `kind`. An axis
    /// may be split into at most `max[0]` (y) and `max[1]` (z) parts (every part must hold at
    /// least one grid plane and one cell layer). Auto takes slabs when they fit, else the most
    /// nearly square pencil grid.
    pub fn choose(ranks: usize, kind: Decomposition, explicit: Option<[usize; 2]>, max: [usize; 2]) -> Result<Self> {
        let fits = |g: [usize; 2]| g[0] <= max[0] && g[1] <= max[1];
        let err = |what: String| Error::OutOfRange {
            field: "parallel".into(),
            value: what,
            allowed: format!(
                "a process grid [P_y, P_z] with P_y P_z = {ranks} ranks, P_y <= {} and P_z <= {} (each rank \
                 needs at least one grid plane and one cell layer per split axis); use fewer ranks or a finer \
                 grid",
                max[0], max[1]
            ),
        };
        if let Some(g) = explicit {
            if g[0] * g[1] != ranks || !fits(g) || g.contains(&0) {
                return Err(err(format!("grid = {g:?} on {ranks} ranks")));
            }
            return Ok(Self { dims: g });
        }
        let slab = [1, ranks];
        if kind != Decomposition::Pencil && fits(slab) {
            return Ok(Self { dims: slab });
        }
        if kind == Decomposition::Slab {
            return Err(err(format!("slab on {ranks} ranks")));
        }
        let mut best: Option<[usize; 2]> = None;
        for py in 1..=ranks {
            if !ranks.is_multiple_of(py) {
                continue;
            }
            let g = [py, ranks / py];
            if (kind == Decomposition::Pencil && py == 1 && ranks > 1) || !fits(g) {
                continue;
            }
            let score = |g: [usize; 2]| (g[0].abs_diff(g[1]), g[0] > g[1]);
            if best.is_none_or(|b| score(g) < score(b)) {
                best = Some(g);
            }
        }
        best.map(|dims| Self { dims }).ok_or_else(|| err(format!("{kind:?} on {ranks} ranks").to_lowercase()))
    }
}

/// One distribution of a global 3-D array (axes x, y, z) over ranks: `parts[d]` parts along axis
/// `d`, this rank holding part `coords[d]`. Memory order is always `[z][y][x]`, x fastest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GridTopology {
    /// Global sizes.
    pub global: [usize; 3],
    /// Parts per axis.
    pub parts: [usize; 3],
    /// This rank's part per axis.
    pub coords: [usize; 3],
}

impl GridTopology {
    /// The owned index range along `axis`.
    pub fn range(&self, axis: usize) -> Range<usize> {
        split_range(self.global[axis], self.parts[axis], self.coords[axis])
    }

    /// Part `part`'s range along `axis`.
    pub fn range_of(&self, axis: usize, part: usize) -> Range<usize> {
        split_range(self.global[axis], self.parts[axis], part)
    }

    /// Owned sizes per axis.
    pub fn local(&self) -> [usize; 3] {
        [0, 1, 2].map(|d| self.range(d).len())
    }

    /// Owned points.
    pub fn local_len(&self) -> usize {
        self.local().iter().product()
    }
}

#[cfg(test)]
mod tests {
    use super::{split_owner, split_range, split_start, Decomposition, ProcGrid};

    #[test]
    fn even_splits() {
        assert_eq!((0..3).map(|r| split_range(20, 3, r).len()).collect::<Vec<_>>(), [7, 7, 6]);
        for (n, p) in [(20, 3), (7, 7), (10, 4), (129, 4), (5, 1)] {
            assert_eq!(split_start(n, p, p), n);
            for i in 0..n {
                assert!(split_range(n, p, split_owner(n, p, i)).contains(&i), "{n} {p} {i}");
            }
        }
    }

    #[test]
    fn process_grids() {
        assert_eq!(ProcGrid::choose(4, Decomposition::Auto, None, [64, 64]).unwrap().dims, [1, 4]);
        assert_eq!(ProcGrid::choose(4, Decomposition::Pencil, None, [64, 64]).unwrap().dims, [2, 2]);
        assert_eq!(ProcGrid::choose(6, Decomposition::Auto, None, [64, 4]).unwrap().dims, [2, 3]);
        assert!(ProcGrid::choose(5, Decomposition::Slab, None, [64, 4]).is_err());
        assert!(ProcGrid::choose(4, Decomposition::Auto, Some([3, 1]), [64, 64]).is_err());
        let g = ProcGrid { dims: [2, 3] };
        assert_eq!(g.coords(5), [1, 2]);
        assert_eq!(g.rank([-1, 3]), 1);
    }
}
