//! The memory-aware parameter selection of the device backend, on the host emulator with a
//! bounded memory: the grid shrinks to what the device holds (the tolerance still met), and a
//! device too small for any grid is refused with a message naming the device's limit. The test
//! runs in a process of its own (`crate::own_process`): the emulator's memory is process-wide.

use parki_core::{Domain, Kernel, Real};
use parki_dist::{Comm, DistEwaldSolver, EwaldOptions, ParallelOptions, PlanningQuery, SortMode, Targets};
use parki_gpu::{Emulator, GpuBackend};
use parki_reference::generate::{Distribution, Particles};

fn rel_rms<T: Real>(a: &[T], b: &[T]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x.to_f64() - y.to_f64()).powi(2)).sum();
    let den: f64 = b.iter().map(|y| y.to_f64().powi(2)).sum();
    (num / den).sqrt()
}

type Gpu = GpuBackend<f64, Emulator>;

#[test]
fn the_grid_fits_the_device() {
    if !crate::own_process("emulator_memory::the_grid_fits_the_device") {
        return;
    }
    let domain = Domain::triply_periodic([1.0, 1.2, 0.9]).unwrap();
    // enough particles that the cells are not at their minimum of 3 per axis: a grid half the
    // cost model's choice then needs a larger cut-off
    let (kernel, tol, n) = (Kernel::Stokeslet, 1e-8, 20000);
    let data = Particles::<f64>::new(&domain, Distribution::Uniform, n, 8);
    let opts = EwaldOptions::new(kernel, domain, tol).threads(1);
    let comm = Comm::single();
    let solve = || -> parki_core::Result<(Vec<f64>, parki_dist::Params)> {
        let mut s = DistEwaldSolver::<f64, Gpu>::with_backend(&comm, &opts, ParallelOptions::default(), n, n)?;
        let mut u = vec![0.0; 3 * n];
        s.evaluate(&data.sources(), Targets::Sources, &mut u, SortMode::default())?;
        Ok((u, s.params().clone()))
    };
    // unbounded: the cost model's choice
    let (u0, p0) = solve().unwrap();
    // a device whose budget is half that grid
    let query = PlanningQuery {
        kernel,
        field: false,
        ranks: 1,
        local_rank: 0,
        sources: n + 1,
        targets: n,
        device: Default::default(),
        free_axes: false,
    };
    let target = p0.grid_bytes / 2;
    let mut memory = 269u64 << 20;
    while Gpu::grid_budget(&query, memory) < target {
        memory += 1 << 16;
    }
    Emulator::set_memory(memory);
    let (u1, p1) = solve().unwrap();
    println!(
        "unbounded: grid {:?} ({} B), cells {:?}; device of {memory} B: grid {:?} ({} B), cells {:?}",
        p0.grid, p0.grid_bytes, p0.cells, p1.grid, p1.grid_bytes, p1.cells
    );
    assert!(p1.grid_bytes <= target, "{} > {target}", p1.grid_bytes);
    assert!(p1.rc > p0.rc, "a coarser grid needs a larger cut-off: {} vs {}", p1.rc, p0.rc);
    let d = rel_rms(&u1, &u0);
    println!("the two plans differ by {d:.2e} (tolerance {tol:e} each)");
    assert!(d < 2.0 * tol, "{d:e}");
    // a device with no room for any grid: refused, naming the device's limit
    Emulator::set_memory(260 << 20);
    match solve() {
        Err(parki_core::Error::Resource { message }) => {
            println!("{message}");
            assert!(message.contains("device"), "{message}");
        }
        other => panic!("expected a refusal, got {:?}", other.map(|r| r.1.grid)),
    }
    Emulator::set_memory(u64::MAX / 2);
}

/// A device on one rank holds the grid, its transforms and the cell lists: its memory bounds
/// the plan, and the host's estimate leaves them out (a 1e8-particle Stokeslet plan at 1e-9,
/// whose grid is about 100 GB, is made for a 4 TB emulated device whatever this host has; the
/// host's estimate is the upload staging and the results).
#[test]
fn the_device_holds_its_grid_not_the_host() {
    if !crate::own_process("emulator_memory::the_device_holds_its_grid_not_the_host") {
        return;
    }
    Emulator::set_memory(4 << 40);
    let domain = Domain::triply_periodic([1.0, 1.0, 1.0]).unwrap();
    let n = 100_000_000;
    let opts = EwaldOptions::new(Kernel::Stokeslet, domain, 1e-9);
    let comm = Comm::single();
    let p = DistEwaldSolver::<f64, Gpu>::parameters(&comm, &opts, ParallelOptions::default(), n, n).unwrap();
    let host = DistEwaldSolver::<f64, Gpu>::estimate_memory(&comm, &opts, ParallelOptions::default(), n, n).unwrap();
    println!("grid {:?}: {} GB on the device; host estimate {:?}", p.grid, p.grid_bytes as f64 / 1e9, host);
    assert!(p.grid_bytes as f64 > 50e9, "{}", p.grid_bytes);
    assert_eq!((host.grids, host.cell_lists), (0.0, 0.0));
    // staging (3 + 3 reals per source, 3 per target) and the results (3 reals twice and 8 bytes)
    let expect = n as f64 * (9.0 * 8.0 + 6.0 * 8.0 + 8.0);
    assert!((host.total - expect).abs() < 1e-9 * expect, "{} against {expect}", host.total);
    Emulator::set_memory(u64::MAX / 2);
}
