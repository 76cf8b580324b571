//! The floating-point trait the compute crates are generic over.

use std::fmt::{Debug, Display, LowerExp};
use std::iter::Sum;
use std::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Sub, SubAssign};

/// A real floating-point type: `f32` or `f64`.
///
/// Parameters (xi, h, window coefficients) are always computed in `f64` and converted once
/// with [`Real::from_f64`]; hot loops then work purely in `Self`.
pub trait Real:
    Copy
    + Send
    + Sync
    + Debug
    + Display
    + LowerExp
    + Default
    + PartialOrd
    + 'static
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + SubAssign
    + MulAssign
    + DivAssign
    + Sum
{
    /// 0.
    const ZERO: Self;
    /// 1.
    const ONE: Self;
    /// Machine epsilon.
    const EPSILON: Self;
    /// `"f32"` or `"f64"`.
    const NAME: &'static str;
    /// Size in bytes.
    const BYTES: usize;
    /// Smallest relative tolerance this precision supports in parki-dist.
    const MIN_TOLERANCE: f64;

    /// Conversion from `f64` (rounding for `f32`).
    fn from_f64(x: f64) -> Self;
    /// Conversion to `f64` (exact).
    fn to_f64(self) -> f64;
    /// Square root.
    fn sqrt(self) -> Self;
    /// Absolute value.
    fn abs(self) -> Self;
    /// Largest integer not greater than `self`.
    fn floor(self) -> Self;
    /// `self * a + b` with one rounding.
    fn mul_add(self, a: Self, b: Self) -> Self;
    /// Exponential.
    fn exp(self) -> Self;
    /// Neither NaN nor infinite.
    fn is_finite(self) -> bool;
    /// Maximum of two values.
    fn max(self, other: Self) -> Self;
    /// Minimum of two values.
    fn min(self, other: Self) -> Self;
    /// Truncating conversion to `i64` (for cell and grid indices of in-range values).
    fn to_i64(self) -> i64;
    /// The largest value below `self`.
    fn next_down(self) -> Self;
}

macro_rules! impl_real {
    ($t:ty, $name:expr, $min_tol:expr) => {
        impl Real for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const EPSILON: Self = <$t>::EPSILON;
            const NAME: &'static str = $name;
            const BYTES: usize = std::mem::size_of::<$t>();
            const MIN_TOLERANCE: f64 = $min_tol;
            #[inline(always)]
            fn from_f64(x: f64) -> Self {
                x as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            #[inline(always)]
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            #[inline(always)]
            fn floor(self) -> Self {
                <$t>::floor(self)
            }
            #[inline(always)]
            fn mul_add(self, a: Self, b: Self) -> Self {
                <$t>::mul_add(self, a, b)
            }
            #[inline(always)]
            fn exp(self) -> Self {
                <$t>::exp(self)
            }
            #[inline(always)]
            fn is_finite(self) -> bool {
                <$t>::is_finite(self)
            }
            #[inline(always)]
            fn max(self, other: Self) -> Self {
                <$t>::max(self, other)
            }
            #[inline(always)]
            fn min(self, other: Self) -> Self {
                <$t>::min(self, other)
            }
            #[inline(always)]
            fn to_i64(self) -> i64 {
                self as i64
            }
            #[inline(always)]
            fn next_down(self) -> Self {
                <$t>::next_down(self)
            }
        }
    };
}

impl_real!(f64, "f64", 1e-13);
impl_real!(f32, "f32", 1e-6);
