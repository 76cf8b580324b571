//! Distributed runs under `mpirun` at 1 to 4 ranks (oversubscribed): the distributed FFT against
//! serial FFTW, the distributed Ewald sum against the single-process solver for every kernel,
//! slab and pencil process grids and both switch backends, the neighbour-only re-sort of moved
//! particles, and failures that must stop every rank with the same message.

use std::path::Path;
use std::process::{Command, Output};

use parki_app::npy;
use parki_reference::generate::{self, Distribution, Rng};

use crate::common::{self, Dir};

fn mpirun(ranks: usize, args: &[&str]) -> Output {
    let exe = env!("CARGO_BIN_EXE_parki-check");
    Command::new("timeout")
        .args(["600", "mpirun", "-n", &ranks.to_string(), "--oversubscribe"])
        .arg(exe)
        .args(args)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .output()
        .expect("mpirun must be installed (openmpi-bin); see README")
}

fn ok(ranks: usize, args: &[&str]) {
    let out = mpirun(ranks, args);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("{}", text.lines().next().unwrap_or(""));
    assert!(out.status.success(), "mpirun -n {ranks} parki-check {}: failed\n{text}", args.join(" "));
}

#[test]
fn distributed_fft_matches_serial_fftw() {
    for ranks in 1..=4 {
        for backend in ["alltoallv", "persistent"] {
            let mut layouts = vec!["slab"];
            if ranks > 1 {
                layouts.push("pencil");
            }
            for layout in layouts {
                ok(ranks, &["fft", "--grid", "12,10,8", "--comps", "3", "--layout", layout, "--backend", backend]);
                ok(ranks, &["fft", "--grid", "9,7,5", "--complex", "--layout", layout, "--backend", backend]);
            }
        }
    }
}

#[test]
fn distributed_axes_fft_matches_the_defining_sums() {
    // every kind, padding and semi-unbounded placement, each axis position in memory order
    let cases = [
        "unb,per,dct2",
        "even-unb,odd-unb,unb-even",
        "unb-odd,unb,unb",
        "per,even-unb,dst4",
        "dct3,dst4,unb",
        "dct1,dst1,dst3",
        "dct4,dst2,id",
        // every axis a DCT/DST-II/III: one 3-D FFTW plan on one rank (fftw), or FFTs (fft)
        "dct2,dst3,dst2",
    ];
    for ranks in 1..=4 {
        for (i, axes) in cases.iter().enumerate() {
            let layout = if ranks > 1 && i % 2 == 1 { "pencil" } else { "slab" };
            let backend = if (i + ranks) % 2 == 0 { "alltoallv" } else { "persistent" };
            // both ways of computing the DCT/DST-II, III and IV
            for r2r in ["fft", "fftw"] {
                let args = ["fft-axes", "--axes", axes, "--grid", "8,7,6", "--layout", layout, "--backend", backend];
                ok(ranks, &[&args[..], &["--r2r", r2r]].concat());
            }
        }
        // padding per periodic mode: the y and z transforms per class of x slots
        let layout = if ranks > 2 { "pencil" } else { "slab" };
        let classes = ["--classes", "1-3:9:7/3-4:7:6"];
        ok(
            ranks,
            &[&["fft-axes", "--axes", "per,unb,unb", "--grid", "8,7,6", "--layout", layout][..], &classes].concat(),
        );
        // the strided passes' blocks gathered and measured (every line kind: c2c, r2r, padded)
        for axes in ["even-unb,per,unb", "per,dct2,dst1"] {
            let args = ["fft-axes", "--axes", axes, "--grid", "8,7,6", "--layout", layout, "--r2r", "fftw"];
            ok(ranks, &[&args[..], &["--plan", "measure-lines"]].concat());
        }
    }
}

