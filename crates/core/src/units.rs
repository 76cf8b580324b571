//! Length units by powers of two: the solvers compute far-from-1 inputs in a unit near their
//! extent, exactly.
//!
//! Every kernel parki-dist sums is homogeneous in the distance once its parameters are rescaled:
//! with `x = s x'`, `G(s r') = s^-p G'(r')` (`p = 1` for the Laplace kernel and the Stokeslet,
//! `p = 2` for the stresslet and a Laplace field). A solver that meets positions of extent
//! `1e-200` or `1e200` computes the primed problem (positions over `s`, `s` a power of two near
//! the extent) and multiplies its results by `s^-p`. Scaling by a power of two moves the exponent
//! and keeps the significand, so the primed problem makes the same roundings as the original and
//! the results are bit for bit the original's; but its squared distances, `1/r^5` and error
//! models stay inside the exponent range, where `r^2` at `1e-200` underflows to zero (a pair taken
//! for coincident) and `1/r^5` at `1e-70` overflows (NaN).
//!
//! Strengths rescale the same way: every kernel is linear in its densities, so with charges and
//! forces over `w` and dipoles over `w s` the results are `w s^-p` times the primed ones
//! ([`largest_strength`], [`STRENGTH_COMFORT`]): an f32 solver whose strengths are `1e35` or
//! subnormal (`1e-40`) computes with strengths near 1 instead of overflowing or losing digits.
//!
//! Extents within [`LENGTH_COMFORT`] and strengths within [`STRENGTH_COMFORT`] of 1 are left as
//! they are, so that nothing changes for ordinary inputs (docs/design.md, "Units").

use std::borrow::Cow;

use rayon::prelude::{IndexedParallelIterator, IntoParallelRefIterator, ParallelIterator};

use crate::{Kernel, Real, Sources};

/// Extents from `1 / LENGTH_COMFORT` to `LENGTH_COMFORT` are computed as they are (`2^10`).
pub const LENGTH_COMFORT: f64 = 1024.0;

/// Strengths from `1 / STRENGTH_COMFORT` to `STRENGTH_COMFORT` are computed as they are (`2^40`,
/// about `1e12`: squared and summed over a billion sources they stay far inside f32's range).
pub const STRENGTH_COMFORT: f64 = 1_099_511_627_776.0;

/// `2^e` for `e` in `[-1000, 1000]`, built from its bits (exact).
pub fn two_to(e: i32) -> f64 {
    f64::from_bits(((e.clamp(-1000, 1000) + 1023) as u64) << 52)
}

/// The power of two nearest `x` in the logarithm (`1` for zero, negative or non-finite `x`).
pub fn power_of_two_near(x: f64) -> f64 {
    if !(x.is_finite() && x > 0.0) {
        return 1.0;
    }
    two_to(x.log2().round() as i32)
}

/// `1` where `x` lies within `[1 / comfort, comfort]` (or is zero or not finite), else the power
/// of two nearest `x`.
pub fn unit_for(x: f64, comfort: f64) -> f64 {
    if !(x.is_finite() && x > 0.0) || (1.0 / comfort..=comfort).contains(&x) {
        1.0
    } else {
        power_of_two_near(x)
    }
}

/// The length unit of a box with sides `lengths`: 1 when its longest side lies within
/// [`LENGTH_COMFORT`] of 1, else the power of two nearest it.
pub fn box_unit(lengths: [f64; 3]) -> f64 {
    unit_for(lengths.iter().cloned().fold(0.0, f64::max), LENGTH_COMFORT)
}

/// The bounding box of the points of `sets` as `[-lo_x, -lo_y, -lo_z, hi_x, hi_y, hi_z]`, the
/// form a maximum over ranks combines (`-inf` everywhere for no points).
pub fn negated_bounds(sets: &[&[[f64; 3]]]) -> [f64; 6] {
    let mut b = [f64::NEG_INFINITY; 6];
    for x in sets.iter().flat_map(|s| s.iter()) {
        for a in 0..3 {
            b[a] = b[a].max(-x[a]);
            b[3 + a] = b[3 + a].max(x[a]);
        }
    }
    b
}

/// The longest side of a box in [`negated_bounds`]'s form (0 for an empty or non-finite box).
pub fn longest_side(b: &[f64; 6]) -> f64 {
    (0..3).map(|a| b[3 + a] + b[a]).filter(|e| e.is_finite()).fold(0.0, f64::max)
}

