//! Distributed benchmarks, run under `mpirun` (see bench/dist_fft.sh):
//!
//! `fft`: the distributed r2c + c2r round trip of a `[mx, my, mz]` grid with `c` components,
//! ours with both switch backends against FFTW's own MPI transform (libfftw3_mpi), all three
//! planned in the same process and timed in rotating order within every repetition (so that
//! the machine's noise hits all three alike). Prints the time of each (max over ranks), the
//! ratio to FFTW-MPI, and the bytes every switch sent against the minimum a transpose must
//! move; appends one JSON line per run to `--json`.
//!
//! `r2r`: the forward + backward transform of an all-symmetric grid (DCT-II/III, DST-II/III or
//! DCT-IV along every axis: the Poisson solver's even, odd or even-odd boxes), through FFTs (Makhoul's
//! reordering, the default) against FFTW's own r2r (one 3-D plan on one rank), both planned
//! and timed in the same process in alternating order; prints both times, their ratio and the
//! largest difference between their results.
//!
//! `tables`: the free-space (0P) Ewald sum's kernel tables on each rank's block of the padded
//! spectrum, made by the ranks together (`FreeCnv::new`, the per-axis operators) against every
//! rank transforming the whole upsampled grid (`FreeCnv::new_whole_grid`, the construction
//! before), alternating in the same process; prints both times (max over ranks), their ratio,
//! the largest difference between the tables, and the peak memory of the process per rank.
//! `--only split|whole` makes one of them alone, for its memory.
//!
//! `lines`: RustFFT's complex lines by length, one thread: for each even `2^a 3^b 5^c 7^d`
//! length in `[--from, --to]`, the forward transform of contiguous lines in cache (about 512
//! KiB), the best of 3 timings; prints ns per point and `log2`, the rate over the median of the
//! lengths without a slow factor, and the cost models' weight (`parki_decomp::fft_line_work`
//! over `n log2 n`), so that the weight can be checked against the machine.
//!
//! `planes`: the Ewald grid's transform with free axes (Hockney-Eastwood padded DFTs of the
//! extended grid, `FreeGrid`), its a0 and a1 passes fused per a2 plane in cache (the default,
//! `fft3d::planes`) against the same transform pass by pass, alternating in the same process;
//! prints the forward and backward times of both, their ratio and the largest difference.
//! `--plan` sets FFTW's rigor (`estimate`, `measure-lines`, `measure`); `--against R` compares
//! the fused transform planned with `--plan` against the fused transform planned with `R`
//! instead of the passes one by one.

mod fftw_mpi;

use std::io::Write;
use std::time::Instant;

use clap::{Parser, Subcommand};
use parki_comm::{Backend, Comm, ReduceOp, Universe};
use parki_decomp::{Decomposition, ProcGrid};
use parki_fft3d::{AxisSpec, DistFft, DistFftOptions, LineEngine, PlanRigor, R2rKind, R2rMethod};
use serde_json::json;

use crate::fftw_mpi::FftwMpi;

