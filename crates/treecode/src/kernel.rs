//! The treecode's kernels `G(x, y)`, `r = x - y` (target minus source), and how they are
//! evaluated: [`LANES`] sources at a time, in lane arrays the compiler turns into vector code.
//!
//! | kernel | `G` | density per source | value per target |
//! | --- | --- | --- | --- |
//! | Coulomb (`laplace`) | `1/r` | `q` | 1 |
//! | Yukawa | `e^{-kappa r}/r` | `q` | 1 |
//! | regularised Coulomb | `1/sqrt(r^2 + eps^2)` | `q` | 1 |
//! | regularised Yukawa | `e^{-kappa r}/sqrt(r^2 + eps^2)` | `q` | 1 |
//! | `sin(k r)/r` | `sin(k r)/r` | `q` | 1 |
//! | Stokeslet | `I/r + r r^T/r^3` | `f` (3) | 3 |
//! | stresslet | `-6 r r r/r^5` | `S = sym(q (x) n)` (6) | 3 |
//! | Stokes | Stokeslet + stresslet | `[f, S]` (9) | 3 |
//!
//! The BLDTT paper's kernels (§4.6) and BaryTree's `COULOMB`, `YUKAWA`, `REGULARIZED_COULOMB`,
//! `REGULARIZED_YUKAWA` and `SIN_OVER_R`, plus the Stokes kernels of [`parki_core::Kernel`]
//! without prefactors (the convention of the seed papers, and of the Ewald path, so that a
//! `run.toml` gives the same numbers whichever method it names).
//!
//! **Stresslet densities.** `T_ijk` is symmetric in all its indices, so `T_ijk q_j n_k` depends
//! only on the symmetric part of `q (x) n`, and so does every proxy density (a sum of such
//! tensors weighted by the basis, no longer of rank one): six components
//! `[S_xx, S_yy, S_zz, S_xy, S_xz, S_yz]`, and `u = -6 r (r^T S r)/r^5`. The caller's
//! `[q, n]` are converted by [`TreeKernel::densities`].
//!
//! **Self terms** (digest §1.7, BaryTree's rule): a source that coincides with the target
//! (`r = 0` exactly) is skipped by every kernel that is singular there (all but the two
//! regularised ones; `sin(k r)/r` too, as in BaryTree, although its limit `k` is finite). The
//! regularised kernels keep it (`q/eps` and `q/eps` for Yukawa). The guard is a select on
//! `r^2 > 0` in every interaction type, not only PP: the MAC keeps proxies away from targets, so
//! there it never fires.

use parki_core::{Error, Kernel, Result};

use crate::backend::DeviceKernel;

/// Sources per call of [`PairKernel::lanes`].
pub const LANES: usize = 8;

/// Most density components per source of a built-in kernel (Stokes: `[f, S]`).
pub const MAX_DENSITY: usize = 9;

/// Most values per target of a built-in kernel.
pub const MAX_VALUE: usize = 3;

/// A pair kernel as the treecode evaluates it: [`LANES`] sources against one target.
///
/// Implement it for a kernel of your own (BaryTree's `USER`); everything else in the crate is
/// generic over it.
pub trait PairKernel: Copy + Send + Sync {
    /// Density components per source (at most [`MAX_DENSITY`]).
    const DENSITY: usize;
    /// Values per target (at most [`MAX_VALUE`]).
    const VALUE: usize;

    /// Adds `G(r_l) q_l` for the lanes `l` (`r_l = d[..][l]`, `r2[l] = |r_l|^2`, density
    /// component `c` of the lane's source `q.get(c)[l]`) into `acc[v][l]`, `v < VALUE`.
    /// `m` is the vector math of the instruction set the call is compiled for.
    fn lanes<M: LaneMath>(
        &self,
        m: M,
        d: &[[f64; LANES]; 3],
        r2: &[f64; LANES],
        q: LaneDensities<'_>,
        acc: &mut [[f64; LANES]; MAX_VALUE],
    );

    /// The kernel as a device evaluates it (`kernels/treecode.cu`); `None`, the default, for a
    /// kernel that only the host has.
    fn device(&self) -> Option<DeviceKernel> {
        None
    }

    /// The wavenumber `k` of an oscillatory kernel (`sin(k r)/r`; 0, the default, for the
    /// others): the traversal approximates only clusters small against `1/k`
    /// ([`crate::traversal::oscillation_radius`]).
    fn wavenumber(&self) -> f64 {
        0.0
    }

