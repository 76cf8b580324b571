//! Close-pair statistics of the caller's particles for the error model
//! ([`parki_farfield::stats`]), measured on one process or over MPI ranks.

use parki_comm::{Comm, ReduceOp};
use parki_core::{Domain, Kernel, KernelPart, Real, Sources};
use parki_farfield::occupancy::{MAX_SOURCES, MAX_TARGETS};
use parki_farfield::stats;
use parki_farfield::{Occupancy, PairStatistics, PositionRounding};

use crate::units::{self, ScaledInputs, Units};

/// Close-pair statistics of a particle set for the error model
/// ([`parki_farfield::stats`]), and whether the solver's positions are the caller's exact
/// ones or rounded from f64 to f32, and how ([`PositionRounding`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SourceStatistics {
    pub(crate) pairs: PairStatistics,
    pub(crate) rounding: PositionRounding,
}

impl SourceStatistics {
    /// Measures the statistics of `sources` and `targets` (`None`: the sources) in `domain`,
    /// each rank passing the particles it holds. Collective: on several ranks the sources move
    /// to slabs along z with their neighbours within `r_0` and the sampled targets to their
    /// slab, so every close pair is counted once and the result does not depend on the rank
    /// count or the split. `O(N)`, at most about 100 000 sampled targets in all.
    /// `rounding`: whether the positions are f64 data that the solver will see narrowed to f32
    /// ([`PositionRounding::F32Box`], given to `evaluate`; [`PositionRounding::F32Cells`], given
    /// to `evaluate_exact` with the f64 positions, as the application's `precision = "f32"`
    /// does), so that their round-off enters the error estimate and a tolerance below it is
    /// refused. Measured in the length unit a solver for `domain`
    /// computes in ([`crate::DistEwaldSolver::length_unit`]; 1 for boxes near 1): pass them to
    /// a solver for the same box.
    pub fn measure<T: Real>(
        comm: &Comm,
        kernel: Kernel,
        domain: &Domain,
        sources: &Sources<T>,
        targets: Option<&[[T; 3]]>,
        rounding: PositionRounding,
    ) -> Self {
        // in the length unit the solvers compute in for this box ([`crate::units`]): positions
        // and dipoles over it, so that the statistics are the ones a solver for `domain` uses;
        // and in a strength unit (the solvers pick theirs per evaluation) so that the sums of
        // squared strengths stay in range: the error model reads ratios of them
        let length = units::box_unit(domain);
        let largest = comm.max(parki_core::units::largest_strength(kernel, sources, length));
        let scaled_units = Units { length, strength: parki_core::units::strength_unit(largest) };
        if let (true, Ok(scaled_domain)) = (scaled_units.rescaled(), units::domain_in(domain, length)) {
            let mut scaled = ScaledInputs::default();
            scaled.fill(sources, targets, scaled_units);
            let points = targets.map(|t| scaled.points(t));
            return Self::measure(comm, kernel, &scaled_domain, &scaled.sources(sources), points, rounding);
        }
        let pairs = if comm.size() == 1 {
            PairStatistics::measure(kernel.parts(), domain, sources, targets)
        } else {
            distributed_pairs(comm, kernel.parts(), domain, sources, targets)
        };
        Self { pairs, rounding }
    }

    /// The pair statistics.
    pub fn pairs(&self) -> &PairStatistics {
        &self.pairs
    }

    /// How the positions a solver sees were rounded ([`measure`](Self::measure)'s `rounding`).
    pub fn rounding(&self) -> PositionRounding {
        self.rounding
    }

    /// The same statistics for positions rounded as `rounding` says (for a solver in another
    /// precision on the same particles: [`PositionRounding::Exact`] for f64).
    pub fn with_rounding(self, rounding: PositionRounding) -> Self {
        Self { rounding, ..self }
    }
}

/// Measures the neighbour-cell occupancy ([`parki_farfield::occupancy`]) of `sources` and
/// `targets` (`None`: the sources) in `domain`, each rank passing the positions it holds, in
/// the length unit a solver for `domain` computes in (as [`SourceStatistics::measure`]).
/// Collective: the hash-chosen samples (at most 65 536 sources and 16 384 targets) are gathered
/// on every rank, so every rank computes the same ratios whatever the split. `O(N)` to sample,
/// then about 0.1 s on the samples.
pub fn measure_occupancy<T: Real>(
    comm: &Comm,
    domain: &Domain,
    sources: &[[T; 3]],
    targets: Option<&[[T; 3]]>,
) -> Occupancy {
    // in the length unit the solvers compute in for this box (see SourceStatistics::measure)
    let unit = units::box_unit(domain);
    let scaled_domain = units::domain_in(domain, unit);
    let (domain, unit) = match &scaled_domain {
        Ok(d) => (d, unit),
        Err(_) => (domain, 1.0),
    };
    let ns = comm.sum(sources.len() as f64) as usize;
    let gather = |local: &[[T; 3]], total: usize, max: usize| -> Vec<[f64; 3]> {
        let stride = stats::stride_at_most(total, max);
        let mine: Vec<[f64; 3]> =
            local.iter().map(|p| p.map(|x| x.to_f64() / unit)).filter(|p| stats::sampled(p, stride)).collect();
        comm.all_gatherv(&mine)
    };
    let src = gather(sources, ns, MAX_SOURCES);
    let (tgt, same) = match targets {
        Some(t) => (gather(t, comm.sum(t.len() as f64) as usize, MAX_TARGETS), false),
        None => (gather(sources, ns, MAX_TARGETS), true),
    };
    Occupancy::measure(domain, &src, ns, &tgt, same)
}

