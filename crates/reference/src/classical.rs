//! The classical triply periodic Ewald sum with the Hasimoto splitting, written independently
//! of the fast path.
//!
//! `u(x) = sum_j sum_p G(x - y_j + p) s_j` with the zero wave vector dropped is split with the
//! parameter `xi` into
//! - a real-space sum of the screened kernel over explicit images `p` with `|x - y_j + p| < R`,
//! - a Fourier sum `(1/V) sum_{0 < |k| <= K} G^F(k) S(k) e^{i k.x}` over explicit wave vectors
//!   with structure factors `S(k) = sum_j s_j e^{-i k.y_j}`,
//! - for a target that coincides with a source, `-G^F(0) s_j` instead of the singular term;
//! - for Laplace, `-pi Q / (V xi^2)` with `Q` the net charge: the zero mode of the real-space part
//!   (`int erfc(xi r)/r dr = pi/xi^2`), so that a non-neutral system gets the potential of a
//!   uniform neutralising background, independent of `xi`. The Hasimoto real-space parts of the
//!   Stokeslet and stresslet have zero mean (`1 - gamma = O(k^4)`) and need no such term.
//!
//! Fourier kernels (convention `f^(k) = int f(r) e^{-i k.r} dr`, `gamma = (1 + k^2/4xi^2) e^{-k^2/4xi^2}`):
//! - Laplace: `4 pi e^{-k^2/4xi^2} / k^2`;
//! - Stokeslet (Hasimoto): `8 pi gamma (k^2 I - k k^T) / k^4`;
//! - stresslet: `T^_ijk = 8 pi i gamma [k^2 (k_k d_ij + k_i d_jk + k_j d_ik) - 2 k_i k_j k_k] / k^4`,
//!   obtained from `T_ijk = d_k G_ij + d_i G_kj - d_ik p_j`, `p = 2 r / r^3`.
//!
//! Real-space kernels are `G - G^F` with `G^F` written from the radial functions
//! `phi1 = F^-1[8 pi gamma / k^2] = 2 erf(xi r)/r + 2 xi e^{-xi^2 r^2}/sqrt(pi)` and
//! `phi2 = F^-1[8 pi gamma / k^4]`, `phi2' = -erf(xi r)`:
//! `T^F_ijk = d_ij d_k phi1 + d_jk d_i phi1 + d_ik d_j phi1 + 2 d_i d_j d_k phi2`.
//! The truncations are chosen so that both neglected tails are below `1e-16` relative; the
//! result does not depend on `xi` (a test checks this), which validates the splitting.

use std::f64::consts::PI;

use parki_core::{Domain, Kernel, SourceSet, Sources};
use rayon::prelude::{
    IndexedParallelIterator, IntoParallelRefIterator, ParallelIterator, ParallelSlice, ParallelSliceMut,
};

/// Screening products that make both tails negligible: `erfc(6.5) ~ 4e-20`, `e^{-6.5^2} ~ 5e-19`.
const SCREEN: f64 = 6.5;

/// A classical Ewald evaluator for one domain and splitting parameter.
#[derive(Clone, Debug)]
pub struct ClassicalEwald {
    domain: Domain,
    xi: f64,
    real_cutoff: f64,
    k_cutoff: f64,
    modes: [i64; 3],
}

/// Wave vectors of one half space with their Fourier-kernel data.
struct Modes {
    k: Vec<[f64; 3]>,
    /// Index `(nx, ny, nz)` per wave vector (shifted to be non-negative).
    n: Vec<[usize; 3]>,
}

impl ClassicalEwald {
    /// An evaluator whose `xi` balances the real-space and Fourier costs for `ns` sources and
    /// `nt` targets.
    pub fn new(domain: Domain, ns: usize, nt: usize) -> Self {
        assert_eq!(domain.periodicity(), 3, "the classical reference is triply periodic");
        let v = domain.volume();
        // real-space pair-image count ~ 1150 Nt Ns / (xi^3 V), Fourier terms ~ 18.6 (Ns+Nt) xi^3 V;
        // a real-space term costs about 4 Fourier terms.
        let ratio = 4.0 * 1150.0 * (nt as f64) * (ns as f64) / (18.6 * (ns + nt) as f64);
        let mut xi = (ratio.sqrt() / v).cbrt();
        // keep the real-space cutoff below 3 box lengths and the mode count sane
        xi = xi.max(SCREEN / (3.0 * domain.min_length()));
        Self::with_xi(domain, xi)
    }