    /// The same kernel for lengths in units of `s` (`x = s x'`, `s` a power of two), where it is
    /// homogeneous: `sum_j G(s r'_j) q_j = s^-p sum_j G'(r'_j) (D q_j)` with `G'` =
    /// [`Rescaled::kernel`] (its parameters rescaled: `kappa s`, `epsilon / s`, `k s`),
    /// `p` = [`Rescaled::power`] and `D` the diagonal [`Rescaled::density_scale`]. The
    /// evaluations compute points of an extent far from 1 in such a unit
    /// ([`parki_core::units`]), exactly; `None`, the default, evaluates a kernel of your own in
    /// the caller's units.
    fn in_length_unit(&self, _s: f64) -> Option<Rescaled<Self>> {
        None
    }
}

/// A kernel in a length unit `s` ([`PairKernel::in_length_unit`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rescaled<K> {
    /// The kernel `G'` with its parameters in the unit.
    pub kernel: K,
    /// The power `p` in `G(s r') = s^-p G'(r')` (on the scaled densities).
    pub power: i32,
    /// The factor of each density component (`D`): 1, or `1 / s` for the stresslet part of the
    /// combined kernel, so that one power serves every value.
    pub density_scale: [f64; MAX_DENSITY],
}

impl<K> Rescaled<K> {
    /// `kernel` with `G(s r') = s^-power G'(r')` on the densities as they are.
    pub fn homogeneous(kernel: K, power: i32) -> Self {
        Self { kernel, power, density_scale: [1.0; MAX_DENSITY] }
    }
}

/// Vector math of one instruction set, handed to [`PairKernel::lanes`]: what the compiler does
/// not vectorise well by itself.
pub trait LaneMath: Copy {
    /// `1/sqrt(x)` per lane, for `x > 0`.
    fn rsqrt(self, x: &[f64; LANES]) -> [f64; LANES];
    /// `1/r` from `r^2` per lane, 0 where `r^2 = 0` (the self-term rule of singular kernels).
    fn inv_r(self, r2: &[f64; LANES]) -> [f64; LANES];
}

/// Portable math: `1/sqrt` by a square root and a division (vectorised as such by the compiler).
#[derive(Clone, Copy, Debug, Default)]
pub struct Portable;

impl LaneMath for Portable {
    #[inline(always)]
    fn rsqrt(self, x: &[f64; LANES]) -> [f64; LANES] {
        per_lane(|l| 1.0 / x[l].sqrt())
    }
    #[inline(always)]
    fn inv_r(self, r2: &[f64; LANES]) -> [f64; LANES] {
        per_lane(|l| inv_r(r2[l]))
    }
}

/// AVX-512F math: `1/sqrt` from the 14-bit estimate `vrsqrt14pd` and two Newton steps
/// (14 -> 28 -> 56 bits), multiplications and FMAs only, instead of a square root and a
/// division (which otherwise cost more than the rest of the pair together).
///
/// A value exists only where the CPU has AVX-512F ([`Avx512::new`] checks), so its methods
/// never execute an instruction the CPU lacks; they become vector code inside the
/// `#[target_feature]` functions that receive it.
#[derive(Clone, Copy, Debug)]
pub struct Avx512 {
    _checked: (),
}

impl Avx512 {
    /// The math, if this CPU has AVX-512F and FMA.
    pub fn new() -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("fma") {
                return Some(Self { _checked: () });
            }
        }
        None
    }
}

impl LaneMath for Avx512 {
    #[inline(always)]
    fn rsqrt(self, x: &[f64; LANES]) -> [f64; LANES] {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{
                _mm512_fnmadd_pd, _mm512_loadu_pd, _mm512_mul_pd, _mm512_rsqrt14_pd, _mm512_set1_pd, _mm512_storeu_pd,
            };
            let mut out = [0.0; LANES];
            // SAFETY: `self` exists only on a CPU with AVX-512F (checked in `new`), so every
            // instruction here is defined; the load and the store touch exactly the 8 f64 of
            // `x` and `out`.
            unsafe {
                let v = _mm512_loadu_pd(x.as_ptr());
                let h = _mm512_mul_pd(v, _mm512_set1_pd(0.5));
                let c = _mm512_set1_pd(1.5);
                let mut y = _mm512_rsqrt14_pd(v);
                for _ in 0..2 {
                    y = _mm512_mul_pd(y, _mm512_fnmadd_pd(h, _mm512_mul_pd(y, y), c));
                }
                _mm512_storeu_pd(out.as_mut_ptr(), y);
            }
            out
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            Portable.rsqrt(x)
        }
    }
    #[inline(always)]
    fn inv_r(self, r2: &[f64; LANES]) -> [f64; LANES] {
        let y = self.rsqrt(r2);
        let mut out = [0.0; LANES];
        for l in 0..LANES {
            out[l] = if r2[l] > 0.0 { y[l] } else { 0.0 };
        }
        out
    }
}

