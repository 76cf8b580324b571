//! A minimal explicit-SIMD layer for the P2P kernels.
//!
//! [`Simd`] is implemented by the crate-private vectors `F64x8`/`F32x16` (AVX-512F) and
//! `F64x4`/`F32x8` (AVX2 + FMA), and by the scalars themselves (one lane, any machine). Kernels
//! are written once, generic over [`Simd`], marked `#[inline(always)]`, and instantiated inside
//! `#[target_feature]` functions chosen at run time, so one binary runs on any x86-64 (or
//! other) CPU.
//!
//! Soundness (issue 8, defect 10): the vector methods are safe wrappers around intrinsics that
//! are undefined behaviour on a CPU without the instruction set. The vector types are therefore
//! not public: no code outside this crate can name, create or use one. Inside the crate they are
//! used only in the `#[target_feature]` functions of the P2P kernels and of [`fma_chains`],
//! which are entered only with an [`IsaToken`]: a value that exists only if the CPU was checked
//! to have the instruction set (as RustFFT's AVX planner holds its AVX types behind a run-time
//! check). Outside the crate, the safe routes are [`crate::p2p()`] (which takes an [`Isa`] and
//! falls back to scalar code for one the CPU lacks) and [`fma_chains`].
//!
//! The vector types cannot be named from outside the crate:
//!
//! ```compile_fail,E0603
//! use parki_nearfield::simd::F64x8;
//! ```
//!
//! ```compile_fail,E0603
//! use parki_nearfield::simd::F32x8;
//! ```
//!
//! and a token cannot be made without the check:
//!
//! ```compile_fail,E0451
//! let t = parki_nearfield::IsaToken { isa: parki_nearfield::Isa::Avx512 };
//! ```
//!
//! while the public items next to them can:
//!
//! ```
//! use parki_nearfield::simd::{fma_chains, Simd};
//! use parki_nearfield::{Isa, IsaToken};
//! let token = IsaToken::new(Isa::detect()).unwrap_or_else(IsaToken::scalar);
//! let (sum, lanes) = fma_chains::<f32>(token, 10);
//! assert!(sum.is_finite() && lanes >= 1);
//! assert_eq!(<f64 as Simd>::splat(2.0).mul_add(3.0, 1.0), 7.0);
//! ```

use std::ops::{Add, Mul, Neg, Sub};

use parki_core::Real;

pub use parki_core::isa::Isa;

use crate::p2p::P2pReal;

/// Proof that this CPU executes the instructions the kernels compile for an [`Isa`].
///
/// Made only by [`IsaToken::new`] (or [`IsaToken::detect`], [`IsaToken::scalar`]), which checks
/// the CPU at run time: `Avx512` needs AVX-512F and FMA, `Avx2` needs AVX2 and FMA (exactly the
/// features the `#[target_feature]` functions of this crate enable). Code that holds a token
/// for an instruction set may run the SIMD code of that set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IsaToken {
    isa: Isa,
}

impl IsaToken {
    /// A token for `isa` if this CPU has its instructions, otherwise `None`.
    pub fn new(isa: Isa) -> Option<Self> {
        Self::cpu_has(isa).then_some(Self { isa })
    }

    /// The token for the widest instruction set this CPU has.
    pub fn detect() -> Self {
        [Isa::Avx512, Isa::Avx2].into_iter().find_map(Self::new).unwrap_or_else(Self::scalar)
    }

    /// The token for portable scalar code (any CPU).
    pub fn scalar() -> Self {
        Self { isa: Isa::Scalar }
    }

    /// The instruction set this token is for.
    pub fn isa(self) -> Isa {
        self.isa
    }