    /// An evaluator with a given splitting parameter.
    pub fn with_xi(domain: Domain, xi: f64) -> Self {
        assert_eq!(domain.periodicity(), 3, "the classical reference is triply periodic");
        let real_cutoff = SCREEN / xi;
        let k_cutoff = 2.0 * SCREEN * xi;
        let l = domain.lengths();
        let modes = [0, 1, 2].map(|d| (k_cutoff * l[d] / (2.0 * PI)).ceil() as i64);
        Self { domain, xi, real_cutoff, k_cutoff, modes }
    }

    /// The splitting parameter.
    pub fn xi(&self) -> f64 {
        self.xi
    }

    /// Evaluates the periodic sum at `targets` (output `(Nt, dim)` row-major).
    ///
    /// A target that coincides exactly with a source (or one of its images) skips its
    /// free-space term; other images are kept.
    pub fn evaluate(&self, kernel: Kernel, sources: &Sources<f64>, targets: &[[f64; 3]]) -> Vec<f64> {
        let dim = kernel.output_dim();
        let mut out = vec![0.0; targets.len() * dim];
        self.real_space(kernel, sources, targets, &mut out);
        self.fourier_space(kernel, sources, targets, &mut out);
        if kernel == Kernel::Laplace {
            // The real-space kernel erfc(xi r)/r has mean pi/xi^2 over space; dropping the zero
            // mode of the full sum subtracts it (the neutralising background of a net charge).
            let net: f64 = sources.charges.expect("charges").iter().sum();
            let shift = PI * net / (self.domain.volume() * self.xi * self.xi);
            out.iter_mut().for_each(|u| *u -= shift);
        }
        out
    }

    fn real_space(&self, kernel: Kernel, sources: &Sources<f64>, targets: &[[f64; 3]], out: &mut [f64]) {
        let dim = kernel.output_dim();
        let l = self.domain.lengths();
        let rc = self.real_cutoff;
        let nimg = [0, 1, 2].map(|d| (rc / l[d]).ceil() as i64 + 1);
        let xi = self.xi;
        out.par_chunks_mut(dim).zip(targets.par_iter()).for_each(|(u, x)| {
            let mut acc = [0.0f64; 3];
            for (j, y) in sources.positions.iter().enumerate() {
                for a in -nimg[0]..=nimg[0] {
                    for b in -nimg[1]..=nimg[1] {
                        for c in -nimg[2]..=nimg[2] {
                            let r = [
                                x[0] - y[0] + a as f64 * l[0],
                                x[1] - y[1] + b as f64 * l[1],
                                x[2] - y[2] + c as f64 * l[2],
                            ];
                            let r2 = r[0] * r[0] + r[1] * r[1] + r[2] * r[2];
                            if r2 >= rc * rc {
                                continue;
                            }
                            add_real_space(kernel, xi, r, r2, sources, j, &mut acc);
                        }
                    }
                }
            }
            u.iter_mut().zip(acc.iter()).for_each(|(o, a)| *o += a);
        });
    }

    fn modes(&self) -> Modes {
        let l = self.domain.lengths();
        let [mx, my, mz] = self.modes;
        let kc2 = self.k_cutoff * self.k_cutoff;
        let mut k = Vec::new();
        let mut n = Vec::new();
        for a in 0..=mx {
            for b in -my..=my {
                for c in -mz..=mz {
                    // half space: a > 0, or a = 0 and b > 0, or a = b = 0 and c > 0
                    let keep = a > 0 || (a == 0 && b > 0) || (a == 0 && b == 0 && c > 0);
                    if !keep {
                        continue;
                    }
                    let kv = [2.0 * PI * a as f64 / l[0], 2.0 * PI * b as f64 / l[1], 2.0 * PI * c as f64 / l[2]];
                    let k2 = kv[0] * kv[0] + kv[1] * kv[1] + kv[2] * kv[2];
                    if k2 > kc2 {
                        continue;
                    }
                    k.push(kv);
                    n.push([a as usize, (b + my) as usize, (c + mz) as usize]);
                }
            }
        }
        Modes { k, n }
    }