/// Distance along z from `z` to the slab `[s t, (s + 1) t)` of a periodic axis of length `lz`.
fn slab_distance(z: f64, s: usize, t: f64, lz: f64) -> f64 {
    let (lo, hi) = (s as f64 * t, (s + 1) as f64 * t);
    [-lz, 0.0, lz].iter().map(|&shift| (lo - (z + shift)).max(z + shift - hi).max(0.0)).fold(f64::INFINITY, f64::min)
}

/// [`SourceStatistics::measure`] on several ranks: sources to their z slab and to every slab
/// within `r_0` of them, sampled targets to their slab, [`parki_farfield::stats::pair_sums`] on
/// each rank, the sums added up.
fn distributed_pairs<T: Real>(
    comm: &Comm,
    parts: &[KernelPart],
    domain: &Domain,
    sources: &Sources<T>,
    targets: Option<&[[T; 3]]>,
) -> PairStatistics {
    let ranks = comm.size();
    let l = domain.lengths();
    let ns_total = comm.sum(sources.positions.len() as f64);
    let radius = (domain.volume() / ns_total.max(1.0)).cbrt();
    let w = stats::strengths(parts, sources);
    let thick = l[2] / ranks as f64;
    let slab_of = |z: f64| ((z.rem_euclid(l[2]) / thick) as usize).min(ranks - 1);
    let reach = (radius / thick).ceil() as i64;
    // sources: [x, y, z, w0, w1] to the owning slab and the slabs within r_0
    let mut per_rank: Vec<Vec<f64>> = vec![Vec::new(); ranks];
    let mut slabs = Vec::new();
    let pos64: Vec<[f64; 3]> = sources.positions.iter().map(|p| p.map(|v| v.to_f64())).collect();
    for (j, &x) in pos64.iter().enumerate() {
        let own = slab_of(x[2]) as i64;
        slabs.clear();
        for k in -reach..=reach {
            let s = (own + k).rem_euclid(ranks as i64) as usize;
            if k == 0 || slab_distance(x[2].rem_euclid(l[2]), s, thick, l[2]) < radius {
                slabs.push(s);
            }
        }
        slabs.sort_unstable();
        slabs.dedup();
        for &s in &slabs {
            per_rank[s].extend_from_slice(&[x[0], x[1], x[2], w[j][0], w[j][1]]);
        }
    }
    let counts: Vec<usize> = per_rank.iter().map(Vec::len).collect();
    let flat: Vec<f64> = per_rank.concat();
    let mut recv = Vec::new();
    comm.alltoallv(&flat, &counts, &mut recv);
    let pos: Vec<[f64; 3]> = recv.chunks_exact(5).map(|c| [c[0], c[1], c[2]]).collect();
    let rw: Vec<[f64; 2]> = recv.chunks_exact(5).map(|c| [c[3], c[4]]).collect();
    // sampled targets to their slab
    let converted: Vec<[f64; 3]>;
    let local: &[[f64; 3]] = match targets {
        Some(t) => {
            converted = t.iter().map(|p| p.map(|x| x.to_f64())).collect();
            &converted
        }
        None => &pos64,
    };
    let stride = stats::stride(comm.sum(local.len() as f64) as usize);
    let mut per_rank: Vec<Vec<f64>> = vec![Vec::new(); ranks];
    for x in local.iter().filter(|x| stats::sampled(x, stride)) {
        per_rank[slab_of(x[2])].extend_from_slice(x);
    }
    let counts: Vec<usize> = per_rank.iter().map(Vec::len).collect();
    let mut recv = Vec::new();
    comm.alltoallv(&per_rank.concat(), &counts, &mut recv);
    let sample: Vec<[f64; 3]> = recv.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect();
    let per_target = stats::pair_sums(domain, radius, &pos, &rw, &sample);
    // every rank gets every sampled target's sums (at most about 1e5 x 6 values), so that the
    // typical-target quantile is the same on every rank and for every split
    let all: Vec<[f64; 6]> = comm.all_gatherv(&per_target);
    let mut q = [w.iter().map(|x| x[0]).sum(), w.iter().map(|x| x[1]).sum()];
    comm.all_reduce_f64(&mut q, ReduceOp::Sum);
    stats::from_targets(radius, &all, ns_total, q)
}
