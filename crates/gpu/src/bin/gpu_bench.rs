//! parki-gpu-bench: the CUDA backend's benchmarks (issue 9), for bench/gpu.sh on a lent GPU.
//!
//! - `peak`: the device's FMA rate (f64 and f32) by the `fma_peak` kernel, the P2P rate's
//!   reference;
//! - `eval`: whole evaluations, per case (kernel, tolerance, precision, N): throughput
//!   (particles/s, best of the repetitions after a warm-up), the stage split, P2P's FP rate
//!   against the peak (nominal flops per pair of `P2pFlops` without Newton steps, the same count
//!   as the CPU's, at the pair accuracy the device ran: medium in f64 from tolerance 1e-10 on),
//!   device bytes per particle; and the CPU backend on the same case in the same
//!   process for the ratio (`--cpu N`: only for N up to that);
//! - `p2g`: the P2G variants side by side (atomic, hybrid, operator: its build and apply times
//!   and the break-even number of evaluations with fixed positions), uniform and normal;
//! - `calibrate`: the device's constants of `parki_farfield::CostModel` (per kernel and
//!   precision, N = the first size): each case at the selection's cell size and at a third and
//!   three times it, P2P fitted as `p2p_visit * 27 * targets + p2p_pair * pairs` by least
//!   squares, the other stages as `parki-bench calibrate` does on the CPU; then each case
//!   planned with the fitted model against the CPU model's plan, in the same process.
//!
//! `--periodic xyz|xy|yz|x|z|none` (default `xyz`) runs `eval` with free axes (0P, 1P, 2P: the
//! padded grid and the kernel tables), and `--field window|spectral` the Laplace cases with the
//! field; `--erfc fitted,library` runs P2P with each erfc side by side (the fitted one sharing
//! the pair's Gaussian is the default; CUDA's for comparison), and `--near sphere,cells` with
//! each set of pairs (the cut-off sphere's, the default, or every pair of the colleague cells);
//! `--fft batched,components` with each kind of transform plan (one batched over the grid's
//! components, the default, or one component's run per component: cuFFT's work area for one);
//! `--overlap none,p2p` with the stages in order and with P2P on the side stream beside the
//! far field (its rate then from the side stream's own seconds).
//! Each `eval` line splits the device bytes per particle (grid, FFT work, particles, operator).
//! `--grid-caps 0,1000,600` bounds the grid's bytes per particle (the selection's memory limit;
//! 0: the device's budget alone) in `eval` and in `plan`, which prints the device's plans and
//! their stages priced at the device's constants without evaluating (`--emulator` plans as the
//! device would, with the emulator's memory).
//!
//! Every line starting with `{` is a JSON record; the rest is for people. `--emulator` runs on
//! the host emulator (tiny sizes only: to check the benchmark itself without a GPU).

use std::cell::Cell;
use std::time::Instant;

use parki_core::{Domain, Kernel};
use parki_dist::{
    Comm, CpuBackend, DeviceErfc, DeviceFft, DeviceOverlap, DeviceP2g, DeviceP2p, DeviceVariants, DistEwaldSolver,
    EwaldBackend, EwaldOptions, EwaldStage, Isa, NearPairs, P2gVariant, ParallelOptions, SolverReal, SortMode, Targets,
};
use parki_farfield::FieldMethod;
use parki_gpu::{Args, Device, DeviceMemory, Emulator, GpuBackend, Precision};
use parki_nearfield::{KernelReal, P2pFlops, PairAccuracy};
use parki_reference::generate::{Distribution, Particles};

struct Opts {
    emulator: bool,
    sizes: Vec<usize>,
    kernels: Vec<Kernel>,
    tols: Vec<f64>,
    f32_tols: Vec<f64>,
    precisions: Vec<String>,
    reps: usize,
    cpu: usize,
    p2g_size: usize,
    modes: Vec<String>,
    /// Far-field cell widths of the hybrid P2G tried by `p2g` (0: P/2).
    far_cells: Vec<u32>,
    /// Far-field cell width used by `eval` (0: P/2).
    far_cell: u32,
    /// P2P variant of `eval`.
    p2p: DeviceP2p,
    /// Periodic axes of `eval`'s box.
    periodic: [bool; 3],
    /// The Laplace field in `eval`, and how.
    field: Option<FieldMethod>,
    /// P2P's erfc in `eval`: each one listed, side by side.
    erfc: Vec<DeviceErfc>,
    /// P2P's pairs in `eval`: each set listed, side by side.
    near: Vec<NearPairs>,
    /// The transforms' plans in `eval`: each listed, side by side.
    fft: Vec<DeviceFft>,
    /// What runs concurrently in `eval`: each listed, side by side.
    overlap: Vec<DeviceOverlap>,
    /// Largest grid bytes per particle of `eval` and `plan` (the selection's memory limit,
    /// `max_grid_bytes`): each listed, side by side; 0: the device's budget alone.
    grid_caps: Vec<f64>,
}

