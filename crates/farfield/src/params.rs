//! Parameters from a tolerance: `xi`, `r_c`, the grid, `P` and the window polynomial, chosen by
//! the error model ([`crate::error_model`]) and a cost model of this implementation's stages.
//!
//! For every candidate cell count (cells of width `r_c` or more, at least 3 per axis):
//! 1. `xi` from `E_N(xi, cell widths) = f tol` (bisection);
//! 2. the kept wave numbers `K` from `E_F(xi, K) = f tol`, then FFT-friendly even grid sizes
//!    `M_d >= 2 (K L_d / 2 pi + 1)`;
//! 3. for grid oversampling factors `sigma` from 1 to 2 (`M_d >= 2 (sigma K L_d / 2 pi + 1)`),
//!    the smallest even `P >= 4` with `E_w(P) <= f tol` (a finer grid allows a smaller `P`),
//!    keeping the grid only if the Fourier and self-interaction terms together stay below `f tol`;
//!
//! where `f = 0.5` splits the tolerance so that the three terms add to at most `0.87 tol`. For
//! the combined kernel each step takes the maximum over the Stokeslet and stresslet parts. The
//! candidate with the smallest predicted time ([`CostModel`]) that fits the memory limit wins.
//! The user may fix `r_c` (or the mean particles per cell) and `P`.

use parki_core::{Domain, Error, Kernel, Result};
use parki_decomp::{fft_friendly_size, fft_grid_work, GridLayout};

use crate::error_model::ErrorModel;
use crate::stats::PairStatistics;
use crate::window::{KaiserBessel, WindowPoly};

/// Cost constants of this implementation, nanoseconds per unit of work on one thread, measured
/// by `parki-bench calibrate` (docs/performance.md: AMD EPYC Zen 5, AVX-512, f64). Per-kernel
/// arrays are in the order of `Kernel::ALL`: Laplace, Stokeslet, stresslet, Stokes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostModel {
    /// P2P per evaluated pair (padding included).
    pub p2p_pair: [f64; 4],
    /// P2P per target and colleague cell (the cell's loop and its loads, whatever the cell
    /// holds): 0 on the CPU, where it is folded into `p2p_pair`; a device's thread per target
    /// pays it for each of its 27 cells.
    pub p2p_visit: [f64; 4],
    /// P2G per source, per `P^3`, per grid component.
    pub p2g: [f64; 4],
    /// FFT per grid point, per `log2` of the grid size, per transformed component (the slow
    /// lengths' lines weigh `parki_decomp::SLOW_LINE_WEIGHT` times more: `parki_decomp::fft_line_work`).
    pub fft: f64,
    /// CNV per half-spectrum mode.
    pub cnv: f64,
    /// G2P per target, per `P^3`, per output component.
    pub g2p: [f64; 4],
    /// Ratio of f32 to f64 cost (applied to every stage in single precision).
    pub f32_ratio: f64,
    /// The plan's kernel tables of free axes over the built-in model of them
    /// ([`crate::free::FreeGrid::plan_seconds`], fitted on the machine of these defaults): 1
    /// there; a calibration measures it on its machine.
    pub plan_tables: f64,
    /// Seconds per byte, as nanoseconds, of the grids a plan with free axes allocates and
    /// touches ([`PLAN_SECONDS_PER_BYTE`] by default): fresh memory's page faults.
    pub plan_touch: f64,
}

impl Default for CostModel {
    fn default() -> Self {
        Self {
            p2p_pair: [3.17, 2.92, 2.92, 3.28],
            p2p_visit: [0.0; 4],
            p2g: [0.87, 0.41, 0.31, 0.38],
            fft: 0.34,
            cnv: 7.6,
            g2p: [0.98, 0.50, 0.63, 0.75],
            f32_ratio: 0.6,
            plan_tables: 1.0,
            plan_touch: 1e9 * PLAN_SECONDS_PER_BYTE,
        }
    }
}

impl CostModel {
    /// A CUDA device's unit costs, the whole device standing for one thread: the fit of
    /// `parki-gpu-bench --modes calibrate` on an NVIDIA H200 (session 33, f64, 1e6 uniform
    /// points in 3P, each kernel at tolerances 1e-6 and 1e-9 and at its selected cell size, a
    /// third and three times it; docs/performance.md §8.8). For pricing a plan on the device
    /// ([`CostModel::reprice`], `method = "auto"` on the CUDA backend), not for choosing it:
    /// plans chosen with these constants ran 0.90-0.99x as fast as the CPU constants' plans
    /// there, which the device keeps. The f32 ratio is the CPU's (no f32 device fit yet); the
    /// plan's tables are made on the host, at the CPU's constants.
    pub fn device() -> Self {
        Self {
            p2p_pair: [0.01189, 0.01410, 0.01567, 0.01775],
            p2p_visit: [0.0478, 0.0512, 0.0704, 0.0780],
            p2g: [0.01155, 0.00407, 0.00213, 0.00166],
            fft: 0.000855,
            cnv: 0.0683,
            g2p: [0.00410, 0.00280, 0.00283, 0.00279],
            ..Self::default()
        }
    }

    /// The stage seconds `est` of a plan priced by `from` (as [`select`] prices it for
    /// `kernel`, `targets` and reals of `real_bytes`), priced by these constants instead: the
    /// same plan (pairs, grid, window, tables) on another machine. Every stage is linear in
    /// its constant; P2P's pairs are recovered from `from`'s pair and visit terms (eq. of
    /// [`select`]'s cost model: `p2p_pair pairs + p2p_visit 27 N_t`). Plans with medium or
    /// loose pairs price them at `from.p2p_pair` times `PairAccuracy::cost`: pass that `from`.
    pub fn reprice(
        &self,
        from: &CostModel,
        est: &CostEstimate,
        kernel: Kernel,
        targets: usize,
        real_bytes: usize,
    ) -> CostEstimate {
        let k = Kernel::ALL.iter().position(|&q| q == kernel).unwrap_or(0);
        let (s_from, s_to) = if real_bytes == 4 { (from.f32_ratio, self.f32_ratio) } else { (1.0, 1.0) };
        let ratio = |to: f64, of: f64| if of > 0.0 { s_to * to / (s_from * of) } else { 0.0 };
        let visits = 27.0 * targets as f64;
        let pairs = if from.p2p_pair[k] > 0.0 {
            ((est.p2p / (1e-9 * s_from) - from.p2p_visit[k] * visits) / from.p2p_pair[k]).max(0.0)
        } else {
            0.0
        };
        CostEstimate {
            p2p: 1e-9 * s_to * (self.p2p_pair[k] * pairs + self.p2p_visit[k] * visits),
            p2g: est.p2g * ratio(self.p2g[k], from.p2g[k]),
            fft: est.fft * ratio(self.fft, from.fft),
            cnv: est.cnv * ratio(self.cnv, from.cnv),
            g2p: est.g2p * ratio(self.g2p[k], from.g2p[k]),
        }
    }
}

