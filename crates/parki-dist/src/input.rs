//! This rank's share of a run.toml's particles: rows `split_range(N, R, rank)` of every input
//! array, read from the `.npy` files (only those bytes) or generated ([`parki_reference::generate`]'s
//! counter-based streams), so that R ranks together hold exactly the set one process reads.

use std::ops::Range;
use std::path::Path;

use parki_comm::{Comm, ReduceOp};
use parki_core::{Domain, Error, Kernel, Result};
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
}

impl Problem {
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
            Error::OutsideBox { field, index, axis, value, length } => {
                Error::OutsideBox { index: index + shift(&field), field, axis, value, length }
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

/// Reads or generates rank `rank`'s share (of `ranks`) of the problem of a run.toml at `path`.
/// Touches no other rank: call [`Comm::agree`] on the result, then [`neutralise`].
pub fn load_problem(cfg: &RunConfig, path: &Path, rank: usize, ranks: usize) -> Result<Problem> {
    let kernel = Kernel::from_name(&cfg.problem.kernel)?;
    let domain = Domain::new(cfg.problem.box_lengths, cfg.problem.periodic)?;
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
            let dist = generate_count(g, "sources")?;
            let rows = split_range(g.count, ranks, rank);
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
            let q = open(&s.charges, "sources.charges", 1)?;
            let f = open(&s.forces, "sources.forces", 3)?;
            let d = open(&s.dipoles, "sources.dipoles", 3)?;
            let n = open(&s.normals, "sources.normals", 3)?;
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
