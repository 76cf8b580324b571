//! Close-pair statistics of the actual particles: what the uniform-density error model
//! ([`crate::error_model`]) cannot know.
//!
//! For sources with independent random strengths `s_j` (the model's assumption), the mean
//! square of a kernel sum at target `x_i` is `c sum_j |G(x_i - x_j)|^2 |s_j|^2` (`c = 1, 1/3,
//! 1/9` per part, Frobenius norms). Two terms of the model depend on the closest pairs, which
//! the uniform density of the model misrepresents on clustered or surface particles:
//!
//! - the stresslet's solution magnitude: `|T(r)|^2 = 36/r^4` makes `int |T|^2 d^3r` diverge at
//!   small `r`, so the RMS solution is set by the nearest neighbours (the model cuts the sum at
//!   the uniform nearest-neighbour wave number and underestimates it on surfaces and clusters);
//! - the round-off of positions narrowed from f64 to f32: a displacement error `delta` changes
//!   a pair's contribution by `grad G . delta`, with `c |grad G|_F^2 = 1/r^4` (Laplace),
//!   `(1/3) 10/r^4` (Stokeslet) and `(1/9) 144/r^6` (stresslet).
//!
//! [`PairStatistics`] holds the sums `S_4 = sum_i sum_{j: r_ij < r_0} |s_j|^2 / r_ij^4` and
//! `S_6` (the same with `r^6`) per kernel part over sampled targets, with `r_0` the mean particle
//! spacing `(V/N)^(1/3)`; pairs beyond `r_0` are taken at uniform density (tails
//! `4 pi Q/(V r_0)` and `4 pi Q/(3 V r_0^3)`). The sample of targets is chosen by a hash of
//! their positions and the sums cover every source, so the statistics do not depend on how the
//! particles are split over ranks (the distributed measurement moves sources to slabs with
//! their neighbours within `r_0`, `parki_dist::SourceStatistics::measure`).

use parki_core::{Domain, KernelPart, Real, Sources};
use rayon::prelude::{IntoParallelIterator, ParallelIterator};

/// Targets sampled at most (every `ceil(nt / MAX_SAMPLED)`-th): the sums are per target means.
pub const MAX_SAMPLED: usize = 100_000;

/// Share of the close-pair stresslet magnitude the error model relies on: the random-phase
/// mean square over-states a realised solution by up to ~1.2 in norm on uniform particles at
/// loose tolerances (docs/validation.md, the tolerance sweep).
pub const MAGNITUDE_SAFETY: f64 = 0.7;

/// Sums of one kernel part.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PartSums {
    /// `sum_i sum_{j: r_ij < r_0} |s_j|^2` over the sampled targets.
    pub s0: f64,
    /// `sum_i sum_{j: r_ij < r_0} |s_j|^2 / r_ij^4` over the sampled targets, each target's sum
    /// capped at the [`TOP_TARGETS`]-th largest (for magnitudes: robust to a few pairs).
    pub s4: f64,
    /// The same sum uncapped (for the position round-off, which the closest pairs realise
    /// whatever their strengths' orientation: a single pair 1/100 of the spacing apart carried
    /// 95 % of an f32 run's round-off on 1e5 uniform points).
    pub s4_all: f64,
    /// `sum_i sum_{j: r_ij < r_0} |s_j|^2 / r_ij^6` over the sampled targets.
    pub s6: f64,
    /// `Q = sum_j |s_j|^2` over all sources.
    pub q: f64,
}

/// Close-pair statistics of a particle set ([module docs](self)).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PairStatistics {
    /// Pair radius `r_0`.
    pub radius: f64,
    /// Targets sampled.
    pub sampled: f64,
    /// Sources counted.
    pub sources: f64,
    /// Sums per kernel part, in the order of `Kernel::parts`.
    pub parts: [PartSums; 2],
}

/// `|s_j|^2` of `part` for source `j`.
fn weight<T: Real>(part: KernelPart, s: &Sources<T>, j: usize) -> f64 {
    let n2 = |v: &[T; 3]| v.iter().map(|x| x.to_f64() * x.to_f64()).sum::<f64>();
    match part {
        KernelPart::Laplace => s.charges.map_or(0.0, |q| q[j].to_f64().powi(2)),
        KernelPart::Stokeslet => s.forces.map_or(0.0, |f| n2(&f[j])),
        KernelPart::Stresslet => match (s.dipoles, s.normals) {
            (Some(d), Some(n)) => n2(&d[j]) * n2(&n[j]),
            _ => 0.0,
        },
    }
}

