//! The units a run computes in: the user's lengths and strengths rescaled by powers of two when
//! they lie far from 1.
//!
//! Every kernel parki-dist sums is homogeneous in the distance. The Laplace kernel, the
//! Stokeslet, and the Yukawa, regularised and `sin(kr)/r` kernels with their parameters rescaled
//! (`kappa s`, `epsilon / s`, `k s`) satisfy `G(s r) = G(r) / s`; the stresslet
//! `T(s r) = T(r) / s^2`. With lengths `x = s x'`, charges and forces `w` times the primed ones
//! and dipoles `w s` times theirs,
//!
//! ```text
//! u(x) = (w / s) u'(x'),        E(x) = -grad u = (w / s^2) E'(x'),
//! ```
//!
//! so a run may compute the primed problem and scale its results back. With `s` and `w` powers of
//! two every one of these multiplications is exact in binary floating point (the exponent moves,
//! the significand does not), so the primed run makes exactly the roundings of the original one,
//! and the values it returns are the original problem's values; but its parameter selection, its
//! error model and its kernel arithmetic only meet numbers near 1. Without this, a box of
//! `1e-60` made the error model's powers of `xi` overflow (a wrong answer, silently), one of
//! `1e-200` never finished planning, and in f32 the stresslet's `1/r^5` overflowed for a box of
//! `1e-6` (a micrometre in SI units).
//!
//! Lengths within [`LENGTH_COMFORT`] and strengths within [`STRENGTH_COMFORT`] of 1 are left as
//! they are (`s = w = 1`), so that every message and parameter a run prints is in the user's units
//! in every ordinary case; a rescaled run says so on its first lines and converts the parameters
//! it reports back (docs/design.md, "Units").

use parki_comm::Comm;
use parki_core::units::{box_unit, largest_strength, length_unit, negated_bounds, strength_unit};
pub use parki_core::units::{power_of_two_near, Units, LENGTH_COMFORT, STRENGTH_COMFORT};
use parki_core::{Domain, Result};
use parki_treecode::TreeKernel;

use crate::input::Problem;

/// What a run does with the units it computes in ([`Units`]: the length unit `s` and the
/// strength unit `w`, both powers of two): picks them for its problem, rescales its particles,
/// scales its results back and says so.
pub trait RunUnits: Sized {
    /// The spectral Ewald sum's units for `prob` (as read, wrapped and checked): the length unit
    /// of its box ([`box_unit`]) and the strength unit of its largest charge, force
    /// component, or dipole component times normal component over `s` (over all ranks).
    /// Collective.
    fn for_ewald(comm: &Comm, prob: &Problem) -> Self;

    /// The free-space methods' units: the length unit of the sources' and targets' extent over
    /// all ranks (the longest side of their bounding box), the strength unit of the largest
    /// input of `kernel` (`inputs`: `kernel.input_width()` per source, as
    /// `crate::treecode::particles` reads them; dipole times normal over `s`). Collective.
    fn for_free_space(
        comm: &Comm,
        kernel: TreeKernel,
        sources: &[[f64; 3]],
        inputs: &[f64],
        targets: Option<&[[f64; 3]]>,
    ) -> Self;

    /// The factor `w / s` from a computed potential to the user's.
    fn potential_factor(&self) -> f64;

    /// Rescales `prob` into these units in place: the box and every position by `1 / s`, charges
    /// and forces by `1 / w`, dipoles by `1 / (w s)` (normals as they are).
    ///
    /// # Errors
    /// None in practice: the rescaled box's sides are positive and finite when the user's are.
    fn apply_ewald(&self, prob: &mut Problem) -> Result<()>;

    /// Rescales the free-space methods' particles in place (as [`RunUnits::apply_ewald`],
    /// `inputs` laid out as `kernel.input_width()` per source) and returns `kernel` with its
    /// parameters in these units.
    fn apply_free_space(
        &self,
        kernel: TreeKernel,
        sources: &mut [[f64; 3]],
        inputs: &mut [f64],
        targets: &mut [[f64; 3]],
    ) -> TreeKernel;

    /// Scales computed values of degree `-p` in the distance (the potential `p = 1`, the field
    /// `p = 2`) back to the user's units in place: times `w / s^p`, each in one step.
    fn scale_back(&self, values: &mut [f64], p: i32);

    /// The line a rescaled run prints before planning (`None` when nothing is rescaled).
    fn line(&self) -> Option<String>;

    /// The report's `units` object.
    fn to_json(&self) -> serde_json::Value;
}

impl RunUnits for Units {
    fn for_ewald(comm: &Comm, prob: &Problem) -> Units {
        let length = box_unit(prob.domain.lengths());
        let m = largest_strength(prob.kernel, &prob.sources(), length);
        Units { length, strength: strength_unit(comm.max(m)) }
    }

