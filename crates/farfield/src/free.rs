//! The far field with free directions (0P, 1P, 2P): the extended, zero-padded grid and the
//! kernel tables precomputed on an upsampled grid (Vico, Greengard & Ferrando 2016; the
//! derivation is in docs/design.md, "Free directions").
//!
//! Along a free axis the box `[0, L)` is sampled at `g h`, `h = L / M`. The window of a particle
//! reaches `P/2 - 1` points below index 0 and `P/2` above `M - 1`, so the data occupy `M_ext =
//! M + P - 1` points, data index `g + o`, `o = P/2 - 1`. The far field is the aperiodic
//! convolution of the spread grid with the kernel's discrete samples `K_n`, `|n| < M_ext`,
//! done as a circular convolution on `N >= 2 M_ext` points (Hockney & Eastwood): the data
//! zero-padded to `N`, one DFT, a multiplication by the DFT of the samples (the *table*), one
//! inverse DFT, the first `M_ext` points kept.
//!
//! The samples are those of the band-limited far-field kernel `K = F^-1[G^F(k) / W^(k)^2]`,
//! which along free directions is not periodic and whose transform is singular at `k = 0`.
//! They are computed at plan time, per periodic mode `k_p`, from the *truncated* kernel
//! ([`crate::truncated`]): `G_R` equals `G` where the free distance is below `R`, and its
//! transform is smooth, so sampling it on a free grid of `N_up` points (period `N_up h`) and
//! transforming back gives `K_n` exactly up to aliases from `N_up h` away. With the radius
//! `R >= D + delta + P h` (`D` the data's diameter along the free axes, `delta` the reach of the
//! screening) and `N_up >= M_ext - 1 + (R + delta + P h) / h`, the samples `|n| < M_ext` are
//! exact to the screening's tail. Each kernel component is even or odd along each free axis, so both
//! transforms are DCT-I or DST-I of the half grids: the table of one component is
//!
//! `T(k_p, k'_f) = c prod_{d free} (1/N_up,d) [R2R_N o restrict_{M_ext} o R2R_N_up] f(k_p, .)`
//!
//! with `f = m(k) S_R(k) sigma(k) / prod_d W^(k_d h_d)^2` (`m` the component's polynomial,
//! `S_R` the truncated harmonic or biharmonic kernel, `sigma` the screening, `c` its unit
//! factor: 1, `i` or `-i`), and CNV multiplies the spectrum by the tables: `v^ = T phi^ / V_h`,
//! `V_h` the volume of the padded period. The Laplace potential's zero mode `phi^(0)` is first
//! set to its exact value `Q W^(0)^3` ([`FreeCnv::zero_mode`]): `T(0)`, the kernel integrated
//! over the truncation ball, would amplify the window's aliasing in the spread grid's zero mode
//! into a constant in every potential.

use std::f64::consts::PI;

use parki_comm::Comm;
use parki_core::{Error, Kernel, Par, Real, Result};
use parki_decomp::{fft_friendly_size, fft_line_work, GridLayout, SpectralBlock};
use parki_fft3d::{AxisSpec, LocalR2r, ModeClass, R2rKind};
use rayon::prelude::{
    IndexedParallelIterator, IntoParallelIterator, IntoParallelRefIterator, ParallelIterator, ParallelSliceMut,
};

use crate::fold::{fold_block, mirror_sign, AxisFold};
use crate::free_split;
use crate::truncated::{truncated, ModeBessel, Scalar};
use crate::window::KaiserBessel;

/// The grid of a box with free axes (every axis for 0P).
#[derive(Clone, Debug, PartialEq)]
pub struct FreeGrid {
    /// Periodic axes.
    pub periodic: [bool; 3],
    /// Points over the box per axis (`h = L / M`).
    pub grid: [usize; 3],
    /// Data points per axis: `M + P - 1` on free axes, `M` on periodic ones.
    pub data: [usize; 3],
    /// Data index of grid index 0: `P/2 - 1` on free axes, 0 on periodic ones.
    pub offset: [usize; 3],
    /// Transform length per axis: the padded `N >= 2 M_ext` on free axes, `M` on periodic ones.
    pub fft_len: [usize; 3],
    /// Plan-time upsampled length on free axes (`M` on periodic ones).
    pub upsampled: [usize; 3],
    /// Padding per periodic mode (1P along `x`; docs/design.md, "Padding per periodic mode"):
    /// the `y` and `z` transform lengths per class of `x` spectral slots, each even, from `data`
    /// to `fft_len` (empty: every mode on `fft_len`). The transforms ([`parki_fft3d::DistFft::
    /// with_mode_classes`]) and tables ([`FreeCnv`]) run it; no rule picks shorter lengths yet.
    pub classes: Vec<ModeClass>,
    /// Truncation radius `R` of the kernels (distance along the free axes).
    pub radius: f64,
    /// Grid spacing per axis.
    pub h: [f64; 3],
}

impl FreeGrid {
    /// The grid of `M = grid` points per axis with spacing `h`, window support `p`, splitting
    /// `xi`, for a relative tolerance `tol` (sets the screening margin).
    pub fn new(periodic: [bool; 3], grid: [usize; 3], h: [f64; 3], p: usize, xi: f64, tol: f64) -> Self {
        let mut data = grid;
        let mut offset = [0; 3];
        let mut fft_len = grid;
        for d in 0..3 {
            if !periodic[d] {
                data[d] = grid[d] + p - 1;
                offset[d] = p / 2 - 1;
                fft_len[d] = fft_friendly_size(2 * data[d]);
            }
        }
        // the data's diameter along the free axes, and the screening's reach: the Gaussian tail
        // e^{-xi^2 delta^2} small against the tolerance over the truncation layer's weight
        let diameter =
            (0..3).filter(|&d| !periodic[d]).map(|d| ((data[d] - 1) as f64 * h[d]).powi(2)).sum::<f64>().sqrt();
        let layer = 1.0 + (xi * diameter).powi(4);
        let delta = ((1e3 * layer / tol.max(1e-16)).ln()).sqrt() / xi;
        let hmin = (0..3).filter(|&d| !periodic[d]).map(|d| h[d]).fold(f64::INFINITY, f64::min);
        let core = p as f64 * hmin;
        let radius = diameter + delta + core;
        let mut upsampled = grid;
        for d in 0..3 {
            if !periodic[d] {
                let need = (data[d] - 1) as f64 + (radius + delta + core) / h[d];
                upsampled[d] = fft_friendly_size(need.ceil() as usize + 2);
            }
        }
        Self { periodic, grid, data, offset, fft_len, upsampled, radius, h, classes: Vec::new() }
    }

    /// Every `x` spectral slot's class (covering them all; one class of `fft_len` without
    /// padding per periodic mode).
    pub fn mode_classes(&self) -> Vec<ModeClass> {
        ModeClass::cover(&self.classes, self.grid[0] / 2 + 1, [self.fft_len[1], self.fft_len[2]])
    }

    /// Transform work of one component, `sum over passes of lines x fft_line_work(length)`
    /// (`length log2 length`, more on slow lengths: [`fft_line_work`]): `x` over the data rows,
    /// `y` over the data `z` planes, then `z` over everything (with padding per periodic mode
    /// each class's lines on its lengths). Lines along `y` and `z` are counted per real of the
    /// `x` axis (`M_x` for its `M_x/2 + 1` complex slots), as the periodic grid's `N log2 N`.
    pub fn fft_work(&self) -> f64 {
        let (n, d) = (self.fft_len.map(|v| v as f64), self.data.map(|v| v as f64));
        let w = self.fft_len.map(fft_line_work);
        let x = d[1] * d[2] * w[0];
        if self.classes.is_empty() {
            return x + n[0] * d[2] * w[1] + n[0] * n[1] * w[2];
        }
        let per_slot = n[0] / (self.grid[0] / 2 + 1) as f64;
        x + self
            .mode_classes()
            .iter()
            .map(|c| {
                let lines = c.slots.len() as f64 * per_slot;
                lines * (d[2] * fft_line_work(c.len[0]) + c.len[0] as f64 * fft_line_work(c.len[1]))
            })
            .sum::<f64>()
    }

    /// Complex spectral elements CNV multiplies (the half padded grid; with padding per
    /// periodic mode each class's slots on its lengths).
    pub fn spectral_elements(&self) -> f64 {
        self.mode_classes()
            .iter()
            .map(|c| {
                let x = if self.periodic[0] { c.slots.len() } else { self.fft_len[0] / 2 + 1 };
                (x * c.len[0] * c.len[1]) as f64
            })
            .sum()
    }

    /// The free axes.
    pub fn free_axes(&self) -> Vec<usize> {
        (0..3).filter(|&d| !self.periodic[d]).collect()
    }

    /// The distributed transform's axes: periodic DFTs and the zero-padded free ones.
    pub fn axes(&self) -> [AxisSpec; 3] {
        [0, 1, 2].map(|d| {
            if self.periodic[d] {
                AxisSpec::periodic(self.grid[d])
            } else {
                AxisSpec::padded_dft(self.data[d], self.fft_len[d])
            }
        })
    }

    /// Volume of one period of the padded grid, `V_h = prod_d N_d h_d` (`L_d` on periodic
    /// axes).
    pub fn padded_volume(&self) -> f64 {
        (0..3).map(|d| self.fft_len[d] as f64 * self.h[d]).product()
    }

    /// Points of the padded grid.
    pub fn padded_points(&self) -> usize {
        self.fft_len.iter().product()
    }