fn parse() -> Result<Opts, String> {
    let mut o = Opts {
        emulator: false,
        sizes: vec![1_000_000, 4_000_000],
        kernels: vec![Kernel::Stokes, Kernel::Stokeslet],
        tols: vec![1e-6, 1e-9],
        f32_tols: vec![1e-3, 1e-5],
        precisions: vec!["f64".into(), "f32".into()],
        reps: 3,
        cpu: 1_000_000,
        p2g_size: 1_000_000,
        modes: vec!["peak".into(), "eval".into(), "p2g".into()],
        far_cells: vec![0],
        far_cell: 0,
        p2p: DeviceP2p::GlobalMemory,
        periodic: [true; 3],
        field: None,
        erfc: vec![DeviceErfc::Fitted],
        near: vec![NearPairs::Sphere],
        fft: vec![DeviceFft::Batched],
        overlap: vec![DeviceOverlap::None],
        grid_caps: vec![0.0],
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    let num = |s: &str| s.parse::<f64>().map_err(|e| format!("{s}: {e}"));
    let list = |s: &str| s.split(',').map(str::to_string).collect::<Vec<_>>();
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--emulator" {
            o.emulator = true;
            i += 1;
            continue;
        }
        let v = args.get(i + 1).ok_or(format!("{a} needs a value"))?;
        match a {
            "--sizes" => o.sizes = list(v).iter().map(|s| num(s).map(|x| x as usize)).collect::<Result<_, _>>()?,
            "--kernels" => {
                o.kernels = list(v)
                    .iter()
                    .map(|s| Kernel::ALL.into_iter().find(|k| k.name() == s).ok_or(format!("--kernels {s}")))
                    .collect::<Result<_, _>>()?
            }
            "--tols" => o.tols = list(v).iter().map(|s| num(s)).collect::<Result<_, _>>()?,
            "--f32-tols" => o.f32_tols = list(v).iter().map(|s| num(s)).collect::<Result<_, _>>()?,
            "--precisions" => o.precisions = list(v),
            "--reps" => o.reps = num(v)? as usize,
            "--cpu" => o.cpu = num(v)? as usize,
            "--p2g-size" => o.p2g_size = num(v)? as usize,
            "--modes" => o.modes = list(v),
            "--far-cells" => {
                o.far_cells = list(v).iter().map(|s| num(s).map(|x| x as u32)).collect::<Result<_, _>>()?
            }
            "--far-cell" => o.far_cell = num(v)? as u32,
            "--periodic" => {
                if v != "none" && !v.chars().all(|c| "xyz".contains(c)) {
                    return Err(format!("--periodic {v}: the periodic axes (xyz, xy, x, ...) or none"));
                }
                o.periodic = [0, 1, 2].map(|d| v.contains(["x", "y", "z"][d]));
            }
            "--erfc" => {
                o.erfc = list(v)
                    .iter()
                    .map(|s| DeviceErfc::parse(s).ok_or(format!("--erfc {s}: fitted or library")))
                    .collect::<Result<_, _>>()?
            }
            "--near" => {
                o.near = list(v)
                    .iter()
                    .map(|s| NearPairs::parse(s).ok_or(format!("--near {s}: sphere or cells")))
                    .collect::<Result<_, _>>()?
            }
            "--grid-caps" => o.grid_caps = list(v).iter().map(|s| num(s)).collect::<Result<_, _>>()?,
            "--fft" => {
                o.fft = list(v)
                    .iter()
                    .map(|s| DeviceFft::parse(s).ok_or(format!("--fft {s}: batched or components")))
                    .collect::<Result<_, _>>()?
            }
            "--overlap" => {
                o.overlap = list(v)
                    .iter()
                    .map(|s| DeviceOverlap::parse(s).ok_or(format!("--overlap {s}: none or p2p")))
                    .collect::<Result<_, _>>()?
            }
            "--field" => {
                o.field = Some(FieldMethod::parse(v).ok_or(format!("--field {v}: window or spectral"))?);
            }
            "--p2p" => {
                o.p2p = match v.as_str() {
                    "gm1d" => DeviceP2p::GlobalMemory,
                    "shared" => DeviceP2p::SharedMemory,
                    _ => return Err(format!("--p2p {v}: gm1d or shared")),
                }
            }
            _ => return Err(format!("unknown option {a}")),
        }
        i += 2;
    }
    Ok(o)
}

