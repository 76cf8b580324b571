//! The CUDA backend's kernels and data flow on the host emulator, against the CPU backend:
//! every kernel, f64 and f32, every P2P / P2G / G2P variant, uniform and clustered particles,
//! separate targets, repeated evaluations (the spreading operator's reuse). These run on every
//! machine; the same comparisons on a device are in tests/cuda_device.rs.

use parki_core::{Domain, Kernel, Real};
use parki_dist::{
    Comm, DeviceErfc, DeviceP2g, DeviceP2p, DeviceVariants, DistEwaldSolver, EwaldBackend, EwaldOptions, G2pVariant,
    NearPairs, P2gVariant, ParallelOptions, SolverReal, SortMode, Targets,
};
use parki_gpu::params::{CellParams, WindowParams};
use parki_gpu::{Args, Device, Emulator, GpuBackend};
use parki_nearfield::PairAccuracy;
use parki_reference::generate::{self, Distribution, Particles, Rng};

fn rel_rms<T: Real>(a: &[T], b: &[T]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x.to_f64() - y.to_f64()).powi(2)).sum();
    let den: f64 = b.iter().map(|y| y.to_f64().powi(2)).sum();
    (num / den).sqrt()
}

fn domain() -> Domain {
    Domain::triply_periodic([1.0, 1.2, 0.9]).unwrap()
}

fn solve<T: SolverReal, B: EwaldBackend<T>>(
    opts: &EwaldOptions,
    data: &Particles<T>,
    targets: Option<&[[T; 3]]>,
    repeat: usize,
) -> Vec<T> {
    let n_t = targets.map_or(data.pos.len(), |t| t.len());
    let comm = Comm::single();
    let mut s =
        DistEwaldSolver::<T, B>::with_backend(&comm, opts, ParallelOptions::default(), data.pos.len(), n_t).unwrap();
    let mut u = vec![T::ZERO; n_t * (opts.kernel.output_dim() + if opts.field { 3 } else { 0 })];
    for _ in 0..repeat {
        let t = targets.map_or(Targets::Sources, Targets::Points);
        s.evaluate(&data.sources(), t, &mut u, SortMode::default()).unwrap();
    }
    u
}

/// The options of the comparisons: P2P's pairs those of the cut-off sphere on both backends
/// (the default), its pair functions the full ones on both (medium_pairs_match_the_cpu
/// compares the medium ones).
fn opts(kernel: Kernel, tol: f64) -> EwaldOptions {
    EwaldOptions::new(kernel, domain(), tol).threads(1).pair_accuracy(PairAccuracy::Full)
}

/// Minimum-image squared distance in the periodic box.
fn image_d2(a: &[f64; 3], b: &[f64; 3], l: [f64; 3]) -> f64 {
    (0..3)
        .map(|d| {
            let x = a[d] - b[d];
            let x = x - l[d] * (x / l[d]).round();
            x * x
        })
        .sum()
}

#[test]
fn parameter_blocks_match_the_kernels() {
    let dev = Emulator::open(0).unwrap();
    let cell = CellParams { n: [3, 4, 5], global_n: [6, 7, 8], wrap: [1, 0, 1], ..Default::default() };
    let win = WindowParams { m: [8, 10, 12], p: 6, degree: 9, ..Default::default() };
    let out = dev.alloc(64, "probe").unwrap();
    let mut a = Args::new();
    a.push(cell).push(win).push(out);
    let p = a.pointers();
    // SAFETY: abi_probe(CellParams, WindowParams, u64*), out holds 8 u64.
    unsafe { dev.launch("abi_probe", [1, 1, 1], [1, 1, 1], 0, &p[..a.len()]).unwrap() };
    let mut r = [0u64; 8];
    // SAFETY: 64 bytes at out.
    unsafe { dev.download(parki_gpu::bytes_of_mut(&mut r), out).unwrap() };
    let cell_n = std::mem::offset_of!(CellParams, n) as u64;
    let cell_wrap2 = std::mem::offset_of!(CellParams, wrap) as u64 + 8;
    let win_p = std::mem::offset_of!(WindowParams, p) as u64;
    let win_rs = std::mem::offset_of!(WindowParams, row_stride) as u64;
    assert_eq!(
        r,
        [
            std::mem::size_of::<CellParams>() as u64,
            std::mem::size_of::<WindowParams>() as u64,
            cell_n,
            cell_wrap2,
            win_p,
            win_rs,
            3 + 1000 * 8,
            6 + 1000 * 9 + 1_000_000 * 12
        ]
    );
}

