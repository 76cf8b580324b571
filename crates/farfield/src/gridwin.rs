//! The window on a periodic grid: anchors, offsets and weights of a particle, the grid
//! densities P2G spreads, and the periodic index runs along x.

use parki_core::{Kernel, Real};
use parki_decomp::GridLayout;

use crate::window::WindowPoly;

/// Largest supported window support.
pub const MAX_P: usize = 32;

/// The window of support `P` on a grid of spacing `h_d`.
#[derive(Clone, Debug)]
pub struct GridWindow<T> {
    /// Grid layout.
    pub layout: GridLayout,
    /// `1/h_d`.
    pub inv_h: [f64; 3],
    /// Support in points.
    pub p: usize,
    degree: usize,
    coeffs: Vec<T>,
    /// The bins' derivatives in `delta` (see [`WindowPoly::derivative`]).
    dcoeffs: Vec<T>,
    /// Global points per axis.
    pub global: [usize; 3],
    /// Along axes with `wrap[d] == false` the layout holds global points `origin[d]..` (unwrapped)
    /// and anchors are not wrapped.
    pub origin: [i64; 3],
    /// Whether the layout holds the whole periodic axis.
    pub wrap: [bool; 3],
}

/// Where a particle sits on the grid: anchors (first grid index of the support, wrapped into
/// `0..M_d`) and the window weights per axis.
#[derive(Clone, Copy, Debug)]
pub struct Footprint<T> {
    /// First support index per axis, in `0..M_d`.
    pub anchor: [usize; 3],
    /// Weights `w[d][l]`, `l < P`.
    pub w: [[T; MAX_P]; 3],
}

impl<T: Real> GridWindow<T> {
    /// A window for `layout` with spacings `h` from the fitted polynomial.
    pub fn new(layout: GridLayout, h: [f64; 3], poly: &WindowPoly) -> Self {
        assert!(poly.p <= MAX_P && poly.p.is_multiple_of(2), "window support must be even and at most {MAX_P}");
        assert!(layout.global.iter().all(|&m| m >= poly.p), "the grid must be at least P points wide");
        Self {
            layout,
            inv_h: h.map(|v| 1.0 / v),
            p: poly.p,
            degree: poly.degree,
            coeffs: poly.coeffs.iter().map(|&c| T::from_f64(c)).collect(),
            dcoeffs: poly.derivative.iter().map(|&c| T::from_f64(c)).collect(),
            global: layout.global,
            origin: [0; 3],
            wrap: [true; 3],
        }
    }

    /// The window on a block of a global grid of `global` points: `layout` holds global points
    /// `origin[d] .. origin[d] + layout.global[d]` (unwrapped) along axes with `wrap[d] ==
    /// false`, and whole axes otherwise. Every support of a particle the block serves must lie
    /// inside it.
    pub fn windowed(
        layout: GridLayout,
        global: [usize; 3],
        origin: [i64; 3],
        wrap: [bool; 3],
        h: [f64; 3],
        poly: &WindowPoly,
    ) -> Self {
        let mut w = Self::new(layout, h, poly);
        w.global = global;
        w.wrap = wrap;
        for d in 0..3 {
            if wrap[d] {
                assert_eq!(layout.global[d], global[d], "a wrapped axis holds the whole grid");
            } else {
                w.origin[d] = origin[d];
            }
        }
        w
    }

    /// Polynomial degree per bin of the window's approximation.
    pub fn degree(&self) -> usize {
        self.degree
    }

    /// Coefficients in `T`: `coeffs()[k * p + l]` multiplies `z^k` in bin `l`
    /// (see [`weights`](Self::weights)).
    pub fn coeffs(&self) -> &[T] {
        &self.coeffs
    }

    /// The bins' derivative coefficients in `delta` (`derivative[k * p + l]`, see
    /// [`WindowPoly::derivative`]), for a device's field G2P.
    pub fn derivative_coeffs(&self) -> &[T] {
        &self.dcoeffs
    }

    #[inline(always)]
    fn local_anchor(&self, d: usize, a: i64) -> usize {
        if self.wrap[d] {
            a.rem_euclid(self.global[d] as i64) as usize
        } else {
            let l = a - self.origin[d];
            debug_assert!(l >= 0 && l as usize + self.p <= self.layout.global[d], "support outside the grid block");
            l.clamp(0, (self.layout.global[d] - self.p) as i64) as usize
        }
    }