    /// Estimated seconds on one thread to make the kernel tables of `kernel` (and the field) at
    /// plan time ([`FreeCnv::new`]). Per periodic mode made (one in 0P), the scalar kernel is
    /// evaluated on the upsampled free half grid (`U` points), every representative component
    /// (those that are not images of another under a permutation of equal free axes) fills and
    /// transforms it, and every table is written from the padded half grid (`P` points):
    ///
    /// `t = a modes U + b modes n_representatives U + c modes n_tables P`
    ///
    /// with `(a, b, c)` = (15.4, 20.7, 11.1) ns in 0P (the per-axis construction of
    /// `crate::free_split`, the radial kernel tabulated) and (53.0, 57.6, 0) ns with periodic
    /// axes (per mode a 1-D or 2-D problem whose scalar kernel needs Bessel functions per
    /// point), fitted to seventeen plans of every kernel (grids 64^3..300^3; 0P, 1P and 2P) on
    /// one thread of the machine of docs/performance.md, each within 0.85x..1.13x of its
    /// measured time (docs/performance.md §7.7). On 2 threads the tables took 1.5-1.9x less, the
    /// evaluation's stages about as much, so the one-thread figures compare with the
    /// evaluation's one-thread cost. The plan costs 0.2-1 evaluations: it matters where a
    /// method is chosen for a single evaluation.
    pub fn plan_seconds(&self, kernel: Kernel, field: bool) -> f64 {
        let work = self.plan_work(kernel, field);
        let ns = if self.periodic.iter().any(|&q| q) { PLAN_PERIODIC_NS } else { PLAN_FREE_SPACE_NS };
        1e-9 * work.iter().zip(ns).map(|(w, c)| w * c).sum::<f64>()
    }

    /// The work [`plan_seconds`](Self::plan_seconds) counts: `[modes U, modes n_representatives
    /// U, modes n_tables P]`, the periodic modes those whose tables are made (one in 0P; with
    /// periodic axes the half axis `x`'s and the folded `y`'s and `z`'s, [`crate::fold`]).
    pub fn plan_work(&self, kernel: Kernel, field: bool) -> [f64; 3] {
        let comps = components(kernel, field);
        let reps = representatives(&symmetry_images(&comps, self, &self.free_axes())).len() as f64;
        let modes: f64 = (0..3).filter(|&d| self.periodic[d]).map(|d| (self.grid[d] / 2 + 1) as f64).product();
        let half = |len: &[usize; 3]| -> f64 {
            (0..3).filter(|&d| !self.periodic[d]).map(|d| (len[d] / 2 + 1) as f64).product::<f64>()
        };
        let (u, p) = (half(&self.upsampled), half(&self.fft_len));
        [modes * u, modes * reps * u, modes * comps.len() as f64 * p]
    }
}

/// [`FreeGrid::plan_seconds`] in 0P: ns per upsampled point (the scalar kernel), per
/// representative and upsampled point, per table and padded point.
const PLAN_FREE_SPACE_NS: [f64; 3] = [15.4, 20.7, 11.1];

/// [`FreeGrid::plan_seconds`] with periodic axes, per periodic mode made: as
/// [`PLAN_FREE_SPACE_NS`].
const PLAN_PERIODIC_NS: [f64; 3] = [53.0, 57.6, 0.0];

/// One kernel component: `c m(k) S(k) sigma(k)`; the tables store the real `m S sigma` part and
/// CNV applies the unit `c` (1 for Laplace and the Stokeslet, `-i` for the Laplace field, `i`
/// for the stresslet). The screening `sigma` Gaussian
/// (`e^{-k^2/4xi^2}`) with the harmonic `S` (Laplace), Hasimoto's (`(1 + k^2/4xi^2)
/// e^{-k^2/4xi^2}`) with the biharmonic one (Stokes).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Component {
    pub(crate) scalar: Scalar,
    /// The polynomial.
    pub(crate) poly: Poly,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Poly {
    /// 1.
    One,
    /// `k_a`.
    K(usize),
    /// `k^2 d_ij - k_i k_j`.
    Stokeslet(usize, usize),
    /// `k^2 (k_l d_ij + k_i d_jl + k_j d_il) - 2 k_i k_j k_l`.
    Stresslet(usize, usize, usize),
}

impl Poly {
    pub(crate) fn eval(self, k: [f64; 3]) -> f64 {
        let k2 = k[0] * k[0] + k[1] * k[1] + k[2] * k[2];
        let d = |a: usize, b: usize| if a == b { 1.0 } else { 0.0 };
        match self {
            Poly::One => 1.0,
            Poly::K(a) => k[a],
            Poly::Stokeslet(i, j) => k2 * d(i, j) - k[i] * k[j],
            Poly::Stresslet(i, j, l) => {
                k2 * (k[l] * d(i, j) + k[i] * d(j, l) + k[j] * d(i, l)) - 2.0 * k[i] * k[j] * k[l]
            }
        }
    }

    /// Whether the polynomial is odd in `k_a`.
    pub(crate) fn odd(self, a: usize) -> bool {
        let count = |idx: &[usize]| idx.iter().filter(|&&i| i == a).count() % 2 == 1;
        match self {
            Poly::One => false,
            Poly::K(b) => b == a,
            Poly::Stokeslet(i, j) => i != j && count(&[i, j]),
            Poly::Stresslet(i, j, l) => count(&[i, j, l]),
        }
    }
}

/// For every component, `(r, perm)`: the earliest component `r` whose tables give this one's
/// with free slot `ax` read as `r`'s slot `perm[ax]` (`r` = itself and the identity where none
/// does). A permutation may only exchange free axes with the same grid (upsampled and padded
/// lengths, data points, spacing); the polynomials must agree at the permuted wave vectors
/// (checked at three wave vectors, to round-off) and the parities slot by slot.
fn symmetry_images(comps: &[Component], free: &FreeGrid, fa: &[usize]) -> Vec<(usize, [usize; 3])> {
    let nfree = fa.len();
    let same = |a: usize, b: usize| {
        let (da, db) = (fa[a], fa[b]);
        free.upsampled[da] == free.upsampled[db]
            && free.fft_len[da] == free.fft_len[db]
            && free.data[da] == free.data[db]
            && free.h[da] == free.h[db]
    };
    // the permutations of the free slots (slot -> slot) among equal axes
    const PERMUTATIONS: [[usize; 3]; 6] = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]];
    let perms: Vec<[usize; 3]> =
        PERMUTATIONS.into_iter().filter(|perm| (0..nfree).all(|ax| perm[ax] < nfree && same(ax, perm[ax]))).collect();
    let probes = [[0.37, -1.21, 2.03], [1.7, 0.45, -0.83], [-0.29, 2.6, 1.13]];
    let mut images: Vec<(usize, [usize; 3])> = Vec::with_capacity(comps.len());
    for (ci, c) in comps.iter().enumerate() {
        let found = (0..ci).filter(|&r| images[r].0 == r && comps[r].scalar == c.scalar).find_map(|r| {
            perms
                .iter()
                .copied()
                .find(|perm| {
                    // k' with k'_{fa[perm[ax]]} = k_{fa[ax]}: the representative's wave vector
                    (0..nfree).all(|ax| c.poly.odd(fa[ax]) == comps[r].poly.odd(fa[perm[ax]]))
                        && probes.iter().all(|&k| {
                            let mut kr = k;
                            for ax in 0..nfree {
                                kr[fa[perm[ax]]] = k[fa[ax]];
                            }
                            let (vc, vr) = (c.poly.eval(k), comps[r].poly.eval(kr));
                            (vc - vr).abs() <= 1e-12 * (1.0 + vc.abs())
                        })
                })
                .map(|perm| (r, perm))
        });
        images.push(found.unwrap_or((ci, [0, 1, 2])));
    }
    images
}

/// The components [`symmetry_images`] maps to themselves: those transformed.
fn representatives(images: &[(usize, [usize; 3])]) -> Vec<usize> {
    (0..images.len()).filter(|&c| images[c].0 == c).collect()
}

/// The stresslet's ten components `T_ijl`, `i <= j <= l`.
const STRESSLET: [(usize, usize, usize); 10] =
    [(0, 0, 0), (0, 0, 1), (0, 0, 2), (0, 1, 1), (0, 1, 2), (0, 2, 2), (1, 1, 1), (1, 1, 2), (1, 2, 2), (2, 2, 2)];

/// The Stokeslet's six components `(i, j)`, `i <= j`, in the order of the tables.
const STOKESLET: [(usize, usize); 6] = [(0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2)];

fn components(kernel: Kernel, field: bool) -> Vec<Component> {
    let mut v = Vec::new();
    match kernel {
        Kernel::Laplace => {
            v.push(Component { scalar: Scalar::Harmonic, poly: Poly::One });
            if field {
                for a in 0..3 {
                    v.push(Component { scalar: Scalar::Harmonic, poly: Poly::K(a) });
                }
            }
        }
        _ => {
            if kernel.needs_forces() {
                for (i, j) in STOKESLET {
                    v.push(Component { scalar: Scalar::Biharmonic, poly: Poly::Stokeslet(i, j) });
                }
            }
            if kernel.needs_dipoles() {
                for (i, j, l) in STRESSLET {
                    v.push(Component { scalar: Scalar::Biharmonic, poly: Poly::Stresslet(i, j, l) });
                }
            }
        }
    }
    v
}

