//! `parki-check`: self-checks of a parki-dist installation under `mpirun`, used by the test
//! suite and useful on a new cluster.
//!
//! - `parki-check fft`: the distributed FFT against a serial FFTW transform of the whole field
//!   (computed on every rank) and forward-then-backward against the input.
//! - `parki-check ewald`: the distributed Ewald sum against the single-process solver run on
//!   every rank over the whole particle set (particles on and near subdomain boundaries and box
//!   faces included), each rank holding a slice of the input; then particles moved by less than
//!   a cell and evaluated again with the neighbour-only sort against a fresh solve.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use parki_app::app::error_line;
use parki_comm::{Backend, Comm, ReduceOp, Universe};
use parki_core::{Domain, Error, Kernel, Sources};
use parki_decomp::{Decomposition, GridLayout, ProcGrid};
use parki_dist::{DistEwaldSolver, EwaldOptions, EwaldSolver, ParallelOptions, SortMode, Targets};
use parki_fft3d::{DistFft, DistFftOptions, Fft3d, GridBuffer, PlanRigor};
use parki_reference::generate::Rng;

#[derive(Parser, Debug)]
#[command(name = "parki-check", about = "Self-checks of parki-dist under mpirun")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Distributed FFT: round trip and agreement with a serial transform.
    Fft {
        /// Grid Mx,My,Mz.
        #[arg(long, value_delimiter = ',', default_value = "12,10,8")]
        grid: Vec<usize>,
        /// Components.
        #[arg(long, default_value_t = 3)]
        comps: usize,
        /// slab, pencil or auto.
        #[arg(long, default_value = "auto")]
        layout: String,
        /// alltoallv or persistent.
        #[arg(long, default_value = "alltoallv")]
        backend: String,
        /// Complex (c2c) input instead of real.
        #[arg(long)]
        complex: bool,
        /// Threads per rank.
        #[arg(long, default_value_t = 1)]
        threads: usize,
    },
    /// Distributed Ewald against the single-process solver.
    Ewald {
        /// laplace, stokeslet, stresslet or stokes.
        #[arg(long, default_value = "stokes")]
        kernel: String,
        /// Sources in total.
        #[arg(long, default_value_t = 1500)]
        n: usize,
        /// Tolerance.
        #[arg(long, default_value_t = 1e-8)]
        tol: f64,
        /// slab, pencil or auto.
        #[arg(long, default_value = "auto")]
        layout: String,
        /// alltoallv or persistent.
        #[arg(long, default_value = "alltoallv")]
        backend: String,
        /// Separate targets instead of the sources.
        #[arg(long)]
        targets: bool,
        /// Relative bound.
        #[arg(long, default_value_t = 1e-12)]
        bound: f64,
        /// Failure injection: this rank passes a particle outside the box.
        #[arg(long)]
        bad_rank: Option<usize>,
        /// Failure injection: this rank panics after planning, while the others go on into
        /// the evaluation's collectives (the panic hook must abort the whole job).
        #[arg(long)]
        panic_rank: Option<usize>,
    },
}

struct Problem {
    pos: Vec<[f64; 3]>,
    q: Vec<f64>,
    f: Vec<[f64; 3]>,
    d: Vec<[f64; 3]>,
    n: Vec<[f64; 3]>,
}

impl Problem {
    fn subset(&self, idx: &[usize]) -> Problem {
        let pick = |v: &Vec<[f64; 3]>| idx.iter().map(|&i| v[i]).collect::<Vec<_>>();
        Problem {
            pos: pick(&self.pos),
            q: idx.iter().map(|&i| self.q[i]).collect(),
            f: pick(&self.f),
            d: pick(&self.d),
            n: pick(&self.n),
        }
    }

    fn view(&self, kernel: Kernel) -> Sources<'_, f64> {
        match kernel {
            Kernel::Laplace => Sources::laplace(&self.pos, &self.q),
            Kernel::Stokeslet => Sources::stokeslet(&self.pos, &self.f),
            Kernel::Stresslet => Sources::stresslet(&self.pos, &self.d, &self.n),
            Kernel::Stokes => Sources::stokes(&self.pos, &self.f, &self.d, &self.n),
        }
    }
}

