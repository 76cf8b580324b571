//! Neighbour-cell occupancy of the actual particles: what the uniform-density cost model of
//! P2P ([`crate::params`]) cannot know.
//!
//! P2P sums, for every target, the sources of the 27 cells around its own. On uniform particles
//! that is `27 n_c` pairs per target, `n_c = N v / V` the mean sources per cell of volume `v`;
//! on clustered particles the targets sit where the sources are dense, and the pairs are
//!
//! `sum_t sum_{c' ~ c(t)} n(c') = R(v) 27 N v / V * N_t`,
//!
//! with the occupancy ratio `R(v) >= 1` (for a normal cloud of width `sigma` much larger than the
//! cells, `R -> V / (8 pi^(3/2) sigma^3)`: 22 for `sigma = 0.1` in the unit box). `R` falls to 1
//! as the cells grow past the clusters, and below 1 with free axes (the box's border cells
//! have fewer neighbours). The parameter selection multiplies its pair count by `R` at each
//! candidate cell size, so the split between the near field and the grid follows the actual
//! particles: on clustered sets it takes a smaller cut-off and a finer grid.
//!
//! [`Occupancy`] holds `R` on a ladder of cell widths from a third of the box's shortest side
//! down to a quarter of the mean particle spacing (steps of `sqrt 2`, the selection's range of
//! cut-offs), measured on samples of at most [`MAX_SOURCES`] sources and [`MAX_TARGETS`]
//! targets chosen by the position hash [`crate::stats::sampled`] (so the samples, and `R`, do
//! not depend on how the particles are split over ranks). The counts are integers summed
//! exactly, so every rank that holds the same samples computes the same `R` bit for bit.
//! Between ladder steps `R` is interpolated in `log v`.
//!
//! The same clustering raises the Ewald sum's errors at a target: they come from the sources
//! within a few cells of it, so their mean square grows by `R(v)` over the uniform model's.
//! The potentials of the Laplace and Stokeslet kernels (`|G|^2 ~ 1/r^2`) grow too, by
//! `M = <sum_j 1/r_tj^2> / <sum_j 1/r_tj^2>_uniform` (means over targets, measured on the
//! samples against a quasi-random uniform set of the same sizes in the same box, minimum
//! images along periodic axes); their relative errors by `R(v) / M`
//! ([`Occupancy::potential_scale`]; measured on normal sets, sigma 0.1 in the unit box: the
//! Stokeslet's near-field error 1.86x its uniform model at 18^3 cells).

use parki_core::Domain;
use rayon::prelude::{IntoParallelIterator, ParallelIterator};

/// Sources sampled at most.
pub const MAX_SOURCES: usize = 1 << 16;

/// Targets sampled at most.
pub const MAX_TARGETS: usize = 1 << 14;

/// Ladder steps at most (a factor `2^(LEVELS/2)` in cell width: 4096, enough for 1e11
/// particles).
pub const LEVELS: usize = 24;

/// The neighbour-cell occupancy ratio `R(v)` of a particle set ([module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Occupancy {
    /// Cell volumes of the ladder, decreasing.
    volumes: [f64; LEVELS],
    /// `R` at each volume.
    ratios: [f64; LEVELS],
    /// Steps measured (0: uniform, `R = 1`).
    levels: usize,
    /// `M`, the mean `sum_j 1/r^2` over the uniform set's (1: uniform).
    magnitude: f64,
    /// `V / (27 N)` when the targets are the sources (each target's own source is one of its
    /// pairs, `R` counts it), else 0: the own source's share of `R` at cell volume `v` is this
    /// over `v`.
    own_share: f64,
}

/// Targets of the sample the potential's magnitude `M` is measured at.
const MAGNITUDE_TARGETS: usize = 512;

impl Default for Occupancy {
    fn default() -> Self {
        Self::uniform()
    }
}

/// The cell grid P2P would build for cells at least `width` wide ([`parki_decomp::cells_per_axis`],
/// at least 3 per axis).
fn cells_for(lengths: [f64; 3], width: f64) -> [usize; 3] {
    parki_decomp::cells_per_axis(lengths, width).unwrap_or([3; 3])
}

impl Occupancy {
    /// `R = 1` at every cell size (the uniform model).
    pub fn uniform() -> Self {
        Self { volumes: [0.0; LEVELS], ratios: [1.0; LEVELS], levels: 0, magnitude: 1.0, own_share: 0.0 }
    }

