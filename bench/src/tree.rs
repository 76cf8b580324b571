//! Treecode benchmark: one BLDTT evaluation per (cloud, N, degree, theta, leaf) with its
//! per-stage times, interaction counts and kernel evaluations, the relative l2 error (the
//! paper's eq. (22)) on sampled targets against the direct sum, and the ratio to the direct
//! sum's time, measured in the same process on those samples and scaled to every target.
//!
//! ```text
//! parki-bench-tree --n 100000,1000000 --degree 8 --theta 0.7 --leaf 2000
//! ```
//!
//! Each run prints a table row and a JSON line (prefixed `json `) for the scripts.

use std::time::Instant;

use clap::Parser;
use parki_core::isa::Isa;
use parki_core::timing::StageKind;
use parki_core::Par;
use parki_reference::generate::{particle_rng, Cloud};
use parki_treecode::direct::{direct_sum, relative_l2};
use parki_treecode::{evaluate_kernel, TreeKernel, TreeStage, TreecodeParams};

#[derive(Parser)]
#[command(name = "parki-bench-tree", about = "BLDTT treecode: time, lists, accuracy against the direct sum")]
struct Cli {
    /// Source counts (the targets are the sources unless --targets is given).
    #[arg(long, value_delimiter = ',', default_value = "100000")]
    n: Vec<usize>,
    /// Target count (a second cloud of the same kind, another seed); 0: the sources.
    #[arg(long, default_value_t = 0)]
    targets: usize,
    /// Clouds: uniform, gaussian, plummer, slab, rod, shell.
    #[arg(long, value_delimiter = ',', default_value = "uniform")]
    cloud: Vec<String>,
    /// Kernel: laplace, yukawa, regularized-coulomb, regularized-yukawa, sin-over-r, stokeslet,
    /// stresslet, stokes.
    #[arg(long, default_value = "laplace")]
    kernel: String,
    /// Yukawa screening.
    #[arg(long, default_value_t = 0.5)]
    kappa: f64,
    /// Regularisation.
    #[arg(long, default_value_t = 0.005)]
    epsilon: f64,
    /// Wavenumber of sin(kr)/r.
    #[arg(long, default_value_t = std::f64::consts::PI)]
    wavenumber: f64,
    /// Interpolation degrees.
    #[arg(long, value_delimiter = ',', default_value = "8")]
    degree: Vec<usize>,
    /// MAC parameters.
    #[arg(long, value_delimiter = ',', default_value = "0.7")]
    theta: Vec<f64>,
    /// Source leaf sizes (the target batch is the same).
    #[arg(long, value_delimiter = ',', default_value = "2000")]
    leaf: Vec<usize>,
    /// Targets sampled for the error and the direct sum's time.
    #[arg(long, default_value_t = 1000)]
    sample: usize,
    /// Evaluations per setting (the fastest is reported).
    #[arg(long, default_value_t = 1)]
    repeat: usize,
    /// Threads (0: all cores).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Seed of the clouds.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn main() {
    let cli = Cli::parse();
    let threads =
        if cli.threads == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { cli.threads };
    rayon::ThreadPoolBuilder::new().num_threads(threads).build_global().expect("rayon pool");
    let par = Par::with_threads(threads);
    let isa = Isa::detect();
    let kernel =
        TreeKernel::from_name(&cli.kernel, Some(cli.kappa), Some(cli.epsilon), Some(cli.wavenumber)).expect("kernel");
    println!(
        "# parki-bench-tree: kernel {}, {} threads, isa {}; times in s, E = relative l2 error on {} sampled targets",
        kernel.name(),
        threads,
        isa.name(),
        cli.sample
    );
    println!(
        "{:>9} {:>8} {:>3} {:>5} {:>5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9}",
        "cloud",
        "N",
        "n",
        "theta",
        "leaf",
        "tree",
        "upward",
        "travers",
        "compute",
        "downward",
        "total",
        "E",
        "direct/x"
    );
    for cloud in &cli.cloud {
        let cloud = Cloud::from_name(cloud, "--cloud").expect("cloud");
        for &n in &cli.n {
            let sources = cloud.points(cli.seed, 0..n);
            let targets = if cli.targets == 0 { sources.clone() } else { cloud.points(cli.seed + 1, 0..cli.targets) };
            let w = kernel.input_width();
            let inputs: Vec<f64> = (0..n)
                .flat_map(|j| {
                    let mut g = particle_rng(cli.seed ^ 0xc4a7, j as u64);
                    (0..w).map(move |_| g.normal())
                })
                .collect();
            let step = (targets.len() / cli.sample.max(1)).max(1);
            let sample: Vec<usize> = (0..targets.len()).step_by(step).collect();
            let clock = Instant::now();
            let reference = direct_sum(kernel, &sources, &inputs, &targets, &sample);
            let direct_all = clock.elapsed().as_secs_f64() * targets.len() as f64 / sample.len() as f64;
            for &degree in &cli.degree {
                for &theta in &cli.theta {
                    for &leaf in &cli.leaf {
                        let params = TreecodeParams { degree, theta, max_leaf: leaf, max_batch: leaf };
                        let mut best: Option<(f64, Vec<f64>, parki_treecode::TreecodeStats)> = None;
                        for _ in 0..cli.repeat.max(1) {
                            let clock = Instant::now();
                            let (u, stats) = evaluate_kernel(kernel, &params, &sources, &inputs, &targets, par, isa)
                                .expect("evaluate");
                            let t = clock.elapsed().as_secs_f64();
                            if best.as_ref().is_none_or(|b| t < b.0) {
                                best = Some((t, u, stats));
                            }
                        }
                        let (total, u, stats) = best.expect("one run");
                        let e = relative_l2(&u, kernel.value_width(), &sample, &reference);
                        let st = |s: TreeStage| stats.times.get(s);
                        println!(
                            "{:>9} {:>8} {:>3} {:>5} {:>5} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>10.3e} {:>9.1}",
                            cloud.name(),
                            n,
                            degree,
                            theta,
                            leaf,
                            st(TreeStage::TreeBuild),
                            st(TreeStage::Upward),
                            st(TreeStage::Traversal),
                            st(TreeStage::ComputeLocal),
                            st(TreeStage::Downward),
                            total,
                            e,
                            direct_all / total
                        );
                        let stages: Vec<String> =
                            TreeStage::ALL.iter().map(|&s| format!("\"{}\": {:.6}", s.name(), st(s))).collect();
                        println!(
                            "json {{\"cloud\": \"{}\", \"kernel\": \"{}\", \"n\": {}, \"m\": {}, \"degree\": {}, \"theta\": {}, \"leaf\": {}, \"threads\": {}, \"total_s\": {:.6}, \"error\": {:.6e}, \"direct_s\": {:.6}, \"lists\": {:?}, \"evaluations\": {:?}, \"stages\": {{{}}}}}",
                            cloud.name(),
                            kernel.name(),
                            n,
                            targets.len(),
                            degree,
                            theta,
                            leaf,
                            threads,
                            total,
                            e,
                            direct_all,
                            stats.interactions,
                            stats.evaluations,
                            stages.join(", ")
                        );
                    }
                }
            }
        }
    }
}
