//! The error model of spectral Ewald: relative RMS error per kernel part as a function of
//! `(xi, r_c, grid, P)`.
//!
//! All terms are mean squares per unit source strength `Q = sum_j |s_j|^2` for sources with
//! independent, isotropic random strengths, so that the strengths cancel in relative errors:
//!
//! - Solution magnitude (Parseval), `U^2 = (c/V^2) sum_{k != 0} |G^(k)|^2`, with `c = 1, 1/3, 1/9`
//!   (Laplace, Stokeslet, stresslet: averaging over random `q`, `f`, `q (x) n`) and Frobenius norms
//!   `|G^|^2 = 16 pi^2/k^4, 128 pi^2/k^4, 448 pi^2/k^2`. The stresslet sum diverges and is cut at
//!   the nearest-neighbour wave number `pi (Ns/V)^{1/3}`; real stresslet fields are larger, so its
//!   relative errors come out smaller than modelled (safe side).
//! - Real-space truncation (cf. the `E^N` of eq. (10) and Kolafa–Perram): the pairs beyond the
//!   3x3x3 cell block P2P sums, `E_N^2 = (c/V) int |G^N(r)|^2 A_out(r) dr` with `A_out` the caps
//!   beyond the block's faces ([`ErrorModel::near`]).
//! - Fourier truncation (cf. `E^F`): the dropped modes outside the grid's box
//!   `|k_d| <= K_d = 2 pi (M_d/2 - 1)/L_d` (Nyquist modes are dropped too):
//!   `E_F^2 = (c/V)(2 pi)^-3 int_{outside} |G^F(k)|^2 dk`, the outside region's area at radius `k`
//!   taken as the caps `sum_d 4 pi k (k - K_d)_+`.
//! - Window aliasing (cf. `E^w`): with `rho(kappa)^2 = sum_{m != 0} W^(kappa + 2 pi m)^2 / W^(kappa)^2`
//!   the alias energy of the 1-D window at `kappa = k h`, spreading and interpolation each add
//!   `sum_d rho(k_d h_d)^2` relative energy per mode:
//!   `E_w^2 = 2 . 3 rho(0)^2 U_F^2 + 4 (c/V)(2pi)^-3 sum_d 2 int_0^{K_d} (rho^2 - rho(0)^2) Phi(k) dk`
//!   (the plateau adds incoherently, the growth towards Nyquist coherently),
//!   `Phi(k) = pi int_{k^2}^inf |G^F(sqrt s)|^2 ds` (the transverse plane integral), `U_F` the
//!   far-field magnitude.
//!
//! - Self interaction (targets at sources): the dropped modes and the window's first aliases do
//!   not average out over a source's own contribution; [`ErrorModel::self_truncation`] and
//!   [`FarModel::self_alias`] estimate these coherent terms, which dominate on grids that barely
//!   resolve the Fourier truncation.
//!
//! - The Laplace field `E = -grad u` ([`ErrorModel::laplace_field`]): the same terms with
//!   `|G^_E(k)|^2 = k^2 16 pi^2/k^4 = 16 pi^2/k^2` (Frobenius over the three components) and
//!   `|G^N_E(r)|^2 = ((erfc(xi r)/r + 2 xi e^{-xi^2 r^2}/sqrt(pi))/r)^2`; its magnitude diverges
//!   like the stresslet's and is cut or measured the same way; no self term (the smooth part of
//!   `grad G` is odd). With the window's derivative in G2P ([`ErrorModel::window_derivative`])
//!   interpolation adds the potential's aliases at `2 pi / h_d` along each derivative.
//!
//! `G^N`, `G^F` are the Hasimoto split (Laplace: erfc screening). The validation report
//! (docs/validation.md) compares these estimates with measured errors term by term.

use std::f64::consts::PI;

use parki_core::{Domain, KernelPart};

use crate::quad::{integrate, integrate_geometric};
use crate::window::KaiserBessel;