/// The densities of the [`LANES`] sources of one [`PairKernel::lanes`] call, stored
/// component-major: component `c` of source `j` at `q[c * stride + j]`, the call's sources
/// `j0..j0 + LANES`.
#[derive(Clone, Copy, Debug)]
pub struct LaneDensities<'a> {
    q: &'a [f64],
    stride: usize,
    j0: usize,
}

impl<'a> LaneDensities<'a> {
    /// The sources `j0..j0 + LANES` of `q` with `stride` sources per component.
    #[inline(always)]
    pub fn new(q: &'a [f64], stride: usize, j0: usize) -> Self {
        Self { q, stride, j0 }
    }

    /// Component `c` of the lanes.
    #[inline(always)]
    pub fn get(&self, c: usize) -> &'a [f64; LANES] {
        let s = c * self.stride + self.j0;
        self.q[s..s + LANES].try_into().expect("LANES values")
    }
}

/// The lanes `f(0), ..., f(LANES - 1)`: a loop the compiler unrolls and vectorises inside the
/// caller (`[T; N]::map` is not inlined into `#[target_feature]` functions, and calls out).
#[inline(always)]
pub fn per_lane(f: impl Fn(usize) -> f64) -> [f64; LANES] {
    let mut out = [0.0; LANES];
    for (l, o) in out.iter_mut().enumerate() {
        *o = f(l);
    }
    out
}

/// `1/i!`, `i = 0..=12`: the Taylor coefficients of [`exp_lanes`].
const INV_FACTORIAL: [f64; 13] = [
    1.0,
    1.0,
    1.0 / 2.0,
    1.0 / 6.0,
    1.0 / 24.0,
    1.0 / 120.0,
    1.0 / 720.0,
    1.0 / 5040.0,
    1.0 / 40320.0,
    1.0 / 362880.0,
    1.0 / 3628800.0,
    1.0 / 39916800.0,
    1.0 / 479001600.0,
];

/// `e^x` per lane, written so that the compiler vectorises it (no libm call per lane): Cody and
/// Waite's reduction `x = k ln 2 + r`, `k = round(x / ln 2)`, `|r| <= ln(2)/2`, with `ln 2`
/// split in two so that `r` is exact to rounding; `e^r` by its Taylor polynomial of degree 12
/// (remainder `(ln(2)/2)^13/13! < 2e-16` relative); `2^k` written into the exponent bits. `x` is
/// clamped to `[-708, 709]` (results down to `3e-308`, below which the kernels' terms are
/// negligible anyway).
#[inline(always)]
pub fn exp_lanes(x: &[f64; LANES]) -> [f64; LANES] {
    const LN2_HI: f64 = 0.693_147_180_369_123_8; // 0x3fe62e42fee00000
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10; // 0x3dea39ef35793c76
                                                     // 1.5 2^52: adding it leaves an integer-valued k in the low mantissa bits
    const SHIFTER: f64 = 6_755_399_441_055_744.0;
    let mut out = [0.0; LANES];
    for l in 0..LANES {
        let v = x[l].clamp(-708.0, 709.0);
        // round to nearest by the shifter (no call to a rounding function)
        let kt = v.mul_add(std::f64::consts::LOG2_E, SHIFTER);
        let k = kt - SHIFTER;
        let r = k.mul_add(-LN2_LO, k.mul_add(-LN2_HI, v));
        let mut p = INV_FACTORIAL[12];
        for c in INV_FACTORIAL[..12].iter().rev() {
            p = p.mul_add(r, *c);
        }
        let two_k = f64::from_bits(kt.to_bits().wrapping_add(1023) << 52);
        out[l] = p * two_k;
    }
    out
}

/// Largest `|x|` [`sin_lanes`] reduces in vector code: `x / (pi/2)` below `2^19`, where the
/// three-part Cody–Waite reduction is exact.
const SIN_VECTOR_LIMIT: f64 = 8.0e5;

