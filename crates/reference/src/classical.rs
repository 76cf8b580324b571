//! The classical triply periodic Ewald sum with the Hasimoto splitting, written independently
//! of the fast path.
//!
//! `u(x) = sum_j sum_p G(x - y_j + p) s_j` with the zero wave vector dropped is split with the
//! parameter `xi` into
//! - a real-space sum of the screened kernel over explicit images `p` with `|x - y_j + p| < R`,
//! - a Fourier sum `(1/V) sum_{0 < |k| <= K} G^F(k) S(k) e^{i k.x}` over explicit wave vectors
//!   with structure factors `S(k) = sum_j s_j e^{-i k.y_j}`,
//! - for a target that coincides with a source, `-G^F(0) s_j` instead of the singular term;
//! - for Laplace, `-pi Q / (V xi^2)` with `Q` the net charge: the zero mode of the real-space part
//!   (`int erfc(xi r)/r dr = pi/xi^2`), so that a non-neutral system gets the potential of a
//!   uniform neutralising background, independent of `xi`. The Hasimoto real-space parts of the
//!   Stokeslet and stresslet have zero mean (`1 - gamma = O(k^4)`) and need no such term.
//!
//! Fourier kernels (convention `f^(k) = int f(r) e^{-i k.r} dr`, `gamma = (1 + k^2/4xi^2) e^{-k^2/4xi^2}`):
//! - Laplace: `4 pi e^{-k^2/4xi^2} / k^2`;
//! - Stokeslet (Hasimoto): `8 pi gamma (k^2 I - k k^T) / k^4`;
//! - stresslet: `T^_ijk = 8 pi i gamma [k^2 (k_k d_ij + k_i d_jk + k_j d_ik) - 2 k_i k_j k_k] / k^4`,
//!   obtained from `T_ijk = d_k G_ij + d_i G_kj - d_ik p_j`, `p = 2 r / r^3`.
//!
//! Real-space kernels are `G - G^F` with `G^F` written from the radial functions
//! `phi1 = F^-1[8 pi gamma / k^2] = 2 erf(xi r)/r + 2 xi e^{-xi^2 r^2}/sqrt(pi)` and
//! `phi2 = F^-1[8 pi gamma / k^4]`, `phi2' = -erf(xi r)`:
//! `T^F_ijk = d_ij d_k phi1 + d_jk d_i phi1 + d_ik d_j phi1 + 2 d_i d_j d_k phi2`.
//! The truncations are chosen so that both neglected tails are below `1e-16` relative; the
//! result does not depend on `xi` (a test checks this), which validates the splitting.
//!
//! Cost: [`ClassicalEwald::new`] picks the `xi` that minimises the counted work ([`Work`]) for
//! the box at hand: `Ns Nt` pairs times the images within `R = 6.5/xi` (on average
//! `(4/3) pi R^3 / V` per pair for any box shape, the image loops being clipped to the ball)
//! against `(Ns + Nt)` times the wave vectors within `K = 13 xi` and the phase tables. A cube
//! gets the usual balance (about 20 to 70 term units per pair); a needle or a plate gets a
//! real-space cut-off longer than its short sides instead of the many wave vectors along its
//! long side. [`ClassicalEwald::prepare`] computes the structure factors once, so that targets
//! can be evaluated in chunks (with progress) at the cost of the targets alone.

use std::f64::consts::PI;

use parki_core::{Domain, Kernel, Output, SourceSet, Sources};
use rayon::prelude::{
    IndexedParallelIterator, IntoParallelRefIterator, ParallelIterator, ParallelSlice, ParallelSliceMut,
};

/// Screening products that make both tails negligible: `erfc(6.5) ~ 4e-20`, `e^{-6.5^2} ~ 5e-19`.
const SCREEN: f64 = 6.5;

/// Cost of one real-space pair-image term (`erfc`, `exp`, the kernel) in units of one
/// source-mode or target-mode term of the Fourier sum (complex multiplies and adds), measured
/// on one core (x86-64, Laplace and Stokes kernels: 12 to 20).
const IMAGE_TERM_COST: f64 = 16.0;
/// Cost of one phase-table entry (a `cos` and a `sin`) in the same units (measured: 3 to 4).
const PHASE_TERM_COST: f64 = 4.0;
/// Cost of one pair or image line of the real-space loops (the clipped index ranges: a square
/// root, two divisions) in the same units.
const LINE_COST: f64 = 2.0;

