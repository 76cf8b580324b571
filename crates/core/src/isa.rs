//! Instruction sets and run-time dispatch.
//!
//! Hot kernels are written once as `#[inline(always)]` generic functions and compiled several
//! times inside `#[target_feature]` wrappers ([`isa_dispatch!`](crate::isa_dispatch)); [`Isa::detect`] picks the best
//! one for the CPU at run time, so one binary runs everywhere and uses AVX-512 where it exists.

use crate::real::Real;

/// The instruction set the kernels were dispatched to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// AVX-512F (8 f64 or 16 f32 lanes).
    Avx512,
    /// AVX2 with FMA (4 f64 or 8 f32 lanes).
    Avx2,
    /// Portable scalar code.
    Scalar,
}

impl Isa {
    /// The widest instruction set this CPU supports.
    pub fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            if Isa::Avx512.available() {
                return Isa::Avx512;
            }
            if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                return Isa::Avx2;
            }
        }
        Isa::Scalar
    }

    /// Whether this CPU can run code for this instruction set.
    pub fn available(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            match self {
                Isa::Avx512 => {
                    std::is_x86_feature_detected!("avx512f")
                        && std::is_x86_feature_detected!("avx512vl")
                        && std::is_x86_feature_detected!("avx2")
                        && std::is_x86_feature_detected!("fma")
                }
                Isa::Avx2 => std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma"),
                Isa::Scalar => true,
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self == Isa::Scalar
        }
    }

    /// Parses `"avx512"`, `"avx2"` or `"scalar"`.
    pub fn from_name(name: &str) -> Option<Isa> {
        match name {
            "avx512" => Some(Isa::Avx512),
            "avx2" | "avx2+fma" => Some(Isa::Avx2),
            "scalar" => Some(Isa::Scalar),
            _ => None,
        }
    }

    /// Name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Avx512 => "avx512",
            Isa::Avx2 => "avx2+fma",
            Isa::Scalar => "scalar",
        }
    }

    /// Lanes of the vector type for `T` on this instruction set.
    pub fn lanes<T: Real>(self) -> usize {
        let bytes = match self {
            Isa::Avx512 => 64,
            Isa::Avx2 => 32,
            Isa::Scalar => return 1,
        };
        bytes / T::BYTES
    }
}

/// Defines `fn $name<T: Bound>(isa: Isa, args...)` that runs `$body` compiled for `isa`
/// (AVX-512F, AVX2+FMA, or portable code). An `isa` the CPU lacks falls back to portable code.
#[macro_export]
macro_rules! isa_dispatch {
    ($(#[$m:meta])* $vis:vis fn $name:ident<$($T:ident: $bound:path),+>($($arg:ident: $ty:ty),* $(,)?) $body:block) => {
        $(#[$m])*
        #[allow(clippy::too_many_arguments)]
        $vis fn $name<$($T: $bound),+>(isa: $crate::isa::Isa, $($arg: $ty),*) {
            #[inline(always)]
            #[allow(clippy::too_many_arguments)]
            fn inner<$($T: $bound),+>($($arg: $ty),*) $body
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
            #[allow(clippy::too_many_arguments)]
            unsafe fn v4<$($T: $bound),+>($($arg: $ty),*) {
                inner::<$($T),+>($($arg),*)
            }
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma")]
            #[allow(clippy::too_many_arguments)]
            unsafe fn v3<$($T: $bound),+>($($arg: $ty),*) {
                inner::<$($T),+>($($arg),*)
            }
            match isa {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `available()` checked the CPU supports the features of `v4`.
                $crate::isa::Isa::Avx512 if isa.available() => unsafe { v4::<$($T),+>($($arg),*) },
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `available()` checked the CPU supports the features of `v3`.
                $crate::isa::Isa::Avx2 if isa.available() => unsafe { v3::<$($T),+>($($arg),*) },
                _ => inner::<$($T),+>($($arg),*),
            }
        }
    };
}
