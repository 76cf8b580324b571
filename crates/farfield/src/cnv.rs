//! CNV: the Fourier-space Green's functions and the window deconvolution (Ewald paper eq. (7)),
//! applied in place on the half spectrum.
//!
//! With `phi^` the FFT of the spread grid, the far field on the grid is
//! `v = (1/V) IFFT[ G^F(k) / prod_d W^(k_d h_d)^2 phi^ ]` (the `1/V` collects the paper's `h^3`,
//! the window's `h` per axis and the FFT normalisation), where, with
//! `gamma = (1 + k^2/4 xi^2) e^{-k^2/4 xi^2}` (Hasimoto):
//!
//! - Laplace: `v^ = 4 pi e^{-k^2/4xi^2} / k^2 phi^`;
//! - Stokeslet: `v^ = 8 pi gamma / k^4 (k^2 phi^_f - (k.phi^_f) k)`;
//! - stresslet (`S` the symmetric part of `q (x) n`):
//!   `v^_i = 8 pi i gamma / k^4 [k^2 (2 (S k)_i + k_i tr S) - 2 k_i (k.S k)]`;
//! - Stokes: the sum;
//! - the Laplace field `E = -grad u` by spectral differentiation ([`Cnv::with_field`]):
//!   `E^_d = -i k_d v^`, three more output spectra after the potential's.
//!
//! The zero mode is dropped (zero net charge / force; a uniform neutralising background
//! otherwise), and so are the Nyquist modes, whose odd parts a real transform cannot represent.
//! The factors `e^{-k_d^2/4xi^2} / W^(k_d h_d)^2` are separable and tabulated per axis.

use std::f64::consts::PI;

use parki_core::par::DisjointSlice;
use parki_core::{Kernel, Par, Real};
use parki_decomp::{GridLayout, SpectralBlock};
use rayon::prelude::{IntoParallelIterator, ParallelIterator};

use crate::window::KaiserBessel;

/// Per-axis tables of one CNV plan.
#[derive(Clone, Debug)]
pub struct Cnv {
    kernel: Kernel,
    field: bool,
    layout: GridLayout,
    xi: f64,
    volume: f64,
    /// `k_d(i)` per axis.
    k: [Vec<f64>; 3],
    /// `e^{-k_d^2/4xi^2} / W^(k_d h_d)^2`, zero at Nyquist.
    f: [Vec<f64>; 3],
}

impl Cnv {
    /// Tables for `kernel` on `layout` over a box of sides `lengths`, window `kb`, splitting `xi`.
    pub fn new(kernel: Kernel, layout: GridLayout, lengths: [f64; 3], kb: &KaiserBessel, xi: f64) -> Self {
        let m = layout.global;
        let axis = |d: usize, n: usize| -> (Vec<f64>, Vec<f64>) {
            let h = lengths[d] / m[d] as f64;
            (0..n)
                .map(|i| {
                    if GridLayout::is_nyquist(i, m[d]) {
                        return (0.0, 0.0);
                    }
                    let kd = 2.0 * PI * GridLayout::signed_mode(i, m[d]) as f64 / lengths[d];
                    let w = kb.fourier(kd * h);
                    (kd, (-kd * kd / (4.0 * xi * xi)).exp() / (w * w))
                })
                .unzip()
        };
        let (kx, fx) = axis(0, layout.complex_row());
        let (ky, fy) = axis(1, m[1]);
        let (kz, fz) = axis(2, m[2]);
        Self { kernel, field: false, layout, xi, volume: lengths.iter().product(), k: [kx, ky, kz], f: [fx, fy, fz] }
    }

    /// The same tables, writing the Laplace field `-i k v^` after the potential (3 more output
    /// spectra; the grid must hold 4 components).
    ///
    /// # Panics
    /// For a kernel other than Laplace (checked by `parki_core::Output::with_field` upstream).
    pub fn with_field(mut self) -> Self {
        assert_eq!(self.kernel, Kernel::Laplace, "the field is the Laplace kernel's");
        self.field = true;
        self
    }

    /// Output spectra written: the kernel's, plus 3 with the field.
    pub fn output_components(&self) -> usize {
        self.kernel.output_dim() + if self.field { 3 } else { 0 }
    }

    /// The per-axis tables `(k_d, f_d)` (see the module documentation): `k_d(i)` the
    /// wavenumber of FFT index `i`, `f_d(i) = e^{-k_d^2/4xi^2} / W^(k_d h_d)^2` (0 at Nyquist);
    /// x over the half spectrum.
    pub fn tables(&self) -> (&[Vec<f64>; 3], &[Vec<f64>; 3]) {
        (&self.k, &self.f)
    }

    /// Box volume `V`.
    pub fn volume(&self) -> f64 {
        self.volume
    }

    /// `1/(4 xi^2)`.
    pub fn inv4xi2(&self) -> f64 {
        1.0 / (4.0 * self.xi * self.xi)
    }

    /// Applies the kernel in place: reads the `kernel.grid_components()` spectra of `grid` and
    /// writes the `kernel.output_dim()` output spectra into its first components.
    pub fn apply<T: Real>(&self, grid: &mut [T], par: Par) {
        self.apply_block(grid, &self.layout.spectral_block(), par)
    }

