//! Green's functions of `lap(phi) = f` (digest seed-002 §3, with the errata of §8), in the
//! reductions the boundary conditions call for: with `u` unbounded (or semi-unbounded) axes,
//! `G(r)` (u = 3), `G~(r, k)` partially Fourier-transformed along one spectral axis (u = 2),
//! `G~(|x|, kappa)` along two (u = 1), and `G^(k)` (u = 0).

use std::f64::consts::PI;

use parki_core::{Error, Result};

use crate::special::{e1, erf, erfc, erfcx, k0, k1, si, EULER_GAMMA};

/// The Green's functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GreenKind {
    /// The singular kernel with the cell average at the singular point; order 2 (spectral in
    /// fully spectral domains).
    Chat2,
    /// Gaussian-regularised of order `m` (2, 4, 6, 8, 10), `eps = alpha h` (Hejlesen et al.).
    Hej(u32),
    /// The spectrally truncated kernel `G_inf`, `sigma = h / pi` (Hejlesen, Winckelmans &
    /// Walther 2019).
    Hej0,
    /// The lattice Green's function of the 7-point Laplacian; order 2.
    Lgf2,
}

impl GreenKind {
    /// Name in run.toml: `chat2`, `hej2` .. `hej10`, `hej0`, `lgf2`.
    pub fn name(self) -> String {
        match self {
            GreenKind::Chat2 => "chat2".into(),
            GreenKind::Hej(m) => format!("hej{m}"),
            GreenKind::Hej0 => "hej0".into(),
            GreenKind::Lgf2 => "lgf2".into(),
        }
    }

    /// Parses a name of [`name`](Self::name).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "chat2" => Some(GreenKind::Chat2),
            "hej0" => Some(GreenKind::Hej0),
            "lgf2" => Some(GreenKind::Lgf2),
            _ => {
                let m: u32 = s.strip_prefix("hej")?.parse().ok()?;
                [2, 4, 6, 8, 10].contains(&m).then_some(GreenKind::Hej(m))
            }
        }
    }

    /// The nominal order of convergence (`None`: spectral-like).
    pub fn order(self) -> Option<u32> {
        match self {
            GreenKind::Chat2 | GreenKind::Lgf2 => Some(2),
            GreenKind::Hej(m) => Some(m),
            GreenKind::Hej0 => None,
        }
    }

    /// Whether the kernel needs an isotropic grid.
    pub fn needs_isotropic(self) -> bool {
        !matches!(self, GreenKind::Chat2)
    }
}

/// `zeta^_m(s) = D_m(s) e^{-s^2/2}`, `D_m = sum_{n < m/2} (s^2/2)^n / n!` (digest §3.1).
pub fn zeta_hat(m: u32, s: f64) -> f64 {
    let x = 0.5 * s * s;
    let (mut term, mut d) = (1.0, 1.0);
    for n in 1..m / 2 {
        term *= x / n as f64;
        d += term;
    }
    d * (-x).exp()
}

/// A Green's function with its grid parameters.
#[derive(Clone, Copy, Debug)]
pub struct Green {
    /// The kernel.
    pub kind: GreenKind,
    /// Cell sizes.
    pub h: [f64; 3],
    /// Regularisation length: `eps = alpha h` (HEJ), `sigma = h / pi` (HEJ0).
    pub eps: f64,
}

impl Green {
    /// The kernel `kind` on cells `h`, `alpha` the HEJ smoothing ratio `eps / h`; an error when
    /// the kernel needs an isotropic grid and `h` is not.
    pub fn new(kind: GreenKind, h: [f64; 3], alpha: f64) -> Result<Self> {
        if kind.needs_isotropic() && (h.iter().any(|&v| (v - h[0]).abs() > 1e-12 * h[0])) {
            return Err(Error::OutOfRange {
                field: "problem.green".into(),
                value: format!("\"{}\" with cell sizes {h:?}", kind.name()),
                allowed: "\"chat2\" on an anisotropic grid (HEJ and LGF kernels need equal cell sizes)".into(),
            });
        }
        let eps = match kind {
            GreenKind::Hej(_) => alpha * h[0],
            GreenKind::Hej0 => h[0] / PI,
            _ => 0.0,
        };
        Ok(Self { kind, h, eps })
    }