    /// Anchor along axis `d` and offset `delta in [0, 1)` of coordinate `x` (in f64: a position
    /// in `T`, or one rounded to `T` plus its residual, [`parki_core::Points::at`]).
    #[inline(always)]
    fn place(&self, d: usize, x: f64) -> (usize, T) {
        let g = x * self.inv_h[d];
        let i0 = g.floor();
        (self.local_anchor(d, i0 as i64 - (self.p / 2) as i64 + 1), T::from_f64(g - i0))
    }

    /// Anchor (wrapped) and weights of a point in the box.
    #[inline(always)]
    pub fn footprint(&self, pos: &[f64; 3]) -> Footprint<T> {
        let mut f = Footprint { anchor: [0; 3], w: [[T::ZERO; MAX_P]; 3] };
        for (d, &x) in pos.iter().enumerate() {
            let (anchor, delta) = self.place(d, x);
            f.anchor[d] = anchor;
            self.weights(delta, &mut f.w[d]);
        }
        f
    }

    /// As [`footprint`](Self::footprint), with the weights' derivatives in the position:
    /// `dw[d][l] = (1/h_d) d w_l / d delta` (the field's G2P).
    #[inline(always)]
    pub fn footprint_with_derivative(&self, pos: &[f64; 3]) -> (Footprint<T>, [[T; MAX_P]; 3]) {
        let mut f = Footprint { anchor: [0; 3], w: [[T::ZERO; MAX_P]; 3] };
        let mut dw = [[T::ZERO; MAX_P]; 3];
        for (d, &x) in pos.iter().enumerate() {
            let (anchor, delta) = self.place(d, x);
            f.anchor[d] = anchor;
            self.weights(delta, &mut f.w[d]);
            self.derivative_weights(delta, &mut dw[d]);
            let inv_h = T::from_f64(self.inv_h[d]);
            dw[d][..self.p].iter_mut().for_each(|v| *v *= inv_h);
        }
        (f, dw)
    }

    /// As [`footprint`](Self::footprint) for a support `P` known at compile time
    /// (`P == self.p`): anchors and weights in fixed-size arrays, so that the gather and scatter
    /// loops over the support unroll and stay in registers.
    #[inline(always)]
    pub fn footprint_fixed<const P: usize>(&self, pos: &[f64; 3]) -> ([usize; 3], [[T; P]; 3]) {
        debug_assert_eq!(P, self.p);
        let mut anchor = [0; 3];
        let mut w = [[T::ZERO; P]; 3];
        for (d, &x) in pos.iter().enumerate() {
            let (a, delta) = self.place(d, x);
            anchor[d] = a;
            horner_fixed(&self.coeffs, self.degree, delta, &mut w[d]);
        }
        (anchor, w)
    }

    /// As [`footprint_with_derivative`](Self::footprint_with_derivative) for a support `P`
    /// known at compile time: anchors, weights and `(1/h_d) d w / d delta`.
    #[inline(always)]
    pub fn footprint_fixed_with_derivative<const P: usize>(
        &self,
        pos: &[f64; 3],
    ) -> ([usize; 3], [[T; P]; 3], [[T; P]; 3]) {
        debug_assert_eq!(P, self.p);
        let mut anchor = [0; 3];
        let mut w = [[T::ZERO; P]; 3];
        let mut dw = [[T::ZERO; P]; 3];
        for (d, &x) in pos.iter().enumerate() {
            let (a, delta) = self.place(d, x);
            anchor[d] = a;
            horner_fixed(&self.coeffs, self.degree, delta, &mut w[d]);
            horner_fixed(&self.dcoeffs, self.degree, delta, &mut dw[d]);
            let inv_h = T::from_f64(self.inv_h[d]);
            dw[d].iter_mut().for_each(|v| *v *= inv_h);
        }
        (anchor, w, dw)
    }

    /// Anchor (wrapped first support index per axis) of a point in the box.
    #[inline(always)]
    pub fn anchor(&self, pos: &[f64; 3]) -> [usize; 3] {
        let half = (self.p / 2) as i64;
        [0, 1, 2].map(|d| {
            let i0 = (pos[d] * self.inv_h[d]).floor() as i64;
            self.local_anchor(d, i0 - half + 1)
        })
    }

