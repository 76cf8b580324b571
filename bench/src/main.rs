//! Benchmarks of parki-dist. Every number is printed next to a baseline measured in the same
//! process (these machines are noisy); results go to docs/performance.md with the machine.
//!
//! - `throughput`: particles per second of a whole evaluation with the per-stage split, for each
//!   kernel, N and tolerance; at N = 1e5 also the ratio to the O(N^2) direct sum.
//! - `p2p-peak`: the P2P kernel's achieved FP64 (or FP32) rate as a fraction of the peak of the
//!   same cores, measured by an FMA loop.
//! - `calibrate`: the cost constants of `parki_farfield::CostModel` on this machine (one thread).
//! - `pair-accuracy`: P2P's medium and loose pair functions against the full ones, each with
//!   its own plan, alternating: P2P's time per pair (`PairAccuracy::MEDIUM_COST`) and the whole
//!   evaluation.
//! - `exact-positions`: f32 given the f64 positions (`evaluate_exact`) against the rounded
//!   positions alone and f64, alternating: time and error ([`exact`]).

mod exact;
mod peak;

use std::time::Instant;

use clap::{Parser, Subcommand};
use parki_core::{Domain, Kernel, Sources};
use parki_dist::{Evaluation, EwaldOptions, EwaldSolver, EwaldStage as Stage, Targets};
use parki_nearfield::{Isa, P2pFlops, PairAccuracy};
use parki_reference::generate::{self, Distribution, Rng};

#[derive(Parser)]
#[command(name = "parki-bench", about = "Benchmarks of parki-dist")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
    /// Threads (default: all cores).
    #[arg(long, global = true, default_value_t = 0)]
    threads: usize,
}

#[derive(Subcommand)]
enum Cmd {
    /// Throughput of whole evaluations with the per-stage split.
    Throughput {
        /// Particle counts.
        #[arg(long, value_delimiter = ',', default_value = "100000,1000000")]
        n: Vec<usize>,
        /// Tolerances.
        #[arg(long, value_delimiter = ',', default_value = "1e-6,1e-9")]
        tol: Vec<f64>,
        /// Kernels.
        #[arg(long, value_delimiter = ',', default_value = "laplace,stokeslet,stresslet,stokes")]
        kernel: Vec<String>,
        /// Targets sampled to time the O(N^2) direct sum (its cost is linear in the targets).
        #[arg(long, default_value_t = 4000)]
        direct_sample: usize,
        /// Largest N for which the direct-sum ratio is measured.
        #[arg(long, default_value_t = 100_000)]
        direct_max_n: usize,
        /// Single precision.
        #[arg(long)]
        f32: bool,
    },
    /// P2P FP rate against the FMA-loop peak of the same cores.
    P2pPeak {
        /// Particles.
        #[arg(long, default_value_t = 1_000_000)]
        n: usize,
        /// Tolerance (sets xi and the cells).
        #[arg(long, default_value_t = 1e-9)]
        tol: f64,
    },
    /// The error model term by term against measured errors (classical Ewald reference).
    ErrorModel {
        /// Kernel.
        #[arg(long, default_value = "laplace")]
        kernel: String,
        /// Tolerance.
        #[arg(long, default_value_t = 1e-6)]
        tol: f64,
        /// Particles.
        #[arg(long, default_value_t = 1500)]
        n: usize,
        /// Fixed real-space cut-off for the sweeps.
        #[arg(long, default_value_t = 0.09)]
        rc: f64,
    },
    /// P2P's medium (or loose) pair functions against the full ones, per kernel and tolerance:
    /// P2P's time per pair and the whole evaluation, each accuracy with its own plan,
    /// alternating; the values' difference on one cut-off and window.
    PairAccuracy {
        /// Particles.
        #[arg(long, default_value_t = 200_000)]
        n: usize,
        /// Tolerances.
        #[arg(long, value_delimiter = ',', default_value = "1e-6,1e-8,1e-9")]
        tol: Vec<f64>,
        /// Kernels.
        #[arg(long, value_delimiter = ',', default_value = "laplace,stokeslet,stresslet,stokes")]
        kernel: Vec<String>,
        /// Alternating rounds (medians reported).
        #[arg(long, default_value_t = 5)]
        rounds: usize,
    },
    /// f32 on the f64 positions (`evaluate_exact`) against the rounded positions and f64.
    ExactPositions {
        /// Particle counts.
        #[arg(long, value_delimiter = ',', default_value = "100000,1000000")]
        n: Vec<usize>,
        /// Tolerance.
        #[arg(long, default_value_t = 1e-6)]
        tol: f64,
        /// Kernels.
        #[arg(long, value_delimiter = ',', default_value = "laplace,stokeslet")]
        kernel: Vec<String>,
        /// Alternating rounds (medians reported).
        #[arg(long, default_value_t = 3)]
        rounds: usize,
    },
    /// Cost-model constants on this machine.
    Calibrate {
        /// Particles.
        #[arg(long, default_value_t = 200_000)]
        n: usize,
    },
}

