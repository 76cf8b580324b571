//! `parki-check`: self-checks of a parki-dist installation under `mpirun`, used by the test
//! suite and useful on a new cluster.
//!
//! - `parki-check fft`: the distributed FFT against a serial FFTW transform of the whole field
//!   (computed on every rank) and forward-then-backward against the input.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use parki_comm::{Backend, Comm, Universe};
use parki_decomp::{Decomposition, GridLayout, ProcGrid};
use parki_fft3d::{DistFft, DistFftOptions, Fft3d, GridBuffer, PlanRigor};

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
        let mut s = DistFft::<f64>::new(&single, grid, ProcGrid::slab(1), DistFftOptions { complex, ..DistFftOptions::new(comps) })
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
    let universe = Universe::init();
    let world = universe.world();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Fft { grid, comps, layout, backend, complex, threads } => {
            if grid.len() != 3 {
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
        }
    };
    let agreed = world.agree(result.map_err(|m| parki_core::Error::Unsupported { what: m }));
    match agreed {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("parki-check (rank {} of {}): error: {e}", world.rank(), world.size());
            ExitCode::from(1)
        }
    }
}
