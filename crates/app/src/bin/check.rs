//! `parki-check`: self-checks of a parki-dist installation under `mpirun`, used by the test
//! suite and useful on a new cluster.
//!
//! - `parki-check fft`: the distributed FFT against a serial FFTW transform of the whole field
//!   (computed on every rank) and forward-then-backward against the input.
//! - `parki-check fft-axes`: the distributed transform with per-axis kinds (DFT, DCT/DST, zero
//!   padding, semi-unbounded lines) against the `O(N^2)` defining sums applied to the whole
//!   field on every rank, and forward-then-backward against the input.
//! - `parki-check poisson`: the distributed Poisson solver against the one-process solver run
//!   on every rank over the whole grid.
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
use parki_dist::{DistEwaldSolver, EwaldOptions, EwaldSolver, FieldMethod, ParallelOptions, SortMode, Targets};
use parki_fft3d::{
    memory_order, proc_grid_limits, AxisSpec, AxisTransform, DistFft, DistFftOptions, Fft3d, GridBuffer, ModeClass,
    PlanRigor, R2rKind, R2rMethod,
};
use parki_reference::generate::Rng;
use parki_reference::transforms::{apply_along_axis, Transform1d};

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
    /// Distributed transform with per-axis kinds against the defining sums.
    FftAxes {
        /// Data points per axis.
        #[arg(long, value_delimiter = ',', default_value = "8,6,5")]
        grid: Vec<usize>,
        /// Per axis: per, unb, dct1..dct4, dst1..dst4, even-unb, odd-unb, unb-even, unb-odd, id.
        #[arg(long, value_delimiter = ',')]
        axes: Vec<String>,
        /// Components.
        #[arg(long, default_value_t = 2)]
        comps: usize,
        /// slab, pencil or auto.
        #[arg(long, default_value = "auto")]
        layout: String,
        /// alltoallv or persistent.
        #[arg(long, default_value = "alltoallv")]
        backend: String,
        /// DCT/DST-II, III and IV through FFTs (fft) or FFTW's r2r (fftw).
        #[arg(long, default_value = "fft")]
        r2r: String,
        /// Padding per periodic mode (axes `per,unb,unb`): classes `a-b:ly:lz` separated by
        /// `/`, the x spectral slots `a..b` with y and z transforms of `ly` and `lz` points.
        #[arg(long, default_value = "")]
        classes: String,
        /// FFTW's rigor: estimate, measure-lines or measure.
        #[arg(long, default_value = "estimate")]
        plan: String,
    },
    /// Distributed Poisson solve against the one-process solve.
    Poisson {
        /// Cells per axis.
        #[arg(long, value_delimiter = ',', default_value = "12,10,9")]
        grid: Vec<usize>,
        /// Six conditions: x low, x high, y low, y high, z low, z high.
        #[arg(long, value_delimiter = ',', default_value = "unb,unb,even,unb,per,per")]
        bc: Vec<String>,
        /// Green's function.
        #[arg(long, default_value = "chat2")]
        green: String,
        /// scalar, vector, curl (spectral derivatives) or curl-fd2.
        #[arg(long, default_value = "scalar")]
        field: String,
        /// Eighteen conditions, six per component (vector and curl fields).
        #[arg(long, value_delimiter = ',')]
        component_bc: Vec<String>,
        /// cell or node.
        #[arg(long, default_value = "cell")]
        centering: String,
        /// slab, pencil or auto.
        #[arg(long, default_value = "auto")]
        layout: String,
        /// alltoallv or persistent.
        #[arg(long, default_value = "alltoallv")]
        backend: String,
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
        /// Periodic axes as three letters `t`/`f` (`ttt`: triply periodic, `fff`: free space).
        #[arg(long, default_value = "ttt")]
        periodic: String,
        /// The Laplace field too, its far part by `window` or `spectral`.
        #[arg(long)]
        field: Option<String>,
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
    periodic: &str,
    field: Option<&str>,
) -> Result<(), Error> {
    let kernel = Kernel::from_name(kernel)?;
    let field = field
        .map(|f| FieldMethod::parse(f).ok_or_else(|| unsupported(format!("--field {f}: expected window or spectral"))))
        .transpose()?;
    let flags: Vec<bool> = periodic.chars().map(|c| c == 't').collect();
    if flags.len() != 3 || !periodic.chars().all(|c| c == 't' || c == 'f') {
        return Err(unsupported(format!("--periodic {periodic}: expected three letters t or f")));
    }
    let kind = Decomposition::parse(layout)
        .ok_or_else(|| unsupported(format!("layout = {layout}: expected slab, pencil or auto")))?;
    let backend = Backend::parse(backend)
        .ok_or_else(|| unsupported(format!("backend = {backend}: expected alltoallv or persistent")))?;
    let lengths = [1.0, 1.2, 0.9];
    let domain = Domain::new(lengths, [flags[0], flags[1], flags[2]])?;
    let mut opts = EwaldOptions::new(kernel, domain, tol).field(field.is_some());
    opts.field_method = field.unwrap_or_default();
    opts.threads = 1;
    let nt = if separate { n / 2 } else { n };
    let mut serial = EwaldSolver::<f64>::new(&opts, n, nt)?;
    let cells = serial.cells().dims();
    let all = particles(n, lengths, cells, 7);
    let tall = particles(nt, lengths, cells, 8);
    let dim = opts.output_dim();
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
            "ewald {}{} periodic={periodic} n={n} tol={tol:e} targets={} {} {:?} backend={} ranks={}: vs single \
             process {err:.3e}, moved + neighbour sort vs fresh {err2:.3e} (bound {bound:e})",
            kernel.name(),
            field.map(|f| format!(" field={}", f.name())).unwrap_or_default(),
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

/// The axis of `fft-axes` named `name`, with `n` data points.
fn named_axis(name: &str, n: usize) -> Result<AxisSpec, String> {
    use R2rKind::{Dct1, Dct2, Dct3, Dct4, Dst1, Dst2, Dst3, Dst4};
    let plain = |f, b| AxisSpec::r2r(n, f, b, n, 0, n, 0);
    let semi = |f, b, fo, d| AxisSpec::r2r(n, f, b, 2 * n, fo, 2 * n + 1, d);
    Ok(match name {
        "per" => AxisSpec::periodic(n),
        "unb" => AxisSpec::padded_dft(n, 2 * n),
        "dct1" => plain(Dct1, Dct1),
        "dct2" => plain(Dct2, Dct3),
        "dct3" => plain(Dct3, Dct2),
        "dct4" => plain(Dct4, Dct4),
        "dst1" => plain(Dst1, Dst1),
        "dst2" => plain(Dst2, Dst3),
        "dst3" => plain(Dst3, Dst2),
        "dst4" => plain(Dst4, Dst4),
        "even-unb" => semi(Dct2, Dct3, 0, 0),
        "odd-unb" => semi(Dst2, Dst3, 1, 1),
        "unb-even" => semi(Dct2, Dct3, 0, n),
        "unb-odd" => semi(Dst2, Dst3, 1, n + 1),
        "id" => AxisSpec::identity(n),
        _ => return Err(format!("--axes: unknown axis {name}")),
    })
}

/// The defining-sum counterpart of an FFTW real-to-real kind.
fn reference_kind(k: R2rKind) -> Transform1d {
    match k {
        R2rKind::Dct1 => Transform1d::Dct1,
        R2rKind::Dct2 => Transform1d::Dct2,
        R2rKind::Dct3 => Transform1d::Dct3,
        R2rKind::Dct4 => Transform1d::Dct4,
        R2rKind::Dst1 => Transform1d::Dst1,
        R2rKind::Dst2 => Transform1d::Dst2,
        R2rKind::Dst3 => Transform1d::Dst3,
        R2rKind::Dst4 => Transform1d::Dst4,
    }
}

/// The `--classes` of `fft-axes`: `a-b:ly:lz` separated by `/`.
fn parse_classes(text: &str) -> Result<Vec<ModeClass>, String> {
    let bad = || format!("--classes {text}: expected a-b:ly:lz separated by /");
    text.split('/')
        .filter(|c| !c.is_empty())
        .map(|c| {
            let f: Vec<&str> = c.split(':').collect();
            let r: Vec<&str> = f[0].split('-').collect();
            if f.len() != 3 || r.len() != 2 {
                return Err(bad());
            }
            let n = |v: &str| v.parse::<usize>().map_err(|_| bad());
            Ok(ModeClass { slots: n(r[0])?..n(r[1])?, len: [n(f[1])?, n(f[2])?] })
        })
        .collect()
}

/// `fft-axes`: returns the forward and round-trip errors (relative to the largest value).
#[allow(clippy::too_many_arguments)]
fn check_fft_axes(
    world: &Comm,
    grid: [usize; 3],
    names: &[String],
    comps: usize,
    layout: &str,
    backend: &str,
    r2r: &str,
    classes: &[ModeClass],
    plan: &str,
) -> Result<(f64, f64), String> {
    if names.len() != 3 {
        return Err("--axes: expected three axes".into());
    }
    let axes = [named_axis(&names[0], grid[0])?, named_axis(&names[1], grid[1])?, named_axis(&names[2], grid[2])?];
    let kind = Decomposition::parse(layout).ok_or(format!("layout = {layout}: expected slab, pencil or auto"))?;
    let backend = Backend::parse(backend).ok_or(format!("backend = {backend}: expected alltoallv or persistent"))?;
    let r2r = R2rMethod::parse(r2r).ok_or(format!("r2r = {r2r}: expected fft or fftw"))?;
    let rigor = PlanRigor::parse(plan).ok_or(format!("plan = {plan}: expected {}", PlanRigor::NAMES))?;
    let pg = ProcGrid::choose(world.size(), kind, None, proc_grid_limits(&axes, false)).map_err(|e| e.to_string())?;
    let opts = DistFftOptions { backend, r2r, rigor, ..DistFftOptions::new(comps) };
    let mut fft = DistFft::<f64>::with_mode_classes(world, axes, memory_order(&axes), pg, opts, classes)
        .map_err(|e| e.to_string())?;
    let (order, nf, cs) = (fft.order(), fft.element_reals(), fft.component_stride());
    if !classes.is_empty() && order != [0, 1, 2] {
        return Err(format!("--classes: the axes' memory order is {order:?}, not [0, 1, 2]"));
    }
    // the y and z lengths of each x slot (memory order is the user's with classes)
    let cover = fft.mode_classes().to_vec();
    let class_len = |kx: usize| cover.iter().find(|c| c.slots.contains(&kx)).map(|c| c.len);
    let value = |c: usize, p: [usize; 3]| {
        let h = (c * 7919 + p[0] * 104_729 + p[1] * 1_299_709 + p[2] * 15_485_863) % 1_000_003;
        h as f64 / 1_000_003.0 - 0.5
    };
    // the reference: the whole field in every axis's line, transformed axis by axis
    let r2c_axis = fft.is_r2c().then_some(order[0]);
    let dims = axes.map(|a| if a.transform == AxisTransform::Dft { a.fft_len } else { a.line });
    let at = |p: [usize; 3]| (p[0] * dims[1] + p[1]) * dims[2] + p[2];
    let len = dims.iter().product::<usize>();
    let mut reference = vec![vec![(0.0, 0.0); len]; comps];
    for (c, field) in reference.iter_mut().enumerate() {
        for z in 0..grid[2] {
            for y in 0..grid[1] {
                for x in 0..grid[0] {
                    let p = [x + axes[0].data_offset, y + axes[1].data_offset, z + axes[2].data_offset];
                    field[at(p)] = (value(c, [x, y, z]), 0.0);
                }
            }
        }
        for (axis, a) in axes.iter().enumerate() {
            let t = match a.transform {
                AxisTransform::Identity => continue,
                AxisTransform::Dft => Transform1d::DftForward,
                AxisTransform::R2r { forward, .. } => reference_kind(forward),
            };
            if classes.is_empty() || axis == 0 {
                apply_along_axis(field, dims, axis, t, a.fft_offset, a.fft_len, 1.0);
            }
        }
        // with classes: per x slot, y and z on the class's lengths, zero beyond them
        if !classes.is_empty() {
            let plane = dims[1] * dims[2];
            for kx in 0..dims[0] {
                let len = class_len(kx).unwrap_or([dims[1], dims[2]]);
                let sub = &mut field[kx * plane..(kx + 1) * plane];
                let d = [1, dims[1], dims[2]];
                apply_along_axis(sub, d, 1, Transform1d::DftForward, 0, len[0], 1.0);
                apply_along_axis(sub, d, 2, Transform1d::DftForward, 0, len[1], 1.0);
                for y in 0..dims[1] {
                    for z in 0..dims[2] {
                        if y >= len[0] || z >= len[1] {
                            sub[y * dims[2] + z] = (0.0, 0.0);
                        }
                    }
                }
            }
        }
    }
    let scale = reference.iter().flatten().fold(0.0f64, |m, v| m.max(v.0.abs()).max(v.1.abs()));
    // this rank's real-space block
    let t0 = fft.topology(0);
    let (r1, r2) = (t0.range(1), t0.range(2));
    let a0 = fft.axes()[0];
    let user = |i: [usize; 3]| {
        let mut p = [0; 3];
        for j in 0..3 {
            p[order[j]] = i[j];
        }
        p
    };
    for c in 0..comps {
        for i2 in r2.clone() {
            for i1 in r1.clone() {
                for i0 in 0..a0.n {
                    let k = c * cs + fft.real_index(a0.data_offset + i0, i1 - r1.start, i2 - r2.start);
                    fft.data_mut()[k] = value(c, user([i0, i1, i2]));
                }
            }
        }
    }
    fft.forward();
    let t2 = fft.topology(2);
    let (s0, s1, l2) = (t2.range(0), t2.range(1), t2.global[2]);
    let mut forward_err = 0.0f64;
    for (c, want_c) in reference.iter().enumerate() {
        for i2 in 0..l2 {
            for i1 in s1.clone() {
                for i0 in s0.clone() {
                    let k = c * cs + fft.spectral_index(i0 - s0.start, i1 - s1.start, i2);
                    let got = (fft.data()[k], if nf == 2 { fft.data()[k + 1] } else { 0.0 });
                    let p = user([i0, i1, i2]);
                    let want = want_c[at(p)];
                    debug_assert!(r2c_axis.is_none_or(|a| p[a] <= axes[a].fft_len / 2));
                    forward_err = forward_err.max((got.0 - want.0).abs().max((got.1 - want.1).abs()) / scale);
                }
            }
        }
    }
    // with classes: each class's spectrum times the axes' N_1 N_2 over its own, so that the round
    // trip multiplies every x slot by the same product
    if !classes.is_empty() {
        for c in 0..comps {
            for i2 in 0..l2 {
                for i1 in s1.clone() {
                    for i0 in s0.clone() {
                        let len = class_len(i0).unwrap_or([axes[1].fft_len, axes[2].fft_len]);
                        let f = (axes[1].fft_len * axes[2].fft_len) as f64 / (len[0] * len[1]) as f64;
                        let k = c * cs + fft.spectral_index(i0 - s0.start, i1 - s1.start, i2);
                        fft.data_mut()[k] *= f;
                        fft.data_mut()[k + 1] *= f;
                    }
                }
            }
        }
    }
    fft.backward();
    let norm: f64 = axes
        .iter()
        .map(|a| match a.transform {
            AxisTransform::Identity => 1.0,
            AxisTransform::Dft => a.fft_len as f64,
            AxisTransform::R2r { backward, .. } => backward.logical_len(a.fft_len) as f64,
        })
        .product();
    let mut roundtrip_err = 0.0f64;
    for c in 0..comps {
        for i2 in r2.clone() {
            for i1 in r1.clone() {
                for i0 in 0..a0.n {
                    let k = c * cs + fft.real_index(a0.data_offset + i0, i1 - r1.start, i2 - r2.start);
                    let want = value(c, user([i0, i1, i2]));
                    roundtrip_err = roundtrip_err.max((fft.data()[k] / norm - want).abs());
                }
            }
        }
    }
    let (f, r) = (world.max(forward_err), world.max(roundtrip_err));
    if world.rank() == 0 {
        println!(
            "fft-axes {names:?} grid {grid:?} order {order:?} on {:?}, r2r {}: forward {f:.2e}, round trip {r:.2e}",
            pg.dims,
            r2r.name()
        );
    }
    Ok((f, r))
}

/// `poisson`: the largest difference of the distributed solution from the one-process one,
/// relative to its largest value.
#[allow(clippy::too_many_arguments)]
fn check_poisson(
    world: &Comm,
    grid: &[usize],
    bc: &[String],
    green: &str,
    field: &str,
    component_bc: &[String],
    centering: &str,
    layout: &str,
    backend: &str,
) -> Result<f64, String> {
    use parki_poisson::{Bc, Centering, Differentiation, FieldMode, GreenKind, PoissonOptions, PoissonSolver};
    if grid.len() != 3 || bc.len() != 6 {
        return Err("--grid: three sizes; --bc: six conditions".into());
    }
    let b: Vec<Bc> =
        bc.iter().map(|s| Bc::parse(s).ok_or(format!("--bc: unknown condition {s}"))).collect::<Result<_, _>>()?;
    let cells = [grid[0], grid[1], grid[2]];
    let mut opts = PoissonOptions::new([1.0, 0.9, 1.1], cells, [[b[0], b[1]], [b[2], b[3]], [b[4], b[5]]]);
    opts.green = GreenKind::parse(green).ok_or(format!("--green: unknown kernel {green}"))?;
    if opts.green != GreenKind::Chat2 {
        opts.lengths = cells.map(|n| n as f64 / 10.0);
    }
    opts.field = match field {
        "scalar" => FieldMode::Scalar,
        "vector" => FieldMode::Vector,
        "curl" => FieldMode::Curl(Differentiation::Spectral),
        "curl-fd2" => FieldMode::Curl(Differentiation::Fd2),
        f => return Err(format!("--field: unknown field {f}")),
    };
    let comps = opts.components();
    if !component_bc.is_empty() {
        if component_bc.len() != 18 {
            return Err("--component-bc: eighteen conditions, six per component".into());
        }
        let b: Vec<Bc> = component_bc
            .iter()
            .map(|s| Bc::parse(s).ok_or(format!("--component-bc: unknown condition {s}")))
            .collect::<Result<_, _>>()?;
        opts.component_bc = Some([0, 1, 2].map(|c| [0, 1, 2].map(|a| [b[6 * c + 2 * a], b[6 * c + 2 * a + 1]])));
    }
    opts.centering = Centering::parse(centering).ok_or(format!("--centering: unknown centring {centering}"))?;
    let extents = opts.extents();
    opts.decomposition = Decomposition::parse(layout).ok_or(format!("layout = {layout}"))?;
    opts.backend = Backend::parse(backend).ok_or(format!("backend = {backend}"))?;
    let value = |c: usize, p: [usize; 3]| {
        let h = (c * 7919 + p[0] * 104_729 + p[1] * 1_299_709 + p[2] * 15_485_863) % 1_000_003;
        h as f64 / 1_000_003.0 - 0.5
    };
    let fill = |block: &[std::ops::Range<usize>; 3]| -> Vec<f64> {
        let mut v = Vec::new();
        for x in block[0].clone() {
            for y in block[1].clone() {
                for z in block[2].clone() {
                    v.extend((0..comps).map(|c| value(c, [x, y, z])));
                }
            }
        }
        v
    };
    let mut one = PoissonSolver::plan(&Comm::single(), opts.clone()).map_err(|e| e.to_string())?;
    let rhs = fill(&one.local_block());
    let mut whole = vec![0.0; rhs.len()];
    one.solve(&rhs, &mut whole).map_err(|e| e.to_string())?;
    let mut dist = PoissonSolver::plan(world, opts).map_err(|e| e.to_string())?;
    let block = dist.local_block();
    let rhs = fill(&block);
    let mut phi = vec![0.0; rhs.len()];
    dist.solve(&rhs, &mut phi).map_err(|e| e.to_string())?;
    let scale = whole.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let mut err = 0.0f64;
    let mut q = 0;
    for x in block[0].clone() {
        for y in block[1].clone() {
            for z in block[2].clone() {
                for c in 0..comps {
                    let w = whole[((x * extents[1] + y) * extents[2] + z) * comps + c];
                    err = err.max((phi[q] - w).abs() / scale);
                    q += 1;
                }
            }
        }
    }
    let err = world.max(err);
    if world.rank() == 0 {
        println!("poisson {bc:?} {green} {field} {centering} on {:?}: {err:.2e}", dist.proc_grid().dims);
    }
    Ok(err)
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
        Command::Ewald { kernel, n, tol, layout, backend, targets, bound, bad_rank, panic_rank, periodic, field } => {
            let field = field.as_deref();
            check_ewald(
                &world, &kernel, n, tol, &layout, &backend, targets, bound, bad_rank, panic_rank, &periodic, field,
            )
        }
        Command::Poisson { grid, bc, green, field, component_bc, centering, layout, backend } => {
            check_poisson(&world, &grid, &bc, &green, &field, &component_bc, &centering, &layout, &backend)
                .and_then(|e| {
                    if e <= 1e-13 {
                        Ok(())
                    } else {
                        Err(format!("Poisson check failed: {e:.3e} from one process (bound 1e-13)"))
                    }
                })
                .map_err(unsupported)
        }
        Command::FftAxes { grid, axes, comps, layout, backend, r2r, classes, plan } => if grid.len() != 3 {
            Err("--grid: expected three sizes".to_string())
        } else {
            parse_classes(&classes)
                .and_then(|k| {
                    check_fft_axes(
                        &world,
                        [grid[0], grid[1], grid[2]],
                        &axes,
                        comps,
                        &layout,
                        &backend,
                        &r2r,
                        &k,
                        &plan,
                    )
                })
                .and_then(|(f, r)| {
                    if f <= 1e-13 && r <= 1e-13 {
                        Ok(())
                    } else {
                        Err(format!("FFT axes check failed: forward {f:.3e}, round trip {r:.3e} (bound 1e-13)"))
                    }
                })
        }
        .map_err(unsupported),
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
