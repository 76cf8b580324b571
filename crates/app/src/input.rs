//! This rank's share of a run.toml's particles: rows `split_range(N, R, rank)` of every input
//! array, read from the `.npy` files (only those bytes) or generated ([`parki_reference::generate`]'s
//! counter-based streams), so that R ranks together hold exactly the set one process reads.

use std::ops::Range;
use std::path::Path;

use parki_comm::{Comm, ReduceOp};
use parki_core::{validate, Domain, Error, Kernel, Result, Sources};
use parki_decomp::split_range;

use crate::config::{resolve, Generate, RunConfig};
use crate::npy;
use parki_reference::generate::{self, Distribution};

/// This rank's rows of the problem, in f64, as read or generated.
#[derive(Clone, Debug)]
pub struct Problem {
    /// Kernel.
    pub kernel: Kernel,
    /// Box.
    pub domain: Domain,
    /// Tolerance.
    pub tolerance: f64,
    /// `"f64"` or `"f32"`.
    pub precision: String,
    /// Wrap periodic coordinates.
    pub wrap: bool,
    /// Sources over all ranks.
    pub sources_total: usize,
    /// Separate targets over all ranks (`None`: the targets are the sources).
    pub targets_total: Option<usize>,
    /// Global input rows of this rank's sources.
    pub source_rows: Range<usize>,
    /// Global input rows of this rank's targets (= `source_rows` without separate targets).
    pub target_rows: Range<usize>,
    /// Source positions.
    pub positions: Vec<[f64; 3]>,
    /// Charges.
    pub charges: Option<Vec<f64>>,
    /// Forces.
    pub forces: Option<Vec<[f64; 3]>>,
    /// Dipoles.
    pub dipoles: Option<Vec<[f64; 3]>>,
    /// Normals.
    pub normals: Option<Vec<[f64; 3]>>,
    /// Separate target positions.
    pub targets: Option<Vec<[f64; 3]>>,
    /// The sources were generated: charges and forces still need their global mean removed
    /// ([`neutralise`]).
    pub generated: bool,
    /// Warnings about the input (strengths given that the kernel does not use), the same on
    /// every rank.
    pub warnings: Vec<String>,
}

impl Problem {
    /// This rank's sources as read (f64).
    pub fn sources(&self) -> Sources<'_, f64> {
        Sources {
            positions: &self.positions,
            charges: self.charges.as_deref(),
            forces: self.forces.as_deref(),
            dipoles: self.dipoles.as_deref(),
            normals: self.normals.as_deref(),
        }
    }

    /// Targets over all ranks.
    pub fn targets_total(&self) -> usize {
        self.targets_total.unwrap_or(self.sources_total)
    }

    /// This rank's targets.
    pub fn local_targets(&self) -> usize {
        self.target_rows.len()
    }

    /// Turns an input error about this rank's row `index` into one about the global input row,
    /// so that the message names the row of the user's file.
    pub fn globalise(&self, e: Error) -> Error {
        let shift = |field: &str| {
            if field.starts_with("targets") && self.targets_total.is_some() {
                self.target_rows.start
            } else {
                self.source_rows.start
            }
        };
        match e {
            Error::NonFinite { field, index, component, value } => {
                Error::NonFinite { index: index + shift(&field), field, component, value }
            }
            Error::OutsideBox { field, index, axis, value, length, periodic } => {
                Error::OutsideBox { index: index + shift(&field), field, axis, value, length, periodic }
            }
            other => other,
        }
    }
}

fn generate_count(g: &Generate, field: &str) -> Result<Distribution> {
    let dist = Distribution::from_name(&g.distribution, &format!("{field}.generate.distribution"))?;
    if g.count == 0 {
        return Err(Error::OutOfRange {
            field: format!("{field}.generate.count"),
            value: "0".into(),
            allowed: "at least 1".into(),
        });
    }
    Ok(dist)
}

/// Bytes per generated particle while it is made: the position, the strengths `kernel` uses,
/// and the generator's per-particle record of all strengths.
fn generated_bytes(kernel: Kernel) -> usize {
    let strengths = 8 * kernel.density_width();
    24 + strengths + 80
}