/// `sin x` per lane, vectorised: `x = q pi/2 + r` with `pi/2` in three parts of 33 bits (exact
/// products for `|q| < 2^20`, fdlibm's constants), `|r| <= pi/4`; `sin r` and `cos r` by Taylor
/// polynomials of degrees 15 and 16 (remainders below `5e-17`), chosen and signed by `q mod 4`.
/// Lanes beyond `SIN_VECTOR_LIMIT` take libm's `sin` (the whole call, rarely).
#[inline(always)]
pub fn sin_lanes(x: &[f64; LANES]) -> [f64; LANES] {
    const PIO2_1: f64 = 1.570_796_326_734_125_6; // 0x3ff921fb54400000
    const PIO2_2: f64 = 6.077_100_506_303_966e-11; // 0x3dd0b4611a600000
    const PIO2_3: f64 = 2.022_266_248_711_166_5e-21; // 0x3ba3198a2e000000
    const SHIFTER: f64 = 6_755_399_441_055_744.0;
    if !x.iter().all(|v| v.abs() <= SIN_VECTOR_LIMIT) {
        return per_lane(|l| x[l].sin());
    }
    let mut out = [0.0; LANES];
    for l in 0..LANES {
        let v = x[l];
        let qt = v.mul_add(std::f64::consts::FRAC_2_PI, SHIFTER);
        let qf = qt - SHIFTER;
        let quadrant = qt.to_bits() & 3;
        let r = qf.mul_add(-PIO2_3, qf.mul_add(-PIO2_2, qf.mul_add(-PIO2_1, v)));
        let r2 = r * r;
        // sin r = r (1 - r^2/3! + r^4/5! - ...), cos r = 1 - r^2/2! + r^4/4! - ...
        let mut ps: f64 = -1.0 / 1_307_674_368_000.0; // -1/15!
        for c in
            [1.0 / 6_227_020_800.0, -1.0 / 39_916_800.0, 1.0 / 362_880.0, -1.0 / 5040.0, 1.0 / 120.0, -1.0 / 6.0, 1.0]
        {
            ps = ps.mul_add(r2, c);
        }
        let sin_r = ps * r;
        let mut pc: f64 = 1.0 / 20_922_789_888_000.0; // 1/16!
        for c in [
            -1.0 / 87_178_291_200.0,
            1.0 / 479_001_600.0,
            -1.0 / 3_628_800.0,
            1.0 / 40320.0,
            -1.0 / 720.0,
            1.0 / 24.0,
            -0.5,
            1.0,
        ] {
            pc = pc.mul_add(r2, c);
        }
        let value = if quadrant & 1 == 0 { sin_r } else { pc };
        out[l] = if quadrant & 2 == 0 { value } else { -value };
    }
    out
}

/// `1/r`, or 0 at `r = 0` (the self-term rule of singular kernels).
#[inline(always)]
fn inv_r(r2: f64) -> f64 {
    if r2 > 0.0 {
        1.0 / r2.sqrt()
    } else {
        0.0
    }
}

/// Coulomb `1/r`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Coulomb;

impl PairKernel for Coulomb {
    const DENSITY: usize = 1;
    const VALUE: usize = 1;
    #[inline(always)]
    fn lanes<M: LaneMath>(
        &self,
        m: M,
        _d: &[[f64; LANES]; 3],
        r2: &[f64; LANES],
        q: LaneDensities<'_>,
        acc: &mut [[f64; LANES]; MAX_VALUE],
    ) {
        let q0 = q.get(0);
        let ri = m.inv_r(r2);
        for l in 0..LANES {
            acc[0][l] = q0[l].mul_add(ri[l], acc[0][l]);
        }
    }

    fn in_length_unit(&self, _s: f64) -> Option<Rescaled<Self>> {
        Some(Rescaled::homogeneous(Coulomb, 1))
    }

    fn device(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel { code: 0, params: [0.0, 0.0] })
    }
}

/// Yukawa (screened Coulomb) `e^{-kappa r}/r`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Yukawa {
    /// Screening `kappa >= 0`.
    pub kappa: f64,
}

impl PairKernel for Yukawa {
    const DENSITY: usize = 1;
    const VALUE: usize = 1;
    #[inline(always)]
    fn lanes<M: LaneMath>(
        &self,
        m: M,
        _d: &[[f64; LANES]; 3],
        r2: &[f64; LANES],
        q: LaneDensities<'_>,
        acc: &mut [[f64; LANES]; MAX_VALUE],
    ) {
        let q0 = q.get(0);
        let ri = m.inv_r(r2);
        // r = r^2 (1/r), 0 at the self term, whose 1/r is 0 too
        let e = exp_lanes(&per_lane(|l| -self.kappa * r2[l] * ri[l]));
        for l in 0..LANES {
            acc[0][l] = (q0[l] * e[l]).mul_add(ri[l], acc[0][l]);
        }
    }

    fn in_length_unit(&self, s: f64) -> Option<Rescaled<Self>> {
        Some(Rescaled::homogeneous(Yukawa { kappa: self.kappa * s }, 1))
    }

    fn device(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel { code: 1, params: [self.kappa, 0.0] })
    }
}

/// Regularised Coulomb `1/sqrt(r^2 + eps^2)` (the self term kept: `q/eps`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RegularizedCoulomb {
    /// Regularisation `eps > 0`.
    pub epsilon: f64,
}

impl PairKernel for RegularizedCoulomb {
    const DENSITY: usize = 1;
    const VALUE: usize = 1;
    #[inline(always)]
    fn lanes<M: LaneMath>(
        &self,
        m: M,
        _d: &[[f64; LANES]; 3],
        r2: &[f64; LANES],
        q: LaneDensities<'_>,
        acc: &mut [[f64; LANES]; MAX_VALUE],
    ) {
        let q0 = q.get(0);
        let e2 = self.epsilon * self.epsilon;
        let ri = m.rsqrt(&per_lane(|l| r2[l] + e2));
        for l in 0..LANES {
            acc[0][l] = q0[l].mul_add(ri[l], acc[0][l]);
        }
    }