#[test]
fn distributed_poisson_matches_one_process() {
    let cases = [
        ("unb,unb,even,unb,per,per", "chat2", "scalar", ""),
        ("unb,odd,unb,unb,unb,unb", "hej4", "vector", ""),
        ("even,odd,per,per,odd,odd", "chat2", "vector", ""),
        ("per,per,unb,even,unb,unb", "hej6", "scalar", ""),
        ("per,per,unb,unb,unb,unb", "hej4", "curl", ""),
        // LGF2 with three and with two unbounded axes (the lattice tables on every rank)
        ("unb,unb,even,unb,unb,unb", "lgf2", "scalar", ""),
        ("unb,unb,unb,unb,per,per", "lgf2", "vector", ""),
        // node-centred data: the odd sides' pinned nodes, DCT-I/DST-I/DCT-III/DST-III lines
        ("odd,unb,even,odd,per,per", "lgf2", "node", ""),
        ("even,even,odd,even,unb,odd", "chat2", "node-vector", ""),
        // a vorticity between symmetry planes normal to y, semi-unbounded along z: per component
        (
            "per,per,odd,odd,even,unb",
            "chat2",
            "curl-fd2",
            "per,per,odd,odd,odd,unb,per,per,even,even,odd,unb,per,per,odd,odd,even,unb",
        ),
    ];
    for ranks in 1..=4 {
        for (i, (bc, green, field, comp_bc)) in cases.iter().enumerate() {
            let layout = if ranks > 1 && i % 2 == 1 { "pencil" } else { "slab" };
            let backend = if (i + ranks) % 2 == 0 { "alltoallv" } else { "persistent" };
            let (centering, field) = match *field {
                "node" => ("node", "scalar"),
                "node-vector" => ("node", "vector"),
                f => ("cell", f),
            };
            let mut args = vec![
                "poisson",
                "--bc",
                bc,
                "--green",
                green,
                "--field",
                field,
                "--centering",
                centering,
                "--layout",
                layout,
                "--backend",
                backend,
            ];
            if !comp_bc.is_empty() {
                args.extend(["--component-bc", comp_bc]);
            }
            ok(ranks, &args);
        }
    }
}

#[test]
fn distributed_ewald_matches_one_process() {
    for kernel in ["laplace", "stokeslet", "stresslet", "stokes"] {
        for ranks in 1..=4 {
            let backend = if ranks % 2 == 0 { "persistent" } else { "alltoallv" };
            let targets = if ranks % 2 == 1 { "--targets" } else { "--bound=1e-12" };
            ok(ranks, &["ewald", "--kernel", kernel, "--n", "5000", "--layout", "slab", "--backend", backend, targets]);
        }
        for backend in ["alltoallv", "persistent"] {
            ok(
                4,
                &["ewald", "--kernel", kernel, "--n", "2000", "--layout", "pencil", "--backend", backend, "--targets"],
            );
        }
        ok(3, &["ewald", "--kernel", kernel, "--n", "2000", "--layout", "pencil", "--backend", "persistent"]);
    }
}

/// `parki-check ewald` with `args` at 1 to 4 ranks: slab up to 3, pencil at 4, both switch
/// backends, separate targets on odd rank counts (then the moved particles' neighbour sort).
fn ewald_on_1_to_4_ranks(args: &[&str]) {
    ewald_on_1_to_4_ranks_at("1e-7", args)
}

/// [`ewald_on_1_to_4_ranks`] at tolerance `tol`.
fn ewald_on_1_to_4_ranks_at(tol: &str, args: &[&str]) {
    for ranks in 1..=4 {
        let backend = if ranks % 2 == 0 { "persistent" } else { "alltoallv" };
        let layout = if ranks == 4 { "pencil" } else { "slab" };
        let targets = if ranks % 2 == 1 { "--targets" } else { "--bound=1e-12" };
        let mut all = vec!["ewald", "--n", "1500", "--tol", tol, "--layout", layout, "--backend", backend, targets];
        all.extend_from_slice(args);
        ok(ranks, &all);
    }
}

/// Issue 11: free space and one or two periodic axes, distributed (slab and pencil over the
/// extended grid, free axes split or not) equal to one process.
#[test]
fn distributed_free_and_partly_periodic_ewald_matches_one_process() {
    for (periodic, kernel) in
        [("fff", "stokes"), ("ttf", "laplace"), ("ftt", "stokeslet"), ("tff", "stresslet"), ("fft", "stokes")]
    {
        ewald_on_1_to_4_ranks(&["--kernel", kernel, "--periodic", periodic]);
    }
}