/// Whether the target at `p` is in the sample of stride `stride`: decided by a hash of its
/// coordinates' bits, so that the sample is the same however the targets are split over ranks.
pub fn sampled(p: &[f64; 3], stride: u64) -> bool {
    if stride <= 1 {
        return true;
    }
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for x in p {
        h = (h ^ x.to_bits()).wrapping_mul(0x100_0000_01b3);
        h ^= h >> 29;
    }
    h.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 11 < (1u64 << 53) / stride
}

/// The sampling stride for `targets` targets in all: at most about [`MAX_SAMPLED`] sampled.
pub fn stride(targets: usize) -> u64 {
    stride_at_most(targets, MAX_SAMPLED)
}

/// The sampling stride ([`sampled`]) for `total` particles with at most about `max` sampled.
pub fn stride_at_most(total: usize, max: usize) -> u64 {
    total.div_ceil(max).max(1) as u64
}

/// `|s_j|^2` of up to two kernel parts for every source.
pub fn strengths<T: Real>(parts: &[KernelPart], sources: &Sources<T>) -> Vec<[f64; 2]> {
    (0..sources.positions.len())
        .map(|j| {
            [
                parts.first().map_or(0.0, |&p| weight(p, sources, j)),
                parts.get(1).map_or(0.0, |&p| weight(p, sources, j)),
            ]
        })
        .collect()
}

/// `[S_0, S_4, S_6]` of two parts (six sums) of `targets` against the sources at `pos` with
/// strengths `w`, pairs closer than `radius` (periodic minimum image in `domain`; coincident
/// points left out, which leaves out each target's own source when targets are sources), with
/// rayon over the targets. `O(n)`: a cell list at least `radius` wide.
pub fn pair_sums(
    domain: &Domain,
    radius: f64,
    pos: &[[f64; 3]],
    w: &[[f64; 2]],
    targets: &[[f64; 3]],
) -> Vec<[f64; 6]> {
    let ns = pos.len();
    if ns == 0 || targets.is_empty() {
        return vec![[0.0; 6]; targets.len()];
    }
    let l = domain.lengths();
    // cells at least r_0 wide, at least 3 per axis (27 distinct neighbours), at most ~4 n
    let mut width = radius;
    let cells = loop {
        let c = l.map(|ld| ((ld / width).floor() as usize).max(3));
        if (c[0] as f64) * (c[1] as f64) * (c[2] as f64) <= 4.0 * ns as f64 + 64.0 {
            break c;
        }
        width *= 1.26;
    };
    let cell_of = |p: [f64; 3]| -> [usize; 3] {
        [0, 1, 2].map(|d| {
            let x = p[d].rem_euclid(l[d]) / l[d];
            ((x * cells[d] as f64) as usize).min(cells[d] - 1)
        })
    };
    let index = |c: [usize; 3]| (c[0] * cells[1] + c[1]) * cells[2] + c[2];
    // counting sort of the sources by cell
    let ncell = cells[0] * cells[1] * cells[2];
    let mut start = vec![0usize; ncell + 1];
    let keys: Vec<usize> = pos.iter().map(|&p| index(cell_of(p))).collect();
    for &k in &keys {
        start[k + 1] += 1;
    }
    for c in 0..ncell {
        start[c + 1] += start[c];
    }
    // the sources and their strengths copied in cell order: a target's neighbour cells are
    // then contiguous runs (read from the original order, each source was a cache miss: 90 ns
    // per candidate pair on clustered sets, where targets see tens of sources per cell)
    let mut fill = start.clone();
    let mut sorted = vec![([0.0f64; 3], [0.0f64; 2]); ns];
    for (j, &k) in keys.iter().enumerate() {
        sorted[fill[k]] = (pos[j], w[j]);
        fill[k] += 1;
    }
    drop(keys);
    let r02 = radius * radius;
    targets
        .into_par_iter()
        .map(|&x| {
            let c = cell_of(x);
            let mut acc = [0.0f64; 6];
            for a in [cells[0] - 1, 0, 1] {
                for b in [cells[1] - 1, 0, 1] {
                    for e in [cells[2] - 1, 0, 1] {
                        let k = index([(c[0] + a) % cells[0], (c[1] + b) % cells[1], (c[2] + e) % cells[2]]);
                        for (pj, wj) in &sorted[start[k]..start[k + 1]] {
                            let mut r2 = 0.0;
                            for d in 0..3 {
                                let mut dx = x[d] - pj[d];
                                dx -= l[d] * (dx / l[d]).round();
                                r2 += dx * dx;
                            }
                            if r2 < r02 && r2 > 0.0 {
                                let r4 = r2 * r2;
                                let r6 = r4 * r2;
                                for p in 0..2 {
                                    acc[3 * p] += wj[p];
                                    acc[3 * p + 1] += wj[p] / r4;
                                    acc[3 * p + 2] += wj[p] / r6;
                                }
                            }
                        }
                    }
                }
            }
            acc
        })
        .collect()
}

