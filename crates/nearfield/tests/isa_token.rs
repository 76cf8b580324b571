//! Issue 8, defect 10: the SIMD code runs only behind a CPU check.
//!
//! The vector types are crate-private (the `compile_fail` doc tests of `parki_nearfield::simd`
//! check that they cannot be named from outside); the public routes into SIMD code, `p2p` and
//! `simd::fma_chains`, take an `Isa` or an `IsaToken`, and a token exists only for an
//! instruction set this CPU has.

use parki_core::{Domain, Kernel, Par, Sources};
use parki_nearfield::simd::fma_chains;
use parki_nearfield::{p2p, CellGrid, Isa, IsaToken, PaddedSources, SortedTargets};

#[cfg(target_arch = "x86_64")]
fn fma() -> bool {
    std::is_x86_feature_detected!("fma")
}

#[cfg(not(target_arch = "x86_64"))]
fn fma() -> bool {
    false
}

#[test]
fn a_token_exists_only_for_an_isa_this_cpu_has() {
    for isa in [Isa::Avx512, Isa::Avx2, Isa::Scalar] {
        let token = IsaToken::new(isa);
        println!("{}: available {}, token {:?}", isa.name(), isa.available(), token.map(|t| t.isa()));
        if !isa.available() {
            assert!(token.is_none(), "token for {} on a CPU without it", isa.name());
        }
        // the kernels enable FMA next to AVX-512F / AVX2: a token needs it too
        let expected = isa == Isa::Scalar || (isa.available() && fma());
        assert_eq!(token.is_some(), expected, "{}", isa.name());
        if let Some(t) = token {
            assert_eq!(t.isa(), isa);
        }
    }
    assert_eq!(IsaToken::scalar().isa(), Isa::Scalar);
    let best = IsaToken::detect();
    assert_eq!(IsaToken::new(best.isa()), Some(best));
    assert_eq!(best.isa(), Isa::detect(), "detect agrees with Isa::detect on a CPU with FMA");
}

/// `acc <- acc a + b` from 1, `iters` times, in f64: `x_n = a^n (1 - c) + c`, `c = b/(1-a)`.
fn chain(iters: u64) -> f64 {
    let (a, b) = (0.999_999_9f64, 1e-7f64);
    let c = b / (1.0 - a);
    a.powi(iters as i32) * (1.0 - c) + c
}

#[test]
fn fma_chains_run_in_the_vectors_of_the_token() {
    let iters = 10_000;
    for isa in [Isa::Avx512, Isa::Avx2, Isa::Scalar] {
        let Some(token) = IsaToken::new(isa) else { continue };
        let (s64, l64) = fma_chains::<f64>(token, iters);
        let (s32, l32) = fma_chains::<f32>(token, iters);
        assert_eq!(l64, isa.lanes::<f64>(), "{}", isa.name());
        assert_eq!(l32, isa.lanes::<f32>(), "{}", isa.name());
        let e = 16.0 * chain(iters);
        assert!((s64 / l64 as f64 - e).abs() <= 1e-9 * e, "{} f64: {s64} vs {}", isa.name(), e * l64 as f64);
        assert!(((s32 / l32 as f32) as f64 - e).abs() <= 1e-3 * e, "{} f32: {s32}", isa.name());
    }
}

#[test]
fn p2p_with_an_isa_the_cpu_lacks_runs_the_scalar_code() {
    let domain = Domain::triply_periodic([1.0, 1.0, 1.0]).unwrap();
    let grid = CellGrid::new(&domain, 0.3).unwrap();
    let pos: Vec<[f64; 3]> =
        (0..50).map(|i| [(i as f64 * 0.37) % 1.0, (i as f64 * 0.61) % 1.0, (i as f64 * 0.13) % 1.0]).collect();
    let q: Vec<f64> = (0..50).map(|i| if i % 2 == 0 { 1.0 } else { -1.0 }).collect();
    let src = Sources { positions: &pos, charges: Some(&q), forces: None, dipoles: None, normals: None };
    let sorted = SortedTargets::build(&grid, &pos, Par::Seq);
    let run = |isa: Isa, lanes: usize| {
        let padded = PaddedSources::build(&grid, Kernel::Laplace, &src, lanes, Par::Seq);
        let mut out = vec![0.0; pos.len()];
        p2p(Kernel::Laplace, 10.0, &grid, &padded, &sorted, &mut out, isa, Par::Seq);
        out
    };
    let scalar = run(Isa::Scalar, 1);
    assert!(scalar.iter().all(|v| v.is_finite()));
    for isa in [Isa::Avx512, Isa::Avx2] {
        if IsaToken::new(isa).is_some() {
            continue;
        }
        // padded for the missing ISA's lanes; the zero-strength dummies add exact zeros
        let fallback = run(isa, isa.lanes::<f64>());
        assert!(fallback.iter().zip(&scalar).all(|(a, b)| a.to_bits() == b.to_bits()), "{}", isa.name());
    }
}