/// Number of kernel tables of `kernel` (the potential only).
pub fn table_count(kernel: Kernel, field: bool) -> usize {
    components(kernel, field).len()
}

/// Index of `T_ijl` (any order of the indices) in [`STRESSLET`].
fn stresslet_index(mut idx: [usize; 3]) -> usize {
    idx.sort_unstable();
    STRESSLET.iter().position(|&(i, j, l)| [i, j, l] == idx).unwrap_or(0)
}

/// The symmetric `S` components `[S11, S22, S33, S12, S13, S23]` with their multiplicity in
/// `sum_jl T_ijl S_jl`.
const S_PAIRS: [(usize, usize, f64); 6] =
    [(0, 0, 1.0), (1, 1, 1.0), (2, 2, 1.0), (0, 1, 2.0), (0, 2, 2.0), (1, 2, 2.0)];

/// [`STOKESLET`] index of `(i, j)`.
const STOKESLET_INDEX: [[usize; 3]; 3] = [[0, 3, 4], [3, 1, 5], [4, 5, 2]];

/// CNV with free directions: the precomputed tables on this rank's spectral block, stored on
/// its folded block ([`crate::fold`]).
#[derive(Debug)]
pub struct FreeCnv<T> {
    kernel: Kernel,
    field: bool,
    block: SpectralBlock,
    /// Per component, bit 0 set where it is odd along `y`, bit 1 along `z`.
    parity: [u32; 16],
    /// The tables of each class of periodic modes ([`FreeGrid::classes`]; one part without
    /// padding per periodic mode).
    parts: Vec<Part<T>>,
    /// `stress[i][m]`: the table of `T_i S_pairs[m]`.
    stress: [[usize; 6]; 3],
    /// `W^(0)^3`, the zero mode of a unit charge's spread window without aliasing, on the rank
    /// whose block holds `k = 0` of the Laplace potential (see [`FreeCnv::apply`]).
    zero_mode: Option<f64>,
}

/// The tables of one class of periodic modes: the spectral slots `x` (global start, count) of
/// the block, over which the free axes' transforms have lengths `fft_len` (`y` and `z`); the
/// part covers the block's `y` slots below its `y` length and the `z` slots below its `z`
/// length.
#[derive(Debug)]
struct Part<T> {
    /// Local `x` slots of the block: first and count.
    x: (usize, usize),
    /// Local `y` and `z` slots covered (from 0).
    yz: [usize; 2],
    /// The part's axes as the tables store them (`y` and `z` folded on the part's lengths).
    fold: [AxisFold; 3],
    /// Stored elements.
    elements: usize,
    /// `tables[c * elements + e]`: component `c` at stored element `e = (s_z n_y + s_y) n_x +
    /// s_x` (`n` the stored slots per axis), divided by the part's `V_h`.
    tables: Vec<T>,
}

/// How the 0P tables are made (with periodic axes always per mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Method {
    /// By the per-axis operators over the ranks ([`crate::free_split`]).
    Split,
    /// As a periodic mode of 1P and 2P: the 3-D transforms of the whole upsampled grid on every
    /// rank ([`FreeCnv::new_whole_grid`]).
    PerMode,
}

/// Per-axis values of the upsampled free grid or the periodic modes.
pub(crate) struct AxisModes {
    /// Wave numbers.
    pub(crate) k: Vec<f64>,
    /// `1 / W^(k h)^2` (0 at the Nyquist mode).
    pub(crate) w: Vec<f64>,
}

