//! The near field (seed 001, §2 "final summation", step 2): `phi(y) += sum q / |y - x|` and
//! `grad phi(y) += -sum q (y - x) / |y - x|^3` over the sources of a target leaf's P2P list,
//! [`LANES`] sources at a time in the lane arrays of the treecode's kernels (AVX-512: `1/r`
//! from `vrsqrt14pd` and two Newton steps), compiled per instruction set behind a run-time
//! check. A source at the target's own position (`r = 0`) is skipped (the paper's
//! `Phi(y, y) = 0`).

use parki_core::isa::Isa;
use parki_treecode::kernel::{Avx512, LaneMath, Portable, LANES};

/// Sources in structure-of-arrays form, in tree order.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    /// x coordinates.
    pub x: Vec<f64>,
    /// y coordinates.
    pub y: Vec<f64>,
    /// z coordinates.
    pub z: Vec<f64>,
    /// Charges.
    pub q: Vec<f64>,
}

impl Sources {
    /// From positions and charges.
    pub fn new(points: &[[f64; 3]], q: &[f64]) -> Self {
        Self {
            x: points.iter().map(|p| p[0]).collect(),
            y: points.iter().map(|p| p[1]).collect(),
            z: points.iter().map(|p| p[2]).collect(),
            q: q.to_vec(),
        }
    }
}

/// One target against `LANES` sources (or fewer, padded): accumulates into `acc`
/// (`[phi, gx, gy, gz]` per lane).
#[inline(always)]
fn lanes<M: LaneMath, const GRAD: bool>(
    m: M,
    t: [f64; 3],
    xs: &[f64; LANES],
    ys: &[f64; LANES],
    zs: &[f64; LANES],
    qs: &[f64; LANES],
    acc: &mut [[f64; LANES]; 4],
) {
    let mut d = [[0.0; LANES]; 3];
    let mut r2 = [0.0; LANES];
    for l in 0..LANES {
        d[0][l] = t[0] - xs[l];
        d[1][l] = t[1] - ys[l];
        d[2][l] = t[2] - zs[l];
        r2[l] = d[2][l].mul_add(d[2][l], d[1][l].mul_add(d[1][l], d[0][l] * d[0][l]));
    }
    let inv = m.inv_r(&r2);
    for l in 0..LANES {
        let qi = qs[l] * inv[l];
        acc[0][l] += qi;
        if GRAD {
            let f = qi * inv[l] * inv[l];
            acc[1][l] = (-f).mul_add(d[0][l], acc[1][l]);
            acc[2][l] = (-f).mul_add(d[1][l], acc[2][l]);
            acc[3][l] = (-f).mul_add(d[2][l], acc[3][l]);
        }
    }
}

#[inline(always)]
fn accumulate_with<M: LaneMath, const GRAD: bool>(
    m: M,
    targets: &[[f64; 3]],
    src: &Sources,
    ranges: &[(usize, usize)],
    pot: &mut [f64],
    grad: &mut [[f64; 3]],
) {
    for &(begin, end) in ranges {
        let full = begin + (end - begin) / LANES * LANES;
        for (i, &t) in targets.iter().enumerate() {
            let mut acc = [[0.0; LANES]; 4];
            let mut j = begin;
            while j < full {
                let xs: &[f64; LANES] = src.x[j..j + LANES].try_into().expect("LANES");
                let ys: &[f64; LANES] = src.y[j..j + LANES].try_into().expect("LANES");
                let zs: &[f64; LANES] = src.z[j..j + LANES].try_into().expect("LANES");
                let qs: &[f64; LANES] = src.q[j..j + LANES].try_into().expect("LANES");
                lanes::<M, GRAD>(m, t, xs, ys, zs, qs, &mut acc);
                j += LANES;
            }
            if full < end {
                let (mut xs, mut ys, mut zs, mut qs) =
                    ([t[0] + 1.0; LANES], [t[1]; LANES], [t[2]; LANES], [0.0; LANES]);
                for (l, j) in (full..end).enumerate() {
                    xs[l] = src.x[j];
                    ys[l] = src.y[j];
                    zs[l] = src.z[j];
                    qs[l] = src.q[j];
                }
                lanes::<M, GRAD>(m, t, &xs, &ys, &zs, &qs, &mut acc);
            }
            pot[i] += acc[0].iter().sum::<f64>();
            if GRAD {
                for a in 0..3 {
                    grad[i][a] += acc[a + 1].iter().sum::<f64>();
                }
            }
        }
    }
}

/// [`accumulate_with`] compiled for AVX-512F.
///
/// # Safety
/// The CPU must have AVX-512F, AVX-512VL, AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn accumulate_avx512<const GRAD: bool>(
    m: Avx512,
    targets: &[[f64; 3]],
    src: &Sources,
    ranges: &[(usize, usize)],
    pot: &mut [f64],
    grad: &mut [[f64; 3]],
) {
    accumulate_with::<Avx512, GRAD>(m, targets, src, ranges, pot, grad)
}

/// [`accumulate_with`] compiled for AVX2 and FMA.
///
/// # Safety
/// The CPU must have AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn accumulate_avx2<const GRAD: bool>(
    targets: &[[f64; 3]],
    src: &Sources,
    ranges: &[(usize, usize)],
    pot: &mut [f64],
    grad: &mut [[f64; 3]],
) {
    accumulate_with::<Portable, GRAD>(Portable, targets, src, ranges, pot, grad)
}

/// Adds the near field of the source blocks `ranges` (of `src`) at `targets` into `pot` and,
/// when `GRAD`, `grad`, with the vector code of `isa` (portable code where the CPU lacks it).
pub fn accumulate<const GRAD: bool>(
    isa: Isa,
    targets: &[[f64; 3]],
    src: &Sources,
    ranges: &[(usize, usize)],
    pot: &mut [f64],
    grad: &mut [[f64; 3]],
) {
    #[cfg(target_arch = "x86_64")]
    match isa {
        Isa::Avx512 if isa.available() => {
            if let Some(m) = Avx512::new() {
                // SAFETY: `available()` checked AVX-512F, AVX-512VL, AVX2 and FMA.
                return unsafe { accumulate_avx512::<GRAD>(m, targets, src, ranges, pot, grad) };
            }
        }
        Isa::Avx2 if isa.available() => {
            // SAFETY: `available()` checked AVX2 and FMA.
            return unsafe { accumulate_avx2::<GRAD>(targets, src, ranges, pot, grad) };
        }
        _ => {}
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = isa;
    accumulate_with::<Portable, GRAD>(Portable, targets, src, ranges, pot, grad)
}
