//! Treecode benchmark: one BLDTT evaluation per (cloud, N, degree, theta, leaf), on one rank
//! or under `mpirun` (each rank passes its block of rows; RCB, LET), with its per-stage times
//! (max over ranks), the LET's bytes, interaction counts and kernel evaluations, the relative l2 error (the
//! paper's eq. (22)) on sampled targets against the direct sum, and the ratio to the direct
//! sum's time, measured in the same process on those samples and scaled to every target.
//!
//! ```text
//! parki-bench-tree --n 100000,1000000 --degree 8 --theta 0.7 --leaf 2000
//! mpirun -n 4 parki-bench-tree --n 1000000 --threads 1      # strong scaling: bench/tree_scaling.sh
//! parki-bench-tree --build-only --n 1000000 --leaf 2000,768  # the tree build alone, 1 vs all threads
//! ```
//!
//! Each run prints a table row and a JSON line (prefixed `json `) for the scripts.

use std::time::Instant;

use clap::Parser;
use parki_comm::{ReduceOp, StageStats, Universe};
use parki_core::isa::Isa;
use parki_core::timing::StageKind;
use parki_core::Par;
use parki_decomp::split_range;
use parki_reference::generate::{particle_rng, Cloud};
use parki_treecode::direct::{direct_sum, relative_l2};
use parki_treecode::{evaluate_kernel_distributed, TreeKernel, TreeStage, TreecodeParams, TreecodeStats};

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
    /// Sources (= targets) and charges from a file of little-endian f64 rows `x y z q` instead
    /// of a cloud (Coulomb only): a peer's points, e.g. BaryTree's (bench/barytree_side_by_side.sh).
    #[arg(long)]
    points: Option<std::path::PathBuf>,
    /// Time the tree build alone (per cloud, N and leaf): one thread against the rayon pool of
    /// --threads, in this process, best of --repeat (at least 3), then exit.
    #[arg(long)]
    build_only: bool,
}

/// `--build-only`: `Tree::build` (one thread) against `Tree::build_with` on the pool, the same
/// points, alternating, best of `repeat`; the trees must be equal.
fn build_only(cli: &Cli, par: Par) {
    use parki_treecode::{Tree, TreeParams};
    println!("# tree build alone: one thread against {} threads, best of {}", par.threads(), cli.repeat.max(3));
    for cloud_name in &cli.cloud {
        let cloud = Cloud::from_name(cloud_name, "--cloud").expect("cloud");
        for &n in &cli.n {
            let pts = cloud.points(cli.seed, 0..n);
            for &leaf in &cli.leaf {
                let p = TreeParams { max_leaf: leaf };
                let (mut seq, mut pool) = (f64::MAX, f64::MAX);
                for _ in 0..cli.repeat.max(3) {
                    let t = Instant::now();
                    let a = Tree::build(&pts, p);
                    seq = seq.min(t.elapsed().as_secs_f64());
                    let t = Instant::now();
                    let b = Tree::build_with(&pts, p, par);
                    pool = pool.min(t.elapsed().as_secs_f64());
                    assert!(a.clusters == b.clusters && a.order == b.order, "the pool's tree differs");
                }
                println!(
                    "{cloud_name:>9} N {n:>9} leaf {leaf:>5}: one thread {seq:.4} s ({:.1} M points/s), {} threads \
                     {pool:.4} s ({:.1} M points/s), {:.2}x",
                    n as f64 / seq / 1e6,
                    par.threads(),
                    n as f64 / pool / 1e6,
                    seq / pool
                );
                println!(
                    "json {{\"mode\":\"build\",\"cloud\":\"{cloud_name}\",\"n\":{n},\"leaf\":{leaf},\"seq_s\":{seq},\
                     \"threads\":{},\"pool_s\":{pool}}}",
                    par.threads()
                );
            }
        }
    }
}