    /// Measures `R` in `domain` from a sample of the sources (`sources`, out of `total_sources`
    /// in all) and a sample of the targets (`targets`). `targets_are_sources`: the targets are
    /// the sources (each target's own source is then counted once, whether or not the sample
    /// holds it). Samples in any order; the result depends only on their contents.
    pub fn measure(
        domain: &Domain,
        sources: &[[f64; 3]],
        total_sources: usize,
        targets: &[[f64; 3]],
        targets_are_sources: bool,
    ) -> Self {
        if sources.is_empty() || targets.is_empty() || total_sources == 0 {
            return Self::uniform();
        }
        let l = domain.lengths();
        let volume = domain.volume();
        let spacing = (volume / total_sources as f64).cbrt();
        let lmin = domain.min_length();
        let widths: Vec<f64> = (0..LEVELS)
            .map(|k| lmin / 3.0 * 0.5f64.powf(0.5 * k as f64))
            .take_while(|&w| w >= 0.25 * spacing || w >= lmin / 3.0)
            .collect();
        // a fixed order whatever the split over ranks: every sum below is then the same
        let sorted = |v: &[[f64; 3]]| {
            let mut v = v.to_vec();
            v.sort_unstable_by(cmp_pos);
            v
        };
        let (sources, targets) = (&sorted(sources)[..], &sorted(targets)[..]);
        // sources per target over the whole set: the sample's count (its own source left out)
        // scaled by the sampled fraction, the own source added back
        let fraction = sources.len() as f64 / total_sources as f64;
        let own = if targets_are_sources { targets.len() as f64 } else { 0.0 };
        let measured: Vec<(f64, f64)> = widths
            .into_par_iter()
            .map(|w| {
                let cells = cells_for(l, w);
                let v = volume / cells.iter().map(|&c| c as f64).product::<f64>();
                let pairs = neighbour_counts(domain, cells, sources, targets) as f64 / fraction + own;
                let uniform = targets.len() as f64 * 27.0 * total_sources as f64 * v / volume;
                (v, pairs / uniform)
            })
            .collect();
        let mut out = Self::uniform();
        for (k, &(v, r)) in measured.iter().enumerate() {
            out.volumes[k] = v;
            out.ratios[k] = r;
        }
        out.levels = measured.len();
        if targets_are_sources {
            out.own_share = volume / (27.0 * total_sources as f64);
        }
        // M: at most MAGNITUDE_TARGETS of the targets against the sampled sources, and the same
        // counts of quasi-random uniform points (the additive recurrence of the plastic number)
        let step = targets.len().div_ceil(MAGNITUDE_TARGETS);
        let probe: Vec<[f64; 3]> = targets.iter().step_by(step).copied().collect();
        let g = 1.220_744_084_605_759_5f64;
        let alpha = [1.0 / g, 1.0 / (g * g), 1.0 / (g * g * g)];
        let lattice = |n: usize, offset: f64| -> Vec<[f64; 3]> {
            (0..n).map(|i| [0, 1, 2].map(|d| (offset + alpha[d] * (i + 1) as f64).fract() * l[d])).collect()
        };
        let actual = inverse_square_sum(domain, &probe, sources);
        let uniform = inverse_square_sum(domain, &lattice(probe.len(), 0.25), &lattice(sources.len(), 0.5));
        if actual > 0.0 && uniform > 0.0 {
            out.magnitude = actual / uniform;
        }
        out
    }

    /// `M`: the mean square of a `1/r` potential at the targets over a uniform set's
    /// ([module docs](self); 1 when not measured).
    pub fn magnitude(&self) -> f64 {
        self.magnitude
    }

    /// The density of other sources the targets see within a cell and a half, over the mean
    /// density: `R(v)` without each target's own source (what the errors follow).
    pub fn density_ratio(&self, v: f64) -> f64 {
        if self.levels == 0 {
            return 1.0;
        }
        (self.ratio(v) - self.own_share / v).max(0.0)
    }

    /// The factor on the relative errors of the Laplace and Stokeslet potentials at cell volume
    /// `v`: `sqrt(density_ratio(v) / M)`, at least 1 (the uniform model is never loosened).
    pub fn potential_scale(&self, v: f64) -> f64 {
        (self.density_ratio(v) / self.magnitude).max(1.0).sqrt()
    }

    /// The factor on the relative errors of the Laplace field, whose magnitude is measured
    /// from the closest pairs ([`crate::stats`]): `sqrt(density_ratio(v))`, at least 1.
    pub fn field_scale(&self, v: f64) -> f64 {
        self.density_ratio(v).max(1.0).sqrt()
    }