    /// As [`apply`](Self::apply) on the local block of a distributed spectrum (the z-pencils
    /// a distributed FFT ends in): global `kx` in `block.x`, `ky` in `block.y`, every `kz`.
    pub fn apply_block<T: Real>(&self, grid: &mut [T], block: &SpectralBlock, par: Par) {
        let ncomp = self.kernel.grid_components().max(self.output_components());
        let cs = block.component_stride;
        let plane = block.y.1 * block.row_stride;
        assert!(block.x.0 + block.x.1 <= self.layout.complex_row() && block.y.0 + block.y.1 <= self.layout.global[1]);
        assert_eq!(block.z, self.layout.global[2], "spectral block must hold every kz");
        assert!(grid.len() >= (ncomp - 1) * cs + block.z * plane, "grid buffer too short");
        let writer = DisjointSlice::new(grid);
        let work = |iz: usize| {
            let mut comps: [&mut [T]; 9] = Default::default();
            for (c, slot) in comps.iter_mut().enumerate().take(ncomp) {
                // SAFETY: plane iz of component c belongs to this task only (one task per iz).
                *slot = unsafe { writer.range_mut(c * cs + iz * plane, c * cs + (iz + 1) * plane) };
            }
            self.plane(iz, block, &mut comps[..ncomp]);
        };
        match par {
            Par::Seq => (0..block.z).for_each(work),
            Par::Rayon(_) => (0..block.z).into_par_iter().for_each(work),
        }
    }

    fn plane<T: Real>(&self, iz: usize, block: &SpectralBlock, comps: &mut [&mut [T]]) {
        let stride = block.row_stride;
        let inv4xi2 = 1.0 / (4.0 * self.xi * self.xi);
        let kz = self.k[2][iz];
        let fz = self.f[2][iz];
        let ncomp = self.kernel.grid_components();
        let nout = self.output_components();
        for ly in 0..block.y.1 {
            let iy = block.y.0 + ly;
            let ky = self.k[1][iy];
            let fyz = self.f[1][iy] * fz;
            for lx in 0..block.x.1 {
                let ix = block.x.0 + lx;
                let o = ly * stride + 2 * lx;
                let kx = self.k[0][ix];
                let k2 = kx * kx + ky * ky + kz * kz;
                let sf = self.f[0][ix] * fyz;
                let mut phi = [(0.0f64, 0.0f64); 9];
                for (c, p) in phi.iter_mut().enumerate().take(ncomp) {
                    *p = (comps[c][o].to_f64(), comps[c][o + 1].to_f64());
                }
                let mut v = [(0.0f64, 0.0f64); 4];
                if k2 > 0.0 && sf != 0.0 {
                    let k = [kx, ky, kz];
                    match self.kernel {
                        Kernel::Laplace => {
                            let g = 4.0 * PI * sf / (self.volume * k2);
                            v[0] = (g * phi[0].0, g * phi[0].1);
                            if self.field {
                                for d in 0..3 {
                                    v[1 + d] = (k[d] * v[0].1, -k[d] * v[0].0);
                                }
                            }
                        }
                        _ => {
                            let g = 8.0 * PI * (1.0 + k2 * inv4xi2) * sf / (self.volume * k2 * k2);
                            let mut off = 0;
                            if self.kernel.needs_forces() {
                                let kf = (
                                    k[0] * phi[0].0 + k[1] * phi[1].0 + k[2] * phi[2].0,
                                    k[0] * phi[0].1 + k[1] * phi[1].1 + k[2] * phi[2].1,
                                );
                                for i in 0..3 {
                                    v[i].0 += g * (k2 * phi[i].0 - kf.0 * k[i]);
                                    v[i].1 += g * (k2 * phi[i].1 - kf.1 * k[i]);
                                }
                                off = 3;
                            }
                            if self.kernel.needs_dipoles() {
                                let s = &phi[off..off + 6];
                                // symmetric S: [S11, S22, S33, S12, S13, S23]
                                let sk = |part: usize| -> [f64; 3] {
                                    let c = |i: usize| if part == 0 { s[i].0 } else { s[i].1 };
                                    [
                                        c(0) * k[0] + c(3) * k[1] + c(4) * k[2],
                                        c(3) * k[0] + c(1) * k[1] + c(5) * k[2],
                                        c(4) * k[0] + c(5) * k[1] + c(2) * k[2],
                                    ]
                                };
                                let (skr, ski) = (sk(0), sk(1));
                                let trr = s[0].0 + s[1].0 + s[2].0;
                                let tri = s[0].1 + s[1].1 + s[2].1;
                                let kskr = k[0] * skr[0] + k[1] * skr[1] + k[2] * skr[2];
                                let kski = k[0] * ski[0] + k[1] * ski[1] + k[2] * ski[2];
                                for i in 0..3 {
                                    let wr = k2 * (2.0 * skr[i] + k[i] * trr) - 2.0 * k[i] * kskr;
                                    let wi = k2 * (2.0 * ski[i] + k[i] * tri) - 2.0 * k[i] * kski;
                                    // multiply by i
                                    v[i].0 -= g * wi;
                                    v[i].1 += g * wr;
                                }
                            }
                        }
                    }
                }
                for (c, vc) in v.iter().enumerate().take(nout) {
                    comps[c][o] = T::from_f64(vc.0);
                    comps[c][o + 1] = T::from_f64(vc.1);
                }
            }
        }
    }
}