#[derive(Parser)]
#[command(name = "parki-bench-dist", about = "Distributed benchmarks of parki-dist (run under mpirun)")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Distributed FFT round trip, both switch backends, against FFTW-MPI.
    Fft {
        /// Grid `mx,my,mz` (x fastest).
        #[arg(long, value_delimiter = ',', default_value = "256,256,256")]
        grid: Vec<usize>,
        /// Real components transformed at once.
        #[arg(long, default_value_t = 12)]
        comps: usize,
        /// Timed repetitions (after one warm-up).
        #[arg(long, default_value_t = 5)]
        reps: usize,
        /// `slab` or `pencil` (FFTW-MPI is always slab).
        #[arg(long, default_value = "slab")]
        layout: String,
        /// FFTW_MEASURE plans (ours and FFTW-MPI's) instead of FFTW_ESTIMATE (`--plan measure`).
        #[arg(long)]
        measure: bool,
        /// Our plans' rigor: estimate, measure-lines (FFTW-MPI's then estimated) or measure.
        #[arg(long, default_value = "estimate")]
        plan: String,
        /// What transforms our strided passes' complex lines: rustfft or fftw.
        #[arg(long, default_value = "rustfft")]
        lines: String,
        /// Append a JSON line with the results to this file (rank 0).
        #[arg(long)]
        json: Option<std::path::PathBuf>,
    },
    /// The 0P kernel tables: split over the ranks against the whole grid on every rank (with
    /// `--periodic`, the 1P or 2P tables, per periodic mode, alone).
    Tables {
        /// Grid points per axis over the box (a cube of side 1).
        #[arg(long, default_value_t = 180)]
        grid: usize,
        /// Window support `P`.
        #[arg(long, default_value_t = 8)]
        p: usize,
        /// Ewald splitting `xi`.
        #[arg(long, default_value_t = 67.93)]
        xi: f64,
        /// Tolerance (sets the truncation margin).
        #[arg(long, default_value_t = 1e-6)]
        tol: f64,
        /// `laplace`, `stokeslet`, `stresslet` or `stokes`.
        #[arg(long, default_value = "stokeslet")]
        kernel: String,
        /// The Laplace field's tables too.
        #[arg(long)]
        field: bool,
        /// Timed repetitions of each.
        #[arg(long, default_value_t = 2)]
        reps: usize,
        /// `split` or `whole`: make only that one.
        #[arg(long)]
        only: Option<String>,
        /// Threads per rank.
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// The periodic axes, `t` or `f` per axis (`fff`: 0P).
        #[arg(long, default_value = "fff")]
        periodic: String,
    },
    /// RustFFT's complex lines by length, against the cost models' weight per length.
    Lines {
        /// Shortest length.
        #[arg(long, default_value_t = 64)]
        from: usize,
        /// Longest length.
        #[arg(long, default_value_t = 512)]
        to: usize,
    },
    /// The free-axis Ewald transform: a0 and a1 fused per plane against pass by pass.
    Planes {
        /// Grid points per axis over the box (a cube of side 1), `M`.
        #[arg(long, default_value_t = 96)]
        grid: usize,
        /// Window support `P` (free axes carry `M + P - 1` data points).
        #[arg(long, default_value_t = 8)]
        p: usize,
        /// The periodic axes, `t` or `f` per axis (`tff`: 1P).
        #[arg(long, default_value = "tff")]
        periodic: String,
        /// Components forward (9: the combined Stokes kernel).
        #[arg(long, default_value_t = 9)]
        comps: usize,
        /// Components backward.
        #[arg(long, default_value_t = 3)]
        back: usize,
        /// Timed repetitions (after one warm-up).
        #[arg(long, default_value_t = 7)]
        reps: usize,
        /// FFTW's rigor: estimate, measure-lines or measure.
        #[arg(long, default_value = "estimate")]
        plan: String,
        /// Compare with the fused transform planned with this rigor instead of the passes one by one.
        #[arg(long)]
        against: Option<String>,
        /// Threads per rank.
        #[arg(long, default_value_t = 2)]
        threads: usize,
    },
    /// DCT/DST-II/III of an all-symmetric grid: through real FFTs against FFTW's r2r.
    R2r {
        /// Grid `n0,n1,n2`.
        #[arg(long, value_delimiter = ',', default_value = "256,256,256")]
        grid: Vec<usize>,
        /// `dct` (DCT-II forward, DCT-III backward: even sides), `dst` (odd sides) or `dct4`
        /// (DCT-IV both ways: even-odd sides).
        #[arg(long, default_value = "dct")]
        kind: String,
        /// Components transformed at once.
        #[arg(long, default_value_t = 1)]
        comps: usize,
        /// Timed repetitions (after one warm-up).
        #[arg(long, default_value_t = 5)]
        reps: usize,
        /// FFTW_MEASURE plans instead of FFTW_ESTIMATE.
        #[arg(long)]
        measure: bool,
        /// Threads per rank.
        #[arg(long, default_value_t = 1)]
        threads: usize,
    },
}

/// Seconds of `f` on the slowest rank (barrier first).
fn timed(comm: &Comm, f: &mut dyn FnMut()) -> f64 {
    comm.barrier();
    let t = Instant::now();
    f();
    comm.max(t.elapsed().as_secs_f64())
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        0.5 * (s[n / 2 - 1] + s[n / 2])
    }
}