/// Issue 11: the Laplace field, both far-field methods, distributed equal to one process.
#[test]
fn distributed_laplace_field_matches_one_process() {
    for (periodic, field) in
        [("ttt", "window"), ("ttt", "spectral"), ("fff", "window"), ("tft", "spectral"), ("fft", "window")]
    {
        ewald_on_1_to_4_ranks(&["--kernel", "laplace", "--periodic", periodic, "--field", field]);
    }
}

/// Loose tolerances: P2P's loose pair functions on packed rows (each rank's rows in its own x
/// frame), distributed equal to one process.
#[test]
fn distributed_loose_pairs_match_one_process() {
    for (periodic, kernel, field) in
        [("ttt", "laplace", "window"), ("fff", "stokes", "none"), ("ttf", "stokeslet", "none")]
    {
        let mut args = vec!["--kernel", kernel, "--periodic", periodic];
        if field != "none" {
            args.extend_from_slice(&["--field", field]);
        }
        ewald_on_1_to_4_ranks_at("1e-4", &args);
    }
}

/// The run failed, and rank 0 alone printed one error line naming the rank the error arose on
/// (`program: error (rank R of N): ...`) with every needle.
fn failed_once(out: &Output, program: &str, origin: usize, ranks: usize, needles: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "expected a failure: {err}");
    assert!(!err.contains("panicked"), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.contains(&format!("{program}: error"))).collect();
    assert_eq!(lines.len(), 1, "expected one error line:\n{err}");
    let head = format!("{program}: error (rank {origin} of {ranks}): ");
    assert!(lines[0].starts_with(&head), "expected {head:?}: {}", lines[0]);
    for n in needles {
        assert!(lines[0].contains(n), "{} lacks {n:?}", lines[0]);
    }
}

fn fails_on_every_rank(ranks: usize, origin: usize, args: &[&str], message: &str) {
    failed_once(&mpirun(ranks, args), "parki-check", origin, ranks, &[message]);
}

#[test]
fn failures_stop_every_rank_with_the_message() {
    // more ranks than cell layers / grid planes along z for a slab split
    fails_on_every_rank(
        4,
        0,
        &["ewald", "--n", "1500", "--layout", "slab"],
        "slab on 4 ranks is out of range: allowed is a process grid",
    );
    // bad input on one rank only
    fails_on_every_rank(3, 1, &["ewald", "--n", "1500", "--bad-rank", "1"], "lies outside the box");
}

// ---------------------------------------------------------------------------------------------
// The application: `mpirun -n R parki-dist run run.toml`

fn mpirun_app(ranks: usize, config: &Path) -> Output {
    common::mpirun_run(ranks, config)
}

fn app_one_process(config: &Path) -> Output {
    common::run_app(config)
}

fn succeeded(out: &Output, what: &str) -> String {
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{what}: failed\n{text}");
    text
}

fn rel_l2(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den).sqrt()
}

/// Source and target files of `n` and `n / 3` particles, a third of the sources on the cell
/// and subdomain planes `k / 6` of each side (and on the faces `0`).
fn write_inputs(dir: &Dir, n: usize) {
    let domain = parki_core::Domain::triply_periodic([1.0, 1.2, 0.9]).unwrap();
    let mut rng = Rng::new(11);
    let mut pos = generate::positions(&domain, Distribution::Uniform, n, &mut rng);
    for (i, p) in pos.iter_mut().enumerate().filter(|(i, _)| i % 3 == 0) {
        let axis = (i / 3) % 3;
        p[axis] = [1.0, 1.2, 0.9][axis] * ((i / 9) % 6) as f64 / 6.0;
    }
    let trg = generate::positions(&domain, Distribution::Normal, n / 3, &mut rng);
    let flat = |v: &[[f64; 3]]| v.iter().flatten().cloned().collect::<Vec<f64>>();
    npy::write(&dir.path("src.npy"), &[n, 3], &flat(&pos)).unwrap();
    npy::write(&dir.path("trg.npy"), &[n / 3, 3], &flat(&trg)).unwrap();
    npy::write(&dir.path("q.npy"), &[n], &generate::neutral_scalars(n, &mut rng)).unwrap();
    npy::write(&dir.path("f.npy"), &[n, 3], &flat(&generate::neutral_vectors(n, &mut rng))).unwrap();
    npy::write(&dir.path("d.npy"), &[n, 3], &flat(&generate::normal_vectors(n, &mut rng))).unwrap();
    npy::write(&dir.path("n.npy"), &[n, 3], &flat(&generate::normal_vectors(n, &mut rng))).unwrap();
}

