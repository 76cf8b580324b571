//! 1-D transforms by their defining sums, `O(N^2)`: the DFT and the eight real-to-real
//! transforms with FFTW's definitions (unnormalised), for checking the fast transforms
//! (digest seed-002 §9 item 1).
//!
//! Complex values are `(re, im)` pairs; the real-to-real transforms act on real and imaginary
//! parts alike.

use std::f64::consts::PI;

/// A 1-D transform.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transform1d {
    /// `Y_k = sum_j X_j e^{-2 pi i j k / N}`.
    DftForward,
    /// `Y_k = sum_j X_j e^{+2 pi i j k / N}`.
    DftBackward,
    /// `Y_k = X_0 + (-1)^k X_{N-1} + 2 sum_{j=1}^{N-2} X_j cos(pi j k / (N - 1))`.
    Dct1,
    /// `Y_k = 2 sum_j X_j cos(pi (j + 1/2) k / N)`.
    Dct2,
    /// `Y_k = X_0 + 2 sum_{j>=1} X_j cos(pi j (k + 1/2) / N)`.
    Dct3,
    /// `Y_k = 2 sum_j X_j cos(pi (j + 1/2)(k + 1/2) / N)`.
    Dct4,
    /// `Y_k = 2 sum_j X_j sin(pi (j + 1)(k + 1) / (N + 1))`.
    Dst1,
    /// `Y_k = 2 sum_j X_j sin(pi (j + 1/2)(k + 1) / N)`.
    Dst2,
    /// `Y_k = (-1)^k X_{N-1} + 2 sum_{j<N-1} X_j sin(pi (j + 1)(k + 1/2) / N)`.
    Dst3,
    /// `Y_k = 2 sum_j X_j sin(pi (j + 1/2)(k + 1/2) / N)`.
    Dst4,
}

impl Transform1d {
    /// Matrix entry `(k, j)` of the transform of length `n`: real part and imaginary part.
    pub fn entry(self, n: usize, k: usize, j: usize) -> (f64, f64) {
        let (nf, kf, jf) = (n as f64, k as f64, j as f64);
        let sign = |m: usize| if m.is_multiple_of(2) { 1.0 } else { -1.0 };
        let re = |v: f64| (v, 0.0);
        match self {
            Transform1d::DftForward | Transform1d::DftBackward => {
                let s = if self == Transform1d::DftForward { -1.0 } else { 1.0 };
                let a = 2.0 * PI * ((j * k) % n) as f64 / nf;
                (a.cos(), s * a.sin())
            }
            Transform1d::Dct1 => re(if j == 0 {
                1.0
            } else if j == n - 1 {
                sign(k)
            } else {
                2.0 * (PI * jf * kf / (nf - 1.0)).cos()
            }),
            Transform1d::Dct2 => re(2.0 * (PI * (jf + 0.5) * kf / nf).cos()),
            Transform1d::Dct3 => re(if j == 0 { 1.0 } else { 2.0 * (PI * jf * (kf + 0.5) / nf).cos() }),
            Transform1d::Dct4 => re(2.0 * (PI * (jf + 0.5) * (kf + 0.5) / nf).cos()),
            Transform1d::Dst1 => re(2.0 * (PI * (jf + 1.0) * (kf + 1.0) / (nf + 1.0)).sin()),
            Transform1d::Dst2 => re(2.0 * (PI * (jf + 0.5) * (kf + 1.0) / nf).sin()),
            Transform1d::Dst3 => re(if j == n - 1 { sign(k) } else { 2.0 * (PI * (jf + 1.0) * (kf + 0.5) / nf).sin() }),
            Transform1d::Dst4 => re(2.0 * (PI * (jf + 0.5) * (kf + 0.5) / nf).sin()),
        }
    }

    /// The transform of `x` (length `N`).
    pub fn apply(self, x: &[(f64, f64)]) -> Vec<(f64, f64)> {
        let n = x.len();
        (0..n)
            .map(|k| {
                x.iter().enumerate().fold((0.0, 0.0), |(sr, si), (j, &(xr, xi))| {
                    let (a, b) = self.entry(n, k, j);
                    (sr + a * xr - b * xi, si + a * xi + b * xr)
                })
            })
            .collect()
    }
}

/// Applies `t` along `axis` of a field of `dims` values (C order: axis 0 slowest), to the
/// `len` slots of each line from `start`, dividing the result by `scale`; the other slots are
/// left as they are.
pub fn apply_along_axis(
    data: &mut [(f64, f64)],
    dims: [usize; 3],
    axis: usize,
    t: Transform1d,
    start: usize,
    len: usize,
    scale: f64,
) {
    assert_eq!(data.len(), dims.iter().product::<usize>(), "one value per point of dims");
    let (u, v) = ((axis + 1) % 3, (axis + 2) % 3);
    let at = |p: [usize; 3]| (p[0] * dims[1] + p[1]) * dims[2] + p[2];
    for j in 0..dims[u] {
        for k in 0..dims[v] {
            let point = |s: usize| {
                let mut p = [0; 3];
                p[axis] = s;
                p[u] = j;
                p[v] = k;
                at(p)
            };
            let line: Vec<(f64, f64)> = (start..start + len).map(|s| data[point(s)]).collect();
            for (s, y) in t.apply(&line).into_iter().enumerate() {
                data[point(start + s)] = (y.0 / scale, y.1 / scale);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Transform1d;

    #[test]
    fn inverse_pairs_multiply_by_the_logical_length() {
        let x: Vec<(f64, f64)> = (0..7).map(|i| ((i as f64 * 0.7).sin(), (i as f64).cos())).collect();
        let n = x.len() as f64;
        let pairs = [
            (Transform1d::DftForward, Transform1d::DftBackward, n),
            (Transform1d::Dct2, Transform1d::Dct3, 2.0 * n),
            (Transform1d::Dst2, Transform1d::Dst3, 2.0 * n),
            (Transform1d::Dct4, Transform1d::Dct4, 2.0 * n),
            (Transform1d::Dst4, Transform1d::Dst4, 2.0 * n),
            (Transform1d::Dct1, Transform1d::Dct1, 2.0 * (n - 1.0)),
            (Transform1d::Dst1, Transform1d::Dst1, 2.0 * (n + 1.0)),
        ];
        for (f, b, norm) in pairs {
            let y = b.apply(&f.apply(&x));
            for (a, c) in x.iter().zip(&y) {
                assert!((a.0 - c.0 / norm).abs() < 1e-13 && (a.1 - c.1 / norm).abs() < 1e-13, "{f:?}");
            }
        }
    }
}
