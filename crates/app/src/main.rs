//! The `parki-dist` command.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use parki_app::app::{self, error_line, RunArgs};
use parki_dist::Universe;

const RUN_TOML: &str = "\
run.toml (relative paths are relative to the file):

  [problem]
  kernel = \"laplace\"          # \"stokeslet\", \"stresslet\", \"stokes\" (single + double layer)
  box = [1.0, 1.2, 0.9]       # 3 side lengths; particles must lie in [0, L)
  periodic = [true, true, true]  # 3 entries, any combination: [false, false, false] free space
                              # (0P), [true, false, false] a periodic pipe (1P), [true, true,
                              # false] a periodic sheet (2P); along a free axis the box is the
                              # particles' extent. 1P/2P laplace and stokeslet need zero net
                              # charge / force
  tolerance = 1e-9            # relative RMS error; f64: 1e-13..1e-2, f32: 1e-6..1e-2
  precision = \"f64\"           # or \"f32\"
  wrap = false                # true: map coordinates into [0, L) along periodic axes (in f64,
                              # before f32 rounding: any distance from the box is exact)

  [sources]                   # .npy files (float64 or float32)...
  positions = \"src.npy\"       # (N,3)
  charges = \"q.npy\"           # laplace: (N,)
  forces = \"f.npy\"            # stokeslet, stokes: (N,3)
  dipoles = \"d.npy\"           # stresslet, stokes: q, (N,3)
  normals = \"n.npy\"           # stresslet, stokes: n, (N,3)
                              # (strengths the kernel does not use are ignored, with a warning;
                              # with precision = \"f32\" every strength must be finite in f32)
  # ...or: generate = { distribution = \"uniform\", count = 1000000, seed = 1 }
  #   \"uniform\" in the box, \"normal\" (sigma 0.3 L, truncated), \"sphere\" (surface);
  #   strengths are random with zero net charge and force

  [targets]                   # optional; absent: the targets are the sources
  positions = \"trg.npy\"       # or generate = { ... }

  [output]                    # without it (and without --json) a run only prints timings
  potential = \"u.npy\"         # (Nt,) or (Nt,3) float64, input order
  field = \"e.npy\"             # laplace only: the field E = -grad u, (Nt,3) float64, input order
  report = \"report.json\"      # provenance, parameters, per-stage times, error estimate, check
                              # (every field with its unit: docs/report.md)
  # Outputs are checked before anything is read or computed: an output that is an input
  # (or the run.toml, or the other output) is refused, and so is a directory that is missing
  # or not writable. Then the outputs of an earlier run at these paths are removed; the new
  # ones are written to hidden temporary files in the same directories and renamed into place
  # when complete. A failed run leaves neither a partial nor a stale output behind.

  [ewald]                     # optional overrides of the automatic parameters
  rc = 0.1                    # real-space cut-off (or cell_size = mean sources per cell)
  window_support = 8          # P, even, 4..32
  oversampling = 1.2          # grid refinement over the Fourier truncation's need, 1..4
  p2g = \"blocked\"             # or \"scatter\" (atomic baseline)
  g2p = \"sorted\"              # or \"base\"
  field_method = \"window\"     # the field's far part: the window's derivative in G2P, or
                              # \"spectral\" (-i k in CNV: three more inverse transforms)
  fft_plan = \"estimate\"       # \"measure-lines\": the y and z passes' blocks by measured
                              # plans (0.05-0.2 s more per line length, up to 1.4x faster
                              # free-axis and distributed FFTs); \"measure\": every plan (seconds);
                              # measured plans are saved as FFTW wisdom ([run] fftw_wisdom)
  isa = \"avx512\"              # P2P instruction set: \"avx512\", \"avx2\", \"scalar\"
  pair_accuracy = \"auto\"      # P2P's exp/erfc: \"auto\" (in f64 \"loose\", about
                              # 1e-6 per pair, from tolerance 1e-5 on; \"medium\", about 1e-11,
                              # from 1e-10), \"full\", \"medium\" or \"loose\" (on a device
                              # \"loose\" runs as \"medium\")
  near_cutoff = \"sphere\"      # P2P's pairs: those within the cut-off sphere the selection
                              # picks (where the error estimate does not grow), or \"cells\"
                              # (every pair of the 27 colleague cells)
  occupancy = \"measured\"      # the cell size from the particles' actual pairs (clustered sets
                              # get a smaller cut-off and a finer grid), or \"uniform\"
  cost_model = \"auto\"         # the parameter choice's cost constants: \"auto\" (those
                              # `parki-dist calibrate` saved on this CPU, else built in),
                              # \"builtin\", or a calibration file's path

  [run]
  threads = 0                 # 0: all cores
  check = 0                   # measure the error on K random targets (classical Ewald)
  repeat = 1                  # evaluate R >= 1 times (timings of the last)
  max_grid_gb = 8.0           # grid memory limit per rank (default: half the available memory
                              # over the ranks of the node)
  backend = \"cpu\"             # or \"cuda\" (a binary built with --features cuda, a driver and a
                              # device on every rank; else an error), or \"auto\": CUDA where a
                              # device opens on every rank, else the CPU (rank 0 says why)
  p2p = \"gm1d\"                # device P2P: or \"shared\" (a block per cell, shared memory)
  spread = \"auto\"             # device P2G: as [ewald] p2g, or \"operator\" (precomputed)
  device_fft = \"batched\"      # device FFTs: one plan over the grid's components, or
                              # \"components\" (one component's, run per component: less memory)
  device_overlap = \"none\"     # or \"p2p\": P2P on a second device stream beside the far field
  fftw_wisdom = \"auto\"        # FFTW wisdom folder: measured plans are saved there and every
                              # later run on this CPU plans them at once (estimate too); \"auto\":
                              # $PARKI_FFTW_WISDOM, else ~/.cache/parki; \"off\", or a folder

  [parallel]                  # runs on several MPI ranks: mpirun -n R parki-dist run run.toml
  grid = \"auto\"               # or [P_y, P_z] with P_y P_z = R (the y and z axes are split)
  decomposition = \"auto\"      # \"slab\" ([1, R]), \"pencil\" (2-D), \"auto\": slabs when they fit
  backend = \"alltoallv\"       # FFT switches and grid exchanges: or \"persistent\" (MPI_Send_init/
                              # MPI_Recv_init, MPI_Startall, blocks unpacked as they arrive)
  # Each rank reads its own rows of the .npy inputs (or generates them); the potential is
  # written in the global input order. Rank 0 prints progress and the tables: per-stage
  # seconds min/avg/max over ranks, and bytes sent per communication stage. An error on any
  # rank stops every rank; rank 0 prints it once: parki-dist: error (rank R of N): message.

