//! M2M (S|S), M2L (S|R) and L2L (R|R) by rotation, coaxial translation and rotation back
//! (seed 001, §3.3, eqs. (16)-(19), (33), (35)): `O(p^3)` each instead of the direct `O(p^4)`.
//!
//! **Coaxial matrices** (`t` along `+z`, `t` = new centre minus old centre; the paper's
//! eqs. (18)-(19) in its basis, converted to the orthonormal scaling of [`crate::basis`] with
//! `F_n^k = sqrt((n-k)! (n+k)!)`, `k = |m|`, the same matrix for `m` and `-m`):
//!
//! | operator | entry `(n, n')` | paper |
//! | --- | --- | --- |
//! | S\|R (M2L) | `(-1)^(n+k) sqrt((2n'+1)/(2n+1)) (n+n')! / (F_n^k F_{n'}^k) / t^(n+n'+1)` | `(-1)^m s_{n+n'}(t)` |
//! | S\|S (M2M), `n' <= n` | `sqrt((2n'+1)/(2n+1)) F_n^k/F_{n'}^k (-t)^(n-n') / (n-n')!` | `r_{n-n'}(t)` |
//! | R\|R (L2L), `n' >= n` | `sqrt((2n'+1)/(2n+1)) F_{n'}^k/F_n^k t^(n'-n) / (n'-n)!` | `r_{n'-n}(t)` |
//!
//! The S|R entry carries the factor `(-1)^m` that the digest found missing from the printed
//! eq. (18) in the real basis (digest §3.3); the tests translate against direct sums.
//!
//! **Scaling** (eq. (35)): the stored coefficients are `a_n / h_s^n` (multipole of a box of edge
//! `h_s`) and `b_n h_t^n` (local), so one unit matrix per operator serves every distance:
//! M2L is `diag((h_t/t)^n) K(1) diag((h_s/t)^n') / t`, M2M `diag((t/h_p)^n) K(1)
//! diag((h_c/t)^n')` and L2L `diag((h_c/t)^n) K(1) diag((t/h_p)^n')`.
//!
//! **Variable truncation** (eq. (24)): an M2L between spheres with separation ratio `eta`
//! below the design value `eta*` is done at order `q = ceil(p ln eta* / ln eta) <= p` in and
//! out, so that its error bound `C eta^q` stays at `C eta*^p`.

use crate::basis::{fact_pair, idx, Scalings};
use crate::rotation::{angle_table_from, rot_x, rotate_z, rotation_by_quadrature, YRotation};

/// The three unit coaxial operators, per `k = |m|` a `(p-k) x (p-k)` row-major block over
/// `n, n' = k..p`.
#[derive(Clone, Debug)]
struct Coaxial {
    blocks: Vec<Vec<f64>>,
}

impl Coaxial {
    fn new(p: usize, entry: impl Fn(usize, usize, usize) -> f64) -> Self {
        let blocks = (0..p)
            .map(|k| {
                let d = p - k;
                let mut b = vec![0.0; d * d];
                for i in 0..d {
                    for j in 0..d {
                        b[i * d + j] = entry(k, k + i, k + j);
                    }
                }
                b
            })
            .collect();
        Self { blocks }
    }
}

/// Which translation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Multipole to multipole, child to parent.
    M2M,
    /// Multipole to local.
    M2L,
    /// Local to local, parent to child.
    L2L,
}

/// Geometry of one translation: the direction's rotations, the distance and the box edges.
#[derive(Clone, Copy, Debug)]
pub struct Geometry<'a> {
    /// The `y` rotation by `-beta` (`beta` the polar angle of `t`).
    pub yrot: &'a YRotation,
    /// `cos` and `sin` of the azimuth `alpha` of `t`.
    pub azimuth: (f64, f64),
    /// `|t|`.
    pub t: f64,
    /// Edge of the box whose expansion is read.
    pub h_in: f64,
    /// Edge of the box whose expansion is written.
    pub h_out: f64,
}

/// Scratch space of one translation, `O(p^2)`, owned by the caller (one per thread).
#[derive(Clone, Debug)]
pub struct Scratch {
    a: Vec<f64>,
    b: Vec<f64>,
    tmp: Vec<f64>,
    cs: Vec<(f64, f64)>,
    pow_in: Vec<f64>,
    pow_out: Vec<f64>,
}

impl Scratch {
    /// Scratch for order `p`.
    pub fn new(p: usize) -> Self {
        Self {
            a: vec![0.0; p * p],
            b: vec![0.0; p * p],
            tmp: vec![0.0; 2 * p + 2],
            cs: vec![(1.0, 0.0); p + 1],
            pow_in: vec![0.0; p],
            pow_out: vec![0.0; p],
        }
    }
}