/// What the caller asks for.
#[derive(Clone, Debug)]
pub struct Request {
    /// Kernel.
    pub kernel: Kernel,
    /// Box.
    pub domain: Domain,
    /// The Laplace field too, and how its far field is computed (`None`: the potential only).
    pub field: Option<crate::FieldMethod>,
    /// Number of sources.
    pub sources: usize,
    /// Number of targets.
    pub targets: usize,
    /// Relative RMS tolerance.
    pub tolerance: f64,
    /// Bytes per real (4 or 8).
    pub real_bytes: usize,
    /// Fixed real-space cut-off (cell width at least this).
    pub rc: Option<f64>,
    /// Fixed window support.
    pub window_p: Option<usize>,
    /// Fixed grid oversampling (1 to 4) over what the Fourier truncation needs.
    pub oversampling: Option<f64>,
    /// SIMD lanes the cell lists are padded to.
    pub lanes: usize,
    /// Largest grid memory allowed, bytes.
    pub max_grid_bytes: usize,
    /// Cost constants.
    pub cost: CostModel,
    /// Reject fixed parameters whose estimated error exceeds the tolerance (default). `false`
    /// accepts them and only reports the estimate (for studies of the error model).
    pub enforce_tolerance: bool,
    /// Close-pair statistics of the actual particles ([`crate::stats`]): the stresslet's
    /// magnitude from its nearest pairs, and the position round-off term. `None`: the uniform
    /// model alone (safe for the stresslet, which it over-resolves on clustered particles).
    pub pairs: Option<PairStatistics>,
    /// How the positions the solver sees were rounded from the caller's exact ones (the error
    /// model's position round-off term, [`PositionRounding`]). Needs `pairs`.
    pub position_rounding: PositionRounding,
    /// Relative error of each P2P pair term from how its functions are evaluated
    /// (`PairAccuracy::pair_error` of the near field; 0 at full accuracy). Counted with the
    /// round-off.
    pub pair_error: f64,
    /// P2P reads each row of three x-neighbour colleague cells as one run of sources (packed
    /// rows: 9 runs per target, each padded to the lanes once) instead of 27 padded cells.
    pub merged_rows: bool,
    /// P2P may drop the pairs of the colleague cells beyond a cut-off sphere (the CPU's
    /// `NearCutoff::Sphere`): the selection then sets [`Params::near_cut`] where the error
    /// model sees no loss, and the cost model counts the sphere's windows.
    pub sphere_cutoff: bool,
    /// Neighbour-cell occupancy of the actual particles ([`crate::occupancy`]): P2P's pairs at
    /// each candidate cell size are the uniform count times its `R`. `None`: uniform (`R = 1`).
    pub occupancy: Option<crate::Occupancy>,
    /// Evaluations one plan serves (at least 1): with free axes the plan's kernel tables
    /// ([`crate::free::FreeGrid::plan_seconds`]) are priced over them, so that a single
    /// evaluation does not buy a grid whose tables cost more than it saves.
    pub evaluations: usize,
}

/// Estimated relative RMS errors of the chosen parameters (largest over the kernel's parts).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ErrorEstimate {
    /// Real-space truncation.
    pub near: f64,
    /// Fourier truncation.
    pub fourier: f64,
    /// Window aliasing (and polynomial approximation).
    pub window: f64,
    /// Coherent error of a source's interaction with itself through the grid (targets at sources).
    pub self_interaction: f64,
    /// Round-off: of the arithmetic (a few epsilons of the working precision), and of the
    /// positions the solver sees against the caller's exact ones (f64 data narrowed to f32,
    /// from the close pairs). No parameter lowers it.
    pub rounding: f64,
    /// `sqrt(near^2 + fourier^2 + window^2 + self_interaction^2 + rounding^2)`.
    pub total: f64,
}

/// Predicted seconds per stage (one thread, this implementation's constants).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CostEstimate {
    /// P2P.
    pub p2p: f64,
    /// P2G.
    pub p2g: f64,
    /// FFT (forward and inverse).
    pub fft: f64,
    /// CNV.
    pub cnv: f64,
    /// G2P.
    pub g2p: f64,
}

impl CostEstimate {
    /// Sum of the stages.
    pub fn total(&self) -> f64 {
        self.p2p + self.p2g + self.fft + self.cnv + self.g2p
    }
}