/// A classical Ewald evaluator for one domain and splitting parameter.
#[derive(Clone, Debug)]
pub struct ClassicalEwald {
    domain: Domain,
    xi: f64,
    real_cutoff: f64,
    k_cutoff: f64,
    modes: [i64; 3],
    /// Axes from the longest side to the shortest: the order of the real-space image loops, so
    /// that the innermost loop runs along the axis with the most images per column.
    order: [usize; 3],
}

/// The work of an evaluation, counted while it runs: the terms that make up its cost.
///
/// With `Ns` sources, `Nt` targets and `M` wave vectors, the Fourier part costs
/// `(Ns + Nt) M` terms plus the phase tables, and the real-space part one term per pair and
/// image within the cut-off `R = 6.5/xi` (on average `(4/3) pi R^3 / V` per pair, for any box
/// shape) plus the loop overhead (one row per pair, one column per image line visited).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// Wave vectors of the half space, `0 < |k| <= K`.
    pub modes: u64,
    /// Source-mode terms of the structure factors, `Ns M`.
    pub structure_terms: u64,
    /// Target-mode terms of the Fourier sum, `Nt M`.
    pub target_mode_terms: u64,
    /// Phase-table entries over sources and targets, `(Ns + Nt) sum_d (2 M_d + 1)`.
    pub phase_terms: u64,
    /// Source-target pairs visited by the real-space sum, `Ns Nt`.
    pub pairs: u64,
    /// Image lines (fixed outer and middle image index) visited by the real-space sum.
    pub image_lines: u64,
    /// Real-space pair-image terms evaluated (`|x - y + p| < R`).
    pub image_terms: u64,
}

impl Work {
    /// The work in units of one Fourier term: the measure [`ClassicalEwald::new`] minimises.
    pub fn weighted(&self) -> f64 {
        (self.structure_terms + self.target_mode_terms) as f64
            + PHASE_TERM_COST * self.phase_terms as f64
            + LINE_COST * (self.pairs + self.image_lines) as f64
            + IMAGE_TERM_COST * self.image_terms as f64
    }

    fn add(&mut self, o: &Work) {
        self.structure_terms += o.structure_terms;
        self.target_mode_terms += o.target_mode_terms;
        self.phase_terms += o.phase_terms;
        self.pairs += o.pairs;
        self.image_lines += o.image_lines;
        self.image_terms += o.image_terms;
    }
}

/// Wave vectors of one half space with their Fourier-kernel data.
struct Modes {
    k: Vec<[f64; 3]>,
    /// Index `(nx, ny, nz)` per wave vector (shifted to be non-negative).
    n: Vec<[usize; 3]>,
}

/// Wave vectors `0 < |k| <= kc` of one half space of the reciprocal lattice of a box with sides
/// `l`: counted exactly where the lattice is coarse along two axes, else from the volume of the
/// ball (then exact to a fraction of a percent).
fn count_modes(l: [f64; 3], kc: f64) -> f64 {
    let m = [0, 1, 2].map(|d| (kc * l[d] / (2.0 * PI)).floor());
    // the two axes of fewest modes are looped over, the third is counted in closed form
    let mut axes = [0usize, 1, 2];
    axes.sort_by(|&a, &b| m[a].total_cmp(&m[b]));
    let [a, b, c] = axes;
    if (2.0 * m[a] + 1.0) * (2.0 * m[b] + 1.0) > 1e4 {
        let volume = l[0] * l[1] * l[2];
        return 4.0 / 3.0 * PI * kc.powi(3) * volume / (8.0 * PI.powi(3)) / 2.0;
    }
    let (ma, mb) = (m[a] as i64, m[b] as i64);
    let mut full = 0.0;
    for i in -ma..=ma {
        for j in -mb..=mb {
            let ka = 2.0 * PI * i as f64 / l[a];
            let kb = 2.0 * PI * j as f64 / l[b];
            let rest = kc * kc - ka * ka - kb * kb;
            if rest >= 0.0 {
                full += 2.0 * (rest.sqrt() * l[c] / (2.0 * PI)).floor() + 1.0;
            }
        }
    }
    // the full ball less k = 0, halved
    (full - 1.0) / 2.0
}

