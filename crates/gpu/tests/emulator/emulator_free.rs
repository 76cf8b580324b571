//! The CUDA backend with free axes (0P, 1P, 2P: the zero-padded FFT grid, `pad_grid` and the
//! precomputed kernel tables in `cnv_free`) and with the Laplace field (P2P's field kernel, the
//! window-derivative G2P `g2p_field`, and the spectral `-i k` in CNV with a four-component G2P),
//! on the host emulator against the CPU backend with the same options. The CPU backend's
//! accuracy against independent references is tested in parki-dist's tests/ewald/free_space.rs
//! and tests/ewald/field.rs; here the device path must reproduce it to round-off.

use parki_core::{Domain, Kernel, Real};
use parki_dist::{Comm, DistEwaldSolver, EwaldBackend, EwaldOptions, ParallelOptions, SolverReal, SortMode, Targets};
use parki_farfield::FieldMethod;
use parki_gpu::{Emulator, GpuBackend};
use parki_nearfield::PairAccuracy;
use parki_reference::generate::{self, Distribution, Particles, Rng};

fn rel_rms<T: Real>(a: &[T], b: &[T]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x.to_f64() - y.to_f64()).powi(2)).sum();
    let den: f64 = b.iter().map(|y| y.to_f64().powi(2)).sum();
    (num / den).sqrt()
}

fn solve<T: SolverReal, B: EwaldBackend<T>>(opts: &EwaldOptions, data: &Particles<T>, targets: &[[T; 3]]) -> Vec<T> {
    let comm = Comm::single();
    let n = data.pos.len();
    let mut s =
        DistEwaldSolver::<T, B>::with_backend(&comm, opts, ParallelOptions::default(), n, targets.len()).unwrap();
    let dim = opts.kernel.output_dim() + if opts.field { 3 } else { 0 };
    let mut u = vec![T::ZERO; targets.len() * dim];
    // twice: the padded grid's padding must be zero again for the second evaluation
    for _ in 0..2 {
        s.evaluate(&data.sources(), Targets::Points(targets), &mut u, SortMode::default()).unwrap();
    }
    u
}

/// The emulated device against the CPU backend, `f64` and `f32` at the sources and at separate
/// targets; `bound64`/`bound32` on the relative rms difference.
fn compare(label: &str, opts64: &EwaldOptions, opts32: &EwaldOptions, domain: &Domain, dist: Distribution) {
    let data = Particles::<f64>::new(domain, dist, 300, 11);
    let mut rng = Rng::new(12);
    let targets: Vec<[f64; 3]> = generate::positions(domain, Distribution::Uniform, 61, &mut rng);
    for t in [&data.pos, &targets] {
        let cpu = solve::<f64, parki_dist::CpuBackend<f64>>(opts64, &data, t);
        let gpu = solve::<f64, GpuBackend<f64, Emulator>>(opts64, &data, t);
        let d = rel_rms(&gpu, &cpu);
        println!("{label} f64 ({} targets): emulated GPU vs CPU {d:.1e}", t.len());
        assert!(d < 1e-12, "{label} f64 ({} targets): {d:e}", t.len());
    }
    let data = Particles::<f32>::new(domain, dist, 300, 11);
    let t32: Vec<[f32; 3]> = targets.iter().map(|p| p.map(|x| x as f32)).collect();
    let cpu = solve::<f32, parki_dist::CpuBackend<f32>>(opts32, &data, &t32);
    let gpu = solve::<f32, GpuBackend<f32, Emulator>>(opts32, &data, &t32);
    let d = rel_rms(&gpu, &cpu);
    println!("{label} f32: emulated GPU vs CPU {d:.1e}");
    assert!(d < 2e-6, "{label} f32: {d:e}");
}

/// Every kernel with free axes: 0P, 1P along x, 2P along y and z.
#[test]
fn free_axes_match_the_cpu_backend() {
    for (periodic, name, dist) in [
        ([false; 3], "0P", Distribution::Normal),
        ([true, false, false], "1P x", Distribution::Uniform),
        ([false, true, true], "2P yz", Distribution::Uniform),
    ] {
        let domain = Domain::new([1.0, 1.2, 0.9], periodic).unwrap();
        for kernel in Kernel::ALL {
            let o64 = EwaldOptions::new(kernel, domain, 1e-8).threads(1).pair_accuracy(PairAccuracy::Full);
            let o32 = EwaldOptions::new(kernel, domain, 1e-4).threads(1);
            compare(&format!("{name} {}", kernel.name()), &o64, &o32, &domain, dist);
        }
    }
}

/// The Laplace field by both methods, triply periodic and with free axes.
#[test]
fn field_matches_the_cpu_backend() {
    for (periodic, name) in [([true; 3], "3P"), ([true, true, false], "2P xy"), ([false; 3], "0P")] {
        let domain = Domain::new([1.0, 1.2, 0.9], periodic).unwrap();
        for method in [FieldMethod::Window, FieldMethod::Spectral] {
            let with = |tol| {
                EwaldOptions::new(Kernel::Laplace, domain, tol)
                    .threads(1)
                    .field(true)
                    .field_method(method)
                    .pair_accuracy(PairAccuracy::Full)
            };
            compare(
                &format!("{name} field ({})", method.name()),
                &with(1e-9),
                &with(1e-4),
                &domain,
                Distribution::Normal,
            );
        }
    }
}

/// The transforms one component at a time (`DeviceFft::Components`: one component's plan run
/// per component, cuFFT's work area for one) give the batched plans' values: the combined
/// kernel in 3P (9 forward, 3 backward), the Stokeslet in 0P and the stresslet in 1P (the padded
/// grid's components), the Laplace field by `-i k` in 0P (1 forward, 4 backward).
#[test]
fn per_component_transforms_match_the_batched() {
    use parki_dist::{DeviceFft, DeviceVariants};
    for (periodic, kernel, field) in [
        ([true; 3], Kernel::Stokes, false),
        ([false; 3], Kernel::Stokeslet, false),
        ([true, false, false], Kernel::Stresslet, false),
        ([false; 3], Kernel::Laplace, true),
    ] {
        let domain = Domain::new([1.0, 1.2, 0.9], periodic).unwrap();
        let data = Particles::<f64>::new(&domain, Distribution::Uniform, 300, 5);
        let mut base = EwaldOptions::new(kernel, domain, 1e-8).threads(1).pair_accuracy(PairAccuracy::Full);
        if field {
            base = base.field(true).field_method(FieldMethod::Spectral);
        }
        let per = base.clone().device(DeviceVariants::default().fft(DeviceFft::Components));
        let batched = solve::<f64, GpuBackend<f64, Emulator>>(&base, &data, &data.pos);
        let components = solve::<f64, GpuBackend<f64, Emulator>>(&per, &data, &data.pos);
        let d = rel_rms(&components, &batched);
        // the variant ran: its solver says so, and a batched one does not
        let n = data.pos.len();
        let variants = |o: &EwaldOptions| {
            DistEwaldSolver::<f64, GpuBackend<f64, Emulator>>::with_backend(
                &Comm::single(),
                o,
                ParallelOptions::default(),
                n,
                n,
            )
            .unwrap()
            .backend()
            .variants()
        };
        assert!(variants(&per).ends_with("fft per component") && !variants(&base).contains("fft"));
        println!("{} {periodic:?} field {field}: per component vs batched {d:.1e}", kernel.name());
        assert!(d < 1e-13, "{} {periodic:?}: {d:e}", kernel.name());
    }
}