fn min(v: &[f64]) -> f64 {
    v.iter().cloned().fold(f64::INFINITY, f64::min)
}

#[allow(clippy::too_many_arguments)]
fn bench_fft(
    world: &Comm,
    grid: [usize; 3],
    comps: usize,
    reps: usize,
    layout: &str,
    (rigor, lines): (PlanRigor, LineEngine),
    json_path: Option<&std::path::Path>,
) -> Result<(), String> {
    let [mx, my, mz] = grid;
    let r = world.size();
    let kind = Decomposition::parse(layout).ok_or(format!("--layout {layout}: expected slab or pencil"))?;
    let pg = ProcGrid::choose(r, kind, None, [my.min(mx / 2 + 1), mz.min(my)]).map_err(|e| e.to_string())?;
    let measure = rigor == PlanRigor::Measure;
    let scale = 1.0 / (mx * my * mz) as f64;
    let plan = |backend: Backend| -> Result<DistFft<f64>, String> {
        let opts = DistFftOptions { backend, rigor, lines, threads: 1, ..DistFftOptions::new(comps) };
        let mut f = DistFft::<f64>::new(world, grid, pg, opts).map_err(|e| e.to_string())?;
        f.data_mut().iter_mut().enumerate().for_each(|(i, v)| *v = ((i % 977) as f64).sin());
        Ok(f)
    };
    let t = Instant::now();
    let mut ours = [plan(Backend::Alltoallv)?, plan(Backend::Persistent)?];
    let plan_ours = world.max(t.elapsed().as_secs_f64());
    let t = Instant::now();
    let raw = world.as_raw().ok_or("this benchmark needs the MPI build")?;
    let mut fftw = FftwMpi::new(raw, grid, comps, measure);
    let plan_fftw = world.max(t.elapsed().as_secs_f64());
    if world.rank() == 0 {
        eprintln!(
            "[bench] {r} ranks, grid {grid:?} x {comps} components, process grid {:?}; planned in {plan_ours:.2} s \
             (ours, both backends) and {plan_fftw:.2} s (FFTW-MPI)",
            pg.dims
        );
    }
    // bytes every switch sends (one forward call) against the transpose minimum, over ranks
    let mut bytes = [0u64; 4];
    let (e, m) = (ours[0].switch_elements(), ours[0].switch_minimum());
    for k in 0..2 {
        bytes[k] = (8 * e[k]) as u64;
        bytes[2 + k] = (8 * m[k]) as u64;
    }
    world.all_reduce(&mut bytes, ReduceOp::Sum);

    let names = ["ours, alltoallv", "ours, persistent", "FFTW-MPI"];
    let mut times: [Vec<f64>; 3] = Default::default();
    let mut fft_seconds = [0.0f64; 2];
    let mut switch_seconds = [0.0f64; 2];
    for rep in 0..=reps {
        for k in 0..3 {
            let which = (k + rep) % 3;
            let dt = match which {
                0 | 1 => {
                    let f = &mut ours[which];
                    f.reset_times();
                    let dt = timed(world, &mut || {
                        f.forward();
                        f.backward();
                    });
                    let ft = f.times();
                    if rep > 0 {
                        fft_seconds[which] += world.max(ft.fft);
                        switch_seconds[which] += world.max(ft.switch);
                    }
                    f.data_mut().iter_mut().for_each(|v| *v *= scale);
                    dt
                }
                _ => {
                    let dt = timed(world, &mut || fftw.round_trip());
                    fftw.scale(scale);
                    dt
                }
            };
            // repetition 0 warms up
            if rep > 0 {
                times[which].push(dt);
            }
        }
        if world.rank() == 0 && rep > 0 {
            eprintln!(
                "[bench] repetition {rep}/{reps}: {:.3} s, {:.3} s, {:.3} s",
                times[0][rep - 1],
                times[1][rep - 1],
                times[2][rep - 1]
            );
        }
    }
    let base = median(&times[2]);
    if world.rank() == 0 {
        println!(
            "distributed FFT r2c+c2r round trip, grid {}x{}x{} x {comps} components, {r} rank{}, process grid {:?}, {} plans, lines on {}",
            mx,
            my,
            mz,
            if r == 1 { "" } else { "s" },
            pg.dims,
            rigor.name(),
            lines.name()
        );
        println!("{:<18} {:>10} {:>10} {:>14}", "transform", "median s", "min s", "vs FFTW-MPI");
        for k in 0..3 {
            println!(
                "{:<18} {:>10.4} {:>10.4} {:>14.3}",
                names[k],
                median(&times[k]),
                min(&times[k]),
                median(&times[k]) / base
            );
        }
        for (k, name) in names.iter().take(2).enumerate() {
            println!(
                "{name}: 1-D FFTs {:.4} s, switches {:.4} s per round trip (max over ranks)",
                fft_seconds[k] / reps as f64,
                switch_seconds[k] / reps as f64
            );
        }
        println!(
            "bytes sent per forward transform, all ranks: switch 1 {} (minimum {}), switch 2 {} (minimum {})",
            bytes[0], bytes[2], bytes[1], bytes[3]
        );
        if let Some(p) = json_path {
            let line = json!({
                "ranks": r,
                "grid": grid,
                "components": comps,
                "process_grid": pg.dims,
                "plans": rigor.name(),
                "lines": lines.name(),
                "seconds_median": {"alltoallv": median(&times[0]), "persistent": median(&times[1]), "fftw_mpi": base},
                "seconds_min": {"alltoallv": min(&times[0]), "persistent": min(&times[1]), "fftw_mpi": min(&times[2])},
                "ratio_to_fftw_mpi": {"alltoallv": median(&times[0]) / base, "persistent": median(&times[1]) / base},
                "fft_seconds": {"alltoallv": fft_seconds[0] / reps as f64, "persistent": fft_seconds[1] / reps as f64},
                "switch_seconds": {"alltoallv": switch_seconds[0] / reps as f64, "persistent": switch_seconds[1] / reps as f64},
                "switch_bytes": [bytes[0], bytes[1]],
                "switch_minimum_bytes": [bytes[2], bytes[3]],
            });
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| format!("{}: {e}", p.display()))?;
            writeln!(f, "{line}").map_err(|e| format!("{}: {e}", p.display()))?;
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn bench_r2r(
    world: &Comm,
    grid: [usize; 3],
    kind: &str,
    comps: usize,
    reps: usize,
    measure: bool,
    threads: usize,
) -> Result<(), String> {
    let (f, b) = match kind {
        "dct" => (R2rKind::Dct2, R2rKind::Dct3),
        "dst" => (R2rKind::Dst2, R2rKind::Dst3),
        "dct4" => (R2rKind::Dct4, R2rKind::Dct4),
        _ => return Err(format!("--kind {kind}: expected dct, dst or dct4")),
    };
    let axes = grid.map(|n| AxisSpec::r2r(n, f, b, n, 0, n, 0));
    let order = parki_fft3d::memory_order(&axes);
    let limits = parki_fft3d::proc_grid_limits_in_order(&axes, order, false);
    let pg = ProcGrid::choose(world.size(), Decomposition::Auto, None, limits).map_err(|e| e.to_string())?;
    let rigor = if measure { PlanRigor::Measure } else { PlanRigor::Estimate };
    let scale = 1.0 / grid.iter().map(|&n| 2.0 * n as f64).product::<f64>();
    let mut plans = Vec::new();
    let mut plan_seconds = [0.0; 2];
    for (k, r2r) in [R2rMethod::Fft, R2rMethod::Fftw].into_iter().enumerate() {
        let t = Instant::now();
        let opts = DistFftOptions { rigor, threads, r2r, ..DistFftOptions::new(comps) };
        let mut fft = DistFft::<f64>::with_axes_in_order(world, axes, order, pg, opts).map_err(|e| e.to_string())?;
        plan_seconds[k] = world.max(t.elapsed().as_secs_f64());
        fft.data_mut().iter_mut().enumerate().for_each(|(i, v)| *v = ((i % 977) as f64).sin());
        plans.push(fft);
    }
    let mut times: [Vec<f64>; 2] = Default::default();
    for rep in 0..=reps {
        for k in 0..2 {
            let which = (k + rep) % 2;
            let fft = &mut plans[which];
            let dt = timed(world, &mut || {
                fft.forward();
                fft.backward();
            });
            fft.data_mut().iter_mut().for_each(|v| *v *= scale);
            if rep > 0 {
                times[which].push(dt);
            }
        }
    }
    // after the same round trips from the same data, both hold the same values
    let mut diff = [plans[0].data().iter().zip(plans[1].data()).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max)];
    world.all_reduce(&mut diff, ReduceOp::Max);
    if world.rank() == 0 {
        println!(
            "{kind} forward + backward, grid {:?} x {comps}, {} rank(s) x {threads} thread(s), process grid {:?}, {} plans",
            grid,
            world.size(),
            pg.dims,
            if measure { "MEASURE" } else { "ESTIMATE" }
        );
        println!("{:<22} {:>10} {:>10} {:>10} {:>10}", "method", "median s", "min s", "plan s", "vs fftw");
        let base = median(&times[1]);
        for (k, name) in ["FFTs (fft)", "FFTW r2r (fftw)"].iter().enumerate() {
            println!(
                "{name:<22} {:>10.4} {:>10.4} {:>10.3} {:>10.3}",
                median(&times[k]),
                min(&times[k]),
                plan_seconds[k],
                median(&times[k]) / base
            );
        }
        println!("largest difference between the two results: {:.2e}", diff[0]);
    }
    Ok(())
}

/// The `planes` benchmark (module documentation).
#[allow(clippy::too_many_arguments)]
fn bench_planes(
    world: &Comm,
    grid: usize,
    p: usize,
    periodic: [bool; 3],
    comps: usize,
    back: usize,
    reps: usize,
    plans_of: (PlanRigor, Option<PlanRigor>),
    threads: usize,
) -> Result<(), String> {
    let h = 1.0 / grid as f64;
    // xi and tol enter only the tables, not the grid's axes
    let free = parki_farfield::FreeGrid::new(periodic, [grid; 3], [h; 3], p, 10.0, 1e-6);
    let axes = free.axes();
    let limits = parki_fft3d::proc_grid_limits_in_order(&axes, [0, 1, 2], false);
    let pg = ProcGrid::choose(world.size(), Decomposition::Auto, None, limits).map_err(|e| e.to_string())?;
    // (rigor, fused) of the two transforms compared
    let cases = match plans_of {
        (a, Some(b)) => [(a, true), (b, true)],
        (a, None) => [(a, true), (a, false)],
    };
    let mut plans = Vec::new();
    let mut plan_seconds = [0.0; 2];
    for (k, (rigor, fuse_planes)) in cases.into_iter().enumerate() {
        let t = Instant::now();
        let opts = DistFftOptions {
            forward_components: comps,
            backward_components: back,
            rigor,
            threads,
            fuse_planes,
            ..DistFftOptions::new(comps)
        };
        let fft = DistFft::<f64>::with_axes_in_order(world, axes, [0, 1, 2], pg, opts).map_err(|e| e.to_string())?;
        plan_seconds[k] = world.max(t.elapsed().as_secs_f64());
        plans.push(fft);
    }
    let fill = |fft: &mut DistFft<f64>| {
        let cs = fft.component_stride();
        let (ys, zs) = fft.real_ranges();
        let nx = axes[0].n;
        for c in 0..comps {
            for z in 0..zs.len() {
                for y in 0..ys.len() {
                    let at = c * cs + fft.real_index(0, y, z);
                    for (x, v) in fft.data_mut()[at..at + nx].iter_mut().enumerate() {
                        *v = (((c * 31 + x * 7 + (y + ys.start) * 13 + (z + zs.start) * 5) % 97) as f64).sin();
                    }
                }
            }
        }
    };
    let mut times: [[Vec<f64>; 2]; 2] = Default::default();
    for rep in 0..=reps {
        for k in 0..2 {
            let which = (k + rep) % 2;
            let fft = &mut plans[which];
            fill(fft);
            let f = timed(world, &mut || fft.forward());
            let b = timed(world, &mut || fft.backward());
            if rep > 0 {
                times[which][0].push(f);
                times[which][1].push(b);
            }
        }
    }
    // the same data through both: the same round trip
    let mut diff = [0.0f64];
    {
        let (ys, zs) = plans[0].real_ranges();
        let cs = plans[0].component_stride();
        for c in 0..back {
            for z in 0..zs.len() {
                for y in 0..ys.len() {
                    let at = c * cs + plans[0].real_index(0, y, z);
                    for x in 0..axes[0].n {
                        diff[0] = diff[0].max((plans[0].data()[at + x] - plans[1].data()[at + x]).abs());
                    }
                }
            }
        }
    }
    world.all_reduce(&mut diff, ReduceOp::Max);
    if world.rank() == 0 {
        let padded: Vec<usize> = axes.iter().map(|a| a.fft_len).collect();
        println!(
            "free-axis transform, grid {grid}^3 (padded {padded:?}), {comps} forward / {back} backward components, \
             {} rank(s) x {threads} thread(s), process grid {:?}",
            world.size(),
            pg.dims,
        );
        println!(
            "{:<28} {:>10} {:>10} {:>10} {:>10} {:>8} {:>10}",
            "passes, plans", "fwd med s", "fwd min s", "bwd med s", "bwd min s", "plan s", "vs second"
        );
        let base = median(&times[1][0]) + median(&times[1][1]);
        let names =
            cases.map(|(r, fused)| format!("{}, {}", if fused { "fused per plane" } else { "one by one" }, r.name()));
        for (k, name) in names.iter().enumerate() {
            let [f, b] = &times[k];
            println!(
                "{name:<28} {:>10.4} {:>10.4} {:>10.4} {:>10.4} {:>8.2} {:>10.3}",
                median(f),
                min(f),
                median(b),
                min(b),
                plan_seconds[k],
                (median(f) + median(b)) / base
            );
        }
        println!("largest difference between the two round trips: {:.2e}", diff[0]);
    }
    Ok(())
}

/// `t`/`f` per axis (`tff`: periodic along x only).
fn parse_periodic(s: &str) -> Result<[bool; 3], String> {
    let axes: Vec<Option<bool>> = s
        .chars()
        .map(|c| match c {
            't' => Some(true),
            'f' => Some(false),
            _ => None,
        })
        .collect();
    match axes[..] {
        [Some(x), Some(y), Some(z)] => Ok([x, y, z]),
        _ => Err(format!("--periodic {s}: expected three of t or f, e.g. tff")),
    }
}

/// Peak resident memory of this process (`VmHWM`), bytes.
fn peak_rss() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb * 1024.0)
}