    fn in_length_unit(&self, s: f64) -> Option<Rescaled<Self>> {
        Some(Rescaled::homogeneous(RegularizedCoulomb { epsilon: self.epsilon / s }, 1))
    }

    fn device(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel { code: 2, params: [self.epsilon, 0.0] })
    }
}

/// Regularised Yukawa `e^{-kappa r}/sqrt(r^2 + eps^2)` (the self term kept: `q/eps`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RegularizedYukawa {
    /// Screening `kappa >= 0`.
    pub kappa: f64,
    /// Regularisation `eps > 0`.
    pub epsilon: f64,
}

impl PairKernel for RegularizedYukawa {
    const DENSITY: usize = 1;
    const VALUE: usize = 1;
    #[inline(always)]
    fn lanes<M: LaneMath>(
        &self,
        m: M,
        _d: &[[f64; LANES]; 3],
        r2: &[f64; LANES],
        q: LaneDensities<'_>,
        acc: &mut [[f64; LANES]; MAX_VALUE],
    ) {
        let q0 = q.get(0);
        let e2 = self.epsilon * self.epsilon;
        let ri = m.inv_r(r2);
        let rr = m.rsqrt(&per_lane(|l| r2[l] + e2));
        let e = exp_lanes(&per_lane(|l| -self.kappa * r2[l] * ri[l]));
        for l in 0..LANES {
            acc[0][l] = (q0[l] * e[l]).mul_add(rr[l], acc[0][l]);
        }
    }

    fn in_length_unit(&self, s: f64) -> Option<Rescaled<Self>> {
        Some(Rescaled::homogeneous(RegularizedYukawa { kappa: self.kappa * s, epsilon: self.epsilon / s }, 1))
    }

    fn device(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel { code: 3, params: [self.kappa, self.epsilon] })
    }
}

/// The oscillatory `sin(k r)/r` (Helmholtz's real part).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SinOverR {
    /// Wavenumber `k`.
    pub wavenumber: f64,
}

impl PairKernel for SinOverR {
    const DENSITY: usize = 1;
    const VALUE: usize = 1;
    fn wavenumber(&self) -> f64 {
        self.wavenumber
    }
    #[inline(always)]
    fn lanes<M: LaneMath>(
        &self,
        m: M,
        _d: &[[f64; LANES]; 3],
        r2: &[f64; LANES],
        q: LaneDensities<'_>,
        acc: &mut [[f64; LANES]; MAX_VALUE],
    ) {
        let q0 = q.get(0);
        let ri = m.inv_r(r2);
        let s = sin_lanes(&per_lane(|l| self.wavenumber * r2[l] * ri[l]));
        for l in 0..LANES {
            acc[0][l] = (q0[l] * s[l]).mul_add(ri[l], acc[0][l]);
        }
    }

    fn in_length_unit(&self, s: f64) -> Option<Rescaled<Self>> {
        Some(Rescaled::homogeneous(SinOverR { wavenumber: self.wavenumber * s }, 1))
    }

    fn device(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel { code: 4, params: [self.wavenumber, 0.0] })
    }
}

/// The Stokeslet `G f = f/r + (r.f) r/r^3`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stokeslet;

/// Adds the Stokeslet of the forces at components `c0..c0 + 3` into `acc`.
#[inline(always)]
fn stokeslet_lanes<M: LaneMath>(
    m: M,
    d: &[[f64; LANES]; 3],
    r2: &[f64; LANES],
    q: LaneDensities<'_>,
    c0: usize,
    acc: &mut [[f64; LANES]; MAX_VALUE],
) {
    let (fx, fy, fz) = (q.get(c0), q.get(c0 + 1), q.get(c0 + 2));
    let ri = m.inv_r(r2);
    for l in 0..LANES {
        let ri = ri[l];
        let (x, y, z) = (d[0][l], d[1][l], d[2][l]);
        let rf = x * fx[l] + y * fy[l] + z * fz[l];
        let c = rf * ri * ri * ri;
        acc[0][l] += fx[l].mul_add(ri, c * x);
        acc[1][l] += fy[l].mul_add(ri, c * y);
        acc[2][l] += fz[l].mul_add(ri, c * z);
    }
}

