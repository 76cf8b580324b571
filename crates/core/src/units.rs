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
//! Extents within [`LENGTH_COMFORT`] of 1 are left as they are, so that nothing changes for
//! ordinary inputs (docs/design.md, "Units").

/// Extents from `1 / LENGTH_COMFORT` to `LENGTH_COMFORT` are computed as they are (`2^10`).
pub const LENGTH_COMFORT: f64 = 1024.0;

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