/// Targets the stresslet's close-pair magnitude rests on at least ([`from_targets`]).
pub const TOP_TARGETS: usize = 32;

/// The statistics from the per-target sums of [`pair_sums`] of every sampled target (in any
/// order), `sources` sources of total strengths `q` per part.
pub fn from_targets(radius: f64, per_target: &[[f64; 6]], sources: f64, q: [f64; 2]) -> PairStatistics {
    let mut total = [0.0; 6];
    for t in per_target {
        for k in 0..6 {
            total[k] += t[k];
        }
    }
    // S_4 with each target's sum capped at the TOP_TARGETS-th largest: a few very close pairs
    // make a target's expected square thousands of times the typical one, and what one or two
    // such pairs realise depends on their strengths' orientation; the cap keeps the magnitude
    // from resting on fewer than TOP_TARGETS targets
    let robust = |p: usize| {
        let mut v: Vec<f64> = per_target.iter().map(|t| t[3 * p + 1]).collect();
        if v.len() <= TOP_TARGETS {
            return v.iter().sum();
        }
        let k = v.len() - TOP_TARGETS;
        let (_, cap, _) = v.select_nth_unstable_by(k, f64::total_cmp);
        let cap = *cap;
        v.iter().map(|&x| x.min(cap)).sum()
    };
    let part = |p: usize| PartSums {
        s0: total[3 * p],
        s4: robust(p),
        s4_all: total[3 * p + 1],
        s6: total[3 * p + 2],
        q: q[p],
    };
    PairStatistics { radius, sampled: per_target.len() as f64, sources, parts: [part(0), part(1)] }
}

impl PairStatistics {
    /// The statistics of `sources` and `targets` (`None`: the sources) on one process, in
    /// `domain`: targets sampled by [`sampled`] (at most about [`MAX_SAMPLED`]), all sources.
    pub fn measure<T: Real>(
        parts: &[KernelPart],
        domain: &Domain,
        sources: &Sources<T>,
        targets: Option<&[[T; 3]]>,
    ) -> Self {
        let pos: Vec<[f64; 3]> = sources.positions.iter().map(|p| p.map(|x| x.to_f64())).collect();
        let w = strengths(parts, sources);
        let sample: Vec<[f64; 3]> = match targets {
            Some(t) => {
                let stride = stride(t.len());
                t.iter().map(|p| p.map(|x| x.to_f64())).filter(|p| sampled(p, stride)).collect()
            }
            None => {
                let stride = stride(pos.len());
                pos.iter().copied().filter(|p| sampled(p, stride)).collect()
            }
        };
        let radius = (domain.volume() / pos.len().max(1) as f64).cbrt();
        let per_target = pair_sums(domain, radius, &pos, &w, &sample);
        let q = [w.iter().map(|x| x[0]).sum(), w.iter().map(|x| x[1]).sum()];
        from_targets(radius, &per_target, pos.len() as f64, q)
    }

    /// The source density the targets see within `r_0`, over the mean density `N/V`, weighted by
    /// part `p`'s strengths: `S_0 / (n_t (Q/N) (4 pi/3) r_0^3 N/V)`; 1 for uniform particles, the
    /// clustering factor otherwise (`r_0^3 N/V = 1`).
    pub fn density_ratio(&self, p: usize) -> f64 {
        let part = &self.parts[p];
        if part.q <= 0.0 || self.sampled <= 0.0 || self.sources <= 0.0 {
            return 1.0;
        }
        part.s0 / (self.sampled * (part.q / self.sources) * 4.0 * std::f64::consts::PI / 3.0)
    }

    /// Mean square solution of the stresslet part `p` per unit `Q` from the close pairs plus the
    /// uniform tail beyond `r_0`, times [`MAGNITUDE_SAFETY`]:
    /// `0.7 ((4/(n_t Q)) S_4 + 16 pi/(V r_0))`, or `None` without sources.
    pub fn stresslet_magnitude2(&self, p: usize, volume: f64) -> Option<f64> {
        let part = &self.parts[p];
        if part.q <= 0.0 || self.sampled <= 0.0 {
            return None;
        }
        let m = 4.0 * part.s4 / (self.sampled * part.q) + 16.0 * std::f64::consts::PI / (volume * self.radius);
        Some(MAGNITUDE_SAFETY * m)
    }

