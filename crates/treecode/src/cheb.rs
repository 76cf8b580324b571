//! Chebyshev points of the second kind on an interval and the barycentric Lagrange basis on them
//! (BLDTT paper §2.1, eqs. (2)-(5)).
//!
//! On `[a, b]` the `n + 1` nodes are `s_k = a + (cos(k pi / n) + 1) (b - a) / 2`, `k = 0..=n`
//! (eq. (4) mapped; `s_0 = b`, `s_n = a`, both set exactly so that a particle on a face of its
//! box hits a node exactly). The basis is the barycentric formula of the second kind,
//! `L_k(x) = [w_k / (x - s_k)] / sum_k' [w_k' / (x - s_k')]` (eq. (3)) with the scaled weights
//! `w_k = (-1)^k delta_k`, `delta_0 = delta_n = 1/2`, else 1 (eq. (5)); the common factor of the
//! weights cancels.
//!
//! Two rules keep the formula finite:
//! - **exact hit**: where `|x - s_k|` is below the smallest normal number, `L` is the Kronecker
//!   delta at `k` (as BaryTree does; frequent, since every bounding box has particles on its
//!   faces, which are nodes);
//! - **degenerate interval**: where `b - a` is not above a few roundings of `max(|a|, |b|)`
//!   (particles on a plane or a line), every node coincides and `L` is the delta at `k = 0`,
//!   which interpolates exactly whatever is constant along the axis, as everything on the
//!   cluster is.

/// The interpolation nodes of one axis of a cluster's box: degree `n`, `n + 1` nodes.
#[derive(Clone, Debug, PartialEq)]
pub struct AxisNodes {
    /// The nodes `s_k`, `k = 0..=n` (`s_0 = b`, decreasing).
    pub s: Vec<f64>,
    /// Whether the interval is degenerate (every node at `a`).
    pub degenerate: bool,
}

impl AxisNodes {
    /// The nodes of degree `n` on `[a, b]` (`a <= b`).
    pub fn new(n: usize, a: f64, b: f64) -> Self {
        let mut s = vec![0.0; n + 1];
        let degenerate = nodes(n, a, b, &mut s);
        Self { s, degenerate }
    }

    /// Degree `n`.
    pub fn degree(&self) -> usize {
        self.s.len() - 1
    }

    /// The basis at `x` into `out[..=n]` (see [`lagrange`]).
    #[inline]
    pub fn basis(&self, x: f64, out: &mut [f64]) {
        lagrange(&self.s, self.degenerate, x, out);
    }
}

/// Writes the `n + 1` nodes of degree `n` on `[a, b]` into `out` and returns whether the interval
/// is degenerate (then every node is `a`). Degree 0: the midpoint.
pub fn nodes(n: usize, a: f64, b: f64, out: &mut [f64]) -> bool {
    assert!(out.len() > n, "room for n + 1 nodes");
    let degenerate = b - a <= 4.0 * f64::EPSILON * a.abs().max(b.abs());
    if degenerate {
        out[..=n].fill(a);
        return true;
    }
    if n == 0 {
        out[0] = 0.5 * (a + b);
        return false;
    }
    for (k, o) in out[..=n].iter_mut().enumerate() {
        let c = (k as f64 * std::f64::consts::PI / n as f64).cos();
        *o = a + 0.5 * (c + 1.0) * (b - a);
    }
    out[0] = b;
    out[n] = a;
    false
}

/// The scaled barycentric weight `w_k = (-1)^k delta_k` of degree `n` (eq. (5)).
#[inline]
pub fn weight(n: usize, k: usize) -> f64 {
    let d = if k == 0 || k == n { 0.5 } else { 1.0 };
    if k.is_multiple_of(2) {
        d
    } else {
        -d
    }
}

/// The Lagrange basis `L_k(x)`, `k = 0..=n`, on the nodes `s` (`n + 1` of them, from
/// [`nodes`]) into `out[..=n]`, eq. (3), with the exact-hit and degenerate rules of the module.
#[inline]
pub fn lagrange(s: &[f64], degenerate: bool, x: f64, out: &mut [f64]) {
    let n = s.len() - 1;
    let out = &mut out[..=n];
    if degenerate || n == 0 {
        out.fill(0.0);
        out[0] = 1.0;
        return;
    }
    let mut denom = 0.0;
    for (k, (o, &sk)) in out.iter_mut().zip(s).enumerate() {
        let d = x - sk;
        if d.abs() < f64::MIN_POSITIVE {
            out.fill(0.0);
            out[k] = 1.0;
            return;
        }
        *o = weight(n, k) / d;
        denom += *o;
    }
    let inv = 1.0 / denom;
    for o in out.iter_mut() {
        *o *= inv;
    }
}
