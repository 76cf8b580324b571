//! Manufactured solutions for the validation and the application's generated right-hand sides
//! (digest seed-002 §5 and §9 item 4): `phi = a phi_x(x) phi_y(y) phi_z(z)` with `f = lap(phi)`
//! in closed form, each factor a function that satisfies its axis's boundary conditions:
//!
//! - periodic, odd-odd: `sin(2 pi x / L)`; even-even: `cos(2 pi x / L)`;
//! - even-odd: `cos(3 pi x / 2L)`; odd-even: `sin(3 pi x / 2L)`;
//! - unbounded: the compact blob `b(x) = exp(C (1 - 1/(1 - u^2)))`, `u = (x - L/2) / (L/2)`,
//!   `C = 10`, zero outside `|u| < 1` (smooth, so every kernel shows its order);
//! - semi-unbounded: a blob centred at `0.3 L` from the symmetric side plus its even or odd
//!   image about that side.
//!
//! For the rotational mode the same products serve as the stream function `psi` (one per
//! component, each with its own conditions): `omega = -lap(psi)` and `u = curl(psi)` are exact.

use std::f64::consts::PI;

use crate::bc::Bc;

/// The blob's steepness `C`.
const C: f64 = 10.0;

/// The blob of half-width `s` centred at `c`: value, first and second derivative.
fn blob(x: f64, c: f64, s: f64) -> [f64; 3] {
    let u = (x - c) / s;
    if u.abs() >= 1.0 {
        return [0.0; 3];
    }
    let u2 = u * u;
    let w = 1.0 - u2;
    let v = (C * (1.0 - 1.0 / w)).exp();
    let d1 = -v * 2.0 * C * u / (w * w * s);
    let d2 = v * 2.0 * C * (2.0 * (C - 1.0) * u2 + 3.0 * u2 * u2 - 1.0) / (w.powi(4) * s * s);
    [v, d1, d2]
}

/// One factor of a manufactured solution: a function of one coordinate satisfying one axis's
/// boundary conditions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AxisFunction {
    /// `sin(k x)`.
    Sin(f64),
    /// `cos(k x)`.
    Cos(f64),
    /// A blob centred at `centre` of half-width `width`, plus `sign` times its image at `image`.
    Blob {
        /// Centre.
        centre: f64,
        /// Half-width.
        width: f64,
        /// The image's centre.
        image: f64,
        /// The image's sign (0: no image).
        sign: f64,
    },
}

impl AxisFunction {
    /// The factor for conditions `bc` on an axis of length `l`.
    pub fn for_bc(bc: [Bc; 2], l: f64) -> Self {
        match bc {
            [Bc::Periodic, _] | [_, Bc::Periodic] | [Bc::Odd, Bc::Odd] => AxisFunction::Sin(2.0 * PI / l),
            [Bc::Even, Bc::Even] => AxisFunction::Cos(2.0 * PI / l),
            [Bc::Even, Bc::Odd] => AxisFunction::Cos(1.5 * PI / l),
            [Bc::Odd, Bc::Even] => AxisFunction::Sin(1.5 * PI / l),
            [Bc::Unbounded, Bc::Unbounded] => {
                AxisFunction::Blob { centre: 0.5 * l, width: 0.5 * l, image: 0.0, sign: 0.0 }
            }
            [s, Bc::Unbounded] | [Bc::Unbounded, s] => {
                let low = bc[1] == Bc::Unbounded;
                let sign = if s == Bc::Even { 1.0 } else { -1.0 };
                let (centre, image) = if low { (0.3 * l, -0.3 * l) } else { (0.7 * l, 1.3 * l) };
                AxisFunction::Blob { centre, width: 0.5 * l, image, sign }
            }
        }
    }

    /// Value, first and second derivative at `x`.
    pub fn eval(&self, x: f64) -> [f64; 3] {
        match *self {
            AxisFunction::Sin(k) => {
                let (s, c) = (k * x).sin_cos();
                [s, k * c, -k * k * s]
            }
            AxisFunction::Cos(k) => {
                let (s, c) = (k * x).sin_cos();
                [c, -k * s, -k * k * c]
            }
            AxisFunction::Blob { centre, width, image, sign } => {
                let a = blob(x, centre, width);
                if sign == 0.0 {
                    return a;
                }
                let b = blob(x, image, width);
                [0, 1, 2].map(|i| a[i] + sign * b[i])
            }
        }
    }
}