    /// Weights of all `P` bins at offset `delta in [0, 1)` (Horner over all bins at once).
    #[inline(always)]
    pub fn weights(&self, delta: T, out: &mut [T; MAX_P]) {
        horner_bins(&self.coeffs, self.degree, self.p, delta, out);
    }

    /// Derivatives in `delta` of the weights of all `P` bins at offset `delta in [0, 1)`.
    #[inline(always)]
    pub fn derivative_weights(&self, delta: T, out: &mut [T; MAX_P]) {
        horner_bins(&self.dcoeffs, self.degree, self.p, delta, out);
    }

    /// The periodic run of `P` x-indices starting at `ax`: `(start, len1)`; indices
    /// `start..start+len1` take weights `0..len1`, indices `0..P-len1` weights `len1..P`.
    #[inline(always)]
    pub fn x_run(&self, ax: usize) -> (usize, usize) {
        let mx = self.layout.global[0];
        (ax, self.p.min(mx - ax))
    }
}

/// All `p` bins of a piecewise polynomial (`coeffs[k * p + l]` multiplies `z^k` in bin `l`) at
/// `z = 2 delta - 1`, by one Horner loop over the bins at once.
#[inline(always)]
fn horner_bins<T: Real>(coeffs: &[T], degree: usize, p: usize, delta: T, out: &mut [T; MAX_P]) {
    let z = delta + delta - T::ONE;
    let out = &mut out[..p];
    out.copy_from_slice(&coeffs[degree * p..(degree + 1) * p]);
    for k in (0..degree).rev() {
        let c = &coeffs[k * p..(k + 1) * p];
        for (o, &ck) in out.iter_mut().zip(c) {
            *o = o.mul_add(z, ck);
        }
    }
}

/// [`horner_bins`] for `P` bins known at compile time.
#[allow(clippy::needless_range_loop)] // unrolled over P with two arrays
#[inline(always)]
fn horner_fixed<T: Real, const P: usize>(coeffs: &[T], degree: usize, delta: T, out: &mut [T; P]) {
    let z = delta + delta - T::ONE;
    let coeffs = &coeffs[..(degree + 1) * P];
    // a local accumulator (registers), written out once
    let mut acc: [T; P] = std::array::from_fn(|l| coeffs[degree * P + l]);
    for k in (0..degree).rev() {
        let c = &coeffs[k * P..(k + 1) * P];
        for l in 0..P {
            acc[l] = acc[l].mul_add(z, c[l]);
        }
    }
    *out = acc;
}

/// Components P2G spreads per source (see `Kernel::grid_components`) from its packed densities
/// `packed` (`Kernel::density_width`, `[q]`, `[f]`, `[q, n]` or `[f, q, n]`): Laplace `[q]`;
/// Stokeslet `[f]`; stresslet the symmetric part of `q (x) n`,
/// `[S11, S22, S33, S12, S13, S23]` with `Sab = (q_a n_b + q_b n_a)/2`; Stokes `[f, S]`.
#[inline]
pub fn grid_density<T: Real>(kernel: Kernel, packed: &[T], out: &mut [T; 9]) {
    let sym = |d: &[T], out: &mut [T]| {
        let (q, n) = (&d[..3], &d[3..6]);
        let half = T::from_f64(0.5);
        out[0] = q[0] * n[0];
        out[1] = q[1] * n[1];
        out[2] = q[2] * n[2];
        out[3] = half * (q[0] * n[1] + q[1] * n[0]);
        out[4] = half * (q[0] * n[2] + q[2] * n[0]);
        out[5] = half * (q[1] * n[2] + q[2] * n[1]);
    };
    match kernel {
        Kernel::Laplace => out[0] = packed[0],
        Kernel::Stokeslet => out[..3].copy_from_slice(&packed[..3]),
        Kernel::Stresslet => sym(&packed[..6], &mut out[..6]),
        Kernel::Stokes => {
            out[..3].copy_from_slice(&packed[..3]);
            sym(&packed[3..9], &mut out[3..9]);
        }
    }
}