#[allow(clippy::too_many_arguments)]
fn bench_tables(
    world: &Comm,
    grid: usize,
    periodic: [bool; 3],
    p: usize,
    xi: f64,
    tol: f64,
    kernel: &str,
    field: bool,
    reps: usize,
    only: Option<&str>,
    threads: usize,
) -> Result<(), String> {
    use parki_farfield::{FreeCnv, FreeGrid, KaiserBessel};
    let kernel = parki_core::Kernel::from_name(kernel).map_err(|e| e.to_string())?;
    if periodic == [true; 3] {
        return Err("--periodic ttt: the tables are those of free axes".into());
    }
    let free_space = periodic == [false; 3];
    let methods: Vec<usize> = match only {
        None if free_space => vec![0, 1],
        // with periodic axes the two constructions are one (per periodic mode)
        None | Some("split") => vec![0],
        Some("whole") => vec![1],
        Some(o) => return Err(format!("--only {o}: expected split or whole")),
    };
    let h = 1.0 / grid as f64;
    let free = FreeGrid::new(periodic, [grid; 3], [h; 3], p, xi, tol);
    let kb = KaiserBessel::new(p);
    let axes = free.axes();
    let pg = ProcGrid::choose(
        world.size(),
        Decomposition::Auto,
        None,
        parki_fft3d::proc_grid_limits_in_order(&axes, [0, 1, 2], false),
    )
    .map_err(|e| e.to_string())?;
    let opts = DistFftOptions { threads, ..DistFftOptions::new(1) };
    let fft = DistFft::<f64>::with_axes_in_order(world, axes, [0, 1, 2], pg, opts).map_err(|e| e.to_string())?;
    let block = fft.spectral_layout();
    drop(fft);
    // the peak memory from here on: the transform's buffers (the evaluation's) left out
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let par = parki_core::Par::with_threads(threads);
    let lengths = [1.0; 3];
    let make = |m: usize| -> Result<FreeCnv<f64>, String> {
        match m {
            0 => FreeCnv::new(kernel, field, &free, lengths, &kb, xi, &block, world, par),
            _ => FreeCnv::new_whole_grid(kernel, field, &free, lengths, &kb, xi, &block, par),
        }
        .map_err(|e| e.to_string())
    };
    let mut times: [Vec<f64>; 2] = Default::default();
    let mut last: [Option<FreeCnv<f64>>; 2] = [None, None];
    for rep in 0..reps {
        for k in 0..methods.len() {
            let m = methods[(k + rep) % methods.len()];
            last[m] = None;
            world.barrier();
            let t = Instant::now();
            let made = make(m);
            let dt = world.max(t.elapsed().as_secs_f64());
            last[m] = Some(made?);
            times[m].push(dt);
        }
    }
    let mut diff = [0.0f64, 0.0];
    if let [Some(a), Some(b)] = &last {
        diff[0] = a.tables().iter().zip(b.tables()).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
        diff[1] = b.tables().iter().fold(0.0, |m, v| m.max(v.abs()));
    }
    world.all_reduce(&mut diff, ReduceOp::Max);
    let rss = world.all_gather(&[peak_rss()]);
    if world.rank() == 0 {
        println!(
            "{} tables of {}{}, grid {grid}^3 (padded {:?}, upsampled {:?}), P {p}, {} rank(s) x {threads} thread(s), process grid {:?}",
            ["0P", "1P", "2P"][periodic.iter().filter(|&&q| q).count()],
            kernel.name(),
            if field { " with the field" } else { "" },
            free.fft_len,
            free.upsampled,
            world.size(),
            pg.dims
        );
        println!("{:<26} {:>10} {:>10} {:>10}", "method", "median s", "min s", "vs whole");
        let base = if times[1].is_empty() { f64::NAN } else { median(&times[1]) };
        for (m, name) in ["split over the ranks", "whole grid on every rank"].iter().enumerate() {
            if !times[m].is_empty() {
                println!(
                    "{name:<26} {:>10.3} {:>10.3} {:>10.3}",
                    median(&times[m]),
                    min(&times[m]),
                    median(&times[m]) / base
                );
            }
        }
        if diff[1] > 0.0 {
            println!("largest difference between the tables: {:.2e} of {:.2e}", diff[0], diff[1]);
        }
        let [s, u, p] = free.plan_work(kernel, field);
        println!(
            "the cost model's one-thread estimate (FreeGrid::plan_seconds): {:.3} s, of work S {s:.4e}, U {u:.4e}, P {p:.4e}",
            free.plan_seconds(kernel, field)
        );
        let gb: Vec<String> = rss.iter().map(|b| format!("{:.2}", b / 1e9)).collect();
        println!("peak memory per rank (GB): {}", gb.join(" "));
    }
    Ok(())
}