/// The error model of one kernel part on one domain.
#[derive(Clone, Debug)]
pub struct ErrorModel {
    part: KernelPart,
    /// The Laplace field instead of the part's potential.
    field: bool,
    lengths: [f64; 3],
    volume: f64,
    /// Stresslet cut-off wave number of the magnitude sum.
    k_cut: f64,
    magnitude2: f64,
}

impl ErrorModel {
    /// The model for `part` on `domain` with `ns` sources.
    pub fn new(part: KernelPart, domain: &Domain, ns: usize) -> Self {
        Self::with_field(part, false, domain, ns)
    }

    /// The model of the Laplace field `E = -grad u` on `domain` with `ns` sources (module
    /// documentation).
    pub fn laplace_field(domain: &Domain, ns: usize) -> Self {
        Self::with_field(KernelPart::Laplace, true, domain, ns)
    }

    fn with_field(part: KernelPart, field: bool, domain: &Domain, ns: usize) -> Self {
        let lengths = domain.lengths();
        let volume = domain.volume();
        let k_cut = PI * (ns.max(1) as f64 / volume).cbrt();
        let mut m = Self { part, field, lengths, volume, k_cut, magnitude2: 0.0 };
        m.magnitude2 = m.lattice(&|k2| m.g2(k2), true);
        m
    }

    /// The extra relative error of the field interpolated with the window's derivative. The
    /// interpolation's alias of mode `k` along `d` comes at `k_d - 2 pi / h_d`; its derivative
    /// along `d` carries that wave number instead of `k_d`, so the potential's interpolation
    /// alias energy along `d` (the plateau `rho(0)^2 U_F^2` and the growth towards Nyquist, as
    /// in [`FarModel::window`]) is weighted by `(2 pi / h_d - k_d)^2`:
    /// `E^2 = sum_d [rho(0)^2 (2 pi/h_d)^2 U_F^2 + 2 pre int_0^{K_d} (rho^2 - rho(0)^2)
    /// (2 pi/h_d - k)^2 Phi(k) dk]` over the field's magnitude, `potential` the potential's
    /// far model.
    pub fn window_derivative(&self, p: usize, kmax: [f64; 3], h: [f64; 3], potential: &FarModel) -> f64 {
        let table = alias_table(p);
        let rho0 = table.at(0.0);
        let top = potential.dk * (potential.k2phi.len() - 1) as f64;
        let mut e2 = 0.0;
        for d in 0..3 {
            let ka = 2.0 * PI / h[d];
            let g = |k: f64| (table.at(k * h[d]) - rho0).max(0.0) * (ka - k).powi(2) * potential.phi(k);
            e2 += rho0 * ka * ka * potential.far2 + potential.pre * 2.0 * integrate(&g, 0.0, kmax[d].min(top), 8);
        }
        (e2 / self.magnitude2).sqrt()
    }

    fn c(&self) -> f64 {
        if self.field {
            return 1.0;
        }
        match self.part {
            KernelPart::Laplace => 1.0,
            KernelPart::Stokeslet => 1.0 / 3.0,
            KernelPart::Stresslet => 1.0 / 9.0,
        }
    }

    /// `|G^(k)|^2` (Frobenius), unscreened.
    fn g2(&self, k2: f64) -> f64 {
        if self.field {
            return 16.0 * PI * PI / k2;
        }
        match self.part {
            KernelPart::Laplace => 16.0 * PI * PI / (k2 * k2),
            KernelPart::Stokeslet => 128.0 * PI * PI / (k2 * k2),
            KernelPart::Stresslet => 448.0 * PI * PI / k2,
        }
    }

    /// `|G^F(k)|^2`: the screened transform.
    fn gf2(&self, k2: f64, xi: f64) -> f64 {
        let s = k2 / (4.0 * xi * xi);
        let screen = match self.part {
            KernelPart::Laplace => (-s).exp(),
            _ => (1.0 + s) * (-s).exp(),
        };
        self.g2(k2) * screen * screen
    }

