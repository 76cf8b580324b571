//! Acceptance 2: P2G and G2P variants agree to 1e-13; the result does not depend on the thread
//! count, the order of the particles, the P2P instruction set, or a lattice shift of every
//! particle (beyond 1e-13); separate targets at the source positions equal the self evaluation.

use crate::common::{box_unequal, rel_rms, Data, KERNELS};
use parki_core::validate::wrap_positions;
use parki_core::{Kernel, Sources};
use parki_dist::{EwaldOptions, EwaldSolver, G2pVariant, Isa, P2gVariant, Targets};
use parki_reference::generate::Distribution;

const N: usize = 1500;

fn solve(opts: &EwaldOptions, src: &Sources<f64>, targets: Targets<f64>, n_t: usize) -> Vec<f64> {
    let mut s = EwaldSolver::<f64>::new(opts, src.len(), n_t).unwrap();
    let mut u = vec![0.0; n_t * opts.kernel.output_dim()];
    s.evaluate(src, targets, &mut u).unwrap();
    u
}

fn opts(kernel: Kernel) -> EwaldOptions {
    let mut o = EwaldOptions::new(kernel, box_unequal(), 1e-10);
    o.threads = 2;
    o
}

#[test]
fn p2g_and_g2p_variants_agree() {
    let data = Data::new(&box_unequal(), Distribution::Normal, N, 21);
    for kernel in KERNELS {
        let base = solve(&opts(kernel), &data.sources(), Targets::Sources, N);
        for (p2g, g2p) in [
            (P2gVariant::Scatter, G2pVariant::TargetSorted),
            (P2gVariant::Blocked, G2pVariant::Base),
            (P2gVariant::Scatter, G2pVariant::Base),
        ] {
            let mut o = opts(kernel);
            o.p2g = p2g;
            o.g2p = g2p;
            let u = solve(&o, &data.sources(), Targets::Sources, N);
            let d = rel_rms(&u, &base);
            println!("variants {} {p2g:?}/{g2p:?} vs Blocked/TargetSorted: {d:.1e}", kernel.name());
            assert!(d < 1e-13, "{} {p2g:?} {g2p:?}: {d:e}", kernel.name());
        }
    }
}

#[test]
fn independent_of_thread_count() {
    let data = Data::new(&box_unequal(), Distribution::Uniform, N, 22);
    for kernel in [Kernel::Laplace, Kernel::Stokes] {
        let base = solve(&opts(kernel), &data.sources(), Targets::Sources, N);
        for threads in [1, 3, 4] {
            let mut o = opts(kernel);
            o.threads = threads;
            let u = solve(&o, &data.sources(), Targets::Sources, N);
            let d = rel_rms(&u, &base);
            println!("threads {} {threads} vs 2: {d:.1e}", kernel.name());
            assert!(d < 1e-13, "{} threads {threads}: {d:e}", kernel.name());
        }
    }
}

#[test]
fn independent_of_particle_order() {
    let data = Data::new(&box_unequal(), Distribution::Uniform, N, 23);
    // a fixed permutation: reverse, then interleave
    let perm: Vec<usize> = (0..N).map(|i| (i * 7919) % N).collect();
    assert_eq!(
        {
            let mut p = perm.clone();
            p.sort();
            p
        },
        (0..N).collect::<Vec<_>>()
    );
    let pick = |v: &Vec<[f64; 3]>| perm.iter().map(|&i| v[i]).collect::<Vec<_>>();
    let (pos, f, d, n) = (pick(&data.pos), pick(&data.f), pick(&data.d), pick(&data.n));
    let q: Vec<f64> = perm.iter().map(|&i| data.q[i]).collect();
    let permuted =
        Sources { positions: &pos, charges: Some(&q), forces: Some(&f), dipoles: Some(&d), normals: Some(&n) };
    for kernel in KERNELS {
        let dim = kernel.output_dim();
        let base = solve(&opts(kernel), &data.sources(), Targets::Sources, N);
        let u = solve(&opts(kernel), &permuted, Targets::Sources, N);
        let mut back = vec![0.0; N * dim];
        for (k, &i) in perm.iter().enumerate() {
            back[i * dim..(i + 1) * dim].copy_from_slice(&u[k * dim..(k + 1) * dim]);
        }
        let e = rel_rms(&back, &base);
        println!("order {} permuted vs input order: {e:.1e}", kernel.name());
        assert!(e < 1e-13, "{}: {e:e}", kernel.name());
    }
}