/// The estimated work ([`Work::weighted`]) of an evaluation with splitting `xi` for `ns`
/// sources and `nt` targets in a box of sides `l`: the real-space part from the mean number of
/// images per pair within `R` (`(4/3) pi R^3 / V`, which holds for any box shape) and of the
/// image lines the loops visit (outer axis the longest), the Fourier part from the counted
/// wave vectors and phase tables.
fn estimated_work(l: [f64; 3], xi: f64, ns: usize, nt: usize) -> f64 {
    let rc = SCREEN / xi;
    let kc = 2.0 * SCREEN * xi;
    let volume = l[0] * l[1] * l[2];
    let mut sides = l;
    sides.sort_by(|a, b| b.total_cmp(a));
    let [lo, lm, _] = sides;
    let images = 4.0 / 3.0 * PI * rc.powi(3) / volume;
    let lines = PI * rc * rc / (lo * lm) + 2.0 * rc / lo;
    let phases: f64 = l.iter().map(|&len| 2.0 * (kc * len / (2.0 * PI)).ceil() + 1.0).sum();
    let (ns, nt) = (ns as f64, nt as f64);
    ns * nt * (LINE_COST * (1.0 + lines) + IMAGE_TERM_COST * images)
        + (ns + nt) * (count_modes(l, kc) + PHASE_TERM_COST * phases)
}

