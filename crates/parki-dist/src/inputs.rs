//! Checks of one evaluation's inputs and the neutrality of the sources.

use parki_core::validate::check_positions;
use parki_core::{Domain, Error, Kernel, Output, Real, Result, Sources};
use rayon::prelude::{IntoParallelIterator, ParallelIterator};

use crate::options::{ExactPositions, Targets};

/// Checks the inputs of one evaluation (positions in the box, densities present, of the right
/// length and finite, output length) and returns the target positions.
///
/// # Errors
/// [`Error::OutsideBox`], [`Error::NonFinite`], [`Error::Missing`] or [`Error::LengthMismatch`]
/// naming the field, the particle and the value.
pub fn check_inputs<'a, T: Real>(
    output: Output,
    domain: &Domain,
    sources: &Sources<'a, T>,
    targets: Targets<'a, T>,
    out_len: usize,
) -> Result<&'a [[T; 3]]> {
    check_positions("sources.positions", sources.positions, domain)?;
    sources.check_densities(output.kernel)?;
    let target_positions = match targets {
        Targets::Sources => sources.positions,
        Targets::Points(p) => {
            check_positions("targets.positions", p, domain)?;
            p
        }
    };
    let dim = output.dim();
    if out_len != target_positions.len() * dim {
        return Err(Error::LengthMismatch {
            field: "output".into(),
            found: out_len,
            reference: format!("targets x {dim} components"),
            expected: target_positions.len() * dim,
        });
    }
    Ok(target_positions)
}

/// Checks that `exact` holds the positions `sources` and `targets` were rounded from: as many
/// rows, and every exact coordinate rounded to `T` equal to the one given, or to the next `T`
/// above it (a coordinate just below a box face that rounds to the face is kept inside the box
/// by [`parki_core::validate::narrow_coordinate`]); and every exact position in the box, as the
/// rounded ones are.
///
/// # Errors
/// [`Error::LengthMismatch`] naming the array, [`Error::Missing`] for exact positions of only
/// the sources or only the targets, [`Error::OutOfRange`] naming the particle, its exact
/// position and the rounded one it was given, or [`Error::OutsideBox`] / [`Error::NonFinite`].
pub fn check_exact<T: Real>(
    domain: &Domain,
    sources: &Sources<'_, T>,
    targets: Targets<'_, T>,
    exact: ExactPositions<'_>,
) -> Result<()> {
    let check = |field: &str, rounded: &[[T; 3]], exact: &[[f64; 3]], given: &str| -> Result<()> {
        if exact.len() != rounded.len() {
            return Err(Error::LengthMismatch {
                field: field.into(),
                found: exact.len(),
                reference: given.into(),
                expected: rounded.len(),
            });
        }
        check_positions(field, exact, domain)?;
        let bad = (0..exact.len()).into_par_iter().find_first(|&j| {
            (0..3).any(|d| {
                let (r, g) = (T::from_f64(exact[j][d]), rounded[j][d]);
                r.to_f64() != g.to_f64() && r.next_down().to_f64() != g.to_f64()
            })
        });
        match bad {
            None => Ok(()),
            Some(j) => Err(Error::OutOfRange {
                field: format!("{field}[{j}]"),
                value: format!("{:?}", exact[j]),
                allowed: format!(
                    "the position {given}[{j}] = {:?} was rounded from ({} bytes per coordinate)",
                    rounded[j].map(|x| x.to_f64()),
                    T::BYTES
                ),
            }),
        }
    };
    check("exact.sources", sources.positions, exact.sources, "sources.positions")?;
    match (targets, exact.targets) {
        (Targets::Sources, None) => Ok(()),
        (Targets::Points(p), Some(e)) => check("exact.targets", p, e, "targets.positions"),
        (Targets::Sources, Some(_)) => Err(Error::Missing {
            field: "targets.positions".into(),
            reason: "exact.targets are given for separate targets".into(),
        }),
        (Targets::Points(_), None) => Err(Error::Missing {
            field: "exact.targets".into(),
            reason: "the exact positions of separate targets go with the exact sources".into(),
        }),
    }
}

/// Partial sums of a source set for the neutrality checks (add them over ranks):
/// `[Q, sum |q|, F_x, F_y, F_z, sum |f_d|]`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Neutrality([f64; 6]);

impl Neutrality {
    /// The sums of this rank's sources: chunks summed on the current rayon pool, then added in
    /// order (the same result whatever the threads).
    pub(crate) fn of<T: Real>(kernel: Kernel, sources: &Sources<T>) -> Self {
        const CHUNK: usize = 1 << 15;
        let charges = sources.charges.filter(|_| kernel.needs_charges()).unwrap_or(&[]);
        let forces = sources.forces.filter(|_| kernel.needs_forces()).unwrap_or(&[]);
        let chunk = |c: usize| -> [f64; 6] {
            let mut s = [0.0f64; 6];
            for v in charges.iter().skip(c * CHUNK).take(CHUNK) {
                s[0] += v.to_f64();
                s[1] += v.to_f64().abs();
            }
            for v in forces.iter().skip(c * CHUNK).take(CHUNK) {
                for d in 0..3 {
                    s[2 + d] += v[d].to_f64();
                    s[5] += v[d].to_f64().abs();
                }
            }
            s
        };
        let chunks = charges.len().max(forces.len()).div_ceil(CHUNK);
        let parts: Vec<[f64; 6]> = (0..chunks).into_par_iter().map(chunk).collect();
        let mut s = [0.0f64; 6];
        for p in parts {
            for (a, b) in s.iter_mut().zip(p) {
                *a += b;
            }
        }
        Self(s)
    }