/// The rows `x y z q` of a `--points` file.
fn read_points(path: &std::path::Path) -> (Vec<[f64; 3]>, Vec<f64>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("--points {}: {e}", path.display()));
    assert!(bytes.len().is_multiple_of(32), "--points {}: {} bytes is not rows of 4 f64", path.display(), bytes.len());
    let v: Vec<f64> = bytes.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes"))).collect();
    (v.chunks_exact(4).map(|r| [r[0], r[1], r[2]]).collect(), v.chunks_exact(4).map(|r| r[3]).collect())
}

fn main() {
    let cli = Cli::parse();
    let universe = Universe::init().expect("MPI at MPI_THREAD_SERIALIZED");
    let comm = universe.world();
    let (rank, ranks) = (comm.rank(), comm.size());
    let threads =
        if cli.threads == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { cli.threads };
    rayon::ThreadPoolBuilder::new().num_threads(threads).build_global().expect("rayon pool");
    let par = Par::with_threads(threads);
    if cli.build_only {
        if rank == 0 {
            build_only(&cli, par);
        }
        return;
    }
    let isa = Isa::detect();
    let kernel =
        TreeKernel::from_name(&cli.kernel, Some(cli.kappa), Some(cli.epsilon), Some(cli.wavenumber)).expect("kernel");
    let say = |line: String| {
        if rank == 0 {
            println!("{line}");
        }
    };
    say(format!(
        "# parki-bench-tree: kernel {}, {ranks} rank(s) x {threads} threads, isa {}; times in s (max over ranks), E = \
         relative l2 error on {} sampled targets; LET MB summed over ranks",
        kernel.name(),
        isa.name(),
        cli.sample
    ));
    say(format!(
        "{:>9} {:>8} {:>3} {:>5} {:>5} {:>5} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10} {:>9} {:>8}",
        "cloud",
        "N",
        "n",
        "theta",
        "leaf",
        "ranks",
        "part",
        "tree",
        "upward",
        "travers",
        "LET",
        "local",
        "remote",
        "downward",
        "total",
        "E",
        "direct/x",
        "LET MB"
    ));
    let file = cli.points.as_deref().map(read_points);
    if file.is_some() {
        assert_eq!(kernel.input_width(), 1, "--points holds one charge per point: a scalar kernel");
    }
    let clouds: Vec<String> = if file.is_some() { vec!["file".into()] } else { cli.cloud.clone() };
    let sizes: Vec<usize> = file.as_ref().map_or(cli.n.clone(), |f| vec![f.0.len()]);
    for cloud_name in &clouds {
        let cloud = (file.is_none()).then(|| Cloud::from_name(cloud_name, "--cloud").expect("cloud"));
        for &n in &sizes {
            let w = kernel.input_width();
            let nv = kernel.value_width();
            let (sources, targets, inputs) = match (&file, cloud) {
                (Some((x, q)), _) => (x.clone(), x.clone(), q.clone()),
                (None, Some(cloud)) => {
                    let sources = cloud.points(cli.seed, 0..n);
                    let targets =
                        if cli.targets == 0 { sources.clone() } else { cloud.points(cli.seed + 1, 0..cli.targets) };
                    let inputs: Vec<f64> = (0..n)
                        .flat_map(|j| {
                            let mut g = particle_rng(cli.seed ^ 0xc4a7, j as u64);
                            (0..w).map(move |_| g.normal())
                        })
                        .collect();
                    (sources, targets, inputs)
                }
                (None, None) => unreachable!("a cloud or a file"),
            };
            let m = targets.len();
            let step = (m / cli.sample.max(1)).max(1);
            let sample: Vec<usize> = (0..m).step_by(step).collect();
            // the direct sum at the sampled targets, on rank 0 alone
            let (reference, direct_all) = if rank == 0 {
                let clock = Instant::now();
                let r = direct_sum(kernel, &sources, &inputs, &targets, &sample);
                (r, clock.elapsed().as_secs_f64() * m as f64 / sample.len() as f64)
            } else {
                (Vec::new(), 0.0)
            };
            // this rank's rows: contiguous blocks of the input order, not the partition
            let (ms, mt) = (split_range(n, ranks, rank), split_range(m, ranks, rank));
            for &degree in &cli.degree {
                for &theta in &cli.theta {
                    for &leaf in &cli.leaf {
                        let params = TreecodeParams { degree, theta, max_leaf: leaf, max_batch: leaf };
                        let mut best: Option<(f64, Vec<f64>, TreecodeStats)> = None;
                        for _ in 0..cli.repeat.max(1) {
                            comm.barrier();
                            let clock = Instant::now();
                            let (u, stats) = evaluate_kernel_distributed(
                                &comm,
                                kernel,
                                &params,
                                &sources[ms.clone()],
                                &inputs[ms.start * w..ms.end * w],
                                &targets[mt.clone()],
                                par,
                                isa,
                            )
                            .expect("evaluate");
                            let t = comm.max(clock.elapsed().as_secs_f64());
                            if best.as_ref().is_none_or(|b| t < b.0) {
                                best = Some((t, u, stats));
                            }
                        }
                        let (total, u, stats) = best.expect("one run");
                        // the sampled values, each from the rank that holds it
                        let mut fast = vec![0.0; sample.len() * nv];
                        for (k, &i) in sample.iter().enumerate() {
                            if mt.contains(&i) {
                                let l = i - mt.start;
                                fast[k * nv..(k + 1) * nv].copy_from_slice(&u[l * nv..(l + 1) * nv]);
                            }
                        }
                        comm.all_reduce_f64(&mut fast, ReduceOp::Sum);
                        let all: Vec<usize> = (0..sample.len()).collect();
                        let e = if rank == 0 { relative_l2(&fast, nv, &all, &reference) } else { 0.0 };
                        let table = StageStats::reduce(&comm, &stats.times);
                        let st = |s: TreeStage| table.rows.iter().find(|r| r.0 == s).map_or(0.0, |r| r.3);
                        let let_bytes = comm.sum(stats.let_tree.bytes);
                        let let_msgs = comm.sum(stats.let_tree.messages);
                        let interactions: Vec<u64> = stats.interactions.iter().map(|&c| comm.sum(c as u64)).collect();
                        let evaluations: Vec<u64> = stats.evaluations.iter().map(|&c| comm.sum(c)).collect();
                        say(format!(
                            "{:>9} {:>8} {:>3} {:>5} {:>5} {:>5} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>10.3e} {:>9.1} {:>8.2}",
                            cloud_name,
                            n,
                            degree,
                            theta,
                            leaf,
                            ranks,
                            st(TreeStage::Partition),
                            st(TreeStage::TreeBuild),
                            st(TreeStage::Upward),
                            st(TreeStage::Traversal),
                            st(TreeStage::Let),
                            st(TreeStage::ComputeLocal),
                            st(TreeStage::ComputeRemote),
                            st(TreeStage::Downward),
                            total,
                            e,
                            direct_all / total,
                            let_bytes as f64 / 1e6
                        ));
                        let stages: Vec<String> =
                            TreeStage::ALL.iter().map(|&s| format!("\"{}\": {:.6}", s.name(), st(s))).collect();
                        say(format!(
                            "json {{\"cloud\": \"{}\", \"kernel\": \"{}\", \"n\": {}, \"m\": {}, \"degree\": {}, \"theta\": {}, \"leaf\": {}, \"ranks\": {}, \"threads\": {}, \"total_s\": {:.6}, \"error\": {:.6e}, \"direct_s\": {:.6}, \"let_bytes\": {}, \"let_gets\": {}, \"lists\": {:?}, \"evaluations\": {:?}, \"stages_max\": {{{}}}}}",
                            cloud_name,
                            kernel.name(),
                            n,
                            m,
                            degree,
                            theta,
                            leaf,
                            ranks,
                            threads,
                            total,
                            e,
                            direct_all,
                            let_bytes,
                            let_msgs,
                            interactions,
                            evaluations,
                            stages.join(", ")
                        ));
                    }
                }
            }
        }
    }
}
