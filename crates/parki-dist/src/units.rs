//! The length unit a solver computes in: the caller's box rescaled by a power of two when its
//! longest side lies far from 1 ([`parki_core::units`]).
//!
//! With `x = s x'` and dipoles `s d'`, every kernel's potential is `u = u' / s` and the Laplace
//! field `E = E' / s^2` (the Laplace kernel and the Stokeslet are of degree -1; the stresslet,
//! of degree -2, is of degree -1 on the dipoles over `s`). A solver planned for a box of sides
//! `L` plans for `L / s`, reads the caller's positions and dipoles through copies over `s`, and
//! divides what it writes by `s` (the field by `s` twice). Every one of these is exact for a power
//! of two, so the values are bit for bit those of the unit problem, scaled; but the error model's
//! powers of `xi` and the kernels' `1/r^5` (f32's range ends near `1e38`) meet numbers near 1.

use parki_core::{Domain, Output, Real, Result, Sources};

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

/// Copies of the caller's positions, dipoles and target positions in a length unit, kept by a
/// solver between evaluations (refilled in place: no allocation once they have the size).
#[derive(Debug, Default)]
pub(crate) struct ScaledInputs<T> {
    positions: Vec<[T; 3]>,
    dipoles: Vec<[T; 3]>,
    targets: Vec<[T; 3]>,
}

impl<T: Real> ScaledInputs<T> {
    /// Fills the copies from `sources` and `targets` over `s`.
    pub(crate) fn fill(&mut self, sources: &Sources<T>, targets: Option<&[[T; 3]]>, s: f64) {
        let copy = |into: &mut Vec<[T; 3]>, from: &[[T; 3]]| {
            into.clear();
            into.extend(from.iter().map(|p| p.map(|x| over(x, s))));
        };
        copy(&mut self.positions, sources.positions);
        copy(&mut self.dipoles, sources.dipoles.unwrap_or(&[]));
        copy(&mut self.targets, targets.unwrap_or(&[]));
    }

    /// `sources` with the copied positions and dipoles.
    pub(crate) fn sources<'a>(&'a self, sources: &Sources<'a, T>) -> Sources<'a, T> {
        Sources { positions: &self.positions, dipoles: sources.dipoles.map(|_| &self.dipoles[..]), ..*sources }
    }

    /// The copied target positions.
    pub(crate) fn targets(&self) -> &[[T; 3]] {
        &self.targets
    }

    /// Bytes per rank the copies take for `sources` sources (with dipoles when `dipoles`) and
    /// `targets` separate targets.
    pub(crate) fn bytes(sources: f64, targets: f64, dipoles: bool) -> f64 {
        let per_source = if dipoles { 6.0 } else { 3.0 };
        (sources * per_source + targets * 3.0) * T::BYTES as f64
    }
}

/// Scales values computed in the length unit `s` back to the caller's in place: per target,
/// the potential over `s`, the field that follows it over `s^2` (one factor at a time: exact,
/// and out of range only where the value itself is).
pub(crate) fn restore<T: Real>(output: Output, values: &mut [T], s: f64) {
    let potential = output.kernel.output_dim();
    for row in values.chunks_exact_mut(output.dim()) {
        let (u, e) = row.split_at_mut(potential);
        u.iter_mut().for_each(|v| *v = over(*v, s));
        e.iter_mut().for_each(|v| *v = T::from_f64(v.to_f64() / s / s));
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
        restore(Output::with_field(Kernel::Laplace).unwrap(), &mut v, 0.5);
        assert_eq!(v, [2.0, 8.0, 12.0, 16.0, 2.0, 4.0, 4.0, 4.0]);
    }
}
