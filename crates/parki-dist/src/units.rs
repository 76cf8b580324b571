//! The units a solver computes in: the caller's box rescaled by a power of two when its
//! longest side lies far from 1, and per evaluation the strengths rescaled by a power of two when
//! the largest lies far from 1 ([`parki_core::units`]).
//!
//! With `x = s x'`, charges and forces `w q'` and dipoles `w s d'`, every kernel's potential is
//! `u = (w / s) u'` and the Laplace field `E = (w / s^2) E'` (the Laplace kernel and the
//! Stokeslet are of degree -1; the stresslet, of degree -2, is of degree -1 on the dipoles over
//! `s`; every kernel is linear in its densities). A solver planned for a box of sides `L` plans
//! for `L / s`, reads the caller's positions, strengths and dipoles through copies in its units,
//! and multiplies what it writes by `w / s` (the field by `w / s^2`). Every one of these is exact
//! for powers of two, so the values are bit for bit those of the unit problem, scaled; but the
//! error model's powers of `xi`, the kernels' `1/r^5` (f32's range ends near `1e38`) and the
//! grids' sums of strengths meet numbers near 1.

pub(crate) use parki_core::units::Units;
use parki_core::{Domain, Output, Real, Result, Sources};

use crate::options::{ExactPositions, Targets};
use rayon::iter::{IndexedParallelIterator, IntoParallelRefIterator, ParallelExtend, ParallelIterator};

/// The length unit of a box ([`parki_core::units::box_unit`] of its sides).
pub(crate) fn box_unit(domain: &Domain) -> f64 {
    parki_core::units::box_unit(domain.lengths())
}

/// `domain` in the length unit `s`.
pub(crate) fn domain_in(domain: &Domain, s: f64) -> Result<Domain> {
    Domain::new(domain.lengths().map(|l| l / s), domain.periodic())
}

/// `x / s` in `T` (through f64: exact for a power of two `s` where the result is a normal `T`).
#[inline]
fn over<T: Real>(x: T, s: f64) -> T {
    T::from_f64(x.to_f64() / s)
}

/// Copies of the caller's inputs in the units of an evaluation, kept by a solver between
/// evaluations (refilled in place: no allocation once they have the size): positions and
/// targets over `s` when `s != 1`, charges and forces over `w` when `w != 1`, dipoles over
/// `w s` when that is not 1. What is not copied is read from the caller's arrays.
#[derive(Debug, Default)]
pub(crate) struct ScaledInputs<T> {
    positions: Vec<[T; 3]>,
    charges: Vec<T>,
    forces: Vec<[T; 3]>,
    dipoles: Vec<[T; 3]>,
    targets: Vec<[T; 3]>,
    /// The position residuals of the sources and targets ([`parki_core::residual`]) in the
    /// length unit, from the exact positions of [`fill_residuals`](Self::fill_residuals).
    residuals: Vec<[T; 3]>,
    target_residuals: Vec<[T; 3]>,
    /// Whether the last evaluation carries residuals (every rank alike).
    with_residuals: bool,
    units: Option<Units>,
}

impl<T: Real> ScaledInputs<T> {
    /// Fills the copies from `sources` and `targets` in `units`.
    pub(crate) fn fill(&mut self, sources: &Sources<T>, targets: Option<&[[T; 3]]>, units: Units) {
        let copy = |into: &mut Vec<[T; 3]>, from: Option<&[[T; 3]]>, by: f64| {
            into.clear();
            if by != 1.0 {
                into.extend(from.unwrap_or(&[]).iter().map(|p| p.map(|x| over(x, by))));
            }
        };
        let (s, w) = (units.length, units.strength);
        copy(&mut self.positions, Some(sources.positions), s);
        copy(&mut self.targets, targets, s);
        copy(&mut self.forces, sources.forces, w);
        // w s is a power of two near the largest dipole times normal: in range
        copy(&mut self.dipoles, sources.dipoles, w * s);
        self.charges.clear();
        if w != 1.0 {
            self.charges.extend(sources.charges.unwrap_or(&[]).iter().map(|&q| over(q, w)));
        }
        self.units = Some(units);
    }

    /// The residuals of the positions in the units of the last [`fill`](Self::fill) (`sources`
    /// and `targets`, as given to it) from their `exact` f64 values, `exact / s - (the
    /// position / s)` rounded to `T`, when `with` (some rank gave exact positions: every rank
    /// carries residuals, zero where it gave none). Call after [`fill`](Self::fill).
    pub(crate) fn fill_residuals(
        &mut self,
        sources: &Sources<T>,
        targets: Option<&[[T; 3]]>,
        exact: Option<ExactPositions<'_>>,
        with: bool,
    ) {
        self.residuals.clear();
        self.target_residuals.clear();
        self.with_residuals = with;
        let Some(units) = self.units.filter(|_| with) else { return };
        let Some(exact) = exact else {
            self.residuals.resize(sources.positions.len(), [T::ZERO; 3]);
            self.target_residuals.resize(targets.map_or(0, <[_]>::len), [T::ZERO; 3]);
            return;
        };
        let s = units.length;
        let fill = |into: &mut Vec<[T; 3]>, rounded: &[[T; 3]], exact: &[[f64; 3]]| {
            // x / s and fl(x) / s exact (a power of two s, normal results): the residual of the
            // scaled position is the scaled residual
            into.par_extend(
                rounded
                    .par_iter()
                    .zip(exact)
                    .map(|(p, e)| [0, 1, 2].map(|d| parki_core::residual(e[d] / s, over(p[d], s)))),
            );
        };
        fill(&mut self.residuals, sources.positions, exact.sources);
        if let (Some(p), Some(e)) = (targets, exact.targets) {
            fill(&mut self.target_residuals, p, e);
        }
    }

