//! Special functions of the Green's functions, in `f64` to a few ulp: `erfcx`, the exponential
//! integral `E1`, the modified Bessel functions `K0` and `K1`, the Bessel functions `J0` and
//! `J1`, and the sine integral `Si`. (The Poisson solver's and the free-space Ewald kernels'.)

use std::f64::consts::PI;

/// Euler's constant.
pub const EULER_GAMMA: f64 = 0.577_215_664_901_532_9;

/// `erf(x)`.
pub fn erf(x: f64) -> f64 {
    libm::erf(x)
}

/// `erfc(x)`.
pub fn erfc(x: f64) -> f64 {
    libm::erfc(x)
}

/// The scaled complementary error function `erfcx(x) = e^{x^2} erfc(x)`, for any `x`.
pub fn erfcx(x: f64) -> f64 {
    if x < 25.0 {
        return libm::erfc(x) * (x * x).exp();
    }
    // asymptotic series 1/(x sqrt(pi)) sum_n (-1)^n (2n-1)!! / (2x^2)^n, its terms still
    // falling fast at x >= 25
    let t = 1.0 / (2.0 * x * x);
    let (mut term, mut sum) = (1.0, 1.0);
    for n in 1..12 {
        term *= -((2 * n - 1) as f64) * t;
        sum += term;
    }
    sum / (x * PI.sqrt())
}

/// The exponential integral `E1(x) = int_x^inf e^{-t}/t dt`, `x > 0`.
pub fn e1(x: f64) -> f64 {
    assert!(x > 0.0, "E1 needs x > 0");
    if x <= 1.0 {
        // -gamma - ln x + sum_{k>=1} (-1)^{k+1} x^k / (k k!)
        let (mut term, mut sum) = (1.0, 0.0);
        for k in 1..40 {
            term *= -x / k as f64;
            sum -= term / k as f64;
            if term.abs() < 1e-18 {
                break;
            }
        }
        return -EULER_GAMMA - x.ln() + sum;
    }
    // continued fraction (modified Lentz): e^{-x} / (x + 1 / (1 + 1 / (x + 2 / (1 + 2 / ...))))
    let tiny = 1e-300;
    let mut b = x + 1.0;
    let mut c = 1.0 / tiny;
    let mut d = 1.0 / b;
    let mut h = d;
    for i in 1..200 {
        let a = -((i * i) as f64);
        b += 2.0;
        d = 1.0 / (a * d + b);
        c = b + a / c;
        let del = c * d;
        h *= del;
        if (del - 1.0).abs() < 1e-16 {
            break;
        }
    }
    h * (-x).exp()
}

/// `K_nu(x) = int_0^inf e^{-x cosh t} cosh(nu t) dt` for `nu = 0, 1`, `x > 0`, by the
/// trapezoidal rule: the integrand is analytic in the strip `|Im t| < pi/2` and decays doubly
/// exponentially, so a step of 1/8 errs by about `e^{-pi^2 / (1/8)}`: below round-off.
fn bessel_k(nu: f64, x: f64) -> f64 {
    assert!(x > 0.0, "K needs x > 0");
    let h = 0.125;
    let mut sum = 0.5 * (-x).exp();
    let mut k = 1;
    loop {
        let t = k as f64 * h;
        let v = (-x * t.cosh()).exp() * (nu * t).cosh();
        sum += v;
        if v < 1e-18 * sum || x * t.cosh() > 745.0 {
            break;
        }
        k += 1;
    }
    sum * h
}

/// The modified Bessel function `K0(x)`, `x > 0`.
pub fn k0(x: f64) -> f64 {
    bessel_k(0.0, x)
}

/// The modified Bessel function `K1(x)`, `x > 0`.
pub fn k1(x: f64) -> f64 {
    bessel_k(1.0, x)
}

/// `J_n(x)` for `n = 0, 1`: for `|x| < 25` Bessel's integral `(1/pi) int_0^pi cos(n t - x sin t)
/// dt` by the trapezoidal rule on `m = 48` points, exact up to `J_{2m-n}(x)` (below 1e-17 for
/// `|x| < 25`); beyond, Hankel's asymptotic expansion, whose smallest term at `|x| >= 25` is
/// below `e^{-2|x|}`.
fn bessel_j(n: u32, x: f64) -> f64 {
    let ax = x.abs();
    let sign = if n == 1 && x < 0.0 { -1.0 } else { 1.0 };
    if ax < 25.0 {
        let m = 48;
        let h = PI / m as f64;
        let nf = n as f64;
        // endpoints t = 0 and t = pi with weight 1/2: cos 0 = 1, cos(n pi) = (-1)^n
        let mut sum = if n == 0 { 1.0 } else { 0.0 };
        for k in 1..m {
            let t = k as f64 * h;
            sum += (nf * t - ax * t.sin()).cos();
        }
        return sign * sum / m as f64;
    }
    // P ~ sum (-1)^k a_{2k} / x^{2k}, Q ~ sum (-1)^k a_{2k+1} / x^{2k+1},
    // a_k = prod_{j=1..k} (4 n^2 - (2j - 1)^2) / (k! 8^k)
    let mu = 4.0 * (n * n) as f64;
    let (mut p, mut q) = (1.0, 0.0);
    let mut a = 1.0;
    for k in 1..40 {
        a *= (mu - ((2 * k - 1) * (2 * k - 1)) as f64) / (k as f64 * 8.0 * ax);
        if a.abs() < 1e-17 {
            break;
        }
        match k % 4 {
            1 => q += a,
            2 => p -= a,
            3 => q -= a,
            _ => p += a,
        }
    }
    let chi = ax - (0.5 * n as f64 + 0.25) * PI;
    sign * (2.0 / (PI * ax)).sqrt() * (p * chi.cos() - q * chi.sin())
}