    /// `R` at cell volume `v`: interpolated in `log v` between the ladder's steps, its end
    /// values beyond them (1 when nothing was measured).
    pub fn ratio(&self, v: f64) -> f64 {
        let n = self.levels;
        if n == 0 {
            return 1.0;
        }
        if n == 1 || v >= self.volumes[0] {
            return self.ratios[0];
        }
        if v <= self.volumes[n - 1] {
            return self.ratios[n - 1];
        }
        let k = (1..n).find(|&k| self.volumes[k] <= v).unwrap_or(n - 1);
        let (v0, v1) = (self.volumes[k - 1], self.volumes[k]);
        let t = (v0 / v).ln() / (v0 / v1).ln();
        self.ratios[k - 1] + t * (self.ratios[k] - self.ratios[k - 1])
    }

    /// The ladder: `(cell volume, R)` from the largest cells down.
    pub fn steps(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        (0..self.levels).map(|k| (self.volumes[k], self.ratios[k]))
    }

    /// Whether `R` was measured (not the uniform default).
    pub fn is_measured(&self) -> bool {
        self.levels > 0
    }
}

/// Lexicographic order of positions.
fn cmp_pos(a: &[f64; 3], b: &[f64; 3]) -> std::cmp::Ordering {
    a[0].total_cmp(&b[0]).then(a[1].total_cmp(&b[1])).then(a[2].total_cmp(&b[2]))
}

/// `sum_t sum_j 1/r_tj^2` (minimum images along periodic axes, coincident points left out),
/// summed in the targets' order.
fn inverse_square_sum(domain: &Domain, targets: &[[f64; 3]], sources: &[[f64; 3]]) -> f64 {
    let l = domain.lengths();
    let periodic = domain.periodic();
    let per_target: Vec<f64> = targets
        .into_par_iter()
        .map(|t| {
            let mut acc = 0.0;
            for s in sources {
                let mut r2 = 0.0;
                for d in 0..3 {
                    let mut dx = t[d] - s[d];
                    if periodic[d] {
                        dx -= l[d] * (dx / l[d]).round();
                    }
                    r2 += dx * dx;
                }
                if r2 > 0.0 {
                    acc += 1.0 / r2;
                }
            }
            acc
        })
        .collect();
    per_target.iter().sum()
}