A grid Poisson problem, lap(phi) = f (FLUPS-style; examples/poisson):

  [problem]
  equation = \"poisson\"
  box = [1.0, 1.0, 2.0]
  grid = [64, 64, 128]        # cells per axis
  centering = \"cell\"          # values at cell centres (i + 1/2) h; \"node\": at the nodes
                              # i h, N + 1 per axis (N on a periodic one), 0 on odd sides
  bc = [[\"unb\", \"unb\"], [\"even\", \"odd\"], [\"per\", \"per\"]]   # per axis [low, high]:
                              # per, even, odd, unb; a side may list one word per component
                              # of a vector or curl field: [\"odd\", \"even\", \"odd\"]
  green = \"chat2\"           # hej2, hej4, hej6, hej8, hej10, hej0, lgf2 (HEJ, LGF: equal cells)
  alpha = 2.0                 # HEJ smoothing eps / h
  field = \"scalar\"          # \"vector\" (3 components), \"curl\": u = curl psi, lap psi = -f
  differentiation = \"spectral\"   # curl only: or \"fd2\" (second-order central differences)

  [input]
  rhs = \"f.npy\"             # (n0,n1,n2) or (n0,n1,n2,3) float64/float32, C order (x slowest);
                              # each rank reads its own block
  # or: generate = { field = \"blob\" }: the manufactured field of the validation; the run
  #     reports the error against its exact solution

  [output]
  solution = \"phi.npy\"      # the right-hand side's layout, float64
  report = \"report.json\"

  [run]
  threads = 1                 # per rank
  repeat = 1                  # solves with one plan (timings of the last)
  fft_plan = \"estimate\"     # or \"measure-lines\" or \"measure\" (as in the Ewald run.toml)
  fftw_wisdom = \"auto\"      # as in the Ewald run.toml
  r2r = \"fft\"               # DCT/DST-II, III, IV through FFTs; \"fftw\": FFTW's r2r

  [parallel]                  # as above; grid = [P_1, P_2] splits the transform's 2nd and 3rd
                              # axes in memory order (printed at plan time)

The free-space treecode (BLDTT; examples/treecode), on any number of ranks (RCB by Zoltan, LET by one-sided MPI):

  [problem]
  method = \"treecode\"
  kernel = \"yukawa\"          # laplace, yukawa, regularized-coulomb, regularized-yukawa,
                              # sin-over-r, stokeslet, stresslet, stokes
  kappa = 0.5                 # yukawa kernels; epsilon: regularised; wavenumber: sin-over-r
  tolerance = 1e-8            # relative l2: sets degree, theta and leaf sizes (a measured table)
  periodic = [false, false, false]   # optional; free space only

  [sources]                   # positions and charges, forces, dipoles + normals as above, or
  generate = { distribution = \"plummer\", count = 1000000, seed = 1 }
                              # uniform, gaussian, plummer, slab, rod, shell
  [targets]                   # optional: positions, or generate

  [treecode]                  # optional: each key overrides the tolerance's choice
  degree = 8                  # interpolation degree (1..16), (n + 1)^3 proxies per cluster
  theta = 0.7                 # MAC (0 <= theta < 1; 0: the direct sum)
  max_leaf = 2000             # sources per leaf (default 1.5 (n + 1)^3)
  max_batch = 2000            # targets per leaf
  isa = \"avx512\"            # or avx2, scalar (default: the best available)

  [output]
  potential = \"u.npy\"
  report = \"report.json\"      # parameters and their origin, list counts, stage times, check

  [run]
  threads = 2
  check = 1000                # error against the direct sum on 1000 targets
  repeat = 1

The free-space fast multipole method (examples/fmm), on any number of ranks (Morton partition, LET by
one-sided MPI):

  [problem]
  method = \"fmm\"
  kernel = \"laplace\"         # or \"stokeslet\" (four harmonic FMMs)
  tolerance = 1e-8            # relative l2 of the potential (and field): sets the order
  periodic = [false, false, false]   # optional; free space only

  [sources]                   # positions and charges (laplace) or forces (stokeslet), or generate
  generate = { distribution = \"plummer\", count = 1000000, seed = 1 }
  [targets]                   # optional: positions, or generate

  [fmm]                       # optional: each key overrides the tolerance's or the cost model's choice
  order = 12                  # expansion order p (p^2 coefficients)
  max_leaf = 256              # points per leaf (default: the cost model's choice)
  stencil = true              # the paper's modified stencil (false: the 189-box list)
  isa = \"avx512\"            # or avx2, scalar

  [output]
  potential = \"u.npy\"         # (M,) laplace, (M, 3) stokeslet velocity
  field = \"e.npy\"             # laplace: E = -grad u, (M, 3)
  report = \"report.json\"

  [run]
  threads = 2
  check = 1000
  repeat = 1

method = \"auto\" picks the fastest method for the run by the cost models of the FMM, the treecode
and the free-space Ewald sum (periodic axes: the Ewald sum), priced on a sample of the particles;
the chosen method runs the same run.toml and the report's `auto` section has every estimate
(with [run] backend = \"cuda\", or \"auto\" finding a device, priced on the device):

  [problem]
  method = \"auto\"
  kernel = \"laplace\"         # the candidates are the methods with this kernel
  tolerance = 1e-6            # required
  box = [1.0, 1.0, 1.0]       # optional: with particles from files in it, the Ewald sum (0P) competes
  [sources]                   # [sources], [targets], [output] and [run] as above; no [fmm],
  positions = \"x.npy\"       # [treecode], [ewald] or [parallel] (choose the method to set them)
  charges = \"q.npy\"
";

#[derive(Parser, Debug)]
#[command(
    name = "parki-dist",
    version,
    about = "Fast particle-kernel summation (spectral Ewald for Laplace and Stokes kernels to a tolerance) and grid \
             Poisson solves with per-axis boundary conditions",
    after_long_help = RUN_TOML
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Evaluate the potential described by a run.toml.
    #[command(after_long_help = RUN_TOML)]
    Run {
        /// The run.toml.
        config: PathBuf,
        /// Measure the relative RMS error on K random targets against a reference sum (classical
        /// Ewald in 3P, the free-space direct sum in 0P, image sums in 1P and 2P).
        #[arg(long, value_name = "K")]
        check: Option<usize>,
        /// Threads (default: [run] threads, else all cores).
        #[arg(long, value_name = "N")]
        threads: Option<usize>,
        /// Evaluate R >= 1 times with one plan (timings of the last evaluation).
        #[arg(long, value_name = "R")]
        repeat: Option<usize>,
        /// No progress lines on stderr.
        #[arg(long)]
        quiet: bool,
        /// Print the JSON report on stdout instead of the timing table.
        #[arg(long)]
        json: bool,
    },
    /// Measure this machine's cost constants of the spectral Ewald sum (the parameter choice's
    /// model: P2P, P2G, FFT, CNV, G2P, and the plan of free axes) and save them; later runs on
    /// this CPU use them (`[ewald] cost_model = "auto"`, the default). About a minute on two
    /// cores with the default particles.
    Calibrate {
        /// Threads, as the runs will use (default: all cores).
        #[arg(long, value_name = "N")]
        threads: Option<usize>,
        /// Uniform particles of the measured evaluations.
        #[arg(long, value_name = "N", default_value_t = 200_000)]
        particles: usize,
        /// Where to save (default: $PARKI_COST_MODEL, else ~/.cache/parki/cost-model.toml).
        #[arg(long, value_name = "PATH")]
        output: Option<PathBuf>,
        /// No progress lines on stderr.
        #[arg(long)]
        quiet: bool,
    },
}

/// `parki-dist calibrate`: measures on rank 0 of one process, saves, prints the file.
fn calibrate(threads: Option<usize>, particles: usize, output: Option<PathBuf>, quiet: bool) -> parki_dist::Result<()> {
    use parki_app::calibrate;
    let path = output.or_else(calibrate::default_path).ok_or_else(|| parki_dist::Error::Missing {
        field: "calibrate --output".into(),
        reason: "neither $PARKI_COST_MODEL nor $XDG_CACHE_HOME nor $HOME is set".into(),
    })?;
    let threads = threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if !quiet {
        eprintln!("[parki-dist] calibrating on {threads} thread(s), {particles} particles: {}", calibrate::this_cpu());
    }
    let mut progress = |line: &str| {
        if !quiet {
            eprintln!("[parki-dist] {line}");
        }
    };
    let cal = calibrate::measure(threads, particles, &mut progress)?;
    cal.save(&path)?;
    print!("{}", cal.to_toml());
    if !quiet {
        eprintln!("[parki-dist] wrote {}", path.display());
    }
    Ok(())
}

fn main() -> ExitCode {
    let universe = match Universe::init() {
        Ok(u) => u,
        Err(e) => {
            let line = format!("parki-dist: error: {e}\n");
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            return ExitCode::from(2);
        }
    };
    universe.abort_on_panic();
    let world = universe.world();
    let cli = Cli::parse();
    match cli.command {
        Command::Calibrate { threads, particles, output, quiet } => {
            if world.size() > 1 {
                if world.rank() == 0 {
                    eprintln!("parki-dist: error: calibrate runs on one process (it measures one rank's threads)");
                }
                return ExitCode::from(2);
            }
            match calibrate(threads, particles, output, quiet) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("{}", error_line("parki-dist", &e, 1));
                    ExitCode::from(2)
                }
            }
        }
        Command::Run { config, check, threads, repeat, quiet, json } => {
            let command_line = std::env::args().collect();
            let args = RunArgs { config, check, threads, repeat, quiet, json, command_line };
            // every rank returns (errors are agreed on inside); agreeing once more gives rank 0
            // the error of the lowest failing rank even where a step failed on one rank only
            match world.agree(app::run(&args, &world)) {
                Ok(s) => {
                    if world.rank() == 0 {
                        if json {
                            println!("{}", serde_json::to_string_pretty(&s.report).expect("report serialises"));
                        } else {
                            print!("{}", s.table);
                            if let Some(c) = s.report.get("check").filter(|c| !c.is_null()) {
                                if c["reference_rms"].as_f64().is_some_and(|r| r > 0.0) {
                                    println!(
                                        "check: relative RMS error {:.3e} on {} targets",
                                        c["relative_rms_error"].as_f64().unwrap_or(f64::NAN),
                                        c["targets"]
                                    );
                                } else {
                                    println!(
                                        "check: the reference is zero on {} targets, largest absolute error {:.3e}",
                                        c["targets"],
                                        c["max_abs_error"].as_f64().unwrap_or(f64::NAN)
                                    );
                                }
                                if let Some(e) = c["field"]["relative_rms_error"].as_f64() {
                                    println!("check: field relative RMS error {e:.3e}");
                                }
                            }
                        }
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    if world.rank() == 0 {
                        eprintln!("{}", error_line("parki-dist", &e, world.size()));
                    }
                    ExitCode::from(2)
                }
            }
        }
    }
}
