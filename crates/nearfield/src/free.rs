//! The free-space Laplace near field of the tree codes (the FMM's P2P, seed 001 §2 "final
//! summation"): `phi(y) += sum_j q_j / |y - x_j|` and `grad phi(y) += -sum_j q_j (y - x_j) /
//! |y - x_j|^3` over runs of sources, in the vectors of [`crate::simd`] (AVX-512: `1/sqrt` by
//! the 14-bit estimate and Newton steps), four targets per pass over a source vector (each load
//! of a source vector serves four targets' accumulators).
//!
//! A source at the target's position (`r = 0`) contributes nothing (the paper's
//! `Phi(y, y) = 0`). Runs are ranges of one padded source array, so a vector that reads past a
//! run's end masks those lanes by their charge.

use parki_core::isa::Isa;
use parki_core::Real;

use crate::simd::{IsaToken, Simd};
use crate::special::KernelReal;

/// Sources in structure-of-arrays form, padded with [`FreeSources::PAD`] charge-free entries so
/// that a vector load at any source index stays inside the arrays.
#[derive(Clone, Debug, Default)]
pub struct FreeSources<T> {
    /// x coordinates (padded).
    pub x: Vec<T>,
    /// y coordinates (padded).
    pub y: Vec<T>,
    /// z coordinates (padded).
    pub z: Vec<T>,
    /// Charges (padded with zeros); for the Stokeslet, the force's x component.
    pub q: Vec<T>,
    /// The force's y and z components (Stokeslet sources only; padded with zeros).
    pub f: [Vec<T>; 2],
    len: usize,
}

impl<T: Real> FreeSources<T> {
    /// Entries of padding: the widest vector's lanes.
    pub const PAD: usize = 16;

    /// From positions and charges (in the order the runs refer to).
    pub fn new(points: &[[f64; 3]], q: &[f64]) -> Self {
        let n = points.len();
        let mut s = Self {
            x: Vec::with_capacity(n + Self::PAD),
            y: Vec::with_capacity(n + Self::PAD),
            z: Vec::with_capacity(n + Self::PAD),
            q: Vec::with_capacity(n + Self::PAD),
            f: [Vec::new(), Vec::new()],
            len: n,
        };
        for (p, &c) in points.iter().zip(q) {
            s.x.push(T::from_f64(p[0]));
            s.y.push(T::from_f64(p[1]));
            s.z.push(T::from_f64(p[2]));
            s.q.push(T::from_f64(c));
        }
        for _ in 0..Self::PAD {
            s.x.push(T::ZERO);
            s.y.push(T::ZERO);
            s.z.push(T::ZERO);
            s.q.push(T::ZERO);
        }
        s
    }

    /// Stokeslet sources: positions and forces.
    pub fn with_forces(points: &[[f64; 3]], forces: &[[f64; 3]]) -> Self {
        let fx: Vec<f64> = forces.iter().map(|f| f[0]).collect();
        let mut s = Self::new(points, &fx);
        for c in 0..2 {
            s.f[c] =
                forces.iter().map(|f| T::from_f64(f[c + 1])).chain(std::iter::repeat_n(T::ZERO, Self::PAD)).collect();
        }
        s
    }