/// The chosen Ewald parameters.
#[derive(Clone, Debug)]
pub struct Params {
    /// Splitting parameter.
    pub xi: f64,
    /// Real-space cut-off asked for (the cells are at least this wide).
    pub rc: f64,
    /// Smallest cell width (every pair closer than this is summed).
    pub rc_effective: f64,
    /// P2P's cut-off sphere (`parki_nearfield::NearCutoff::Sphere`): the pairs of the
    /// colleague cells farther than this are dropped; `None`: every pair of the cells. Chosen
    /// as the smallest of [`NEAR_CUT_FACTORS`] times `rc_effective` whose near-field error
    /// estimate stays within [`NEAR_CUT_SLACK`] of the cells' own.
    pub near_cut: Option<f64>,
    /// Cells per axis.
    pub cells: [usize; 3],
    /// Mean sources per cell.
    pub sources_per_cell: f64,
    /// Sources in the 27 cells around a target over the uniform count `27 sources_per_cell`
    /// ([`crate::occupancy`]; 1 without a measured occupancy).
    pub occupancy: f64,
    /// Grid points per axis.
    pub grid: [usize; 3],
    /// Grid spacing per axis.
    pub h: [f64; 3],
    /// Largest kept wave number per axis.
    pub kmax: [f64; 3],
    /// Window support in grid points.
    pub p: usize,
    /// Window shape `beta = 2.5 P`.
    pub beta: f64,
    /// Window half-width `a_w = P h / 2` per axis.
    pub window_half_width: [f64; 3],
    /// The window polynomials.
    pub poly: WindowPoly,
    /// Error of the window polynomial against the exact window.
    pub poly_error: f64,
    /// Error estimate.
    pub estimate: ErrorEstimate,
    /// Predicted cost.
    pub cost: CostEstimate,
    /// Grid memory in bytes.
    pub grid_bytes: usize,
    /// The plan's estimated seconds on one thread with free axes ([`plan_seconds`]; 0 when
    /// every axis is periodic).
    pub plan_seconds: f64,
    /// Grid oversampling over what the Fourier truncation alone needs.
    pub oversampling: f64,
    /// Candidates the selection compared.
    pub candidates: usize,
    /// The extended, zero-padded grid of the free axes (`None` when every axis is periodic).
    pub free: Option<crate::free::FreeGrid>,
}

impl Params {
    /// These parameters for lengths measured in units of `1 / s` of the ones chosen: a solver
    /// planned on a box rescaled by `1 / s` ([`parki_core::Domain`] sides `L / s`) reports its
    /// `xi` and wave numbers times `1 / s`, its distances times `s`; the grid, the window in
    /// grid points, the error estimate (relative) and the costs do not change.
    pub fn in_length_unit(&self, s: f64) -> Params {
        let mut p = self.clone();
        p.xi /= s;
        p.rc *= s;
        p.rc_effective *= s;
        p.near_cut = p.near_cut.map(|c| c * s);
        p.h = p.h.map(|h| h * s);
        p.kmax = p.kmax.map(|k| k / s);
        p.window_half_width = p.window_half_width.map(|a| a * s);
        if let Some(f) = p.free.as_mut() {
            f.radius *= s;
            f.h = f.h.map(|h| h * s);
        }
        p
    }
}

/// Errors unless a fixed cut-off `rc` is positive, finite and at most a third of the box's
/// shortest side (the box must hold 3 cells per axis), naming `ewald.rc`.
pub fn check_fixed_rc(rc: f64, domain: &Domain) -> Result<()> {
    let lmin = domain.min_length();
    if rc.is_finite() && rc > 0.0 && rc <= lmin / 3.0 {
        Ok(())
    } else {
        Err(Error::OutOfRange {
            field: "ewald.rc".into(),
            value: format!("{rc}"),
            allowed: format!("(0, {}] (the box must hold 3 cells per axis)", lmin / 3.0),
        })
    }
}

/// Seconds per byte of the grids a plan with free axes allocates and touches (the padded FFT
/// buffer, the tables, the data grid), on one thread: fresh memory's page faults (the kernel
/// zeroing the pages) were 20 % of a clustered million's run (plan and one evaluation) and
/// 3-5 s of a 392^3 grid's 8.6-10.1 s plan on 2 threads; the plans of 320^3 and 392^3 grids
/// less their tables measured 0.54 and 0.74 s per GB on 2 threads, 1.2 s per GB at the
/// evaluation's 1.9x for 2 threads (docs/performance.md §7.7).
pub const PLAN_SECONDS_PER_BYTE: f64 = 1.2e-9;

/// The estimated seconds on one thread of a plan with free axes on the grid `free`: the kernel
/// tables ([`crate::free::FreeGrid::plan_seconds`] times `cost.plan_tables`) and the
/// `grid_bytes` its buffers touch (`cost.plan_touch` ns per byte, by default
/// [`PLAN_SECONDS_PER_BYTE`]).
pub fn plan_seconds(
    free: &crate::free::FreeGrid,
    kernel: Kernel,
    spectral_field: bool,
    grid_bytes: usize,
    cost: &CostModel,
) -> f64 {
    cost.plan_tables * free.plan_seconds(kernel, spectral_field) + 1e-9 * cost.plan_touch * grid_bytes as f64
}

/// Share of the tolerance given to each error term.
const SPLIT: f64 = 0.5;

/// How the positions a solver computes with were rounded from the caller's exact ones, for the
/// error model's round-off term: a displacement error `delta` changes a pair's term by `grad G
/// . delta`, summed over the closest pairs ([`PairStatistics::rounding2`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PositionRounding {
    /// The positions are the caller's (f64 data in f64, or f32 data in f32).
    #[default]
    Exact,
    /// f64 positions rounded to f32 in the box: `E|delta|^2` of rounding at the scale of the
    /// box ([`crate::stats::f32_position_rounding2`] of its sides).
    F32Box,
    /// f64 positions whose coordinates relative to their cells are formed in f64 and rounded to
    /// f32 (the solvers' `evaluate_exact`, whose far field reads the f64 positions too):
    /// `E|delta|^2` of rounding over `[0, w_d)` for the cells of each candidate `r_c`
    /// ([`crate::stats::f32_position_rounding2`] of their widths), so that the term shrinks with
    /// the cells per axis and enters the choice of `r_c`. The per-colleague offset and the sum
    /// `x_rel + offset`, rounded at up to two widths, are the f32 arithmetic's own, which the
    /// solver makes on exact f32 data too (the arithmetic term).
    F32Cells,
}

/// Relative error of the arithmetic itself in units of the working precision's epsilon: the f32
/// solver against the f64 reference on the same (f32) data measured 2e-7 to 4.5e-7 above the
/// f64 solver's error at tol 1e-6, N = 1e3 to 1e6 (1.7 to 3.8 `f32::EPSILON`).
const ARITHMETIC_ROUNDOFF: f64 = 4.0;

