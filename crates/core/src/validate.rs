//! Input checks shared by the library and the application. Each scans its array in chunks on
//! the current rayon pool and reports the first offending entry, as a serial scan would.

use rayon::prelude::{IntoParallelIterator, ParallelIterator};

use crate::domain::Domain;
use crate::error::{Error, Result};
use crate::real::Real;

/// The smallest `i < n` with `bad(i)`, chunks of `i` scanned in parallel.
fn first_bad(n: usize, bad: impl Fn(usize) -> bool + Sync) -> Option<usize> {
    const CHUNK: usize = 1 << 15;
    (0..n.div_ceil(CHUNK)).into_par_iter().find_map_first(|c| (c * CHUNK..((c + 1) * CHUNK).min(n)).find(|&i| bad(i)))
}

/// Checks that every scalar is finite.
pub fn check_finite_scalars<T: Real>(field: &str, values: &[T]) -> Result<()> {
    match first_bad(values.len(), |i| !values[i].is_finite()) {
        None => Ok(()),
        Some(index) => {
            Err(Error::NonFinite { field: field.into(), index, component: 0, value: values[index].to_f64() })
        }
    }
}

/// The first non-finite component of `v`, with its value.
fn non_finite<T: Real>(v: &[T; 3]) -> Option<(usize, T)> {
    v.iter().position(|c| !c.is_finite()).map(|c| (c, v[c]))
}

/// Checks that every component of every vector is finite.
pub fn check_finite_vectors<T: Real>(field: &str, values: &[[T; 3]]) -> Result<()> {
    match first_bad(values.len(), |i| non_finite(&values[i]).is_some()) {
        None => Ok(()),
        Some(index) => {
            let (component, value) = non_finite(&values[index]).unwrap_or((0, T::ZERO));
            Err(Error::NonFinite { field: field.into(), index, component, value: value.to_f64() })
        }
    }
}

/// Checks that every position is finite and inside the box `[0, L)` on every axis; the first
/// offending position is reported (non-finite before outside).
pub fn check_positions<T: Real>(field: &str, positions: &[[T; 3]], domain: &Domain) -> Result<()> {
    let lengths = domain.lengths();
    let l = lengths.map(T::from_f64);
    // `x < l` in the working precision: an f32 coordinate that rounds to L is outside.
    let outside = |p: &[T; 3]| (0..3).find(|&a| !(p[a] >= T::ZERO && p[a] < l[a]));
    match first_bad(positions.len(), |i| outside(&positions[i]).is_some()) {
        None => Ok(()),
        Some(index) => {
            let p = &positions[index];
            if let Some((component, value)) = non_finite(p) {
                return Err(Error::NonFinite { field: field.into(), index, component, value: value.to_f64() });
            }
            let axis = outside(p).unwrap_or(0);
            Err(Error::OutsideBox {
                field: field.into(),
                index,
                axis,
                value: p[axis].to_f64(),
                length: lengths[axis],
                periodic: domain.periodic()[axis],
            })
        }
    }
}

/// Maps a coordinate into `[0, L)` along a periodic axis.
///
/// `x - floor(x/L) L` can round to exactly `L` for tiny negative `x`; that case maps to 0.
#[inline]
pub fn wrap_coordinate<T: Real>(x: T, l: T) -> T {
    let w = x - (x / l).floor() * l;
    if w >= l || w < T::ZERO {
        T::ZERO
    } else {
        w
    }
}

/// Wraps positions into the box along periodic axes (in place); free axes are left alone and
/// checked afterwards by [`check_positions`].
pub fn wrap_positions<T: Real>(field: &str, positions: &mut [[T; 3]], domain: &Domain) -> Result<()> {
    check_finite_vectors(field, positions)?;
    let lengths = domain.lengths();
    let periodic = domain.periodic();
    for p in positions.iter_mut() {
        for axis in 0..3 {
            if periodic[axis] {
                p[axis] = wrap_coordinate(p[axis], T::from_f64(lengths[axis]));
            }
        }
    }
    check_positions(field, positions, domain)
}

/// Converts an `f64` coordinate of a box of side `l` to `T`. A coordinate inside `[0, l)` stays
/// inside: where rounding to `T` would give `l` (an f64 just below `l` read as f32), the result is
/// the largest `T` below `l`. Coordinates outside are converted as they are (and rejected later).
#[inline]
pub fn narrow_coordinate<T: Real>(x: f64, l: f64) -> T {
    let v = T::from_f64(x);
    let lt = T::from_f64(l);
    if x >= 0.0 && x < l && v >= lt {
        lt.next_down()
    } else {
        v
    }
}

/// Converts `f64` positions to `T` with [`narrow_coordinate`] on every axis.
pub fn narrow_positions<T: Real>(positions: &[[f64; 3]], domain: &Domain) -> Vec<[T; 3]> {
    let l = domain.lengths();
    positions.iter().map(|p| [0, 1, 2].map(|d| narrow_coordinate::<T>(p[d], l[d]))).collect()
}

/// Checks a relative tolerance against the supported range of the precision.
pub fn check_tolerance<T: Real>(tolerance: f64) -> Result<()> {
    let lo = T::MIN_TOLERANCE;
    let hi = 1e-2;
    if tolerance.is_finite() && tolerance >= lo * (1.0 - 1e-12) && tolerance <= hi {
        Ok(())
    } else {
        Err(Error::OutOfRange {
            field: "problem.tolerance".into(),
            value: format!("{tolerance:e}"),
            allowed: format!("[{lo:e}, {hi:e}] for precision \"{}\"", T::NAME),
        })
    }
}
