//! FMM benchmark: one Laplace FMM evaluation (potential and gradient) per (cloud, N, order,
//! leaf), with its per-stage times (the columns of the paper's Table 8), the M2L and P2P
//! counts, the relative l2 errors of the potential and the gradient on sampled targets against
//! the direct sum, and the ratio to the direct sum's time measured in the same process on those
//! samples and scaled to every target.
//!
//! On several ranks (`mpirun`), each rank passes its block of rows to the distributed FMM
//! (Morton partition, shared boxes, LET); times are the maximum over ranks and the errors are
//! of the values in the caller's order.
//!
//! ```text
//! parki-bench-fmm --n 100000,1000000 --order 8,12 --leaf 64
//! mpirun -n 2 parki-bench-fmm --n 1000000 --tolerance 1e-6 --threads 1   # bench/fmm_scaling.sh
//! ```
//!
//! Each run prints a table row and a JSON line (prefixed `json `) for the scripts.

use std::time::Instant;

use clap::Parser;
use parki_app::npy;
use parki_comm::{ReduceOp, Universe};
use parki_core::isa::Isa;
use parki_core::timing::StageKind;
use parki_core::Par;
use parki_decomp::split_range;
use parki_fmm::cost::CostModel;
use parki_fmm::traversal::TraversalParams;
use parki_fmm::{
    evaluate_distributed, evaluate_f32, evaluate_stokeslet_distributed, FmmKernel, FmmOutput, FmmParams, FmmStage,
    Precision,
};
use parki_nearfield::free::{laplace, FreeSources};
use parki_reference::generate::{particle_rng, Cloud};
use parki_treecode::direct::direct_sum;
use parki_treecode::TreeKernel;
use rayon::prelude::{IntoParallelRefIterator, ParallelIterator};

#[derive(Parser)]
#[command(name = "parki-bench-fmm", about = "Laplace FMM: time per stage, accuracy against the direct sum")]
struct Cli {
    /// The kernel: laplace (potential and gradient) or stokeslet (the velocity of standard
    /// normal forces through four harmonic FMMs; its error is reported as E_pot).
    #[arg(long, default_value = "laplace")]
    kernel: String,
    /// Source counts (the targets are the sources).
    #[arg(long, value_delimiter = ',', default_value = "100000")]
    n: Vec<usize>,
    /// Clouds: uniform, gaussian, plummer, slab, rod, shell.
    #[arg(long, value_delimiter = ',', default_value = "uniform")]
    cloud: Vec<String>,
    /// Expansion orders p (default 8 unless --tolerance is given).
    #[arg(long, value_delimiter = ',')]
    order: Vec<usize>,
    /// Leaf sizes (0: chosen by the cost model).
    #[arg(long, value_delimiter = ',', default_value = "0")]
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
    /// The standard 189-box interaction list instead of the modified stencil.
    #[arg(long)]
    no_stencil: bool,
    /// Every M2L at the full order (no eq. (24)).
    #[arg(long)]
    fixed_order: bool,
    /// Charges uniform in (0, 1) as in the paper (default: standard normal).
    #[arg(long)]
    positive: bool,
    /// Orders from these tolerances (the tolerance table; added to --order).
    #[arg(long, value_delimiter = ',')]
    tolerance: Vec<f64>,
    /// Sources (= targets) and charges from a file of little-endian f64 rows `x y z q` instead
    /// of a cloud (a peer's points: bench/fmm_vs_fmm3d.sh).
    #[arg(long)]
    points: Option<std::path::PathBuf>,
    /// The near field's arithmetic: f64 or f32 (the expansions stay in f64).
    #[arg(long, default_value = "f64")]
    precision: String,
    /// The round-off benchmark (digest §8.4): positions and charges rounded to f32, the FMM in
    /// f32 at each order against the f32 direct sum (sequential per target, and 16-lane
    /// vectorised), both against the f64 direct sum of the same data, at each N.
    #[arg(long)]
    roundoff: bool,
    /// Write the first --n and --cloud set, moved into the box `[0, L)` (`L` its extent), as
    /// `x.npy`, `q.npy` (normal charges) and `f.npy` (normal forces) into this folder, and the
    /// box as `box.txt`, then exit (inputs for `parki-dist run`: bench/auto_choice.sh).
    #[arg(long)]
    write_points: Option<std::path::PathBuf>,
    /// Print the cost model's unit costs measured on this machine (one thread) at each order
    /// and the built-in CPU model, then exit.
    #[arg(long)]
    calibrate: bool,
    /// Time the tree build's parts per --n and --cloud at the first order (the Morton sort, the
    /// leaf choice, the tree), the leaf choice both ways in the same process (the candidates
    /// priced in one walk, `choose_leaf`, against their trees built one by one on the
    /// threads), and the tree taken from the sorted points against copied; then exit.
    #[arg(long)]
    leaf_choice: bool,
}