/// The length unit of points whose bounding box ([`negated_bounds`], over every rank) is `b`:
/// `1` when its longest side lies within [`LENGTH_COMFORT`] of 1 or is zero, else the power of
/// two nearest it.
pub fn length_unit(b: &[f64; 6]) -> f64 {
    unit_for(longest_side(b), LENGTH_COMFORT)
}

/// The largest strength of `kernel`'s densities in `sources`, in the length unit `s`: the
/// largest charge magnitude (Laplace), force component (Stokeslet), and dipole component times
/// normal component over `s` (the stresslet's density `q n^T` is a strength times a length).
/// 0 for no sources; NaN is skipped (inputs are checked before). On the current rayon pool.
pub fn largest_strength<T: Real>(kernel: Kernel, sources: &Sources<T>, s: f64) -> f64 {
    let abs = |x: &T| x.to_f64().abs();
    let row = |v: &[T; 3]| v.iter().map(abs).fold(0.0, f64::max);
    let mut m = 0.0f64;
    if let Some(q) = sources.charges.filter(|_| kernel.needs_charges()) {
        m = m.max(q.par_iter().map(abs).reduce(|| 0.0, f64::max));
    }
    if let Some(f) = sources.forces.filter(|_| kernel.needs_forces()) {
        m = m.max(f.par_iter().map(row).reduce(|| 0.0, f64::max));
    }
    if let (Some(d), Some(n)) = (sources.dipoles, sources.normals) {
        if kernel.needs_dipoles() {
            let dn = d.par_iter().zip(n.par_iter()).map(|(d, n)| row(d) * row(n)).reduce(|| 0.0, f64::max);
            m = m.max(dn / s);
        }
    }
    m
}

/// The strength unit for a largest strength `largest` (over every rank; [`largest_strength`]):
/// 1 within [`STRENGTH_COMFORT`] of 1 (or for no strengths), else the power of two nearest it.
pub fn strength_unit(largest: f64) -> f64 {
    unit_for(largest, STRENGTH_COMFORT)
}

/// The exponent `e` of a power of two `2^e` (a normal f64).
pub fn exponent_of(p: f64) -> i32 {
    ((p.to_bits() >> 52) & 0x7ff) as i32 - 1023
}

/// `x 2^e`, exact where the result is a normal f64 (one rounding where it is subnormal): the
/// step that scales results back from a unit, whatever `e`, with no intermediate overflow.
pub fn times_two_to(x: f64, e: i32) -> f64 {
    libm::scalbn(x, e)
}

/// The units a solver computes in: lengths over `length` (`s`), charges and forces over
/// `strength` (`w`), dipoles over `w s`; both powers of two.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Units {
    /// `s`: a computed length is `x / s`.
    pub length: f64,
    /// `w`: a computed charge or force is `q / w`.
    pub strength: f64,
}

impl Units {
    /// No rescaling.
    pub const ONE: Units = Units { length: 1.0, strength: 1.0 };

    /// The units of points whose bounding box and largest strength over every rank are `m`
    /// ([`extent_and_strength`], combined by a maximum).
    pub fn of(m: &[f64; 7]) -> Units {
        let b: [f64; 6] = [m[0], m[1], m[2], m[3], m[4], m[5]];
        Units { length: length_unit(&b), strength: strength_unit(m[6]) }
    }

    /// Whether anything is rescaled.
    pub fn rescaled(&self) -> bool {
        *self != Units::ONE
    }

    /// A strength in these units: `q / w` (exact where the result is normal).
    pub fn strength_of(&self, q: f64) -> f64 {
        times_two_to(q, -exponent_of(self.strength))
    }

    /// A value of degree `-p` in the distance computed in these units (the potential `p = 1`,
    /// a field or the stresslet's potential on dipoles not over `s`, `p = 2`) in the caller's:
    /// `x w / s^p` in one step ([`times_two_to`]).
    pub fn restore(&self, x: f64, p: i32) -> f64 {
        times_two_to(x, exponent_of(self.strength) - p * exponent_of(self.length))
    }
}