/// Uniform particles plus particles on and next to cell boundaries (the subdomain boundaries)
/// and box faces along every axis.
fn particles(n: usize, lengths: [f64; 3], cells: [usize; 3], seed: u64) -> Problem {
    let mut rng = Rng::new(seed);
    let mut pos = Vec::with_capacity(n);
    let special = n / 3;
    for k in 0..n {
        let mut p = [0.0; 3];
        for d in 0..3 {
            p[d] = rng.uniform() * lengths[d];
        }
        if k < special {
            let d = 1 + k % 2;
            let w = lengths[d] / cells[d] as f64;
            let c = (rng.uniform() * cells[d] as f64).floor();
            let eps = [0.0, 1e-12, -1e-12, 1e-9 * w, -1e-9 * w][k % 5];
            let mut v = c * w + eps * lengths[d];
            if k % 7 == 0 {
                v = if k % 2 == 0 { 0.0 } else { lengths[d].next_down() };
            }
            p[d] = v.rem_euclid(lengths[d]).min(lengths[d].next_down());
        }
        pos.push(p);
    }
    let vec3 = |rng: &mut Rng| -> Vec<[f64; 3]> {
        let mut v: Vec<[f64; 3]> =
            (0..n).map(|_| [rng.uniform() - 0.5, rng.uniform() - 0.5, rng.uniform() - 0.5]).collect();
        let mean = [0, 1, 2].map(|d| v.iter().map(|x| x[d]).sum::<f64>() / n as f64);
        v.iter_mut().for_each(|x| (0..3).for_each(|d| x[d] -= mean[d]));
        v
    };
    let f = vec3(&mut rng);
    let d = vec3(&mut rng);
    let nn = vec3(&mut rng);
    let mut q: Vec<f64> = (0..n).map(|_| rng.uniform() - 0.5).collect();
    let m = q.iter().sum::<f64>() / n as f64;
    q.iter_mut().for_each(|v| *v -= m);
    Problem { pos, q, f, d, n: nn }
}

/// A failed check as an error.
fn unsupported(what: String) -> Error {
    Error::Unsupported { what }
}

/// Global relative L2 difference of this rank's `u` against `reference`.
fn rel_diff(world: &Comm, u: &[f64], reference: &[f64]) -> f64 {
    let mut s = [0.0, 0.0];
    for (a, b) in u.iter().zip(reference) {
        s[0] += (a - b) * (a - b);
        s[1] += b * b;
    }
    world.all_reduce(&mut s, ReduceOp::Sum);
    (s[0] / s[1]).sqrt()
}