fn app_config(kernel: &str, targets: bool, parallel: &str, output: &str) -> String {
    let densities = match kernel {
        "laplace" => "charges = \"q.npy\"",
        "stokeslet" => "forces = \"f.npy\"",
        "stresslet" => "dipoles = \"d.npy\"\nnormals = \"n.npy\"",
        _ => "forces = \"f.npy\"\ndipoles = \"d.npy\"\nnormals = \"n.npy\"",
    };
    let targets = if targets { "[targets]\npositions = \"trg.npy\"\n" } else { "" };
    format!(
        "[problem]\nkernel = \"{kernel}\"\nbox = [1.0, 1.2, 0.9]\ntolerance = 1e-8\n\
         [sources]\npositions = \"src.npy\"\n{densities}\n{targets}\
         [output]\npotential = \"{output}.npy\"\nreport = \"{output}.json\"\n[parallel]\n{parallel}\n"
    )
}

#[test]
fn application_on_r_ranks_matches_one_process() {
    let dir = Dir::new("app");
    write_inputs(&dir, 3000);
    let layouts: [(usize, &str); 3] = [
        (2, "decomposition = \"slab\"\nbackend = \"alltoallv\""),
        (3, "grid = [1, 3]\nbackend = \"persistent\""),
        (4, "grid = [2, 2]\nbackend = \"alltoallv\""),
    ];
    for (k, kernel) in ["laplace", "stokeslet", "stresslet", "stokes"].into_iter().enumerate() {
        let targets = k % 2 == 1;
        let one = dir.file("one.toml", &app_config(kernel, targets, "", "one"));
        succeeded(&app_one_process(&one), &format!("{kernel}: one process"));
        let reference = npy::read(&dir.path("one.npy"), "one").unwrap();
        for (i, &(ranks, parallel)) in layouts.iter().enumerate() {
            // the fourth layout alternates the backend of the pencil grid with the kernel
            let parallel = if ranks == 4 && k % 2 == 1 { "grid = [2, 2]\nbackend = \"persistent\"" } else { parallel };
            let cfg = dir.file("many.toml", &app_config(kernel, targets, parallel, "many"));
            let text = succeeded(&mpirun_app(ranks, &cfg), &format!("{kernel} on {ranks} ranks"));
            let u = npy::read(&dir.path("many.npy"), "many").unwrap();
            assert_eq!(u.shape, reference.shape);
            let d = rel_l2(&u.data, &reference.data);
            println!("{kernel}, {ranks} ranks, layout {i}: relative L2 difference {d:.3e}");
            assert!(d <= 1e-12, "{kernel} on {ranks} ranks: {d:.3e}");
            // rank 0 prints the tables once; the report names the ranks, the grid and the bytes
            assert_eq!(text.matches("process grid [P_y, P_z]").count(), 1, "{text}");
            let report: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(dir.path("many.json")).unwrap()).unwrap();
            assert_eq!(report["ranks"], ranks);
            let grid: Vec<u64> = serde_json::from_value(report["parallel"]["process_grid"].clone()).unwrap();
            assert_eq!(grid.iter().product::<u64>(), ranks as u64);
            let switch = if ranks == 4 { "fft_switch1" } else { "fft_switch2" };
            assert!(report["communication"][switch]["bytes_total"].as_u64().unwrap() > 0, "{report}");
            assert!(report["timings"]["P2P"]["max"].as_f64().unwrap() > 0.0);
        }
    }
}