/// The Bessel function `J0(x)`.
pub fn j0(x: f64) -> f64 {
    bessel_j(0, x)
}

/// The Bessel function `J1(x)`.
pub fn j1(x: f64) -> f64 {
    bessel_j(1, x)
}

/// The sine integral `Si(x) = int_0^x sin t / t dt`.
pub fn si(x: f64) -> f64 {
    if x < 0.0 {
        return -si(-x);
    }
    if x <= 4.0 {
        // sum_k (-1)^k x^{2k+1} / ((2k+1) (2k+1)!)
        let (mut term, mut sum) = (x, x);
        for k in 1..40 {
            term *= -x * x / ((2 * k) * (2 * k + 1)) as f64;
            let add = term / (2 * k + 1) as f64;
            sum += add;
            if add.abs() < 1e-18 * sum.abs() {
                break;
            }
        }
        return sum;
    }
    // Si(x) = pi/2 + Im E1(i x), E1(i x) by its continued fraction (complex Lentz)
    let (mut br, bi) = (1.0, x);
    let (mut cr, mut ci) = (1e300, 0.0);
    let inv = |r: f64, i: f64| {
        let d = r * r + i * i;
        (r / d, -i / d)
    };
    let (mut dr, mut di) = inv(br, bi);
    let (mut hr, mut hi) = (dr, di);
    for k in 1..500 {
        let a = -((k * k) as f64);
        br += 2.0;
        // d = 1 / (a d + b), c = b + a / c
        let (tr, ti) = (a * dr + br, a * di + bi);
        (dr, di) = inv(tr, ti);
        let (qr, qi) = inv(cr, ci);
        (cr, ci) = (br + a * qr, bi + a * qi);
        let (er, ei) = (cr * dr - ci * di, cr * di + ci * dr);
        (hr, hi) = (hr * er - hi * ei, hr * ei + hi * er);
        if (er - 1.0).abs() + ei.abs() < 1e-16 {
            break;
        }
    }
    // E1(ix) = h e^{-ix}
    let (c, s) = (x.cos(), x.sin());
    let im = hi * c - hr * s;
    PI / 2.0 + im
}

#[cfg(test)]
mod tests {
    use super::{e1, erfcx, j0, j1, k0, k1, si};

    fn close(a: f64, b: f64, tol: f64) {
        assert!((a - b).abs() <= tol * b.abs(), "{a} vs {b}");
    }

    #[test]
    fn literature_values() {
        // mpmath at 25 digits
        close(k0(0.1), 2.427_069_024_702_016_5, 1e-14);
        close(k0(1.0), 0.421_024_438_240_708_3, 1e-14);
        close(k0(10.0), 1.778_006_231_616_765_2e-5, 1e-13);
        close(k1(1.0), 0.601_907_230_197_234_6, 1e-14);
        close(k1(0.01), 99.973_894_118_296_25, 1e-13);
        close(e1(0.5), 0.559_773_594_776_160_8, 1e-14);
        close(e1(1.0), 0.219_383_934_395_520_3, 1e-14);
        close(e1(5.0), 0.001_148_295_591_275_325_8, 1e-13);
        close(si(1.0), 0.946_083_070_367_183, 1e-14);
        close(si(4.0), 1.758_203_138_949_053, 1e-14);
        close(si(10.0), 1.658_347_594_218_874, 1e-14);
        close(si(100.0), 1.562_225_466_889_056_3, 1e-13);
        close(erfcx(30.0), 0.018_795_888_861_416_75, 1e-13);
        close(erfcx(1.0), 0.427_583_576_155_807, 1e-14);
        // J0, J1 (mpmath): both sides of the switch to the asymptotic expansion, and large x
        close(j0(0.5), 0.938_469_807_240_813, 1e-14);
        close(j0(10.0), -0.245_935_764_451_348, 1e-14);
        close(j0(24.9), 0.083_245_968_353_015_5, 1e-13);
        close(j0(25.1), 0.108_275_671_499_949, 1e-12);
        close(j0(1000.0), 0.024_786_686_152_420_2, 1e-11);
        close(j1(0.5), 0.242_268_457_674_874, 1e-14);
        close(j1(-3.0), -0.339_058_958_525_936, 1e-14);
        close(j1(24.9), -0.134_855_699_531_409, 1e-12);
        close(j1(25.1), -0.114_634_784_134_423, 1e-12);
        close(j1(1000.0), 0.004_728_311_907_089_52, 1e-10);
    }
}