#[test]
fn every_entry_point_is_emulated() {
    for name in parki_gpu::kernels::ENTRY_POINTS {
        assert!(parki_gpu::has_entry_point(name), "{name} missing from the emulator");
    }
}

/// GPU backend (default variants) against the CPU backend, every kernel, f64 and f32.
#[test]
fn backend_matches_cpu_every_kernel() {
    for (dist, seed) in [(Distribution::Uniform, 1), (Distribution::Normal, 2)] {
        let data = Particles::<f64>::new(&domain(), dist, 400, seed);
        for kernel in Kernel::ALL {
            let o = opts(kernel, 1e-8);
            let cpu = solve::<f64, parki_dist::CpuBackend<f64>>(&o, &data, None, 1);
            let gpu = solve::<f64, GpuBackend<f64, Emulator>>(&o, &data, None, 1);
            let d = rel_rms(&gpu, &cpu);
            println!("f64 {} {dist:?}: emulated GPU vs CPU {d:.1e}", kernel.name());
            assert!(d < 1e-12, "f64 {} {dist:?}: {d:e}", kernel.name());
        }
        let data = Particles::<f32>::new(&domain(), dist, 400, seed);
        for kernel in Kernel::ALL {
            let o = opts(kernel, 1e-4);
            let cpu = solve::<f32, parki_dist::CpuBackend<f32>>(&o, &data, None, 1);
            let gpu = solve::<f32, GpuBackend<f32, Emulator>>(&o, &data, None, 1);
            let d = rel_rms(&gpu, &cpu);
            println!("f32 {} {dist:?}: emulated GPU vs CPU {d:.1e}", kernel.name());
            assert!(d < 2e-6, "f32 {} {dist:?}: {d:e}", kernel.name());
        }
    }
}

/// Every device variant against the defaults, separate targets, and a repeated evaluation (the
/// spreading operator built once and reused).
#[test]
fn variants_agree() {
    let data = Particles::<f64>::new(&domain(), Distribution::Normal, 300, 3);
    let mut rng = Rng::new(9);
    let targets: Vec<[f64; 3]> = generate::positions(&domain(), Distribution::Uniform, 77, &mut rng);
    for kernel in [Kernel::Laplace, Kernel::Stokes] {
        let base_opts = opts(kernel, 1e-9);
        let cpu = solve::<f64, parki_dist::CpuBackend<f64>>(&base_opts, &data, Some(&targets), 1);
        // the hybrid with far-field cells of P (0), 7 and 16 grid points
        for (p2p, p2g, dp2g, g2p, cell) in [
            (DeviceP2p::GlobalMemory, P2gVariant::Blocked, DeviceP2g::FromP2g, G2pVariant::TargetSorted, 0),
            (DeviceP2p::GlobalMemory, P2gVariant::Blocked, DeviceP2g::FromP2g, G2pVariant::TargetSorted, 7),
            (DeviceP2p::SharedMemory, P2gVariant::Blocked, DeviceP2g::FromP2g, G2pVariant::Base, 16),
            (DeviceP2p::SharedMemory, P2gVariant::Scatter, DeviceP2g::FromP2g, G2pVariant::Base, 0),
            (DeviceP2p::GlobalMemory, P2gVariant::Blocked, DeviceP2g::Operator, G2pVariant::Base, 0),
        ] {
            let o = base_opts.clone().p2g(p2g).g2p(g2p).device(DeviceVariants::new(p2p, dp2g).far_cell(cell));
            let gpu = solve::<f64, GpuBackend<f64, Emulator>>(&o, &data, Some(&targets), 2);
            let d = rel_rms(&gpu, &cpu);
            println!("{} {p2p:?} {p2g:?} {dp2g:?} {g2p:?} far cell {cell}: {d:.1e}", kernel.name());
            assert!(d < 1e-13, "{} {p2p:?} {p2g:?} {dp2g:?} {g2p:?} {cell}: {d:e}", kernel.name());
        }
        // CUDA's erfc instead of the fitted one, both P2P variants
        for p2p in [DeviceP2p::GlobalMemory, DeviceP2p::SharedMemory] {
            let o = base_opts.clone().device(DeviceVariants::new(p2p, DeviceP2g::FromP2g).erfc(DeviceErfc::Library));
            let gpu = solve::<f64, GpuBackend<f64, Emulator>>(&o, &data, Some(&targets), 1);
            let d = rel_rms(&gpu, &cpu);
            println!("{} {p2p:?} library erfc: {d:.1e}", kernel.name());
            assert!(d < 1e-13, "{} {p2p:?} library erfc: {d:e}", kernel.name());
        }
    }
}