/// Direct potential and gradient at the sampled targets.
fn direct(x: &[[f64; 3]], q: &[f64], sample: &[usize]) -> Vec<[f64; 4]> {
    sample
        .par_iter()
        .map(|&j| {
            let y = x[j];
            let mut acc = [0.0; 4];
            for (xi, &qi) in x.iter().zip(q) {
                let d = [y[0] - xi[0], y[1] - xi[1], y[2] - xi[2]];
                let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
                if r2 > 0.0 {
                    let r = r2.sqrt();
                    acc[0] += qi / r;
                    for a in 0..3 {
                        acc[a + 1] -= qi * d[a] / (r2 * r);
                    }
                }
            }
            acc
        })
        .collect()
}

/// The relative l2 errors of the potential and the gradient at the sampled targets
/// (`values[k]`: sample `k`'s `[phi, grad]`).
fn errors(values: &[[f64; 4]], reference: &[[f64; 4]]) -> (f64, f64) {
    let (mut ep, mut np, mut eg, mut ng) = (0.0, 0.0, 0.0, 0.0);
    for (r, v) in reference.iter().zip(values) {
        ep += (v[0] - r[0]).powi(2);
        np += r[0] * r[0];
        for a in 0..3 {
            eg += (v[a + 1] - r[a + 1]).powi(2);
            ng += r[a + 1] * r[a + 1];
        }
    }
    ((ep / np).sqrt(), (eg / ng).sqrt())
}