/// One `.npy` input of this rank: its header, checked against the expected columns and rows.
struct Input {
    path: std::path::PathBuf,
    field: &'static str,
    header: npy::Header,
}

impl Input {
    fn open(base: &Path, p: &Path, field: &'static str, columns: usize) -> Result<Self> {
        let path = resolve(base, p);
        let header = npy::read_header(&path, field)?;
        header.expect_columns(columns, &format!("{field} ({})", path.display()))?;
        npy::check_complete(&path, field, &header)?;
        Ok(Self { path, field, header })
    }

    fn rows(&self) -> usize {
        self.header.rows()
    }

    fn expect_rows(&self, reference: &Input) -> Result<()> {
        if self.rows() == reference.rows() {
            Ok(())
        } else {
            Err(Error::LengthMismatch {
                field: self.field.into(),
                found: self.rows(),
                reference: reference.field.into(),
                expected: reference.rows(),
            })
        }
    }

    fn read(&self, rows: Range<usize>) -> Result<Vec<f64>> {
        npy::read_rows(&self.path, self.field, &self.header, rows)
    }

    fn read3(&self, rows: Range<usize>) -> Result<Vec<[f64; 3]>> {
        Ok(self.read(rows)?.chunks_exact(3).map(|c| [c[0], c[1], c[2]]).collect())
    }
}

/// The particle counts of a run.toml, from the generators or the `.npy` headers only (nothing
/// is read past a header): `(sources, targets)`, the targets being the sources when `[targets]`
/// is absent. Errors as [`load_problem`] would on the same headers.
pub fn counts(cfg: &RunConfig, path: &Path) -> Result<(usize, usize)> {
    let count = |g: &Option<Generate>, p: &Option<std::path::PathBuf>, field: &'static str| -> Result<Option<usize>> {
        match (g, p) {
            (Some(g), _) => Ok(Some(g.count)),
            (None, Some(p)) => Ok(Some(Input::open(path, p, field, 3)?.rows())),
            (None, None) => Ok(None),
        }
    };
    let sources =
        count(&cfg.sources.generate, &cfg.sources.positions, "sources.positions")?.ok_or_else(|| Error::Missing {
            field: "sources.positions".into(),
            reason: "give a .npy file or sources.generate = { distribution, count, seed }".into(),
        })?;
    let targets = match &cfg.targets {
        Some(t) => count(&t.generate, &t.positions, "targets.positions")?.unwrap_or(sources),
        None => sources,
    };
    Ok((sources, targets))
}