/// P2P on the side stream (`DeviceOverlap::P2p`) gives the in-order values exactly, with the
/// same pairs and its own seconds. The emulator runs the side stream's launches at the join (in
/// `sum_into`, after P2G, the transforms and G2P), as late as a device may: a buffer the far
/// field rewrote before the join, or a result read before it, would show here. Both P2P
/// variants, separate targets, and a second evaluation with moved sources and targets (its
/// `bin` rebuilds the cell lists the first P2P read).
#[test]
fn overlapped_p2p_matches_in_order() {
    use parki_dist::DeviceOverlap;
    let comm = Comm::single();
    for (kernel, field, p2p) in [
        (Kernel::Stokes, false, DeviceP2p::GlobalMemory),
        (Kernel::Laplace, true, DeviceP2p::SharedMemory),
        (Kernel::Stresslet, false, DeviceP2p::SharedMemory),
    ] {
        let base = opts(kernel, 1e-9).field(field).device(DeviceVariants::new(p2p, DeviceP2g::FromP2g));
        let overlapped = base.clone().device(base.device.overlap(DeviceOverlap::P2p));
        let mut rng = Rng::new(17);
        let sets: Vec<(Particles<f64>, Vec<[f64; 3]>)> = (0..2)
            .map(|k| {
                let data = Particles::<f64>::new(&domain(), Distribution::Normal, 400, 30 + k);
                let targets = generate::positions(&domain(), Distribution::Uniform, 90 + 7 * k as usize, &mut rng);
                (data, targets)
            })
            .collect();
        let dim = kernel.output_dim() + if field { 3 } else { 0 };
        let run = |o: &parki_dist::EwaldOptions| {
            let mut s = DistEwaldSolver::<f64, GpuBackend<f64, Emulator>>::with_backend(
                &comm,
                o,
                ParallelOptions::default(),
                400,
                97,
            )
            .unwrap();
            let variants = s.backend().variants();
            let mut out = Vec::new();
            for (data, targets) in &sets {
                let mut u = vec![0.0; targets.len() * dim];
                let e = s.evaluate(&data.sources(), Targets::Points(targets), &mut u, SortMode::default()).unwrap();
                out.push((u, e.pairs, e.overlapped_p2p));
            }
            (out, variants)
        };
        let ((order, v0), (over, v1)) = (run(&base), run(&overlapped));
        assert!(v1.contains("overlapping the far field") && !v0.contains("overlapping"), "{v0} / {v1}");
        for (k, ((u0, p0, t0), (u1, p1, t1))) in order.iter().zip(&over).enumerate() {
            let d = rel_rms(u1, u0);
            println!(
                "{} {p2p:?} field {field}, evaluation {k}: overlapped vs in order {d:.1e}, pairs {p1}",
                kernel.name()
            );
            assert!(d == 0.0, "{} evaluation {k}: {d:e}", kernel.name());
            assert!(*p0 > 0 && p0 == p1, "pairs {p0} / {p1}");
            assert!(t0.is_none() && t1.is_some_and(|t| t >= 0.0), "{t0:?} / {t1:?}");
        }
    }
}