fn main() {
    let cli = Cli::parse();
    let universe = Universe::init().expect("MPI at MPI_THREAD_SERIALIZED");
    let comm = universe.world();
    let (rank, ranks) = (comm.rank(), comm.size());
    let say = |line: String| {
        if rank == 0 {
            println!("{line}");
        }
    };
    let threads =
        if cli.threads == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { cli.threads };
    rayon::ThreadPoolBuilder::new().num_threads(threads).build_global().expect("rayon pool");
    let par = Par::with_threads(threads);
    let isa = Isa::detect();
    if cli.calibrate {
        println!("# unit costs (s per pair, per p^3 translation, per point-coefficient), one thread, isa {isa:?}");
        println!("built-in {:?}", CostModel::cpu());
        for &p in &cli.order {
            let m =
                (0..3).map(|_| CostModel::measure(isa, p)).min_by(|a, b| a.translation_p2.total_cmp(&b.translation_p2));
            println!("p {p:>2}: {:?}", m.expect("three measurements"));
        }
        return;
    }
    if cli.leaf_choice {
        leaf_choice(&cli, par);
        return;
    }
    let precision = match cli.precision.as_str() {
        "f64" => Precision::F64,
        "f32" => Precision::F32,
        other => panic!("--precision {other}: f64 or f32"),
    };
    if let Some(dir) = &cli.write_points {
        write_points(&cli, dir);
        return;
    }
    if cli.roundoff {
        roundoff(&cli, isa, par);
        return;
    }
    say(format!(
        "# parki-bench-fmm: {ranks} rank(s) x {threads} threads, isa {isa:?}, stencil {}, variable order {}; times in s (max over ranks), errors relative l2 (potential, gradient)",
        !cli.no_stencil, !cli.fixed_order
    ));
    let stages: Vec<&str> = FmmStage::ALL.iter().map(|s| s.name()).collect();
    say(format!(
        "{:>9} {:>9} {:>3} {:>5} {:>8} {:>9} {:>9} {:>10} {:>6} {} {:>9}",
        "cloud",
        "N",
        "p",
        "leaf",
        "total",
        "E_pot",
        "E_grad",
        "M2L",
        "work",
        stages.join(" | "),
        "direct/x"
    ));
    let kernel = match cli.kernel.as_str() {
        "laplace" => FmmKernel::Laplace,
        "stokeslet" => FmmKernel::Stokeslet,
        other => panic!("--kernel {other}: laplace or stokeslet"),
    };
    let mut orders = if cli.order.is_empty() && cli.tolerance.is_empty() { vec![8] } else { cli.order.clone() };
    for &tol in &cli.tolerance {
        let (p, _) = parki_fmm::for_tolerance_of(kernel, tol, true).expect("--tolerance in [1e-12, 1)");
        say(format!("# tolerance {tol:e}: order {p}"));
        orders.push(p);
    }
    let file = cli.points.as_ref().map(|path| {
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("--points {}: {e}", path.display()));
        let v: Vec<f64> = bytes.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes"))).collect();
        let x: Vec<[f64; 3]> = v.chunks_exact(4).map(|r| [r[0], r[1], r[2]]).collect();
        let q: Vec<f64> = v.chunks_exact(4).map(|r| r[3]).collect();
        (x, q)
    });
    let clouds: Vec<String> = if file.is_some() { vec!["file".into()] } else { cli.cloud.clone() };
    let sizes: Vec<usize> = file.as_ref().map_or(cli.n.clone(), |f| vec![f.0.len()]);
    for cloud_name in &clouds {
        for &n in &sizes {
            let (x, mut q) = match &file {
                Some((x, q)) => (x.clone(), q.clone()),
                None => {
                    let cloud = Cloud::from_name(cloud_name, "--cloud").expect("cloud");
                    let x = cloud.points(cli.seed, 0..n);
                    let q: Vec<f64> = (0..n)
                        .map(|j| {
                            let mut g = particle_rng(cli.seed ^ 0xc4a7, j as u64);
                            if cli.positive {
                                g.uniform()
                            } else {
                                g.normal()
                            }
                        })
                        .collect();
                    (x, q)
                }
            };
            // the Stokeslet's forces: the charges and two more standard normal components
            let forces: Vec<[f64; 3]> = match kernel {
                FmmKernel::Laplace => Vec::new(),
                FmmKernel::Stokeslet => (0..n)
                    .map(|j| {
                        let mut g = particle_rng(cli.seed ^ 0x5f0c, j as u64);
                        [q[j], g.normal(), g.normal()]
                    })
                    .collect(),
            };
            if kernel == FmmKernel::Stokeslet {
                q.clear();
            }
            let step = (n / cli.sample.max(1)).max(1);
            let sample: Vec<usize> = (0..n).step_by(step).collect();
            // the direct sum on rank 0 (its time is the baseline of the ratio)
            let clock = Instant::now();
            let reference = match (rank, kernel) {
                (0, FmmKernel::Laplace) => direct(&x, &q, &sample),
                (0, FmmKernel::Stokeslet) => {
                    // the treecode's reference direct sum: [u_x, u_y, u_z] per sample, padded
                    direct_sum(TreeKernel::Stokeslet, &x, &forces.concat(), &x, &sample)
                        .chunks_exact(3)
                        .map(|u| [u[0], u[1], u[2], 0.0])
                        .collect()
                }
                _ => Vec::new(),
            };
            let direct_all = clock.elapsed().as_secs_f64() * n as f64 / sample.len() as f64;
            let rows = split_range(n, ranks, rank);
            for &order in &orders {
                for &leaf in &cli.leaf {
                    let mut params = FmmParams::new(order, (leaf > 0).then_some(leaf));
                    params.precision = precision;
                    params.traversal = TraversalParams {
                        stencil: !cli.no_stencil,
                        variable_order: !cli.fixed_order,
                        ..TraversalParams::default()
                    };
                    let mut best: Option<(f64, FmmOutput)> = None;
                    for _ in 0..cli.repeat.max(1) {
                        comm.barrier();
                        let clock = Instant::now();
                        let out = match kernel {
                            FmmKernel::Laplace => {
                                evaluate_distributed(&comm, &x[rows.clone()], &q[rows.clone()], None, &params, isa, par)
                                    .expect("fmm")
                            }
                            FmmKernel::Stokeslet => {
                                let o = evaluate_stokeslet_distributed(
                                    &comm,
                                    &x[rows.clone()],
                                    &forces[rows.clone()],
                                    None,
                                    &params,
                                    isa,
                                    par,
                                )
                                .expect("fmm");
                                // the velocity in the potential's place (see `errors`)
                                let (potential, gradient) =
                                    o.velocity.iter().map(|u| (u[0], [u[1], u[2], 0.0])).unzip();
                                FmmOutput { potential, gradient, stats: o.stats }
                            }
                        };
                        let t = comm.max(clock.elapsed().as_secs_f64());
                        if best.as_ref().is_none_or(|b| t < b.0) {
                            best = Some((t, out));
                        }
                    }
                    let (total, out) = best.expect("one evaluation");
                    // the sampled values, summed from the ranks holding them
                    let mut at_sample = vec![[0.0; 4]; sample.len()];
                    for (v, &j) in at_sample.iter_mut().zip(&sample) {
                        if rows.contains(&j) {
                            let g = out.gradient[j - rows.start];
                            *v = [out.potential[j - rows.start], g[0], g[1], g[2]];
                        }
                    }
                    let mut flat: Vec<f64> = at_sample.iter().flatten().copied().collect();
                    comm.all_reduce(&mut flat, ReduceOp::Sum);
                    let at_sample: Vec<[f64; 4]> = flat.chunks_exact(4).map(|c| [c[0], c[1], c[2], c[3]]).collect();
                    let st = &out.stats;
                    let mut stage_max: Vec<f64> = FmmStage::ALL.iter().map(|&s| st.times.get(s)).collect();
                    comm.all_reduce(&mut stage_max, ReduceOp::Max);
                    let let_mb = comm.sum(st.let_tree.bytes) as f64 / 1e6;
                    if rank != 0 {
                        continue;
                    }
                    let (ep, eg) = match kernel {
                        FmmKernel::Laplace => errors(&at_sample, &reference),
                        // [u_x, u_y, u_z, 0] on both sides: the velocity's error, no gradient
                        FmmKernel::Stokeslet => {
                            let moved: Vec<[f64; 4]> = at_sample.iter().map(|v| [0.0, v[0], v[1], v[2]]).collect();
                            let refm: Vec<[f64; 4]> = reference.iter().map(|v| [0.0, v[0], v[1], v[2]]).collect();
                            (errors(&moved, &refm).1, f64::NAN)
                        }
                    };
                    let per: Vec<String> = stage_max.iter().map(|t| format!("{t:.3}")).collect();
                    println!(
                        "{:>9} {:>9} {:>3} {:>5} {:>8.3} {:>9.2e} {:>9.2e} {:>10} {:>6.3} {} {:>9.1}",
                        cloud_name,
                        n,
                        order,
                        st.max_leaf.0,
                        total,
                        ep,
                        eg,
                        st.m2l,
                        st.m2l_work,
                        per.join(" | "),
                        direct_all / total
                    );
                    let stage_json: Vec<String> = FmmStage::ALL
                        .iter()
                        .zip(&stage_max)
                        .map(|(&s, t)| format!("\"{}\": {t:.6}", s.name()))
                        .collect();
                    println!(
                        "json {{\"cloud\": \"{cloud_name}\", \"n\": {n}, \"order\": {order}, \"leaf\": {}, \"leaf_chosen\": {}, \"ranks\": {ranks}, \"threads\": {threads}, \"let_mb\": {let_mb:.3}, \
                         \"seconds\": {total:.6}, \"error_potential\": {ep:.4e}, \"error_gradient\": {eg:.4e}, \"m2l\": {}, \
                         \"m2l_work\": {:.4}, \"p2p_pairs\": {}, \"boxes\": {}, \"depth\": {}, \"direct_seconds\": {direct_all:.3}, \
                         \"stages\": {{{}}}}}",
                        st.max_leaf.0,
                        st.max_leaf.1,
                        st.m2l,
                        st.m2l_work,
                        st.p2p[1],
                        st.boxes[0],
                        st.depth[0],
                        stage_json.join(", ")
                    );
                }
            }
        }
    }
}