/// Adds the stresslet of the symmetric tensors at components `c0..c0 + 6` into `acc`.
#[inline(always)]
fn stresslet_lanes<M: LaneMath>(
    m: M,
    d: &[[f64; LANES]; 3],
    r2: &[f64; LANES],
    q: LaneDensities<'_>,
    c0: usize,
    acc: &mut [[f64; LANES]; MAX_VALUE],
) {
    let s = [q.get(c0), q.get(c0 + 1), q.get(c0 + 2), q.get(c0 + 3), q.get(c0 + 4), q.get(c0 + 5)];
    let ri = m.inv_r(r2);
    for l in 0..LANES {
        let ri = ri[l];
        let ri2 = ri * ri;
        let (x, y, z) = (d[0][l], d[1][l], d[2][l]);
        let diag = s[0][l] * x * x + s[1][l] * y * y + s[2][l] * z * z;
        let off = s[3][l] * x * y + s[4][l] * x * z + s[5][l] * y * z;
        let c = -6.0 * (2.0f64).mul_add(off, diag) * ri2 * ri2 * ri;
        acc[0][l] = c.mul_add(x, acc[0][l]);
        acc[1][l] = c.mul_add(y, acc[1][l]);
        acc[2][l] = c.mul_add(z, acc[2][l]);
    }
}

impl PairKernel for Stokeslet {
    const DENSITY: usize = 3;
    const VALUE: usize = 3;
    #[inline(always)]
    fn lanes<M: LaneMath>(
        &self,
        m: M,
        d: &[[f64; LANES]; 3],
        r2: &[f64; LANES],
        q: LaneDensities<'_>,
        acc: &mut [[f64; LANES]; MAX_VALUE],
    ) {
        stokeslet_lanes(m, d, r2, q, 0, acc);
    }

    fn in_length_unit(&self, _s: f64) -> Option<Rescaled<Self>> {
        Some(Rescaled::homogeneous(Stokeslet, 1))
    }

    fn device(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel { code: 5, params: [0.0, 0.0] })
    }
}

/// The stresslet `u = -6 r (r^T S r)/r^5`, `S = sym(q (x) n)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stresslet;

impl PairKernel for Stresslet {
    const DENSITY: usize = 6;
    const VALUE: usize = 3;
    #[inline(always)]
    fn lanes<M: LaneMath>(
        &self,
        m: M,
        d: &[[f64; LANES]; 3],
        r2: &[f64; LANES],
        q: LaneDensities<'_>,
        acc: &mut [[f64; LANES]; MAX_VALUE],
    ) {
        stresslet_lanes(m, d, r2, q, 0, acc);
    }

    fn in_length_unit(&self, _s: f64) -> Option<Rescaled<Self>> {
        Some(Rescaled::homogeneous(Stresslet, 2))
    }

    fn device(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel { code: 6, params: [0.0, 0.0] })
    }
}

/// Stokeslet plus stresslet, densities `[f, S]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stokes;

impl PairKernel for Stokes {
    const DENSITY: usize = 9;
    const VALUE: usize = 3;
    #[inline(always)]
    fn lanes<M: LaneMath>(
        &self,
        m: M,
        d: &[[f64; LANES]; 3],
        r2: &[f64; LANES],
        q: LaneDensities<'_>,
        acc: &mut [[f64; LANES]; MAX_VALUE],
    ) {
        stokeslet_lanes(m, d, r2, q, 0, acc);
        stresslet_lanes(m, d, r2, q, 3, acc);
    }

    fn in_length_unit(&self, s: f64) -> Option<Rescaled<Self>> {
        // the stresslet's densities over s: both parts then scale as 1/s
        let mut density_scale = [1.0; MAX_DENSITY];
        density_scale[3..9].fill(1.0 / s);
        Some(Rescaled { kernel: Stokes, power: 1, density_scale })
    }

    fn device(&self) -> Option<DeviceKernel> {
        Some(DeviceKernel { code: 7, params: [0.0, 0.0] })
    }
}

/// The built-in kernels with their parameters, as `run.toml` names them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TreeKernel {
    /// `1/r` ("laplace").
    Coulomb,
    /// `e^{-kappa r}/r` ("yukawa", `kappa`).
    Yukawa {
        /// Screening.
        kappa: f64,
    },
    /// `1/sqrt(r^2 + eps^2)` ("regularized-coulomb", `epsilon`).
    RegularizedCoulomb {
        /// Regularisation.
        epsilon: f64,
    },
    /// `e^{-kappa r}/sqrt(r^2 + eps^2)` ("regularized-yukawa", `kappa`, `epsilon`).
    RegularizedYukawa {
        /// Screening.
        kappa: f64,
        /// Regularisation.
        epsilon: f64,
    },
    /// `sin(k r)/r` ("sin-over-r", `wavenumber`).
    SinOverR {
        /// Wavenumber.
        wavenumber: f64,
    },
    /// The Stokeslet ("stokeslet"), forces.
    Stokeslet,
    /// The stresslet ("stresslet"), dipoles and normals.
    Stresslet,
    /// Stokeslet + stresslet ("stokes"), forces, dipoles and normals.
    Stokes,
}

