//! The kernel tables of the free directions stored on the folded spectral block.
//!
//! Every table component is `m(k) S(|k|) sigma(|k|) prod_a w_a(k_a)` transformed along the free
//! axes, with `m` a polynomial even or odd in each `k_a` (`Poly::odd` in [`crate::free`]) and
//! the rest even in each. Along an axis of `n` slots, slot `j` holds the wave number of `j` and
//! slot `n - j` that of `-j`, so
//!
//! `T(.., n - j, ..) = s T(.., j, ..)`, `s = -1` where the component is odd along the axis,
//!
//! on the periodic axes (the modes `+-j`) and on the padded free ones (the tables are DCT-I or
//! DST-I outputs, mirrored: docs/design.md, "Free directions"). The spectrum's `x` axis is
//! already the half one (real-to-complex); along `y` and `z` a rank stores only the distinct
//! `min(j, n - j)` of its block and CNV reads slot `j` there with the sign of the component's
//! parity. One rank holds `(n_y/2 + 1)(n_z/2 + 1)` of the `n_y n_z` rows, about a quarter; a
//! rank of a slab or pencil decomposition (its `y` range one side of `n_y/2`) about half (`z`).

/// One axis of a rank's spectral block as its tables store it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AxisFold {
    /// The global slot (`min(j, n - j)` where folded) of each stored slot, ascending.
    stored: Vec<usize>,
    /// Per local slot of the block: its stored slot `<< 1`, `| 1` where it reads the mirror
    /// image (`j > n/2`: the stored slot holds `n - j`).
    slots: Vec<u32>,
}

impl AxisFold {
    /// The block's slots `start..start + count` of an axis of `n` slots, folded: slot `j` is
    /// stored as `min(j, n - j)`.
    pub fn folded((start, count): (usize, usize), n: usize) -> Self {
        let fold = |j: usize| if j <= n / 2 { (j, false) } else { (n - j, true) };
        let mut stored: Vec<usize> = (start..start + count).map(|j| fold(j).0).collect();
        stored.sort_unstable();
        stored.dedup();
        let slots = (start..start + count)
            .map(|j| {
                let (f, mirrored) = fold(j);
                let s = stored.binary_search(&f).expect("stored");
                ((s as u32) << 1) | u32::from(mirrored)
            })
            .collect();
        Self { stored, slots }
    }

    /// The block's slots `start..start + count`, each stored as itself (the half axis `x`).
    pub fn unfolded((start, count): (usize, usize)) -> Self {
        Self { stored: (start..start + count).collect(), slots: (0..count as u32).map(|s| s << 1).collect() }
    }

    /// The global slot of each stored slot, ascending.
    pub fn stored(&self) -> &[usize] {
        &self.stored
    }

    /// Stored slots.
    pub fn len(&self) -> usize {
        self.stored.len()
    }

    /// Whether nothing is stored (an empty block).
    pub fn is_empty(&self) -> bool {
        self.stored.is_empty()
    }

    /// Local slot `l` of the block: `(stored slot, mirrored)`.
    #[inline]
    pub fn slot(&self, l: usize) -> (usize, bool) {
        let s = self.slots[l];
        ((s >> 1) as usize, s & 1 == 1)
    }

    /// Per local slot, `stored << 1 | mirrored` (as a device reads them).
    pub fn slots(&self) -> &[u32] {
        &self.slots
    }
}

/// The sign of a table read through mirrored axes: `-1` where the component's `parity` (bit 0
/// odd along `y`, bit 1 along `z`) and the `mirrored` axes (same bits) share an odd count.
#[inline]
pub fn mirror_sign(parity: u32, mirrored: u32) -> f64 {
    if (parity & mirrored).count_ones() % 2 == 1 {
        -1.0
    } else {
        1.0
    }
}

/// Stored elements per table of the spectrum of a padded grid of `n` points per axis, summed
/// over the ranks, at most: `x` the half axis, `z` folded, `y` as a decomposition's ranks hold
/// it (each range on one side of `n_y/2` stores it whole; one rank alone folds it too, see
/// [`stored_elements_one_rank`]).
pub fn stored_elements_bound(n: [usize; 3]) -> usize {
    (n[0] / 2 + 1) * n[1] * (n[2] / 2 + 1)
}

/// Stored elements per table of one rank holding the whole spectrum of `n` points per axis.
pub fn stored_elements_one_rank(n: [usize; 3]) -> usize {
    n.iter().map(|&v| v / 2 + 1).product()
}

/// A rank's block `[x, y, z]` (per axis `(start, count)`) of a spectrum of `n` slots per axis
/// (`x` the half axis), as the tables store it: `x` as it is, `y` and `z` folded.
pub fn fold_block(block: [(usize, usize); 3], n: [usize; 3]) -> [AxisFold; 3] {
    [AxisFold::unfolded(block[0]), AxisFold::folded(block[1], n[1]), AxisFold::folded(block[2], n[2])]
}

#[cfg(test)]
mod tests {
    use super::{fold_block, stored_elements_bound, stored_elements_one_rank, AxisFold};

    /// Every local slot reads the stored slot of `min(j, n - j)`, mirrored exactly where
    /// `j > n/2`; the stored slots are distinct and each read by some local slot; whole axes
    /// (even and odd `n`) store `n/2 + 1` slots, a range on one side of `n/2` as many as it has.
    #[test]
    fn local_slots_read_their_mirror_images() {
        for n in [1usize, 2, 7, 8, 9, 16] {
            for start in 0..n {
                for count in 0..=n - start {
                    let f = AxisFold::folded((start, count), n);
                    let mut read = vec![false; f.len()];
                    for l in 0..count {
                        let j = start + l;
                        let (s, mirrored) = f.slot(l);
                        read[s] = true;
                        assert_eq!(mirrored, j > n / 2, "n {n} j {j}");
                        let want = if mirrored { n - j } else { j };
                        assert_eq!(f.stored()[s], want, "n {n} j {j}");
                        assert_eq!(f.slots()[l], ((s as u32) << 1) | u32::from(mirrored));
                    }
                    assert!(read.iter().all(|&r| r), "n {n} {start}+{count}: a stored slot nobody reads");
                    assert!(f.stored().windows(2).all(|w| w[0] < w[1]));
                    assert_eq!(f.is_empty(), count == 0);
                }
            }
            assert_eq!(AxisFold::folded((0, n), n).len(), n / 2 + 1, "n {n}");
        }
        assert_eq!(AxisFold::folded((9, 5), 16).len(), 5);
        let b = fold_block([(2, 3), (0, 8), (0, 6)], [10, 8, 6]);
        assert_eq!(b[0].stored(), [2, 3, 4]);
        assert_eq!(b[0].slot(2), (2, false));
        assert_eq!((b[1].len(), b[2].len()), (5, 4));
        // the counts the memory estimates use, against the folds of whole and split blocks
        let n = [10, 8, 6];
        let whole = fold_block([(0, 6), (0, 8), (0, 6)], n);
        assert_eq!(whole.iter().map(AxisFold::len).product::<usize>(), stored_elements_one_rank(n));
        let split: usize = [(0, 4), (4, 4)]
            .iter()
            .map(|&y| fold_block([(0, 6), y, (0, 6)], n).iter().map(AxisFold::len).product::<usize>())
            .sum();
        assert!(split <= stored_elements_bound(n), "{split}");
    }
}