/// `lines`: the forward transform's time per point and `log2` for every even 7-smooth length
/// in `[from, to]` (rank 0 only; one thread).
fn bench_lines(rank: usize, from: usize, to: usize) {
    use rustfft::num_complex::Complex64;
    if rank != 0 {
        return;
    }
    let mut planner = rustfft::FftPlanner::<f64>::new();
    let mut rows = Vec::new();
    for n in (from..=to).filter(|&n| parki_decomp::fft_friendly_size(n) == n) {
        let fft = planner.plan_fft_forward(n);
        let lines = (32768 / n).max(4);
        let mut data = vec![Complex64::new(1.0, 0.5); n * lines];
        let mut scratch = vec![Complex64::default(); fft.get_inplace_scratch_len()];
        let work = (n * lines) as f64 * (n as f64).log2();
        let reps = ((2e8 / work) as usize).max(3);
        let mut best = f64::MAX;
        for _ in 0..3 {
            let t = Instant::now();
            for _ in 0..reps {
                fft.process_with_scratch(&mut data, &mut scratch);
            }
            best = best.min(t.elapsed().as_secs_f64());
        }
        let weight = parki_decomp::fft_line_work(n) / (n as f64 * (n as f64).log2());
        rows.push((n, best * 1e9 / (reps as f64 * work), weight));
    }
    let mut plain: Vec<f64> = rows.iter().filter(|r| r.2 == 1.0).map(|r| r.1).collect();
    plain.sort_by(f64::total_cmp);
    let median = plain.get(plain.len() / 2).copied().unwrap_or(f64::NAN);
    println!(
        "RustFFT forward lines, one thread, in cache; rate over the median of the unweighted lengths ({median:.3} ns)"
    );
    println!("{:>6} {:>10} {:>8} {:>7}", "length", "ns/pt/log2", "rate", "weight");
    for (n, ns, w) in rows {
        println!("{n:>6} {ns:>10.3} {:>8.2} {w:>7.2}", ns / median);
    }
}