/// Reads or generates rank `rank`'s share (of `ranks`) of the problem of a run.toml at `path`.
/// Touches no other rank: call [`Comm::agree`] on the result, then [`neutralise`].
pub fn load_problem(cfg: &RunConfig, path: &Path, rank: usize, ranks: usize) -> Result<Problem> {
    let kernel = Kernel::from_name(&cfg.problem.kernel)?;
    let domain = Domain::new(cfg.problem.lengths(), cfg.problem.periodic_axes())?;
    if !matches!(cfg.problem.precision.as_str(), "f64" | "f32") {
        return Err(Error::OutOfRange {
            field: "problem.precision".into(),
            value: format!("\"{}\"", cfg.problem.precision),
            allowed: "\"f64\" or \"f32\"".into(),
        });
    }
    let s = &cfg.sources;
    let mut prob = Problem {
        kernel,
        domain,
        tolerance: cfg.problem.tolerance,
        precision: cfg.problem.precision.clone(),
        wrap: cfg.problem.wrap,
        sources_total: 0,
        targets_total: None,
        source_rows: 0..0,
        target_rows: 0..0,
        positions: Vec::new(),
        charges: None,
        forces: None,
        dipoles: None,
        normals: None,
        targets: None,
        generated: false,
        warnings: Vec::new(),
    };
    match (&s.generate, &s.positions) {
        (Some(_), Some(_)) => {
            return Err(Error::OutOfRange {
                field: "sources.generate".into(),
                value: "set together with sources.positions".into(),
                allowed: "either files or a generator, not both".into(),
            })
        }
        (None, None) => {
            return Err(Error::Missing {
                field: "sources.positions".into(),
                reason: "give a .npy file or sources.generate = { distribution, count, seed }".into(),
            })
        }
        (Some(g), None) => {
            let files =
                [("charges", &s.charges), ("forces", &s.forces), ("dipoles", &s.dipoles), ("normals", &s.normals)];
            if let Some((name, Some(p))) = files.iter().find(|(_, f)| f.is_some()) {
                return Err(Error::OutOfRange {
                    field: format!("sources.{name}"),
                    value: format!("\"{}\"", p.display()),
                    allowed: "no strength files with sources.generate (the generator makes the strengths)".into(),
                });
            }
            let dist = generate_count(g, "sources")?;
            let rows = split_range(g.count, ranks, rank);
            npy::ensure_fits("sources.generate.count", g.count, rows.len(), generated_bytes(kernel))?;
            prob.positions = generate::positions_slice(&domain, dist, g.seed, rows.clone());
            let st = generate::strengths_slice(kernel, g.seed.wrapping_add(0x5eed), rows.clone());
            (prob.charges, prob.forces, prob.dipoles, prob.normals) = (st.charges, st.forces, st.dipoles, st.normals);
            prob.sources_total = g.count;
            prob.source_rows = rows;
            prob.generated = true;
        }
        (None, Some(p)) => {
            let pos = Input::open(path, p, "sources.positions", 3)?;
            let open = |f: &Option<std::path::PathBuf>, field: &'static str, cols: usize| -> Result<Option<Input>> {
                let Some(f) = f else { return Ok(None) };
                let input = Input::open(path, f, field, cols)?;
                input.expect_rows(&pos)?;
                Ok(Some(input))
            };
            // strengths the kernel does not use are neither opened nor read, with a warning
            let mut prob_warnings = Vec::new();
            let mut used = |f: &Option<std::path::PathBuf>, field: &str, needed: bool| -> Option<std::path::PathBuf> {
                match f {
                    Some(p) if !needed => {
                        prob_warnings.push(format!(
                            "{field} = \"{}\" is ignored: kernel \"{}\" does not use it",
                            p.display(),
                            kernel.name()
                        ));
                        None
                    }
                    other => other.clone(),
                }
            };
            let charges = used(&s.charges, "sources.charges", kernel.needs_charges());
            let forces = used(&s.forces, "sources.forces", kernel.needs_forces());
            let dipoles = used(&s.dipoles, "sources.dipoles", kernel.needs_dipoles());
            let normals = used(&s.normals, "sources.normals", kernel.needs_dipoles());
            prob.warnings = prob_warnings;
            let q = open(&charges, "sources.charges", 1)?;
            let f = open(&forces, "sources.forces", 3)?;
            let d = open(&dipoles, "sources.dipoles", 3)?;
            let n = open(&normals, "sources.normals", 3)?;
            let rows = split_range(pos.rows(), ranks, rank);
            prob.positions = pos.read3(rows.clone())?;
            prob.charges = q.map(|i| i.read(rows.clone())).transpose()?;
            prob.forces = f.map(|i| i.read3(rows.clone())).transpose()?;
            prob.dipoles = d.map(|i| i.read3(rows.clone())).transpose()?;
            prob.normals = n.map(|i| i.read3(rows.clone())).transpose()?;
            prob.sources_total = pos.rows();
            prob.source_rows = rows;
        }
    }
    prob.target_rows = prob.source_rows.clone();
    if let Some(t) = &cfg.targets {
        if t.charges.is_some() || t.forces.is_some() || t.dipoles.is_some() || t.normals.is_some() {
            return Err(Error::OutOfRange {
                field: "targets".into(),
                value: "densities given".into(),
                allowed: "only positions or generate".into(),
            });
        }
        let (total, rows, points) = match (&t.generate, &t.positions) {
            (Some(g), None) => {
                let dist = generate_count(g, "targets")?;
                let rows = split_range(g.count, ranks, rank);
                npy::ensure_fits("targets.generate.count", g.count, rows.len(), 24)?;
                (g.count, rows.clone(), generate::positions_slice(&domain, dist, g.seed, rows))
            }
            (None, Some(p)) => {
                let input = Input::open(path, p, "targets.positions", 3)?;
                let rows = split_range(input.rows(), ranks, rank);
                (input.rows(), rows.clone(), input.read3(rows)?)
            }
            _ => {
                return Err(Error::Missing {
                    field: "targets.positions".into(),
                    reason: "[targets] needs exactly one of positions or generate".into(),
                })
            }
        };
        prob.targets_total = Some(total);
        prob.target_rows = rows;
        prob.targets = Some(points);
    }
    Ok(prob)
}

