//! The interaction lists evaluated (BLDTT paper §2.4, eqs. (6), (8), (12), (15)): every PP, PC,
//! CP and CC entry is one sum of the kernel over a contiguous block of sources (particles in
//! tree order, or a cluster's proxies) at a set of targets (a leaf's particles, or a cluster's
//! proxies), [`LANES`] sources at a time.
//!
//! - PP and PC write the targets' potentials. An entry whose target cluster is not a leaf is
//!   handed to each leaf below it, so that the leaves, in parallel, write disjoint ranges.
//! - CP and CC write the target clusters' proxy potentials, one cluster per task.
//!
//! Within an entry, the sources are the outer loop and the targets the inner one, so that a
//! block of sources (at most a leaf or `(n + 1)^3` proxies) stays in cache while every target
//! passes over it.

use parki_core::isa::Isa;

use crate::kernel::{Avx512, LaneDensities, LaneMath, PairKernel, Portable, LANES, MAX_DENSITY, MAX_VALUE};

/// Points in structure-of-arrays form, with `DENSITY` density components stored component-major
/// (`q[c * len + j]`) when they are sources.
#[derive(Clone, Debug, Default)]
pub(crate) struct Soa {
    pub x: Vec<f64>,
    pub y: Vec<f64>,
    pub z: Vec<f64>,
    pub q: Vec<f64>,
}

impl Soa {
    /// Room for `len` points with `ncomp` density components.
    pub fn zeroed(len: usize, ncomp: usize) -> Self {
        Self { x: vec![0.0; len], y: vec![0.0; len], z: vec![0.0; len], q: vec![0.0; len * ncomp] }
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.x.len()
    }

    /// The coordinates of `begin..end`.
    pub fn xyz(&self, begin: usize, end: usize) -> [&[f64]; 3] {
        [&self.x[begin..end], &self.y[begin..end], &self.z[begin..end]]
    }
}

/// Sums over the tail `j0..end` (fewer than [`LANES`] sources) padded with zero densities at
/// distance 1, which every kernel maps to zero.
#[inline(always)]
fn tail<K: PairKernel, M: LaneMath>(
    kernel: &K,
    m: M,
    t: [f64; 3],
    src: &Soa,
    j0: usize,
    end: usize,
    acc: &mut [[f64; LANES]; MAX_VALUE],
) {
    let len = src.len();
    let mut d = [[0.0; LANES]; 3];
    let mut r2 = [1.0; LANES];
    let mut q = [0.0; LANES * MAX_DENSITY];
    d[0] = [1.0; LANES];
    for (l, j) in (j0..end).enumerate() {
        let r = [t[0] - src.x[j], t[1] - src.y[j], t[2] - src.z[j]];
        for a in 0..3 {
            d[a][l] = r[a];
        }
        r2[l] = r[0] * r[0] + r[1] * r[1] + r[2] * r[2];
        for c in 0..K::DENSITY {
            q[c * LANES + l] = src.q[c * len + j];
        }
    }
    kernel.lanes(m, &d, &r2, LaneDensities::new(&q, LANES, 0), acc);
}