#[allow(clippy::too_many_arguments)]
fn check_ewald(
    world: &Comm,
    kernel: &str,
    n: usize,
    tol: f64,
    layout: &str,
    backend: &str,
    separate: bool,
    bound: f64,
    bad_rank: Option<usize>,
    panic_rank: Option<usize>,
) -> Result<(), Error> {
    let kernel = Kernel::from_name(kernel)?;
    let kind = Decomposition::parse(layout)
        .ok_or_else(|| unsupported(format!("layout = {layout}: expected slab, pencil or auto")))?;
    let backend = Backend::parse(backend)
        .ok_or_else(|| unsupported(format!("backend = {backend}: expected alltoallv or persistent")))?;
    let lengths = [1.0, 1.2, 0.9];
    let domain = Domain::triply_periodic(lengths)?;
    let mut opts = EwaldOptions::new(kernel, domain, tol);
    opts.threads = 1;
    let nt = if separate { n / 2 } else { n };
    let mut serial = EwaldSolver::<f64>::new(&opts, n, nt)?;
    let cells = serial.cells().dims();
    let all = particles(n, lengths, cells, 7);
    let tall = particles(nt, lengths, cells, 8);
    let dim = kernel.output_dim();
    let targets_all = if separate { Targets::Points(&tall.pos[..]) } else { Targets::Sources };
    let mut reference = vec![0.0; nt * dim];
    serial.evaluate(&all.view(kernel), targets_all, &mut reference)?;

    let popts = ParallelOptions::new().decomposition(kind).backend(backend);
    let mut solver = DistEwaldSolver::<f64>::new(world, &opts, popts, n, nt)?;
    if panic_rank == Some(world.rank()) {
        panic!("injected failure (--panic-rank {})", world.rank());
    }
    // each rank holds a contiguous slice of the input
    let slice = |len: usize| parki_decomp::split_range(len, world.size(), world.rank());
    let (sr, tr) = (slice(n), slice(nt));
    let mut mine = all.subset(&sr.clone().collect::<Vec<_>>());
    if bad_rank == Some(world.rank()) && !mine.pos.is_empty() {
        mine.pos[0][2] = 2.0 * lengths[2];
    }
    let tmine: Vec<[f64; 3]> = tall.pos[tr.clone()].to_vec();
    let (tgt, rref) = if separate {
        (Targets::Points(&tmine[..]), &reference[tr.start * dim..tr.end * dim])
    } else {
        (Targets::Sources, &reference[sr.start * dim..sr.end * dim])
    };
    let mut u = vec![0.0; rref.len()];
    solver.evaluate(&mine.view(kernel), tgt, &mut u, SortMode::Full)?;
    let err = rel_diff(world, &u, rref);

    // particles kept on their owners, moved by less than a cell, neighbour-only sort
    let owned_idx: Vec<usize> = (0..n).filter(|&i| solver.owner_of(&all.pos[i]) == world.rank()).collect();
    let mut held = all.subset(&owned_idx);
    let mut rng = Rng::new(99);
    let cw = [0, 1, 2].map(|d| lengths[d] / cells[d] as f64);
    let mut moved = all.pos.clone();
    for p in moved.iter_mut() {
        for d in 0..3 {
            p[d] = (p[d] + (rng.uniform() - 0.5) * 0.8 * cw[d]).rem_euclid(lengths[d]).min(lengths[d].next_down());
        }
    }
    for (k, &i) in owned_idx.iter().enumerate() {
        held.pos[k] = moved[i];
    }
    let mut u2 = vec![0.0; owned_idx.len() * dim];
    let t_held = if separate { Targets::Points(&held.pos[..]) } else { Targets::Sources };
    solver.evaluate(&held.view(kernel), t_held, &mut u2, SortMode::Neighbour)?;
    let moved_all =
        Problem { pos: moved.clone(), q: all.q.clone(), f: all.f.clone(), d: all.d.clone(), n: all.n.clone() };
    let mut fresh = vec![0.0; n * dim];
    let t_fresh = if separate { Targets::Points(&moved[..]) } else { Targets::Sources };
    // planned for the same counts as the distributed solver, hence the same parameters
    let mut serial2 = EwaldSolver::<f64>::new(&opts, n, nt)?;
    serial2.evaluate(&moved_all.view(kernel), t_fresh, &mut fresh)?;
    let fresh_mine: Vec<f64> = owned_idx.iter().flat_map(|&i| fresh[i * dim..(i + 1) * dim].to_vec()).collect();
    let err2 = rel_diff(world, &u2, &fresh_mine);
    if world.rank() == 0 {
        println!(
            "ewald {} n={n} tol={tol:e} targets={} {} {:?} backend={} ranks={}: vs single process {err:.3e}, \
             moved + neighbour sort vs fresh {err2:.3e} (bound {bound:e})",
            kernel.name(),
            if separate { "separate" } else { "sources" },
            solver.proc_grid().kind(),
            solver.proc_grid().dims,
            backend.name(),
            world.size()
        );
    }
    if err > bound || err2 > bound || !err.is_finite() || !err2.is_finite() {
        return Err(unsupported(format!("Ewald check failed: {err:.3e} and {err2:.3e} (bound {bound:e})")));
    }
    Ok(())
}