    /// Whether the kernel has a form for `u` non-spectral axes; an error naming the gap.
    pub fn check_reduction(&self, u: usize) -> Result<()> {
        let ok = match self.kind {
            GreenKind::Chat2 | GreenKind::Hej(_) => true,
            GreenKind::Hej0 => u == 0 || u == 3,
            GreenKind::Lgf2 => true,
        };
        if ok {
            Ok(())
        } else {
            Err(Error::Unsupported {
                what: format!(
                    "green = \"{}\" with {u} unbounded or semi-unbounded axes (available: chat2 and hej2..hej10 for \
                     every combination, hej0 fully unbounded or fully spectral)",
                    self.kind.name()
                ),
            })
        }
    }

    /// `G(r)`, three non-spectral axes (digest §3.2, B.1). LGF2 is not radial: the solver takes
    /// it from [`crate::lgf::Lattice3`]; here it falls back to CHAT2's form, its continuum limit.
    pub fn g3(&self, r: f64) -> f64 {
        match self.kind {
            GreenKind::Chat2 | GreenKind::Lgf2 => {
                if r > 0.0 {
                    -1.0 / (4.0 * PI * r)
                } else {
                    // the average over the sphere of the cell's volume (erratum 1)
                    let big_r = (3.0 * self.h[0] * self.h[1] * self.h[2] / (4.0 * PI)).cbrt();
                    -3.0 / (8.0 * PI * big_r)
                }
            }
            GreenKind::Hej(m) => {
                let eps = self.eps;
                if r == 0.0 {
                    let c = match m {
                        2 => 0.25,
                        4 => 0.375,
                        6 => 15.0 / 32.0,
                        8 => 35.0 / 64.0,
                        _ => 315.0 / 512.0,
                    };
                    return -c * 2f64.sqrt() / (PI.powf(1.5) * eps);
                }
                let rho = r / eps;
                let p2 = rho * rho;
                let q = match m {
                    2 => 0.0,
                    4 => rho,
                    6 => rho * (7.0 / 4.0 - p2 / 4.0),
                    8 => rho * (19.0 / 8.0 - 2.0 / 3.0 * p2 + p2 * p2 / 24.0),
                    _ => rho * (187.0 / 64.0 - 233.0 / 192.0 * p2 + 29.0 / 192.0 * p2 * p2 - p2 * p2 * p2 / 192.0),
                } / (2.0 * PI).sqrt();
                -(q * (-0.5 * p2).exp() + erf(rho / 2f64.sqrt())) / (4.0 * PI * r)
            }
            GreenKind::Hej0 => {
                let sigma = self.eps;
                if r == 0.0 {
                    -1.0 / (2.0 * PI * PI * sigma)
                } else {
                    let rho = r / sigma;
                    -si(rho) / (rho * 2.0 * PI * PI * sigma)
                }
            }
        }
    }