/// Largest share of the tolerance the position round-off may take; above it the tolerance is
/// refused (no parameter lowers round-off).
const ROUNDING_SHARE: f64 = 0.6;

/// The bound of each of the three parameter-dependent terms (near, Fourier, window): `SPLIT
/// tol`, lowered when the position round-off `rounding` takes part of the tolerance, so that
/// `3 target^2 + rounding^2 <= (0.87 tol)^2`.
fn term_target(tol: f64, rounding: f64) -> f64 {
    if rounding <= 0.0 {
        return SPLIT * tol;
    }
    let budget = 3.0 * (SPLIT * tol).powi(2) - rounding * rounding;
    (budget / 3.0).max(0.0).sqrt().min(SPLIT * tol)
}

fn bisect_log(f: &dyn Fn(f64) -> f64, mut lo: f64, mut hi: f64, target: f64) -> f64 {
    // f decreasing in its argument: smallest x with f(x) <= target
    for _ in 0..60 {
        let mid = (lo * hi).sqrt();
        if f(mid) <= target {
            hi = mid;
        } else {
            lo = mid;
        }
        if hi / lo < 1.0 + 1e-6 {
            break;
        }
    }
    hi
}

struct Candidate {
    params: Params,
    cost: f64,
}

fn cells_for(domain: &Domain, rc: f64) -> Option<([usize; 3], [f64; 3])> {
    let l = domain.lengths();
    let n = parki_decomp::cells_per_axis(l, rc)?;
    Some((n, [0, 1, 2].map(|d| l[d] / n[d] as f64)))
}

/// Grid oversampling factors tried: a finer grid than the Fourier truncation needs lowers the
/// aliasing of the modes near Nyquist and so the window support `P`.
const OVERSAMPLING: [f64; 7] = [1.0, 1.1, 1.2, 1.35, 1.5, 1.75, 2.0];