/// The FMA rate of the device in precision `p`: GFLOP/s.
fn peak<D: Device>(dev: &D, p: Precision, emulator: bool) -> Result<f64, String> {
    let (blocks, threads, iters) = if emulator { (2u32, 32u32, 64u32) } else { (8192, 256, 8192) };
    let out = dev.alloc(blocks as usize * threads as usize * 8, "fma output").map_err(|e| e.to_string())?;
    let name = parki_gpu::kernels::entry("fma_peak", p);
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let mut a = Args::new();
        a.push(iters).push(out);
        let ptrs = a.pointers();
        let t = Instant::now();
        // SAFETY: fma_peak(u32 iters, real* out) with one output per thread.
        unsafe { dev.launch(&name, [blocks, 1, 1], [threads, 1, 1], 0, &ptrs[..a.len()]) }
            .map_err(|e| e.to_string())?;
        dev.synchronize().map_err(|e| e.to_string())?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    // SAFETY: allocated above, not used afterwards.
    unsafe { dev.free(out) };
    Ok(blocks as f64 * threads as f64 * iters as f64 * 8.0 * 2.0 / best / 1e9)
}

struct Timing {
    params: parki_dist::Params,
    best: f64,
    stages: Vec<(EwaldStage, f64)>,
    pairs: u64,
    /// P2P's seconds (`Evaluation::p2p_seconds`: the side stream's where it overlapped).
    p2p: f64,
    /// P2P's device seconds where it overlapped the far field.
    overlapped_p2p: Option<f64>,
    bytes: usize,
    first_p2g: f64,
    variants: String,
}

fn run_case<T: SolverReal + KernelReal, B: EwaldBackend<T>>(
    opts: &EwaldOptions,
    data: &Particles<T>,
    reps: usize,
    info: impl Fn(&B) -> (usize, String),
) -> Result<Timing, String> {
    let n = data.pos.len();
    let comm = Comm::single();
    let mut s = DistEwaldSolver::<T, B>::with_backend(&comm, opts, ParallelOptions::default(), n, n)
        .map_err(|e| e.to_string())?;
    let mut u = vec![T::ZERO; n * (opts.kernel.output_dim() + if opts.field { 3 } else { 0 })];
    let mut best: Option<parki_dist::Evaluation> = None;
    let mut first_p2g = 0.0;
    for r in 0..=reps {
        let e =
            s.evaluate(&data.sources(), Targets::Sources, &mut u, SortMode::default()).map_err(|e| e.to_string())?;
        if r == 0 {
            first_p2g = e.times.get(EwaldStage::P2G);
            if reps > 0 {
                continue;
            }
        }
        if best.as_ref().is_none_or(|b| e.times.total() < b.times.total()) {
            best = Some(e);
        }
    }
    let e = best.expect("at least one evaluation");
    let (bytes, variants) = info(s.backend());
    Ok(Timing {
        params: s.params().clone(),
        best: e.times.total(),
        stages: e.times.iter().collect(),
        pairs: e.pairs,
        p2p: e.p2p_seconds(),
        overlapped_p2p: e.overlapped_p2p,
        bytes,
        first_p2g,
        variants,
    })
}

fn stage_json(stages: &[(EwaldStage, f64)]) -> String {
    let parts: Vec<String> =
        stages.iter().map(|(s, t)| format!("\"{}\":{:.6}", parki_core::StageKind::name(*s), t)).collect();
    format!("{{{}}}", parts.join(","))
}