/// The round-off benchmark (see `--roundoff`): prints, per N, the relative l2 errors of the
/// potential of the f32 direct sums and of the f32 FMM at each order.
fn roundoff(cli: &Cli, isa: Isa, par: Par) {
    let orders = if cli.order.is_empty() { vec![4, 8, 12, 16, 20] } else { cli.order.clone() };
    println!(
        "# round-off: f32 data, relative l2 error of the potential against the f64 direct sum of the same data at \
         {} sampled targets; charges {}",
        cli.sample,
        if cli.positive { "U(0, 1)" } else { "N(0, 1)" }
    );
    let heads: Vec<String> = orders.iter().map(|p| format!("FMM p={p}")).collect();
    println!("{:>9} {:>9} {:>12} {:>12} {}", "cloud", "N", "direct seq", "direct simd", heads.join(" "));
    for cloud_name in &cli.cloud {
        let cloud = Cloud::from_name(cloud_name, "--cloud").expect("cloud");
        for &n in &cli.n {
            let x: Vec<[f32; 3]> = cloud.points(cli.seed, 0..n).iter().map(|p| p.map(|v| v as f32)).collect();
            let q: Vec<f32> = (0..n)
                .map(|j| {
                    let mut g = particle_rng(cli.seed ^ 0xc4a7, j as u64);
                    (if cli.positive { g.uniform() } else { g.normal() }) as f32
                })
                .collect();
            let x64: Vec<[f64; 3]> = x.iter().map(|p| p.map(f64::from)).collect();
            let q64: Vec<f64> = q.iter().map(|&v| f64::from(v)).collect();
            let step = (n / cli.sample.max(1)).max(1);
            let sample: Vec<usize> = (0..n).step_by(step).collect();
            let reference: Vec<f64> = direct(&x64, &q64, &sample).iter().map(|r| r[0]).collect();
            let err = |v: &[f64]| -> f64 {
                let num: f64 = v.iter().zip(&reference).map(|(a, b)| (a - b).powi(2)).sum();
                let den: f64 = reference.iter().map(|b| b * b).sum();
                (num / den).sqrt()
            };
            // one target at a time, the sources in order, in f32 (a GPU thread's direct sum)
            let seq: Vec<f64> = sample
                .par_iter()
                .map(|&j| {
                    let y = x[j];
                    let mut acc = 0f32;
                    for (xi, &qi) in x.iter().zip(&q) {
                        let d = [y[0] - xi[0], y[1] - xi[1], y[2] - xi[2]];
                        let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2];
                        if r2 > 0.0 {
                            acc += qi / r2.sqrt();
                        }
                    }
                    f64::from(acc)
                })
                .collect();
            // the near-field kernel over every source: 16 lanes per target
            let src = FreeSources::<f32>::new(&x64, &q64);
            let t: [Vec<f32>; 3] = [0, 1, 2].map(|a| sample.iter().map(|&j| x[j][a]).collect());
            let mut pot = vec![0f32; sample.len()];
            laplace(isa, [&t[0], &t[1], &t[2]], &src, &[(0, n)], &mut pot, None);
            let simd: Vec<f64> = pot.iter().map(|&v| f64::from(v)).collect();
            let mut cols = Vec::new();
            for &p in &orders {
                let leaf = cli.leaf.first().copied().filter(|&l| l > 0);
                let mut params = FmmParams::new(p, leaf);
                params.gradient = false;
                let out = evaluate_f32(&x, &q, None, &params, isa, par).expect("fmm");
                let v: Vec<f64> = sample.iter().map(|&j| f64::from(out.potential[j])).collect();
                cols.push(format!("{:>8.2e}", err(&v)));
            }
            println!("{:>9} {:>9} {:>12.2e} {:>12.2e} {}", cloud_name, n, err(&seq), err(&simd), cols.join(" "));
        }
    }
}

