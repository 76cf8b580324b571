//! The run's accuracy check: the potential at K random targets against a reference written
//! independently of the fast path (`parki-reference`): the classical Ewald sum (3P), the
//! free-space direct sum (0P), the image sum along the periodic axis (1P), the classical sum of a
//! tall box with the planar correction (2P), computed over all ranks.
//!
//! The K targets are drawn from the global input rows with one seeded generator (the same on
//! every rank, independent of the rank count). Their positions and computed values are shared
//! by a sum in which only the owning rank contributes. The classical sum is linear in the
//! sources, so every rank sums its own sources at the K targets and the partial sums add up to
//! the reference. The cost is O(N K / R) per rank (see [`classical_check`]), with progress lines
//! during a long check.

use std::time::Instant;

use parki_comm::{Comm, ReduceOp};
use parki_reference::direct::free_space_sum;
use parki_reference::images::{line_sum, planar_from_tall_box};
use parki_reference::ClassicalEwald;
use serde_json::{json, Value};

use crate::input::Problem;
use parki_reference::generate::Rng;

/// The outcome of a check.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// Targets compared.
    pub targets: usize,
    /// The relative RMS error of the whole potential, `||u - u_ref|| / ||u_ref||` over all
    /// targets, estimated from the checked ones: their mean square error over the mean square
    /// of the computed potential at every target (exact when every target is checked). Not the
    /// error normalised by the checked targets' own values: a few targets with very close
    /// neighbours carry most of a stresslet potential's norm, and a sample that misses them
    /// would report a relative error of the sample, not of the run.
    pub relative_rms_error: f64,
    /// `||u - u_ref|| / ||u_ref||` over the checked targets alone.
    pub sample_relative_rms_error: f64,
    /// Largest absolute difference.
    pub max_abs_error: f64,
    /// RMS of the reference values.
    pub reference_rms: f64,
    /// Seconds.
    pub seconds: f64,
    /// The reference used.
    pub reference: &'static str,
    /// The Laplace field's errors, `(relative_rms_error, sample_relative_rms_error)` as for the
    /// potential, when the run computes the field.
    pub field: Option<(f64, f64)>,
}

impl Check {
    /// The report's `check` object.
    pub fn to_json(&self) -> Value {
        json!({
            "targets": self.targets,
            "relative_rms_error": self.relative_rms_error,
            "sample_relative_rms_error": self.sample_relative_rms_error,
            "max_abs_error": self.max_abs_error,
            "reference_rms": self.reference_rms,
            "reference": format!("{} (parki-reference), f64", self.reference),
            "seconds": self.seconds,
            "field": self.field.map(|(whole, sample)| json!({
                "relative_rms_error": whole,
                "sample_relative_rms_error": sample,
            })),
        })
    }
}

/// `k` distinct indices below `n`, drawn in order with a fixed seed (rejection of repeats; `k`
/// is small against `n` in practice, and all of `0..n` when `k >= n`).
pub fn sample_indices(n: usize, k: usize) -> Vec<usize> {
    if k >= n {
        return (0..n).collect();
    }
    let mut rng = Rng::new(0xc4ec);
    let mut chosen = std::collections::HashSet::with_capacity(k);
    let mut out = Vec::with_capacity(k);
    while out.len() < k {
        let i = (rng.next_u64() % n as u64) as usize;
        if chosen.insert(i) {
            out.push(i);
        }
    }
    out
}

/// The reference of a box with `periodicity` periodic axes.
pub fn reference_name(periodicity: usize) -> &'static str {
    match periodicity {
        3 => "classical Ewald sum",
        0 => "free-space direct sum",
        1 => "image sum along the periodic axis (Euler-Maclaurin tail)",
        _ => "classical Ewald sum of a tall box with the planar correction",
    }
}

/// A reference evaluated at a chunk of targets (this rank's sources).
type ReferenceAt<'a> = dyn Fn(&[[f64; 3]]) -> Vec<f64> + 'a;

/// Seconds between progress lines of a long check.
const PROGRESS_SECONDS: f64 = 2.0;