    /// Number of sources (without the padding).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no sources.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// `NT` targets against the runs: `acc[t] = [phi, gx, gy, gz]`.
#[inline(always)]
fn block<V: Simd, const NT: usize, const GRAD: bool>(
    p: [[V; 3]; NT],
    src: &FreeSources<V::Scalar>,
    runs: &[(usize, usize)],
    iota: V,
) -> [[V; 4]; NT]
where
    V::Scalar: KernelReal,
{
    let zero = V::splat(V::Scalar::ZERO);
    let mut acc = [[zero; 4]; NT];
    for &(a, b) in runs {
        let mut j = a;
        while j < b {
            let (sx, sy, sz) = (V::load(&src.x[j..]), V::load(&src.y[j..]), V::load(&src.z[j..]));
            let mut q = V::load(&src.q[j..]);
            if j + V::LANES > b {
                let m = V::splat(V::Scalar::from_f64((b - j) as f64)) - iota;
                q = V::select_positive(m, q, zero);
            }
            for t in 0..NT {
                let d = [p[t][0] - sx, p[t][1] - sy, p[t][2] - sz];
                let r2 = d[2].mul_add(d[2], d[1].mul_add(d[1], d[0] * d[0]));
                let inv = V::select_positive(r2, r2.rsqrt(), zero);
                let qi = q * inv;
                acc[t][0] = acc[t][0] + qi;
                if GRAD {
                    let f = -(qi * inv * inv);
                    acc[t][1] = f.mul_add(d[0], acc[t][1]);
                    acc[t][2] = f.mul_add(d[1], acc[t][2]);
                    acc[t][3] = f.mul_add(d[2], acc[t][3]);
                }
            }
            j += V::LANES;
        }
    }
    acc
}

/// `NT` targets against the runs of Stokeslet sources: `acc[t] = [ux, uy, uz, -]`,
/// `u += f / r + (f . d) d / r^3`, `d = y - x`.
#[inline(always)]
fn stokeslet_block<V: Simd, const NT: usize>(
    p: [[V; 3]; NT],
    src: &FreeSources<V::Scalar>,
    runs: &[(usize, usize)],
    iota: V,
) -> [[V; 4]; NT]
where
    V::Scalar: KernelReal,
{
    let zero = V::splat(V::Scalar::ZERO);
    let mut acc = [[zero; 4]; NT];
    for &(a, b) in runs {
        let mut j = a;
        while j < b {
            let (sx, sy, sz) = (V::load(&src.x[j..]), V::load(&src.y[j..]), V::load(&src.z[j..]));
            let mut f = [V::load(&src.q[j..]), V::load(&src.f[0][j..]), V::load(&src.f[1][j..])];
            if j + V::LANES > b {
                let m = V::splat(V::Scalar::from_f64((b - j) as f64)) - iota;
                for v in f.iter_mut() {
                    *v = V::select_positive(m, *v, zero);
                }
            }
            for t in 0..NT {
                let d = [p[t][0] - sx, p[t][1] - sy, p[t][2] - sz];
                let r2 = d[2].mul_add(d[2], d[1].mul_add(d[1], d[0] * d[0]));
                let inv = V::select_positive(r2, r2.rsqrt(), zero);
                let fd = f[2].mul_add(d[2], f[1].mul_add(d[1], f[0] * d[0]));
                let c = fd * inv * inv * inv;
                for a in 0..3 {
                    acc[t][a] = f[a].mul_add(inv, c.mul_add(d[a], acc[t][a]));
                }
            }
            j += V::LANES;
        }
    }
    acc
}

/// All targets, four at a time: the Stokeslet.
#[inline(always)]
fn stokeslet_kernel<V: Simd>(
    targets: [&[V::Scalar]; 3],
    src: &FreeSources<V::Scalar>,
    runs: &[(usize, usize)],
    u: &mut [[V::Scalar; 3]],
) where
    V::Scalar: KernelReal,
{
    const NT: usize = 4;
    let iota = V::load(&<V::Scalar as KernelReal>::IOTA);
    let n = targets[0].len();
    let mut t = 0;
    while t + NT <= n {
        let p: [[V; 3]; NT] = std::array::from_fn(|i| [0, 1, 2].map(|a| V::splat(targets[a][t + i])));
        let acc = stokeslet_block::<V, NT>(p, src, runs, iota);
        for (i, a) in acc.iter().enumerate() {
            for c in 0..3 {
                u[t + i][c] += a[c].reduce_add();
            }
        }
        t += NT;
    }
    while t < n {
        let p: [[V; 3]; 1] = [[0, 1, 2].map(|a| V::splat(targets[a][t]))];
        let acc = stokeslet_block::<V, 1>(p, src, runs, iota);
        for c in 0..3 {
            u[t][c] += acc[0][c].reduce_add();
        }
        t += 1;
    }
}

/// [`stokeslet_kernel`] in AVX-512F vectors.
///
/// # Safety
/// The CPU must have AVX-512F and FMA (an [`IsaToken`] for `Isa::Avx512`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn stokeslet_avx512<V: Simd>(
    targets: [&[V::Scalar]; 3],
    src: &FreeSources<V::Scalar>,
    runs: &[(usize, usize)],
    u: &mut [[V::Scalar; 3]],
) where
    V::Scalar: KernelReal,
{
    stokeslet_kernel::<V>(targets, src, runs, u)
}

