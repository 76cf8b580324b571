//! Shared helpers of the integration tests.
#![allow(dead_code, missing_docs)]

use parki_core::{Domain, Kernel, Real, Sources};
use parki_reference::generate::{self, Distribution, Rng};

/// A generated problem in precision `T`.
pub struct Data<T = f64> {
    pub pos: Vec<[T; 3]>,
    pub q: Vec<T>,
    pub f: Vec<[T; 3]>,
    pub d: Vec<[T; 3]>,
    pub n: Vec<[T; 3]>,
}

impl Data<f64> {
    pub fn new(domain: &Domain, dist: Distribution, count: usize, seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let pos = generate::positions(domain, dist, count, &mut rng);
        let q = generate::neutral_scalars(count, &mut rng);
        let f = generate::neutral_vectors(count, &mut rng);
        let d = generate::normal_vectors(count, &mut rng);
        let n = (0..count).map(|_| generate::unit_vector(&mut rng)).collect();
        Self { pos, q, f, d, n }
    }

    /// The data rounded to f32.
    pub fn cast(&self) -> Data<f32> {
        self.convert()
    }
}

impl Data<f32> {
    /// The f32 data as f64 (what the f32 solver sees).
    pub fn widen(&self) -> Data<f64> {
        self.convert()
    }
}

impl<T: Real> Data<T> {
    pub fn sources(&self) -> Sources<'_, T> {
        Sources {
            positions: &self.pos,
            charges: Some(&self.q),
            forces: Some(&self.f),
            dipoles: Some(&self.d),
            normals: Some(&self.n),
        }
    }

    fn convert<U: Real>(&self) -> Data<U> {
        let c3 = |v: &Vec<[T; 3]>| v.iter().map(|p| p.map(|x| U::from_f64(x.to_f64()))).collect::<Vec<_>>();
        Data {
            pos: c3(&self.pos),
            q: self.q.iter().map(|&x| U::from_f64(x.to_f64())).collect(),
            f: c3(&self.f),
            d: c3(&self.d),
            n: c3(&self.n),
        }
    }
}

/// `||a - b|| / ||b||`.
pub fn rel_rms<A: Copy + Into<f64>>(a: &[A], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let num: f64 = a.iter().zip(b).map(|(x, y)| ((*x).into() - y).powi(2)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den).sqrt()
}

pub fn box_unequal() -> Domain {
    Domain::triply_periodic([1.0, 1.2, 0.9]).unwrap()
}

pub const KERNELS: [Kernel; 4] = Kernel::ALL;

/// Runs the test `test` (its path in this binary) again on `ranks` ranks under `mpirun`, with
/// `child_env` set so that it runs as a child (one rayon thread each, under a 300 s `timeout`:
/// a rank that panics leaves the others waiting in a collective); asserts that every rank
/// succeeded and returns their output, or `None` when built without MPI.
pub fn mpirun_child(test: &str, child_env: &str, ranks: usize) -> Option<String> {
    if !parki_dist::Universe::has_mpi() {
        println!("skipped: built without MPI");
        return None;
    }
    let out = std::process::Command::new("timeout")
        .args(["300", "mpirun", "-n", &ranks.to_string(), "--oversubscribe"])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env(child_env, "1")
        .env("RAYON_NUM_THREADS", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("mpirun must be installed (openmpi-bin)");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "mpirun -n {ranks}: {text}");
    Some(text)
}