/// A manufactured solution `phi = amplitude * prod_a f_a(x_a)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Manufactured {
    /// The factors, one per axis.
    pub axes: [AxisFunction; 3],
    /// The amplitude.
    pub amplitude: f64,
}

/// `phi`, its gradient and its Laplacian at a point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// `phi`.
    pub value: f64,
    /// `grad(phi)`.
    pub gradient: [f64; 3],
    /// `lap(phi)`.
    pub laplacian: f64,
}

impl Manufactured {
    /// The solution for conditions `bc` in a box of `lengths`, amplitude 1.
    pub fn new(lengths: [f64; 3], bc: [[Bc; 2]; 3]) -> Self {
        Self { axes: [0, 1, 2].map(|a| AxisFunction::for_bc(bc[a], lengths[a])), amplitude: 1.0 }
    }

    /// The same solution times `amplitude`.
    pub fn scaled(self, amplitude: f64) -> Self {
        Self { amplitude, ..self }
    }

    /// `phi`, its gradient and its Laplacian at `x`.
    pub fn at(&self, x: [f64; 3]) -> Sample {
        let f = [0, 1, 2].map(|a| self.axes[a].eval(x[a]));
        let a = self.amplitude;
        Sample {
            value: a * f[0][0] * f[1][0] * f[2][0],
            gradient: [
                a * f[0][1] * f[1][0] * f[2][0],
                a * f[0][0] * f[1][1] * f[2][0],
                a * f[0][0] * f[1][0] * f[2][1],
            ],
            laplacian: a * (f[0][2] * f[1][0] * f[2][0] + f[0][0] * f[1][2] * f[2][0] + f[0][0] * f[1][0] * f[2][2]),
        }
    }
}

/// The amplitudes of the three components of a generated vector field (distinct, so that a
/// component mix-up shows).
pub const COMPONENT_AMPLITUDES: [f64; 3] = [1.0, -0.6, 0.35];

/// `u = curl(psi)` from the samples of the three components of `psi`.
pub fn curl(psi: &[Sample; 3]) -> [f64; 3] {
    let g = |c: usize, d: usize| psi[c].gradient[d];
    [g(2, 1) - g(1, 2), g(0, 2) - g(2, 0), g(1, 0) - g(0, 1)]
}

#[cfg(test)]
mod tests {
    use super::{blob, AxisFunction, Manufactured};
    use crate::bc::Bc;

    #[test]
    fn derivatives_match_finite_differences() {
        let h = 1e-5;
        let fs = [
            AxisFunction::Sin(3.0),
            AxisFunction::Cos(2.0),
            AxisFunction::for_bc([Bc::Unbounded, Bc::Unbounded], 1.3),
            AxisFunction::for_bc([Bc::Odd, Bc::Unbounded], 1.0),
            AxisFunction::for_bc([Bc::Unbounded, Bc::Even], 1.0),
        ];
        for f in fs {
            for x in [0.21, 0.5, 0.77] {
                let [v, d1, d2] = f.eval(x);
                let (a, b) = (f.eval(x + h)[0], f.eval(x - h)[0]);
                assert!(((a - b) / (2.0 * h) - d1).abs() < 1e-6 * (1.0 + d1.abs()), "{f:?} at {x}");
                assert!(((a - 2.0 * v + b) / (h * h) - d2).abs() < 1e-3 * (1.0 + d2.abs()), "{f:?} at {x}");
            }
        }
        assert_eq!(blob(2.0, 0.5, 0.5), [0.0; 3]);
    }

    #[test]
    fn symmetric_sides_hold() {
        // odd: zero at the side; even: zero slope at the side
        let l = 1.0;
        let m = Manufactured::new([l; 3], [[Bc::Odd, Bc::Unbounded], [Bc::Even, Bc::Odd], [Bc::Unbounded, Bc::Even]]);
        assert!(m.axes[0].eval(0.0)[0].abs() < 1e-14);
        assert!(m.axes[1].eval(0.0)[1].abs() < 1e-14 && m.axes[1].eval(l)[0].abs() < 1e-14);
        assert!(m.axes[2].eval(l)[1].abs() < 1e-12);
    }
}
