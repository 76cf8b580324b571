//! Deterministic parallel counting sort of particles into bins (cells, slabs).
//!
//! Two passes, as for ParkiPy's cell lists but without atomics: each of `T` chunks of the input
//! counts its keys; an exclusive scan over `(bin, chunk)` gives every chunk its write position per
//! bin; each chunk scatters its particles. The result is a stable sort: the order inside a bin is
//! the input order, independent of the thread count.

use parki_core::par::DisjointSlice;
use parki_core::Par;
use rayon::prelude::{IndexedParallelIterator, IntoParallelRefMutIterator, ParallelIterator, ParallelSlice};

/// Particles grouped by bin.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Binned {
    /// `offsets[b]..offsets[b+1]` are the positions of bin `b` in `order`; length `bins + 1`.
    pub offsets: Vec<usize>,
    /// `order[k]` is the input index of the `k`-th particle in bin order.
    pub order: Vec<u32>,
}

impl Binned {
    /// Number of bins.
    pub fn bins(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Particles in bin `b`.
    pub fn count(&self, b: usize) -> usize {
        self.offsets[b + 1] - self.offsets[b]
    }

    /// Largest bin.
    pub fn max_count(&self) -> usize {
        (0..self.bins()).map(|b| self.count(b)).max().unwrap_or(0)
    }

    /// Number of non-empty bins.
    pub fn nonempty(&self) -> usize {
        (0..self.bins()).filter(|&b| self.count(b) > 0).count()
    }
}

/// Sorts `keys` (bin of each particle, `< bins`) into bins; stable.
///
/// Panics if there are more than `u32::MAX` particles or a key is out of range.
pub fn counting_sort(keys: &[u32], bins: usize, par: Par) -> Binned {
    assert!(keys.len() <= u32::MAX as usize, "at most 2^32-1 particles per process");
    let n = keys.len();
    let chunks = match par {
        Par::Seq => 1,
        Par::Rayon(t) => (t.max(1) * 2).min(n.div_ceil(4096)).max(1),
    };
    let chunk_len = n.div_ceil(chunks).max(1);
    // pass 1: per-chunk histograms
    let count = |ks: &[u32]| {
        let mut h = vec![0usize; bins];
        for &k in ks {
            h[k as usize] += 1;
        }
        h
    };
    let mut hist: Vec<Vec<usize>> = match par {
        Par::Seq => keys.chunks(chunk_len).map(count).collect(),
        Par::Rayon(_) => keys.par_chunks(chunk_len).map(count).collect(),
    };
    // exclusive scan in (bin, chunk) order
    let mut offsets = vec![0usize; bins + 1];
    let mut running = 0usize;
    for b in 0..bins {
        offsets[b] = running;
        for h in hist.iter_mut() {
            let c = h[b];
            h[b] = running;
            running += c;
        }
    }
    offsets[bins] = running;
    // pass 2: scatter
    let mut order = vec![0u32; n];
    {
        let out = DisjointSlice::new(&mut order);
        let scatter = |(ci, h): (usize, &mut Vec<usize>)| {
            let start = ci * chunk_len;
            let end = (start + chunk_len).min(n);
            for (i, &k) in keys[start..end].iter().enumerate() {
                let pos = h[k as usize];
                h[k as usize] += 1;
                // SAFETY: the scan gave every (bin, chunk) pair its own range of positions, so
                // each position is written by exactly one chunk, once.
                unsafe { out.range_mut(pos, pos + 1)[0] = (start + i) as u32 };
            }
        };
        match par {
            Par::Seq => hist.iter_mut().enumerate().for_each(scatter),
            Par::Rayon(_) => hist.par_iter_mut().enumerate().for_each(scatter),
        }
    }
    Binned { offsets, order }
}

#[cfg(test)]
mod tests {
    use super::counting_sort;
    use parki_core::Par;

    #[test]
    fn stable_and_independent_of_threads() {
        let keys: Vec<u32> = (0..100_000u64).map(|i| ((i * 2654435761) % 97) as u32).collect();
        let a = counting_sort(&keys, 97, Par::Seq);
        for t in [2, 3, 8] {
            assert_eq!(a, counting_sort(&keys, 97, Par::Rayon(t)));
        }
        for b in 0..97 {
            let bin = &a.order[a.offsets[b]..a.offsets[b + 1]];
            assert!(bin.windows(2).all(|w| w[0] < w[1]));
            assert!(bin.iter().all(|&i| keys[i as usize] == b as u32));
        }
        assert_eq!(a.offsets[97], keys.len());
    }
}