    /// Mean square Laplace field per unit `Q` of part `p` (the charges) from the close pairs
    /// plus the uniform tail beyond `r_0`, times [`MAGNITUDE_SAFETY`]: `|grad (1/r)|^2 = 1/r^4`,
    /// `0.7 (S_4/(n_t Q) + 4 pi/(V r_0))`, or `None` without sources.
    pub fn field_magnitude2(&self, p: usize, volume: f64) -> Option<f64> {
        let part = &self.parts[p];
        if part.q <= 0.0 || self.sampled <= 0.0 {
            return None;
        }
        let m = part.s4 / (self.sampled * part.q) + 4.0 * std::f64::consts::PI / (volume * self.radius);
        Some(MAGNITUDE_SAFETY * m)
    }

    /// As [`rounding2`](Self::rounding2) for the Laplace field of part `p`: `c |grad grad (1/r)|_F^2
    /// = 6/r^6`.
    pub fn field_rounding2(&self, p: usize, volume: f64, delta2: f64) -> f64 {
        let s = &self.parts[p];
        if s.q <= 0.0 || self.sampled <= 0.0 {
            return 0.0;
        }
        let r0 = self.radius;
        let tail = 6.0 * 4.0 * std::f64::consts::PI / (3.0 * volume * r0 * r0 * r0);
        2.0 * (delta2 / 3.0) * (6.0 * s.s6 / (self.sampled * s.q) + tail)
    }

    /// Mean square change per unit `Q` of part `p`'s sum when every position moves by an
    /// independent isotropic error of mean square `delta2` (`E|delta|^2`), pair differences
    /// counted twice: `2 (delta2/3) c |grad G|^2` summed over the close pairs, plus the
    /// uniform tails.
    pub fn rounding2(&self, part: KernelPart, p: usize, volume: f64, delta2: f64) -> f64 {
        let s = &self.parts[p];
        if s.q <= 0.0 || self.sampled <= 0.0 {
            return 0.0;
        }
        let pi = std::f64::consts::PI;
        let r0 = self.radius;
        let (pairs, tail) = match part {
            KernelPart::Laplace => (s.s4_all, 4.0 * pi / (volume * r0)),
            KernelPart::Stokeslet => (10.0 / 3.0 * s.s4_all, 10.0 / 3.0 * 4.0 * pi / (volume * r0)),
            KernelPart::Stresslet => (16.0 * s.s6, 16.0 * 4.0 * pi / (3.0 * volume * r0 * r0 * r0)),
        };
        2.0 * (delta2 / 3.0) * (pairs / (self.sampled * s.q) + tail)
    }
}

/// `E|delta|^2` of positions in `[0, L_d)` rounded to f32: per axis the rounding error is
/// uniform over one unit in the last place, `ulp^2/12`, with `ulp = 2^(e - 23)` for `x` in
/// `[2^e, 2^(e+1))`, averaged over `x` uniform in `[0, L_d)`.
pub fn f32_position_rounding2(lengths: [f64; 3]) -> f64 {
    lengths
        .iter()
        .map(|&l| {
            // sum over the binades [2^e, 2^(e+1)) below L of (length share) * ulp^2 / 12
            let mut total = 0.0;
            let mut hi = l;
            let mut e = l.log2().floor();
            for _ in 0..60 {
                let lo = 2f64.powf(e).min(hi);
                let ulp = 2f64.powf(e - 23.0);
                total += (hi - lo) / l * ulp * ulp / 12.0;
                hi = lo;
                e -= 1.0;
                if hi <= 0.0 || hi < l * 1e-12 {
                    break;
                }
            }
            total
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_sums_of_two_particles() {
        let domain = Domain::triply_periodic([1.0, 1.0, 1.0]).expect("box");
        // two charges 0.05 apart across the face x = 0, N = 2: r_0 = (1/2)^(1/3)
        let pos = [[0.02, 0.5, 0.5], [0.97, 0.5, 0.5]];
        let q = [1.0, -2.0];
        let s = Sources::laplace(&pos, &q);
        let st = PairStatistics::measure(&[KernelPart::Laplace], &domain, &s, None);
        let r4 = 0.05f64.powi(4);
        let expect = (4.0 + 1.0) / r4;
        assert!((st.parts[0].s4 - expect).abs() < 1e-6 * expect, "{} vs {expect}", st.parts[0].s4);
        assert_eq!(st.parts[0].q, 5.0);
        assert_eq!(st.sampled, 2.0);
    }

    #[test]
    fn f32_rounding_of_a_unit_box() {
        // half the coordinates in [0.5, 1) with ulp 2^-24, a quarter with 2^-25, ...
        let d2 = f32_position_rounding2([1.0, 1.0, 1.0]);
        let top = 2f64.powi(-24).powi(2) / 12.0;
        let expect = 3.0 * top * (0.5 + 0.25 / 4.0 + 0.125 / 16.0 + 0.0625 / 64.0);
        assert!((d2 - expect).abs() < 1e-3 * expect, "{d2} vs {expect}");
    }
}