#[allow(clippy::too_many_arguments)]
fn evaluate(
    req: &Request,
    models: &[ErrorModel],
    parts: &PartWeights,
    field: Option<&ErrorModel>,
    rounding: f64,
    rc: f64,
    smallest_rejected: &mut usize,
) -> Result<Option<Candidate>> {
    let Some((cells, widths)) = cells_for(&req.domain, rc) else {
        return Ok(None);
    };
    let r_eff = widths.iter().cloned().fold(f64::INFINITY, f64::min);
    let target = term_target(req.tolerance, rounding);
    let l = req.domain.lengths();
    let two_pi = 2.0 * std::f64::consts::PI;
    let cellvol: f64 = (0..3).map(|d| l[d] / cells[d] as f64).product();
    // the field's errors at a target come from the sources within a few cells of it, its
    // magnitude (measured, when the pair statistics are given) from its closest pairs: on
    // clustered particles the errors grow with the density the targets see at the scale of the
    // cells, R(v) of the occupancy, which the uniform model does not know (measured on normal
    // sets: the field's error 3.6-4.1x the uniform set's at the same cut-off, sqrt R = 4-4.5)
    let field_scale = match (&req.pairs, &req.occupancy) {
        (Some(_), Some(o)) => o.field_scale(cellvol),
        _ => 1.0,
    };
    // likewise the Laplace and Stokeslet potentials' errors, over their magnitude's growth
    let scaled;
    let parts = match &req.occupancy {
        Some(o) => {
            scaled = parts.with_potential_scale(o.potential_scale(cellvol));
            &scaled
        }
        None => parts,
    };
    // every term is the larger of the potential's and, when asked, the field's
    let worst = |pot: f64, f: &dyn Fn(&ErrorModel) -> f64| field.map_or(pot, |m| pot.max(field_scale * f(m)));
    let near_at = |xi: f64| worst(parts.combine(|p| models[p].near(xi, widths)), &|m| m.near(xi, widths));
    // 1. xi from the real-space error
    let xi = bisect_log(&near_at, 0.5 / r_eff, 40.0 / r_eff, target);
    // 2. kept wave numbers from the Fourier error
    let fourier_at = |k: [f64; 3]| worst(parts.combine(|p| models[p].fourier(xi, k)), &|m| m.fourier(xi, k));
    let kneed = bisect_log(&|k| fourier_at([k; 3]), 0.1 * xi, 60.0 * xi, target);
    let k_hi = 1.1 * OVERSAMPLING[OVERSAMPLING.len() - 1] * kneed + two_pi / req.domain.min_length() * 8.0;
    let far: Vec<_> = models.iter().map(|m| m.far_model(xi, k_hi)).collect();
    let field_far = field.map(|m| m.far_model(xi, k_hi));
    let mut near = near_at(xi);
    // P2P's cut-off sphere: the colleague block's pairs beyond a radius between w and 2w add
    // next to nothing to the accuracy (the error comes from the caps just beyond the block's
    // faces), so the smallest radius that keeps the estimate is taken
    let mut near_cut = None;
    if req.sphere_cutoff {
        for k in NEAR_CUT_FACTORS {
            let cut = k * r_eff;
            let e =
                worst(parts.combine(|p| models[p].near_within(xi, widths, cut)), &|m| m.near_within(xi, widths, cut));
            if e <= NEAR_CUT_SLACK * near {
                near = e;
                near_cut = Some(cut);
                break;
            }
        }
    }
    let covered = near_cut.map_or(1.0, |cut| sphere_fraction(cut, widths));
    let per_cell = req.sources as f64 * cellvol / req.domain.volume();
    let ncomp = req.kernel.grid_components();
    let p_min = if req.domain.periodicity() < 3 { 6 } else { 4 };
    let mut best: Option<Candidate> = None;
    // 3. for each oversampling: grid sizes, then the smallest P that meets the window error
    let sigmas: Vec<f64> = match req.oversampling {
        Some(s) => vec![s],
        None => OVERSAMPLING.to_vec(),
    };
    for sigma in sigmas {
        let mut grid = [0usize; 3];
        for d in 0..3 {
            let modes = (sigma * kneed * l[d] / two_pi).ceil() as usize;
            grid[d] = fft_friendly_size(2 * (modes + 1));
        }
        let window_at = |grid: [usize; 3], p: usize| -> (f64, [f64; 3], [f64; 3]) {
            let h = [0, 1, 2].map(|d| l[d] / grid[d] as f64);
            let kmax = [0, 1, 2].map(|d| two_pi * (grid[d] / 2 - 1) as f64 / l[d]);
            let potential = parts.combine(|i| far[i].window(p, kmax, h));
            let field_window = match (field, &field_far) {
                (Some(m), Some(f)) => {
                    let w = f.window(p, kmax, h);
                    if req.field == Some(crate::FieldMethod::Window) {
                        w.hypot(m.window_derivative(p, kmax, h, &far[0]))
                    } else {
                        w
                    }
                }
                _ => 0.0,
            };
            (potential.max(field_scale * field_window), kmax, h)
        };
        let p = match req.window_p {
            Some(p) => p,
            // with free axes P = 4 measured 2-4x its modelled window error (clustered particles,
            // docs/validation.md): the search starts at 6 there
            None => match (p_min / 2..=16).map(|k| 2 * k).find(|&p| window_at(grid, p).0 <= target) {
                Some(p) => p,
                None => continue,
            },
        };
        for m in grid.iter_mut() {
            *m = fft_friendly_size((*m).max(p + 2));
        }
        let (window, kmax, h) = window_at(grid, p);
        let fourier = fourier_at(kmax);
        let self_term = parts.combine(|i| {
            let t = models[i].self_truncation(xi, kmax, req.sources);
            let a = far[i].self_alias(p, kmax, h, req.sources);
            (t * t + a * a).sqrt()
        });
        if req.enforce_tolerance && (fourier * fourier + self_term * self_term).sqrt() > target {
            continue;
        }
        let total =
            (near * near + fourier * fourier + window * window + self_term * self_term + rounding * rounding).sqrt();
        let estimate = ErrorEstimate { near, fourier, window, self_interaction: self_term, rounding, total };
        let layout = GridLayout::new(grid)?;
        let free = (req.domain.periodicity() < 3)
            .then(|| crate::free::FreeGrid::new(req.domain.periodic(), grid, h, p, xi, req.tolerance));
        // FFT buffer, plus the interleaved copy G2P gathers from (vector kernels); with free
        // axes the padded grid, its kernel tables and the data grid G2P reads
        // the grid's output components: the potential's, and the field's when CNV computes it
        let dim_out = crate::FieldMethod::grid_outputs(req.field, req.kernel);
        let spectral_field = req.field == Some(crate::FieldMethod::Spectral);
        let (fft_real, data_points, tables) = match &free {
            None => (layout.real_len(), layout.points(), 0),
            Some(f) => {
                let n = f.fft_len;
                let half = 2 * (n[0] / 2 + 1) * n[1] * n[2];
                let count = crate::free::table_count(req.kernel, spectral_field);
                // the tables on the folded block, counted as by a decomposition's ranks
                (half, f.data.iter().product(), count * crate::fold::stored_elements_bound(n))
            }
        };
        let gather = if dim_out > 1 { dim_out * data_points } else { 0 };
        let grid_bytes = (ncomp.max(dim_out) * fft_real + gather + tables) * req.real_bytes;
        if grid_bytes > req.max_grid_bytes {
            *smallest_rejected = (*smallest_rejected).min(grid_bytes);
            continue;
        }
        // cost model
        let c = &req.cost;
        let scale = if req.real_bytes == 4 { c.f32_ratio } else { 1.0 };
        let runs = if req.merged_rows { 9.0 } else { 27.0 };
        let occupancy = req.occupancy.map_or(1.0, |o| o.ratio(cellvol));
        let pairs =
            req.targets as f64 * runs * (27.0 / runs * per_cell * occupancy * covered + 0.5 * (req.lanes as f64 - 1.0));
        let kidx = Kernel::ALL.iter().position(|&k| k == req.kernel).unwrap_or(0);
        // FFT work: sum over the passes of lines x fft_line_work(length); with free axes the
        // passes before an axis is padded skip its padding (x first over the data rows, then
        // y over the data z planes, then z over everything), per class of periodic modes with
        // padding per mode
        let fft_work = match &free {
            None => fft_grid_work(grid),
            Some(f) => f.fft_work(),
        };
        let cnv_elements = free.as_ref().map_or((fft_real / 2) as f64, |f| f.spectral_elements());
        // CNV: the tables-based multiply reads one real per table and element
        let cnv_factor =
            free.as_ref().map_or(1.0, |_| 1.0 + crate::free::table_count(req.kernel, spectral_field) as f64 / 8.0);
        let p3 = (p * p * p) as f64;
        let dim = dim_out as f64;
        // G2P with the window's derivative: two FMAs per grid point instead of one
        let g2p_factor = if req.field == Some(crate::FieldMethod::Window) { 2.0 } else { 1.0 };
        let cost = CostEstimate {
            p2p: 1e-9 * scale * (c.p2p_pair[kidx] * pairs + c.p2p_visit[kidx] * 27.0 * req.targets as f64),
            p2g: 1e-9 * scale * c.p2g[kidx] * req.sources as f64 * p3 * ncomp as f64,
            fft: 1e-9 * scale * c.fft * fft_work * (ncomp as f64 + dim),
            cnv: 1e-9 * scale * c.cnv * cnv_factor * cnv_elements,
            g2p: 1e-9 * scale * c.g2p[kidx] * req.targets as f64 * p3 * dim * g2p_factor,
        };
        let plan = free.as_ref().map_or(0.0, |f| plan_seconds(f, req.kernel, spectral_field, grid_bytes, &req.cost));
        let total_cost = cost.total() + plan / req.evaluations.max(1) as f64;
        if best.as_ref().is_some_and(|b| b.cost <= total_cost) {
            continue;
        }
        let kb = KaiserBessel::new(p);
        let poly_target = (0.05 * target).max(if req.real_bytes == 4 { 2e-8 } else { 1e-16 });
        let (poly, poly_error) = if req.field == Some(crate::FieldMethod::Window) {
            WindowPoly::fit_with_derivative_to(&kb, poly_target)
        } else {
            WindowPoly::fit_to(&kb, poly_target)
        };
        best = Some(Candidate {
            params: Params {
                xi,
                rc,
                rc_effective: r_eff,
                near_cut,
                cells,
                sources_per_cell: per_cell,
                occupancy,
                grid,
                h,
                kmax,
                p,
                beta: kb.beta,
                window_half_width: h.map(|hd| 0.5 * p as f64 * hd),
                poly,
                poly_error,
                estimate,
                cost,
                grid_bytes,
                plan_seconds: plan,
                oversampling: sigma,
                candidates: 1,
                free,
            },
            cost: total_cost,
        });
    }
    Ok(best)
}