    /// Per-source phase tables `e^{-i 2 pi m y_d / L_d}` for `m` in `-M_d..=M_d` (shifted index).
    fn phases(&self, y: &[f64; 3]) -> [Vec<(f64, f64)>; 3] {
        let l = self.domain.lengths();
        [0, 1, 2].map(|d| {
            let m = self.modes[d];
            (-m..=m)
                .map(|i| {
                    let t = -2.0 * PI * i as f64 * y[d] / l[d];
                    (t.cos(), t.sin())
                })
                .collect()
        })
    }

    fn fourier_space(&self, kernel: Kernel, sources: &Sources<f64>, targets: &[[f64; 3]], out: &mut [f64]) {
        let modes = self.modes();
        let nk = modes.k.len();
        let ncomp = source_components(kernel);
        let shift = [self.modes[0] as usize, 0, 0];
        // Structure factors S_c(k) = sum_j s_jc e^{-i k.y_j}, c over the density components.
        let chunk = sources.len().div_ceil(rayon::current_num_threads().max(1) * 4).max(1);
        let idx: Vec<usize> = (0..sources.len()).collect();
        let s: Vec<(f64, f64)> = idx
            .par_chunks(chunk)
            .map(|js| {
                let mut acc = vec![(0.0, 0.0); nk * ncomp];
                let mut dens = [0.0; 12];
                for &j in js {
                    let ph = self.phases(&sources.positions[j]);
                    source_density(kernel, sources, j, &mut dens);
                    for (m, n) in modes.n.iter().enumerate() {
                        let ex = ph[0][n[0] + shift[0]];
                        let ey = ph[1][n[1]];
                        let ez = ph[2][n[2]];
                        let exy = cmul(ex, ey);
                        let e = cmul(exy, ez);
                        for c in 0..ncomp {
                            let a = &mut acc[m * ncomp + c];
                            a.0 += dens[c] * e.0;
                            a.1 += dens[c] * e.1;
                        }
                    }
                }
                acc
            })
            .reduce(
                || vec![(0.0, 0.0); nk * ncomp],
                |mut a, b| {
                    a.iter_mut().zip(b.iter()).for_each(|(x, y)| {
                        x.0 += y.0;
                        x.1 += y.1
                    });
                    a
                },
            );
        // Fourier-space potential per wave vector: U(k) = G^F(k) S(k) (complex, dim components).
        let dim = kernel.output_dim();
        let xi = self.xi;
        let mut uk = vec![(0.0, 0.0); nk * dim];
        for m in 0..nk {
            let k = modes.k[m];
            let sk = &s[m * ncomp..(m + 1) * ncomp];
            fourier_kernel(kernel, xi, k, sk, &mut uk[m * dim..(m + 1) * dim]);
        }
        // u(x) += (2/V) sum_{half space} Re[U(k) e^{i k.x}]
        let scale = 2.0 / self.domain.volume();
        out.par_chunks_mut(dim).zip(targets.par_iter()).for_each(|(u, x)| {
            let ph = self.phases(x); // e^{-i k.x}; conjugate below
            let mut acc = [Neumaier::default(); 3];
            for (m, n) in modes.n.iter().enumerate() {
                let e = cmul(cmul(ph[0][n[0] + shift[0]], ph[1][n[1]]), ph[2][n[2]]);
                let e = (e.0, -e.1);
                for c in 0..dim {
                    let v = cmul(uk[m * dim + c], e);
                    acc[c].add(v.0);
                }
            }
            u.iter_mut().zip(acc.iter()).for_each(|(o, a)| *o += scale * a.value());
        });
    }
}