#[allow(clippy::too_many_arguments)]
fn eval<T: SolverReal + KernelReal, D: Device>(o: &Opts, peak: f64, prec: &str) -> Result<(), String> {
    let domain = Domain::new([1.0, 1.0, 1.0], o.periodic).map_err(|e| e.to_string())?;
    let axes: String = (0..3).filter(|&d| o.periodic[d]).map(|d| ["x", "y", "z"][d]).collect();
    let box_name = format!("{}P{}", axes.len(), if axes.is_empty() || axes.len() == 3 { String::new() } else { axes });
    let tols = if prec == "f32" { &o.f32_tols } else { &o.tols };
    for &n in &o.sizes {
        let data = Particles::<T>::new(&domain, Distribution::Uniform, n, 7);
        for &kernel in &o.kernels {
            let variants: Vec<(DeviceErfc, NearPairs, DeviceFft, f64, DeviceOverlap)> = o
                .erfc
                .iter()
                .flat_map(|&e| o.near.iter().flat_map(move |&p| o.fft.iter().map(move |&f| (e, p, f))))
                .flat_map(|(e, p, f)| o.grid_caps.iter().map(move |&c| (e, p, f, c)))
                .flat_map(|(e, p, f, c)| o.overlap.iter().map(move |&v| (e, p, f, c, v)))
                .collect();
            for (&tol, (ei, &(erfc, near, fft, cap, overlap))) in
                tols.iter().flat_map(|t| std::iter::repeat(t).zip(variants.iter().enumerate()))
            {
                let mut opts = EwaldOptions::new(kernel, domain, tol)
                    .near_pairs(near)
                    .device(
                        DeviceVariants::new(o.p2p, DeviceP2g::FromP2g)
                            .far_cell(o.far_cell)
                            .erfc(erfc)
                            .fft(fft)
                            .overlap(overlap),
                    )
                    .max_grid_bytes((cap > 0.0).then_some((cap * n as f64) as usize));
                let field = o.field.filter(|_| kernel == Kernel::Laplace);
                if let Some(m) = field {
                    opts = opts.field(true).field_method(m);
                }
                let mut name = match field {
                    Some(m) => format!("{}+E({})", kernel.name(), m.name()),
                    None => kernel.name().to_string(),
                };
                if o.erfc.len() > 1 {
                    name = format!("{name}[erfc {}]", erfc.name());
                }
                if o.near.len() > 1 {
                    name = format!("{name}[{}]", near.name());
                }
                if o.fft.len() > 1 {
                    name = format!("{name}[fft {}]", fft.name());
                }
                if o.grid_caps.len() > 1 {
                    name = format!("{name}[grid <= {cap} B]");
                }
                if o.overlap.len() > 1 {
                    name = format!("{name}[overlap {}]", overlap.name());
                }
                let memory = Cell::new(DeviceMemory::default());
                let info = |b: &GpuBackend<T, D>| {
                    memory.set(b.memory());
                    (b.bytes(), b.variants())
                };
                let g = match run_case::<T, GpuBackend<T, D>>(&opts, &data, o.reps, info) {
                    Ok(g) => g,
                    Err(e) => {
                        println!("{name} {box_name} {prec} tol {tol:.0e} N {n}: {e}");
                        continue;
                    }
                };
                let overlapped =
                    g.overlapped_p2p.map_or(String::new(), |t| format!(" in {:.1} ms beside the far field", t * 1e3));
                // the flops of the pair functions the device ran: f64's medium ones where the
                // options' accuracy is medium or loose (docs/performance.md §8.13)
                let accuracy = match erfc {
                    DeviceErfc::Library => PairAccuracy::Full,
                    DeviceErfc::Fitted => opts.medium_pair_accuracy_for::<T>(),
                };
                let flops = g.pairs as f64 * P2pFlops::per_pair_at::<T>(kernel, Isa::Avx2, accuracy);
                let rate = flops / g.p2p.max(1e-12) / 1e9;
                let cpu = if n <= o.cpu && ei == 0 {
                    let mut copts = opts.clone();
                    copts.threads = 0;
                    run_case::<T, CpuBackend<T>>(&copts, &data, 1, |_| (0, String::new())).ok().map(|c| c.best)
                } else {
                    None
                };
                let m = memory.get();
                let per = |b: usize| b as f64 / n as f64;
                println!(
                    "{name:<9} {box_name} {prec} tol {tol:.0e} N {n:>9}: {:.3} s, {:.2} M particles/s, P2P {:.0} GFLOP/s ({:.0} % of FMA peak){overlapped}, {:.0} B/particle (grid {:.0}, FFT work {:.0}, particles {:.0}, operator {:.0}), grid {:?}{}",
                    g.best,
                    n as f64 / g.best / 1e6,
                    rate,
                    100.0 * rate / peak,
                    per(g.bytes),
                    per(m.grid),
                    per(m.fft_work),
                    per(m.particles),
                    per(m.operator),
                    g.params.grid,
                    cpu.map_or(String::new(), |c| format!(", CPU {c:.3} s (GPU speed-up {:.1}x)", c / g.best))
                );
                println!(
                    "{{\"mode\":\"eval\",\"kernel\":\"{name}\",\"box\":\"{box_name}\",\"precision\":\"{prec}\",\"tol\":{tol:e},\"n\":{n},\"seconds\":{:.6},\"particles_per_s\":{:.1},\"p2p_gflops\":{rate:.1},\"p2p_overlapped_seconds\":{},\"peak_gflops\":{peak:.1},\"bytes_per_particle\":{:.1},\"memory_per_particle\":{{\"grid\":{:.1},\"fft_work\":{:.1},\"particles\":{:.1},\"operator\":{:.1}}},\"grid\":{:?},\"cpu_seconds\":{},\"variants\":\"{}\",\"stages\":{}}}",
                    g.best,
                    n as f64 / g.best,
                    g.overlapped_p2p.map_or("null".to_string(), |t| format!("{t:.6}")),
                    per(g.bytes),
                    per(m.grid),
                    per(m.fft_work),
                    per(m.particles),
                    per(m.operator),
                    g.params.grid,
                    cpu.map_or("null".to_string(), |c| format!("{c:.6}")),
                    g.variants,
                    stage_json(&g.stages)
                );
            }
        }
    }
    Ok(())
}