/// Radii of P2P's cut-off sphere tried, over the cells' smallest width (the first whose error
/// estimate is within [`NEAR_CUT_SLACK`] of the whole colleague block's is taken).
pub const NEAR_CUT_FACTORS: [f64; 10] = [1.1, 1.15, 1.2, 1.25, 1.3, 1.35, 1.4, 1.5, 1.6, 1.75];

/// How much the cut-off sphere may raise the near field's error estimate over that of every
/// pair of the colleague cells.
pub const NEAR_CUT_SLACK: f64 = 1.001;

/// The fraction of the colleague block's `27 w_x w_y w_z` that P2P's cut-off sphere of radius
/// `cut` reads, for a target uniform in its cell: per row of cells `(y, z)` at distances
/// `d_y`, `d_z` from the target (0 for its own row, else to the face between), the x window
/// `|x - x_t| <= sqrt(cut^2 - d_y^2 - d_z^2)` clipped to the row's three cells `[-w_x, 2 w_x)`.
/// Midpoint rule over the target's position, 12 points per axis.
pub fn sphere_fraction(cut: f64, w: [f64; 3]) -> f64 {
    const M: usize = 12;
    let at = |i: usize, wd: f64| (i as f64 + 0.5) / M as f64 * wd;
    let mut sum = 0.0;
    for ix in 0..M {
        let tx = at(ix, w[0]);
        for iy in 0..M {
            let ty = at(iy, w[1]);
            let dy = [ty, 0.0, w[1] - ty];
            for iz in 0..M {
                let tz = at(iz, w[2]);
                let dz = [tz, 0.0, w[2] - tz];
                for a in dy {
                    for b in dz {
                        let w2 = cut * cut - a * a - b * b;
                        if w2 > 0.0 {
                            let half = w2.sqrt();
                            let len = (tx + half).min(2.0 * w[0]) - (tx - half).max(-w[0]);
                            sum += len.max(0.0) * w[1] * w[2];
                        }
                    }
                }
            }
        }
    }
    let mean = sum / (M * M * M) as f64;
    (mean / (27.0 * w[0] * w[1] * w[2])).min(1.0)
}

/// How the relative errors of a kernel's parts make the kernel's.
///
/// Without particle statistics: the largest part's (safe whatever the strengths). With them
/// ([`crate::stats`]): each part's share of the solution's energy, `w_p = Q_p U_p^2 / sum`, so
/// that `rel^2 = sum_p w_p (s_p rel_p)^2`, where `s_p` scales the stresslet's error terms by the
/// square root of the source density its targets see over the uniform density (its magnitude
/// comes from the actual close pairs, so its errors must follow the actual density too; for
/// Laplace and the Stokeslet the uniform magnitude and errors scale alike and `s_p = 1`).
#[derive(Debug)]
struct PartWeights {
    weights: Option<Vec<f64>>,
    scale: Vec<f64>,
    parts: Vec<parki_core::KernelPart>,
}

impl PartWeights {
    fn new(req: &Request, models: &[ErrorModel]) -> Self {
        let Some(stats) = &req.pairs else {
            return Self {
                weights: None,
                scale: vec![1.0; models.len()],
                parts: models.iter().map(|m| m.part()).collect(),
            };
        };
        let energy: Vec<f64> = models.iter().enumerate().map(|(p, m)| stats.parts[p].q * m.magnitude2()).collect();
        let sum: f64 = energy.iter().sum();
        let weights = (sum > 0.0 && sum.is_finite()).then(|| energy.iter().map(|e| e / sum).collect());
        let scale = models
            .iter()
            .enumerate()
            .map(|(p, m)| match m.part() {
                parki_core::KernelPart::Stresslet => stats.density_ratio(p).max(1.0).sqrt(),
                _ => 1.0,
            })
            .collect();
        Self { weights, scale, parts: models.iter().map(|m| m.part()).collect() }
    }

    /// The Laplace and Stokeslet parts' errors scaled by `s` too
    /// ([`crate::Occupancy::potential_scale`]).
    fn with_potential_scale(&self, s: f64) -> Self {
        let scale = self
            .scale
            .iter()
            .zip(&self.parts)
            .map(|(&x, &part)| if part == parki_core::KernelPart::Stresslet { x } else { x * s })
            .collect();
        Self { weights: self.weights.clone(), scale, parts: self.parts.clone() }
    }

    fn combine(&self, rel: impl Fn(usize) -> f64) -> f64 {
        self.combine_scaled(&self.scale, rel)
    }

    /// As [`PartWeights::combine`] without the density scale (for terms computed from the
    /// actual pairs).
    fn combine_unscaled(&self, rel: impl Fn(usize) -> f64) -> f64 {
        self.combine_scaled(&vec![1.0; self.scale.len()], rel)
    }

    fn combine_scaled(&self, scale: &[f64], rel: impl Fn(usize) -> f64) -> f64 {
        match &self.weights {
            None => (0..scale.len()).map(|p| scale[p] * rel(p)).fold(0.0, f64::max),
            Some(w) => (0..scale.len()).map(|p| w[p] * (scale[p] * rel(p)).powi(2)).sum::<f64>().sqrt(),
        }
    }
}

