//! A minimal explicit-SIMD layer for the P2P kernels.
//!
//! [`Simd`] is implemented by `f64x8`/`f32x16` (AVX-512F), `f64x4`/`f32x8` (AVX2 + FMA) and by
//! the scalars themselves (one lane, any machine). Kernels are written once, generic over
//! [`Simd`], marked `#[inline(always)]`, and instantiated inside `#[target_feature]` functions
//! chosen at run time ([`Isa::detect`]), so one binary runs on any x86-64 (or other) CPU.
//!
//! The methods are safe wrappers around the intrinsics: they must only be executed on a CPU with
//! the instruction set of the type, which the dispatch in `p2p` guarantees.

use std::ops::{Add, Mul, Neg, Sub};

use parki_core::Real;

pub use parki_core::isa::Isa;

/// A vector of `LANES` reals with the operations the kernels need.
pub trait Simd: Copy + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> + Neg<Output = Self> {
    /// The scalar type.
    type Scalar: Real;
    /// Lanes per vector.
    const LANES: usize;
    /// All lanes equal to `x`.
    fn splat(x: Self::Scalar) -> Self;
    /// Loads `LANES` values from `s[0..LANES]` (unaligned).
    fn load(s: &[Self::Scalar]) -> Self;
    /// `self * a + b` with one rounding.
    fn mul_add(self, a: Self, b: Self) -> Self;
    /// Lane-wise division.
    fn div(self, o: Self) -> Self;
    /// Lane-wise square root.
    fn sqrt(self) -> Self;
    /// `1/sqrt(self)` to full precision (AVX-512: 14-bit estimate and Newton steps, FMA only).
    fn rsqrt(self) -> Self {
        Self::splat(Self::Scalar::ONE).div(self.sqrt())
    }
    /// `1/self` to full precision (AVX-512: 14-bit estimate and Newton steps, FMA only).
    fn recip(self) -> Self {
        Self::splat(Self::Scalar::ONE).div(self)
    }
    /// Whether `rsqrt` and `recip` use estimates and Newton steps (for flop counting).
    const NEWTON: bool = false;
    /// Lane-wise maximum.
    fn max(self, o: Self) -> Self;
    /// Lane-wise minimum.
    fn min(self, o: Self) -> Self;
    /// Rounds to the nearest integer (ties to even).
    fn round(self) -> Self;
    /// `2^n` for integer-valued `n` inside the normal exponent range.
    fn pow2i(n: Self) -> Self;
    /// Lanes where `m > 0` take `a`, the others `b`.
    fn select_positive(m: Self, a: Self, b: Self) -> Self;
    /// Sum of the lanes.
    fn reduce_add(self) -> Self::Scalar;
}