impl<T: Real> FreeCnv<T> {
    /// The tables of `kernel` (and, for Laplace with `field`, of the field `-grad u`) on the
    /// local spectral `block` of the padded grid of `free`, window `kb`, splitting `xi`, over
    /// `lengths` (the periodic axes' periods). `block` has the axes in the order `[x, y, z]` (x
    /// the real-to-complex axis).
    ///
    /// Collective over `comm` (each rank with its own block): in 0P the ranks make the tables
    /// together (`crate::free_split`); with periodic axes each rank makes the periodic modes of
    /// its block.
    ///
    /// # Errors
    /// When FFTW cannot plan the plan-time transforms.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        kernel: Kernel,
        field: bool,
        free: &FreeGrid,
        lengths: [f64; 3],
        kb: &KaiserBessel,
        xi: f64,
        block: &SpectralBlock,
        comm: &Comm,
        par: Par,
    ) -> Result<Self> {
        Self::build(kernel, field, free, lengths, kb, xi, block, comm, par, true, Method::Split)
    }

    /// [`FreeCnv::new`] as before the ranks shared 0P's tables: every rank transforms the whole
    /// upsampled grid (3-D transforms, as a periodic mode of 1P and 2P) and keeps its block. The
    /// baseline of `parki-bench-dist tables` and the tests' second construction.
    ///
    /// # Errors
    /// As [`FreeCnv::new`].
    #[allow(clippy::too_many_arguments)]
    pub fn new_whole_grid(
        kernel: Kernel,
        field: bool,
        free: &FreeGrid,
        lengths: [f64; 3],
        kb: &KaiserBessel,
        xi: f64,
        block: &SpectralBlock,
        par: Par,
    ) -> Result<Self> {
        Self::build(kernel, field, free, lengths, kb, xi, block, &Comm::single(), par, true, Method::PerMode)
    }

    /// [`FreeCnv::new`], with the components that are images of others under a permutation of
    /// equal free axes read from those (`symmetric`) or each transformed on its own, and 0P's
    /// tables made by `method`.
    #[allow(clippy::too_many_arguments)]
    fn build(
        kernel: Kernel,
        field: bool,
        free: &FreeGrid,
        lengths: [f64; 3],
        kb: &KaiserBessel,
        xi: f64,
        block: &SpectralBlock,
        comm: &Comm,
        par: Par,
        symmetric: bool,
        method: Method,
    ) -> Result<Self> {
        let comps = components(kernel, field);
        if free.free_axes().is_empty() {
            return Err(Error::Unsupported { what: "FreeCnv on a triply periodic box".into() });
        }
        let yz_parity: [u32; 16] = std::array::from_fn(|c| {
            comps.get(c).map_or(0, |c| u32::from(c.poly.odd(1)) | (u32::from(c.poly.odd(2)) << 1))
        });
        let stress = [0, 1, 2].map(|i| S_PAIRS.map(|(j, l, _)| stresslet_index([i, j, l])));
        let holds_zero = block.x.0 == 0 && block.y.0 == 0 && block.x.1 > 0 && block.y.1 > 0 && block.z > 0;
        let zero_mode = (kernel == Kernel::Laplace && holds_zero).then(|| kb.fourier(0.0).powi(3));
        if let Some(c) = free.classes.iter().find(|c| c.len.iter().any(|l| l % 2 == 1)) {
            // the tables are DCT-I/DST-I half grids of an even period
            return Err(Error::OutOfRange {
                field: "free.classes".into(),
                value: format!("{c:?}"),
                allowed: "even free-axis lengths".into(),
            });
        }
        let mut parts = Vec::new();
        if free.classes.is_empty() {
            let ranges = [block.x, block.y, (0, block.z)];
            let (fold, elements, tables) =
                Self::part(kernel, field, free, lengths, kb, xi, ranges, comm, par, symmetric, method)?;
            parts.push(Part { x: (0, block.x.1), yz: [block.y.1, block.z], fold, elements, tables });
        } else {
            // per class: its x slots of the block, the y slots of the block below its y length,
            // its z slots
            for c in free.mode_classes() {
                let x0 = c.slots.start.max(block.x.0);
                let x1 = c.slots.end.min(block.x.0 + block.x.1);
                let y1 = c.len[0].min(block.y.0 + block.y.1).saturating_sub(block.y.0);
                let z1 = c.len[1].min(block.z);
                if x0 >= x1 || y1 == 0 || z1 == 0 {
                    continue;
                }
                let class =
                    FreeGrid { fft_len: [free.fft_len[0], c.len[0], c.len[1]], classes: Vec::new(), ..free.clone() };
                let ranges = [(x0, x1 - x0), (block.y.0, y1), (0, z1)];
                let (fold, elements, tables) =
                    Self::part(kernel, field, &class, lengths, kb, xi, ranges, comm, par, symmetric, method)?;
                parts.push(Part { x: (x0 - block.x.0, x1 - x0), yz: [y1, z1], fold, elements, tables });
            }
        }
        Ok(Self { kernel, field, block: *block, parity: yz_parity, parts, stress, zero_mode })
    }

    /// The tables of the spectral slots `ranges` (global `(start, count)` per axis) of the padded
    /// grid of `free` (its `fft_len` the part's lengths): the folded axes, the stored elements
    /// and the tables.
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn part(
        kernel: Kernel,
        field: bool,
        free: &FreeGrid,
        lengths: [f64; 3],
        kb: &KaiserBessel,
        xi: f64,
        ranges: [(usize, usize); 3],
        comm: &Comm,
        par: Par,
        symmetric: bool,
        method: Method,
    ) -> Result<([AxisFold; 3], usize, Vec<T>)> {
        let comps = components(kernel, field);
        let fa = free.free_axes();
        let nfree = fa.len();
        let pa: Vec<usize> = (0..3).filter(|&d| free.periodic[d]).collect();
        let h = free.h;
        let two_pi = 2.0 * PI;
        let inv4xi2 = 1.0 / (4.0 * xi * xi);
        // periodic modes (user axes); x holds the half spectrum
        let periodic_modes = |d: usize, slots: &[usize]| -> AxisModes {
            let m = free.grid[d];
            let (k, w) = slots
                .iter()
                .map(|&i| {
                    if GridLayout::is_nyquist(i, m) {
                        return (0.0, 0.0);
                    }
                    let kd = two_pi * GridLayout::signed_mode(i, m) as f64 / lengths[d];
                    let wf = kb.fourier(kd * h[d]);
                    (kd, 1.0 / (wf * wf))
                })
                .unzip();
            AxisModes { k, w }
        };
        // the upsampled half grid of each free axis: j = 0..=N_up/2 (Nyquist zero)
        let up_modes = |d: usize| -> AxisModes {
            let nu = free.upsampled[d];
            let (k, w) = (0..=nu / 2)
                .map(|j| {
                    if 2 * j == nu {
                        return (0.0, 0.0);
                    }
                    let kd = two_pi * j as f64 / (nu as f64 * h[d]);
                    let wf = kb.fourier(kd * h[d]);
                    (kd, 1.0 / (wf * wf))
                })
                .unzip();
            AxisModes { k, w }
        };
        let up: Vec<AxisModes> = fa.iter().map(|&d| up_modes(d)).collect();
        // the slots stored of each axis of the block: the tables are made for those only
        // (crate::fold)
        let fold = fold_block(ranges, free.fft_len);
        let globals: [&[usize]; 3] = [fold[0].stored(), fold[1].stored(), fold[2].stored()];
        let local = [0, 1, 2].map(|d| fold[d].len());
        let elements = local.iter().product::<usize>();
        // periodic modes of the local block
        let pmodes: Vec<AxisModes> = pa.iter().map(|&d| periodic_modes(d, globals[d])).collect();
        // free-axis sizes of the half grids: even (DCT-I) and odd (DST-I)
        let half_up: Vec<usize> = fa.iter().map(|&d| free.upsampled[d] / 2).collect();
        let half_h: Vec<usize> = fa.iter().map(|&d| free.fft_len[d] / 2).collect();
        let dims_for = |half: &[usize], odd: &[bool]| -> Vec<usize> {
            half.iter().zip(odd).map(|(&n, &o)| if o { n - 1 } else { n + 1 }).collect()
        };
        // plans per parity pattern
        let parity = |c: &Component| -> Vec<bool> { fa.iter().map(|&d| c.poly.odd(d)).collect() };
        let mut patterns: Vec<Vec<bool>> = comps.iter().map(parity).collect();
        patterns.sort();
        patterns.dedup();
        let kinds = |odd: &[bool]| -> Vec<R2rKind> {
            odd.iter().map(|&o| if o { R2rKind::Dst1 } else { R2rKind::Dct1 }).collect()
        };
        // the transforms run one per (periodic mode, component) on the solver's threads; where
        // fewer of those than threads remain (free space: one mode), each on FFTW's threads too
        let tasks = pa.iter().map(|&d| local[d]).product::<usize>() * comps.len();
        let fftw_threads = match par {
            Par::Seq => 1,
            Par::Rayon(t) => (t / tasks.max(1)).max(1),
        };
        // per parity pattern: the plans, and per free axis the samples each padded half-grid
        // slot takes (`wrapped_samples`: |n| < M_ext, wrapped onto the padded period)
        let mut plans = Vec::new();
        for odd in &patterns {
            let p1 = LocalR2r::<f64>::with_threads(&dims_for(&half_up, odd), &kinds(odd), fftw_threads)?;
            let p2 = LocalR2r::<f64>::with_threads(&dims_for(&half_h, odd), &kinds(odd), fftw_threads)?;
            let wraps: Vec<Vec<Vec<(usize, f64)>>> =
                fa.iter().zip(odd).map(|(&d, &o)| wrapped_samples(free.data[d], free.fft_len[d], o)).collect();
            plans.push((odd.clone(), p1, p2, wraps));
        }
        // Components that are images of an earlier one under a permutation of equal free axes
        // (a cube in 0P: the Stokeslet's 22 and 33 of its 11, 13 and 23 of 12) read that one's
        // samples with the axes permuted instead of transforming their own: the function
        // transformed, `m(k) S(|k|) prod_a sigma_a(k_a) w_a(k_a)`, is the representative's at the
        // permuted wave vector, and the transforms commute with the permutation.
        let images = match symmetric {
            true => symmetry_images(&comps, free, &fa),
            false => (0..comps.len()).map(|c| (c, [0, 1, 2])).collect(),
        };
        // the screening e^{-k^2/4xi^2} and the window factors are products over the axes: per
        // free axis `e^{-k_a^2/4xi^2} / W^(k_a h)^2`, and each periodic mode's part
        let sw: Vec<Vec<f64>> =
            up.iter().map(|m| m.k.iter().zip(&m.w).map(|(&k, &w)| (-k * k * inv4xi2).exp() * w).collect()).collect();
        let scale: f64 = fa.iter().map(|&d| 1.0 / free.upsampled[d] as f64).product::<f64>() / free.padded_volume();
        let mut tables = vec![T::ZERO; comps.len() * elements];
        if nfree == 3 && method == Method::Split {
            let spec = free_split::Spec { comps: &comps, images: &images, free, up: &up, sw: &sw, inv4xi2, scale };
            free_split::tables(&spec, comm, ranges, par, &mut tables)?;
            return Ok((fold, elements, tables));
        }
        // the upsampled free half grid
        let up_dims: Vec<usize> = half_up.iter().map(|&n| n + 1).collect();
        let up_points: usize = up_dims.iter().product();
        let radius = free.radius;
        // every periodic mode of the block: its local indices per periodic axis
        let pcounts: Vec<usize> = pa.iter().map(|&d| local[d]).collect();
        let nmodes: usize = pcounts.iter().product();
        let ncomp = comps.len();
        let fa_ref = &fa;
        // local indices along the periodic axes of periodic mode `mode` (user axes)
        let mode_index = |mode: usize| -> [usize; 3] {
            let mut rem = mode;
            let mut l = [0usize; 3];
            for (a, &d) in pa.iter().enumerate() {
                l[d] = rem % pcounts[a];
                rem /= pcounts[a];
            }
            l
        };
        // In 0P (one mode, every axis free) each component's entries are written straight into
        // its table (the same order); with periodic axes each mode's are scattered after.
        let direct = nfree == 3;
        let tables_per_mode: Vec<(usize, Vec<Vec<T>>)> = {
            let work = |mode: usize, direct: Option<&mut [T]>| -> (usize, Vec<Vec<T>>) {
                // this mode's periodic wave vector and window factor
                let lidx = mode_index(mode);
                let mut kp = [0.0; 3];
                let mut wp = 1.0;
                for (a, &d) in pa.iter().enumerate() {
                    kp[d] = pmodes[a].k[lidx[d]];
                    wp *= pmodes[a].w[lidx[d]];
                }
                if wp == 0.0 {
                    return (mode, vec![Vec::new(); ncomp]);
                }
                let kappa = (kp[0] * kp[0] + kp[1] * kp[1] + kp[2] * kp[2]).sqrt();
                let bessel = ModeBessel::new(kappa * radius);
                // the scalar kernels times screening and window at every upsampled point
                let need_h = comps.iter().any(|c| c.scalar == Scalar::Harmonic);
                let need_b = comps.iter().any(|c| c.scalar == Scalar::Biharmonic);
                // the wave vector (periodic part kp) of the upsampled free point `idx`
                let full_k = |idx: &[usize; 3]| -> [f64; 3] {
                    let mut k = kp;
                    for (a, &d) in fa_ref.iter().enumerate() {
                        k[d] = up[a].k[idx[a]];
                    }
                    k
                };
                let mode_factor = (-kappa * kappa * inv4xi2).exp() * wp;
                let scalar_table = |which: Scalar| -> Vec<f64> {
                    let mut s = vec![0.0; up_points];
                    fill_c_order(&mut s, &up_dims, par, |idx| {
                        let mut g = mode_factor;
                        let mut kf2 = 0.0;
                        for a in 0..nfree {
                            g *= sw[a][idx[a]];
                            kf2 += up[a].k[idx[a]] * up[a].k[idx[a]];
                        }
                        if g == 0.0 {
                            return 0.0;
                        }
                        let kfn = kf2.sqrt();
                        let k2 = kappa * kappa + kf2;
                        let t = truncated(which, nfree, kappa, kfn, radius, bessel) * g;
                        match which {
                            Scalar::Harmonic => t,
                            Scalar::Biharmonic => t * (1.0 + k2 * inv4xi2),
                        }
                    });
                    s
                };
                let s_h = if need_h { scalar_table(Scalar::Harmonic) } else { Vec::new() };
                let s_b = if need_b { scalar_table(Scalar::Biharmonic) } else { Vec::new() };
                // the padded half-grid samples of a representative component (see `images`)
                let transformed = |c: &Component| -> Vec<f64> {
                    let odd = parity(c);
                    let (_, p1, p2, wraps) = plans.iter().find(|(o, ..)| *o == odd).expect("planned pattern");
                    let d1 = p1.dims().to_vec();
                    let d2 = p2.dims().to_vec();
                    let base = match c.scalar {
                        Scalar::Harmonic => &s_h,
                        Scalar::Biharmonic => &s_b,
                    };
                    // fill the first array: index per axis i -> j = i (even) or i + 1 (odd)
                    let n1: usize = d1.iter().product();
                    let mut a1 = vec![0.0; n1];
                    let shift: [usize; 3] = std::array::from_fn(|ax| usize::from(ax < nfree && odd[ax]));
                    let up_strides = c_strides(&up_dims);
                    fill_c_order(&mut a1, &d1, par, |i| {
                        let js: [usize; 3] = std::array::from_fn(|ax| i[ax] + shift[ax]);
                        let e: usize = (0..nfree).map(|ax| js[ax] * up_strides[ax]).sum();
                        c.poly.eval(full_k(&js)) * base[e]
                    });
                    p1.execute(&mut a1);
                    // restrict to |n| < M_ext, wrap onto the padded period (with padding per
                    // periodic mode shorter than 2 M_ext: the samples n and n + N add), and
                    // transform on the padded half grid
                    let n2: usize = d2.iter().product();
                    let mut a2 = vec![0.0; n2];
                    let s1 = c_strides(&d1);
                    fill_c_order(&mut a2, &d2, par, |ns| {
                        // array index li holds sample n = li (+ 1 on odd axes) in both arrays
                        let mut sum = 0.0;
                        match nfree {
                            1 => {
                                for &(i, s) in &wraps[0][ns[0]] {
                                    sum += s * a1[i * s1[0]];
                                }
                            }
                            2 => {
                                for &(i, s) in &wraps[0][ns[0]] {
                                    for &(j, t) in &wraps[1][ns[1]] {
                                        sum += s * t * a1[i * s1[0] + j * s1[1]];
                                    }
                                }
                            }
                            _ => {
                                for &(i, s) in &wraps[0][ns[0]] {
                                    for &(j, t) in &wraps[1][ns[1]] {
                                        for &(k, u) in &wraps[2][ns[2]] {
                                            sum += s * t * u * a1[i * s1[0] + j * s1[1] + k * s1[2]];
                                        }
                                    }
                                }
                            }
                        }
                        sum
                    });
                    p2.execute(&mut a2);
                    a2
                };
                let reps = representatives(&images);
                let samples: Vec<Vec<f64>> = match par {
                    Par::Seq => reps.iter().map(|&r| transformed(&comps[r])).collect(),
                    Par::Rayon(_) => reps.par_iter().map(|&r| transformed(&comps[r])).collect(),
                };
                let one = |ci: usize, t: &mut [T]| {
                    let c = &comps[ci];
                    let odd = parity(c);
                    let (r, perm) = images[ci];
                    let a2 = &samples[reps.iter().position(|&x| x == r).expect("a representative")];
                    // the representative's array: its dims and strides; slot `ax` of this
                    // component is slot `perm[ax]` of the representative's
                    let (_, _, p2, _) = plans.iter().find(|(o, ..)| *o == parity(&comps[r])).expect("planned pattern");
                    let s2r = c_strides(p2.dims());
                    let s2: Vec<usize> = (0..nfree).map(|ax| s2r[perm[ax]]).collect();
                    // the local entries of this mode: every local free slot, mirrored into the
                    // half grid; per free axis and local slot its offset in `a2`, and its sign
                    // (0 where an odd table vanishes)
                    let mirror: Vec<Vec<(usize, f64)>> = (0..nfree)
                        .map(|ax| {
                            let d = fa[ax];
                            let nn = free.fft_len[d];
                            (0..local[d])
                                .map(|l| {
                                    let j = globals[d][l];
                                    let (jm, neg) = if j <= nn / 2 { (j, false) } else { (nn - j, true) };
                                    // the Nyquist slot is kept: the circular convolution is exact
                                    // only with every mode of the samples' transform (odd tables
                                    // vanish there)
                                    if !odd[ax] {
                                        (jm * s2[ax], 1.0)
                                    } else if jm == 0 || 2 * jm == nn {
                                        (0, 0.0)
                                    } else {
                                        ((jm - 1) * s2[ax], if neg { -1.0 } else { 1.0 })
                                    }
                                })
                                .collect()
                        })
                        .collect();
                    // C order over the free axes reversed: the first free axis fastest
                    let dims_rev: Vec<usize> = fa.iter().rev().map(|&d| local[d]).collect();
                    fill_c_order(t, &dims_rev, par, |idx| {
                        let (mut src, mut sign) = (0, scale);
                        for (p, &l) in idx.iter().take(nfree).enumerate() {
                            let (off, s) = mirror[nfree - 1 - p][l];
                            src += off;
                            sign *= s;
                        }
                        if sign == 0.0 {
                            T::ZERO
                        } else {
                            T::from_f64(sign * a2[src])
                        }
                    });
                };
                if let Some(tables) = direct {
                    match par {
                        Par::Seq => tables.chunks_mut(elements).enumerate().for_each(|(ci, t)| one(ci, t)),
                        Par::Rayon(_) => tables.par_chunks_mut(elements).enumerate().for_each(|(ci, t)| one(ci, t)),
                    }
                    return (mode, Vec::new());
                }
                let count = local_free_count(&fa, &local);
                let fill = |ci: usize| {
                    let mut t = vec![T::ZERO; count];
                    one(ci, &mut t);
                    t
                };
                let out = match par {
                    Par::Seq => (0..ncomp).map(fill).collect(),
                    Par::Rayon(_) => (0..ncomp).into_par_iter().map(fill).collect(),
                };
                (mode, out)
            };
            if direct {
                vec![work(0, Some(&mut tables))]
            } else {
                match par {
                    Par::Seq => (0..nmodes).map(|m| work(m, None)).collect(),
                    Par::Rayon(_) => (0..nmodes).into_par_iter().map(|m| work(m, None)).collect(),
                }
            }
        };
        // with periodic axes: scatter each mode's entries into [comp][z][y][x] of the block
        for (mode, per_comp) in tables_per_mode {
            if per_comp.iter().all(Vec::is_empty) {
                continue;
            }
            let lidx = mode_index(mode);
            let mut q = 0;
            for_each_local_free(&fa, &local, |lf| {
                let mut l = lidx;
                for &d in &fa {
                    l[d] = lf[d];
                }
                let e = (l[2] * local[1] + l[1]) * local[0] + l[0];
                for (c, t) in per_comp.iter().enumerate() {
                    tables[c * elements + e] = t[q];
                }
                q += 1;
            });
        }
        Ok((fold, elements, tables))
    }

    /// The exact zero mode of a unit charge's spread grid, `W^(0)^3` (`None` for kernels other
    /// than Laplace and on ranks whose spectral block does not hold `k = 0`).
    ///
    /// The spread grid's zero mode is `sum_j q_j prod_d sum_g W(g - y_jd)`: the window's
    /// partition of unity `sum_g W(g - y) = W^(0) + sum_{m != 0} W^(2 pi m) e^{2 pi i m y}`
    /// (Poisson summation) varies with the source's offset `y` in its cell by the window's
    /// aliasing, `|W^(2 pi)/W^(0)|` (about `1e-6` at `P = 6`). In a periodic box the zero mode
    /// is dropped; along free axes the truncated kernel's table holds it with the weight of
    /// the whole truncation ball (`2 pi R^2` in 0P, `pi R^2` and `2 pi R^2` for the zero modes of
    /// 1P and 2P, against `L^2/pi` for the lowest periodic mode), so the aliasing of a neutral
    /// set became a constant in the Laplace potential, up to 6.9x the error estimate
    /// (docs/design.md, "The zero mode is set exactly"). The sum of
    /// charges times `W^(0)^3` is the zero mode without that aliasing (and without the f32
    /// round-off of a sum over the whole grid). The other kernels' and the field's polynomials
    /// vanish at `k = 0`.
    pub fn zero_mode(&self) -> Option<f64> {
        self.zero_mode
    }

    /// Bytes of the tables.
    pub fn bytes(&self) -> usize {
        self.parts.iter().map(|p| p.tables.len()).sum::<usize>() * std::mem::size_of::<T>()
    }

    /// Classes of periodic modes the tables are made in (1 without padding per periodic mode;
    /// [`tables`](Self::tables), [`elements`](Self::elements), [`stored`](Self::stored) and
    /// [`fold_map`](Self::fold_map) describe the first).
    pub fn classes(&self) -> usize {
        self.parts.len()
    }

    /// The first part (the only one without padding per periodic mode).
    fn first(&self) -> &Part<T> {
        &self.parts[0]
    }

    /// The tables as a device's CNV reads them: table `c` of stored element `e` (`s_x`
    /// fastest, then `s_y`, `s_z`; [`fold_map`](Self::fold_map) gives a local slot's) at `c *
    /// elements + e`, divided by `V_h`; Laplace's (and the field's 3), or the Stokeslet's 6
    /// (`i <= j`: 11, 22, 33, 12, 13, 23) then the stresslet's 10 (`i <= j <= l`,
    /// lexicographic).
    pub fn tables(&self) -> &[T] {
        &self.first().tables
    }

    /// Stored elements (the tables' component stride).
    pub fn elements(&self) -> usize {
        self.first().elements
    }

    /// Stored slots along `x`, `y` and `z` (their product is [`elements`](Self::elements); `x`
    /// is the block's own).
    pub fn stored(&self) -> [usize; 3] {
        [0, 1, 2].map(|d| self.first().fold[d].len())
    }

    /// The folding as a device's CNV reads it: 16 parities (component `c`: bit 0 odd along
    /// `y`, bit 1 along `z`), then per local slot of `y`, then of `z`, its stored slot `<< 1`,
    /// `| 1` where it is the mirror image. Table `c` of local element `(l_x, l_y, l_z)` is
    /// `s tables[c * elements + (s_z n_y + s_y) n_x + l_x]`, `s = -1` where the mirrored axes'
    /// bits and `c`'s parity share an odd count.
    pub fn fold_map(&self) -> Vec<u32> {
        let mut map = self.parity.to_vec();
        map.extend_from_slice(self.first().fold[1].slots());
        map.extend_from_slice(self.first().fold[2].slots());
        map
    }

    /// Table `c` (divided by its part's `V_h`) at local element `(l_x, l_y, l_z)` of the block
    /// (0 outside every part: slots beyond the free lengths of their mode's class).
    pub fn table_at(&self, c: usize, l: [usize; 3]) -> f64 {
        let Some(part) = self.parts.iter().find(|p| (p.x.0..p.x.0 + p.x.1).contains(&l[0])) else {
            return 0.0;
        };
        if l[1] >= part.yz[0] || l[2] >= part.yz[1] {
            return 0.0;
        }
        let (sy, my) = part.fold[1].slot(l[1]);
        let (sz, mz) = part.fold[2].slot(l[2]);
        let e = (sz * part.fold[1].len() + sy) * part.fold[0].len() + l[0] - part.x.0;
        let mirrored = u32::from(my) | (u32::from(mz) << 1);
        mirror_sign(self.parity[c], mirrored) * part.tables[c * part.elements + e].to_f64()
    }

    /// `map[i * 6 + m]`: the stresslet table (of its 10) that multiplies `S_m` in component
    /// `i`, `S` in the grid's order `[S11, S22, S33, S12, S13, S23]` (the off-diagonal ones
    /// counted twice).
    pub fn stress_map(&self) -> [u32; 18] {
        std::array::from_fn(|k| self.stress[k / 6][k % 6] as u32)
    }

    /// Output components: the kernel's, plus 3 for the Laplace field.
    pub fn outputs(&self) -> usize {
        self.kernel.output_dim() + if self.field { 3 } else { 0 }
    }

    /// Applies the tables in place on the local spectrum `grid` (the layout of the block the
    /// tables were made for): reads the kernel's grid components, writes [`outputs`](Self::outputs)
    /// spectra into the first components (the field after the potential).
    ///
    /// `net_charge` is the sum of the charges over every rank (Laplace; ignored otherwise). The
    /// Laplace potential's zero mode `k = 0` is set to its exact value `Q W^(0)^3` before the
    /// tables multiply it ([`FreeCnv::zero_mode`]).
    ///
    /// With padding per periodic mode each class's part multiplies its slots; the slots beyond
    /// a class's free lengths are left as they are (the transforms of that class neither read
    /// nor write them).
    pub fn apply(&self, grid: &mut [T], par: Par, net_charge: f64) {
        let b = &self.block;
        let cs = b.component_stride;
        let plane = b.y.1 * b.row_stride;
        let ncomp = self.kernel.grid_components();
        let nout = self.outputs();
        assert!(grid.len() >= (ncomp.max(nout) - 1) * cs + b.z * plane, "grid buffer too short");
        if let Some(w0) = self.zero_mode {
            grid[0] = T::from_f64(net_charge * w0);
            grid[1] = T::ZERO;
        }
        // the tables' signs per mirrored pair of axes (bit 0 y, bit 1 z)
        let signs: [[f64; 16]; 4] =
            std::array::from_fn(|m| std::array::from_fn(|c| mirror_sign(self.parity[c], m as u32)));
        let writer = parki_core::par::DisjointSlice::new(grid);
        for part in &self.parts {
            let (x0, xl) = part.x;
            let ys = part.fold[1].len();
            let work = |iz: usize| {
                let mut comps: [&mut [T]; 9] = Default::default();
                for (c, slot) in comps.iter_mut().enumerate().take(ncomp.max(nout)) {
                    // SAFETY: plane iz of component c belongs to this task only (one task per iz,
                    // the parts one after the other).
                    *slot = unsafe { writer.range_mut(c * cs + iz * plane, c * cs + (iz + 1) * plane) };
                }
                let (sz, mz) = part.fold[2].slot(iz);
                for ly in 0..part.yz[0] {
                    let (sy, my) = part.fold[1].slot(ly);
                    let sign = &signs[usize::from(my) | (usize::from(mz) << 1)];
                    let row = (sz * ys + sy) * xl;
                    for lx in 0..xl {
                        let o = ly * b.row_stride + 2 * (x0 + lx);
                        self.point(part, row + lx, sign, o, &mut comps[..ncomp.max(nout)]);
                    }
                }
            };
            match par {
                Par::Seq => (0..part.yz[1]).for_each(work),
                Par::Rayon(_) => (0..part.yz[1]).into_par_iter().for_each(work),
            }
        }
    }

    /// Table `c` of `part` at stored element `e`, times the sign of the local element read.
    #[inline]
    fn t(part: &Part<T>, c: usize, e: usize, sign: &[f64; 16]) -> f64 {
        sign[c] * part.tables[c * part.elements + e].to_f64()
    }

    /// CNV at the local element at `o` of each plane, whose tables are `part`'s stored element
    /// `e` times `sign`.
    #[inline]
    #[allow(clippy::needless_range_loop)]
    fn point(&self, part: &Part<T>, e: usize, sign: &[f64; 16], o: usize, comps: &mut [&mut [T]]) {
        let mut phi = [(0.0f64, 0.0f64); 9];
        let ncomp = self.kernel.grid_components();
        for (c, p) in phi.iter_mut().enumerate().take(ncomp) {
            *p = (comps[c][o].to_f64(), comps[c][o + 1].to_f64());
        }
        let mut v = [(0.0f64, 0.0f64); 6];
        match self.kernel {
            Kernel::Laplace => {
                let t = Self::t(part, 0, e, sign);
                v[0] = (t * phi[0].0, t * phi[0].1);
                if self.field {
                    // E^_a = -i t_a phi^
                    for a in 0..3 {
                        let t = Self::t(part, 1 + a, e, sign);
                        v[1 + a] = (t * phi[0].1, -t * phi[0].0);
                    }
                }
            }
            _ => {
                let mut off_t = 0;
                let mut off_g = 0;
                if self.kernel.needs_forces() {
                    let t: [f64; 6] = std::array::from_fn(|c| Self::t(part, c, e, sign));
                    for i in 0..3 {
                        for j in 0..3 {
                            let tij = t[STOKESLET_INDEX[i][j]];
                            v[i].0 += tij * phi[j].0;
                            v[i].1 += tij * phi[j].1;
                        }
                    }
                    off_t = 6;
                    off_g = 3;
                }
                if self.kernel.needs_dipoles() {
                    let t: [f64; 10] = std::array::from_fn(|c| Self::t(part, off_t + c, e, sign));
                    let s = &phi[off_g..off_g + 6];
                    for i in 0..3 {
                        let (mut re, mut im) = (0.0, 0.0);
                        for (m, &(_, _, mult)) in S_PAIRS.iter().enumerate() {
                            let tm = mult * t[self.stress[i][m]];
                            re += tm * s[m].0;
                            im += tm * s[m].1;
                        }
                        // times i
                        v[i].0 -= im;
                        v[i].1 += re;
                    }
                }
            }
        }
        for (c, vc) in v.iter().enumerate().take(self.outputs()) {
            comps[c][o] = T::from_f64(vc.0);
            comps[c][o + 1] = T::from_f64(vc.1);
        }
    }
}