impl ClassicalEwald {
    /// An evaluator whose `xi` minimises the estimated work for `ns` sources and `nt` targets
    /// in this box (the real-space pair-image terms against the wave vectors and phase tables of
    /// the Fourier sum, see [`Work`]). In a cube this balances the two parts as usual; in an
    /// elongated box it takes a real-space cut-off longer than the short sides rather than
    /// the wave vectors a cube's choice would give along the long side. The result does not
    /// depend on `xi` beyond rounding (both truncations are below `1e-16` relative).
    pub fn new(domain: Domain, ns: usize, nt: usize) -> Self {
        assert_eq!(domain.periodicity(), 3, "the classical reference is triply periodic");
        let l = domain.lengths();
        let (lmin, lmax) = (domain.min_length(), l.iter().cloned().fold(0.0, f64::max));
        // from no wave vector at all (K below the smallest reciprocal lattice step) to a
        // real-space cut-off of a fiftieth of the shortest side, in steps of 2 %
        let lo = PI / (SCREEN * lmax) / 2.0;
        let hi = SCREEN / (0.02 * lmin);
        let steps = ((hi / lo).ln() / 1.02f64.ln()).ceil() as usize;
        let (ns, nt) = (ns.max(1), nt.max(1));
        let xi = (0..=steps)
            .map(|s| lo * 1.02f64.powi(s as i32))
            .map(|xi| (xi, estimated_work(l, xi, ns, nt)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(xi, _)| xi)
            .expect("at least one candidate");
        Self::with_xi(domain, xi)
    }

    /// An evaluator with a given splitting parameter.
    pub fn with_xi(domain: Domain, xi: f64) -> Self {
        assert_eq!(domain.periodicity(), 3, "the classical reference is triply periodic");
        let real_cutoff = SCREEN / xi;
        let k_cutoff = 2.0 * SCREEN * xi;
        let l = domain.lengths();
        let modes = [0, 1, 2].map(|d| (k_cutoff * l[d] / (2.0 * PI)).ceil() as i64);
        let mut order = [0usize, 1, 2];
        order.sort_by(|&a, &b| l[b].total_cmp(&l[a]));
        Self { domain, xi, real_cutoff, k_cutoff, modes, order }
    }

    /// The splitting parameter.
    pub fn xi(&self) -> f64 {
        self.xi
    }

    /// The work [`ClassicalEwald::new`] expects of this splitting for `ns` sources and `nt`
    /// targets, in the units of [`Work::weighted`].
    pub fn estimated_work(&self, ns: usize, nt: usize) -> f64 {
        estimated_work(self.domain.lengths(), self.xi, ns, nt)
    }

    /// Evaluates the periodic sum at `targets` (output `(Nt, dim)` row-major).
    ///
    /// A target that coincides exactly with a source (or one of its images) skips its
    /// free-space term; other images are kept.
    pub fn evaluate(&self, output: impl Into<Output>, sources: &Sources<f64>, targets: &[[f64; 3]]) -> Vec<f64> {
        self.prepare(output, sources).evaluate(targets)
    }

    /// The source-side work of an evaluation done once: the structure factors of the Fourier
    /// sum. The returned [`Prepared`] evaluates any targets, e.g. in chunks with progress.
    pub fn prepare<'a>(&'a self, output: impl Into<Output>, sources: &'a Sources<'a, f64>) -> Prepared<'a> {
        let output = output.into();
        let kernel = output.kernel;
        let modes = self.modes();
        let nk = modes.k.len();
        let ncomp = source_components(kernel);
        let shift = [self.modes[0] as usize, 0, 0];
        // Structure factors S_c(k) = sum_j s_jc e^{-i k.y_j}, c over the density components.
        let chunk = sources.len().div_ceil(rayon::current_num_threads().max(1) * 4).max(1);
        let idx: Vec<usize> = (0..sources.len()).collect();
        let s: Vec<(f64, f64)> = idx
            .par_chunks(chunk)
            .map(|js| {
                let mut acc = vec![(0.0, 0.0); nk * ncomp];
                let mut dens = [0.0; 12];
                for &j in js {
                    let ph = self.phases(&sources.positions[j]);
                    source_density(kernel, sources, j, &mut dens);
                    for (m, n) in modes.n.iter().enumerate() {
                        let ex = ph[0][n[0] + shift[0]];
                        let ey = ph[1][n[1]];
                        let ez = ph[2][n[2]];
                        let exy = cmul(ex, ey);
                        let e = cmul(exy, ez);
                        for c in 0..ncomp {
                            let a = &mut acc[m * ncomp + c];
                            a.0 += dens[c] * e.0;
                            a.1 += dens[c] * e.1;
                        }
                    }
                }
                acc
            })
            .reduce(
                || vec![(0.0, 0.0); nk * ncomp],
                |mut a, b| {
                    a.iter_mut().zip(b.iter()).for_each(|(x, y)| {
                        x.0 += y.0;
                        x.1 += y.1
                    });
                    a
                },
            );
        // Fourier-space potential per wave vector: U(k) = G^F(k) S(k) (complex, dim components),
        // and the field -i k U(k)
        let dim = output.dim();
        let mut uk = vec![(0.0, 0.0); nk * dim];
        for m in 0..nk {
            let sk = &s[m * ncomp..(m + 1) * ncomp];
            let u = &mut uk[m * dim..(m + 1) * dim];
            fourier_kernel(kernel, self.xi, modes.k[m], sk, u);
            if output.field {
                let k = modes.k[m];
                let u0 = u[0];
                (0..3).for_each(|d| u[1 + d] = (k[d] * u0.1, -k[d] * u0.0));
            }
        }
        let ns = sources.len() as u64;
        let work = Work {
            modes: nk as u64,
            structure_terms: ns * nk as u64,
            phase_terms: ns * self.phase_len(),
            ..Work::default()
        };
        Prepared { ewald: self, output, sources, modes, uk, work }
    }

    /// Entries of one point's phase tables, `sum_d (2 M_d + 1)`.
    fn phase_len(&self) -> u64 {
        self.modes.iter().map(|&m| 2 * m as u64 + 1).sum()
    }

    /// Adds the real-space terms of source `j` at target `x` over every image within the
    /// cut-off. The image loops run from the longest axis (outer) to the shortest (inner), each
    /// clipped to the ball of radius `R` left by the outer ones, so that a pair costs one row
    /// plus one line per image line met, for any box shape.
    #[inline]
    fn pair_images(&self, output: Output, x: &[f64; 3], j: usize, sources: &Sources<f64>, acc: &mut PairAcc) {
        let y = sources.positions[j];
        let l = self.domain.lengths();
        let d = [x[0] - y[0], x[1] - y[1], x[2] - y[2]];
        let rc = self.real_cutoff;
        let rc2 = rc * rc;
        let [o, m, i] = self.order;
        // image indices c with |dd + c len| < s
        let range = |dd: f64, s: f64, len: f64| (((-s - dd) / len).ceil() as i64, ((s - dd) / len).floor() as i64);
        acc.work.pairs += 1;
        let (o_lo, o_hi) = range(d[o], rc, l[o]);
        for co in o_lo..=o_hi {
            let ro = d[o] + co as f64 * l[o];
            let rem_o = rc2 - ro * ro;
            if rem_o <= 0.0 {
                continue;
            }
            let (m_lo, m_hi) = range(d[m], rem_o.sqrt(), l[m]);
            for cm in m_lo..=m_hi {
                let rm = d[m] + cm as f64 * l[m];
                let rem_m = rem_o - rm * rm;
                if rem_m <= 0.0 {
                    continue;
                }
                acc.work.image_lines += 1;
                let (i_lo, i_hi) = range(d[i], rem_m.sqrt(), l[i]);
                for ci in i_lo..=i_hi {
                    let mut r = [0.0; 3];
                    r[o] = ro;
                    r[m] = rm;
                    r[i] = d[i] + ci as f64 * l[i];
                    let r2 = r[0] * r[0] + r[1] * r[1] + r[2] * r[2];
                    if r2 >= rc2 {
                        continue;
                    }
                    acc.work.image_terms += 1;
                    add_real_space(output, self.xi, r, r2, sources, j, &mut acc.u);
                }
            }
        }
    }

    fn modes(&self) -> Modes {
        let l = self.domain.lengths();
        let [mx, my, mz] = self.modes;
        let kc2 = self.k_cutoff * self.k_cutoff;
        let mut k = Vec::new();
        let mut n = Vec::new();
        for a in 0..=mx {
            for b in -my..=my {
                for c in -mz..=mz {
                    // half space: a > 0, or a = 0 and b > 0, or a = b = 0 and c > 0
                    let keep = a > 0 || (a == 0 && b > 0) || (a == 0 && b == 0 && c > 0);
                    if !keep {
                        continue;
                    }
                    let kv = [2.0 * PI * a as f64 / l[0], 2.0 * PI * b as f64 / l[1], 2.0 * PI * c as f64 / l[2]];
                    let k2 = kv[0] * kv[0] + kv[1] * kv[1] + kv[2] * kv[2];
                    if k2 > kc2 {
                        continue;
                    }
                    k.push(kv);
                    n.push([a as usize, (b + my) as usize, (c + mz) as usize]);
                }
            }
        }
        Modes { k, n }
    }

    /// Per-source phase tables `e^{-i 2 pi m y_d / L_d}` for `m` in `-M_d..=M_d` (shifted index).
    ///
    /// The angle is reduced exactly: with `u = y_d / L_d` (rounded once, the same for every `m`:
    /// a displacement of the point below `1e-16 L_d`), `m u` is split into its rounded product
    /// and the product's error (`fma`), and its integer part removed before the `2 pi`. Each
    /// phase is then accurate to a few `1e-16` for any `m` and coordinate, where `cos(2 pi m y/L)`
    /// of the rounded angle would carry an error of `1e-16 |2 pi m y / L|`, different for each
    /// `m` (up to `1e-12` in a box 1000 times longer than wide, and no longer a displacement
    /// that the sum of the modes would turn into a displacement of the point).
    fn phases(&self, y: &[f64; 3]) -> [Vec<(f64, f64)>; 3] {
        let l = self.domain.lengths();
        [0, 1, 2].map(|d| {
            let m = self.modes[d];
            let u = y[d] / l[d];
            (-m..=m)
                .map(|i| {
                    let i = i as f64;
                    let p = i * u;
                    let e = i.mul_add(u, -p);
                    let t = -2.0 * PI * ((p - p.round()) + e);
                    (t.cos(), t.sin())
                })
                .collect()
        })
    }
}