    /// Whether the net charge (Laplace) exceeds round-off: `1e-10` (f64) or `1e-5` (`single`)
    /// of the sum of magnitudes.
    fn charged(&self, kernel: Kernel, single: bool) -> bool {
        kernel.needs_charges() && self.0[0].abs() > Self::threshold(single) * self.0[1].max(f64::MIN_POSITIVE)
    }

    /// Whether a component of the net force (Stokeslet) exceeds round-off (as [`Self::charged`]).
    fn forced(&self, kernel: Kernel, single: bool) -> bool {
        let s = &self.0;
        kernel.needs_forces()
            && [s[2], s[3], s[4]].iter().any(|n| n.abs() > Self::threshold(single) * s[5].max(f64::MIN_POSITIVE))
    }

    fn threshold(single: bool) -> f64 {
        if single {
            1e-5
        } else {
            1e-10
        }
    }

    /// The sums of the sources times `w` (exact for a power of two): the caller's sums from
    /// those of sources over `w`, for messages.
    pub(crate) fn times(&self, w: f64) -> Self {
        Self(self.0.map(|x| x * w))
    }

    /// The sums as an array (for a sum over ranks).
    pub(crate) fn as_mut(&mut self) -> &mut [f64; 6] {
        &mut self.0
    }

    /// Net charge of Laplace sources (0 for the other kernels). The Laplace real-space kernel
    /// `erfc(xi r)/r` has mean `pi/xi^2` over space; dropping the zero mode of the whole sum
    /// therefore subtracts `pi Q/(V xi^2)` from every target (the potential of a uniform
    /// neutralising background, docs/design.md "Net charge").
    pub(crate) fn net_charge(&self, kernel: Kernel) -> f64 {
        if kernel.needs_charges() {
            self.0[0]
        } else {
            0.0
        }
    }

    /// The additive background `-pi Q/(V xi^2)` every target gets (Laplace in a triply
    /// periodic box; 0 otherwise: with free axes nothing is dropped).
    pub(crate) fn background(&self, kernel: Kernel, domain: &Domain, xi: f64) -> f64 {
        if domain.periodicity() < 3 {
            return 0.0;
        }
        -std::f64::consts::PI * self.net_charge(kernel) / (domain.volume() * xi * xi)
    }

    /// The velocity the 0P Stokeslet's far field leaves out per target, `(2/R) F_net` (see
    /// `parki_farfield::truncated`); zero otherwise.
    pub(crate) fn free_space_constant(&self, kernel: Kernel, domain: &Domain, radius: Option<f64>) -> [f64; 3] {
        match radius {
            Some(r) if domain.periodicity() == 0 && kernel.needs_forces() => {
                let c = parki_farfield::truncated::free_space_stokeslet_constant(r);
                [c * self.0[2], c * self.0[3], c * self.0[4]]
            }
            _ => [0.0; 3],
        }
    }

    /// With one or two periodic axes the image sums of a net charge (Laplace) or a net force
    /// (Stokeslet) diverge (logarithmically in 1P, linearly in 2P): an error naming the sum.
    /// 0P and 3P need nothing (free space is a plain sum; 3P drops the zero mode), nor does
    /// the stresslet.
    ///
    /// # Errors
    /// [`Error::OutOfRange`] on `sources.charges` or `sources.forces`.
    pub(crate) fn check_free(&self, kernel: Kernel, domain: &Domain, single: bool) -> Result<()> {
        let per = domain.periodicity();
        if per == 0 || per == 3 {
            return Ok(());
        }
        let s = &self.0;
        let rel = Self::threshold(single);
        let allowed = |what: &str| {
            format!(
                "a zero net {what} (to {rel:e} of the sum of magnitudes): with periodic = {:?} the image sums of a \
                 net {what} diverge",
                domain.periodic()
            )
        };
        if self.charged(kernel, single) {
            return Err(Error::OutOfRange {
                field: "sources.charges".into(),
                value: format!("net charge {:.6e}", s[0]),
                allowed: allowed("charge"),
            });
        }
        if self.forced(kernel, single) {
            return Err(Error::OutOfRange {
                field: "sources.forces".into(),
                value: format!("net force [{:.6e}, {:.6e}, {:.6e}]", s[2], s[3], s[4]),
                allowed: allowed("force"),
            });
        }
        Ok(())
    }

    /// Warnings for non-neutral input (the global sums; `single`: f32 round-off threshold).
    pub(crate) fn warnings(&self, kernel: Kernel, domain: &Domain, single: bool) -> Vec<String> {
        if domain.periodicity() < 3 {
            return Vec::new();
        }
        let s = &self.0;
        let mut w = Vec::new();
        if self.charged(kernel, single) {
            w.push(format!(
                "sources.charges: net charge {:.6e} is not zero; the zero Fourier mode is dropped, which adds a \
                 uniform neutralising background",
                s[0]
            ));
        }
        if self.forced(kernel, single) {
            w.push(format!(
                "sources.forces: net force [{:.6e}, {:.6e}, {:.6e}] is not zero; the zero Fourier mode is dropped, \
                 which balances it by a uniform pressure gradient (zero mean flow)",
                s[2], s[3], s[4]
            ));
        }
        w
    }
}