/// Per array index of a padded half grid of `n` points (DCT-I: slots `0..=n/2`; DST-I
/// (`odd`): slots `1..n/2` at index `slot - 1`), the samples `m` (`|m| < kept`, at index `m` or
/// `m - 1` of the upsampled half grid) whose images `+-m` fall on its slot modulo `n`, with their
/// signs (`-m` carries `-1` for an odd component). For `n >= 2 kept - 1` each slot below `kept`
/// holds its own sample; shorter (padding per periodic mode) the samples `m` and `n - m`
/// wrap onto the same slots, as in the circular convolution of length `n`.
fn wrapped_samples(kept: usize, n: usize, odd: bool) -> Vec<Vec<(usize, f64)>> {
    let shift = usize::from(odd);
    let slots = if odd { (n / 2).saturating_sub(1) } else { n / 2 + 1 };
    let mut out = vec![Vec::new(); slots];
    for m in shift..kept {
        let r = m % n;
        let images = [(r, 1.0), ((n - r) % n, if odd { -1.0 } else { 1.0 })];
        for (k, &(slot, sign)) in images.iter().enumerate() {
            if (k == 1 && m == 0) || slot > n / 2 || (odd && (slot == 0 || 2 * slot == n)) {
                continue;
            }
            out[slot - shift].push((m - shift, sign));
        }
    }
    out
}