    fn for_free_space(
        comm: &Comm,
        kernel: TreeKernel,
        sources: &[[f64; 3]],
        inputs: &[f64],
        targets: Option<&[[f64; 3]]>,
    ) -> Units {
        let mut b = negated_bounds(&[sources, targets.unwrap_or(&[])]);
        comm.all_reduce_f64(&mut b, parki_comm::ReduceOp::Max);
        let length = length_unit(&b);
        let w = kernel.input_width();
        let largest = |v: &[f64]| v.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        let m = inputs
            .chunks_exact(w.max(1))
            .map(|row| match kernel {
                TreeKernel::Stresslet => largest(&row[0..3]) * largest(&row[3..6]) / length,
                TreeKernel::Stokes => largest(&row[0..3]).max(largest(&row[3..6]) * largest(&row[6..9]) / length),
                _ => largest(row),
            })
            .fold(0.0f64, f64::max);
        Units { length, strength: strength_unit(comm.max(m)) }
    }

    fn potential_factor(&self) -> f64 {
        self.strength / self.length
    }

    fn apply_ewald(&self, prob: &mut Problem) -> Result<()> {
        if !self.rescaled() {
            return Ok(());
        }
        let (s, w) = (self.length, self.strength);
        prob.domain = Domain::new(prob.domain.lengths().map(|l| l / s), prob.domain.periodic())?;
        let points = |v: &mut [[f64; 3]]| v.iter_mut().for_each(|p| *p = p.map(|x| x / s));
        points(&mut prob.positions);
        prob.targets.iter_mut().for_each(|t| points(t));
        prob.charges.iter_mut().flatten().for_each(|q| *q /= w);
        prob.forces.iter_mut().flatten().for_each(|f| *f = f.map(|x| x / w));
        prob.dipoles.iter_mut().flatten().for_each(|d| *d = d.map(|x| x / w / s));
        Ok(())
    }

    fn apply_free_space(
        &self,
        kernel: TreeKernel,
        sources: &mut [[f64; 3]],
        inputs: &mut [f64],
        targets: &mut [[f64; 3]],
    ) -> TreeKernel {
        if !self.rescaled() {
            return kernel;
        }
        let (s, w) = (self.length, self.strength);
        for p in sources.iter_mut().chain(targets.iter_mut()) {
            *p = p.map(|x| x / s);
        }
        let width = kernel.input_width();
        for row in inputs.chunks_exact_mut(width.max(1)) {
            match kernel {
                TreeKernel::Stresslet => row[0..3].iter_mut().for_each(|d| *d = *d / w / s),
                TreeKernel::Stokes => {
                    row[0..3].iter_mut().for_each(|f| *f /= w);
                    row[3..6].iter_mut().for_each(|d| *d = *d / w / s);
                }
                _ => row.iter_mut().for_each(|q| *q /= w),
            }
        }
        kernel.in_length_unit(s)
    }

    fn scale_back(&self, values: &mut [f64], p: i32) {
        if self.rescaled() {
            values.iter_mut().for_each(|v| *v = self.restore(*v, p));
        }
    }

    fn line(&self) -> Option<String> {
        self.rescaled().then(|| {
            format!(
                "computing in units of length 2^{} ({:.4e}) and strength 2^{} ({:.4e}), exact powers of two: the \
                 inputs lie far from 1; the results are scaled back, and the plan's parameters are printed and \
                 reported in the input's units",
                self.length.log2(),
                self.length,
                self.strength.log2(),
                self.strength
            )
        })
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({"length": self.length, "strength": self.strength})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parki_core::units::two_to;

    #[test]
    fn units_are_exact_powers_of_two_and_one_near_one() {
        assert_eq!(power_of_two_near(1.0), 1.0);
        assert_eq!(power_of_two_near(3.0), 4.0);
        assert_eq!(power_of_two_near(1e-300), two_to(-997));
        assert_eq!(power_of_two_near(f64::NAN), 1.0);
        assert_eq!(two_to(-1000) * two_to(1000), 1.0);
        for x in [1e-200, 1e-30, 7.5e-7, 1e5, 1e150] {
            let p = power_of_two_near(x);
            assert_eq!(p.to_bits() & ((1u64 << 52) - 1), 0, "{x}: {p} has a significand");
            assert!((p / x).log2().abs() <= 0.5 + 1e-12, "{x}: {p}");
        }
        assert_eq!(box_unit([1.0, 1.2, 0.9]), 1.0);
        assert_eq!(box_unit([1000.0, 1.0, 1.0]), 1.0);
        assert_eq!(box_unit([1e-6, 1e-6, 1e-6]), power_of_two_near(1e-6));
        // a value scaled by a power of two and back is the value, bit for bit
        let s = power_of_two_near(1e-200);
        for x in [0.1, 1.0 / 3.0, 0.987654321, 1e-5] {
            assert_eq!(x * s / s, x);
        }
    }
}