/// The pair count of P2P with every pair of the colleague cells, summed by the kernels, against
/// the same count on the host from the particles' cells; the CPU backend's count (padded to its
/// SIMD lanes) is at least as large.
#[test]
fn pair_count_matches_the_host() {
    let data = Particles::<f64>::new(&domain(), Distribution::Normal, 500, 4);
    let mut rng = Rng::new(5);
    let targets: Vec<[f64; 3]> = generate::positions(&domain(), Distribution::Uniform, 123, &mut rng);
    let o = opts(Kernel::Stokeslet, 1e-6).near_pairs(NearPairs::Cells);
    let comm = Comm::single();
    let (n, m) = (data.pos.len(), targets.len());
    let mut gpu =
        DistEwaldSolver::<f64, GpuBackend<f64, Emulator>>::with_backend(&comm, &o, ParallelOptions::default(), n, m)
            .unwrap();
    let mut u = vec![0.0; 3 * m];
    let e = gpu.evaluate(&data.sources(), Targets::Points(&targets), &mut u, SortMode::default()).unwrap();
    let cells = gpu.cells();
    let count = |p: &[[f64; 3]]| {
        let mut c = vec![0u64; cells.cells()];
        for x in p {
            c[cells.cell_of(x) as usize] += 1;
        }
        c
    };
    let (cs, ct) = (count(&data.pos), count(&targets));
    let host = cells.pairs(|c| ct[c], |c| cs[c]);
    println!("pairs: device {}, host {host}", e.pairs);
    assert!(host > 0 && e.pairs == host, "device {} host {host}", e.pairs);
    let mut cpu = DistEwaldSolver::<f64>::new(&comm, &o, ParallelOptions::default(), n, m).unwrap();
    let c = cpu.evaluate(&data.sources(), Targets::Points(&targets), &mut u, SortMode::default()).unwrap();
    assert!(c.pairs >= host, "cpu {} host {host}", c.pairs);
}

/// P2P's cut-off sphere on the device (`cell_sort_x`, the windows of `p2p_gm1d` and
/// `p2p_shared`): per variant, the pairs it counts lie between those within the radius (counted
/// here over every pair, minimum image) and those of the colleague cells; every pair of the
/// cells (`NearPairs::Cells`) on both backends agrees as closely as the sphere does; the sphere
/// and the cells differ by the dropped pairs only, far below the tolerance.
#[test]
fn cut_off_sphere_pairs_and_values() {
    let data = Particles::<f64>::new(&domain(), Distribution::Normal, 500, 6);
    let mut rng = Rng::new(7);
    let targets: Vec<[f64; 3]> = generate::positions(&domain(), Distribution::Uniform, 150, &mut rng);
    let comm = Comm::single();
    let (n, m) = (data.pos.len(), targets.len());
    for kernel in [Kernel::Stokeslet, Kernel::Stokes] {
        let tol = 1e-9;
        let sphere = opts(kernel, tol);
        let cells = opts(kernel, tol).near_pairs(NearPairs::Cells);
        let run = |o: &EwaldOptions| {
            let mut s = DistEwaldSolver::<f64, GpuBackend<f64, Emulator>>::with_backend(
                &comm,
                o,
                ParallelOptions::default(),
                n,
                m,
            )
            .unwrap();
            let mut u = vec![0.0; 3 * m];
            let e = s.evaluate(&data.sources(), Targets::Points(&targets), &mut u, SortMode::default()).unwrap();
            (u, e.pairs, s.params().clone())
        };
        let (u_cells, pairs_cells, p_cells) = run(&cells);
        assert!(p_cells.near_cut.is_none(), "cells: no cut-off");
        for p2p in [DeviceP2p::GlobalMemory, DeviceP2p::SharedMemory] {
            let o = sphere.clone().device(DeviceVariants::new(p2p, DeviceP2g::FromP2g));
            let (u, pairs, p) = run(&o);
            let cut = p.near_cut.expect("the device's selection sets a cut-off sphere");
            assert_eq!(p.grid, p_cells.grid, "the same grid with and without the sphere");
            let within = targets
                .iter()
                .map(|t| data.pos.iter().filter(|s| image_d2(t, s, domain().lengths()) <= cut * cut).count() as u64)
                .sum::<u64>();
            println!("{} {p2p:?}: pairs within {cut:.4}: {within}, sphere {pairs}, cells {pairs_cells}", kernel.name());
            assert!(within > 0 && within <= pairs && pairs < pairs_cells, "{within} {pairs} {pairs_cells}");
            let d = rel_rms(&u, &u_cells);
            println!("{} {p2p:?}: sphere against cells {d:.1e} (tol {tol:e})", kernel.name());
            assert!(d > 0.0 && d < tol / 10.0, "{} {p2p:?}: {d:e}", kernel.name());
        }
        let cpu = solve::<f64, parki_dist::CpuBackend<f64>>(&cells, &data, Some(&targets), 1);
        let d = rel_rms(&u_cells, &cpu);
        println!("{} cells: emulated GPU vs CPU {d:.1e}", kernel.name());
        assert!(d < 1e-13, "{} cells: {d:e}", kernel.name());
    }
}