#[test]
fn invariant_under_lattice_shifts() {
    let domain = box_unequal();
    let l = domain.lengths();
    let data = Data::new(&domain, Distribution::Uniform, N, 24);
    for kernel in KERNELS {
        let base = solve(&opts(kernel), &data.sources(), Targets::Sources, N);
        for shift in [[1.0, 0.0, 0.0], [-2.0, 1.0, 3.0]] {
            let mut pos: Vec<[f64; 3]> = data
                .pos
                .iter()
                .map(|p| [p[0] + shift[0] * l[0], p[1] + shift[1] * l[1], p[2] + shift[2] * l[2]])
                .collect();
            wrap_positions("sources.positions", &mut pos, &domain).unwrap();
            let src = Sources { positions: &pos, ..data.sources() };
            let u = solve(&opts(kernel), &src, Targets::Sources, N);
            let e = rel_rms(&u, &base);
            println!("lattice {} shift {shift:?}: {e:.1e}", kernel.name());
            assert!(e < 1e-13, "{} shift {shift:?}: {e:e}", kernel.name());
        }
    }
}

#[test]
fn p2p_instruction_sets_agree() {
    let data = Data::new(&box_unequal(), Distribution::Normal, N, 25);
    for kernel in KERNELS {
        let mut o = opts(kernel);
        o.isa = Some(Isa::Scalar);
        let scalar = solve(&o, &data.sources(), Targets::Sources, N);
        for isa in [Isa::Avx2, Isa::Avx512] {
            if !isa.available() {
                eprintln!("skipping {} (not on this CPU)", isa.name());
                continue;
            }
            let mut o = opts(kernel);
            o.isa = Some(isa);
            let u = solve(&o, &data.sources(), Targets::Sources, N);
            let e = rel_rms(&u, &scalar);
            println!("isa {} {} vs scalar: {e:.1e}", kernel.name(), isa.name());
            assert!(e < 1e-13, "{} {}: {e:e}", kernel.name(), isa.name());
        }
        let data32 = data.cast();
        let mut o = opts(kernel);
        o.tolerance = 1e-5;
        o.isa = Some(Isa::Scalar);
        let solve32 = |o: &EwaldOptions| {
            let mut s = EwaldSolver::<f32>::new(o, N, N).unwrap();
            let mut u = vec![0.0f32; N * kernel.output_dim()];
            s.evaluate(&data32.sources(), Targets::Sources, &mut u).unwrap();
            u.iter().map(|&v| v as f64).collect::<Vec<_>>()
        };
        let scalar32 = solve32(&o);
        o.isa = None;
        let best32 = solve32(&o);
        let e = rel_rms(&best32, &scalar32);
        println!("isa {} f32 best vs scalar: {e:.1e}", kernel.name());
        // f32 rounding (about 20 ulp after the near/far cancellation), a third of the tolerance
        assert!(e < 3e-6, "{} f32: {e:e}", kernel.name());
    }
}

#[test]
fn separate_targets_at_the_sources_equal_the_self_evaluation() {
    let data = Data::new(&box_unequal(), Distribution::Uniform, N, 26);
    for kernel in KERNELS {
        let a = solve(&opts(kernel), &data.sources(), Targets::Sources, N);
        let b = solve(&opts(kernel), &data.sources(), Targets::Points(&data.pos), N);
        assert!(rel_rms(&b, &a) < 1e-15, "{}", kernel.name());
    }
}