macro_rules! scalar_simd {
    ($t:ty, $bits:ty, $mant:expr, $bias:expr) => {
        impl Simd for $t {
            type Scalar = $t;
            const LANES: usize = 1;
            #[inline(always)]
            fn splat(x: $t) -> Self {
                x
            }
            #[inline(always)]
            fn load(s: &[$t]) -> Self {
                s[0]
            }
            #[inline(always)]
            fn mul_add(self, a: Self, b: Self) -> Self {
                <$t>::mul_add(self, a, b)
            }
            #[inline(always)]
            fn div(self, o: Self) -> Self {
                self / o
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            #[inline(always)]
            fn max(self, o: Self) -> Self {
                <$t>::max(self, o)
            }
            #[inline(always)]
            fn min(self, o: Self) -> Self {
                <$t>::min(self, o)
            }
            #[inline(always)]
            fn round(self) -> Self {
                <$t>::round_ties_even(self)
            }
            #[inline(always)]
            fn pow2i(n: Self) -> Self {
                <$t>::from_bits((((n as i64) + $bias) as $bits) << $mant)
            }
            #[inline(always)]
            fn select_positive(m: Self, a: Self, b: Self) -> Self {
                if m > 0.0 {
                    a
                } else {
                    b
                }
            }
            #[inline(always)]
            fn reduce_add(self) -> $t {
                self
            }
        }
    };
}

scalar_simd!(f64, u64, 52, 1023);
scalar_simd!(f32, u32, 23, 127);

#[cfg(target_arch = "x86_64")]
pub use x86::{F32x16, F32x8, F64x4, F64x8};

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! AVX-512F and AVX2+FMA vectors. Every method is `#[inline(always)]` so that it is compiled
    //! inside the caller's `#[target_feature]` function.

    use std::arch::x86_64::{
        __m256, __m256d, __m512, __m512d, _mm256_add_epi32, _mm256_add_epi64, _mm256_add_pd, _mm256_add_ps,
        _mm256_blendv_pd, _mm256_blendv_ps, _mm256_castpd256_pd128, _mm256_castpd_si256, _mm256_castps256_ps128,
        _mm256_castps_si256, _mm256_castsi256_pd, _mm256_castsi256_ps, _mm256_cmp_pd, _mm256_cmp_ps, _mm256_div_pd,
        _mm256_div_ps, _mm256_extractf128_pd, _mm256_extractf128_ps, _mm256_fmadd_pd, _mm256_fmadd_ps, _mm256_loadu_pd,
        _mm256_loadu_ps, _mm256_max_pd, _mm256_max_ps, _mm256_min_pd, _mm256_min_ps, _mm256_mul_pd, _mm256_mul_ps,
        _mm256_round_pd, _mm256_round_ps, _mm256_set1_epi32, _mm256_set1_epi64x, _mm256_set1_pd, _mm256_set1_ps,
        _mm256_setzero_pd, _mm256_setzero_ps, _mm256_slli_epi32, _mm256_slli_epi64, _mm256_sqrt_pd, _mm256_sqrt_ps,
        _mm256_sub_pd, _mm256_sub_ps, _mm512_add_epi32, _mm512_add_epi64, _mm512_add_pd, _mm512_add_ps,
        _mm512_castpd_si512, _mm512_castps_si512, _mm512_castsi512_pd, _mm512_castsi512_ps, _mm512_cmp_pd_mask,
        _mm512_cmp_ps_mask, _mm512_div_pd, _mm512_div_ps, _mm512_fmadd_pd, _mm512_fmadd_ps, _mm512_fnmadd_pd,
        _mm512_fnmadd_ps, _mm512_loadu_pd, _mm512_loadu_ps, _mm512_mask_blend_pd, _mm512_mask_blend_ps, _mm512_max_pd,
        _mm512_max_ps, _mm512_min_pd, _mm512_min_ps, _mm512_mul_pd, _mm512_mul_ps, _mm512_rcp14_pd, _mm512_rcp14_ps,
        _mm512_reduce_add_pd, _mm512_reduce_add_ps, _mm512_roundscale_pd, _mm512_roundscale_ps, _mm512_rsqrt14_pd,
        _mm512_rsqrt14_ps, _mm512_set1_epi32, _mm512_set1_epi64, _mm512_set1_pd, _mm512_set1_ps, _mm512_setzero_pd,
        _mm512_setzero_ps, _mm512_slli_epi32, _mm512_slli_epi64, _mm512_sqrt_pd, _mm512_sqrt_ps, _mm512_sub_pd,
        _mm512_sub_ps, _mm_add_pd, _mm_add_ps, _mm_cvtsd_f64, _mm_cvtss_f32, _mm_movehl_ps, _mm_shuffle_ps,
        _mm_unpackhi_pd, _CMP_GT_OQ, _MM_FROUND_NO_EXC, _MM_FROUND_TO_NEAREST_INT,
    };
    use std::ops::{Add, Mul, Neg, Sub};

    use super::Simd;

    const ROUND: i32 = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

    macro_rules! ops {
        ($v:ident, $add:ident, $sub:ident, $mul:ident, $zero:ident) => {
            impl Add for $v {
                type Output = $v;
                #[inline(always)]
                fn add(self, o: $v) -> $v {
                    // SAFETY: executed only on CPUs with this instruction set (module docs).
                    unsafe { $v($add(self.0, o.0)) }
                }
            }
            impl Sub for $v {
                type Output = $v;
                #[inline(always)]
                fn sub(self, o: $v) -> $v {
                    // SAFETY: as above.
                    unsafe { $v($sub(self.0, o.0)) }
                }
            }
            impl Mul for $v {
                type Output = $v;
                #[inline(always)]
                fn mul(self, o: $v) -> $v {
                    // SAFETY: as above.
                    unsafe { $v($mul(self.0, o.0)) }
                }
            }
            impl Neg for $v {
                type Output = $v;
                #[inline(always)]
                fn neg(self) -> $v {
                    // SAFETY: as above.
                    unsafe { $v($sub($zero(), self.0)) }
                }
            }
        };
    }

    /// 8 f64 lanes (AVX-512F).
    #[derive(Clone, Copy)]
    pub struct F64x8(__m512d);
    /// 16 f32 lanes (AVX-512F).
    #[derive(Clone, Copy)]
    pub struct F32x16(__m512);
    /// 4 f64 lanes (AVX2 + FMA).
    #[derive(Clone, Copy)]
    pub struct F64x4(__m256d);
    /// 8 f32 lanes (AVX2 + FMA).
    #[derive(Clone, Copy)]
    pub struct F32x8(__m256);

    ops!(F64x8, _mm512_add_pd, _mm512_sub_pd, _mm512_mul_pd, _mm512_setzero_pd);
    ops!(F32x16, _mm512_add_ps, _mm512_sub_ps, _mm512_mul_ps, _mm512_setzero_ps);
    ops!(F64x4, _mm256_add_pd, _mm256_sub_pd, _mm256_mul_pd, _mm256_setzero_pd);
    ops!(F32x8, _mm256_add_ps, _mm256_sub_ps, _mm256_mul_ps, _mm256_setzero_ps);

    // SAFETY (all impls below): executed only on CPUs with the instruction set of the type;
    // `load` reads exactly LANES elements, which the slice index bounds-checks.
    impl Simd for F64x8 {
        type Scalar = f64;
        const LANES: usize = 8;
        const NEWTON: bool = true;
        #[inline(always)]
        fn rsqrt(self) -> Self {
            // y <- y (3/2 - x/2 y^2): 14 -> 28 -> 56 bits
            unsafe {
                let h = _mm512_mul_pd(self.0, _mm512_set1_pd(0.5));
                let c = _mm512_set1_pd(1.5);
                let mut y = _mm512_rsqrt14_pd(self.0);
                for _ in 0..2 {
                    let t = _mm512_fnmadd_pd(h, _mm512_mul_pd(y, y), c);
                    y = _mm512_mul_pd(y, t);
                }
                F64x8(y)
            }
        }
        #[inline(always)]
        fn recip(self) -> Self {
            // y <- y + y (1 - d y): 14 -> 28 -> 56 bits
            unsafe {
                let one = _mm512_set1_pd(1.0);
                let mut y = _mm512_rcp14_pd(self.0);
                for _ in 0..2 {
                    let e = _mm512_fnmadd_pd(self.0, y, one);
                    y = _mm512_fmadd_pd(y, e, y);
                }
                F64x8(y)
            }
        }
        #[inline(always)]
        fn splat(x: f64) -> Self {
            unsafe { F64x8(_mm512_set1_pd(x)) }
        }
        #[inline(always)]
        fn load(s: &[f64]) -> Self {
            let s = &s[..8];
            unsafe { F64x8(_mm512_loadu_pd(s.as_ptr())) }
        }
        #[inline(always)]
        fn mul_add(self, a: Self, b: Self) -> Self {
            unsafe { F64x8(_mm512_fmadd_pd(self.0, a.0, b.0)) }
        }
        #[inline(always)]
        fn div(self, o: Self) -> Self {
            unsafe { F64x8(_mm512_div_pd(self.0, o.0)) }
        }
        #[inline(always)]
        fn sqrt(self) -> Self {
            unsafe { F64x8(_mm512_sqrt_pd(self.0)) }
        }
        #[inline(always)]
        fn max(self, o: Self) -> Self {
            unsafe { F64x8(_mm512_max_pd(self.0, o.0)) }
        }
        #[inline(always)]
        fn min(self, o: Self) -> Self {
            unsafe { F64x8(_mm512_min_pd(self.0, o.0)) }
        }
        #[inline(always)]
        fn round(self) -> Self {
            unsafe { F64x8(_mm512_roundscale_pd::<ROUND>(self.0)) }
        }
        #[inline(always)]
        fn pow2i(n: Self) -> Self {
            // n + 1.5 2^52 holds n in its low mantissa bits; add the bias and shift into the exponent
            unsafe {
                let t = _mm512_add_pd(n.0, _mm512_set1_pd(6755399441055744.0));
                let b = _mm512_add_epi64(_mm512_castpd_si512(t), _mm512_set1_epi64(1023));
                F64x8(_mm512_castsi512_pd(_mm512_slli_epi64::<52>(b)))
            }
        }
        #[inline(always)]
        fn select_positive(m: Self, a: Self, b: Self) -> Self {
            unsafe {
                let k = _mm512_cmp_pd_mask::<_CMP_GT_OQ>(m.0, _mm512_setzero_pd());
                F64x8(_mm512_mask_blend_pd(k, b.0, a.0))
            }
        }
        #[inline(always)]
        fn reduce_add(self) -> f64 {
            unsafe { _mm512_reduce_add_pd(self.0) }
        }
    }

    impl Simd for F32x16 {
        type Scalar = f32;
        const LANES: usize = 16;
        const NEWTON: bool = true;
        #[inline(always)]
        fn rsqrt(self) -> Self {
            unsafe {
                let h = _mm512_mul_ps(self.0, _mm512_set1_ps(0.5));
                let y = _mm512_rsqrt14_ps(self.0);
                let t = _mm512_fnmadd_ps(h, _mm512_mul_ps(y, y), _mm512_set1_ps(1.5));
                F32x16(_mm512_mul_ps(y, t))
            }
        }
        #[inline(always)]
        fn recip(self) -> Self {
            unsafe {
                let y = _mm512_rcp14_ps(self.0);
                let e = _mm512_fnmadd_ps(self.0, y, _mm512_set1_ps(1.0));
                F32x16(_mm512_fmadd_ps(y, e, y))
            }
        }
        #[inline(always)]
        fn splat(x: f32) -> Self {
            unsafe { F32x16(_mm512_set1_ps(x)) }
        }
        #[inline(always)]
        fn load(s: &[f32]) -> Self {
            let s = &s[..16];
            unsafe { F32x16(_mm512_loadu_ps(s.as_ptr())) }
        }
        #[inline(always)]
        fn mul_add(self, a: Self, b: Self) -> Self {
            unsafe { F32x16(_mm512_fmadd_ps(self.0, a.0, b.0)) }
        }
        #[inline(always)]
        fn div(self, o: Self) -> Self {
            unsafe { F32x16(_mm512_div_ps(self.0, o.0)) }
        }
        #[inline(always)]
        fn sqrt(self) -> Self {
            unsafe { F32x16(_mm512_sqrt_ps(self.0)) }
        }
        #[inline(always)]
        fn max(self, o: Self) -> Self {
            unsafe { F32x16(_mm512_max_ps(self.0, o.0)) }
        }
        #[inline(always)]
        fn min(self, o: Self) -> Self {
            unsafe { F32x16(_mm512_min_ps(self.0, o.0)) }
        }
        #[inline(always)]
        fn round(self) -> Self {
            unsafe { F32x16(_mm512_roundscale_ps::<ROUND>(self.0)) }
        }
        #[inline(always)]
        fn pow2i(n: Self) -> Self {
            unsafe {
                let t = _mm512_add_ps(n.0, _mm512_set1_ps(12582912.0));
                let b = _mm512_add_epi32(_mm512_castps_si512(t), _mm512_set1_epi32(127));
                F32x16(_mm512_castsi512_ps(_mm512_slli_epi32::<23>(b)))
            }
        }
        #[inline(always)]
        fn select_positive(m: Self, a: Self, b: Self) -> Self {
            unsafe {
                let k = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(m.0, _mm512_setzero_ps());
                F32x16(_mm512_mask_blend_ps(k, b.0, a.0))
            }
        }
        #[inline(always)]
        fn reduce_add(self) -> f32 {
            unsafe { _mm512_reduce_add_ps(self.0) }
        }
    }

    impl Simd for F64x4 {
        type Scalar = f64;
        const LANES: usize = 4;
        #[inline(always)]
        fn splat(x: f64) -> Self {
            unsafe { F64x4(_mm256_set1_pd(x)) }
        }
        #[inline(always)]
        fn load(s: &[f64]) -> Self {
            let s = &s[..4];
            unsafe { F64x4(_mm256_loadu_pd(s.as_ptr())) }
        }
        #[inline(always)]
        fn mul_add(self, a: Self, b: Self) -> Self {
            unsafe { F64x4(_mm256_fmadd_pd(self.0, a.0, b.0)) }
        }
        #[inline(always)]
        fn div(self, o: Self) -> Self {
            unsafe { F64x4(_mm256_div_pd(self.0, o.0)) }
        }
        #[inline(always)]
        fn sqrt(self) -> Self {
            unsafe { F64x4(_mm256_sqrt_pd(self.0)) }
        }
        #[inline(always)]
        fn max(self, o: Self) -> Self {
            unsafe { F64x4(_mm256_max_pd(self.0, o.0)) }
        }
        #[inline(always)]
        fn min(self, o: Self) -> Self {
            unsafe { F64x4(_mm256_min_pd(self.0, o.0)) }
        }
        #[inline(always)]
        fn round(self) -> Self {
            unsafe { F64x4(_mm256_round_pd::<ROUND>(self.0)) }
        }
        #[inline(always)]
        fn pow2i(n: Self) -> Self {
            unsafe {
                let t = _mm256_add_pd(n.0, _mm256_set1_pd(6755399441055744.0));
                let b = _mm256_add_epi64(_mm256_castpd_si256(t), _mm256_set1_epi64x(1023));
                F64x4(_mm256_castsi256_pd(_mm256_slli_epi64::<52>(b)))
            }
        }
        #[inline(always)]
        fn select_positive(m: Self, a: Self, b: Self) -> Self {
            unsafe {
                let k = _mm256_cmp_pd::<_CMP_GT_OQ>(m.0, _mm256_setzero_pd());
                F64x4(_mm256_blendv_pd(b.0, a.0, k))
            }
        }
        #[inline(always)]
        fn reduce_add(self) -> f64 {
            unsafe {
                let lo = _mm256_castpd256_pd128(self.0);
                let hi = _mm256_extractf128_pd::<1>(self.0);
                let s = _mm_add_pd(lo, hi);
                _mm_cvtsd_f64(_mm_add_pd(s, _mm_unpackhi_pd(s, s)))
            }
        }
    }

    impl Simd for F32x8 {
        type Scalar = f32;
        const LANES: usize = 8;
        #[inline(always)]
        fn splat(x: f32) -> Self {
            unsafe { F32x8(_mm256_set1_ps(x)) }
        }
        #[inline(always)]
        fn load(s: &[f32]) -> Self {
            let s = &s[..8];
            unsafe { F32x8(_mm256_loadu_ps(s.as_ptr())) }
        }
        #[inline(always)]
        fn mul_add(self, a: Self, b: Self) -> Self {
            unsafe { F32x8(_mm256_fmadd_ps(self.0, a.0, b.0)) }
        }
        #[inline(always)]
        fn div(self, o: Self) -> Self {
            unsafe { F32x8(_mm256_div_ps(self.0, o.0)) }
        }
        #[inline(always)]
        fn sqrt(self) -> Self {
            unsafe { F32x8(_mm256_sqrt_ps(self.0)) }
        }
        #[inline(always)]
        fn max(self, o: Self) -> Self {
            unsafe { F32x8(_mm256_max_ps(self.0, o.0)) }
        }
        #[inline(always)]
        fn min(self, o: Self) -> Self {
            unsafe { F32x8(_mm256_min_ps(self.0, o.0)) }
        }
        #[inline(always)]
        fn round(self) -> Self {
            unsafe { F32x8(_mm256_round_ps::<ROUND>(self.0)) }
        }
        #[inline(always)]
        fn pow2i(n: Self) -> Self {
            unsafe {
                let t = _mm256_add_ps(n.0, _mm256_set1_ps(12582912.0));
                let b = _mm256_add_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(127));
                F32x8(_mm256_castsi256_ps(_mm256_slli_epi32::<23>(b)))
            }
        }
        #[inline(always)]
        fn select_positive(m: Self, a: Self, b: Self) -> Self {
            unsafe {
                let k = _mm256_cmp_ps::<_CMP_GT_OQ>(m.0, _mm256_setzero_ps());
                F32x8(_mm256_blendv_ps(b.0, a.0, k))
            }
        }
        #[inline(always)]
        fn reduce_add(self) -> f32 {
            unsafe {
                let lo = _mm256_castps256_ps128(self.0);
                let hi = _mm256_extractf128_ps::<1>(self.0);
                let s = _mm_add_ps(lo, hi);
                let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
                _mm_cvtss_f32(_mm_add_ps(s, _mm_shuffle_ps::<0x55>(s, s)))
            }
        }
    }
}