fn threads(t: usize) -> usize {
    if t == 0 {
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    } else {
        t
    }
}

struct Problem {
    domain: Domain,
    pos: Vec<[f64; 3]>,
    q: Vec<f64>,
    f: Vec<[f64; 3]>,
    d: Vec<[f64; 3]>,
    nrm: Vec<[f64; 3]>,
}

impl Problem {
    fn uniform(n: usize, seed: u64) -> Self {
        let domain = Domain::triply_periodic([1.0, 1.0, 1.0]).expect("unit box");
        let mut rng = Rng::new(seed);
        let pos = generate::positions(&domain, Distribution::Uniform, n, &mut rng);
        let q = generate::neutral_scalars(n, &mut rng);
        let f = generate::neutral_vectors(n, &mut rng);
        let d = generate::normal_vectors(n, &mut rng);
        let nrm = (0..n).map(|_| generate::unit_vector(&mut rng)).collect();
        Self { domain, pos, q, f, d, nrm }
    }

    fn sources(&self) -> Sources<'_, f64> {
        Sources {
            positions: &self.pos,
            charges: Some(&self.q),
            forces: Some(&self.f),
            dipoles: Some(&self.d),
            normals: Some(&self.nrm),
        }
    }

    /// The problem in precision `T`, positions narrowed as the application narrows them.
    fn narrowed<T: parki_dist::SolverReal>(&self) -> Narrowed<T> {
        let c3 = |v: &[[f64; 3]]| v.iter().map(|p| p.map(T::from_f64)).collect::<Vec<_>>();
        Narrowed {
            pos: parki_core::validate::narrow_positions::<T>(&self.pos, &self.domain),
            q: self.q.iter().map(|&v| T::from_f64(v)).collect(),
            f: c3(&self.f),
            d: c3(&self.d),
            nrm: c3(&self.nrm),
        }
    }
}

/// A [`Problem`] in a working precision ([`Problem::narrowed`]).
struct Narrowed<T> {
    pos: Vec<[T; 3]>,
    q: Vec<T>,
    f: Vec<[T; 3]>,
    d: Vec<[T; 3]>,
    nrm: Vec<[T; 3]>,
}

impl<T: parki_dist::SolverReal> Narrowed<T> {
    fn sources(&self) -> Sources<'_, T> {
        Sources {
            positions: &self.pos,
            charges: Some(&self.q),
            forces: Some(&self.f),
            dipoles: Some(&self.d),
            normals: Some(&self.nrm),
        }
    }
}

/// Plans and evaluates twice (the first evaluation faults in the scratch memory); returns the
/// solver and the second evaluation.
fn run<T: parki_dist::SolverReal>(
    kernel: Kernel,
    tol: f64,
    threads: usize,
    prob: &Problem,
) -> (EwaldSolver<T>, Evaluation, f64) {
    run_with::<T>(&EwaldOptions::new(kernel, prob.domain, tol).threads(threads), prob)
}

/// Plans `opts` and evaluates twice (the first faults in the scratch memory): the solver, the
/// second evaluation, the planning seconds.
fn run_with<T: parki_dist::SolverReal>(opts: &EwaldOptions, prob: &Problem) -> (EwaldSolver<T>, Evaluation, f64) {
    let (solver, ev, plan, _) = run_values::<T>(opts, prob);
    (solver, ev, plan)
}

/// [`run_with`], and the values of the second evaluation.
fn run_values<T: parki_dist::SolverReal>(
    opts: &EwaldOptions,
    prob: &Problem,
) -> (EwaldSolver<T>, Evaluation, f64, Vec<T>) {
    let kernel = opts.kernel;
    let t = Instant::now();
    let mut solver = EwaldSolver::<T>::new(opts, prob.pos.len(), prob.pos.len()).expect("plan");
    let plan = t.elapsed().as_secs_f64();
    let narrowed = prob.narrowed::<T>();
    let src = narrowed.sources();
    let mut u = vec![T::ZERO; prob.pos.len() * kernel.output_dim()];
    solver.evaluate(&src, Targets::Sources, &mut u).expect("evaluate");
    let ev = solver.evaluate(&src, Targets::Sources, &mut u).expect("evaluate");
    (solver, ev, plan, u)
}