/// kernels/erfc.cu holds the CPU's erfc coefficients (tools/gen_erfc_coeffs.py writes both),
/// full and medium, and kernels/p2p.cu the CPU's medium exp: the same numbers once parsed.
#[test]
fn erfc_coefficients_match_the_cpu() {
    use parki_nearfield::KernelReal;
    let file = |name: &str| parki_gpu::kernels::SOURCES.iter().find(|(f, _)| *f == name).expect("a kernels/ file").1;
    // the `(ty)value,` lines after `start`, up to the first `}` line
    let parse = |text: &str, start: &str, ty: &str| -> Vec<f64> {
        let body = text.split(start).nth(1).unwrap_or_else(|| panic!("{start} in kernels/"));
        body.lines()
            .skip(1)
            .map(str::trim)
            .take_while(|l| !l.starts_with('}'))
            .filter_map(|l| l.strip_prefix(&format!("({ty})")))
            .map(|v| v.trim_end_matches(',').parse().unwrap())
            .collect()
    };
    let (erfc, p2p) = (file("erfc.cu"), file("p2p.cu"));
    for (text, start, ty, want) in [
        (erfc, "__constant__ double parki_erfc_f64[", "double", <f64 as KernelReal>::ERFC_COEFFS),
        (erfc, "__constant__ double parki_erfc_f64_medium[", "double", <f64 as KernelReal>::ERFC_COEFFS_MEDIUM),
        (erfc, "struct ErfcPoly<float, E>", "float", <f32 as KernelReal>::ERFC_COEFFS),
        (p2p, "__constant__ double parki_exp_f64_medium[", "double", <f64 as KernelReal>::EXP_COEFFS_MEDIUM),
    ] {
        let got = parse(text, start, ty);
        assert_eq!(got.len(), want.len(), "{start}");
        for (g, w) in got.iter().zip(want) {
            assert_eq!(g.to_bits(), w.to_bits(), "{start}: {g} vs {w}");
        }
    }
}

/// The device's medium pair functions (f64, `PairAccuracy::Medium`: the default from
/// tolerance 1e-10 to 1e-5, and where the CPU would take its loose ones) are the CPU's medium
/// ones: every kernel and the Laplace field, uniform and clustered, against the CPU at medium
/// accuracy; and they are not the full ones (further from the CPU's full values).
#[test]
fn medium_pairs_match_the_cpu() {
    for (dist, seed) in [(Distribution::Uniform, 3), (Distribution::Normal, 4)] {
        let data = Particles::<f64>::new(&domain(), dist, 400, seed);
        for (kernel, field) in Kernel::ALL.map(|k| (k, false)).into_iter().chain([(Kernel::Laplace, true)]) {
            for tol in [1e-8, 1e-4] {
                let o = EwaldOptions::new(kernel, domain(), tol).threads(1).field(field);
                let gpu = solve::<f64, GpuBackend<f64, Emulator>>(&o, &data, None, 1);
                let medium = solve::<f64, parki_dist::CpuBackend<f64>>(
                    &o.clone().pair_accuracy(PairAccuracy::Medium),
                    &data,
                    None,
                    1,
                );
                let full = solve::<f64, parki_dist::CpuBackend<f64>>(
                    &o.clone().pair_accuracy(PairAccuracy::Full),
                    &data,
                    None,
                    1,
                );
                let (dm, df) = (rel_rms(&gpu, &medium), rel_rms(&gpu, &full));
                let name = if field { "laplace+field" } else { kernel.name() };
                println!("{name} {dist:?} tol {tol:.0e}: emulated GPU vs CPU medium {dm:.1e}, vs CPU full {df:.1e}");
                assert!(dm < 1e-14, "{name} {dist:?} {tol:e}: {dm:e}");
                assert!(df > 50.0 * dm, "{name} {dist:?} {tol:e}: medium {dm:e}, full {df:e}");
            }
        }
    }
}