/// The bounding box of the points of `sets` ([`negated_bounds`]) and the largest strength, in
/// the form a maximum over ranks combines ([`Units::of`]).
pub fn extent_and_strength(sets: &[&[[f64; 3]]], largest: f64) -> [f64; 7] {
    let b = negated_bounds(sets);
    [b[0], b[1], b[2], b[3], b[4], b[5], largest]
}

/// `points` in the length unit `s`: borrowed for `s = 1`, else [`scaled_points`].
pub fn points_in_unit(points: &[[f64; 3]], s: f64) -> Cow<'_, [[f64; 3]]> {
    if s == 1.0 {
        Cow::Borrowed(points)
    } else {
        Cow::Owned(scaled_points(points, s))
    }
}

/// `points` in the length unit `s`: each coordinate over `s` (exact for a power of two).
pub fn scaled_points(points: &[[f64; 3]], s: f64) -> Vec<[f64; 3]> {
    points.iter().map(|p| p.map(|x| x / s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn powers_of_two_are_exact_and_nearest() {
        assert_eq!(two_to(0), 1.0);
        assert_eq!(two_to(-3), 0.125);
        assert_eq!(two_to(700), 2f64.powi(700));
        assert_eq!(power_of_two_near(1e-200), 2f64.powi(-664));
        assert_eq!(power_of_two_near(3.0), 4.0);
        assert_eq!(power_of_two_near(f64::NAN), 1.0);
        assert_eq!(unit_for(1000.0, LENGTH_COMFORT), 1.0);
        assert_eq!(unit_for(4096.0, LENGTH_COMFORT), 4096.0);
        assert_eq!(exponent_of(two_to(-700)), -700);
        assert_eq!(exponent_of(1.0), 0);
        assert_eq!(times_two_to(3.0, 1400 - 1500), 3.0 * two_to(-100));
        assert_eq!(times_two_to(2f64.powi(-800), 1400), 2f64.powi(600));
    }

    #[test]
    fn units_of_extents_and_strengths() {
        let u = Units::of(&extent_and_strength(&[&[[0.0; 3], [1e-9, 0.0, 0.0]]], 1e20));
        assert_eq!(u, Units { length: power_of_two_near(1e-9), strength: power_of_two_near(1e20) });
        assert_eq!(Units::of(&extent_and_strength(&[&[[0.0; 3], [1.0; 3]]], 3.0)), Units::ONE);
        assert_eq!(u.restore(u.strength_of(5.0), 0), 5.0);
        let v = Units { length: two_to(-700), strength: two_to(-600) };
        assert_eq!(v.restore(2f64.powi(-900), 2), 2f64.powi(-100));
    }

    #[test]
    fn largest_strengths_per_kernel() {
        let pos = [[0.0f32; 3]; 2];
        let q = [1e-40f32, -3e-40];
        let f = [[1.0f32, -5.0, 2.0], [0.0; 3]];
        let d = [[4.0f32, 0.0, 0.0], [0.0, 1.0, 0.0]];
        let n = [[0.0f32, 0.5, 0.0], [0.0, 0.0, 1.0]];
        let src =
            Sources { positions: &pos, charges: Some(&q), forces: Some(&f), dipoles: Some(&d), normals: Some(&n) };
        assert_eq!(largest_strength(Kernel::Laplace, &src, 1.0), 3e-40f32 as f64);
        assert_eq!(largest_strength(Kernel::Stokeslet, &src, 1.0), 5.0);
        assert_eq!(largest_strength(Kernel::Stresslet, &src, 0.5), 4.0);
        assert_eq!(largest_strength(Kernel::Stokes, &src, 0.25), 8.0);
        assert_eq!(strength_unit(3e-40), power_of_two_near(3e-40));
        assert_eq!(strength_unit(1e12), 1.0);
        assert_eq!(strength_unit(0.0), 1.0);
    }

    #[test]
    fn bounds_and_units() {
        let a = [[1e-200, 0.0, 0.0], [3e-200, 1e-200, 0.0]];
        let b = negated_bounds(&[&a]);
        assert_eq!(longest_side(&b), 2e-200);
        assert_eq!(length_unit(&b), power_of_two_near(2e-200));
        assert_eq!(length_unit(&negated_bounds(&[])), 1.0);
        assert_eq!(length_unit(&negated_bounds(&[&[[0.5, 0.5, 0.5]]])), 1.0);
        let s = length_unit(&b);
        assert_eq!(scaled_points(&a, s)[1][0] * s, 3e-200);
    }
}