/// See `--write-points`.
fn write_points(cli: &Cli, dir: &std::path::Path) {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let n = cli.n[0];
    let cloud = Cloud::from_name(&cli.cloud[0], "--cloud").expect("cloud");
    let mut x = cloud.points(cli.seed, 0..n);
    let [lo, hi] = parki_fmm::octree::bounds(&[&x]);
    let ext = (0..3).map(|a| hi[a] - lo[a]).fold(0.0, f64::max) * (1.0 + 1e-6);
    for p in &mut x {
        for a in 0..3 {
            p[a] = (p[a] - lo[a]).max(0.0) + 1e-9 * ext;
        }
    }
    let normals = |salt: u64, k: usize| -> Vec<f64> {
        (0..n * k).map(|i| particle_rng(cli.seed ^ salt, i as u64).normal()).collect()
    };
    let write = |name: &str, shape: &[usize], data: &[f64]| {
        npy::write(&dir.join(name), shape, data).unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    write("x.npy", &[n, 3], &x.concat());
    write("q.npy", &[n], &normals(0x51, 1));
    write("f.npy", &[n, 3], &normals(0x52, 3));
    let l = ext * (1.0 + 1e-6);
    std::fs::write(dir.join("box.txt"), format!("[{l}, {l}, {l}]\n")).expect("box.txt");
    println!("wrote {n} {} points into {} (box {l})", cli.cloud[0], dir.display());
}

/// `--leaf-choice`: the tree build's parts, and the leaf choice and the tree each two ways in
/// the same process (best of `--repeat`, at least 2).
fn leaf_choice(cli: &Cli, par: Par) {
    use parki_fmm::cost::LEAF_CANDIDATES;
    use parki_fmm::octree::SortedPoints;
    use parki_fmm::RootCube;
    let p = cli.order.first().copied().unwrap_or(8);
    let model = CostModel::cpu();
    println!("# tree build parts, p {p}, {} threads (seconds, best of the repetitions)", par.threads());
    println!(
        "cloud     N          sort     choose (one walk)  choose (one by one)  ratio  into_tree  tree (copy)  leaf"
    );
    for cloud in &cli.cloud {
        let cl = Cloud::from_name(cloud, "--cloud").expect("cloud");
        for &n in &cli.n {
            let pts = cl.points(cli.seed, 0..n);
            let best = |f: &mut dyn FnMut() -> f64| (0..cli.repeat.max(2)).map(|_| f()).fold(f64::INFINITY, f64::min);
            let time = |f: &mut dyn FnMut()| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64()
            };
            let sort = best(&mut || time(&mut || drop(SortedPoints::new(&pts, RootCube::around(&[&pts])))));
            let sorted = SortedPoints::new(&pts, RootCube::around(&[&pts]));
            let mut leaf = 0;
            let walk = best(&mut || time(&mut || leaf = model.choose_leaf(&sorted, p, 0.65, par).0));
            let mut leaf_old = 0;
            let old = best(&mut || {
                time(&mut || {
                    let est: Vec<(usize, f64)> = LEAF_CANDIDATES
                        .par_iter()
                        .map(|&l| {
                            let (counts, boxes) = sorted.leaf_counts(l);
                            (l, model.estimate(&counts, boxes, p, 0.65))
                        })
                        .collect();
                    leaf_old = parki_fmm::cost::best_leaf(&est);
                })
            });
            assert_eq!(leaf, leaf_old, "the two leaf choices differ");
            let copy = best(&mut || time(&mut || drop(sorted.tree(leaf))));
            let take = best(&mut || {
                let s = sorted.clone();
                let t = Instant::now();
                drop(s.into_tree(leaf));
                t.elapsed().as_secs_f64()
            });
            println!(
                "{cloud:<9} {n:<10} {sort:.4}   {walk:.4}             {old:.4}               {:.1}x   {take:.4}     {copy:.4}       {leaf}",
                old / walk
            );
            println!(
                "json {{\"mode\":\"leaf_choice\",\"cloud\":\"{cloud}\",\"n\":{n},\"p\":{p},\"threads\":{},\"sort\":{sort:.6},\"choose_walk\":{walk:.6},\"choose_one_by_one\":{old:.6},\"into_tree\":{take:.6},\"tree_copy\":{copy:.6},\"leaf\":{leaf}}}",
                par.threads()
            );
        }
    }
}