    /// `(c/V^2) sum_{0<|k|} f(k^2)`: explicit modes inside a sphere, an integral outside.
    /// `unscreened` selects the analytic tails of `|G^|^2`.
    fn lattice(&self, f: &dyn Fn(f64) -> f64, unscreened: bool) -> f64 {
        let lmax = self.lengths.iter().cloned().fold(0.0, f64::max);
        let radius = 2.0 * PI * 10.0 / lmax;
        let n = self.lengths.map(|l| (radius * l / (2.0 * PI)).ceil() as i64);
        let mut sum = 0.0;
        for a in -n[0]..=n[0] {
            for b in -n[1]..=n[1] {
                for c in -n[2]..=n[2] {
                    if a == 0 && b == 0 && c == 0 {
                        continue;
                    }
                    let idx = [a, b, c];
                    let k2: f64 = (0..3).map(|d| (2.0 * PI * idx[d] as f64 / self.lengths[d]).powi(2)).sum();
                    if k2 < radius * radius {
                        sum += f(k2);
                    }
                }
            }
        }
        let density = self.volume / (8.0 * PI * PI * PI);
        let tail = if unscreened {
            match self.part {
                _ if self.field => 8.0 * self.volume * (self.k_cut - radius).max(0.0),
                KernelPart::Laplace => 8.0 * self.volume / radius,
                KernelPart::Stokeslet => 64.0 * self.volume / radius,
                KernelPart::Stresslet => 224.0 * self.volume * (self.k_cut - radius).max(0.0),
            }
        } else {
            let g = |k: f64| 4.0 * PI * k * k * f(k * k);
            density * integrate_geometric(&g, radius, radius * 1e4, radius)
        };
        self.c() * (sum + tail) / (self.volume * self.volume)
    }

    /// Isotropic part of `G^F(k)` seen by a source at its own position: Laplace
    /// `4 pi e^{-k^2/4xi^2}/k^2`, Stokeslet `tr/3 = 16 pi gamma / (3 k^2)`, stresslet 0 (odd).
    fn self_kernel(&self, k2: f64, xi: f64) -> f64 {
        let s = k2 / (4.0 * xi * xi);
        if self.field {
            return 0.0;
        }
        match self.part {
            KernelPart::Laplace => 4.0 * PI * (-s).exp() / k2,
            KernelPart::Stokeslet => 16.0 * PI * (1.0 + s) * (-s).exp() / (3.0 * k2),
            KernelPart::Stresslet => 0.0,
        }
    }

    /// Relative error of the self interaction that the kept modes `kmax` miss: a target at a
    /// source sees `-(1/V) sum_{dropped k} G^F(k) s_i`, the same for every target (coherent), so it
    /// is `|T_D| / (sqrt(Ns) U)` relative, not part of the random-phase `E_F`.
    pub fn self_truncation(&self, xi: f64, kmax: [f64; 3], sources: usize) -> f64 {
        if self.part == KernelPart::Stresslet || self.field {
            return 0.0;
        }
        let kmin = kmax.iter().cloned().fold(f64::INFINITY, f64::min);
        let f = |k: f64| {
            let area: f64 = kmax.iter().map(|&kd| 4.0 * PI * k * (k - kd).max(0.0)).sum();
            area * self.self_kernel(k * k, xi)
        };
        let hi = kmax.iter().cloned().fold(0.0, f64::max) + 16.0 * xi;
        let td = integrate(&f, kmin, hi, 32) / (8.0 * PI * PI * PI);
        td / ((sources.max(1) as f64).sqrt() * self.magnitude2.sqrt())
    }

    /// The model with the solution's mean square per unit `Q` raised to `magnitude2` when that
    /// is larger (the close-pair magnitude of the stresslet, [`crate::stats`]).
    pub fn with_magnitude2(mut self, magnitude2: f64) -> Self {
        if magnitude2.is_finite() && magnitude2 > self.magnitude2 {
            self.magnitude2 = magnitude2;
        }
        self
    }