fn p2g<T: SolverReal + KernelReal, D: Device>(o: &Opts, prec: &str) -> Result<(), String> {
    let domain = Domain::triply_periodic([1.0, 1.0, 1.0]).map_err(|e| e.to_string())?;
    let n = o.p2g_size;
    for dist in [Distribution::Uniform, Distribution::Normal] {
        let data = Particles::<T>::new(&domain, dist, n, 11);
        for &kernel in &o.kernels {
            let tol = if prec == "f32" { o.f32_tols[0] } else { *o.tols.last().unwrap_or(&1e-9) };
            let base = EwaldOptions::new(kernel, domain, tol);
            let mut rows = Vec::new();
            let mut cases = vec![("atomic".to_string(), base.clone().p2g(P2gVariant::Scatter))];
            for &cw in &o.far_cells {
                let name = if cw == 0 { "hybrid".to_string() } else { format!("hybrid-c{cw}") };
                let v = DeviceVariants::new(Default::default(), DeviceP2g::FromP2g).far_cell(cw);
                cases.push((name, base.clone().p2g(P2gVariant::Blocked).device(v)));
            }
            cases.push((
                "operator".to_string(),
                base.clone().device(DeviceVariants::new(Default::default(), DeviceP2g::Operator)),
            ));
            for (name, opts) in cases {
                match run_case::<T, GpuBackend<T, D>>(&opts, &data, o.reps, |b| (b.bytes(), b.variants())) {
                    Ok(g) => {
                        let t = g.stages.iter().find(|(s, _)| *s == EwaldStage::P2G).map_or(0.0, |x| x.1);
                        rows.push((name, t, g.first_p2g, g.bytes));
                    }
                    Err(e) => println!("p2g {name} {} {dist:?}: {e}", kernel.name()),
                }
            }
            let best_other = rows.iter().filter(|r| r.0 != "operator").map(|r| r.1).fold(f64::INFINITY, f64::min);
            for (name, t, first, bytes) in &rows {
                let (build, breakeven) = if *name == "operator" {
                    let build = first - t;
                    let gain = best_other - t;
                    (Some(build), if gain > 0.0 { Some(build / gain) } else { None })
                } else {
                    (None, None)
                };
                println!(
                    "p2g {:<8} {:<9} {prec} {dist:?} N {n}: {:.4} s ({:.1} M sources/s){}{}",
                    name,
                    kernel.name(),
                    t,
                    n as f64 / t / 1e6,
                    build.map_or(String::new(), |b| format!(", build {b:.4} s")),
                    breakeven.map_or(String::new(), |b| format!(", break-even after {b:.1} evaluations"))
                );
                println!(
                    "{{\"mode\":\"p2g\",\"variant\":\"{name}\",\"kernel\":\"{}\",\"precision\":\"{prec}\",\"dist\":\"{dist:?}\",\"n\":{n},\"seconds\":{t:.6},\"build_seconds\":{},\"breakeven\":{},\"bytes\":{bytes}}}",
                    kernel.name(),
                    build.map_or("null".into(), |b| format!("{b:.6}")),
                    breakeven.map_or("null".into(), |b| format!("{b:.2}"))
                );
            }
        }
    }
    Ok(())
}

/// One calibration run: the case's parameters, its stage times, pairs and targets.
struct Sample {
    kernel: Kernel,
    timing: Timing,
    n: usize,
}

impl Sample {
    fn stage(&self, s: EwaldStage) -> f64 {
        self.timing.stages.iter().find(|(x, _)| *x == s).map_or(0.0, |x| x.1)
    }
}