/// `parki-bench pair-accuracy`: see [`Cmd::PairAccuracy`]. P2P is compared per pair (a plan
/// with cheaper pairs may pick another xi at the same cut-off, hence another cut-off sphere).
fn pair_accuracy(n: usize, tols: &[f64], kernels: &[Kernel], rounds: usize, threads: usize) {
    let isa = Isa::detect();
    println!(
        "## P2P's pair functions: the tolerance's accuracy against the full ones ({threads} threads, {}, N = {n:.0e}, uniform, f64, medians of {rounds} alternating rounds)\n",
        isa.name()
    );
    println!("| kernel | tol | accuracy | flops/pair full / acc | P2P ns/pair full / acc | per pair | values' difference (same rc, P) | eval full s | eval acc s (own plan) | eval ratio |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let prob = Problem::uniform(n, 2);
    let src = prob.sources();
    for &kernel in kernels {
        for &tol in tols {
            let acc = PairAccuracy::for_tolerance(tol, 8);
            if acc == PairAccuracy::Full {
                println!("| {} | {tol:.0e} | full | | | | | | | |", kernel.name());
                continue;
            }
            let base = EwaldOptions::new(kernel, prob.domain, tol).threads(threads);
            let (mut full, _, _, uf) = run_values::<f64>(&base.clone().pair_accuracy(PairAccuracy::Full), &prob);
            let p = full.params().clone();
            let same = base.clone().pair_accuracy(acc).rc(Some(p.rc)).window_support(Some(p.p));
            let (_, _, _, ua) = run_values::<f64>(&same, &prob);
            let num: f64 = ua.iter().zip(&uf).map(|(a, b)| (a - b).powi(2)).sum();
            let den: f64 = uf.iter().map(|b| b * b).sum();
            let diff = (num / den).sqrt();
            let (mut own, _, _) = run_with::<f64>(&base.clone().pair_accuracy(acc), &prob);
            let mut u = vec![0.0; n * kernel.output_dim()];
            let (mut pf, mut pa, mut tf, mut ta) = (vec![], vec![], vec![], vec![]);
            for _ in 0..rounds {
                let e = full.evaluate(&src, Targets::Sources, &mut u).expect("evaluate");
                pf.push(e.times.get(Stage::P2P) / e.pairs.max(1) as f64 * 1e9);
                tf.push(e.times.total());
                let e = own.evaluate(&src, Targets::Sources, &mut u).expect("evaluate");
                pa.push(e.times.get(Stage::P2P) / e.pairs.max(1) as f64 * 1e9);
                ta.push(e.times.total());
            }
            let median = |v: &[f64]| parki_app::report::EvaluationTimes::new(v).median();
            let (pf, pa, tf, ta) = (median(&pf), median(&pa), median(&tf), median(&ta));
            println!(
                "| {} | {tol:.0e} | {} | {:.0} / {:.0} | {pf:.3} / {pa:.3} | **{:.3}** | {diff:.1e} | {tf:.3} | {ta:.3} | **{:.3}** |",
                kernel.name(),
                acc.name(),
                P2pFlops::per_pair_at::<f64>(kernel, isa, PairAccuracy::Full),
                P2pFlops::per_pair_at::<f64>(kernel, isa, acc),
                pa / pf,
                ta / tf
            );
        }
    }
}

fn throughput(
    ns: &[usize],
    tols: &[f64],
    kernels: &[Kernel],
    threads: usize,
    sample: usize,
    direct_max: usize,
    single: bool,
) {
    println!(
        "## Throughput ({} threads, {}, uniform particles in the unit cube, targets = sources)\n",
        threads,
        if single { "f32" } else { "f64" }
    );
    println!("| kernel | N | tol | P2P | P2G | FFT | CNV | IFFT | G2P | prep | total s | particles/s | est. error | P | grid | direct s | speed-up |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for &n in ns {
        let prob = Problem::uniform(n, 1);
        for &kernel in kernels {
            // O(N^2) direct sum, timed on a sample of targets (linear in the targets)
            let direct = if n <= direct_max {
                let k = sample.min(n);
                let t = Instant::now();
                let _ = parki_reference::direct::free_space_sum(kernel, &prob.sources(), &prob.pos[..k]);
                Some(t.elapsed().as_secs_f64() * n as f64 / k as f64)
            } else {
                None
            };
            for &tol in tols {
                let (s, ev, _) = if single {
                    run_dyn::<f32>(kernel, tol, threads, &prob)
                } else {
                    run_dyn::<f64>(kernel, tol, threads, &prob)
                };
                let total = ev.times.total();
                let g = s.grid;
                let stage = |st| ev.times.get(st);
                println!(
                    "| {} | {:.0e} | {:.0e} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3e} | {:.1e} | {} | {}x{}x{} | {} | {} |",
                    kernel.name(), n as f64, tol,
                    stage(Stage::P2P), stage(Stage::P2G), stage(Stage::FFT), stage(Stage::CNV), stage(Stage::IFFT), stage(Stage::G2P), stage(Stage::Prepare),
                    total, n as f64 / total, s.estimate, s.p, g[0], g[1], g[2],
                    direct.map(|d| format!("{d:.1}")).unwrap_or_else(|| "-".into()),
                    direct.map(|d| format!("{:.0}x", d / total)).unwrap_or_else(|| "-".into()),
                );
            }
        }
    }
}

struct Summary {
    grid: [usize; 3],
    p: usize,
    estimate: f64,
}

fn run_dyn<T: parki_dist::SolverReal>(
    kernel: Kernel,
    tol: f64,
    threads: usize,
    prob: &Problem,
) -> (Summary, Evaluation, f64) {
    let (s, ev, plan) = run::<T>(kernel, tol, threads, prob);
    let p = s.params();
    (Summary { grid: p.grid, p: p.p, estimate: p.estimate.total }, ev, plan)
}

fn p2p_peak(n: usize, tol: f64, threads: usize) {
    let isa = Isa::detect();
    let peak64 = peak::fma_peak::<f64>(isa, threads);
    let peak32 = peak::fma_peak::<f32>(isa, threads);
    println!("## P2P rate against peak ({threads} threads, {}, N = {n:.0e}, tol {tol:.0e})\n", isa.name());
    println!("FMA-loop peak, same cores: FP64 {:.1} GFLOP/s, FP32 {:.1} GFLOP/s\n", peak64 / 1e9, peak32 / 1e9);
    println!("| kernel | precision | pairs | flops/pair | P2P s | GFLOP/s | fraction of peak | targets/s |");
    println!("|---|---|---|---|---|---|---|---|");
    let prob = Problem::uniform(n, 2);
    for kernel in Kernel::ALL {
        for single in [false, true] {
            let tol = if single { tol.max(1e-6) } else { tol };
            let (ev, flops, peak, name) = if single {
                let (_, ev, _) = run::<f32>(kernel, tol, threads, &prob);
                (ev, P2pFlops::per_pair::<f32>(kernel, isa), peak32, "f32")
            } else {
                let (_, ev, _) = run::<f64>(kernel, tol, threads, &prob);
                // the flops of the pair functions the tolerance takes (medium from 1e-10)
                let acc = PairAccuracy::for_tolerance(tol, 8);
                (ev, P2pFlops::per_pair_at::<f64>(kernel, isa, acc), peak64, "f64")
            };
            let t = ev.times.get(Stage::P2P);
            let rate = ev.pairs as f64 * flops / t;
            println!(
                "| {} | {} | {:.3e} | {:.0} | {:.3} | {:.1} | {:.0}% | {:.3e} |",
                kernel.name(),
                name,
                ev.pairs as f64,
                flops,
                t,
                rate / 1e9,
                100.0 * rate / peak,
                n as f64 / t
            );
        }
    }
}

/// The constants of `parki_farfield::CostModel` on one thread: `parki-dist calibrate`'s
/// measurement (`parki_app::calibrate::measure`), printed as the built-in defaults are written.
fn calibrate(n: usize) {
    println!("## Cost-model calibration (1 thread, N = {n:.0e}, unit cube, uniform, f64)\n");
    let cal = parki_app::calibrate::measure(1, n, &mut |line: &str| println!("- {line}")).expect("calibration");
    let c = cal.cost;
    let four = |v: &[f64; 4]| format!("[{:.2}, {:.2}, {:.2}, {:.2}]", v[0], v[1], v[2], v[3]);
    println!(
        "\nCostModel {{ p2p_pair: {}, p2g: {}, fft: {:.2}, cnv: {:.1}, g2p: {}, plan_tables: {:.2}, plan_touch: {:.2} }} (ns)",
        four(&c.p2p_pair),
        four(&c.p2g),
        c.fft,
        c.cnv,
        four(&c.g2p),
        c.plan_tables,
        c.plan_touch
    );
}

fn rel(a: &[f64], b: &[f64]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den).sqrt()
}

