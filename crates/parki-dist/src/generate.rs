//! Seeded particle generators for run.toml's `generate = { ... }` and the tests:
//! `uniform` in the box, `normal` (sigma = 0.3 of each side around the centre, truncated to the
//! box), `sphere` (uniform on the sphere of radius 0.4 min(L) around the centre); strengths are
//! standard normal with the mean removed (zero net charge and force), normals are unit vectors.

use parki_core::{Domain, Error, Result};

/// xoshiro256** seeded by SplitMix64: fast, reproducible across platforms and versions.
#[derive(Clone, Debug)]
pub struct Rng([u64; 4]);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        let mut z = seed;
        let mut next = || {
            z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut x = z;
            x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            x ^ (x >> 31)
        };
        Self([next(), next(), next(), next()])
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.0;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, 1)`.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform();
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

/// Particle distributions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distribution {
    /// Uniform in the box.
    Uniform,
    /// Truncated normal, sigma = 0.3 L per axis, centred.
    Normal,
    /// Uniform on a centred sphere of radius 0.4 min(L).
    Sphere,
}

impl Distribution {
    /// Parses a run.toml name.
    pub fn from_name(name: &str, field: &str) -> Result<Self> {
        match name {
            "uniform" => Ok(Self::Uniform),
            "normal" => Ok(Self::Normal),
            "sphere" => Ok(Self::Sphere),
            other => Err(Error::OutOfRange {
                field: field.into(),
                value: format!("\"{other}\""),
                allowed: "\"uniform\", \"normal\" or \"sphere\"".into(),
            }),
        }
    }
}

/// `count` positions in `domain` (strictly inside `[0, L)`).
pub fn positions(domain: &Domain, dist: Distribution, count: usize, rng: &mut Rng) -> Vec<[f64; 3]> {
    let l = domain.lengths();
    let c = l.map(|v| 0.5 * v);
    let inside = |p: &[f64; 3]| (0..3).all(|d| p[d] >= 0.0 && p[d] < l[d]);
    (0..count)
        .map(|_| loop {
            let p = match dist {
                Distribution::Uniform => [rng.uniform() * l[0], rng.uniform() * l[1], rng.uniform() * l[2]],
                Distribution::Normal => [0, 1, 2].map(|d| c[d] + 0.3 * l[d] * rng.normal()),
                Distribution::Sphere => {
                    let v = unit_vector(rng);
                    let r = 0.4 * domain.min_length();
                    [c[0] + r * v[0], c[1] + r * v[1], c[2] + r * v[2]]
                }
            };
            if inside(&p) {
                break p;
            }
        })
        .collect()
}

/// A uniformly random unit vector.
pub fn unit_vector(rng: &mut Rng) -> [f64; 3] {
    loop {
        let v = [rng.normal(), rng.normal(), rng.normal()];
        let n = (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
        if n > 1e-12 {
            return [v[0] / n, v[1] / n, v[2] / n];
        }
    }
}

/// `count` standard normal scalars with the mean removed.
pub fn neutral_scalars(count: usize, rng: &mut Rng) -> Vec<f64> {
    let mut q: Vec<f64> = (0..count).map(|_| rng.normal()).collect();
    let mean = q.iter().sum::<f64>() / count.max(1) as f64;
    q.iter_mut().for_each(|v| *v -= mean);
    q
}

/// `count` standard normal vectors with the mean removed.
pub fn neutral_vectors(count: usize, rng: &mut Rng) -> Vec<[f64; 3]> {
    let mut f: Vec<[f64; 3]> = (0..count).map(|_| [rng.normal(), rng.normal(), rng.normal()]).collect();
    for d in 0..3 {
        let mean = f.iter().map(|v| v[d]).sum::<f64>() / count.max(1) as f64;
        f.iter_mut().for_each(|v| v[d] -= mean);
    }
    f
}

/// `count` standard normal vectors.
pub fn normal_vectors(count: usize, rng: &mut Rng) -> Vec<[f64; 3]> {
    (0..count).map(|_| [rng.normal(), rng.normal(), rng.normal()]).collect()
}