/// [`stokeslet_kernel`] in AVX2 vectors.
///
/// # Safety
/// The CPU must have AVX2 and FMA (an [`IsaToken`] for `Isa::Avx2`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn stokeslet_avx2<V: Simd>(
    targets: [&[V::Scalar]; 3],
    src: &FreeSources<V::Scalar>,
    runs: &[(usize, usize)],
    u: &mut [[V::Scalar; 3]],
) where
    V::Scalar: KernelReal,
{
    stokeslet_kernel::<V>(targets, src, runs, u)
}

/// All targets, four at a time.
#[inline(always)]
fn kernel<V: Simd, const GRAD: bool>(
    targets: [&[V::Scalar]; 3],
    src: &FreeSources<V::Scalar>,
    runs: &[(usize, usize)],
    pot: &mut [V::Scalar],
    grad: &mut [[V::Scalar; 3]],
) where
    V::Scalar: KernelReal,
{
    const NT: usize = 4;
    let iota = V::load(&<V::Scalar as KernelReal>::IOTA);
    let n = targets[0].len();
    let mut t = 0;
    while t + NT <= n {
        let p: [[V; 3]; NT] = std::array::from_fn(|k| [0, 1, 2].map(|a| V::splat(targets[a][t + k])));
        let acc = block::<V, NT, GRAD>(p, src, runs, iota);
        for k in 0..NT {
            pot[t + k] += acc[k][0].reduce_add();
            if GRAD {
                for a in 0..3 {
                    grad[t + k][a] += acc[k][a + 1].reduce_add();
                }
            }
        }
        t += NT;
    }
    while t < n {
        let p: [[V; 3]; 1] = [[0, 1, 2].map(|a| V::splat(targets[a][t]))];
        let acc = block::<V, 1, GRAD>(p, src, runs, iota);
        pot[t] += acc[0][0].reduce_add();
        if GRAD {
            for a in 0..3 {
                grad[t][a] += acc[0][a + 1].reduce_add();
            }
        }
        t += 1;
    }
}

/// [`kernel`] in AVX-512F vectors.
///
/// # Safety
/// The CPU must have AVX-512F and FMA (an [`IsaToken`] for `Isa::Avx512`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn kernel_avx512<V: Simd, const GRAD: bool>(
    targets: [&[V::Scalar]; 3],
    src: &FreeSources<V::Scalar>,
    runs: &[(usize, usize)],
    pot: &mut [V::Scalar],
    grad: &mut [[V::Scalar; 3]],
) where
    V::Scalar: KernelReal,
{
    kernel::<V, GRAD>(targets, src, runs, pot, grad)
}

/// [`kernel`] in AVX2 vectors.
///
/// # Safety
/// The CPU must have AVX2 and FMA (an [`IsaToken`] for `Isa::Avx2`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn kernel_avx2<V: Simd, const GRAD: bool>(
    targets: [&[V::Scalar]; 3],
    src: &FreeSources<V::Scalar>,
    runs: &[(usize, usize)],
    pot: &mut [V::Scalar],
    grad: &mut [[V::Scalar; 3]],
) where
    V::Scalar: KernelReal,
{
    kernel::<V, GRAD>(targets, src, runs, pot, grad)
}

/// A real type with the free-space kernels instantiated (`f32`, `f64`).
pub trait FreeReal: KernelReal {
    #[doc(hidden)]
    fn run_laplace(
        token: IsaToken,
        gradient: bool,
        targets: [&[Self]; 3],
        src: &FreeSources<Self>,
        runs: &[(usize, usize)],
        pot: &mut [Self],
        grad: &mut [[Self; 3]],
    );
    #[doc(hidden)]
    fn run_stokeslet(
        token: IsaToken,
        targets: [&[Self]; 3],
        src: &FreeSources<Self>,
        runs: &[(usize, usize)],
        u: &mut [[Self; 3]],
    );
}