fn main() -> std::process::ExitCode {
    let universe = match Universe::init() {
        Ok(u) => u,
        Err(e) => {
            let line = format!("parki-bench-dist: error: {e}\n");
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            return std::process::ExitCode::from(1);
        }
    };
    universe.abort_on_panic();
    let world = universe.world();
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::Fft { grid, comps, reps, layout, measure, plan, lines, json } => {
            let rigor = if measure { Some(PlanRigor::Measure) } else { PlanRigor::parse(&plan) };
            if grid.len() != 3 {
                Err("--grid: expected mx,my,mz".to_string())
            } else if let Some(rigor) = rigor {
                match LineEngine::parse(&lines) {
                    Some(l) => {
                        let grid = [grid[0], grid[1], grid[2]];
                        bench_fft(&world, grid, comps, reps.max(1), &layout, (rigor, l), json.as_deref())
                    }
                    None => Err(format!("--lines {lines:?}: expected {}", LineEngine::NAMES)),
                }
            } else {
                Err(format!("--plan {plan:?}: expected {}", PlanRigor::NAMES))
            }
        }
        Cmd::Tables { grid, p, xi, tol, kernel, field, reps, only, threads, periodic } => parse_periodic(&periodic)
            .and_then(|per| {
                bench_tables(
                    &world,
                    grid,
                    per,
                    p,
                    xi,
                    tol,
                    &kernel,
                    field,
                    reps.max(1),
                    only.as_deref(),
                    threads.max(1),
                )
            }),
        Cmd::Planes { grid, p, periodic, comps, back, reps, plan, against, threads } => {
            let rigor = |s: &str| {
                PlanRigor::parse(s).ok_or_else(|| format!("--plan/--against {s:?}: expected {}", PlanRigor::NAMES))
            };
            parse_periodic(&periodic).and_then(|per| {
                let back = back.min(comps);
                let plans = (rigor(&plan)?, against.as_deref().map(rigor).transpose()?);
                bench_planes(&world, grid, p, per, comps.max(1), back, reps.max(1), plans, threads.max(1))
            })
        }
        Cmd::Lines { from, to } => {
            bench_lines(world.rank(), from.max(2), to);
            Ok(())
        }
        Cmd::R2r { grid, kind, comps, reps, measure, threads } => {
            if grid.len() != 3 {
                Err("--grid: expected n0,n1,n2".to_string())
            } else {
                bench_r2r(&world, [grid[0], grid[1], grid[2]], &kind, comps, reps.max(1), measure, threads.max(1))
            }
        }
    };
    match world.agree(result.map_err(|m| parki_core::Error::Unsupported { what: m })) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("parki-bench-dist (rank {}): error: {e}", world.rank());
            std::process::ExitCode::from(1)
        }
    }
}