/// One target's real-space sum over a block of sources, with the work it took.
#[derive(Clone, Copy, Default)]
struct PairAcc {
    u: [f64; 4],
    work: Work,
}

/// Sources per block of the real-space sum (the blocks of one target are summed in order, so
/// that the result does not depend on the thread count).
const SOURCE_BLOCK: usize = 2048;

/// The classical Ewald sum of one set of sources with its structure factors computed
/// ([`ClassicalEwald::prepare`]): evaluates targets at `O(Ns (images per pair) + M)` each.
pub struct Prepared<'a> {
    ewald: &'a ClassicalEwald,
    output: Output,
    sources: &'a Sources<'a, f64>,
    modes: Modes,
    /// `U(k) = G^F(k) S(k)` per wave vector and output component.
    uk: Vec<(f64, f64)>,
    /// The work of the structure factors.
    work: Work,
}

impl Prepared<'_> {
    /// The wave vectors of the Fourier sum (one half space).
    pub fn modes(&self) -> usize {
        self.modes.k.len()
    }

    /// The work done so far: the structure factors.
    pub fn source_work(&self) -> Work {
        self.work
    }

    /// The periodic sum at `targets` (output `(Nt, dim)` row-major).
    pub fn evaluate(&self, targets: &[[f64; 3]]) -> Vec<f64> {
        self.evaluate_counted(targets).0
    }

    /// The periodic sum at `targets` and the work it took (the targets' share only; add
    /// [`Prepared::source_work`] for the whole evaluation).
    pub fn evaluate_counted(&self, targets: &[[f64; 3]]) -> (Vec<f64>, Work) {
        let (output, sources, ewald) = (self.output, self.sources, self.ewald);
        let dim = output.dim();
        let mut out = vec![0.0; targets.len() * dim];
        // real space: per target, blocks of sources in parallel, summed in block order
        let blocks: Vec<(usize, usize)> =
            (0..sources.len()).step_by(SOURCE_BLOCK).map(|s| (s, (s + SOURCE_BLOCK).min(sources.len()))).collect();
        let per_target: Vec<PairAcc> = targets
            .par_iter()
            .map(|x| {
                let parts: Vec<PairAcc> = blocks
                    .par_iter()
                    .map(|&(lo, hi)| {
                        let mut acc = PairAcc::default();
                        for j in lo..hi {
                            ewald.pair_images(output, x, j, sources, &mut acc);
                        }
                        acc
                    })
                    .collect();
                parts.iter().fold(PairAcc::default(), |mut a, p| {
                    (0..4).for_each(|c| a.u[c] += p.u[c]);
                    a.work.add(&p.work);
                    a
                })
            })
            .collect();
        let mut work = Work { modes: self.modes.k.len() as u64, ..Work::default() };
        for (u, p) in out.chunks_mut(dim).zip(&per_target) {
            u.iter_mut().zip(p.u.iter()).for_each(|(o, a)| *o += a);
            work.add(&p.work);
        }
        // u(x) += (2/V) sum_{half space} Re[U(k) e^{i k.x}]
        let shift = [ewald.modes[0] as usize, 0, 0];
        let scale = 2.0 / ewald.domain.volume();
        let (modes, uk) = (&self.modes, &self.uk);
        out.par_chunks_mut(dim).zip(targets.par_iter()).for_each(|(u, x)| {
            let ph = ewald.phases(x); // e^{-i k.x}; conjugate below
            let mut acc = [Neumaier::default(); 4];
            for (m, n) in modes.n.iter().enumerate() {
                let e = cmul(cmul(ph[0][n[0] + shift[0]], ph[1][n[1]]), ph[2][n[2]]);
                let e = (e.0, -e.1);
                for c in 0..dim {
                    let v = cmul(uk[m * dim + c], e);
                    acc[c].add(v.0);
                }
            }
            u.iter_mut().zip(acc.iter()).for_each(|(o, a)| *o += scale * a.value());
        });
        let nt = targets.len() as u64;
        work.target_mode_terms = nt * self.modes.k.len() as u64;
        work.phase_terms = nt * ewald.phase_len();
        if output.kernel == Kernel::Laplace {
            // The real-space kernel erfc(xi r)/r has mean pi/xi^2 over space; dropping the zero
            // mode of the full sum subtracts it (the neutralising background of a net charge,
            // whose field is zero).
            let net: f64 = sources.charges.expect("charges").iter().sum();
            let shift = PI * net / (ewald.domain.volume() * ewald.xi * ewald.xi);
            out.iter_mut().step_by(dim).for_each(|u| *u -= shift);
        }
        (out, work)
    }
}