macro_rules! impl_free_real {
    ($t:ty, $v512:ty, $v256:ty) => {
        impl FreeReal for $t {
            fn run_laplace(
                token: IsaToken,
                gradient: bool,
                targets: [&[Self]; 3],
                src: &FreeSources<Self>,
                runs: &[(usize, usize)],
                pot: &mut [Self],
                grad: &mut [[Self; 3]],
            ) {
                macro_rules! at {
                    ($g:literal) => {
                        match token.isa() {
                            #[cfg(target_arch = "x86_64")]
                            // SAFETY: a token for `Avx512` exists only if `IsaToken::new` found
                            // AVX-512F and FMA on this CPU, the features `kernel_avx512` enables.
                            Isa::Avx512 => unsafe { kernel_avx512::<$v512, $g>(targets, src, runs, pot, grad) },
                            #[cfg(target_arch = "x86_64")]
                            // SAFETY: a token for `Avx2` exists only if `IsaToken::new` found AVX2
                            // and FMA on this CPU, the features `kernel_avx2` enables.
                            Isa::Avx2 => unsafe { kernel_avx2::<$v256, $g>(targets, src, runs, pot, grad) },
                            _ => kernel::<$t, $g>(targets, src, runs, pot, grad),
                        }
                    };
                }
                if gradient {
                    at!(true)
                } else {
                    at!(false)
                }
            }

            fn run_stokeslet(
                token: IsaToken,
                targets: [&[Self]; 3],
                src: &FreeSources<Self>,
                runs: &[(usize, usize)],
                u: &mut [[Self; 3]],
            ) {
                match token.isa() {
                    #[cfg(target_arch = "x86_64")]
                    // SAFETY: a token for `Avx512` exists only if `IsaToken::new` found AVX-512F
                    // and FMA on this CPU, the features `stokeslet_avx512` enables.
                    Isa::Avx512 => unsafe { stokeslet_avx512::<$v512>(targets, src, runs, u) },
                    #[cfg(target_arch = "x86_64")]
                    // SAFETY: a token for `Avx2` exists only if `IsaToken::new` found AVX2 and
                    // FMA on this CPU, the features `stokeslet_avx2` enables.
                    Isa::Avx2 => unsafe { stokeslet_avx2::<$v256>(targets, src, runs, u) },
                    _ => stokeslet_kernel::<$t>(targets, src, runs, u),
                }
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
impl_free_real!(f64, crate::simd::F64x8, crate::simd::F64x4);
#[cfg(target_arch = "x86_64")]
impl_free_real!(f32, crate::simd::F32x16, crate::simd::F32x8);
#[cfg(not(target_arch = "x86_64"))]
impl_free_real!(f64, f64, f64);
#[cfg(not(target_arch = "x86_64"))]
impl_free_real!(f32, f32, f32);

/// Adds the Laplace potential (and, if `grad` is given, its gradient) of the source runs `runs`
/// of `src` at `targets` (coordinate arrays of equal length) into `pot` (and `grad`), with the
/// vector code of `isa` (portable code for an `isa` this CPU lacks).
pub fn laplace<T: FreeReal>(
    isa: Isa,
    targets: [&[T]; 3],
    src: &FreeSources<T>,
    runs: &[(usize, usize)],
    pot: &mut [T],
    grad: Option<&mut [[T; 3]]>,
) {
    let n = targets[0].len();
    assert!(targets[1].len() == n && targets[2].len() == n && pot.len() >= n, "target arrays");
    assert!(runs.iter().all(|r| r.0 <= r.1 && r.1 <= src.len()), "runs inside the sources");
    let token = IsaToken::new(isa).unwrap_or_else(IsaToken::scalar);
    match grad {
        Some(g) => {
            assert!(g.len() >= n, "gradient array");
            T::run_laplace(token, true, targets, src, runs, pot, g)
        }
        None => T::run_laplace(token, false, targets, src, runs, pot, &mut []),
    }
}

/// Adds the Stokeslet velocity `u(y) += sum_j f_j / r + (f_j . d) d / r^3` (`d = y - x_j`,
/// `r = |d|`, no prefactor, `r = 0` skipped) of the source runs `runs` of `src` (made by
/// [`FreeSources::with_forces`]) at `targets` into `u`.
pub fn stokeslet<T: FreeReal>(
    isa: Isa,
    targets: [&[T]; 3],
    src: &FreeSources<T>,
    runs: &[(usize, usize)],
    u: &mut [[T; 3]],
) {
    let n = targets[0].len();
    assert!(targets[1].len() == n && targets[2].len() == n && u.len() >= n, "target arrays");
    assert!(src.f[0].len() == src.q.len(), "Stokeslet sources need forces (FreeSources::with_forces)");
    assert!(runs.iter().all(|r| r.0 <= r.1 && r.1 <= src.len()), "runs inside the sources");
    let token = IsaToken::new(isa).unwrap_or_else(IsaToken::scalar);
    T::run_stokeslet(token, targets, src, runs, u)
}

#[cfg(test)]
mod tests {
    use super::{laplace, stokeslet, FreeSources};
    use parki_core::isa::Isa;

    #[test]
    fn every_isa_matches_the_scalar_sum() {
        let n = 37;
        let x: Vec<[f64; 3]> =
            (0..n).map(|i| [(i as f64 * 0.37).sin(), (i as f64 * 0.91).cos(), i as f64 * 0.01]).collect();
        let q: Vec<f64> = (0..n).map(|i| if i % 3 == 0 { 1.0 } else { -0.4 }).collect();
        let src = FreeSources::<f64>::new(&x, &q);
        let tx: Vec<f64> = x.iter().map(|p| p[0]).collect();
        let ty: Vec<f64> = x.iter().map(|p| p[1]).collect();
        let tz: Vec<f64> = x.iter().map(|p| p[2]).collect();
        let runs = [(0, 5), (9, 30), (31, 37)];
        let mut want = vec![[0.0; 4]; n];
        for (i, w) in want.iter_mut().enumerate() {
            for &(a, b) in &runs {
                for j in a..b {
                    let d = [x[i][0] - x[j][0], x[i][1] - x[j][1], x[i][2] - x[j][2]];
                    let r2: f64 = d.iter().map(|v| v * v).sum();
                    if r2 > 0.0 {
                        let r = r2.sqrt();
                        w[0] += q[j] / r;
                        for a in 0..3 {
                            w[a + 1] -= q[j] * d[a] / (r2 * r);
                        }
                    }
                }
            }
        }
        for isa in [Isa::Avx512, Isa::Avx2, Isa::Scalar] {
            let mut pot = vec![0.0; n];
            let mut grad = vec![[0.0; 3]; n];
            laplace(isa, [&tx, &ty, &tz], &src, &runs, &mut pot, Some(&mut grad));
            for i in 0..n {
                assert!((pot[i] - want[i][0]).abs() < 1e-12 * want[i][0].abs().max(1.0), "{isa:?} potential {i}");
                for a in 0..3 {
                    assert!(
                        (grad[i][a] - want[i][a + 1]).abs() < 1e-11 * want[i][a + 1].abs().max(1.0),
                        "{isa:?} gradient {i}"
                    );
                }
            }
        }
    }

    #[test]
    fn stokeslet_matches_the_scalar_sum() {
        let n = 29;
        let x: Vec<[f64; 3]> =
            (0..n).map(|i| [(i as f64 * 0.37).sin(), (i as f64 * 0.91).cos(), i as f64 * 0.02]).collect();
        let f: Vec<[f64; 3]> = (0..n).map(|i| [1.0 - i as f64 * 0.1, 0.3, (i as f64).cos()]).collect();
        let src = FreeSources::<f64>::with_forces(&x, &f);
        let t: [Vec<f64>; 3] = [0, 1, 2].map(|a| x.iter().map(|p| p[a]).collect());
        let runs = [(0, 7), (8, 29)];
        for isa in [Isa::Avx512, Isa::Avx2, Isa::Scalar] {
            let mut u = vec![[0.0; 3]; n];
            stokeslet(isa, [&t[0], &t[1], &t[2]], &src, &runs, &mut u);
            for i in 0..n {
                let mut w = [0.0; 3];
                for &(a, b) in &runs {
                    for j in a..b {
                        let d = [x[i][0] - x[j][0], x[i][1] - x[j][1], x[i][2] - x[j][2]];
                        let r2: f64 = d.iter().map(|v| v * v).sum();
                        if r2 > 0.0 {
                            let r = r2.sqrt();
                            let fd = f[j][0] * d[0] + f[j][1] * d[1] + f[j][2] * d[2];
                            for c in 0..3 {
                                w[c] += f[j][c] / r + fd * d[c] / (r2 * r);
                            }
                        }
                    }
                }
                for c in 0..3 {
                    assert!((u[i][c] - w[c]).abs() < 1e-12 * w[c].abs().max(1.0), "{isa:?} {i} {c}");
                }
            }
        }
    }
}