    /// The sources' position residuals of the last [`fill_residuals`](Self::fill_residuals),
    /// if it made them.
    pub(crate) fn residuals(&self) -> Option<&[[T; 3]]> {
        self.with_residuals.then_some(&self.residuals[..])
    }

    /// The separate targets' position residuals of the last
    /// [`fill_residuals`](Self::fill_residuals), if it made them (empty when the targets are
    /// the sources).
    pub(crate) fn target_residuals(&self) -> Option<&[[T; 3]]> {
        self.with_residuals.then_some(&self.target_residuals[..])
    }

    /// `sources` in the units of the last [`fill`](Self::fill): the copies where there are.
    pub(crate) fn sources<'a>(&'a self, sources: &Sources<'a, T>) -> Sources<'a, T> {
        let Some(Units { length: s, strength: w }) = self.units else { return *sources };
        Sources {
            positions: if s != 1.0 { &self.positions } else { sources.positions },
            charges: sources.charges.map(|c| if w != 1.0 { &self.charges[..] } else { c }),
            forces: sources.forces.map(|f| if w != 1.0 { &self.forces[..] } else { f }),
            dipoles: sources.dipoles.map(|d| if w * s != 1.0 { &self.dipoles[..] } else { d }),
            normals: sources.normals,
        }
    }

    /// `targets` in the units of the last [`fill`](Self::fill).
    pub(crate) fn targets<'a>(&'a self, targets: Targets<'a, T>) -> Targets<'a, T> {
        match targets {
            Targets::Points(p) => Targets::Points(self.points(p)),
            Targets::Sources => Targets::Sources,
        }
    }

    /// The target points `p` given to the last [`fill`](Self::fill), in its units.
    pub(crate) fn points<'a>(&'a self, p: &'a [[T; 3]]) -> &'a [[T; 3]] {
        match self.units {
            Some(u) if u.length != 1.0 => &self.targets,
            _ => p,
        }
    }

    /// Bytes per rank the position residuals of an f32 evaluation on exact positions take for
    /// `sources` sources and `targets` targets (0 in f64): the solver's own, and on several
    /// ranks the routed ones and the ghosts' (`routed`; about as many again, the ghosts a
    /// fraction more, counted as twice).
    pub(crate) fn residual_bytes(sources: f64, targets: f64, routed: bool) -> f64 {
        if T::BYTES >= 8 {
            return 0.0;
        }
        (sources + targets) * 3.0 * T::BYTES as f64 * if routed { 3.0 } else { 1.0 }
    }

    /// Bytes per rank the position copies of a length unit take for `sources` sources (with
    /// dipoles when `dipoles`) and `targets` separate targets (the strength copies, made only
    /// for strengths beyond `2^40` or below `2^-40`, are not counted).
    pub(crate) fn bytes(sources: f64, targets: f64, dipoles: bool) -> f64 {
        let per_source = if dipoles { 6.0 } else { 3.0 };
        (sources * per_source + targets * 3.0) * T::BYTES as f64
    }
}

/// Scales values computed in `units` back to the caller's in place: per target, the potential
/// times `w / s`, the field that follows it times `w / s^2`, each by its power of two in one
/// step (exact, one rounding to `T`, no intermediate overflow: out of range only where the
/// value itself is).
pub(crate) fn restore<T: Real>(output: Output, values: &mut [T], units: Units) {
    let potential = output.kernel.output_dim();
    let scale = |v: &mut T, p: i32| *v = T::from_f64(units.restore(v.to_f64(), p));
    for row in values.chunks_exact_mut(output.dim()) {
        let (u, e) = row.split_at_mut(potential);
        u.iter_mut().for_each(|v| scale(v, 1));
        e.iter_mut().for_each(|v| scale(v, 2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parki_core::Kernel;

    #[test]
    fn units_of_boxes_and_restored_values() {
        let d = |l: f64| Domain::triply_periodic([l, l / 2.0, l]).unwrap();
        assert_eq!(box_unit(&d(1.0)), 1.0);
        assert_eq!(box_unit(&d(1000.0)), 1.0);
        assert_eq!(box_unit(&d(1e-5)), 2f64.powi(-17));
        assert_eq!(domain_in(&d(1e-5), 2f64.powi(-17)).unwrap().lengths()[1], 1e-5 / 2f64.powi(-17) / 2.0);
        let mut v = [1.0f32, 2.0, 3.0, 4.0, 1.0, 1.0, 1.0, 1.0];
        restore(Output::with_field(Kernel::Laplace).unwrap(), &mut v, Units { length: 0.5, strength: 1.0 });
        assert_eq!(v, [2.0, 8.0, 12.0, 16.0, 2.0, 4.0, 4.0, 4.0]);
        restore(Output::with_field(Kernel::Laplace).unwrap(), &mut v, Units { length: 2.0, strength: 2f64.powi(-130) });
        assert_eq!(v[0], 2f32.powi(-130));
        assert_eq!(v[1], 2f32.powi(-129));
        let mut big = [2f64.powi(-800)];
        restore(
            Output::potential(Kernel::Laplace),
            &mut big,
            Units { length: 2f64.powi(-700), strength: 2f64.powi(700) },
        );
        assert_eq!(big[0], 2f64.powi(600));
    }
}