    fn cpu_has(isa: Isa) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            let fma = std::is_x86_feature_detected!("fma");
            match isa {
                Isa::Avx512 => std::is_x86_feature_detected!("avx512f") && fma,
                Isa::Avx2 => std::is_x86_feature_detected!("avx2") && fma,
                Isa::Scalar => true,
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            isa == Isa::Scalar
        }
    }
}

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
    /// `1/sqrt(self)` to about 28 bits, for [`PairAccuracy::Loose`](crate::special::PairAccuracy)
    /// (AVX-512 f64: the estimate and one Newton step; elsewhere as [`Simd::rsqrt`]).
    fn rsqrt_loose(self) -> Self {
        self.rsqrt()
    }
    /// `1/self` to about 28 bits (AVX-512 f64: the estimate and one Newton step; elsewhere as
    /// [`Simd::recip`]).
    fn recip_loose(self) -> Self {
        self.recip()
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

/// 16 independent chains `acc <- acc a + b`: enough to cover the FMA latency on two pipes.
#[inline(always)]
pub(crate) fn fma_loop<V: Simd>(iters: u64) -> V::Scalar {
    let a = V::splat(std::hint::black_box(V::Scalar::from_f64(0.999_999_9)));
    let b = V::splat(std::hint::black_box(V::Scalar::from_f64(1e-7)));
    let mut acc = [V::splat(V::Scalar::ONE); 16];
    for _ in 0..std::hint::black_box(iters) {
        for x in acc.iter_mut() {
            *x = x.mul_add(a, b);
        }
    }
    let mut s = V::splat(V::Scalar::ZERO);
    for x in acc {
        s = s + x;
    }
    s.reduce_add()
}

/// Runs `iters` rounds of 16 independent fused multiply-adds in the widest vectors of the
/// token's instruction set (the floating-point peak loop of the benchmarks): returns the sum of
/// the results (to keep the loop alive) and the lanes per vector. The loop does
/// `iters * 16 * lanes` FMAs, `2 * iters * 16 * lanes` flops.
pub fn fma_chains<T: P2pReal>(token: IsaToken, iters: u64) -> (T, usize) {
    T::fma_chains(token, iters)
}

#[cfg(target_arch = "x86_64")]
pub(crate) use x86::{fma_avx2, fma_avx512, F32x16, F32x8, F64x4, F64x8};

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! AVX-512F and AVX2+FMA vectors. Every method is `#[inline(always)]` so that it is compiled
    //! inside the caller's `#[target_feature]` function.
    //!
    //! Invariant: a method of `F64x8`/`F32x16` runs only inside a function compiled with
    //! `#[target_feature(enable = "avx512f,fma")]`, and one of `F64x4`/`F32x8` only inside one
    //! with `"avx2,fma"`; those functions (`cell_avx512`, `cell_avx2` in `p2p`, `fma_avx512`,
    //! `fma_avx2` below) are called only with an [`IsaToken`](super::IsaToken) for their
    //! instruction set, which proves that the CPU has it. The types are `pub(crate)`, so only
    //! this crate can uphold or break the invariant. The SAFETY comments below rely on it.

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

    use super::{fma_loop, Simd};

    const ROUND: i32 = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

    macro_rules! ops {
        ($v:ident, $add:ident, $sub:ident, $mul:ident, $zero:ident) => {
            impl Add for $v {
                type Output = $v;
                #[inline(always)]
                fn add(self, o: $v) -> $v {
                    // SAFETY: the lane-wise add is an AVX-512F instruction (512-bit types) or
                    // an AVX one (256-bit types), which the CPU has wherever this runs (module
                    // invariant); registers only.
                    unsafe { $v($add(self.0, o.0)) }
                }
            }
            impl Sub for $v {
                type Output = $v;
                #[inline(always)]
                fn sub(self, o: $v) -> $v {
                    // SAFETY: the lane-wise subtraction is AVX-512F (512-bit types) or AVX
                    // (256-bit types), present on the CPU by the module invariant; it reads
                    // and writes registers only.
                    unsafe { $v($sub(self.0, o.0)) }
                }
            }
            impl Mul for $v {
                type Output = $v;
                #[inline(always)]
                fn mul(self, o: $v) -> $v {
                    // SAFETY: the lane-wise product is AVX-512F (512-bit types) or AVX
                    // (256-bit types), which the module invariant guarantees on this CPU; no
                    // memory is accessed.
                    unsafe { $v($mul(self.0, o.0)) }
                }
            }
            impl Neg for $v {
                type Output = $v;
                #[inline(always)]
                fn neg(self) -> $v {
                    // SAFETY: the zero vector and the subtraction are AVX-512F (512-bit
                    // types) or AVX (256-bit types), available by the module invariant;
                    // registers only.
                    unsafe { $v($sub($zero(), self.0)) }
                }
            }
        };
    }

    /// 8 f64 lanes (AVX-512F).
    #[derive(Clone, Copy)]
    pub(crate) struct F64x8(__m512d);
    /// 16 f32 lanes (AVX-512F).
    #[derive(Clone, Copy)]
    pub(crate) struct F32x16(__m512);
    /// 4 f64 lanes (AVX2 + FMA).
    #[derive(Clone, Copy)]
    pub(crate) struct F64x4(__m256d);
    /// 8 f32 lanes (AVX2 + FMA).
    #[derive(Clone, Copy)]
    pub(crate) struct F32x8(__m256);

    ops!(F64x8, _mm512_add_pd, _mm512_sub_pd, _mm512_mul_pd, _mm512_setzero_pd);
    ops!(F32x16, _mm512_add_ps, _mm512_sub_ps, _mm512_mul_ps, _mm512_setzero_ps);
    ops!(F64x4, _mm256_add_pd, _mm256_sub_pd, _mm256_mul_pd, _mm256_setzero_pd);
    ops!(F32x8, _mm256_add_ps, _mm256_sub_ps, _mm256_mul_ps, _mm256_setzero_ps);

    impl Simd for F64x8 {
        type Scalar = f64;
        const LANES: usize = 8;
        const NEWTON: bool = true;
        #[inline(always)]
        fn rsqrt(self) -> Self {
            // y <- y (3/2 - x/2 y^2): 14 -> 28 -> 56 bits
            // SAFETY: rsqrt14, mul, set1 and fnmadd on 512-bit f64 vectors are AVX-512F
            // instructions, present by the module invariant; registers only.
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
            // SAFETY: rcp14, set1, fnmadd and fmadd on 512-bit f64 vectors need AVX-512F only,
            // which the CPU has by the module invariant; no memory is touched.
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
        fn rsqrt_loose(self) -> Self {
            // one step: 14 -> 28 bits
            // SAFETY: rsqrt14, mul, set1 and fnmadd on 512-bit f64 vectors are AVX-512F
            // instructions, present by the module invariant; registers only.
            unsafe {
                let h = _mm512_mul_pd(self.0, _mm512_set1_pd(0.5));
                let y = _mm512_rsqrt14_pd(self.0);
                let t = _mm512_fnmadd_pd(h, _mm512_mul_pd(y, y), _mm512_set1_pd(1.5));
                F64x8(_mm512_mul_pd(y, t))
            }
        }
        #[inline(always)]
        fn recip_loose(self) -> Self {
            // one step: 14 -> 28 bits
            // SAFETY: rcp14, set1, fnmadd and fmadd on 512-bit f64 vectors need AVX-512F only,
            // which the CPU has by the module invariant; no memory is touched.
            unsafe {
                let y = _mm512_rcp14_pd(self.0);
                let e = _mm512_fnmadd_pd(self.0, y, _mm512_set1_pd(1.0));
                F64x8(_mm512_fmadd_pd(y, e, y))
            }
        }
        #[inline(always)]
        fn splat(x: f64) -> Self {
            // SAFETY: the broadcast `_mm512_set1_pd` is AVX-512F, available by the module
            // invariant.
            unsafe { F64x8(_mm512_set1_pd(x)) }
        }
        #[inline(always)]
        fn load(s: &[f64]) -> Self {
            let s = &s[..8];
            // SAFETY: `s` holds exactly 8 f64 (the slicing above panics otherwise), so the
            // unaligned 8-lane load reads inside the slice; AVX-512F by the module invariant.
            unsafe { F64x8(_mm512_loadu_pd(s.as_ptr())) }
        }
        #[inline(always)]
        fn mul_add(self, a: Self, b: Self) -> Self {
            // SAFETY: `_mm512_fmadd_pd` is AVX-512F (module invariant); registers only.
            unsafe { F64x8(_mm512_fmadd_pd(self.0, a.0, b.0)) }
        }
        #[inline(always)]
        fn div(self, o: Self) -> Self {
            // SAFETY: `_mm512_div_pd` is AVX-512F, present by the module invariant.
            unsafe { F64x8(_mm512_div_pd(self.0, o.0)) }
        }
        #[inline(always)]
        fn sqrt(self) -> Self {
            // SAFETY: `_mm512_sqrt_pd` is AVX-512F, present by the module invariant.
            unsafe { F64x8(_mm512_sqrt_pd(self.0)) }
        }
        #[inline(always)]
        fn max(self, o: Self) -> Self {
            // SAFETY: `_mm512_max_pd` is AVX-512F, present by the module invariant.
            unsafe { F64x8(_mm512_max_pd(self.0, o.0)) }
        }
        #[inline(always)]
        fn min(self, o: Self) -> Self {
            // SAFETY: `_mm512_min_pd` is AVX-512F, present by the module invariant.
            unsafe { F64x8(_mm512_min_pd(self.0, o.0)) }
        }
        #[inline(always)]
        fn round(self) -> Self {
            // SAFETY: `_mm512_roundscale_pd` (a valid immediate `ROUND`) is AVX-512F, present
            // by the module invariant.
            unsafe { F64x8(_mm512_roundscale_pd::<ROUND>(self.0)) }
        }
        #[inline(always)]
        fn pow2i(n: Self) -> Self {
            // n + 1.5 2^52 holds n in its low mantissa bits; add the bias and shift into the exponent
            // SAFETY: the f64 add, the 64-bit integer add and shift and the bit casts are all
            // AVX-512F instructions (module invariant); they only reinterpret register bits.
            unsafe {
                let t = _mm512_add_pd(n.0, _mm512_set1_pd(6755399441055744.0));
                let b = _mm512_add_epi64(_mm512_castpd_si512(t), _mm512_set1_epi64(1023));
                F64x8(_mm512_castsi512_pd(_mm512_slli_epi64::<52>(b)))
            }
        }
        #[inline(always)]
        fn select_positive(m: Self, a: Self, b: Self) -> Self {
            // SAFETY: the mask compare and the masked blend are AVX-512F instructions, present
            // by the module invariant; registers and a mask register only.
            unsafe {
                let k = _mm512_cmp_pd_mask::<_CMP_GT_OQ>(m.0, _mm512_setzero_pd());
                F64x8(_mm512_mask_blend_pd(k, b.0, a.0))
            }
        }
        #[inline(always)]
        fn reduce_add(self) -> f64 {
            // SAFETY: `_mm512_reduce_add_pd` expands to AVX-512F (and older) instructions,
            // present by the module invariant.
            unsafe { _mm512_reduce_add_pd(self.0) }
        }
    }

    impl Simd for F32x16 {
        type Scalar = f32;
        const LANES: usize = 16;
        const NEWTON: bool = true;
        #[inline(always)]
        fn rsqrt(self) -> Self {
            // SAFETY: rsqrt14, mul, set1 and fnmadd on 512-bit f32 vectors are AVX-512F
            // instructions, which the CPU has by the module invariant; registers only.
            unsafe {
                let h = _mm512_mul_ps(self.0, _mm512_set1_ps(0.5));
                let y = _mm512_rsqrt14_ps(self.0);
                let t = _mm512_fnmadd_ps(h, _mm512_mul_ps(y, y), _mm512_set1_ps(1.5));
                F32x16(_mm512_mul_ps(y, t))
            }
        }
        #[inline(always)]
        fn recip(self) -> Self {
            // SAFETY: rcp14, fnmadd and fmadd on 512-bit f32 vectors need only AVX-512F
            // (module invariant); no memory is touched.
            unsafe {
                let y = _mm512_rcp14_ps(self.0);
                let e = _mm512_fnmadd_ps(self.0, y, _mm512_set1_ps(1.0));
                F32x16(_mm512_fmadd_ps(y, e, y))
            }
        }
        #[inline(always)]
        fn splat(x: f32) -> Self {
            // SAFETY: the broadcast `_mm512_set1_ps` is AVX-512F, available by the module
            // invariant.
            unsafe { F32x16(_mm512_set1_ps(x)) }
        }
        #[inline(always)]
        fn load(s: &[f32]) -> Self {
            let s = &s[..16];
            // SAFETY: `s` holds exactly 16 f32 (the slicing above panics otherwise), so the
            // unaligned 16-lane load stays inside it; AVX-512F by the module invariant.
            unsafe { F32x16(_mm512_loadu_ps(s.as_ptr())) }
        }
        #[inline(always)]
        fn mul_add(self, a: Self, b: Self) -> Self {
            // SAFETY: `_mm512_fmadd_ps` is AVX-512F (module invariant); registers only.
            unsafe { F32x16(_mm512_fmadd_ps(self.0, a.0, b.0)) }
        }
        #[inline(always)]
        fn div(self, o: Self) -> Self {
            // SAFETY: `_mm512_div_ps` is AVX-512F, present by the module invariant.
            unsafe { F32x16(_mm512_div_ps(self.0, o.0)) }
        }
        #[inline(always)]
        fn sqrt(self) -> Self {
            // SAFETY: `_mm512_sqrt_ps` is AVX-512F, present by the module invariant.
            unsafe { F32x16(_mm512_sqrt_ps(self.0)) }
        }
        #[inline(always)]
        fn max(self, o: Self) -> Self {
            // SAFETY: `_mm512_max_ps` is AVX-512F, present by the module invariant.
            unsafe { F32x16(_mm512_max_ps(self.0, o.0)) }
        }
        #[inline(always)]
        fn min(self, o: Self) -> Self {
            // SAFETY: `_mm512_min_ps` is AVX-512F, present by the module invariant.
            unsafe { F32x16(_mm512_min_ps(self.0, o.0)) }
        }
        #[inline(always)]
        fn round(self) -> Self {
            // SAFETY: `_mm512_roundscale_ps` (a valid immediate `ROUND`) is AVX-512F, present
            // by the module invariant.
            unsafe { F32x16(_mm512_roundscale_ps::<ROUND>(self.0)) }
        }
        #[inline(always)]
        fn pow2i(n: Self) -> Self {
            // SAFETY: the f32 add, the 32-bit integer add and shift and the bit casts are all
            // AVX-512F instructions (module invariant); they only reinterpret register bits.
            unsafe {
                let t = _mm512_add_ps(n.0, _mm512_set1_ps(12582912.0));
                let b = _mm512_add_epi32(_mm512_castps_si512(t), _mm512_set1_epi32(127));
                F32x16(_mm512_castsi512_ps(_mm512_slli_epi32::<23>(b)))
            }
        }
        #[inline(always)]
        fn select_positive(m: Self, a: Self, b: Self) -> Self {
            // SAFETY: the mask compare and the masked blend on f32 lanes are AVX-512F, present
            // by the module invariant; registers and a mask register only.
            unsafe {
                let k = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(m.0, _mm512_setzero_ps());
                F32x16(_mm512_mask_blend_ps(k, b.0, a.0))
            }
        }
        #[inline(always)]
        fn reduce_add(self) -> f32 {
            // SAFETY: `_mm512_reduce_add_ps` expands to AVX-512F (and older) instructions,
            // present by the module invariant.
            unsafe { _mm512_reduce_add_ps(self.0) }
        }
    }

    impl Simd for F64x4 {
        type Scalar = f64;
        const LANES: usize = 4;
        #[inline(always)]
        fn splat(x: f64) -> Self {
            // SAFETY: the broadcast `_mm256_set1_pd` is AVX, implied by AVX2 (module invariant).
            unsafe { F64x4(_mm256_set1_pd(x)) }
        }
        #[inline(always)]
        fn load(s: &[f64]) -> Self {
            let s = &s[..4];
            // SAFETY: `s` holds exactly 4 f64 (the slicing above panics otherwise), so the
            // unaligned 4-lane load reads inside it; AVX by the module invariant.
            unsafe { F64x4(_mm256_loadu_pd(s.as_ptr())) }
        }
        #[inline(always)]
        fn mul_add(self, a: Self, b: Self) -> Self {
            // SAFETY: `_mm256_fmadd_pd` is FMA, which the token checked (module invariant).
            unsafe { F64x4(_mm256_fmadd_pd(self.0, a.0, b.0)) }
        }
        #[inline(always)]
        fn div(self, o: Self) -> Self {
            // SAFETY: `_mm256_div_pd` is AVX, present by the module invariant.
            unsafe { F64x4(_mm256_div_pd(self.0, o.0)) }
        }
        #[inline(always)]
        fn sqrt(self) -> Self {
            // SAFETY: `_mm256_sqrt_pd` is AVX, present by the module invariant.
            unsafe { F64x4(_mm256_sqrt_pd(self.0)) }
        }
        #[inline(always)]
        fn max(self, o: Self) -> Self {
            // SAFETY: `_mm256_max_pd` is AVX, present by the module invariant.
            unsafe { F64x4(_mm256_max_pd(self.0, o.0)) }
        }
        #[inline(always)]
        fn min(self, o: Self) -> Self {
            // SAFETY: `_mm256_min_pd` is AVX, present by the module invariant.
            unsafe { F64x4(_mm256_min_pd(self.0, o.0)) }
        }
        #[inline(always)]
        fn round(self) -> Self {
            // SAFETY: `_mm256_round_pd` (a valid immediate `ROUND`) is AVX, present by the
            // module invariant.
            unsafe { F64x4(_mm256_round_pd::<ROUND>(self.0)) }
        }
        #[inline(always)]
        fn pow2i(n: Self) -> Self {
            // SAFETY: the 256-bit integer add and shift are AVX2, the f64 add and bit casts
            // AVX, all present by the module invariant; register bits only.
            unsafe {
                let t = _mm256_add_pd(n.0, _mm256_set1_pd(6755399441055744.0));
                let b = _mm256_add_epi64(_mm256_castpd_si256(t), _mm256_set1_epi64x(1023));
                F64x4(_mm256_castsi256_pd(_mm256_slli_epi64::<52>(b)))
            }
        }
        #[inline(always)]
        fn select_positive(m: Self, a: Self, b: Self) -> Self {
            // SAFETY: the compare and the variable blend on f64 lanes are AVX instructions,
            // present by the module invariant; registers only.
            unsafe {
                let k = _mm256_cmp_pd::<_CMP_GT_OQ>(m.0, _mm256_setzero_pd());
                F64x4(_mm256_blendv_pd(b.0, a.0, k))
            }
        }
        #[inline(always)]
        fn reduce_add(self) -> f64 {
            // SAFETY: the 128-bit extract, casts and SSE2 adds are AVX (or older), present by
            // the module invariant; registers only.
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
            // SAFETY: the broadcast `_mm256_set1_ps` is AVX, implied by AVX2 (module invariant).
            unsafe { F32x8(_mm256_set1_ps(x)) }
        }
        #[inline(always)]
        fn load(s: &[f32]) -> Self {
            let s = &s[..8];
            // SAFETY: `s` holds exactly 8 f32 (the slicing above panics otherwise), so the
            // unaligned 8-lane load stays inside it; AVX by the module invariant.
            unsafe { F32x8(_mm256_loadu_ps(s.as_ptr())) }
        }
        #[inline(always)]
        fn mul_add(self, a: Self, b: Self) -> Self {
            // SAFETY: `_mm256_fmadd_ps` is FMA, which the token checked (module invariant).
            unsafe { F32x8(_mm256_fmadd_ps(self.0, a.0, b.0)) }
        }
        #[inline(always)]
        fn div(self, o: Self) -> Self {
            // SAFETY: `_mm256_div_ps` is AVX, present by the module invariant.
            unsafe { F32x8(_mm256_div_ps(self.0, o.0)) }
        }
        #[inline(always)]
        fn sqrt(self) -> Self {
            // SAFETY: `_mm256_sqrt_ps` is AVX, present by the module invariant.
            unsafe { F32x8(_mm256_sqrt_ps(self.0)) }
        }
        #[inline(always)]
        fn max(self, o: Self) -> Self {
            // SAFETY: `_mm256_max_ps` is AVX, present by the module invariant.
            unsafe { F32x8(_mm256_max_ps(self.0, o.0)) }
        }
        #[inline(always)]
        fn min(self, o: Self) -> Self {
            // SAFETY: `_mm256_min_ps` is AVX, present by the module invariant.
            unsafe { F32x8(_mm256_min_ps(self.0, o.0)) }
        }
        #[inline(always)]
        fn round(self) -> Self {
            // SAFETY: `_mm256_round_ps` (a valid immediate `ROUND`) is AVX, present by the
            // module invariant.
            unsafe { F32x8(_mm256_round_ps::<ROUND>(self.0)) }
        }
        #[inline(always)]
        fn pow2i(n: Self) -> Self {
            // SAFETY: the 256-bit 32-bit-integer add and shift are AVX2, the f32 add and bit
            // casts AVX, all present by the module invariant; register bits only.
            unsafe {
                let t = _mm256_add_ps(n.0, _mm256_set1_ps(12582912.0));
                let b = _mm256_add_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(127));
                F32x8(_mm256_castsi256_ps(_mm256_slli_epi32::<23>(b)))
            }
        }
        #[inline(always)]
        fn select_positive(m: Self, a: Self, b: Self) -> Self {
            // SAFETY: the compare and the variable blend on f32 lanes are AVX instructions,
            // present by the module invariant; registers only.
            unsafe {
                let k = _mm256_cmp_ps::<_CMP_GT_OQ>(m.0, _mm256_setzero_ps());
                F32x8(_mm256_blendv_ps(b.0, a.0, k))
            }
        }
        #[inline(always)]
        fn reduce_add(self) -> f32 {
            // SAFETY: the 128-bit extract, casts, shuffles and SSE adds are AVX (or older),
            // present by the module invariant; registers only.
            unsafe {
                let lo = _mm256_castps256_ps128(self.0);
                let hi = _mm256_extractf128_ps::<1>(self.0);
                let s = _mm_add_ps(lo, hi);
                let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
                _mm_cvtss_f32(_mm_add_ps(s, _mm_shuffle_ps::<0x55>(s, s)))
            }
        }
    }

    /// The FMA loop in AVX-512F vectors of `V` (`F64x8` or `F32x16`).
    ///
    /// # Safety
    ///
    /// The CPU must have AVX-512F and FMA (an `IsaToken` for `Isa::Avx512`).
    #[target_feature(enable = "avx512f,fma")]
    pub(crate) unsafe fn fma_avx512<V: Simd>(iters: u64) -> V::Scalar {
        fma_loop::<V>(iters)
    }

    /// The FMA loop in AVX2 vectors of `V` (`F64x4` or `F32x8`).
    ///
    /// # Safety
    ///
    /// The CPU must have AVX2 and FMA (an `IsaToken` for `Isa::Avx2`).
    #[target_feature(enable = "avx2,fma")]
    pub(crate) unsafe fn fma_avx2<V: Simd>(iters: u64) -> V::Scalar {
        fma_loop::<V>(iters)
    }
}