/// The body of [`accumulate`], compiled once per instruction set.
#[inline(always)]
fn accumulate_with<K: PairKernel, M: LaneMath>(
    kernel: &K,
    m: M,
    xyz: [&[f64]; 3],
    src: &Soa,
    ranges: &[(usize, usize)],
    out: &mut [f64],
) {
    let [tx, ty, tz] = xyz;
    let nv = K::VALUE;
    let stride = src.len();
    assert!(out.len() >= tx.len() * nv && ty.len() == tx.len() && tz.len() == tx.len(), "target arrays");
    for &(begin, end) in ranges {
        let full = begin + (end - begin) / LANES * LANES;
        let (sx, sy, sz) = (&src.x[begin..full], &src.y[begin..full], &src.z[begin..full]);
        for i in 0..tx.len() {
            let t = [tx[i], ty[i], tz[i]];
            let mut acc = [[0.0; LANES]; MAX_VALUE];
            for (b, ((xs, ys), zs)) in
                sx.chunks_exact(LANES).zip(sy.chunks_exact(LANES)).zip(sz.chunks_exact(LANES)).enumerate()
            {
                let mut d = [[0.0; LANES]; 3];
                let mut r2 = [0.0; LANES];
                for l in 0..LANES {
                    let (dx, dy, dz) = (t[0] - xs[l], t[1] - ys[l], t[2] - zs[l]);
                    d[0][l] = dx;
                    d[1][l] = dy;
                    d[2][l] = dz;
                    r2[l] = dz.mul_add(dz, dy.mul_add(dy, dx * dx));
                }
                kernel.lanes(m, &d, &r2, LaneDensities::new(&src.q, stride, begin + b * LANES), &mut acc);
            }
            if full < end {
                tail(kernel, m, t, src, full, end, &mut acc);
            }
            for v in 0..nv {
                out[i * nv + v] += acc[v].iter().sum::<f64>();
            }
        }
    }
}

/// [`accumulate_with`] compiled for AVX-512F.
///
/// # Safety
/// The CPU must have AVX-512F, AVX-512VL, AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn accumulate_avx512<K: PairKernel>(
    kernel: &K,
    m: Avx512,
    xyz: [&[f64]; 3],
    src: &Soa,
    ranges: &[(usize, usize)],
    out: &mut [f64],
) {
    accumulate_with(kernel, m, xyz, src, ranges, out)
}

/// [`accumulate_with`] compiled for AVX2 and FMA.
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn accumulate_avx2<K: PairKernel>(
    kernel: &K,
    xyz: [&[f64]; 3],
    src: &Soa,
    ranges: &[(usize, usize)],
    out: &mut [f64],
) {
    accumulate_with(kernel, Portable, xyz, src, ranges, out)
}

/// Adds, for every source block `begin..end` of `ranges` (in `src`) and every target `i` of
/// `xyz`, `sum_j G(x_i - y_j) q_j` into `out[i * VALUE..]`, with the vector code of `isa` (the
/// portable code where the CPU lacks it).
pub(crate) fn accumulate<K: PairKernel>(
    isa: Isa,
    kernel: &K,
    xyz: [&[f64]; 3],
    src: &Soa,
    ranges: &[(usize, usize)],
    out: &mut [f64],
) {
    #[cfg(target_arch = "x86_64")]
    match isa {
        Isa::Avx512 if isa.available() => {
            if let Some(m) = Avx512::new() {
                // SAFETY: `available()` checked AVX-512F, AVX-512VL, AVX2 and FMA.
                return unsafe { accumulate_avx512(kernel, m, xyz, src, ranges, out) };
            }
        }
        Isa::Avx2 if isa.available() => {
            // SAFETY: `available()` checked AVX2 and FMA.
            return unsafe { accumulate_avx2(kernel, xyz, src, ranges, out) };
        }
        _ => {}
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = isa;
    accumulate_with(kernel, Portable, xyz, src, ranges, out)
}

/// Compressed lists: the entries of item `i` (a leaf or a target cluster) are
/// `ranges[offsets[i]..offsets[i + 1]]`, source blocks as `(begin, end)`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Csr {
    pub offsets: Vec<usize>,
    pub ranges: Vec<(usize, usize)>,
}

impl Csr {
    /// From `(item, range)` pairs of `items` items, in any order (kept within an item).
    pub fn from_pairs(items: usize, mut pairs: Vec<(usize, (usize, usize))>) -> Self {
        pairs.sort_by_key(|p| p.0);
        let mut offsets = vec![0usize; items + 1];
        for &(i, _) in &pairs {
            offsets[i + 1] += 1;
        }
        for i in 0..items {
            offsets[i + 1] += offsets[i];
        }
        Self { offsets, ranges: pairs.into_iter().map(|p| p.1).collect() }
    }

    /// Item `i`'s source blocks.
    pub fn of(&self, i: usize) -> &[(usize, usize)] {
        &self.ranges[self.offsets[i]..self.offsets[i + 1]]
    }
}
