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
        x.map(|v| 1.0 / v.sqrt())
    }
    #[inline(always)]
    fn inv_r(self, r2: &[f64; LANES]) -> [f64; LANES] {
        r2.map(inv_r)
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
        _m: M,
        _d: &[[f64; LANES]; 3],
        r2: &[f64; LANES],
        q: LaneDensities<'_>,
        acc: &mut [[f64; LANES]; MAX_VALUE],
    ) {
        let q0 = q.get(0);
        for l in 0..LANES {
            let r = r2[l].sqrt();
            let g = if r2[l] > 0.0 { (-self.kappa * r).exp() / r } else { 0.0 };
            acc[0][l] = q0[l].mul_add(g, acc[0][l]);
        }
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
        let ri = m.rsqrt(&r2.map(|v| v + e2));
        for l in 0..LANES {
            acc[0][l] = q0[l].mul_add(ri[l], acc[0][l]);
        }
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
        _m: M,
        _d: &[[f64; LANES]; 3],
        r2: &[f64; LANES],
        q: LaneDensities<'_>,
        acc: &mut [[f64; LANES]; MAX_VALUE],
    ) {
        let q0 = q.get(0);
        let e2 = self.epsilon * self.epsilon;
        for l in 0..LANES {
            let g = (-self.kappa * r2[l].sqrt()).exp() / (r2[l] + e2).sqrt();
            acc[0][l] = q0[l].mul_add(g, acc[0][l]);
        }
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
    #[inline(always)]
    fn lanes<M: LaneMath>(
        &self,
        _m: M,
        _d: &[[f64; LANES]; 3],
        r2: &[f64; LANES],
        q: LaneDensities<'_>,
        acc: &mut [[f64; LANES]; MAX_VALUE],
    ) {
        let q0 = q.get(0);
        for l in 0..LANES {
            let r = r2[l].sqrt();
            let g = if r2[l] > 0.0 { (self.wavenumber * r).sin() / r } else { 0.0 };
            acc[0][l] = q0[l].mul_add(g, acc[0][l]);
        }
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
    let s = [0, 1, 2, 3, 4, 5].map(|c| q.get(c0 + c));
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
        match self {
            TreeKernel::Stokeslet => 3,
            TreeKernel::Stresslet => 6,
            TreeKernel::Stokes => 9,
            _ => 1,
        }
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
