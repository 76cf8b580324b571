//! [`LocalR2r`]: an in-place multi-dimensional real-to-real transform of a dense array on one
//! process, which many threads may execute at once on their own arrays (the plan-time kernel
//! tables of the free-space Ewald sum transform one such array per periodic mode and
//! component), each execution itself on FFTW's threads where fewer arrays than threads are left
//! ([`LocalR2r::with_threads`]: free space has one periodic mode).

use parki_core::Result;

use crate::ffi::{FftReal, Plan1d, R2rKind};

/// A planned in-place real-to-real transform of a C-ordered array of `dims` (slowest first), one
/// [`R2rKind`] per dimension (FFTW's unnormalised definitions, see [`R2rKind`]).
pub struct LocalR2r<T: FftReal> {
    dims: Vec<usize>,
    len: usize,
    plan: Plan1d<T>,
}

impl<T: FftReal> LocalR2r<T> {
    /// Plans the transform (FFTW_ESTIMATE, unaligned: any buffer of the right length may be
    /// transformed).
    ///
    /// # Errors
    /// A dimension of zero, `dims` and `kinds` of different lengths, or FFTW failing to plan.
    pub fn new(dims: &[usize], kinds: &[R2rKind]) -> Result<Self> {
        Self::with_threads(dims, kinds, 1)
    }

    /// As [`new`](Self::new), each execution on `threads` of FFTW's threads.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_threads(dims: &[usize], kinds: &[R2rKind], threads: usize) -> Result<Self> {
        if dims.len() != kinds.len() || dims.is_empty() || dims.contains(&0) {
            return Err(parki_core::Error::OutOfRange {
                field: "local r2r dims".into(),
                value: format!("{dims:?} with {} kinds", kinds.len()),
                allowed: "one positive size per kind".into(),
            });
        }
        let len: usize = dims.iter().product();
        let mut strides = vec![1usize; dims.len()];
        for d in (0..dims.len() - 1).rev() {
            strides[d] = strides[d + 1] * dims[d + 1];
        }
        let guru: Vec<(usize, usize, usize)> = dims.iter().zip(&strides).map(|(&n, &s)| (n, s, s)).collect();
        let mut scratch = vec![T::ZERO; len];
        crate::ensure_fftw_threads();
        let plan = Plan1d::r2r_nd_unaligned(&guru, kinds, &[(1, 0, 0)], scratch.as_mut_ptr(), threads)?;
        Ok(Self { dims: dims.to_vec(), len, plan })
    }

    /// `count` contiguous lines of `n` values (the array `[count][n]`), each transformed by
    /// `kind`, on `threads` of FFTW's threads. [`dims`](Self::dims) is `[count, n]`.
    ///
    /// # Errors
    /// `n` or `count` zero, or FFTW failing to plan.
    pub fn batch(n: usize, kind: R2rKind, count: usize, threads: usize) -> Result<Self> {
        if n == 0 || count == 0 {
            return Err(parki_core::Error::OutOfRange {
                field: "local r2r batch".into(),
                value: format!("{count} lines of {n}"),
                allowed: "at least one line of at least one value".into(),
            });
        }
        let len = n * count;
        let mut scratch = vec![T::ZERO; len];
        crate::ensure_fftw_threads();
        let plan = Plan1d::r2r_nd_unaligned(&[(n, 1, 1)], &[kind], &[(count, n, n)], scratch.as_mut_ptr(), threads)?;
        Ok(Self { dims: vec![count, n], len, plan })
    }

    /// The array's dimensions.
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    /// Transforms `data` in place.
    ///
    /// # Panics
    /// If `data` does not hold exactly the planned number of values.
    pub fn execute(&self, data: &mut [T]) {
        assert_eq!(data.len(), self.len, "array of the planned size");
        // SAFETY: the plan is unaligned and made for a contiguous array of `len` values, which
        // `data` is; FFTW's new-array execute is thread safe.
        unsafe { self.plan.execute(data.as_mut_ptr()) }
    }
}

// SAFETY: the plan is immutable after creation and FFTW's execute functions are thread safe.
unsafe impl<T: FftReal> Sync for LocalR2r<T> {}
// SAFETY: as above; the plan is destroyed under FFTW's planner mutex.
unsafe impl<T: FftReal> Send for LocalR2r<T> {}

#[cfg(test)]
mod tests {
    use super::LocalR2r;
    use crate::R2rKind;

    #[test]
    fn dct1_dst1_match_definitions() {
        let (n0, n1) = (5usize, 4usize);
        let plan = LocalR2r::<f64>::new(&[n0, n1], &[R2rKind::Dct1, R2rKind::Dst1]).unwrap();
        let x: Vec<f64> = (0..n0 * n1).map(|i| ((i * 7 + 3) % 11) as f64 - 5.0).collect();
        let mut y = x.clone();
        plan.execute(&mut y);
        let pi = std::f64::consts::PI;
        for k0 in 0..n0 {
            for k1 in 0..n1 {
                let mut s = 0.0;
                for j0 in 0..n0 {
                    let w0 = if j0 == 0 || j0 == n0 - 1 { 1.0 } else { 2.0 };
                    let c = w0 * (pi * (j0 * k0) as f64 / (n0 - 1) as f64).cos();
                    for j1 in 0..n1 {
                        let sn = 2.0 * (pi * ((j1 + 1) * (k1 + 1)) as f64 / (n1 + 1) as f64).sin();
                        s += c * sn * x[j0 * n1 + j1];
                    }
                }
                assert!((s - y[k0 * n1 + k1]).abs() < 1e-12, "{s} {}", y[k0 * n1 + k1]);
            }
        }
    }

    #[test]
    fn a_batch_transforms_every_line_alone() {
        let (n, count) = (7usize, 5usize);
        for kind in [R2rKind::Dct1, R2rKind::Dst1] {
            let batch = LocalR2r::<f64>::batch(n, kind, count, 1).unwrap();
            let one = LocalR2r::<f64>::new(&[n], &[kind]).unwrap();
            let x: Vec<f64> = (0..n * count).map(|i| ((i * 5 + 1) % 13) as f64 - 6.0).collect();
            let mut y = x.clone();
            batch.execute(&mut y);
            for (line, got) in x.chunks(n).zip(y.chunks(n)) {
                let mut want = line.to_vec();
                one.execute(&mut want);
                assert_eq!(got, &want[..], "{kind:?}");
            }
        }
    }
}