/// C-order strides of `dims` (the last axis fastest), 0 past its length.
fn c_strides(dims: &[usize]) -> [usize; 3] {
    let mut s = [0usize; 3];
    let mut acc = 1;
    for ax in (0..dims.len()).rev() {
        s[ax] = acc;
        acc *= dims[ax];
    }
    s
}

/// Fills `out` (C order over `dims`, at most 3 axes, the last fastest) with `f(index)`: slabs
/// of the first axis on the current rayon pool (in order with `Par::Seq`), an odometer inside a
/// slab (no division per element).
fn fill_c_order<U: Send>(out: &mut [U], dims: &[usize], par: Par, f: impl Fn(&[usize; 3]) -> U + Sync) {
    let n = dims.len();
    if n == 0 || out.is_empty() {
        return;
    }
    let slab: usize = dims[1..].iter().product();
    let one = |(i0, chunk): (usize, &mut [U])| {
        let mut idx = [i0, 0, 0];
        for v in chunk.iter_mut() {
            *v = f(&idx);
            for ax in (1..n).rev() {
                idx[ax] += 1;
                if idx[ax] < dims[ax] {
                    break;
                }
                idx[ax] = 0;
            }
        }
    };
    match par {
        Par::Seq => out.chunks_mut(slab).enumerate().for_each(one),
        Par::Rayon(_) => out.par_chunks_mut(slab).enumerate().for_each(one),
    }
}

