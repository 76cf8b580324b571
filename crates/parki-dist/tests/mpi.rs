//! Distributed runs under `mpirun` at 1 to 4 ranks (oversubscribed): the distributed FFT against
//! serial FFTW, the distributed Ewald sum against the single-process solver for every kernel,
//! slab and pencil process grids and both switch backends, the neighbour-only re-sort of moved
//! particles, and failures that must stop every rank with the same message.

use std::process::{Command, Output};

fn mpirun(ranks: usize, args: &[&str]) -> Output {
    let exe = env!("CARGO_BIN_EXE_parki-check");
    Command::new("mpirun")
        .args(["-n", &ranks.to_string(), "--oversubscribe"])
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

fn fails_on_every_rank(ranks: usize, args: &[&str], message: &str) {
    let out = mpirun(ranks, args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "expected a failure: {err}");
    for r in 0..ranks {
        let line = err
            .lines()
            .find(|l| l.contains(&format!("parki-check (rank {r} of {ranks}): error:")))
            .unwrap_or_else(|| panic!("rank {r} did not report the error:\n{err}"));
        assert!(line.contains(message), "rank {r}: {line}");
    }
}

#[test]
fn failures_stop_every_rank_with_the_message() {
    // more ranks than cell layers / grid planes along z for a slab split
    fails_on_every_rank(
        4,
        &["ewald", "--n", "1500", "--layout", "slab"],
        "slab on 4 ranks is out of range: allowed is a process grid",
    );
    // bad input on one rank only
    fails_on_every_rank(3, &["ewald", "--n", "1500", "--bad-rank", "1"], "lies outside the box");
}