/// Compares this rank's potential `u` (its target rows, input order; with `field`, the
/// potential and then the Laplace field per target) with the classical Ewald sum at `k` random
/// targets of the whole set; the potential and the field are measured each against its own norm. The reference uses the particles as read, in
/// f64 (after `wrap` in f64: [`crate::input::prepare`]), never the copies the solver rounded to
/// its precision, so that it measures the error of the whole run. Its splitting is chosen for
/// this rank's sources and the `k` targets in this box ([`ClassicalEwald::new`]): the cost is
/// the structure factors once, then each target at `O(Ns / R)`. `progress` receives a line
/// every few seconds (rank 0's view; pass a no-op elsewhere). Collective.
pub fn classical_check(
    comm: &Comm,
    prob: &Problem,
    field: bool,
    u: &[f64],
    k: usize,
    progress: &dyn Fn(&str),
) -> Check {
    let t = Instant::now();
    let output = parki_core::Output { kernel: prob.kernel, field };
    let dim = output.dim();
    let idx = sample_indices(prob.targets_total(), k);
    let k = idx.len();
    let rows = &prob.target_rows;
    let local_points = prob.targets.as_deref().unwrap_or(&prob.positions);
    // positions and values of the chosen targets, filled by their owners and summed
    let mut shared = vec![0.0f64; k * (3 + dim)];
    for (a, &i) in idx.iter().enumerate() {
        if rows.contains(&i) {
            let l = i - rows.start;
            let row = &mut shared[a * (3 + dim)..(a + 1) * (3 + dim)];
            row[..3].copy_from_slice(&local_points[l]);
            row[3..].copy_from_slice(&u[l * dim..(l + 1) * dim]);
        }
    }
    comm.all_reduce(&mut shared, ReduceOp::Sum);
    let tp: Vec<[f64; 3]> = shared.chunks_exact(3 + dim).map(|r| [r[0], r[1], r[2]]).collect();
    // this rank's sources, summed at the chosen targets (every reference is linear in them)
    let sources = prob.sources();
    let domain = &prob.domain;
    let periodicity = domain.periodicity();
    let ewald = (periodicity == 3).then(|| ClassicalEwald::new(prob.domain, sources.len(), k));
    let prepared = ewald.as_ref().map(|e| e.prepare(output, &sources));
    if let (Some(e), Some(p)) = (&ewald, &prepared) {
        progress(&format!(
            "check: classical Ewald sum with xi = {:.4}, {} wave vectors, structure factors of {} sources in {:.2} s",
            e.xi(),
            p.modes(),
            sources.len(),
            t.elapsed().as_secs_f64()
        ));
    }
    let name = reference_name(periodicity);
    let evaluate: Box<ReferenceAt<'_>> = match (periodicity, &prepared) {
        (3, Some(p)) => Box::new(|pts| p.evaluate(pts)),
        (0, _) => Box::new(|pts| free_space_sum(output, &sources, pts)),
        (1, _) => Box::new(|pts| line_sum(output, domain, &sources, pts)),
        _ => Box::new(|pts| planar_from_tall_box(output, domain, &sources, pts, 8.0)),
    };
    let mut reference = Vec::with_capacity(k * dim);
    let chunk = k.div_ceil(20).max(1);
    let mut last = Instant::now();
    for (c, points) in tp.chunks(chunk).enumerate() {
        reference.extend(evaluate(points));
        let done = ((c + 1) * chunk).min(k);
        if last.elapsed().as_secs_f64() >= PROGRESS_SECONDS && done < k {
            progress(&format!("check: {done} of {k} targets, {:.1} s", t.elapsed().as_secs_f64()));
            last = Instant::now();
        }
    }
    comm.all_reduce(&mut reference, ReduceOp::Sum);
    // the errors of the components `range` of every target: (whole, sample, max, reference rms)
    let errors = |range: std::ops::Range<usize>| {
        let width = range.len();
        let (mut num, mut den, mut maxe) = (0.0f64, 0.0f64, 0.0f64);
        for a in 0..k {
            for d in range.clone() {
                let r = reference[a * dim + d];
                let e = shared[a * (3 + dim) + 3 + d] - r;
                num += e * e;
                den += r * r;
                maxe = maxe.max(e.abs());
            }
        }
        // mean square of the computed values over every target of every rank
        let own = u.chunks_exact(dim).flat_map(|row| &row[range.clone()]);
        let mut whole = [own.map(|v| v * v).sum::<f64>(), (u.len() / dim * width) as f64];
        comm.all_reduce(&mut whole, ReduceOp::Sum);
        let sample = (num / den).sqrt();
        let relative = if k >= prob.targets_total() || whole[0] <= 0.0 {
            sample
        } else {
            (num / (k * width).max(1) as f64 / (whole[0] / whole[1])).sqrt()
        };
        (relative, sample, maxe, (den / (k * width).max(1) as f64).sqrt())
    };
    let kdim = prob.kernel.output_dim();
    let (relative, sample, maxe, rms) = errors(0..kdim);
    let field = field.then(|| errors(kdim..dim)).map(|(w, s, ..)| (w, s));
    Check {
        targets: k,
        relative_rms_error: relative,
        sample_relative_rms_error: sample,
        max_abs_error: maxe,
        reference_rms: rms,
        seconds: comm.max(t.elapsed().as_secs_f64()),
        reference: name,
        field,
    }
}

#[cfg(test)]
mod tests {
    use super::sample_indices;

    #[test]
    fn samples_are_distinct_and_in_range() {
        let s = sample_indices(1000, 100);
        let mut t = s.clone();
        t.sort_unstable();
        t.dedup();
        assert_eq!((s.len(), t.len()), (100, 100));
        assert!(s.iter().all(|&i| i < 1000));
        assert_eq!(sample_indices(5, 9), vec![0, 1, 2, 3, 4]);
        assert_eq!(s, sample_indices(1000, 100));
    }
}