/// Number of local (free-axis) slots of a block.
fn local_free_count(fa: &[usize], local: &[usize; 3]) -> usize {
    fa.iter().map(|&d| local[d]).product()
}

/// Calls `f` with the local slots (user axes; periodic entries 0) of every stored free-axis
/// slot of the block, in the order `z` slowest, `x` fastest.
fn for_each_local_free(fa: &[usize], local: &[usize; 3], mut f: impl FnMut([usize; 3])) {
    let count = local_free_count(fa, local);
    for i in 0..count {
        let mut rem = i;
        let mut l = [0usize; 3];
        for &d in fa {
            l[d] = rem % local[d];
            rem /= local[d];
        }
        f(l);
    }
}

#[cfg(test)]
mod tests {
    use super::{components, representatives, symmetry_images, FreeCnv, FreeGrid, Method};
    use crate::window::KaiserBessel;
    use parki_comm::Comm;
    use parki_core::{Kernel, Par};
    use parki_decomp::SpectralBlock;
    use std::f64::consts::PI;

    /// The whole spectral block of a padded grid of `n` points per axis (one rank).
    fn whole_block(n: [usize; 3]) -> SpectralBlock {
        SpectralBlock {
            x: (0, n[0] / 2 + 1),
            y: (0, n[1]),
            z: n[2],
            row_stride: 2 * (n[0] / 2 + 1),
            component_stride: 2 * (n[0] / 2 + 1) * n[1] * n[2],
        }
    }

    #[test]
    fn components_read_through_axis_permutations_equal_their_own_transforms() {
        // cubes in 0P (every axis), in 1P (the two free axes), and a box where only two free
        // axes are equal
        for (periodic, grid, lengths) in [
            ([false; 3], [6, 6, 6], [1.0, 1.0, 1.0]),
            ([true, false, false], [5, 6, 6], [0.7, 1.0, 1.0]),
            ([false; 3], [6, 6, 4], [1.0, 1.0, 0.7]),
        ] {
            let h = [0, 1, 2].map(|d| lengths[d] / grid[d] as f64);
            let (p, xi) = (4, 4.0);
            let free = FreeGrid::new(periodic, grid, h, p, xi, 1e-6);
            let kb = KaiserBessel::new(p);
            let block = whole_block(free.fft_len);
            for (kernel, field) in [(Kernel::Stokes, false), (Kernel::Laplace, true)] {
                let comps = components(kernel, field);
                let images = symmetry_images(&comps, &free, &free.free_axes());
                let reps = representatives(&images).len();
                let expected = match (periodic[0], grid[2] == grid[0], kernel) {
                    (false, true, Kernel::Stokes) => 5,   // 11, 12 and 111, 112, 123
                    (false, true, _) => 2,                // 1 and k_x
                    (true, _, Kernel::Stokes) => 10,      // y <-> z only
                    (true, _, _) => 3,                    // 1, k_x, k_y
                    (false, false, Kernel::Stokes) => 10, // x <-> y only
                    (false, false, _) => 3,               // 1, k_x, k_z
                };
                assert_eq!(reps, expected, "{periodic:?} {grid:?} {kernel:?}: {images:?}");
                let one = Comm::single();
                let build = |symmetric: bool| {
                    FreeCnv::<f64>::build(
                        kernel,
                        field,
                        &free,
                        lengths,
                        &kb,
                        xi,
                        &block,
                        &one,
                        Par::Seq,
                        symmetric,
                        Method::PerMode,
                    )
                    .unwrap()
                };
                let (with, without) = (build(true), build(false));
                let scale = without.tables().iter().fold(0.0f64, |m, v| m.max(v.abs()));
                let diff = with.tables().iter().zip(without.tables()).fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
                assert!(diff <= 1e-13 * scale, "{periodic:?} {kernel:?}: {diff:e} of {scale:e}");
            }
        }
    }

    /// 0P: the tables by per-axis operators ([`crate::free_split`], on one rank: the planes,
    /// the lines and the gather by local copies) equal the 3-D transforms of the whole
    /// upsampled grid, for a cube (the images read through permutations) and a box of three
    /// different axes, every kernel and the Laplace field, on one thread and on the pool.
    #[test]
    fn the_split_tables_equal_the_whole_grids() {
        for (grid, lengths) in [([6, 6, 6], [1.0, 1.0, 1.0]), ([7, 5, 4], [1.0, 0.8, 0.7])] {
            let h = [0, 1, 2].map(|d| lengths[d] / grid[d] as f64);
            let (p, xi) = (4, 4.0);
            let free = FreeGrid::new([false; 3], grid, h, p, xi, 1e-6);
            let kb = KaiserBessel::new(p);
            let block = whole_block(free.fft_len);
            let one = Comm::single();
            for (kernel, field) in
                [(Kernel::Laplace, false), (Kernel::Laplace, true), (Kernel::Stokeslet, false), (Kernel::Stokes, false)]
            {
                let build = |method: Method, par: Par| {
                    FreeCnv::<f64>::build(kernel, field, &free, lengths, &kb, xi, &block, &one, par, true, method)
                        .unwrap()
                };
                let whole = build(Method::PerMode, Par::Seq);
                let scale = whole.tables().iter().fold(0.0f64, |m, v| m.max(v.abs()));
                for par in [Par::Seq, Par::Rayon(2)] {
                    let split = build(Method::Split, par);
                    let diff = split.tables().iter().zip(whole.tables()).fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
                    println!("{grid:?} {kernel:?} field {field} {par:?}: {diff:.2e} of {scale:.2e}");
                    assert!(diff <= 1e-13 * scale, "{grid:?} {kernel:?} {field}: {diff:e} of {scale:e}");
                }
            }
        }
    }