/// Compensated (Neumaier) summation: the Fourier sum adds ~1e4 terms of one sign.
#[derive(Clone, Copy, Default)]
struct Neumaier {
    sum: f64,
    c: f64,
}

impl Neumaier {
    #[inline]
    fn add(&mut self, v: f64) {
        let t = self.sum + v;
        if self.sum.abs() >= v.abs() {
            self.c += (self.sum - t) + v;
        } else {
            self.c += (v - t) + self.sum;
        }
        self.sum = t;
    }
    fn value(&self) -> f64 {
        self.sum + self.c
    }
}

#[inline]
fn cmul(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    (a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0)
}

/// Number of density components the Fourier sum carries: 1 (q), 3 (f), 9 (q n^T), 12 (f, q n^T).
fn source_components(kernel: Kernel) -> usize {
    match kernel {
        Kernel::Laplace => 1,
        Kernel::Stokeslet => 3,
        Kernel::Stresslet => 9,
        Kernel::Stokes => 12,
    }
}

/// The Fourier sum's density components of source `j`: `[q]`, `[f]`, `q n^T` (row-major) or
/// `[f, q n^T]`, from the packed densities of [`SourceSet::density`].
fn source_density(kernel: Kernel, s: &Sources<f64>, j: usize, out: &mut [f64; 12]) {
    let mut packed = [0.0; 9];
    s.density(kernel, j, &mut packed);
    match kernel {
        Kernel::Laplace => out[0] = packed[0],
        Kernel::Stokeslet => out[..3].copy_from_slice(&packed[..3]),
        Kernel::Stresslet | Kernel::Stokes => {
            let c = if kernel.needs_forces() { 3 } else { 0 };
            out[..c].copy_from_slice(&packed[..c]);
            let (q, n) = (&packed[c..c + 3], &packed[c + 3..c + 6]);
            for a in 0..3 {
                for b in 0..3 {
                    out[c + 3 * a + b] = q[a] * n[b];
                }
            }
        }
    }
}