#[test]
fn generated_particles_do_not_depend_on_the_rank_count() {
    let dir = Dir::new("gen");
    let cfg = "[problem]\nkernel = \"stokeslet\"\nbox = [1.0, 1.0, 1.0]\ntolerance = 1e-7\n\
               [sources]\ngenerate = { distribution = \"normal\", count = 4000, seed = 3 }\n\
               [output]\npotential = \"u.npy\"\n[run]\ncheck = 200\n";
    let cfg = dir.file("run.toml", cfg);
    let text = succeeded(&app_one_process(&cfg), "one process");
    let reference = npy::read(&dir.path("u.npy"), "u").unwrap();
    let text3 = succeeded(&mpirun_app(3, &cfg), "3 ranks");
    let u = npy::read(&dir.path("u.npy"), "u").unwrap();
    let d = rel_l2(&u.data, &reference.data);
    assert!(d <= 1e-12, "generated set on 3 ranks: {d:.3e}");
    // the distributed check against the classical sum gives the one-process error
    let err = |t: &str| -> f64 {
        let line = t.lines().find(|l| l.starts_with("check: relative RMS error")).expect("check line");
        line.split_whitespace().nth(4).unwrap().parse().unwrap()
    };
    let (e1, e3) = (err(&text), err(&text3));
    assert!(e1 <= 1e-7 && (e1 - e3).abs() <= 1e-3 * e1, "check: {e1:.4e} vs {e3:.4e}");
}

fn app_fails_on_every_rank(ranks: usize, origin: usize, config: &Path, message: &[&str]) {
    failed_once(&mpirun_app(ranks, config), "parki-dist", origin, ranks, message);
}

#[test]
fn application_failures_stop_every_rank_with_the_message() {
    let dir = Dir::new("appfail");
    write_inputs(&dir, 3000);
    // a file that ends inside the last rank's rows: every rank checks the whole file against
    // its header before planning, so the error comes from rank 0 before anything is read
    let bytes = std::fs::read(dir.path("f.npy")).unwrap();
    std::fs::write(dir.path("f.npy"), &bytes[..bytes.len() - 500 * 24]).unwrap();
    let cfg = dir.file("cut.toml", &app_config("stokeslet", false, "", "cut"));
    app_fails_on_every_rank(3, 0, &cfg, &["sources.forces", "truncated"]);
    // a NaN in the last rank's rows, named by its row in the file
    let mut f = npy::read(&dir.path("q.npy"), "q").unwrap().data;
    f[2950] = f64::NAN;
    npy::write(&dir.path("q.npy"), &[3000], &f).unwrap();
    let cfg = dir.file("nan.toml", &app_config("laplace", false, "", "nan"));
    app_fails_on_every_rank(3, 2, &cfg, &["sources.charges[2950]", "finite"]);
    // a process grid that does not match the rank count
    let cfg = dir.file("grid.toml", &app_config("stresslet", false, "grid = [3, 1]", "grid"));
    app_fails_on_every_rank(2, 0, &cfg, &["parallel.grid = [3, 1] on 2 ranks"]);
    // more ranks than the cells can be split over (3 cell layers along z)
    let slabs = "decomposition = \"slab\"\n[ewald]\nrc = 0.3";
    let cfg = dir.file("many.toml", &app_config("stresslet", false, slabs, "many"));
    app_fails_on_every_rank(4, 0, &cfg, &["slab on 4 ranks is out of range", "use fewer ranks"]);
    // a missing file
    std::fs::remove_file(dir.path("d.npy")).unwrap();
    let cfg = dir.file("missing.toml", &app_config("stresslet", false, "", "missing"));
    app_fails_on_every_rank(2, 0, &cfg, &["d.npy", "sources.dipoles"]);
    // an output directory that does not exist: refused on every rank before any input is read,
    // and nothing written
    let cfg = dir.file("outdir.toml", &app_config("stokeslet", false, "", "nodir/out"));
    let out = mpirun_app(2, &cfg);
    failed_once(&out, "parki-dist", 0, 2, &["nodir", "output.potential"]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("planned"));
}

#[test]
fn a_panic_on_one_rank_aborts_the_job() {
    let out = mpirun(3, &["ewald", "--n", "1500", "--panic-rank", "1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "expected the job to abort: {err}");
    assert!(err.contains("rank 1 of 3 panicked") && err.contains("injected failure"), "{err}");
}