    /// The model with the solution's mean square per unit `Q` set to `magnitude2` (measured on
    /// the particles: the Laplace field's close pairs, [`crate::stats`]).
    pub fn with_measured_magnitude2(mut self, magnitude2: f64) -> Self {
        if magnitude2.is_finite() && magnitude2 > 0.0 {
            self.magnitude2 = magnitude2;
        }
        self
    }

    /// The kernel part of the model.
    pub fn part(&self) -> KernelPart {
        self.part
    }

    /// `U^2`: mean square of the solution per unit `Q`.
    pub fn magnitude2(&self) -> f64 {
        self.magnitude2
    }

    /// `U_F^2`: mean square of the far field per unit `Q`.
    pub fn far_magnitude2(&self, xi: f64) -> f64 {
        self.lattice(&|k2| self.gf2(k2, xi), false)
    }

    /// Angular average of `|G^N(r)|^2` (Frobenius).
    fn near_density(&self, r: f64, xi: f64) -> f64 {
        let a = libm::erfc(xi * r) / r;
        let b = 2.0 * xi * (-xi * xi * r * r).exp() / PI.sqrt();
        match self.part {
            _ if self.field => ((a + b) / r).powi(2),
            KernelPart::Laplace => a * a,
            KernelPart::Stokeslet => {
                let (p, q) = (a - b, a + b);
                3.0 * p * p + 2.0 * p * q + q * q
            }
            KernelPart::Stresslet => {
                let d = 2.0 * xi * xi * b;
                let al = d * r;
                let be = -(6.0 * (a + b) / r + 2.0 * d * r);
                15.0 * al * al + 6.0 * al * be + be * be
            }
        }
    }

    /// Relative real-space truncation error of P2P on cells of widths `w`.
    ///
    /// P2P sums every pair in the 3x3x3 block of cells around the target's cell, so a pair is
    /// missed only beyond one of the block's six faces, which lie at distances uniform in
    /// `[w_d, 2 w_d]` from a target uniform in its cell. The missed area of the sphere of radius
    /// `r` is taken as the caps beyond the faces, `sum_faces 2 pi r (r - D)_+`, averaged over `D`:
    /// `E[(r - D)_+] = (r - w)^2/(2w)` for `w < r < 2w`, `r - 3w/2` beyond (overlapping caps are
    /// counted twice: an upper bound).
    pub fn near(&self, xi: f64, w: [f64; 3]) -> f64 {
        self.near_within(xi, w, f64::INFINITY)
    }

    /// [`near`](Self::near) when P2P also drops the pairs beyond `cut` (P2P's cut-off sphere,
    /// `parki_nearfield::NearCutoff::Sphere`): beyond `cut` the whole sphere's area `4 pi r^2`
    /// is missed, below it the caps beyond the block's faces.
    pub fn near_within(&self, xi: f64, w: [f64; 3], cut: f64) -> f64 {
        let wmin = w.iter().cloned().fold(f64::INFINITY, f64::min);
        let area = |r: f64| -> f64 {
            if r > cut {
                return 4.0 * PI * r * r;
            }
            w.iter()
                .map(|&wd| {
                    let e = if r <= wd {
                        0.0
                    } else if r < 2.0 * wd {
                        (r - wd) * (r - wd) / (2.0 * wd)
                    } else {
                        r - 1.5 * wd
                    };
                    2.0 * 2.0 * PI * r * e
                })
                .sum()
        };
        let f = |r: f64| area(r) * self.near_density(r, xi);
        let e2 = self.c() / self.volume * integrate(&f, wmin, 2.0 * wmin + 8.0 / xi, 16);
        (e2 / self.magnitude2).sqrt()
    }