    /// `G~(r, k)`, two non-spectral axes of cell sizes `cell` and one spectral wavenumber `k`
    /// (digest §3.3, B.2, errata 2). `None` where the kernel is given in full Fourier space
    /// instead (HEJ at `k != 0`, the approximation B.12 of Spietz et al.): see
    /// [`spectral`](Self::spectral).
    pub fn g2(&self, r: f64, k: f64, cell: [f64; 2]) -> Option<f64> {
        let k = k.abs();
        match self.kind {
            GreenKind::Hej(m) => {
                if k > 0.0 {
                    return None;
                }
                let eps = self.eps;
                let rm = |p2: f64| match m {
                    2 => 0.0,
                    4 => 0.5,
                    6 => 0.75 - p2 / 8.0,
                    8 => 11.0 / 12.0 - 7.0 * p2 / 24.0 + p2 * p2 / 48.0,
                    _ => 25.0 / 24.0 - 23.0 * p2 / 48.0 + 13.0 * p2 * p2 / 192.0 - p2 * p2 * p2 / 384.0,
                };
                if r == 0.0 {
                    return Some(-(EULER_GAMMA / 2.0 - (2f64.sqrt() * eps).ln() + rm(0.0)) / (2.0 * PI));
                }
                let rho = r / eps;
                let p2 = rho * rho;
                Some((r.ln() - rm(p2) * (-0.5 * p2).exp() + 0.5 * e1(0.5 * p2)) / (2.0 * PI))
            }
            _ => {
                // CHAT2 (HEJ0 is refused by check_reduction; the solver takes LGF2 from
                // crate::lgf::Lattice2 at k = 0 and from the spectral form elsewhere)
                if r > 0.0 {
                    Some(if k == 0.0 { r.ln() / (2.0 * PI) } else { -k0(k * r) / (2.0 * PI) })
                } else if k == 0.0 {
                    // (1/2pi) times the average of ln r over the a x b cell, a, b the half sides
                    let (a, b) = (cell[0] / 2.0, cell[1] / 2.0);
                    let integral =
                        a * b * ((a * a + b * b).ln() - 3.0) + a * a * (b / a).atan() + b * b * (a / b).atan();
                    Some(0.5 * integral / (a * b) / (2.0 * PI))
                } else {
                    // the average over the disk of the cell's area
                    let x = k * (cell[0] * cell[1] / PI).sqrt();
                    Some(-(1.0 - x * k1(x)) / (PI * x * x))
                }
            }
        }
    }

    /// `G~(|x|, kappa)`, one non-spectral axis and the spectral wavenumber norm `kappa` of the
    /// other two (digest §3.4, B.3).
    pub fn g1(&self, x: f64, kappa: f64) -> f64 {
        let x = x.abs();
        match self.kind {
            GreenKind::Hej(m) => {
                let eps = self.eps;
                let rho = x / eps;
                let p2 = rho * rho;
                if kappa == 0.0 {
                    let g = (-0.5 * p2).exp();
                    let v = match m {
                        2 => 1.0 - g,
                        4 => 0.5 * (1.0 - g),
                        6 => (3.0 - (p2 + 3.0) * g) / 8.0,
                        8 => 5.0 / 16.0 - (-p2 * p2 / 48.0 + p2 / 4.0 + 5.0 / 16.0) * g,
                        _ => {
                            35.0 / 128.0
                                - (p2 * p2 * p2 / 384.0 - 23.0 * p2 * p2 / 384.0 + 47.0 * p2 / 128.0 + 35.0 / 128.0) * g
                        }
                    };
                    return 0.5 * x * erf(rho / 2f64.sqrt()) - eps / (2.0 * PI).sqrt() * v;
                }
                let s = eps * kappa;
                let s2 = s * s;
                let gauss = (-0.5 * (s2 + p2)).exp();
                let y1 = (s - rho) / 2f64.sqrt();
                let t1 = if y1 > 0.0 { erfcx(y1) * gauss } else { erfc(y1) * (-s * rho).exp() };
                let t2 = erfcx((s + rho) / 2f64.sqrt()) * gauss;
                let u = match m {
                    2 => 0.0,
                    4 => 0.25,
                    6 => 5.0 / 16.0 + (s2 - p2) / 16.0,
                    8 => 11.0 / 32.0 + s2 / 12.0 - p2 / 8.0 - s2 * p2 / 48.0 + (s2 * s2 + p2 * p2) / 96.0,
                    _ => {
                        93.0 / 256.0 + 73.0 * s2 / 768.0 - 47.0 * p2 / 256.0 - 17.0 * s2 * p2 / 384.0
                            + 11.0 * s2 * s2 / 768.0
                            + 23.0 * p2 * p2 / 768.0
                            + (s2 * p2 * p2 - s2 * s2 * p2) / 256.0
                            + (s2 * s2 * s2 - p2 * p2 * p2) / 768.0
                    }
                };
                -(eps / (4.0 * s)) * (t1 + t2) - eps * 2f64.sqrt() / PI.sqrt() * u * gauss
            }
            _ => {
                if kappa == 0.0 {
                    0.5 * x
                } else {
                    -(-kappa * x).exp() / (2.0 * kappa)
                }
            }
        }
    }

