//! The computational box and its boundary conditions.

use crate::error::{Error, Result};

/// The box `[0,L1) x [0,L2) x [0,L3)` and which of its axes are periodic.
///
/// All sources and targets lie in the box. Along a periodic axis `d` the sum runs over the images
/// `y + n L_d e_d`, `n` in Z; along a free axis there are no images.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Domain {
    lengths: [f64; 3],
    periodic: [bool; 3],
}

impl Domain {
    /// A box with the given side lengths and periodic axes.
    ///
    /// Errors when a side is not a positive finite number.
    pub fn new(lengths: [f64; 3], periodic: [bool; 3]) -> Result<Self> {
        for (axis, &l) in lengths.iter().enumerate() {
            if !(l.is_finite() && l > 0.0) {
                return Err(Error::OutOfRange {
                    field: format!("problem.box[{axis}]"),
                    value: format!("{l}"),
                    allowed: "a positive finite length".into(),
                });
            }
        }
        Ok(Self { lengths, periodic })
    }

    /// A triply periodic box.
    pub fn triply_periodic(lengths: [f64; 3]) -> Result<Self> {
        Self::new(lengths, [true; 3])
    }

    /// Side lengths `[L1, L2, L3]`.
    pub fn lengths(&self) -> [f64; 3] {
        self.lengths
    }

    /// Which axes are periodic.
    pub fn periodic(&self) -> [bool; 3] {
        self.periodic
    }

    /// Number of periodic axes (0 to 3).
    pub fn periodicity(&self) -> usize {
        self.periodic.iter().filter(|&&p| p).count()
    }

    /// Volume `L1 L2 L3`.
    pub fn volume(&self) -> f64 {
        self.lengths.iter().product()
    }

    /// Shortest side.
    pub fn min_length(&self) -> f64 {
        self.lengths.iter().cloned().fold(f64::INFINITY, f64::min)
    }
}