    /// Relative Fourier truncation error with kept modes `|k_d| <= kmax_d`.
    pub fn fourier(&self, xi: f64, kmax: [f64; 3]) -> f64 {
        let kmin = kmax.iter().cloned().fold(f64::INFINITY, f64::min);
        let f = |k: f64| {
            let area: f64 = kmax.iter().map(|&kd| 4.0 * PI * k * (k - kd).max(0.0)).sum();
            area * self.gf2(k * k, xi)
        };
        let hi = kmax.iter().cloned().fold(0.0, f64::max) + 16.0 * xi;
        let e2 = self.c() / self.volume / (8.0 * PI * PI * PI) * integrate(&f, kmin, hi, 32);
        (e2 / self.magnitude2).sqrt()
    }

    /// `Phi(k) = pi int_{k^2}^inf |G^F(sqrt s)|^2 ds`: the transverse plane integral.
    fn transverse(&self, xi: f64, k: f64) -> f64 {
        let k2 = k * k;
        let scale = k2.min(xi * xi).max(1e-300) * 0.25;
        PI * integrate_geometric(&|t| self.gf2(k2 + t, xi), 0.0, 80.0 * xi * xi, scale)
    }

    /// The far-field part of the model for splitting `xi`, reused for every grid and window:
    /// `U_F^2` and `k^2 Phi(k)` tabulated up to `k_hi`.
    pub fn far_model(&self, xi: f64, k_hi: f64) -> FarModel {
        let n = 512;
        let dk = k_hi / n as f64;
        let k2phi = (0..=n)
            .map(|i| {
                let k = (i as f64 * dk).max(1e-3 * dk);
                k * k * self.transverse(xi, k)
            })
            .collect();
        // Psi(k) = pi int_{k^2}^inf g_self(sqrt s) ds, the transverse integral of the self kernel
        let psi = (0..=n)
            .map(|i| {
                let k = (i as f64 * dk).max(1e-3 * dk);
                let k2 = k * k;
                let scale = k2.min(xi * xi).max(1e-300) * 0.25;
                PI * integrate_geometric(&|t| self.self_kernel(k2 + t, xi), 0.0, 80.0 * xi * xi, scale)
            })
            .collect();
        FarModel {
            far2: self.far_magnitude2(xi),
            magnitude2: self.magnitude2,
            pre: self.c() / self.volume / (8.0 * PI * PI * PI),
            dk,
            k2phi,
            psi,
        }
    }
}

/// [`ErrorModel::far_model`]: the window aliasing error as a function of grid and window.
#[derive(Clone, Debug)]
pub struct FarModel {
    far2: f64,
    magnitude2: f64,
    pre: f64,
    dk: f64,
    k2phi: Vec<f64>,
    psi: Vec<f64>,
}

impl FarModel {
    /// `U_F^2`: the far field's mean square per unit `Q`.
    pub fn far2(&self) -> f64 {
        self.far2
    }

    /// Relative error of the position-dependent part of a source's own interaction through the
    /// grid: the products of the window with its first aliases, `r = W^(kappa -+ 2 pi)/W^(kappa)`,
    /// carry the phase `e^{+-2 pi i y_d/h_d}` of the source's offset in its grid cell, so a source
    /// sees `cos(2 pi y_d/h_d) (2pi)^-3 int_box g_self(k) 2 r(k_d h_d) dk` per axis (rms over the
    /// offset: that amplitude over `sqrt 2`). `r` changes sign where the alias falls on the
    /// oscillating branch of `W^`, so only the band near Nyquist adds up.
    pub fn self_alias(&self, p: usize, kmax: [f64; 3], h: [f64; 3], sources: usize) -> f64 {
        let table = alias_table(p);
        let top = self.dk * (self.psi.len() - 1) as f64;
        let mut e2 = 0.0;
        for d in 0..3 {
            let g = |k: f64| table.ratio_at(k * h[d]) * self.psi_at(k);
            let a = 2.0 * integrate_geometric(&g, 0.0, kmax[d].min(top), self.dk) / (8.0 * PI * PI * PI);
            e2 += 2.0 * a * a;
        }
        (e2 / (sources.max(1) as f64 * self.magnitude2)).sqrt()
    }