    /// `G^(k)` in full Fourier space, `k` the wavenumbers of the three axes (digest §3.5,
    /// B.4); 0 at `k = 0`.
    pub fn spectral(&self, k: [f64; 3]) -> f64 {
        let k2 = k[0] * k[0] + k[1] * k[1] + k[2] * k[2];
        if k2 == 0.0 {
            return 0.0;
        }
        match self.kind {
            GreenKind::Chat2 | GreenKind::Hej0 => -1.0 / k2,
            GreenKind::Hej(m) => -zeta_hat(m, self.eps * k2.sqrt()) / k2,
            GreenKind::Lgf2 => {
                let d: f64 = (0..3).map(|i| (2.0 * (0.5 * k[i] * self.h[i]).sin() / self.h[i]).powi(2)).sum();
                -1.0 / d
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::f64::consts::PI;

    use super::{zeta_hat, Green, GreenKind};

    #[test]
    fn names_round_trip() {
        for s in ["chat2", "hej2", "hej4", "hej6", "hej8", "hej10", "hej0", "lgf2"] {
            assert_eq!(GreenKind::parse(s).unwrap().name(), s);
        }
        assert!(GreenKind::parse("hej3").is_none());
    }

    #[test]
    fn singular_values_are_the_limits() {
        // G_m(0) against G_m(r) at r -> 0, and the 2-D and 1-D forms likewise (digest §9 item 3)
        for m in [2, 4, 6, 8, 10] {
            let g = Green::new(GreenKind::Hej(m), [0.1; 3], 2.0).unwrap();
            let (a, b) = (g.g3(0.0), g.g3(1e-6));
            assert!((a - b).abs() < 1e-8 * a.abs(), "hej{m}: {a} vs {b}");
            let (a, b) = (g.g2(0.0, 0.0, [0.1; 2]).unwrap(), g.g2(1e-7, 0.0, [0.1; 2]).unwrap());
            assert!((a - b).abs() < 1e-9, "hej{m} 2-D: {a} vs {b}");
            assert_eq!(g.g1(0.0, 0.0), 0.0);
            // the 1-D kernel at kappa -> 0 tends to the kappa = 0 one up to a constant
            let kappa = 1e-6;
            let (a, b) = (g.g1(0.3, kappa) - g.g1(0.05, kappa), g.g1(0.3, 0.0) - g.g1(0.05, 0.0));
            assert!((a - b).abs() < 1e-5, "hej{m} 1-D: {a} vs {b}");
        }
        let g = Green::new(GreenKind::Hej0, [0.1; 3], 2.0).unwrap();
        assert!((g.g3(0.0) - g.g3(1e-7)).abs() < 1e-9);
    }

    #[test]
    fn zeta_hat_is_one_minus_order_m_at_small_s() {
        for m in [2u32, 4, 6, 8, 10] {
            let s = 0.05f64;
            let err = (1.0 - zeta_hat(m, s)).abs();
            assert!(err < 2.0 * s.powi(m as i32), "m = {m}: {err}");
        }
        // CHAT2's cell average: h = 1 gives -3 / (8 pi R), R = (3 / 4 pi)^(1/3)
        let g = Green::new(GreenKind::Chat2, [1.0; 3], 2.0).unwrap();
        let r = (3.0 / (4.0 * PI)).cbrt();
        assert!((g.g3(0.0) + 3.0 / (8.0 * PI * r)).abs() < 1e-15);
        // the 2-D average of ln r over a square of side h (digest B.10, corrected)
        let h: f64 = 0.3;
        let want = (PI - 6.0 + 2.0 * (h * h / 2.0).ln()) / (8.0 * PI);
        assert!((g.g2(0.0, 0.0, [h, h]).unwrap() - want).abs() < 1e-14);
    }
}