/// Compensated (Neumaier) summation: the Fourier sum adds ~1e4 terms of one sign.
#[derive(Clone, Copy, Default)]
struct Neumaier {
    sum: f64,
    c: f64,
}

impl Neumaier {
    #[inline]
    fn add(&mut self, v: f64) {
        let t = self.sum + v;
        if self.sum.abs() >= v.abs() {
            self.c += (self.sum - t) + v;
        } else {
            self.c += (v - t) + self.sum;
        }
        self.sum = t;
    }
    fn value(&self) -> f64 {
        self.sum + self.c
    }
}

#[inline]
fn cmul(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    (a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0)
}

/// Number of density components the Fourier sum carries: 1 (q), 3 (f), 9 (q n^T), 12 (f, q n^T).
fn source_components(kernel: Kernel) -> usize {
    match kernel {
        Kernel::Laplace => 1,
        Kernel::Stokeslet => 3,
        Kernel::Stresslet => 9,
        Kernel::Stokes => 12,
    }
}

/// The Fourier sum's density components of source `j`: `[q]`, `[f]`, `q n^T` (row-major) or
/// `[f, q n^T]`, from the packed densities of [`SourceSet::density`].
fn source_density(kernel: Kernel, s: &Sources<f64>, j: usize, out: &mut [f64; 12]) {
    let mut packed = [0.0; 9];
    s.density(kernel, j, &mut packed);
    match kernel {
        Kernel::Laplace => out[0] = packed[0],
        Kernel::Stokeslet => out[..3].copy_from_slice(&packed[..3]),
        Kernel::Stresslet | Kernel::Stokes => {
            let c = if kernel.needs_forces() { 3 } else { 0 };
            out[..c].copy_from_slice(&packed[..c]);
            let (q, n) = (&packed[c..c + 3], &packed[c + 3..c + 6]);
            for a in 0..3 {
                for b in 0..3 {
                    out[c + 3 * a + b] = q[a] * n[b];
                }
            }
        }
    }
}

/// `U(k) = G^F(k) S(k)` for one wave vector (see the module documentation).
fn fourier_kernel(kernel: Kernel, xi: f64, k: [f64; 3], s: &[(f64, f64)], u: &mut [(f64, f64)]) {
    let k2 = k[0] * k[0] + k[1] * k[1] + k[2] * k[2];
    let e = (-k2 / (4.0 * xi * xi)).exp();
    match kernel {
        Kernel::Laplace => {
            let g = 4.0 * PI * e / k2;
            u[0] = (g * s[0].0, g * s[0].1);
        }
        _ => {
            let gamma = (1.0 + k2 / (4.0 * xi * xi)) * e;
            let g = 8.0 * PI * gamma / (k2 * k2);
            for c in u.iter_mut() {
                *c = (0.0, 0.0);
            }
            let mut off = 0;
            if kernel.needs_forces() {
                // (k^2 I - k k^T) S_f
                for i in 0..3 {
                    let mut re = k2 * s[i].0;
                    let mut im = k2 * s[i].1;
                    for j in 0..3 {
                        re -= k[i] * k[j] * s[j].0;
                        im -= k[i] * k[j] * s[j].1;
                    }
                    u[i].0 += g * re;
                    u[i].1 += g * im;
                }
                off = 3;
            }
            if kernel.needs_dipoles() {
                // i [k^2 (k_k d_ij + k_i d_jk + k_j d_ik) - 2 k_i k_j k_k] S_jk
                for i in 0..3 {
                    let (mut re, mut im) = (0.0, 0.0);
                    for j in 0..3 {
                        for kk in 0..3 {
                            let d = |a: usize, b: usize| if a == b { 1.0 } else { 0.0 };
                            let t =
                                k2 * (k[kk] * d(i, j) + k[i] * d(j, kk) + k[j] * d(i, kk)) - 2.0 * k[i] * k[j] * k[kk];
                            let sv = s[off + 3 * j + kk];
                            re += t * sv.0;
                            im += t * sv.1;
                        }
                    }
                    // multiply by i
                    u[i].0 += g * -im;
                    u[i].1 += g * re;
                }
            }
        }
    }
}