fn error_model(kernel: Kernel, tol: f64, n: usize, rc: f64, threads: usize) {
    let domain = Domain::triply_periodic([1.0, 1.2, 0.9]).expect("box");
    let make = |seed: u64| {
        let mut rng = Rng::new(seed);
        let pos = generate::positions(&domain, Distribution::Uniform, n, &mut rng);
        let q = generate::neutral_scalars(n, &mut rng);
        let f = generate::neutral_vectors(n, &mut rng);
        let d = generate::normal_vectors(n, &mut rng);
        let nrm: Vec<[f64; 3]> = (0..n).map(|_| generate::unit_vector(&mut rng)).collect();
        Problem { domain, pos, q, f, d, nrm }
    };
    let prob = make(31);
    let other = make(99).pos;
    let reference = parki_reference::ClassicalEwald::new(domain, n, n);
    let at_sources = reference.evaluate(kernel, &prob.sources(), &prob.pos);
    let at_other = reference.evaluate(kernel, &prob.sources(), &other);
    let measure = |o: &EwaldOptions| {
        let mut s = EwaldSolver::<f64>::new(o, n, n).expect("plan");
        let mut u = vec![0.0; n * kernel.output_dim()];
        s.evaluate(&prob.sources(), Targets::Sources, &mut u).expect("evaluate");
        let mut v = vec![0.0; n * kernel.output_dim()];
        s.evaluate(&prob.sources(), Targets::Points(&other), &mut v).expect("evaluate");
        (rel(&u, &at_sources), rel(&v, &at_other), s.params().clone())
    };
    println!("## Error model against measurements: {}, {n} uniform particles, box 1 x 1.2 x 0.9\n", kernel.name());
    println!("Measured: relative RMS error against the classical Ewald sum, at the sources (self) and at {n} other points.\n");
    println!("| setting | P | grid | measured self | measured other | est. near | est. Fourier | est. window | est. self | est. total |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let row = |label: String, o: &EwaldOptions| {
        let (a, b, p) = measure(o);
        let e = p.estimate;
        println!(
            "| {label} | {} | {}x{}x{} | {a:.2e} | {b:.2e} | {:.1e} | {:.1e} | {:.1e} | {:.1e} | {:.1e} |",
            p.p, p.grid[0], p.grid[1], p.grid[2], e.near, e.fourier, e.window, e.self_interaction, e.total
        );
    };
    let mut o = EwaldOptions::new(kernel, domain, tol);
    o.threads = threads;
    row(format!("automatic, tol {tol:.0e}"), &o);
    // window sweep: the other terms made small (tight tolerance for xi and the grid)
    for p in [4usize, 6, 8, 10, 12, 14] {
        let mut o = EwaldOptions::new(kernel, domain, tol * 1e-3);
        o.threads = threads;
        o.rc = Some(rc);
        o.window_support = Some(p);
        o.oversampling = Some(2.0);
        o.enforce_tolerance = false;
        row(format!("rc {rc}, sigma 2, P {p}"), &o);
    }
    // oversampling sweep at a generous window: Fourier and self-interaction terms
    for sigma in [1.0, 1.1, 1.2, 1.35, 1.5] {
        let mut o = EwaldOptions::new(kernel, domain, tol);
        o.threads = threads;
        o.rc = Some(rc);
        o.window_support = Some(16);
        o.oversampling = Some(sigma);
        o.enforce_tolerance = false;
        row(format!("rc {rc}, P 16, sigma {sigma}"), &o);
    }
}