/// Everything the translations of order `p` share: scalings, the unit coaxial matrices and
/// `W(P)` for the `y` rotations.
#[derive(Clone, Debug)]
pub struct Operators {
    /// Expansion order.
    pub p: usize,
    /// The basis scalings.
    pub scalings: Scalings,
    sr: Coaxial,
    ss: Coaxial,
    rr: Coaxial,
    wp: Vec<Vec<f64>>,
}

impl Operators {
    /// The operators of order `p` (`1 <= p <=` [`crate::basis::MAX_ORDER`]).
    pub fn new(p: usize) -> Self {
        let scalings = Scalings::new(p);
        let fact = |n: usize| (2..=n).fold(1.0f64, |a, i| a * i as f64);
        let ratio = |n: usize, np: usize| (((2 * np + 1) as f64) / ((2 * n + 1) as f64)).sqrt();
        let sr = Coaxial::new(p, |k, n, np| {
            let sign = if (n + k) % 2 == 1 { -1.0 } else { 1.0 };
            sign * ratio(n, np) * fact(n + np) / (fact_pair(n, k) * fact_pair(np, k))
        });
        let ss = Coaxial::new(p, |k, n, np| {
            if np > n {
                return 0.0;
            }
            let sign = if (n - np) % 2 == 1 { -1.0 } else { 1.0 };
            sign * ratio(n, np) * fact_pair(n, k) / fact_pair(np, k) / fact(n - np)
        });
        let rr = Coaxial::new(p, |k, n, np| {
            if np < n {
                return 0.0;
            }
            ratio(n, np) * fact_pair(np, k) / fact_pair(n, k) / fact(np - n)
        });
        let wp = rotation_by_quadrature(&rot_x(std::f64::consts::FRAC_PI_2), &scalings);
        Self { p, scalings, sr, ss, rr, wp }
    }

    /// The `y` rotation by `-beta` for a translation of polar angle `beta`.
    pub fn y_rotation(&self, beta: f64) -> YRotation {
        YRotation::new(-beta, &self.wp, self.p)
    }

    /// Adds the translation `op` of the first `q` degrees of `input` (a box's stored
    /// coefficients) to `output`: rotate `t` onto `+z`, coaxial translation, rotate back.
    pub fn translate(&self, op: Op, g: &Geometry<'_>, q: usize, input: &[f64], output: &mut [f64], s: &mut Scratch) {
        let q = q.min(self.p);
        let nq = q * q;
        let a = &mut s.a[..nq];
        a.copy_from_slice(&input[..nq]);
        // W(R_z(-alpha))^T: cos and sin of m (-alpha).
        let (ca, sa) = g.azimuth;
        angle_table_from(ca, -sa, q, &mut s.cs);
        rotate_z(a, q, &s.cs, true);
        g.yrot.apply(a, q, true, &mut s.tmp);
        // Powers of the scaling.
        let (coax, x_in, x_out, pre) = match op {
            Op::M2L => (&self.sr, g.h_in / g.t, g.h_out / g.t, 1.0 / g.t),
            Op::M2M => (&self.ss, g.h_in / g.t, g.t / g.h_out, 1.0),
            Op::L2L => (&self.rr, g.t / g.h_in, g.h_out / g.t, 1.0),
        };
        let (mut u, mut v) = (1.0, pre);
        for n in 0..q {
            s.pow_in[n] = u;
            s.pow_out[n] = v;
            u *= x_in;
            v *= x_out;
        }
        for n in 0..q {
            let f = s.pow_in[n];
            for x in &mut a[idx(n, 0) - n..=idx(n, 0) + n] {
                *x *= f;
            }
        }
        let b = &mut s.b[..nq];
        b.fill(0.0);
        for k in 0..q {
            let d = self.p - k;
            let block = &coax.blocks[k];
            for i in 0..q - k {
                let n = k + i;
                let row = &block[i * d..i * d + d];
                // S|S is lower and R|R upper triangular.
                let (j0, j1) = match op {
                    Op::M2M => (0, i + 1),
                    Op::L2L => (i, q - k),
                    Op::M2L => (0, q - k),
                };
                let (mut sp, mut sm) = (0.0, 0.0);
                for (j, &w) in row.iter().enumerate().take(j1).skip(j0) {
                    let np = k + j;
                    sp = w.mul_add(a[idx(np, k as isize)], sp);
                    if k > 0 {
                        sm = w.mul_add(a[idx(np, -(k as isize))], sm);
                    }
                }
                let f = s.pow_out[n];
                b[idx(n, k as isize)] = sp * f;
                if k > 0 {
                    b[idx(n, -(k as isize))] = sm * f;
                }
            }
        }
        g.yrot.apply(b, q, false, &mut s.tmp);
        rotate_z(b, q, &s.cs, false);
        for (o, x) in output[..nq].iter_mut().zip(b.iter()) {
            *o += x;
        }
    }
}