    fn psi_at(&self, k: f64) -> f64 {
        let x = k / self.dk;
        let i = (x.floor() as usize).min(self.psi.len() - 2);
        let t = x - i as f64;
        self.psi[i] * (1.0 - t) + self.psi[i + 1] * t
    }

    fn phi(&self, k: f64) -> f64 {
        let x = k / self.dk;
        let i = (x.floor() as usize).min(self.k2phi.len() - 2);
        let t = x - i as f64;
        let v = self.k2phi[i] * (1.0 - t) + self.k2phi[i + 1] * t;
        v / (k * k).max(1e-300)
    }

    /// Relative window aliasing error of support `p` on spacings `h` with kept modes `kmax`.
    ///
    /// The plateau `rho(0)` adds incoherently for spreading and interpolation (factor 2 in
    /// energy); the growth of `rho` towards Nyquist adds coherently (factor 4), which matches
    /// measured errors (docs/validation.md).
    pub fn window(&self, p: usize, kmax: [f64; 3], h: [f64; 3]) -> f64 {
        let table = alias_table(p);
        let rho0 = table.at(0.0);
        let mut e2 = 6.0 * rho0 * self.far2;
        for d in 0..3 {
            let g = |k: f64| (table.at(k * h[d]) - rho0).max(0.0) * self.phi(k);
            e2 += 4.0 * self.pre * 2.0 * integrate(&g, 0.0, kmax[d].min(self.dk * (self.k2phi.len() - 1) as f64), 8);
        }
        (e2 / self.magnitude2).sqrt()
    }
}

/// `rho(kappa)^2` of one window, tabulated on `[0, pi]`.
struct AliasTable {
    values: Vec<f64>,
    ratio: Vec<f64>,
}

impl AliasTable {
    /// `W^(kappa - 2 pi) / W^(kappa)` (signed), `kappa in [0, pi]`.
    fn ratio_at(&self, kappa: f64) -> f64 {
        let n = self.ratio.len() - 1;
        let x = (kappa.abs() / PI * n as f64).min(n as f64);
        let i = (x.floor() as usize).min(n - 1);
        let t = x - i as f64;
        self.ratio[i] * (1.0 - t) + self.ratio[i + 1] * t
    }

    fn at(&self, kappa: f64) -> f64 {
        let n = self.values.len() - 1;
        let x = (kappa.abs() / PI * n as f64).min(n as f64);
        let i = (x.floor() as usize).min(n - 1);
        let t = x - i as f64;
        self.values[i] * (1.0 - t) + self.values[i + 1] * t
    }
}

fn alias_table(p: usize) -> std::sync::Arc<AliasTable> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    static CACHE: OnceLock<Mutex<HashMap<usize, Arc<AliasTable>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut map = cache.lock().unwrap_or_else(|e| e.into_inner());
    map.entry(p)
        .or_insert_with(|| {
            let kb = KaiserBessel::new(p);
            let n = 1024;
            let kappa = |i: usize| PI * i as f64 / n as f64;
            Arc::new(AliasTable {
                values: (0..=n).map(|i| alias2(&kb, kappa(i))).collect(),
                ratio: (0..=n).map(|i| kb.fourier(kappa(i) - 2.0 * PI) / kb.fourier(kappa(i))).collect(),
            })
        })
        .clone()
}

/// `rho(kappa)^2 = sum_{m != 0} W^(kappa + 2 pi m)^2 / W^(kappa)^2`.
pub fn alias2(kb: &KaiserBessel, kappa: f64) -> f64 {
    let w0 = kb.fourier(kappa);
    let mut s = 0.0;
    for m in 1..=40 {
        let a = kb.fourier(kappa + 2.0 * PI * m as f64);
        let b = kb.fourier(kappa - 2.0 * PI * m as f64);
        s += a * a + b * b;
    }
    s / (w0 * w0)
}