impl TreeKernel {
    /// The names `run.toml` accepts.
    pub const NAMES: [&'static str; 8] = [
        "laplace",
        "yukawa",
        "regularized-coulomb",
        "regularized-yukawa",
        "sin-over-r",
        "stokeslet",
        "stresslet",
        "stokes",
    ];

    /// The kernel named `name` with the parameters it needs (`None` where not given).
    ///
    /// # Errors
    /// [`Error::OutOfRange`] naming `problem.kernel` for an unknown name, [`Error::Missing`]
    /// for a parameter the kernel needs, [`Error::OutOfRange`] for one out of range (`kappa`
    /// and `wavenumber` finite and `>= 0`, `epsilon` finite and `> 0`).
    pub fn from_name(name: &str, kappa: Option<f64>, epsilon: Option<f64>, wavenumber: Option<f64>) -> Result<Self> {
        let need = |v: Option<f64>, field: &str, positive: bool| -> Result<f64> {
            let v = v.ok_or_else(|| Error::Missing {
                field: format!("problem.{field}"),
                reason: format!("kernel \"{name}\" needs it"),
            })?;
            let ok = v.is_finite() && if positive { v > 0.0 } else { v >= 0.0 };
            if !ok {
                return Err(Error::OutOfRange {
                    field: format!("problem.{field}"),
                    value: v.to_string(),
                    allowed: if positive { "finite and > 0" } else { "finite and >= 0" }.into(),
                });
            }
            Ok(v)
        };
        Ok(match name {
            "laplace" | "coulomb" => TreeKernel::Coulomb,
            "yukawa" => TreeKernel::Yukawa { kappa: need(kappa, "kappa", false)? },
            "regularized-coulomb" => TreeKernel::RegularizedCoulomb { epsilon: need(epsilon, "epsilon", true)? },
            "regularized-yukawa" => TreeKernel::RegularizedYukawa {
                kappa: need(kappa, "kappa", false)?,
                epsilon: need(epsilon, "epsilon", true)?,
            },
            "sin-over-r" => TreeKernel::SinOverR { wavenumber: need(wavenumber, "wavenumber", false)? },
            "stokeslet" => TreeKernel::Stokeslet,
            "stresslet" => TreeKernel::Stresslet,
            "stokes" => TreeKernel::Stokes,
            other => {
                return Err(Error::OutOfRange {
                    field: "problem.kernel".into(),
                    value: other.into(),
                    allowed: format!("one of {}", Self::NAMES.join(", ")),
                })
            }
        })
    }

    /// The Ewald path's kernel with the same densities and values, where there is one.
    pub fn ewald(self) -> Option<Kernel> {
        match self {
            TreeKernel::Coulomb => Some(Kernel::Laplace),
            TreeKernel::Stokeslet => Some(Kernel::Stokeslet),
            TreeKernel::Stresslet => Some(Kernel::Stresslet),
            TreeKernel::Stokes => Some(Kernel::Stokes),
            _ => None,
        }
    }

    /// The same kernel for lengths measured in units of `s` (`x = s x'`): `kappa s`,
    /// `epsilon / s`, `k s`, so that `G(s r') = G'(r') / s` for every kernel but the stresslet
    /// (`T(s r') = T(r') / s^2`), which has no parameter.
    pub fn in_length_unit(self, s: f64) -> Self {
        match self {
            TreeKernel::Yukawa { kappa } => TreeKernel::Yukawa { kappa: kappa * s },
            TreeKernel::RegularizedCoulomb { epsilon } => TreeKernel::RegularizedCoulomb { epsilon: epsilon / s },
            TreeKernel::RegularizedYukawa { kappa, epsilon } => {
                TreeKernel::RegularizedYukawa { kappa: kappa * s, epsilon: epsilon / s }
            }
            TreeKernel::SinOverR { wavenumber } => TreeKernel::SinOverR { wavenumber: wavenumber * s },
            other => other,
        }
    }

    /// The wavenumber of an oscillatory kernel (`sin(kr)/r`), 0 for the others, as
    /// [`PairKernel::wavenumber`].
    pub fn wavenumber(self) -> f64 {
        match self {
            TreeKernel::SinOverR { wavenumber } => wavenumber,
            _ => 0.0,
        }
    }