/// `U(k) = G^F(k) S(k)` for one wave vector (see the module documentation).
fn fourier_kernel(kernel: Kernel, xi: f64, k: [f64; 3], s: &[(f64, f64)], u: &mut [(f64, f64)]) {
    let k2 = k[0] * k[0] + k[1] * k[1] + k[2] * k[2];
    let e = (-k2 / (4.0 * xi * xi)).exp();
    match kernel {
        Kernel::Laplace => {
            let g = 4.0 * PI * e / k2;
            u[0] = (g * s[0].0, g * s[0].1);
        }
        _ => {
            let gamma = (1.0 + k2 / (4.0 * xi * xi)) * e;
            let g = 8.0 * PI * gamma / (k2 * k2);
            for c in u.iter_mut() {
                *c = (0.0, 0.0);
            }
            let mut off = 0;
            if kernel.needs_forces() {
                // (k^2 I - k k^T) S_f
                for i in 0..3 {
                    let mut re = k2 * s[i].0;
                    let mut im = k2 * s[i].1;
                    for j in 0..3 {
                        re -= k[i] * k[j] * s[j].0;
                        im -= k[i] * k[j] * s[j].1;
                    }
                    u[i].0 += g * re;
                    u[i].1 += g * im;
                }
                off = 3;
            }
            if kernel.needs_dipoles() {
                // i [k^2 (k_k d_ij + k_i d_jk + k_j d_ik) - 2 k_i k_j k_k] S_jk
                for i in 0..3 {
                    let (mut re, mut im) = (0.0, 0.0);
                    for j in 0..3 {
                        for kk in 0..3 {
                            let d = |a: usize, b: usize| if a == b { 1.0 } else { 0.0 };
                            let t =
                                k2 * (k[kk] * d(i, j) + k[i] * d(j, kk) + k[j] * d(i, kk)) - 2.0 * k[i] * k[j] * k[kk];
                            let sv = s[off + 3 * j + kk];
                            re += t * sv.0;
                            im += t * sv.1;
                        }
                    }
                    // multiply by i
                    u[i].0 += g * -im;
                    u[i].1 += g * re;
                }
            }
        }
    }
}