/// The farthest a coordinate may lie from the box, in box lengths, for `wrap = true` (2^42).
const WRAP_LIMIT: f64 = 4_398_046_511_104.0;

/// Readies this rank's rows for the solver, in f64 as read: with `wrap = true` maps the
/// coordinates into `[0, L)` along periodic axes (in f64, before any narrowing to f32, so that
/// a particle many box lengths away keeps its place in the box to `1e-16 |x|`), then checks
/// the positions against the box and the strengths (present, finite, as many as the positions).
/// Values beyond f32's range need no check: the run computes in units near 1
/// ([`crate::units::Units`]). Local: call [`Comm::agree`] on the result (after
/// [`Problem::globalise`]).
pub fn prepare(prob: &mut Problem) -> Result<()> {
    let domain = prob.domain;
    if prob.wrap {
        // beyond 2^42 box lengths the f64 spacing exceeds 1e-3 L: wrapping cannot place the
        // particle (and beyond 2^53 it cannot even tell where in the box it was)
        let (l, periodic) = (domain.lengths(), domain.periodic());
        let sets = [
            ("sources.positions", Some(&prob.positions), prob.source_rows.start),
            ("targets.positions", prob.targets.as_ref(), prob.target_rows.start),
        ];
        for (field, set, first) in sets {
            for (i, p) in set.into_iter().flatten().enumerate() {
                if let Some(axis) = (0..3).find(|&a| periodic[a] && p[a].is_finite() && p[a].abs() >= WRAP_LIMIT * l[a])
                {
                    return Err(Error::OutOfRange {
                        field: format!("{field}[{}][{axis}]", first + i),
                        value: format!("{:e}", p[axis]),
                        allowed: format!(
                            "|x| < 2^42 L = {:e} with wrap = true: the point is too far from the box for \
                             f64 to place it inside",
                            WRAP_LIMIT * l[axis]
                        ),
                    });
                }
            }
        }
    }
    let place = |field: &str, p: &mut [[f64; 3]], wrap: bool| {
        if wrap {
            validate::wrap_positions(field, p, &domain)
        } else {
            validate::check_positions(field, p, &domain)
        }
    };
    place("sources.positions", &mut prob.positions, prob.wrap)?;
    if let Some(t) = prob.targets.as_mut() {
        place("targets.positions", t, prob.wrap)?;
    }
    prob.sources().check_densities(prob.kernel)?;
    Ok(())
}

/// Removes the mean over all ranks from generated charges and forces (zero net charge and force
/// over the whole set). Collective; does nothing for read inputs.
pub fn neutralise(comm: &Comm, prob: &mut Problem) {
    if !prob.generated {
        return;
    }
    let mut sums = [0.0f64; 4];
    if let Some(q) = &prob.charges {
        sums[0] = q.iter().sum();
    }
    if let Some(f) = &prob.forces {
        for v in f {
            (0..3).for_each(|d| sums[1 + d] += v[d]);
        }
    }
    comm.all_reduce(&mut sums, ReduceOp::Sum);
    let n = prob.sources_total.max(1) as f64;
    if let Some(q) = prob.charges.as_mut() {
        q.iter_mut().for_each(|v| *v -= sums[0] / n);
    }
    if let Some(f) = prob.forces.as_mut() {
        f.iter_mut().for_each(|v| (0..3).for_each(|d| v[d] -= sums[1 + d] / n));
    }
}