    /// Name for reports.
    pub fn name(self) -> &'static str {
        match self {
            TreeKernel::Coulomb => "laplace",
            TreeKernel::Yukawa { .. } => "yukawa",
            TreeKernel::RegularizedCoulomb { .. } => "regularized-coulomb",
            TreeKernel::RegularizedYukawa { .. } => "regularized-yukawa",
            TreeKernel::SinOverR { .. } => "sin-over-r",
            TreeKernel::Stokeslet => "stokeslet",
            TreeKernel::Stresslet => "stresslet",
            TreeKernel::Stokes => "stokes",
        }
    }

    /// Reals per source the caller gives: 1 (`q`) for the scalar kernels, `f` (3) for the
    /// Stokeslet, `[q, n]` (6) for the stresslet, `[f, q, n]` (9) for Stokes; the Ewald path's
    /// [`Kernel::density_width`] order.
    pub fn input_width(self) -> usize {
        match self {
            TreeKernel::Stokeslet => 3,
            TreeKernel::Stresslet => 6,
            TreeKernel::Stokes => 9,
            _ => 1,
        }
    }

    /// Density components per source the treecode sums (the proxies' too): the stresslet's
    /// `[q, n]` become the six of `sym(q (x) n)`.
    pub fn density_width(self) -> usize {
        // the same counts: only the stresslet's meaning changes, [q, n] to sym(q (x) n)
        self.input_width()
    }

    /// Values per target.
    pub fn value_width(self) -> usize {
        match self {
            TreeKernel::Stokeslet | TreeKernel::Stresslet | TreeKernel::Stokes => 3,
            _ => 1,
        }
    }

    /// Converts the caller's per-source inputs (`input_width` each, row-major) into the summed
    /// densities (`density_width` each, row-major).
    pub fn densities(self, input: &[f64]) -> Vec<f64> {
        let (wi, wd) = (self.input_width(), self.density_width());
        let n = input.len() / wi;
        let mut out = vec![0.0; n * wd];
        for (o, i) in out.chunks_exact_mut(wd).zip(input.chunks_exact(wi)) {
            match self {
                TreeKernel::Stresslet => symmetric_dipole(&i[0..3], &i[3..6], o),
                TreeKernel::Stokes => {
                    o[..3].copy_from_slice(&i[..3]);
                    symmetric_dipole(&i[3..6], &i[6..9], &mut o[3..9]);
                }
                _ => o.copy_from_slice(i),
            }
        }
        out
    }
}

/// `sym(q (x) n)` as `[S_xx, S_yy, S_zz, S_xy, S_xz, S_yz]`.
fn symmetric_dipole(q: &[f64], n: &[f64], s: &mut [f64]) {
    s[0] = q[0] * n[0];
    s[1] = q[1] * n[1];
    s[2] = q[2] * n[2];
    s[3] = 0.5 * (q[0] * n[1] + q[1] * n[0]);
    s[4] = 0.5 * (q[0] * n[2] + q[2] * n[0]);
    s[5] = 0.5 * (q[1] * n[2] + q[2] * n[1]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Relative error of the vector `exp` and `sin` against libm over their ranges (and `sin`'s
    /// absolute error near its zeros), exact values where they must be exact.
    #[test]
    fn vector_exp_and_sin_match_libm() {
        // the split constants are fdlibm's bit patterns
        assert_eq!(f64::to_bits(0.693_147_180_369_123_8), 0x3fe6_2e42_fee0_0000);
        assert_eq!(f64::to_bits(1.570_796_326_734_125_6), 0x3ff9_21fb_5440_0000);
        let mut worst = [0.0f64; 2];
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        for _ in 0..20000 {
            let x: [f64; LANES] = [0; LANES].map(|_| 1400.0 * next() - 700.0);
            let e = exp_lanes(&x);
            for l in 0..LANES {
                worst[0] = worst[0].max((e[l] - x[l].exp()).abs() / x[l].exp());
            }
            let y: [f64; LANES] = [0; LANES].map(|_| (2.0 * next() - 1.0) * 10f64.powf(6.0 * next() - 2.0));
            let s = sin_lanes(&y);
            for l in 0..LANES {
                worst[1] = worst[1].max((s[l] - y[l].sin()).abs() / y[l].sin().abs().max(1e-300).max(1e-3));
            }
        }
        assert!(worst[0] < 1e-15, "exp: relative error {:.3e}", worst[0]);
        assert!(worst[1] < 1e-14, "sin: error {:.3e}", worst[1]);
        assert_eq!(exp_lanes(&[0.0; LANES]), [1.0; LANES]);
        assert_eq!(sin_lanes(&[0.0; LANES]), [0.0; LANES]);
        // beyond the vector range, and not finite: libm's answers
        let big = [1e7, -3e9, 1e300, 0.5, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(sin_lanes(&big), big.map(f64::sin));
        assert!(sin_lanes(&[f64::NAN; LANES])[0].is_nan());
        assert!(exp_lanes(&[-1e6; LANES])[0] >= 0.0 && exp_lanes(&[-1e6; LANES])[0] < 1e-300);
    }
}