/// Adds the real-space (screened) term `G^N(r) s_j` of source `j` at separation `r`
/// (`r2 = |r|^2`) to `acc` (the `output.dim()` values of [`Output`]: for the Laplace field
/// `-grad [q erfc(xi r)/r] = q r [erfc(xi r)/r^3 + 2 xi e^{-xi^2 r^2}/(sqrt(pi) r^2)]` after the
/// potential); at `r = 0` adds `-G^F(0) s_j` (the self term; the field's is zero).
pub fn add_real_space(
    output: impl Into<Output>,
    xi: f64,
    r: [f64; 3],
    r2: f64,
    s: &Sources<f64>,
    j: usize,
    acc: &mut [f64; 4],
) {
    let output = output.into();
    let kernel = output.kernel;
    let sqrt_pi = PI.sqrt();
    if r2 == 0.0 {
        // coincident: the singular free-space term is skipped, leaving -G^F(0) s_j
        if kernel.needs_charges() {
            acc[0] -= 2.0 * xi / sqrt_pi * s.charges.expect("charges")[j];
        }
        if kernel.needs_forces() {
            let f = s.forces.expect("forces")[j];
            (0..3).for_each(|a| acc[a] -= 4.0 * xi / sqrt_pi * f[a]);
        }
        // the stresslet's G^F is odd: T^F(0) = 0
        return;
    }
    let rn = r2.sqrt();
    let erfc = libm::erfc(xi * rn);
    if kernel.needs_charges() {
        let q = s.charges.expect("charges")[j];
        acc[0] += erfc / rn * q;
        if output.field {
            let e = q * (erfc / rn + 2.0 * xi * (-xi * xi * r2).exp() / sqrt_pi) / r2;
            (0..3).for_each(|a| acc[1 + a] += e * r[a]);
        }
    }
    if kernel.needs_forces() {
        // Hasimoto: G^N = G(r) [erfc(xi r) + 2 xi r e^{-xi^2 r^2}/sqrt(pi)] - 4 xi e^{-xi^2 r^2}/sqrt(pi) I
        let f = s.forces.expect("forces")[j];
        let g = parki_core::kernel::free_space::stokeslet(r, f);
        let gauss = (-xi * xi * r2).exp();
        let a = erfc + 2.0 * xi * rn * gauss / sqrt_pi;
        let b = 4.0 * xi * gauss / sqrt_pi;
        (0..3).for_each(|c| acc[c] += g[c] * a - b * f[c]);
    }
    if kernel.needs_dipoles() {
        let q = s.dipoles.expect("dipoles")[j];
        let n = s.normals.expect("normals")[j];
        let t = parki_core::kernel::free_space::stresslet(r, q, n);
        let tf = stresslet_smooth(xi, r, rn, q, n);
        (0..3).for_each(|c| acc[c] += t[c] - tf[c]);
    }
}

/// `T^F_ijk q_j n_k` from the radial functions (module documentation), for `r > 0`.
fn stresslet_smooth(xi: f64, r: [f64; 3], rn: f64, q: [f64; 3], n: [f64; 3]) -> [f64; 3] {
    let sqrt_pi = PI.sqrt();
    let x = xi * rn;
    let erf = libm::erf(x);
    let b = 2.0 * xi * (-x * x).exp() / sqrt_pi;
    // phi1' = d/dr [2 erf/r + b]
    let dphi1 = 2.0 * (b / rn - erf / (rn * rn)) - 2.0 * xi * xi * rn * b;
    // phi2' = -erf, phi2'' = -b, phi2''' = 2 xi^2 r b
    let p1 = -erf;
    let p2 = -b;
    let p3 = 2.0 * xi * xi * rn * b;
    // d_i d_j d_k phi = A rh_i rh_j rh_k + Bc (d_ij rh_k + d_ik rh_j + d_jk rh_i)
    let a3 = p3 - 3.0 * p2 / rn + 3.0 * p1 / (rn * rn);
    let b3 = p2 / rn - p1 / (rn * rn);
    let rh = [r[0] / rn, r[1] / rn, r[2] / rn];
    let mut out = [0.0; 3];
    for (i, o) in out.iter_mut().enumerate() {
        let mut acc = 0.0;
        for j in 0..3 {
            for k in 0..3 {
                let d = |a: usize, b: usize| if a == b { 1.0 } else { 0.0 };
                let sym = d(i, j) * rh[k] + d(j, k) * rh[i] + d(i, k) * rh[j];
                let t = dphi1 * sym + 2.0 * (a3 * rh[i] * rh[j] * rh[k] + b3 * sym);
                acc += t * q[j] * n[k];
            }
        }
        *o = acc;
    }
    out
}