/// `y ~ a x1 + b x2` by least squares with `a, b >= 0` (the better one-term fit where the
/// two-term one has a negative coefficient).
fn fit_nonnegative(x1: &[f64], x2: &[f64], y: &[f64]) -> (f64, f64) {
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(p, q)| p * q).sum::<f64>();
    let (s11, s12, s22) = (dot(x1, x1), dot(x1, x2), dot(x2, x2));
    let (r1, r2) = (dot(x1, y), dot(x2, y));
    let det = s11 * s22 - s12 * s12;
    if det.abs() > 1e-12 * s11 * s22 {
        let (a, b) = ((r1 * s22 - r2 * s12) / det, (r2 * s11 - r1 * s12) / det);
        if a >= 0.0 && b >= 0.0 {
            return (a, b);
        }
    }
    let res = |a: f64, b: f64| x1.iter().zip(x2).zip(y).map(|((p, q), v)| (v - a * p - b * q).powi(2)).sum::<f64>();
    let only_a = (r1 / s11.max(1e-300), 0.0);
    let only_b = (0.0, r2 / s22.max(1e-300));
    if res(only_a.0, only_a.1) <= res(only_b.0, only_b.1) {
        only_a
    } else {
        only_b
    }
}

/// The device's cost constants (see the module documentation).
fn calibrate<T: SolverReal + KernelReal, D: Device>(o: &Opts, prec: &str) -> Result<(), String> {
    let domain = Domain::triply_periodic([1.0, 1.0, 1.0]).map_err(|e| e.to_string())?;
    let n = o.sizes[0];
    let tols = if prec == "f32" { &o.f32_tols } else { &o.tols };
    let data = Particles::<T>::new(&domain, Distribution::Uniform, n, 7);
    let mut samples = Vec::new();
    // (kernel, tolerance, index in `samples`) of the runs at the selection's own cell size
    let mut autos = Vec::new();
    for &kernel in &o.kernels {
        for &tol in tols {
            let base = EwaldOptions::new(kernel, domain, tol).device(DeviceVariants::new(o.p2p, DeviceP2g::FromP2g));
            let auto = run_case::<T, GpuBackend<T, D>>(&base, &data, o.reps, |b| (b.bytes(), b.variants()))?;
            let s0 = auto.params.sources_per_cell;
            autos.push((kernel, tol, samples.len()));
            samples.push(Sample { kernel, timing: auto, n });
            for f in [1.0 / 3.0, 3.0] {
                let opts = base.clone().cell_size(Some(s0 * f));
                match run_case::<T, GpuBackend<T, D>>(&opts, &data, o.reps, |b| (b.bytes(), b.variants())) {
                    Ok(t) => samples.push(Sample { kernel, timing: t, n }),
                    Err(e) => println!("calibrate {} {prec} tol {tol:.0e} cell size {:.1}: {e}", kernel.name(), s0 * f),
                }
            }
        }
    }
    let mut cost = parki_dist::CostModel::default();
    let (mut fft, mut cnv) = (Vec::new(), Vec::new());
    for (k, kernel) in Kernel::ALL.iter().enumerate() {
        let mine: Vec<&Sample> = samples.iter().filter(|s| s.kernel == *kernel).collect();
        if mine.is_empty() {
            continue;
        }
        let visits: Vec<f64> = mine.iter().map(|s| 27.0 * s.n as f64).collect();
        let pairs: Vec<f64> = mine.iter().map(|s| s.timing.pairs as f64).collect();
        let p2p: Vec<f64> = mine.iter().map(|s| s.stage(EwaldStage::P2P)).collect();
        let (a, b) = fit_nonnegative(&visits, &pairs, &p2p);
        cost.p2p_visit[k] = 1e9 * a;
        cost.p2p_pair[k] = 1e9 * b;
        let (mut p2g, mut g2p) = (0.0, 0.0);
        for s in &mine {
            let par = &s.timing.params;
            let p3 = (par.p * par.p * par.p) as f64;
            let (ncomp, dim) = (kernel.grid_components() as f64, kernel.output_dim() as f64);
            let half = ((par.grid[0] / 2 + 1) * par.grid[1] * par.grid[2]) as f64;
            p2g += 1e9 * s.stage(EwaldStage::P2G) / (s.n as f64 * p3 * ncomp) / mine.len() as f64;
            g2p += 1e9 * s.stage(EwaldStage::G2P) / (s.n as f64 * p3 * dim) / mine.len() as f64;
            fft.push(
                1e9 * (s.stage(EwaldStage::FFT) + s.stage(EwaldStage::IFFT))
                    / (parki_decomp::fft_grid_work(par.grid) * (ncomp + dim)),
            );
            cnv.push(1e9 * s.stage(EwaldStage::CNV) / half);
            println!(
                "calibrate {:<9} {prec} N {}: cells {:?} ({:.1} sources per cell), P {}, grid {:?}: total {:.4} s, cell lists {:.4}, P2P {:.4} ({:.3e} pairs), P2G {:.4}, FFT+IFFT {:.4}, CNV {:.4}, G2P {:.4}",
                kernel.name(),
                s.n,
                par.cells,
                par.sources_per_cell,
                par.p,
                par.grid,
                s.timing.best,
                s.stage(EwaldStage::CellLists),
                s.stage(EwaldStage::P2P),
                s.timing.pairs as f64,
                s.stage(EwaldStage::P2G),
                s.stage(EwaldStage::FFT) + s.stage(EwaldStage::IFFT),
                s.stage(EwaldStage::CNV),
                s.stage(EwaldStage::G2P)
            );
        }
        cost.p2g[k] = p2g;
        cost.g2p[k] = g2p;
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    cost.fft = mean(&fft);
    cost.cnv = mean(&cnv);
    cost.f32_ratio = 1.0;
    println!("calibrated ({prec}, ns on the device): {cost:?}");
    println!(
        "{{\"mode\":\"calibrate\",\"precision\":\"{prec}\",\"n\":{n},\"p2p_pair\":{:?},\"p2p_visit\":{:?},\"p2g\":{:?},\"fft\":{:.6},\"cnv\":{:.6},\"g2p\":{:?}}}",
        cost.p2p_pair, cost.p2p_visit, cost.p2g, cost.fft, cost.cnv, cost.g2p
    );
    // the fitted model's plans against the CPU model's (the runs at the selection's own cell
    // size above), in the same process
    for &(kernel, tol, at) in &autos {
        let cpu_model = &samples[at].timing;
        let fitted = EwaldOptions::new(kernel, domain, tol)
            .device(DeviceVariants::new(o.p2p, DeviceP2g::FromP2g))
            .cost_model(cost);
        let dev_model = run_case::<T, GpuBackend<T, D>>(&fitted, &data, o.reps, |b| (b.bytes(), b.variants()))?;
        println!(
            "calibrate {:<9} {prec} tol {tol:.0e} N {n}: CPU model {:.4} s ({:.1} per cell, grid {:?}, {:.0} B/particle), device model {:.4} s ({:.1} per cell, grid {:?}, {:.0} B/particle): {:.2}x",
            kernel.name(),
            cpu_model.best,
            cpu_model.params.sources_per_cell,
            cpu_model.params.grid,
            cpu_model.bytes as f64 / n as f64,
            dev_model.best,
            dev_model.params.sources_per_cell,
            dev_model.params.grid,
            dev_model.bytes as f64 / n as f64,
            cpu_model.best / dev_model.best
        );
        println!(
            "{{\"mode\":\"calibrate_check\",\"kernel\":\"{}\",\"precision\":\"{prec}\",\"tol\":{tol:e},\"n\":{n},\"cpu_model_seconds\":{:.6},\"device_model_seconds\":{:.6},\"cpu_model_stages\":{},\"device_model_stages\":{}}}",
            kernel.name(),
            cpu_model.best,
            dev_model.best,
            stage_json(&cpu_model.stages),
            stage_json(&dev_model.stages)
        );
    }
    Ok(())
}

/// `plan`: the device's plans without evaluating (nothing allocated beyond the device's
/// opening): per case and grid cap, the grid, `P`, the cell size, the grid's bytes per
/// particle, and the stages priced at the device's constants
/// (`parki_dist::CostModel::device().reprice`, the cell lists not included): the time a memory
/// limit costs, before a device measures it (`eval --grid-caps`).
fn plan<T: SolverReal + KernelReal, D: Device>(o: &Opts, prec: &str) -> Result<(), String> {
    let domain = Domain::new([1.0, 1.0, 1.0], o.periodic).map_err(|e| e.to_string())?;
    let tols = if prec == "f32" { &o.f32_tols } else { &o.tols };
    let comm = Comm::single();
    for &n in &o.sizes {
        for &kernel in &o.kernels {
            for &tol in tols {
                for &cap in &o.grid_caps {
                    let opts = EwaldOptions::new(kernel, domain, tol)
                        .max_grid_bytes((cap > 0.0).then_some((cap * n as f64) as usize));
                    let case = format!("plan {:<9} {prec} tol {tol:.0e} N {n} grid <= {cap} B", kernel.name());
                    let popts = ParallelOptions::default();
                    let p = match DistEwaldSolver::<T, GpuBackend<T, D>>::parameters(&comm, &opts, popts, n, n) {
                        Ok(p) => p,
                        Err(e) => {
                            println!("{case}: {e}");
                            continue;
                        }
                    };
                    let cpu = parki_dist::CostModel::default();
                    let c = parki_dist::CostModel::device().reprice(&cpu, &p.cost, kernel, n, T::BYTES);
                    let per = p.grid_bytes as f64 / n as f64;
                    // what the device holds of it: the FFT grid's components (the padded grid
                    // with free axes), no gather copy
                    let comps = kernel.grid_components().max(FieldMethod::grid_outputs(None, kernel));
                    let fft_grid = p.free.as_ref().map_or(p.grid, |f| f.fft_len);
                    let layout = parki_decomp::GridLayout::new(fft_grid).map_err(|e| e.to_string())?;
                    let dev = (comps * layout.real_len() * T::BYTES) as f64 / n as f64;
                    println!(
                        "{case}: grid {:?}, P {}, {:.1} sources per cell, grid {per:.0} B/particle (the device's FFT grid {dev:.0}), device stages {:.4} s (P2P {:.4}, P2G {:.4}, FFT {:.4}, CNV {:.4}, G2P {:.4})",
                        p.grid,
                        p.p,
                        p.sources_per_cell,
                        c.total(),
                        c.p2p,
                        c.p2g,
                        c.fft,
                        c.cnv,
                        c.g2p
                    );
                    println!(
                        "{{\"mode\":\"plan\",\"kernel\":\"{}\",\"precision\":\"{prec}\",\"tol\":{tol:e},\"n\":{n},\"grid_cap\":{cap},\"grid\":{:?},\"p\":{},\"sources_per_cell\":{:.2},\"grid_bytes_per_particle\":{per:.1},\"device_fft_grid_bytes_per_particle\":{dev:.1},\"device_stage_seconds\":{:.6}}}",
                        kernel.name(),
                        p.grid,
                        p.p,
                        p.sources_per_cell,
                        c.total()
                    );
                }
            }
        }
    }
    Ok(())
}

fn main_on<D: Device>(o: &Opts) -> Result<(), String> {
    let t = Instant::now();
    let dev = D::open(0).map_err(|e| e.to_string())?;
    println!(
        "device: {:?} (opened in {:.2} s, the kernels' compilation or disk cache included)",
        dev.info(),
        t.elapsed().as_secs_f64()
    );
    let peak64 = peak(&dev, Precision::F64, o.emulator)?;
    let peak32 = peak(&dev, Precision::F32, o.emulator)?;
    println!("FMA peak: f64 {peak64:.0} GFLOP/s, f32 {peak32:.0} GFLOP/s");
    println!("{{\"mode\":\"peak\",\"f64_gflops\":{peak64:.1},\"f32_gflops\":{peak32:.1}}}");
    drop(dev);
    for prec in &o.precisions {
        if o.modes.iter().any(|m| m == "eval") {
            match prec.as_str() {
                "f32" => eval::<f32, D>(o, peak32, "f32")?,
                _ => eval::<f64, D>(o, peak64, "f64")?,
            }
        }
        if o.modes.iter().any(|m| m == "p2g") {
            match prec.as_str() {
                "f32" => p2g::<f32, D>(o, "f32")?,
                _ => p2g::<f64, D>(o, "f64")?,
            }
        }
        if o.modes.iter().any(|m| m == "plan") {
            match prec.as_str() {
                "f32" => plan::<f32, D>(o, "f32")?,
                _ => plan::<f64, D>(o, "f64")?,
            }
        }
        if o.modes.iter().any(|m| m == "calibrate") {
            match prec.as_str() {
                "f32" => calibrate::<f32, D>(o, "f32")?,
                _ => calibrate::<f64, D>(o, "f64")?,
            }
        }
    }
    Ok(())
}

fn main() {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("parki-gpu-bench: {e}");
            std::process::exit(2);
        }
    };
    let r = if o.emulator {
        main_on::<Emulator>(&o)
    } else {
        #[cfg(feature = "cuda")]
        {
            main_on::<parki_gpu::cuda::CudaDevice>(&o)
        }
        #[cfg(not(feature = "cuda"))]
        {
            Err("built without the cuda feature: only --emulator runs".to_string())
        }
    };
    if let Err(e) = r {
        eprintln!("parki-gpu-bench: {e}");
        std::process::exit(1);
    }
}