/// `x` rounded up to two significant digits (exactly as printed: `4e-5`, not `3.9999e-5`).
fn round_up_2(x: f64) -> f64 {
    let scale = 10f64.powf(x.log10().floor() - 1.0);
    let up = (x / scale).ceil() * scale * (1.0 + 1e-12);
    format!("{up:.1e}").parse().unwrap_or(up)
}

/// Chooses the parameters for `req`.
pub fn select(req: &Request) -> Result<Params> {
    if let Some(p) = req.window_p {
        if !(4..=32).contains(&p) || p % 2 != 0 {
            return Err(Error::OutOfRange {
                field: "ewald.window_support".into(),
                value: p.to_string(),
                allowed: "an even number from 4 to 32".into(),
            });
        }
    }
    if let Some(s) = req.oversampling {
        if !(s.is_finite() && (1.0..=4.0).contains(&s)) {
            return Err(Error::OutOfRange {
                field: "ewald.oversampling".into(),
                value: format!("{s}"),
                allowed: "1 to 4".into(),
            });
        }
    }
    let volume = req.domain.volume();
    let models: Vec<ErrorModel> = req
        .kernel
        .parts()
        .iter()
        .enumerate()
        .map(|(p, &part)| {
            let model = ErrorModel::new(part, &req.domain, req.sources);
            match (&req.pairs, part) {
                (Some(stats), parki_core::KernelPart::Stresslet) => match stats.stresslet_magnitude2(p, volume) {
                    Some(m) => model.with_magnitude2(m),
                    None => model,
                },
                _ => model,
            }
        })
        .collect();
    let parts = PartWeights::new(req, &models);
    // the Laplace field's model, its magnitude measured on the particles when their statistics
    // are given (set, not only raised: targets away from clustered sources see a smaller field
    // than the uniform model's)
    let field = req.field.map(|_| {
        let m = ErrorModel::laplace_field(&req.domain, req.sources);
        match req.pairs.as_ref().and_then(|s| s.field_magnitude2(0, volume)) {
            Some(m2) => m.with_measured_magnitude2(m2),
            None => m,
        }
    });
    // the round-off of positions with a mean square error `delta2`, relative to each part's
    // magnitude (not scaled: it is computed from the actual pairs), and the field's; with the
    // arithmetic's own round-off (measured: docs/validation.md) and the pair functions'
    let eps = if req.real_bytes == 4 { f32::EPSILON as f64 } else { f64::EPSILON };
    let round_off = |delta2: f64| -> f64 {
        let positions = match &req.pairs {
            Some(stats) if delta2 > 0.0 => {
                let rel =
                    |p: usize| (stats.rounding2(models[p].part(), p, volume, delta2) / models[p].magnitude2()).sqrt();
                let field_rel =
                    field.as_ref().map_or(0.0, |m| (stats.field_rounding2(0, volume, delta2) / m.magnitude2()).sqrt());
                parts.combine_unscaled(rel).max(field_rel)
            }
            _ => 0.0,
        };
        positions.hypot(ARITHMETIC_ROUNDOFF * eps).hypot(req.pair_error)
    };
    // per candidate cut-off: the cells' widths set the round-off of cell-relative positions
    let box_delta2 = match req.position_rounding {
        PositionRounding::F32Box => crate::stats::f32_position_rounding2(req.domain.lengths()),
        _ => 0.0,
    };
    let rounding_at = |rc: f64| -> f64 {
        match req.position_rounding {
            PositionRounding::F32Cells => cells_for(&req.domain, rc)
                .map_or(f64::INFINITY, |(_, w)| round_off(crate::stats::f32_position_rounding2(w))),
            _ => round_off(box_delta2),
        }
    };
    let lmin = req.domain.min_length();
    let candidates: Vec<f64> = match req.rc {
        Some(rc) => {
            check_fixed_rc(rc, &req.domain)?;
            vec![rc]
        }
        None => {
            // cells per shortest axis from 3 up to ~4 per particle spacing, geometric steps
            let spacing = (req.domain.volume() / req.sources.max(1) as f64).cbrt();
            let nmax = ((4.0 * lmin / spacing).ceil() as usize).max(3);
            let mut v = Vec::new();
            let mut n = 3.0f64;
            while n <= nmax as f64 + 0.5 {
                v.push(lmin / n.round());
                n = (n * 1.08).max(n + 1.0);
            }
            v
        }
    };
    // no parameter lowers the round-off but the cells' size, where positions are rounded in them
    let least = candidates.iter().map(|&rc| rounding_at(rc)).fold(f64::INFINITY, f64::min);
    if least > ROUNDING_SHARE * req.tolerance {
        let smallest = round_up_2(least / ROUNDING_SHARE);
        let how = match req.position_rounding {
            PositionRounding::F32Cells => " relative to their cells",
            _ => "",
        };
        return Err(Error::OutOfRange {
            field: "problem.tolerance".into(),
            value: format!("{:e}", req.tolerance),
            allowed: format!(
                ">= {smallest:e} for these {} particles in {}: round-off alone (positions rounded to \
                 the working precision{how}, judged from their closest pairs, and the arithmetic) makes a \
                 relative error of about {least:.2e}{}",
                req.sources,
                if req.real_bytes == 4 { "f32" } else { "f64" },
                if req.real_bytes == 4 { "; use precision = \"f64\" for a tighter tolerance" } else { "" }
            ),
        });
    }
    let mut best: Option<Candidate> = None;
    let mut count = 0;
    let mut smallest_rejected = usize::MAX;
    for &rc in &candidates {
        let rounding = rounding_at(rc);
        if rounding > ROUNDING_SHARE * req.tolerance {
            continue;
        }
        if let Some(c) = evaluate(req, &models, &parts, field.as_ref(), rounding, rc, &mut smallest_rejected)? {
            count += 1;
            if best.as_ref().is_none_or(|b| c.cost < b.cost) {
                best = Some(c);
            }
        }
    }
    match best {
        Some(mut b) => {
            b.params.candidates = count;
            Ok(b.params)
        }
        None if smallest_rejected < usize::MAX => Err(Error::Resource {
            message: format!(
                "tolerance {:e} needs a grid of at least {}, above the limit of {} \
                 (raise [run] max_grid_gb or loosen the tolerance)",
                req.tolerance,
                parki_core::memory::format_bytes(smallest_rejected as f64),
                parki_core::memory::format_bytes(req.max_grid_bytes as f64)
            ),
        }),
        None if req.rc.is_some() || req.window_p.is_some() || req.oversampling.is_some() => Err(Error::OutOfRange {
            field: "problem.tolerance".into(),
            value: format!("{:e}", req.tolerance),
            allowed: format!(
                "a tolerance the fixed parameters can reach ({}{}{}); drop them to let parki-dist choose",
                req.rc.map(|r| format!("rc = {r} ")).unwrap_or_default(),
                req.window_p.map(|p| format!("window_support = {p} ")).unwrap_or_default(),
                req.oversampling.map(|o| format!("oversampling = {o}")).unwrap_or_default(),
            )
            .replace(" )", ")"),
        }),
        None => Err(Error::OutOfRange {
            field: "problem.tolerance".into(),
            value: format!("{:e}", req.tolerance),
            allowed: format!(
                "a tolerance the window supports up to 32 reach on this box ({} candidate cell sizes \
                 from {} to 3 cells along the shortest side, grids oversampled up to 2x): loosen it",
                candidates.len(),
                candidates.last().map_or(3.0, |rc| lmin / rc).round()
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::{select, sphere_fraction, CostModel, Params, Request, NEAR_CUT_FACTORS};

    /// The fraction of the colleague block the cut-off sphere reads: the closed form at
    /// `r = w` (`(2 + 2 pi + 4 pi / 3) / 27`), a Monte Carlo count of the same windows at
    /// larger radii (2e5 samples each: 0.640 at 1.2 w, 0.841 at 1.5 w), the whole block from
    /// `sqrt(4 + 1 + 1) w` on (a target at a cell's corner), and anisotropic cells between the cubic ones.
    #[test]
    fn the_sphere_reads_its_share_of_the_colleague_block() {
        let at_w = (2.0 + 2.0 * std::f64::consts::PI + 4.0 * std::f64::consts::PI / 3.0) / 27.0;
        assert!((sphere_fraction(1.0, [1.0; 3]) - at_w).abs() < 2e-3, "{}", sphere_fraction(1.0, [1.0; 3]));
        assert!((sphere_fraction(1.2, [1.0; 3]) - 0.640).abs() < 5e-3);
        assert!((sphere_fraction(1.5, [1.0; 3]) - 0.841).abs() < 5e-3);
        assert!(sphere_fraction(2.45, [1.0; 3]) > 0.999);
        let mut last = 0.0;
        for k in NEAR_CUT_FACTORS {
            let f = sphere_fraction(k * 0.1, [0.1, 0.12, 0.1]);
            assert!(f > last && f < 1.0, "{k}: {f}");
            last = f;
        }
    }

    /// `reprice` gives what the selection itself prices with the other constants when the
    /// plan is held fixed (its `r_c`, `P` and oversampling given): every kernel, 3P and 0P,
    /// f64 and f32, the cut-off sphere and a device's lanes; and the same constants give the
    /// estimate back.
    #[test]
    fn repricing_a_plan_equals_selecting_it_with_the_other_constants() {
        use parki_core::{Domain, Kernel};
        for (periodic, kernel, tol, real_bytes, lanes, sphere) in [
            ([true; 3], Kernel::Stokes, 1e-9, 8, 1, true),
            ([true; 3], Kernel::Laplace, 1e-6, 8, 8, false),
            ([false; 3], Kernel::Stokeslet, 1e-6, 8, 1, true),
            ([false, false, true], Kernel::Stresslet, 1e-5, 4, 1, true),
        ] {
            let domain = Domain::new([1.0; 3], periodic).unwrap();
            let request = |cost: CostModel, fixed: Option<&Params>| Request {
                kernel,
                domain,
                field: None,
                sources: 20_000,
                targets: 20_000,
                tolerance: tol,
                real_bytes,
                rc: fixed.map(|p| p.rc),
                window_p: fixed.map(|p| p.p),
                oversampling: fixed.map(|p| p.oversampling),
                lanes,
                max_grid_bytes: 1 << 34,
                cost,
                enforce_tolerance: true,
                pairs: None,
                position_rounding: super::PositionRounding::Exact,
                pair_error: 0.0,
                merged_rows: false,
                sphere_cutoff: sphere,
                occupancy: None,
                evaluations: 1,
            };
            let cpu = CostModel::default();
            let plan = select(&request(cpu, None)).unwrap();
            let again = select(&request(CostModel::device(), Some(&plan))).unwrap();
            let case = format!("{kernel:?} {periodic:?} {tol:e} {real_bytes}");
            assert_eq!((again.grid, again.cells, again.p), (plan.grid, plan.cells, plan.p), "{case}");
            let repriced = CostModel::device().reprice(&cpu, &plan.cost, kernel, 20_000, real_bytes);
            let same = cpu.reprice(&cpu, &plan.cost, kernel, 20_000, real_bytes);
            for (a, b, c, d) in [
                (repriced.p2p, again.cost.p2p, same.p2p, plan.cost.p2p),
                (repriced.p2g, again.cost.p2g, same.p2g, plan.cost.p2g),
                (repriced.fft, again.cost.fft, same.fft, plan.cost.fft),
                (repriced.cnv, again.cost.cnv, same.cnv, plan.cost.cnv),
                (repriced.g2p, again.cost.g2p, same.g2p, plan.cost.g2p),
            ] {
                assert!((a - b).abs() <= 1e-9 * b.abs(), "{case}: repriced {a} against {b}");
                assert!((c - d).abs() <= 1e-9 * d.abs(), "{case}: {c} against {d}");
            }
            // the device is far faster than one CPU thread on every stage
            assert!(repriced.total() < 0.05 * plan.cost.total(), "{case}: {repriced:?} against {:?}", plan.cost);
        }
    }
}