/// f32 on the f64 positions the positions were rounded from (`evaluate_exact`: the cell lists'
/// coordinates and the windows' placement from both): the emulated device equals the CPU in
/// every P2G, G2P and P2P variant, the field's window-derivative G2P and separate targets, as
/// closely as without them, while both differ from the narrowed positions' values far more
/// (pairs 1e-3 apart, where rounding at the box's scale shows).
#[test]
fn exact_positions_match_the_cpu() {
    use parki_dist::ExactPositions;
    let wide = Particles::<f64>::new(&domain(), Distribution::Uniform, 1200, 21);
    let mut pos = wide.pos.clone();
    for k in 0..150 {
        let mut q = pos[2 * k];
        q[2] = if q[2] > 0.45 { q[2] - 1e-3 } else { q[2] + 1e-3 };
        pos[2 * k + 1] = q;
    }
    // targets 3e-4 from sources of the pairs
    let targets: Vec<[f64; 3]> = (0..90)
        .map(|k| {
            let mut t = pos[2 * k + 1];
            t[0] = if t[0] > 0.5 { t[0] - 3e-4 } else { t[0] + 3e-4 };
            t
        })
        .collect();
    let narrow = |p: &[[f64; 3]]| parki_core::validate::narrow_positions::<f32>(p, &domain());
    let (p32, t32) = (narrow(&pos), narrow(&targets));
    let c3 = |v: &[[f64; 3]]| v.iter().map(|x| x.map(|y| y as f32)).collect::<Vec<_>>();
    let (f, d, n) = (c3(&wide.f), c3(&wide.d), c3(&wide.n));
    let q: Vec<f32> = wide.q.iter().map(|&x| x as f32).collect();
    let sources = parki_core::Sources {
        positions: &p32,
        charges: Some(&q),
        forces: Some(&f),
        dipoles: Some(&d),
        normals: Some(&n),
    };
    let comm = Comm::single();
    let run = |o: &EwaldOptions, gpu: bool, exact: bool| -> Vec<f32> {
        let mut u = vec![0.0f32; targets.len() * o.output_dim()];
        let t = Targets::Points(&t32);
        let e = ExactPositions { sources: &pos, targets: Some(&targets) };
        let (nt, ns) = (targets.len(), pos.len());
        if gpu {
            let mut s = DistEwaldSolver::<f32, GpuBackend<f32, Emulator>>::with_backend(
                &comm,
                o,
                ParallelOptions::default(),
                ns,
                nt,
            )
            .unwrap();
            match exact {
                true => s.evaluate_exact(&sources, t, e, &mut u, SortMode::default()),
                false => s.evaluate(&sources, t, &mut u, SortMode::default()),
            }
            .unwrap();
        } else {
            let mut s = DistEwaldSolver::<f32>::new(&comm, o, ParallelOptions::default(), ns, nt).unwrap();
            match exact {
                true => s.evaluate_exact(&sources, t, e, &mut u, SortMode::default()),
                false => s.evaluate(&sources, t, &mut u, SortMode::default()),
            }
            .unwrap();
        }
        u
    };
    for (kernel, field) in [(Kernel::Laplace, true), (Kernel::Stokes, false)] {
        let base = opts(kernel, 1e-5).field(field);
        let cpu = run(&base, false, true);
        let narrowed = rel_rms(&run(&base, false, false), &cpu);
        for (p2p, p2g, dp2g, g2p) in [
            (DeviceP2p::GlobalMemory, P2gVariant::Blocked, DeviceP2g::FromP2g, G2pVariant::TargetSorted),
            (DeviceP2p::SharedMemory, P2gVariant::Scatter, DeviceP2g::FromP2g, G2pVariant::Base),
            (DeviceP2p::GlobalMemory, P2gVariant::Blocked, DeviceP2g::Operator, G2pVariant::Base),
        ] {
            let o = base.clone().p2g(p2g).g2p(g2p).device(DeviceVariants::new(p2p, dp2g));
            let d = rel_rms(&run(&o, true, true), &cpu);
            println!(
                "{} field {field} {p2p:?} {p2g:?} {dp2g:?} {g2p:?}: exact positions, emulated GPU vs CPU {d:.1e} \
                 (narrowed vs exact {narrowed:.1e})",
                kernel.name()
            );
            assert!(d < 2e-6 && narrowed > 100.0 * d, "{} {p2p:?} {p2g:?} {dp2g:?} {g2p:?}: {d:e}", kernel.name());
        }
    }
}