/// `sum_t (sources of the sample in the 27 cells around t's, those at t's own position left
/// out)` on the grid of `cells` (wrapped along periodic axes, cut at the box along free ones).
/// Exact integer count: sources sorted by (cell, position), each target's rows of x-neighbours
/// and its own position found by binary search.
fn neighbour_counts(domain: &Domain, cells: [usize; 3], sources: &[[f64; 3]], targets: &[[f64; 3]]) -> u64 {
    let l = domain.lengths();
    let periodic = domain.periodic();
    let cell_of = |p: &[f64; 3]| -> [usize; 3] {
        [0, 1, 2].map(|d| {
            let x = if periodic[d] { p[d].rem_euclid(l[d]) } else { p[d] };
            ((x / l[d] * cells[d] as f64).max(0.0) as usize).min(cells[d] - 1)
        })
    };
    let index = |c: [usize; 3]| ((c[2] * cells[1] + c[1]) * cells[0] + c[0]) as u64;
    let mut keyed: Vec<(u64, [f64; 3])> = sources.iter().map(|p| (index(cell_of(p)), *p)).collect();
    keyed.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| cmp_pos(&a.1, &b.1)));
    // sources with keys in [lo, hi]
    let run = |lo: u64, hi: u64| keyed.partition_point(|k| k.0 <= hi) - keyed.partition_point(|k| k.0 < lo);
    // neighbour offsets along an axis: wrapped (distinct cells) or cut at the border
    let neighbours = |d: usize, c: usize| -> ([usize; 3], usize) {
        let n = cells[d];
        if periodic[d] {
            ([(c + n - 1) % n, c, (c + 1) % n], 3)
        } else {
            let lo = c.saturating_sub(1);
            let hi = (c + 1).min(n - 1);
            let mut out = [0; 3];
            for (k, v) in (lo..=hi).enumerate() {
                out[k] = v;
            }
            (out, hi - lo + 1)
        }
    };
    targets
        .into_par_iter()
        .map(|t| {
            let c = cell_of(t);
            let (zs, nz) = neighbours(2, c[2]);
            let (ys, ny) = neighbours(1, c[1]);
            let mut count = 0usize;
            for &z in &zs[..nz] {
                for &y in &ys[..ny] {
                    // the row of x-neighbours: one run, or two where it wraps
                    let row = |x: usize| index([x, y, z]);
                    let n = cells[0];
                    if periodic[0] && (c[0] == 0 || c[0] == n - 1) {
                        let (xs, _) = neighbours(0, c[0]);
                        count += xs.iter().map(|&x| run(row(x), row(x))).sum::<usize>();
                    } else {
                        count += run(row(c[0].saturating_sub(1)), row((c[0] + 1).min(n - 1)));
                    }
                }
            }
            // the sample's sources at the target's own position (its own source)
            let own = index(c);
            let lo = keyed.partition_point(|k| k.0 < own || (k.0 == own && cmp_pos(&k.1, t).is_lt()));
            let hi = keyed.partition_point(|k| k.0 < own || (k.0 == own && cmp_pos(&k.1, t).is_le()));
            (count - (hi - lo)) as u64
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: u64) -> impl FnMut() -> f64 {
        let mut s = seed;
        move || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// Brute force: every target against every source of the full set, by cell indices.
    fn brute(domain: &Domain, cells: [usize; 3], src: &[[f64; 3]], tgt: &[[f64; 3]]) -> f64 {
        let l = domain.lengths();
        let per = domain.periodic();
        let cell = |p: &[f64; 3]| [0, 1, 2].map(|d| ((p[d] / l[d] * cells[d] as f64) as i64).min(cells[d] as i64 - 1));
        let mut pairs = 0u64;
        for t in tgt {
            let ct = cell(t);
            for s in src {
                let cs = cell(s);
                let near = (0..3).all(|d| {
                    let n = cells[d] as i64;
                    let dd = (ct[d] - cs[d]).abs();
                    dd <= 1 || (per[d] && dd == n - 1)
                });
                pairs += u64::from(near);
            }
        }
        pairs as f64
    }

    #[test]
    fn full_samples_count_the_pairs_exactly() {
        for periodic in [[true; 3], [false; 3], [true, false, true]] {
            let domain = Domain::new([1.0, 1.3, 0.8], periodic).unwrap();
            let mut r = lcg(3);
            // a clustered set: half uniform, half in a small ball
            let pts: Vec<[f64; 3]> = (0..1500)
                .map(|i| {
                    if i % 2 == 0 {
                        [r(), 1.3 * r(), 0.8 * r()]
                    } else {
                        [0.3 + 0.1 * r(), 0.5 + 0.1 * r(), 0.2 + 0.1 * r()]
                    }
                })
                .collect();
            let occ = Occupancy::measure(&domain, &pts, pts.len(), &pts, true);
            assert!(occ.is_measured());
            for (v, ratio) in occ.steps() {
                // the ladder's grid at this volume
                let w = (0..LEVELS)
                    .map(|k| 1.0 / 3.0 * 0.5f64.powf(0.5 * k as f64) * 0.8)
                    .find(|&w| {
                        let c = cells_for(domain.lengths(), w);
                        (domain.volume() / c.iter().map(|&x| x as f64).product::<f64>() - v).abs() < 1e-12 * v
                    })
                    .unwrap();
                let cells = cells_for(domain.lengths(), w);
                let uniform = pts.len() as f64 * 27.0 * pts.len() as f64 * v / domain.volume();
                let exact = brute(&domain, cells, &pts, &pts) / uniform;
                assert!((ratio - exact).abs() < 1e-12 * exact, "{periodic:?} cells {cells:?}: {ratio} vs {exact}");
            }
        }
    }

    #[test]
    fn uniform_particles_read_one_and_a_cluster_reads_its_density() {
        let domain = Domain::new([1.0; 3], [true; 3]).unwrap();
        let mut r = lcg(11);
        let n = 200_000;
        let pts: Vec<[f64; 3]> = (0..n).map(|_| [r(), r(), r()]).collect();
        let ss = crate::stats::stride_at_most(n, MAX_SOURCES);
        let st = crate::stats::stride_at_most(n, MAX_TARGETS);
        let src: Vec<[f64; 3]> = pts.iter().copied().filter(|p| crate::stats::sampled(p, ss)).collect();
        let tgt: Vec<[f64; 3]> = pts.iter().copied().filter(|p| crate::stats::sampled(p, st)).collect();
        let occ = Occupancy::measure(&domain, &src, n, &tgt, true);
        for (v, ratio) in occ.steps() {
            // sampled pair counts: a few percent at the finest cells; R counts each target's
            // own source, 1 / (27 N v / V) more
            let density = occ.density_ratio(v);
            assert!((density - 1.0).abs() < 0.08, "uniform: R({v:.2e}) = {ratio}, density {density}");
            assert!((ratio - density - 1.0 / (27.0 * n as f64 * v)).abs() < 1e-12 * ratio);
            // and the potential's errors stay the uniform model's (density and M both about 1)
            assert!(occ.potential_scale(v) < 1.07, "uniform: scale {}", occ.potential_scale(v));
        }
        assert!((occ.magnitude() - 1.0).abs() < 0.05, "uniform: M = {}", occ.magnitude());
        // a normal cloud, sigma 0.05 in the unit box: R -> 1/(8 pi^1.5 sigma^3) = 180 for cells
        // well below sigma (Box-Muller)
        let sigma = 0.05;
        let mut normal = || {
            let (u, w) = (r().max(1e-300), r());
            (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * w).cos()
        };
        let pts: Vec<[f64; 3]> =
            (0..n).map(|_| [0.5 + sigma * normal(), 0.5 + sigma * normal(), 0.5 + sigma * normal()]).collect();
        let src: Vec<[f64; 3]> = pts.iter().copied().filter(|p| crate::stats::sampled(p, ss)).collect();
        let tgt: Vec<[f64; 3]> = pts.iter().copied().filter(|p| crate::stats::sampled(p, st)).collect();
        let occ = Occupancy::measure(&domain, &src, n, &tgt, true);
        let limit = 1.0 / (8.0 * std::f64::consts::PI.powf(1.5) * sigma.powi(3));
        let fine = occ.density_ratio(1e-7);
        assert!((fine / limit - 1.0).abs() < 0.1, "cells far below sigma: R = {fine}, limit {limit}");
        // the mean 1/r^2 over two points of the cloud, 1/(2 sigma^2) = 200, against about 6
        // for the unit cube's uniform points (the minimum-image torus: a bit less)
        assert!(occ.magnitude() > 25.0 && occ.magnitude() < 50.0, "M = {}", occ.magnitude());
        // decreasing towards coarse cells, which hold the whole cloud in a few cells
        let steps: Vec<(f64, f64)> = occ.steps().collect();
        assert!(steps[0].1 < 0.2 * fine, "{steps:?}");
        // interpolation stays between its neighbours
        for w in steps.windows(2) {
            let mid = occ.ratio((w[0].0 * w[1].0).sqrt());
            assert!(mid >= w[0].1.min(w[1].1) - 1e-12 && mid <= w[0].1.max(w[1].1) + 1e-12);
        }
    }

    #[test]
    fn a_clustered_occupancy_moves_the_choice_to_finer_cells() {
        // a normal cloud (sigma 0.05) standing for 1e6 particles in a periodic unit box
        let domain = Domain::new([1.0; 3], [true; 3]).unwrap();
        let mut r = lcg(5);
        let mut normal = || {
            let (u, w) = (r().max(1e-300), r());
            (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * w).cos()
        };
        let pts: Vec<[f64; 3]> =
            (0..30000).map(|_| [0.5 + 0.05 * normal(), 0.5 + 0.05 * normal(), 0.5 + 0.05 * normal()]).collect();
        let n = 1_000_000;
        let occ = Occupancy::measure(&domain, &pts, n, &pts[..8000], true);
        let request = |occupancy: Option<Occupancy>| crate::Request {
            kernel: parki_core::Kernel::Laplace,
            domain,
            field: None,
            sources: n,
            targets: n,
            tolerance: 1e-6,
            real_bytes: 8,
            rc: None,
            window_p: None,
            oversampling: None,
            lanes: 8,
            max_grid_bytes: 1 << 34,
            cost: crate::CostModel::default(),
            enforce_tolerance: true,
            pairs: None,
            position_rounding: crate::PositionRounding::Exact,
            pair_error: 0.0,
            merged_rows: false,
            sphere_cutoff: false,
            occupancy,
            evaluations: 1,
        };
        let uniform = crate::select(&request(None)).unwrap();
        let measured = crate::select(&request(Some(occ))).unwrap();
        assert_eq!(uniform.occupancy, 1.0);
        assert!(measured.occupancy > 10.0, "R = {}", measured.occupancy);
        assert!(measured.cells[0] > uniform.cells[0], "{:?} vs {:?}", measured.cells, uniform.cells);
        assert!(measured.grid[0] > uniform.grid[0]);
        // the potential's error terms scaled by sqrt(R / M) at the chosen cells (the estimate
        // reports them scaled, within the term's bound): a tighter real-space truncation
        let scale = occ.potential_scale(1.0 / (measured.cells.iter().product::<usize>() as f64));
        assert!(scale > 1.5, "{scale}");
        assert!(measured.estimate.near <= 0.5e-6 * (1.0 + 1e-6), "{:?}", measured.estimate);
        assert!(measured.xi * measured.rc_effective > uniform.xi * uniform.rc_effective * 1.02);
    }
}