/// A deterministic field value in [-1, 1).
fn field(c: usize, x: usize, y: usize, z: usize, part: usize) -> f64 {
    let mut h = (c as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ (x as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
        ^ (y as u64).wrapping_mul(0x1656_67B1_9E37_79F9)
        ^ (z as u64).wrapping_mul(0x27D4_EB2F_1656_67C5)
        ^ (part as u64).wrapping_mul(0x94D0_49BB_1331_11EB);
    h ^= h >> 31;
    h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^= h >> 29;
    (h >> 11) as f64 / (1u64 << 52) as f64 - 1.0
}

#[allow(clippy::too_many_arguments)]
fn check_fft(
    world: &Comm,
    grid: [usize; 3],
    comps: usize,
    layout: &str,
    backend: &str,
    complex: bool,
    threads: usize,
) -> Result<(f64, f64), String> {
    let [mx, my, mz] = grid;
    let kind = Decomposition::parse(layout).ok_or(format!("layout = {layout}: expected slab, pencil or auto"))?;
    let backend = Backend::parse(backend).ok_or(format!("backend = {backend}: expected alltoallv or persistent"))?;
    let kx = if complex { mx } else { mx / 2 + 1 };
    let pg = ProcGrid::choose(world.size(), kind, None, [my.min(kx), mz.min(my)]).map_err(|e| e.to_string())?;
    let opts = DistFftOptions { complex, backend, threads, ..DistFftOptions::new(comps) };
    let mut fft = DistFft::<f64>::new(world, grid, pg, opts).map_err(|e| e.to_string())?;
    let (yr, zr) = fft.real_ranges();
    let cs = fft.component_stride();
    let mut input = vec![0.0; fft.data().len()];
    for c in 0..comps {
        for (zl, z) in zr.clone().enumerate() {
            for (yl, y) in yr.clone().enumerate() {
                for x in 0..mx {
                    let i = c * cs + fft.real_index(x, yl, zl);
                    input[i] = field(c, x, y, z, 0);
                    if complex {
                        input[i + 1] = field(c, x, y, z, 1);
                    }
                }
            }
        }
    }
    fft.data_mut().copy_from_slice(&input);
    fft.forward();

    // reference: a serial transform of the whole field on every rank
    let sl = fft.spectral_layout();
    let spectrum = |c: usize, ix: usize, iy: usize, iz: usize| -> (f64, f64) {
        let o = c * cs + (iz * sl.y.1 + (iy - sl.y.0)) * sl.row_stride + 2 * (ix - sl.x.0);
        (fft.data()[o], fft.data()[o + 1])
    };
    let mut err = 0.0f64;
    let mut scale = 0.0f64;
    if complex {
        let single = Comm::single();
        let mut s = DistFft::<f64>::new(
            &single,
            grid,
            ProcGrid::slab(1),
            DistFftOptions { complex, ..DistFftOptions::new(comps) },
        )
        .map_err(|e| e.to_string())?;
        let scs = s.component_stride();
        for c in 0..comps {
            for z in 0..mz {
                for y in 0..my {
                    for x in 0..mx {
                        let i = c * scs + s.real_index(x, y, z);
                        s.data_mut()[i] = field(c, x, y, z, 0);
                        s.data_mut()[i + 1] = field(c, x, y, z, 1);
                    }
                }
            }
        }
        s.forward();
        let ssl = s.spectral_layout();
        for c in 0..comps {
            for iz in 0..mz {
                for iy in sl.y.0..sl.y.0 + sl.y.1 {
                    for ix in sl.x.0..sl.x.0 + sl.x.1 {
                        let o = c * scs + (iz * ssl.y.1 + iy) * ssl.row_stride + 2 * ix;
                        let (a, b) = spectrum(c, ix, iy, iz);
                        err = err.max((a - s.data()[o]).abs()).max((b - s.data()[o + 1]).abs());
                        scale = scale.max(s.data()[o].abs()).max(s.data()[o + 1].abs());
                    }
                }
            }
        }
    } else {
        let lay = GridLayout::new(grid).map_err(|e| e.to_string())?;
        let mut buf = GridBuffer::<f64>::new(lay, comps, 1);
        let serial = Fft3d::plan(&mut buf, comps, comps, 1, PlanRigor::Estimate).map_err(|e| e.to_string())?;
        let rl = lay.real_len();
        for c in 0..comps {
            for z in 0..mz {
                for y in 0..my {
                    for x in 0..mx {
                        buf.as_mut_slice()[c * rl + lay.real_index(x, y, z)] = field(c, x, y, z, 0);
                    }
                }
            }
        }
        serial.forward(&mut buf);
        for c in 0..comps {
            for iz in 0..mz {
                for iy in sl.y.0..sl.y.0 + sl.y.1 {
                    for ix in sl.x.0..sl.x.0 + sl.x.1 {
                        let o = c * rl + (iz * my + iy) * lay.row_stride() + 2 * ix;
                        let (a, b) = spectrum(c, ix, iy, iz);
                        let (ra, rb) = (buf.as_slice()[o], buf.as_slice()[o + 1]);
                        err = err.max((a - ra).abs()).max((b - rb).abs());
                        scale = scale.max(ra.abs()).max(rb.abs());
                    }
                }
            }
        }
    }
    let forward_err = world.max(err) / world.max(scale);

    fft.backward();
    let n = (mx * my * mz) as f64;
    let mut rt = 0.0f64;
    for c in 0..comps {
        for zl in 0..zr.len() {
            for yl in 0..yr.len() {
                for x in 0..mx {
                    let i = c * cs + fft.real_index(x, yl, zl);
                    rt = rt.max((fft.data()[i] / n - input[i]).abs());
                    if complex {
                        rt = rt.max((fft.data()[i + 1] / n - input[i + 1]).abs());
                    }
                }
            }
        }
    }
    let roundtrip_err = world.max(rt);
    if world.rank() == 0 {
        let sw = fft.switch_elements();
        let min = fft.switch_minimum();
        println!(
            "fft {mx}x{my}x{mz} comps={comps} {} {:?} backend={} complex={complex} ranks={}: forward vs serial \
             {forward_err:.3e}, round trip {roundtrip_err:.3e}, switch reals sent {:?} (minimum {:?})",
            pg.kind(),
            pg.dims,
            backend.name(),
            world.size(),
            sw,
            min
        );
    }
    Ok((forward_err, roundtrip_err))
}

fn main() -> ExitCode {
    let universe = match Universe::init() {
        Ok(u) => u,
        Err(e) => {
            let line = format!("parki-check: error: {e}\n");
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            return ExitCode::from(1);
        }
    };
    universe.abort_on_panic();
    let world = universe.world();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Ewald { kernel, n, tol, layout, backend, targets, bound, bad_rank, panic_rank } => {
            check_ewald(&world, &kernel, n, tol, &layout, &backend, targets, bound, bad_rank, panic_rank)
        }
        Command::Fft { grid, comps, layout, backend, complex, threads } => if grid.len() != 3 {
            Err("--grid: expected three sizes Mx,My,Mz".to_string())
        } else {
            check_fft(&world, [grid[0], grid[1], grid[2]], comps, &layout, &backend, complex, threads).and_then(
                |(f, r)| {
                    if f <= 1e-13 && r <= 1e-13 {
                        Ok(())
                    } else {
                        Err(format!("FFT check failed: forward {f:.3e}, round trip {r:.3e} (bound 1e-13)"))
                    }
                },
            )
        }
        .map_err(unsupported),
    };
    // one line, from rank 0, naming the rank the error arose on
    match world.agree(result) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if world.rank() == 0 {
                eprintln!("{}", error_line("parki-check", &e, world.size()));
            }
            ExitCode::from(1)
        }
    }
}