fn main() {
    let cli = Cli::parse();
    let t = threads(cli.threads);
    match cli.command {
        Cmd::Throughput { n, tol, kernel, direct_sample, direct_max_n, f32 } => {
            let kernels: Vec<Kernel> = kernel.iter().map(|k| Kernel::from_name(k).expect("kernel name")).collect();
            throughput(&n, &tol, &kernels, t, direct_sample, direct_max_n, f32);
        }
        Cmd::P2pPeak { n, tol } => p2p_peak(n, tol, t),
        Cmd::Calibrate { n } => calibrate(n),
        Cmd::PairAccuracy { n, tol, kernel, rounds } => {
            let kernels: Vec<Kernel> = kernel.iter().map(|k| Kernel::from_name(k).expect("kernel name")).collect();
            pair_accuracy(n, &tol, &kernels, rounds.max(1), t)
        }
        Cmd::ExactPositions { n, tol, kernel, rounds } => {
            let kernels: Vec<Kernel> = kernel.iter().map(|k| Kernel::from_name(k).expect("kernel name")).collect();
            exact::exact_positions(&n, tol, &kernels, rounds.max(1), t)
        }
        Cmd::ErrorModel { kernel, tol, n, rc } => {
            error_model(Kernel::from_name(&kernel).expect("kernel name"), tol, n, rc, t)
        }
    }
}
