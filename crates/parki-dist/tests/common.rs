//! Shared helpers of the integration tests.
#![allow(dead_code, missing_docs)]

use parki_core::{Domain, Kernel, Sources};
use parki_dist::generate::{self, Distribution, Rng};

/// A generated f64 problem.
pub struct Data {
    pub pos: Vec<[f64; 3]>,
    pub q: Vec<f64>,
    pub f: Vec<[f64; 3]>,
    pub d: Vec<[f64; 3]>,
    pub n: Vec<[f64; 3]>,
}

impl Data {
    pub fn new(domain: &Domain, dist: Distribution, count: usize, seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let pos = generate::positions(domain, dist, count, &mut rng);
        let q = generate::neutral_scalars(count, &mut rng);
        let f = generate::neutral_vectors(count, &mut rng);
        let d = generate::normal_vectors(count, &mut rng);
        let n = (0..count).map(|_| generate::unit_vector(&mut rng)).collect();
        Self { pos, q, f, d, n }
    }

    pub fn sources(&self) -> Sources<'_, f64> {
        Sources {
            positions: &self.pos,
            charges: Some(&self.q),
            forces: Some(&self.f),
            dipoles: Some(&self.d),
            normals: Some(&self.n),
        }
    }

    pub fn cast(&self) -> DataF32 {
        let c3 = |v: &Vec<[f64; 3]>| v.iter().map(|p| p.map(|x| x as f32)).collect::<Vec<_>>();
        DataF32 {
            pos: c3(&self.pos),
            q: self.q.iter().map(|&x| x as f32).collect(),
            f: c3(&self.f),
            d: c3(&self.d),
            n: c3(&self.n),
        }
    }
}

pub struct DataF32 {
    pub pos: Vec<[f32; 3]>,
    pub q: Vec<f32>,
    pub f: Vec<[f32; 3]>,
    pub d: Vec<[f32; 3]>,
    pub n: Vec<[f32; 3]>,
}

impl DataF32 {
    pub fn sources(&self) -> Sources<'_, f32> {
        Sources {
            positions: &self.pos,
            charges: Some(&self.q),
            forces: Some(&self.f),
            dipoles: Some(&self.d),
            normals: Some(&self.n),
        }
    }
    /// The f32 data as f64 (what the f32 solver sees).
    pub fn widen(&self) -> Data {
        let c3 = |v: &Vec<[f32; 3]>| v.iter().map(|p| p.map(|x| x as f64)).collect::<Vec<_>>();
        Data {
            pos: c3(&self.pos),
            q: self.q.iter().map(|&x| x as f64).collect(),
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