/// Adds the real-space (screened) term `G^N(r) s_j` of source `j` at separation `r`
/// (`r2 = |r|^2`) to `acc`; at `r = 0` adds `-G^F(0) s_j` (the self term).
pub fn add_real_space(kernel: Kernel, xi: f64, r: [f64; 3], r2: f64, s: &Sources<f64>, j: usize, acc: &mut [f64; 3]) {
    let sqrt_pi = PI.sqrt();
    if r2 == 0.0 {
        // coincident: the singular free-space term is skipped, leaving -G^F(0) s_j
        if kernel.needs_charges() {
            acc[0] -= 2.0 * xi / sqrt_pi * s.charges.expect("charges")[j];
        }
        if kernel.needs_forces() {
            let f = s.forces.expect("forces")[j];
            (0..3).for_each(|a| acc[a] -= 4.0 * xi / sqrt_pi * f[a]);
        }
        // the stresslet's G^F is odd: T^F(0) = 0
        return;
    }
    let rn = r2.sqrt();
    let erfc = libm::erfc(xi * rn);
    let gauss = (-xi * xi * r2).exp();
    if kernel.needs_charges() {
        acc[0] += erfc / rn * s.charges.expect("charges")[j];
    }
    if kernel.needs_forces() {
        // Hasimoto: G^N = G(r) [erfc(xi r) + 2 xi r e^{-xi^2 r^2}/sqrt(pi)] - 4 xi e^{-xi^2 r^2}/sqrt(pi) I
        let f = s.forces.expect("forces")[j];
        let g = parki_core::kernel::free_space::stokeslet(r, f);
        let a = erfc + 2.0 * xi * rn * gauss / sqrt_pi;
        let b = 4.0 * xi * gauss / sqrt_pi;
        (0..3).for_each(|c| acc[c] += g[c] * a - b * f[c]);
    }
    if kernel.needs_dipoles() {
        let q = s.dipoles.expect("dipoles")[j];
        let n = s.normals.expect("normals")[j];
        let t = parki_core::kernel::free_space::stresslet(r, q, n);
        let tf = stresslet_smooth(xi, r, rn, q, n);
        (0..3).for_each(|c| acc[c] += t[c] - tf[c]);
    }
}

/// `T^F_ijk q_j n_k` from the radial functions (module documentation), for `r > 0`.
fn stresslet_smooth(xi: f64, r: [f64; 3], rn: f64, q: [f64; 3], n: [f64; 3]) -> [f64; 3] {
    let sqrt_pi = PI.sqrt();
    let x = xi * rn;
    let erf = libm::erf(x);
    let b = 2.0 * xi * (-x * x).exp() / sqrt_pi;
    // phi1' = d/dr [2 erf/r + b]
    let dphi1 = 2.0 * (b / rn - erf / (rn * rn)) - 2.0 * xi * xi * rn * b;
    // phi2' = -erf, phi2'' = -b, phi2''' = 2 xi^2 r b
    let p1 = -erf;
    let p2 = -b;
    let p3 = 2.0 * xi * xi * rn * b;
    // d_i d_j d_k phi = A rh_i rh_j rh_k + Bc (d_ij rh_k + d_ik rh_j + d_jk rh_i)
    let a3 = p3 - 3.0 * p2 / rn + 3.0 * p1 / (rn * rn);
    let b3 = p2 / rn - p1 / (rn * rn);
    let rh = [r[0] / rn, r[1] / rn, r[2] / rn];
    let mut out = [0.0; 3];
    for (i, o) in out.iter_mut().enumerate() {
        let mut acc = 0.0;
        for j in 0..3 {
            for k in 0..3 {
                let d = |a: usize, b: usize| if a == b { 1.0 } else { 0.0 };
                let sym = d(i, j) * rh[k] + d(j, k) * rh[i] + d(i, k) * rh[j];
                let t = dphi1 * sym + 2.0 * (a3 * rh[i] * rh[j] * rh[k] + b3 * sym);
                acc += t * q[j] * n[k];
            }
        }
        *o = acc;
    }
    out
}
