//! The typed error of parki-dist. Every variant names the offending field and value, so that
//! the message a user reads says what to fix.

use std::fmt;
use std::path::PathBuf;

/// Result with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// What went wrong, with the field and the value.
///
/// New kinds of failure are added as new variants, so matches outside this crate need a
/// wildcard arm (`#[non_exhaustive]`).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Error {
    /// A coordinate or strength is NaN or infinite.
    NonFinite {
        /// Field, e.g. `sources.positions`.
        field: String,
        /// Particle index (0-based, input order).
        index: usize,
        /// Component (0 for scalars).
        component: usize,
        /// The value.
        value: f64,
    },
    /// A particle lies outside the box `[0, L)` along an axis.
    OutsideBox {
        /// Field, e.g. `targets.positions`.
        field: String,
        /// Particle index (0-based, input order).
        index: usize,
        /// Axis (0, 1, 2).
        axis: usize,
        /// The coordinate.
        value: f64,
        /// The side length along that axis.
        length: f64,
        /// Whether the axis is periodic (`wrap = true` could place the particle) or free.
        periodic: bool,
    },
    /// Two arrays that must have the same number of rows do not.
    LengthMismatch {
        /// The array with the wrong length.
        field: String,
        /// Its length.
        found: usize,
        /// The array it must match.
        reference: String,
        /// The expected length.
        expected: usize,
    },
    /// An array has the wrong shape or element type.
    Shape {
        /// Field or file.
        field: String,
        /// What was expected, e.g. `(N, 3) float64`.
        expected: String,
        /// What was found.
        found: String,
    },
    /// A parameter is outside its supported range.
    OutOfRange {
        /// Field, e.g. `problem.tolerance`.
        field: String,
        /// The value as given.
        value: String,
        /// The allowed range, in words.
        allowed: String,
    },
    /// A required input is absent.
    Missing {
        /// Field, e.g. `sources.forces`.
        field: String,
        /// Why it is required.
        reason: String,
    },
    /// A file could not be read or written.
    Io {
        /// The path.
        path: PathBuf,
        /// The operating system's message.
        message: String,
    },
    /// A configuration file could not be parsed.
    Config {
        /// The path.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A combination the code does not support (yet); the message says which.
    Unsupported {
        /// What was asked for.
        what: String,
    },
    /// The problem does not fit the machine (memory for the grid, say).
    Resource {
        /// What does not fit, with numbers.
        message: String,
    },
    /// Another rank of the job failed; every rank stops with its message.
    Remote {
        /// The rank that failed first.
        rank: usize,
        /// Its message.
        message: String,
    },
}

/// A number as it reads best in a message: plainly from `1e-4` to `1e7` (and 0), in scientific
/// notation beyond (a coordinate of a box of `1e-90` is `9.8e-91`, not 90 zeros and its digits).
struct Number(f64);

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = self.0.abs();
        if a == 0.0 || !a.is_finite() || (1e-4..1e7).contains(&a) {
            write!(f, "{}", self.0)
        } else {
            write!(f, "{:e}", self.0)
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NonFinite { field, index, component, value } => {
                write!(f, "{field}[{index}][{component}] = {value}: values must be finite (no NaN or inf)")
            }
            Error::OutsideBox { field, index, axis, value, length, periodic } => write!(
                f,
                "{field}[{index}] lies outside the box: coordinate {axis} is {}, allowed is [0, {}) ({})",
                Number(*value),
                Number(*length),
                if *periodic {
                    "set `wrap = true` in [problem] to map periodic coordinates into the box"
                } else {
                    "the axis is free: problem.box must hold every source and target along it"
                }
            ),
            Error::LengthMismatch { field, found, reference, expected } => {
                write!(f, "{field} has {found} rows but {reference} has {expected}: they must match")
            }
            Error::Shape { field, expected, found } => {
                write!(f, "{field}: expected {expected}, found {found}")
            }
            Error::OutOfRange { field, value, allowed } => {
                write!(f, "{field} = {value} is out of range: allowed is {allowed}")
            }
            Error::Missing { field, reason } => write!(f, "{field} is missing: {reason}"),
            Error::Io { path, message } => write!(f, "{}: {message}", path.display()),
            Error::Config { path, message } => {
                write!(f, "{}: invalid configuration: {message}", path.display())
            }
            Error::Unsupported { what } => write!(f, "unsupported: {what}"),
            Error::Resource { message } => write!(f, "insufficient resources: {message}"),
            Error::Remote { rank, message } => write!(f, "rank {rank}: {message}"),
        }
    }
}

impl std::error::Error for Error {}