    /// The tables against their definition summed directly (complex exponentials, the sums
    /// over the three axes' wave numbers nested, no FFT): the upsampled inverse transform, the
    /// restriction to `|n| < M_ext`, the padded transform.
    #[test]
    fn tables_match_the_definition() {
        for periodic in [[false; 3], [true, false, false], [true, true, false]] {
            let grid = [6, 5, 4];
            let lengths = [1.0, 0.9, 0.8];
            let h = [0, 1, 2].map(|d| lengths[d] / grid[d] as f64);
            let p = 4;
            let xi = 4.0;
            let free = FreeGrid::new(periodic, grid, h, p, xi, 1e-6);
            let kb = KaiserBessel::new(p);
            let n = free.fft_len;
            let block = whole_block(n);
            let kernel = Kernel::Stokes;
            let cnv =
                FreeCnv::<f64>::new(kernel, false, &free, lengths, &kb, xi, &block, &Comm::single(), Par::Seq).unwrap();
            let comps = components(kernel, false);
            let fa = free.free_axes();
            // wave numbers of the upsampled grid (free) and of the periodic modes
            let kmode = |d: usize, j: i64| -> f64 {
                if periodic[d] {
                    2.0 * PI * j as f64 / lengths[d]
                } else {
                    2.0 * PI * j as f64 / (free.upsampled[d] as f64 * h[d])
                }
            };
            let wf = |d: usize, k: f64| 1.0 / kb.fourier(k * h[d]).powi(2);
            let mut pairs = Vec::new();
            for (ci, c) in comps.iter().enumerate().step_by(4) {
                for &(jx, jy, jz) in &[(1usize, 2usize, 3usize), (2, n[1] - 1, 1)] {
                    let js = [jx, jy, jz];
                    // the periodic part of the mode and the padded free wave numbers
                    let mut kout = [0.0; 3];
                    let mut skip = false;
                    for d in 0..3 {
                        let m = if periodic[d] { grid[d] } else { n[d] };
                        let s = if js[d] <= m / 2 { js[d] as i64 } else { js[d] as i64 - m as i64 };
                        if 2 * js[d] == m {
                            skip = true;
                        }
                        kout[d] = if periodic[d] { kmode(d, s) } else { 2.0 * PI * s as f64 / (m as f64 * h[d]) };
                    }
                    if skip
                        || (periodic[0] && jx >= grid[0] / 2)
                        || (periodic[1] && jy >= grid[1])
                        || (periodic[2] && jz >= grid[2])
                    {
                        continue;
                    }
                    // f on the full upsampled free grid, summed to the samples |n| < M_ext
                    let up = free.upsampled;
                    let range = |d: usize| -> Vec<i64> {
                        if periodic[d] {
                            vec![0]
                        } else {
                            (-(up[d] as i64) / 2 + 1..up[d] as i64 / 2).collect()
                        }
                    };
                    let nrange = |d: usize| -> Vec<i64> {
                        if periodic[d] {
                            vec![0]
                        } else {
                            (-(free.data[d] as i64) + 1..free.data[d] as i64).collect()
                        }
                    };
                    let ranges = [range(0), range(1), range(2)];
                    let nranges = [nrange(0), nrange(1), nrange(2)];
                    // e^{i k_d(j) x_d(n)} per axis (1 along periodic axes, whose phase the
                    // definition leaves out): the sum's exponentials as products of these
                    let phases: Vec<Vec<Vec<(f64, f64)>>> = (0..3)
                        .map(|d| {
                            ranges[d]
                                .iter()
                                .map(|&j| {
                                    nranges[d]
                                        .iter()
                                        .map(|&nd| {
                                            if periodic[d] {
                                                (1.0, 0.0)
                                            } else {
                                                let ph = kmode(d, j) * nd as f64 * h[d];
                                                (ph.cos(), ph.sin())
                                            }
                                        })
                                        .collect()
                                })
                                .collect()
                        })
                        .collect();
                    let mut fvals = Vec::new();
                    for &a in &ranges[0] {
                        for &b in &ranges[1] {
                            for &cc in &ranges[2] {
                                let mut k = kout;
                                let mut w = 1.0;
                                for (d, &j) in [a, b, cc].iter().enumerate() {
                                    if !periodic[d] {
                                        k[d] = kmode(d, j);
                                    }
                                    w *= wf(d, k[d]);
                                }
                                let kp = fa.iter().fold((k[0] * k[0] + k[1] * k[1] + k[2] * k[2]).sqrt(), |acc, _| acc);
                                let kappa = (0..3).filter(|&d| periodic[d]).map(|d| k[d] * k[d]).sum::<f64>().sqrt();
                                let kf = fa.iter().map(|&d| k[d] * k[d]).sum::<f64>().sqrt();
                                let k2 = kp * kp;
                                let sc = crate::truncated::truncated(
                                    c.scalar,
                                    fa.len(),
                                    kappa,
                                    kf,
                                    free.radius,
                                    crate::truncated::ModeBessel::new(kappa * free.radius),
                                );
                                let screen = (-k2 / (4.0 * xi * xi)).exp() * (1.0 + k2 / (4.0 * xi * xi));
                                fvals.push(c.poly.eval(k) * sc * screen * w);
                            }
                        }
                    }
                    let mul = |(a, b): (f64, f64), (c, d): (f64, f64)| (a * c - b * d, a * d + b * c);
                    // the same sum over k, factored axis by axis (z, then y, then x): for each
                    // n, sum_k f(k) e^{i k x_n} = sum_a e_x sum_b e_y sum_c e_z f
                    let [sa, sb, sc] = [0, 1, 2].map(|d| ranges[d].len());
                    let (mut tre, mut tim) = (0.0, 0.0);
                    for (nc, &cc) in nranges[2].iter().enumerate() {
                        let mut over_z = vec![(0.0, 0.0); sa * sb];
                        for (ab, acc) in over_z.iter_mut().enumerate() {
                            for ic in 0..sc {
                                let f = fvals[ab * sc + ic];
                                let e = phases[2][ic][nc];
                                *acc = (acc.0 + f * e.0, acc.1 + f * e.1);
                            }
                        }
                        for (nb, &b) in nranges[1].iter().enumerate() {
                            let mut over_y = vec![(0.0, 0.0); sa];
                            for (ia, acc) in over_y.iter_mut().enumerate() {
                                for ib in 0..sb {
                                    let t = mul(over_z[ia * sb + ib], phases[1][ib][nb]);
                                    *acc = (acc.0 + t.0, acc.1 + t.1);
                                }
                            }
                            for (na, &a) in nranges[0].iter().enumerate() {
                                let x = [a as f64 * h[0], b as f64 * h[1], cc as f64 * h[2]];
                                // kappa(x_n) = prod (1/(N_up h)) sum f e^{i k x} over free axes
                                let (mut kr, mut ki) = (0.0, 0.0);
                                for (ia, &g) in over_y.iter().enumerate() {
                                    let t = mul(g, phases[0][ia][na]);
                                    kr += t.0;
                                    ki += t.1;
                                }
                                let ph: f64 = fa.iter().map(|&d| kout[d] * x[d]).sum();
                                // times e^{-i k' x}
                                tre += kr * ph.cos() + ki * ph.sin();
                                tim += ki * ph.cos() - kr * ph.sin();
                            }
                        }
                    }
                    let norm: f64 =
                        fa.iter().map(|&d| 1.0 / free.upsampled[d] as f64).product::<f64>() / free.padded_volume();
                    let (tre, tim) = (tre * norm, tim * norm);
                    let got = cnv.table_at(ci, [jx, jy, jz]);
                    println!(
                        "{periodic:?} comp {ci} {:?} mode {js:?}: table {got:.6e}, direct ({tre:.6e}, {tim:.6e})",
                        c.poly
                    );
                    pairs.push((got, tre, tim));
                }
            }
            let scale = pairs.iter().map(|p| p.1.abs()).fold(0.0, f64::max);
            for (got, re, im) in pairs {
                assert!((got - re).abs() <= 1e-10 * scale && im.abs() <= 1e-10 * scale, "{got:e} vs ({re:e}, {im:e})");
            }
        }
    }

    /// Padding per periodic mode: classes of `x` slots whose `y` and `z` transforms are shorter
    /// than `fft_len` but at least `2 M_ext - 1` (no kernel sample wraps: the circular
    /// convolution stays the aperiodic one) give the same far field as every mode on
    /// `fft_len`, through the transforms' and the tables' classes (1P along `x`, one rank and a
    /// slab of 2 ranks' blocks, Laplace and the Stokeslet).
    #[test]
    fn mode_classes_that_do_not_wrap_equal_the_uniform_padding() {
        use parki_fft3d::{DistFft, DistFftOptions, ModeClass};
        let (grid, lengths) = ([16, 12, 12], [1.0, 0.9, 0.8]);
        let h = [0, 1, 2].map(|d| lengths[d] / grid[d] as f64);
        let (p, xi) = (6, 9.0);
        let uniform = FreeGrid::new([true, false, false], grid, h, p, xi, 1e-8);
        let (dy, dz) = (uniform.data[1], uniform.data[2]);
        assert!(uniform.fft_len[1] > 2 * dy && uniform.fft_len[2] > 2 * dz, "{uniform:?}");
        let classes = vec![
            ModeClass { slots: 2..5, len: [2 * dy, uniform.fft_len[2]] },
            ModeClass { slots: 5..9, len: [2 * dy, 2 * dz] },
        ];
        let padded = FreeGrid { classes: classes.clone(), ..uniform.clone() };
        let kb = KaiserBessel::new(p);
        let one = Comm::single();
        for kernel in [Kernel::Laplace, Kernel::Stokeslet] {
            let comps = kernel.grid_components();
            let run = |free: &FreeGrid| -> Vec<f64> {
                let opts = DistFftOptions::new(comps);
                let pg = parki_decomp::ProcGrid::slab(1);
                let mut fft =
                    DistFft::<f64>::with_mode_classes(&one, free.axes(), [0, 1, 2], pg, opts, &free.classes).unwrap();
                let block = fft.spectral_layout();
                let cnv =
                    FreeCnv::<f64>::new(kernel, false, free, lengths, &kb, xi, &block, &one, Par::Rayon(2)).unwrap();
                assert_eq!(cnv.classes(), if free.classes.is_empty() { 1 } else { 3 });
                let cs = fft.component_stride();
                let value = |c: usize, x: usize, y: usize, z: usize| {
                    (((c * 131 + x * 17 + y * 29 + z * 43) % 97) as f64 - 48.0) / 48.0
                };
                let mut net = 0.0;
                for c in 0..comps {
                    for z in 0..free.data[2] {
                        for y in 0..free.data[1] {
                            for x in 0..free.data[0] {
                                let i = c * cs + fft.real_index(x, y, z);
                                fft.data_mut()[i] = value(c, x, y, z);
                                net += value(c, x, y, z);
                            }
                        }
                    }
                }
                fft.forward();
                cnv.apply(fft.data_mut(), Par::Seq, net);
                fft.backward();
                let mut out = Vec::new();
                for c in 0..kernel.output_dim() {
                    for z in 0..free.data[2] {
                        for y in 0..free.data[1] {
                            for x in 0..free.data[0] {
                                out.push(fft.data()[c * cs + fft.real_index(x, y, z)]);
                            }
                        }
                    }
                }
                out
            };
            let (a, b) = (run(&uniform), run(&padded));
            let scale = b.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let diff = a.iter().zip(&b).fold(0.0f64, |m, (x, y)| m.max((x - y).abs()));
            println!("{kernel:?}: classes against uniform {diff:.2e} of {scale:.2e}");
            assert!(scale > 0.0 && diff <= 1e-12 * scale, "{kernel:?}: {diff:e} of {scale:e}");
        }
        // an odd length has no DCT-I/DST-I half grid: refused, naming the field
        let odd = FreeGrid { classes: vec![ModeClass { slots: 2..5, len: [2 * dy + 1, 2 * dz] }], ..uniform.clone() };
        let block =
            SpectralBlock { x: (0, 9), y: (0, odd.fft_len[1]), z: odd.fft_len[2], row_stride: 18, component_stride: 0 };
        let e =
            FreeCnv::<f64>::new(Kernel::Laplace, false, &odd, lengths, &kb, xi, &block, &one, Par::Seq).unwrap_err();
        assert!(e.to_string().contains("free.classes"), "{e}");
    }
}
